/* qrepack_avxvnni.c - matmul_qr with AVX-VNNI (VEX vpdpbusd on ymm: Intel
 * since Alder Lake, AMD since Zen 5), installed over qrepack_avx2.c's on
 * the avx2 level only where cpu.c sets QW_CPU_AVXVNNI. vpdpbusd sums four
 * unsigned x signed byte products into an int32 lane without saturating,
 * so the stored weights (Q8_0's q + 128 too) go in as they are and the
 * offset comes off once, as in qrepack_avx512vnni.c. The tile loops are
 * qrepack_tiles.h's, shared with qrepack_avx2.c.
 *
 * Not run on the development machine (a Zen 4: AVX-512 VNNI but no
 * AVX-VNNI; qemu-user 7.2 lacks it too), only compiled; the checker
 * (tests/kernels/test_qrepack.c) runs it wherever the CPU has it.
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

INLINE __m256i part_isum(int T, const qr_w *w, const uint8_t *xq, int32_t s) {
    __m256i p0 = _mm256_setzero_si256(), p1 = _mm256_setzero_si256();
    UNROLL
    for (int j = 0; j < 8; j += 2) { /* two chains: half the latency */
        p0 = _mm256_dpbusd_avx_epi32(p0, w->u[j], _mm256_set1_epi32((int)ld_u32(xq + 4 * j)));
        p1 = _mm256_dpbusd_avx_epi32(p1, w->u[j + 1], _mm256_set1_epi32((int)ld_u32(xq + 4 * j + 4)));
    }
    __m256i isum = _mm256_add_epi32(p0, p1);
    /* s * 2^k, not s << k: s is often negative */
    if (off_log2(T) >= 0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(s * (1 << off_log2(T))));
    return isum;
}

#include "kernels/qdot/qrepack_tiles.h"

const qw_kernels kernels_qrepack_avxvnni = {.matmul_qr = {QR_BLOCK32_ENTRIES}};

#endif
