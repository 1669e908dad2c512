/* state.c -- the TUI's state: keys in, settings changed, figures recomputed.
 *
 * No curses here (see state.h). The setup is a struct kvp_settings, exactly
 * what `kvplan fit` builds from its options: every field but the model is a
 * row of settings.h's table, typed values are checked by kvp_settings_put,
 * shown by kvp_setting_text, and the deployment is kvp_settings_apply of
 * them, so the TUI computes what `kvplan fit` computes for the same settings
 * and a test can drive keys and compare against the library directly.
 */
#include "state.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kvplan/emit.h"
#include "kvplan/explain.h"
#include "kvplan/num.h"

/* Choices the arrows step through; typing accepts any format string. */
static const char *const weight_choices[] = {"stored",         "auto",  "bf16",  "f16",  "fp8_e4m3", "int8",
                                             "int4:group=128", "mxfp4", "nvfp4", "q8_0", "q4_k_m",   "f32"};
static const char *const kv_choices[] = {"bf16", "f16", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "q8_0", "q4_0", "f32"};
static const char *const switch_choices[] = {"auto", "on", "off"};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

#define BYTES_STEP (1ull << 30) /* + and - on a size: a GiB */
#define CONTEXT_STEP 1024u      /* + and - on the context */

static void set_status(struct tui_state *s, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_status(struct tui_state *s, bool error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->status, sizeof s->status, fmt, ap);
    va_end(ap);
    s->status_error = error;
}

/* A note on what an edit changed besides the field (an engine that takes no
 * such cache, a context the model cannot reach); shown before the fit. */
static void set_note(struct tui_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_note(struct tui_state *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->note, sizeof s->note, fmt, ap);
    va_end(ap);
}

/* ---- the fields ---- */

uint32_t tui_field_count(void)
{
    return 1 + kvp_settings_count() + KVP_SYNTH_KEYS;
}

/* The first workload field: after the model and the settings. */
static uint32_t first_wl_field(void)
{
    return 1 + kvp_settings_count();
}

int tui_field_find(const char *key)
{
    int row;
    if (strcmp(key, "model") == 0)
        return (int)TUI_FIELD_MODEL;
    row = kvp_setting_find(key);
    if (row >= 0)
        return row + 1;
    for (uint32_t i = 0; i < KVP_SYNTH_KEYS; i++)
        if (strcmp(kvp_synth_key_at(i)->key, key) == 0)
            return (int)(first_wl_field() + i);
    return -1;
}

/* The settings row of field f; -1 for the model and the workload's fields. */
static int row_of(uint32_t f)
{
    return f == TUI_FIELD_MODEL || f >= first_wl_field() ? -1 : (int)f - 1;
}

/* The workload row of field f; -1 for the others. */
static int wl_of(uint32_t f)
{
    return f >= first_wl_field() && f < tui_field_count() ? (int)(f - first_wl_field()) : -1;
}

void tui_view_fields(const struct tui_state *s, uint32_t *first, uint32_t *n)
{
    *first = s->view == TUI_VIEW_SIM ? first_wl_field() : 0;
    *n = s->view == TUI_VIEW_SIM ? KVP_SYNTH_KEYS : first_wl_field();
}

static bool row_given(const struct kvp_settings *set, int row)
{
    return row >= 0 && ((set->given >> row) & 1u);
}

static void row_unset(struct kvp_settings *set, int row)
{
    if (row >= 0)
        set->given &= ~(1ull << row);
}

const char *tui_field_label(uint32_t f)
{
    int row = row_of(f);
    if (wl_of(f) >= 0)
        return kvp_synth_key_at((uint32_t)wl_of(f))->key;
    return f == TUI_FIELD_MODEL ? "model" : row >= 0 ? kvp_setting_at((uint32_t)row)->key : "?";
}

const char *tui_field_help(uint32_t f)
{
    int row = row_of(f);
    if (wl_of(f) >= 0)
        return kvp_synth_key_at((uint32_t)wl_of(f))->help;
    if (row < 0)
        return "a built-in model, its Hugging Face id, or a path to a config.json, GGUF or kvplan YAML";
    return kvp_setting_at((uint32_t)row)->help;
}

/* A workload field counts as given where it differs from the default workload. */
bool tui_field_given(const struct tui_state *s, uint32_t f)
{
    int row = row_of(f), wl = wl_of(f);
    if (wl >= 0) {
        const char *key = kvp_synth_key_at((uint32_t)wl)->key;
        struct tui_workload def;
        char a[64], b[64];
        tui_wl_default(s, &def);
        return strcmp(kvp_synth_text(&s->work.synth, s->work.max_queue_s, key, a, sizeof a),
                      kvp_synth_text(&def.synth, def.max_queue_s, key, b, sizeof b)) != 0;
    }
    return row < 0 || row_given(&s->set, row);
}

/* ---- the setup: settings applied to the model ---- */

/* kvp_settings_apply of s->set into s->d and s->gpu; on an error they stay
 * as they were and *bad is the row that failed (-1: none). */
static enum kvp_status apply_set(struct tui_state *s, int *bad, struct kvp_error *err)
{
    struct kvp_deploy d;
    const struct kvp_gpu *g;
    enum kvp_status st = kvp_settings_apply(&s->set, s->model, s->gpus, &d, &g, bad, err);
    if (st != KVP_OK)
        return st;
    s->d = d;
    s->gpu = g;
    return KVP_OK;
}

/* apply_set, with the failing setting's key before err's message. */
static enum kvp_status apply_settings(struct tui_state *s, struct kvp_error *err)
{
    int bad;
    enum kvp_status st = apply_set(s, &bad, err);
    if (st != KVP_OK && bad >= 0) { /* "tp: must be 1..1048576 (got 0)" */
        char msg[sizeof err->msg];
        int k = snprintf(msg, sizeof msg, "%s: ", kvp_setting_at((uint32_t)bad)->key);
        snprintf(msg + k, sizeof msg - (size_t)k, "%s", err->msg);
        memcpy(err->msg, msg, sizeof msg);
    }
    return st;
}

/* Make n the settings if they apply to the model; else keep the old ones
 * and say why. */
static bool try_settings(struct tui_state *s, const struct kvp_settings *n)
{
    struct kvp_settings was = s->set;
    struct kvp_error e = {0};
    s->set = *n;
    if (apply_settings(s, &e) != KVP_OK) {
        s->set = was;
        set_status(s, true, "%s", e.msg);
        return false;
    }
    return true;
}

/* Give key the text v in n (NULL: take the row away, back to its default). */
static bool put(struct tui_state *s, struct kvp_settings *n, const char *key, const char *v)
{
    struct kvp_error e = {0};
    if (!v) {
        row_unset(n, kvp_setting_find(key));
        return true;
    }
    if (kvp_settings_put(n, key, v, &e) != KVP_OK) {
        set_status(s, true, "%s: %s", key, e.msg);
        return false;
    }
    return true;
}

static bool put_u32(struct tui_state *s, struct kvp_settings *n, const char *key, uint32_t v)
{
    char t[16];
    snprintf(t, sizeof t, "%" PRIu32, v);
    return put(s, n, key, t);
}

/* Engines with one cache dtype for K and V (vLLM, SGLang, TRT-LLM --kv-cache-dtype):
 * an edit of K or V sets both. llama.cpp (-ctk, -ctv) and the bare formula take two. */
static bool one_cache_dtype(enum kvp_engine_id e)
{
    return e == KVP_ENGINE_VLLM || e == KVP_ENGINE_SGLANG || e == KVP_ENGINE_TRTLLM;
}

/* Switch to engine v (engine[@release]; NULL: the default), keeping every
 * setting: they are rows of s->set, applied over the new engine's defaults.
 * A cache format the new engine cannot store goes back to its default, and
 * the note says so. */
static bool set_engine(struct tui_state *s, const char *v)
{
    struct kvp_settings n = s->set;
    struct kvp_error e = {0};
    struct kvp_fit f;
    char was[64], now[64];

    kvp_format_name(&s->d.k, was, sizeof was);
    if (!put(s, &n, "engine", v) || !try_settings(s, &n))
        return false;
    if (kvp_fit_compute(s->model, &s->d, &f, &e) == KVP_ERR_UNSUPPORTED && strstr(e.msg, "cannot store")) {
        n = s->set;
        put(s, &n, "kv_dtype", NULL);
        put(s, &n, "k_dtype", NULL);
        put(s, &n, "v_dtype", NULL);
        if (try_settings(s, &n))
            set_note(s, "%s takes no %s cache: K and V are now %s", kvp_engine_info(s->d.engine)->name, was,
                     kvp_format_name(&s->d.k, now, sizeof now));
    }
    return true;
}

/* count GPUs as tensor parallel: tp = count / pp (pp as it is, or 1 where
 * that does not divide), or as pipeline stages the same way round. */
static void split_for(const struct tui_state *s, uint32_t count, bool tensor, uint32_t *tp, uint32_t *pp)
{
    if (tensor) {
        *pp = count % s->d.pp == 0 ? s->d.pp : 1;
        *tp = count / *pp;
    } else {
        *tp = count % s->d.tp == 0 ? s->d.tp : 1;
        *pp = count / *tp;
    }
}

/* The answer to "TP or PP?" for s->ask_gpus GPUs. */
static bool split_gpus(struct tui_state *s, bool tensor)
{
    struct kvp_settings n = s->set;
    uint32_t count = s->ask_gpus, tp, pp;
    split_for(s, count, tensor, &tp, &pp);
    if (!put_u32(s, &n, "tp", tp) || !put_u32(s, &n, "pp", pp) || !put(s, &n, "gpus", NULL) || !try_settings(s, &n))
        return false;
    if (count > 1)
        set_note(s, "%" PRIu32 " GPUs: tp %" PRIu32 " x pp %" PRIu32, count, tp, pp);
    return true;
}

/* The GPU count: one GPU is tp 1 x pp 1; more ask whether they are tensor
 * or pipeline parallel (TUI_MODE_ASK_SPLIT, answered by split_gpus),
 * except under llama.cpp, which splits the layers over them. False when
 * nothing changed yet. */
static bool set_gpus(struct tui_state *s, uint32_t count)
{
    struct kvp_settings n = s->set;
    uint32_t tp[2], pp[2];
    s->ask_gpus = count;
    if (s->d.engine == KVP_ENGINE_LLAMACPP)
        return put_u32(s, &n, "gpus", count) && try_settings(s, &n);
    if (count <= 1)
        return split_gpus(s, true);
    if (count == s->d.n_gpus && count == kvp_deploy_gpus(&s->d))
        return true; /* as it is: nothing to ask */
    split_for(s, count, true, &tp[0], &pp[0]);
    split_for(s, count, false, &tp[1], &pp[1]);
    s->mode = TUI_MODE_ASK_SPLIT;
    set_status(s, false,
               "%" PRIu32 " GPUs: t = TP (tp %" PRIu32 " x pp %" PRIu32 "), p = PP (tp %" PRIu32 " x pp %" PRIu32
               ")? Enter: t, Esc: cancel",
               count, tp[0], pp[0], tp[1], pp[1]);
    return false;
}

/* Field row takes the text v (NULL, "" or "default": back to the engine's
 * default). Rows that go together follow: kv_dtype replaces K and V, and an
 * engine with one cache dtype takes K and V as one; tp and pp set the GPU
 * count (tp x pp, as `kvplan fit` does); a GPU brings its own memory. */
static bool edit_row(struct tui_state *s, int row, const char *v)
{
    const struct kvp_setting *r = kvp_setting_at((uint32_t)row);
    struct kvp_settings n = s->set;
    const char *key = r->key;

    if (v && (!*v || strcmp(v, "default") == 0))
        v = NULL;
    if (r->type == KVP_SET_ENGINE)
        return set_engine(s, v);
    if (strcmp(key, "gpus") == 0 && v) {
        uint64_t count;
        struct kvp_error e = {0};
        if (kvp_settings_put(&n, key, v, &e) != KVP_OK) { /* the table's check: 1..2^20 */
            set_status(s, true, "%s: %s", key, e.msg);
            return false;
        }
        kvp_parse_count(v, &count, &e);
        return set_gpus(s, (uint32_t)count);
    }
    if (!put(s, &n, key, v))
        return false;
    if (strcmp(key, "kv_dtype") == 0) {
        put(s, &n, "k_dtype", NULL);
        put(s, &n, "v_dtype", NULL);
    } else if (r->type == KVP_SET_FORMAT && one_cache_dtype(s->d.engine)) {
        /* one --kv-cache-dtype for both */
        put(s, &n, "kv_dtype", v);
        put(s, &n, "k_dtype", NULL);
        put(s, &n, "v_dtype", NULL);
    } else if ((strcmp(key, "tp") == 0 || strcmp(key, "pp") == 0) && s->d.engine != KVP_ENGINE_LLAMACPP) {
        put(s, &n, "gpus", NULL);
    } else if (r->type == KVP_SET_GPU && row_given(&n, kvp_setting_find("gpu_memory"))) {
        put(s, &n, "gpu_memory", NULL);
        set_note(s, "gpu_memory is now the GPU's");
    }
    return try_settings(s, &n);
}

/* The model m (owned from now on) with the user's settings; a context the
 * new model cannot reach comes down to its maximum, and a setting that does
 * not apply to it (a llama.cpp file type for a model without a GGUF
 * architecture) is taken away, with a note. */
static void set_model(struct tui_state *s, struct kvp_model *m)
{
    struct kvp_model *old = s->model;
    struct kvp_error e = {0};
    char t[24];
    int bad;

    s->model = m;
    if (old && row_given(&s->set, kvp_setting_find("context")) && m->max_context && s->d.context > m->max_context) {
        set_note(s, "context %" PRIu64 " is beyond %s's %" PRIu64, s->d.context, m->name, m->max_context);
        snprintf(t, sizeof t, "%" PRIu64, m->max_context);
        put(s, &s->set, "context", t);
    } else if (old && !row_given(&s->set, kvp_setting_find("context")) && m->max_context != old->max_context) {
        char was[32];
        set_note(s, "context %s, %s's longest (was %s's %s)", kvp_count_text(m->max_context, t, sizeof t), m->name,
                 old->name, kvp_count_text(old->max_context, was, sizeof was));
    }
    for (uint32_t tries = 0; tries < kvp_settings_count() && apply_set(s, &bad, &e) != KVP_OK && bad >= 0; tries++) {
        set_note(s, "%s: %s (taken away)", kvp_setting_at((uint32_t)bad)->key, e.msg);
        row_unset(&s->set, bad);
    }
    kvp_model_free(old);
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
        bytes = kvp_sat_mul(kvp_sat_mul(per, sb->layers), tui_batch(s));
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

    memset(&s->err, 0, sizeof s->err);
    s->sim_stale = true; /* the deployment may have changed: the view runs again when shown */
    s->have_roofline = false;
    s->ok = false;
    s->n_kinds = s->n_chart = 0;
    if (!s->gpu && !s->d.gpu_memory && !s->d.kv_memory) {
        kvp_fail(&s->err, KVP_ERR_NOTFOUND, "no GPU chosen (the GPU catalog is empty)");
        return;
    }
    if (kvp_fit_compute(s->model, &s->d, &s->fit, &s->err) != KVP_OK)
        return;
    q = (struct kvp_kv_query){.context = s->d.context, .batch = tui_batch(s), .k = s->d.k, .v = s->d.v};
    if (kvp_kv_compute(s->model, &q, &s->kv, &s->err) != KVP_OK)
        return;
    compute_kinds(s);
    if (s->gpu) { /* the roofline needs the GPU's bandwidth and FLOP/s */
        double peak = kvp_gpu_peak_flops(s->gpu, kvp_wstore_code_dtype(&s->d.w, s->model));
        st = kvp_roofline(s->model, &s->d, tui_batch(s), (double)s->gpu->bandwidth_bytes_per_s, peak, &s->roof,
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
                         const char *arg, const struct kvp_settings *set, int *bad_row, struct kvp_error *err)
{
    struct tui_state *s;
    struct kvp_model *m = NULL;
    enum kvp_status st;
    int bad = -1;

    *out = NULL;
    if (!(s = calloc(1, sizeof *s)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    s->cat = cat;
    s->gpus = gpus;
    s->work_at = -1;
    tui_wl_default(s, &s->work);
    kvp_settings_clear(&s->set);
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
        s->model = m;
        set_status(s, false, "press ? for help");
    }
    if (set)
        kvp_settings_overlay(&s->set, set);
    /* a GPU to start from, unless a memory size stands for one */
    if (!row_given(&s->set, kvp_setting_find("gpu")) && !row_given(&s->set, kvp_setting_find("gpu_memory")) &&
        !row_given(&s->set, kvp_setting_find("kv_cache_memory")) && gpus && gpus->n &&
        (st = kvp_settings_put(&s->set, "gpu", gpus->gpus[0].id, err)) != KVP_OK)
        goto fail;
    if ((st = apply_set(s, &bad, err)) != KVP_OK)
        goto fail;
    tui_recompute(s);
    *out = s;
    return KVP_OK;
fail:
    if (bad_row)
        *bad_row = bad;
    tui_free(s);
    return st;
}

void tui_free(struct tui_state *s)
{
    if (!s)
        return;
    kvp_model_free(s->model);
    tui_sim_free(s);
    free(s);
}

/* ---- showing values ---- */

uint64_t tui_batch(const struct tui_state *s)
{
    return s->d.concurrency ? s->d.concurrency : 1;
}

/* What an empty setting text means for the deployment, by type, into buf. */
static void unset_text(const struct tui_state *s, int row, char *buf, uint32_t n)
{
    const struct kvp_setting *r = kvp_setting_at((uint32_t)row);
    char g[32];
    if (r->type == KVP_SET_FLAG)
        snprintf(buf, n, "false");
    else if (r->type == KVP_SET_SWITCH)
        snprintf(buf, n, "auto");
    else if (r->type == KVP_SET_LAYERS)
        snprintf(buf, n, strcmp(r->key, "n_gpu_layers") == 0 ? "all" : "0");
    else if (r->type == KVP_SET_OVERRIDES)
        snprintf(buf, n, "none");
    else if (r->type == KVP_SET_GPU)
        snprintf(buf, n, "custom, %s", kvp_bytes_text(s->d.gpu_memory, false, g, sizeof g));
    else if (strcmp(r->key, "util") == 0 && s->ok)
        snprintf(buf, n, "%.3f", s->fit.util);
    else if (strcmp(r->key, "block_size") == 0 && s->ok)
        snprintf(buf, n, "%" PRIu32, s->fit.block_size);
    else if (strcmp(r->key, "concurrency") == 0)
        snprintf(buf, n, "1");
    else if (strcmp(r->key, "kv_dtype") == 0)
        snprintf(buf, n, "K, V differ");
    else if (strcmp(r->key, "gpu_memory") == 0)
        snprintf(buf, n, "the GPU's");
    else if (strcmp(r->key, "activation_memory") == 0 || strcmp(r->key, "non_torch_memory") == 0)
        snprintf(buf, n, "estimated");
    else if (strcmp(r->key, "weights_memory") == 0 || strcmp(r->key, "kv_cache_memory") == 0)
        snprintf(buf, n, "computed");
    else
        snprintf(buf, n, "default");
}

const char *tui_field_value(const struct tui_state *s, uint32_t f, char *buf, uint32_t n)
{
    int row = row_of(f);
    char v[KVP_SETTING_VALUE_MAX];

    buf[0] = '\0';
    if (f == TUI_FIELD_MODEL) {
        snprintf(buf, n, "%s", s->model->name);
        return buf;
    }
    if (wl_of(f) >= 0) { /* left out: no prefix, and no share of one */
        if (!kvp_synth_text(&s->work.synth, s->work.max_queue_s, kvp_synth_key_at((uint32_t)wl_of(f))->key, buf, n)[0])
            snprintf(buf, n, "none");
        return buf;
    }
    if (row < 0)
        return buf;
    kvp_setting_text((uint32_t)row, &s->d, s->gpu, v, sizeof v);
    if (!v[0])
        unset_text(s, row, v, sizeof v);
    if (kvp_setting_at((uint32_t)row)->type == KVP_SET_GPU && s->gpu &&
        s->d.gpu_memory != s->gpu->memory_bytes) /* gpu_memory stands in for the GPU's own */
        snprintf(v + strlen(v), sizeof v - strlen(v), " (memory given)");
    if (kvp_setting_at((uint32_t)row)->type == KVP_SET_WEIGHTS && s->d.w.kind == KVP_WSTORE_CHECKPOINT &&
        !s->d.w_auto) {
        /* as stored: the stored forms' types, most bytes first ("stored mxfp4+bf16") */
        struct kvp_weights w;
        struct kvp_error e = {0};
        if (kvp_weights_compute(s->model, &s->d.w, &w, &e) == KVP_OK)
            for (uint32_t i = 0; i < w.n_parts && strlen(v) + 2 < sizeof v; i++) {
                const char *p = w.parts[i].name; /* the type alone: "fp8" of fp8_e4m3:block=128x128 */
                int len = strncmp(p, "fp8_", 4) == 0 ? 3 : (int)strcspn(p, ":");
                snprintf(v + strlen(v), sizeof v - strlen(v), "%s%.*s", i ? "+" : " ", len, p);
            }
    }
    if (kvp_setting_at((uint32_t)row)->type == KVP_SET_WEIGHTS && s->d.w_auto) { /* auto: what it chose */
        char w[KVP_SETTING_VALUE_MAX];
        snprintf(v + strlen(v), sizeof v - strlen(v), " -> %s", kvp_wstore_name(&s->d.w, w, sizeof w));
    }
    snprintf(buf, n, "%s", v);
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
    b->kv = kvp_sat_add(b->kv, kvp_sat_add(f->state_conv_bytes, f->state_ssm_bytes));
    b->free = f->free_bytes;
    b->reserve = kvp_sat_add(kvp_sat_add(f->reserve.activation, f->reserve.non_torch), f->reserve.cuda_graph);
    /* whatever is none of those lies outside the engine's memory fraction */
    used = kvp_sat_add(kvp_sat_add(b->weights, b->kv), kvp_sat_add(b->reserve, b->free));
    b->rest = used < b->total ? b->total - used : 0;
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
    } else if (s->explain == TUI_EXPLAIN_LAUNCH) {
        struct kvp_error e = {0};
        if (kvp_emit_command(s->model, &s->d, &s->fit, b, &e) != KVP_OK)
            kvp_buf_printf(b, "no launch command: %s\n", e.msg);
        else if (!s->fit.fits)
            kvp_buf_printf(b, "# this deployment does not fit\n");
    } else {
        q = (struct kvp_kv_query){.context = s->d.context, .batch = tui_batch(s), .k = s->d.k, .v = s->d.v};
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

/* The entry typing should land on: one named exactly as typed (name or Hub id),
 * else the first whose name starts with it, else the first that matches. */
static uint32_t best_pick(const struct tui_state *s)
{
    uint32_t prefix = UINT32_MAX;
    if (!s->input_len)
        return s->pick_sel;
    for (uint32_t i = 0; i < s->n_pick; i++) {
        const char *name = tui_pick_name(s, i);
        if (strcasecmp(name, s->input) == 0 ||
            (s->mode == TUI_MODE_PICK_MODEL && strcasecmp(s->cat->models[s->pick[i]]->hf_id, s->input) == 0))
            return i;
        if (prefix == UINT32_MAX && strncasecmp(name, s->input, s->input_len) == 0)
            prefix = i;
    }
    return prefix == UINT32_MAX ? 0 : prefix;
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
            set_model(s, m);
            set_status(s, false, "model %s", m->name);
        }
    } else {
        const struct kvp_gpu *g = NULL;
        if (s->n_pick)
            g = &s->gpus->gpus[s->pick[s->pick_sel]];
        else if (s->gpus && kvp_gpu_find(s->gpus, s->input, &g, &e) != KVP_OK)
            g = NULL;
        if (!g)
            set_status(s, true, "%s", e.msg[0] ? e.msg : "no GPU matches");
        else if (edit_row(s, kvp_setting_find("gpu"), g->id))
            set_status(s, false, "GPU %s", g->id);
    }
    s->mode = TUI_MODE_MAIN;
}

/* ---- changing fields ---- */

/* The view's workload row takes the text v (NULL, "" or "default": back to
 * its default) if the workload then draws; else it stays and the status
 * says why. */
static bool edit_workload(struct tui_state *s, uint32_t row, const char *v)
{
    struct tui_workload n = s->work;
    struct kvp_error e = {0};
    const char *key = kvp_synth_key_at(row)->key;
    if (v && (!*v || strcmp(v, "default") == 0))
        v = NULL;
    if (kvp_synth_set(&n.synth, &n.max_queue_s, key, v, &e) != KVP_OK || tui_wl_check(&n, &e) != KVP_OK) {
        set_status(s, true, "%s: %s", key, e.msg);
        return false;
    }
    s->work = n;
    return true;
}

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

/* v one step up or down: by `by` (+ and -), or doubled and halved (arrows);
 * never below lo, saturating above. */
static uint64_t step_u64(uint64_t v, int dir, bool add, uint64_t by, uint64_t lo)
{
    if (add)
        v = dir > 0 ? kvp_sat_add(v, by) : (v >= lo + by ? v - by : lo);
    else
        v = dir > 0 ? kvp_sat_mul(v, 2) : (v / 2 >= lo ? v / 2 : lo);
    return v;
}

/* The number row holds in the deployment (its struct kvp_deploy member). */
static uint64_t member(const struct kvp_deploy *d, const struct kvp_setting *r)
{
    const char *p = (const char *)d + r->off;
    uint32_t u32;
    uint64_t u64;
    if (r->type == KVP_SET_U32) {
        memcpy(&u32, p, sizeof u32);
        return u32;
    }
    memcpy(&u64, p, sizeof u64);
    return u64;
}

/* Arrows and +/- on the selected field: the next value as a setting's text,
 * applied like a typed one. dir: +1 / -1; add: step by one (+/-) instead of
 * doubling (arrows). False when nothing changed (the status says why). */
static bool adjust(struct tui_state *s, int dir, bool add)
{
    int row = row_of(s->field);
    const struct kvp_setting *r;
    char cur[KVP_SETTING_VALUE_MAX], t[KVP_SETTING_VALUE_MAX];

    if (s->field == TUI_FIELD_MODEL) { /* models have no order to step through: a step would swap it unasked */
        set_status(s, false, "Enter or m picks the model (type to filter)");
        return false;
    }
    if (wl_of(s->field) >= 0)
        return edit_workload(s, (uint32_t)wl_of(s->field),
                             tui_wl_step(&s->work, (uint32_t)wl_of(s->field), dir, add, t, sizeof t));
    if (row < 0)
        return false;
    r = kvp_setting_at((uint32_t)row);
    kvp_setting_text((uint32_t)row, &s->d, s->gpu, cur, sizeof cur);
    switch (r->type) {
    case KVP_SET_ENGINE:
        return set_engine(s, kvp_engine_info((enum kvp_engine_id)(((int)s->d.engine + dir + KVP_ENGINE_COUNT) %
                                                                  KVP_ENGINE_COUNT))->name);
    case KVP_SET_GPU: {
        uint32_t i = s->gpu ? (uint32_t)(s->gpu - s->gpus->gpus) : 0;
        if (!s->gpus || !s->gpus->n)
            return false;
        i = (i + s->gpus->n + (dir > 0 ? 1 : s->gpus->n - 1)) % s->gpus->n;
        return edit_row(s, row, s->gpus->gpus[i].id);
    }
    case KVP_SET_U32:
    case KVP_SET_COUNT: {
        /* where the engine decides (0), from what the fit chose */
        uint64_t v = member(&s->d, r);
        if (v == 0)
            v = strcmp(r->key, "block_size") == 0 && s->ok ? s->fit.block_size : 1;
        v = step_u64(v, dir, add, strcmp(r->key, "context") == 0 ? CONTEXT_STEP : 1, 1);
        snprintf(t, sizeof t, "%" PRIu64, v);
        return edit_row(s, row, t);
    }
    case KVP_SET_BYTES: {
        /* below the step, back to the default (none, estimated, the GPU's) */
        uint64_t v = member(&s->d, r);
        if (v == 0 && dir < 0)
            return false;
        v = v == 0 ? BYTES_STEP : step_u64(v, dir, add, BYTES_STEP, 0);
        if (v < BYTES_STEP && dir < 0)
            return edit_row(s, row, NULL);
        snprintf(t, sizeof t, "%" PRIu64 "B", v);
        return edit_row(s, row, t);
    }
    case KVP_SET_FRACTION: {
        /* from what is set, else what the fit used, else the release's default (1: SGLang's rule or none) */
        double def = kvp_deploy_release(&s->d)->util;
        double u = s->d.util > 0 ? s->d.util : s->ok ? s->fit.util : def > 0 ? def : 1.0;
        u += dir * 0.01;
        u = u < 0.05 ? 0.05 : u > 1.0 ? 1.0 : u;
        snprintf(t, sizeof t, "%.3f", u); /* three decimals, as shown */
        return edit_row(s, row, t);
    }
    case KVP_SET_FORMAT:
        if (!cur[0]) /* kv_dtype where K and V differ: from K */
            kvp_format_name(&s->d.k, cur, sizeof cur);
        return edit_row(s, row, step_choice(kv_choices, N_OF(kv_choices), cur, dir));
    case KVP_SET_WEIGHTS:
        return edit_row(s, row, step_choice(weight_choices, N_OF(weight_choices), cur, dir));
    case KVP_SET_FLAG:
        return edit_row(s, row, cur[0] ? "false" : "true");
    case KVP_SET_SWITCH:
        return edit_row(s, row, step_choice(switch_choices, N_OF(switch_choices), cur[0] ? cur : "auto", dir));
    case KVP_SET_LAYERS:
        set_status(s, true, "%s: type a layer count or all (Enter), e.g. %s", r->key, r->example);
        return false;
    case KVP_SET_OVERRIDES:
        set_status(s, true, "%s: type PATTERN=CPU[,...] (Enter), e.g. %s", r->key, r->example);
        return false;
    case KVP_SET_SPLIT:
    default:
        set_status(s, true, "%s: type the layers per device (Enter), e.g. %s", r->key, r->example);
        return false;
    }
}

/* A typed value for the selected field; false (and a status) if bad. */
static bool commit_edit(struct tui_state *s)
{
    int row = row_of(s->field);
    if (wl_of(s->field) >= 0)
        return edit_workload(s, (uint32_t)wl_of(s->field), s->input);
    return row >= 0 && edit_row(s, row, s->input);
}

/* Typing a digit on these starts editing them: every workload field is a number. */
static bool numeric_field(uint32_t f)
{
    int row = row_of(f);
    if (wl_of(f) >= 0)
        return true;
    enum kvp_setting_type t = row >= 0 ? kvp_setting_at((uint32_t)row)->type : KVP_SET_GPU;
    return t == KVP_SET_U32 || t == KVP_SET_COUNT || t == KVP_SET_BYTES || t == KVP_SET_FRACTION ||
           t == KVP_SET_SPLIT || t == KVP_SET_LAYERS;
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

/* After a change: recompute and say whether it fits, after the edit's note. */
static enum tui_result changed(struct tui_state *s)
{
    char g[32], pool[32], msg[TUI_STATUS_MAX];
    bool bad = true;
    tui_recompute(s);
    if (s->view == TUI_VIEW_SIM) {
        tui_sim_update(s);
        if (s->sim_ok)
            snprintf(msg, sizeof msg, "simulated %" PRIu32 " requests: peak %s of %s %s, %" PRIu64
                     " preemption%s", s->work.synth.requests, kvp_count_text(s->sim.peak_blocks, g, sizeof g),
                     kvp_count_text(s->sim.pool_blocks, pool, sizeof pool),
                     s->sim_cfg.engine == KVP_SIM_LLAMACPP ? "cells" : "blocks",
                     s->sim.preemptions, s->sim.preemptions == 1 ? "" : "s");
        else
            snprintf(msg, sizeof msg, "%s", s->sim_err.msg);
        bad = !s->sim_ok;
    } else if (!s->ok) {
        snprintf(msg, sizeof msg, "%s", s->err.msg);
    } else if (s->fit.fits) {
        snprintf(msg, sizeof msg, "fits: %.2f requests of %s tokens", s->fit.max_concurrency,
                 kvp_count_text(s->d.context, g, sizeof g));
        bad = false;
    } else {
        snprintf(msg, sizeof msg, "does not fit: %s short", kvp_bytes_text(s->fit.short_bytes, false, g, sizeof g));
    }
    set_status(s, bad, "%s%s%s", s->note, s->note[0] ? "; " : "", msg);
    s->note[0] = '\0';
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

/* Into the simulate view (its first field) or back to the fit's (the field
 * it left); the run is made on the way in only if an input changed. */
static enum tui_result switch_view(struct tui_state *s)
{
    uint32_t first, n;
    if (s->view == TUI_VIEW_FIT) {
        s->fit_field = s->field;
        s->view = TUI_VIEW_SIM;
        s->work_used = true;
        tui_view_fields(s, &first, &n);
        s->field = first;
        if (s->sim_stale)
            return changed(s);
        return TUI_REDRAW;
    }
    s->view = TUI_VIEW_FIT;
    s->field = s->fit_field;
    s->status[0] = '\0';
    return TUI_REDRAW;
}

static enum tui_result handle_main(struct tui_state *s, int key)
{
    uint32_t first, n;
    struct kvp_error e = {0};

    tui_view_fields(s, &first, &n);
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
        s->field = first + (s->field - first + n - 1) % n;
        return TUI_REDRAW;
    case TUI_KEY_DOWN:
    case TUI_KEY_TAB:
    case 'j':
        s->field = first + (s->field - first + 1) % n;
        return TUI_REDRAW;
    case TUI_KEY_HOME:
        s->field = first;
        return TUI_REDRAW;
    case TUI_KEY_END:
        s->field = first + n - 1;
        return TUI_REDRAW;
    case 'w':
        return switch_view(s);
    case 'r':
        if (s->view != TUI_VIEW_SIM)
            return TUI_HANDLED;
        if (tui_sim_find_max_rate(s, &e))
            set_status(s, false, "highest sustained rate %.3g requests/s (no preemption, queueing p99 <= %g s)",
                       s->max_rate, s->work.max_queue_s);
        else
            set_status(s, true, "%s", e.msg);
        return TUI_REDRAW;
    case TUI_KEY_LEFT:
    case TUI_KEY_RIGHT:
    case '+':
    case '-':
        if (adjust(s, key == TUI_KEY_RIGHT || key == '+' ? 1 : -1, key == '+' || key == '-'))
            return changed(s);
        return TUI_REDRAW;
    case TUI_KEY_ENTER:
        if (s->field == TUI_FIELD_MODEL) {
            open_picker(s, TUI_MODE_PICK_MODEL);
        } else if ((int)s->field == tui_field_find("gpu")) {
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
    case 'e':
        s->explain = TUI_EXPLAIN_LAUNCH;
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
        if (s->view == TUI_VIEW_SIM)
            return switch_view(s);
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

/* The plan to s->save_path, the status saying how it went. */
static void save_plan(struct tui_state *s)
{
    char t[KVP_ERROR_TEXT_MAX];
    struct kvp_error e = {0};

    if (tui_plan_save(s, s->save_path, &e) != KVP_OK) {
        set_status(s, true, "%s", kvp_error_text(&e, t, sizeof t));
    } else {
        snprintf(s->plan_path, sizeof s->plan_path, "%s", s->save_path);
        set_status(s, false, "saved %s (check it with: kvplan check %s)", s->save_path, s->save_path);
    }
    s->preempt_asked = false;
}

/* TUI_MODE_ASK_LIMIT: digits, Backspace, Enter to save with the limit typed
 * (none when empty), Esc to save nothing. */
static enum tui_result ask_limit(struct tui_state *s, int key)
{
    char *end;
    if (key == TUI_KEY_ESC) {
        s->mode = TUI_MODE_MAIN;
        set_status(s, false, "not saved");
    } else if (key == TUI_KEY_BACKSPACE) {
        input_back(s);
    } else if (key == TUI_KEY_ENTER) {
        errno = 0;
        s->preempt_limit = strtoull(s->input, &end, 10);
        if (s->input_len && (*end || errno || s->input[0] == '-')) {
            set_status(s, true, "max_preemptions: a count, e.g. 0 (got '%s')", s->input);
            return TUI_REDRAW;
        }
        s->preempt_asked = true;
        s->preempt_omit = !s->input_len;
        s->mode = TUI_MODE_MAIN;
        save_plan(s);
    } else if (isdigit(key)) {
        input_add(s, key);
    } else {
        return TUI_HANDLED;
    }
    return TUI_REDRAW;
}

enum tui_result tui_handle(struct tui_state *s, int key)
{
    if (key == TUI_KEY_RESIZE)
        return TUI_REDRAW;
    s->note[0] = '\0';
    switch (s->mode) {
    case TUI_MODE_MAIN:
        return handle_main(s, key);
    case TUI_MODE_HELP:
        s->mode = TUI_MODE_MAIN;
        return TUI_REDRAW;
    case TUI_MODE_ASK_SPLIT:
        if (key == 't' || key == 'T' || key == 'p' || key == 'P' || key == TUI_KEY_ENTER) {
            s->mode = TUI_MODE_MAIN;
            return split_gpus(s, key != 'p' && key != 'P') ? changed(s) : TUI_REDRAW;
        }
        if (key == TUI_KEY_ESC) {
            s->mode = TUI_MODE_MAIN;
            set_status(s, false, "GPUs stay %" PRIu32 " (tp %" PRIu32 " x pp %" PRIu32 ")", s->d.n_gpus, s->d.tp,
                       s->d.pp);
            return TUI_REDRAW;
        }
        return TUI_HANDLED;
    case TUI_MODE_ASK_LIMIT:
        return ask_limit(s, key);
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
                if (s->work_used) /* the workload's assertions state the current run */
                    tui_sim_update(s);
                snprintf(s->save_path, sizeof s->save_path, "%s", s->input);
                if (tui_plan_asks_limit(s)) {
                    s->mode = TUI_MODE_ASK_LIMIT;
                    input_clear(s);
                    input_add(s, '0');
                    return TUI_REDRAW;
                }
                save_plan(s);
                return TUI_REDRAW;
            }
            if (commit_edit(s))
                return changed(s);
            return TUI_REDRAW; /* an error, or a question (TUI_MODE_ASK_SPLIT) */
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
            s->pick_sel = best_pick(s);
            return TUI_REDRAW;
        case TUI_KEY_ENTER:
            pick_commit(s);
            return changed_keep_status(s);
        default:
            if (printable(key)) {
                input_add(s, key);
                refilter(s);
                s->pick_sel = best_pick(s);
            }
            return TUI_REDRAW;
        }
    }
    return TUI_HANDLED;
}
