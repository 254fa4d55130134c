/* test_cache.c - the Hugging Face cache layout and name validation
 * (src/hub/cache.c): what may become a path and what may not, where the
 * cache is, and how a repo id is resolved to a snapshot folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub/cache.h"
#include "test.h"

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

int main(void) {
    qw_err e;
    /* Repo ids. */
    const char *good_repos[] = {"Qwen/Qwen2.5-0.5B-Instruct", "gpt2", "a/b", "org_1/x.y-z"};
    for (size_t i = 0; i < sizeof good_repos / sizeof *good_repos; i++)
        CHECK(hub_repo_valid(good_repos[i], &e) == 0, "%s: %s", good_repos[i], e.msg);
    const char *bad_repos[] = {"", "/abs", "a/b/c", "../x", "x/..", "..", ".", "a//b", "a/", "/",
                               "a b/c", "a/b\n", "a/b%2f", "x--y/z", "a/-b", "a/b.", ".a/b",
                               "a\\b", "a/b;rm", "a/\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad_repos / sizeof *bad_repos; i++) {
        e.msg[0] = 0;
        CHECK(hub_repo_valid(bad_repos[i], &e) == -1 && strstr(e.msg, "repo id"), "'%s' accepted (%s)",
              bad_repos[i], e.msg);
    }
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK(hub_repo_valid(longname, &e) == -1, "long id accepted");

    /* File names and revisions. */
    const char *good_files[] = {"config.json", "model-00001-of-00002.safetensors", "onnx/model.onnx", "a+b.txt"};
    for (size_t i = 0; i < sizeof good_files / sizeof *good_files; i++)
        CHECK(hub_filename_valid(good_files[i], &e) == 0, "%s: %s", good_files[i], e.msg);
    const char *bad_files[] = {"", "/etc/passwd", "../x", "a/../../x", "a/./b", "..", ".", "a//b", "a/",
                               "x\ny", "a b", "a\\..\\b", "%2e%2e/x", "a:b"};
    for (size_t i = 0; i < sizeof bad_files / sizeof *bad_files; i++)
        CHECK(hub_filename_valid(bad_files[i], &e) == -1, "file name '%s' accepted", bad_files[i]);
    CHECK(hub_revision_valid("main", &e) == 0 && hub_revision_valid("refs/pr/1", &e) == 0 &&
              hub_revision_valid("v1.0", &e) == 0, "%s", e.msg);
    CHECK(hub_revision_valid("../main", &e) == -1 && hub_revision_valid("a/../b", &e) == -1 &&
              hub_revision_valid("/main", &e) == -1 && hub_revision_valid("", &e) == -1 &&
              hub_revision_valid("ma in", &e) == -1, "bad revision accepted");

    /* ETags and commits (server-supplied, become blob/snapshot names). */
    CHECK(hub_etag_valid("aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4", &e) == 0, "%s", e.msg);
    CHECK(hub_etag_valid("../../evil", &e) == -1 && hub_etag_valid("", &e) == -1 &&
              hub_etag_valid("a/b", &e) == -1 && hub_etag_valid("\"abc\"", &e) == -1, "bad etag accepted");
    CHECK(hub_commit_valid("0123456789abcdef0123456789abcdef01234567", &e) == 0, "%s", e.msg);
    CHECK(hub_commit_valid("0123456789abcdef0123456789abcdef0123456", &e) == -1 &&
              hub_commit_valid("../23456789abcdef0123456789abcdef01234567", &e) == -1 &&
              hub_commit_valid("g123456789abcdef0123456789abcdef01234567", &e) == -1, "bad commit accepted");

    /* Cache location from the environment. */
    unsetenv("HF_HUB_CACHE");
    unsetenv("HUGGINGFACE_HUB_CACHE");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    unsetenv("HF_HOME");
    char *d = hub_cache_dir(&e);
    CHECK(d && !strcmp(d, "/home/u/.cache/huggingface/hub"), "default cache %s", d ? d : e.msg);
    free(d);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    d = hub_cache_dir(&e);
    CHECK(d && !strcmp(d, "/xdg/huggingface/hub"), "xdg cache %s", d ? d : e.msg);
    free(d);
    setenv("HF_HOME", "/hf", 1);
    d = hub_cache_dir(&e);
    CHECK(d && !strcmp(d, "/hf/hub"), "HF_HOME cache %s", d ? d : e.msg);
    free(d);
    setenv("HF_HUB_CACHE", "/hubcache", 1);
    d = hub_cache_dir(&e);
    CHECK(d && !strcmp(d, "/hubcache"), "HF_HUB_CACHE %s", d ? d : e.msg);
    free(d);
    d = hub_repo_dir("Qwen/Qwen2.5-0.5B-Instruct", &e);
    CHECK(d && !strcmp(d, "/hubcache/models--Qwen--Qwen2.5-0.5B-Instruct"), "repo dir %s", d ? d : e.msg);
    free(d);
    CHECK(hub_repo_dir("../x", &e) == NULL, "repo dir of a bad id");
    unsetenv("HF_HUB_CACHE");

    /* Snapshot resolution in a real folder. */
    char root[] = "/tmp/qwenc_test_cache_XXXXXX";
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    setenv("HF_HOME", root, 1);
    char *snap = hub_snapshot_dir("org/model", NULL, &e);
    CHECK(!snap && strstr(e.msg, "qwenc pull org/model"), "missing repo: %s", e.msg);
    free(snap);
    char path[512];
    const char *commit = "0123456789abcdef0123456789abcdef01234567";
    snprintf(path, sizeof path, "%s/hub/models--org--model/refs", root);
    CHECK(hub_mkdir_p(path, &e) == 0, "%s", e.msg);
    snap = hub_snapshot_dir("org/model", NULL, &e);
    CHECK(!snap && strstr(e.msg, "main"), "no ref: %s", e.msg);
    free(snap);
    snprintf(path, sizeof path, "%s/hub/models--org--model/refs/main", root);
    write_text(path, "../../../../etc\n");
    snap = hub_snapshot_dir("org/model", NULL, &e);
    CHECK(!snap && strstr(e.msg, "refs/main"), "a ref naming a path must be refused: %s", e.msg);
    free(snap);
    write_text(path, "0123456789abcdef0123456789abcdef01234567\n");
    snap = hub_snapshot_dir("org/model", NULL, &e);
    CHECK(!snap && strstr(e.msg, "snapshot"), "ref without snapshot: %s", e.msg);
    free(snap);
    snprintf(path, sizeof path, "%s/hub/models--org--model/snapshots/%s", root, commit);
    CHECK(hub_mkdir_p(path, &e) == 0, "%s", e.msg);
    snap = hub_snapshot_dir("org/model", NULL, &e);
    CHECK(snap && !strcmp(snap, path), "snapshot %s", snap ? snap : e.msg);
    free(snap);
    snap = hub_snapshot_dir("org/model", commit, &e); /* a commit as revision */
    CHECK(snap && !strcmp(snap, path), "by commit %s", snap ? snap : e.msg);
    free(snap);
    snap = hub_snapshot_dir("org/model", "../../x", &e);
    CHECK(!snap, "bad revision resolved");
    free(snap);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0, "cleanup");
    return test_summary();
}
