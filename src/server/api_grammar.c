/* api_grammar.c - the constraint fields of a request: "response_format"
 * (OpenAI: text, json_object, json_schema) and "grammar" (llama.cpp's
 * server field: GBNF text), compiled into the request's grammar
 * (grammar.h). See api.h: api_parse_constraint. */
#include <cjson/cJSON.h>
#include <string.h>

#include "server/api.h"

static int present(const cJSON *j) { return j && !cJSON_IsNull(j); }

/* A compile error as a 400: the message of the grammar module names the
 * keyword and where it is (or the GBNF line and column). */
static int compile_fail(api_error *e, const char *param, const qw_err *err) {
    const char *code = strstr(err->msg, "unsupported") ? "unsupported_value" : "invalid_value";
    return api_fail(e, 400, code, param, "%s: %s", param, err->msg);
}

int api_parse_constraint(const void *json, api_req *r, api_error *e) {
    const cJSON *o = json;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "response_format");
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(o, "grammar");
    qw_err err = {{0}};
    r->constraint = NULL;
    if (present(rf)) {
        const cJSON *t = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (!cJSON_IsString(t))
            return api_fail(e, 400, "invalid_type", "response_format",
                            "'response_format' must be an object with a string \"type\" (text, json_object or "
                            "json_schema)");
        if (!strcmp(t->valuestring, "text")) {
            /* free text */
        } else if (!strcmp(t->valuestring, "json_object")) {
            if (grammar_compile_json_object(&r->constraint, &err)) return compile_fail(e, "response_format", &err);
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
            const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
            /* OpenAI: no schema = any JSON; strict or not, the output is
             * always held to the schema here (the subset is strict mode's) */
            if (!present(schema)) {
                if (grammar_compile_json_object(&r->constraint, &err))
                    return compile_fail(e, "response_format.json_schema", &err);
            } else if (grammar_compile_json_schema(&r->constraint, schema, &err)) {
                return compile_fail(e, "response_format.json_schema.schema", &err);
            }
        } else {
            return api_fail(e, 400, "unsupported_value", "response_format.type",
                            "'response_format.type' \"%.40s\" is not supported (text, json_object, json_schema)",
                            t->valuestring);
        }
    }
    if (present(gr)) {
        if (r->constraint) {
            grammar_release(r->constraint);
            r->constraint = NULL;
            return api_fail(e, 400, "invalid_value", "grammar",
                            "give either 'grammar' or a JSON 'response_format', not both");
        }
        if (!cJSON_IsString(gr))
            return api_fail(e, 400, "invalid_type", "grammar", "'grammar' must be a string (GBNF)");
        if (gr->valuestring[0] &&
            grammar_compile_gbnf(&r->constraint, gr->valuestring, strlen(gr->valuestring), NULL, &err))
            return compile_fail(e, "grammar", &err);
    }
    return 0;
}
