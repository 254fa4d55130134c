/* bench_matmul.c - GFLOP/s of the matmul kernels on Qwen2.5-0.5B's shapes.
 *
 *   build/bench/bench_matmul [-n TOKENS] [-t THREADS] [-r REPS] [-d bf16|f16|f32|q8_0] [-i ISA]
 *
 * Times one prefill layer's matmuls (q, k, v, o, gate, up, down) on random
 * weights for n tokens (default 512), through the thread pool split the
 * forward pass uses, and prints min and median over the repetitions, per
 * shape and for the whole layer. A tool for kernel work (before / after in
 * one run), not a test. Built by tools/bench_matmul.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "runtime/pool.h"

typedef struct {
    const char *name;
    int64_t rows, cols;
} shape;

static const shape SHAPES[] = {
    {"q", 896, 896}, {"k", 128, 896}, {"v", 128, 896}, {"o", 896, 896},
    {"gate", 4864, 896}, {"up", 4864, 896}, {"down", 896, 4864},
};
enum { NSHAPES = sizeof SHAPES / sizeof SHAPES[0] };

typedef struct {
    qw_matmul_fn fn;
    float *Y;
    const float *X;
    const void *W;
    int64_t n, rows, cols;
} job;

static void run(void *arg, int tid, int nth) {
    const job *j = arg;
    int64_t lo, hi;
    pool_split(j->rows, 16, tid, nth, &lo, &hi);
    if (hi > lo) j->fn(j->Y, j->rows, j->X, j->cols, j->n, j->W, j->cols, lo, hi);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int64_t n = 512;
    int threads = 1, reps = 5, copies = 1;
    qw_dtype dt = QW_BF16;
    const char *isa = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n")) n = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-i")) isa = argv[i + 1];
        else if (!strcmp(argv[i], "-L")) copies = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-d"))
            dt = !strcmp(argv[i + 1], "f32")    ? QW_F32
                 : !strcmp(argv[i + 1], "f16")  ? QW_F16
                 : !strcmp(argv[i + 1], "q8_0") ? QW_Q8_0
                                                : QW_BF16;
        else {
            fprintf(stderr, "usage: %s [-n TOKENS] [-t THREADS] [-r REPS] [-d bf16|f16|f32|q8_0] [-i ISA] [-L COPIES]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1 || threads < 1 || reps < 1 || reps > 1000 || copies < 1 || copies > 64) {
        fprintf(stderr, "bench_matmul: bad arguments\n");
        return 2;
    }
    qw_err err;
    if (kernels_init(&err) || (isa && kernels_use(isa, &err))) {
        fprintf(stderr, "bench_matmul: %s\n", err.msg);
        return 1;
    }
    const qw_kernels *K = kernels();
    qw_pool *pool = pool_create(threads);
    if (!pool) return 1;
    srand(1);
    void *W[64][NSHAPES];
    float *X = malloc(sizeof(float) * n * 4864), *Y = malloc(sizeof(float) * n * 4864);
    if (!X || !Y) return 1;
    for (int64_t i = 0; i < n * 4864; i++) X[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int c = 0; c < copies; c++)
    for (int s = 0; s < NSHAPES; s++) {
        int64_t cnt = SHAPES[s].rows * SHAPES[s].cols;
        W[c][s] = malloc((size_t)(qw_dtype_row_bytes(dt, SHAPES[s].cols) * SHAPES[s].rows));
        if (!W[c][s]) return 1;
        if (dt == QW_Q8_0) {
            float *row = malloc(sizeof(float) * SHAPES[s].cols);
            for (int64_t r = 0; r < SHAPES[s].rows; r++) {
                for (int64_t i = 0; i < SHAPES[s].cols; i++) row[i] = ((float)rand() / RAND_MAX - 0.5f) * 0.04f;
                qw_quantize_q8_0((char *)W[c][s] + r * qw_dtype_row_bytes(dt, SHAPES[s].cols), row, SHAPES[s].cols);
            }
            free(row);
            continue;
        }
        for (int64_t i = 0; i < cnt; i++) {
            float v = ((float)rand() / RAND_MAX - 0.5f) * 0.04f;
            if (dt == QW_F32) ((float *)W[c][s])[i] = v;
            else {
                uint32_t u;
                memcpy(&u, &v, 4);
                ((uint16_t *)W[c][s])[i] = dt == QW_BF16 ? (uint16_t)(u >> 16) : (uint16_t)0x2000 + (u & 0x3ff);
            }
        }
    }
    printf("matmul %s %s, n=%lld tokens, %d thread(s), %d reps: GFLOP/s min-time (median)\n", K->name,
           qw_dtype_name(dt), (long long)n, threads, reps);
    double *t = malloc(sizeof(double) * reps), *tot = calloc((size_t)reps, sizeof(double));
    double flops_all = 0;
    for (int s = 0; s < NSHAPES; s++) {
        job j = {K->matmul[dt], Y, X, W[0][s], n, SHAPES[s].rows, SHAPES[s].cols};
        pool_run(pool, run, &j); /* warm up */
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            for (int c = 0; c < copies; c++) { /* -L: other copies in between push this one out of cache */
                j.W = W[(r * copies + c) % copies][s];
                pool_run(pool, run, &j);
            }
            t[r] = (now() - t0) / copies;
            tot[r] += t[r];
        }
        qsort(t, (size_t)reps, sizeof *t, cmp);
        double fl = 2.0 * n * SHAPES[s].rows * SHAPES[s].cols;
        flops_all += fl;
        printf("  %-5s %5lldx%-5lld %7.1f (%7.1f)\n", SHAPES[s].name, (long long)SHAPES[s].rows,
               (long long)SHAPES[s].cols, fl / t[0] * 1e-9, fl / t[reps / 2] * 1e-9);
    }
    qsort(tot, (size_t)reps, sizeof *tot, cmp);
    printf("  layer             %7.1f (%7.1f) GFLOP/s = %.1f (%.1f) tok/s for 24 layers\n", flops_all / tot[0] * 1e-9,
           flops_all / tot[reps / 2] * 1e-9, n / (24 * tot[0]), n / (24 * tot[reps / 2]));
    return 0;
}
