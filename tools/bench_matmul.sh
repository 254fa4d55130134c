#!/bin/sh
# bench_matmul.sh - build tools/bench_matmul.c against build/libqwenc.a and run it.
#   tools/bench_matmul.sh [-n TOKENS] [-t THREADS] [-r REPS] [-d bf16|f16|f32|q8_0] [-i ISA]
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
make -s "$BUILD/libqwenc.a"
mkdir -p "$BUILD/bench"
cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Isrc -o "$BUILD/bench/bench_matmul" tools/bench_matmul.c \
  "$BUILD/libqwenc.a" -lm -pthread
exec "$BUILD/bench/bench_matmul" "$@"
