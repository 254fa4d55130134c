/* infill.h - code infill requests: llama-server's POST /infill and the
 * `suffix` of /v1/completions, as Qwen2.5-Coder FIM prompts (fim.h).
 *
 * /infill body (llama-server's fields):
 *   input_prefix  string, the code before the cursor (default "")
 *   input_suffix  string, the code after it (default "")
 *   input_extra   [{"filename": string, "text": string}] other files of the
 *                 repository, rendered as <|repo_name|> / <|file_sep|> context
 *   prompt        string appended to input_prefix (default "")
 *   n_predict / max_tokens, sampling fields, stream, stop: as completions
 *   qwenc extensions: repo_name (default "myproject"), filename (the
 *   current file's name, default "filename") -- llama-server's fixed names.
 * /v1/completions with "suffix": the prompt string is the prefix, suffix
 * the suffix; no chat template (the FIM text is the prompt).
 * Errors are 400s naming the field; a model whose tokenizer has no FIM
 * tokens answers 400 saying so. Pure functions. */
#ifndef QW_INFILL_H
#define QW_INFILL_H

#include <stddef.h>
#include <stdint.h>

#include "server/api.h"
#include "tokenizer/fim.h"

typedef struct api_infill {
    fim_req fim;     /* strings borrow from the parsed body */
    fim_file *files; /* [fim.n_files] malloc'd */
} api_infill;

/* Parse the /infill fields of o (a cJSON object). 0 or -1 and e. */
int infill_parse(const void *o, api_infill *in, api_error *e);
void infill_free(api_infill *in);

/* fim_encode for a request: *ids malloc'd. -1 and e (400 when the model
 * has no FIM tokens, 500 otherwise). */
int infill_encode(const api_infill *in, const qw_tok *tok, int32_t **ids, size_t *n, api_error *e);

/* llama-server's /infill answer: {"content", "tokens_evaluated",
 * "tokens_predicted", "stop": true, "finish_reason", "timings"} (malloc'd). */
char *infill_json(const api_result *r);

/* "stream": true (llama-server's /completion stream shape, which /infill
 * shares): an SSE event per piece of text, "data: {"content": text,
 * "stop": false}\n\n", and a last one, "data: " + infill_json of the
 * answer with content "" + "\n\n" (stop true, the counts, finish_reason,
 * timings). No "[DONE]" (llama-server sends it on its OpenAI endpoints
 * only). malloc'd; NULL when out of memory. */
char *infill_sse_chunk(const char *text, size_t len);
char *infill_sse_final(const api_result *r);

#endif
