/* sha.h - file digests that verify downloads, computed by OpenSSL's
 * libcrypto (EVP), the distribution's well-kept implementation.
 *
 * The hub names an LFS file by the SHA-256 of its content and a regular git
 * file by its git blob id, SHA-1("blob <size>\0" + content).
 * tests/hub/test_sha.c checks both against the FIPS 180 example vectors and
 * `git hash-object`.
 */
#ifndef QW_HUB_SHA_H
#define QW_HUB_SHA_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Which digest: plain SHA-1 or SHA-256 of bytes, or a file's git blob id. */
enum { SHA_1 = 1, SHA_GIT_BLOB = 2, SHA_256 = 256 };

/* Lower-case hex of n bytes into out[2n+1]. */
void sha_hex(char *out, const uint8_t *digest, size_t n);

/* Hex digest of n bytes in memory: kind SHA_256 or SHA_1. out holds 65
 * chars. Returns 0, or -1 with err set. */
int sha_bytes(const void *data, size_t n, int kind, char out[65], qw_err *err);

/* Hex digest of a whole file: kind SHA_256 = SHA-256 of the content,
 * SHA_GIT_BLOB = git blob id. out holds 65 chars. Returns 0, or -1 naming
 * the file. */
int sha_file(const char *path, int kind, char out[65], qw_err *err);

#endif
