/* test_sha.c - the digests that verify downloads: SHA-256 and SHA-1 against
 * the FIPS 180 example vectors, and a file's SHA-256 and git blob id
 * against sha256sum's and `git hash-object`'s values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hub/sha.h"
#include "test.h"

static int is(const void *d, size_t n, int kind, const char *want) {
    char h[65];
    qw_err e;
    if (sha_bytes(d, n, kind, h, &e) != 0) {
        fprintf(stderr, "sha_bytes: %s\n", e.msg);
        return 0;
    }
    if (strcmp(h, want) != 0) fprintf(stderr, "got %s, want %s\n", h, want);
    return !strcmp(h, want);
}

int main(void) {
    /* FIPS 180-2 appendix B / C examples. */
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK(is("abc", 3, SHA_256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "abc");
    CHECK(is("", 0, SHA_256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "empty");
    CHECK(is(m2, strlen(m2), SHA_256, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "448 bits");
    CHECK(is("abc", 3, SHA_1, "a9993e364706816aba3e25717850c26c9cd0d89d"), "sha1 abc");
    CHECK(is(m2, strlen(m2), SHA_1, "84983e441c3bd26ebaae4aa1f95129e5e54670f1"), "sha1 448 bits");

    /* Files, with a million bytes so that the 64 KiB read loop turns: one
     * line, then 'a' * 1e6 (sha256sum / git hash-object of those files). */
    char path[] = "/tmp/qwenc_test_sha_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        char h[65];
        qw_err e;
        CHECK(write(fd, "hello world\n", 12) == 12, "write");
        close(fd);
        CHECK(sha_file(path, SHA_GIT_BLOB, h, &e) == 0, "%s", e.msg);
        CHECK(!strcmp(h, "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"), "git blob id %s", h);
        CHECK(sha_file(path, SHA_256, h, &e) == 0, "%s", e.msg);
        CHECK(!strcmp(h, "a948904f2f0f479b8f8197694b30184b0d2ed1c1cd2a1ec0fb85d299a192a447"), "%s", h);

        size_t n = 1000000;
        char *a = malloc(n);
        memset(a, 'a', n);
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(a, 1, n, f) == n, "write 1e6");
        if (f) fclose(f);
        free(a);
        CHECK(sha_file(path, SHA_256, h, &e) == 0, "%s", e.msg);
        CHECK(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "1e6 a: %s", h);
        CHECK(sha_file(path, SHA_GIT_BLOB, h, &e) == 0, "%s", e.msg);
        CHECK(!strcmp(h, "de1fbf0c2f34f67f01f355f31ed0cf7319643c5e"), "1e6 a blob id: %s", h);
        unlink(path);
        CHECK(sha_file(path, SHA_256, h, &e) == -1 && strstr(e.msg, path), "missing file named: %s", e.msg);
    }
    return test_summary();
}
