/* sha.c - SHA-256 and SHA-1 after FIPS 180-4; see sha.h. */
#include "hub/sha.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
#define ROL(x, n) (((x) << (n)) | ((x) >> (32 - (n))))

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void sha256_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) w[i] = be32(p + 4 * i);
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void sha256_init(sha256_ctx *c) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->len = 0;
    c->nbuf = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t n) {
    const uint8_t *p = data;
    c->len += n;
    if (c->nbuf) {
        size_t k = 64 - c->nbuf < n ? 64 - c->nbuf : n;
        memcpy(c->buf + c->nbuf, p, k);
        c->nbuf += k; p += k; n -= k;
        if (c->nbuf == 64) { sha256_block(c->h, c->buf); c->nbuf = 0; }
    }
    for (; n >= 64; p += 64, n -= 64) sha256_block(c->h, p);
    if (n) { memcpy(c->buf, p, n); c->nbuf = n; }
}

/* Shared Merkle-Damgard padding: 0x80, zeros, 64-bit big-endian bit length. */
static void pad_block(uint8_t *buf, size_t *nbuf, uint64_t len, void (*blk)(uint32_t *, const uint8_t *),
                      uint32_t *h) {
    buf[(*nbuf)++] = 0x80;
    if (*nbuf > 56) {
        memset(buf + *nbuf, 0, 64 - *nbuf);
        blk(h, buf);
        *nbuf = 0;
    }
    memset(buf + *nbuf, 0, 56 - *nbuf);
    uint64_t bits = len * 8;
    for (int i = 0; i < 8; i++) buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    blk(h, buf);
    *nbuf = 0;
}

void sha256_final(sha256_ctx *c, uint8_t out[32]) {
    pad_block(c->buf, &c->nbuf, c->len, sha256_block, c->h);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24); out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8); out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

static void sha1_block(uint32_t h[5], const uint8_t *p) {
    uint32_t w[80];
    for (int i = 0; i < 16; i++) w[i] = be32(p + 4 * i);
    for (int i = 16; i < 80; i++) w[i] = ROL(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) { f = (b & c) | (~b & d); k = 0x5a827999; }
        else if (i < 40) { f = b ^ c ^ d; k = 0x6ed9eba1; }
        else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8f1bbcdc; }
        else { f = b ^ c ^ d; k = 0xca62c1d6; }
        uint32_t t = ROL(a, 5) + f + e + k + w[i];
        e = d; d = c; c = ROL(b, 30); b = a; a = t;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
}

void sha1_init(sha1_ctx *c) {
    static const uint32_t iv[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
    memcpy(c->h, iv, sizeof iv);
    c->len = 0;
    c->nbuf = 0;
}

void sha1_update(sha1_ctx *c, const void *data, size_t n) {
    const uint8_t *p = data;
    c->len += n;
    if (c->nbuf) {
        size_t k = 64 - c->nbuf < n ? 64 - c->nbuf : n;
        memcpy(c->buf + c->nbuf, p, k);
        c->nbuf += k; p += k; n -= k;
        if (c->nbuf == 64) { sha1_block(c->h, c->buf); c->nbuf = 0; }
    }
    for (; n >= 64; p += 64, n -= 64) sha1_block(c->h, p);
    if (n) { memcpy(c->buf, p, n); c->nbuf = n; }
}

void sha1_final(sha1_ctx *c, uint8_t out[20]) {
    pad_block(c->buf, &c->nbuf, c->len, sha1_block, c->h);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24); out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8); out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

void sha_hex(char *out, const uint8_t *d, size_t n) {
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) { out[2 * i] = hx[d[i] >> 4]; out[2 * i + 1] = hx[d[i] & 15]; }
    out[2 * n] = 0;
}

int sha_file(const char *path, int kind, char out[65], qw_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return qw_errf(err, "sha: %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return qw_errf(err, "sha: %s: %s", path, strerror(errno));
    }
    sha256_ctx c256;
    sha1_ctx c1;
    if (kind == 256) sha256_init(&c256);
    else {
        char hdr[64];
        int k = snprintf(hdr, sizeof hdr, "blob %lld", (long long)st.st_size);
        sha1_init(&c1);
        sha1_update(&c1, hdr, (size_t)k + 1); /* the NUL is part of the header */
    }
    enum { BUF = 1 << 16 };
    uint8_t *buf = malloc(BUF);
    if (!buf) {
        fclose(f);
        return qw_errf(err, "sha: out of memory");
    }
    size_t r;
    while ((r = fread(buf, 1, BUF, f)) > 0) {
        if (kind == 256) sha256_update(&c256, buf, r);
        else sha1_update(&c1, buf, r);
    }
    int bad = ferror(f);
    free(buf);
    fclose(f);
    if (bad) return qw_errf(err, "sha: %s: read error", path);
    uint8_t d[32];
    if (kind == 256) { sha256_final(&c256, d); sha_hex(out, d, 32); }
    else { sha1_final(&c1, d); sha_hex(out, d, 20); }
    return 0;
}
