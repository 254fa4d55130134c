/* tojson.h - JSON text re-serialised exactly as the chat templates' `tojson`
 * filter writes it.
 *
 * transformers renders chat templates with its own `tojson` filter:
 * json.dumps(x, ensure_ascii=False) on the Python value json.loads() made of
 * the JSON the client sent. That fixes every byte of the output:
 *   separators ", " and ": ", no newlines, keys in the order given;
 *   a duplicate key keeps its first position and takes its last value
 *     (Python's dict);
 *   strings: `"` `\\` \n \r \t \b \f escaped, other characters below 0x20 as
 *     \u00xx (lower-case hex), everything else (DEL, non-ASCII) raw UTF-8;
 *     \uXXXX escapes in the input (surrogate pairs included) decoded;
 *   integers (no '.', 'e', 'E'): the digits as written ("-0" -> "0");
 *   other numbers: Python's repr(float): the shortest digits that round-trip,
 *     fixed notation with at least one decimal ("1.0", "0.0001") when the
 *     decimal exponent is in [-4, 16), else "1e-05" / "1.5e+16"; an overflow
 *     to infinity is "Infinity" / "-Infinity".
 * Input must be strict JSON (RFC 8259) in UTF-8; a lone surrogate escape,
 * invalid UTF-8, nesting deeper than TOJSON_MAX_DEPTH or trailing bytes are
 * errors. Pure functions; thread-safe. */
#ifndef QW_TOJSON_H
#define QW_TOJSON_H

#include <stddef.h>

#include "base/err.h"

#define TOJSON_MAX_DEPTH 128

/* Re-serialise json[len] into *out[*out_len] (malloc'd, NUL-terminated).
 * 0, or -1 with a message naming the byte offset. */
int tojson_dumps(const char *json, size_t len, char **out, size_t *out_len, qw_err *err);

/* The value of member `key` of the JSON object json[len] as a span of the
 * input (*val, *val_len; the last one if the key repeats, as Python keeps).
 * Returns 1 if found, 0 if json is an object without the key, -1 if json is
 * not a valid JSON object. */
int tojson_member(const char *json, size_t len, const char *key, const char **val, size_t *val_len,
                  qw_err *err);

/* Element i of the JSON array json[len] as a span of the input. Returns 1 if
 * found, 0 if the array is shorter, -1 if json is not a valid JSON array. */
int tojson_item(const char *json, size_t len, size_t i, const char **val, size_t *val_len, qw_err *err);

/* The JSON type of json[len] after leading whitespace: one of
 * 'o' object, 'a' array, 's' string, 'n' number, 't' true, 'f' false,
 * 'z' null; 0 if it does not start like a JSON value. */
char tojson_type(const char *json, size_t len);

#endif
