/* logprob.h - log-probabilities of tokens, as OpenAI's `logprobs` reports
 * them: log-softmax of the model's raw logits (before temperature,
 * penalties, top-k/top-p/min-p; the distribution the model gives, not the
 * one the sampler drew from), plus the most likely alternatives.
 *
 * Pure and allocation-free; the scheduler calls it on the engine thread for
 * the requests that ask (sched.h, qw_req_params.logprobs).
 */
#ifndef QW_LOGPROB_H
#define QW_LOGPROB_H

#include <stdint.h>

#define QW_MAX_TOP_LOGPROBS 20

/* One token's record. */
typedef struct qw_logprob {
    int32_t token;                          /* the token chosen (or given, for a prompt) */
    float logprob;                          /* its log-probability (natural log) */
    int n_top;                              /* alternatives below, most likely first */
    int32_t top_id[QW_MAX_TOP_LOGPROBS];
    float top_lp[QW_MAX_TOP_LOGPROBS];
} qw_logprob;

/* log-softmax of logits[vocab] at tok, and the top_k (<= QW_MAX_TOP_LOGPROBS)
 * most likely tokens (ties: the lower id first), into *out. The sum runs in
 * double precision (max-subtracted), so the values match a float64
 * computation to about 1e-6. */
void logprob_record(const float *logits, int vocab, int32_t tok, int top_k, qw_logprob *out);

#endif
