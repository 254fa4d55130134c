/* tools.h - OpenAI function calling on top of Qwen2.5's tool-call format:
 * the request fields (tools, tool_choice, parallel_tool_calls, assistant
 * messages' tool_calls), the grammar that forces a call, and the
 * tool_calls of responses and stream chunks. Pure functions (no server, no
 * model), unit-tested in tests/unit/test_tools.c.
 *
 * Request:
 *   tools               [{"type": "function", "function": {"name",
 *                       "description"?, "parameters"? (a JSON Schema object),
 *                       "strict"?}}]; names match [A-Za-z0-9_-]{1,64} and
 *                       are unique. The array's JSON text goes to the chat
 *                       template exactly as sent (tojson.h).
 *   tool_choice         "none": the tools are not put in the prompt and the
 *                       answer is not parsed for calls (plain text);
 *                       "auto" (the default with tools): the model chooses,
 *                       its <tool_call> blocks become tool_calls;
 *                       "required": the output is forced (grammar) to be
 *                       one call or more (one without parallel calls);
 *                       {"type": "function", "function": {"name": N}}: forced
 *                       to call N. Forced arguments match the function's
 *                       parameters schema (grammar_schema_to_gbnf's subset:
 *                       a keyword outside it is a 400 naming it).
 *   parallel_tool_calls false: at most one call (generation stops after it).
 *   messages[i].tool_calls  [{"id"?, "type": "function", "function": {"name",
 *                       "arguments": a string holding JSON}}] on assistant
 *                       messages; arguments are rendered as their parsed
 *                       value (what transformers expects), so they must be
 *                       valid JSON.
 * Every error is a 400 naming the field (api_error). */
#ifndef QW_TOOLS_H
#define QW_TOOLS_H

#include <stddef.h>

#include "server/api.h"
#include "tokenizer/tokenizer.h"

typedef enum {
    TOOLS_OFF = 0,  /* no tools, or tool_choice "none" */
    TOOLS_AUTO,
    TOOLS_REQUIRED,
    TOOLS_NAMED,
} tools_mode;

typedef struct api_tools {
    tools_mode mode;
    const char *json;  /* the tools array's JSON text, a span of the body (NULL: none) */
    size_t json_len;
    int n;             /* number of tools */
    int parallel;      /* parallel_tool_calls (default 1) */
    char named[72];    /* TOOLS_NAMED: the function to call */
} api_tools;

/* Parse tools / tool_choice / parallel_tool_calls of the request object o
 * (a cJSON object, void * as in api.h) whose text is body[len]. Returns 0
 * (t->mode TOOLS_OFF when there are no tools) or -1 and e. The legacy
 * "functions" / "function_call" fields stay unsupported (400). */
int tools_parse(const void *o, const char *body, size_t len, api_tools *t, api_error *e);

/* The GBNF that forces the output for TOOLS_REQUIRED / TOOLS_NAMED (o as
 * above): Qwen2.5's call blocks, exactly as the template writes them,
 *   <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>
 * ARGS following N's parameters schema; with parallel calls, one or more
 * blocks separated by "\n". *gbnf malloc'd. -1 and e (400 naming the
 * tool's parameters) if a schema is outside the grammar engine's subset.
 * A named function is called once; "required" makes one call, or one or
 * more when parallel. format (a cJSON JSON Schema, or NULL), for
 * TOOLS_AUTO with a response_format: the calls or an answer matching the
 * format (a schema error is a 400 naming format_param). (tools_grammar.c) */
int tools_gbnf(const void *o, const api_tools *t, const void *format, const char *format_param, char **gbnf,
               api_error *e);

/* The tool_calls of messages[index] (m: its cJSON object) as qw_tool_call
 * pointing into m (valid while m lives); *calls malloc'd (NULL, 0 when
 * none). -1 and e on a malformed call. */
int tools_message_calls(const void *m, int index, qw_tool_call **calls, size_t *n, api_error *e);

/* A call the model made (toolcall.h's output), for responses. */
typedef struct api_tool_call {
    char id[48];       /* "call_" + request-unique suffix */
    char *name;
    char *arguments;   /* JSON text */
} api_tool_call;

/* "call_<req_id tail>_<index>" into id[48]: unique within the server as
 * request ids are. */
void tools_call_id(char id[48], const char *req_id, int index);

/* [{"id","type":"function","function":{"name","arguments"}}] (cJSON array,
 * void * as above). For a stream delta, with_index adds "index". */
void *tools_calls_json(const api_tool_call *calls, int n, int with_index, int first_index);

#endif
