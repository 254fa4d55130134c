/* tools.c - OpenAI function-calling fields and documents (tools.h). The
 * grammar that forces a call is in tools_grammar.c. */
#include "server/tools.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tojson.h"

static int present(const cJSON *j) { return j && !cJSON_IsNull(j); }

/* OpenAI's rule for function names. */
static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int check_tool(const cJSON *tool, int i, const char **name, api_error *e) {
    char param[96];
    snprintf(param, sizeof param, "tools[%d]", i);
    if (!cJSON_IsObject(tool)) return api_fail(e, 400, "invalid_type", param, "'%s' must be an object", param);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tool, "type");
    snprintf(param, sizeof param, "tools[%d].type", i);
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        return api_fail(e, 400, "invalid_value", param, "'%s' must be \"function\" (the only tool type served)", param);
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
    snprintf(param, sizeof param, "tools[%d].function", i);
    if (!cJSON_IsObject(fn)) return api_fail(e, 400, "missing_field", param, "'%s' must be an object", param);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
    snprintf(param, sizeof param, "tools[%d].function.name", i);
    if (!cJSON_IsString(nm)) return api_fail(e, 400, "missing_field", param, "'%s' must be a string", param);
    if (!valid_name(nm->valuestring))
        return api_fail(e, 400, "invalid_value", param, "'%s' is \"%.80s\"; names are 1 to 64 of a-z A-Z 0-9 _ -",
                        param, nm->valuestring);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(fn, "description");
    snprintf(param, sizeof param, "tools[%d].function.description", i);
    if (present(d) && !cJSON_IsString(d)) return api_fail(e, 400, "invalid_type", param, "'%s' must be a string", param);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    snprintf(param, sizeof param, "tools[%d].function.parameters", i);
    if (present(p) && !cJSON_IsObject(p))
        return api_fail(e, 400, "invalid_type", param, "'%s' must be a JSON Schema object", param);
    *name = nm->valuestring;
    return 0;
}

int tools_parse(const void *json, const char *body, size_t len, api_tools *t, api_error *e) {
    const cJSON *o = json;
    memset(t, 0, sizeof *t);
    t->parallel = 1;
    static const char *const legacy[] = {"functions", "function_call"};
    for (int i = 0; i < 2; i++)
        if (present(cJSON_GetObjectItemCaseSensitive(o, legacy[i])))
            return api_fail(e, 400, "unsupported_field", legacy[i],
                            "'%s' (legacy function calling) is not supported; use 'tools' and 'tool_choice'",
                            legacy[i]);
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(o, "parallel_tool_calls");
    if (present(pt)) {
        if (!cJSON_IsBool(pt))
            return api_fail(e, 400, "invalid_type", "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        t->parallel = cJSON_IsTrue(pt);
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(o, "tools");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(o, "tool_choice");
    if (present(tools) && !cJSON_IsArray(tools))
        return api_fail(e, 400, "invalid_type", "tools", "'tools' must be a list of tools");
    t->n = present(tools) ? cJSON_GetArraySize(tools) : 0;
    int i = 0;
    const cJSON *tool;
    if (t->n) {
        cJSON_ArrayForEach(tool, tools) {
            const char *name = NULL;
            if (check_tool(tool, i, &name, e)) return -1;
            int k = 0;
            const cJSON *prev;
            cJSON_ArrayForEach(prev, tools) {
                if (k++ >= i) break;
                const cJSON *pn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(prev, "function"), "name");
                if (!strcmp(pn->valuestring, name)) {
                    char param[96];
                    snprintf(param, sizeof param, "tools[%d].function.name", i);
                    return api_fail(e, 400, "invalid_value", param, "'%s': \"%s\" is defined twice", param, name);
                }
            }
            i++;
        }
        qw_err err;
        if (tojson_member(body, len, "tools", &t->json, &t->json_len, &err) != 1)
            return api_fail(e, 400, "invalid_json", "tools", "'tools': %s", err.msg);
    }
    t->mode = t->n ? TOOLS_AUTO : TOOLS_OFF;
    if (!present(tc)) return 0;
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        if (!strcmp(s, "none")) t->mode = TOOLS_OFF;
        else if (!strcmp(s, "auto")) ; /* the default */
        else if (!strcmp(s, "required")) t->mode = TOOLS_REQUIRED;
        else
            return api_fail(e, 400, "invalid_value", "tool_choice",
                            "'tool_choice' is \"%.40s\"; expected none, auto, required or "
                            "{\"type\": \"function\", \"function\": {\"name\": ...}}", s);
        if (t->mode == TOOLS_REQUIRED && !t->n)
            return api_fail(e, 400, "invalid_value", "tool_choice", "'tool_choice' is \"required\" but no 'tools' are given");
        return 0;
    }
    const cJSON *type = cJSON_IsObject(tc) ? cJSON_GetObjectItemCaseSensitive(tc, "type") : NULL;
    const cJSON *fn = cJSON_IsObject(tc) ? cJSON_GetObjectItemCaseSensitive(tc, "function") : NULL;
    const cJSON *nm = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsString(nm))
        return api_fail(e, 400, "invalid_value", "tool_choice",
                        "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    i = 0;
    if (t->n) {
        cJSON_ArrayForEach(tool, tools) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tool, "function"), "name");
            if (!strcmp(n->valuestring, nm->valuestring)) break;
            i++;
        }
    }
    if (i >= t->n)
        return api_fail(e, 400, "invalid_value", "tool_choice.function.name",
                        "'tool_choice.function.name' is \"%.64s\", which is not one of the 'tools'", nm->valuestring);
    t->mode = TOOLS_NAMED;
    snprintf(t->named, sizeof t->named, "%s", nm->valuestring);
    return 0;
}

int tools_message_calls(const void *json, int index, qw_tool_call **calls, size_t *n, api_error *e) {
    const cJSON *m = json;
    *calls = NULL;
    *n = 0;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    char param[128];
    snprintf(param, sizeof param, "messages[%d].tool_calls", index);
    if (!present(tc)) return 0;
    if (!cJSON_IsArray(tc)) return api_fail(e, 400, "invalid_type", param, "'%s' must be a list", param);
    int cnt = cJSON_GetArraySize(tc);
    if (!cnt) return 0;
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(role) || strcmp(role->valuestring, "assistant"))
        return api_fail(e, 400, "invalid_value", param, "'%s' is only allowed on assistant messages", param);
    qw_tool_call *c = calloc((size_t)cnt, sizeof *c);
    if (!c) return api_fail(e, 500, "out_of_memory", param, "out of memory");
    int k = 0;
    const cJSON *call;
    cJSON_ArrayForEach(call, tc) {
        const cJSON *fn = cJSON_IsObject(call) ? cJSON_GetObjectItemCaseSensitive(call, "function") : NULL;
        const cJSON *type = cJSON_IsObject(call) ? cJSON_GetObjectItemCaseSensitive(call, "type") : NULL;
        const cJSON *nm = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
        const cJSON *args = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d]", index, k);
        if (present(type) && !(cJSON_IsString(type) && !strcmp(type->valuestring, "function"))) {
            free(c);
            return api_fail(e, 400, "invalid_value", param, "'%s.type' must be \"function\"", param);
        }
        if (!cJSON_IsString(nm)) {
            free(c);
            return api_fail(e, 400, "missing_field", param, "'%s.function.name' must be a string", param);
        }
        const char *a = "{}";
        if (present(args)) {
            if (!cJSON_IsString(args)) {
                free(c);
                return api_fail(e, 400, "invalid_type", param,
                                "'%s.function.arguments' must be a string holding JSON", param);
            }
            a = args->valuestring;
            char *chk;
            qw_err err;
            if (tojson_dumps(a, strlen(a), &chk, NULL, &err)) {
                free(c);
                return api_fail(e, 400, "invalid_value", param, "'%s.function.arguments' is not valid JSON (%s)", param,
                                err.msg);
            }
            free(chk);
        }
        c[k].name = nm->valuestring;
        c[k].arguments = a;
        k++;
    }
    *calls = c;
    *n = (size_t)k;
    return 0;
}

void tools_call_id(char id[48], const char *req_id, int index) {
    const char *tail = req_id ? strrchr(req_id, '-') : NULL;
    tail = tail ? tail + 1 : (req_id ? req_id : "0");
    snprintf(id, 48, "call_%.32s_%d", tail, index);
}

void *tools_calls_json(const api_tool_call *calls, int n, int with_index, int first_index) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *c = cJSON_CreateObject();
        if (with_index) cJSON_AddNumberToObject(c, "index", first_index + i);
        cJSON_AddStringToObject(c, "id", calls[i].id);
        cJSON_AddStringToObject(c, "type", "function");
        cJSON *f = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(f, "name", calls[i].name);
        cJSON_AddStringToObject(f, "arguments", calls[i].arguments);
        cJSON_AddItemToArray(arr, c);
    }
    return arr;
}
