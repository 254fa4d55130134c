/* qdot_kquant_avx512vnni.c - the integer path's K-quant kernels (matmul_q
 * of Q4_K, Q5_K, Q6_K with QA8 activations, kernels.h) with AVX512-VNNI's
 * vpdpbusd (unsigned weight quants x signed activation quants, 4 products
 * per int32), on 256-bit registers (AVX512VL): Zen 4 splits 512-bit
 * operations in two, and a sub-block is 32 bytes. Installed into the avx512
 * table only where cpu.c saw the AVX512-VNNI bit. The float steps are
 * qdot_kquant_ref.c's; shared unpacking, horizontal sums and tiling in
 * qdot_kquant_x86.h. Q4_K / Q5_K: the min term mn * s from the QA8 block
 * sums. Q6_K: unsigned q (0..63); each sub-block's vpdpbusd starts from
 * -32 * qx (summed 4 at a time, once per token and super-block), so it
 * gives the sums of (q - 32) * qx that the packs in scaled_sums need.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include "kernels/qdot_kquant_x86.h"

/* 32 unsigned x 32 signed bytes -> 8 int32 sums of 4 products, added to acc */
INLINE __m256i dot4(__m256i acc, __m256i w, const int8_t *x) {
    return _mm256_dpbusd_epi32(acc, w, _mm256_loadu_si256((const __m256i *)x));
}

INLINE __m256 step_q45(__m256 acc, const row_q45 *r, const tok_q45 *x) {
    __m256i p[8];
    UNROLL for (int j = 0; j < 8; j++) p[j] = dot4(_mm256_setzero_si256(), r->w[j], x->q + 32 * j);
    const __m256i isum = scaled_sums(p, r->sa, r->sb), msum = _mm256_mullo_epi32(r->mn, x->s);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(r->d, x->dx), _mm256_cvtepi32_ps(isum), acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(r->dmin, x->dx), _mm256_cvtepi32_ps(msum), acc);
}

typedef struct {
    tok_q45 x;
    __m256i off[8]; /* -32 * qx, summed 4 at a time: the start of each sub-block's vpdpbusd */
} tok_q6;

INLINE void prep_tok_q6(tok_q6 *t, const uint8_t *row, int64_t k, int64_t B) {
    prep_tok_q45(&t->x, row, k, B);
    const __m256i k32 = _mm256_set1_epi8(32);
    UNROLL for (int j = 0; j < 8; j++)
        t->off[j] = _mm256_sub_epi32(_mm256_setzero_si256(), dot4(_mm256_setzero_si256(), k32, t->x.q + 32 * j));
}

/* vpdpbusd from -32 * qx: the sums of (q - 32) * qx at no extra cost. */
INLINE __m256 step_q6(__m256 acc, const row_q6 *r, const tok_q6 *t) {
    __m256i p[8];
    UNROLL for (int j = 0; j < 8; j++) p[j] = dot4(t->off[j], r->w[j], t->x.q + 32 * j);
    const __m256i isum = scaled_sums(p, r->sa, r->sb);
    return _mm256_fmadd_ps(_mm256_mul_ps(r->d, t->x.dx), _mm256_cvtepi32_ps(isum), acc);
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
