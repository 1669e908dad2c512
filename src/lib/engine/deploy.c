/* deploy.c -- the dispatcher: a deployment's defaults, the deployment as
 * its release runs it, one call into the engine's profile (profile_*.c),
 * the inverse searches. The tables and shared helpers are in profile.c, the
 * roofline in roofline.c. */
#include <string.h>

#include "profile.h"

void kvp_deploy_init(struct kvp_deploy *d, enum kvp_engine_id e, const struct kvp_model *m)
{
    memset(d, 0, sizeof *d);
    d->engine = e;
    d->release = UINT32_MAX;
    d->n_gpus = d->tp = d->pp = d->dp = 1;
    d->k = d->v = kvp_format_plain(m->dtype);
    memset(&d->w, 0, sizeof d->w); /* as the checkpoint stores them */
    if (e == KVP_ENGINE_LLAMACPP)
        d->k = d->v = kvp_format_plain(KVP_DTYPE_F16); /* llama.cpp's default cache type */
    d->context = m->max_context;
    d->n_ubatch = 512;
    d->n_batch = 2048;
    d->n_seq = 1;
    d->flash_attn = -1;
    d->n_gpu_layers = -1;
}

/* ---- dispatch ---- */

uint64_t kvp_deploy_gpus(const struct kvp_deploy *d)
{
    uint64_t dp = d->engine == KVP_ENGINE_SGLANG && d->dp_attention ? 1 : d->dp ? d->dp : 1;
    return dp * d->tp * d->pp;
}

/* Expert parallelism as vLLM and SGLang run it (docs/engines.md, "Expert
 * parallelism"); TRT-LLM's moe_expert_parallel_size and llama.cpp (no such
 * split) are refused. */
static enum kvp_status check_ep(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_error *err)
{
    uint64_t ep = kvp_deploy_ep(d), physical = (uint64_t)m->n_experts + d->redundant_experts;
    if (d->expert_parallel && d->engine != KVP_ENGINE_VLLM && d->engine != KVP_ENGINE_SGLANG)
        return kvp_fail(err, KVP_ERR_USAGE, "expert parallelism is modelled for vLLM and SGLang, not %s (drop "
                        "'expert_parallel')", kvp_engine_info(d->engine)->name);
    if (d->redundant_experts && !d->expert_parallel)
        return kvp_fail(err, KVP_ERR_USAGE, "redundant experts are EPLB's, under expert parallelism (add "
                        "'expert_parallel')");
    if (d->redundant_experts && !m->n_experts)
        return kvp_fail(err, KVP_ERR_USAGE, "redundant experts need routed experts (%s has none)", m->name);
    if (d->redundant_experts && d->engine == KVP_ENGINE_VLLM && physical % ep != 0)
        /* fused_moe/layer.py FusedMoE.__init__: "EPLB currently only supports even distribution of experts
         * across ranks" */
        return kvp_fail(err, KVP_ERR_USAGE, "vLLM's EPLB spreads the experts evenly: %u + %u redundant must be a "
                        "multiple of EP = dp x tp = %llu", m->n_experts, d->redundant_experts,
                        (unsigned long long)ep);
    if (d->expert_parallel && d->engine == KVP_ENGINE_SGLANG && m->n_experts && physical % ep != 0)
        /* layers/moe/fused_moe_triton/layer.py FusedMoE.__init__: assert num_experts % moe_ep_size == 0 */
        return kvp_fail(err, KVP_ERR_USAGE, "SGLang splits the experts evenly: %u + %u redundant must be a multiple "
                        "of the EP size tp = %u", m->n_experts, d->redundant_experts, d->tp);
    return KVP_OK;
}

/* Data parallelism as the engine runs it (docs/engines.md, "Data
 * parallelism"): vLLM (--data-parallel-size) and SGLang (--dp-size, with or
 * without --enable-dp-attention) run dp ranks; the reference and the
 * Transformers caches are sized as dp replicas of one; llama.cpp and TRT-LLM
 * are refused (not read: llama.cpp has no such flag, TRT-LLM's attention DP
 * is not modelled). */
static enum kvp_status check_dp(const struct kvp_deploy *d, struct kvp_error *err)
{
    if (d->dp == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "'dp' must be positive");
    if (d->dp_attention && d->engine != KVP_ENGINE_SGLANG)
        return kvp_fail(err, KVP_ERR_USAGE, "'dp_attention' is SGLang's --enable-dp-attention (the engine is %s)",
                        kvp_engine_info(d->engine)->name);
    if (d->dp_attention && (d->dp < 2 || d->tp % d->dp != 0))
        /* server_args.py ServerArgs.__post_init__ (data parallelism attention): dp_size > 1, tp_size % dp_size == 0 */
        return kvp_fail(err, KVP_ERR_USAGE,
                        "SGLang's DP attention needs 1 < dp <= tp with dp dividing tp (got dp %u, tp %u)", d->dp,
                        d->tp);
    if (d->dp > 1 && (d->engine == KVP_ENGINE_LLAMACPP || d->engine == KVP_ENGINE_TRTLLM))
        return kvp_fail(err, KVP_ERR_USAGE, "data parallelism is not modelled for %s: size one replica (drop 'dp')",
                        kvp_engine_info(d->engine)->name);
    return KVP_OK;
}

/* LoRA slots: vLLM's, on the attention and dense MLP projections it wraps (profile_vllm.c lora_stacks). */
static enum kvp_status check_lora(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_error *err)
{
    if (!d->max_loras)
        return KVP_OK;
    if (d->engine != KVP_ENGINE_VLLM)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "LoRA slots (max_loras) are modelled for vLLM only, not %s",
                        kvp_engine_info(d->engine)->name);
    for (uint32_t i = 0; i < m->n_layers; i++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, i);
        if (s->mlp == KVP_MLP_MOE || s->kind == KVP_LAYER_MLA || s->kind == KVP_LAYER_RECURRENT)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "vLLM's LoRA of %s layers is not modelled (layer %u of '%s'; "
                            "attention and dense MLP layers are)",
                            s->mlp == KVP_MLP_MOE ? "MoE" : s->kind == KVP_LAYER_MLA ? "MLA" : "recurrent", i, m->name);
    }
    return KVP_OK;
}

static enum kvp_status check_deploy(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_error *err)
{
    uint64_t used = kvp_deploy_gpus(d);
    enum kvp_status st;
    if (d->tp == 0 || d->pp == 0 || d->n_gpus == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "'tp', 'pp' and the GPU count must be positive");
    if ((st = check_dp(d, err)) != KVP_OK || (st = check_ep(m, d, err)) != KVP_OK ||
        (st = check_lora(m, d, err)) != KVP_OK)
        return st;
    if (d->pp > KVP_MAX_STAGES || d->pp > m->n_layers)
        return kvp_fail(err, KVP_ERR_USAGE, "'pp' must be at most %u and at most the layer count %u (got %u)",
                        KVP_MAX_STAGES, m->n_layers, d->pp);
    if (used != d->n_gpus && d->dp > 1 && d->dp_attention)
        return kvp_fail(err, KVP_ERR_USAGE, "DP attention runs inside tp: tp x pp = %u x %u uses %llu GPUs (got %u)",
                        d->tp, d->pp, (unsigned long long)used, d->n_gpus);
    if (used != d->n_gpus && d->dp > 1)
        return kvp_fail(err, KVP_ERR_USAGE, "dp x tp x pp = %u x %u x %u uses %llu GPUs (got %u)", d->dp, d->tp, d->pp,
                        (unsigned long long)used, d->n_gpus);
    if (used > d->n_gpus && d->engine != KVP_ENGINE_LLAMACPP)
        return kvp_fail(err, KVP_ERR_USAGE, "tp x pp = %u x %u needs %llu GPUs (got %u)", d->tp, d->pp,
                        (unsigned long long)used, d->n_gpus);
    if (used < d->n_gpus && d->engine != KVP_ENGINE_LLAMACPP)
        return kvp_fail(err, KVP_ERR_USAGE,
                        "%u GPUs, but tp x pp = %u x %u uses %llu of them: set 'tp' (or 'pp') so that tp x pp = %u to "
                        "split the model over them, or 'dp' for data-parallel ranks of tp x pp each",
                        d->n_gpus, d->tp, d->pp, (unsigned long long)used, d->n_gpus);
    if (!(d->util >= 0.0 && d->util <= 1.0))
        return kvp_fail(err, KVP_ERR_USAGE, "the memory fraction must be 0..1 (got %g)", d->util);
    if (d->gpu_memory == 0 && d->kv_memory == 0 && d->engine != KVP_ENGINE_LLAMACPP && d->engine != KVP_ENGINE_IDEAL &&
        d->engine < KVP_ENGINE_HF_DYNAMIC)
        return kvp_fail(err, KVP_ERR_USAGE, "%s needs the GPU memory (a GPU, or its memory in bytes)",
                        kvp_engine_info(d->engine)->name);
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
    /* the target is the deployment's: the DP ranks share its requests (each holds its share) */
    if (e->dp > 1 && e->concurrency)
        e->concurrency = kvp_cdiv(e->concurrency, e->dp);
    if (e->engine == KVP_ENGINE_LLAMACPP && e->concurrency > 1 && e->n_seq <= 1) {
        e->n_seq = e->concurrency > UINT32_MAX ? UINT32_MAX : (uint32_t)e->concurrency;
        e->context = kvp_sat_mul(d->context, e->concurrency);
    }
    kvp_reserve_estimate(m, e, &f->reserve);
    e->activation_memory = f->reserve.activation;
    e->non_torch_memory = f->reserve.non_torch;
    e->cuda_graph_memory = f->reserve.cuda_graph;
}

/* One fit of d as its engine runs it, with no search. */
static enum kvp_status fit_once(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
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

/* ---- the inverse searches of one setting (llama.cpp's --fit questions) ---- */

enum knob { KNOB_CONTEXT, KNOB_GPU_LAYERS, KNOB_CPU_MOE };

/* Whether d with knob k at v fits: the whole fit at v (the reserve grows with the context too); a value
 * the engine rejects (a usage error) or whose bytes overflow 64 bits counts as not fitting. f: that fit. */
static enum kvp_status fits_at(const struct kvp_model *m, const struct kvp_deploy *d, enum knob k, uint64_t v,
                               struct kvp_fit *f, bool *fits, struct kvp_error *err)
{
    struct kvp_deploy t = *d;
    struct kvp_error e = {0};
    enum kvp_status st;
    if (k == KNOB_CONTEXT)
        t.context = v;
    else if (k == KNOB_GPU_LAYERS)
        t.n_gpu_layers = (int32_t)v; /* v <= n_layers + 1 */
    else
        t.n_cpu_moe = (int32_t)v; /* v <= n_layers */
    st = fit_once(m, &t, f, &e);
    *fits = st == KVP_OK && f->fits;
    if (st != KVP_OK && st != KVP_ERR_OVERFLOW && st != KVP_ERR_USAGE) {
        *err = e;
        return st;
    }
    return KVP_OK;
}

/* The one bisection of every search: the most v in [lo, hi] that fits where fitting falls as v grows
 * (the context, -ngl), else (rising: --n-cpu-moe) the least; *found false when no v in the range fits.
 * Every figure of a fit moves one way with each of these settings, so fitting changes once. */
static enum kvp_status bisect(const struct kvp_model *m, const struct kvp_deploy *d, enum knob k, uint64_t lo,
                              uint64_t hi, bool rising, uint64_t *out, bool *found, struct kvp_error *err)
{
    struct kvp_fit f;
    bool ok;
    enum kvp_status st;
    if ((st = fits_at(m, d, k, rising ? hi : lo, &f, found, err)) != KVP_OK)
        return st;
    while (*found && lo < hi) {
        uint64_t mid = rising ? lo + (hi - lo) / 2 : lo + (hi - lo + 1) / 2;
        if ((st = fits_at(m, d, k, mid, &f, &ok, err)) != KVP_OK)
            return st;
        if (rising && ok)
            hi = mid;
        else if (rising)
            lo = mid + 1;
        else if (ok)
            lo = mid;
        else
            hi = mid - 1;
    }
    *out = lo;
    return KVP_OK;
}

/* The longest context of d's requests the memory holds, up to llama.cpp's uint32_t n_ctx (-c N x
 * --concurrency): the model's trained limit lifted (as RoPE scaling lifts vLLM's derived max_model_len),
 * so that the memory's bound is found whatever the config says. 0 when one token does not fit. With l,
 * the memory left at that context and short one token past it (the search's edge, for --explain). */
static enum kvp_status memory_context(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t *out,
                                      struct kvp_fit_limits *l, struct kvp_error *err)
{
    struct kvp_model lifted = *m;
    struct kvp_fit f;
    bool found;
    enum kvp_status st;
    lifted.max_context = UINT32_MAX / (d->concurrency > 1 ? d->concurrency : 1);
    if ((st = bisect(&lifted, d, KNOB_CONTEXT, 1, lifted.max_context, false, out, &found, err)) != KVP_OK)
        return st;
    if (!found)
        *out = 0;
    if (!l)
        return KVP_OK;
    if (found && (st = fits_at(&lifted, d, KNOB_CONTEXT, *out, &f, &found, err)) != KVP_OK)
        return st;
    l->edge_free = found ? f.free_bytes : 0;
    if (*out < lifted.max_context && (st = fits_at(&lifted, d, KNOB_CONTEXT, *out + 1, &f, &found, err)) != KVP_OK)
        return st;
    l->edge_short = *out < lifted.max_context ? f.short_bytes : 0;
    l->search_top = lifted.max_context;
    return KVP_OK;
}

enum kvp_status kvp_fit_compute(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                                struct kvp_error *err)
{
    enum kvp_status st = fit_once(m, d, f, err);
    /* llama.cpp takes any -c (llama-context.cpp warns past n_ctx_train): its longest context is the memory's */
    if (st == KVP_OK && d->engine == KVP_ENGINE_LLAMACPP && d->gpu_memory && !f->refused[0])
        st = memory_context(m, d, &f->max_context, NULL, err);
    return st;
}

/* What stays in host memory: the host's model and KV buffers, its recurrent state, its compute buffer. */
static uint64_t host_bytes(const struct kvp_fit *f)
{
    return kvp_sat_add(kvp_sat_add(f->host.weights_bytes, f->host.buffer_bytes),
                       kvp_sat_add(f->host.rs_bytes, f->host_compute));
}

/* -ngl N (the most) or --n-cpu-moe N (the fewest) by search: *n -1 when none fits, else N and the
 * host memory at N. */
static enum kvp_status offload_search(const struct kvp_model *m, const struct kvp_deploy *d, enum knob k,
                                      int64_t *n, uint64_t *host, struct kvp_error *err)
{
    uint64_t v;
    bool found, rising = k == KNOB_CPU_MOE;
    struct kvp_fit f;
    enum kvp_status st;
    *n = -1;
    *host = 0;
    if ((st = bisect(m, d, k, 0, rising ? m->n_layers : m->n_layers + 1, rising, &v, &found, err)) != KVP_OK ||
        !found || (st = fits_at(m, d, k, v, &f, &found, err)) != KVP_OK)
        return st;
    *n = (int64_t)v;
    *host = host_bytes(&f);
    return KVP_OK;
}

/* The device memory llama.cpp projects at context ctx (llama_memory_breakdown: model + context +
 * compute on the GPU): the free memory (gpu_memory less the non-torch reserve, the CUDA context)
 * less what the fit leaves, or plus what it lacks. */
static enum kvp_status projected_use(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t ctx,
                                     uint64_t free_dev, int64_t *used, struct kvp_error *err)
{
    struct kvp_fit f;
    bool fits;
    enum kvp_status st;
    if ((st = fits_at(m, d, KNOB_CONTEXT, ctx, &f, &fits, err)) != KVP_OK)
        return st;
    /* free_dev < 2^62 (the caller's bound); a shortfall past 2^61 is as good as infinite here */
    *used = f.fits ? (int64_t)free_dev - (int64_t)f.free_bytes
                   : (int64_t)free_dev + (int64_t)(f.short_bytes < (1ull << 61) ? f.short_bytes : 1ull << 61);
    return KVP_OK;
}

/* --fit's layer assignment on one device (common/fit.cpp common_params_fit_impl, ngl_t): n layers on
 * the GPU counted from the output end, part of them "dense-only" (experts in host memory), the first
 * GPU layer's n - part full ones before them; the layers under -ngl are on the host whole. */
struct ngl {
    uint32_t n, part;
};

/* The first layer whose experts stay in host memory: il0 (n_layers + 1 - n) + n_full (n - part), as
 * set_ngl_tensor_split_tbo counts; n_layers or more: none. */
static uint32_t first_part(const struct kvp_model *m, struct ngl g)
{
    return m->n_layers + 1 - g.part;
}

static enum kvp_status use_with(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t ctx, struct ngl g,
                                uint64_t free_dev, int64_t *used, struct kvp_error *err)
{
    struct kvp_deploy t = *d;
    t.n_gpu_layers = (int32_t)g.n;
    t.cpu_moe_first = first_part(m, g);
    t.n_cpu_moe = t.cpu_moe_first < m->n_layers ? -1 : 0;
    return projected_use(m, &t, ctx, free_dev, used, err);
}

/* One false-position search (fit.cpp's "method of false position"): hi when it fits target, else
 * from *lo, which does, the guess delta x (target - mem_lo) / (mem_hi - mem_lo) in llama.cpp's
 * integers (a negative quotient wraps in its uint32_t, then is clamped to delta - 1), until they are
 * one layer apart. Step 3 adds layers (MoE: dense-only ones, the first a full one); step 4 (convert)
 * turns dense-only layers full. */
static enum kvp_status false_position(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t ctx,
                                      uint64_t free_dev, int64_t target, bool convert, struct ngl *lo,
                                      int64_t *mem_lo, struct ngl hi, int64_t mem_hi, struct kvp_error *err)
{
    bool moe = m->n_experts > 0;
    uint32_t delta = convert ? (hi.n - hi.part) - (lo->n - lo->part) : hi.n - lo->n;
    enum kvp_status st;
    if (mem_hi <= target) {
        *lo = hi;
        *mem_lo = mem_hi;
        return KVP_OK;
    }
    while (delta > 1 && mem_hi > *mem_lo) { /* equal projections (a refused fit): llama.cpp would divide by 0 */
        uint32_t step = (uint32_t)((int64_t)delta * (target - *mem_lo) / (mem_hi - *mem_lo));
        struct ngl t = *lo;
        int64_t mem;
        step = step < 1 ? 1 : step > delta - 1 ? delta - 1 : step;
        if (convert) {
            t.part -= step < t.part ? step : t.part;
        } else {
            t.n += step;
            if (moe)
                t.part += t.part == 0 ? step - 1 : step; /* the output layer stays full */
        }
        if ((st = use_with(m, d, ctx, t, free_dev, &mem, err)) != KVP_OK)
            return st;
        if (mem <= target) {
            *lo = t;
            *mem_lo = mem;
        } else {
            hi = t;
            mem_hi = mem;
        }
        delta = convert ? (hi.n - hi.part) - (lo->n - lo->part) : hi.n - lo->n;
    }
    return KVP_OK;
}

/* --fit's steps 3 and 4 on one device at context ctx (fit.cpp, after step 2): fill layers back to
 * front (a MoE model's as dense-only layers), then, when every dense tensor fits with the experts in
 * host memory (a surplus over the margin), turn dense-only layers full front to back. */
static enum kvp_status fit_layers(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t ctx,
                                  uint64_t free_dev, int64_t target, struct kvp_params_fit *p, struct kvp_error *err)
{
    bool moe = m->n_experts > 0;
    struct ngl lo = {0, 0}, hi = {m->n_layers + 1, moe ? m->n_layers : 0};
    int64_t mem_lo, mem_hi, dense_only;
    enum kvp_status st;

    p->n_ctx = ctx;
    if (d->n_gpu_layers >= 0 || d->n_cpu_moe || d->override_tensor[0]) { /* "... already set by user, abort" */
        p->step = KVP_PARAMS_FIT_ABORT;
        return KVP_OK;
    }
    if ((st = use_with(m, d, ctx, lo, free_dev, &mem_lo, err)) != KVP_OK ||
        (st = use_with(m, d, ctx, hi, free_dev, &mem_hi, err)) != KVP_OK)
        return st;
    if ((st = false_position(m, d, ctx, free_dev, target, false, &lo, &mem_lo, hi, mem_hi, err)) != KVP_OK)
        return st;
    p->step = KVP_PARAMS_FIT_LAYERS;
    if (moe && lo.n > 0) {
        struct ngl all = {m->n_layers + 1, m->n_layers + 1}; /* every MoE tensor in host memory */
        if ((st = use_with(m, d, ctx, all, free_dev, &dense_only, err)) != KVP_OK)
            return st;
        if (dense_only < target) { /* global_surplus_cpu_moe: free - dense-only use - margin > 0 */
            hi = (struct ngl){lo.n, 0};
            if ((st = use_with(m, d, ctx, hi, free_dev, &mem_hi, err)) != KVP_OK ||
                (st = false_position(m, d, ctx, free_dev, target, true, &lo, &mem_lo, hi, mem_hi, err)) != KVP_OK)
                return st;
            p->step = KVP_PARAMS_FIT_EXPERTS;
        }
    }
    p->n_gpu_layers = lo.n;
    p->cpu_moe_first = first_part(m, lo) < m->n_layers ? first_part(m, lo) : m->n_layers;
    p->used = mem_lo;
    return KVP_OK;
}

enum kvp_status kvp_fit_llamacpp_auto(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t margin,
                                      uint32_t n_ctx_min, uint64_t n_ctx, struct kvp_params_fit *p,
                                      struct kvp_error *err)
{
    enum kvp_status st;
    struct kvp_reserve r;
    int64_t free_dev, target, used_max, used_min;
    uint64_t n_max = n_ctx ? n_ctx : m->max_context, n;
    memset(p, 0, sizeof p[0]);
    n_max = n_max > UINT32_MAX ? UINT32_MAX : n_max;
    p->ctx_given = n_ctx != 0;
    if (d->engine != KVP_ENGINE_LLAMACPP || !d->gpu_memory || d->n_gpus != 1 || d->n_seq > 1 ||
        d->concurrency > 1 || d->gpu_memory >= 1ull << 62)
        return KVP_OK; /* not modelled: several devices or sequences */
    {
        struct kvp_fit f;
        bool fits;
        if ((st = fits_at(m, d, KNOB_CONTEXT, n_max, &f, &fits, err)) != KVP_OK || f.refused[0])
            return st; /* llama.cpp does not load the model: nothing to fit */
    }
    kvp_reserve_estimate(m, d, &r);
    free_dev = (int64_t)kvp_profile_sub(d->gpu_memory, d->non_torch_memory ? d->non_torch_memory : r.non_torch, NULL);
    target = free_dev - (int64_t)margin;
    if ((st = projected_use(m, d, n_max, (uint64_t)free_dev, &used_max, err)) != KVP_OK)
        return st;
    p->n_ctx = n_max;
    p->used_at_max = used_max;
    if (used_max <= target) { /* step 1: no changes needed */
        p->step = KVP_PARAMS_FIT_UNCHANGED;
        return KVP_OK;
    }
    if (n_ctx || n_max <= n_ctx_min) /* step 2: "context size set by user ... -> no change", or too short */
        return fit_layers(m, d, n_max, (uint64_t)free_dev, target, p, err);
    if ((st = projected_use(m, d, n_ctx_min, (uint64_t)free_dev, &used_min, err)) != KVP_OK)
        return st;
    p->used_at_min = used_min;
    p->n_ctx = n_ctx_min;
    if (target <= used_min) /* step 3 on: layers or experts leave the GPU */
        return fit_layers(m, d, n_ctx_min, (uint64_t)free_dev, target, p, err);
    /* linear between the two contexts in llama.cpp's integers, rounded down to 256 (one stream);
     * used_min < target < used_max here */
    if (!kvp_mul(n_max - n_ctx_min, (uint64_t)(target - used_min), &n))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "--fit's context interpolation overflows 64 bits");
    n = n_ctx_min + n / (uint64_t)(used_max - used_min);
    n -= n % 256;
    p->n_ctx = n > n_ctx_min ? n : n_ctx_min;
    p->step = KVP_PARAMS_FIT_CONTEXT;
    return KVP_OK;
}

enum kvp_status kvp_fit_limits(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit_limits *l,
                               struct kvp_error *err)
{
    enum kvp_status st;
    struct kvp_deploy all = *d;
    memset(l, 0, sizeof *l);
    l->model_context = m->max_context;
    l->max_gpu_layers = l->min_cpu_moe = -1;
    if ((st = check_deploy(m, d, err)) != KVP_OK || (st = memory_context(m, d, &l->memory_context, l, err)) != KVP_OK)
        return st;
    l->model_binds = l->memory_context > m->max_context;
    if (l->model_binds)
        l->rope_factor = (double)l->memory_context / (double)m->max_context;
    if (d->engine != KVP_ENGINE_LLAMACPP || !d->gpu_memory)
        return KVP_OK;
    if ((st = offload_search(m, d, KNOB_GPU_LAYERS, &l->max_gpu_layers, &l->host_at_max_gpu_layers, err)) != KVP_OK)
        return st;
    all.n_gpu_layers = -1; /* every layer on the GPUs, the experts of the first N in host memory (not -ot's) */
    all.override_tensor[0] = '\0';
    memset(all.cpu_experts, 0, sizeof all.cpu_experts);
    if (m->n_experts)
        st = offload_search(m, &all, KNOB_CPU_MOE, &l->min_cpu_moe, &l->host_at_min_cpu_moe, err);
    return st;
}

/* d's target (the whole deployment's requests) fits: each DP rank holds its share. */
static bool fits_target(const struct kvp_fit *f, const struct kvp_deploy *d)
{
    uint64_t want = d->concurrency ? d->concurrency : 1;
    return f->fits && f->max_concurrency + 1e-9 >= (double)kvp_cdiv(want, d->dp ? d->dp : 1);
}

/* ---- weight_dtype auto ---- */

enum kvp_status kvp_weights_ladder(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_wstore *out,
                                   uint32_t *n, struct kvp_error *err)
{
    static const char *const gguf[] = {"stored", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m", "q2_k"};
    static const char *const gpu[] = {"stored", "fp8", "int4:group=128"};
    bool is_gguf = d->engine == KVP_ENGINE_LLAMACPP || m->arch[0];
    const char *const *names = is_gguf ? gguf : gpu;
    uint32_t count = is_gguf ? sizeof gguf / sizeof gguf[0] : sizeof gpu / sizeof gpu[0];
    uint64_t last = UINT64_MAX;
    enum kvp_status st;

    *n = 0;
    for (uint32_t i = 0; i < count && *n < KVP_WLADDER_MAX; i++) {
        struct kvp_wstore ws;
        struct kvp_weights w;
        if ((st = kvp_wstore_parse(names[i], is_gguf, &ws, err)) != KVP_OK ||
            (st = kvp_weights_compute(m, &ws, &w, err)) != KVP_OK)
            return st;
        if (w.bytes >= last)
            continue;
        last = w.bytes;
        out[(*n)++] = ws;
    }
    return KVP_OK;
}

enum kvp_status kvp_deploy_pick_weights(const struct kvp_model *m, struct kvp_deploy *d, struct kvp_error *err)
{
    struct kvp_wstore rung[KVP_WLADDER_MAX];
    uint32_t n, i;
    enum kvp_status st;

    if ((st = kvp_weights_ladder(m, d, rung, &n, err)) != KVP_OK)
        return st;
    d->w_auto = true;
    for (i = 0; i < n; i++) {
        struct kvp_deploy t = *d;
        struct kvp_fit f;
        struct kvp_error e = {0};
        t.w = rung[i];
        st = kvp_fit_compute(m, &t, &f, &e);
        if (st != KVP_OK && st != KVP_ERR_UNSUPPORTED) {
            *err = e;
            return st;
        }
        if (st == KVP_OK && fits_target(&f, d))
            break;
    }
    d->w = rung[i < n ? i : n - 1]; /* none fits: the smallest, to say by how much */
    d->w_auto_rejected = (uint8_t)i;
    return KVP_OK;
}

/* ---- Ollama's front end ---- */

#define GIB (1ull << 30)

/* Ollama's own prediction of a load (llm/llama_server.go PredictServerVRAM):
 * the model file + an f16 K and V of every layer at the fewest KV heads and
 * hidden / heads dimensions, for tokens; the file is the weights' bytes here. */
static uint64_t ollama_predict(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t tokens)
{
    struct kvp_weights w;
    struct kvp_error e = {0};
    uint32_t kv_min = UINT32_MAX, heads_max = 0;
    for (uint32_t i = 0; i < m->n_specs; i++)
        if (m->specs[i].n_heads) {
            kv_min = m->specs[i].n_kv_heads < kv_min ? m->specs[i].n_kv_heads : kv_min;
            heads_max = m->specs[i].n_heads > heads_max ? m->specs[i].n_heads : heads_max;
        }
    kv_min = kv_min == UINT32_MAX || kv_min == 0 ? 1 : kv_min;
    uint64_t head_dim = heads_max ? m->hidden / heads_max : 0;
    uint64_t kv = kvp_sat_mul(kvp_sat_mul(kvp_sat_mul(4ull * m->n_layers, kv_min), head_dim), tokens);
    return kvp_sat_add(kvp_weights_compute(m, &d->w, &w, &e) == KVP_OK ? w.bytes : 0, kv);
}

/* server/sched.go generationBatchFits: predicted within the batch's headroom, its surcharge within 80%. */
static bool ollama_batch_fits(uint32_t batch, uint64_t predicted, uint64_t available)
{
    uint64_t threshold = available / 100 * 80, surcharge = batch >= 2048 ? 2 * GIB : batch >= 1024 ? 768ull << 20 : 0;
    uint32_t headroom = batch >= 2048 ? 60 : batch >= 1024 ? 75 : 100;
    if (predicted == 0 || available == 0)
        return true;
    return predicted <= threshold && predicted <= available / 100 * headroom && surcharge <= threshold - predicted;
}

/* The architectures Ollama serves one request at a time whatever OLLAMA_NUM_PARALLEL says
 * (server/sched.go, "model architecture does not currently support parallel requests"), by its
 * GGUF names; m's GGUF architecture, else its config's model_type, compared without '_'. */
static bool ollama_one_stream(const struct kvp_model *m)
{
    static const char *const names[] = {"mllama",    "qwen3vl",   "qwen3vlmoe", "qwen35",      "qwen35moe",
                                        "qwen3next", "lfm2",      "lfm2moe",    "nemotronh",   "nemotronhmoe",
                                        "nemotronhomni"};
    char a[sizeof m->family];
    size_t n = 0;
    for (const char *c = m->arch[0] ? m->arch : m->family; *c && n + 1 < sizeof a; c++)
        if (*c != '_')
            a[n++] = *c;
    a[n] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(a, names[i]) == 0)
            return true;
    return false;
}

void kvp_deploy_ollama(const struct kvp_model *m, struct kvp_deploy *d, bool context_given, bool batch_given)
{
    uint64_t vram = kvp_sat_mul(d->gpu_memory, d->n_gpus ? d->n_gpus : 1), tokens;
    d->ollama_auto = 0;
    if (d->n_seq > 1 && ollama_one_stream(m)) {
        d->n_seq = 1;
        d->ollama_auto |= KVP_OLLAMA_PARALLEL;
    }
    if (!context_given) {
        d->context = vram >= 47 * GIB ? 262144 : vram >= 23 * GIB ? 32768 : 4096;
        if (m->max_context && d->context > m->max_context)
            d->context = m->max_context;
        d->ollama_auto |= KVP_OLLAMA_CONTEXT;
    }
    if (batch_given)
        return;
    tokens = kvp_sat_mul(d->context, d->n_seq ? d->n_seq : 1);
    if (d->flash_attn == 0 && d->compute_capability) {
        d->n_batch = tokens > 4096 && d->gpu_memory <= 8 * GIB ? 256 : 512;
    } else {
        uint64_t predicted = ollama_predict(m, d, tokens);
        d->n_batch = tokens > 32768 ? 2048 : tokens > 4096 ? 1024 : 512;
        while (d->n_batch > 512 && !ollama_batch_fits(d->n_batch, predicted, vram))
            d->n_batch = d->n_batch > 1024 ? 1024 : 512;
    }
    d->n_ubatch = d->n_batch; /* llm/llama_server.go appendBatchArgs: -b N -ub N */
    d->ollama_auto |= KVP_OLLAMA_BATCH;
}

/* The data-parallel form of g GPUs per pipeline stage the engine runs for an
 * MLA model (whose latent every TP rank replicates): vLLM g ranks of tp 1,
 * SGLang DP attention over tp g; false for another engine or model. */
static bool dp_candidate(const struct kvp_model *m, const struct kvp_deploy *d, uint32_t g, struct kvp_deploy *t)
{
    bool mla = false;
    for (uint32_t i = 0; i < m->n_specs; i++)
        mla |= m->specs[i].kind == KVP_LAYER_MLA;
    if (!mla || g < 2 || d->weights_memory || (d->engine != KVP_ENGINE_VLLM && d->engine != KVP_ENGINE_SGLANG))
        return false;
    t->dp = g;
    t->dp_attention = d->engine == KVP_ENGINE_SGLANG;
    t->tp = t->dp_attention ? g : 1;
    return true;
}

enum kvp_status kvp_fit_min_gpus(const struct kvp_model *m, const struct kvp_deploy *d, uint32_t max_gpus,
                                 uint32_t *tp_out, uint32_t *dp_out, struct kvp_error *err)
{
    *tp_out = *dp_out = 0;
    for (uint32_t g = 1; (uint64_t)g * d->pp <= max_gpus; g *= 2) {
        struct kvp_deploy cand[2];
        double best = -1.0;
        uint32_t n = 0;
        cand[0] = *d;
        if (dp_candidate(m, d, g, &cand[0]))
            n++;
        cand[n] = *d; /* pure TP */
        cand[n].tp = g;
        cand[n].dp = 1;
        cand[n].dp_attention = false;
        cand[n].weights_memory = d->weights_memory && d->tp ? kvp_cdiv(d->weights_memory * d->tp, g) : 0;
        n++;
        for (uint32_t i = 0; i < n; i++) {
            struct kvp_deploy *t = &cand[i];
            struct kvp_fit f;
            enum kvp_status st;
            double all;
            t->n_gpus = (uint32_t)kvp_deploy_gpus(t);
            st = kvp_fit_compute(m, t, &f, err);
            if (st != KVP_OK && st != KVP_ERR_OVERFLOW && st != KVP_ERR_USAGE) /* usage: a tp the engine refuses */
                return st;
            all = f.max_concurrency * t->dp;
            if (st == KVP_OK && fits_target(&f, t) && all > best) { /* ties: the first, DP */
                best = all;
                *tp_out = t->tp;
                *dp_out = t->dp;
            }
        }
        if (*tp_out)
            break;
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
