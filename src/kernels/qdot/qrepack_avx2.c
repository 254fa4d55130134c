/* qrepack_avx2.c - matmul_qr with AVX2 (vpmaddubsw + vpmaddwd): the
 * integer path of the block-32 types on repacked weights (kernels.h:
 * "repacked weights"; the layout is qrepack_ref.c's, whose float steps it
 * reproduces bit for bit). The avx2 level's entries, and the avx512
 * level's where the CPU lacks AVX512-VNNI. The tile loops are
 * qrepack_tiles.h's; this file gives them the block dot product.
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

#define QR_TABLE kernels_qrepack_avx2
#include "kernels/qdot/qrepack_tiles.h"

#endif
