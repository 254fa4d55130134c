/* generate.c - one sequence from prompt to stop (see generate.h).
 *
 * The prompt is prefilled in chunks of the context's max_batch tokens (only
 * the last position computes logits), then one token per forward() until an
 * EOS id, max_new tokens, or the callback asks to stop. The sampler and the
 * history buffer are allocated once per call, before the first step.
 *
 * With spec_k > 0 each decode step also feeds up to spec_k n-gram drafts
 * (draft.h) and keeps the leading ones the sampler agrees with, exactly as
 * the scheduler does (sched.h): the output is the plain output.
 */
#include "engine/generate.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/draft.h"

int gen_is_eos(const qw_config *cfg, int32_t token) {
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_ids[i] == token) return 1;
    return 0;
}

int gen_run(qw_ctx *ctx, qw_pool *pool, int slot, int start_pos, const int32_t *prompt, int n_prompt, int max_new,
            const qw_sampling *sp, int spec_k, qw_token_cb cb, void *user, qw_gen_stats *stats, qw_err *err) {
    return gen_run_constrained(ctx, pool, slot, start_pos, prompt, n_prompt, max_new, sp, spec_k, NULL, cb, user,
                               stats, err);
}

int gen_run_constrained(qw_ctx *ctx, qw_pool *pool, int slot, int start_pos, const int32_t *prompt, int n_prompt,
                        int max_new, const qw_sampling *sp, int spec_k, qw_gmatch *gm, qw_token_cb cb, void *user,
                        qw_gen_stats *stats, qw_err *err) {
    const qw_config *cfg = &ctx_model(ctx)->cfg;
    qw_gen_stats st;
    memset(&st, 0, sizeof st);
    st.n_prompt = n_prompt;
    st.finish = QW_FINISH_LENGTH;
    if (stats) *stats = st;
    int n_ctx = ctx_n_ctx(ctx);
    if (slot < 0 || slot >= ctx_n_slots(ctx)) return qw_errf(err, "gen_run: slot %d outside [0, %d)", slot, ctx_n_slots(ctx));
    if (n_prompt < 1 || !prompt) return qw_errf(err, "gen_run: empty prompt");
    if (start_pos < 0 || max_new < 0 || (int64_t)start_pos + n_prompt + max_new > n_ctx)
        return qw_errf(err, "gen_run: %d cached + %d prompt + %d new tokens exceed the context of %d", start_pos,
                       n_prompt, max_new, n_ctx);
    if (spec_k < 0) return qw_errf(err, "gen_run: spec_k %d must be >= 0", spec_k);
    if (gm && gvocab_n_vocab(gmatch_vocab(gm)) != cfg->vocab)
        return qw_errf(err, "gen_run: the grammar's vocabulary has %d tokens, the model %d",
                       gvocab_n_vocab(gmatch_vocab(gm)), cfg->vocab);
    if (gm) spec_k = 0; /* drafts would need the matcher state after each draft */
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= cfg->vocab)
            return qw_errf(err, "gen_run: prompt token %d (index %d) is outside the vocabulary [0, %d)", prompt[i], i,
                           cfg->vocab);

    int B = ctx_max_batch(ctx);
    /* hist[i] sits at position start_pos + i; drafts are written right
     * after the last token, so that token and its drafts are one batch. */
    int32_t *hist = malloc((size_t)(n_prompt + max_new) * sizeof *hist);
    int32_t *pos = malloc((size_t)B * sizeof *pos);
    int32_t *slots = malloc((size_t)B * sizeof *slots);
    uint8_t *want = malloc((size_t)B);
    qw_sampler *smp = sampler_create(sp, cfg->vocab);
    qw_drafter dr;
    drafter_init(&dr, spec_k < B - 1 ? spec_k : B - 1);
    int rc = -1;
    if (!hist || !pos || !slots || !want || !smp) {
        qw_errf(err, "gen_run: out of memory");
        goto done;
    }
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    for (int i = 0; i < B; i++) slots[i] = slot, want[i] = 1;

    double t0 = qw_now();
    for (int i = 0; i < n_prompt; i += B) {
        int n = n_prompt - i < B ? n_prompt - i : B;
        for (int j = 0; j < n; j++) pos[j] = start_pos + i + j;
        qw_batch b = {.n = n, .tokens = prompt + i, .pos = pos, .slot = slots, .want_logits = NULL};
        if (forward(ctx, &b, pool, err)) goto done;
    }
    double t1 = qw_now();
    st.prefill_s = t1 - t0;
    int n_hist = n_prompt;
    int k = 0; /* drafts in the last forward(): logits rows 0..k */
    while (max_new > 0) {
        /* Row j holds the logits after drafts 0..j-1: valid while they
         * matched what the sampler chose (see sched.h on exactness). */
        int accepted = 0, stop = 0;
        for (int j = 0; j <= k; j++) {
            float *logits = ctx_logits(ctx, j);
            if (gm && gmatch_apply(gm, logits) == 0) {
                qw_errf(err, "gen_run: the grammar allows no token here (after %d generated tokens)", st.n_gen);
                goto done;
            }
            int32_t tok = sampler_sample(smp, logits, hist, n_hist);
            if (gm && !gmatch_accept_token(gm, tok)) {
                qw_errf(err, "gen_run: internal error: the grammar rejected sampled token %d", tok);
                goto done;
            }
            if (gen_is_eos(cfg, tok) || (gm && gmatch_is_finished(gm))) {
                st.finish = QW_FINISH_STOP;
                stop = 1;
                break;
            }
            int match = j < k && tok == hist[n_hist];
            hist[n_hist++] = tok;
            st.n_gen++;
            if (cb && cb(user, tok)) {
                st.finish = QW_FINISH_CANCEL;
                stop = 1;
                break;
            }
            if (st.n_gen == max_new) {
                stop = 1;
                break;
            }
            if (!match) break;
            accepted++;
        }
        if (k > 0) {
            drafter_feedback(&dr, k, accepted);
            st.n_drafted += k;
            st.n_accepted += accepted;
        }
        if (stop) break;
        /* Feed the last token and fresh drafts; at most max_new tokens in all. */
        int limit = max_new - st.n_gen - 1;
        k = drafter_propose(&dr, hist, n_hist, limit, hist + n_hist);
        for (int j = 0; j <= k; j++) pos[j] = start_pos + n_hist - 1 + j;
        qw_batch b = {.n = 1 + k, .tokens = hist + n_hist - 1, .pos = pos, .slot = slots, .want_logits = want};
        if (forward(ctx, &b, pool, err)) goto done;
    }
    st.decode_s = qw_now() - t1;
    rc = 0;
done:
    if (stats) *stats = st;
    sampler_free(smp);
    free(hist);
    free(pos);
    free(slots);
    free(want);
    return rc;
}
