/* api.c - request parsing and response documents of every protocol: the HTTP
 * APIs, the Unix socket line and the stdin line (api.h). */
#include "server/api.h"

#include "server/infill.h"
#include "server/jsonstrict.h"
#include "server/tools.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- errors ------------------------------------------------------------ */

static const char *type_for(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 500: return "server_error";
    case 503: return "server_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

/* Length of the valid UTF-8 character at s[0..n), or 0 if invalid
 * (utf8proc refuses overlong forms, surrogates and code points past
 * U+10FFFF). */
static size_t utf8_char_len(const unsigned char *s, size_t n) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate(s, (utf8proc_ssize_t)n, &cp);
    return k > 0 ? (size_t)k : 0;
}

/* Replace bytes that are not valid UTF-8 by '?' (a message may quote a
 * client's string cut at a byte limit). */
static void utf8_scrub(char *str) {
    unsigned char *s = (unsigned char *)str;
    size_t n = strlen(str);
    for (size_t i = 0; i < n;) {
        size_t l = utf8_char_len(s + i, n - i);
        if (l == 0) {
            s[i] = '?';
            l = 1;
        }
        i += l;
    }
}

int api_fail(api_error *e, int status, const char *code, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = type_for(status);
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    utf8_scrub(e->message);
    utf8_scrub(e->param);
    return -1;
}

int api_model_not_found(api_error *e, const char *name, const char *served) {
    api_fail(e, 404, "model_not_found", "model", "the model '%.100s' does not exist; this server serves '%.100s'",
             name, served);
    e->type = "invalid_request_error"; /* as OpenAI answers */
    return -1;
}

char *api_error_json(const api_error *e) {
    cJSON *root = cJSON_CreateObject();
    cJSON *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", e->message);
    cJSON_AddStringToObject(err, "type", e->type ? e->type : type_for(e->status));
    if (e->param[0]) cJSON_AddStringToObject(err, "param", e->param);
    else cJSON_AddNullToObject(err, "param");
    if (e->code) cJSON_AddStringToObject(err, "code", e->code);
    else cJSON_AddNullToObject(err, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *api_utf8_lossy(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    char *out = malloc(len * 3 + 1); /* each bad byte becomes 3 */
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t l = utf8_char_len(s + i, len - i);
        if (l == 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, s + i, l);
        o += l;
        i += l;
    }
    out[o] = '\0';
    return out;
}

int api_utf8_valid(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < len;) {
        size_t l = utf8_char_len(s + i, len - i);
        if (l == 0) return 0;
        i += l;
    }
    return 1;
}

/* ---- field helpers ----------------------------------------------------- */

static int is_present(const cJSON *j) { return j && !cJSON_IsNull(j); }

/* Integer field in [lo, hi]; absent or null leaves *out. */
static int get_int(const cJSON *o, const char *name, long long lo, long long hi, long long *out,
                   api_error *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!is_present(j)) return 0;
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) || j->valuedouble != floor(j->valuedouble))
        return api_fail(e, 400, "invalid_type", name, "'%s' must be an integer", name);
    double v = j->valuedouble;
    if (v < (double)lo || v > (double)hi)
        return api_fail(e, 400, "invalid_value", name, "'%s' is %.0f; it must be in [%lld, %lld]", name, v,
                        lo, hi);
    *out = (long long)v;
    return 1;
}

static int get_num(const cJSON *o, const char *name, double lo, double hi, float *out, api_error *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!is_present(j)) return 0;
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return api_fail(e, 400, "invalid_type", name, "'%s' must be a number", name);
    double v = j->valuedouble;
    if (v < lo || v > hi)
        return api_fail(e, 400, "invalid_value", name, "'%s' is %g; it must be in [%g, %g]", name, v, lo, hi);
    *out = (float)v;
    return 1;
}

static int get_bool(const cJSON *o, const char *name, int *out, api_error *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!is_present(j)) return 0;
    if (!cJSON_IsBool(j)) return api_fail(e, 400, "invalid_type", name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(j) ? 1 : 0;
    return 1;
}

int api_get_str(const void *o, const char *name, const char **out, api_error *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
    *out = NULL;
    if (!is_present(j)) return 0;
    if (!cJSON_IsString(j)) return api_fail(e, 400, "invalid_type", name, "'%s' must be a string", name);
    *out = j->valuestring;
    return 1;
}

int api_parse_sampling(const void *json, qw_sampling *s, api_error *e) {
    const cJSON *o = json;
    long long ll;
    int rc;
    if (get_num(o, "temperature", 0, 2, &s->temperature, e) < 0) return -1;
    if (get_num(o, "top_p", 0, 1, &s->top_p, e) < 0) return -1;
    if ((rc = get_int(o, "top_k", 0, 1 << 30, &ll, e)) < 0) return -1;
    if (rc) s->top_k = (int)ll;
    if (get_num(o, "min_p", 0, 1, &s->min_p, e) < 0) return -1;
    if (get_num(o, "presence_penalty", -2, 2, &s->presence_penalty, e) < 0) return -1;
    if (get_num(o, "frequency_penalty", -2, 2, &s->frequency_penalty, e) < 0) return -1;
    if (get_num(o, "repetition_penalty", 0.01, 100, &s->repeat_penalty, e) < 0) return -1;
    if (get_num(o, "repeat_penalty", 0.01, 100, &s->repeat_penalty, e) < 0) return -1;
    if ((rc = get_int(o, "repeat_last_n", 0, 1 << 30, &ll, e)) < 0) return -1;
    if (rc) s->repeat_last_n = (int)ll;
    /* OpenAI's seed is an int64; any integer is taken modulo 2^64. */
    if ((rc = get_int(o, "seed", -9007199254740991LL, 9007199254740991LL, &ll, e)) < 0) return -1;
    if (rc) s->seed = (uint64_t)ll;
    return 0;
}

/* ---- unsupported fields ------------------------------------------------- */

/* n, best_of, logprobs, top_logprobs, echo. */
static int parse_choices(const cJSON *o, api_kind kind, api_req *r, api_error *e) {
    long long n = 1, best = -1, k = 0;
    if (get_int(o, "n", 1, API_MAX_N, &n, e) < 0) return -1;
    int got_best = get_int(o, "best_of", 1, API_MAX_N, &best, e);
    if (got_best < 0) return -1;
    if (got_best && best != n)
        return api_fail(e, 400, "unsupported_value", "best_of",
                        "'best_of' must equal 'n' (%lld): every sequence is returned, none is picked", n);
    r->n = (int)n;
    if (kind == API_CHAT) {
        if (get_bool(o, "logprobs", &r->logprobs, e) < 0) return -1;
        int got = get_int(o, "top_logprobs", 0, QW_MAX_TOP_LOGPROBS, &k, e);
        if (got < 0) return -1;
        if (got && !r->logprobs)
            return api_fail(e, 400, "invalid_value", "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r->top_logprobs = (int)k;
    } else {
        /* An integer (the alternatives per token); false, like null, is off. */
        const cJSON *lpj = cJSON_GetObjectItemCaseSensitive(o, "logprobs");
        int got = cJSON_IsFalse(lpj) ? 0 : get_int(o, "logprobs", 0, QW_MAX_TOP_LOGPROBS, &k, e);
        if (got < 0) return -1;
        r->logprobs = got;
        r->top_logprobs = (int)k;
        if (get_bool(o, "echo", &r->echo, e) < 0) return -1;
    }
    return 0;
}

static int unsupported(const cJSON *o, api_kind kind, api_error *e) {
    const cJSON *j;
    /* tools / tool_choice / parallel_tool_calls / functions: tools_parse()
     * for chat; a completion has no messages to call from. */
    if (kind != API_CHAT) {
        static const char *const chat_only[] = {"tools", "tool_choice", "functions", "function_call"};
        for (int i = 0; i < 4; i++) {
            j = cJSON_GetObjectItemCaseSensitive(o, chat_only[i]);
            if (is_present(j) && !(cJSON_IsArray(j) && cJSON_GetArraySize(j) == 0))
                return api_fail(e, 400, "unsupported_field", chat_only[i],
                                "'%s' (function calling) is only served on /v1/chat/completions", chat_only[i]);
        }
    }
    j = cJSON_GetObjectItemCaseSensitive(o, "logit_bias");
    if (is_present(j) && !(cJSON_IsObject(j) && !j->child))
        return api_fail(e, 400, "unsupported_field", "logit_bias", "'logit_bias' is not supported");
    static const char *const never[] = {"audio", "prediction", "web_search_options"};
    for (int i = 0; i < 3; i++) {
        j = cJSON_GetObjectItemCaseSensitive(o, never[i]);
        if (is_present(j))
            return api_fail(e, 400, "unsupported_field", never[i], "'%s' is not supported", never[i]);
    }
    j = cJSON_GetObjectItemCaseSensitive(o, "modalities");
    if (is_present(j)) {
        int ok = cJSON_IsArray(j);
        const cJSON *it;
        cJSON_ArrayForEach(it, j) if (!cJSON_IsString(it) || strcmp(it->valuestring, "text")) ok = 0;
        if (!ok)
            return api_fail(e, 400, "unsupported_field", "modalities", "only the \"text\" modality is supported");
    }
    if (kind == API_CHAT) {
        j = cJSON_GetObjectItemCaseSensitive(o, "suffix");
        if (is_present(j))
            return api_fail(e, 400, "unsupported_field", "suffix",
                            "'suffix' (code infill) is served on /v1/completions and /infill, not chat");
    }
    return 0;
}

/* ---- stop -------------------------------------------------------------- */

#define API_MAX_STOP 16
#define API_MAX_STOP_LEN 256

static int add_stop(api_req *r, const char *s, api_error *e) {
    if (!s[0]) return 0; /* an empty stop string never matches */
    if (strlen(s) > API_MAX_STOP_LEN)
        return api_fail(e, 400, "invalid_value", "stop", "a stop string is longer than %d bytes", API_MAX_STOP_LEN);
    char *c = strdup(s);
    if (!c) return api_fail(e, 500, "out_of_memory", "stop", "out of memory");
    r->stop[r->n_stop++] = c;
    return 0;
}

static int parse_stop(const cJSON *o, api_req *r, api_error *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (!is_present(j)) return 0;
    if (cJSON_IsString(j)) {
        r->stop = calloc(1, sizeof *r->stop);
        if (!r->stop) return api_fail(e, 500, "out_of_memory", "stop", "out of memory");
        return add_stop(r, j->valuestring, e);
    }
    if (!cJSON_IsArray(j))
        return api_fail(e, 400, "invalid_type", "stop", "'stop' must be a string or a list of strings");
    int n = cJSON_GetArraySize(j);
    if (n > API_MAX_STOP)
        return api_fail(e, 400, "invalid_value", "stop", "'stop' has %d strings; at most %d", n, API_MAX_STOP);
    r->stop = calloc((size_t)(n ? n : 1), sizeof *r->stop);
    if (!r->stop) return api_fail(e, 500, "out_of_memory", "stop", "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, j) {
        if (!cJSON_IsString(it))
            return api_fail(e, 400, "invalid_type", "stop", "'stop' must be a string or a list of strings");
        if (add_stop(r, it->valuestring, e) < 0) return -1;
    }
    return 0;
}

/* ---- prompts ----------------------------------------------------------- */

static int set_prompt(api_req *r, int32_t *ids, size_t n, const api_limits *lim, const char *param,
                      api_error *e) {
    r->prompt = ids;
    if (n == 0)
        return api_fail(e, 400, "invalid_value", param, "the prompt is empty (no tokens)");
    if (n >= (size_t)lim->n_ctx)
        return api_fail(e, 400, "context_length_exceeded", param,
                        "the prompt is %zu tokens; this server's context is %d tokens (prompt plus output)", n,
                        lim->n_ctx);
    r->n_prompt = (int)n;
    return 0;
}

/* Content of a message: a string, null, or a list of {"type":"text"} parts
 * (joined). Returns a malloc'd string. */
static int message_content(const cJSON *c, int idx, char **out, api_error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", idx);
    *out = NULL;
    if (!is_present(c)) {
        *out = strdup("");
    } else if (cJSON_IsString(c)) {
        *out = strdup(c->valuestring);
    } else if (cJSON_IsArray(c)) {
        size_t total = 1;
        const cJSON *p;
        cJSON_ArrayForEach(p, c) {
            const cJSON *t = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "type") : NULL;
            const cJSON *tx = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "text") : NULL;
            if (!cJSON_IsString(t))
                return api_fail(e, 400, "invalid_type", param, "each part of '%s' must be an object with a \"type\"",
                                param);
            if (strcmp(t->valuestring, "text") != 0)
                return api_fail(e, 400, "unsupported_field", param,
                                "content parts of type \"%.40s\" are not supported (text only)", t->valuestring);
            if (!cJSON_IsString(tx))
                return api_fail(e, 400, "invalid_type", param, "a text part of '%s' needs a string \"text\"", param);
            total += strlen(tx->valuestring);
        }
        char *s = malloc(total);
        if (!s) return api_fail(e, 500, "out_of_memory", param, "out of memory");
        size_t at = 0;
        cJSON_ArrayForEach(p, c) {
            const char *tx = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
            size_t l = strlen(tx);
            memcpy(s + at, tx, l);
            at += l;
        }
        s[at] = '\0';
        *out = s;
        return 0;
    } else {
        return api_fail(e, 400, "invalid_type", param, "'%s' must be a string, null or a list of text parts", param);
    }
    if (!*out) return api_fail(e, 500, "out_of_memory", param, "out of memory");
    return 0;
}

static int parse_messages(const cJSON *o, const char *body, size_t len, const api_limits *lim, api_req *r,
                          api_tools *tools_out, api_error *e) {
    api_tools tools;
    if (tools_parse(o, body, len, &tools, e) < 0) return -1;
    *tools_out = tools;
    qw_chat_opts opts = {.add_generation_prompt = 1};
    if (tools.mode != TOOLS_OFF) {
        opts.tools = tools.json;
        opts.tools_len = tools.json_len;
    }
    r->tools_mode = (int)tools.mode;
    r->tools_parallel = tools.parallel;
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(o, "chat_template_kwargs");
    if (is_present(kw)) {
        int think = 1;
        if (!cJSON_IsObject(kw))
            return api_fail(e, 400, "invalid_type", "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        if (get_bool(kw, "enable_thinking", &think, e) < 0) {
            snprintf(e->param, sizeof e->param, "chat_template_kwargs.enable_thinking");
            return -1;
        }
        opts.no_thinking = !think;
    }
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!is_present(msgs)) return api_fail(e, 400, "missing_field", "messages", "'messages' is required");
    if (!cJSON_IsArray(msgs)) return api_fail(e, 400, "invalid_type", "messages", "'messages' must be a list");
    int n = cJSON_GetArraySize(msgs);
    if (n == 0) return api_fail(e, 400, "invalid_value", "messages", "'messages' is empty");
    qw_chat_msg *cm = calloc((size_t)n, sizeof *cm);
    char **contents = calloc((size_t)n, sizeof *contents);
    qw_tool_call **calls = calloc((size_t)n, sizeof *calls);
    int rc = -1, i = 0;
    if (!cm || !contents || !calls) {
        api_fail(e, 500, "out_of_memory", "messages", "out of memory");
        goto out;
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(m)) {
            api_fail(e, 400, "invalid_type", param, "'%s' must be an object", param);
            goto out;
        }
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!is_present(role)) {
            api_fail(e, 400, "missing_field", param, "'%s' is required", param);
            goto out;
        }
        if (!cJSON_IsString(role)) {
            api_fail(e, 400, "invalid_type", param, "'%s' must be a string", param);
            goto out;
        }
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) rs = "system";
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool")) {
            api_fail(e, 400, "invalid_value", param,
                     "'%s' is \"%.40s\"; expected system, developer, user, assistant or tool", param, rs);
            goto out;
        }
        if (tools_message_calls(m, i, &calls[i], &cm[i].n_tool_calls, e) < 0) goto out;
        cm[i].tool_calls = calls[i];
        const cJSON *rcj = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
        if (is_present(rcj)) {
            if (!cJSON_IsString(rcj)) {
                snprintf(param, sizeof param, "messages[%d].reasoning_content", i);
                api_fail(e, 400, "invalid_type", param, "'%s' must be a string", param);
                goto out;
            }
            cm[i].reasoning_content = rcj->valuestring;
        }
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!content && strcmp(rs, "assistant") != 0) {
            snprintf(param, sizeof param, "messages[%d].content", i);
            api_fail(e, 400, "missing_field", param, "'%s' is required", param);
            goto out;
        }
        if (message_content(content, i, &contents[i], e) < 0) goto out;
        cm[i].role = rs;
        cm[i].content = contents[i];
        i++;
    }
    {
        int32_t *ids = NULL;
        size_t nids = 0;
        qw_err err;
        qw_chat_family fam = tok_chat_family(lim->tok);
        if (fam != CHAT_QWEN25 && fam != CHAT_QWEN25_CODER && fam != CHAT_QWEN3) {
            chat_encode_opts(lim->tok, &opts, cm, (size_t)n, &ids, &nids, &err); /* for its message */
            api_fail(e, 400, "unsupported_chat_template", "messages", "%s", err.msg);
            goto out;
        }
        if (chat_encode_opts(lim->tok, &opts, cm, (size_t)n, &ids, &nids, &err) != 0) {
            api_fail(e, 400, "invalid_value", "messages", "cannot render the messages: %s", err.msg);
            goto out;
        }
        rc = set_prompt(r, ids, nids, lim, "messages", e);
    }
out:
    if (contents)
        for (int k = 0; k < n; k++) free(contents[k]);
    if (calls)
        for (int k = 0; k < n; k++) free(calls[k]);
    free(calls);
    free(contents);
    free(cm);
    return rc;
}

/* /v1/completions prompt: a string (through the chat template unless raw),
 * a list of token ids, or a list of one string. */
static int parse_completion_prompt(const cJSON *o, const api_limits *lim, api_req *r, api_error *e) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    int raw = 0;
    if (get_bool(o, "raw", &raw, e) < 0) return -1;
    const char *system = NULL;
    if (api_get_str(o, "system", &system, e) < 0) return -1;
    if (!is_present(p)) return api_fail(e, 400, "missing_field", "prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    if (cJSON_IsArray(p)) {
        int n = cJSON_GetArraySize(p);
        int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
        if (!ids) return api_fail(e, 500, "out_of_memory", "prompt", "out of memory");
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, p) {
            if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble)) {
                free(ids);
                return api_fail(e, 400, "invalid_type", "prompt",
                                "'prompt' must be a string or a list of token ids (one prompt per request)");
            }
            if (it->valuedouble < 0 || it->valuedouble >= lim->vocab) {
                free(ids);
                return api_fail(e, 400, "invalid_value", "prompt", "token id %.0f at index %d is out of range [0, %d)",
                                it->valuedouble, i, lim->vocab);
            }
            ids[i++] = (int32_t)it->valuedouble;
        }
        return set_prompt(r, ids, (size_t)n, lim, "prompt", e);
    }
    if (!cJSON_IsString(p))
        return api_fail(e, 400, "invalid_type", "prompt", "'prompt' must be a string");
    int32_t *ids = NULL;
    size_t n = 0;
    qw_err err;
    int rc;
    if (raw) {
        rc = tok_encode(lim->tok, p->valuestring, strlen(p->valuestring), &ids, &n, &err);
    } else {
        qw_chat_msg m[2];
        size_t nm = 0;
        if (system) m[nm++] = (qw_chat_msg){.role = "system", .content = system};
        m[nm++] = (qw_chat_msg){.role = "user", .content = p->valuestring};
        rc = chat_encode(lim->tok, m, nm, 1, &ids, &n, &err);
    }
    if (rc != 0) return api_fail(e, 500, "tokenizer_error", "prompt", "cannot encode the prompt: %s", err.msg);
    return set_prompt(r, ids, n, lim, "prompt", e);
}

/* "stop_token_ids": a list of ids in [0, vocab). */
static int parse_stop_ids(const cJSON *o, const api_limits *lim, api_req *r, api_error *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "stop_token_ids");
    if (!is_present(j)) return 0;
    if (!cJSON_IsArray(j))
        return api_fail(e, 400, "invalid_type", "stop_token_ids", "'stop_token_ids' must be a list of token ids");
    if (cJSON_GetArraySize(j) > API_MAX_STOP_IDS / 2)
        return api_fail(e, 400, "invalid_value", "stop_token_ids", "'stop_token_ids' has more than %d ids",
                        API_MAX_STOP_IDS / 2);
    const cJSON *it;
    cJSON_ArrayForEach(it, j) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
            it->valuedouble >= lim->vocab)
            return api_fail(e, 400, "invalid_value", "stop_token_ids", "'stop_token_ids' must hold ids in [0, %d)",
                            lim->vocab);
        r->stop_ids[r->n_stop_ids++] = (int32_t)it->valuedouble;
    }
    return 0;
}

/* An infill ends at the FIM and repository tokens as well (Qwen's examples
 * pass them as eos_token_id). */
static void add_fim_stops(api_req *r, const qw_tok *tok) {
    int32_t ids[16];
    int n = fim_stop_ids(tok, ids, 16);
    for (int i = 0; i < n && r->n_stop_ids < API_MAX_STOP_IDS; i++) r->stop_ids[r->n_stop_ids++] = ids[i];
}

/* /infill: llama-server's fields as a Qwen2.5-Coder FIM prompt (infill.h). */
static int parse_infill(const cJSON *o, const api_limits *lim, api_req *r, api_error *e) {
    api_infill in;
    if (infill_parse(o, &in, e) < 0) return -1;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = infill_encode(&in, lim->tok, &ids, &n, e);
    infill_free(&in);
    if (rc < 0) return -1;
    add_fim_stops(r, lim->tok);
    return set_prompt(r, ids, n, lim, "input_prefix", e);
}

/* /v1/completions with "suffix": prompt = the code before, suffix = after. */
static int parse_suffix(const cJSON *o, const api_limits *lim, api_req *r, api_error *e) {
    const char *suffix = NULL, *prompt = NULL;
    if (api_get_str(o, "suffix", &suffix, e) < 0) return -1;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    if (!is_present(p)) return api_fail(e, 400, "missing_field", "prompt", "'prompt' is required");
    if (!cJSON_IsString(p))
        return api_fail(e, 400, "invalid_type", "prompt", "'prompt' must be a string when 'suffix' is given (code infill)");
    prompt = p->valuestring;
    api_infill in = {.fim = {.prefix = prompt, .suffix = suffix}};
    int32_t *ids = NULL;
    size_t n = 0;
    if (infill_encode(&in, lim->tok, &ids, &n, e) < 0) {
        if (!e->param[0]) snprintf(e->param, sizeof e->param, "suffix");
        return -1;
    }
    add_fim_stops(r, lim->tok);
    return set_prompt(r, ids, n, lim, "prompt", e);
}

int api_parse(api_kind kind, const char *body, size_t len, const api_limits *lim, api_req *r, api_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->sampling = lim->sampling;
    if (json_strict_check(body, len, e)) return -1;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, NULL, 0);
    if (!o) return api_fail(e, 400, "invalid_json", NULL, "the body is not valid JSON");
    int rc = -1;
    if (!cJSON_IsObject(o)) {
        api_fail(e, 400, "invalid_json", NULL, "the body must be a JSON object");
        goto out;
    }
    if (unsupported(o, kind, e) < 0) goto out;
    if (parse_choices(o, kind, r, e) < 0) goto out;
    if (api_parse_sampling(o, &r->sampling, e) < 0) goto out;
    r->seed_set = is_present(cJSON_GetObjectItemCaseSensitive(o, "seed"));
    if (get_bool(o, "ignore_eos", &r->ignore_eos, e) < 0) goto out;
    int spec = 1;
    if (get_bool(o, "speculative", &spec, e) < 0) goto out;
    r->no_spec = !spec;
    if (get_bool(o, "stream", &r->stream, e) < 0) goto out;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
    if (is_present(so)) {
        if (!cJSON_IsObject(so)) {
            api_fail(e, 400, "invalid_type", "stream_options", "'stream_options' must be an object");
            goto out;
        }
        if (get_bool(so, "include_usage", &r->include_usage, e) < 0) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            goto out;
        }
    }
    const char *model = NULL;
    if (api_get_str(o, "model", &model, e) < 0) goto out;
    if (model && lim->model_id && !lim->any_model && strcmp(model, lim->model_id) != 0) {
        api_model_not_found(e, model, lim->model_id);
        goto out;
    }
    if (parse_stop(o, r, e) < 0) goto out;
    if (parse_stop_ids(o, lim, r, e) < 0) goto out;
    api_tools tools = {.mode = TOOLS_OFF};

    long long mt;
    int got;
    if (kind == API_INFILL) {
        if (r->n != 1 || r->logprobs || r->echo) {
            const char *f = r->n != 1 ? "n" : r->logprobs ? "logprobs" : "echo";
            api_fail(e, 400, "unsupported_field", f, "'%s' is not supported on /infill (one plain answer)", f);
            goto out;
        }
        mt = API_INFILL_DEFAULT;
        if ((got = get_int(o, "max_tokens", 0, lim->n_ctx, &mt, e)) < 0) goto out;
        if ((got = get_int(o, "n_predict", -1, lim->n_ctx, &mt, e)) < 0) goto out;
        if (parse_infill(o, lim, r, e) < 0) goto out;
        if (mt < 0 || mt > lim->n_ctx - r->n_prompt) mt = lim->n_ctx - r->n_prompt; /* -1: until the context is full */
    } else if (kind == API_COMPLETION) {
        mt = lim->completion_default;
        if ((got = get_int(o, "max_tokens", 0, lim->completion_max_tokens, &mt, e)) < 0) goto out;
        if (is_present(cJSON_GetObjectItemCaseSensitive(o, "suffix"))) {
            if (parse_suffix(o, lim, r, e) < 0) goto out;
        } else if (parse_completion_prompt(o, lim, r, e) < 0) {
            goto out;
        }
    } else {
        mt = -1;
        if ((got = get_int(o, "max_tokens", 1, lim->n_ctx, &mt, e)) < 0) goto out;
        if ((got = get_int(o, "max_completion_tokens", 1, lim->n_ctx, &mt, e)) < 0) goto out;
        if (parse_messages(o, body, len, lim, r, &tools, e) < 0) goto out;
        if (mt < 0) mt = lim->n_ctx - r->n_prompt; /* until the context is full */
    }
    r->max_tokens = (int)mt;
    /* the one grammar of the answer: from response_format, grammar and the
     * tools, decided together (api_grammar.c) */
    if (api_parse_constraint(o, &tools, r, e) < 0) goto out;
    rc = 0;
out:
    cJSON_Delete(o);
    if (rc != 0) api_req_free(r);
    return rc;
}

void api_req_free(api_req *r) {
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    grammar_release(r->constraint);
    r->constraint = NULL;
    r->prompt = NULL;
    r->stop = NULL;
    r->n_prompt = r->n_stop = 0;
}

int stdin_parse_line(const char *line, size_t len, int vocab, int max_limit, int32_t **ids, int *n,
                     int *max_tokens, char *msg, size_t msg_len) {
    *ids = NULL;
    *n = 0;
    const char *bar = memchr(line, '|', len);
    if (!bar) {
        snprintf(msg, msg_len, "expected 'IDS|MAX_TOKENS', e.g. '151644 8948 198|20' (no '|' found)");
        return -1;
    }
    if (memchr(bar + 1, '|', len - (size_t)(bar + 1 - line))) {
        snprintf(msg, msg_len, "more than one '|' in the line");
        return -1;
    }
    /* max_tokens */
    const char *p = bar + 1, *end = line + len;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    const char *q = end;
    while (q > p && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\r')) q--;
    if (p == q) {
        snprintf(msg, msg_len, "missing max_tokens after '|'");
        return -1;
    }
    long long mt = 0;
    for (const char *c = p; c < q; c++) {
        if (*c < '0' || *c > '9' || mt > INT_MAX) {
            snprintf(msg, msg_len, "max_tokens '%.*s' is not a non-negative integer", (int)(q - p > 40 ? 40 : q - p), p);
            return -1;
        }
        mt = mt * 10 + (*c - '0');
    }
    if (mt > max_limit) {
        snprintf(msg, msg_len, "max_tokens %lld is more than the context (%d)", mt, max_limit);
        return -1;
    }
    /* ids */
    size_t cap = 16;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    int cnt = 0;
    p = line;
    while (p < bar) {
        while (p < bar && (*p == ' ' || *p == '\t' || *p == ',')) p++;
        if (p == bar) break;
        const char *s = p;
        long long x = 0;
        while (p < bar && *p != ' ' && *p != '\t' && *p != ',') {
            if (*p < '0' || *p > '9' || x >= vocab) {
                while (p < bar && *p != ' ' && *p != '\t' && *p != ',') p++;
                snprintf(msg, msg_len, "token %d ('%.*s') is not a token id in [0, %d)", cnt + 1,
                         (int)(p - s > 40 ? 40 : p - s), s, vocab);
                free(v);
                return -1;
            }
            x = x * 10 + (*p - '0');
            p++;
        }
        if (x >= vocab) {
            snprintf(msg, msg_len, "token %d (%lld) is not a token id in [0, %d)", cnt + 1, x, vocab);
            free(v);
            return -1;
        }
        if ((size_t)cnt == cap) {
            cap *= 2;
            int32_t *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                free(v);
                snprintf(msg, msg_len, "out of memory");
                return -1;
            }
            v = nv;
        }
        v[cnt++] = (int32_t)x;
    }
    if (cnt == 0) {
        free(v);
        snprintf(msg, msg_len, "no token ids before '|'");
        return -1;
    }
    *ids = v;
    *n = cnt;
    *max_tokens = (int)mt;
    return 0;
}


/* ---- the token protocols (Unix socket, stdin) --------------------------- */

int api_parse_socket(const char *line, size_t len, const api_limits *lim, api_req *r, api_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = API_SOCKET;
    r->n = 1;
    r->sampling = lim->sampling;
    if (!api_utf8_valid(line, len)) return api_fail(e, 400, "invalid_utf8", NULL, "the request is not valid UTF-8");
    if (json_strict_check(line, len, e)) return -1;
    cJSON *o = cJSON_ParseWithLength(line, len);
    if (!o)
        return api_fail(e, 400, "invalid_json", NULL,
                        "the request is not valid JSON; expected {\"tokens\": [ids], \"max_tokens\": n}");
    int rc = -1;
    if (!cJSON_IsObject(o)) {
        api_fail(e, 400, "invalid_json", NULL, "the request must be a JSON object");
        goto out;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tokens");
    if (!t) {
        api_fail(e, 400, "missing_field", "tokens", "'tokens' is required");
        goto out;
    }
    if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) == 0) {
        api_fail(e, 400, "invalid_type", "tokens", "'tokens' must be a non-empty list of token ids");
        goto out;
    }
    int n = cJSON_GetArraySize(t);
    r->prompt = malloc((size_t)n * sizeof *r->prompt);
    if (!r->prompt) {
        api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, t) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
            it->valuedouble >= lim->vocab) {
            api_fail(e, 400, "invalid_value", "tokens", "'tokens'[%d] is not a token id in [0, %d)", r->n_prompt,
                     lim->vocab);
            goto out;
        }
        r->prompt[r->n_prompt++] = (int32_t)it->valuedouble;
    }
    long long mt = 50;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "max_tokens");
    if (is_present(m)) {
        if (!cJSON_IsNumber(m) || m->valuedouble != floor(m->valuedouble) || m->valuedouble < 0 ||
            m->valuedouble > lim->n_ctx) {
            api_fail(e, 400, "invalid_value", "max_tokens", "'max_tokens' must be an integer in [0, %d]", lim->n_ctx);
            goto out;
        }
        mt = (long long)m->valuedouble;
    }
    r->max_tokens = (int)mt;
    if (api_parse_sampling(o, &r->sampling, e) < 0) goto out;
    if (get_bool(o, "ignore_eos", &r->ignore_eos, e) < 0) goto out;
    int spec = 1;
    if (get_bool(o, "speculative", &spec, e) < 0) goto out;
    r->no_spec = !spec;
    rc = 0;
out:
    cJSON_Delete(o);
    if (rc != 0) api_req_free(r);
    return rc;
}

int api_parse_stdin(const char *line, size_t len, const api_limits *lim, api_req *r, api_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = API_STDIN;
    r->n = 1;
    r->sampling = lim->sampling;
    char msg[256];
    if (stdin_parse_line(line, len, lim->vocab, lim->n_ctx, &r->prompt, &r->n_prompt, &r->max_tokens, msg,
                         sizeof msg) != 0)
        return api_fail(e, 400, "invalid_value", NULL, "%s", msg);
    return 0;
}

/* ---- tokenize / detokenize --------------------------------------------- */

int api_parse_tokenize(const char *body, size_t len, char **text, size_t *text_len, api_error *e) {
    *text = NULL;
    if (json_strict_check(body, len, e)) return -1;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, NULL, 0);
    if (!o) return api_fail(e, 400, "invalid_json", NULL, "the body is not valid JSON");
    int rc = -1;
    const char *s = NULL;
    const char *field = "content";
    int wp = 0;
    if (!cJSON_IsObject(o)) {
        api_fail(e, 400, "invalid_json", NULL, "the body must be a JSON object");
        goto out;
    }
    if (get_bool(o, "with_pieces", &wp, e) < 0) goto out;
    if (wp) {
        api_fail(e, 400, "unsupported_field", "with_pieces", "'with_pieces' is not supported");
        goto out;
    }
    if (api_get_str(o, "content", &s, e) < 0) goto out;
    if (!s) {
        field = "prompt";
        if (api_get_str(o, "prompt", &s, e) < 0) goto out;
    }
    if (!s) {
        api_fail(e, 400, "missing_field", "content", "'content' (or 'prompt') is required");
        goto out;
    }
    (void)field;
    *text_len = strlen(s);
    *text = strdup(s);
    if (!*text) {
        api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(o);
    return rc;
}

int api_parse_detokenize(const char *body, size_t len, int vocab, int32_t **ids, int *n, api_error *e) {
    *ids = NULL;
    *n = 0;
    if (json_strict_check(body, len, e)) return -1;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, NULL, 0);
    if (!o) return api_fail(e, 400, "invalid_json", NULL, "the body is not valid JSON");
    int rc = -1;
    const cJSON *t = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "tokens") : NULL;
    if (!cJSON_IsObject(o)) {
        api_fail(e, 400, "invalid_json", NULL, "the body must be a JSON object");
        goto out;
    }
    if (!is_present(t)) {
        api_fail(e, 400, "missing_field", "tokens", "'tokens' is required");
        goto out;
    }
    if (!cJSON_IsArray(t)) {
        api_fail(e, 400, "invalid_type", "tokens", "'tokens' must be a list of token ids");
        goto out;
    }
    int cnt = cJSON_GetArraySize(t);
    *ids = malloc((size_t)(cnt ? cnt : 1) * sizeof **ids);
    if (!*ids) {
        api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        goto out;
    }
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, t) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble)) {
            api_fail(e, 400, "invalid_type", "tokens", "'tokens' must be a list of integers");
            goto out;
        }
        if (it->valuedouble < 0 || it->valuedouble >= vocab) {
            api_fail(e, 400, "invalid_value", "tokens", "token id %.0f at index %d is out of range [0, %d)",
                     it->valuedouble, i, vocab);
            goto out;
        }
        (*ids)[i++] = (int32_t)it->valuedouble;
    }
    *n = i;
    rc = 0;
out:
    if (rc != 0) {
        free(*ids);
        *ids = NULL;
    }
    cJSON_Delete(o);
    return rc;
}

/* ---- responses --------------------------------------------------------- */

/* cJSON strings are NUL-terminated; our text never holds NUL bytes from the
 * tokenizer (U+0000 would be a byte-level token "\0"), but cut at one to be
 * safe rather than read past. */
static cJSON *str_n(const char *s, size_t n) {
    char *tmp = malloc(n + 1);
    if (!tmp) return cJSON_CreateString("");
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    cJSON *j = cJSON_CreateString(tmp);
    free(tmp);
    return j;
}

static double round3(double x) { return isfinite(x) ? floor(x * 1000.0 + 0.5) / 1000.0 : 0.0; }

static void add_usage(cJSON *root, int prompt, int gen, int drafted, int accepted, int cached) {
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", gen);
    cJSON_AddNumberToObject(u, "total_tokens", prompt + gen);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens", cached);
    cJSON *d = cJSON_AddObjectToObject(u, "completion_tokens_details");
    cJSON_AddNumberToObject(d, "draft_tokens", drafted);
    cJSON_AddNumberToObject(d, "accepted_draft_tokens", accepted);
}

static cJSON *head(const api_meta *m, const char *object) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", m->id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)m->created);
    cJSON_AddStringToObject(root, "model", m->model);
    return root;
}

static char *print_free(cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* The choices of r: its array, or the one choice its text and finish make. */
static int choices_of(const api_result *r, const api_choice **c, api_choice *one) {
    if (r->n_choices > 0) {
        *c = r->choices;
        return r->n_choices;
    }
    *one = (api_choice){.text = r->text, .text_len = r->text_len, .finish = r->finish};
    *c = one;
    return 1;
}

static void add_logprobs(cJSON *c, void *lp) {
    if (lp) cJSON_AddItemToObject(c, "logprobs", (cJSON *)lp);
    else cJSON_AddNullToObject(c, "logprobs");
}

char *api_completion_json(const api_meta *m, const api_result *r) {
    cJSON *root = head(m, "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    api_choice one;
    const api_choice *ch;
    int n = choices_of(r, &ch, &one);
    for (int i = 0; i < n; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddItemToObject(c, "text", str_n(ch[i].text, ch[i].text_len));
        cJSON_AddNumberToObject(c, "index", i);
        add_logprobs(c, ch[i].logprobs);
        cJSON_AddStringToObject(c, "finish_reason", ch[i].finish);
        cJSON_AddItemToArray(choices, c);
    }
    add_usage(root, r->prompt_tokens, r->gen_tokens, r->draft_tokens, r->accepted_draft_tokens, r->cached_tokens);
    /* The seed's fields (the first choice). */
    cJSON_AddItemToObject(root, "text", str_n(ch[0].text, ch[0].text_len));
    cJSON_AddNumberToObject(root, "prompt_tokens", r->prompt_tokens);
    cJSON_AddNumberToObject(root, "gen_tokens", r->gen_tokens);
    cJSON_AddNumberToObject(root, "prefill_tps", round3(r->prefill_tps));
    cJSON_AddNumberToObject(root, "decode_tps", round3(r->decode_tps));
    cJSON_AddNumberToObject(root, "elapsed_s", round3(r->elapsed_s));
    return print_free(root);
}

char *api_chat_json(const api_meta *m, const api_result *r) {
    cJSON *root = head(m, "chat.completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    api_choice one;
    const api_choice *ch;
    int n = choices_of(r, &ch, &one);
    for (int i = 0; i < n; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", i);
        cJSON *msg = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddItemToObject(msg, "content", str_n(ch[i].text, ch[i].text_len));
        add_logprobs(c, ch[i].logprobs);
        cJSON_AddStringToObject(c, "finish_reason", ch[i].finish);
        cJSON_AddItemToArray(choices, c);
    }
    add_usage(root, r->prompt_tokens, r->gen_tokens, r->draft_tokens, r->accepted_draft_tokens, r->cached_tokens);
    cJSON *t = cJSON_AddObjectToObject(root, "timings");
    cJSON_AddNumberToObject(t, "prefill_tps", round3(r->prefill_tps));
    cJSON_AddNumberToObject(t, "decode_tps", round3(r->decode_tps));
    cJSON_AddNumberToObject(t, "elapsed_s", round3(r->elapsed_s));
    return print_free(root);
}

char *api_sse_chunk(api_kind kind, const api_meta *m, const char *role, const char *text, size_t text_len,
                    const char *finish, const api_usage *usage) {
    return api_sse_chunk_at(kind, m, 0, role, text, text_len, finish, NULL, usage);
}

char *api_sse_chunk_at(api_kind kind, const api_meta *m, int index, const char *role, const char *text,
                       size_t text_len, const char *finish, void *logprobs, const api_usage *usage) {
    cJSON *root = head(m, kind == API_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    if (usage) {
        add_usage(root, usage->prompt_tokens, usage->completion_tokens, usage->draft_tokens,
                  usage->accepted_draft_tokens, usage->cached_tokens);
        if (logprobs) cJSON_Delete(logprobs);
    } else {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", index);
        if (kind == API_CHAT) {
            cJSON *d = cJSON_AddObjectToObject(c, "delta");
            if (role) {
                cJSON_AddStringToObject(d, "role", role);
                cJSON_AddStringToObject(d, "content", "");
            } else if (text) {
                cJSON_AddItemToObject(d, "content", str_n(text, text_len));
            }
        } else {
            cJSON_AddItemToObject(c, "text", text ? str_n(text, text_len) : cJSON_CreateString(""));
        }
        add_logprobs(c, logprobs);
        if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
        else cJSON_AddNullToObject(c, "finish_reason");
        cJSON_AddItemToArray(choices, c);
    }
    char *json = print_free(root);
    if (!json) return NULL;
    size_t jl = strlen(json);
    char *out = malloc(jl + 9);
    if (out) {
        memcpy(out, "data: ", 6);
        memcpy(out + 6, json, jl);
        memcpy(out + 6 + jl, "\n\n", 3);
    }
    free(json);
    return out;
}
