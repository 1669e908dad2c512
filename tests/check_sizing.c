/* check_sizing.c -- sizing tables (sizing.h) and charts (chart.h).
 *
 * Golden outputs live in tests/data/golden/table/ and are compared byte for
 * byte. After an intended change, regenerate them with
 *     KVPLAN_REGEN_GOLDEN=1 build/rel/tests/check_sizing
 * and review the diff. tests/check_xml.py parses the HTML and SVG ones. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/chart.h"
#include "kvplan/num.h"
#include "kvplan/render.h"
#include "kvplan/gpu.h"
#include "kvplan/sizing.h"
#include "testutil.h"

#define GOLDEN "tests/data/golden/table/"

/* Compare b with the golden file (or write it when regenerating). */
static void golden(const char *name, const struct kvp_buf *b)
{
    char path[256];
    FILE *f;
    snprintf(path, sizeof path, GOLDEN "%s", name);
    ck_assert(!b->nomem && b->len > 0);
    if (getenv("KVPLAN_REGEN_GOLDEN")) {
        ck_assert_msg((f = fopen(path, "wb")) != NULL, "cannot write %s", path);
        ck_assert_uint_eq(fwrite(b->data, 1, b->len, f), b->len);
        fclose(f);
        return;
    }
    ck_assert_msg((f = fopen(path, "rb")) != NULL, "missing golden %s (KVPLAN_REGEN_GOLDEN=1 writes it)", path);
    char *want = malloc(b->len + 2);
    size_t n = fread(want, 1, b->len + 1, f);
    fclose(f);
    want[n] = '\0';
    ck_assert_msg(n == b->len && memcmp(want, b->data, n) == 0, "%s differs from the output:\n%s", path, b->data);
    free(want);
}

/* ---- core ---- */

START_TEST(test_units)
{
    static const struct {
        uint64_t max;
        bool si;
        const char *name;
        uint64_t bytes;
    } t[] = {
        {0, false, "B", 1},
        {1023, false, "B", 1},
        {1024, false, "KiB", 1024},
        {68719476736ULL, false, "GiB", 1073741824ULL},
        {1099511627776ULL, false, "TiB", 1099511627776ULL},
        {999999999, true, "MB", 1000000},
        {1000000000, true, "GB", 1000000000},
        {UINT64_MAX, false, "PiB", 1125899906842624ULL},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct kvp_unit u = kvp_unit_for(t[i].max, t[i].si);
        ck_assert_str_eq(u.name, t[i].name);
        ck_assert_uint_eq(u.bytes, t[i].bytes);
    }
}
END_TEST

START_TEST(test_labels)
{
    static const struct {
        uint64_t tokens;
        const char *label;
    } t[] = {{1024, "1k"}, {4096, "4k"}, {40960, "40k"}, {131072, "128k"}, {1048576, "1M"}, {1000, "1000"},
             {2048 + 1, "2049"}, {3u << 20, "3M"}};
    char buf[32];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ck_assert_str_eq(kvp_tokens_label(t[i].tokens, buf, sizeof buf), t[i].label);
}
END_TEST

START_TEST(test_lists)
{
    uint64_t v[4];
    struct kvp_format f[4];
    uint32_t n;
    struct kvp_error err = {0};
    char name[64];
    ck_assert_kvp_ok(kvp_parse_count_list("1k,4k,128K", v, 4, &n, &err), err);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(v[0], 1024);
    ck_assert_uint_eq(v[2], 131072);
    ck_assert_kvp_ok(kvp_parse_format_list("bf16,q4_0,int4:group=64", f, 4, &n, &err), err);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(kvp_format_name(&f[2], name, sizeof name), "int4:group=64");
}
END_TEST

/* The seeds' worked example (004): a 7B MHA model in fp16 at batch 1. */
START_TEST(test_seed_cells)
{
    struct kvp_model *m = test_load("llama-2-7b");
    const struct kvp_model *ms[] = {m};
    uint64_t ctx[] = {4096, 32768, 131072}, batch[] = {1, 8};
    struct kvp_format fmt[] = {kvp_format_plain(KVP_DTYPE_F16), kvp_format_plain(KVP_DTYPE_Q4_0)};
    struct kvp_sizing s = {.models = ms, .n_models = 1, .contexts = ctx, .n_contexts = 3, .batches = batch,
                           .n_batches = 2, .formats = fmt, .n_formats = 2};
    static const struct {
        uint32_t ci, bi, fi;
        uint64_t kv;
    } t[] = {
        {0, 0, 0, 2147483648ULL},          /* 2 GiB at 4K */
        {1, 0, 0, 17179869184ULL},         /* 16 GiB at 32K */
        {2, 0, 0, 68719476736ULL},         /* 64 GiB at 128K, not the translation's 32 GB */
        {2, 1, 0, 8 * 68719476736ULL},     /* linear in the batch */
        {2, 0, 1, 68719476736ULL / 32 * 9}, /* q4_0: 18 B per 32 values = 4.5 bits */
    };
    struct kvp_sizing_cell c;
    struct kvp_error err = {0};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ck_assert_kvp_ok(kvp_sizing_cell(&s, 0, 0, t[i].ci, t[i].bi, t[i].fi, &c, &err), err);
        ck_assert_uint_eq(c.kv_bytes, t[i].kv);
        ck_assert_uint_eq(c.state_bytes, 0);
    }
    kvp_model_free(m);
}
END_TEST

/* With a deployment each cell is `kvplan fit`'s answer for the same settings:
 * vLLM's default release (the default engine), one H100, 4K requests. */
START_TEST(test_fit_cells)
{
    struct kvp_model *m = test_load("llama-2-7b");
    const struct kvp_model *ms[] = {m};
    uint64_t ctx[] = {4096, 8192}, batch[] = {1, 64};
    struct kvp_format fmt[] = {kvp_format_plain(KVP_DTYPE_F16), kvp_format_plain(KVP_DTYPE_Q4_0)};
    struct kvp_settings st;
    struct kvp_sizing s = {.models = ms, .n_models = 1, .contexts = ctx, .n_contexts = 2, .batches = batch,
                           .n_batches = 2, .formats = fmt, .n_formats = 2, .deploy = &st};
    struct kvp_sizing_cell c;
    struct kvp_deploy d;
    struct kvp_fit f;
    const struct kvp_gpu *gpu;
    struct kvp_error err = {0};
    int bad;
    kvp_settings_clear(&st);
    ck_assert_kvp_ok(kvp_settings_put(&st, "gpu_memory", "85028896768B", &err), err);
    ck_assert_kvp_ok(kvp_sizing_deploy(&s, 0, 0, &d, &gpu, &err), err);
    ck_assert_int_eq(d.engine, KVP_ENGINE_VLLM);
    /* what fit computes for the same settings, by hand */
    ck_assert_kvp_ok(kvp_settings_apply(&st, m, NULL, &d, &gpu, &bad, &err), err);
    d.context = 4096;
    d.concurrency = 64;
    ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
    ck_assert_kvp_ok(kvp_sizing_cell(&s, 0, 0, 0, 1, 0, &c, &err), err);
    ck_assert(c.max_concurrency == f.max_concurrency && c.fits == f.fits);
    ck_assert_uint_eq(c.kv_bytes, f.kv_bytes_required);
    ck_assert_uint_eq(c.weight_bytes, f.weights_bytes);
    ck_assert(c.max_concurrency > 1 && c.max_concurrency < 64 && !c.fits);
    ck_assert_kvp_ok(kvp_sizing_cell(&s, 0, 0, 0, 0, 0, &c, &err), err);
    ck_assert(c.fits);
    /* past the model's 4K and a format vLLM does not take: marked, not sized */
    ck_assert_kvp_ok(kvp_sizing_cell(&s, 0, 0, 1, 0, 0, &c, &err), err);
    ck_assert(c.beyond && !c.fits);
    ck_assert_str_eq(c.why, "past llama-2-7b's max context of 4096 tokens");
    ck_assert_kvp_ok(kvp_sizing_cell(&s, 0, 0, 0, 0, 1, &c, &err), err);
    ck_assert(c.unsupported && !c.fits && c.why[0]);
    /* a deployment without GPU memory is refused */
    kvp_settings_clear(&st);
    ck_assert_kvp_ok(kvp_settings_put(&st, "tp", "2", &err), err);
    ck_assert_int_eq(kvp_sizing_cell(&s, 0, 0, 0, 0, 0, &c, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "a deployment needs a GPU or its memory (gpu, gpu_memory or kv_cache_memory)");
    kvp_model_free(m);
}
END_TEST

/* Several GPUs and one combined table: every cell is the cell of the same
 * model on that GPU alone (the GPU axis only sets the "gpu" row), and the
 * combined table lays them out with models as rows (golden). */
START_TEST(test_combined_gpus)
{
    struct kvp_model *m = test_load("llama-2-7b"), *j = test_load("jamba-v0.1");
    const struct kvp_model *ms[] = {m, j};
    const char *ids[] = {"h100", "l40s"};
    uint64_t ctx[] = {4096}, batch[] = {1};
    struct kvp_format fmt[2];
    struct kvp_gpu_catalog *gc = NULL;
    struct kvp_settings st, one;
    struct kvp_sizing s = {.models = ms, .n_models = 2, .contexts = ctx, .n_contexts = 1, .batches = batch,
                           .n_batches = 1, .formats = fmt, .n_formats = 2, .deploy = &st, .gpu_ids = ids,
                           .n_gpu_ids = 2, .combined = true};
    struct kvp_sizing alone = s;
    struct kvp_sizing_cell c, c1;
    struct kvp_buf b = {0};
    struct kvp_error err = {0};
    uint32_t n;

    ck_assert_kvp_ok(kvp_parse_format_list("bf16,fp8", fmt, 2, &n, &err), err);
    ck_assert_kvp_ok(kvp_gpu_catalog_load("models/gpus.yaml", &gc, &err), err);
    s.gpus = alone.gpus = gc;
    kvp_settings_clear(&st);
    one = st;
    ck_assert_kvp_ok(kvp_settings_put(&one, "gpu", "l40s", &err), err);
    alone.deploy = &one;
    alone.n_gpu_ids = 0;
    for (uint32_t mi = 0; mi < 2; mi++)
        for (uint32_t fi = 0; fi < 2; fi++) {
            ck_assert_kvp_ok(kvp_sizing_cell(&s, mi, 1, 0, 0, fi, &c, &err), err);
            ck_assert_kvp_ok(kvp_sizing_cell(&alone, mi, 0, 0, 0, fi, &c1, &err), err);
            ck_assert(c.max_concurrency == c1.max_concurrency && c.fits == c1.fits);
            ck_assert_uint_eq(c.kv_bytes, c1.kv_bytes);
        }
    ck_assert_kvp_ok(kvp_sizing_cell(&s, 0, 0, 0, 0, 0, &c, &err), err);
    ck_assert(c.max_concurrency > c1.max_concurrency); /* an H100 holds more than an L40S */
    ck_assert_kvp_ok(kvp_sizing_render(&s, KVP_OUT_TEXT, &b, &err), err);
    golden("combined.txt", &b);
    kvp_buf_release(&b);
    ck_assert_kvp_ok(kvp_sizing_render(&s, KVP_OUT_JSON, &b, &err), err);
    ck_assert_ptr_nonnull(strstr(b.data, "\"gpu\": \"l40s\""));
    kvp_buf_release(&b);
    /* refused: a GPU axis without a deployment, too many GPUs, too many columns */
    s.deploy = NULL;
    ck_assert_int_eq(kvp_sizing_render(&s, KVP_OUT_TEXT, &b, &err), KVP_ERR_USAGE);
    s.deploy = &st;
    s.n_gpu_ids = KVP_SIZING_MAX_GPUS + 1;
    ck_assert_int_eq(kvp_sizing_render(&s, KVP_OUT_TEXT, &b, &err), KVP_ERR_USAGE);
    s.n_gpu_ids = 2;
    {
        uint64_t many[33];
        for (uint32_t i = 0; i < 33; i++)
            many[i] = 1024 * (i + 1);
        s.contexts = many;
        s.n_contexts = 33; /* 2 x 33 x 1 x 2 = 132 columns */
        ck_assert_int_eq(kvp_sizing_render(&s, KVP_OUT_TEXT, &b, &err), KVP_ERR_USAGE);
        ck_assert_ptr_nonnull(strstr(err.msg, "at most 64 columns"));
    }
    kvp_buf_release(&b);
    kvp_gpu_catalog_free(gc);
    kvp_model_free(m);
    kvp_model_free(j);
}
END_TEST

static void render_llama(enum kvp_out fmt, bool gpu, const char *name)
{
    struct kvp_model *m = test_load("llama-2-7b"), *j = test_load("jamba-v0.1");
    const struct kvp_model *ms[] = {m, j};
    uint64_t ctx[] = {1024, 4096, 32768, 131072}, batch[] = {1, 8};
    struct kvp_format fmt3[3];
    struct kvp_sizing s = {.models = ms, .n_models = 2, .contexts = ctx, .n_contexts = 4, .batches = batch,
                           .n_batches = 2, .formats = fmt3, .n_formats = 3};
    struct kvp_buf b = {0};
    struct kvp_error err = {0};
    uint32_t n;
    ck_assert_kvp_ok(kvp_parse_format_list("bf16,fp8,q4_0", fmt3, 3, &n, &err), err);
    struct kvp_settings st;
    kvp_settings_clear(&st);
    if (gpu) { /* h200 as its catalog entry reports; the default engine */
        ck_assert_kvp_ok(kvp_settings_put(&st, "gpu_memory", "150109945856B", &err), err);
        s.deploy = &st;
    }
    ck_assert_kvp_ok(kvp_sizing_render(&s, fmt, &b, &err), err);
    golden(name, &b);
    kvp_buf_release(&b);
    kvp_model_free(m);
    kvp_model_free(j);
}

START_TEST(test_golden_text) { render_llama(KVP_OUT_TEXT, false, "sizing.txt"); }
END_TEST
START_TEST(test_golden_md) { render_llama(KVP_OUT_MD, true, "sizing-gpu.md"); }
END_TEST
START_TEST(test_golden_csv) { render_llama(KVP_OUT_CSV, true, "sizing-gpu.csv"); }
END_TEST
START_TEST(test_golden_json) { render_llama(KVP_OUT_JSON, false, "sizing.json"); }
END_TEST
START_TEST(test_golden_html) { render_llama(KVP_OUT_HTML, true, "sizing-gpu.html"); }
END_TEST

START_TEST(test_golden_svg)
{
    struct kvp_model *m = test_load("llama-3.1-8b"), *d = test_load("deepseek-v2-lite");
    struct kvp_chart *c = calloc(1, sizeof *c);
    uint64_t ctx[] = {1024, 4096, 16384, 65536, 262144, 1048576};
    struct kvp_format f = kvp_format_plain(KVP_DTYPE_BF16), q = kvp_format_plain(KVP_DTYPE_Q4_0);
    struct kvp_buf b = {0};
    struct kvp_error err = {0};
    kvp_chart_init(c, "two models <&> \"quoted\"", "bf16 and q4_0");
    ck_assert_kvp_ok(kvp_chart_set_x(c, ctx, 6, &err), err);
    ck_assert_kvp_ok(kvp_chart_add(c, m, &f, "llama-3.1-8b: weights + KV in bf16", &err), err);
    ck_assert_kvp_ok(kvp_chart_add(c, m, &q, "llama-3.1-8b: weights + KV in q4_0", &err), err);
    ck_assert_kvp_ok(kvp_chart_add(c, d, &f, "deepseek-v2-lite: weights + KV in bf16", &err), err);
    ck_assert_uint_eq(c->series[1].group, c->series[0].group); /* same model, one weights line */
    ck_assert_uint_ne(c->series[2].group, c->series[0].group);
    ck_assert_uint_eq(c->series[0].kv[3], 131072ULL * 65536); /* 128 KiB per token at 64k */
    /* each model stops at its own max context: 128k (llama), 160k (deepseek): 1k..64k of the six */
    ck_assert_uint_eq(c->series[0].n_points, 4);
    ck_assert_uint_eq(c->series[2].n_points, 4);
    c->capacity = 85028896768ULL;
    snprintf(c->capacity_label, sizeof c->capacity_label, "1 x h100-sxm");
    ck_assert_kvp_ok(kvp_chart_svg(c, &b, &err), err);
    ck_assert_ptr_nonnull(strstr(b.data, "two models &lt;&amp;&gt; &quot;quoted&quot;"));
    golden("chart.svg", &b);
    kvp_buf_release(&b);
    /* one model: the weights as a band, the linear axis from 0 */
    kvp_chart_init(c, "llama-3.1-8b", "one model");
    ck_assert_kvp_ok(kvp_chart_set_x(c, ctx, 3, &err), err);
    ck_assert_kvp_ok(kvp_chart_add(c, m, &f, "weights + KV in bf16", &err), err);
    ck_assert_kvp_ok(kvp_chart_svg(c, &b, &err), err);
    ck_assert_ptr_nonnull(strstr(b.data, ">0 GiB</text>"));
    ck_assert_ptr_nonnull(strstr(b.data, "<text x=\"512.0\"")); /* two legend columns: the second at 96 + 380 + 36 */
    golden("chart-one.svg", &b);
    kvp_buf_release(&b);
    /* a label wider than its legend column: one column, none at the second's x */
    kvp_chart_init(c, "llama-3.1-8b", "one model, a long label");
    ck_assert_kvp_ok(kvp_chart_set_x(c, ctx, 3, &err), err);
    ck_assert_kvp_ok(
        kvp_chart_add(c, m, &f, "weights + reserve + KV in bf16; longest context 262144 at concurrency 4", &err), err);
    ck_assert_kvp_ok(kvp_chart_svg(c, &b, &err), err);
    ck_assert_ptr_null(strstr(b.data, "<text x=\"512.0\""));
    ck_assert_ptr_nonnull(strstr(b.data, "<text x=\"132.0\" y=\"538.0\" class=\"legend\">weights ("));
    kvp_buf_release(&b);
    /* per GPU under vLLM's default release on one H100, 8 requests: fit's longest context drawn */
    {
        struct kvp_deploy dep;
        struct kvp_fit fit;
        kvp_deploy_init(&dep, KVP_ENGINE_VLLM, m);
        dep.gpu_memory = 85028896768ULL;
        dep.concurrency = 8;
        ck_assert_kvp_ok(kvp_fit_compute(m, &dep, &fit, &err), err);
        kvp_chart_init(c, "llama-3.1-8b", "per GPU, vllm");
        c->batch = 8;
        ck_assert_kvp_ok(kvp_chart_set_x(c, ctx, 6, &err), err);
        ck_assert_kvp_ok(kvp_chart_add_fit(c, m, &dep, "weights + reserve + KV in bf16", &err), err);
        ck_assert_uint_eq(c->series[0].max_context, fit.max_context);
        ck_assert_uint_eq(c->series[0].weights, fit.weights_bytes);
        ck_assert(fit.max_context > 1024 && fit.max_context < 131072); /* inside the axis: the line is drawn */
        c->capacity = dep.gpu_memory;
        snprintf(c->capacity_label, sizeof c->capacity_label, "h100-sxm");
        ck_assert_kvp_ok(kvp_chart_svg(c, &b, &err), err);
        ck_assert_ptr_nonnull(strstr(b.data, "stroke-dasharray=\"3 3\""));
        /* the line the curves stop at is vLLM's budget, util x GPU memory, not the whole card; the
         * reserve is a band of its own, the y title says it is included (issue #36) */
        ck_assert_uint_eq(c->usable, (uint64_t)((long double)dep.gpu_memory * 0.92L)); /* vllm 0.21.0's util */
        ck_assert_double_eq_tol(c->util, 0.92, 1e-12);
        ck_assert_ptr_nonnull(strstr(b.data, ">usable: 72.85 GiB, fraction 0.92; rest shaded</text>"));
        ck_assert_ptr_nonnull(strstr(b.data, ">reserve: activations, non-torch, CUDA graphs</text>"));
        ck_assert_ptr_nonnull(strstr(b.data, ">memory per GPU: weights + reserve + KV cache (bytes, IEC"));
        golden("chart-fit.svg", &b);
        kvp_buf_release(&b);
    }
    free(c);
    kvp_model_free(m);
    kvp_model_free(d);
}
END_TEST

/* ---- limits ---- */

/* JSON has no inf or nan: kvp_json_double writes null for them (simulate's
 * JSON carried "inf" and "-nan", issue #37); finite values as %.6g. */
START_TEST(test_json_non_finite)
{
    struct kvp_buf b = {0};
    struct kvp_json j;
    kvp_json_init(&j, &b);
    kvp_json_begin(&j, NULL, '{');
    kvp_json_double(&j, "a", INFINITY);
    kvp_json_double(&j, "b", -INFINITY);
    kvp_json_double(&j, "c", NAN);
    kvp_json_double(&j, "d", 0.1);
    kvp_json_end(&j, '}');
    ck_assert_ptr_nonnull(strstr(b.data, "\"a\": null"));
    ck_assert_ptr_nonnull(strstr(b.data, "\"b\": null"));
    ck_assert_ptr_nonnull(strstr(b.data, "\"c\": null"));
    ck_assert_ptr_nonnull(strstr(b.data, "\"d\": 0.1"));
    ck_assert_ptr_null(strstr(b.data, "inf"));
    ck_assert_ptr_null(strstr(b.data, "nan"));
    kvp_buf_release(&b);
}
END_TEST

START_TEST(test_bad_lists)
{
    static const struct {
        const char *in, *msg;
    } t[] = {
        {"1k,,4k", "empty item in the list '1k,,4k'"},
        {"", "empty item in the list ''"},
        {"1k,4k,8k,16k,32k", "too many items in the list '1k,4k,8k,16k,32k' (at most 4)"},
    };
    uint64_t v[4];
    uint32_t n;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct kvp_error err = {0};
        ck_assert_int_eq(kvp_parse_count_list(t[i].in, v, 4, &n, &err), KVP_ERR_USAGE);
        ck_assert_str_eq(err.msg, t[i].msg);
    }
    struct kvp_error err = {0};
    ck_assert_int_ne(kvp_parse_count_list("1k,lots", v, 4, &n, &err), KVP_OK);
    ck_assert_ptr_nonnull(strstr(err.msg, "lots"));
    struct kvp_format f[2];
    ck_assert_int_ne(kvp_parse_format_list("bf16,bf17", f, 2, &n, &err), KVP_OK);
    ck_assert_ptr_nonnull(strstr(err.msg, "bf17"));
}
END_TEST

START_TEST(test_bad_sizing)
{
    struct kvp_model *m = test_load("llama-2-7b");
    const struct kvp_model *ms[] = {m};
    uint64_t ctx[KVP_SIZING_MAX_AXIS + 1], batch[] = {1};
    struct kvp_format fmt[] = {kvp_format_plain(KVP_DTYPE_F16)};
    struct kvp_sizing s = {.models = ms, .n_models = 1, .contexts = ctx, .n_contexts = 0, .batches = batch,
                           .n_batches = 1, .formats = fmt, .n_formats = 1};
    struct kvp_buf b = {0};
    struct kvp_error err = {0};
    for (uint32_t i = 0; i <= KVP_SIZING_MAX_AXIS; i++)
        ctx[i] = 1024 + i;
    ck_assert_int_eq(kvp_sizing_render(&s, KVP_OUT_TEXT, &b, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "a sizing table needs at least one of its contexts");
    s.n_contexts = KVP_SIZING_MAX_AXIS + 1;
    ck_assert_int_eq(kvp_sizing_render(&s, KVP_OUT_TEXT, &b, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "too many contexts for one table (got 65, at most 64)");
    /* a context whose bytes overflow 64 bits is an error, not a wrapped cell */
    ctx[0] = UINT64_MAX / 2;
    s.n_contexts = 1;
    batch[0] = 1u << 20;
    ck_assert_int_eq(kvp_sizing_render(&s, KVP_OUT_CSV, &b, &err), KVP_ERR_OVERFLOW);
    kvp_buf_release(&b);
    kvp_model_free(m);
}
END_TEST

START_TEST(test_bad_chart)
{
    struct kvp_chart *c = calloc(1, sizeof *c);
    struct kvp_buf b = {0};
    struct kvp_error err = {0};
    uint64_t down[] = {4096, 1024}, zero[] = {0};
    kvp_chart_init(c, "t", "s");
    ck_assert_int_eq(kvp_chart_set_x(c, down, 2, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "chart contexts must increase (got 1024 after 4096)");
    ck_assert_int_eq(kvp_chart_set_x(c, zero, 1, &err), KVP_ERR_USAGE);
    ck_assert_int_eq(kvp_chart_set_x(c, down, 0, &err), KVP_ERR_USAGE);
    ck_assert_int_eq(kvp_chart_svg(c, &b, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "a chart needs contexts and at least one series");
    kvp_buf_release(&b);
    free(c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("table");
    TCase *core = tcase_create("core"), *limits = tcase_create("limits");
    tcase_add_test(core, test_units);
    tcase_add_test(core, test_json_non_finite);
    tcase_add_test(core, test_labels);
    tcase_add_test(core, test_lists);
    tcase_add_test(core, test_seed_cells);
    tcase_add_test(core, test_fit_cells);
    tcase_add_test(core, test_combined_gpus);
    tcase_add_test(core, test_golden_text);
    tcase_add_test(core, test_golden_md);
    tcase_add_test(core, test_golden_csv);
    tcase_add_test(core, test_golden_json);
    tcase_add_test(core, test_golden_html);
    tcase_add_test(core, test_golden_svg);
    tcase_add_test(limits, test_bad_lists);
    tcase_add_test(limits, test_bad_sizing);
    tcase_add_test(limits, test_bad_chart);
    suite_add_tcase(s, core);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
