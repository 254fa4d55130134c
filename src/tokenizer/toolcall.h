/* toolcall.h - the tool calls in a Qwen2.5 model's answer, split out of the
 * text as it streams.
 *
 * Qwen2.5's template teaches the model to answer a call as
 *     <tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>
 * one block per call (parallel calls: several blocks, newline-separated),
 * optionally after some text. The parser takes the decoded text in pieces of
 * any size (as tokens come) and hands out:
 *   content  text outside the blocks. Whitespace right before a block and
 *            between blocks is dropped (it only separates them); a piece
 *            that could be the start of "<tool_call>" and trailing
 *            whitespace are held back until what follows decides, so the
 *            concatenated content is the same however the text was cut.
 *   calls    one per complete block whose body is a JSON object with a
 *            string "name" and an object "arguments" (a missing "arguments"
 *            counts as {}), in order, numbered from 0; arguments are
 *            re-serialised as Python's json.dumps(ensure_ascii=False) writes
 *            them (tojson.h), which is also how the template renders them
 *            back, so a call survives the round trip byte for byte. A body
 *            wrapped in doubled braces {{...}} (Qwen2.5-Coder-1.5B's
 *            template shows that form) is read as the inner object.
 *   A block whose body is not such a call is handed out as content,
 *   verbatim: nothing the model wrote is lost. A block still open when the
 *   text ends is a call if its body already is one (a model may stop right
 *   after the JSON), else content, verbatim.
 * Streamed calls: a body that starts in the template's shape,
 *   {"name": "NAME", "arguments": {   (any whitespace between tokens)
 *   is a call from the moment its arguments begin: call_start() gets the
 *   index and name then, call_args() the arguments' text as it comes,
 *   re-serialised on the fly (jsonfeed.h) and held back only while a piece
 *   could still be the start of "</tool_call>", and call() the whole
 *   arguments at the block's end, the concatenation of those pieces (so a
 *   streamed answer and a whole one agree byte for byte). What follows the
 *   arguments' closing brace up to the tag is ignored; arguments cut short
 *   by the end of the text (the token limit) are handed out as far as they
 *   came, as OpenAI does; a repeated key inside them is kept as written
 *   (json.loads takes the last, as tojson would). Any other shape (the
 *   arguments first, a repeated "name", doubled braces, bare calls) is
 *   read whole at its end and handed out by call() alone.
 *
 * Bare calls: the real Qwen2.5-Coder-0.5B/1.5B-Instruct files, asked
 * greedily, answer a tool prompt with the JSON object alone, no tags
 * ({"name": "get_weather", "arguments": {...}}). toolcall_set_bare(p, 1)
 * accepts that too: when the text starts (after whitespace) with '{', it is
 * all held back, and at the end, if the whole text is one call object, it
 * is a call; otherwise it is handed out as content, unchanged.
 *
 * max_calls > 0 stops at that many calls (parallel_tool_calls: false -> 1):
 * toolcall_feed() returns 1 once the limit is reached, and everything after
 * the last call is ignored.
 *
 * Not thread-safe; one parser per request. Allocation: the held text only. */
#ifndef QW_TOOLCALL_H
#define QW_TOOLCALL_H

#include <stddef.h>

#include "base/err.h"

typedef struct toolcall_sink {
    /* Content text (not NUL-terminated; n > 0). */
    void (*content)(void *ctx, const char *s, size_t n);
    /* A complete call; name and arguments are NUL-terminated, valid during
     * the call only. */
    void (*call)(void *ctx, int index, const char *name, const char *arguments);
    void *ctx;
    /* Optional, for streaming: a call begins (name NUL-terminated, valid
     * during the call only); a piece of its arguments (n > 0). call() still
     * follows at its end. */
    void (*call_start)(void *ctx, int index, const char *name);
    void (*call_args)(void *ctx, int index, const char *s, size_t n);
} toolcall_sink;

typedef struct toolcall_parser toolcall_parser;

/* NULL: out of memory. */
toolcall_parser *toolcall_new(int max_calls);
void toolcall_free(toolcall_parser *p);

/* Accept a bare call object as the whole answer (see above); call before
 * the first feed. */
void toolcall_set_bare(toolcall_parser *p, int on);

/* Feed text; hands out what became decided. Returns 0, 1 once max_calls
 * calls were handed out (feed no more), -1 on allocation failure. */
int toolcall_feed(toolcall_parser *p, const char *s, size_t n, const toolcall_sink *k);

/* End of the text: hands out what was held (an unclosed block as content).
 * Returns 0 or -1 on allocation failure. */
int toolcall_finish(toolcall_parser *p, const toolcall_sink *k);

/* Calls handed out so far. */
int toolcall_count(const toolcall_parser *p);

#endif
