/* bench_attn.c - the attention kernels (kernels.h: attn, attn16) per KV
 * cache type, on one thread: Qwen2.5-0.5B's decode shape (7 query heads per
 * kv head, hd 64) over N cached rows in 64-row pages, 24 layers x 2 kv
 * heads of distinct pages (48 x N rows: 12 MB per 1000 rows in float32, so
 * a long context streams from memory as in a real decode step). Rounds
 * alternate the types; prints the median microseconds per token (all 48
 * calls) per level and type, and each type's ratio to f32.
 * With -t RUN, each call is a prefill run (kernels.h: attn) of RUN tokens
 * ending at row N, and the time is per token of the run; -l LEVEL times one
 * level only.
 *   build/bench/bench_attn [-n ROWS] [-r ROUNDS] [-t RUN] [-l LEVEL]   (tools/bench_attn.sh)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"

enum { NQ = 7, HD = 64, PAGE = 64, CALLS = 48 };

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
    int n = 2000, rounds = 15, run = 1;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) run = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-l")) only = argv[i + 1];
    }
    if (n < 1 || rounds < 1 || run < 1 || run > n) {
        fprintf(stderr, "bench_attn: need 1 <= RUN <= ROWS and ROUNDS >= 1\n");
        return 2;
    }
    int np = (n + PAGE - 1) / PAGE;
    /* one page per (call, page index): K rows then V rows, float32 or 16-bit */
    float **pages[QW_KV_TYPE_COUNT];
    for (int t = 0; t < QW_KV_TYPE_COUNT; t++) {
        pages[t] = malloc((size_t)CALLS * np * sizeof(float *));
        for (int c = 0; c < CALLS * np; c++) {
            size_t bytes = (size_t)2 * PAGE * HD * (size_t)qw_kv_type_size((qw_kv_type)t);
            void *p = NULL;
            if (posix_memalign(&p, 64, bytes)) return 1;
            float f[2 * PAGE * HD];
            for (int i = 0; i < 2 * PAGE * HD; i++) f[i] = (float)((rand() % 2001) - 1000) / 500.0f;
            if (t == QW_KV_F32) memcpy(p, f, bytes);
            else kernels_level("ref")->kv_store16[t](p, f, 2 * PAGE * HD);
            pages[t][c] = p;
        }
    }
    float *q = malloc((size_t)run * NQ * HD * sizeof(float)), *out = malloc((size_t)run * NQ * HD * sizeof(float));
    float *S = malloc((size_t)qw_attn_scratch(run, NQ, n - run + 1) * sizeof(float));
    for (int i = 0; i < run * NQ * HD; i++) q[i] = (float)((rand() % 2001) - 1000) / 1000.0f;
    const char *const *names = kernels_level_names();
    printf("attention, %d rows, runs of %d tokens, %d heads x hd %d, %d calls, %d rounds; us per token\n", n, run,
           NQ, HD, CALLS, rounds);
    for (int li = 0; names[li]; li++) {
        const qw_kernels *L = kernels_level(names[li]);
        if (!L || (only && strcmp(only, names[li]))) continue;
        double *us[QW_KV_TYPE_COUNT];
        for (int t = 0; t < QW_KV_TYPE_COUNT; t++) us[t] = malloc((size_t)rounds * sizeof(double));
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < QW_KV_TYPE_COUNT; k++) {
                int t = (k + r) % QW_KV_TYPE_COUNT;
                qw_attn_fn fn = qw_attn_for(L, (qw_kv_type)t);
                double t0 = now();
                for (int c = 0; c < CALLS; c++) {
                    qw_kv_rows kv = {(const float *const *)pages[t] + (size_t)c * np, 0, PAGE * HD, HD, 6};
                    fn(out, q, NQ * HD, run, NQ, HD, &kv, n - run + 1, 0.125f, S);
                }
                us[t][r] = (now() - t0) * 1e6 / run;
            }
        double med[QW_KV_TYPE_COUNT];
        for (int t = 0; t < QW_KV_TYPE_COUNT; t++) {
            qsort(us[t], (size_t)rounds, sizeof(double), cmp);
            med[t] = us[t][rounds / 2];
        }
        printf("%-7s f32 %8.1f us   f16 %8.1f us (%.2fx)   bf16 %8.1f us (%.2fx)\n", L->name, med[0], med[1],
               med[0] / med[1], med[2], med[0] / med[2]);
        for (int t = 0; t < QW_KV_TYPE_COUNT; t++) free(us[t]);
    }
    return 0;
}
