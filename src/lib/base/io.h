/* io.h -- reading a whole input file, bounded (internal).
 *
 *     char *text; uint64_t len;
 *     if (kvp_read_file("x.yaml", 4u << 20, &text, &len, NULL, &err) != KVP_OK) ...
 *     ...
 *     free(text);
 */
#ifndef KVPLAN_BASE_IO_H
#define KVPLAN_BASE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvplan/error.h"
#include "kvplan/io.h"

/* Read at most max bytes of path into a malloc'd, NUL-terminated buffer
 * that the caller frees; the buffer grows as the file does, so a small file
 * costs little. With truncated NULL a larger file is an error ("the file is
 * larger than N MiB"); otherwise the first max bytes are returned and
 * *truncated says whether there was more (a GGUF's header is all kvplan
 * reads of it). Only a regular file is read: a FIFO, a device or a
 * directory is an error that names it, at once (a FIFO never blocks). */
enum kvp_status kvp_read_file(const char *path, uint64_t max, char **out, uint64_t *len, bool *truncated,
                              struct kvp_error *err);

/* kvp_read_input (kvp_read_file's read of path, or of the standard input
 * when path is "-") is public: kvplan/io.h. */

/* A temporary file beside path, for writing it whole or not at all:
 * mkstemp's "PATH.tmp.XXXXXX" into tmp (of size n), open as *fd, with the
 * target's mode (or 0666 & ~umask), and guarded: removed if SIGINT, SIGTERM
 * or SIGHUP ends the process before kvp_tmp_unguard. A path that names
 * something other than a regular file is refused (a rename would replace
 * a device or a link). The caller renames tmp to path, or removes it, then
 * calls kvp_tmp_unguard. */
enum kvp_status kvp_tmp_beside(const char *path, char *tmp, size_t n, int *fd, struct kvp_error *err);
void kvp_tmp_guard(const char *tmp);
void kvp_tmp_unguard(void);

#endif
