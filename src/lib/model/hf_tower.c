/* hf_tower.c -- the vision tower and projector of a multimodal config,
 * counted from its vision_config as transformers builds them (formulas and
 * sources in docs/model-format.md, "Vision towers").
 *
 * A tower is a ViT encoder -- a patch embedding, positions, L layers of
 * attention and MLP, outer norms -- whose variants differ in a few flags
 * (the `vits` table, by vision_config.model_type), plus what a type adds
 * (SigLIP's pooling head, Llama 4's pixel-shuffle adapter). The projector
 * into the text model's width depends on the multimodal model_type
 * (`projector`). The counts are exact for the configs' own classes; the
 * safetensors headers, where a folder has them, price the same tensors
 * by their stored bytes (safetensors.c). */
#include "hf_tower.h"

#include <stdio.h>
#include <string.h>

#include "kvplan/num.h"

/* One ViT encoder's build, as its transformers modeling file writes it. */
struct vit {
    const char *type;    /* vision_config model_type */
    bool bias;           /* q, k, v, o and MLP biases */
    bool layer_norm;     /* LayerNorm (weight and bias), else RMSNorm (weight) */
    bool gated;          /* gate, up, down (Pixtral), else fc1, fc2 */
    bool patch_bias;     /* a bias on the patch embedding */
    bool cls;            /* a class embedding, and one more position */
    bool positions;      /* a learned position table, else rotary */
    uint8_t outer_norms; /* norms before / after the layers */
};

static const struct vit vits[] = {
    /* modeling_siglip.py SiglipVisionTransformer: post_layernorm; the head when vision_use_head */
    {"siglip_vision_model", true, true, false, true, false, true, 1},
    /* modeling_clip.py CLIPVisionTransformer: pre_layrnorm, post_layernorm */
    {"clip_vision_model", true, true, false, false, true, true, 2},
    /* modeling_pixtral.py PixtralTransformer: ln_pre; 2-D rotary positions */
    {"pixtral", false, false, true, false, false, false, 1},
    /* modeling_llama4.py Llama4VisionModel: layernorm_pre, layernorm_post; the vision_adapter */
    {"llama4_vision_model", true, true, false, false, true, true, 2},
};

/* The running count, checked: ok turns false on overflow. */
struct count {
    uint64_t n;
    bool ok;
};

static void add(struct count *c, uint64_t a, uint64_t b)
{
    uint64_t p;
    c->ok = c->ok && kvp_mul(a, b, &p) && kvp_add(c->n, p, &c->n);
}

struct ctx {
    struct ydoc *d;
    yaml_node_t *vc; /* vision_config */
    struct kvp_error *err;
};

/* The most any width, count or size of a tower may be: 2^15, so that no
 * product of four of them (channels x frames x patch x patch) leaves 64
 * bits before the checked sums take over. */
#define DIM_MAX 32768u

/* map's key (def when absent and def is not 0, else an error), at most DIM_MAX. */
static enum kvp_status dim(struct ctx *x, yaml_node_t *map, const char *k, uint64_t def, uint64_t *out)
{
    yaml_node_t *v = kvp_ydoc_get(x->d, map, k);
    const char *in = map == x->vc ? "vision_config: " : "";
    enum kvp_status st;
    if (!v || kvp_ydoc_is_null(v)) {
        *out = def;
        return def ? KVP_OK : kvp_ydoc_fail(x->d, map, x->err, KVP_ERR_SCHEMA, "%smissing required key '%s'", in, k);
    }
    if ((st = kvp_ydoc_u64(x->d, v, k, out, x->err)) != KVP_OK)
        return st;
    return *out <= DIM_MAX ? KVP_OK
                           : kvp_ydoc_fail(x->d, v, x->err, KVP_ERR_RANGE, "%s'%s' must be at most %u (got %llu)", in,
                                           k, DIM_MAX, (unsigned long long)*out);
}

/* vision_config's key. */
static enum kvp_status key(struct ctx *x, const char *k, uint64_t def, uint64_t *out)
{
    return dim(x, x->vc, k, def, out);
}

/* The encoder of type v; its width in *hidden. */
static enum kvp_status encoder(struct ctx *x, const struct vit *v, struct count *c, uint64_t *hidden)
{
    uint64_t h, inter, layers, ch, patch, image = 0, norm, side;
    enum kvp_status st;

    if ((st = key(x, "hidden_size", 0, &h)) || (st = key(x, "intermediate_size", 0, &inter)) ||
        (st = key(x, "num_hidden_layers", 0, &layers)) || (st = key(x, "num_channels", 3, &ch)) ||
        (st = key(x, "patch_size", 0, &patch)) || (v->positions && (st = key(x, "image_size", 0, &image))))
        return st;
    if (patch == 0)
        return kvp_ydoc_fail(x->d, kvp_ydoc_get(x->d, x->vc, "patch_size"), x->err, KVP_ERR_RANGE,
                             "vision_config: 'patch_size' must be positive");
    norm = v->layer_norm ? 2 * h : h;
    side = image / patch;
    add(c, ch * patch * patch, h);             /* patch embedding */
    add(c, v->patch_bias, h);
    add(c, v->cls, h);                         /* class embedding */
    add(c, v->positions ? side * side + v->cls : 0, h);
    add(c, v->outer_norms, norm);
    add(c, layers, 4 * h * h + (v->bias ? 4 * h : 0) + 2 * norm); /* q, k, v, o; two norms */
    add(c, layers, (v->gated ? 3 : 2) * h * inter + (v->bias ? inter + h : 0));
    *hidden = h;
    return KVP_OK;
}

/* What a tower type adds past its encoder. */
static enum kvp_status extras(struct ctx *x, const struct vit *v, uint64_t h, struct count *c)
{
    enum kvp_status st;
    uint64_t inter, in, out;
    bool head = true;
    yaml_node_t *n;

    if (strcmp(v->type, "siglip_vision_model") == 0) {
        /* SiglipMultiheadAttentionPoolingHead: probe, attention (in 3h x h, out h x h, biases), norm, MLP */
        if ((n = kvp_ydoc_get(x->d, x->vc, "vision_use_head")) && !kvp_ydoc_is_null(n) &&
            (st = kvp_ydoc_bool(x->d, n, "vision_use_head", &head, x->err)) != KVP_OK)
            return st;
        if (head && (st = key(x, "intermediate_size", 0, &inter)) == KVP_OK) {
            add(c, 1, h + 4 * h * h + 4 * h + 2 * h);
            add(c, 2 * h, inter);
            add(c, 1, inter + h);
        }
        return head ? st : KVP_OK;
    }
    if (strcmp(v->type, "llama4_vision_model") == 0) {
        /* Llama4VisionPixelShuffleMLP: fc1 intermediate -> projector_input_dim, fc2 out x out, no biases */
        if ((st = key(x, "intermediate_size", 0, &inter)) || (st = key(x, "projector_input_dim", 0, &in)) ||
            (st = key(x, "projector_output_dim", 0, &out)))
            return st;
        add(c, inter, in);
        add(c, out, out);
    }
    return KVP_OK;
}

/* Qwen2-VL and Qwen2.5-VL (modeling_qwen2_vl.py, modeling_qwen2_5_vl.py):
 * a 3-D patch embedding over temporal_patch_size frames, `depth` blocks
 * with fused qkv, and a patch merger of spatial_merge_size^2 patches that
 * is the projector into the text width. Qwen2-VL: LayerNorms, fc1/fc2 of
 * embed_dim x mlp_ratio, output `hidden_size`; Qwen2.5-VL: RMSNorms, a
 * gated MLP of intermediate_size, output out_hidden_size. */
static enum kvp_status qwen_vl(struct ctx *x, bool v25, struct count *tower, struct count *proj, uint64_t *hidden)
{
    uint64_t h, inter, out, layers, ch, patch, frames, merge, ratio = 0, norm, w;
    enum kvp_status st;

    if ((st = key(x, v25 ? "hidden_size" : "embed_dim", 0, &h)) ||
        (st = v25 ? key(x, "intermediate_size", 0, &inter) : key(x, "mlp_ratio", 4, &ratio)) ||
        (st = key(x, v25 ? "out_hidden_size" : "hidden_size", 0, &out)) || (st = key(x, "depth", 0, &layers)) ||
        (st = key(x, "in_chans", 3, &ch)) || (st = key(x, "patch_size", 14, &patch)) ||
        (st = key(x, "temporal_patch_size", 2, &frames)) || (st = key(x, "spatial_merge_size", 2, &merge)))
        return st;
    if (!v25)
        inter = h * ratio;
    norm = v25 ? h : 2 * h;
    add(tower, ch * frames * patch * patch, h);
    add(tower, layers, 4 * h * h + 4 * h + 2 * norm);
    add(tower, layers, (v25 ? 3 : 2) * h * inter + (v25 ? 2 * inter : inter) + h);
    w = h * merge * merge;
    add(proj, 1, norm);
    add(proj, w, w + 1);
    add(proj, w + 1, out);
    *hidden = h;
    return KVP_OK;
}

/* The projector of multimodal model_type `type` from the tower's width vh
 * into the text width th; false when kvplan has no formula for it. */
static enum kvp_status projector(struct ctx *x, yaml_node_t *root, const char *type, uint64_t vh, uint64_t th,
                                 struct count *c, bool *known)
{
    yaml_node_t *b = kvp_ydoc_get(x->d, root, "multimodal_projector_bias");
    bool bias = strncmp(type, "llava", 5) == 0; /* LlavaConfig's default; Mistral3Config's is false */
    uint64_t merge, out;
    enum kvp_status st;

    *known = true;
    if (b && !kvp_ydoc_is_null(b) && (st = kvp_ydoc_bool(x->d, b, "multimodal_projector_bias", &bias, x->err)))
        return st;
    if (strcmp(type, "gemma3") == 0) { /* Gemma3MultiModalProjector: vh x th, RMSNorm(vh) */
        add(c, vh, th);
        add(c, 1, vh);
    } else if (strcmp(type, "mistral3") == 0) { /* Mistral3MultiModalProjector: norm, patch merger, 2 linears */
        if ((st = dim(x, root, "spatial_merge_size", 2, &merge)) != KVP_OK)
            return st;
        add(c, 1, vh);
        add(c, vh * merge * merge, vh);
        add(c, vh + th + 2 * bias, th);
    } else if (strcmp(type, "llava") == 0 || strcmp(type, "llava_next") == 0) {
        add(c, vh + th + 2 * bias, th);                  /* LlavaMultiModalProjector: linear_1, linear_2 */
        add(c, strcmp(type, "llava_next") == 0, th);     /* LlavaNext's image_newline */
    } else if (strcmp(type, "llama4") == 0) {            /* Llama4MultiModalProjector: vision_output_dim x th */
        if ((st = key(x, "vision_output_dim", 0, &out)) != KVP_OK)
            return st;
        add(c, out, th);
    } else {
        *known = false;
    }
    return KVP_OK;
}

enum kvp_status kvp_hf_tower_read(struct ydoc *d, yaml_node_t *root, const char *type, struct kvp_model *m,
                                  struct kvp_error *err)
{
    struct ctx x = {d, kvp_ydoc_get(d, root, "vision_config"), err};
    struct count tower = {0, true}, proj = {0, true};
    const struct vit *v = NULL;
    char vtype[KVP_NAME_MAX] = "", a[32], b[32]; /* kvp_ydoc_get_str leaves it when the key is absent */
    uint64_t vh = 0;
    bool known;
    enum kvp_status st;

    if (kvp_ydoc_get(d, root, "audio_config"))
        kvp_model_warn(m, "the audio tower (audio_config) is not counted in the weights: kvplan has no formula "
                          "for it (a folder's safetensors headers price it)");
    if (!x.vc || kvp_ydoc_is_null(x.vc))
        return KVP_OK;
    if ((st = kvp_ydoc_want_map(d, x.vc, "vision_config", err)) != KVP_OK ||
        (st = kvp_ydoc_get_str(d, x.vc, "model_type", false, vtype, sizeof vtype, err)) != KVP_OK)
        return st;
    if (!vtype[0]) /* Qwen2-VL's vision_config names no type: the model's is its */
        snprintf(vtype, sizeof vtype, "%s", type);
    for (size_t i = 0; i < sizeof vits / sizeof vits[0]; i++)
        if (strcmp(vits[i].type, vtype) == 0)
            v = &vits[i];
    if (strcmp(vtype, "qwen2_vl") == 0 || strcmp(vtype, "qwen2_5_vl") == 0) {
        known = true;
        type = vtype;
        if ((st = qwen_vl(&x, strcmp(vtype, "qwen2_5_vl") == 0, &tower, &proj, &vh)) != KVP_OK)
            return st;
    } else if (!v) {
        kvp_model_warn(m, "the vision tower (vision_config model_type '%s') is not counted in the weights: kvplan "
                          "counts siglip_vision_model, clip_vision_model, pixtral, llama4_vision_model, qwen2_vl and "
                          "qwen2_5_vl ones (a folder's safetensors headers price any)", vtype);
        return KVP_OK;
    } else if ((st = encoder(&x, v, &tower, &vh)) != KVP_OK || (st = extras(&x, v, vh, &tower)) != KVP_OK ||
               (st = projector(&x, root, type, vh, m->hidden, &proj, &known)) != KVP_OK) {
        return st;
    }
    if (!tower.ok || !proj.ok || !kvp_add(tower.n, proj.n, &m->tower_params))
        return kvp_ydoc_fail(d, x.vc, err, KVP_ERR_OVERFLOW, "vision_config: the tower's parameters overflow 64 bits");
    if (!known)
        kvp_model_warn(m, "the projector of '%s' from the vision tower into the text model is not counted: kvplan "
                          "counts gemma3, mistral3, llava, llava_next and llama4 ones", type);
    snprintf(m->tower, sizeof m->tower, "vision_config: %s tower %s + %s projector %s", vtype,
             kvp_count_text(tower.n, a, sizeof a), known ? type : "uncounted", kvp_count_text(proj.n, b, sizeof b));
    return KVP_OK;
}
