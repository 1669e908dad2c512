/* profile.h -- internal: what every engine profile shares (src/lib/profile_*.c).
 * The helpers live in profile.c (with the engine and release tables), the
 * profiles in profile_*.c; deploy.c dispatches to them. Nothing here calls
 * back into deploy.c, so the include graph has no cycle.
 *
 * A profile sizes one rank: the layers of the busiest pipeline stage, the KV
 * heads one tensor-parallel rank holds. struct prank is that view of a model. */
#ifndef KVPLAN_PROFILE_H
#define KVPLAN_PROFILE_H

#include "kvplan/deploy.h"
#include "kvplan/num.h"

/* One layer spec as one rank holds it. */
struct rspec {
    const struct kvp_layer_spec *s;
    uint32_t layers;   /* layers of this spec on the stage */
    uint32_t kv_heads; /* KV heads on this rank: max(1, H_kv / tp); MLA 1 (replicated) */
    uint64_t k_row;    /* K bytes per token per layer on this rank */
    uint64_t v_row;    /* V bytes per token per layer (0 for MLA) */
    uint64_t state;    /* recurrent state bytes per layer per sequence on this rank */
};

struct prank {
    const struct kvp_model *m;
    const struct kvp_deploy *d;
    uint32_t n;              /* specs with layers on the stage */
    struct rspec spec[KVP_MAX_SPECS];
    uint32_t layers;         /* layers on the stage */
};

/* weights.c: the bytes of one MoE layer's routed experts (gate, up, down and
 * their biases, all n_experts) stored under ws (NULL: the checkpoint's form)
 * at intermediate width `inter` and hidden size `hidden`: the shapes an
 * engine allocates (a partition's, padded for its kernels) priced as the
 * checkpoint stores a tensor of that shape. */
enum kvp_status kvp_weights_experts(const struct kvp_model *m, const struct kvp_wstore *ws, uint32_t layer,
                                    uint64_t inter, uint64_t hidden, uint64_t *bytes, struct kvp_error *err);

/* The layers of pipeline stage `stage` of pp, as vLLM's get_pp_indices splits
 * them: L / pp each, the remainder to the stages before the last. */
void kvp_profile_stage_range(uint32_t n_layers, uint32_t pp, uint32_t stage, uint32_t *first, uint32_t *count);

/* Build the per-rank view of layers [first, first+count). */
enum kvp_status kvp_profile_rank(const struct kvp_model *m, const struct kvp_deploy *d, uint32_t first,
                             uint32_t count, struct prank *r, struct kvp_error *err);

/* The HF architecture of m's family as the engines' model registries name it
 * ("Qwen3NextForCausalLM"), for their refusals; the family when not known. */
const char *kvp_profile_architecture(const struct kvp_model *m);

/* acc += a * b, checked: false (acc unchanged or partial) on overflow. */
bool kvp_profile_mul_add(uint64_t *acc, uint64_t a, uint64_t b);

/* Bytes one token costs on the rank: sum over specs of (k_row + v_row) * layers
 * (recurrent state is per sequence, not per token). Errors: overflow. */
enum kvp_status kvp_profile_token_bytes(const struct prank *r, uint64_t *out, struct kvp_error *err);

/* vLLM's (and TRT-LLM's) tokens per step: d->max_batched_tokens, else the
 * release's default (src/lib/engine/profile_reserve.c). */
uint64_t kvp_profile_batched_tokens(const struct kvp_deploy *d);
/* max_num_seqs as the engine takes it: given, else the release's default
 * (vLLM V1: 1024 on a large GPU, else 256; TRT-LLM's max_batch_size 2048). */
uint64_t kvp_profile_max_seqs(const struct kvp_deploy *d);

/* The start-up reserve subtracted before the KV budget: activations + non-torch + CUDA graphs. */
uint64_t kvp_profile_reserve(const struct kvp_deploy *d);

/* Weights on one GPU: d->weights_memory, else all weights / (tp * pp), rounded up. */
enum kvp_status kvp_profile_weights(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t *out,
                                struct kvp_error *err);

/* Reject a cache format the engine cannot store, in the engine's words. */
enum kvp_status kvp_profile_formats(const struct kvp_deploy *d, const enum kvp_dtype *ok, int n, struct kvp_error *err);

/* memory * fraction, rounded down, as the engines' float arithmetic does. */
uint64_t kvp_profile_fraction(uint64_t memory, double fraction);

/* a - b, or 0 with *short_by set when b > a. */
uint64_t kvp_profile_sub(uint64_t a, uint64_t b, uint64_t *short_by);

/* Settle fits / free_bytes / short_bytes from kv_budget_bytes and
 * kv_bytes_required; deficit is what the non-KV memory already lacks.
 * KVP_ERR_OVERFLOW when the shortfall does not fit 64 bits. */
enum kvp_status kvp_profile_finish(struct kvp_fit *f, bool fits, uint64_t deficit, struct kvp_error *err);

/* The longest context c <= limit with cost(c) * n <= pool (binary search; cost
 * is non-decreasing in c). 0 if not even one token fits. */
typedef enum kvp_status (*profile_cost_fn)(void *ctx, uint64_t context, uint64_t *bytes, struct kvp_error *err);
enum kvp_status kvp_profile_max_context(profile_cost_fn cost, void *ctx, uint64_t n, uint64_t pool, uint64_t limit,
                                    uint64_t *out, struct kvp_error *err);

/* vLLM's KV-cache groups of a rank view (v1/core/kv_cache_utils.py
 * _get_kv_cache_groups_uniform_page_size): the layers fall into spec types
 * (equal kind, window, K and V rows, state); one type makes one group, one
 * kind with several pages one group whose block sums the pages, and a hybrid
 * groups of group_size layers of one type each, the pages made equal.
 * profile_vllm.c sizes the pool from them, sim.c names each group's kind. */
enum kvp_vllm_rule {
    KVP_VLLM_ONE_TYPE,   /* one spec type: one group of all its layers */
    KVP_VLLM_ONE_KIND,   /* one kind and window, several pages: one group, num_blocks = avail // sum(page_l) */
    KVP_VLLM_EQUAL_PAGES /* a hybrid: cdiv(layers, group_size) groups per type */
};

struct kvp_vllm_groups {
    uint32_t n;                              /* spec types */
    const struct rspec *type[KVP_MAX_SPECS]; /* the first spec of each type */
    uint32_t layers[KVP_MAX_SPECS];          /* layers of each type */
    enum kvp_vllm_rule rule;
    uint32_t group_size; /* layers per group: all (one type, one kind), else max if max < 1.5 min, else min */
    uint32_t n_groups;   /* 1, or the sum over types of cdiv(layers, group_size) */
};

/* Whether vLLM takes two rank specs as one KV-cache spec type. */
bool kvp_profile_vllm_same_type(const struct rspec *a, const struct rspec *b);
/* Group the specs of r that take a cache (states: recurrent layers are specs
 * too, as in V1; V0 caches them apart). Fails (KVP_ERR_UNSUPPORTED) when no
 * layer takes a cache. */
enum kvp_status kvp_profile_vllm_groups(const struct prank *r, bool states, struct kvp_vllm_groups *g,
                                        struct kvp_error *err);

enum kvp_status kvp_profile_ideal(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                              struct kvp_error *err);
enum kvp_status kvp_profile_vllm(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                             struct kvp_error *err);
enum kvp_status kvp_profile_sglang(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                               struct kvp_error *err);
enum kvp_status kvp_profile_trtllm(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                               struct kvp_error *err);
/* llama.cpp -ot / --override-tensor (common/arg.cpp: PATTERN=BUFFER pairs, comma-separated; the
 * model loader gives a tensor the buffer of the first pattern std::regex_search finds in its name):
 * the layers whose expert tensors (blk.N.ffn_{gate,up,down}_exps) go to host memory, into d's
 * cpu_experts. Refused: a buffer but CPU, a pattern that does not compile (POSIX ERE, \\d read as
 * [0-9]), one that matches another tensor than an expert (kvplan places nothing else by name) or
 * only some of a layer's experts. m NULL: the syntax only. */
enum kvp_status kvp_llamacpp_overrides(const struct kvp_model *m, const char *spec, struct kvp_deploy *d,
                                       struct kvp_error *err);
/* The micro-batch llama_context uses: n_ubatch, at most n_batch. */
uint64_t kvp_profile_llamacpp_ubatch(const struct kvp_deploy *d);
enum kvp_status kvp_profile_llamacpp(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                                 struct kvp_error *err);
enum kvp_status kvp_profile_hf(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                           struct kvp_error *err);

#endif
