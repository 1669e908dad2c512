/* io.h -- reading an input whole, bounded, for the front ends: the library's
 * pure layers (engine) take text, and a command's file or standard input is
 * read here (src/lib/base/io.c).
 *
 *     char *text; uint64_t len;
 *     if (kvp_read_input("vllm.log", 16u << 20, &text, &len, &err) != KVP_OK) ...
 *     ... kvp_log_parse(text, len, "vllm.log", &log, &err) ...
 *     free(text);
 */
#ifndef KVPLAN_IO_H
#define KVPLAN_IO_H

#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"

/* The whole regular file at path, or the standard input to its end when path
 * is "-" (a pipe or a terminal: read as it comes), into a malloc'd,
 * NUL-terminated buffer the caller frees. More than max bytes is an error
 * (KVP_ERR_RANGE, "... larger than N MiB"); a file that cannot be opened, a
 * FIFO, a device or a directory is KVP_ERR_IO naming it. */
KVP_API enum kvp_status kvp_read_input(const char *path, uint64_t max, char **out, uint64_t *len,
                                       struct kvp_error *err);

#endif
