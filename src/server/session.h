/* session.h - one generation request seen as text: the scheduler's tokens
 * through the tokenizer's streaming UTF-8 decoder, then the stop-string
 * filter. Used by the HTTP handlers for streaming and non-streaming replies.
 *
 * The session cancels its scheduler request as soon as a stop string is
 * seen (the engine frees the slot within one step) and reports
 * finish_reason "stop"; EOS -> "stop"; the token limit or a full context ->
 * "length". One thread uses a session at a time.
 */
#ifndef QW_SESSION_H
#define QW_SESSION_H

#include <stddef.h>

#include "engine/sched.h"
#include "server/stopstr.h"
#include "tokenizer/tokenizer.h"

typedef struct qw_session {
    qw_req *req;            /* owned: released by session_free */
    int cursor;             /* tokens consumed from req */
    int n_used;             /* tokens that made up the output (up to a stop string) */
    qw_tok_stream *ts;
    qw_stopstr stop;
    int finished;
    const char *finish;     /* "stop" / "length" once finished */
    char *piece;            /* text released by the last poll */
    size_t piece_len, piece_cap;
    int failed;
} qw_session;

/* Takes ownership of req. stops are borrowed for the session's life.
 * Returns 0, or -1 on allocation failure (req is released). */
int session_init(qw_session *s, qw_req *req, const qw_tok *tok, const char *const *stops, int n_stops);
void session_free(qw_session *s);

/* Wait up to timeout_s for new tokens, decode them. On return s->piece
 * [s->piece_len] holds the newly released text (possibly empty). Returns 1
 * when the session has finished (piece then holds the last text), 0 if it
 * goes on, -1 on allocation failure. */
int session_poll(qw_session *s, double timeout_s);

/* Stop generating (client went away). */
void session_cancel(qw_session *s);

#endif
