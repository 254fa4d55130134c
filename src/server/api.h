/* api.h - the requests and responses of every protocol, apart from any
 * socket: parsing and validation of HTTP bodies and of the Unix socket and
 * stdin request lines, the response and SSE chunk documents, and the one
 * table mapping errors to HTTP status and OpenAI-style error JSON. Pure
 * functions (no server, no model), so the unit tests check them directly;
 * request.h runs them for every transport.
 *
 * API subset served (src/server/http.c routes to these):
 *   POST /v1/completions       the seed's API ({"prompt", "max_tokens" <= 512,
 *                              "system"}; prompt goes through the chat template
 *                              unless "raw": true) plus OpenAI's completion
 *                              fields and "stream"
 *   POST /v1/chat/completions  OpenAI chat: messages (string content or text
 *                              parts), max_tokens / max_completion_tokens,
 *                              temperature, top_p, top_k, min_p, seed, stop,
 *                              presence_penalty, frequency_penalty,
 *                              repetition_penalty, ignore_eos, stream,
 *                              stream_options.include_usage, n (1..16; seeds seed+i),
 *                              logprobs + top_logprobs (0..20)
 *                              + function calling (tools.h): tools,
 *                              tool_choice, parallel_tool_calls, assistant
 *                              tool_calls and tool messages; reasoning_content
 *                              and chat_template_kwargs.enable_thinking (Qwen3)
 *   POST /v1/completions with "suffix": code infill (infill.h), the prompt
 *                              being the code before the gap
 *   POST /infill               llama-server's infill (infill.h)
 *   All three take "stop_token_ids" (vLLM's field: ids that end the answer
 *   without being output) and "speculative": false (qwenc's extension) to decode without
 *   n-gram drafts; usage.completion_tokens_details carries draft_tokens and
 *   accepted_draft_tokens (the speculative drafts verified and accepted).
 *   Both take "response_format" (text, json_object, json_schema) and
 *   "grammar" (GBNF, llama.cpp's field): constrained sampling, see
 *   api_parse_constraint and docs/grammar.md.
 *   POST /tokenize, /detokenize, GET /v1/models, /health, /metrics
 * "model" must name the served model (api_limits.model_id) unless
 * any_model: else 404 model_not_found; absent, it means the served one.
 * /v1/completions also takes n, best_of (= n), logprobs (int 0..20) and echo
 * (the prompt, as the model saw it, before the text; with logprobs, the
 * prompt tokens' logprobs, the first null). logprobs are the log-softmax of
 * the raw logits, before temperature and penalties (logprob.h).
 * Fields that would change the meaning of a request and are not supported
 * (functions / function_call (legacy), tools on /v1/completions, suffix
 * on chat, a JSON Schema keyword outside the subset, logit_bias, best_of other than
 * n, audio, prediction, non-text modalities or message parts) are a 400 that
 * names the field. A model whose chat template qwenc does not render
 * answers chat with a 400 unsupported_chat_template. Unknown fields are
 * ignored (user, metadata, store, ...).
 */
#ifndef QW_API_H
#define QW_API_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "sample/logprob.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

/* An error on its way to the client. */
typedef struct api_error {
    int status;          /* HTTP status */
    const char *type;    /* OpenAI error type, e.g. "invalid_request_error" */
    const char *code;    /* short machine code, e.g. "invalid_type"; NULL -> null */
    char param[96];      /* the field at fault, "" -> null */
    char message[512];
} api_error;

/* Fill e and return -1. type is derived from status. */
int api_fail(api_error *e, int status, const char *code, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Field name of JSON object o (a cJSON *) as a string: absent or null sets
 * *out NULL and returns 0; a string sets *out (owned by o) and returns 1;
 * any other type is a 400 invalid_type naming the field (-1). */
int api_get_str(const void *o, const char *name, const char **out, api_error *e);

/* 404 model_not_found for a request or /v1/models/ID naming a model other
 * than the served one. Returns -1. */
int api_model_not_found(api_error *e, const char *name, const char *served);

/* {"error":{"message","type","param","code"}} (malloc'd, NUL-terminated). */
char *api_error_json(const api_error *e);

/* s[len] as valid UTF-8, every invalid byte replaced by U+FFFD (malloc'd,
 * NUL-terminated; a token's bytes may end inside a character). */
char *api_utf8_lossy(const char *s, size_t len);

/* 1 if s[len] is valid UTF-8 (no overlongs, surrogates or > U+10FFFF). */
int api_utf8_valid(const char *s, size_t len);

/* The request protocols: the two generation endpoints of the HTTP API and
 * the token-id protocols of the Unix socket (sockserv.h) and stdin
 * (stdinserv.h) servers. */
typedef enum {
    API_COMPLETION = 0, API_CHAT = 1, API_SOCKET = 2, API_STDIN = 3, API_INFILL = 4,
    API_OLLAMA_CHAT = 5, API_OLLAMA_GENERATE = 6 /* Ollama's /api/chat, /api/generate (ollama.h) */
} api_kind;

/* /infill without n_predict / max_tokens: tokens to generate. */
#define API_INFILL_DEFAULT 128

/* What the server knows when it parses a request. */
typedef struct api_limits {
    const qw_tok *tok;        /* for encoding prompts */
    int vocab;                /* model vocab: token ids must be < vocab */
    int n_ctx;                /* prompt must be < n_ctx tokens */
    qw_sampling sampling;     /* defaults for fields not given */
    int completion_max_tokens;/* seed API limit: 512 */
    int completion_default;   /* seed API default: 50 */
    const char *model_id;     /* the served model's id; a request naming another one is
                               * 404 model_not_found (NULL or any_model: any name works) */
    int any_model;
} api_limits;

#define API_MAX_STOP_IDS 32

typedef struct api_req {
    api_kind kind;
    int32_t *prompt;          /* [n_prompt] malloc'd */
    int n_prompt;
    int max_tokens;
    qw_sampling sampling;
    int ignore_eos;
    char **stop;              /* [n_stop] malloc'd strings (non-empty) */
    int n_stop;
    int stream;
    int include_usage;
    int seed_set;             /* the request gave "seed" */
    int no_spec;              /* "speculative": false */
    int tools_mode;           /* chat: tools_mode (tools.h); 0 = no tools */
    int tools_parallel;       /* parallel_tool_calls */
    int32_t stop_ids[API_MAX_STOP_IDS]; /* token ids that end the answer (not output):
                               * "stop_token_ids" (vLLM's field), plus for an infill
                               * prompt the FIM and repository tokens (fim_stop_ids) */
    int n_stop_ids;
    qw_grammar *constraint;   /* the one grammar the output must follow (api_parse_constraint:
                               * a forced tool call, response_format, grammar, or calls-or-
                               * format), NULL = free text. One reference, released by
                               * api_req_free. */
    const char *constraint_param; /* the field it came from, for errors: "tool_choice",
                               * "response_format" or "grammar" (static) */
    int n;                    /* choices, 1..API_MAX_N ("n"; "best_of" must equal it) */
    int logprobs;             /* chat: "logprobs": true; completions: "logprobs": int given */
    int top_logprobs;         /* alternatives per token: chat "top_logprobs", completions
                               * "logprobs" (0..20) */
    int echo;                 /* completions: "echo": true */
} api_req;

#define API_MAX_N 16


/* The one grammar of an answer (docs/grammar.md, "Which constraint
 * applies"), from the request body's fields (json: a cJSON object) and its
 * parsed tools (NULL or mode TOOLS_OFF: none, or tool_choice "none"):
 *   "response_format": {"type": "text"}                    nothing
 *                      {"type": "json_object"}             any JSON object
 *                      {"type": "json_schema", "json_schema": {"name", "schema",
 *                       "strict", "description"}}          that schema (docs/grammar.md)
 *   "grammar": "GBNF text"                                 llama.cpp's grammar format
 * Precedence, as OpenAI and llama-server decide:
 *   grammar + a JSON response_format      400 naming "grammar" (one or the other)
 *   grammar + tools (tool_choice not none) 400 naming "grammar" (llama-server:
 *                                          "Cannot use custom grammar constraints
 *                                          with tools"); a call has its own grammar
 *   tool_choice required / a function     the call grammar (tools_gbnf); a
 *     (+ response_format or not)          response_format is checked but shapes
 *                                          only text answers, and this answer is
 *                                          a call (OpenAI answers the same)
 *   tool_choice auto + response_format    a call or an answer in the format:
 *                                          root ::= calls | format
 *   response_format alone / grammar alone that one
 * Sets r->constraint and r->constraint_param. Returns 0, or -1 and e: 400
 * naming the field, and for a schema the unsupported keyword and where it
 * is. (src/server/api_grammar.c) */
struct api_tools;
int api_parse_constraint(const void *json, const struct api_tools *tools, api_req *r, api_error *e);

/* Parse a /v1/completions, /v1/chat/completions or /infill body (already
 * checked to be valid UTF-8). Returns 0 and *r (free with api_req_free), or
 * -1 and e. */
int api_parse(api_kind kind, const char *body, size_t len, const api_limits *lim, api_req *r,
              api_error *e);
void api_req_free(api_req *r);

/* The Unix socket's request line ({"tokens": [...], "max_tokens", sampling
 * fields, "ignore_eos", "speculative"}; see sockserv.h) and the stdin line
 * ("IDS|MAX"; see stdinserv.h) as an api_req of kind API_SOCKET / API_STDIN
 * (no stop strings, never streamed). Returns 0, or -1 and e. */
int api_parse_socket(const char *line, size_t len, const api_limits *lim, api_req *r, api_error *e);
int api_parse_stdin(const char *line, size_t len, const api_limits *lim, api_req *r, api_error *e);

/* Parse "IDS|MAX" (len bytes, no newline). Returns 0 with *ids (malloc'd),
 * *n, *max_tokens; or -1 with a message in msg. Each id in [0, vocab),
 * max_tokens in [0, max_limit]. */
int stdin_parse_line(const char *line, size_t len, int vocab, int max_limit, int32_t **ids, int *n,
                     int *max_tokens, char *msg, size_t msg_len);

/* Parse only the sampling fields of a JSON object (temperature, top_p, top_k,
 * min_p, seed, presence_penalty, frequency_penalty, repetition_penalty /
 * repeat_penalty) over *s. Shared with the Unix socket protocol. json is a
 * cJSON object (void * to keep cJSON out of this header). */
int api_parse_sampling(const void *json, qw_sampling *s, api_error *e);

/* /tokenize body -> text to encode (malloc'd). */
int api_parse_tokenize(const char *body, size_t len, char **text, size_t *text_len, api_error *e);
/* /detokenize body -> ids (malloc'd), each in [0, vocab). */
int api_parse_detokenize(const char *body, size_t len, int vocab, int32_t **ids, int *n,
                         api_error *e);

/* Everything a response or chunk carries besides the text. */
typedef struct api_meta {
    const char *id;       /* "chatcmpl-..." / "cmpl-..." */
    long long created;    /* unix seconds */
    const char *model;
} api_meta;

/* One choice of a response (n > 1: several). */
typedef struct api_choice {
    const char *text;
    size_t text_len;
    const char *finish;   /* "stop" / "length" / "cancelled" */
    void *logprobs;       /* a cJSON node for choices[i].logprobs (taken: freed by the
                           * builder), or NULL for null */
} api_choice;

typedef struct api_result {
    const char *text;     /* the one choice, when n_choices == 0 */
    size_t text_len;
    const char *finish;   /* "stop" / "length" / "cancelled" */
    int prompt_tokens, gen_tokens;
    int draft_tokens, accepted_draft_tokens;
    double prefill_tps, decode_tps, elapsed_s;
    const api_choice *choices; /* [n_choices], index = position; overrides text/finish */
    int n_choices;
    int cached_tokens;    /* usage.prompt_tokens_details.cached_tokens */
} api_result;

/* Non-streaming response documents (malloc'd JSON). */
char *api_completion_json(const api_meta *m, const api_result *r);
char *api_chat_json(const api_meta *m, const api_result *r);

/* One SSE event "data: {json}\n\n" (malloc'd). For API_CHAT:
 *   role != NULL  -> delta {"role": role, "content": ""} (the first chunk)
 *   text != NULL  -> delta {"content": text}
 *   finish != NULL-> delta {} and finish_reason
 * For API_COMPLETION: choices[0].text = text (or ""), finish_reason.
 * usage: if non-NULL, a usage-only chunk (choices []) with these counts. */
typedef struct api_usage {
    int prompt_tokens, completion_tokens;
    int draft_tokens, accepted_draft_tokens;
    int cached_tokens;    /* prompt tokens whose KV came from the prefix cache */
} api_usage;
char *api_sse_chunk(api_kind kind, const api_meta *m, const char *role, const char *text,
                    size_t text_len, const char *finish, const api_usage *usage);
/* The same for choice `index`, with choices[0].logprobs = logprobs (a cJSON
 * node, taken; NULL -> null). */
char *api_sse_chunk_at(api_kind kind, const api_meta *m, int index, const char *role, const char *text,
                       size_t text_len, const char *finish, void *logprobs, const api_usage *usage);

/* "data: [DONE]\n\n" */
#define API_SSE_DONE "data: [DONE]\n\n"

#endif
