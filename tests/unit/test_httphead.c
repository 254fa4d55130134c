/* test_httphead.c - the strict request-head checks the HTTP admission gate
 * runs before libmicrohttpd sees a connection (RFC 9112). */
#include <string.h>

#include "server/httphead.h"
#include "test.h"

/* Feed a chunked body to the scanner in pieces of `step` bytes; returns
 * the result and sets *at to where the body ended (or the bytes fed). */
static int scan(const char *body, size_t step, unsigned long long max, size_t *at) {
    httpchunk c = {0};
    size_t n = strlen(body), off = 0;
    int r = HTTPCHUNK_MORE;
    while (off < n && r == HTTPCHUNK_MORE) {
        size_t k = n - off < step ? n - off : step, used = 0;
        r = httpchunk_scan(&c, body + off, k, max, &used);
        off += used;
    }
    *at = off;
    return r;
}

static int check(const char *head) {
    char why[160] = "";
    size_t end = httphead_end(head, strlen(head));
    if (!end) return -1;
    return httphead_check(head, end, why, sizeof why);
}

int main(void) {
    /* where the head ends */
    CHECK(httphead_end("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody", 33) == 27, "crlf end");
    CHECK(httphead_end("GET / HTTP/1.1\nHost: a\n\n", 24) == 24, "lf end");
    CHECK(httphead_end("GET / HTTP/1.1\r\nHost: a\r\n", 25) == 0, "incomplete");

    /* acceptable */
    CHECK(check("GET /health HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\r\n") == 0, "plain GET");
    CHECK(check("GET /health HTTP/1.0\r\n\r\n") == 0, "HTTP/1.0 without Host");
    CHECK(check("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\n") == 0, "CL");
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\ncontent-length: 12\r\n\r\n") == 0,
          "two equal Content-Length");
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  Chunked \r\n\r\n") == 0, "chunked");

    /* refused */
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") == 501, "gzip");
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n") == 501, "identity");
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n") ==
              501, "two TE");
    CHECK(check("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n") == 400, "TE in 1.0");
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n") == 400,
          "TE + CL");
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\nContent-Length: 5\r\n\r\n") == 400,
          "conflicting CL");
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n") == 400, "CL list");
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n") == 400, "negative CL");
    CHECK(check("POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n") == 400, "empty CL");
    CHECK(check("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") == 400, "two Host");
    CHECK(check("GET / HTTP/1.1\r\n\r\n") == 400, "1.1 without Host");
    CHECK(check("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n folded\r\n\r\n") == 400, "obs-fold");
    CHECK(check("GET / HTTP/1.1\r\nHost: a\r\nBad Name: 1\r\n\r\n") == 400, "space in a name");
    CHECK(check("GET / HTTP/2.0\r\nHost: a\r\n\r\n") == 400, "HTTP/2.0 line");
    CHECK(check("GET /\r\nHost: a\r\n\r\n") == 400, "HTTP/0.9 line");
    CHECK(check("G(T / HTTP/1.1\r\nHost: a\r\n\r\n") == 400, "bad method");
    CHECK(check("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n") == 400, "bare CR");
    {
        const char h[] = "GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n";
        char why[160];
        CHECK(httphead_check(h, sizeof h - 1, why, sizeof why) == 400 && strstr(why, "NUL"), "NUL: %s", why);
    }
    /* the body's framing, for the gate */
    {
        static const char h[] = "POST / HTTP/1.1\r\nHost: a\r\ncontent-length:  42 \r\nExpect: 100-Continue\r\n\r\n";
        httphead_framing f;
        httphead_frame(h, sizeof h - 1, &f);
        CHECK(f.http11 && !f.chunked && f.length == 42 && !f.length_overflow && f.expect_continue, "framing CL");
        static const char c[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        httphead_frame(c, sizeof c - 1, &f);
        CHECK(f.chunked && f.length == 0 && !f.expect_continue, "framing chunked");
        static const char o[] = "POST / HTTP/1.0\r\nContent-Length: 18446744073709551616\r\n\r\n";
        httphead_frame(o, sizeof o - 1, &f);
        CHECK(!f.http11 && f.length_overflow, "framing: a Content-Length of 2^64 overflows");
    }
    /* the chunked scanner: the same answer whatever the pieces */
    static const char body[] = "5;name=\"v\"\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
    for (size_t step = 1; step <= sizeof body; step++) {
        size_t at;
        int r = scan(body, step, 1000, &at);
        CHECK(r == HTTPCHUNK_DONE && at == sizeof body - 1 - 4, "step %zu: %d at %zu", step, r, at);
    }
    size_t at;
    CHECK(scan("3\nabc\n0\n\n", 1, 1000, &at) == HTTPCHUNK_DONE, "bare LF framing");
    CHECK(scan("5\r\nhello\r\n0\r\n", 2, 1000, &at) == HTTPCHUNK_MORE, "no empty line yet: more");
    CHECK(scan("5\r\nhelloXX", 3, 1000, &at) == HTTPCHUNK_BAD, "data not followed by CRLF");
    CHECK(scan(";x\r\n", 1, 1000, &at) == HTTPCHUNK_BAD, "no size digits");
    CHECK(scan("3e9\r\n", 1, 1000, &at) == HTTPCHUNK_TOO_LARGE, "one chunk past the limit");
    CHECK(scan("200\r\n", 1, 1000, &at) == HTTPCHUNK_MORE, "512 of 1000: fine");
    CHECK(scan("FFFFFFFFFFFFFFFFFFFF\r\n", 1, ~0ULL, &at) == HTTPCHUNK_TOO_LARGE, "a size past 2^64");
    {
        httpchunk c = {0};
        size_t used;
        httpchunk_scan(&c, "10\r\nabc", 7, 1000, &used);
        CHECK(httpchunk_skip(&c) == 13, "inside a chunk: %llu data bytes still to come", httpchunk_skip(&c));
    }
    return test_summary();
}
