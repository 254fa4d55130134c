/* generate.c - one sequence from prompt to stop (see generate.h).
 *
 * The prompt is prefilled in chunks of the context's max_batch tokens (only
 * the last position computes logits), then one token per forward() until an
 * EOS id, max_new tokens, or the callback asks to stop. The sampler and the
 * history buffer are allocated once per call, before the first step.
 */
#include "engine/generate.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"

int gen_is_eos(const qw_config *cfg, int32_t token) {
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_ids[i] == token) return 1;
    return 0;
}

int gen_run(qw_ctx *ctx, qw_pool *pool, int slot, int start_pos, const int32_t *prompt, int n_prompt, int max_new,
            const qw_sampling *sp, qw_token_cb cb, void *user, qw_gen_stats *stats, qw_err *err) {
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
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= cfg->vocab)
            return qw_errf(err, "gen_run: prompt token %d (index %d) is outside the vocabulary [0, %d)", prompt[i], i,
                           cfg->vocab);

    int B = ctx_max_batch(ctx);
    int32_t *hist = malloc((size_t)(n_prompt + max_new) * sizeof *hist);
    int32_t *pos = malloc((size_t)B * sizeof *pos);
    int32_t *slots = malloc((size_t)B * sizeof *slots);
    qw_sampler *smp = sampler_create(sp, cfg->vocab);
    int rc = -1;
    if (!hist || !pos || !slots || !smp) {
        qw_errf(err, "gen_run: out of memory");
        goto done;
    }
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    for (int i = 0; i < B; i++) slots[i] = slot;

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
    int p = start_pos + n_prompt;
    while (st.n_gen < max_new) {
        int32_t tok = sampler_sample(smp, ctx_logits(ctx, 0), hist, n_hist);
        if (gen_is_eos(cfg, tok)) {
            st.finish = QW_FINISH_STOP;
            break;
        }
        hist[n_hist++] = tok;
        st.n_gen++;
        if (cb && cb(user, tok)) {
            st.finish = QW_FINISH_CANCEL;
            break;
        }
        if (st.n_gen == max_new) break;
        pos[0] = p++;
        qw_batch b = {.n = 1, .tokens = &tok, .pos = pos, .slot = slots, .want_logits = NULL};
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
    return rc;
}
