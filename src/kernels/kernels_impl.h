/* kernels_impl.h - private to src/kernels/: the per-level fill functions,
 * the CPU feature bits, and scalar conversion helpers shared by the
 * reference and by the SIMD files for their tails.
 *
 * Each ISA file (kernels_avx2.c, kernels_avx512.c, kernels_neon.c) compiles
 * to an empty fill function returning 0 on other architectures, so the tree
 * builds everywhere; init.c only offers a level whose fill returned 1 and
 * whose CPU bits are present.
 */
#ifndef QW_KERNELS_IMPL_H
#define QW_KERNELS_IMPL_H

#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

/* Fill k with the plain-C reference (every entry). */
void kernels_fill_ref(qw_kernels *k);
/* The 4/5/6-bit block types' reference entries (quant_ref.c), called by
 * kernels_fill_ref. */
void kernels_fill_quant_ref(qw_kernels *k);
/* Overwrite the entries this ISA accelerates; return 1 if the level is
 * compiled into this binary, 0 if not (k untouched). The table must already
 * hold the lower level (dav1d style: ref, then ascending upgrades). Call only
 * when the CPU runs the level: the fill code itself is compiled with the
 * file's ISA flags and may use those instructions. */
int kernels_fill_avx2(qw_kernels *k);
int kernels_fill_avx512(qw_kernels *k);
int kernels_fill_neon(qw_kernels *k);
/* The attention entry of each level lives in its own file (attn_*.c); same
 * contract as the fills above. */
void kernels_fill_attn_ref(qw_kernels *k);
int kernels_fill_attn_avx2(qw_kernels *k);
int kernels_fill_attn_neon(qw_kernels *k);

/* The reference's 4/5/6-bit to_f32 (quant_ref.c; n whole blocks from a block
 * start), exported for the levels that convert with it before their own f32
 * tiles (neon). */
void kernels_to_f32_q4_0_ref(float *y, const void *x, int64_t n);
void kernels_to_f32_q4_1_ref(float *y, const void *x, int64_t n);
void kernels_to_f32_q5_0_ref(float *y, const void *x, int64_t n);
void kernels_to_f32_q5_1_ref(float *y, const void *x, int64_t n);
void kernels_to_f32_q4_k_ref(float *y, const void *x, int64_t n);
void kernels_to_f32_q5_k_ref(float *y, const void *x, int64_t n);
void kernels_to_f32_q6_k_ref(float *y, const void *x, int64_t n);

/* The AVX2 level's exact block-type converters (kernels_avx2.c), shared with
 * the avx512 level so that its block-type matmuls are its own f32 matmul of
 * the converted weights: columns [c0, c0 + len) of one row (src at column
 * c0, len a whole number of blocks) into dst as float32, each weight the
 * reference's value bit for bit; nx: the same columns of a row to prefetch
 * into L2, or NULL. x86-64 only; call only where the avx2 level runs. */
typedef void (*qw_conv_fn)(float *dst, const char *src, int64_t len, const char *nx);
void kernels_conv_q8_0_avx2(float *dst, const char *src, int64_t len, const char *nx);
void kernels_conv_q4_0_avx2(float *dst, const char *src, int64_t len, const char *nx);
void kernels_conv_q4_1_avx2(float *dst, const char *src, int64_t len, const char *nx);
void kernels_conv_q5_0_avx2(float *dst, const char *src, int64_t len, const char *nx);
void kernels_conv_q5_1_avx2(float *dst, const char *src, int64_t len, const char *nx);
void kernels_conv_q4_k_avx2(float *dst, const char *src, int64_t len, const char *nx);
void kernels_conv_q5_k_avx2(float *dst, const char *src, int64_t len, const char *nx);
void kernels_conv_q6_k_avx2(float *dst, const char *src, int64_t len, const char *nx);

/* The integer path of the block-32 types and quantize_qa8 (qdot_*.c):
 * the reference fill (every entry), AVX2 (avx2 and avx512 tables) and
 * AVX-512 VNNI (the avx512 table, only when QW_CPU_AVX512VNNI is set),
 * NEON (the neon table). */
void kernels_fill_qdot_ref(qw_kernels *k);
int kernels_fill_qdot_avx2(qw_kernels *k);
int kernels_fill_qdot_avx512vnni(qw_kernels *k);
int kernels_fill_qdot_neon(qw_kernels *k);

/* The bf16-activation path (kernels.h): the reference (bf16dot_ref.c; not
 * in any table, the checker's yardstick) and the AVX512-BF16 kernels
 * (bf16dot_avx512bf16.c: the avx512 table, only when QW_CPU_AVX512BF16 is
 * set; returns 1 if compiled in). */
uint16_t kernels_f32_to_bf16_ref(float f);
void kernels_to_bf16_ref(uint16_t *y, const float *x, int64_t n);
void kernels_matmul_bf16act_bf16_ref(float *Y, int64_t ldy, const uint16_t *XB, int64_t ldxb, int64_t n,
                                     const void *W, int64_t k, int64_t o0, int64_t o1);
int kernels_fill_bf16dot_avx512bf16(qw_kernels *k);

/* The integer path's fixed final sum of its 8 lanes (kernels.h). */
static inline float qw_qdot_tree(const float acc[8]) {
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* The integer path's K-quant kernels (matmul_q of Q4_K, Q5_K, Q6_K), in
 * qdot_kquant_ref.c / _avx2.c / _avx512vnni.c. The ref fill sets every
 * entry; the SIMD fills return 1 if compiled in (x86-64), 0 if not (k
 * untouched). Call _avx2 only when the CPU runs the avx2 level, _avx512vnni
 * only on the avx512 table and when kernels_cpu_flags() has
 * QW_CPU_AVX512VNNI. */
void kernels_fill_qdot_kquant_ref(qw_kernels *k);
int kernels_fill_qdot_kquant_avx2(qw_kernels *k);
int kernels_fill_qdot_kquant_avx512vnni(qw_kernels *k);

/* CPU capability bits (cpu.c). A level bit is set only when the CPU has
 * every feature that level's file is compiled with AND the OS saves the
 * register state (XCR0 on x86). */
enum {
    QW_CPU_AVX2 = 1u << 0,   /* avx2 + fma + f16c, YMM state enabled */
    QW_CPU_AVX512 = 1u << 1, /* avx512 f/bw/vl/dq (+ the avx2 level), ZMM state enabled */
    QW_CPU_NEON = 1u << 2,   /* arm64 Advanced SIMD (baseline) */
    /* Instruction families a level's kernels may use where present, each
     * gated on its own CPUID bit (and the OS state of its registers). */
    QW_CPU_AVX512VNNI = 1u << 3, /* vpdpbusd on zmm (needs the avx512 level) */
    QW_CPU_AVX512BF16 = 1u << 4, /* vdpbf16ps on zmm (needs the avx512 level) */
    QW_CPU_AVXVNNI = 1u << 5,    /* VEX vpdpbusd on ymm (needs the avx2 level) */
};
unsigned kernels_cpu_flags(void);

/* What cpuid and XCR0 say (x86-64), one field per feature, 0 or 1. */
typedef struct qw_cpu_bits {
    int avx, avx2, fma, f16c;
    int avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avxvnni;
    int os_ymm, os_zmm; /* XCR0: the OS saves YMM / opmask + ZMM state */
} qw_cpu_bits;
/* The QW_CPU_* bits those features give (pure; cpu.c's decision, tested
 * in tests/kernels/test_cpu.c). */
unsigned qw_cpu_flags_from(const qw_cpu_bits *x);

/* bf16 is the top half of an IEEE float32: the conversion is exact. */
static inline float qw_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE binary16 -> binary32, exact for every input: normals rebias the
 * exponent, subnormals (m * 2^-24, m < 1024) are exact in float32, inf and
 * nan keep their payload. */
static inline float qw_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t u;
    if (e == 0) {
        float f = (float)m * 5.9604644775390625e-8f; /* 2^-24, exact */
        memcpy(&u, &f, sizeof u);
        u |= sign;
    } else if (e == 31) {
        u = sign | 0x7f800000u | (m << 13);
    } else {
        u = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE binary32 -> binary16, round to nearest even (as F16C's vcvtps2ph
 * and GGML's reference do): overflow to inf, nan stays nan, subnormal
 * results rounded correctly. */
static inline uint16_t qw_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) { /* below 2^-14: a subnormal (or zero) result */
        if (a < 0x33000000u) return (uint16_t)sign; /* below 2^-25: rounds to 0 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); /* 14..24: result = m >> shift, RNE */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((a >> 13) - (112u << 10)), rem = a & 0x1fffu; /* rebias exponent 127 -> 15 */
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;    /* carry may bump the exponent: fine */
    return (uint16_t)(sign | r);
}

/* Scalar weight loads for the SIMD files' tails: the mapping gives no
 * alignment guarantee, so memcpy, never a typed load. */
static inline float ld1_f32(const float *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline float ld1_bf16(const uint16_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return qw_bf16_to_f32(v);
}
static inline float ld1_f16(const uint16_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return qw_f16_to_f32(v);
}

/* One Q8_0 block's scale (binary16 at the block start, any alignment). */
static inline float qw_q8_0_scale(const uint8_t *blk) {
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return qw_f16_to_f32(h);
}

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the
 * 12 packed bytes s (GGML's get_scale_min_k4). */
static inline void qw_kquant_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

#endif
