/* profile_reserve.c -- the start-up reserve an engine takes before its KV
 * budget, estimated from the model's shapes and the settings when the user
 * has not measured it (docs/engines.md, "The start-up reserve, estimated",
 * gives the derivation and the error on real start-up logs).
 *
 * The engines measure these figures in a profiling run; kvplan can only
 * estimate them, so every figure here is labelled "estimated" in the output
 * and carries an uncertainty. Each constant names where it comes from: the
 * engine's source (what the profiling run allocates), or the training logs
 * it was read from (/work/shared/reference/engine-logs-train.json and the
 * cases tests/check_deploy.c marks as training). The held-out cases there
 * were not used to choose anything. */
#include <string.h>

#include "profile.h"

#define GiB 1073741824ull
#define MiB 1048576ull

/* vLLM V0 (0.7.3): the sampler's fp32 logits and probabilities (softmax)
 * alive together. Chosen on the V0 training logs. */
#define LOGIT_COPIES_V0 2
/* TensorRT-LLM measures its free memory with its CUDA context (and the
 * kernel modules it loads) already taken, so the context is part of its
 * "Memory used outside torch" figure: 550 MiB on an H100 for the context
 * `import tensorrt_llm` created (TensorRT-LLM PR #15985). */
#define TRTLLM_CONTEXT (550 * MiB)
/* The LLM API's CUDA-graph batch sizes stop at 128 (CudaGraphConfig's
 * default: 1, 2, 4, 8, then every 8 up to 128), or at max_batch_size when
 * that is smaller ("cuda_graph_max_batch_size=128" and 11 graphs up to 64 at
 * max_batch_size 64 in the 1.1.0rc3 DGX Spark log of tests/check_deploy.c). */
#define TRTLLM_GRAPH_BATCH 128
/* vLLM V1 (0.11 ... 0.19) samples max_num_seqs dummy requests after the
 * forward pass (gpu_model_runner.py _dummy_sampler_run -> v1/sample/sampler.py):
 * the bf16 logits (2 B), their fp32 copy (4 B), the softmax probabilities
 * (4 B) and the exponential noise q the random sampler divides them by
 * (topk_topp_sampler.py random_sample, 4 B) -- 14 B per sequence and vocab
 * entry. */
#define SAMPLER_BYTES_V1 14
/* Non-torch memory ("non_torch_memory"): V0 `vllm serve` training logs 0.25,
 * 0.35 and 1.79 GiB (median 0.35); V1 0.19.0 at tp 1 (training rows of
 * jgchn/llm-d-planner accuracy/results/v0.19.0) 0.24 .. 0.25 GiB -- the
 * CUDA context is taken before vLLM's baseline snapshot, so it is not in it. */
#define NON_TORCH_V0 (GiB * 35 / 100)
#define NON_TORCH_V1 (256 * MiB)
/* NCCL at tp > 1. PCIe cards (vLLM #13061, 2 x RTX 4090): no measurable
 * increase, 0.25 GiB kept as the margin. NVLink/NVSwitch data-centre parts
 * (>= 70 GiB here) add NCCL's NVLS and vLLM's custom all-reduce buffers:
 * +1.79 GiB on H100 at tp 2 in V0 (vLLM #10511: 3.58 vs 1.79 GiB) and +1.82 in
 * V1 0.19.0 (Llama-3.1-8B tp 2: 2.07 vs 0.25 GiB). */
#define NCCL (256 * MiB)
#define NCCL_NVLINK (1843 * MiB)
/* llama.cpp and SGLang: the CUDA context that the measured free memory
 * already lacks (SGLang takes its fraction of the free memory at start).
 * SGLang H100 tp 1 (docs.sglang.ai send_request log): 78.81 GB free of
 * 79.19 GiB at "Load weight begin". */
#define CUDA_CONTEXT (384 * MiB)
/* vLLM >= 0.21 subtracts the memory of its CUDA graphs. Per captured size,
 * about four [max capture size x hidden] activations stay in the graph pool
 * (plus the fused-MoE workspace of that many tokens): fitted to the
 * "Estimated CUDA graph memory" Llama-3.1-8B prints at tp 1 under 0.19.0
 * (0.84 GiB for 51 sizes up to 512: 16.9 MiB a size; 4 x 512 x 4096 x 2 B =
 * 16 MiB). */
#define GRAPH_HIDDEN_COPIES 4

static bool large_gpu(const struct kvp_deploy *d)
{
    return d->gpu_memory >= 70 * GiB; /* vLLM arg_utils: defaults grow on cards of 70 GiB and more */
}

/* The widest q, k, v projection output per token of any layer. */
static uint64_t qkv_width(const struct kvp_model *m)
{
    uint64_t qkv = 0;
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        uint64_t w = (uint64_t)s->n_heads * s->head_dim_k + (uint64_t)s->n_kv_heads * (s->head_dim_k + s->head_dim_v);
        qkv = w > qkv ? w : qkv;
    }
    return qkv;
}

static bool has_mlp(const struct kvp_model *m, enum kvp_mlp_kind k)
{
    for (uint32_t i = 0; i < m->n_specs; i++)
        if (m->specs[i].mlp == k)
            return true;
    return false;
}

/* vLLM's fused-MoE workspace per token, in elements (fused_moe.py
 * fused_experts_impl): intermediate_cache1/3 share one buffer of top_k x
 * max(N, K) with N = 2 x expert width / tp (gate and up) and K = hidden, and
 * intermediate_cache2 holds top_k x N / 2; the shared experts run as a dense
 * MLP (gate+up output and activation: 3 x width / tp). */
static uint64_t moe_workspace(const struct kvp_model *m, uint32_t tp)
{
    uint64_t n = kvp_cdiv(2ull * m->expert_intermediate, tp);
    if (!has_mlp(m, KVP_MLP_MOE))
        return 0;
    return (uint64_t)m->n_experts_active * ((n > m->hidden ? n : m->hidden) + n / 2) +
           kvp_cdiv(3ull * m->n_shared_experts * m->shared_intermediate, tp);
}

/* Activation bytes per token of the forward pass on one tensor-parallel rank,
 * at `bytes` per element: the widest MLP (dense: gate+up output and its
 * activation, 3 x width; MoE: the fused workspace) and the q, k, v
 * projections. The residual stream is reused in place. */
static uint64_t token_bytes(const struct kvp_model *m, uint32_t tp, uint64_t bytes)
{
    uint64_t dense = has_mlp(m, KVP_MLP_DENSE) ? kvp_cdiv(3ull * m->intermediate, tp) : 0, moe = moe_workspace(m, tp);
    return kvp_sat_mul((dense > moe ? dense : moe) + kvp_cdiv(qkv_width(m), tp), bytes);
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

uint64_t kvp_profile_max_seqs(const struct kvp_deploy *d)
{
    if (d->max_num_seqs)
        return d->max_num_seqs;
    if (d->engine == KVP_ENGINE_VLLM && !(kvp_deploy_release(d)->rules & KVP_REL_VLLM_V0))
        return large_gpu(d) ? 1024 : 256;
    if (d->engine == KVP_ENGINE_TRTLLM)
        return 2048; /* the LLM API's (and trtllm-serve's) max_batch_size */
    return 256;
}

/* vLLM's CUDA-graph capture sizes (config/compilation.py): 1, 2, 4, then
 * every 8 below 256, then every 16 up to max_cudagraph_capture_size =
 * min(2 x max_num_seqs, 512). Returns how many; *largest gets the last. */
static uint32_t capture_sizes(uint64_t seqs, uint64_t *largest)
{
    uint64_t max = seqs * 2 < 512 ? seqs * 2 : 512, s = 1;
    uint32_t n = 0;
    *largest = 0;
    while (s <= max) {
        n++;
        *largest = s;
        s = s < 8 ? (s == 4 ? 8 : s * 2) : s + (s < 256 ? 8 : 16);
    }
    return n;
}

/* The activation peak of vLLM V1's profiling run: the forward pass over the
 * batch, then the sampler over max_num_seqs rows of logits with the batch's
 * hidden states still held. The two do not overlap, so the peak is the
 * larger (V1 0.19.0 training rows: Llama-3.1-8B 1.89 GiB logged, forward
 * 0.75, sampler 1.77). */
static void vllm_v1_activation(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t dt,
                               struct kvp_reserve *r)
{
    uint64_t fwd = kvp_sat_mul(r->per_token, r->profile_tokens);
    uint64_t held = kvp_sat_mul(kvp_sat_mul(r->profile_tokens, m->hidden), dt);
    r->logits = kvp_sat_mul(kvp_sat_mul(r->profile_seqs, m->vocab), SAMPLER_BYTES_V1);
    r->activation = fwd > kvp_sat_add(r->logits, held) ? fwd : kvp_sat_add(r->logits, held);
    if ((kvp_deploy_release(d)->rules & KVP_REL_VLLM_CUDA_GRAPHS) && !d->cuda_graph_memory) {
        uint64_t largest, per = kvp_sat_mul(GRAPH_HIDDEN_COPIES * (uint64_t)m->hidden + moe_workspace(m, d->tp), dt);
        uint32_t n = capture_sizes(kvp_profile_max_seqs(d), &largest);
        r->cuda_graph = kvp_sat_mul(kvp_sat_mul(per, largest), n);
        r->cuda_graph_est = true;
    }
}

/* TensorRT-LLM's profiling run (_torch/pyexecutor/_util.py KvCacheCreator,
 * the same from 0.20 to 1.x): max_num_tokens tokens of dummy context
 * requests, each min(max_num_tokens, max_seq_len - 1) tokens long with one
 * token to generate, run through the executor with the peak statistics reset
 * after the weights (and the small estimation KV cache, added back) are in:
 *   - the forward pass over the batch, as vLLM's (the widest MLP and q, k, v
 *     per token); the attention workspace was grown in the warm-up before
 *     the reset, so it is not in this peak;
 *   - the LM head sees only each request's last token: the logits of one row
 *     a request in the model dtype and an fp32 copy for the sampler (an
 *     assumption: TRT-LLM's LogitsProcessor was not read), with the batch's
 *     hidden states still held; the two phases do not overlap.
 * What TRT-LLM then counts outside torch ("e.g., NCCL and CUDA graphs") is
 * its CUDA context and the generation-only CUDA graphs it captured before
 * the run: one memory pool, as large as the largest graph's -- min(max
 * batch size, 128) sequences of one token, the forward pass and their
 * logits. An estimate from the source, not fitted: docs/engines.md gives its
 * error on the start-ups tests/check_deploy.c replays (trtllm_log_cases). */
static void trtllm_reserve(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t dt, struct kvp_reserve *r,
                           uint64_t *non_torch)
{
    uint64_t len = d->context > 1 ? d->context - 1 : 1, logit_bytes = dt + 4, graph_seqs = kvp_profile_max_seqs(d), fwd,
             held;
    len = len < r->profile_tokens ? len : r->profile_tokens;
    r->profile_seqs = kvp_cdiv(r->profile_tokens, len ? len : 1);
    r->logits = kvp_sat_mul(kvp_sat_mul(r->profile_seqs, m->vocab), logit_bytes);
    fwd = kvp_sat_mul(r->per_token, r->profile_tokens);
    held = kvp_sat_mul(kvp_sat_mul(r->profile_tokens, m->hidden), dt);
    r->activation = fwd > kvp_sat_add(r->logits, held) ? fwd : kvp_sat_add(r->logits, held);
    graph_seqs = graph_seqs < TRTLLM_GRAPH_BATCH ? graph_seqs : TRTLLM_GRAPH_BATCH;
    *non_torch = kvp_sat_add(TRTLLM_CONTEXT, kvp_sat_mul(graph_seqs, kvp_sat_add(r->per_token,
                                                                                 kvp_sat_mul(m->vocab, logit_bytes))));
}

/* llama.cpp's builds before llama-graph.cpp project q, k, v with one fused
 * matrix for these architectures (build_gptneox, build_falcon: wqkv, then a
 * ggml_cont copy of each of q, k and v out of its output). */
static bool fused_qkv(const struct kvp_model *m)
{
    return strcmp(m->family, "gpt_neox") == 0 || strcmp(m->family, "falcon") == 0;
}

/* llama.cpp's compute buffer for one micro-batch (ggml-alloc reuses memory
 * as tensors die, so it is the largest of three phases, each in f32):
 *   - the output: the logits of every token, n_ubatch x vocab, with the
 *     final norm's input and output (2 x hidden);
 *   - attention: without flash attention the KQ matrix over one stream's
 *     cells for every head, with q, k, v (MLA: and the latent q and output),
 *     the head outputs and four hidden-sized tensors around it; the mask
 *     (f32, f16 with flash attention) lives through every layer;
 *   - the MLP: gate, up, the activation and their product, each as wide
 *     as the MLP (MoE: the top-k experts and the shared ones -- not checked:
 *     the oracle's exported shapes are dense), and the hidden state, with the
 *     mask.
 * Measured against the real llama.cpp (npm 3.22.1, CPU; make oracle prints
 * the table): the phases and their sizes were read off Llama-3.1-8B (exact at
 * -c 4096, -ub 512 with and without flash attention), the MLA latents off
 * DeepSeek-V2-Lite at -c 16384, the MLP phase off Mixtral's 14336-wide MLP.
 *
 * The older graph (KVP_REL_LLAMACPP_KQV_GRAPH: llm_build_context in
 * src/llama.cpp) keeps less, read off real CUDA start-ups (tests/check_deploy.c
 * llamacpp_cuda_logs):
 *   - the output: the logits and one hidden row (b2459, Llama-2-7B -c 512:
 *     512 x (32000 + 4096) x 4 B = 70.50 MiB logged);
 *   - attention: KQ, four hidden rows and the mask, not the 2026 graph's
 *     q, k, v: llm_build_kv expands q, k, v, copies k and v into the cache
 *     (llm_build_kv_store) and only then builds KQ, so k and v are dead and
 *     q dies with the KQ product; ggml-alloc places KQ above the layer's
 *     hidden-sized slots. Four is read off the logs, not derived from the
 *     allocator: Llama-2-7B (MHA) and a 32 x 4096 llama with 8 KV heads both
 *     log 164.00 MiB at -c 2048 (128 + 32 + 4), so it does not follow the
 *     K/V width. A fused wqkv output stays beside its q, k, v copies:
 *     qkv_width - hidden more (pythia-2.8b at b4862: 162.00 = 128 + 6 x 5 + 4);
 *   - the MLP: up and gate, the activation and product done in place (ggml-alloc
 *     ggml_op_can_inplace: UNARY, MUL), with the layer input and the norm:
 *     at most 2 x width + 2 x hidden, which the b2459 -c 512 log bounds (the
 *     2026 graph's 4 x 11008 + 4096 floats a token would be 95 MiB, above the
 *     70.50 logged). */
static void llamacpp_compute(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_reserve *r)
{
    /* llama_context: n_batch = min(n_ctx, n_batch), n_ubatch = min(n_batch, n_ubatch) */
    uint64_t ub = d->n_ubatch < d->n_batch ? d->n_ubatch : d->n_batch, heads = 0, latent = 0, attn, mlp, mask;
    uint64_t hidden = m->hidden, rows, width, out_rows;
    bool old = kvp_deploy_release(d)->rules & KVP_REL_LLAMACPP_KQV_GRAPH;
    /* attention sees one stream's cells: -c, split over -np unless unified */
    uint64_t cells = d->kv_unified || d->n_seq <= 1 ? d->context : kvp_cdiv(d->context, d->n_seq);
    uint64_t dense = has_mlp(m, KVP_MLP_DENSE) ? m->intermediate : 0;
    uint64_t moe = has_mlp(m, KVP_MLP_MOE) ? (uint64_t)m->n_experts_active * m->expert_intermediate +
                                                 (uint64_t)m->n_shared_experts * m->shared_intermediate : 0;
    ub = ub < d->context ? ub : d->context;
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        heads = s->n_heads > heads ? s->n_heads : heads;
        /* MLA (deepseek2 graph): q_nope absorbed into the latent and the
         * heads' output in it, n_head x kv_lora_rank each, per token */
        if (s->kind == KVP_LAYER_MLA && 2ull * s->n_heads * s->kv_lora_rank > latent)
            latent = 2ull * s->n_heads * s->kv_lora_rank;
    }
    width = dense > moe ? dense : moe;
    if (old) {
        rows = 4 * hidden + latent + (fused_qkv(m) && qkv_width(m) > hidden ? qkv_width(m) - hidden : 0);
        width = (m->act == KVP_ACT_GATED ? 2 : 1) * width + 2 * hidden;
        out_rows = 1;
    } else {
        rows = qkv_width(m) + latent + 4 * hidden;
        width = 4 * width + hidden;
        out_rows = 2;
    }
    mask = kvp_sat_mul(kvp_sat_mul(ub, cells), d->flash_attn == 0 ? 4 : 2);
    attn = kvp_sat_mul(kvp_sat_mul(ub, rows), 4);
    if (d->flash_attn == 0)
        attn = kvp_sat_add(attn, kvp_sat_mul(kvp_sat_mul(kvp_sat_mul(ub, cells), heads), 4));
    mlp = kvp_sat_mul(kvp_sat_mul(ub, width), 4);
    attn = kvp_sat_add(attn > mlp ? attn : mlp, mask);
    r->profile_tokens = ub;
    r->profile_seqs = ub;
    r->per_token = kvp_cdiv(attn, ub ? ub : 1);
    r->logits = kvp_sat_mul(kvp_sat_mul(ub, m->vocab), 4);
    r->activation = kvp_sat_add(r->logits, kvp_sat_mul(ub, out_rows * hidden * 4));
    r->activation = r->activation > attn ? r->activation : attn;
}

/* How far the budget may be off, either way: every estimated term by its own
 * size, plus UNCERTAINTY_SHARE of the memory. Fit on the training logs of
 * tests/check_deploy.c (14 vLLM and SGLang start-ups; docs/engines.md, "The
 * interval"): the activation and non-torch estimates were off by up to 1.3x
 * their size there (vLLM #10511 on an 80 GB card: +1.71 GiB against 1.35 GiB
 * estimated), the rest of that case being 0.46% of the memory. llama.cpp's
 * compute buffers are its graph's own sizes (make oracle: byte for byte), so
 * only its CUDA context counts there. No term estimated, no interval. */
#define UNCERTAINTY_SHARE 200 /* 1/200 of the memory: 0.5% */
static uint64_t uncertainty(const struct kvp_deploy *d, const struct kvp_reserve *r)
{
    uint64_t u = 0;
    if (r->activation_est && d->engine != KVP_ENGINE_LLAMACPP)
        u = kvp_sat_add(u, r->activation);
    if (r->cuda_graph_est)
        u = kvp_sat_add(u, r->cuda_graph);
    if (r->non_torch_est)
        u = kvp_sat_add(u, r->non_torch);
    return u || r->activation_est ? kvp_sat_add(u, d->gpu_memory / UNCERTAINTY_SHARE) : 0;
}

void kvp_reserve_estimate(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_reserve *r)
{
    const struct kvp_release *rel = kvp_deploy_release(d);
    bool v0 = rel->rules & KVP_REL_VLLM_V0;
    uint64_t act = 0, nt = 0, dt = kvp_dtype_info(m->dtype)->block_bits / 8;
    bool given_act, given_nt;

    *r = (struct kvp_reserve){0};
    dt = dt ? dt : 2;
    switch (d->engine) {
    case KVP_ENGINE_VLLM:
    case KVP_ENGINE_TRTLLM:
        r->profile_tokens = kvp_profile_batched_tokens(d);
        r->profile_seqs = kvp_profile_max_seqs(d);
        if (r->profile_seqs > r->profile_tokens)
            r->profile_seqs = r->profile_tokens;
        r->per_token = token_bytes(m, d->tp, dt);
        if (d->engine == KVP_ENGINE_TRTLLM) {
            trtllm_reserve(m, d, dt, r, &nt);
            act = r->activation;
        } else if (!v0) {
            vllm_v1_activation(m, d, dt, r);
            act = r->activation;
            nt = NON_TORCH_V1;
        } else {
            /* V0: the fp32 logits of every sampled sequence over the whole
             * vocabulary (gathered before sampling) on top of the forward
             * pass */
            r->logits = kvp_sat_mul(kvp_sat_mul(r->profile_seqs, m->vocab), 4 * LOGIT_COPIES_V0);
            act = kvp_sat_add(kvp_sat_mul(r->per_token, r->profile_tokens), r->logits);
            nt = NON_TORCH_V0;
        }
        /* the NVLink figure was measured on vLLM only; TRT-LLM keeps the margin. vLLM's DP ranks of a MoE
         * model share one expert group over dp x tp (fused_moe/config.py): its communicators, as at tp > 1
         * (an estimate: not measured under DP); the ranks of a dense model are independent engines */
        nt += d->tp > 1 || (d->dp > 1 && m->n_experts)
                  ? (d->engine == KVP_ENGINE_VLLM && large_gpu(d) ? NCCL_NVLINK : NCCL) : 0;
        break;
    case KVP_ENGINE_SGLANG: /* activations and graphs live in 1 - mem_fraction_static */
        /* NCCL is taken in init_torch_distributed, before SGLang measures
         * the free memory its fraction applies to: "Init torch distributed
         * ends. mem usage=1.77 .. 2.01 GB" at tp 8 on H200 (sglang PR
         * #11716), 0.13 GB at tp 4 on PCIe L4s with the custom all-reduce
         * off (llms-in-clouds docs/sglang.md) -- vLLM's two figures */
        nt = CUDA_CONTEXT + (d->tp * d->pp > 1 ? (large_gpu(d) ? NCCL_NVLINK : NCCL) : 0);
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
    if (d->cuda_graph_memory) /* given */
        r->cuda_graph = d->cuda_graph_memory;
    r->uncertainty = uncertainty(d, r);
}
