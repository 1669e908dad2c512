/* check_consistency.c -- one deployment, one answer: `kvplan fit`, `table`,
 * `compare`, `plot` and the TUI give the same capacity (issue #19).
 *
 * The reference is what `kvplan fit` computes: the settings applied to the
 * model (kvp_settings_apply, vLLM's default release when no engine is named)
 * and kvp_fit_compute. Against it, for GQA, MLA, sliding-window and hybrid
 * models under vLLM, SGLang, llama.cpp and TRT-LLM:
 *   - library: a sizing-table cell (kvp_sizing_cell), a chart series
 *     (kvp_chart_add_fit), and the TUI's state opened from a plan file of the
 *     same settings (tui_init, its public API);
 *   - CLI: the JSON of `fit`, `table`, `compare` and the legend of `plot`,
 *     run through $KVPLAN_BIN, so the options each front end parses are in
 *     the comparison too.
 * A deployment the engine refuses must be refused by every front end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvplan/catalog.h"
#include "kvplan/chart.h"
#include "kvplan/gpu.h"
#include "kvplan/settings.h"
#include "kvplan/sizing.h"
#include "../src/tui/state.h" /* the TUI's state, without curses */
#include "testutil.h"

/* The deployments: model x engine, on two H100s at 8K, one request. */
static const char *const models[] = {"llama-3.1-70b", "deepseek-v2-lite", "gemma-3-27b", "jamba-v0.1",
                                     "qwen3-next-80b-a3b"};
static const char *const engines[] = {"vllm", "sglang", "llamacpp", "trtllm"};
#define N_MODELS (sizeof models / sizeof models[0])
#define N_ENGINES (sizeof engines / sizeof engines[0])
#define CONTEXT "8k"

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

/* llama.cpp splits layers over devices (--gpus); the others take tp. */
static const char *split_key(const char *engine)
{
    return strcmp(engine, "llamacpp") == 0 ? "gpus" : "tp";
}

static void settings_of(const char *engine, struct kvp_settings *st)
{
    struct kvp_error err = {0};
    kvp_settings_clear(st);
    ck_assert_kvp_ok(kvp_settings_put(st, "engine", engine, &err), err);
    ck_assert_kvp_ok(kvp_settings_put(st, "gpu", "h100", &err), err);
    ck_assert_kvp_ok(kvp_settings_put(st, split_key(engine), "2", &err), err);
    ck_assert_kvp_ok(kvp_settings_put(st, "context", CONTEXT, &err), err);
    ck_assert_kvp_ok(kvp_settings_put(st, "concurrency", "1", &err), err);
}

/* `kvplan fit`'s answer: KVP_OK and f, or the engine's refusal status. */
static enum kvp_status reference(const struct kvp_model *m, const struct kvp_settings *st, struct kvp_deploy *d,
                                 struct kvp_fit *f)
{
    const struct kvp_gpu *gpu;
    struct kvp_error err = {0};
    int bad;
    ck_assert_kvp_ok(kvp_settings_apply(st, m, gpus, d, &gpu, &bad, &err), err);
    return kvp_fit_compute(m, d, f, &err);
}

/* ---- library front ends ---- */

static void check_sizing(const struct kvp_model *m, const struct kvp_settings *st, const struct kvp_deploy *d,
                        enum kvp_status ref, const struct kvp_fit *f)
{
    const struct kvp_model *ms[] = {m};
    uint64_t ctx[] = {d->context}, batch[] = {1};
    struct kvp_sizing s = {.models = ms, .n_models = 1, .contexts = ctx, .n_contexts = 1, .batches = batch,
                           .n_batches = 1, .formats = &d->k, .n_formats = 1, .deploy = st, .gpus = gpus};
    struct kvp_sizing_cell c;
    struct kvp_error err = {0};
    enum kvp_status got = kvp_sizing_cell(&s, 0, 0, 0, 0, 0, &c, &err);
    if (ref == KVP_ERR_UNSUPPORTED) { /* refused: the table marks the cell */
        ck_assert_kvp_ok(got, err);
        ck_assert_msg(c.unsupported, "%s: the table sized what the engine refuses", m->name);
        return;
    }
    ck_assert_kvp_ok(got, err);
    ck_assert_msg(c.max_concurrency == f->max_concurrency, "%s: table %g, fit %g", m->name, c.max_concurrency,
                  f->max_concurrency);
    ck_assert_uint_eq(c.kv_bytes, f->kv_bytes_required);
    ck_assert_uint_eq(c.weight_bytes, f->weights_bytes);
    ck_assert(c.fits == f->fits);
}

static void check_chart(const struct kvp_model *m, const struct kvp_deploy *d, enum kvp_status ref,
                        const struct kvp_fit *f)
{
    struct kvp_chart *c = calloc(1, sizeof *c);
    uint64_t x[] = {1024, d->context};
    struct kvp_error err = {0};
    enum kvp_status got;
    kvp_chart_init(c, m->name, "");
    c->batch = 1;
    ck_assert_kvp_ok(kvp_chart_set_x(c, x, 2, &err), err);
    got = kvp_chart_add_fit(c, m, d, "line", &err);
    if (ref != KVP_OK) {
        ck_assert_int_eq(got, ref);
    } else {
        uint64_t reserve = f->reserve.activation + f->reserve.non_torch + f->reserve.cuda_graph;
        ck_assert_kvp_ok(got, err);
        ck_assert(c->series[0].max_concurrency == f->max_concurrency);
        ck_assert_uint_eq(c->series[0].max_context, f->max_context);
        ck_assert_uint_eq(c->series[0].weights, f->weights_bytes);
        ck_assert_uint_eq(c->series[0].kv[1], reserve + f->kv_bytes_required); /* the point at the context */
    }
    free(c);
}

/* The TUI opened on a plan file holding the same settings. */
static void check_tui(const struct kvp_model *m, const char *engine, enum kvp_status ref, const struct kvp_fit *f)
{
    char path[] = "/tmp/kvplan-consistency-XXXXXX";
    struct tui_state *s = NULL;
    struct kvp_error err = {0};
    enum kvp_status got;
    int fd = mkstemp(path);
    FILE *p;
    char yaml[sizeof path + 8];
    ck_assert_int_ge(fd, 0);
    ck_assert_ptr_nonnull(p = fdopen(fd, "w"));
    fprintf(p, "kvplan_plan: 1\ndeployments:\n  - name: same\n    model: %s\n    engine: %s\n    gpu: h100\n"
               "    %s: 2\n    context: " CONTEXT "\n    concurrency: 1\n    assert:\n      - fits: true\n",
            m->name, engine, split_key(engine));
    fclose(p);
    snprintf(yaml, sizeof yaml, "%s.yaml", path); /* the TUI opens plans by their extension */
    ck_assert_int_eq(rename(path, yaml), 0);
    got = tui_init(&s, cat, gpus, yaml, NULL, NULL, &err);
    unlink(yaml);
    if (ref != KVP_OK) { /* refused opening the plan, or opened with no figures */
        ck_assert_msg(got != KVP_OK || !s->ok, "%s under %s: the TUI sized what the engine refuses", m->name, engine);
    } else {
        ck_assert_kvp_ok(got, err);
        ck_assert_msg(s->ok, "%s under %s: %s", m->name, engine, s->err.msg);
        ck_assert_msg(s->fit.max_concurrency == f->max_concurrency, "%s under %s: TUI %g, fit %g", m->name, engine,
                      s->fit.max_concurrency, f->max_concurrency);
        ck_assert_uint_eq(s->fit.max_context, f->max_context);
        ck_assert_uint_eq(s->fit.kv_bytes_required, f->kv_bytes_required);
    }
    tui_free(s);
}

START_TEST(test_library_front_ends)
{
    load_catalogs();
    for (size_t mi = 0; mi < N_MODELS; mi++) {
        struct kvp_model *m = test_load(models[mi]);
        for (size_t ei = 0; ei < N_ENGINES; ei++) {
            struct kvp_settings st;
            struct kvp_deploy d;
            struct kvp_fit f;
            enum kvp_status ref;
            settings_of(engines[ei], &st);
            ref = reference(m, &st, &d, &f);
            ck_assert_msg(ref == KVP_OK || ref == KVP_ERR_UNSUPPORTED, "%s under %s: status %d", models[mi],
                          engines[ei], ref);
            check_sizing(m, &st, &d, ref, &f);
            check_chart(m, &d, ref, &f);
            check_tui(m, engines[ei], ref, &f);
        }
        kvp_model_free(m);
    }
    free_catalogs();
}
END_TEST

/* The TUI's own defaults against fit's: vLLM's default release, one request
 * at the model's max context, on the GPU the TUI starts with (the catalog's
 * first; `kvplan fit` has no default GPU and asks for one). */
START_TEST(test_tui_defaults)
{
    struct tui_state *s = NULL;
    struct kvp_error err = {0};
    struct kvp_settings st;
    struct kvp_deploy d;
    struct kvp_fit f;
    load_catalogs();
    ck_assert_kvp_ok(tui_init(&s, cat, gpus, "llama-3.1-8b", NULL, NULL, &err), err);
    ck_assert(s->ok);
    kvp_settings_clear(&st);
    ck_assert_kvp_ok(kvp_settings_put(&st, "gpu", s->gpu->id, &err), err);
    ck_assert_kvp_ok(reference(s->model, &st, &d, &f), err);
    ck_assert_int_eq(s->d.engine, d.engine);
    ck_assert_str_eq(s->fit.release->version, f.release->version);
    ck_assert_uint_eq(s->d.context, d.context);
    ck_assert(s->fit.max_concurrency == f.max_concurrency);
    tui_free(s);
    free_catalogs();
}
END_TEST

/* ---- the CLI ---- */

/* stdout of `$KVPLAN_BIN args` (at most n - 1 bytes) and the exit status. */
static int run(const char *args, char *out, size_t n)
{
    const char *bin = getenv("KVPLAN_BIN");
    char cmd[1024];
    FILE *p;
    size_t len;
    ck_assert_msg(bin != NULL, "KVPLAN_BIN is not set (make check-consistency sets it)");
    snprintf(cmd, sizeof cmd, "KVPLAN_DATADIR=models %s %s 2>/dev/null", bin, args);
    ck_assert_ptr_nonnull(p = popen(cmd, "r"));
    len = fread(out, 1, n - 1, p);
    out[len] = '\0';
    return pclose(p);
}

/* The number after the first `"key": ` in JSON text (-1 when absent). */
static double json_number(const char *json, const char *key)
{
    char pat[64];
    const char *at;
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    return (at = strstr(json, pat)) ? strtod(at + strlen(pat), NULL) : -1;
}

START_TEST(test_cli_front_ends)
{
    static char out[1 << 16];
    char args[512], dep[128], svg[] = "/tmp/kvplan-consistency-XXXXXX";
    int fd = mkstemp(svg); /* plot replaces it (a file of its own: never a device) */
    ck_assert_int_ge(fd, 0);
    close(fd);
    for (size_t mi = 0; mi < N_MODELS; mi++)
        for (size_t ei = 0; ei < N_ENGINES; ei++) {
            const char *m = models[mi], *e = engines[ei];
            double conc, ctx;
            char legend[64], *at;
            int rc;
            snprintf(dep, sizeof dep, "--gpu h100 --engine %s --%s 2", e, split_key(e));
            snprintf(args, sizeof args, "fit %s %s --context " CONTEXT " --format json", m, dep);
            rc = run(args, out, sizeof out);
            conc = json_number(out, "max_concurrency");
            ctx = json_number(out, "max_context");
            if (conc < 0) { /* the engine refuses: so must the others */
                ck_assert_int_ne(rc, 0);
                snprintf(args, sizeof args, "compare %s --attention as %s --context " CONTEXT " --format json", m, dep);
                ck_assert_msg(run(args, out, sizeof out) != 0, "compare sized %s under %s", m, e);
                snprintf(args, sizeof args, "plot %s %s --svg %s", m, dep, svg);
                ck_assert_msg(run(args, out, sizeof out) != 0, "plot sized %s under %s", m, e);
                snprintf(args, sizeof args, "table %s %s --context " CONTEXT " --format json", m, dep);
                ck_assert_int_eq(run(args, out, sizeof out), 0);
                ck_assert_msg(strstr(out, "\"not_sized\"") != NULL, "table sized %s under %s", m, e);
                continue;
            }
            snprintf(args, sizeof args, "table %s %s --context " CONTEXT " --format json", m, dep);
            ck_assert_int_eq(run(args, out, sizeof out), 0);
            ck_assert_msg(json_number(out, "max_concurrency") == conc, "%s under %s: table %s", m, e, out);
            snprintf(args, sizeof args, "compare %s --attention as %s --context " CONTEXT " --format json", m, dep);
            ck_assert_int_eq(run(args, out, sizeof out), 0);
            ck_assert_msg(json_number(out, "max_concurrency") == conc, "%s under %s: compare %s", m, e, out);
            ck_assert_msg(json_number(out, "max_context") == ctx, "%s under %s: compare %s", m, e, out);
            /* plot: the legend's longest context, "longest context 17,840" */
            snprintf(args, sizeof args, "plot %s %s --svg %s && cat %s", m, dep, svg, svg);
            ck_assert_int_eq(run(args, out, sizeof out), 0);
            ck_assert_ptr_nonnull(at = strstr(out, "longest context "));
            {
                size_t n = 0;
                for (at += strlen("longest context "); (*at >= '0' && *at <= '9') || *at == ','; at++)
                    if (*at != ',' && n + 1 < sizeof legend)
                        legend[n++] = *at;
                legend[n] = '\0';
            }
            /* plot sizes the deployment at the model's max context (fit's default): compare with fit there */
            snprintf(args, sizeof args, "fit %s %s --format json", m, dep);
            run(args, out, sizeof out);
            ck_assert_msg(strtod(legend, NULL) == json_number(out, "max_context"), "%s under %s: plot %s, fit %g", m,
                          e, legend, json_number(out, "max_context"));
        }
    unlink(svg);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("consistency");
    TCase *core = tcase_create("core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, test_library_front_ends);
    tcase_add_test(core, test_tui_defaults);
    tcase_add_test(core, test_cli_front_ends);
    suite_add_tcase(s, core);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    int failed;
    srunner_run_all(r, CK_NORMAL);
    failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
