/* qrepack_avx2.c - matmul_qr with AVX2 (vpmaddubsw + vpmaddwd): the
 * integer path of the block-32 types on repacked weights (kernels.h:
 * "repacked weights"; the layout is qrepack_ref.c's, whose float steps it
 * reproduces bit for bit). The avx2 level's entries, and the avx512
 * level's where the CPU lacks AVX512-VNNI. The block-32 tile loops are
 * qrepack_tiles.h's; this file gives them the block dot product, and has
 * its own tiles for Q4_K and Q5_K (below).
 *
 * vpmaddubsw (unsigned x signed bytes, pairs summed into int16) saturates,
 * so every int16 it makes, and every int16 sum of them, must stay inside
 * +-32767 for the block sums to be exact:
 *   Q4_0, Q4_1: weights <= 15, a pair <= 2 * 15 * 127 = 3810: the 8 vectors'
 *     pairs summed as int16 (<= 30480), one vpmaddwd;
 *   Q5_0, Q5_1: weights <= 31, a pair <= 7874: two sums of 4 (<= 31496);
 *   Q8_0 (stored q + 128, up to 255: a pair could reach 64770): the sign
 *     trick on the signed q = stored ^ 0x80: |q| * sign(x, q), a pair
 *     <= 2 * 128 * 127 = 32512, one vpmaddwd per vector. That is
 *     sum(q x) = sum((q + 128) x) - 128 s, the reference's isum, directly.
 * (Activations are in [-127, 127]: kernels.h's QA8.)
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include "kernels/qdot/qdot_x86.h"
#include "kernels/qdot/qrepack_layout.h"
#include "kernels/qdot/qrepack_ymm.h"

/* Part p of a tile block's weights: a = what vpmaddubsw takes as unsigned
 * (Q8_0: |q|), q = Q8_0's signed weights (for the sign of x). */
typedef struct {
    __m256i a[8], q[8];
} qr_w;

INLINE void load_part(int T, const uint8_t *tb, int p, qr_w *w) {
    unpack_part_u(T, tb, p, w->a);
    if (T == QW_Q8_0) {
        UNROLL
        for (int j = 0; j < 8; j++) {
            w->q[j] = _mm256_xor_si256(w->a[j], _mm256_set1_epi8((char)0x80));
            w->a[j] = _mm256_abs_epi8(w->q[j]);
        }
    }
}

/* Activation dword j of the block (4 quants), in every lane. */
INLINE __m256i x_dword(const uint8_t *xq, int j) { return _mm256_set1_epi32((int)ld_u32(xq + 4 * j)); }

INLINE __m256i part_isum(int T, const qr_w *w, const uint8_t *xq, int32_t s) {
    const __m256i ones = _mm256_set1_epi16(1);
    if (T == QW_Q8_0) {
        __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        UNROLL
        for (int j = 0; j < 8; j++) { /* two chains */
            const __m256i x = _mm256_sign_epi8(x_dword(xq, j), w->q[j]);
            p[j % 2] = _mm256_add_epi32(p[j % 2], _mm256_madd_epi16(_mm256_maddubs_epi16(w->a[j], x), ones));
        }
        return _mm256_add_epi32(p[0], p[1]);
    }
    /* int16 sums of G vectors' pairs (exact: the bounds above) */
    const int G = has_qh(T) ? 4 : 8;
    __m256i isum = _mm256_setzero_si256();
    UNROLL
    for (int j0 = 0; j0 < 8; j0 += G) {
        __m256i p = _mm256_maddubs_epi16(w->a[j0], x_dword(xq, j0));
        UNROLL
        for (int j = j0 + 1; j < j0 + G; j++) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w->a[j], x_dword(xq, j)));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
    }
    /* s * 2^k, not s << k: s is often negative */
    if (off_log2(T) >= 0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(s * (1 << off_log2(T))));
    return isum;
}

#include "kernels/qdot/qrepack_tiles.h"

/* ---- Q4_K, Q5_K on their repacked tiles (qrepack_ref.c's K layout: d @0,
 * dmin @32, sc[8][16] @64, mn[8][16] @192, Q5_K's qh[8][8] masks @320,
 * then per sub-block j four 64-byte nibble vectors as a block-32 tile
 * block's). Part p of sub-block j is unpacked as unpack_part_u does and
 * dotted as part_isum does (no offset: these types have a min; Q4_K's
 * weights <= 15 let the 8 vectors' pairs add up in int16, Q5_K's <= 31 in
 * two groups of 4), then kquant_ref.c's float steps: dsc = d sc and
 * dmn = dmin mn once per tile block and part, and per token
 * acc[j] = fmaf(dx, dsc dot, acc[j]), acc[j] = fmaf(-dmn, ds, acc[j]).
 * Tokens in blocks of QR_TB_K, each part of a tile block unpacked once per
 * block; decode is the same loop with one token. Without these tiles the
 * avx2 level ran the row tiles of kquant_avx2.c, whose horizontal sums per
 * row and token left the real 1.5B's prefill at 0.95x an AVX2 build of
 * llama.cpp (docs/PERFORMANCE.md). */
enum { RK_SC = 64, RK_MN = 192, RK_QH = 320 };
INLINE int rk_q(int T) { return RK_QH + (T == QW_Q5_K ? 512 : 0); }
INLINE int rk_size(int T) { return rk_q(T) + 8 * 256; }

/* Part p of sub-block j's 8 weight vectors (lane: 4 weights of a row). */
INLINE void rk_unpack(int T, const uint8_t *tb, int j, int p, __m256i u[8]) {
    const uint8_t *q = tb + rk_q(T) + 256 * j + 32 * p;
    const __m256i lo4 = _mm256_set1_epi8(15);
    UNROLL
    for (int v = 0; v < 4; v++) {
        const __m256i z = _mm256_loadu_si256((const __m256i *)(const void *)(q + 64 * v));
        u[2 * v] = _mm256_and_si256(z, lo4);
        u[2 * v + 1] = _mm256_and_si256(_mm256_srli_epi16(z, 4), lo4);
    }
    if (T == QW_Q5_K)
        UNROLL
    for (int v = 0; v < 8; v++) u[v] = _mm256_or_si256(u[v], high_bits(ld_u32(tb + RK_QH + 64 * j + 8 * v + 4 * p)));
}

/* One token's block (32 quants at xq) against the part: exact int32 per row. */
INLINE __m256i rk_dot(int T, const __m256i u[8], const uint8_t *xq) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int G = T == QW_Q5_K ? 4 : 8;
    __m256i dot = _mm256_setzero_si256();
    UNROLL
    for (int j0 = 0; j0 < 8; j0 += G) {
        __m256i p = _mm256_maddubs_epi16(u[j0], x_dword(xq, j0));
        UNROLL
        for (int j = j0 + 1; j < j0 + G; j++) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[j], x_dword(xq, j)));
        dot = _mm256_add_epi32(dot, _mm256_madd_epi16(p, ones));
    }
    return dot;
}

/* Part p's 8 rows of sub-block j's 6-bit scale (or min) bytes, as floats. */
INLINE __m256 rk_bytes(const uint8_t *p8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p8)));
}

INLINE void rk_tile(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int NT, const uint8_t *tile,
                    int64_t k, int lo, int hi) {
    const int64_t nsb = k / 256, nb = k / 32;
    const int S = rk_size(T);
    int p0, p1;
    parts_of(lo, hi, &p0, &p1);
    __m256 acc[QR_TB_K][QR_PARTS][8];
    for (int t = 0; t < NT; t++)
        for (int p = 0; p < QR_PARTS; p++)
            UNROLL
    for (int i = 0; i < 8; i++) acc[t][p][i] = _mm256_setzero_ps();
    for (int64_t B = 0; B < nsb; B++) {
        const uint8_t *tb = tile + B * S;
        for (int p = p0; p < p1; p++) {
            const __m256 d = vf_f16(tb, p), dmin = vf_f16(tb + 32, p);
            UNROLL
            for (int j = 0; j < 8; j++) {
                __m256i u[8];
                rk_unpack(T, tb, j, p, u);
                const __m256 dsc = _mm256_mul_ps(d, rk_bytes(tb + RK_SC + 16 * j + 8 * p));
                const __m256 dmn = _mm256_mul_ps(dmin, rk_bytes(tb + RK_MN + 16 * j + 8 * p));
                const int64_t b = 8 * B + j;
                for (int t = 0; t < NT; t++) {
                    const uint8_t *xr = X + t * ldxq;
                    float dx, ds;
                    memcpy(&dx, xr + k + 4 * b, 4);
                    memcpy(&ds, xr + k + 8 * nb + 4 * b, 4);
                    __m256 a = acc[t][p][j];
                    a = _mm256_fmadd_ps(_mm256_set1_ps(dx),
                                        _mm256_mul_ps(dsc, _mm256_cvtepi32_ps(rk_dot(T, u, xr + 32 * b))), a);
                    acc[t][p][j] = _mm256_fnmadd_ps(dmn, _mm256_set1_ps(ds), a); /* -(dmn ds) + a, one rounding */
                }
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int p = p0; p < p1; p++) store_part(Y + t * ldy, p, lo, hi, tree_rows(acc[t][p]));
}

INLINE void matmul_qr_k(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                        int64_t k, int64_t o0, int64_t o1) {
    if (o1 <= o0 || n <= 0) return;
    const int64_t tile_bytes = k / 256 * rk_size(T);
    const uint8_t *X = XQ;
    for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
        int lo, hi;
        tile_rows(r, o0, o1, &lo, &hi);
        const uint8_t *tile = (const uint8_t *)W + r * tile_bytes;
        for (int64_t t0 = 0; t0 < n; t0 += QR_TB_K) {
            const int NT = n - t0 < QR_TB_K ? (int)(n - t0) : QR_TB_K;
            if (NT == 1) rk_tile(T, Y + t0 * ldy + r * QW_RP_ROWS, ldy, X + t0 * ldxq, ldxq, 1, tile, k, lo, hi);
            else rk_tile(T, Y + t0 * ldy + r * QW_RP_ROWS, ldy, X + t0 * ldxq, ldxq, NT, tile, k, lo, hi);
        }
    }
}

static void matmul_qr_q4_k_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_qr_k(QW_Q4_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_qr_q5_k_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_qr_k(QW_Q5_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

const qw_kernels kernels_qrepack_avx2 = {
    .matmul_qr = {QR_BLOCK32_ENTRIES, [QW_Q4_K] = matmul_qr_q4_k_avx2, [QW_Q5_K] = matmul_qr_q5_k_avx2},
};

#endif
