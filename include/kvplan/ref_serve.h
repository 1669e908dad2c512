/* ref_serve.h -- `kvplan simulate --validate`: the simulator's scheduler
 * decisions replayed on the reference decoder with a real paged block pool.
 *
 * The simulator (sim.h) counts blocks by identity; this replay does not
 * share that accounting. It runs the decoder (scaled widths, the model's
 * KV geometry) over the decisions the simulator logged (which requests
 * compute how many tokens each step, which are preempted), its codecs
 * writing K/V into blocks of real memory taken from a pool of the
 * simulated size; it caches full blocks by a chained hash of their actual
 * token ids, counts references, keeps freed blocks on an LRU queue until a
 * fresh block evicts them, drops the blocks the decoder's own windows can
 * no longer read, and gives each recurrent request one state slot. After
 * every step its counts are compared with the simulator's claims.
 *
 *     struct kvp_sim_config c;  ... c.log_decisions = true;
 *     kvp_sim_run(&c, &w, true, &r, &err);            // the series and the log
 *     struct kvp_serve_opts o = KVP_SERVE_DEFAULTS;
 *     struct kvp_serve_report rep;
 *     kvp_serve_validate(model, &c, &w, &r, &o, &rep, &err);
 *     // rep.match, rep.steps, rep.decoded_tokens ...; else rep.step, rep.field
 *
 * Nothing here prints or exits; the replay owns every byte it allocates
 * and frees it before returning.
 */
#ifndef KVPLAN_REF_SERVE_H
#define KVPLAN_REF_SERVE_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"
#include "kvplan/model.h"
#include "kvplan/ref.h"
#include "kvplan/sim.h"

/* The most one replay computes: tokens (prompts, outputs and recomputation
 * after preemption, as the simulation scheduled them; ~1-3 ms each at the
 * default scale for 7-8B geometries, ~25 ms for qwen3-next's recurrent
 * state) and bytes of cached rows its attention reads (every token at
 * position p reads p + 1 rows of every layer; ~7 GB/s). At either limit a
 * replay takes some 10-20 s on one core. */
#define KVP_SERVE_MAX_TOKENS 8000u
#define KVP_SERVE_MAX_READ (64ull * 1000 * 1000 * 1000)
/* Block memory at most: the tokens x their rows' bytes over every layer (an
 * upper bound on the blocks they fill) may not pass 4 GiB. */
#define KVP_SERVE_MAX_MEMORY (4ull << 30)

struct kvp_serve_opts {
    struct kvp_ref_opts ref; /* the decoder's scaling (as `kvplan validate --scale auto`) */
    uint64_t max_tokens;     /* refuse a replay that decodes more (0: KVP_SERVE_MAX_TOKENS) */
    uint64_t max_read_bytes; /* ... or whose attention reads more (0: KVP_SERVE_MAX_READ) */
    uint32_t logit_checks;   /* requests served with a prefix hit whose logits are compared with a
                              * decode from scratch (0: every one) */
};
#define KVP_SERVE_DEFAULTS                                                                                          \
    {.ref = {.seed = 1, .hidden = 64, .intermediate = 128, .vocab = 256, .q_per_kv = 1}, .logit_checks = 4}

struct kvp_serve_report {
    bool match;              /* every step, hit, preemption and logit check agreed */
    uint64_t steps;          /* steps compared */
    uint64_t blocks_compared;      /* per-step figures compared: used per group, cached free, free */
    uint64_t hits_compared;        /* admissions (and blocked admissions) whose prefix hit was compared */
    uint64_t preemptions_compared; /* preemptions checked: the pool could not supply the blocks */
    uint64_t supplies_checked;     /* schedules checked: the pool could supply the blocks */
    uint64_t decoded_tokens;       /* tokens the decoder computed */
    uint64_t logit_checks;         /* prefix-hit requests whose logits equal a decode from scratch, bit for bit */
    uint64_t hit_tokens;           /* prefix-hit tokens the pool found */
    uint64_t peak_bytes;           /* block memory (and recurrent state) held at most */
    double wall_s;
    /* the first difference (match false) */
    uint64_t step;                 /* 0-based */
    char field[64];
    uint64_t claimed, measured;
};

/* Before simulating for a replay: KVP_ERR_USAGE when w's answers alone (a
 * request computes at least its answer's tokens, whatever its prefix hit)
 * are past the decoder's token budget, which the simulation, audited, would
 * take long to find (200 answers of 16,000 tokens: 38 s). */
KVP_API enum kvp_status kvp_serve_check_workload(const struct kvp_workload *w, const struct kvp_serve_opts *o,
                                                 struct kvp_error *err);

/* Replay r (run with c->log_decisions and the series) on the decoder of m.
 * Errors (report untouched but for counts): an engine other than vLLM
 * (KVP_ERR_UNSUPPORTED), a replay over the token budget, a log or series
 * missing (KVP_ERR_USAGE), a layer kind the simulation grouped differently,
 * no memory. A difference is not an error: report->match is false. */
KVP_API enum kvp_status kvp_serve_validate(const struct kvp_model *m, const struct kvp_sim_config *c,
                                   const struct kvp_workload *w, const struct kvp_sim_result *r,
                                   const struct kvp_serve_opts *o, struct kvp_serve_report *out,
                                   struct kvp_error *err);

#endif
