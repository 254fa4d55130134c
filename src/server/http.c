/* http.c - the HTTP server on libmicrohttpd (see http.h for the endpoints).
 *
 * Each connection has its own thread (MHD_USE_THREAD_PER_CONNECTION), so a
 * handler may block: the non-streaming generation handler waits for its
 * request in the access callback, the streaming one in the content-reader
 * callback. While waiting, both peek at the socket every 20 ms; a closed
 * socket cancels the request so the engine frees the slot at its next step.
 */
#include "server/http.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* macOS: the server modes ignore SIGPIPE */
#endif

#include "base/log.h"
#include "server/api.h"
#include "server/ollama.h"
#include "server/gate.h"
#include "server/httphead.h"
#include "server/request.h"
#include "server/webui.h"

#define POLL_S 0.02
#define DRAIN_S 2 /* http_stop: most seconds to wait for answers in flight */

struct qw_http {
    qw_http_cfg cfg;
    struct MHD_Daemon *d;
    int port;
    int loopback;            /* bound to a loopback address: check Host */
    char url[128];
    char bound_host[80];     /* as written in a Host header, e.g. "127.0.0.1" or "[::1]" */
    _Atomic(qw_engine *) eng;
    atomic_int stopping;
    qw_gate *gate;           /* owns the listening socket; hands complete requests to MHD */
    long long start_time;
    atomic_ullong http_requests, http_errors;
    atomic_int generating;   /* generation requests not yet completed (answer sent) */
};

/* Per-request state (MHD's con_cls), freed in on_completed. */
typedef struct conn {
    int http11;              /* the request is HTTP/1.1 (interim responses allowed) */
    double t0;               /* when the head was complete: the body's deadline counts from here */
    char *body;
    size_t len, cap;
    int too_big;
    int responded;
    int generating;          /* counted in qw_http.generating */
    api_kind style;          /* whose error documents this request gets: the protocol of its
                              * URL (request_error_json) */
} conn;

/* ---- responses ----------------------------------------------------------- */

/* An error in the style of the request's protocol (k->style: Ollama's
 * {"error": "message"} under /api/, elsewhere OpenAI's {"error": {...}}),
 * rendered by the request layer, which renders a generation's errors too. */
static char *error_json(const conn *k, const api_error *e) { return request_error_json(k->style, e); }

static void add_common_headers(qw_http *h, struct MHD_Response *r) {
    if (h->cfg.cors) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", h->cfg.cors);
        if (strcmp(h->cfg.cors, "*") != 0) MHD_add_response_header(r, "Vary", "Origin");
    }
}

/* Queue body (malloc'd, taken) with status. */
static enum MHD_Result send_body(qw_http *h, struct MHD_Connection *c, const conn *k, int status, char *body,
                                 const char *ctype) {
    if (!body) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        body = strdup(k->style == API_OLLAMA_CHAT ? "{\"error\":\"out of memory\"}" : oom);
        status = 500;
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    add_common_headers(h, r);
    if (status == 503) MHD_add_response_header(r, "Retry-After", "1");
    if (status >= 400) atomic_fetch_add(&h->http_errors, 1);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(qw_http *h, struct MHD_Connection *c, const conn *k, int status, char *json) {
    return send_body(h, c, k, status, json, "application/json");
}

static enum MHD_Result send_error(qw_http *h, struct MHD_Connection *c, const conn *k, const api_error *e) {
    if (e->status >= 500) LOG_WARN("http: %d %s", e->status, e->message);
    else LOG_DEBUG("http: %d %s", e->status, e->message);
    return send_json(h, c, k, e->status, error_json(k, e));
}

static enum MHD_Result fail(qw_http *h, struct MHD_Connection *c, const conn *k, int status, const char *code,
                            const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 7, 8)))
#endif
    ;
static enum MHD_Result fail(qw_http *h, struct MHD_Connection *c, const conn *k, int status, const char *code,
                            const char *param, const char *fmt, ...) {
    api_error e;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_fail(&e, status, code, param, "%s", msg);
    return send_error(h, c, k, &e);
}

/* ---- checks ---------------------------------------------------------------- */

/* Constant-time comparison (length leaks, contents do not). */
static int secret_eq(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return d == 0;
}

static int auth_ok(qw_http *h, struct MHD_Connection *c) {
    if (!h->cfg.api_key) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!a || strncasecmp(a, "Bearer ", 7) != 0) return 0;
    a += 7;
    while (*a == ' ') a++;
    return secret_eq(a, h->cfg.api_key);
}

/* DNS-rebinding defence: a browser page on evil.example that resolves to
 * 127.0.0.1 still sends "Host: evil.example:PORT". */
static int host_ok(qw_http *h, struct MHD_Connection *c) {
    if (!h->loopback) return 1;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (!host) return 1; /* HTTP/1.0 without Host: not a browser */
    static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};
    char want[128];
    for (int i = 0; i < 4; i++) {
        const char *n = i < 3 ? names[i] : h->bound_host;
        snprintf(want, sizeof want, "%s:%d", n, h->port);
        if (!strcasecmp(host, want)) return 1;
        if (h->port == 80 && !strcasecmp(host, n)) return 1;
    }
    return 0;
}

/* ---- routes ---------------------------------------------------------------- */

typedef enum {
    R_NONE, R_HEALTH, R_MODELS, R_MODEL, R_METRICS, R_COMPLETIONS, R_CHAT, R_INFILL, R_TOKENIZE, R_DETOKENIZE,
    R_WEBUI, R_OLLAMA_CHAT, R_OLLAMA_GENERATE, R_OLLAMA_TAGS, R_OLLAMA_PS, R_OLLAMA_SHOW, R_OLLAMA_VERSION,
    R_OLLAMA_EMBED
} route;

/* The URL as printable ASCII (for error messages, which must stay valid
 * UTF-8 JSON whatever bytes a client put in its request line). */
static const char *safe_url(const char *url, char *buf, size_t n) {
    size_t i = 0;
    for (; url[i] && i + 1 < n; i++) buf[i] = (url[i] >= 0x20 && url[i] < 0x7f) ? url[i] : '?';
    buf[i] = '\0';
    return buf;
}

static route find_route(const char *url, const char **want_method) {
    static const struct {
        const char *path, *method;
        route r;
    } t[] = {
        {"/", "GET", R_WEBUI},
        {"/index.html", "GET", R_WEBUI},
        {"/health", "GET", R_HEALTH},
        {"/v1/health", "GET", R_HEALTH},
        {"/v1/models", "GET", R_MODELS},
        {"/models", "GET", R_MODELS},
        {"/metrics", "GET", R_METRICS},
        {"/v1/completions", "POST", R_COMPLETIONS},
        {"/completions", "POST", R_COMPLETIONS},
        {"/v1/chat/completions", "POST", R_CHAT},
        {"/chat/completions", "POST", R_CHAT},
        {"/infill", "POST", R_INFILL},
        {"/tokenize", "POST", R_TOKENIZE},
        {"/detokenize", "POST", R_DETOKENIZE},
        {"/api/chat", "POST", R_OLLAMA_CHAT},
        {"/api/generate", "POST", R_OLLAMA_GENERATE},
        {"/api/tags", "GET", R_OLLAMA_TAGS},
        {"/api/ps", "GET", R_OLLAMA_PS},
        {"/api/show", "POST", R_OLLAMA_SHOW},
        {"/api/version", "GET", R_OLLAMA_VERSION},
        {"/api/embed", "POST", R_OLLAMA_EMBED},
        {"/api/embeddings", "POST", R_OLLAMA_EMBED},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(url, t[i].path)) {
            *want_method = t[i].method;
            return t[i].r;
        }
    if (!strncmp(url, "/v1/models/", 11) && url[11]) {
        *want_method = "GET";
        return R_MODEL;
    }
    return R_NONE;
}

static enum MHD_Result h_health(qw_http *h, struct MHD_Connection *c, const conn *k) {
    qw_engine *e = atomic_load(&h->eng);
    if (!e) return send_json(h, c, k, 503, strdup("{\"status\":\"loading\"}"));
    /* Draining (SIGTERM): a load balancer must stop sending work here. */
    if (atomic_load(&h->stopping)) return send_json(h, c, k, 503, strdup("{\"status\":\"draining\"}"));
    if (e->model->cfg.random_weights)
        return send_json(h, c, k, 200,
                         strdup("{\"status\":\"ok\",\"random_weights\":true,\"warning\":\"this model has RANDOM "
                                "WEIGHTS (qwenc synth): its output is noise\"}"));
    return send_json(h, c, k, 200, strdup("{\"status\":\"ok\"}"));
}

/* GET /: the web chat page (webui.h), or 404 with --no-webui. */
static enum MHD_Result h_webui(qw_http *h, struct MHD_Connection *c, const conn *k) {
    if (h->cfg.no_webui)
        return fail(h, c, k, 404, "not_found", NULL, "the web UI is turned off on this server (--no-webui)");
    size_t n;
    const char *page = webui_page(&n);
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)page, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    for (int i = 0; webui_headers[i][0]; i++) MHD_add_response_header(r, webui_headers[i][0], webui_headers[i][1]);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- Ollama's model endpoints (ollama.h) ---------------------------------- */

static uint64_t mat_params(const qw_mat *m) { return m->data ? (uint64_t)(m->rows * m->cols) : 0; }

/* The served model as Ollama describes one. */
static void ollama_model_of(const qw_engine *e, ollama_model *m) {
    const qw_model *md = e->model;
    const qw_config *cfg = &md->cfg;
    memset(m, 0, sizeof *m);
    m->name = engine_model_id(e);
    size_t dl = strlen(md->dir);
    m->format = dl > 5 && !strcasecmp(md->dir + dl - 5, ".gguf") ? "gguf" : "safetensors";
    m->family = "qwen2";
    m->size = md->weight_bytes;
    /* Every weight (matrices, biases, norm vectors; tied embeddings once). */
    uint64_t p = mat_params(&md->embed) + (cfg->tie_embeddings ? 0 : mat_params(&md->lm_head)) + (uint64_t)cfg->hidden;
    uint64_t by_type[QW_DTYPE_COUNT] = {0};
    for (int i = 0; i < cfg->n_layers; i++) {
        const qw_layer *l = &md->layers[i];
        const qw_mat *mats[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) {
            p += mat_params(mats[k]);
            if ((int)mats[k]->dtype >= 0 && mats[k]->dtype < QW_DTYPE_COUNT) by_type[mats[k]->dtype] += mat_params(mats[k]);
        }
        p += (uint64_t)(l->wq.rows + l->wk.rows + l->wv.rows) + 2 * (uint64_t)cfg->hidden;
    }
    m->params = p;
    int top = 0;
    for (int t = 1; t < QW_DTYPE_COUNT; t++)
        if (by_type[t] > by_type[top]) top = t;
    /* What the file says it is (a GGUF's general.file_type, "Q4_K_M") when
     * it says; else the type holding most of the layers' weights. */
    m->quant = md->file_type[0] ? md->file_type : qw_dtype_name((qw_dtype)top);
    struct stat sb;
    m->modified_s = stat(md->dir, &sb) == 0 ? (long long)sb.st_mtime : 0;
    /* A name for this model and file version, not a hash of the bytes
     * (hashing gigabytes at start would cost seconds): splitmix64 over the
     * id, size and time, four times. */
    uint64_t z = 0x9E3779B97F4A7C15ULL ^ m->size ^ ((uint64_t)m->modified_s << 20);
    for (const char *s = m->name; *s; s++) z = (z ^ (unsigned char)*s) * 0x100000001B3ULL;
    for (int k = 0; k < 4; k++) {
        z += 0x9E3779B97F4A7C15ULL;
        uint64_t x = z;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
        snprintf(m->digest + 16 * k, 17, "%016llx", (unsigned long long)(x ^ (x >> 31)));
    }
    m->n_ctx = e->n_ctx;
    m->max_ctx = cfg->max_pos;
    m->hidden = cfg->hidden;
    m->inter = cfg->inter;
    m->n_layers = cfg->n_layers;
    m->n_heads = cfg->n_heads;
    m->n_kv_heads = cfg->n_kv_heads;
    m->vocab = cfg->vocab;
    m->rms_eps = cfg->rms_eps;
    m->rope_theta = cfg->rope_theta;
    m->random_weights = cfg->random_weights;
}

static enum MHD_Result h_ollama_info(qw_http *h, struct MHD_Connection *c, const conn *k, qw_engine *e, route rt) {
    ollama_model m;
    ollama_model_of(e, &m);
    if (rt == R_OLLAMA_TAGS) return send_json(h, c, k, 200, ollama_tags_json(&m));
    return send_json(h, c, k, 200, ollama_ps_json(&m));
}

/* POST /api/show {"model"} (older clients: "name"). */
static enum MHD_Result h_ollama_show(qw_http *h, struct MHD_Connection *c, qw_engine *e, conn *k) {
    cJSON *j = cJSON_ParseWithLengthOpts(k->body, k->len, NULL, 0);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return fail(h, c, k, 400, "invalid_json", NULL, "the body must be a JSON object");
    }
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "model");
    if (!cJSON_IsString(n)) n = cJSON_GetObjectItemCaseSensitive(j, "name");
    if (!cJSON_IsString(n) || !n->valuestring[0]) {
        cJSON_Delete(j);
        return fail(h, c, k, 400, "missing_field", "model", "'model' is required");
    }
    if (!e->any_model && !ollama_name_matches(n->valuestring, engine_model_id(e))) {
        api_error ae;
        api_model_not_found(&ae, n->valuestring, engine_model_id(e));
        cJSON_Delete(j);
        return send_error(h, c, k, &ae);
    }
    cJSON_Delete(j);
    ollama_model m;
    ollama_model_of(e, &m);
    return send_json(h, c, k, 200, ollama_show_json(&m));
}

/* GET /v1/models (the list) or /v1/models/ID (one: any ID names the one
 * model loaded). */
static enum MHD_Result h_models(qw_http *h, struct MHD_Connection *c, const conn *k, qw_engine *e, int one) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", engine_model_id(e));
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)h->start_time);
    cJSON_AddStringToObject(m, "owned_by", "qwenc");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddNumberToObject(meta, "n_ctx", e->n_ctx);
    cJSON_AddNumberToObject(meta, "vocab", e->model->cfg.vocab);
    cJSON_AddBoolToObject(meta, "random_weights", e->model->cfg.random_weights != 0);
    cJSON *root = m;
    if (!one) {
        root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "object", "list");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), m);
    }
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return send_json(h, c, k, 200, out);
}

static enum MHD_Result h_metrics(qw_http *h, struct MHD_Connection *c, const conn *k, qw_engine *e) {
    qw_sched_metrics m;
    memset(&m, 0, sizeof m);
    if (e) sched_metrics(e->sched, &m);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return send_json(h, c, k, 500, NULL);
#define METRIC(name, type, help, fmt, val) \
    fprintf(f, "# HELP qwenc_" name " " help "\n# TYPE qwenc_" name " " type "\nqwenc_" name " " fmt "\n", val)
    METRIC("requests_total", "counter", "Generation requests accepted.", "%llu", (unsigned long long)m.requests_total);
    METRIC("requests_rejected_total", "counter", "Generation requests refused because the queue was full.", "%llu",
           (unsigned long long)m.requests_rejected);
    METRIC("requests_finished_total", "counter", "Generation requests finished (any reason).", "%llu",
           (unsigned long long)m.requests_finished);
    METRIC("prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", "%llu",
           (unsigned long long)m.prompt_tokens_total);
    METRIC("completion_tokens_total", "counter", "Tokens generated (completion tokens).", "%llu", (unsigned long long)m.gen_tokens_total);
    METRIC("draft_tokens_total", "counter", "Speculative draft tokens verified.", "%llu",
           (unsigned long long)m.draft_tokens_total);
    METRIC("accepted_draft_tokens_total", "counter", "Speculative draft tokens accepted.", "%llu",
           (unsigned long long)m.accepted_draft_tokens_total);
    fprintf(f, "# HELP qwenc_time_to_first_token_seconds Time from request to first generated token.\n"
               "# TYPE qwenc_time_to_first_token_seconds histogram\n");
    for (int b = 0; b < 10; b++)
        fprintf(f, "qwenc_time_to_first_token_seconds_bucket{le=\"%g\"} %llu\n", qw_sched_ttft_bounds[b],
                (unsigned long long)m.ttft_buckets[b]);
    fprintf(f, "qwenc_time_to_first_token_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)m.ttft_count);
    fprintf(f, "qwenc_time_to_first_token_seconds_sum %.6f\n", m.ttft_sum_s);
    fprintf(f, "qwenc_time_to_first_token_seconds_count %llu\n", (unsigned long long)m.ttft_count);
    METRIC("decode_tokens_per_second", "gauge", "Aggregate decode throughput over recent engine steps.", "%.3f",
           m.decode_tps);
    METRIC("engine_busy_seconds_total", "counter", "Seconds the engine spent in forward steps.", "%.6f", m.busy_s);
    METRIC("engine_steps_total", "counter", "Batched forward steps.", "%llu", (unsigned long long)m.steps);
    METRIC("prefill_tokens_total", "counter", "Prompt tokens computed (not taken from the prefix cache).", "%llu",
           (unsigned long long)m.prefill_tokens_total);
    METRIC("prefix_cache_lookups_total", "counter", "Prompts looked up in the prefix cache.", "%llu",
           (unsigned long long)m.prefix_lookups);
    METRIC("prefix_cache_lookup_tokens_total", "counter", "Prompt tokens looked up in the prefix cache.", "%llu",
           (unsigned long long)m.prefix_lookup_tokens);
    METRIC("prefix_cache_hit_tokens_total", "counter", "Prompt tokens whose KV came from the prefix cache.", "%llu",
           (unsigned long long)m.prefix_hit_tokens);
    METRIC("prefix_cache_hit_ratio", "gauge", "Prefix cache hit tokens / looked-up prompt tokens since start.", "%.4f",
           m.prefix_lookup_tokens ? (double)m.prefix_hit_tokens / (double)m.prefix_lookup_tokens : 0.0);
    METRIC("kv_pages_used", "gauge", "KV cache pages held by running requests.", "%lld", (long long)m.kv_pages_used);
    METRIC("kv_pages_cached", "gauge", "Idle KV cache pages kept for the prefix cache.", "%lld",
           (long long)m.kv_pages_cached);
    METRIC("kv_cache_bytes", "gauge", "KV cache page memory allocated.", "%lld", (long long)m.kv_bytes);
    METRIC("kv_page_bytes", "gauge", "Bytes of one KV cache page.", "%lld", (long long)m.kv_page_bytes);
    METRIC("prefix_cache_evictions_total", "counter", "Idle KV pages dropped to stay within --cache-ram.", "%llu",
           (unsigned long long)m.kv_evictions);
    METRIC("queue_depth", "gauge", "Requests waiting for a slot.", "%d", m.queue_depth);
    METRIC("active_slots", "gauge", "Slots prefilling or generating.", "%d", m.active_slots);
    METRIC("slots", "gauge", "Slots (--parallel).", "%d", m.n_slots);
    METRIC("http_requests_total", "counter", "HTTP requests received.", "%llu",
           (unsigned long long)atomic_load(&h->http_requests));
    METRIC("http_errors_total", "counter", "HTTP responses with status >= 400.", "%llu",
           (unsigned long long)atomic_load(&h->http_errors));
    if (h->gate) {
        qw_gate_stats gs;
        gate_stats(h->gate, &gs);
        METRIC("http_connections_open", "gauge", "Connections open (waiting in the gate + handed on).", "%d",
               gs.open);
        METRIC("http_connections_waiting", "gauge", "Connections still sending their request head.", "%d",
               gs.waiting);
        METRIC("http_connections_waiting_body", "gauge",
               "Connections with a complete head still sending their body (held by the gate, no thread).", "%d",
               gs.waiting_body);
        METRIC("http_connections_accepted_total", "counter", "Connections accepted.", "%llu", gs.accepted);
        METRIC("http_connections_handed_total", "counter",
               "Connections handed to a thread: request complete, or body larger than the gate holds.", "%llu",
               gs.handed);
        METRIC("http_connections_handed_partial_total", "counter",
               "Connections handed on before their body was complete (larger than the gate holds).", "%llu",
               gs.handed_partial);
        METRIC("http_connections_refused_total", "counter", "Connections refused 503: every slot held a request.",
               "%llu", gs.refused_full);
        METRIC("http_connections_evicted_total", "counter",
               "Connections answered 503 to make room: the longest still waiting for its request.", "%llu",
               gs.evicted);
        METRIC("http_connections_timed_out_total", "counter", "Connections whose head missed --header-timeout.",
               "%llu", gs.timed_out);
        METRIC("http_connections_body_timed_out_total", "counter",
               "Connections whose body missed its deadline in the gate (6 x --header-timeout): 408.", "%llu",
               gs.body_timed_out);
        METRIC("http_connections_bad_head_total", "counter", "Connections refused for a bad or oversized head.",
               "%llu", gs.bad_head);
        METRIC("http_connections_bad_body_total", "counter",
               "Connections refused 400 for a malformed chunked body or one cut by a half-close.", "%llu",
               gs.bad_body);
        METRIC("http_connections_too_large_total", "counter", "Connections answered 413 by the gate (--max-body).",
               "%llu", gs.too_large);
        METRIC("http_connections_continued_total", "counter",
               "Expect: 100-continue answered by the gate before it waits for the body.", "%llu", gs.continued);
    }
#undef METRIC
    fclose(f);
    return send_body(h, c, k, 200, buf, "text/plain; version=0.0.4; charset=utf-8");
}

static enum MHD_Result h_tokenize(qw_http *h, struct MHD_Connection *c, qw_engine *e, conn *k) {
    api_error ae;
    char *text;
    size_t tl;
    if (api_parse_tokenize(k->body, k->len, &text, &tl, &ae) < 0) return send_error(h, c, k, &ae);
    int32_t *ids = NULL;
    size_t n = 0;
    qw_err err;
    int rc = tok_encode(e->tok, text, tl, &ids, &n, &err);
    free(text);
    if (rc != 0) return fail(h, c, k, 500, "tokenizer_error", "content", "tokenize: %s", err.msg);
    char *buf = NULL;
    size_t bl = 0;
    FILE *f = open_memstream(&buf, &bl);
    if (!f) {
        free(ids);
        return send_json(h, c, k, 500, NULL);
    }
    fputs("{\"tokens\":[", f);
    for (size_t i = 0; i < n; i++) fprintf(f, i ? ",%d" : "%d", (int)ids[i]);
    fputs("]}", f);
    fclose(f);
    free(ids);
    return send_json(h, c, k, 200, buf);
}

static enum MHD_Result h_detokenize(qw_http *h, struct MHD_Connection *c, qw_engine *e, conn *k) {
    api_error ae;
    int32_t *ids;
    int n;
    if (api_parse_detokenize(k->body, k->len, e->model->cfg.vocab, &ids, &n, &ae) < 0)
        return send_error(h, c, k, &ae);
    char *text = NULL;
    size_t tl = 0;
    qw_err err;
    int rc = tok_decode(e->tok, ids, (size_t)n, 0, &text, &tl, &err);
    free(ids);
    if (rc != 0) return fail(h, c, k, 500, "tokenizer_error", "tokens", "detokenize: %s", err.msg);
    /* {"content": text}: the text is valid UTF-8 (decode replaces bad
     * bytes), so escaping quotes, backslashes and controls suffices. */
    char *buf = NULL;
    size_t bl = 0;
    FILE *f = open_memstream(&buf, &bl);
    if (!f) {
        free(text);
        return send_json(h, c, k, 500, NULL);
    }
    fputs("{\"content\":\"", f);
    for (size_t i = 0; i < tl; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch == '\r') fputs("\\r", f);
        else if (ch == '\t') fputs("\\t", f);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputs("\"}", f);
    fclose(f);
    free(text);
    return send_json(h, c, k, 200, buf);
}

/* ---- generation ------------------------------------------------------------ */

/* What the socket says about the peer: 0 nothing new, 1 end of input (the
 * peer shut down its sending side: closed, or only half-closed), 2 gone
 * (reset: its socket is closed and it refused our bytes). */
enum { PEER_OK = 0, PEER_EOF = 1, PEER_GONE = 2 };
static int peer_state(int fd) {
    if (fd < 0) return PEER_OK;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return PEER_GONE;
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return PEER_EOF;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return PEER_GONE;
    return PEER_OK;
}

/* End of input is not a disconnect: a client may send its request and
 * then shut down its sending side (nc -N, HTTP/1.0 tools, some proxies)
 * and still read the answer. Closed and half-closed look the same until
 * the server sends something: a closed socket answers with a reset. So on
 * end of input the server sends one interim "100 Continue" (every HTTP/1.1
 * client skips 1xx responses before the real one); a reset then shows as
 * PEER_GONE within a poll or two and the request is cancelled, while a
 * half-closed client just gets its answer. HTTP/1.0 has no interim
 * responses: such a request runs to its end. */
typedef struct peer_watch {
    int fd;
    int http11;
    int probed;
} peer_watch;

static int peer_gone_cb(void *arg) {
    peer_watch *w = arg;
    int st = peer_state(w->fd);
    if (st == PEER_GONE) return 1;
    if (st == PEER_EOF && !w->probed) {
        w->probed = 1;
        if (w->http11) {
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            if (send(w->fd, cont, sizeof cont - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN &&
                errno != EWOULDBLOCK)
                return 1;
        }
    }
    return 0;
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

/* A streamed answer: the request's SSE bytes, moved to MHD as it asks. */
typedef struct stream_st {
    qw_request *q;
    int fd;
    const char *bytes;    /* borrowed from q until the next event */
    size_t len, off;
    int ended;            /* the last event was rendered */
    int probed;           /* end of input seen and the ping sent */
} stream_st;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_st *st = cls;
    (void)pos;
    for (;;) {
        if (st->off < st->len) {
            size_t n = st->len - st->off;
            if (n > max) n = max;
            memcpy(buf, st->bytes + st->off, n);
            st->off += n;
            return (ssize_t)n;
        }
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        req_event ev;
        request_next(st->q, POLL_S, &ev);
        st->off = 0;
        if (request_sse(st->q, &ev, &st->bytes, &st->len) != 0) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (ev.kind == REQ_EV_DONE || ev.kind == REQ_EV_ERROR) st->ended = 1;
        int ps = ev.kind == REQ_EV_NONE ? peer_state(st->fd) : PEER_OK;
        if (ps == PEER_EOF && !st->probed) {
            /* End of input mid-stream: an SSE comment (ignored by every
             * client) tells a closed peer (reset) from a half-closed one. */
            st->probed = 1;
            static const char ping[] = ": ping\n\n";
            memcpy(buf, ping, sizeof ping - 1 < max ? sizeof ping - 1 : max);
            return (ssize_t)(sizeof ping - 1 < max ? sizeof ping - 1 : max);
        }
        if (ps == PEER_GONE) {
            LOG_DEBUG("http: %s: client went away; cancelling", request_id(st->q));
            request_cancel(st->q);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls) {
    stream_st *st = cls;
    request_free(st->q); /* cancels the request if still running */
    free(st);
}

/* The request's reply (or error) as the response. */
static enum MHD_Result send_reply(qw_http *h, struct MHD_Connection *c, const conn *k, qw_request *q) {
    size_t len;
    const char *body = request_reply(q, &len);
    int status = request_status(q);
    const api_error *ae = request_error(q);
    if (ae && ae->status >= 500) LOG_WARN("http: %d %s", ae->status, ae->message);
    else if (ae) LOG_DEBUG("http: %d %s", ae->status, ae->message);
    char *copy = body ? strndup(body, len) : NULL;
    request_free(q);
    return send_json(h, c, k, status, copy);
}

static enum MHD_Result h_generate(qw_http *h, struct MHD_Connection *c, qw_engine *e, conn *k, api_kind kind) {
    k->generating = 1; /* until on_completed: http_stop lets the answer out */
    atomic_fetch_add(&h->generating, 1);
    qw_request *q = request_new(e, kind);
    if (!q) return send_json(h, c, k, 500, NULL);
    if (request_start(q, k->body, k->len) != 0) return send_reply(h, c, k, q);
    int fd = conn_fd(c);
    if (!request_streaming(q)) {
        peer_watch pw = {.fd = fd, .http11 = k->http11};
        if (request_run(q, POLL_S, peer_gone_cb, &pw) != 0) {
            request_free(q);
            return MHD_NO; /* the client left */
        }
        return send_reply(h, c, k, q);
    }
    stream_st *st = calloc(1, sizeof *st);
    if (!st) {
        request_free(q);
        return send_json(h, c, k, 500, NULL);
    }
    st->q = q;
    st->fd = fd;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st,
                                                                  stream_free);
    if (!resp) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", request_stream_type(q));
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    add_common_headers(h, resp);
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ---- the access handler ---------------------------------------------------- */

/* An error response with one extra header (401's WWW-Authenticate, 405's
 * Allow). */
static enum MHD_Result send_error_with(qw_http *h, struct MHD_Connection *c, const conn *k, const api_error *e, const char *name,
                                       const char *value) {
    char *j = error_json(k, e);
    struct MHD_Response *r = j ? MHD_create_response_from_buffer(strlen(j), j, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, name, value);
    add_common_headers(h, r);
    atomic_fetch_add(&h->http_errors, 1);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)e->status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result cors_preflight(qw_http *h, struct MHD_Connection *c, const conn *k) {
    if (!h->cfg.cors) return fail(h, c, k, 405, "method_not_allowed", NULL, "OPTIONS: CORS is not enabled");
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    add_common_headers(h, r);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    enum MHD_Result ret = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    return ret;
}

/* The first call of a request: the checks that need no body. Sets
 * k->responded when it answered (MHD then discards the body and closes the
 * connection). */
/* The head as MHD parsed it, rebuilt for httphead_check(): the gate checks
 * the first request of a connection before MHD sees it, this every request
 * (later ones on a keep-alive connection never pass the gate). */
typedef struct head_buf {
    char *p;
    size_t n, cap;
    int oom;
} head_buf;

static void hb_put(head_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        while (nc < b->n + n) nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static enum MHD_Result hb_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                 const char *value, size_t value_size) {
    head_buf *b = cls;
    (void)kind;
    hb_put(b, key, key_size);
    hb_put(b, ": ", 2);
    if (value) hb_put(b, value, value_size);
    hb_put(b, "\r\n", 2);
    return MHD_YES;
}

static int head_refused(struct MHD_Connection *c, const char *method, const char *version, char *why, size_t wl) {
    head_buf b = {0};
    hb_put(&b, method, strlen(method));
    hb_put(&b, " / ", 3);
    hb_put(&b, version, strlen(version));
    hb_put(&b, "\r\n", 2);
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, hb_header, &b);
    hb_put(&b, "\r\n", 2);
    int st = b.oom ? 0 : httphead_check(b.p, b.n, why, wl);
    free(b.p);
    return st;
}

static enum MHD_Result on_headers(qw_http *h, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, conn *k) {
    k->responded = 1;
    char why[160];
    int bad = head_refused(c, method, version ? version : "HTTP/1.1", why, sizeof why);
    if (bad) {
        api_error ae;
        api_fail(&ae, bad, bad == 501 ? "not_implemented" : "bad_request", NULL, "%s", why);
        return send_error_with(h, c, k, &ae, "Connection", "close");
    }
    if (!host_ok(h, c))
        return fail(h, c, k, 403, "forbidden_host", NULL, "the Host header does not name this server (DNS-rebinding defence)");
    if (!strcmp(method, "OPTIONS")) return cors_preflight(h, c, k);
    const char *want = NULL;
    route rt = find_route(url, &want);
    api_error e;
    char su[201], sm[21];
    /* The page is public (static, the same in every binary); what it does
     * goes through the API, which needs the key. */
    if (rt != R_HEALTH && rt != R_WEBUI && !auth_ok(h, c)) {
        api_fail(&e, 401, "invalid_api_key", NULL, "missing or wrong API key (Authorization: Bearer KEY)");
        return send_error_with(h, c, k, &e, "WWW-Authenticate", "Bearer");
    }
    if (rt == R_NONE) return fail(h, c, k, 404, "not_found", NULL, "no such endpoint: %s", safe_url(url, su, sizeof su));
    if (strcmp(method, want) != 0) {
        api_fail(&e, 405, "method_not_allowed", NULL, "%s accepts %s, not %s", safe_url(url, su, sizeof su), want,
                 safe_url(method, sm, sizeof sm));
        return send_error_with(h, c, k, &e, "Allow", want);
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (errno || end == cl || (unsigned long long)h->cfg.max_body < v)
            return fail(h, c, k, 413, "body_too_large", NULL, "the body is larger than %ld bytes", h->cfg.max_body);
    }
    k->responded = 0;
    return MHD_YES;
}

/* A piece of the body. */
static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static enum MHD_Result on_body(qw_http *h, conn *k, const char *data, size_t n) {
    /* A body trickled in byte by byte must not hold its thread for ever
     * (MHD's idle timeout restarts at every byte): a fixed deadline from
     * the end of the head. The gate holds a connection until its body has
     * come, with the same deadline; this one covers what the gate hands on
     * early (bodies larger than it holds) and later requests on a
     * keep-alive connection, which never pass the gate. */
    if (mono_now() - k->t0 > h->cfg.body_timeout) {
        LOG_DEBUG("http: the body did not arrive within %g s: closing", h->cfg.body_timeout);
        return MHD_NO;
    }
    if (k->responded || k->too_big) return MHD_YES;
    if (k->len + n > (size_t)h->cfg.max_body) {
        /* A chunked body past the limit: drop it and answer 413 at its end
         * (libmicrohttpd 0.9 cannot answer in mid-upload). */
        k->too_big = 1;
        free(k->body);
        k->body = NULL;
        k->len = k->cap = 0;
        return MHD_YES;
    }
    if (k->len + n + 1 > k->cap) {
        size_t cap = k->cap ? k->cap : 4096;
        while (cap < k->len + n + 1) cap *= 2;
        char *p = realloc(k->body, cap);
        if (!p) return MHD_NO;
        k->body = p;
        k->cap = cap;
    }
    memcpy(k->body + k->len, data, n);
    k->len += n;
    k->body[k->len] = '\0';
    return MHD_YES;
}

/* The whole request is in: route it. */
static enum MHD_Result on_complete_request(qw_http *h, struct MHD_Connection *c, const char *url, conn *k) {
    if (k->too_big) return fail(h, c, k, 413, "body_too_large", NULL, "the body is larger than %ld bytes", h->cfg.max_body);
    const char *want;
    route rt = find_route(url, &want);
    if (rt == R_HEALTH) return h_health(h, c, k);
    if (rt == R_WEBUI) return h_webui(h, c, k);
    if (atomic_load(&h->stopping)) return fail(h, c, k, 503, "shutting_down", NULL, "the server is shutting down");
    qw_engine *e = atomic_load(&h->eng);
    if (rt == R_METRICS) return h_metrics(h, c, k, e);
    if (!e) return fail(h, c, k, 503, "loading", NULL, "the model is loading");
    if (rt == R_MODEL && !e->any_model && strcmp(url + strlen("/v1/models/"), engine_model_id(e)) != 0) {
        api_error ae;
        api_model_not_found(&ae, url + strlen("/v1/models/"), engine_model_id(e));
        return send_error(h, c, k, &ae);
    }
    if (rt == R_MODELS || rt == R_MODEL) return h_models(h, c, k, e, rt == R_MODEL);
    if (rt == R_OLLAMA_VERSION) return send_json(h, c, k, 200, ollama_version_json());
    if (rt == R_OLLAMA_TAGS || rt == R_OLLAMA_PS) return h_ollama_info(h, c, k, e, rt);
    /* POST bodies. */
    if (!k->body) {
        k->body = strdup("");
        if (!k->body) return MHD_NO;
    }
    if (!api_utf8_valid(k->body, k->len)) return fail(h, c, k, 400, "invalid_utf8", NULL, "the body is not valid UTF-8");
    if (k->len == 0) return fail(h, c, k, 400, "invalid_json", NULL, "the body is empty; expected a JSON object");
    switch (rt) {
    case R_COMPLETIONS: return h_generate(h, c, e, k, API_COMPLETION);
    case R_CHAT: return h_generate(h, c, e, k, API_CHAT);
    case R_INFILL: return h_generate(h, c, e, k, API_INFILL);
    case R_OLLAMA_CHAT: return h_generate(h, c, e, k, API_OLLAMA_CHAT);
    case R_OLLAMA_GENERATE: return h_generate(h, c, e, k, API_OLLAMA_GENERATE);
    case R_OLLAMA_SHOW: return h_ollama_show(h, c, e, k);
    case R_OLLAMA_EMBED:
        return fail(h, c, k, 501, "not_implemented", NULL,
                    "qwenc computes no embeddings (a generation server for one chat model)");
    case R_TOKENIZE: return h_tokenize(h, c, e, k);
    case R_DETOKENIZE: return h_detokenize(h, c, e, k);
    default: return fail(h, c, k, 404, "not_found", NULL, "no such endpoint");
    }
}

/* libmicrohttpd's access callback: called first with the headers, then once
 * per piece of the body, then once more with none. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    qw_http *h = cls;
    conn *k = *con_cls;
    if (!k) {
        k = calloc(1, sizeof *k);
        if (!k) return MHD_NO;
        *con_cls = k;
        k->t0 = mono_now();
        /* each request of a keep-alive connection has its own conn */
        k->style = !strncmp(url, "/api/", 5) ? API_OLLAMA_CHAT : API_CHAT;
        k->http11 = version && !strcmp(version, "HTTP/1.1");
        atomic_fetch_add(&h->http_requests, 1);
        return on_headers(h, c, url, method, version, k);
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return on_body(h, k, upload_data, n);
    }
    if (k->responded) return MHD_YES;
    k->responded = 1;
    return on_complete_request(h, c, url, k);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    qw_http *h = cls;
    (void)c;
    (void)toe;
    conn *k = *con_cls;
    if (k) {
        if (k->generating) atomic_fetch_sub(&h->generating, 1);
        free(k->body);
        free(k);
        *con_cls = NULL;
    }
}

/* ---- start / stop ---------------------------------------------------------- */

/* The gate's handoff: a connection whose request (head and body, or as much
 * of a large body as the gate holds) has arrived and is acceptable. */
static int handoff(void *arg, int fd, const struct sockaddr *sa, socklen_t salen) {
    qw_http *h = arg;
    /* MHD closes fd itself when it cannot take it. */
    return MHD_add_connection(h->d, fd, sa, salen) == MHD_YES ? 0 : -1;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    qw_http *h = cls;
    (void)c;
    (void)socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED && h->gate) gate_conn_closed(h->gate);
}

qw_http *http_start(const qw_http_cfg *cfg, qw_err *err) {
    qw_http *h = calloc(1, sizeof *h);
    if (!h) {
        qw_errf(err, "http: out of memory");
        return NULL;
    }
    h->cfg = *cfg;
    if (!h->cfg.host) h->cfg.host = "127.0.0.1";
    if (h->cfg.max_body <= 0) h->cfg.max_body = 1L << 20;
    if (h->cfg.max_conns <= 0) h->cfg.max_conns = 1024;
    if (h->cfg.header_timeout <= 0) h->cfg.header_timeout = 10;
    if (h->cfg.body_timeout <= 0) h->cfg.body_timeout = 6 * h->cfg.header_timeout;
    h->start_time = (long long)time(NULL);
    atomic_init(&h->eng, NULL);
    atomic_init(&h->stopping, 0);

    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gai = getaddrinfo(h->cfg.host, NULL, &hints, &ai);
    if (gai != 0 || !ai) {
        qw_errf(err, "http: --host %s: %s", h->cfg.host, gai_strerror(gai));
        free(h);
        return NULL;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    /* Thread per connection (handlers block, see the top), but MHD never
     * sees the listening socket: the gate (gate.h) holds each connection
     * until its head and body are in, so slow clients cost no thread. */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET;
    char addr[INET6_ADDRSTRLEN];
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_port = htons((uint16_t)cfg->port);
        flags |= MHD_USE_IPv6;
        inet_ntop(AF_INET6, &a6->sin6_addr, addr, sizeof addr);
        h->loopback = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
        snprintf(h->bound_host, sizeof h->bound_host, "[%s]", addr);
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_port = htons((uint16_t)cfg->port);
        inet_ntop(AF_INET, &a4->sin_addr, addr, sizeof addr);
        h->loopback = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
        snprintf(h->bound_host, sizeof h->bound_host, "%s", addr);
    }
    /* Bind the socket ourselves so the port is known (and h complete)
     * before any connection thread can run. */
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    int one = 1;
    socklen_t alen = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* A long backlog (the kernel caps it at somaxconn): the gate accepts at
     * once, and an overflowing queue makes the kernel drop SYNs that come
     * back seconds later in bursts. */
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, alen) != 0 || listen(fd, 4096) != 0) {
        qw_errf(err, "http: cannot listen on %s port %d: %s", h->cfg.host, cfg->port, strerror(errno));
        if (fd >= 0) close(fd);
        free(h);
        return NULL;
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    h->port = cfg->port;
    if (getsockname(fd, (struct sockaddr *)&bound, &bl) == 0)
        h->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    /* The gate enforces --max-conns; libmicrohttpd's own limit is only a
     * backstop, set above it. MHD reports a connection closed (which frees
     * the gate's slot) before it stops counting it, so at the same limit a
     * request handed on in that window was refused by MHD and reset, its
     * client served nothing (seen: test_http_transport's newcomer after an
     * eviction, ~1 run in 6). */
    const unsigned mhd_limit =
        h->cfg.max_conns > 1 << 20 ? (unsigned)h->cfg.max_conns : 2u * (unsigned)h->cfg.max_conns + 16u;
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_CONNECTION_LIMIT,
                            mhd_limit, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)(h->cfg.body_timeout + 1), MHD_OPTION_END);
    if (!h->d) {
        qw_errf(err, "http: cannot start the HTTP server on %s port %d", h->cfg.host, h->port);
        close(fd);
        free(h);
        return NULL;
    }
    qw_gate_cfg gc = {.listen_fd = fd,
                      .max_conns = h->cfg.max_conns,
                      .header_deadline_s = h->cfg.header_timeout,
                      .body_deadline_s = h->cfg.body_timeout,
                      .max_body = h->cfg.max_body,
                      .max_head = 32 * 1024,
                      .handoff = handoff,
                      .arg = h};
    h->gate = gate_start(&gc, err);
    if (!h->gate) {
        MHD_stop_daemon(h->d);
        close(fd);
        free(h);
        return NULL;
    }
    snprintf(h->url, sizeof h->url, "http://%s:%d", h->bound_host, h->port);
    return h;
}

int http_port(const qw_http *h) { return h->port; }
const char *http_url(const qw_http *h) { return h->url; }

void http_set_engine(qw_http *h, qw_engine *e) { atomic_store(&h->eng, e); }

void http_quiesce(qw_http *h) {
    atomic_store(&h->stopping, 1);
    gate_quiesce(h->gate);
}

void http_stop(qw_http *h) {
    if (!h) return;
    gate_quiesce(h->gate);
    /* The scheduler has stopped, so every generation request has ended
     * (finished, cut or refused): give their last bytes a moment to reach
     * the clients before the connections are closed. */
    for (int i = 0; i < DRAIN_S * 100 && atomic_load(&h->generating) > 0; i++) usleep(10000);
    if (h->d) MHD_stop_daemon(h->d);
    gate_stop(h->gate);
    free(h);
}
