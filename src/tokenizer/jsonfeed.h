/* jsonfeed.h - one JSON value re-serialised as tojson.h writes it, while it
 * streams in: for a streamed tool call's arguments (toolcall.h), whose
 * fragments must add up to the arguments of the whole answer.
 *
 * Fed in pieces of any size, it writes the output as soon as it is
 * decided: whitespace between tokens dropped, "," and ":" written ", " and
 * ": ", string characters passed through as they come (an escape held
 * until it is complete, a surrogate pair until both halves are in, then
 * written as tojson writes it: "\/" -> "/", "\u00e9" -> "é", "\u0001"
 * stays), a number or literal held until it ends (tojson's number rules:
 * "1E2" -> "100.0"). It tracks nesting and reports the end of the value.
 *
 * For valid JSON without repeated object keys the concatenated output
 * equals tojson_dumps() of the whole text, however the text was cut
 * (tests/tokenizer/test_jsonfeed.c). A repeated key is written each time
 * (json.loads keeps the last value, as tojson would). It is not a
 * validator: from a byte that cannot be JSON on (bad UTF-8, a control
 * character in a string, a broken escape or number) the rest of the text
 * is passed through unchanged, so nothing the model wrote is lost.
 *
 * Not thread-safe; no allocation but the output buffer's. */
#ifndef QW_JSONFEED_H
#define QW_JSONFEED_H

#include <stddef.h>

#include "base/strbuf.h"

typedef struct jsonfeed {
    int state;        /* JF_* (jsonfeed.c) */
    int depth;        /* open objects / arrays */
    int started;      /* a value began */
    int done;         /* the value ended: later bytes are not read */
    char held[64];    /* an escape, number or literal not yet complete (a longer number passes through as it came) */
    size_t n_held;
    size_t n_utf8;    /* string: bytes of a UTF-8 character still to come */
} jsonfeed;

void jsonfeed_init(jsonfeed *f);

/* Feed s[n]; appends the decided output to out. Returns the bytes read:
 * n, or fewer when the value ended inside the piece (the rest is not part
 * of it). */
size_t jsonfeed_feed(jsonfeed *f, const char *s, size_t n, strbuf *out);

/* The text ends: whatever is held goes out (a number or literal
 * normalised if it is complete, else as it came). */
void jsonfeed_finish(jsonfeed *f, strbuf *out);

/* 1 once the value has ended (its last '}' / ']' or token was read). */
int jsonfeed_done(const jsonfeed *f);

#endif
