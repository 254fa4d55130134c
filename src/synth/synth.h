/* synth.h - a Qwen2ForCausalLM folder with random weights, for offline work.
 *
 * Writes config.json, generation_config.json and model.safetensors holding
 * every tensor a Qwen2ForCausalLM has, with the shapes from the config and
 * values from a seeded PRNG (matrices ~N(0, scale^2), norm weights ~1). The
 * safetensors file is streamed to disk in chunks: the 0.5B model (~1 GB in
 * bf16) never sits in memory. Same config + dtype + seed = same bytes.
 *
 * config.json gets "qwenc_random_weights": true so that every mode can say
 * loudly that the weights are random.
 */
#ifndef QW_SYNTH_H
#define QW_SYNTH_H

#include <stdint.h>

#include "base/err.h"
#include "kernels/kernels.h"

typedef struct synth_opts {
    const char *config_path; /* config.json to use; NULL = Qwen2.5-0.5B-Instruct's */
    qw_dtype dtype;          /* QW_BF16 (default), QW_F16, QW_F32 */
    uint64_t seed;           /* PRNG seed */
    float scale;             /* std of matrices, embeddings and biases (default 0.02) */
    int quiet;               /* no progress lines on stderr */
} synth_opts;

void synth_opts_default(synth_opts *o);

/* The embedded config.json of Qwen/Qwen2.5-0.5B-Instruct (without the
 * random-weights marker). Static string. */
const char *synth_default_config(void);

/* Write the model into out_dir (created if missing; existing files of the
 * same names are replaced atomically: written as *.tmp, then renamed).
 * Returns 0, or -1 with a message naming the file and field at fault. */
int synth_write(const char *out_dir, const synth_opts *o, qw_err *err);

/* Copy the tokenizer files (tokenizer.json required; tokenizer_config.json,
 * vocab.json, merges.txt, special_tokens_map.json when present) from
 * src_dir to out_dir. Returns the number of files copied, or -1. */
int synth_copy_tokenizer(const char *src_dir, const char *out_dir, qw_err *err);

#endif
