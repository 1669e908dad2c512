/* profile.c -- the engine and release tables, and what every engine profile
 * shares (profile.h): the per-rank view of a model, pipeline stages, budgets,
 * the longest-context search. deploy.c dispatches to the profiles; neither
 * this file nor the profiles call back into it. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "profile.h"

#define VLLM_DEFAULT "0.21.0"
#define SGLANG_DEFAULT "0.5.2"
#define TRTLLM_DEFAULT "1.0.0"
#define LLAMACPP_DEFAULT "npm-3.22.1"
#define HF_DEFAULT "4.56"

/* The default memory fractions, each named once: vLLM's --gpu-memory-utilization
 * (config/cache.py gpu_memory_utilization: 0.9 until PR #38284, 0.92 from 0.21.0)
 * and TRT-LLM's free_gpu_memory_fraction (llmapi/llm_args.py KvCacheConfig);
 * SGLang's comes from a rule (profile_sglang.c). */
#define VLLM_UTIL 0.90
#define VLLM_UTIL_0_21 0.92
#define TRTLLM_FREE_FRACTION 0.90

static const struct kvp_engine_info engines[KVP_ENGINE_COUNT] = {
    [KVP_ENGINE_IDEAL] = {"ideal", "-", "the bare formula: no paging, no padding", 1},
    [KVP_ENGINE_VLLM] = {"vllm", VLLM_DEFAULT, "paged blocks of 16, equal-page groups, total x util - non-KV", 16},
    [KVP_ENGINE_SGLANG] = {"sglang", SGLANG_DEFAULT,
                           "token pool of size + page slots, total x mem_fraction_static reserve", 1},
    [KVP_ENGINE_TRTLLM] = {"trtllm", TRTLLM_DEFAULT, "blocks of 32 tokens, 0.9 of free memory", 32},
    [KVP_ENGINE_LLAMACPP] = {"llamacpp", LLAMACPP_DEFAULT,
                             "cells padded to 256, streams, SWA n_swa + n_ubatch, ggml blocks", 1},
    [KVP_ENGINE_HF_DYNAMIC] = {"hf-dynamic", HF_DEFAULT, "DynamicCache: grows by torch.cat, one layer's copy transient",
                               1},
    [KVP_ENGINE_HF_STATIC] = {"hf-static", HF_DEFAULT, "StaticCache: preallocated to max_cache_len", 1},
    [KVP_ENGINE_HF_QUANTIZED] = {"hf-quantized", HF_DEFAULT, "QuantizedCache: nbits, q_group_size 64, residual 128", 1},
};

/* The releases, the default (newest read) of each engine first; docs/engines.md
 * has the table release -> rule -> source file and function. */
static const struct kvp_release releases[] = {
    {KVP_ENGINE_IDEAL, "-", "-", "include/kvplan/kv.h: the bare formula", 1.0, 0},
    {KVP_ENGINE_VLLM, VLLM_DEFAULT, "2026-05",
     "config/cache.py gpu_memory_utilization 0.92, envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on, "
     "v1/worker/gpu_worker.py determine_available_memory (PR #38284 @96a85c57, read in local-inference-lab/vllm)",
     VLLM_UTIL_0_21, KVP_REL_VLLM_CUDA_GRAPHS},
    {KVP_ENGINE_VLLM, "0.11.0", "2025-10",
     "v1/worker/gpu_worker.py, v1/core/kv_cache_utils.py, config/cache.py @c1d86421", VLLM_UTIL, 0},
    {KVP_ENGINE_VLLM, "0.7.3", "-", "V0 worker/worker.py determine_num_available_blocks, engine/arg_utils.py @0012cf69",
     VLLM_UTIL, KVP_REL_VLLM_V0},
    {KVP_ENGINE_SGLANG, SGLANG_DEFAULT, "-",
     "model_runner_kv_cache_mixin.py @226149ac (Mamba pool by ratio), server_args.py "
     "(reserve by GPU memory)",
     0.0, 0},
    {KVP_ENGINE_SGLANG, "0.4.6", "-", "model_runner.py, server_args.py (mem_fraction_static by tp), no Mamba hybrids",
     0.0, KVP_REL_SGLANG_TP_FRACTION | KVP_REL_SGLANG_NO_MAMBA},
    {KVP_ENGINE_TRTLLM, TRTLLM_DEFAULT, "-", "kvCacheManager.cpp, llmapi/llm_args.py, _torch/pyexecutor/_util.py",
     TRTLLM_FREE_FRACTION, 0},
    {KVP_ENGINE_LLAMACPP, LLAMACPP_DEFAULT, "-",
     "the build @node-llama-cpp 3.22.1 ships (after PR #19067, 2026-01-24)", 1.0, 0},
    {KVP_ENGINE_LLAMACPP, "ollama-0.32.15", "2026-08",
     "Ollama v0.32.15 (tag 2026-08-19) running llama-server b10488: llm/llama_server.go startLlamaServer, "
     "server/routes.go Serve (num_ctx by VRAM), server/sched.go automaticGenerationBatch",
     1.0, KVP_REL_OLLAMA},
    {KVP_ENGINE_LLAMACPP, "b6182", "2025-08",
     "llama-kv-cache-unified.cpp get_padding, llama-kv-cache-unified-iswa.cpp (2025-08)", 1.0,
     KVP_REL_LLAMACPP_PAD_FA | KVP_REL_LLAMACPP_MLA_V},
    {KVP_ENGINE_LLAMACPP, "b4862", "2025-03",
     "builds b2459 .. b4862 (2024-03 .. 2025-03): src/llama.cpp llm_build_context "
     "(build_llama, build_gptneox, llm_build_kv, llm_build_kqv), before llama-graph.cpp (PR #12181)",
     1.0, KVP_REL_LLAMACPP_PAD_FA | KVP_REL_LLAMACPP_MLA_V | KVP_REL_LLAMACPP_KQV_GRAPH},
    {KVP_ENGINE_HF_DYNAMIC, HF_DEFAULT, "-", "src/transformers/cache_utils.py DynamicCache", 1.0, 0},
    {KVP_ENGINE_HF_STATIC, HF_DEFAULT, "-", "src/transformers/cache_utils.py StaticCache", 1.0, 0},
    {KVP_ENGINE_HF_QUANTIZED, HF_DEFAULT, "-", "src/transformers/cache_utils.py QuantizedCache", 1.0, 0},
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
    if (strcasecmp(s, "llama.cpp") == 0 || strcasecmp(s, "ollama") == 0 || strcasecmp(s, "tensorrt-llm") == 0) {
        *out = strcasecmp(s, "tensorrt-llm") != 0 ? KVP_ENGINE_LLAMACPP : KVP_ENGINE_TRTLLM;
        return true;
    }
    return false;
}

const struct kvp_release *kvp_releases(uint32_t *n)
{
    *n = (uint32_t)N_RELEASES;
    return releases;
}

void kvp_release_names(enum kvp_engine_id e, const struct kvp_release *r, const char **engine, const char **version)
{
    bool ollama = e == KVP_ENGINE_LLAMACPP && strncmp(r->version, "ollama-", 7) == 0;
    *engine = ollama ? "ollama" : kvp_engine_info(e)->name;
    *version = r->version + (ollama ? 7 : 0);
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
    bool ollama;
    size_t n = at ? (size_t)(at - s) : strlen(s);

    if (n >= sizeof name)
        return kvp_fail(err, KVP_ERR_USAGE, "unknown engine '%s'", s);
    memcpy(name, s, n);
    name[n] = '\0';
    if (!kvp_engine_from_name(name, engine))
        return kvp_fail(err, KVP_ERR_USAGE, "unknown engine '%s' (vllm, sglang, trtllm, llamacpp, ollama, "
                        "hf-dynamic, hf-static, hf-quantized, ideal)", name);
    *release = UINT32_MAX;
    ollama = strcasecmp(name, "ollama") == 0;
    if (!at && !ollama)
        return KVP_OK;
    for (uint32_t i = 0; i < N_RELEASES; i++) {
        if (releases[i].engine != *engine || (ollama && !(releases[i].rules & KVP_REL_OLLAMA)))
            continue;
        if (!at || strcmp(releases[i].version + (ollama ? 7 : 0), at + 1) == 0) { /* "ollama-" */
            *release = i;
            return KVP_OK;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", known[0] ? ", " : "",
                 releases[i].version + (ollama ? 7 : 0));
    }
    return kvp_fail(err, KVP_ERR_USAGE, "%s: unknown release '%s' (known: %s)",
                    ollama ? "ollama" : engines[*engine].name, at + 1, known);
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
            if (!kvp_mul(row, rs->kv_heads, &rs->k_row))
                return kvp_fail(err, KVP_ERR_OVERFLOW, "a K row of %u heads overflows 64 bits", rs->kv_heads);
            if ((st = kvp_format_row_bytes(&d->v, s->head_dim_v, &row, err)) != KVP_OK)
                return st;
            if (!kvp_mul(row, rs->kv_heads, &rs->v_row))
                return kvp_fail(err, KVP_ERR_OVERFLOW, "a V row of %u heads overflows 64 bits", rs->kv_heads);
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
            if (!kvp_add(conv, ssm, &rs->state) ||
                !kvp_mul(kvp_cdiv(rs->state, d->tp), kvp_dtype_info(m->state_dtype)->block_bits / 8, &rs->state))
                return kvp_fail(err, KVP_ERR_OVERFLOW, "a recurrent state overflows 64 bits");
            break;
        }
        default:
            break;
        }
    }
    return KVP_OK;
}

const char *kvp_profile_architecture(const struct kvp_model *m)
{
    static const char *const names[][2] = {
        {"qwen3_next", "Qwen3NextForCausalLM"}, {"jamba", "JambaForCausalLM"},
        {"nemotron_h", "NemotronHForCausalLM"}, {"falcon_h1", "FalconH1ForCausalLM"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i][0], m->family) == 0)
            return names[i][1];
    return m->family;
}

bool kvp_profile_mul_add(uint64_t *acc, uint64_t a, uint64_t b)
{
    uint64_t p;
    return kvp_mul(a, b, &p) && kvp_add(*acc, p, acc);
}

enum kvp_status kvp_profile_token_bytes(const struct prank *r, uint64_t *out, struct kvp_error *err)
{
    *out = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        uint64_t row;
        if (!kvp_add(r->spec[i].k_row, r->spec[i].v_row, &row) || !kvp_profile_mul_add(out, row, r->spec[i].layers))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "the KV bytes of one token overflow 64 bits");
    }
    return KVP_OK;
}

uint64_t kvp_deploy_ep(const struct kvp_deploy *d)
{
    if (!d->expert_parallel)
        return 0;
    return d->engine == KVP_ENGINE_VLLM ? (uint64_t)(d->dp ? d->dp : 1) * d->tp : d->tp;
}

uint64_t kvp_deploy_experts_per_gpu(const struct kvp_model *m, const struct kvp_deploy *d)
{
    uint64_t ep = kvp_deploy_ep(d);
    return ep && m->n_experts ? kvp_cdiv((uint64_t)m->n_experts + d->redundant_experts, ep) : 0;
}

const char *kvp_deploy_ep_text(const struct kvp_model *m, const struct kvp_deploy *d, char *buf, size_t n)
{
    uint64_t local = kvp_deploy_experts_per_gpu(m, d);
    if (n)
        buf[0] = '\0';
    if (local && n)
        snprintf(buf, n, "EP %llu (%llu of %u + %u redundant routed experts a GPU), ",
                 (unsigned long long)kvp_deploy_ep(d), (unsigned long long)local, m->n_experts, d->redundant_experts);
    return buf;
}

/* How many GPUs share weight class c under data parallelism
 * (docs/engines.md, "Data parallelism"): vLLM splits the routed experts
 * over dp x tp, with or without --enable-expert-parallel
 * (model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make:
 * flatten_tp_across_dp_and_pcp), the rest of each DP rank over its tp;
 * SGLang's DP attention splits attention over tp / dp and keeps the token
 * embedding whole (models/deepseek_v2.py: VocabParallelEmbedding(...,
 * enable_tp=not is_dp_attention_enabled())), the rest over tp. */
static uint64_t dp_share(const struct kvp_deploy *d, enum kvp_wclass c)
{
    uint64_t tp = d->tp;
    if (d->engine == KVP_ENGINE_VLLM && c == KVP_WC_EXPERTS)
        tp *= d->dp;
    else if (d->engine == KVP_ENGINE_SGLANG && d->dp_attention && c == KVP_WC_ATTN)
        tp /= d->dp;
    else if (d->engine == KVP_ENGINE_SGLANG && d->dp_attention && c == KVP_WC_EMBED)
        tp = 1;
    return tp * d->pp;
}

enum kvp_status kvp_profile_weights(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t *out,
                                struct kvp_error *err)
{
    struct kvp_weights w;
    uint64_t sum = 0;
    enum kvp_status st;
    if (d->weights_memory) {
        *out = d->weights_memory;
        return KVP_OK;
    }
    if ((st = kvp_weights_compute(m, &d->w, &w, err)) != KVP_OK)
        return st;
    *out = kvp_cdiv(w.bytes, (uint64_t)d->tp * d->pp);
    if ((d->dp <= 1 && !kvp_deploy_ep(d)) || (d->engine != KVP_ENGINE_VLLM && d->engine != KVP_ENGINE_SGLANG))
        return KVP_OK; /* replicas: each holds 1 / (tp x pp) */
    for (uint32_t c = 0; c < KVP_WC_COUNT; c++)
        sum += w.class_bytes[c]; /* the parts of a sum that did not overflow */
    if (sum == 0)
        return KVP_OK;
    *out = 0;
    for (uint32_t c = 0; c < KVP_WC_COUNT; c++) {
        /* a checkpoint's own table: its bytes in the computed classes' proportions (at most w.bytes) */
        uint64_t part = sum == w.bytes ? w.class_bytes[c]
                                       : (uint64_t)((long double)w.class_bytes[c] * (long double)w.bytes / sum);
        uint64_t local = c == KVP_WC_EXPERTS ? kvp_deploy_experts_per_gpu(m, d) : 0, held;
        if (local) { /* whole experts: local of the n_experts each MoE layer stores, the layers over pp */
            if (!kvp_mul(part, local, &held))
                return kvp_fail(err, KVP_ERR_OVERFLOW, "the routed experts per GPU overflow 64 bits");
            held = kvp_cdiv(held / m->n_experts, d->pp);
        } else {
            held = kvp_cdiv(part, dp_share(d, (enum kvp_wclass)c));
        }
        if (!kvp_add(*out, held, out))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "the weights per GPU overflow 64 bits");
    }
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

enum kvp_status kvp_profile_finish(struct kvp_fit *f, bool fits, uint64_t deficit, struct kvp_error *err)
{
    uint64_t kv_short = kvp_profile_sub(f->kv_bytes_required, f->kv_budget_bytes, NULL);
    f->fits = fits && deficit == 0;
    f->short_bytes = 0;
    if (f->fits)
        f->free_bytes = kvp_profile_sub(f->kv_budget_bytes, f->kv_bytes_required, NULL);
    else if (!kvp_add(deficit, kv_short, &f->short_bytes)) /* it wrapped: 18.8 EiB short printed 2.8 */
        return kvp_fail(err, KVP_ERR_OVERFLOW,
                        "the shortfall overflows 64 bits: the memory lacks %llu B and the KV cache %llu B more",
                        (unsigned long long)deficit, (unsigned long long)kv_short);
    return KVP_OK;
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
