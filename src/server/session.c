/* session.c - scheduler tokens -> UTF-8 text with stop strings (session.h). */
#include "server/session.h"

#include <stdlib.h>
#include <string.h>

#include "engine/generate.h"

int session_init(qw_session *s, qw_req *req, const qw_tok *tok, const char *const *stops, int n_stops) {
    memset(s, 0, sizeof *s);
    s->req = req;
    s->ts = tok_stream_new(tok, 1);
    stopstr_init(&s->stop, stops, n_stops);
    if (!s->ts) {
        sched_req_release(req);
        s->req = NULL;
        return -1;
    }
    return 0;
}

void session_free(qw_session *s) {
    if (s->req) sched_req_release(s->req);
    if (s->ts) tok_stream_free(s->ts);
    stopstr_free(&s->stop);
    free(s->piece);
    memset(s, 0, sizeof *s);
}

static int append(qw_session *s, const char *t, size_t n) {
    if (n == 0) return 0;
    if (s->piece_len + n + 1 > s->piece_cap) {
        size_t cap = s->piece_cap ? s->piece_cap : 256;
        while (cap < s->piece_len + n + 1) cap *= 2;
        char *p = realloc(s->piece, cap);
        if (!p) return -1;
        s->piece = p;
        s->piece_cap = cap;
    }
    memcpy(s->piece + s->piece_len, t, n);
    s->piece_len += n;
    s->piece[s->piece_len] = '\0';
    return 0;
}

/* Decoded text through the stop filter into piece. */
static int emit(qw_session *s, const char *t, size_t n) {
    const char *out;
    size_t out_len;
    if (stopstr_feed(&s->stop, t, n, &out, &out_len) != 0) return -1;
    return append(s, out, out_len);
}

int session_poll(qw_session *s, double timeout_s) {
    s->piece_len = 0;
    if (s->piece) s->piece[0] = '\0';
    if (s->finished) return 1;
    const int32_t *toks;
    int n = sched_req_wait(s->req, &s->cursor, &toks, timeout_s);
    for (int i = 0; i < n && !s->stop.hit; i++) {
        size_t len;
        const char *t = tok_stream_feed(s->ts, toks[i], &len);
        s->n_used++;
        if (emit(s, t, len) != 0) return -1;
    }
    if (s->stop.hit) {
        sched_req_cancel(s->req);
        s->finished = 1;
        s->finish = "stop";
        return 1;
    }
    if (n == 0 && sched_req_done(s->req)) {
        /* All tokens were consumed (done is set after the last token is
         * published, and wait returned none past the cursor). */
        int more = sched_req_wait(s->req, &s->cursor, &toks, 0);
        if (more > 0) {
            /* Raced with the final tokens: handle them on the next poll. */
            s->cursor -= more;
            return 0;
        }
        size_t len;
        const char *t = tok_stream_flush(s->ts, &len);
        if (emit(s, t, len) != 0) return -1;
        if (s->stop.hit) {
            s->finish = "stop";
        } else {
            const char *out;
            size_t out_len;
            stopstr_flush(&s->stop, &out, &out_len);
            if (append(s, out, out_len) != 0) return -1;
            qw_req_stats st;
            sched_req_stats(s->req, &st);
            s->failed = st.failed;
            s->finish = st.finish == QW_FINISH_LENGTH ? "length" : "stop";
        }
        s->finished = 1;
        return 1;
    }
    return 0;
}

void session_cancel(qw_session *s) {
    if (s->req) sched_req_cancel(s->req);
}
