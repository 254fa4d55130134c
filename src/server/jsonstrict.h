/* jsonstrict.h - is a request body JSON by RFC 8259, strictly?
 *
 * cJSON (which the API parsers use to read fields) is lenient where a server
 * must not be: it ignores bytes after the first value (so two concatenated
 * objects or trailing garbage pass), skips every byte <= 0x20 as whitespace,
 * accepts raw control characters and raw NUL inside strings, and hands
 * strings back NUL-terminated, so a "\u0000" escape silently cut a prompt or
 * a stop string there. jansson is strict on exactly these points (trailing
 * data, control characters, \u0000 without JSON_ALLOW_NUL, duplicate keys
 * with JSON_REJECT_DUPLICATES), so every body is first validated by it; only
 * a body it accepts reaches cJSON, which then cannot misread it.
 */
#ifndef QW_JSONSTRICT_H
#define QW_JSONSTRICT_H

#include <stddef.h>

#include "server/api.h"

/* 0 if body[len] is one JSON value and nothing else (whitespace aside), with
 * no control character, NUL (raw or \u0000) or duplicate key anywhere;
 * otherwise -1 and e = 400 invalid_json with jansson's reason and position. */
int json_strict_check(const char *body, size_t len, api_error *e);

#endif
