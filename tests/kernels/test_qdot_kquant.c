/* test_qdot_kquant.c - the integer path of the K-quants (matmul_q of Q4_K,
 * Q5_K, Q6_K with QA8 activation rows; kernels.h) on every level this CPU
 * runs.
 *
 *  - the reference is within a tight float32 bound of the float64 dot of the
 *    dequantized weights (the reference to_f32) with the dequantized QA8
 *    activations (dx * qx), and within a loose bound (plus the activation
 *    rounding, dx / 2 per element) of the dot with the float activations;
 *  - every level's matmul_q equals the reference bit for bit for
 *    n in {1, 2, 3, 5, 7, 8, 9, 17, 39, 64}, 19 rows (no multiple of 4 or 8),
 *    k in {256, 768, 4864}, o0..o1 sub-ranges, an odd weight address and a
 *    padded activation stride; rows outside o0..o1 are untouched;
 *  - batch invariance: each row of an n-token product is bitwise the
 *    1-token product of that token;
 *  - where the CPU has AVX512-VNNI, the avx512 level has its own kernels;
 *  - the 8-bit integer sums cannot overflow: blocks with the extreme quants
 *    and scales (the bounds in kquant_ref.c) against activations of
 *    +-127 give the exact float64 result.
 * The activations are quantized by a copy of the QA8 rule written here (the
 * rule in kernels.h is exact); when the table has quantize_qa8 it must give
 * the same bytes.
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
#if defined(QW_TEST_AVX512_EMU)
#include "avx512_emu.h"
#endif

/* The QA8 rule of kernels.h, spelled out independently of the kernels. */
static void qa8_quantize(void *dst, const float *x, int64_t k) {
    int8_t *q = dst;
    float *dd = (float *)((uint8_t *)dst + k);
    int32_t *ss = (int32_t *)((uint8_t *)dst + k + 4 * (k / 32));
    float *dds = (float *)((uint8_t *)dst + k + 8 * (k / 32));
    int16_t *hh = (int16_t *)((uint8_t *)dst + k + 12 * (k / 32));
    for (int64_t b = 0; b < k / 32; b++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
        float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t s = 0, half[2] = {0, 0};
        for (int i = 0; i < 32; i++) {
            float v = rintf(x[32 * b + i] * id); /* round half even (default mode) */
            q[32 * b + i] = (int8_t)v;
            s += (int32_t)v;
            half[i / 16] += (int32_t)v;
        }
        hh[2 * b] = (int16_t)half[0];
        hh[2 * b + 1] = (int16_t)half[1];
        dd[b] = d;
        ss[b] = s;
        dds[b] = d * (float)s;
    }
}

static const struct {
    qw_dtype dt;
    int bytes;
} k_types[] = {{QW_Q4_K, 144}, {QW_Q6_K, 210}, {QW_Q5_K, 176}};
#define N_TYPES (int)(sizeof k_types / sizeof k_types[0])

static void put_f16(uint8_t *p, float v) {
    uint16_t h = qw_f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* Random super-blocks with the scales of real files: d (and dmin) binary16
 * around 2^-10 .. 2^-5, random 6-bit / int8 sub-block scales and quants;
 * now and then a zero d or dmin. extreme: every quant and scale at its
 * largest magnitude (the integer bounds). */
static void fill_blocks(uint8_t *w, int64_t nblk, qw_dtype dt, int extreme) {
    const int bytes = (int)qw_dtype_row_bytes(dt, 256);
    for (int64_t i = 0; i < nblk * bytes; i++) w[i] = extreme ? 0xff : (uint8_t)rnd();
    for (int64_t B = 0; B < nblk; B++) {
        uint8_t *b = w + B * bytes;
        float d = (0.25f + 0.75f * fabsf(frand())) * ldexpf(1.0f, -5 - (int)(rnd() % 6));
        float dmin = (0.25f + 0.75f * fabsf(frand())) * ldexpf(1.0f, -6 - (int)(rnd() % 6));
        if (!extreme && rnd() % 16 == 0) d = 0.0f;
        if (!extreme && rnd() % 16 == 0) dmin = 0.0f;
        if (dt == QW_Q6_K) {
            if (extreme) {
                memset(b, 0, 192); /* q = 0: q - 32 = -32, the largest magnitude */
                memset(b + 192, 0x80, 16); /* sc = -128 */
            }
            put_f16(b + 208, d);
        } else {
            put_f16(b, d);
            put_f16(b + 2, dmin);
        }
    }
}

/* Per weight, an upper bound of the magnitudes the integer path adds up
 * before cancellation: |d sc q| + |dmin mn| (Q4_K, Q5_K) or |w| (Q6_K). */
static void weight_mags(float *m, const uint8_t *w, int64_t nblk, qw_dtype dt, const float *wf) {
    const int bytes = (int)qw_dtype_row_bytes(dt, 256);
    for (int64_t B = 0; B < nblk; B++) {
        const uint8_t *b = w + B * bytes;
        if (dt == QW_Q6_K) {
            for (int i = 0; i < 256; i++) m[256 * B + i] = fabsf(wf[256 * B + i]);
            continue;
        }
        uint16_t h[2];
        memcpy(h, b, 4);
        float d = fabsf(qw_f16_to_f32(h[0])), dmin = fabsf(qw_f16_to_f32(h[1]));
        for (int j = 0; j < 8; j++) {
            int sc, mn;
            qw_kquant_scale_min(b + 4, j, &sc, &mn);
            for (int l = 0; l < 32; l++) m[256 * B + 32 * j + l] = d * (float)sc * 31.0f + dmin * (float)mn;
        }
    }
}

static const float *qa8_d(const uint8_t *row, int64_t k) { return (const float *)(row + k); }

/* Reference against float64: tight bound with the dequantized activations,
 * loose bound with the float ones. */
static void check_ref_accuracy(const qw_kernels *ref, int ti, int64_t k, int extreme) {
    const qw_dtype dt = k_types[ti].dt;
    const char *tn = qw_dtype_name(dt);
    const int64_t rows = 7, n = 5, nblk = k / 256, rb = qw_dtype_row_bytes(dt, k), xb = qw_qa8_row_bytes(k);
    uint8_t *W = malloc((size_t)(rows * rb));
    float *Wf = malloc(sizeof(float) * (size_t)(rows * k)), *M = malloc(sizeof(float) * (size_t)(rows * k));
    float *X = malloc(sizeof(float) * (size_t)(n * k)), *Y = malloc(sizeof(float) * (size_t)(n * rows));
    uint8_t *XQ = malloc((size_t)(n * xb));
    fill_blocks(W, rows * nblk, dt, extreme);
    ref->to_f32[dt](Wf, W, rows * k);
    weight_mags(M, W, rows * nblk, dt, Wf);
    for (int64_t t = 0; t < n; t++) {
        for (int64_t i = 0; i < k; i++) {
            float v = frand() * (1.0f + 3.0f * (float)(rnd() % 2)); /* mixed block ranges */
            if (rnd() % 97 == 0) v *= 20.0f;                        /* an outlier now and then */
            X[t * k + i] = extreme ? ((t % 2) ? 1.0f : -1.0f) : v; /* one sign: no cancellation */
        }
        if (!extreme && t == 1)
            for (int i = 0; i < 32; i++) X[t * k + 32 + i] = 0.0f; /* an all-zero block: d = 0 */
        qa8_quantize(XQ + t * xb, X + t * k, k);
    }
    ref->matmul_q[dt](Y, rows, XQ, xb, n, W, k, 0, rows);
    int bad_tight = 0, bad_loose = 0;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *xr = XQ + t * xb;
        const int8_t *qx = (const int8_t *)xr;
        const float *dx = qa8_d(xr, k);
        for (int64_t o = 0; o < rows; o++) {
            double exq = 0, exf = 0, S = 0, R = 0;
            for (int64_t i = 0; i < k; i++) {
                double xq = (double)dx[i / 32] * qx[i], w = Wf[o * k + i];
                exq += w * xq;
                exf += w * X[t * k + i];
                S += (double)M[o * k + i] * fabs(xq);
                R += fabs(w) * 0.5 * dx[i / 32]; /* |x - dx qx| <= dx / 2 (+ rounding) */
            }
            /* per lane 2 k / 256 fma; per term two product roundings (d sc,
             * then times dot; dmin mn and dx s), 3 tree levels */
            double tight = (2.0 * (double)k / 256 + 7) * (FLT_EPSILON / 2) * 1.01 * S + 1e-30;
            double got = Y[t * rows + o];
            if (!(fabs(got - exq) <= tight)) {
                if (bad_tight++ < 3)
                    fprintf(stderr, "  %s k=%lld t=%lld o=%lld: %.9g vs %.9g (bound %.3g)\n", tn, (long long)k,
                            (long long)t, (long long)o, got, exq, tight);
            }
            if (!(fabs(got - exf) <= tight + 1.01 * R + 1e-6 * S)) bad_loose++;
        }
    }
    CHECK(bad_tight == 0, "ref matmul_q %s k=%lld%s within the float32 bound of the float64 dot with the QA8 "
          "activations (%d bad)", tn, (long long)k, extreme ? " (extreme blocks)" : "", bad_tight);
    CHECK(bad_loose == 0, "ref matmul_q %s k=%lld%s within the QA8 rounding bound of the float64 dot with the float "
          "activations (%d bad)", tn, (long long)k, extreme ? " (extreme blocks)" : "", bad_loose);
    free(W);
    free(Wf);
    free(M);
    free(X);
    free(Y);
    free(XQ);
}

/* Level L against the reference, bitwise, and batch invariance. */
static void check_level(const qw_kernels *L, const qw_kernels *ref, int ti, int64_t k) {
    const qw_dtype dt = k_types[ti].dt;
    const char *tn = qw_dtype_name(dt);
    static const int64_t ns[] = {1, 2, 3, 5, 7, 8, 9, 17, 39, 64};
    const int64_t rows = 19, nmax = 64, ldy = rows + 3, nblk = k / 256, rb = qw_dtype_row_bytes(dt, k);
    const int64_t xb = qw_qa8_row_bytes(k) + 8; /* a padded stride: the kernels must use ldxq */
    uint8_t *raw = malloc((size_t)(rows * rb + 1)), *W = raw + 1; /* odd address, as in a mapped file */
    float *X = malloc(sizeof(float) * (size_t)k);
    uint8_t *XQ = malloc((size_t)(nmax * xb));
    float *y1 = malloc(sizeof(float) * (size_t)(nmax * rows)), *yr = malloc(sizeof(float) * (size_t)(nmax * rows));
    float *Y = malloc(sizeof(float) * (size_t)(nmax * ldy));
    fill_blocks(W, rows * nblk, dt, 0);
    for (int64_t t = 0; t < nmax; t++) {
        for (int64_t i = 0; i < k; i++) X[i] = frand() * (1.0f + (float)(rnd() % 4));
        if (t == 3)
            for (int i = 0; i < 32; i++) X[64 + i] = 0.0f;
        qa8_quantize(XQ + t * xb, X, k);
        memset(XQ + t * xb + qw_qa8_row_bytes(k), 0x5a, 8);
    }
    /* one token at a time, whole range: the reference values and L's */
    for (int64_t t = 0; t < nmax; t++) {
        ref->matmul_q[dt](yr + t * rows, rows, XQ + t * xb, xb, 1, W, k, 0, rows);
        L->matmul_q[dt](y1 + t * rows, rows, XQ + t * xb, xb, 1, W, k, 0, rows);
    }
    int bad = 0;
    for (int64_t i = 0; i < nmax * rows; i++)
        if (memcmp(&y1[i], &yr[i], sizeof(float)) && bad++ < 3)
            fprintf(stderr, "  %s %s k=%lld t=%lld o=%lld: %a, ref %a\n", L->name, tn, (long long)k,
                    (long long)(i / rows), (long long)(i % rows), y1[i], yr[i]);
    CHECK(bad == 0, "%s matmul_q %s k=%lld n=1 == ref bit for bit (%d differ)", L->name, tn, (long long)k, bad);
    const int64_t ranges[][2] = {{0, rows}, {1, rows - 2}, {3, 8}, {5, 6}, {0, 4}, {9, 18}, {18, 19}};
    bad = 0;
    int outside = 0;
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int64_t n = ns[ni];
        for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
            const int64_t o0 = ranges[ri][0], o1 = ranges[ri][1];
            for (int64_t i = 0; i < nmax * ldy; i++) Y[i] = 12345.5f;
            /* tokens nmax - n .. nmax - 1: a token's place differs from the n = 1 run */
            L->matmul_q[dt](Y, ldy, XQ + (nmax - n) * xb, xb, n, W, k, o0, o1);
            for (int64_t t = 0; t < n; t++) {
                if (memcmp(Y + t * ldy + o0, yr + (nmax - n + t) * rows + o0, (size_t)(o1 - o0) * sizeof(float)))
                    bad++;
                for (int64_t o = 0; o < ldy; o++)
                    if ((o < o0 || o >= o1) && Y[t * ldy + o] != 12345.5f) outside++;
            }
            for (int64_t t = n; t < nmax; t++)
                for (int64_t o = 0; o < ldy; o++)
                    if (Y[t * ldy + o] != 12345.5f) outside++;
        }
    }
    CHECK(bad == 0, "%s matmul_q %s k=%lld: every row of n = 1..64 tokens and o0..o1 sub-ranges == ref's 1-token "
          "product, bit for bit (%d differ)", L->name, tn, (long long)k, bad);
    CHECK(outside == 0, "%s matmul_q %s k=%lld writes only rows o0..o1 of n tokens (%d stray)", L->name, tn,
          (long long)k, outside);
    free(raw);
    free(X);
    free(XQ);
    free(y1);
    free(yr);
    free(Y);
}

/* When a level has quantize_qa8, it is the rule above, byte for byte. */
static void check_quantizer(const qw_kernels *L) {
    if (!L->quantize_qa8) return;
    const int64_t k = 4864, xb = qw_qa8_row_bytes(k);
    float *X = malloc(sizeof(float) * (size_t)k);
    uint8_t *a = calloc(1, (size_t)xb), *b = calloc(1, (size_t)xb);
    for (int64_t i = 0; i < k; i++) X[i] = frand() * (1.0f + (float)(rnd() % 8));
    for (int i = 0; i < 32; i++) X[i] = 0.0f;
    qa8_quantize(a, X, k);
    L->quantize_qa8(b, X, k);
    CHECK(memcmp(a, b, (size_t)xb) == 0, "%s quantize_qa8 == this test's QA8 rule, byte for byte", L->name);
    free(X);
    free(a);
    free(b);
}

/* Level L's quantizer and every type's matmul_q at every k. */
static void check_all(const qw_kernels *L, const qw_kernels *ref, const int64_t *ks, size_t nks) {
    check_quantizer(L);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const int before = test_failed_;
        CHECK(L->matmul_q[k_types[ti].dt] != NULL, "%s has matmul_q %s", L->name, qw_dtype_name(k_types[ti].dt));
        if (!L->matmul_q[k_types[ti].dt]) continue;
        for (size_t ki = 0; ki < nks; ki++) check_level(L, ref, ti, ks[ki]);
        printf("level %s: matmul_q %s %s\n", L->name, qw_dtype_name(k_types[ti].dt),
               test_failed_ == before ? "ok" : "FAILED");
    }
}

int main(void) {
    /* 13312: rows too long for the AVX-512 prefill's stack buffers (it then
     * falls back to the tiles); 4864: several token blocks there */
    static const int64_t ks[] = {256, 768, 4864, 13312};
    const qw_kernels *ref = kernels_level("ref");
    CHECK(ref != NULL, "ref level");
    if (!ref) return test_summary();
    for (int ti = 0; ti < N_TYPES; ti++) {
        CHECK(ref->matmul_q[k_types[ti].dt] != NULL, "ref has matmul_q %s", qw_dtype_name(k_types[ti].dt));
        if (!ref->matmul_q[k_types[ti].dt]) return test_summary();
        for (int ki = 0; ki < 3; ki++) check_ref_accuracy(ref, ti, ks[ki], 0);
        check_ref_accuracy(ref, ti, 768, 1);
    }
    const char *const *names = kernels_level_names();
    for (int i = 0; names[i]; i++)
        if (kernels_level(names[i])) check_all(kernels_level(names[i]), ref, ks, sizeof ks / sizeof ks[0]);
#if defined(QW_TEST_AVX512_EMU)
    const qw_kernels emu = avx512_emu_level();
    check_all(&emu, ref, ks, sizeof ks / sizeof ks[0]);
#endif
    /* where the CPU has AVX512-VNNI, the avx512 level runs its own vpdpbusd
     * kernels (checked above like every level), not avx2's */
    const qw_kernels *a2 = kernels_level("avx2"), *a5 = kernels_level("avx512");
    if (a2 && a5 && (kernels_cpu_flags() & QW_CPU_AVX512VNNI))
        for (int ti = 0; ti < N_TYPES; ti++)
            CHECK(a5->matmul_q[k_types[ti].dt] != a2->matmul_q[k_types[ti].dt],
                  "avx512 matmul_q %s is the AVX512-VNNI kernel", qw_dtype_name(k_types[ti].dt));
    /* and the neon level its own (kquant_neon.c), not the reference's */
    const qw_kernels *nn = kernels_level("neon");
    if (nn && (kernels_cpu_flags() & QW_CPU_NEON))
        for (int ti = 0; ti < N_TYPES; ti++)
            CHECK(nn->matmul_q[k_types[ti].dt] != ref->matmul_q[k_types[ti].dt], "neon matmul_q %s is kquant_neon.c's",
                  qw_dtype_name(k_types[ti].dt));
    return test_summary();
}
