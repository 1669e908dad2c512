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

/* An error at mark m (none: no place). The message may be err->msg itself. */
static enum kvp_status vfail(struct ydoc *d, const yaml_mark_t *m, struct kvp_error *err, enum kvp_status code,
                             const char *fmt, va_list ap)
{
    if (err) {
        char msg[KVP_ERROR_MSG_MAX]; /* the arguments may point into err->msg */
        vsnprintf(msg, sizeof msg, fmt, ap);
        err->code = code;
        snprintf(err->file, sizeof err->file, "%s", d->file ? d->file : "");
        err->line = m ? one_based(m->line) : 0;
        err->col = m ? one_based(m->column) : 0;
        memcpy(err->msg, msg, sizeof msg);
    }
    return code;
}

static enum kvp_status fail_mark(struct ydoc *d, const yaml_mark_t *m, struct kvp_error *err, enum kvp_status code,
                                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static enum kvp_status fail_mark(struct ydoc *d, const yaml_mark_t *m, struct kvp_error *err, enum kvp_status code,
                                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    code = vfail(d, m, err, code, fmt, ap);
    va_end(ap);
    return code;
}

enum kvp_status kvp_ydoc_fail(struct ydoc *d, const yaml_node_t *n, struct kvp_error *err,
                          enum kvp_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    code = vfail(d, n ? &n->start_mark : NULL, err, code, fmt, ap);
    va_end(ap);
    return code;
}

yaml_node_t *kvp_ydoc_node(struct ydoc *d, int id)
{
    return yaml_document_get_node(&d->doc, id);
}

yaml_node_t *kvp_ydoc_root(struct ydoc *d)
{
    return yaml_document_get_root_node(&d->doc);
}

bool kvp_ydoc_is_null(const yaml_node_t *n)
{
    const char *v = kvp_ydoc_scalar(n);
    return v && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (strcmp(v, "null") == 0 || strcmp(v, "~") == 0 || strcmp(v, "") == 0 ||
            strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0);
}

const char *kvp_ydoc_scalar(const yaml_node_t *n)
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
        refs[i] = (struct keyref){kvp_ydoc_scalar(kvp_ydoc_node(d, pairs[i].key)), i};
    qsort(refs, count, sizeof *refs, by_key);
    for (size_t i = 1; i < count; i++)
        if (strcmp(refs[i].key, refs[i - 1].key) == 0 && refs[i].index < dup)
            dup = refs[i].index; /* the earliest second occurrence */
    free(refs);
    if (dup == SIZE_MAX)
        return KVP_OK;
    return kvp_ydoc_fail(d, kvp_ydoc_node(d, pairs[dup].key), err, KVP_ERR_SCHEMA, "duplicate key '%s'",
                     kvp_ydoc_scalar(kvp_ydoc_node(d, pairs[dup].key)));
}

/* ---- composing the document from libyaml's events ------------------------
 *
 * yaml_parser_load builds the whole tree before anything can be checked, and
 * libyaml's scanner costs O(depth) per token, so 200,000 nested brackets took
 * a minute before a depth check could run. Here the tree is built one event
 * at a time and every limit is checked at the event that breaks it: parsing
 * stops there, libyaml having read at most a little past it (it looks ahead
 * at most 1024 characters for a key). */

struct frame {
    int id;         /* the collection's node */
    int key;        /* a mapping's key waiting for its value, or 0 */
    int anchor;     /* its index in anchors[], or -1 */
    uint32_t start; /* nodes counted before it; at its end, nodes - start is its size */
};

struct anchor {
    char *name;
    int id;
    uint32_t size; /* nodes in its subtree, aliases expanded; 0 while it is open */
};

struct composer {
    struct ydoc *d;
    struct kvp_error *err;
    struct frame stack[YDOC_MAX_DEPTH + 1]; /* the open collections, the root's first */
    int depth;                              /* frames on the stack: the depth of the next node */
    uint32_t nodes;                         /* nodes so far, each alias counting its anchor's size */
    uint32_t n_aliases, n_anchors;
    struct anchor anchors[YDOC_MAX_ANCHORS];
};

/* Count `size` more nodes at mark m; `alias` names the alias adding them, if any. */
static enum kvp_status count_nodes(struct composer *c, uint32_t size, const char *alias, const yaml_mark_t *m)
{
    if (size <= YDOC_MAX_NODES - c->nodes) {
        c->nodes += size;
        return KVP_OK;
    }
    if (alias)
        return fail_mark(c->d, m, c->err, KVP_ERR_RANGE, "alias '%.40s' expands the document to more than %u nodes",
                         alias, YDOC_MAX_NODES);
    return fail_mark(c->d, m, c->err, KVP_ERR_RANGE, "more than %u nodes", YDOC_MAX_NODES);
}

/* *id: the node alias `name` refers to (its latest anchor), counted. */
static enum kvp_status resolve_alias(struct composer *c, const char *name, const yaml_mark_t *m, int *id)
{
    if (++c->n_aliases > YDOC_MAX_ALIASES)
        return fail_mark(c->d, m, c->err, KVP_ERR_RANGE, "more than %u aliases", YDOC_MAX_ALIASES);
    for (uint32_t i = c->n_anchors; i > 0; i--) {
        const struct anchor *a = &c->anchors[i - 1];
        if (strcmp(a->name, name) != 0)
            continue;
        if (!a->size)
            return fail_mark(c->d, m, c->err, KVP_ERR_SCHEMA, "alias '%.40s' refers to a node that contains it", name);
        *id = a->id;
        return count_nodes(c, a->size, name, m);
    }
    return fail_mark(c->d, m, c->err, KVP_ERR_SCHEMA, "undefined alias '%.40s'", name);
}

/* Node id joins the open collection as an item, a key or a value (the root
 * joins nothing). */
static enum kvp_status attach(struct composer *c, int id)
{
    struct frame *f;
    yaml_node_t *n = kvp_ydoc_node(c->d, id);
    int ok;

    if (c->depth == 0)
        return KVP_OK;
    f = &c->stack[c->depth - 1];
    if (kvp_ydoc_node(c->d, f->id)->type == YAML_SEQUENCE_NODE) {
        ok = yaml_document_append_sequence_item(&c->d->doc, f->id, id);
    } else if (!f->key) {
        if (!kvp_ydoc_scalar(n))
            return kvp_ydoc_fail(c->d, n, c->err, KVP_ERR_SCHEMA, "a key must be a scalar, not %s", type_name(n));
        f->key = id;
        ok = 1;
    } else {
        ok = yaml_document_append_mapping_pair(&c->d->doc, f->id, f->key, id);
        f->key = 0;
    }
    return ok ? KVP_OK : kvp_fail(c->err, KVP_ERR_NOMEM, "out of memory parsing");
}

/* The node of event e (a scalar or the start of a collection) at the
 * current depth: checked, added, attached, its anchor registered; a
 * collection's frame pushed. */
static enum kvp_status add_node(struct composer *c, const yaml_event_t *e)
{
    yaml_document_t *doc = &c->d->doc;
    const yaml_mark_t *m = &e->start_mark;
    const yaml_char_t *anchor;
    uint32_t start = c->nodes;
    enum kvp_status st;
    int id;

    if (c->depth > YDOC_MAX_DEPTH)
        return fail_mark(c->d, m, c->err, KVP_ERR_RANGE, "nesting deeper than %d levels", YDOC_MAX_DEPTH);
    if ((st = count_nodes(c, 1, NULL, m)) != KVP_OK)
        return st;
    if (e->type == YAML_SCALAR_EVENT) {
        if (e->data.scalar.length > YDOC_MAX_SCALAR)
            return fail_mark(c->d, m, c->err, KVP_ERR_RANGE, "a scalar longer than %u bytes (got %zu)",
                             YDOC_MAX_SCALAR, e->data.scalar.length);
        id = yaml_document_add_scalar(doc, e->data.scalar.tag, e->data.scalar.value, (int)e->data.scalar.length,
                                      e->data.scalar.style);
        anchor = e->data.scalar.anchor;
    } else if (e->type == YAML_SEQUENCE_START_EVENT) {
        id = yaml_document_add_sequence(doc, e->data.sequence_start.tag, e->data.sequence_start.style);
        anchor = e->data.sequence_start.anchor;
    } else {
        id = yaml_document_add_mapping(doc, e->data.mapping_start.tag, e->data.mapping_start.style);
        anchor = e->data.mapping_start.anchor;
    }
    if (!id)
        return kvp_fail(c->err, KVP_ERR_NOMEM, "out of memory parsing");
    kvp_ydoc_node(c->d, id)->start_mark = *m;
    kvp_ydoc_node(c->d, id)->end_mark = e->end_mark;
    if ((st = attach(c, id)) != KVP_OK)
        return st;
    if (anchor) {
        struct anchor *a;
        if (c->n_anchors == YDOC_MAX_ANCHORS)
            return fail_mark(c->d, m, c->err, KVP_ERR_RANGE, "more than %u anchors", YDOC_MAX_ANCHORS);
        a = &c->anchors[c->n_anchors];
        if (!(a->name = strdup((const char *)anchor)))
            return kvp_fail(c->err, KVP_ERR_NOMEM, "out of memory parsing");
        a->id = id;
        a->size = e->type == YAML_SCALAR_EVENT ? 1 : 0; /* a collection's, at its end */
        c->n_anchors++;
    }
    if (e->type != YAML_SCALAR_EVENT)
        c->stack[c->depth++] = (struct frame){id, 0, anchor ? (int)c->n_anchors - 1 : -1, start};
    return KVP_OK;
}

/* The end of the open collection: a mapping's keys must be unique. */
static enum kvp_status end_node(struct composer *c, const yaml_event_t *e)
{
    struct frame *f = &c->stack[--c->depth];
    yaml_node_t *n = kvp_ydoc_node(c->d, f->id);

    n->end_mark = e->end_mark;
    if (f->anchor >= 0)
        c->anchors[f->anchor].size = c->nodes - f->start;
    return n->type == YAML_MAPPING_NODE ? unique_keys(c->d, n, c->err) : KVP_OK;
}

/* libyaml's error, at its place. */
static enum kvp_status parse_error(const yaml_parser_t *p, const char *text, uint64_t len, const char *file,
                                   struct kvp_error *err)
{
    const yaml_mark_t *m = p->problem_mark.line || p->problem_mark.column ? &p->problem_mark : &p->context_mark;

    if (p->error == YAML_MEMORY_ERROR)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory parsing");
    if (p->error == YAML_READER_ERROR) {
        /* a bad byte: libyaml gives its offset, not a mark */
        size_t line = 0, col = 0;
        for (size_t i = 0; i < p->problem_offset && i < (size_t)len; i++) {
            if (text[i] == '\n') {
                line++;
                col = 0;
            } else {
                col++;
            }
        }
        return kvp_fail_at(err, KVP_ERR_SYNTAX, file, one_based(line), one_based(col), "%s",
                           p->problem ? p->problem : "malformed text");
    }
    return kvp_fail_at(err, KVP_ERR_SYNTAX, file, one_based(m->line), one_based(m->column), "%s%s%s",
                       p->problem ? p->problem : "malformed YAML", p->context ? " " : "", p->context ? p->context : "");
}

/* libyaml checks each %TAG directive against every one before it, all
 * within the one event that starts the document (200,000 took 6 s), so the
 * directives before the first document are counted here first: the lines
 * that start with '%' before the first line of content. */
static enum kvp_status count_directives(struct ydoc *d, const char *text, uint64_t len, struct kvp_error *err)
{
    uint32_t line = 0, n = 0;

    for (uint64_t i = 0; i < len; line++) {
        uint64_t j = i;
        while (j < len && (text[j] == ' ' || text[j] == '\t'))
            j++;
        if (text[i] == '%' && ++n > YDOC_MAX_DIRECTIVES)
            return kvp_fail_at(err, KVP_ERR_RANGE, d->file, line + 1, 1, "more than %d directives",
                               YDOC_MAX_DIRECTIVES);
        if (text[i] != '%' && j < len && text[j] != '#' && text[j] != '\n' && text[j] != '\r')
            return KVP_OK; /* content: directives come before it */
        while (i < len && text[i] != '\n')
            i++;
        i++;
    }
    return KVP_OK;
}

/* Read events up to the end of the first document, composing it into d. */
static enum kvp_status compose(struct composer *c, yaml_parser_t *p, const char *text, uint64_t len)
{
    struct ydoc *d = c->d;
    enum kvp_status st = KVP_OK;

    for (;;) {
        yaml_event_t e;
        bool done;
        if (!yaml_parser_parse(p, &e))
            return parse_error(p, text, len, d->file, c->err);
        switch (e.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (!yaml_document_initialize(&d->doc, NULL, NULL, NULL, 1, 1))
                st = kvp_fail(c->err, KVP_ERR_NOMEM, "out of memory parsing");
            d->loaded = st == KVP_OK;
            break;
        case YAML_SCALAR_EVENT:
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            st = add_node(c, &e);
            break;
        case YAML_ALIAS_EVENT: {
            int id = 0;
            if ((st = resolve_alias(c, (const char *)e.data.alias.anchor, &e.start_mark, &id)) == KVP_OK)
                st = attach(c, id);
            break;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            st = end_node(c, &e);
            break;
        default: /* stream start, directives */
            break;
        }
        done = e.type == YAML_DOCUMENT_END_EVENT || e.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&e);
        if (st != KVP_OK)
            return st;
        if (done)
            return d->loaded && kvp_ydoc_root(d) ? KVP_OK
                                             : kvp_fail_at(c->err, KVP_ERR_SCHEMA, d->file, 1, 1, "the file is empty");
    }
}

enum kvp_status kvp_ydoc_load(struct ydoc *d, const char *text, uint64_t len, const char *file,
                          struct kvp_error *err)
{
    struct composer *c = calloc(1, sizeof *c);
    yaml_parser_t p;
    enum kvp_status st;

    memset(d, 0, sizeof *d);
    d->file = file;
    if (!c || !yaml_parser_initialize(&p)) {
        free(c);
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory initializing the YAML parser");
    }
    c->d = d;
    c->err = err;
    yaml_parser_set_input_string(&p, (const unsigned char *)text, (size_t)len);
    if ((st = count_directives(d, text, len, err)) == KVP_OK)
        st = compose(c, &p, text, len);
    yaml_parser_delete(&p);
    for (uint32_t i = 0; i < c->n_anchors; i++)
        free(c->anchors[i].name);
    free(c);
    if (st != KVP_OK)
        kvp_ydoc_release(d);
    return st;
}

void kvp_ydoc_release(struct ydoc *d)
{
    if (d->loaded)
        yaml_document_delete(&d->doc);
    d->loaded = false;
}

yaml_node_t *kvp_ydoc_get(struct ydoc *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *k = kvp_ydoc_scalar(kvp_ydoc_node(d, p->key));
        if (k && strcmp(k, key) == 0)
            return kvp_ydoc_node(d, p->value);
    }
    return NULL;
}

enum kvp_status kvp_ydoc_want_schema(struct ydoc *d, yaml_node_t *root, const char *key, const char *what,
                                     uint32_t *version, struct kvp_error *err)
{
    yaml_node_t *n;
    enum kvp_status st;
    if (root && (st = kvp_ydoc_want_map(d, root, what, err)) != KVP_OK)
        return st;
    if (!root || !(n = kvp_ydoc_get(d, root, key)))
        return kvp_ydoc_fail(d, root, err, KVP_ERR_SCHEMA,
                             "missing required key '%s': not a kvplan %s (nothing of it is shown)", key, what);
    return kvp_ydoc_u32(d, n, key, version, err);
}

enum kvp_status kvp_ydoc_check_keys(struct ydoc *d, yaml_node_t *map, const char *const *allowed,
                                struct kvp_error *err)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = kvp_ydoc_node(d, p->key);
        const char *k = kvp_ydoc_scalar(kn);
        const char *const *a;
        for (a = allowed; *a; a++)
            if (strcmp(*a, k) == 0)
                break;
        if (!*a) {
            const char *near = kvp_closest(k, allowed, (size_t)(a - allowed), 3);
            if (near)
                return kvp_ydoc_fail(d, kn, err, KVP_ERR_SCHEMA, "unknown key '%s' (did you mean '%s'?)", k, near);
            return kvp_ydoc_fail(d, kn, err, KVP_ERR_SCHEMA, "unknown key '%s'", k);
        }
    }
    return KVP_OK;
}

enum kvp_status kvp_ydoc_want_map(struct ydoc *d, yaml_node_t *n, const char *what, struct kvp_error *err)
{
    if (n->type != YAML_MAPPING_NODE)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a mapping, not %s", what, type_name(n));
    return KVP_OK;
}

enum kvp_status kvp_ydoc_want_seq(struct ydoc *d, yaml_node_t *n, const char *what, struct kvp_error *err)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a sequence, not %s", what, type_name(n));
    return KVP_OK;
}

enum kvp_status kvp_ydoc_u64(struct ydoc *d, yaml_node_t *n, const char *what, uint64_t *out,
                         struct kvp_error *err)
{
    const char *v = kvp_ydoc_scalar(n);
    if (!v)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be an integer, not %s", what, type_name(n));
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be an integer, not a string (got \"%.40s\")", what,
                             v);
    if (v[0] == '-')
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' must not be negative (got %.40s)", what, v);
    if (!kvp_parse_u64(v, out)) {
        size_t i = strspn(v, "0123456789");
        if (i > 0 && v[i] == '\0')
            return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' does not fit in 64 bits (got %.40s)", what, v);
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be an integer (got %.40s)", what, v);
    }
    return KVP_OK;
}

enum kvp_status kvp_ydoc_u32(struct ydoc *d, yaml_node_t *n, const char *what, uint32_t *out,
                         struct kvp_error *err)
{
    uint64_t v;
    enum kvp_status st = kvp_ydoc_u64(d, n, what, &v, err);
    if (st != KVP_OK)
        return st;
    if (v > UINT32_MAX)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' must be at most %u (got %llu)", what, UINT32_MAX,
                         (unsigned long long)v);
    *out = (uint32_t)v;
    return KVP_OK;
}

enum kvp_status kvp_ydoc_bool(struct ydoc *d, yaml_node_t *n, const char *what, bool *out,
                          struct kvp_error *err)
{
    const char *v = kvp_ydoc_scalar(n);
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
    return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be true or false (got %.40s)", what,
                     v ? v : type_name(n));
}

enum kvp_status kvp_ydoc_str(struct ydoc *d, yaml_node_t *n, const char *what, char *buf, uint32_t size,
                         struct kvp_error *err)
{
    const char *v = kvp_ydoc_scalar(n);
    if (!v)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a string, not %s", what, type_name(n));
    if (strlen(v) >= size)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' is longer than %u characters", what, size - 1);
    memcpy(buf, v, strlen(v) + 1);
    return KVP_OK;
}

static yaml_node_t *lookup(struct ydoc *d, yaml_node_t *map, const char *key, bool required,
                           enum kvp_status *st, struct kvp_error *err)
{
    yaml_node_t *n = kvp_ydoc_get(d, map, key);
    *st = KVP_OK;
    if (n && kvp_ydoc_is_null(n))
        n = NULL;
    if (!n && required)
        *st = kvp_ydoc_fail(d, map, err, KVP_ERR_SCHEMA, "missing required key '%s'", key);
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
GETTER(kvp_ydoc_get_u64, uint64_t, kvp_ydoc_u64)
GETTER(kvp_ydoc_get_u32, uint32_t, kvp_ydoc_u32)
GETTER(kvp_ydoc_get_bool, bool, kvp_ydoc_bool)
#undef GETTER

enum kvp_status kvp_ydoc_get_str(struct ydoc *d, yaml_node_t *map, const char *key, bool required,
                             char *buf, uint32_t size, struct kvp_error *err)
{
    enum kvp_status st;
    yaml_node_t *n = lookup(d, map, key, required, &st, err);
    return n ? kvp_ydoc_str(d, n, key, buf, size, err) : st;
}
