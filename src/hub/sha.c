/* sha.c - SHA-256 and git blob ids of files and buffers (sha.h), through
 * libcrypto's EVP digests: streaming a file in 64 KiB pieces keeps memory
 * flat whatever the model's size. */
#include "hub/sha.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void sha_hex(char *out, const uint8_t *d, size_t n) {
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[d[i] >> 4];
        out[2 * i + 1] = hx[d[i] & 15];
    }
    out[2 * n] = 0;
}

static EVP_MD_CTX *digest_new(int kind, qw_err *err) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || EVP_DigestInit_ex(c, kind == SHA_256 ? EVP_sha256() : EVP_sha1(), NULL) != 1) {
        EVP_MD_CTX_free(c);
        qw_errf(err, "sha: libcrypto could not start a %s digest", kind == SHA_256 ? "SHA-256" : "SHA-1");
        return NULL;
    }
    return c;
}

/* Finish c into hex (and free it). */
static int digest_end(EVP_MD_CTX *c, char out[65], qw_err *err) {
    uint8_t d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    int ok = EVP_DigestFinal_ex(c, d, &n) == 1 && n <= 32;
    EVP_MD_CTX_free(c);
    if (!ok) return qw_errf(err, "sha: libcrypto could not finish the digest");
    sha_hex(out, d, n);
    return 0;
}

int sha_bytes(const void *data, size_t n, int kind, char out[65], qw_err *err) {
    EVP_MD_CTX *c = digest_new(kind, err);
    if (!c) return -1;
    if (EVP_DigestUpdate(c, data, n) != 1) {
        EVP_MD_CTX_free(c);
        return qw_errf(err, "sha: libcrypto digest update failed");
    }
    return digest_end(c, out, err);
}

int sha_file(const char *path, int kind, char out[65], qw_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return qw_errf(err, "sha: %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        fclose(f);
        return qw_errf(err, "sha: %s: %s", path, strerror(e));
    }
    EVP_MD_CTX *c = digest_new(kind, err);
    enum { BUF = 1 << 16 };
    uint8_t *buf = c ? malloc(BUF) : NULL;
    if (!buf) {
        EVP_MD_CTX_free(c);
        fclose(f);
        return c ? qw_errf(err, "sha: out of memory") : -1;
    }
    int ok = 1;
    if (kind == SHA_GIT_BLOB) { /* git's blob header; its NUL is part of it */
        char hdr[64];
        int k = snprintf(hdr, sizeof hdr, "blob %lld", (long long)st.st_size);
        ok = EVP_DigestUpdate(c, hdr, (size_t)k + 1) == 1;
    }
    size_t r;
    while (ok && (r = fread(buf, 1, BUF, f)) > 0) ok = EVP_DigestUpdate(c, buf, r) == 1;
    int bad = ferror(f);
    free(buf);
    fclose(f);
    if (bad || !ok) {
        EVP_MD_CTX_free(c);
        return qw_errf(err, "sha: %s: %s", path, bad ? "read error" : "digest update failed");
    }
    return digest_end(c, out, err);
}
