/* toolout.c - generated text with tool calls -> OpenAI documents (toolout.h). */
#include "server/toolout.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "tokenizer/toolcall.h"

struct api_toolout {
    toolcall_parser *p;
    char req_id[72];
    int index;           /* the choice */
    int n_calls;
    /* streaming: during one feed, the chunks' metadata and the events
     * written so far, in the order the parser hands things out; NULL m:
     * collecting for a whole answer instead */
    const api_meta *m;
    strbuf ev;
    int started;         /* the call begun by on_call_start, -1 none */
    /* whole answer: what the sink collected */
    strbuf content;
    api_tool_call *calls;
    int n_new, cap_new;
    int failed;
};

/* One chunk whose delta is `delta` (taken): the chunk api_sse_chunk makes
 * for an empty delta, with the delta replaced, as "data: {json}\n\n". */
static void add_event(api_toolout *o, cJSON *delta) {
    char *ev = api_sse_chunk_at(API_CHAT, o->m, o->index, NULL, "", 0, NULL, NULL, NULL);
    cJSON *j = ev && strlen(ev) > 8 ? cJSON_Parse(ev + 6) : NULL;
    cJSON *ch = j ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0) : NULL;
    free(ev);
    char *s = NULL;
    if (ch && delta) {
        cJSON_ReplaceItemInObject(ch, "delta", delta);
        delta = NULL;
        s = cJSON_PrintUnformatted(j);
    }
    cJSON_Delete(delta);
    cJSON_Delete(j);
    if (!s) {
        o->failed = 1;
        return;
    }
    sb_str(&o->ev, "data: ");
    sb_str(&o->ev, s);
    sb_str(&o->ev, "\n\n");
    free(s);
}

/* {"tool_calls": [{"index", "id"?, "type"?, "function": {"name"?, "arguments"}}]} */
static cJSON *call_delta(const api_toolout *o, int index, const char *name, const char *args, size_t args_len) {
    cJSON *d = cJSON_CreateObject();
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "tool_calls"), c);
    cJSON_AddNumberToObject(c, "index", index);
    if (name) {
        char id[48];
        tools_call_id(id, o->req_id, index);
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
    }
    cJSON *f = cJSON_AddObjectToObject(c, "function");
    if (name) cJSON_AddStringToObject(f, "name", name);
    char *a = strndup(args, args_len);
    cJSON_AddStringToObject(f, "arguments", a ? a : "");
    free(a);
    return d;
}

static void on_content(void *ctx, const char *s, size_t n) {
    api_toolout *o = ctx;
    if (!o->m) {
        sb_add(&o->content, s, n);
        return;
    }
    char *ev = api_sse_chunk_at(API_CHAT, o->m, o->index, NULL, s, n, NULL, NULL, NULL);
    if (!ev) o->failed = 1;
    sb_str(&o->ev, ev);
    free(ev);
}

/* OpenAI's stream of a call: index, id, type and name with arguments ""
 * first, then the arguments in pieces. */
static void on_call_start(void *ctx, int index, const char *name) {
    api_toolout *o = ctx;
    if (!o->m) return;
    o->started = index;
    add_event(o, call_delta(o, index, name, "", 0));
}

static void on_call_args(void *ctx, int index, const char *s, size_t n) {
    api_toolout *o = ctx;
    if (o->m) add_event(o, call_delta(o, index, NULL, s, n));
}

static void on_call(void *ctx, int index, const char *name, const char *args) {
    api_toolout *o = ctx;
    o->n_calls++;
    if (o->m) {
        /* a call read whole (not the template's shape): one chunk */
        if (o->started != index) add_event(o, call_delta(o, index, name, args, strlen(args)));
        o->started = -1;
        return;
    }
    if (o->n_new == o->cap_new) {
        int nc = o->cap_new ? o->cap_new * 2 : 4;
        api_tool_call *c = realloc(o->calls, (size_t)nc * sizeof *c);
        if (!c) {
            o->failed = 1;
            return;
        }
        o->calls = c;
        o->cap_new = nc;
    }
    api_tool_call *c = &o->calls[o->n_new];
    tools_call_id(c->id, o->req_id, index);
    c->name = strdup(name);
    c->arguments = strdup(args);
    if (!c->name || !c->arguments) {
        free(c->name);
        free(c->arguments);
        o->failed = 1;
        return;
    }
    o->n_new++;
}

static void clear_new(api_toolout *o) {
    for (int i = 0; i < o->n_new; i++) {
        free(o->calls[i].name);
        free(o->calls[i].arguments);
    }
    o->n_new = 0;
    o->content.n = 0;
    if (o->content.p) o->content.p[0] = 0;
}

static toolcall_sink sink_of(api_toolout *o) {
    return (toolcall_sink){on_content, on_call, o, on_call_start, on_call_args};
}

api_toolout *toolout_new(const api_tools *t, const char *req_id, int index) {
    api_toolout *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->p = toolcall_new(t->parallel ? 0 : 1);
    if (!o->p) {
        free(o);
        return NULL;
    }
    toolcall_set_bare(o->p, 1);
    if (index > 0) snprintf(o->req_id, sizeof o->req_id, "%.60sc%d", req_id ? req_id : "", index);
    else snprintf(o->req_id, sizeof o->req_id, "%s", req_id ? req_id : "");
    o->index = index;
    o->started = -1;
    return o;
}

void toolout_free(api_toolout *o) {
    if (!o) return;
    clear_new(o);
    free(o->calls);
    free(o->content.p);
    free(o->ev.p);
    toolcall_free(o->p);
    free(o);
}

const char *toolout_finish(const api_toolout *o, const char *engine_finish) {
    return o->n_calls ? "tool_calls" : engine_finish;
}

/* The events one feed wrote (malloc'd, possibly ""), or NULL when out of
 * memory. */
static char *take_events(api_toolout *o) {
    o->m = NULL;
    sb_touch(&o->ev);
    char *s = o->ev.p;
    int bad = o->failed || o->ev.failed;
    memset(&o->ev, 0, sizeof o->ev);
    if (bad) {
        free(s);
        return NULL;
    }
    return s;
}

char *toolout_sse_piece(api_toolout *o, const api_meta *m, const char *piece, size_t n, int *stop) {
    toolcall_sink k = sink_of(o);
    o->m = m;
    int r = toolcall_feed(o->p, piece, n, &k);
    char *ev = take_events(o);
    if (r < 0) {
        free(ev);
        return NULL;
    }
    if (stop) *stop = r == 1;
    return ev;
}

char *toolout_sse_flush(api_toolout *o, const api_meta *m) {
    toolcall_sink k = sink_of(o);
    o->m = m;
    int r = toolcall_finish(o->p, &k);
    char *ev = take_events(o);
    if (r) {
        free(ev);
        return NULL;
    }
    return ev;
}

int toolout_parse(api_toolout *o, const char *text, size_t len) {
    toolcall_sink k = sink_of(o);
    if (toolcall_feed(o->p, text, len, &k) < 0 || toolcall_finish(o->p, &k) || o->failed || o->content.failed)
        return -1;
    sb_touch(&o->content);
    return o->content.failed ? -1 : 0;
}

const char *toolout_content(const api_toolout *o, size_t *len) {
    *len = o->content.n;
    return o->content.p ? o->content.p : "";
}

void toolout_patch(api_toolout *o, void *choice) {
    cJSON *ch = choice;
    cJSON *msg = ch ? cJSON_GetObjectItem(ch, "message") : NULL;
    if (!msg) return;
    if (o->n_new) {
        if (o->content.n == 0) cJSON_ReplaceItemInObject(msg, "content", cJSON_CreateNull());
        cJSON_AddItemToObject(msg, "tool_calls", tools_calls_json(o->calls, o->n_new, 0, 0));
        cJSON_ReplaceItemInObject(ch, "finish_reason", cJSON_CreateString("tool_calls"));
    }
}

char *toolout_chat_json(api_toolout *o, const api_meta *m, const api_result *r) {
    if (toolout_parse(o, r->text, r->text_len)) return NULL;
    api_result rr = *r;
    rr.text = toolout_content(o, &rr.text_len);
    rr.finish = toolout_finish(o, r->finish);
    char *doc = api_chat_json(m, &rr);
    cJSON *j = doc ? cJSON_Parse(doc) : NULL;
    free(doc);
    cJSON *ch = j ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0) : NULL;
    if (!ch) {
        cJSON_Delete(j);
        clear_new(o);
        return NULL;
    }
    toolout_patch(o, ch);
    clear_new(o);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}
