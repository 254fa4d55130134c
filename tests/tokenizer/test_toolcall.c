/* test_toolcall.c - <tool_call> blocks split out of model text (toolcall.h):
 * each case is fed whole, one byte at a time, and in random pieces, and
 * must give the same content and calls every way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_rng.h"
#include "tokenizer/toolcall.h"

typedef struct out {
    char content[4096];
    size_t n;
    char calls[4096]; /* "index:name:args|" per call */
    size_t nc;
    char streamed[4096]; /* the same, built from call_start / call_args for started calls */
    size_t ns;
    int started;         /* index of the call begun by call_start, -1 none */
    int n_pieces;        /* call_args pieces */
    int bad_index;
} out;

static void on_start(void *ctx, int index, const char *name) {
    out *o = ctx;
    if (o->started >= 0) o->bad_index = 1; /* one call at a time */
    o->started = index;
    o->ns += (size_t)snprintf(o->streamed + o->ns, sizeof o->streamed - o->ns, "%d:%s:", index, name);
}

static void on_args(void *ctx, int index, const char *s, size_t n) {
    out *o = ctx;
    if (n == 0 || index != o->started) o->bad_index = 1;
    o->n_pieces++;
    if (o->ns + n < sizeof o->streamed) memcpy(o->streamed + o->ns, s, n), o->ns += n;
}

static void on_content(void *ctx, const char *s, size_t n) {
    out *o = ctx;
    if (n == 0) o->bad_index = 1; /* the sink never gets empty content */
    if (o->n + n < sizeof o->content) memcpy(o->content + o->n, s, n), o->n += n;
}

static int g_next_index;
static void on_call(void *ctx, int index, const char *name, const char *args) {
    out *o = ctx;
    if (index != g_next_index++) o->bad_index = 1;
    o->nc += (size_t)snprintf(o->calls + o->nc, sizeof o->calls - o->nc, "%d:%s:%s|", index, name, args);
    if (o->started == index) o->ns += (size_t)snprintf(o->streamed + o->ns, sizeof o->streamed - o->ns, "|");
    else o->ns += (size_t)snprintf(o->streamed + o->ns, sizeof o->streamed - o->ns, "%d:%s:%s|", index, name, args);
    o->started = -1;
}

/* Feed text cut at the given piece sizes (0 = whole); returns the feed's
 * last status. */
static int g_bare;
static int run(const char *text, int max_calls, int mode, uint64_t seed, out *o) {
    memset(o, 0, sizeof *o);
    o->started = -1;
    g_next_index = 0;
    toolcall_parser *p = toolcall_new(max_calls);
    toolcall_set_bare(p, g_bare);
    toolcall_sink k = {on_content, on_call, o, on_start, on_args};
    size_t n = strlen(text), i = 0;
    int rc = 0;
    g_rng = seed * 0x9e3779b97f4a7c15ull;
    while (i < n && rc == 0) {
        size_t step = mode == 0 ? n : mode == 1 ? 1 : 1 + (size_t)(rnd() % 7);
        if (step > n - i) step = n - i;
        rc = toolcall_feed(p, text + i, step, &k);
        i += step;
    }
    if (rc == 0) toolcall_finish(p, &k);
    o->content[o->n] = 0;
    o->streamed[o->ns] = 0;
    toolcall_free(p);
    return rc;
}

static void expect(const char *text, int max_calls, const char *content, const char *calls) {
    for (int mode = 0; mode < 3; mode++)
        for (uint64_t seed = 1; seed <= (mode == 2 ? 20u : 1u); seed++) {
            out o;
            run(text, max_calls, mode, seed, &o);
            CHECK(!strcmp(o.content, content) && !strcmp(o.calls, calls) && !o.bad_index,
                  "mode %d seed %llu: %s\n  content '%s' want '%s'\n  calls '%s' want '%s'", mode,
                  (unsigned long long)seed, text, o.content, content, o.calls, calls);
            /* streamed calls add up to the whole ones */
            CHECK(!strcmp(o.streamed, o.calls), "mode %d seed %llu: %s\n  streamed '%s'\n  calls    '%s'", mode,
                  (unsigned long long)seed, text, o.streamed, o.calls);
        }
}

int main(void) {
    /* No calls: the text verbatim, held tails and whitespace included. */
    expect("Hello, world!\n", 0, "Hello, world!\n", "");
    expect("", 0, "", "");
    expect("  \n", 0, "  \n", "");
    expect("a <tool", 0, "a <tool", "");
    expect("a <tool_cal> b < tool_call>", 0, "a <tool_cal> b < tool_call>", "");
    expect("x </tool_call> y", 0, "x </tool_call> y", "");
    /* One call, the template's shape. */
    expect("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>", 0, "",
           "0:get_weather:{\"location\": \"Paris\"}|");
    /* Content before; whitespace separating blocks dropped; parallel calls. */
    expect("Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
           "{\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>\n",
           0, "Let me check.", "0:a:{}|1:b:{\"x\": [1, 2]}|");
    /* Arguments re-serialised as Python writes them; unicode raw. */
    expect("<tool_call>{\"arguments\":{\"t\":1.50,\"s\":\"\\u00e9\xe4\xb8\xad\",\"n\":1E2},\"name\":\"f\"}</tool_call>", 0,
           "", "0:f:{\"t\": 1.5, \"s\": \"\xc3\xa9\xe4\xb8\xad\", \"n\": 100.0}|");
    /* Missing arguments -> {}; duplicate keys: the last one, as Python. */
    expect("<tool_call>{\"name\": \"f\"}</tool_call>", 0, "", "0:f:{}|");
    expect("<tool_call>{\"name\": \"f\", \"name\": \"g\", \"arguments\": {\"a\": 1, \"a\": 2}}</tool_call>", 0, "",
           "0:g:{\"a\": 2}|");
    /* Doubled braces (the Coder-1.5B template's example). */
    expect("<tool_call>\n{{\"name\": \"f\", \"arguments\": {\"a\": 1}}}\n</tool_call>", 0, "", "0:f:{\"a\": 1}|");
    /* Not a call: verbatim content. */
    const char *bad[] = {
        "<tool_call>\nnot json\n</tool_call>",
        "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>",
        "<tool_call>[1]</tool_call>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect(bad[i], 0, bad[i], "");
    /* A bad block between good ones. */
    expect("<tool_call>{\"name\": \"a\"}</tool_call>\n<tool_call>oops</tool_call>\n<tool_call>{\"name\": \"b\"}"
           "</tool_call>",
           0, "<tool_call>oops</tool_call>", "0:a:{}|1:b:{}|");
    /* Text after a call: leading whitespace dropped. */
    expect("<tool_call>{\"name\": \"a\"}</tool_call>\n\nDone.\n", 0, "Done.\n", "0:a:{}|");
    /* Unclosed at the end: a call if the body is complete, else verbatim. */
    expect("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": 1}}\n", 0, "", "0:a:{\"q\": 1}|");
    expect("Sure <tool_call>\n{\"name\": \"a\", \"argu", 0, "Sure<tool_call>\n{\"name\": \"a\", \"argu", "");
    /* max_calls = 1: stop after the first call, the rest ignored. */
    const char *two = "<tool_call>{\"name\": \"a\"}</tool_call>\n<tool_call>{\"name\": \"b\"}</tool_call>";
    expect(two, 1, "", "0:a:{}|");
    out o;
    CHECK(run(two, 1, 0, 1, &o) == 1, "feed returns 1 at max_calls");
    CHECK(run(two, 2, 0, 1, &o) == 1 && !strcmp(o.calls, "0:a:{}|1:b:{}|"), "max_calls 2");
    CHECK(run(two, 0, 0, 1, &o) == 0, "no limit: 0");
    /* Streaming: a block in the template's shape is a call once its
     * arguments begin; they stream re-serialised, in many pieces when the
     * text comes in many; a piece that may begin the closing tag waits. */
    const char *tpl = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"S\\u00e3o\\tPaulo\","
                      " \"days\": [1, 2.50], \"note\": \"a </tool b\"}}\n</tool_call>";
    expect(tpl, 0, "Sure.", "0:get_weather:{\"city\": \"S\xc3\xa3o\\tPaulo\", \"days\": [1, 2.5], \"note\": \"a </tool b\"}|");
    run(tpl, 0, 1, 1, &o);
    CHECK(o.n_pieces > 20, "byte by byte: the arguments came in %d pieces", o.n_pieces);
    {
        /* the name goes out before the arguments are complete */
        toolcall_parser *p = toolcall_new(0);
        out o2;
        memset(&o2, 0, sizeof o2);
        o2.started = -1;
        g_next_index = 0;
        toolcall_sink k = {on_content, on_call, &o2, on_start, on_args};
        const char *part = "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"1+";
        toolcall_feed(p, part, strlen(part), &k);
        o2.streamed[o2.ns] = 0;
        CHECK(o2.started == 0 && !strcmp(o2.streamed, "0:calc:{\"expr\": \"1+") && o2.nc == 0,
              "mid-arguments: streamed '%s'", o2.streamed);
        toolcall_free(p);
    }
    /* The outer brace missing, text after the arguments, arguments cut
     * short by the end of the text: still the call that began. */
    expect("<tool_call>{\"name\": \"f\", \"arguments\": {}</tool_call>", 0, "", "0:f:{}|");
    expect("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"x\": 2}</tool_call>", 0, "", "0:f:{\"a\": 1}|");
    expect("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2", 0, "", "0:f:{\"a\": [1, 2|");
    expect("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1, \"a\": 2}}</tool_call>", 0, "",
           "0:f:{\"a\": 1, \"a\": 2}|");
    /* Long text without tags: held back no more than the tag's length. */
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    expect(big + 1000, 0, big + 1000, "");
    /* Bare mode: the whole answer one call object (the real Coder files). */
    g_bare = 1;
    expect("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", 0, "",
           "0:get_weather:{\"city\": \"Paris\"}|");
    expect("\n {\"name\": \"f\"}\n", 0, "", "0:f:{}|");
    expect("{\"name\": \"f\"} and more", 0, "{\"name\": \"f\"} and more", "");
    expect("{\"a\": 1}", 0, "{\"a\": 1}", "");
    expect("{\"name\": \"f\", \"argu", 0, "{\"name\": \"f\", \"argu", "");
    expect("{ not json <tool_call>{\"name\": \"g\"}</tool_call>", 0, "{ not json", "0:g:{}|");
    expect("Hello {\"name\": \"f\"}", 0, "Hello {\"name\": \"f\"}", "");
    expect("  \n", 0, "  \n", "");
    expect(two, 0, "", "0:a:{}|1:b:{}|");
    expect(two, 1, "", "0:a:{}|");
    g_bare = 0;
    /* Without bare mode the object is content. */
    expect("{\"name\": \"f\"}", 0, "{\"name\": \"f\"}", "");
    return test_summary();
}
