/* quant.c - quantizing weights to the block types (Q8_0), at load time.
 *
 * Follows GGML's reference quantize_row_q8_0 step by step (max |x| of the
 * block, d = amax / 127 rounded to binary16 for storage, q = roundf(x * id)
 * with id = 1 / d from the unrounded d), so a model quantized here and the
 * same weights quantized by llama.cpp hold the same bytes.
 */
#include <math.h>

#include "kernels/kernels_impl.h"

/* roundf (half away from zero) for |v| < 2^31 without a libm call, so the
 * loop stays inline: v - trunc(v) is exact. */
static inline int round_away(float v) {
    int t = (int)v;
    float f = v - (float)t;
    return t + (f >= 0.5f) - (f <= -0.5f); /* branch free: the direction is random */
}

void qw_quantize_q8_0(void *dst, const float *x, int64_t n) {
    uint8_t *out = dst;
    for (int64_t b = 0; b + QW_Q8_0_BLOCK <= n; b += QW_Q8_0_BLOCK, out += QW_Q8_0_BYTES) {
        float amax = 0.0f;
        for (int j = 0; j < QW_Q8_0_BLOCK; j++) {
            float a = fabsf(x[b + j]);
            amax = amax > a ? amax : a; /* GGML's MAX(amax, a) */
        }
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = qw_f32_to_f16(d);
        memcpy(out, &h, sizeof h);
        /* |x * id| <= 127 (+ rounding): within int range for finite x */
        for (int j = 0; j < QW_Q8_0_BLOCK; j++) out[2 + j] = (uint8_t)(int8_t)round_away(x[b + j] * id);
    }
}
