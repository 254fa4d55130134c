#!/bin/sh
# venv.sh [--torch] [--bench] - create or update the Python tooling venv.
#
# The venv lives in $VENV (default: .venv at the top of the checkout) and is made
# with $PYTHON (default: python3). Versions are pinned so fixtures and benchmarks
# are reproducible.
#   (no flag)  what CI's tests need: pytest, requests, openai, numpy, gguf, jsonschema (pure
#              Python: tests/e2e/test_gguf.py writes GGUF with tools/to_gguf.py).
#   --torch    also torch (CPU), transformers, tokenizers, safetensors, gguf:
#              what tools/make_fixtures.py needs. torch comes from the CPU wheel in
#              $TORCH_WHEEL (default /opt/wheels/torch-2.13.0+cpu-cp311-cp311-
#              manylinux_2_28_x86_64.whl); without that file it fails (the default PyPI
#              torch pulls CUDA).
#   --bench    numpy, safetensors, gguf and llama-cpp-python (built from source
#              with CMAKE_ARGS=-DGGML_NATIVE=ON unless CMAKE_ARGS is set; this
#              takes several minutes on 2 cores; or from the wheel $LLAMA_WHEEL
#              when that file exists): what tools/bench.sh needs.
# Prints the venv's python path on the last line of stdout.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-$here/.venv}
PYTHON=${PYTHON:-python3}
TORCH_WHEEL=${TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}

want_torch=0
want_bench=0
for a in "$@"; do
  case $a in
    --torch) want_torch=1 ;;
    --bench) want_bench=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "venv.sh: unknown option $a" >&2; exit 2 ;;
  esac
done

BASE="pytest==9.2.0 requests==2.34.2 openai==3.57.0 numpy==2.4.6 gguf==0.19.0 jsonschema==4.26.0"
TORCH_PKGS="transformers==5.24.0 tokenizers==0.23.3 safetensors==0.8.0 gguf==0.19.0 accelerate==1.16.0"
BENCH_PKGS="safetensors==0.8.0 gguf==0.19.0"
LLAMA_PKG="llama-cpp-python==0.3.36"

if [ ! -x "$VENV/bin/python" ]; then
  echo "venv.sh: creating $VENV" >&2
  "$PYTHON" -m venv "$VENV" || { echo "venv.sh: '$PYTHON -m venv' failed (apt-get install python3-venv)" >&2; exit 1; }
fi
py=$VENV/bin/python
pip="$py -m pip --disable-pip-version-check"

installed() { # installed NAME VERSION -> 0 if exactly that version is present
  v=$($py -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null) || return 1
  [ -z "${2:-}" ] || [ "$v" = "$2" ] || [ "${v%%+*}" = "$2" ]
}

need() { # need "name==ver ..." -> the subset not yet installed at that version
  out=
  for spec in $1; do
    installed "${spec%%==*}" "${spec#*==}" || out="$out $spec"
  done
  echo "$out"
}

todo=$(need "$BASE")
[ -z "$todo" ] || $pip install -q $todo

if [ $want_torch = 1 ]; then
  if ! installed torch 2.13.0; then
    if [ -f "$TORCH_WHEEL" ]; then
      $pip install -q "$TORCH_WHEEL"
    else
      # The PyTorch CPU index is not reachable from every machine; PyPI's default
      # torch wheel for Linux pulls CUDA (GBs). Say so instead of guessing.
      echo "venv.sh: torch 2.13.0 CPU wheel not found at $TORCH_WHEEL;" >&2
      echo "  set TORCH_WHEEL=/path/to/torch-2.13.0+cpu-*.whl, or install it into $VENV yourself" >&2
      exit 1
    fi
  fi
  todo=$(need "$TORCH_PKGS")
  [ -z "$todo" ] || $pip install -q $todo
fi

if [ $want_bench = 1 ]; then
  todo=$(need "$BENCH_PKGS")
  [ -z "$todo" ] || $pip install -q $todo
  if ! installed llama-cpp-python && [ -n "${LLAMA_WHEEL:-}" ] && [ -f "$LLAMA_WHEEL" ]; then
    $pip install -q "$LLAMA_WHEEL"
  fi
  if ! installed llama-cpp-python; then
    echo "venv.sh: building llama-cpp-python from source (several minutes)" >&2
    CMAKE_ARGS=${CMAKE_ARGS:--DGGML_NATIVE=ON} $pip install "$LLAMA_PKG"
  fi
  # llama.cpp's server (tools/bench_concurrency.py --llama-gguf): only the
  # server extras (fastapi, uvicorn, ...); the built package is reused.
  if ! "$py" -c 'import llama_cpp.server.app, uvicorn' >/dev/null 2>&1; then
    $pip install -q "llama-cpp-python[server]==0.3.36"
  fi
fi

echo "$py"
