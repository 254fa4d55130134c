/* attn_ref.c - plain-C reference of the attention kernel (kernels.h: attn).
 *
 * Straight loops in index order, libm expf, float32 throughout; built
 * without -ffast-math like kernels_ref.c. The SIMD levels (attn_avx2.c,
 * attn_neon.c) are checked against it in tests/kernels/test_kernels.c.
 *
 * The softmax is folded into the weighted sum: out[h] = (sum_p e_p V[p]) * (1 / sum_p e_p)
 * with e_p = exp(s_p - max s): one multiply per output element instead of one
 * per score (the same value as normalising first, up to rounding).
 */
#include <math.h>

#include "kernels/kernels_impl.h"

static void attn_ref(float *out, const float *q, int64_t nq, int64_t hd, const qw_kv_rows *kv, int64_t n,
                     float scale, float *S) {
    for (int64_t h = 0; h < nq; h++) {
        const float *qh = q + h * hd;
        float *s = S + h * n, *o = out + h * hd;
        float mx = -INFINITY;
        for (int64_t p = 0; p < n; p++) {
            const float *k = qw_kv_row(kv, kv->k_off, p);
            float acc = 0.0f;
            for (int64_t i = 0; i < hd; i++) acc += qh[i] * k[i];
            s[p] = acc * scale;
            if (s[p] > mx) mx = s[p];
        }
        float sum = 0.0f;
        for (int64_t p = 0; p < n; p++) {
            s[p] = expf(s[p] - mx);
            sum += s[p];
        }
        for (int64_t d = 0; d < hd; d++) o[d] = 0.0f;
        for (int64_t p = 0; p < n; p++) {
            const float *v = qw_kv_row(kv, kv->v_off, p);
            for (int64_t d = 0; d < hd; d++) o[d] += s[p] * v[d];
        }
        float inv = 1.0f / sum;
        for (int64_t d = 0; d < hd; d++) o[d] *= inv;
    }
}

void kernels_fill_attn_ref(qw_kernels *k) { k->attn = attn_ref; }
