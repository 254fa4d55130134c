/* qrepack_avx2.c - matmul_qr with AVX2 (vpmaddubsw + vpmaddwd): the
 * integer path of the block-32 types on repacked weights (kernels.h:
 * "repacked weights"; the layout is qrepack_ref.c's, whose float steps it
 * reproduces bit for bit). The avx2 level's entries, and the avx512
 * level's where the CPU lacks AVX512-VNNI. The block-32 tile loops are
 * qrepack_tiles.h's and the K-quants' qrepack_ktiles_ymm.h's; this file
 * gives them the dot products.
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

/* An empty asm that "changes" v: GCC cannot reassociate a sum across it,
 * so a chain of adds stays a chain (pair_sum, q6_isum). */
#define KEEP_CHAIN(v) __asm__("" : "+x"(v))

/* Vectors u[j0 .. j0 + G) against their activation dwords (x_at: xb's
 * when the caller broadcast them, else from xq): vpmaddubsw's
 * int16 pairs summed in int16 (exact: the bounds above). serial: keep the
 * sum one chain, vector after vector (KEEP_CHAIN). The K-quant tiles want
 * that: as a tree its partial sums, beside the 8 weight vectors of a part
 * held across the token loop and the sub-block's float scales, needed
 * more than the 16 ymm registers and GCC spilled weight vectors inside
 * the loop (8 stack accesses per token and part in Q4_K's); without them
 * bench_qdot -d q4_k -n 128 ran 19% faster, Q5_K 14%; Q6_K's q6_isum, one
 * chain of its 4 pairs, 10% (docs/PERFORMANCE.md). The block-32 tiles
 * keep the tree: Q4_0's spilled little and its chain ran 2-4% slower. */
INLINE __m256i pair_sum(const __m256i *u, const uint8_t *xq, const __m256i *xb, int j0, int G, int serial) {
    __m256i p = _mm256_maddubs_epi16(u[j0], x_at(xq, xb, j0));
    UNROLL
    for (int j = j0 + 1; j < j0 + G; j++) {
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[j], x_at(xq, xb, j)));
        if (serial) KEEP_CHAIN(p);
    }
    return p;
}

INLINE __m256i part_isum(int T, const qr_w *w, const uint8_t *xq, const qr_xb *xb, int32_t s) {
    const __m256i *xv = xb ? xb->v : NULL;
    const __m256i ones = _mm256_set1_epi16(1);
    if (T == QW_Q8_0) {
        __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        UNROLL
        for (int j = 0; j < 8; j++) { /* two chains */
            const __m256i x = _mm256_sign_epi8(x_at(xq, xv, j), w->q[j]);
            p[j % 2] = _mm256_add_epi32(p[j % 2], _mm256_madd_epi16(_mm256_maddubs_epi16(w->a[j], x), ones));
        }
        return _mm256_add_epi32(p[0], p[1]);
    }
    /* int16 sums of G vectors' pairs (exact: the bounds above) */
    const int G = has_qh(T) ? 4 : 8;
    __m256i isum = _mm256_setzero_si256();
    UNROLL
    for (int j0 = 0; j0 < 8; j0 += G) isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pair_sum(w->a, xq, xv, j0, G, 0), ones));
    /* s * 2^k, not s << k: s is often negative */
    if (off_log2(T) >= 0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(s * (1 << off_log2(T))));
    return isum;
}

#include "kernels/qdot/qrepack_tiles.h"

/* ---- The K-quants' hooks for qrepack_ktiles_ymm.h. */

/* One token's block (32 quants at xq; xb: NULL or its dwords broadcast,
 * qrepack_ktiles_ymm.h) against part u of a Q4_K / Q5_K sub-block: exact
 * int32 per row (Q4_K's weights <= 15: the 8 vectors' pairs add up in
 * int16; Q5_K's <= 31: two groups of 4). */
INLINE __m256i rk_dot(int T, const __m256i u[8], const uint8_t *xq, const __m256i *xb) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int G = T == QW_Q5_K ? 4 : 8;
    __m256i dot = _mm256_setzero_si256();
    UNROLL
    for (int j0 = 0; j0 < 8; j0 += G) dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pair_sum(u, xq, xb, j0, G, 1), ones));
    return dot;
}

/* Q6_K in integers: the weights q (0..63) go into vpmaddubsw as they are
 * (a pair <= 2 * 63 * 127 = 16002, two vectors' pairs summed in int16 <=
 * 32004), and vpmaddwd against (sc, sc) int16 pairs applies the scale
 * while widening; the offset 32 (sc_0 h_0 + sc_1 h_1) is one vpmaddwd of
 * the (sc_0, sc_1) pairs against the token's (h_0, h_1). All exact in
 * int32, converted once: the reference's (float)isum. */
typedef struct {
    __m256i sc0, sc1, pair; /* int16 (sc_0, sc_0), (sc_1, sc_1), (sc_0, sc_1) per row lane */
} q6_sc;

INLINE void q6_scales(const uint8_t *tb, int j, int p, q6_sc *s) {
    const __m256i a = q6_sc_i32(tb + Q6_SC + 32 * j + 8 * p), c = q6_sc_i32(tb + Q6_SC + 32 * j + 16 + 8 * p);
    const __m256i lo16 = _mm256_set1_epi32(0xffff);
    s->sc0 = _mm256_or_si256(_mm256_and_si256(a, lo16), _mm256_slli_epi32(a, 16));
    s->sc1 = _mm256_or_si256(_mm256_and_si256(c, lo16), _mm256_slli_epi32(c, 16));
    s->pair = _mm256_or_si256(_mm256_and_si256(a, lo16), _mm256_slli_epi32(c, 16));
}

INLINE __m256 q6_isum(const __m256i u[8], const q6_sc *s, const uint8_t *xq, const __m256i *xb, const int16_t h[2]) {
    /* one chain of the 4 scaled pairs, as pair_sum's, for the same reason */
    __m256i sum = _mm256_setzero_si256();
    UNROLL
    for (int i = 0; i < 4; i++) {
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pair_sum(u, xq, xb, 2 * i, 2, 1), i < 2 ? s->sc0 : s->sc1));
        KEEP_CHAIN(sum);
    }
    /* (h_0, h_1) in every lane (xb[8] where the caller broadcast it);
     * times 32 as a shift: the lane is an int32, two's complement */
    const __m256i hv = x_at((const uint8_t *)h, xb ? xb + 8 : NULL, 0);
    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(s->pair, hv), 5);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(sum, off));
}

#include "kernels/qdot/qrepack_ktiles_ymm.h"

const qw_kernels kernels_qrepack_avx2 = {
    .matmul_qr = {QR_BLOCK32_ENTRIES, QR_KQUANT_ENTRIES},
};

#endif
