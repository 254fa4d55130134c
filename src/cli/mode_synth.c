/* mode_synth.c - placeholder until this mode lands: says so and exits 1. */
#include <stdio.h>

#include "cli/cli.h"

int mode_synth(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "qwenc: this mode is not built yet\n");
    return 1;
}
