/* stdinserv.c - the stdin server (see stdinserv.h for the protocol). */
#include "server/stdinserv.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

#define MAX_LINE (16 << 20)

int stdin_parse_line(const char *line, size_t len, int vocab, int max_limit, int32_t **ids, int *n,
                     int *max_tokens, char *msg, size_t msg_len) {
    *ids = NULL;
    *n = 0;
    const char *bar = memchr(line, '|', len);
    if (!bar) {
        snprintf(msg, msg_len, "expected 'IDS|MAX_TOKENS', e.g. '151644 8948 198|20' (no '|' found)");
        return -1;
    }
    if (memchr(bar + 1, '|', len - (size_t)(bar + 1 - line))) {
        snprintf(msg, msg_len, "more than one '|' in the line");
        return -1;
    }
    /* max_tokens */
    const char *p = bar + 1, *end = line + len;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    const char *q = end;
    while (q > p && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\r')) q--;
    if (p == q) {
        snprintf(msg, msg_len, "missing max_tokens after '|'");
        return -1;
    }
    long long mt = 0;
    for (const char *c = p; c < q; c++) {
        if (*c < '0' || *c > '9' || mt > INT_MAX) {
            snprintf(msg, msg_len, "max_tokens '%.*s' is not a non-negative integer", (int)(q - p > 40 ? 40 : q - p), p);
            return -1;
        }
        mt = mt * 10 + (*c - '0');
    }
    if (mt > max_limit) {
        snprintf(msg, msg_len, "max_tokens %lld is more than the context (%d)", mt, max_limit);
        return -1;
    }
    /* ids */
    size_t cap = 16;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    int cnt = 0;
    p = line;
    while (p < bar) {
        while (p < bar && (*p == ' ' || *p == '\t' || *p == ',')) p++;
        if (p == bar) break;
        const char *s = p;
        long long x = 0;
        while (p < bar && *p != ' ' && *p != '\t' && *p != ',') {
            if (*p < '0' || *p > '9' || x >= vocab) {
                while (p < bar && *p != ' ' && *p != '\t' && *p != ',') p++;
                snprintf(msg, msg_len, "token %d ('%.*s') is not a token id in [0, %d)", cnt + 1,
                         (int)(p - s > 40 ? 40 : p - s), s, vocab);
                free(v);
                return -1;
            }
            x = x * 10 + (*p - '0');
            p++;
        }
        if (x >= vocab) {
            snprintf(msg, msg_len, "token %d (%lld) is not a token id in [0, %d)", cnt + 1, x, vocab);
            free(v);
            return -1;
        }
        if ((size_t)cnt == cap) {
            cap *= 2;
            int32_t *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                free(v);
                snprintf(msg, msg_len, "out of memory");
                return -1;
            }
            v = nv;
        }
        v[cnt++] = (int32_t)x;
    }
    if (cnt == 0) {
        free(v);
        snprintf(msg, msg_len, "no token ids before '|'");
        return -1;
    }
    *ids = v;
    *n = cnt;
    *max_tokens = (int)mt;
    return 0;
}

static int stop_requested(int stop_fd) {
    if (stop_fd < 0) return 0;
    struct pollfd p = {.fd = stop_fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* One request; returns 1 if a stop was requested meanwhile. */
static int serve_line(qw_engine *e, const char *line, size_t len, FILE *out, int stop_fd) {
    int32_t *ids;
    int n, max_tokens;
    char msg[256];
    while (len && (line[len - 1] == '\r')) len--;
    size_t k = 0;
    while (k < len && (line[k] == ' ' || line[k] == '\t')) k++;
    if (k == len) return 0; /* blank line */
    if (stdin_parse_line(line, len, e->model->cfg.vocab, e->n_ctx, &ids, &n, &max_tokens, msg, sizeof msg) != 0) {
        fprintf(out, "error: %s\n", msg);
        fflush(out);
        return 0;
    }
    qw_req_params p = {.prompt = ids, .n_prompt = n, .max_new = max_tokens, .sampling = e->sampling};
    qw_req *r;
    qw_err err;
    int rc = sched_submit(e->sched, &p, &r, &err);
    free(ids);
    if (rc != QW_SCHED_OK) {
        fprintf(out, "error: %s\n", err.msg);
        fflush(out);
        return rc == QW_SCHED_ESHUTDOWN;
    }
    int cursor = 0, stopped = 0;
    const int32_t *toks;
    while (!sched_req_done(r)) {
        sched_req_wait(r, &cursor, &toks, 0.05);
        if (stop_requested(stop_fd)) {
            stopped = 1;
            sched_req_cancel(r);
            break;
        }
    }
    if (!stopped) {
        cursor = 0;
        int ng = sched_req_wait(r, &cursor, &toks, 0);
        for (int i = 0; i < ng; i++) fprintf(out, i ? " %d" : "%d", (int)toks[i]);
        fputc('\n', out);
        fflush(out);
        qw_req_stats st;
        sched_req_stats(r, &st);
        LOG_INFO("stdin: %d prompt tokens, %d generated; prefill %.1f tok/s, decode %.1f tok/s",
                 st.n_prompt, ng, st.prefill_s > 0 ? st.n_prompt / st.prefill_s : 0,
                 st.decode_s > 0 && ng > 1 ? (ng - 1) / st.decode_s : 0);
    }
    sched_req_release(r);
    return stopped;
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
