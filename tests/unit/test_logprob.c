/* test_logprob.c - logprob records (src/sample/logprob.h): the chosen
 * token's log-softmax and the top-k against a naive double computation on
 * random logits, the order of ties (lower id first), top_k 0 and the clamp
 * at QW_MAX_TOP_LOGPROBS, and a vocabulary with one huge logit (no
 * overflow: the sum is max-subtracted). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sample/logprob.h"
#include "test.h"
#include "test_rng.h"

#define V 5000

static double naive(const float *l, int n, int t) {
    double mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (l[i] > mx) mx = l[i];
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)l[i] - mx);
    return (double)l[t] - mx - log(s);
}

int main(void) {
    static float l[V];
    for (int i = 0; i < V; i++) l[i] = frand() * 8.0f;
    qw_logprob r;
    logprob_record(l, V, 17, 20, &r);
    CHECK(r.token == 17 && fabs(r.logprob - naive(l, V, 17)) < 1e-5, "chosen: %g vs %g", r.logprob, naive(l, V, 17));
    CHECK(r.n_top == 20, "20 alternatives");
    int sorted = 1, right = 1;
    for (int k = 0; k < r.n_top; k++) {
        if (k && r.top_lp[k] > r.top_lp[k - 1]) sorted = 0;
        if (fabs(r.top_lp[k] - naive(l, V, r.top_id[k])) > 1e-5) right = 0;
        /* nothing outside the list beats its last entry */
    }
    int beaten = 0;
    for (int i = 0; i < V; i++) {
        int in = 0;
        for (int k = 0; k < r.n_top; k++) in |= r.top_id[k] == i;
        if (!in && l[i] > l[r.top_id[r.n_top - 1]]) beaten = 1;
    }
    CHECK(sorted && right && !beaten, "top 20: sorted %d, values %d, complete %d", sorted, right, !beaten);

    logprob_record(l, V, 3, 0, &r);
    CHECK(r.n_top == 0, "top_k 0: none");
    logprob_record(l, V, 3, 99, &r);
    CHECK(r.n_top == QW_MAX_TOP_LOGPROBS, "top_k clamped to %d", QW_MAX_TOP_LOGPROBS);

    float tie[6] = {1, 5, 5, 0, 5, -1};
    logprob_record(tie, 6, 0, 3, &r);
    CHECK(r.top_id[0] == 1 && r.top_id[1] == 2 && r.top_id[2] == 4, "ties: lower id first (%d %d %d)", r.top_id[0],
          r.top_id[1], r.top_id[2]);
    CHECK(fabs(r.top_lp[0] - log(1.0 / 3.0 * (1.0 / (1.0 + (exp(-4.0) + exp(-5.0) + exp(-6.0)) / 3.0)))) < 1e-5,
          "three equal logits: log(1/3) less the rest (%g)", r.top_lp[0]);

    l[100] = 1e30f; /* exp() of the raw value would overflow */
    logprob_record(l, V, 100, 1, &r);
    CHECK(r.logprob == 0.0f && r.top_id[0] == 100 && isfinite(r.top_lp[0]), "a huge logit: logprob 0, finite");
    return test_summary();
}
