/* test_kquant.c - GGML's 4/5/6-bit block types (Q4_0, Q4_1, Q5_0, Q5_1,
 * Q4_K, Q5_K, Q6_K): to_f32 and matmul of every level this CPU runs.
 *
 *  - to_f32 of each level equals, bit for bit, what the `gguf` package's
 *    numpy dequantize gives on the committed blocks of
 *    tests/fixtures/quant/blocks.bin (tools/make_kquant_fixture.py: random
 *    bytes with normal, subnormal, negative and extreme binary16 scales, and
 *    blocks from gguf's own quantizer); and equals the reference's on random
 *    weights;
 *  - matmul of each level: within the float32 summation bound of the exact
 *    (float64) product with the dequantized weights; every row of an n-token
 *    product (n = 1..17, 200) and of sub-ranges bitwise equal to n = 1 over
 *    the whole range (batch invariance), rows outside o0..o1 untouched; and
 *    bitwise equal to the f32 matmul (of the level that provides the entry:
 *    ref, or avx2 for avx2/avx512) of the dequantized weights;
 *  - row sizes: whole blocks only.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "test.h"
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "test_rng.h"


static const struct {
    qw_dtype dt;
    uint32_t ggml; /* GGML type id in the fixture */
    int f16_off[2], n_f16;
} k_types[] = {
    {QW_Q4_0, 2, {0, 0}, 1},    {QW_Q4_1, 3, {0, 2}, 2},  {QW_Q5_0, 6, {0, 0}, 1},  {QW_Q5_1, 7, {0, 2}, 2},
    {QW_Q4_K, 12, {0, 2}, 2}, {QW_Q5_K, 13, {0, 2}, 2}, {QW_Q6_K, 14, {208, 0}, 1},
};
#define N_TYPES (int)(sizeof k_types / sizeof k_types[0])

#define fixture_path() test_fixture_path("quant/blocks.bin")

/* Every level's to_f32 on the fixture == gguf's dequantize, bit for bit. */
static void check_fixture(void) {
    FILE *f = fopen(fixture_path(), "rb");
    CHECK(f != NULL, "open %s", fixture_path());
    if (!f) return;
    int seen = 0;
    uint32_t hdr[2];
    while (fread(hdr, 4, 2, f) == 2) {
        int ti = -1;
        for (int i = 0; i < N_TYPES; i++)
            if (k_types[i].ggml == hdr[0]) ti = i;
        CHECK(ti >= 0 && hdr[1] > 0 && hdr[1] < (1u << 20), "fixture record type %u n %u", hdr[0], hdr[1]);
        if (ti < 0) break;
        qw_dtype dt = k_types[ti].dt;
        int64_t n = hdr[1], nb = qw_dtype_row_bytes(dt, n);
        CHECK(nb > 0, "%s: %lld weights are whole blocks", qw_dtype_name(dt), (long long)n);
        if (nb <= 0) break;
        uint8_t *raw = malloc((size_t)nb + 1);
        float *want = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
        int okr = fread(raw + 1, 1, (size_t)nb, f) == (size_t)nb && fread(want, sizeof(float), (size_t)n, f) == (size_t)n;
        CHECK(okr, "fixture body of %s", qw_dtype_name(dt));
        const char *const *names = kernels_level_names();
        for (int l = 0; okr && names[l]; l++) {
            const qw_kernels *L = kernels_level(names[l]);
            if (!L) continue;
            for (int64_t i = 0; i < n; i++) got[i] = -12345.0f;
            L->to_f32[dt](got, raw + 1, n); /* odd address: blocks are not aligned in files */
            int bad = 0;
            for (int64_t i = 0; i < n; i++)
                if (memcmp(&got[i], &want[i], sizeof(float)) && bad++ < 3)
                    fprintf(stderr, "  %s %s weight %lld: %a, gguf says %a\n", names[l], qw_dtype_name(dt),
                            (long long)i, got[i], want[i]);
            CHECK(bad == 0, "%s to_f32 %s == gguf's dequantize on %lld weights (%d differ)", names[l],
                  qw_dtype_name(dt), (long long)n, bad);
        }
        seen |= 1 << ti;
        free(raw);
        free(want);
        free(got);
    }
    fclose(f);
    CHECK(seen == (1 << N_TYPES) - 1, "the fixture covers all %d types", N_TYPES);
}

/* Random blocks of type ti: random bytes, binary16 fields set to random
 * finite scales of moderate size (the matmul bound is about accumulation). */
static void fill_blocks(uint8_t *w, int64_t nbytes, int ti) {
    for (int64_t i = 0; i < nbytes; i++) w[i] = (uint8_t)rnd();
    int bs = (int)qw_dtype_row_bytes(k_types[ti].dt, qw_dtype_block(k_types[ti].dt));
    for (int64_t b = 0; b + bs <= nbytes; b += bs)
        for (int j = 0; j < k_types[ti].n_f16; j++) {
            float v = frand() * ldexpf(1.0f, -(int)(rnd() % 8) - 3);
            if (rnd() % 16 == 0) v = 0.0f;
            uint16_t h = qw_f32_to_f16(v);
            memcpy(w + b + k_types[ti].f16_off[j], &h, 2);
        }
}

static void check_type(const qw_kernels *L, const qw_kernels *ref, int ti) {
    const qw_dtype dt = k_types[ti].dt;
    const char *tn = qw_dtype_name(dt);
    static const int64_t ks32[] = {32, 64, 96, 256, 896, 1056, 4864}, ks256[] = {256, 512, 1280, 4864};
    const int big = qw_dtype_block(dt) == 256;
    const int64_t *ks = big ? ks256 : ks32;
    const int nk = big ? 4 : 7;
    for (int ki = 0; ki < nk; ki++) {
        const int64_t k = ks[ki], rows = 13, nmax = 17, nbig = 200;
        const int64_t rb = qw_dtype_row_bytes(dt, k), ldx = k + 3, ldy = rows + 2;
        uint8_t *raw = malloc((size_t)(rows * rb + 1));
        uint8_t *W = raw + 1; /* odd address */
        float *Wf = malloc((size_t)(rows * k) * sizeof(float)), *wl = malloc((size_t)(rows * k) * sizeof(float));
        float *X = malloc((size_t)(nbig * ldx) * sizeof(float));
        float *y1 = malloc((size_t)(nbig * rows) * sizeof(float));
        float *Y = malloc((size_t)(nbig * ldy) * sizeof(float));
        float *Yf = malloc((size_t)(nbig * ldy) * sizeof(float));
        fill_blocks(W, rows * rb, ti);
        ref->to_f32[dt](Wf, W, rows * k);
        L->to_f32[dt](wl, W, rows * k);
        CHECK(memcmp(wl, Wf, (size_t)(rows * k) * sizeof(float)) == 0, "%s to_f32 %s k=%lld == ref", L->name, tn,
              (long long)k);
        for (int64_t i = 0; i < nbig * ldx; i++) X[i] = frand();
        for (int64_t t = 0; t < nbig; t++) L->matmul[dt](y1 + t * rows, rows, X + t * ldx, ldx, 1, W, k, 0, rows);
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
        CHECK(bad == 0, "%s matmul %s k=%lld within the float32 bound of the exact product (%d bad)", L->name, tn,
              (long long)k, bad);
        const int64_t ranges[][2] = {{0, rows}, {1, rows - 2}, {3, 8}, {5, 6}, {0, 4}, {12, 13}};
        bad = 0;
        for (int64_t n = 1; n <= nmax; n++)
            for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
                int64_t o0 = ranges[ri][0], o1 = ranges[ri][1];
                for (int64_t i = 0; i < nmax * ldy; i++) Y[i] = 12345.5f;
                L->matmul[dt](Y, ldy, X, ldx, n, W, k, o0, o1);
                for (int64_t t = 0; t < n; t++) {
                    if (memcmp(Y + t * ldy + o0, y1 + t * rows + o0, (size_t)(o1 - o0) * sizeof(float))) bad++;
                    for (int64_t o = 0; o < ldy; o++)
                        if ((o < o0 || o >= o1) && Y[t * ldy + o] != 12345.5f) bad++;
                }
            }
        L->matmul[dt](Y, rows, X, ldx, nbig, W, k, 0, rows);
        if (memcmp(Y, y1, (size_t)(nbig * rows) * sizeof(float))) bad++;
        CHECK(bad == 0, "%s matmul %s k=%lld: rows of n = 1..%lld and %lld bitwise equal to n = 1 (%d bad)", L->name,
              tn, (long long)k, (long long)nmax, (long long)nbig, bad);
        L->matmul[QW_F32](Yf, rows, X, ldx, nbig, Wf, k, 0, rows);
        CHECK(memcmp(Yf, y1, (size_t)(nbig * rows) * sizeof(float)) == 0,
              "%s matmul %s k=%lld == its own f32 matmul of the dequantized weights, bit for bit", L->name, tn,
              (long long)k);
        free(raw);
        free(Wf);
        free(wl);
        free(X);
        free(y1);
        free(Y);
        free(Yf);
    }
}

int main(void) {
    CHECK(qw_dtype_row_bytes(QW_Q4_0, 896) == 28 * 18 && qw_dtype_row_bytes(QW_Q5_1, 64) == 48 &&
              qw_dtype_row_bytes(QW_Q4_K, 4864) == 19 * 144 && qw_dtype_row_bytes(QW_Q6_K, 256) == 210 &&
              qw_dtype_row_bytes(QW_Q5_K, 512) == 352 && qw_dtype_row_bytes(QW_Q4_1, 32) == 20 &&
              qw_dtype_row_bytes(QW_Q5_0, 32) == 22,
          "row bytes");
    CHECK(qw_dtype_row_bytes(QW_Q4_K, 896) == -1 && qw_dtype_row_bytes(QW_Q6_K, 128) == -1 &&
              qw_dtype_row_bytes(QW_Q4_0, 48) == -1 && qw_dtype_block(QW_Q5_K) == 256 && qw_dtype_block(QW_Q5_0) == 32,
          "rows must be whole blocks");
    CHECK(qw_dtype_quantized(QW_Q4_K) && qw_dtype_quantized(QW_Q8_0) && !qw_dtype_quantized(QW_BF16) &&
              !strcmp(qw_dtype_name(QW_Q6_K), "Q6_K") && qw_dtype_size(QW_Q4_0) == 0,
          "names and kinds");
    check_fixture();
    const qw_kernels *ref = kernels_level("ref");
    const char *const *names = kernels_level_names();
    for (int i = 0; names[i]; i++) {
        const qw_kernels *L = kernels_level(names[i]);
        if (!L) continue;
        for (int ti = 0; ti < N_TYPES; ti++) {
            int before = test_failed_;
            check_type(L, ref, ti);
            printf("level %s: %s %s\n", names[i], qw_dtype_name(k_types[ti].dt), test_failed_ == before ? "ok" : "FAILED");
        }
    }
    return test_summary();
}
