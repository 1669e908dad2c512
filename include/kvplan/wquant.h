/* wquant.h -- how a checkpoint stores its weights, and what a user asks for.
 *
 * Three things, from the file to the answer:
 *   struct kvp_wq      the stored form of one quantized linear weight: its
 *                      codes, scales, zero points and per-tensor extras
 *                      (fp8 with 128x128 block scales, GPTQ int4 g128, NF4 ...);
 *   struct kvp_wscheme what a checkpoint's quantization_config says: which
 *                      modules are quantized, and in which kvp_wq; the rest
 *                      stays in the model dtype. Read by model_hf.c and the
 *                      YAML model's `quantization` block;
 *   struct kvp_wtable  what a file's own headers say: stored bytes per
 *                      dtype (the GGUF tensor table, safetensors headers);
 *   struct kvp_wstore  what a deployment weighs the weights as: the
 *                      checkpoint's storage (the default: the table if the
 *                      model has one, else its scheme), one format for every
 *                      projection (--weight-dtype int4), or a llama.cpp file
 *                      type (--weight-dtype q4_k_m) priced per tensor by
 *                      llama.cpp's rules (gguf_mix.c).
 *
 *     struct kvp_wstore ws = {0};                   // as the checkpoint stores them
 *     kvp_wstore_parse("q4_k_m", false, &ws, &err);  // llama.cpp's Q4_K_M mixture
 *     kvp_weights_compute(m, &ws, &w, &err);         // kv.h
 *
 * Every byte count here is checked uint64_t arithmetic (num.h).
 */
#ifndef KVPLAN_WQUANT_H
#define KVPLAN_WQUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"
#include "kvplan/format.h"

struct kvp_model;

/* ---- one stored tensor ----------------------------------------------------- */

/* What a weight tensor is, in llama.cpp's naming (gguf_mix.c chooses types by
 * it) and grouped into classes for quantization configs. */
enum kvp_wrole {
    KVP_WR_TOKEN_EMBD,  /* token embedding */
    KVP_WR_POS_EMBD,    /* learned positions */
    KVP_WR_OUTPUT,      /* untied LM head */
    KVP_WR_ATTN_Q,
    KVP_WR_ATTN_K,
    KVP_WR_ATTN_V,
    KVP_WR_ATTN_OUT,
    KVP_WR_MLA_Q_A,     /* MLA: q down-projection */
    KVP_WR_MLA_Q_B,     /* MLA: q up-projection (or plain q) */
    KVP_WR_MLA_KV_A,    /* MLA: kv down-projection + rope key */
    KVP_WR_MLA_KV_B,    /* MLA: kv up-projection */
    KVP_WR_SSM_IN,      /* recurrent in-projection (Mamba in_proj, GDN qkvz / ba) */
    KVP_WR_SSM_X,       /* Mamba-1 x_proj */
    KVP_WR_SSM_DT,      /* Mamba-1 dt_proj */
    KVP_WR_SSM_OUT,     /* recurrent out-projection */
    KVP_WR_FFN_GATE,
    KVP_WR_FFN_UP,
    KVP_WR_FFN_DOWN,
    KVP_WR_EXP_GATE,    /* routed experts (llama.cpp ffn_*_exps) */
    KVP_WR_EXP_UP,
    KVP_WR_EXP_DOWN,
    KVP_WR_SHEXP_GATE,  /* shared experts (ffn_*_shexp) */
    KVP_WR_SHEXP_UP,
    KVP_WR_SHEXP_DOWN,
    KVP_WR_ROUTER,      /* expert router (ffn_gate_inp), shared-expert gate */
    KVP_WR_VECTOR,      /* norms, biases, convolutions, sinks: 1-D or small */
    KVP_WR_TOWER,       /* a multimodal model's vision (audio) tower and projector, as one */
    KVP_WR_COUNT
};

/* The classes a quantization config names (bit i = class i). */
enum kvp_wclass {
    KVP_WC_EMBED,   /* token and position embeddings */
    KVP_WC_OUTPUT,  /* LM head */
    KVP_WC_ATTN,    /* attention, MLA and recurrent projections */
    KVP_WC_MLP,     /* dense MLPs */
    KVP_WC_EXPERTS, /* routed experts */
    KVP_WC_SHARED,  /* shared experts */
    KVP_WC_ROUTER,  /* routers */
    KVP_WC_VECTOR,  /* never quantized */
    KVP_WC_TOWER,   /* vision (audio) towers: kept in the model dtype, as engines load them */
    KVP_WC_COUNT
};
#define KVP_WC_LINEAR ((1u << KVP_WC_ATTN) | (1u << KVP_WC_MLP) | (1u << KVP_WC_EXPERTS) | (1u << KVP_WC_SHARED))

KVP_API enum kvp_wclass kvp_wrole_class(enum kvp_wrole r);
KVP_API const char *kvp_wclass_name(enum kvp_wclass c);   /* "attention", "experts", ... */
KVP_API bool kvp_wclass_from_name(const char *s, enum kvp_wclass *out);

/* One weight tensor: `count` alike matrices (experts) of rows outputs x
 * cols inputs (GGUF ne1 x ne0) in layer `layer` (UINT32_MAX: outside the
 * stack); a 1-D tensor has rows 1. */
struct kvp_wtensor {
    enum kvp_wrole role;
    uint32_t layer;
    uint64_t rows, cols, count;
};

/* ---- the stored form of a quantized linear weight --------------------------- */

enum kvp_wq_kind {
    KVP_WQ_FORMAT, /* rows of a kvp_format: plain, grouped int, ggml/MX/NV blocks */
    KVP_WQ_FP8,    /* fp8 codes + f32 scales per tensor, per row or per 2-D block */
    KVP_WQ_PACKED, /* int codes packed in int32 + scale (+ packed zero point) per group
                    * (GPTQ, AWQ, compressed-tensors) */
    KVP_WQ_BNB4,   /* bitsandbytes nf4/fp4: 4-bit codes + absmax per 64 values */
    KVP_WQ_BNB8,   /* bitsandbytes LLM.int8: int8 codes + f32 scale per row */
    KVP_WQ_KIND_COUNT
};

struct kvp_wq {
    enum kvp_wq_kind kind;
    struct kvp_format f;   /* FORMAT: the row format; FP8: its dtype */
    uint8_t bits;          /* PACKED: 2..8 */
    uint32_t group;        /* PACKED: values per scale along the input, 0 = the whole row;
                            * FP8: block columns, 0 = per row or per tensor */
    uint32_t block_rows;   /* FP8: block rows (with group); 1 = per row; 0 = per tensor */
    enum kvp_dtype scale;  /* PACKED, FP8: scale dtype */
    bool zero_point;       /* PACKED: a bits-wide zero point per group, packed in int32 */
    bool g_idx;            /* PACKED: an int32 group index per input column (GPTQ) */
    bool double_quant;     /* BNB4: absmax stored as uint8 with f32 scales per 256 blocks */
    bool nf4;              /* BNB4: nf4 (else fp4); the name only */
    uint32_t tensor_bytes; /* per tensor: global scales, input scales, shapes */
};

/* Parse a stored-form string:
 *   any format.h string                     int4:group=128:scale=bf16, mxfp4, q4_K, fp8_e4m3
 *   fp8:block=RxC | fp8:scale=channel|tensor [:bf16|:f16]  e4m3 codes + f32 (or bf16, f16)
 *                                          scales (fp8_e5m2 likewise)
 *   packed:bits=B:group=G[:zp][:g_idx][:scale=T]  int32-packed codes (GPTQ/AWQ/compressed-tensors)
 *   nf4[:double] | fp4[:double]            bitsandbytes 4-bit
 *   int8:bnb                               bitsandbytes LLM.int8
 * each optionally followed by :tensor=N (extra bytes per tensor). */
KVP_API enum kvp_status kvp_wq_parse(const char *s, struct kvp_wq *out, struct kvp_error *err);

/* The string kvp_wq_parse reads back to q. Returns buf. */
KVP_API const char *kvp_wq_name(const struct kvp_wq *q, char *buf, uint32_t n);

/* Stored bytes of t in q (all `count` matrices). */
KVP_API enum kvp_status kvp_wq_tensor_bytes(const struct kvp_wq *q, const struct kvp_wtensor *t, uint64_t *out,
                                    struct kvp_error *err);

/* ---- a checkpoint's quantization ------------------------------------------- */

struct kvp_wscheme {
    char method[24];   /* "mxfp4", "fp8", "awq", "gptq", "compressed-tensors", "bitsandbytes",
                        * "modelopt"; "" = not quantized */
    struct kvp_wq q;   /* the stored form of quantized tensors */
    uint32_t classes;  /* bit per enum kvp_wclass: the classes stored in q */
    bool assumed;      /* guessed from a model id, not read from a config */
};

/* ---- what a file's headers say ----------------------------------------------- */

#define KVP_WTABLE_MAX 16
struct kvp_wtable_row {
    enum kvp_dtype dtype;
    uint64_t tensors, params, bytes;
};

/* GGUF: what one group of tensors takes in the buffer of each kind of
 * device llama.cpp can put it on, every tensor padded as that buffer type
 * pads it (ggml_backend_alloc_ctx_tensors_from_buft_size): host, the CPU
 * buffer (ggml_nbytes padded to 32), and gpu, a CUDA device (quantized
 * tensors whose rows are not a multiple of 512 values get one padded row,
 * ggml_backend_cuda_buffer_type_get_alloc_size, then padded to 128). The
 * exp_ parts are those of routed-expert tensors (*_exps*), which
 * --n-cpu-moe keeps on the host. */
struct kvp_wplace {
    uint64_t host, gpu, exp_host, exp_gpu;
};
/* Groups: the input (token and position embeddings: always on the host),
 * the output (output_norm, output), token_embd alone (a tied output is a
 * copy of it on the output's device), then layer il at KVP_WPLACE_LAYER + il. */
enum { KVP_WPLACE_INPUT, KVP_WPLACE_OUTPUT, KVP_WPLACE_EMBD, KVP_WPLACE_LAYER };
#define KVP_WPLACE_MAX (KVP_WPLACE_LAYER + 1024) /* + KVP_MAX_LAYERS (model.h) */
struct kvp_wtable {
    uint32_t n;                           /* rows; 0 = no table */
    struct kvp_wtable_row rows[KVP_WTABLE_MAX]; /* one per dtype, most bytes first */
    uint64_t expert_bytes;                /* of routed-expert tensors (for active bytes) */
    uint64_t tower_params, tower_bytes;   /* of those: vision (audio) towers and projectors, by name */
    uint64_t mtp_tensors, mtp_bytes;      /* left out: layers past the text model's (MTP) */
    char what[48];                        /* "GGUF tensor table", "safetensors headers" */
    char mixture[24];                     /* GGUF file type, e.g. "Q4_K_M"; "" */
    uint64_t file_bytes;                  /* GGUF: the data section's end, the least length a file
                                           * holding these tensors has (kvp_model_load checks it) */
    bool placed;                          /* GGUF: place[] is filled */
    bool has_output;                      /* GGUF: output.weight is stored (else the output is token_embd) */
    struct kvp_wplace place[KVP_WPLACE_MAX]; /* GGUF: by group (KVP_WPLACE_*); rope_freqs, which llama.cpp
                                              * copies into every layer, counted in each */
};

/* ---- what a deployment weighs the weights as ------------------------------- */

enum kvp_wstore_kind {
    KVP_WSTORE_CHECKPOINT, /* as stored (zero value): table, else scheme, else the dtype */
    KVP_WSTORE_FORMAT,     /* every linear projection in q; the rest in the model dtype */
    KVP_WSTORE_GGUF,       /* llama.cpp file type `ftype`, tensor by tensor */
};

struct kvp_wstore {
    enum kvp_wstore_kind kind;
    struct kvp_wq q;   /* FORMAT */
    uint32_t ftype;    /* GGUF: enum llama_ftype */
};

/* "stored" (or "checkpoint"), a llama.cpp file type name (q4_k_m, q6_k,
 * iq4_xs ...), or a kvp_wq string. Names that are both a block type and a
 * file type (q4_0, q8_0, q6_k ...) mean the file type when `gguf` is true
 * (the model is a GGUF or the engine llama.cpp). */
KVP_API enum kvp_status kvp_wstore_parse(const char *s, bool gguf, struct kvp_wstore *out, struct kvp_error *err);

/* "stored", "q4_k_m", or the kvp_wq name. Returns buf. */
KVP_API const char *kvp_wstore_name(const struct kvp_wstore *ws, char *buf, uint32_t n);

/* ---- llama.cpp file types (gguf_mix.c) --------------------------------------- */

/* enum llama_ftype of a name ("q4_k_m", case-insensitive; "mostly_" optional). */
KVP_API bool kvp_gguf_ftype_from_name(const char *s, uint32_t *ftype);
/* "Q4_K_M"; NULL if unknown. */
KVP_API const char *kvp_gguf_ftype_name(uint32_t ftype);
/* The type llama.cpp's quantizer gives tensor t of model m under file type
 * ftype (llama-quant.cpp llama_tensor_get_type, fallbacks included; rules
 * and version in docs/model-format.md). The tensors of m are offered in the
 * order weights.c visits them: layer by layer, and within a layer in
 * llama.cpp's name order where two share a counter (ffn_down_exps before
 * ffn_down_shexp; a fused attn_qkv offered as q, k, v in that order); `state`
 * carries llama.cpp's counters across calls: kvp_gguf_mix_begin sets it up.
 * Tensors llama.cpp never quantizes (1-D, VECTOR, ROUTER, POS_EMBD) are f32,
 * as convert_hf_to_gguf stores them; an ftype kvp_gguf_ftype_name does not
 * know prices every tensor as f16. */
struct kvp_gguf_mix_state {
    uint32_t n_attn_v, i_attn_v, n_ffn_down, i_ffn_down, n_ffn_gate, i_ffn_gate, n_ffn_up, i_ffn_up;
};
KVP_API void kvp_gguf_mix_begin(const struct kvp_model *m, struct kvp_gguf_mix_state *state);
KVP_API enum kvp_dtype kvp_gguf_mix_type(const struct kvp_model *m, uint32_t ftype, const struct kvp_wtensor *t,
                                 struct kvp_gguf_mix_state *state);

#endif
