/* test_tools.c - OpenAI function-calling fields and documents
 * (src/server/tools.h): what is accepted, what is a 400 naming the field,
 * and the shapes that go back to clients. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "server/toolout.h"
#include "server/tools.h"
#include "base/strbuf.h"
#include "test.h"

#define TOOL_A "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"t\":{\"type\":\"number\",\"default\":1.50}}}}}"
#define TOOL_B "{\"type\":\"function\",\"function\":{\"name\":\"calc-2\",\"description\":\"d\"}}"

static int parse(const char *body, api_tools *t, api_error *e) {
    cJSON *o = cJSON_Parse(body);
    if (!o) return -2;
    int rc = tools_parse(o, body, strlen(body), t, e);
    cJSON_Delete(o);
    return rc;
}

static void expect_400(const char *body, const char *param, const char *msg_part) {
    api_tools t;
    api_error e = {0};
    int rc = parse(body, &t, &e);
    CHECK(rc == -1 && e.status == 400 && !strcmp(e.param, param) && strstr(e.message, msg_part),
          "%s: rc %d status %d param '%s' msg '%s'", body, rc, e.status, e.param, e.message);
}

/* Force: compile tools_gbnf's grammar for body and run texts through it
 * byte by byte (a byte vocabulary): want[i] 1 = accepted and complete. */
static void check_forced(const char *body, const char *const *texts, const int *want, int n) {
    api_tools t;
    api_error e = {0};
    cJSON *o = cJSON_Parse(body);
    CHECK(o && tools_parse(o, body, strlen(body), &t, &e) == 0, "parse %s: %s", body, e.message);
    char *gbnf = NULL;
    CHECK(tools_gbnf(o, &t, NULL, NULL, &gbnf, &e) == 0, "gbnf: %s", e.message);
    qw_grammar *g = NULL;
    qw_err err = {{0}};
    if (gbnf) CHECK(grammar_compile_gbnf(&g, gbnf, strlen(gbnf), "root", &err) == 0, "compile: %s\n%s", err.msg, gbnf);
    int32_t eos = 256;
    qw_gvocab *v = gvocab_create_bytes(257, &eos, 1);
    for (int i = 0; g && v && i < n; i++) {
        qw_gmatch *m = gmatch_create(g, v);
        int ok = gmatch_accept_bytes(m, texts[i], strlen(texts[i])) == 1 && gmatch_is_complete(m);
        CHECK(ok == want[i], "%s\n  text %s: %s, want %s", body, texts[i], ok ? "accepted" : "rejected",
              want[i] ? "accepted" : "rejected");
        gmatch_free(m);
    }
    gvocab_free(v);
    grammar_release(g);
    free(gbnf);
    cJSON_Delete(o);
}

#define CALL_W(args) "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " args "}\n</tool_call>"
#define CALL_B(args) "<tool_call>\n{\"name\": \"calc-2\", \"arguments\": " args "}\n</tool_call>"

static void test_forcing(void) {
    const char *texts[] = {
        CALL_W("{\"t\": 1.5}"),                      /* 0 the template's shape */
        CALL_W("{}"),                                /* 1 t optional */
        CALL_W("{\"t\": \"x\"}"),                    /* 2 t must be a number */
        CALL_B("{\"anything\": [1, {\"k\": null}]}"), /* 3 no parameters: any object */
        CALL_B("[1]"),                               /* 4 not an object */
        CALL_W("{}") "\n" CALL_B("{}"),              /* 5 two calls */
        "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>", /* 6 unknown function */
        "Sure! " CALL_W("{}"),                       /* 7 text before */
        CALL_W("{}") "\n",                           /* 8 trailing text */
    };
    const char *tools = "\"tools\":[" TOOL_A "," TOOL_B "]";
    char body[2048];
    snprintf(body, sizeof body, "{%s,\"tool_choice\":\"required\"}", tools);
    check_forced(body, texts, (const int[]){1, 1, 0, 1, 0, 1, 0, 0, 0}, 9);
    snprintf(body, sizeof body, "{%s,\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", tools);
    check_forced(body, texts, (const int[]){1, 1, 0, 1, 0, 0, 0, 0, 0}, 9);
    snprintf(body, sizeof body, "{%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"calc-2\"}}}", tools);
    check_forced(body, texts, (const int[]){0, 0, 0, 1, 0, 0, 0, 0, 0}, 9);
    /* A required property. */
    const char *req = "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
                      "\"object\",\"properties\":{\"location\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"c\",\"f\"]}},"
                      "\"required\":[\"location\"]}}}],\"tool_choice\":\"required\"}";
    const char *rt[] = {CALL_W("{\"location\": \"Paris\", \"unit\": \"c\"}"), CALL_W("{\"unit\": \"c\"}"),
                        CALL_W("{\"location\": \"Paris\", \"unit\": \"k\"}"), CALL_W("{\"location\": \"\xc3\xa9\"}")};
    check_forced(req, rt, (const int[]){1, 0, 0, 1}, 4);
    /* A schema keyword the grammar engine refuses: 400 naming the tool. */
    const char *bad = "{\"tools\":[" TOOL_B ",{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                      "{\"type\":\"object\",\"patternProperties\":{\"a\":{}}}}}],\"tool_choice\":\"required\"}";
    cJSON *o = cJSON_Parse(bad);
    api_tools t;
    api_error e = {0};
    char *gbnf = NULL;
    CHECK(tools_parse(o, bad, strlen(bad), &t, &e) == 0, "parse");
    CHECK(tools_gbnf(o, &t, NULL, NULL, &gbnf, &e) == -1 && !gbnf && e.status == 400 &&
              !strcmp(e.param, "tools[1].function.parameters") && strstr(e.message, "patternProperties"),
          "unsupported schema: %d %s %s", e.status, e.param, e.message);
    cJSON_Delete(o);
}

/* Stream text through a toolout one byte at a time; collect content and,
 * accumulating delta.tool_calls as OpenAI's clients do (by index: id, type
 * and name from the first delta, arguments concatenated), "index:id:name:
 * args|" of every call; *pieces counts the argument deltas, and a first
 * delta without id, type and name (or with arguments other than "") or a
 * later one with them counts as a shape error in *bad. Returns the stop
 * flag seen. */
static int g_pieces, g_bad;
static int stream_collect(const api_tools *t, const char *text, char *content, char *calls, const char **finish) {
    api_toolout *o = toolout_new(t, "chatcmpl-s1", 0);
    api_meta m = {.id = "chatcmpl-s1", .created = 1, .model = "m"};
    strbuf all = {0};
    int stop = 0;
    size_t n = strlen(text), i;
    for (i = 0; i < n && !stop; i++) {
        char *ev = toolout_sse_piece(o, &m, text + i, 1, &stop);
        sb_str(&all, ev);
        free(ev);
    }
    char *ev = toolout_sse_flush(o, &m);
    sb_str(&all, ev);
    free(ev);
    *finish = toolout_finish(o, "stop");
    content[0] = calls[0] = 0;
    char ids[8][64] = {{0}}, names[8][64] = {{0}}, args[8][256] = {{0}};
    int n_calls = 0;
    g_pieces = g_bad = 0;
    for (char *d = all.p; d && (d = strstr(d, "data: ")); d += 6) {
        char *end = strstr(d, "\n\n");
        *end = 0;
        cJSON *j = cJSON_Parse(d + 6);
        *end = '\n';
        cJSON *delta = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "delta");
        cJSON *c = cJSON_GetObjectItem(delta, "content");
        if (cJSON_IsString(c)) strcat(content, c->valuestring);
        cJSON *tc;
        cJSON_ArrayForEach(tc, cJSON_GetObjectItem(delta, "tool_calls")) {
            cJSON *f = cJSON_GetObjectItem(tc, "function");
            int k = cJSON_GetObjectItem(tc, "index")->valueint;
            cJSON *id = cJSON_GetObjectItem(tc, "id"), *nm = cJSON_GetObjectItem(f, "name");
            const char *a = cJSON_GetObjectItem(f, "arguments")->valuestring;
            if (k < 0 || k >= 8 || k > n_calls) {
                g_bad = 1;
                continue;
            }
            if (k == n_calls) { /* the first delta of a call */
                if (!cJSON_IsString(id) || !cJSON_IsString(nm) || !cJSON_GetObjectItem(tc, "type")) {
                    g_bad = 1;
                    continue;
                }
                snprintf(ids[k], sizeof ids[k], "%s", id->valuestring);
                snprintf(names[k], sizeof names[k], "%s", nm->valuestring);
                n_calls++;
            } else if (id || nm) {
                g_bad = 1;
            }
            if (a[0]) g_pieces++;
            strcat(args[k], a);
        }
        cJSON_Delete(j);
    }
    for (int k = 0; k < n_calls; k++) sprintf(calls + strlen(calls), "%d:%s:%s:%s|", k, ids[k], names[k], args[k]);
    free(all.p);
    toolout_free(o);
    return stop;
}

static void test_toolout(void) {
    api_tools t = {.mode = TOOLS_AUTO, .n = 2, .parallel = 1};
    const char *text = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                       "</tool_call>\n<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"1+1\"}}\n</tool_call>";
    api_meta m = {.id = "chatcmpl-x9", .created = 1, .model = "m"};
    api_result r = {.text = text, .text_len = strlen(text), .finish = "stop", .prompt_tokens = 5, .gen_tokens = 9};
    api_toolout *o = toolout_new(&t, m.id, 0);
    char *doc = toolout_chat_json(o, &m, &r);
    toolout_free(o);
    cJSON *j = cJSON_Parse(doc);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    cJSON *msg = cJSON_GetObjectItem(ch, "message");
    CHECK(!strcmp(cJSON_GetObjectItem(ch, "finish_reason")->valuestring, "tool_calls"), "finish %s", doc);
    CHECK(!strcmp(cJSON_GetObjectItem(msg, "content")->valuestring, "Checking."), "content %s", doc);
    cJSON *calls = cJSON_GetObjectItem(msg, "tool_calls");
    CHECK(cJSON_GetArraySize(calls) == 2, "2 calls: %s", doc);
    cJSON *f1 = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 1), "function");
    CHECK(f1 && !strcmp(cJSON_GetObjectItem(f1, "arguments")->valuestring, "{\"expr\": \"1+1\"}") &&
              !strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 1), "id")->valuestring, "call_x9_1"),
          "call 1: %s", doc);
    CHECK(cJSON_GetObjectItem(j, "usage") && cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "prompt_tokens")->valueint == 5,
          "usage kept");
    cJSON_Delete(j);
    free(doc);
    /* A call alone: content null. No call: the text unchanged, finish kept. */
    const char *only = "{\"name\": \"calc\", \"arguments\": {}}";
    r.text = only, r.text_len = strlen(only);
    o = toolout_new(&t, m.id, 0);
    doc = toolout_chat_json(o, &m, &r);
    toolout_free(o);
    CHECK(strstr(doc, "\"content\":null") && strstr(doc, "\"tool_calls\":[{\"id\":\"call_x9_0\""), "bare call: %s", doc);
    free(doc);
    r.text = "Hello\n", r.text_len = 6, r.finish = "length";
    o = toolout_new(&t, m.id, 0);
    doc = toolout_chat_json(o, &m, &r);
    toolout_free(o);
    CHECK(strstr(doc, "\"content\":\"Hello\\n\"") && !strstr(doc, "tool_calls") && strstr(doc, "\"finish_reason\":\"length\""),
          "no call: %s", doc);
    free(doc);
    /* Streamed byte by byte: the same content and calls. */
    char content[512], cs[1024];
    const char *fin;
    CHECK(stream_collect(&t, text, content, cs, &fin) == 0, "no stop with parallel calls");
    CHECK(!strcmp(content, "Checking.") && !strcmp(fin, "tool_calls") &&
              !strcmp(cs, "0:call_s1_0:get_weather:{\"city\": \"Paris\"}|1:call_s1_1:calc:{\"expr\": \"1+1\"}|"),
          "stream: '%s' '%s' %s", content, cs, fin);
    /* OpenAI's shape: name first (arguments ""), then the arguments in
     * pieces as they came (byte by byte here: many) */
    CHECK(!g_bad && g_pieces > 10, "stream shape: bad %d, %d argument pieces", g_bad, g_pieces);
    t.parallel = 0;
    CHECK(stream_collect(&t, text, content, cs, &fin) == 1 && !strcmp(cs, "0:call_s1_0:get_weather:{\"city\": \"Paris\"}|"),
          "parallel false: stop after one: %s", cs);
    t.parallel = 1;
    stream_collect(&t, "Just text, no <tools>.", content, cs, &fin);
    CHECK(!strcmp(content, "Just text, no <tools>.") && !cs[0] && !strcmp(fin, "stop"), "plain: '%s'", content);
}

int main(void) {
    test_forcing();
    test_toolout();
    api_tools t;
    api_error e = {0};
    /* No tools: off. */
    CHECK(parse("{}", &t, &e) == 0 && t.mode == TOOLS_OFF && t.parallel == 1 && !t.json, "no tools");
    CHECK(parse("{\"tools\":[],\"tool_choice\":\"auto\"}", &t, &e) == 0 && t.mode == TOOLS_OFF, "empty tools");
    CHECK(parse("{\"tools\":null}", &t, &e) == 0 && t.mode == TOOLS_OFF, "null tools");
    /* auto by default; the span is the text as sent (1.50 kept for tojson). */
    const char *b = "{\"tools\": [" TOOL_A "," TOOL_B "] ,\"x\":1}";
    CHECK(parse(b, &t, &e) == 0 && t.mode == TOOLS_AUTO && t.n == 2, "auto: %s", e.message);
    CHECK(t.json && t.json_len == strlen("[" TOOL_A "," TOOL_B "]") && !memcmp(t.json, "[" TOOL_A, strlen(TOOL_A) + 1),
          "tools span");
    CHECK(parse("{\"tools\":[" TOOL_A "],\"tool_choice\":\"none\"}", &t, &e) == 0 && t.mode == TOOLS_OFF, "none");
    CHECK(parse("{\"tools\":[" TOOL_A "],\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", &t, &e) == 0 &&
              t.mode == TOOLS_REQUIRED && t.parallel == 0, "required");
    CHECK(parse("{\"tools\":[" TOOL_A "," TOOL_B "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"calc-2\"}}}",
                &t, &e) == 0 && t.mode == TOOLS_NAMED && !strcmp(t.named, "calc-2"), "named");
    /* 400s naming the field. */
    expect_400("{\"tools\":{}}", "tools", "must be a list");
    expect_400("{\"tools\":[1]}", "tools[0]", "must be an object");
    expect_400("{\"tools\":[{\"type\":\"code_interpreter\"}]}", "tools[0].type", "\"function\"");
    expect_400("{\"tools\":[{\"type\":\"function\"}]}", "tools[0].function", "must be an object");
    expect_400("{\"tools\":[{\"type\":\"function\",\"function\":{}}]}", "tools[0].function.name", "must be a string");
    expect_400("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}", "tools[0].function.name", "1 to 64");
    expect_400("{\"tools\":[" TOOL_B "," TOOL_B "]}", "tools[1].function.name", "defined twice");
    expect_400("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]}",
               "tools[0].function.parameters", "JSON Schema object");
    expect_400("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":3}}]}",
               "tools[0].function.description", "string");
    expect_400("{\"tool_choice\":\"required\"}", "tool_choice", "no 'tools'");
    expect_400("{\"tools\":[" TOOL_A "],\"tool_choice\":\"always\"}", "tool_choice", "expected none, auto");
    expect_400("{\"tools\":[" TOOL_A "],\"tool_choice\":{\"type\":\"function\"}}", "tool_choice", "must be none");
    expect_400("{\"tools\":[" TOOL_A "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}",
               "tool_choice.function.name", "not one of the 'tools'");
    expect_400("{\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}", "tool_choice.function.name",
               "not one of");
    expect_400("{\"parallel_tool_calls\":1}", "parallel_tool_calls", "boolean");
    expect_400("{\"functions\":[]}", "functions", "legacy");
    expect_400("{\"function_call\":\"auto\"}", "function_call", "legacy");

    /* Assistant messages' tool_calls. */
    cJSON *m = cJSON_Parse("{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                           "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1.50}\"}},{\"type\":\"function\","
                           "\"function\":{\"name\":\"g\"}}]}");
    qw_tool_call *calls;
    size_t n;
    CHECK(tools_message_calls(m, 3, &calls, &n, &e) == 0 && n == 2, "calls: %s", e.message);
    if (n == 2) {
        CHECK(!strcmp(calls[0].name, "f") && !strcmp(calls[0].arguments, "{\"a\": 1.50}"), "call 0");
        CHECK(!strcmp(calls[1].name, "g") && !strcmp(calls[1].arguments, "{}"), "call 1: no arguments -> {}");
    }
    free(calls);
    cJSON_Delete(m);
    static const struct { const char *msg, *param, *part; } bad[] = {
        {"{\"role\":\"user\",\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}", "messages[2].tool_calls", "assistant"},
        {"{\"role\":\"assistant\",\"tool_calls\":{}}", "messages[2].tool_calls", "must be a list"},
        {"{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}", "messages[2].tool_calls[0]",
         "name"},
        {"{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{oops\"}}]}",
         "messages[2].tool_calls[0]", "not valid JSON"},
        {"{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{}}}]}",
         "messages[2].tool_calls[0]", "string holding JSON"},
        {"{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"x\",\"function\":{\"name\":\"f\"}}]}",
         "messages[2].tool_calls[0]", "\"function\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        m = cJSON_Parse(bad[i].msg);
        calls = (qw_tool_call *)1;
        int rc = tools_message_calls(m, 2, &calls, &n, &e);
        CHECK(rc == -1 && !calls && e.status == 400 && !strcmp(e.param, bad[i].param) && strstr(e.message, bad[i].part),
              "bad call %zu: rc %d param '%s' msg '%s'", i, rc, e.param, e.message);
        cJSON_Delete(m);
    }
    m = cJSON_Parse("{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":[]}");
    CHECK(tools_message_calls(m, 0, &calls, &n, &e) == 0 && n == 0 && !calls, "empty tool_calls");
    cJSON_Delete(m);

    /* Ids and the response shape. */
    char id[48];
    tools_call_id(id, "chatcmpl-abc123", 2);
    CHECK(!strcmp(id, "call_abc123_2"), "id %s", id);
    api_tool_call c[2] = {{"", "f", "{\"a\": 1}"}, {"", "g", "{}"}};
    tools_call_id(c[0].id, "chatcmpl-x", 0);
    tools_call_id(c[1].id, "chatcmpl-x", 1);
    cJSON *arr = tools_calls_json(c, 2, 0, 0);
    char *s = cJSON_PrintUnformatted(arr);
    CHECK(!strcmp(s, "[{\"id\":\"call_x_0\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}},"
                     "{\"id\":\"call_x_1\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]"),
          "calls json %s", s);
    free(s);
    cJSON_Delete(arr);
    arr = tools_calls_json(c + 1, 1, 1, 1);
    s = cJSON_PrintUnformatted(arr);
    CHECK(strstr(s, "\"index\":1") && strstr(s, "call_x_1"), "delta json %s", s);
    free(s);
    cJSON_Delete(arr);
    return test_summary();
}
