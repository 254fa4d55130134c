/* attn_ref.c - plain-C reference of the attention kernels (kernels.h: attn,
 * attn16) and of the 16-bit KV store (kv_store16).
 *
 * Straight loops in index order, libm expf, float32 throughout; built
 * without -ffast-math like kernels_ref.c. The SIMD levels (attn_avx2.c,
 * attn_neon.c) are checked against it in tests/kernels/test_kernels.c.
 *
 * The softmax is folded into the weighted sum: out[h] = (sum_p e_p V[p]) * (1 / sum_p e_p)
 * with e_p = exp(s_p - max s): one multiply per output element instead of one
 * per score (the same value as normalising first, up to rounding).
 *
 * One body serves the three cache types: an element is read as a float
 * (16-bit ones converted exactly), so a 16-bit cache gives the bits of a
 * float32 cache holding the same values.
 */
#include <math.h>

#include "kernels/kernels_impl.h"

#define INLINE static inline __attribute__((always_inline))

/* Element i of row p at offset off, as a float. */
INLINE float kv_at(const qw_kv_rows *kv, int64_t off, int64_t p, int64_t i, qw_kv_type t) {
    if (t == QW_KV_F32) return qw_kv_row(kv, off, p)[i];
    uint16_t h = qw_kv_row16(kv, off, p)[i];
    return t == QW_KV_F16 ? qw_f16_to_f32(h) : qw_bf16_to_f32(h);
}

/* One token: nq heads over rows 0..n-1, scores in S[nq][n]. */
INLINE void attn_one(float *out, const float *q, int64_t nq, int64_t hd, const qw_kv_rows *kv, int64_t n,
                     float scale, float *S, qw_kv_type t) {
    for (int64_t h = 0; h < nq; h++) {
        const float *qh = q + h * hd;
        float *s = S + h * n, *o = out + h * hd;
        float mx = -INFINITY;
        for (int64_t p = 0; p < n; p++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < hd; i++) acc += qh[i] * kv_at(kv, kv->k_off, p, i, t);
            s[p] = acc * scale;
            if (s[p] > mx) mx = s[p];
        }
        float sum = 0.0f;
        for (int64_t p = 0; p < n; p++) {
            s[p] = expf(s[p] - mx);
            sum += s[p];
        }
        for (int64_t d = 0; d < hd; d++) o[d] = 0.0f;
        for (int64_t p = 0; p < n; p++)
            for (int64_t d = 0; d < hd; d++) o[d] += s[p] * kv_at(kv, kv->v_off, p, d, t);
        float inv = 1.0f / sum;
        for (int64_t d = 0; d < hd; d++) o[d] *= inv;
    }
}

/* A run of nt tokens: token j by itself, over its n + j rows. */
INLINE void attn_any(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                     const qw_kv_rows *kv, int64_t n, float scale, float *S, qw_kv_type t) {
    for (int64_t j = 0; j < nt; j++) attn_one(out + j * ldq, q + j * ldq, nq, hd, kv, n + j, scale, S, t);
}

static void attn_ref(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                     const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F32);
}

static void attn_f16_ref(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                         const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F16);
}

static void attn_bf16_ref(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                          const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_BF16);
}

static void store_f16_ref(uint16_t *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = qw_f32_to_f16(x[i]);
}

/* The bf16-activation reference's rounding (matmul/bf16act_ref.c):
 * nearest even, NaN kept a NaN. */
static void store_bf16_ref(uint16_t *y, const float *x, int64_t n) { kernels_to_bf16_ref(y, x, n); }

const qw_kernels kernels_attn_ref = {
    .attn = attn_ref,
    .attn16 = {[QW_KV_F16] = attn_f16_ref, [QW_KV_BF16] = attn_bf16_ref},
    .kv_store16 = {[QW_KV_F16] = store_f16_ref, [QW_KV_BF16] = store_bf16_ref},
};
