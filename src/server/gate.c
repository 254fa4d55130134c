/* gate.c - see gate.h. poll(), not epoll/kqueue: portable, and a few
 * thousand descriptors per wake-up is cheap next to one generation step. */
#define _GNU_SOURCE /* POLLRDHUP (Linux): end of input told apart from a full buffer */
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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* macOS: the server modes ignore SIGPIPE */
#endif

#include "base/log.h"
#include "server/httphead.h"

#define LINGER_S 2.0 /* how long a refused connection is drained before close */
#define HOLD_DEFAULT (64 * 1024)

typedef enum { W_HEAD = 0, W_BODY = 1, W_LINGER = 2 } wait_kind;

typedef struct waiter {
    int fd;
    wait_kind kind;
    double t0, deadline;
    size_t lowat;                /* poll wakes when this many bytes are buffered (SO_RCVLOWAT) */
    size_t need;                 /* W_BODY with a Content-Length: head + body bytes */
    int chunked;                 /* W_BODY: a chunked body, scanned as it comes */
    size_t scanned;              /* chunked: bytes from the head's start given to the scanner */
    size_t peeked;               /* chunked: bytes copied by peeks (bounds the gate's work) */
    size_t hold;                 /* hand on once this many are buffered: the body does not fit */
    int ollama;                  /* its head names an Ollama path (/api/...): errors in Ollama's shape */
    httpchunk ck;
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
    atomic_int waiting_body;     /* waiters for a body (for stats) */
    size_t hold_want;            /* the most bytes a waiter holds (see hold_of) */
    waiter *w;                   /* [n_w] */
    int n_w, cap_w;
    char *peek;                  /* [max(max_head + 1, hold)] */
    size_t peek_cap;
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

/* A short, complete HTTP answer for a connection the gate refuses, in the
 * error shape of the API its path belongs to: Ollama's {"error": "..."} on
 * /api/..., else OpenAI's object (also while the path is not known yet). */
static void answer(int fd, int status, const char *reason, const char *msg, const char *code, int ollama) {
    char body[512], out[1024], cq[64];
    snprintf(cq, sizeof cq, code ? "\"%s\"" : "null", code);
    int bl = ollama ? snprintf(body, sizeof body, "{\"error\":\"%s\"}", msg)
                    : snprintf(body, sizeof body,
                               "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,\"code\":%s}}", msg,
                               status >= 500 ? "server_error" : "invalid_request_error", cq);
    int ol = snprintf(out, sizeof out,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      "Connection: close\r\n%s\r\n%s",
                      status, reason, bl, status == 503 ? "Retry-After: 1\r\n" : "", body);
    ssize_t r = send(fd, out, (size_t)ol, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)r;
}

/* Whether a request head's target is one of Ollama's paths (/api/...). */
static int ollama_target(const char *head, size_t n) {
    const char *sp = memchr(head, ' ', n);
    return sp && (size_t)(sp + 1 - head) + 5 <= n && !memcmp(sp + 1, "/api/", 5);
}

static const char *reason_of(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
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

/* SO_RCVLOWAT, remembered as the kernel took it (Linux caps it at half the
 * receive buffer): a wake with less than that buffered means end of input
 * or a full buffer, never "a little more came". */
static void set_lowat(waiter *w, size_t n) {
    int v = n > (size_t)1 << 30 ? 1 << 30 : (int)(n ? n : 1);
    setsockopt(w->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v);
    socklen_t sl = sizeof v;
    if (getsockopt(w->fd, SOL_SOCKET, SO_RCVLOWAT, &v, &sl) != 0 || v < 1) v = 1;
    w->lowat = (size_t)v;
}

/* Answer, then drain what the client still sends for a moment before the
 * close: closing a socket with unread input sends a reset, which can
 * destroy the answer before the client reads it. */
static void refuse_code(qw_gate *g, int i, int status, const char *msg, const char *code) {
    waiter *w = &g->w[i];
    char sink[16384];
    while (recv(w->fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
    answer(w->fd, status, reason_of(status), msg, code, w->ollama);
    shutdown(w->fd, SHUT_WR);
    set_lowat(w, 1);
    w->kind = W_LINGER;
    w->deadline = now_s() + LINGER_S;
}

static void refuse(qw_gate *g, int i, int status, const char *msg) { refuse_code(g, i, status, msg, NULL); }

static int open_now(qw_gate *g) {
    int n = atomic_load(&g->handed_open);
    for (int i = 0; i < g->n_w; i++) n += g->w[i].kind != W_LINGER;
    return n;
}

/* The connection that has waited longest for its request (head or body). */
static int oldest_waiter(const qw_gate *g) {
    int oldest = -1;
    for (int i = 0; i < g->n_w; i++)
        if (g->w[i].kind != W_LINGER && (oldest < 0 || g->w[i].t0 < g->w[oldest].t0)) oldest = i;
    return oldest;
}

static void close_waiter(qw_gate *g, int i) {
    close(g->w[i].fd);
    drop(g, i);
}

/* Bytes buffered for reading, or -1 if the socket failed. */
static long long buffered(int fd) {
    int n = 0;
    if (ioctl(fd, FIONREAD, &n) != 0) return -1;
    return n;
}

/* The waiter at i goes to libmicrohttpd with everything it sent still
 * unread. complete: its whole request is in; else its body is larger than
 * the gate holds (MHD's body deadline covers the rest). */
static void hand_on(qw_gate *g, int i, int complete) {
    waiter *w = &g->w[i];
    set_lowat(w, 1);
    set_nonblock(w->fd, 0);
    waiter taken = *w;
    drop(g, i);
    atomic_fetch_add(&g->handed_open, 1);
    stat_add(g, &g->st.handed);
    if (!complete) stat_add(g, &g->st.handed_partial);
    if (g->cfg.handoff(g->cfg.arg, taken.fd, (struct sockaddr *)&taken.sa, taken.salen) != 0) {
        atomic_fetch_sub(&g->handed_open, 1); /* refused: the callee closed it */
        stat_sub(g, &g->st.handed);
        if (!complete) stat_sub(g, &g->st.handed_partial);
    }
}

/* A wake with less buffered than SO_RCVLOWAT asked for: the client shut
 * down its side (the rest never comes), or (Linux) the receive buffer is
 * under pressure and the kernel woke us early. POLLRDHUP tells them apart
 * where it exists; elsewhere it is end of input. */
static int stalled_by_eof(short rev) {
#ifdef POLLRDHUP
    return (rev & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
#else
    (void)rev;
    return 1;
#endif
}

static int service_body(qw_gate *g, int i, short rev);

/* Look at waiter i (rev: what poll reported, 0 when the gate only checks
 * whether it is decided, before evicting it) and move it on: still
 * waiting (0), or handed on / answered / closed (1). Peeks, never reads. */
static int service(qw_gate *g, int i, short rev) {
    waiter *w = &g->w[i];
    if (w->kind == W_LINGER) {
        char sink[16384];
        ssize_t r = recv(w->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) close_waiter(g, i);
        return 1;
    }
    if (w->kind == W_BODY) return service_body(g, i, rev);
    ssize_t r = recv(w->fd, g->peek, (size_t)g->cfg.max_head + 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (r <= 0) { /* gone before its head was complete */
        close_waiter(g, i);
        return 1;
    }
    size_t n = (size_t)r, end = httphead_end(g->peek, n);
    if (!end) {
        if (n > (size_t)g->cfg.max_head) {
            stat_add(g, &g->st.bad_head);
            refuse(g, i, 431, "the request head is too large");
            return 1;
        }
        if (rev && n < w->lowat) {
            stat_add(g, &g->st.bad_head);
            if (stalled_by_eof(rev))
                refuse(g, i, 400, "the client closed its side before the request head was complete");
            else
                refuse(g, i, 431, "the request head is too large for the receive buffer");
            return 1;
        }
        set_lowat(w, n + 1);
        if (w->lowat <= n) { /* the kernel will not wait for more */
            stat_add(g, &g->st.bad_head);
            refuse(g, i, 431, "the request head is too large for the receive buffer");
            return 1;
        }
        return 0;
    }
    char why[160];
    int status = httphead_check(g->peek, end, why, sizeof why);
    if (status) {
        stat_add(g, &g->st.bad_head);
        refuse(g, i, status, why);
        return 1;
    }
    /* The head is acceptable: now its body. */
    w->ollama = ollama_target(g->peek, end);
    httphead_framing f;
    httphead_frame(g->peek, end, &f);
    if (g->cfg.max_body > 0 && !f.chunked && (f.length_overflow || f.length > (unsigned long long)g->cfg.max_body)) {
        char m[96];
        snprintf(m, sizeof m, "the body is larger than %lld bytes", g->cfg.max_body);
        stat_add(g, &g->st.too_large);
        refuse_code(g, i, 413, m, "body_too_large");
        return 1;
    }
    w->kind = W_BODY;
    w->deadline = now_s() + g->cfg.body_deadline_s;
    w->chunked = f.chunked;
    w->need = end + (f.chunked ? 0 : (size_t)f.length);
    w->scanned = end;
    w->peeked = 0;
    memset(&w->ck, 0, sizeof w->ck);
    /* A client that asked to be told before it sends its body (curl does
     * for large uploads, and waits up to a second otherwise): told now, by
     * the gate, which is what waits for the body. libmicrohttpd sends its
     * own "100 Continue" later; a client must accept several 1xx answers
     * (RFC 9110 15.2), and they are harmless. */
    if (f.expect_continue && f.http11 && n == end && (f.chunked || f.length > 0)) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        ssize_t s = send(w->fd, cont, sizeof cont - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)s;
        stat_add(g, &g->st.continued);
    }
    return service_body(g, i, 0);
}

/* A head is in and acceptable; has the body arrived? */
static int service_body(qw_gate *g, int i, short rev) {
    waiter *w = &g->w[i];
    long long avail = buffered(w->fd);
    if (avail < 0) {
        close_waiter(g, i);
        return 1;
    }
    size_t have = (size_t)avail;
    if (!w->chunked && have >= w->need) {
        hand_on(g, i, 1);
        return 1;
    }
    if (w->chunked && have > w->scanned && w->scanned < w->hold) {
        size_t want = have < w->hold ? have : w->hold;
        ssize_t r = recv(w->fd, g->peek, want, MSG_PEEK | MSG_DONTWAIT);
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            close_waiter(g, i);
            return 1;
        }
        if (r > (ssize_t)w->scanned) {
            w->peeked += (size_t)r;
            size_t used = 0;
            unsigned long long max = g->cfg.max_body > 0 ? (unsigned long long)g->cfg.max_body : ~0ULL;
            int res = httpchunk_scan(&w->ck, g->peek + w->scanned, (size_t)r - w->scanned, max, &used);
            w->scanned += used;
            if (res == HTTPCHUNK_DONE) {
                hand_on(g, i, 1);
                return 1;
            }
            if (res == HTTPCHUNK_BAD) {
                stat_add(g, &g->st.bad_body);
                refuse(g, i, 400, "a malformed chunked body");
                return 1;
            }
            if (res == HTTPCHUNK_TOO_LARGE) {
                char m[96];
                snprintf(m, sizeof m, "the body is larger than %lld bytes", g->cfg.max_body);
                stat_add(g, &g->st.too_large);
                refuse_code(g, i, 413, m, "body_too_large");
                return 1;
            }
        }
    }
    /* More than the gate holds (a fast upload of a large body), or a
     * chunked body whose framing has cost too many looks: libmicrohttpd
     * takes it from here, under its own body deadline. */
    if (have >= w->hold || w->peeked > 4 * w->hold) {
        hand_on(g, i, 0);
        return 1;
    }
    if (rev && have < w->lowat) {
        if (!stalled_by_eof(rev)) { /* the kernel's buffer is full */
            hand_on(g, i, 0);
            return 1;
        }
        stat_add(g, &g->st.bad_body);
        refuse(g, i, 400, "the client closed its side before the request body was complete");
        return 1;
    }
    /* Sleep until the body can be complete (a Content-Length), or past the
     * chunk data still to come (chunked), or until the hold is full. */
    size_t next = w->chunked ? have + (size_t)httpchunk_skip(&w->ck) + 1 : w->need;
    set_lowat(w, next < w->hold ? next : w->hold);
    if (w->lowat <= have) { /* the kernel will not wait for more: as good as full */
        hand_on(g, i, 0);
        return 1;
    }
    return 0;
}

/* How many bytes a connection may hold in its receive buffer before it is
 * handed on with its body incomplete: a quarter of the buffer the kernel
 * reports (Linux reports the real size, twice what was asked; loopback
 * queues about all of it, Ethernet's per-packet overhead about half), so
 * that the client is never stopped by a full window below the mark. The
 * buffer is raised towards four times hold_want where smaller: on Linux
 * 256 KiB for the default 64 KiB, twice the default 128 KiB, a bound on
 * what a slow client can park in the kernel (max_conns x 256 KiB). */
static size_t hold_of(qw_gate *g, int fd) {
    int rb = 0;
    socklen_t sl = sizeof rb;
    if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rb, &sl) != 0) rb = 0;
    if ((size_t)rb / 4 < g->hold_want) {
        int want = (int)(2 * g->hold_want);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
        sl = sizeof rb;
        if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rb, &sl) != 0) rb = 0;
    }
    size_t h = (size_t)(rb > 0 ? rb : 0) / 4;
    return h < g->hold_want ? h : g->hold_want;
}

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
                close_waiter(g, oldest);
                stat_add(g, &g->st.evicted);
                continue;
            }
            return; /* EAGAIN, or an error poll will report again */
        }
        stat_add(g, &g->st.accepted);
        set_nonblock(fd, 1);
        /* Full. The connection that has waited longest for its request
         * (head or body) makes room (a slow client never blocks a quick
         * one). One whose request has arrived since the last poll is no
         * slow client: it goes on (or is answered) first, so a burst of
         * newcomers accepted in one go cannot evict a request that was
         * only waiting for its turn. When every open connection is a real
         * request, the newcomer is refused. */
        while (open_now(g) >= g->cfg.max_conns) {
            int oldest = oldest_waiter(g);
            if (oldest < 0) break;
            if (service(g, oldest, 0)) continue; /* handed on or answered: no longer waiting */
            stat_add(g, &g->st.evicted);
            refuse(g, oldest, 503, "too many connections; this one waited longest for its request");
        }
        if (open_now(g) >= g->cfg.max_conns) {
            stat_add(g, &g->st.refused_full);
            answer(fd, 503, reason_of(503), "too many connections", NULL, 0);
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
        w->lowat = 1;
        w->hold = hold_of(g, fd);
        w->t0 = now_s();
        w->deadline = w->t0 + g->cfg.header_deadline_s;
        memcpy(&w->sa, &sa, sizeof sa);
        w->salen = sl;
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
                if (g->w[i].kind != W_LINGER) refuse(g, i, 503, "the server is shutting down");
        }
        double t = now_s(), next = t + 1.0;
        for (int i = 0; i < g->n_w;) {
            if (g->w[i].deadline <= t) {
                if (g->w[i].kind == W_HEAD) {
                    stat_add(g, &g->st.timed_out);
                    refuse(g, i, 408, "the request head did not arrive in time");
                    i++;
                } else if (g->w[i].kind == W_BODY) {
                    stat_add(g, &g->st.body_timed_out);
                    refuse(g, i, 408, "the request body did not arrive in time");
                    i++;
                } else {
                    close_waiter(g, i);
                }
                continue;
            }
            if (g->w[i].deadline < next) next = g->w[i].deadline;
            i++;
        }
        int n = 2 + g->n_w, heads = 0, bodies = 0;
        for (int i = 0; i < g->n_w; i++) {
            heads += g->w[i].kind == W_HEAD;
            bodies += g->w[i].kind == W_BODY;
        }
        atomic_store(&g->waiting, heads);
        atomic_store(&g->waiting_body, bodies);
        if (n > cap_pf) {
            int nc = n * 2;
            struct pollfd *np = realloc(pf, (size_t)nc * sizeof *np);
            if (!np) break;
            pf = np;
            cap_pf = nc;
        }
        pf[0] = (struct pollfd){.fd = g->wake[0], .events = POLLIN};
        pf[1] = (struct pollfd){.fd = listening ? g->cfg.listen_fd : -1, .events = POLLIN};
        short ev = POLLIN;
#ifdef POLLRDHUP
        ev |= POLLRDHUP;
#endif
        for (int i = 0; i < g->n_w; i++) pf[2 + i] = (struct pollfd){.fd = g->w[i].fd, .events = ev};
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
            if (i < g->n_w && pf[2 + i].fd == g->w[i].fd && pf[2 + i].revents) service(g, i, pf[2 + i].revents);
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
    if (g->cfg.body_deadline_s <= 0) g->cfg.body_deadline_s = 6 * g->cfg.header_deadline_s;
    g->hold_want = g->cfg.hold_body > 0 ? (size_t)g->cfg.hold_body : HOLD_DEFAULT;
    g->peek_cap = (size_t)g->cfg.max_head + 1 > g->hold_want ? (size_t)g->cfg.max_head + 1 : g->hold_want;
    g->peek = malloc(g->peek_cap);
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
    (void)hold_of(g, g->cfg.listen_fd); /* accepted sockets inherit it, with a window scale to fit */
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
    s->waiting_body = atomic_load(&g->waiting_body);
    s->open = atomic_load(&g->handed_open) + s->waiting + s->waiting_body;
}
