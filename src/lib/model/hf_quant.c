/* hf_quant.c -- a Hugging Face quantization_config as the loading library
 * applies it: which modules it quantizes and how each stores its bytes.
 * The layouts and their sources are in docs/model-format.md ("Quantized
 * checkpoints"); what cannot be applied becomes a warning, never a guess. */
#include "hf_quant.h"

#include <stdio.h>
#include <string.h>

/* ---- which modules a pattern names ------------------------------------------- */

/* The classes a modules_to_not_convert / ignore / exclude_modules entry
 * names (glob "model.layers.*.self_attn", regex "re:.*mlp.gate$" or a bare
 * name), judged by the module names transformers gives them. 0 when it
 * names nothing of the text model (vision towers) or is not understood
 * (*understood false). */
static uint32_t pattern_classes(const char *p, bool *understood)
{
    static const char *const outside[] = {"vision", "visual", "vit", "mm_projector", "multi_modal", "audio", NULL};
    const char *gate;
    size_t n = strlen(p);

    *understood = true;
    for (int i = 0; outside[i]; i++)
        if (strstr(p, outside[i]))
            return 0;
    if (strstr(p, "lm_head"))
        return 1u << KVP_WC_OUTPUT;
    if (strstr(p, "embed"))
        return 1u << KVP_WC_EMBED;
    /* a router: ...mlp.router, ...mlp.gate (not gate_proj / gate_up_proj), ...shared_expert_gate */
    gate = n >= 4 ? p + n - 4 : p;
    if (strstr(p, "router") || strstr(p, "shared_expert_gate") ||
        ((strcmp(gate, "gate") == 0 || (n >= 5 && strcmp(p + n - 5, "gate$") == 0)) && !strstr(p, "_proj")))
        return 1u << KVP_WC_ROUTER;
    if (strstr(p, "shared_expert"))
        return 1u << KVP_WC_SHARED;
    if (strstr(p, "experts"))
        return 1u << KVP_WC_EXPERTS;
    if (strstr(p, "attn") || strstr(p, "attention") || strstr(p, "q_proj") || strstr(p, "k_proj") ||
        strstr(p, "v_proj") || strstr(p, "o_proj") || strstr(p, "mixer") || strstr(p, "linear_attn"))
        return 1u << KVP_WC_ATTN;
    if (strstr(p, "mlp") || strstr(p, "feed_forward") || strstr(p, "ffn"))
        return (1u << KVP_WC_MLP) | (1u << KVP_WC_EXPERTS) | (1u << KVP_WC_SHARED) | (1u << KVP_WC_ROUTER);
    *understood = false;
    return 0;
}

/* Does a pattern name some layers only ("model.layers.3.mlp", "re:.*layers\.0\.")? */
static bool names_layers(const char *p)
{
    const char *l = strstr(p, "layers.");
    if (!l)
        l = strstr(p, "layers\\.");
    if (!l)
        return false;
    l += l[6] == '\\' ? 8 : 7;
    return *l >= '0' && *l <= '9';
}

/* Take the classes a list of module patterns leaves alone out of sc->classes. */
static enum kvp_status exclude(struct hf_quant_ctx *c, yaml_node_t *list, struct kvp_wscheme *sc)
{
    enum kvp_status st;
    if (!list || kvp_ydoc_is_null(list))
        return KVP_OK;
    if ((st = kvp_ydoc_want_seq(c->d, list, "quantization_config's module list", c->err)) != KVP_OK)
        return st;
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
        yaml_node_t *n = kvp_ydoc_node(c->d, *it);
        const char *p = kvp_ydoc_scalar(n);
        bool understood;
        uint32_t cls;
        if (!p)
            return kvp_ydoc_fail(c->d, n, c->err, KVP_ERR_SCHEMA, "a module pattern must be a string");
        cls = pattern_classes(p, &understood);
        if (!understood) {
            kvp_model_warn(c->m, "quantization_config: module pattern '%.60s' not understood: counted as quantized", p);
        } else if (cls && names_layers(p)) {
            kvp_model_warn(c->m, "quantization_config: '%.60s' leaves some layers unquantized: counted as quantized",
                           p);
        } else {
            sc->classes &= ~cls;
        }
    }
    return KVP_OK;
}

/* ---- per method ------------------------------------------------------------------ */

/* An integer key that may be -1 (GPTQ's group_size -1: one group per row): *out 0 then. */
static enum kvp_status group_size(struct hf_quant_ctx *c, yaml_node_t *q, const char *key, uint32_t *out)
{
    yaml_node_t *v = kvp_ydoc_get(c->d, q, key);
    const char *s = v ? kvp_ydoc_scalar(v) : NULL;
    if (s && strcmp(s, "-1") == 0) {
        *out = 0;
        return KVP_OK;
    }
    return kvp_ydoc_get_u32(c->d, q, key, false, out, c->err);
}

/* transformers Mxfp4Config (gpt-oss): the MoE experts' gate_up and down
 * projections as *_blocks (16 B of e2m1 per 32 values) and *_scales (1 B
 * e8m0 per 32); nothing else is converted. */
static enum kvp_status mxfp4(struct hf_quant_ctx *c, yaml_node_t *q, struct kvp_wscheme *sc)
{
    sc->q.f = kvp_format_plain(KVP_DTYPE_MXFP4);
    sc->classes = 1u << KVP_WC_EXPERTS;
    return exclude(c, kvp_ydoc_get(c->d, q, "modules_to_not_convert"), sc);
}

/* FineGrainedFP8Config (DeepSeek-V3/R1, Qwen3-FP8): e4m3 weights with an
 * f32 weight_scale_inv per weight_block_size block. */
static enum kvp_status fp8(struct hf_quant_ctx *c, yaml_node_t *q, struct kvp_wscheme *sc)
{
    yaml_node_t *bs = kvp_ydoc_get(c->d, q, "weight_block_size");
    yaml_node_t *fmt = kvp_ydoc_get(c->d, q, "fmt");
    const char *f = fmt ? kvp_ydoc_scalar(fmt) : NULL;
    enum kvp_status st;

    sc->q.kind = KVP_WQ_FP8;
    sc->q.f = kvp_format_plain(f && strcmp(f, "e5m2") == 0 ? KVP_DTYPE_FP8_E5M2 : KVP_DTYPE_FP8_E4M3);
    sc->q.scale = KVP_DTYPE_F32;
    sc->q.block_rows = sc->q.group = 128; /* FineGrainedFP8Config's default */
    if (bs && !kvp_ydoc_is_null(bs)) {
        uint64_t v[2];
        int i = 0;
        if ((st = kvp_ydoc_want_seq(c->d, bs, "'weight_block_size'", c->err)) != KVP_OK)
            return st;
        for (yaml_node_item_t *it = bs->data.sequence.items.start; it < bs->data.sequence.items.top; it++, i++) {
            if (i == 2)
                return kvp_ydoc_fail(c->d, bs, c->err, KVP_ERR_SCHEMA, "'weight_block_size' must be [rows, cols]");
            if ((st = kvp_ydoc_u64(c->d, kvp_ydoc_node(c->d, *it), "'weight_block_size'", &v[i], c->err)) != KVP_OK)
                return st;
            if (v[i] == 0 || v[i] > 65536)
                return kvp_ydoc_fail(c->d, kvp_ydoc_node(c->d, *it), c->err, KVP_ERR_RANGE,
                                 "'weight_block_size' entries must be 1..65536 (got %llu)", (unsigned long long)v[i]);
        }
        if (i != 2)
            return kvp_ydoc_fail(c->d, bs, c->err, KVP_ERR_SCHEMA, "'weight_block_size' must be [rows, cols]");
        sc->q.block_rows = (uint32_t)v[0];
        sc->q.group = (uint32_t)v[1];
    }
    sc->classes = KVP_WC_LINEAR;
    return exclude(c, kvp_ydoc_get(c->d, q, "modules_to_not_convert"), sc);
}

/* AutoAWQ (GEMM/GEMV): qweight and qzeros int32-packed, f16 scales per group. */
static enum kvp_status awq(struct hf_quant_ctx *c, yaml_node_t *q, struct kvp_wscheme *sc)
{
    uint32_t bits = 4, group = 128;
    bool zp = true;
    enum kvp_status st;
    if ((st = kvp_ydoc_get_u32(c->d, q, "bits", false, &bits, c->err)) != KVP_OK ||
        (st = kvp_ydoc_get_u32(c->d, q, "w_bit", false, &bits, c->err)) != KVP_OK ||
        (st = group_size(c, q, "group_size", &group)) != KVP_OK ||
        (st = group_size(c, q, "q_group_size", &group)) != KVP_OK ||
        (st = kvp_ydoc_get_bool(c->d, q, "zero_point", false, &zp, c->err)) != KVP_OK)
        return st;
    if (bits < 2 || bits > 8)
        return kvp_ydoc_fail(c->d, q, c->err, KVP_ERR_RANGE, "awq 'bits' must be 2..8 (got %u)", bits);
    sc->q = (struct kvp_wq){.kind = KVP_WQ_PACKED, .bits = (uint8_t)bits, .group = group, .scale = KVP_DTYPE_F16,
                            .zero_point = zp};
    sc->classes = KVP_WC_LINEAR;
    return exclude(c, kvp_ydoc_get(c->d, q, "modules_to_not_convert"), sc);
}

/* AutoGPTQ / GPTQModel: qweight, qzeros (always stored), f16 scales per
 * group and g_idx (int32 per input column, always stored). */
static enum kvp_status gptq(struct hf_quant_ctx *c, yaml_node_t *q, struct kvp_wscheme *sc)
{
    uint32_t bits = 4, group = 128;
    enum kvp_status st;
    if ((st = kvp_ydoc_get_u32(c->d, q, "bits", false, &bits, c->err)) != KVP_OK ||
        (st = group_size(c, q, "group_size", &group)) != KVP_OK)
        return st;
    if (bits < 2 || bits > 8)
        return kvp_ydoc_fail(c->d, q, c->err, KVP_ERR_RANGE, "gptq 'bits' must be 2..8 (got %u)", bits);
    sc->q = (struct kvp_wq){.kind = KVP_WQ_PACKED, .bits = (uint8_t)bits, .group = group, .scale = KVP_DTYPE_F16,
                            .zero_point = true, .g_idx = true};
    sc->classes = KVP_WC_LINEAR;
    return exclude(c, kvp_ydoc_get(c->d, q, "modules_to_not_convert"), sc);
}

/* bitsandbytes: 4-bit (nf4/fp4, absmax per 64, optionally double-quantized)
 * or LLM.int8 (int8 + f32 SCB per row); lm_head stays as it is. */
static enum kvp_status bnb(struct hf_quant_ctx *c, yaml_node_t *q, struct kvp_wscheme *sc)
{
    bool b4 = false, b8 = false, dq = false;
    char type[16] = "nf4";
    enum kvp_status st;
    if ((st = kvp_ydoc_get_bool(c->d, q, "load_in_4bit", false, &b4, c->err)) != KVP_OK ||
        (st = kvp_ydoc_get_bool(c->d, q, "load_in_8bit", false, &b8, c->err)) != KVP_OK ||
        (st = kvp_ydoc_get_bool(c->d, q, "bnb_4bit_use_double_quant", false, &dq, c->err)) != KVP_OK ||
        (st = kvp_ydoc_get_str(c->d, q, "bnb_4bit_quant_type", false, type, sizeof type, c->err)) != KVP_OK)
        return st;
    if (!b4 && !b8)
        return kvp_ydoc_fail(c->d, q, c->err, KVP_ERR_SCHEMA,
                             "bitsandbytes config sets neither load_in_4bit nor load_in_8bit");
    sc->q = b4 ? (struct kvp_wq){.kind = KVP_WQ_BNB4, .double_quant = dq, .nf4 = strcmp(type, "fp4") != 0}
               : (struct kvp_wq){.kind = KVP_WQ_BNB8};
    sc->classes = KVP_WC_LINEAR;
    return exclude(c, kvp_ydoc_get(c->d, q, "llm_int8_skip_modules"), sc);
}

/* NVIDIA ModelOpt: NVFP4 (e2m1 + fp8 scale per 16, plus f32 weight_scale_2
 * and input_scale per tensor) or FP8 (e4m3 + f32 weight and input scales). */
static enum kvp_status modelopt(struct hf_quant_ctx *c, yaml_node_t *q, struct kvp_wscheme *sc)
{
    char algo[24] = "";
    enum kvp_status st;
    yaml_node_t *inner = kvp_ydoc_get(c->d, q, "quantization");
    yaml_node_t *at = inner && inner->type == YAML_MAPPING_NODE ? inner : q;

    if ((st = kvp_ydoc_get_str(c->d, at, "quant_algo", false, algo, sizeof algo, c->err)) != KVP_OK)
        return st;
    if (strcmp(algo, "NVFP4") == 0)
        sc->q = (struct kvp_wq){.kind = KVP_WQ_FORMAT, .f = kvp_format_plain(KVP_DTYPE_NVFP4), .tensor_bytes = 8};
    else if (strcmp(algo, "FP8") == 0)
        sc->q = (struct kvp_wq){.kind = KVP_WQ_FP8, .f = kvp_format_plain(KVP_DTYPE_FP8_E4M3), .scale = KVP_DTYPE_F32,
                                .tensor_bytes = 4};
    else
        return KVP_ERR_UNSUPPORTED;
    sc->classes = KVP_WC_LINEAR;
    return exclude(c, kvp_ydoc_get(c->d, at, "exclude_modules"), sc);
}

/* llm-compressor's compressed-tensors: the first config group's weights
 * (num_bits, type, strategy, group_size, symmetric, actorder), packed per
 * `format`; `ignore` leaves modules alone. Scales are stored in the model
 * dtype; pack-quantized keeps an int64 weight_shape per tensor. */
static enum kvp_status compressed(struct hf_quant_ctx *c, yaml_node_t *q, struct kvp_wscheme *sc)
{
    yaml_node_t *groups = kvp_ydoc_get(c->d, q, "config_groups"), *w = NULL;
    char type[16] = "int", strategy[16] = "tensor", format[32] = "", actorder[16] = "";
    uint32_t bits = 8, group = 0;
    bool sym = true;
    enum kvp_status st;

    if (groups && groups->type == YAML_MAPPING_NODE &&
        groups->data.mapping.pairs.top > groups->data.mapping.pairs.start)
        w = kvp_ydoc_get(c->d, kvp_ydoc_node(c->d, groups->data.mapping.pairs.start->value), "weights");
    if (!w || w->type != YAML_MAPPING_NODE)
        return kvp_ydoc_fail(c->d, groups ? groups : q, c->err, KVP_ERR_SCHEMA,
                         "compressed-tensors config needs config_groups with a 'weights' scheme");
    if (groups->data.mapping.pairs.top - groups->data.mapping.pairs.start > 1)
        kvp_model_warn(c->m, "compressed-tensors: only the first of %d config groups is applied",
                       (int)(groups->data.mapping.pairs.top - groups->data.mapping.pairs.start));
    if ((st = kvp_ydoc_get_u32(c->d, w, "num_bits", false, &bits, c->err)) != KVP_OK ||
        (st = kvp_ydoc_get_str(c->d, w, "type", false, type, sizeof type, c->err)) != KVP_OK ||
        (st = kvp_ydoc_get_str(c->d, w, "strategy", false, strategy, sizeof strategy, c->err)) != KVP_OK ||
        (st = group_size(c, w, "group_size", &group)) != KVP_OK ||
        (st = kvp_ydoc_get_bool(c->d, w, "symmetric", false, &sym, c->err)) != KVP_OK ||
        (st = kvp_ydoc_get_str(c->d, q, "format", false, format, sizeof format, c->err)) != KVP_OK)
        return st;
    if (kvp_ydoc_get(c->d, w, "actorder") && !kvp_ydoc_is_null(kvp_ydoc_get(c->d, w, "actorder")) &&
        (st = kvp_ydoc_get_str(c->d, w, "actorder", false, actorder, sizeof actorder, c->err)) != KVP_OK)
        return st;
    if (strcmp(type, "float") == 0 && bits == 4) { /* nvfp4-pack-quantized */
        sc->q = (struct kvp_wq){.kind = KVP_WQ_FORMAT, .f = kvp_format_plain(KVP_DTYPE_NVFP4), .tensor_bytes = 8};
    } else if (strcmp(type, "float") == 0 && bits == 8) {
        sc->q = (struct kvp_wq){.kind = KVP_WQ_FP8, .f = kvp_format_plain(KVP_DTYPE_FP8_E4M3), .scale = c->m->dtype,
                                .group = strcmp(strategy, "block") == 0 ? 128 : 0,
                                .block_rows = strcmp(strategy, "tensor") == 0 ? 0
                                              : strcmp(strategy, "block") == 0 ? 128 : 1};
    } else if (strcmp(type, "int") == 0 && bits >= 2 && bits <= 8) {
        sc->q = (struct kvp_wq){.kind = KVP_WQ_PACKED, .bits = (uint8_t)bits, .scale = c->m->dtype,
                                .group = strcmp(strategy, "group") == 0 ? group : 0, .zero_point = !sym,
                                .g_idx = actorder[0] && strcmp(actorder, "false") != 0,
                                .tensor_bytes = strcmp(format, "pack-quantized") == 0 ? 16 : 0};
    } else {
        return KVP_ERR_UNSUPPORTED;
    }
    sc->classes = KVP_WC_LINEAR;
    return exclude(c, kvp_ydoc_get(c->d, q, "ignore"), sc);
}

/* fbgemm_fp8: e4m3 weights with an f32 scale per output row. */
static enum kvp_status fbgemm_fp8(struct hf_quant_ctx *c, yaml_node_t *q, struct kvp_wscheme *sc)
{
    sc->q = (struct kvp_wq){.kind = KVP_WQ_FP8, .f = kvp_format_plain(KVP_DTYPE_FP8_E4M3), .scale = KVP_DTYPE_F32,
                            .block_rows = 1};
    sc->classes = KVP_WC_LINEAR;
    return exclude(c, kvp_ydoc_get(c->d, q, "modules_to_not_convert"), sc);
}

static const struct {
    const char *method;
    enum kvp_status (*read)(struct hf_quant_ctx *c, yaml_node_t *q, struct kvp_wscheme *sc);
} methods[] = {
    {"mxfp4", mxfp4}, {"fp8", fp8}, {"awq", awq}, {"gptq", gptq}, {"bitsandbytes", bnb},
    {"modelopt", modelopt}, {"compressed-tensors", compressed}, {"fbgemm_fp8", fbgemm_fp8},
};

enum kvp_status kvp_hf_quant_read(struct hf_quant_ctx *c, yaml_node_t *q)
{
    struct kvp_wscheme sc;
    char method[24] = "";
    enum kvp_status st;

    if ((st = kvp_ydoc_want_map(c->d, q, "'quantization_config'", c->err)) != KVP_OK ||
        (st = kvp_ydoc_get_str(c->d, q, "quant_method", false, method, sizeof method, c->err)) != KVP_OK)
        return st;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        if (strcmp(method, methods[i].method) != 0)
            continue;
        memset(&sc, 0, sizeof sc);
        sc.q.kind = KVP_WQ_FORMAT;
        snprintf(sc.method, sizeof sc.method, "%s", method);
        st = methods[i].read(c, q, &sc);
        if (st == KVP_ERR_UNSUPPORTED)
            break;
        if (st != KVP_OK)
            return st;
        { /* canonical: the stored form as its name reads back (as a YAML model holds it) */
            char name[96];
            if ((st = kvp_wq_parse(kvp_wq_name(&sc.q, name, sizeof name), &sc.q, c->err)) != KVP_OK)
                return st;
        }
        c->m->wscheme = sc;
        return KVP_OK;
    }
    kvp_model_warn(c->m, "'quantization_config' (%s) is not applied: weights are counted in %s",
                   method[0] ? method : "unnamed", kvp_dtype_info(c->m->dtype)->name);
    return KVP_OK;
}
