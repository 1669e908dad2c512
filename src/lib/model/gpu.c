/* gpu.c -- the GPU catalog (models/gpus.yaml) and GPU name resolution.
 * The schema is docs/gpus.md. */
#include "kvplan/gpu.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kvplan/num.h"
#include "base/io.h"
#include "base/ydoc.h"

#define GPU_FILE_MAX (4u << 20) /* bytes; the shipped catalog is a few KiB */
#define GPU_NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789-."

/* ---- typed fields ------------------------------------------------------- */

/* A non-negative decimal number ("989.4", "0", "1e3"); no inf, nan or hex. */
static enum kvp_status read_number(struct ydoc *d, yaml_node_t *n, const char *what, double *out,
                                   struct kvp_error *err)
{
    const char *v = kvp_ydoc_scalar(n);
    char *end;
    double x;

    if (!v)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a number, not a %s", what,
                         n->type == YAML_MAPPING_NODE ? "mapping" : "sequence");
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a number, not a string (got \"%.40s\")", what, v);
    if (v[0] == '-')
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' must not be negative (got %.40s)", what, v);
    x = strtod(v, &end);
    if (!*v || *end || strspn(v, "0123456789.eE+") != strlen(v) || !isfinite(x))
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a number (got %.40s)", what, v);
    *out = x;
    return KVP_OK;
}

/* An id or alias: 1..KVP_GPU_ID_MAX-1 characters of a-z 0-9 '-' '.'. */
static enum kvp_status read_name(struct ydoc *d, yaml_node_t *n, const char *what, char *buf,
                                 struct kvp_error *err)
{
    enum kvp_status st = kvp_ydoc_str(d, n, what, buf, KVP_GPU_ID_MAX, err);
    if (st != KVP_OK)
        return st;
    if (!buf[0] || strspn(buf, GPU_NAME_CHARS) != strlen(buf))
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA,
                         "'%s' must be lower-case letters, digits, '-' and '.' (got \"%s\")", what, buf);
    return KVP_OK;
}

/* A GPU name as the user may type it: case, '-', '_' and ' ' do not count
 * ("RTX 3090", "rtx3090" and "rtx-3090" are one name). True when name is s,
 * or with prefix set, when name is the start of s. */
static bool name_matches(const char *s, const char *name, bool prefix)
{
    for (;;) {
        while (*s == '-' || *s == '_' || *s == ' ')
            s++;
        while (*name == '-' || *name == '_' || *name == ' ')
            name++;
        if (!*name)
            return prefix || !*s;
        if (tolower((unsigned char)*s) != tolower((unsigned char)*name))
            return false;
        s++;
        name++;
    }
}

/* Fail if name (at node n) is already an id or alias of gpus[0..count), or
 * of g itself (its id and first `own` aliases). */
static enum kvp_status check_unique(struct ydoc *d, yaml_node_t *n, const char *name, const struct kvp_gpu *gpus,
                                    uint32_t count, const struct kvp_gpu *g, uint32_t own, struct kvp_error *err)
{
    for (uint32_t i = 0; i <= count; i++) {
        const struct kvp_gpu *o = i < count ? &gpus[i] : g;
        uint32_t na = i < count ? o->n_aliases : own;
        bool dup = (i < count || name != o->id) && name_matches(o->id, name, false);
        for (uint32_t a = 0; !dup && a < na; a++)
            dup = name_matches(o->aliases[a], name, false);
        if (dup)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "GPU name '%s' is already used by '%s'", name, o->id);
    }
    return KVP_OK;
}

/* host_link: how the GPU reaches host memory. pcieN is an x16 link of PCIe generation N, one
 * direction, as the PCI-SIG specifies it: 8, 16, 32 GT/s a lane in 128b/130b (gen 3 to 5), 64 GT/s
 * in 242 B FLITs of 256 (gen 6); unified, one memory for both (Apple silicon). */
static enum kvp_status host_link(struct ydoc *d, yaml_node_t *map, struct kvp_gpu *g, struct kvp_error *err)
{
    static const struct { const char *name; uint64_t bytes_per_s; } links[] = {
        {"pcie3", 8000000000ull * 16 / 8 * 128 / 130}, {"pcie4", 16000000000ull * 16 / 8 * 128 / 130},
        {"pcie5", 32000000000ull * 16 / 8 * 128 / 130}, {"pcie6", 64000000000ull * 16 / 8 * 242 / 256},
    };
    char v[16];
    enum kvp_status st;
    if (!kvp_ydoc_get(d, map, "host_link"))
        return KVP_OK;
    if ((st = kvp_ydoc_get_str(d, map, "host_link", false, v, sizeof v, err)) != KVP_OK)
        return st;
    if ((g->unified_memory = strcmp(v, "unified") == 0))
        return KVP_OK;
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        if (strcmp(v, links[i].name) == 0) {
            g->host_link_bytes_per_s = links[i].bytes_per_s;
            return KVP_OK;
        }
    return kvp_ydoc_fail(d, kvp_ydoc_get(d, map, "host_link"), err, KVP_ERR_SCHEMA,
                         "'host_link' must be pcie3, pcie4, pcie5, pcie6 or unified (got '%s')", v);
}

static enum kvp_status parse_gpu(struct ydoc *d, yaml_node_t *map, struct kvp_gpu *gpus, uint32_t count,
                                 struct kvp_error *err)
{
    static const char *const keys[] = {"id", "aliases", "name", "memory_bytes", "memory_source", "bandwidth_gbs",
                                       "bf16_tflops", "fp8_tflops", "source", "compute_capability", "host_link", NULL};
    struct kvp_gpu *g = &gpus[count];
    yaml_node_t *n;
    uint64_t gbs = 0;
    double tf;
    enum kvp_status st;

    memset(g, 0, sizeof *g);
    if ((st = kvp_ydoc_want_map(d, map, "gpus[]", err)) || (st = kvp_ydoc_check_keys(d, map, keys, err)))
        return st;
    if (!(n = kvp_ydoc_get(d, map, "id")) || kvp_ydoc_is_null(n))
        return kvp_ydoc_fail(d, map, err, KVP_ERR_SCHEMA, "missing required key 'id'");
    if ((st = read_name(d, n, "id", g->id, err)) || (st = check_unique(d, n, g->id, gpus, count, g, 0, err)))
        return st;
    if ((n = kvp_ydoc_get(d, map, "aliases")) != NULL && !kvp_ydoc_is_null(n)) {
        yaml_node_item_t *it;
        if ((st = kvp_ydoc_want_seq(d, n, "aliases", err)))
            return st;
        for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            yaml_node_t *an = kvp_ydoc_node(d, *it);
            if (g->n_aliases == KVP_GPU_ALIASES_MAX)
                return kvp_ydoc_fail(d, an, err, KVP_ERR_RANGE, "'%s' has more than %d aliases", g->id,
                                     KVP_GPU_ALIASES_MAX);
            if ((st = read_name(d, an, "aliases", g->aliases[g->n_aliases], err)) ||
                (st = check_unique(d, an, g->aliases[g->n_aliases], gpus, count, g, g->n_aliases, err)))
                return st;
            g->n_aliases++;
        }
    }
    if ((st = kvp_ydoc_get_str(d, map, "name", true, g->name, sizeof g->name, err)) ||
        (st = kvp_ydoc_get_u64(d, map, "memory_bytes", true, &g->memory_bytes, err)) ||
        (st = kvp_ydoc_get_str(d, map, "memory_source", true, g->memory_source, sizeof g->memory_source, err)) ||
        (st = kvp_ydoc_get_u64(d, map, "bandwidth_gbs", true, &gbs, err)) ||
        (st = kvp_ydoc_get_str(d, map, "source", true, g->source, sizeof g->source, err)))
        return st;
    if (g->memory_bytes == 0)
        return kvp_ydoc_fail(d, kvp_ydoc_get(d, map, "memory_bytes"), err, KVP_ERR_RANGE,
                             "'memory_bytes' must be greater than 0");
    if (gbs == 0)
        return kvp_ydoc_fail(d, kvp_ydoc_get(d, map, "bandwidth_gbs"), err, KVP_ERR_RANGE,
                             "'bandwidth_gbs' must be greater than 0");
    if (!kvp_mul(gbs, 1000000000u, &g->bandwidth_bytes_per_s))
        return kvp_ydoc_fail(d, kvp_ydoc_get(d, map, "bandwidth_gbs"), err, KVP_ERR_OVERFLOW,
                         "'bandwidth_gbs' of %llu GB/s does not fit in 64 bits of bytes/s", (unsigned long long)gbs);
    /* TFLOP/s are decimals, so they are read here rather than by kvp_ydoc_get_u64 */
    if (!(n = kvp_ydoc_get(d, map, "bf16_tflops")) || kvp_ydoc_is_null(n))
        return kvp_ydoc_fail(d, map, err, KVP_ERR_SCHEMA, "missing required key 'bf16_tflops'");
    if ((st = read_number(d, n, "bf16_tflops", &tf, err)))
        return st;
    if (tf == 0)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'bf16_tflops' must be greater than 0");
    g->bf16_flops = tf * 1e12;
    if (!(n = kvp_ydoc_get(d, map, "fp8_tflops")) || kvp_ydoc_is_null(n))
        return kvp_ydoc_fail(d, map, err, KVP_ERR_SCHEMA, "missing required key 'fp8_tflops'");
    if ((st = read_number(d, n, "fp8_tflops", &tf, err)))
        return st;
    g->fp8_flops = tf * 1e12;
    /* CUDA's major.minor (9.0 Hopper, 10.0 B200); absent: not a CUDA device, or not known */
    if ((n = kvp_ydoc_get(d, map, "compute_capability")) != NULL && !kvp_ydoc_is_null(n)) {
        if ((st = read_number(d, n, "compute_capability", &tf, err)))
            return st;
        if (!(tf >= 1.0 && tf < 100.0) || fabs(tf * 10 - (double)(long)(tf * 10 + 0.5)) > 1e-9)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE,
                                 "'compute_capability' must be MAJOR.MINOR, e.g. 9.0 (got %g)", tf);
        g->compute_capability = (uint32_t)(tf * 10 + 0.5);
    }
    return host_link(d, map, g, err);
}

static enum kvp_status parse_catalog(struct ydoc *d, struct kvp_gpu_catalog *c, struct kvp_error *err)
{
    static const char *const keys[] = {"kvplan_gpus", "gpus", NULL};
    yaml_node_t *root = kvp_ydoc_root(d), *list;
    uint32_t version = 0;
    size_t count;
    enum kvp_status st;

    if ((st = kvp_ydoc_want_schema(d, root, "kvplan_gpus", "gpu catalog", &version, err)) ||
        (st = kvp_ydoc_check_keys(d, root, keys, err)))
        return st;
    if (version != 1)
        return kvp_ydoc_fail(d, kvp_ydoc_get(d, root, "kvplan_gpus"), err, KVP_ERR_UNSUPPORTED,
                         "'kvplan_gpus' schema version %u is not supported (this kvplan reads 1)", version);
    if (!(list = kvp_ydoc_get(d, root, "gpus")) || kvp_ydoc_is_null(list))
        return kvp_ydoc_fail(d, root, err, KVP_ERR_SCHEMA, "missing required key 'gpus'");
    if ((st = kvp_ydoc_want_seq(d, list, "gpus", err)))
        return st;
    count = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
    if (count == 0)
        return kvp_ydoc_fail(d, list, err, KVP_ERR_SCHEMA, "'gpus' is empty");
    if (count > KVP_GPU_CATALOG_MAX)
        return kvp_ydoc_fail(d, list, err, KVP_ERR_RANGE, "more than %d GPUs", KVP_GPU_CATALOG_MAX);
    if (!(c->gpus = calloc(count, sizeof *c->gpus)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory loading %zu GPUs", count);
    for (size_t i = 0; i < count; i++) {
        if ((st = parse_gpu(d, kvp_ydoc_node(d, list->data.sequence.items.start[i]), c->gpus, c->n, err)))
            return st;
        c->n++;
    }
    return KVP_OK;
}

/* The GPU whose id or alias is name, ignoring case; NULL if none (or no catalog). */
static const struct kvp_gpu *find_exact(const struct kvp_gpu_catalog *c, const char *name)
{
    for (uint32_t i = 0; c && i < c->n; i++) {
        const struct kvp_gpu *g = &c->gpus[i];
        if (name_matches(g->id, name, false))
            return g;
        for (uint32_t a = 0; a < g->n_aliases; a++)
            if (name_matches(g->aliases[a], name, false))
                return g;
    }
    return NULL;
}

/* Parse text[0..len) (the file at path) into *out; errors at their file:line:col. */
static enum kvp_status load_text(const char *path, const char *text, uint64_t len, struct kvp_gpu_catalog **out,
                                 struct kvp_error *err)
{
    struct kvp_gpu_catalog *c;
    struct ydoc d;
    enum kvp_status st;

    if (!(c = calloc(1, sizeof *c)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory loading '%s'", path);
    if ((st = kvp_ydoc_load(&d, text, len, path, err)) == KVP_OK)
        st = parse_catalog(&d, c, err);
    kvp_ydoc_release(&d);
    if (st != KVP_OK) {
        kvp_error_place(err, path, 0, 0);
        kvp_gpu_catalog_free(c);
        return st;
    }
    *out = c;
    return KVP_OK;
}

static bool name_char(char ch)
{
    return ch && strchr(GPU_NAME_CHARS, tolower((unsigned char)ch)) != NULL;
}

/* Whether line [p, e) holds name as a whole word, ignoring case. */
static bool line_names(const char *p, const char *e, const char *name)
{
    size_t n = strlen(name);
    for (const char *q = p; n && q + n <= e; q++)
        if (strncasecmp(q, name, n) == 0 && (q == p || !name_char(q[-1])) && (q + n == e || !name_char(q[n])))
            return true;
    return false;
}

/* Whether [q, e) starts with key. */
static bool starts(const char *q, const char *e, const char *key)
{
    size_t n = strlen(key);
    return (size_t)(e - q) >= n && memcmp(q, key, n) == 0;
}

/* A guess at where the catalog text stops holding what it takes to find
 * name: the start of the sequence item that follows the first item whose
 * "id:" or "aliases:" line (or a line of a block list of aliases) holds
 * name. Items are the lines that start "- " at the column of the first such
 * line; comments are skipped. 0 when there is no such item (or nothing after
 * it). Only a guess: the text before it is then parsed in full. */
static uint64_t cut_after(const char *text, uint64_t len, const char *name)
{
    const char *end = text + len;
    long item_col = -1;
    bool named = false;

    for (const char *p = text, *e; p < end; p = e < end ? e + 1 : end) {
        const char *q = p;
        if (!(e = memchr(p, '\n', (size_t)(end - p))))
            e = end;
        while (q < e && *q == ' ')
            q++;
        if (q == e || *q == '#')
            continue;
        bool item = q + 1 < e && q[0] == '-' && q[1] == ' ';
        if (item && item_col < 0)
            item_col = (long)(q - p);
        if (item && (long)(q - p) == item_col) {
            if (named)
                return (uint64_t)(p - text);
            q += 2;
            while (q < e && *q == ' ')
                q++;
        }
        if (item_col >= 0 &&
            (starts(q, e, "id:") || starts(q, e, "aliases:") || (item && (long)(q - p) > item_col + 2)))
            named = named || line_names(q, e, name);
    }
    return 0;
}

enum kvp_status kvp_gpu_catalog_load(const char *path, struct kvp_gpu_catalog **out, struct kvp_error *err)
{
    return kvp_gpu_catalog_load_for(path, NULL, out, err);
}

enum kvp_status kvp_gpu_catalog_load_for(const char *path, const char *name, struct kvp_gpu_catalog **out,
                                  struct kvp_error *err)
{
    char *text = NULL;
    uint64_t len = 0, cut;
    enum kvp_status st;

    if ((st = kvp_read_file(path, GPU_FILE_MAX, &text, &len, NULL, err)) != KVP_OK)
        return st;
    if (name && (cut = cut_after(text, len, name)) > 0) {
        struct kvp_gpu_catalog *part = NULL;
        struct kvp_error ignored = {0};
        if (load_text(path, text, cut, &part, &ignored) == KVP_OK && find_exact(part, name)) {
            free(text);
            *out = part;
            return KVP_OK;
        }
        kvp_gpu_catalog_free(part);
    }
    st = load_text(path, text, len, out, err);
    free(text);
    return st;
}

/* ---- finding ------------------------------------------------------------ */

/* Append ", id" (or "id" first) to msg; "..." once it would not fit. */
static void list_add(char *msg, size_t size, const char *id)
{
    size_t o = strlen(msg);
    if (o >= 3 && strcmp(msg + o - 3, "...") == 0)
        return;
    if (o + strlen(id) + 2 + 5 >= size) {
        snprintf(msg + o, size - o, "%s...", o ? ", " : "");
        return;
    }
    snprintf(msg + o, size - o, "%s%s", o ? ", " : "", id);
}

enum kvp_status kvp_gpu_find(const struct kvp_gpu_catalog *c, const char *name, const struct kvp_gpu **out,
                             struct kvp_error *err)
{
    char list[KVP_ERROR_MSG_MAX - 64] = "";
    const struct kvp_gpu *hit = NULL;
    uint32_t nhits = 0, n = c ? c->n : 0;

    if ((hit = find_exact(c, name)) != NULL) {
        *out = hit;
        return KVP_OK;
    }
    for (uint32_t i = 0; name[0] && i < n; i++) {
        const struct kvp_gpu *g = &c->gpus[i];
        bool match = name_matches(g->id, name, true);
        for (uint32_t a = 0; !match && a < g->n_aliases; a++)
            match = name_matches(g->aliases[a], name, true);
        if (match) {
            hit = g;
            nhits++;
            list_add(list, sizeof list, g->id);
        }
    }
    if (nhits == 1) {
        *out = hit;
        return KVP_OK;
    }
    if (nhits > 1)
        return kvp_fail(err, KVP_ERR_NOTFOUND, "ambiguous GPU '%.60s' (%s)", name, list);
    for (uint32_t i = 0; i < n; i++)
        list_add(list, sizeof list, c->gpus[i].id);
    return kvp_fail(err, KVP_ERR_NOTFOUND, "unknown GPU '%.60s' (%s)", name, n ? list : "the catalog is empty");
}

void kvp_gpu_catalog_free(struct kvp_gpu_catalog *c)
{
    if (!c)
        return;
    free(c->gpus);
    free(c);
}

double kvp_gpu_peak_flops(const struct kvp_gpu *g, enum kvp_dtype d)
{
    bool fp8 = d == KVP_DTYPE_FP8_E4M3 || d == KVP_DTYPE_FP8_E5M2;
    return fp8 && g->fp8_flops > 0 ? g->fp8_flops : g->bf16_flops;
}
