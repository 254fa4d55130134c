/* bench_grammar.c - how long one token mask takes over a real vocabulary.
 *
 *   cc ... tools/bench_grammar.c build/libqwenc.a ... (make build/bench_grammar)
 *   build/bench_grammar MODEL [REPS]
 *
 * MODEL: anything tok_load() reads (the real GGUF file, a folder). Builds
 * the vocabulary trie for the model's 151,936 ids, compiles a JSON Schema
 * with strings, numbers, arrays and nested objects, and times
 * gmatch_fill_mask() at states that stress it differently: inside a string
 * (nearly every token allowed: the whole trie is walked), after a key
 * (only the colon and blanks), inside a number, at the start. Prints the
 * median and worst per state. A short run; on a shared machine the worst
 * case says more about the neighbours than about the code. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [REPS]\n", argv[0]);
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (reps < 1 || reps > 10000) reps = 20;
    qw_err err = {{0}};
    qw_tok *t = NULL;
    if (tok_load(&t, argv[1], &err)) {
        fprintf(stderr, "bench_grammar: %s\n", err.msg);
        return 1;
    }
    int32_t eos[2] = {tok_token_id(t, "<|im_end|>"), tok_token_id(t, "<|endoftext|>")};
    double t0 = now_s();
    qw_gvocab *v = gvocab_create(t, 151936, eos, 2, &err);
    double t_trie = now_s() - t0;
    cJSON *s = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                           "\"n\":{\"type\":\"number\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
                           "\"sub\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"]}},"
                           "\"required\":[\"name\",\"n\",\"tags\",\"sub\"],\"additionalProperties\":false}");
    qw_grammar *g = NULL;
    if (!v || !s || grammar_compile_json_schema(&g, s, &err)) {
        fprintf(stderr, "bench_grammar: %s\n", err.msg);
        return 1;
    }
    qw_gmatch *m = gmatch_create(g, v);
    uint32_t *mask = malloc((151936 + 31) / 32 * sizeof(uint32_t));
    double *dt = malloc((size_t)reps * sizeof(double));
    static const struct {
        const char *what, *prefix;
    } states[] = {
        {"start", ""},
        {"inside a string", "{\"name\": \"hello"},
        {"inside a string in an array", "{\"name\":\"x\",\"n\":1,\"tags\":[\"a"},
        {"after a key", "{\"name\""},
        {"inside a number", "{\"name\":\"x\",\"n\":12"},
        {"after a value", "{\"name\":\"x\",\"n\":1,\"tags\":[],\"sub\":{\"ok\":true}"},
    };
    printf("vocabulary trie: %d ids, built in %.0f ms\n", gvocab_n_vocab(v), t_trie * 1e3);
    for (size_t k = 0; k < sizeof states / sizeof *states; k++) {
        gmatch_reset(m);
        if (!gmatch_accept_bytes(m, states[k].prefix, strlen(states[k].prefix))) {
            fprintf(stderr, "bench_grammar: prefix of '%s' rejected\n", states[k].what);
            return 1;
        }
        /* cold: a fresh matcher each time (no remembered masks: the trie walk) */
        int n = 0;
        for (int r = 0; r < reps; r++) {
            qw_gmatch *c = gmatch_create(g, v);
            gmatch_accept_bytes(c, states[k].prefix, strlen(states[k].prefix));
            double a = now_s();
            n = gmatch_fill_mask(c, mask);
            dt[r] = now_s() - a;
            gmatch_free(c);
        }
        qsort(dt, (size_t)reps, sizeof *dt, cmp_d);
        double cold_best = dt[0], cold_med = dt[reps / 2], cold_worst = dt[reps - 1];
        /* warm: the same state again (as every later token inside a string) */
        for (int r = 0; r < reps; r++) {
            double a = now_s();
            gmatch_fill_mask(m, mask);
            dt[r] = now_s() - a;
        }
        qsort(dt, (size_t)reps, sizeof *dt, cmp_d);
        printf("%-28s %6d allowed  walk: best %5.2f, median %5.2f, worst %5.2f ms   remembered: median %6.3f ms\n",
               states[k].what, n, cold_best * 1e3, cold_med * 1e3, cold_worst * 1e3, dt[reps / 2] * 1e3);
    }
    free(dt);
    free(mask);
    gmatch_free(m);
    grammar_release(g);
    cJSON_Delete(s);
    gvocab_free(v);
    tok_free(t);
    return 0;
}
