#!/usr/bin/env bash
# Checks that the C++ lines changed since a base commit are formatted as .clang-format says; lines nobody
# has touched since then are not checked, so the tree needs no wholesale reformatting. Passes (exit 0) when
# every changed line is formatted; fails (exit 1) naming each file and showing clang-format's diff of the
# lines it would change; exit 2 when it cannot run. scripts/test.sh runs it before the build.
#
#   scripts/format-check.sh [BASE]
#
# What is compared: the working tree (committed and uncommitted changes to tracked files; untracked files
# are not seen) against BASE, through `git clang-format --diff BASE`, on files ending in .c, .cc, .cpp,
# .cxx, .h, .hh, .hpp, .hxx, .cu or .cuh. A new or renamed file counts as changed in every line.
#
# The base: BASE if given (a commit, branch or tag); otherwise the commit that added .clang-format, found
# by its path in the history (`git log --diff-filter=A`), not a recorded hash, so that it survives a rebase.
# Every change made since the style was adopted is checked, however many commits it spans, and nothing
# older. This needs the history back to that commit: CI's fresh clone of main has all of it; in a shallow
# clone that lacks it, pass a BASE that is there (for a pull request, its merge base with main).
#
# To fix a failure: `git clang-format BASE` rewrites exactly the lines this script checks, in the working
# tree (it leaves files with unstaged changes alone: stage them first), or apply the diff shown.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! git_error=$(git rev-parse --is-inside-work-tree 2>&1 >/dev/null); then
  echo "format-check: skipped, no git history to compare against here: $git_error"
  exit 0
fi
command -v clang-format >/dev/null && git clang-format -h >/dev/null 2>&1 || {
  echo "format-check: clang-format (with git clang-format) is not installed; scripts/install-deps.sh installs it" >&2
  exit 2
}

base="${1:-}"
if [ -z "$base" ]; then
  base=$(git log --diff-filter=A --format=%H -- .clang-format | tail -n 1)
  if [ -z "$base" ]; then
    echo "format-check: no commit in this history adds .clang-format (a shallow clone?); give a base commit" >&2
    exit 2
  fi
  if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    echo "format-check: note: a shallow clone; the oldest commit here with .clang-format may be later than the one that added it"
  fi
fi
if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  echo "format-check: '$base' is not a commit in this repository" >&2
  exit 2
fi
subject=$(git log -1 --format=%s "$base^{commit}")
base_name="$(git rev-parse --short "$base^{commit}") \"${subject:0:50}\""

extensions=c,cc,cpp,cxx,h,hh,hpp,hxx,cu,cuh
status=0
diff=$(git clang-format --diff --extensions "$extensions" "$base" -- 2>&1) || status=$?
# clang-format 14's git clang-format exits 0 whether or not it found lines to change (later versions exit 1
# when they do), so the diff it prints is what tells.
if grep -q '^diff --git' <<<"$diff"; then
  echo "format-check: FAILED: changed C++ lines differ from .clang-format's style (base $base_name)."
  echo "format-check: files:"
  sed -n 's|^diff --git a/\(.*\) b/.*|  \1|p' <<<"$diff"
  echo "format-check: what clang-format would make of them:"
  printf '%s\n' "$diff"
  echo "format-check: to fix, run: git clang-format $(git rev-parse --short "$base^{commit}")   (it formats only these lines)"
  exit 1
elif [ "$status" -ne 0 ]; then
  printf '%s\n' "$diff" >&2
  echo "format-check: git clang-format failed (exit $status)" >&2
  exit 2
fi
echo "format-check: the C++ lines changed since $base_name are formatted as .clang-format says"
