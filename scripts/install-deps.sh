#!/usr/bin/env bash
# Installs what trainbench needs on Debian 12 (bookworm): the toolchain, Debian's CPU LibTorch, the
# libraries it reads data with, GoogleTest, and python3-torch (the independent reference for parity tests
# and the peer for speed comparisons). Idempotent: a machine that has everything installs nothing.
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache pkg-config git
  libtorch-dev libgloo-dev python3-torch
  libturbojpeg0-dev libpng-dev libhdf5-dev zlib1g-dev
  libcli11-dev nlohmann-json3-dev
  googletest libgtest-dev
  bible-kjv npm
  openmpi-bin libopenmpi-dev fio
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_if_needed=()
[ "$(id -u)" -eq 0 ] || sudo_if_needed=(sudo)
echo "install-deps: installing ${missing[*]}"
"${sudo_if_needed[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_if_needed[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
