#!/usr/bin/env bash
# bench_grammar.sh [MODEL] [REPS] - time one token mask (grammar.h) over a
# real vocabulary: tools/bench_grammar.c. MODEL defaults to the real 0.5B
# GGUF file (tools/real-model.sh --path 0.5b), else the Qwen2.5 tokenizer
# fixture (same 151,643 + added tokens). A short run (seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${1:-}
REPS=${2:-30}
if [ -z "$MODEL" ]; then
  MODEL=$(tools/real-model.sh --path 0.5b 2>/dev/null || true)
  if [ -z "$MODEL" ] || [ ! -f "$MODEL" ]; then
    tests/fixtures/tokenizer/prepare.sh "$BUILD/fixtures/tokenizer" >/dev/null
    MODEL="$BUILD/fixtures/tokenizer/qwen2.5"
  fi
fi
make -s "$BUILD/libqwenc.a"
CFLAGS_PKG=$(pkg-config --cflags libcjson libpcre2-8 libutf8proc)
LIBS_PKG=$(pkg-config --libs libcjson libpcre2-8 libutf8proc libmicrohttpd libcurl libedit)
mkdir -p "$BUILD/bench"
cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Isrc $CFLAGS_PKG -o "$BUILD/bench/bench_grammar" \
  tools/bench_grammar.c "$BUILD/libqwenc.a" $LIBS_PKG -lm -pthread
echo "== token mask over $MODEL ($REPS runs per state)"
"$BUILD/bench/bench_grammar" "$MODEL" "$REPS"
