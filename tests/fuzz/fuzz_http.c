/* fuzz_http.c - the HTTP request path as a whole, in process: the real
 * server (admission gate, libmicrohttpd, src/server/http.c routing, body
 * handling and head checks) on a loopback port, with no model loaded (every
 * generation endpoint answers 503 "loading" after its body is read and
 * checked). Each input is sent on a fresh connection, which is then
 * half-closed; the server must answer or close within the timeout, and
 * must keep answering /health (no crash, no hang, no stuck thread). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "server/http.h"

/* Server threads outlive an input: per-input leak checks would misfire. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

static qw_http *srv;
static int port;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    qw_log_set_level(QW_LOG_QUIET);
    qw_http_cfg c = {.host = "127.0.0.1", .port = 0, .max_body = 64 * 1024, .max_conns = 64, .header_timeout = 2};
    qw_err err;
    srv = http_start(&c, &err);
    if (!srv) {
        fprintf(stderr, "fuzz_http: %s\n", err.msg);
        exit(2);
    }
    port = http_port(srv);
    return 0;
}

static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int rc;
    do rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    while (rc < 0 && errno == EINTR); /* libFuzzer's timeout alarm */
    FUZZ_ASSERT(rc == 0, "connect: %s", strerror(errno));
    struct timeval tv = {.tv_sec = 8};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Close without TIME_WAIT (an abortive close: linger 0). Two connections
 * per input at thousands of inputs a second would otherwise hold every
 * local port of the loopback range in TIME_WAIT within seconds, and
 * connect() would fail with EADDRNOTAVAIL: a limit of the harness, not a
 * fault of the server. Only called once the answer was read to its end. */
static void hang_up(int fd) {
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    int fd = dial();
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(fd, d + off, n - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    char buf[8192];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR) continue; /* libFuzzer's timeout alarm */
        if (r == 0) break;
        if (r < 0) {
            FUZZ_ASSERT(errno != EAGAIN && errno != EWOULDBLOCK, "no answer nor close within 8 s");
            break; /* reset */
        }
    }
    hang_up(fd);
    /* Still serving. */
    static const char health[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    char h[512];
    fd = dial();
    send(fd, health, sizeof health - 1, MSG_NOSIGNAL);
    ssize_t r;
    do r = recv(fd, h, sizeof h - 1, 0);
    while (r < 0 && errno == EINTR);
    int e = errno;
    hang_up(fd);
    if (r > 0) h[r] = 0;
    FUZZ_ASSERT(r > 12 && !memcmp(h, "HTTP/1.1 ", 9), "the server stopped answering /health: recv %zd (%s): %.60s",
                r, r < 0 ? strerror(e) : "", r > 0 ? h : "");
    return 0;
}
