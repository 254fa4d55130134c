/* gguf_pick.h - which .gguf file of a repo a quant tag names.
 *
 * GGUF repos on the hub hold one file per quantization, named
 * "<model>-<quant>.gguf" (Qwen/Qwen2.5-0.5B-Instruct-GGUF:
 * qwen2.5-0.5b-instruct-q4_k_m.gguf) or "<model>.<quant>.gguf" (older
 * repos), and big ones split as "<model>-<quant>-00001-of-00003.gguf".
 * `qwenc pull ORG/REPO-GGUF:Q4_K_M`, `qwenc run ORG/REPO-GGUF:q4_k_m` and
 * `qwenc list` all name a file by that tag, compared case-insensitively.
 */
#ifndef QW_HUB_GGUF_PICK_H
#define QW_HUB_GGUF_PICK_H

#include <stddef.h>

#include "base/err.h"

/* The quant tag of a .gguf file name, upper-cased ("Q4_K_M"): the last
 * '-' or '.'-separated part before ".gguf" and any "-NNNNN-of-NNNNN".
 * Returns 0, or -1 when name does not end in .gguf (any case). *part and
 * *count get the split numbering (1 and 1 for a file that is not split). */
int hub_gguf_quant(const char *name, char *tag, size_t cap, int *part, int *count);

/* Of the n file names (a repo's listing: other files are skipped), the
 * .gguf file(s) of quant (NULL: the repo's only quant). On success returns
 * the number of files picked (several for a split model, in part order)
 * with their indices in picked[] (room for n). Otherwise -1 and a message
 * that lists the quants there are ("... has Q4_K_M, Q8_0; pick one with
 * REPO:QUANT"). `what` names the repo or folder in messages. */
int hub_gguf_pick(const char *const *names, int n, const char *quant, const char *what, int *picked,
                  qw_err *err);

/* "REPO:QUANT" -> repo (copied into repo_buf) and quant (a pointer into
 * spec, or NULL without a ':'). Returns 0 or -1 (too long / empty tag). */
int hub_split_spec(const char *spec, char *repo_buf, size_t cap, const char **quant);

/* The cached .gguf of repo at rev (NULL: main) for quant (NULL: the
 * snapshot's only .gguf): its path in the snapshot folder (malloc'd), or
 * NULL with a message (not cached; none or several .gguf there). */
char *hub_cached_gguf(const char *repo, const char *rev, const char *quant, qw_err *err);

#endif
