/* test_request.c - the transport-independent request lifecycle
 * (src/server/request.h) and its memory pool (src/base/arena.h).
 *
 * On a tiny random model written by the project's synth with the Qwen2.5
 * tokenizer fixture (tests/fixtures/tokenizer/prepare.sh, which
 * tests/run.sh runs into $BUILD/fixtures/tokenizer; the text-protocol cases
 * are skipped with a message without it):
 *   - the arena honours its cap, aligns, and its buffers grow;
 *   - the socket and stdin protocols give the same greedy ids for the same
 *     prompt, stop at max_tokens with "length", and answer a bad line in
 *     their own error style; a chat body error is OpenAI's JSON with param;
 *   - the event stream is START, DELTA..., DONE (then DONE again), and the
 *     streamed text equals the non-streamed reply's text;
 *   - a stop string ends the text before it, with finish "stop" and fewer
 *     completion tokens; the SSE rendering ends with [DONE];
 *   - a client that goes away (gone() == 1) cancels the request;
 *   - a request never started reports an error, not a hang;
 *   - shutdown is never "stop": cut mid-way -> "cancelled" (stdin: an error
 *     line keeping the ids), still queued -> 503 shutting_down (manual
 *     scheduler: exact).
 * Nothing depends on thread timing: every check holds for any interleaving
 * of the engine thread and this one.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/log.h"
#include "server/engine.h"
#include "server/request.h"
#include "synth/synth.h"
#include "test.h"
#include "test_model.h"

static const char *k_config =
    "{\"architectures\":[\"Qwen2ForCausalLM\"],\"model_type\":\"qwen2\",\"vocab_size\":151936,"
    "\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":2,\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-06,"
    "\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,\"bos_token_id\":151643,\"eos_token_id\":151645,"
    "\"torch_dtype\":\"bfloat16\"}";

static char g_dir[256];

static void rm_model(void) { test_model_remove(g_dir); }

/* 1 with a model folder in g_dir, 0 to skip (no tokenizer fixture), -1 on
 * failure. Greedy by default, so that replies are comparable. */
static int make_model(void) {
    const char *build = getenv("BUILD");
    char tokdir[512];
    snprintf(tokdir, sizeof tokdir, "%s/fixtures/tokenizer/qwen2.5", build && build[0] ? build : "build");
    char probe[600];
    snprintf(probe, sizeof probe, "%s/tokenizer.json", tokdir);
    if (access(probe, R_OK) != 0) {
        printf("SKIP request lifecycle checks: no tokenizer fixture at %s "
               "(run tests/fixtures/tokenizer/prepare.sh)\n",
               tokdir);
        return 0;
    }
    if (test_model_write(g_dir, sizeof g_dir, "request", k_config, 11,
                         "{\"bos_token_id\": 151643, \"eos_token_id\": [151645, 151643], \"do_sample\": false}\n",
                         tokdir) != 0)
        return -1;
    return 1;
}

/* ---- the arena ----------------------------------------------------------- */

static void test_arena(void) {
    qw_arena a;
    arena_init(&a, 64 * 1024);
    char *p = arena_alloc(&a, 3);
    char *q = arena_alloc(&a, 5);
    CHECK(p && q && ((uintptr_t)q % _Alignof(max_align_t)) == 0, "small allocations aligned");
    CHECK(arena_alloc(&a, 100 * 1024) == NULL, "an allocation past the cap is refused");
    CHECK(arena_alloc(&a, 8) != NULL, "and the arena goes on after a refusal");
    qw_abuf b = {0};
    int ok = 1;
    for (int i = 0; i < 1000 && ok; i++) ok = abuf_add(&a, &b, "abcdefghij", 10) == 0;
    CHECK(ok && b.len == 10000 && b.data[b.len] == '\0' && !memcmp(b.data + 9990, "abcdefghij", 10),
          "a buffer grows to 10000 bytes, NUL-terminated");
    int refused = 0;
    for (int i = 0; i < 100 && !refused; i++) refused = abuf_add(&a, &b, b.data, b.len > 4096 ? 4096 : b.len) != 0;
    CHECK(refused && b.len <= 64 * 1024, "a buffer stops growing at the cap (len %zu)", b.len);
    arena_free(&a);
    CHECK(a.head == NULL && a.used == 0, "arena_free empties it");
}

/* ---- helpers --------------------------------------------------------------- */

/* The reply of a one-shot request (malloc'd copy), status in *status. */
static char *one_shot(qw_engine *e, api_kind kind, const char *body, int *status) {
    qw_request *q = request_new(e, kind);
    if (!q) return NULL;
    if (request_start(q, body, strlen(body)) == 0) request_run(q, 0.01, NULL, NULL);
    size_t n;
    const char *r = request_reply(q, &n);
    char *out = r ? strndup(r, n) : NULL;
    *status = request_status(q);
    request_free(q);
    return out;
}

static cJSON *json_at(cJSON *o, const char *a, const char *b) {
    cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

/* ---- the token protocols ----------------------------------------------------- */

static void test_token_protocols(qw_engine *e) {
    int st;
    char *sock = one_shot(e, API_SOCKET, "{\"tokens\":[151644,8948,198,40,1079],\"max_tokens\":6,\"ignore_eos\":true}", &st);
    cJSON *o = sock ? cJSON_Parse(sock) : NULL;
    cJSON *toks = o ? json_at(o, "tokens", NULL) : NULL;
    CHECK(st == 200 && cJSON_IsArray(toks) && cJSON_GetArraySize(toks) == 6, "socket: 6 tokens: %s", sock ? sock : "NULL");
    cJSON *fr = o ? json_at(o, "finish_reason", NULL) : NULL;
    CHECK(cJSON_IsString(fr) && !strcmp(fr->valuestring, "length"), "socket: finish_reason length");
    cJSON *gt = o ? json_at(o, "gen_tokens", NULL) : NULL;
    CHECK(cJSON_IsNumber(gt) && gt->valueint == 6, "socket: gen_tokens 6");

    /* The same prompt over stdin: the same ids, space-separated. */
    char *line = one_shot(e, API_STDIN, "151644 8948 198 40 1079|6", &st);
    char want[256] = "";
    size_t at = 0;
    cJSON *it;
    if (cJSON_IsArray(toks))
        cJSON_ArrayForEach(it, toks) at += (size_t)snprintf(want + at, sizeof want - at, at ? " %d" : "%d", it->valueint);
    /* stdin stops at EOS (no ignore_eos field): compare the common prefix. */
    CHECK(st == 200 && line && !strncmp(want, line, strlen(line)), "stdin '%s' is a prefix of socket '%s'",
          line ? line : "NULL", want);
    free(line);
    cJSON_Delete(o);
    free(sock);

    /* Errors in each protocol's style. */
    sock = one_shot(e, API_SOCKET, "{\"tokens\":[1, -3]}", &st);
    o = sock ? cJSON_Parse(sock) : NULL;
    cJSON *er = o ? json_at(o, "error", NULL) : NULL;
    CHECK(st == 400 && cJSON_IsString(er) && strstr(er->valuestring, "tokens"), "socket error line: %s",
          sock ? sock : "NULL");
    cJSON_Delete(o);
    free(sock);
    line = one_shot(e, API_STDIN, "1 2 3", &st);
    CHECK(st == 400 && line && !strncmp(line, "error: ", 7) && !strchr(line, '\n'), "stdin error line: %s",
          line ? line : "NULL");
    free(line);
    char *doc = one_shot(e, API_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", &st);
    o = doc ? cJSON_Parse(doc) : NULL;
    cJSON *param = o ? json_at(json_at(o, "error", NULL), "param", NULL) : NULL;
    CHECK(st == 400 && cJSON_IsString(param) && !strcmp(param->valuestring, "messages[0].content"),
          "chat error names the field: %s", doc ? doc : "NULL");
    cJSON_Delete(o);
    free(doc);
}

/* ---- events, streaming and stop strings -------------------------------------- */

static const char *k_chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"Say something.\"}],"
                            "\"max_tokens\":24,\"ignore_eos\":true%s}";

/* The text of a chat request through the event stream; *finish, counts. */
static char *stream_text(qw_engine *e, const char *extra, const char **finish, int *n_delta_tokens, int *order_ok,
                         char **sse_tail) {
    char body[512];
    snprintf(body, sizeof body, k_chat, extra);
    qw_request *q = request_new(e, API_CHAT);
    *order_ok = 0;
    if (!q || request_start(q, body, strlen(body)) != 0) {
        request_free(q);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *text = calloc(1, cap);
    int first = 1, ntok = 0, ok = 1, seen_finish = 0;
    req_event ev;
    char last_sse[1024] = "";
    for (;;) {
        request_next(q, 0.05, &ev);
        if (first && ev.kind != REQ_EV_NONE) {
            ok &= ev.kind == REQ_EV_START;
            first = 0;
        } else if (ev.kind == REQ_EV_START) {
            ok = 0;
        }
        const char *b;
        size_t bl;
        if (request_sse(q, &ev, &b, &bl) == 0 && bl) snprintf(last_sse, sizeof last_sse, "%.*s", (int)bl, b);
        if (ev.kind == REQ_EV_DELTA) {
            ntok += ev.n_tokens;
            if (len + ev.text_len + 1 < cap) {
                memcpy(text + len, ev.text, ev.text_len);
                len += ev.text_len;
            }
        }
        if (ev.kind == REQ_EV_FINISH) {
            ok &= ev.index == 0 && !seen_finish;
            seen_finish = 1;
        }
        if (ev.kind == REQ_EV_DONE || ev.kind == REQ_EV_ERROR) break;
    }
    ok &= ev.kind == REQ_EV_DONE && seen_finish;
    request_next(q, 0, &ev);
    ok &= ev.kind == REQ_EV_DONE; /* the last event repeats */
    *finish = ev.finish && !strcmp(ev.finish, "stop") ? "stop" : ev.finish && !strcmp(ev.finish, "length") ? "length" : "?";
    *n_delta_tokens = ntok;
    *order_ok = ok;
    if (sse_tail) *sse_tail = strdup(last_sse);
    request_free(q);
    return text;
}

static void test_events(qw_engine *e) {
    const char *fin;
    int ntok, ok;
    char *tail = NULL;
    char *streamed = stream_text(e, "", &fin, &ntok, &ok, &tail);
    CHECK(streamed && ok, "events: START first, DONE last and repeated");
    CHECK(streamed && !strcmp(fin, "length") && ntok == 24, "24 tokens, finish length (got %s, %d)", fin, ntok);
    size_t tl = tail ? strlen(tail) : 0;
    CHECK(tl >= strlen(API_SSE_DONE) && !strcmp(tail + tl - strlen(API_SSE_DONE), API_SSE_DONE),
          "the DONE event renders with [DONE] last");
    free(tail);

    /* The non-streamed reply carries the same text. */
    char body[512];
    snprintf(body, sizeof body, k_chat, "");
    int st;
    char *doc = one_shot(e, API_CHAT, body, &st);
    cJSON *o = doc ? cJSON_Parse(doc) : NULL;
    cJSON *ch = o ? cJSON_GetArrayItem(json_at(o, "choices", NULL), 0) : NULL;
    cJSON *content = ch ? json_at(ch, "message", "content") : NULL;
    cJSON *ct = o ? json_at(o, "usage", "completion_tokens") : NULL;
    CHECK(st == 200 && cJSON_IsString(content) && streamed && !strcmp(content->valuestring, streamed),
          "streamed text equals the reply's text");
    CHECK(cJSON_IsNumber(ct) && ct->valueint == 24, "usage.completion_tokens 24");

    /* A stop string from the middle of that text ends it right before. */
    size_t sl = streamed ? strlen(streamed) : 0;
    if (sl >= 8) {
        char stop[8];
        size_t from = sl / 2;
        /* Start the stop string on a UTF-8 character boundary. */
        while (from < sl && ((unsigned char)streamed[from] & 0xC0) == 0x80) from++;
        size_t k = 0;
        while (k < 3 && from + k < sl) stop[k] = streamed[from + k], k++;
        while (k > 0 && ((unsigned char)stop[k - 1] & 0xC0) == 0xC0) k--; /* no cut lead byte */
        stop[k] = '\0';
        cJSON *js = cJSON_CreateString(stop);
        char *jstop = cJSON_PrintUnformatted(js);
        cJSON_Delete(js);
        char extra[128];
        snprintf(extra, sizeof extra, ",\"stop\":%s", jstop);
        free(jstop);
        int ntok2, ok2;
        const char *fin2;
        char *cut = stream_text(e, extra, &fin2, &ntok2, &ok2, NULL);
        const char *first = strstr(streamed, stop);
        size_t want = first ? (size_t)(first - streamed) : 0;
        CHECK(cut && ok2 && strlen(cut) == want && !strncmp(cut, streamed, want),
              "stop '%s': the text ends right before it ('%s')", stop, cut ? cut : "NULL");
        CHECK(cut && !strcmp(fin2, "stop") && ntok2 <= 24, "stop: finish stop (%s), %d tokens", fin2, ntok2);
        free(cut);
    } else {
        printf("SKIP stop-string check: the text is only %zu bytes\n", sl);
    }
    cJSON_Delete(o);
    free(doc);
    free(streamed);
}

static int always_gone(void *arg) {
    (*(int *)arg)++;
    return 1;
}

static void test_gone_and_unstarted(qw_engine *e) {
    qw_request *q = request_new(e, API_SOCKET);
    const char *b = "{\"tokens\":[1,2,3],\"max_tokens\":400,\"ignore_eos\":true}";
    int calls = 0;
    int started = q && request_start(q, b, strlen(b)) == 0;
    int rc = started ? request_run(q, 0.0, always_gone, &calls) : -1;
    CHECK(started && rc == 1 && calls == 1, "a client that leaves cancels the request (rc %d)", rc);
    request_free(q);

    q = request_new(e, API_CHAT);
    req_event ev;
    if (q) request_next(q, 0, &ev);
    CHECK(q && ev.kind == REQ_EV_ERROR && request_status(q) == 500, "a request never started is an error");
    request_free(q);
}

/* Shutdown is never "stop": on a manual scheduler (no timing), two requests
 * run and have tokens, two wait in the queue; sched_stop cancels all four.
 * The running ones end "cancelled" (chat) and with a cut-error line that
 * keeps the ids (stdin); the queued ones get 503 shutting_down (chat JSON,
 * socket error line). Replaces e->sched (run last). */
static void test_shutdown(qw_engine *e) {
    sched_stop(e->sched, 0);
    sched_free(e->sched);
    qw_sched_params sp = {.n_slots = 2, .queue_cap = 4, .manual = 1};
    qw_err err;
    e->sched = sched_create(e->ctx, e->pool, &sp, &err);
    CHECK(e->sched != NULL, "manual scheduler: %s", e->sched ? "" : err.msg);
    if (!e->sched) return;
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"Go on.\"}],\"max_tokens\":200,"
                       "\"ignore_eos\":true}";
    const char *line = "151644 8948 198 40 1079|200";
    const char *sock = "{\"tokens\":[151644,8948,198],\"max_tokens\":200}";
    qw_request *a = request_new(e, API_CHAT), *d = request_new(e, API_STDIN);
    qw_request *b = request_new(e, API_CHAT), *c = request_new(e, API_SOCKET);
    int ok = a && b && c && d && request_start(a, chat, strlen(chat)) == 0 &&
             request_start(d, line, strlen(line)) == 0 && request_start(b, chat, strlen(chat)) == 0 &&
             request_start(c, sock, strlen(sock)) == 0;
    CHECK(ok, "four requests submitted");
    if (!ok) goto out;
    int ta = 0, td = 0;
    req_event ev;
    for (int i = 0; i < 200 && (ta == 0 || td == 0); i++) {
        sched_step(e->sched);
        request_next(a, 0, &ev);
        if (ev.kind == REQ_EV_DELTA) ta += ev.n_tokens;
        request_next(d, 0, &ev);
        if (ev.kind == REQ_EV_DELTA) td += ev.n_tokens;
    }
    CHECK(ta > 0 && td > 0, "both running requests have tokens (%d, %d)", ta, td);
    sched_stop(e->sched, 0);

    const char *fin = NULL;
    for (int i = 0; i < 1000; i++) {
        request_next(a, 0, &ev);
        if (ev.kind == REQ_EV_FINISH || ev.kind == REQ_EV_DONE || ev.kind == REQ_EV_ERROR) break;
    }
    fin = ev.kind == REQ_EV_FINISH ? ev.finish : "(no finish)";
    CHECK(ev.kind == REQ_EV_FINISH && !strcmp(fin, "cancelled"), "a request cut mid-way: finish %s", fin);
    const char *bytes;
    size_t bl;
    CHECK(request_sse(a, &ev, &bytes, &bl) == 0 && strstr(bytes, "\"finish_reason\":\"cancelled\""),
          "its SSE finish chunk says cancelled");

    request_run(d, 0.0, NULL, NULL);
    size_t n;
    const char *r = request_reply(d, &n);
    CHECK(r && !strncmp(r, "error: the server is shutting down; the answer was cut after ", 61),
          "stdin: a cut answer is an error line: %s", r ? r : "NULL");

    request_run(b, 0.0, NULL, NULL);
    const api_error *ae = request_error(b);
    r = request_reply(b, &n);
    CHECK(request_status(b) == 503 && ae && !strcmp(ae->code, "shutting_down") && r && strstr(r, "shutting_down"),
          "a queued request gets 503 shutting_down: %s", r ? r : "NULL");

    request_run(c, 0.0, NULL, NULL);
    r = request_reply(c, &n);
    CHECK(r && !strncmp(r, "{\"error\":", 9) && strstr(r, "shutting down"), "socket: %s", r ? r : "NULL");
out:
    request_free(a);
    request_free(b);
    request_free(c);
    request_free(d);
}

int main(void) {
    qw_log_set_level(QW_LOG_WARN);
    test_arena();
    int rc = make_model();
    CHECK(rc >= 0, "tiny model written");
    if (rc == 1) {
        qw_engine e;
        qw_err err;
        qw_engine_opts o = {.model_dir = g_dir, .threads = 1, .n_ctx = 512, .parallel = 2, .queue = 8,
                            .need_tokenizer = 1, .quant = -1};
        int open = engine_open(&e, &o, &err) == 0;
        CHECK(open, "engine_open: %s", open ? "" : err.msg);
        rm_model();
        if (open) {
            test_token_protocols(&e);
            test_events(&e);
            test_gone_and_unstarted(&e);
            test_shutdown(&e);
            engine_close(&e, 0);
        }
    }
    rm_model();
    return test_summary();
}
