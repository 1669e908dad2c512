/* io.c -- reading a whole input file, bounded. */
#include "io.h"

#include <stdio.h>
#include <stdlib.h>

static enum kvp_status fail_read(FILE *f, char *buf, const char *path, struct kvp_error *err)
{
    free(buf);
    fclose(f);
    return kvp_fail_at(err, KVP_ERR_IO, path, 0, 0, "read error");
}

enum kvp_status kvp_read_file(const char *path, uint64_t max, char **out, uint64_t *len, bool *truncated,
                              struct kvp_error *err)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0;
    bool more = false;

    if (!f)
        return kvp_fail_at(err, KVP_ERR_IO, path, 0, 0, "cannot open the file");
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
