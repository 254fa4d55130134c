/* test_sched.c - the continuous-batching scheduler (src/engine/sched.h).
 *
 * On a tiny random model written by the project's own synth (no files
 * needed; std 0.3 so that greedy output depends on the whole context):
 *   - forward() is batch-invariant: a slot's logits are bit-identical alone
 *     and in a batch with other slots' decode tokens and prompt chunks, on
 *     every ISA level and with every KV type (f32, f16, bf16);
 *   - the scheduler gives a request the same tokens alone as among 7
 *     others, greedy and seeded sampling, with prompts chunked differently;
 *   - the scheduler agrees with gen_run (the single-sequence path);
 *   - speculative decoding (n-gram drafts) gives exactly the plain tokens,
 *     and the prefix cache bitwise the logits without it, with every KV
 *     type (16-bit pages mapped, shared and copied on write);
 *   - cancellation frees the slot, a full queue says EFULL, bad prompts
 *     say EINVAL, the context limit ends with LENGTH, stop cancels.
 *
 * Nothing here depends on thread timing: the cases that look at the queue,
 * the slots and the counters at one point in time run the scheduler in
 * manual mode (sched_step() on this thread, no engine thread), so every
 * count is exact; the threaded cases only check what holds for any
 * interleaving. The temporary model folder is removed right after the
 * model is loaded (its files are mapped), and at exit on the paths before.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "engine/generate.h"
#include "engine/sched.h"
#include "infer/forward.h"
#include "infer/kvcache.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/pool.h"
#include "synth/synth.h"
#include "grammar/grammar.h"
#include "test.h"
#include "test_model.h"

#define VOCAB 1024
#define N_CTX 160

static const char *k_config =
    "{\"architectures\":[\"Qwen2ForCausalLM\"],\"model_type\":\"qwen2\",\"hidden_size\":64,"
    "\"intermediate_size\":96,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
    "\"vocab_size\":1024,\"max_position_embeddings\":512,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,"
    "\"tie_word_embeddings\":true,\"torch_dtype\":\"bfloat16\",\"bos_token_id\":1000,\"eos_token_id\":1001}";

static char g_dir[256];

/* Removes the model folder if there is one; safe to call twice. */
static void rm_model(void) { test_model_remove(g_dir); }

/* synth writes Qwen2.5's generation_config.json (ids 151643..), which does
 * not fit this small vocabulary: the test's own replaces it. */
static int make_model(void) {
    return test_model_write(g_dir, sizeof g_dir, "sched", k_config, 7,
                            "{\"bos_token_id\": 1000, \"eos_token_id\": [1001, 1002], \"do_sample\": false}\n", NULL);
}

/* Deterministic prompt i of length len. */
static void prompt_of(int i, int len, int32_t *out) {
    uint32_t x = 2654435761u * (uint32_t)(i + 1);
    for (int k = 0; k < len; k++) {
        x = x * 1664525u + 1013904223u;
        out[k] = (int32_t)((x >> 8) % 1000); /* < 1000: never EOS */
    }
}

typedef struct run {
    int32_t toks[N_CTX];
    int n;
    int finish;
} run;

/* Manual mode: step until every request of r[0..n) is done. Returns the
 * number of steps, or -1 (with a failed check) if the engine went idle or
 * ran past max_steps with requests unfinished. */
static int drive(qw_sched *s, qw_req *const *r, int n, int max_steps) {
    for (int steps = 0;; steps++) {
        int all_done = 1;
        for (int i = 0; i < n; i++)
            if (r[i] && !sched_req_done(r[i])) all_done = 0;
        if (all_done) return steps;
        int rc = sched_step(s);
        if (rc != 1 || steps >= max_steps) {
            CHECK(0, "drive: sched_step returned %d after %d steps with requests unfinished", rc, steps);
            return -1;
        }
    }
}

/* Submit n requests at once and collect them (manual: stepping on this
 * thread; else the engine thread runs them and this one waits). */
static void run_batch(qw_sched *s, int manual, int n, const qw_req_params *ps, run *out) {
    qw_req *r[16] = {0};
    qw_err err;
    for (int i = 0; i < n; i++) {
        int rc = sched_submit(s, &ps[i], &r[i], &err);
        CHECK(rc == QW_SCHED_OK, "submit %d: %d %s", i, rc, err.msg);
        if (rc != QW_SCHED_OK) r[i] = NULL;
    }
    if (manual) drive(s, r, n, 100000);
    for (int i = 0; i < n; i++) {
        out[i].n = 0;
        if (!r[i]) continue;
        int cur = 0;
        const int32_t *t;
        while (!sched_req_done(r[i])) sched_req_wait(r[i], &cur, &t, 1.0);
        cur = 0;
        int k = sched_req_wait(r[i], &cur, &t, 0);
        memcpy(out[i].toks, t, (size_t)k * sizeof *t);
        out[i].n = k;
        qw_req_stats st;
        sched_req_stats(r[i], &st);
        out[i].finish = st.finish;
        CHECK(st.n_gen == k && !st.failed, "stats of %d: n_gen %d vs %d, failed %d", i, st.n_gen, k, st.failed);
        sched_req_release(r[i]);
    }
}

static int same(const run *a, const run *b) {
    return a->n == b->n && a->finish == b->finish && !memcmp(a->toks, b->toks, (size_t)a->n * sizeof(int32_t));
}

static float max_rel_diff(const float *a, const float *b, int n) {
    float md = 0, mx = 0;
    for (int v = 0; v < n; v++) {
        float d = a[v] - b[v];
        if (d < 0) d = -d;
        if (d > md) md = d;
        float x = a[v] < 0 ? -a[v] : a[v];
        if (x > mx) mx = x;
    }
    return mx > 0 ? md / mx : md;
}

/* Batch invariance of forward(): the logits of one slot's token must not
 * depend on what else is in the batch, bit for bit, whether the batch holds
 * 1, 2 or 12 tokens (the matmul kernels compute every output row with the
 * same operation sequence for any n; see kernels.h); with the KV cache in
 * each type (--kv-type). Returns the prompt's last logits in *out (the
 * caller compares the types). */
static void test_batch_invariance(qw_model *m, qw_pool *pool, qw_kv_type kt, float *out) {
    qw_err err;
    qw_ctx *c = ctx_create_kv(m, 4, N_CTX, 64, QW_KV_PAGE_ROWS, kt, &err);
    CHECK(c != NULL, "ctx_create: %s", err.msg);
    if (!c) return;
    int32_t p[20];
    prompt_of(99, 20, p);
    int32_t pos[64], slot[64], tok[64];
    uint8_t want[64];
    float *ref = malloc(VOCAB * sizeof(float));
    float *dec1 = malloc(VOCAB * sizeof(float));
    float *dec2 = malloc(VOCAB * sizeof(float));
    qw_batch b = {.tokens = tok, .pos = pos, .slot = slot, .want_logits = want};

    /* Alone: the 20-token prompt in slot 0 (logits of the last two). */
    for (int k = 0; k < 20; k++) tok[k] = p[k], pos[k] = k, slot[k] = 0, want[k] = k >= 18;
    b.n = 20;
    CHECK(forward(c, &b, pool, &err) == 0, "forward: %s", err.msg);
    memcpy(ref, ctx_logits(c, 1), VOCAB * sizeof(float));
    memcpy(out, ref, VOCAB * sizeof(float));
    /* Decode alone (one token in the batch): token 5 at position 20. */
    tok[0] = 5, pos[0] = 20, slot[0] = 0, want[0] = 1;
    b.n = 1;
    CHECK(forward(c, &b, pool, &err) == 0, "forward: %s", err.msg);
    memcpy(dec1, ctx_logits(c, 0), VOCAB * sizeof(float));

    /* The same prompt in slot 2 between prompt chunks of slots 1 and 3. */
    int n = 0;
    for (int k = 0; k < 7; k++, n++) tok[n] = (int32_t)(100 + k), pos[n] = k, slot[n] = 1, want[n] = k == 6;
    for (int k = 0; k < 20; k++, n++) tok[n] = p[k], pos[n] = k, slot[n] = 2, want[n] = k == 19;
    for (int k = 0; k < 5; k++, n++) tok[n] = (int32_t)(300 + k), pos[n] = k, slot[n] = 3, want[n] = 1;
    b.n = n;
    CHECK(forward(c, &b, pool, &err) == 0, "forward: %s", err.msg);
    CHECK(!memcmp(ref, ctx_logits(c, 1), VOCAB * sizeof(float)),
          "%s kv %s: prompt logits differ alone vs in a mixed batch (max rel diff %g)", kernels()->name,
          qw_kv_type_name(kt), max_rel_diff(ref, ctx_logits(c, 1), VOCAB));
    /* Decode of slot 2 beside one other decode token... */
    n = 0;
    tok[n] = 5, pos[n] = 20, slot[n] = 2, want[n++] = 1;
    tok[n] = 9, pos[n] = 7, slot[n] = 1, want[n++] = 1;
    b.n = n;
    CHECK(forward(c, &b, pool, &err) == 0, "forward: %s", err.msg);
    memcpy(dec2, ctx_logits(c, 0), VOCAB * sizeof(float));
    /* ...and again (same positions, so the same cache contents) beside two
     * others plus a prompt chunk. */
    n = 0;
    tok[n] = 9, pos[n] = 7, slot[n] = 1, want[n++] = 1;
    tok[n] = 5, pos[n] = 20, slot[n] = 2, want[n++] = 1;
    tok[n] = 11, pos[n] = 5, slot[n] = 3, want[n++] = 1;
    for (int k = 0; k < 9; k++, n++) tok[n] = (int32_t)(400 + k), pos[n] = k, slot[n] = 0, want[n] = 0;
    b.n = n;
    CHECK(forward(c, &b, pool, &err) == 0, "forward: %s", err.msg);
    CHECK(!memcmp(dec2, ctx_logits(c, 1), VOCAB * sizeof(float)),
          "%s kv %s: decode logits differ between batches of 2 and 12 tokens (max rel diff %g)", kernels()->name,
          qw_kv_type_name(kt), max_rel_diff(dec2, ctx_logits(c, 1), VOCAB));
    CHECK(!memcmp(dec1, dec2, VOCAB * sizeof(float)), "%s kv %s: decode logits alone vs batched differ (max rel diff %g)",
          kernels()->name, qw_kv_type_name(kt), max_rel_diff(dec1, dec2, VOCAB));
    free(ref);
    free(dec1);
    free(dec2);
    ctx_free(c);
}

/* Batch invariance on every level this CPU runs, with every KV type; a
 * 16-bit cache changes the logits (it is really used) but only a little
 * (max |diff| relative to the largest logit below 1%, a loose bound for a
 * tiny random model: the real model's figures are in docs/PERFORMANCE.md). */
static void test_batch_invariance_levels(qw_model *m, qw_pool *pool) {
    qw_err err;
    const char *keep = kernels()->name;
    const char *const *names = kernels_level_names();
    float *lg[QW_KV_TYPE_COUNT];
    for (int t = 0; t < QW_KV_TYPE_COUNT; t++) lg[t] = malloc(VOCAB * sizeof(float));
    for (int li = 0; names[li]; li++) {
        if (!kernels_level(names[li])) continue;
        CHECK(kernels_use(names[li], &err) == 0, "use %s: %s", names[li], err.msg);
        for (int t = 0; t < QW_KV_TYPE_COUNT; t++) test_batch_invariance(m, pool, (qw_kv_type)t, lg[t]);
        for (int t = QW_KV_F16; t < QW_KV_TYPE_COUNT; t++) {
            double rd = max_rel_diff(lg[QW_KV_F32], lg[t], VOCAB);
            CHECK(memcmp(lg[QW_KV_F32], lg[t], VOCAB * sizeof(float)) != 0 && rd < 0.01,
                  "%s: kv %s vs f32 logits: max rel diff %g (want > 0, < 0.01)", names[li],
                  qw_kv_type_name((qw_kv_type)t), rd);
        }
    }
    for (int t = 0; t < QW_KV_TYPE_COUNT; t++) free(lg[t]);
    CHECK(kernels_use(keep, &err) == 0, "use %s again", keep);
}

static void test_scheduler(qw_model *m, qw_pool *pool, int prefill_chunk, int manual) {
    qw_err err;
    qw_ctx *c = ctx_create(m, 8, N_CTX, 64, &err);
    CHECK(c != NULL, "ctx_create: %s", err.msg);
    if (!c) return;
    qw_sched_params sp = {.n_slots = 8, .queue_cap = 8, .prefill_chunk = prefill_chunk, .manual = manual};
    qw_sched *s = sched_create(c, pool, &sp, &err);
    CHECK(s != NULL, "sched_create: %s", err.msg);
    if (!s) {
        ctx_free(c);
        return;
    }
    enum { N = 8 };
    static int32_t prompts[N][80];
    qw_req_params ps[N];
    for (int i = 0; i < N; i++) {
        int len = 3 + i * 9; /* 3 .. 66: several chunks when prefill_chunk is small */
        prompt_of(i, len, prompts[i]);
        ps[i] = (qw_req_params){.prompt = prompts[i], .n_prompt = len, .max_new = 12 + 3 * i,
                                .sampling = sampling_default(), .ignore_eos = 1};
        if (i % 3 == 2) { /* some sampled, seeded */
            ps[i].sampling.temperature = 0.9f;
            ps[i].sampling.top_k = 40;
            ps[i].sampling.top_p = 0.95f;
            ps[i].sampling.seed = 1234 + (uint64_t)i;
        }
    }
    run alone[N], together[N];
    for (int i = 0; i < N; i++) run_batch(s, manual, 1, &ps[i], &alone[i]);
    run_batch(s, manual, N, ps, together);
    for (int i = 0; i < N; i++) {
        CHECK(alone[i].n == ps[i].max_new && alone[i].finish == QW_FINISH_LENGTH, "request %d: %d tokens, finish %d",
              i, alone[i].n, alone[i].finish);
        CHECK(same(&alone[i], &together[i]), "request %d (chunk %d, manual %d): tokens alone != among %d others", i,
              prefill_chunk, manual, N - 1);
    }
    sched_free(s);
    ctx_free(c);
}

typedef struct collect {
    int32_t t[N_CTX];
    int n;
} collect;

static int collect_cb(void *user, int32_t tok) {
    collect *c = user;
    if (c->n < N_CTX) c->t[c->n++] = tok;
    return 0;
}

static void test_vs_gen_run(qw_model *m, qw_pool *pool) {
    qw_err err;
    qw_ctx *c = ctx_create(m, 2, N_CTX, 64, &err);
    qw_ctx *c1 = ctx_create(m, 1, N_CTX, 64, &err);
    CHECK(c && c1, "ctx_create: %s", err.msg);
    if (!c || !c1) {
        if (c) ctx_free(c);
        if (c1) ctx_free(c1);
        return;
    }
    qw_sched_params sp = {.n_slots = 2, .queue_cap = 2};
    qw_sched *s = sched_create(c, pool, &sp, &err);
    CHECK(s != NULL, "sched_create: %s", err.msg);
    if (!s) {
        ctx_free(c);
        ctx_free(c1);
        return;
    }
    int32_t p[30];
    prompt_of(42, 30, p);
    qw_req_params rp = {.prompt = p, .n_prompt = 30, .max_new = 20, .sampling = sampling_default(), .ignore_eos = 1};
    run r;
    run_batch(s, 0, 1, &rp, &r);
    collect col = {.n = 0};
    qw_gen_stats gs;
    qw_sampling g = sampling_default();
    int rc = gen_run(c1, pool, 0, 0, p, 30, 20, &g, 0, collect_cb, &col, &gs, &err);
    CHECK(rc == 0, "gen_run: %s", err.msg);
    /* gen_run stops at EOS; with ignore_eos the scheduler does not, so
     * compare the common part. */
    int n = col.n < r.n ? col.n : r.n;
    CHECK(n > 0 && !memcmp(col.t, r.toks, (size_t)n * sizeof(int32_t)), "scheduler and gen_run disagree (%d tokens)",
          n);
    sched_free(s);
    ctx_free(c);
    ctx_free(c1);
}

static qw_req_stats stats_of(qw_req *r) {
    qw_req_stats st;
    sched_req_stats(r, &st);
    return st;
}

static qw_sched_metrics metrics_of(qw_sched *s) {
    qw_sched_metrics mt;
    sched_metrics(s, &mt);
    return mt;
}

/* Limits, queue-full, cancel, metrics and stop at exact points: manual mode,
 * one slot, a queue of one, the engine advanced one step at a time. */
static void test_limits_and_cancel(qw_model *m, qw_pool *pool) {
    qw_err err;
    qw_ctx *c = ctx_create(m, 1, N_CTX, 64, &err);
    CHECK(c != NULL, "ctx_create: %s", err.msg);
    if (!c) return;
    qw_sched_params sp = {.n_slots = 1, .queue_cap = 1, .manual = 1};
    qw_sched *s = sched_create(c, pool, &sp, &err);
    CHECK(s != NULL, "sched_create: %s", err.msg);
    if (!s) {
        ctx_free(c);
        return;
    }
    int32_t p[N_CTX + 1];
    prompt_of(3, N_CTX + 1, p);
    qw_req *r = NULL, *r2 = NULL, *r3 = NULL;
    CHECK(sched_step(s) == 0, "a fresh scheduler has work");

    /* EINVAL: empty prompt, id out of range, prompt filling the context. */
    qw_req_params bad = {.prompt = p, .n_prompt = 0, .max_new = 4, .sampling = sampling_default()};
    CHECK(sched_submit(s, &bad, &r, &err) == QW_SCHED_EINVAL && !r, "empty prompt accepted");
    int32_t oob[2] = {1, VOCAB};
    bad = (qw_req_params){.prompt = oob, .n_prompt = 2, .max_new = 4, .sampling = sampling_default()};
    CHECK(sched_submit(s, &bad, &r, &err) == QW_SCHED_EINVAL && !r, "id out of range accepted");
    CHECK(strstr(err.msg, "out of range") != NULL, "message: %s", err.msg);
    bad = (qw_req_params){.prompt = p, .n_prompt = N_CTX, .max_new = 1, .sampling = sampling_default()};
    CHECK(sched_submit(s, &bad, &r, &err) == QW_SCHED_EINVAL && !r, "prompt of n_ctx tokens accepted");

    /* The context limit: prompt N_CTX-5 (155), ask 50 -> 5 tokens, LENGTH.
     * Batches of 64: the prompt takes 3 steps (64 + 64 + 27, the last one
     * samples token 1), then 4 decode steps. */
    qw_req_params lp = {.prompt = p, .n_prompt = N_CTX - 5, .max_new = 50, .sampling = sampling_default(),
                        .ignore_eos = 1};
    CHECK(sched_submit(s, &lp, &r, &err) == QW_SCHED_OK, "submit: %s", err.msg);
    int steps = drive(s, &r, 1, 100);
    qw_req_stats st = stats_of(r);
    CHECK(st.n_gen == 5 && st.finish == QW_FINISH_LENGTH, "context limit: %d tokens, finish %d", st.n_gen, st.finish);
    CHECK(steps == 7, "context limit: %d steps, expected 3 prefill + 4 decode", steps);
    sched_req_release(r);
    r = NULL;

    /* max_new 0: done in one step, no tokens; then the engine is idle. */
    qw_req_params zp = {.prompt = p, .n_prompt = 4, .max_new = 0, .sampling = sampling_default()};
    CHECK(sched_submit(s, &zp, &r, &err) == QW_SCHED_OK, "submit: %s", err.msg);
    CHECK(sched_step(s) == 1 && sched_req_done(r), "max_new 0: not done after one step");
    st = stats_of(r);
    CHECK(st.n_gen == 0 && st.finish == QW_FINISH_LENGTH, "max_new 0: %d tokens, finish %d", st.n_gen, st.finish);
    sched_req_release(r);
    r = NULL;
    CHECK(sched_step(s) == 0, "engine not idle after every request finished");
    qw_sched_metrics mt = metrics_of(s);
    CHECK(mt.requests_total == 2 && mt.requests_finished == 2 && mt.gen_tokens_total == 5 && mt.ttft_count == 1 &&
              mt.steps == 7 && mt.prompt_tokens_total == (uint64_t)(N_CTX - 5 + 4),
          "metrics: total %llu finished %llu gen %llu ttft %llu steps %llu prompt %llu",
          (unsigned long long)mt.requests_total, (unsigned long long)mt.requests_finished,
          (unsigned long long)mt.gen_tokens_total, (unsigned long long)mt.ttft_count, (unsigned long long)mt.steps,
          (unsigned long long)mt.prompt_tokens_total);

    /* One slot, queue of one: with one request generating and one queued,
     * the third is refused. */
    qw_req_params longp = {.prompt = p, .n_prompt = 8, .max_new = N_CTX - 8, .sampling = sampling_default(),
                           .ignore_eos = 1};
    CHECK(sched_submit(s, &longp, &r, &err) == QW_SCHED_OK, "submit: %s", err.msg);
    CHECK(sched_step(s) == 1, "first step did nothing");
    CHECK(stats_of(r).n_gen == 1, "after one step: %d tokens, want 1 (8-token prompt in one batch)",
          stats_of(r).n_gen);
    CHECK(sched_submit(s, &longp, &r2, &err) == QW_SCHED_OK, "second submit (queued): %s", err.msg);
    CHECK(sched_submit(s, &longp, &r3, &err) == QW_SCHED_EFULL && !r3, "third submit not refused");
    CHECK(strstr(err.msg, "busy") != NULL, "message: %s", err.msg);
    mt = metrics_of(s);
    CHECK(mt.queue_depth == 1 && mt.active_slots == 1 && mt.requests_rejected == 1 && mt.requests_total == 4,
          "metrics: queue %d active %d rejected %llu total %llu", mt.queue_depth, mt.active_slots,
          (unsigned long long)mt.requests_rejected, (unsigned long long)mt.requests_total);
    CHECK(sched_step(s) == 1 && stats_of(r).n_gen == 2 && stats_of(r2).n_gen == 0 && !sched_req_done(r2),
          "second step: running %d tokens, queued %d tokens", stats_of(r).n_gen, stats_of(r2).n_gen);

    /* Cancel the running one: the next step ends it with CANCEL and the
     * tokens it had; the step after gives the queued one the slot. */
    sched_req_cancel(r);
    CHECK(sched_step(s) == 1 && sched_req_done(r), "cancelled request not done after one step");
    st = stats_of(r);
    CHECK(st.finish == QW_FINISH_CANCEL && st.n_gen == 2 && !st.failed, "cancel: finish %d, %d tokens, failed %d",
          st.finish, st.n_gen, st.failed);
    sched_req_release(r);
    r = NULL;
    CHECK(sched_step(s) == 1 && stats_of(r2).n_gen == 1, "queued request did not start after the cancel (%d tokens)",
          stats_of(r2).n_gen);
    mt = metrics_of(s);
    CHECK(mt.queue_depth == 0 && mt.active_slots == 1 && mt.requests_finished == 3,
          "metrics after cancel: queue %d active %d finished %llu", mt.queue_depth, mt.active_slots,
          (unsigned long long)mt.requests_finished);
    /* Release without waiting: the next step cancels it and frees the slot. */
    sched_req_release(r2);
    r2 = NULL;
    CHECK(sched_step(s) == 1, "released request not dropped");
    mt = metrics_of(s);
    CHECK(mt.active_slots == 0 && mt.requests_finished == 4 && mt.gen_tokens_total == 5 + 2 + 1,
          "metrics after release: active %d finished %llu gen %llu", mt.active_slots,
          (unsigned long long)mt.requests_finished, (unsigned long long)mt.gen_tokens_total);
    CHECK(sched_step(s) == 0, "engine not idle");

    /* A queued request released before it was admitted is dropped too. */
    CHECK(sched_submit(s, &longp, &r, &err) == QW_SCHED_OK, "submit: %s", err.msg);
    sched_req_release(r);
    r = NULL;
    CHECK(sched_step(s) == 1, "released queued request not dropped");
    mt = metrics_of(s);
    CHECK(mt.queue_depth == 0 && mt.active_slots == 0 && mt.requests_finished == 5 && mt.gen_tokens_total == 8,
          "metrics: queue %d active %d finished %llu gen %llu", mt.queue_depth, mt.active_slots,
          (unsigned long long)mt.requests_finished, (unsigned long long)mt.gen_tokens_total);

    /* Stop with a request running and one queued: both end CANCEL at once. */
    CHECK(sched_submit(s, &longp, &r, &err) == QW_SCHED_OK, "submit: %s", err.msg);
    CHECK(sched_step(s) == 1 && stats_of(r).n_gen == 1, "not running");
    CHECK(sched_submit(s, &longp, &r2, &err) == QW_SCHED_OK, "submit (queued): %s", err.msg);
    sched_stop(s, 0);
    CHECK(sched_req_done(r) && stats_of(r).finish == QW_FINISH_CANCEL && stats_of(r).n_gen == 1,
          "running request after sched_stop: done %d finish %d, %d tokens", sched_req_done(r), stats_of(r).finish,
          stats_of(r).n_gen);
    CHECK(sched_req_done(r2) && stats_of(r2).finish == QW_FINISH_CANCEL && stats_of(r2).n_gen == 0,
          "queued request after sched_stop: done %d finish %d", sched_req_done(r2), stats_of(r2).finish);
    CHECK(sched_submit(s, &longp, &r3, &err) == QW_SCHED_ESHUTDOWN && !r3, "submit after stop not refused");
    CHECK(sched_step(s) == -1, "sched_step after stop did not say -1");
    sched_req_release(r);
    sched_req_release(r2);
    sched_free(s);

    /* sched_stop's grace in manual mode runs the requests to their end. */
    s = sched_create(c, pool, &sp, &err);
    CHECK(s != NULL, "sched_create: %s", err.msg);
    if (s) {
        qw_req_params sh = {.prompt = p, .n_prompt = 6, .max_new = 3, .sampling = sampling_default(),
                            .ignore_eos = 1};
        CHECK(sched_submit(s, &sh, &r, &err) == QW_SCHED_OK, "submit: %s", err.msg);
        CHECK(sched_submit(s, &sh, &r2, &err) == QW_SCHED_OK, "submit (queued): %s", err.msg);
        sched_stop(s, 3600);
        CHECK(stats_of(r).finish == QW_FINISH_LENGTH && stats_of(r).n_gen == 3 &&
                  stats_of(r2).finish == QW_FINISH_LENGTH && stats_of(r2).n_gen == 3,
              "grace: finish %d/%d, %d/%d tokens", stats_of(r).finish, stats_of(r2).finish, stats_of(r).n_gen,
              stats_of(r2).n_gen);
        sched_req_release(r);
        sched_req_release(r2);
        sched_free(s);
    }
    /* A threaded scheduler refuses sched_step. */
    qw_sched_params tp = {.n_slots = 1, .queue_cap = 1};
    s = sched_create(c, pool, &tp, &err);
    CHECK(s != NULL, "sched_create: %s", err.msg);
    if (s) {
        CHECK(sched_step(s) == -1, "sched_step on a threaded scheduler did not say -1");
        sched_free(s);
    }
    ctx_free(c);
}

/* The same cancel and stop on the engine thread, checking only what holds
 * for any interleaving (the request may finish on its own first). */
static void test_threaded_cancel(qw_model *m, qw_pool *pool) {
    qw_err err;
    qw_ctx *c = ctx_create(m, 1, N_CTX, 64, &err);
    CHECK(c != NULL, "ctx_create: %s", err.msg);
    if (!c) return;
    qw_sched_params sp = {.n_slots = 1, .queue_cap = 1};
    qw_sched *s = sched_create(c, pool, &sp, &err);
    CHECK(s != NULL, "sched_create: %s", err.msg);
    if (!s) {
        ctx_free(c);
        return;
    }
    int32_t p[8];
    prompt_of(5, 8, p);
    qw_req_params longp = {.prompt = p, .n_prompt = 8, .max_new = N_CTX - 8, .sampling = sampling_default(),
                           .ignore_eos = 1};
    qw_req *r = NULL, *r2 = NULL;
    CHECK(sched_submit(s, &longp, &r, &err) == QW_SCHED_OK, "submit: %s", err.msg);
    int cur = 0;
    const int32_t *t;
    sched_req_wait(r, &cur, &t, -1); /* the first token (or the end) */
    sched_req_cancel(r);
    while (!sched_req_done(r)) sched_req_wait(r, &cur, &t, -1);
    qw_req_stats st = stats_of(r);
    CHECK(st.n_gen >= 1 && !st.failed &&
              (st.finish == QW_FINISH_CANCEL ? st.n_gen <= N_CTX - 8 : st.finish == QW_FINISH_LENGTH &&
                                                                            st.n_gen == N_CTX - 8),
          "threaded cancel: finish %d, %d tokens", st.finish, st.n_gen);
    sched_req_release(r);

    /* Stop with one running, one released before the end: both end. */
    CHECK(sched_submit(s, &longp, &r, &err) == QW_SCHED_OK, "submit: %s", err.msg);
    CHECK(sched_submit(s, &longp, &r2, &err) == QW_SCHED_OK, "submit: %s", err.msg);
    sched_req_release(r2);
    sched_stop(s, 0);
    st = stats_of(r);
    CHECK(sched_req_done(r) && (st.finish == QW_FINISH_CANCEL || st.finish == QW_FINISH_LENGTH),
          "after sched_stop: done %d finish %d", sched_req_done(r), st.finish);
    CHECK(sched_submit(s, &longp, &r2, &err) == QW_SCHED_ESHUTDOWN && !r2, "submit after stop not refused");
    sched_req_release(r);
    sched_free(s);
    ctx_free(c);
}

/* Speculative decoding (sched.h): with n-gram drafts the scheduler gives
 * every request exactly the tokens it gives without, greedy and seeded
 * sampling, alone and among others, at the token and context limits; a
 * request whose output repeats its own text gets drafts accepted (so the
 * comparison covers real verification runs, not only draft-free steps);
 * "no_spec" turns drafting off per request; the counters add up. */
static qw_sched *spec_sched(qw_ctx *c, qw_pool *pool, int spec_k, int64_t cache_bytes) {
    qw_err err;
    qw_sched_params sp = {.n_slots = 8, .queue_cap = 16, .prefill_chunk = 16, .manual = 1, .spec_k = spec_k,
                          .cache_bytes = cache_bytes};
    qw_sched *s = sched_create(c, pool, &sp, &err);
    CHECK(s != NULL, "sched_create: %s", err.msg);
    return s;
}

static void test_spec(qw_model *m, qw_pool *pool, qw_kv_type kt) {
    qw_err err;
    qw_ctx *c = ctx_create_kv(m, 8, N_CTX, 64, 16, kt, &err);
    CHECK(c != NULL, "ctx_create: %s", err.msg);
    if (!c) return;
    enum { N = 9 };
    static int32_t prompts[N][N_CTX];
    qw_req_params ps[N];
    for (int i = 0; i < N; i++) {
        int len = 4 + i * 7;
        prompt_of(i, len, prompts[i]);
        ps[i] = (qw_req_params){.prompt = prompts[i], .n_prompt = len, .max_new = 40 + 5 * i,
                                .sampling = sampling_default(), .ignore_eos = i % 2};
        if (i % 3 == 2) {
            ps[i].sampling.temperature = 0.8f;
            ps[i].sampling.top_k = 20;
            ps[i].sampling.top_p = 0.9f;
            ps[i].sampling.repeat_penalty = 1.1f;
            ps[i].sampling.seed = 77 + (uint64_t)i;
        }
    }
    /* Request 0: a short cycle repeated: the greedy output of this model
     * keeps cycling (checked below through the accepted count). */
    for (int k = 0; k < 24; k++) prompts[0][k] = (int32_t)(10 + k % 4);
    ps[0].n_prompt = 24;
    /* Request 7: the context limit ends it (N_CTX - 130 tokens left). */
    prompt_of(70, 130, prompts[7]);
    ps[7].n_prompt = 130;
    ps[7].max_new = 100;
    /* Request 8: a token limit that falls inside a drafted run. */
    for (int k = 0; k < 24; k++) prompts[8][k] = (int32_t)(10 + k % 4);
    ps[8].n_prompt = 24;
    ps[8].max_new = 13;

    run plain[N], alone[N], together[N];
    qw_sched *s = spec_sched(c, pool, 0, 0);
    if (!s) goto out;
    for (int i = 0; i < N; i++) run_batch(s, 1, 1, &ps[i], &plain[i]);
    sched_free(s);

    s = spec_sched(c, pool, 6, 0);
    if (!s) goto out;
    for (int i = 0; i < N; i++) run_batch(s, 1, 1, &ps[i], &alone[i]);
    qw_sched_metrics m1 = metrics_of(s);
    CHECK(m1.accepted_draft_tokens_total > 0 && m1.accepted_draft_tokens_total <= m1.draft_tokens_total,
          "no drafts accepted alone: %llu of %llu", (unsigned long long)m1.accepted_draft_tokens_total,
          (unsigned long long)m1.draft_tokens_total);
    run_batch(s, 1, N, ps, together);
    for (int i = 0; i < N; i++) {
        CHECK(plain[i].n > 0, "request %d: no tokens", i);
        CHECK(same(&plain[i], &alone[i]), "request %d: speculative tokens alone != plain (%d vs %d tokens)", i,
              alone[i].n, plain[i].n);
        CHECK(same(&plain[i], &together[i]), "request %d: speculative tokens among %d others != plain", i, N - 1);
    }
    CHECK(plain[7].n == N_CTX - 130 && plain[7].finish == QW_FINISH_LENGTH, "request 7: %d tokens, finish %d",
          plain[7].n, plain[7].finish);
    CHECK(plain[8].n == 13 && plain[8].finish == QW_FINISH_LENGTH, "request 8: %d tokens, finish %d", plain[8].n,
          plain[8].finish);

    /* Per request counts: the cycling request drafts and gains; with
     * no_spec it drafts nothing and still gives the same tokens. */
    qw_req *r;
    int rc = sched_submit(s, &ps[0], &r, &err);
    CHECK(rc == QW_SCHED_OK, "submit: %s", err.msg);
    if (rc == QW_SCHED_OK) {
        int steps = drive(s, &r, 1, 1000);
        qw_req_stats st = stats_of(r);
        CHECK(st.n_accepted > 0 && st.n_accepted <= st.n_drafted, "request 0: accepted %d of %d drafts",
              st.n_accepted, st.n_drafted);
        /* Each step emits 1 + accepted tokens; the first comes from prefill. */
        CHECK(steps < st.n_gen, "request 0: %d steps for %d tokens: no step gained", steps, st.n_gen);
        sched_req_release(r);
    }
    qw_req_params off = ps[0];
    off.no_spec = 1;
    run r_off;
    qw_sched_metrics m2 = metrics_of(s);
    run_batch(s, 1, 1, &off, &r_off);
    qw_sched_metrics m3 = metrics_of(s);
    CHECK(same(&r_off, &plain[0]), "no_spec: tokens differ");
    CHECK(m3.draft_tokens_total == m2.draft_tokens_total, "no_spec: %llu tokens drafted",
          (unsigned long long)(m3.draft_tokens_total - m2.draft_tokens_total));
    sched_free(s);

    /* With the prefix cache: drafts and rewinds write next to registered
     * pages (copy on write keeps those intact), and a second turn (prompt +
     * output + more) maps pages whose positions were drafted, rejected and
     * rewritten: the tokens stay the plain ones. */
    static int32_t turn2[N][N_CTX];
    qw_req_params ps2[N];
    run plain2[N], spec2[N], again[N];
    int n2 = 0;
    for (int i = 0; i < N; i++) {
        int len = ps[i].n_prompt + plain[i].n + 3;
        if (len + 10 > N_CTX) continue;
        memcpy(turn2[n2], ps[i].prompt, (size_t)ps[i].n_prompt * sizeof(int32_t));
        memcpy(turn2[n2] + ps[i].n_prompt, plain[i].toks, (size_t)plain[i].n * sizeof(int32_t));
        prompt_of(100 + i, 3, turn2[n2] + len - 3);
        ps2[n2] = ps[i];
        ps2[n2].prompt = turn2[n2];
        ps2[n2].n_prompt = len;
        ps2[n2].max_new = 10;
        n2++;
    }
    s = spec_sched(c, pool, 0, 0);
    if (!s) goto out;
    for (int i = 0; i < n2; i++) run_batch(s, 1, 1, &ps2[i], &plain2[i]);
    sched_free(s);
    s = spec_sched(c, pool, 6, 1 << 24);
    if (!s) goto out;
    run_batch(s, 1, N, ps, again);
    run_batch(s, 1, n2, ps2, spec2);
    qw_sched_metrics m4 = metrics_of(s);
    for (int i = 0; i < N; i++) CHECK(same(&plain[i], &again[i]), "request %d: speculative + prefix cache != plain", i);
    for (int i = 0; i < n2; i++)
        CHECK(same(&plain2[i], &spec2[i]), "turn 2 of %d: speculative + prefix cache != plain", i);
    CHECK(n2 >= 4 && m4.prefix_hit_tokens > 0, "turn 2: %d requests, %llu cached tokens", n2,
          (unsigned long long)m4.prefix_hit_tokens);
    /* rewinds go back to confirmed positions only, which are never in a
     * shared page: no copy on write was needed */
    qw_kv_stats ks;
    kv_stats(ctx_kv(c), &ks);
    CHECK(ks.cow_copies == 0, "%llu pages copied on write", (unsigned long long)ks.cow_copies);
    sched_free(s);

    /* The single-sequence path: gen_run with drafts == without. */
    for (int i = 0; i < N; i++) {
        if (i == 7) continue; /* gen_run checks the context up front */
        collect a = {.n = 0}, b = {.n = 0};
        qw_gen_stats ga, gb;
        int ra = gen_run(c, pool, 0, 0, ps[i].prompt, ps[i].n_prompt, ps[i].max_new, &ps[i].sampling, 0, collect_cb,
                         &a, &ga, &err);
        int rb = gen_run(c, pool, 1, 0, ps[i].prompt, ps[i].n_prompt, ps[i].max_new, &ps[i].sampling, 6, collect_cb,
                         &b, &gb, &err);
        CHECK(ra == 0 && rb == 0, "gen_run %d: %s", i, err.msg);
        CHECK(a.n == b.n && ga.finish == gb.finish && !memcmp(a.t, b.t, (size_t)a.n * sizeof(int32_t)),
              "gen_run %d: speculative != plain (%d vs %d tokens)", i, b.n, a.n);
        CHECK(ga.n_drafted == 0, "gen_run %d: drafts with spec_k 0", i);
        if (i == 0) CHECK(gb.n_accepted > 0, "gen_run 0: accepted %d of %d", gb.n_accepted, gb.n_drafted);
    }
out:
    ctx_free(c);
}

/* ---- the prefix cache (sched.h, infer/kvcache.h) ---------------------- */

#define PG 16 /* page rows in these tests: several pages per prompt */

static qw_sched *prefix_sched(qw_ctx *c, qw_pool *pool, int n_slots, int64_t cache_bytes) {
    qw_err err;
    qw_sched_params sp = {.n_slots = n_slots, .queue_cap = 32, .prefill_chunk = 16, .manual = 1,
                          .cache_bytes = cache_bytes};
    qw_sched *s = sched_create(c, pool, &sp, &err);
    CHECK(s != NULL, "sched_create: %s", err.msg);
    return s;
}

/* One request in a 1-slot manual scheduler; the logits row of every step
 * that produced a token is appended to lg (at most max_rows rows). Returns
 * the rows logged; *st gets the request's stats. */
static int run_logged(qw_sched *s, qw_ctx *c, const qw_req_params *p, float *lg, int max_rows, run *out,
                      qw_req_stats *st) {
    qw_req *r;
    qw_err err;
    int rc = sched_submit(s, p, &r, &err);
    CHECK(rc == QW_SCHED_OK, "submit: %s", err.msg);
    if (rc != QW_SCHED_OK) return 0;
    int rows = 0, cur = 0;
    const int32_t *t;
    out->n = 0;
    for (int steps = 0; !sched_req_done(r) && steps < 1000; steps++) {
        sched_step(s);
        int k = sched_req_wait(r, &cur, &t, 0);
        if (k > 0 && rows < max_rows) {
            memcpy(lg + (size_t)rows * VOCAB, ctx_logits(c, 0), VOCAB * sizeof(float));
            rows++;
        }
        memcpy(out->toks + out->n, t, (size_t)k * sizeof *t);
        out->n += k;
    }
    *st = stats_of(r);
    out->finish = st->finish;
    sched_req_release(r);
    return rows;
}

/* The logits of a request are bitwise the same with and without a cache
 * hit: the same prompt again, a prompt sharing part of it, and a second
 * turn (prompt + output + more) that maps the first turn's output pages. */
static void test_prefix_bitwise(qw_model *m, qw_pool *pool, qw_kv_type kt) {
    qw_err err;
    qw_ctx *c = ctx_create_kv(m, 1, N_CTX, 64, PG, kt, &err);
    CHECK(c != NULL, "ctx_create: %s", err.msg);
    if (!c) return;
    enum { ROWS = 24, NP = 4 };
    static int32_t pr[NP][N_CTX];
    qw_req_params ps[NP];
    prompt_of(1, 70, pr[0]);
    memcpy(pr[1], pr[0], 50 * sizeof(int32_t)); /* shares 50 tokens: 3 pages */
    prompt_of(2, 10, pr[1] + 50);
    prompt_of(3, 64, pr[3]); /* exactly 4 pages: at most 3 mapped */
    for (int i = 0; i < NP; i++)
        ps[i] = (qw_req_params){.prompt = pr[i], .n_prompt = i == 1 ? 60 : i == 3 ? 64 : 70, .max_new = 20,
                                .sampling = sampling_default(), .ignore_eos = 1};
    float *off = malloc((size_t)NP * ROWS * VOCAB * sizeof(float)), *on = malloc((size_t)ROWS * VOCAB * sizeof(float));
    run r_off[NP], r_on;
    int n_off[NP];
    qw_req_stats st;
    qw_sched *s = prefix_sched(c, pool, 1, 0);
    if (!s || !off || !on) goto out;
    /* turn 2 of request 0 (filled in after its first run) */
    for (int i = 0; i < NP; i++) {
        if (i == 2) {
            memcpy(pr[2], pr[0], 70 * sizeof(int32_t));
            memcpy(pr[2] + 70, r_off[0].toks, 20 * sizeof(int32_t));
            prompt_of(4, 5, pr[2] + 90);
            ps[2].n_prompt = 95;
        }
        n_off[i] = run_logged(s, c, &ps[i], off + (size_t)i * ROWS * VOCAB, ROWS, &r_off[i], &st);
        CHECK(st.n_cached == 0, "cache off: %d cached", st.n_cached);
    }
    qw_sched_metrics m_off = metrics_of(s);
    sched_free(s);

    s = prefix_sched(c, pool, 1, 1 << 24);
    if (!s) goto out;
    /* order: cold 0, 0 again, 1 (shares 3 pages), 2 (turn 2 of 0), 3 twice */
    static const int order[] = {0, 0, 1, 2, 3, 3};
    static const int want_cached[] = {0, 64, 48, 80, 0, 48};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        int i = order[k];
        int rows = run_logged(s, c, &ps[i], on, ROWS, &r_on, &st);
        CHECK(st.n_cached == want_cached[k], "run %zu (request %d): %d tokens cached, want %d", k, i, st.n_cached,
              want_cached[k]);
        CHECK(rows == n_off[i] && same(&r_on, &r_off[i]), "run %zu (request %d): tokens differ with the cache", k, i);
        CHECK(!memcmp(on, off + (size_t)i * ROWS * VOCAB, (size_t)rows * VOCAB * sizeof(float)),
              "kv %s: run %zu (request %d): logits not bitwise equal with %d cached tokens", qw_kv_type_name(kt), k, i,
              st.n_cached);
    }
    qw_sched_metrics mt = metrics_of(s);
    CHECK(mt.prefix_lookups == 6 && mt.prefix_hit_tokens == 64 + 48 + 80 + 48, "metrics: %llu lookups, %llu hit",
          (unsigned long long)mt.prefix_lookups, (unsigned long long)mt.prefix_hit_tokens);
    CHECK(mt.prefill_tokens_total + mt.prefix_hit_tokens == mt.prefix_lookup_tokens &&
              m_off.prefill_tokens_total == 70 + 60 + 95 + 64,
          "prefill tokens %llu + hit %llu != prompt tokens %llu (cache off: %llu)",
          (unsigned long long)mt.prefill_tokens_total, (unsigned long long)mt.prefix_hit_tokens,
          (unsigned long long)mt.prefix_lookup_tokens, (unsigned long long)m_off.prefill_tokens_total);
    CHECK(mt.kv_pages_cached > 0 && mt.kv_bytes > 0 && mt.kv_pages_used == 0, "kv: %lld cached, %lld used, %lld B",
          (long long)mt.kv_pages_cached, (long long)mt.kv_pages_used, (long long)mt.kv_bytes);
    sched_free(s);
out:
    free(off);
    free(on);
    ctx_free(c);
}

/* 8 requests with the same 100-token system prompt, submitted at once:
 * its 6 full pages are prefilled by one of them, the other 7 wait and
 * compute only their own 9 tokens; the outputs are those without cache.
 * Then a writer that goes away mid-prefill: its waiter takes over. */
static void test_prefix_shared(qw_model *m, qw_pool *pool) {
    qw_err err;
    qw_ctx *c = ctx_create_paged(m, 8, N_CTX, 64, PG, &err);
    CHECK(c != NULL, "ctx_create: %s", err.msg);
    if (!c) return;
    enum { N = 8, SYS = 100, LEN = 105 };
    static int32_t pr[N][N_CTX];
    qw_req_params ps[N];
    for (int i = 0; i < N; i++) {
        prompt_of(9, SYS, pr[i]);
        prompt_of(20 + i, LEN - SYS, pr[i] + SYS);
        ps[i] = (qw_req_params){.prompt = pr[i], .n_prompt = LEN, .max_new = 8, .sampling = sampling_default(),
                                .ignore_eos = 1};
    }
    run ref[N], got[N];
    qw_sched *s = prefix_sched(c, pool, N, 0);
    if (!s) goto out;
    run_batch(s, 1, N, ps, ref);
    qw_sched_metrics m0 = metrics_of(s);
    sched_free(s);
    CHECK(m0.prefill_tokens_total == N * LEN, "cache off: %llu prefill tokens",
          (unsigned long long)m0.prefill_tokens_total);

    s = prefix_sched(c, pool, N, 1 << 24);
    if (!s) goto out;
    run_batch(s, 1, N, ps, got);
    qw_sched_metrics m1 = metrics_of(s);
    int shared = SYS / PG * PG;
    CHECK(m1.prefill_tokens_total == (uint64_t)(LEN + (N - 1) * (LEN - shared)),
          "8 users, one system prompt: %llu tokens prefilled, want %d", (unsigned long long)m1.prefill_tokens_total,
          LEN + (N - 1) * (LEN - shared));
    CHECK(m1.prefix_hit_tokens == (uint64_t)((N - 1) * shared), "%llu tokens from the cache",
          (unsigned long long)m1.prefix_hit_tokens);
    for (int i = 0; i < N; i++) CHECK(same(&ref[i], &got[i]), "request %d: tokens differ with a shared prefix", i);
    sched_free(s);

    /* the writer goes away after its first chunk; the two waiters go on */
    s = prefix_sched(c, pool, 3, 1 << 24);
    if (!s) goto out;
    qw_req *r[3] = {0};
    for (int i = 0; i < 3; i++) {
        int rc = sched_submit(s, &ps[i], &r[i], &err);
        CHECK(rc == QW_SCHED_OK, "submit: %s", err.msg);
        if (rc != QW_SCHED_OK) goto out_s;
    }
    sched_step(s); /* all admitted; request 0 prefills 16 tokens, 1 and 2 wait */
    qw_sched_metrics mw = metrics_of(s);
    CHECK(mw.prefill_tokens_total == 16, "first step: %llu prefill tokens", (unsigned long long)mw.prefill_tokens_total);
    sched_req_cancel(r[0]);
    drive(s, r + 1, 2, 1000);
    for (int i = 1; i < 3; i++) {
        run o;
        int cur = 0;
        const int32_t *t;
        o.n = sched_req_wait(r[i], &cur, &t, 0);
        memcpy(o.toks, t, (size_t)o.n * sizeof *t);
        qw_req_stats st = stats_of(r[i]);
        o.finish = st.finish;
        CHECK(same(&o, &ref[i]), "request %d: tokens differ after its writer went away", i);
        CHECK(st.n_cached == (i == 1 ? PG : shared), "request %d: %d cached", i, st.n_cached);
    }
out_s:
    for (int i = 0; i < 3; i++) sched_req_release(r[i]);
    sched_free(s);
out:
    ctx_free(c);
}

/* Eviction never changes output: families of prompts sharing prefixes of
 * several lengths, run in waves under budgets of 0 bytes (nothing kept
 * idle), 3 pages and plenty, all give the tokens of the cache-less run. */
static void test_prefix_eviction(qw_model *m, qw_pool *pool) {
    qw_err err;
    qw_ctx *c = ctx_create_paged(m, 4, N_CTX, 64, PG, &err);
    CHECK(c != NULL, "ctx_create: %s", err.msg);
    if (!c) return;
    enum { N = 12 };
    static int32_t pr[N][N_CTX];
    qw_req_params ps[N];
    for (int i = 0; i < N; i++) {
        int fam = i % 3, share = 20 + 17 * (i % 4), len = share + 5 + i;
        prompt_of(50 + fam, share, pr[i]);
        prompt_of(60 + i, len - share, pr[i] + share);
        ps[i] = (qw_req_params){.prompt = pr[i], .n_prompt = len, .max_new = 6 + i % 5,
                                .sampling = sampling_default(), .ignore_eos = 1};
        if (i % 2) {
            ps[i].sampling.temperature = 0.9f;
            ps[i].sampling.seed = 5 + (uint64_t)i;
        }
    }
    run ref[N], got[N];
    qw_sched *s = prefix_sched(c, pool, 4, 0);
    if (!s) goto out;
    for (int w = 0; w < N; w += 4) run_batch(s, 1, 4, ps + w, ref + w);
    sched_free(s);
    qw_kv_stats ks;
    kv_stats(ctx_kv(c), &ks);
    const int64_t budgets[] = {1, 3 * ks.page_bytes, 1 << 24};
    for (int b = 0; b < 3; b++) {
        s = prefix_sched(c, pool, 4, budgets[b]);
        if (!s) goto out;
        for (int rep = 0; rep < 2; rep++)
            for (int w = 0; w < N; w += 4) run_batch(s, 1, 4, ps + w, got + w);
        qw_sched_metrics mt = metrics_of(s);
        for (int i = 0; i < N; i++)
            CHECK(same(&ref[i], &got[i]), "budget %lld: request %d differs", (long long)budgets[b], i);
        CHECK(mt.kv_pages_cached * ks.page_bytes <= budgets[b], "budget %lld: %lld pages cached",
              (long long)budgets[b], (long long)mt.kv_pages_cached);
        if (b == 1) CHECK(mt.kv_evictions > 0, "budget of 3 pages: nothing evicted");
        if (b == 2) CHECK(mt.prefix_hit_tokens > 0 && mt.kv_evictions == 0, "plenty: %llu hit, %llu evicted",
                          (unsigned long long)mt.prefix_hit_tokens, (unsigned long long)mt.kv_evictions);
        sched_free(s);
    }
out:
    ctx_free(c);
}

/* Constrained sampling (qw_req_params.grammar): on the random model, every
 * output spells a sentence of the grammar and ends with EOS (forced once the
 * grammar is complete); the output is the same alone, among unconstrained
 * requests, with speculative decoding on (constrained requests take no
 * drafts) and on a second run with the same seed. A grammar that reaches a
 * point where no token fits (here: a vocabulary without EOS) fails the
 * request with a message instead of sampling outside the grammar. */
static void test_grammar(qw_model *m, qw_pool *pool) {
    qw_err err;
    qw_ctx *c = ctx_create(m, 8, N_CTX, 64, &err);
    CHECK(c != NULL, "ctx_create: %s", err.msg);
    if (!c) return;
    const int32_t eos[2] = {1001, 1002};
    int vocab = m->cfg.vocab;
    qw_gvocab *v = gvocab_create_bytes(vocab, eos, 2);
    qw_gvocab *v_noeos = gvocab_create_bytes(vocab, NULL, 0);
    qw_gvocab *v_small = gvocab_create_bytes(257, eos, 2);
    const char *text = "root ::= \"{\" [a-z]{1,8} \":\" ([0-9] | \"-\" [1-9]){1,3} (\",\" root)? \"}\"";
    qw_grammar *g = NULL;
    CHECK(grammar_compile_gbnf(&g, text, strlen(text), NULL, &err) == 0, "compile: %s", err.msg);
    if (!g || !v || !v_noeos || !v_small) goto out;
    enum { N = 6 };
    static int32_t prompts[N][64];
    qw_req_params ps[N];
    for (int i = 0; i < N; i++) {
        prompt_of(100 + i, 10 + i, prompts[i]);
        ps[i] = (qw_req_params){.prompt = prompts[i], .n_prompt = 10 + i, .max_new = 120,
                                .sampling = sampling_default()};
        if (i % 3 != 2) {
            ps[i].sampling.temperature = 1.5f;
            ps[i].sampling.seed = 5 + (uint64_t)i;
        }
        if (i < 4) {
            ps[i].grammar = g;
            ps[i].gvocab = v;
        }
    }
    ps[1].ignore_eos = 1; /* the grammar's EOS ends it all the same */
    run alone[N], together[N], again[N], spec[N];
    qw_sched *s = spec_sched(c, pool, 0, 0);
    if (!s) goto out;
    for (int i = 0; i < N; i++) run_batch(s, 1, 1, &ps[i], &alone[i]);
    run_batch(s, 1, N, ps, together);
    for (int i = 0; i < N; i++) run_batch(s, 1, 1, &ps[i], &again[i]);
    /* bad pairings */
    qw_req *r = NULL;
    qw_req_params bad = ps[0];
    bad.gvocab = NULL;
    CHECK(sched_submit(s, &bad, &r, &err) == QW_SCHED_EINVAL, "grammar without vocabulary accepted");
    bad.gvocab = v_small;
    CHECK(sched_submit(s, &bad, &r, &err) == QW_SCHED_EINVAL && strstr(err.msg, "257"),
          "vocabulary of the wrong size accepted: %s", err.msg);
    /* dead end: complete, nothing else may follow, and no EOS in the vocabulary */
    bad.gvocab = v_noeos;
    if (sched_submit(s, &bad, &r, &err) == QW_SCHED_OK) {
        drive(s, &r, 1, 1000);
        qw_req_stats st = stats_of(r);
        CHECK(st.failed && strstr(st.msg, "grammar") && st.n_gen > 0, "dead end: failed %d, %d tokens, '%s'",
              st.failed, st.n_gen, st.msg);
        sched_req_release(r);
    }
    sched_free(s);
    s = spec_sched(c, pool, 6, 0);
    if (!s) goto out;
    run_batch(s, 1, N, ps, spec);
    sched_free(s);
    for (int i = 0; i < 4; i++) {
        qw_gmatch *gm = gmatch_create(g, v);
        char bytes[N_CTX];
        int ok = gm != NULL, k;
        for (k = 0; ok && k < alone[i].n; k++) {
            ok = alone[i].toks[k] < 256;
            bytes[k] = (char)alone[i].toks[k];
        }
        ok = ok && gmatch_accept_bytes(gm, bytes, (size_t)alone[i].n) && gmatch_is_complete(gm);
        CHECK(ok && alone[i].finish == QW_FINISH_STOP, "request %d: output '%.*s' (%d tokens, finish %d) is not a complete sentence", i,
              alone[i].n, bytes, alone[i].n, alone[i].finish);
        gmatch_free(gm);
    }
    for (int i = 0; i < N; i++) {
        CHECK(same(&alone[i], &together[i]), "request %d: constrained output differs in a batch", i);
        CHECK(same(&alone[i], &again[i]), "request %d: constrained output differs on a second run", i);
        CHECK(same(&alone[i], &spec[i]), "request %d: output differs with speculative decoding on", i);
    }
    CHECK(!same(&alone[0], &alone[1]), "two seeds gave the same constrained output");
out:
    grammar_release(g);
    gvocab_free(v);
    gvocab_free(v_noeos);
    gvocab_free(v_small);
    ctx_free(c);
}

int main(void) {
    qw_log_set_level(QW_LOG_WARN);
    qw_err err;
    if (kernels_init(&err) != 0) {
        fprintf(stderr, "kernels_init: %s\n", err.msg);
        return 1;
    }
    atexit(rm_model); /* on every way out, including the early returns below */
    if (make_model() != 0) {
        CHECK(0, "cannot write the test model in %s", g_dir[0] ? g_dir : "TMPDIR");
        return test_summary();
    }
    qw_model *m = NULL;
    int rc = model_load(&m, g_dir, &err);
    /* The weights are mapped: the folder can go now, so that not even a
     * crash in the tests below leaves it behind. */
    rm_model();
    if (rc != 0) {
        CHECK(0, "model_load: %s", err.msg);
        return test_summary();
    }
    for (int nt = 1; nt <= 2; nt++) {
        qw_pool *pool = pool_create(nt);
        test_batch_invariance_levels(m, pool);
        test_scheduler(m, pool, 0, 0);
        test_scheduler(m, pool, 7, 0);
        test_scheduler(m, pool, 7, 1);
        test_vs_gen_run(m, pool);
        test_limits_and_cancel(m, pool);
        test_threaded_cancel(m, pool);
        for (int kt = 0; kt < QW_KV_TYPE_COUNT; kt++) {
            test_spec(m, pool, (qw_kv_type)kt);
            test_prefix_bitwise(m, pool, (qw_kv_type)kt);
        }
        test_prefix_shared(m, pool);
        test_prefix_eviction(m, pool);
        test_grammar(m, pool);
        pool_free(pool);
    }
    model_free(m);
    return test_summary();
}
