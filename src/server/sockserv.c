/* sockserv.c - the Unix socket server (see sockserv.h for the protocol). */
#include "server/sockserv.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "server/request.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* macOS: SIGPIPE is ignored by the server modes */
#endif

#define MAX_LINE (1 << 20)   /* bytes before the newline; one more is refused */
#define LINE_DEADLINE_S 30   /* default: the whole line must arrive within this, however it trickles */
#define MAX_CONNS 256        /* default: connections at once; more get an error line and are closed */
#define LINGER_S 2           /* after an error line: drain input this long, then close */

struct qw_sockserv {
    char *path;
    int fd;
    qw_engine *e;
    pthread_t accept_thread;
    int accept_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_conns;   /* live connection threads */
    atomic_int stopping;
    int wake[2];   /* pipe: wakes the accept loop */
    int max_conns;
    double line_deadline_s;
};

void sockserv_set_limits(qw_sockserv *s, int max_conns, double line_deadline_s) {
    if (max_conns > 0) s->max_conns = max_conns;
    if (line_deadline_s > 0) s->line_deadline_s = line_deadline_s;
}

#define GONE_POLL_S 0.05

char *sockserv_handle_line(qw_engine *e, const char *line, size_t len, int (*gone)(void *), void *gone_arg) {
    static const char oom[] = "{\"error\":\"out of memory\"}";
    qw_request *q = request_new(e, API_SOCKET);
    if (!q) return strdup(oom);
    if (request_start(q, line, len) == 0 && request_run(q, GONE_POLL_S, gone, gone_arg) != 0) {
        request_free(q); /* the client left: nobody to answer */
        return NULL;
    }
    size_t n;
    const char *reply = request_reply(q, &n);
    char *out = reply ? strndup(reply, n) : strdup(oom);
    request_free(q);
    return out;
}

/* ---- connections --------------------------------------------------------- */

typedef struct conn_arg {
    qw_sockserv *s;
    int fd;
} conn_arg;

/* A Unix stream peer that closed its socket (not merely shut down its
 * writing side, which a client may do after sending) shows POLLHUP. */
static int unix_gone(void *arg) {
    struct pollfd p = {.fd = *(int *)arg, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return 0;
    return (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Send a last line and close so that the client can read it: closing a
 * socket with unread input resets it, and a reset can destroy the line
 * before the client reads it. So: send, shut down our side, discard what
 * the client still sends until it closes (or LINGER_S), then close. */
static void send_last_and_close(int fd, const char *msg) {
    if (msg) write_all(fd, msg, strlen(msg));
    shutdown(fd, SHUT_WR);
    double end = mono_s() + LINGER_S;
    char sink[4096];
    for (;;) {
        double left = end - mono_s();
        if (left <= 0) break;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int pr = poll(&pf, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) break;
        ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
    }
    close(fd);
}

static void *conn_main(void *arg) {
    conn_arg *ca = arg;
    qw_sockserv *s = ca->s;
    int fd = ca->fd;
    free(ca);
    char *line = NULL;
    size_t len = 0, cap = 0;
    int too_long = 0, got_line = 0, timed_out = 0;
    double deadline = mono_s() + s->line_deadline_s;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            size_t nc = cap ? cap * 2 : 8192;
            char *p = realloc(line, nc);
            if (!p) break;
            line = p;
            cap = nc;
        }
        /* Wait for bytes in short slices so that a silent client neither
         * blocks shutdown nor holds its thread past the line's deadline,
         * which counts from the connection, not from the last byte (a
         * client trickling bytes must not hold a thread forever). */
        if (mono_s() >= deadline) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int pr = poll(&pf, 1, 100);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) {
            if (atomic_load(&s->stopping)) break;
            continue;
        }
        ssize_t r = recv(fd, line + len, cap - len - 1, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        char *nl = memchr(line + len, '\n', (size_t)r);
        len += (size_t)r;
        if (nl) len = (size_t)(nl - line);
        if (len > MAX_LINE) { /* exactly: the bytes before the newline */
            too_long = 1;
            break;
        }
        if (nl) {
            got_line = 1;
            break;
        }
    }
    if (too_long) {
        char msg[128];
        snprintf(msg, sizeof msg, "{\"error\":\"the request line is longer than %d bytes\"}\n", MAX_LINE);
        send_last_and_close(fd, msg);
        fd = -1;
    } else if (timed_out) {
        char msg[128];
        snprintf(msg, sizeof msg, "{\"error\":\"no complete request line within %g s\"}\n", s->line_deadline_s);
        send_last_and_close(fd, msg);
        fd = -1;
    } else if (line && (got_line || len > 0)) {
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
        char *resp = sockserv_handle_line(s->e, line, len, unix_gone, &fd);
        if (resp) {
            write_all(fd, resp, strlen(resp));
            write_all(fd, "\n", 1);
            free(resp);
        }
    }
    free(line);
    if (fd >= 0) close(fd);
    pthread_mutex_lock(&s->mu);
    s->n_conns--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void *accept_main(void *arg) {
    qw_sockserv *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
        int pr = poll(p, 2, -1);
        if (pr < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[1].revents) break;
        if (!(p[0].revents & POLLIN)) continue;
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) {
                usleep(100000);
                continue;
            }
            break;
        }
        pthread_mutex_lock(&s->mu);
        int full = s->n_conns >= s->max_conns;
        pthread_mutex_unlock(&s->mu);
        if (full) {
            /* Refused at once, with a line saying why: no thread for it. */
            static const char msg[] = "{\"error\":\"too many connections; try again\"}\n";
            ssize_t w = send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
            close(fd);
            continue;
        }
        conn_arg *ca = malloc(sizeof *ca);
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_mutex_lock(&s->mu);
        s->n_conns++;
        pthread_mutex_unlock(&s->mu);
        if (ca) {
            ca->s = s;
            ca->fd = fd;
        }
        if (!ca || pthread_create(&th, &at, conn_main, ca) != 0) {
            free(ca);
            close(fd);
            pthread_mutex_lock(&s->mu);
            s->n_conns--;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
        pthread_attr_destroy(&at);
    }
    return NULL;
}

qw_sockserv *sockserv_start(const char *path, qw_engine *e, qw_err *err) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) {
        qw_errf(err, "socket: path '%s' is longer than %zu bytes", path, sizeof a.sun_path - 1);
        return NULL;
    }
    strcpy(a.sun_path, path);
    qw_sockserv *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        qw_errf(err, "socket: out of memory");
        return NULL;
    }
    s->e = e;
    s->fd = -1;
    s->max_conns = MAX_CONNS;
    s->line_deadline_s = LINE_DEADLINE_S;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    /* A socket file left by a process that died: replace it if nobody
     * answers on it; refuse if a server is live there, or if it is not a
     * socket at all (never delete a user's regular file). */
    struct stat stt;
    if (lstat(path, &stt) == 0) {
        if (!S_ISSOCK(stt.st_mode)) {
            qw_errf(err, "socket: %s exists and is not a socket", path);
            goto fail;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&a, sizeof a) == 0) {
            close(probe);
            qw_errf(err, "socket: %s: another server is listening there", path);
            goto fail;
        }
        if (probe >= 0) close(probe);
        unlink(path);
    }
    s->fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->fd, 64) != 0) {
        qw_errf(err, "socket: %s: %s", path, strerror(errno));
        goto fail;
    }
    if (pipe(s->wake) != 0) {
        qw_errf(err, "socket: pipe: %s", strerror(errno));
        unlink(path);
        goto fail;
    }
    if (pthread_create(&s->accept_thread, NULL, accept_main, s) != 0) {
        qw_errf(err, "socket: cannot start the accept thread");
        unlink(path);
        goto fail;
    }
    s->accept_started = 1;
    return s;
fail:
    if (s->fd >= 0) close(s->fd);
    if (s->wake[0] >= 0) close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->path);
    free(s);
    return NULL;
}

void sockserv_quiesce(qw_sockserv *s) {
    if (!s) return;
    atomic_store(&s->stopping, 1);
    if (!s->accept_started) return;
    ssize_t w = write(s->wake[1], "x", 1);
    (void)w;
    pthread_join(s->accept_thread, NULL);
    s->accept_started = 0;
    close(s->fd);
    s->fd = -1;
    unlink(s->path);
}

void sockserv_stop(qw_sockserv *s) {
    if (!s) return;
    sockserv_quiesce(s);
    pthread_mutex_lock(&s->mu);
    while (s->n_conns > 0) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->path);
    free(s);
}
