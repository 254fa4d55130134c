#!/bin/sh
# arm64_check.sh - cross-build C test programs for arm64 and run them under
# qemu-user, to prove the NEON kernels (and anything else portable) on an
# x86-64 host. Needs gcc-aarch64-linux-gnu and qemu-user (Debian packages).
#
# Usage: tools/arm64_check.sh [tests/<group>/test_x.c ...]
#   default: tests/kernels/test_kernels.c, test_quant.c, test_kquant.c, test_qdot.c, test_qdot_kquant.c, test_qrepack.c,
#   test_cpu.c and
#   tests/unit/test_pool.c; then test_qdot and test_qdot_kquant again built
#   with the dot-product extension.
# Each test is linked statically with src/base, src/kernels (and its op-family
# folders) and src/runtime
# (no external libraries), plus any extra sources in $ARM64_EXTRA_SRC.
# Exit status: non-zero if any build or test fails. Prints each test's
# "N passed, N failed" line.
set -eu
cd "$(dirname "$0")/.."
CC=${ARM64_CC:-aarch64-linux-gnu-gcc}
QEMU=${ARM64_QEMU:-qemu-aarch64}
OUT=${ARM64_BUILD:-build-arm64}
command -v "$CC" >/dev/null 2>&1 || { echo "arm64_check: $CC not found (apt-get install gcc-aarch64-linux-gnu)" >&2; exit 2; }
command -v "$QEMU" >/dev/null 2>&1 || { echo "arm64_check: $QEMU not found (apt-get install qemu-user)" >&2; exit 2; }
mkdir -p "$OUT"
if [ $# -eq 0 ]; then set -- tests/kernels/test_kernels.c tests/kernels/test_quant.c tests/kernels/test_kquant.c \
    tests/kernels/test_qdot.c tests/kernels/test_qdot_kquant.c tests/kernels/test_qrepack.c tests/kernels/test_cpu.c \
    tests/unit/test_pool.c; fi
CFLAGS="-std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter -O2 -g -Isrc -Itests -static"
LIBSRC="$(ls src/base/*.c src/kernels/*.c src/kernels/*/*.c src/runtime/*.c) ${ARM64_EXTRA_SRC:-}"
fail=0
for t in "$@"; do
    name=$(basename "$t" .c)
    echo "== arm64: $t"
    # shellcheck disable=SC2086
    if ! $CC $CFLAGS -o "$OUT/$name" "$t" $LIBSRC -lm -pthread; then
        echo "arm64_check: build of $t failed" >&2
        fail=1
        continue
    fi
    if ! "$QEMU" "$OUT/$name"; then
        echo "arm64_check: $t failed under $QEMU" >&2
        fail=1
    fi
done

# The integer kernels once more with the dot-product extension (vdotq_s32,
# what Apple silicon and most arm64 servers run; qemu's default CPU has it).
for t in tests/kernels/test_qdot.c tests/kernels/test_qdot_kquant.c; do
    name=$(basename "$t" .c)_dotprod
    echo "== arm64 +dotprod: $t"
    # shellcheck disable=SC2086
    if ! $CC $CFLAGS -march=armv8.2-a+dotprod -o "$OUT/$name" "$t" $LIBSRC -lm -pthread; then
        echo "arm64_check: build of $t with +dotprod failed" >&2
        fail=1
    elif ! "$QEMU" "$OUT/$name"; then
        echo "arm64_check: $t (+dotprod) failed under $QEMU" >&2
        fail=1
    fi
done

# The fidelity test (model loader + forward pass against the transformers
# fixtures) needs cJSON for arm64, and, since gen_run can be constrained by a
# grammar whose vocabulary comes from the tokenizer, PCRE2 and utf8proc too:
# Debian multiarch libcjson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64
# (.ci/run installs them). Linked dynamically (Debian ships no static cJSON);
# run on the NEON level only and on the short cases, as qemu is ~50x slower,
# with one thread: with two, this dynamically linked binary stalls inside
# the dynamic loader under qemu-user 7.2 (gdb shows a single guest thread in
# ld-linux, before our pool starts work); the statically linked test_pool
# runs its threads fine under qemu.
if [ -e /usr/lib/aarch64-linux-gnu/libcjson.so ] && [ -e /usr/lib/aarch64-linux-gnu/libpcre2-8.so ] &&
   [ -e /usr/lib/aarch64-linux-gnu/libutf8proc.so ]; then
    echo "== arm64: tests/fidelity/test_fidelity.c (neon level, cases <= 64 tokens)"
    # shellcheck disable=SC2086
    if ! $CC $(echo "$CFLAGS" | sed 's/ -static//') -I/usr/include/cjson -o "$OUT/test_fidelity" \
            tests/fidelity/test_fidelity.c $LIBSRC src/format/*.c src/model/*.c src/infer/*.c src/sample/*.c \
            src/engine/generate.c src/engine/draft.c src/grammar/*.c src/tokenizer/*.c \
            -L/usr/lib/aarch64-linux-gnu -lcjson -lpcre2-8 -lutf8proc -lm -pthread; then
        echo "arm64_check: build of test_fidelity failed" >&2
        fail=1
    elif ! QEMU_LD_PREFIX=/usr/aarch64-linux-gnu QWENC_FIDELITY_LEVELS=neon QWENC_FIDELITY_MAX_TOKENS=64 QWENC_FIDELITY_THREADS=1 \
            "$QEMU" -E LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu "$OUT/test_fidelity"; then
        echo "arm64_check: test_fidelity failed under $QEMU" >&2
        fail=1
    fi
else
    echo "arm64_check: no arm64 cJSON/PCRE2/utf8proc (dpkg --add-architecture arm64; apt-get install libcjson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64): fidelity test not run" >&2
fi
exit $fail
