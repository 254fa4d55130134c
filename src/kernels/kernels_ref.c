/* kernels_ref.c - the plain-C reference of every kernel.
 *
 * Obviously correct, not fast: straight loops, float32 accumulation in index
 * order, libm expf/sqrtf. Built like every other file, without -ffast-math,
 * so the compiler may not reassociate the sums. tests/kernels/test_kernels.c
 * checks every SIMD level against these functions.
 */
#include <math.h>

#include "kernels/kernels_impl.h"

/* An unaligned 16-bit load. */
static inline uint16_t ld_u16(const char *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void matmul_f32_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n,
                           const void *W, int64_t k, int64_t o0, int64_t o1) {
    const char *w = W; /* memcpy loads: W may be misaligned (safetensors) */
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) {
            const float *x = X + t * ldx;
            const char *wr = w + o * k * 4;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i++) {
                float v;
                memcpy(&v, wr + 4 * i, sizeof v);
                acc += x[i] * v;
            }
            Y[t * ldy + o] = acc;
        }
}

static void matmul_f16_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n,
                           const void *W, int64_t k, int64_t o0, int64_t o1) {
    const char *w = W;
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) {
            const float *x = X + t * ldx;
            const char *wr = w + o * k * 2;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i++) acc += x[i] * qw_f16_to_f32(ld_u16(wr + 2 * i));
            Y[t * ldy + o] = acc;
        }
}

static void matmul_bf16_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n,
                            const void *W, int64_t k, int64_t o0, int64_t o1) {
    const char *w = W;
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) {
            const float *x = X + t * ldx;
            const char *wr = w + o * k * 2;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i++) acc += x[i] * qw_bf16_to_f32(ld_u16(wr + 2 * i));
            Y[t * ldy + o] = acc;
        }
}

static void matmul_q8_0_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n,
                            const void *W, int64_t k, int64_t o0, int64_t o1) {
    const uint8_t *w = W;
    const int64_t rb = k / QW_Q8_0_BLOCK * QW_Q8_0_BYTES;
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) {
            const float *x = X + t * ldx;
            const uint8_t *blk = w + o * rb;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i += QW_Q8_0_BLOCK, blk += QW_Q8_0_BYTES) {
                float d = qw_q8_0_scale(blk);
                for (int j = 0; j < QW_Q8_0_BLOCK; j++) acc += x[i + j] * (d * (float)(int8_t)blk[2 + j]);
            }
            Y[t * ldy + o] = acc;
        }
}

static void to_f32_q8_0_ref(float *y, const void *x, int64_t n) {
    const uint8_t *blk = x;
    for (int64_t i = 0; i < n; i += QW_Q8_0_BLOCK, blk += QW_Q8_0_BYTES) {
        float d = qw_q8_0_scale(blk);
        for (int j = 0; j < QW_Q8_0_BLOCK; j++) y[i + j] = d * (float)(int8_t)blk[2 + j];
    }
}

static void to_f32_f32_ref(float *y, const void *x, int64_t n) {
    memmove(y, x, (size_t)n * sizeof(float));
}

static void to_f32_f16_ref(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = qw_f16_to_f32(h[i]);
}

static void to_f32_bf16_ref(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = qw_bf16_to_f32(h[i]);
}

static float dot_ref(const float *a, const float *b, int64_t n) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

static void axpy_ref(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void scale_ref(float *y, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] *= a;
}

static void rmsnorm_ref(float *y, const float *x, const float *w, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * w[i];
}

static void silu_mul_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void softmax_ref(float *x, int64_t n) {
    if (n <= 0) return;
    float mx = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

static void add_ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void kernels_fill_ref(qw_kernels *k) {
    k->name = "ref";
    k->matmul[QW_F32] = matmul_f32_ref;
    k->matmul[QW_F16] = matmul_f16_ref;
    k->matmul[QW_BF16] = matmul_bf16_ref;
    k->matmul[QW_Q8_0] = matmul_q8_0_ref;
    k->to_f32[QW_F32] = to_f32_f32_ref;
    k->to_bf16 = kernels_to_bf16_ref;
    k->to_f32[QW_F16] = to_f32_f16_ref;
    k->to_f32[QW_BF16] = to_f32_bf16_ref;
    k->to_f32[QW_Q8_0] = to_f32_q8_0_ref;
    kernels_fill_quant_ref(k);
    k->quantize_q8_0 = qw_quantize_q8_0;
    k->dot = dot_ref;
    k->axpy = axpy_ref;
    k->scale = scale_ref;
    k->rmsnorm = rmsnorm_ref;
    k->silu_mul = silu_mul_ref;
    k->softmax = softmax_ref;
    k->add = add_ref;
}
