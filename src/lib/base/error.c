/* error.c -- status strings and filling struct kvp_error. */
#include "kvplan/error.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *kvp_status_to_string(enum kvp_status s)
{
    switch (s) {
    case KVP_OK: return "ok";
    case KVP_ERR_USAGE: return "bad argument";
    case KVP_ERR_IO: return "input/output error";
    case KVP_ERR_SYNTAX: return "syntax error";
    case KVP_ERR_SCHEMA: return "invalid field";
    case KVP_ERR_RANGE: return "value out of range";
    case KVP_ERR_OVERFLOW: return "byte count overflows 64 bits";
    case KVP_ERR_NOMEM: return "out of memory";
    case KVP_ERR_NOTFOUND: return "not found";
    case KVP_ERR_UNSUPPORTED: return "unsupported";
    case KVP_ERR_TRUNCATED: return "truncated input";
    }
    return "unknown status";
}

static void set_place(struct kvp_error *err, const char *file, uint32_t line, uint32_t col)
{
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    err->line = line;
    err->col = col;
}

enum kvp_status kvp_fail(struct kvp_error *err, enum kvp_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        set_place(err, NULL, 0, 0);
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

enum kvp_status kvp_fail_at(struct kvp_error *err, enum kvp_status code, const char *file,
                            uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        set_place(err, file, line, col);
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void kvp_error_place(struct kvp_error *err, const char *file, uint32_t line, uint32_t col)
{
    if (err && err->file[0] == '\0')
        set_place(err, file, line, col);
}

const char *kvp_error_text(const struct kvp_error *err, char *buf, uint32_t n)
{
    char raw[KVP_ERROR_TEXT_MAX];
    uint32_t o = 0;
    if (err->file[0] && err->line && err->col)
        snprintf(raw, sizeof raw, "%s:%u:%u: %s", err->file, err->line, err->col, err->msg);
    else if (err->file[0] && err->line)
        snprintf(raw, sizeof raw, "%s:%u: %s", err->file, err->line, err->msg);
    else if (err->file[0])
        snprintf(raw, sizeof raw, "%s: %s", err->file, err->msg);
    else
        snprintf(raw, sizeof raw, "%s", err->msg);
    /* a value echoed from a file never drives the terminal: control bytes as \xHH */
    for (const unsigned char *c = (const unsigned char *)raw; *c && o + 1 < n; c++) {
        if (*c >= 0x20 && *c != 0x7f) {
            buf[o++] = (char)*c;
        } else if (o + 5 < n) {
            snprintf(buf + o, n - o, "\\x%02x", *c);
            o += 4;
        } else {
            break;
        }
    }
    if (n)
        buf[o < n ? o : n - 1] = '\0';
    return buf;
}

/* Edit distance, case-insensitive; 1000 past 96 characters. */
static unsigned distance(const char *a, const char *b)
{
    unsigned row[97];
    size_t n = strlen(b);
    if (n > 96 || strlen(a) > 96)
        return 1000;
    for (size_t j = 0; j <= n; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; a[i - 1]; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= n; j++) {
            unsigned up = row[j];
            unsigned cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            unsigned best = diag + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[n];
}

const char *kvp_closest(const char *s, const char *const *names, size_t n, unsigned max_dist)
{
    const char *best = NULL;
    unsigned best_d = max_dist + 1;
    for (size_t i = 0; i < n; i++) {
        unsigned d = distance(s, names[i]);
        if (d > 0 && d < best_d && 2 * d < strlen(s)) { /* fewer edits than half of what was typed */
            best_d = d;
            best = names[i];
        }
    }
    return best;
}
