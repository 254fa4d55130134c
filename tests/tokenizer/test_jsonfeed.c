/* test_jsonfeed.c - a JSON value re-serialised while it streams in
 * (jsonfeed.h): fed whole, byte by byte and in random pieces, the output
 * must equal tojson_dumps() of the whole text, and the value's end must be
 * found exactly; text that stops being JSON passes through unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_rng.h"
#include "tokenizer/jsonfeed.h"
#include "tokenizer/tojson.h"

/* Feed text cut by mode (0 whole, 1 bytes, 2 random pieces) into *out;
 * returns the bytes the feed read. */
static size_t feed(const char *text, size_t n, int mode, uint64_t seed, strbuf *out, int finish) {
    jsonfeed f;
    jsonfeed_init(&f);
    memset(out, 0, sizeof *out);
    sb_touch(out);
    g_rng = seed * 0x9e3779b97f4a7c15ull + 1;
    size_t i = 0, read = 0;
    while (i < n && !jsonfeed_done(&f)) {
        size_t step = mode == 0 ? n : mode == 1 ? 1 : 1 + (size_t)(rnd() % 9);
        if (step > n - i) step = n - i;
        read += jsonfeed_feed(&f, text + i, step, out);
        i += step;
    }
    if (finish) jsonfeed_finish(&f, out);
    return read;
}

/* Every cut gives tojson's text; trailing bytes after the value are left. */
static void same_as_tojson(const char *text, const char *trail) {
    char *want;
    size_t wl;
    qw_err err;
    if (tojson_dumps(text, strlen(text), &want, &wl, &err)) {
        CHECK(0, "tojson refused the corpus text %s: %s", text, err.msg);
        return;
    }
    char buf[4096];
    snprintf(buf, sizeof buf, "%s%s", text, trail);
    for (int mode = 0; mode < 3; mode++)
        for (uint64_t seed = 1; seed <= (mode == 2 ? 30u : 1u); seed++) {
            strbuf out;
            size_t read = feed(buf, strlen(buf), mode, seed, &out, 0);
            /* numbers end only at the next byte: a bare number needs finish */
            if (!(out.n == wl)) {
                free(out.p);
                read = feed(buf, strlen(buf), mode, seed, &out, 1);
            }
            CHECK(out.n == wl && !memcmp(out.p, want, wl), "mode %d seed %llu: %s\n  got  '%s'\n  want '%s'", mode,
                  (unsigned long long)seed, text, out.p, want);
            CHECK(!*trail || read == strlen(text), "mode %d: read %zu of '%s', the value is %zu bytes", mode, read,
                  buf, strlen(text));
            free(out.p);
        }
    free(want);
}

/* Not JSON from some byte on: the output is the normalised start, then the
 * rest verbatim; never lost. */
static void passes_through(const char *text, const char *want) {
    for (int mode = 0; mode < 3; mode++)
        for (uint64_t seed = 1; seed <= (mode == 2 ? 10u : 1u); seed++) {
            strbuf out;
            feed(text, strlen(text), mode, seed, &out, 1);
            CHECK(!strcmp(out.p, want), "mode %d: %s\n  got  '%s'\n  want '%s'", mode, text, out.p, want);
            free(out.p);
        }
}

int main(void) {
    const char *corpus[] = {
        "{}",
        "[]",
        "{\"city\": \"Paris\"}",
        "{\"city\":\"Paris\",\"unit\":\"celsius\"}",
        " {\n  \"a\" :1 ,\n\t\"b\":[1,2 , 3],\"c\":{\"d\":null,\"e\":true,\"f\":false}}",
        "{\"t\":1.50,\"s\":\"\\u00e9\xe4\xb8\xad\",\"n\":1E2,\"m\":-0,\"k\":-0.0,\"z\":0.0001,\"y\":1e-7,\"x\":12345678901234567890}",
        "{\"esc\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\"}",
        "{\"pair\":\"\\ud83d\\ude00 and \xf0\x9f\x98\x80\",\"bmp\":\"\\u4e2d\\u00E9\"}",
        "{\"deep\":[[[{\"a\":[{}]}]],[],{}],\"s\":\"}]{[,:\"}",
        "[1,\"two\",3.25,[true,null],{\"k\":\"v\"}]",
        "\"just a string \\n\"",
        "{\"code\":\"def f(x):\\n    return x * 2\\n\",\"lang\":\"python\"}",
    };
    for (size_t i = 0; i < sizeof corpus / sizeof *corpus; i++) {
        same_as_tojson(corpus[i], "");
        same_as_tojson(corpus[i], "}\n</tool_call>");
    }
    same_as_tojson("42", "");
    same_as_tojson("-1.5e3", "");
    same_as_tojson("true", "");
    /* Not JSON: the rest as it came. */
    passes_through("{\"a\": 1} x", "{\"a\": 1}");          /* the value ended: the rest is not read */
    passes_through("{\"a\" # 1}", "{\"a\"# 1}");           /* '#' starts the raw tail */
    passes_through("{\"a\": \"x\\qy\"}", "{\"a\": \"x\\qy\"}"); /* a bad escape */
    passes_through("{\"a\": \"\\ud800x\"}", "{\"a\": \"\\ud800x\"}"); /* a lone surrogate */
    passes_through("{\"a\": nul}", "{\"a\": nul}");
    passes_through("{\"a\": 1.}", "{\"a\": 1.}");
    passes_through("{\"a\": \"\x01\"}", "{\"a\": \"\x01\"}");
    passes_through("{\"a\": 12", "{\"a\": 12"); /* cut short: what was held goes out */
    passes_through("{\"a\": \"\\u00", "{\"a\": \"\\u00");
    return test_summary();
}
