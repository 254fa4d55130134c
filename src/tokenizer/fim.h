/* fim.h - fill-in-the-middle prompts in Qwen2.5-Coder's format.
 *
 * The format of QwenLM/Qwen2.5-Coder's examples (Qwen2.5-Coder-fim.py,
 * Qwen2.5-Coder-repolevel-fim.py):
 *   one file:
 *     <|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>
 *   with repository context (other files):
 *     <|repo_name|>{repo_name}\n
 *     <|file_sep|>{name 1}\n{text 1}        (a "\n" added when text 1 does
 *     <|file_sep|>{name 2}\n{text 2}         not end with one, so that each
 *     ...                                    <|file_sep|> starts a line)
 *     <|file_sep|>{file_name}\n<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>
 * The model writes the middle and ends with <|endoftext|> or one of the FIM
 * / repository tokens (fim_stop_ids). llama-server's /infill fields map on:
 * input_prefix -> prefix, input_suffix -> suffix, input_extra [{filename,
 * text}] -> files, prompt -> appended to the prefix (the text typed at the
 * cursor), and its defaults "myproject" / "filename" for the repository and
 * current file names. The rendered text is encoded like any text (as the
 * reference's tokenizer(input_text) does). Pure functions; thread-safe. */
#ifndef QW_FIM_H
#define QW_FIM_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "tokenizer/tokenizer.h"

typedef struct fim_file {
    const char *name; /* NULL -> "tmp" (llama-server's default) */
    const char *text; /* NULL -> "" */
} fim_file;

typedef struct fim_req {
    const char *prefix;    /* NULL -> "" */
    const char *suffix;    /* NULL -> "" */
    const char *prompt;    /* appended to prefix; NULL -> "" */
    const fim_file *files; /* repository context: [n_files] */
    size_t n_files;
    const char *repo_name; /* NULL -> "myproject" */
    const char *file_name; /* NULL -> "filename" */
} fim_req;

#define FIM_DEFAULT_REPO "myproject"
#define FIM_DEFAULT_FILE "filename"

/* Render into *out[*len] (malloc'd, NUL-terminated). */
int fim_render(const fim_req *r, char **out, size_t *len, qw_err *err);

/* 1 if the tokenizer has the FIM tokens (<|fim_prefix|>, <|fim_suffix|>,
 * <|fim_middle|>, and <|repo_name|> / <|file_sep|> when files are given),
 * else 0 with a message naming the missing token. */
int fim_supported(const qw_tok *t, int with_files, qw_err *err);

/* fim_supported() then fim_render() then tok_encode(). */
int fim_encode(const qw_tok *t, const fim_req *r, int32_t **ids, size_t *n, qw_err *err);

/* The ids that end an infill (those present of <|endoftext|>, <|im_end|>,
 * <|fim_prefix|>, <|fim_middle|>, <|fim_suffix|>, <|fim_pad|>,
 * <|repo_name|>, <|file_sep|>: the eos_token_ids of Qwen's examples). Writes
 * up to cap ids, returns how many. */
int fim_stop_ids(const qw_tok *t, int32_t *ids, int cap);

#endif
