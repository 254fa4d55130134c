/* test_sha.c - SHA-256 and SHA-1 against the FIPS 180 example vectors, split
 * updates, and the git blob id of a file against `git hash-object`'s value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hub/sha.h"
#include "test.h"

static void hex256(const void *d, size_t n, char out[65], size_t step) {
    sha256_ctx c;
    sha256_init(&c);
    for (size_t i = 0; i < n; i += step) sha256_update(&c, (const char *)d + i, n - i < step ? n - i : step);
    uint8_t dg[32];
    sha256_final(&c, dg);
    sha_hex(out, dg, 32);
}

static void hex1(const void *d, size_t n, char out[41], size_t step) {
    sha1_ctx c;
    sha1_init(&c);
    for (size_t i = 0; i < n; i += step) sha1_update(&c, (const char *)d + i, n - i < step ? n - i : step);
    uint8_t dg[20];
    sha1_final(&c, dg);
    sha_hex(out, dg, 20);
}

int main(void) {
    char h[65];
    /* FIPS 180-2 appendix B / C examples. */
    hex256("abc", 3, h, 3);
    CHECK(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s", h);
    hex256("", 0, h, 1);
    CHECK(!strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "%s", h);
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    for (size_t step = 1; step <= 64; step *= 3) {
        hex256(m2, strlen(m2), h, step);
        CHECK(!strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "step %zu: %s", step, h);
    }
    size_t n = 1000000;
    char *a = malloc(n);
    memset(a, 'a', n);
    hex256(a, n, h, 4097);
    CHECK(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "%s", h);

    hex1("abc", 3, h, 3);
    CHECK(!strcmp(h, "a9993e364706816aba3e25717850c26c9cd0d89d"), "%s", h);
    for (size_t step = 1; step <= 64; step *= 3) {
        hex1(m2, strlen(m2), h, step);
        CHECK(!strcmp(h, "84983e441c3bd26ebaae4aa1f95129e5e54670f1"), "step %zu: %s", step, h);
    }
    hex1(a, n, h, 65537);
    CHECK(!strcmp(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"), "%s", h);
    free(a);

    /* Files: `printf 'hello world\n' | git hash-object --stdin` and sha256sum. */
    char path[] = "/tmp/qwenc_test_sha_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        CHECK(write(fd, "hello world\n", 12) == 12, "write");
        close(fd);
        qw_err e;
        CHECK(sha_file(path, 1, h, &e) == 0, "%s", e.msg);
        CHECK(!strcmp(h, "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"), "git blob id %s", h);
        CHECK(sha_file(path, 256, h, &e) == 0, "%s", e.msg);
        CHECK(!strcmp(h, "a948904f2f0f479b8f8197694b30184b0d2ed1c1cd2a1ec0fb85d299a192a447"), "%s", h);
        unlink(path);
        CHECK(sha_file(path, 256, h, &e) == -1 && strstr(e.msg, path), "missing file named: %s", e.msg);
    }
    return test_summary();
}
