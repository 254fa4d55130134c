/* ollama.h - Ollama's REST API (ollama/ollama docs/api.md) as pure functions
 * over JSON, apart from any socket, like api.h for the OpenAI API: request
 * parsing into the same api_req the OpenAI endpoints run, and the response
 * documents. The HTTP server routes to these (http.h).
 *
 * Served on the same port as the OpenAI API:
 *   POST /api/chat      {"model", "messages", "stream" (default true),
 *                        "options", "keep_alive"}: NDJSON objects
 *                        {"model","created_at","message":{"role","content"},
 *                        "done":false} and a last one with "done": true,
 *                        "done_reason" and the durations (ns); stream false:
 *                        that last object with the whole message
 *   POST /api/generate  {"model", "prompt", "system", "raw", "stream",
 *                        "options", "keep_alive"}: the same with "response"
 *   Empty "messages" / "prompt": Ollama's load call, answered at once with
 *   done_reason "load" ("unload" with keep_alive 0; the model stays loaded:
 *   qwenc serves one model for the life of the process).
 *   GET /api/tags, GET /api/ps, POST /api/show, GET /api/version
 *   POST /api/embed, /api/embeddings: 501 (qwenc computes no embeddings)
 *
 * options -> qwenc sampling: temperature, top_p, top_k, min_p, seed,
 * num_predict (-1 / -2: until the context is full), stop, repeat_penalty,
 * repeat_last_n, presence_penalty, frequency_penalty. Options that only tune
 * Ollama's runtime (num_ctx, num_batch, num_thread, num_gpu, main_gpu,
 * num_keep, numa, low_vram, use_mmap, use_mlock, vocab_only,
 * penalize_newline) are ignored; samplers qwenc lacks (mirostat != 0,
 * typical_p != 1, tfs_z != 1) are a 400 naming the option. keep_alive is
 * accepted and has no effect.
 * format: "json" or a JSON Schema object, mapped onto the OpenAI request's
 * response_format (json_object / json_schema), so the grammar engine
 * constrains the answer; its refusals name "format".
 * Refused with a 400 naming the field: tools, think (true), images, suffix, template, context, logprobs.
 * "model" is required (Ollama's clients always send it) and must name the
 * served model (ollama_name_matches) unless the limits allow any.
 * Errors are Ollama's shape: {"error": "message"}.
 */
#ifndef QW_OLLAMA_H
#define QW_OLLAMA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "server/api.h"

typedef enum { OLLAMA_CHAT = 0, OLLAMA_GENERATE = 1 } ollama_kind;

typedef struct ollama_req {
    api_req req;        /* what the scheduler runs (empty when load_only) */
    char model[256];    /* the "model" the client named, echoed in responses */
    int stream;         /* Ollama's default: 1 */
    int load_only;      /* no messages / prompt: answer done at once */
    int unload;         /* load_only with keep_alive 0 */
} ollama_req;

/* Parse an /api/chat or /api/generate body (already checked to be valid
 * UTF-8). lim as for api_parse. Returns 0 and *o (free with
 * ollama_req_free), or -1 and e (param names the Ollama field, e.g.
 * "options.temperature"). */
int ollama_parse(ollama_kind kind, const char *body, size_t len, const api_limits *lim, ollama_req *o,
                 api_error *e);
void ollama_req_free(ollama_req *o);

/* 1 if a client's model name means the served model id: the id itself or
 * "ID:latest" (Ollama's clients add the default tag). Other names are 404
 * model_not_found, as for the OpenAI API, unless --any-model. */
int ollama_name_matches(const char *name, const char *id);

/* ts as Ollama writes created_at: "2024-07-22T20:47:51.147561123Z" (UTC). */
void ollama_time(char out[40], const struct timespec *ts);

/* The numbers of the last object; durations in nanoseconds. */
typedef struct ollama_stats {
    const char *done_reason;  /* "stop", "length", "load", "unload" */
    int prompt_eval_count, eval_count;
    int64_t total_ns, load_ns, prompt_eval_ns, eval_ns;
} ollama_stats;

/* One streamed object, newline-terminated (malloc'd): {"model",
 * "created_at", "message": {"role": "assistant", "content": text} (chat) or
 * "response": text (generate), "done": false}. text[len] is UTF-8. */
char *ollama_chunk(ollama_kind kind, const char *model, const char *created_at, const char *text, size_t len);

/* The last object, newline-terminated (malloc'd): done true, done_reason
 * and the stats (counts and durations left out for load / unload).
 * text: the whole answer (not streaming) or "" (streaming). */
char *ollama_final(ollama_kind kind, const char *model, const char *created_at, const char *text, size_t len,
                   const ollama_stats *st);

/* {"error": message} (malloc'd). */
char *ollama_error_json(const api_error *e);

/* The one model served, as /api/tags, /api/ps and /api/show describe it. */
typedef struct ollama_model {
    const char *name;         /* "e2e-model:latest" */
    const char *format;       /* "gguf" or "safetensors" */
    const char *family;       /* "qwen2" */
    const char *quant;        /* the main matrices' type: "Q4_K", "BF16", ... */
    char digest[65];          /* 64 hex digits naming this model (not a hash of the file) */
    uint64_t size;            /* bytes of weights */
    uint64_t params;          /* parameter count */
    long long modified_s;     /* file modification time, unix seconds */
    int n_ctx;                /* the server's context (tokens) */
    int max_ctx;              /* the model's max_position_embeddings */
    int hidden, inter, n_layers, n_heads, n_kv_heads, vocab;
    float rms_eps, rope_theta;
    int random_weights;
} ollama_model;

/* "494.03M", "1.54B" (Ollama's parameter_size). */
void ollama_param_size(uint64_t params, char out[16]);

char *ollama_tags_json(const ollama_model *m);
char *ollama_ps_json(const ollama_model *m);
char *ollama_show_json(const ollama_model *m);
/* {"version": QW_OLLAMA_VERSION}: the Ollama API version this follows
 * (clients check it for features), not qwenc's. */
#define QW_OLLAMA_VERSION "0.6.0"
char *ollama_version_json(void);

#endif
