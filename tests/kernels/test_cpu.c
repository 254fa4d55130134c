/* test_cpu.c - the level selection follows the CPU feature bits
 * (qw_cpu_flags_from, cpu.c): each level needs exactly the features its
 * file is compiled with, and each optional instruction family (AVX512-VNNI,
 * AVX512-BF16, AVX-VNNI) only its own bit on top of its level. Checked on
 * made-up CPUs (Haswell, Skylake-SP, Zen 4, Alder Lake, OS without ZMM
 * state ...), so the decision is tested whatever CPU runs the test; plus the
 * live CPU's flags against the levels kernels_level offers. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "test.h"

static qw_cpu_bits avx2_cpu(void) {
    qw_cpu_bits x = {0};
    x.avx = x.avx2 = x.fma = x.f16c = 1;
    x.os_ymm = 1;
    return x;
}

static qw_cpu_bits avx512_cpu(void) { /* Skylake-SP: F/BW/VL/DQ, no VNNI, no BF16 */
    qw_cpu_bits x = avx2_cpu();
    x.avx512f = x.avx512bw = x.avx512vl = x.avx512dq = 1;
    x.os_zmm = 1;
    return x;
}

/* The decode streams' prefetch distance (qw_cpu_prefetch_from): Zen 5 and
 * later AMD families, and Zen 3, by default, nothing elsewhere; QWENC_PREFETCH when it
 * is a number in 0..65536. */
static void check_prefetch(void) {
    qw_cpu_bits x = avx512_cpu();
    CHECK(qw_cpu_prefetch_from(&x, NULL) == 0, "Intel (not AMD): no prefetch");
    x.amd_family = 0x19;
    CHECK(qw_cpu_prefetch_from(&x, NULL) == 0, "Zen 4 (family 0x19 with AVX-512): no prefetch");
    x.avx512f = 0;
    CHECK(qw_cpu_prefetch_from(&x, NULL) == QW_PREFETCH_ZEN3, "Zen 3 (family 0x19, no AVX-512): %d bytes",
          qw_cpu_prefetch_from(&x, NULL));
    CHECK(qw_cpu_prefetch_from(&x, "0") == 0, "QWENC_PREFETCH=0 turns Zen 3's off");
    x.amd_family = 0x17;
    CHECK(qw_cpu_prefetch_from(&x, NULL) == 0, "Zen 2 (family 0x17): no prefetch (not measured)");
    x.avx512f = 1;
    x.amd_family = 0x1a;
    CHECK(qw_cpu_prefetch_from(&x, NULL) == QW_PREFETCH_ZEN5, "Zen 5 (family 0x1a): %d bytes",
          qw_cpu_prefetch_from(&x, NULL));
    CHECK(qw_cpu_prefetch_from(&x, "") == QW_PREFETCH_ZEN5, "empty QWENC_PREFETCH: the default");
    CHECK(qw_cpu_prefetch_from(&x, "0") == 0, "QWENC_PREFETCH=0 turns it off");
    x.amd_family = 0x19;
    CHECK(qw_cpu_prefetch_from(&x, "4096") == 4096, "QWENC_PREFETCH=4096 on Zen 4");
    CHECK(qw_cpu_prefetch_from(&x, "65536") == 65536, "QWENC_PREFETCH=65536: the largest");
    static const char *const bad[] = {"-1", "65537", "4k", "abc", "12 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(qw_cpu_prefetch_from(&x, bad[i]) == 0, "QWENC_PREFETCH='%s' is not a distance: the default", bad[i]);
}

/* Tokens per block of the avx512 K tiles: 32 on Zen 5, 16 elsewhere. */
static void check_k_block(void) {
    qw_cpu_bits x = avx512_cpu();
    CHECK(qw_cpu_k_token_block_from(&x) == 16, "Intel: 16-token K blocks");
    x.amd_family = 0x19;
    CHECK(qw_cpu_k_token_block_from(&x) == 16, "Zen 4: 16-token K blocks");
    x.amd_family = 0x1a;
    CHECK(qw_cpu_k_token_block_from(&x) == 32 && 32 <= QW_K_TOKEN_BLOCK_MAX, "Zen 5: 32-token K blocks");
}

static void check_decision(void) {
    qw_cpu_bits x = {0};
    CHECK(qw_cpu_flags_from(&x) == 0, "no features: no level");

    x = avx2_cpu();
    CHECK(qw_cpu_flags_from(&x) == QW_CPU_AVX2, "Haswell: avx2 only (0x%x)", qw_cpu_flags_from(&x));
    static const size_t need_avx2[] = {offsetof(qw_cpu_bits, avx), offsetof(qw_cpu_bits, avx2),
                                       offsetof(qw_cpu_bits, fma), offsetof(qw_cpu_bits, f16c),
                                       offsetof(qw_cpu_bits, os_ymm)};
    for (size_t i = 0; i < sizeof need_avx2 / sizeof need_avx2[0]; i++) {
        x = avx512_cpu();
        *(int *)((char *)&x + need_avx2[i]) = 0;
        CHECK(qw_cpu_flags_from(&x) == 0, "avx2 feature at offset %zu missing: no level (0x%x)", need_avx2[i],
              qw_cpu_flags_from(&x));
    }

    x = avx512_cpu();
    CHECK(qw_cpu_flags_from(&x) == (QW_CPU_AVX2 | QW_CPU_AVX512),
          "Skylake-SP (no VNNI, no BF16): the avx512 level (0x%x)", qw_cpu_flags_from(&x));
    static const size_t need_512[] = {offsetof(qw_cpu_bits, avx512f), offsetof(qw_cpu_bits, avx512bw),
                                      offsetof(qw_cpu_bits, avx512vl), offsetof(qw_cpu_bits, avx512dq),
                                      offsetof(qw_cpu_bits, os_zmm)};
    for (size_t i = 0; i < sizeof need_512 / sizeof need_512[0]; i++) {
        x = avx512_cpu();
        x.avx512vnni = x.avx512bf16 = 1;
        *(int *)((char *)&x + need_512[i]) = 0;
        CHECK(qw_cpu_flags_from(&x) == QW_CPU_AVX2,
              "avx512 feature at offset %zu missing: avx2 only, no VNNI/BF16 bits either (0x%x)", need_512[i],
              qw_cpu_flags_from(&x));
    }

    x = avx512_cpu();
    x.avx512vnni = 1; /* Cascade Lake, Ice Lake */
    CHECK(qw_cpu_flags_from(&x) == (QW_CPU_AVX2 | QW_CPU_AVX512 | QW_CPU_AVX512VNNI), "Cascade Lake (0x%x)",
          qw_cpu_flags_from(&x));
    x = avx512_cpu();
    x.avx512bf16 = 1;
    CHECK(qw_cpu_flags_from(&x) == (QW_CPU_AVX2 | QW_CPU_AVX512 | QW_CPU_AVX512BF16), "BF16 without VNNI (0x%x)",
          qw_cpu_flags_from(&x));
    x = avx512_cpu();
    x.avx512vnni = x.avx512bf16 = x.avxvnni = 1; /* Zen 4, Sapphire Rapids */
    CHECK(qw_cpu_flags_from(&x) == (QW_CPU_AVX2 | QW_CPU_AVX512 | QW_CPU_AVX512VNNI | QW_CPU_AVX512BF16 |
                                    QW_CPU_AVXVNNI),
          "Zen 4 (0x%x)", qw_cpu_flags_from(&x));

    x = avx512_cpu();
    x.avx512vnni = x.avx512bf16 = x.avxvnni = x.amx_int8 = x.os_amx = 1; /* Sapphire Rapids, tiles permitted */
    CHECK(qw_cpu_flags_from(&x) == (QW_CPU_AVX2 | QW_CPU_AVX512 | QW_CPU_AVX512VNNI | QW_CPU_AVX512BF16 |
                                    QW_CPU_AVXVNNI | QW_CPU_AMXINT8),
          "Sapphire Rapids (0x%x)", qw_cpu_flags_from(&x));
    x.os_amx = 0; /* tile data not enabled, or the process not permitted: no AMX */
    CHECK(!(qw_cpu_flags_from(&x) & QW_CPU_AMXINT8), "AMX without the OS's tile state (0x%x)", qw_cpu_flags_from(&x));
    x.os_amx = 1;
    x.avx512vnni = 0; /* the AMX kernels hand small batches to the VNNI ones: AMX needs them */
    CHECK(!(qw_cpu_flags_from(&x) & QW_CPU_AMXINT8), "AMX without AVX-512 VNNI (0x%x)", qw_cpu_flags_from(&x));

    x = avx2_cpu();
    x.avxvnni = 1; /* Alder Lake: AVX-VNNI, no AVX-512 */
    CHECK(qw_cpu_flags_from(&x) == (QW_CPU_AVX2 | QW_CPU_AVXVNNI), "Alder Lake (0x%x)", qw_cpu_flags_from(&x));
    x.avx512vnni = x.avx512bf16 = 1; /* bits without the level: never set */
    CHECK(qw_cpu_flags_from(&x) == (QW_CPU_AVX2 | QW_CPU_AVXVNNI), "AVX512 families without the level (0x%x)",
          qw_cpu_flags_from(&x));
    x = avx512_cpu();
    x.avx512vnni = x.avx512bf16 = x.avxvnni = 1;
    x.os_ymm = 0; /* an OS that saves no YMM state: nothing at all */
    CHECK(qw_cpu_flags_from(&x) == 0, "no YMM state: no level (0x%x)", qw_cpu_flags_from(&x));
}

/* The live CPU: the offered levels follow its flags. */
static void check_live(void) {
    unsigned fl = kernels_cpu_flags();
    printf("cpu: %s (flags 0x%x)\n", kernels_cpu_features(), fl);
#if defined(__x86_64__)
    CHECK((kernels_level("avx2") != NULL) == !!(fl & QW_CPU_AVX2), "avx2 offered iff its bit is set");
    CHECK((kernels_level("avx512") != NULL) == !!(fl & QW_CPU_AVX512), "avx512 offered iff its bit is set");
    if (fl & QW_CPU_AVX512)
        CHECK(strstr(kernels_cpu_features(), "avx512f") && strstr(kernels_cpu_features(), "avx512dq"),
              "the features line names the avx512 features");
    if (fl & QW_CPU_AVX512VNNI) CHECK(strstr(kernels_cpu_features(), "avx512vnni") != NULL, "vnni named");
    if (fl & QW_CPU_AVX512BF16) CHECK(strstr(kernels_cpu_features(), "avx512bf16") != NULL, "bf16 named");
    if (fl & QW_CPU_AMXINT8) CHECK(strstr(kernels_cpu_features(), " amx-int8") != NULL, "amx named");
#endif
    CHECK(kernels_level("ref") != NULL, "ref always offered");
}

int main(void) {
    check_decision();
    check_prefetch();
    check_k_block();
    check_live();
    return test_summary();
}
