/* ref_internal.h -- what the reference decoder's files share (not public). */
#ifndef KVPLAN_REF_INTERNAL_H
#define KVPLAN_REF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvplan/ref.h"

/* The hot loops (cache row conversions, dot products, attention) compiled
 * three times, for AVX-512F, AVX2 and the baseline ISA, the one to run
 * picked when the program loads (GCC on x86-64; elsewhere the baseline
 * only). Every sum keeps its order and nothing is contracted into an FMA
 * (-std=c11 sets -ffp-contract=off; neither target enables FMA), so all
 * give the same floats. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KVP_REF_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KVP_REF_HOT
#endif
/* A kernel the hot loops call, inlined into each clone so that it is
 * compiled for the clone's ISA (a call would run the baseline one). */
#if defined(__GNUC__)
#define KVP_REF_INLINE __attribute__((always_inline)) inline
#else
#define KVP_REF_INLINE inline
#endif

/* ---- codec.c: one format's bytes <-> float32 ------------------------- */
/* The codec's own layout of type t (never format.h's table): whether it can
 * store t at all, whether t is an integer type with group settings, values
 * per block (1 but for block types) and bits per integer code. */
bool ref_codec_known(enum kvp_dtype t);
bool ref_codec_grouped(enum kvp_dtype t);
uint32_t ref_codec_block_elems(enum kvp_dtype t);
uint32_t ref_codec_code_bits(enum kvp_dtype t);

/* Bytes of one token row of n values (the per-head rows of all heads). */
uint64_t ref_codec_row_bytes(const struct kvp_format *f, uint32_t n_kv, uint32_t d);
/* Encode n_kv heads x d values x (token-wise) into dst of ref_codec_row_bytes. */
void ref_codec_encode_row(const struct kvp_format *f, uint32_t n_kv, uint32_t d, const float *x, uint8_t *dst);
void ref_codec_decode_row(const struct kvp_format *f, uint32_t n_kv, uint32_t d, const uint8_t *src, float *x);
/* Plain scalar types (f32, f16, bf16, fp8): n values. */
void ref_codec_put_plain(enum kvp_dtype t, const float *x, uint64_t n, uint8_t *dst);
void ref_codec_get_plain(enum kvp_dtype t, const uint8_t *src, uint64_t n, float *x);
uint32_t ref_codec_plain_size(enum kvp_dtype t); /* bytes per value */
/* Channel-axis groups: g = group index, values of channel c, tokens j of the
 * group at code index (g*n + c)*G + j; meta at (g*n + c). x is (G, n). */
void ref_codec_encode_groups(const struct kvp_format *f, uint64_t n, uint64_t g, const float *x,
                         uint8_t *codes, uint8_t *meta);
/* Channels c0..c0+cnt-1 of tokens j0..j1-1 of group g, token j's at
 * out + (j - j0) cnt: a run of channels' scales converted once, then each
 * channel's codes, which lie together. */
void ref_codec_decode_span(const struct kvp_format *f, uint64_t n, uint64_t g, uint64_t j0, uint64_t j1, uint64_t c0,
                           uint64_t cnt, const uint8_t *codes, const uint8_t *meta, float *out);
/* The per-value read: code i of codes under the scale (+ zero point) at
 * meta, its group's. decode_row's and decode_span's block reads equal it
 * bit for bit (tests/check_ref.c block_decode_equals_values). */
float ref_codec_dequantize(const struct kvp_format *f, const uint8_t *codes, uint64_t i, const uint8_t *meta);
uint32_t ref_codec_meta_size(const struct kvp_format *f); /* scale (+ zero point) bytes */
/* Copy count codes from code index si of src to code index di of dst (bit
 * offsets that need not be byte-aligned: a group's codes may not be). */
void ref_codec_move_codes(const struct kvp_format *f, uint8_t *dst, uint64_t di, const uint8_t *src, uint64_t si,
                      uint64_t count);
/* KVQuant dense-and-sparse outliers of one token row of n values (all heads):
 * ref_codec_outliers(f, n) = ceil(F * n) entries of 8 B, an fp32 value then its
 * int32 index into the row (the engine's price). ref_codec_split_outliers keeps
 * the largest |x| (ties: lower index) in dst and sets them to NaN in x, which
 * the group quantizer leaves out of its ranges (KVQuant's exclusion, not
 * zeroing); heap is scratch of ref_codec_outliers(f, n) entries.
 * ref_codec_merge_outliers writes those of index lo..lo+cnt-1 back over x,
 * the decoded values lo..lo+cnt-1 of the row (0, n: the whole row). */
struct codec_okey { float mag; uint32_t idx; };
uint64_t ref_codec_outliers(const struct kvp_format *f, uint64_t n);
void ref_codec_split_outliers(const struct kvp_format *f, uint64_t n, float *x, struct codec_okey *heap, uint8_t *dst);
void ref_codec_merge_outliers(const struct kvp_format *f, uint64_t n, const uint8_t *src, uint64_t lo, uint64_t cnt,
                              float *x);

/* ---- rng ------------------------------------------------------------- */
struct pcg { uint64_t state, inc; };
void ref_pcg_seed(struct pcg *r, uint64_t seed, uint64_t stream);
uint32_t ref_pcg_next(struct pcg *r);
float ref_pcg_float(struct pcg *r); /* uniform in [-1, 1) */

/* ---- cache.c: per-layer stores --------------------------------------- */
/* Append one token of sequence seq to every layer's stores of c (not its
 * twin): k[l] (n_kv*dk) and v[l] (n_kv*dv) of layer l, NULL where the layer
 * caches nothing; the sequence then holds one more token. Dynamic caches
 * grow smallest first. */
enum kvp_status ref_cache_commit(struct kvp_ref_cache *c, uint32_t seq, const float *const *k, const float *const *v,
                             struct kvp_error *err);
/* Whether c takes a token's rows a layer at a time (ref_cache_commit_layer):
 * a static cache without the caller's blocks, whose stores never move, so
 * that the layers' appends commute. */
bool ref_cache_layerwise(const struct kvp_ref_cache *c);
/* Append layer l's rows k, v (NULL where it caches none) of the next token
 * not yet counted of sequence seq to its stores: the i-th call for a layer
 * since the sequence's last count writes its position len + i - 1. The
 * sequence holds those tokens once ref_cache_commit_end counts n of them,
 * every layer's rows in. The bytes are those of ref_cache_commit's. */
enum kvp_status ref_cache_commit_layer(struct kvp_ref_cache *c, uint32_t seq, uint32_t l, const float *k,
                                       const float *v, struct kvp_error *err);
enum kvp_status ref_cache_commit_end(struct kvp_ref_cache *c, uint32_t seq, uint64_t n, struct kvp_error *err);
/* Dequantized row of position pos (must be held). */
void ref_cache_read_k(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, uint64_t pos, float *out);
void ref_cache_read_v(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, uint64_t pos, float *out);
/* Heads h0..h0+nh-1 of that row (K: kv 0, V: kv 1), nh * head_dim values:
 * the same floats as those heads of the whole row. */
void ref_cache_read_heads(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, int kv, uint64_t pos,
                          uint32_t h0, uint32_t nh, float *out);
/* Those heads of the rows of positions j0..j1-1 (all held), row j at
 * out + (j - j0) nh head_dim: the floats of ref_cache_read_heads, a
 * channel-axis group's scales read once for all its rows. */
void ref_cache_read_span(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, int kv, uint64_t j0, uint64_t j1,
                         uint32_t h0, uint32_t nh, float *out);
/* Recurrent state of (layer, seq) as floats (n elems), and write it back. */
enum kvp_status ref_cache_state(struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, uint8_t **p,
                            struct kvp_error *err);
enum kvp_dtype ref_cache_state_dtype(const struct kvp_ref_cache *c);
/* Whether every store's rows stay as written (no residual, no channel-axis
 * groups): then a row reads back the same whatever was appended after it,
 * and the decoder may read the cache once for a chunk of tokens. */
bool ref_cache_rows_final(const struct kvp_ref_cache *c);
/* x, a K (kv 0) or V (kv 1) row of layer `layer`, as the cache would give
 * it back once appended (encoded and decoded through the store's codec;
 * rows-final caches only). The K and V sides have scratch of their own:
 * one thread may reread K rows while another rereads V rows. */
void ref_cache_reread(struct kvp_ref_cache *c, uint32_t layer, int kv, const float *x, float *out);
uint64_t ref_cache_context(const struct kvp_ref_cache *c); /* tokens a sequence may hold */
/* The cache c mirrors into (kvp_ref_cache_mirror), or NULL: kvp_ref_seq_end
 * reaches it itself; the decoder commits every row into it too (its own
 * ref_cache_commit, on another thread where there is one) and updates its
 * recurrent state. */
struct kvp_ref_cache *ref_cache_twin(const struct kvp_ref_cache *c);
/* At least `bytes` of memory the cache keeps for the decoder's step scratch
 * (its contents are the caller's; it moves when it grows); NULL when out of
 * memory. Freed with the cache. */
void *ref_cache_scratch(struct kvp_ref_cache *c, uint64_t bytes);
/* Bytes that differ between a and b, by tag, over every allocated byte
 * (free blocks too): caches of one layout (models of one shape, one
 * policy, batch and block); false when their layouts differ. */
bool ref_cache_differing(const struct kvp_ref_cache *a, const struct kvp_ref_cache *b,
                         uint64_t differ[KVP_REF_TAG_COUNT]);
/* A paged cache whose blocks the caller owns (serve.c's block pool): the
 * cache asks fn for block `index` (positions index * block on) of the store
 * of (layer, K or V, seq) whenever it reads or writes a row, make set when
 * it writes; fn returns the block's memory (block x row bytes of that store),
 * or NULL when there is none (a write then fails). No ring for windows: the
 * caller drops the blocks a window has left. A recurrent layer's state is
 * block 0 of K (make set): its slot. Set before the first token. */
typedef uint8_t *ref_cache_block_fn(void *ctx, uint32_t layer, int kv, uint32_t seq, uint64_t index, bool make);
void ref_cache_set_blocks(struct kvp_ref_cache *c, ref_cache_block_fn *fn, void *ctx);
/* Sequence seq (empty) starts at position pos: its first pos tokens are
 * already in the caller's blocks (a prefix-cache hit). */
void ref_cache_seq_skip(struct kvp_ref_cache *c, uint32_t seq, uint64_t pos);
/* Bytes of one paged block of layer's K (kv 0) or V (kv 1) store: block
 * tokens x the codec's row; a recurrent layer's state (kv 0); 0 where the
 * layer keeps nothing there. */
uint64_t ref_cache_block_bytes(const struct kvp_ref_cache *c, uint32_t layer, int kv);

/* ---- model.c: the model and its seeded weights --------------------------------
 * The one generator of the reference weights: kvp_ref_model_new shapes the
 * model as run and draws every float32 from one PCG32 stream (seed, stream 1)
 * in one order. cuda_host.c (kvp_cuda_weights_new) and weights_export.c
 * (kvp_ref_weights_new) build a kvp_ref_model and read its tensors here
 * instead of drawing their own, so the three cannot drift apart.
 * Matrices are row-major (out, in); NULL where the spec has no such tensor. */

/* Weights of one layer spec; layers of a spec share them. */
struct ref_layer {
    uint32_t hq, hkv, dk, dv;  /* query heads (scaled), KV heads, K/Q and V head dims */
    uint32_t nope, rope, rank; /* MLA */
    uint64_t S;                /* recurrent state elements */
    float *attn_norm;          /* (hidden,) */
    float *wq;                 /* (hq*dk, hidden) */
    float *wk, *wv;            /* (hkv*dk, hidden), (hkv*dv, hidden) */
    float *wo;                 /* (hidden, hq*dv) */
    float *wdkv, *wkr;         /* MLA: (rank, hidden), (rope, hidden) */
    float *wuk, *wuv;          /* MLA: (hq, nope, rank), (hq, dv, rank) */
    float *ra, *rb, *rc;       /* recurrent: (S,) decay logit, input and output gains */
    float *rden;               /* recurrent: (S,) 1 + exp(-ra), the decay's divisor (derived, not drawn) */
    float *ffn_norm;           /* (hidden,) */
    float *w1, *w3;            /* (inter, hidden) */
    float *w2;                 /* (hidden, inter) */
};

/* Every tensor points into arena (one malloc of arena_n floats), carved in
 * the order embed, out_norm, lm_head, then per spec attn_norm, wk, wv, wq,
 * wo (MLA: wq, wdkv, wkr, wuk, wuv, wo; recurrent: ra, rb, rc, rden), ffn_norm,
 * w1, w3, w2. A reader may take the arena (set it to NULL) before
 * kvp_ref_model_free, which then frees only the struct. */
struct kvp_ref_model {
    struct kvp_model m;     /* the shape as run (scaled; n_heads = hq) */
    struct kvp_ref_opts o;  /* as given, outlier_gain defaulted to 20 */
    uint32_t hidden, inter, vocab;
    float *embed;           /* (vocab, hidden) */
    float *out_norm;        /* (hidden,) */
    float *lm_head;         /* (vocab, hidden) */
    struct ref_layer w[KVP_MAX_SPECS]; /* indexed like m.specs */
    float *arena;
    uint64_t arena_n, arena_used; /* floats */
    struct kvp_ref_pool *pool; /* o.threads - 1 workers (NULL: the calling thread only) */
};

/* ---- model.c: the model's persistent threads ---------------------------- */
/* A job in parts: fn(arg, i, parts) for every i < parts, part 0 on the
 * calling thread, the others each on one of the pool's workers, which are
 * started once with the model and wait on a condition variable between
 * jobs. Returns when every part is done. With pool NULL, fn(arg, 0, 1).
 * One job at a time per pool (callers are serialized). A job's parts must
 * not run a job of their own. */
typedef void kvp_ref_part_fn(void *arg, uint32_t part, uint32_t parts);
void kvp_ref_pool_run(struct kvp_ref_pool *pool, kvp_ref_part_fn *fn, void *arg);
/* Parts of every job of pool: its workers + 1 (1 for NULL). */
uint32_t kvp_ref_pool_parts(const struct kvp_ref_pool *pool);

/* ---- kernels.c: the float32 kernels (kernels.h: those the hot loops inline) -- */
/* out[t][lo..hi) = W[lo..hi) (rows of d) @ x[t] (d,) for the nt vectors of
 * a chunk, on the calling thread: each weight row is read once for all of
 * them (one dot per row and vector, the same floats as nt products of one
 * vector). A KVP_REF_HOT clone. */
void ref_matvec_rows(float *const *out, const float *W, const float *const *x, uint64_t nt, uint64_t lo, uint64_t hi,
                     uint64_t d);
/* out[t] (n,) = W (n, d) @ x[t] (d,) for t < nt, rows (or groups of
 * vectors) split among rm's threads: each product the same floats whoever
 * computes it. ref_matvec: one vector, out (n,) = W @ x (d,). */
void ref_matmat(const struct kvp_ref_model *rm, float *const *out, const float *W, const float *const *x, uint64_t nt,
                uint64_t n, uint64_t d);
void ref_matvec(const struct kvp_ref_model *rm, float *out, const float *W, const float *x, uint64_t n, uint64_t d);
/* out (n,) = x / sqrt(mean(x^2) + 1e-5) * g (the sum of squares in double). */
void ref_rmsnorm(float *out, const float *x, const float *g, uint64_t n);
/* cs = the cosine and sine of pair (i, i+1) of d dims at pos (i even): of
 * the angle pos * 10000^(-i/d). */
void ref_rope_angle(uint32_t i, uint32_t d, uint64_t pos, float *cs);
/* RoPE of h heads of d dims (stride floats apart) at pos: pairs (2i, 2i+1)
 * turned by pos * 10000^(-2i/d), each pair's angle computed once. */
void ref_rope(float *x, uint32_t h, uint32_t d, uint32_t stride, uint64_t pos);
/* Softmax of rows rows of n values, stride floats apart: the decoder's own
 * exp (within 1 ulp), the sum in double, times the float nearest 1 / sum.
 * A KVP_REF_HOT clone. ref_softmax: one row. */
void ref_softmax_rows(float *x, uint64_t stride, uint32_t rows, uint64_t n);
void ref_softmax(float *x, uint64_t n);

/* ---- decoder.c, for measure.c (decoder.c needs nothing of measure.c) ----- */
/* Layer 0's roped query (hq, dk) for token at pos (its input is the embedding). */
void kvp_ref_layer0_query(const struct kvp_ref_model *rm, uint32_t token, uint64_t pos, float *q);
/* The first position a query at pos reads in a layer of spec s (its window). */
uint64_t kvp_ref_window_lo(const struct kvp_layer_spec *s, uint64_t pos);

#endif
