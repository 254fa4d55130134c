/* test_bf16act.c - the bf16-activation path (kernels.h: to_bf16,
 * matmul_bf16act): every level the CPU runs against the plain-C reference
 * (bf16act_ref.c) bit for bit, on odd sizes and tails, every n in
 * {1..9, 17, 64}, o0/o1 sub-ranges, batch invariance (a token alone gives
 * the bits it gets in a batch), special values (ties, NaN, infinities,
 * subnormals: DAZ / FTZ); and the reference against a double-precision dot
 * product of the same bf16 values (so the reference itself is a dot
 * product, not just self-consistent). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "test.h"
#define TEST_RNG_SEED 0xbf16bf16d07d07ull
#include "test_rng.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The reference's rounding on hand-picked values. */
static void check_ref_rounding(void) {
    CHECK(kernels_f32_to_bf16_ref(1.0f) == 0x3f80, "1.0");
    CHECK(kernels_f32_to_bf16_ref(from_bits(0x3f808000u)) == 0x3f80, "tie to even (down)");
    CHECK(kernels_f32_to_bf16_ref(from_bits(0x3f818000u)) == 0x3f82, "tie to even (up)");
    CHECK(kernels_f32_to_bf16_ref(from_bits(0x3f808001u)) == 0x3f81, "above the tie");
    CHECK(kernels_f32_to_bf16_ref(from_bits(0x7f7fffffu)) == 0x7f80, "FLT_MAX rounds to inf");
    CHECK(kernels_f32_to_bf16_ref(-INFINITY) == 0xff80, "-inf");
    CHECK((kernels_f32_to_bf16_ref(NAN) & 0x7fc0) == 0x7fc0, "NaN stays a quiet NaN");
    CHECK(kernels_f32_to_bf16_ref(from_bits(0x807fffffu)) == 0x8000, "subnormal -> signed zero");
}

/* Special and random floats for to_bf16. */
static float special(uint64_t r) {
    static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u,
                                  0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffa00000u,
                                  0x7f7fffffu, 0x3f808000u, 0x3f818000u, 0x007fffffu};
    return from_bits(sp[r % (sizeof sp / sizeof sp[0])]);
}

static void check_to_bf16(const qw_kernels *L) {
    enum { N = 4099 };
    float *x = malloc(N * sizeof(float));
    uint16_t *a = malloc(N * 2), *b = malloc(N * 2);
    for (int i = 0; i < N; i++) {
        uint64_t r = rnd();
        x[i] = r % 8 == 0 ? special(r >> 8) : r % 8 == 1 ? from_bits((uint32_t)(r >> 20)) : frand() * 8.0f;
    }
    int bad = 0;
    for (int64_t n = 0; n <= N; n = n < 40 ? n + 1 : n * 2 + 1) {
        int64_t m = n < N ? n : N;
        memset(a, 0xa5, N * 2);
        memset(b, 0xa5, N * 2);
        kernels_to_bf16_ref(a, x, m);
        L->to_bf16(b, x, m);
        if (memcmp(a, b, N * 2)) bad++; /* also: nothing written past m */
    }
    CHECK(bad == 0, "%s: to_bf16 differs from the reference in %d sizes", L->name, bad);
    free(x), free(a), free(b);
}

/* Random bf16 like real weights / rounded activations; `edge` mixes in
 * subnormals, zeros of both signs and values whose products are tiny. */
static uint16_t rbf16(float scale, int edge) {
    uint64_t r = rnd();
    if (edge && r % 16 == 0) return (uint16_t)((r >> 8) & 0x807f); /* subnormal or zero */
    if (edge && r % 16 == 1) return kernels_f32_to_bf16_ref(ldexpf(frand(), -60));
    return kernels_f32_to_bf16_ref(frand() * scale);
}

static double ref_dot_double(const uint16_t *x, const uint16_t *w, int64_t k, double *mag) {
    double s = 0, a = 0;
    for (int64_t i = 0; i < k; i++) {
        double p = (double)qw_bf16_to_f32(x[i]) * (double)qw_bf16_to_f32(w[i]);
        s += p, a += fabs(p);
    }
    *mag = a;
    return s;
}

static int same_bits(float a, float b) { return bits(a) == bits(b); }

static void check_matmul(const qw_kernels *L) {
    static const int64_t ks[] = {1, 2, 3, 17, 31, 32, 33, 63, 64, 65, 95, 96, 130, 896, 1001, 4864};
    static const int64_t ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 64};
    const int64_t rows = 11;
    int bad = 0, bad_inv = 0, bad_sub = 0, runs = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t k = ks[ki], ldx = k + 3, ldy = rows + 2, nmax = 64;
        int edge = ki % 2;
        uint16_t *W = malloc((size_t)(rows * k) * 2), *X = malloc((size_t)(nmax * ldx) * 2);
        float *Yr = malloc((size_t)(nmax * ldy) * 4), *Yl = malloc((size_t)(nmax * ldy) * 4);
        float *Y1 = malloc((size_t)ldy * 4);
        for (int64_t i = 0; i < rows * k; i++) W[i] = rbf16(0.1f, edge);
        for (int64_t i = 0; i < nmax * ldx; i++) X[i] = rbf16(4.0f, edge);
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            int64_t n = ns[ni];
            if (k > 1000 && n > 9 && n != 64) continue;
            for (int64_t i = 0; i < nmax * ldy; i++) Yr[i] = Yl[i] = -7.0f;
            kernels_matmul_bf16act_bf16_ref(Yr, ldy, X, ldx, n, W, k, 0, rows);
            L->matmul_bf16act[QW_BF16](Yl, ldy, X, ldx, n, W, k, 0, rows);
            runs++;
            for (int64_t i = 0; i < nmax * ldy; i++)
                if (!same_bits(Yr[i], Yl[i])) bad++;
            /* batch invariance: each token alone */
            for (int64_t t = 0; t < n; t++) {
                L->matmul_bf16act[QW_BF16](Y1, ldy, X + t * ldx, ldx, 1, W, k, 0, rows);
                for (int64_t o = 0; o < rows; o++)
                    if (!same_bits(Y1[o], Yl[t * ldy + o])) bad_inv++;
            }
            /* sub-ranges: [o0, o1) writes only those rows, with the same bits */
            static const int64_t sub[][2] = {{0, 1}, {1, 5}, {3, 11}, {5, 10}, {10, 11}, {4, 4}};
            for (size_t s = 0; s < sizeof sub / sizeof sub[0]; s++) {
                for (int64_t i = 0; i < nmax * ldy; i++) Yr[i] = -7.0f;
                L->matmul_bf16act[QW_BF16](Yr, ldy, X, ldx, n, W, k, sub[s][0], sub[s][1]);
                for (int64_t t = 0; t < nmax; t++)
                    for (int64_t o = 0; o < ldy; o++) {
                        int in = t < n && o >= sub[s][0] && o < sub[s][1];
                        float want = in ? Yl[t * ldy + o] : -7.0f;
                        if (!same_bits(Yr[t * ldy + o], want)) bad_sub++;
                    }
            }
        }
        /* the reference is a dot product of the bf16 values */
        if (!edge) {
            double mag;
            for (int64_t o = 0; o < rows; o++) {
                float y;
                kernels_matmul_bf16act_bf16_ref(&y, 1, X, ldx, 1, W + o * k, k, 0, 1);
                double d = ref_dot_double(X, W + o * k, k, &mag);
                CHECK(fabs((double)y - d) <= 1e-6 * mag + 1e-30, "ref dot k=%lld: %g vs %g", (long long)k, y, d);
            }
        }
        free(W), free(X), free(Yr), free(Yl), free(Y1);
    }
    CHECK(bad == 0, "%s: matmul_bf16act differs from the reference in %d outputs (%d runs)", L->name, bad, runs);
    CHECK(bad_inv == 0, "%s: matmul_bf16act not batch invariant in %d outputs", L->name, bad_inv);
    CHECK(bad_sub == 0, "%s: matmul_bf16act o0/o1 sub-ranges wrong in %d outputs", L->name, bad_sub);
}

/* The instruction's own edge cases, pair by pair, against the reference:
 * one output of k = 2 (one vdpbf16ps lane step) over chosen values. */
static void check_edge_pairs(const qw_kernels *L) {
    static const uint16_t v[] = {0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x8080, 0x3f80, 0xbf80, 0x7f7f,
                                 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x1f80, 0x2000, 0x3f81, 0xbf81, 0x4000};
    const int nv = (int)(sizeof v / sizeof v[0]);
    int bad = 0;
    for (int i = 0; i < nv * nv * 8; i++) {
        uint16_t x[2] = {v[rnd() % nv], v[rnd() % nv]}, w[2] = {v[rnd() % nv], v[rnd() % nv]};
        float a, b;
        kernels_matmul_bf16act_bf16_ref(&a, 1, x, 2, 1, w, 2, 0, 1);
        L->matmul_bf16act[QW_BF16](&b, 1, x, 2, 1, w, 2, 0, 1);
        if (!same_bits(a, b) && !(isnan(a) && isnan(b))) {
            if (bad++ < 5)
                fprintf(stderr, "  x %04x %04x w %04x %04x: ref %08x %s %08x\n", x[0], x[1], w[0], w[1], bits(a),
                        L->name, bits(b));
        }
    }
    CHECK(bad == 0, "%s: matmul_bf16act edge values differ from the reference in %d cases", L->name, bad);
}

int main(void) {
    qw_err err;
    if (kernels_init(&err)) return fprintf(stderr, "%s\n", err.msg), 1;
    check_ref_rounding();
    const qw_kernels *ref = kernels_level("ref");
    CHECK(ref && ref->to_bf16 == kernels_to_bf16_ref, "ref table: to_bf16 is the reference");
    int have = (kernels_cpu_flags() & QW_CPU_AVX512BF16) != 0, tested = 0;
    for (const char *const *nm = kernels_level_names(); *nm; nm++) {
        const qw_kernels *L = kernels_level(*nm);
        if (!L) continue;
        check_to_bf16(L);
        int want = have && !strcmp(*nm, "avx512");
        CHECK((L->matmul_bf16act[QW_BF16] != NULL) == want, "%s: matmul_bf16act[BF16] %s", *nm,
              want ? "missing on a CPU with AVX512-BF16" : "set without a bf16 dot product");
        for (int t = 0; t < QW_DTYPE_COUNT; t++)
            if (t != QW_BF16) CHECK(!L->matmul_bf16act[t], "%s: matmul_bf16act[%d] set", *nm, t);
        if (!L->matmul_bf16act[QW_BF16]) continue;
        tested++;
        /* the one-row decode stream with and without software prefetch
         * (cpu.c's choice differs by CPU; the bits must not) */
        const int pf = kernels_decode_prefetch();
        kernels_set_decode_prefetch(0);
        check_matmul(L);
        kernels_set_decode_prefetch(QW_PREFETCH_ZEN5);
        check_matmul(L);
        kernels_set_decode_prefetch(pf);
        check_edge_pairs(L);
    }
    printf("levels with a bf16 dot product: %d (cpu avx512bf16: %s)\n", tested, have ? "yes" : "no");
    return test_summary();
}
