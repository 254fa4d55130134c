/* gate.h - the HTTP admission gate: holds connections until their whole
 * request (head and body) has arrived, so slow clients cost a file
 * descriptor, not a thread.
 *
 * libmicrohttpd runs thread-per-connection here because the request layer
 * blocks (a handler waits for its generation). Unguarded, that made
 * slowloris cheap: 300 clients trickling a header at 1 byte/s held every
 * connection slot, each with a thread, and every 120 s idle timeout was
 * reset by the next byte; a complete head followed by a trickled body did
 * the same. The gate owns the listening socket instead. One thread polls
 * every connection whose request is not yet in, peeking (never consuming:
 * SO_RCVLOWAT makes poll wake only when more than what was already seen
 * arrives, or, for a Content-Length body, only when all of it has);
 * a connection whose request is complete goes to libmicrohttpd (the
 * handoff callback: MHD_add_connection), with the request still unread in
 * the socket.
 *
 * The head: not complete within the header deadline → 408; too large →
 * 431; refused by httphead_check() → 400/501, at once. The body (a
 * Content-Length, or chunked up to the terminating chunk and trailers): a
 * Content-Length or chunk sizes over max_body → 413 at once, before the
 * body; not in within the body deadline (from the end of the head) → 408;
 * malformed chunk framing, or the client shutting down its side before the
 * body is complete → 400. "Expect: 100-continue" is answered "100
 * Continue" by the gate at once (the client waits for it before sending).
 * What cannot be held: a body larger than a quarter of the socket's receive
 * buffer (at most hold_body; the buffer is raised to fit) is handed on
 * once that much has come (a fast upload), or when Linux reports the
 * buffer full; libmicrohttpd's body deadline covers the rest.
 *
 * At most max_conns connections are open in all (waiting here or handed
 * on): when full, the connection that has waited longest for its request
 * (head or body) makes room, unless its request has meanwhile arrived
 * (then it is handed on first); only when none is waiting is the newcomer
 * refused with 503, at once.
 */
#ifndef QW_GATE_H
#define QW_GATE_H

#include <sys/socket.h>

#include "base/err.h"

typedef struct qw_gate qw_gate;

typedef struct qw_gate_cfg {
    int listen_fd;            /* bound and listening; owned by the gate from now on */
    int max_conns;            /* open connections in all (waiting + handed on) */
    double header_deadline_s; /* the whole head must arrive within this */
    int max_head;             /* bytes; a longer head is answered 431 */
    double body_deadline_s;   /* the body must arrive within this after the head (0: 6 x header) */
    long long max_body;       /* bytes; a larger Content-Length (or chunked total) is answered 413; 0: none */
    long hold_body;           /* hold at most this many bytes (0: 64 KiB), see gate.c hold_of() */
    /* A connection with a complete, acceptable head: take fd (0) or fail
     * (-1; the callee has closed fd). Called on the gate's thread. */
    int (*handoff)(void *arg, int fd, const struct sockaddr *sa, socklen_t salen);
    void *arg;
} qw_gate_cfg;

qw_gate *gate_start(const qw_gate_cfg *cfg, qw_err *err);

/* A handed-on connection has closed (libmicrohttpd's connection-closed
 * notification): one more may open. Any thread. */
void gate_conn_closed(qw_gate *g);

/* Stop accepting: the listening socket is closed; waiting connections are
 * answered 503. Any thread; idempotent. */
void gate_quiesce(qw_gate *g);

/* Stop the thread and close everything the gate still holds. */
void gate_stop(qw_gate *g);

/* Counters for /metrics and tests. */
typedef struct qw_gate_stats {
    int waiting;                  /* connections waiting for their head now */
    int waiting_body;             /* connections with a complete head waiting for their body now */
    int open;                     /* waiting + waiting_body + handed on */
    unsigned long long accepted, handed, refused_full, evicted, timed_out, bad_head;
    unsigned long long handed_partial; /* handed on with a body larger than the gate holds */
    unsigned long long body_timed_out, too_large, bad_body, continued;
} qw_gate_stats;
void gate_stats(qw_gate *g, qw_gate_stats *s);

/* Raise RLIMIT_NOFILE's soft limit towards the hard one so that max_conns
 * connections fit; returns the soft limit now. */
long gate_raise_fd_limit(int want);

#endif
