/* bench_qdot.c - the integer path (matmul_q) against the float path
 * (matmul) of the same quantized weights, one thread, per level.
 *
 *   build/bench/bench_qdot [-d q5_0|q8_0|q4_0|q4_1|q5_1|q4_k|q5_k|q6_k] [-n TOKENS] [-r REPS] [-i ISA]
 *                          [-x BYTES]
 *
 * Shapes: Qwen2.5-0.5B's gate (4864 x 896) and down (896 x 4864); a shape
 * whose rows are not whole blocks of the type (896 for the K-quants, as in
 * the real Q4_K_M file, where such matrices fall back to Q5_0) is skipped
 * with a line saying so. Prints the
 * best of REPS: ms per call, GB/s of weights (the decode figure, n = 1) and
 * GOP/s (2 * rows * k * n; the prefill figure), plus quantize_qa8's share,
 * and, where the level has matmul_qr, the same on the repacked copy
 * (kernels.h: "repacked weights"). The "stream" shape (131072 x 896, 80-125
 * MB of weights, beyond the caches) is decode's DRAM case; "strk" (65536 x
 * 1536, 56-82 MB) is the K-quants' (896 is not a whole super-block).
 * -x: the QA8 rows' stride in bytes (default: a row's own size; the forward
 * pass spaces them by its widest input's, 13440 bytes in Qwen2.5-1.5B).
 * Random weight bytes with sane scales. A tool for kernel work (before /
 * after in one run on a quiet machine), not a test. Built by
 * tools/bench_qdot.sh.
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
    const char *dn = "q5_0", *isa = NULL;
    int64_t n = 1, ldxq = 0;
    int reps = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-d")) dn = argv[i + 1];
        else if (!strcmp(argv[i], "-n")) n = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-i")) isa = argv[i + 1];
        else if (!strcmp(argv[i], "-x")) ldxq = atoll(argv[i + 1]);
    }
    int dt = -1;
    for (int t = 0; t < QW_DTYPE_COUNT; t++) {
        char lower[16];
        const char *nm = qw_dtype_name((qw_dtype)t);
        size_t j = 0;
        for (; nm[j] && j < sizeof lower - 1; j++) lower[j] = (char)(nm[j] >= 'A' && nm[j] <= 'Z' ? nm[j] | 0x20 : nm[j]);
        lower[j] = 0;
        if (!strcmp(lower, dn)) dt = t;
    }
    if (dt < 0 || qw_type((qw_dtype)dt)->act != QW_ACT_QA8) {
        fprintf(stderr, "bench_qdot: -d %s: not a type with an integer kernel (q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k)\n", dn);
        return 2;
    }
    const qw_type_traits *tt = qw_type((qw_dtype)dt);
    static const struct {
        const char *name;
        int64_t rows, k;
    } shapes[] = {{"gate", 4864, 896}, {"down", 896, 4864}, {"stream", 131072, 896}, {"strk", 65536, 1536}};
    const char *const *names = kernels_level_names();
    for (int li = 0; names[li]; li++) {
        if (isa && strcmp(isa, names[li])) continue;
        const qw_kernels *L = kernels_level(names[li]);
        if (!L || !L->matmul_q[dt]) continue;
        for (int si = 0; si < 4; si++) {
            int64_t rows = shapes[si].rows, k = shapes[si].k, rb = qw_dtype_row_bytes(dt, k);
            /* strk: the stream for the K-quants (rows of 1536 = 6 super-blocks, Qwen2.5-1.5B's) */
            if (si == 3 && tt->block != 256) continue;
            if (rb < 0) {
                printf("%-7s %s %-4s skipped: k = %lld is not a whole number of %d-weight blocks\n", names[li],
                       tt->name, shapes[si].name, (long long)k, tt->block);
                continue;
            }
            uint8_t *W = malloc((size_t)(rows * rb));
            for (int64_t i = 0; i < rows * rb; i++) W[i] = (uint8_t)rnd();
            for (int64_t b = 0; b < rows * rb; b += tt->bytes) { /* sane scales: 2^-8 */
                uint16_t h = 0x1c00;
                memcpy(W + b + tt->d_off, &h, 2);
                if (tt->m_off >= 0) memcpy(W + b + tt->m_off, &h, 2);
            }
            float *X = malloc((size_t)(n * k) * sizeof(float)), *Y = malloc((size_t)(n * rows) * sizeof(float));
            int64_t rq = ldxq > qw_qa8_row_bytes(k) ? ldxq : qw_qa8_row_bytes(k);
            uint8_t *XQ = malloc((size_t)(n * rq));
            for (int64_t i = 0; i < n * k; i++) X[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0) - 0.5f;
            double best_f = 1e9, best_q = 1e9, best_a = 1e9, best_r = 1e9;
            /* 64-byte aligned, as the model's repacked copy (repack.c) */
            uint8_t *R = L->matmul_qr[dt] && qw_repack_ok((qw_dtype)dt)
                             ? aligned_alloc(64, (size_t)(qw_repack_bytes((qw_dtype)dt, rows, k) + 63) / 64 * 64)
                             : NULL;
            if (R) qw_repack_q((qw_dtype)dt, R, W, rows, k);
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                L->matmul[dt](Y, rows, X, k, n, W, k, 0, rows);
                double t1 = now();
                for (int64_t t = 0; t < n; t++) L->quantize_qa8(XQ + t * rq, X + t * k, k);
                double t2 = now();
                L->matmul_q[dt](Y, rows, XQ, rq, n, W, k, 0, rows);
                double t3 = now();
                if (R) {
                    L->matmul_qr[dt](Y, rows, XQ, rq, n, R, k, 0, rows);
                    double t4 = now();
                    if (t4 - t3 < best_r) best_r = t4 - t3;
                }
                if (t1 - t0 < best_f) best_f = t1 - t0;
                if (t2 - t1 < best_a) best_a = t2 - t1;
                if (t3 - t2 < best_q) best_q = t3 - t2;
            }
            double bytes = (double)(rows * rb), ops = 2.0 * (double)rows * (double)k * (double)n;
            printf("%-7s %s %-4s n=%-4lld float %8.3f ms %6.2f GB/s %7.1f GOP/s | int %8.3f ms %6.2f GB/s %7.1f GOP/s"
                   " (+quantize %.3f ms) | x%.2f\n",
                   names[li], qw_dtype_name(dt), shapes[si].name, (long long)n, best_f * 1e3, bytes / best_f / 1e9,
                   ops / best_f / 1e9, best_q * 1e3, bytes / best_q / 1e9, ops / best_q / 1e9, best_a * 1e3,
                   best_f / (best_q + best_a));
            if (R)
                printf("%-7s %s %-4s n=%-4lld repacked %8.3f ms %6.2f GB/s %7.1f GOP/s | x%.2f of int\n", names[li],
                       qw_dtype_name(dt), shapes[si].name, (long long)n, best_r * 1e3, bytes / best_r / 1e9,
                       ops / best_r / 1e9, best_q / best_r);
            free(R);
            free(W);
            free(X);
            free(Y);
            free(XQ);
        }
    }
    return 0;
}
