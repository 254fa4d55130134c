/* kquant_neon.c - the integer path of the K-quants Q4_K, Q5_K, Q6_K on
 * arm64 NEON; bit for bit kquant_ref.c (see its header for the float
 * steps), checked by tests/kernels/test_qdot_kquant.c under qemu-aarch64.
 *
 * Per super-block, each sub-block's 32 weights are unpacked to int8 (Q4_K /
 * Q5_K: 0..15 / 0..31; Q6_K: q - 32, in -32..31) and dotted with the
 * activation's quants exactly (qdot_neon.h). The integer steps of the
 * reference (Q4_K / Q5_K: the dot; Q6_K: its two 16-weight halves with
 * their own scales) give the same int32s; then the float steps run on two
 * float32x4 holding accumulator lanes 0-3 and 4-7: each vmulq_f32 is one
 * of the reference's products (one rounding), vfmaq_f32 / vfmsq_f32 its
 * fmaf.
 */
#include "kernels/kernels_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "kernels/qdot/qdot_neon.h"

/* Lanes 0-3 and 4-7 of the reference's acc[8]. */
typedef struct {
    float32x4_t lo, hi;
} acc8;

/* acc[j] = fmaf(f * dx[j], (float)v[j], acc[j]) for the 8 lanes. */
static inline acc8 fma8(acc8 a, float f, float32x4_t dx0, float32x4_t dx1, const int32_t v[8]) {
    const float32x4_t fv = vdupq_n_f32(f);
    a.lo = vfmaq_f32(a.lo, vmulq_f32(fv, dx0), vcvtq_f32_s32(vld1q_s32(v)));
    a.hi = vfmaq_f32(a.hi, vmulq_f32(fv, dx1), vcvtq_f32_s32(vld1q_s32(v + 4)));
    return a;
}

/* Q4_K / Q5_K super-block: d, dmin, scales @4, (Q5_K: qh[32] @16), qs.
 * Sub-block j is nibble j % 2 of qs[32 (j / 2) + l], plus bit j of qh[l]
 * as bit 4 (Q5_K). */
static inline acc8 superblock_q45_k(acc8 a, const uint8_t *blk, const int8_t *qx, const float *dxa,
                                    const float *dsa, int five) {
    const float d = qw_f16_at(blk), dmin = qw_f16_at(blk + 2);
    const uint8_t *qs = blk + (five ? 48 : 16);
    uint8x16_t qh0 = vdupq_n_u8(0), qh1 = vdupq_n_u8(0);
    if (five) {
        qh0 = vld1q_u8(blk + 16);
        qh1 = vld1q_u8(blk + 32);
    }
    int32_t dot[8];
    float dsc[8], dmn[8];
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        qw_kquant_scale_min(blk + 4, j, &sc, &mn);
        dsc[j] = d * (float)sc;
        dmn[j] = dmin * (float)mn;
        uint8x16_t q0 = vld1q_u8(qs + 32 * (j / 2)), q1 = vld1q_u8(qs + 32 * (j / 2) + 16);
        if (j % 2) {
            q0 = vshrq_n_u8(q0, 4);
            q1 = vshrq_n_u8(q1, 4);
        } else {
            q0 = vandq_u8(q0, vdupq_n_u8(15));
            q1 = vandq_u8(q1, vdupq_n_u8(15));
        }
        if (five) {
            const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << j)), sixteen = vdupq_n_u8(16);
            q0 = vorrq_u8(q0, vandq_u8(vtstq_u8(qh0, bit), sixteen));
            q1 = vorrq_u8(q1, vandq_u8(vtstq_u8(qh1, bit), sixteen));
        }
        dot[j] = qw_neon_dot32(vreinterpretq_s8_u8(q0), vreinterpretq_s8_u8(q1), qx + 32 * j);
    }
    float dx[8], ds[8];
    memcpy(dx, dxa, sizeof dx);
    memcpy(ds, dsa, sizeof ds);
    /* fmaf(dx, dsc * (float)dot, acc), then fmaf(-dmn, ds, acc): vfmsq_f32
     * is a - b * c with one rounding, the same as fmaf(-b, c, a) */
    a.lo = vfmaq_f32(a.lo, vld1q_f32(dx), vmulq_f32(vld1q_f32(dsc), vcvtq_f32_s32(vld1q_s32(dot))));
    a.hi = vfmaq_f32(a.hi, vld1q_f32(dx + 4), vmulq_f32(vld1q_f32(dsc + 4), vcvtq_f32_s32(vld1q_s32(dot + 4))));
    a.lo = vfmsq_f32(a.lo, vld1q_f32(dmn), vld1q_f32(ds));
    a.hi = vfmsq_f32(a.hi, vld1q_f32(dmn + 4), vld1q_f32(ds + 4));
    return a;
}

/* Q6_K super-block: ql[128], qh[64], sc[16] (int8) @192, d @208. Sub-block
 * j (half h = j / 4, c = j % 4): low 4 bits nibble c / 2 of
 * ql[64 h + 32 (j % 2) + l], high 2 bits bits 2c of qh[32 h + l]. */
static inline acc8 superblock_q6_k(acc8 a, const uint8_t *blk, const int8_t *qx, const float *dxa) {
    const int8_t *sc = (const int8_t *)(blk + 192);
    const float d = qw_f16_at(blk + 208);
    int32_t is[8];
    for (int j = 0; j < 8; j++) {
        const int h = j / 4, c = j % 4;
        const uint8_t *ql = blk + 64 * h + 32 * (j % 2), *qh = blk + 128 + 32 * h;
        int32_t half[2];
        for (int g = 0; g < 2; g++) {
            uint8x16_t lo = vld1q_u8(ql + 16 * g), hi = vld1q_u8(qh + 16 * g);
            lo = c / 2 ? vshrq_n_u8(lo, 4) : vandq_u8(lo, vdupq_n_u8(15));
            /* bits 2c..2c+1 of hi, moved to bits 4..5 */
            switch (c) {
            case 0: hi = vshlq_n_u8(hi, 4); break;
            case 1: hi = vshlq_n_u8(hi, 2); break;
            case 2: break;
            default: hi = vshrq_n_u8(hi, 2); break;
            }
            hi = vandq_u8(hi, vdupq_n_u8(0x30));
            const int8x16_t w = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
            half[g] = vaddvq_s32(qw_neon_dot16(vdupq_n_s32(0), w, vld1q_s8(qx + 32 * j + 16 * g)));
        }
        is[j] = sc[2 * j] * half[0] + sc[2 * j + 1] * half[1];
    }
    float dx[8];
    memcpy(dx, dxa, sizeof dx);
    return fma8(a, d, vld1q_f32(dx), vld1q_f32(dx + 4), is);
}

static inline void matmul_q_kquant_neon(qw_dtype T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n,
                                        const void *W, int64_t k, int64_t o0, int64_t o1) {
    const int bytes = qw_type(T)->bytes;
    const int64_t nsb = k / 256, nb = k / QW_QA8_BLOCK, rb = nsb * bytes;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *xr = (const uint8_t *)XQ + t * ldxq;
        const int8_t *qx = (const int8_t *)xr;
        const float *dxa = (const float *)(xr + k);
        const float *dsa = (const float *)(xr + k + 8 * nb);
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *w = (const uint8_t *)W + o * rb;
            acc8 a = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
            for (int64_t B = 0; B < nsb; B++) {
                const uint8_t *blk = w + B * bytes;
                if (T == QW_Q6_K) a = superblock_q6_k(a, blk, qx + 256 * B, dxa + 8 * B);
                else a = superblock_q45_k(a, blk, qx + 256 * B, dxa + 8 * B, dsa + 8 * B, T == QW_Q5_K);
            }
            /* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
            const float32x4_t v = vaddq_f32(a.lo, a.hi);
            const float p = vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 2), q = vgetq_lane_f32(v, 1) + vgetq_lane_f32(v, 3);
            Y[t * ldy + o] = p + q;
        }
    }
}

static void matmul_q_q4_k_neon(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_q_kquant_neon(QW_Q4_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_k_neon(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_q_kquant_neon(QW_Q5_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q6_k_neon(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_q_kquant_neon(QW_Q6_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

const qw_kernels kernels_kquant_neon = {
    .matmul_q =
        {
            [QW_Q4_K] = matmul_q_q4_k_neon,
            [QW_Q5_K] = matmul_q_q5_k_neon,
            [QW_Q6_K] = matmul_q_q6_k_neon,
        },
};

#endif
