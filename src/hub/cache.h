/* cache.h - the Hugging Face hub cache, as huggingface_hub lays it out.
 *
 *   $HF_HUB_CACHE (default $HF_HOME/hub, HF_HOME default ~/.cache/huggingface)
 *     models--ORG--NAME/
 *       blobs/<etag>                       file contents, named by ETag
 *       snapshots/<commit>/<file>          -> ../../blobs/<etag> (relative symlink)
 *       refs/<revision>                    the commit a branch/tag points to
 *
 * so that a model downloaded by Python tools is found without copying, and one
 * downloaded by qwenc is found by them. Everything that becomes a path is
 * validated first: repo ids, revisions, file names and ETags from the server
 * can never name a place outside the repo's cache folder.
 */
#ifndef QW_HUB_CACHE_H
#define QW_HUB_CACHE_H

#include "base/err.h"

/* The hub cache folder (malloc'd), from the environment as above. NULL only
 * when out of memory or no HOME is set (message in err). */
char *hub_cache_dir(qw_err *err);

/* "ORG/NAME" or "NAME": each part 1..96 of [A-Za-z0-9._-], not starting or
 * ending with '.' or '-', no "--" or "..". Returns 0 or -1 with a message. */
int hub_repo_valid(const char *repo, qw_err *err);

/* A revision: branch, tag or commit: [A-Za-z0-9._-] parts separated by '/',
 * no empty, "." or ".." part, at most 256 characters. */
int hub_revision_valid(const char *rev, qw_err *err);

/* A file name inside a repo: relative, '/'-separated parts of
 * [A-Za-z0-9._+-], none empty, "." or "..", at most 512 characters. */
int hub_filename_valid(const char *name, qw_err *err);

/* An ETag as a blob name: 1..128 of [A-Za-z0-9] (after quotes and any W/
 * prefix were stripped). */
int hub_etag_valid(const char *etag, qw_err *err);

/* A commit hash as the hub sends it: 40 hex digits (also 64 accepted). */
int hub_commit_valid(const char *commit, qw_err *err);

/* $CACHE/models--ORG--NAME (malloc'd), after validating repo. */
char *hub_repo_dir(const char *repo, qw_err *err);

/* The snapshot folder of repo at revision rev (NULL = "main"): refs/<rev>
 * gives the commit, else rev itself is taken as a commit. Returns a malloc'd
 * path to an existing folder, or NULL with a message saying what was looked
 * for and how to get it ("qwenc pull REPO"). */
char *hub_snapshot_dir(const char *repo, const char *rev, qw_err *err);

/* Helpers shared with the downloader. */
char *hub_path_join(const char *a, const char *b); /* a/b, malloc'd */
int hub_mkdir_p(const char *path, qw_err *err);   /* mkdir -p */

#endif
