/* sampler.c - choosing the next token from logits (see sampler.h).
 *
 * Follows transformers' logits processors in their order:
 *   RepetitionPenaltyLogitsProcessor (each distinct token of the history once:
 *   logit > 0 ? logit / r : logit * r), then OpenAI's presence / frequency
 *   penalties (logit -= presence + frequency * count), then temperature,
 *   TopKLogitsWarper, TopPLogitsWarper (keep the smallest set of most
 *   probable tokens whose mass reaches top_p, at least one), MinPLogitsWarper
 *   (keep p >= min_p * p_max), and a draw from the renormalised support.
 * Temperature 0 is greedy: argmax after the penalties (the first index on
 * ties, as torch.argmax).
 *
 * Every buffer is allocated in sampler_create(); sampler_sample() does not
 * allocate. The RNG is xoshiro256** seeded through splitmix64.
 */
#include "sample/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct qw_sampler {
    qw_sampling p;
    int vocab;
    uint64_t rng[4];
    int32_t *idx;   /* [vocab] candidate token ids */
    float *prob;    /* [vocab] scratch: logits then probabilities, by token id */
    int32_t *count; /* [vocab] history counts, kept all-zero between calls */
};

qw_sampling sampling_default(void) {
    qw_sampling s;
    memset(&s, 0, sizeof s);
    s.temperature = 0.0f;
    s.top_k = 0;
    s.top_p = 1.0f;
    s.min_p = 0.0f;
    s.repeat_penalty = 1.0f;
    s.repeat_last_n = 0;
    s.presence_penalty = 0.0f;
    s.frequency_penalty = 0.0f;
    s.seed = 0;
    return s;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform double in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

qw_sampler *sampler_create(const qw_sampling *sp, int vocab) {
    if (!sp || vocab <= 0) return NULL;
    qw_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *sp;
    s->vocab = vocab;
    s->idx = malloc((size_t)vocab * sizeof *s->idx);
    s->prob = malloc((size_t)vocab * sizeof *s->prob);
    s->count = calloc((size_t)vocab, sizeof *s->count);
    if (!s->idx || !s->prob || !s->count) {
        sampler_free(s);
        return NULL;
    }
    uint64_t x = sp->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    return s;
}

void sampler_free(qw_sampler *s) {
    if (!s) return;
    free(s->idx);
    free(s->prob);
    free(s->count);
    free(s);
}

static void apply_penalties(qw_sampler *s, float *logits, const int32_t *history, int n_history) {
    const qw_sampling *p = &s->p;
    int rep = p->repeat_penalty != 1.0f && p->repeat_penalty > 0.0f;
    int pres = p->presence_penalty != 0.0f, freq = p->frequency_penalty != 0.0f;
    if (!history || n_history <= 0 || (!rep && !pres && !freq)) return;
    int start = 0;
    if (p->repeat_last_n > 0 && n_history > p->repeat_last_n) start = n_history - p->repeat_last_n;
    for (int i = start; i < n_history; i++) {
        int32_t t = history[i];
        if (t >= 0 && t < s->vocab) s->count[t]++;
    }
    /* Each distinct token once; its count is reset so the array stays zero. */
    for (int i = start; i < n_history; i++) {
        int32_t t = history[i];
        if (t < 0 || t >= s->vocab || s->count[t] == 0) continue;
        float l = logits[t];
        if (rep) l = l > 0.0f ? l / p->repeat_penalty : l * p->repeat_penalty;
        if (pres) l -= p->presence_penalty;
        if (freq) l -= p->frequency_penalty * (float)s->count[t];
        logits[t] = l;
        s->count[t] = 0;
    }
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    float bv = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > bv || (isnan(bv) && !isnan(x[i]))) {
            bv = x[i];
            best = i;
        }
    return best;
}

/* Greater probability first; equal probabilities by smaller id (stable). */
static int cand_before(const float *prob, int32_t a, int32_t b) {
    return prob[a] > prob[b] || (prob[a] == prob[b] && a < b);
}

/* Rearranges idx[0..n) so that its first k entries are the k most probable,
 * in descending order. Quickselect then insertion/heap-free sort of k. */
static void select_top(int32_t *idx, int n, int k, const float *prob) {
    if (k >= n) k = n;
    int lo = 0, hi = n - 1;
    while (hi > lo && k < n) {
        /* median of three pivot */
        int mid = lo + (hi - lo) / 2;
        int32_t a = idx[lo], b = idx[mid], c = idx[hi], pv;
        if (cand_before(prob, a, b)) {
            if (cand_before(prob, b, c)) pv = b;
            else pv = cand_before(prob, a, c) ? c : a;
        } else {
            if (cand_before(prob, a, c)) pv = a;
            else pv = cand_before(prob, b, c) ? c : b;
        }
        int i = lo, j = hi;
        while (i <= j) {
            while (cand_before(prob, idx[i], pv)) i++;
            while (cand_before(prob, pv, idx[j])) j--;
            if (i <= j) {
                int32_t t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
                i++;
                j--;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
    /* sort the first k: shell sort (k is small in practice; correct for any k) */
    static const int gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        int gap = gaps[g];
        for (int i = gap; i < k; i++) {
            int32_t t = idx[i];
            int j = i;
            while (j >= gap && cand_before(prob, t, idx[j - gap])) {
                idx[j] = idx[j - gap];
                j -= gap;
            }
            idx[j] = t;
        }
    }
}

int32_t sampler_sample(qw_sampler *s, float *logits, const int32_t *history, int n_history) {
    const qw_sampling *p = &s->p;
    int V = s->vocab;
    apply_penalties(s, logits, history, n_history);
    if (!(p->temperature > 0.0f)) return argmax(logits, V);

    /* softmax(logits / T) over all tokens, by id */
    float inv_t = 1.0f / p->temperature;
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) {
        float l = logits[i] * inv_t;
        s->prob[i] = l;
        if (l > mx) mx = l;
    }
    if (!isfinite(mx)) return argmax(logits, V);
    double total = 0.0;
    for (int i = 0; i < V; i++) {
        float e = expf(s->prob[i] - mx);
        s->prob[i] = e;
        total += e;
    }

    int n = V;
    for (int i = 0; i < V; i++) s->idx[i] = i;
    int sorted = 0; /* idx[0..sorted) are in descending order */

    if (p->top_k > 0 && p->top_k < n) {
        select_top(s->idx, n, p->top_k, s->prob);
        n = p->top_k;
        sorted = n;
        total = 0.0;
        for (int i = 0; i < n; i++) total += s->prob[s->idx[i]];
    }
    if (p->top_p < 1.0f) {
        /* Grow the sorted prefix until it holds top_p of the mass, so we
         * never sort the whole vocabulary for a peaked distribution. */
        double target = (double)p->top_p * total, cum;
        int k = sorted ? sorted : (n < 64 ? n : 64), cut = -1;
        for (;;) {
            if (k > sorted) {
                select_top(s->idx, n, k, s->prob);
                sorted = k;
            }
            cum = 0.0;
            for (int i = 0; i < sorted; i++) {
                cum += s->prob[s->idx[i]];
                if (cum >= target) {
                    cut = i + 1;
                    break;
                }
            }
            if (cut > 0 || sorted >= n) break;
            k = sorted * 4 < n ? sorted * 4 : n;
        }
        if (cut < 0) cut = n;
        if (cut < 1) cut = 1;
        n = cut;
        total = 0.0;
        for (int i = 0; i < n; i++) total += s->prob[s->idx[i]];
    }
    if (p->min_p > 0.0f) {
        float pmax = 0.0f;
        for (int i = 0; i < n; i++)
            if (s->prob[s->idx[i]] > pmax) pmax = s->prob[s->idx[i]];
        float thr = p->min_p * pmax;
        int m = 0;
        total = 0.0;
        for (int i = 0; i < n; i++) {
            int32_t t = s->idx[i];
            if (s->prob[t] >= thr) {
                s->idx[m++] = t;
                total += s->prob[t];
            }
        }
        n = m > 0 ? m : 1;
    }

    double r = rng_uniform(s->rng) * total, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->prob[s->idx[i]];
        if (r < acc) return s->idx[i];
    }
    return s->idx[n - 1];
}
