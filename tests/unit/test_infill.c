/* test_infill.c - /infill request fields (src/server/infill.h): accepted
 * shapes become Qwen2.5-Coder FIM prompts, bad ones are 400s naming the
 * field, a model without FIM tokens is a 400, and the answer's shape. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/infill.h"
#include "test.h"

static void expect_400(const char *body, const char *param) {
    cJSON *o = cJSON_Parse(body);
    api_infill in;
    api_error e = {0};
    int rc = infill_parse(o, &in, &e);
    CHECK(rc == -1 && e.status == 400 && !strcmp(e.param, param) && !in.files, "%s: rc %d param '%s' (%s)", body, rc,
          e.param, e.message);
    cJSON_Delete(o);
}

int main(void) {
    const char *body = "{\"input_prefix\":\"def f(x):\\n    \",\"input_suffix\":\"\\n    return y\\n\",\"prompt\":\"y = \","
                       "\"input_extra\":[{\"filename\":\"a.py\",\"text\":\"A = 1\"},{\"text\":\"B = 2\\n\"}],"
                       "\"repo_name\":\"r\",\"n_predict\":8}";
    cJSON *o = cJSON_Parse(body);
    api_infill in;
    api_error e = {0};
    CHECK(infill_parse(o, &in, &e) == 0, "parse: %s", e.message);
    char *s = NULL;
    size_t n;
    CHECK(fim_render(&in.fim, &s, &n, NULL) == 0 &&
              !strcmp(s, "<|repo_name|>r\n<|file_sep|>a.py\nA = 1\n<|file_sep|>tmp\nB = 2\n<|file_sep|>filename\n"
                         "<|fim_prefix|>def f(x):\n    y = <|fim_suffix|>\n    return y\n<|fim_middle|>"),
          "render: %s", s);
    free(s);
    char fix[1100];
    const char *build = getenv("BUILD");
    snprintf(fix, sizeof fix, "%s/fixtures/tokenizer", build && *build ? build : "build");
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/qwen2.5", fix);
    qw_tok *tok = NULL;
    if (tok_load(&tok, dir, NULL) == 0) {
        int32_t *ids = NULL;
        size_t ni = 0;
        CHECK(infill_encode(&in, tok, &ids, &ni, &e) == 0 && ni > 10 && ids[0] == tok_token_id(tok, "<|repo_name|>") &&
                  ids[ni - 1] == tok_token_id(tok, "<|fim_middle|>"),
              "encode: %s", e.message);
        free(ids);
        tok_free(tok);
        snprintf(dir, sizeof dir, "%s/flags", fix);
        tok = NULL;
        CHECK(tok_load(&tok, dir, NULL) == 0, "flags tokenizer");
        if (tok) {
            ids = NULL;
            CHECK(infill_encode(&in, tok, &ids, &ni, &e) == -1 && !ids && e.status == 400 && strstr(e.message, "fill-in-the-middle"),
                  "no FIM tokens: %d %s", e.status, e.message);
            tok_free(tok);
        }
    } else {
        printf("SKIP encode checks: no tokenizer fixture at %s\n", dir);
    }
    infill_free(&in);
    cJSON_Delete(o);
    /* Defaults: nothing given is an empty single-file prompt. */
    o = cJSON_Parse("{\"input_extra\":[]}");
    CHECK(infill_parse(o, &in, &e) == 0 && in.fim.n_files == 0 && !in.fim.prefix, "empty");
    infill_free(&in);
    cJSON_Delete(o);
    expect_400("{\"input_prefix\":3}", "input_prefix");
    expect_400("{\"input_suffix\":[]}", "input_suffix");
    expect_400("{\"prompt\":{}}", "prompt");
    expect_400("{\"input_extra\":{}}", "input_extra");
    expect_400("{\"input_extra\":[\"x\"]}", "input_extra[0]");
    expect_400("{\"input_extra\":[{\"filename\":\"a\"},{\"filename\":1}]}", "input_extra[1].filename");
    expect_400("{\"input_extra\":[{\"text\":false}]}", "input_extra[0].text");
    /* The answer. */
    api_result r = {.text = "a, b\n", .text_len = 5, .finish = "length", .prompt_tokens = 12, .gen_tokens = 3};
    s = infill_json(&r);
    CHECK(s && strstr(s, "\"content\":\"a, b\\n\"") && strstr(s, "\"tokens_evaluated\":12") &&
              strstr(s, "\"tokens_predicted\":3") && strstr(s, "\"finish_reason\":\"length\""),
          "json %s", s);
    free(s);
    return test_summary();
}
