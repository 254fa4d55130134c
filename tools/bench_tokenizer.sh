#!/usr/bin/env bash
# bench_tokenizer.sh - single-thread encode MB/s: qwenc's tokenizer vs the
# Hugging Face `tokenizers` library on the same corpora in the same run: a
# ~10 MB mix of the conformance corpus (every script, long words, byte soup)
# and ~10 MB of plain English prose and code.
#
#   PYTHON=/path/to/python tools/bench_tokenizer.sh [MB]
# PYTHON must have `tokenizers` (default: .venv/bin/python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MB=${1:-10}
PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
make -s "$BUILD/libqwenc.a"
tests/fixtures/tokenizer/prepare.sh "$BUILD/fixtures/tokenizer" >/dev/null
DIR="$BUILD/fixtures/tokenizer/qwen2.5"
CFLAGS_PKG=$(pkg-config --cflags libcjson libpcre2-8 libutf8proc)
LIBS_PKG=$(pkg-config --libs libcjson libpcre2-8 libutf8proc libmicrohttpd libcurl libedit)
mkdir -p "$BUILD/bench"
cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Isrc $CFLAGS_PKG -o "$BUILD/bench/bench_tokenizer" \
  tools/bench_tokenizer.c "$BUILD/libqwenc.a" $LIBS_PKG -lm -pthread
for kind in mixed prose; do
  CORPUS="$BUILD/bench/tok_corpus_${kind}_${MB}mb.txt"
  [ -f "$CORPUS" ] || "$PYTHON" tools/bench_tokenizer.py make "$CORPUS" "$MB" "$kind" >/dev/null
  echo "== $kind corpus ($MB MB); single thread, one encode call per document:"
  "$BUILD/bench/bench_tokenizer" "$DIR" "$CORPUS"
  RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false "$PYTHON" tools/bench_tokenizer.py run "$DIR" "$CORPUS"
done
