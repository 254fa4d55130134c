/* test_httphead.c - the strict request-head checks the HTTP admission gate
 * runs before libmicrohttpd sees a connection (RFC 9112). */
#include <string.h>

#include "server/httphead.h"
#include "test.h"

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
    return test_summary();
}
