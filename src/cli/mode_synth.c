/* mode_synth.c - `qwenc synth OUT_DIR`: a random-weight model folder.
 *
 *   qwenc synth OUT_DIR [--config config.json] [--tokenizer DIR | --no-tokenizer]
 *                       [--dtype bf16|f16|f32] [--seed S] [--scale X]
 *
 * The weights come from src/synth (streamed to disk). The tokenizer files are
 * copied from --tokenizer DIR, or else from the first of: the Hugging Face
 * cache (a Qwen2.5 model downloaded by any tool), ../shared/tokenizers/qwen/
 * beside the folder holding this binary's checkout. Without one the model
 * still runs on token ids, and this says so.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#include "cli/cli.h"
#include "base/log.h"
#include "hub/cache.h"
#include "synth/synth.h"

static void synth_usage(FILE *f) {
    fputs("usage: qwenc synth OUT_DIR [--config config.json] [--tokenizer DIR | --no-tokenizer]\n"
          "                   [--dtype bf16|f16|f32] [--seed S] [--scale X]\n"
          "Writes a model folder with RANDOM weights and the shapes of the config\n"
          "(default: Qwen2.5-0.5B-Instruct's). --scale is the weights' standard\n"
          "deviation (default 0.02).\n", f);
}

/* The folder holding the running binary (malloc'd), or NULL. */
static char *exe_dir(void) {
    char buf[PATH_MAX];
#if defined(__APPLE__)
    uint32_t n = sizeof buf;
    if (_NSGetExecutablePath(buf, &n) != 0) return NULL;
    char *real = realpath(buf, NULL);
    if (!real) return NULL;
#else
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return NULL;
    buf[n] = 0;
    char *real = strdup(buf);
    if (!real) return NULL;
#endif
    char *slash = strrchr(real, '/');
    if (slash && slash != real) *slash = 0;
    return real;
}

static int has_tokenizer(const char *dir) {
    char *p = hub_path_join(dir, "tokenizer.json");
    int ok = p && access(p, R_OK) == 0;
    free(p);
    return ok;
}

/* Find a Qwen tokenizer folder; *where says which kind. malloc'd or NULL. */
static char *find_tokenizer(const char **where) {
    static const char *repos[] = {"Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B",
                                  "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-3B-Instruct",
                                  "Qwen/Qwen2.5-7B-Instruct"};
    for (size_t i = 0; i < sizeof repos / sizeof *repos; i++) {
        char *snap = hub_snapshot_dir(repos[i], NULL, NULL);
        if (snap && has_tokenizer(snap)) {
            *where = "the Hugging Face cache";
            return snap;
        }
        free(snap);
    }
    char *dir = exe_dir();
    /* ./qwenc sits at the checkout's top; build/qwenc one level down. */
    const char *rels[] = {"/../shared/tokenizers/qwen", "/../../shared/tokenizers/qwen"};
    for (size_t i = 0; dir && i < 2; i++) {
        size_t n = strlen(dir) + strlen(rels[i]) + 1;
        char *p = malloc(n);
        if (p) snprintf(p, n, "%s%s", dir, rels[i]);
        char *real = p ? realpath(p, NULL) : NULL;
        free(p);
        if (real && has_tokenizer(real)) {
            free(dir);
            *where = "../shared/tokenizers/qwen beside the checkout";
            return real;
        }
        free(real);
    }
    free(dir);
    return NULL;
}

int mode_synth(int argc, char **argv) {
    synth_opts so;
    synth_opts_default(&so);
    const char *out = NULL, *tok = NULL;
    int no_tok = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = !strcmp(a, "--config") || !strcmp(a, "--tokenizer") || !strcmp(a, "--dtype") ||
                    !strcmp(a, "--seed") || !strcmp(a, "--scale");
        if (takes && !v) {
            fprintf(stderr, "qwenc synth: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { synth_usage(stdout); return 0; }
        else if (!strcmp(a, "--config")) so.config_path = argv[++i];
        else if (!strcmp(a, "--tokenizer")) tok = argv[++i];
        else if (!strcmp(a, "--no-tokenizer")) no_tok = 1;
        else if (!strcmp(a, "--dtype")) {
            i++;
            if (!strcmp(v, "bf16") || !strcmp(v, "bfloat16")) so.dtype = QW_BF16;
            else if (!strcmp(v, "f16") || !strcmp(v, "float16")) so.dtype = QW_F16;
            else if (!strcmp(v, "f32") || !strcmp(v, "float32")) so.dtype = QW_F32;
            else { fprintf(stderr, "qwenc synth: --dtype: expected bf16, f16 or f32, got '%s'\n", v); return 2; }
        } else if (!strcmp(a, "--seed")) {
            i++;
            char *end; errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-') {
                fprintf(stderr, "qwenc synth: --seed: expected a non-negative integer, got '%s'\n", v);
                return 2;
            }
            so.seed = s;
        } else if (!strcmp(a, "--scale")) {
            i++;
            char *end; errno = 0;
            double s = strtod(v, &end);
            if (errno || end == v || *end || !(s >= 0 && s <= 10)) {
                fprintf(stderr, "qwenc synth: --scale: expected a number in [0, 10], got '%s'\n", v);
                return 2;
            }
            so.scale = (float)s;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "qwenc synth: unknown option '%s'\n", a);
            synth_usage(stderr);
            return 2;
        } else if (!out) out = a;
        else { fprintf(stderr, "qwenc synth: unexpected argument '%s'\n", a); return 2; }
    }
    if (!out) { synth_usage(stderr); return 2; }
    if (tok && no_tok) { fprintf(stderr, "qwenc synth: --tokenizer and --no-tokenizer conflict\n"); return 2; }

    fprintf(stderr,
            "qwenc synth: *** RANDOM WEIGHTS *** %s will have the model's shapes but random values:\n"
            "qwenc synth: it runs every mode at full speed, but its text is meaningless.\n", out);
    qw_err err = {{0}};
    double t0 = qw_now();
    if (synth_write(out, &so, &err) != 0) {
        fprintf(stderr, "qwenc synth: %s\n", err.msg);
        return 1;
    }
    char *found = NULL;
    const char *where = "--tokenizer";
    if (!no_tok && !tok) tok = found = find_tokenizer(&where);
    if (tok) {
        int n = synth_copy_tokenizer(tok, out, &err);
        if (n < 0) {
            fprintf(stderr, "qwenc synth: %s\n", err.msg);
            free(found);
            return 1;
        }
        fprintf(stderr, "qwenc synth: tokenizer: %d files copied from %s (%s)\n", n, tok, where);
    } else if (!no_tok) {
        fprintf(stderr, "qwenc synth: no tokenizer found (looked in the Hugging Face cache and "
                        "../shared/tokenizers/qwen): give --tokenizer DIR for the text modes; token-id "
                        "modes work without one\n");
    }
    free(found);
    fprintf(stderr, "qwenc synth: wrote %s in %.1f s (RANDOM WEIGHTS, seed %llu)\n", out,
            qw_now() - t0, (unsigned long long)so.seed);
    return 0;
}
