/* test_grammar.c - the grammar engine (src/grammar): GBNF and JSON Schema
 * compilation, the matcher on accept / reject corpora, and the token mask
 * against brute force over the real Qwen2.5 vocabulary (the tokenizer
 * fixture, prepared by tests/fixtures/tokenizer/prepare.sh as in
 * test_tokenizer.c). Also prints the mask time on that vocabulary. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* A one-byte-per-token vocabulary: ids 0..255 = bytes, 256 = EOS. */
static qw_gvocab *g_bytes_vocab;

/* full: 1 = text must be accepted and complete; 0 = must be rejected
 * somewhere or not complete. */
static int matches(const qw_grammar *g, const char *text) {
    qw_gmatch *m = gmatch_create(g, g_bytes_vocab);
    int ok = m && gmatch_accept_bytes(m, text, strlen(text)) && gmatch_is_complete(m);
    gmatch_free(m);
    return ok;
}

static qw_grammar *gbnf(const char *text) {
    qw_grammar *g = NULL;
    qw_err err = {{0}};
    if (grammar_compile_gbnf(&g, text, strlen(text), NULL, &err)) {
        fprintf(stderr, "compile failed: %s\n", err.msg);
        return NULL;
    }
    return g;
}

static qw_grammar *schema(const char *json, qw_err *err) {
    cJSON *s = cJSON_Parse(json);
    if (!s) {
        snprintf(err->msg, sizeof err->msg, "bad test JSON");
        return NULL;
    }
    qw_grammar *g = NULL;
    if (grammar_compile_json_schema(&g, s, err)) g = NULL;
    cJSON_Delete(s);
    return g;
}

typedef struct corpus {
    const char *grammar;
    const char *yes[8];
    const char *no[8];
} corpus;

static const corpus GBNF_CASES[] = {
    {"root ::= \"ab\" | \"a\" \"c\"*", {"ab", "a", "accc"}, {"", "abc", "b", "aab"}},
    {"root ::= [a-z]+ (\",\" [a-z]+)*", {"a", "ab,c", "x,y,z"}, {"", ",", "a,", "A"}},
    {"root ::= x{2,3}\nx ::= \"ab\"", {"abab", "ababab"}, {"ab", "abababab", ""}},
    {"root ::= [^\"]*  # comment\n", {"", "héllo", "日本語", "\xf0\x9f\x98\x80"}, {"\"", "\xff", "\xc3", "\xed\xa0\x80"}},
    {"root ::= \"(\" root \")\" | \"\"", {"", "()", "((()))"}, {"(", "())", ")("}},
    {"root ::= (\n  \"a\" |\n  \"b\"\n) \"c\"?", {"a", "bc"}, {"c", "ab"}},
    {"root ::= \"\\x41\\u00e9\\n\" [\\x30-\\x39]", {"A\xc3\xa9\n5"}, {"A\xc3\xa9\n"}},
    {"root ::= a b\na ::= \"x\"?\nb ::= \"y\"*", {"", "x", "xyy", "y"}, {"yx", "xx"}},
    {"root ::= .{3}", {"abc", "a\xc3\xa9z"}, {"ab", "abcd"}},
};

static void test_gbnf_corpus(void) {
    for (size_t i = 0; i < sizeof GBNF_CASES / sizeof *GBNF_CASES; i++) {
        const corpus *c = &GBNF_CASES[i];
        qw_grammar *g = gbnf(c->grammar);
        CHECK(g != NULL, "grammar %zu compiles", i);
        if (!g) continue;
        for (int k = 0; k < 8 && c->yes[k]; k++)
            CHECK(matches(g, c->yes[k]), "grammar %zu accepts \"%s\"", i, c->yes[k]);
        for (int k = 0; k < 8 && c->no[k]; k++)
            CHECK(!matches(g, c->no[k]), "grammar %zu rejects \"%s\"", i, c->no[k]);
        grammar_release(g);
    }
}

static void test_gbnf_errors(void) {
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"root ::= foo", "rule 'foo' is used but not defined"},
        {"root ::= \"abc", "unterminated literal"},
        {"root ::= [a-", "unterminated character class"},
        {"start ::= \"a\"", "no rule named 'root'"},
        {"root ::= root \"a\" | \"b\"", "left recursion"},
        {"root ::= x \"a\"\nx ::= \"\" | root", "left recursion"},
        {"root ::= \"a\"{3,2}", "n < m"},
        {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
        {"root ::= <[123]>", "token references"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"root ::= \"a\" )", "unexpected character"},
        {"root ::= (\"a\"{1000}){1000}", "too large"},
        {"root ::= ([a-z]{200} [0-9]{200}){60}", "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qw_grammar *g = NULL;
        qw_err err = {{0}};
        int rc = grammar_compile_gbnf(&g, bad[i].text, strlen(bad[i].text), NULL, &err);
        CHECK(rc == -1 && !g, "'%s' is refused", bad[i].text);
        CHECK(strstr(err.msg, bad[i].want) != NULL, "'%s': message '%s' names '%s'", bad[i].text, err.msg,
              bad[i].want);
        grammar_release(g);
    }
    /* Nested groups: 64 compile; 65, or 200,000 (a fuzzer's input overflowed
     * the stack by recursion), are refused with a message. */
    static const int depths[] = {64, 65, 200000};
    for (size_t i = 0; i < sizeof depths / sizeof *depths; i++) {
        int d = depths[i];
        size_t len = 9 + 2 * (size_t)d + 3;
        char *t = malloc(len + 1);
        if (!t) continue;
        memcpy(t, "root ::= ", 9);
        memset(t + 9, '(', (size_t)d);
        memcpy(t + 9 + d, "\"a\"", 3);
        memset(t + 12 + d, ')', (size_t)d);
        t[len] = 0;
        qw_grammar *g = NULL;
        qw_err err = {{0}};
        int rc = grammar_compile_gbnf(&g, t, len, NULL, &err);
        if (d <= 64) CHECK(rc == 0 && g, "%d nested groups compile: %s", d, err.msg);
        else CHECK(rc == -1 && !g && strstr(err.msg, "nested too deeply"), "%d nested groups: rc %d, '%s'", d, rc,
                   err.msg);
        grammar_release(g);
        free(t);
    }
}

static const corpus SCHEMA_CASES[] = {
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
     "\"required\":[\"a\",\"b\"],\"additionalProperties\":false}",
     {"{\"a\":1,\"b\":\"x\"}", "{ \"a\": -20, \"b\": \"h\\u00e9\\n\" }", "{\n  \"a\": 0,\n  \"b\": \"\"\n}"},
     {"{\"b\":\"x\",\"a\":1}", "{\"a\":1}", "{\"a\":01,\"b\":\"x\"}", "{\"a\":1.5,\"b\":\"x\"}",
      "{\"a\":1,\"b\":\"x\",\"c\":2}", "{\"a\":1,\"b\":\"\x01\"}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"null\"},"
     "\"c\":{\"type\":\"number\"}},\"required\":[\"b\"]}",
     {"{\"b\":null}", "{\"a\":true,\"b\":null}", "{\"b\":null,\"c\":1.5e3}", "{\"a\":false,\"b\":null,\"c\":-0.25}"},
     {"{}", "{\"a\":true}", "{\"a\":true,,\"b\":null}", "{,\"b\":null}", "{\"b\":null,}"}},
    {"{\"type\":\"array\",\"items\":{\"enum\":[\"x\",2,null]},\"minItems\":1,\"maxItems\":3}",
     {"[\"x\"]", "[2, null, \"x\"]"}, {"[]", "[1]", "[2,2,2,2]", "[\"y\"]"}},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"$ref\":\"#/$defs/n\"}],\"$defs\":{\"n\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}}}",
     {"\"a\"", "[]", "[\"a\",[\"b\",[]]]"}, {"1", "[1]", "[[2]]"}},
    {"{\"const\":{\"k\":[1,\"two\"]}}", {"{\"k\":[1,\"two\"]}"}, {"{\"k\":[1,\"two\" ]}", "{}"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", {"\"ab\"", "\"a\\nc\""}, {"\"a\"", "\"abcd\""}},
    {"{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2024-02-29T13:05:00Z\"", "\"1999-12-31T23:59:59.5+01:00\""},
     {"\"2024-13-01T00:00:00Z\"", "\"2024-01-01\""}},
    {"{\"type\":[\"integer\",\"null\"]}", {"5", "null"}, {"\"5\"", "5.5"}},
    {"{\"type\":\"object\"}", {"{}", "{\"x\":[1,{\"y\":null}]}"}, {"[]", "{\"x\"}"}},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", {"{\"q\":1,\"r\":2}"}, {"{\"q\":\"1\"}"}},
    {"{\"type\": \"string\", \"pattern\": \"^[a-z]{2,3}-\\\\d+$\"}",
     {"\"ab-1\"", "\"xyz-0042\""},
     {"\"a-1\"", "\"ab-\"", "\"AB-1\"", "\"ab-1x\""}},
    {"{\"type\": \"string\", \"pattern\": \"ab\"}",
     {"\"xxabyy\"", "\"ab\"", "\"\\u0001ab\""},
     {"\"a\"", "\"\""}},
    {"{\"type\": \"string\", \"pattern\": \"^a\\\"b\\\\\\\\c$\"}",
     {"\"a\\\"b\\\\c\""},
     {"\"a\\\"bc\"", "\"a\\\"b\\\\\\\\c\""}},
    {"{\"type\": \"string\", \"pattern\": \"^(cat|dog)s?$\"}",
     {"\"cats\"", "\"dog\""},
     {"\"cow\"", "\"catdog\""}},
    {"{\"type\": \"string\", \"pattern\": \"^[^a]$\"}",
     {"\"b\"", "\"\\\"\"", "\"\\\\\"", "\"\\u000a\"", "\"日\""},
     {"\"a\"", "\"bb\""}},
    {"{\"type\": \"string\", \"pattern\": \"^.{2}$|^x+$\"}",
     {"\"ab\"", "\"é日\"", "\"xxxx\""},
     {"\"a\"", "\"abc\""}},
    {"{\"type\": \"string\", \"pattern\": \"^(?:[0-9a-f]{2}:){2}[0-9a-f]{2}$\"}",
     {"\"0a:1b:ff\""},
     {"\"0a:1b\"", "\"0A:1b:ff\""}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
     {"[1,\"a\"]"}, {"[1]", "[1,\"a\",2]"}},
};

static void test_schema_corpus(void) {
    for (size_t i = 0; i < sizeof SCHEMA_CASES / sizeof *SCHEMA_CASES; i++) {
        const corpus *c = &SCHEMA_CASES[i];
        qw_err err = {{0}};
        qw_grammar *g = schema(c->grammar, &err);
        CHECK(g != NULL, "schema %zu compiles: %s", i, err.msg);
        if (!g) continue;
        for (int k = 0; k < 8 && c->yes[k]; k++)
            CHECK(matches(g, c->yes[k]), "schema %zu accepts %s", i, c->yes[k]);
        for (int k = 0; k < 8 && c->no[k]; k++)
            CHECK(!matches(g, c->no[k]), "schema %zu rejects %s", i, c->no[k]);
        grammar_release(g);
    }
}

static void test_schema_refused(void) {
    static const struct {
        const char *schema, *want;
    } bad[] = {
        {"{\"type\":\"integer\",\"minimum\":3}", "unsupported keyword 'minimum' at /"},
        {"{\"type\":\"string\",\"pattern\":\"(?=a)b\"}", "lookaround"},
        {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "backreferences"},
        {"{\"type\":\"string\",\"pattern\":\"a^b\"}", "anchors"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\bfoo\"}", "word boundary"},
        {"{\"type\":\"string\",\"pattern\":\"a{5,2}\"}", "m < n"},
        {"{\"type\":\"string\",\"pattern\":\"(ab\"}", "missing ')'"},
        {"{\"type\":\"string\",\"pattern\":\"a\",\"maxLength\":3}", "'pattern' together"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"%s%n(\"}}}", "(pattern '%s%n(' at /properties/a)"},
        {"{\"oneOf\":[{\"type\":\"string\"}]}", "unsupported keyword 'oneOf'"},
        {"{\"not\":{}}", "unsupported keyword 'not'"},
        {"{\"type\":\"strin\"}", "unknown type 'strin'"},
        {"{\"$ref\":\"http://x/y\"}", "$ref 'http://x/y'"},
        {"{\"$ref\":\"#/$defs/missing\"}", "no such definition"},
        {"{\"type\":\"string\",\"format\":\"ipv4\"}", "unsupported format 'ipv4'"},
        {"{\"type\":\"object\",\"properties\":{},\"required\":[\"a\"]}", "required property 'a'"},
        {"{\"allOf\":[{},{}]}", "allOf"},
        {"[1]", "must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qw_err err = {{0}};
        qw_grammar *g = schema(bad[i].schema, &err);
        CHECK(!g, "%s is refused", bad[i].schema);
        CHECK(strstr(err.msg, bad[i].want) != NULL, "%s: message '%s' names '%s'", bad[i].schema, err.msg, bad[i].want);
        grammar_release(g);
    }
}

/* Tokens and EOS on the byte vocabulary: EOS only when complete, then finished. */
static void test_tokens_and_eos(void) {
    qw_grammar *g = gbnf("root ::= \"ab\"");
    qw_gmatch *m = gmatch_create(g, g_bytes_vocab);
    uint32_t mask[(257 + 31) / 32];
    CHECK(gmatch_fill_mask(m, mask) == 1 && (mask['a' / 32] >> ('a' % 32) & 1), "only 'a' at the start");
    CHECK(gmatch_accept_token(m, 256) == 0, "EOS refused before complete");
    CHECK(gmatch_accept_token(m, 'b') == 0, "'b' refused first");
    CHECK(gmatch_accept_token(m, 'a') == 1 && gmatch_accept_token(m, 'b') == 1, "'a' then 'b'");
    CHECK(gmatch_is_complete(m), "complete after ab");
    int n = gmatch_fill_mask(m, mask);
    CHECK(n == 1 && (mask[256 / 32] >> (256 % 32) & 1), "EOS forced when complete and nothing else fits (%d)", n);
    CHECK(gmatch_accept_token(m, 256) == 1 && gmatch_is_finished(m), "EOS accepted, finished");
    CHECK(gmatch_accept_token(m, 'a') == 0 && gmatch_fill_mask(m, mask) == 0, "nothing after EOS");
    gmatch_reset(m);
    CHECK(gmatch_try_bytes(m, "ab", 2) == 1 && !gmatch_is_complete(m), "try leaves the state alone");
    CHECK(gmatch_accept_bytes(m, "ax", 2) == 0 && gmatch_accept_bytes(m, "ab", 2) == 1, "all or nothing");
    gmatch_free(m);
    grammar_release(g);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The trie mask equals trying every token on its own, at several states of
 * a schema with nested objects, strings, numbers and arrays. */
static void test_mask_real_vocab(void) {
    const char *env = getenv("QWENC_TOK_FIXTURES");
    const char *build = getenv("BUILD");
    char dir[1024];
    if (env)
        snprintf(dir, sizeof dir, "%s/qwen2.5", env);
    else
        snprintf(dir, sizeof dir, "%s/fixtures/tokenizer/qwen2.5", build ? build : "build");
    qw_tok *t = NULL;
    qw_err err = {{0}};
    if (tok_load(&t, dir, &err)) {
        CHECK(0, "load %s: %s (run tests/fixtures/tokenizer/prepare.sh)", dir, err.msg);
        return;
    }
    int32_t eos[2] = {tok_token_id(t, "<|im_end|>"), tok_token_id(t, "<|endoftext|>")};
    const int n_vocab = 151936;
    double t0 = now_s();
    qw_gvocab *v = gvocab_create(t, n_vocab, eos, 2, &err);
    double t_build = now_s() - t0;
    CHECK(v != NULL, "gvocab_create: %s", err.msg);
    if (!v) {
        tok_free(t);
        return;
    }
    qw_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                           "\"n\":{\"type\":\"number\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"ab\",\"c\\\"d\"]}},"
                           "\"sub\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"]}},"
                           "\"required\":[\"name\",\"n\",\"tags\",\"sub\"],\"additionalProperties\":false}",
                           &err);
    CHECK(g != NULL, "schema: %s", err.msg);
    const char *prefixes[] = {
        "", "{", "{\"na", "{\"name\": \"h\xc3", "{\"name\": \"hi\\", "{\"name\":\"x\",\"n\":1",
        "{\"name\":\"x\",\"n\":-0.5e", "{\"name\":\"x\",\"n\":2,\"tags\":[\"c\\\"", "{\"name\":\"x\",\"n\":2,\"tags\":[],\"sub\":{\"ok\":true}",
        "{\"name\":\"x\",\"n\":2,\"tags\":[],\"sub\":{\"ok\":true}}",
    };
    qw_gmatch *m = g ? gmatch_create(g, v) : NULL;
    uint32_t *mask = calloc((n_vocab + 31) / 32, sizeof(uint32_t));
    double worst = 0, sum = 0;
    int n_masks = 0;
    for (size_t p = 0; m && p < sizeof prefixes / sizeof *prefixes; p++) {
        gmatch_reset(m);
        CHECK(gmatch_accept_bytes(m, prefixes[p], strlen(prefixes[p])), "prefix %zu accepted", p);
        /* time a few fills (the first and warm ones cost the same: no cache) */
        int n = 0;
        for (int rep = 0; rep < 3; rep++) {
            double a = now_s();
            n = gmatch_fill_mask(m, mask);
            double dt = now_s() - a;
            sum += dt;
            n_masks++;
            if (dt > worst) worst = dt;
        }
        int bad = 0, allowed = 0;
        for (int id = 0; id < n_vocab; id++) {
            size_t len = 0;
            const char *b = tok_token_bytes(t, id, &len);
            int want;
            if (id == eos[0] || id == eos[1])
                want = gmatch_is_complete(m);
            else
                want = b && len && !tok_is_special(t, id) && gmatch_try_bytes(m, b, len);
            int got = mask[id >> 5] >> (id & 31) & 1;
            allowed += want;
            if (want != got && bad++ < 5) CHECK(0, "prefix %zu token %d: mask %d, brute force %d", p, id, got, want);
        }
        CHECK(bad == 0 && n == allowed, "prefix %zu: %d mismatches, %d vs %d allowed", p, bad, n, allowed);
    }
    if (m) {
        /* the complete object: only EOS */
        CHECK(gmatch_is_complete(m), "complete at the end");
        printf("mask over %d tokens: mean %.2f ms, worst %.2f ms over %d fills; trie build %.0f ms\n",
               gvocab_n_vocab(v), sum / n_masks * 1e3, worst * 1e3, n_masks, t_build * 1e3);
    }
    free(mask);
    gmatch_free(m);
    grammar_release(g);
    gvocab_free(v);
    tok_free(t);
}

int main(void) {
    int32_t eos = 256;
    g_bytes_vocab = gvocab_create_bytes(257, &eos, 1);
    CHECK(g_bytes_vocab != NULL, "byte vocabulary");
    test_gbnf_corpus();
    test_gbnf_errors();
    test_schema_corpus();
    test_schema_refused();
    test_tokens_and_eos();
    test_mask_real_vocab();
    gvocab_free(g_bytes_vocab);
    return test_summary();
}
