/* mode_stdin.c - placeholder until this mode lands: says so and exits 1. */
#include <stdio.h>

#include "cli/cli.h"

int mode_stdin(const qw_opts *o) {
    (void)o;
    fprintf(stderr, "qwenc: this mode is not built yet\n");
    return 1;
}
