/* ollama.c - Ollama's API as JSON (ollama.h).
 *
 * Parsing maps an Ollama body onto an OpenAI-shaped document and hands it to
 * api_parse, so both APIs share one validation (ranges, messages, chat
 * template, stop strings, context limit); errors about a moved option are
 * renamed back to the Ollama field ("options.temperature").
 */
#include "server/ollama.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int present(const cJSON *j) { return j && !cJSON_IsNull(j); }

/* A non-empty list / string / object, i.e. a field that asks for something. */
static int asks(const cJSON *j) {
    if (!present(j)) return 0;
    if (cJSON_IsFalse(j)) return 0;
    if (cJSON_IsString(j)) return j->valuestring[0] != '\0';
    if (cJSON_IsArray(j) || cJSON_IsObject(j)) return j->child != NULL;
    return 1;
}

/* keep_alive 0 / "0" / "0s" / "0m": unload. */
static int is_zero_duration(const cJSON *j) {
    if (cJSON_IsNumber(j)) return j->valuedouble == 0;
    if (!cJSON_IsString(j)) return 0;
    char *end;
    double v = strtod(j->valuestring, &end);
    return end != j->valuestring && v == 0 && (!*end || !strcmp(end, "s") || !strcmp(end, "m") || !strcmp(end, "h"));
}

/* Options copied to the OpenAI document under the same name. */
static const char *const moved_opts[] = {"temperature", "top_p",          "top_k",           "min_p",
                                         "seed",        "repeat_penalty", "repeat_last_n",   "presence_penalty",
                                         "frequency_penalty", "stop"};
#define N_MOVED (sizeof moved_opts / sizeof moved_opts[0])

static int parse_options(const cJSON *opts, cJSON *oa, const api_limits *lim, int *num_predict, api_error *e) {
    *num_predict = 0;
    if (!present(opts)) return 0;
    if (!cJSON_IsObject(opts)) return api_fail(e, 400, "invalid_type", "options", "'options' must be an object");
    for (size_t i = 0; i < N_MOVED; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(opts, moved_opts[i]);
        if (present(v)) cJSON_AddItemToObject(oa, moved_opts[i], cJSON_Duplicate(v, 1));
    }
    const cJSON *np = cJSON_GetObjectItemCaseSensitive(opts, "num_predict");
    if (present(np)) {
        if (!cJSON_IsNumber(np) || np->valuedouble != floor(np->valuedouble))
            return api_fail(e, 400, "invalid_type", "options.num_predict", "'options.num_predict' must be an integer");
        double v = np->valuedouble;
        if (v == -1 || v == -2) {
            *num_predict = -1; /* until the context is full */
        } else if (v < 1 || v > lim->n_ctx) {
            return api_fail(e, 400, "invalid_value", "options.num_predict",
                            "'options.num_predict' is %.0f; it must be -1, -2 or in [1, %d] (the context)", v,
                            lim->n_ctx);
        } else {
            *num_predict = (int)v;
        }
    }
    /* Samplers qwenc does not have: refused unless set to their no-op. */
    static const struct {
        const char *name;
        double noop;
    } absent[] = {{"mirostat", 0}, {"typical_p", 1}, {"tfs_z", 1}};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(opts, absent[i].name);
        if (present(v) && !(cJSON_IsNumber(v) && v->valuedouble == absent[i].noop)) {
            char param[64];
            snprintf(param, sizeof param, "options.%s", absent[i].name);
            return api_fail(e, 400, "unsupported_field", param, "'%s' is not supported (qwenc has no such sampler)",
                            param);
        }
    }
    return 0;
}

/* A field that changes the meaning of the request and that qwenc does not
 * do: 400 naming it. */
static int refuse(const cJSON *o, const char *name, const char *why, api_error *e) {
    if (!asks(cJSON_GetObjectItemCaseSensitive(o, name))) return 0;
    return api_fail(e, 400, "unsupported_field", name, "'%s' is not supported: %s", name, why);
}

/* Ollama's "format": "json" (any JSON value; the OpenAI API's json_object,
 * which asks for an object, is what Ollama's JSON mode produces in
 * practice) or a JSON Schema object, mapped onto the OpenAI request's
 * response_format so that the grammar engine constrains the answer (and
 * refuses what it cannot enforce, naming the keyword). "" = none. */
static int add_format(const cJSON *f, cJSON *oa, api_error *e) {
    if (!asks(f)) return 0;
    cJSON *rf = cJSON_AddObjectToObject(oa, "response_format");
    if (!rf) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    if (cJSON_IsString(f) && !strcmp(f->valuestring, "json")) {
        cJSON_AddStringToObject(rf, "type", "json_object");
        return 0;
    }
    if (!cJSON_IsObject(f))
        return api_fail(e, 400, "invalid_value", "format", "'format' must be \"json\" or a JSON Schema object");
    cJSON_AddStringToObject(rf, "type", "json_schema");
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    if (!js) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    cJSON_AddStringToObject(js, "name", "format");
    cJSON_AddItemToObject(js, "schema", cJSON_Duplicate(f, 1));
    return 0;
}

static int check_messages(const cJSON *msgs, api_error *e) {
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        if (cJSON_IsObject(m) && asks(cJSON_GetObjectItemCaseSensitive(m, "images"))) {
            char param[64];
            snprintf(param, sizeof param, "messages[%d].images", i);
            return api_fail(e, 400, "unsupported_field", param, "'%s' is not supported (a text-only model)", param);
        }
        i++;
    }
    return 0;
}

int ollama_parse(ollama_kind kind, const char *body, size_t len, const api_limits *lim, ollama_req *o,
                 api_error *e) {
    memset(o, 0, sizeof *o);
    cJSON *j = cJSON_ParseWithLengthOpts(body, len, NULL, 0);
    if (!j) return api_fail(e, 400, "invalid_json", NULL, "the body is not valid JSON");
    cJSON *oa = NULL;
    char *doc = NULL;
    int rc = -1;
    if (!cJSON_IsObject(j)) {
        api_fail(e, 400, "invalid_json", NULL, "the body must be a JSON object");
        goto out;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    if (!present(model) || (cJSON_IsString(model) && !model->valuestring[0])) {
        api_fail(e, 400, "missing_field", "model", "'model' is required (any name: this server has one model)");
        goto out;
    }
    if (!cJSON_IsString(model)) {
        api_fail(e, 400, "invalid_type", "model", "'model' must be a string");
        goto out;
    }
    /* Copy, cut at a character boundary so the echo stays valid UTF-8. */
    size_t ml = strlen(model->valuestring);
    if (ml >= sizeof o->model) {
        ml = sizeof o->model - 1;
        while (ml > 0 && ((unsigned char)model->valuestring[ml] & 0xC0) == 0x80) ml--;
    }
    memcpy(o->model, model->valuestring, ml);
    o->model[ml] = '\0';
    if (lim->model_id && !lim->any_model && !ollama_name_matches(model->valuestring, lim->model_id)) {
        api_model_not_found(e, model->valuestring, lim->model_id);
        goto out;
    }

    if (refuse(j, "tools", "function calling is served on the OpenAI API (/v1/chat/completions), not on this one", e) ||
        refuse(j, "think", "this model does not think (no reasoning mode)", e) ||
        refuse(j, "logprobs", "ask the OpenAI API (/v1/chat/completions) for log probabilities", e) ||
        refuse(j, "images", "a text-only model", e) ||
        refuse(j, "suffix", "no fill-in-the-middle", e) ||
        refuse(j, "template", "qwenc applies the model's own chat template", e) ||
        refuse(j, "context", "send the conversation as messages to /api/chat instead", e))
        goto out;

    o->stream = 1;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "stream");
    if (present(st)) {
        if (!cJSON_IsBool(st)) {
            api_fail(e, 400, "invalid_type", "stream", "'stream' must be a boolean");
            goto out;
        }
        o->stream = cJSON_IsTrue(st);
    }
    const cJSON *ka = cJSON_GetObjectItemCaseSensitive(j, "keep_alive");
    if (present(ka) && !cJSON_IsNumber(ka) && !cJSON_IsString(ka)) {
        api_fail(e, 400, "invalid_type", "keep_alive", "'keep_alive' must be a duration (\"5m\") or seconds");
        goto out;
    }

    oa = cJSON_CreateObject();
    if (!oa) {
        api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        goto out;
    }
    api_kind ak;
    if (kind == OLLAMA_CHAT) {
        ak = API_CHAT;
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
        if (!present(msgs) || (cJSON_IsArray(msgs) && !msgs->child)) {
            o->load_only = 1;
        } else {
            if (cJSON_IsArray(msgs) && check_messages(msgs, e) < 0) goto out;
            cJSON_AddItemToObject(oa, "messages", cJSON_Duplicate(msgs, 1));
        }
    } else {
        ak = API_COMPLETION;
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prompt");
        if (!present(p) || (cJSON_IsString(p) && !p->valuestring[0])) {
            o->load_only = 1;
        } else {
            if (!cJSON_IsString(p)) {
                api_fail(e, 400, "invalid_type", "prompt", "'prompt' must be a string");
                goto out;
            }
            cJSON_AddItemToObject(oa, "prompt", cJSON_Duplicate(p, 1));
            static const char *const keep[] = {"system", "raw"};
            for (int i = 0; i < 2; i++) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, keep[i]);
                if (present(v)) cJSON_AddItemToObject(oa, keep[i], cJSON_Duplicate(v, 1));
            }
        }
    }
    if (o->load_only) {
        o->unload = present(ka) && is_zero_duration(ka);
        rc = 0;
        goto out;
    }
    if (add_format(cJSON_GetObjectItemCaseSensitive(j, "format"), oa, e) < 0) goto out;
    int num_predict;
    if (parse_options(cJSON_GetObjectItemCaseSensitive(j, "options"), oa, lim, &num_predict, e) < 0) goto out;
    if (num_predict > 0) cJSON_AddNumberToObject(oa, "max_tokens", num_predict);

    doc = cJSON_PrintUnformatted(oa);
    if (!doc) {
        api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        goto out;
    }
    api_limits l = *lim;
    l.completion_max_tokens = lim->n_ctx; /* the seed API's 512 does not apply */
    l.completion_default = 1;
    if (api_parse(ak, doc, strlen(doc), &l, &o->req, e) < 0) {
        for (size_t i = 0; i < N_MOVED; i++)
            if (!strcmp(e->param, moved_opts[i])) {
                snprintf(e->param, sizeof e->param, "options.%s", moved_opts[i]);
                break;
            }
        if (!strncmp(e->param, "response_format", 15)) snprintf(e->param, sizeof e->param, "format");
        goto out;
    }
    if (num_predict <= 0) o->req.max_tokens = lim->n_ctx - o->req.n_prompt; /* until the context is full */
    o->req.stream = o->stream;
    rc = 0;
out:
    free(doc);
    cJSON_Delete(oa);
    cJSON_Delete(j);
    return rc;
}

void ollama_req_free(ollama_req *o) { api_req_free(&o->req); }

int ollama_name_matches(const char *name, const char *id) {
    size_t n = strlen(id);
    return !strncmp(name, id, n) && (!name[n] || !strcmp(name + n, ":latest"));
}

void ollama_time(char out[40], const struct timespec *ts) {
    struct tm tm;
    time_t s = ts->tv_sec;
    gmtime_r(&s, &tm);
    char d[24];
    strftime(d, sizeof d, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 40, "%s.%09ldZ", d, (long)ts->tv_nsec);
}

/* Print o, append "\n", free o. */
static char *line(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *r = realloc(s, n + 2);
    if (!r) {
        free(s);
        return NULL;
    }
    r[n] = '\n';
    r[n + 1] = '\0';
    return r;
}

/* cJSON strings are NUL-terminated: a text piece needs a copy. */
static cJSON *str_n(const char *s, size_t n) {
    char *c = malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, s, n);
    c[n] = '\0';
    cJSON *j = cJSON_CreateString(c);
    free(c);
    return j;
}

static cJSON *head(ollama_kind kind, const char *model, const char *created_at, const char *text, size_t len) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddStringToObject(o, "created_at", created_at);
    if (kind == OLLAMA_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(o, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddItemToObject(m, "content", str_n(text, len));
    } else {
        cJSON_AddItemToObject(o, "response", str_n(text, len));
    }
    return o;
}

char *ollama_chunk(ollama_kind kind, const char *model, const char *created_at, const char *text, size_t len) {
    cJSON *o = head(kind, model, created_at, text, len);
    cJSON_AddBoolToObject(o, "done", 0);
    return line(o);
}

char *ollama_final(ollama_kind kind, const char *model, const char *created_at, const char *text, size_t len,
                   const ollama_stats *st) {
    cJSON *o = head(kind, model, created_at, text ? text : "", text ? len : 0);
    cJSON_AddBoolToObject(o, "done", 1);
    cJSON_AddStringToObject(o, "done_reason", st->done_reason);
    if (strcmp(st->done_reason, "load") != 0 && strcmp(st->done_reason, "unload") != 0) {
        cJSON_AddNumberToObject(o, "total_duration", (double)st->total_ns);
        cJSON_AddNumberToObject(o, "load_duration", (double)st->load_ns);
        cJSON_AddNumberToObject(o, "prompt_eval_count", st->prompt_eval_count);
        cJSON_AddNumberToObject(o, "prompt_eval_duration", (double)st->prompt_eval_ns);
        cJSON_AddNumberToObject(o, "eval_count", st->eval_count);
        cJSON_AddNumberToObject(o, "eval_duration", (double)st->eval_ns);
    }
    return line(o);
}

char *ollama_error_json(const api_error *e) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", e->message);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

void ollama_param_size(uint64_t params, char out[16]) {
    if (params >= 1000000000ULL) snprintf(out, 16, "%.2fB", params / 1e9);
    else if (params >= 1000000ULL) snprintf(out, 16, "%.2fM", params / 1e6);
    else snprintf(out, 16, "%.2fK", params / 1e3);
}

static cJSON *details(const ollama_model *m) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", m->format);
    cJSON_AddStringToObject(d, "family", m->family);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "families"), cJSON_CreateString(m->family));
    char ps[16];
    ollama_param_size(m->params, ps);
    cJSON_AddStringToObject(d, "parameter_size", ps);
    cJSON_AddStringToObject(d, "quantization_level", m->quant);
    return d;
}

static void add_time(cJSON *o, const char *name, long long unix_s) {
    struct timespec ts = {.tv_sec = (time_t)unix_s, .tv_nsec = 0};
    char t[40];
    ollama_time(t, &ts);
    cJSON_AddStringToObject(o, name, t);
}

static char *print(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* One entry of /api/tags or /api/ps. */
static cJSON *entry(const ollama_model *m, int running) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "name", m->name);
    cJSON_AddStringToObject(x, "model", m->name);
    if (!running) add_time(x, "modified_at", m->modified_s);
    cJSON_AddNumberToObject(x, "size", (double)m->size);
    cJSON_AddStringToObject(x, "digest", m->digest);
    cJSON_AddItemToObject(x, "details", details(m));
    if (running) {
        /* Loaded for the life of the process: a far expiry, as Ollama
         * shows for keep_alive -1. */
        add_time(x, "expires_at", 253402300799LL); /* 9999-12-31T23:59:59Z */
        cJSON_AddNumberToObject(x, "size_vram", 0);
        cJSON_AddNumberToObject(x, "context_length", m->n_ctx);
    }
    return x;
}

char *ollama_tags_json(const ollama_model *m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "models"), entry(m, 0));
    return print(o);
}

char *ollama_ps_json(const ollama_model *m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "models"), entry(m, 1));
    return print(o);
}

char *ollama_show_json(const ollama_model *m) {
    cJSON *o = cJSON_CreateObject();
    char mf[512];
    snprintf(mf, sizeof mf,
             "# qwenc serves this model as it is; there is no Modelfile.\nFROM %s\nPARAMETER num_ctx %d\n", m->name,
             m->n_ctx);
    cJSON_AddStringToObject(o, "modelfile", mf);
    char params[64];
    snprintf(params, sizeof params, "num_ctx                        %d", m->n_ctx);
    cJSON_AddStringToObject(o, "parameters", params);
    /* Qwen2.5's ChatML, in Ollama's template language, for clients that
     * show it; qwenc itself applies the model's template. */
    cJSON_AddStringToObject(o, "template",
                            "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
                            "<|im_start|>assistant\n");
    cJSON_AddItemToObject(o, "details", details(m));
    cJSON *mi = cJSON_AddObjectToObject(o, "model_info");
    cJSON_AddStringToObject(mi, "general.architecture", m->family);
    cJSON_AddNumberToObject(mi, "general.parameter_count", (double)m->params);
    cJSON_AddNumberToObject(mi, "qwen2.context_length", m->max_ctx);
    cJSON_AddNumberToObject(mi, "qwen2.embedding_length", m->hidden);
    cJSON_AddNumberToObject(mi, "qwen2.feed_forward_length", m->inter);
    cJSON_AddNumberToObject(mi, "qwen2.block_count", m->n_layers);
    cJSON_AddNumberToObject(mi, "qwen2.attention.head_count", m->n_heads);
    cJSON_AddNumberToObject(mi, "qwen2.attention.head_count_kv", m->n_kv_heads);
    cJSON_AddNumberToObject(mi, "qwen2.attention.layer_norm_rms_epsilon", m->rms_eps);
    cJSON_AddNumberToObject(mi, "qwen2.rope.freq_base", m->rope_theta);
    cJSON_AddNumberToObject(mi, "qwen2.vocab_size", m->vocab);
    if (m->random_weights) cJSON_AddBoolToObject(mi, "qwenc.random_weights", 1);
    cJSON *caps = cJSON_AddArrayToObject(o, "capabilities");
    cJSON_AddItemToArray(caps, cJSON_CreateString("completion"));
    add_time(o, "modified_at", m->modified_s);
    return print(o);
}

char *ollama_version_json(void) { return strdup("{\"version\":\"" QW_OLLAMA_VERSION "\"}"); }
