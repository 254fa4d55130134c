/* kernels_impl.h - private to src/kernels/: the op families' tables per
 * level, the CPU feature bits, and scalar helpers shared by the references
 * and by the SIMD files for their tails.
 */
#ifndef QW_KERNELS_IMPL_H
#define QW_KERNELS_IMPL_H

#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

/* The kernels of one op family on one level, as a table with only that
 * family's entries set (the rest NULL). init.c builds each level's table
 * generically: the level below it (ref first), then every family table of
 * the level laid over it, entry by entry. The families, each in its own
 * folder with the reference beside its SIMD twins:
 *   matmul/       float-activation matmul (the exact precision), to_f32,
 *                 quantize_q8_0; bf16 activations (matmul_bf16act, to_bf16)
 *   qdot/         the integer path: quantize_qa8 and matmul_q (block-32
 *                 types: qdot_*; K-quants: kquant_*); matmul_qr on
 *                 repacked block-32 weights (qrepack_*)
 *   attn/         fused attention
 *   elementwise/  rmsnorm, silu_mul, add
 * A SIMD file defines its table only on its architecture (the Makefile
 * gives *_avx2.c, *_avxvnni.c, *_avx512.c, *_avx512vnni.c, *_avx512bf16.c their flags
 * on x86-64); init.c installs it only where cpu.c saw the level and, for
 * the instruction families (VNNI, BF16), that family's own CPUID bit. */
extern const qw_kernels kernels_matmul_ref, kernels_bf16act_ref, kernels_qdot_ref, kernels_kquant_ref, kernels_attn_ref,
    kernels_elementwise_ref;
/* The plain-C twin of matmul_qr (qdot/qrepack_ref.c): in no level's table
 * (a scalar kernel on the repacked layout would only be slower than the
 * level's matmul_q); the checker's reference. */
extern const qw_kernels kernels_qrepack_ref;
#if defined(__x86_64__)
extern const qw_kernels kernels_matmul_avx2, kernels_qdot_avx2, kernels_kquant_avx2, kernels_attn_avx2,
    kernels_elementwise_avx2;
extern const qw_kernels kernels_qrepack_avx2;
extern const qw_kernels kernels_qrepack_avxvnni; /* QW_CPU_AVXVNNI */
extern const qw_kernels kernels_matmul_avx512, kernels_elementwise_avx512, kernels_attn_avx512;
extern const qw_kernels kernels_qdot_avx512vnni, kernels_kquant_avx512vnni; /* QW_CPU_AVX512VNNI */
extern const qw_kernels kernels_qrepack_avx512vnni;                         /* QW_CPU_AVX512VNNI */
extern const qw_kernels kernels_bf16act_avx512bf16;                        /* QW_CPU_AVX512BF16 */
extern const qw_kernels kernels_qrepack_amx;                               /* QW_CPU_AMXINT8 */
#elif defined(__aarch64__)
extern const qw_kernels kernels_matmul_neon, kernels_qdot_neon, kernels_kquant_neon, kernels_attn_neon,
    kernels_elementwise_neon;
extern const qw_kernels kernels_qrepack_neon;
#endif

/* The calling thread's scratch for a kernel's working set that does not
 * fit in registers (the prefill GEMMs' transposed weight and activation
 * tiles): QW_SCRATCH_BYTES, 64-byte aligned, reused by every kernel call
 * on the thread (a kernel never calls another kernel that uses it). Each
 * user lays out its own struct there and checks its size against
 * QW_SCRATCH_BYTES at compile time. */
#define QW_SCRATCH_BYTES (256 * 1024)
void *kernels_scratch(void);

/* The reference's block-type to_f32 (matmul/matmul_ref.c): n weights of
 * type dt (whole blocks, from a block start), for the levels that convert
 * with it before their own f32 tiles (neon). */
void kernels_to_f32_blocks_ref(qw_dtype dt, float *y, const void *x, int64_t n);

/* The AVX2 level's exact converters (matmul/matmul_avx2.c), by type (F16,
 * BF16 and the block types), shared with the avx512 level so that its
 * block-type matmuls are its own f32 matmul of the converted weights:
 * columns [c0, c0 + len) of one row (src at column c0, len whole blocks)
 * into dst, each weight the reference's value bit for bit; nx: the same
 * columns of a row to prefetch into L2, or NULL. x86-64 only; call only
 * where the avx2 level runs. */
typedef void (*qw_conv_fn)(float *dst, const char *src, int64_t len, const char *nx);
#if defined(__x86_64__)
extern const qw_conv_fn kernels_conv_avx2[QW_DTYPE_COUNT];
#endif

/* The bf16-activation reference (matmul/bf16act_ref.c; not in any table:
 * the checker's yardstick, tests/kernels/test_bf16act.c). */
uint16_t kernels_f32_to_bf16_ref(float f);
void kernels_to_bf16_ref(uint16_t *y, const float *x, int64_t n);
void kernels_matmul_bf16act_bf16_ref(float *Y, int64_t ldy, const uint16_t *XB, int64_t ldxb, int64_t n,
                                     const void *W, int64_t k, int64_t o0, int64_t o1);

/* The integer path's fixed final sum of its 8 lanes (kernels.h). */
static inline float qw_qdot_tree(const float acc[8]) {
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

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
    QW_CPU_AMXINT8 = 1u << 6,    /* AMX tiles + tdpbssd, tile data enabled (needs avx512 VNNI) */
};
unsigned kernels_cpu_flags(void);

/* What cpuid and XCR0 say (x86-64), one field per feature, 0 or 1. */
typedef struct qw_cpu_bits {
    int avx, avx2, fma, f16c;
    int avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avxvnni;
    int amx_int8;       /* AMX-TILE and AMX-INT8 */
    int os_ymm, os_zmm; /* XCR0: the OS saves YMM / opmask + ZMM state */
    int os_amx;         /* XCR0 tile state, and (Linux) the process may use it */
    int amd_family;     /* AMD's CPU family (0x19 Zen 3/4, 0x1a Zen 5); 0: not AMD */
} qw_cpu_bits;
/* The QW_CPU_* bits those features give (pure; cpu.c's decision, tested
 * in tests/kernels/test_cpu.c). */
unsigned qw_cpu_flags_from(const qw_cpu_bits *x);

/* How far ahead, in bytes, the one-token (decode) weight streams prefetch
 * (0: none; kernels_decode_prefetch): QWENC_PREFETCH=BYTES when it is a
 * number in 0..65536, else the CPU's default. Pure, as above; cpu.c's
 * decision, tested in test_cpu.c. */
int qw_cpu_prefetch_from(const qw_cpu_bits *x, const char *env);
/* Zen 5's default (docs/PERFORMANCE.md, "Decode: software prefetch on
 * Zen 5": 4 KB and 16 KB measured slower) and Zen 3's ("Zen 3, measured":
 * 2, 4 and 8 KB within the noise of each other, 4 KB the best median). */
#define QW_PREFETCH_ZEN5 8192
#define QW_PREFETCH_ZEN3 4096

/* Tokens per block of the avx512 K-quant prefill tiles (qrepack_layout.h:
 * QR_TB_K, or QR_TB_K_MAX on Zen 5; pure, tested in test_cpu.c). */
int qw_cpu_k_token_block_from(const qw_cpu_bits *x);
#define QW_K_TOKEN_BLOCK_MAX 32
int kernels_k_token_block(void);
/* Tests: set it (16 or 32). Not thread safe: call between matmuls. */
void kernels_set_k_token_block(int tokens);

/* Asks for the cache lines of [p, p + bytes) (into L1): the decode
 * streams' software prefetch (kernels_decode_prefetch). */
static inline void qw_prefetch_lines(const void *p, int64_t bytes) {
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)p + off, 0, 3);
}

/* The decode streams' prefetch distance in bytes (cpu.c; 0: none). The
 * kernels read it once per matmul call. */
int kernels_decode_prefetch(void);
/* Tests: set it (the kernel checker runs the decode tiles with and without
 * it). Not thread safe: call between matmuls. */
void kernels_set_decode_prefetch(int bytes);

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

/* The unaligned uint16 at p (a binary16 or bf16 weight or scale). */
static inline uint16_t qw_u16_at(const void *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The binary16 at p as a float (a block's d, m or dmin; any alignment). */
static inline float qw_f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return qw_f16_to_f32(h);
}

#if defined(__F16C__)
#include <immintrin.h>
/* qw_f16_at in one vcvtph2ps (the same exact value), for the x86 files
 * built with F16C (the avx2 and avx512 levels). */
static inline float qw_f16_at_f16c(const uint8_t *p) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(qw_u16_at(p))));
}
#endif

/* The little-endian uint32 at p (Q5_0 / Q5_1's 32 high bits). */
static inline uint32_t qw_u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
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
