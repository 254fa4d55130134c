/* bf16act_ref.c - the reference of the bf16-activation path (kernels.h:
 * to_bf16, matmul_bf16act): plain C that spells out, step by step, what
 * vcvtneps2bf16 and vdpbf16ps do (Intel SDM: round to nearest even, DAZ on
 * the inputs, FTZ on the results, the odd element of a pair added first).
 * It is not put into any table (plain C would be slower than the float32
 * matmul); the checker compares the SIMD kernels with it bit for bit.
 */
#include <math.h>

#include "kernels/kernels_impl.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t kernels_f32_to_bf16_ref(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN: quiet */
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);        /* DAZ */
    u += 0x7fffu + ((u >> 16) & 1u);                                             /* nearest even */
    return (uint16_t)(u >> 16);
}

void kernels_to_bf16_ref(uint16_t *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = kernels_f32_to_bf16_ref(x[i]);
}

/* A bf16 operand of vdpbf16ps: subnormals read as zeros of their sign. */
static float dp_in(uint16_t h) { return (h & 0x7f80u) ? qw_bf16_to_f32(h) : bits_f32((uint32_t)(h & 0x8000u) << 16); }

/* A vdpbf16ps result: subnormals flushed to zeros of their sign. */
static float dp_out(float f) { return fabsf(f) < 1.17549435e-38f ? copysignf(0.0f, f) : f; }

/* One output: the lane steps and the fold of kernels.h. */
static float dot_bf16(const uint16_t *x, const uint16_t *w, int64_t k) {
    float l[16] = {0};
    for (int64_t c = 0; c < k; c += 32)
        for (int j = 0; j < 16; j++) {
            int64_t i = c + 2 * j;
            uint16_t x0 = i < k ? x[i] : 0, w0 = i < k ? w[i] : 0;
            uint16_t x1 = i + 1 < k ? x[i + 1] : 0, w1 = i + 1 < k ? w[i + 1] : 0;
            l[j] = dp_out(fmaf(dp_in(x1), dp_in(w1), l[j]));
            l[j] = dp_out(fmaf(dp_in(x0), dp_in(w0), l[j]));
        }
    for (int h = 8; h >= 2; h /= 2)
        for (int j = 0; j < h; j++) l[j] += l[j + h];
    return l[0] + l[1];
}

void kernels_matmul_bf16act_bf16_ref(float *Y, int64_t ldy, const uint16_t *XB, int64_t ldxb, int64_t n,
                                     const void *W, int64_t k, int64_t o0, int64_t o1) {
    const uint16_t *w = W;
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) Y[t * ldy + o] = dot_bf16(XB + t * ldxb, w + o * k, k);
}

/* to_bf16 on every level; matmul_bf16act only where a level has a native
 * bf16 dot product (the reference above is the checker's, not a table's). */
const qw_kernels kernels_bf16act_ref = {.to_bf16 = kernels_to_bf16_ref};
