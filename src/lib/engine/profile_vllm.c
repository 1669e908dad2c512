/* profile_vllm.c -- vLLM (v1 engine) KV-cache sizing, after
 * vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py and
 * vllm/v1/worker/gpu_worker.py (docs/engines.md, section vllm). */
#include <stdio.h>
#include <string.h>

#include "profile.h"

#define FLASH_ALIGN 16 /* attention kernel block alignment used to size hybrid Mamba pages */

/* One KV-cache spec type: layers whose specs are equal (same kind, window, page). */
struct vtype {
    const struct rspec *rs;
    uint32_t layers;
    uint32_t block;  /* tokens per block of this type */
    uint64_t page;   /* bytes per block per layer */
};

struct vplan {
    const struct kvp_deploy *d;
    uint32_t n;
    struct vtype t[KVP_MAX_SPECS];
    uint32_t group_size, n_groups, min_block;
    uint32_t groups_gs; /* the group size that cut each type into groups (the whole model's at pp > 1) */
    uint64_t page;    /* the common page (hybrid) or the single type's page */
    bool uniform_sum; /* same kind, different pages: num_blocks = avail // sum(page_l) */
    uint64_t page_sum;
};

/* vLLM 0.11.0's MXFP4 MoE backend on a GPU of capability cc and the sizes
 * Mxfp4MoEMethod.create_weights rounds the experts' intermediate size per
 * partition and hidden size up to (model_executor/layers/quantization/mxfp4.py,
 * get_mxfp4_backend, default environment): is_device_capability(100) with
 * FlashInfer (the vllm/vllm-openai image installs it) is SM100_FI_MXFP4_BF16,
 * 256 and 256; every other CUDA GPU (SM90_FI_MXFP4_BF16 wants
 * VLLM_USE_FLASHINFER_MOE_MXFP4_BF16) takes Marlin, 128 and 256 -- below 9.0
 * always, and at 9.0 and above because has_triton_kernels() is false where
 * triton_kernels is not installed (requirements/cuda.txt does not list it),
 * so the Triton backend (intermediate to 64, no hidden padding) is not the
 * default. An unknown capability is taken as Hopper (Marlin). */
static void mxfp4_backend(uint32_t cc, const char **name, uint64_t *align_i, uint64_t *align_h)
{
    *name = cc == 100 ? "FlashInfer MXFP4 BF16 (SM100)" : "Marlin";
    *align_i = cc == 100 ? 256 : 128;
    *align_h = 256;
}

/* vLLM's LoRA slots (--enable-lora; lora/layers, create_lora_weights, not fully sharded): every
 * attention and dense MLP projection of a layer gets, per slot, an A stack of rank x input and a B
 * stack of output x rank per slice, in the model dtype (lora_dtype auto): qkv_proj 3 slices (A of
 * the hidden size each; B q / tp and the rank's KV heads, max(1, H_kv / tp), of K and V), o_proj
 * (row parallel: A of q / tp, B of the hidden size), gate_up_proj 2 slices (A hidden, B I / tp; one
 * up_proj without a gate), down_proj (A I / tp, B hidden). Created with the model, so counted in
 * "Model loading took"; the busiest pipeline stage's layers. Not counted: the embeddings' and LM
 * head's LoRA where a release wraps them (vocab x rank a slot), the punica metadata. */
static enum kvp_status lora_stacks(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                                   struct kvp_error *err)
{
    uint64_t r = d->max_lora_rank ? d->max_lora_rank : 16, h = m->hidden, per = 0, bytes;
    uint32_t first, count, tp = d->tp;
    f->lora_bytes = 0;
    if (!d->max_loras || d->weights_memory)
        return KVP_OK;
    kvp_profile_stage_range(m->n_layers, d->pp, 0, &first, &count);
    for (uint32_t i = first; i < first + count; i++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, i);
        uint64_t q = (uint64_t)s->n_heads * s->head_dim_k / tp, o_in = (uint64_t)s->n_heads * s->head_dim_v / tp;
        uint64_t kv = s->n_kv_heads / tp ? s->n_kv_heads / tp : 1, inter = m->intermediate / tp;
        uint64_t n = 3 * h + q + kv * (s->head_dim_k + s->head_dim_v) + o_in + h; /* qkv A, B; o A, B (x r) */
        if (s->mlp == KVP_MLP_DENSE)
            n += m->act == KVP_ACT_GATED ? 2 * h + 2 * inter + inter + h : h + inter + inter + h;
        per += n;
    }
    if (!kvp_mul(per, r, &bytes) || !kvp_mul(bytes, (uint64_t)d->max_loras * 2, &f->lora_bytes))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "the LoRA slots overflow 64 bits");
    return KVP_OK;
}

/* The bytes vLLM adds to MXFP4 experts as it creates them: the expert
 * matrices of a partition (the intermediate size over dp x tp,
 * fused_moe/config.py) are allocated with mxfp4_backend's padded sizes and the
 * checkpoint's shards are loaded into them, so each MoE layer a GPU holds
 * grows by its experts priced at the padded partition's shape
 * (kvp_weights_experts: codes, a scale per 32 inputs, the biases; w2's bias
 * whole on every rank) less its share of the stored ones. Marlin on
 * an H100 gives gpt-oss-120b 65.90 GiB where vLLM logs "Model loading took
 * 65.97 GiB" (issue #35; the checkpoint is 60.77 GiB). f->weights_load says
 * what was padded. */
static enum kvp_status mxfp4_padding(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                                     struct kvp_error *err)
{
    struct kvp_weights w;
    uint64_t ip, h = m->hidden, ia, ha, ipad, hpad, stored, padded, local;
    uint32_t moe_layers = 0, first = UINT32_MAX;
    bool mxfp4 = false;
    const char *backend;
    enum kvp_status st;
    f->weights_padding = 0;
    if (d->weights_memory || !m->n_experts || !m->expert_intermediate || d->w.kind != KVP_WSTORE_CHECKPOINT)
        return KVP_OK;
    if ((st = kvp_weights_compute(m, &d->w, &w, err)) != KVP_OK)
        return st;
    for (uint32_t i = 0; i < w.n_parts; i++)
        mxfp4 = mxfp4 || (strncmp(w.parts[i].name, "mxfp4", 5) == 0 && (w.parts[i].classes >> KVP_WC_EXPERTS) & 1u);
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (kvp_model_layer(m, l)->mlp == KVP_MLP_MOE) {
            first = first == UINT32_MAX ? l : first;
            moe_layers++;
        }
    /* under expert parallelism each GPU holds `local` whole experts (the MoE layer's tp is 1), else a
     * partition of every one */
    local = kvp_deploy_experts_per_gpu(m, d);
    ip = local ? m->expert_intermediate : m->expert_intermediate / ((uint64_t)d->tp * d->dp);
    if (!mxfp4 || !moe_layers || ip == 0)
        return KVP_OK;
    mxfp4_backend(d->compute_capability, &backend, &ia, &ha);
    ipad = kvp_cdiv(ip, ia) * ia;
    hpad = kvp_cdiv(h, ha) * ha;
    if ((st = kvp_weights_experts(m, &d->w, first, m->expert_intermediate, h, &stored, err)) != KVP_OK ||
        (st = kvp_weights_experts(m, &d->w, first, ipad, hpad, &padded, err)) != KVP_OK)
        return st;
    if (local) {
        if (!kvp_mul(stored, local, &stored) || !kvp_mul(padded, local, &padded))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "the MXFP4 experts per GPU overflow 64 bits");
        stored /= m->n_experts, padded /= m->n_experts;
    } else {
        stored = kvp_cdiv(stored, (uint64_t)d->tp * d->dp);
    }
    if (padded <= stored) /* nothing to pad */
        return KVP_OK;
    if (!kvp_mul(padded - stored, kvp_cdiv(moe_layers, d->pp), &f->weights_padding))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "the padded MXFP4 experts overflow 64 bits");
    snprintf(f->weights_load, sizeof f->weights_load,
             "MXFP4 experts padded for %s: intermediate per %s %llu -> %llu, hidden %llu -> %llu", backend,
             local ? "expert (whole, expert parallel)" : "partition",
             (unsigned long long)ip, (unsigned long long)ipad, (unsigned long long)h, (unsigned long long)hpad);
    return KVP_OK;
}

bool kvp_profile_vllm_same_type(const struct rspec *a, const struct rspec *b)
{
    return a->s->kind == b->s->kind && a->s->window == b->s->window && a->k_row == b->k_row &&
           a->v_row == b->v_row && a->state == b->state;
}

enum kvp_status kvp_profile_vllm_groups(const struct prank *r, bool states, struct kvp_vllm_groups *g,
                                        struct kvp_error *err)
{
    uint32_t min_n = UINT32_MAX, max_n = 0, all = 0;
    bool one_kind = true;

    memset(g, 0, sizeof *g);
    for (uint32_t i = 0; i < r->n; i++) {
        const struct rspec *rs = &r->spec[i];
        uint32_t j;
        if (rs->k_row + rs->v_row == 0 && (rs->state == 0 || !states))
            continue; /* shared-KV and attention-free layers get no cache */
        for (j = 0; j < g->n && !kvp_profile_vllm_same_type(g->type[j], rs); j++)
            ;
        if (j == g->n)
            g->type[g->n++] = rs;
        g->layers[j] += rs->layers;
    }
    if (g->n == 0)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "the model has no KV cache for vllm to size");
    for (uint32_t j = 0; j < g->n; j++) {
        min_n = g->layers[j] < min_n ? g->layers[j] : min_n;
        max_n = g->layers[j] > max_n ? g->layers[j] : max_n;
        all += g->layers[j];
        one_kind = one_kind && g->type[j]->s->kind == g->type[0]->s->kind &&
                   g->type[j]->s->window == g->type[0]->s->window;
    }
    g->rule = g->n == 1 ? KVP_VLLM_ONE_TYPE : one_kind ? KVP_VLLM_ONE_KIND : KVP_VLLM_EQUAL_PAGES;
    g->n_groups = 1;
    g->group_size = all;
    if (g->rule == KVP_VLLM_EQUAL_PAGES) {
        g->group_size = (double)max_n < 1.5 * min_n ? max_n : min_n;
        g->n_groups = 0;
        for (uint32_t j = 0; j < g->n; j++)
            g->n_groups += (uint32_t)kvp_cdiv(g->layers[j], g->group_size);
    }
    return KVP_OK;
}

/* max_memory_usage_bytes of one layer of type t for a request of L tokens. */
static uint64_t type_request(const struct vtype *t, const struct kvp_deploy *d, uint64_t L)
{
    uint64_t n;
    switch (t->rs->s->kind) {
    case KVP_LAYER_SLIDING: /* the window may not start at a block boundary: +1 block */
        n = kvp_sat_add(t->rs->s->window - 1, d->max_batched_tokens);
        return kvp_sat_mul(kvp_cdiv(n < L ? n : L, t->block) + 1, t->page);
    case KVP_LAYER_CHUNKED:
        n = kvp_sat_add(t->rs->s->window, d->max_batched_tokens);
        return kvp_sat_mul(kvp_cdiv(n < L ? n : L, t->block), t->page);
    case KVP_LAYER_RECURRENT: /* mamba_cache_mode "none": one state block */
        return t->page;
    default:
        return kvp_sat_mul(kvp_cdiv(L, t->block), t->page);
    }
}

/* The KV cache specs of rank view r; states: Mamba layers are specs too (V1),
 * else they are left to a cache of their own (V0). */
static enum kvp_status build_types(const struct prank *r, const struct kvp_deploy *d, uint32_t block, bool states,
                                   struct vplan *p, struct kvp_error *err)
{
    uint64_t attn_token = 0, mamba_page = 0, max_page = 0;
    struct kvp_vllm_groups g;
    enum kvp_status st;

    memset(p, 0, sizeof *p);
    p->d = d;
    if ((st = kvp_profile_vllm_groups(r, states, &g, err)) != KVP_OK)
        return st;
    p->n = g.n;
    p->uniform_sum = g.rule == KVP_VLLM_ONE_KIND;
    p->group_size = p->groups_gs = g.group_size;
    p->n_groups = g.n_groups;
    for (uint32_t j = 0; j < g.n; j++) {
        p->t[j] = (struct vtype){g.type[j], g.layers[j], block, 0};
        if (g.type[j]->state)
            mamba_page = g.type[j]->state > mamba_page ? g.type[j]->state : mamba_page;
        else
            attn_token = g.type[j]->k_row + g.type[j]->v_row;
    }
    if (mamba_page && attn_token) {
        /* hybrid Mamba: the attention block grows until its page covers the
         * Mamba state, then the Mamba page is padded to it */
        block = FLASH_ALIGN * (uint32_t)kvp_cdiv(mamba_page, kvp_sat_mul(FLASH_ALIGN, attn_token));
        if (d->block_size > block)
            block = d->block_size;
    }
    for (uint32_t j = 0; j < p->n; j++) {
        struct vtype *t = &p->t[j];
        t->block = t->rs->state ? block : (mamba_page ? block : t->block);
        t->page = 0;
        if (!t->rs->state && !kvp_mul(t->block, t->rs->k_row + t->rs->v_row, &t->page))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "a block of %u tokens overflows 64 bits", t->block);
        if (t->page > max_page)
            max_page = t->page;
    }
    for (uint32_t j = 0; j < p->n; j++)
        if (p->t[j].rs->state)
            p->t[j].page = max_page ? max_page : p->t[j].rs->state;
    if (max_page == 0)
        max_page = p->t[0].page;
    p->page = max_page;
    return KVP_OK;
}

/* The pool's pages for the groups build_types took from kvp_profile_vllm_groups:
 * one kind with several pages -> per-layer sum; hybrids -> equal pages. */
static enum kvp_status group(struct vplan *p, struct kvp_error *err)
{
    p->min_block = UINT32_MAX;
    for (uint32_t j = 0; j < p->n; j++)
        p->min_block = p->t[j].block < p->min_block ? p->t[j].block : p->min_block;
    if (p->n == 1)
        return KVP_OK;
    if (p->uniform_sum) {
        for (uint32_t j = 0; j < p->n; j++)
            if (!kvp_profile_mul_add(&p->page_sum, p->t[j].page, p->t[j].layers))
                return kvp_fail(err, KVP_ERR_OVERFLOW, "the pages of one block overflow 64 bits");
        return KVP_OK;
    }
    for (uint32_t j = 0; j < p->n; j++) {
        struct vtype *t = &p->t[j];
        if (t->page != p->page) {
            if (t->page == 0 || p->page % t->page != 0)
                return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                                "vllm needs equal page sizes in a hybrid model (%llu B does not divide %llu B)",
                                (unsigned long long)t->page, (unsigned long long)p->page);
            t->block *= (uint32_t)(p->page / t->page); /* a bigger block of the smaller spec */
            t->page = p->page;
        }
    }
    return KVP_OK;
}

/* get_kv_cache_configs groups the layers of all pipeline stages once and
 * projects the groups onto each stage, which keeps the layers it holds; the
 * stage's group size is its largest projected group. A type of n layers
 * makes num_groups = cdiv(n, groups_gs) groups, and group i takes the
 * type's layers i, i + num_groups, i + 2 num_groups ... (vLLM 0.11.0
 * v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size,
 * layers[i::num_groups], PR #23974 "[Hybrid Allocator] Support Pipeline
 * Parallel": consecutive runs would leave a stage's groups half empty). g is
 * the whole model's plan over rank view r. */
static uint32_t stage_group_size(const struct kvp_model *m, const struct prank *r, const struct vplan *g,
                                 uint32_t first, uint32_t count)
{
    uint32_t best = 0;
    for (uint32_t j = 0; j < g->n; j++) {
        uint32_t ngroups = (uint32_t)kvp_cdiv(g->t[j].layers, g->groups_gs), seen = 0;
        uint32_t held[KVP_MAX_LAYERS] = {0};
        for (uint32_t l = 0; l < m->n_layers; l++) {
            const struct kvp_layer_spec *s = &m->specs[m->layer_spec[l]];
            uint32_t i;
            for (i = 0; i < r->n && r->spec[i].s != s; i++)
                ;
            if (i == r->n || !kvp_profile_vllm_same_type(&r->spec[i], g->t[j].rs))
                continue;
            held[seen++ % ngroups] += l >= first && l < first + count;
        }
        for (uint32_t k = 0; k < ngroups; k++)
            best = held[k] > best ? held[k] : best;
    }
    return best ? best : 1;
}

/* mem_per_req of _report_kv_cache_config, and the blocks one request takes. */
static uint64_t request_blocks(const struct vplan *p, uint64_t L)
{
    uint64_t per_req = 0, per_block;
    if (p->uniform_sum) {
        uint64_t blocks = 0;
        for (uint32_t j = 0; j < p->n; j++) {
            uint64_t b = kvp_cdiv(L, p->t[j].block);
            blocks = b > blocks ? b : blocks;
        }
        return blocks;
    }
    for (uint32_t j = 0; j < p->n; j++)
        per_req = kvp_sat_add(per_req, kvp_sat_mul(kvp_cdiv(p->t[j].layers, p->groups_gs),
                                                   type_request(&p->t[j], p->d, L)));
    per_req = kvp_sat_mul(per_req, p->group_size);
    per_block = kvp_sat_mul(p->page, p->group_size);
    return per_req == UINT64_MAX ? UINT64_MAX : kvp_cdiv(per_req, per_block); /* UINT64_MAX: too big */
}

static uint64_t block_bytes(const struct vplan *p)
{
    return p->uniform_sum ? p->page_sum : kvp_sat_mul(p->page, p->group_size);
}

static enum kvp_status request_cost(void *ctx, uint64_t L, uint64_t *bytes, struct kvp_error *err)
{
    const struct vplan *p = ctx;
    uint64_t blocks = request_blocks(p, L);
    if (blocks == UINT64_MAX || !kvp_mul(blocks, block_bytes(p), bytes))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "a request of %llu tokens overflows 64 bits", (unsigned long long)L);
    return KVP_OK;
}

/* What vLLM rejects before it starts (config/model.py), in its words. */
static enum kvp_status check_settings(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_error *err)
{
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        uint32_t h = s->n_heads, kv = s->n_kv_heads;
        if (h && h % d->tp != 0)
            return kvp_fail(
                err, KVP_ERR_USAGE,
                "vllm: Total number of attention heads (%u) must be divisible by tensor parallel size (%u).", h, d->tp);
        /* model_executor/layers/linear.py QKVParallelLinear.__init__: the KV heads split over tp
         * (divide(kv, tp)), or replicated when tp >= kv (divide(tp, kv)); distributed/utils.py
         * ensure_divisibility asserts either at load. MLA's latent is not a QKV projection. */
        if (kv && s->kind != KVP_LAYER_MLA && s->kind != KVP_LAYER_RECURRENT &&
            (d->tp >= kv ? d->tp % kv : kv % d->tp) != 0)
            return kvp_fail(err, KVP_ERR_USAGE,
                            "vllm: AssertionError: %u is not divisible by %u (QKVParallelLinear: %u KV heads at "
                            "tensor parallel size %u; the model does not load)",
                            d->tp >= kv ? d->tp : kv, d->tp >= kv ? kv : d->tp, kv, d->tp);
    }
    if (d->context > m->max_context)
        return kvp_fail(err, KVP_ERR_USAGE,
                        "vllm: User-specified max_model_len (%llu) is greater than the derived max_model_len "
                        "(max_position_embeddings=%llu in model's config.json). To allow overriding this maximum, "
                        "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
                        (unsigned long long)d->context, (unsigned long long)m->max_context);
    return KVP_OK;
}

/* vLLM V0 (model_executor/models/mamba_cache.py MambaCacheManager, made in
 * the profiling run's first forward, so inside the peak it measures): the
 * conv and ssm states of every Mamba layer, sharded over tp, in the model
 * dtype, for max_num_seqs (default 256) padded to a CUDA-graph batch size
 * (1, 2, 4, then multiples of 8); the KV blocks then hold the attention layers
 * alone. Gated DeltaNet (Qwen3-Next) came after V0: its architecture is unknown. */
static enum kvp_status v0_mamba_cache(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                                      struct kvp_error *err)
{
    uint64_t seqs = d->max_num_seqs ? d->max_num_seqs : 256, conv_b = 0, ssm_b = 0;
    uint64_t bytes = kvp_dtype_info(m->dtype)->block_bits / 8;
    bool any = false;
    seqs = seqs <= 2 ? seqs : seqs <= 4 ? 4 : kvp_sat_mul(kvp_cdiv(seqs, 8), 8);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, l);
        uint64_t conv, ssm;
        if (s->kind != KVP_LAYER_RECURRENT)
            continue;
        if (s->rec.kind == KVP_REC_GDN) {
            snprintf(f->refused, sizeof f->refused, "Model architectures ['%s'] are not supported for now. Supported "
                     "architectures: (vllm %s's list, which has no Gated DeltaNet hybrid)", kvp_profile_architecture(m),
                     kvp_deploy_release(d)->version);
            return KVP_OK;
        }
        kvp_recurrent_state_elems(&s->rec, &conv, &ssm);
        if (!kvp_profile_mul_add(&conv_b, kvp_cdiv(conv, d->tp), bytes) ||
            !kvp_profile_mul_add(&ssm_b, kvp_cdiv(ssm, d->tp), bytes))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "the Mamba state of one sequence overflows 64 bits");
        any = true;
    }
    if (!any)
        return KVP_OK;
    f->state_slots = seqs;
    f->state_bytes_per_req = conv_b + ssm_b;
    if (!kvp_mul(seqs, conv_b, &f->state_conv_bytes) || !kvp_mul(seqs, ssm_b, &f->state_ssm_bytes))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "a Mamba cache of %llu sequences overflows 64 bits",
                        (unsigned long long)seqs);
    return KVP_OK;
}

/* The start-up check that one request of max_model_len fits (V1:
 * kv_cache_utils.check_enough_kv_cache_memory; V0: worker.py
 * raise_if_cache_size_invalid); the message when it does not. */
static void check_start(const struct kvp_deploy *d, struct kvp_fit *f, uint64_t max_len)
{
    char g[2][32];
    if (kvp_deploy_release(d)->rules & KVP_REL_VLLM_V0) {
        if (d->context > f->kv_tokens)
            snprintf(f->refused, sizeof f->refused,
                     "The model's max seq len (%llu) is larger than the maximum number of tokens that can be stored "
                     "in KV cache (%llu). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                     "initializing the engine.", (unsigned long long)d->context, (unsigned long long)f->kv_tokens);
        return;
    }
    if (f->kv_budget_bytes == 0) {
        snprintf(f->refused, sizeof f->refused, "No available memory for the cache blocks. Try increasing "
                 "`gpu_memory_utilization` when initializing the engine.");
    } else if (f->request_bytes > f->kv_budget_bytes) {
        snprintf(g[0], sizeof g[0], "%.2f", f->request_bytes / 1073741824.0);
        snprintf(g[1], sizeof g[1], "%.2f", f->kv_budget_bytes / 1073741824.0);
        snprintf(f->refused, sizeof f->refused,
                 "To serve at least one request with the models's max seq len (%llu), (%s GiB KV cache is needed, "
                 "which is larger than the available KV cache memory (%s GiB). Based on the available memory, the "
                 "estimated maximum model length is %llu. Try increasing `gpu_memory_utilization` or decreasing "
                 "`max_model_len` when initializing the engine.", (unsigned long long)d->context, g[0], g[1],
                 (unsigned long long)max_len);
    }
}

enum kvp_status kvp_profile_vllm(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                             struct kvp_error *err)
{
    static const enum kvp_dtype ok[] = {KVP_DTYPE_F32, KVP_DTYPE_F16, KVP_DTYPE_BF16, KVP_DTYPE_FP8_E4M3,
                                        KVP_DTYPE_FP8_E5M2, KVP_DTYPE_NVFP4};
    uint32_t block = d->block_size;
    uint64_t want = d->concurrency ? d->concurrency : 1, avail, min_blocks = UINT64_MAX, one_request_len = UINT64_MAX;
    enum kvp_status st;
    bool mla = false, hybrid, v0 = kvp_deploy_release(d)->rules & KVP_REL_VLLM_V0;
    struct prank whole;
    struct vplan g;

    if ((st = kvp_profile_formats(d, ok, 6, err)) != KVP_OK)
        return st;
    if (d->k.dtype != d->v.dtype)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "vllm has one --kv-cache-dtype for K and V (got %s and %s)",
                        kvp_dtype_info(d->k.dtype)->name, kvp_dtype_info(d->v.dtype)->name);
    if ((st = check_settings(m, d, err)) != KVP_OK)
        return st;
    for (uint32_t i = 0; i < m->n_layers; i++)
        mla = mla || kvp_model_layer(m, i)->kind == KVP_LAYER_MLA;
    if (!block)
        block = 16;
    /* platforms/cuda.py check_and_update_config (0.11.0), MLA with no backend forced: a
     * Blackwell of capability exactly 10.0 (is_device_capability(100): B200, GB200) takes
     * CUTLASS MLA, "Forcing kv cache block size to 128 for CUTLASS_MLA backend" whenever
     * block_size != 128; the others FlashMLA, which forces 64 whenever block_size != 64 where
     * it runs (Hopper, attention/ops/flashmla.py is_flashmla_supported: "FlashMLA is only
     * supported on Hopper devices"), else the block stays (Triton MLA). Both override
     * --block-size (a 256 becomes 128 on a B200, a 128 becomes 64 on an H100). A GPU of
     * unknown capability is taken as Hopper. FlashMLA (vllm PR #13747) came after 0.7.3. */
    if (mla && !v0 && d->compute_capability == 100)
        block = 128;
    else if (mla && !v0 && (d->compute_capability == 0 || d->compute_capability / 10 == 9))
        block = 64;
    f->block_size = block;
    f->util = d->util; /* deploy.c effective(): as given, else the release's default */
    if ((st = kvp_profile_weights(m, d, &f->weights_bytes, err)) != KVP_OK ||
        (!v0 && (st = mxfp4_padding(m, d, f, err)) != KVP_OK) || (st = lora_stacks(m, d, f, err)) != KVP_OK ||
        (v0 && (st = v0_mamba_cache(m, d, f, err)) != KVP_OK))
        return st;
    if (!kvp_add(f->weights_bytes, f->weights_padding, &f->weights_bytes) ||
        !kvp_add(f->weights_bytes, f->lora_bytes, &f->weights_bytes))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "the weights as vLLM holds them overflow 64 bits");
    if (f->refused[0])
        return KVP_OK;
    /* available = int(total * util - (weights + activation peak [with V0's Mamba cache] + non-torch)) */
    if (d->kv_memory) {
        avail = d->kv_memory;
    } else {
        uint64_t non_kv = kvp_sat_add(kvp_sat_add(f->weights_bytes, kvp_profile_reserve(d)),
                                      kvp_sat_add(f->state_conv_bytes, f->state_ssm_bytes));
        avail = kvp_profile_sub(kvp_profile_fraction(d->gpu_memory, f->util), non_kv, &f->short_bytes);
    }
    f->kv_budget_bytes = avail;
    f->max_concurrency = 1e300;
    f->max_context = UINT64_MAX;
    if ((st = kvp_profile_rank(m, d, 0, m->n_layers, &whole, err)) ||
        (st = build_types(&whole, d, block, !v0, &g, err)) || (st = group(&g, err)))
        return st;
    hybrid = g.n > 1 && !g.uniform_sum;
    for (uint32_t s = 0; s < d->pp; s++) {
        uint32_t first, count;
        struct prank r;
        struct vplan p;
        uint64_t blocks, bytes = 0, ctx, one, token;
        kvp_profile_stage_range(m->n_layers, d->pp, s, &first, &count);
        if ((st = kvp_profile_rank(m, d, first, count, &r, err)) != KVP_OK ||
            (st = kvp_profile_token_bytes(&r, &token, err)) != KVP_OK)
            return st;
        if (hybrid) { /* the whole model's groups, projected onto the stage */
            p = g;
            p.group_size = stage_group_size(m, &whole, &g, first, count);
        } else if ((st = build_types(&r, d, block, !v0, &p, err)) || (st = group(&p, err))) {
            return st;
        }
        blocks = avail / block_bytes(&p);
        if (blocks < min_blocks) {
            min_blocks = blocks;
            f->n_groups = p.n_groups;
            f->kv_tokens = blocks / p.n_groups * p.min_block;
            f->block_size = p.min_block;
            f->kv_pool_bytes = blocks * block_bytes(&p); /* <= avail: blocks = avail / block_bytes */
        }
        if (token > f->kv_bytes_per_token_per_gpu)
            f->kv_bytes_per_token_per_gpu = token;
        if ((st = request_cost(&p, d->context, &bytes, err)) != KVP_OK)
            return st;
        if (bytes > f->request_bytes)
            f->request_bytes = bytes;
        if ((double)min_blocks / request_blocks(&p, d->context) < f->max_concurrency)
            f->max_concurrency = (double)min_blocks / request_blocks(&p, d->context);
        if ((st = kvp_profile_max_context(request_cost, &p, want, kvp_sat_mul(min_blocks, block_bytes(&p)),
                                          d->context > m->max_context ? d->context : m->max_context, &ctx, err)) !=
                KVP_OK ||
            (st = kvp_profile_max_context(request_cost, &p, 1, avail, m->max_context, &one, err)) != KVP_OK)
            return st;
        if (one < one_request_len)
            one_request_len = one;
        if (ctx < f->max_context)
            f->max_context = ctx;
    }
    f->num_blocks = min_blocks;
    if (v0) /* V0: num_gpu_blocks * block_size / max_model_len */
        f->max_concurrency = (double)f->kv_tokens / (double)d->context;
    if (!kvp_mul(f->request_bytes, want, &f->kv_bytes_required))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "%llu requests overflow 64 bits", (unsigned long long)want);
    if ((st = kvp_profile_finish(f, f->max_concurrency + 1e-12 >= (double)want, f->short_bytes, err)) != KVP_OK)
        return st;
    check_start(d, f, one_request_len);
    return KVP_OK;
}
