/* check_ref.c -- the reference decoder: cached decoding equals recomputing,
 * and the bytes it allocates equal the engine's prediction exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/engine.h"
#include "kvplan/ref.h"
#include "testutil.h"

/* A small model with every layer kind (window 5 / chunk 4, so that short
 * runs cross them). */
static void zoo(struct kvp_model *m, enum kvp_dtype state)
{
    struct kvp_error err = {0};
    struct kvp_layer_spec full = {.kind = KVP_LAYER_FULL, .n_heads = 4, .n_kv_heads = 2, .head_dim_k = 32, .head_dim_v = 32};
    struct kvp_layer_spec slide = full, chunk = full, mqa = full, shared = full, mla = {0}, rec = {0};
    kvp_model_init(m);
    strcpy(m->name, "zoo");
    m->hidden = 48;
    m->intermediate = 64;
    m->vocab = 50;
    m->max_context = 4096;
    m->state_dtype = state;
    slide.kind = KVP_LAYER_SLIDING;
    slide.window = 5;
    chunk.kind = KVP_LAYER_CHUNKED;
    chunk.window = 4;
    mqa.n_kv_heads = 1;
    mqa.head_dim_v = 64; /* K and V dims differ */
    shared.kind = KVP_LAYER_SHARED;
    shared.shares = 0;
    mla.kind = KVP_LAYER_MLA;
    mla.n_heads = 3;
    mla.n_kv_heads = 1;
    mla.head_dim_k = 24 + 8;
    mla.head_dim_v = 16;
    mla.kv_lora_rank = 24;
    mla.qk_rope_dim = 8;
    rec.kind = KVP_LAYER_RECURRENT;
    rec.rec.kind = KVP_REC_MAMBA;
    rec.rec.d_inner = 40;
    rec.rec.d_state = 3;
    rec.rec.d_conv = 4;
    rec.rec.dt_rank = 4;
    ck_assert_kvp_ok(kvp_model_add_layers(m, &full, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &slide, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &chunk, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &mqa, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &shared, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &mla, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, &rec, 1, &err), err);
    ck_assert_kvp_ok(kvp_model_validate(m, &err), err);
}

static struct kvp_format fmt(const char *s)
{
    struct kvp_format f;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_format_parse(s, &f, &err), err);
    return f;
}

/* Cached decoding gives the logits of recomputing every step, for every policy. */
START_TEST(cached_equals_recompute)
{
    static const enum kvp_ref_policy pol[] = {KVP_REF_STATIC, KVP_REF_DYNAMIC, KVP_REF_PAGED};
    struct kvp_model m;
    struct kvp_error err = {0};
    struct kvp_ref_model *rm;
    struct kvp_ref_opts o = {.seed = 42};
    zoo(&m, KVP_DTYPE_F32);
    ck_assert_kvp_ok(kvp_ref_model_new(&m, &o, &rm, &err), err);
    uint32_t V = kvp_ref_vocab(rm), tok[14];
    float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    for (size_t p = 0; p < 3; p++) {
        struct kvp_ref_alloc al = {0};
        struct kvp_ref_cache *c;
        struct kvp_ref_cache_opts co = {.policy = pol[p], .context = 14, .batch = 2, .block = 3,
                                        .k = fmt("f32"), .v = fmt("f32")};
        ck_assert_kvp_ok(kvp_ref_cache_new(rm, &co, &al, &c, &err), err);
        for (uint32_t t = 0; t < 14; t++) {
            double worst = 0;
            tok[t] = (t * 17 + 3) % V;
            /* sequence 1 runs 3 tokens behind with other tokens: a batch of two lengths */
            if (t >= 3)
                ck_assert_kvp_ok(kvp_ref_step(rm, c, 1, (t * 5) % V, NULL, &err), err);
            ck_assert_kvp_ok(kvp_ref_step(rm, c, 0, tok[t], a, &err), err);
            ck_assert_kvp_ok(kvp_ref_recompute(rm, tok, t + 1, b, &err), err);
            for (uint32_t i = 0; i < V; i++)
                worst = fmax(worst, fabs((double)a[i] - b[i]));
            ck_assert_msg(worst < 1e-4, "policy %s step %u: max |dlogit| %g", kvp_ref_policy_name(pol[p]), t, worst);
        }
        kvp_ref_cache_free(c);
        ck_assert_uint_eq(al.cur_total, 0);
        ck_assert_uint_eq(al.live, 0);
    }
    free(a);
    free(b);
    kvp_ref_model_free(rm);
}
END_TEST

/* A change that breaks the cache must be seen: logits from a cache whose
 * sequence was restarted differ from recomputing the full sequence. */
START_TEST(recompute_detects_a_lost_cache)
{
    struct kvp_model m;
    struct kvp_error err = {0};
    struct kvp_ref_model *rm;
    struct kvp_ref_opts o = {.seed = 5};
    zoo(&m, KVP_DTYPE_F32);
    ck_assert_kvp_ok(kvp_ref_model_new(&m, &o, &rm, &err), err);
    uint32_t V = kvp_ref_vocab(rm), tok[6] = {1, 2, 3, 4, 5, 6};
    float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    struct kvp_ref_alloc al = {0};
    struct kvp_ref_cache *c;
    struct kvp_ref_cache_opts co = {.policy = KVP_REF_STATIC, .context = 8, .batch = 1, .k = fmt("f32"), .v = fmt("f32")};
    ck_assert_kvp_ok(kvp_ref_cache_new(rm, &co, &al, &c, &err), err);
    for (int t = 0; t < 5; t++)
        ck_assert_kvp_ok(kvp_ref_step(rm, c, 0, tok[t], NULL, &err), err);
    kvp_ref_seq_end(c, 0);
    ck_assert_kvp_ok(kvp_ref_step(rm, c, 0, tok[5], a, &err), err);
    ck_assert_kvp_ok(kvp_ref_recompute(rm, tok, 6, b, &err), err);
    double worst = 0;
    for (uint32_t i = 0; i < V; i++)
        worst = fmax(worst, fabs((double)a[i] - b[i]));
    ck_assert_msg(worst > 1e-3, "a lost cache went unnoticed (%g)", worst);
    kvp_ref_cache_free(c);
    free(a);
    free(b);
    kvp_ref_model_free(rm);
}
END_TEST

/* Measured bytes == the engine's prediction, by tag, for every policy and
 * format, at contexts at / one below / one above the window (5), chunk (4),
 * block (4) and group (32) boundaries. */
START_TEST(measured_equals_predicted)
{
    static const struct {
        enum kvp_ref_policy p;
        const char *k, *v;
    } cases[] = {
        {KVP_REF_STATIC, "f32", "f32"},       {KVP_REF_STATIC, "f16", "bf16"},
        {KVP_REF_STATIC, "fp8_e4m3", "fp8_e5m2"}, {KVP_REF_STATIC, "q8_0", "q4_0"},
        {KVP_REF_STATIC, "int4:group=16", "int2:group=8:zp=no"},
        {KVP_REF_STATIC, "int8:group=32:residual=3", "int4:group=8:residual=6:scale=f32"},
        {KVP_REF_DYNAMIC, "f16", "f16"},      {KVP_REF_DYNAMIC, "q8_0", "int4:group=8:residual=4"},
        {KVP_REF_DYNAMIC, "int2:group=4:axis=channel", "int4:group=8:axis=channel:residual=16"},
        {KVP_REF_PAGED, "f16", "f32"},        {KVP_REF_PAGED, "q4_0", "int8:group=16"},
    };
    static const uint64_t ctx[] = {1, 3, 4, 5, 6, 7, 8, 9, 31, 32, 33};
    struct kvp_model m, mc;
    struct kvp_error err = {0};
    struct kvp_ref_model *rm, *rmc;
    struct kvp_ref_opts o = {.seed = 3};
    zoo(&m, KVP_DTYPE_BF16);
    /* channel-axis formats run on the unwindowed layers only */
    kvp_model_init(&mc);
    mc = m;
    mc.n_layers = 0;
    mc.n_specs = 0;
    for (uint32_t l = 0; l < m.n_layers; l++) {
        const struct kvp_layer_spec *s = kvp_model_layer(&m, l);
        if (s->kind != KVP_LAYER_SLIDING && s->kind != KVP_LAYER_CHUNKED && s->kind != KVP_LAYER_SHARED)
            ck_assert_kvp_ok(kvp_model_add_layers(&mc, s, 1, &err), err);
    }
    ck_assert_kvp_ok(kvp_ref_model_new(&m, &o, &rm, &err), err);
    ck_assert_kvp_ok(kvp_ref_model_new(&mc, &o, &rmc, &err), err);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t j = 0; j < sizeof ctx / sizeof ctx[0]; j++) {
            bool channel = strstr(cases[i].k, "channel") != NULL;
            const struct kvp_ref_model *r = channel ? rmc : rm;
            const struct kvp_model *mm = channel ? &mc : &m;
            struct kvp_ref_alloc al = {0};
            struct kvp_ref_cache *c;
            struct kvp_ref_cache_opts co = {.policy = cases[i].p, .context = ctx[j], .batch = 2, .block = 4,
                                            .k = fmt(cases[i].k), .v = fmt(cases[i].v)};
            struct kvp_kv_query q = {.context = ctx[j], .batch = 2, .k = co.k, .v = co.v,
                                     .block = cases[i].p == KVP_REF_PAGED ? 4 : 0};
            struct kvp_kv_plan plan;
            ck_assert_kvp_ok(kvp_kv_compute(mm, &q, &plan, &err), err);
            ck_assert_kvp_ok(kvp_ref_cache_new(r, &co, &al, &c, &err), err);
            for (uint64_t t = 0; t < ctx[j]; t++)
                for (uint32_t b = 0; b < 2; b++)
                    ck_assert_kvp_ok(kvp_ref_step(r, c, b, (uint32_t)(t * 7 + b) % 50, NULL, &err), err);
            ck_assert_msg(al.cur[KVP_REF_K] == plan.k_bytes && al.cur[KVP_REF_V] == plan.v_bytes &&
                              al.cur[KVP_REF_STATE] == plan.state_bytes,
                          "%s K %s V %s T %llu: measured K %llu V %llu S %llu, predicted %llu %llu %llu",
                          kvp_ref_policy_name(cases[i].p), cases[i].k, cases[i].v, (unsigned long long)ctx[j],
                          (unsigned long long)al.cur[KVP_REF_K], (unsigned long long)al.cur[KVP_REF_V],
                          (unsigned long long)al.cur[KVP_REF_STATE], (unsigned long long)plan.k_bytes,
                          (unsigned long long)plan.v_bytes, (unsigned long long)plan.state_bytes);
            if (cases[i].p == KVP_REF_DYNAMIC && !channel) /* channel axis is not monotone: see the report */
                ck_assert_msg(al.peak_total == plan.peak_bytes, "%s/%s T %llu: peak %llu, predicted %llu", cases[i].k,
                              cases[i].v, (unsigned long long)ctx[j], (unsigned long long)al.peak_total,
                              (unsigned long long)plan.peak_bytes);
            else if (cases[i].p != KVP_REF_DYNAMIC)
                ck_assert_uint_eq(al.peak_total, plan.total_bytes);
            kvp_ref_cache_free(c);
            ck_assert_uint_eq(al.cur_total, 0);
        }
    kvp_ref_model_free(rm);
    kvp_ref_model_free(rmc);
}
END_TEST

/* Paged: a finished sequence's blocks go to the free list and the next one reuses them. */
START_TEST(paged_free_list)
{
    struct kvp_model m;
    struct kvp_error err = {0};
    struct kvp_ref_model *rm;
    struct kvp_ref_opts o = {.seed = 9};
    struct kvp_ref_alloc al = {0};
    struct kvp_ref_cache *c;
    zoo(&m, KVP_DTYPE_F32);
    struct kvp_ref_cache_opts co = {.policy = KVP_REF_PAGED, .context = 16, .batch = 1, .block = 4,
                                    .k = fmt("f16"), .v = fmt("f16")};
    ck_assert_kvp_ok(kvp_ref_model_new(&m, &o, &rm, &err), err);
    ck_assert_kvp_ok(kvp_ref_cache_new(rm, &co, &al, &c, &err), err);
    for (int t = 0; t < 10; t++)
        ck_assert_kvp_ok(kvp_ref_fill(rm, c, 0, &err), err);
    uint64_t held = al.cur_total, calls = al.calls;
    kvp_ref_seq_end(c, 0);
    for (int t = 0; t < 10; t++)
        ck_assert_kvp_ok(kvp_ref_fill(rm, c, 0, &err), err);
    ck_assert_uint_eq(al.cur_total, held);
    ck_assert_uint_eq(al.calls - calls, 1); /* only the recurrent state (one layer) is allocated again */
    kvp_ref_cache_free(c);
    kvp_ref_model_free(rm);
}
END_TEST

/* KIVI's ordering on the synthesized fidelity model (outlier key channels,
 * sparse attention, loud values), fixed seeds, 2 and 4 bits, group 32: keys
 * per-channel beat per-token on scores; values per-token beat per-channel on
 * attention output although per-channel reconstructs values no worse; a
 * residual lowers per-channel keys' score error; 8 bits beats 2. */
START_TEST(fidelity_ordering)
{
    static const uint64_t seeds[] = {1, 2};
    static const unsigned bits[] = {2, 4};
    for (size_t si = 0; si < sizeof seeds / sizeof seeds[0]; si++)
        for (size_t bi = 0; bi < sizeof bits / sizeof bits[0]; bi++) {
            struct kvp_model m;
            struct kvp_error err = {0};
            struct kvp_ref_model *rm;
            struct kvp_ref_opts o;
            struct kvp_ref_fidelity kc, kt, vc, kr;
            char s_kc[64], s_kt[64], s_kr[64];
            ck_assert_kvp_ok(kvp_ref_kivi_model(seeds[si], &m, &o, &err), err);
            ck_assert_kvp_ok(kvp_ref_model_new(&m, &o, &rm, &err), err);
            snprintf(s_kc, sizeof s_kc, "int%u:group=32:axis=channel", bits[bi]);
            snprintf(s_kt, sizeof s_kt, "int%u:group=32", bits[bi]);
            snprintf(s_kr, sizeof s_kr, "int%u:group=32:axis=channel:residual=64", bits[bi]);
            struct kvp_format fkc = fmt(s_kc), fkt = fmt(s_kt), fkr = fmt(s_kr);
            /* 64 prompt tokens, then 64 steps: T runs through a whole residual cycle of 64 */
            ck_assert_kvp_ok(kvp_ref_fidelity(rm, &fkc, &fkt, 64, 64, seeds[si], &kc, &err), err); /* KIVI */
            ck_assert_kvp_ok(kvp_ref_fidelity(rm, &fkt, &fkt, 64, 64, seeds[si], &kt, &err), err);
            ck_assert_kvp_ok(kvp_ref_fidelity(rm, &fkc, &fkc, 64, 64, seeds[si], &vc, &err), err);
            ck_assert_kvp_ok(kvp_ref_fidelity(rm, &fkr, &fkt, 64, 64, seeds[si], &kr, &err), err);
            /* the model is what it claims: sparse attention, uneven values */
            ck_assert_msg(kc.sparsity > 0.75 && kc.top_mass > 0.6, "seed %llu: sparsity %g, top-10%% mass %g",
                          (unsigned long long)seeds[si], kc.sparsity, kc.top_mass);
            ck_assert_msg(kc.value_top > 0.5, "value energy of the top 10%% rows %g", kc.value_top);
            /* keys */
            ck_assert_msg(kc.key_err < kt.key_err, "seed %llu int%u keys: per-channel %g vs per-token %g",
                          (unsigned long long)seeds[si], bits[bi], kc.key_err, kt.key_err);
            ck_assert_msg(kc.score_err < kt.score_err, "seed %llu int%u scores: per-channel %g vs per-token %g",
                          (unsigned long long)seeds[si], bits[bi], kc.score_err, kt.score_err);
            /* values: output error says per-token, reconstruction error does not */
            ck_assert_msg(kc.output_err < vc.output_err, "seed %llu int%u output: V per-token %g vs per-channel %g",
                          (unsigned long long)seeds[si], bits[bi], kc.output_err, vc.output_err);
            /* at 2 bits reconstruction ranks values per-channel first; at 4 within 15% */
            ck_assert_msg(vc.value_err < kc.value_err * (bits[bi] == 2 ? 1.0 : 1.15),
                          "seed %llu int%u values: per-channel %g vs per-token %g", (unsigned long long)seeds[si],
                          bits[bi], vc.value_err, kc.value_err);
            ck_assert_msg(kc.sparsity == vc.sparsity, "the fp32 run depends on the format");
            /* residual */
            ck_assert_msg(kr.score_err < kc.score_err, "seed %llu int%u: residual 64 %g vs none %g",
                          (unsigned long long)seeds[si], bits[bi], kr.score_err, kc.score_err);
            kvp_ref_model_free(rm);
        }
}
END_TEST

/* A model without the shaping options runs as before: the fidelity model's
 * other weights are those of its seed, and the shaping is deterministic. */
START_TEST(fidelity_deterministic)
{
    struct kvp_model m;
    struct kvp_error err = {0};
    struct kvp_ref_model *rm;
    struct kvp_ref_opts o;
    struct kvp_ref_fidelity a, b;
    ck_assert_kvp_ok(kvp_ref_kivi_model(7, &m, &o, &err), err);
    ck_assert_kvp_ok(kvp_ref_model_new(&m, &o, &rm, &err), err);
    struct kvp_format k = fmt("int2:group=32:axis=channel"), v = fmt("int2:group=32");
    ck_assert_kvp_ok(kvp_ref_fidelity(rm, &k, &v, 40, 8, 3, &a, &err), err);
    ck_assert_kvp_ok(kvp_ref_fidelity(rm, &k, &v, 40, 8, 3, &b, &err), err);
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    ck_assert(a.output_err > 0 && a.output_err < 10);
    ck_assert_int_eq(kvp_ref_fidelity(rm, &k, &v, 0, 8, 3, &a, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "'prompt' must be at least 1 (got 0)");
    kvp_ref_model_free(rm);
}
END_TEST

START_TEST(refusals)
{
    struct kvp_model m;
    struct kvp_error err = {0};
    struct kvp_ref_model *rm;
    struct kvp_ref_opts o = {.seed = 1};
    struct kvp_ref_alloc al = {0};
    struct kvp_ref_cache *c;
    zoo(&m, KVP_DTYPE_F32);
    ck_assert_kvp_ok(kvp_ref_model_new(&m, &o, &rm, &err), err);
    struct kvp_ref_cache_opts co = {.policy = KVP_REF_STATIC, .context = 8, .batch = 1,
                                    .k = fmt("int4:axis=channel"), .v = fmt("f16")};
    ck_assert_int_eq(kvp_ref_cache_new(rm, &co, &al, &c, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "axis=channel needs policy dynamic"));
    co.policy = KVP_REF_PAGED;
    co.block = 4;
    co.k = fmt("int4:residual=4");
    ck_assert_int_eq(kvp_ref_cache_new(rm, &co, &al, &c, &err), KVP_ERR_UNSUPPORTED);
    co.policy = KVP_REF_STATIC;
    co.k = fmt("f16");
    ck_assert_kvp_ok(kvp_ref_cache_new(rm, &co, &al, &c, &err), err);
    for (int t = 0; t < 8; t++)
        ck_assert_kvp_ok(kvp_ref_fill(rm, c, 0, &err), err);
    ck_assert_int_eq(kvp_ref_fill(rm, c, 0, &err), KVP_ERR_RANGE);
    kvp_ref_cache_free(c);
    ck_assert_uint_eq(al.cur_total, 0);
    kvp_ref_model_free(rm);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ref");
    TCase *core = tcase_create("core"), *limits = tcase_create("limits");
    tcase_set_timeout(core, 120);
    tcase_add_test(core, cached_equals_recompute);
    tcase_add_test(core, recompute_detects_a_lost_cache);
    tcase_add_test(core, measured_equals_predicted);
    tcase_add_test(core, paged_free_list);
    tcase_add_test(core, fidelity_ordering);
    tcase_add_test(core, fidelity_deterministic);
    tcase_add_test(limits, refusals);
    suite_add_tcase(s, core);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
