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

typedef struct cand {
    float v; /* logit / T, later probability */
    int32_t id;
} cand;

/* top-p buckets: half a nat each, below the most probable token */
#define SAMPLER_BUCKETS 96

struct qw_sampler {
    qw_sampling p;
    int vocab;
    uint64_t rng[4];
    cand *cand;  /* [vocab] candidates: (logit / T or probability, id) */
    cand *cand2; /* [vocab] scratch for the top-p crossing bucket */
    uint8_t *bucket;    /* [vocab] top-p bucket of each candidate */
    int32_t *count;     /* [vocab] history counts, kept all-zero between calls */
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
    s->cand = malloc((size_t)vocab * sizeof *s->cand);
    s->cand2 = malloc((size_t)vocab * sizeof *s->cand2);
    s->bucket = malloc((size_t)vocab);
    s->count = calloc((size_t)vocab, sizeof *s->count);
    if (!s->cand || !s->cand2 || !s->bucket || !s->count) {
        sampler_free(s);
        return NULL;
    }
    uint64_t x = sp->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    return s;
}

void sampler_free(qw_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->cand2);
    free(s->bucket);
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


/* a ranks above b: larger value, then smaller id (torch's stable order) */
static int above(const cand *a, const cand *b) { return a->v > b->v || (a->v == b->v && a->id < b->id); }

/* min-heap (lowest-ranked at the root) of k candidates */
static void heap_down(cand *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && above(&h[m], &h[l])) m = l;
        if (r < n && above(&h[m], &h[r])) m = r;
        if (m == i) return;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* In-place heap sort into descending rank (no allocation, unlike some
 * qsort implementations). */
static void sort_desc(cand *a, int n) {
    for (int i = n / 2 - 1; i >= 0; i--) heap_down(a, n, i);
    for (int end = n - 1; end > 0; end--) {
        cand t = a[0];
        a[0] = a[end];
        a[end] = t;
        heap_down(a, end, 0);
    }
}

/* The k highest of logits * inv_t into c[0..k), in descending order. */
static void top_k_select(cand *c, const float *logits, int V, int k, float inv_t) {
    for (int i = 0; i < k; i++) c[i] = (cand){logits[i] * inv_t, i};
    for (int i = k / 2 - 1; i >= 0; i--) heap_down(c, k, i);
    for (int i = k; i < V; i++) {
        cand x = {logits[i] * inv_t, i};
        if (above(&x, &c[0])) {
            c[0] = x;
            heap_down(c, k, 0);
        }
    }
    sort_desc(c, k);
}

int32_t sampler_sample(qw_sampler *s, float *logits, const int32_t *history, int n_history) {
    const qw_sampling *p = &s->p;
    int V = s->vocab;
    apply_penalties(s, logits, history, n_history);
    if (!(p->temperature > 0.0f)) return argmax(logits, V);

    float inv_t = 1.0f / p->temperature;
    cand *c = s->cand;
    int n = 0, sorted = 0;
    float mx;
    if (p->top_k > 0 && p->top_k < V) {
        top_k_select(c, logits, V, p->top_k, inv_t);
        n = p->top_k;
        sorted = 1;
        mx = c[0].v;
    } else {
        mx = -INFINITY;
        for (int i = 0; i < V; i++) {
            float l = logits[i] * inv_t;
            if (l > mx) mx = l;
        }
        /* Tokens more than 40 nats below the top hold at most
         * vocab * e^-40 (< 1e-12 for 152k tokens) of the mass together:
         * leaving them out changes no top-p cut and saves most of the expf
         * calls on a real distribution. With min-p alone the cut is the
         * min-p threshold itself (p >= min_p * p_max <=> l >= max + ln min_p). */
        float cut = mx - 40.0f;
        if (p->min_p > 0.0f && !(p->top_p < 1.0f)) {
            float mp = mx + logf(p->min_p);
            if (mp > cut) cut = mp;
        }
        for (int i = 0; i < V; i++) {
            float l = logits[i] * inv_t;
            if (l >= cut) c[n++] = (cand){l, i};
        }
    }
    if (!isfinite(mx) || n == 0) return argmax(logits, V);
    int bucketed = p->top_p < 1.0f && !sorted;
    double total = 0.0;
    for (int j = 0; j < n; j++) {
        float d = mx - c[j].v;
        if (bucketed) {
            int b = (int)(d * 2.0f);
            s->bucket[j] = (uint8_t)(b < SAMPLER_BUCKETS - 1 ? b : SAMPLER_BUCKETS - 1);
        }
        c[j].v = expf(-d);
        total += c[j].v;
    }

    if (p->top_p < 1.0f) {
        /* Keep the most probable tokens until their mass reaches top_p.
         * Unsorted: bucket the candidates by probability (half-nat steps
         * below the max), take whole buckets above the one where the mass
         * crosses top_p, and sort only that bucket. */
        double target = (double)p->top_p * total, cum = 0.0;
        int keep = n;
        if (sorted) {
            for (int j = 0; j < n; j++) {
                cum += c[j].v;
                if (cum >= target) {
                    keep = j + 1;
                    break;
                }
            }
        } else {
            double bm[SAMPLER_BUCKETS] = {0};
            for (int j = 0; j < n; j++) bm[s->bucket[j]] += c[j].v;
            int bc = 0;
            for (; bc < SAMPLER_BUCKETS - 1; bc++) {
                if (cum + bm[bc] >= target) break;
                cum += bm[bc];
            }
            /* buckets above bc stay in place (compacted); bucket bc goes to
             * the scratch area, sorted, and is taken until the mass is reached */
            int m = 0, nb = 0;
            cand *x = s->cand2;
            for (int j = 0; j < n; j++) {
                if (s->bucket[j] < bc) c[m++] = c[j];
                else if (s->bucket[j] == bc) x[nb++] = c[j];
            }
            sort_desc(x, nb);
            for (int j = 0; j < nb; j++) {
                c[m++] = x[j];
                cum += x[j].v;
                if (cum >= target) break;
            }
            keep = m;
        }
        if (keep < 1) keep = 1;
        n = keep;
        total = 0.0;
        for (int j = 0; j < n; j++) total += c[j].v;
    }
    if (p->min_p > 0.0f) {
        float pmax = 0.0f;
        for (int j = 0; j < n; j++)
            if (c[j].v > pmax) pmax = c[j].v;
        float thr = p->min_p * pmax;
        int m = 0;
        total = 0.0;
        for (int j = 0; j < n; j++)
            if (c[j].v >= thr) {
                c[m++] = c[j];
                total += c[j].v;
            }
        n = m > 0 ? m : 1;
    }

    double r = rng_uniform(s->rng) * total, acc = 0.0;
    for (int j = 0; j < n; j++) {
        acc += c[j].v;
        if (r < acc) return c[j].id;
    }
    return c[n - 1].id;
}
