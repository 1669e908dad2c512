/* model.h -- the normalized model every input format is parsed into.
 *
 * A model is a stack of layers. Each layer points at one of a few distinct
 * layer specs (kind of attention, heads, head dims, window, recurrent state,
 * kind of MLP), so a 126-layer model with two layer shapes is stored as two
 * specs and 126 one-byte indices. Model-wide fields give what weights need.
 *
 *     struct kvp_model *m = NULL;
 *     struct kvp_error err = {0};
 *     if (kvp_model_load("models/llama-3.1-8b.yaml", &m, &err) != KVP_OK) ...
 *     const struct kvp_layer_spec *s = kvp_model_layer(m, 0);
 *     printf("%u layers, layer 0 has %u KV heads\n", m->n_layers, s->n_kv_heads);
 *     kvp_model_free(m);
 *
 * kvp_model_load dispatches on the input: a kvplan YAML model, a Hugging Face
 * config.json (or a folder holding one) or a GGUF file. The caller owns the
 * returned model and releases it with kvp_model_free (free(NULL) is a no-op).
 * The engine trusts a model only after kvp_model_validate has passed; every
 * loader calls it.
 */
#ifndef KVPLAN_MODEL_H
#define KVPLAN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/wquant.h"

#define KVP_MAX_LAYERS 1024
#define KVP_MAX_SPECS 32
#define KVP_NAME_MAX 96
#define KVP_TEXT_MAX 320
#define KVP_MAX_WARNINGS 4
/* Upper bounds kvp_model_validate enforces, so that the engine's products of
 * up to three dimensions cannot wrap 64 bits (2^20 is 20x the widest real
 * model's dims). */
#define KVP_MAX_DIM (1u << 20)     /* heads, head dims, widths, ranks, state dims */
#define KVP_MAX_VOCAB (1u << 24)
#define KVP_MAX_EXPERTS 65536u

enum kvp_layer_kind {
    KVP_LAYER_FULL,      /* causal attention over every past token */
    KVP_LAYER_SLIDING,   /* attention over the last `window` tokens */
    KVP_LAYER_CHUNKED,   /* attention within fixed chunks of `window` tokens */
    KVP_LAYER_MLA,       /* multi-head latent attention: one compressed latent per token */
    KVP_LAYER_RECURRENT, /* fixed-size state per sequence (Mamba, linear attention) */
    KVP_LAYER_SHARED,    /* reads the KV cache of an earlier layer; stores none */
    KVP_LAYER_NONE,      /* no token mixing, no cache */
    KVP_LAYER_KIND_COUNT
};

enum kvp_mlp_kind {
    KVP_MLP_DENSE, /* one feed-forward block of `intermediate` */
    KVP_MLP_MOE,   /* routed experts (+ shared experts) */
    KVP_MLP_NONE,  /* no feed-forward block */
    KVP_MLP_KIND_COUNT
};

enum kvp_recurrent_kind {
    KVP_REC_MAMBA,  /* Mamba-1: conv (d_conv-1)*d_inner + ssm d_inner*d_state */
    KVP_REC_MAMBA2, /* Mamba-2: conv (d_conv-1)*(d_inner+2*groups*d_state) + ssm heads*head_dim*d_state */
    KVP_REC_GDN,    /* gated DeltaNet: conv (k-1)*(2*Hk*dk+Hv*dv) + state Hv*dk*dv */
    KVP_REC_KIND_COUNT
};

/* Recurrent mixer dimensions; which fields matter depends on `kind`. */
struct kvp_recurrent {
    enum kvp_recurrent_kind kind;
    uint32_t d_inner;  /* mamba: expand * hidden */
    uint32_t d_state;  /* mamba: SSM state size N */
    uint32_t d_conv;   /* conv kernel width (all kinds) */
    uint32_t dt_rank;  /* mamba-1: rank of the dt projection */
    uint32_t n_groups; /* mamba-2: B/C groups */
    uint32_t n_heads;  /* mamba-2 heads; gdn: value heads */
    uint32_t n_k_heads;  /* gdn: key heads */
    uint32_t k_head_dim; /* gdn */
    uint32_t v_head_dim; /* gdn; mamba-2 head dim */
    bool bc_norms;       /* mamba-1: RMS norms on dt, B and C (Jamba) */
};

struct kvp_layer_spec {
    enum kvp_layer_kind kind;
    enum kvp_mlp_kind mlp;
    uint32_t n_heads;    /* query heads (attention kinds) */
    uint32_t n_kv_heads; /* KV heads; 1 for MLA (one shared latent) */
    uint32_t head_dim_k; /* K (and Q) head dim; MLA: qk_nope + qk_rope */
    uint32_t head_dim_v; /* V head dim; MLA: v_head_dim */
    uint32_t window;     /* SLIDING: window W tokens; CHUNKED: chunk C tokens */
    uint32_t shares;     /* SHARED: index of the layer whose cache it reads */
    /* MLA (DeepSeek V2/V3, Kimi K2): */
    uint32_t kv_lora_rank; /* latent rank cached per token */
    uint32_t qk_rope_dim;  /* decoupled RoPE key dims cached per token */
    uint32_t q_lora_rank;  /* 0 = plain q projection */
    struct kvp_recurrent rec; /* RECURRENT only */
};

enum kvp_norm_kind { KVP_NORM_RMS, KVP_NORM_LAYER };
enum kvp_act_kind { KVP_ACT_GATED, KVP_ACT_PLAIN }; /* SwiGLU-style 3 matrices vs 2 */

struct kvp_model {
    char name[KVP_NAME_MAX];   /* lower-case id, e.g. "llama-3.1-8b" */
    char hf_id[KVP_NAME_MAX];  /* Hugging Face repo id, "" if none */
    char family[KVP_NAME_MAX]; /* HF model_type or "" */
    char source[KVP_TEXT_MAX]; /* where the values come from */
    char file[KVP_TEXT_MAX];   /* path it was loaded from ("" if built) */
    enum kvp_dtype dtype;      /* native weight and cache dtype */
    enum kvp_dtype state_dtype; /* recurrent state dtype */
    uint64_t max_context;      /* max positions, tokens */
    /* weights: */
    uint32_t hidden;
    uint32_t intermediate;      /* dense MLP width */
    uint32_t vocab;
    bool tied_embeddings;
    uint32_t learned_positions; /* rows of a learned position table (OPT, GPT-3), 0 = RoPE */
    enum kvp_norm_kind norm;
    enum kvp_act_kind act;
    uint32_t norms_per_layer;   /* hidden-sized norms in each layer */
    bool qk_norm;               /* per-head-dim q and k norms (Qwen3, Gemma 3) */
    bool attn_qkv_bias;         /* biases on q, k, v projections */
    bool attn_out_bias;
    bool mlp_bias;
    bool attn_sinks;            /* one learned sink logit per head (gpt-oss) */
    bool attn_gate;             /* q projection also yields an output gate, 2x wide (Qwen3-Next) */
    /* MoE: */
    uint32_t n_experts;         /* routed experts per MoE layer */
    uint32_t n_experts_active;  /* routed experts per token */
    uint32_t expert_intermediate;
    uint32_t n_shared_experts;
    uint32_t shared_intermediate; /* width of each shared expert */
    bool shared_expert_gate;    /* sigmoid gate on the shared expert (Qwen2-MoE) */
    bool router_bias;           /* bias per expert on the router */
    bool expert_bias;           /* biases inside each expert (gpt-oss) */
    /* beside the text model, what a multimodal checkpoint stores and engines load with it: */
    uint64_t tower_params;      /* vision (audio) encoders and their projectors; 0 = none or not counted */
    char tower[KVP_TEXT_MAX];   /* what was counted and how ("siglip_vision_model: ..."), "" = none */
    /* how the checkpoint stores its weights (wquant.h): */
    struct kvp_wscheme wscheme; /* its quantization config; method "" = none */
    struct kvp_wtable wtable;   /* stored bytes from the file's own headers; n 0 = none */
    char arch[24];              /* GGUF general.architecture, "" otherwise */
    /* layers: */
    uint32_t n_layers;
    uint32_t n_specs;
    struct kvp_layer_spec specs[KVP_MAX_SPECS];
    uint8_t layer_spec[KVP_MAX_LAYERS]; /* index into specs, per layer */
    /* what a loader guessed or ignored, for the front end to print: */
    uint32_t n_warnings;
    char warnings[KVP_MAX_WARNINGS][KVP_TEXT_MAX];
};

KVP_API const char *kvp_layer_kind_name(enum kvp_layer_kind k); /* "full", "sliding", ... */
KVP_API bool kvp_layer_kind_from_name(const char *s, enum kvp_layer_kind *out);
KVP_API const char *kvp_mlp_kind_name(enum kvp_mlp_kind k);     /* "dense", "moe", "none" */
KVP_API bool kvp_mlp_kind_from_name(const char *s, enum kvp_mlp_kind *out);
KVP_API const char *kvp_recurrent_kind_name(enum kvp_recurrent_kind k);
KVP_API bool kvp_recurrent_kind_from_name(const char *s, enum kvp_recurrent_kind *out);

/* A zeroed model with the defaults (bf16, RMS norm, gated MLP, 2 norms/layer). */
KVP_API void kvp_model_init(struct kvp_model *m);

/* Append n layers of spec s, reusing an equal spec if there is one. */
KVP_API enum kvp_status kvp_model_add_layers(struct kvp_model *m, const struct kvp_layer_spec *s,
                                     uint32_t n, struct kvp_error *err);

static inline const struct kvp_layer_spec *kvp_model_layer(const struct kvp_model *m, uint32_t i)
{
    return &m->specs[m->layer_spec[i]];
}

/* Record a warning (printf-style); past KVP_MAX_WARNINGS the last one says more were dropped. */
KVP_API void kvp_model_warn(struct kvp_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "62 layers: 52 sliding + 10 full" -- layer counts by kind, most first. */
KVP_API const char *kvp_model_layer_summary(const struct kvp_model *m, char *buf, uint32_t n);

/* Check every invariant the engine relies on, one named check each; the
 * message names the field and shows the values. */
KVP_API enum kvp_status kvp_model_validate(const struct kvp_model *m, struct kvp_error *err);

/* Load a model from a path: a directory (its config.json), a .gguf file, a
 * .json file (Hugging Face config) or a kvplan YAML model. */
KVP_API enum kvp_status kvp_model_load(const char *path, struct kvp_model **out, struct kvp_error *err);

/* Parse kvplan YAML / HF JSON text already in memory; `file` names it in errors. */
KVP_API enum kvp_status kvp_model_parse_yaml(const char *text, uint64_t len, const char *file,
                                     struct kvp_model *m, struct kvp_error *err);
KVP_API enum kvp_status kvp_model_parse_hf(const char *text, uint64_t len, const char *file,
                                   struct kvp_model *m, struct kvp_error *err);
KVP_API enum kvp_status kvp_model_parse_gguf(const uint8_t *data, uint64_t len, const char *file,
                                     struct kvp_model *m, struct kvp_error *err);

/* Write m as kvplan YAML (libyaml's emitter) into a malloc'd NUL-terminated
 * string *out (caller frees). Reading it back gives an equal model. */
KVP_API enum kvp_status kvp_model_emit_yaml(const struct kvp_model *m, char **out, struct kvp_error *err);

KVP_API void kvp_model_free(struct kvp_model *m);

#endif
