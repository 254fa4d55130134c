/* gate.h - the HTTP admission gate: holds connections until their request
 * head is complete, so slow clients cost a file descriptor, not a thread.
 *
 * libmicrohttpd runs thread-per-connection here because the request layer
 * blocks (a handler waits for its generation). Unguarded, that made
 * slowloris cheap: 300 clients trickling a header at 1 byte/s held every
 * connection slot, each with a thread, and every 120 s idle timeout was
 * reset by the next byte. The gate owns the listening socket instead. One
 * thread polls every connection that has not yet sent its whole head,
 * peeking (never consuming: SO_RCVLOWAT makes poll wake only when more than
 * what was already seen arrives); a connection whose head is complete goes
 * to libmicrohttpd (the handoff callback: MHD_add_connection), with the
 * head still unread in the socket. A head that is not complete within the
 * header deadline, or too large, is answered 408/431 and closed; a head
 * httphead_check() refuses is answered 400/501 at once. At most max_conns
 * connections are open in all (waiting here or handed on): when full, the
 * oldest connection still waiting for its head makes room, and only when
 * none is waiting is the newcomer refused with 503, at once.
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
