/* qrepack_amx.c - matmul_qr with AMX-INT8 (Intel since Sapphire Rapids):
 * the prefill GEMM of every repacked type, laid over the avx512 level's
 * VNNI kernels (qrepack_avx512vnni.c) only where cpu.c sets QW_CPU_AMXINT8
 * (CPUID, XCR0 and the Linux permission to use the tile data).
 *
 * Why it is a GEMM of its own: one tdpbssd multiplies a 16 x 32 int8
 * tile by a 32 x 16 one (8192 products) in about 16 cycles, where
 * vpdpbusd does 64 per cycle, so the integer sums stop being the cost; the
 * float steps of the reference, per block of 32 and per (token, row), are
 * what is left, and they are the same steps as ever.
 *
 * How the data meets the tiles, with no shuffle of either side:
 *   A (16 tokens x 32 bytes) is the QA8 rows as they are (row stride
 *     ldxq), the block's 32 activations of each of 16 tokens;
 *   B (8 rows x 64 bytes, AMX's "VNNI" layout: row j holds for each of 16
 *     weight rows i the 4 weights k = 4j..4j+3) is exactly what
 *     qrepack_zmm.h's unpack leaves in its 8 vectors (bytes 4i..4i+3 of
 *     vector j), stored as they come;
 *   C (16 tokens x 16 rows, int32) is each (token, row)'s exact block sum.
 * The weights go in as signed bytes with the type's offset taken off
 * (Q4_0 - 8, Q5_0 - 16, Q8_0's stored + 128 back to q, Q6_K - 32), so the
 * sum is isum itself; the types with a min keep 0..31 and their min term.
 *
 * Per 16-row tile, every block's B tile and its per-row floats (d, m or
 * dsc, dmn; Q6_K's d and scales) are built once into the thread's scratch
 * (the "panel"), then every 16 tokens' tile walks the panel. The
 * reference sums block b into accumulator b % 8 and adds the 8 in a tree;
 * here the 16 accumulators of one class (one per token, a vector of 16
 * rows) stay in registers while the class's blocks b, b + 8, ... go by in
 * order, two C tiles in flight so that the float steps of one block
 * overlap the tile multiply of the next. Bitwise qrepack_ref.c, hence
 * bitwise the VNNI kernel, so which of the two a token meets (n % 16
 * tokens go to the VNNI kernel, as do n < 16 and rows longer than the
 * panel holds) changes nothing: batch invariant.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include "kernels/qdot/qdot_x86.h"
#include "kernels/qdot/qrepack_layout.h"
#include "kernels/qdot/qrepack_zmm.h"

enum {
    MT = 16,       /* tokens per tile */
    AMX_MAXB = 320, /* blocks of 32 a panel holds: k <= 10240 */
    /* Activation bytes a token group may span (L2 is 2 MB per core on
     * the AMX CPUs): down's 512 tokens x 5.5 KB (k = 4864) were 2.8 MB,
     * read again from L3 by every tile. */
    AMX_ACT_BYTES = 640 * 1024
};

typedef struct {
    int8_t w[AMX_MAXB][512];  /* each block's B tile */
    float f[AMX_MAXB][3][16]; /* each block's per-row floats (Q6_K: d, then the two halves' scales) */
    int32_t c[4][MT][16];     /* C tiles stored for the float steps */
    float acc[8][MT][16];     /* the 8 classes' sums, for the tree */
    int16_t ord[AMX_MAXB];    /* the blocks class by class (tokens) */
} amx_scratch;
_Static_assert(sizeof(amx_scratch) <= QW_SCRATCH_BYTES, "qrepack_amx scratch");

/* The tile configuration (palette 1): two A, two B, four C. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;
/* Tile numbers: literals, since the compilers' tile macros paste them into
 * the instruction's register name. */
#define TA0 0
#define TA1 1
#define TB0 2
#define TB1 3
#define TC0 4
#define TC1 5
#define TC2 6
#define TC3 7

/* Two configurations, as static data (the compilers do not see
 * ldtilecfg read its operand, and dropped the stores of a local one).
 * Q6_K multiplies each 16-weight half on its own (its scales are per
 * half): A tiles of 16 bytes, B tiles of 4 rows. */
#define CFG(acols, brows)                                                                            \
    {                                                                                                \
        .palette = 1, .colsb = {acols, acols, 64, 64, 64, 64, 64, 64}, .rows = {16, 16, brows, brows, 16, 16, 16, 16} \
    }
static const amx_cfg k_cfg[2] = {CFG(32, 8), CFG(16, 4)};

static void config(int q6) { _tile_loadconfig(&k_cfg[q6]); }

INLINE int is_kq(int T) { return T == QW_Q4_K || T == QW_Q5_K; }

/* The panel of one 16-row tile: B tiles and per-row floats of its nb blocks. */
INLINE void panel(int T, amx_scratch *sc, const uint8_t *tile, int64_t k) {
    __m512i w[8];
    if (is_kq(T) || T == QW_Q6_K) {
        const int S = T == QW_Q6_K ? Q6_SIZE : k_size(T);
        for (int64_t B = 0; B < k / 256; B++) {
            const uint8_t *tb = tile + B * S;
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)tb));
            const __m512 dmin = is_kq(T) ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tb + 32)))
                                         : _mm512_setzero_ps();
            for (int j = 0; j < 8; j++) {
                const int64_t b = 8 * B + j;
                float *f = sc->f[b][0];
                if (T == QW_Q6_K) {
                    unpack_q6(tb, j, w);
                    UNROLL
                    for (int v = 0; v < 8; v++) w[v] = _mm512_sub_epi8(w[v], _mm512_set1_epi8(32));
                    _mm512_storeu_ps(f, d);
                    _mm512_storeu_ps(f + 16, _mm512_cvtepi32_ps(sc_bytes(tb + Q6_SC + 32 * j)));
                    _mm512_storeu_ps(f + 32, _mm512_cvtepi32_ps(sc_bytes(tb + Q6_SC + 32 * j + 16)));
                } else {
                    unpack_k(T, tb, j, w);
                    _mm512_storeu_ps(f, _mm512_mul_ps(d, k_bytes(tb + K_SC + 16 * j)));
                    _mm512_storeu_ps(f + 16, _mm512_mul_ps(dmin, k_bytes(tb + K_MN + 16 * j)));
                }
                UNROLL
                for (int v = 0; v < 8; v++) _mm512_storeu_si512((void *)(sc->w[b] + 64 * v), w[v]);
            }
        }
        return;
    }
    const int S = QW_RP_ROWS * blk_bytes(T);
    const int off = T == QW_Q8_0 ? 128 : qw_type((qw_dtype)T)->zero;
    for (int64_t b = 0; b < k / 32; b++) {
        const uint8_t *tb = tile + b * S;
        unpack(T, tb, w);
        UNROLL
        for (int v = 0; v < 8; v++) {
            if (!has_min(T)) w[v] = _mm512_sub_epi8(w[v], _mm512_set1_epi8((char)off));
            _mm512_storeu_si512((void *)(sc->w[b] + 64 * v), w[v]);
        }
        _mm512_storeu_ps(sc->f[b][0], _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)tb)));
        if (has_min(T))
            _mm512_storeu_ps(sc->f[b][1], _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tb + off_m(T)))));
    }
}

/* Tile multiplies, as macros: tile numbers are immediates. Block b's
 * product into C tile tc (A tile ta, B tile tb), or Q6_K's two halves into
 * tc and tc + 1 (A0/A1, B0/B1); then C stored to the scratch. */
#define ISSUE(b, tc, ta, tb)                                \
    do {                                                    \
        _tile_loadd(ta, X + 32 * (b), ldxq);                \
        _tile_loadd(tb, sc->w[b], 64);                      \
        _tile_zero(tc);                                     \
        _tile_dpbssd(tc, ta, tb);                           \
    } while (0)
#define ISSUE_Q6(b, tc, tc2)                                \
    do {                                                    \
        _tile_loadd(TA0, X + 32 * (b), ldxq);               \
        _tile_loadd(TA1, X + 32 * (b) + 16, ldxq);          \
        _tile_loadd(TB0, sc->w[b], 64);                     \
        _tile_loadd(TB1, sc->w[b] + 256, 64);               \
        _tile_zero(tc);                                     \
        _tile_zero(tc2);                                    \
        _tile_dpbssd(tc, TA0, TB0);                         \
        _tile_dpbssd(tc2, TA1, TB1);                        \
    } while (0)

/* The reference's float steps of block b for the tile's 16 tokens, from
 * the stored C tile(s) ci (and ci + 1, Q6_K). */
INLINE void steps(int T, const amx_scratch *sc, int ci, const uint8_t *X, int64_t ldxq, int64_t k, int64_t b,
                  __m512 acc[MT]) {
    const int64_t nb = k / 32;
    const float *f = sc->f[b][0];
    const int two = is_kq(T) || has_min(T), q6 = T == QW_Q6_K;
    const __m512 f0 = _mm512_loadu_ps(f), f1 = two ? _mm512_loadu_ps(f + 16) : _mm512_setzero_ps();
    const __m512 s1 = q6 ? _mm512_loadu_ps(f + 16) : _mm512_setzero_ps();
    const __m512 s2 = q6 ? _mm512_loadu_ps(f + 32) : _mm512_setzero_ps();
    UNROLL
    for (int m = 0; m < MT; m++) {
        const uint8_t *xr = X + m * ldxq;
        const __m512i c = _mm512_loadu_si512((const void *)sc->c[ci][m]);
        float dx;
        memcpy(&dx, xr + k + 4 * b, 4);
        if (T == QW_Q6_K) {
            const __m512i c2 = _mm512_loadu_si512((const void *)sc->c[ci + 1][m]);
            /* (float)(s1 * c + s2 * c2) without vpmulld (two uops, one
             * port): |c| <= 16 * 32 * 128 and |s| <= 128, so each product
             * and the sum are integers of at most 2^24, exact in float. */
            const __m512 isum = _mm512_fmadd_ps(s2, _mm512_cvtepi32_ps(c2), _mm512_mul_ps(s1, _mm512_cvtepi32_ps(c)));
            acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(f0, _mm512_set1_ps(dx)), isum, acc[m]);
        } else if (is_kq(T)) { /* fmaf(dx, dsc * dot, acc), then fmaf(-dmn, ds, acc) */
            float ds;
            memcpy(&ds, xr + k + 8 * nb + 4 * b, 4);
            acc[m] = _mm512_fmadd_ps(_mm512_set1_ps(dx), _mm512_mul_ps(f0, _mm512_cvtepi32_ps(c)), acc[m]);
            acc[m] = _mm512_fnmadd_ps(f1, _mm512_set1_ps(ds), acc[m]);
        } else {
            const __m512 vdx = _mm512_set1_ps(dx);
            acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(f0, vdx), _mm512_cvtepi32_ps(c), acc[m]);
            if (has_min(T)) {
                int32_t s;
                memcpy(&s, xr + k + 4 * nb + 4 * b, 4);
                acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(f1, vdx), _mm512_set1_ps((float)s), acc[m]);
            }
        }
    }
}

/* Block b's float steps into the accumulators of its class b % 8: the
 * first block of a class starts them at 0, the last stores them. */
INLINE void class_steps(int T, amx_scratch *sc, int ci, const uint8_t *X, int64_t ldxq, int64_t k, int64_t b,
                        __m512 acc[MT]) {
    if (b < 8)
        UNROLL
    for (int m = 0; m < MT; m++) acc[m] = _mm512_setzero_ps();
    steps(T, sc, ci, X, ldxq, k, b, acc);
    if (b + 8 >= k / 32)
        UNROLL
    for (int m = 0; m < MT; m++) _mm512_storeu_ps(sc->acc[b % 8][m], acc[m]);
}

/* 16 tokens (rows of X from X) against the panel: Y rows, store mask keep.
 * The blocks go class by class (0, 8, 16, ..., then 1, 9, ...: ord), the
 * reference's order within each accumulator, as one stream whose tile
 * multiplies run ahead of the float steps: 3 blocks ahead in a ring of 4
 * C tiles (Q6_K: 2 ahead, 2 C tiles per block). */
INLINE void tokens(int T, amx_scratch *sc, const int16_t *ord, float *Y, int64_t ldy, const uint8_t *X,
                   int64_t ldxq, int64_t k, __mmask16 keep) {
    const int64_t nb = k / 32;
    __m512 acc[MT];
    for (int m = 0; m < MT; m++) acc[m] = _mm512_setzero_ps(); /* (class_steps sets them: quiets gcc) */
    for (int64_t cl = nb; cl < 8; cl++) /* classes without a block */
        for (int m = 0; m < MT; m++) _mm512_storeu_ps(sc->acc[cl][m], _mm512_setzero_ps());
    /* Iteration s stores block s + 1's C tile and issues block s + 3
     * (Q6_K: s + 2), then runs block s's float steps from the C tile
     * stored one iteration earlier: the steps never wait for a store
     * just issued, nor the multiplier for the steps. */
    if (T == QW_Q6_K) {
        ISSUE_Q6(ord[0], TC0, TC1);
        if (nb > 1) ISSUE_Q6(ord[1], TC2, TC3);
        _tile_stored(TC0, sc->c[0], 64);
        _tile_stored(TC1, sc->c[1], 64);
#define SLOT_Q6(i, tc, tc2, tn, tn2)                                         \
    if (s + (i) < nb) {                                                      \
        if (s + (i) + 1 < nb) {                                              \
            _tile_stored(tn, sc->c[2 - 2 * (i)], 64);                        \
            _tile_stored(tn2, sc->c[3 - 2 * (i)], 64);                       \
        }                                                                    \
        if (s + (i) + 2 < nb) ISSUE_Q6(ord[s + (i) + 2], tc, tc2);           \
        class_steps(T, sc, 2 * (i), X, ldxq, k, ord[s + (i)], acc);          \
    }
        for (int64_t s = 0; s < nb; s += 2) {
            SLOT_Q6(0, TC0, TC1, TC2, TC3)
            SLOT_Q6(1, TC2, TC3, TC0, TC1)
        }
#undef SLOT_Q6
    } else {
        ISSUE(ord[0], TC0, TA0, TB0);
        if (nb > 1) ISSUE(ord[1], TC1, TA1, TB1);
        if (nb > 2) ISSUE(ord[2], TC2, TA0, TB0);
        _tile_stored(TC0, sc->c[0], 64);
        /* block s: C tile TC0 + s % 4, A/B tiles by the parity of s */
#define SLOT(i, tstore, tissue, ta, tb)                                      \
    if (s + (i) < nb) {                                                      \
        if (s + (i) + 1 < nb) _tile_stored(tstore, sc->c[((i) + 1) % 4], 64); \
        if (s + (i) + 3 < nb) ISSUE(ord[s + (i) + 3], tissue, ta, tb);       \
        class_steps(T, sc, i, X, ldxq, k, ord[s + (i)], acc);                \
    }
        for (int64_t s = 0; s < nb; s += 4) {
            SLOT(0, TC1, TC3, TA1, TB1)
            SLOT(1, TC2, TC0, TA0, TB0)
            SLOT(2, TC3, TC1, TA1, TB1)
            SLOT(3, TC0, TC2, TA0, TB0)
        }
#undef SLOT
    }
    for (int m = 0; m < MT; m++) {
        __m512 a[8];
        UNROLL
        for (int i = 0; i < 8; i++) a[i] = _mm512_loadu_ps(sc->acc[i][m]);
        _mm512_mask_storeu_ps(Y + m * ldy, keep, tree16(a));
    }
}

INLINE void matmul_qr_amx(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                          int64_t k, int64_t o0, int64_t o1) {
    if (o1 <= o0 || n <= 0) return;
    const qw_matmul_q_fn vnni = kernels_qrepack_avx512vnni.matmul_qr[T];
    const int64_t n16 = n / MT * MT;
    if (n16 == 0 || k / 32 > AMX_MAXB) {
        vnni(Y, ldy, XQ, ldxq, n, W, k, o0, o1);
        return;
    }
    const int64_t tile_bytes = is_kq(T)        ? k / 256 * k_size(T)
                               : T == QW_Q6_K ? k / 256 * Q6_SIZE
                                              : k / 32 * QW_RP_ROWS * blk_bytes(T);
    amx_scratch *sc = kernels_scratch();
    const uint8_t *X = XQ;
    int64_t s = 0;
    for (int cl = 0; cl < 8; cl++)
        for (int64_t b = cl; b < k / 32; b += 8) sc->ord[s++] = (int16_t)b;
    /* Tokens in groups whose activation rows stay in L2 while every tile
     * of the range meets them (each tile's panel built once per group). */
    int64_t group = AMX_ACT_BYTES / (ldxq > 0 ? ldxq : 1) / MT * MT;
    if (group < MT) group = MT;
    config(T == QW_Q6_K);
    for (int64_t g0 = 0; g0 < n16; g0 += group) {
        const int64_t g1 = g0 + group < n16 ? g0 + group : n16;
        for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
            const __mmask16 keep = tile_keep(r, o0, o1);
            panel(T, sc, (const uint8_t *)W + r * tile_bytes, k);
            for (int64_t t0 = g0; t0 < g1; t0 += MT)
                tokens(T, sc, sc->ord, Y + t0 * ldy + r * QW_RP_ROWS, ldy, X + t0 * ldxq, ldxq, k, keep);
        }
    }
    _tile_release();
    if (n > n16) vnni(Y + n16 * ldy, ldy, X + n16 * ldxq, ldxq, n - n16, W, k, o0, o1);
}

#define QR(NAME, DT)                                                                                           \
    static void NAME(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W, int64_t k, \
                     int64_t o0, int64_t o1) {                                                                 \
        matmul_qr_amx(DT, Y, ldy, XQ, ldxq, n, W, k, o0, o1);                                                  \
    }
QR(matmul_qr_q8_0_amx, QW_Q8_0)
QR(matmul_qr_q4_0_amx, QW_Q4_0)
QR(matmul_qr_q4_1_amx, QW_Q4_1)
QR(matmul_qr_q5_0_amx, QW_Q5_0)
QR(matmul_qr_q5_1_amx, QW_Q5_1)
QR(matmul_qr_q4_k_amx, QW_Q4_K)
QR(matmul_qr_q5_k_amx, QW_Q5_K)
QR(matmul_qr_q6_k_amx, QW_Q6_K)

const qw_kernels kernels_qrepack_amx = {
    .matmul_qr =
        {
            [QW_Q8_0] = matmul_qr_q8_0_amx,
            [QW_Q4_0] = matmul_qr_q4_0_amx,
            [QW_Q4_1] = matmul_qr_q4_1_amx,
            [QW_Q5_0] = matmul_qr_q5_0_amx,
            [QW_Q5_1] = matmul_qr_q5_1_amx,
            [QW_Q4_K] = matmul_qr_q4_k_amx,
            [QW_Q5_K] = matmul_qr_q5_k_amx,
            [QW_Q6_K] = matmul_qr_q6_k_amx,
        },
};

#endif
