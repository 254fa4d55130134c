/* bench_pipes.c - how many cycles the instruction mixes of the integer and
 * bf16 kernels take on this CPU, one core, registers only (x86-64).
 *
 *   tools/bench_pipes.sh
 *
 * Each line is a loop body of independent instructions (enough chains that
 * latency does not count), timed against a loop of dependent integer adds
 * (one per cycle on every x86 core of this century), so the figures are in
 * core cycles whatever the clock. What they are for: a K-quant sub-block of
 * the prefill tiles is 8 vpdpbusd plus its float steps (qrepack_*.c); if
 * "8 vpdpbusd + 3 vfmadd" costs 11 cycles, the float steps share the
 * multiply pipes and a change of activation format that removes them is
 * worth 11 / 8 at best; if it costs 8, they are free (docs/PERFORMANCE.md,
 * session 22). Lines for an instruction set this CPU lacks are skipped.
 */
#if defined(__x86_64__)
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const int xs[64] __attribute__((aligned(64))) = {1, 2, 3};

/* Seconds per loop trip of body, n trips (the loop's dec/jnz ride along). */
#define LOOP(ATTR, NAME, BODY, CLOBBER...)                                                    \
    ATTR static double NAME(long n) {                                                         \
        double t0 = now();                                                                    \
        __asm__ volatile("1:\n" BODY "dec %0\n jnz 1b\n" : "+r"(n) : "r"(xs) : "memory", CLOBBER); \
        return (now() - t0);                                                                  \
    }

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vnni,avx512bf16")))
#define AVX2 __attribute__((target("avx2,fma")))
#define X16(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11) OP(12) OP(13) OP(14) OP(15)
#define X8(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7)
#define X3(OP) OP(8) OP(9) OP(10)
#define ZREGS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
              "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18"
#define YREGS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
              "xmm12", "xmm13", "xmm14", "xmm15"

/* the clock: 4 dependent adds per trip */
LOOP(, t_adds, "add $1, %%rax\n add $1, %%rax\n add $1, %%rax\n add $1, %%rax\n", "rax")

#define ZDP(i) "vpdpbusd %%zmm16, %%zmm17, %%zmm" #i "\n"
#define ZDPM(i) "vpdpbusd " #i "*4(%1)%{1to16%}, %%zmm17, %%zmm" #i "\n"
#define ZFMA(i) "vfmadd231ps %%zmm16, %%zmm17, %%zmm" #i "\n"
#define ZMUL(i) "vpmulld %%zmm16, %%zmm17, %%zmm" #i "\n"
#define ZCVT(i) "vcvtdq2ps %%zmm16, %%zmm" #i "\n"
#define ZBF(i) "vdpbf16ps %%zmm16, %%zmm17, %%zmm" #i "\n"
#define ZBC(i) "vpbroadcastd " #i "*4(%1), %%zmm18\n"
LOOP(AVX512, z_dp16, X16(ZDP), ZREGS)
LOOP(AVX512, z_dpm16, X16(ZDPM), ZREGS)
LOOP(AVX512, z_fma16, X16(ZFMA), ZREGS)
LOOP(AVX512, z_dp8_fma3, X8(ZDP) X3(ZFMA), ZREGS)
LOOP(AVX512, z_dp8_cvt3, X8(ZDP) X3(ZCVT), ZREGS)
LOOP(AVX512, z_dp8_mul1, X8(ZDP) ZMUL(8), ZREGS)
LOOP(AVX512, z_dp8_bc8, X8(ZDP) X8(ZBC), ZREGS)
LOOP(AVX512, z_bf16, X16(ZBF), ZREGS)

#define YDPB(i) "vpmaddubsw %%ymm14, %%ymm15, %%ymm" #i "\n"
#define YMADD(i) "vpmaddwd %%ymm14, %%ymm15, %%ymm" #i "\n"
#define YFMA(i) "vfmadd231ps %%ymm14, %%ymm15, %%ymm" #i "\n"
LOOP(AVX2, y_maddubs12, X8(YDPB) YDPB(8) YDPB(9) YDPB(10) YDPB(11), YREGS)
LOOP(AVX2, y_madd12, X8(YMADD) YMADD(8) YMADD(9) YMADD(10) YMADD(11), YREGS)
LOOP(AVX2, y_fma12, X8(YFMA) YFMA(8) YFMA(9) YFMA(10) YFMA(11), YREGS)
LOOP(AVX2, y_maddubs8_fma3, X8(YDPB) X3(YFMA), YREGS)

enum { NEED_AVX2, NEED_VNNI512, NEED_BF16_512 };
static const char *const isa_name[] = {"avx2 + fma", "avx512vnni", "avx512bf16"};

typedef struct {
    int need; /* NEED_*: what the CPU must have */
    const char *what;
    double (*run)(long);
    int ops; /* instructions of interest per trip (0: report per trip) */
} test;

int main(void) {
    const long n = 20000000;
    __builtin_cpu_init();
    double cyc = 0;
    for (int r = 0; r < 3; r++) { /* warm the clock up, keep the fastest */
        double s = t_adds(n) / (4.0 * (double)n);
        if (cyc == 0 || s < cyc) cyc = s;
    }
    printf("bench_pipes: dependent add %.3f ns (%.2f GHz); cycles per trip, per instruction\n", cyc * 1e9,
           1e-9 / cyc);
    const int have[] = {__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                        __builtin_cpu_supports("avx512vnni"), __builtin_cpu_supports("avx512bf16")};
    const test tests[] = {
        {NEED_VNNI512, "16 vpdpbusd zmm", z_dp16, 16},
        {NEED_VNNI512, "16 vpdpbusd zmm, {1to16} memory operand", z_dpm16, 16},
        {NEED_VNNI512, "16 vfmadd231ps zmm", z_fma16, 16},
        {NEED_VNNI512, "8 vpdpbusd + 3 vfmadd231ps zmm", z_dp8_fma3, 0},
        {NEED_VNNI512, "8 vpdpbusd + 3 vcvtdq2ps zmm", z_dp8_cvt3, 0},
        {NEED_VNNI512, "8 vpdpbusd + 1 vpmulld zmm", z_dp8_mul1, 0},
        {NEED_VNNI512, "8 vpdpbusd + 8 vpbroadcastd m32 zmm", z_dp8_bc8, 0},
        {NEED_BF16_512, "16 vdpbf16ps zmm", z_bf16, 16},
        {NEED_AVX2, "12 vpmaddubsw ymm", y_maddubs12, 12},
        {NEED_AVX2, "12 vpmaddwd ymm", y_madd12, 12},
        {NEED_AVX2, "12 vfmadd231ps ymm", y_fma12, 12},
        {NEED_AVX2, "8 vpmaddubsw + 3 vfmadd231ps ymm", y_maddubs8_fma3, 0},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        const test *t = &tests[i];
        if (!have[t->need]) {
            printf("  %-44s skipped (no %s)\n", t->what, isa_name[t->need]);
            continue;
        }
        double best = 0;
        for (int r = 0; r < 3; r++) {
            double s = t->run(n) / (double)n / cyc;
            if (best == 0 || s < best) best = s;
        }
        if (t->ops) printf("  %-44s %6.2f cycles per trip, %5.2f per instruction\n", t->what, best, best / t->ops);
        else printf("  %-44s %6.2f cycles per trip\n", t->what, best);
    }
    return 0;
}
#else
#include <stdio.h>
int main(void) {
    puts("bench_pipes: x86-64 only");
    return 0;
}
#endif
