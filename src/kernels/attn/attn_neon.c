/* attn_neon.c - the attention kernel (kernels.h: attn) for arm64 NEON.
 *
 * The same two passes as attn_avx2.c, with 4-lane vectors:
 *  1. scores: tiles of 4 K rows x 2 heads (8 accumulators over hd, each
 *     reduced on its own by vaddvq_f32); per head max, exp (qw_exp4_neon)
 *     and sum;
 *  2. weighted V sum: blocks of PB positions swept by tiles of up to
 *     4 heads x 16 dims (16 accumulators; arm64 has 32 vector registers);
 *     out *= 1 / sum. No software prefetch: on x86 it measured no gain
 *     for these front-to-back streams (attn_avx2.c).
 * Invariance as in kernels.h: every score is one FMA chain over hd in
 * order, every output element one FMA chain over p in order, whatever nq,
 * the tile or the block. A stub on other architectures.
 * 16-bit caches (attn16): the same code with the rows' elements converted
 * exactly as they are loaded (fcvtl for f16, a 16-bit shift for bf16), so
 * the result is this kernel's on the float32 values.
 */
#include "kernels/kernels_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>

#include "kernels/simd_exp.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

enum { PB = 64, MAX_HEADS = 32 };

/* Rows of elements of type T (qw_kv_type, a constant in every caller),
 * addressed as bytes; ld4 / ld1 give floats. */
INLINE float32x4_t ld4(const char *row, int64_t i, const int T) {
    if (T == QW_KV_F32) return vld1q_f32((const float *)(const void *)row + i);
    uint16x4_t h = vld1_u16((const uint16_t *)(const void *)row + i);
    if (T == QW_KV_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

INLINE float ld1(const char *row, int64_t i, const int T) {
    if (T == QW_KV_F32) return ((const float *)(const void *)row)[i];
    uint16_t h = ((const uint16_t *)(const void *)row)[i];
    return T == QW_KV_F16 ? qw_f16_to_f32(h) : qw_bf16_to_f32(h);
}

/* Scores of rows p..p+nr-1 (k[r] points at row p + min(r, nr-1)) for NH
 * heads starting at q: s[h * n + p + r]. */
INLINE void score_tile(float *s, int64_t n, int64_t p, int64_t nr, const char *const k[4], const float *q,
                       int64_t hd, const int NH, float scale, const int T) {
    float32x4_t acc[2][4];
    UNROLL for (int h = 0; h < NH; h++)
        UNROLL for (int r = 0; r < 4; r++) acc[h][r] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= hd; i += 4) {
        float32x4_t kv[4];
        UNROLL for (int r = 0; r < 4; r++) kv[r] = ld4(k[r], i, T);
        UNROLL for (int h = 0; h < NH; h++) {
            float32x4_t qv = vld1q_f32(q + h * hd + i);
            UNROLL for (int r = 0; r < 4; r++) acc[h][r] = vfmaq_f32(acc[h][r], kv[r], qv);
        }
    }
    UNROLL for (int h = 0; h < NH; h++)
        for (int64_t r = 0; r < nr; r++) {
            float a = vaddvq_f32(acc[h][r]);
            for (int64_t j = i; j < hd; j++) a = fmaf(ld1(k[r], j, T), q[h * hd + j], a);
            s[h * n + p + r] = a * scale;
        }
}

/* out[h0 + h][d0 .. d0 + 4 DV) += sum_{p in [p0, p1)} S[h0 + h][p] V[p][...]
 * (first block: from zero). */
INLINE void v_tile(float *out, const float *S, int64_t n, const qw_kv_rows *kv, int64_t hd, int64_t p0,
                   int64_t p1, int64_t d0, int64_t h0, const int NH, const int DV, int first, const int T) {
    float32x4_t acc[4][4];
    UNROLL for (int h = 0; h < NH; h++)
        UNROLL for (int j = 0; j < DV; j++)
            acc[h][j] = first ? vdupq_n_f32(0.0f) : vld1q_f32(out + (h0 + h) * hd + d0 + 4 * j);
    for (int64_t p = p0; p < p1; p++) {
        const char *v = qw_kv_row_bytes(kv, kv->v_off, p, T);
        float32x4_t vv[4];
        UNROLL for (int j = 0; j < DV; j++) vv[j] = ld4(v, d0 + 4 * j, T);
        UNROLL for (int h = 0; h < NH; h++) {
            float32x4_t w = vld1q_dup_f32(S + (h0 + h) * n + p);
            UNROLL for (int j = 0; j < DV; j++) acc[h][j] = vfmaq_f32(acc[h][j], w, vv[j]);
        }
    }
    UNROLL for (int h = 0; h < NH; h++)
        UNROLL for (int j = 0; j < DV; j++) vst1q_f32(out + (h0 + h) * hd + d0 + 4 * j, acc[h][j]);
}

INLINE void v_tile_any(float *out, const float *S, int64_t n, const qw_kv_rows *kv, int64_t hd, int64_t p0,
                       int64_t p1, int64_t d0, int64_t h0, int NH, int DV, int first, const int T) {
#define VT(nh, dv) v_tile(out, S, n, kv, hd, p0, p1, d0, h0, nh, dv, first, T)
    switch (NH * 8 + DV) {
    case 36: VT(4, 4); break;
    case 33: VT(4, 1); break;
    case 28: VT(3, 4); break;
    case 25: VT(3, 1); break;
    case 20: VT(2, 4); break;
    case 17: VT(2, 1); break;
    case 12: VT(1, 4); break;
    default: VT(1, 1); break;
    }
#undef VT
}

INLINE void attn_chunk(float *out, const float *q, int64_t nq, int64_t hd, const qw_kv_rows *kv, int64_t n,
                       float scale, float *S, const int T) {
    for (int64_t p = 0; p < n; p += 4) {
        int64_t nr = n - p < 4 ? n - p : 4;
        const char *k[4];
        for (int r = 0; r < 4; r++) k[r] = qw_kv_row_bytes(kv, kv->k_off, p + (r < nr ? r : nr - 1), T);
        int64_t h = 0;
        for (; h + 2 <= nq; h += 2) score_tile(S + h * n, n, p, nr, k, q + h * hd, hd, 2, scale, T);
        if (h < nq) score_tile(S + h * n, n, p, nr, k, q + h * hd, hd, 1, scale, T);
    }
    float inv[MAX_HEADS];
    for (int64_t h = 0; h < nq; h++) {
        float *s = S + h * n;
        int64_t i = 0;
        float mx = s[0];
        if (n >= 4) {
            float32x4_t m = vld1q_f32(s);
            for (i = 4; i + 4 <= n; i += 4) m = vmaxq_f32(m, vld1q_f32(s + i));
            mx = vmaxvq_f32(m);
        }
        for (; i < n; i++) mx = s[i] > mx ? s[i] : mx;
        float32x4_t mv = vdupq_n_f32(mx), sv = vdupq_n_f32(0.0f);
        for (i = 0; i + 4 <= n; i += 4) {
            float32x4_t e = qw_exp4_neon(vsubq_f32(vld1q_f32(s + i), mv));
            vst1q_f32(s + i, e);
            sv = vaddq_f32(sv, e);
        }
        float sum = vaddvq_f32(sv);
        for (; i < n; i++) {
            s[i] = expf(s[i] - mx);
            sum += s[i];
        }
        inv[h] = 1.0f / sum;
    }
    int64_t hd4 = hd - hd % 4;
    for (int64_t p0 = 0; p0 < n; p0 += PB) {
        int64_t p1 = p0 + PB < n ? p0 + PB : n;
        int first = p0 == 0;
        for (int64_t d0 = 0; d0 < hd4;) {
            int DV = d0 + 16 <= hd4 ? 4 : 1;
            for (int64_t h = 0; h < nq;) {
                int NH = nq - h < 4 ? (int)(nq - h) : 4;
                v_tile_any(out, S, n, kv, hd, p0, p1, d0, h, NH, DV, first, T);
                h += NH;
            }
            d0 += 4 * DV;
        }
        for (int64_t h = 0; h < nq; h++)
            for (int64_t d = hd4; d < hd; d++) {
                float a = first ? 0.0f : out[h * hd + d];
                for (int64_t p = p0; p < p1; p++) a = fmaf(S[h * n + p], ld1(qw_kv_row_bytes(kv, kv->v_off, p, T), d, T), a);
                out[h * hd + d] = a;
            }
    }
    for (int64_t h = 0; h < nq; h++) {
        float *o = out + h * hd;
        int64_t d = 0;
        for (; d + 4 <= hd; d += 4) vst1q_f32(o + d, vmulq_n_f32(vld1q_f32(o + d), inv[h]));
        for (; d < hd; d++) o[d] *= inv[h];
    }
}

/* A run of nt tokens (kernels.h): token j by itself over its n + j rows,
 * so a run gives each token the bits of a one-token call. (Sharing each K
 * tile and V block among the run's tokens, as attn_avx2.c does, has not
 * been measured on arm64 hardware.) */
INLINE void attn_any(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                     const qw_kv_rows *kv, int64_t n, float scale, float *S, const int T) {
    for (int64_t j = 0; j < nt; j++)
        for (int64_t h = 0; h < nq; h += MAX_HEADS) {
            int64_t m = nq - h < MAX_HEADS ? nq - h : MAX_HEADS;
            attn_chunk(out + j * ldq + h * hd, q + j * ldq + h * hd, m, hd, kv, n + j, scale, S, T);
        }
}

static void attn_neon(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                      const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F32);
}

static void attn_f16_neon(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                          const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F16);
}

static void attn_bf16_neon(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                           const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_BF16);
}

static void store_f16_neon(uint16_t *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = qw_f32_to_f16(x[i]);
}

const qw_kernels kernels_attn_neon = {
    .attn = attn_neon,
    .attn16 = {[QW_KV_F16] = attn_f16_neon, [QW_KV_BF16] = attn_bf16_neon},
    .kv_store16 = {[QW_KV_F16] = store_f16_neon},
};

#endif
