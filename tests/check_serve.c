/* check_serve.c -- `kvplan simulate --validate` (kvplan/ref_serve.h): the
 * simulator's decisions replayed on the reference decoder's paged block pool
 * match it step for step on dense, sliding-window, hybrid-recurrent and MLA
 * models, with prefix caching on and off and under preemption; claims one
 * block off or a hit a block long are caught, and so (make check-mutation)
 * is a simulator whose pool is one block short. Workloads are small: the decoder computes every
 * scheduled token. */
#include "kvplan/deploy.h"
#include "kvplan/ref_serve.h"
#include "kvplan/sim.h"
#include "testutil.h"

struct fixture {
    struct kvp_model *m;
    struct kvp_sim_config c;
    struct kvp_workload w;
    struct kvp_sim_result r;
};

/* model on an 80 GiB card with kv_mib MiB of KV cache and `context` tokens,
 * n requests of prompt lo..hi and output 8..16 tokens, the first `prefix`
 * shared by all, simulated with the decision log. */
static void setup(struct fixture *x, const char *model, uint64_t kv_mib, uint64_t context, uint32_t n, uint32_t lo,
                  uint32_t hi, uint32_t prefix, bool caching)
{
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_error err = {0};
    struct kvp_synth s = {.rate = 0, .prompt = {lo, hi}, .output = {8, 16}, .requests = n, .seed = 3,
                          .prefix = prefix, .prefix_share = prefix ? 1.0 : 0.0};
    x->m = test_load(model);
    kvp_deploy_init(&d, KVP_ENGINE_VLLM, x->m);
    d.gpu_memory = 80ull << 30;
    d.kv_memory = kv_mib << 20;
    d.context = context;
    ck_assert_kvp_ok(kvp_fit_compute(x->m, &d, &f, &err), err);
    ck_assert_kvp_ok(kvp_sim_config_from_fit(x->m, &d, &f, 0, 0, &x->c, &err), err);
    x->c.step = (struct kvp_step_model){.fixed_s = 0.001};
    x->c.prefix_caching = x->c.prefix_caching && caching;
    x->c.log_decisions = true;
    x->c.audit = true; /* as simulate --validate */
    ck_assert_kvp_ok(kvp_workload_synth(&s, &x->w, &err), err);
    ck_assert_kvp_ok(kvp_sim_run(&x->c, &x->w, true, &x->r, &err), err);
}

static struct kvp_serve_report replay(const struct fixture *x)
{
    struct kvp_serve_opts o = KVP_SERVE_DEFAULTS;
    struct kvp_serve_report rep;
    struct kvp_error err = {0};
    o.logit_checks = 0; /* every request served from a hit */
    ck_assert_kvp_ok(kvp_serve_validate(x->m, &x->c, &x->w, &x->r, &o, &rep, &err), err);
    return rep;
}

static void teardown(struct fixture *x)
{
    kvp_sim_result_free(&x->r);
    kvp_workload_free(&x->w);
    kvp_model_free(x->m);
}

/* Every step compared, every scheduled token decoded; with caching the
 * pool's hits are the simulator's and each request served from one gives
 * the logits of a decode from scratch, bit for bit. */
static void expect_match(const char *model, uint64_t kv_mib, uint64_t context, uint32_t prefix, bool caching)
{
    struct fixture x;
    struct kvp_serve_report rep;
    uint64_t scheduled = 0;
    setup(&x, model, kv_mib, context, 4, prefix + 16 > 40 ? prefix + 16 : 40, prefix + 56 > 80 ? prefix + 56 : 80,
          prefix, caching);
    rep = replay(&x);
    for (uint64_t i = 0; i < x.r.nlog; i++)
        scheduled += x.r.log[i].kind == KVP_SIM_SCHEDULE ? x.r.log[i].tokens : 0;
    if (!rep.match)
        ck_abort_msg("%s: step %llu: %s: simulated %llu, measured %llu", model, (unsigned long long)rep.step + 1,
                     rep.field, (unsigned long long)rep.claimed, (unsigned long long)rep.measured);
    ck_assert_uint_eq(rep.steps, x.r.steps);
    ck_assert_uint_eq(rep.blocks_compared, x.r.steps * (x.c.n_groups + 2));
    ck_assert_uint_eq(rep.hit_tokens, x.r.prefix_hit_tokens);
    ck_assert_uint_eq(rep.preemptions_compared, x.r.preemptions);
    ck_assert_uint_ge(rep.decoded_tokens, scheduled);
    ck_assert_uint_gt(rep.peak_bytes, 0);
    if (x.c.prefix_caching && prefix >= x.c.block_size) {
        ck_assert_uint_gt(rep.hit_tokens, 0);
        ck_assert_uint_gt(rep.logit_checks, 0);
    } else {
        ck_assert_uint_eq(rep.hit_tokens, 0);
    }
    teardown(&x);
}

START_TEST(dense)
{
    expect_match("llama-3.1-8b", 64, 256, 32, true);
    expect_match("llama-3.1-8b", 64, 256, 32, false);
}
END_TEST

/* gpt-oss: full and 128-token sliding layers in two groups; a 112-token
 * prefix (7 blocks) is hit through the sliding group's rule, and the window
 * frees blocks as prompts of up to 180 tokens grow. */
START_TEST(sliding)
{
    struct fixture x;
    struct kvp_serve_report rep;
    expect_match("gpt-oss-20b", 64, 256, 32, false);
    setup(&x, "gpt-oss-20b", 64, 256, 4, 140, 180, 112, true);
    rep = replay(&x);
    ck_assert_msg(rep.match, "step %llu: %s", (unsigned long long)rep.step + 1, rep.field);
    ck_assert_uint_eq(rep.hit_tokens, x.r.prefix_hit_tokens);
    ck_assert_uint_gt(rep.hit_tokens, 0);
    ck_assert_uint_gt(rep.logit_checks, 0);
    teardown(&x);
}
END_TEST

/* jamba: attention and Mamba layers, one state slot per request; vLLM
 * 0.11.0 caches no prefixes beside Mamba layers, so caching stays off. */
START_TEST(hybrid_recurrent)
{
    expect_match("jamba-v0.1", 64, 256, 32, true);
}
END_TEST

START_TEST(mla)
{
    expect_match("deepseek-v2-lite", 16, 256, 64, true);
    expect_match("deepseek-v2-lite", 16, 256, 64, false);
}
END_TEST

/* qwen2.5-7b with a pool of 8 blocks for 4 requests of up to 96 tokens:
 * the simulator preempts, and each time the real pool could not supply. */
START_TEST(preemption)
{
    struct fixture x;
    struct kvp_serve_report rep;
    setup(&x, "qwen2.5-7b", 8, 128, 4, 60, 80, 32, true);
    ck_assert_uint_gt(x.r.preemptions, 0);
    rep = replay(&x);
    ck_assert_msg(rep.match, "step %llu: %s", (unsigned long long)rep.step + 1, rep.field);
    ck_assert_uint_eq(rep.preemptions_compared, x.r.preemptions);
    teardown(&x);
}
END_TEST

/* gpt-oss-20b (a full and a sliding group), a pool of 16 MiB, four requests
 * of 60..120 tokens behind a 32-token prefix: a preempted request comes
 * back to find its hit blocks in both groups free, at the free queue's
 * head. Each group claiming its hits and taking its new blocks in turn (the
 * order before vLLM's allocate_slots was followed) let the full group take
 * a sliding-group hit as a new block: the block served two groups, the
 * simulator counted a hit it did not own and the replay read a block
 * without the sliding layers' memory (SIGSEGV). Hits first, in every
 * group, then new blocks: the simulator's invariant holds (kvp_sim_run
 * fails otherwise) and the replay matches. */
START_TEST(hits_before_new_blocks)
{
    struct fixture x;
    struct kvp_serve_report rep;
    setup(&x, "gpt-oss-20b", 16, 256, 4, 60, 120, 32, true);
    ck_assert_uint_eq(x.c.n_groups, 2);
    ck_assert_uint_gt(x.r.preemptions, 0);
    rep = replay(&x);
    ck_assert_msg(rep.match, "step %llu: %s: simulated %llu, measured %llu", (unsigned long long)rep.step + 1,
                  rep.field, (unsigned long long)rep.claimed, (unsigned long long)rep.measured);
    ck_assert_uint_eq(rep.hit_tokens, x.r.prefix_hit_tokens);
    ck_assert_uint_gt(rep.hit_tokens, 0);
    ck_assert_uint_eq(rep.preemptions_compared, x.r.preemptions);
    teardown(&x);
}
END_TEST

/* A simulator one block off in one step's count, or claiming a block more
 * of prefix hit: each is reported at its step and field. */
START_TEST(claims_mutated)
{
    struct fixture x;
    struct kvp_serve_report rep;
    uint64_t k, e;
    setup(&x, "qwen2.5-7b", 8, 128, 4, 60, 80, 32, true);
    k = x.r.steps / 2;
    x.r.series[k].used[0]++;
    rep = replay(&x);
    ck_assert(!rep.match);
    ck_assert_uint_eq(rep.step, k);
    ck_assert_str_eq(rep.field, "used_g0");
    ck_assert_uint_eq(rep.claimed, rep.measured + 1);
    x.r.series[k].used[0]--;
    x.r.series[k].cached++;
    rep = replay(&x);
    ck_assert(!rep.match);
    ck_assert_str_eq(rep.field, "cached");
    x.r.series[k].cached--;

    for (e = 0; e < x.r.nlog && !(x.r.log[e].admit && x.r.log[e].hit > 0); e++)
        ;
    ck_assert_uint_lt(e, x.r.nlog);
    x.r.log[e].hit += x.c.block_size;
    rep = replay(&x);
    ck_assert(!rep.match);
    ck_assert_uint_eq(rep.step, x.r.log[e].step);
    ck_assert_str_eq(rep.field, "prefix_hit_tokens (admission)");
    ck_assert_uint_eq(rep.claimed, rep.measured + x.c.block_size);
    teardown(&x);
}
END_TEST

/* make check-mutation builds sim.c with KVP_MUTATE_SIM: its pool refuses
 * a request when exactly enough blocks are free. The replay must find the
 * first such preemption or blocked admission, which the real pool could
 * have served; unmutated, the same workload matches. */
START_TEST(sim_one_block_short)
{
    struct fixture x;
    struct kvp_serve_report rep;
    setup(&x, "qwen2.5-7b", 8, 128, 4, 60, 80, 32, true);
    rep = replay(&x);
#ifdef KVP_MUTATE_SIM
    ck_assert_msg(!rep.match, "a simulator one block short matched the real pool");
    ck_assert_msg(strstr(rep.field, "the pool could supply") != NULL, "%s", rep.field);
#else
    ck_assert_msg(rep.match, "step %llu: %s", (unsigned long long)rep.step + 1, rep.field);
#endif
    teardown(&x);
}
END_TEST

START_TEST(refusals)
{
    struct fixture x;
    struct kvp_serve_opts o = KVP_SERVE_DEFAULTS;
    struct kvp_serve_report rep;
    struct kvp_error err = {0};
    setup(&x, "qwen2.5-7b", 8, 128, 2, 40, 40, 0, true);
    o.max_tokens = 50;
    ck_assert_int_eq(kvp_serve_validate(x.m, &x.c, &x.w, &x.r, &o, &rep, &err), KVP_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "more than its budget of 50"));
    o.max_tokens = 0;
    o.max_read_bytes = 1000;
    ck_assert_int_eq(kvp_serve_validate(x.m, &x.c, &x.w, &x.r, &o, &rep, &err), KVP_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "cached rows of 57344 B"));
    o.max_read_bytes = 0;
    x.c.log_decisions = false;
    ck_assert_int_eq(kvp_serve_validate(x.m, &x.c, &x.w, &x.r, &o, &rep, &err), KVP_ERR_USAGE);
    x.c.log_decisions = true;
    x.c.engine = KVP_SIM_LLAMACPP;
    ck_assert_int_eq(kvp_serve_validate(x.m, &x.c, &x.w, &x.r, &o, &rep, &err), KVP_ERR_UNSUPPORTED);
    teardown(&x);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("serve");
    TCase *core = tcase_create("core"), *mutation = tcase_create("mutation");
    /* the replays of every layer kind decode hundreds of tokens on real
     * geometries: tagged "float", left to ASan/UBSan by valgrind, which sees
     * the replay's own memory in the small cases of core (docs/testing.md) */
    TCase *kinds = tcase_create("kinds");
    tcase_set_tags(kinds, "float");
    tcase_set_timeout(core, 120);
    tcase_set_timeout(kinds, 120);
    tcase_add_test(kinds, dense);
    tcase_add_test(kinds, sliding);
    tcase_add_test(kinds, hybrid_recurrent);
    tcase_add_test(kinds, mla);
    suite_add_tcase(s, kinds);
    tcase_add_test(core, preemption);
    tcase_add_test(core, hits_before_new_blocks);
    tcase_add_test(core, claims_mutated);
    tcase_add_test(core, refusals);
    suite_add_tcase(s, core);
    tcase_set_timeout(mutation, 120);
    tcase_add_test(mutation, sim_one_block_short);
    suite_add_tcase(s, mutation);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
