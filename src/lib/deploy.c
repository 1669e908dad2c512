/* deploy.c -- engine profiles: the table, defaults, dispatch, and what the
 * profiles share (per-rank view of the model, budgets, searches). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "profile.h"

#define VLLM_DEFAULT "0.11.0"
#define SGLANG_DEFAULT "0.5.2"
#define TRTLLM_DEFAULT "1.0.0"
#define LLAMACPP_DEFAULT "npm-3.22.1"
#define HF_DEFAULT "4.56"

static const struct kvp_engine_info engines[KVP_ENGINE_COUNT] = {
    [KVP_ENGINE_IDEAL] = {"ideal", "-", "the bare formula: no paging, no padding", 1, 1.0},
    [KVP_ENGINE_VLLM] = {"vllm", VLLM_DEFAULT, "paged blocks of 16, equal-page groups, total x util - non-KV", 16, 0.90},
    [KVP_ENGINE_SGLANG] = {"sglang", SGLANG_DEFAULT, "token pool of size + page slots, total x mem_fraction_static reserve", 1, 0.0},
    [KVP_ENGINE_TRTLLM] = {"trtllm", TRTLLM_DEFAULT, "blocks of 32 tokens, 0.9 of free memory", 32, 0.90},
    [KVP_ENGINE_LLAMACPP] = {"llamacpp", LLAMACPP_DEFAULT, "cells padded to 256, streams, SWA n_swa + n_ubatch, ggml blocks", 1, 1.0},
    [KVP_ENGINE_HF_DYNAMIC] = {"hf-dynamic", HF_DEFAULT, "DynamicCache: grows by torch.cat, one layer's copy transient", 1, 1.0},
    [KVP_ENGINE_HF_STATIC] = {"hf-static", HF_DEFAULT, "StaticCache: preallocated to max_cache_len", 1, 1.0},
    [KVP_ENGINE_HF_QUANTIZED] = {"hf-quantized", HF_DEFAULT, "QuantizedCache: nbits, q_group_size 64, residual 128", 1, 1.0},
};

/* The releases, the default (newest read) of each engine first; docs/engines.md
 * has the table release -> rule -> source file and function. */
static const struct kvp_release releases[] = {
    {KVP_ENGINE_IDEAL, "-", "include/kvplan/engine.h: the bare formula", 1.0, 0},
    {KVP_ENGINE_VLLM, VLLM_DEFAULT, "v1/worker/gpu_worker.py, v1/core/kv_cache_utils.py, config/cache.py @c1d86421", 0.90, 0},
    {KVP_ENGINE_VLLM, "0.21.0", "v1/worker/gpu_worker.py determine_available_memory: CUDA-graph estimate subtracted "
     "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default on since v0.21.0)", 0.90, KVP_REL_VLLM_CUDA_GRAPHS},
    {KVP_ENGINE_VLLM, "0.7.3", "V0 worker/worker.py determine_num_available_blocks, engine/arg_utils.py @0012cf69",
     0.90, KVP_REL_VLLM_V0},
    {KVP_ENGINE_SGLANG, SGLANG_DEFAULT, "model_runner_kv_cache_mixin.py @226149ac, server_args.py (reserve by GPU memory)",
     0.0, 0},
    {KVP_ENGINE_SGLANG, "0.4.6", "model_runner.py, server_args.py (mem_fraction_static by tp)", 0.0,
     KVP_REL_SGLANG_TP_FRACTION},
    {KVP_ENGINE_TRTLLM, TRTLLM_DEFAULT, "kvCacheManager.cpp, llmapi/llm_args.py, _torch/pyexecutor/_util.py", 0.90, 0},
    {KVP_ENGINE_LLAMACPP, LLAMACPP_DEFAULT, "the build @node-llama-cpp 3.22.1 ships (after PR #19067, 2026-01-24)", 1.0, 0},
    {KVP_ENGINE_LLAMACPP, "b6182", "llama-kv-cache-unified.cpp get_padding, llama-kv-cache-unified-iswa.cpp (2025-08)", 1.0,
     KVP_REL_LLAMACPP_PAD_FA | KVP_REL_LLAMACPP_MLA_V},
    {KVP_ENGINE_HF_DYNAMIC, HF_DEFAULT, "src/transformers/cache_utils.py DynamicCache", 1.0, 0},
    {KVP_ENGINE_HF_STATIC, HF_DEFAULT, "src/transformers/cache_utils.py StaticCache", 1.0, 0},
    {KVP_ENGINE_HF_QUANTIZED, HF_DEFAULT, "src/transformers/cache_utils.py QuantizedCache", 1.0, 0},
};

#define N_RELEASES (sizeof releases / sizeof releases[0])

const struct kvp_engine_info *kvp_engine_info(enum kvp_engine_id e)
{
    return &engines[e];
}

bool kvp_engine_from_name(const char *s, enum kvp_engine_id *out)
{
    for (int i = 0; i < KVP_ENGINE_COUNT; i++)
        if (strcasecmp(s, engines[i].name) == 0) {
            *out = (enum kvp_engine_id)i;
            return true;
        }
    if (strcasecmp(s, "llama.cpp") == 0 || strcasecmp(s, "tensorrt-llm") == 0) {
        *out = s[0] == 'l' || s[0] == 'L' ? KVP_ENGINE_LLAMACPP : KVP_ENGINE_TRTLLM;
        return true;
    }
    return false;
}

const struct kvp_release *kvp_releases(uint32_t *n)
{
    *n = (uint32_t)N_RELEASES;
    return releases;
}

const struct kvp_release *kvp_deploy_release(const struct kvp_deploy *d)
{
    if (d->release < N_RELEASES && releases[d->release].engine == d->engine)
        return &releases[d->release];
    for (uint32_t i = 0; i < N_RELEASES; i++)
        if (releases[i].engine == d->engine)
            return &releases[i];
    return &releases[0];
}

enum kvp_status kvp_engine_parse(const char *s, enum kvp_engine_id *engine, uint32_t *release, struct kvp_error *err)
{
    char name[64], known[256] = "";
    const char *at = strchr(s, '@');
    size_t n = at ? (size_t)(at - s) : strlen(s);

    if (n >= sizeof name)
        return kvp_fail(err, KVP_ERR_USAGE, "unknown engine '%s'", s);
    memcpy(name, s, n);
    name[n] = '\0';
    if (!kvp_engine_from_name(name, engine))
        return kvp_fail(err, KVP_ERR_USAGE, "unknown engine '%s' (vllm, sglang, trtllm, llamacpp, hf-dynamic, "
                        "hf-static, hf-quantized, ideal)", name);
    *release = UINT32_MAX;
    if (!at)
        return KVP_OK;
    for (uint32_t i = 0; i < N_RELEASES; i++) {
        if (releases[i].engine != *engine)
            continue;
        if (strcmp(releases[i].version, at + 1) == 0) {
            *release = i;
            return KVP_OK;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", known[0] ? ", " : "",
                 releases[i].version);
    }
    return kvp_fail(err, KVP_ERR_USAGE, "%s: unknown release '%s' (known: %s)", engines[*engine].name, at + 1, known);
}

void kvp_deploy_init(struct kvp_deploy *d, enum kvp_engine_id e, const struct kvp_model *m)
{
    memset(d, 0, sizeof *d);
    d->engine = e;
    d->release = UINT32_MAX;
    d->n_gpus = d->tp = d->pp = 1;
    d->k = d->v = kvp_format_plain(m->dtype);
    memset(&d->w, 0, sizeof d->w); /* as the checkpoint stores them */
    if (e == KVP_ENGINE_LLAMACPP)
        d->k = d->v = kvp_format_plain(KVP_DTYPE_F16); /* llama.cpp's default cache type */
    d->context = m->max_context;
    d->n_ubatch = 512;
    d->n_batch = 2048;
    d->n_seq = 1;
    d->flash_attn = -1;
}

/* ---- shared by the profiles ---- */

void kvp_profile_stage_range(uint32_t n_layers, uint32_t pp, uint32_t stage, uint32_t *first, uint32_t *count)
{
    uint32_t base = n_layers / pp, rem = n_layers % pp, start = 0;
    for (uint32_t s = 0; s <= stage; s++) {
        /* stages pp-1-rem .. pp-2 take one extra layer */
        uint32_t n = base + (rem && s >= pp - 1 - rem && s < pp - 1 ? 1 : 0);
        if (s == stage) {
            *first = start;
            *count = n;
        }
        start += n;
    }
}

enum kvp_status kvp_profile_rank(const struct kvp_model *m, const struct kvp_deploy *d, uint32_t first,
                             uint32_t count, struct prank *r, struct kvp_error *err)
{
    uint32_t idx[KVP_MAX_SPECS];
    enum kvp_status st;

    memset(r, 0, sizeof *r);
    r->m = m;
    r->d = d;
    for (uint32_t i = 0; i < KVP_MAX_SPECS; i++)
        idx[i] = UINT32_MAX;
    for (uint32_t l = first; l < first + count; l++) {
        uint32_t s = m->layer_spec[l];
        if (idx[s] == UINT32_MAX) {
            idx[s] = r->n++;
            r->spec[idx[s]].s = &m->specs[s];
        }
        r->spec[idx[s]].layers++;
        r->layers++;
    }
    for (uint32_t i = 0; i < r->n; i++) {
        struct rspec *rs = &r->spec[i];
        const struct kvp_layer_spec *s = rs->s;
        uint64_t row;
        switch (s->kind) {
        case KVP_LAYER_FULL: case KVP_LAYER_SLIDING: case KVP_LAYER_CHUNKED:
            rs->kv_heads = s->n_kv_heads / d->tp ? s->n_kv_heads / d->tp : 1;
            if ((st = kvp_format_row_bytes(&d->k, s->head_dim_k, &row, err)) != KVP_OK)
                return st;
            rs->k_row = row * rs->kv_heads;
            if ((st = kvp_format_row_bytes(&d->v, s->head_dim_v, &row, err)) != KVP_OK)
                return st;
            rs->v_row = row * rs->kv_heads;
            break;
        case KVP_LAYER_MLA:
            rs->kv_heads = 1;
            if ((st = kvp_format_row_bytes(&d->k, (uint64_t)s->kv_lora_rank + s->qk_rope_dim, &rs->k_row, err)))
                return st;
            break;
        case KVP_LAYER_RECURRENT: {
            uint64_t conv, ssm;
            kvp_recurrent_state_elems(&s->rec, &conv, &ssm);
            /* engines shard the inner dimension across TP ranks */
            rs->state = kvp_cdiv(conv + ssm, d->tp) * (kvp_dtype_info(m->state_dtype)->block_bits / 8);
            break;
        }
        default:
            break;
        }
    }
    return KVP_OK;
}

enum kvp_status kvp_profile_weights(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t *out,
                                struct kvp_error *err)
{
    struct kvp_weights w;
    enum kvp_status st;
    if (d->weights_memory) {
        *out = d->weights_memory;
        return KVP_OK;
    }
    if ((st = kvp_weights_compute(m, &d->w, &w, err)) != KVP_OK)
        return st;
    *out = kvp_cdiv(w.bytes, (uint64_t)d->tp * d->pp);
    return KVP_OK;
}

enum kvp_status kvp_profile_formats(const struct kvp_deploy *d, const enum kvp_dtype *ok, int n, struct kvp_error *err)
{
    const struct kvp_format *f[2] = {&d->k, &d->v};
    for (int i = 0; i < 2; i++) {
        int j;
        for (j = 0; j < n && ok[j] != f[i]->dtype; j++)
            ;
        if (j == n) {
            char list[160] = "";
            for (j = 0; j < n; j++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "",
                         kvp_dtype_info(ok[j])->name);
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s cannot store a %s cache in %s (it takes %s)",
                            engines[d->engine].name, i ? "V" : "K", kvp_dtype_info(f[i]->dtype)->name, list);
        }
    }
    return KVP_OK;
}

uint64_t kvp_profile_reserve(const struct kvp_deploy *d)
{
    return kvp_sat_add(kvp_sat_add(d->activation_memory, d->non_torch_memory), d->cuda_graph_memory);
}

uint64_t kvp_profile_fraction(uint64_t memory, double fraction)
{
    long double v = (long double)memory * fraction;
    return v <= 0 ? 0 : v >= 18446744073709551615.0L ? UINT64_MAX : (uint64_t)v;
}

uint64_t kvp_profile_sub(uint64_t a, uint64_t b, uint64_t *short_by)
{
    if (b > a) {
        if (short_by)
            *short_by = b - a;
        return 0;
    }
    return a - b;
}

void kvp_profile_finish(struct kvp_fit *f, bool fits, uint64_t deficit)
{
    f->fits = fits && deficit == 0;
    if (f->fits) {
        f->free_bytes = kvp_profile_sub(f->kv_budget_bytes, f->kv_bytes_required, NULL);
        f->short_bytes = 0;
    } else {
        f->short_bytes = deficit + kvp_profile_sub(f->kv_bytes_required, f->kv_budget_bytes, NULL);
    }
}

enum kvp_status kvp_profile_max_context(profile_cost_fn cost, void *ctx, uint64_t n, uint64_t pool, uint64_t limit,
                                    uint64_t *out, struct kvp_error *err)
{
    uint64_t lo = 0, hi = limit;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2, bytes, total;
        enum kvp_status st = cost(ctx, mid, &bytes, err);
        if (st != KVP_OK && st != KVP_ERR_OVERFLOW)
            return st;
        if (st == KVP_OK && kvp_mul(bytes, n, &total) && total <= pool)
            lo = mid;
        else
            hi = mid - 1;
    }
    *out = lo;
    return KVP_OK;
}

/* ---- dispatch ---- */

static enum kvp_status check_deploy(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_error *err)
{
    if (d->tp == 0 || d->pp == 0 || d->n_gpus == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "'tp', 'pp' and the GPU count must be positive");
    if (d->pp > KVP_MAX_STAGES || d->pp > m->n_layers)
        return kvp_fail(err, KVP_ERR_USAGE, "'pp' must be at most %u and at most the layer count %u (got %u)",
                        KVP_MAX_STAGES, m->n_layers, d->pp);
    if ((uint64_t)d->tp * d->pp > d->n_gpus && d->engine != KVP_ENGINE_LLAMACPP)
        return kvp_fail(err, KVP_ERR_USAGE, "tp x pp = %u x %u needs %llu GPUs (got %u)", d->tp, d->pp,
                        (unsigned long long)d->tp * d->pp, d->n_gpus);
    if (!(d->util >= 0.0 && d->util <= 1.0))
        return kvp_fail(err, KVP_ERR_USAGE, "the memory fraction must be 0..1 (got %g)", d->util);
    if (d->gpu_memory == 0 && d->kv_memory == 0 && d->engine != KVP_ENGINE_LLAMACPP && d->engine != KVP_ENGINE_IDEAL &&
        d->engine < KVP_ENGINE_HF_DYNAMIC)
        return kvp_fail(err, KVP_ERR_USAGE, "%s needs the GPU memory (a GPU, or its memory in bytes)",
                        engines[d->engine].name);
    if (d->context == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "the context must be positive");
    return KVP_OK;
}

/* The deployment as the engine's release runs it: its defaults filled in,
 * the reserve estimated where not given, and llama.cpp's --concurrency N
 * turned into N slots of the context (-np N -c N*T). */
static void effective(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f, struct kvp_deploy *e)
{
    *e = *d;
    f->release = kvp_deploy_release(d);
    if (e->util == 0.0 && f->release->util > 0.0 && f->release->util < 1.0)
        e->util = f->release->util;
    e->max_batched_tokens = kvp_profile_batched_tokens(d);
    if (e->engine == KVP_ENGINE_LLAMACPP && e->concurrency > 1 && e->n_seq <= 1) {
        e->n_seq = e->concurrency > UINT32_MAX ? UINT32_MAX : (uint32_t)e->concurrency;
        e->context = kvp_sat_mul(d->context, e->concurrency);
    }
    kvp_reserve_estimate(m, e, &f->reserve);
    e->activation_memory = f->reserve.activation;
    e->non_torch_memory = f->reserve.non_torch;
    e->cuda_graph_memory = f->reserve.cuda_graph;
}

enum kvp_status kvp_fit_compute(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                                struct kvp_error *err)
{
    enum kvp_status st;
    struct kvp_deploy e;
    memset(f, 0, sizeof *f);
    f->engine = d->engine;
    f->n_groups = 1;
    f->n_stream = 1;
    if ((st = check_deploy(m, d, err)) != KVP_OK)
        return st;
    effective(m, d, f, &e);
    switch (d->engine) {
    case KVP_ENGINE_IDEAL: st = kvp_profile_ideal(m, &e, f, err); break;
    case KVP_ENGINE_VLLM: st = kvp_profile_vllm(m, &e, f, err); break;
    case KVP_ENGINE_SGLANG: st = kvp_profile_sglang(m, &e, f, err); break;
    case KVP_ENGINE_TRTLLM: st = kvp_profile_trtllm(m, &e, f, err); break;
    case KVP_ENGINE_LLAMACPP: st = kvp_profile_llamacpp(m, &e, f, err); break;
    default: st = kvp_profile_hf(m, &e, f, err); break;
    }
    /* the host tier holds whole tokens at the same bytes per token as the GPU */
    if (st == KVP_OK && d->cpu_offload && f->kv_bytes_per_token_per_gpu) {
        f->offload_tokens = d->cpu_offload / f->kv_bytes_per_token_per_gpu;
        f->offload_concurrency = f->request_bytes ? (double)(d->cpu_offload / f->request_bytes) : 0.0;
    }
    if (st == KVP_OK && f->refused[0])
        f->fits = false;
    return st;
}

static bool fits_target(const struct kvp_fit *f, const struct kvp_deploy *d)
{
    return f->fits && f->max_concurrency + 1e-9 >= (double)(d->concurrency ? d->concurrency : 1);
}

enum kvp_status kvp_fit_min_gpus(const struct kvp_model *m, const struct kvp_deploy *d, uint32_t max_gpus,
                                 uint32_t *tp_out, struct kvp_error *err)
{
    struct kvp_deploy t = *d;
    struct kvp_fit f;
    *tp_out = 0;
    for (uint32_t tp = 1; tp * d->pp <= max_gpus; tp *= 2) {
        enum kvp_status st;
        t.tp = tp;
        t.n_gpus = tp * d->pp;
        t.weights_memory = d->weights_memory && d->tp ? kvp_cdiv(d->weights_memory * d->tp, tp) : 0;
        st = kvp_fit_compute(m, &t, &f, err);
        if (st != KVP_OK && st != KVP_ERR_OVERFLOW && st != KVP_ERR_USAGE) /* usage: a tp the engine refuses */
            return st;
        if (st == KVP_OK && fits_target(&f, d)) {
            *tp_out = tp;
            break;
        }
    }
    return KVP_OK;
}

enum kvp_status kvp_fit_min_util(const struct kvp_model *m, const struct kvp_deploy *d, double *util_out,
                                 struct kvp_error *err)
{
    struct kvp_deploy t = *d;
    struct kvp_fit f;
    uint32_t lo = 1, hi = 1000; /* thousandths */
    enum kvp_status st;

    *util_out = 0.0;
    t.util = 1.0;
    if ((st = kvp_fit_compute(m, &t, &f, err)) != KVP_OK)
        return st;
    if (!fits_target(&f, d))
        return KVP_OK;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        t.util = mid / 1000.0;
        if ((st = kvp_fit_compute(m, &t, &f, err)) != KVP_OK)
            return st;
        if (fits_target(&f, d))
            hi = mid;
        else
            lo = mid + 1;
    }
    *util_out = lo / 1000.0;
    return KVP_OK;
}

/* ---- roofline ---- */

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
    /* tensor parallelism splits what each step reads; pipeline stages run one after another */
    r->weight_bytes = kvp_cdiv(w.active_bytes, d->tp);
    r->kv_bytes = kvp_cdiv(p.total_bytes, d->tp);
    r->tpot_s = ((double)r->weight_bytes + (double)r->kv_bytes) / bandwidth;
    r->tokens_per_s = (double)batch / r->tpot_s;
    for (uint32_t i = 0; i < m->n_layers; i++)
        attn += attention_flops(kvp_model_layer(m, i), d->context);
    r->prefill_flops = 2.0 * (double)w.active_params * (double)d->context + attn;
    r->ttft_s = r->prefill_flops / (peak_flops * d->tp);
    return KVP_OK;
}
