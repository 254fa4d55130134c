/* logprob.c - log-softmax records for `logprobs` (logprob.h). */
#include "sample/logprob.h"

#include <math.h>

void logprob_record(const float *logits, int vocab, int32_t tok, int top_k, qw_logprob *out) {
    if (top_k > QW_MAX_TOP_LOGPROBS) top_k = QW_MAX_TOP_LOGPROBS;
    if (top_k < 0) top_k = 0;
    float mx = logits[0];
    for (int i = 1; i < vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < vocab; i++) sum += exp((double)logits[i] - (double)mx);
    double lse = (double)mx + log(sum);
    out->token = tok;
    out->logprob = (float)((double)logits[tok] - lse);
    /* The top_k by insertion into a short sorted list: one comparison per
     * logit for all but the few that enter it. */
    int n = 0;
    for (int i = 0; i < vocab && top_k > 0; i++) {
        float v = logits[i];
        if (n == top_k && !(v > logits[out->top_id[n - 1]])) continue;
        int at = n < top_k ? n++ : n - 1;
        while (at > 0 && v > logits[out->top_id[at - 1]]) {
            out->top_id[at] = out->top_id[at - 1];
            at--;
        }
        out->top_id[at] = i;
    }
    out->n_top = n;
    for (int k = 0; k < n; k++) out->top_lp[k] = (float)((double)logits[out->top_id[k]] - lse);
}
