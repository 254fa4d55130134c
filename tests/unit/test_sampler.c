/* test_sampler.c - greedy, top-k/top-p/min-p supports, seeds, penalties. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample/sampler.h"
#include "test.h"

#define V 1000

static uint64_t lcg = 12345;
static float frand(void) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((lcg >> 40) / (double)(1 << 24)) * 8.0f - 4.0f;
}

/* Draw `n` tokens from logits lg[nv] with settings s; counts[nv] filled. */
static void histogram(const qw_sampling *s, const float *lg, int nv, int n, int *counts) {
    qw_sampler *sm = sampler_create(s, nv);
    float *tmp = malloc((size_t)nv * sizeof *tmp);
    memset(counts, 0, (size_t)nv * sizeof *counts);
    for (int i = 0; i < n; i++) {
        memcpy(tmp, lg, (size_t)nv * sizeof *tmp);
        int32_t t = sampler_sample(sm, tmp, NULL, 0);
        if (t >= 0 && t < nv) counts[t]++;
    }
    free(tmp);
    sampler_free(sm);
}

static int32_t pick(const qw_sampling *s, const float *lg, int nv, const int32_t *hist, int nh) {
    qw_sampler *sm = sampler_create(s, nv);
    float tmp[16];
    memcpy(tmp, lg, (size_t)nv * sizeof *tmp);
    int32_t t = sampler_sample(sm, tmp, hist, nh);
    sampler_free(sm);
    return t;
}

int main(void) {
    qw_sampling d = sampling_default();
    CHECK(d.temperature == 0 && d.top_k == 0 && d.top_p == 1 && d.min_p == 0 && d.repeat_penalty == 1 &&
              d.presence_penalty == 0 && d.frequency_penalty == 0,
          "sampling_default is not greedy with filters off");
    CHECK(sampler_create(&d, 0) == NULL, "vocab 0 accepted");

    /* greedy = argmax */
    static float lg[V], tmp[V];
    qw_sampler *g = sampler_create(&d, V);
    for (int r = 0; r < 20; r++) {
        for (int i = 0; i < V; i++) lg[i] = frand();
        int best = 0;
        for (int i = 1; i < V; i++)
            if (lg[i] > lg[best]) best = i;
        memcpy(tmp, lg, sizeof lg);
        CHECK(sampler_sample(g, tmp, NULL, 0) == best, "greedy is not argmax (round %d)", r);
    }
    sampler_free(g);

    /* top-k = 1 with temperature is greedy, whatever the seed */
    for (int r = 0; r < 10; r++) {
        qw_sampling s = d;
        s.temperature = 1.5f;
        s.top_k = 1;
        s.seed = (uint64_t)r;
        for (int i = 0; i < V; i++) lg[i] = frand();
        int best = 0;
        for (int i = 1; i < V; i++)
            if (lg[i] > lg[best]) best = i;
        qw_sampler *sm = sampler_create(&s, V);
        memcpy(tmp, lg, sizeof lg);
        CHECK(sampler_sample(sm, tmp, NULL, 0) == best, "top-k 1 differs from greedy (seed %d)", r);
        sampler_free(sm);
    }

    /* seeds: same seed same tokens; another seed other tokens */
    for (int i = 0; i < V; i++) lg[i] = 0.01f * (float)(i % 7);
    qw_sampling s = d;
    s.temperature = 1.0f;
    s.seed = 42;
    int32_t a[64], b[64], c[64];
    qw_sampler *s1 = sampler_create(&s, V), *s2 = sampler_create(&s, V);
    s.seed = 43;
    qw_sampler *s3 = sampler_create(&s, V);
    for (int i = 0; i < 64; i++) {
        memcpy(tmp, lg, sizeof lg);
        a[i] = sampler_sample(s1, tmp, NULL, 0);
        memcpy(tmp, lg, sizeof lg);
        b[i] = sampler_sample(s2, tmp, NULL, 0);
        memcpy(tmp, lg, sizeof lg);
        c[i] = sampler_sample(s3, tmp, NULL, 0);
    }
    CHECK(!memcmp(a, b, sizeof a), "same seed gave different tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "different seeds gave the same 64 tokens");
    sampler_free(s1);
    sampler_free(s2);
    sampler_free(s3);

    /* supports: p = [0.5, 0.3, 0.1, 0.05, 0.05] */
    float lp[5] = {logf(0.5f), logf(0.3f), logf(0.1f), logf(0.05f), logf(0.05f)};
    int cnt[5];
    s = d;
    s.temperature = 1.0f;
    s.seed = 7;
    histogram(&s, lp, 5, 4000, cnt);
    CHECK(cnt[0] > 1800 && cnt[0] < 2200 && cnt[1] > 1050 && cnt[1] < 1350 && cnt[3] > 100,
          "plain sampling off its distribution: %d %d %d %d %d", cnt[0], cnt[1], cnt[2], cnt[3], cnt[4]);
    s.top_p = 0.75f;
    histogram(&s, lp, 5, 4000, cnt);
    CHECK(cnt[2] == 0 && cnt[3] == 0 && cnt[4] == 0 && cnt[0] > 0 && cnt[1] > 0, "top-p 0.75 support: %d %d %d %d %d",
          cnt[0], cnt[1], cnt[2], cnt[3], cnt[4]);
    /* renormalised to 5:3 */
    CHECK(fabs(cnt[0] / 4000.0 - 0.625) < 0.03, "top-p renormalisation: %d of 4000", cnt[0]);
    s.top_p = 0.85f;
    histogram(&s, lp, 5, 4000, cnt);
    CHECK(cnt[2] > 0 && cnt[3] == 0 && cnt[4] == 0, "top-p 0.85 support: %d %d %d %d %d", cnt[0], cnt[1], cnt[2],
          cnt[3], cnt[4]);
    s.top_p = 1.0f;
    s.min_p = 0.25f; /* threshold 0.125 */
    histogram(&s, lp, 5, 4000, cnt);
    CHECK(cnt[0] && cnt[1] && !cnt[2] && !cnt[3] && !cnt[4], "min-p 0.25 support: %d %d %d %d %d", cnt[0], cnt[1],
          cnt[2], cnt[3], cnt[4]);
    s.min_p = 0.15f; /* threshold 0.075 */
    histogram(&s, lp, 5, 4000, cnt);
    CHECK(cnt[0] && cnt[1] && cnt[2] && !cnt[3] && !cnt[4], "min-p 0.15 support: %d %d %d %d %d", cnt[0], cnt[1],
          cnt[2], cnt[3], cnt[4]);
    s.min_p = 0.0f;
    s.top_k = 2;
    histogram(&s, lp, 5, 4000, cnt);
    CHECK(cnt[0] && cnt[1] && !cnt[2] && !cnt[3] && !cnt[4], "top-k 2 support: %d %d %d %d %d", cnt[0], cnt[1],
          cnt[2], cnt[3], cnt[4]);
    /* low temperature sharpens: p(0) grows */
    s.top_k = 0;
    s.temperature = 0.25f;
    histogram(&s, lp, 5, 4000, cnt);
    CHECK(cnt[0] > 3400, "temperature 0.25: p(0) %d of 4000", cnt[0]);

    /* top-p over a large flat-ish vocabulary needs the growing sort */
    static int big[V];
    for (int i = 0; i < V; i++) lg[i] = (float)i * 0.002f;
    s = d;
    s.temperature = 1.0f;
    s.top_p = 0.5f;
    histogram(&s, lg, V, 3000, big);
    {
        /* the kept set is a top range: no token below the smallest kept one */
        int lo = V, n_kept = 0;
        for (int i = 0; i < V; i++)
            if (big[i]) {
                if (i < lo) lo = i;
                n_kept++;
            }
        double tot = 0, top = 0;
        for (int i = 0; i < V; i++) tot += exp(lg[i]);
        for (int i = lo; i < V; i++) top += exp(lg[i]);
        CHECK(lo > 300 && top / tot >= 0.5 && top / tot < 0.56, "top-p 0.5 kept from %d (mass %.3f)", lo, top / tot);
    }

    /* repetition penalty (transformers' rule) */
    float l2[3] = {2.0f, 1.9f, 0.0f};
    int32_t h0[1] = {0};
    s = d;
    CHECK(pick(&s, l2, 3, h0, 1) == 0, "no penalty: argmax 0");
    s.repeat_penalty = 1.2f; /* 2.0 / 1.2 = 1.67 < 1.9 */
    CHECK(pick(&s, l2, 3, h0, 1) == 1, "repetition penalty did not demote a positive logit");
    float l3[3] = {-1.0f, -1.1f, -5.0f}; /* -1 * 1.2 = -1.2 < -1.1 */
    CHECK(pick(&s, l3, 3, h0, 1) == 1, "repetition penalty did not demote a negative logit");
    s.repeat_penalty = 1.04f; /* 2.0 / 1.04 = 1.92 > 1.9 */
    CHECK(pick(&s, l2, 3, h0, 1) == 0, "small repetition penalty changed the choice");
    /* applied once per distinct token, not per occurrence */
    int32_t h000[3] = {0, 0, 0};
    CHECK(pick(&s, l2, 3, h000, 3) == 0, "repetition penalty applied per occurrence");
    /* window: only the last repeat_last_n tokens count */
    s.repeat_penalty = 1.2f;
    s.repeat_last_n = 2;
    int32_t hw[3] = {0, 2, 2};
    CHECK(pick(&s, l2, 3, hw, 3) == 0, "repeat_last_n window ignored");
    s = d;
    s.presence_penalty = 0.2f; /* 1.8 < 1.9 */
    CHECK(pick(&s, l2, 3, h0, 1) == 1, "presence penalty did not change the choice");
    s = d;
    s.frequency_penalty = 0.06f; /* once: 1.94 > 1.9; three times: 1.82 < 1.9 */
    CHECK(pick(&s, l2, 3, h0, 1) == 0, "frequency penalty once");
    CHECK(pick(&s, l2, 3, h000, 3) == 1, "frequency penalty does not grow with the count");
    /* the penalty state is clean between calls: same input, same output */
    s = d;
    s.repeat_penalty = 1.2f;
    qw_sampler *sp = sampler_create(&s, 3);
    float t1[3], t2[3];
    memcpy(t1, l2, sizeof t1);
    memcpy(t2, l2, sizeof t2);
    int32_t r1 = sampler_sample(sp, t1, h0, 1);
    int32_t r2 = sampler_sample(sp, t2, NULL, 0);
    CHECK(r1 == 1 && r2 == 0, "penalty state leaked between calls (%d %d)", r1, r2);
    /* out-of-range history ids are ignored, not a crash */
    int32_t hbad[2] = {-5, 99999};
    memcpy(t1, l2, sizeof t1);
    CHECK(sampler_sample(sp, t1, hbad, 2) == 0, "bad history ids");
    sampler_free(sp);
    return test_summary();
}
