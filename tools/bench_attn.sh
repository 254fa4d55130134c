#!/bin/sh
# bench_attn.sh - build tools/bench_attn.c against build/libqwenc.a and run it.
#   tools/bench_attn.sh [-n ROWS] [-r ROUNDS]
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
make -s "$BUILD/libqwenc.a"
mkdir -p "$BUILD/bench"
cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Isrc -o "$BUILD/bench/bench_attn" tools/bench_attn.c \
  "$BUILD/libqwenc.a" -lm -pthread
exec "$BUILD/bench/bench_attn" "$@"
