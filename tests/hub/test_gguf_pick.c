/* test_gguf_pick.c - quant tags of .gguf names and picking a repo's file by
 * tag (src/hub/gguf_pick.c), as `qwenc pull REPO:QUANT` and MODEL
 * REPO:QUANT use them. */
#include <stdio.h>
#include <string.h>

#include "hub/gguf_pick.h"
#include "test.h"

static int pick(const char *const *names, int n, const char *quant, int *picked, qw_err *e) {
    e->msg[0] = 0;
    return hub_gguf_pick(names, n, quant, "org/repo", picked, e);
}

int main(void) {
    char tag[64];
    int part, count;
    struct { const char *name, *tag; int part, count; } tags[] = {
        {"qwen2.5-0.5b-instruct-q4_k_m.gguf", "Q4_K_M", 1, 1},
        {"Qwen2.5-0.5B-Instruct-Q8_0.GGUF", "Q8_0", 1, 1},
        {"llama-2-7b.Q5_K_S.gguf", "Q5_K_S", 1, 1},
        {"sub/dir/model-bf16.gguf", "BF16", 1, 1},
        {"qwen2.5-7b-instruct-q4_k_m-00002-of-00003.gguf", "Q4_K_M", 2, 3},
        {"model.gguf", "MODEL", 1, 1},
    };
    for (size_t i = 0; i < sizeof tags / sizeof *tags; i++) {
        CHECK(hub_gguf_quant(tags[i].name, tag, sizeof tag, &part, &count) == 0 && !strcmp(tag, tags[i].tag) &&
                  part == tags[i].part && count == tags[i].count,
              "%s -> '%s' %d/%d", tags[i].name, tag, part, count);
    }
    CHECK(hub_gguf_quant("config.json", tag, sizeof tag, &part, &count) == -1, "config.json is not a GGUF");
    CHECK(hub_gguf_quant(".gguf", tag, sizeof tag, &part, &count) == -1, "'.gguf' alone");

    qw_err e;
    int picked[16];
    const char *repo[] = {"README.md", "qwen-q8_0.gguf", ".gitattributes", "qwen-q4_k_m.gguf", "qwen-fp16.gguf"};
    int n = (int)(sizeof repo / sizeof *repo);
    CHECK(pick(repo, n, "Q4_K_M", picked, &e) == 1 && picked[0] == 3, "Q4_K_M: %s", e.msg);
    CHECK(pick(repo, n, "q8_0", picked, &e) == 1 && picked[0] == 1, "q8_0 (lower case): %s", e.msg);
    CHECK(pick(repo, n, "Q6_K", picked, &e) == -1 && strstr(e.msg, "Q6_K") && strstr(e.msg, "Q8_0, Q4_K_M, FP16"),
          "a missing quant names those there are: %s", e.msg);
    CHECK(pick(repo, n, NULL, picked, &e) == -1 && strstr(e.msg, "org/repo:QUANT") && strstr(e.msg, "Q4_K_M"),
          "several, none asked for: %s", e.msg);
    CHECK(pick(repo, 1, NULL, picked, &e) == -1 && strstr(e.msg, "no .gguf"), "no gguf: %s", e.msg);
    CHECK(pick(repo, 2, NULL, picked, &e) == 1 && picked[0] == 1, "the only one: %s", e.msg);

    /* Split models: every part, in order; a missing part is an error. */
    const char *split[] = {"m-Q4_K_M-00003-of-00003.gguf", "m-Q4_K_M-00001-of-00003.gguf", "m-Q8_0.gguf",
                           "m-Q4_K_M-00002-of-00003.gguf"};
    CHECK(pick(split, 4, "q4_k_m", picked, &e) == 3 && picked[0] == 1 && picked[1] == 3 && picked[2] == 0,
          "split parts in order: %s", e.msg);
    CHECK(pick(split, 3, "Q4_K_M", picked, &e) == -1 && strstr(e.msg, "part 2 of 3"), "missing part: %s", e.msg);

    /* REPO:QUANT */
    char r[64];
    const char *q;
    CHECK(hub_split_spec("Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", r, sizeof r, &q) == 0 &&
              !strcmp(r, "Qwen/Qwen2.5-0.5B-Instruct-GGUF") && q && !strcmp(q, "Q4_K_M"), "%s %s", r, q);
    CHECK(hub_split_spec("Qwen/Qwen2.5-0.5B-Instruct", r, sizeof r, &q) == 0 && !q, "no quant");
    CHECK(hub_split_spec("org/x:", r, sizeof r, &q) == -1, "empty quant accepted");
    return test_summary();
}
