/* tools_grammar.c - the grammar forcing a tool call (tools.h: tools_gbnf).
 *
 * The output must be what Qwen2.5's template shows the model, so that the
 * forced text is also the most likely one:
 *   root    ::= tc-call                         (named, or not parallel)
 *   root    ::= tc-call ("\n" tc-call)*         (required or auto, parallel)
 *   root    ::= (calls as above) | rf           (auto with a response_format:
 *                                                a call or an answer in the
 *                                                format; rf its schema's rules)
 *   tc-call ::= "<tool_call>\n{\"name\": " (t0-call | t1-call | ...) "}\n</tool_call>"
 *   tK-call ::= "\"NAME\", \"arguments\": " tK
 * and tK the rules grammar_schema_to_gbnf() makes of tool K's parameters
 * (any JSON object when it has none). Names are [A-Za-z0-9_-] (tools_parse
 * checked), so they need no escaping inside a GBNF literal. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "grammar/grammar.h"
#include "server/tools.h"

int tools_gbnf(const void *json, const api_tools *t, const void *format, const char *format_param, char **gbnf,
               api_error *e) {
    const cJSON *o = json;
    *gbnf = NULL;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(o, "tools");
    int forced = t->mode == TOOLS_REQUIRED || t->mode == TOOLS_NAMED;
    if (!cJSON_IsArray(tools) || t->n == 0 || !(forced || (t->mode == TOOLS_AUTO && format)))
        return api_fail(e, 500, "internal_error", "tool_choice", "tools_gbnf: no call to force");
    strbuf head = {0}, rules = {0};
    int many = t->mode != TOOLS_NAMED && t->parallel;
    const char *calls = many ? "tc-call (\"\\n\" tc-call)*" : "tc-call";
    sb_str(&head, "root ::= ");
    sb_str(&head, calls);
    sb_str(&head, format ? " | rf\n" : "\n");
    if (format) {
        char *sub = NULL;
        qw_err err;
        if (grammar_schema_to_gbnf(format, "rf", &sub, &err)) {
            free(head.p);
            const char *p = format_param ? format_param : "response_format";
            return api_fail(e, 400, strstr(err.msg, "unsupported") ? "unsupported_value" : "invalid_value", p,
                            "%s: %s", p, err.msg);
        }
        sb_str(&rules, sub);
        sb_str(&rules, "\n");
        free(sub);
    }
    sb_str(&head, "tc-call ::= \"<tool_call>\\n{\\\"name\\\": \" (");
    int i = 0, alts = 0;
    const cJSON *tool;
    cJSON *any_object = cJSON_Parse("{\"type\":\"object\"}");
    int rc = -1;
    cJSON_ArrayForEach(tool, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        if (t->mode == TOOLS_NAMED && strcmp(name, t->named)) {
            i++;
            continue;
        }
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (!cJSON_IsObject(params)) params = any_object;
        char rule[16], *sub = NULL;
        snprintf(rule, sizeof rule, "t%d", i);
        qw_err err;
        if (grammar_schema_to_gbnf(params, rule, &sub, &err)) {
            char param[96];
            snprintf(param, sizeof param, "tools[%d].function.parameters", i);
            api_fail(e, 400, "unsupported_schema", param, "'%s': %s", param, err.msg);
            goto out;
        }
        char line[256];
        snprintf(line, sizeof line, "%s t%d-call", alts ? " |" : "", i);
        sb_str(&head, line);
        snprintf(line, sizeof line, "t%d-call ::= \"\\\"%s\\\", \\\"arguments\\\": \" t%d\n", i, name, i);
        sb_str(&rules, line);
        sb_str(&rules, sub);
        sb_str(&rules, "\n");
        free(sub);
        alts++;
        i++;
    }
    sb_str(&head, " ) \"}\\n</tool_call>\"\n");
    sb_add(&head, rules.p ? rules.p : "", rules.n);
    if (head.failed || rules.failed) {
        api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        goto out;
    }
    *gbnf = head.p;
    head.p = NULL;
    rc = 0;
out:
    cJSON_Delete(any_object);
    free(head.p);
    free(rules.p);
    return rc;
}
