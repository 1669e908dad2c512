/* check_tui.c -- the TUI's state without a terminal: key sequences change
 * the setup, and the deployment and figures equal what `kvplan fit` builds
 * and computes for the same settings (kvp_settings_put + kvp_settings_apply,
 * as src/cli/common.c does); every setting is a field; plan files round-trip
 * to an equal deployment; bad input is a status message, never a changed
 * setup. Tests run from the repository root.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "kvplan/catalog.h"
#include "kvplan/deploy.h"
#include "kvplan/gpu.h"
#include "kvplan/plan.h"
#include "kvplan/settings.h"
#include "kvplan/sim.h"
#include "../src/tui/state.h"
#include "kvplan/emit.h"
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
    test_catalogs_load(&cat, &gpus);
}

static void free_catalogs(void)
{
    test_catalogs_free(&cat, &gpus);
}

static struct tui_state *start(const char *model)
{
    struct tui_state *s = NULL;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(tui_init(&s, cat, gpus, model, NULL, NULL, &err), err);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void type(struct tui_state *s, const char *text)
{
    for (; *text; text++)
        tui_handle(s, (unsigned char)*text);
}

/* Select the field of key with Up/Down, as a user would. */
static void go_to(struct tui_state *s, const char *key)
{
    int f = tui_field_find(key);
    ck_assert_msg(f >= 0, "no field '%s'", key);
    tui_handle(s, TUI_KEY_HOME);
    for (uint32_t i = 0; i < tui_field_count() && s->field != (uint32_t)f; i++)
        tui_handle(s, DN);
    ck_assert_uint_eq(s->field, (uint32_t)f);
}

/* Keys in words, separated by spaces: "@key" selects the field of a setting,
 * "=text" types text into it (Enter, text, Enter), "/text" types text alone,
 * 'c is the key c, and RT LT UP DN EN ESC + - the named keys. */
static void script(struct tui_state *s, const char *words)
{
    char w[128];
    for (const char *p = words; *p;) {
        size_t n = strcspn(p, " ");
        ck_assert_uint_lt(n, sizeof w);
        memcpy(w, p, n);
        w[n] = '\0';
        p += n + (p[n] == ' ');
        if (w[0] == '@') {
            go_to(s, w + 1);
        } else if (w[0] == '=') {
            ck_assert_int_eq(s->mode, TUI_MODE_MAIN);
            tui_handle(s, EN);
            ck_assert_int_eq(s->mode, TUI_MODE_EDIT);
            type(s, w + 1);
            tui_handle(s, EN);
        } else if (w[0] == '/') {
            type(s, w + 1);
        } else if (w[0] == '\'') {
            ck_assert_int_ne(tui_handle(s, (unsigned char)w[1]), TUI_QUIT);
        } else {
            static const struct {
                const char *name;
                int key;
            } named[] = {{"RT", RT},   {"LT", LT}, {"UP", UP}, {"DN", DN}, {"EN", EN},
                         {"ESC", ESC}, {"BS", BS}, {"+", '+'}, {"-", '-'}};
            size_t i = 0;
            while (i < N_ELEMS(named) && strcmp(named[i].name, w) != 0)
                i++;
            ck_assert_msg(i < N_ELEMS(named), "unknown key '%s'", w);
            tui_handle(s, named[i].key);
        }
    }
}

/* What `kvplan fit MODEL --KEY VALUE ...` builds: settings.h's rows put and
 * applied, with the GPU the TUI starts on unless one is named. */
static void cli_deploy(const struct kvp_model *m, const char *const *kv, struct kvp_deploy *d, const struct kvp_gpu **g)
{
    struct kvp_settings st;
    struct kvp_error err = {0};
    int bad;
    kvp_settings_clear(&st);
    ck_assert_kvp_ok(kvp_settings_put(&st, "gpu", gpus->gpus[0].id, &err), err);
    for (; *kv; kv++) {
        char key[64];
        const char *eq = strchr(*kv, '=');
        ck_assert_ptr_nonnull(eq);
        snprintf(key, sizeof key, "%.*s", (int)(eq - *kv), *kv);
        ck_assert_kvp_ok(kvp_settings_put(&st, key, eq + 1, &err), err);
    }
    ck_assert_kvp_ok(kvp_settings_apply(&st, m, gpus, d, g, &bad, &err), err);
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

/* Every member a setting sets (settings.h's table), and the release it
 * resolves to (a plan names the release the TUI ran). */
static bool same_deploy(const struct kvp_deploy *a, const struct kvp_deploy *b)
{
    return a->engine == b->engine && kvp_deploy_release(a) == kvp_deploy_release(b) && a->gpu_memory == b->gpu_memory &&
           a->n_gpus == b->n_gpus && a->tp == b->tp && a->pp == b->pp && a->dp == b->dp &&
           a->dp_attention == b->dp_attention && a->util == b->util &&
           same_format(&a->k, &b->k) && same_format(&a->v, &b->v) && same_wstore(&a->w, &b->w) &&
           a->weights_memory == b->weights_memory && a->activation_memory == b->activation_memory &&
           a->non_torch_memory == b->non_torch_memory && a->cuda_graph_memory == b->cuda_graph_memory &&
           a->activation_given == b->activation_given && a->non_torch_given == b->non_torch_given &&
           a->kv_memory == b->kv_memory && a->cpu_offload == b->cpu_offload && a->context == b->context &&
           a->concurrency == b->concurrency && a->block_size == b->block_size &&
           a->max_batched_tokens == b->max_batched_tokens && a->max_num_seqs == b->max_num_seqs &&
           a->n_ubatch == b->n_ubatch && a->n_batch == b->n_batch && a->n_seq == b->n_seq &&
           a->kv_unified == b->kv_unified && a->swa_full == b->swa_full && a->mla_v == b->mla_v &&
           a->flash_attn == b->flash_attn && memcmp(a->split, b->split, sizeof a->split) == 0 &&
           a->expert_parallel == b->expert_parallel && a->redundant_experts == b->redundant_experts;
}

/* s's deployment is the CLI's for the same settings, and so are its figures. */
static void assert_like_cli(const struct tui_state *s, const char *const *kv, const char *what)
{
    struct kvp_deploy d;
    const struct kvp_gpu *g;
    struct kvp_fit f;
    struct kvp_error err = {0};
    cli_deploy(s->model, kv, &d, &g);
    ck_assert_msg(same_deploy(&s->d, &d), "%s: the TUI's deployment is not the CLI's", what);
    ck_assert_ptr_eq(s->gpu, g);
    ck_assert_msg(s->ok, "%s: %s", what, s->err.msg);
    ck_assert_kvp_ok(kvp_fit_compute(s->model, &d, &f, &err), err);
    assert_same_fit(&s->fit, &f);
}

/* ---- key sequences against `kvplan fit` --------------------------------- */

static const struct key_case {
    const char *name;
    const char *model;
    const char *keys;      /* script() */
    const char *model_out; /* the model at the end */
    const char *want[8];   /* the same settings as `kvplan fit` options, KEY=VALUE */
    uint64_t pin_tokens;   /* from `kvplan fit` output (0: not pinned) */
    uint64_t pin_max_context;
} key_cases[] = {
    /* kvplan fit llama-3.1-8b --gpu h100 (vllm 0.21.0): 451,168 KV tokens, 28,198 blocks (reserve estimated) */
    {"defaults", "llama-3.1-8b", "", "llama-3.1-8b", {NULL}, 451168, 131072},
    /* kvplan fit llama-3.1-8b --gpu h100 --context 8k --concurrency 32: max context 14,096 */
    {"context and batch typed", "llama-3.1-8b", "@context =8k @concurrency =32", "llama-3.1-8b",
     {"context=8k", "concurrency=32", NULL}, 451168, 14096},
    {"context halved by arrow", "llama-3.1-8b", "@context LT LT", "llama-3.1-8b", {"context=32768", NULL}, 0, 0},
    {"context by + and -", "llama-3.1-8b", "@context =8k + + -", "llama-3.1-8b", {"context=9216", NULL}, 0, 0},
    {"gpu picked by filter", "llama-3.1-8b", "'g /h200 EN", "llama-3.1-8b", {"gpu=h200", NULL}, 0, 0},
    {"gpu stepped by arrow", "llama-3.1-8b", "@gpu RT LT RT", "llama-3.1-8b", {"gpu=h100-pcie", NULL}, 0, 0},
    {"model picked by filter, tp doubled", "llama-3.1-8b", "'m /3.1-70 EN @tp RT", "llama-3.1-70b",
     {"tp=2", NULL}, 0, 0},
    {"engine next: sglang", "qwen3-8b", "@engine RT", "qwen3-8b", {"engine=sglang", NULL}, 0, 0},
    {"engine typed: trtllm", "qwen3-8b", "@engine =trtllm", "qwen3-8b", {"engine=trtllm", NULL}, 0, 0},
    {"2 GPUs as TP, then llamacpp", "gemma-3-27b", "@gpus RT EN @engine =llamacpp", "gemma-3-27b",
     {"tp=2", "engine=llamacpp", NULL}, 0, 0},
    {"llamacpp on 2 GPUs", "gemma-3-27b", "@engine =llamacpp @gpus RT", "gemma-3-27b",
     {"engine=llamacpp", "gpus=2", NULL}, 0, 0},
    /* vLLM has one --kv-cache-dtype: K and V change together */
    {"V stepped to fp8, K typed fp8", "llama-3.1-8b", "@v_dtype RT RT @k_dtype =fp8", "llama-3.1-8b",
     {"kv_dtype=fp8", NULL}, 0, 0},
    {"K alone under llamacpp", "llama-3.1-8b", "@engine =llamacpp @k_dtype =q8_0", "llama-3.1-8b",
     {"engine=llamacpp", "k_dtype=q8_0", NULL}, 0, 0},
    {"kv_dtype typed", "llama-3.1-8b", "@engine =llamacpp @k_dtype =q8_0 @kv_dtype =q8_0 @flash_attn RT",
     "llama-3.1-8b", {"engine=llamacpp", "kv_dtype=q8_0", "flash_attn=on", NULL}, 0, 0},
    {"memory fraction down one step", "llama-3.1-8b", "@util LT", "llama-3.1-8b", {"util=0.91", NULL}, 0, 0},
    {"memory fraction back to default", "llama-3.1-8b", "@util =0.8 @util =", "llama-3.1-8b", {NULL}, 0, 0},
    {"weights fp8, block 32", "qwen2.5-72b", "@weight_dtype =fp8 @block_size RT", "qwen2.5-72b",
     {"weight_dtype=fp8", "block_size=32", NULL}, 0, 0},
    {"tp 2, then 4 GPUs as PP: pp 2", "llama-3.1-70b", "@tp =2 @gpus =4 'p", "llama-3.1-70b",
     {"tp=2", "pp=2", NULL}, 0, 0},
    {"4 GPUs, Enter: TP", "llama-3.1-70b", "@gpus =4 EN", "llama-3.1-70b", {"tp=4", NULL}, 0, 0},
    {"MLA model, batch 8 by arrows", "deepseek-v2-lite", "@concurrency RT RT RT", "deepseek-v2-lite",
     {"concurrency=8", NULL}, 0, 0},
    {"sizes by arrows", "llama-3.1-8b", "@cuda_graph_memory RT RT @activation_memory RT + @cpu_offload RT LT",
     "llama-3.1-8b", {"cuda_graph_memory=2GiB", "activation_memory=2GiB", NULL}, 0, 0},
    {"flags and switches", "llama-3.1-8b", "@engine =llamacpp @swa_full RT @kv_unified RT RT @flash_attn RT RT",
     "llama-3.1-8b", {"engine=llamacpp", "swa_full=true", "kv_unified=false", "flash_attn=off", NULL}, 0, 0},
    {"a memory size for the GPU", "llama-3.1-8b", "@gpu_memory =40GiB", "llama-3.1-8b",
     {"gpu_memory=40GiB", NULL}, 0, 0},
};

START_TEST(keys_match_fit)
{
    const struct key_case *c = &key_cases[_i];
    struct tui_state *s;

    load_catalogs();
    s = start(c->model);
    script(s, c->keys);
    ck_assert_int_eq(s->mode, TUI_MODE_MAIN);
    ck_assert_str_eq(s->model->name, c->model_out);
    assert_like_cli(s, c->want, c->name);
    if (c->pin_tokens)
        ck_assert_uint_eq(s->fit.kv_tokens, c->pin_tokens);
    if (c->pin_max_context)
        ck_assert_uint_eq(s->fit.max_context, c->pin_max_context);
    tui_free(s);
    free_catalogs();
}
END_TEST

/* Save s as a plan in a fresh directory and open it again: an equal
 * deployment, the same figures, and only the plan left in the directory. */
static void assert_plan_round_trip(struct tui_state *s, const char *what)
{
    char dir[] = "/tmp/kvplan-tui-XXXXXX", path[256];
    struct tui_state *t;
    struct kvp_error err = {0};
    DIR *dh;
    struct dirent *e;
    int files = 0;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/setup.plan.yaml", dir);
    tui_handle(s, 's');
    ck_assert_int_eq(s->mode, TUI_MODE_SAVE);
    while (s->input_len)
        tui_handle(s, BS);
    type(s, path);
    tui_handle(s, EN);
    ck_assert_msg(!s->status_error, "%s: %s", what, s->status);
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
    ck_assert_msg(tui_init(&t, cat, gpus, path, NULL, NULL, &err) == KVP_OK, "%s: %s", what, err.msg);
    ck_assert_str_eq(t->model->name, s->model->name);
    ck_assert_msg(same_deploy(&t->d, &s->d), "%s: the plan did not load back to the same deployment", what);
    ck_assert_ptr_eq(t->gpu, s->gpu);
    ck_assert_int_eq(t->ok, s->ok);
    if (s->ok)
        assert_same_fit(&t->fit, &s->fit);
    unlink(path);
    rmdir(dir);
    tui_free(t);
}

/* Every row of settings.h's table is a field: its example value typed into
 * it gives the deployment `kvplan fit --KEY VALUE` gives (llama.cpp's own
 * settings and separate K and V under llama.cpp, as in check_plan.c), and
 * a plan saved from it opens to an equal deployment. */
START_TEST(every_setting_is_a_field)
{
    const struct kvp_setting *k = kvp_setting_at((uint32_t)_i);
    bool llama = strncmp(k->key, "n_", 2) == 0 ||
                 strstr("kv_unified swa_full mla_v flash_attn split k_dtype v_dtype gpus", k->key) != NULL;
    bool sglang_dp = strcmp(k->key, "dp_attention") == 0; /* SGLang's, with 1 < dp dividing tp */
    bool eplb = strcmp(k->key, "redundant_experts") == 0;  /* EPLB's, under expert parallelism of a MoE model */
    const char *want[5] = {llama ? "engine=llamacpp" : sglang_dp ? "engine=sglang" : eplb ? "expert_parallel=true"
                                                                                             : NULL,
                           "tp=2", "dp=2", NULL, NULL};
    uint32_t at = llama || eplb ? 1 : sglang_dp ? 3 : 0;
    char kv[160], v[KVP_SETTING_VALUE_MAX];
    struct tui_state *s;

    load_catalogs();
    s = start(eplb ? "qwen3-30b-a3b" : "llama-3.1-8b");
    if (eplb)
        script(s, "@expert_parallel =true");
    ck_assert_int_ge(tui_field_find(k->key), 1);
    ck_assert_str_eq(tui_field_label((uint32_t)tui_field_find(k->key)), k->key);
    if (llama)
        script(s, "@engine =llamacpp");
    if (sglang_dp)
        script(s, "@engine =sglang @tp =2 @dp =2");
    go_to(s, k->key);
    tui_handle(s, EN);
    type(s, k->example);
    tui_handle(s, EN);
    ck_assert_msg(s->mode == TUI_MODE_MAIN && strncmp(s->status, k->key, strlen(k->key)) != 0, "%s: %s", k->key,
                  s->status);
    ck_assert(tui_field_given(s, s->field));
    snprintf(kv, sizeof kv, "%s=%s", k->key, k->example);
    want[at] = kv;
    want[at + 1] = NULL;
    assert_like_cli(s, want, k->key);
    /* shown as the table prints it */
    ck_assert_ptr_nonnull(strstr(tui_field_value(s, s->field, v, sizeof v),
                                 kvp_setting_text((uint32_t)_i, &s->d, s->gpu, kv, sizeof kv)));
    assert_plan_round_trip(s, k->key);
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
    ck_assert_uint_eq(b.kv, s->fit.kv_bytes_required + s->fit.state_conv_bytes + s->fit.state_ssm_bytes);
    /* the reserve as `kvplan fit` and the page name it; the rest of the GPU apart */
    ck_assert_uint_eq(b.reserve, s->fit.reserve.activation + s->fit.reserve.non_torch + s->fit.reserve.cuda_graph);
    if (s->fit.fits) {
        ck_assert_uint_eq(b.weights + b.kv + b.reserve + b.free + b.rest, b.total);
        ck_assert_uint_gt(b.rest, (uint64_t)((1.0 - s->fit.util) * (double)b.total) - 1);
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

/* Defects a user met (issue #36): arrows on the model field swapped the model
 * unasked; typing a GPU's exact id picked the first that contained it (l4 ->
 * l40s); a model with a shorter default context changed it without a word. */
START_TEST(picks_as_typed)
{
    struct tui_state *s;
    load_catalogs();
    s = start("llama-3.1-8b");
    script(s, "@model RT LT RT");
    ck_assert_str_eq(s->model->name, "llama-3.1-8b");
    ck_assert_str_eq(s->status, "Enter or m picks the model (type to filter)");
    script(s, "'g /l4");
    ck_assert_uint_ge(s->n_pick, 2); /* l40s and l4 */
    ck_assert_str_eq(tui_pick_name(s, s->pick_sel), "l4");
    script(s, "BS /40");
    ck_assert_str_eq(tui_pick_name(s, s->pick_sel), "l40s");
    script(s, "BS EN");
    ck_assert_str_eq(s->gpu->id, "l4");
    script(s, "'m /mistral EN");
    ck_assert_str_eq(s->model->name, "mistral-7b-v0.1");
    ck_assert_uint_eq(s->d.context, 32768);
    ck_assert_msg(strstr(s->status, "context 32,768, mistral-7b-v0.1's longest (was llama-3.1-8b's 131,072)"), "%s",
                  s->status);
    tui_free(s);
    free_catalogs();
}
END_TEST

/* Saving a run that preempted asks the limit to assert (0 unless typed; none
 * when emptied) instead of writing the run's own count, which would make an
 * overloaded run's failure the CI's limit. */
START_TEST(save_asks_preemption_limit)
{
    static const struct {
        const char *keys;  /* typed at the question */
        bool written;      /* a max_preemptions check is written */
        double limit;
    } cases[] = {{"EN", true, 0}, {"BS /7 EN", true, 7}, {"BS EN", false, 0}};
    char dir[] = "/tmp/kvplan-tui-XXXXXX", out[256];
    struct tui_state *s;
    struct kvp_error err = {0};
    load_catalogs();
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/p.yaml", dir);
    s = start("llama-3.1-8b");
    script(s, "'w @rate =0 @prompt =2k @requests =500 @prefix =1k @prefix_share =0.5");
    ck_assert_msg(s->sim_ok && s->sim.preemptions > 0, "%s", s->status);
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_plan q = {0};
        bool found = false;
        tui_handle(s, 's');
        while (s->input_len)
            tui_handle(s, BS);
        type(s, out);
        tui_handle(s, EN);
        ck_assert_int_eq(s->mode, TUI_MODE_ASK_LIMIT);
        ck_assert_str_eq(s->input, "0");
        script(s, cases[i].keys);
        ck_assert_int_eq(s->mode, TUI_MODE_MAIN);
        ck_assert_msg(strncmp(s->status, "saved ", 6) == 0, "%s", s->status);
        ck_assert_kvp_ok(kvp_plan_load(&q, out, cat, gpus, &err), err);
        for (uint32_t c = 0; c < q.deps[0].n_checks; c++)
            if (q.deps[0].checks[c].kind == KVP_CHECK_MAX_PREEMPTIONS) {
                found = true;
                ck_assert(q.deps[0].checks[c].limit == cases[i].limit);
            }
        ck_assert_msg(found == cases[i].written, "case %zu", i);
        kvp_plan_release(&q);
    }
    /* Esc saves nothing */
    unlink(out);
    script(s, "'s");
    while (s->input_len)
        tui_handle(s, BS);
    type(s, out);
    script(s, "EN ESC");
    ck_assert_str_eq(s->status, "not saved");
    ck_assert_int_ne(access(out, F_OK), 0);
    tui_free(s);
    rmdir(dir);
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
    /* e: the launch command, as `kvplan fit --emit` prints it for the same setup */
    ck_assert_int_eq(tui_handle(s, 'e'), TUI_REDRAW);
    tui_explain_text(s, &a);
    ck_assert_kvp_ok(kvp_emit_command(s->model, &s->d, &s->fit, &b, &s->err), s->err);
    ck_assert_str_eq(a.data, b.data);
    ck_assert_ptr_nonnull(strstr(a.data, "vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 1"));
    ck_assert_int_eq(tui_handle(s, 'x'), TUI_REDRAW); /* x cycles back to the capacity derivation */
    ck_assert_int_eq(s->explain, TUI_EXPLAIN_FIT);
    kvp_buf_release(&a);
    kvp_buf_release(&b);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(plan_round_trip)
{
    struct tui_state *s;
    load_catalogs();
    s = start("llama-3.1-70b");
    /* 4 GPUs as TP, engine trtllm, util 0.85, K fp8 then V f16 (TRT-LLM has one kv_cache_dtype: the
     * last edit sets both), 16k x 12, block 64 */
    script(s, "@gpus =4 EN @engine RT RT @util =0.85 @k_dtype =fp8 @v_dtype =f16 @context =16k @concurrency =12 "
              "@block_size =64");
    ck_assert_uint_eq(s->d.n_gpus, 4);
    ck_assert_uint_eq(s->d.tp, 4);
    ck_assert_uint_eq(s->d.pp, 1);
    ck_assert_int_eq(s->d.engine, KVP_ENGINE_TRTLLM);
    ck_assert(s->d.util == 0.85);
    ck_assert_int_eq(s->d.k.dtype, KVP_DTYPE_F16);
    ck_assert_int_eq(s->d.v.dtype, KVP_DTYPE_F16);
    ck_assert_uint_eq(s->d.context, 16384);
    ck_assert_uint_eq(s->d.concurrency, 12);
    ck_assert_uint_eq(s->d.block_size, 64);
    assert_plan_round_trip(s, "trtllm on 4 GPUs");
    /* llama.cpp with K and V apart, split layers and its own settings */
    script(s, "@engine =llamacpp @gpus =2 @split =50,30 @k_dtype =q8_0 @v_dtype =q4_0 @flash_attn =on @n_seq =2 "
              "@weight_dtype =q4_k_m");
    ck_assert_msg(s->ok, "%s", s->err.msg);
    assert_plan_round_trip(s, "llamacpp, split");
    tui_free(s);
    free_catalogs();
}
END_TEST

/* `kvplan tui MODEL --tp 2 --engine sglang ...` starts where `kvplan fit` with
 * those options is; a setting that does not apply names its row. */
START_TEST(command_line_settings)
{
    static const char *const kv[] = {"engine=sglang", "tp=2", "context=16k", "kv_dtype=fp8", NULL};
    struct kvp_settings set;
    struct tui_state *s = NULL;
    struct kvp_error err = {0};
    int bad = 99;

    load_catalogs();
    kvp_settings_clear(&set);
    for (const char *const *p = kv; *p; p++) {
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(*p, "="), *p);
        ck_assert_kvp_ok(kvp_settings_put(&set, key, strchr(*p, '=') + 1, &err), err);
    }
    ck_assert_kvp_ok(tui_init(&s, cat, gpus, "qwen3-8b", &set, &bad, &err), err);
    assert_like_cli(s, kv, "command line");
    ck_assert(tui_field_given(s, (uint32_t)tui_field_find("tp")));
    ck_assert(!tui_field_given(s, (uint32_t)tui_field_find("util")));
    tui_free(s);
    ck_assert_kvp_ok(kvp_settings_put(&set, "gpu", "h300", &err), err);
    ck_assert_int_ne(tui_init(&s, cat, gpus, "qwen3-8b", &set, &bad, &err), KVP_OK);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(bad, kvp_setting_find("gpu"));
    ck_assert_str_eq(err.msg,
                     "unknown GPU 'h300' (h100-sxm, h100-pcie, h200, b200, a100-40gb, a100-80gb, l40s, l4, a10g, "
                     "rtx-4090, rtx-3090, mi300x, mi325x, m1-16gb, m2-max-32gb, m1-max-64gb, m2-max-96gb)");
    free_catalogs();
}
END_TEST

/* More GPUs than tp x pp: the TUI asks whether they are tensor or pipeline
 * parallel, TP by default; Esc keeps the GPUs as they were. */
START_TEST(gpus_ask_tp_or_pp)
{
    struct tui_state *s;
    load_catalogs();
    s = start("llama-3.1-70b");
    script(s, "@gpus =4");
    ck_assert_int_eq(s->mode, TUI_MODE_ASK_SPLIT);
    ck_assert_str_eq(s->status, "4 GPUs: t = TP (tp 4 x pp 1), p = PP (tp 1 x pp 4)? Enter: t, Esc: cancel");
    ck_assert_uint_eq(s->d.n_gpus, 1); /* nothing changed before the answer */
    ck_assert_int_eq(tui_handle(s, 'Z'), TUI_HANDLED);
    ck_assert_int_eq(s->mode, TUI_MODE_ASK_SPLIT);
    tui_handle(s, EN);
    ck_assert_uint_eq(s->d.tp, 4);
    ck_assert_uint_eq(s->d.pp, 1);
    ck_assert_ptr_nonnull(strstr(s->status, "4 GPUs: tp 4 x pp 1; fits"));
    /* 8 as PP: tp stays 4, pp 2 */
    script(s, "RT 'p");
    ck_assert_uint_eq(s->d.tp, 4);
    ck_assert_uint_eq(s->d.pp, 2);
    ck_assert_uint_eq(s->d.n_gpus, 8);
    /* 6 as TP: 6 / pp 2 = tp 3 */
    script(s, "=6 't");
    ck_assert_uint_eq(s->d.tp, 3);
    ck_assert_uint_eq(s->d.pp, 2);
    /* 5 as PP: tp 3 does not divide 5, so tp 1 x pp 5 */
    script(s, "=5 'p");
    ck_assert_uint_eq(s->d.tp, 1);
    ck_assert_uint_eq(s->d.pp, 5);
    /* the count it has asks nothing */
    script(s, "=5");
    ck_assert_int_eq(s->mode, TUI_MODE_MAIN);
    ck_assert_uint_eq(s->d.pp, 5);
    /* Esc: as it was */
    script(s, "=2 ESC");
    ck_assert_int_eq(s->mode, TUI_MODE_MAIN);
    ck_assert_uint_eq(s->d.n_gpus, 5);
    ck_assert_str_eq(s->status, "GPUs stay 5 (tp 1 x pp 5)");
    /* one GPU asks nothing */
    script(s, "=1");
    ck_assert_int_eq(s->mode, TUI_MODE_MAIN);
    ck_assert_uint_eq(s->d.tp * s->d.pp, 1);
    tui_free(s);
    free_catalogs();
}
END_TEST

/* The engine changes, the settings stay: vllm tp 4 -> llamacpp -> vllm is
 * tp 4 again (it was tp 1 and 140 GiB short, #18); a cache format the new
 * engine cannot store goes back to its default with a note. */
START_TEST(engine_change_keeps_settings)
{
    struct tui_state *s;
    load_catalogs();
    s = start("llama-3.1-70b");
    script(s, "@gpus =4 EN @context =32k @util =0.8 @engine =llamacpp");
    ck_assert_int_eq(s->d.engine, KVP_ENGINE_LLAMACPP);
    ck_assert_uint_eq(s->d.n_gpus, 4);
    ck_assert_uint_eq(s->d.context, 32768);
    script(s, "@engine =vllm");
    assert_like_cli(s, (const char *const[]){"engine=vllm", "tp=4", "context=32k", "util=0.8", NULL}, "round trip");
    ck_assert(s->fit.fits);
    /* q4_0 is llama.cpp's; vLLM cannot store it */
    script(s, "@engine =llamacpp @kv_dtype =q4_0 @flash_attn =on @engine =vllm");
    ck_assert_int_eq(s->d.k.dtype, KVP_DTYPE_BF16);
    ck_assert_ptr_nonnull(strstr(s->status, "vllm takes no q4_0 cache: K and V are now bf16; "));
    ck_assert(!tui_field_given(s, (uint32_t)tui_field_find("kv_dtype")));
    tui_free(s);
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
    ck_assert_kvp_ok(tui_init(&s, cat, gpus, in, NULL, NULL, &err), err);
    ck_assert_ptr_null(s->gpu);
    ck_assert_uint_eq(s->d.gpu_memory, 80ull << 30);
    ck_assert_uint_eq(s->d.activation_memory, 2ull << 30);
    ck_assert_str_eq(tui_field_value(s, (uint32_t)tui_field_find("gpu"), v, sizeof v), "custom, 80.00 GiB");
    ck_assert_msg(s->ok, "%s", s->err.msg);
    ck_assert(!s->have_roofline);
    ck_assert_kvp_ok(tui_plan_save(s, out, &err), err);
    ck_assert_kvp_ok(tui_init(&t, cat, gpus, out, NULL, NULL, &err), err);
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
    const char *key;    /* the field */
    const char *text;   /* typed, then Enter */
    const char *status; /* exact status, or a prefix ending in "..." */
} bad_edits[] = {
    {"context", "abc", "context: ..."},
    {"context", "0", "context: must be 1..18446744073709551615 (got 0)"},
    {"concurrency", "99999999999999999999", "concurrency: ..."},
    {"util", "1.5", "util: must be a fraction in (0, 1] (got '1.5')"},
    {"util", "x", "util: must be a fraction in (0, 1] (got 'x')"},
    {"engine", "vllx",
     "engine: unknown engine 'vllx' (vllm, sglang, trtllm, llamacpp, ollama, hf-dynamic, hf-static, hf-quantized, "
     "ideal)"},
    {"k_dtype", "int3", "k_dtype: ..."},
    {"gpus", "5000000", "gpus: must be 1..1048576 (got 5000000)"},
    {"block_size", "65537x", "block_size: ..."},
    {"gpu_memory", "80", "gpu_memory: '80' has no unit: ..."},
    {"split", "20,,3", "split: '20,,3' is not a list of layer counts such as 41,23"},
    {"weight_dtype", "q9_k", "weight_dtype: ..."},
    {"swa_full", "maybe", "swa_full: must be true or false (got 'maybe')"},
};

START_TEST(bad_edit_keeps_setup)
{
    const struct bad_edit *c = &bad_edits[_i];
    struct tui_state *s;
    struct kvp_deploy before;
    struct kvp_settings set;
    size_t n = strlen(c->status);

    load_catalogs();
    s = start("llama-3.1-8b");
    before = s->d;
    set = s->set;
    go_to(s, c->key);
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
    ck_assert_uint_eq(set.given, s->set.given);
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
    go_to(s, "context");
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
    go_to(s, "concurrency");
    for (int i = 0; i < 5; i++)
        tui_handle(s, LT);
    ck_assert_uint_eq(s->d.concurrency, 1);
    go_to(s, "context");
    for (int i = 0; i < 40; i++)
        tui_handle(s, LT);
    ck_assert_uint_eq(s->d.context, 1);
    ck_assert(s->ok);
    for (int i = 0; i < 70; i++)
        tui_handle(s, RT);
    ck_assert_uint_eq(s->d.context, UINT64_MAX); /* doubling saturates */
    ck_assert(!s->ok || !s->fit.fits);           /* refused or short, never wrapped */
    /* the GPU count stops at the table's 2^20; each step asks TP or PP */
    go_to(s, "gpus");
    for (int i = 0; i < 25; i++) {
        tui_handle(s, RT);
        if (s->mode == TUI_MODE_ASK_SPLIT)
            tui_handle(s, EN);
    }
    ck_assert_uint_eq(s->d.n_gpus, 1u << 20);
    ck_assert_str_eq(s->status, "gpus: must be 1..1048576 (got 2097152)");
    /* a size halved below a GiB goes back to its default */
    script(s, "@cpu_offload RT LT");
    ck_assert(!tui_field_given(s, s->field));
    ck_assert_uint_eq(s->d.cpu_offload, 0);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(unknown_model_and_gpu)
{
    struct tui_state *s;
    struct kvp_error err = {0};
    load_catalogs();
    ck_assert_int_eq(tui_init(&s, cat, gpus, "llama-9", NULL, NULL, &err), KVP_ERR_NOTFOUND);
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
        {"kvplan_plan: 1\ndeployments:\n  - name: a\n    model: llama-3.1-8b\n    gpu: h300\n    assert: {fits: "
         "true}\n",
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
        ck_assert_int_ne(tui_init(&s, cat, gpus, path, NULL, NULL, &err), KVP_OK);
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
        ck_assert_str_eq(tui_field_value(s, (uint32_t)tui_field_find("weight_dtype"), v, sizeof v), cases[i].want);
        tui_free(s);
    }
    free_catalogs();
}
END_TEST

/* weight_dtype auto shows what it chose and chooses again when the target
 * changes (kvp_deploy_pick_weights; check_deploy weight_dtype_auto): 70B on
 * one H100 under llama.cpp at 131,072 tokens takes q3_k_m, at 8,192 q8_0
 * (69.8 GiB + 2.5 GiB of cache on 79.19 GiB). A plan saved says auto. */
START_TEST(weights_auto)
{
    struct tui_state *s;
    char v[64];
    load_catalogs();
    s = start("llama-3.1-70b");
    script(s, "@engine =llamacpp @weight_dtype =auto");
    ck_assert_msg(s->ok, "%s", s->err.msg);
    ck_assert_str_eq(tui_field_value(s, (uint32_t)tui_field_find("weight_dtype"), v, sizeof v), "auto -> q3_k_m");
    script(s, "@context =8k");
    ck_assert_str_eq(tui_field_value(s, (uint32_t)tui_field_find("weight_dtype"), v, sizeof v), "auto -> q8_0");
    assert_plan_round_trip(s, "llamacpp, weights auto");
    tui_free(s);
    free_catalogs();
}
END_TEST

/* ---- the simulate view ---------------------------------------------------- */

/* kvp_sim_run of workload syn on `kvplan fit MODEL --KEY VALUE ...`'s
 * deployment, as `kvplan simulate` sets it up (the GPU's roofline). */
static void cli_simulate(const struct kvp_model *m, const char *const *kv, const struct kvp_synth *syn,
                         struct kvp_sim_result *r)
{
    struct kvp_deploy d;
    const struct kvp_gpu *g;
    struct kvp_fit f;
    struct kvp_sim_config c;
    struct kvp_workload w = {0};
    struct kvp_error err = {0};
    cli_deploy(m, kv, &d, &g);
    ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
    ck_assert_kvp_ok(kvp_sim_config_from_fit(m, &d, &f, (double)g->bandwidth_bytes_per_s,
                                             kvp_gpu_peak_flops(g, kvp_wstore_code_dtype(&d.w, m)), &c, &err),
                     err);
    ck_assert_kvp_ok(kvp_workload_synth(syn, &w, &err), err);
    ck_assert_kvp_ok(kvp_sim_run(&c, &w, false, r, &err), err);
    kvp_workload_free(&w);
}

static void assert_same_run(const struct kvp_sim_result *got, const struct kvp_sim_result *want, const char *what)
{
    ck_assert_msg(got->steps == want->steps && got->peak_blocks == want->peak_blocks &&
                      got->pool_blocks == want->pool_blocks && got->preemptions == want->preemptions &&
                      got->prefix_hit_tokens == want->prefix_hit_tokens && got->prompt_tokens == want->prompt_tokens &&
                      got->output_tokens == want->output_tokens,
                  "%s: steps %llu/%llu peak %llu/%llu preemptions %llu/%llu hits %llu/%llu", what,
                  (unsigned long long)got->steps, (unsigned long long)want->steps,
                  (unsigned long long)got->peak_blocks, (unsigned long long)want->peak_blocks,
                  (unsigned long long)got->preemptions, (unsigned long long)want->preemptions,
                  (unsigned long long)got->prefix_hit_tokens, (unsigned long long)want->prefix_hit_tokens);
    ck_assert(got->duration_s == want->duration_s && got->throughput == want->throughput);
    ck_assert(got->ttft.p50 == want->ttft.p50 && got->ttft.p99 == want->ttft.p99);
    ck_assert(got->tpot.p50 == want->tpot.p50 && got->tpot.p99 == want->tpot.p99);
}

static const struct sim_case {
    const char *model;
    const char *settings;    /* script() in the fit view first */
    const char *keys;        /* script() in the simulate view */
    const char *want[4];     /* the deployment as `kvplan fit` options */
    struct kvp_synth synth;  /* the workload the keys give */
    bool preempts;           /* the run preempts */
} sim_cases[] = {
    {"llama-3.1-8b", "", "", {NULL}, KVP_SYNTH_DEFAULTS, false},
    /* every field typed: all at once, a shared prefix on half the prompts */
    {"llama-3.1-8b", "",
     "@rate =0 @prompt =2048 @output =100-300 @requests =500 @seed =7 @prefix =1024 @prefix_share =0.5", {NULL},
     {.rate = 0, .prompt = {2048, 2048}, .output = {100, 300}, .requests = 500, .seed = 7, .prefix = 1024,
      .prefix_share = 0.5},
     true},
    /* the arrows: rate doubled twice, requests halved, seed + 1, a prefix from none (16, on every request) */
    {"llama-3.1-8b", "", "@rate RT RT @requests LT @seed + @prefix RT",
     {NULL}, {.rate = 4, .prompt = {1024, 1024}, .output = {256, 256}, .requests = 500, .seed = 2, .prefix = 16,
              .prefix_share = 1}, false},
    /* seven KV-cache groups, a pool too small for a thousand requests at once */
    {"gemma-3-27b", "", "@rate =0", {NULL},
     {.rate = 0, .prompt = {1024, 1024}, .output = {256, 256}, .requests = 1000, .seed = 1}, true},
    /* a deployment edited in the fit view: 4k context, 8 GiB less memory */
    {"qwen3-8b", "@context =4096 @gpu_memory =72GiB", "@rate =0 @prompt =1000-3000",
     {"context=4096", "gpu_memory=72GiB", NULL},
     {.rate = 0, .prompt = {1000, 3000}, .output = {256, 256}, .requests = 1000, .seed = 1}, true},
};

START_TEST(sim_view_is_the_library)
{
    const struct sim_case *c = &sim_cases[_i];
    struct kvp_sim_result want = {0};
    struct tui_state *s;
    load_catalogs();
    s = start(c->model);
    script(s, c->settings);
    ck_assert_int_eq(tui_handle(s, 'w'), TUI_REDRAW);
    ck_assert_int_eq(s->view, TUI_VIEW_SIM);
    script(s, c->keys);
    ck_assert_msg(s->sim_ok, "%s: %s", c->model, s->sim_err.msg);
    ck_assert(s->work.synth.rate == c->synth.rate && s->work.synth.prompt.lo == c->synth.prompt.lo &&
              s->work.synth.prompt.hi == c->synth.prompt.hi && s->work.synth.output.lo == c->synth.output.lo &&
              s->work.synth.output.hi == c->synth.output.hi && s->work.synth.requests == c->synth.requests &&
              s->work.synth.seed == c->synth.seed && s->work.synth.prefix == c->synth.prefix &&
              s->work.synth.prefix_share == c->synth.prefix_share);
    cli_simulate(s->model, c->want, &c->synth, &want);
    assert_same_run(&s->sim, &want, c->model);
    ck_assert_int_eq(s->sim.preemptions > 0, c->preempts);
    ck_assert_msg(strncmp(s->status, "simulated ", 10) == 0, "%s", s->status);
    kvp_sim_result_free(&want);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(sim_runs_on_change_only)
{
    struct tui_state *s;
    uint64_t ctx;
    load_catalogs();
    s = start("llama-3.1-8b");
    ck_assert_uint_eq(s->sim_runs, 0); /* not before the view opens */
    tui_handle(s, 'w');
    ck_assert_uint_eq(s->sim_runs, 1);
    script(s, "DN DN UP");
    tui_handle(s, TUI_KEY_RESIZE);
    tui_handle(s, '?');
    tui_handle(s, 'x');
    ck_assert_uint_eq(s->sim_runs, 1);
    tui_handle(s, 'w'); /* back and in again: nothing changed */
    ck_assert_int_eq(s->view, TUI_VIEW_FIT);
    tui_handle(s, 'w');
    ck_assert_uint_eq(s->sim_runs, 1);
    script(s, "@seed =5");
    ck_assert_uint_eq(s->sim_runs, 2);
    script(s, "@seed =x"); /* refused: no run */
    ck_assert_uint_eq(s->sim_runs, 2);
    ck_assert_uint_eq(s->work.synth.seed, 5);
    /* a deployment change in the fit view runs when the view shows again */
    tui_handle(s, ESC);
    ck_assert_int_eq(s->view, TUI_VIEW_FIT);
    ctx = s->d.context;
    script(s, "@context LT");
    ck_assert_uint_eq(s->d.context, ctx / 2);
    ck_assert_uint_eq(s->sim_runs, 2);
    tui_handle(s, 'w');
    ck_assert_uint_eq(s->sim_runs, 3);
    ck_assert_uint_eq(s->sim_cfg.max_model_len, ctx / 2);
    /* the highest sustained rate only on request, and gone after a change */
    ck_assert(!s->have_max_rate);
    tui_handle(s, 'r');
    ck_assert_msg(s->have_max_rate && s->max_rate > 0, "%s", s->status);
    ck_assert_uint_eq(s->sim_runs, 3);
    script(s, "@requests =800");
    ck_assert(!s->have_max_rate);
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(sim_chart_columns)
{
    struct tui_state *s;
    struct kvp_sim_step st;
    const uint32_t widths[] = {1, 69, 150, 100000};
    load_catalogs();
    s = start("gemma-3-27b");
    ck_assert(!tui_sim_column(s, 0, 10, &st)); /* no run yet */
    script(s, "'w @rate =0");
    ck_assert_msg(s->sim_ok && s->sim.preemptions > 0, "%s", s->sim_err.msg);
    for (size_t k = 0; k < N_ELEMS(widths); k++) {
        uint64_t top = 0;
        for (uint32_t col = 0; col < widths[k]; col++) {
            uint64_t used = 0;
            ck_assert(tui_sim_column(s, col, widths[k], &st));
            for (uint32_t g = 0; g < s->sim_cfg.n_groups; g++)
                used += st.used[g];
            /* every block is in use, cached or free */
            ck_assert_uint_eq(used + st.cached + st.free, s->sim.pool_blocks);
            top = used > top ? used : top;
        }
        ck_assert_uint_eq(top, s->sim.peak_blocks); /* the busiest step shows in its column */
        ck_assert(!tui_sim_column(s, widths[k], widths[k], &st));
    }
    tui_free(s);
    free_catalogs();
}
END_TEST

START_TEST(sim_engine_not_simulated)
{
    struct tui_state *s;
    load_catalogs();
    s = start("llama-3.1-8b");
    script(s, "@engine =hf-dynamic 'w");
    ck_assert(s->ok); /* the fit computes ... */
    ck_assert(!s->sim_ok); /* ... the simulation says why not */
    ck_assert_msg(strstr(s->sim_err.msg, "hf-dynamic is not simulated yet") != NULL, "%s", s->sim_err.msg);
    ck_assert(s->status_error);
    ck_assert_ptr_nonnull(strstr(s->status, "not simulated"));
    tui_handle(s, 'r');
    ck_assert(!s->have_max_rate && s->status_error);
    script(s, "@rate =3"); /* fields still edit */
    ck_assert(s->work.synth.rate == 3 && !s->sim_ok);
    tui_free(s);
    free_catalogs();
}
END_TEST

static const struct bad_edit bad_workload_edits[] = {
    {"rate", "-1", "rate: must be a number of requests/s >= 0 (got '-1')"},
    {"prompt", "abc", "prompt: ..."},
    {"prompt", "300-200", "prompt: ..."},
    {"requests", "0", "requests: must be 1 to 10000000 requests (got '0')"},
    {"requests", "100000",
     "requests: the view simulates at most 2000000 output tokens (requests x output: 100000 x 256); kvplan simulate "
     "runs more"},
    {"prefix", "2048", "prefix: ..."},
    {"prefix_share", "0.5", "prefix_share: needs a prefix (the shared tokens)"},
    {"max_queue", "soon", "max_queue: must be a number of seconds >= 0 (got 'soon')"},
};

START_TEST(bad_workload_edit_keeps_workload)
{
    const struct bad_edit *c = &bad_workload_edits[_i];
    struct tui_state *s;
    struct tui_workload before;
    char w[128];
    load_catalogs();
    s = start("llama-3.1-8b");
    tui_handle(s, 'w');
    before = s->work;
    snprintf(w, sizeof w, "@%s =%s", c->key, c->text);
    script(s, w);
    if (strstr(c->status, "..."))
        ck_assert_msg(strncmp(s->status, c->status, strlen(c->status) - 3) == 0, "%s", s->status);
    else
        ck_assert_str_eq(s->status, c->status);
    ck_assert(s->status_error);
    ck_assert(memcmp(&before, &s->work, sizeof before) == 0);
    ck_assert_uint_eq(s->sim_runs, 1);
    tui_free(s);
    free_catalogs();
}
END_TEST

/* The arrows on the prefix and its share: the share needs a prefix, and a
 * prefix stepped down to nothing takes its share along. */
START_TEST(prefix_arrows)
{
    struct tui_state *s;
    load_catalogs();
    s = start("llama-3.1-8b");
    tui_handle(s, 'w');
    script(s, "@prefix_share RT");
    ck_assert_str_eq(s->status, "prefix_share: needs a prefix (the shared tokens)");
    ck_assert(s->status_error && s->work.synth.prefix_share == 0.0);
    script(s, "@prefix =2 @prefix_share LT");
    ck_assert(s->work.synth.prefix == 2 && s->work.synth.prefix_share == 0.9);
    script(s, "@prefix LT");
    ck_assert(s->work.synth.prefix == 1 && s->work.synth.prefix_share == 0.9);
    script(s, "@prefix LT");
    ck_assert(s->work.synth.prefix == 0 && s->work.synth.prefix_share == 0.0);
    tui_free(s);
    free_catalogs();
}
END_TEST

/* A plan's workloads survive a load and a save; the view's workload comes
 * from the plan's first synthetic one, and its assertions hold. */
START_TEST(plan_workloads_round_trip)
{
    static const char text[] = "kvplan_plan: 1\n"
                               "workloads:\n"
                               "  batch: {trace: batch.csv, max_queue: 3}\n"
                               "  chat: {rate: 5, prompt: 1k-3k, output: 200-800, requests: 400, seed: 9, prefix: 1k, "
                               "prefix_share: 0.25, max_queue: 2.5}\n"
                               "  burst: {rate: 0, requests: 300}\n"
                               "deployments:\n"
                               "  - name: a\n    model: llama-3.1-8b\n    gpu: h100\n    context: 16k\n"
                               "    assert:\n      - max_preemptions: 0\n        workload: batch\n"
                               "      - min_headroom: 1GiB\n      - max_kv_share: 0.5\n        name: share\n"
                               "      - min_concurrency: 2\n        context: 8k\n"
                               "      - max_preemptions: 5\n        workload: chat\n";
    char dir[] = "/tmp/kvplan-tui-XXXXXX", in[256], out[256], csv[256];
    struct tui_state *s;
    struct kvp_plan p = {0}, q = {0};
    struct kvp_plan_report rep = {0};
    struct kvp_error err = {0};
    FILE *f;

    load_catalogs();
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(in, sizeof in, "%s/in.yaml", dir);
    snprintf(out, sizeof out, "%s/out/plan.yaml", dir); /* elsewhere: the trace's path must still resolve */
    snprintf(csv, sizeof csv, "%s/batch.csv", dir);
    ck_assert_ptr_nonnull(f = fopen(csv, "w"));
    fputs("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,2000,50\n1,300,20\n", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_ptr_nonnull(f = fopen(in, "w"));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(out, sizeof out, "%s/out", dir);
    ck_assert_int_eq(mkdir(out, 0700), 0);
    snprintf(out, sizeof out, "%s/out/plan.yaml", dir);

    ck_assert_kvp_ok(tui_init(&s, cat, gpus, in, NULL, NULL, &err), err);
    ck_assert_uint_eq(s->n_plan_wl, 3);
    ck_assert_int_eq(s->work_at, 1); /* chat: the first synthetic one */
    ck_assert_str_eq(s->work.name, "chat");
    ck_assert(s->work.synth.rate == 5 && s->work.synth.prompt.lo == 1024 && s->work.synth.prompt.hi == 3072 &&
              s->work.synth.prefix == 1024 && s->work.synth.prefix_share == 0.25 && s->work.max_queue_s == 2.5);
    /* saved as loaded: the same workloads, read by the library */
    ck_assert_kvp_ok(tui_plan_save(s, out, &err), err);
    ck_assert_kvp_ok(kvp_plan_load(&p, in, cat, gpus, &err), err);
    ck_assert_kvp_ok(kvp_plan_load(&q, out, cat, gpus, &err), err);
    ck_assert_uint_eq(q.n_workloads, p.n_workloads);
    for (uint32_t i = 0; i < p.n_workloads; i++) {
        const struct kvp_plan_workload *a = &p.workloads[i], *b = &q.workloads[i];
        ck_assert_str_eq(a->name, b->name);
        ck_assert_int_eq(a->is_trace, b->is_trace);
        ck_assert(a->max_queue_s == b->max_queue_s);
        if (a->is_trace) {
            ck_assert_uint_eq(a->trace.n, b->trace.n);
            ck_assert_uint_eq(b->trace.req[1].prompt, 2000);
        } else {
            ck_assert(memcmp(&a->synth, &b->synth, sizeof a->synth) == 0 || /* padding aside: */
                      (a->synth.rate == b->synth.rate && a->synth.prompt.lo == b->synth.prompt.lo &&
                       a->synth.prompt.hi == b->synth.prompt.hi && a->synth.output.lo == b->synth.output.lo &&
                       a->synth.output.hi == b->synth.output.hi && a->synth.requests == b->synth.requests &&
                       a->synth.seed == b->synth.seed && a->synth.prefix == b->synth.prefix &&
                       a->synth.prefix_share == b->synth.prefix_share));
        }
    }
    /* and the same assertions, after the `fits: true` every saved plan states */
    ck_assert_uint_eq(q.deps[0].n_checks, p.deps[0].n_checks + 1);
    ck_assert_int_eq(q.deps[0].checks[0].kind, KVP_CHECK_FITS);
    for (uint32_t i = 0; i < p.deps[0].n_checks; i++) {
        const struct kvp_plan_check *a = &p.deps[0].checks[i], *b = &q.deps[0].checks[i + 1];
        ck_assert_int_eq(a->kind, b->kind);
        ck_assert(a->limit == b->limit);
        ck_assert_uint_eq(a->context, b->context);
        ck_assert_uint_eq(a->concurrency, b->concurrency);
        ck_assert_int_eq(a->named, b->named);
        ck_assert_int_eq(a->workload, b->workload);
    }
    ck_assert_str_eq(q.deps[0].checks[3].test + strlen(q.deps[0].name), "/share");
    kvp_plan_release(&q);
    /* the view's workload edited and run: written over 'chat', with what the view measured */
    script(s, "'w @requests =200 @prefix_share =0.75");
    ck_assert_msg(s->sim_ok, "%s", s->sim_err.msg);
    tui_handle(s, 'r');
    ck_assert(s->have_max_rate);
    ck_assert_kvp_ok(tui_plan_save(s, out, &err), err);
    ck_assert_kvp_ok(kvp_plan_load(&q, out, cat, gpus, &err), err);
    ck_assert_uint_eq(q.n_workloads, 3);
    ck_assert_str_eq(q.workloads[1].name, "chat");
    ck_assert_uint_eq(q.workloads[1].synth.requests, 200);
    ck_assert(q.workloads[1].synth.prefix_share == 0.75);
    /* fits, the four kept, the view's max_preemptions (in place of the plan's on chat), min_sustained_rate */
    ck_assert_uint_eq(q.deps[0].n_checks, 7);
    ck_assert_int_eq(q.deps[0].checks[5].kind, KVP_CHECK_MAX_PREEMPTIONS);
    ck_assert_int_eq(q.deps[0].checks[5].workload, 1);
    ck_assert(q.deps[0].checks[5].limit == (double)s->sim.preemptions);
    ck_assert_int_eq(q.deps[0].checks[6].kind, KVP_CHECK_MIN_SUSTAINED_RATE);
    ck_assert(q.deps[0].checks[6].limit <= s->max_rate && q.deps[0].checks[6].limit > 0.99 * s->max_rate);
    ck_assert_kvp_ok(kvp_plan_evaluate(&q, &rep, &err), err);
    ck_assert_uint_eq(rep.failed, 0);
    ck_assert_uint_eq(rep.passed, 7);
    ck_assert(rep.results[5].measured == (double)s->sim.preemptions);
    kvp_plan_report_release(&rep);
    kvp_plan_release(&q);
    kvp_plan_release(&p);
    tui_free(s);
    unlink(in);
    unlink(out);
    unlink(csv);
    snprintf(out, sizeof out, "%s/out", dir);
    rmdir(out);
    rmdir(dir);
    free_catalogs();
}
END_TEST

/* A setup with no plan: the view's workload, once used, is added as 'tui'. */
START_TEST(plan_gets_view_workload)
{
    char dir[] = "/tmp/kvplan-tui-XXXXXX", out[256];
    struct tui_state *s;
    struct kvp_plan q = {0};
    struct kvp_error err = {0};
    load_catalogs();
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/p.yaml", dir);
    s = start("llama-3.1-8b");
    ck_assert_kvp_ok(tui_plan_save(s, out, &err), err); /* the view unused: no workloads */
    ck_assert_kvp_ok(kvp_plan_load(&q, out, cat, gpus, &err), err);
    ck_assert_uint_eq(q.n_workloads, 0);
    ck_assert_uint_eq(q.deps[0].n_checks, 1);
    kvp_plan_release(&q);
    script(s, "'w @rate =2.5 @prefix =512");
    ck_assert_kvp_ok(tui_plan_save(s, out, &err), err);
    ck_assert_kvp_ok(kvp_plan_load(&q, out, cat, gpus, &err), err);
    ck_assert_uint_eq(q.n_workloads, 1);
    ck_assert_str_eq(q.workloads[0].name, "tui");
    ck_assert(q.workloads[0].synth.rate == 2.5 && q.workloads[0].synth.prefix == 512 &&
              q.workloads[0].synth.prefix_share == 1.0);
    ck_assert_uint_eq(q.deps[0].n_checks, 2); /* no 'r': no min_sustained_rate */
    kvp_plan_release(&q);
    tui_free(s);
    unlink(out);
    rmdir(dir);
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
    tcase_add_loop_test(core, every_setting_is_a_field, 0, (int)kvp_settings_count());
    tcase_add_test(core, plan_round_trip);
    tcase_add_test(core, gpus_ask_tp_or_pp);
    tcase_add_test(core, command_line_settings);
    tcase_add_test(core, engine_change_keeps_settings);
    tcase_add_test(core, weights_as_stored);
    tcase_add_test(core, weights_auto);
    tcase_add_test(core, plan_without_gpu);
    tcase_add_loop_test(core, sim_view_is_the_library, 0, (int)N_ELEMS(sim_cases));
    tcase_add_test(core, sim_runs_on_change_only);
    tcase_add_test(core, sim_chart_columns);
    tcase_add_test(core, sim_engine_not_simulated);
    tcase_add_test(core, plan_workloads_round_trip);
    tcase_add_test(core, plan_gets_view_workload);
    tcase_add_loop_test(limits, bad_edit_keeps_setup, 0, (int)N_ELEMS(bad_edits));
    tcase_add_test(limits, quit_help_resize_escape);
    tcase_add_test(limits, arrows_stop_at_bounds);
    tcase_add_test(limits, unknown_model_and_gpu);
    tcase_add_test(limits, save_errors);
    tcase_add_test(core, picks_as_typed);
    tcase_add_test(core, save_asks_preemption_limit);
    tcase_add_loop_test(limits, bad_workload_edit_keeps_workload, 0, (int)N_ELEMS(bad_workload_edits));
    tcase_add_test(limits, prefix_arrows);
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
