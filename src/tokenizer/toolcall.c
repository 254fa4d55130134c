/* toolcall.c - <tool_call> blocks split out of streamed model text
 * (toolcall.h has the contract). A two-state machine: TEXT holds back what
 * might still become part of an opening tag (and whitespace that would only
 * separate blocks); CALL collects a block's body up to its closing tag. */
#include "tokenizer/toolcall.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "tokenizer/jsonfeed.h"
#include "tokenizer/tojson.h"

static const char OPEN[] = "<tool_call>";
static const char CLOSE[] = "</tool_call>";
#define OPEN_LEN (sizeof OPEN - 1)
#define CLOSE_LEN (sizeof CLOSE - 1)

struct toolcall_parser {
    strbuf hold;     /* TEXT: undecided text; CALL: the block's body so far */
    int in_call;
    int after_block; /* a block ended and no content came since: skip leading whitespace */
    int n_calls, max_calls;
    int done;        /* max_calls reached */
    int bare;        /* toolcall_set_bare: a '{' first holds everything */
    int bare_state;  /* 0 undecided (only whitespace so far), 1 holding a possible bare call, 2 decided: tags only */
    /* CALL: how the block is read. HEAD: its start is still being matched
     * against the template's shape; WHOLE: it is not that shape, read at
     * its end (parse_call); ARGS: a started call, its arguments streaming
     * through `args`; TAIL: its arguments ended, skipping to the tag. */
    enum { B_HEAD, B_WHOLE, B_ARGS, B_TAIL } block;
    char *name;      /* ARGS, TAIL: the started call's name */
    strbuf args;     /* ARGS, TAIL: its arguments as handed out so far */
    jsonfeed args_feed;
};

void toolcall_set_bare(toolcall_parser *p, int on) { p->bare = on; }

toolcall_parser *toolcall_new(int max_calls) {
    toolcall_parser *p = calloc(1, sizeof *p);
    if (p) p->max_calls = max_calls;
    return p;
}

void toolcall_free(toolcall_parser *p) {
    if (!p) return;
    free(p->hold.p);
    free(p->name);
    free(p->args.p);
    free(p);
}

int toolcall_count(const toolcall_parser *p) { return p->n_calls; }

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static const char *find(const char *h, size_t hn, const char *needle, size_t nn) {
    if (hn < nn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == needle[0] && !memcmp(h + i, needle, nn)) return h + i;
    return NULL;
}

static void emit_content(toolcall_parser *p, const char *s, size_t n, const toolcall_sink *k) {
    if (p->after_block) {
        while (n && is_ws(*s)) s++, n--;
        if (!n) return;
        p->after_block = 0;
    }
    if (n && k->content) k->content(k->ctx, s, n);
}

/* Drop the first n bytes of the held text. */
static void hold_drop(toolcall_parser *p, size_t n) {
    memmove(p->hold.p, p->hold.p + n, p->hold.n - n);
    p->hold.n -= n;
    p->hold.p[p->hold.n] = 0;
}

/* The string value of member key of obj (a JSON span); malloc'd or NULL. */
static char *member_string(const char *obj, size_t len, const char *key) {
    const char *v;
    size_t vl;
    if (tojson_member(obj, len, key, &v, &vl, NULL) != 1 || tojson_type(v, vl) != 's') return NULL;
    cJSON *j = cJSON_ParseWithLength(v, vl);
    char *s = cJSON_IsString(j) ? strdup(j->valuestring) : NULL;
    cJSON_Delete(j);
    return s;
}

/* Body -> name + arguments; 1 if it is a call, 0 if not, -1 out of memory. */
static int parse_call(const char *body, size_t n, char **name, char **args) {
    *name = *args = NULL;
    while (n && is_ws(*body)) body++, n--;
    while (n && is_ws(body[n - 1])) n--;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            /* {{ ... }}: the doubled braces of the Coder-1.5B template's example */
            if (n < 4 || body[0] != '{' || body[1] != '{' || body[n - 1] != '}' || body[n - 2] != '}') return 0;
            body++;
            n -= 2;
        }
        if (tojson_type(body, n) != 'o') continue;
        const char *a;
        size_t al;
        int r = tojson_member(body, n, "arguments", &a, &al, NULL);
        if (r < 0) continue; /* not valid JSON */
        if (r == 1 && tojson_type(a, al) != 'o') return 0;
        char *nm = member_string(body, n, "name");
        if (!nm || !*nm) {
            free(nm);
            return 0;
        }
        size_t l;
        if (r == 0) {
            *args = strdup("{}");
        } else if (tojson_dumps(a, al, args, &l, NULL)) {
            free(nm);
            return -1;
        }
        if (!*args) {
            free(nm);
            return -1;
        }
        *name = nm;
        return 1;
    }
    return 0;
}

/* A whole block body: hand out a call, or the block verbatim as content. */
static int close_block(toolcall_parser *p, const char *body, size_t n, int closed, const toolcall_sink *k) {
    char *name, *args;
    int r = parse_call(body, n, &name, &args);
    if (r < 0) return -1;
    if (r == 1) {
        if (k->call) k->call(k->ctx, p->n_calls, name, args);
        p->n_calls++;
        p->after_block = 1;
        free(name);
        free(args);
        if (p->max_calls > 0 && p->n_calls >= p->max_calls) p->done = 1;
        return 0;
    }
    p->after_block = 0;
    emit_content(p, OPEN, OPEN_LEN, k);
    emit_content(p, body, n, k);
    if (closed) emit_content(p, CLOSE, CLOSE_LEN, k);
    return 0;
}

/* Bytes at the end of h[n] that may begin tag (shorter than it). */
static size_t tag_tail(const char *h, size_t n, const char *tag, size_t tag_len) {
    for (size_t l = tag_len - 1; l > 0; l--)
        if (l <= n && !memcmp(h + n - l, tag, l)) return l;
    return 0;
}

static void skip_ws_at(const char *h, size_t n, size_t *i) {
    while (*i < n && is_ws(h[*i])) (*i)++;
}

/* lit at h[*i]: 1 there (*i moved past it), 0 the text ends inside it, -1 not there. */
static int lit_at(const char *h, size_t n, size_t *i, const char *lit) {
    size_t k = strlen(lit), have = n - *i < k ? n - *i : k;
    if (memcmp(h + *i, lit, have)) return -1;
    if (have < k) return 0;
    *i += k;
    return 1;
}

/* The start of a block body in the template's shape,
 *     {"name": "NAME", "arguments": {
 * (any whitespace between the tokens): 1 with *name (malloc'd) and *used
 * (the bytes before the arguments' '{'), 0 the text ends before it is
 * decided, -1 another shape, -2 out of memory. */
static int head_match(const char *h, size_t n, char **name, size_t *used) {
    static const char *const before_name[] = {"{", "\"name\"", ":"};
    static const char *const after_name[] = {",", "\"arguments\"", ":"};
    size_t i = 0;
    int r;
    *name = NULL;
    for (int k = 0; k < 3; k++) {
        skip_ws_at(h, n, &i);
        if ((r = lit_at(h, n, &i, before_name[k])) <= 0) return r;
    }
    skip_ws_at(h, n, &i);
    if (i >= n) return 0;
    if (h[i] != '"') return -1;
    size_t st = i++;
    for (; i < n && h[i] != '"'; i++)
        if (h[i] == '\\') i++;
    if (i >= n) return 0;
    size_t name_end = ++i;
    for (int k = 0; k < 3; k++) {
        skip_ws_at(h, n, &i);
        if ((r = lit_at(h, n, &i, after_name[k])) <= 0) return r;
    }
    skip_ws_at(h, n, &i);
    if (i >= n) return 0;
    if (h[i] != '{') return -1;
    cJSON *j = cJSON_ParseWithLength(h + st, name_end - st);
    if (!cJSON_IsString(j) || !j->valuestring[0]) {
        cJSON_Delete(j);
        return -1;
    }
    *name = strdup(j->valuestring);
    cJSON_Delete(j);
    if (!*name) return -2;
    *used = i;
    return 1;
}

/* A block in the template's shape becomes a call as soon as its arguments
 * begin: the name goes out now, the arguments as they stream. */
static void start_call(toolcall_parser *p, char *name, const toolcall_sink *k) {
    p->name = name;
    p->args.n = 0;
    jsonfeed_init(&p->args_feed);
    p->block = B_ARGS;
    if (k->call_start) k->call_start(k->ctx, p->n_calls, name);
}

/* Arguments text through the re-serialiser; what it decided goes out. */
static void feed_args(toolcall_parser *p, const char *s, size_t n, int end, const toolcall_sink *k) {
    size_t before = p->args.n;
    if (p->block == B_ARGS) jsonfeed_feed(&p->args_feed, s, n, &p->args);
    if (p->block == B_ARGS && jsonfeed_done(&p->args_feed)) p->block = B_TAIL; /* the rest is ignored */
    if (end) jsonfeed_finish(&p->args_feed, &p->args);
    if (p->args.n > before && !p->args.failed && k->call_args)
        k->call_args(k->ctx, p->n_calls, p->args.p + before, p->args.n - before);
}

/* The started call's block ended (its tag, or the end of the text). */
static int end_call(toolcall_parser *p, const toolcall_sink *k) {
    feed_args(p, "", 0, 1, k);
    sb_touch(&p->args);
    if (p->args.failed) return -1;
    if (k->call) k->call(k->ctx, p->n_calls, p->name, p->args.p);
    p->n_calls++;
    p->after_block = 1;
    free(p->name);
    p->name = NULL;
    p->in_call = 0;
    p->block = B_HEAD;
    if (p->max_calls > 0 && p->n_calls >= p->max_calls) p->done = 1;
    return 0;
}

/* Hand out what the held text decides. */
static int step(toolcall_parser *p, const toolcall_sink *k) {
    while (!p->done) {
        char *h = p->hold.p;
        size_t n = p->hold.n;
        if (p->in_call) {
            const char *c = find(h, n, CLOSE, CLOSE_LEN);
            if (p->block == B_HEAD) {
                char *name;
                size_t used = 0; /* set when head_match returns 1 */
                int r = head_match(h, c ? (size_t)(c - h) : n, &name, &used);
                if (r == -2) return -1;
                if (r == 1) {
                    start_call(p, name, k);
                    hold_drop(p, used);
                    continue;
                }
                if (r == 0 && !c) return 0;
                p->block = B_WHOLE;
            }
            if (p->block == B_WHOLE) {
                if (!c) return 0;
                size_t bl = (size_t)(c - h);
                p->in_call = 0;
                p->block = B_HEAD;
                if (close_block(p, h, bl, 1, k)) return -1;
                hold_drop(p, bl + CLOSE_LEN);
                continue;
            }
            /* a started call: everything up to the tag (or what cannot be
             * the start of it) is its arguments */
            size_t take = c ? (size_t)(c - h) : n - tag_tail(h, n, CLOSE, CLOSE_LEN);
            feed_args(p, h, take, 0, k);
            hold_drop(p, take);
            if (!c) return 0;
            hold_drop(p, CLOSE_LEN);
            if (end_call(p, k)) return -1;
            continue;
        }
        const char *o = find(h, n, OPEN, OPEN_LEN);
        if (o) {
            size_t cl = (size_t)(o - h);
            while (cl && is_ws(h[cl - 1])) cl--; /* whitespace before a block only separates */
            emit_content(p, h, cl, k);
            hold_drop(p, (size_t)(o - h) + OPEN_LEN);
            p->in_call = 1;
            p->block = B_HEAD;
            continue;
        }
        /* Keep the longest tail that may begin "<tool_call>", and the
         * whitespace before it. */
        size_t cut = n - tag_tail(h, n, OPEN, OPEN_LEN);
        while (cut && is_ws(h[cut - 1])) cut--;
        emit_content(p, h, cut, k);
        hold_drop(p, cut);
        return 0;
    }
    return 0;
}

int toolcall_feed(toolcall_parser *p, const char *s, size_t n, const toolcall_sink *k) {
    if (p->done) return 1;
    sb_add(&p->hold, s, n);
    sb_touch(&p->hold);
    if (p->hold.failed) return -1;
    if (p->bare && p->bare_state == 0) {
        size_t i = 0;
        while (i < p->hold.n && is_ws(p->hold.p[i])) i++;
        if (i == p->hold.n) return 0; /* only whitespace yet: undecided */
        p->bare_state = p->hold.p[i] == '{' ? 1 : 2;
    }
    if (p->bare_state == 1) return 0; /* everything waits for the end */
    if (step(p, k)) return -1;
    return p->done ? 1 : 0;
}

int toolcall_finish(toolcall_parser *p, const toolcall_sink *k) {
    if (p->done) return 0;
    sb_touch(&p->hold);
    if (p->hold.failed) return -1;
    if (p->bare_state == 1 || (p->bare && p->bare_state == 0)) {
        char *name, *args;
        int r = parse_call(p->hold.p, p->hold.n, &name, &args);
        if (r < 0) return -1;
        if (r == 1) {
            if (k->call) k->call(k->ctx, p->n_calls, name, args);
            p->n_calls++;
            free(name);
            free(args);
            p->hold.n = 0;
            p->hold.p[0] = 0;
            return 0;
        }
        p->bare_state = 2; /* not a bare call: read it as tagged text */
        if (step(p, k)) return -1;
        if (p->done) return 0;
    }
    if (p->in_call && (p->block == B_ARGS || p->block == B_TAIL)) {
        /* a started call cut short: the arguments as far as they came */
        feed_args(p, p->hold.p, p->hold.n, 0, k);
        if (end_call(p, k)) return -1;
    } else if (p->in_call) {
        /* An unclosed block: a call if its body is complete (the model may
         * end right after the JSON), else the text as it came. */
        p->in_call = 0;
        p->block = B_HEAD;
        if (close_block(p, p->hold.p, p->hold.n, 0, k)) return -1;
    } else {
        emit_content(p, p->hold.p, p->hold.n, k);
    }
    p->hold.n = 0;
    p->hold.p[0] = 0;
    return 0;
}
