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

/* How the body of an acceptable head (httphead_check() said 0) is framed,
 * for the gate, which holds a connection until its body has arrived too. */
typedef struct httphead_framing {
    int http11;
    int chunked;                   /* Transfer-Encoding: chunked */
    unsigned long long length;     /* Content-Length (0 when absent) */
    int length_overflow;           /* a Content-Length beyond 2^64 */
    int expect_continue;           /* Expect: 100-continue */
} httphead_framing;
void httphead_frame(const char *buf, size_t n, httphead_framing *f);

/* An incremental scanner for a chunked body (RFC 9112 7.1): fed the body's
 * bytes in order, in as many pieces as they come, it finds where the body
 * ends (the terminating chunk and the trailer section). */
typedef struct httpchunk {
    int state;
    unsigned long long size;       /* of the chunk being read */
    unsigned long long left;       /* its data bytes still to come */
    unsigned long long total;      /* data bytes so far */
    int digits;
} httpchunk;

enum { HTTPCHUNK_MORE = 0, HTTPCHUNK_DONE = 1, HTTPCHUNK_BAD = -1, HTTPCHUNK_TOO_LARGE = -2 };

/* Scan p[n]; *used is set to the bytes consumed (all of them unless DONE,
 * BAD or TOO_LARGE). TOO_LARGE: the chunk sizes add up past max_data.
 * While inside a chunk's data, httpchunk_skip() says how many more bytes
 * cannot change the answer (the caller need not look before they come). */
int httpchunk_scan(httpchunk *c, const char *p, size_t n, unsigned long long max_data, size_t *used);
unsigned long long httpchunk_skip(const httpchunk *c);

#endif
