/* generate.h - one sequence, start to end: prefill the prompt, then decode
 * token by token until EOS, the token limit or the callback says stop.
 *
 * Used by the CLI's single-shot modes and the terminal chat. The servers use
 * the scheduler (sched.h), which runs many sequences in one batched step.
 */
#ifndef QW_GENERATE_H
#define QW_GENERATE_H

#include <stdint.h>

#include "infer/forward.h"
#include "grammar/grammar.h"
#include "sample/sampler.h"

typedef struct qw_gen_stats {
    int n_prompt, n_gen;
    double prefill_s, decode_s; /* wall seconds */
    int finish;                 /* QW_FINISH_* */
    int n_drafted, n_accepted;  /* speculative drafts verified / accepted */
} qw_gen_stats;

enum { QW_FINISH_STOP = 0, QW_FINISH_LENGTH = 1, QW_FINISH_CANCEL = 2 };

/* Called for every generated token (EOS included is NOT passed: generation
 * stops before it). Return 0 to go on, non-zero to stop (finish = CANCEL). */
typedef int (*qw_token_cb)(void *user, int32_t token);

/* Generate into slot `slot` of ctx starting at position `start_pos` (the
 * caller may keep earlier positions as a cached prefix). prompt[n_prompt] are
 * evaluated from start_pos. spec_k > 0: speculative decoding with up to
 * spec_k n-gram drafts per step (same tokens as spec_k = 0). Fails (-1, message) if start_pos + n_prompt +
 * max_new exceeds the context, or a token id is out of range. */
int gen_run(qw_ctx *ctx, qw_pool *pool, int slot, int start_pos, const int32_t *prompt,
            int n_prompt, int max_new, const qw_sampling *sp, int spec_k, qw_token_cb cb, void *user,
            qw_gen_stats *stats, qw_err *err);

/* gen_run under a grammar (grammar.h): gm (the caller's matcher, at the
 * state the output starts in; NULL = none) masks every step's logits and
 * advances by each token; generation stops when the grammar took EOS. No
 * drafts (spec_k is ignored). Fails with a message at a dead end (no token
 * continues the grammar). */
int gen_run_constrained(qw_ctx *ctx, qw_pool *pool, int slot, int start_pos, const int32_t *prompt, int n_prompt,
                        int max_new, const qw_sampling *sp, int spec_k, qw_gmatch *gm, qw_token_cb cb, void *user,
                        qw_gen_stats *stats, qw_err *err);

/* True if token is one of the model's EOS ids. */
int gen_is_eos(const qw_config *cfg, int32_t token);

#endif
