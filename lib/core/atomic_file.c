/* Atomic file replacement, the one implementation the writers share (checkpoints,
 * token files): the content goes to a new temporary file `<path>.tmp.<pid>.<n>` in the
 * destination's directory, which is flushed, fsync'ed and renamed over `path`; the
 * directory is then fsync'ed (best effort: not every file system supports it). A process
 * killed before the rename leaves the previous file at `path` intact. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

static atomic_uint tmp_counter;

static void fsync_parent_dir(const char *path) {
    char *dir = strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    const char *d = ".";
    if (slash == dir) d = "/";
    else if (slash) {
        *slash = '\0';
        d = dir;
    }
    int dfd = open(d, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(dir);
}

int induct__write_atomic(const char *path, const char *what, induct__write_fn write_fn,
                         void *user) {
    char eb[128];
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 64);
    INDUCT_FAIL_IF(!tmp, INDUCT_ENOMEM, "%s '%s': out of memory", what, path);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, plen + 64, "%s.tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1u));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        int rc = induct__fail(INDUCT_EIO, "%s '%s': cannot create temporary file '%s': %s", what,
                              path, tmp, induct__errstr(e, eb, sizeof eb));
        free(tmp);
        return rc;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return induct__fail(INDUCT_EIO, "%s '%s': fdopen: %s", what, path,
                            induct__errstr(e, eb, sizeof eb));
    }
    errno = 0;
    int ok = write_fn(f, user) == 0;
    int e = ok ? 0 : errno;
    if (ok && fflush(f) != 0) ok = 0, e = errno;
    if (ok && fsync(fileno(f)) != 0) ok = 0, e = errno;
    if (fclose(f) != 0 && ok) ok = 0, e = errno;
    if (ok && rename(tmp, path) != 0) ok = 0, e = errno;
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return induct__fail(INDUCT_EIO, "%s '%s': writing failed: %s", what, path,
                            induct__errstr(e ? e : EIO, eb, sizeof eb));
    }
    free(tmp);
    fsync_parent_dir(path);
    return INDUCT_OK;
}
