/* http.h - the HTTP server (libmicrohttpd): the seed's API, the OpenAI API,
 * tokenize / detokenize, health and Prometheus metrics. See api.h for the
 * API subset and the request fields.
 *
 *   GET  /                     the web chat page (webui.h; 404 with no_webui);
 *                              also /index.html
 *   GET  /health               200 {"status":"ok"} (503 {"status":"loading"});
 *                              "random_weights": true for synthetic models
 *   GET  /v1/models            the one loaded model, under engine_model_id();
 *                              /v1/models/ID returns it for that ID, else 404
 *                              model_not_found (any ID with --any-model)
 *   GET  /metrics              Prometheus text format
 *   POST /v1/completions       seed API + OpenAI completions (+ "stream")
 *   POST /v1/chat/completions  OpenAI chat completions (+ SSE streaming)
 *   POST /tokenize             {"content"} -> {"tokens": [...]}
 *   POST /detokenize           {"tokens": [...]} -> {"content"}
 *   POST /api/chat, /api/generate, GET /api/tags, /api/ps, /api/version,
 *   POST /api/show             Ollama's API (ollama.h); POST /api/embed and
 *                              /api/embeddings 501; every error under /api/
 *                              in Ollama's {"error": "message"} shape
 * (/completions and /chat/completions, /models answer too.)
 *
 * Threads: libmicrohttpd runs one thread per connection. The generation
 * handlers only move bytes: the request lifecycle (parse, submit, text,
 * stop strings, usage, errors) is request.h's; a handler hands it the body
 * and sends back its reply, or its SSE events from a content-reader
 * callback, polling the socket so that a client that goes away cancels its
 * request within one engine step. Handlers never touch the model.
 *
 * Security: bound to 127.0.0.1 by default; when bound to a loopback address
 * the Host header must name localhost, 127.0.0.1 or [::1] with the bound
 * port (DNS-rebinding defence, 403 otherwise); --api-key requires
 * "Authorization: Bearer KEY" everywhere except /health and the static web
 * page (401); CORS headers
 * and OPTIONS preflight only with --cors ORIGIN; bodies over --max-body are
 * 413; invalid UTF-8 400; a full queue 503 with Retry-After.
 */
#ifndef QW_HTTP_H
#define QW_HTTP_H

#include "base/err.h"
#include "server/engine.h"

typedef struct qw_http_cfg {
    const char *host;     /* address to bind, default "127.0.0.1" */
    int port;             /* 0 = any free port */
    const char *api_key;  /* NULL = none */
    const char *cors;     /* NULL = no CORS */
    long max_body;        /* bytes */
    int max_conns;        /* open connections at most, 0 = default (1024); see gate.h */
    double header_timeout;/* seconds for a request head, 0 = default (10) */
    double body_timeout;  /* seconds for a body after its head, 0 = default (6 x header_timeout) */
    int no_webui;         /* 1: no web chat page at / (--no-webui) */
} qw_http_cfg;

typedef struct qw_http qw_http;

/* Bind and start serving (every endpoint but /health answers 503 until
 * http_set_engine). Returns NULL with a message. */
qw_http *http_start(const qw_http_cfg *cfg, qw_err *err);

/* The bound port (useful with port 0). */
int http_port(const qw_http *h);
/* "http://127.0.0.1:8080" (borrowed). */
const char *http_url(const qw_http *h);

/* The engine is ready: requests are served from now on. e is borrowed. */
void http_set_engine(qw_http *h, qw_engine *e);

/* Stop accepting connections; requests that arrive on open connections get
 * 503. Running requests go on (the caller then stops the scheduler). */
void http_quiesce(qw_http *h);

/* Wait (up to 2 s) for the answers of generation requests to be sent (cut
 * ones included: finish_reason "cancelled", or 503 if never started), then
 * close every connection, join the threads and free. The scheduler must
 * have been stopped first so that no handler waits for tokens. */
void http_stop(qw_http *h);

#endif
