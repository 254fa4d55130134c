/* test_server.c - the server pieces that need no socket: stop-string
 * holdback (src/server/stopstr.h), request parsing and error mapping, SSE
 * chunk and response documents (src/server/api.h), the stdin line format
 * (src/server/stdinserv.h). The chat-template parsing checks need the
 * tokenizer fixture (tests/fixtures/tokenizer/prepare.sh, which tests/run.sh
 * runs into $BUILD/fixtures/tokenizer) and are skipped with a message
 * without it. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "server/stdinserv.h"
#include "server/stopstr.h"
#include "test.h"

/* Feed pieces through a stop filter; returns everything released
 * (malloc'd) and whether it stopped. */
static char *run_stops(const char *const *stops, int n_stops, const char *const *pieces, int n_pieces, int *hit) {
    qw_stopstr s;
    stopstr_init(&s, stops, n_stops);
    size_t cap = 1024, len = 0;
    char *all = calloc(1, cap);
    for (int i = 0; i < n_pieces; i++) {
        const char *o;
        size_t ol;
        stopstr_feed(&s, pieces[i], strlen(pieces[i]), &o, &ol);
        memcpy(all + len, o, ol);
        len += ol;
        if (s.hit) break;
    }
    if (!s.hit) {
        const char *o;
        size_t ol;
        stopstr_flush(&s, &o, &ol);
        memcpy(all + len, o, ol);
        len += ol;
    }
    all[len] = '\0';
    *hit = s.hit;
    stopstr_free(&s);
    return all;
}

static void test_stopstr(void) {
    const char *stops[] = {"STOP", "\n\n", "é!"};
    int hit;
    char *out;

    /* No stop: everything comes out, in order. */
    const char *p1[] = {"Hello", " wor", "ld"};
    out = run_stops(stops, 3, p1, 3, &hit);
    CHECK(!hit && !strcmp(out, "Hello world"), "got '%s' hit %d", out, hit);
    free(out);

    /* A stop split over pieces: nothing of it leaks. */
    const char *p2[] = {"abc S", "T", "OP and more"};
    out = run_stops(stops, 3, p2, 3, &hit);
    CHECK(hit && !strcmp(out, "abc "), "got '%s' hit %d", out, hit);
    free(out);

    /* A false start is released once it cannot match. */
    const char *p3[] = {"x ST", "ART"};
    out = run_stops(stops, 3, p3, 2, &hit);
    CHECK(!hit && !strcmp(out, "x START"), "got '%s'", out);
    free(out);

    /* Held text at the end of generation is released by flush. */
    const char *p4[] = {"end\n"};
    out = run_stops(stops, 3, p4, 1, &hit);
    CHECK(!hit && !strcmp(out, "end\n"), "got '%s'", out);
    free(out);

    /* Multi-byte stop string. */
    const char *p5[] = {"caf", "é", "! x"};
    out = run_stops(stops, 3, p5, 3, &hit);
    CHECK(hit && !strcmp(out, "caf"), "got '%s'", out);
    free(out);

    /* Stop inside one piece with text before it; the earliest stop wins. */
    const char *p6[] = {"a\n\nbSTOP"};
    out = run_stops(stops, 3, p6, 1, &hit);
    CHECK(hit && !strcmp(out, "a"), "got '%s'", out);
    free(out);

    /* Per-feed release: a piece ending in a stop prefix is held back. */
    qw_stopstr s;
    stopstr_init(&s, stops, 3);
    const char *o;
    size_t ol;
    stopstr_feed(&s, "ok ST", 5, &o, &ol);
    CHECK(ol == 3 && !memcmp(o, "ok ", 3), "released %zu bytes", ol);
    stopstr_feed(&s, "O", 1, &o, &ol);
    CHECK(ol == 0, "released %zu bytes of a possible stop", ol);
    stopstr_feed(&s, "x", 1, &o, &ol);
    CHECK(ol == 4 && !memcmp(o, "STOx", 4), "released '%.*s'", (int)ol, o);
    stopstr_free(&s);

    CHECK(stopstr_partial(stops, 3, "abcST", 5) == 2, "partial");
    CHECK(stopstr_partial(stops, 3, "abc\n", 4) == 1, "partial newline");
    CHECK(stopstr_partial(stops, 3, "abc", 3) == 0, "partial none");
    CHECK(stopstr_partial(NULL, 0, "abc", 3) == 0, "no stops");

    /* No stops at all: pass-through. */
    const char *p7[] = {"a", "b"};
    out = run_stops(NULL, 0, p7, 2, &hit);
    CHECK(!hit && !strcmp(out, "ab"), "got '%s'", out);
    free(out);
}

static void test_utf8(void) {
    CHECK(api_utf8_valid("abc", 3), "ascii");
    CHECK(api_utf8_valid("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80", 14), "multi-byte");
    CHECK(!api_utf8_valid("\xff", 1), "0xff");
    CHECK(!api_utf8_valid("\xc3", 1), "truncated");
    CHECK(!api_utf8_valid("\xc0\xaf", 2), "overlong");
    CHECK(!api_utf8_valid("\xed\xa0\x80", 3), "surrogate");
    CHECK(!api_utf8_valid("\xf4\x90\x80\x80", 4), "> U+10FFFF");
    CHECK(!api_utf8_valid("a\xe4\xb8", 3), "truncated 3-byte");
}

static cJSON *parse_sse(const char *ev) {
    CHECK(!strncmp(ev, "data: ", 6), "SSE event starts with 'data: ': %s", ev);
    size_t l = strlen(ev);
    CHECK(l >= 8 && !strcmp(ev + l - 2, "\n\n"), "SSE event ends with a blank line");
    CHECK(!memchr(ev, '\n', l - 2), "SSE event has a newline inside its JSON");
    return cJSON_Parse(ev + 6);
}

static void test_sse(void) {
    api_meta m = {.id = "chatcmpl-1", .created = 1700000000, .model = "tiny"};
    char *ev = api_sse_chunk(API_CHAT, &m, "assistant", NULL, 0, NULL, NULL);
    cJSON *j = parse_sse(ev);
    CHECK(j != NULL, "role chunk is JSON: %s", ev);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItem(j, "object")->valuestring, "chat.completion.chunk"), "object");
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "delta"), "role")->valuestring, "assistant"), "role");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(ch, "finish_reason")), "finish_reason null");
    cJSON_Delete(j);
    free(ev);

    const char *text = "line1\n\"q\" \xe4\xb8\xad";
    ev = api_sse_chunk(API_CHAT, &m, NULL, text, strlen(text), NULL, NULL);
    j = parse_sse(ev);
    ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "delta"), "content")->valuestring, text),
          "content round-trips: %s", ev);
    cJSON_Delete(j);
    free(ev);

    ev = api_sse_chunk(API_CHAT, &m, NULL, NULL, 0, "length", NULL);
    j = parse_sse(ev);
    ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItem(ch, "finish_reason")->valuestring, "length"), "finish");
    CHECK(cJSON_GetObjectItem(ch, "delta") && !cJSON_GetObjectItem(ch, "delta")->child, "empty delta");
    cJSON_Delete(j);
    free(ev);

    api_usage u = {7, 5, 4, 3, 2};
    ev = api_sse_chunk(API_CHAT, &m, NULL, NULL, 0, NULL, &u);
    j = parse_sse(ev);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "choices")) == 0, "usage chunk has no choices");
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "total_tokens")->valueint == 12, "total");
    cJSON *det = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens_details");
    CHECK(det && cJSON_GetObjectItem(det, "draft_tokens") &&
              cJSON_GetObjectItem(det, "draft_tokens")->valueint == 4 &&
              cJSON_GetObjectItem(det, "accepted_draft_tokens") &&
              cJSON_GetObjectItem(det, "accepted_draft_tokens")->valueint == 3,
          "usage.completion_tokens_details draft counts");
    cJSON *pd = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "prompt_tokens_details");
    CHECK(pd && cJSON_GetObjectItem(pd, "cached_tokens") && cJSON_GetObjectItem(pd, "cached_tokens")->valueint == 2,
          "usage.prompt_tokens_details.cached_tokens");
    cJSON_Delete(j);
    free(ev);

    m.id = "cmpl-1";
    ev = api_sse_chunk(API_COMPLETION, &m, NULL, "hi", 2, NULL, NULL);
    j = parse_sse(ev);
    ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItem(j, "object")->valuestring, "text_completion"), "object");
    CHECK(!strcmp(cJSON_GetObjectItem(ch, "text")->valuestring, "hi"), "text");
    cJSON_Delete(j);
    free(ev);
    CHECK(!strcmp(API_SSE_DONE, "data: [DONE]\n\n"), "done");

    /* The seed's response carries both kinds of field. */
    api_result r = {.text = "4", .text_len = 1, .finish = "stop", .prompt_tokens = 29, .gen_tokens = 8,
                    .prefill_tps = 66.2, .decode_tps = 57.3, .elapsed_s = 0.6084};
    char *doc = api_completion_json(&m, &r);
    j = cJSON_Parse(doc);
    CHECK(j && !strcmp(cJSON_GetObjectItem(j, "text")->valuestring, "4"), "text");
    CHECK(cJSON_GetObjectItem(j, "prompt_tokens")->valueint == 29 && cJSON_GetObjectItem(j, "gen_tokens")->valueint == 8,
          "seed counts");
    CHECK(cJSON_GetObjectItem(j, "elapsed_s")->valuedouble == 0.608, "elapsed rounded to ms");
    CHECK(cJSON_IsNumber(cJSON_GetObjectItem(j, "prefill_tps")) && cJSON_IsNumber(cJSON_GetObjectItem(j, "decode_tps")),
          "tps");
    ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItem(ch, "text")->valuestring, "4") &&
              !strcmp(cJSON_GetObjectItem(ch, "finish_reason")->valuestring, "stop"),
          "choices[0]");
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens")->valueint == 8, "usage");
    cJSON_Delete(j);
    free(doc);
}

static void test_errors(void) {
    api_error e;
    CHECK(api_fail(&e, 400, "invalid_type", "max_tokens", "'%s' must be an integer", "max_tokens") == -1, "ret");
    char *s = api_error_json(&e);
    cJSON *j = cJSON_Parse(s);
    cJSON *er = cJSON_GetObjectItem(j, "error");
    CHECK(er && !strcmp(cJSON_GetObjectItem(er, "message")->valuestring, "'max_tokens' must be an integer"), "%s", s);
    CHECK(!strcmp(cJSON_GetObjectItem(er, "type")->valuestring, "invalid_request_error"), "type");
    CHECK(!strcmp(cJSON_GetObjectItem(er, "param")->valuestring, "max_tokens"), "param");
    CHECK(!strcmp(cJSON_GetObjectItem(er, "code")->valuestring, "invalid_type"), "code");
    cJSON_Delete(j);
    free(s);
    api_fail(&e, 503, NULL, NULL, "busy");
    s = api_error_json(&e);
    j = cJSON_Parse(s);
    er = cJSON_GetObjectItem(j, "error");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(er, "param")) && cJSON_IsNull(cJSON_GetObjectItem(er, "code")), "nulls");
    CHECK(!strcmp(cJSON_GetObjectItem(er, "type")->valuestring, "server_error"), "503 type");
    cJSON_Delete(j);
    free(s);
    /* A message quoting a client's string cut inside a character stays
     * valid UTF-8. */
    api_fail(&e, 400, NULL, "x", "role \"%.2s\"", "a\xc3\xa9");
    s = api_error_json(&e);
    CHECK(api_utf8_valid(s, strlen(s)), "error JSON is not valid UTF-8: %s", s);
    CHECK(strstr(s, "a?") != NULL, "scrubbed: %s", s);
    free(s);
}

/* Parse that must fail with status and param. */
static void bad(api_kind kind, const api_limits *lim, const char *body, int status, const char *param) {
    api_req r;
    api_error e;
    memset(&e, 0, sizeof e);
    int rc = api_parse(kind, body, strlen(body), lim, &r, &e);
    CHECK(rc == -1 && e.status == status && !strcmp(e.param, param ? param : ""),
          "%s -> rc %d status %d param '%s' (%s); want %d '%s'", body, rc, e.status, e.param, e.message, status,
          param ? param : "");
    if (rc == 0) api_req_free(&r);
}

static void test_parse_no_tokenizer(void) {
    api_limits lim = {.tok = NULL, .vocab = 1000, .n_ctx = 64, .sampling = sampling_default(),
                      .completion_max_tokens = 512, .completion_default = 50};
    /* Token-id prompts need no tokenizer. */
    api_req r;
    api_error e;
    const char *b = "{\"prompt\":[1,2,3],\"max_tokens\":7,\"temperature\":0.5,\"seed\":42,\"stop\":[\"x\",\"\"],"
                    "\"user\":\"u\",\"metadata\":{\"a\":1},\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0, "parse: %s", e.message);
    CHECK(r.n_prompt == 3 && r.prompt[2] == 3 && r.max_tokens == 7, "prompt / max_tokens");
    CHECK(r.sampling.temperature == 0.5f && r.sampling.seed == 42 && r.seed_set, "sampling");
    CHECK(r.n_stop == 1 && !strcmp(r.stop[0], "x"), "stop list (empty ignored)");
    CHECK(r.stream && r.include_usage, "stream options");
    api_req_free(&r);
    b = "{\"prompt\":[5]}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0 && r.max_tokens == 50, "default max_tokens 50");
    CHECK(!r.seed_set, "seed_set without a seed");
    CHECK(!r.no_spec, "speculation off without \"speculative\"");
    api_req_free(&r);
    b = "{\"prompt\":[5],\"speculative\":false}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0 && r.no_spec, "\"speculative\": false");
    api_req_free(&r);
    b = "{\"prompt\":[5],\"speculative\":true}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0 && !r.no_spec, "\"speculative\": true");
    api_req_free(&r);
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"speculative\":\"no\"}", 400, "speculative");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"speculative\":0}", 400, "speculative");

    bad(API_COMPLETION, &lim, "{", 400, NULL);
    bad(API_COMPLETION, &lim, "[1]", 400, NULL);
    bad(API_COMPLETION, &lim, "{}", 400, "prompt");
    bad(API_COMPLETION, &lim, "{\"prompt\":5}", 400, "prompt");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1,1000]}", 400, "prompt");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1,-1]}", 400, "prompt");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1.5]}", 400, "prompt");
    bad(API_COMPLETION, &lim, "{\"prompt\":[]}", 400, "prompt");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"max_tokens\":513}", 400, "max_tokens");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"max_tokens\":-1}", 400, "max_tokens");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"max_tokens\":\"5\"}", 400, "max_tokens");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"temperature\":\"hot\"}", 400, "temperature");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"temperature\":3}", 400, "temperature");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"top_p\":1.5}", 400, "top_p");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"top_k\":2.5}", 400, "top_k");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"seed\":\"x\"}", 400, "seed");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"stop\":5}", 400, "stop");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"stop\":[\"a\",1]}", 400, "stop");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"stream\":\"yes\"}", 400, "stream");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"n\":17}", 400, "n");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"n\":0}", 400, "n");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"logprobs\":21}", 400, "logprobs");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"logprobs\":true}", 400, "logprobs");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"echo\":\"yes\"}", 400, "echo");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"n\":2,\"best_of\":3}", 400, "best_of");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"best_of\":3}", 400, "best_of");
    /* suffix = code infill: the prompt must be the code before, a string. */
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"suffix\":\"x\"}", 400, "prompt");
    bad(API_COMPLETION, &lim, "{\"prompt\":\"x\",\"suffix\":3}", 400, "suffix");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"tools\":[{\"type\":\"function\"}]}", 400, "tools");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"tool_choice\":\"auto\"}", 400, "tool_choice");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"logit_bias\":{\"5\":1}}", 400, "logit_bias");
    /* constraints (api_grammar.c): bad shapes and refused schema keywords name the field */
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"response_format\":{\"type\":\"xml\"}}", 400,
        "response_format.type");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"response_format\":\"json\"}", 400, "response_format");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"response_format\":{\"type\":\"json_schema\"}}", 400,
        "response_format.json_schema");
    bad(API_COMPLETION, &lim,
        "{\"prompt\":[1],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
        "{\"type\":\"integer\",\"minimum\":1}}}}",
        400, "response_format.json_schema.schema");
    bad(API_COMPLETION, &lim,
        "{\"prompt\":[1],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"strict\":1,"
        "\"schema\":{}}}}",
        400, "response_format.json_schema.strict");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"grammar\":\"root ::= x\"}", 400, "grammar");
    bad(API_COMPLETION, &lim, "{\"prompt\":[1],\"grammar\":5}", 400, "grammar");
    bad(API_COMPLETION, &lim,
        "{\"prompt\":[1],\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":\"json_object\"}}",
        400, "grammar");
    {
        static const char *const good[] = {
            "{\"prompt\":[1],\"response_format\":{\"type\":\"json_object\"}}",
            "{\"prompt\":[1],\"grammar\":\"root ::= [a-z]+\"}",
            "{\"prompt\":[1],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\","
            "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
            "\"required\":[\"a\"],\"additionalProperties\":false}}}}",
        };
        for (int i = 0; i < 3; i++) {
            api_req rq;
            api_error er;
            int rc = api_parse(API_COMPLETION, good[i], strlen(good[i]), &lim, &rq, &er);
            CHECK(rc == 0 && rq.constraint != NULL, "%s: %s", good[i], rc ? er.message : "no grammar");
            if (rc == 0) api_req_free(&rq);
        }
        const char *text = "{\"prompt\":[1],\"response_format\":{\"type\":\"text\"},\"grammar\":null}";
        api_req rq;
        api_error er;
        int rc = api_parse(API_COMPLETION, text, strlen(text), &lim, &rq, &er);
        CHECK(rc == 0 && rq.constraint == NULL, "text response_format: %s", rc ? er.message : "a grammar");
        if (rc == 0) api_req_free(&rq);
        /* the refusal names the keyword too, not only the field */
        const char *kw = "{\"prompt\":[1],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                         "{\"schema\":{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\","
                         "\"pattern\":\"(?=a)\"}}}}}}";
        rc = api_parse(API_COMPLETION, kw, strlen(kw), &lim, &rq, &er);
        CHECK(rc == -1 && strstr(er.message, "lookaround") && strstr(er.message, "/properties/s"),
              "refused keyword message: %s", er.message);
    }
    /* Prompt too long for the context (64). */
    char big[1024] = "{\"prompt\":[";
    for (int i = 0; i < 64; i++) strcat(big, i ? ",1" : "1");
    strcat(big, "]}");
    bad(API_COMPLETION, &lim, big, 400, "prompt");
    /* Harmless: n 1, logprobs false, null fields. */
    b = "{\"prompt\":[1],\"n\":1,\"logprobs\":false,\"stop\":null,\"temperature\":null,\"tools\":[]}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0, "harmless fields: %s", e.message);
    CHECK(r.n == 1 && !r.logprobs && !r.echo, "n 1, no logprobs, no echo");
    api_req_free(&r);
    /* n, best_of = n, logprobs (int), echo. */
    b = "{\"prompt\":[1],\"n\":3,\"best_of\":3,\"logprobs\":5,\"echo\":true}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0 && r.n == 3 && r.logprobs && r.top_logprobs == 5 &&
              r.echo,
          "n 3, logprobs 5, echo: %s", e.message);
    api_req_free(&r);
    b = "{\"prompt\":[1],\"logprobs\":0}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0 && r.logprobs && r.top_logprobs == 0,
          "logprobs 0: the chosen tokens only");
    api_req_free(&r);

    bad(API_CHAT, &lim, "{}", 400, "messages");
    bad(API_CHAT, &lim, "{\"messages\":{}}", 400, "messages");
    bad(API_CHAT, &lim, "{\"messages\":[]}", 400, "messages");
    bad(API_CHAT, &lim, "{\"messages\":[1]}", 400, "messages[0]");
    bad(API_CHAT, &lim, "{\"messages\":[{\"content\":\"x\"}]}", 400, "messages[0].role");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "messages[0].role");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages[0].content");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\"}]}", 400, "messages[0].content");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
        "messages[0].content");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\"}]}",
        400, "tools[0].function");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"suffix\":\"y\"}", 400, "suffix");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"functions\":[{}]}", 400,
        "functions");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"assistant\",\"reasoning_content\":1}]}", 400,
        "messages[0].reasoning_content");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":{"
        "\"enable_thinking\":\"no\"}}", 400, "chat_template_kwargs.enable_thinking");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":17}", 400, "n");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 400,
        "top_logprobs");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
        "\"top_logprobs\":21}", 400, "top_logprobs");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", 400,
        "logprobs");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", 400, "max_tokens");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":65}", 400,
        "max_completion_tokens");
    bad(API_CHAT, &lim, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":3}", 400,
        "stream_options");

    /* /tokenize and /detokenize bodies. */
    char *text;
    size_t tl;
    CHECK(api_parse_tokenize("{\"content\":\"hi\"}", 16, &text, &tl, &e) == 0 && tl == 2, "tokenize content");
    free(text);
    CHECK(api_parse_tokenize("{\"prompt\":\"hey\"}", 16, &text, &tl, &e) == 0 && tl == 3, "tokenize prompt");
    free(text);
    CHECK(api_parse_tokenize("{}", 2, &text, &tl, &e) == -1 && e.status == 400, "tokenize missing");
    CHECK(api_parse_tokenize("{\"content\":1}", 13, &text, &tl, &e) == -1 && !strcmp(e.param, "content"),
          "tokenize type");
    int32_t *ids;
    int n;
    CHECK(api_parse_detokenize("{\"tokens\":[1,2]}", 16, 1000, &ids, &n, &e) == 0 && n == 2 && ids[1] == 2, "detok");
    free(ids);
    CHECK(api_parse_detokenize("{\"tokens\":[1,1000]}", 19, 1000, &ids, &n, &e) == -1 && !strcmp(e.param, "tokens"),
          "detok range");
    CHECK(api_parse_detokenize("{\"tokens\":\"1\"}", 14, 1000, &ids, &n, &e) == -1, "detok type");
    CHECK(api_parse_detokenize("{\"tokens\":[\"a\"]}", 16, 1000, &ids, &n, &e) == -1, "detok element type");
}

/* 1 if grammar g takes text as a whole answer (bytes, then EOS). */
static int grammar_takes(const qw_grammar *g, const char *text) {
    int32_t eos = 300;
    qw_gvocab *v = gvocab_create_bytes(301, &eos, 1);
    qw_gmatch *m = gmatch_create(g, v);
    int ok = gmatch_accept_bytes(m, text, strlen(text)) && gmatch_is_complete(m);
    gmatch_free(m);
    gvocab_free(v);
    return ok;
}

/* Every combination of tools / tool_choice, response_format and grammar
 * (api.h: api_parse_constraint): one grammar or a 400 naming the field. */
static void test_constraint_combinations(const qw_tok *tok, const api_limits *lim) {
    (void)tok;
    static const char *const TOOLS =
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}]";
    static const char *const SCHEMA =
        "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"r\",\"schema\":{\"type\":"
        "\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"]}}}";
    static const char *const OBJ = "\"response_format\":{\"type\":\"json_object\"}";
    static const char *const GBNF = "\"grammar\":\"root ::= \\\"yes\\\" | \\\"no\\\"\"";
    static const char *const NAMED = "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}";
    static const char *const CALL = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
    static const struct {
        const char *fields[3];
        int status;         /* 0: accepted */
        const char *param;  /* the 400's param, or the constraint's source (NULL: no grammar) */
        const char *takes;  /* accepted: a text the grammar takes ... */
        const char *refuses;/* ... and one it refuses */
    } cases[] = {
        {{SCHEMA, GBNF, NULL}, 400, "grammar", NULL, NULL},
        {{OBJ, GBNF, NULL}, 400, "grammar", NULL, NULL},
        {{TOOLS, GBNF, NULL}, 400, "grammar", NULL, NULL},                               /* tool_choice auto */
        {{TOOLS, GBNF, "\"tool_choice\":\"required\""}, 400, "grammar", NULL, NULL},
        {{TOOLS, GBNF, "\"tool_choice\":\"none\""}, 0, "grammar", "yes", CALL},          /* no tools: the grammar */
        {{TOOLS, SCHEMA, "\"tool_choice\":\"required\""}, 0, "tool_choice", CALL, "{\"ok\": true}"},
        {{TOOLS, OBJ, NAMED}, 0, "tool_choice", CALL, "{}"},
        {{TOOLS, SCHEMA, NULL}, 0, "response_format", CALL, "hello"},                   /* auto: a call ... */
        {{TOOLS, SCHEMA, "\"tool_choice\":\"auto\""}, 0, "response_format", "{\"ok\": false}", "{\"a\": 1}"}, /* ... or the format */
        {{TOOLS, SCHEMA, "\"tool_choice\":\"none\""}, 0, "response_format", "{\"ok\": true}", CALL},
        {{TOOLS, "\"response_format\":{\"type\":\"text\"}", NULL}, 0, NULL, NULL, NULL}, /* auto, free text */
        {{TOOLS, NULL, NULL}, 0, NULL, NULL, NULL},
        {{SCHEMA, NULL, NULL}, 0, "response_format", "{\"ok\": true}", CALL},
        {{GBNF, NULL, NULL}, 0, "grammar", "no", "maybe"},
        /* a forced call still checks the format it does not use */
        {{TOOLS, "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"integer\","
                 "\"minimum\":1}}}",
          "\"tool_choice\":\"required\""},
         400, "response_format.json_schema.schema", NULL, NULL},
        {{TOOLS, "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"integer\","
                 "\"minimum\":1}}}",
          NULL},
         400, "response_format.json_schema.schema", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[2048];
        int n = snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]");
        for (int k = 0; k < 3; k++)
            if (cases[i].fields[k]) n += snprintf(body + n, sizeof body - (size_t)n, ",%s", cases[i].fields[k]);
        snprintf(body + n, sizeof body - (size_t)n, "}");
        api_req r;
        api_error e = {0};
        int rc = api_parse(API_CHAT, body, strlen(body), lim, &r, &e);
        if (cases[i].status) {
            CHECK(rc == -1 && e.status == cases[i].status && !strcmp(e.param, cases[i].param),
                  "case %zu: want %d %s, got rc %d %d %s: %s\n  %s", i, cases[i].status, cases[i].param, rc, e.status,
                  e.param, e.message, body);
            continue;
        }
        CHECK(rc == 0, "case %zu: %s\n  %s", i, e.message, body);
        if (rc != 0) continue;
        if (!cases[i].param) {
            CHECK(!r.constraint, "case %zu: a grammar from %s", i, r.constraint_param);
        } else {
            CHECK(r.constraint && r.constraint_param && !strcmp(r.constraint_param, cases[i].param),
                  "case %zu: constraint from %s, want %s", i, r.constraint_param ? r.constraint_param : "(none)",
                  cases[i].param);
            if (r.constraint) {
                CHECK(grammar_takes(r.constraint, cases[i].takes), "case %zu: refuses %s", i, cases[i].takes);
                CHECK(!grammar_takes(r.constraint, cases[i].refuses), "case %zu: takes %s", i, cases[i].refuses);
            }
        }
        api_req_free(&r);
    }
}

static void test_parse_chat(void) {
    const char *build = getenv("BUILD");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizer/qwen2.5", build && build[0] ? build : "build");
    qw_tok *tok;
    qw_err err;
    if (tok_load(&tok, dir, &err) != 0) {
        printf("SKIP chat parsing checks: no tokenizer fixture at %s (run tests/fixtures/tokenizer/prepare.sh)\n", dir);
        return;
    }
    api_limits lim = {.tok = tok, .vocab = 151936, .n_ctx = 64, .sampling = sampling_default(),
                      .completion_max_tokens = 512, .completion_default = 50};
    api_req r;
    api_error e;
    const char *b = "{\"model\":\"whatever\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3}";
    CHECK(api_parse(API_CHAT, b, strlen(b), &lim, &r, &e) == 0, "chat: %s", e.message);
    /* The same ids as chat_encode of the default system + user + gen prompt. */
    qw_chat_msg m[1] = {{.role = "user", .content = "hi"}};
    int32_t *ids;
    size_t n;
    chat_encode(tok, m, 1, 1, &ids, &n, &err);
    CHECK(r.n_prompt == (int)n && !memcmp(r.prompt, ids, n * sizeof *ids), "chat prompt ids");
    CHECK(r.max_tokens == 3, "max_tokens");
    api_req_free(&r);
    /* Text parts join; developer = system. */
    b = "{\"messages\":[{\"role\":\"developer\",\"content\":\"S\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
        "\"text\":\"h\"},{\"type\":\"text\",\"text\":\"i\"}]}]}";
    CHECK(api_parse(API_CHAT, b, strlen(b), &lim, &r, &e) == 0, "parts: %s", e.message);
    qw_chat_msg m2[2] = {{.role = "system", .content = "S"}, {.role = "user", .content = "hi"}};
    int32_t *ids2;
    size_t n2;
    chat_encode(tok, m2, 2, 1, &ids2, &n2, &err);
    CHECK(r.n_prompt == (int)n2 && !memcmp(r.prompt, ids2, n2 * sizeof *ids2), "parts prompt ids");
    CHECK(r.max_tokens == 64 - r.n_prompt, "chat default max_tokens fills the context: %d", r.max_tokens);
    api_req_free(&r);
    free(ids2);
    /* The seed API: prompt through the template with "system"; raw not. */
    b = "{\"prompt\":\"hi\"}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0, "seed: %s", e.message);
    CHECK(r.n_prompt == (int)n && !memcmp(r.prompt, ids, n * sizeof *ids), "seed prompt = chat template");
    api_req_free(&r);
    b = "{\"prompt\":\"hi\",\"raw\":true}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0, "raw: %s", e.message);
    CHECK(r.n_prompt == 1, "raw prompt 'hi' is one token (%d)", r.n_prompt);
    api_req_free(&r);
    bad(API_COMPLETION, &lim, "{\"prompt\":\"hi\",\"raw\":1}", 400, "raw");
    bad(API_COMPLETION, &lim, "{\"prompt\":\"hi\",\"system\":5}", 400, "system");
    /* Too long for the context of 64 tokens. */
    char big[2048];
    snprintf(big, sizeof big, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}",
             "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
             "seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three twenty-four twenty-five "
             "and again one two three four five six seven eight nine ten");
    bad(API_CHAT, &lim, big, 400, "messages");
    /* Tools: the tools array goes to the template as sent; a forced call
     * carries its grammar; a tool result and an assistant call render. */
    lim.n_ctx = 4096;
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":\"assistant\",\"content\":null,"
        "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1.50}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"ok\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"a\":{\"type\":\"number\",\"default\":1.0}}}}}],\"tool_choice\":\"required\"}";
    CHECK(api_parse(API_CHAT, b, strlen(b), &lim, &r, &e) == 0, "tools: %s", e.message);
    CHECK(r.tools_mode == 2 && r.tools_parallel == 1 && r.constraint && r.constraint_param &&
              !strcmp(r.constraint_param, "tool_choice"),
          "forced: %s", r.constraint_param ? r.constraint_param : "(none)");
    char *text = NULL;
    size_t tl;
    tok_decode(tok, r.prompt, (size_t)r.n_prompt, 0, &text, &tl, &err);
    CHECK(text && strstr(text, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
                                "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"number\", \"default\": 1.0}}}}}\n</tools>") &&
              strstr(text, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1.5}}\n</tool_call>"
                           "<|im_end|>\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n"),
          "tools prompt: %s", text);
    free(text);
    api_req_free(&r);
    test_constraint_combinations(tok, &lim);
    /* A model whose template qwenc does not render: 400, and raw still works. */
    tok_set_chat_family(tok, CHAT_UNKNOWN);
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    CHECK(api_parse(API_CHAT, b, strlen(b), &lim, &r, &e) == -1 && e.status == 400 &&
              !strcmp(e.code, "unsupported_chat_template") && strstr(e.message, "not one qwenc knows"),
          "unknown template: %d %s", e.status, e.message);
    b = "{\"prompt\":\"hi\",\"raw\":true}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r, &e) == 0, "raw with an unknown template: %s", e.message);
    api_req_free(&r);
    tok_set_chat_family(tok, CHAT_QWEN25);
    /* Infill: /infill and suffix give the same FIM prompt. */
    b = "{\"input_prefix\":\"def f(x):\\n    \",\"input_suffix\":\"\\n    return y\",\"n_predict\":7}";
    api_req r2;
    CHECK(api_parse(API_INFILL, b, strlen(b), &lim, &r, &e) == 0 && r.max_tokens == 7, "infill: %s", e.message);
    int has_sep = 0;
    for (int k = 0; k < r.n_stop_ids; k++) has_sep |= r.stop_ids[k] == tok_token_id(tok, "<|file_sep|>");
    CHECK(r.n_stop_ids == 8 && has_sep, "infill ends at the FIM tokens: %d ids", r.n_stop_ids);
    b = "{\"prompt\":\"def f(x):\\n    \",\"suffix\":\"\\n    return y\"}";
    CHECK(api_parse(API_COMPLETION, b, strlen(b), &lim, &r2, &e) == 0 && r2.n_stop_ids == 8, "suffix: %s", e.message);
    CHECK(r.n_prompt == r2.n_prompt && !memcmp(r.prompt, r2.prompt, (size_t)r.n_prompt * sizeof *r.prompt) &&
              r.prompt[0] == tok_token_id(tok, "<|fim_prefix|>"),
          "infill == suffix prompt");
    api_req_free(&r);
    api_req_free(&r2);
    b = "{\"input_prefix\":\"x\"}";
    CHECK(api_parse(API_INFILL, b, strlen(b), &lim, &r, &e) == 0 && r.max_tokens == API_INFILL_DEFAULT, "infill default");
    api_req_free(&r);
    b = "{\"input_prefix\":\"x\",\"stream\":true}";
    CHECK(api_parse(API_INFILL, b, strlen(b), &lim, &r, &e) == 0 && r.stream, "infill streams: %s", e.message);
    api_req_free(&r);
    bad(API_INFILL, &lim, "{\"input_prefix\":\"x\",\"stream\":\"yes\"}", 400, "stream");
    bad(API_INFILL, &lim, "{\"input_extra\":[{\"text\":2}]}", 400, "input_extra[0].text");
    free(ids);
    tok_free(tok);
}

static void test_stdin_line(void) {
    int32_t *ids;
    int n, mt;
    char msg[256];
    const char *l = "151644 8948 198|20";
    CHECK(stdin_parse_line(l, strlen(l), 151936, 4096, &ids, &n, &mt, msg, sizeof msg) == 0, "%s", msg);
    CHECK(n == 3 && ids[0] == 151644 && ids[2] == 198 && mt == 20, "parsed");
    free(ids);
    l = "  5   6 | 0 ";
    CHECK(stdin_parse_line(l, strlen(l), 151936, 4096, &ids, &n, &mt, msg, sizeof msg) == 0 && n == 2 && mt == 0,
          "spaces: %s", msg);
    free(ids);
    const char *badl[] = {"1 2 3", "|5", "1 2|", "1 x|5", "1 2|x", "1|2|3", "151936|5", "1|-1", "1|5000", "-1|3"};
    for (size_t i = 0; i < sizeof badl / sizeof badl[0]; i++) {
        msg[0] = '\0';
        int rc = stdin_parse_line(badl[i], strlen(badl[i]), 151936, 4096, &ids, &n, &mt, msg, sizeof msg);
        CHECK(rc == -1 && msg[0] && !ids, "'%s' accepted", badl[i]);
    }
}

int main(void) {
    test_stopstr();
    test_utf8();
    test_sse();
    test_errors();
    test_parse_no_tokenizer();
    test_parse_chat();
    test_stdin_line();
    return test_summary();
}
