#!/bin/sh
# bench_qdot.sh - build tools/bench_qdot.c against build/libqwenc.a and run it.
#   tools/bench_qdot.sh [-d q5_0|q8_0|q4_0|q4_1|q5_1|q4_k|q5_k|q6_k] [-n TOKENS] [-r REPS] [-i ISA]
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
make -s "$BUILD/libqwenc.a"
mkdir -p "$BUILD/bench"
cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Isrc -o "$BUILD/bench/bench_qdot" tools/bench_qdot.c \
  "$BUILD/libqwenc.a" -lm -pthread
exec "$BUILD/bench/bench_qdot" "$@"
