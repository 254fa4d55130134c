/* sockserv.h - the Unix socket server (the seed's `--server PATH`).
 *
 * Protocol: a client connects, sends ONE request as one line of JSON, and
 * receives ONE line of JSON; then the server closes the connection.
 *
 *   request:  {"tokens": [151644, 8948, 198], "max_tokens": 20,
 *              optional: "temperature", "top_p", "top_k", "min_p", "seed",
 *              "presence_penalty", "frequency_penalty",
 *              "repetition_penalty" (or "repeat_penalty"), "ignore_eos"}
 *              max_tokens defaults to 50 and must be in [0, context size].
 *   response: {"tokens": [...generated ids, EOS not included...],
 *              "prompt_tokens": 3, "gen_tokens": 20, "prefill_tps": 812.5,
 *              "decode_tps": 41.3, "elapsed_s": 0.52,
 *              "finish_reason": "stop" | "length" | "cancelled" (cut by shutdown)}
 *   error:    {"error": "message naming the field"}
 *
 * Example: echo '{"tokens": [151644, 8948, 198], "max_tokens": 20}' | nc -U /tmp/qwen.sock
 *
 * Sampling defaults to greedy unless the command line gave sampling flags.
 * Connections are served concurrently, each by its own thread, through the
 * shared scheduler; a client that hangs up cancels its request. A stale
 * socket file (nobody listening) is replaced; a live one is an error. The
 * file is removed when the server stops. The request itself (parsing,
 * submission, the reply line, errors) is request.h's; this module moves the
 * line in and the answer out.
 */
#ifndef QW_SOCKSERV_H
#define QW_SOCKSERV_H

#include "base/err.h"
#include "server/engine.h"

typedef struct qw_sockserv qw_sockserv;

/* Bind PATH and start accepting. Returns NULL with a message. */
qw_sockserv *sockserv_start(const char *path, qw_engine *e, qw_err *err);

/* Limits (call before clients connect; defaults 256 and 30 s): connections
 * open at once (more are answered an error line and closed at once), and
 * the seconds a client has to send its whole line, counted from connect. */
void sockserv_set_limits(qw_sockserv *s, int max_conns, double line_deadline_s);

/* Stop accepting and unlink the socket file (requests in flight go on). */
void sockserv_quiesce(qw_sockserv *s);

/* Wait for connection threads (the scheduler must be stopped first, so that
 * none waits for tokens), then free. */
void sockserv_stop(qw_sockserv *s);

/* Serve one request line (the protocol above) and return the response line
 * without the newline (malloc'd). gone(): polled while waiting; returns 1
 * if the client has left (the request is then cancelled and NULL returned).
 * Exposed for tests. */
char *sockserv_handle_line(qw_engine *e, const char *line, size_t len, int (*gone)(void *), void *gone_arg);

#endif
