/* test_fim.c - Qwen2.5-Coder fill-in-the-middle prompts (fim.h): the exact
 * text of Qwen's examples, the ids (each FIM marker one special token), the
 * stop ids, and a tokenizer without FIM tokens refused. Fixtures as
 * test_tokenizer's (tests/fixtures/tokenizer/prepare.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tokenizer/fim.h"

static void expect_render(const fim_req *r, const char *want, const char *what) {
    char *out = NULL;
    size_t n = 0;
    qw_err err = {{0}};
    int rc = fim_render(r, &out, &n, &err);
    CHECK(rc == 0 && out && n == strlen(want) && !strcmp(out, want), "%s:\n got  '%s'\n want '%s'", what,
          out ? out : "(null)", want);
    free(out);
}

int main(void) {
    /* Qwen2.5-Coder-fim.py's prompt. */
    fim_req one = {.prefix = "def quicksort(arr):\n    if len(arr) <= 1:\n        return arr\n    pivot = "
                             "arr[len(arr) // 2]\n    ",
                   .suffix = "\n    middle = [x for x in arr if x == pivot]\n    right = [x for x in arr if x > "
                             "pivot]\n    return quicksort(left) + middle + quicksort(right)"};
    expect_render(&one,
                  "<|fim_prefix|>def quicksort(arr):\n    if len(arr) <= 1:\n        return arr\n    pivot = "
                  "arr[len(arr) // 2]\n    <|fim_suffix|>\n    middle = [x for x in arr if x == pivot]\n    right = "
                  "[x for x in arr if x > pivot]\n    return quicksort(left) + middle + quicksort(right)<|fim_middle|>",
                  "single file");
    /* prompt is appended to the prefix; NULLs are empty. */
    fim_req p = {.prefix = "a = ", .prompt = "fo", .suffix = NULL};
    expect_render(&p, "<|fim_prefix|>a = fo<|fim_suffix|><|fim_middle|>", "prompt");
    fim_req empty = {0};
    expect_render(&empty, "<|fim_prefix|><|fim_suffix|><|fim_middle|>", "empty");
    /* Repository context, as Qwen2.5-Coder-repolevel-fim.py lays it out. */
    fim_file files[] = {{"library.py", "class Book:\n    pass\n\n"}, {"student.py", "class Student: pass"},
                        {NULL, ""}};
    fim_req repo = {.prefix = "from library import Library\n", .suffix = "\nmain()", .files = files, .n_files = 3,
                    .repo_name = "library-system", .file_name = "main.py"};
    expect_render(&repo,
                  "<|repo_name|>library-system\n<|file_sep|>library.py\nclass Book:\n    pass\n\n"
                  "<|file_sep|>student.py\nclass Student: pass\n<|file_sep|>tmp\n"
                  "<|file_sep|>main.py\n<|fim_prefix|>from library import Library\n<|fim_suffix|>\nmain()<|fim_middle|>",
                  "repository");
    repo.repo_name = repo.file_name = NULL;
    repo.n_files = 1;
    expect_render(&repo,
                  "<|repo_name|>myproject\n<|file_sep|>library.py\nclass Book:\n    pass\n\n<|file_sep|>filename\n"
                  "<|fim_prefix|>from library import Library\n<|fim_suffix|>\nmain()<|fim_middle|>",
                  "llama-server's default names");

    char fix[1024], dir[1100];
    const char *env = getenv("QWENC_TOK_FIXTURES"), *build = getenv("BUILD");
    if (env && *env) snprintf(fix, sizeof fix, "%s", env);
    else snprintf(fix, sizeof fix, "%s/fixtures/tokenizer", build && *build ? build : "build");
    snprintf(dir, sizeof dir, "%s/qwen2.5", fix);
    qw_tok *t = NULL;
    qw_err err = {{0}};
    CHECK(tok_load(&t, dir, &err) == 0, "load %s: %s", dir, err.msg);
    if (t) {
        int32_t *ids = NULL;
        size_t n = 0;
        fim_req q = {.prefix = "def f(x):\n    ", .suffix = "\n    return y"};
        CHECK(fim_encode(t, &q, &ids, &n, &err) == 0, "encode: %s", err.msg);
        int32_t pre = tok_token_id(t, "<|fim_prefix|>"), suf = tok_token_id(t, "<|fim_suffix|>"),
                mid = tok_token_id(t, "<|fim_middle|>");
        CHECK(pre == 151659 && suf == 151661 && mid == 151660, "FIM ids %d %d %d", pre, suf, mid);
        CHECK(n > 4 && ids[0] == pre && ids[n - 1] == mid, "markers at the ends");
        int nsuf = 0;
        for (size_t i = 0; i < n; i++) nsuf += ids[i] == suf;
        CHECK(nsuf == 1, "one <|fim_suffix|>");
        free(ids);
        int32_t stops[16];
        int ns = fim_stop_ids(t, stops, 16);
        CHECK(ns == 8, "8 stop ids, got %d", ns);
        CHECK(fim_stop_ids(t, stops, 3) == 3, "cap");
        tok_free(t);
    }
    /* A tokenizer without FIM tokens (the tiny flags one): refused. */
    snprintf(dir, sizeof dir, "%s/flags", fix);
    t = NULL;
    if (tok_load(&t, dir, &err) == 0) {
        int32_t *ids = (int32_t *)1;
        size_t n = 1;
        fim_req q = {.prefix = "x"};
        CHECK(fim_encode(t, &q, &ids, &n, &err) == -1 && !ids && n == 0 && strstr(err.msg, "<|fim_prefix|>"),
              "no FIM tokens: %s", err.msg);
        tok_free(t);
    } else {
        CHECK(0, "load %s: %s", dir, err.msg);
    }
    return test_summary();
}
