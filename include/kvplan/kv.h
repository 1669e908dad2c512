/* kv.h -- the analytic engine: KV-cache bytes and weight bytes of a model.
 *
 * Pure functions: no I/O, no allocation; the caller provides every struct.
 * All byte counts are checked uint64_t arithmetic; a result that does not fit
 * in 64 bits is KVP_ERR_OVERFLOW with a message, never a wrapped number.
 *
 *     struct kvp_kv_query q = { .context = 131072, .batch = 1,
 *                               .k = kvp_format_plain(KVP_DTYPE_F16),
 *                               .v = kvp_format_plain(KVP_DTYPE_F16) };
 *     struct kvp_kv_plan plan;
 *     if (kvp_kv_compute(model, &q, &plan, &err) != KVP_OK) ...
 *     // Llama-2-7B: plan.kv_bytes_per_token == 524288, plan.kv_bytes == 64 GiB
 *
 * The rules here are the `ideal` profile: the bare formula of what each layer
 * must hold. Engine-specific rounding (pages, padding) builds on these results.
 *
 *   full / shared-source layer:  tokens = T
 *   sliding window W:            tokens = min(T, W)
 *   chunked local, chunk C:      tokens = min(T, C)
 *   per layer and sequence:      K = H_kv * tokens * row_k, V = H_kv * tokens * row_v
 *                                row = bytes of d_head values in the format
 *   MLA:                         one latent of kv_lora_rank + qk_rope_dim values per
 *                                token in the K format; no V
 *   recurrent:                   conv + SSM state elements * state dtype, per sequence
 *   shared-KV, none:             0
 * Quantized formats follow format.h: token-axis groups are part of each row;
 * channel-axis groups of G tokens are complete only in the quantized part,
 * and the newest tokens (the residual, KIVI) stay in the scale dtype
 * (kvp_cache_tokens; held = min(T, W), W the window, or T):
 *   axis=token:   quantized = held - residual, residual = min(held, R)
 *   axis=channel: residual = T mod R' (R' = R, or G when R = 0); groups are
 *                 aligned to token positions (group k: tokens kG..kG+G-1),
 *                 formed when the residual fills, and dropped once all
 *                 their tokens have left the window:
 *                 quantized = G * max(0, (T - T mod R')/G - floor(max(T-W, 0)/G))
 *                 (T - T mod R' without a window). The residual is not
 *                 trimmed by the window: its tokens form the next groups.
 *
 * A preallocated (static) cache must hold every step t <= T, not just T.
 * Token-axis and plain formats grow monotonically, so their capacity is the
 * bytes at T. Channel-axis bytes are not monotone (the residual empties
 * every R' tokens; windowed, a group leaves every G tokens), and a buffer
 * with a fixed quantized region and a fixed residual region needs each
 * region at its own largest size:
 *   capacity = quantized(Q) + residual(min(T, R' - 1)),
 *   Q = floor(min(T, W)/R') * R', or ceil(W/G) * G when a flush falls in (W, T]
 * which is at least max over t <= T of the bytes at t, and equal to it when
 * T < R' or T mod R' = R' - 1 without a window (see kvp_cache_capacity).
 */
#ifndef KVPLAN_KV_H
#define KVPLAN_KV_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/model.h"

struct kvp_kv_query {
    uint64_t context; /* tokens per sequence, T */
    uint64_t batch;   /* sequences, B */
    uint32_t block;   /* tokens per block (paged cache): each layer's held tokens per
                       * sequence round up to a whole number of blocks; 0 = no paging */
    bool preallocated; /* a static cache sized up front for T: k_seq / v_seq (and the
                        * totals) are kvp_cache_capacity, not the bytes held at T;
                        * false = the bytes held at T */
    struct kvp_format k;
    struct kvp_format v;
};

/* What one layer spec contributes (per layer of that spec). */
struct kvp_spec_bytes {
    uint32_t layers;     /* layers using this spec */
    uint64_t tokens;     /* tokens a layer attends to per sequence at T: min(T, window) (paged:
                          * in whole blocks); axis=channel with a window keeps more
                          * (whole groups and its residual: kvp_cache_tokens) */
    uint64_t k_token;    /* bytes one more token adds to K, per layer (all KV heads) */
    uint64_t v_token;    /* same for V */
    uint64_t k_seq;      /* K bytes per layer per sequence at T */
    uint64_t v_seq;      /* V bytes per layer per sequence at T */
    uint64_t state_seq;  /* recurrent state bytes per layer per sequence */
};

struct kvp_kv_plan {
    /* sum over layers of k_token / v_token: what one more token adds while T
     * is inside every window */
    uint64_t k_bytes_per_token;
    uint64_t v_bytes_per_token;
    uint64_t kv_bytes_per_token;
    /* attention caches at T tokens, B sequences: sum over layers of seq * B */
    uint64_t k_bytes;
    uint64_t v_bytes;
    uint64_t kv_bytes;
    uint64_t state_bytes; /* recurrent state, all layers, B sequences */
    uint64_t total_bytes; /* kv_bytes + state_bytes */
    uint32_t n_specs;
    struct kvp_spec_bytes spec[KVP_MAX_SPECS]; /* indexed like model->specs */
};

/* Fill plan for model m (validated) under query q. Errors: a format that
 * does not divide a head dim, an invalid residual, a format a paged cache
 * cannot hold (block != 0: kvp_format_check_paged), overflow. */
KVP_API enum kvp_status kvp_kv_compute(const struct kvp_model *m, const struct kvp_kv_query *q,
                               struct kvp_kv_plan *plan, struct kvp_error *err);

/* The most bytes alive while B sequences grow to T tokens by concatenation
 * (HF DynamicCache, the reference decoder's `dynamic` policy): every step,
 * each of a sequence's stores (one layer's K or V) builds its new tensor
 * while the old one is alive, then frees the old. q->block and
 * q->preallocated must be 0 (KVP_ERR_USAGE otherwise).
 *
 * The schedule: sequences advance in turn (0 first); within one, stores
 * that shrink (axis=channel: the step that quantizes a full residual of R'
 * tokens) go first, largest new size first, then the rest, smallest old
 * size first. With S(t) = one sequence's bytes at t (state included from
 * its first step), step t (tokens t-1 -> t) peaks at
 *   (B-1) * max(S(t), S(t-1)) + max(S(t-1) + max_shrinking b(t),
 *                                    S(t) + max_other b(t-1))
 * (b: one store's bytes): the first shrinking store copies before anything
 * was freed; the last growing one copies when all else is at t. Plain and
 * token-axis formats never shrink, so the peak is step T's, total_bytes +
 * the largest single tensor at T-1 (the hf-dynamic profile's rule).
 * Channel-axis bytes drop at every flush (t = kR') and, windowed, when a
 * group leaves the window (t = W + kG); between those steps the step peak
 * is nondecreasing, so the answer is the largest of step T and of each
 * such step and the step before it: O(T/R' + T/G) steps. */
KVP_API enum kvp_status kvp_kv_dynamic_peak(const struct kvp_model *m, const struct kvp_kv_query *q, uint64_t *out,
                                    struct kvp_error *err);

/* Tokens one store (one sequence, one layer's K or V) keeps after T tokens
 * with window W (0 = none), in its quantized and residual regions (the
 * rules above); capacity: the most each region holds at any t <= T (what a
 * preallocated buffer needs). Plain formats: quant = held, resid = 0. */
KVP_API void kvp_cache_tokens(const struct kvp_format *f, uint64_t tokens, uint64_t window, bool capacity,
                              uint64_t *quant, uint64_t *resid);

/* Bytes of one sequence in one layer's K (or V) cache with n_kv heads of dim
 * d in format f, after T tokens with window W (0 = none): the regions of
 * kvp_cache_tokens priced by format.h. */
KVP_API enum kvp_status kvp_cache_bytes(const struct kvp_format *f, uint64_t n_kv, uint64_t d, uint64_t tokens,
                                uint64_t window, uint64_t *out, struct kvp_error *err);

/* Bytes a buffer preallocated for T tokens of one sequence (window W) needs
 * so that it can hold every step t <= T, laid out as two fixed regions
 * (quantized, residual): kvp_cache_tokens with capacity. Plain and
 * token-axis formats: kvp_cache_bytes(T) (monotone in T). Channel-axis
 * formats without a window: quantized bytes of floor(T/R')*R' tokens plus
 * min(T, R'-1) residual tokens in the scale dtype. Why: bytes(t) =
 * Q(t - t mod R') + res(t mod R') with Q and res nondecreasing; for t <= T,
 * t - t mod R' <= floor(T/R')*R' (reached at t = T) and t mod R' <=
 * min(T, R'-1) (reached at t = min(T, R'-1), or at T when T mod R' = R'-1),
 * so each fixed region must be that large, and no larger. Both maxima fall
 * on one t only when T < R' or T mod R' = R'-1; otherwise the capacity
 * exceeds max_t bytes(t) by the difference, e.g. int2:group=32, 1 x 128,
 * T = 64: capacity 11008 B, max_t bytes(t) 9472 B (t = 63). With a window,
 * the groups held at t > W number (t - t mod R')/G - floor((t-W)/G) <=
 * ceil(W/G), reached at a flush t = kR' > W; until then floor(min(T,W)/R'). */
KVP_API enum kvp_status kvp_cache_capacity(const struct kvp_format *f, uint64_t n_kv, uint64_t d, uint64_t tokens,
                                   uint64_t window, uint64_t *out, struct kvp_error *err);

/* Elements of recurrent state per sequence for one layer: conv and SSM. */
KVP_API void kvp_recurrent_state_elems(const struct kvp_recurrent *r, uint64_t *conv, uint64_t *ssm);

/* Weight parameters and bytes, tensor by tensor (struct kvp_wtensor), each
 * priced by the deployment's choice ws (wquant.h; NULL = as stored):
 * - as stored: the model's table of stored bytes (GGUF tensor table,
 *   safetensors headers) when it has one; else its quantization scheme
 *   (the classes it names in its stored form, the rest in the model dtype);
 * - a format: every linear projection (attention, MLP, experts) in it,
 *   grouped along the input dimension; embeddings, LM head, norms, biases
 *   and routers in the model dtype;
 * - a llama.cpp file type: each tensor in the type llama.cpp's quantizer
 *   gives it (gguf_mix.c).
 * `parts` splits the bytes by stored form, e.g. mxfp4 (experts) and bf16
 * (the rest). */
#define KVP_MAX_WPARTS 8
#define KVP_WPART_NAME 48
struct kvp_wpart {
    char name[KVP_WPART_NAME]; /* stored form (kvp_wq_name): "mxfp4", "bf16", "q4_K" */
    uint32_t classes;          /* bit per enum kvp_wclass it holds (0 from a table) */
    uint64_t params, bytes;
};
struct kvp_weights {
    uint64_t params;           /* all parameters */
    uint64_t active_params;    /* parameters one token uses (routed: top-k experts) */
    uint64_t embedding_params; /* token embedding + LM head (if untied) + positions */
    uint64_t attention_params; /* attention / recurrent mixers */
    uint64_t mlp_params;       /* dense MLPs, experts, routers */
    uint64_t norm_params;      /* norms */
    uint64_t tower_params;     /* of params: the vision (audio) tower and projector (not in active_params) */
    uint64_t tower_bytes;      /* of bytes: the tower's (not in active_bytes) */
    uint64_t bytes;            /* stored bytes of all parameters */
    uint64_t active_bytes;     /* stored bytes one decode step reads */
    uint64_t class_bytes[KVP_WC_COUNT]; /* computed stored bytes by enum kvp_wclass (from a checkpoint's own
                                         * table: the computed split, which may not sum to bytes) */
    uint32_t n_parts;
    struct kvp_wpart parts[KVP_MAX_WPARTS]; /* by stored form, most bytes first */
    char source[96];           /* "GGUF tensor table, file type Q4_K_M", "quantization_config (fp8)", "" = computed */
};

KVP_API enum kvp_status kvp_weights_compute(const struct kvp_model *m, const struct kvp_wstore *ws,
                                    struct kvp_weights *w, struct kvp_error *err);

/* The element type of the attention and MLP projections' codes under ws
 * (fp8 for an fp8 checkpoint, the model dtype when they are not quantized):
 * which tensor-core peak a matmul can use. */
KVP_API enum kvp_dtype kvp_wstore_code_dtype(const struct kvp_wstore *ws, const struct kvp_model *m);

#endif
