/* sockserv.c - the Unix socket server (see sockserv.h for the protocol). */
#include "server/sockserv.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "engine/generate.h"
#include "server/api.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* macOS: SIGPIPE is ignored by the server modes */
#endif

#define MAX_LINE (1 << 20)
#define READ_TIMEOUT_S 60

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
};

static char *err_line(const char *fmt, const char *a, const char *b) {
    char msg[1400];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", msg);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *sockserv_handle_line(qw_engine *e, const char *line, size_t len, int (*gone)(void *), void *gone_arg) {
    if (!api_utf8_valid(line, len)) return err_line("the request is not valid UTF-8%s%s", NULL, NULL);
    cJSON *o = cJSON_ParseWithLength(line, len);
    if (!o) return err_line("the request is not valid JSON; expected {\"tokens\": [ids], \"max_tokens\": n}%s%s", NULL, NULL);
    char *out = NULL;
    int32_t *ids = NULL;
    qw_req *r = NULL;
    api_error ae;
    if (!cJSON_IsObject(o)) {
        out = err_line("the request must be a JSON object%s%s", NULL, NULL);
        goto done;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tokens");
    if (!t) {
        out = err_line("'tokens' is required%s%s", NULL, NULL);
        goto done;
    }
    if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) == 0) {
        out = err_line("'tokens' must be a non-empty list of token ids%s%s", NULL, NULL);
        goto done;
    }
    int n = cJSON_GetArraySize(t), vocab = e->model->cfg.vocab;
    ids = malloc((size_t)n * sizeof *ids);
    if (!ids) {
        out = err_line("out of memory%s%s", NULL, NULL);
        goto done;
    }
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, t) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
            it->valuedouble >= vocab) {
            char a[64], b[64];
            snprintf(a, sizeof a, "%d", i);
            snprintf(b, sizeof b, "%d", vocab);
            out = err_line("'tokens'[%s] is not a token id in [0, %s)", a, b);
            goto done;
        }
        ids[i++] = (int32_t)it->valuedouble;
    }
    long long max_tokens = 50;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "max_tokens");
    if (mt && !cJSON_IsNull(mt)) {
        if (!cJSON_IsNumber(mt) || mt->valuedouble != floor(mt->valuedouble) || mt->valuedouble < 0 ||
            mt->valuedouble > e->n_ctx) {
            char b[64];
            snprintf(b, sizeof b, "%d", e->n_ctx);
            out = err_line("'max_tokens' must be an integer in [0, %s]%s", b, NULL);
            goto done;
        }
        max_tokens = (long long)mt->valuedouble;
    }
    qw_req_params p = {.prompt = ids, .n_prompt = n, .max_new = (int)max_tokens, .sampling = e->sampling};
    if (api_parse_sampling(o, &p.sampling, &ae) < 0) {
        out = err_line("%s%s", ae.message, NULL);
        goto done;
    }
    const cJSON *ie = cJSON_GetObjectItemCaseSensitive(o, "ignore_eos");
    if (ie && !cJSON_IsNull(ie)) {
        if (!cJSON_IsBool(ie)) {
            out = err_line("'ignore_eos' must be a boolean%s%s", NULL, NULL);
            goto done;
        }
        p.ignore_eos = cJSON_IsTrue(ie);
    }
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(o, "speculative");
    if (sp && !cJSON_IsNull(sp)) {
        if (!cJSON_IsBool(sp)) {
            out = err_line("'speculative' must be a boolean%s%s", NULL, NULL);
            goto done;
        }
        p.no_spec = !cJSON_IsTrue(sp);
    }
    qw_err err;
    if (sched_submit(e->sched, &p, &r, &err) != QW_SCHED_OK) {
        out = err_line("%s%s", err.msg, NULL);
        r = NULL;
        goto done;
    }
    int cursor = 0;
    const int32_t *toks;
    while (!sched_req_done(r)) {
        sched_req_wait(r, &cursor, &toks, 0.05);
        if (gone && gone(gone_arg)) {
            LOG_DEBUG("socket: client went away; cancelling");
            goto done; /* release below cancels */
        }
    }
    cursor = 0;
    int ng = sched_req_wait(r, &cursor, &toks, 0);
    qw_req_stats st;
    sched_req_stats(r, &st);
    if (st.failed) {
        out = err_line("the engine failed: %s%s", st.msg, NULL);
        goto done;
    }
    {
        char *buf = NULL;
        size_t bl = 0;
        FILE *f = open_memstream(&buf, &bl);
        if (!f) {
            out = err_line("out of memory%s%s", NULL, NULL);
            goto done;
        }
        fputs("{\"tokens\":[", f);
        for (int k = 0; k < ng; k++) fprintf(f, k ? ",%d" : "%d", (int)toks[k]);
        double ptps = st.prefill_s > 0 ? st.n_prompt / st.prefill_s : 0;
        double dtps = st.decode_s > 0 && ng > 1 ? (ng - 1) / st.decode_s : 0;
        fprintf(f, "],\"prompt_tokens\":%d,\"gen_tokens\":%d,\"prefill_tps\":%.3f,\"decode_tps\":%.3f,"
                   "\"elapsed_s\":%.3f,\"finish_reason\":\"%s\",\"draft_tokens\":%d,\"accepted_draft_tokens\":%d}",
                st.n_prompt, ng, ptps, dtps, st.total_s, st.finish == QW_FINISH_LENGTH ? "length" : "stop",
                st.n_drafted, st.n_accepted);
        fclose(f);
        out = buf;
    }
done:
    if (r) sched_req_release(r);
    free(ids);
    cJSON_Delete(o);
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

static void *conn_main(void *arg) {
    conn_arg *ca = arg;
    qw_sockserv *s = ca->s;
    int fd = ca->fd;
    free(ca);
    char *line = NULL;
    size_t len = 0, cap = 0;
    int too_long = 0, got_line = 0, idle_ticks = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            size_t nc = cap ? cap * 2 : 8192;
            char *p = realloc(line, nc);
            if (!p) break;
            line = p;
            cap = nc;
        }
        /* Wait for bytes in short slices so that a silent client neither
         * blocks shutdown nor holds its thread beyond READ_TIMEOUT_S. */
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int pr = poll(&pf, 1, 100);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) {
            if (atomic_load(&s->stopping) || ++idle_ticks > READ_TIMEOUT_S * 10) break;
            continue;
        }
        ssize_t r = recv(fd, line + len, cap - len - 1, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        char *nl = memchr(line + len, '\n', (size_t)r);
        len += (size_t)r;
        if (nl) {
            len = (size_t)(nl - line);
            got_line = 1;
            break;
        }
        if (len > MAX_LINE) {
            too_long = 1;
            break;
        }
    }
    if (line && (got_line || (len > 0 && !too_long))) {
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
        char *resp = sockserv_handle_line(s->e, line, len, unix_gone, &fd);
        if (resp) {
            write_all(fd, resp, strlen(resp));
            write_all(fd, "\n", 1);
            free(resp);
        }
    } else if (too_long) {
        char msg[128];
        snprintf(msg, sizeof msg, "{\"error\":\"the request line is longer than %d bytes\"}\n", MAX_LINE);
        write_all(fd, msg, strlen(msg));
    }
    free(line);
    close(fd);
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
