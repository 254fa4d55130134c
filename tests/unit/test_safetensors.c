/* test_safetensors.c - the safetensors parser accepts a valid file and
 * rejects each kind of corrupt one with a message (never a crash). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/safetensors.h"
#include "test.h"

static uint8_t buf[1 << 16];

/* [u64 LE header length][header][data_len bytes of data]; returns total size. */
static uint64_t build(const char *header, uint64_t hlen_field, size_t data_len) {
    size_t h = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hlen_field >> (8 * i));
    memcpy(buf + 8, header, h);
    for (size_t i = 0; i < data_len; i++) buf[8 + h + i] = (uint8_t)(i * 7 + 1);
    return 8 + h + data_len;
}

static uint64_t build_ok(const char *header, size_t data_len) { return build(header, strlen(header), data_len); }

/* Expect st_parse to fail with a message containing `want`. */
static void reject(const char *what, uint64_t size, const char *want) {
    st_file f;
    qw_err err = {{0}};
    int rc = st_parse(&f, buf, size, "t.safetensors", &err);
    CHECK(rc == -1, "%s: accepted", what);
    CHECK(strstr(err.msg, "t.safetensors") != NULL, "%s: message does not name the file: %s", what, err.msg);
    CHECK(strstr(err.msg, want) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, want);
    CHECK(f.n == 0 && f.tensors == NULL, "%s: directory not empty after failure", what);
    if (rc == 0) st_file_free(&f);
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fwrite(p, 1, n, fp);
    fclose(fp);
}

int main(void) {
    /* a valid file: two tensors and metadata */
    const char *good =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[12,28]},"
        "\"s\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[28,30]}}  ";
    uint64_t n = build_ok(good, 30);
    st_file f;
    qw_err err = {{0}};
    CHECK(st_parse(&f, buf, n, "t.safetensors", &err) == 0, "valid file rejected: %s", err.msg);
    CHECK(f.n == 3, "expected 3 tensors, got %d", f.n);
    const st_tensor *a = st_find(&f, "a"), *b = st_find(&f, "b"), *s = st_find(&f, "s");
    CHECK(a && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 3 && a->numel == 6 && a->qdtype == 2 &&
              a->nbytes == 12,
          "tensor a parsed wrong");
    size_t hl = strlen(good);
    CHECK(a && a->data == buf + 8 + hl, "tensor a data pointer wrong");
    CHECK(b && b->data == buf + 8 + hl + 12 && b->elem_size == 4 && !strcmp(b->dtype, "F32"), "tensor b parsed wrong");
    CHECK(s && s->n_dims == 0 && s->numel == 1 && s->nbytes == 2, "scalar tensor parsed wrong");
    CHECK(st_find(&f, "__metadata__") == NULL, "metadata taken as a tensor");
    CHECK(st_find(&f, "zz") == NULL, "found a missing tensor");
    st_file_free(&f);

    /* a known dtype we do not compute with is parsed, marked unsupported */
    n = build_ok("{\"i\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16);
    CHECK(st_parse(&f, buf, n, "t.safetensors", &err) == 0 && f.n == 1 && f.tensors[0].qdtype == -1,
          "I64 tensor: %s", err.msg);
    st_file_free(&f);

    /* an empty header object is a valid (empty) file */
    n = build_ok("{}", 0);
    CHECK(st_parse(&f, buf, n, "t.safetensors", &err) == 0 && f.n == 0, "empty directory rejected: %s", err.msg);
    st_file_free(&f);

    /* corrupt files */
    reject("too short", 5, "too short");
    n = build("{}", 1000, 0);
    reject("header length > file", n, "exceeds the file size");
    n = build("{}", UINT64_MAX, 0);
    reject("header length 2^64-1", n, "exceeds the file size");
    n = build("{} ", 0, 3);
    reject("header length 0", n, "bad header length");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4);
    reject("bad JSON", n, "not valid JSON");
    n = build_ok("[1,2,3]", 0);
    reject("JSON array header", n, "not a JSON object");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8);
    reject("offsets outside the data (truncated)", n, "outside the data region");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8);
    reject("end < begin", n, "end 4 < begin 8");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8);
    reject("negative offset", n, "data_offsets");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 12);
    reject("overlapping tensors", n, "overlap");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8);
    reject("shape overflow", n, "overflows");
    n = build_ok("{\"a\":{\"dtype\":\"BF16\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,8]}}", 8);
    reject("shape overflow 2", n, "overflows");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
    reject("size mismatch", n, "bytes for shape");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[-3],\"data_offsets\":[0,8]}}", 8);
    reject("negative dim", n, "shape[0]");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", 8);
    reject("fractional dim", n, "shape[0]");
    n = build_ok("{\"weird\":{\"dtype\":\"Q4_K\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    reject("unknown dtype", n, "tensor 'weird': unknown dtype 'Q4_K'");
    n = build_ok("{\"a\":{\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    reject("missing dtype", n, "missing dtype");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4);
    reject("missing shape", n, "missing shape");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4);
    reject("one offset", n, "data_offsets");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4);
    reject("too many dims", n, "dimensions");
    n = build_ok("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 8);
    reject("duplicate name", n, "appears twice");
    n = build_ok("{\"a\":7}", 0);
    reject("entry not an object", n, "not an object");

    /* every truncation of the valid file is rejected, none crashes */
    n = build_ok(good, 30);
    int all = 1;
    for (uint64_t cut = 0; cut < n; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, buf, cut);
        st_file g;
        if (st_parse(&g, copy, cut, "t", &err) == 0) {
            all = 0;
            st_file_free(&g);
        }
        free(copy);
    }
    CHECK(all, "a truncated file was accepted");

    /* random mutations of the valid file: never a crash (run under ASan
     * this catches any over-read), and whatever is accepted stays inside
     * the buffer with consistent sizes */
    {
        uint64_t rng = 0x9e3779b97f4a7c15ULL;
        int bad_accept = 0, accepted = 0;
        uint64_t vn = build_ok(good, 30);
        uint8_t *orig = malloc(vn);
        memcpy(orig, buf, vn);
        for (int it = 0; it < 20000; it++) {
            uint64_t sz = vn;
            uint8_t *m = malloc(vn);
            memcpy(m, orig, vn);
            int edits = 1 + it % 4;
            for (int e = 0; e < edits; e++) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                uint64_t at = rng % sz;
                static const char pool[] = "0123456789[]{},:\"-e.9FBI";
                if (rng & 0x100) m[at] = (uint8_t)pool[(rng >> 12) % (sizeof pool - 1)];
                else m[at] ^= (uint8_t)(1u << ((rng >> 9) & 7));
            }
            if (it % 7 == 0) sz = vn - (rng >> 20) % 16;
            st_file g;
            if (st_parse(&g, m, sz, "fuzz", &err) == 0) {
                accepted++;
                for (int i = 0; i < g.n; i++) {
                    const st_tensor *t = &g.tensors[i];
                    if (t->data < m || t->data + t->nbytes > m + sz ||
                        t->nbytes != (uint64_t)t->numel * (uint64_t)t->elem_size)
                        bad_accept++;
                }
                st_file_free(&g);
            }
            free(m);
        }
        free(orig);
        CHECK(bad_accept == 0, "%d accepted mutants break the invariants", bad_accept);
        CHECK(accepted > 0 && accepted < 20000, "mutation run accepted %d of 20000", accepted);
    }

    /* files on disk: st_open, and a sharded folder through its index */
    char dir[] = "/tmp/qwenc_st_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[512];
    n = build_ok(good, 30);
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    write_file(path, buf, (size_t)n);
    st_set set;
    CHECK(st_open(&set, path, &err) == 0 && set.n_files == 1, "st_open: %s", err.msg);
    const char *where = NULL;
    CHECK(st_set_find(&set, "b", &where) != NULL && where && strstr(where, "x.safetensors"), "st_set_find");
    st_close(&set);
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    write_file(path, buf, (size_t)n - 3); /* truncated on disk */
    CHECK(st_open(&set, path, &err) == -1 && strstr(err.msg, "x.safetensors"), "truncated file: %s", err.msg);
    snprintf(path, sizeof path, "%s/missing.safetensors", dir);
    CHECK(st_open(&set, path, &err) == -1 && strstr(err.msg, "missing.safetensors"), "missing file: %s", err.msg);

    /* sharded: two shards and an index */
    n = build_ok("{\"p\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    write_file(path, buf, (size_t)n);
    n = build_ok("{\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    write_file(path, buf, (size_t)n);
    const char *idx = "{\"metadata\":{},\"weight_map\":{\"p\":\"model-00001-of-00002.safetensors\","
                      "\"q\":\"model-00002-of-00002.safetensors\"}}";
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_file(path, idx, strlen(idx));
    CHECK(st_open_dir(&set, dir, &err) == 0 && set.n_files == 2, "sharded open: %s", err.msg);
    if (set.n_files == 2) {
        CHECK(st_set_find(&set, "p", &where) && strstr(where, "00001"), "p in shard 1");
        CHECK(st_set_find(&set, "q", &where) && strstr(where, "00002"), "q in shard 2");
        st_close(&set);
    }
    const char *bad_idx[] = {
        "{\"weight_map\":{\"p\":\"../etc/passwd\"}}",
        "{\"weight_map\":{\"p\":\"/etc/passwd\"}}",
        "{\"weight_map\":{\"p\":\"sub/x.safetensors\"}}",
        "{\"weight_map\":{\"p\":7}}",
        "{\"weight_map\":{\"zz\":\"model-00001-of-00002.safetensors\"}}",
        "{\"nothing\":1}",
        "{not json",
    };
    const char *bad_why[] = {"bad shard file name", "bad shard file name", "bad shard file name",
                             "not a file name",     "not in shard",        "weight_map",
                             "not valid JSON"};
    for (size_t i = 0; i < sizeof bad_idx / sizeof bad_idx[0]; i++) {
        write_file(path, bad_idx[i], strlen(bad_idx[i]));
        int rc = st_open_dir(&set, dir, &err);
        CHECK(rc == -1 && strstr(err.msg, "index.json") && strstr(err.msg, bad_why[i]), "bad index %zu: %s", i,
              err.msg);
        if (rc == 0) st_close(&set);
    }
    /* clean up */
    const char *files[] = {"x.safetensors", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                           "model.safetensors.index.json"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return test_summary();
}
