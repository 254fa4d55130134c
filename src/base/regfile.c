/* regfile.c - see regfile.h. */
#include "base/regfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

int regfile_open(const char *path, const char **why) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (why) *why = strerror(errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        if (why) *why = strerror(e);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        if (why)
            *why = S_ISDIR(st.st_mode)    ? "not a regular file (a directory)"
                   : S_ISFIFO(st.st_mode) ? "not a regular file (a FIFO)"
                                          : "not a regular file";
        errno = EINVAL;
        return -1;
    }
    /* Back to blocking reads: O_NONBLOCK only guarded the open itself. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

FILE *regfile_fopen(const char *path, const char **why) {
    int fd = regfile_open(path, why);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        if (why) *why = strerror(e);
        errno = e;
    }
    return f;
}

int regfile_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}
