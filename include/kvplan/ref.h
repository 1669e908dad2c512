/* ref.h -- the reference decoder: a small Llama-style model on the CPU that
 * proves the engine's predictions by measuring its own allocations.
 *
 * A decoder is built from a normalized model (struct kvp_model) with seeded
 * random float32 weights; every layer kind the engine models runs for real:
 * MHA/GQA/MQA, MLA (a cached latent, decompressed per head), sliding window,
 * chunked local, shared-KV (reads an earlier layer's cache) and a recurrent
 * layer whose state has exactly the modeled element count. Its KV cache
 * stores every format the engine prices (plain, fp8, grouped int with axis,
 * residual, KVQuant's dense-and-sparse outliers, ggml blocks) under one of
 * three allocation policies, keys after RoPE or, with pre_rope_keys, before
 * it, and every cache byte goes through a counting allocator the caller owns.
 *
 *     struct kvp_ref_alloc a = {0};
 *     struct kvp_ref_model *rm;
 *     struct kvp_ref_opts o = {.seed = 1};                 // real sizes, no scaling
 *     kvp_ref_model_new(model, &o, &rm, &err);
 *     struct kvp_ref_cache_opts co = {.policy = KVP_REF_STATIC, .context = 256, .batch = 1,
 *                                     .k = kvp_format_plain(KVP_DTYPE_F32), .v = ...};
 *     struct kvp_ref_cache *c;
 *     kvp_ref_cache_new(rm, &co, &a, &c, &err);
 *     float *logits = malloc(kvp_ref_vocab(rm) * sizeof *logits);   // (vocab,)
 *     for (t = 0; t < 256; t++) kvp_ref_step(rm, c, 0, tok[t], logits, &err);
 *     // a.cur_total == kvp_kv_compute(...).total_bytes at context 256
 *     kvp_ref_cache_free(c); kvp_ref_model_free(rm);
 *
 * Ownership: the caller owns the allocator; a cache borrows it and its model
 * for its whole life and returns every byte when freed. Nothing here prints
 * or exits; errors are values (kvp_error).
 */
#ifndef KVPLAN_REF_H
#define KVPLAN_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/model.h"

/* ---- counting allocator ---------------------------------------------- */

enum kvp_ref_tag { KVP_REF_K, KVP_REF_V, KVP_REF_STATE, KVP_REF_TAG_COUNT };

/* Bytes the cache holds now and at most, by tag and in all. Zero it to start
 * (then set canary to fill new memory with another byte than 0). */
struct kvp_ref_alloc {
    uint8_t canary;  /* every byte of a new allocation (see kvp_ref_cache_written) */
    uint64_t cur[KVP_REF_TAG_COUNT];
    uint64_t peak[KVP_REF_TAG_COUNT];
    uint64_t cur_total;
    uint64_t peak_total;
    uint64_t live;   /* allocations alive now */
    uint64_t calls;  /* allocations made */
};

/* Memory of `bytes` filled with a->canary (every page is written, so it is
 * resident), counted under tag; NULL when out of memory or bytes does not
 * fit size_t. The decoder never reads a byte it has not written. */
KVP_API void *kvp_ref_alloc_get(struct kvp_ref_alloc *a, enum kvp_ref_tag tag, uint64_t bytes);
/* Release p, which kvp_ref_alloc_get returned for the same tag and bytes. */
KVP_API void kvp_ref_alloc_put(struct kvp_ref_alloc *a, enum kvp_ref_tag tag, void *p, uint64_t bytes);

/* Resident bytes of this process (/proc/self/statm); 0 where unreadable. */
KVP_API uint64_t kvp_ref_rss_bytes(void);
KVP_API uint64_t kvp_ref_page_bytes(void);

/* ---- the model ------------------------------------------------------- */

/* Scaling keeps the KV geometry (layers and kinds, KV heads, head dims,
 * windows, MLA ranks, recurrent state sizes) and shrinks what only the
 * weights see. 0 = the real value. */
struct kvp_ref_opts {
    uint64_t seed;         /* weights come from a PCG32 stream of this seed */
    uint32_t hidden;       /* residual stream width */
    uint32_t intermediate; /* MLP width (MoE layers run one dense MLP of this width) */
    uint32_t vocab;
    uint32_t q_per_kv;     /* query heads per KV head (MLA: query heads) */
    uint32_t key_outliers; /* channels of every K head scaled x outlier_gain (KIVI's outlier keys) */
    float outlier_gain;    /* default 20 */
    /* The rest of KIVI's premises, off when 0 (see kvp_ref_kivi_model):
     * heavy_tokens vocabulary tokens (picked from the seed) whose keys carry
     * a direction every query shares, adding about heavy_gain to their
     * pre-softmax scores, so a few tokens take most of the attention mass;
     * loud_tokens other tokens whose values are about value_gain x larger. */
    uint32_t heavy_tokens;
    float heavy_gain;
    uint32_t loud_tokens;
    float value_gain;
    bool pre_rope_keys;    /* cache keys before RoPE (KVQuant): the cache stores un-rotated
                            * keys, which attention rotates by their position after reading
                            * (dequantizing) them; the same bytes as post-RoPE keys. MLA:
                            * the latent's decoupled RoPE part likewise. */
    uint32_t threads;      /* threads of the decoder (a persistent pool started with the model,
                            * joined at kvp_ref_model_free; at most KVP_REF_MAX_THREADS):
                            * they split each large matrix product by rows and attention
                            * by heads; 0 or 1 = the calling thread only. Results do not
                            * depend on it: every row and every head is summed in the same
                            * order by whichever thread owns it. A model runs one call at
                            * a time (concurrent calls on one model are serialized). */
};
#define KVP_REF_MAX_THREADS 64

struct kvp_ref_model;

/* Build the decoder of m (validated) with weights seeded by o->seed. Layers
 * of one spec share weights (what is measured is the cache, not weights).
 * Errors: a shape the decoder cannot run (message names it), no memory. */
KVP_API enum kvp_status kvp_ref_model_new(const struct kvp_model *m, const struct kvp_ref_opts *o,
                                  struct kvp_ref_model **out, struct kvp_error *err);
KVP_API void kvp_ref_model_free(struct kvp_ref_model *rm);
KVP_API uint32_t kvp_ref_vocab(const struct kvp_ref_model *rm);
/* The model as run: the scaled copy of the input. */
KVP_API const struct kvp_model *kvp_ref_model_shape(const struct kvp_ref_model *rm);

/* ---- the weights by llama.cpp tensor name (weights_export.c) --------- */

/* The decoder's conventions, as a GGUF of arch llama states them: RMS norm
 * x / sqrt(mean(x^2) + eps) with eps 1e-5 (attention.layer_norm_rms_epsilon),
 * RoPE on adjacent pairs (2i, 2i+1) of every head dim at pos * base^(-2i/d)
 * with base 10000 (rope.freq_base; llama.cpp's NORM rope), scores scaled by
 * 1/sqrt(head_dim_k), query head h reading KV head h / (hq / hkv), SwiGLU
 * silu(gate) * up, and an lm_head of its own (untied, even for a model whose
 * embeddings are tied). */
#define KVP_REF_RMS_EPS 1e-5f
#define KVP_REF_ROPE_BASE 10000.0f

struct kvp_ref_weights;

/* The float32 weights of kvp_ref_model_new(m, o) itself (their one
 * generator), laid out as llama.cpp reads them.
 * Layers of full, sliding or chunked attention with a gated MLP only (what
 * arch llama holds); a spec of another kind is refused with its name.
 *
 *     struct kvp_ref_weights *w;
 *     kvp_ref_weights_new(model, &(struct kvp_ref_opts){.seed = 1}, &w, &err);
 *     uint64_t ne[2];
 *     const float *q = kvp_ref_weights_get(w, "blk.0.attn_q.weight", ne);
 *     // ne[0] == hidden (innermost), ne[1] == heads * head_dim_k: the
 *     // decoder's row-major (out, in) matrix, byte for byte
 *     kvp_ref_weights_free(w);
 */
KVP_API enum kvp_status kvp_ref_weights_new(const struct kvp_model *m, const struct kvp_ref_opts *o,
                                    struct kvp_ref_weights **out, struct kvp_error *err);
KVP_API void kvp_ref_weights_free(struct kvp_ref_weights *w);
/* Tensor `name` (GGUF name: token_embd, output_norm, output, blk.N.attn_norm,
 * attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down,
 * with or without the ".weight" suffix): ne[0] * ne[1] floats owned by w,
 * ne[0] innermost (1-D tensors: ne[1] == 1); NULL when there is no such
 * tensor (ne untouched). */
KVP_API const float *kvp_ref_weights_get(const struct kvp_ref_weights *w, const char *name, uint64_t ne[2]);

/* ---- the cache ------------------------------------------------------- */

enum kvp_ref_policy {
    KVP_REF_STATIC,  /* contiguous, preallocated for `context` tokens (ring for windows) */
    KVP_REF_DYNAMIC, /* every step builds a new tensor and copies (torch.cat) */
    KVP_REF_PAGED,   /* blocks of `block` tokens from a free list, a block table per sequence */
    KVP_REF_POLICY_COUNT
};
KVP_API const char *kvp_ref_policy_name(enum kvp_ref_policy p);
KVP_API bool kvp_ref_policy_from_name(const char *s, enum kvp_ref_policy *out);

struct kvp_ref_cache_opts {
    enum kvp_ref_policy policy;
    uint64_t context;   /* static: tokens preallocated per sequence; others: the most allowed */
    uint32_t batch;     /* sequences */
    uint32_t block;     /* paged: tokens per block */
    struct kvp_format k, v;
};

struct kvp_ref_cache;

/* Errors: a format/policy pair the cache cannot hold at the engine's bytes
 * (the message says why), no memory. Static preallocates everything here. */
KVP_API enum kvp_status kvp_ref_cache_new(const struct kvp_ref_model *rm, const struct kvp_ref_cache_opts *o,
                                  struct kvp_ref_alloc *a, struct kvp_ref_cache **out, struct kvp_error *err);
KVP_API void kvp_ref_cache_free(struct kvp_ref_cache *c);
/* Free the decoder's working memory that c keeps between calls (allocated
 * again by the next one): what c then holds is its cache bytes. */
KVP_API void kvp_ref_cache_trim(struct kvp_ref_cache *c);
KVP_API uint64_t kvp_ref_seq_len(const struct kvp_ref_cache *c, uint32_t seq);
/* Bytes the codecs wrote, by tag: a and b are caches of one model and
 * options, driven through the same steps (the decoder is deterministic), whose
 * allocators' canaries are bitwise complements (0xA5, 0x5A). A byte counts as
 * written when it differs from its canary in either cache: a byte the codec
 * left alone equals both canaries, while a written byte equal to one canary
 * differs from the other (a partly written byte too: the written bits would
 * have to equal c's and ~c's). Every allocated byte is scanned (free blocks
 * too), so written < allocated shows bytes allocated for nothing.
 * Errors: canaries not complements, caches of different layouts. */
KVP_API enum kvp_status kvp_ref_cache_written(const struct kvp_ref_cache *a, const struct kvp_ref_cache *b,
                                      uint64_t written[KVP_REF_TAG_COUNT], struct kvp_error *err);
/* Make twin mirror c: every token appended to c (kvp_ref_step,
 * kvp_ref_fill) is appended to twin too -- the same rows through the same
 * codecs, the same recurrent update -- and every sequence ended in c ends in
 * twin; nothing reads twin. Built with the complementary canary, twin gives
 * kvp_ref_cache_written what a second, identical run would, without decoding
 * twice. c borrows twin: free c (or stop appending to it) before twin.
 * Errors: twin is c, of another model or options, or not empty; either
 * already mirrors. */
KVP_API enum kvp_status kvp_ref_cache_mirror(struct kvp_ref_cache *c, struct kvp_ref_cache *twin,
                                             struct kvp_error *err);
/* kvp_ref_cache_new for c (allocator a) and for its twin (allocator a2),
 * then kvp_ref_cache_mirror: the two built at once, on two of the model's
 * threads where it has two (static: the two preallocations and their
 * canaries at once). On error neither is left. */
KVP_API enum kvp_status kvp_ref_cache_new_twin(const struct kvp_ref_model *rm, const struct kvp_ref_cache_opts *o,
                                       struct kvp_ref_alloc *a, struct kvp_ref_alloc *a2, struct kvp_ref_cache **c,
                                       struct kvp_ref_cache **twin, struct kvp_error *err);
/* End sequence seq: its blocks go back to the free list (paged), its state is
 * released (dynamic, paged); the slot starts again at position 0. */
KVP_API void kvp_ref_seq_end(struct kvp_ref_cache *c, uint32_t seq);

/* ---- running --------------------------------------------------------- */

/* Decode one token of sequence seq at its next position through the cache;
 * logits (vocab,) may be NULL. Errors: past the context, no memory. */
KVP_API enum kvp_status kvp_ref_step(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                             uint32_t token, float *logits, struct kvp_error *err);
/* Decode n tokens of sequence seq (prefill), one after another through the
 * cache; logits (vocab,) of the last, may be NULL. The cache's bytes and the
 * logits are those of n kvp_ref_step calls, bit for bit; where the cache's
 * rows stay as written (no residual, no channel-axis groups) the tokens go
 * through in chunks that read each cached row once per chunk instead of once
 * per token. Errors: past the context, a token outside the vocabulary, no
 * memory (the tokens before the failing chunk stay appended). */
KVP_API enum kvp_status kvp_ref_prefill(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                                const uint32_t *tokens, uint64_t n, float *logits, struct kvp_error *err);
/* Allocation-only step: append synthetic K/V rows and state through the same
 * cache path, computing no attention. */
KVP_API enum kvp_status kvp_ref_fill(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                             struct kvp_error *err);
/* Logits (vocab,) of the last of n tokens, recomputed from scratch without a
 * cache: every K/V of every position is computed again (O(n^2) per call). */
KVP_API enum kvp_status kvp_ref_recompute(const struct kvp_ref_model *rm, const uint32_t *tokens, uint64_t n,
                                  float *logits, struct kvp_error *err);

/* ---- quantization fidelity (KIVI's experiment) ----------------------- */

struct kvp_ref_fidelity {
    double key_err;     /* ||K - K'||_F / ||K||_F over the cache */
    double value_err;   /* same for V */
    double score_err;   /* ||QK^T - QK'^T|| / ||QK^T||, pre-softmax scores */
    double output_err;  /* ||softmax(QK'^T)V' - softmax(QK^T)V|| / ||...|| */
    double agreement;   /* greedy next tokens equal to the fp32 cache's, fraction */
    /* what the fp32 run's attention and values look like (the model, not the format) */
    double sparsity;    /* attention weights below 1/T, fraction (KIVI's model: ~0.84) */
    double top_mass;    /* attention mass on the top 10% of tokens, fraction */
    double value_top;   /* value energy (sum of ||v||^2) in the 10% largest rows, fraction */
};

/* The model of the fidelity experiment, filled into m and o for seed:
 * 2 full layers, 4 KV heads x 64 (8 query heads), hidden 64, MLP 128,
 * vocab 256; keys with 4 outlier channels x20; 4 heavy-hitter tokens whose
 * scores every query raises by ~4.5 (sparse attention); 24 loud tokens
 * whose values are ~5x larger (rms), concentrated in a few channels. */
KVP_API enum kvp_status kvp_ref_kivi_model(uint64_t seed, struct kvp_model *m, struct kvp_ref_opts *o,
                                   struct kvp_error *err);

/* Run the fp32-cache decoder and one with formats k, v on the same random
 * prompt of `prompt` tokens then `steps` greedy tokens, measuring the errors
 * above on layer 0 at every step (averaged). Model: built by the caller; with
 * pre_rope_keys both caches hold un-rotated keys, and keys and scores are
 * compared after rotation (what attention sees; RoPE keeps row norms). */
KVP_API enum kvp_status kvp_ref_fidelity(const struct kvp_ref_model *rm, const struct kvp_format *k,
                                 const struct kvp_format *v, uint64_t prompt, uint64_t steps, uint64_t seed,
                                 struct kvp_ref_fidelity *out, struct kvp_error *err);

/* The grid of `kvplan validate --fidelity` on kvp_ref_kivi_model(seed):
 * KIVI's experiment, keys and values int2/4/8, group 32, by K and V axis and
 * residual, and KVQuant's two key techniques (keys per-channel or per-token
 * at 2 and 4 bits, with and without 1% dense-and-sparse outliers, cached
 * after or before RoPE; values per-token), each cell a kvp_ref_fidelity run
 * of prompt then steps tokens, and what the grid says of the papers' claims,
 * each comparison at equal other settings. */
enum { KVP_REF_KIVI_AXES = 4, KVP_REF_KIVI_BITS = 3, KVP_REF_KIVI_RESID = 3 };
enum { KVP_REF_KVQ_AXES = 2, KVP_REF_KVQ_BITS = 2, KVP_REF_KVQ_OUTL = 2, KVP_REF_KVQ_ROPE = 2 };

struct kvp_ref_fidelity_cell {
    char k[64], v[64];          /* its formats, as kvp_format_parse reads them */
    struct kvp_ref_fidelity f;
};

struct kvp_ref_fidelity_grid {
    struct kvp_ref_opts o;      /* the model's premises (kvp_ref_kivi_model) */
    /* KIVI: (K/V axes, bits, residual); kivi_axes[a] = {K axis, V axis} */
    const char *kivi_axes[KVP_REF_KIVI_AXES][2];
    unsigned kivi_bits[KVP_REF_KIVI_BITS], kivi_resid[KVP_REF_KIVI_RESID];
    struct kvp_ref_fidelity_cell kivi[KVP_REF_KIVI_AXES][KVP_REF_KIVI_BITS][KVP_REF_KIVI_RESID];
    /* KVQuant: (K axis, bits, outliers 0 / 0.01, post- / pre-RoPE keys) */
    const char *kvq_axes[KVP_REF_KVQ_AXES];
    unsigned kvq_bits[KVP_REF_KVQ_BITS];
    struct kvp_ref_fidelity_cell kvq[KVP_REF_KVQ_AXES][KVP_REF_KVQ_BITS][KVP_REF_KVQ_OUTL][KVP_REF_KVQ_ROPE];
    /* the claims, at every bit width unless named */
    bool keys_per_channel_best;  /* score error, V per-token */
    bool values_per_token_best;  /* output error, K per-channel */
    bool value_err_wrong_way;    /* at 2 bits, value error is lower per-channel (K per-channel vs per-token) */
    bool residual_helps;         /* residual 128 lowers per-channel keys' score error */
    bool pre_rope_helps;         /* pre-RoPE lowers per-channel keys' score error (KVQuant) */
    bool outliers_help;          /* outliers=0.01 lowers key error on both axes, post-RoPE */
};

/* Fill g: the model built twice (post- and pre-RoPE keys, the same weights),
 * every cell run. Errors: those of kvp_ref_fidelity, no memory. */
KVP_API enum kvp_status kvp_ref_fidelity_grid(uint64_t seed, uint64_t prompt, uint64_t steps,
                                              struct kvp_ref_fidelity_grid *g, struct kvp_error *err);

/* ---- validation: the decoder's counts against the engine's claim ------ */

/* What the engine predicts for one run, bytes: the caller asks the engine
 * (kvp_kv_compute at the run's context and batch; static preallocated), so
 * that the decoder, which never prices a byte itself, stays its witness. */
struct kvp_ref_claim {
    uint64_t k, v, state, total;
    uint64_t peak;                      /* the dynamic policy's high-water mark, else total */
    uint64_t held[KVP_REF_TAG_COUNT];   /* paged: the held tokens' bytes (no blocks); else unused */
};

/* What one run counted, and whether it agrees with the claim. */
struct kvp_ref_check {
    struct kvp_ref_alloc a;              /* the cache's counts while it was alive */
    uint64_t written[KVP_REF_TAG_COUNT]; /* bytes the codecs wrote (kvp_ref_cache_written) */
    uint64_t rss_delta;                  /* resident memory after the run less before, 0 if less */
    uint64_t rss_expected;               /* the cache's and its twin's bytes */
    uint64_t tolerance;                  /* a page per live allocation + 1 MiB */
    bool match;   /* K, V, state, total and peak equal the claim; every allocated byte written
                   * (paged: at least the held tokens' bytes) */
    bool rss_ok;  /* rss_delta within rss_expected +- tolerance (dynamic: at least rss_expected - tolerance) */
};

/* Build a cache of co (context and batch as given) and its twin
 * (kvp_ref_cache_new_twin), decode every sequence to co->context tokens
 * (the sequences taking turns by chunks of 32, single tokens for a dynamic
 * cache of several; with compute false, fill them through the same path),
 * count, free, and compare with claim. Errors: those of the cache and the
 * decoder; cache bytes not given back when freed. */
KVP_API enum kvp_status kvp_ref_validate(const struct kvp_ref_model *rm, const struct kvp_ref_cache_opts *co,
                                         bool compute, const struct kvp_ref_claim *claim, struct kvp_ref_check *out,
                                         struct kvp_error *err);

/* The contexts of a sweep up to T: 1, each window of m and block (0: none)
 * boundary -1/0/+1, powers of two, T; sorted, each once, at most max of
 * them into pts. Returns how many. */
KVP_API uint32_t kvp_ref_sweep_points(const struct kvp_model *m, uint32_t block, uint64_t T, uint64_t *pts,
                                      uint32_t max);

/* ---- scaling ---------------------------------------------------------- */

/* Seconds to decode token n (the n+1-th) with the cache and by recomputing
 * all n+1 tokens, measured with CLOCK_MONOTONIC. */
KVP_API enum kvp_status kvp_ref_time_step(const struct kvp_ref_model *rm, uint64_t n, double *cached_s,
                                  double *recompute_s, struct kvp_error *err);

#endif
