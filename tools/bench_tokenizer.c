/* bench_tokenizer.c - single-thread encode speed of the C tokenizer.
 *
 *   bench_tokenizer TOKENIZER_DIR FILE
 * FILE holds documents separated by the byte 0x1E (record separator); each
 * is encoded with one tok_encode() call, as tools/bench_tokenizer.py does with
 * the `tokenizers` library. Prints MB/s and the total token count (the two
 * totals must agree). Built and run by tools/bench_tokenizer.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/tokenizer.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz) return 1;
    fclose(f);
    qw_tok *t;
    qw_err err;
    if (tok_load(&t, argv[1], &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t total = 0, docs = 0;
    double t0 = now_s();
    clock_t c0 = clock();
    for (char *p = buf, *end = buf + sz; p < end;) {
        char *q = memchr(p, 0x1E, (size_t)(end - p));
        if (!q) q = end;
        int32_t *ids;
        size_t n;
        if (tok_encode(t, p, (size_t)(q - p), &ids, &n, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        total += n;
        docs++;
        free(ids);
        p = q + 1;
    }
    double dt = now_s() - t0, cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    /* CPU time is the fair measure on a shared machine; wall time also shown. */
    printf("qwenc      : %8.2f MB/s (CPU time)  %8.2f MB/s (wall)  %zu tokens, %zu docs, %.1f MB\n",
           sz / cpu / 1e6, sz / dt / 1e6, total, docs, sz / 1e6);
    tok_free(t);
    free(buf);
    return 0;
}
