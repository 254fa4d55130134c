/* sched.c - the continuous-batching engine loop (see sched.h).
 *
 * Locks: s->mu guards the queue, the slot table's request pointers, the
 * counters and the stop state; r->mu guards one request's published output
 * and its stats. The engine thread takes s->mu briefly at the start of a
 * step (admit, cancel) and at the end (counters); it never holds it during
 * forward(). Lock order: s->mu before r->mu.
 */
#include "engine/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "engine/draft.h"
#include "engine/generate.h"
#include "grammar/grammar.h"
#include "infer/kvcache.h"

const double qw_sched_ttft_bounds[10] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

struct qw_req {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int refs;      /* consumer + engine */
    atomic_int cancel;
    int32_t *toks;        /* [n_prompt + max_new] prompt then generated */
    int n_prompt, max_new, ignore_eos;
    qw_sampling sampling;
    qw_sampler *sampler;  /* engine thread only */
    qw_drafter drafter;   /* engine thread only */
    qw_gmatch *gm;        /* grammar matcher (engine thread only), NULL = unconstrained */
    int dead_end;         /* engine: the grammar allowed no token (set while sampling) */
    /* logprobs (NULL unless asked): written by the engine thread before the
     * token they describe is published */
    int top_logprobs;
    qw_logprob *lp;       /* [max_new] generated tokens */
    qw_logprob *plp;      /* [n_prompt] prompt tokens ([0] unused) */
    float *lp_logits;     /* [vocab] the sampler's copy of a logits row */
    /* published under mu */
    int n_gen;
    int done;
    qw_req_stats st;
    double t_submit, t_admit, t_first, t_end;
    qw_req *next;         /* queue link (s->mu) */
};

typedef struct slot {
    qw_req *req;   /* NULL = free */
    int n_past;    /* positions of this slot filled in the KV cache */
    int prefilling;
    int looked_up; /* the prefix cache was asked for this request's prompt */
    /* this step's batch entry (engine thread) */
    int row0;      /* first logits row, -1 = none */
    int n_draft;   /* drafted tokens after the decode token */
    int n_out;     /* tokens sampled from the rows (accepted drafts + 1) */
    int prow0, ppos0, pn; /* prompt logprobs: pn logits rows from prow0 for positions ppos0.. */
} slot;

struct qw_sched {
    qw_ctx *ctx;
    qw_kv *kv;    /* ctx's paged KV cache (engine thread) */
    uint64_t evictions0; /* kv's eviction count when this scheduler started */
    qw_pool *pool;
    const qw_model *model;
    int n_slots, n_ctx, max_batch, vocab, queue_cap, prefill_chunk, spec_k;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* engine waits for work */
    pthread_cond_t idle_cv; /* sched_stop waits for drain */
    qw_req *q_head, *q_tail;
    int q_len;
    int accepting;          /* 0 once sched_stop began */
    int quit;               /* engine thread exits at the next step */
    int cancel_all;         /* grace period over */
    int stopped;            /* sched_stop completed */
    int manual;             /* no engine thread: the caller runs sched_step() */
    int n_active;
    slot *slots;
    /* batch buffers, [max_batch] */
    int32_t *b_tok, *b_pos, *b_slot;
    uint8_t *b_want;
    int32_t *row_tok;       /* logits row -> sampled token */
    int *ent_slot;          /* [n_slots] slots with logits this step, in row order */
    int n_ent;
    qw_sched_metrics m;
    double tps_tokens, tps_time; /* decaying window for decode_tps */
};

static void req_unref(qw_req *r) {
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    sampler_free(r->sampler);
    gmatch_free(r->gm);
    free(r->toks);
    free(r->lp);
    free(r->plp);
    free(r->lp_logits);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

static int is_eos(const qw_config *cfg, int32_t t) {
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_ids[i] == t) return 1;
    return 0;
}

/* Mark r finished (engine side): publish stats, wake the consumer, count. */
static void req_finish(qw_sched *s, qw_req *r, int finish, const char *fail_msg) {
    double now = qw_now();
    pthread_mutex_lock(&r->mu);
    if (!r->done) {
        r->t_end = now;
        r->st.finish = finish;
        if (fail_msg) {
            r->st.failed = 1;
            snprintf(r->st.msg, sizeof r->st.msg, "%s", fail_msg);
        }
        r->done = 1;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&s->mu);
    s->m.requests_finished++;
    pthread_mutex_unlock(&s->mu);
    req_unref(r); /* the engine's reference */
}

/* Engine thread. The slot table's request pointers and n_active are read
 * by admit and by other threads (submit, metrics, stop) under s->mu. */
static void free_slot(qw_sched *s, int i) {
    /* the confirmed positions' pages go to the prefix cache (kvcache.h) */
    if (s->slots[i].req) kv_slot_release(s->kv, i, s->slots[i].req->toks, s->slots[i].n_past);
    pthread_mutex_lock(&s->mu);
    s->slots[i].req = NULL;
    s->slots[i].n_past = 0;
    s->slots[i].prefilling = 0;
    s->n_active--;
    pthread_mutex_unlock(&s->mu);
}

/* Under s->mu: take queued requests into free slots. Cancelled queue
 * entries are collected into *dead for the caller to finish after unlocking
 * (req_finish takes s->mu). Returns the number of requests admitted. */
static int admit_locked(qw_sched *s, qw_req **dead) {
    int admitted = 0;
    qw_req **pp = &s->q_head;
    qw_req *prev = NULL;
    while (*pp) {
        qw_req *r = *pp;
        int drop = atomic_load(&r->cancel) || s->cancel_all;
        int free_i = -1;
        if (!drop) {
            for (int i = 0; i < s->n_slots; i++)
                if (!s->slots[i].req) { free_i = i; break; }
            if (free_i < 0) break; /* FIFO: nothing more fits */
        }
        *pp = r->next;
        if (s->q_tail == r) s->q_tail = prev;
        r->next = NULL;
        s->q_len--;
        if (drop) {
            r->next = *dead;
            *dead = r;
            continue;
        }
        slot *sl = &s->slots[free_i];
        sl->req = r;
        sl->n_past = 0;
        sl->prefilling = 1;
        sl->looked_up = 0;
        s->n_active++;
        admitted++;
        pthread_mutex_lock(&r->mu);
        r->t_admit = qw_now();
        r->st.queue_s = r->t_admit - r->t_submit;
        pthread_mutex_unlock(&r->mu);
    }
    s->m.queue_depth = s->q_len;
    s->m.active_slots = s->n_active;
    return admitted;
}

/* Publish token t of slot i's request; returns 1 if the request is over. */
static int push_token(qw_sched *s, qw_req *r, int32_t t, int n_past_after) {
    double now = qw_now();
    int over = 0;
    pthread_mutex_lock(&r->mu);
    r->toks[r->n_prompt + r->n_gen] = t;
    r->n_gen++;
    if (r->n_gen == 1) {
        r->t_first = now;
        r->st.prefill_s = now - r->t_admit;
        r->st.ttft_s = now - r->t_submit;
    }
    if (r->n_gen >= r->max_new || n_past_after >= s->n_ctx) over = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->n_gen == 1) {
        double ttft = now - r->t_submit;
        pthread_mutex_lock(&s->mu);
        s->m.ttft_sum_s += ttft;
        s->m.ttft_count++;
        for (int b = 0; b < 10; b++)
            if (ttft <= qw_sched_ttft_bounds[b]) s->m.ttft_buckets[b]++;
        pthread_mutex_unlock(&s->mu);
    }
    return over;
}

/* Sample one slot's rows in order: row j's logits follow the decode token
 * and drafts 0..j-1, so they are valid only while every earlier draft was
 * accepted; the first sampled token that differs from its draft (or the
 * token after the last draft) ends the run. The drafts sit in r->toks right
 * after the published tokens (unpublished, so no consumer reads them), which
 * makes them the history the penalties see, as in plain decoding. */
static void sample_slot(qw_sched *s, slot *sl) {
    qw_req *r = sl->req;
    int n_hist = r->n_prompt + r->n_gen;
    const qw_config *cfg = &s->model->cfg;
    sl->n_out = 0;
    for (int j = 0; j <= sl->n_draft; j++) {
        int row = sl->row0 + j;
        float *logits = ctx_logits(s->ctx, row);
        int32_t t;
        if (r->lp) {
            /* The sampler (and the grammar mask) may change its logits: it
             * gets a copy, the record the raw row. */
            memcpy(r->lp_logits, logits, (size_t)s->vocab * sizeof(float));
            logits = r->lp_logits;
        }
        /* Constrained: mask what the grammar cannot continue with, then
         * advance it by the token drawn (constrained requests have no
         * drafts, so this runs once per step). */
        if (r->gm && gmatch_apply(r->gm, logits) == 0) {
            r->dead_end = 1;
            break;
        }
        t = sampler_sample(r->sampler, logits, r->toks, n_hist + j);
        if (r->lp) logprob_record(ctx_logits(s->ctx, row), s->vocab, t, r->top_logprobs, &r->lp[r->n_gen + j]);
        if (r->gm && !gmatch_accept_token(r->gm, t)) {
            r->dead_end = 1; /* cannot happen: t had a finite logit, so the mask allowed it */
            break;
        }
        s->row_tok[row] = t;
        sl->n_out++;
        if (j == sl->n_draft || t != r->toks[n_hist + j]) break;
        if (!r->ignore_eos && is_eos(cfg, t)) break;
    }
}

/* pool job: thread tid samples slots ent_slot[tid], [tid + nth], ... */
static void sample_slots(void *arg, int tid, int nth) {
    qw_sched *s = arg;
    for (int e = tid; e < s->n_ent; e += nth) sample_slot(s, &s->slots[s->ent_slot[e]]);
}

/* One engine step. Returns 1 if it changed anything (admitted, finished or
 * ran a batch), 0 if idle. */
static int step(qw_sched *s) {
    qw_req *dead = NULL;
    pthread_mutex_lock(&s->mu);
    int did = admit_locked(s, &dead) > 0;
    int cancel_all = s->cancel_all;
    pthread_mutex_unlock(&s->mu);
    if (dead) did = 1;
    while (dead) {
        qw_req *r = dead;
        dead = r->next;
        req_finish(s, r, QW_FINISH_CANCEL, NULL);
    }

    /* Cancellations and requests that need no tokens. */
    for (int i = 0; i < s->n_slots; i++) {
        qw_req *r = s->slots[i].req;
        if (!r) continue;
        if (atomic_load(&r->cancel) || cancel_all) {
            free_slot(s, i);
            req_finish(s, r, QW_FINISH_CANCEL, NULL);
            did = 1;
        } else if (r->max_new == 0 && !r->plp) {
            free_slot(s, i);
            req_finish(s, r, QW_FINISH_LENGTH, NULL);
            did = 1;
        }
    }

    /* Newly admitted prompts: map the longest cached prefix, then claim the
     * rest of the prompt's full pages so that requests starting later with
     * the same prefix wait for this one instead of computing it again. */
    if (kv_cache_budget(s->kv) > 0) {
        uint64_t lookups = 0, hit = 0, asked = 0;
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            if (!sl->req || !sl->prefilling || sl->looked_up) continue;
            qw_req *r = sl->req;
            sl->looked_up = 1;
            /* prompt logprobs need the logits of every prompt position */
            sl->n_past = r->plp ? 0 : kv_prefix_map(s->kv, i, r->toks, r->n_prompt);
            kv_prefix_claim(s->kv, i, r->toks, r->n_prompt, sl->n_past);
            lookups++, hit += (uint64_t)sl->n_past, asked += (uint64_t)r->n_prompt;
            pthread_mutex_lock(&r->mu);
            r->st.n_cached = sl->n_past;
            pthread_mutex_unlock(&r->mu);
        }
        if (lookups) {
            pthread_mutex_lock(&s->mu);
            s->m.prefix_lookups += lookups;
            s->m.prefix_hit_tokens += hit;
            s->m.prefix_lookup_tokens += asked;
            pthread_mutex_unlock(&s->mu);
        }
    }

    /* Build the batch: decode tokens (each with its drafts) first, then
     * prompt chunks. Every generating slot gets its decode token; drafts
     * share what is left of the batch. */
    int n = 0, n_rows = 0, n_decode = 0, n_gen_slots = 0, n_drafted = 0;
    for (int i = 0; i < s->n_slots; i++) {
        s->slots[i].row0 = -1;
        s->slots[i].n_draft = 0;
        s->slots[i].pn = 0;
        if (s->slots[i].req && !s->slots[i].prefilling) n_gen_slots++;
    }
    int draft_room = s->max_batch - n_gen_slots;
    s->n_ent = 0;
    for (int i = 0; i < s->n_slots && n < s->max_batch; i++) {
        slot *sl = &s->slots[i];
        if (!sl->req || sl->prefilling) continue;
        qw_req *r = sl->req;
        int n_hist = r->n_prompt + r->n_gen;
        s->b_tok[n] = r->toks[n_hist - 1];
        s->b_pos[n] = sl->n_past;
        s->b_slot[n] = i;
        s->b_want[n] = 1;
        sl->row0 = n_rows;
        s->ent_slot[s->n_ent++] = i;
        n_rows++;
        n++;
        n_decode++;
        /* Drafts: no more than the tokens still allowed after this step's
         * first one, the positions left in the context, and the room left
         * in the batch. */
        int limit = r->max_new - r->n_gen - 1;
        if (limit > s->n_ctx - 1 - sl->n_past) limit = s->n_ctx - 1 - sl->n_past;
        if (limit > draft_room) limit = draft_room;
        int k = limit > 0 ? drafter_propose(&r->drafter, r->toks, n_hist, limit, r->toks + n_hist) : 0;
        for (int j = 0; j < k; j++) {
            s->b_tok[n] = r->toks[n_hist + j];
            s->b_pos[n] = sl->n_past + 1 + j;
            s->b_slot[n] = i;
            s->b_want[n] = 1;
            n_rows++;
            n++;
        }
        sl->n_draft = k;
        draft_room -= k;
    }
    /* Prompt tokens this step: while others are generating, at most
     * prefill_chunk / 2 (so one long prompt delays their next token by a
     * bounded amount); otherwise as many as fit. */
    int budget = s->max_batch - n, n_prefill = 0;
    if (n_decode > 0 && budget > s->prefill_chunk / 2) budget = s->prefill_chunk / 2 > 0 ? s->prefill_chunk / 2 : 1;
    int limit = n + budget;
    for (int i = 0; i < s->n_slots && n < limit; i++) {
        slot *sl = &s->slots[i];
        if (!sl->req || !sl->prefilling) continue;
        /* prefix pages another slot is still computing: wait for them
         * (or compute them, if that slot went away) */
        int mapped = sl->n_past;
        if (kv_slot_wait(s->kv, i, &sl->n_past)) continue;
        qw_req *r = sl->req;
        if (sl->n_past < mapped) {
            pthread_mutex_lock(&r->mu);
            r->st.n_cached = sl->n_past;
            pthread_mutex_unlock(&r->mu);
            pthread_mutex_lock(&s->mu);
            s->m.prefix_hit_tokens -= (uint64_t)(mapped - sl->n_past);
            pthread_mutex_unlock(&s->mu);
        }
        int left = r->n_prompt - sl->n_past;
        int take = left;
        if (take > s->prefill_chunk) take = s->prefill_chunk;
        if (take > limit - n) take = limit - n;
        n_prefill += take;
        for (int k = 0; k < take; k++) {
            s->b_tok[n] = r->toks[sl->n_past + k];
            s->b_pos[n] = sl->n_past + k;
            s->b_slot[n] = i;
            s->b_want[n] = r->plp != NULL; /* prompt logprobs: every position's logits */
            n++;
        }
        if (r->plp) {
            sl->prow0 = n_rows;
            sl->ppos0 = sl->n_past;
            sl->pn = take;
            n_rows += take - 1; /* the last one is counted below if it ends the prompt */
            if (take != left) n_rows++;
        }
        if (take == left) {
            s->b_want[n - 1] = 1;
            sl->row0 = n_rows++;
            s->ent_slot[s->n_ent++] = i;
        }
    }
    if (n == 0) return did;

    qw_batch b = {.n = n, .tokens = s->b_tok, .pos = s->b_pos, .slot = s->b_slot, .want_logits = s->b_want};
    qw_err err;
    double t0 = qw_now();
    if (forward(s->ctx, &b, s->pool, &err) != 0) {
        /* Should not happen (inputs are checked at submit); fail every
         * request in the batch rather than the process. */
        LOG_ERROR("sched: forward failed: %s", err.msg);
        for (int i = 0; i < s->n_slots; i++) {
            qw_req *r = s->slots[i].req;
            if (!r) continue;
            free_slot(s, i);
            req_finish(s, r, QW_FINISH_CANCEL, err.msg);
        }
        return 1;
    }
    double t1 = qw_now();

    /* Advance positions for every token that went in (rejected drafts are
     * taken back below). */
    for (int k = 0; k < n; k++) s->slots[s->b_slot[k]].n_past++;

    /* Prompt logprobs: row k of a chunk predicts the prompt token after it. */
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        for (int k = 0; k < sl->pn; k++) {
            int pos = sl->ppos0 + k;
            if (pos + 1 < sl->req->n_prompt)
                logprob_record(ctx_logits(s->ctx, sl->prow0 + k), s->vocab, sl->req->toks[pos + 1],
                               sl->req->top_logprobs, &sl->req->plp[pos + 1]);
        }
    }

    /* Sample every slot with rows; slots are independent (own sampler, own
     * logits rows, own history), so the pool's threads share them. */
    if (s->n_ent > 1 && pool_threads(s->pool) > 1) pool_run(s->pool, sample_slots, s);
    else sample_slots(s, 0, 1);

    int n_generated = 0, n_accepted = 0;
    for (int e = 0; e < s->n_ent; e++) {
        int i = s->ent_slot[e];
        slot *sl = &s->slots[i];
        qw_req *r = sl->req;
        /* The entry fed positions base .. base + n_draft; the cache now
         * holds the decode token and the n_out - 1 accepted drafts. */
        if (r->dead_end) {
            free_slot(s, i);
            req_finish(s, r, QW_FINISH_STOP, "the grammar allows no token here (no token of the vocabulary continues it)");
            continue;
        }
        int base = sl->n_past - 1 - sl->n_draft;
        int accepted = sl->n_out - 1;
        if (!sl->prefilling) {
            sl->n_past = base + sl->n_out;
            drafter_feedback(&r->drafter, sl->n_draft, accepted);
            n_drafted += sl->n_draft;
            n_accepted += accepted;
            if (sl->n_draft > 0) {
                pthread_mutex_lock(&r->mu);
                r->st.n_drafted += sl->n_draft;
                r->st.n_accepted += accepted;
                pthread_mutex_unlock(&r->mu);
            }
        }
        sl->prefilling = 0;
        if (r->n_gen >= r->max_new) { /* max_new 0, prefilled for its prompt logprobs only */
            free_slot(s, i);
            req_finish(s, r, QW_FINISH_LENGTH, NULL);
            continue;
        }
        for (int j = 0; j < sl->n_out; j++) {
            int32_t t = s->row_tok[sl->row0 + j];
            /* a grammar that took EOS is done, whatever ignore_eos says */
            if ((!r->ignore_eos && is_eos(&s->model->cfg, t)) || (r->gm && gmatch_is_finished(r->gm))) {
                free_slot(s, i);
                req_finish(s, r, QW_FINISH_STOP, NULL);
                break;
            }
            n_generated++;
            /* The next step feeds the last token at position n_past; the
             * context is full once that reaches n_ctx (the token itself is
             * output but can no longer be fed). */
            if (push_token(s, r, t, base + 1 + j)) {
                free_slot(s, i);
                req_finish(s, r, QW_FINISH_LENGTH, NULL);
                break;
            }
        }
    }

    /* Prompt pages this step completed become readable by waiting slots. */
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].req) kv_slot_advance(s->kv, i, s->slots[i].n_past);
    qw_kv_stats ks;
    kv_stats(s->kv, &ks);

    pthread_mutex_lock(&s->mu);
    s->m.prefill_tokens_total += (uint64_t)n_prefill;
    s->m.kv_pages_used = ks.pages_used;
    s->m.kv_pages_cached = ks.pages_cached;
    s->m.kv_bytes = ks.bytes;
    s->m.kv_page_bytes = ks.page_bytes;
    s->m.kv_evictions = ks.evictions - s->evictions0;
    s->m.steps++;
    s->m.busy_s += t1 - t0;
    s->m.gen_tokens_total += (uint64_t)n_generated;
    s->m.draft_tokens_total += (uint64_t)n_drafted;
    s->m.accepted_draft_tokens_total += (uint64_t)n_accepted;
    /* Decode throughput over a decaying window of recent steps that decoded. */
    if (n_decode > 0) {
        s->tps_tokens = s->tps_tokens * 0.9 + n_generated;
        s->tps_time = s->tps_time * 0.9 + (t1 - t0);
        s->m.decode_tps = s->tps_time > 0 ? s->tps_tokens / s->tps_time : 0;
    }
    s->m.active_slots = s->n_active;
    pthread_mutex_unlock(&s->mu);
    return 1;
}

static void *engine_main(void *arg) {
    qw_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->quit && s->n_active == 0 && s->q_len == 0) {
            pthread_cond_broadcast(&s->idle_cv);
            pthread_cond_wait(&s->cv, &s->mu);
        }
        int quit = s->quit;
        pthread_mutex_unlock(&s->mu);
        if (quit) break;
        step(s);
    }
    /* Finish whatever is left (cancel). */
    pthread_mutex_lock(&s->mu);
    s->cancel_all = 1;
    pthread_mutex_unlock(&s->mu);
    step(s);
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

qw_sched *sched_create(qw_ctx *ctx, qw_pool *pool, const qw_sched_params *p, qw_err *err) {
    if (!ctx || !p || p->n_slots < 1 || p->n_slots > ctx_n_slots(ctx) || p->queue_cap < 0) {
        qw_errf(err, "sched_create: n_slots %d must be in [1, %d], queue %d >= 0", p ? p->n_slots : 0,
                ctx ? ctx_n_slots(ctx) : 0, p ? p->queue_cap : 0);
        return NULL;
    }
    qw_sched *s = calloc(1, sizeof *s);
    if (!s) {
        qw_errf(err, "sched_create: out of memory");
        return NULL;
    }
    s->ctx = ctx;
    s->kv = ctx_kv(ctx);
    kv_set_cache_budget(s->kv, p->cache_bytes > 0 ? p->cache_bytes : 0);
    qw_kv_stats ks;
    kv_stats(s->kv, &ks);
    s->evictions0 = ks.evictions;
    s->pool = pool;
    s->model = ctx_model(ctx);
    s->n_slots = p->n_slots;
    s->n_ctx = ctx_n_ctx(ctx);
    s->max_batch = ctx_max_batch(ctx);
    s->vocab = s->model->cfg.vocab;
    s->queue_cap = p->queue_cap;
    s->prefill_chunk = p->prefill_chunk > 0 ? p->prefill_chunk : 256;
    s->spec_k = p->spec_k > 0 ? p->spec_k : 0;
    s->accepting = 1;
    s->m.n_slots = s->n_slots;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    int mb = s->max_batch;
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->b_tok = malloc((size_t)mb * sizeof(int32_t));
    s->b_pos = malloc((size_t)mb * sizeof(int32_t));
    s->b_slot = malloc((size_t)mb * sizeof(int32_t));
    s->b_want = malloc((size_t)mb);
    s->ent_slot = malloc((size_t)s->n_slots * sizeof(int));
    s->row_tok = malloc((size_t)mb * sizeof(int32_t));
    if (!s->slots || !s->b_tok || !s->b_pos || !s->b_slot || !s->b_want || !s->ent_slot || !s->row_tok) {
        qw_errf(err, "sched_create: out of memory");
        sched_free(s);
        return NULL;
    }
    if (p->manual) {
        s->manual = 1;
        return s;
    }
    if (pthread_create(&s->thread, NULL, engine_main, s) != 0) {
        qw_errf(err, "sched_create: cannot start the engine thread");
        sched_free(s);
        return NULL;
    }
    s->thread_started = 1;
    return s;
}

static void timespec_in(struct timespec *ts, double sec) {
    clock_gettime(CLOCK_REALTIME, ts);
    long long ns = ts->tv_nsec + (long long)(sec * 1e9);
    ts->tv_sec += ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
}

static int has_work(qw_sched *s) {
    pthread_mutex_lock(&s->mu);
    int w = s->n_active > 0 || s->q_len > 0;
    pthread_mutex_unlock(&s->mu);
    return w;
}

/* sched_stop in manual mode: the caller's thread plays the engine thread. */
static void stop_manual(qw_sched *s, double grace_s) {
    double end = qw_now() + grace_s;
    while (grace_s > 0 && has_work(s) && qw_now() < end)
        if (!step(s)) break;
    pthread_mutex_lock(&s->mu);
    s->cancel_all = 1;
    pthread_mutex_unlock(&s->mu);
    step(s);
    pthread_mutex_lock(&s->mu);
    s->stopped = 1;
    pthread_mutex_unlock(&s->mu);
}

int sched_step(qw_sched *s) {
    pthread_mutex_lock(&s->mu);
    int ok = s->manual && !s->stopped;
    pthread_mutex_unlock(&s->mu);
    return ok ? step(s) : -1;
}

void sched_stop(qw_sched *s, double grace_s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    if (s->manual && !s->stopped) {
        s->accepting = 0;
        pthread_mutex_unlock(&s->mu);
        stop_manual(s, grace_s);
        return;
    }
    if (s->stopped || !s->thread_started) {
        s->stopped = 1;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->accepting = 0;
    if (grace_s > 0) {
        double end = qw_now() + grace_s;
        while ((s->n_active > 0 || s->q_len > 0) && qw_now() < end) {
            struct timespec ts;
            timespec_in(&ts, 0.05);
            pthread_cond_timedwait(&s->idle_cv, &s->mu, &ts);
        }
    }
    s->cancel_all = 1;
    s->quit = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->mu);
    s->stopped = 1;
    pthread_mutex_unlock(&s->mu);
}

void sched_free(qw_sched *s) {
    if (!s) return;
    sched_stop(s, 0);
    /* the prefix cache lives as long as its scheduler */
    kv_set_cache_budget(s->kv, 0);
    free(s->slots);
    free(s->b_tok);
    free(s->b_pos);
    free(s->b_slot);
    free(s->b_want);
    free(s->ent_slot);
    free(s->row_tok);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->idle_cv);
    free(s);
}

int sched_submit(qw_sched *s, const qw_req_params *p, qw_req **out, qw_err *err) {
    *out = NULL;
    if (!p->prompt || p->n_prompt < 1) {
        qw_errf(err, "the prompt is empty");
        return QW_SCHED_EINVAL;
    }
    if (p->n_prompt >= s->n_ctx) {
        qw_errf(err, "the prompt has %d tokens; the context holds %d (prompt plus at least one generated token)",
                p->n_prompt, s->n_ctx);
        return QW_SCHED_EINVAL;
    }
    if (p->max_new < 0) {
        qw_errf(err, "max_tokens %d must be >= 0", p->max_new);
        return QW_SCHED_EINVAL;
    }
    for (int i = 0; i < p->n_prompt; i++) {
        if (p->prompt[i] < 0 || p->prompt[i] >= s->vocab) {
            qw_errf(err, "token id %ld at index %d is out of range [0, %d)", (long)p->prompt[i], i, s->vocab);
            return QW_SCHED_EINVAL;
        }
    }
    if (!p->grammar != !p->gvocab) {
        qw_errf(err, "a grammar needs its vocabulary (gvocab) and the other way round");
        return QW_SCHED_EINVAL;
    }
    if (p->gvocab && gvocab_n_vocab(p->gvocab) != s->vocab) {
        qw_errf(err, "the grammar vocabulary has %d tokens, the model %d", gvocab_n_vocab(p->gvocab), s->vocab);
        return QW_SCHED_EINVAL;
    }
    int max_new = p->max_new;
    if (max_new > s->n_ctx - p->n_prompt) max_new = s->n_ctx - p->n_prompt;

    qw_req *r = calloc(1, sizeof *r);
    if (!r) {
        qw_errf(err, "out of memory");
        return QW_SCHED_ENOMEM;
    }
    r->toks = malloc(((size_t)p->n_prompt + (size_t)max_new + 1) * sizeof(int32_t));
    r->sampler = sampler_create(&p->sampling, s->vocab);
    if (p->grammar) r->gm = gmatch_create(p->grammar, p->gvocab);
    int lp_ok = 1;
    if (p->logprobs || p->prompt_logprobs) {
        int k = p->top_logprobs;
        r->top_logprobs = k < 0 ? 0 : k > QW_MAX_TOP_LOGPROBS ? QW_MAX_TOP_LOGPROBS : k;
        if (p->logprobs) {
            r->lp = malloc(((size_t)max_new + 1) * sizeof *r->lp);
            r->lp_logits = malloc((size_t)s->vocab * sizeof(float));
            lp_ok = r->lp && r->lp_logits;
        }
        if (p->prompt_logprobs) lp_ok = lp_ok && (r->plp = calloc((size_t)p->n_prompt, sizeof *r->plp));
    }
    if (!r->toks || !r->sampler || !lp_ok || (p->grammar && !r->gm)) {
        gmatch_free(r->gm);
        sampler_free(r->sampler);
        free(r->toks);
        free(r->lp);
        free(r->plp);
        free(r->lp_logits);
        free(r);
        qw_errf(err, "out of memory");
        return QW_SCHED_ENOMEM;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    atomic_init(&r->refs, 2);

    atomic_init(&r->cancel, 0);
    memcpy(r->toks, p->prompt, (size_t)p->n_prompt * sizeof(int32_t));
    r->n_prompt = p->n_prompt;
    r->max_new = max_new;
    r->ignore_eos = p->ignore_eos;
    r->sampling = p->sampling;
    /* No drafts under a grammar: a draft's row would need the matcher state
     * after the earlier drafts (simplest correct answer; output unchanged). */
    drafter_init(&r->drafter, p->no_spec || p->grammar ? 0 : s->spec_k);
    r->st.n_prompt = p->n_prompt;
    r->t_submit = qw_now();

    pthread_mutex_lock(&s->mu);
    int status = QW_SCHED_OK;
    if (!s->accepting) {
        status = QW_SCHED_ESHUTDOWN;
        qw_errf(err, "the server is shutting down");
    } else {
        int free_slots = s->n_slots - s->n_active;
        /* Requests waiting beyond the free slots count against the queue. */
        if (s->q_len - free_slots >= s->queue_cap) {
            status = QW_SCHED_EFULL;
            s->m.requests_rejected++;
            qw_errf(err, "the server is busy: %d requests are waiting (queue limit %d)", s->q_len,
                    s->queue_cap);
        }
    }
    if (status != QW_SCHED_OK) {
        pthread_mutex_unlock(&s->mu);
        atomic_store(&r->refs, 1);
        req_unref(r);
        return status;
    }
    if (s->q_tail) s->q_tail->next = r;
    else s->q_head = r;
    s->q_tail = r;
    s->q_len++;
    s->m.requests_total++;
    s->m.prompt_tokens_total += (uint64_t)p->n_prompt;
    s->m.queue_depth = s->q_len;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    *out = r;
    return QW_SCHED_OK;
}

int sched_req_wait(qw_req *r, int *cursor, const int32_t **toks, double timeout_s) {
    pthread_mutex_lock(&r->mu);
    if (timeout_s < 0) {
        while (r->n_gen <= *cursor && !r->done) pthread_cond_wait(&r->cv, &r->mu);
    } else if (r->n_gen <= *cursor && !r->done && timeout_s > 0) {
        struct timespec ts;
        timespec_in(&ts, timeout_s);
        while (r->n_gen <= *cursor && !r->done) {
            if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT) break;
        }
    }
    int n = r->n_gen - *cursor;
    if (n < 0) n = 0;
    *toks = r->toks + r->n_prompt + *cursor;
    *cursor += n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int sched_req_done(qw_req *r) {
    pthread_mutex_lock(&r->mu);
    int d = r->done;
    pthread_mutex_unlock(&r->mu);
    return d;
}

void sched_req_cancel(qw_req *r) { atomic_store(&r->cancel, 1); }

void sched_req_stats(qw_req *r, qw_req_stats *st) {
    pthread_mutex_lock(&r->mu);
    *st = r->st;
    st->n_gen = r->n_gen;
    double now = r->done ? r->t_end : qw_now();
    st->total_s = now - r->t_submit;
    if (r->n_gen > 0) st->decode_s = now - r->t_first;
    pthread_mutex_unlock(&r->mu);
}

const qw_logprob *sched_req_logprobs(qw_req *r, int prompt) { return prompt ? r->plp : r->lp; }

void sched_req_release(qw_req *r) {
    if (!r) return;
    atomic_store(&r->cancel, 1);
    req_unref(r);
}

void sched_metrics(qw_sched *s, qw_sched_metrics *m) {
    pthread_mutex_lock(&s->mu);
    *m = s->m;
    m->queue_depth = s->q_len;
    m->active_slots = s->n_active;
    pthread_mutex_unlock(&s->mu);
}

const qw_model *sched_model(const qw_sched *s) { return s->model; }
int sched_n_ctx(const qw_sched *s) { return s->n_ctx; }
