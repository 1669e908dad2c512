/* state.c -- the TUI's state: keys in, setup changed, figures recomputed.
 *
 * No curses here (see state.h): every figure comes from libkvplan with the
 * same inputs `kvplan fit` would pass for the same settings, so a test can
 * drive keys and compare against the library directly.
 */
#include "state.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kvplan/explain.h"
#include "kvplan/num.h"
#include "kvplan/settings.h"

/* Limits on what arrows and typing may set; beyond them no engine runs. */
#define TUI_MAX_GPUS 4096u
#define TUI_MAX_BLOCK 65536u
#define TUI_MAX_CONTEXT (1ull << 40) /* tokens */
#define TUI_MAX_BATCH (1ull << 32)   /* requests */

/* Choices the arrows step through; typing accepts any format string. */
static const char *const weight_choices[] = {"stored", "bf16", "f16", "fp8_e4m3", "int8", "int4:group=128", "mxfp4", "nvfp4",
                                              "q8_0", "q4_k_m", "f32"};
static const char *const kv_choices[] = {"bf16", "f16", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "q8_0", "q4_0", "f32"};

static const char *const labels[TUI_F_COUNT] = {
    [TUI_F_MODEL] = "model",   [TUI_F_GPU] = "GPU",         [TUI_F_GPUS] = "GPUs",
    [TUI_F_TP] = "TP",         [TUI_F_ENGINE] = "engine",   [TUI_F_UTIL] = "mem fraction",
    [TUI_F_WDTYPE] = "weights", [TUI_F_KDTYPE] = "K cache", [TUI_F_VDTYPE] = "V cache",
    [TUI_F_CONTEXT] = "context", [TUI_F_BATCH] = "batch",   [TUI_F_BLOCK] = "block size",
};

const char *tui_field_label(enum tui_field f)
{
    return f < TUI_F_COUNT ? labels[f] : "?";
}

static void set_status(struct tui_state *s, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_status(struct tui_state *s, bool error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->status, sizeof s->status, fmt, ap);
    va_end(ap);
    s->status_error = error;
}

/* ---- the setup ---- */

/* Bring the deploy in line with the fields: the GPU's memory (a plan may
 * give only a memory size, no GPU), and tp x pp within the GPU count
 * (llama.cpp splits layers over the GPUs instead). */
static void normalize(struct tui_state *s)
{
    struct kvp_deploy *d = &s->d;
    if (s->n_gpus == 0)
        s->n_gpus = 1;
    if (s->gpu)
        d->gpu_memory = s->gpu->memory_bytes;
    if (d->engine == KVP_ENGINE_LLAMACPP) {
        d->tp = d->pp = 1;
    } else {
        if (d->tp == 0)
            d->tp = 1;
        if (d->pp == 0)
            d->pp = 1;
        if (d->tp > s->n_gpus)
            s->n_gpus = d->tp;
        if ((uint64_t)d->tp * d->pp > s->n_gpus)
            d->pp = s->n_gpus / d->tp;
    }
    d->n_gpus = s->n_gpus;
    if (d->concurrency == 0)
        d->concurrency = 1;
}

/* The user set tp: the GPUs it does not take become pipeline stages. */
static void split_gpus(struct tui_state *s)
{
    if (s->d.tp > s->n_gpus)
        s->n_gpus = s->d.tp;
    s->d.pp = s->d.tp ? s->n_gpus / s->d.tp : 1;
}

/* The user set the GPU count: more GPUs are tensor parallel, as engines take
 * them (--tensor-parallel-size); pipeline stages stay as they were. */
static void grow_gpus(struct tui_state *s)
{
    s->d.tp = s->n_gpus / (s->d.pp ? s->d.pp : 1);
    if (s->d.tp == 0) {
        s->d.tp = s->n_gpus;
        s->d.pp = 1;
    }
    s->n_gpus = s->d.tp * s->d.pp;
    set_status(s, false, "%u GPUs: tp %u x pp %u (the TP field sets the split)", s->n_gpus, s->d.tp, s->d.pp);
}

/* Engines with one cache dtype for K and V (vLLM, SGLang, TRT-LLM --kv-cache-dtype):
 * an edit of K or V sets both. llama.cpp (-ctk, -ctv) and the bare formula take two. */
static bool one_cache_dtype(enum kvp_engine_id e)
{
    return e == KVP_ENGINE_VLLM || e == KVP_ENGINE_SGLANG || e == KVP_ENGINE_TRTLLM;
}

/* Switch to engine `name` (engine[@release]), keeping every setting the new
 * engine takes (settings.h re-reads them); a cache format it cannot store
 * goes back to its default, and the status line says so. */
static bool set_engine(struct tui_state *s, const char *name)
{
    struct kvp_error e = {0};
    struct kvp_fit f;
    char was[64];
    kvp_format_name(&s->d.k, was, sizeof was);
    if (kvp_setting_apply((uint32_t)kvp_setting_find("engine"), name, s->model, s->gpus, &s->d, &s->gpu, &e) != KVP_OK) {
        set_status(s, true, "%s", e.msg);
        return false;
    }
    if (kvp_fit_compute(s->model, &s->d, &f, &e) == KVP_ERR_UNSUPPORTED && strstr(e.msg, "cannot store")) {
        struct kvp_deploy def;
        char now[64];
        kvp_deploy_init(&def, s->d.engine, s->model);
        s->d.k = def.k;
        s->d.v = def.v;
        set_status(s, false, "%s takes no %s cache: K and V are now %s", kvp_engine_info(s->d.engine)->name, was,
                   kvp_format_name(&s->d.k, now, sizeof now));
    }
    return true;
}

void tui_set_model(struct tui_state *s, struct kvp_model *m)
{
    struct kvp_deploy old = s->d;
    bool first = s->model == NULL;
    kvp_model_free(s->model);
    s->model = m;
    kvp_deploy_init(&s->d, first ? KVP_ENGINE_VLLM : old.engine, m);
    if (!first) {
        s->d.release = old.release;
        s->d.tp = old.tp;
        s->d.pp = old.pp;
        s->d.gpu_memory = old.gpu_memory;
        s->d.activation_memory = old.activation_memory;
        s->d.non_torch_memory = old.non_torch_memory;
        s->d.util = old.util;
        s->d.block_size = old.block_size;
        s->d.concurrency = old.concurrency;
        /* keep the user's context unless the new model cannot reach it */
        s->d.context = m->max_context && old.context > m->max_context ? m->max_context : old.context;
    }
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return kvp_mul(a, b, &r) ? r : UINT64_MAX;
}

static void compute_kinds(struct tui_state *s)
{
    s->n_kinds = 0;
    for (uint32_t i = 0; i < s->kv.n_specs; i++) {
        const struct kvp_spec_bytes *sb = &s->kv.spec[i];
        enum kvp_layer_kind k = s->model->specs[i].kind;
        uint64_t per = sb->k_seq, bytes;
        struct tui_kind_row *r = NULL;
        if (!sb->layers)
            continue;
        for (uint32_t j = 0; j < s->n_kinds; j++)
            if (s->kinds[j].kind == k)
                r = &s->kinds[j];
        if (!r) {
            r = &s->kinds[s->n_kinds++];
            memset(r, 0, sizeof *r);
            r->kind = k;
        }
        per = kvp_add(per, sb->v_seq, &per) && kvp_add(per, sb->state_seq, &per) ? per : UINT64_MAX;
        bytes = sat_mul(sat_mul(per, sb->layers), s->d.concurrency);
        r->layers += sb->layers;
        if (sb->tokens > r->tokens)
            r->tokens = sb->tokens;
        r->bytes = kvp_add(r->bytes, bytes, &r->bytes) ? r->bytes : UINT64_MAX;
    }
}

/* KV required per GPU at evenly spaced contexts up to the larger of the
 * chosen context and the model's maximum: a straight line for full
 * attention, flattening where windows cap it. */
static void compute_chart(struct tui_state *s)
{
    uint64_t top = s->d.context > s->model->max_context ? s->d.context : s->model->max_context;
    struct kvp_deploy d = s->d;
    struct kvp_fit f;
    struct kvp_error e = {0};

    s->n_chart = 0;
    /* the weights do not change along the chart; giving them saves recounting
     * every expert at each point (about 0.4 ms for DeepSeek-V3). llama.cpp
     * reads weights_memory differently, so it recounts. */
    if (d.engine != KVP_ENGINE_LLAMACPP && !d.weights_memory)
        d.weights_memory = s->fit.weights_bytes;
    if (top < TUI_CHART_POINTS)
        top = TUI_CHART_POINTS;
    for (uint32_t i = 0; i < TUI_CHART_POINTS; i++) {
        d.context = top / TUI_CHART_POINTS * (i + 1);
        s->chart_context[i] = d.context;
        s->chart_kv[i] = kvp_fit_compute(s->model, &d, &f, &e) == KVP_OK ? f.kv_bytes_required : 0;
        s->n_chart++;
    }
}

void tui_recompute(struct tui_state *s)
{
    struct kvp_kv_query q;
    enum kvp_status st;

    normalize(s);
    memset(&s->err, 0, sizeof s->err);
    s->have_roofline = false;
    s->ok = false;
    s->n_kinds = s->n_chart = 0;
    if (!s->gpu && !s->d.gpu_memory && !s->d.kv_memory) {
        kvp_fail(&s->err, KVP_ERR_NOTFOUND, "no GPU chosen (the GPU catalog is empty)");
        return;
    }
    if (kvp_fit_compute(s->model, &s->d, &s->fit, &s->err) != KVP_OK)
        return;
    q = (struct kvp_kv_query){.context = s->d.context, .batch = s->d.concurrency, .k = s->d.k, .v = s->d.v};
    if (kvp_kv_compute(s->model, &q, &s->kv, &s->err) != KVP_OK)
        return;
    compute_kinds(s);
    if (s->gpu) { /* the roofline needs the GPU's bandwidth and FLOP/s */
        double peak = kvp_gpu_peak_flops(s->gpu, kvp_wstore_code_dtype(&s->d.w, s->model));
        st = kvp_roofline(s->model, &s->d, s->d.concurrency, (double)s->gpu->bandwidth_bytes_per_s, peak, &s->roof,
                          &s->err);
        if (st != KVP_OK)
            return;
        s->have_roofline = true;
    }
    compute_chart(s);
    s->ok = true;
}

double tui_bench(struct tui_state *s, uint32_t n)
{
    struct timespec a, b;
    if (n == 0)
        return 0.0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (uint32_t i = 0; i < n; i++)
        tui_recompute(s);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9) / n;
}

/* ---- lifecycle ---- */

static bool is_plan_file(const char *path)
{
    size_t n = strlen(path);
    char line[256];
    FILE *f;
    bool yes = false;

    if (!((n > 5 && strcmp(path + n - 5, ".yaml") == 0) || (n > 4 && strcmp(path + n - 4, ".yml") == 0)))
        return false;
    if (!(f = fopen(path, "r")))
        return false;
    for (int i = 0; i < 50 && fgets(line, sizeof line, f); i++)
        if (strncmp(line, "kvplan_plan:", 12) == 0) {
            yes = true;
            break;
        }
    fclose(f);
    return yes;
}

enum kvp_status tui_init(struct tui_state **out, const struct kvp_catalog *cat, const struct kvp_gpu_catalog *gpus,
                         const char *arg, struct kvp_error *err)
{
    struct tui_state *s;
    struct kvp_model *m = NULL;
    enum kvp_status st;

    *out = NULL;
    if (!(s = calloc(1, sizeof *s)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    s->cat = cat;
    s->gpus = gpus;
    s->gpu = gpus && gpus->n ? &gpus->gpus[0] : NULL;
    s->n_gpus = 1;
    if (arg && is_plan_file(arg)) {
        if ((st = tui_plan_load(s, arg, err)) != KVP_OK)
            goto fail;
        if (!s->status[0])
            set_status(s, false, "opened %s", arg);
    } else {
        if (!arg && (!cat || cat->n == 0)) {
            st = kvp_fail(err, KVP_ERR_NOTFOUND, "no model given and no built-in models found");
            goto fail;
        }
        if ((st = kvp_model_open(cat, arg ? arg : cat->models[0]->name, &m, err)) != KVP_OK)
            goto fail;
        tui_set_model(s, m);
        s->d.concurrency = 1;
        set_status(s, false, "press ? for help");
    }
    tui_recompute(s);
    *out = s;
    return KVP_OK;
fail:
    tui_free(s);
    return st;
}

void tui_free(struct tui_state *s)
{
    if (!s)
        return;
    kvp_model_free(s->model);
    free(s);
}

/* ---- showing values ---- */

const char *tui_field_value(const struct tui_state *s, enum tui_field f, char *buf, uint32_t n)
{
    const struct kvp_deploy *d = &s->d;
    char g[32];

    buf[0] = '\0';
    switch (f) {
    case TUI_F_MODEL:
        snprintf(buf, n, "%s", s->model->name);
        break;
    case TUI_F_GPU:
        if (s->gpu)
            snprintf(buf, n, "%s", s->gpu->id);
        else
            snprintf(buf, n, "custom, %s", kvp_format_bytes(s->d.gpu_memory, false, g, sizeof g));
        break;
    case TUI_F_GPUS:
        snprintf(buf, n, "%u", s->n_gpus);
        break;
    case TUI_F_TP:
        if (d->engine == KVP_ENGINE_LLAMACPP)
            snprintf(buf, n, "1 (layers split)");
        else
            snprintf(buf, n, "%u (pp %u)", d->tp, d->pp);
        break;
    case TUI_F_ENGINE:
        if (d->release == UINT32_MAX)
            snprintf(buf, n, "%s", kvp_engine_info(d->engine)->name);
        else
            snprintf(buf, n, "%s@%s", kvp_engine_info(d->engine)->name, kvp_deploy_release(d)->version);
        break;
    case TUI_F_UTIL:
        if (d->util > 0)
            snprintf(buf, n, "%.3f", d->util);
        else if (s->ok)
            snprintf(buf, n, "%.3f default", s->fit.util);
        else
            snprintf(buf, n, "default");
        break;
    case TUI_F_WDTYPE: {
        struct kvp_weights w;
        struct kvp_error e = {0};
        kvp_wstore_name(&d->w, buf, n);
        /* as stored: the stored forms' types, most bytes first ("stored mxfp4+bf16") */
        if (d->w.kind == KVP_WSTORE_CHECKPOINT && kvp_weights_compute(s->model, &d->w, &w, &e) == KVP_OK)
            for (uint32_t i = 0; i < w.n_parts && strlen(buf) + 2 < n; i++) {
                const char *p = w.parts[i].name; /* the type alone: "fp8" of fp8_e4m3:block=128x128 */
                int len = strncmp(p, "fp8_", 4) == 0 ? 3 : (int)strcspn(p, ":");
                snprintf(buf + strlen(buf), n - strlen(buf), "%s%.*s", i ? "+" : " ", len, p);
            }
        break;
    }
    case TUI_F_KDTYPE:
        kvp_format_name(&d->k, buf, n);
        break;
    case TUI_F_VDTYPE:
        kvp_format_name(&d->v, buf, n);
        break;
    case TUI_F_CONTEXT:
        snprintf(buf, n, "%s", kvp_format_grouped(d->context, g, sizeof g));
        break;
    case TUI_F_BATCH:
        snprintf(buf, n, "%s", kvp_format_grouped(d->concurrency, g, sizeof g));
        break;
    case TUI_F_BLOCK:
        if (d->block_size)
            snprintf(buf, n, "%u", d->block_size);
        else if (s->ok)
            snprintf(buf, n, "%u default", s->fit.block_size);
        else
            snprintf(buf, n, "default");
        break;
    default:
        break;
    }
    return buf;
}

void tui_bar_of(const struct tui_state *s, uint32_t i, struct tui_bar *b)
{
    const struct kvp_fit *f = &s->fit;
    uint64_t used;

    memset(b, 0, sizeof *b);
    b->total = s->d.gpu_memory;
    if (!s->ok)
        return;
    b->weights = f->weights_bytes;
    b->kv = f->kv_bytes_required;
    if (s->d.engine == KVP_ENGINE_LLAMACPP && i < f->n_devices)
        b->kv = f->device[i].buffer_bytes + f->device[i].rs_bytes;
    b->free = f->free_bytes;
    /* whatever is neither weights, KV nor free is held back: activations,
     * non-torch memory and what lies outside the engine's memory fraction */
    if (kvp_add(b->weights, b->kv, &used) && kvp_add(used, b->free, &used) && used <= b->total)
        b->reserve = b->total - used;
    else
        b->reserve = 0;
    if (!f->fits)
        b->over = f->short_bytes;
}

void tui_explain_text(const struct tui_state *s, struct kvp_buf *b)
{
    struct kvp_kv_query q;
    char t[KVP_ERROR_TEXT_MAX];

    if (!s->ok) {
        kvp_buf_printf(b, "cannot compute this setup:\n%s\n", kvp_error_text(&s->err, t, sizeof t));
        return;
    }
    if (s->explain == TUI_EXPLAIN_FIT) {
        kvp_explain_fit(s->model, &s->d, &s->fit, false, b);
    } else {
        q = (struct kvp_kv_query){.context = s->d.context, .batch = s->d.concurrency, .k = s->d.k, .v = s->d.v};
        kvp_explain_kv(s->model, &q, &s->kv, false, b);
    }
}

/* ---- pick lists ---- */

static bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (n == 0)
        return true;
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return true;
    return false;
}

static bool gpu_matches(const struct kvp_gpu *g, const char *q)
{
    if (contains_ci(g->id, q) || contains_ci(g->name, q))
        return true;
    for (uint32_t a = 0; a < g->n_aliases; a++)
        if (contains_ci(g->aliases[a], q))
            return true;
    return false;
}

static void refilter(struct tui_state *s)
{
    s->n_pick = 0;
    if (s->mode == TUI_MODE_PICK_MODEL) {
        for (uint32_t i = 0; s->cat && i < s->cat->n && s->n_pick < TUI_PICK_MAX; i++) {
            const struct kvp_model *m = s->cat->models[i];
            if (contains_ci(m->name, s->input) || contains_ci(m->hf_id, s->input))
                s->pick[s->n_pick++] = i;
        }
    } else if (s->mode == TUI_MODE_PICK_GPU) {
        for (uint32_t i = 0; s->gpus && i < s->gpus->n && s->n_pick < TUI_PICK_MAX; i++)
            if (gpu_matches(&s->gpus->gpus[i], s->input))
                s->pick[s->n_pick++] = i;
    }
    if (s->pick_sel >= s->n_pick)
        s->pick_sel = s->n_pick ? s->n_pick - 1 : 0;
}

const char *tui_pick_name(const struct tui_state *s, uint32_t i)
{
    if (i >= s->n_pick)
        return "";
    if (s->mode == TUI_MODE_PICK_MODEL)
        return s->cat->models[s->pick[i]]->name;
    return s->gpus->gpus[s->pick[i]].id;
}

static void open_picker(struct tui_state *s, enum tui_mode mode)
{
    s->mode = mode;
    s->input[0] = '\0';
    s->input_len = 0;
    s->pick_sel = 0;
    refilter(s);
    /* start on the current choice */
    for (uint32_t i = 0; i < s->n_pick; i++)
        if ((mode == TUI_MODE_PICK_MODEL && strcmp(s->cat->models[s->pick[i]]->name, s->model->name) == 0) ||
            (mode == TUI_MODE_PICK_GPU && &s->gpus->gpus[s->pick[i]] == s->gpu))
            s->pick_sel = i;
}

static void pick_commit(struct tui_state *s)
{
    struct kvp_error e = {0};
    char t[KVP_ERROR_TEXT_MAX];

    if (s->mode == TUI_MODE_PICK_MODEL) {
        struct kvp_model *m = NULL;
        /* a typed path (or exact name) wins over the filtered list when it resolves */
        const char *want = s->n_pick ? s->cat->models[s->pick[s->pick_sel]]->name : s->input;
        if (s->n_pick && s->input_len && strchr(s->input, '/'))
            want = s->input;
        if (!*want) {
            set_status(s, true, "no model matches");
        } else if (kvp_model_open(s->cat, want, &m, &e) != KVP_OK) {
            set_status(s, true, "%s", kvp_error_text(&e, t, sizeof t));
        } else {
            tui_set_model(s, m);
            set_status(s, false, "model %s", m->name);
        }
    } else {
        const struct kvp_gpu *g = NULL;
        if (s->n_pick)
            g = &s->gpus->gpus[s->pick[s->pick_sel]];
        else if (s->gpus && kvp_gpu_find(s->gpus, s->input, &g, &e) != KVP_OK)
            g = NULL;
        if (g) {
            s->gpu = g;
            set_status(s, false, "GPU %s", g->id);
        } else {
            set_status(s, true, "%s", e.msg[0] ? e.msg : "no GPU matches");
        }
    }
    s->mode = TUI_MODE_MAIN;
}

/* ---- changing fields ---- */

/* The choice after (dir > 0) or before `cur` in a list of canonical names;
 * from a name not in the list, the first or the last. */
static const char *step_choice(const char *const *choices, size_t n, const char *cur, int dir)
{
    int i;
    for (i = 0; i < (int)n && strcmp(choices[i], cur) != 0; i++)
        ;
    if (i == (int)n)
        i = dir > 0 ? -1 : 0;
    return choices[((size_t)(i + dir) + n) % n];
}

static void step_format(struct kvp_format *f, const char *const *choices, size_t n, int dir)
{
    char cur[64];
    struct kvp_error e = {0};
    kvp_format_parse(step_choice(choices, n, kvp_format_name(f, cur, sizeof cur), dir), f, &e);
}

static void step_wstore(struct tui_state *s, const char *const *choices, size_t n, int dir)
{
    struct kvp_deploy *d = &s->d;
    char cur[64];
    struct kvp_error e = {0};
    kvp_wstore_parse(step_choice(choices, n, kvp_wstore_name(&d->w, cur, sizeof cur), dir),
                     d->engine == KVP_ENGINE_LLAMACPP || s->model->arch[0], &d->w, &e);
}

static uint64_t step_u64(uint64_t v, int dir, bool add, uint64_t lo, uint64_t hi)
{
    if (add)
        v = dir > 0 ? (v < hi ? v + 1 : hi) : (v > lo ? v - 1 : lo);
    else
        v = dir > 0 ? (v <= hi / 2 ? v * 2 : hi) : (v / 2 >= lo ? v / 2 : lo);
    return v;
}

/* dir: +1 / -1; add: step by one (+/-) instead of doubling (arrows). */
static void adjust(struct tui_state *s, int dir, bool add)
{
    struct kvp_deploy *d = &s->d;
    switch (s->field) {
    case TUI_F_MODEL:
        if (s->cat && s->cat->n) {
            uint32_t i = 0;
            struct kvp_model *m = NULL;
            struct kvp_error e = {0};
            while (i < s->cat->n && strcmp(s->cat->models[i]->name, s->model->name) != 0)
                i++;
            i = i == s->cat->n ? 0 : (uint32_t)((i + s->cat->n + (uint32_t)(dir > 0 ? 1 : s->cat->n - 1)) % s->cat->n);
            if (kvp_model_open(s->cat, s->cat->models[i]->name, &m, &e) == KVP_OK)
                tui_set_model(s, m);
        }
        break;
    case TUI_F_GPU:
        if (s->gpus && s->gpus->n) {
            uint32_t i = s->gpu ? (uint32_t)(s->gpu - s->gpus->gpus) : 0;
            i = (i + s->gpus->n + (dir > 0 ? 1 : s->gpus->n - 1)) % s->gpus->n;
            s->gpu = &s->gpus->gpus[i];
        }
        break;
    case TUI_F_GPUS:
        s->n_gpus = (uint32_t)step_u64(s->n_gpus, dir, add, 1, TUI_MAX_GPUS);
        grow_gpus(s);
        break;
    case TUI_F_TP:
        d->tp = (uint32_t)step_u64(d->tp, dir, add, 1, TUI_MAX_GPUS);
        split_gpus(s);
        break;
    case TUI_F_ENGINE:
        set_engine(s, kvp_engine_info((enum kvp_engine_id)(((int)d->engine + dir + KVP_ENGINE_COUNT) %
                                                           KVP_ENGINE_COUNT))->name);
        break;
    case TUI_F_UTIL: {
        double u = d->util > 0 ? d->util : (s->ok ? s->fit.util : 0.9);
        u += dir * 0.01;
        if (u < 0.05)
            u = 0.05;
        if (u > 1.0)
            u = 1.0;
        d->util = (double)(long)(u * 1000 + 0.5) / 1000; /* three decimals, as shown */
        break;
    }
    case TUI_F_WDTYPE:
        step_wstore(s, weight_choices, sizeof weight_choices / sizeof *weight_choices, dir);
        break;
    case TUI_F_KDTYPE:
    case TUI_F_VDTYPE: {
        struct kvp_format *f = s->field == TUI_F_KDTYPE ? &d->k : &d->v;
        step_format(f, kv_choices, sizeof kv_choices / sizeof *kv_choices, dir);
        if (one_cache_dtype(d->engine)) /* one --kv-cache-dtype for both */
            d->k = d->v = *f;
        break;
    }
    case TUI_F_CONTEXT:
        if (add)
            d->context = dir > 0 ? (d->context + 1024 <= TUI_MAX_CONTEXT ? d->context + 1024 : TUI_MAX_CONTEXT)
                                 : (d->context > 1024 ? d->context - 1024 : 1);
        else
            d->context = step_u64(d->context, dir, false, 1, TUI_MAX_CONTEXT);
        break;
    case TUI_F_BATCH:
        d->concurrency = step_u64(d->concurrency, dir, add, 1, TUI_MAX_BATCH);
        break;
    case TUI_F_BLOCK: {
        uint64_t b = d->block_size ? d->block_size : (s->ok ? s->fit.block_size : 16);
        d->block_size = (uint32_t)step_u64(b, dir, add, 1, TUI_MAX_BLOCK);
        break;
    }
    default:
        break;
    }
}

/* A typed value for the selected field; false (and a status) if bad. */
static bool commit_edit(struct tui_state *s)
{
    struct kvp_deploy *d = &s->d;
    struct kvp_error e = {0};
    struct kvp_format f;
    uint64_t v = 0;
    const char *in = s->input;
    const char *what = labels[s->field];

    switch (s->field) {
    case TUI_F_GPUS:
    case TUI_F_TP:
    case TUI_F_CONTEXT:
    case TUI_F_BATCH:
    case TUI_F_BLOCK: {
        static const uint64_t hi[TUI_F_COUNT] = {[TUI_F_GPUS] = TUI_MAX_GPUS, [TUI_F_TP] = TUI_MAX_GPUS,
                                                [TUI_F_CONTEXT] = TUI_MAX_CONTEXT, [TUI_F_BATCH] = TUI_MAX_BATCH,
                                                [TUI_F_BLOCK] = TUI_MAX_BLOCK};
        if (s->field == TUI_F_BLOCK && (strcmp(in, "") == 0 || strcmp(in, "default") == 0)) {
            d->block_size = 0;
            return true;
        }
        if (kvp_parse_count(in, &v, &e) != KVP_OK) {
            set_status(s, true, "%s: %s", what, e.msg);
            return false;
        }
        if (v < 1 || v > hi[s->field]) {
            set_status(s, true, "%s must be between 1 and %llu (got '%s')", what, (unsigned long long)hi[s->field], in);
            return false;
        }
        if (s->field == TUI_F_GPUS) {
            s->n_gpus = (uint32_t)v;
            grow_gpus(s);
        } else if (s->field == TUI_F_TP) {
            d->tp = (uint32_t)v;
            split_gpus(s);
        } else if (s->field == TUI_F_CONTEXT) {
            d->context = v;
        } else if (s->field == TUI_F_BATCH) {
            d->concurrency = v;
        } else {
            d->block_size = (uint32_t)v;
        }
        return true;
    }
    case TUI_F_UTIL: {
        char *end;
        double u;
        if (strcmp(in, "") == 0 || strcmp(in, "default") == 0) {
            d->util = 0;
            return true;
        }
        u = strtod(in, &end);
        if (end == in || *end || !(u > 0 && u <= 1)) {
            set_status(s, true, "mem fraction must be a number in (0, 1] (got '%s')", in);
            return false;
        }
        d->util = u;
        return true;
    }
    case TUI_F_ENGINE:
        return set_engine(s, in);
    case TUI_F_WDTYPE:
        if (kvp_wstore_parse(in, d->engine == KVP_ENGINE_LLAMACPP || s->model->arch[0], &d->w, &e) != KVP_OK) {
            set_status(s, true, "%s: %s", what, e.msg);
            return false;
        }
        return true;
    case TUI_F_KDTYPE:
    case TUI_F_VDTYPE:
        if (kvp_format_parse(in, &f, &e) != KVP_OK) {
            set_status(s, true, "%s: %s", what, e.msg);
            return false;
        }
        if (one_cache_dtype(d->engine)) /* one --kv-cache-dtype for both */
            d->k = d->v = f;
        else
            *(s->field == TUI_F_KDTYPE ? &d->k : &d->v) = f;
        return true;
    default:
        return false;
    }
}

static bool numeric_field(enum tui_field f)
{
    return f == TUI_F_GPUS || f == TUI_F_TP || f == TUI_F_UTIL || f == TUI_F_CONTEXT || f == TUI_F_BATCH ||
           f == TUI_F_BLOCK;
}

static void input_clear(struct tui_state *s)
{
    s->input[0] = '\0';
    s->input_len = 0;
}

static void input_add(struct tui_state *s, int key)
{
    if (s->input_len + 1 < sizeof s->input) {
        s->input[s->input_len++] = (char)key;
        s->input[s->input_len] = '\0';
    }
}

static void input_back(struct tui_state *s)
{
    if (s->input_len)
        s->input[--s->input_len] = '\0';
}

static void default_plan_path(struct tui_state *s)
{
    if (s->plan_path[0])
        snprintf(s->input, sizeof s->input, "%s", s->plan_path);
    else
        snprintf(s->input, sizeof s->input, "%s.plan.yaml", s->model->name);
    s->input_len = (uint32_t)strlen(s->input);
}

/* After a change: recompute and say whether it fits. */
static enum tui_result changed(struct tui_state *s)
{
    char g[32];
    tui_recompute(s);
    if (!s->ok)
        set_status(s, true, "%s", s->err.msg);
    else if (s->fit.fits)
        set_status(s, false, "fits: %.2f requests of %s tokens", s->fit.max_concurrency,
                   kvp_format_grouped(s->d.context, g, sizeof g));
    else
        set_status(s, true, "does not fit: %s short", kvp_format_bytes(s->fit.short_bytes, false, g, sizeof g));
    return TUI_REDRAW;
}

/* After a pick: recompute, keeping a pick error on the status line. */
static enum tui_result changed_keep_status(struct tui_state *s)
{
    if (!s->status_error)
        return changed(s);
    tui_recompute(s);
    return TUI_REDRAW;
}

static bool printable(int key)
{
    return key >= 0x20 && key < 0x7f;
}

static enum tui_result handle_main(struct tui_state *s, int key)
{
    switch (key) {
    case 'q':
    case 'Q':
        return TUI_QUIT;
    case '?':
    case 'h':
        s->mode = TUI_MODE_HELP;
        return TUI_REDRAW;
    case TUI_KEY_UP:
    case TUI_KEY_BTAB:
    case 'k':
        s->field = (enum tui_field)((s->field + TUI_F_COUNT - 1) % TUI_F_COUNT);
        return TUI_REDRAW;
    case TUI_KEY_DOWN:
    case TUI_KEY_TAB:
    case 'j':
        s->field = (enum tui_field)((s->field + 1) % TUI_F_COUNT);
        return TUI_REDRAW;
    case TUI_KEY_HOME:
        s->field = (enum tui_field)0;
        return TUI_REDRAW;
    case TUI_KEY_END:
        s->field = (enum tui_field)(TUI_F_COUNT - 1);
        return TUI_REDRAW;
    case TUI_KEY_LEFT:
    case TUI_KEY_RIGHT:
    case '+':
    case '-':
        adjust(s, key == TUI_KEY_RIGHT || key == '+' ? 1 : -1, key == '+' || key == '-');
        return changed(s);
    case TUI_KEY_ENTER:
        if (s->field == TUI_F_MODEL) {
            open_picker(s, TUI_MODE_PICK_MODEL);
        } else if (s->field == TUI_F_GPU) {
            open_picker(s, TUI_MODE_PICK_GPU);
        } else {
            s->mode = TUI_MODE_EDIT;
            input_clear(s);
        }
        return TUI_REDRAW;
    case 'm':
        open_picker(s, TUI_MODE_PICK_MODEL);
        return TUI_REDRAW;
    case 'g':
        open_picker(s, TUI_MODE_PICK_GPU);
        return TUI_REDRAW;
    case 's':
    case 'S':
        s->mode = TUI_MODE_SAVE;
        default_plan_path(s);
        return TUI_REDRAW;
    case 'x':
        s->explain = (enum tui_explain)((s->explain + 1) % TUI_EXPLAIN_COUNT);
        s->explain_scroll = 0;
        return TUI_REDRAW;
    case TUI_KEY_PGDN:
    case ']':
        s->explain_scroll += 4;
        return TUI_REDRAW;
    case TUI_KEY_PGUP:
    case '[':
        s->explain_scroll = s->explain_scroll > 4 ? s->explain_scroll - 4 : 0;
        return TUI_REDRAW;
    case TUI_KEY_RESIZE:
        return TUI_REDRAW;
    case TUI_KEY_ESC:
        s->status[0] = '\0';
        return TUI_REDRAW;
    default:
        /* typing a digit on a numeric field starts editing it */
        if (isdigit(key) && numeric_field(s->field)) {
            s->mode = TUI_MODE_EDIT;
            input_clear(s);
            input_add(s, key);
            return TUI_REDRAW;
        }
        return TUI_HANDLED;
    }
}

enum tui_result tui_handle(struct tui_state *s, int key)
{
    char t[KVP_ERROR_TEXT_MAX];
    struct kvp_error e = {0};

    if (key == TUI_KEY_RESIZE)
        return TUI_REDRAW;
    switch (s->mode) {
    case TUI_MODE_MAIN:
        return handle_main(s, key);
    case TUI_MODE_HELP:
        s->mode = TUI_MODE_MAIN;
        return TUI_REDRAW;
    case TUI_MODE_EDIT:
    case TUI_MODE_SAVE:
        if (key == TUI_KEY_ESC) {
            s->mode = TUI_MODE_MAIN;
            return TUI_REDRAW;
        }
        if (key == TUI_KEY_BACKSPACE) {
            input_back(s);
            return TUI_REDRAW;
        }
        if (key == TUI_KEY_ENTER) {
            enum tui_mode was = s->mode;
            s->mode = TUI_MODE_MAIN;
            if (was == TUI_MODE_SAVE) {
                if (tui_plan_save(s, s->input, &e) != KVP_OK) {
                    set_status(s, true, "%s", kvp_error_text(&e, t, sizeof t));
                } else {
                    snprintf(s->plan_path, sizeof s->plan_path, "%s", s->input);
                    set_status(s, false, "saved %s (check it with: kvplan check %s)", s->input, s->input);
                }
                return TUI_REDRAW;
            }
            if (commit_edit(s))
                return changed(s);
            return TUI_REDRAW;
        }
        if (printable(key))
            input_add(s, key);
        return TUI_REDRAW;
    case TUI_MODE_PICK_MODEL:
    case TUI_MODE_PICK_GPU:
        switch (key) {
        case TUI_KEY_ESC:
            s->mode = TUI_MODE_MAIN;
            return TUI_REDRAW;
        case TUI_KEY_UP:
            if (s->pick_sel)
                s->pick_sel--;
            return TUI_REDRAW;
        case TUI_KEY_DOWN:
            if (s->pick_sel + 1 < s->n_pick)
                s->pick_sel++;
            return TUI_REDRAW;
        case TUI_KEY_PGUP:
            s->pick_sel = s->pick_sel > 10 ? s->pick_sel - 10 : 0;
            return TUI_REDRAW;
        case TUI_KEY_PGDN:
            s->pick_sel = s->pick_sel + 10 < s->n_pick ? s->pick_sel + 10 : (s->n_pick ? s->n_pick - 1 : 0);
            return TUI_REDRAW;
        case TUI_KEY_BACKSPACE:
            input_back(s);
            refilter(s);
            return TUI_REDRAW;
        case TUI_KEY_ENTER:
            pick_commit(s);
            return changed_keep_status(s);
        default:
            if (printable(key)) {
                input_add(s, key);
                s->pick_sel = 0;
                refilter(s);
            }
            return TUI_REDRAW;
        }
    }
    return TUI_HANDLED;
}
