/* download.h - `qwenc pull`: a model repo from the Hugging Face hub into the
 * standard cache (cache.h), with libcurl.
 *
 * Protocol (as huggingface_hub's hf_hub_download speaks it):
 *   HEAD {endpoint}/{repo}/resolve/{revision}/{file}   (relative redirects followed)
 *     -> X-Repo-Commit: the commit the revision points to
 *        X-Linked-Etag + X-Linked-Size (LFS files: sha256 of the content), or
 *        ETag + Content-Length (git files: the git blob id, SHA-1)
 *   GET the same URL at the commit (redirects, e.g. to a CDN, followed;
 *     Authorization: Bearer $HF_TOKEN sent to the hub's host only), into
 *     blobs/<etag>.incomplete, resumed with Range when a part is there;
 *   the content checked against the ETag, renamed to blobs/<etag>, and
 *   snapshots/<commit>/<file> made a relative symlink to it; refs/<rev>
 *   written last.
 * Files: config.json (required), generation_config.json, tokenizer.json,
 * tokenizer_config.json, vocab.json, merges.txt (optional: a 404 is skipped),
 * then model.safetensors.index.json and its shards, else model.safetensors.
 * HF_HUB_OFFLINE=1 (as huggingface_hub) resolves from the cache only.
 */
#ifndef QW_HUB_DOWNLOAD_H
#define QW_HUB_DOWNLOAD_H

#include "base/err.h"

enum { HUB_PROGRESS_AUTO = 0, HUB_PROGRESS_BAR = 1, HUB_PROGRESS_LINES = 2, HUB_PROGRESS_NONE = 3 };

typedef struct hub_pull_opts {
    const char *endpoint; /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token;    /* NULL: $HF_TOKEN (empty = none) */
    const char *revision; /* NULL: "main" */
    int progress;         /* HUB_PROGRESS_*; AUTO = a bar on a terminal, lines otherwise */
    int retries;          /* further attempts per file after a broken transfer (resumed) */
    int offline_ok;       /* hub unreachable but the revision is cached: use the cache */
    const char *quant;    /* REPO:QUANT: that .gguf of a GGUF repo; NULL: see hub_pull */
} hub_pull_opts;

void hub_pull_opts_default(hub_pull_opts *o);

/* Download repo at o->revision into the cache. On success returns 0 and
 * *snapshot (malloc'd) = the snapshot folder, usable as MODEL, or for a
 * GGUF repo the .gguf file in it.
 * GGUF repos: with o->quant, or when the repo has no config.json, the
 * repo's files are listed (GET {endpoint}/api/models/{repo}/tree/{rev},
 * the hub's listing) and the one .gguf whose quant tag is o->quant
 * (gguf_pick.h; case-insensitive), or the repo's only one, is downloaded
 * as any file (progress, resume, sha256); none or several: the message
 * names the quants there are. Split GGUFs are refused (qwenc loads single
 * files) with a message saying so. On failure
 * returns -1 with a message naming the file and what went wrong; complete
 * files stay in the cache and a partial one stays as .incomplete for the next
 * run to resume. Not safe to run twice at once on the same repo. */
int hub_pull(const char *repo, const hub_pull_opts *o, char **snapshot, qw_err *err);

#endif
