/* kquant_avx2.c - the integer path's K-quant kernels (matmul_q of
 * Q4_K, Q5_K, Q6_K with QA8 activations, kernels.h) on AVX2: vpmaddubsw
 * (unsigned weight quants x signed activation quants, pairs in int16, at
 * most 2 * 63 * 127 = 16002: no saturation) and vpmaddwd to int32, then
 * the horizontal sums and scales of kquant_x86.h. The float steps are
 * kquant_ref.c's; shared unpacking and tiling in kquant_x86.h.
 *  - Q4_K / Q5_K: the plain dots (scaled_sums with unit scales), then
 *    the reference's dsc * dot and -dmn * ds in float.
 *  - Q6_K: unsigned q (0..63), and the -32 offset as 32 * qx pairs
 *    (vpmaddubsw of 32 with the activations, once per token and
 *    super-block) subtracted in int16, |q - 32| * 127 * 2 <= 8128.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include "kernels/qdot/kquant_x86.h"

INLINE __m256i ld_q32(const int8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 32 unsigned x 32 signed bytes -> 8 int32 sums of 4 products */
INLINE __m256i dot4(__m256i w, const int8_t *x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, ld_q32(x)), _mm256_set1_epi16(1));
}

INLINE __m256 step_q45(__m256 acc, const row_q45 *r, const tok_q45 *x) {
    __m256i p[8];
    UNROLL for (int j = 0; j < 8; j++) p[j] = dot4(r->w[j], x->q + 32 * j);
    /* fmaf(dx, dsc * dot, acc), then fmaf(-dmn, ds, acc) (fnmadd: -(a b) + c, one rounding) */
    acc = _mm256_fmadd_ps(x->dx, _mm256_mul_ps(r->dsc, _mm256_cvtepi32_ps(plain_sums(p))), acc);
    return _mm256_fnmadd_ps(r->dmn, x->ds, acc);
}

typedef struct {
    tok_q45 x;
    __m256i off[8]; /* per sub-block: 32 * qx in vpmaddubsw pairs (the -32 offset) */
} tok_q6;

INLINE void prep_tok_q6(tok_q6 *t, const uint8_t *row, int64_t k, int64_t B) {
    prep_tok_q45(&t->x, row, k, B);
    const __m256i k32 = _mm256_set1_epi8(32);
    UNROLL for (int j = 0; j < 8; j++) t->off[j] = _mm256_maddubs_epi16(k32, ld_q32(t->x.q + 32 * j));
}

INLINE __m256 step_q6(__m256 acc, const row_q6 *r, const tok_q6 *t) {
    __m256i p[8];
    UNROLL for (int j = 0; j < 8; j++)
        p[j] = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(r->w[j], ld_q32(t->x.q + 32 * j)), t->off[j]),
                                 _mm256_set1_epi16(1));
    const __m256i isum = scaled_sums(p, r->sa, r->sb);
    return _mm256_fmadd_ps(_mm256_mul_ps(r->d, t->x.dx), _mm256_cvtepi32_ps(isum), acc);
}

#include "kernels/qdot/kquant_x86_tiles.h"

static void matmul_q_q4_k_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    kq_matmul_tiles(QW_Q4_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_k_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    kq_matmul_tiles(QW_Q5_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q6_k_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    kq_matmul_tiles(QW_Q6_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

const qw_kernels kernels_kquant_avx2 = {
    .matmul_q =
        {
            [QW_Q4_K] = matmul_q_q4_k_avx2,
            [QW_Q5_K] = matmul_q_q5_k_avx2,
            [QW_Q6_K] = matmul_q_q6_k_avx2,
        },
};

#endif
