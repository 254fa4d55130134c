/* test_ollama.c - Ollama's API as JSON (src/server/ollama.c): request
 * parsing onto qwenc's request (options -> sampling, refused fields named,
 * load calls) and the response documents' shapes. The e2e suite drives the
 * same endpoints with the ollama Python client (tests/e2e/test_ollama.py). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "server/ollama.h"
#include "test.h"

static api_limits limits(const qw_tok *tok) {
    api_limits lim = {.tok = tok, .vocab = 151936, .n_ctx = 64, .sampling = sampling_default(),
                      .completion_max_tokens = 512, .completion_default = 50};
    return lim;
}

/* Parse that must fail with status and param. */
static void bad(ollama_kind kind, const api_limits *lim, const char *body, int status, const char *param) {
    ollama_req o;
    api_error e;
    memset(&e, 0, sizeof e);
    int rc = ollama_parse(kind, body, strlen(body), lim, &o, &e);
    CHECK(rc == -1 && e.status == status && !strcmp(e.param, param),
          "%s -> rc %d status %d param '%s' (%s); want %d '%s'", body, rc, e.status, e.param, e.message, status,
          param);
    if (rc == 0) ollama_req_free(&o);
}

/* Checks that need no tokenizer: refusals happen before any encoding. */
static void test_refusals(void) {
    api_limits lim = limits(NULL);
    const char *m = "\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char b[512];
#define BAD(kind, extra, status, param)                  \
    snprintf(b, sizeof b, "{%s,%s}", m, extra);          \
    bad(kind, &lim, b, status, param)
    /* format: "json" or a schema object (mapped onto response_format); anything else is refused */
    BAD(OLLAMA_CHAT, "\"format\":\"yaml\"", 400, "format");
    BAD(OLLAMA_CHAT, "\"format\":7", 400, "format");
    BAD(OLLAMA_CHAT, "\"tools\":[{\"type\":\"function\"}]", 400, "tools");
    BAD(OLLAMA_CHAT, "\"think\":true", 400, "think");
    BAD(OLLAMA_CHAT, "\"stream\":\"yes\"", 400, "stream");
    BAD(OLLAMA_CHAT, "\"keep_alive\":[1]", 400, "keep_alive");
    BAD(OLLAMA_CHAT, "\"options\":[1]", 400, "options");
    BAD(OLLAMA_CHAT, "\"options\":{\"mirostat\":2}", 400, "options.mirostat");
    BAD(OLLAMA_CHAT, "\"options\":{\"typical_p\":0.5}", 400, "options.typical_p");
    BAD(OLLAMA_CHAT, "\"options\":{\"num_predict\":0}", 400, "options.num_predict");
    BAD(OLLAMA_CHAT, "\"options\":{\"num_predict\":65}", 400, "options.num_predict");
    BAD(OLLAMA_CHAT, "\"options\":{\"num_predict\":1.5}", 400, "options.num_predict");
#undef BAD
    bad(OLLAMA_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 400, "model");
    bad(OLLAMA_CHAT, &lim, "{\"model\":\"\",\"messages\":[]}", 400, "model");
    bad(OLLAMA_CHAT, &lim, "{\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"images\":[\"aGk=\"]}]}",
        400, "messages[0].images");
    bad(OLLAMA_GENERATE, &lim, "{\"model\":\"x\",\"prompt\":\"hi\",\"suffix\":\"end\"}", 400, "suffix");
    bad(OLLAMA_GENERATE, &lim, "{\"model\":\"x\",\"prompt\":\"hi\",\"context\":[1,2,3]}", 400, "context");
    bad(OLLAMA_GENERATE, &lim, "{\"model\":\"x\",\"prompt\":\"hi\",\"template\":\"{{ .Prompt }}\"}", 400, "template");
    bad(OLLAMA_GENERATE, &lim, "{\"model\":\"x\",\"prompt\":5}", 400, "prompt");
    bad(OLLAMA_GENERATE, &lim, "[1]", 400, "");
    bad(OLLAMA_GENERATE, &lim, "{nope", 400, "");

    /* Harmless: think false, format "", keep_alive, no-op samplers, runtime options. */
    ollama_req o;
    api_error e;
    const char *ok = "{\"model\":\"x\",\"messages\":[],\"think\":false,\"format\":\"\",\"keep_alive\":\"5m\","
                     "\"options\":{\"mirostat\":0,\"typical_p\":1,\"num_ctx\":8192,\"num_thread\":4}}";
    CHECK(ollama_parse(OLLAMA_CHAT, ok, strlen(ok), &lim, &o, &e) == 0, "harmless fields: %s", e.message);
    CHECK(o.load_only && !o.unload && o.stream == 1 && !strcmp(o.model, "x"), "empty messages: a load call");
    ollama_req_free(&o);
    /* keep_alive 0 with nothing to do: unload. */
    const char *ul[] = {"{\"model\":\"x\",\"keep_alive\":0}", "{\"model\":\"x\",\"keep_alive\":\"0s\",\"prompt\":\"\"}"};
    for (int i = 0; i < 2; i++) {
        CHECK(ollama_parse(OLLAMA_GENERATE, ul[i], strlen(ul[i]), &lim, &o, &e) == 0 && o.load_only && o.unload,
              "unload: %s", ul[i]);
        ollama_req_free(&o);
    }
    /* A long model name is cut at a character boundary. */
    char longname[600] = "{\"model\":\"";
    for (int i = 0; i < 200; i++) strcat(longname, "\xc3\xa9");
    strcat(longname, "\"}");
    CHECK(ollama_parse(OLLAMA_GENERATE, longname, strlen(longname), &lim, &o, &e) == 0, "long name");
    CHECK(strlen(o.model) == 254 && api_utf8_valid(o.model, strlen(o.model)), "name cut to %zu bytes, valid UTF-8",
          strlen(o.model));
    ollama_req_free(&o);
}

static void test_parse_with_tokenizer(void) {
    const char *build = getenv("BUILD");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizer/qwen2.5", build && build[0] ? build : "build");
    qw_tok *tok;
    qw_err err;
    if (tok_load(&tok, dir, &err) != 0) {
        printf("SKIP ollama parsing checks: no tokenizer fixture at %s (run tests/fixtures/tokenizer/prepare.sh)\n",
               dir);
        return;
    }
    api_limits lim = limits(tok);
    ollama_req o;
    api_error e;
    const char *b = "{\"model\":\"qwen:0.5b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                    "\"options\":{\"temperature\":0.5,\"top_p\":0.9,\"top_k\":20,\"min_p\":0.05,\"seed\":7,"
                    "\"num_predict\":5,\"stop\":[\"x\",\"yz\"],\"repeat_penalty\":1.1,\"repeat_last_n\":32,"
                    "\"presence_penalty\":0.5,\"frequency_penalty\":0.25}}";
    CHECK(ollama_parse(OLLAMA_CHAT, b, strlen(b), &lim, &o, &e) == 0, "chat: %s", e.message);
    qw_chat_msg m[1] = {{.role = "user", .content = "hi"}};
    int32_t *ids;
    size_t n;
    chat_encode(tok, m, 1, 1, &ids, &n, &err);
    CHECK(o.req.n_prompt == (int)n && !memcmp(o.req.prompt, ids, n * sizeof *ids), "chat prompt = chat template");
    qw_sampling s = o.req.sampling;
    CHECK(s.temperature == 0.5f && s.top_p == 0.9f && s.top_k == 20 && s.min_p == 0.05f && s.seed == 7 &&
              o.req.seed_set,
          "sampling options");
    CHECK(s.repeat_penalty == 1.1f && s.repeat_last_n == 32 && s.presence_penalty == 0.5f &&
              s.frequency_penalty == 0.25f,
          "penalties");
    CHECK(o.req.max_tokens == 5 && o.req.n_stop == 2 && !strcmp(o.req.stop[1], "yz"), "num_predict, stop");
    CHECK(o.stream == 1 && o.req.stream == 1 && !o.load_only && !strcmp(o.model, "qwen:0.5b"), "stream default");
    ollama_req_free(&o);

    /* Defaults: num_predict absent or -1 -> until the context is full. */
    const char *fills[] = {"{\"model\":\"x\",\"prompt\":\"hi\",\"stream\":false}",
                           "{\"model\":\"x\",\"prompt\":\"hi\",\"stream\":false,\"options\":{\"num_predict\":-1}}"};
    for (int i = 0; i < 2; i++) {
        CHECK(ollama_parse(OLLAMA_GENERATE, fills[i], strlen(fills[i]), &lim, &o, &e) == 0, "generate: %s",
              e.message);
        CHECK(o.req.n_prompt == (int)n && !memcmp(o.req.prompt, ids, n * sizeof *ids), "generate prompt = template");
        CHECK(o.req.max_tokens == 64 - (int)n && o.stream == 0 && o.req.stream == 0, "fills the context (%d)",
              o.req.max_tokens);
        ollama_req_free(&o);
    }
    /* system and raw. */
    b = "{\"model\":\"x\",\"prompt\":\"hi\",\"system\":\"S\"}";
    CHECK(ollama_parse(OLLAMA_GENERATE, b, strlen(b), &lim, &o, &e) == 0, "system: %s", e.message);
    qw_chat_msg m2[2] = {{.role = "system", .content = "S"}, {.role = "user", .content = "hi"}};
    int32_t *ids2;
    size_t n2;
    chat_encode(tok, m2, 2, 1, &ids2, &n2, &err);
    CHECK(o.req.n_prompt == (int)n2 && !memcmp(o.req.prompt, ids2, n2 * sizeof *ids2), "system prompt");
    ollama_req_free(&o);
    free(ids2);
    b = "{\"model\":\"x\",\"prompt\":\"hi\",\"raw\":true}";
    CHECK(ollama_parse(OLLAMA_GENERATE, b, strlen(b), &lim, &o, &e) == 0 && o.req.n_prompt == 1, "raw: %s",
          e.message);
    ollama_req_free(&o);
    /* Range errors name the option, as Ollama's clients wrote it. */
    bad(OLLAMA_CHAT, &lim, "{\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"options\":{\"temperature\":5}}",
        400, "options.temperature");
    bad(OLLAMA_CHAT, &lim, "{\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"options\":{\"stop\":7}}",
        400, "options.stop");
    bad(OLLAMA_CHAT, &lim, "{\"model\":\"x\",\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}", 400,
        "messages[0].role");
    bad(OLLAMA_CHAT, &lim, "{\"model\":\"x\",\"messages\":\"hi\"}", 400, "messages");
    free(ids);
    tok_free(tok);
}

static cJSON *parse_line(const char *s) {
    size_t n = s ? strlen(s) : 0;
    CHECK(n > 0 && s[n - 1] == '\n' && !memchr(s, '\n', n - 1), "one newline-terminated line: %s", s ? s : "(null)");
    return s ? cJSON_Parse(s) : NULL;
}

static void test_documents(void) {
    char t[40];
    struct timespec ts = {.tv_sec = 1700000000, .tv_nsec = 5};
    ollama_time(t, &ts);
    CHECK(!strcmp(t, "2023-11-14T22:13:20.000000005Z"), "created_at: %s", t);

    char *s = ollama_chunk(OLLAMA_CHAT, "m:latest", t, "h\"i\xc3\xa9!", 5);
    cJSON *j = parse_line(s);
    cJSON *msg = cJSON_GetObjectItem(j, "message");
    CHECK(j && !strcmp(cJSON_GetObjectItem(j, "model")->valuestring, "m:latest") &&
              !strcmp(cJSON_GetObjectItem(j, "created_at")->valuestring, t) &&
              cJSON_IsFalse(cJSON_GetObjectItem(j, "done")),
          "chat chunk: %s", s);
    CHECK(msg && !strcmp(cJSON_GetObjectItem(msg, "role")->valuestring, "assistant") &&
              !strcmp(cJSON_GetObjectItem(msg, "content")->valuestring, "h\"i\xc3\xa9"),
          "chat chunk content is the first 5 bytes: %s", s);
    cJSON_Delete(j);
    free(s);

    ollama_stats st = {.done_reason = "length", .prompt_eval_count = 26, .eval_count = 9, .total_ns = 3000000000LL,
                       .load_ns = 0, .prompt_eval_ns = 1000000, .eval_ns = 2000000000LL};
    s = ollama_final(OLLAMA_GENERATE, "m", t, "whole", 5, &st);
    j = parse_line(s);
    CHECK(j && cJSON_IsTrue(cJSON_GetObjectItem(j, "done")) &&
              !strcmp(cJSON_GetObjectItem(j, "done_reason")->valuestring, "length") &&
              !strcmp(cJSON_GetObjectItem(j, "response")->valuestring, "whole"),
          "generate final: %s", s);
    static const char *const nums[] = {"total_duration", "load_duration", "prompt_eval_count",
                                       "prompt_eval_duration", "eval_count", "eval_duration"};
    static const double want[] = {3e9, 0, 26, 1e6, 9, 2e9};
    for (int i = 0; i < 6; i++) {
        cJSON *v = cJSON_GetObjectItem(j, nums[i]);
        CHECK(cJSON_IsNumber(v) && v->valuedouble == want[i], "%s in %s", nums[i], s);
    }
    /* Integers, not 3e+09: Go's int64 decoding (Ollama clients) refuses exponents. */
    CHECK(strstr(s, "\"total_duration\":3000000000") != NULL, "durations printed as integers: %s", s);
    cJSON_Delete(j);
    free(s);
    ollama_stats ld = {.done_reason = "load"};
    s = ollama_final(OLLAMA_CHAT, "m", t, NULL, 0, &ld);
    j = parse_line(s);
    CHECK(j && !cJSON_GetObjectItem(j, "eval_count") &&
              !strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "message"), "content")->valuestring, ""),
          "load answer: %s", s);
    cJSON_Delete(j);
    free(s);

    api_error e;
    api_fail(&e, 400, "x", "format", "'format' is not supported");
    s = ollama_error_json(&e);
    CHECK(s && !strcmp(s, "{\"error\":\"'format' is not supported\"}"), "error shape: %s", s);
    free(s);

    char ps[16];
    ollama_param_size(494032768ULL, ps);
    CHECK(!strcmp(ps, "494.03M"), "%s", ps);
    ollama_param_size(1543714304ULL, ps);
    CHECK(!strcmp(ps, "1.54B"), "%s", ps);

    ollama_model m = {.name = "tiny:latest", .format = "gguf", .family = "qwen2", .quant = "Q4_K", .size = 12345,
                      .params = 494032768ULL, .modified_s = 1700000000, .n_ctx = 4096, .max_ctx = 32768,
                      .hidden = 896, .vocab = 151936};
    memset(m.digest, 'a', 64);
    m.digest[64] = '\0';
    s = ollama_tags_json(&m);
    j = cJSON_Parse(s);
    cJSON *e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "models"), 0);
    cJSON *d = cJSON_GetObjectItem(e0, "details");
    CHECK(e0 && !strcmp(cJSON_GetObjectItem(e0, "name")->valuestring, "tiny:latest") &&
              cJSON_GetObjectItem(e0, "size")->valuedouble == 12345 &&
              !strcmp(cJSON_GetObjectItem(e0, "modified_at")->valuestring, "2023-11-14T22:13:20.000000000Z") &&
              strlen(cJSON_GetObjectItem(e0, "digest")->valuestring) == 64,
          "tags: %s", s);
    CHECK(d && !strcmp(cJSON_GetObjectItem(d, "format")->valuestring, "gguf") &&
              !strcmp(cJSON_GetObjectItem(d, "quantization_level")->valuestring, "Q4_K") &&
              !strcmp(cJSON_GetObjectItem(d, "parameter_size")->valuestring, "494.03M"),
          "details: %s", s);
    cJSON_Delete(j);
    free(s);
    s = ollama_ps_json(&m);
    j = cJSON_Parse(s);
    e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "models"), 0);
    CHECK(e0 && cJSON_GetObjectItem(e0, "context_length")->valuedouble == 4096 &&
              cJSON_IsString(cJSON_GetObjectItem(e0, "expires_at")),
          "ps: %s", s);
    cJSON_Delete(j);
    free(s);
    s = ollama_show_json(&m);
    j = cJSON_Parse(s);
    cJSON *mi = cJSON_GetObjectItem(j, "model_info");
    CHECK(mi && cJSON_GetObjectItem(mi, "qwen2.context_length")->valuedouble == 32768 &&
              cJSON_IsString(cJSON_GetObjectItem(j, "template")) && cJSON_IsObject(cJSON_GetObjectItem(j, "details")),
          "show: %s", s);
    cJSON_Delete(j);
    free(s);
    s = ollama_version_json();
    CHECK(s && !strcmp(s, "{\"version\":\"" QW_OLLAMA_VERSION "\"}"), "version: %s", s);
    free(s);
}

int main(void) {
    test_refusals();
    test_parse_with_tokenizer();
    test_documents();
    return test_summary();
}
