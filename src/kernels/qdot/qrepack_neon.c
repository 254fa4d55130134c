/* qrepack_neon.c - matmul_qr on arm64 NEON: the integer path of the
 * block-32 types on repacked weights (kernels.h: "repacked weights"; the
 * layout is qrepack_ref.c's, whose float steps it reproduces bit for bit).
 * The tile loops are qrepack_tiles.h's, over four parts of 4 rows (part p:
 * the 16 bytes at 16p of each 64-byte weight vector, int32 lane i of row
 * 4p + i); this file gives them the block dot product.
 *
 * The weights go in as int8: the nibble types' 0..31 as they are (the
 * zero of Q4_0 / Q5_0 comes off once per block through the activation sum
 * s), Q8_0's stored q + 128 back to q (^ 0x80, so its sum is the isum
 * directly), multiplied by qdot_neon.h's qw_neon_dot4x4: sdot where the
 * compiler targets the dot-product extension, else widening vmull_s8 and
 * pairwise adds (a pair of products is at most 2 * 128 * 127 = 32512, so
 * its int16 sum is exact), one row's 4 products per int32 lane.
 */
#include "kernels/kernels_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "kernels/qdot/qdot_neon.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")
INLINE int blk_bytes(int T) { return qw_type((qw_dtype)T)->bytes; }
INLINE int blk_off(int T) { return qw_type((qw_dtype)T)->zero; }
INLINE int has_min(int T) { return qw_type((qw_dtype)T)->m_off >= 0; }

#include "kernels/qdot/qrepack_layout.h"

#define QR_PARTS 4
typedef float32x4_t qr_vf;

INLINE qr_vf vf_zero(void) { return vdupq_n_f32(0.0f); }
INLINE qr_vf vf_set1(float x) { return vdupq_n_f32(x); }
INLINE qr_vf vf_add(qr_vf a, qr_vf b) { return vaddq_f32(a, b); }
INLINE qr_vf vf_mul(qr_vf a, qr_vf b) { return vmulq_f32(a, b); }
INLINE qr_vf vf_fmadd(qr_vf a, qr_vf b, qr_vf c) { return vfmaq_f32(c, a, b); } /* a b + c, one rounding */
INLINE qr_vf vf_of_i32(int32x4_t v) { return vcvtq_f32_s32(v); }
/* Part p's 4 binary16 of the 16 at p16 (d or m), as floats. */
INLINE qr_vf vf_f16(const uint8_t *p16, int p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)(p16 + 8 * p))));
}

/* Rows [lo, hi) of part p's 4 (y: the tile's first row). */
INLINE void store_part(float *y, int p, int lo, int hi, qr_vf v) {
    if (lo <= 4 * p && hi >= 4 * p + 4) {
        vst1q_f32(y + 4 * p, v);
        return;
    }
    float r[4];
    vst1q_f32(r, v);
    for (int i = 0; i < 4; i++)
        if (4 * p + i >= lo && 4 * p + i < hi) y[4 * p + i] = r[i];
}

/* Part p of a tile block's 8 weight vectors as int8. */
typedef struct {
    int8x16_t q[8];
} qr_w;

INLINE void load_part(int T, const uint8_t *tb, int p, qr_w *w) {
    const uint8_t *q = tb + off_q(T) + 16 * p;
    if (T == QW_Q8_0) {
        UNROLL
        for (int j = 0; j < 8; j++) w->q[j] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(q + 64 * j), vdupq_n_u8(0x80)));
        return;
    }
    UNROLL
    for (int v = 0; v < 4; v++) { /* low nibbles: vector 2v, high: 2v + 1 */
        const uint8x16_t z = vld1q_u8(q + 64 * v);
        uint8x16_t lo = vandq_u8(z, vdupq_n_u8(15)), hi = vshrq_n_u8(z, 4);
        if (has_qh(T)) { /* the plane's bytes 16p..16p+15: bit j of a byte is vector j's high bit */
            const uint8x16_t P = vld1q_u8(tb + off_qh(T) + 16 * p), b4 = vdupq_n_u8(16);
            lo = vorrq_u8(lo, vandq_u8(vshlq_u8(P, vdupq_n_s8((int8_t)(4 - 2 * v))), b4));
            hi = vorrq_u8(hi, vandq_u8(vshlq_u8(P, vdupq_n_s8((int8_t)(3 - 2 * v))), b4));
        }
        w->q[2 * v] = vreinterpretq_s8_u8(lo);
        w->q[2 * v + 1] = vreinterpretq_s8_u8(hi);
    }
}

/* acc lane i += the 4 products of row i's weights with activation dword x. */
INLINE int32x4_t dot4(int32x4_t acc, int8x16_t w, uint32_t x) {
    return qw_neon_dot4x4(acc, w, vreinterpretq_s8_u32(vdupq_n_u32(x)));
}

/* Every part reads the token's block from xq (no QR_X_SHARED here:
 * qrepack_tiles.h). */
typedef void qr_xb;

INLINE int32x4_t part_isum(int T, const qr_w *w, const uint8_t *xq, const qr_xb *xb, int32_t s) {
    (void)xb;
    int32x4_t p0 = vdupq_n_s32(0), p1 = vdupq_n_s32(0);
    UNROLL
    for (int j = 0; j < 8; j += 2) { /* two chains */
        uint32_t a, c;
        memcpy(&a, xq + 4 * j, 4);
        memcpy(&c, xq + 4 * j + 4, 4);
        p0 = dot4(p0, w->q[j], a);
        p1 = dot4(p1, w->q[j + 1], c);
    }
    int32x4_t isum = vaddq_s32(p0, p1);
    if (T != QW_Q8_0 && blk_off(T)) isum = vsubq_s32(isum, vdupq_n_s32(s * blk_off(T)));
    return isum;
}

#include "kernels/qdot/qrepack_tiles.h"

const qw_kernels kernels_qrepack_neon = {.matmul_qr = {QR_BLOCK32_ENTRIES}};

#endif
