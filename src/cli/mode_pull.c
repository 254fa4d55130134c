/* mode_pull.c - `qwenc pull REPO [--revision REV]`, and MODEL resolution.
 *
 * The download itself is src/hub/download.c; this file parses the command
 * line and implements cli_resolve_model() (cli.h): a folder as is, else a
 * repo id looked up in the Hugging Face cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "hub/cache.h"

int mode_pull(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "qwenc pull: not built yet\n");
    return 1;
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
        snprintf(errbuf, (size_t)errlen, "%s is a file, not a model folder (config.json + *.safetensors)", arg);
        return NULL;
    }
    /* Not a path that exists: a repo id "ORG/NAME", maybe "ORG/NAME@REV"? Keep it simple: ORG/NAME. */
    qw_err err = {{0}};
    if (hub_repo_valid(arg, NULL) != 0 || arg[0] == '.' || arg[0] == '/') {
        snprintf(errbuf, (size_t)errlen, "%s: no such folder (and not a Hugging Face repo id like Qwen/Qwen2.5-0.5B-Instruct)", arg);
        return NULL;
    }
    char *snap = hub_snapshot_dir(arg, NULL, &err);
    if (!snap) snprintf(errbuf, (size_t)errlen, "%s", err.msg);
    return snap;
}
