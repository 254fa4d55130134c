/* test_kernels.c - the kernel checker: every level this CPU runs, every
 * kernel, against the plain-C reference and against a float64 oracle.
 *
 * Inputs: random values, odd sizes (tails), n = 1..9 tokens, o0/o1 ranges
 * that are not multiples of any tile, unaligned pointers, strides, and
 * extreme values (large magnitudes, bf16/f16 subnormals, zeros; inf and nan
 * in the conversions). Outputs outside [o0, o1) must be untouched.
 * Matmul batch invariance (check_batch_invariance): every row of an n-row
 * product (n = 1..17, several o0/o1) is bitwise equal to the n = 1 product,
 * with the weights at an odd byte address. Block types
 * (check_block_types_match_f32): bitwise the level's own F32 matmul of the
 * dequantized weights. Attention (check_attn): against
 * float64 and ref, and each head's bits independent of the other heads;
 * the same for a 16-bit cache (f16, bf16), whose result must also be the
 * level's float32 kernel's bits on the same values; the 16-bit KV store
 * bitwise the reference's rounding (check_kv_store).
 *
 * Tolerances (u = FLT_EPSILON / 2, the float32 unit roundoff):
 *  - sums of k products (matmul): any summation order, with or without
 *    FMA, is within gamma_k * S of the exact value, where S = sum |x_i w_i|
 *    and gamma_k = k u / (1 - k u) (Higham, Accuracy and Stability, 3.1).
 *    The bf16/f16 -> f32 conversion is exact, so we check
 *    |y - exact| <= 1.01 * k * u * S against a float64 oracle, and a level
 *    against ref within twice that. When products fall into the subnormal
 *    range the relative bound does not hold; each of the k roundings may
 *    then add up to 2^-150 absolutely, hence + k * 2^-149.
 *  - exp-based kernels (silu_mul): the SIMD levels use a polynomial
 *    expf whose relative error is at most EXP_ULPS ulp (measured below
 *    against libm on a dense grid, and checked by this test); libm's expf
 *    is within 1 ulp. See the per-test comments for the composed bounds.
 *  - add is a single rounding: bit-identical to ref.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "test.h"
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "test_rng.h"

/* Largest expf error (ulp) we accept from a SIMD level: the polynomial exp
 * of the SIMD files was measured at <= 1.25 ulp against float64 exp over
 * [-87, 88]; 3 leaves margin for FMA-contraction differences between
 * compilers and ISAs without hiding a wrong coefficient (a 1e-4 change in
 * one coefficient fails this test). */
#define EXP_ULPS 3.0


static uint16_t f32_to_bf16_trunc(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* Round-to-nearest f32 -> f16 bits for normal-range values (test inputs
 * only; the tests never need the exact rounding, only valid f16 values). */
static uint16_t f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    uint32_t m = u & 0x7fffffu;
    if (e >= 31) return (uint16_t)(sign | 0x7bff);
    if (e <= 0) return (uint16_t)sign;
    return (uint16_t)(sign | ((uint32_t)e << 10) | (m >> 13));
}

/* Weight values: mode 0 random in [-1,1]; mode 1 extreme: a mix of zeros,
 * subnormals, tiny and large magnitudes (products stay finite). */
static void fill_w(void *w, qw_dtype dt, int64_t count, int mode) {
    for (int64_t i = 0; i < count; i++) {
        float v = frand();
        uint16_t special = 0;
        int use_special = 0;
        if (mode == 1) {
            uint64_t r = rnd() % 8;
            if (r == 0) v = 0.0f;
            else if (r == 1) { /* subnormal of this dtype */
                use_special = 1;
                special = (uint16_t)((rnd() & 0x8000u) | (1 + rnd() % (dt == QW_F16 ? 0x3ff : 0x7f)));
            } else if (r == 2) v *= dt == QW_F16 ? 60000.0f : 1e15f;
            else if (r == 3) v *= 1e-3f;
        }
        char *p = (char *)w + i * qw_dtype_size(dt); /* memcpy: w may be misaligned */
        if (dt == QW_F32) {
            if (use_special) v = (rnd() & 1 ? -1 : 1) * FLT_MIN * frand() * 0.5f; /* f32 subnormal */
            memcpy(p, &v, sizeof v);
        } else {
            uint16_t h = use_special ? special : dt == QW_BF16 ? f32_to_bf16_trunc(v) : f32_to_f16(v);
            memcpy(p, &h, sizeof h);
        }
    }
}

/* Element i of weights w (memcpy: w may sit at any byte address). */
static double w_at(const void *w, qw_dtype dt, int64_t i) {
    const char *p = (const char *)w + i * qw_dtype_size(dt);
    if (dt == QW_F32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return dt == QW_BF16 ? qw_bf16_to_f32(h) : qw_f16_to_f32(h);
}

static const qw_kernels *g_ref;
static int g_fail_prints;

#define SENTINEL 12345.5f

/* One matmul case; returns the number of mismatches (also CHECKed). */
static void matmul_case(const qw_kernels *L, qw_dtype dt, int64_t n, int64_t k, int64_t rows,
                        int64_t o0, int64_t o1, int mode) {
    int es = qw_dtype_size(dt);
    int64_t ldx = k + (int64_t)(rnd() % 5), ldy = rows + (int64_t)(rnd() % 4);
    /* +1 element: deliberately misaligned base pointers. */
    char *wbuf = malloc((size_t)(rows * k + 1) * (size_t)es);
    float *xbuf = malloc((size_t)(n * ldx + 1) * sizeof(float));
    float *y = malloc((size_t)(n * ldy) * sizeof(float));
    float *yr = malloc((size_t)(n * ldy) * sizeof(float));
    void *W = wbuf + es;
    float *X = xbuf + 1;
    fill_w(W, dt, rows * k, mode);
    for (int64_t i = 0; i < n * ldx; i++) {
        X[i] = frand();
        if (mode == 1 && rnd() % 8 == 0) X[i] *= dt == QW_F16 ? 1e4f : 1e15f;
    }
    for (int64_t i = 0; i < n * ldy; i++) y[i] = yr[i] = SENTINEL;
    L->matmul[dt](y, ldy, X, ldx, n, W, k, o0, o1);
    g_ref->matmul[dt](yr, ldy, X, ldx, n, W, k, o0, o1);
    int bad = 0;
    double worst = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = 0; o < ldy; o++) {
            float v = y[t * ldy + o];
            if (o < o0 || o >= o1 || o >= rows) {
                if (v != SENTINEL) bad++;
                continue;
            }
            double ex = 0, S = 0;
            for (int64_t i = 0; i < k; i++) {
                double p = (double)X[t * ldx + i] * w_at(W, dt, o * k + i);
                ex += p;
                S += fabs(p);
            }
            double tol = 1.01 * (double)k * (FLT_EPSILON / 2) * S + (double)k * 0x1p-149;
            double e1 = fabs((double)v - ex), e2 = fabs((double)v - (double)yr[t * ldy + o]);
            if (!(e1 <= tol) || !(e2 <= 2 * tol)) {
                if (g_fail_prints++ < 10)
                    fprintf(stderr,
                            "  %s matmul %s n=%lld k=%lld o=%lld t=%lld: got %.9g ref %.9g exact %.9g tol %.3g\n",
                            L->name, qw_dtype_name(dt), (long long)n, (long long)k, (long long)o,
                            (long long)t, v, yr[t * ldy + o], ex, tol);
                bad++;
            }
            if (S > 0 && e1 / S > worst) worst = e1 / S;
        }
    CHECK(bad == 0, "%s matmul %s n=%lld k=%lld rows=%lld o=[%lld,%lld) mode=%d: %d bad", L->name,
          qw_dtype_name(dt), (long long)n, (long long)k, (long long)rows, (long long)o0,
          (long long)o1, mode, bad);
    free(wbuf);
    free(xbuf);
    free(y);
    free(yr);
}

static void check_matmul(const qw_kernels *L) {
    static const int64_t ks[] = {0, 1, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 896, 1000, 4867};
    for (int dt = 0; dt < QW_DTYPE_COUNT; dt++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            if (qw_dtype_quantized((qw_dtype)dt)) break; /* block types: test_quant.c, test_kquant.c */
            int64_t k = ks[ki];
            int big = k >= 896;
            for (int64_t n = 1; n <= 9; n++) {
                if (big && n > 5 && n != 9) continue;
                static const int64_t rowsets[] = {1, 2, 5, 13, 37};
                for (size_t ri = 0; ri < 5; ri++) {
                    int64_t rows = rowsets[ri];
                    if (big && rows != 5 && rows != 37) continue;
                    matmul_case(L, (qw_dtype)dt, n, k, rows, 0, rows, 0);
                    if (rows > 3) { /* a sub-range that is not a multiple of any tile */
                        int64_t a = 1 + (int64_t)(rnd() % 3), b = rows - (int64_t)(rnd() % 3);
                        matmul_case(L, (qw_dtype)dt, n, k, rows, a, b, 0);
                    }
                }
                if (!big || n <= 2) matmul_case(L, (qw_dtype)dt, n, k, 13, 0, 13, 1);
            }
        }
    /* Empty range: writes nothing. */
    float y = SENTINEL, x = 1.0f;
    uint16_t w16 = 0x3f80;
    L->matmul[QW_BF16](&y, 1, &x, 1, 1, &w16, 1, 0, 0);
    CHECK(y == SENTINEL, "%s matmul empty range wrote", L->name);
}

/* Batch invariance: the scheduler batches one decode token per request, so
 * a request's logits must not depend on how many others run. Every row of
 * an n-row product, for any n, any o0/o1 range, must be bitwise equal to the
 * n = 1 product of that row alone (same operations in the same order).
 * The weights sit at an odd byte address (safetensors gives no alignment
 * guarantee; the kernels must not make misaligned typed loads: run under
 * -fsanitize=undefined to see those). */
static void check_batch_invariance(const qw_kernels *L) {
    static const int64_t ks[] = {7, 33, 899, 1031, 4867};
    for (int dt = 0; dt < QW_DTYPE_COUNT; dt++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            if (qw_dtype_quantized((qw_dtype)dt)) break; /* block types: test_quant.c, test_kquant.c */
            const int64_t k = ks[ki], rows = k > 2000 ? 9 : 23, nmax = 17;
            const int64_t ldx = k + 3, ldy = rows + 2;
            int es = qw_dtype_size(dt);
            char *wraw = malloc((size_t)(rows * k * es + 16));
            void *W = wraw + 1 + (16 - ((uintptr_t)wraw & 15)) % 16; /* odd address */
            float *X = malloc((size_t)(nmax * ldx) * sizeof(float));
            float *y1 = malloc((size_t)(nmax * rows) * sizeof(float));
            float *Y = malloc((size_t)(nmax * ldy) * sizeof(float));
            fill_w(W, (qw_dtype)dt, rows * k, 0);
            for (int64_t i = 0; i < nmax * ldx; i++) X[i] = frand();
            for (int64_t t = 0; t < nmax; t++) /* each token alone, all rows */
                L->matmul[dt](y1 + t * rows, rows, X + t * ldx, ldx, 1, W, k, 0, rows);
            const int64_t ranges[][2] = {{0, rows}, {1, rows - 2}, {3, 8}, {5, 6}, {2, 7}};
            int bad = 0;
            for (int64_t n = 1; n <= nmax; n++)
                for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
                    int64_t o0 = ranges[ri][0], o1 = ranges[ri][1];
                    for (int64_t i = 0; i < nmax * ldy; i++) Y[i] = SENTINEL;
                    L->matmul[dt](Y, ldy, X, ldx, n, W, k, o0, o1);
                    for (int64_t t = 0; t < n; t++) {
                        if (memcmp(Y + t * ldy + o0, y1 + t * rows + o0,
                                   (size_t)(o1 - o0) * sizeof(float)) != 0) {
                            if (g_fail_prints++ < 10)
                                fprintf(stderr, "  %s matmul %s k=%lld n=%lld o=[%lld,%lld) t=%lld differs from n=1\n",
                                        L->name, qw_dtype_name((qw_dtype)dt), (long long)k,
                                        (long long)n, (long long)o0, (long long)o1, (long long)t);
                            bad++;
                        }
                        for (int64_t o = 0; o < ldy; o++)
                            if ((o < o0 || o >= o1) && Y[t * ldy + o] != SENTINEL) bad++;
                    }
                }
            CHECK(bad == 0, "%s matmul %s k=%lld: every row of n = 1..%lld bitwise equal to n = 1 (%d bad)",
                  L->name, qw_dtype_name((qw_dtype)dt), (long long)k, (long long)nmax, bad);
            /* Prefill sizes: enough tokens for several L2 token blocks, so the
             * block loops of the matrix-matrix path are crossed too. */
            if (k >= 899) {
                const int64_t nbig = 200;
                float *Xb = malloc((size_t)(nbig * ldx) * sizeof(float));
                float *yb = malloc((size_t)(nbig * rows) * sizeof(float));
                float *Yb = malloc((size_t)(nbig * rows) * sizeof(float));
                for (int64_t i = 0; i < nbig * ldx; i++) Xb[i] = frand();
                for (int64_t t = 0; t < nbig; t++)
                    L->matmul[dt](yb + t * rows, rows, Xb + t * ldx, ldx, 1, W, k, 0, rows);
                L->matmul[dt](Yb, rows, Xb, ldx, nbig, W, k, 0, rows);
                CHECK(memcmp(Yb, yb, (size_t)(nbig * rows) * sizeof(float)) == 0,
                      "%s matmul %s k=%lld: n = %lld bitwise equal to n = 1 row by row", L->name,
                      qw_dtype_name((qw_dtype)dt), (long long)k, (long long)nbig);
                free(Xb);
                free(yb);
                free(Yb);
            }
            free(wraw);
            free(X);
            free(y1);
            free(Y);
        }
}

/* Block types (Q8_0, Q4_0 ... Q6_K) against the same level's F32 matmul:
 * the promise "a quantized file gives bitwise the logits of the same
 * weights stored as F32" holds on a level only if each of its block-type
 * matmuls computes exactly what its own F32 matmul computes on the
 * dequantized weights (reference values: to_f32 is exact on every level).
 * Bitwise, at n = 1 (decode), small n (the register-tile paths), prefill n
 * (token blocks), k of an odd number of blocks and across the k blocks,
 * odd row counts and o0/o1 sub-ranges, weights at an odd address. Accuracy
 * and batch invariance of each type: test_quant.c, test_kquant.c. */
static const struct {
    qw_dtype dt;
    int f16_off[2], n_f16; /* the binary16 scale fields of a block */
} k_block_types[] = {
    {QW_Q8_0, {0, 0}, 1}, {QW_Q4_0, {0, 0}, 1}, {QW_Q4_1, {0, 2}, 2}, {QW_Q5_0, {0, 0}, 1},
    {QW_Q5_1, {0, 2}, 2}, {QW_Q4_K, {0, 2}, 2}, {QW_Q5_K, {0, 2}, 2}, {QW_Q6_K, {208, 0}, 1},
};

static void check_block_types_match_f32(const qw_kernels *L) {
    static const int64_t ns[] = {1, 2, 5, 9, 40, 200};
    for (size_t ti = 0; ti < sizeof k_block_types / sizeof k_block_types[0]; ti++) {
        const qw_dtype dt = k_block_types[ti].dt;
        const int64_t blk = qw_dtype_block(dt);
        /* odd block counts; several k blocks of every level (KC 512, 1024) */
        const int64_t ks[] = {blk, 3 * blk, blk == 32 ? 33 * blk : 7 * blk, 19 * blk};
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            const int64_t k = ks[ki], rows = ki % 2 ? 13 : 37, nmax = 200;
            const int64_t rb = qw_dtype_row_bytes(dt, k), bs = qw_dtype_row_bytes(dt, blk);
            const int64_t ldx = k + 1, ldy = rows + 3;
            uint8_t *raw = malloc((size_t)(rows * rb + 1)), *W = raw + 1; /* odd address */
            float *Wf = malloc((size_t)(rows * k) * sizeof(float));
            float *X = malloc((size_t)(nmax * ldx) * sizeof(float));
            float *Yq = malloc((size_t)(nmax * ldy) * sizeof(float)), *Yf = malloc((size_t)(nmax * ldy) * sizeof(float));
            for (int64_t i = 0; i < rows * rb; i++) W[i] = (uint8_t)rnd();
            for (int64_t b = 0; b < rows * rb; b += bs)
                for (int j = 0; j < k_block_types[ti].n_f16; j++) {
                    uint16_t h = qw_f32_to_f16(frand() * ldexpf(1.0f, -(int)(rnd() % 10) - 2));
                    memcpy(W + b + k_block_types[ti].f16_off[j], &h, sizeof h);
                }
            g_ref->to_f32[dt](Wf, W, rows * k);
            for (int64_t i = 0; i < nmax * ldx; i++) X[i] = frand();
            int bad = 0;
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                const int64_t n = ns[ni], o0 = ni % 3 == 1 ? 1 : 0, o1 = ni % 3 == 2 ? rows - 2 : rows;
                for (int64_t i = 0; i < n * ldy; i++) Yq[i] = Yf[i] = SENTINEL;
                L->matmul[dt](Yq, ldy, X, ldx, n, W, k, o0, o1);
                L->matmul[QW_F32](Yf, ldy, X, ldx, n, Wf, k, o0, o1);
                if (memcmp(Yq, Yf, (size_t)(n * ldy) * sizeof(float)) != 0) {
                    if (g_fail_prints++ < 10)
                        fprintf(stderr, "  %s matmul %s k=%lld n=%lld o=[%lld,%lld) != its F32 matmul\n", L->name,
                                qw_dtype_name(dt), (long long)k, (long long)n, (long long)o0, (long long)o1);
                    bad++;
                }
            }
            CHECK(bad == 0, "%s matmul %s k=%lld rows=%lld: bitwise its F32 matmul of the dequantized weights at "
                  "n = 1..200 (%d sizes differ)", L->name, qw_dtype_name(dt), (long long)k, (long long)rows, bad);
            free(raw);
            free(Wf);
            free(X);
            free(Yq);
            free(Yf);
        }
    }
}

static int same_float(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return ua == ub;
}

/* Exact value of a binary16 / bfloat16 pattern, computed independently. */
static double f16_exact(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}
static double bf16_exact(uint16_t h) {
    int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
    double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
    return s ? -v : v;
}

static void check_to_f32(const qw_kernels *L) {
    /* Every 16-bit pattern, at an odd offset and odd length (tails). */
    enum { N = 65536 };
    uint16_t *h = malloc((N + 1) * 2);
    float *y = malloc((N + 3) * 4), *yr = malloc((N + 3) * 4);
    for (int i = 0; i < N; i++) h[i + 1] = (uint16_t)i;
    int bad16 = 0, badbf = 0, bad32 = 0;
    for (int pass = 0; pass < 2; pass++) {
        int64_t cnt = pass ? N - 1 - 7 : N;
        L->to_f32[QW_F16](y + 1, h + 1, cnt);
        g_ref->to_f32[QW_F16](yr + 1, h + 1, cnt);
        for (int64_t i = 0; i < cnt; i++) {
            double ex = f16_exact((uint16_t)i);
            if (!same_float(y[i + 1], yr[i + 1]) || (!isnan(ex) && (double)y[i + 1] != ex) ||
                (isnan(ex) != isnan(y[i + 1])) || !!signbit(y[i + 1]) != (i >> 15))
                bad16++;
        }
        L->to_f32[QW_BF16](y + 1, h + 1, cnt);
        g_ref->to_f32[QW_BF16](yr + 1, h + 1, cnt);
        for (int64_t i = 0; i < cnt; i++) {
            double ex = bf16_exact((uint16_t)i);
            if (!same_float(y[i + 1], yr[i + 1]) || (!isnan(ex) && (double)y[i + 1] != ex) ||
                (isnan(ex) != isnan(y[i + 1])) || !!signbit(y[i + 1]) != (i >> 15))
                badbf++;
        }
    }
    CHECK(bad16 == 0, "%s to_f32 F16: %d of 65536 patterns wrong", L->name, bad16);
    CHECK(badbf == 0, "%s to_f32 BF16: %d of 65536 patterns wrong", L->name, badbf);
    float src[40];
    for (int i = 0; i < 40; i++) src[i] = frand() * 1e30f;
    src[3] = INFINITY;
    src[4] = -0.0f;
    src[5] = 1e-40f;
    for (int64_t cnt = 0; cnt < 38; cnt++) {
        for (int i = 0; i < 40; i++) y[i] = SENTINEL;
        L->to_f32[QW_F32](y + 1, src + 1, cnt);
        for (int i = 0; i < 40; i++)
            if (!same_float(y[i], i >= 1 && i <= cnt ? src[i] : SENTINEL)) bad32++;
    }
    CHECK(bad32 == 0, "%s to_f32 F32: %d wrong", L->name, bad32);
    free(h);
    free(y);
    free(yr);
}

static const int64_t k_sizes[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 896, 1000, 4867};
#define NSIZES ((int)(sizeof k_sizes / sizeof k_sizes[0]))

static void check_vec(const qw_kernels *L) {
    enum { MAX = 4867 + 8 };
    float *a = malloc(MAX * 4), *b = malloc(MAX * 4), *y = malloc(MAX * 4), *yr = malloc(MAX * 4);
    int bad_add = 0, bad_rms = 0, bad_rms_inplace = 0;
    for (int si = 0; si < NSIZES; si++)
        for (int rep = 0; rep < 3; rep++) {
            int64_t n = k_sizes[si];
            int off = 1 + rep; /* unaligned */
            float *A = a + off, *B = b + off, *Y = y + off, *YR = yr + off;
            float mag = rep == 2 ? 1e15f : 1.0f;
            for (int64_t i = 0; i < n + 4; i++) {
                A[i] = frand() * mag;
                B[i] = frand();
            }
            /* add: one rounding each, bit-identical to ref. */
            for (int64_t i = 0; i < n + 4; i++) Y[i] = YR[i] = frand() * mag;
            L->add(Y, A, n);
            g_ref->add(YR, A, n);
            for (int64_t i = 0; i < n + 4; i++)
                if (!same_float(Y[i], YR[i])) bad_add++;

            /* rmsnorm: the mean of squares has relative error gamma_n; the
             * eps add, sqrt, division and two multiplies add a few u; sqrt
             * halves the first. Bound: (n/2 + 8) * 2u relative to exact. */
            const float eps = 1e-6f;
            for (int64_t i = 0; i < n + 4; i++) Y[i] = SENTINEL;
            L->rmsnorm(Y, A, B, n, eps);
            double ss = 0;
            for (int64_t i = 0; i < n; i++) ss += (double)A[i] * A[i];
            double inv = 1.0 / sqrt(ss / (double)n + eps);
            double rt = ((double)n / 2 + 8) * FLT_EPSILON;
            for (int64_t i = 0; i < n + 4; i++) {
                if (i >= n) {
                    if (Y[i] != SENTINEL) bad_rms++;
                    continue;
                }
                double e = (double)A[i] * inv * B[i];
                if (!(fabs(Y[i] - e) <= rt * fabs(e) + 1e-37)) bad_rms++;
            }
            memcpy(Y, A, (size_t)n * 4); /* y == x allowed */
            L->rmsnorm(Y, Y, B, n, eps);
            for (int64_t i = 0; i < n; i++) {
                double e = (double)A[i] * inv * B[i];
                if (!(fabs(Y[i] - e) <= rt * fabs(e) + 1e-37)) bad_rms_inplace++;
            }
        }
    CHECK(bad_add == 0, "%s add: %d bad", L->name, bad_add);
    CHECK(bad_rms == 0, "%s rmsnorm: %d bad", L->name, bad_rms);
    CHECK(bad_rms_inplace == 0, "%s rmsnorm in place: %d bad", L->name, bad_rms_inplace);
    free(a);
    free(b);
    free(y);
    free(yr);
}

/* The exp-based kernels, on random inputs and (silu_mul) a dense grid over
 * [-100, 100] that crosses the exp clamp points, against float64. */
static void check_exp_kernels(const qw_kernels *L) {
    enum { MAX = 4867 + 8 };
    float *g = malloc(MAX * 4), *u = malloc(MAX * 4), *gr = malloc(MAX * 4);
    int bad_silu = 0, bad_tail = 0;
    double worst_silu = 0;
    /* silu_mul: e = exp(-g) with relative error <= EXP_ULPS u' (u' = 2u);
     * 1 + e, the division and the multiply add 3 roundings; d(1+e)/(1+e) <=
     * d(e)/e. So relative to exact: (EXP_ULPS + 4) * 2u. For g < -87 the
     * SIMD levels clamp exp's argument; there silu(g) * u < 1e-35 and an
     * absolute 1e-30 covers it (such values are < 1e-30 of any activation). */
    for (int si = 0; si < NSIZES + 1; si++) {
        int64_t n = si < NSIZES ? k_sizes[si] : 4096;
        float *G = g + 1, *U = u + 1, *GR = gr + 1;
        for (int64_t i = 0; i < n + 4; i++) {
            float v = si == NSIZES ? -100.0f + 200.0f * (float)i / (float)n : frand() * 20.0f;
            if (si < NSIZES && rnd() % 16 == 0) v = frand() * 1e4f;
            G[i] = GR[i] = v;
            U[i] = frand() * 3;
        }
        L->silu_mul(G, U, n);
        for (int64_t i = 0; i < n + 4; i++) {
            if (i >= n) {
                if (!same_float(G[i], GR[i])) bad_tail++;
                continue;
            }
            double x = GR[i];
            double e = x / (1.0 + exp(-x)) * U[i];
            double err = fabs(G[i] - e);
            if (!(err <= (EXP_ULPS + 4) * FLT_EPSILON * fabs(e) + 1e-30)) bad_silu++;
            if (fabs(e) > 1e-30 && err / fabs(e) > worst_silu) worst_silu = err / fabs(e);
        }
    }
    CHECK(bad_silu == 0, "%s silu_mul: %d bad (worst rel %.3g)", L->name, bad_silu, worst_silu);
    CHECK(bad_tail == 0, "%s silu_mul wrote past n: %d", L->name, bad_tail);
    printf("  %s: silu_mul worst rel err %.3g (FLT_EPSILON %.3g)\n", L->name, worst_silu, (double)FLT_EPSILON);
    free(g);
    free(u);
    free(gr);
}

/* Cache rows in pages of 1 << shift rows (kernels.h: qw_kv_rows), built
 * from contiguous K, V (n rows of stride ld): each page its own allocation
 * with K at an odd offset and V after a gap, so that reading across a page
 * edge as if the rows were contiguous would read garbage. Elements of type
 * t: float32, or 16-bit (K, V must then hold values of that type: they are
 * stored with the reference's rounding, which keeps them; NaN stays NaN). */
typedef struct paged {
    float **pages;
    int64_t n_pages;
    qw_kv_rows kv;
} paged;

static void paged_store(float *pgb, int64_t at, const float *x, int64_t n, qw_kv_type t) {
    if (t == QW_KV_F32) memcpy(pgb + at, x, (size_t)n * 4);
    else g_ref->kv_store16[t]((uint16_t *)(void *)pgb + at, x, n);
}

static void paged_build_t(paged *pg, const float *K, const float *V, int64_t n, int64_t ld, int shift, qw_kv_type t) {
    int64_t rows = shift >= 40 ? n : (int64_t)1 << shift;
    pg->n_pages = (n + rows - 1) / rows;
    pg->pages = malloc((size_t)pg->n_pages * sizeof(float *));
    pg->kv.k_off = 1;
    pg->kv.v_off = 1 + rows * ld + 3;
    pg->kv.ld = ld;
    pg->kv.shift = shift;
    pg->kv.pages = (const float *const *)pg->pages;
    for (int64_t i = 0; i < pg->n_pages; i++) {
        int64_t size = pg->kv.v_off + rows * ld + 5;
        float *pgb = malloc((size_t)size * 4);
        memset(pgb, 0xff, (size_t)size * 4); /* all-ones: NaN as a float, an f16 and a bf16 */
        for (int64_t r = 0; r < rows && i * rows + r < n; r++) {
            paged_store(pgb, pg->kv.k_off + r * ld, K + (i * rows + r) * ld, ld, t);
            paged_store(pgb, pg->kv.v_off + r * ld, V + (i * rows + r) * ld, ld, t);
        }
        pg->pages[i] = pgb;
    }
}

static void paged_build(paged *pg, const float *K, const float *V, int64_t n, int64_t ld, int shift) {
    paged_build_t(pg, K, V, n, ld, shift, QW_KV_F32);
}

static void paged_free(paged *pg) {
    for (int64_t i = 0; i < pg->n_pages; i++) free(pg->pages[i]);
    free(pg->pages);
}

/* One attention case (kernels.h: attn): nq heads of width hd over n cache
 * rows of stride ld (the gaps hold NaN, so reading them would show) in
 * pages of 1 << shift rows, unaligned q/K/V/out, a scratch full of garbage.
 * Checks, for level L:
 *  - against a float64 oracle. Bound: each score's error is at most
 *    d_p = 1.01 hd u sum_i |q_i k_i| scale + u |s_p| (dot product, then the
 *    scale multiply); a weight w_p = e_p / sum e then has relative error at
 *    most 2 max d_p (shift invariance: the error of the max cancels) plus
 *    exp (EXP_ULPS ulp), the subtraction s_p - max (<= u |s_p - max|
 *    relative on the argument) and the sum of n terms (n u) and 1/sum and
 *    the final multiply (2 u); the weighted sum of n terms adds n u of
 *    sum_p w_p |V_pd|. So |out - exact| <= (2 max d + max u|s_p - max| +
 *    (2 EXP_ULPS + 2n + 4) u) * 1.01 * sum_p w_p |V_pd|, + 1e-37 for weights
 *    the SIMD exp flushes below e^-87;
 *  - against ref within twice that;
 *  - out untouched outside its nq x hd floats;
 *  - each head's result bitwise equal to the same head computed alone
 *    (nq = 1), and to the heads split [0, a) + [a, nq) over two calls (what
 *    the forward pass does when it splits a group over threads);
 *  - bitwise equal to the same rows in one contiguous page (the paged KV
 *    cache must not change a bit of the logits). */
static void attn_case_t(const qw_kernels *L, int64_t nq, int64_t hd, int64_t n, int64_t ld, float qmag, int shift,
                        qw_kv_type t) {
    qw_attn_fn attn = qw_attn_for(L, t), attn_ref = qw_attn_for(g_ref, t);
    const char *tn = t == QW_KV_F32 ? "f32" : t == QW_KV_F16 ? "f16" : "bf16";
    const double u = FLT_EPSILON / 2;
    float *qb = malloc((size_t)(nq * hd + 1) * 4), *K = malloc((size_t)(n * ld) * 4);
    float *V = malloc((size_t)(n * ld) * 4), *ob = malloc((size_t)(nq * hd + 9) * 4);
    float *orf = malloc((size_t)(nq * hd) * 4), *o1 = malloc((size_t)(hd + 8) * 4), *o2 = malloc((size_t)(nq * hd) * 4);
    float *S = malloc((size_t)(nq * n) * 4);
    float *q = qb + 1, *out = ob + 1;
    float scale = 1.0f / sqrtf((float)hd);
    for (int64_t i = 0; i < nq * hd; i++) q[i] = frand() * qmag;
    for (int64_t i = 0; i < n * ld; i++) {
        int gap = i % ld >= hd;
        K[i] = gap ? NAN : frand();
        V[i] = gap ? NAN : frand() * 2;
    }
    if (t != QW_KV_F32) { /* the values a 16-bit cache holds: the oracle below uses them */
        uint16_t h;
        for (int64_t i = 0; i < n * ld; i++) {
            g_ref->kv_store16[t](&h, K + i, 1);
            K[i] = t == QW_KV_F16 ? qw_f16_to_f32(h) : qw_bf16_to_f32(h);
            g_ref->kv_store16[t](&h, V + i, 1);
            V[i] = t == QW_KV_F16 ? qw_f16_to_f32(h) : qw_bf16_to_f32(h);
        }
    }
    paged pg, one, f32;
    paged_build_t(&pg, K, V, n, ld, shift, t);
    paged_build_t(&one, K, V, n, ld, 62, t);
    paged_build(&f32, K, V, n, ld, shift);
    for (int64_t i = 0; i < nq * hd + 9; i++) ob[i] = SENTINEL;
    for (int64_t i = 0; i < nq * n; i++) S[i] = 1e30f;
    attn(out, q, nq * hd, 1, nq, hd, &pg.kv, n, scale, S);
    for (int64_t i = 0; i < nq * n; i++) S[i] = -7.0f;
    attn_ref(orf, q, nq * hd, 1, nq, hd, &pg.kv, n, scale, S);
    int bad = 0, bad_guard = 0, bad_split = 0;
    CHECK(ob[0] == SENTINEL, "%s attn wrote before out", L->name);
    for (int64_t i = nq * hd + 1; i < nq * hd + 9; i++)
        if (ob[i] != SENTINEL) bad_guard++;
    double *sc = malloc((size_t)n * sizeof(double)), *dl = malloc((size_t)n * sizeof(double));
    for (int64_t h = 0; h < nq; h++) {
        double mx = -INFINITY, dmax = 0, smax = 0, sum = 0;
        for (int64_t p = 0; p < n; p++) {
            double a = 0, ab = 0;
            for (int64_t i = 0; i < hd; i++) {
                double pr = (double)q[h * hd + i] * K[p * ld + i];
                a += pr;
                ab += fabs(pr);
            }
            sc[p] = a * scale;
            dl[p] = 1.01 * (double)hd * u * ab * scale + u * fabs(sc[p]);
            if (sc[p] > mx) mx = sc[p];
            if (dl[p] > dmax) dmax = dl[p];
        }
        for (int64_t p = 0; p < n; p++) {
            sum += exp(sc[p] - mx);
            if (u * fabs(sc[p] - mx) > smax) smax = u * fabs(sc[p] - mx);
        }
        double rel = (2 * dmax + smax + (2 * EXP_ULPS + 2.0 * (double)n + 4) * u) * 1.01;
        for (int64_t d = 0; d < hd; d++) {
            double ex = 0, mag = 0;
            for (int64_t p = 0; p < n; p++) {
                double w = exp(sc[p] - mx) / sum;
                ex += w * V[p * ld + d];
                mag += w * fabs(V[p * ld + d]);
            }
            double tol = rel * mag + 1e-37;
            double got = out[h * hd + d], e1 = fabs(got - ex), e2 = fabs(got - orf[h * hd + d]);
            if (!(e1 <= tol) || !(e2 <= 2 * tol)) {
                if (g_fail_prints++ < 10)
                    fprintf(stderr, "  %s attn %s nq=%lld hd=%lld n=%lld h=%lld d=%lld: got %.9g ref %.9g exact %.9g tol %.3g\n",
                            L->name, tn, (long long)nq, (long long)hd, (long long)n, (long long)h, (long long)d, got,
                            orf[h * hd + d], ex, tol);
                bad++;
            }
        }
        /* the same head alone */
        attn(o1, q + h * hd, hd, 1, 1, hd, &pg.kv, n, scale, S);
        if (memcmp(o1, out + h * hd, (size_t)hd * 4) != 0) bad_split++;
    }
    int64_t a = nq / 2;
    if (a > 0) {
        attn(o2, q, a * hd, 1, a, hd, &pg.kv, n, scale, S);
        attn(o2 + a * hd, q + a * hd, (nq - a) * hd, 1, nq - a, hd, &pg.kv, n, scale, S);
        if (memcmp(o2, out, (size_t)(nq * hd) * 4) != 0) bad_split++;
    }
    attn(o2, q, nq * hd, 1, nq, hd, &one.kv, n, scale, S);
    int bad_paging = memcmp(o2, out, (size_t)(nq * hd) * 4) != 0;
    /* a 16-bit cache gives the float32 kernel's bits on the same values */
    L->attn(o2, q, nq * hd, 1, nq, hd, &f32.kv, n, scale, S);
    int bad_f32 = memcmp(o2, out, (size_t)(nq * hd) * 4) != 0;
    CHECK(bad == 0, "%s attn %s nq=%lld hd=%lld n=%lld ld=%lld: %d bad", L->name, tn, (long long)nq, (long long)hd,
          (long long)n, (long long)ld, bad);
    CHECK(bad_guard == 0, "%s attn %s nq=%lld hd=%lld n=%lld wrote past out", L->name, tn, (long long)nq,
          (long long)hd, (long long)n);
    CHECK(bad_split == 0, "%s attn %s nq=%lld hd=%lld n=%lld: a head's bits depend on the other heads", L->name, tn,
          (long long)nq, (long long)hd, (long long)n);
    CHECK(bad_paging == 0, "%s attn %s nq=%lld hd=%lld n=%lld: pages of %lld rows change the bits", L->name, tn,
          (long long)nq, (long long)hd, (long long)n, (long long)1 << shift);
    CHECK(bad_f32 == 0, "%s attn %s nq=%lld hd=%lld n=%lld: not the float32 kernel's bits on the same values",
          L->name, tn, (long long)nq, (long long)hd, (long long)n);
    paged_free(&pg);
    paged_free(&one);
    paged_free(&f32);
    free(sc);
    free(dl);
    free(qb);
    free(K);
    free(V);
    free(ob);
    free(orf);
    free(o1);
    free(o2);
    free(S);
}

/* Sizes around every tile edge: hd around the 8/16-float vectors (and 64,
 * 128: Qwen2's head widths), n around the 4/8-row score tiles and the
 * 64-position V blocks, nq around the 4-head V tiles and the 32-head
 * chunks; peaked (qmag 8) and flat (qmag 0.1) softmaxes; pages of 1 row (a
 * page edge inside every tile), 4, 8, 64 (the KV cache's) and one page. */
static void attn_case(const qw_kernels *L, int64_t nq, int64_t hd, int64_t n, int64_t ld, float qmag, int shift) {
    for (int t = 0; t < QW_KV_TYPE_COUNT; t++) attn_case_t(L, nq, hd, n, ld, qmag, shift, (qw_kv_type)t);
}

/* A run of nt tokens (kernels.h: attn): token j over rows 0..n0+j-1, q
 * and out rows ldq apart (ldq > nq * hd: the gaps hold a sentinel that
 * must stay), the scratch exactly qw_attn_scratch floats (ASan sees an
 * overrun). Each token's output must be bitwise the same level's
 * one-token call (a prefill run gives decode's bits); the reference's run
 * must be its own one-token calls too. */
static void attn_run_case(const qw_kernels *L, int64_t nt, int64_t nq, int64_t hd, int64_t n0, int shift,
                          qw_kv_type t) {
    qw_attn_fn attn = qw_attn_for(L, t), attn_ref = qw_attn_for(g_ref, t);
    const char *tn = t == QW_KV_F32 ? "f32" : t == QW_KV_F16 ? "f16" : "bf16";
    int64_t n = n0 + nt - 1, ld = hd + 3, ldq = nq * hd + 5;
    float *q = malloc((size_t)(nt * ldq) * 4), *K = calloc((size_t)(n * ld), 4), *V = calloc((size_t)(n * ld), 4);
    float *out = malloc((size_t)(nt * ldq) * 4), *outr = malloc((size_t)(nt * ldq) * 4);
    float *o1 = malloc((size_t)(nq * hd) * 4);
    int64_t ns = qw_attn_scratch(nt, nq, n0), ns1 = qw_attn_scratch(1, nq, n);
    float *S = malloc((size_t)(ns > ns1 ? ns : ns1) * 4);
    for (int64_t i = 0; i < nt * ldq; i++) q[i] = frand() * 3.0f;
    for (int64_t i = 0; i < n * ld; i++) {
        K[i] = i % ld >= hd ? NAN : frand();
        V[i] = i % ld >= hd ? NAN : frand() * 2;
    }
    paged pg;
    paged_build_t(&pg, K, V, n, ld, shift, t);
    for (int64_t i = 0; i < nt * ldq; i++) out[i] = outr[i] = SENTINEL;
    for (int64_t i = 0; i < ns; i++) S[i] = 1e30f;
    attn(out, q, ldq, nt, nq, hd, &pg.kv, n0, 1.0f / sqrtf((float)hd), S);
    attn_ref(outr, q, ldq, nt, nq, hd, &pg.kv, n0, 1.0f / sqrtf((float)hd), S);
    int bad = 0, bad_ref = 0, bad_gap = 0;
    for (int64_t j = 0; j < nt; j++) {
        attn(o1, q + j * ldq, nq * hd, 1, nq, hd, &pg.kv, n0 + j, 1.0f / sqrtf((float)hd), S);
        bad += memcmp(o1, out + j * ldq, (size_t)(nq * hd) * 4) != 0;
        attn_ref(o1, q + j * ldq, nq * hd, 1, nq, hd, &pg.kv, n0 + j, 1.0f / sqrtf((float)hd), S);
        bad_ref += memcmp(o1, outr + j * ldq, (size_t)(nq * hd) * 4) != 0;
        for (int64_t i = nq * hd; i < ldq; i++) bad_gap += out[j * ldq + i] != SENTINEL;
    }
    CHECK(bad == 0, "%s attn %s run nt=%lld nq=%lld hd=%lld n0=%lld: %d tokens differ from one-token calls", L->name,
          tn, (long long)nt, (long long)nq, (long long)hd, (long long)n0, bad);
    CHECK(bad_ref == 0, "ref attn %s run nt=%lld nq=%lld hd=%lld n0=%lld: %d tokens differ from one-token calls", tn,
          (long long)nt, (long long)nq, (long long)hd, (long long)n0, bad_ref);
    CHECK(bad_gap == 0, "%s attn %s run nt=%lld: wrote between the tokens' rows", L->name, tn, (long long)nt);
    /* The avx512 kernel gives the avx2 kernel's bits (attn_avx512.c: it
     * hands calls of few tokens and heads to it), run and one-token calls. */
    const qw_kernels *a2 = !strcmp(L->name, "avx512") ? kernels_level("avx2") : NULL;
    if (a2) {
        qw_attn_fn attn2 = qw_attn_for(a2, t);
        int bad2 = 0;
        attn2(outr, q, ldq, nt, nq, hd, &pg.kv, n0, 1.0f / sqrtf((float)hd), S);
        for (int64_t j = 0; j < nt; j++) bad2 += memcmp(outr + j * ldq, out + j * ldq, (size_t)(nq * hd) * 4) != 0;
        CHECK(bad2 == 0, "avx512 attn %s run nt=%lld nq=%lld hd=%lld n0=%lld: %d tokens differ from avx2's", tn,
              (long long)nt, (long long)nq, (long long)hd, (long long)n0, bad2);
    }
    paged_free(&pg);
    free(q);
    free(K);
    free(V);
    free(out);
    free(outr);
    free(o1);
    free(S);
}

/* Runs across the 8-row score tiles, the 64-position V blocks and the
 * 32-token chunks, starting at row 1 (a prompt's first token) and later. */
static void check_attn_runs(const qw_kernels *L) {
    static const int64_t nts[] = {1, 2, 3, 7, 8, 9, 16, 33, 70};
    static const int64_t n0s[] = {1, 2, 7, 8, 9, 63, 64, 65, 130};
    static const int64_t hds[] = {64, 12, 17, 128, 8};
    static const int64_t nqs[] = {7, 1, 3, 6, 33};
    int k = 0;
    for (size_t a = 0; a < sizeof nts / sizeof nts[0]; a++)
        for (size_t b = 0; b < sizeof n0s / sizeof n0s[0]; b++, k++) {
            if (nts[a] * n0s[b] > 2000) continue;
            int64_t hd = hds[k % 5], nq = nqs[(k / 5) % 5];
            attn_run_case(L, nts[a], nq, hd, n0s[b], k % 2 ? 6 : 2, (qw_kv_type)(k % QW_KV_TYPE_COUNT));
        }
    attn_run_case(L, 40, 7, 64, 1, 6, QW_KV_F32); /* a prompt's first 40 tokens, Qwen2.5-0.5B's shape */
    attn_run_case(L, 32, 7, 64, 300, 4, QW_KV_F16); /* a 32-token chunk at 300 rows, f16 cache */
    attn_run_case(L, 5, 7, 128, 77, 3, QW_KV_BF16); /* the 1.5B's head width, just past 32 pairs */
}

/* The 16-bit KV store: bitwise the reference's rounding (nearest even;
 * f16 overflow to inf, subnormals, signed zeros, inf, NaN) on lengths
 * around the 8-float vector, unaligned. */
static void check_kv_store(const qw_kernels *L) {
    static const float special[] = {0.0f, -0.0f, 65504.0f, 65520.0f, -1e6f, 1e-7f, -3e-8f, 6.1e-5f, 1e-40f,
                                    INFINITY, -INFINITY, NAN, 1.0009765625f, 1.00048828125f, 3.4e38f};
    for (int t = QW_KV_F16; t < QW_KV_TYPE_COUNT; t++)
        for (int64_t n = 0; n <= 41; n += n < 18 ? 1 : 23) {
            float x[64];
            uint16_t y[66], yr[66];
            for (int64_t i = 0; i < n; i++)
                x[i] = i % 3 == 0 ? special[(i / 3) % (sizeof special / sizeof special[0])] : frand() * 100.0f;
            memset(y, 0xab, sizeof y);
            memset(yr, 0xab, sizeof yr);
            L->kv_store16[t](y + 1, x, n);
            g_ref->kv_store16[t](yr + 1, x, n);
            CHECK(memcmp(y, yr, sizeof y) == 0, "%s kv_store16[%s] n=%lld: not the reference's bits", L->name,
                  t == QW_KV_F16 ? "f16" : "bf16", (long long)n);
        }
}

static void check_attn(const qw_kernels *L) {
    static const int64_t hds[] = {1, 3, 8, 12, 16, 17, 24, 64, 67, 128};
    static const int64_t ns[] = {1, 2, 3, 5, 8, 9, 15, 63, 64, 65, 129, 300};
    static const int64_t nqs[] = {1, 2, 3, 4, 5, 7, 9, 14};
    static const int shifts[] = {0, 2, 3, 6, 62, 1, 4};
    for (size_t a = 0; a < sizeof hds / sizeof hds[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
            int64_t nq = nqs[(a * 5 + b) % (sizeof nqs / sizeof nqs[0])];
            int64_t ld = hds[a] + (b % 3 == 0 ? 0 : (int64_t)(rnd() % 7) + 1);
            int shift = shifts[(a * 3 + b) % (sizeof shifts / sizeof shifts[0])];
            attn_case(L, nq, hds[a], ns[b], ld, b % 2 ? 8.0f : 0.1f, shift);
        }
    attn_case(L, 7, 64, 1000, 64, 4.0f, 6);  /* Qwen2.5-0.5B decode at ~1000 */
    attn_case(L, 33, 16, 70, 16, 2.0f, 3);   /* more heads than one chunk */
    attn_case(L, 40, 64, 20, 64, 1.0f, 0);
    check_attn_runs(L);
}

static void check_conversions(void) {
    CHECK(qw_f16_to_f32(0x3c00) == 1.0f, "f16 1.0");
    CHECK(qw_f16_to_f32(0x0001) == 0x1p-24f, "f16 smallest subnormal");
    CHECK(qw_f16_to_f32(0x03ff) == 1023 * 0x1p-24f, "f16 largest subnormal");
    CHECK(qw_f16_to_f32(0x0400) == 0x1p-14f, "f16 smallest normal");
    CHECK(qw_f16_to_f32(0x7bff) == 65504.0f, "f16 max");
    CHECK(qw_f16_to_f32(0xc000) == -2.0f, "f16 -2");
    CHECK(isinf(qw_f16_to_f32(0x7c00)) && qw_f16_to_f32(0x7c00) > 0, "f16 +inf");
    CHECK(isinf(qw_f16_to_f32(0xfc00)) && qw_f16_to_f32(0xfc00) < 0, "f16 -inf");
    CHECK(isnan(qw_f16_to_f32(0x7e00)), "f16 nan");
    CHECK(signbit(qw_f16_to_f32(0x8000)) && qw_f16_to_f32(0x8000) == 0, "f16 -0");
    CHECK(qw_bf16_to_f32(0x3f80) == 1.0f, "bf16 1.0");
    CHECK(qw_bf16_to_f32(0x0001) == 0x1p-133f, "bf16 smallest subnormal");
    CHECK(isinf(qw_bf16_to_f32(0xff80)) && qw_bf16_to_f32(0xff80) < 0, "bf16 -inf");
    CHECK(qw_dtype_size(QW_BF16) == 2 && qw_dtype_size(QW_F16) == 2 && qw_dtype_size(QW_F32) == 4,
          "dtype sizes");
    CHECK(!strcmp(qw_dtype_name(QW_BF16), "BF16"), "dtype name");
}

/* The generic table fill (init.c) and the traits table agree: every level
 * has every entry (a level is its base with its families laid over it);
 * a type has an integer kernel on every level exactly where qw_type says
 * its activations are QA8; and each SIMD level really carries its own
 * families (its matmul, rmsnorm, attn and matmul_q entries are not the
 * reference's: a family left out of init.c's list fails here). */
static void check_tables(void) {
    const qw_kernels *ref = kernels_level("ref");
    const char *const *names = kernels_level_names();
    for (int i = 0; names[i]; i++) {
        const qw_kernels *L = kernels_level(names[i]);
        if (!L) continue;
        int missing = 0, wrong_q = 0;
        for (int t = 0; t < QW_DTYPE_COUNT; t++) {
            missing += !L->matmul[t] + !L->to_f32[t];
            wrong_q += (L->matmul_q[t] != NULL) != (qw_type((qw_dtype)t)->act == QW_ACT_QA8);
            if (L->matmul_bf16act[t] && qw_type((qw_dtype)t)->act != QW_ACT_BF16) wrong_q++;
        }
        missing += !L->quantize_qa8 + !L->to_bf16 + !L->quantize_q8_0 + !L->rmsnorm + !L->silu_mul + !L->add + !L->attn;
        for (int t = QW_KV_F16; t < QW_KV_TYPE_COUNT; t++) missing += !L->attn16[t] + !L->kv_store16[t];
        CHECK(missing == 0, "%s: %d table entries missing", L->name, missing);
        CHECK(wrong_q == 0, "%s: %d integer / bf16 kernels disagree with qw_type's activation format", L->name, wrong_q);
        if (L != ref)
            CHECK(L->matmul[QW_F32] != ref->matmul[QW_F32] && L->rmsnorm != ref->rmsnorm && L->attn != ref->attn &&
                      L->attn16[QW_KV_F16] != ref->attn16[QW_KV_F16] &&
                      L->attn16[QW_KV_BF16] != ref->attn16[QW_KV_BF16] &&
                      L->matmul_q[QW_Q8_0] != ref->matmul_q[QW_Q8_0],
                  "%s: its own families are installed", L->name);
    }
    /* the traits agree with the dtype helpers and with GGML's block sizes */
    CHECK(qw_type(QW_Q8_0)->bytes == 34 && qw_type(QW_Q4_K)->bytes == 144 && qw_type(QW_Q6_K)->bytes == 210 &&
              qw_type(QW_Q5_1)->block == 32 && qw_type(QW_Q5_K)->block == 256 && qw_type(QW_BF16)->block == 1,
          "type traits: GGML's block sizes");
}

static void check_dispatch(void) {
    qw_err err;
    const char *const *names = kernels_level_names();
    CHECK(names[0] && !strcmp(names[0], "ref"), "first level is ref");
    CHECK(kernels_level("ref") != NULL, "ref always available");
    CHECK(kernels_level("bogus") == NULL, "unknown level");
    for (int i = 0; names[i]; i++) {
        const qw_kernels *L = kernels_level(names[i]);
        if (L) CHECK(!strcmp(L->name, names[i]), "table name %s", names[i]);
    }
    setenv("QWENC_ISA", "bogus", 1);
    err.msg[0] = 0;
    CHECK(kernels_init(&err) == -1 && strstr(err.msg, "bogus"), "QWENC_ISA=bogus rejected: %s",
          err.msg);
    setenv("QWENC_ISA", "ref", 1);
    CHECK(kernels_init(&err) == 0 && !strcmp(kernels()->name, "ref"), "QWENC_ISA=ref");
#if defined(__x86_64__)
    setenv("QWENC_ISA", "neon", 1);
    CHECK(kernels_init(&err) == -1, "QWENC_ISA=neon rejected on x86-64");
    setenv("QWENC_ISA", "avx512", 1);
    CHECK((kernels_init(&err) == 0) == (kernels_level("avx512") != NULL),
          "QWENC_ISA=avx512 accepted iff the CPU has it");
#endif
    unsetenv("QWENC_ISA");
    CHECK(kernels_init(&err) == 0, "auto level: %s", err.msg);
    const char *best = kernels()->name;
    CHECK(kernels_use("nope", &err) == -1, "kernels_use unknown");
    CHECK(kernels_use("ref", &err) == 0 && kernels() == kernels_level("ref"), "kernels_use ref");
    CHECK(kernels_use(best, &err) == 0, "kernels_use best");
}

int main(void) {
    check_conversions();
    check_dispatch();
    check_tables();
    g_ref = kernels_level("ref");
    const char *const *names = kernels_level_names();
    printf("cpu: %s\n", kernels_cpu_features());
    for (int i = 0; names[i]; i++) {
        const qw_kernels *L = kernels_level(names[i]);
        if (!L) {
            printf("level %s: compiled in, not supported by this CPU/OS: skipped\n", names[i]);
            continue;
        }
        printf("level %s: checking\n", names[i]);
        int before = test_failed_;
        check_to_f32(L);
        check_vec(L);
        check_exp_kernels(L);
        check_matmul(L);
        check_batch_invariance(L);
        check_block_types_match_f32(L);
        check_attn(L);
        check_kv_store(L);
        printf("level %s: %s\n", names[i], test_failed_ == before ? "ok" : "FAILED");
    }
    return test_summary();
}
