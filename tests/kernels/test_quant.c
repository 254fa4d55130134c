/* test_quant.c - the Q8_0 block type: quantizer, f16 rounding, and the Q8_0
 * matmul / to_f32 of every level this CPU runs.
 *
 *  - qw_quantize_q8_0 gives byte for byte what the `gguf` package (bit-exact
 *    with GGML's reference quantize_row_q8_0) gives: the fixture
 *    tests/fixtures/quant/q8_0.bin, made by tools/make_quant_fixture.py;
 *  - qw_f32_to_f16 rounds to nearest even: every f16 round-trips, random
 *    floats land on the nearest f16 (ties on the even one);
 *  - matmul[Q8_0] of each level: within the float32 summation bound of the
 *    exact (float64) product with the dequantized weights; every row of an
 *    n-token product (n = 1..17, 200) bitwise equal to n = 1 (batch
 *    invariance); and bitwise equal to the same level's f32 matmul of the
 *    dequantized weights, on every level (a Q8_0 file == its F32 twin);
 *  - to_f32[Q8_0] of each level equals the reference bit for bit.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "test.h"
#define TEST_RNG_SEED 0x2545f4914f6cdd1dull
#include "test_rng.h"


#define fixture_path() test_fixture_path("quant/q8_0.bin")

static void check_fixture(void) {
    FILE *f = fopen(fixture_path(), "rb");
    CHECK(f != NULL, "open %s", fixture_path());
    if (!f) return;
    uint32_t n = 0;
    CHECK(fread(&n, 4, 1, f) == 1 && n % 32 == 0 && n > 0 && n < (1u << 20), "fixture header");
    float *x = malloc(n * sizeof(float));
    size_t nb = n / 32 * qw_type(QW_Q8_0)->bytes;
    uint8_t *want = malloc(nb), *got = malloc(nb);
    CHECK(fread(x, sizeof(float), n, f) == n && fread(want, 1, nb, f) == nb, "fixture body");
    fclose(f);
    qw_quantize_q8_0(got, x, n);
    int bad = 0;
    for (size_t b = 0; b < n / 32; b++)
        if (memcmp(got + b * qw_type(QW_Q8_0)->bytes, want + b * qw_type(QW_Q8_0)->bytes, qw_type(QW_Q8_0)->bytes) != 0 && bad++ < 5)
            fprintf(stderr, "  block %zu differs from gguf's Q8_0\n", b);
    CHECK(bad == 0, "qw_quantize_q8_0 == gguf reference on %u values (%d blocks differ)", n, bad);
    /* dequantized error: |x - d16 q| <= d / 2 + 127 |d - d16| (q rounds x / d, d16 is stored) */
    float *y = malloc(n * sizeof(float));
    kernels_level("ref")->to_f32[QW_Q8_0](y, got, n);
    int far = 0;
    for (uint32_t i = 0; i < n; i += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[i + j]));
        double d = amax / 127.0f, d16 = qw_f16_at(got + i / 32 * qw_type(QW_Q8_0)->bytes);
        for (int j = 0; j < 32; j++)
            if (fabs((double)x[i + j] - y[i + j]) > d / 2 * 1.0001 + 127 * fabs(d - d16) + 1e-30) far++;
    }
    CHECK(far == 0, "Q8_0 round trip within half a step (%d values off)", far);
    free(x);
    free(want);
    free(got);
    free(y);
}

static void check_f16_rounding(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* nan: payload may change */
        if (qw_f32_to_f16(qw_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0, "every f16 value round-trips through f32 (%d bad)", bad);
    bad = 0;
    for (int i = 0; i < 200000; i++) {
        float x = ldexpf(frand(), (int)(rnd() % 44) - 28); /* subnormals .. 2^15 */
        uint16_t r = qw_f32_to_f16(x);
        double v = qw_f16_to_f32(r), e = fabs(v - x);
        uint16_t lo = (uint16_t)(r - 1), hi = (uint16_t)(r + 1);
        double elo = (r & 0x7fff) ? fabs(qw_f16_to_f32(lo) - (double)x) : INFINITY;
        double ehi = (r & 0x7fff) != 0x7bff ? fabs(qw_f16_to_f32(hi) - (double)x) : INFINITY;
        if (e > elo || e > ehi || ((e == elo || e == ehi) && (r & 1))) bad++;
    }
    CHECK(bad == 0, "f32 -> f16 is round to nearest even (%d bad)", bad);
    CHECK(qw_f32_to_f16(1e6f) == 0x7c00 && qw_f32_to_f16(-1e6f) == 0xfc00, "overflow to inf");
    CHECK(qw_f32_to_f16(65519.0f) == 0x7bff && qw_f32_to_f16(65520.0f) == 0x7c00, "rounding to max / inf");
    CHECK(qw_f32_to_f16(1e-10f) == 0 && qw_f32_to_f16(-0.0f) == 0x8000, "underflow to signed zero");
}

/* Random Q8_0 weights: quantized random rows, with some zero blocks and
 * some large scales. */
static void fill_q8(uint8_t *w, int64_t rows, int64_t k) {
    float *row = malloc((size_t)k * sizeof(float));
    int64_t rb = qw_dtype_row_bytes(QW_Q8_0, k);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++) row[i] = frand() * (float)(1 + (int)(rnd() % 4) * 30);
        if (rnd() % 4 == 0) memset(row, 0, 32 * sizeof(float));
        qw_quantize_q8_0(w + r * rb, row, k);
    }
    free(row);
}

static void check_level(const qw_kernels *L, const qw_kernels *ref) {
    static const int64_t ks[] = {32, 64, 96, 896, 1056, 4864};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int64_t k = ks[ki], rows = 13, nmax = 17, nbig = 200;
        const int64_t rb = qw_dtype_row_bytes(QW_Q8_0, k), ldx = k + 3, ldy = rows + 2;
        uint8_t *raw = malloc((size_t)(rows * rb + 1));
        uint8_t *W = raw + 1; /* odd address: GGUF gives 32-byte alignment at best, blocks are 34 bytes */
        float *Wf = malloc((size_t)(rows * k) * sizeof(float));
        float *X = malloc((size_t)(nbig * ldx) * sizeof(float));
        float *y1 = malloc((size_t)(nbig * rows) * sizeof(float));
        float *Y = malloc((size_t)(nbig * ldy) * sizeof(float));
        float *Yf = malloc((size_t)(nbig * ldy) * sizeof(float));
        fill_q8(W, rows, k);
        ref->to_f32[QW_Q8_0](Wf, W, rows * k); /* rows are whole blocks: one call */
        float *wl = malloc((size_t)(rows * k) * sizeof(float));
        L->to_f32[QW_Q8_0](wl, W, rows * k);
        CHECK(memcmp(wl, Wf, (size_t)(rows * k) * sizeof(float)) == 0, "%s to_f32 Q8_0 k=%lld == ref", L->name,
              (long long)k);
        free(wl);
        {   /* the level's quantizer == the reference, byte for byte */
            float *row = malloc((size_t)k * sizeof(float));
            uint8_t *qa = malloc((size_t)rb), *qb = malloc((size_t)rb);
            int diff = 0;
            for (int rep = 0; rep < 20; rep++) {
                for (int64_t i = 0; i < k; i++)
                    row[i] = frand() * ldexpf(1.0f, (int)(rnd() % 40) - 20) * (rep % 5 == 0 ? 127.5f : 1.0f);
                if (rep == 1) memset(row, 0, (size_t)k * sizeof(float));
                if (rep == 2) for (int64_t i = 0; i < k; i++) row[i] = (float)((int64_t)(i % 255) - 127) + 0.5f;
                qw_quantize_q8_0(qa, row, k);
                L->quantize_q8_0(qb, row, k);
                diff += memcmp(qa, qb, (size_t)rb) != 0;
            }
            CHECK(diff == 0, "%s quantize_q8_0 k=%lld == reference bytes (%d rows differ)", L->name, (long long)k, diff);
            free(row);
            free(qa);
            free(qb);
        }
        for (int64_t i = 0; i < nbig * ldx; i++) X[i] = frand();
        for (int64_t t = 0; t < nbig; t++) L->matmul[QW_Q8_0](y1 + t * rows, rows, X + t * ldx, ldx, 1, W, k, 0, rows);
        /* accuracy against float64 on the dequantized weights */
        int bad = 0;
        for (int64_t t = 0; t < nbig; t += 7)
            for (int64_t o = 0; o < rows; o++) {
                double ex = 0, S = 0;
                for (int64_t i = 0; i < k; i++) {
                    double p = (double)X[t * ldx + i] * Wf[o * k + i];
                    ex += p;
                    S += fabs(p);
                }
                if (!(fabs(y1[t * rows + o] - ex) <= 1.01 * (double)k * (FLT_EPSILON / 2) * S + 1e-30)) bad++;
            }
        CHECK(bad == 0, "%s matmul Q8_0 k=%lld within the float32 bound of the exact product (%d bad)", L->name,
              (long long)k, bad);
        /* batch invariance and sub-ranges */
        const int64_t ranges[][2] = {{0, rows}, {1, rows - 2}, {3, 8}, {5, 6}};
        bad = 0;
        for (int64_t n = 1; n <= nmax; n++)
            for (size_t ri = 0; ri < 4; ri++) {
                int64_t o0 = ranges[ri][0], o1 = ranges[ri][1];
                for (int64_t i = 0; i < nmax * ldy; i++) Y[i] = 12345.5f;
                L->matmul[QW_Q8_0](Y, ldy, X, ldx, n, W, k, o0, o1);
                for (int64_t t = 0; t < n; t++) {
                    if (memcmp(Y + t * ldy + o0, y1 + t * rows + o0, (size_t)(o1 - o0) * sizeof(float))) bad++;
                    for (int64_t o = 0; o < ldy; o++)
                        if ((o < o0 || o >= o1) && Y[t * ldy + o] != 12345.5f) bad++;
                }
            }
        L->matmul[QW_Q8_0](Y, rows, X, ldx, nbig, W, k, 0, rows);
        if (memcmp(Y, y1, (size_t)(nbig * rows) * sizeof(float))) bad++;
        CHECK(bad == 0, "%s matmul Q8_0 k=%lld: rows of n = 1..%lld and %lld bitwise equal to n = 1 (%d bad)",
              L->name, (long long)k, (long long)nmax, (long long)nbig, bad);
        L->matmul[QW_F32](Yf, rows, X, ldx, nbig, Wf, k, 0, rows);
        CHECK(memcmp(Yf, y1, (size_t)(nbig * rows) * sizeof(float)) == 0,
              "%s matmul Q8_0 k=%lld == its f32 matmul of the dequantized weights, bit for bit", L->name,
              (long long)k);
        free(raw);
        free(Wf);
        free(X);
        free(y1);
        free(Y);
        free(Yf);
    }
}

int main(void) {
    CHECK(qw_dtype_row_bytes(QW_Q8_0, 896) == 28 * 34 && qw_dtype_row_bytes(QW_Q8_0, 33) == -1 &&
              qw_dtype_row_bytes(QW_BF16, 7) == 14 && qw_dtype_block(QW_Q8_0) == 32,
          "row bytes");
    check_fixture();
    check_f16_rounding();
    const qw_kernels *ref = kernels_level("ref");
    const char *const *names = kernels_level_names();
    for (int i = 0; names[i]; i++) {
        const qw_kernels *L = kernels_level(names[i]);
        if (!L) continue;
        int before = test_failed_;
        check_level(L, ref);
        printf("level %s: Q8_0 %s\n", names[i], test_failed_ == before ? "ok" : "FAILED");
    }
    return test_summary();
}
