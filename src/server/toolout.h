/* toolout.h - a chat answer with tools, from generated text to OpenAI
 * documents: the model's <tool_call> blocks (toolcall.h, bare objects
 * accepted) become message.tool_calls / delta.tool_calls, the rest content,
 * and finish_reason "tool_calls" when a call was made.
 *
 * Built on api.h's documents (api_chat_json, api_sse_chunk), which it
 * reshapes, so everything else (usage, timings, ids) stays as the plain
 * answer has it. Streaming, as OpenAI streams: content deltas as the text
 * is decided; for a call, a first delta with index, id, type and
 * function.name with arguments "", then deltas with pieces of the
 * arguments as they are generated (toolcall.h: held back only while they
 * could be the start of "</tool_call>"); the pieces add up to the
 * non-streamed answer's arguments. A call read whole (not in the
 * template's shape) comes as one delta. Not thread-safe: one per request. */
#ifndef QW_TOOLOUT_H
#define QW_TOOLOUT_H

#include <stddef.h>

#include "server/api.h"
#include "server/tools.h"

typedef struct api_toolout api_toolout;

/* For choice `index` of a request whose tools mode is not TOOLS_OFF.
 * req_id names the call ids (tools_call_id; choice i > 0 adds "c<i>").
 * NULL: out of memory. */
api_toolout *toolout_new(const api_tools *t, const char *req_id, int index);
void toolout_free(api_toolout *o);

/* Streaming: the SSE events (malloc'd "data: ...\n\n" text, possibly "")
 * for a new piece of generated text. *stop set to 1 when the call limit
 * (parallel_tool_calls false) is reached: generation should end. NULL: out
 * of memory. */
char *toolout_sse_piece(api_toolout *o, const api_meta *m, const char *piece, size_t n, int *stop);
/* Streaming, end of text: the events for what was held back. */
char *toolout_sse_flush(api_toolout *o, const api_meta *m);

/* "tool_calls" if calls were made, else engine_finish. */
const char *toolout_finish(const api_toolout *o, const char *engine_finish);

/* Non-streaming, in two steps (for several choices): parse the whole
 * generated text (0, -1 out of memory); then the content that is left
 * (for api_choice.text), and patch the choice's object of the answer
 * document (void *: a cJSON choices[i]): message.content null when empty
 * and calls were made, message.tool_calls, finish_reason. */
int toolout_parse(api_toolout *o, const char *text, size_t len);
const char *toolout_content(const api_toolout *o, size_t *len);
void toolout_patch(api_toolout *o, void *choice);

/* Both steps for a one-choice answer: r->text is the whole generated text;
 * the chat.completion document. NULL: out of memory. */
char *toolout_chat_json(api_toolout *o, const api_meta *m, const api_result *r);

#endif
