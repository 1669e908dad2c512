/* io.c -- reading a whole input file, bounded; writing one whole or not at
 * all (a temporary file beside it, renamed; removed on SIGINT/SIGTERM). */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvplan/render.h"

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

/* Read f to its end or max bytes (see kvp_read_file); f is closed. */
static enum kvp_status read_all(FILE *f, const char *path, uint64_t max, char **out, uint64_t *len, bool *truncated,
                                struct kvp_error *err)
{
    char *buf = NULL;
    size_t cap = 0, n = 0;
    bool more = false;

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
        return kvp_fail_at(err, KVP_ERR_RANGE, path, 0, 0, "the %s is larger than %llu MiB",
                           strcmp(path, "-") == 0 ? "input" : "file", (unsigned long long)(max >> 20));
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

enum kvp_status kvp_read_file(const char *path, uint64_t max, char **out, uint64_t *len, bool *truncated,
                              struct kvp_error *err)
{
    FILE *f;
    enum kvp_status st;

    if ((st = open_regular(path, &f, err)) != KVP_OK)
        return st;
    return read_all(f, path, max, out, len, truncated, err);
}

enum kvp_status kvp_read_input(const char *path, uint64_t max, char **out, uint64_t *len, struct kvp_error *err)
{
    FILE *f;
    int fd;
    if (strcmp(path, "-") != 0)
        return kvp_read_file(path, max, out, len, NULL, err);
    if ((fd = dup(STDIN_FILENO)) < 0 || !(f = fdopen(fd, "rb"))) {
        if (fd >= 0)
            close(fd);
        return kvp_fail_at(err, KVP_ERR_IO, "-", 0, 0, "cannot read the standard input");
    }
    return read_all(f, path, max, out, len, NULL, err);
}

/* ---- writing: a temporary file beside the target, renamed ---- */

static char guarded[4096];              /* the temporary file to remove if the process is killed */
static volatile sig_atomic_t guard_on;
static struct sigaction old_int, old_term, old_hup;

static void on_signal(int sig)
{
    if (guard_on)
        unlink(guarded); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

void kvp_tmp_guard(const char *tmp)
{
    struct sigaction sa;
    if (strlen(tmp) >= sizeof guarded)
        return;
    memcpy(guarded, tmp, strlen(tmp) + 1);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    guard_on = 1;
}

void kvp_tmp_unguard(void)
{
    if (!guard_on)
        return;
    guard_on = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
}

enum kvp_status kvp_tmp_beside(const char *path, char *tmp, size_t n, int *fd, struct kvp_error *err)
{
    struct stat st;
    mode_t mask;
    /* a rename replaces whatever the path names: never a device, a FIFO or a link
     * (`--svg /dev/stdout` run as root would replace /dev/stdout) */
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return kvp_fail(err, KVP_ERR_USAGE, "'%s' is not a regular file (the output replaces the file it names)", path);
    if ((size_t)snprintf(tmp, n, "%s.tmp.XXXXXX", path) >= n)
        return kvp_fail(err, KVP_ERR_USAGE, "'%s': the path is too long", path);
    if ((*fd = mkstemp(tmp)) < 0)
        return kvp_fail(err, KVP_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    kvp_tmp_guard(tmp);
    mask = umask(0); /* mkstemp makes 0600: the file keeps the mode it had, or gets 0666 & ~umask */
    umask(mask);
    if (fchmod(*fd, lstat(path, &st) == 0 ? st.st_mode & 07777 : 0666 & ~mask) != 0) {
        int e = errno;
        close(*fd);
        unlink(tmp);
        kvp_tmp_unguard();
        return kvp_fail(err, KVP_ERR_IO, "cannot set the mode of '%s': %s", tmp, strerror(e));
    }
    return KVP_OK;
}

enum kvp_status kvp_buf_save(const struct kvp_buf *b, const char *path, struct kvp_error *err)
{
    char tmp[4096];
    size_t done = 0;
    int fd, e;
    enum kvp_status st;

    if (b->nomem)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory rendering '%s'", path);
    if ((st = kvp_tmp_beside(path, tmp, sizeof tmp, &fd, err)) != KVP_OK)
        return st;
    while (done < b->len) {
        ssize_t w = write(fd, b->data + done, b->len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto fail;
        done += (size_t)w;
    }
    if (fsync(fd) != 0) /* a full disk shows here or at close, not after the rename */
        goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto fail;
    kvp_tmp_unguard();
    return KVP_OK;
fail:
    e = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    kvp_tmp_unguard();
    return kvp_fail(err, KVP_ERR_IO, "cannot write '%s': %s", path, strerror(e));
}
