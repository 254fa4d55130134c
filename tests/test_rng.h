/* test_rng.h - the kernel tests' deterministic inputs: a xorshift64 stream
 * (seeded per test file: #define TEST_RNG_SEED before including) and the
 * path of a committed fixture ($QWENC_FIXTURES or tests/fixtures). */
#ifndef QW_TEST_RNG_H
#define QW_TEST_RNG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t g_rng = TEST_RNG_SEED;

static inline uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* Uniform in [-1, 1). */
static inline float frand(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

/* tests/fixtures/<rel>, or $QWENC_FIXTURES/<rel>; a static buffer. */
static inline const char *test_fixture_path(const char *rel) {
    static char buf[1024];
    const char *dir = getenv("QWENC_FIXTURES");
    snprintf(buf, sizeof buf, "%s/%s", dir && *dir ? dir : "tests/fixtures", rel);
    return buf;
}

#endif
