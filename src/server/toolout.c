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
    /* what the sink collected during one feed */
    strbuf content;
    api_tool_call *calls;
    int n_new, cap_new;
    int failed;
};

static void on_content(void *ctx, const char *s, size_t n) {
    api_toolout *o = ctx;
    sb_add(&o->content, s, n);
}

static void on_call(void *ctx, int index, const char *name, const char *args) {
    api_toolout *o = ctx;
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
    o->n_calls++;
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
    return o;
}

void toolout_free(api_toolout *o) {
    if (!o) return;
    clear_new(o);
    free(o->calls);
    free(o->content.p);
    toolcall_free(o->p);
    free(o);
}

const char *toolout_finish(const api_toolout *o, const char *engine_finish) {
    return o->n_calls ? "tool_calls" : engine_finish;
}

/* The chunk api_sse_chunk makes for an empty delta, with its delta replaced
 * by {"tool_calls": [...]}: "data: {json}\n\n" appended to b. */
static void add_call_chunk(strbuf *b, const api_meta *m, int choice, const api_tool_call *c, int index,
                           int *failed) {
    char *ev = api_sse_chunk_at(API_CHAT, m, choice, NULL, "", 0, NULL, NULL, NULL);
    cJSON *j = ev && strlen(ev) > 8 ? cJSON_Parse(ev + 6) : NULL;
    cJSON *ch = j ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0) : NULL;
    free(ev);
    if (!ch) {
        cJSON_Delete(j);
        *failed = 1;
        return;
    }
    cJSON *delta = cJSON_CreateObject();
    cJSON_AddItemToObject(delta, "tool_calls", tools_calls_json(c, 1, 1, index));
    cJSON_ReplaceItemInObject(ch, "delta", delta);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) {
        *failed = 1;
        return;
    }
    sb_str(b, "data: ");
    sb_str(b, s);
    sb_str(b, "\n\n");
    free(s);
}

/* Events for what the last feed collected. */
static char *events(api_toolout *o, const api_meta *m) {
    strbuf b = {0};
    sb_touch(&b);
    if (o->content.n) {
        char *ev = api_sse_chunk_at(API_CHAT, m, o->index, NULL, o->content.p, o->content.n, NULL, NULL, NULL);
        if (!ev) o->failed = 1;
        sb_str(&b, ev);
        free(ev);
    }
    for (int i = 0; i < o->n_new; i++) add_call_chunk(&b, m, o->index, &o->calls[i], o->n_calls - o->n_new + i, &o->failed);
    clear_new(o);
    if (o->failed || b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

char *toolout_sse_piece(api_toolout *o, const api_meta *m, const char *piece, size_t n, int *stop) {
    toolcall_sink k = {on_content, on_call, o};
    int r = toolcall_feed(o->p, piece, n, &k);
    if (r < 0) return NULL;
    if (stop) *stop = r == 1;
    return events(o, m);
}

char *toolout_sse_flush(api_toolout *o, const api_meta *m) {
    toolcall_sink k = {on_content, on_call, o};
    if (toolcall_finish(o->p, &k)) return NULL;
    return events(o, m);
}

int toolout_parse(api_toolout *o, const char *text, size_t len) {
    toolcall_sink k = {on_content, on_call, o};
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
