#!/usr/bin/env bash
# llama-tools.sh - llama.cpp's own llama-bench and llama-server, the peers that
# `make bench` and `./benchmark.sh --compare-llamacpp` measure qwenc against.
# Prints the folder that holds them (one line on stdout; messages on stderr).
#
#   tools/llama-tools.sh [--no-build] [--need NAME]...
#
# Where from: the llama.cpp source that the llama-cpp-python sdist on PyPI
# carries (vendor/llama.cpp; pinned: LLAMA_CPP_PYTHON_VERSION, default
# 0.3.36), built once with cmake -DGGML_NATIVE=ON (tuned for this CPU, as a
# user's own build is) into a cache folder, ~15 minutes on 2 cores.
#
#   LLAMA_BIN=DIR     use the tools in DIR (nothing is downloaded or built)
#   LLAMA_CACHE=DIR   cache folder (default ~/.cache/qwenc-llama): src/, build/
#   --no-build        only look (LLAMA_BIN, then the cache); exit 1 if absent
#   --need NAME       the tools that must be there (default: llama-bench
#                     llama-server); only the missing ones are built
#
# Exit status 1 with a message when the tools cannot be had (no PyPI, no
# cmake or compiler); callers skip the comparison then, they do not fail.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${LLAMA_CACHE:-$HOME/.cache/qwenc-llama}
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
build=$cache/build
no_build=0
need=()
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) no_build=1 ;;
    --need) need+=("${2:?--need needs a tool name}"); shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "llama-tools.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
[ ${#need[@]} -gt 0 ] || need=(llama-bench llama-server)

say() { echo "llama-tools.sh: $*" >&2; }
missing_in() { # DIR -> the needed tools not in DIR
  local t out=()
  for t in "${need[@]}"; do [ -x "$1/$t" ] || out+=("$t"); done
  echo "${out[@]+"${out[@]}"}"
}

if [ -n "${LLAMA_BIN:-}" ]; then
  miss=$(missing_in "$LLAMA_BIN")
  [ -z "$miss" ] || { say "LLAMA_BIN=$LLAMA_BIN has no $miss"; exit 1; }
  echo "$LLAMA_BIN"
  exit 0
fi
miss=$(missing_in "$build/bin")
if [ -z "$miss" ]; then echo "$build/bin"; exit 0; fi
if [ "$no_build" = 1 ]; then
  say "no $miss in $build/bin (run tools/llama-tools.sh to build it, or set LLAMA_BIN)"
  exit 1
fi

for tool in cmake c++; do
  command -v "$tool" >/dev/null || { say "$tool is needed to build llama.cpp (apt-get install cmake g++)"; exit 1; }
done
mkdir -p "$cache/src"
# One build at a time per cache (a second caller waits, then finds the tools).
exec 9>"$cache/.lock"
if command -v flock >/dev/null; then flock 9; fi
miss=$(missing_in "$build/bin")
if [ -z "$miss" ]; then echo "$build/bin"; exit 0; fi

src=$cache/src/llama_cpp_python-$version
if [ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]; then
  py=python3
  [ -x "$root/.venv/bin/python" ] && "$root/.venv/bin/python" -m pip --version >/dev/null 2>&1 && py=$root/.venv/bin/python
  say "downloading the llama-cpp-python $version sdist (llama.cpp source) from PyPI"
  if ! "$py" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
      "llama-cpp-python==$version" -d "$cache/src" >&2; then
    say "cannot download llama-cpp-python==$version (no PyPI?)"
    exit 1
  fi
  tar xzf "$cache/src/llama_cpp_python-$version.tar.gz" -C "$cache/src"
fi
say "building ${miss} from $src/vendor/llama.cpp into $build (once; ~15 minutes on 2 cores)"
cmake -S "$src/vendor/llama.cpp" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $miss >&2
miss=$(missing_in "$build/bin")
[ -z "$miss" ] || { say "the build did not produce $miss"; exit 1; }
echo "$build/bin"
