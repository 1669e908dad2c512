/* check_sim.c -- the simulator (kvplan/sim.h): hand-worked pools where every
 * block can be counted on paper (prefix sharing, a sliding window, the step
 * a preemption happens, chunked prefill, max_num_seqs), seeded workloads
 * that repeat, traces and their errors, and the pools kvplan fit computes
 * for real deployments. docs/simulate.md gives the rules. */
#include <math.h>

#include "kvplan/deploy.h"
#include "kvplan/gpu.h"
#include "kvplan/sim.h"
#include "testutil.h"

/* One group of full attention, blocks of 16, `usable` blocks beside the null
 * block, a step of 1 ms whatever it holds; a hand-worked pool (at most 1,000
 * blocks: not the long seeded runs) audited every step. */
static struct kvp_sim_config pool_of(uint64_t usable)
{
    struct kvp_sim_config c = {
        .engine = KVP_SIM_VLLM,
        .num_blocks = usable + 1,
        .block_size = 16,
        .n_groups = 1,
        .group = {{KVP_LAYER_FULL, 0}},
        .max_batched_tokens = 8192,
        .max_num_seqs = 256,
        .max_model_len = 4096,
        .prefix_caching = true,
        .step = {.fixed_s = 0.001},
        .audit = usable <= 1000,
    };
    return c;
}

/* n requests at t = 0 of `prompt` and `output` tokens, the first `prefix` shared. */
static struct kvp_workload burst(uint32_t n, uint32_t prompt, uint32_t output, uint32_t prefix)
{
    struct kvp_workload w = {0};
    w.req = calloc(n, sizeof *w.req);
    ck_assert_ptr_nonnull(w.req);
    w.n = n;
    for (uint32_t i = 0; i < n; i++)
        w.req[i] = (struct kvp_sim_request){0.0, prompt, output, prefix ? 7 : 0, prefix, 0};
    return w;
}

static struct kvp_sim_result run(const struct kvp_sim_config *c, const struct kvp_workload *w)
{
    struct kvp_sim_result r;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_sim_run(c, w, true, &r, &err), err);
    return r;
}

/* Three requests of 64 prompt + 10 output tokens hold cdiv(73, 16) = 5 blocks
 * each at the end: 15. With the first 32 tokens shared, the second and third
 * find blocks 0 and 1 cached (the first request cached them when it was
 * scheduled, in the same step) and allocate 3 each: 5 + 3 + 3 = 11, the
 * 2 x 2 shared blocks fewer, and 2 x 32 tokens hit. */
START_TEST(prefix_sharing_saves_the_shared_blocks)
{
    struct kvp_sim_config c = pool_of(100);
    struct kvp_workload a = burst(3, 64, 10, 0), b = burst(3, 64, 10, 32);
    struct kvp_sim_result ra = run(&c, &a), rb = run(&c, &b);
    ck_assert_uint_eq(ra.peak_blocks, 15);
    ck_assert_uint_eq(rb.peak_blocks, 11);
    ck_assert_uint_eq(ra.prefix_hit_tokens, 0);
    ck_assert_uint_eq(rb.prefix_hit_tokens, 64);
    ck_assert_uint_eq(ra.steps, rb.steps); /* one prefill step, 9 decode steps */
    ck_assert_uint_eq(ra.steps, 10);
    /* a prefix of 40 tokens shares the same two full blocks: the third is partly private */
    kvp_workload_free(&b);
    kvp_sim_result_free(&rb);
    b = burst(3, 64, 10, 40);
    rb = run(&c, &b);
    ck_assert_uint_eq(rb.peak_blocks, 11);
    /* with caching off, sharing changes nothing */
    c.prefix_caching = false;
    kvp_sim_result_free(&rb);
    rb = run(&c, &b);
    ck_assert_uint_eq(rb.peak_blocks, 15);
    ck_assert_uint_eq(rb.prefix_hit_tokens, 0);
    kvp_sim_result_free(&ra);
    kvp_sim_result_free(&rb);
    kvp_workload_free(&a);
    kvp_workload_free(&b);
}
END_TEST

/* A window of 32 over blocks of 16: while computing position p the layer
 * needs tokens p-31..p; vLLM frees the blocks wholly before p-31, so a
 * request holds blocks (p-31)/16 .. p/16: 2 when p-31 starts a block
 * (p % 16 == 15), else 3 (and p/16 + 1 while p < 31). One request of
 * 16 + 200 tokens never holds more than 3; full attention cdiv(215, 16) = 14. */
START_TEST(window_frees_blocks)
{
    struct kvp_sim_config c = pool_of(100);
    struct kvp_workload w = burst(1, 16, 200, 0);
    struct kvp_sim_result full = run(&c, &w), win;
    c.group[0] = (struct kvp_sim_group){KVP_LAYER_SLIDING, 32};
    win = run(&c, &w);
    ck_assert_uint_eq(full.peak_blocks, 14);
    ck_assert_uint_eq(win.peak_blocks, 3);
    ck_assert_uint_eq(win.steps, 200);
    for (uint64_t i = 0; i < win.steps; i++) {
        /* step i+1 computes position 16 + i - 1 (the prompt in step 1) */
        uint64_t p = i == 0 ? 15 : 15 + i;
        uint64_t want = p < 31 ? p / 16 + 1 : p % 16 == 15 ? 2 : 3;
        ck_assert_msg(win.series[i].used[0] == want, "step %llu (position %llu): %llu blocks, want %llu",
                      (unsigned long long)i + 1, (unsigned long long)p, (unsigned long long)win.series[i].used[0],
                      (unsigned long long)want);
    }
    kvp_sim_result_free(&full);
    kvp_sim_result_free(&win);
    kvp_workload_free(&w);
}
END_TEST

/* Sliding window 32 and a shared prefix of 64 tokens (blocks 0-3) in
 * prompts of 96: the second request scans from its last full block before
 * token 95 (block 4, private: a miss) down and stops at the first
 * cdiv(31, 16) = 2 contiguous hits, blocks 3 and 2: a hit of 64 tokens with
 * blocks 0-1 as the null block. It allocates blocks 4-5, so step 1 holds
 * 6 + 2 distinct blocks, against 6 + 6 without the prefix. */
START_TEST(window_prefix_hit)
{
    struct kvp_sim_config c = pool_of(100);
    struct kvp_workload a = burst(2, 96, 4, 0), b = burst(2, 96, 4, 64);
    struct kvp_sim_result ra, rb;
    c.group[0] = (struct kvp_sim_group){KVP_LAYER_SLIDING, 32};
    ra = run(&c, &a);
    rb = run(&c, &b);
    ck_assert_uint_eq(ra.series[0].used[0], 12);
    ck_assert_uint_eq(rb.series[0].used[0], 8);
    ck_assert_uint_eq(rb.prefix_hit_tokens, 64);
    /* step 2 computes position 96 (window 65..96): blocks 0-3 freed, block 6
     * added, so each holds blocks 4-6 and nothing is shared any more */
    ck_assert_uint_eq(rb.series[1].used[0], 6);
    ck_assert_uint_eq(ra.series[1].used[0], 6);
    kvp_sim_result_free(&ra);
    kvp_sim_result_free(&rb);
    kvp_workload_free(&a);
    kvp_workload_free(&b);
}
END_TEST

/* A hybrid of one full-attention and one sliding (32) group, prompts of 96
 * sharing 64 tokens: full attention hits blocks 0-3, the sliding group within
 * those finds 3 and 2 contiguous, so the second request hits 64 tokens in both
 * groups and allocates blocks 4-5 in each: step 1 holds 6 + 2 blocks per group. */
START_TEST(hybrid_prefix_hit)
{
    struct kvp_sim_config c = pool_of(100);
    struct kvp_workload w = burst(2, 96, 4, 64);
    struct kvp_sim_result r;
    c.n_groups = 2;
    c.group[1] = (struct kvp_sim_group){KVP_LAYER_SLIDING, 32};
    r = run(&c, &w);
    ck_assert_uint_eq(r.series[0].used[0], 8);
    ck_assert_uint_eq(r.series[0].used[1], 8);
    ck_assert_uint_eq(r.prefix_hit_tokens, 64);
    /* step 2 (position 96): full attention adds block 6 to each, the window keeps blocks 4-6 */
    ck_assert_uint_eq(r.series[1].used[0], 10);
    ck_assert_uint_eq(r.series[1].used[1], 6);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
}
END_TEST

/* Full attention (group 0) and a window of 32 (group 1), 8 usable blocks.
 * A (48 prompt tokens, the first 32 shared, 8 output) takes blocks 1-3 and
 * 4-6 in step 1; in step 2 its window frees block 4 (group 1's block 0, still
 * cached) and it takes 7 and 8 for position 48. When it finishes (step 8) it
 * frees group 0's 7, 3, 2, 1 and then group 1's 8, 6, 5: the free queue is
 * 4, 7, 3, 2, 1, 8, 6, 5. B (33 tokens, the same 32 shared) arrives later
 * and hits 32 tokens in both groups: 1, 2 and 4, 5. vLLM touches all four
 * before either group takes a block, so group 0's new block is 7 and group
 * 1's is 3: 3 + 3 used, block 6 cached and 8 free in step 9. Taking group
 * 0's new block before group 1's hits are touched would pop block 4, a hit
 * group 1 then reuses: one block in two groups (the run fails). */
START_TEST(hybrid_hits_before_new_blocks)
{
    struct kvp_sim_config c = pool_of(8);
    struct kvp_sim_request q[2] = {{0.0, 48, 8, 7, 32, 0}, {0.030, 33, 4, 7, 32, 0}};
    struct kvp_workload w = {.req = q, .n = 2};
    struct kvp_sim_result r;
    c.n_groups = 2;
    c.group[1] = (struct kvp_sim_group){KVP_LAYER_SLIDING, 32};
    r = run(&c, &w);
    ck_assert_uint_eq(r.steps, 12);
    ck_assert_uint_eq(r.preemptions, 0);
    ck_assert_uint_eq(r.prefix_hit_tokens, 32);
    ck_assert_uint_eq(r.series[1].used[0], 4); /* step 2: 1, 2, 3, 7 and 5, 6, 8; block 4 cached */
    ck_assert_uint_eq(r.series[1].used[1], 3);
    ck_assert_uint_eq(r.series[1].cached, 1);
    ck_assert_uint_eq(r.series[1].free, 0);
    ck_assert_uint_eq(r.series[8].running, 1); /* step 9: B alone */
    ck_assert_uint_eq(r.series[8].used[0], 3);
    ck_assert_uint_eq(r.series[8].used[1], 3);
    ck_assert_uint_eq(r.series[8].cached, 1);
    ck_assert_uint_eq(r.series[8].free, 1);
    kvp_sim_result_free(&r);
}
END_TEST

/* Two requests of 48 + 40 tokens grow to cdiv(87, 16) = 6 blocks each.
 * With 12 usable blocks both finish without preemption. With 8: step 1
 * prefills both (3 + 3), step 2 gives each its 4th block (64 tokens); step
 * s >= 2 computes position 46 + s, so at step 18 the first needs a 5th block,
 * none is free, and the second (the last running) is preempted: exactly one
 * preemption, at step 18, after step 17 held all 8. Its 4 blocks go to the
 * free queue last first, so the first request takes the second's block 3
 * (blocks 0-2 stay cached: 3 cached free blocks) and, at position 80, its
 * block 2; the second, admitted again when the first finishes, finds blocks
 * 0-1: 32 tokens. */
START_TEST(preemption_when_blocks_run_out)
{
    struct kvp_sim_config roomy = pool_of(12), tight = pool_of(8);
    struct kvp_workload w = burst(2, 48, 40, 0);
    struct kvp_sim_result a = run(&roomy, &w), b = run(&tight, &w);
    ck_assert_uint_eq(a.preemptions, 0);
    ck_assert_uint_eq(a.peak_blocks, 12);
    ck_assert_uint_eq(b.preemptions, 1);
    ck_assert_uint_eq(b.series[16].used[0], 8);
    ck_assert_uint_eq(b.series[16].free + b.series[16].cached, 0);
    ck_assert_uint_eq(b.series[16].running, 2);
    ck_assert_uint_eq(b.series[17].used[0], 5);
    ck_assert_uint_eq(b.series[17].cached, 3);
    ck_assert_uint_eq(b.series[17].running, 1);
    ck_assert_uint_eq(b.series[17].waiting, 1);
    for (uint64_t i = 0; i < 17; i++)
        ck_assert_uint_eq(b.series[i].waiting, 0);
    ck_assert_uint_eq(b.prefix_hit_tokens, 32);
    ck_assert_uint_eq(b.output_tokens, 80);
    /* 11 usable blocks: the 6 + 6 do not fit, so some preemption happens */
    kvp_sim_result_free(&a);
    roomy = pool_of(11);
    a = run(&roomy, &w);
    ck_assert_uint_ge(a.preemptions, 1);
    kvp_sim_result_free(&a);
    kvp_sim_result_free(&b);
    kvp_workload_free(&w);
}
END_TEST

/* A prompt of 200 under a budget of 64 tokens a step is prefilled in
 * cdiv(200, 64) = 4 steps; its first token comes at the end of the 4th
 * (4 ms), then one token a step. max_num_seqs 1 runs two requests one after
 * the other: the second queues for the first's 4 + 4 steps. */
START_TEST(chunked_prefill_and_max_num_seqs)
{
    struct kvp_sim_config c = pool_of(100);
    struct kvp_workload w = burst(1, 200, 5, 0), two = burst(2, 200, 5, 0);
    struct kvp_sim_result r;
    c.max_batched_tokens = 64;
    r = run(&c, &w);
    ck_assert_uint_eq(r.steps, 8);
    ck_assert_double_eq_tol(r.ttft.p50, 0.004, 1e-12);
    ck_assert_double_eq_tol(r.tpot.p50, 0.001, 1e-12);
    ck_assert_uint_eq(r.series[0].scheduled_tokens, 64);
    ck_assert_uint_eq(r.series[3].scheduled_tokens, 8);
    kvp_sim_result_free(&r);
    c.max_num_seqs = 1;
    r = run(&c, &two);
    ck_assert_uint_eq(r.steps, 16);
    ck_assert_double_eq_tol(r.queue.p99, 0.008, 1e-12);
    ck_assert_double_eq_tol(r.duration_s, 0.016, 1e-12);
    ck_assert_double_eq_tol(r.throughput, 10 / 0.016, 1e-9);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
    kvp_workload_free(&two);
}
END_TEST

/* llama.cpp: slots of fixed cells; a request waits for a free slot. */
START_TEST(llamacpp_slots)
{
    struct kvp_sim_config c = {
        .engine = KVP_SIM_LLAMACPP, .num_blocks = 2 * 512, .block_size = 1, .n_groups = 1,
        .max_batched_tokens = 2048, .max_num_seqs = 2, .max_model_len = 512, .step = {.fixed_s = 0.001},
    };
    struct kvp_workload w = burst(3, 100, 10, 0);
    struct kvp_sim_result r = run(&c, &w);
    /* two slots prefill at once (100 + 100 cells), decode 9 steps: 218 cells at the last */
    ck_assert_uint_eq(r.peak_blocks, 218);
    ck_assert_uint_eq(r.steps, 20);
    ck_assert_uint_eq(r.preemptions, 0);
    ck_assert_double_eq_tol(r.queue.p99, 0.010, 1e-12);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
}
END_TEST

static bool same_workload(const struct kvp_workload *a, const struct kvp_workload *b)
{
    return a->n == b->n && memcmp(a->req, b->req, a->n * sizeof *a->req) == 0;
}

START_TEST(seeded_workload_repeats)
{
    struct kvp_synth s = {.rate = 20, .prompt = {500, 3000}, .output = {50, 400}, .requests = 2000, .seed = 42,
                          .prefix = 400, .prefix_share = 0.5};
    struct kvp_workload a, b, d;
    struct kvp_error err = {0};
    struct kvp_sim_config c = pool_of(3000);
    struct kvp_sim_result ra, rb;
    uint32_t shared = 0;

    ck_assert_kvp_ok(kvp_workload_synth(&s, &a, &err), err);
    ck_assert_kvp_ok(kvp_workload_synth(&s, &b, &err), err);
    ck_assert(same_workload(&a, &b));
    s.seed = 43;
    ck_assert_kvp_ok(kvp_workload_synth(&s, &d, &err), err);
    ck_assert(!same_workload(&a, &d));
    for (uint32_t i = 0; i < a.n; i++) {
        ck_assert_uint_ge(a.req[i].prompt, 500);
        ck_assert_uint_le(a.req[i].prompt, 3000);
        ck_assert(i == 0 || a.req[i].arrival_s >= a.req[i - 1].arrival_s);
        shared += a.req[i].prefix_id != 0;
    }
    ck_assert_uint_gt(shared, 900); /* about half of 2000 */
    ck_assert_uint_lt(shared, 1100);
    /* 2000 requests at 20/s arrive over about 100 s */
    ck_assert_double_gt(a.req[a.n - 1].arrival_s, 80);
    ck_assert_double_lt(a.req[a.n - 1].arrival_s, 120);
    c.step = (struct kvp_step_model){.fixed_s = 0.005, .per_token_s = 2e-6};
    ra = run(&c, &a);
    rb = run(&c, &b);
    ck_assert_uint_eq(ra.steps, rb.steps);
    ck_assert_uint_eq(ra.peak_blocks, rb.peak_blocks);
    ck_assert_uint_eq(ra.preemptions, rb.preemptions);
    ck_assert_uint_eq(ra.prefix_hit_tokens, rb.prefix_hit_tokens);
    ck_assert(memcmp(ra.series, rb.series, ra.steps * sizeof *ra.series) == 0);
    ck_assert_uint_gt(ra.prefix_hit_tokens, 0);
    kvp_sim_result_free(&ra);
    kvp_sim_result_free(&rb);
    kvp_workload_free(&a);
    kvp_workload_free(&b);
    kvp_workload_free(&d);
}
END_TEST

/* The pool, groups and limits come from kvplan fit's figures. */
START_TEST(config_from_fit)
{
    static const struct {
        const char *model;
        uint32_t groups, sliding;
    } cases[] = {{"llama-3.1-8b", 1, 0}, {"gemma-3-4b", 7, 6}, {"gpt-oss-20b", 2, 1}};
    struct kvp_gpu_catalog *gc;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_gpu_catalog_load("models/gpus.yaml", &gc, &err), err);
    const struct kvp_gpu *h100;
    ck_assert_kvp_ok(kvp_gpu_find(gc, "h100", &h100, &err), err);
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = test_load(cases[i].model);
        struct kvp_deploy d;
        struct kvp_fit f;
        struct kvp_sim_config c;
        uint32_t sliding = 0;
        kvp_deploy_init(&d, KVP_ENGINE_VLLM, m);
        d.gpu_memory = h100->memory_bytes;
        d.context = 8192;
        ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
        ck_assert_kvp_ok(kvp_sim_config_from_fit(m, &d, &f, (double)h100->bandwidth_bytes_per_s, 989e12, &c, &err),
                         err);
        ck_assert_uint_eq(c.num_blocks, f.num_blocks);
        ck_assert_uint_eq(c.block_size, f.block_size);
        ck_assert_uint_eq(c.n_groups, cases[i].groups);
        ck_assert_uint_eq(c.n_groups, f.n_groups);
        for (uint32_t g = 0; g < c.n_groups; g++)
            sliding += c.group[g].kind == KVP_LAYER_SLIDING;
        ck_assert_uint_eq(sliding, cases[i].sliding);
        ck_assert_uint_eq(c.max_batched_tokens, 8192); /* a card of 70 GiB and more */
        ck_assert_uint_eq(c.max_num_seqs, 1024);
        ck_assert(c.prefix_caching);
        ck_assert_double_gt(c.step.weight_bytes, 1e9);
        kvp_model_free(m);
    }
    kvp_gpu_catalog_free(gc);
}
END_TEST

START_TEST(traces)
{
    static const char csv[] = "# a comment\narrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n"
                              "0,100,10,1,64\n0.5, 200 ,20,0,0\n\n1.25,300,30,1,64\n";
    static const char jsonl[] = "{\"arrival_s\": 0, \"prompt_tokens\": 100, \"output_tokens\": 10}\n"
                                "{\"output_tokens\": 5, \"prompt_tokens\": 50, \"arrival_s\": 2.5, "
                                "\"prefix_id\": 3, \"prefix_tokens\": 16}\n";
    struct kvp_workload w;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_workload_parse(csv, sizeof csv - 1, "t.csv", &w, &err), err);
    ck_assert_uint_eq(w.n, 3);
    ck_assert_uint_eq(w.req[1].prompt, 200);
    ck_assert_uint_eq(w.req[2].line, 6);
    ck_assert_uint_eq(w.req[2].prefix_tokens, 64);
    ck_assert_double_eq(w.req[2].arrival_s, 1.25);
    kvp_workload_free(&w);
    ck_assert_kvp_ok(kvp_workload_parse(jsonl, sizeof jsonl - 1, "t.jsonl", &w, &err), err);
    ck_assert_uint_eq(w.n, 2);
    ck_assert_uint_eq(w.req[1].prefix_id, 3);
    ck_assert_uint_eq(w.req[1].output, 5);
    kvp_workload_free(&w);
    kvp_workload_free(&w); /* twice, and NULL: no-ops */
    kvp_workload_free(NULL);
}
END_TEST

/* Arrival times read as strtod reads them, whichever way the parser takes
 * (a decimal of at most 15 digits is divided by its power of ten; any other
 * form goes to strtod): 20,000 seeded forms of 0 to 9 digits before a point
 * and 0 to 12 after it, leading zeros and exponents among them. */
START_TEST(arrivals_as_strtod)
{
    struct kvp_error err = {0};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 20000; i++) {
        char field[48], row[96];
        int k = 0, whole, frac, n;
        struct kvp_workload w;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        whole = (int)((x >> 60) % 10);
        frac = (int)((x >> 56) % 13);
        for (int d = 0; d < whole; d++)
            field[k++] = (char)('0' + (d == 0 && (x >> 20) % 4 == 0 ? 0 : (x >> (d * 5 % 40)) % 10));
        if (whole == 0 || frac > 0 || (x >> 22) % 8 == 0)
            field[k++] = '.';
        for (int d = 0; d < frac || k == 1; d++)
            field[k++] = (char)('0' + (x >> ((d * 7 + 3) % 45)) % 10);
        k += (x >> 26) % 16 == 0 ? sprintf(field + k, "e-%d", (int)((x >> 30) % 3)) : 0;
        field[k] = '\0';
        n = snprintf(row, sizeof row, "arrival_s,prompt_tokens,output_tokens\n%s,1,1\n", field);
        ck_assert_msg(kvp_workload_parse(row, (size_t)n, "t.csv", &w, &err) == KVP_OK, "'%s': %s", field, err.msg);
        ck_assert_msg(w.req[0].arrival_s == strtod(field, NULL), "'%s' read as %.17g, strtod %.17g", field,
                      w.req[0].arrival_s, strtod(field, NULL));
        kvp_workload_free(&w);
    }
}
END_TEST

/* The workload keys' table: every row reads back what it prints, its option
 * is its key with '-' for '_', NULL gives the default, and the cross-key
 * rules hold whatever the caller. */
START_TEST(synth_keys)
{
    static const char *const given[KVP_SYNTH_KEYS] = {"2.5", "100-300", "77-77", "3k", "18446744073709551615",
                                                      "64", "0.25", "0.5"};
    static const char *const printed[KVP_SYNTH_KEYS] = {"2.5", "100-300", "77", "3072", "18446744073709551615",
                                                        "64", "0.25", "0.5"};
    const struct kvp_synth def = KVP_SYNTH_DEFAULTS;
    struct kvp_synth s = def, t;
    double q = KVP_SYNTH_MAX_QUEUE_S, tq;
    struct kvp_error err = {0};
    char buf[64], want[64];

    ck_assert_ptr_null(kvp_synth_key_at(KVP_SYNTH_KEYS));
    for (uint32_t i = 0; i < KVP_SYNTH_KEYS; i++) {
        const struct kvp_synth_key *k = kvp_synth_key_at(i);
        snprintf(buf, sizeof buf, "%s", k->key);
        for (char *c = buf; *c; c++)
            *c = *c == '_' ? '-' : *c;
        ck_assert_str_eq(k->opt, buf);
        ck_assert(k->synthetic == (strcmp(k->key, "max_queue") != 0));
        ck_assert_kvp_ok(kvp_synth_set(&s, &q, k->opt, given[i], &err), err); /* either spelling */
        ck_assert_str_eq(kvp_synth_text(&s, q, k->key, buf, sizeof buf), printed[i]);
    }
    ck_assert(s.rate == 2.5 && s.prompt.lo == 100 && s.prompt.hi == 300 && s.output.lo == 77 && s.requests == 3072 &&
              s.seed == UINT64_MAX && s.prefix == 64 && s.prefix_share == 0.25 && q == 0.5);
    /* printed, set back: the same workload; NULL: the default's text */
    for (uint32_t i = 0; i < KVP_SYNTH_KEYS; i++) {
        const char *key = kvp_synth_key_at(i)->key;
        t = s;
        tq = q;
        ck_assert_kvp_ok(kvp_synth_set(&t, &tq, key, kvp_synth_text(&s, q, key, buf, sizeof buf), &err), err);
        ck_assert(memcmp(&t, &s, sizeof t) == 0 && tq == q);
        ck_assert_kvp_ok(kvp_synth_set(&t, &tq, key, NULL, &err), err);
        if (strcmp(key, "prefix_share") == 0) /* with a prefix, its share is all */
            ck_assert(t.prefix_share == 1.0);
        else if (strcmp(key, "prefix") == 0) /* no prefix, no share */
            ck_assert(t.prefix == 0 && t.prefix_share == 0.0);
        else
            ck_assert_str_eq(kvp_synth_text(&t, tq, key, buf, sizeof buf),
                             kvp_synth_text(&def, KVP_SYNTH_MAX_QUEUE_S, key, want, sizeof want));
    }
    /* a prefix from none brings a share of 1, another prefix keeps the share, 0 or none takes it away */
    t = def;
    ck_assert_kvp_ok(kvp_synth_set(&t, &tq, "prefix", "1k", &err), err);
    ck_assert(t.prefix == 1024 && t.prefix_share == 1.0);
    ck_assert_kvp_ok(kvp_synth_set(&t, &tq, "prefix_share", "0.5", &err), err);
    ck_assert_kvp_ok(kvp_synth_set(&t, &tq, "prefix", "512", &err), err);
    ck_assert(t.prefix == 512 && t.prefix_share == 0.5);
    ck_assert_kvp_ok(kvp_synth_set(&t, &tq, "prefix", "none", &err), err);
    ck_assert(t.prefix == 0 && t.prefix_share == 0.0);
    ck_assert_str_eq(kvp_synth_text(&t, tq, "prefix_share", buf, sizeof buf), "");
    ck_assert_kvp_ok(kvp_synth_set(&t, &tq, "prefix", "16", &err), err);
    ck_assert_kvp_ok(kvp_synth_set(&t, &tq, "prefix", "0", &err), err);
    ck_assert(t.prefix == 0 && t.prefix_share == 0.0);
}
END_TEST

START_TEST(synth_key_errors)
{
    static const struct {
        const char *key, *text, *msg;
    } cases[] = {
        {"rate", "-1", "must be a number of requests/s >= 0 (got '-1')"},
        {"rate", "0x10", "must be a number of requests/s >= 0 (got '0x10')"},
        {"rate", "inf", "must be a number of requests/s >= 0 (got 'inf')"},
        {"prompt", "0-5", "must be N or LO-HI with 1 <= LO <= HI < 2^32 (got '0-5')"},
        {"output", "9-3", "must be N or LO-HI with 1 <= LO <= HI < 2^32 (got '9-3')"},
        {"requests", "0", "must be 1 to 10000000 requests (got '0')"},
        {"requests", "20M", "must be 1 to 10000000 requests (got '20M')"},
        {"requests", "many", "'many' is not a count (expected e.g. 4096, 32k, 1M)"},
        {"seed", "-1", "'-1' is not a count (expected e.g. 4096, 32k, 1M)"},
        {"prefix", "4G", "must be 0 to 4294967295 tokens (got '4G')"},
        {"prefix_share", "0.5", "needs a prefix (the shared tokens)"},
        {"max_queue", "soon", "must be a number of seconds >= 0 (got 'soon')"},
        {"max-queue", "-0.5", "must be a number of seconds >= 0 (got '-0.5')"},
        {"promt", "5", "'promt' is not a workload key"},
        {"seed", "99999999999999999999", "'99999999999999999999' does not fit in 64 bits"},
        {"prompt", "1-99999999999999999999", "'99999999999999999999' does not fit in 64 bits"},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_synth s = KVP_SYNTH_DEFAULTS, before = s;
        double q = 2.0;
        struct kvp_error err = {0};
        enum kvp_status st = kvp_synth_set(&s, &q, cases[i].key, cases[i].text, &err);
        ck_assert_int_ne(st, KVP_OK);
        ck_assert_int_eq(st, err.code); /* the status is the message's */
        ck_assert_msg(strcmp(err.msg, cases[i].msg) == 0, "%s %s: got '%s'", cases[i].key, cases[i].text, err.msg);
        ck_assert(memcmp(&s, &before, sizeof s) == 0 && q == 2.0); /* an error changes nothing */
    }
    {
        struct kvp_synth s = KVP_SYNTH_DEFAULTS;
        double q = 1.0;
        struct kvp_error err = {0};
        ck_assert_kvp_ok(kvp_synth_set(&s, &q, "prefix", "8", &err), err);
        ck_assert_int_ne(kvp_synth_set(&s, &q, "prefix_share", "1.5", &err), KVP_OK);
        ck_assert_str_eq(err.msg, "must be a fraction from 0 to 1 (got '1.5')");
        ck_assert(s.prefix_share == 1.0);
    }
}
END_TEST

START_TEST(trace_errors)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"arrival_s,prompt,output_tokens\n", "t:1:11: unknown column (expected "
                                             "arrival_s,prompt_tokens,output_tokens[,prefix_id,prefix_tokens])"},
        {"arrival_s,prompt_tokens,output_tokens\n0,10\n",
         "t:2:5: a row needs a cell for every column ('output_tokens' is missing)"},
        {"arrival_s,prompt_tokens,output_tokens\n0,10,x\n", "t:2:6: expected a number for 'output_tokens'"},
        {"arrival_s,prompt_tokens,output_tokens\n0,10.5,3\n", "t:2:3: 'prompt_tokens' must be an integer below 2^32"},
        {"arrival_s,prompt_tokens,output_tokens\n1,10,3\n0.5,10,3\n",
         "t:3:1: arrivals must not go back in time (sort the trace by arrival_s)"},
        {"arrival_s,prompt_tokens,output_tokens\n0,0,3\n", "t:2:1: 'prompt_tokens' must be at least 1"},
        {"arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,10,3,1,11\n",
         "t:2:1: 'prefix_tokens' is longer than the prompt"},
        {"{\"arrival_s\": 0, \"prompt_tokens\": 3}\n", "t:1:1: missing 'output_tokens'"},
        {"{\"arrival_s\": 0, \"prompt\": 3}\n", "t:1:19: unknown key (expected arrival_s, prompt_tokens, "
                                                "output_tokens, prefix_id, prefix_tokens)"},
        {"{\"arrival_s\": -1, \"prompt_tokens\": 3, \"output_tokens\": 1}\n",
         "t:1:15: 'arrival_s' must be a non-negative number"},
        {"{\"arrival_s\": 0 \"prompt_tokens\": 3}\n", "t:1:17: expected ',' or '}'"},
        {"\n# nothing\n", "t:2:1: the trace has no requests"},
        /* an arrival of 1e300 s printed a 300-digit duration (issue #37) */
        {"arrival_s,prompt_tokens,output_tokens\n0,10,3\n1e300,10,3\n",
         "t:3:1: 'arrival_s' must be at most 1e9 s (31.7 years)"},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_workload w;
        struct kvp_error err = {0};
        char buf[KVP_ERROR_TEXT_MAX];
        ck_assert_int_ne(kvp_workload_parse(cases[i].text, strlen(cases[i].text), "t", &w, &err), KVP_OK);
        ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf), cases[i].msg);
        ck_assert_ptr_null(w.req);
    }
}
END_TEST

/* A rate so low that a request arrives after 10^9 s is refused: at 1e-308
 * requests/s the simulation's duration was inf and its JSON "inf" and
 * "-nan" (issue #37). */
START_TEST(rate_too_low)
{
    struct kvp_synth sy = KVP_SYNTH_DEFAULTS;
    struct kvp_workload w;
    struct kvp_error err = {0};
    sy.requests = 3;
    sy.rate = 1e-308;
    ck_assert_int_eq(kvp_workload_synth(&sy, &w, &err), KVP_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "request 1 would arrive after") && strstr(err.msg, "the latest arrival is 1e+09 s"),
                  "%s", err.msg);
    ck_assert_ptr_null(w.req);
    sy.rate = 1e-6; /* 3 requests in about 3 x 10^6 s: well inside */
    ck_assert_kvp_ok(kvp_workload_synth(&sy, &w, &err), err);
    kvp_workload_free(&w);
}
END_TEST

/* A synthetic workload costs at most KVP_SIM_BUDGET token-steps: requests x
 * (longest prompt + longest answer + 64); one more request past it is refused
 * before anything is drawn, and a product past 2^64 too (issue #37). */
START_TEST(synth_within_budget)
{
    struct kvp_synth sy = KVP_SYNTH_DEFAULTS;
    struct kvp_workload w;
    struct kvp_error err = {0};
    uint64_t cost = 0;

    sy.prompt = (struct kvp_range){100, 936};
    sy.output = (struct kvp_range){1, 1000}; /* 2,000 a request */
    sy.requests = 50000;
    ck_assert_kvp_ok(kvp_synth_cost(&sy, &cost, &err), err);
    ck_assert_uint_eq(cost, KVP_SIM_BUDGET);
    sy.requests++;
    ck_assert_int_eq(kvp_synth_cost(&sy, &cost, &err), KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "50,001 requests of up to 936 + 1,000 tokens cost 100,002,000 token-steps, more than "
                              "the simulator's budget KVP_SIM_BUDGET of 100,000,000 (requests x (prompt + output + "
                              "64)): fewer or shorter requests");
    ck_assert_int_eq(kvp_workload_synth(&sy, &w, &err), KVP_ERR_USAGE);
    ck_assert_ptr_null(w.req);
    sy.requests = UINT32_MAX;
    sy.prompt = sy.output = (struct kvp_range){1, UINT32_MAX};
    ck_assert_int_eq(kvp_synth_cost(&sy, &cost, &err), KVP_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "cost more than 18,446,744,073,709,551,615 token-steps"), "%s", err.msg);
}
END_TEST

/* The documented maximum is a trace's to have: a CSV header and exactly
 * KVP_SIM_MAX_REQUESTS rows, each ending in a newline, parse (they were
 * refused as "more than 10000000 requests": the last newline counted as a
 * line); one row more is refused. 60 MB of text: the release pass only. */
START_TEST(trace_of_the_most_requests)
{
    static const char head[] = "arrival_s,prompt_tokens,output_tokens\n", row[] = "0,1,1\n";
    uint64_t n = (uint64_t)KVP_SIM_MAX_REQUESTS + 1, len = sizeof head - 1 + n * (sizeof row - 1);
    char *text = malloc(len + 1), *p = text;
    struct kvp_workload w;
    struct kvp_error err = {0};
    ck_assert_ptr_nonnull(text);
    memcpy(p, head, sizeof head - 1);
    p += sizeof head - 1;
    for (uint64_t i = 0; i < n; i++, p += sizeof row - 1)
        memcpy(p, row, sizeof row - 1);
    *p = '\0';
    ck_assert_int_eq(kvp_workload_parse(text, len, "t", &w, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(err.msg, "more than 10000000 requests");
    ck_assert_kvp_ok(kvp_workload_parse(text, len - (sizeof row - 1), "t", &w, &err), err);
    ck_assert_uint_eq(w.n, KVP_SIM_MAX_REQUESTS);
    kvp_workload_free(&w);
    free(text);
}
END_TEST

START_TEST(run_errors)
{
    struct kvp_sim_config c = pool_of(8);
    struct kvp_workload w = burst(1, 100, 100, 0);
    struct kvp_sim_result r;
    struct kvp_error err = {0};
    char buf[KVP_ERROR_TEXT_MAX];
    /* cdiv(199, 16) = 13 blocks, more than the 8 there are */
    ck_assert_int_eq(kvp_sim_run(&c, &w, true, &r, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf),
                     "request 1 needs 13 blocks, more than the pool's 8: it could never run");
    c = pool_of(100);
    c.max_model_len = 150;
    ck_assert_int_eq(kvp_sim_run(&c, &w, true, &r, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf),
                     "request 1: 100 prompt + 100 output tokens are more than max_model_len 150");
    c = pool_of(100);
    c.step = (struct kvp_step_model){0};
    ck_assert_int_eq(kvp_sim_run(&c, &w, true, &r, &err), KVP_ERR_USAGE);
    kvp_workload_free(&w);
    kvp_sim_result_free(NULL);
}
END_TEST

/* The highest sustained rate: below it, no preemption and short queues;
 * at twice it, not sustained. */
START_TEST(max_rate_brackets)
{
    struct kvp_sim_config c = pool_of(2000);
    struct kvp_synth s = {.prompt = {512, 512}, .output = {64, 64}, .requests = 300, .seed = 3};
    struct kvp_error err = {0};
    struct kvp_workload w;
    struct kvp_sim_result r;
    double rate;
    c.step = (struct kvp_step_model){.fixed_s = 0.01, .per_token_s = 1e-5};
    ck_assert_kvp_ok(kvp_sim_max_rate(&c, &s, 1.0, &rate, &err), err);
    ck_assert_double_gt(rate, 0);
    s.rate = rate;
    ck_assert_kvp_ok(kvp_workload_synth(&s, &w, &err), err);
    ck_assert_kvp_ok(kvp_sim_run(&c, &w, false, &r, &err), err);
    ck_assert(kvp_sim_sustained(&r, 1.0));
    kvp_workload_free(&w);
    s.rate = rate * 2;
    ck_assert_kvp_ok(kvp_workload_synth(&s, &w, &err), err);
    ck_assert_kvp_ok(kvp_sim_run(&c, &w, false, &r, &err), err);
    ck_assert(!kvp_sim_sustained(&r, 1.0));
    kvp_workload_free(&w);
}
END_TEST

/* ---- SGLang and TensorRT-LLM (sim_sglang.c, sim_trtllm.c) ---- */

/* SGLang's token pool of `tokens` slots (blocks of one token), 1 ms a step. */
static struct kvp_sim_config sglang_pool(uint64_t tokens)
{
    struct kvp_sim_config c = pool_of(tokens);
    c.engine = KVP_SIM_SGLANG;
    c.block_size = 1;
    c.max_batched_tokens = 8192; /* chunked_prefill_size */
    c.max_prefill_tokens = 16384;
    return c;
}

/* TensorRT-LLM's pool of `blocks` blocks of 32 tokens. */
static struct kvp_sim_config trtllm_pool(uint64_t blocks)
{
    struct kvp_sim_config c = pool_of(blocks);
    c.engine = KVP_SIM_TRTLLM;
    c.block_size = 32;
    return c;
}

/* The radix cache shares at token granularity, but only what was inserted
 * before a request's admission: three requests of 64 + 10 tokens arriving
 * together are prefilled with their own copies of the shared 32 tokens
 * (3 x 64 = 192 slots at step 1, nothing hit); after the step their inserts
 * free the 2 x 32 duplicates, so at the end they hold 3 x 73 - 64 = 155, not
 * 219. When the second and third arrive after the first was inserted, each
 * hits 32 tokens; step 3 prefills them (the first does not decode then), so
 * at step 11 the first holds 64 + 9 and the others 64 + 8 each, 217 tokens
 * less the 2 x 32 shared = 153, the peak. */
START_TEST(sglang_radix_cache_shares_tokens)
{
    struct kvp_sim_config c = sglang_pool(1000);
    struct kvp_workload a = burst(3, 64, 10, 32), b = burst(3, 64, 10, 0);
    struct kvp_sim_result ra = run(&c, &a), rb = run(&c, &b);
    ck_assert_uint_eq(ra.peak_blocks, 192);
    ck_assert_uint_eq(ra.series[0].used[0], 192);
    ck_assert_uint_eq(ra.series[9].used[0], 155);
    ck_assert_uint_eq(rb.series[9].used[0], 219);
    ck_assert_uint_eq(rb.peak_blocks, 219);
    ck_assert_uint_eq(ra.prefix_hit_tokens, 0);
    ck_assert_uint_eq(ra.steps, 10); /* one prefill step, 9 decode steps */
    /* the last step: the finishes that cache everything come after it */
    ck_assert_uint_eq(ra.series[9].cached, 0);
    kvp_sim_result_free(&ra);
    kvp_sim_result_free(&rb);
    /* the second and third arrive at step 3, after the first's prompt was inserted at step 2 */
    for (uint32_t i = 1; i < 3; i++)
        a.req[i].arrival_s = b.req[i].arrival_s = 0.0015;
    ra = run(&c, &a);
    rb = run(&c, &b);
    ck_assert_uint_eq(ra.prefix_hit_tokens, 64);
    ck_assert_uint_eq(ra.series[2].used[0], 129); /* 65 + two prompts' 32 unshared tokens */
    ck_assert_uint_eq(ra.series[9].used[0], 150);
    ck_assert_uint_eq(ra.series[10].used[0], 153);
    ck_assert_uint_eq(ra.peak_blocks, 153);
    ck_assert_uint_eq(rb.peak_blocks, 217);
    ck_assert_uint_eq(rb.prefix_hit_tokens, 0);
    /* after the first finished (step 11) its 32 private prompt tokens and 9 decoded ones are cached */
    ck_assert_uint_eq(ra.series[11].used[0], 114);
    ck_assert_uint_eq(ra.series[11].cached, 41);
    ck_assert_uint_eq(ra.steps, 12);
    /* with the radix cache off (--disable-radix-cache) sharing changes nothing */
    c.prefix_caching = false;
    kvp_sim_result_free(&ra);
    ra = run(&c, &a);
    ck_assert_uint_eq(ra.peak_blocks, 217);
    ck_assert_uint_eq(ra.prefix_hit_tokens, 0);
    kvp_sim_result_free(&ra);
    kvp_sim_result_free(&rb);
    kvp_workload_free(&a);
    kvp_workload_free(&b);
}
END_TEST

/* Admission reserves a running request's remaining output at
 * new_token_ratio (0.7, decaying), so a pool of 100 tokens admits a second
 * request (10 + 40) beside a first (16 + 40) although both would need
 * 55 + 49 = 104 slots: at step 3, 83 free less 38 x 0.699 = 56.4 > 50.
 * Steps 1 and 3 prefill, the others decode both: before step k (k >= 5) they
 * hold 2k + 19, so step 39 fills 99 and step 40 has 1 free slot for 2
 * tokens: retract_decode takes the one with fewer tokens generated (the
 * second, 37 against 38), freeing its 36 decoded slots (its 10-token prompt
 * stays cached) and the ratio goes to min(1, (38 + 20) / 40). The first
 * finishes at step 41; the second, readmitted at step 42 (the batch is no
 * longer full), finds its own prompt cached (10 tokens hit), recomputes its
 * 37 other tokens and finishes at step 44. */
START_TEST(sglang_retracts_when_decode_runs_out)
{
    struct kvp_sim_config c = sglang_pool(100);
    struct kvp_workload w = burst(2, 16, 40, 0);
    struct kvp_sim_result r;
    w.req[1] = (struct kvp_sim_request){0.0015, 10, 40, 0, 0, 0};
    r = run(&c, &w);
    ck_assert_uint_eq(r.preemptions, 1);
    ck_assert_uint_eq(r.peak_blocks, 99);
    ck_assert_uint_eq(r.series[38].used[0], 99);
    ck_assert_uint_eq(r.series[39].used[0], 54); /* the first alone: 16 + 38 */
    ck_assert_uint_eq(r.series[39].cached, 10);   /* the second's prompt */
    ck_assert_uint_eq(r.series[39].running, 1);
    ck_assert_uint_eq(r.series[39].waiting, 1);
    ck_assert_uint_eq(r.prefix_hit_tokens, 10);
    ck_assert_uint_eq(r.series[41].scheduled_tokens, 37);
    ck_assert_uint_eq(r.steps, 44);
    ck_assert_uint_eq(r.output_tokens, 80);
    kvp_sim_result_free(&r);
    /* with 110 slots nothing runs out */
    c = sglang_pool(110);
    r = run(&c, &w);
    ck_assert_uint_eq(r.preemptions, 0);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
}
END_TEST

/* chunked_prefill_size 64: a 200-token prompt takes chunks of 64, 64, 64
 * and 8, its first token at the fourth step. max_prefill_tokens 100: a
 * second 60-token prompt does not join a batch with 40 left (it is
 * prefilled a step later); a 120-token prompt alone still runs. */
START_TEST(sglang_chunked_prefill)
{
    struct kvp_sim_config c = sglang_pool(1000);
    struct kvp_workload w = burst(1, 200, 2, 0);
    struct kvp_sim_result r;
    c.max_batched_tokens = 64;
    r = run(&c, &w);
    ck_assert_uint_eq(r.steps, 5);
    for (int k = 0; k < 3; k++)
        ck_assert_uint_eq(r.series[k].scheduled_tokens, 64);
    ck_assert_uint_eq(r.series[3].scheduled_tokens, 8);
    ck_assert_double_eq_tol(r.ttft.p50, 0.004, 1e-9);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
    c = sglang_pool(1000);
    c.max_prefill_tokens = 100;
    w = burst(2, 60, 2, 0);
    r = run(&c, &w);
    ck_assert_uint_eq(r.series[0].scheduled_tokens, 60); /* 60 <= 100 left, then 60 > 40 left */
    ck_assert_uint_eq(r.series[1].scheduled_tokens, 60);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
    w = burst(2, 120, 2, 0);
    r = run(&c, &w);
    ck_assert_uint_eq(r.series[0].scheduled_tokens, 120); /* the first alone: 120 > -20 left */
    ck_assert_uint_eq(r.series[1].scheduled_tokens, 120);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
}
END_TEST

/* GUARANTEED_NO_EVICT admits a request only when its blocks to completion,
 * cdiv(prompt + output, 32), fit beside the running requests': two requests
 * of 100 + 70 tokens need 6 blocks each and the pool has 10, so the second
 * waits until the first has finished (step 70) and runs at steps 71-140;
 * nothing is ever preempted. With 12 blocks both run at once. */
START_TEST(trtllm_no_evict_admission_waits)
{
    struct kvp_sim_config c = trtllm_pool(10);
    struct kvp_workload w = burst(2, 100, 70, 0);
    struct kvp_sim_result r = run(&c, &w);
    ck_assert_uint_eq(r.steps, 140);
    ck_assert_uint_eq(r.peak_blocks, 6); /* cdiv(169, 32) */
    ck_assert_uint_eq(r.preemptions, 0);
    ck_assert_uint_eq(r.series[0].waiting, 1);
    ck_assert_uint_eq(r.series[69].waiting, 1);
    ck_assert_uint_eq(r.series[70].running, 1);
    ck_assert_uint_eq(r.series[70].scheduled_tokens, 100);
    ck_assert_double_eq_tol(r.queue.p90, 0.070, 1e-9); /* nearest rank of 2: the second's wait */
    kvp_sim_result_free(&r);
    c = trtllm_pool(12);
    r = run(&c, &w);
    ck_assert_uint_eq(r.steps, 70);
    ck_assert_uint_eq(r.peak_blocks, 12);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
}
END_TEST

/* Block reuse: three requests of 64 + 10 tokens sharing their first block
 * (32 tokens). At step 1 only the first is scheduled: the others' first new
 * context block is the one it contributes (beneficialToSkip). At step 2
 * they reuse it (2 x 32 tokens hit) and allocate their second block; each
 * grows to cdiv(73, 32) = 3 blocks, so the peak is 3 x 3 - 2 = 7 where
 * private prompts need 9 (and run in 10 steps, not 11). */
START_TEST(trtllm_block_reuse)
{
    struct kvp_sim_config c = trtllm_pool(100);
    struct kvp_workload a = burst(3, 64, 10, 32), b = burst(3, 64, 10, 0);
    struct kvp_sim_result ra = run(&c, &a), rb = run(&c, &b);
    ck_assert_uint_eq(ra.series[0].scheduled_tokens, 64);
    ck_assert_uint_eq(ra.series[0].waiting, 2);
    ck_assert_uint_eq(ra.series[1].scheduled_tokens, 1 + 2 * 32);
    ck_assert_uint_eq(ra.prefix_hit_tokens, 64);
    ck_assert_uint_eq(ra.peak_blocks, 7);
    ck_assert_uint_eq(ra.steps, 11);
    ck_assert_uint_eq(rb.peak_blocks, 9);
    ck_assert_uint_eq(rb.prefix_hit_tokens, 0);
    ck_assert_uint_eq(rb.steps, 10);
    kvp_sim_result_free(&ra);
    /* without block reuse: no skipping, no sharing */
    c.prefix_caching = false;
    ra = run(&c, &a);
    ck_assert_uint_eq(ra.peak_blocks, 9);
    ck_assert_uint_eq(ra.steps, 10);
    kvp_sim_result_free(&ra);
    kvp_sim_result_free(&rb);
    kvp_workload_free(&a);
    kvp_workload_free(&b);
}
END_TEST

/* A seeded workload repeats step for step under both engines, and under
 * pressure SGLang retracts where TRT-LLM only queues. */
START_TEST(engines_repeat_and_differ)
{
    struct kvp_synth s = {.rate = 20, .prompt = {500, 3000}, .output = {50, 400}, .requests = 2000, .seed = 42,
                          .prefix = 400, .prefix_share = 0.5};
    struct kvp_workload w;
    struct kvp_error err = {0};
    struct kvp_sim_config cs = sglang_pool(3000 * 16), ct = trtllm_pool(3000 / 2);
    uint64_t output = 0;
    ck_assert_kvp_ok(kvp_workload_synth(&s, &w, &err), err);
    for (uint32_t i = 0; i < w.n; i++)
        output += w.req[i].output;
    cs.step = ct.step = (struct kvp_step_model){.fixed_s = 0.005, .per_token_s = 2e-6};
    for (int e = 0; e < 2; e++) {
        const struct kvp_sim_config *c = e ? &ct : &cs;
        struct kvp_sim_result ra = run(c, &w), rb = run(c, &w);
        ck_assert_uint_eq(ra.steps, rb.steps);
        ck_assert(memcmp(ra.series, rb.series, ra.steps * sizeof *ra.series) == 0);
        ck_assert_uint_eq(ra.prefix_hit_tokens, rb.prefix_hit_tokens);
        ck_assert_uint_gt(ra.prefix_hit_tokens, 0);
        ck_assert_uint_le(ra.peak_blocks, ra.pool_blocks);
        ck_assert_uint_eq(ra.output_tokens, output);
        if (e)
            ck_assert_uint_eq(ra.preemptions, 0);
        else
            ck_assert_uint_gt(ra.preemptions, 0);
        kvp_sim_result_free(&ra);
        kvp_sim_result_free(&rb);
    }
    kvp_workload_free(&w);
}
END_TEST

/* The pools come from kvplan fit: SGLang's max_total_num_tokens and
 * max_running_requests, chunked_prefill_size by the card (8192 on an H100;
 * 0.4.6: 8192 too), TRT-LLM's blocks of 32; what is not simulated is refused. */
START_TEST(engines_config_from_fit)
{
    struct kvp_gpu_catalog *gc;
    struct kvp_error err = {0};
    const struct kvp_gpu *h100;
    struct kvp_model *m = test_load("llama-3.1-8b"), *g = test_load("gpt-oss-20b");
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_sim_config c;
    char buf[KVP_ERROR_TEXT_MAX];
    ck_assert_kvp_ok(kvp_gpu_catalog_load("models/gpus.yaml", &gc, &err), err);
    ck_assert_kvp_ok(kvp_gpu_find(gc, "h100", &h100, &err), err);
    kvp_deploy_init(&d, KVP_ENGINE_SGLANG, m);
    d.gpu_memory = h100->memory_bytes;
    d.context = 8192;
    ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
    ck_assert_kvp_ok(kvp_sim_config_from_fit(m, &d, &f, (double)h100->bandwidth_bytes_per_s, 989e12, &c, &err), err);
    ck_assert_int_eq(c.engine, KVP_SIM_SGLANG);
    ck_assert_str_eq(kvp_sim_unit(c.engine), "tokens");
    ck_assert_str_eq(kvp_sim_scheduler(c.engine), "SGLang scheduler");
    ck_assert_uint_eq(c.num_blocks, f.kv_tokens + 1);
    ck_assert_uint_eq(c.block_size, 1);
    ck_assert_uint_eq(c.max_num_seqs, f.max_running);
    ck_assert_uint_eq(c.max_batched_tokens, 8192);
    ck_assert_uint_eq(c.max_prefill_tokens, 16384);
    ck_assert_double_eq_tol(c.step.block_bytes, (double)f.kv_bytes_per_token_per_gpu, 1e-9);
    d.block_size = 16;
    ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
    ck_assert_int_eq(kvp_sim_config_from_fit(m, &d, &f, 0, 0, &c, &err), KVP_ERR_UNSUPPORTED);
    kvp_deploy_init(&d, KVP_ENGINE_TRTLLM, m);
    d.gpu_memory = h100->memory_bytes;
    d.context = 8192;
    ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
    ck_assert_kvp_ok(kvp_sim_config_from_fit(m, &d, &f, 0, 0, &c, &err), err);
    ck_assert_int_eq(c.engine, KVP_SIM_TRTLLM);
    ck_assert_uint_eq(c.num_blocks, f.num_blocks + 1);
    ck_assert_uint_eq(c.block_size, 32);
    ck_assert_uint_eq(c.max_batched_tokens, 8192);
    ck_assert_uint_eq(c.max_num_seqs, 2048);
    kvp_deploy_init(&d, KVP_ENGINE_TRTLLM, g);
    d.gpu_memory = h100->memory_bytes;
    d.context = 8192;
    ck_assert_kvp_ok(kvp_fit_compute(g, &d, &f, &err), err);
    ck_assert_int_eq(kvp_sim_config_from_fit(g, &d, &f, 0, 0, &c, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf), "simulate: trtllm with attention windows (one block "
                     "pool per window size, VSWA) is not simulated yet");
    kvp_model_free(m);
    kvp_model_free(g);
    kvp_gpu_catalog_free(gc);
}
END_TEST

START_TEST(trtllm_run_errors)
{
    struct kvp_sim_config c = trtllm_pool(100);
    struct kvp_workload w = burst(1, 100, 100, 0);
    struct kvp_sim_result r;
    struct kvp_error err = {0};
    char buf[KVP_ERROR_TEXT_MAX];
    c.max_batched_tokens = 64;
    ck_assert_int_eq(kvp_sim_run(&c, &w, true, &r, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf), "request 1: 100 prompt tokens are more than "
                     "max_num_tokens 64 (trtllm's chunked context is off by default)");
    /* cdiv(199, 32) = 7 blocks can be held, but cdiv(200, 32) = 7 are reserved; 6 is too few for either */
    c = trtllm_pool(6);
    ck_assert_int_eq(kvp_sim_run(&c, &w, true, &r, &err), KVP_ERR_RANGE);
    w.req[0].output = 92; /* 191 tokens held at most: 6 blocks; 192 reserved: 6 */
    r = run(&c, &w);
    ck_assert_uint_eq(r.peak_blocks, 6);
    kvp_sim_result_free(&r);
    w.req[0].output = 93; /* 192 held at most: 6 blocks; 193 reserved: 7, never admitted */
    ck_assert_int_eq(kvp_sim_run(&c, &w, true, &r, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf), "request 1 reserves 7 blocks to completion, more "
                     "than the pool's 6: GUARANTEED_NO_EVICT never admits it");
    kvp_workload_free(&w);
}
END_TEST

/* vLLM V0 (sim_vllm0.c): two requests of 16 + 60 tokens in 8 blocks of 16
 * prefill together (step 1), then decode, each taking a block as its tokens
 * cross 16, 32, 48 and 64; at step 50 both need a fifth: the first preempts
 * the last running request (recompute) and goes on alone; the second's 65
 * tokens (prompt + 49 generated) need 5 blocks, free only once the first
 * has finished (step 60); step 61 prefills them alone (a prefill step
 * decodes nothing) and it ends at step 71. */
START_TEST(vllm0_prefill_first_and_recompute)
{
    struct kvp_sim_config c = pool_of(8);
    struct kvp_workload w = burst(2, 16, 60, 0);
    struct kvp_sim_result r;
    c.engine = KVP_SIM_VLLM0;
    c.prefix_caching = false;
    r = run(&c, &w);
    ck_assert_uint_eq(r.series[0].scheduled_tokens, 32);
    ck_assert_uint_eq(r.series[48].used[0], 8);
    ck_assert_uint_eq(r.preemptions, 1);
    ck_assert_uint_eq(r.series[49].used[0], 5);
    ck_assert_uint_eq(r.series[49].running, 1);
    ck_assert_uint_eq(r.series[49].waiting, 1);
    ck_assert_uint_eq(r.series[50].scheduled_tokens, 1); /* 3 blocks free: too few for 65 tokens */
    ck_assert_uint_eq(r.series[60].scheduled_tokens, 65);
    ck_assert_uint_eq(r.series[60].running, 1);
    ck_assert_uint_eq(r.steps, 71);
    ck_assert_uint_eq(r.peak_blocks, 8);
    ck_assert_uint_eq(r.prefix_hit_tokens, 0);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
}
END_TEST

START_TEST(vllm0_run_errors)
{
    struct kvp_sim_config c = pool_of(100);
    struct kvp_workload w = burst(1, 1500, 100, 0);
    struct kvp_sim_result r;
    struct kvp_error err = {0};
    char buf[KVP_ERROR_TEXT_MAX];
    c.engine = KVP_SIM_VLLM0;
    /* 1599 tokens: all 100 blocks, and the watermark (1% of them) must stay free */
    ck_assert_int_eq(kvp_sim_run(&c, &w, true, &r, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf), "request 1 needs 100 blocks, more than the pool's 100 "
                     "less the watermark");
    w.req[0].output = 84; /* 1583 tokens: 99 blocks */
    r = run(&c, &w);
    ck_assert_uint_eq(r.peak_blocks, 99);
    kvp_sim_result_free(&r);
    c.max_batched_tokens = 1000;
    ck_assert_int_eq(kvp_sim_run(&c, &w, true, &r, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf), "request 1: 1583 tokens (prompt + output - 1, as a "
                     "recomputed prompt) are more than the prompt limit 1000");
    kvp_workload_free(&w);
}
END_TEST

/* ---- the CPU offload tier ---- */

/* A workload of the n requests listed. */
static struct kvp_workload listed(uint32_t n, const struct kvp_sim_request *q)
{
    struct kvp_workload w = {0};
    w.req = calloc(n, sizeof *w.req);
    ck_assert_ptr_nonnull(w.req);
    memcpy(w.req, q, n * sizeof *q);
    w.n = n;
    return w;
}

/* A tier of `blocks` host blocks; a block loads in 4 ms (4 MB at 1 GB/s). */
static void with_tier(struct kvp_sim_config *c, uint64_t blocks)
{
    c->offload_blocks = blocks;
    c->offload_block_bytes = 4e6;
    c->offload_bandwidth = 1e9;
}

/* vLLM, a pool of 10 blocks of 16, 1 ms + 0.1 ms a token. A (65 tokens, the
 * first 64 a shared prefix) stores its 4 full blocks when it computes them,
 * ready when it finishes; B (160 private tokens) takes all 10 GPU blocks,
 * evicting A's prefix from the GPU cache, and cannot store its own 10 blocks
 * in a tier of 8 (only A's 4 can be evicted: nothing stored). C, A's prefix
 * again, hits nothing on the GPU and all 4 blocks in the tier: it computes 1
 * token (1.1 ms) and loads 4 blocks (16 ms), 17.1 ms where without the tier
 * it computes 65 (7.5 ms). */
START_TEST(offload_tier_finds_an_evicted_prefix)
{
    static const struct kvp_sim_request q[] = {
        {0.0, 65, 1, 7, 64, 0}, {0.1, 160, 1, 0, 0, 0}, {0.2, 65, 1, 7, 64, 0}};
    struct kvp_sim_config c = pool_of(10);
    struct kvp_workload w = listed(3, q);
    struct kvp_sim_result a, b;
    c.step.per_token_s = 1e-4;
    a = run(&c, &w);
    with_tier(&c, 8);
    b = run(&c, &w);
    ck_assert_uint_eq(a.steps, 3);
    ck_assert_uint_eq(b.steps, 3);
    ck_assert_uint_eq(a.prefix_hit_tokens, 0);
    ck_assert_uint_eq(a.offload_hit_tokens, 0);
    ck_assert_uint_eq(a.series[2].scheduled_tokens, 65);
    ck_assert_double_eq_tol(a.series[2].time_s - 0.2, 0.0075, 1e-9);
    ck_assert_uint_eq(a.series[2].offloaded, 0);
    ck_assert_uint_eq(b.prefix_hit_tokens, 0);
    ck_assert_uint_eq(b.offload_hit_tokens, 64);
    ck_assert_uint_eq(b.offload_loaded_blocks, 4);
    ck_assert_uint_eq(b.offload_stored_blocks, 4); /* A's; B's did not fit; C's 4 were there */
    ck_assert_uint_eq(b.series[1].offloaded, 4);
    ck_assert_uint_eq(b.series[2].scheduled_tokens, 1);
    ck_assert_double_eq_tol(b.series[2].time_s - 0.2, 0.0011 + 0.016, 1e-9);
    ck_assert_double_eq_tol(b.offload_load_s, 0.016, 1e-12);
    ck_assert_uint_eq(b.peak_blocks, a.peak_blocks); /* loaded blocks take GPU blocks as computed ones do */
    kvp_sim_result_free(&a);
    kvp_sim_result_free(&b);
    kvp_workload_free(&w);
}
END_TEST

/* A tier of 4 keeps the most recent blocks. A stores prefix 7's blocks 0-3
 * (touched last first: block 0 the most recent); B stores prefix 8's two,
 * evicting A's blocks 3 and 2, the least recent; D (160 private tokens)
 * flushes the GPU cache and cannot store 10 blocks in 4. C, prefix 7, finds
 * blocks 0 and 1 (32 tokens loaded), computes 33 tokens and stores blocks 2
 * and 3 again, evicting B's two (A's 0 and 1 are touched, and pinned while
 * they load). */
START_TEST(offload_tier_is_lru)
{
    static const struct kvp_sim_request q[] = {{0.0, 65, 1, 7, 64, 0},
                                               {0.1, 33, 1, 8, 32, 0},
                                               {0.2, 160, 1, 0, 0, 0},
                                               {0.3, 65, 1, 7, 64, 0}};
    struct kvp_sim_config c = pool_of(10);
    struct kvp_workload w = listed(4, q);
    struct kvp_sim_result r;
    with_tier(&c, 4);
    r = run(&c, &w);
    ck_assert_uint_eq(r.steps, 4);
    ck_assert_uint_eq(r.prefix_hit_tokens, 0);
    ck_assert_uint_eq(r.offload_hit_tokens, 32);
    ck_assert_uint_eq(r.offload_loaded_blocks, 2);
    ck_assert_uint_eq(r.offload_stored_blocks, 4 + 2 + 2);
    ck_assert_uint_eq(r.series[3].scheduled_tokens, 33);
    ck_assert_uint_eq(r.series[3].offloaded, 4);
    kvp_sim_result_free(&r);
    /* a tier of 6 keeps all of A's and B's: C loads its 4 blocks */
    with_tier(&c, 6);
    r = run(&c, &w);
    ck_assert_uint_eq(r.offload_hit_tokens, 64);
    ck_assert_uint_eq(r.offload_stored_blocks, 4 + 2);
    ck_assert_uint_eq(r.series[3].scheduled_tokens, 1);
    kvp_sim_result_free(&r);
    kvp_workload_free(&w);
}
END_TEST

/* A preempted request reloads what it had stored: two requests of 16 + 60
 * tokens in 8 blocks preempt once (as preemption_when_blocks_run_out). The
 * victim's blocks are freed tail first, and the request that goes on growing
 * takes its last full block off the free queue, so at readmission the GPU
 * cache has its first 3 (48 tokens); with a tier its 4th, stored when
 * computed and ready at the preemption, is loaded (16 tokens, 4 ms) instead
 * of recomputed. Each request stores its 4 full blocks. A seeded workload
 * with a tier repeats step for step. */
START_TEST(offload_tier_preemption_and_repeats)
{
    struct kvp_sim_config c = pool_of(8);
    struct kvp_workload w = burst(2, 16, 60, 0);
    struct kvp_synth sy = {.rate = 20, .prompt = {200, 900}, .output = {20, 200}, .requests = 2000, .seed = 3,
                           .prefix = 128, .prefix_share = 0.7};
    struct kvp_workload big;
    struct kvp_sim_result a, b, x, y;
    struct kvp_error err = {0};
    a = run(&c, &w);
    with_tier(&c, 16);
    b = run(&c, &w);
    ck_assert_uint_eq(a.preemptions, 1);
    ck_assert_uint_eq(b.preemptions, a.preemptions);
    ck_assert_uint_eq(a.prefix_hit_tokens, 48);
    ck_assert_uint_eq(b.prefix_hit_tokens, 48);
    ck_assert_uint_eq(a.offload_hit_tokens, 0);
    ck_assert_uint_eq(b.offload_hit_tokens, 16);
    ck_assert_uint_eq(b.offload_loaded_blocks, 1);
    ck_assert_uint_eq(b.offload_stored_blocks, 2 * 4);
    ck_assert_double_eq_tol(b.duration_s - a.duration_s, 0.004, 1e-9);
    kvp_sim_result_free(&a);
    kvp_sim_result_free(&b);
    kvp_workload_free(&w);

    ck_assert_kvp_ok(kvp_workload_synth(&sy, &big, &err), err);
    c = pool_of(120); /* preempting: readmissions find their blocks in the tier */
    with_tier(&c, 200);
    x = run(&c, &big);
    y = run(&c, &big);
    ck_assert_uint_eq(x.steps, y.steps);
    ck_assert_mem_eq(x.series, y.series, x.steps * sizeof *x.series);
    ck_assert_uint_eq(x.offload_hit_tokens, y.offload_hit_tokens);
    ck_assert_uint_eq(x.offload_stored_blocks, y.offload_stored_blocks);
    ck_assert_uint_gt(x.offload_hit_tokens, 0);
    kvp_sim_result_free(&x);
    kvp_sim_result_free(&y);
    kvp_workload_free(&big);
}
END_TEST

/* TensorRT-LLM, 4 blocks of 32: A (65 tokens, 64 of prefix 7) stores its 2
 * full blocks for reuse; B (127 private) takes all 4, and the 2 reusable
 * ones are offloaded to the secondary pool as they are taken. C, prefix 7,
 * onboards both (64 tokens, 2 blocks loaded: 8 ms), computes 1 token, and
 * the primary blocks it takes offload 2 of B's. Without a secondary pool C
 * computes its 65 tokens. */
START_TEST(trtllm_secondary_pool)
{
    static const struct kvp_sim_request q[] = {
        {0.0, 65, 1, 7, 64, 0}, {0.1, 127, 1, 0, 0, 0}, {0.2, 65, 1, 7, 64, 0}};
    struct kvp_sim_config c = trtllm_pool(4);
    struct kvp_workload w = listed(3, q);
    struct kvp_sim_result a, b;
    a = run(&c, &w);
    with_tier(&c, 4);
    b = run(&c, &w);
    ck_assert_uint_eq(a.steps, 3);
    ck_assert_uint_eq(a.prefix_hit_tokens, 0);
    ck_assert_uint_eq(a.series[2].scheduled_tokens, 65);
    ck_assert_uint_eq(b.steps, 3);
    ck_assert_uint_eq(b.prefix_hit_tokens, 0);
    ck_assert_uint_eq(b.offload_hit_tokens, 64);
    ck_assert_uint_eq(b.offload_loaded_blocks, 2);
    ck_assert_uint_eq(b.offload_stored_blocks, 2 + 2);
    ck_assert_uint_eq(b.series[1].offloaded, 2);
    ck_assert_uint_eq(b.series[2].scheduled_tokens, 1);
    ck_assert_double_eq_tol(b.series[2].time_s - 0.2, 0.001 + 0.008, 1e-9);
    kvp_sim_result_free(&a);
    kvp_sim_result_free(&b);
    kvp_workload_free(&w);
}
END_TEST

/* --cpu-offload through kvp_sim_config_from_fit: the tier in the pool's
 * pages for vLLM V1 and TRT-LLM, refused where it is not simulated. */
START_TEST(offload_config_from_fit)
{
    static const struct {
        const char *engine, *model;
        bool ok;
    } cases[] = {{"vllm", "llama-3.1-8b", true},        {"vllm@0.11.0", "llama-3.1-8b", true},
                 {"trtllm", "llama-3.1-8b", true},      {"sglang", "llama-3.1-8b", false},
                 {"llamacpp", "llama-3.1-8b", false},   {"vllm@0.7.3", "llama-3.1-8b", false},
                 {"vllm", "gemma-3-4b", false}};
    struct kvp_error err = {0};
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = test_load(cases[i].model);
        struct kvp_deploy d;
        struct kvp_fit f;
        struct kvp_sim_config c;
        enum kvp_engine_id e;
        uint32_t rel;
        enum kvp_status st;
        ck_assert_kvp_ok(kvp_engine_parse(cases[i].engine, &e, &rel, &err), err);
        kvp_deploy_init(&d, e, m);
        d.release = rel;
        d.gpu_memory = 80ull << 30;
        d.context = 8192;
        d.cpu_offload = 64ull << 30;
        ck_assert_kvp_ok(kvp_fit_compute(m, &d, &f, &err), err);
        st = kvp_sim_config_from_fit(m, &d, &f, 0, 0, &c, &err);
        ck_assert_msg((st == KVP_OK) == cases[i].ok, "case %zu: %s", i, err.msg);
        if (cases[i].ok) {
            ck_assert_uint_eq(c.offload_blocks, d.cpu_offload / (f.kv_pool_bytes / f.num_blocks));
            ck_assert_double_eq(c.offload_bandwidth, KVP_SIM_HOST_LINK);
        } else {
            ck_assert_int_eq(st, KVP_ERR_UNSUPPORTED);
        }
        kvp_model_free(m);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sim");
    TCase *core = tcase_create("core"), *limits = tcase_create("limits"), *engines = tcase_create("engines");
    tcase_add_test(core, prefix_sharing_saves_the_shared_blocks);
    tcase_add_test(core, window_frees_blocks);
    tcase_add_test(core, window_prefix_hit);
    tcase_add_test(core, hybrid_prefix_hit);
    tcase_add_test(core, hybrid_hits_before_new_blocks);
    tcase_add_test(core, preemption_when_blocks_run_out);
    tcase_add_test(core, chunked_prefill_and_max_num_seqs);
    tcase_add_test(core, llamacpp_slots);
    tcase_add_test(core, seeded_workload_repeats);
    tcase_add_test(core, config_from_fit);
    tcase_add_test(core, traces);
    tcase_add_test(core, arrivals_as_strtod);
    tcase_add_test(core, synth_keys);
    suite_add_tcase(s, core);
    tcase_add_test(limits, trace_errors);
    tcase_add_test(limits, synth_key_errors);
    tcase_add_test(limits, rate_too_low);
    tcase_add_test(limits, synth_within_budget);
    tcase_add_test(limits, run_errors);
    tcase_add_test(limits, max_rate_brackets);
    suite_add_tcase(s, limits);
    TCase *most = tcase_create("most"); /* 60 MB of trace: the release pass (docs/testing.md) */
    tcase_set_tags(most, "release");
    tcase_set_timeout(most, 60);
    tcase_add_test(most, trace_of_the_most_requests);
    suite_add_tcase(s, most);
    tcase_add_test(engines, sglang_radix_cache_shares_tokens);
    tcase_add_test(engines, sglang_retracts_when_decode_runs_out);
    tcase_add_test(engines, sglang_chunked_prefill);
    tcase_add_test(engines, trtllm_no_evict_admission_waits);
    tcase_add_test(engines, trtllm_block_reuse);
    tcase_add_test(engines, engines_repeat_and_differ);
    tcase_add_test(engines, engines_config_from_fit);
    tcase_add_test(engines, trtllm_run_errors);
    tcase_add_test(engines, vllm0_prefill_first_and_recompute);
    tcase_add_test(engines, vllm0_run_errors);
    suite_add_tcase(s, engines);
    TCase *offload = tcase_create("offload");
    tcase_set_timeout(offload, 30); /* 2,000 requests on a pool of 120, audited every step (ASan: ~1 s) */
    tcase_add_test(offload, offload_tier_finds_an_evicted_prefix);
    tcase_add_test(offload, offload_tier_is_lru);
    tcase_add_test(offload, offload_tier_preemption_and_repeats);
    tcase_add_test(offload, trtllm_secondary_pool);
    tcase_add_test(offload, offload_config_from_fit);
    suite_add_tcase(s, offload);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
