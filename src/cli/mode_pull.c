/* mode_pull.c - `qwenc pull REPO [--revision REV]`, and MODEL resolution.
 *
 * The download itself is src/hub/download.c; this file parses the command
 * line and implements cli_resolve_model() (cli.h): a folder or a GGUF file as
 * is, else a repo id looked up in the Hugging Face cache.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "hub/cache.h"
#include "hub/download.h"
#include "hub/gguf_pick.h"

static void pull_usage(FILE *f) {
    fputs("usage: qwenc pull REPO[:QUANT] [--revision REV] [--retries N] [--progress bar|lines|none]\n"
          "Downloads config, tokenizer and safetensors of a Hugging Face model repo into the\n"
          "Hugging Face cache ($HF_HOME/hub, default ~/.cache/huggingface/hub) and prints the\n"
          "snapshot folder. For a GGUF repo (no config.json, or REPO:QUANT given) it lists the\n"
          "repo's files and downloads the one .gguf of QUANT (case-insensitive, e.g.\n"
          "Qwen/Qwen2.5-0.5B-Instruct-GGUF:q4_k_m; without QUANT the repo's only one), and\n"
          "prints its path; REPO:QUANT then works as MODEL. An interrupted download resumes\n"
          "where it stopped; every file is checked against the hub's sha256 / git hash.\n"
          "Environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN, HF_HOME.\n", f);
}

int mode_pull(int argc, char **argv) {
    hub_pull_opts o;
    hub_pull_opts_default(&o);
    const char *repo = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { pull_usage(stdout); return 0; }
        if (!strcmp(a, "--revision") || !strcmp(a, "--retries") || !strcmp(a, "--progress")) {
            if (!v) { fprintf(stderr, "qwenc pull: %s needs a value\n", a); return 2; }
            i++;
            if (!strcmp(a, "--revision")) o.revision = v;
            else if (!strcmp(a, "--retries")) {
                char *end; errno = 0;
                long n = strtol(v, &end, 10);
                if (errno || end == v || *end || n < 0 || n > 100) {
                    fprintf(stderr, "qwenc pull: --retries: expected 0..100, got '%s'\n", v);
                    return 2;
                }
                o.retries = (int)n;
            } else {
                if (!strcmp(v, "bar")) o.progress = HUB_PROGRESS_BAR;
                else if (!strcmp(v, "lines")) o.progress = HUB_PROGRESS_LINES;
                else if (!strcmp(v, "none")) o.progress = HUB_PROGRESS_NONE;
                else { fprintf(stderr, "qwenc pull: --progress: expected bar, lines or none\n"); return 2; }
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "qwenc pull: unknown option '%s'\n", a);
            pull_usage(stderr);
            return 2;
        } else if (!repo) repo = a;
        else { fprintf(stderr, "qwenc pull: unexpected argument '%s'\n", a); return 2; }
    }
    if (!repo) { pull_usage(stderr); return 2; }
    qw_err err = {{0}};
    char repo_id[512];
    if (hub_split_spec(repo, repo_id, sizeof repo_id, &o.quant) != 0 ||
        (o.quant && hub_filename_valid(o.quant, NULL) != 0)) {
        fprintf(stderr, "qwenc pull: '%s': expected REPO or REPO:QUANT (e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M)\n",
                repo);
        return 2;
    }
    repo = repo_id;
    if (hub_repo_valid(repo, &err) != 0 || (o.revision && hub_revision_valid(o.revision, &err) != 0)) {
        fprintf(stderr, "qwenc pull: %s\n", err.msg);
        return 2;
    }
    char *snap = NULL;
    if (hub_pull(repo, &o, &snap, &err) != 0) {
        fprintf(stderr, "qwenc pull: %s\n", err.msg);
        return 1;
    }
    printf("%s\n", snap);
    free(snap);
    return 0;
}

char *cli_resolve_model(const char *arg, char *errbuf, int errlen) {
    struct stat st;
    if (!arg || !*arg) {
        snprintf(errbuf, (size_t)errlen, "no MODEL given");
        return NULL;
    }
    if (stat(arg, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            char *p = strdup(arg);
            if (!p) snprintf(errbuf, (size_t)errlen, "out of memory");
            return p;
        }
        /* A file: a GGUF model (model_load and tok_load check the magic). */
        char *p = strdup(arg);
        if (!p) snprintf(errbuf, (size_t)errlen, "out of memory");
        return p;
    }
    /* Not an existing path: a repo id ORG/NAME[:QUANT] in the Hugging Face cache. */
    qw_err err = {{0}};
    char repo[512];
    const char *quant = NULL;
    if (arg[0] == '.' || arg[0] == '/' || !strchr(arg, '/') || hub_split_spec(arg, repo, sizeof repo, &quant) != 0 ||
        hub_repo_valid(repo, NULL) != 0) {
        snprintf(errbuf, (size_t)errlen,
                 "%s: no such model folder or file (MODEL is a folder, a .gguf file, or a Hugging Face repo id like "
                 "Qwen/Qwen2.5-0.5B-Instruct downloaded with qwenc pull)", arg);
        return NULL;
    }
    char *snap = hub_snapshot_dir(repo, NULL, &err);
    if (snap && !quant) {
        /* A GGUF repo's snapshot: its one .gguf (several: say which exist). */
        char *cfg = hub_path_join(snap, "config.json");
        struct stat sb;
        int is_hf = cfg && stat(cfg, &sb) == 0;
        free(cfg);
        if (is_hf) return snap;
    }
    free(snap);
    snap = quant || !err.msg[0] ? hub_cached_gguf(repo, NULL, quant, &err) : NULL;
    if (!snap) snprintf(errbuf, (size_t)errlen, "%s", err.msg);
    return snap;
}
