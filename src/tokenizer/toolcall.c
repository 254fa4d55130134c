/* toolcall.c - <tool_call> blocks split out of streamed model text
 * (toolcall.h has the contract). A two-state machine: TEXT holds back what
 * might still become part of an opening tag (and whitespace that would only
 * separate blocks); CALL collects a block's body up to its closing tag. */
#include "tokenizer/toolcall.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
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

/* Hand out what the held text decides. */
static int step(toolcall_parser *p, const toolcall_sink *k) {
    while (!p->done) {
        char *h = p->hold.p;
        size_t n = p->hold.n;
        if (p->in_call) {
            const char *c = find(h, n, CLOSE, CLOSE_LEN);
            if (!c) return 0;
            size_t bl = (size_t)(c - h);
            p->in_call = 0;
            if (close_block(p, h, bl, 1, k)) return -1;
            hold_drop(p, bl + CLOSE_LEN);
            continue;
        }
        const char *o = find(h, n, OPEN, OPEN_LEN);
        if (o) {
            size_t cl = (size_t)(o - h);
            while (cl && is_ws(h[cl - 1])) cl--; /* whitespace before a block only separates */
            emit_content(p, h, cl, k);
            hold_drop(p, (size_t)(o - h) + OPEN_LEN);
            p->in_call = 1;
            continue;
        }
        /* Keep the longest tail that may begin "<tool_call>", and the
         * whitespace before it. */
        size_t keep = 0;
        for (size_t l = OPEN_LEN - 1; l > 0; l--)
            if (l <= n && !memcmp(h + n - l, OPEN, l)) {
                keep = l;
                break;
            }
        size_t cut = n - keep;
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
    if (p->in_call) {
        /* An unclosed block: a call if its body is complete (the model may
         * end right after the JSON), else the text as it came. */
        p->in_call = 0;
        if (close_block(p, p->hold.p, p->hold.n, 0, k)) return -1;
    } else {
        emit_content(p, p->hold.p, p->hold.n, k);
    }
    p->hold.n = 0;
    p->hold.p[0] = 0;
    return 0;
}
