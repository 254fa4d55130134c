/* tokenizer.h - Qwen's byte-level BPE tokenizer and the Qwen2.5 chat template.
 *
 * Matches the Hugging Face `tokenizers` library (and transformers'
 * Qwen2Tokenizer) token for token on Qwen2-family tokenizer files:
 *   encode: invalid UTF-8 -> U+FFFD (as Python's errors="replace"), added
 *           tokens split out first (leftmost-longest, honouring lstrip /
 *           rstrip / single_word / normalized), NFC (utf8proc), the Split
 *           regex of tokenizer.json run with PCRE2 (UTF + UCP, JIT), GPT-2
 *           byte-to-unicode mapping, BPE by merge rank.
 *   decode: ids -> token bytes (ByteLevel decoder) -> text, invalid UTF-8 in
 *           the joined bytes -> U+FFFD (Rust's from_utf8_lossy).
 * No special tokens are ever added by encode (Qwen has no BOS).
 *
 * Thread safety: after tok_load() the tokenizer is read-only except for an
 * internal word cache guarded by its own locks; every function taking a
 * `const qw_tok *` may be called from many threads at once. A qw_tok_stream
 * belongs to one thread at a time.
 *
 * Memory: functions returning `int32_t **ids` or `char **text` hand back a
 * malloc'd buffer the caller frees with free(). They return 0 on success and
 * -1 with a message in *err (which may be NULL) on failure; on failure the
 * out-pointers are set to NULL / 0.
 */
#ifndef QW_TOKENIZER_H
#define QW_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct qw_tok qw_tok;

/* Load the tokenizer of MODEL, the same path forms as model_load():
 *   - a file: a GGUF file's tokenizer.ggml.* metadata (model "gpt2" with
 *     pre-tokenizer "qwen2" only; tokens, token_type, merges). Its own
 *     tokenizer, even if a tokenizer.json sits next to it: one file is one
 *     model.
 *   - a folder: dir/tokenizer.json, or else dir/vocab.json + dir/merges.txt
 *     (+ the added tokens of dir/tokenizer_config.json), or else the one
 *     *.gguf in it. Hugging Face files win over a .gguf in the same folder:
 *     tokenizer.json carries what GGUF drops (added-token lstrip / rstrip /
 *     normalized flags, the exact pre-tokenizer), and model_load() also
 *     prefers the Hugging Face files there.
 * Both give identical ids for Qwen2/Qwen3 files (tested on the corpus).
 * GGUF's CONTROL tokens are "special", USER_DEFINED ones are added but not
 * special (llama.cpp's converter also types "<|...|>"-looking added tokens
 * CONTROL, so their special flag, used only by skip_special decoding, may
 * differ from tokenizer.json's). Only byte-level BPE is accepted; any other
 * model type, normalizer, pre-tokenizer or decoder, and any malformed file,
 * fails with a message naming the file and field. */
int tok_load(qw_tok **out, const char *dir, qw_err *err);
void tok_free(qw_tok *t);

/* Largest id + 1 over the BPE vocabulary and the added tokens (151665 for
 * Qwen2.5, 151669 for Qwen3; the model's embedding may be larger). */
int tok_vocab_size(const qw_tok *t);

/* The id of a token given by its text (an added token like "<|im_end|>", or a
 * vocabulary entry in its byte-level spelling like "Ġthe"); -1 if none. */
int32_t tok_token_id(const qw_tok *t, const char *s);

/* The raw bytes a token decodes to (not NUL-terminated) and its length;
 * NULL / 0 for an unknown id. Borrowed, valid until tok_free(). */
const char *tok_token_bytes(const qw_tok *t, int32_t id, size_t *len);

/* 1 if id is an added token marked "special": true (skipped by decode with
 * skip_special), else 0. */
int tok_is_special(const qw_tok *t, int32_t id);

/* Encode len bytes of text (any bytes; need not be NUL-terminated) into
 * *ids[*n] (malloc'd; for the empty text *ids may be NULL with *n = 0).
 * Fails only on allocation failure or sizes that would overflow. */
int tok_encode(const qw_tok *t, const char *text, size_t len, int32_t **ids, size_t *n,
               qw_err *err);

/* Decode ids into *text[*len] (malloc'd, NUL-terminated; *len excludes the
 * NUL). Unknown ids are skipped, as the `tokenizers` library does.
 * skip_special: leave out the added tokens marked special. */
int tok_decode(const qw_tok *t, const int32_t *ids, size_t n, int skip_special, char **text,
               size_t *len, qw_err *err);

/* Streaming decoder: feed ids one at a time, get back only complete UTF-8.
 * Bytes of a character split across tokens are held until it completes;
 * a byte sequence that cannot become valid UTF-8 is emitted as U+FFFD
 * (maximal-subpart rule, so the concatenated output equals tok_decode() of
 * all ids). The returned pointer is owned by the stream and valid until the
 * next call on it. No allocation after tok_stream_new(). */
typedef struct qw_tok_stream qw_tok_stream;
qw_tok_stream *tok_stream_new(const qw_tok *t, int skip_special); /* NULL: out of memory */
void tok_stream_free(qw_tok_stream *s);
/* Returns the text that became complete (possibly ""), *len its length. */
const char *tok_stream_feed(qw_tok_stream *s, int32_t id, size_t *len);
/* End of stream: held bytes (an unfinished character) come out as U+FFFD.
 * The stream is then empty and may be reused. */
const char *tok_stream_flush(qw_tok_stream *s, size_t *len);
/* Forget held bytes without emitting them. */
void tok_stream_reset(qw_tok_stream *s);

/* ---- chat template (ChatML, as Qwen2.5-Instruct's tokenizer_config.json
 * renders it without tools) ---------------------------------------------
 *   first message system:  <|im_start|>system\n{content}<|im_end|>\n
 *   else the default:      <|im_start|>system\nYou are Qwen, created by
 *                          Alibaba Cloud. You are a helpful assistant.<|im_end|>\n
 *   user / assistant / later system: <|im_start|>{role}\n{content}<|im_end|>\n
 *   tool: consecutive tool messages form one user turn:
 *       <|im_start|>user\n<tool_response>\n{c1}\n</tool_response>
 *       \n<tool_response>\n{c2}\n</tool_response><|im_end|>\n
 *   any other role: not rendered (as the template does)
 *   add_generation_prompt: <|im_start|>assistant\n
 * content NULL counts as "". n_msgs may be 0 (system prompt only). */
typedef struct qw_chat_msg {
    const char *role;
    const char *content;
} qw_chat_msg;

#define QW_DEFAULT_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

/* Render into *out[*len] (malloc'd, NUL-terminated). */
int chat_render(const qw_chat_msg *msgs, size_t n_msgs, int add_generation_prompt, char **out,
                size_t *len, qw_err *err);

/* chat_render() then tok_encode() (special-token text inside contents is
 * split out as Hugging Face does when it encodes the rendered string). */
int chat_encode(const qw_tok *t, const qw_chat_msg *msgs, size_t n_msgs,
                int add_generation_prompt, int32_t **ids, size_t *n, qw_err *err);

#endif
