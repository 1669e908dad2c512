/* profile_sglang.c -- SGLang KV-cache sizing, after
 * model_executor/model_runner_kv_cache_mixin.py (profile_max_num_token,
 * handle_max_mamba_cache, init_memory_pool), server_args.py
 * (mem_fraction_static, the Mamba defaults), configs/mamba_utils.py
 * (mamba_cache_per_req) and mem_cache/memory_pool.py (docs/engines.md,
 * section sglang). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "profile.h"

#define GIB 1073741824.0
#define SWA_FULL_TOKENS_RATIO 0.8 /* --swa-full-tokens-ratio default */
#define MAMBA_FULL_MEMORY_RATIO 0.9 /* --mamba-full-memory-ratio default: Mamba state / full KV memory */
#define MAMBA_SLOTS_PER_REQUEST 3 /* MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (radix cache on) */
#define MAMBA_CONV_BYTES 2        /* SGLANG_MAMBA_CONV_DTYPE default bfloat16 */
#define MAMBA_SSM_BYTES 4         /* --mamba-ssm-dtype default float32 */

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
    if (d->dp_attention) /* server_args.py ServerArgs.__post_init__: "reserved_mem += 4 * 1024" under DP attention */
        reserved += 4 * 1024;
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

/* mamba_cache_per_req (configs/mamba_utils.py): the conv state (bf16) and
 * the ssm state (fp32) of every recurrent layer of the model, both sharded
 * over tp. *layers gets the recurrent layer count (0: not a hybrid). */
static enum kvp_status mamba_state(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t *conv_bytes,
                                   uint64_t *ssm_bytes, uint32_t *layers, struct kvp_error *err)
{
    *conv_bytes = *ssm_bytes = 0;
    *layers = 0;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, l);
        uint64_t conv, ssm;
        if (s->kind != KVP_LAYER_RECURRENT)
            continue;
        kvp_recurrent_state_elems(&s->rec, &conv, &ssm);
        if (!kvp_profile_mul_add(conv_bytes, kvp_cdiv(conv, d->tp), MAMBA_CONV_BYTES) ||
            !kvp_profile_mul_add(ssm_bytes, kvp_cdiv(ssm, d->tp), MAMBA_SSM_BYTES))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "the Mamba state of one request overflows 64 bits");
        (*layers)++;
    }
    return KVP_OK;
}

/* The token pools of the busiest stage: per-token K and V bytes of its full
 * (MLA, full attention) and sliding layers, and their layer counts. */
struct sg_cells {
    uint64_t k[2], v[2]; /* [0] full, [1] sliding */
    uint32_t layers[2];
    uint32_t window;
};

static enum kvp_status stage_cells(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t *cell,
                                   struct sg_cells *out, struct kvp_error *err)
{
    enum kvp_status st;
    *cell = 0;
    memset(out, 0, sizeof *out);
    for (uint32_t s = 0; s < d->pp; s++) {
        uint32_t first, count;
        struct prank r;
        struct sg_cells c = {0};
        uint64_t bytes;
        kvp_profile_stage_range(m->n_layers, d->pp, s, &first, &count);
        if ((st = kvp_profile_rank(m, d, first, count, &r, err)) != KVP_OK ||
            (st = kvp_profile_token_bytes(&r, &bytes, err)) != KVP_OK)
            return st;
        for (uint32_t i = 0; i < r.n; i++) {
            const struct rspec *rs = &r.spec[i];
            int w = rs->s->kind == KVP_LAYER_SLIDING || rs->s->kind == KVP_LAYER_CHUNKED;
            if (rs->k_row + rs->v_row == 0)
                continue; /* recurrent and shared-KV layers have no token cells */
            /* no overflow: parts of the stage's bytes per token, summed checked above */
            (void)kvp_profile_mul_add(&c.k[w], rs->k_row, rs->layers);
            (void)kvp_profile_mul_add(&c.v[w], rs->v_row, rs->layers);
            c.layers[w] += rs->layers;
            if (w && rs->s->window > c.window)
                c.window = rs->s->window;
        }
        if (bytes > *cell) {
            *cell = bytes;
            *out = c;
        }
    }
    return KVP_OK;
}

/* The pool's K and V tensors: (tokens + page) slots of each layer. */
static enum kvp_status pool_sizes(struct kvp_cache_sum *c, uint64_t slots, uint64_t k, uint64_t v, uint32_t layers,
                                  struct kvp_error *err)
{
    c->layers = layers;
    if (!kvp_mul(slots, k, &c->k_bytes) || !kvp_mul(slots, v, &c->v_bytes))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "a pool of %llu tokens overflows 64 bits", (unsigned long long)slots);
    return KVP_OK;
}

/* max_running_requests when not given (init_memory_pool): from the token
 * pool, capped by the Mamba slots a running request needs. */
static uint64_t max_running(const struct kvp_deploy *d, uint64_t tokens, uint64_t mamba_slots, bool mamba)
{
    uint64_t n = d->max_num_seqs;
    if (!n) {
        double base = (double)tokens / (double)d->context * 512.0;
        n = base > 4096.0 ? 4096 : base < 2048.0 ? 2048 : (uint64_t)base;
    }
    if (mamba && mamba_slots / MAMBA_SLOTS_PER_REQUEST < n)
        n = mamba_slots / MAMBA_SLOTS_PER_REQUEST;
    return n;
}

enum kvp_status kvp_profile_sglang(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                               struct kvp_error *err)
{
    static const enum kvp_dtype ok[] = {KVP_DTYPE_F32, KVP_DTYPE_F16, KVP_DTYPE_BF16, KVP_DTYPE_FP8_E4M3,
                                        KVP_DTYPE_FP8_E5M2};
    uint64_t want = d->concurrency ? d->concurrency : 1, deficit = 0, cell, tokens, conv = 0, ssm = 0, per_req;
    uint32_t page = d->block_size ? d->block_size : 1, n_mamba;
    struct sg_cells c;
    struct kvp_deploy attn = *d; /* the attention's split: tp / dp under DP attention (heads and states per GPU) */
    double start_gib, avail_gib, rest_gib, conc;
    enum kvp_status st;

    if (d->dp_attention)
        attn.tp = d->tp / d->dp; /* dp divides tp (check_deploy); the MLA latent is one head either way */
    if ((st = kvp_profile_formats(d, ok, 5, err)) != KVP_OK ||
        (st = kvp_profile_weights(m, d, &f->weights_bytes, err)) ||
        (st = mamba_state(m, &attn, &conv, &ssm, &n_mamba, err)) || (st = stage_cells(m, &attn, &cell, &c, err)))
        return st;
    f->util = d->util ? d->util : default_fraction(d);
    f->block_size = page;
    if (n_mamba && (kvp_deploy_release(d)->rules & KVP_REL_SGLANG_NO_MAMBA)) {
        /* models/registry.py _raise_for_unsupported: the release has no Mamba/linear-attention hybrid */
        snprintf(f->refused, sizeof f->refused,
                 "Model architectures ['%s'] are not supported for now. Supported "
                 "architectures: (sglang %s's list, which has no Mamba or linear-attention hybrid)",
                 kvp_profile_architecture(m), kvp_deploy_release(d)->version);
        return KVP_OK;
    }
    if (cell == 0)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the model has no KV cache for sglang to size");
    f->kv_bytes_per_token_per_gpu = cell;
    /* profile_max_num_token: rest = free after weights - total * (1 - mem_fraction_static), in GiB as
     * floats, where "total" is what ModelRunner.__init__ measured free after init_torch_distributed
     * (min_per_gpu_memory): the card less the CUDA context and NCCL, not the card. */
    if (d->kv_memory) {
        rest_gib = (double)d->kv_memory / GIB;
    } else {
        start_gib = (double)kvp_profile_sub(d->gpu_memory, d->non_torch_memory, NULL) / GIB;
        avail_gib =
            (double)kvp_profile_sub(d->gpu_memory, kvp_sat_add(f->weights_bytes, d->non_torch_memory), &deficit) / GIB;
        rest_gib = avail_gib - start_gib * (1.0 - f->util);
    }
    per_req = conv + ssm;
    if (n_mamba && rest_gib > 0) {
        /* handle_max_mamba_cache: mamba / full KV memory = mamba_full_memory_ratio */
        double mamba_gib = rest_gib * MAMBA_FULL_MEMORY_RATIO / (1.0 + MAMBA_FULL_MEMORY_RATIO);
        f->state_slots = (uint64_t)floor(mamba_gib * GIB / (double)per_req);
        rest_gib -= (double)f->state_slots * (double)per_req / GIB;
        f->state_bytes_per_req = per_req;
        /* MambaPool: size + 1 states per layer (slot 0 is padding) */
        if (!kvp_mul(f->state_slots + 1, conv, &f->state_conv_bytes) ||
            !kvp_mul(f->state_slots + 1, ssm, &f->state_ssm_bytes))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "a Mamba pool of %llu slots overflows 64 bits",
                            (unsigned long long)f->state_slots);
    }
    if (rest_gib > 0)
        tokens = (uint64_t)(rest_gib * GIB) / cell / page * page;
    else
        tokens = 0, deficit += (uint64_t)(-rest_gib * GIB);
    f->kv_budget_bytes = rest_gib > 0 ? (uint64_t)(rest_gib * GIB) : 0;
    f->kv_tokens = tokens;
    f->num_blocks = tokens / page;
    if (!kvp_mul(tokens + page, cell, &f->kv_pool_bytes)) /* slot 0 is padding: size + page_size slots */
        return kvp_fail(err, KVP_ERR_OVERFLOW, "a pool of %llu tokens overflows 64 bits", (unsigned long long)tokens);
    f->max_running = max_running(d, tokens, f->state_slots, n_mamba > 0);
    if (c.layers[1] && c.layers[0] && hybrid_swa(m)) {
        /* hybrid SWA pools: full and sliding layers share the budget */
        uint64_t total = kvp_sat_mul(tokens, c.layers[0] + c.layers[1]); /* <= budget: a cell has >= 1 B a layer */
        uint64_t full = (uint64_t)((double)total / (SWA_FULL_TOKENS_RATIO * c.layers[1] + c.layers[0])) / page * page;
        uint64_t swa = (uint64_t)((double)full * SWA_FULL_TOKENS_RATIO) / page * page;
        uint64_t need_swa = d->context < c.window ? d->context : c.window;
        double cf = (double)full / (double)d->context, cs = (double)swa / (double)need_swa;
        f->kv_tokens = f->cells = full;
        f->swa_cells = swa;
        conc = floor(cf < cs ? cf : cs);
        f->max_context = swa / want >= c.window ? full / want : 0;
        if ((st = pool_sizes(&f->cache[0], full + page, c.k[0], c.v[0], c.layers[0], err)) ||
            (st = pool_sizes(&f->cache[1], swa + page, c.k[1], c.v[1], c.layers[1], err)))
            return st;
    } else {
        conc = floor((double)tokens / (double)d->context);
        f->max_context = tokens / want;
        f->cells = tokens;
        if ((st = pool_sizes(&f->cache[0], tokens + page, c.k[0] + c.k[1], c.v[0] + c.v[1], c.layers[0] + c.layers[1],
                             err)))
            return st;
    }
    /* the scheduler runs at most max_running_requests at once */
    f->max_concurrency = conc < (double)f->max_running ? conc : (double)f->max_running;
    if (want > f->max_running)
        f->max_context = 0;
    if (f->max_context > m->max_context && f->max_context > d->context)
        f->max_context = m->max_context > d->context ? m->max_context : d->context;
    if (!kvp_mul(d->context, cell, &f->request_bytes) || !kvp_mul(f->request_bytes, want, &f->kv_bytes_required))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "%llu requests overflow 64 bits", (unsigned long long)want);
    if (f->kv_tokens == 0) /* model_runner.py init_memory_pool, both releases */
        snprintf(f->refused, sizeof f->refused, "Not enough memory. Please try to increase --mem-fraction-static.");
    return kvp_profile_finish(f, f->max_concurrency >= (double)want, deficit, err);
}
