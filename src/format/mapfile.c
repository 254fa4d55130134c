/* mapfile.c - see mapfile.h. */
#include "format/mapfile.h"

#include "base/regfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int mapfile_open(qw_mapfile *m, const char *path, qw_err *err) { return mapfile_open_ex(m, path, 1, err); }

int mapfile_open_ex(qw_mapfile *m, const char *path, int willneed, qw_err *err) {
    memset(m, 0, sizeof *m);
    const char *why = NULL;
    int fd = regfile_open(path, &why); /* a FIFO must not block the open */
    if (fd < 0) return qw_errf(err, "mapfile: %s: cannot open: %s", path, why);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return qw_errf(err, "mapfile: %s: cannot stat: %s", path, strerror(e));
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return qw_errf(err, "mapfile: %s: too large to map", path);
    }
    m->path = strdup(path);
    if (!m->path) {
        close(fd);
        return qw_errf(err, "mapfile: %s: out of memory", path);
    }
    m->size = (uint64_t)st.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, (size_t)m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(m->path);
            memset(m, 0, sizeof *m);
            return qw_errf(err, "mapfile: %s: mmap failed: %s", path, strerror(e));
        }
#if defined(MADV_WILLNEED)
        if (willneed) madvise(p, (size_t)m->size, MADV_WILLNEED);
#endif
        m->data = p;
    }
    close(fd); /* the mapping keeps the file referenced */
    return 0;
}

void mapfile_close(qw_mapfile *m) {
    if (!m) return;
    if (m->data && m->size) munmap((void *)m->data, (size_t)m->size);
    free(m->path);
    memset(m, 0, sizeof *m);
}
