/* gate.c - see gate.h. poll(), not epoll/kqueue: portable, and a few
 * thousand descriptors per wake-up is cheap next to one generation step. */
#include "server/gate.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* macOS: the server modes ignore SIGPIPE */
#endif

#include "base/log.h"
#include "server/httphead.h"

#define LINGER_S 2.0 /* how long a refused connection is drained before close */

typedef enum { W_HEAD = 0, W_LINGER = 1 } wait_kind;

typedef struct waiter {
    int fd;
    wait_kind kind;
    double t0, deadline;
    size_t seen;                 /* bytes peeked so far */
    struct sockaddr_storage sa;
    socklen_t salen;
} waiter;

struct qw_gate {
    qw_gate_cfg cfg;
    pthread_t th;
    int wake[2];                 /* self-pipe: quiesce / stop / a slot freed */
    atomic_int stop, quiesce;
    atomic_int handed_open;      /* handed on and not yet closed */
    atomic_int waiting;          /* waiters for a head (for stats) */
    waiter *w;                   /* [n_w] */
    int n_w, cap_w;
    char *peek;                  /* [max_head + 1] */
    pthread_mutex_t mu;          /* guards stats */
    qw_gate_stats st;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

long gate_raise_fd_limit(int want) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    rlim_t need = (rlim_t)want + 256; /* model files, pipes, the engine */
    if (rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return (long)rl.rlim_cur;
}

/* A short, complete HTTP answer for a connection the gate refuses. */
static void answer(int fd, int status, const char *reason, const char *msg) {
    char body[512], out[1024];
    int bl = snprintf(body, sizeof body,
                      "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,\"code\":null}}", msg,
                      status >= 500 ? "server_error" : "invalid_request_error");
    int ol = snprintf(out, sizeof out,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      "Connection: close\r\n%s\r\n%s",
                      status, reason, bl, status == 503 ? "Retry-After: 1\r\n" : "", body);
    ssize_t r = send(fd, out, (size_t)ol, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)r;
}

static const char *reason_of(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    default: return "Service Unavailable";
    }
}

static void drop(qw_gate *g, int i) {
    g->w[i] = g->w[--g->n_w];
}

/* Counters are bumped BEFORE the client can see the outcome (an answer, a
 * close, a handoff), so that whoever saw it and then reads gate_stats()
 * finds it counted (tests/unit/test_gate.c does exactly that). */
static void stat_add(qw_gate *g, unsigned long long *field) {
    pthread_mutex_lock(&g->mu);
    (*field)++;
    pthread_mutex_unlock(&g->mu);
}

static void stat_sub(qw_gate *g, unsigned long long *field) {
    pthread_mutex_lock(&g->mu);
    (*field)--;
    pthread_mutex_unlock(&g->mu);
}

/* Answer, then drain what the client still sends for a moment before the
 * close: closing a socket with unread input sends a reset, which can
 * destroy the answer before the client reads it. */
static void refuse(qw_gate *g, int i, int status, const char *msg) {
    waiter *w = &g->w[i];
    char sink[4096];
    while (recv(w->fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
    answer(w->fd, status, reason_of(status), msg);
    shutdown(w->fd, SHUT_WR);
    int one = 1;
    setsockopt(w->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    w->kind = W_LINGER;
    w->deadline = now_s() + LINGER_S;
}

static int open_now(qw_gate *g) {
    int n = atomic_load(&g->handed_open);
    for (int i = 0; i < g->n_w; i++) n += g->w[i].kind == W_HEAD;
    return n;
}

static int oldest_waiter(const qw_gate *g) {
    int oldest = -1;
    for (int i = 0; i < g->n_w; i++)
        if (g->w[i].kind == W_HEAD && (oldest < 0 || g->w[i].t0 < g->w[oldest].t0)) oldest = i;
    return oldest;
}

/* Would check_head() settle waiter i now (its head complete or too large,
 * or the client gone), rather than keep it waiting? Peeks, never reads. */
static int head_decided(qw_gate *g, int i) {
    ssize_t r = recv(g->w[i].fd, g->peek, (size_t)g->cfg.max_head + 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    if (r == 0) return 1;
    return (size_t)r > (size_t)g->cfg.max_head || httphead_end(g->peek, (size_t)r) != 0;
}

static void check_head(qw_gate *g, int i);

static void accept_all(qw_gate *g) {
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int fd = accept(g->cfg.listen_fd, (struct sockaddr *)&sa, &sl);
        if (fd < 0) {
            if (errno == EINTR) continue;
            if (errno == EMFILE || errno == ENFILE) {
                /* Out of descriptors: make room by evicting the oldest waiter. */
                int oldest = oldest_waiter(g);
                if (oldest < 0) return;
                close(g->w[oldest].fd);
                drop(g, oldest);
                stat_add(g, &g->st.evicted);
                continue;
            }
            return; /* EAGAIN, or an error poll will report again */
        }
        stat_add(g, &g->st.accepted);
        set_nonblock(fd, 1);
        /* Full. The connection that has waited longest for its head makes
         * room (a slow client never blocks a quick one). One whose head has
         * arrived since the last poll is no slow client: it goes on (or is
         * answered) first, so a burst of newcomers accepted in one go cannot
         * evict a request that was only waiting for its turn. When every
         * open connection is a real request, the newcomer is refused. */
        while (open_now(g) >= g->cfg.max_conns) {
            int oldest = oldest_waiter(g);
            if (oldest < 0) break;
            if (head_decided(g, oldest)) {
                check_head(g, oldest); /* handed on or answered: no longer waiting */
                continue;
            }
            stat_add(g, &g->st.evicted);
            refuse(g, oldest, 503, "too many connections; this one waited longest for its request head");
        }
        if (open_now(g) >= g->cfg.max_conns) {
            stat_add(g, &g->st.refused_full);
            answer(fd, 503, reason_of(503), "too many connections");
            close(fd);
            continue;
        }
        if (g->n_w == g->cap_w) {
            int nc = g->cap_w ? g->cap_w * 2 : 64;
            waiter *nw = realloc(g->w, (size_t)nc * sizeof *nw);
            if (!nw) {
                close(fd);
                continue;
            }
            g->w = nw;
            g->cap_w = nc;
        }
        waiter *w = &g->w[g->n_w++];
        memset(w, 0, sizeof *w);
        w->fd = fd;
        w->kind = W_HEAD;
        w->t0 = now_s();
        w->deadline = w->t0 + g->cfg.header_deadline_s;
        memcpy(&w->sa, &sa, sizeof sa);
        w->salen = sl;
    }
}

/* The waiter at i is readable: has its head arrived? */
static void check_head(qw_gate *g, int i) {
    waiter *w = &g->w[i];
    if (w->kind == W_LINGER) {
        char sink[4096];
        ssize_t r = recv(w->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            close(w->fd);
            drop(g, i);
        }
        return;
    }
    ssize_t r = recv(w->fd, g->peek, (size_t)g->cfg.max_head + 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (r <= 0) { /* gone before its head was complete */
        close(w->fd);
        drop(g, i);
        return;
    }
    size_t n = (size_t)r, end = httphead_end(g->peek, n);
    if (!end) {
        if (n > (size_t)g->cfg.max_head) {
            stat_add(g, &g->st.bad_head);
            refuse(g, i, 431, "the request head is too large");
            return;
        }
        /* Incomplete. Woken with nothing new (SO_RCVLOWAT asked for more
         * than was seen): the client half-closed, so the head never comes. */
        if (n == w->seen) {
            stat_add(g, &g->st.bad_head);
            refuse(g, i, 400, "the client closed its side before the request head was complete");
            return;
        }
        w->seen = n;
        int lowat = (int)n + 1;
        setsockopt(w->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
        return;
    }
    char why[160];
    int status = httphead_check(g->peek, end, why, sizeof why);
    if (status) {
        stat_add(g, &g->st.bad_head);
        refuse(g, i, status, why);
        return;
    }
    int one = 1;
    setsockopt(w->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    set_nonblock(w->fd, 0);
    waiter taken = *w;
    drop(g, i);
    atomic_fetch_add(&g->handed_open, 1);
    stat_add(g, &g->st.handed);
    if (g->cfg.handoff(g->cfg.arg, taken.fd, (struct sockaddr *)&taken.sa, taken.salen) != 0) {
        atomic_fetch_sub(&g->handed_open, 1); /* refused: the callee closed it */
        stat_sub(g, &g->st.handed);
    }
}

static void *gate_main(void *arg) {
    qw_gate *g = arg;
    struct pollfd *pf = NULL;
    int cap_pf = 0;
    int listening = 1;
    while (!atomic_load(&g->stop)) {
        if (listening && atomic_load(&g->quiesce)) {
            close(g->cfg.listen_fd);
            g->cfg.listen_fd = -1;
            listening = 0;
            for (int i = 0; i < g->n_w; i++)
                if (g->w[i].kind == W_HEAD) refuse(g, i, 503, "the server is shutting down");
        }
        double t = now_s(), next = t + 1.0;
        for (int i = 0; i < g->n_w;) {
            if (g->w[i].deadline <= t) {
                if (g->w[i].kind == W_HEAD) {
                    stat_add(g, &g->st.timed_out);
                    refuse(g, i, 408, "the request head did not arrive in time");
                    i++;
                } else {
                    close(g->w[i].fd);
                    drop(g, i);
                }
                continue;
            }
            if (g->w[i].deadline < next) next = g->w[i].deadline;
            i++;
        }
        int n = 2 + g->n_w, heads = 0;
        for (int i = 0; i < g->n_w; i++) heads += g->w[i].kind == W_HEAD;
        atomic_store(&g->waiting, heads);
        if (n > cap_pf) {
            int nc = n * 2;
            struct pollfd *np = realloc(pf, (size_t)nc * sizeof *np);
            if (!np) break;
            pf = np;
            cap_pf = nc;
        }
        pf[0] = (struct pollfd){.fd = g->wake[0], .events = POLLIN};
        pf[1] = (struct pollfd){.fd = listening ? g->cfg.listen_fd : -1, .events = POLLIN};
        for (int i = 0; i < g->n_w; i++) pf[2 + i] = (struct pollfd){.fd = g->w[i].fd, .events = POLLIN};
        int ms = (int)((next - t) * 1000) + 1;
        int r = poll(pf, (nfds_t)n, ms < 1 ? 1 : ms);
        if (r < 0) {
            if (errno == EINTR) continue;
            LOG_ERROR("gate: poll: %s", strerror(errno));
            break;
        }
        if (pf[0].revents) {
            char b[64];
            while (read(g->wake[0], b, sizeof b) > 0) {
            }
        }
        /* Waiters first (indices shift as they leave: walk from the end). */
        int n_w = g->n_w;
        for (int i = n_w - 1; i >= 0; i--)
            if (i < g->n_w && pf[2 + i].fd == g->w[i].fd && pf[2 + i].revents) check_head(g, i);
        if (listening && pf[1].revents) accept_all(g);
    }
    free(pf);
    return NULL;
}

static void wake(qw_gate *g) {
    ssize_t r = write(g->wake[1], "x", 1);
    (void)r;
}

qw_gate *gate_start(const qw_gate_cfg *cfg, qw_err *err) {
    qw_gate *g = calloc(1, sizeof *g);
    if (!g) {
        qw_errf(err, "gate: out of memory");
        return NULL;
    }
    g->cfg = *cfg;
    if (g->cfg.max_head <= 0) g->cfg.max_head = 32 * 1024;
    if (g->cfg.header_deadline_s <= 0) g->cfg.header_deadline_s = 10;
    g->peek = malloc((size_t)g->cfg.max_head + 1);
    pthread_mutex_init(&g->mu, NULL);
    if (!g->peek || pipe(g->wake) != 0) {
        qw_errf(err, "gate: %s", strerror(errno));
        free(g->peek);
        free(g);
        return NULL;
    }
    set_nonblock(g->wake[0], 1);
    set_nonblock(g->wake[1], 1);
    set_nonblock(g->cfg.listen_fd, 1);
    gate_raise_fd_limit(g->cfg.max_conns);
    if (pthread_create(&g->th, NULL, gate_main, g) != 0) {
        qw_errf(err, "gate: cannot start its thread");
        close(g->wake[0]);
        close(g->wake[1]);
        free(g->peek);
        free(g);
        return NULL;
    }
    return g;
}

void gate_conn_closed(qw_gate *g) {
    atomic_fetch_sub(&g->handed_open, 1);
    wake(g);
}

void gate_quiesce(qw_gate *g) {
    atomic_store(&g->quiesce, 1);
    wake(g);
}

void gate_stop(qw_gate *g) {
    if (!g) return;
    atomic_store(&g->stop, 1);
    wake(g);
    pthread_join(g->th, NULL);
    for (int i = 0; i < g->n_w; i++) close(g->w[i].fd);
    if (g->cfg.listen_fd >= 0) close(g->cfg.listen_fd);
    close(g->wake[0]);
    close(g->wake[1]);
    pthread_mutex_destroy(&g->mu);
    free(g->w);
    free(g->peek);
    free(g);
}

void gate_stats(qw_gate *g, qw_gate_stats *s) {
    pthread_mutex_lock(&g->mu);
    *s = g->st;
    pthread_mutex_unlock(&g->mu);
    /* waiting/open are the gate thread's; a racy read is fine for metrics */
    s->waiting = atomic_load(&g->waiting);
    s->open = atomic_load(&g->handed_open) + s->waiting;
}
