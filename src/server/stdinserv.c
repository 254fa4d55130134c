/* stdinserv.c - the stdin server (see stdinserv.h for the protocol). */
#include "server/stdinserv.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "server/request.h"

#define MAX_LINE (16 << 20)

static int stop_requested(int stop_fd) {
    if (stop_fd < 0) return 0;
    struct pollfd p = {.fd = stop_fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* A stop request cancels the running request, which then ends honestly
 * (cut after N tokens, or not started) and is answered like any other. */
typedef struct stop_watch {
    int fd;
    qw_request *q;
    int stopped;
} stop_watch;

static int stop_cb(void *arg) {
    stop_watch *w = arg;
    if (!w->stopped && stop_requested(w->fd)) {
        w->stopped = 1;
        request_cancel(w->q);
    }
    return 0;
}

#define STOP_POLL_S 0.05

/* One request; returns 1 if a stop was requested meanwhile or the scheduler
 * is shutting down (the caller then stops reading). */
static int serve_line(qw_engine *e, const char *line, size_t len, FILE *out, int stop_fd) {
    while (len && (line[len - 1] == '\r')) len--;
    size_t k = 0;
    while (k < len && (line[k] == ' ' || line[k] == '\t')) k++;
    if (k == len) return 0; /* blank line */
    qw_request *q = request_new(e, API_STDIN);
    if (!q) {
        fputs("error: out of memory\n", out);
        fflush(out);
        return 0;
    }
    stop_watch w = {.fd = stop_fd, .q = q};
    if (request_start(q, line, len) == 0) request_run(q, STOP_POLL_S, stop_cb, &w);
    const api_error *ae = request_error(q);
    if (ae && ae->code && !strcmp(ae->code, "shutting_down")) w.stopped = 1;
    if (!ae) {
        req_usage u;
        request_usage(q, &u);
        LOG_INFO("stdin: %d prompt tokens, %d generated; prefill %.1f tok/s, decode %.1f tok/s", u.prompt_tokens,
                 u.completion_tokens, u.prefill_tps, u.decode_tps);
    }
    size_t n;
    const char *reply = request_reply(q, &n);
    if (reply) fprintf(out, "%.*s\n", (int)n, reply);
    else fputs("error: out of memory\n", out);
    fflush(out);
    request_free(q);
    return w.stopped;
}

int stdinserv_run(qw_engine *e, int in_fd, FILE *out, int stop_fd) {
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    if (!buf) return 1;
    int rc = 0, skipping = 0;
    for (;;) {
        struct pollfd p[2] = {{.fd = in_fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
        int pr = poll(p, stop_fd >= 0 ? 2 : 1, -1);
        if (pr < 0) {
            if (errno == EINTR) continue;
            rc = 1;
            break;
        }
        if (stop_fd >= 0 && p[1].revents) break;
        if (len + 4096 > cap) {
            size_t nc = cap * 2;
            char *nb = nc <= MAX_LINE * 2 ? realloc(buf, nc) : NULL;
            if (!nb) {
                /* An absurdly long line: answer it with an error, drop it. */
                fprintf(out, "error: line longer than %d bytes\n", MAX_LINE);
                fflush(out);
                len = 0;
                skipping = 1;
                continue;
            }
            buf = nb;
            cap = nc;
        }
        ssize_t r = read(in_fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            rc = 1;
            break;
        }
        if (r == 0) {
            if (len > 0 && !skipping) serve_line(e, buf, len, out, stop_fd);
            break;
        }
        len += (size_t)r;
        size_t start = 0;
        int stop = 0;
        for (;;) {
            char *nl = memchr(buf + start, '\n', len - start);
            if (!nl) break;
            size_t ll = (size_t)(nl - (buf + start));
            if (skipping) skipping = 0;
            else if (serve_line(e, buf + start, ll, out, stop_fd)) {
                stop = 1;
                break;
            }
            start += ll + 1;
        }
        if (stop) break;
        memmove(buf, buf + start, len - start);
        len -= start;
    }
    free(buf);
    return rc;
}
