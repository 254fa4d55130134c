/* chat.c - the chat templates qwenc renders, written out in C, and the
 * recognition of a model's template among them.
 *
 * The Jinja template of Qwen/Qwen2.5-*-Instruct's tokenizer_config.json
 * (src/tokenizer/chat_known.h has its exact text) does:
 *
 *   if tools:  system turn = (messages[0] if system, else the default)
 *              + "\n\n# Tools..." + each tool | tojson + the call format
 *   else:      system turn = messages[0] if system, else the default
 *   for each message:
 *     user, later system, assistant without tool_calls
 *         -> <|im_start|>{role}\n{content}<|im_end|>\n
 *     assistant with tool_calls -> content (if any) then one
 *         <tool_call>\n{"name": ..., "arguments": tojson}\n</tool_call> each
 *     tool -> grouped into one user turn of <tool_response> blocks
 *     (the first system message was already rendered; other roles: nothing)
 *   add_generation_prompt -> <|im_start|>assistant\n
 *
 * Qwen2.5-Coder-1.5B-Instruct's GGUF carries the same template except one
 * string literal: its call-format example reads {{"name": ...}} (doubled
 * braces inside a Jinja string literal render as is).
 *
 * Qwen3's template (render_qwen3; tokenizer.h sums it up) differs in the
 * system turn (no default), in <think> blocks on the assistant turns after
 * the last real user query, and in the separators around tool calls; the
 * Python string operations it uses (split, strip('\n'), ...) are spelled
 * out on spans.
 *
 * tests/tokenizer/test_chat_tools.c compares the output with transformers'
 * apply_chat_template (tools/make_chat_corpus.py, tools/make_tok_corpus.py).
 */
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "tokenizer/chat_known.h"
#include "tokenizer/tojson.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

/* ---- recognition -------------------------------------------------------- */

static int same_text(const char *a, size_t alen, const char *known, size_t klen) {
    return alen == klen && !memcmp(a, known, klen);
}

qw_chat_family chat_template_family(const char *text, size_t len) {
    if (!text) return CHAT_NONE;
    if (same_text(text, len, CHAT_TEMPLATE_QWEN25, sizeof CHAT_TEMPLATE_QWEN25 - 1)) return CHAT_QWEN25;
    if (same_text(text, len, CHAT_TEMPLATE_QWEN25_CODER, sizeof CHAT_TEMPLATE_QWEN25_CODER - 1))
        return CHAT_QWEN25_CODER;
    if (same_text(text, len, CHAT_TEMPLATE_QWEN3, sizeof CHAT_TEMPLATE_QWEN3 - 1)) return CHAT_QWEN3;
    return CHAT_UNKNOWN;
}

const char *chat_family_name(qw_chat_family f) {
    switch (f) {
    case CHAT_NONE: return "none";
    case CHAT_QWEN25: return "qwen2.5";
    case CHAT_QWEN25_CODER: return "qwen2.5-coder";
    case CHAT_QWEN3: return "qwen3";
    default: return "unknown";
    }
}

qw_chat_family tok_chat_family(const qw_tok *t) { return t->chat_family; }

const char *tok_chat_template(const qw_tok *t, size_t *len) {
    if (len) *len = t->chat_template_len;
    return t->chat_template;
}

void tok_set_chat_family(qw_tok *t, qw_chat_family f) { t->chat_family = f; }

/* ---- rendering ---------------------------------------------------------- */

static int role_is(const qw_chat_msg *m, const char *r) { return m->role && !strcmp(m->role, r); }

/* Append tojson(json) (transformers' filter); -1 with a message on bad JSON. */
static int add_tojson(strbuf *b, const char *json, size_t len, const char *what, qw_err *err) {
    char *s;
    size_t n;
    if (tojson_dumps(json, len, &s, &n, err)) return qw_err_prefix(err, "chat_render: %s", what);
    sb_add(b, s, n);
    free(s);
    return 0;
}

static const char TOOLS_HEAD[] = "\n\n# Tools\n\nYou may call one or more functions to assist with the user "
                                 "query.\n\nYou are provided with function signatures within <tools></tools> "
                                 "XML tags:\n<tools>";
static const char TOOLS_TAIL_A[] = "\n</tools>\n\nFor each function call, return a json object with function "
                                   "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n";
static const char TOOLS_TAIL_B[] = "\n</tool_call><|im_end|>\n";

static int render_tools_system(strbuf *b, qw_chat_family fam, const qw_chat_msg *first, const char *tools,
                               size_t tools_len, size_t n_tools, qw_err *err) {
    sb_str(b, "<|im_start|>system\n");
    if (first && role_is(first, "system")) sb_str(b, first->content);
    else sb_str(b, QW_DEFAULT_SYSTEM);
    sb_str(b, TOOLS_HEAD);
    for (size_t i = 0; i < n_tools; i++) {
        const char *v;
        size_t vl;
        if (tojson_item(tools, tools_len, i, &v, &vl, err) != 1) return qw_err_prefix(err, "chat_render: tools");
        sb_str(b, "\n");
        if (add_tojson(b, v, vl, "tools", err)) return -1;
    }
    sb_str(b, TOOLS_TAIL_A);
    sb_str(b, fam == CHAT_QWEN25_CODER ? "{{\"name\": <function-name>, \"arguments\": <args-json-object>}}"
                                       : "{\"name\": <function-name>, \"arguments\": <args-json-object>}");
    sb_str(b, TOOLS_TAIL_B);
    return 0;
}

/* Number of elements of the JSON array tools[len]; -1 if it is not one. */
static long count_tools(const char *tools, size_t len, qw_err *err) {
    if (tojson_type(tools, len) != 'a') return qw_errf(err, "chat_render: tools must be a JSON array");
    long n = 0;
    for (;; n++) {
        const char *v;
        size_t vl;
        int r = tojson_item(tools, len, (size_t)n, &v, &vl, err);
        if (r < 0) return qw_err_prefix(err, "chat_render: tools");
        if (r == 0) return n;
    }
}

/* ---- Qwen3 -------------------------------------------------------------- */

typedef struct span {
    const char *p;
    size_t n;
} span;

static span sp(const char *s) { return (span){s ? s : "", s ? strlen(s) : 0}; }
static span lstrip_nl(span x) {
    while (x.n && *x.p == '\n') x.p++, x.n--;
    return x;
}
static span rstrip_nl(span x) {
    while (x.n && x.p[x.n - 1] == '\n') x.n--;
    return x;
}
/* Offset of the first / last occurrence of w in x, or -1. */
static long find_first(span x, const char *w) {
    size_t k = strlen(w);
    for (size_t i = 0; i + k <= x.n; i++)
        if (!memcmp(x.p + i, w, k)) return (long)i;
    return -1;
}
static long find_last(span x, const char *w) {
    size_t k = strlen(w);
    for (size_t i = x.n >= k ? x.n - k + 1 : 0; i-- > 0;)
        if (!memcmp(x.p + i, w, k)) return (long)i;
    return -1;
}
static int starts_with(span x, const char *w) { return x.n >= strlen(w) && !memcmp(x.p, w, strlen(w)); }
static int ends_with(span x, const char *w) {
    size_t k = strlen(w);
    return x.n >= k && !memcmp(x.p + x.n - k, w, k);
}
static void sb_span(strbuf *b, span x) { sb_add(b, x.p, x.n); }

static int render_qwen3(strbuf *b, const qw_chat_opts *o, const qw_chat_msg *msgs, size_t n_msgs, size_t n_tools,
                        qw_err *err) {
    int first_system = n_msgs && role_is(&msgs[0], "system");
    if (n_tools) {
        sb_str(b, "<|im_start|>system\n");
        if (first_system) {
            sb_str(b, msgs[0].content);
            sb_str(b, "\n\n");
        }
        sb_str(b, TOOLS_HEAD + 2); /* "# Tools..." without the two leading newlines */
        for (size_t i = 0; i < n_tools; i++) {
            const char *v;
            size_t vl;
            if (tojson_item(o->tools, o->tools_len, i, &v, &vl, err) != 1) return qw_err_prefix(err, "chat_render: tools");
            sb_str(b, "\n");
            if (add_tojson(b, v, vl, "tools", err)) return -1;
        }
        sb_str(b, TOOLS_TAIL_A);
        sb_str(b, "{\"name\": <function-name>, \"arguments\": <args-json-object>}");
        sb_str(b, TOOLS_TAIL_B);
    } else if (first_system) {
        sb_str(b, "<|im_start|>system\n");
        sb_str(b, msgs[0].content);
        sb_str(b, "<|im_end|>\n");
    }
    /* The last user message that is not a wrapped tool response. */
    size_t last_query = n_msgs ? n_msgs - 1 : 0;
    for (size_t k = n_msgs; k-- > 0;) {
        span c = sp(msgs[k].content);
        if (role_is(&msgs[k], "user") && !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }
    for (size_t i = 0; i < n_msgs; i++) {
        const qw_chat_msg *m = &msgs[i];
        int last = i + 1 == n_msgs;
        if (role_is(m, "user") || (role_is(m, "system") && i > 0)) {
            sb_str(b, "<|im_start|>");
            sb_str(b, m->role);
            sb_str(b, "\n");
            sb_str(b, m->content);
            sb_str(b, "<|im_end|>\n");
        } else if (role_is(m, "assistant")) {
            span content = sp(m->content), reasoning = {"", 0};
            if (m->reasoning_content) {
                reasoning = sp(m->reasoning_content);
            } else if (find_first(content, "</think>") >= 0) {
                span all = content;
                long lt = find_last(all, "</think>"), ft = find_first(all, "</think>");
                content = lstrip_nl((span){all.p + lt + 8, all.n - (size_t)lt - 8});
                span before = rstrip_nl((span){all.p, (size_t)ft});
                long th = find_last(before, "<think>");
                if (th >= 0) before = (span){before.p + th + 7, before.n - (size_t)th - 7};
                reasoning = lstrip_nl(before);
            }
            sb_str(b, "<|im_start|>assistant\n");
            if (i > last_query && (last || reasoning.n)) {
                sb_str(b, "<think>\n");
                sb_span(b, lstrip_nl(rstrip_nl(reasoning)));
                sb_str(b, "\n</think>\n\n");
                sb_span(b, lstrip_nl(content));
            } else {
                sb_span(b, content);
            }
            for (size_t k = 0; k < m->n_tool_calls; k++) {
                const qw_tool_call *c = &m->tool_calls[k];
                if (k > 0 || content.n) sb_str(b, "\n");
                sb_str(b, "<tool_call>\n{\"name\": \"");
                sb_str(b, c->name);
                sb_str(b, "\", \"arguments\": ");
                const char *a = c->arguments ? c->arguments : "{}";
                if (add_tojson(b, a, strlen(a), "tool call arguments", err)) return -1;
                sb_str(b, "}\n</tool_call>");
            }
            sb_str(b, "<|im_end|>\n");
        } else if (role_is(m, "tool")) {
            if (i == 0 || !role_is(&msgs[i - 1], "tool")) sb_str(b, "<|im_start|>user");
            sb_str(b, "\n<tool_response>\n");
            sb_str(b, m->content);
            sb_str(b, "\n</tool_response>");
            if (last || !role_is(&msgs[i + 1], "tool")) sb_str(b, "<|im_end|>\n");
        }
    }
    if (o->add_generation_prompt) {
        sb_str(b, "<|im_start|>assistant\n");
        if (o->no_thinking) sb_str(b, "<think>\n\n</think>\n\n");
    }
    return 0;
}

int chat_render_opts(const qw_chat_opts *o, const qw_chat_msg *msgs, size_t n_msgs, char **out, size_t *len,
                     qw_err *err) {
    *out = NULL;
    *len = 0;
    if (n_msgs && !msgs) return qw_errf(err, "chat_render: NULL messages");
    if (o->family != CHAT_QWEN25 && o->family != CHAT_QWEN25_CODER && o->family != CHAT_QWEN3)
        return qw_errf(err, "chat_render: the '%s' chat template is not rendered by qwenc", chat_family_name(o->family));
    long n_tools = 0;
    if (o->tools && (n_tools = count_tools(o->tools, o->tools_len, err)) < 0) return -1;
    strbuf b = {0};
    if (o->family == CHAT_QWEN3) {
        if (render_qwen3(&b, o, msgs, n_msgs, (size_t)n_tools, err)) goto fail;
        goto done;
    }
    const qw_chat_msg *first = n_msgs ? &msgs[0] : NULL;
    if (n_tools > 0) {
        if (render_tools_system(&b, o->family, first, o->tools, o->tools_len, (size_t)n_tools, err)) goto fail;
    } else {
        sb_str(&b, "<|im_start|>system\n");
        if (first && role_is(first, "system")) sb_str(&b, first->content);
        else sb_str(&b, QW_DEFAULT_SYSTEM);
        sb_str(&b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n_msgs; i++) {
        const qw_chat_msg *m = &msgs[i];
        int assistant = role_is(m, "assistant");
        if (role_is(m, "user") || (role_is(m, "system") && i > 0) || (assistant && m->n_tool_calls == 0)) {
            sb_str(&b, "<|im_start|>");
            sb_str(&b, m->role);
            sb_str(&b, "\n");
            sb_str(&b, m->content);
            sb_str(&b, "<|im_end|>\n");
        } else if (assistant) {
            sb_str(&b, "<|im_start|>assistant");
            if (m->content && m->content[0]) {
                sb_str(&b, "\n");
                sb_str(&b, m->content);
            }
            for (size_t k = 0; k < m->n_tool_calls; k++) {
                const qw_tool_call *c = &m->tool_calls[k];
                sb_str(&b, "\n<tool_call>\n{\"name\": \"");
                sb_str(&b, c->name);
                sb_str(&b, "\", \"arguments\": ");
                const char *a = c->arguments ? c->arguments : "{}";
                if (add_tojson(&b, a, strlen(a), "tool call arguments", err)) goto fail;
                sb_str(&b, "}\n</tool_call>");
            }
            sb_str(&b, "<|im_end|>\n");
        } else if (role_is(m, "tool")) {
            if (i == 0 || !role_is(&msgs[i - 1], "tool")) sb_str(&b, "<|im_start|>user");
            sb_str(&b, "\n<tool_response>\n");
            sb_str(&b, m->content);
            sb_str(&b, "\n</tool_response>");
            if (i + 1 == n_msgs || !role_is(&msgs[i + 1], "tool")) sb_str(&b, "<|im_end|>\n");
        }
    }
    if (o->add_generation_prompt) sb_str(&b, "<|im_start|>assistant\n");
done:
    sb_touch(&b);
    if (b.failed) {
        qw_errf(err, "chat_render: out of memory");
        goto fail;
    }
    *out = b.p;
    *len = b.n;
    return 0;
fail:
    free(b.p);
    return -1;
}

int chat_render(const qw_chat_msg *msgs, size_t n_msgs, int add_generation_prompt, char **out, size_t *len,
                qw_err *err) {
    qw_chat_opts o = {.family = CHAT_QWEN25, .add_generation_prompt = add_generation_prompt};
    return chat_render_opts(&o, msgs, n_msgs, out, len, err);
}

int chat_encode_opts(const qw_tok *t, const qw_chat_opts *opts, const qw_chat_msg *msgs, size_t n_msgs, int32_t **ids,
                     size_t *n, qw_err *err) {
    *ids = NULL;
    *n = 0;
    qw_chat_family f = tok_chat_family(t);
    switch (f) {
    case CHAT_QWEN25:
    case CHAT_QWEN25_CODER:
    case CHAT_QWEN3: break;
    case CHAT_NONE:
        return qw_errf(err, "the model's files carry no chat template (tokenizer_config.json chat_template / GGUF "
                            "tokenizer.chat_template): chat is refused, raw completions work");
    default:
        return qw_errf(err, "the model's chat template is not one qwenc knows (Qwen2.5-Instruct, Qwen2.5-Coder, Qwen3): "
                            "chat is refused rather than rendered with the wrong template; raw completions work");
    }
    qw_chat_opts o = *opts;
    o.family = f;
    char *s;
    size_t len;
    if (chat_render_opts(&o, msgs, n_msgs, &s, &len, err)) return -1;
    int rc = tok_encode(t, s, len, ids, n, err);
    free(s);
    return rc;
}

int chat_encode_tools(const qw_tok *t, const qw_chat_msg *msgs, size_t n_msgs, const char *tools, size_t tools_len,
                      int add_generation_prompt, int32_t **ids, size_t *n, qw_err *err) {
    qw_chat_opts o = {.tools = tools, .tools_len = tools_len, .add_generation_prompt = add_generation_prompt};
    return chat_encode_opts(t, &o, msgs, n_msgs, ids, n, err);
}

int chat_encode(const qw_tok *t, const qw_chat_msg *msgs, size_t n_msgs, int add_generation_prompt, int32_t **ids,
                size_t *n, qw_err *err) {
    return chat_encode_tools(t, msgs, n_msgs, NULL, 0, add_generation_prompt, ids, n, err);
}
