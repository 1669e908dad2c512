/* roofline.c -- lower bounds on a step's time from the weights and KV it reads
 * and the FLOPs of a prompt (kvp_roofline, deploy.h): bounds, never measurements. */
#include <string.h>

#include "kvplan/deploy.h"
#include "kvplan/num.h"
#include "kvplan/wquant.h"
#include "profile.h"

/* Attention FLOPs of a prompt of T tokens in one layer: QK^T and PV, causal,
 * over the tokens each query sees (all before it, or the window). */
static double attention_flops(const struct kvp_layer_spec *s, uint64_t T)
{
    double seen = 0.0, w = s->window;
    if (s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED)
        seen = T <= s->window ? (double)T * (T + 1) / 2.0 : w * (w + 1) / 2.0 + (double)(T - s->window) * w;
    else if (s->kind == KVP_LAYER_FULL || s->kind == KVP_LAYER_MLA)
        seen = (double)T * (T + 1) / 2.0;
    return 2.0 * s->n_heads * ((double)s->head_dim_k + s->head_dim_v) * seen;
}

/* llama.cpp: what of a step stays in host memory, from where the fit put the tensors (-ngl,
 * --n-cpu-moe, --no-kv-offload). embd: the stored bytes only whose rows a step reads, the token
 * embedding unless tied (then it is the LM head too). Subtracts the host's share from the GPU's. */
static enum kvp_status host_share(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t embd,
                                  uint64_t batch, struct kvp_roofline *r, struct kvp_error *err)
{
    struct kvp_fit f;
    uint64_t kv_all = 0, host_kv, input = 0, idle = 0;
    enum kvp_status st;

    if (d->engine != KVP_ENGINE_LLAMACPP || d->weights_memory)
        return KVP_OK;
    if ((st = kvp_fit_compute(m, d, &f, err)) != KVP_OK)
        return st;
    for (uint32_t i = 0; i < f.n_devices; i++)
        kv_all = kvp_sat_add(kv_all, f.device[i].k_bytes + f.device[i].v_bytes);
    host_kv = f.host.k_bytes + f.host.v_bytes;
    kv_all = kvp_sat_add(kv_all, host_kv);
    /* the token embedding's host copy is only indexed, unless it is the host's LM head too */
    if (f.weights_exact && (!m->tied_embeddings || f.output_on_gpu))
        input = m->wtable.place[KVP_WPLACE_INPUT].host;
    else if (!f.weights_exact) /* the estimate spreads the embeddings over the layers */
        input = (uint64_t)((long double)embd * f.host.model_layers / m->n_layers);
    input = input < f.host.weights_bytes ? input : f.host.weights_bytes;
    if (m->n_experts > m->n_experts_active)
        idle = (uint64_t)((long double)f.host.expert_bytes * (m->n_experts - m->n_experts_active) / m->n_experts);
    r->stream_bytes = f.host.weights_bytes - input;
    r->host_weight_bytes = r->stream_bytes - (idle < r->stream_bytes ? idle : r->stream_bytes);
    r->host_kv_bytes = kv_all ? (uint64_t)((long double)r->kv_bytes * host_kv / kv_all) : 0;
    r->weight_bytes -= r->host_weight_bytes < r->weight_bytes ? r->host_weight_bytes : r->weight_bytes;
    r->kv_bytes -= r->host_kv_bytes;
    r->streamed = batch >= KVP_OFFLOAD_MIN_BATCH && d->host_link && !d->unified_memory;
    return KVP_OK;
}

enum kvp_status kvp_roofline(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t batch,
                             double bandwidth, double peak_flops, struct kvp_roofline *r, struct kvp_error *err)
{
    struct kvp_weights w;
    struct kvp_kv_query q = {.context = d->context, .batch = batch, .k = d->k, .v = d->v};
    struct kvp_kv_plan p;
    enum kvp_status st;
    double attn = 0.0;
    uint64_t embd, ub, ubatches;

    memset(r, 0, sizeof *r);
    if (!(bandwidth > 0) || !(peak_flops > 0))
        return kvp_fail(err, KVP_ERR_USAGE, "the roofline needs the GPU's bandwidth and peak FLOP/s");
    if ((st = kvp_weights_compute(m, &d->w, &w, err)) != KVP_OK || (st = kvp_kv_compute(m, &q, &p, err)) != KVP_OK)
        return st;
    /* a step reads rows of the token (and position) embeddings, the whole matrix only as a tied LM head */
    embd = m->tied_embeddings ? 0 : w.class_bytes[KVP_WC_EMBED];
    r->weight_bytes = w.active_bytes - (embd < w.active_bytes ? embd : w.active_bytes);
    r->kv_bytes = p.total_bytes;
    if ((st = host_share(m, d, embd, batch, r, err)) != KVP_OK)
        return st;
    /* tensor parallelism splits what each step reads; pipeline stages run one after another. Data-parallel
     * ranks share the batch (SGLang's DP attention inside tp: its tp GPUs); vLLM's MoE ranks share the
     * experts too (over dp x tp: a lower bound, the rest of the weights is per rank) */
    r->weight_bytes = kvp_cdiv(r->weight_bytes,
                               (uint64_t)d->tp * (d->engine == KVP_ENGINE_VLLM && m->n_experts && d->dp ? d->dp : 1));
    r->kv_bytes = kvp_cdiv(r->kv_bytes, (uint64_t)d->tp * (d->dp_attention || !d->dp ? 1 : d->dp));
    /* the host's share: the CPU reads its weights and KV, or (32 tokens or more) ggml copies the
     * weights to the GPU; the two run one after the other within a step */
    r->host_bandwidth = d->host_bandwidth ? d->host_bandwidth * 1e9
                        : d->unified_memory ? bandwidth : KVP_HOST_BANDWIDTH_ASSUMED * 1e9;
    r->host_bandwidth_assumed = !d->host_bandwidth && !d->unified_memory;
    r->host_s = (double)r->host_kv_bytes / r->host_bandwidth +
                (r->streamed ? (double)r->stream_bytes / (double)d->host_link
                             : (double)r->host_weight_bytes / r->host_bandwidth);
    r->tpot_s = ((double)r->weight_bytes + (double)r->kv_bytes) / bandwidth + r->host_s;
    r->tokens_per_s = (double)batch / r->tpot_s;
    for (uint32_t i = 0; i < m->n_layers; i++)
        attn += attention_flops(kvp_model_layer(m, i), d->context);
    r->prefill_flops = 2.0 * (double)w.active_params * (double)d->context + attn;
    r->ttft_s = r->prefill_compute_s = r->prefill_flops / (peak_flops * d->tp);
    /* llama.cpp prefills in micro-batches of min(n_ubatch, n_batch, context) tokens */
    if (r->stream_bytes && d->host_link && !d->unified_memory) {
        ub = kvp_profile_llamacpp_ubatch(d);
        ub = ub < d->context ? ub : d->context;
        r->ubatch = ub;
        ubatches = ub ? d->context / ub + (ub && d->context % ub >= KVP_OFFLOAD_MIN_BATCH) : 0;
        r->prefill_stream_s = (double)ubatches * (double)r->stream_bytes / (double)d->host_link;
        r->ttft_s = r->ttft_s > r->prefill_stream_s ? r->ttft_s : r->prefill_stream_s;
    }
    return KVP_OK;
}
