/* avx512_simde.h - force-included (-include) by the Makefile's emulated
 * objects (EMU_OBJ) when it compiles the avx512 level's integer kernel
 * files (qdot_, kquant_, qrepack_avx512vnni.c) for a CPU without AVX-512
 * (a Zen 3): the _mm512_* / AVX512-VL / VNNI intrinsics and types they
 * use become SIMDe's portable ones (Debian's libsimde-dev), which run
 * them on AVX2; the AVX2, FMA and F16C intrinsics stay native. The
 * kernel checkers then compare the emulated kernels with their plain-C
 * twins (tests/kernels/avx512_emu.h), so a change to those files can be
 * checked from a machine without AVX-512. It proves the code's logic, not
 * the compiler's AVX-512 code generation (that needs the real CPU), and
 * not AMX. Test-only: never in a product build.
 */
#ifndef QW_AVX512_SIMDE_H
#define QW_AVX512_SIMDE_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <simde/x86/avx512.h>

#define __m128bh simde__m128bh
#define __m256bh simde__m256bh
#define __m512 simde__m512
#define __m512bh simde__m512bh
#define __m512i simde__m512i
#define __mmask8 simde__mmask8
#define __mmask16 simde__mmask16
#define __mmask32 simde__mmask32
#define __mmask64 simde__mmask64

#define _mm512_add_epi32 simde_mm512_add_epi32
#define _mm512_add_ps simde_mm512_add_ps
#define _mm512_and_si512 simde_mm512_and_si512
#define _mm512_castps512_ps256 simde_mm512_castps512_ps256
#define _mm512_dpbusd_epi32 simde_mm512_dpbusd_epi32
#define _mm512_fmadd_ps simde_mm512_fmadd_ps
#define _mm512_fnmadd_ps simde_mm512_fnmadd_ps
#define _mm512_loadu_ps simde_mm512_loadu_ps
#define _mm512_loadu_si512 simde_mm512_loadu_si512
#define _mm512_madd_epi16 simde_mm512_madd_epi16
#define _mm512_maddubs_epi16 simde_mm512_maddubs_epi16
#define _mm512_mask_add_epi8 simde_mm512_mask_add_epi8
#define _mm512_mul_ps simde_mm512_mul_ps
#define _mm512_mullo_epi32 simde_mm512_mullo_epi32
#define _mm512_or_si512 simde_mm512_or_si512
#define _mm512_set1_epi32 simde_mm512_set1_epi32
#define _mm512_set1_epi8 simde_mm512_set1_epi8
#define _mm512_set1_ps simde_mm512_set1_ps
#define _mm512_setzero_ps simde_mm512_setzero_ps
#define _mm512_setzero_si512 simde_mm512_setzero_si512
#define _mm512_slli_epi16 simde_mm512_slli_epi16
#define _mm512_srli_epi16 simde_mm512_srli_epi16
#define _mm512_storeu_ps simde_mm512_storeu_ps
#define _mm512_sub_epi32 simde_mm512_sub_epi32
#define _mm512_test_epi8_mask simde_mm512_test_epi8_mask
#define _mm512_xor_si512 simde_mm512_xor_si512
#undef _mm256_dpbusd_epi32 /* GCC defines both as macros */
#define _mm256_dpbusd_epi32 simde_mm256_dpbusd_epi32
#define _mm512_and_ps simde_mm512_and_ps
#define _mm512_castsi256_si512 simde_mm512_castsi256_si512
#define _mm512_castsi512_ps simde_mm512_castsi512_ps
#define _mm512_castsi512_si256 simde_mm512_castsi512_si256
#define _mm512_extracti64x4_epi64 simde_mm512_extracti64x4_epi64
#define _mm512_inserti64x4 simde_mm512_inserti64x4
#define _mm512_load_ps simde_mm512_load_ps
#define _mm512_load_si512 simde_mm512_load_si512
#define _mm512_mask_blend_epi32 simde_mm512_mask_blend_epi32
#define _mm512_maskz_mov_epi64 simde_mm512_maskz_mov_epi64
#define _mm512_max_ps simde_mm512_max_ps
#define _mm512_permutex2var_epi32 simde_mm512_permutex2var_epi32
#define _mm512_permutexvar_epi32 simde_mm512_permutexvar_epi32
#undef _mm512_setr_epi32
#define _mm512_setr_epi32 simde_mm512_setr_epi32
#define _mm512_shuffle_i32x4 simde_mm512_shuffle_i32x4
#define _mm512_shuffle_i64x2 simde_mm512_shuffle_i64x2
#define _mm512_slli_epi32 simde_mm512_slli_epi32
#define _mm512_store_si512 simde_mm512_store_si512
#define _mm512_unpackhi_epi32 simde_mm512_unpackhi_epi32
#define _mm512_unpackhi_epi64 simde_mm512_unpackhi_epi64
#define _mm512_unpacklo_epi32 simde_mm512_unpacklo_epi32
#define _mm512_unpacklo_epi64 simde_mm512_unpacklo_epi64
#define _mm512_set_epi32 simde_mm512_set_epi32

/* What SIMDe 0.7.4 lacks, in plain C. */
static inline simde__m512 qw_emu_cvtepi32_ps(simde__m512i a) {
    int32_t x[16];
    float y[16];
    simde__m512 r;
    memcpy(x, &a, 64);
    for (int i = 0; i < 16; i++) y[i] = (float)x[i];
    memcpy(&r, y, 64);
    return r;
}
static inline simde__m512i qw_emu_cvtepi8_epi32(__m128i a) {
    int8_t x[16];
    int32_t y[16];
    simde__m512i r;
    memcpy(x, &a, 16);
    for (int i = 0; i < 16; i++) y[i] = x[i];
    memcpy(&r, y, 64);
    return r;
}
static inline simde__m512i qw_emu_cvtepu8_epi32(__m128i a) {
    uint8_t x[16];
    int32_t y[16];
    simde__m512i r;
    memcpy(x, &a, 16);
    for (int i = 0; i < 16; i++) y[i] = x[i];
    memcpy(&r, y, 64);
    return r;
}
static inline simde__m512 qw_emu_cvtph_ps(__m256i a) {
    const __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(a)), hi = _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1));
    simde__m512 r;
    memcpy(&r, &lo, 32);
    memcpy((char *)&r + 32, &hi, 32);
    return r;
}
#define _mm512_cvtepi32_ps qw_emu_cvtepi32_ps
#define _mm512_cvtepi8_epi32 qw_emu_cvtepi8_epi32
#define _mm512_cvtepu8_epi32 qw_emu_cvtepu8_epi32
#define _mm512_cvtph_ps qw_emu_cvtph_ps

/* The masked loads and stores: lane i (size bytes) moves only where bit i
 * of k is set, so, as on the CPU, nothing outside the mask is touched. */
static inline void qw_emu_masked_copy(void *dst, const void *src, uint64_t k, int lanes, size_t size) {
    for (int i = 0; i < lanes; i++)
        if (k >> i & 1) memcpy((char *)dst + size * (size_t)i, (const char *)src + size * (size_t)i, size);
}
static inline void qw_emu_mask_storeu_ps(void *p, simde__mmask16 k, simde__m512 a) {
    qw_emu_masked_copy(p, &a, k, 16, 4);
}
static inline __m256 qw_emu_maskz_loadu_ps256(simde__mmask8 k, const void *p) {
    __m256 r = _mm256_setzero_ps();
    qw_emu_masked_copy(&r, p, k, 8, 4);
    return r;
}
static inline __m256i qw_emu_maskz_loadu_epi32_256(simde__mmask8 k, const void *p) {
    __m256i r = _mm256_setzero_si256();
    qw_emu_masked_copy(&r, p, k, 8, 4);
    return r;
}
static inline simde__m512i qw_emu_maskz_loadu_epi32(simde__mmask16 k, const void *p) {
    simde__m512i r = simde_mm512_setzero_si512();
    qw_emu_masked_copy(&r, p, k, 16, 4);
    return r;
}
static inline simde__m512i qw_emu_maskz_loadu_epi8(simde__mmask64 k, const void *p) {
    simde__m512i r = simde_mm512_setzero_si512();
    qw_emu_masked_copy(&r, p, k, 64, 1);
    return r;
}
/* vpmovdb: each int32 truncated to its low byte */
static inline __m128i qw_emu_cvtepi32_epi8(simde__m512i a) {
    int32_t x[16];
    uint8_t y[16];
    __m128i r;
    memcpy(x, &a, 64);
    for (int i = 0; i < 16; i++) y[i] = (uint8_t)(uint32_t)x[i];
    memcpy(&r, y, 16);
    return r;
}
/* vcvtps2dq under the default rounding (to nearest even); out of range:
 * the integer indefinite 0x80000000 */
static inline simde__m512i qw_emu_cvtps_epi32(simde__m512 a) {
    float x[16];
    int32_t y[16];
    simde__m512i r;
    memcpy(x, &a, 64);
    for (int i = 0; i < 16; i++) {
        const float v = nearbyintf(x[i]);
        y[i] = v >= -2147483648.0f && v < 2147483648.0f ? (int32_t)v : INT32_MIN;
    }
    memcpy(&r, y, 64);
    return r;
}
static inline __m256 qw_emu_extractf32x8_ps(simde__m512 a, int imm) {
    __m256 r;
    memcpy(&r, (const char *)&a + 32 * (imm & 1), 32);
    return r;
}
static inline simde__m512i qw_emu_mask_srli_epi16(simde__m512i src, simde__mmask32 k, simde__m512i a, unsigned imm) {
    uint16_t x[32], y[32];
    simde__m512i r;
    memcpy(x, &a, 64);
    memcpy(y, &src, 64);
    for (int i = 0; i < 32; i++)
        if (k >> i & 1) y[i] = imm > 15 ? 0 : (uint16_t)(x[i] >> imm);
    memcpy(&r, y, 64);
    return r;
}
static inline int32_t qw_emu_reduce_add_epi32(simde__m512i a) {
    int32_t x[16];
    uint32_t s = 0;
    memcpy(x, &a, 64);
    for (int i = 0; i < 16; i++) s += (uint32_t)x[i];
    return (int32_t)s;
}
/* the inputs here are absolute values, never NaN: any order gives the same max */
static inline float qw_emu_reduce_max_ps(simde__m512 a) {
    float x[16], m;
    memcpy(x, &a, 64);
    m = x[0];
    for (int i = 1; i < 16; i++) m = x[i] > m ? x[i] : m;
    return m;
}
/* vpshufd: within each 128-bit lane, dword i = dword (imm >> 2i) & 3 */
static inline simde__m512i qw_emu_shuffle_epi32(simde__m512i a, int imm) {
    int32_t x[16], y[16];
    simde__m512i r;
    memcpy(x, &a, 64);
    for (int l = 0; l < 4; l++)
        for (int i = 0; i < 4; i++) y[4 * l + i] = x[4 * l + ((imm >> (2 * i)) & 3)];
    memcpy(&r, y, 64);
    return r;
}
#define _mm512_mask_storeu_ps qw_emu_mask_storeu_ps
#define _mm256_maskz_loadu_ps qw_emu_maskz_loadu_ps256
#define _mm256_maskz_loadu_epi32 qw_emu_maskz_loadu_epi32_256
#define _mm512_maskz_loadu_epi32 qw_emu_maskz_loadu_epi32
#define _mm512_maskz_loadu_epi8 qw_emu_maskz_loadu_epi8
#define _mm512_cvtepi32_epi8 qw_emu_cvtepi32_epi8
#define _mm512_cvtps_epi32 qw_emu_cvtps_epi32
#define _mm512_extractf32x8_ps qw_emu_extractf32x8_ps
#define _mm512_mask_srli_epi16 qw_emu_mask_srli_epi16
#define _mm512_reduce_add_epi32 qw_emu_reduce_add_epi32
#define _mm512_reduce_max_ps qw_emu_reduce_max_ps
#define _mm512_shuffle_epi32 qw_emu_shuffle_epi32

#endif
