/* qrepack_avxvnni.c - matmul_qr with AVX-VNNI (VEX vpdpbusd on ymm: Intel
 * since Alder Lake, AMD since Zen 5), installed over qrepack_avx2.c's on
 * the avx2 level only where cpu.c sets QW_CPU_AVXVNNI. vpdpbusd sums four
 * unsigned x signed byte products into an int32 lane without saturating,
 * so the stored weights (Q8_0's q + 128 too) go in as they are and the
 * offset comes off once, as in qrepack_avx512vnni.c. The tile loops are
 * qrepack_tiles.h's and qrepack_ktiles_ymm.h's, shared with qrepack_avx2.c.
 * Zen 4 lacks AVX-VNNI (qemu-user 7.2 too); run and checked on Emerald
 * Rapids Xeons (tests/kernels/test_qrepack.c runs it wherever the CPU has
 * it; QWENC_AVXVNNI=0 declines it, to measure the avx2 level of a Zen 3).
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include "kernels/qdot/qdot_x86.h"
#include "kernels/qdot/qrepack_layout.h"
#include "kernels/qdot/qrepack_ymm.h"

typedef struct {
    __m256i u[8];
} qr_w;

INLINE void load_part(int T, const uint8_t *tb, int p, qr_w *w) { unpack_part_u(T, tb, p, w->u); }

INLINE __m256i part_isum(int T, const qr_w *w, const uint8_t *xq, const qr_xb *xb, int32_t s) {
    const __m256i *xv = xb ? xb->v : NULL;
    __m256i p0 = _mm256_setzero_si256(), p1 = _mm256_setzero_si256();
    UNROLL
    for (int j = 0; j < 8; j += 2) { /* two chains: half the latency */
        p0 = _mm256_dpbusd_avx_epi32(p0, w->u[j], x_at(xq, xv, j));
        p1 = _mm256_dpbusd_avx_epi32(p1, w->u[j + 1], x_at(xq, xv, j + 1));
    }
    __m256i isum = _mm256_add_epi32(p0, p1);
    /* s * 2^k, not s << k: s is often negative */
    if (off_log2(T) >= 0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(s * (1 << off_log2(T))));
    return isum;
}

#include "kernels/qdot/qrepack_tiles.h"

/* ---- The K-quants' hooks for qrepack_ktiles_ymm.h: the same vpdpbusd
 * chains (no saturation, so no grouping by weight size). */
INLINE __m256i rk_dot(int T, const __m256i u[8], const uint8_t *xq, const __m256i *xb) {
    (void)T;
    __m256i p0 = _mm256_setzero_si256(), p1 = _mm256_setzero_si256();
    UNROLL
    for (int j = 0; j < 8; j += 2) {
        p0 = _mm256_dpbusd_avx_epi32(p0, u[j], x_at(xq, xb, j));
        p1 = _mm256_dpbusd_avx_epi32(p1, u[j + 1], x_at(xq, xb, j + 1));
    }
    return _mm256_add_epi32(p0, p1);
}

/* Q6_K as qrepack_avx512vnni.c's: each half's chain starts at its offset
 * term -32 h, and the scale step is in float (|half| <= 16 * 32 * 127 and
 * |sc| <= 128: both products and their sum are integers below 2^24, exact,
 * the same bits as converting the int32 isum) instead of vpmulld. */
typedef struct {
    __m256 sc0, sc1;
} q6_sc;

INLINE void q6_scales(const uint8_t *tb, int j, int p, q6_sc *s) {
    s->sc0 = _mm256_cvtepi32_ps(q6_sc_i32(tb + Q6_SC + 32 * j + 8 * p));
    s->sc1 = _mm256_cvtepi32_ps(q6_sc_i32(tb + Q6_SC + 32 * j + 16 + 8 * p));
}

INLINE __m256 q6_isum(const __m256i u[8], const q6_sc *s, const uint8_t *xq, const __m256i *xb, const int16_t h[2]) {
    __m256i h0 = _mm256_set1_epi32(-32 * h[0]), h1 = _mm256_set1_epi32(-32 * h[1]);
    UNROLL
    for (int v = 0; v < 4; v++) {
        h0 = _mm256_dpbusd_avx_epi32(h0, u[v], x_at(xq, xb, v));
        h1 = _mm256_dpbusd_avx_epi32(h1, u[4 + v], x_at(xq, xb, 4 + v));
    }
    return _mm256_fmadd_ps(s->sc1, _mm256_cvtepi32_ps(h1), _mm256_mul_ps(s->sc0, _mm256_cvtepi32_ps(h0)));
}

#include "kernels/qdot/qrepack_ktiles_ymm.h"

const qw_kernels kernels_qrepack_avxvnni = {.matmul_qr = {QR_BLOCK32_ENTRIES, QR_KQUANT_ENTRIES}};

#endif
