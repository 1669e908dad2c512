/* kvp_profile_reserve.c -- the start-up reserve an engine takes before its KV
 * budget, estimated from the model's shapes and the settings when the user
 * has not measured it (docs/engines.md, "The start-up reserve, estimated",
 * gives the derivation and the error on real start-up logs).
 *
 * The engines measure these figures in a profiling run; kvplan can only
 * estimate them, so every figure here is labelled "estimated" in the output
 * and carries an uncertainty. The constants were calibrated on the training
 * logs (/work/shared/reference/engine-logs-train.json); tests/check_deploy.c
 * replays those logs and held-out ones. */
#include "profile.h"

#define GiB 1073741824ull
#define MiB 1048576ull

/* Sampler copies of the fp32 logits in the profiling run: the logits and
 * the probabilities (softmax) alive together. */
#define LOGIT_COPIES 2
/* CUDA context, cuBLAS workspaces and allocator slack outside torch (vLLM's
 * "non_torch_memory"): the plain `vllm serve` V0 logs show 0.25, 0.35 and
 * 1.79 GiB (median 0.35; Unsloth's in-process runs 0.01..0.09), the V1 logs
 * imply ~0.9 GiB; NCCL buffers add about 0.25 GiB per rank at tp > 1. */
#define NON_TORCH_V0 (GiB * 35 / 100)
#define NON_TORCH_V1 (896 * MiB)
#define NCCL (256 * MiB)
/* llama.cpp and SGLang: the CUDA context that the measured free memory
 * already lacks (SGLang takes its fraction of the free memory at start). */
#define CUDA_CONTEXT (384 * MiB)

/* Activation bytes per token of the forward pass on one tensor-parallel rank,
 * at `bytes` per element: the MLP's gate+up output and its activation (3 x
 * the active intermediate width; MoE: top-k experts plus shared ones), and
 * the q, k, v projections. The residual stream is reused in place. */
static uint64_t token_bytes(const struct kvp_model *m, uint32_t tp, uint64_t bytes)
{
    uint64_t inter = m->n_experts ? (uint64_t)m->n_experts_active * m->expert_intermediate +
                                        (uint64_t)m->n_shared_experts * m->shared_intermediate
                                  : m->intermediate, qkv = 0;
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        uint64_t w = (uint64_t)s->n_heads * s->head_dim_k + (uint64_t)s->n_kv_heads * (s->head_dim_k + s->head_dim_v);
        qkv = w > qkv ? w : qkv;
    }
    return kvp_cdiv((3 * inter + qkv) * bytes, tp);
}

static bool large_gpu(const struct kvp_deploy *d)
{
    return d->gpu_memory >= 70 * GiB; /* vLLM arg_utils: defaults grow on cards of 70 GiB and more */
}

/* vLLM's profiling batch: max_num_batched_tokens, whose default is the
 * release's (V0 without chunked prefill: max(max_model_len, 2048); V1
 * online serving: 8192 on large GPUs, else 2048). */
uint64_t kvp_profile_batched_tokens(const struct kvp_deploy *d)
{
    if (d->max_batched_tokens)
        return d->max_batched_tokens;
    if (d->engine == KVP_ENGINE_VLLM && (kvp_deploy_release(d)->rules & KVP_REL_VLLM_V0))
        return d->context > 2048 ? d->context : 2048;
    if (d->engine == KVP_ENGINE_TRTLLM)
        return 8192; /* max_num_tokens default */
    return large_gpu(d) ? 8192 : 2048;
}

static uint64_t max_seqs(const struct kvp_deploy *d)
{
    if (d->max_num_seqs)
        return d->max_num_seqs;
    if (d->engine == KVP_ENGINE_VLLM && !(kvp_deploy_release(d)->rules & KVP_REL_VLLM_V0))
        return large_gpu(d) ? 1024 : 256;
    return 256;
}

/* llama.cpp's compute buffer for one micro-batch in f32: the output logits,
 * the KQ matrix over all cells when flash attention is off, and the layer's
 * intermediates. */
static void llamacpp_compute(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_reserve *r)
{
    uint64_t ub = d->n_ubatch < d->n_batch ? d->n_ubatch : d->n_batch, heads = 0, kq = 0;
    /* attention sees one stream's cells: -c, split over -np unless unified */
    uint64_t cells = d->kv_unified || d->n_seq <= 1 ? d->context : kvp_cdiv(d->context, d->n_seq);
    for (uint32_t i = 0; i < m->n_specs; i++)
        heads = m->specs[i].n_heads > heads ? m->specs[i].n_heads : heads;
    if (d->flash_attn == 0)
        kq = kvp_sat_mul(kvp_sat_mul(cells, heads), 4);
    r->profile_tokens = ub;
    r->profile_seqs = ub;
    r->per_token = kvp_sat_add(token_bytes(m, 1, 4), kq);
    r->logits = kvp_sat_mul((uint64_t)m->vocab * 4, ub);
    r->activation = kvp_sat_add(kvp_sat_mul(r->per_token, ub), r->logits);
}

void kvp_reserve_estimate(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_reserve *r)
{
    const struct kvp_release *rel = kvp_deploy_release(d);
    bool v0 = rel->rules & KVP_REL_VLLM_V0;
    uint64_t act = 0, nt = 0, dt = kvp_dtype_info(m->dtype)->block_bits / 8;
    bool given_act, given_nt;

    *r = (struct kvp_reserve){0};
    switch (d->engine) {
    case KVP_ENGINE_VLLM:
    case KVP_ENGINE_TRTLLM:
        r->profile_tokens = kvp_profile_batched_tokens(d);
        r->profile_seqs = max_seqs(d);
        if (r->profile_seqs > r->profile_tokens)
            r->profile_seqs = r->profile_tokens;
        r->per_token = token_bytes(m, d->tp, dt ? dt : 2);
        /* the fp32 logits of every sampled sequence over the whole vocabulary:
         * the vocab-parallel logits are gathered before sampling */
        r->logits = kvp_sat_mul(kvp_sat_mul(r->profile_seqs, m->vocab), 4 * LOGIT_COPIES);
        act = kvp_sat_add(kvp_sat_mul(r->per_token, r->profile_tokens), r->logits);
        nt = (v0 || d->engine == KVP_ENGINE_TRTLLM ? NON_TORCH_V0 : NON_TORCH_V1) + (d->tp > 1 ? NCCL : 0);
        break;
    case KVP_ENGINE_SGLANG: /* activations and graphs live in 1 - mem_fraction_static */
        nt = CUDA_CONTEXT + (d->tp * d->pp > 1 ? NCCL : 0);
        break;
    case KVP_ENGINE_LLAMACPP:
        llamacpp_compute(m, d, r);
        act = r->activation;
        nt = CUDA_CONTEXT;
        break;
    default: /* ideal and transformers: nothing is reserved */
        break;
    }
    /* given values win; a nonzero value counts as given */
    given_act = d->activation_given || d->activation_memory;
    given_nt = d->non_torch_given || d->non_torch_memory;
    r->activation_est = !given_act && act;
    r->non_torch_est = !given_nt && nt;
    r->activation = given_act ? d->activation_memory : act;
    r->non_torch = given_nt ? d->non_torch_memory : nt;
    r->cuda_graph = d->cuda_graph_memory; /* no release read subtracts graphs by default */
    /* the spread seen on the logs: a quarter of the activations, plus the
     * non-torch range (0.01 .. 1.8 GiB logged) */
    r->uncertainty = (r->activation_est ? r->activation / 4 : 0) + (r->non_torch_est ? GiB / 2 : 0);
}
