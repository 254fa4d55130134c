/* sha.h - SHA-256 and SHA-1 (FIPS 180-4), to verify downloads.
 *
 * The hub names an LFS file by the SHA-256 of its content and a regular git
 * file by its git blob id, SHA-1("blob <size>\0" + content). Small, plain C;
 * tests/hub/test_sha.c checks them against the FIPS 180 example vectors.
 */
#ifndef QW_HUB_SHA_H
#define QW_HUB_SHA_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t len;       /* bytes hashed so far */
    uint8_t buf[64];
    size_t nbuf;
} sha256_ctx;

typedef struct sha1_ctx {
    uint32_t h[5];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} sha1_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
void sha256_final(sha256_ctx *c, uint8_t out[32]);

void sha1_init(sha1_ctx *c);
void sha1_update(sha1_ctx *c, const void *data, size_t n);
void sha1_final(sha1_ctx *c, uint8_t out[20]);

/* Lower-case hex of n bytes into out[2n+1]. */
void sha_hex(char *out, const uint8_t *digest, size_t n);

/* Hex digest of a whole file: kind 256 = SHA-256 of the content, kind 1 =
 * git blob id. out holds 65 chars. Returns 0, or -1 naming the file. */
int sha_file(const char *path, int kind, char out[65], qw_err *err);

#endif
