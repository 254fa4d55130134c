/* qdot_neon.c - the integer path of the block-32 types on arm64 NEON; bit
 * for bit qdot_ref.c (see its header for the float steps).
 *
 * Each block's weights become 32 int8 (the nibble types' 0..31 are
 * non-negative int8), multiplied with the activation's int8 quants by
 * qdot_neon.h's exact dot products. The float steps run for 8
 * blocks at a time on two float32x4 (lanes b % 8), vfmaq_f32 being the
 * reference's fmaf. quantize_qa8 keeps the reference entry.
 */
#include "kernels/kernels_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "kernels/qdot/qdot_neon.h"

static inline int blk_bytes(int T) { return qw_type((qw_dtype)T)->bytes; }
static inline int blk_off(int T) { return qw_type((qw_dtype)T)->zero; }
static inline int has_min(int T) { return qw_type((qw_dtype)T)->m_off >= 0; }

/* 16 bytes whose byte j is 16 where bit j of the 16-bit field h is set. */
static inline uint8x16_t high16(uint32_t h) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)(h & 0xff)), vdup_n_u8((uint8_t)(h >> 8)));
    uint8x16_t set = vtstq_u8(v, vld1q_u8(bits));
    return vandq_u8(set, vdupq_n_u8(16));
}

/* One block's 32 weights as int8 (lo: weights 0..15, hi: 16..31). */
static inline void unpack(int T, const uint8_t *w, int8x16_t *lo, int8x16_t *hi) {
    if (T == QW_Q8_0) {
        *lo = vld1q_s8((const int8_t *)(w + 2));
        *hi = vld1q_s8((const int8_t *)(w + 2 + 16));
        return;
    }
    const int o = qw_type((qw_dtype)T)->qs_off;
    uint8x16_t q = vld1q_u8(w + o);
    uint8x16_t l = vandq_u8(q, vdupq_n_u8(15)), h = vshrq_n_u8(q, 4);
    if (T == QW_Q5_0 || T == QW_Q5_1) {
        uint32_t qh;
        memcpy(&qh, w + qw_type((qw_dtype)T)->qh_off, 4);
        l = vorrq_u8(l, high16(qh & 0xffff));
        h = vorrq_u8(h, high16(qh >> 16));
    }
    *lo = vreinterpretq_s8_u8(l);
    *hi = vreinterpretq_s8_u8(h);
}

static inline void matmul_q_neon(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n,
                                 const void *W, int64_t k, int64_t o0, int64_t o1) {
    const int B = blk_bytes(T);
    const int64_t nb = k / 32, rb = nb * B;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *xr = (const uint8_t *)XQ + t * ldxq;
        const int8_t *qx = (const int8_t *)xr;
        const float *dxa = (const float *)(xr + k);
        const int32_t *sa = (const int32_t *)(xr + k + 4 * nb);
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *w = (const uint8_t *)W + o * rb;
            float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
            for (int64_t b0 = 0; b0 < nb; b0 += 8) {
                int32_t is[8] = {0}, s[8] = {0};
                float d[8] = {0}, m[8] = {0}, dx[8] = {0};
                for (int j = 0; j < 8 && b0 + j < nb; j++) {
                    const uint8_t *wb = w + (b0 + j) * B;
                    int8x16_t lo, hi;
                    unpack(T, wb, &lo, &hi);
                    memcpy(&dx[j], dxa + b0 + j, 4);
                    memcpy(&s[j], sa + b0 + j, 4);
                    is[j] = qw_neon_dot32(lo, hi, qx + 32 * (b0 + j)) - blk_off(T) * s[j];
                    d[j] = qw_f16_at(wb);
                    if (has_min(T)) m[j] = qw_f16_at(wb + 2);
                }
                float32x4_t dx0 = vld1q_f32(dx), dx1 = vld1q_f32(dx + 4);
                acc0 = vfmaq_f32(acc0, vmulq_f32(vld1q_f32(d), dx0), vcvtq_f32_s32(vld1q_s32(is)));
                acc1 = vfmaq_f32(acc1, vmulq_f32(vld1q_f32(d + 4), dx1), vcvtq_f32_s32(vld1q_s32(is + 4)));
                if (has_min(T)) {
                    acc0 = vfmaq_f32(acc0, vmulq_f32(vld1q_f32(m), dx0), vcvtq_f32_s32(vld1q_s32(s)));
                    acc1 = vfmaq_f32(acc1, vmulq_f32(vld1q_f32(m + 4), dx1), vcvtq_f32_s32(vld1q_s32(s + 4)));
                }
            }
            /* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
            float32x4_t v = vaddq_f32(acc0, acc1);
            float a = vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 2), c = vgetq_lane_f32(v, 1) + vgetq_lane_f32(v, 3);
            Y[t * ldy + o] = a + c;
        }
    }
}

/* The table's entries: the loop above, one type each. */
static void matmul_q_q8_0_neon(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_neon(QW_Q8_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q4_0_neon(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_neon(QW_Q4_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q4_1_neon(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_neon(QW_Q4_1, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_0_neon(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_neon(QW_Q5_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_1_neon(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_neon(QW_Q5_1, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

const qw_kernels kernels_qdot_neon = {
    .matmul_q =
        {
            [QW_Q8_0] = matmul_q_q8_0_neon,
            [QW_Q4_0] = matmul_q_q4_0_neon,
            [QW_Q4_1] = matmul_q_q4_1_neon,
            [QW_Q5_0] = matmul_q_q5_0_neon,
            [QW_Q5_1] = matmul_q_q5_1_neon,
        },
};

#endif
