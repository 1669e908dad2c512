/* profile_simple.c -- the profiles without paging: ideal (the bare formula)
 * and Hugging Face transformers' caches (src/transformers/cache_utils.py):
 * DynamicCache, StaticCache and QuantizedCache. */
#include <string.h>

#include "profile.h"

#define HF_RESIDUAL 128 /* QuantizedCache residual_length default */
#define HF_GROUP 64     /* QuantizedCache q_group_size default */

struct sctx {
    const struct kvp_model *m;
    const struct kvp_deploy *d;
    struct prank r;
    struct kvp_format k, v;
};

/* The window of a layer's cache under the engine's rule (0 = every token). */
static uint64_t window(enum kvp_engine_id e, const struct kvp_layer_spec *s)
{
    if (s->kind != KVP_LAYER_SLIDING && s->kind != KVP_LAYER_CHUNKED)
        return 0;
    if (e == KVP_ENGINE_HF_DYNAMIC) /* DynamicSlidingWindowLayer keeps the last W-1 tokens */
        return s->window - 1;
    return s->window;
}

/* K and V heads and dims one rank caches for a layer. HF runs MLA models
 * with the decompressed cache: n_heads of (nope + rope) and v_head_dim. */
static void cached_shape(const struct sctx *c, const struct rspec *rs, uint64_t *hk, uint64_t *dk, uint64_t *hv,
                         uint64_t *dv)
{
    const struct kvp_layer_spec *s = rs->s;
    *hk = *hv = rs->kv_heads;
    *dk = s->head_dim_k;
    *dv = s->head_dim_v;
    if (s->kind == KVP_LAYER_MLA) {
        if (c->d->engine == KVP_ENGINE_IDEAL) {
            *dk = (uint64_t)s->kv_lora_rank + s->qk_rope_dim;
            *hv = *dv = 0;
        } else {
            *hk = *hv = s->n_heads / c->d->tp ? s->n_heads / c->d->tp : 1;
        }
    }
}

/* Bytes one sequence of T tokens holds on the rank; `peak` adds DynamicCache's
 * transient: torch.cat copies one tensor while the old one is still alive. */
static enum kvp_status seq_bytes(void *ctx, uint64_t T, uint64_t *out, struct kvp_error *err)
{
    const struct sctx *c = ctx;
    uint64_t total = 0, transient = 0;
    enum kvp_status st;

    for (uint32_t i = 0; i < c->r.n; i++) {
        const struct rspec *rs = &c->r.spec[i];
        uint64_t hk, dk, hv, dv, kb = 0, vb = 0, w = window(c->d->engine, rs->s), layer;
        if (rs->s->kind == KVP_LAYER_RECURRENT) {
            if (!kvp_profile_mul_add(&total, rs->state, rs->layers))
                return kvp_fail(err, KVP_ERR_OVERFLOW, "the recurrent state of one sequence overflows 64 bits");
            continue;
        }
        if (rs->k_row + rs->v_row == 0)
            continue;
        cached_shape(c, rs, &hk, &dk, &hv, &dv);
        if ((st = kvp_cache_bytes(&c->k, hk, dk, T, w, &kb, err)) != KVP_OK)
            return st;
        if (hv && (st = kvp_cache_bytes(&c->v, hv, dv, T, w, &vb, err)) != KVP_OK)
            return st;
        if (!kvp_add(kb, vb, &layer) || !kvp_mul(layer, rs->layers, &layer) || !kvp_add(total, layer, &total))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "a sequence of %llu tokens overflows 64 bits",
                            (unsigned long long)T);
        if (c->d->engine == KVP_ENGINE_HF_DYNAMIC && T > 0) {
            uint64_t before_k = 0, before_v = 0;
            kvp_cache_bytes(&c->k, hk, dk, T - 1, w, &before_k, err);
            if (hv)
                kvp_cache_bytes(&c->v, hv, dv, T - 1, w, &before_v, err);
            if (before_k > transient) transient = before_k;
            if (before_v > transient) transient = before_v;
        }
    }
    if (!kvp_add(total, transient, out))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "a sequence of %llu tokens overflows 64 bits", (unsigned long long)T);
    return KVP_OK;
}

/* HF QuantizedCache: nbits int with q_group_size 64 per token, scale and
 * zero point in the compute dtype, and up to residual_length - 1 newest
 * tokens in full precision before the history is re-quantized. */
static struct kvp_format hf_quantized(const struct kvp_format *f, enum kvp_dtype compute)
{
    struct kvp_format q = *f;
    if (!kvp_dtype_info(q.dtype)->grouped) {
        q = kvp_format_plain(KVP_DTYPE_INT4);
        q.group = HF_GROUP;
        q.residual = HF_RESIDUAL;
    }
    q.axis = KVP_AXIS_TOKEN;
    q.scale = compute == KVP_DTYPE_F32 ? KVP_DTYPE_F32 : compute;
    if (q.residual)
        q.residual -= 1; /* the worst step holds R - 1 tokens in the residual */
    return q;
}

static enum kvp_status check_formats(const struct kvp_deploy *d, struct kvp_error *err)
{
    static const enum kvp_dtype plain[] = {KVP_DTYPE_F32, KVP_DTYPE_F16, KVP_DTYPE_BF16, KVP_DTYPE_FP8_E4M3,
                                           KVP_DTYPE_FP8_E5M2};
    static const enum kvp_dtype quant[] = {KVP_DTYPE_INT2, KVP_DTYPE_INT4, KVP_DTYPE_INT8};
    if (d->engine == KVP_ENGINE_IDEAL)
        return KVP_OK;
    if (d->engine == KVP_ENGINE_HF_QUANTIZED)
        return kvp_dtype_info(d->k.dtype)->grouped || kvp_dtype_info(d->v.dtype)->grouped
                   ? kvp_profile_formats(d, quant, 3, err) : KVP_OK;
    return kvp_profile_formats(d, plain, 5, err);
}

/* One engine, all stages: the busiest stage decides. */
static enum kvp_status simple(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                              struct kvp_error *err)
{
    uint64_t want = d->concurrency ? d->concurrency : 1, deficit = 0, budget;
    enum kvp_status st;
    struct sctx c;

    if ((st = check_formats(d, err)) != KVP_OK || (st = kvp_profile_weights(m, d, &f->weights_bytes, err)) != KVP_OK)
        return st;
    f->block_size = 1;
    f->util = d->util ? d->util : 1.0;
    if (d->kv_memory)
        budget = d->kv_memory;
    else
        budget = kvp_profile_sub(kvp_profile_fraction(d->gpu_memory, f->util),
                             kvp_sat_add(f->weights_bytes, kvp_profile_reserve(d)), &deficit);
    f->kv_budget_bytes = budget;
    f->max_context = UINT64_MAX;
    f->max_concurrency = 1e300;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.d = d;
    c.k = d->engine == KVP_ENGINE_HF_QUANTIZED ? hf_quantized(&d->k, m->dtype) : d->k;
    c.v = d->engine == KVP_ENGINE_HF_QUANTIZED ? hf_quantized(&d->v, m->dtype) : d->v;
    for (uint32_t s = 0; s < d->pp; s++) {
        uint32_t first, count;
        uint64_t req, ctx, token;
        kvp_profile_stage_range(m->n_layers, d->pp, s, &first, &count);
        if ((st = kvp_profile_rank(m, d, first, count, &c.r, err)) || (st = seq_bytes(&c, d->context, &req, err)) ||
            (st = kvp_profile_token_bytes(&c.r, &token, err)))
            return st;
        if (token > f->kv_bytes_per_token_per_gpu)
            f->kv_bytes_per_token_per_gpu = token;
        if (req > f->request_bytes)
            f->request_bytes = req;
        if (req && (double)budget / (double)req < f->max_concurrency)
            f->max_concurrency = (double)(budget / req);
        if ((st = kvp_profile_max_context(seq_bytes, &c, want, budget,
                                          d->context > m->max_context ? d->context : m->max_context, &ctx, err)) !=
            KVP_OK)
            return st;
        if (ctx < f->max_context)
            f->max_context = ctx;
    }
    if (f->max_concurrency > 1e299)
        f->max_concurrency = 0;
    f->kv_tokens = f->kv_bytes_per_token_per_gpu ? budget / f->kv_bytes_per_token_per_gpu : 0;
    f->num_blocks = f->kv_tokens;
    if (!kvp_mul(f->request_bytes, want, &f->kv_bytes_required))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "%llu requests overflow 64 bits", (unsigned long long)want);
    f->kv_pool_bytes = d->engine == KVP_ENGINE_HF_STATIC ? f->kv_bytes_required : budget;
    return kvp_profile_finish(f, f->kv_bytes_required <= budget, deficit, err);
}

enum kvp_status kvp_profile_ideal(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                              struct kvp_error *err)
{
    return simple(m, d, f, err);
}

enum kvp_status kvp_profile_hf(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                           struct kvp_error *err)
{
    return simple(m, d, f, err);
}
