#!/bin/sh
# bench_pipes.sh - build tools/bench_pipes.c and run it: the cycles that the
# kernels' instruction mixes take on this CPU (x86-64; see the .c file).
#   tools/bench_pipes.sh
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
mkdir -p "$BUILD/bench"
cc -std=gnu11 -O2 -Wall -Wextra -o "$BUILD/bench/bench_pipes" tools/bench_pipes.c
exec "$BUILD/bench/bench_pipes" "$@"
