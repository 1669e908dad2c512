/* kvp_profile_trtllm.c -- TensorRT-LLM KV-cache sizing, after
 * batch_manager/kvCacheManager.cpp, llmapi/llm_args.py (KvCacheConfig) and
 * _torch/pyexecutor/_util.py (docs/engines.md, section trtllm). */
#include <math.h>
#include <string.h>

#include "profile.h"

/* One attention window's pool (VSWA): layers that see the same window. */
struct pool {
    uint64_t window;    /* tokens; the request length for full attention */
    uint64_t per_token; /* bytes per token of these layers on the rank */
    uint64_t blocks;
};

enum kvp_status kvp_profile_trtllm(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                               struct kvp_error *err)
{
    static const enum kvp_dtype ok[] = {KVP_DTYPE_F32, KVP_DTYPE_F16, KVP_DTYPE_BF16, KVP_DTYPE_FP8_E4M3,
                                        KVP_DTYPE_NVFP4};
    uint32_t tpb = d->block_size ? d->block_size : 32, np = 0;
    uint64_t want = d->concurrency ? d->concurrency : 1, deficit = 0, avail;
    long double weighted = 0; /* sum of window x bytes per token: only a ratio's denominator, may pass 2^64 */
    struct pool pools[KVP_MAX_SPECS];
    struct prank r = {0};
    enum kvp_status st;
    double conc = 1e300;

    if ((st = kvp_profile_formats(d, ok, 5, err)) != KVP_OK || (st = kvp_profile_weights(m, d, &f->weights_bytes, err)))
        return st;
    f->block_size = tpb;
    f->util = d->util ? d->util : kvp_engine_info(KVP_ENGINE_TRTLLM)->util;
    /* the busiest pipeline stage */
    for (uint32_t s = 0; s < d->pp; s++) {
        uint32_t first, count;
        struct prank t;
        uint64_t pt;
        kvp_profile_stage_range(m->n_layers, d->pp, s, &first, &count);
        if ((st = kvp_profile_rank(m, d, first, count, &t, err)) != KVP_OK ||
            (st = kvp_profile_token_bytes(&t, &pt, err)) != KVP_OK)
            return st;
        if (s == 0 || pt > f->kv_bytes_per_token_per_gpu) {
            r = t;
            f->kv_bytes_per_token_per_gpu = pt;
        }
    }
    for (uint32_t i = 0; i < r.n; i++) {
        const struct rspec *rs = &r.spec[i];
        uint64_t w = (rs->s->kind == KVP_LAYER_SLIDING || rs->s->kind == KVP_LAYER_CHUNKED) && rs->s->window < d->context
                         ? rs->s->window : d->context;
        uint32_t j;
        if (rs->s->kind == KVP_LAYER_RECURRENT)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the trtllm profile does not model recurrent layers yet");
        if (rs->k_row + rs->v_row == 0)
            continue;
        for (j = 0; j < np && pools[j].window != w; j++)
            ;
        if (j == np)
            pools[np++] = (struct pool){w, 0, 0};
        /* no overflow: a part of kv_bytes_per_token_per_gpu, which was summed checked */
        (void)kvp_profile_mul_add(&pools[j].per_token, rs->k_row + rs->v_row, rs->layers);
    }
    if (np == 0)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the model has no KV cache for trtllm to size");
    /* free memory after weights and activations, times free_gpu_memory_fraction */
    if (d->kv_memory)
        avail = d->kv_memory;
    else
        avail = kvp_profile_fraction(kvp_profile_sub(d->gpu_memory, kvp_sat_add(f->weights_bytes, kvp_profile_reserve(d)),
                                             &deficit), f->util);
    f->kv_budget_bytes = avail;
    f->kv_tokens = avail / f->kv_bytes_per_token_per_gpu;
    for (uint32_t j = 0; j < np; j++)
        weighted += (long double)pools[j].window * pools[j].per_token;
    /* each window's pool gets a share proportional to window x bytes per token */
    for (uint32_t j = 0; j < np; j++) {
        uint64_t share = np == 1 ? avail : (uint64_t)((long double)avail * pools[j].window * pools[j].per_token / weighted);
        uint64_t need = kvp_cdiv(pools[j].window, tpb), need_tokens, pool_tokens;
        pools[j].blocks = kvp_cdiv(share / pools[j].per_token, tpb);
        f->num_blocks += pools[j].blocks;
        if (!kvp_mul(pools[j].blocks, tpb, &pool_tokens) ||
            !kvp_profile_mul_add(&f->kv_pool_bytes, pool_tokens, pools[j].per_token))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "a pool of %llu blocks overflows 64 bits",
                            (unsigned long long)pools[j].blocks);
        if ((double)pools[j].blocks / (double)need < conc)
            conc = (double)pools[j].blocks / (double)need;
        if (!kvp_mul(need, tpb, &need_tokens) || !kvp_profile_mul_add(&f->request_bytes, need_tokens, pools[j].per_token))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "a request of %llu tokens overflows 64 bits",
                            (unsigned long long)d->context);
    }
    f->max_concurrency = floor(conc);
    /* the longest request when `want` of them share the full-attention pool */
    {
        uint64_t full_blocks = 0, full_pt = 0;
        for (uint32_t j = 0; j < np; j++)
            if (pools[j].window == d->context) {
                full_blocks = pools[j].blocks;
                full_pt = pools[j].per_token;
            }
        f->max_context = full_pt ? kvp_sat_mul(full_blocks / want, tpb) : (np ? m->max_context : 0);
    }
    if (!kvp_mul(f->request_bytes, want, &f->kv_bytes_required))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "%llu requests overflow 64 bits", (unsigned long long)want);
    kvp_profile_finish(f, f->max_concurrency >= (double)want, deficit);
    return KVP_OK;
}
