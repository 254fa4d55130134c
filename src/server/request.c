/* request.c - one generation request's lifecycle, for every transport
 * (request.h). */
#include "server/request.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/log.h"
#include "engine/generate.h"
#include "server/stopstr.h"

typedef enum { RQ_NEW, RQ_RUNNING, RQ_FINISHING, RQ_DONE, RQ_FAILED } rq_state;

struct qw_request {
    qw_arena mem;        /* this struct, text and rendered bytes */
    qw_engine *e;
    api_kind kind;
    api_req p;           /* the parsed request (prompt and stops: api.c's malloc) */
    int parsed;
    qw_req *r;           /* the scheduler's handle, once submitted */
    rq_state state;
    int started;         /* the START event was delivered */
    api_error err;       /* valid in RQ_FAILED */
    char id[64];
    long long created;
    /* Text protocols: ids -> UTF-8 text -> stop-string filter. */
    qw_tok_stream *ts;
    qw_stopstr stop;
    int cursor;          /* tokens consumed from r */
    int n_used;          /* tokens that made the output (up to a stop string) */
    const char *finish;  /* "stop" / "length" once finishing */
    qw_abuf piece;       /* text of the last DELTA */
    qw_abuf text;        /* the whole text (request_run) */
    qw_abuf out;         /* rendered bytes (request_sse, request_reply) */
};

static int is_text(api_kind k) { return k == API_COMPLETION || k == API_CHAT; }

/* ---- ids and seeds ----------------------------------------------------- */

static atomic_ullong g_next_id, g_next_seed;
static unsigned long long g_salt;
static pthread_once_t g_salt_once = PTHREAD_ONCE_INIT;

static void salt_init(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    g_salt = ((unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec) ^
             ((unsigned long long)getpid() << 40);
}

/* splitmix64 over a per-process salt and a counter. */
static uint64_t random_seed(void) {
    pthread_once(&g_salt_once, salt_init);
    uint64_t z = g_salt + 0x9E3779B97F4A7C15ULL * (atomic_fetch_add(&g_next_seed, 1) + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void new_id(const char *prefix, char *out, size_t n) {
    pthread_once(&g_salt_once, salt_init);
    unsigned long long k = atomic_fetch_add(&g_next_id, 1);
    unsigned long long x = (k + 1) * 0x9E3779B97F4A7C15ULL ^ g_salt;
    x ^= x >> 31;
    snprintf(out, n, "%s%016llx%08llx", prefix, x, k & 0xffffffffULL);
}

/* ---- life and death ------------------------------------------------------ */

qw_request *request_new(qw_engine *e, api_kind kind) {
    qw_arena mem;
    arena_init(&mem, REQUEST_MEM_CAP);
    qw_request *q = arena_alloc(&mem, sizeof *q);
    if (!q) {
        arena_free(&mem);
        return NULL;
    }
    memset(q, 0, sizeof *q);
    q->mem = mem;
    q->e = e;
    q->kind = kind;
    q->state = RQ_NEW;
    stopstr_init(&q->stop, NULL, 0);
    return q;
}

void request_free(qw_request *q) {
    if (!q) return;
    if (q->r) sched_req_release(q->r); /* cancels if still running */
    if (q->ts) tok_stream_free(q->ts);
    stopstr_free(&q->stop);
    if (q->parsed) api_req_free(&q->p);
    qw_arena mem = q->mem; /* q itself lives in it */
    arena_free(&mem);
}

static void fail_oom(qw_request *q) {
    api_fail(&q->err, 500, "out_of_memory", NULL, "out of memory");
    q->state = RQ_FAILED;
}

int request_start(qw_request *q, const char *bytes, size_t len) {
    qw_engine *e = q->e;
    api_limits lim = {
        .tok = e->tok,
        .vocab = e->model->cfg.vocab,
        .n_ctx = e->n_ctx,
        .sampling = e->sampling,
        .completion_max_tokens = 512,
        .completion_default = 50,
        .model_id = engine_model_id(e),
        .any_model = e->any_model,
    };
    int rc;
    switch (q->kind) {
    case API_SOCKET: rc = api_parse_socket(bytes, len, &lim, &q->p, &q->err); break;
    case API_STDIN: rc = api_parse_stdin(bytes, len, &lim, &q->p, &q->err); break;
    default: rc = api_parse(q->kind, bytes, len, &lim, &q->p, &q->err); break;
    }
    if (rc < 0) {
        q->state = RQ_FAILED;
        return -1;
    }
    q->parsed = 1;
    if (is_text(q->kind)) {
        /* OpenAI semantics: without a seed, sampling differs from request
         * to request (unless the command line fixed the sampling, seed
         * included). */
        if (!q->p.seed_set && e->random_seed) q->p.sampling.seed = random_seed();
        q->ts = tok_stream_new(e->tok, 1);
        if (!q->ts) {
            fail_oom(q);
            return -1;
        }
        stopstr_init(&q->stop, (const char *const *)q->p.stop, q->p.n_stop);
        new_id(q->kind == API_CHAT ? "chatcmpl-" : "cmpl-", q->id, sizeof q->id);
    }
    q->created = (long long)time(NULL);
    qw_req_params p = {
        .prompt = q->p.prompt,
        .n_prompt = q->p.n_prompt,
        .max_new = q->p.max_tokens,
        .sampling = q->p.sampling,
        .ignore_eos = q->p.ignore_eos,
        .no_spec = q->p.no_spec,
    };
    qw_err err;
    rc = sched_submit(e->sched, &p, &q->r, &err);
    if (rc != QW_SCHED_OK) {
        q->r = NULL;
        q->state = RQ_FAILED;
        if (rc == QW_SCHED_EFULL) api_fail(&q->err, 503, "queue_full", NULL, "%s", err.msg);
        else if (rc == QW_SCHED_ESHUTDOWN) api_fail(&q->err, 503, "shutting_down", NULL, "%s", err.msg);
        else if (rc == QW_SCHED_EINVAL)
            api_fail(&q->err, 400, "invalid_value",
                     q->kind == API_CHAT ? "messages" : is_text(q->kind) ? "prompt" : "tokens", "%s", err.msg);
        else api_fail(&q->err, 500, "out_of_memory", NULL, "%s", err.msg);
        return -1;
    }
    q->state = RQ_RUNNING;
    return 0;
}

int request_streaming(const qw_request *q) { return q->p.stream; }
const api_error *request_error(const qw_request *q) { return q->state == RQ_FAILED ? &q->err : NULL; }
int request_status(const qw_request *q) { return q->state == RQ_FAILED ? q->err.status : 200; }
const char *request_id(const qw_request *q) { return q->id; }

void request_cancel(qw_request *q) {
    if (q->r) sched_req_cancel(q->r);
}

/* ---- the event stream ---------------------------------------------------- */

/* Why the scheduler finished a request that saw no stop string. */
static const char *sched_finish(const qw_req_stats *st) {
    return st->finish == QW_FINISH_LENGTH ? "length" : "stop";
}

/* Decoded text through the stop filter into piece. */
static int emit(qw_request *q, const char *t, size_t n) {
    const char *out;
    size_t out_len;
    if (stopstr_feed(&q->stop, t, n, &out, &out_len) != 0) return -1;
    return abuf_add(&q->mem, &q->piece, out, out_len);
}

/* The scheduler has published everything: flush the decoder and the stop
 * filter, and decide the finish (or the failure). */
static int finish_up(qw_request *q) {
    qw_req_stats st;
    sched_req_stats(q->r, &st);
    if (st.failed) {
        api_fail(&q->err, 500, "engine_error", NULL, "the engine failed on this request: %s", st.msg);
        return 1;
    }
    if (is_text(q->kind)) {
        size_t len;
        const char *t = tok_stream_flush(q->ts, &len);
        if (emit(q, t, len) != 0) return -1;
        if (!q->stop.hit) {
            const char *out;
            size_t out_len;
            stopstr_flush(&q->stop, &out, &out_len);
            if (abuf_add(&q->mem, &q->piece, out, out_len) != 0) return -1;
        }
    }
    q->finish = q->stop.hit ? "stop" : sched_finish(&st);
    return 0;
}

void request_next(qw_request *q, double timeout_s, req_event *ev) {
    memset(ev, 0, sizeof *ev);
    switch (q->state) {
    case RQ_NEW:
        ev->kind = REQ_EV_ERROR; /* never started */
        if (!q->err.status) api_fail(&q->err, 500, "not_started", NULL, "the request was not started");
        q->state = RQ_FAILED;
        return;
    case RQ_FAILED: ev->kind = REQ_EV_ERROR; return;
    case RQ_DONE:
        ev->kind = REQ_EV_DONE;
        ev->finish = q->finish;
        return;
    case RQ_FINISHING:
        q->state = RQ_DONE;
        ev->kind = REQ_EV_DONE;
        ev->finish = q->finish;
        return;
    case RQ_RUNNING: break;
    }
    if (!q->started) {
        q->started = 1;
        ev->kind = REQ_EV_START;
        return;
    }
    q->piece.len = 0;
    if (q->piece.data) q->piece.data[0] = '\0';
    const int32_t *toks;
    int n = sched_req_wait(q->r, &q->cursor, &toks, timeout_s);
    int used = 0;
    if (is_text(q->kind)) {
        for (; used < n && !q->stop.hit; used++) {
            size_t len;
            const char *t = tok_stream_feed(q->ts, toks[used], &len);
            if (emit(q, t, len) != 0) goto oom;
        }
    } else {
        used = n;
    }
    q->n_used += used;
    int finished = 0;
    if (q->stop.hit) {
        sched_req_cancel(q->r); /* the engine frees the slot within a step */
        q->finish = "stop";
        finished = 1;
    } else if (n == 0 && sched_req_done(q->r)) {
        /* done is set after the last token is published, and wait
         * returned none past the cursor: but the final tokens may have
         * raced in since; take them on the next call. */
        int more = sched_req_wait(q->r, &q->cursor, &toks, 0);
        if (more > 0) {
            q->cursor -= more;
            return; /* NONE */
        }
        int f = finish_up(q);
        if (f < 0) goto oom;
        if (f > 0) {
            q->state = RQ_FAILED;
            ev->kind = REQ_EV_ERROR;
            return;
        }
        finished = 1;
    }
    if (used > 0 || q->piece.len > 0) {
        ev->kind = REQ_EV_DELTA;
        ev->text = q->piece.data ? q->piece.data : "";
        ev->text_len = q->piece.len;
        ev->tokens = toks;
        ev->n_tokens = used;
        if (finished) q->state = RQ_FINISHING; /* DONE comes next */
        return;
    }
    if (finished) {
        q->state = RQ_DONE;
        ev->kind = REQ_EV_DONE;
        ev->finish = q->finish;
    }
    return;
oom:
    request_cancel(q);
    fail_oom(q);
    ev->kind = REQ_EV_ERROR;
}

int request_run(qw_request *q, double poll_s, int (*gone)(void *), void *arg) {
    double last_check = qw_now();
    for (;;) {
        req_event ev;
        request_next(q, poll_s, &ev);
        if (ev.kind == REQ_EV_DONE || ev.kind == REQ_EV_ERROR) return 0;
        if (ev.kind == REQ_EV_DELTA && is_text(q->kind) && abuf_add(&q->mem, &q->text, ev.text, ev.text_len) != 0) {
            request_cancel(q);
            fail_oom(q);
            return 0;
        }
        /* Tokens may flow without a pause: check the client by the clock. */
        double now = qw_now();
        if (!gone || now - last_check < poll_s) continue;
        last_check = now;
        if (gone(arg)) {
            LOG_DEBUG("request %s: the client went away; cancelling", q->id);
            request_cancel(q);
            return 1;
        }
    }
}

/* ---- usage ----------------------------------------------------------------- */

void request_usage(const qw_request *q, req_usage *u) {
    memset(u, 0, sizeof *u);
    if (!q->r) return;
    qw_req_stats st;
    sched_req_stats(q->r, &st);
    u->prompt_tokens = q->p.n_prompt;
    u->completion_tokens = q->n_used;
    u->draft_tokens = st.n_drafted;
    u->accepted_draft_tokens = st.n_accepted;
    u->prefill_tps = st.prefill_s > 0 ? st.n_prompt / st.prefill_s : 0;
    u->decode_tps = st.decode_s > 0 && st.n_gen > 1 ? (st.n_gen - 1) / st.decode_s : 0;
    u->elapsed_s = st.total_s;
}

/* ---- rendering ------------------------------------------------------------- */

/* Append a malloc'd string (taken) to q->out; -1 if s is NULL or no memory. */
static int out_take(qw_request *q, char *s) {
    if (!s) return -1;
    int rc = abuf_add(&q->mem, &q->out, s, strlen(s));
    free(s);
    return rc;
}

static api_meta meta(const qw_request *q) {
    return (api_meta){.id = q->id, .created = q->created, .model = engine_model_id(q->e)};
}

static int sse_usage(qw_request *q, const api_meta *m) {
    if (!q->p.include_usage) return 0;
    req_usage u;
    request_usage(q, &u);
    api_usage au = {u.prompt_tokens, u.completion_tokens, u.draft_tokens, u.accepted_draft_tokens};
    return out_take(q, api_sse_chunk(q->kind, m, NULL, NULL, 0, NULL, &au));
}

int request_sse(qw_request *q, const req_event *ev, const char **bytes, size_t *len) {
    q->out.len = 0;
    api_meta m = meta(q);
    int rc = 0;
    switch (ev->kind) {
    case REQ_EV_NONE: break;
    case REQ_EV_START:
        if (q->kind == API_CHAT) rc = out_take(q, api_sse_chunk(API_CHAT, &m, "assistant", NULL, 0, NULL, NULL));
        break;
    case REQ_EV_DELTA:
        if (ev->text_len > 0) rc = out_take(q, api_sse_chunk(q->kind, &m, NULL, ev->text, ev->text_len, NULL, NULL));
        break;
    case REQ_EV_DONE:
        rc = out_take(q, api_sse_chunk(q->kind, &m, NULL, NULL, 0, ev->finish, NULL));
        if (rc == 0) rc = sse_usage(q, &m);
        if (rc == 0) rc = abuf_add(&q->mem, &q->out, API_SSE_DONE, strlen(API_SSE_DONE));
        break;
    case REQ_EV_ERROR: {
        char *j = api_error_json(&q->err);
        rc = j ? 0 : -1;
        if (rc == 0) rc = abuf_add(&q->mem, &q->out, "data: ", 6);
        if (rc == 0) rc = out_take(q, j), j = NULL;
        if (rc == 0) rc = abuf_add(&q->mem, &q->out, "\n\n", 2);
        free(j);
        if (rc == 0) rc = sse_usage(q, &m);
        if (rc == 0) rc = abuf_add(&q->mem, &q->out, API_SSE_DONE, strlen(API_SSE_DONE));
        break;
    }
    }
    *bytes = q->out.data ? q->out.data : "";
    *len = q->out.len;
    return rc;
}

/* The error in the protocol's style. */
static char *error_doc(const qw_request *q) {
    if (q->kind == API_SOCKET) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "error", q->err.message);
        char *s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        return s;
    }
    if (q->kind == API_STDIN) {
        size_t n = strlen(q->err.message) + 8;
        char *s = malloc(n);
        if (s) snprintf(s, n, "error: %s", q->err.message);
        return s;
    }
    return api_error_json(&q->err);
}

/* The generated ids of a token protocol, with the socket's fields. */
static char *tokens_doc(qw_request *q) {
    const int32_t *toks;
    int cursor = 0;
    int ng = sched_req_wait(q->r, &cursor, &toks, 0);
    char *buf = NULL;
    size_t bl = 0;
    FILE *f = open_memstream(&buf, &bl);
    if (!f) return NULL;
    if (q->kind == API_STDIN) {
        for (int k = 0; k < ng; k++) fprintf(f, k ? " %d" : "%d", (int)toks[k]);
    } else {
        req_usage u;
        request_usage(q, &u);
        fputs("{\"tokens\":[", f);
        for (int k = 0; k < ng; k++) fprintf(f, k ? ",%d" : "%d", (int)toks[k]);
        fprintf(f,
                "],\"prompt_tokens\":%d,\"gen_tokens\":%d,\"prefill_tps\":%.3f,\"decode_tps\":%.3f,"
                "\"elapsed_s\":%.3f,\"finish_reason\":\"%s\",\"draft_tokens\":%d,\"accepted_draft_tokens\":%d}",
                u.prompt_tokens, ng, u.prefill_tps, u.decode_tps, u.elapsed_s, q->finish, u.draft_tokens,
                u.accepted_draft_tokens);
    }
    fclose(f);
    return buf;
}

static char *text_doc(qw_request *q) {
    req_usage u;
    request_usage(q, &u);
    api_meta m = meta(q);
    api_result res = {
        .text = q->text.data ? q->text.data : "",
        .text_len = q->text.len,
        .finish = q->finish,
        .prompt_tokens = u.prompt_tokens,
        .gen_tokens = u.completion_tokens,
        .draft_tokens = u.draft_tokens,
        .accepted_draft_tokens = u.accepted_draft_tokens,
        .prefill_tps = u.prefill_tps,
        .decode_tps = u.decode_tps,
        .elapsed_s = u.elapsed_s,
    };
    return q->kind == API_CHAT ? api_chat_json(&m, &res) : api_completion_json(&m, &res);
}

const char *request_reply(qw_request *q, size_t *len) {
    q->out.len = 0;
    char *doc;
    if (q->state == RQ_FAILED || q->state == RQ_NEW) {
        if (q->state == RQ_NEW) api_fail(&q->err, 500, "not_started", NULL, "the request was not started");
        q->state = RQ_FAILED;
        doc = error_doc(q);
    } else if (q->state != RQ_DONE && q->state != RQ_FINISHING) {
        api_fail(&q->err, 500, "not_finished", NULL, "the request has not finished");
        doc = error_doc(q);
    } else {
        doc = is_text(q->kind) ? text_doc(q) : tokens_doc(q);
    }
    if (out_take(q, doc) != 0) return NULL;
    *len = q->out.len;
    return q->out.data;
}
