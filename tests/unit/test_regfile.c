/* test_regfile.c - every loader refuses a path that is not a regular file
 * before reading it: a FIFO named model.safetensors, config.json, a .gguf or
 * tokenizer.json used to block in open() forever (no writer ever comes).
 * An alarm turns such a hang into a failure instead of a stuck test. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/regfile.h"
#include "format/gguf.h"
#include "format/mapfile.h"
#include "format/safetensors.h"
#include "model/model.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_regfile: a loader blocked on a FIFO (hang)\n0 passed, 1 failed\n";
    write(2, msg, sizeof msg - 1);
    _exit(1);
}

static char dir[64];

static void fifo(const char *name) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
    if (mkfifo(p, 0600) != 0) perror(p);
}

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(20);
    snprintf(dir, sizeof dir, "/tmp/qwenc_regfile_XXXXXX");
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    char p[256];
    qw_err err = {{0}};

    /* The helper itself. */
    fifo("f");
    path_of(p, sizeof p, "f");
    const char *why = NULL;
    CHECK(regfile_open(p, &why) < 0, "a FIFO opened");
    CHECK(why && strstr(why, "FIFO"), "why: %s", why ? why : "(null)");
    CHECK(regfile_open(dir, &why) < 0 && strstr(why, "directory"), "a directory opened");
    CHECK(!regfile_exists(p), "a FIFO counted as a regular file");
    CHECK(regfile_open("/dev/null", &why) < 0, "a device opened");

    /* mmap'd files: GGUF. */
    qw_mapfile mf;
    CHECK(mapfile_open(&mf, p, &err) != 0 && strstr(err.msg, "not a regular file"), "mapfile: %s", err.msg);
    fifo("m.gguf");
    path_of(p, sizeof p, "m.gguf");
    gguf_map g;
    CHECK(gguf_open(&g, p, &err) != 0 && strstr(err.msg, "m.gguf"), "gguf: %s", err.msg);
    qw_model *m = NULL;
    CHECK(model_load(&m, p, &err) != 0 && strstr(err.msg, "not a regular file"), "model gguf: %s", err.msg);
    unlink(p);

    /* config.json as a FIFO. */
    fifo("config.json");
    qw_config cfg;
    CHECK(config_load(&cfg, dir, &err) != 0 && strstr(err.msg, "config.json") &&
              strstr(err.msg, "not a regular file"),
          "config: %s", err.msg);
    path_of(p, sizeof p, "config.json");
    unlink(p);

    /* model.safetensors and its index as FIFOs. */
    fifo("model.safetensors");
    st_set st;
    CHECK(st_open_dir(&st, dir, &err) != 0 && strstr(err.msg, "not a regular file"), "st: %s", err.msg);
    path_of(p, sizeof p, "model.safetensors");
    unlink(p);
    fifo("model.safetensors.index.json");
    CHECK(st_open_dir(&st, dir, &err) != 0 && strstr(err.msg, "not a regular file"), "st index: %s", err.msg);
    path_of(p, sizeof p, "model.safetensors.index.json");
    unlink(p);

    /* tokenizer.json as a FIFO: refused with its name, not skipped. */
    fifo("tokenizer.json");
    qw_tok *t = NULL;
    CHECK(tok_load(&t, dir, &err) != 0 && strstr(err.msg, "tokenizer.json") &&
              strstr(err.msg, "not a regular file"),
          "tok: %s", err.msg);
    path_of(p, sizeof p, "tokenizer.json");
    unlink(p);

    path_of(p, sizeof p, "f");
    unlink(p);
    rmdir(dir);
    return test_summary();
}
