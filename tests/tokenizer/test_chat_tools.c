/* test_chat_tools.c - chat templates with tools, the tojson filter, and the
 * recognition of a model's template, against transformers.
 *
 * Fixtures (tools/make_chat_corpus.py, decompressed by
 * tests/fixtures/tokenizer/prepare.sh like test_tokenizer's):
 *   corpus_tools.jsonl  conversations with tools, tool calls (parallel,
 *                       with/without content, with/without the "function"
 *                       wrapper) and tool results rendered by
 *                       apply_chat_template(messages, tools=...) under the
 *                       Qwen2.5 and the Qwen2.5-Coder-1.5B template: the
 *                       render and the ids must be identical;
 *   corpus_tojson.jsonl JSON texts and Python's json.dumps(json.loads(s),
 *                       ensure_ascii=False): tojson_dumps must agree byte
 *                       for byte.
 * Qwen3's template is in the corpus too (its own tokenizer; reasoning,
 * multi-step tool turns, enable_thinking). Also: template recognition
 * (folder, GGUF, chat_template.jinja, unknown, none, the real GGUF files when present), OpenAI-style
 * string arguments, and bad input rejected with a message. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "test_file.h"
#include "tokenizer/tojson.h"
#include "tokenizer/tokenizer.h"

static char g_fix[1024];

/* ---------------------------------------------------------------- tojson */

static void check_tojson_corpus(void) {
    char path[1200];
    snprintf(path, sizeof path, "%s/corpus_tojson.jsonl", g_fix);
    char *buf = read_all(path, NULL);
    CHECK(buf != NULL, "cannot read %s", path);
    if (!buf) return;
    int n = 0, bad = 0;
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *j = cJSON_Parse(line);
        if (j) {
            const char *in = cJSON_GetObjectItem(j, "in")->valuestring;
            const char *want = cJSON_GetObjectItem(j, "out")->valuestring;
            char *out = NULL;
            size_t ol;
            qw_err err = {{0}};
            if (tojson_dumps(in, strlen(in), &out, &ol, &err) || ol != strlen(want) || memcmp(out, want, ol)) {
                if (bad++ < 5) fprintf(stderr, "FAIL tojson %s\n  got  %s\n  want %s\n  (%s)\n", in, out, want, err.msg);
            }
            free(out);
            cJSON_Delete(j);
            n++;
        }
        if (!nl) break;
        line = nl + 1;
    }
    free(buf);
    printf("tojson: %d cases, %d mismatches\n", n, bad);
    CHECK(n >= 300, "tojson corpus has only %d cases", n);
    CHECK(bad == 0, "tojson: %d outputs differ from Python's json.dumps", bad);
}

static void check_tojson_errors(void) {
    static const char *bad[] = {
        "", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "01", "1.", ".5", "-", "1e", "+1", "tru", "nul", "NaN",
        "Infinity", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\x\"", "\"a\nb\"", "\"\xff\"",
        "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "1 2", "{} x", "\"abc", "[1 2]", "{1: 2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *out = NULL;
        qw_err err = {{0}};
        int rc = tojson_dumps(bad[i], strlen(bad[i]), &out, NULL, &err);
        CHECK(rc == -1 && out == NULL && strstr(err.msg, "tojson: "), "bad JSON accepted: %s", bad[i]);
    }
    /* Nesting: TOJSON_MAX_DEPTH arrays are fine, one more is refused. */
    char deep[2 * (TOJSON_MAX_DEPTH + 2) + 1];
    for (int d = TOJSON_MAX_DEPTH; d <= TOJSON_MAX_DEPTH + 1; d++) {
        int k = 0;
        for (int i = 0; i <= d; i++) deep[k++] = '[';
        for (int i = 0; i <= d; i++) deep[k++] = ']';
        char *out = NULL;
        qw_err err = {{0}};
        int rc = tojson_dumps(deep, (size_t)k, &out, NULL, &err);
        CHECK((rc == 0) == (d == TOJSON_MAX_DEPTH), "depth %d: rc %d (%s)", d, rc, err.msg);
        free(out);
    }
    /* 100 000 levels: refused, no stack overflow. */
    size_t big = 200000;
    char *huge = malloc(big);
    memset(huge, '[', big / 2);
    memset(huge + big / 2, ']', big / 2);
    char *out = NULL;
    CHECK(tojson_dumps(huge, big, &out, NULL, NULL) == -1, "100000 levels accepted");
    free(huge);
    /* Member / item spans. */
    const char *o = " {\"a\": 1, \"t\\u0041\": [1, {\"x\": 2}], \"a\": \"last\"} ";
    const char *v;
    size_t vl;
    CHECK(tojson_member(o, strlen(o), "a", &v, &vl, NULL) == 1 && vl == 6 && !memcmp(v, "\"last\"", 6),
          "member a: last duplicate");
    CHECK(tojson_member(o, strlen(o), "tA", &v, &vl, NULL) == 1 && vl == 13 && !memcmp(v, "[1, {\"x\": 2}]", 13),
          "member with an escaped key");
    CHECK(tojson_member(o, strlen(o), "zz", &v, &vl, NULL) == 0 && !v, "missing member");
    CHECK(tojson_member("[1]", 3, "a", &v, &vl, NULL) == -1, "member of an array");
    CHECK(tojson_member("{\"a\":", 5, "a", &v, &vl, NULL) == -1, "member of broken JSON");
    CHECK(tojson_item("[1, {\"x\": 2} ,3]", 16, 1, &v, &vl, NULL) == 1 && vl == 8 && *v == '{', "item 1");
    CHECK(tojson_item("[1, {\"x\": 2} ,3]", 16, 3, &v, &vl, NULL) == 0, "item past the end");
    CHECK(tojson_item("[]", 2, 0, &v, &vl, NULL) == 0, "item of []");
    CHECK(tojson_item("{}", 2, 0, &v, &vl, NULL) == -1, "item of an object");
    CHECK(tojson_type(" [", 2) == 'a' && tojson_type("x", 1) == 0 && tojson_type("-1", 2) == 'n', "tojson_type");
}

/* ----------------------------------------------------------- tools corpus */

/* The raw text of j's member `key` in the line (the fixture line is the
 * client's JSON: spans keep numbers exactly as written). */
static const char *raw_member(const char *json, size_t len, const char *key, size_t *vl) {
    const char *v = NULL;
    *vl = 0;
    if (tojson_member(json, len, key, &v, vl, NULL) != 1) return NULL;
    return v;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

typedef struct conv {
    qw_chat_msg *msgs;
    qw_tool_call *calls;
    char **owned;
    size_t n_msgs, n_owned;
} conv;

static void conv_free(conv *c) {
    for (size_t i = 0; i < c->n_owned; i++) free(c->owned[i]);
    free(c->owned);
    free(c->calls);
    free(c->msgs);
}

/* Build messages from one fixture line: cJSON for the structure, raw spans
 * for each call's arguments. */
static void conv_build(conv *c, const char *line, size_t len, const cJSON *j) {
    const cJSON *ms = cJSON_GetObjectItem(j, "messages");
    size_t nm = (size_t)cJSON_GetArraySize(ms), ncalls = 0;
    memset(c, 0, sizeof *c);
    const char *msv;
    size_t msl;
    msv = raw_member(line, len, "messages", &msl);
    for (const cJSON *m = ms->child; m; m = m->next) ncalls += (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(m, "tool_calls"));
    c->msgs = calloc(nm + 1, sizeof *c->msgs);
    c->calls = calloc(ncalls + 1, sizeof *c->calls);
    c->owned = calloc(ncalls + 1, sizeof *c->owned);
    c->n_msgs = nm;
    size_t k = 0, ci = 0;
    for (const cJSON *m = ms->child; m; m = m->next, k++) {
        c->msgs[k].role = cJSON_GetObjectItem(m, "role")->valuestring;
        const cJSON *ct = cJSON_GetObjectItem(m, "content");
        c->msgs[k].content = cJSON_IsString(ct) ? ct->valuestring : NULL;
        const cJSON *rc = cJSON_GetObjectItem(m, "reasoning_content");
        c->msgs[k].reasoning_content = cJSON_IsString(rc) ? rc->valuestring : NULL;
        const cJSON *tcs = cJSON_GetObjectItem(m, "tool_calls");
        if (!cJSON_GetArraySize(tcs)) continue;
        const char *mv, *tv;
        size_t ml, tl;
        tojson_item(msv, msl, k, &mv, &ml, NULL);
        tv = raw_member(mv, ml, "tool_calls", &tl);
        c->msgs[k].tool_calls = &c->calls[ci];
        size_t i = 0;
        for (const cJSON *tc = tcs->child; tc; tc = tc->next, i++, ci++) {
            const cJSON *fn = cJSON_GetObjectItem(tc, "function");
            const char *cv, *fv, *av;
            size_t cl, fl, al;
            tojson_item(tv, tl, i, &cv, &cl, NULL);
            fv = fn ? raw_member(cv, cl, "function", &fl) : cv;
            if (!fn) fl = cl;
            av = raw_member(fv, fl, "arguments", &al);
            c->calls[ci].name = cJSON_GetObjectItem(fn ? fn : tc, "name")->valuestring;
            c->owned[c->n_owned] = dup_n(av, al);
            c->calls[ci].arguments = c->owned[c->n_owned++];
        }
        c->msgs[k].n_tool_calls = i;
    }
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static void check_tools_corpus(qw_tok *t, qw_tok *t3) {
    char path[1200];
    snprintf(path, sizeof path, "%s/corpus_tools.jsonl", g_fix);
    char *buf = read_all(path, NULL);
    CHECK(buf != NULL, "cannot read %s", path);
    if (!buf) return;
    int n = 0, bad_text = 0, bad_ids = 0, n_calls = 0, n_parallel = 0, n_tool_msgs = 0, per_family[8] = {0};
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        size_t len = strlen(line);
        cJSON *j = cJSON_Parse(line);
        if (j) {
            conv c;
            conv_build(&c, line, len, j);
            for (size_t i = 0; i < c.n_msgs; i++) {
                n_calls += (int)c.msgs[i].n_tool_calls;
                n_parallel += c.msgs[i].n_tool_calls > 1;
                n_tool_msgs += c.msgs[i].role && !strcmp(c.msgs[i].role, "tool");
            }
            const char *tn = cJSON_GetObjectItem(j, "template")->valuestring;
            qw_chat_family fam = !strcmp(tn, "qwen2.5-coder") ? CHAT_QWEN25_CODER
                                 : !strcmp(tn, "qwen3")       ? CHAT_QWEN3
                                                              : CHAT_QWEN25;
            qw_tok *tk = fam == CHAT_QWEN3 ? t3 : t;
            per_family[fam]++;
            size_t tl;
            const char *tools = raw_member(line, len, "tools", &tl);
            if (tools && tojson_type(tools, tl) == 'z') tools = NULL, tl = 0;
            const cJSON *think = cJSON_GetObjectItem(j, "enable_thinking");
            qw_chat_opts o = {.family = fam, .tools = tools, .tools_len = tl,
                              .add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(j, "add_generation_prompt")),
                              .no_thinking = cJSON_IsFalse(think)};
            const char *want = cJSON_GetObjectItem(j, "text")->valuestring;
            char *out = NULL;
            size_t ol;
            qw_err err = {{0}};
            if (chat_render_opts(&o, c.msgs, c.n_msgs, &out, &ol, &err) || ol != strlen(want) || memcmp(out, want, ol)) {
                if (bad_text++ < 2) fprintf(stderr, "FAIL tools %d (%s): %s\nrendered\n%s\nwant\n%s\n", n, tn, err.msg,
                                            out ? out : "(null)", want);
            }
            free(out);
            const cJSON *wj = cJSON_GetObjectItem(j, "ids");
            size_t nw = (size_t)cJSON_GetArraySize(wj), k = 0;
            int32_t *wids = malloc((nw + 1) * sizeof *wids), *ids = NULL;
            for (const cJSON *e = wj->child; e; e = e->next) wids[k++] = (int32_t)e->valueint;
            size_t nid = 0;
            tok_set_chat_family(tk, fam);
            if (chat_encode_opts(tk, &o, c.msgs, c.n_msgs, &ids, &nid, &err) ||
                !same_ids(ids, nid, wids, nw))
                bad_ids++;
            free(ids);
            free(wids);
            conv_free(&c);
            cJSON_Delete(j);
            n++;
        }
        if (!nl) break;
        line = nl + 1;
    }
    free(buf);
    printf("tools: %d conversations (%d qwen2.5, %d coder, %d qwen3; %d calls, %d parallel, %d tool results), "
           "%d render and %d ids mismatches\n",
           n, per_family[CHAT_QWEN25], per_family[CHAT_QWEN25_CODER], per_family[CHAT_QWEN3], n_calls, n_parallel,
           n_tool_msgs, bad_text, bad_ids);
    CHECK(per_family[CHAT_QWEN25] >= 50 && per_family[CHAT_QWEN25_CODER] >= 50 && per_family[CHAT_QWEN3] >= 100,
          "tools corpus too small");
    CHECK(n_parallel >= 10 && n_tool_msgs >= 50, "tools corpus lacks parallel calls or tool results");
    CHECK(bad_text == 0, "tools: %d renders differ from apply_chat_template", bad_text);
    CHECK(bad_ids == 0, "tools: %d conversations encode differently", bad_ids);
}

/* OpenAI clients send arguments as a string holding JSON; its value is what
 * the renderer gets, and it is re-serialised as transformers would have
 * rendered the parsed object. */
static void check_openai_arguments(void) {
    qw_tool_call call = {"f", "{\"b\":1.50,\"a\":\"\\u00e9\\n\",\"b\":[1E2,-0]}"};
    qw_chat_msg m[2] = {{.role = "user", .content = "u"},
                        {.role = "assistant", .content = NULL, .tool_calls = &call, .n_tool_calls = 1}};
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"x\":1.0}}}]";
    qw_chat_opts o = {.family = CHAT_QWEN25, .tools = tools, .tools_len = strlen(tools)};
    char *out = NULL;
    size_t ol;
    qw_err err = {{0}};
    CHECK(chat_render_opts(&o, m, 2, &out, &ol, &err) == 0, "render: %s", err.msg);
    if (out) {
        CHECK(strstr(out, "\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
                          "{\"x\": 1.0}}}\n</tools>") != NULL, "tools line: %s", out);
        CHECK(strstr(out, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"b\": [100.0, 0], "
                          "\"a\": \"\xc3\xa9\\n\"}}\n</tool_call><|im_end|>\n") != NULL, "call: %s", out);
    }
    free(out);
    /* Empty tools array: rendered as without tools. */
    char *a = NULL, *b = NULL;
    size_t al, bl;
    qw_chat_opts e = {.family = CHAT_QWEN25, .tools = " [ ] ", .tools_len = 5, .add_generation_prompt = 1};
    CHECK(chat_render_opts(&e, m, 1, &a, &al, NULL) == 0 && chat_render(m, 1, 1, &b, &bl, NULL) == 0 && al == bl &&
              !memcmp(a, b, al), "tools [] differs from no tools");
    free(a), free(b);
    /* Bad input: a message, no output. */
    struct { const char *tools, *args, *want; } bad[] = {
        {"{\"a\":1}", "{}", "tools must be a JSON array"},
        {"[1,", "{}", "chat_render: tools"},
        {"[]", "{\"a\":", "tool call arguments"},
        {"[]", "\"\\ud800\"", "lone high surrogate"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        call.arguments = bad[i].args;
        qw_chat_opts q = {.family = CHAT_QWEN25, .tools = bad[i].tools, .tools_len = strlen(bad[i].tools)};
        out = NULL;
        err.msg[0] = 0;
        int rc = chat_render_opts(&q, m, 2, &out, &ol, &err);
        CHECK(rc == -1 && !out && strstr(err.msg, bad[i].want), "bad %zu: rc %d msg '%s'", i, rc, err.msg);
    }
    qw_chat_opts qu = {.family = CHAT_UNKNOWN};
    CHECK(chat_render_opts(&qu, m, 1, &out, &ol, &err) == -1 && strstr(err.msg, "unknown"), "unknown rendered");
}

/* ------------------------------------------------------- recognition */

static void check_family_dir(const char *dir, qw_chat_family want, const char *refusal) {
    qw_tok *t = NULL;
    qw_err err = {{0}};
    CHECK(tok_load(&t, dir, &err) == 0, "load %s: %s", dir, err.msg);
    if (!t) return;
    CHECK(tok_chat_family(t) == want, "%s: family %s, want %s", dir, chat_family_name(tok_chat_family(t)),
          chat_family_name(want));
    qw_chat_msg m = {.role = "user", .content = "hi"};
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = chat_encode(t, &m, 1, 1, &ids, &n, &err);
    if (refusal) CHECK(rc == -1 && !ids && strstr(err.msg, refusal), "%s: chat not refused (%s)", dir, err.msg);
    else CHECK(rc == 0 && n > 0, "%s: chat refused: %s", dir, err.msg);
    free(ids);
    tok_free(t);
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *b = read_all(from, &n);
    FILE *f = fopen(to, "wb");
    if (b && f) fwrite(b, 1, n, f);
    if (f) fclose(f);
    free(b);
}

static void check_recognition(void) {
    char d25[1100], d3[1100], tmp[] = "/tmp/qwenc-chat-XXXXXX", p[1200], q[1200];
    snprintf(d25, sizeof d25, "%s/qwen2.5", g_fix);
    snprintf(d3, sizeof d3, "%s/qwen3", g_fix);
    check_family_dir(d25, CHAT_QWEN25, NULL);
    check_family_dir(d3, CHAT_QWEN3, NULL);
    CHECK(mkdtemp(tmp) != NULL, "mkdtemp");
    snprintf(p, sizeof p, "%s/qwen2.5/tokenizer.json", g_fix);
    snprintf(q, sizeof q, "%s/tokenizer.json", tmp);
    copy_file(p, q);
    /* No template at all. */
    check_family_dir(tmp, CHAT_NONE, "no chat template");
    /* A template one byte off the known one: unknown, refused. */
    qw_tok *t25 = NULL;
    tok_load(&t25, d25, NULL);
    size_t tl;
    const char *tx = t25 ? tok_chat_template(t25, &tl) : NULL;
    CHECK(tx && tl > 1000, "the Qwen2.5 fixture carries its template");
    if (tx) {
        CHECK(chat_template_family(tx, tl) == CHAT_QWEN25, "known text");
        CHECK(chat_template_family(tx, tl - 1) == CHAT_UNKNOWN, "a cut template is unknown");
        char *mod = dup_n(tx, tl);
        mod[tl / 2] ^= 1;
        CHECK(chat_template_family(mod, tl) == CHAT_UNKNOWN, "a changed template is unknown");
        /* chat_template.jinja wins over tokenizer_config.json */
        cJSON *cfg = cJSON_CreateObject();
        cJSON_AddStringToObject(cfg, "chat_template", mod);
        char *cs = cJSON_Print(cfg);
        snprintf(q, sizeof q, "%s/tokenizer_config.json", tmp);
        write_file(q, cs);
        check_family_dir(tmp, CHAT_UNKNOWN, "not one qwenc knows");
        snprintf(q, sizeof q, "%s/chat_template.jinja", tmp);
        write_file(q, tx);
        check_family_dir(tmp, CHAT_QWEN25, NULL);
        unlink(q);
        free(cs);
        cJSON_Delete(cfg);
        /* A list of named templates: "default" is the chat one. */
        cfg = cJSON_Parse("[{\"name\":\"tool_use\",\"template\":\"x\"},{\"name\":\"default\",\"template\":\"\"}]");
        cJSON *root = cJSON_CreateObject();
        cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cfg, 1), "template", cJSON_CreateString(tx));
        cJSON_AddItemToObject(root, "chat_template", cfg);
        cs = cJSON_Print(root);
        snprintf(q, sizeof q, "%s/tokenizer_config.json", tmp);
        write_file(q, cs);
        check_family_dir(tmp, CHAT_QWEN25, NULL);
        free(cs);
        cJSON_Delete(root);
        write_file(q, "{\"chat_template\": 7}");
        check_family_dir(tmp, CHAT_UNKNOWN, "not one qwenc knows");
        unlink(q);
        free(mod);
    }
    tok_free(t25);
    snprintf(q, sizeof q, "%s/tokenizer.json", tmp);
    unlink(q);
    rmdir(tmp);
    /* The real files, when present (tools/real-model.sh). */
    static const struct { const char *file; qw_chat_family fam; } real[] = {
        {"/root/.cache/qwenc/real/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", CHAT_QWEN25},
        {"/root/.cache/qwenc/real/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", CHAT_QWEN25_CODER},
    };
    for (size_t i = 0; i < 2; i++) {
        const char *f = getenv(i ? "QWENC_REAL_MODEL_1P5B" : "QWENC_REAL_MODEL");
        if (!f || !*f) f = real[i].file;
        struct stat st;
        if (stat(f, &st) != 0) {
            printf("skip: %s not present\n", f);
            continue;
        }
        check_family_dir(f, real[i].fam, NULL);
    }
}

int main(void) {
    const char *env = getenv("QWENC_TOK_FIXTURES");
    const char *build = getenv("BUILD");
    if (env && *env) snprintf(g_fix, sizeof g_fix, "%s", env);
    else snprintf(g_fix, sizeof g_fix, "%s/fixtures/tokenizer", build && *build ? build : "build");
    printf("fixtures: %s\n", g_fix);
    check_tojson_corpus();
    check_tojson_errors();
    check_openai_arguments();
    check_recognition();
    char d25[1100];
    snprintf(d25, sizeof d25, "%s/qwen2.5", g_fix);
    qw_tok *t = NULL;
    qw_err err = {{0}};
    CHECK(tok_load(&t, d25, &err) == 0, "load %s: %s", d25, err.msg);
    char d3[1100];
    snprintf(d3, sizeof d3, "%s/qwen3", g_fix);
    qw_tok *t3 = NULL;
    CHECK(tok_load(&t3, d3, &err) == 0, "load %s: %s", d3, err.msg);
    if (t && t3) check_tools_corpus(t, t3);
    tok_free(t);
    tok_free(t3);
    return test_summary();
}
