/* io.c -- reading a whole input file, bounded. */
#include "io.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static enum kvp_status fail_read(FILE *f, char *buf, const char *path, struct kvp_error *err)
{
    free(buf);
    fclose(f);
    return kvp_fail_at(err, KVP_ERR_IO, path, 0, 0, "read error");
}

/* path opened for reading if it is a regular file: a FIFO, a device or a
 * directory is an error naming what it is, never a read that blocks (the
 * open does not wait for a FIFO's writer: O_NONBLOCK until it is known). */
static enum kvp_status open_regular(const char *path, FILE **out, struct kvp_error *err)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    const char *what;
    if (fd < 0)
        return kvp_fail_at(err, KVP_ERR_IO, path, 0, 0, "cannot open the file");
    if (fstat(fd, &st) != 0) {
        close(fd);
        return kvp_fail_at(err, KVP_ERR_IO, path, 0, 0, "cannot read the file's type");
    }
    if (!S_ISREG(st.st_mode)) {
        what = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket"
               : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "not a file";
        close(fd);
        return kvp_fail_at(err, KVP_ERR_IO, path, 0, 0, "%s, not a regular file", what);
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(*out = fdopen(fd, "rb"))) {
        close(fd);
        return kvp_fail_at(err, KVP_ERR_IO, path, 0, 0, "cannot open the file");
    }
    return KVP_OK;
}

enum kvp_status kvp_read_file(const char *path, uint64_t max, char **out, uint64_t *len, bool *truncated,
                              struct kvp_error *err)
{
    FILE *f;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    bool more = false;
    enum kvp_status st;

    if ((st = open_regular(path, &f, err)) != KVP_OK)
        return st;
    for (;;) {
        size_t got;
        if (n == cap) {
            char *nb;
            if (cap >= max) {
                more = fgetc(f) != EOF; /* full: is there anything past the limit? */
                break;
            }
            cap = cap ? cap * 2 : 65536;
            if (cap > max)
                cap = (size_t)max;
            if (!(nb = realloc(buf, cap + 1))) {
                free(buf);
                fclose(f);
                return kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading '%s'", path);
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f))
        return fail_read(f, buf, path, err);
    fclose(f);
    if (more && !truncated) {
        free(buf);
        return kvp_fail_at(err, KVP_ERR_RANGE, path, 0, 0, "the file is larger than %llu MiB",
                           (unsigned long long)(max >> 20));
    }
    if (!buf && !(buf = malloc(1)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading '%s'", path);
    buf[n] = '\0';
    if (truncated)
        *truncated = more;
    *out = buf;
    *len = n;
    return KVP_OK;
}
