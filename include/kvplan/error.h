/* error.h -- status codes and the error value every fallible call fills.
 *
 * Errors are values: a fallible function returns a kvp_status and, when it is
 * not KVP_OK, fills the caller's struct kvp_error with the code, the place
 * (file, 1-based line and column, each optional) and a message. The message
 * grammar is the same everywhere: lower case, no final period, the subject in
 * quotes, the bad value shown.
 *
 *     struct kvp_error err = {0};
 *     if (kvp_model_load("models/x.yaml", &m, &err) != KVP_OK) {
 *         char line[KVP_ERROR_TEXT_MAX];
 *         fprintf(stderr, "%s\n", kvp_error_text(&err, line, sizeof line));
 *     }
 *     // prints e.g. "models/x.yaml:12:3: 'kv_heads' must divide 'heads' (got 7 and 32)"
 *
 * The error struct is plain storage owned by the caller; nothing to free.
 */
#ifndef KVPLAN_ERROR_H
#define KVPLAN_ERROR_H

#include <stddef.h>
#include <stdint.h>

#include "kvplan/api.h"

enum kvp_status {
    KVP_OK = 0,
    KVP_ERR_USAGE,    /* a caller passed a bad argument (option, size, name) */
    KVP_ERR_IO,       /* a file could not be opened, read or written */
    KVP_ERR_SYNTAX,   /* the text is not well-formed YAML/JSON/GGUF */
    KVP_ERR_SCHEMA,   /* well-formed, but a field is missing, unknown or mistyped */
    KVP_ERR_RANGE,    /* a value is out of its allowed range */
    KVP_ERR_OVERFLOW, /* a byte count does not fit in 64 bits */
    KVP_ERR_NOMEM,    /* an allocation failed */
    KVP_ERR_NOTFOUND, /* a named model, GPU or file does not exist */
    KVP_ERR_UNSUPPORTED, /* valid input this version cannot handle */
    KVP_ERR_TRUNCATED, /* the input ends inside its header: a cut file, or a prefix that needs more bytes */
};

#define KVP_ERROR_FILE_MAX 256
#define KVP_ERROR_MSG_MAX 512
#define KVP_ERROR_TEXT_MAX (KVP_ERROR_FILE_MAX + KVP_ERROR_MSG_MAX + 32)

struct kvp_error {
    enum kvp_status code;
    char file[KVP_ERROR_FILE_MAX]; /* "" when the error has no file */
    uint32_t line;                 /* 1-based; 0 when unknown */
    uint32_t col;                  /* 1-based; 0 when unknown */
    char msg[KVP_ERROR_MSG_MAX];
};

/* One line per status: what it means. Never NULL. */
KVP_API const char *kvp_status_to_string(enum kvp_status s);

/* Fill err (if not NULL) with code and a printf-style message and no place.
 * Returns code, so callers can write `return kvp_fail(err, KVP_ERR_RANGE, ...)`. */
KVP_API enum kvp_status kvp_fail(struct kvp_error *err, enum kvp_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, with a place. line and col are 1-based (0 = unknown). */
KVP_API enum kvp_status kvp_fail_at(struct kvp_error *err, enum kvp_status code, const char *file,
                            uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Set the place of an error that has none yet (keeps an existing one). */
KVP_API void kvp_error_place(struct kvp_error *err, const char *file, uint32_t line, uint32_t col);

/* The name in names[0..n) closest to s by case-insensitive edit distance,
 * if within max_dist edits, fewer than half of s's length, and not s itself;
 * NULL otherwise. For "did you mean". */
KVP_API const char *kvp_closest(const char *s, const char *const *names, size_t n, unsigned max_dist);

/* Render "file:line:col: message" (omitting the parts that are unknown) into
 * buf of size n; returns buf. A control byte (an escape sequence a file put
 * in a value the message echoes) is written as \xHH. */
KVP_API const char *kvp_error_text(const struct kvp_error *err, char *buf, uint32_t n);

#endif
