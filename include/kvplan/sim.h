/* sim.h -- a serving engine's scheduler and KV block manager under traffic.
 *
 * `kvplan fit` says how many requests of the full context fit; this module
 * says what a stream of requests does to the same pool: blocks allocated as
 * tokens are added, prefix blocks shared by hash, sliding-window blocks freed,
 * requests preempted when blocks run out. The rules are vLLM V1's (0.11.0)
 * and V0's (0.7.3), SGLang's (0.5.2; 0.4.6), TensorRT-LLM's (1.0.0) and
 * llama.cpp's fixed slots, and a CPU offload tier (vLLM V1, TensorRT-LLM);
 * docs/simulate.md gives each with its source.
 *
 *     struct kvp_workload w;
 *     struct kvp_synth s = {.rate = 5, .prompt = {2048, 2048}, .output = {500, 500},
 *                           .requests = 1000, .seed = 1, .prefix = 1024, .prefix_share = 0.5};
 *     kvp_workload_synth(&s, &w, &err);            // or kvp_workload_parse(text, len, "t.csv", &w, &err)
 *     struct kvp_sim_config c;
 *     kvp_sim_config_from_fit(model, &deploy, &fit, &c, &err); // the pool fit computed
 *     c.step = (struct kvp_step_model){.fixed_s = 0.005, .per_token_s = 1e-5};
 *     struct kvp_sim_result r;
 *     kvp_sim_run(&c, &w, true, &r, &err);         // r.peak_blocks, r.preemptions, r.steps ...
 *     kvp_sim_result_free(&r);
 *     kvp_workload_free(&w);
 *
 * Ownership: a kvp_workload and a kvp_sim_result own their arrays until their
 * _free (NULL-safe; a zeroed struct frees to nothing); kvp_sim_run allocates
 * its state and frees it before returning. Block and token counts are uint64_t
 * with checked arithmetic; times are seconds (double) from the step model,
 * which gives bounds (a roofline) or a user's model, never measurements.
 */
#ifndef KVPLAN_SIM_H
#define KVPLAN_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/deploy.h"
#include "kvplan/error.h"
#include "kvplan/model.h"
#include "kvplan/render.h"

/* ---- workloads ---- */

struct kvp_sim_request {
    double arrival_s;       /* seconds from the start, non-decreasing in a workload */
    uint32_t prompt;        /* prompt tokens, >= 1 */
    uint32_t output;        /* tokens to generate, >= 1 */
    uint32_t prefix_id;     /* 0: no shared prefix; else requests with one id share ... */
    uint32_t prefix_tokens; /* ... their first prefix_tokens prompt tokens (<= prompt) */
    uint32_t line;          /* 1-based line of a trace (0 for a synthetic request) */
};

struct kvp_workload {
    struct kvp_sim_request *req; /* n requests, owned */
    uint32_t n;
    char name[KVP_ERROR_FILE_MAX]; /* the trace's file name, for errors; "" when synthetic */
};

/* A length drawn uniformly from [lo, hi] (lo == hi: fixed). */
struct kvp_range {
    uint32_t lo, hi;
};

struct kvp_synth {
    double rate;              /* requests per second, Poisson arrivals; 0: all arrive at t = 0 */
    struct kvp_range prompt;  /* prompt tokens */
    struct kvp_range output;  /* output tokens */
    uint32_t requests;        /* how many */
    uint64_t seed;            /* the same seed gives the same workload */
    uint32_t prefix;          /* shared prefix tokens (0 = none), at most prompt.lo */
    double prefix_share;      /* fraction of requests that start with it, 0..1 */
};

#define KVP_SIM_MAX_REQUESTS 10000000u
/* The latest arrival a workload may have: 10^9 s (31.7 years), so that every
 * duration and rate derived from it prints as a number of sane width. */
#define KVP_SIM_MAX_ARRIVAL_S 1e9
/* What one workload may cost the simulator, in token-steps: a request counts
 * its prompt and answer plus KVP_SIM_REQUEST_COST (its admission and
 * bookkeeping); a synthetic workload its longest prompt and answer times the
 * requests, before it is drawn (kvp_synth_cost), a trace the sum over its
 * requests, before it is simulated. 10^8 simulates in a second or a few
 * (docs/simulate.md); a plan's `requests: 10000000` (1.3 * 10^10) took 4.8 s
 * and 2.9 GB. */
#define KVP_SIM_BUDGET 100000000ull
#define KVP_SIM_REQUEST_COST 64u

/* The synthetic workload `kvplan simulate` and a plan's `workloads` start
 * from: 1 request/s, 1024-token prompts, 256-token answers, 1000 requests, seed 1. */
#define KVP_SYNTH_DEFAULTS {.rate = 1.0, .prompt = {1024, 1024}, .output = {256, 256}, .requests = 1000, .seed = 1}

/* Sustained, unless given otherwise: queueing p99 at most this many seconds. */
#define KVP_SYNTH_MAX_QUEUE_S 1.0

/* "N" or "LO-HI" (counts as kvp_parse_count reads them) into r, with
 * 1 <= LO <= HI < 2^32; KVP_ERR_USAGE otherwise. */
KVP_API enum kvp_status kvp_range_parse(const char *v, struct kvp_range *r, struct kvp_error *err);

/* The keys of a synthetic workload, one table for a plan's `workloads`
 * (docs/plan-format.md), `kvplan simulate`'s options and the TUI's fields.
 * The rows are in the order a workload's keys are set: a prefix before its
 * share. */
enum kvp_synth_kind {
    KVP_SYNTH_RATE,     /* requests per second >= 0 */
    KVP_SYNTH_RANGE,    /* tokens, N or LO-HI */
    KVP_SYNTH_COUNT,    /* requests, 1..KVP_SIM_MAX_REQUESTS */
    KVP_SYNTH_SEED,     /* any 64-bit count */
    KVP_SYNTH_PREFIX,   /* tokens, 0 or "none": no prefix */
    KVP_SYNTH_FRACTION, /* 0..1 */
    KVP_SYNTH_SECONDS,  /* >= 0 */
};

struct kvp_synth_key {
    const char *key;  /* as a plan spells it: "prefix_share" */
    const char *opt;  /* as `kvplan simulate` does, without "--": "prefix-share" */
    const char *arg;  /* the option's metavariable: "F" */
    enum kvp_synth_kind kind;
    bool synthetic;   /* describes the drawn requests (false: max_queue, which a trace has too) */
    const char *help; /* one line, with the default (KVP_SYNTH_DEFAULTS, KVP_SYNTH_MAX_QUEUE_S) */
};

#define KVP_SYNTH_KEYS 8 /* rows */

KVP_API const struct kvp_synth_key *kvp_synth_key_at(uint32_t row); /* NULL past the last */

/* Give key (either spelling) the value text in s or *max_queue_s (NULL:
 * back to its default). A prefix from none brings a share of 1 (every
 * request), no prefix takes the share away, and a share needs a prefix.
 * Errors (KVP_ERR_USAGE) name neither key nor place: the caller prefixes
 * "--rate: " or "file:line:col: 'rate': ". */
KVP_API enum kvp_status kvp_synth_set(struct kvp_synth *s, double *max_queue_s, const char *key, const char *text,
                              struct kvp_error *err);
/* Key's value as text kvp_synth_set reads back ("5", "1024-2048"), "" where
 * s leaves it out (no prefix: neither prefix nor share). Returns buf. */
KVP_API const char *kvp_synth_text(const struct kvp_synth *s, double max_queue_s, const char *key, char *buf, size_t n);

/* s's cost in token-steps into *cost (requests x (prompt.hi + output.hi +
 * KVP_SIM_REQUEST_COST)); KVP_ERR_USAGE, naming KVP_SIM_BUDGET, past it.
 * kvp_workload_synth checks it first (`kvplan simulate`'s options); a plan
 * calls it when it reads a workload, to name the key. */
KVP_API enum kvp_status kvp_synth_cost(const struct kvp_synth *s, uint64_t *cost, struct kvp_error *err);

/* Draw a workload. Errors (KVP_ERR_USAGE): a zero or empty range, no
 * requests or more than KVP_SIM_MAX_REQUESTS, a prefix longer than the
 * shortest prompt, a share outside 0..1, a negative or non-finite rate, a
 * rate so low that the last request would arrive after KVP_SIM_MAX_ARRIVAL_S,
 * a cost past KVP_SIM_BUDGET (kvp_synth_cost). */
KVP_API enum kvp_status kvp_workload_synth(const struct kvp_synth *s, struct kvp_workload *w, struct kvp_error *err);

/* Parse a trace: CSV with the header `arrival_s,prompt_tokens,output_tokens`
 * and optionally `,prefix_id,prefix_tokens`, or JSONL (one flat object per
 * line with those keys); docs/simulate.md gives the format. name is the file
 * name for errors (`name:line:col: message`, KVP_ERR_SYNTAX or _RANGE): at
 * most KVP_SIM_MAX_REQUESTS requests, arrivals at most KVP_SIM_MAX_ARRIVAL_S. */
KVP_API enum kvp_status kvp_workload_parse(const char *text, uint64_t len, const char *name, struct kvp_workload *w,
                                   struct kvp_error *err);
/* Read and parse a trace file (at most 256 MiB). */
KVP_API enum kvp_status kvp_workload_load(const char *path, struct kvp_workload *w, struct kvp_error *err);
KVP_API void kvp_workload_free(struct kvp_workload *w);

/* ---- the engine being simulated ---- */

enum kvp_sim_engine {
    KVP_SIM_VLLM,     /* vLLM V1: paged blocks per KV-cache group, one shared pool */
    KVP_SIM_LLAMACPP, /* llama.cpp server: n_seq slots of context / n_seq cells each */
    KVP_SIM_SGLANG,   /* SGLang: a token pool (blocks of 1 token) and the radix cache (prefix_caching) */
    KVP_SIM_TRTLLM,   /* TensorRT-LLM: blocks of tokens_per_block, GUARANTEED_NO_EVICT, block reuse (prefix_caching) */
    KVP_SIM_VLLM0,    /* vLLM V0 (0.7.3): prefill-first steps, recompute preemption, no prefix caching */
};

#define KVP_SIM_MAX_GROUPS 16

/* What the engine's pool counts in ("blocks", "tokens" for SGLang, "cells"
 * for llama.cpp) and its scheduler's name ("vLLM V1 scheduler" ...). */
KVP_API const char *kvp_sim_unit(enum kvp_sim_engine e);
KVP_API const char *kvp_sim_scheduler(enum kvp_sim_engine e);

/* One vLLM KV-cache group: the layers of one spec type that share block tables. */
struct kvp_sim_group {
    enum kvp_layer_kind
        kind; /* FULL and MLA grow; SLIDING and CHUNKED free behind a window; RECURRENT: one state block */
    uint32_t window;          /* tokens (SLIDING, CHUNKED) */
};

/* How long one step takes: max(fixed + per_token * tokens scheduled,
 * roofline) where the roofline (when bandwidth > 0) is
 * max((weight_bytes + block_bytes * blocks held by the scheduled requests) / bandwidth,
 *     flops_per_token * tokens scheduled / peak_flops)
 * + the host's share (llama.cpp's weights in host memory, kvp_roofline's host terms):
 * host_read_s for a step of fewer than KVP_OFFLOAD_MIN_BATCH tokens, host_copy_s from there on. */
struct kvp_step_model {
    double fixed_s, per_token_s;
    double weight_bytes;    /* active weights one step reads, per GPU (kvp_roofline) */
    double block_bytes;     /* bytes of one block over all groups' layers, per GPU */
    double flops_per_token; /* 2 x active parameters / tp */
    double bandwidth, peak_flops;
    double host_read_s;     /* the CPU reads the host's active weights */
    double host_copy_s;     /* ggml copies the host's weight tensors to the GPU (the link unknown: host_read_s) */
};

struct kvp_sim_config {
    enum kvp_sim_engine engine;
    uint64_t num_blocks;        /* vLLM: the pool (fit.num_blocks; block 0 is the null block); SGLang: the
                                 * token pool + 1 (slot 0 is its padding); TRT-LLM, vLLM V0: fit.num_blocks + 1 */
    uint32_t block_size;        /* tokens per block */
    uint32_t n_groups;
    struct kvp_sim_group group[KVP_SIM_MAX_GROUPS];
    uint64_t max_batched_tokens; /* tokens scheduled per step (vLLM max_num_batched_tokens; llama.cpp n_batch;
                                  * SGLang chunked_prefill_size; TRT-LLM max_num_tokens) */
    uint64_t max_num_seqs;      /* requests running at once (llama.cpp: slots; SGLang max_running_requests;
                                 * TRT-LLM max_batch_size) */
    uint64_t max_prefill_tokens; /* SGLang: prompt tokens one prefill batch takes (--max-prefill-tokens) */
    uint64_t max_model_len;     /* longest request (prompt + output); llama.cpp: cells per slot */
    bool prefix_caching;        /* vLLM --enable-prefix-caching (V1's default; off where the release cannot) */
    struct kvp_step_model step;
    bool log_decisions;         /* vLLM: fill kvp_sim_result.log (what --validate replays) */
    bool audit;                 /* vLLM, V0, TRT-LLM: check the block pool's invariants after every step, O(blocks
                                 * held) a step (no block in two groups, nor in two requests unless cached): a
                                 * run that breaks one fails; always on in the fuzz build (KVP_SIM_AUDIT) */
    uint64_t offload_blocks;    /* the CPU offload tier in blocks (deploy cpu_offload / block bytes; 0: none):
                                 * vLLM V1's OffloadingConnector (num_cpu_blocks), TRT-LLM's secondary pool */
    double offload_block_bytes; /* bytes one block moves over the host link, per GPU */
    double offload_bandwidth;   /* host link bytes/s for loads from the tier (0: KVP_SIM_HOST_LINK) */
};

/* The host link a load from the CPU tier crosses when none is given:
 * PCIe 5.0 x16's 64 GB/s less protocol overhead, an assumption (a bound). */
#define KVP_SIM_HOST_LINK 55e9

/* The engine, pool and limits a deployment runs with, from the fit kvplan fit
 * computed for it (num_blocks, block size, groups, max_num_batched_tokens and
 * max_num_seqs as the release defaults them), and the step model's roofline
 * parts when bandwidth and peak are given (else zeros). Errors: an engine not
 * simulated (KVP_ERR_UNSUPPORTED), data-parallel ranks (d->dp > 1: not simulated
 * yet, KVP_ERR_UNSUPPORTED), a deployment that does not start. */
KVP_API enum kvp_status kvp_sim_config_from_fit(const struct kvp_model *m, const struct kvp_deploy *d,
                                                const struct kvp_fit *f, double bandwidth, double peak_flops,
                                                struct kvp_sim_config *c, struct kvp_error *err);

/* One step of the time series. */
struct kvp_sim_step {
    double time_s;       /* when the step ends */
    uint32_t running, waiting;
    uint64_t scheduled_tokens;
    uint64_t used[KVP_SIM_MAX_GROUPS]; /* blocks referenced by requests, per group (llama.cpp: cells in use) */
    uint64_t cached;     /* free blocks that still hold a cached prefix (evictable) */
    uint64_t free;       /* free blocks holding nothing */
    uint64_t offloaded;  /* blocks held by the CPU tier (0 without one) */
};

/* One scheduler decision (vLLM, with log_decisions), in the order the
 * scheduler made it; `kvplan simulate --validate` replays them on the
 * reference decoder's block pool (src/ref/serve.c). */
enum kvp_sim_decision {
    KVP_SIM_SCHEDULE, /* req computes `tokens` tokens this step; admit: taken from the queue with `hit` cached tokens */
    KVP_SIM_PREEMPT,  /* req is preempted (recompute) because `for_req` could not get blocks for `tokens` tokens */
    KVP_SIM_BLOCKED,  /* req (waiting, `hit` cached) could not get blocks for `tokens` tokens: the queue stops */
};

struct kvp_sim_event {
    uint64_t step;    /* the step (0-based) the decision belongs to */
    enum kvp_sim_decision kind;
    uint32_t req;     /* workload index */
    uint32_t for_req; /* PREEMPT: the request that needed the blocks */
    uint64_t tokens, hit;
    bool admit;
};

struct kvp_percentiles {
    double p50, p90, p99, mean;
};

struct kvp_sim_result {
    uint64_t steps;
    struct kvp_sim_step *series; /* steps entries, owned */
    uint64_t peak_blocks;        /* most blocks referenced at once (llama.cpp: cells) */
    uint64_t pool_blocks;        /* blocks requests can use (vLLM: num_blocks - 1) */
    uint64_t preemptions;
    uint64_t prefix_hit_tokens;  /* tokens found in the prefix cache, over every admission */
    uint64_t offload_hit_tokens; /* tokens loaded from the CPU tier instead of recomputed (beyond the GPU hit) */
    uint64_t offload_stored_blocks, offload_loaded_blocks; /* blocks copied to the tier, and back */
    double offload_load_s;       /* step time spent on loads: bytes / offload_bandwidth (a bound) */
    uint64_t prompt_tokens, output_tokens;
    double duration_s;           /* the last request's end */
    struct kvp_percentiles ttft, tpot, queue; /* seconds; queue: arrival to first scheduled */
    double throughput;           /* output tokens per second over duration_s */
    struct kvp_sim_event *log;   /* nlog decisions (config log_decisions), owned */
    uint64_t nlog;
};

/* Simulate w under c. keep_series: fill r->series (else only the totals).
 * Errors: a request longer than max_model_len or than the whole pool
 * (KVP_ERR_RANGE, at its trace line), out of memory. */
KVP_API enum kvp_status kvp_sim_run(const struct kvp_sim_config *c, const struct kvp_workload *w, bool keep_series,
                            struct kvp_sim_result *r, struct kvp_error *err);
KVP_API void kvp_sim_result_free(struct kvp_sim_result *r);

/* Sustained: no preemption and the 99th percentile of queueing at most max_queue_s. */
KVP_API bool kvp_sim_sustained(const struct kvp_sim_result *r, double max_queue_s);

/* The highest Poisson rate (to 1%) at which workload s (its rate ignored) is
 * sustained under c; 0 when none is. */
KVP_API enum kvp_status kvp_sim_max_rate(const struct kvp_sim_config *c, const struct kvp_synth *s, double max_queue_s,
                                 double *rate, struct kvp_error *err);

/* The series of r as a standalone SVG into b (sim_svg.c): blocks in use per
 * group stacked, cached free blocks above, the pool as a line. Errors: r has
 * no series (run with keep_series), out of memory. */
KVP_API enum kvp_status kvp_sim_svg(const struct kvp_sim_config *c, const struct kvp_sim_result *r, const char *title,
                            struct kvp_buf *b, struct kvp_error *err);

#endif
