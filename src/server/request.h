/* request.h - one generation request, from the bytes a client sent to the
 * bytes it gets back, apart from any transport.
 *
 * Every server (HTTP, Unix socket, stdin) runs the same lifecycle here:
 *
 *   request_new(engine, kind)         a request object with its own memory
 *   request_start(q, bytes, len)      parse, validate, template, submit
 *   request_next(q, timeout, &ev)     the event stream, in this order:
 *                                       START, (DELTA | FINISH)*, then DONE
 *                                       or ERROR; every choice i < n gets
 *                                       its DELTAs then one FINISH
 *   request_sse(q, &ev, ...)          an event as SSE bytes (HTTP streaming)
 *   request_run(q, poll, gone, arg)   or: run to the end, watching the client
 *   request_reply(q, ...)             the whole answer (or the error) in the
 *                                     protocol's format, with request_status
 *   request_free(q)                   everything, at once
 *
 * A transport only moves bytes: it hands in the request bytes, moves the
 * rendered bytes to its client and reports a client that went away (by
 * request_cancel, or by the gone() callback of request_run). Parsing, the
 * chat template, the random seed of an unseeded request, submission and its
 * errors, UTF-8 text decoding, stop strings, finish reasons, usage, timing
 * and the error style of each protocol are decided here, once.
 *
 * Like llama.cpp's server_response_reader (tools/server), the request is
 * the consumer's side of the scheduler: sched.h delivers token ids, the
 * request turns them into protocol events. Like h2o's per-request pool, the
 * request's parse results, text and rendered bytes come from its own arena
 * (base/arena.h), capped at REQUEST_MEM_CAP: a request that would need more
 * ends with a 500 out_of_memory error and the process carries on.
 *
 * Finish reasons: EOS or a stop string -> "stop" (a stop string cancels the
 * scheduler request at once, and no part of it reaches the client); the
 * token limit or a full context -> "length". Shutdown is never "stop": a
 * request the scheduler cancelled (sched_stop) before it produced a token
 * ends with ERROR 503 shutting_down; one cut mid-way ends with DONE and
 * finish "cancelled" (the socket's finish_reason too; stdin answers an
 * "error: ... cut after N tokens: IDS" line).
 *
 * n > 1 (HTTP "n", "best_of" = n): n scheduler requests with the same
 * prompt (the engine's prefix cache shares its KV), choice i sampled with
 * seed + i; events carry the choice index; usage counts the prompt once and
 * the completion tokens of every choice.
 *
 * logprobs: the scheduler computes the records (sched.h, logprob.h: raw
 * logits' log-softmax, before temperature and penalties) for the requests
 * that ask; DELTA events carry the records of their tokens, and replies
 * render them in OpenAI's shapes (chat: logprobs.content[{token, logprob,
 * bytes, top_logprobs}]; completions: logprobs {tokens, token_logprobs,
 * top_logprobs, text_offset}). echo (completions) puts the prompt as the
 * model saw it (detokenized, after the chat template unless raw) before the
 * text, and with logprobs the prompt tokens' records first (the first
 * null); a stream sends it as each choice's first chunk, once the prompt
 * is computed.
 *
 * Threads: a request is used by one thread at a time (the transport's
 * connection thread); the engine and its scheduler are shared.
 */
#ifndef QW_REQUEST_H
#define QW_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "server/api.h"
#include "server/engine.h"

/* Most bytes one request's arena may take (parse results excluded). */
#define REQUEST_MEM_CAP ((size_t)64 << 20)

typedef struct qw_request qw_request;

typedef enum {
    REQ_EV_NONE = 0, /* nothing new within the timeout */
    REQ_EV_START,    /* the request runs (first event; the chat role chunks, the echo) */
    REQ_EV_DELTA,    /* new output of choice index: text (text protocols) and token ids */
    REQ_EV_FINISH,   /* choice index finished; finish says why */
    REQ_EV_DONE,     /* every choice finished; the last event (finish: choice 0's) */
    REQ_EV_ERROR,    /* failed (request_error says why); the last event */
} req_ev_kind;

typedef struct req_event {
    req_ev_kind kind;
    int index;             /* DELTA, FINISH: the choice */
    const char *text;      /* DELTA: text released (may be empty: held back for a stop string
                            * or an unfinished UTF-8 character); borrowed until the next call */
    size_t text_len;
    const int32_t *tokens; /* DELTA: the ids behind it, [n_tokens]; borrowed */
    int n_tokens;
    const qw_logprob *logprobs; /* DELTA: [n_tokens] records if logprobs were asked, else NULL */
    const char *finish;    /* FINISH, DONE: "stop" / "length" / "cancelled" (cut by shutdown) */
} req_event;

/* Counts and timing of a request (one formula for every transport). */
typedef struct req_usage {
    int prompt_tokens;
    int completion_tokens;     /* tokens that made the output (up to a stop string), all
                                * choices */
    int draft_tokens, accepted_draft_tokens;
    int cached_tokens;         /* prompt tokens whose KV came from the prefix cache */
    double prefill_tps;        /* prompt tokens / (admitted -> first token) */
    double decode_tps;         /* (generated - 1) / (first token -> finish) */
    double elapsed_s;          /* submit -> finish */
} req_usage;

/* A new request of the given protocol, or NULL when out of memory. e is
 * borrowed and must outlive the request. */
qw_request *request_new(qw_engine *e, api_kind kind);

/* Parse and validate bytes[len] (an HTTP body or a protocol line), encode
 * the prompt (chat template unless raw), pick a random seed for an unseeded
 * HTTP request when the command line fixed none, and submit to the
 * scheduler. Returns 0, or -1 with request_error / request_reply set (400 bad
 * request, 503 queue full or shutting down, 500 out of memory). */
int request_start(qw_request *q, const char *bytes, size_t len);

/* 1 if the client asked for a stream (HTTP "stream": true). */
int request_streaming(const qw_request *q);

/* The next event, waiting up to timeout_s for new tokens (timeout_s < 0:
 * forever). Never fails: running out of memory ends the stream with ERROR.
 * After DONE or ERROR it returns the same final event again. */
void request_next(qw_request *q, double timeout_s, req_event *ev);

/* The event as SSE bytes (chat: START -> the role chunk; DELTA with text ->
 * a content chunk; DONE -> the finish chunk, the usage chunk if asked, and
 * [DONE]; ERROR -> an error event, the usage chunk if asked, and [DONE]).
 * *bytes[*len] is borrowed until the next call (*len may be 0). Returns 0,
 * or -1 when out of memory (the transport then ends the stream). */
int request_sse(qw_request *q, const req_event *ev, const char **bytes, size_t *len);

/* The streamed bytes' Content-Type: "text/event-stream" (SSE, the OpenAI
 * kinds) or "application/x-ndjson" (the Ollama kinds, whose request_sse
 * renders Ollama's newline-delimited objects instead: a text object per
 * DELTA, the stats object at DONE, {"error": ...} at ERROR). /infill
 * streams SSE in llama-server's shape (infill.h: {"content", "stop": false}
 * per DELTA, the answer's document at DONE, no [DONE]). */
const char *request_stream_type(const qw_request *q);

/* Run to the end for a non-streamed answer: events until DONE or ERROR,
 * calling gone(arg) about every poll_s seconds (gone may be NULL). Returns
 * 0 when finished (request_reply is ready), 1 if gone() said the client
 * left (the request is then cancelled; there is nothing to reply). */
int request_run(qw_request *q, double poll_s, int (*gone)(void *), void *arg);

/* The whole answer after request_run, or the error after a failed
 * request_start or an ERROR event, in the protocol's format: HTTP -> the
 * JSON document (api.h) with request_status's status; socket -> one JSON
 * line {"tokens": [...], ...} or {"error": "..."}; stdin -> "ID ID ..." or
 * "error: ...". No newline. Borrowed from the request; NULL if out of
 * memory. */
const char *request_reply(qw_request *q, size_t *len);

/* An error as protocol kind's clients expect it, the one place that
 * decides (request_reply uses it, and the HTTP server for the errors it
 * answers itself): Ollama's kinds {"error": "message"}; the OpenAI-style
 * HTTP kinds {"error": {"message", "type", "param", "code"}}; the socket
 * {"error": "message"}; stdin "error: message". malloc'd, NULL when out of
 * memory. */
char *request_error_json(api_kind kind, const api_error *e);

/* HTTP status of the reply: 200, or the error's status. */
int request_status(const qw_request *q);

/* The error, or NULL if none. */
const api_error *request_error(const qw_request *q);

/* Counts and timing so far (all zero before the request was submitted). */
void request_usage(const qw_request *q, req_usage *u);

/* The response id, e.g. "chatcmpl-..." ("" for the token protocols). */
const char *request_id(const qw_request *q);

/* The client went away: stop generating (the engine frees the slot within
 * one step). The request must still be freed. */
void request_cancel(qw_request *q);

/* Cancel if still running and free everything. NULL is fine. */
void request_free(qw_request *q);

#endif
