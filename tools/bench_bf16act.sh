#!/bin/sh
# bench_bf16act.sh - build tools/bench_bf16act.c against build/libqwenc.a and run it.
#   tools/bench_bf16act.sh [-n TOKENS] [-r REPS] [-i ISA] [-s gate|down|lm_head]
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
make -s "$BUILD/libqwenc.a"
mkdir -p "$BUILD/bench"
cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Isrc -o "$BUILD/bench/bench_bf16act" tools/bench_bf16act.c \
  "$BUILD/libqwenc.a" -lm -pthread
exec "$BUILD/bench/bench_bf16act" "$@"
