/* regfile.h - open a file for reading only if it is a regular file.
 *
 * Model files, configs and tokenizers name paths a user (or a download)
 * chose. A plain open(O_RDONLY) of a FIFO blocks until some writer appears,
 * so a FIFO named model.safetensors or config.json hung the loader forever.
 * These open without blocking (O_NONBLOCK), check fstat's S_ISREG on the
 * descriptor itself (no stat-then-open race) and only then hand it back in
 * blocking mode. Devices, directories and sockets are refused the same way.
 */
#ifndef QW_REGFILE_H
#define QW_REGFILE_H

#include <stdio.h>

/* Returns a read-only descriptor, or -1 with errno set (ENOENT etc.) and
 * *why (if non-NULL) pointing at a static reason for the message. A path
 * that is not a regular file gives errno EINVAL and *why
 * "not a regular file". */
int regfile_open(const char *path, const char **why);

/* The same as a stdio stream opened "rb". */
FILE *regfile_fopen(const char *path, const char **why);

/* 1 if path names a regular file (following symlinks), else 0. Never opens
 * it, so never blocks. */
int regfile_exists(const char *path);

#endif
