/* sampler.h - choosing the next token from logits.
 *
 * Order (as llama.cpp / transformers apply them): repetition penalty
 * (transformers' rule: logit>0 ? /r : *r over tokens seen), presence and
 * frequency penalties (OpenAI's), then temperature; greedy if temperature
 * == 0; else top-k, top-p, min-p filters and a draw from the seeded RNG.
 * Each sampler carries its own RNG state: same seed, same tokens.
 */
#ifndef QW_SAMPLER_H
#define QW_SAMPLER_H

#include <stdint.h>

typedef struct qw_sampling {
    float temperature;        /* 0 = greedy */
    int top_k;                /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repeat_penalty;     /* 1 = off */
    int repeat_last_n;        /* tokens of history the penalties look at; 0 = all */
    float presence_penalty;   /* 0 = off */
    float frequency_penalty;  /* 0 = off */
    uint64_t seed;
} qw_sampling;

/* Greedy, all filters off, seed 0. */
qw_sampling sampling_default(void);

typedef struct qw_sampler qw_sampler;

/* vocab > 0. Returns NULL on allocation failure. */
qw_sampler *sampler_create(const qw_sampling *s, int vocab);
void sampler_free(qw_sampler *s);

/* Pick a token. logits[vocab] may be modified. history: the tokens so far
 * (prompt and generated) for the penalties. Allocation-free. */
int32_t sampler_sample(qw_sampler *s, float *logits, const int32_t *history, int n_history);

#endif
