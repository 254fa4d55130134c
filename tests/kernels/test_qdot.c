/* test_qdot.c - the integer path of the block-32 types (kernels.h: QA8,
 * quantize_qa8, matmul_q): every level the CPU runs against the plain-C
 * reference bit for bit (odd sizes, tails, sub-ranges, batch invariance),
 * and the reference itself against a double-precision dot product of the
 * dequantized weights with the dequantized activations (tight) and with
 * the float32 activations (loose: 8-bit activation quantization error). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "test.h"
#define TEST_RNG_SEED 0x51ed270b9e3779b9ull
#include "test_rng.h"
#if defined(QW_TEST_AVX512_EMU)
#include "avx512_emu.h"
#endif

static const struct {
    qw_dtype dt;
    int bytes;
    int n_f16;   /* binary16 fields at the block start (d, m) */
} k_types[] = {
    {QW_Q8_0, 34, 1}, {QW_Q4_0, 18, 1}, {QW_Q4_1, 20, 2}, {QW_Q5_0, 22, 1}, {QW_Q5_1, 24, 2},
};
#define N_TYPES (int)(sizeof k_types / sizeof k_types[0])

/* Random blocks: random quant bytes, d a realistic binary16 scale (some 0),
 * m negative like a real Q4_1 / Q5_1 minimum. */
static void fill_blocks(uint8_t *w, int64_t nblocks, int ti) {
    const int bs = k_types[ti].bytes;
    for (int64_t i = 0; i < nblocks * bs; i++) w[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < nblocks; b++) {
        float d = (0.5f + 0.5f * fabsf(frand())) * ldexpf(1.0f, -(int)(rnd() % 6) - 6);
        if (rnd() % 32 == 0) d = 0.0f;
        uint16_t h = qw_f32_to_f16(d);
        memcpy(w + b * bs, &h, 2);
        if (k_types[ti].n_f16 == 2) {
            h = qw_f32_to_f16(-8.0f * d * fabsf(frand()));
            memcpy(w + b * bs + 2, &h, 2);
        }
    }
}

/* Activations like a hidden state: mostly small, a few outliers, some all-zero blocks. */
static void fill_x(float *x, int64_t k) {
    for (int64_t i = 0; i < k; i++) x[i] = frand() * (rnd() % 64 == 0 ? 20.0f : 1.0f);
    for (int64_t b = 0; b < k / 32; b++)
        if (rnd() % 13 == 0) memset(x + 32 * b, 0, 32 * sizeof(float));
}

static void check_quantize(const qw_kernels *L, const qw_kernels *ref) {
    static const int64_t ks[] = {32, 64, 96, 896, 4864, 4896};
    int bad = 0;
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        int64_t k = ks[i], rb = qw_qa8_row_bytes(k);
        float *x = malloc((size_t)k * sizeof(float));
        uint8_t *a = malloc((size_t)rb), *b = malloc((size_t)rb);
        fill_x(x, k);
        x[0] = 0.5f * (float)(k % 7); /* ties of x * id */
        memset(a, 0xa5, (size_t)rb);
        memset(b, 0x5a, (size_t)rb);
        ref->quantize_qa8(a, x, k);
        L->quantize_qa8(b, x, k);
        if (memcmp(a, b, (size_t)rb)) bad++;
        /* the rule: q in [-127, 127], s their sum, d = amax / 127 */
        for (int64_t bl = 0; bl < k / 32; bl++) {
            const int8_t *q = (const int8_t *)a + 32 * bl;
            float d, amax = 0.0f;
            int32_t s, sum = 0;
            memcpy(&d, a + k + 4 * bl, 4);
            memcpy(&s, a + k + 4 * (k / 32) + 4 * bl, 4);
            float ds;
            memcpy(&ds, a + k + 8 * (k / 32) + 4 * bl, 4);
            if (ds != d * (float)s) bad++;
            int16_t h[2];
            memcpy(h, a + k + 12 * (k / 32) + 4 * bl, 4);
            int32_t h0 = 0;
            for (int j = 0; j < 16; j++) h0 += q[j];
            if (h[0] != h0 || h[0] + h[1] != s) bad++;
            for (int j = 0; j < 32; j++) {
                sum += q[j];
                if (q[j] < -127) bad++;
                if (fabsf(x[32 * bl + j]) > amax) amax = fabsf(x[32 * bl + j]);
            }
            if (sum != s || d != amax / 127.0f) bad++;
            for (int j = 0; j < 32; j++)
                if (fabsf((float)q[j] * d - x[32 * bl + j]) > 0.5001f * d) bad++;
        }
        free(x);
        free(a);
        free(b);
    }
    CHECK(bad == 0, "%s quantize_qa8 == ref bytes, and follows the rule (q, d, s, ds, h; %d bad)", L->name, bad);
    /* amax 127: id = 1, so x * id lands exactly on halves: rounded to even */
    float x[32] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 3.5f};
    static const int8_t want[10] = {127, 0, 2, 2, 0, -2, -2, 126, -126, 4};
    uint8_t q[48];
    L->quantize_qa8(q, x, 32);
    int32_t s;
    memcpy(&s, q + 36, 4);
    CHECK(!memcmp(q, want, 10) && s == 127 + 2 + 2 - 2 - 2 + 126 - 126 + 4,
          "%s quantize_qa8 rounds halves to even (s = %d)", L->name, (int)s);
}

/* The reference against double precision: tight vs dequantized QA8 x
 * dequantized weights, loose vs the float32 activations. */
static void check_ref_accuracy(const qw_kernels *ref, int ti) {
    const qw_dtype dt = k_types[ti].dt;
    const int64_t k = 4896, rows = 9, n = 3, nb = k / 32, rq = qw_qa8_row_bytes(k);
    uint8_t *W = malloc((size_t)(rows * nb * k_types[ti].bytes));
    float *Wf = malloc((size_t)(rows * k) * sizeof(float)), *X = malloc((size_t)(n * k) * sizeof(float));
    uint8_t *XQ = malloc((size_t)(n * rq));
    float *Y = malloc((size_t)(n * rows) * sizeof(float));
    fill_blocks(W, rows * nb, ti);
    ref->to_f32[dt](Wf, W, rows * k);
    for (int64_t t = 0; t < n; t++) {
        fill_x(X + t * k, k);
        ref->quantize_qa8(XQ + t * rq, X + t * k, k);
    }
    ref->matmul_q[dt](Y, rows, XQ, rq, n, W, k, 0, rows);
    int bad_tight = 0, bad_loose = 0;
    double worst_loose = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = 0; o < rows; o++) {
            const uint8_t *xr = XQ + t * rq;
            double eq = 0, ef = 0, S = 0, Sf = 0;
            for (int64_t i = 0; i < k; i++) {
                float dx;
                memcpy(&dx, xr + k + 4 * (i / 32), 4);
                double xq = (double)dx * (double)((const int8_t *)xr)[i];
                double w = Wf[o * k + i];
                eq += w * xq;
                S += fabs(w * xq);
                ef += w * X[t * k + i];
                Sf += fabs(w * X[t * k + i]);
            }
            double y = Y[t * rows + o];
            /* per block: d*dx rounded, one fma, the lanes and the tree: a few
             * float32 roundings relative to the absolute sum */
            if (!(fabs(y - eq) <= 8.0 * FLT_EPSILON * S * (1.0 + nb / 64.0) + 1e-30)) bad_tight++;
            double rel = fabs(y - ef) / (Sf + 1e-30);
            if (rel > worst_loose) worst_loose = rel;
            if (!(rel <= 4e-3)) bad_loose++;
        }
    CHECK(bad_tight == 0, "ref matmul_q %s within float32 rounding of the exact dot of the dequantized operands (%d bad)",
          qw_dtype_name(dt), bad_tight);
    CHECK(bad_loose == 0, "ref matmul_q %s within 8-bit quantization error of the float32 activations (worst %.2e)",
          qw_dtype_name(dt), worst_loose);
    free(W);
    free(Wf);
    free(X);
    free(XQ);
    free(Y);
}

static void check_type(const qw_kernels *L, const qw_kernels *ref, int ti) {
    const qw_dtype dt = k_types[ti].dt;
    const char *tn = qw_dtype_name(dt);
    static const int64_t ks[] = {32, 96, 896, 4864, 4896};
    static const int64_t ns[] = {1, 2, 3, 5, 8, 9, 17, 64};
    CHECK(L->matmul_q[dt] != NULL, "%s has matmul_q %s", L->name, tn);
    if (!L->matmul_q[dt]) return;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int64_t k = ks[ki], rows = 37, nmax = 64, nb = k / 32, ldy = rows + 3;
        const int64_t rq = qw_qa8_row_bytes(k), ldxq = rq + 8; /* a stride larger than the row */
        uint8_t *raw = malloc((size_t)(rows * nb * k_types[ti].bytes + 1));
        uint8_t *W = raw + 1; /* odd address: the mapping gives no alignment */
        float *x = malloc((size_t)k * sizeof(float));
        uint8_t *XQ = malloc((size_t)(nmax * ldxq));
        float *y1 = malloc((size_t)(nmax * rows) * sizeof(float)), *yr = malloc((size_t)(nmax * rows) * sizeof(float));
        float *Y = malloc((size_t)(nmax * ldy) * sizeof(float));
        fill_blocks(W, rows * nb, ti);
        for (int64_t t = 0; t < nmax; t++) {
            fill_x(x, k);
            ref->quantize_qa8(XQ + t * ldxq, x, k);
        }
        /* reference, all tokens at once; the level, one token at a time */
        ref->matmul_q[dt](yr, rows, XQ, ldxq, nmax, W, k, 0, rows);
        for (int64_t t = 0; t < nmax; t++) L->matmul_q[dt](y1 + t * rows, rows, XQ + t * ldxq, ldxq, 1, W, k, 0, rows);
        CHECK(memcmp(yr, y1, (size_t)(nmax * rows) * sizeof(float)) == 0, "%s matmul_q %s k=%lld n=1 == ref bitwise",
              L->name, tn, (long long)k);
        const int64_t ranges[][2] = {{0, rows}, {1, rows - 2}, {3, 8}, {5, 6}, {0, 4}, {36, 37}, {4, 20}};
        int bad = 0;
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
                int64_t n = ns[ni], o0 = ranges[ri][0], o1 = ranges[ri][1];
                int64_t tofs = n < nmax ? (int64_t)(rnd() % (uint64_t)(nmax - n + 1)) : 0; /* a row t among others */
                for (int64_t i = 0; i < nmax * ldy; i++) Y[i] = 12345.5f;
                L->matmul_q[dt](Y, ldy, XQ + tofs * ldxq, ldxq, n, W, k, o0, o1);
                for (int64_t t = 0; t < n; t++) {
                    if (memcmp(Y + t * ldy + o0, yr + (tofs + t) * rows + o0, (size_t)(o1 - o0) * sizeof(float)))
                        bad++;
                    for (int64_t o = 0; o < ldy; o++)
                        if ((o < o0 || o >= o1) && Y[t * ldy + o] != 12345.5f) bad++;
                }
            }
        CHECK(bad == 0, "%s matmul_q %s k=%lld: n in {1..64}, sub-ranges: bitwise ref, nothing outside written (%d bad)",
              L->name, tn, (long long)k, bad);
        free(raw);
        free(x);
        free(XQ);
        free(y1);
        free(yr);
        free(Y);
    }
}

int main(void) {
    CHECK(qw_qa8_row_bytes(896) == 896 + 28 * 16 && qw_qa8_row_bytes(32) % 4 == 0, "QA8 row bytes");
    const qw_kernels *ref = kernels_level("ref");
    for (int ti = 0; ti < N_TYPES; ti++) {
        CHECK(qw_dtype_row_bytes(k_types[ti].dt, 32) == k_types[ti].bytes, "%s block bytes",
              qw_dtype_name(k_types[ti].dt));
        check_ref_accuracy(ref, ti);
    }
    const char *const *names = kernels_level_names();
    for (int i = 0; names[i]; i++) {
        const qw_kernels *L = kernels_level(names[i]);
        if (!L) {
            printf("level %s: not supported by this CPU, skipped\n", names[i]);
            continue;
        }
        check_quantize(L, ref);
        for (int ti = 0; ti < N_TYPES; ti++) check_type(L, ref, ti);
    }
#if defined(QW_TEST_AVX512_EMU)
    const qw_kernels emu = avx512_emu_level();
    check_quantize(&emu, ref);
    for (int ti = 0; ti < N_TYPES; ti++) check_type(&emu, ref, ti);
#endif
    return test_summary();
}
