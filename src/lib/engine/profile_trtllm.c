/* profile_trtllm.c -- TensorRT-LLM KV-cache sizing, after
 * batch_manager/kvCacheManager.cpp, llmapi/llm_args.py (KvCacheConfig) and
 * _torch/pyexecutor/_util.py (docs/engines.md, section trtllm): the budget
 * (total - peak of the profiling run + its temporary KV cache) * fraction,
 * max_tokens = budget // bytes per token, ceil(max_tokens / 32) blocks in one
 * pool for every attention layer. */
#include <math.h>

#include "profile.h"

enum kvp_status kvp_profile_trtllm(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                               struct kvp_error *err)
{
    static const enum kvp_dtype ok[] = {KVP_DTYPE_F32, KVP_DTYPE_F16, KVP_DTYPE_BF16, KVP_DTYPE_FP8_E4M3,
                                        KVP_DTYPE_NVFP4};
    uint32_t tpb = d->block_size ? d->block_size : 32;
    uint64_t want = d->concurrency ? d->concurrency : 1, deficit = 0, avail, need, pool_tokens, need_tokens, pt;
    struct prank r = {0};
    enum kvp_status st;

    if ((st = kvp_profile_formats(d, ok, 5, err)) != KVP_OK || (st = kvp_profile_weights(m, d, &f->weights_bytes, err)))
        return st;
    f->block_size = tpb;
    f->util = d->util; /* deploy.c effective(): as given, else the release's default */
    /* the busiest pipeline stage */
    for (uint32_t s = 0; s < d->pp; s++) {
        uint32_t first, count;
        struct prank t;
        kvp_profile_stage_range(m->n_layers, d->pp, s, &first, &count);
        if ((st = kvp_profile_rank(m, d, first, count, &t, err)) != KVP_OK ||
            (st = kvp_profile_token_bytes(&t, &pt, err)) != KVP_OK)
            return st;
        if (s == 0 || pt > f->kv_bytes_per_token_per_gpu) {
            r = t;
            f->kv_bytes_per_token_per_gpu = pt;
        }
    }
    for (uint32_t i = 0; i < r.n; i++)
        if (r.spec[i].s->kind == KVP_LAYER_RECURRENT)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the trtllm profile does not model recurrent layers yet");
    pt = f->kv_bytes_per_token_per_gpu;
    if (pt == 0)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the model has no KV cache for trtllm to size");
    /* free memory after weights and activations, times free_gpu_memory_fraction */
    if (d->kv_memory)
        avail = d->kv_memory;
    else
        avail = kvp_profile_fraction(
            kvp_profile_sub(d->gpu_memory, kvp_sat_add(f->weights_bytes, kvp_profile_reserve(d)), &deficit), f->util);
    f->kv_budget_bytes = avail;
    /* one pool, every layer at max_seq_len: without kv_cache_config.max_attention_window
     * sliding-window layers are sized like the others (the window list is the user's) */
    f->kv_tokens = avail / pt;
    f->num_blocks = kvp_cdiv(f->kv_tokens, tpb);
    need = kvp_cdiv(d->context, tpb);
    if (!kvp_mul(f->num_blocks, tpb, &pool_tokens) || !kvp_profile_mul_add(&f->kv_pool_bytes, pool_tokens, pt))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "a pool of %llu blocks overflows 64 bits",
                        (unsigned long long)f->num_blocks);
    if (!kvp_mul(need, tpb, &need_tokens) || !kvp_profile_mul_add(&f->request_bytes, need_tokens, pt))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "a request of %llu tokens overflows 64 bits",
                        (unsigned long long)d->context);
    f->max_concurrency = floor((double)f->num_blocks / (double)need);
    /* the longest request when `want` of them share the pool */
    f->max_context = kvp_sat_mul(f->num_blocks / want, tpb);
    if (!kvp_mul(f->request_bytes, want, &f->kv_bytes_required))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "%llu requests overflow 64 bits", (unsigned long long)want);
    return kvp_profile_finish(f, f->max_concurrency >= (double)want, deficit, err);
}
