/* bench_bf16act.c - BF16 weights: the bf16-activation path (to_bf16 +
 * matmul_bf16act, vdpbf16ps) against the float path (matmul on float32
 * activations), one thread, per level that has the bf16 kernel.
 *
 *   build/bench/bench_bf16act [-n TOKENS] [-r REPS] [-i ISA] [-s gate|down|lm_head]
 *
 * Shapes: Qwen2.5-0.5B's gate (4864 x 896), down (896 x 4864) and lm_head
 * (151936 x 896, 272 MB: larger than the caches, so n = 1 measures the DRAM
 * stream, comparable with tools/membw.c). Prints the best of REPS: ms per
 * call, GB/s of weights (the decode figure) and GFLOP/s (2 * rows * k * n;
 * the prefill figure), the conversion's share and the speed-up. A tool for
 * kernel work, not a test. Built by tools/bench_bf16act.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

int main(int argc, char **argv) {
    const char *isa = NULL, *only = NULL;
    int64_t n = 1;
    int reps = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n")) n = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-i")) isa = argv[i + 1];
        else if (!strcmp(argv[i], "-s")) only = argv[i + 1];
    }
    static const struct {
        const char *name;
        int64_t rows, k;
    } shapes[] = {{"gate", 4864, 896}, {"down", 896, 4864}, {"lm_head", 151936, 896}};
    const char *const *names = kernels_level_names();
    for (int li = 0; names[li]; li++) {
        if (isa && strcmp(isa, names[li])) continue;
        const qw_kernels *L = kernels_level(names[li]);
        if (!L || !L->matmul_bf16act[QW_BF16]) continue;
        for (int si = 0; si < 3; si++) {
            if (only && strcmp(only, shapes[si].name)) continue;
            int64_t rows = shapes[si].rows, k = shapes[si].k;
            uint16_t *W = malloc((size_t)(rows * k) * 2), *XB = malloc((size_t)(n * k) * 2);
            float *X = malloc((size_t)(n * k) * sizeof(float)), *Y = malloc((size_t)(n * rows) * sizeof(float));
            for (int64_t i = 0; i < rows * k; i++) W[i] = (uint16_t)(0x3c00 | (rnd() & 0x81ff)); /* |w| < 2^-6 */
            for (int64_t i = 0; i < n * k; i++) X[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0) - 0.5f;
            double best_f = 1e9, best_b = 1e9, best_c = 1e9;
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                L->matmul[QW_BF16](Y, rows, X, k, n, W, k, 0, rows);
                double t1 = now();
                for (int64_t t = 0; t < n; t++) L->to_bf16(XB + t * k, X + t * k, k);
                double t2 = now();
                L->matmul_bf16act[QW_BF16](Y, rows, XB, k, n, W, k, 0, rows);
                double t3 = now();
                if (t1 - t0 < best_f) best_f = t1 - t0;
                if (t2 - t1 < best_c) best_c = t2 - t1;
                if (t3 - t2 < best_b) best_b = t3 - t2;
            }
            double bytes = 2.0 * (double)(rows * k), ops = 2.0 * (double)rows * (double)k * (double)n;
            printf("%-7s %-7s n=%-4lld float %8.3f ms %6.2f GB/s %7.1f GFLOP/s | bf16 %8.3f ms %6.2f GB/s %7.1f GFLOP/s"
                   " (+to_bf16 %.3f ms) | x%.2f\n",
                   names[li], shapes[si].name, (long long)n, best_f * 1e3, bytes / best_f / 1e9, ops / best_f / 1e9,
                   best_b * 1e3, bytes / best_b / 1e9, ops / best_b / 1e9, best_c * 1e3, best_f / (best_b + best_c));
            free(W), free(XB), free(X), free(Y);
        }
    }
    return 0;
}
