/* grammar.h - constrained sampling: grammars, per-request matchers, token masks.
 *
 * Three objects:
 *
 *   qw_grammar  a compiled grammar, read-only once built, shared by any
 *               number of requests and threads (reference counted). Built
 *               from GBNF text (llama.cpp's grammar format, see
 *               docs/grammar.md for the subset), from a JSON Schema (the
 *               subset OpenAI's strict mode accepts; the schema is first
 *               translated to GBNF, which grammar_schema_to_gbnf() exposes
 *               so that callers can embed a schema in a larger grammar), or
 *               "any JSON object" (response_format json_object).
 *
 *   qw_gvocab   the vocabulary seen as bytes: a trie over the decoded bytes
 *               of every token, built once per tokenizer and shared
 *               (read-only). Special tokens (tok_is_special) and ids with
 *               no bytes never match a grammar; the EOS ids given at build
 *               time are allowed exactly when the grammar is complete.
 *
 *   qw_gmatch   one request's matcher state (a set of pushdown stacks over
 *               UTF-8 bytes). Owned by one thread at a time. All its
 *               memory is allocated by gmatch_create(); accept / mask calls
 *               never allocate.
 *
 * Matching is over bytes, not characters: character classes are compiled
 * into UTF-8 byte sequences, so a token that ends inside a multi-byte
 * character is allowed exactly when some valid continuation exists, and the
 * output is always valid UTF-8.
 *
 * Status codes: functions returning int return 0 on success and -1 with a
 * message in *err (err may be NULL). Compile errors name the line and column
 * of GBNF text, or the JSON pointer and keyword of a schema; a schema keyword
 * outside the supported subset fails with "unsupported keyword 'KW' at
 * PATH" (the server turns that into a 400 naming the keyword).
 */
#ifndef QW_GRAMMAR_H
#define QW_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct cJSON;
typedef struct qw_tok qw_tok;

typedef struct qw_grammar qw_grammar;
typedef struct qw_gvocab qw_gvocab;
typedef struct qw_gmatch qw_gmatch;

/* ---- compiling ------------------------------------------------------- */

/* Compile GBNF text[len] (need not be NUL-terminated). root: the start
 * rule's name (NULL = "root"). Every referenced rule must be defined;
 * left recursion is refused. *out has one reference. */
int grammar_compile_gbnf(qw_grammar **out, const char *text, size_t len, const char *root,
                         qw_err *err);

/* Compile a JSON Schema (a cJSON object; `true`/{} = any JSON value).
 * Supported: type (string, number, integer, boolean, null, object, array,
 * or a list of them), enum, const, properties, required,
 * additionalProperties (false, true, or a schema), items, prefixItems,
 * minItems, maxItems, anyOf, oneOf (as anyOf), allOf with one member,
 * $ref to "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed),
 * string pattern (a safe regex subset), minLength, maxLength, format
 * (date, time, date-time, uuid, email), and the annotations title,
 * description, default, examples, $schema, $id, $comment. Anything else
 * is refused naming the keyword. Properties come out in the schema's
 * order; JSON whitespace is allowed but bounded (no endless blanks). */
int grammar_compile_json_schema(qw_grammar **out, const struct cJSON *schema, qw_err *err);

/* Any JSON object (response_format {"type": "json_object"}). */
int grammar_compile_json_object(qw_grammar **out, qw_err *err);

/* Translate a JSON Schema into GBNF rules whose start rule is named
 * `name` and every helper rule is prefixed "name-", so several schemas can
 * live in one grammar (e.g. root ::= "<tool_call>\n" (f1 | f2) "\n</tool_call>"
 * followed by the rules of f1 and f2). name: [a-zA-Z0-9-]+. *gbnf is
 * malloc'd, NUL-terminated; the caller frees it. Same subset and errors as
 * grammar_compile_json_schema. */
int grammar_schema_to_gbnf(const struct cJSON *schema, const char *name, char **gbnf,
                           qw_err *err);

/* Reference counting (thread safe): a scheduler keeps its own reference for
 * as long as a request uses the grammar. grammar_release(NULL) is a no-op. */
qw_grammar *grammar_retain(qw_grammar *g);
void grammar_release(qw_grammar *g);

/* ---- the vocabulary -------------------------------------------------- */

/* Build the byte trie for token ids [0, n_vocab) of t (n_vocab may exceed
 * tok_vocab_size(t): the model's padded embedding; ids without bytes never
 * match). eos_ids[n_eos]: the tokens that end generation. NULL on failure
 * with a message. Read-only afterwards; free with gvocab_free after every
 * matcher using it. */
qw_gvocab *gvocab_create(const qw_tok *t, int n_vocab, const int32_t *eos_ids, int n_eos,
                         qw_err *err);
/* A vocabulary of single bytes (tests, tools): id b < 256 is byte b, ids
 * from 256 to n_vocab - 1 have no bytes, eos_ids[n_eos] end generation. */
qw_gvocab *gvocab_create_bytes(int n_vocab, const int32_t *eos_ids, int n_eos);
void gvocab_free(qw_gvocab *v);
int gvocab_n_vocab(const qw_gvocab *v);

/* ---- matching -------------------------------------------------------- */

/* A matcher at the start of g. Takes a reference to g; borrows v. NULL on
 * allocation failure. */
qw_gmatch *gmatch_create(const qw_grammar *g, const qw_gvocab *v);
void gmatch_free(qw_gmatch *m);

/* The vocabulary m was created with. */
const qw_gvocab *gmatch_vocab(const qw_gmatch *m);

/* Back to the start state. */
void gmatch_reset(qw_gmatch *m);

/* Advance by token id. Returns 1 if accepted (state advanced), 0 if the
 * grammar rejects it (state unchanged). An EOS id is accepted only when the
 * grammar is complete, and then the matcher is finished (every later token
 * is rejected). */
int gmatch_accept_token(qw_gmatch *m, int32_t id);

/* Advance by len bytes (all or nothing): 1 accepted, 0 rejected (state
 * unchanged). */
int gmatch_accept_bytes(qw_gmatch *m, const char *bytes, size_t len);

/* 1 if gmatch_accept_bytes would accept these bytes, 0 if not; the state
 * is left as it was either way. */
int gmatch_try_bytes(qw_gmatch *m, const char *bytes, size_t len);

/* 1 if the bytes so far form a complete sentence of the grammar (EOS is
 * allowed now), else 0. */
int gmatch_is_complete(const qw_gmatch *m);

/* 1 if the matcher has accepted EOS (finished). */
int gmatch_is_finished(const qw_gmatch *m);

/* Fill mask (bit i of mask[i / 32] = token i allowed; (n_vocab + 31) / 32
 * words) with the tokens that can continue the output: every token whose
 * bytes the grammar accepts from here, plus the EOS ids when complete.
 * Returns the number of allowed tokens (0: nothing can follow, a dead end
 * the caller must end). Allocation-free. */
int gmatch_fill_mask(qw_gmatch *m, uint32_t *mask);

/* gmatch_fill_mask, then logits[i] = -INFINITY for every token not allowed
 * (logits[n_vocab]). Returns the number of allowed tokens. */
int gmatch_apply(qw_gmatch *m, float *logits);

#endif
