/* roofline.c -- lower bounds on a step's time from the weights and KV it reads
 * and the FLOPs of a prompt (kvp_roofline, deploy.h): bounds, never measurements. */
#include <string.h>

#include "kvplan/deploy.h"
#include "kvplan/num.h"

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

enum kvp_status kvp_roofline(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t batch,
                             double bandwidth, double peak_flops, struct kvp_roofline *r, struct kvp_error *err)
{
    struct kvp_weights w;
    struct kvp_kv_query q = {.context = d->context, .batch = batch, .k = d->k, .v = d->v};
    struct kvp_kv_plan p;
    enum kvp_status st;
    double attn = 0.0;

    memset(r, 0, sizeof *r);
    if (!(bandwidth > 0) || !(peak_flops > 0))
        return kvp_fail(err, KVP_ERR_USAGE, "the roofline needs the GPU's bandwidth and peak FLOP/s");
    if ((st = kvp_weights_compute(m, &d->w, &w, err)) != KVP_OK || (st = kvp_kv_compute(m, &q, &p, err)) != KVP_OK)
        return st;
    /* tensor parallelism splits what each step reads; pipeline stages run one after another. Data-parallel
     * ranks share the batch (SGLang's DP attention inside tp: its tp GPUs); vLLM's MoE ranks share the
     * experts too (over dp x tp: a lower bound, the rest of the weights is per rank) */
    r->weight_bytes = kvp_cdiv(w.active_bytes, (uint64_t)d->tp *
                                                   (d->engine == KVP_ENGINE_VLLM && m->n_experts && d->dp ? d->dp : 1));
    r->kv_bytes = kvp_cdiv(p.total_bytes, (uint64_t)d->tp * (d->dp_attention || !d->dp ? 1 : d->dp));
    r->tpot_s = ((double)r->weight_bytes + (double)r->kv_bytes) / bandwidth;
    r->tokens_per_s = (double)batch / r->tpot_s;
    for (uint32_t i = 0; i < m->n_layers; i++)
        attn += attention_flops(kvp_model_layer(m, i), d->context);
    r->prefill_flops = 2.0 * (double)w.active_params * (double)d->context + attn;
    r->ttft_s = r->prefill_flops / (peak_flops * d->tp);
    return KVP_OK;
}
