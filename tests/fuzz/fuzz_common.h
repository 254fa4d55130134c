/* fuzz_common.h - shared by the libFuzzer harnesses (make fuzz).
 *
 * Each fuzz_*.c defines LLVMFuzzerTestOneInput and is linked against
 * build-fuzz/libqwenc.a (clang, -fsanitize=fuzzer,address,undefined). A
 * property that must hold on any input is checked with FUZZ_ASSERT, which
 * aborts: libFuzzer then saves the input as a crash. */
#ifndef QW_FUZZ_COMMON_H
#define QW_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "tokenizer/tokenizer.h"

#define FUZZ_ASSERT(c, ...)                                                          \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "fuzz property failed %s:%d: %s: ", __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* The Qwen2.5 tokenizer fixture (tests/fixtures/tokenizer/prepare.sh writes
 * it; make fuzz runs that). QWENC_FUZZ_TOK overrides the folder. */
static inline qw_tok *fuzz_tokenizer(void) {
    const char *dir = getenv("QWENC_FUZZ_TOK");
    if (!dir) dir = "build/fixtures/tokenizer/qwen2.5";
    qw_tok *t = NULL;
    qw_err err;
    if (tok_load(&t, dir, &err) != 0) {
        fprintf(stderr, "fuzz: cannot load the tokenizer (%s); set QWENC_FUZZ_TOK=DIR\n", err.msg);
        exit(2);
    }
    return t;
}

#endif
