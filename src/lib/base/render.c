/* render.c -- buffers, a JSON writer and tables. */
#include "kvplan/render.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(struct kvp_buf *b, size_t extra)
{
    size_t cap;
    char *nd;
    if (b->nomem)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    if (!(nd = realloc(b->data, cap))) {
        b->nomem = true;
        return false;
    }
    b->data = nd;
    b->cap = cap;
    return true;
}

void kvp_buf_put(struct kvp_buf *b, const char *s, size_t n)
{
    if (!grow(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void kvp_buf_printf(struct kvp_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !grow(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void kvp_buf_release(struct kvp_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void kvp_buf_xml(struct kvp_buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': kvp_buf_put(b, "&amp;", 5); break;
        case '<': kvp_buf_put(b, "&lt;", 4); break;
        case '>': kvp_buf_put(b, "&gt;", 4); break;
        case '"': kvp_buf_put(b, "&quot;", 6); break;
        default:
            if (c >= 0x20 || c == '\n' || c == '\t')
                kvp_buf_put(b, s, 1);
        }
    }
}

bool kvp_out_from_name(const char *s, enum kvp_out *out)
{
    static const struct {
        const char *name;
        enum kvp_out fmt;
    } names[] = {{"text", KVP_OUT_TEXT}, {"json", KVP_OUT_JSON}, {"csv", KVP_OUT_CSV}, {"md", KVP_OUT_MD}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].fmt;
            return true;
        }
    return false;
}

/* ---- JSON ---- */

void kvp_json_init(struct kvp_json *j, struct kvp_buf *b)
{
    memset(j, 0, sizeof *j);
    j->b = b;
    j->first[0] = true;
}

static void quoted(struct kvp_buf *b, const char *s)
{
    kvp_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            kvp_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            kvp_buf_printf(b, "\\u%04x", c);
        else
            kvp_buf_put(b, (const char *)&c, 1);
    }
    kvp_buf_put(b, "\"", 1);
}

static void item(struct kvp_json *j, const char *key)
{
    if (j->depth > 0) {
        kvp_buf_printf(j->b, "%s\n%*s", j->first[j->depth] ? "" : ",", 2 * j->depth, "");
        j->first[j->depth] = false;
    }
    if (key) {
        quoted(j->b, key);
        kvp_buf_put(j->b, ": ", 2);
    }
}

void kvp_json_begin(struct kvp_json *j, const char *key, char open)
{
    item(j, key);
    kvp_buf_put(j->b, &open, 1);
    if (j->depth + 1 < KVP_JSON_MAX_DEPTH)
        j->depth++;
    j->first[j->depth] = true;
}

void kvp_json_end(struct kvp_json *j, char close)
{
    bool empty = j->first[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (!empty)
        kvp_buf_printf(j->b, "\n%*s", 2 * j->depth, "");
    kvp_buf_put(j->b, &close, 1);
    if (j->depth == 0)
        kvp_buf_put(j->b, "\n", 1);
}

void kvp_json_str(struct kvp_json *j, const char *key, const char *v)
{
    item(j, key);
    quoted(j->b, v);
}

void kvp_json_u64(struct kvp_json *j, const char *key, uint64_t v)
{
    item(j, key);
    kvp_buf_printf(j->b, "%llu", (unsigned long long)v);
}

void kvp_json_double(struct kvp_json *j, const char *key, double v)
{
    item(j, key);
    if (isfinite(v))
        kvp_buf_printf(j->b, "%.6g", v);
    else
        kvp_buf_printf(j->b, "null"); /* JSON has no inf or nan */
}

void kvp_json_bool(struct kvp_json *j, const char *key, bool v)
{
    item(j, key);
    kvp_buf_printf(j->b, "%s", v ? "true" : "false");
}

void kvp_json_null(struct kvp_json *j, const char *key)
{
    item(j, key);
    kvp_buf_put(j->b, "null", 4);
}

/* ---- tables ---- */

void kvp_table_init(struct kvp_table *t, uint32_t ncols, const char *const *head, const bool *right)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols > KVP_TABLE_MAX_COLS ? KVP_TABLE_MAX_COLS : ncols;
    for (uint32_t c = 0; c < t->ncols; c++) {
        t->head[c] = head[c];
        t->right[c] = right ? right[c] : false;
    }
}

void kvp_table_row(struct kvp_table *t, const char *const *cells)
{
    if (t->nomem)
        return;
    if (t->nrows == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 16;
        char **nc = realloc(t->cells, (size_t)cap * t->ncols * sizeof *nc);
        if (!nc) {
            t->nomem = true;
            return;
        }
        t->cells = nc;
        t->cap = cap;
    }
    for (uint32_t c = 0; c < t->ncols; c++) {
        char *s = strdup(cells[c] ? cells[c] : "");
        if (!s)
            t->nomem = true;
        t->cells[(size_t)t->nrows * t->ncols + c] = s;
    }
    t->nrows++;
}

static const char *cell(const struct kvp_table *t, uint32_t r, uint32_t c)
{
    const char *s = t->cells[(size_t)r * t->ncols + c];
    return s ? s : "";
}

/* Display width of UTF-8 text: code points, not bytes. */
static size_t width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

static void pad(struct kvp_buf *b, const char *s, size_t w, bool right)
{
    size_t n = width(s);
    if (right)
        kvp_buf_printf(b, "%*s%s", (int)(w - n), "", s);
    else
        kvp_buf_printf(b, "%s%*s", s, (int)(w - n), "");
}

static void render_csv_field(struct kvp_buf *b, const char *s)
{
    if (strpbrk(s, ",\"\n")) {
        kvp_buf_put(b, "\"", 1);
        for (; *s; s++)
            kvp_buf_put(b, *s == '"' ? "\"\"" : s, *s == '"' ? 2 : 1);
        kvp_buf_put(b, "\"", 1);
    } else {
        kvp_buf_printf(b, "%s", s);
    }
}

void kvp_table_render(const struct kvp_table *t, enum kvp_out fmt, struct kvp_buf *b)
{
    size_t w[KVP_TABLE_MAX_COLS];

    if (fmt == KVP_OUT_CSV) {
        for (uint32_t c = 0; c < t->ncols; c++) {
            render_csv_field(b, t->head[c]);
            kvp_buf_put(b, c + 1 < t->ncols ? "," : "\n", 1);
        }
        for (uint32_t r = 0; r < t->nrows; r++)
            for (uint32_t c = 0; c < t->ncols; c++) {
                render_csv_field(b, cell(t, r, c));
                kvp_buf_put(b, c + 1 < t->ncols ? "," : "\n", 1);
            }
        return;
    }
    for (uint32_t c = 0; c < t->ncols; c++) {
        w[c] = width(t->head[c]);
        for (uint32_t r = 0; r < t->nrows; r++)
            if (width(cell(t, r, c)) > w[c])
                w[c] = width(cell(t, r, c));
        if (fmt == KVP_OUT_MD && w[c] < 3)
            w[c] = 3;
    }
    for (int row = -1; row < (int)t->nrows; row++) {
        for (uint32_t c = 0; c < t->ncols; c++) {
            const char *s = row < 0 ? t->head[c] : cell(t, (uint32_t)row, c);
            if (fmt == KVP_OUT_MD)
                kvp_buf_put(b, "| ", 2);
            pad(b, s, w[c], t->right[c] && row >= 0);
            if (fmt == KVP_OUT_MD)
                kvp_buf_put(b, " ", 1);
            else if (c + 1 < t->ncols)
                kvp_buf_put(b, "  ", 2);
        }
        while (fmt != KVP_OUT_MD && !b->nomem && b->len && b->data[b->len - 1] == ' ')
            b->data[--b->len] = '\0'; /* an empty last cell leaves no trailing blanks */
        kvp_buf_put(b, fmt == KVP_OUT_MD ? "|\n" : "\n", fmt == KVP_OUT_MD ? 2 : 1);
        if (row < 0 && fmt == KVP_OUT_MD) {
            for (uint32_t c = 0; c < t->ncols; c++) {
                kvp_buf_put(b, "|", 1);
                for (size_t i = 0; i < w[c] + 2; i++)
                    kvp_buf_put(b, (i == w[c] + 1 && t->right[c]) ? ":" : "-", 1);
            }
            kvp_buf_put(b, "|\n", 2);
        }
    }
}

void kvp_table_release(struct kvp_table *t)
{
    for (size_t i = 0; i < (size_t)t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}
