/* jsonstrict.c - see jsonstrict.h. */
#include "server/jsonstrict.h"

#include <jansson.h>

int json_strict_check(const char *body, size_t len, api_error *e) {
    json_error_t je;
    /* DECODE_ANY: a non-object body gets the API parsers' own, more precise
     * message. INT_AS_REAL: integer range is the field checks' business
     * (cJSON reads every number as a double too), not a parse error. */
    json_t *j = json_loadb(body ? body : "", body ? len : 0,
                           JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
    if (!j)
        return api_fail(e, 400, "invalid_json", NULL, "the body is not valid JSON: %s (byte %d)", je.text,
                        je.position);
    json_decref(j);
    return 0;
}
