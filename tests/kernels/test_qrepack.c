/* test_qrepack.c - repacked block-32 weights (kernels.h: "repacked
 * weights"): qw_repack_q plus the plain-C twin matmul_qr give bitwise the
 * reference matmul_q on the original rows; every level that has a
 * matmul_qr kernel gives the twin's bits (odd k, n in {1..70}, sub-ranges
 * that cut tiles, a token among others: batch invariance, nothing outside
 * the range written, an unaligned W), and sees flipped weight bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "test.h"
#define TEST_RNG_SEED 0x7a11ed5eedc0ffeeull
#include "test_rng.h"

static const qw_dtype k_types[] = {QW_Q8_0, QW_Q4_0, QW_Q4_1, QW_Q5_0, QW_Q5_1, QW_Q4_K, QW_Q5_K, QW_Q6_K};
#define N_TYPES (int)(sizeof k_types / sizeof k_types[0])

/* Random blocks with realistic binary16 scales (some 0) and, for the types
 * with a min, negative minimums. */
static void fill_blocks(uint8_t *w, int64_t nblocks, qw_dtype dt) {
    const qw_type_traits *tt = qw_type(dt);
    for (int64_t i = 0; i < nblocks * tt->bytes; i++) w[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < nblocks; b++) {
        float d = (0.5f + 0.5f * fabsf(frand())) * ldexpf(1.0f, -(int)(rnd() % 6) - 6);
        if (rnd() % 32 == 0) d = 0.0f;
        uint16_t h = qw_f32_to_f16(d);
        memcpy(w + b * tt->bytes + tt->d_off, &h, 2);
        if (tt->m_off >= 0) {
            h = qw_f32_to_f16(-8.0f * d * fabsf(frand()));
            memcpy(w + b * tt->bytes + tt->m_off, &h, 2);
        }
    }
}

/* The tables checked: every level's; where the avx512 level's matmul_qr
 * is the AMX kernel (which hands n % 16 tokens and n < 16 to the VNNI
 * one), the VNNI kernels alone as well, for every n; and where the avx2
 * level's are AVX-VNNI's, the plain AVX2 ones (a Zen 3's) too. */
typedef struct {
    const char *name;
    const qw_kernels *tab;
} variant;

#if defined(QW_TEST_AVX512_EMU)
#include "avx512_emu.h"
static qw_kernels g_emu;
#endif

static int variants(variant *v) {
    int n = 0;
    const char *const *names = kernels_level_names();
    for (int li = 0; names[li]; li++)
        if (kernels_level(names[li])) v[n++] = (variant){names[li], kernels_level(names[li])};
#if defined(__x86_64__)
    if (kernels_cpu_flags() & QW_CPU_AMXINT8) v[n++] = (variant){"avx512 (VNNI alone)", &kernels_qrepack_avx512vnni};
    if (kernels_cpu_flags() & QW_CPU_AVXVNNI) v[n++] = (variant){"avx2 (without AVX-VNNI)", &kernels_qrepack_avx2};
#endif
#if defined(QW_TEST_AVX512_EMU)
    g_emu = avx512_emu_level();
    v[n++] = (variant){g_emu.name, &g_emu};
#endif
    return n;
}

static void fill_x(float *x, int64_t k) {
    for (int64_t i = 0; i < k; i++) x[i] = frand() * (rnd() % 64 == 0 ? 20.0f : 1.0f);
    for (int64_t b = 0; b < k / 32; b++)
        if (rnd() % 13 == 0) memset(x + 32 * b, 0, 32 * sizeof(float));
}

static void check_type(const qw_kernels *ref, qw_dtype dt) {
    const char *tn = qw_dtype_name(dt);
    const qw_kernels *twin = &kernels_qrepack_ref;
    static const int64_t ks32[] = {32, 96, 288, 896, 4896}, ksk[] = {256, 768, 1536, 4864 + 256};
    const int kq = qw_type(dt)->block == 256;
    const int64_t *ks = kq ? ksk : ks32;
    const size_t nks = kq ? sizeof ksk / sizeof ksk[0] : sizeof ks32 / sizeof ks32[0];
    static const int64_t ns[] = {1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 40, 70}; /* QR_TB is 32 */
    /* whole tiles, parts of one, across tiles; and for the ymm kernels'
     * 8-row halves: one half alone, parts of either, across the two */
    const int64_t ranges[][2] = {{0, 48}, {16, 32}, {1, 47}, {3, 8},  {5, 6},   {15, 17}, {47, 48},
                                 {0, 16}, {20, 45}, {8, 16}, {0, 8}, {7, 9},  {24, 40}, {41, 48}};
    CHECK(qw_repack_ok(dt), "%s can be repacked", tn);
    CHECK(twin->matmul_qr[dt] != NULL, "plain-C matmul_qr %s", tn);
    for (size_t ki = 0; ki < nks; ki++) {
        const int64_t k = ks[ki], rows = 48, nmax = 70, nb = k / qw_type(dt)->block, ldy = rows + 3;
        const int64_t bytes = rows * nb * qw_type(dt)->bytes, rbytes = qw_repack_bytes(dt, rows, k);
        const int64_t rq = qw_qa8_row_bytes(k), ldxq = rq + 8;
        uint8_t *W = malloc((size_t)bytes), *raw = malloc((size_t)rbytes + 1), *R = raw + 1; /* odd address */
        float *x = malloc((size_t)k * sizeof(float));
        uint8_t *XQ = malloc((size_t)(nmax * ldxq));
        float *yr = malloc((size_t)(nmax * rows) * sizeof(float)), *yt = malloc((size_t)(nmax * rows) * sizeof(float));
        float *Y = malloc((size_t)(nmax * ldy) * sizeof(float));
        fill_blocks(W, rows * nb, dt);
        for (int64_t t = 0; t < nmax; t++) {
            fill_x(x, k);
            ref->quantize_qa8(XQ + t * ldxq, x, k);
        }
        memset(raw, 0xee, (size_t)rbytes + 1);
        /* K-quants: Q4_K / Q5_K scales and mins as bytes (+4 per row and
         * super-block), Q6_K 2 bytes of padding (whole 64-byte lines) */
        CHECK(rbytes == (kq ? rows * nb * (qw_type(dt)->bytes + (dt == QW_Q6_K ? 2 : 4)) : bytes), "%s k=%lld: repacked size %lld", tn,
              (long long)k, (long long)rbytes);
        qw_repack_q(dt, R, W, rows, k);
        ref->matmul_q[dt](yr, rows, XQ, ldxq, nmax, W, k, 0, rows);
        twin->matmul_qr[dt](yt, rows, XQ, ldxq, nmax, R, k, 0, rows);
        CHECK(memcmp(yr, yt, (size_t)(nmax * rows) * sizeof(float)) == 0,
              "plain-C matmul_qr %s k=%lld on the repacked rows == ref matmul_q on the originals, bitwise", tn,
              (long long)k);
        /* the same bytes, rearranged: a byte changed in the copy changes a result */
        for (int64_t i = 0; i < rbytes; i += 97) R[i] ^= 0x11;
        twin->matmul_qr[dt](yt, rows, XQ, ldxq, nmax, R, k, 0, rows);
        CHECK(memcmp(yr, yt, (size_t)(nmax * rows) * sizeof(float)) != 0, "%s k=%lld: flipped repacked bytes are seen",
              tn, (long long)k);
        for (int64_t i = 0; i < rbytes; i += 97) R[i] ^= 0x11;
        variant vs[8];
        const int nv = variants(vs);
        for (int li = 0; li < nv; li++) {
            const qw_kernels *L = vs[li].tab;
            if (!L->matmul_qr[dt]) continue;
            int bad = 0;
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
                    int64_t n = ns[ni], o0 = ranges[ri][0], o1 = ranges[ri][1];
                    int64_t tofs = n < nmax ? (int64_t)(rnd() % (uint64_t)(nmax - n + 1)) : 0;
                    for (int64_t i = 0; i < nmax * ldy; i++) Y[i] = 12345.5f;
                    L->matmul_qr[dt](Y, ldy, XQ + tofs * ldxq, ldxq, n, R, k, o0, o1);
                    for (int64_t t = 0; t < n; t++) {
                        if (memcmp(Y + t * ldy + o0, yr + (tofs + t) * rows + o0, (size_t)(o1 - o0) * sizeof(float)))
                            bad++;
                        for (int64_t o = 0; o < ldy; o++)
                            if ((o < o0 || o >= o1) && Y[t * ldy + o] != 12345.5f) bad++;
                    }
                }
            CHECK(bad == 0, "%s matmul_qr %s k=%lld: n in {1..70}, sub-ranges: bitwise ref, nothing outside (%d bad)",
                  vs[li].name, tn, (long long)k, bad);
            /* the comparison can fail: the level's kernel on flipped bytes differs */
            for (int64_t i = 0; i < rbytes; i += 97) R[i] ^= 0x11;
            L->matmul_qr[dt](yt, rows, XQ, ldxq, nmax, R, k, 0, rows);
            CHECK(memcmp(yr, yt, (size_t)(nmax * rows) * sizeof(float)) != 0,
                  "%s matmul_qr %s k=%lld: flipped repacked bytes are seen", vs[li].name, tn, (long long)k);
            for (int64_t i = 0; i < rbytes; i += 97) R[i] ^= 0x11;
        }
        free(W);
        free(raw);
        free(x);
        free(XQ);
        free(yr);
        free(yt);
        free(Y);
    }
}

/* Many tokens of a long row: 200 tokens x 8960 (Qwen2.5-1.5B's ffn_down)
 * is more per-token data (Q6_K's half sums) than the AMX kernel's scratch
 * holds at once, so it takes its token-block path, and 2.6 MB of QA8 rows,
 * so every prefill loop cuts it into token groups (qrepack_layout.h:
 * qr_token_group, 16 or 32 tokens at this k); still bitwise the
 * reference, every type. */
static void check_many_tokens(const qw_kernels *ref, qw_dtype dt) {
    const int64_t k = 8960, rows = 32, n = 200, nb = k / qw_type(dt)->block;
    const int64_t rq = qw_qa8_row_bytes(k), bytes = rows * nb * qw_type(dt)->bytes;
    uint8_t *W = malloc((size_t)bytes), *R = malloc((size_t)qw_repack_bytes(dt, rows, k)), *XQ = malloc((size_t)(n * rq));
    float *x = malloc((size_t)k * sizeof(float)), *yr = malloc((size_t)(n * rows) * sizeof(float)),
          *Y = malloc((size_t)(n * rows) * sizeof(float));
    fill_blocks(W, rows * nb, dt);
    for (int64_t t = 0; t < n; t++) {
        fill_x(x, k);
        ref->quantize_qa8(XQ + t * rq, x, k);
    }
    qw_repack_q(dt, R, W, rows, k);
    ref->matmul_q[dt](yr, rows, XQ, rq, n, W, k, 0, rows);
    variant vs[8];
    const int nv = variants(vs);
    for (int li = 0; li < nv; li++) {
        const qw_kernels *L = vs[li].tab;
        if (!L->matmul_qr[dt]) continue;
        for (int64_t i = 0; i < n * rows; i++) Y[i] = 12345.5f;
        L->matmul_qr[dt](Y, rows, XQ, rq, n, R, k, 3, rows); /* rows 3..31: a tile cut, a whole one */
        int bad = 0;
        for (int64_t t = 0; t < n; t++)
            for (int64_t o = 0; o < rows; o++)
                bad += o < 3 ? Y[t * rows + o] != 12345.5f : memcmp(&Y[t * rows + o], &yr[t * rows + o], 4) != 0;
        CHECK(bad == 0,
              "%s matmul_qr %s k=%lld n=%lld (token blocks): bitwise ref", vs[li].name, qw_dtype_name(dt), (long long)k,
              (long long)n);
    }
    free(W);
    free(R);
    free(XQ);
    free(x);
    free(yr);
    free(Y);
}

/* Every type at the extremes of its integer sums, where a SIMD kernel's
 * shortcut would break first: the AVX2 kernels add vpmaddubsw pairs in
 * int16 (saturating past 32767: Q4 weights 8 vectors at a time, Q5 and
 * Q6_K 4 or 2, Q8_0 through the sign trick), and Q6_K's scale step is in
 * float on the VNNI and AMX levels (exact because |half| <= 16 * 32 * 128
 * and |sc| <= 128 keep every product and the sum within 2^24). Every
 * quant byte 0xff or 0x00 by row (Q8_0: -128 or 127), the 6-bit scales
 * and mins at their largest (Q6_K's at 127 or -128), every activation at
 * +-127: the largest sums there are, still bitwise the reference (n = 1,
 * 16, 17, 33: decode, the AMX tile and the VNNI tail, the token blocks). */
static void check_extremes(const qw_kernels *ref, qw_dtype dt) {
    const qw_type_traits *tt = qw_type(dt);
    const int64_t k = 512, rows = 32, nmax = 33, nb = k / tt->block, bs = tt->bytes;
    const int64_t rq = qw_qa8_row_bytes(k);
    uint8_t *W = malloc((size_t)(rows * nb * bs)), *R = malloc((size_t)qw_repack_bytes(dt, rows, k));
    uint8_t *XQ = malloc((size_t)(nmax * rq));
    float *x = malloc((size_t)k * sizeof(float)), *yr = malloc((size_t)(nmax * rows) * sizeof(float)),
          *Y = malloc((size_t)(nmax * rows) * sizeof(float));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t B = 0; B < nb; B++) {
            uint8_t *blk = W + (r * nb + B) * bs;
            const int hi = (r + B) % 2;
            memset(blk, dt == QW_Q8_0 ? (hi ? 0x80 : 0x7f) : (hi ? 0xff : 0x00), (size_t)bs);
            if (dt == QW_Q6_K) memset(blk + 192, hi ? 0x7f : 0x80, 16); /* scales 127 or -128 */
            if (dt == QW_Q4_K || dt == QW_Q5_K) memset(blk + 4, 0xff, 12); /* scales and mins 63 */
            uint16_t h = qw_f32_to_f16(ldexpf(1.0f, -(int)(r % 5) - 8));
            memcpy(blk + tt->d_off, &h, 2);
            if (tt->m_off >= 0) {
                h = qw_f32_to_f16(-ldexpf(1.0f, -(int)(r % 3) - 9));
                memcpy(blk + tt->m_off, &h, 2);
            }
        }
    for (int64_t t = 0; t < nmax; t++) {
        for (int64_t i = 0; i < k; i++) x[i] = t % 2 ? 3.0f : -3.0f;
        ref->quantize_qa8(XQ + t * rq, x, k);
    }
    CHECK((int8_t)XQ[0] == -127 && (int8_t)XQ[rq] == 127, "extremes: activations at -127 and 127");
    qw_repack_q(dt, R, W, rows, k);
    ref->matmul_q[dt](yr, rows, XQ, rq, nmax, W, k, 0, rows);
    static const int64_t ns[] = {1, 16, 17, 33};
    variant vs[8];
    const int nv = variants(vs);
    for (int li = 0; li < nv; li++) {
        const qw_kernels *L = vs[li].tab;
        if (!L->matmul_qr[dt]) continue;
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            const int64_t n = ns[ni];
            L->matmul_qr[dt](Y, rows, XQ, rq, n, R, k, 0, rows);
            CHECK(memcmp(Y, yr, (size_t)(n * rows) * sizeof(float)) == 0,
                  "%s matmul_qr %s at the largest sums (n=%lld): bitwise ref", vs[li].name, qw_dtype_name(dt),
                  (long long)n);
        }
    }
    free(W);
    free(R);
    free(XQ);
    free(x);
    free(yr);
    free(Y);
}

int main(void) {
    const qw_kernels *ref = kernels_level("ref");
    CHECK(!qw_repack_ok(QW_F32) && !qw_repack_ok(QW_BF16), "16-bit and float types are not repacked");
    CHECK(ref->matmul_qr[QW_Q8_0] == NULL, "the ref level keeps matmul_q (no scalar matmul_qr in a table)");
    const qw_kernels *a = kernels_level("avx512"), *a2 = kernels_level("avx2");
    if (a && a2 && a->matmul_q[QW_Q8_0] != a2->matmul_q[QW_Q8_0]) /* the VNNI kernels are in */
        CHECK(a->matmul_qr[QW_Q5_0] != NULL && a->matmul_qr[QW_Q5_0] != a2->matmul_qr[QW_Q5_0],
              "avx512 with VNNI has matmul_qr of its own");
    /* every SIMD level has a kernel for the block-32 types (avx2: qrepack_avx2.c
     * or qrepack_avxvnni.c; neon: qrepack_neon.c), so the loop below runs it */
    const char *const *names = kernels_level_names();
    for (int li = 0; names[li]; li++) {
        const qw_kernels *L = kernels_level(names[li]);
        if (!L || L == ref) continue;
        for (int ti = 0; ti < 5; ti++)
            CHECK(L->matmul_qr[k_types[ti]] != NULL, "%s has matmul_qr %s", L->name, qw_dtype_name(k_types[ti]));
    }
#if defined(__x86_64__)
    /* the x86 levels repack the K-quants too (qrepack_ktiles_ymm.h,
     * qrepack_avx512vnni.c), so the loops below run those kernels */
    for (int ti = 5; ti < N_TYPES; ti++)
        for (int li = 0; names[li]; li++) {
            const qw_kernels *L = kernels_level(names[li]);
            if (L && L != ref)
                CHECK(L->matmul_qr[k_types[ti]] != NULL, "%s has matmul_qr %s", L->name, qw_dtype_name(k_types[ti]));
        }
    if (kernels_cpu_flags() & QW_CPU_AVX2)
        for (int ti = 0; ti < N_TYPES; ti++)
            CHECK(kernels_qrepack_avx2.matmul_qr[k_types[ti]] != NULL, "plain AVX2 has matmul_qr %s",
                  qw_dtype_name(k_types[ti]));
    /* where the CPU has AMX-INT8 the avx512 level's prefill GEMM is AMX's
     * (qrepack_amx.c), so the n >= 16 cases below run it */
    if (kernels_cpu_flags() & QW_CPU_AMXINT8)
        for (int ti = 0; ti < N_TYPES; ti++)
            CHECK(a && a->matmul_qr[k_types[ti]] == kernels_qrepack_amx.matmul_qr[k_types[ti]],
                  "avx512 with AMX-INT8: matmul_qr %s is the AMX kernel", qw_dtype_name(k_types[ti]));
#endif
#if defined(QW_TEST_AVX512_EMU)
    for (int ti = 0; ti < N_TYPES; ti++)
        CHECK(kernels_qrepack_avx512vnni_emu.matmul_qr[k_types[ti]] != NULL, "emulated avx512 VNNI has matmul_qr %s",
              qw_dtype_name(k_types[ti]));
#endif
    /* the one-token (decode) tiles with and without software prefetch
     * (cpu.c's choice differs by CPU; the bits must not) */
    const int pf = kernels_decode_prefetch();
    kernels_set_decode_prefetch(0);
    for (int ti = 0; ti < N_TYPES; ti++) check_type(ref, k_types[ti]);
    kernels_set_decode_prefetch(QW_PREFETCH_ZEN5);
    for (int ti = 0; ti < N_TYPES; ti++) check_type(ref, k_types[ti]);
    kernels_set_decode_prefetch(pf);
    /* the avx512 K tiles' token blocks: 16 and 32 (cpu.c picks one by CPU) */
    const int kb = kernels_k_token_block();
    kernels_set_k_token_block(16);
    for (int ti = 0; ti < N_TYPES; ti++) check_many_tokens(ref, k_types[ti]);
    kernels_set_k_token_block(QW_K_TOKEN_BLOCK_MAX);
    for (int ti = 5; ti < N_TYPES; ti++) check_many_tokens(ref, k_types[ti]);
    kernels_set_k_token_block(kb);
    for (int ti = 0; ti < N_TYPES; ti++) check_extremes(ref, k_types[ti]);
    return test_summary();
}
