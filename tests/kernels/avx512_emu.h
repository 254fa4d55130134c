/* avx512_emu.h - the avx512 level's integer kernels built on SIMDe for a
 * CPU without AVX-512 (Makefile: EMU_TEST; tests/kernels/avx512_simde.h),
 * as one table for the kernel checkers: qdot_avx512vnni.c's quantize_qa8
 * and matmul_q, kquant_avx512vnni.c's K-quant matmul_q over them and
 * qrepack_avx512vnni.c's matmul_qr, the entries the avx512 level takes
 * from these files where the CPU has AVX512-VNNI. Only in the test
 * programs built with QW_TEST_AVX512_EMU. */
#ifndef QW_TEST_AVX512_EMU_H
#define QW_TEST_AVX512_EMU_H

#include "kernels/kernels_impl.h"

extern const qw_kernels kernels_qdot_avx512vnni_emu, kernels_kquant_avx512vnni_emu, kernels_qrepack_avx512vnni_emu;

static inline qw_kernels avx512_emu_level(void) {
    qw_kernels t = kernels_qdot_avx512vnni_emu;
    t.name = "avx512 VNNI (SIMDe emulation)";
    for (int dt = 0; dt < QW_DTYPE_COUNT; dt++) {
        if (kernels_kquant_avx512vnni_emu.matmul_q[dt]) t.matmul_q[dt] = kernels_kquant_avx512vnni_emu.matmul_q[dt];
        t.matmul_qr[dt] = kernels_qrepack_avx512vnni_emu.matmul_qr[dt];
    }
    return t;
}

#endif
