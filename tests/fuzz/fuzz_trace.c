/* fuzz_trace.c -- libFuzzer harness: kvp_workload_parse on a trace (CSV or
 * JSONL, sim.h), then, for a small trace, kvp_sim_run under each simulated
 * engine's scheduler (vLLM V1 and V0, SGLang, TensorRT-LLM, llama.cpp) for
 * llama-3.1-8b, and vLLM V1 for gpt-oss-20b (two KV-cache groups, full and
 * sliding attention, prefix caching on), on a pool of 16-4111 blocks picked
 * from the input (llama.cpp: its slots as the fit made them) so that
 * preemption, eviction and refusal are reached.
 *
 * Properties beyond "no crash": a parsed trace has 1..KVP_SIM_MAX_REQUESTS
 * requests, arrivals finite, non-decreasing and at most
 * KVP_SIM_MAX_ARRIVAL_S, prompts and outputs >= 1, a prefix within its
 * prompt; a finished simulation generated exactly the requests' tokens; no
 * run breaks the block pool's invariants (this build audits every step,
 * KVP_SIM_AUDIT). */
#include <math.h>

#include "fuzz_common.h"
#include "kvplan/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What is simulated: at most this many requests and prompt + output tokens in all, and an audit of
 * at most SIM_MAX_AUDIT block-table entries over the run (each step audits what the running requests
 * hold, so a request's tokens times the steps it runs: a cell a token under llama.cpp, where one
 * request of 100 + 8000 tokens is 65M entries, 1.7 s in this build, past the 1 s an input may take). */
#define SIM_MAX_REQUESTS 256
#define SIM_MAX_TOKENS (1u << 16)
#define SIM_MAX_AUDIT (1ull << 24)

static const char *const engines[] = {"vllm", "vllm@0.7.3", "sglang", "trtllm", "llama.cpp", "vllm"};
static const char *const models[] = {"llama-3.1-8b", "llama-3.1-8b", "llama-3.1-8b", "llama-3.1-8b",
                                     "llama-3.1-8b", "gpt-oss-20b"};
#define NENGINES (sizeof engines / sizeof engines[0])

/* Each run's configuration (engine and model) on 80 GiB, made once. */
static const struct kvp_sim_config *config(uint32_t i)
{
    static struct kvp_sim_config c[NENGINES];
    static bool made;
    struct kvp_error err = {0};

    if (!made) {
        for (uint32_t k = 0; k < NENGINES; k++) {
            struct kvp_deploy d;
            struct kvp_fit f;
            struct kvp_model *m;
            enum kvp_engine_id e;
            uint32_t rel;
            char path[64];
            snprintf(path, sizeof path, "models/%s.yaml", models[k]);
            if (kvp_model_load(path, &m, &err) != KVP_OK)
                goto fail;
            if (kvp_engine_parse(engines[k], &e, &rel, &err) != KVP_OK)
                goto fail;
            kvp_deploy_init(&d, e, m);
            d.release = rel;
            d.gpu_memory = 85899345920ull;
            d.context = 8192;
            if (kvp_fit_compute(m, &d, &f, &err) != KVP_OK ||
                kvp_sim_config_from_fit(m, &d, &f, 3.35e12, 989e12, &c[k], &err) != KVP_OK)
                goto fail;
            kvp_model_free(m); /* the config keeps the groups, not the model */
        }
        made = true;
    }
    return &c[i];
fail:
    fprintf(stderr, "fuzz_trace: run from the repository root: %s\n", err.msg);
    abort();
}

static void simulate(const struct kvp_workload *w, const uint8_t *data, size_t size)
{
    uint64_t tokens = 0, audit = 0, pick = fuzz_pick(data, size, 0);

    for (uint32_t i = 0; i < w->n; i++) {
        uint64_t len = (uint64_t)w->req[i].prompt + w->req[i].output;
        tokens += len;
        audit += len * w->req[i].output; /* held while it decodes, at most len entries a step */
    }
    if (w->n > SIM_MAX_REQUESTS || tokens > SIM_MAX_TOKENS || audit > SIM_MAX_AUDIT)
        return;
    for (uint32_t k = 0; k < NENGINES; k++) {
        struct kvp_sim_config c = *config(k);
        struct kvp_sim_result r = {0};
        struct kvp_error err = {0};
        enum kvp_status st;
        if (c.engine != KVP_SIM_LLAMACPP) /* its cells are its slots' (n_seq x context): fixed by the fit */
            c.num_blocks = 16 + pick % 4096; /* small pools preempt, evict and refuse */
        st = kvp_sim_run(&c, w, pick & 1, &r, &err);
        fuzz_check_error(st, &err);
        FUZZ_ASSERT(!strstr(err.msg, "the simulator's invariant"), "%s, %s: %s", engines[k], models[k], err.msg);
        if (st == KVP_OK)
            FUZZ_ASSERT(r.output_tokens <= tokens && r.prompt_tokens <= tokens, "%s: %llu + %llu tokens of %llu",
                        engines[k], (unsigned long long)r.prompt_tokens, (unsigned long long)r.output_tokens,
                        (unsigned long long)tokens);
        kvp_sim_result_free(&r);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kvp_workload w;
    struct kvp_error err = {0};
    enum kvp_status st = kvp_workload_parse((const char *)data, size, "fuzz.trace", &w, &err);

    fuzz_check_error(st, &err);
    if (st != KVP_OK)
        return 0;
    FUZZ_ASSERT(w.n >= 1 && w.n <= KVP_SIM_MAX_REQUESTS, "%u requests", w.n);
    for (uint32_t i = 0; i < w.n; i++) {
        const struct kvp_sim_request *q = &w.req[i];
        FUZZ_ASSERT(isfinite(q->arrival_s) && q->arrival_s >= 0 && q->arrival_s <= KVP_SIM_MAX_ARRIVAL_S &&
                        (i == 0 || q->arrival_s >= w.req[i - 1].arrival_s),
                    "request %u arrives at %g", i, q->arrival_s);
        FUZZ_ASSERT(q->prompt >= 1 && q->output >= 1 && q->prefix_tokens <= q->prompt,
                    "request %u: prompt %u, output %u, prefix %u", i, q->prompt, q->output, q->prefix_tokens);
    }
    simulate(&w, data, size);
    kvp_workload_free(&w);
    return 0;
}
