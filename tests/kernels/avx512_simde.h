/* avx512_simde.h - force-included (-include) by tools/avx512_emu_check.sh
 * when it compiles an AVX-512 kernel file for a CPU without AVX-512 (a Zen
 * 3): the _mm512_* / AVX512-VL / VNNI intrinsics and types the kernels
 * use become SIMDe's portable ones (Debian's libsimde-dev), which run
 * them on AVX2; the AVX2, FMA and F16C intrinsics stay native. The
 * kernel checker then compares the emulated kernel with its plain-C twin,
 * so a layout change can be proven on every x86 level's code from one
 * machine. It proves the code's logic, not the compiler's AVX-512 code
 * generation (that needs the real CPU). Test-only: never in a product
 * build.
 */
#ifndef QW_AVX512_SIMDE_H
#define QW_AVX512_SIMDE_H

#include <immintrin.h>
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
static inline void qw_emu_mask_storeu_ps(void *p, simde__mmask16 k, simde__m512 a) {
    float x[16];
    memcpy(x, &a, 64);
    for (int i = 0; i < 16; i++)
        if (k >> i & 1) memcpy((float *)p + i, x + i, 4);
}
#define _mm512_cvtepi32_ps qw_emu_cvtepi32_ps
#define _mm512_cvtepi8_epi32 qw_emu_cvtepi8_epi32
#define _mm512_cvtepu8_epi32 qw_emu_cvtepu8_epi32
#define _mm512_cvtph_ps qw_emu_cvtph_ps
#define _mm512_mask_storeu_ps qw_emu_mask_storeu_ps

#endif
