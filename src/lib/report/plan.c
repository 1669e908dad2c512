/* plan.c -- deployment plans with capacity assertions (`kvplan check`).
 *
 * Reading order: the settings a deployment takes (mirroring `kvplan fit`),
 * loading plan files with their includes and defaults, evaluating the
 * assertions, comparing with a baseline, rendering text, JSON and JUnit.
 * The format is docs/plan-format.md.
 */
#define _XOPEN_SOURCE 700 /* realpath: an include is confined to the plan's folder */
#include "kvplan/plan.h"

#include "kvplan/hub.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "kvplan/explain.h"
#include "kvplan/num.h"
#include "kvplan/settings.h"
#include "base/io.h"
#include "base/ydoc.h"

#define PLAN_FILE_MAX (1u << 20)  /* bytes; a plan is a few KiB */
#define PLAN_TOTAL_MAX (4u << 20) /* bytes of one plan and all it includes */

/* ---- kinds -------------------------------------------------------------- */

enum { MOD_CONTEXT = 1, MOD_CONCURRENCY = 2, MOD_WORKLOAD = 4 /* required: the kind simulates a workload */ };

static const struct {
    const char *name;
    const char *unit;  /* of measured and limit in JSON */
    bool higher_better;
    bool integer;      /* measured is a whole number (written as one in JSON) */
    unsigned mods;     /* which of 'context' / 'concurrency' may be given */
} kinds[KVP_CHECK_KIND_COUNT] = {
    [KVP_CHECK_FITS] = {"fits", "bool", true, true, MOD_CONTEXT | MOD_CONCURRENCY},
    [KVP_CHECK_MIN_CONCURRENCY] = {"min_concurrency", "requests", true, false, MOD_CONTEXT},
    [KVP_CHECK_MIN_CONTEXT] = {"min_context", "tokens", true, true, MOD_CONCURRENCY},
    [KVP_CHECK_MAX_KV_SHARE] = {"max_kv_share", "fraction", false, false, MOD_CONTEXT | MOD_CONCURRENCY},
    [KVP_CHECK_MAX_KV_BYTES_PER_TOKEN] = {"max_kv_bytes_per_token", "bytes", false, true, 0},
    [KVP_CHECK_MAX_TPOT] = {"max_tpot_ms", "ms", false, false, MOD_CONTEXT | MOD_CONCURRENCY},
    [KVP_CHECK_MIN_HEADROOM] = {"min_headroom", "bytes", true, true, MOD_CONTEXT | MOD_CONCURRENCY},
    [KVP_CHECK_MIN_SUSTAINED_RATE] = {"min_sustained_rate", "requests/s", true, false, MOD_CONTEXT | MOD_WORKLOAD},
    [KVP_CHECK_MAX_PREEMPTIONS] = {"max_preemptions", "preemptions", false, true, MOD_CONTEXT | MOD_WORKLOAD},
};

#define KIND_LIST "fits, min_concurrency, min_context, max_kv_share, max_kv_bytes_per_token, max_tpot_ms, " \
                  "min_headroom, min_sustained_rate, max_preemptions"

const char *kvp_check_kind_name(enum kvp_check_kind k)
{
    return (unsigned)k < KVP_CHECK_KIND_COUNT ? kinds[k].name : "?";
}

bool kvp_check_higher_is_better(enum kvp_check_kind k)
{
    return (unsigned)k < KVP_CHECK_KIND_COUNT && kinds[k].higher_better;
}

/* ---- reading files ------------------------------------------------------ */


/* dir/rel into out, where dir is the directory of `file` ("" when none);
 * an absolute rel stays as it is. false if it does not fit. */
static bool join_path(const char *file, const char *rel, char *out, size_t n)
{
    const char *slash = strrchr(file, '/');
    int w;
    if (rel[0] == '/' || !slash)
        w = snprintf(out, n, "%s", rel);
    else
        w = snprintf(out, n, "%.*s/%s", (int)(slash - file), file, rel);
    return w >= 0 && (size_t)w < n;
}

/* Is the resolved path within the resolved folder root? */
static bool below(const char *root, const char *path)
{
    size_t n = strlen(root);
    return strcmp(root, "/") == 0 || (strncmp(path, root, n) == 0 && path[n] == '/');
}

/* The folder of the plan at path, resolved (links, "..") into root. */
static bool plan_root(const char *path, char root[PATH_MAX])
{
    char *slash;
    if (!realpath(path, root))
        return false;
    slash = strrchr(root, '/');
    if (slash == root) /* a plan in / : includes anywhere below it */
        slash[1] = '\0';
    else
        *slash = '\0';
    return true;
}

/* ---- deployment settings ------------------------------------------------ */

/* What a deployment (or `defaults`) says: the model, and the deployment
 * settings (settings.h: the same table as `kvplan fit`'s options) as written. */
struct settings {
    bool has_model;
    char model[KVP_PLAN_PATH_MAX]; /* a catalog name, or a path already joined to its file's directory */
    char model_file[KVP_PLAN_PATH_MAX]; /* where 'model' was written, for its errors */
    uint32_t model_line, model_col;
    struct kvp_settings kv;
};

/* Every key given in `top` replaces base's. */
static void overlay(struct settings *base, const struct settings *top)
{
    if (top->has_model) {
        memcpy(base->model, top->model, sizeof base->model);
        memcpy(base->model_file, top->model_file, sizeof base->model_file);
        base->model_line = top->model_line;
        base->model_col = top->model_col;
        base->has_model = true;
    }
    kvp_settings_overlay(&base->kv, &top->kv);
}

static bool is_set(const struct settings *s, const char *key)
{
    return (s->kv.given >> kvp_setting_find(key)) & 1u;
}

static const char *node_type(const yaml_node_t *n)
{
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a sequence" : "a scalar";
}

/* The text of scalar node n, or an error naming `what`. */
static enum kvp_status scalar(struct ydoc *d, yaml_node_t *n, const char *what, const char **out, struct kvp_error *err)
{
    if (!(*out = kvp_ydoc_scalar(n)))
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a single value, not %s", what, node_type(n));
    return KVP_OK;
}

/* A finite decimal number ("64", "1.5", "0.9"). */
static enum kvp_status number(struct ydoc *d, yaml_node_t *n, const char *what, double *out, struct kvp_error *err)
{
    const char *v;
    char *end;
    enum kvp_status st;
    if ((st = scalar(d, n, what, &v, err)) != KVP_OK)
        return st;
    *out = strtod(v, &end);
    if (v[0] == '\0' || *end != '\0' || !isfinite(*out) || strspn(v, "+-0123456789.eE") != strlen(v))
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'%s' must be a number (got '%.40s')", what, v);
    return KVP_OK;
}

static enum kvp_status count(struct ydoc *d, yaml_node_t *n, const char *what, uint64_t min, uint64_t max,
                             uint64_t *out, struct kvp_error *err)
{
    const char *v;
    enum kvp_status st;
    if ((st = scalar(d, n, what, &v, err)) != KVP_OK)
        return st;
    if (kvp_parse_count(v, out, err) != KVP_OK)
        return kvp_ydoc_fail(d, n, err, err->code, "'%s': %s", what, err->msg);
    if (*out < min || *out > max)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' must be between %llu and %llu (got %.40s)", what,
                         (unsigned long long)min, (unsigned long long)max, v);
    return KVP_OK;
}

static enum kvp_status bytes(struct ydoc *d, yaml_node_t *n, const char *what, uint64_t *out, struct kvp_error *err)
{
    const char *v;
    enum kvp_status st;
    if ((st = scalar(d, n, what, &v, err)) != KVP_OK)
        return st;
    if (kvp_parse_bytes(v, out, err) != KVP_OK)
        return kvp_ydoc_fail(d, n, err, err->code, "'%s': %s", what, err->msg);
    return KVP_OK;
}

static enum kvp_status fraction(struct ydoc *d, yaml_node_t *n, const char *what, double *out, struct kvp_error *err)
{
    enum kvp_status st;
    if ((st = number(d, n, what, out, err)) != KVP_OK)
        return st;
    if (!(*out > 0.0 && *out <= 1.0))
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' must be a fraction in (0, 1] (got %s)", what,
                         kvp_ydoc_scalar(n));
    return KVP_OK;
}

/* A name usable in ids, JUnit and file names: letters, digits, '.', '_', '-'. */
static enum kvp_status name_value(struct ydoc *d, yaml_node_t *n, const char *what, char *out, struct kvp_error *err)
{
    const char *v;
    enum kvp_status st;
    if ((st = scalar(d, n, what, &v, err)) != KVP_OK)
        return st;
    if (v[0] == '\0' || strlen(v) >= KVP_PLAN_NAME_MAX ||
        strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(v))
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA,
                         "'%s' must be 1 to %d letters, digits, '.', '_' or '-' (got '%.80s')", what,
                         KVP_PLAN_NAME_MAX - 1, v);
    memcpy(out, v, strlen(v) + 1);
    return KVP_OK;
}

struct loader {
    struct kvp_plan *p;
    const struct kvp_catalog *models;
    const struct kvp_gpu_catalog *gpus;
    struct kvp_error *err;
    uint32_t depth; /* files open below the top one */
    uint32_t files; /* files read so far, and their bytes */
    uint64_t bytes;
    uint32_t wl_first; /* the workloads of the file being read: p->workloads[wl_first .. n_workloads) */
    uint32_t n_models; /* the models opened so far, by the name they were opened with */
    struct opened {
        char *name;
        const struct kvp_model *model; /* a deployment's */
    } *models_opened;
    struct {
        dev_t dev;
        ino_t ino;
    } stack[KVP_PLAN_MAX_INCLUDE_DEPTH + 1]; /* the files being loaded, by identity (links and ./ alike) */
    char root[PATH_MAX]; /* the folder of the plan given, resolved: every include resolves below it */
};

/* 'model': a catalog name, a path relative to the plan's file, or a Hub
 * reference (hub.h) where no such file is there. */
static enum kvp_status read_model(struct ydoc *d, yaml_node_t *n, struct settings *s, struct kvp_error *err)
{
    const char *v;
    struct kvp_hub_ref r;
    struct kvp_error quiet;
    struct stat sb;
    bool fits;
    enum kvp_status st;
    if ((st = scalar(d, n, "model", &v, err)) != KVP_OK)
        return st;
    if (v[0] == '\0')
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'model' must not be empty");
    if (kvp_model_ref_is_path(v)) {
        fits = join_path(d->file, v, s->model, sizeof s->model);
        if (fits && stat(s->model, &sb) != 0 && kvp_hub_ref_parse(v, &r, &quiet) == KVP_OK)
            fits = (size_t)snprintf(s->model, sizeof s->model, "%s", v) < sizeof s->model;
    } else {
        fits = (size_t)snprintf(s->model, sizeof s->model, "%s", v) < sizeof s->model;
    }
    if (!fits)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'model' is too long (got '%.60s...')", v);
    snprintf(s->model_file, sizeof s->model_file, "%s", d->file);
    s->model_line = (uint32_t)n->start_mark.line + 1;
    s->model_col = (uint32_t)n->start_mark.column + 1;
    s->has_model = true;
    return KVP_OK;
}

/* One deployment setting (settings.h), checked where it is written: a GPU
 * against the catalog, every value for its type's syntax. `split` may be a
 * list of layer counts as well as "41,23". */
static enum kvp_status read_setting(struct loader *L, struct ydoc *d, const struct kvp_setting *k, yaml_node_t *n,
                                    struct settings *s)
{
    struct kvp_error *err = L->err;
    char v[KVP_SETTING_VALUE_MAX];
    const char *text;
    enum kvp_status st;

    if (k->type == KVP_SET_SPLIT && n->type == YAML_SEQUENCE_NODE) {
        size_t o = 0;
        v[0] = '\0';
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            if ((st = scalar(d, kvp_ydoc_node(d, *it), k->key, &text, err)) != KVP_OK)
                return st;
            o += (size_t)snprintf(v + o, o < sizeof v ? sizeof v - o : 0, "%s%s", o ? "," : "", text);
            if (o >= sizeof v)
                return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' is too long", k->key);
        }
    } else {
        if ((st = scalar(d, n, k->key, &text, err)) != KVP_OK)
            return st;
        snprintf(v, sizeof v, "%s", text);
    }
    if (kvp_settings_put(&s->kv, k->key, v, err) != KVP_OK)
        return kvp_ydoc_fail(d, n, err, err->code, "'%s': %s", k->key, err->msg);
    if (k->type == KVP_SET_GPU) {
        const struct kvp_gpu *g;
        if (!L->gpus)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_USAGE, "'gpu' needs the GPU catalog (got '%.40s')", v);
        if (kvp_gpu_find(L->gpus, v, &g, err) != KVP_OK)
            return kvp_ydoc_fail(d, n, err, err->code, "'gpu': %s", err->msg);
    }
    return KVP_OK;
}

/* Read the setting keys of mapping map over s; other keys are left to the caller. */
static enum kvp_status read_settings(struct loader *L, struct ydoc *d, yaml_node_t *map, struct settings *s)
{
    yaml_node_t *n;
    enum kvp_status st;
    if ((n = kvp_ydoc_get(d, map, "model")) && !kvp_ydoc_is_null(n) && (st = read_model(d, n, s, L->err)) != KVP_OK)
        return st;
    for (uint32_t i = 0; i < kvp_settings_count(); i++) {
        const struct kvp_setting *k = kvp_setting_at(i);
        if (!(n = kvp_ydoc_get(d, map, k->key)) || kvp_ydoc_is_null(n))
            continue;
        if ((st = read_setting(L, d, k, n, s)) != KVP_OK)
            return st;
    }
    return KVP_OK;
}

/* ---- assertions --------------------------------------------------------- */

static enum kvp_status read_limit(struct ydoc *d, yaml_node_t *n, enum kvp_check_kind kind, double *out,
                                  struct kvp_error *err)
{
    const char *what = kinds[kind].name;
    enum kvp_status st;
    uint64_t u;
    bool b;

    switch (kind) {
    case KVP_CHECK_FITS:
        if ((st = kvp_ydoc_bool(d, n, what, &b, err)) != KVP_OK)
            return st;
        *out = b ? 1.0 : 0.0;
        return KVP_OK;
    case KVP_CHECK_MAX_PREEMPTIONS:
    case KVP_CHECK_MIN_CONTEXT:
        if ((st = count(d, n, what, kind == KVP_CHECK_MIN_CONTEXT, UINT64_MAX, &u, err)) != KVP_OK)
            return st;
        *out = (double)u;
        return KVP_OK;
    case KVP_CHECK_MAX_KV_SHARE:
        return fraction(d, n, what, out, err);
    case KVP_CHECK_MAX_KV_BYTES_PER_TOKEN:
    case KVP_CHECK_MIN_HEADROOM:
        /* bytes per token are plainly bytes: a bare integer is read as such */
        if (!(kind == KVP_CHECK_MAX_KV_BYTES_PER_TOKEN && kvp_ydoc_scalar(n) &&
              kvp_parse_u64(kvp_ydoc_scalar(n), &u)) &&
            (st = bytes(d, n, what, &u, err)) != KVP_OK)
            return st;
        if (u == 0 && kind == KVP_CHECK_MAX_KV_BYTES_PER_TOKEN)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' must be positive (got %s)", what, kvp_ydoc_scalar(n));
        *out = (double)u;
        return KVP_OK;
    default: /* min_concurrency, max_tpot_ms, min_sustained_rate: positive numbers */
        if ((st = number(d, n, what, out, err)) != KVP_OK)
            return st;
        if (!(*out > 0.0))
            return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s' must be positive (got %s)", what, kvp_ydoc_scalar(n));
        return KVP_OK;
    }
}

static int kind_of(const char *k)
{
    for (int i = 0; i < KVP_CHECK_KIND_COUNT; i++)
        if (strcmp(k, kinds[i].name) == 0)
            return i;
    return -1;
}

/* One assertion: the kind's key node kn with its value vn, and (in the list
 * form) the mapping item holding its modifiers, else NULL. */
/* The workload named by node n among wl[0..nw) (a file's own), or an error with the closest name. */
static enum kvp_status find_workload(struct ydoc *d, yaml_node_t *n, const struct kvp_plan_workload *wl, uint32_t nw,
                                     uint32_t *at, struct kvp_error *err)
{
    const char *names[KVP_PLAN_MAX_WORKLOADS], *v, *near;
    enum kvp_status st;
    if ((st = scalar(d, n, "workload", &v, err)) != KVP_OK)
        return st;
    for (uint32_t i = 0; i < nw; i++) {
        if (strcmp(wl[i].name, v) == 0) {
            *at = i;
            return KVP_OK;
        }
        names[i] = wl[i].name;
    }
    if (!nw)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "unknown workload '%.60s' (this file has no 'workloads')", v);
    if ((near = kvp_closest(v, names, nw, 3)) != NULL)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "unknown workload '%.60s' (did you mean '%s'?)", v, near);
    return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "unknown workload '%.60s' (this file's 'workloads' are %s%s)", v,
                         wl[0].name, nw > 1 ? ", ..." : "");
}

static enum kvp_status read_check(struct ydoc *d, yaml_node_t *kn, yaml_node_t *vn, yaml_node_t *item,
                                  struct kvp_plan_deployment *dep, const struct kvp_plan_workload *wl,
                                  uint32_t wl_first, uint32_t nw, struct kvp_plan_check *c, struct kvp_error *err)
{
    yaml_node_t *n, *first_key = kn;
    char name[KVP_PLAN_NAME_MAX] = "";
    enum kvp_status st;
    int found = kind_of(kvp_ydoc_scalar(kn));

    memset(c, 0, sizeof *c);
    if (found < 0)
        return kvp_ydoc_fail(d, kn, err, KVP_ERR_SCHEMA, "unknown assertion '%s' (" KIND_LIST ")", kvp_ydoc_scalar(kn));
    c->kind = (enum kvp_check_kind)found;
    c->workload = -1;
    c->line = (uint32_t)first_key->start_mark.line + 1;
    c->col = (uint32_t)first_key->start_mark.column + 1;
    if ((st = read_limit(d, vn, c->kind, &c->limit, err)) != KVP_OK)
        return st;
    if (item && (n = kvp_ydoc_get(d, item, "context")) != NULL) {
        if (!(kinds[c->kind].mods & MOD_CONTEXT))
            return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'context' does not apply to '%s'", kinds[c->kind].name);
        if ((st = count(d, n, "context", 1, UINT64_MAX, &c->context, err)) != KVP_OK)
            return st;
    }
    if (item && (n = kvp_ydoc_get(d, item, "concurrency")) != NULL) {
        if (!(kinds[c->kind].mods & MOD_CONCURRENCY))
            return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'concurrency' does not apply to '%s'",
                             kinds[c->kind].name);
        if ((st = count(d, n, "concurrency", 1, UINT64_MAX, &c->concurrency, err)) != KVP_OK)
            return st;
    }
    n = item ? kvp_ydoc_get(d, item, "workload") : NULL;
    if (n && !(kinds[c->kind].mods & MOD_WORKLOAD))
        return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "'workload' does not apply to '%s'", kinds[c->kind].name);
    if ((kinds[c->kind].mods & MOD_WORKLOAD) && !n)
        return kvp_ydoc_fail(d, first_key, err, KVP_ERR_SCHEMA,
                             "'%s' needs a 'workload' (a name from the file's 'workloads')", kinds[c->kind].name);
    if (n) {
        uint32_t at;
        if ((st = find_workload(d, n, wl, nw, &at, err)) != KVP_OK)
            return st;
        if (c->kind == KVP_CHECK_MIN_SUSTAINED_RATE && wl[at].is_trace)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA,
                                 "'min_sustained_rate' varies a synthetic workload's rate; '%s' is a trace",
                                 wl[at].name);
        c->workload = (int32_t)(wl_first + at);
    }
    if (item && (n = kvp_ydoc_get(d, item, "name")) != NULL && (st = name_value(d, n, "name", name, err)) != KVP_OK)
        return st;
    c->named = name[0] != '\0';
    if (name[0]) {
        snprintf(c->id, sizeof c->id, "%s/%s", dep->name, name);
        snprintf(c->test, sizeof c->test, "%s/%s", dep->name, name);
    } else {
        uint32_t k = 1;
        char under[KVP_PLAN_NAME_MAX + 10] = ""; /* the workload is a name: it stays in the test's */
        for (uint32_t i = 0; i < dep->n_checks; i++)
            k += dep->checks[i].kind == c->kind && !dep->checks[i].named && dep->checks[i].workload == c->workload;
        if (c->workload >= 0)
            snprintf(under, sizeof under, ":workload=%s", wl[(uint32_t)c->workload - wl_first].name);
        if (k > 1)
            snprintf(c->test, sizeof c->test, "%s/%s%s#%u", dep->name, kinds[c->kind].name, under, k);
        else
            snprintf(c->test, sizeof c->test, "%s/%s%s", dep->name, kinds[c->kind].name, under);
        int w = snprintf(c->id, sizeof c->id, "%s/%s", dep->name, kinds[c->kind].name);
        if (c->context)
            w += snprintf(c->id + w, sizeof c->id - (size_t)w, ":context=%llu", (unsigned long long)c->context);
        if (c->concurrency)
            w += snprintf(c->id + w, sizeof c->id - (size_t)w, ":concurrency=%llu", (unsigned long long)c->concurrency);
        if (c->workload >= 0)
            snprintf(c->id + w, sizeof c->id - (size_t)w, "%s", under);
    }
    /* what the check needs from the deployment */
    if ((kinds[c->kind].mods & MOD_WORKLOAD) && !dep->gpu)
        return kvp_ydoc_fail(d, first_key, err, KVP_ERR_SCHEMA,
                             "'%s' needs a 'gpu' from the catalog (its roofline times the steps)", kinds[c->kind].name);
    if (c->kind == KVP_CHECK_MAX_TPOT && !dep->gpu)
        return kvp_ydoc_fail(d, first_key, err, KVP_ERR_SCHEMA,
                         "'max_tpot_ms' needs a 'gpu' from the catalog (its bandwidth bounds the decode)");
    if (c->kind == KVP_CHECK_MAX_KV_SHARE && !dep->d.gpu_memory)
        return kvp_ydoc_fail(d, first_key, err, KVP_ERR_SCHEMA,
                             "'max_kv_share' needs the GPU memory ('gpu' or 'gpu_memory')");
    for (uint32_t i = 0; i < dep->n_checks; i++)
        if (strcmp(dep->checks[i].id, c->id) == 0)
            return kvp_ydoc_fail(d, first_key, err, KVP_ERR_SCHEMA,
                             "assertion '%s' is given twice (line %u); add a 'name' to tell them apart", c->id,
                             dep->checks[i].line);
    return KVP_OK;
}

/* A list item: a mapping of one assertion key and its modifiers. */
static enum kvp_status read_check_item(struct ydoc *d, yaml_node_t *item, struct kvp_plan_deployment *dep,
                                       const struct kvp_plan_workload *wl, uint32_t wl_first, uint32_t nw,
                                       struct kvp_plan_check *c, struct kvp_error *err)
{
    const char *keys[KVP_CHECK_KIND_COUNT + 5];
    for (int i = 0; i < KVP_CHECK_KIND_COUNT; i++)
        keys[i] = kinds[i].name;
    keys[KVP_CHECK_KIND_COUNT] = "context";
    keys[KVP_CHECK_KIND_COUNT + 1] = "concurrency";
    keys[KVP_CHECK_KIND_COUNT + 2] = "name";
    keys[KVP_CHECK_KIND_COUNT + 3] = "workload";
    keys[KVP_CHECK_KIND_COUNT + 4] = NULL;
    yaml_node_pair_t *found = NULL;
    enum kvp_status st;

    if ((st = kvp_ydoc_want_map(d, item, "assert", err)) != KVP_OK ||
        (st = kvp_ydoc_check_keys(d, item, keys, err)) != KVP_OK)
        return st;
    for (yaml_node_pair_t *p = item->data.mapping.pairs.start; p < item->data.mapping.pairs.top; p++) {
        const char *k = kvp_ydoc_scalar(kvp_ydoc_node(d, p->key));
        if (kind_of(k) < 0)
            continue;
        if (found)
            return kvp_ydoc_fail(d, kvp_ydoc_node(d, p->key), err, KVP_ERR_SCHEMA,
                             "one assertion per list item (got '%s' and '%s')",
                             kvp_ydoc_scalar(kvp_ydoc_node(d, found->key)), k);
        found = p;
    }
    if (!found)
        return kvp_ydoc_fail(d, item, err, KVP_ERR_SCHEMA,
                             "an assertion needs one of 'fits', 'min_concurrency', 'min_context', "
                             "'max_kv_share', 'max_kv_bytes_per_token', 'max_tpot_ms', 'min_headroom', "
                             "'min_sustained_rate', 'max_preemptions'");
    return read_check(d, kvp_ydoc_node(d, found->key), kvp_ydoc_node(d, found->value), item, dep, wl, wl_first, nw, c,
                      err);
}

/* ---- deployments -------------------------------------------------------- */

static void deployment_free(struct kvp_plan_deployment *dep)
{
    kvp_model_free(dep->model);
    free(dep->checks);
    memset(dep, 0, sizeof *dep);
}

/* *out: model `name`, read once per load: a plan of 1024 deployments of one
 * 4 MiB config reads it once, not 1024 times. */
static enum kvp_status open_model(struct loader *L, const char *name, struct kvp_model **out)
{
    struct opened *grown;
    enum kvp_status st;

    for (uint32_t i = 0; i < L->n_models; i++) {
        if (strcmp(L->models_opened[i].name, name) != 0)
            continue;
        if (!(*out = malloc(sizeof **out)))
            return kvp_fail(L->err, KVP_ERR_NOMEM, "out of memory reading the plan");
        **out = *L->models_opened[i].model;
        return KVP_OK;
    }
    if (!(grown = realloc(L->models_opened, (L->n_models + 1) * sizeof *grown)))
        return kvp_fail(L->err, KVP_ERR_NOMEM, "out of memory reading the plan");
    L->models_opened = grown;
    if (!(grown[L->n_models].name = strdup(name)))
        return kvp_fail(L->err, KVP_ERR_NOMEM, "out of memory reading the plan");
    if ((st = kvp_model_open(L->models, name, out, L->err)) != KVP_OK) {
        free(grown[L->n_models].name);
        return st;
    }
    grown[L->n_models++].model = *out;
    return KVP_OK;
}

/* Turn settings into dep->d the way `kvplan fit` turns its options. */
static enum kvp_status build_deploy(struct loader *L, struct ydoc *d, yaml_node_t *node, const struct settings *s,
                                    struct kvp_plan_deployment *dep)
{
    struct kvp_error *err = L->err;
    struct kvp_deploy *x = &dep->d;
    struct kvp_fit fit;
    enum kvp_status st;
    int bad;

    if (!s->has_model)
        return kvp_ydoc_fail(d, node, err, KVP_ERR_SCHEMA, "deployment '%s' needs a 'model'", dep->name);
    if ((st = open_model(L, s->model, &dep->model)) != KVP_OK) {
        if (!err->file[0]) /* an unknown name: point at where it is written */
            kvp_error_place(err, s->model_file, s->model_line, s->model_col);
        return st;
    }
    if (!is_set(s, "gpu") && !is_set(s, "gpu_memory") && !is_set(s, "kv_cache_memory"))
        return kvp_ydoc_fail(d, node, err, KVP_ERR_SCHEMA,
                             "deployment '%s' needs 'gpu', 'gpu_memory' or 'kv_cache_memory'", dep->name);
    if ((st = kvp_settings_apply(&s->kv, dep->model, L->gpus, x, &dep->gpu, &bad, err)) != KVP_OK)
        return kvp_ydoc_fail(d, node, err, st, "deployment '%s': %s%s%s%s", dep->name, bad >= 0 ? "'" : "",
                         bad >= 0 ? kvp_setting_at((uint32_t)bad)->key : "", bad >= 0 ? "': " : "", err->msg);
    /* an engine that refuses these settings makes the plan invalid, not failed */
    if ((st = kvp_fit_compute(dep->model, x, &fit, err)) != KVP_OK)
        return kvp_ydoc_fail(d, node, err, st, "deployment '%s': %s", dep->name, err->msg);
    return KVP_OK;
}

static enum kvp_status read_deployment(struct loader *L, struct ydoc *d, yaml_node_t *node,
                                       const struct settings *defaults)
{
    const char *allowed[KVP_SETTINGS_MAX + 4];
    uint32_t nk = kvp_settings_count();
    struct kvp_error *err = L->err;
    struct kvp_plan *p = L->p;
    struct kvp_plan_deployment *dep;
    struct settings s = *defaults;
    yaml_node_t *n, *list;
    size_t want, checks = 0;
    enum kvp_status st;
    const struct kvp_plan_workload *wl = p->workloads ? p->workloads + L->wl_first : NULL;
    uint32_t nw = p->n_workloads - L->wl_first;

    for (uint32_t i = 0; i < nk; i++)
        allowed[i] = kvp_setting_at(i)->key;
    allowed[nk] = "model";
    allowed[nk + 1] = "name";
    allowed[nk + 2] = "assert";
    allowed[nk + 3] = NULL;
    if ((st = kvp_ydoc_want_map(d, node, "deployments", err)) != KVP_OK ||
        (st = kvp_ydoc_check_keys(d, node, allowed, err)))
        return st;
    if (p->n == KVP_PLAN_MAX_DEPLOYMENTS)
        return kvp_ydoc_fail(d, node, err, KVP_ERR_RANGE, "more than %d deployments", KVP_PLAN_MAX_DEPLOYMENTS);
    if (p->n == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 8;
        struct kvp_plan_deployment *grown = realloc(p->deps, cap * sizeof *grown);
        if (!grown)
            return kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading the plan");
        p->deps = grown;
        p->cap = cap;
    }
    dep = &p->deps[p->n];
    memset(dep, 0, sizeof *dep);
    snprintf(dep->file, sizeof dep->file, "%s", d->file);
    dep->line = (uint32_t)node->start_mark.line + 1;
    dep->col = (uint32_t)node->start_mark.column + 1;
    if (!(n = kvp_ydoc_get(d, node, "name")))
        return kvp_ydoc_fail(d, node, err, KVP_ERR_SCHEMA, "missing required key 'name'");
    if ((st = name_value(d, n, "name", dep->name, err)) != KVP_OK)
        return st;
    for (uint32_t i = 0; i < p->n; i++)
        if (strcmp(p->deps[i].name, dep->name) == 0)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "deployment '%s' is defined twice (first at %s:%u:%u)",
                             dep->name, p->deps[i].file, p->deps[i].line, p->deps[i].col);
    if (!(list = kvp_ydoc_get(d, node, "assert")) || kvp_ydoc_is_null(list))
        return kvp_ydoc_fail(d, node, err, KVP_ERR_SCHEMA, "missing required key 'assert'");
    if (list->type == YAML_MAPPING_NODE ? list->data.mapping.pairs.top == list->data.mapping.pairs.start
        : list->type == YAML_SEQUENCE_NODE  ? list->data.sequence.items.top == list->data.sequence.items.start
                                            : false)
        return kvp_ydoc_fail(d, list, err, KVP_ERR_SCHEMA, "'assert' must not be empty");
    if (list->type == YAML_SCALAR_NODE)
        return kvp_ydoc_fail(d, list, err, KVP_ERR_SCHEMA,
                             "'assert' must be a list or a mapping of assertions, not a scalar");
    if ((st = read_settings(L, d, node, &s)) != KVP_OK || (st = build_deploy(L, d, node, &s, dep)) != KVP_OK)
        goto fail;
    want = list->type == YAML_MAPPING_NODE ? (size_t)(list->data.mapping.pairs.top - list->data.mapping.pairs.start)
                                           : (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
    for (uint32_t i = 0; i < p->n; i++)
        checks += p->deps[i].n_checks;
    if (want > KVP_PLAN_MAX_CHECKS - checks) {
        st = kvp_ydoc_fail(d, list, err, KVP_ERR_RANGE, "more than %d assertions in the plan (%zu with these)",
                       KVP_PLAN_MAX_CHECKS, checks + want);
        goto fail;
    }
    if (!(dep->checks = calloc(want, sizeof *dep->checks))) {
        st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading the plan");
        goto fail;
    }
    if (list->type == YAML_MAPPING_NODE) { /* the short form: {fits: true, min_concurrency: 64} */
        for (yaml_node_pair_t *q = list->data.mapping.pairs.start; q < list->data.mapping.pairs.top; q++) {
            if ((st = read_check(d, kvp_ydoc_node(d, q->key), kvp_ydoc_node(d, q->value), NULL, dep, wl, L->wl_first,
                                 nw, &dep->checks[dep->n_checks], err)) != KVP_OK)
                goto fail;
            dep->n_checks++;
        }
    } else {
        for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
            if ((st = read_check_item(d, kvp_ydoc_node(d, *it), dep, wl, L->wl_first, nw, &dep->checks[dep->n_checks],
                                      err)) != KVP_OK)
                goto fail;
            dep->n_checks++;
        }
    }
    p->n++;
    return KVP_OK;
fail:
    deployment_free(dep);
    return st;
}

/* ---- workloads ---------------------------------------------------------- */

static void workload_free(struct kvp_plan_workload *w)
{
    kvp_workload_free(&w->trace);
    memset(w, 0, sizeof *w);
}

/* The workload keys of map m into w, in the table's order (a prefix before
 * its share), each checked where it is written; with a trace, only the keys
 * that are not about the drawn requests. */
static enum kvp_status read_synth(struct ydoc *d, yaml_node_t *m, bool trace, struct kvp_plan_workload *w,
                                  struct kvp_error *err)
{
    for (uint32_t i = 0; i < KVP_SYNTH_KEYS; i++) {
        const struct kvp_synth_key *k = kvp_synth_key_at(i);
        yaml_node_t *n = kvp_ydoc_get(d, m, k->key);
        const char *v;
        enum kvp_status st;
        if (!n)
            continue;
        if (trace && k->synthetic)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA,
                                 "'%s' describes a synthetic workload; 'trace' gives its own", k->key);
        if ((st = scalar(d, n, k->key, &v, err)) != KVP_OK)
            return st;
        if (kvp_synth_set(&w->synth, &w->max_queue_s, k->key, v, err) != KVP_OK)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "'%s': %s", k->key, err->msg);
    }
    return KVP_OK;
}

/* One entry of `workloads:`: name node kn, mapping m. */
static enum kvp_status read_workload(struct loader *L, struct ydoc *d, yaml_node_t *kn, yaml_node_t *m)
{
    const char *keys[KVP_SYNTH_KEYS + 2] = {"trace"}; /* and the table's, NULL-terminated */
    struct kvp_error *err = L->err;
    struct kvp_plan *p = L->p;
    struct kvp_plan_workload *w;
    struct kvp_workload drawn;
    yaml_node_t *n;
    enum kvp_status st;

    if (p->n_workloads == KVP_PLAN_MAX_WORKLOADS)
        return kvp_ydoc_fail(d, kn, err, KVP_ERR_RANGE, "more than %d workloads", KVP_PLAN_MAX_WORKLOADS);
    if (p->n_workloads == p->cap_workloads) {
        uint32_t cap = p->cap_workloads ? p->cap_workloads * 2 : 4;
        struct kvp_plan_workload *grown = realloc(p->workloads, cap * sizeof *grown);
        if (!grown)
            return kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading the plan");
        p->workloads = grown;
        p->cap_workloads = cap;
    }
    w = &p->workloads[p->n_workloads];
    memset(w, 0, sizeof *w);
    w->synth = (struct kvp_synth)KVP_SYNTH_DEFAULTS;
    w->max_queue_s = KVP_SYNTH_MAX_QUEUE_S;
    snprintf(w->file, sizeof w->file, "%s", d->file);
    w->line = (uint32_t)kn->start_mark.line + 1;
    w->col = (uint32_t)kn->start_mark.column + 1;
    for (uint32_t i = 0; i < KVP_SYNTH_KEYS; i++)
        keys[i + 1] = kvp_synth_key_at(i)->key;
    if ((st = name_value(d, kn, "workloads", w->name, err)) != KVP_OK)
        return st;
    for (uint32_t i = L->wl_first; i < p->n_workloads; i++)
        if (strcmp(p->workloads[i].name, w->name) == 0)
            return kvp_ydoc_fail(d, kn, err, KVP_ERR_SCHEMA, "workload '%s' is defined twice (line %u)", w->name,
                                 p->workloads[i].line);
    if ((st = kvp_ydoc_want_map(d, m, "workloads", err)) != KVP_OK ||
        (st = kvp_ydoc_check_keys(d, m, keys, err)) != KVP_OK)
        return st;
    n = kvp_ydoc_get(d, m, "trace");
    if ((st = read_synth(d, m, n != NULL, w, err)) != KVP_OK)
        return st;
    if (n) {
        char path[KVP_PLAN_PATH_MAX];
        const char *v;
        if ((st = scalar(d, n, "trace", &v, err)) != KVP_OK)
            return st;
        if (!join_path(d->file, v, path, sizeof path))
            return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "the trace path is too long (got '%.60s...')", v);
        if ((st = kvp_workload_load(path, &w->trace, err)) != KVP_OK) {
            if (!err->line) /* cannot be read: point at where it is named */
                return kvp_ydoc_fail(d, n, err, st, "'trace' '%s': %s", path, err->msg);
            return st;
        }
        w->is_trace = true;
    } else {
        uint64_t cost;
        yaml_node_t *r = kvp_ydoc_get(d, m, "requests");
        if ((st = kvp_synth_cost(&w->synth, &cost, err)) != KVP_OK) /* before drawing what would cost too much */
            return kvp_ydoc_fail(d, r ? r : m, err, st, "workload '%s': %s", w->name, err->msg);
        /* drawn once here for its errors (a prefix longer than the prompts) */
        if ((st = kvp_workload_synth(&w->synth, &drawn, err)) != KVP_OK)
            return kvp_ydoc_fail(d, m, err, st, "workload '%s': %s", w->name, err->msg);
        kvp_workload_free(&drawn);
    }
    p->n_workloads++;
    return KVP_OK;
}

/* ---- files and includes ------------------------------------------------- */

static enum kvp_status load_file(struct loader *L, const char *path, struct settings *defaults_out);

static enum kvp_status read_include(struct loader *L, struct ydoc *d, yaml_node_t *n, struct settings *eff)
{
    struct kvp_error *err = L->err;
    char path[KVP_PLAN_PATH_MAX], real[PATH_MAX];
    struct settings inc;
    struct stat sb;
    const char *v;
    enum kvp_status st;

    if ((st = scalar(d, n, "include", &v, err)) != KVP_OK)
        return st;
    if (!join_path(d->file, v, path, sizeof path))
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "the include path is too long (got '%.60s...')", v);
    if (stat(path, &sb) != 0)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_IO, "cannot open the included file '%s'", path);
    if (!realpath(path, real) || !below(L->root, real))
        return kvp_ydoc_fail(d, n, err, KVP_ERR_USAGE,
                             "the included file '%s' is outside the folder of the plan given ('%s'): includes stay "
                             "in it or below (give that file on the command line instead)",
                             path, L->root);
    for (uint32_t i = 0; i <= L->depth; i++)
        if (L->stack[i].dev == sb.st_dev && L->stack[i].ino == sb.st_ino)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_SCHEMA, "include cycle: '%s' is already being loaded", path);
    if (L->depth == KVP_PLAN_MAX_INCLUDE_DEPTH)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_RANGE, "includes nested deeper than %d levels (at '%s')",
                         KVP_PLAN_MAX_INCLUDE_DEPTH, path);
    L->depth++;
    L->stack[L->depth].dev = sb.st_dev;
    L->stack[L->depth].ino = sb.st_ino;
    st = load_file(L, path, &inc);
    L->depth--;
    if (st == KVP_OK)
        overlay(eff, &inc); /* later includes override earlier ones */
    return st;
}

/* Load one file: its includes (their defaults and deployments), its own
 * defaults, its deployments. *defaults_out gets the defaults this file
 * passes on to a file that includes it. */
static enum kvp_status load_file(struct loader *L, const char *path, struct settings *defaults_out)
{
    static const char *const top_keys[] = {"kvplan_plan", "include", "defaults", "workloads", "deployments", NULL};
    struct kvp_error *err = L->err;
    struct settings *eff = calloc(1, sizeof *eff);
    struct ydoc d;
    yaml_node_t *root, *n;
    enum kvp_status st;
    char *text = NULL;
    uint64_t len;
    uint32_t version = 0;

    if (!eff)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading '%s'", path);
    if (++L->files > KVP_PLAN_MAX_FILES) {
        free(eff);
        return kvp_fail_at(err, KVP_ERR_RANGE, path, 0, 0, "more than %d plan files with the includes",
                           KVP_PLAN_MAX_FILES);
    }
    if ((st = kvp_read_file(path, PLAN_FILE_MAX, &text, &len, NULL, err)) != KVP_OK) {
        free(eff);
        return st;
    }
    if ((L->bytes += len) > PLAN_TOTAL_MAX) {
        st = kvp_fail_at(err, KVP_ERR_RANGE, path, 0, 0, "the plan and its includes are larger than %u MiB",
                         PLAN_TOTAL_MAX >> 20);
        free(text);
        free(eff);
        return st;
    }
    if ((st = kvp_ydoc_load(&d, text, len, path, err)) != KVP_OK)
        goto done;
    root = kvp_ydoc_root(&d);
    if ((st = kvp_ydoc_want_schema(&d, root, "kvplan_plan", "plan", &version, err)) != KVP_OK ||
        (st = kvp_ydoc_check_keys(&d, root, top_keys, err)) != KVP_OK)
        goto done;
    if (version != KVP_PLAN_VERSION) {
        st = kvp_ydoc_fail(&d, kvp_ydoc_get(&d, root, "kvplan_plan"), err, KVP_ERR_UNSUPPORTED,
                       "'kvplan_plan' must be %d (got %u)", KVP_PLAN_VERSION, version);
        goto done;
    }
    if ((n = kvp_ydoc_get(&d, root, "include")) != NULL && !kvp_ydoc_is_null(n)) {
        if ((st = kvp_ydoc_want_seq(&d, n, "include", err)) != KVP_OK)
            goto done;
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++)
            if ((st = read_include(L, &d, kvp_ydoc_node(&d, *it), eff)) != KVP_OK)
                goto done;
    }
    if ((n = kvp_ydoc_get(&d, root, "defaults")) != NULL && !kvp_ydoc_is_null(n)) {
        const char *allowed[KVP_SETTINGS_MAX + 2];
        uint32_t nk = kvp_settings_count();
        struct settings own;
        for (uint32_t i = 0; i < nk; i++)
            allowed[i] = kvp_setting_at(i)->key;
        allowed[nk] = "model";
        allowed[nk + 1] = NULL;
        memset(&own, 0, sizeof own);
        if ((st = kvp_ydoc_want_map(&d, n, "defaults", err)) != KVP_OK ||
            (st = kvp_ydoc_check_keys(&d, n, allowed, err)) != KVP_OK || (st = read_settings(L, &d, n, &own)) != KVP_OK)
            goto done;
        overlay(eff, &own);
    }
    L->wl_first = L->p->n_workloads; /* after the includes': a file sees its own workloads only */
    if ((n = kvp_ydoc_get(&d, root, "workloads")) != NULL && !kvp_ydoc_is_null(n)) {
        if ((st = kvp_ydoc_want_map(&d, n, "workloads", err)) != KVP_OK)
            goto done;
        for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < n->data.mapping.pairs.top; q++)
            if ((st = read_workload(L, &d, kvp_ydoc_node(&d, q->key), kvp_ydoc_node(&d, q->value))) != KVP_OK)
                goto done;
    }
    if ((n = kvp_ydoc_get(&d, root, "deployments")) != NULL && !kvp_ydoc_is_null(n)) {
        if ((st = kvp_ydoc_want_seq(&d, n, "deployments", err)) != KVP_OK)
            goto done;
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++)
            if ((st = read_deployment(L, &d, kvp_ydoc_node(&d, *it), eff)) != KVP_OK)
                goto done;
    }
    *defaults_out = *eff;
done:
    kvp_ydoc_release(&d);
    free(text);
    free(eff);
    return st;
}

enum kvp_status kvp_plan_load(struct kvp_plan *p, const char *path, const struct kvp_catalog *models,
                              const struct kvp_gpu_catalog *gpus, struct kvp_error *err)
{
    struct loader *L = calloc(1, sizeof *L);
    struct settings *top = calloc(1, sizeof *top);
    struct stat sb;
    uint32_t before = p->n, wl_before = p->n_workloads;
    enum kvp_status st;

    if (!L || !top) {
        free(L);
        free(top);
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory reading '%s'", path);
    }
    L->p = p;
    L->models = models;
    L->gpus = gpus;
    L->err = err;
    if (stat(path, &sb) != 0 || !plan_root(path, L->root)) {
        st = kvp_fail_at(err, KVP_ERR_IO, path, 0, 0, "cannot open the file");
    } else {
        L->stack[0].dev = sb.st_dev;
        L->stack[0].ino = sb.st_ino;
        st = load_file(L, path, top);
        if (st == KVP_OK && p->n == before)
            st = kvp_fail_at(err, KVP_ERR_SCHEMA, path, 1, 1, "the plan has no deployments");
    }
    if (st != KVP_OK) {
        while (p->n > before)
            deployment_free(&p->deps[--p->n]);
        while (p->n_workloads > wl_before)
            workload_free(&p->workloads[--p->n_workloads]);
    }
    for (uint32_t i = 0; i < L->n_models; i++)
        free(L->models_opened[i].name);
    free(L->models_opened);
    free(L);
    free(top);
    return st;
}

void kvp_plan_release(struct kvp_plan *p)
{
    for (uint32_t i = 0; i < p->n; i++)
        deployment_free(&p->deps[i]);
    for (uint32_t i = 0; i < p->n_workloads; i++)
        workload_free(&p->workloads[i]);
    free(p->deps);
    free(p->workloads);
    memset(p, 0, sizeof *p);
}

/* ---- evaluation --------------------------------------------------------- */

/* What a simulated assertion ran: the workload, the pool it ran in, the
 * result (max_preemptions), or why the workload could not run. */
struct sim_out {
    const struct kvp_plan_workload *w;
    struct kvp_sim_config c;
    struct kvp_sim_result r;
    char cannot[KVP_ERROR_TEXT_MAX]; /* "" when it ran */
};

/* "workload 'chat' (1000 requests at 5 requests/s, prompts 2,048 tokens, answers 500, prefix 1,024 on 50%)" */
static void workload_text(const struct kvp_plan_workload *w, bool rate, struct kvp_buf *b)
{
    const struct kvp_synth *s = &w->synth;
    char x[4][32];
    if (w->is_trace) {
        kvp_buf_printf(b, "workload '%s' (the trace %s, %u requests)", w->name, w->trace.name, w->trace.n);
        return;
    }
    kvp_buf_printf(b, "workload '%s' (%u requests", w->name, s->requests);
    if (rate && s->rate > 0)
        kvp_buf_printf(b, " at %g requests/s", s->rate);
    else if (rate)
        kvp_buf_printf(b, " all arriving at once");
    kvp_buf_printf(b, ", prompts %s", kvp_count_text(s->prompt.lo, x[0], sizeof x[0]));
    if (s->prompt.hi != s->prompt.lo)
        kvp_buf_printf(b, "-%s", kvp_count_text(s->prompt.hi, x[1], sizeof x[1]));
    kvp_buf_printf(b, " tokens, answers %s", kvp_count_text(s->output.lo, x[2], sizeof x[2]));
    if (s->output.hi != s->output.lo)
        kvp_buf_printf(b, "-%s", kvp_count_text(s->output.hi, x[3], sizeof x[3]));
    if (s->prefix)
        kvp_buf_printf(b, ", a %u-token prefix on %g%%", s->prefix, 100.0 * s->prefix_share);
    kvp_buf_printf(b, ", seed %llu)", (unsigned long long)s->seed);
}

static void derive_sim(const struct kvp_check_result *res, const struct kvp_fit *f, const struct sim_out *so,
                       struct kvp_buf *b)
{
    char x[4][32];
    const bool rate = res->check->kind == KVP_CHECK_MIN_SUSTAINED_RATE;
    if (f->refused[0]) {
        kvp_buf_printf(b, "the deployment does not start (%s): no workload runs on it\n", f->refused);
        return;
    }
    if (so->cannot[0]) {
        kvp_buf_printf(b, "the workload cannot run on this deployment: %s\n", so->cannot);
        return;
    }
    if (rate)
        kvp_buf_printf(b, "highest sustained rate = %.4g requests/s (no preemption, queueing p99 <= %g s) under ",
                       res->measured, so->w->max_queue_s);
    else
        kvp_buf_printf(b, "%s preemption%s (peak KV %s of %s %s, %s steps) under ",
                       kvp_count_text(so->r.preemptions, x[0], sizeof x[0]), so->r.preemptions == 1 ? "" : "s",
                       kvp_count_text(so->r.peak_blocks, x[1], sizeof x[1]),
                       kvp_count_text(so->r.pool_blocks, x[2], sizeof x[2]),
                       kvp_sim_unit(so->c.engine), kvp_count_text(so->r.steps, x[3], sizeof x[3]));
    workload_text(so->w, !rate, b);
    kvp_buf_printf(b, "\n%s, %s %s of %u tokens, max_num_seqs %s, max_num_batched_tokens %s; "
                      "step times are roofline lower bounds (kvplan simulate, docs/simulate.md)\n",
                   kvp_sim_scheduler(so->c.engine),
                   kvp_count_text(so->c.engine == KVP_SIM_LLAMACPP ? so->c.num_blocks : so->c.num_blocks - 1, x[0],
                                  sizeof x[0]),
                   kvp_sim_unit(so->c.engine), so->c.block_size, kvp_count_text(so->c.max_num_seqs, x[1], sizeof x[1]),
                   kvp_count_text(so->c.max_batched_tokens, x[2], sizeof x[2]));
}

/* How the measured value came about: one line for the assertion, then,
 * with `explain` (the deployment's first failure only: it is the same for
 * all), the engine's own formulas with the values substituted. */
static char *derive(const struct kvp_plan_deployment *dep, const struct kvp_deploy *d, const struct kvp_fit *f,
                    const struct kvp_roofline *r, const struct sim_out *so, const struct kvp_check_result *res,
                    bool explain)
{
    struct kvp_buf b = {0};
    char x[4][48];
    unsigned long long want = (unsigned long long)res->concurrency;

    switch (res->check->kind) {
    case KVP_CHECK_FITS:
    case KVP_CHECK_MIN_HEADROOM:
        kvp_buf_printf(&b, "KV required %s for %llu request%s of %s tokens vs KV budget %s per GPU: %s %s\n",
                       kvp_bytes_text(f->kv_bytes_required, false, x[0], sizeof x[0]), want, want == 1 ? "" : "s",
                       kvp_count_text(res->context, x[1], sizeof x[1]),
                       kvp_bytes_text(f->kv_budget_bytes, false, x[2], sizeof x[2]),
                       kvp_bytes_text(f->fits ? f->free_bytes : f->short_bytes, false, x[3], sizeof x[3]),
                       f->fits ? "left (headroom)" : "short");
        break;
    case KVP_CHECK_MIN_CONCURRENCY:
        if (res->dep->d.dp > 1)
            kvp_buf_printf(&b, "%u DP ranks x ", res->dep->d.dp);
        kvp_buf_printf(&b, "max concurrency = %.4f requests of %s tokens (one request %s, KV budget %s per GPU)\n",
                       f->max_concurrency, kvp_count_text(res->context, x[0], sizeof x[0]),
                       kvp_bytes_text(f->request_bytes, false, x[1], sizeof x[1]),
                       kvp_bytes_text(f->kv_budget_bytes, false, x[2], sizeof x[2]));
        break;
    case KVP_CHECK_MIN_CONTEXT:
        kvp_buf_printf(&b, "max context = %s tokens per request with %llu request%s (KV budget %s per GPU)\n",
                       kvp_count_text(f->max_context, x[0], sizeof x[0]), want, want == 1 ? "" : "s",
                       kvp_bytes_text(f->kv_budget_bytes, false, x[1], sizeof x[1]));
        break;
    case KVP_CHECK_MAX_KV_SHARE:
        kvp_buf_printf(&b, "KV share = KV required / GPU memory = %s / %s B = %.4f (%llu request%s of %s tokens)\n",
                       kvp_count_text(f->kv_bytes_required, x[0], sizeof x[0]),
                       kvp_count_text(d->gpu_memory, x[1], sizeof x[1]), res->measured, want,
                       want == 1 ? "" : "s", kvp_count_text(res->context, x[2], sizeof x[2]));
        break;
    case KVP_CHECK_MAX_KV_BYTES_PER_TOKEN:
        kvp_buf_printf(&b, "KV per token on the busiest GPU = %s B (K %s, V %s, tp %u, pp %u)\n",
                       kvp_count_text(f->kv_bytes_per_token_per_gpu, x[0], sizeof x[0]),
                       kvp_format_name(&d->k, x[1], sizeof x[1]), kvp_format_name(&d->v, x[2], sizeof x[2]), d->tp,
                       d->pp);
        break;
    case KVP_CHECK_MAX_TPOT:
        if (!f->fits) {
            kvp_buf_printf(&b, "%llu request%s of %s tokens do not fit (KV required %s, KV budget %s per GPU): "
                           "there is no decode step to time\n", want, want == 1 ? "" : "s",
                           kvp_count_text(res->context, x[0], sizeof x[0]),
                           kvp_bytes_text(f->kv_bytes_required, false, x[1], sizeof x[1]),
                           kvp_bytes_text(f->kv_budget_bytes, false, x[2], sizeof x[2]));
            break;
        }
        kvp_buf_printf(&b,
                       "decode time per output token >= (weights read %s B + KV read %s B) / %s B/s = %.3f ms "
                       "(batch %llu of %s tokens, per GPU)\n",
                       kvp_count_text(r->weight_bytes, x[0], sizeof x[0]),
                       kvp_count_text(r->kv_bytes, x[1], sizeof x[1]),
                       kvp_count_text(dep->gpu->bandwidth_bytes_per_s, x[2], sizeof x[2]), r->tpot_s * 1e3, want,
                       kvp_count_text(res->context, x[3], sizeof x[3]));
        break;
    case KVP_CHECK_MIN_SUSTAINED_RATE:
    case KVP_CHECK_MAX_PREEMPTIONS:
        derive_sim(res, f, so, &b);
        break;
    default:
        break;
    }
    /* the fit's formulas explain a fit; a simulation's only when the engine would not start */
    if (explain && (kinds[res->check->kind].mods & MOD_WORKLOAD ? f->refused[0] != '\0'
                                                                 : res->check->kind != KVP_CHECK_MAX_TPOT || !f->fits))
        kvp_explain_fit(dep->model, d, f, false, &b);
    if (b.nomem || !b.data) {
        kvp_buf_release(&b);
        return NULL;
    }
    return b.data; /* the buffer's storage becomes the caller's */
}

/* Run workload so->w on deployment d (fit f) for check kind k into *measured:
 * the highest sustained rate, or the preemptions. A workload the deployment
 * cannot run (a request longer than max_model_len or the pool) is recorded
 * in so->cannot, not an error: the assertion fails. */
static enum kvp_status simulate(const struct kvp_plan_deployment *dep, const struct kvp_deploy *d,
                                const struct kvp_fit *f, enum kvp_check_kind k, struct sim_out *so, double *measured,
                                struct kvp_error *err)
{
    const struct kvp_plan_workload *w = so->w;
    struct kvp_workload drawn = {0};
    enum kvp_status st;

    if ((st = kvp_sim_config_from_fit(dep->model, d, f, (double)dep->gpu->bandwidth_bytes_per_s,
                                      kvp_gpu_peak_flops(dep->gpu, kvp_wstore_code_dtype(&d->w, dep->model)), &so->c,
                                      err)) != KVP_OK)
        return st;
    if (k == KVP_CHECK_MIN_SUSTAINED_RATE) {
        st = kvp_sim_max_rate(&so->c, &w->synth, w->max_queue_s, measured, err);
    } else {
        if (w->is_trace || (st = kvp_workload_synth(&w->synth, &drawn, err)) == KVP_OK)
            st = kvp_sim_run(&so->c, w->is_trace ? &w->trace : &drawn, false, &so->r, err);
        kvp_workload_free(&drawn);
        *measured = (double)so->r.preemptions;
    }
    if (st == KVP_ERR_RANGE) {
        kvp_error_text(err, so->cannot, sizeof so->cannot);
        *measured = 0;
        return KVP_OK;
    }
    return st;
}

static enum kvp_status evaluate_one(const struct kvp_plan *p, const struct kvp_plan_deployment *dep,
                                    const struct kvp_plan_check *c, struct kvp_check_result *res, bool *explained,
                                    struct kvp_error *err)
{
    struct kvp_deploy d = dep->d;
    struct kvp_fit f;
    struct kvp_roofline r;
    struct sim_out so;
    enum kvp_status st;

    memset(&r, 0, sizeof r);
    memset(&so, 0, sizeof so);
    if (c->context)
        d.context = c->context;
    if (c->concurrency)
        d.concurrency = c->concurrency;
    res->dep = dep;
    res->check = c;
    res->context = d.context;
    res->concurrency = d.concurrency ? d.concurrency : 1;
    if ((st = kvp_fit_compute(dep->model, &d, &f, err)) != KVP_OK)
        return st;
    switch (c->kind) {
    case KVP_CHECK_FITS: res->measured = f.fits ? 1.0 : 0.0; break;
    case KVP_CHECK_MIN_CONCURRENCY: /* the deployment's: each DP rank its own pool */
        res->measured = f.max_concurrency * (d.dp ? d.dp : 1);
        break;
    case KVP_CHECK_MIN_CONTEXT: res->measured = (double)f.max_context; break;
    case KVP_CHECK_MAX_KV_SHARE: res->measured = (double)f.kv_bytes_required / (double)d.gpu_memory; break;
    case KVP_CHECK_MAX_KV_BYTES_PER_TOKEN: res->measured = (double)f.kv_bytes_per_token_per_gpu; break;
    case KVP_CHECK_MIN_HEADROOM: res->measured = f.fits ? (double)f.free_bytes : 0.0; break;
    case KVP_CHECK_MAX_TPOT:
        if (!f.fits) /* a deployment that does not hold the requests has no decode step to time */
            break;
        if ((st = kvp_roofline(dep->model, &d, res->concurrency, (double)dep->gpu->bandwidth_bytes_per_s,
                               kvp_gpu_peak_flops(dep->gpu, kvp_wstore_code_dtype(&d.w, dep->model)), &r, err)) !=
            KVP_OK)
            return st;
        res->measured = r.tpot_s * 1e3;
        break;
    case KVP_CHECK_MIN_SUSTAINED_RATE:
    case KVP_CHECK_MAX_PREEMPTIONS:
        so.w = &p->workloads[c->workload];
        if (!f.refused[0] && (st = simulate(dep, &d, &f, c->kind, &so, &res->measured, err)) != KVP_OK) {
            kvp_sim_result_free(&so.r);
            return st;
        }
        break;
    default: break;
    }
    if ((c->kind == KVP_CHECK_MAX_TPOT || c->kind == KVP_CHECK_MIN_HEADROOM) && !f.fits)
        res->pass = false; /* not evaluated on requests that do not fit: failed, never passed */
    else if ((kinds[c->kind].mods & MOD_WORKLOAD) && (f.refused[0] || so.cannot[0]))
        res->pass = false; /* a deployment that does not start, or cannot run the workload, serves nothing */
    else if (c->kind == KVP_CHECK_FITS)
        res->pass = res->measured == c->limit;
    else if (kinds[c->kind].higher_better)
        res->pass = res->measured + 1e-9 >= c->limit; /* 1e-9: concurrency is a quotient */
    else
        res->pass = res->measured <= c->limit + 1e-9;
    res->derivation = res->pass ? NULL : derive(dep, &d, &f, &r, &so, res, !*explained);
    kvp_sim_result_free(&so.r);
    if (!res->pass && !res->derivation)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory explaining '%s'", c->id);
    *explained |= !res->pass;
    return KVP_OK;
}

enum kvp_status kvp_plan_evaluate(const struct kvp_plan *p, struct kvp_plan_report *r, struct kvp_error *err)
{
    uint32_t total = 0;
    enum kvp_status st;

    memset(r, 0, sizeof *r);
    r->plan = p;
    for (uint32_t i = 0; i < p->n; i++)
        total += p->deps[i].n_checks;
    if (total && !(r->results = calloc(total, sizeof *r->results)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory evaluating the plan");
    for (uint32_t i = 0; i < p->n; i++) {
        const struct kvp_plan_deployment *dep = &p->deps[i];
        bool explained = false;
        for (uint32_t j = 0; j < dep->n_checks; j++) {
            struct kvp_check_result *res = &r->results[r->n++];
            if ((st = evaluate_one(p, dep, &dep->checks[j], res, &explained, err)) != KVP_OK) {
                kvp_error_place(err, dep->file, dep->checks[j].line, dep->checks[j].col);
                kvp_plan_report_release(r);
                return st;
            }
            if (res->pass)
                r->passed++;
            else
                r->failed++;
        }
    }
    return KVP_OK;
}

void kvp_plan_report_release(struct kvp_plan_report *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        free(r->results[i].derivation);
    free(r->results);
    memset(r, 0, sizeof *r);
}

/* ---- baseline ----------------------------------------------------------- */

enum kvp_status kvp_plan_baseline_apply(struct kvp_plan_report *r, const char *path, double tolerance,
                                        struct kvp_error *err)
{
    struct ydoc d;
    yaml_node_t *root, *list;
    enum kvp_status st;
    char *text = NULL;
    uint64_t len;
    uint32_t version = 0;

    if (!(tolerance >= 0.0 && tolerance < 1.0))
        return kvp_fail(err, KVP_ERR_USAGE, "the tolerance must be in [0, 1) (got %g)", tolerance);
    if ((st = kvp_read_file(path, PLAN_FILE_MAX, &text, &len, NULL, err)) != KVP_OK)
        return st;
    if ((st = kvp_ydoc_load(&d, text, len, path, err)) != KVP_OK)
        goto done;
    root = kvp_ydoc_root(&d);
    if ((st = kvp_ydoc_want_map(&d, root, "baseline", err)) != KVP_OK ||
        (st = kvp_ydoc_get_u32(&d, root, "kvplan_check", true, &version, err)) != KVP_OK)
        goto done;
    if (version != KVP_PLAN_REPORT_VERSION) {
        st = kvp_ydoc_fail(&d, kvp_ydoc_get(&d, root, "kvplan_check"), err, KVP_ERR_UNSUPPORTED,
                       "'kvplan_check' must be %d (got %u)", KVP_PLAN_REPORT_VERSION, version);
        goto done;
    }
    if (!(list = kvp_ydoc_get(&d, root, "results")))
        st = kvp_ydoc_fail(&d, root, err, KVP_ERR_SCHEMA, "missing required key 'results'");
    else
        st = kvp_ydoc_want_seq(&d, list, "results", err);
    if (st == KVP_OK && list->data.sequence.items.top - list->data.sequence.items.start > KVP_PLAN_MAX_CHECKS)
        st = kvp_ydoc_fail(&d, list, err, KVP_ERR_RANGE, "more than %d results (a plan has at most %d assertions)",
                       KVP_PLAN_MAX_CHECKS, KVP_PLAN_MAX_CHECKS);
    if (st != KVP_OK)
        goto done;
    for (uint32_t i = 0; i < r->n; i++)
        r->results[i].has_baseline = r->results[i].regressed = false;
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
        yaml_node_t *item = kvp_ydoc_node(&d, *it), *mn;
        char id[KVP_PLAN_ID_MAX];
        double v;
        if ((st = kvp_ydoc_want_map(&d, item, "results", err)) != KVP_OK ||
            (st = kvp_ydoc_get_str(&d, item, "id", true, id, sizeof id, err)) != KVP_OK)
            goto done;
        if (!(mn = kvp_ydoc_get(&d, item, "measured")))
            st = kvp_ydoc_fail(&d, item, err, KVP_ERR_SCHEMA, "missing required key 'measured'");
        else
            st = number(&d, mn, "measured", &v, err);
        if (st != KVP_OK)
            goto done;
        for (uint32_t i = 0; i < r->n; i++) {
            struct kvp_check_result *res = &r->results[i];
            if (strcmp(res->check->id, id) != 0)
                continue;
            if (res->has_baseline) {
                st = kvp_ydoc_fail(&d, item, err, KVP_ERR_SCHEMA, "result '%s' appears twice", id);
                goto done;
            }
            /* what a kind measures is never negative, and a whole number fits 64 bits */
            if (v < 0 || (kinds[res->check->kind].integer && v >= 18446744073709551616.0)) {
                st = kvp_ydoc_fail(&d, mn, err, KVP_ERR_RANGE, "'measured' of a %s result must be from 0%s (got %g)",
                                   kinds[res->check->kind].name,
                                   kinds[res->check->kind].integer ? " to 2^64 - 1" : " up", v);
                goto done;
            }
            res->has_baseline = true;
            res->baseline = v;
        }
    }
    r->have_baseline = true;
    r->tolerance = tolerance;
    r->regressed = r->baseline_missing = r->passed = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        struct kvp_check_result *res = &r->results[i];
        double slack = tolerance * fabs(res->baseline) + 1e-9;
        if (!res->has_baseline) {
            r->baseline_missing++;
            r->passed += res->pass;
            continue;
        }
        res->regressed = kinds[res->check->kind].higher_better ? res->measured < res->baseline - slack
                                                               : res->measured > res->baseline + slack;
        /* a held assertion that regressed is counted as regressed, not passed */
        r->regressed += res->regressed && res->pass;
        r->passed += res->pass && !res->regressed;
    }
done:
    kvp_ydoc_release(&d);
    free(text);
    return st;
}

/* ---- rendering ---------------------------------------------------------- */

bool kvp_plan_out_from_name(const char *s, enum kvp_out *out)
{
    static const struct {
        const char *name;
        enum kvp_out fmt;
    } names[] = {{"text", KVP_OUT_TEXT}, {"json", KVP_OUT_JSON}, {"junit", KVP_OUT_JUNIT}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].fmt;
            return true;
        }
    return false;
}

/* measured or limit v of kind k for people: "yes", "86.96", "11,120 tokens", "80.00 KiB", "18.24 ms". */
static const char *human(enum kvp_check_kind k, double v, bool si, char *buf, uint32_t n)
{
    char g[32];
    switch (k) {
    case KVP_CHECK_FITS: snprintf(buf, n, "%s", v != 0.0 ? "yes" : "no"); break;
    case KVP_CHECK_MIN_CONCURRENCY: snprintf(buf, n, "%.2f", v); break;
    case KVP_CHECK_MIN_CONTEXT: snprintf(buf, n, "%s tokens", kvp_count_text((uint64_t)v, g, sizeof g)); break;
    case KVP_CHECK_MAX_KV_SHARE: snprintf(buf, n, "%.3f", v); break;
    case KVP_CHECK_MAX_TPOT: snprintf(buf, n, "%.2f ms", v); break;
    case KVP_CHECK_MIN_SUSTAINED_RATE: snprintf(buf, n, "%.3g requests/s", v); break;
    case KVP_CHECK_MAX_PREEMPTIONS: snprintf(buf, n, "%s", kvp_count_text((uint64_t)v, g, sizeof g)); break;
    default: kvp_bytes_text((uint64_t)v, si, buf, n); break;
    }
    return buf;
}

/* The workload a check runs, or NULL. */
static const struct kvp_plan_workload *workload_of(const struct kvp_plan *p, const struct kvp_plan_check *c)
{
    return c->workload >= 0 ? &p->workloads[c->workload] : NULL;
}

/* "min_concurrency at 8,192 tokens", "min_context with 64 requests", "max_preemptions under chat", ... */
static const char *label(const struct kvp_plan_report *r, const struct kvp_check_result *res, char *buf, uint32_t n)
{
    char a[32], b[32];
    const char *kn = kinds[res->check->kind].name;
    switch (res->check->kind) {
    case KVP_CHECK_MIN_CONCURRENCY:
        snprintf(buf, n, "%s at %s tokens", kn, kvp_count_text(res->context, a, sizeof a));
        break;
    case KVP_CHECK_MIN_CONTEXT:
        snprintf(buf, n, "%s with %llu request%s", kn, (unsigned long long)res->concurrency,
                 res->concurrency == 1 ? "" : "s");
        break;
    case KVP_CHECK_MAX_KV_BYTES_PER_TOKEN: snprintf(buf, n, "%s", kn); break;
    case KVP_CHECK_MIN_SUSTAINED_RATE:
    case KVP_CHECK_MAX_PREEMPTIONS:
        snprintf(buf, n, "%s under %s", kn, workload_of(r->plan, res->check)->name);
        break;
    default:
        snprintf(buf, n, "%s at %llu x %s tokens", kn, (unsigned long long)res->concurrency,
                 kvp_count_text(res->context, b, sizeof b));
        break;
    }
    return buf;
}

static const char *op(enum kvp_check_kind k)
{
    return k == KVP_CHECK_FITS ? "=" : kinds[k].higher_better ? ">=" : "<=";
}

static const char *status_word(const struct kvp_check_result *res)
{
    return !res->pass ? "FAIL" : res->regressed ? "REGRESSED" : "PASS";
}

static void baseline_note(const struct kvp_check_result *res, bool si, char *buf, uint32_t n)
{
    char v[48];
    buf[0] = '\0';
    if (!res->has_baseline)
        return;
    if (res->baseline != 0.0)
        snprintf(buf, n, "; baseline %s (%+.1f%%)", human(res->check->kind, res->baseline, si, v, sizeof v),
                 100.0 * (res->measured - res->baseline) / fabs(res->baseline));
    else
        snprintf(buf, n, "; baseline %s", human(res->check->kind, res->baseline, si, v, sizeof v));
}

static void render_text(const struct kvp_plan_report *r, bool si, struct kvp_buf *b)
{
    const struct kvp_plan_deployment *last = NULL;
    char g[32];
    for (uint32_t i = 0; i < r->n; i++) {
        const struct kvp_check_result *res = &r->results[i];
        const struct kvp_plan_deployment *dep = res->dep;
        char lab[128], m[48], l[48], note[96], w[64];
        if (dep != last) {
            const struct kvp_deploy *d = &dep->d;
            char k[64], v[64], dp[48] = "", ep[96];
            if (d->dp > 1)
                snprintf(dp, sizeof dp, "dp %u%s, ", d->dp, d->dp_attention ? " (DP attention)" : "");
            kvp_buf_printf(b, "%s%s:%u:%u: %s: %s on %u x %s, %s, %s%stp %u, pp %u, K %s, V %s, weights %s\n",
                           last ? "\n" : "", dep->file, dep->line, dep->col, dep->name, dep->model->name, d->n_gpus,
                           dep->gpu ? dep->gpu->id : "GPU", kvp_engine_info(d->engine)->name, dp,
                           kvp_deploy_ep_text(dep->model, d, ep, sizeof ep), d->tp, d->pp,
                           kvp_format_name(&d->k, k, sizeof k), kvp_format_name(&d->v, v, sizeof v),
                           kvp_wstore_name(&d->w, w, sizeof w));
            for (uint32_t x = 0; x < dep->model->n_warnings; x++)
                kvp_buf_printf(b, "  warning: %s\n", dep->model->warnings[x]);
            last = dep;
        }
        baseline_note(res, si, note, sizeof note);
        kvp_buf_printf(b, "  %-9s %s: %s (want %s %s%s)\n", status_word(res), label(r, res, lab, sizeof lab),
                       human(res->check->kind, res->measured, si, m, sizeof m), op(res->check->kind),
                       human(res->check->kind, res->check->limit, si, l, sizeof l), note);
        if (res->derivation) {
            kvp_buf_printf(b, "            %s:%u:%u: %s\n", dep->file, res->check->line, res->check->col,
                           res->check->id);
            for (const char *s = res->derivation; *s;) {
                size_t len = strcspn(s, "\n");
                kvp_buf_printf(b, "            %.*s\n", (int)len, s);
                s += len + (s[len] == '\n');
            }
        }
    }
    kvp_buf_printf(b, "\n%u assertion%s: %u passed, %u failed", r->n, r->n == 1 ? "" : "s", r->passed, r->failed);
    if (r->have_baseline) {
        snprintf(g, sizeof g, "%g", r->tolerance * 100.0);
        kvp_buf_printf(b, ", %u regressed (held, but worse than the baseline by more than %s%%; %u not in it)",
                       r->regressed, g, r->baseline_missing);
    }
    kvp_buf_printf(b, "\n");
}

static void json_value(struct kvp_json *j, const char *key, enum kvp_check_kind k, double v)
{
    if (kinds[k].integer && v >= 0 && v < 1.8e19)
        kvp_json_u64(j, key, (uint64_t)v);
    else
        kvp_json_double(j, key, v);
}

static void render_json(const struct kvp_plan_report *r, struct kvp_buf *b)
{
    const struct kvp_plan_deployment *last = NULL;
    struct kvp_json j;
    char s[3][64];
    uint32_t ndeps = 0;

    for (uint32_t i = 0; i < r->n; i++)
        if (r->results[i].dep != last) {
            last = r->results[i].dep;
            ndeps++;
        }
    kvp_json_init(&j, b);
    kvp_json_begin(&j, NULL, '{');
    kvp_json_u64(&j, "kvplan_check", KVP_PLAN_REPORT_VERSION);
    kvp_json_bool(&j, "passed", r->failed == 0 && r->regressed == 0);
    kvp_json_begin(&j, "summary", '{');
    kvp_json_u64(&j, "deployments", ndeps);
    kvp_json_u64(&j, "assertions", r->n);
    kvp_json_u64(&j, "passed", r->passed);
    kvp_json_u64(&j, "failed", r->failed);
    kvp_json_u64(&j, "regressed", r->regressed);
    kvp_json_end(&j, '}');
    if (r->have_baseline) {
        kvp_json_begin(&j, "baseline", '{');
        kvp_json_double(&j, "tolerance", r->tolerance);
        kvp_json_u64(&j, "missing", r->baseline_missing);
        kvp_json_end(&j, '}');
    } else {
        kvp_json_null(&j, "baseline");
    }
    kvp_json_begin(&j, "deployments", '[');
    last = NULL;
    for (uint32_t i = 0; i < r->n; i++) {
        const struct kvp_plan_deployment *dep = r->results[i].dep;
        const struct kvp_deploy *d = &dep->d;
        if (dep == last)
            continue;
        last = dep;
        kvp_json_begin(&j, NULL, '{');
        kvp_json_str(&j, "name", dep->name);
        kvp_json_str(&j, "file", dep->file);
        kvp_json_u64(&j, "line", dep->line);
        kvp_json_u64(&j, "column", dep->col);
        kvp_json_str(&j, "model", dep->model->name);
        if (dep->gpu)
            kvp_json_str(&j, "gpu", dep->gpu->id);
        else
            kvp_json_null(&j, "gpu");
        kvp_json_u64(&j, "gpu_memory_bytes", d->gpu_memory);
        kvp_json_u64(&j, "gpus", d->n_gpus);
        kvp_json_u64(&j, "tp", d->tp);
        kvp_json_u64(&j, "pp", d->pp);
        kvp_json_str(&j, "engine", kvp_engine_info(d->engine)->name);
        kvp_json_str(&j, "engine_version", kvp_deploy_release(d)->version);
        kvp_json_u64(&j, "context", d->context);
        kvp_json_u64(&j, "concurrency", d->concurrency ? d->concurrency : 1);
        kvp_json_str(&j, "k_dtype", kvp_format_name(&d->k, s[0], sizeof s[0]));
        kvp_json_str(&j, "v_dtype", kvp_format_name(&d->v, s[1], sizeof s[1]));
        kvp_json_str(&j, "weight_dtype", kvp_wstore_name(&d->w, s[2], sizeof s[2]));
        kvp_json_model_warnings(&j, dep->model);
        kvp_json_end(&j, '}');
    }
    kvp_json_end(&j, ']');
    kvp_json_begin(&j, "results", '[');
    for (uint32_t i = 0; i < r->n; i++) {
        const struct kvp_check_result *res = &r->results[i];
        enum kvp_check_kind k = res->check->kind;
        kvp_json_begin(&j, NULL, '{');
        kvp_json_str(&j, "id", res->check->id);
        kvp_json_str(&j, "test", res->check->test);
        kvp_json_str(&j, "deployment", res->dep->name);
        kvp_json_str(&j, "kind", kinds[k].name);
        kvp_json_str(&j, "file", res->dep->file);
        kvp_json_u64(&j, "line", res->check->line);
        kvp_json_u64(&j, "column", res->check->col);
        kvp_json_u64(&j, "context", res->context);
        kvp_json_u64(&j, "concurrency", res->concurrency);
        if (res->check->workload >= 0)
            kvp_json_str(&j, "workload", workload_of(r->plan, res->check)->name);
        else
            kvp_json_null(&j, "workload");
        json_value(&j, "measured", k, res->measured);
        json_value(&j, "limit", k, res->check->limit);
        kvp_json_str(&j, "op", op(k));
        kvp_json_str(&j, "unit", kinds[k].unit);
        kvp_json_bool(&j, "pass", res->pass);
        kvp_json_str(&j, "status", !res->pass ? "fail" : res->regressed ? "regressed" : "pass");
        if (res->has_baseline) {
            json_value(&j, "baseline", k, res->baseline);
            if (res->baseline != 0.0)
                kvp_json_double(&j, "change", (res->measured - res->baseline) / fabs(res->baseline));
            else
                kvp_json_null(&j, "change");
        } else {
            kvp_json_null(&j, "baseline");
            kvp_json_null(&j, "change");
        }
        kvp_json_bool(&j, "regressed", res->regressed);
        if (res->derivation)
            kvp_json_str(&j, "derivation", res->derivation);
        else
            kvp_json_null(&j, "derivation");
        kvp_json_end(&j, '}');
    }
    kvp_json_end(&j, ']');
    kvp_json_end(&j, '}');
    kvp_buf_printf(b, "\n");
}


static void junit_property_u64(struct kvp_buf *b, const char *name, uint64_t v)
{
    kvp_buf_printf(b, "        <property name=\"%s\" value=\"%llu\"/>\n", name, (unsigned long long)v);
}

static void render_junit(const struct kvp_plan_report *r, bool si, struct kvp_buf *b)
{
    uint32_t bad = 0;
    for (uint32_t i = 0; i < r->n; i++)
        bad += !r->results[i].pass || r->results[i].regressed;
    kvp_buf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    kvp_buf_printf(b, "<testsuites name=\"kvplan check\" tests=\"%u\" failures=\"%u\" errors=\"0\">\n", r->n,
                   bad);
    for (uint32_t i = 0; i < r->n;) {
        const struct kvp_plan_deployment *dep = r->results[i].dep;
        uint32_t end = i, fails = 0;
        while (end < r->n && r->results[end].dep == dep) {
            fails += !r->results[end].pass || r->results[end].regressed;
            end++;
        }
        kvp_buf_printf(b, "  <testsuite name=\"");
        kvp_buf_xml(b, dep->name);
        kvp_buf_printf(b, "\" tests=\"%u\" failures=\"%u\" errors=\"0\" file=\"", end - i, fails);
        kvp_buf_xml(b, dep->file);
        kvp_buf_printf(b, "\">\n");
        if (dep->model->n_warnings) { /* what the model's loader assumed: a green report must show it */
            kvp_buf_printf(b, "    <system-err>");
            for (uint32_t w = 0; w < dep->model->n_warnings; w++) {
                kvp_buf_printf(b, "warning: ");
                kvp_buf_xml(b, dep->model->warnings[w]);
                kvp_buf_printf(b, "\n");
            }
            kvp_buf_printf(b, "</system-err>\n");
        }
        for (; i < end; i++) {
            const struct kvp_check_result *res = &r->results[i];
            char m[48], l[48], note[96], msg[320];
            kvp_buf_printf(b, "    <testcase classname=\"kvplan.");
            kvp_buf_xml(b, dep->name);
            kvp_buf_printf(b, "\" name=\"");
            kvp_buf_xml(b, res->check->test); /* no numbers: editing a limit keeps the test's history */
            kvp_buf_printf(b, "\" file=\"");
            kvp_buf_xml(b, dep->file);
            kvp_buf_printf(b, "\" line=\"%u\"", res->check->line);
            baseline_note(res, si, note, sizeof note);
            snprintf(msg, sizeof msg, "%s: measured %s, want %s %s%s", res->check->id,
                     human(res->check->kind, res->measured, si, m, sizeof m), op(res->check->kind),
                     human(res->check->kind, res->check->limit, si, l, sizeof l), note);
            kvp_buf_printf(b, ">\n      <properties>\n");
            junit_property_u64(b, "context", res->context);
            junit_property_u64(b, "concurrency", res->concurrency);
            if (res->check->workload >= 0) {
                kvp_buf_printf(b, "        <property name=\"workload\" value=\"");
                kvp_buf_xml(b, workload_of(r->plan, res->check)->name);
                kvp_buf_printf(b, "\"/>\n");
            }
            kvp_buf_printf(b, "        <property name=\"measured\" value=\"%.17g\"/>\n", res->measured);
            kvp_buf_printf(b, "        <property name=\"limit\" value=\"%.17g\"/>\n", res->check->limit);
            kvp_buf_printf(b, "        <property name=\"id\" value=\"");
            kvp_buf_xml(b, res->check->id);
            kvp_buf_printf(b, "\"/>\n      </properties>\n");
            if (res->pass && !res->regressed) {
                kvp_buf_printf(b, "      <system-out>");
                kvp_buf_xml(b, msg);
                kvp_buf_printf(b, "</system-out>\n    </testcase>\n");
                continue;
            }
            kvp_buf_printf(b, "      <failure type=\"%s\" message=\"",
                           res->pass ? "regression" : kinds[res->check->kind].name);
            kvp_buf_xml(b, msg);
            kvp_buf_printf(b, "\">");
            kvp_buf_xml(b, msg);
            kvp_buf_printf(b, "\n");
            if (res->derivation)
                kvp_buf_xml(b, res->derivation);
            kvp_buf_printf(b, "</failure>\n    </testcase>\n");
        }
        kvp_buf_printf(b, "  </testsuite>\n");
    }
    kvp_buf_printf(b, "</testsuites>\n");
}

void kvp_plan_render(const struct kvp_plan_report *r, enum kvp_out fmt, bool si, struct kvp_buf *b)
{
    switch (fmt) {
    case KVP_OUT_JSON: render_json(r, b); break;
    case KVP_OUT_JUNIT: render_junit(r, si, b); break;
    default: render_text(r, si, b); break;
    }
}
