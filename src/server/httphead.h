/* httphead.h - strict checks on a raw HTTP/1.x request head.
 *
 * libmicrohttpd 0.9 lets through what a server exposed to real clients (or
 * sitting behind a proxy that reads headers differently) must refuse: two
 * different Content-Length headers, Transfer-Encoding codings it cannot
 * decode (the connection then hangs until its timeout), two Host headers
 * (the first one was checked), a NUL inside a header. The admission gate
 * (gate.c) runs this on the head it peeked at, before libmicrohttpd sees
 * the connection, and answers a refusal itself.
 */
#ifndef QW_HTTPHEAD_H
#define QW_HTTPHEAD_H

#include <stddef.h>

/* Where the head (request line + headers) ends in buf[n]: the offset just
 * past its empty line ("\r\n\r\n" or "\n\n"), or 0 if it is not complete. */
size_t httphead_end(const char *buf, size_t n);

/* Check the complete head buf[n] (n as httphead_end gave). Returns 0 if
 * acceptable, else the HTTP status to answer (400, or 501 for a
 * Transfer-Encoding other than plain "chunked") with a one-line reason in
 * why[why_len]. */
int httphead_check(const char *buf, size_t n, char *why, size_t why_len);

#endif
