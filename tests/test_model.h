/* test_model.h - scratch random-weight model folders for the test programs
 * that need a whole model (scheduler, request lifecycle, quantized
 * matmuls): a temporary folder, src/synth's safetensors from a given config
 * and seed, the generation config the test wants, optionally the tokenizer
 * fixture; and its removal. */
#ifndef QW_TEST_MODEL_H
#define QW_TEST_MODEL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "synth/synth.h"

/* A fresh folder $TMPDIR/qwenc-test-<tag>-XXXXXX into dir[cap] holding a
 * model with config_json (written as cfg.json, synth's input), weights of
 * scale 0.3 from seed, generation_config.json = gen_json (NULL: none; synth's
 * own names Qwen2.5's ids, which small vocabularies do not have) and, if
 * tokdir is not NULL, that folder's tokenizer files. 0, or -1 with the
 * reason on stderr (dir[0] is 0 when no folder was made). */
static inline int test_model_write(char *dir, size_t cap, const char *tag, const char *config_json, uint64_t seed,
                                   const char *gen_json, const char *tokdir) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, cap, "%s/qwenc-test-%s-XXXXXX", tmp && tmp[0] ? tmp : "/tmp", tag);
    if (!mkdtemp(dir)) {
        perror(dir);
        dir[0] = 0;
        return -1;
    }
    char p[512];
    snprintf(p, sizeof p, "%s/cfg.json", dir);
    FILE *f = fopen(p, "w");
    if (!f || fputs(config_json, f) < 0) {
        perror(p);
        if (f) fclose(f);
        return -1;
    }
    fclose(f);
    synth_opts so;
    synth_opts_default(&so);
    so.config_path = p;
    so.scale = 0.3f;
    so.seed = seed;
    so.quiet = 1;
    qw_err err;
    if (synth_write(dir, &so, &err) != 0 || (tokdir && synth_copy_tokenizer(tokdir, dir, &err) < 0)) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return -1;
    }
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    unlink(p);
    if (!gen_json) return 0;
    f = fopen(p, "w");
    if (!f || fputs(gen_json, f) < 0) {
        perror(p);
        if (f) fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

/* Remove a folder test_model_write made (its files, then itself). */
static inline void test_model_remove(char *dir) {
    if (!dir[0]) return;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[1024];
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
    dir[0] = 0;
}

#endif
