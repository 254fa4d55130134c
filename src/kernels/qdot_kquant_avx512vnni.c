/* qdot_kquant_avx512vnni.c - the integer path's K-quant kernels (matmul_q
 * of Q4_K, Q5_K, Q6_K with QA8 activations, kernels.h) with AVX512-VNNI's
 * vpdpbusd (unsigned weight quants x signed activation quants, 4 products
 * per int32), on 256-bit registers (AVX512VL): Zen 4 splits 512-bit
 * operations in two, and a sub-block is 32 bytes. Installed into the avx512
 * table only where cpu.c saw the AVX512-VNNI bit. The float steps are
 * qdot_kquant_ref.c's; shared unpacking and tiling in qdot_kquant_x86.h.
 * The sums are int32 throughout; the scales are applied after the
 * horizontal sums (vpmulld on 8 lanes rather than one multiply per
 * sub-block):
 *  - Q4_K / Q5_K: sc * dot per sub-block, mn * s from the QA8 block sums;
 *  - Q6_K: unsigned q (0..63); the -32 offset is 32 * (sum of qx over each
 *    16-weight half), from vpdpbusd of 32 with the activations once per
 *    token and super-block, subtracted before the halves get their scales.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include "kernels/qdot_kquant_x86.h"

INLINE __m256i dot4(__m256i w, const int8_t *x) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, _mm256_loadu_si256((const __m256i *)x));
}
/* p[0..3]: 8 int32 sums of sub-blocks j0 .. j0 + 3 -> per 128-bit lane
 * (first / last 16 weights) sub-block j0 + i in dword i. */
INLINE __m256i quad_halves(const __m256i *p) {
    return quad_sum_epi32(pair_sum_epi32(p[0], p[1]), pair_sum_epi32(p[2], p[3]));
}

INLINE __m256 step_q45(__m256 acc, const row_q45 *r, const tok_q45 *x) {
    __m256i p[8];
    UNROLL for (int j = 0; j < 8; j++) p[j] = dot4(r->w[j], x->q + 32 * j);
    const __m256i dot = join_halves(quad_halves(p), quad_halves(p + 4));
    const __m256i isum = _mm256_mullo_epi32(dot, r->sc), msum = _mm256_mullo_epi32(r->mn, x->s);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(r->d, x->dx), _mm256_cvtepi32_ps(isum), acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(r->dmin, x->dx), _mm256_cvtepi32_ps(msum), acc);
}

typedef struct {
    tok_q45 x;
    __m256i off_a, off_b; /* 32 * half sums of qx, as quad_halves leaves them */
} tok_q6;

INLINE void prep_tok_q6(tok_q6 *t, const uint8_t *row, int64_t k, int64_t B) {
    prep_tok_q45(&t->x, row, k, B);
    const __m256i k32 = _mm256_set1_epi8(32);
    __m256i p[8];
    UNROLL for (int j = 0; j < 8; j++) p[j] = dot4(k32, t->x.q + 32 * j);
    t->off_a = quad_halves(p);
    t->off_b = quad_halves(p + 4);
}

INLINE __m256 step_q6(__m256 acc, const row_q6 *r, const tok_q6 *t) {
    __m256i p[8];
    UNROLL for (int j = 0; j < 8; j++) p[j] = dot4(r->w[j], t->x.q + 32 * j);
    const __m256i a = _mm256_mullo_epi32(_mm256_sub_epi32(quad_halves(p), t->off_a), r->ca);
    const __m256i b = _mm256_mullo_epi32(_mm256_sub_epi32(quad_halves(p + 4), t->off_b), r->cb);
    return _mm256_fmadd_ps(_mm256_mul_ps(r->d, t->x.dx), _mm256_cvtepi32_ps(join_halves(a, b)), acc);
}

KQ_KERNEL(matmul_q_q4_k, avx512vnni, row_q45, prep_row_q4, tok_q45, prep_tok_q45, step_q45, 144)
KQ_KERNEL(matmul_q_q5_k, avx512vnni, row_q45, prep_row_q5, tok_q45, prep_tok_q45, step_q45, 176)
KQ_KERNEL(matmul_q_q6_k, avx512vnni, row_q6, prep_row_q6, tok_q6, prep_tok_q6, step_q6, 210)

int kernels_fill_qdot_kquant_avx512vnni(qw_kernels *k) {
    k->matmul_q[QW_Q4_K] = matmul_q_q4_k_avx512vnni;
    k->matmul_q[QW_Q5_K] = matmul_q_q5_k_avx512vnni;
    k->matmul_q[QW_Q6_K] = matmul_q_q6_k_avx512vnni;
    return 1;
}

#else
int kernels_fill_qdot_kquant_avx512vnni(qw_kernels *k) {
    (void)k;
    return 0;
}
#endif
