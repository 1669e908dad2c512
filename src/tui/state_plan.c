/* state_plan.c -- the TUI's setup as a plan file for `kvplan check`, and back.
 *
 * Written: a `kvplan_plan: 1` document with one deployment holding the same
 * settings `kvplan fit` takes, each printed by settings.h's table
 * (kvp_setting_text), and `assert: {fits: true}`. The file is
 * written to a temporary file in the same directory and renamed over the
 * target, so a crash or a full disk never leaves half a plan behind.
 *
 * Read: the library's plan parser (kvplan/plan.h) loads the file; its first
 * deployment becomes the setup, as the settings that give it
 * (tui_settings_of), so every setting is kept and written back on save.
 *
 * Workloads: those of the plan the first deployment can name are kept
 * (a trace by its absolute path, a synthetic one by its keys, printed by
 * state_sim.c's workload table) and written back under `workloads:`; the
 * simulate view's workload replaces the one it came from, or is added once
 * the view was used, with `max_preemptions` and `min_sustained_rate`
 * asserting what the view shows (the preemptions limit the user's answer
 * when the run had any: an overloaded run's count is not a target). The first deployment's assertions are kept
 * too (but `fits: true`, which every saved plan states, and those the view's
 * replace).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "state.h"
#include "kvplan/settings.h"
#include "kvplan/plan.h"

/* The model as the plan should name it: the catalog name when it is one,
 * else the absolute path it was loaded from. */
static const char *model_ref(const struct tui_state *s, char *buf, size_t n)
{
    const struct kvp_model *m = s->model;
    if ((s->cat && kvp_catalog_find(s->cat, m->name)) || !m->file[0])
        return m->name;
    if (realpath(m->file, buf) && strlen(buf) < n)
        return buf;
    return m->file;
}

void tui_settings_of(const struct kvp_deploy *d, const struct kvp_gpu *gpu, const struct kvp_model *m,
                     struct kvp_settings *out)
{
    struct kvp_deploy def;
    struct kvp_error e = {0};
    char v[KVP_SETTING_VALUE_MAX], dv[KVP_SETTING_VALUE_MAX];

    kvp_deploy_init(&def, d->engine, m);
    def.release = d->release;
    if (gpu)
        def.gpu_memory = gpu->memory_bytes;
    kvp_settings_clear(out);
    for (uint32_t i = 0; i < kvp_settings_count(); i++) {
        const struct kvp_setting *r = kvp_setting_at(i);
        kvp_setting_text(i, d, gpu, v, sizeof v);
        kvp_setting_text(i, &def, gpu, dv, sizeof dv);
        if (!v[0] || (r->type != KVP_SET_ENGINE && r->type != KVP_SET_GPU && strcmp(v, dv) == 0))
            continue;
        if (strcmp(r->key, "gpus") == 0 && kvp_deploy_gpus(d) == d->n_gpus)
            continue; /* dp x tp x pp, the count's default */
        kvp_settings_put(out, r->key, v, &e); /* the table's own text: it parses */
    }
}

/* Whether a saved plan states row i: what the user gave, what differs from
 * the engine's default (of), and the core of a deployment even at its
 * default; the cache as kv_dtype where K and V agree, else as K and V. */
static bool written(const struct tui_state *s, const struct kvp_settings *of, uint32_t i, bool one_cache)
{
    static const char *const core[] = {"engine", "gpu", "gpus", "tp", "pp", "context", "concurrency", "weight_dtype"};
    const char *key = kvp_setting_at(i)->key;
    if (strcmp(key, "kv_dtype") == 0)
        return one_cache;
    if (strcmp(key, "k_dtype") == 0 || strcmp(key, "v_dtype") == 0)
        return !one_cache;
    for (size_t j = 0; j < sizeof core / sizeof core[0]; j++)
        if (strcmp(core[j], key) == 0)
            return true;
    return ((s->set.given | of->given) >> i) & 1u;
}

/* One workload under `workloads:`, each key printed by the workload table. */
static void write_workload(const struct tui_workload *w, FILE *f)
{
    char v[64];
    const char *sep = "";
    fprintf(f, "  %s: {", w->name);
    if (w->trace[0]) {
        fprintf(f, "trace: \"%s\"", w->trace);
        sep = ", ";
    }
    for (uint32_t i = 0; i < KVP_SYNTH_KEYS; i++) {
        /* a trace gives its own requests; its max_queue, like a synthetic one's, only when not the default */
        const struct kvp_synth_key *k = kvp_synth_key_at(i);
        bool queue = !k->synthetic;
        if ((w->trace[0] && !queue) || (queue && w->max_queue_s == KVP_SYNTH_MAX_QUEUE_S) ||
            !kvp_synth_text(&w->synth, w->max_queue_s, k->key, v, sizeof v)[0])
            continue;
        fprintf(f, "%s%s: %s", sep, k->key, v);
        sep = ", ";
    }
    fprintf(f, "}\n");
}

/* Whether the view's workload goes into the plan. */
static bool writes_work(const struct tui_state *s)
{
    return s->work_used || s->work_at >= 0;
}

static void write_workloads(const struct tui_state *s, FILE *f)
{
    if (!s->n_plan_wl && !writes_work(s))
        return;
    fprintf(f, "workloads:\n");
    for (uint32_t i = 0; i < s->n_plan_wl; i++)
        write_workload((int32_t)i == s->work_at ? &s->work : &s->plan_wl[i], f);
    if (s->work_at < 0 && s->work_used)
        write_workload(&s->work, f);
}

/* Whether the view states kind k on its workload: where it has run it on
 * this setup, the preemptions, and the highest sustained rate ('r'). */
static bool view_states(const struct tui_state *s, enum kvp_check_kind k)
{
    if (!writes_work(s) || !s->gpu || s->sim_stale || !s->sim_ok)
        return false;
    return k == KVP_CHECK_MAX_PREEMPTIONS || (k == KVP_CHECK_MIN_SUSTAINED_RATE && s->have_max_rate && s->max_rate > 0);
}

bool tui_plan_asks_limit(const struct tui_state *s)
{
    return view_states(s, KVP_CHECK_MAX_PREEMPTIONS) && s->sim.preemptions > 0;
}

/* Whether the plan's assertion c is written back: not an unnamed `fits`
 * (every saved plan states `fits: true`, under the same id), nor one the
 * view's replace (the same id). */
static bool kept(const struct tui_state *s, const struct tui_check *c)
{
    if (c->name[0] || c->context || c->concurrency)
        return true;
    if (c->kind == KVP_CHECK_FITS)
        return false;
    return !(view_states(s, c->kind) && strcmp(c->workload, s->work.name) == 0);
}

/* An assertion's limit as its kind reads it (plan.c's read_limit). */
static void limit_text(const struct tui_check *c, char *buf, size_t n)
{
    switch (c->kind) {
    case KVP_CHECK_FITS:
        snprintf(buf, n, "%s", c->limit != 0.0 ? "true" : "false");
        break;
    case KVP_CHECK_MAX_PREEMPTIONS:
    case KVP_CHECK_MIN_CONTEXT:
        snprintf(buf, n, "%.0f", c->limit);
        break;
    case KVP_CHECK_MAX_KV_BYTES_PER_TOKEN:
    case KVP_CHECK_MIN_HEADROOM:
        snprintf(buf, n, "%.0fB", c->limit);
        break;
    default:
        snprintf(buf, n, "%.15g", c->limit);
        if (strtod(buf, NULL) != c->limit)
            snprintf(buf, n, "%.17g", c->limit);
        break;
    }
}

static void write_check(const struct tui_check *c, FILE *f)
{
    char v[64];
    limit_text(c, v, sizeof v);
    fprintf(f, "      - %s: %s\n", kvp_check_kind_name(c->kind), v);
    if (c->context)
        fprintf(f, "        context: %" PRIu64 "\n", c->context);
    if (c->concurrency)
        fprintf(f, "        concurrency: %" PRIu64 "\n", c->concurrency);
    if (c->workload[0])
        fprintf(f, "        workload: %s\n", c->workload);
    if (c->name[0])
        fprintf(f, "        name: %s\n", c->name);
}

/* The assertions: that it fits, the plan's kept ones, and the view's. */
static void write_asserts(const struct tui_state *s, FILE *f)
{
    struct tui_check v = {.kind = KVP_CHECK_MAX_PREEMPTIONS};
    uint32_t n = 0;

    for (uint32_t i = 0; i < s->n_plan_checks; i++)
        n += kept(s, &s->plan_checks[i]);
    if (!n && !view_states(s, KVP_CHECK_MAX_PREEMPTIONS)) {
        fprintf(f, "    assert: {fits: true}\n");
        return;
    }
    fprintf(f, "    assert:\n");
    fprintf(f, "      - fits: true\n");
    for (uint32_t i = 0; i < s->n_plan_checks; i++)
        if (kept(s, &s->plan_checks[i]))
            write_check(&s->plan_checks[i], f);
    snprintf(v.workload, sizeof v.workload, "%s", s->work.name);
    if (view_states(s, KVP_CHECK_MAX_PREEMPTIONS) && !(s->preempt_asked && s->preempt_omit)) {
        v.limit = (double)(s->preempt_asked ? s->preempt_limit : s->sim.preemptions);
        write_check(&v, f);
    }
    if (view_states(s, KVP_CHECK_MIN_SUSTAINED_RATE)) { /* three digits, rounded down: it still holds */
        double unit = pow(10, floor(log10(s->max_rate)) - 2);
        v.kind = KVP_CHECK_MIN_SUSTAINED_RATE;
        v.limit = floor(s->max_rate / unit) * unit;
        write_check(&v, f);
    }
}

/* The deployment as plan keys, each printed by settings.h's table. */
static void write_plan(const struct tui_state *s, FILE *f)
{
    const struct kvp_deploy *d = &s->d;
    struct kvp_settings of;
    char path[4096], v[KVP_SETTING_VALUE_MAX];
    bool one_cache = kvp_setting_text((uint32_t)kvp_setting_find("kv_dtype"), d, s->gpu, v, sizeof v)[0] != '\0';

    tui_settings_of(d, s->gpu, s->model, &of);
    fprintf(f, "# written by kvplan tui; check it with: kvplan check FILE\n");
    fprintf(f, "kvplan_plan: 1\n");
    write_workloads(s, f);
    fprintf(f, "deployments:\n");
    fprintf(f, "  - name: \"%s-%s\"\n", s->model->name, s->gpu ? s->gpu->id : "gpu");
    fprintf(f, "    model: \"%s\"\n", model_ref(s, path, sizeof path));
    for (uint32_t i = 0; i < kvp_settings_count(); i++) {
        kvp_setting_text(i, d, s->gpu, v, sizeof v);
        if (!v[0] || !written(s, &of, i, one_cache))
            continue;
        if (strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@,+-") == strlen(v))
            fprintf(f, "    %s: %s\n", kvp_setting_at(i)->key, v);
        else /* int4:group=128 and the like: quoted */
            fprintf(f, "    %s: \"%s\"\n", kvp_setting_at(i)->key, v);
    }
    if (d->util <= 0)
        fprintf(f, "    # util: the release's default%s\n", s->ok ? "" : " (not computed)");
    write_asserts(s, f);
}

enum kvp_status tui_plan_save(const struct tui_state *s, const char *path, struct kvp_error *err)
{
    const char *slash = strrchr(path, '/');
    struct kvp_buf b = {0};
    char *text = NULL;
    size_t len = 0;
    FILE *f;
    enum kvp_status st;

    if (!path[0])
        return kvp_fail(err, KVP_ERR_USAGE, "no file name given for the plan");
    if (slash && slash[1] == '\0')
        return kvp_fail(err, KVP_ERR_USAGE, "'%s' is a directory, not a plan file name", path);
    if (!(f = open_memstream(&text, &len)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory writing the plan");
    write_plan(s, f);
    if (fclose(f) != 0) {
        free(text);
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory writing the plan");
    }
    b.data = text;
    b.len = b.cap = len;
    st = kvp_buf_save(&b, path, err); /* whole or not at all */
    free(text);
    return st;
}

/* The workloads of p its first deployment can name (those of its file) into
 * s->plan_wl; the first synthetic one becomes the view's. */
static enum kvp_status keep_workloads(struct tui_state *s, const struct kvp_plan *p, struct kvp_error *err)
{
    struct tui_workload *kept = p->n_workloads ? calloc(p->n_workloads, sizeof *kept) : NULL;
    uint32_t n = 0;

    if (p->n_workloads && !kept)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    s->work_at = -1;
    for (uint32_t i = 0; i < p->n_workloads; i++) {
        const struct kvp_plan_workload *w = &p->workloads[i];
        struct tui_workload *k = &kept[n];
        if (strcmp(w->file, p->deps[0].file) != 0)
            continue;
        snprintf(k->name, sizeof k->name, "%s", w->name);
        k->max_queue_s = w->max_queue_s;
        k->synth = w->synth;
        if (w->is_trace) { /* absolute, so the plan can be saved anywhere */
            char abs[4096];
            snprintf(k->trace, sizeof k->trace, "%s",
                     realpath(w->trace.name, abs) && strlen(abs) < sizeof k->trace ? abs : w->trace.name);
        }
        if (!w->is_trace && s->work_at < 0) {
            s->work_at = (int32_t)n;
            s->work = *k;
        }
        n++;
    }
    free(s->plan_wl);
    s->plan_wl = kept;
    s->n_plan_wl = n;
    if (s->work_at < 0)
        tui_wl_default(s, &s->work); /* a name none of the plan's has */
    s->sim_stale = true;
    return KVP_OK;
}

/* The first deployment's assertions into s->plan_checks, as written. */
static enum kvp_status keep_checks(struct tui_state *s, const struct kvp_plan *p, struct kvp_error *err)
{
    const struct kvp_plan_deployment *dep = &p->deps[0];
    struct tui_check *c = dep->n_checks ? calloc(dep->n_checks, sizeof *c) : NULL;

    if (dep->n_checks && !c)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < dep->n_checks; i++) {
        const struct kvp_plan_check *k = &dep->checks[i];
        c[i].kind = k->kind;
        c[i].limit = k->limit;
        c[i].context = k->context;
        c[i].concurrency = k->concurrency;
        if (k->workload >= 0)
            snprintf(c[i].workload, sizeof c[i].workload, "%s", p->workloads[k->workload].name);
        if (k->named) /* the id is "deployment/name" */
            snprintf(c[i].name, sizeof c[i].name, "%s", k->id + strlen(dep->name) + 1);
    }
    free(s->plan_checks);
    s->plan_checks = c;
    s->n_plan_checks = dep->n_checks;
    return KVP_OK;
}

enum kvp_status tui_plan_load(struct tui_state *s, const char *path, struct kvp_error *err)
{
    struct kvp_plan plan = {0};
    struct kvp_model *m;
    enum kvp_status st;

    if ((st = kvp_plan_load(&plan, path, s->cat, s->gpus, err)) != KVP_OK)
        goto out;
    if (plan.n == 0) {
        st = kvp_fail_at(err, KVP_ERR_SCHEMA, path, 0, 0, "the plan has no deployments");
        goto out;
    }
    if (!(m = malloc(sizeof *m))) {
        st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the plan owns its models; the state keeps a copy of the first (a model is plain data) */
    memcpy(m, plan.deps[0].model, sizeof *m);
    kvp_model_free(s->model);
    s->model = m;
    /* the deployment as the settings that give it, so edits go on from them */
    tui_settings_of(&plan.deps[0].d, plan.deps[0].gpu, m, &s->set);
    if ((st = keep_workloads(s, &plan, err)) != KVP_OK || (st = keep_checks(s, &plan, err)) != KVP_OK)
        goto out;
    if (plan.n > 1)
        snprintf(s->status, sizeof s->status, "opened %s: the first of its %u deployments, '%s'", path, plan.n,
                 plan.deps[0].name);
    snprintf(s->plan_path, sizeof s->plan_path, "%s", path);
    st = KVP_OK;
out:
    kvp_plan_release(&plan);
    return st;
}
