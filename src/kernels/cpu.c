/* cpu.c - run-time CPU feature detection for kernel dispatch.
 *
 * x86-64: cpuid leaves 1 and 7 for the instruction sets, and XCR0 (xgetbv)
 * for the operating system's promise to save YMM / ZMM state across context
 * switches; an AVX instruction on a CPU that has it but an OS that does not
 * save the state would corrupt registers. On macOS, AVX-512 state is enabled
 * lazily on first use, so XCR0 may not show it yet; there we ask the kernel
 * (sysctl hw.optional.avx512f) as Apple documents. Only <cpuid.h> and inline
 * asm are used, both available in GCC and clang (Linux and macOS).
 * arm64: NEON (Advanced SIMD) is part of the base architecture.
 */
#include "kernels/kernels_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The capability bits from the raw feature bits: pure, so that
 * tests/kernels/test_cpu.c can check the decision for CPUs we do not have.
 * Each level requires exactly what its file is compiled with (Makefile):
 * avx2 = AVX2 + FMA + F16C; avx512 = F/BW/VL/DQ (+ the avx2 level, whose
 * entries it inherits); the optional families (VNNI, BF16) each need only
 * their own bit on top of the level whose registers they use. */
unsigned qw_cpu_flags_from(const qw_cpu_bits *x) {
    unsigned fl = 0;
    if (x->os_ymm && x->avx && x->avx2 && x->fma && x->f16c) fl |= QW_CPU_AVX2;
    if ((fl & QW_CPU_AVX2) && x->os_zmm && x->avx512f && x->avx512bw && x->avx512vl && x->avx512dq)
        fl |= QW_CPU_AVX512;
    if ((fl & QW_CPU_AVX2) && x->avxvnni) fl |= QW_CPU_AVXVNNI;
    if ((fl & QW_CPU_AVX512) && x->avx512vnni) fl |= QW_CPU_AVX512VNNI;
    if ((fl & QW_CPU_AVX512) && x->avx512bf16) fl |= QW_CPU_AVX512BF16;
    if ((fl & QW_CPU_AVX512VNNI) && x->amx_int8 && x->os_amx) fl |= QW_CPU_AMXINT8;
    return fl;
}

/* One stream per core, in order, is what a decode matmul on the repacked
 * tiles reads (kernels.h: "repacked weights"). On Zen 4 and on a Xeon
 * (Emerald Rapids) the hardware prefetchers keep up with it: decode reached
 * 81-104% of the measured bandwidth roofline without software prefetch,
 * and prefetching 0.7-2 KB ahead cost Zen 4's decode 5-14%
 * (docs/PERFORMANCE.md, "Huge pages, and no software prefetch in the
 * decode streams"). On Zen 5 they do not: one core streamed Q5_0 tiles at
 * 16 GB/s, 41 with a prefetch 8 KB ahead, and the real 0.5B Q4_K_M decoded
 * at 46 tok/s, 83 with it (section "Decode: software prefetch on Zen 5").
 * Nor on Zen 3 (EPYC Milan): a prefetch 4 KB ahead took the real 1.5B
 * Q4_K_M from 15.9 to 20.3 tok/s and Q8_0 from 31 to 41 (section "Zen 3,
 * measured"). Zen 3 and Zen 4 share family 0x19; AVX-512 tells them apart
 * (every Zen 4 has it, no Zen 3 does). Other CPUs keep none until
 * measured; QWENC_PREFETCH=BYTES tries one. */
int qw_cpu_prefetch_from(const qw_cpu_bits *x, const char *env) {
    if (env && *env) {
        char *end;
        const long v = strtol(env, &end, 10);
        if (!*end && v >= 0 && v <= 65536) return (int)v;
    }
    if (x->amd_family >= 0x1a) return QW_PREFETCH_ZEN5;
    if (x->amd_family == 0x19 && !x->avx512f) return QW_PREFETCH_ZEN3;
    return 0;
}

/* The avx512 K-quant tiles unpack a 16-row tile block once per token block
 * and keep the block's accumulators (16 tokens: 8 KB, 32: 16 KB) and QA8
 * rows in L1. 32 tokens halve the unpacking but measured 4-8% slower on
 * Zen 4 (32 KB L1d, 1.5B Q4_K_M pp512, session 9) and 4-5% faster on Zen 5
 * (48 KB L1d: 169 -> 176 and 179 -> 188 tok/s, 6 ABBA rounds each;
 * docs/PERFORMANCE.md). */
int qw_cpu_k_token_block_from(const qw_cpu_bits *x) { return x->amd_family >= 0x1a ? 32 : 16; }

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0)); /* xgetbv */
    return ((uint64_t)hi << 32) | lo;
}

/* QWENC_<NAME>=0 declines an optional family: QWENC_AMX (below), and
 * QWENC_AVXVNNI, after which the avx2 level runs as on a Zen 3 (AVX2
 * without VNNI), to measure that level on a newer machine. */
static int declined(const char *env) {
    const char *e = getenv(env);
    return e && !strcmp(e, "0");
}

static int bit(uint32_t r, int b) { return (int)((r >> b) & 1u); }

/* AMX tile data is off for a process until it asks: Linux (5.16+) grants
 * it with arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), once for
 * the whole process; a tile instruction without it kills the process
 * (SIGILL). Other systems: not used. QWENC_AMX=0 declines it (to measure
 * the VNNI kernels on the same machine). */
static int amx_permitted(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    if (declined("QWENC_AMX")) return 0;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return 0;
#endif
}

static struct {
    unsigned flags;
    int prefetch, k_block;
    char text[256];
} g_cpu;

static void detect(void) {
    uint32_t a = 0, b = 0, c = 0, d = 0;
    uint32_t max = __get_cpuid_max(0, NULL);
    qw_cpu_bits x = {0};
    uint64_t xcr0 = 0;
    int osxsave = 0;
    char vendor[13] = {0};
    __cpuid(0, a, b, c, d);
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    if (max >= 1) {
        __cpuid_count(1, 0, a, b, c, d);
        /* family: base (bits 8-11), plus the extended (20-27) when base is 15 */
        const unsigned fam = (a >> 8) & 15u;
        if (!strcmp(vendor, "AuthenticAMD")) x.amd_family = (int)(fam == 15 ? fam + ((a >> 20) & 255u) : fam);
        x.fma = bit(c, 12);
        osxsave = bit(c, 27);
        x.avx = bit(c, 28);
        x.f16c = bit(c, 29);
    }
    if (max >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        uint32_t max7 = a;
        x.avx2 = bit(b, 5);
        x.avx512f = bit(b, 16);
        x.avx512dq = bit(b, 17);
        x.avx512bw = bit(b, 30);
        x.avx512vl = bit(b, 31);
        x.avx512vnni = bit(c, 11);
        x.amx_int8 = bit(d, 24) && bit(d, 25); /* AMX-TILE, AMX-INT8 */
        if (max7 >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            x.avxvnni = bit(a, 4) && !declined("QWENC_AVXVNNI");
            x.avx512bf16 = bit(a, 5);
        }
    }
    if (osxsave) xcr0 = xgetbv0();
    x.os_ymm = osxsave && (xcr0 & 0x6) == 0x6;     /* XMM + YMM */
    x.os_zmm = x.os_ymm && (xcr0 & 0xe0) == 0xe0; /* opmask + ZMM_Hi256 + Hi16_ZMM */
    /* XTILECFG + XTILEDATA, then the process's permission */
    x.os_amx = x.amx_int8 && (xcr0 & 0x60000) == 0x60000 && amx_permitted();
#if defined(__APPLE__)
    if (x.os_ymm && !x.os_zmm && x.avx512f) {
        int v = 0;
        size_t len = sizeof v;
        if (sysctlbyname("hw.optional.avx512f", &v, &len, NULL, 0) == 0 && v) x.os_zmm = 1;
    }
#endif
    g_cpu.flags = qw_cpu_flags_from(&x);
    g_cpu.prefetch = qw_cpu_prefetch_from(&x, getenv("QWENC_PREFETCH"));
    g_cpu.k_block = qw_cpu_k_token_block_from(&x);
    snprintf(g_cpu.text, sizeof g_cpu.text, "x86-64%s%s%s%s%s%s%s%s%s%s%s%s%s", x.avx ? " avx" : "",
             x.avx2 ? " avx2" : "", x.fma ? " fma" : "", x.f16c ? " f16c" : "", x.avx512f ? " avx512f" : "",
             x.avx512bw ? " avx512bw" : "", x.avx512vl ? " avx512vl" : "", x.avx512dq ? " avx512dq" : "",
             x.avx512bf16 ? " avx512bf16" : "", x.avx512vnni ? " avx512vnni" : "", x.avxvnni ? " avxvnni" : "",
             x.amx_int8 ? (x.os_amx ? " amx-int8" : " amx-int8(off)") : "", (x.avx512f && !x.os_zmm) ? " (os: no zmm state)" : "");
}

#elif defined(__aarch64__)

static struct {
    unsigned flags;
    int prefetch, k_block;
    char text[64];
} g_cpu;

static void detect(void) {
    g_cpu.flags = QW_CPU_NEON;
    g_cpu.prefetch = qw_cpu_prefetch_from(&(qw_cpu_bits){0}, getenv("QWENC_PREFETCH"));
    g_cpu.k_block = qw_cpu_k_token_block_from(&(qw_cpu_bits){0});
    snprintf(g_cpu.text, sizeof g_cpu.text, "arm64 neon");
}

#else

static struct {
    unsigned flags;
    int prefetch, k_block;
    char text[64];
} g_cpu;

static void detect(void) {
    g_cpu.flags = 0;
    g_cpu.prefetch = qw_cpu_prefetch_from(&(qw_cpu_bits){0}, getenv("QWENC_PREFETCH"));
    g_cpu.k_block = qw_cpu_k_token_block_from(&(qw_cpu_bits){0});
    snprintf(g_cpu.text, sizeof g_cpu.text, "generic");
}

#endif

static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static void ensure(void) { pthread_once(&g_cpu_once, detect); }

unsigned kernels_cpu_flags(void) {
    ensure();
    return g_cpu.flags;
}

const char *kernels_cpu_features(void) {
    ensure();
    return g_cpu.text;
}

int kernels_decode_prefetch(void) {
    ensure();
    return g_cpu.prefetch;
}

int kernels_k_token_block(void) {
    ensure();
    return g_cpu.k_block;
}

void kernels_set_k_token_block(int tokens) {
    ensure();
    g_cpu.k_block = tokens < 1 ? 1 : tokens > QW_K_TOKEN_BLOCK_MAX ? QW_K_TOKEN_BLOCK_MAX : tokens;
}

void kernels_set_decode_prefetch(int bytes) {
    ensure();
    g_cpu.prefetch = bytes;
}
