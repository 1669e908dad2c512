/* check_plan.c -- plan files and their assertions (kvplan/plan.h): every
 * assertion kind passing and failing against figures `kvplan fit` prints,
 * includes, defaults and relative paths, JSON/JUnit rendering, baselines
 * both ways, and each tests/data/bad/plan-*.yaml failing with exactly the
 * message in its .err file. */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvplan/plan.h"
#include "kvplan/settings.h"
#include "kvplan/sim.h"
#include "testutil.h"

#define BAD_DIR TEST_BAD_DIR

static struct kvp_catalog *models;
static struct kvp_gpu_catalog *gpus;
static char tmpdir[64];

static void setup(void)
{
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_catalog_load("models", &models, &err), err);
    ck_assert_kvp_ok(kvp_gpu_catalog_load("models/gpus.yaml", &gpus, &err), err);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kvplan-plan-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    kvp_catalog_free(models);
    kvp_gpu_catalog_free(gpus);
}

/* Write text to tmpdir/name; returns the path in a static buffer. */
static const char *put(const char *name, const char *text)
{
    static char path[256];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* Llama-3.1-70B, fp8 weights, 4 x H100, vLLM, 64 x 8K: kvplan fit prints
 * max concurrency 86.96, max context 11,120, KV per token 80 KiB, KV
 * required 40 GiB of 79.19 GiB (0.505), 14.35 GiB left, decode >= 18.09 ms (the token
 * embedding's rows only). */
#define DEPLOYMENT                                                                                       \
    "kvplan_plan: 1\n"                                                                                   \
    "deployments:\n"                                                                                     \
    "  - name: l70\n"                                                                                    \
    "    model: llama-3.1-70b\n"                                                                         \
    "    gpu: h100\n"                                                                                    \
    "    gpus: 4\n"                                                                                      \
    "    tp: 4\n"                                                                                        \
    "    weight_dtype: fp8\n"                                                                            \
    "    engine: vllm@0.11.0\n" /* its rules and util 0.9: the hand-worked figures */           \
    "    context: 8k\n"                                                                                  \
    "    concurrency: 64\n"                                                                              \
    "    activation_memory: 0\n"  /* the reserve given, so the hand-worked figures hold */                \
    "    non_torch_memory: 0\n"                                                                           \
    "    assert:\n"

static const struct {
    const char *pass, *fail; /* one assertion item each, under DEPLOYMENT */
    enum kvp_check_kind kind;
    double measured, eps;    /* what both must measure */
} kinds_table[] = {
    {"      - fits: true\n", "      - fits: true\n        concurrency: 100\n", KVP_CHECK_FITS, -1, 0},
    {"      - min_concurrency: 86\n", "      - min_concurrency: 87\n", KVP_CHECK_MIN_CONCURRENCY, 86.9648, 1e-4},
    {"      - min_context: 11120\n", "      - min_context: 11121\n", KVP_CHECK_MIN_CONTEXT, 11120, 1e-9},
    {"      - max_kv_share: 0.51\n", "      - max_kv_share: 0.5\n", KVP_CHECK_MAX_KV_SHARE,
     42949672960.0 / 85028896768.0, 1e-9},
    {"      - max_kv_bytes_per_token: 80KiB\n", "      - max_kv_bytes_per_token: 81919\n",
     KVP_CHECK_MAX_KV_BYTES_PER_TOKEN, 81920, 1e-9},
    {"      - max_tpot_ms: 18.1\n", "      - max_tpot_ms: 18.0\n", KVP_CHECK_MAX_TPOT, 18.09, 0.01},
    {"      - min_headroom: 14GiB\n", "      - min_headroom: 15GiB\n", KVP_CHECK_MIN_HEADROOM, -1, 0},
};

static void evaluate_text(const char *text, struct kvp_plan *p, struct kvp_plan_report *r)
{
    struct kvp_error err = {0};
    const char *path = put("plan.yaml", text);
    ck_assert_kvp_ok(kvp_plan_load(p, path, models, gpus, &err), err);
    ck_assert_kvp_ok(kvp_plan_evaluate(p, r, &err), err);
}

START_TEST(each_kind_passes_and_fails)
{
    for (size_t i = 0; i < sizeof kinds_table / sizeof kinds_table[0]; i++) {
        for (int fail = 0; fail < 2; fail++) {
            char text[2048];
            struct kvp_plan p = {0};
            struct kvp_plan_report r = {0};
            snprintf(text, sizeof text, "%s%s", DEPLOYMENT, fail ? kinds_table[i].fail : kinds_table[i].pass);
            evaluate_text(text, &p, &r);
            ck_assert_uint_eq(r.n, 1);
            ck_assert_int_eq(r.results[0].check->kind, kinds_table[i].kind);
            ck_assert_msg(r.results[0].pass == !fail, "%s: pass %d (measured %g)", kinds_table[i].pass,
                          r.results[0].pass, r.results[0].measured);
            ck_assert_uint_eq(r.failed, (unsigned)fail);
            ck_assert_uint_eq(r.passed, (unsigned)!fail);
            /* a derivation explains every failure, and only failures */
            ck_assert_int_eq(r.results[0].derivation != NULL, fail);
            if (kinds_table[i].measured >= 0 && !(fail && kinds_table[i].kind == KVP_CHECK_FITS))
                ck_assert_double_eq_tol(r.results[0].measured, kinds_table[i].measured, kinds_table[i].eps);
            kvp_plan_report_release(&r);
            kvp_plan_release(&p);
        }
    }
}
END_TEST

START_TEST(fits_and_headroom_figures)
{
    struct kvp_plan p = {0};
    struct kvp_plan_report r = {0};
    evaluate_text(DEPLOYMENT "      - min_headroom: 1GiB\n      - fits: true\n        concurrency: 100\n"
                             "      - min_headroom: 0\n        name: at-100\n        concurrency: 100\n",
                  &p, &r);
    ck_assert_uint_eq(r.n, 3);
    /* 14.35 GiB left: budget 58,361,914,163 B - 64 x 640 MiB */
    ck_assert_double_eq(r.results[0].measured, 58361914163.0 - 42949672960.0);
    ck_assert(!r.results[1].pass);
    ck_assert_double_eq(r.results[1].measured, 0.0);
    ck_assert_ptr_nonnull(strstr(r.results[1].derivation, "short"));
    ck_assert_str_eq(r.results[1].check->id, "l70/fits:concurrency=100");
    ck_assert_str_eq(r.results[2].check->id, "l70/at-100");
    /* headroom on requests that do not fit is not a pass, even a 0-byte one (issue #19) */
    ck_assert(!r.results[2].pass);
    ck_assert_uint_eq(r.failed, 2);
    /* the deployment's derivation is given once: with its first failure, not again with the second */
    ck_assert_ptr_nonnull(strstr(r.results[1].derivation, "num_blocks"));
    ck_assert_ptr_null(strstr(r.results[2].derivation, "num_blocks"));
    ck_assert_ptr_nonnull(strstr(r.results[2].derivation, "short"));
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
}
END_TEST

START_TEST(modifiers_change_the_question)
{
    struct kvp_plan p = {0};
    struct kvp_plan_report r = {0};
    evaluate_text(DEPLOYMENT "      - min_concurrency: 1\n        context: 32k\n"
                             "      - min_context: 1\n        concurrency: 1\n"
                             "      - max_tpot_ms: 100\n        concurrency: 1\n",
                  &p, &r);
    ck_assert_uint_eq(r.results[0].context, 32768);
    ck_assert_double_eq_tol(r.results[0].measured, 86.9648 / 4, 0.01); /* 4x the tokens per request */
    ck_assert_uint_eq(r.results[1].concurrency, 1);
    ck_assert_double_eq(r.results[1].measured, 131072); /* capped at the model's max_context */
    ck_assert(r.results[2].measured < 18.09 && r.results[2].measured > 5.0); /* less KV read at batch 1 */
    ck_assert_str_eq(r.results[0].check->id, "l70/min_concurrency:context=32768");
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
}
END_TEST

START_TEST(includes_defaults_and_relative_paths)
{
    struct kvp_plan p = {0};
    struct kvp_plan_report r = {0};
    struct kvp_error err = {0};
    char *model = test_slurp("models/llama-3.1-8b.yaml");
    char dir[128];
    const char *plan;

    ck_assert_ptr_nonnull(model);
    snprintf(dir, sizeof dir, "%s/sub", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    put("sub/my-model.yaml", model);
    free(model);
    put("sub/base.yaml", "kvplan_plan: 1\ndefaults: {gpu_memory: 24GiB, engine: ideal, context: 1k}\n");
    put("sub/common.yaml", "kvplan_plan: 1\ninclude: [base.yaml]\n"
                           "defaults: {model: my-model.yaml, context: 4k}\n"
                           "deployments:\n  - {name: from-include, assert: [fits: true]}\n");
    plan = put("top.yaml", "kvplan_plan: 1\ninclude: [sub/common.yaml]\n"
                           "deployments:\n  - name: mine\n    gpu_memory: 48GiB\n    assert: {fits: true}\n");
    ck_assert_kvp_ok(kvp_plan_load(&p, plan, models, gpus, &err), err);
    ck_assert_uint_eq(p.n, 2);
    ck_assert_str_eq(p.deps[0].name, "from-include");
    ck_assert_str_eq(p.deps[1].name, "mine");
    /* the model path is relative to sub/common.yaml, not to the caller */
    ck_assert_str_eq(p.deps[1].model->name, "llama-3.1-8b");
    ck_assert_uint_eq(p.deps[0].d.gpu_memory, 24ull << 30);
    ck_assert_uint_eq(p.deps[1].d.gpu_memory, 48ull << 30); /* the deployment overrides */
    ck_assert_uint_eq(p.deps[1].d.context, 4096);            /* the includer's defaults override the included */
    ck_assert_int_eq(p.deps[1].d.engine, KVP_ENGINE_IDEAL);
    ck_assert_ptr_nonnull(strstr(p.deps[0].file, "sub/common.yaml"));
    ck_assert_kvp_ok(kvp_plan_evaluate(&p, &r, &err), err);
    ck_assert_uint_eq(r.passed, 2);
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
}
END_TEST

/* An include stays in the folder of the plan given, or below it: a path up
 * and out, an absolute path elsewhere, and a link from inside to outside are
 * each refused at the include, naming the folder (a CI job checking a pull
 * request's plans must not read the runner's other files, issue #37). */
START_TEST(includes_stay_in_the_plan_folder)
{
    static const char *const out[] = {"../outside.yaml", "/etc/passwd", "link.yaml"};
    char dir[128], outside[160], link[160];
    snprintf(dir, sizeof dir, "%s/plans", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    put("outside.yaml", "kvplan_plan: 1\ndefaults: {gpu_memory: 24GiB}\n");
    snprintf(outside, sizeof outside, "%s/outside.yaml", tmpdir);
    snprintf(link, sizeof link, "%s/plans/link.yaml", tmpdir);
    ck_assert_int_eq(symlink(outside, link), 0);
    put("plans/inside.yaml", "kvplan_plan: 1\ndefaults: {gpu_memory: 24GiB, engine: ideal}\n");
    for (int i = 0; i < 4; i++) {
        struct kvp_plan p = {0};
        struct kvp_error err = {0};
        char text[512];
        enum kvp_status st;
        snprintf(text, sizeof text,
                 "kvplan_plan: 1\ninclude: [%s]\ndeployments:\n"
                 "  - {name: d, model: llama-3.1-8b, context: 1k, assert: {fits: true}}\n",
                 i < 3 ? out[i] : "inside.yaml");
        st = kvp_plan_load(&p, put("plans/top.yaml", text), models, gpus, &err);
        if (i == 3) {
            ck_assert_kvp_ok(st, err);
        } else {
            ck_assert_int_eq(st, KVP_ERR_USAGE);
            ck_assert_msg(strstr(err.msg, "is outside the folder of the plan given") && strstr(err.msg, "/plans')"),
                          "%s: %s", out[i], err.msg);
        }
        kvp_plan_release(&p);
    }
}
END_TEST

START_TEST(render_formats)
{
    struct kvp_plan p = {0};
    struct kvp_plan_report r = {0};
    struct kvp_buf b = {0};
    enum kvp_out o;
    struct kvp_error err = {0};
    /* a file name with XML's special characters travels into every format */
    const char *path = put("we&<ird>.yaml", DEPLOYMENT "      - min_concurrency: 64\n"
                                                       "      - min_concurrency: 100\n        name: too-many\n");
    ck_assert_kvp_ok(kvp_plan_load(&p, path, models, gpus, &err), err);
    ck_assert_kvp_ok(kvp_plan_evaluate(&p, &r, &err), err);
    ck_assert(!r.results[1].pass);
    kvp_plan_render(&r, KVP_OUT_TEXT, false, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "  PASS      min_concurrency at 8,192 tokens: 86.96 (want >= 64.00)\n"));
    ck_assert_ptr_nonnull(strstr(b.data, "  FAIL      min_concurrency at 8,192 tokens: 86.96 (want >= 100.00)\n"));
    ck_assert_ptr_nonnull(strstr(b.data, "max concurrency = 86.9648 requests of 8,192 tokens"));
    ck_assert_ptr_nonnull(strstr(b.data, "2 assertions: 1 passed, 1 failed\n"));
    kvp_buf_release(&b);
    kvp_plan_render(&r, KVP_OUT_JUNIT, false, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "<testsuites name=\"kvplan check\" tests=\"2\" failures=\"1\" errors=\"0\">"));
    ck_assert_ptr_nonnull(strstr(b.data, "l70/too-many: measured 86.96, want &gt;= 100.00"));
    ck_assert_ptr_nonnull(strstr(b.data, "/we&amp;&lt;ird&gt;.yaml\" line=\"15\""));
    ck_assert_ptr_null(strstr(b.data, "we&<"));
    kvp_buf_release(&b);
    kvp_plan_render(&r, KVP_OUT_JSON, false, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "\"kvplan_check\": 1,"));
    ck_assert_ptr_nonnull(strstr(b.data, "\"id\": \"l70/too-many\","));
    ck_assert_ptr_nonnull(strstr(b.data, "/we&<ird>.yaml\","));
    kvp_buf_release(&b);
    ck_assert(kvp_plan_out_from_name("junit", &o) && o == KVP_OUT_JUNIT);
    ck_assert(!kvp_plan_out_from_name("xml", &o));
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
}
END_TEST

/* Record a baseline at util 0.9, then compare runs at other utilizations. */
START_TEST(baseline_both_ways)
{
    static const struct {
        const char *util;
        double tolerance;
        uint32_t regressed;
    } cases[] = {
        {"0.90", 0.05, 0}, /* the same */
        {"0.95", 0.05, 0}, /* better: more concurrency, more headroom */
        {"0.895", 0.05, 0}, /* a little worse: concurrency -0.6%, headroom -2.9% */
        {"0.85", 0.05, 2}, /* concurrency -7.9%, headroom -29%: regressions */
        {"0.85", 0.50, 0}, /* ... within a 50% tolerance */
    };
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    struct kvp_plan p = {0};
    struct kvp_plan_report r = {0};
    char text[2048], base[256];
    const char *tail = "    util: %s\n    assert:\n      - min_concurrency: 1\n      - min_headroom: 0\n"
                       "      - max_kv_bytes_per_token: 1MiB\n";
    char fmt[1024];

    snprintf(fmt, sizeof fmt, "%.*s%s", (int)(strlen(DEPLOYMENT) - strlen("    assert:\n")), DEPLOYMENT, tail);
    snprintf(text, sizeof text, fmt, "0.90");
    evaluate_text(text, &p, &r);
    kvp_plan_render(&r, KVP_OUT_JSON, false, &b);
    snprintf(base, sizeof base, "%s", put("base.json", b.data));
    kvp_buf_release(&b);
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, fmt, cases[i].util);
        evaluate_text(text, &p, &r);
        ck_assert_kvp_ok(kvp_plan_baseline_apply(&r, base, cases[i].tolerance, &err), err);
        ck_assert_msg(r.regressed == cases[i].regressed, "util %s tolerance %g: %u regressed", cases[i].util,
                      cases[i].tolerance, r.regressed);
        ck_assert(r.have_baseline);
        ck_assert_uint_eq(r.baseline_missing, 0);
        ck_assert(r.results[0].has_baseline);
        ck_assert_double_eq_tol(r.results[0].baseline, 86.9648, 1e-3);
        ck_assert(!r.results[2].regressed); /* KV per token does not depend on util */
        kvp_plan_report_release(&r);
        kvp_plan_release(&p);
    }
    /* a check the baseline does not know is new, not a failure */
    snprintf(text, sizeof text, "%s      - min_context: 1\n", DEPLOYMENT);
    evaluate_text(text, &p, &r);
    ck_assert_kvp_ok(kvp_plan_baseline_apply(&r, base, 0.05, &err), err);
    ck_assert_uint_eq(r.baseline_missing, 1);
    ck_assert_uint_eq(r.regressed, 0);
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
}
END_TEST

/* ---- limits ---- */

static enum kvp_status load_plan(const char *path, struct kvp_error *err)
{
    struct kvp_plan p = {0};
    enum kvp_status st = kvp_plan_load(&p, path, models, gpus, err);
    if (st != KVP_OK)
        ck_assert_uint_eq(p.n, 0); /* an invalid plan leaves nothing to report as passed */
    kvp_plan_release(&p);
    return st;
}

/* ---- simulated traffic: min_sustained_rate and max_preemptions ---- */

/* Llama-3.1-8B on one H100, vLLM, 16K context: the pool kvplan fit computes. */
#define SIM_PLAN_HEAD                                                                                   \
    "kvplan_plan: 1\n"                                                                                   \
    "workloads:\n"                                                                                       \
    "  chat: {rate: 5, prompt: 2k, output: 500, requests: 300, seed: 3, prefix: 1k, prefix_share: 0.5}\n" \
    "  burst: {rate: 0, prompt: 8k, output: 1k, requests: 200}\n"                                        \
    "  one: {rate: 0, prompt: 8k, output: 1k, requests: 1}\n"                                            \
    "  replay: {trace: traces/t.csv}\n"                                                                  \
    "deployments:\n"                                                                                     \
    "  - name: l8\n"                                                                                     \
    "    model: llama-3.1-8b\n"                                                                          \
    "    gpu: h100\n"                                                                                    \
    "    context: 16k\n"                                                                                 \
    "    assert:\n"

/* The same deployment and workload through kvp_sim directly (as kvplan simulate runs them). */
static void sim_direct(const struct kvp_plan *p, const struct kvp_synth *s, const struct kvp_workload *trace,
                       double *rate, uint64_t *preemptions)
{
    const struct kvp_plan_deployment *dep = &p->deps[0];
    struct kvp_error err = {0};
    struct kvp_fit f;
    struct kvp_sim_config c;
    struct kvp_workload w = {0};
    struct kvp_sim_result r = {0};
    ck_assert_kvp_ok(kvp_fit_compute(dep->model, &dep->d, &f, &err), err);
    ck_assert_kvp_ok(kvp_sim_config_from_fit(dep->model, &dep->d, &f, (double)dep->gpu->bandwidth_bytes_per_s,
                                             kvp_gpu_peak_flops(dep->gpu, kvp_wstore_code_dtype(&dep->d.w, dep->model)),
                                             &c, &err), err);
    if (!trace) {
        ck_assert_kvp_ok(kvp_sim_max_rate(&c, s, 1.0, rate, &err), err);
        ck_assert_kvp_ok(kvp_workload_synth(s, &w, &err), err);
    }
    ck_assert_kvp_ok(kvp_sim_run(&c, trace ? trace : &w, false, &r, &err), err);
    *preemptions = r.preemptions;
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
}

START_TEST(simulated_assertions)
{
    struct kvp_plan p = {0};
    struct kvp_plan_report r = {0};
    struct kvp_buf b = {0};
    struct kvp_synth chat = {.rate = 5, .prompt = {2048, 2048}, .output = {500, 500}, .requests = 300, .seed = 3,
                             .prefix = 1024, .prefix_share = 0.5};
    struct kvp_synth burst = {.rate = 0, .prompt = {8192, 8192}, .output = {1024, 1024}, .requests = 200, .seed = 1};
    double rate, unused;
    uint64_t pre_chat, pre_burst, pre_trace;
    char text[4096];

    {
        char dir[128];
        snprintf(dir, sizeof dir, "%s/traces", tmpdir);
        ck_assert_int_eq(mkdir(dir, 0700), 0);
    }
    /* 30 requests of 8K at once: more than the pool holds at a time */
    {
        char trace[2048] = "arrival_s,prompt_tokens,output_tokens\n";
        for (int i = 0; i < 30; i++)
            strcat(trace, "0,8192,2048\n");
        put("traces/t.csv", trace);
    }
    snprintf(text, sizeof text, "%s%s", SIM_PLAN_HEAD,
             "      - min_sustained_rate: 1\n        workload: chat\n"
             "      - max_preemptions: 0\n        workload: chat\n"
             "      - max_preemptions: 0\n        workload: burst\n"
             "      - max_preemptions: 0\n        workload: one\n"
             "      - max_preemptions: 1000\n        workload: replay\n"
             "      - min_sustained_rate: 1000000\n        workload: chat\n        name: too-fast\n");
    evaluate_text(text, &p, &r);
    ck_assert_uint_eq(r.n, 6);
    sim_direct(&p, &chat, NULL, &rate, &pre_chat);
    sim_direct(&p, &burst, NULL, &unused, &pre_burst);
    sim_direct(&p, NULL, &p.workloads[3].trace, &unused, &pre_trace);
    /* what the plan measures is what kvp_sim gives for the same pool and workload */
    ck_assert_double_eq(r.results[0].measured, rate);
    ck_assert(rate > 1.0 && r.results[0].pass);
    ck_assert_double_eq(r.results[1].measured, (double)pre_chat);
    ck_assert_uint_eq(pre_chat, 0);
    ck_assert(r.results[1].pass);
    /* 200 x (8K + 1K) tokens at once is 115,200 blocks of 16, four times the pool: it preempts */
    ck_assert_double_eq(r.results[2].measured, (double)pre_burst);
    ck_assert_uint_gt(pre_burst, 0);
    ck_assert(!r.results[2].pass && r.results[2].derivation);
    ck_assert_ptr_nonnull(strstr(r.results[2].derivation, "under workload 'burst'"));
    /* one request alone never runs out of blocks */
    ck_assert_double_eq(r.results[3].measured, 0.0);
    ck_assert(r.results[3].pass && !r.results[3].derivation);
    /* the trace is read relative to the plan, at load */
    ck_assert(p.workloads[3].is_trace);
    ck_assert_uint_eq(p.workloads[3].trace.n, 30);
    ck_assert_double_eq(r.results[4].measured, (double)pre_trace);
    ck_assert(r.results[4].pass);
    ck_assert(!r.results[5].pass);
    ck_assert_double_eq(r.results[5].measured, rate);
    ck_assert_uint_eq(r.passed, 4);
    ck_assert_uint_eq(r.failed, 2);
    /* ids and test names carry the workload, never a number */
    ck_assert_str_eq(r.results[2].check->id, "l8/max_preemptions:workload=burst");
    ck_assert_str_eq(r.results[2].check->test, "l8/max_preemptions:workload=burst");
    ck_assert_str_eq(r.results[5].check->test, "l8/too-fast");
    kvp_plan_render(&r, KVP_OUT_JSON, false, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "\"workload\": \"burst\""));
    ck_assert_ptr_nonnull(strstr(b.data, "\"unit\": \"preemptions\""));
    ck_assert_ptr_nonnull(strstr(b.data, "\"unit\": \"requests/s\""));
    kvp_buf_release(&b);
    kvp_plan_render(&r, KVP_OUT_JUNIT, false, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "<property name=\"workload\" value=\"chat\"/>"));
    ck_assert_ptr_nonnull(strstr(b.data, "name=\"l8/max_preemptions:workload=burst\""));
    kvp_buf_release(&b);
    kvp_plan_render(&r, KVP_OUT_TEXT, false, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "FAIL      max_preemptions under burst:"));
    kvp_buf_release(&b);
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
}
END_TEST

/* An assertion on a deployment that does not start fails (70B bf16 weights exceed one H100). */
START_TEST(simulated_on_a_deployment_that_does_not_start)
{
    struct kvp_plan p = {0};
    struct kvp_plan_report r = {0};
    evaluate_text("kvplan_plan: 1\n"
                  "workloads:\n  chat: {rate: 5, prompt: 2k, output: 500, requests: 50}\n"
                  "deployments:\n  - name: big\n    model: llama-3.1-70b\n    gpu: h100\n    assert:\n"
                  "      - max_preemptions: 0\n        workload: chat\n"
                  "      - min_sustained_rate: 0.001\n        workload: chat\n",
                  &p, &r);
    ck_assert_uint_eq(r.failed, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert(!r.results[i].pass);
        ck_assert_ptr_nonnull(strstr(r.results[i].derivation, "the deployment does not start"));
    }
    /* the fit's formulas once, on the first failure */
    ck_assert_ptr_nonnull(strstr(r.results[0].derivation, "KV budget"));
    ck_assert_ptr_null(strstr(r.results[1].derivation, "KV budget"));
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
}
END_TEST

START_TEST(workload_errors)
{
#define WL_DEP "deployments:\n  - name: l8\n    model: llama-3.1-8b\n    gpu: h100\n    assert:\n"
#define WL_CHAT "kvplan_plan: 1\nworkloads:\n  chat: {rate: 5, prompt: 2k, output: 500, requests: 50}\n"
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"kvplan_plan: 1\nworkloads:\n  chat: {rate: 5, promt: 2k}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:19: unknown key 'promt' (did you mean 'prompt'?)"},
        {WL_CHAT WL_DEP "      - max_preemptions: 0\n        workload: chats\n",
         "plan.yaml:10:19: unknown workload 'chats' (did you mean 'chat'?)"},
        {WL_CHAT WL_DEP "      - max_preemptions: 0\n",
         "plan.yaml:9:9: 'max_preemptions' needs a 'workload' (a name from the file's 'workloads')"},
        {WL_CHAT WL_DEP "      - fits: true\n        workload: chat\n",
         "plan.yaml:10:19: 'workload' does not apply to 'fits'"},
        {WL_CHAT WL_DEP "      - max_preemptions: -1\n        workload: chat\n", "plan.yaml:9:26: 'max_preemptions': "},
        {"kvplan_plan: 1\nworkloads:\n  chat: {prompt: 100, prefix: 200}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:9: workload 'chat': the shared prefix (200 tokens) is longer than the shortest prompt (100)"},
        {"kvplan_plan: 1\nworkloads:\n  chat: {trace: nope.csv, rate: 2}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:33: 'rate' describes a synthetic workload; 'trace' gives its own"},
        {"kvplan_plan: 1\nworkloads:\n  chat: {prompt: 0-5}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:18: 'prompt': must be N or LO-HI with 1 <= LO <= HI < 2^32 (got '0-5')"},
        {"kvplan_plan: 1\nworkloads:\n  chat: {prefix_share: 0.5}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:24: 'prefix_share': needs a prefix (the shared tokens)"},
        /* the keys' rules are sim.h's, wrapped with the node's place */
        {"kvplan_plan: 1\nworkloads:\n  chat: {rate: -1}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:16: 'rate': must be a number of requests/s >= 0 (got '-1')"},
        {"kvplan_plan: 1\nworkloads:\n  chat: {requests: 0}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:20: 'requests': must be 1 to 10000000 requests (got '0')"},
        /* the simulator's budget, at the requests key, before anything is drawn (issue #37) */
        {"kvplan_plan: 1\nworkloads:\n  chat: {requests: 10000000}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:20: workload 'chat': 10,000,000 requests of up to 1,024 + 256 tokens cost 13,440,000,000 "
         "token-steps, more than the simulator's budget KVP_SIM_BUDGET of 100,000,000"},
        {"kvplan_plan: 1\nworkloads:\n  chat: {prompt: 4000000000}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:9: workload 'chat': 1,000 requests of up to 4,000,000,000 + 256 tokens cost"},
        {"kvplan_plan: 1\nworkloads:\n  chat: {prefix: 16, prefix_share: 2}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:36: 'prefix_share': must be a fraction from 0 to 1 (got '2')"},
        {"kvplan_plan: 1\nworkloads:\n  t: {trace: t.csv, max_queue: soon}\n" WL_DEP "      - fits: true\n",
         "plan.yaml:3:32: 'max_queue': must be a number of seconds >= 0 (got 'soon')"},
        {"kvplan_plan: 1\nworkloads:\n  t: {trace: t.csv}\n" WL_DEP
         "      - min_sustained_rate: 1\n        workload: t\n",
         "plan.yaml:10:19: 'min_sustained_rate' varies a synthetic workload's rate; 't' is a trace"},
        {WL_CHAT "deployments:\n  - name: l8\n    model: llama-3.1-8b\n    gpu_memory: 80GiB\n    assert:\n"
                 "      - max_preemptions: 0\n        workload: chat\n",
         "plan.yaml:9:9: 'max_preemptions' needs a 'gpu' from the catalog (its roofline times the steps)"},
    };
    put("t.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,10\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kvp_plan p = {0};
        struct kvp_error err = {0};
        char got[KVP_ERROR_TEXT_MAX];
        const char *path = put("plan.yaml", cases[i].text);
        ck_assert_int_ne(kvp_plan_load(&p, path, models, gpus, &err), KVP_OK);
        kvp_error_text(&err, got, sizeof got);
        ck_assert_msg(strstr(got, cases[i].msg) != NULL, "case %zu: got '%s', want '%s'", i, got, cases[i].msg);
        ck_assert_uint_eq(p.n, 0);
        ck_assert_uint_eq(p.n_workloads, 0);
        kvp_plan_release(&p);
    }
    /* a file sees its own workloads only, not an included file's */
    put("inc.yaml", WL_CHAT);
    {
        struct kvp_plan p = {0};
        struct kvp_error err = {0};
        const char *path = put("plan.yaml", "kvplan_plan: 1\ninclude: [inc.yaml]\n" WL_DEP
                                            "      - max_preemptions: 0\n        workload: chat\n");
        ck_assert_int_ne(kvp_plan_load(&p, path, models, gpus, &err), KVP_OK);
        ck_assert_ptr_nonnull(strstr(err.msg, "unknown workload 'chat' (this file has no 'workloads')"));
        kvp_plan_release(&p);
    }
#undef WL_DEP
#undef WL_CHAT
}
END_TEST

START_TEST(bad_files)
{
    test_bad_files("plan-", ".yaml", load_plan);
}
END_TEST

START_TEST(failed_load_keeps_earlier_plans)
{
    struct kvp_plan p = {0};
    struct kvp_error err = {0};
    char text[2048];
    char bad[512];
    snprintf(text, sizeof text, "%s      - fits: true\n", DEPLOYMENT);
    ck_assert_kvp_ok(kvp_plan_load(&p, put("one.yaml", text), models, gpus, &err), err);
    ck_assert_uint_eq(p.n, 1);
    /* a second file with a good deployment, then a bad one: neither stays */
    snprintf(bad, sizeof bad, "kvplan_plan: 1\ndeployments:\n"
                              "  - {name: ok, model: llama-3.1-8b, gpu: h100, assert: [fits: true]}\n"
                              "  - {name: bad, model: llama-3.1-8b, gpu: h100, assert: [fits: maybe]}\n");
    ck_assert_int_eq(kvp_plan_load(&p, put("two.yaml", bad), models, gpus, &err), KVP_ERR_SCHEMA);
    ck_assert_uint_eq(p.n, 1);
    /* the same deployment name in another file is a clash */
    ck_assert_int_eq(kvp_plan_load(&p, put("three.yaml", text), models, gpus, &err), KVP_ERR_SCHEMA);
    ck_assert_ptr_nonnull(strstr(err.msg, "deployment 'l70' is defined twice (first at "));
    ck_assert_int_eq(kvp_plan_load(&p, "tests/data/bad/no-such-plan.yaml", models, gpus, &err), KVP_ERR_IO);
    kvp_plan_release(&p);
    kvp_plan_release(&p); /* released twice: a zeroed plan is a no-op */
}
END_TEST

START_TEST(baseline_errors)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{\"kvplan_check\": 2, \"results\": []}", "base.json:1:18: 'kvplan_check' must be 1 (got 2)"},
        {"{\"results\": []}", "base.json:1:1: missing required key 'kvplan_check'"},
        {"{\"kvplan_check\": 1}", "base.json:1:1: missing required key 'results'"},
        {"{\"kvplan_check\": 1, \"results\": [{\"id\": \"l70/fits\"}]}",
         "base.json:1:33: missing required key 'measured'"},
        {"{\"kvplan_check\": 1, \"results\": [{\"id\": \"l70/fits\", \"measured\": \"x\"}]}",
         "base.json:1:64: 'measured' must be a number (got 'x')"},
        {"{\"kvplan_check\": 1, \"results\": [{\"id\": \"l70/fits\", \"measured\": 1}, "
         "{\"id\": \"l70/fits\", \"measured\": 1}]}",
         "base.json:1:68: result 'l70/fits' appears twice"},
    };
    struct kvp_plan p = {0};
    struct kvp_plan_report r = {0};
    struct kvp_error err = {0};
    char got[KVP_ERROR_TEXT_MAX];

    evaluate_text(DEPLOYMENT "      - fits: true\n", &p, &r);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = put("base.json", cases[i].text);
        ck_assert_int_ne(kvp_plan_baseline_apply(&r, path, 0.05, &err), KVP_OK);
        kvp_error_text(&err, got, sizeof got);
        ck_assert_str_eq(strstr(got, "base.json"), cases[i].want);
    }
    ck_assert_int_eq(kvp_plan_baseline_apply(&r, "x.json", 1.5, &err), KVP_ERR_USAGE);
    ck_assert_int_eq(kvp_plan_baseline_apply(&r, "tests/data/no-such.json", 0.05, &err), KVP_ERR_IO);
    kvp_plan_report_release(&r);
    kvp_plan_report_release(&r);
    kvp_plan_release(&p);
}
END_TEST

START_TEST(kind_names)
{
    ck_assert_str_eq(kvp_check_kind_name(KVP_CHECK_MAX_TPOT), "max_tpot_ms");
    ck_assert_str_eq(kvp_check_kind_name(KVP_CHECK_KIND_COUNT), "?");
    ck_assert(kvp_check_higher_is_better(KVP_CHECK_MIN_CONTEXT));
    ck_assert(!kvp_check_higher_is_better(KVP_CHECK_MAX_KV_SHARE));
}
END_TEST

/* settings.h's table is the plan's keys: every row, at its example value, gives
 * the same deployment from a plan as from kvp_settings_put (which kvplan fit's
 * options go through), compared row by row as text. */
START_TEST(every_setting_is_a_plan_key)
{
    for (uint32_t row = 0; row < kvp_settings_count(); row++) {
        const struct kvp_setting *k = kvp_setting_at(row);
        /* EPLB's redundant experts: under expert parallelism, of a MoE model */
        bool eplb = strcmp(k->key, "redundant_experts") == 0;
        const char *model = eplb ? "qwen3-30b-a3b" : "llama-3.1-8b";
        const struct kvp_model *m = kvp_catalog_find(models, model);
        struct kvp_settings st;
        struct kvp_deploy a;
        const struct kvp_gpu *ga;
        struct kvp_plan p = {0};
        struct kvp_error err = {0};
        char text[512], x[KVP_SETTING_VALUE_MAX], y[KVP_SETTING_VALUE_MAX];
        int bad;

        /* llama.cpp's own settings, separate K and V, and a GPU count alone
         * (elsewhere it needs tp x pp to match), under llama.cpp */
        bool llama = strncmp(k->key, "n_", 2) == 0 || strcmp(k->key, "gpus") == 0 ||
                     strstr("kv_unified swa_full mla_v flash_attn split k_dtype v_dtype", k->key) != NULL;
        /* SGLang's DP attention needs its engine and 1 < dp dividing tp */
        bool sglang_dp = strcmp(k->key, "dp_attention") == 0;
        kvp_settings_clear(&st);
        if (k->type != KVP_SET_GPU)
            ck_assert_kvp_ok(kvp_settings_put(&st, "gpu", "h100", &err), err);
        if (llama)
            ck_assert_kvp_ok(kvp_settings_put(&st, "engine", "llamacpp", &err), err);
        if (sglang_dp) {
            ck_assert_kvp_ok(kvp_settings_put(&st, "engine", "sglang", &err), err);
            ck_assert_kvp_ok(kvp_settings_put(&st, "tp", "2", &err), err);
            ck_assert_kvp_ok(kvp_settings_put(&st, "dp", "2", &err), err);
        }
        if (eplb)
            ck_assert_kvp_ok(kvp_settings_put(&st, "expert_parallel", "true", &err), err);
        ck_assert_kvp_ok(kvp_settings_put(&st, k->key, k->example, &err), err);
        ck_assert_kvp_ok(kvp_settings_apply(&st, m, gpus, &a, &ga, &bad, &err), err);
        snprintf(text, sizeof text,
                 "kvplan_plan: 1\ndeployments:\n  - name: x\n    model: %s\n%s%s    %s: \"%s\"\n"
                 "    assert: {fits: true}\n",
                 model, k->type != KVP_SET_GPU ? "    gpu: h100\n" : "",
                 llama       ? "    engine: llamacpp\n"
                 : sglang_dp ? "    engine: sglang\n    tp: 2\n    dp: 2\n"
                 : eplb      ? "    expert_parallel: true\n"
                             : "",
                 k->key, k->example);
        ck_assert_msg(kvp_plan_load(&p, put("row.yaml", text), models, gpus, &err) == KVP_OK, "%s: %s", k->key,
                      err.msg);
        for (uint32_t i = 0; i < kvp_settings_count(); i++)
            ck_assert_msg(strcmp(kvp_setting_text(i, &a, ga, x, sizeof x),
                                 kvp_setting_text(i, &p.deps[0].d, p.deps[0].gpu, y, sizeof y)) == 0,
                          "%s: %s is '%s' from the table, '%s' from a plan", k->key, kvp_setting_at(i)->key, x, y);
        kvp_plan_release(&p);
    }
}
END_TEST

/* ---- the keys written out by hand, against the settings table ---- */

/* The whole of path (relative to the repository), NUL-terminated; the caller frees it. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text;
    long n;
    ck_assert_msg(f != NULL, "cannot read %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    ck_assert_int_ge(n = ftell(f), 0);
    rewind(f);
    ck_assert_ptr_nonnull(text = malloc((size_t)n + 1));
    ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* The next `{key: 'K'` of the page's KEYS after *p and before end: K into key, *p past it; false when none. */
static bool page_key(const char **p, const char *end, char *key, size_t n)
{
    const char *k = strstr(*p, "{key: '"), *q;
    if (!k || k >= end)
        return false;
    k += strlen("{key: '");
    ck_assert_ptr_nonnull(q = strchr(k, '\''));
    snprintf(key, n, "%.*s", (int)(q - k), k);
    *p = q;
    return true;
}

/* web/page.js's KEYS (the URL's keys and the flags it gives kvplan) are the
 * plan's model and then the settings table, in its order, each with the
 * option the table makes of it ('-' for '_') and `bool` for the flags. */
START_TEST(page_keys_are_the_settings_table)
{
    char *js = slurp("web/page.js"), key[64], want[80];
    const char *p = strstr(js, "const KEYS = ["), *end;
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(end = strstr(p, "];"));
    ck_assert(page_key(&p, end, key, sizeof key));
    ck_assert_str_eq(key, "model");
    for (uint32_t row = 0; row < kvp_settings_count(); row++) {
        const struct kvp_setting *k = kvp_setting_at(row);
        const char *close;
        ck_assert_msg(page_key(&p, end, key, sizeof key), "web/page.js's KEYS ends before '%s'", k->key);
        ck_assert_msg(strcmp(key, k->key) == 0, "web/page.js's KEYS has '%s' where the settings table has '%s'", key,
                      k->key);
        ck_assert_ptr_nonnull(close = strchr(p, '}'));
        snprintf(want, sizeof want, "flag: '--%s'", k->key);
        for (char *c = want + strlen("flag: '--"); *c; c++)
            *c = *c == '_' ? '-' : *c;
        ck_assert_msg(strstr(p, want) && strstr(p, want) < close, "web/page.js: '%s' wants %s", k->key, want);
        ck_assert_msg((k->type == KVP_SET_FLAG) == (strstr(p, "bool: true") && strstr(p, "bool: true") < close),
                      "web/page.js: '%s' is %sa flag in the settings table", k->key,
                      k->type == KVP_SET_FLAG ? "" : "not ");
    }
    ck_assert_msg(!page_key(&p, end, key, sizeof key), "web/page.js's KEYS has '%s', which the settings table has not",
                  key);
    free(js);
}
END_TEST

/* docs/plan-format.md's row "every setting of include/kvplan/settings.h"
 * names the table's keys, in its order: the `quoted` words outside
 * parentheses between its colon and "; `kvplan fit --help`". */
START_TEST(plan_format_keys_are_the_settings_table)
{
    char *md = slurp("docs/plan-format.md");
    const char *p = strstr(md, "| every setting of"), *stop;
    uint32_t row = 0;
    int depth = 0;
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(p = strstr(p, "`-`:"));
    ck_assert_ptr_nonnull(stop = strstr(p, "; `kvplan fit --help`"));
    for (p += strlen("`-`:"); p < stop; p++) {
        const char *q;
        depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
        if (*p != '`')
            continue;
        ck_assert_ptr_nonnull(q = strchr(p + 1, '`'));
        if (depth == 0) {
            ck_assert_msg(row < kvp_settings_count(), "docs/plan-format.md names '%.*s' past the settings table",
                          (int)(q - p - 1), p + 1);
            ck_assert_msg(strlen(kvp_setting_at(row)->key) == (size_t)(q - p - 1) &&
                              strncmp(p + 1, kvp_setting_at(row)->key, (size_t)(q - p - 1)) == 0,
                          "docs/plan-format.md names '%.*s' where the settings table has '%s'", (int)(q - p - 1), p + 1,
                          kvp_setting_at(row)->key);
            row++;
        }
        p = q;
    }
    ck_assert_msg(row == kvp_settings_count(), "docs/plan-format.md ends its keys before '%s'",
                  row < kvp_settings_count() ? kvp_setting_at(row)->key : "");
    free(md);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("plan");
    TCase *core = tcase_create("core");
    TCase *limits = tcase_create("limits");

    tcase_add_checked_fixture(core, setup, teardown);
    tcase_add_checked_fixture(limits, setup, teardown);
    tcase_set_timeout(core, 60);
    tcase_set_timeout(limits, 60);
    tcase_add_test(core, each_kind_passes_and_fails);
    tcase_add_test(core, every_setting_is_a_plan_key);
    tcase_add_test(core, page_keys_are_the_settings_table);
    tcase_add_test(core, plan_format_keys_are_the_settings_table);
    tcase_add_test(core, fits_and_headroom_figures);
    tcase_add_test(core, modifiers_change_the_question);
    tcase_add_test(core, includes_defaults_and_relative_paths);
    tcase_add_test(core, includes_stay_in_the_plan_folder);
    tcase_add_test(core, render_formats);
    tcase_add_test(core, baseline_both_ways);
    tcase_add_test(core, simulated_assertions);
    tcase_add_test(core, simulated_on_a_deployment_that_does_not_start);
    suite_add_tcase(s, core);

    tcase_add_test(limits, bad_files);
    tcase_add_test(limits, workload_errors);
    tcase_add_test(limits, failed_load_keeps_earlier_plans);
    tcase_add_test(limits, baseline_errors);
    tcase_add_test(limits, kind_names);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
