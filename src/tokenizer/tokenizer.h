/* tokenizer.h - Qwen's byte-level BPE tokenizer and the chat templates.
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

/* ---- chat templates ------------------------------------------------------
 * The template is the model's own (tokenizer_config.json "chat_template" or
 * a chat_template.jinja file next to it, GGUF "tokenizer.chat_template"),
 * recognised by comparing its text byte for byte with the templates qwenc
 * renders in C (src/tokenizer/chat_known.h). Only those are rendered; any
 * other template refuses chat with a message saying so (raw completions
 * still work): a conversation is never rendered with a template the model
 * was not trained on. */
typedef enum qw_chat_family {
    CHAT_NONE = 0,     /* the model's files carry no chat template */
    CHAT_UNKNOWN,      /* a template qwenc does not know: chat refused */
    CHAT_QWEN25,       /* Qwen2.5-*-Instruct (also Qwen2.5-Coder-0.5B-Instruct's file) */
    CHAT_QWEN25_CODER, /* Qwen2.5-Coder-1.5B-Instruct's: as CHAT_QWEN25 but the tool
                          example in the system turn reads {{"name": ...}} */
    CHAT_QWEN3,        /* Qwen3's: no default system turn; assistant turns after
                          the last real user query carry <think> blocks
                          (reasoning_content); enable_thinking */
} qw_chat_family;

/* The family of a template text (NULL -> CHAT_NONE). */
qw_chat_family chat_template_family(const char *text, size_t len);
/* Short name: "none", "unknown", "qwen2.5", "qwen2.5-coder", "qwen3". */
const char *chat_family_name(qw_chat_family f);
/* The tokenizer's template (loaded by tok_load) and its family. The text is
 * NULL when the files have none; borrowed until tok_free(). */
qw_chat_family tok_chat_family(const qw_tok *t);
const char *tok_chat_template(const qw_tok *t, size_t *len);
/* Tests and tools: render/encode as if the model's template were f. */
void tok_set_chat_family(qw_tok *t, qw_chat_family f);

/* ---- the Qwen2.5 template (Qwen2.5-Instruct's tokenizer_config.json)
 * without tools:
 *   first message system:  <|im_start|>system\n{content}<|im_end|>\n
 *   else the default:      <|im_start|>system\nYou are Qwen, created by
 *                          Alibaba Cloud. You are a helpful assistant.<|im_end|>\n
 * with tools (a non-empty `tools` array), the system turn instead is
 *   <|im_start|>system\n{system content or the default}\n\n# Tools\n\n...
 *   <tools>\n{tool 1 | tojson}\n{tool 2 | tojson}...\n</tools>\n\n
 *   ...<tool_call>\n{"name": <function-name>, ...}\n</tool_call><|im_end|>\n
 * then for each message:
 *   user / later system / assistant without tool calls:
 *       <|im_start|>{role}\n{content}<|im_end|>\n
 *   assistant with tool calls:
 *       <|im_start|>assistant[\n{content} if non-empty]
 *       \n<tool_call>\n{"name": "{name}", "arguments": {arguments | tojson}}\n</tool_call>
 *       ... (one per call) <|im_end|>\n
 *   tool: consecutive tool messages form one user turn:
 *       <|im_start|>user\n<tool_response>\n{c1}\n</tool_response>
 *       \n<tool_response>\n{c2}\n</tool_response><|im_end|>\n
 *   any other role: not rendered (as the template does)
 *   add_generation_prompt: <|im_start|>assistant\n
 * content NULL counts as "". n_msgs may be 0 (system prompt only). tojson is
 * transformers' filter (tojson.h); a call's `arguments` is the JSON text of
 * the arguments (OpenAI sends it as a string holding JSON: that string's
 * value), parsed and re-serialised, so {"a":1.50} renders as {"a": 1.5}. */
typedef struct qw_tool_call {
    const char *name;
    const char *arguments; /* JSON text; NULL -> {} */
} qw_tool_call;

typedef struct qw_chat_msg {
    const char *role;
    const char *content;
    const qw_tool_call *tool_calls; /* [n_tool_calls], assistant messages only */
    size_t n_tool_calls;
    const char *reasoning_content;  /* Qwen3: an assistant turn's thinking; NULL: none
                                       given (then <think>...</think> in content counts) */
} qw_chat_msg;

#define QW_DEFAULT_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

typedef struct qw_chat_opts {
    qw_chat_family family;     /* CHAT_QWEN25, CHAT_QWEN25_CODER or CHAT_QWEN3; others fail */
    const char *tools;         /* JSON text of the tools array; NULL or [] -> none */
    size_t tools_len;
    int add_generation_prompt;
    int no_thinking;           /* Qwen3: enable_thinking=false (an empty <think> block
                                  after the generation prompt); 0: not given */
} qw_chat_opts;

/* The Qwen3 template (Qwen3's tokenizer_config.json), in short: the system
 * turn only if messages[0] is system (or with tools: its content + "\n\n"
 * + the same tools block as Qwen2.5 without the default system text); the
 * last user message that is not a wrapped <tool_response> is "the query";
 * assistant turns after it render <think>\n{reasoning}\n</think>\n\n
 * before the content (always for the last message, else when there is
 * reasoning), where reasoning is reasoning_content or the text inside
 * <think>...</think> at the start of content (then removed from content);
 * tool calls follow the content, "\n"-separated, without the leading "\n"
 * when there is no content; tool results as Qwen2.5. */

/* Render into *out[*len] (malloc'd, NUL-terminated). Fails (-1, message) for
 * a family it cannot render, tools that are not a JSON array, or a call's
 * arguments that are not JSON. */
int chat_render_opts(const qw_chat_opts *o, const qw_chat_msg *msgs, size_t n_msgs, char **out,
                     size_t *len, qw_err *err);

/* chat_render_opts() with the Qwen2.5 template and no tools. */
int chat_render(const qw_chat_msg *msgs, size_t n_msgs, int add_generation_prompt, char **out,
                size_t *len, qw_err *err);

/* Render with the tokenizer's own template (tok_chat_family; fails with a
 * message naming the family when it is not one chat_render_opts renders),
 * then tok_encode() (special-token text inside contents is split out as
 * Hugging Face does when it encodes the rendered string). tools: as in
 * qw_chat_opts (NULL: none). */
int chat_encode_tools(const qw_tok *t, const qw_chat_msg *msgs, size_t n_msgs, const char *tools,
                      size_t tools_len, int add_generation_prompt, int32_t **ids, size_t *n,
                      qw_err *err);
/* The same with every option of qw_chat_opts (its family is ignored: the
 * tokenizer's is used). */
int chat_encode_opts(const qw_tok *t, const qw_chat_opts *o, const qw_chat_msg *msgs, size_t n_msgs,
                     int32_t **ids, size_t *n, qw_err *err);
/* chat_encode_tools() without tools. */
int chat_encode(const qw_tok *t, const qw_chat_msg *msgs, size_t n_msgs,
                int add_generation_prompt, int32_t **ids, size_t *n, qw_err *err);

#endif
