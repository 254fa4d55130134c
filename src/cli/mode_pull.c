/* mode_pull.c - placeholder until this mode lands: says so and exits 1. */
#include <stdio.h>

#include "cli/cli.h"

int mode_pull(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "qwenc: this mode is not built yet\n");
    return 1;
}

#include <stdlib.h>
#include <string.h>
char *cli_resolve_model(const char *arg, char *errbuf, int errlen) {
    (void)errbuf; (void)errlen;
    return strdup(arg);
}
