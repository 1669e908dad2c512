/* check_tui.c -- the TUI's model without a terminal: key sequences change
 * the setup, and the figures equal what the library (and so `kvplan fit`)
 * computes for the same settings; plan files round-trip; bad input is a
 * status message, never a changed setup. Tests run from the repository root.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvplan/catalog.h"
#include "kvplan/deploy.h"
#include "kvplan/gpu.h"
#include "../src/tui/state.h"
#include "testutil.h"


/* Key sequences: enum tui_key values and characters, 0-terminated. */
#define DN TUI_KEY_DOWN
#define UP TUI_KEY_UP
#define LT TUI_KEY_LEFT
#define RT TUI_KEY_RIGHT
#define EN TUI_KEY_ENTER
#define BS TUI_KEY_BACKSPACE
#define ESC TUI_KEY_ESC

static struct kvp_catalog *cat;
static struct kvp_gpu_catalog *gpus;

static void load_catalogs(void)
{
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_catalog_load("models", &cat, &err), err);
    ck_assert_kvp_ok(kvp_gpus_load("models/gpus.yaml", &gpus, &err), err);
}

static void free_catalogs(void)
{
    kvp_catalog_free(cat);
    kvp_gpus_free(gpus);
    cat = NULL;
    gpus = NULL;
}

static struct tui_state *start(const char *model)
{
    struct tui_state *s = NULL;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(tui_init(&s, cat, gpus, model, &err), err);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void feed(struct tui_state *s, const int *keys)
{
    for (; *keys; keys++)
        ck_assert_int_ne(tui_handle(s, *keys), TUI_QUIT);
}

static void type(struct tui_state *s, const char *text)
{
    for (; *text; text++)
        tui_handle(s, (unsigned char)*text);
}

/* What `kvplan fit MODEL --gpu G --gpus N --tp T --pp P --engine E ...` passes. */
struct fit_args {
    const char *model, *gpu, *engine;
    uint32_t gpus, tp, pp;
    uint64_t context, concurrency; /* 0 = the default */
    const char *k, *v, *w;         /* NULL = the default */
    double util;
    uint32_t block;
};

static void reference_fit(const struct fit_args *a, struct kvp_model **m_out, struct kvp_fit *f)
{
    struct kvp_model *m = NULL;
    const struct kvp_gpu *g;
    struct kvp_deploy d;
    enum kvp_engine_id e;
    struct kvp_error err = {0};

    ck_assert_kvp_ok(kvp_model_open(cat, a->model, &m, &err), err);
    ck_assert_kvp_ok(kvp_gpu_find(gpus, a->gpu, &g, &err), err);
    ck_assert(kvp_engine_from_name(a->engine, &e));
    kvp_deploy_init(&d, e, m);
    d.gpu_memory = g->memory_bytes;
    d.tp = a->tp;
    d.pp = a->pp;
    d.n_gpus = a->gpus;
    if (a->context)
        d.context = a->context;
    d.concurrency = a->concurrency ? a->concurrency : 1;
    if (a->k)
        ck_assert_kvp_ok(kvp_format_parse(a->k, &d.k, &err), err);
    if (a->v)
        ck_assert_kvp_ok(kvp_format_parse(a->v, &d.v, &err), err);
    if (a->w)
        ck_assert_kvp_ok(kvp_wstore_parse(a->w, false, &d.w, &err), err);
    d.util = a->util;
    d.block_size = a->block;
    ck_assert_kvp_ok(kvp_fit_compute(m, &d, f, &err), err);
    *m_out = m;
}

static void assert_same_fit(const struct kvp_fit *got, const struct kvp_fit *want)
{
    ck_assert_uint_eq(got->weights_bytes, want->weights_bytes);
    ck_assert_uint_eq(got->kv_budget_bytes, want->kv_budget_bytes);
    ck_assert_uint_eq(got->kv_bytes_per_token_per_gpu, want->kv_bytes_per_token_per_gpu);
    ck_assert_uint_eq(got->kv_bytes_required, want->kv_bytes_required);
    ck_assert_uint_eq(got->kv_tokens, want->kv_tokens);
    ck_assert_uint_eq(got->num_blocks, want->num_blocks);
    ck_assert_uint_eq(got->block_size, want->block_size);
    ck_assert_uint_eq(got->max_context, want->max_context);
    ck_assert_uint_eq(got->cells, want->cells);
    ck_assert(got->max_concurrency == want->max_concurrency);
    ck_assert_int_eq(got->fits, want->fits);
    ck_assert_uint_eq(got->free_bytes, want->free_bytes);
}

/* ---- key sequences against `kvplan fit` --------------------------------- */

static const struct key_case {
    const char *name;
    const char *model;
    int keys[48];
    const char *text;   /* typed after keys, then Enter (NULL: nothing) */
    struct fit_args want;
    uint64_t pin_tokens; /* from `kvplan fit` output (0: not pinned) */
    uint64_t pin_max_context;
} key_cases[] = {
    /* kvplan fit llama-3.1-8b --gpu h100: 439,984 KV tokens, 27,499 blocks (reserve estimated) */
    {"defaults", "llama-3.1-8b", {0}, NULL,
     {"llama-3.1-8b", "h100-sxm", "vllm", 1, 1, 1, 0, 0, NULL, NULL, NULL, 0, 0}, 439984, 131072},
    /* kvplan fit llama-3.1-8b --gpu h100 --context 8k --concurrency 32: max context 13,744 */
    {"context and batch typed", "llama-3.1-8b", {DN, DN, DN, DN, DN, DN, DN, DN, DN, '8', 'k', EN, DN, EN, '3', '2', EN, 0},
     NULL, {"llama-3.1-8b", "h100-sxm", "vllm", 1, 1, 1, 8192, 32, NULL, NULL, NULL, 0, 0}, 439984, 13744},
    {"context halved by arrow", "llama-3.1-8b", {TUI_KEY_END, UP, UP, LT, LT, 0}, NULL,
     {"llama-3.1-8b", "h100-sxm", "vllm", 1, 1, 1, 32768, 0, NULL, NULL, NULL, 0, 0}, 0, 0},
    {"gpu picked by filter", "llama-3.1-8b", {'g', 'h', '2', '0', '0', EN, 0}, NULL,
     {"llama-3.1-8b", "h200", "vllm", 1, 1, 1, 0, 0, NULL, NULL, NULL, 0, 0}, 0, 0},
    {"model picked by filter, tp doubled", "llama-3.1-8b", {'m', '3', '.', '1', '-', '7', '0', EN, DN, DN, DN, RT, 0},
     NULL, {"llama-3.1-70b", "h100-sxm", "vllm", 2, 2, 1, 0, 0, NULL, NULL, NULL, 0, 0}, 0, 0},
    {"engine next: sglang", "qwen3-8b", {DN, DN, DN, DN, RT, 0}, NULL,
     {"qwen3-8b", "h100-sxm", "sglang", 1, 1, 1, 0, 0, NULL, NULL, NULL, 0, 0}, 0, 0},
    {"engine typed: trtllm", "qwen3-8b", {DN, DN, DN, DN, EN, 0}, "trtllm",
     {"qwen3-8b", "h100-sxm", "trtllm", 1, 1, 1, 0, 0, NULL, NULL, NULL, 0, 0}, 0, 0},
    {"engine typed: llamacpp on 2 GPUs", "gemma-3-27b", {DN, DN, RT, DN, DN, EN, 0}, "llamacpp",
     {"gemma-3-27b", "h100-sxm", "llamacpp", 2, 1, 1, 0, 0, NULL, NULL, NULL, 0, 0}, 0, 0},
    {"V stepped to fp8, K typed fp8", "llama-3.1-8b", {DN, DN, DN, DN, DN, DN, DN, DN, RT, RT, UP, EN, 0}, "fp8",
     {"llama-3.1-8b", "h100-sxm", "vllm", 1, 1, 1, 0, 0, "fp8_e4m3", "fp8_e4m3", NULL, 0, 0}, 0, 0},
    {"memory fraction down one step", "llama-3.1-8b", {DN, DN, DN, DN, DN, LT, 0}, NULL,
     {"llama-3.1-8b", "h100-sxm", "vllm", 1, 1, 1, 0, 0, NULL, NULL, NULL, 0.89, 0}, 0, 0},
    {"weights fp8, block 32", "qwen2.5-72b", {DN, DN, DN, DN, DN, DN, EN, 'f', 'p', '8', EN, TUI_KEY_END, RT, 0}, NULL,
     {"qwen2.5-72b", "h100-sxm", "vllm", 1, 1, 1, 0, 0, NULL, NULL, "fp8", 0, 32}, 0, 0},
    {"4 GPUs, tp 2: pp 2", "llama-3.1-70b", {DN, DN, '4', EN, DN, '2', EN, 0}, NULL,
     {"llama-3.1-70b", "h100-sxm", "vllm", 4, 2, 2, 0, 0, NULL, NULL, NULL, 0, 0}, 0, 0},
    {"MLA model, batch 8 by arrows", "deepseek-v2-lite", {TUI_KEY_END, UP, RT, RT, RT, 0}, NULL,
     {"deepseek-v2-lite", "h100-sxm", "vllm", 1, 1, 1, 0, 8, NULL, NULL, NULL, 0, 0}, 0, 0},
};

START_TEST(keys_match_fit)
{
    const struct key_case *c = &key_cases[_i];
    struct tui_state *s;
    struct kvp_model *m;
    struct kvp_fit want;

    load_catalogs();
    s = start(c->model);
    feed(s, c->keys);
    if (c->text) {
        type(s, c->text);
        tui_handle(s, EN);
    }
    ck_assert_msg(s->ok, "%s: %s", c->name, s->err.msg);
    ck_assert_str_eq(s->model->name, c->want.model);
    ck_assert_str_eq(s->gpu->id, c->want.gpu);
    ck_assert_str_eq(kvp_engine_info(s->d.engine)->name, c->want.engine);
    ck_assert_uint_eq(s->d.n_gpus, c->want.gpus);
    ck_assert_uint_eq(s->d.tp, c->want.tp);
    ck_assert_uint_eq(s->d.pp, c->want.pp);
    reference_fit(&c->want, &m, &want);
    assert_same_fit(&s->fit, &want);
    if (c->pin_tokens)
        ck_assert_uint_eq(s->fit.kv_tokens, c->pin_tokens);
    if (c->pin_max_context)
        ck_assert_uint_eq(s->fit.max_context, c->pin_max_context);
    ck_assert_int_eq(s->mode, TUI_MODE_MAIN);
    kvp_model_free(m);
    tui_free(s);
    free_catalogs();
}
END_TEST

/* The panels' figures: the bar adds up, kinds add up to the KV plan, the
 * chart's last point is a fit at that context, the roofline is the library's. */
START_TEST(panels_add_up)
{
    static const char *const models[] = {"llama-3.1-8b", "gemma-3-27b", "jamba-v0.1", "deepseek-v2-lite"};
    struct tui_state *s;
    struct tui_bar b;
    struct kvp_error err = {0};

    load_catalogs();
    s = start(models[_i]);
    tui_bar_of(s, 0, &b);
    ck_assert(s->ok);
    ck_assert_uint_eq(b.kv, s->fit.kv_bytes_required);
    if (s->fit.fits) {
        ck_assert_uint_eq(b.weights + b.kv + b.reserve + b.free, b.total);
        ck_assert_uint_eq(b.over, 0);
    } else { /* jamba-v0.1 at 256k on one H100: the bar shows the shortfall */
        ck_assert_uint_eq(b.over, s->fit.short_bytes);
        ck_assert_uint_gt(b.over, 0);
        ck_assert_uint_eq(b.free, 0);
    }
    {
        uint64_t sum = 0;
        uint32_t layers = 0;
        for (uint32_t i = 0; i < s->n_kinds; i++) {
            sum += s->kinds[i].bytes;
            layers += s->kinds[i].layers;
        }
        ck_assert_uint_eq(sum, s->kv.total_bytes);
        ck_assert_uint_eq(layers, s->model->n_layers);
    }
    {
        struct kvp_deploy d = s->d;
        struct kvp_fit f;
        ck_assert_uint_eq(s->n_chart, TUI_CHART_POINTS);
        d.context = s->chart_context[s->n_chart - 1];
        ck_assert_kvp_ok(kvp_fit_compute(s->model, &d, &f, &err), err);
        ck_assert_uint_eq(s->chart_kv[s->n_chart - 1], f.kv_bytes_required);
        for (uint32_t i = 1; i < s->n_chart; i++)
            ck_assert_uint_ge(s->chart_kv[i], s->chart_kv[i - 1]);
    }
    {
        struct kvp_roofline r;
        ck_assert(s->have_roofline);
        ck_assert_kvp_ok(kvp_roofline(s->model, &s->d, 1, (double)s->gpu->bandwidth_bytes_per_s, s->gpu->bf16_flops,
                                      &r, &err), err);
        ck_assert(r.tpot_s == s->roof.tpot_s);
        ck_assert(r.ttft_s == s->roof.ttft_s);
    }
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(sliding_kind_capped)
{
    struct tui_state *s;
    load_catalogs();
    s = start("gemma-3-27b");
    ck_assert_uint_eq(s->n_kinds, 2);
    for (uint32_t i = 0; i < s->n_kinds; i++) {
        if (s->kinds[i].kind == KVP_LAYER_SLIDING)
            ck_assert_uint_eq(s->kinds[i].tokens, s->model->specs[0].kind == KVP_LAYER_SLIDING
                                                      ? s->model->specs[0].window
                                                      : s->model->specs[1].window);
        else
            ck_assert_uint_eq(s->kinds[i].tokens, s->d.context);
    }
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(explain_switches)
{
    struct tui_state *s;
    struct kvp_buf a = {0}, b = {0};
    load_catalogs();
    s = start("llama-3.1-8b");
    tui_explain_text(s, &a);
    ck_assert_ptr_nonnull(strstr(a.data, "KV budget"));
    ck_assert_int_eq(tui_handle(s, 'x'), TUI_REDRAW);
    tui_explain_text(s, &b);
    ck_assert(b.len > 0);
    ck_assert_str_ne(a.data, b.data);
    kvp_buf_release(&a);
    kvp_buf_release(&b);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(plan_round_trip)
{
    char dir[] = "/tmp/kvplan-tui-XXXXXX", path[256];
    struct tui_state *s, *t;
    struct kvp_error err = {0};
    DIR *dh;
    struct dirent *e;
    int files = 0;

    load_catalogs();
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/setup.plan.yaml", dir);
    s = start("llama-3.1-70b");
    /* 4 GPUs, tp 4, engine trtllm, util 0.85, K fp8 then V f16 (TRT-LLM has one kv_cache_dtype: the
     * last edit sets both), 16k x 12, block 64 */
    feed(s, (const int[]){DN, DN, '4', EN, DN, '4', EN, DN, RT, RT, DN, EN, 0});
    type(s, "0.85");
    feed(s, (const int[]){EN, DN, DN, EN, 0});
    type(s, "fp8");
    feed(s, (const int[]){EN, DN, EN, 0});
    type(s, "f16");
    feed(s, (const int[]){EN, DN, '1', '6', 'k', EN, DN, '1', '2', EN, DN, '6', '4', EN, 's', 0});
    ck_assert_int_eq(s->mode, TUI_MODE_SAVE);
    while (s->input_len)
        tui_handle(s, BS);
    type(s, path);
    tui_handle(s, EN);
    ck_assert_msg(!s->status_error, "%s", s->status);
    ck_assert_str_eq(s->plan_path, path);
    /* written atomically: only the plan is left in the directory */
    ck_assert_ptr_nonnull(dh = opendir(dir));
    while ((e = readdir(dh)))
        if (e->d_name[0] != '.') {
            ck_assert_str_eq(e->d_name, "setup.plan.yaml");
            files++;
        }
    closedir(dh);
    ck_assert_int_eq(files, 1);
    ck_assert_kvp_ok(tui_init(&t, cat, gpus, path, &err), err);
    ck_assert_str_eq(t->model->name, "llama-3.1-70b");
    ck_assert_uint_eq(t->d.n_gpus, 4);
    ck_assert_uint_eq(t->d.tp, 4);
    ck_assert_uint_eq(t->d.pp, 1);
    ck_assert_int_eq(t->d.engine, KVP_ENGINE_TRTLLM);
    ck_assert(t->d.util == 0.85);
    ck_assert_int_eq(t->d.k.dtype, KVP_DTYPE_F16);
    ck_assert_int_eq(t->d.v.dtype, KVP_DTYPE_F16);
    ck_assert_uint_eq(t->d.context, 16384);
    ck_assert_uint_eq(t->d.concurrency, 12);
    ck_assert_uint_eq(t->d.block_size, 64);
    ck_assert(s->ok && t->ok);
    assert_same_fit(&t->fit, &s->fit);
    unlink(path);
    rmdir(dir);
    tui_free(s);
    tui_free(t);
    free_catalogs();
}
END_TEST

/* A plan that gives a memory size instead of a GPU, and settings the TUI
 * has no field for, opens, computes as `kvplan check` would, and saves back
 * with them. */
START_TEST(plan_without_gpu)
{
    static const char text[] = "kvplan_plan: 1\ndeployments:\n  - name: custom\n    model: llama-3.1-8b\n"
                               "    gpu_memory: 80GiB\n    context: 8k\n    concurrency: 4\n"
                               "    activation_memory: 2GiB\n    assert: {fits: true}\n";
    char dir[] = "/tmp/kvplan-tui-XXXXXX", in[256], out[256], v[64];
    struct tui_state *s, *t;
    struct kvp_error err = {0};
    FILE *f;

    load_catalogs();
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(in, sizeof in, "%s/in.yaml", dir);
    snprintf(out, sizeof out, "%s/out.yaml", dir);
    ck_assert_ptr_nonnull(f = fopen(in, "w"));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_kvp_ok(tui_init(&s, cat, gpus, in, &err), err);
    ck_assert_ptr_null(s->gpu);
    ck_assert_uint_eq(s->d.gpu_memory, 80ull << 30);
    ck_assert_uint_eq(s->d.activation_memory, 2ull << 30);
    ck_assert_str_eq(tui_field_value(s, TUI_F_GPU, v, sizeof v), "custom, 80.00 GiB");
    ck_assert_msg(s->ok, "%s", s->err.msg);
    ck_assert(!s->have_roofline);
    ck_assert_kvp_ok(tui_plan_save(s, out, &err), err);
    ck_assert_kvp_ok(tui_init(&t, cat, gpus, out, &err), err);
    ck_assert_uint_eq(t->d.gpu_memory, 80ull << 30);
    ck_assert_uint_eq(t->d.activation_memory, 2ull << 30);
    ck_assert_uint_eq(t->d.context, 8192);
    ck_assert_uint_eq(t->d.concurrency, 4);
    assert_same_fit(&t->fit, &s->fit);
    unlink(in);
    unlink(out);
    rmdir(dir);
    tui_free(s);
    tui_free(t);
    free_catalogs();
}
END_TEST

/* ---- limits --------------------------------------------------------------- */

static const struct bad_edit {
    int down;          /* fields below the model */
    const char *text;  /* typed, then Enter */
    const char *status; /* exact status, or a prefix ending in "..." */
} bad_edits[] = {
    {9, "abc", "context: ..."},
    {9, "0", "context must be between 1 and 1099511627776 (got '0')"},
    {10, "99999999999999999999", "batch: ..."},
    {5, "1.5", "mem fraction must be a number in (0, 1] (got '1.5')"},
    {5, "x", "mem fraction must be a number in (0, 1] (got 'x')"},
    {4, "vllx", "unknown engine 'vllx' (vllm, sglang, trtllm, llamacpp, hf-dynamic, hf-static, hf-quantized, ideal)"},
    {7, "int3", "K cache: ..."},
    {2, "5000", "GPUs must be between 1 and 4096 (got '5000')"},
    {11, "65537", "block size must be between 1 and 65536 (got '65537')"},
};

/* Field by field: a struct copy leaves padding bytes undefined, so memcmp
 * would compare garbage (valgrind says so). */
static bool same_format(const struct kvp_format *a, const struct kvp_format *b)
{
    return a->dtype == b->dtype && a->group == b->group && a->axis == b->axis && a->scale == b->scale &&
           a->zero_point == b->zero_point && a->residual == b->residual && a->outliers_ppm == b->outliers_ppm;
}

/* Weights choices compare by their canonical names. */
static bool same_wstore(const struct kvp_wstore *a, const struct kvp_wstore *b)
{
    char x[96], y[96];
    return strcmp(kvp_wstore_name(a, x, sizeof x), kvp_wstore_name(b, y, sizeof y)) == 0;
}

static bool same_deploy(const struct kvp_deploy *a, const struct kvp_deploy *b)
{
    return a->engine == b->engine && a->gpu_memory == b->gpu_memory && a->n_gpus == b->n_gpus && a->tp == b->tp &&
           a->pp == b->pp && a->util == b->util && same_format(&a->k, &b->k) && same_format(&a->v, &b->v) &&
           same_wstore(&a->w, &b->w) && a->weights_memory == b->weights_memory &&
           a->activation_memory == b->activation_memory && a->non_torch_memory == b->non_torch_memory &&
           a->kv_memory == b->kv_memory && a->cpu_offload == b->cpu_offload && a->context == b->context &&
           a->concurrency == b->concurrency && a->block_size == b->block_size &&
           a->max_batched_tokens == b->max_batched_tokens && a->n_ubatch == b->n_ubatch && a->n_seq == b->n_seq &&
           a->kv_unified == b->kv_unified && a->swa_full == b->swa_full && a->mla_v == b->mla_v &&
           a->flash_attn == b->flash_attn && memcmp(a->split, b->split, sizeof a->split) == 0;
}

START_TEST(bad_edit_keeps_setup)
{
    const struct bad_edit *c = &bad_edits[_i];
    struct tui_state *s;
    struct kvp_deploy before;
    size_t n = strlen(c->status);

    load_catalogs();
    s = start("llama-3.1-8b");
    before = s->d;
    for (int i = 0; i < c->down; i++)
        tui_handle(s, DN);
    tui_handle(s, EN);
    ck_assert_int_eq(s->mode, TUI_MODE_EDIT);
    type(s, c->text);
    tui_handle(s, EN);
    ck_assert_int_eq(s->mode, TUI_MODE_MAIN);
    ck_assert(s->status_error);
    if (n > 3 && strcmp(c->status + n - 3, "...") == 0)
        ck_assert_msg(strncmp(s->status, c->status, n - 3) == 0, "got '%s'", s->status);
    else
        ck_assert_str_eq(s->status, c->status);
    ck_assert(same_deploy(&before, &s->d));
    ck_assert(s->ok);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(quit_help_resize_escape)
{
    struct tui_state *s;
    uint64_t ctx;
    load_catalogs();
    s = start("llama-3.1-8b");
    ctx = s->d.context;
    ck_assert_int_eq(tui_handle(s, TUI_KEY_RESIZE), TUI_REDRAW);
    ck_assert_int_eq(tui_handle(s, '?'), TUI_REDRAW);
    ck_assert_int_eq(s->mode, TUI_MODE_HELP);
    ck_assert_int_eq(tui_handle(s, 'q'), TUI_REDRAW); /* q closes help first */
    ck_assert_int_eq(s->mode, TUI_MODE_MAIN);
    /* q while typing is a character, Esc drops the typing */
    tui_handle(s, TUI_KEY_END);
    tui_handle(s, UP);
    tui_handle(s, UP);
    tui_handle(s, EN);
    ck_assert_int_eq(tui_handle(s, 'q'), TUI_REDRAW);
    ck_assert_str_eq(s->input, "q");
    ck_assert_int_eq(tui_handle(s, ESC), TUI_REDRAW);
    ck_assert_uint_eq(s->d.context, ctx);
    ck_assert_int_eq(tui_handle(s, 'Z'), TUI_HANDLED);
    ck_assert_int_eq(tui_handle(s, 'q'), TUI_QUIT);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(arrows_stop_at_bounds)
{
    struct tui_state *s;
    load_catalogs();
    s = start("llama-3.1-8b");
    tui_handle(s, TUI_KEY_END);
    tui_handle(s, UP); /* batch */
    for (int i = 0; i < 5; i++)
        tui_handle(s, LT);
    ck_assert_uint_eq(s->d.concurrency, 1);
    tui_handle(s, UP); /* context */
    for (int i = 0; i < 40; i++)
        tui_handle(s, LT);
    ck_assert_uint_eq(s->d.context, 1);
    ck_assert(s->ok);
    for (int i = 0; i < 60; i++)
        tui_handle(s, RT);
    ck_assert_uint_eq(s->d.context, 1ull << 40);
    ck_assert(!s->ok || !s->fit.fits); /* 2^40 tokens: refused or short, never wrapped */
    tui_handle(s, TUI_KEY_HOME);
    tui_handle(s, DN);
    tui_handle(s, DN); /* GPUs */
    for (int i = 0; i < 20; i++)
        tui_handle(s, RT);
    ck_assert_uint_eq(s->n_gpus, 4096);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(unknown_model_and_gpu)
{
    struct tui_state *s;
    struct kvp_error err = {0};
    load_catalogs();
    ck_assert_int_eq(tui_init(&s, cat, gpus, "llama-9", &err), KVP_ERR_NOTFOUND);
    ck_assert_ptr_null(s);
    s = start("llama-3.1-8b");
    type(s, "m");
    type(s, "/nonexistent/model.yaml");
    ck_assert_uint_eq(s->n_pick, 0);
    tui_handle(s, EN);
    ck_assert(s->status_error);
    ck_assert_str_eq(s->model->name, "llama-3.1-8b");
    type(s, "gzzz");
    tui_handle(s, EN);
    ck_assert(s->status_error);
    ck_assert_str_eq(s->gpu->id, "h100-sxm");
    /* a typed path that exists opens as a model file */
    type(s, "mmodels/qwen3-8b.yaml");
    tui_handle(s, EN);
    ck_assert_msg(!s->status_error, "%s", s->status);
    ck_assert_str_eq(s->model->name, "qwen3-8b");
    ck_assert(s->ok);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(save_errors)
{
    struct tui_state *s;
    struct kvp_error err = {0};
    load_catalogs();
    s = start("llama-3.1-8b");
    ck_assert_int_eq(tui_plan_save(s, "/nonexistent-dir/x.yaml", &err), KVP_ERR_IO);
    ck_assert_str_eq(err.msg, "cannot write '/nonexistent-dir/x.yaml': No such file or directory");
    ck_assert_int_eq(tui_plan_save(s, "", &err), KVP_ERR_USAGE);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(bad_plan_files)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"kvplan_plan: 2\ndeployments: []\n", ":1:14: 'kvplan_plan' must be 1 (got 2)"},
        {"kvplan_plan: 1\n", ":1:1: the plan has no deployments"},
        {"kvplan_plan: 1\ndeployments:\n  - name: a\n    model: llama-3.1-8b\n    util: 2\n    assert: {fits: true}\n",
         ":5:11: 'util': must be a fraction in (0, 1] (got '2')"},
        {"kvplan_plan: 1\ndeployments:\n  - name: a\n    model: llama-3.1-8b\n    gpu: h300\n    assert: {fits: true}\n",
         ":5:10: 'gpu': unknown GPU 'h300' (h100-sxm, ..."},
    };
    char dir[] = "/tmp/kvplan-tui-plan-XXXXXX", path[256];
    load_catalogs();
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/bad.yaml", dir);
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct tui_state *s = NULL;
        struct kvp_error err = {0};
        char text[KVP_ERROR_TEXT_MAX], want[512];
        FILE *f = fopen(path, "w");
        size_t n = strlen(cases[i].msg);
        ck_assert_ptr_nonnull(f);
        fputs(cases[i].text, f);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_ne(tui_init(&s, cat, gpus, path, &err), KVP_OK);
        ck_assert_ptr_null(s);
        snprintf(want, sizeof want, "%s%s", path, cases[i].msg);
        kvp_error_text(&err, text, sizeof text);
        if (strcmp(cases[i].msg + n - 3, "...") == 0)
            ck_assert_msg(strncmp(text, want, strlen(want) - 3) == 0, "got '%s'", text);
        else
            ck_assert_str_eq(text, want);
    }
    unlink(path);
    rmdir(dir);
    free_catalogs();
}
END_TEST

/* One keypress must recompute well inside a 60 Hz frame (16.7 ms). */
START_TEST(recompute_is_fast)
{
    struct tui_state *s;
    double t;
    load_catalogs();
    s = start("deepseek-v3");
    t = tui_bench(s, 20);
    ck_assert(t > 0);
    ck_assert_msg(t < 0.016, "%.3f ms per recompute", t * 1e3);
    ck_assert(tui_bench(s, 0) == 0.0);
    tui_free(s);
    free_catalogs();
}
END_TEST

/* The weights field says what "as stored" means for the model: its stored types, most bytes first. */
START_TEST(weights_as_stored)
{
    static const struct {
        const char *model, *want;
    } cases[] = {
        {"deepseek-v3", "stored fp8+bf16"},
        {"gpt-oss-120b", "stored mxfp4+bf16"},
        {"llama-3.1-8b", "stored bf16"},
    };
    char v[64];
    load_catalogs();
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct tui_state *s = start(cases[i].model);
        ck_assert_str_eq(tui_field_value(s, TUI_F_WDTYPE, v, sizeof v), cases[i].want);
        tui_free(s);
    }
    free_catalogs();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tui");
    TCase *core = tcase_create("core");
    TCase *limits = tcase_create("limits");

    tcase_set_timeout(core, 60);
    tcase_set_timeout(limits, 60);
    tcase_add_loop_test(core, keys_match_fit, 0, (int)N_ELEMS(key_cases));
    tcase_add_loop_test(core, panels_add_up, 0, 4);
    tcase_add_test(core, sliding_kind_capped);
    tcase_add_test(core, explain_switches);
    tcase_add_test(core, plan_round_trip);
    tcase_add_test(core, weights_as_stored);
    tcase_add_test(core, plan_without_gpu);
    tcase_add_loop_test(limits, bad_edit_keeps_setup, 0, (int)N_ELEMS(bad_edits));
    tcase_add_test(limits, quit_help_resize_escape);
    tcase_add_test(limits, arrows_stop_at_bounds);
    tcase_add_test(limits, unknown_model_and_gpu);
    tcase_add_test(limits, save_errors);
    tcase_add_test(limits, bad_plan_files);
    tcase_add_test(limits, recompute_is_fast);
    suite_add_tcase(s, core);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
