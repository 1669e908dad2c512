/* ydoc.c -- typed, place-aware access to a libyaml document. */
#include "ydoc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/num.h"

/* libyaml marks are 0-based; this is the one place that adds 1. */
static uint32_t one_based(size_t v)
{
    return v >= UINT32_MAX ? UINT32_MAX : (uint32_t)v + 1;
}

enum kvp_status ydoc_fail(struct ydoc *d, const yaml_node_t *n, struct kvp_error *err,
                          enum kvp_status code, const char *fmt, ...)
{
    if (err) {
        char msg[KVP_ERROR_MSG_MAX]; /* the arguments may point into err->msg */
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        err->code = code;
        snprintf(err->file, sizeof err->file, "%s", d->file ? d->file : "");
        err->line = n ? one_based(n->start_mark.line) : 0;
        err->col = n ? one_based(n->start_mark.column) : 0;
        memcpy(err->msg, msg, sizeof msg);
    }
    return code;
}

yaml_node_t *ydoc_node(struct ydoc *d, int id)
{
    return yaml_document_get_node(&d->doc, id);
}

yaml_node_t *ydoc_root(struct ydoc *d)
{
    return yaml_document_get_root_node(&d->doc);
}

bool ydoc_is_null(const yaml_node_t *n)
{
    const char *v = ydoc_scalar(n);
    return v && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (strcmp(v, "null") == 0 || strcmp(v, "~") == 0 || strcmp(v, "") == 0 ||
            strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0);
}

const char *ydoc_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static const char *type_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE: return "a mapping";
    case YAML_SEQUENCE_NODE: return "a sequence";
    default: return "a scalar";
    }
}

struct keyref {
    const char *key;
    size_t index; /* position in the mapping */
};

static int by_key(const void *x, const void *y)
{
    const struct keyref *a = x, *b = y;
    int c = strcmp(a->key, b->key);
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* Fail on a key that appears twice in mapping n, at its second place. Sorted,
 * so a config with 100,000 keys costs milliseconds, not minutes. */
static enum kvp_status unique_keys(struct ydoc *d, yaml_node_t *n, struct kvp_error *err)
{
    yaml_node_pair_t *pairs = n->data.mapping.pairs.start;
    size_t count = (size_t)(n->data.mapping.pairs.top - pairs), dup = SIZE_MAX;
    struct keyref *refs;

    if (count < 2)
        return KVP_OK;
    if (!(refs = malloc(count * sizeof *refs)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory checking %zu keys", count);
    for (size_t i = 0; i < count; i++)
        refs[i] = (struct keyref){ydoc_scalar(ydoc_node(d, pairs[i].key)), i};
    qsort(refs, count, sizeof *refs, by_key);
    for (size_t i = 1; i < count; i++)
        if (strcmp(refs[i].key, refs[i - 1].key) == 0 && refs[i].index < dup)
            dup = refs[i].index; /* the earliest second occurrence */
    free(refs);
    if (dup == SIZE_MAX)
        return KVP_OK;
    return ydoc_fail(d, ydoc_node(d, pairs[dup].key), err, KVP_ERR_SCHEMA, "duplicate key '%s'",
                     ydoc_scalar(ydoc_node(d, pairs[dup].key)));
}

/* Walk every node once: reject duplicate keys and deep nesting. `seen`
 * guards against anchors/aliases making the walk exponential. */
static enum kvp_status walk(struct ydoc *d, yaml_node_t *n, int depth, unsigned char *seen,
                            struct kvp_error *err)
{
    int id = (int)(n - d->doc.nodes.start) + 1;
    enum kvp_status st;

    if (depth > YDOC_MAX_DEPTH)
        return ydoc_fail(d, n, err, KVP_ERR_RANGE, "nesting deeper than %d levels", YDOC_MAX_DEPTH);
    if (seen[id - 1])
        return KVP_OK;
    seen[id - 1] = 1;
    if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++)
            if ((st = walk(d, ydoc_node(d, *it), depth + 1, seen, err)) != KVP_OK)
                return st;
    } else if (n->type == YAML_MAPPING_NODE) {
        yaml_node_pair_t *a, *top = n->data.mapping.pairs.top;
        for (a = n->data.mapping.pairs.start; a < top; a++) {
            yaml_node_t *ka = ydoc_node(d, a->key);
            if (!ydoc_scalar(ka))
                return ydoc_fail(d, ka, err, KVP_ERR_SCHEMA, "a key must be a scalar, not %s", type_name(ka));
        }
        if ((st = unique_keys(d, n, err)) != KVP_OK)
            return st;
        for (a = n->data.mapping.pairs.start; a < top; a++)
            if ((st = walk(d, ydoc_node(d, a->value), depth + 1, seen, err)) != KVP_OK)
                return st;
    }
    return KVP_OK;
}

enum kvp_status ydoc_load(struct ydoc *d, const char *text, uint64_t len, const char *file,
                          struct kvp_error *err)
{
    yaml_parser_t p;
    enum kvp_status st = KVP_OK;
    unsigned char *seen;
    size_t nnodes;

    memset(d, 0, sizeof *d);
    d->file = file;
    if (!yaml_parser_initialize(&p))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory initializing the YAML parser");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, (size_t)len);
    if (!yaml_parser_load(&p, &d->doc)) {
        const yaml_mark_t *m = p.problem_mark.line || p.problem_mark.column ? &p.problem_mark : &p.context_mark;
        if (p.error == YAML_MEMORY_ERROR) {
            st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory parsing");
        } else if (p.error == YAML_READER_ERROR) {
            /* a bad byte: libyaml gives its offset, not a mark */
            size_t line = 0, col = 0;
            for (size_t i = 0; i < p.problem_offset && i < (size_t)len; i++) {
                if (text[i] == '\n') {
                    line++;
                    col = 0;
                } else {
                    col++;
                }
            }
            st = kvp_fail_at(err, KVP_ERR_SYNTAX, file, one_based(line), one_based(col), "%s",
                             p.problem ? p.problem : "malformed text");
        } else
            st = kvp_fail_at(err, KVP_ERR_SYNTAX, file, one_based(m->line), one_based(m->column), "%s%s%s",
                             p.problem ? p.problem : "malformed YAML", p.context ? " " : "",
                             p.context ? p.context : "");
        yaml_parser_delete(&p);
        return st;
    }
    yaml_parser_delete(&p);
    d->loaded = true;
    if (!ydoc_root(d))
        return kvp_fail_at(err, KVP_ERR_SCHEMA, file, 1, 1, "the file is empty");
    nnodes = (size_t)(d->doc.nodes.top - d->doc.nodes.start);
    if (!(seen = calloc(nnodes, 1)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory checking %zu nodes", nnodes);
    st = walk(d, ydoc_root(d), 0, seen, err);
    free(seen);
    return st;
}

void ydoc_release(struct ydoc *d)
{
    if (d->loaded)
        yaml_document_delete(&d->doc);
    d->loaded = false;
}

yaml_node_t *ydoc_get(struct ydoc *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *k = ydoc_scalar(ydoc_node(d, p->key));
        if (k && strcmp(k, key) == 0)
            return ydoc_node(d, p->value);
    }
    return NULL;
}

enum kvp_status ydoc_check_keys(struct ydoc *d, yaml_node_t *map, const char *const *allowed,
                                struct kvp_error *err)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = ydoc_node(d, p->key);
        const char *k = ydoc_scalar(kn);
        const char *const *a;
        for (a = allowed; *a; a++)
            if (strcmp(*a, k) == 0)
                break;
        if (!*a) {
            const char *near = kvp_closest(k, allowed, (size_t)(a - allowed), 3);
            if (near)
                return ydoc_fail(d, kn, err, KVP_ERR_SCHEMA, "unknown key '%s' (did you mean '%s'?)", k, near);
            return ydoc_fail(d, kn, err, KVP_ERR_SCHEMA, "unknown key '%s'", k);
        }
    }
    return KVP_OK;
}

enum kvp_status ydoc_want_map(struct ydoc *d, yaml_node_t *n, const char *what, struct kvp_error *err)
{
    if (n->type != YAML_MAPPING_NODE)
        return ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a mapping, not %s", what, type_name(n));
    return KVP_OK;
}

enum kvp_status ydoc_want_seq(struct ydoc *d, yaml_node_t *n, const char *what, struct kvp_error *err)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a sequence, not %s", what, type_name(n));
    return KVP_OK;
}

enum kvp_status ydoc_u64(struct ydoc *d, yaml_node_t *n, const char *what, uint64_t *out,
                         struct kvp_error *err)
{
    const char *v = ydoc_scalar(n);
    if (!v)
        return ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be an integer, not %s", what, type_name(n));
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be an integer, not a string (got \"%.40s\")", what, v);
    if (v[0] == '-')
        return ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' must not be negative (got %.40s)", what, v);
    if (!kvp_parse_u64(v, out)) {
        size_t i = strspn(v, "0123456789");
        if (i > 0 && v[i] == '\0')
            return ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' does not fit in 64 bits (got %.40s)", what, v);
        return ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be an integer (got %.40s)", what, v);
    }
    return KVP_OK;
}

enum kvp_status ydoc_u32(struct ydoc *d, yaml_node_t *n, const char *what, uint32_t *out,
                         struct kvp_error *err)
{
    uint64_t v;
    enum kvp_status st = ydoc_u64(d, n, what, &v, err);
    if (st != KVP_OK)
        return st;
    if (v > UINT32_MAX)
        return ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' must be at most %u (got %llu)", what, UINT32_MAX,
                         (unsigned long long)v);
    *out = (uint32_t)v;
    return KVP_OK;
}

enum kvp_status ydoc_bool(struct ydoc *d, yaml_node_t *n, const char *what, bool *out,
                          struct kvp_error *err)
{
    const char *v = ydoc_scalar(n);
    if (v && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0) {
            *out = true;
            return KVP_OK;
        }
        if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0) {
            *out = false;
            return KVP_OK;
        }
    }
    return ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be true or false (got %.40s)", what,
                     v ? v : type_name(n));
}

enum kvp_status ydoc_str(struct ydoc *d, yaml_node_t *n, const char *what, char *buf, uint32_t size,
                         struct kvp_error *err)
{
    const char *v = ydoc_scalar(n);
    if (!v)
        return ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a string, not %s", what, type_name(n));
    if (strlen(v) >= size)
        return ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' is longer than %u characters", what, size - 1);
    memcpy(buf, v, strlen(v) + 1);
    return KVP_OK;
}

static yaml_node_t *lookup(struct ydoc *d, yaml_node_t *map, const char *key, bool required,
                           enum kvp_status *st, struct kvp_error *err)
{
    yaml_node_t *n = ydoc_get(d, map, key);
    *st = KVP_OK;
    if (n && ydoc_is_null(n))
        n = NULL;
    if (!n && required)
        *st = ydoc_fail(d, map, err, KVP_ERR_SCHEMA, "missing required key '%s'", key);
    return n;
}

#define GETTER(name, type, reader)                                                              \
    enum kvp_status name(struct ydoc *d, yaml_node_t *map, const char *key, bool required,     \
                         type *out, struct kvp_error *err)                                      \
    {                                                                                           \
        enum kvp_status st;                                                                     \
        yaml_node_t *n = lookup(d, map, key, required, &st, err);                               \
        return n ? reader(d, n, key, out, err) : st;                                            \
    }
GETTER(ydoc_get_u64, uint64_t, ydoc_u64)
GETTER(ydoc_get_u32, uint32_t, ydoc_u32)
GETTER(ydoc_get_bool, bool, ydoc_bool)
#undef GETTER

enum kvp_status ydoc_get_str(struct ydoc *d, yaml_node_t *map, const char *key, bool required,
                             char *buf, uint32_t size, struct kvp_error *err)
{
    enum kvp_status st;
    yaml_node_t *n = lookup(d, map, key, required, &st, err);
    return n ? ydoc_str(d, n, key, buf, size, err) : st;
}
