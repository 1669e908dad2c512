/* kvp_profile_sglang.c -- SGLang KV-cache sizing, after
 * model_executor/model_runner_kv_cache_mixin.py (profile_max_num_token),
 * server_args.py (mem_fraction_static) and mem_cache/memory_pool.py
 * (docs/engines.md, section sglang). */
#include <math.h>
#include <string.h>

#include "profile.h"

#define GIB 1073741824.0
#define SWA_FULL_TOKENS_RATIO 0.8 /* --swa-full-tokens-ratio default */

/* mem_fraction_static when not given (server_args.py, mid-2025): reserve a
 * few GiB that grow with tp*pp and the card's size, rounded to 3 places. */
static double default_fraction(const struct kvp_deploy *d)
{
    uint64_t gpu_memory = d->gpu_memory;
    uint32_t tp = d->tp, pp = d->pp;
    double mib = (double)gpu_memory / 1048576.0, p = (double)tp * pp, reserved;
    if (kvp_deploy_release(d)->rules & KVP_REL_SGLANG_TP_FRACTION) /* older server_args.py: by tp alone */
        return tp >= 16 ? 0.79 : tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88;
    if (mib < 35 * 1024)
        reserved = (2.8 + p / 10) * 1024;
    else if (mib < 90 * 1024)
        reserved = (9.5 + p / 2) * 1024;
    else if (mib < 160 * 1024)
        reserved = (12 + p / 2) * 1024;
    else
        reserved = 32 * 1024;
    return round((mib - reserved) / mib * 1000.0) / 1000.0;
}

/* model_config.py is_hybrid_swa_model: separate SWA pools only for the
 * architectures SGLang lists; other windowed models (Gemma 2/3, Mistral)
 * are sized as full attention. */
static bool hybrid_swa(const struct kvp_model *m)
{
    static const char *const arches[] = {"gpt_oss", "gpt-oss", "llama4", "llama4_text", "mimo_v2_flash", NULL};
    for (const char *const *a = arches; *a; a++)
        if (strcmp(*a, m->family) == 0)
            return true;
    return false;
}

enum kvp_status kvp_profile_sglang(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                               struct kvp_error *err)
{
    static const enum kvp_dtype ok[] = {KVP_DTYPE_F32, KVP_DTYPE_F16, KVP_DTYPE_BF16, KVP_DTYPE_FP8_E4M3,
                                        KVP_DTYPE_FP8_E5M2};
    uint64_t want = d->concurrency ? d->concurrency : 1, deficit = 0, cell = 0, tokens = UINT64_MAX;
    uint32_t page = d->block_size ? d->block_size : 1, n_swa = 0, n_full = 0, window = 0;
    double avail_gib, rest_gib;
    enum kvp_status st;

    if ((st = kvp_profile_formats(d, ok, 5, err)) != KVP_OK || (st = kvp_profile_weights(m, d, &f->weights_bytes, err)))
        return st;
    f->util = d->util ? d->util : default_fraction(d);
    f->block_size = page;
    for (uint32_t s = 0; s < d->pp; s++) {
        uint32_t first, count;
        struct prank r;
        uint64_t c = 0;
        kvp_profile_stage_range(m->n_layers, d->pp, s, &first, &count);
        if ((st = kvp_profile_rank(m, d, first, count, &r, err)) != KVP_OK)
            return st;
        for (uint32_t i = 0; i < r.n; i++) {
            const struct rspec *rs = &r.spec[i];
            if (rs->s->kind == KVP_LAYER_RECURRENT)
                return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the sglang profile does not model recurrent (Mamba/linear-attention) layers yet");
            c += (rs->k_row + rs->v_row) * rs->layers; /* the cell: one token in every layer */
            if (s == 0 && (rs->s->kind == KVP_LAYER_SLIDING || rs->s->kind == KVP_LAYER_CHUNKED)) {
                n_swa += rs->layers;
                window = rs->s->window > window ? rs->s->window : window;
            } else if (s == 0 && rs->k_row + rs->v_row) {
                n_full += rs->layers;
            }
        }
        cell = c > cell ? c : cell;
    }
    if (cell == 0)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the model has no KV cache for sglang to size");
    f->kv_bytes_per_token_per_gpu = cell;
    /* rest = free after weights - total * (1 - mem_fraction_static), in GiB as floats */
    if (d->kv_memory) {
        rest_gib = (double)d->kv_memory / GIB;
    } else {
        avail_gib = (double)kvp_profile_sub(d->gpu_memory, kvp_sat_add(f->weights_bytes, d->non_torch_memory), &deficit) / GIB;
        rest_gib = avail_gib - (double)d->gpu_memory / GIB * (1.0 - f->util);
    }
    if (rest_gib > 0)
        tokens = (uint64_t)(rest_gib * GIB) / cell / page * page;
    else
        tokens = 0, deficit += (uint64_t)(-rest_gib * GIB);
    f->kv_budget_bytes = rest_gib > 0 ? (uint64_t)(rest_gib * GIB) : 0;
    f->kv_tokens = tokens;
    f->num_blocks = tokens / page;
    f->kv_pool_bytes = (tokens + page) * cell; /* slot 0 is padding: size + page_size slots */
    if (n_swa && n_full && hybrid_swa(m)) {
        /* hybrid SWA pools: full and sliding layers share the budget */
        uint64_t total = tokens * (n_swa + n_full);
        uint64_t full = (uint64_t)((double)total / (SWA_FULL_TOKENS_RATIO * n_swa + n_full)) / page * page;
        uint64_t swa = (uint64_t)((double)full * SWA_FULL_TOKENS_RATIO) / page * page;
        uint64_t need_swa = d->context < window ? d->context : window;
        double cf = (double)full / (double)d->context, cs = (double)swa / (double)need_swa;
        f->kv_tokens = full;
        f->max_concurrency = floor(cf < cs ? cf : cs);
        f->max_context = swa / want >= window ? full / want : 0;
    } else {
        f->max_concurrency = floor((double)tokens / (double)d->context);
        f->max_context = tokens / want;
    }
    if (f->max_context > m->max_context && f->max_context > d->context)
        f->max_context = m->max_context > d->context ? m->max_context : d->context;
    if (!kvp_mul(d->context, cell, &f->request_bytes) || !kvp_mul(f->request_bytes, want, &f->kv_bytes_required))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "%llu requests overflow 64 bits", (unsigned long long)want);
    kvp_profile_finish(f, f->max_concurrency >= (double)want, deficit);
    return KVP_OK;
}
