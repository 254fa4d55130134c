/* api_grammar.c - the one grammar of an answer, from the request's
 * "response_format" (OpenAI: text, json_object, json_schema), "grammar"
 * (llama.cpp's server field: GBNF text) and tools (a forced call, or a
 * call-or-format union), compiled into r->constraint (grammar.h). The
 * precedence rules are api.h's (api_parse_constraint) and
 * docs/grammar.md's. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "server/tools.h"

static int present(const cJSON *j) { return j && !cJSON_IsNull(j); }

/* A compile error as a 400: the message of the grammar module names the
 * keyword and where it is (or the GBNF line and column). */
static int compile_fail(api_error *e, const char *param, const qw_err *err) {
    const char *code = strstr(err->msg, "unsupported") ? "unsupported_value" : "invalid_value";
    return api_fail(e, 400, code, param, "%s: %s", param, err->msg);
}

/* response_format, checked: *schema the JSON schema the answer must match
 * (borrowed from json, or *owned when made here: json_object, a
 * json_schema without "schema"), NULL for text or none; *param the field
 * to name in a schema's errors. */
static int parse_format(const cJSON *o, const cJSON **schema, cJSON **owned, const char **param, api_error *e) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "response_format");
    *schema = NULL;
    *owned = NULL;
    *param = "response_format";
    if (!present(rf)) return 0;
    const cJSON *t = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
    if (!cJSON_IsString(t))
        return api_fail(e, 400, "invalid_type", "response_format",
                        "'response_format' must be an object with a string \"type\" (text, json_object or "
                        "json_schema)");
    if (!strcmp(t->valuestring, "text")) return 0; /* free text */
    if (!strcmp(t->valuestring, "json_object")) {
        *owned = cJSON_Parse("{\"type\":\"object\"}");
    } else if (!strcmp(t->valuestring, "json_schema")) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
        if (!cJSON_IsObject(js))
            return api_fail(e, 400, "invalid_type", "response_format.json_schema",
                            "'response_format.json_schema' must be an object with a \"schema\"");
        const cJSON *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
        if (present(strict) && !cJSON_IsBool(strict))
            return api_fail(e, 400, "invalid_type", "response_format.json_schema.strict",
                            "'response_format.json_schema.strict' must be a boolean");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(js, "name");
        if (present(name) && !cJSON_IsString(name))
            return api_fail(e, 400, "invalid_type", "response_format.json_schema.name",
                            "'response_format.json_schema.name' must be a string");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(js, "schema");
        /* OpenAI: no schema = any JSON object; strict or not, the output is
         * always held to the schema here (the subset is strict mode's) */
        if (present(sc)) {
            *schema = sc;
            *param = "response_format.json_schema.schema";
            return 0;
        }
        *owned = cJSON_Parse("{\"type\":\"object\"}");
        *param = "response_format.json_schema";
    } else {
        return api_fail(e, 400, "unsupported_value", "response_format.type",
                        "'response_format.type' \"%.40s\" is not supported (text, json_object, json_schema)",
                        t->valuestring);
    }
    if (!*owned) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    *schema = *owned;
    return 0;
}

/* GBNF the server generated (a tool-call grammar): compiled, or a 500. */
static int compile_ours(api_req *r, const char *gbnf, const char *param, api_error *e) {
    qw_err err = {{0}};
    if (grammar_compile_gbnf(&r->constraint, gbnf, strlen(gbnf), "root", &err))
        return api_fail(e, 500, "grammar_error", param, "cannot build the tool-call grammar: %s", err.msg);
    r->constraint_param = param;
    return 0;
}

int api_parse_constraint(const void *json, const struct api_tools *tools, api_req *r, api_error *e) {
    const cJSON *o = json;
    qw_err err = {{0}};
    r->constraint = NULL;
    r->constraint_param = NULL;
    const cJSON *schema;
    cJSON *owned;
    const char *fparam;
    if (parse_format(o, &schema, &owned, &fparam, e) < 0) return -1;
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(o, "grammar");
    tools_mode mode = tools ? tools->mode : TOOLS_OFF;
    int rc = -1;
    if (present(gr)) {
        if (!cJSON_IsString(gr)) {
            api_fail(e, 400, "invalid_type", "grammar", "'grammar' must be a string (GBNF)");
            goto out;
        }
        if (schema) {
            api_fail(e, 400, "invalid_value", "grammar", "give either 'grammar' or a JSON 'response_format', not both");
            goto out;
        }
        if (mode != TOOLS_OFF) {
            api_fail(e, 400, "invalid_value", "grammar",
                     "'grammar' cannot be used with tools (unless tool_choice is \"none\"): tool calls have their own "
                     "grammar; use 'response_format' to shape a text answer");
            goto out;
        }
    }
    if (mode == TOOLS_REQUIRED || mode == TOOLS_NAMED || (mode == TOOLS_AUTO && schema)) {
        /* A forced call is the whole answer: a response_format shapes text
         * answers only, so it is checked (a keyword outside the subset is
         * still a 400) but leaves this answer alone. With tool_choice auto,
         * a call or an answer in the format. */
        int with_format = mode == TOOLS_AUTO;
        char *gbnf = NULL;
        if (schema && !with_format) {
            if (grammar_schema_to_gbnf(schema, "rf", &gbnf, &err)) {
                compile_fail(e, fparam, &err);
                goto out;
            }
            free(gbnf);
            gbnf = NULL;
        }
        if (tools_gbnf(o, tools, with_format ? schema : NULL, fparam, &gbnf, e) < 0) goto out;
        rc = compile_ours(r, gbnf, with_format ? "response_format" : "tool_choice", e);
        free(gbnf);
        goto out;
    }
    if (schema) {
        if (grammar_compile_json_schema(&r->constraint, schema, &err)) {
            compile_fail(e, fparam, &err);
            goto out;
        }
        r->constraint_param = "response_format";
    } else if (present(gr) && gr->valuestring[0]) {
        if (grammar_compile_gbnf(&r->constraint, gr->valuestring, strlen(gr->valuestring), NULL, &err)) {
            compile_fail(e, "grammar", &err);
            goto out;
        }
        r->constraint_param = "grammar";
    }
    rc = 0;
out:
    cJSON_Delete(owned);
    if (rc != 0) {
        grammar_release(r->constraint);
        r->constraint = NULL;
        r->constraint_param = NULL;
    }
    return rc;
}
