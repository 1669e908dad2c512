/* gguf_mix.c -- the tensor types llama.cpp's quantizer picks for a file type.
 *
 * `llama-quantize model.gguf out.gguf Q4_K_M` does not store every tensor in
 * q4_K: it walks the tensors (by layer, then by name) and picks each one's
 * type from its name, its layer, its shape and the model's hyperparameters.
 * This file is that choice, rule for rule, from llama.cpp release v0.5.0
 * (commit 0ad4a86, the build node-llama-cpp 3.22.1 ships and `make oracle`
 * runs), src/llama-quant.cpp:
 *
 *   llama_ftype_get_default_type   the file type's base tensor type;
 *   tensor_allows_quantization     1-D tensors, norms, routers (ffn_gate_inp),
 *                                  positions and convolutions keep their type;
 *   llama_tensor_get_type_impl     the per-tensor mixture (mix_type below);
 *   tensor_type_fallback           a type whose block does not divide the
 *                                  row (ne0) falls back to a 32-block type,
 *                                  then to f16.
 *
 * llama.cpp names tensors; kvplan gives each a role (wquant.h), mapped to
 * llama.cpp's categories in category(). docs/model-format.md ("GGUF file
 * types") lists the rules in words.
 */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "kvplan/model.h"
#include "kvplan/wquant.h"

/* ---- file types (enum llama_ftype, include/llama.h) ---------------------------- */

enum {
    FT_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15,
    FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ2_XXS = 19, FT_IQ2_XS = 20, FT_Q2_K_S = 21,
    FT_IQ3_XS = 22, FT_IQ3_XXS = 23, FT_IQ1_S = 24, FT_IQ4_NL = 25, FT_IQ3_S = 26, FT_IQ3_M = 27,
    FT_IQ2_S = 28, FT_IQ2_M = 29, FT_IQ4_XS = 30, FT_IQ1_M = 31, FT_BF16 = 32, FT_TQ1_0 = 36,
    FT_TQ2_0 = 37, FT_MXFP4_MOE = 38,
};

/* Every file type llama_model_quantize writes, with its default tensor type
 * (llama_ftype_get_default_type). Q1_0 and Q2_0 (40, 41) are missing: their
 * block types are not in kvplan's dtype table. */
static const struct ftype_info {
    uint32_t ftype;
    const char *name;
    enum kvp_dtype base;
} ftypes[] = {
    {FT_F32, "F32", KVP_DTYPE_F32},           {FT_F16, "F16", KVP_DTYPE_F16},
    {FT_BF16, "BF16", KVP_DTYPE_BF16},        {FT_Q4_0, "Q4_0", KVP_DTYPE_Q4_0},
    {FT_Q4_1, "Q4_1", KVP_DTYPE_Q4_1},        {FT_Q5_0, "Q5_0", KVP_DTYPE_Q5_0},
    {FT_Q5_1, "Q5_1", KVP_DTYPE_Q5_1},        {FT_Q8_0, "Q8_0", KVP_DTYPE_Q8_0},
    {FT_Q2_K, "Q2_K", KVP_DTYPE_Q2_K},        {FT_Q2_K_S, "Q2_K_S", KVP_DTYPE_Q2_K},
    {FT_Q3_K_S, "Q3_K_S", KVP_DTYPE_Q3_K},    {FT_Q3_K_M, "Q3_K_M", KVP_DTYPE_Q3_K},
    {FT_Q3_K_L, "Q3_K_L", KVP_DTYPE_Q3_K},    {FT_Q4_K_S, "Q4_K_S", KVP_DTYPE_Q4_K},
    {FT_Q4_K_M, "Q4_K_M", KVP_DTYPE_Q4_K},    {FT_Q5_K_S, "Q5_K_S", KVP_DTYPE_Q5_K},
    {FT_Q5_K_M, "Q5_K_M", KVP_DTYPE_Q5_K},    {FT_Q6_K, "Q6_K", KVP_DTYPE_Q6_K},
    {FT_IQ1_S, "IQ1_S", KVP_DTYPE_IQ1_S},     {FT_IQ1_M, "IQ1_M", KVP_DTYPE_IQ1_M},
    {FT_IQ2_XXS, "IQ2_XXS", KVP_DTYPE_IQ2_XXS}, {FT_IQ2_XS, "IQ2_XS", KVP_DTYPE_IQ2_XS},
    {FT_IQ2_S, "IQ2_S", KVP_DTYPE_IQ2_XS},    {FT_IQ2_M, "IQ2_M", KVP_DTYPE_IQ2_S},
    {FT_IQ3_XXS, "IQ3_XXS", KVP_DTYPE_IQ3_XXS}, {FT_IQ3_XS, "IQ3_XS", KVP_DTYPE_IQ3_S},
    {FT_IQ3_S, "IQ3_S", KVP_DTYPE_IQ3_S},     {FT_IQ3_M, "IQ3_M", KVP_DTYPE_IQ3_S},
    {FT_IQ4_NL, "IQ4_NL", KVP_DTYPE_IQ4_NL},  {FT_IQ4_XS, "IQ4_XS", KVP_DTYPE_IQ4_XS},
    {FT_TQ1_0, "TQ1_0", KVP_DTYPE_TQ1_0},     {FT_TQ2_0, "TQ2_0", KVP_DTYPE_TQ2_0},
    {FT_MXFP4_MOE, "MXFP4_MOE", KVP_DTYPE_MXFP4},
};

/* llama-quantize's aliases (tools/quantize/quantize.cpp). */
static const struct { const char *alias; uint32_t ftype; } ftype_aliases[] = {
    {"Q3_K", FT_Q3_K_M}, {"Q4_K", FT_Q4_K_M}, {"Q5_K", FT_Q5_K_M},
};

static const struct ftype_info *ftype_find(uint32_t ftype)
{
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (ftypes[i].ftype == ftype)
            return &ftypes[i];
    return NULL;
}

bool kvp_gguf_ftype_from_name(const char *s, uint32_t *ftype)
{
    if (strncasecmp(s, "mostly_", 7) == 0)
        s += 7;
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (strcasecmp(s, ftypes[i].name) == 0) {
            *ftype = ftypes[i].ftype;
            return true;
        }
    for (size_t i = 0; i < sizeof ftype_aliases / sizeof ftype_aliases[0]; i++)
        if (strcasecmp(s, ftype_aliases[i].alias) == 0) {
            *ftype = ftype_aliases[i].ftype;
            return true;
        }
    return false;
}

const char *kvp_gguf_ftype_name(uint32_t ftype)
{
    const struct ftype_info *fi = ftype_find(ftype);
    return fi ? fi->name : NULL;
}

/* ---- what llama.cpp knows about the model ---------------------------------------- */

/* llama.cpp's tensor_category (tensor_get_category: a substring of the name),
 * plus KEEP for the tensors tensor_allows_quantization refuses. */
enum category {
    CAT_KEEP,       /* 1-D, norms, ffn_gate_inp, position_embd, ssm_conv1d: stored as converted (f32) */
    CAT_TOKEN_EMBD,
    CAT_OUTPUT,
    CAT_ATTN_Q,
    CAT_ATTN_K,
    CAT_ATTN_V,
    CAT_ATTN_QKV,   /* a fused attn_qkv, offered as its q, k and v parts; the v part counts */
    CAT_ATTN_OUT,
    CAT_FFN_UP,     /* ffn_up, ffn_up_exps, ffn_up_shexp */
    CAT_FFN_GATE,
    CAT_FFN_DOWN,
    CAT_OTHER,      /* quantized to the base type: MLA, recurrent projections ... */
};

static bool family_is(const struct kvp_model *m, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(m->family, *list) == 0)
            return true;
    return false;
}

/* Families converted with one attn_qkv tensor (HF config model_type or GGUF arch). */
static bool fused_qkv(const struct kvp_model *m)
{
    static const char *const list[] = {"falcon", "RefinedWeb", "RefinedWebModel", "phi3", NULL};
    return family_is(m, list);
}

static bool is_falcon(const struct kvp_model *m)
{
    static const char *const list[] = {"falcon", "RefinedWeb", "RefinedWebModel", NULL};
    return family_is(m, list);
}

/* llama.cpp's LLM_TYPE_70B (src/models/{llama,qwen2,olmo}.cpp: 80 layers; for
 * arch llama, which Mistral and Mixtral convert to, only with GQA). */
static bool is_70b(const struct kvp_model *m)
{
    static const char *const llama[] = {"llama", "mistral", "mixtral", NULL};
    static const char *const other[] = {"qwen2", "olmo", NULL};
    const struct kvp_layer_spec *s0 = kvp_model_layer(m, 0);
    if (m->n_layers != 80)
        return false;
    return family_is(m, other) || (family_is(m, llama) && s0->n_heads != s0->n_kv_heads);
}

/* hparams.n_gqa(): layer 0's query heads per KV head, 0 without KV heads. */
static uint32_t n_gqa(const struct kvp_model *m)
{
    const struct kvp_layer_spec *s0 = kvp_model_layer(m, 0);
    return s0->n_kv_heads ? s0->n_heads / s0->n_kv_heads : 0;
}

/* Does the layer have an attn_v (or attn_qkv) weight, as weights.c offers its
 * tensors? MLA stores attn_k_b and attn_v_b instead (convert_hf_to_gguf
 * splits kv_b_proj), which are not; a layer sharing another's KV cache has
 * q and o only. */
static bool has_attn_v(enum kvp_layer_kind k)
{
    return k == KVP_LAYER_FULL || k == KVP_LAYER_SLIDING || k == KVP_LAYER_CHUNKED;
}

static enum category category(const struct kvp_model *m, const struct kvp_wtensor *t)
{
    switch (t->role) {
    case KVP_WR_TOKEN_EMBD: return CAT_TOKEN_EMBD;
    case KVP_WR_OUTPUT: return CAT_OUTPUT;
    case KVP_WR_ATTN_Q: return fused_qkv(m) ? CAT_ATTN_QKV : CAT_ATTN_Q;
    case KVP_WR_ATTN_K: return fused_qkv(m) ? CAT_ATTN_QKV : CAT_ATTN_K;
    case KVP_WR_ATTN_V: return CAT_ATTN_V;
    case KVP_WR_ATTN_OUT: return CAT_ATTN_OUT;
    case KVP_WR_MLA_Q_B: /* attn_q_b, or attn_q without a q LoRA */
        return t->layer < m->n_layers && kvp_model_layer(m, t->layer)->q_lora_rank == 0 ? CAT_ATTN_Q : CAT_OTHER;
    case KVP_WR_FFN_UP: case KVP_WR_EXP_UP: case KVP_WR_SHEXP_UP: return CAT_FFN_UP;
    case KVP_WR_FFN_GATE: case KVP_WR_EXP_GATE: case KVP_WR_SHEXP_GATE: return CAT_FFN_GATE;
    case KVP_WR_FFN_DOWN: case KVP_WR_EXP_DOWN: case KVP_WR_SHEXP_DOWN: return CAT_FFN_DOWN;
    case KVP_WR_POS_EMBD: case KVP_WR_ROUTER: case KVP_WR_VECTOR: case KVP_WR_TOWER: return CAT_KEEP;
    default: return CAT_OTHER; /* MLA a/b (attn_k_b, attn_v_b), recurrent projections */
    }
}

void kvp_gguf_mix_begin(const struct kvp_model *m, struct kvp_gguf_mix_state *state)
{
    memset(state, 0, sizeof *state);
    for (uint32_t il = 0; il < m->n_layers; il++)
        state->n_attn_v += has_attn_v(kvp_model_layer(m, il)->kind);
    /* init_quantize_state_counters: n_layer_all, whatever the MLP */
    state->n_ffn_down = state->n_ffn_gate = state->n_ffn_up = m->n_layers;
}

/* ---- the mixture ----------------------------------------------------------------- */

static bool use_more_bits(uint32_t i, uint32_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The file types that need an importance matrix (a tensor in them is IQ1/IQ2/
 * IQ3_XXS, or Q2_K in Q2_K_S): llama_model_quantize refuses them without one,
 * so their rules are taken with has_imatrix true; every other file type
 * without (kvplan has no imatrix). */
static bool has_imatrix(uint32_t ft)
{
    return ft == FT_IQ1_S || ft == FT_IQ1_M || ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ2_S ||
           ft == FT_IQ2_M || ft == FT_IQ3_XXS || ft == FT_IQ3_XS || ft == FT_Q2_K_S;
}

/* The IQ1/IQ2 file types, which share one branch of rules. */
static bool ft_iq2(uint32_t ft)
{
    return ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ2_S || ft == FT_IQ2_M ||
           ft == FT_IQ1_M;
}

/* The layer a layer-dependent rule reads: the tensor's own layer in MoE
 * models (llama.cpp parses blk.N from the name), else the running count. */
static uint32_t layer_of(const struct kvp_model *m, const struct kvp_wtensor *t, uint32_t counter)
{
    return m->n_experts > 1 ? t->layer : counter;
}

/* Output (and tied token embeddings): Q6_K unless the file type says otherwise. */
static enum kvp_dtype output_type(const struct kvp_model *m, uint32_t ft, enum kvp_dtype base, uint64_t nx)
{
    if (ft == FT_MXFP4_MOE || is_falcon(m) || nx % kvp_dtype_info(base)->block_elems != 0)
        return KVP_DTYPE_Q8_0;
    if (ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ3_XXS || ft == FT_IQ1_S || ft == FT_IQ2_S ||
        ft == FT_IQ2_M || ft == FT_IQ1_M)
        return KVP_DTYPE_Q5_K;
    return base != KVP_DTYPE_Q8_0 ? KVP_DTYPE_Q6_K : base;
}

static enum kvp_dtype token_embd_type(uint32_t ft, enum kvp_dtype base)
{
    if (ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ1_M)
        return KVP_DTYPE_Q2_K;
    if (ft == FT_IQ2_S || ft == FT_IQ2_M || ft == FT_IQ3_XXS)
        return KVP_DTYPE_IQ3_S;
    if (ft == FT_TQ1_0 || ft == FT_TQ2_0)
        return KVP_DTYPE_Q4_K;
    return base;
}

/* The IQ1/IQ2 branch. */
static enum kvp_dtype iq2_type(const struct kvp_model *m, uint32_t ft, enum category cat, enum kvp_dtype base,
                               struct kvp_gguf_mix_state *st)
{
    bool s_m = ft == FT_IQ2_S || ft == FT_IQ2_M;
    enum kvp_dtype t = base;

    if (cat == CAT_ATTN_V || cat == CAT_ATTN_QKV) {
        if (n_gqa(m) >= 4 || m->n_experts >= 4)
            t = KVP_DTYPE_Q4_K;
        else
            t = s_m ? KVP_DTYPE_IQ3_S : KVP_DTYPE_Q2_K;
    } else if (m->n_experts == 8 && cat == CAT_ATTN_K) {
        t = KVP_DTYPE_Q4_K;
    } else if (cat == CAT_FFN_DOWN) {
        if (st->i_ffn_down < st->n_ffn_down / 8) /* the running count, in every model */
            t = s_m ? KVP_DTYPE_IQ3_S : KVP_DTYPE_Q2_K;
        st->i_ffn_down++;
    } else if (cat == CAT_ATTN_OUT) {
        if (m->n_experts == 8)
            t = KVP_DTYPE_Q5_K;
        else if (ft == FT_IQ1_S || ft == FT_IQ1_M)
            t = KVP_DTYPE_IQ2_XXS;
        else if (s_m)
            t = KVP_DTYPE_IQ3_S;
    }
    return t;
}

/* attn_v (and attn_qkv): more bits, by file type and position. */
static enum kvp_dtype attn_v_type(const struct kvp_model *m, uint32_t ft, enum kvp_dtype base,
                                  const struct kvp_gguf_mix_state *st)
{
    uint32_t gqa = n_gqa(m), i = st->i_attn_v;
    enum kvp_dtype t = base;

    if (ft == FT_Q2_K)
        t = gqa >= 4 ? KVP_DTYPE_Q4_K : KVP_DTYPE_Q3_K;
    else if (ft == FT_Q2_K_S && gqa >= 4)
        t = KVP_DTYPE_Q4_K;
    else if (ft == FT_IQ3_XXS)
        t = gqa >= 4 ? KVP_DTYPE_Q4_K : !has_imatrix(ft) ? KVP_DTYPE_IQ3_S : KVP_DTYPE_IQ3_XXS;
    else if ((ft == FT_IQ3_XS || ft == FT_IQ3_S) && gqa >= 4)
        t = KVP_DTYPE_Q4_K;
    else if (ft == FT_IQ3_M)
        t = KVP_DTYPE_Q4_K;
    else if (ft == FT_Q3_K_M)
        t = i < 2 ? KVP_DTYPE_Q5_K : KVP_DTYPE_Q4_K;
    else if (ft == FT_Q3_K_L)
        t = KVP_DTYPE_Q5_K;
    else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && gqa >= 4)
        t = KVP_DTYPE_Q5_K;
    else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(i, st->n_attn_v))
        t = KVP_DTYPE_Q6_K;
    else if (ft == FT_Q4_K_S && i < 4)
        t = KVP_DTYPE_Q5_K;
    if (is_70b(m) && (t == KVP_DTYPE_Q3_K || t == KVP_DTYPE_Q4_K))
        t = KVP_DTYPE_Q5_K; /* 8 heads share attn_v: more bits for little size */
    if (m->n_experts == 8)
        t = KVP_DTYPE_Q8_0;
    return t;
}

static enum kvp_dtype ffn_down_type(const struct kvp_model *m, uint32_t ft, const struct kvp_wtensor *w,
                                    enum kvp_dtype base, const struct kvp_gguf_mix_state *st)
{
    uint32_t i = layer_of(m, w, st->i_ffn_down), n = st->n_ffn_down;
    bool falcon = is_falcon(m);

    if (ft == FT_Q2_K)
        return KVP_DTYPE_Q3_K;
    if (ft == FT_Q2_K_S)
        return i < n / 8 ? KVP_DTYPE_Q4_K : base;
    if (ft == FT_IQ3_XXS && !has_imatrix(ft))
        return i < n / 8 ? KVP_DTYPE_Q4_K : KVP_DTYPE_Q3_K;
    if (ft == FT_Q3_K_M)
        return i < n / 16 ? KVP_DTYPE_Q5_K : !falcon || use_more_bits(i, n) ? KVP_DTYPE_Q4_K : KVP_DTYPE_Q3_K;
    if (ft == FT_IQ3_M && (i < n / 8 || (m->n_experts == 8 && use_more_bits(i, n))))
        return KVP_DTYPE_Q4_K;
    if (ft == FT_Q3_K_L)
        return falcon ? KVP_DTYPE_Q4_K : KVP_DTYPE_Q5_K;
    if (ft == FT_Q4_K_M) {
        if (falcon)
            return i < n / 16 ? KVP_DTYPE_Q6_K : use_more_bits(i, n) ? KVP_DTYPE_Q5_K : KVP_DTYPE_Q4_K;
        return use_more_bits(i, n) ? KVP_DTYPE_Q6_K : base;
    }
    if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !has_imatrix(ft))
        return KVP_DTYPE_Q5_K;
    if (ft == FT_Q5_K_M && use_more_bits(i, n))
        return KVP_DTYPE_Q6_K;
    if (ft == FT_Q4_K_S && !falcon && i < n / 8)
        return KVP_DTYPE_Q5_K;
    if ((ft == FT_Q4_0 || ft == FT_Q5_0) && has_imatrix(ft) && i < n / 8)
        return ft == FT_Q4_0 ? KVP_DTYPE_Q4_1 : KVP_DTYPE_Q5_1;
    return base;
}

static enum kvp_dtype attn_out_type(const struct kvp_model *m, uint32_t ft, enum kvp_dtype base)
{
    if (is_falcon(m))
        return ft == FT_Q3_K_L ? KVP_DTYPE_Q4_K : base;
    if (m->n_experts == 8) {
        bool more = ft == FT_Q2_K || ft == FT_IQ3_XS || ft == FT_IQ3_XXS || ft == FT_Q3_K_S || ft == FT_Q3_K_M ||
                    ft == FT_IQ4_NL || ft == FT_Q4_K_S || ft == FT_Q4_K_M || ft == FT_IQ3_S || ft == FT_IQ3_M ||
                    ft == FT_IQ4_XS;
        return more ? KVP_DTYPE_Q5_K : base;
    }
    switch (ft) {
    case FT_Q2_K: return KVP_DTYPE_Q3_K;
    case FT_IQ3_XXS: return KVP_DTYPE_IQ3_S;
    case FT_Q3_K_M: return KVP_DTYPE_Q4_K;
    case FT_Q3_K_L: return KVP_DTYPE_Q5_K;
    case FT_IQ3_M: return KVP_DTYPE_Q4_K;
    default: return base;
    }
}

/* llama_tensor_get_type_impl: the type for a quantizable tensor, counters advanced. */
static enum kvp_dtype mix_type(const struct kvp_model *m, uint32_t ft, const struct kvp_wtensor *t,
                               enum category cat, enum kvp_dtype base, struct kvp_gguf_mix_state *st)
{
    enum kvp_dtype r = base;

    if (cat == CAT_OUTPUT || (m->tied_embeddings && cat == CAT_TOKEN_EMBD))
        return output_type(m, ft, base, t->cols);
    if (ft == FT_MXFP4_MOE) /* routed experts (ne2 > 1) in mxfp4, the rest q8_0 */
        return t->count > 1 ? KVP_DTYPE_MXFP4 : KVP_DTYPE_Q8_0;
    if (cat == CAT_TOKEN_EMBD)
        return token_embd_type(ft, base);
    if (ft_iq2(ft)) {
        r = iq2_type(m, ft, cat, base, st);
    } else if (cat == CAT_ATTN_V || cat == CAT_ATTN_QKV) {
        r = attn_v_type(m, ft, base, st);
    } else if (cat == CAT_ATTN_K) {
        if (m->n_experts == 8)
            r = KVP_DTYPE_Q8_0;
        else if (ft == FT_IQ3_XS)
            r = KVP_DTYPE_IQ3_XXS;
        else if (ft == FT_IQ3_XXS)
            r = KVP_DTYPE_IQ2_S;
    } else if (cat == CAT_ATTN_Q) {
        if (ft == FT_IQ3_XS)
            r = KVP_DTYPE_IQ3_XXS;
        else if (ft == FT_IQ3_XXS)
            r = KVP_DTYPE_IQ2_S;
    } else if (cat == CAT_FFN_DOWN) {
        r = ffn_down_type(m, ft, t, base, st);
        st->i_ffn_down++;
    } else if (cat == CAT_ATTN_OUT) {
        r = attn_out_type(m, ft, base);
    } else if (cat == CAT_FFN_GATE || cat == CAT_FFN_UP) {
        uint32_t *count = cat == CAT_FFN_GATE ? &st->i_ffn_gate : &st->i_ffn_up;
        uint32_t n = cat == CAT_FFN_GATE ? st->n_ffn_gate : st->n_ffn_up, i = layer_of(m, t, *count);
        if (ft == FT_IQ3_XS && i >= n / 8 && i < 7 * n / 8)
            r = KVP_DTYPE_IQ3_XXS;
        ++*count;
    }
    /* one attn_v-like tensor per layer: a fused qkv counts once, at its v part */
    if (t->role == KVP_WR_ATTN_V)
        st->i_attn_v++;
    return r;
}

/* tensor_type_fallback: a block that does not divide the row (ne0). */
static enum kvp_dtype fallback(enum kvp_dtype t, uint64_t ncols)
{
    enum kvp_dtype r = t;

    if (ncols % kvp_dtype_info(t)->block_elems == 0)
        return t;
    switch (t) {
    case KVP_DTYPE_IQ1_S: case KVP_DTYPE_IQ1_M: case KVP_DTYPE_IQ2_XXS: case KVP_DTYPE_IQ2_XS:
    case KVP_DTYPE_IQ2_S: case KVP_DTYPE_IQ3_XXS: case KVP_DTYPE_IQ3_S: case KVP_DTYPE_IQ4_XS:
        r = KVP_DTYPE_IQ4_NL;
        break;
    case KVP_DTYPE_Q2_K: case KVP_DTYPE_Q3_K: case KVP_DTYPE_TQ1_0: case KVP_DTYPE_TQ2_0:
        r = KVP_DTYPE_Q4_0;
        break;
    case KVP_DTYPE_Q4_K: r = KVP_DTYPE_Q5_0; break;
    case KVP_DTYPE_Q5_K: r = KVP_DTYPE_Q5_1; break;
    case KVP_DTYPE_Q6_K: r = KVP_DTYPE_Q8_0; break;
    default: break; /* a 32-value block already: nothing smaller to demote to */
    }
    return ncols % kvp_dtype_info(r)->block_elems == 0 ? r : KVP_DTYPE_F16;
}

enum kvp_dtype kvp_gguf_mix_type(const struct kvp_model *m, uint32_t ftype, const struct kvp_wtensor *t,
                                 struct kvp_gguf_mix_state *state)
{
    const struct ftype_info *fi = ftype_find(ftype);
    enum category cat = category(m, t);

    if (!fi)
        return KVP_DTYPE_F16;
    if (cat == CAT_KEEP || (t->rows <= 1 && t->count <= 1))
        return KVP_DTYPE_F32; /* not quantized: as convert_hf_to_gguf stores it */
    if (kvp_dtype_info(fi->base)->block_elems == 1)
        return fi->base; /* F32, F16, BF16: no mixture */
    return fallback(mix_type(m, ftype, t, cat, fi->base, state), t->cols);
}
