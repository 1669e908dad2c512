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
 * block, a step of 1 ms whatever it holds. */
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
    ck_assert_kvp_ok(kvp_gpus_load("models/gpus.yaml", &gc, &err), err);
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
        ck_assert_kvp_ok(kvp_sim_config_from_fit(m, &d, &f, (double)h100->bandwidth_bytes_per_s, 989e12, &c, &err), err);
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
    kvp_gpus_free(gc);
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

START_TEST(trace_errors)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"arrival_s,prompt,output_tokens\n", "t:1:11: unknown column (expected "
                                             "arrival_s,prompt_tokens,output_tokens[,prefix_id,prefix_tokens])"},
        {"arrival_s,prompt_tokens,output_tokens\n0,10\n", "t:2:5: a row needs a cell for every column ('output_tokens' is missing)"},
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

static Suite *suite(void)
{
    Suite *s = suite_create("sim");
    TCase *core = tcase_create("core"), *limits = tcase_create("limits");
    tcase_add_test(core, prefix_sharing_saves_the_shared_blocks);
    tcase_add_test(core, window_frees_blocks);
    tcase_add_test(core, window_prefix_hit);
    tcase_add_test(core, hybrid_prefix_hit);
    tcase_add_test(core, preemption_when_blocks_run_out);
    tcase_add_test(core, chunked_prefill_and_max_num_seqs);
    tcase_add_test(core, llamacpp_slots);
    tcase_add_test(core, seeded_workload_repeats);
    tcase_add_test(core, config_from_fit);
    tcase_add_test(core, traces);
    suite_add_tcase(s, core);
    tcase_add_test(limits, trace_errors);
    tcase_add_test(limits, run_errors);
    tcase_add_test(limits, max_rate_brackets);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
