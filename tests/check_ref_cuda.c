/* check_ref_cuda.c -- the host side of the CUDA reference decoder (ref_cuda.h):
 * the regenerated weights against the CPU decoder, the granularity model's
 * arithmetic, format and model checks, the catalog guess, and the answer of a
 * build without CUDA. The kernels themselves need a GPU: tests/gpu/run.sh. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kvplan/gpu.h"
#include "kvplan/ref.h"
#include "kvplan/ref_cuda.h"
#include "testutil.h"

#define MiB (1ull << 20)

/* Attention layers of every kind the CUDA decoder runs: GQA full, sliding
 * window 5, chunk 4, MQA with dv != dk, and a layer with an MLP only. */
static void attn_zoo(struct kvp_model *m, uint32_t q_heads)
{
    struct kvp_error err = {0};
    struct kvp_layer_spec full = {.kind = KVP_LAYER_FULL, .n_heads = q_heads, .n_kv_heads = 2, .head_dim_k = 32,
                                  .head_dim_v = 32, .mlp = KVP_MLP_DENSE};
    struct kvp_layer_spec slide = full, chunk = full, mqa = full, none = full;
    kvp_model_init(m);
    strcpy(m->name, "attn-zoo");
    m->hidden = 48;
    m->intermediate = 64;
    m->vocab = 50;
    m->max_context = 4096;
    slide.kind = KVP_LAYER_SLIDING;
    slide.window = 5;
    chunk.kind = KVP_LAYER_CHUNKED;
    chunk.window = 4;
    chunk.mlp = KVP_MLP_NONE;
    mqa.n_kv_heads = 1;
    mqa.head_dim_v = 64;
    none.kind = KVP_LAYER_NONE;
    ck_assert_kvp_ok(kvp_model_add_layers(m, &full, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &slide, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &chunk, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &mqa, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &none, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &full, 1, &err), err); /* shares spec 0's weights */
    ck_assert_kvp_ok(kvp_model_validate(m, &err), err);
}

/* max |a - b| / max |b| over n values */
static double rel_diff(const float *a, const float *b, uint32_t n)
{
    double d = 0, mx = 0;
    for (uint32_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    return d / mx;
}

/* ---- core ------------------------------------------------------------------- */

/* The regenerated weights run through the host forward give the CPU
 * decoder's logits: same draws, same order, same math. */
START_TEST(weights_match_cpu_decoder)
{
    static const struct {
        uint32_t q_heads;
        struct kvp_ref_opts o;
        uint64_t n;
    } cases[] = {
        {4, {.seed = 1}, 9},
        {4, {.seed = 7, .q_per_kv = 1}, 12},
        {8, {.seed = 3, .hidden = 32, .intermediate = 40, .vocab = 30, .q_per_kv = 3}, 7},
        {4, {.seed = 2, .key_outliers = 3, .outlier_gain = 5.0f}, 6},
        {4,
         {.seed = 5, .key_outliers = 2, .heavy_tokens = 3, .heavy_gain = 4.5f, .loud_tokens = 6, .value_gain = 5.0f},
         10},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        struct kvp_model *m = malloc(sizeof *m);
        struct kvp_ref_model *rm;
        struct kvp_cuda_weights *w;
        struct kvp_error err = {0};
        uint32_t tok[16];
        float a[64], b[64];
        attn_zoo(m, cases[c].q_heads);
        ck_assert_kvp_ok(kvp_ref_model_new(m, &cases[c].o, &rm, &err), err);
        ck_assert_kvp_ok(kvp_cuda_weights_new(m, &cases[c].o, &w, &err), err);
        ck_assert_uint_eq(w->vocab, kvp_ref_vocab(rm));
        for (uint64_t t = 0; t < cases[c].n; t++)
            tok[t] = (uint32_t)((t * 2654435761u + c) % w->vocab);
        ck_assert_kvp_ok(kvp_ref_recompute(rm, tok, cases[c].n, b, &err), err);
        ck_assert_kvp_ok(kvp_cuda_host_logits(w, tok, cases[c].n, a, &err), err);
        ck_assert_msg(rel_diff(a, b, w->vocab) < 1e-5, "case %zu: relative difference %g", c,
                      rel_diff(a, b, w->vocab));
        kvp_cuda_weights_free(w);
        kvp_ref_model_free(rm);
        free(m);
    }
}
END_TEST

/* ... and the comparison is sharp: another seed gives other logits. */
START_TEST(weights_other_seed_differs)
{
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_ref_opts o1 = {.seed = 1}, o2 = {.seed = 2};
    struct kvp_ref_model *rm;
    struct kvp_cuda_weights *w;
    struct kvp_error err = {0};
    uint32_t tok[4] = {1, 2, 3, 4};
    float a[64], b[64];
    attn_zoo(m, 4);
    ck_assert_kvp_ok(kvp_ref_model_new(m, &o1, &rm, &err), err);
    ck_assert_kvp_ok(kvp_cuda_weights_new(m, &o2, &w, &err), err);
    ck_assert_kvp_ok(kvp_ref_recompute(rm, tok, 4, b, &err), err);
    ck_assert_kvp_ok(kvp_cuda_host_logits(w, tok, 4, a, &err), err);
    ck_assert(rel_diff(a, b, w->vocab) > 0.05);
    kvp_cuda_weights_free(w);
    kvp_ref_model_free(rm);
    free(m);
}
END_TEST

START_TEST(model_as_run_matches_cpu_shape)
{
    static const struct kvp_ref_opts opts[] = {
        {.seed = 1},
        {.seed = 1, .q_per_kv = 1},
        {.seed = 1, .hidden = 16, .intermediate = 24, .vocab = 20, .q_per_kv = 3}};
    for (size_t c = 0; c < sizeof opts / sizeof *opts; c++) {
        struct kvp_model *m = malloc(sizeof *m), *run = malloc(sizeof *run);
        struct kvp_ref_model *rm;
        struct kvp_error err = {0};
        attn_zoo(m, 8);
        ck_assert_kvp_ok(kvp_ref_model_new(m, &opts[c], &rm, &err), err);
        kvp_cuda_model_as_run(m, &opts[c], run);
        const struct kvp_model *want = kvp_ref_model_shape(rm);
        ck_assert_uint_eq(run->hidden, want->hidden);
        ck_assert_uint_eq(run->intermediate, want->intermediate);
        ck_assert_uint_eq(run->vocab, want->vocab);
        for (uint32_t i = 0; i < run->n_specs; i++)
            ck_assert_msg(run->specs[i].n_heads == want->specs[i].n_heads, "opts %zu spec %u: %u query heads, want %u",
                          c, i, run->specs[i].n_heads, want->specs[i].n_heads);
        kvp_ref_model_free(rm);
        free(m);
        free(run);
    }
}
END_TEST

START_TEST(gran_round_table)
{
    static const struct {
        uint64_t in, out;
    } t[] = {
        {1, 512}, {512, 512}, {513, 1024}, {MiB - 1, MiB}, {MiB, MiB}, {MiB + 1, 2 * MiB}, {2 * MiB, 2 * MiB},
        {2 * MiB + 1, 4 * MiB}, {3 * MiB, 4 * MiB}, {64 * MiB, 64 * MiB},
    };
    struct kvp_cuda_gran g = kvp_cuda_gran_default();
    struct kvp_error err = {0};
    ck_assert_uint_eq(g.page, 2 * MiB);
    ck_assert_uint_eq(g.small_max, MiB);
    ck_assert_uint_eq(g.small_align, 512);
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        uint64_t r = 0;
        ck_assert_kvp_ok(kvp_cuda_gran_round(&g, t[i].in, &r, &err), err);
        ck_assert_msg(r == t[i].out, "%llu rounds to %llu, want %llu", (unsigned long long)t[i].in,
                      (unsigned long long)r, (unsigned long long)t[i].out);
    }
}
END_TEST

START_TEST(gran_bounds_table)
{
    static const struct {
        uint64_t sizes[4];
        uint64_t n, lo, hi;
    } t[] = {
        {{0}, 0, 0, 0},
        {{3 * MiB}, 1, 4 * MiB, 4 * MiB},                       /* own pages, exact */
        {{512, 512, 100}, 3, 0, 4 * MiB},                        /* 1.5 KiB: 0 .. one page + one */
        {{MiB, MiB, MiB}, 3, 2 * MiB, 6 * MiB},                  /* 3 MiB sub-allocated: 2 pages +- 1 */
        {{5 * MiB, 1000}, 2, 6 * MiB, 10 * MiB},                 /* 6 MiB exact + small 0 .. 2 pages */
    };
    struct kvp_cuda_gran g = kvp_cuda_gran_default();
    struct kvp_error err = {0};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        uint64_t lo = 1, hi = 1;
        ck_assert_kvp_ok(kvp_cuda_gran_bounds(&g, t[i].sizes, t[i].n, &lo, &hi, &err), err);
        ck_assert_msg(lo == t[i].lo && hi == t[i].hi, "case %zu: [%llu, %llu], want [%llu, %llu]", i,
                      (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)t[i].lo,
                      (unsigned long long)t[i].hi);
    }
}
END_TEST

START_TEST(gran_fit_table)
{
    /* requests 1 B .. 4 MiB by powers of two (23 of them) */
    uint64_t req[23], pooled[23], paged[23];
    struct kvp_cuda_gran g;
    struct kvp_error err = {0};
    for (int i = 0; i < 23; i++) {
        req[i] = 1ull << i;
        pooled[i] = req[i] <= MiB ? 0 : (req[i] + 2 * MiB - 1) / (2 * MiB) * 2 * MiB; /* the hypothesis */
        paged[i] = req[i] <= 64 * 1024 ? 64 * 1024 : req[i]; /* a driver with 64 KiB pages, no pool */
    }
    ck_assert_kvp_ok(kvp_cuda_gran_fit(req, pooled, 23, &g, &err), err);
    ck_assert_uint_eq(g.page, 2 * MiB);
    ck_assert_uint_eq(g.small_max, MiB);
    ck_assert_kvp_ok(kvp_cuda_gran_fit(req, paged, 23, &g, &err), err);
    ck_assert_uint_eq(g.page, 2 * MiB); /* the smallest delta above 1 MiB */
    ck_assert_uint_eq(g.small_max, MiB);
}
END_TEST

START_TEST(format_ok_table)
{
    static const struct {
        const char *f;
        bool ok;
        const char *why;
    } t[] = {
        {"f32", true, NULL}, {"f16", true, NULL}, {"bf16", true, NULL}, {"fp8", true, NULL}, {"fp8_e5m2", true, NULL},
        {"int8", true, NULL}, {"int4:group=64:zp=no", true, NULL}, {"int2:scale=f32", true, NULL},
        {"int8:axis=channel", false, "axis=channel"}, {"int4:residual=32", false, "a residual"},
        {"int8:outliers=0.01", false, "outliers"},
        {"q8_0", false, "only f32, f16, bf16, fp8 and int8/int4/int2 along the token"},
        {"nvfp4", false, "only f32, f16, bf16, fp8 and int8/int4/int2 along the token"},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        struct kvp_format f;
        struct kvp_error err = {0};
        const char *why = "unset";
        ck_assert_kvp_ok(kvp_format_parse(t[i].f, &f, &err), err);
        ck_assert_msg(kvp_cuda_format_ok(&f, &why) == t[i].ok, "%s", t[i].f);
        if (t[i].why)
            ck_assert_str_eq(why, t[i].why);
        else
            ck_assert_ptr_null(why);
    }
}
END_TEST

START_TEST(tolerance_table)
{
    static const struct {
        const char *k, *v;
        double tol;
    } t[] = {{"f32", "f32", 1e-3}, {"bf16", "f16", 1e-3}, {"fp8", "bf16", 2e-2}, {"f16", "int8", 2e-2}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        struct kvp_format k, v;
        struct kvp_error err = {0};
        ck_assert_kvp_ok(kvp_format_parse(t[i].k, &k, &err), err);
        ck_assert_kvp_ok(kvp_format_parse(t[i].v, &v, &err), err);
        ck_assert_double_eq(kvp_cuda_logit_tolerance(&k, &v), t[i].tol);
    }
}
END_TEST

START_TEST(gpu_guess_table)
{
    static const struct {
        const char *device;
        uint64_t memory;
        const char *want; /* NULL: no match */
    } t[] = {
        {"NVIDIA H100 80GB HBM3", 85028896768ull, "h100-sxm"},
        {"NVIDIA H100 PCIe", 84943044608ull, "h100-pcie"},
        {"NVIDIA H200", 150109945856ull, "h200"},
        {"NVIDIA A100-SXM4-40GB", 42298834944ull, "a100-40gb"},
        {"NVIDIA A100-SXM4-80GB", 84987740160ull, "a100-80gb"},
        {"NVIDIA GeForce RTX 4090", 25756696576ull, "rtx-4090"},
        {"NVIDIA L4", 23612293120ull, "l4"},
        {"NVIDIA L40S", 47576711168ull, "l40s"},
        {"Tesla T4", 15828320256ull, NULL},
    };
    struct kvp_gpu_catalog *gc = NULL;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_gpu_catalog_load("models/gpus.yaml", &gc, &err), err);
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        const struct kvp_gpu *g = kvp_cuda_gpu_guess(gc, t[i].device, t[i].memory);
        if (!t[i].want)
            ck_assert_msg(g == NULL, "%s: got %s", t[i].device, g ? g->id : "");
        else
            ck_assert_msg(g && strcmp(g->id, t[i].want) == 0, "%s: got %s, want %s", t[i].device, g ? g->id : "none",
                          t[i].want);
    }
    kvp_gpu_catalog_free(gc);
}
END_TEST

/* ---- limits ------------------------------------------------------------------ */

START_TEST(gran_errors)
{
    struct kvp_cuda_gran g = kvp_cuda_gran_default(), zero = {0, MiB, 0};
    struct kvp_error err = {0};
    uint64_t r, lo, hi, big[2] = {UINT64_MAX / 2, UINT64_MAX / 2 + 4 * MiB};
    ck_assert_int_eq(kvp_cuda_gran_round(&g, UINT64_MAX - 5, &r, &err), KVP_ERR_OVERFLOW);
    ck_assert_str_eq(err.msg, "18446744073709551610 bytes rounded to 2097152 overflows");
    ck_assert_int_eq(kvp_cuda_gran_round(&zero, 10, &r, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(err.msg, "granularity must be positive (got 0)");
    ck_assert_int_eq(kvp_cuda_gran_bounds(&g, big, 2, &lo, &hi, &err), KVP_ERR_OVERFLOW);
    ck_assert_str_eq(err.msg, "device allocations overflow 64 bits");
    uint64_t req[3] = {1, MiB, 4 * MiB}, none[3] = {0, 0, 0};
    struct kvp_cuda_gran f;
    ck_assert_int_eq(kvp_cuda_gran_fit(req, none, 3, &f, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(err.msg, "no allocation above 1 MiB moved the free memory (3 requests)");
}
END_TEST

START_TEST(model_errors)
{
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_error err = {0};
    struct kvp_cuda_weights *w = (struct kvp_cuda_weights *)1;
    struct kvp_ref_opts o = {.seed = 1};
    struct kvp_layer_spec mla = {.kind = KVP_LAYER_MLA, .n_heads = 3, .n_kv_heads = 1, .head_dim_k = 32,
                                 .head_dim_v = 16, .kv_lora_rank = 24, .qk_rope_dim = 8};
    attn_zoo(m, 4);
    ck_assert_kvp_ok(kvp_cuda_model_ok(m, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &mla, 1, &err), err);
    ck_assert_int_eq(kvp_cuda_model_ok(m, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.msg, "the CUDA decoder runs attention layers only (layer 6 of 'attn-zoo' is 'mla')");
    ck_assert_int_eq(kvp_cuda_weights_new(m, &o, &w, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_ptr_null(w);
    attn_zoo(m, 4);
    m->vocab = 0;
    ck_assert_int_eq(kvp_cuda_weights_new(m, &o, &w, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(err.msg, "model 'attn-zoo' has no hidden, intermediate or vocab size");
    attn_zoo(m, 4);
    ck_assert_kvp_ok(kvp_cuda_weights_new(m, &o, &w, &err), err);
    uint32_t tok[2] = {3, 50};
    float logits[64];
    ck_assert_int_eq(kvp_cuda_host_logits(w, tok, 2, logits, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(err.msg, "token 50 is outside the vocabulary of 50");
    kvp_cuda_weights_free(w);
    kvp_cuda_weights_free(NULL);
    free(m);
}
END_TEST

/* Without CUDA every device entry point says how to get it; with it, the
 * build says so (the device runs are tests/gpu/run.sh's). */
START_TEST(device_entry_points)
{
    struct kvp_error err = {0};
    struct kvp_cuda_gran g;
    struct kvp_cuda_result r;
    struct kvp_cuda_bench b;
    struct kvp_cuda_opts o = {.ref = {.seed = 1}, .context = 4, .batch = 1};
    struct kvp_model *m = malloc(sizeof *m);
    double bw;
    char name[64];
    uint64_t mem;
#ifdef KVP_CUDA
    ck_assert(kvp_cuda_available());
#else
    ck_assert(!kvp_cuda_available());
    attn_zoo(m, 4);
    ck_assert_int_eq(kvp_cuda_validate(m, &o, &r, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.msg, "built without CUDA: rebuild with make CUDA=1");
    ck_assert_int_eq(kvp_cuda_measure_gran(&g, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_int_eq(kvp_cuda_copy_bandwidth(&bw, &err), KVP_ERR_UNSUPPORTED);
    uint64_t ctx = 4;
    uint32_t bat = 1;
    ck_assert_int_eq(kvp_cuda_bench(m, &o, &ctx, 1, &bat, 1, 4, &b, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_int_eq(kvp_cuda_device(name, sizeof name, &mem, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.msg, "built without CUDA: rebuild with make CUDA=1");
#endif
    (void)g, (void)r, (void)b, (void)o, (void)bw, (void)mem, (void)name, (void)err;
    free(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ref_cuda");
    TCase *core = tcase_create("core"), *limits = tcase_create("limits");
    tcase_add_test(core, weights_match_cpu_decoder);
    tcase_add_test(core, weights_other_seed_differs);
    tcase_add_test(core, model_as_run_matches_cpu_shape);
    tcase_add_test(core, gran_round_table);
    tcase_add_test(core, gran_bounds_table);
    tcase_add_test(core, gran_fit_table);
    tcase_add_test(core, format_ok_table);
    tcase_add_test(core, tolerance_table);
    tcase_add_test(core, gpu_guess_table);
    tcase_add_test(limits, gran_errors);
    tcase_add_test(limits, model_errors);
    tcase_add_test(limits, device_entry_points);
    suite_add_tcase(s, core);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
