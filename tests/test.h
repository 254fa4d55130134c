/* test.h - a tiny test harness: CHECK() records, test_summary() prints
 * "N passed, N failed" (the line tests/run.sh and CI read) and returns the
 * exit status. Every test program ends with `return test_summary();`. */
#ifndef QW_TEST_H
#define QW_TEST_H

#include <stdio.h>

static int test_passed_, test_failed_;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (cond) {                                                       \
            test_passed_++;                                               \
        } else {                                                          \
            test_failed_++;                                               \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

static inline int test_summary(void) {
    printf("%d passed, %d failed\n", test_passed_, test_failed_);
    return test_failed_ ? 1 : 0;
}

#endif
