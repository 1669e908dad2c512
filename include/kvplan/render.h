/* render.h -- output into memory buffers: text, JSON, and tables in text,
 * Markdown and CSV. The library renders; front ends decide where it goes.
 *
 *     struct kvp_buf b = {0};
 *     struct kvp_json j;
 *     kvp_json_init(&j, &b);
 *     kvp_json_begin(&j, NULL, '{');
 *     kvp_json_u64(&j, "kv_bytes", 68719476736);
 *     kvp_json_end(&j, '}');
 *     if (b.nomem) ...;  fwrite(b.data, 1, b.len, stdout);
 *     kvp_buf_release(&b);
 *
 * A kvp_buf owns its data until kvp_buf_release; an allocation failure sets
 * `nomem` and makes every later append a no-op, so callers check once at the end.
 */
#ifndef KVPLAN_RENDER_H
#define KVPLAN_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"

struct kvp_buf {
    char *data; /* NUL-terminated when len > 0 */
    size_t len, cap;
    bool nomem;
};

KVP_API void kvp_buf_printf(struct kvp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
KVP_API void kvp_buf_put(struct kvp_buf *b, const char *s, size_t n);
KVP_API void kvp_buf_release(struct kvp_buf *b);
/* Write b to path whole or not at all: a temporary file beside it, synced
 * and renamed over it (a failure, a full disk or a SIGINT/SIGTERM leaves the
 * old file and no temporary one); a path naming a device, FIFO or link is
 * refused. KVP_ERR_IO, KVP_ERR_USAGE, KVP_ERR_NOMEM (b->nomem). */
KVP_API enum kvp_status kvp_buf_save(const struct kvp_buf *b, const char *path, struct kvp_error *err);
/* Append s as XML/HTML character data or double-quoted attribute text:
 * & < > " escaped, and the control characters XML 1.0 cannot hold dropped. */
KVP_API void kvp_buf_xml(struct kvp_buf *b, const char *s);

/* Every output format, one enum; each renderer takes the ones its parser names. */
enum kvp_out { KVP_OUT_TEXT, KVP_OUT_JSON, KVP_OUT_CSV, KVP_OUT_MD, KVP_OUT_HTML, KVP_OUT_JUNIT };
/* "text", "json", "csv", "md"; false if unknown. Tables also take "html"
 * (kvp_table_out_from_name), plans "text", "json", "junit" (kvp_plan_out_from_name). */
KVP_API bool kvp_out_from_name(const char *s, enum kvp_out *out);

/* JSON writer: pretty-printed, two-space indent, keys in call order. */
#define KVP_JSON_MAX_DEPTH 16
struct kvp_json {
    struct kvp_buf *b;
    int depth;
    bool first[KVP_JSON_MAX_DEPTH];
};

KVP_API void kvp_json_init(struct kvp_json *j, struct kvp_buf *b);
/* key is NULL inside arrays and at the top; open is '{' or '['. */
KVP_API void kvp_json_begin(struct kvp_json *j, const char *key, char open);
KVP_API void kvp_json_end(struct kvp_json *j, char close);
KVP_API void kvp_json_str(struct kvp_json *j, const char *key, const char *v);
KVP_API void kvp_json_u64(struct kvp_json *j, const char *key, uint64_t v);
/* v as %.6g; an infinite or NaN v as null (JSON has neither). */
KVP_API void kvp_json_double(struct kvp_json *j, const char *key, double v);
KVP_API void kvp_json_bool(struct kvp_json *j, const char *key, bool v);
KVP_API void kvp_json_null(struct kvp_json *j, const char *key);

/* A table of strings, rendered as aligned text, Markdown or CSV. Columns
 * whose `right` flag is set are right-aligned (numbers). */
#define KVP_TABLE_MAX_COLS 16
struct kvp_table {
    uint32_t ncols, nrows, cap;
    const char *head[KVP_TABLE_MAX_COLS];
    bool right[KVP_TABLE_MAX_COLS];
    char **cells; /* nrows * ncols, owned */
    bool nomem;
};

KVP_API void kvp_table_init(struct kvp_table *t, uint32_t ncols, const char *const *head, const bool *right);
/* Append a row of ncols strings (copied). */
KVP_API void kvp_table_row(struct kvp_table *t, const char *const *cells);
KVP_API void kvp_table_render(const struct kvp_table *t, enum kvp_out fmt, struct kvp_buf *b);
KVP_API void kvp_table_release(struct kvp_table *t);

#endif
