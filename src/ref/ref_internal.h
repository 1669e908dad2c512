/* ref_internal.h -- what the reference decoder's files share (not public). */
#ifndef KVPLAN_REF_INTERNAL_H
#define KVPLAN_REF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kvplan/ref.h"

/* ---- codec.c: one format's bytes <-> float32 ------------------------- */

/* Bytes of one token row of n values (the per-head rows of all heads). */
uint64_t codec_row_bytes(const struct kvp_format *f, uint32_t n_kv, uint32_t d);
/* Encode n_kv heads x d values x (token-wise) into dst of codec_row_bytes. */
void codec_encode_row(const struct kvp_format *f, uint32_t n_kv, uint32_t d, const float *x, uint8_t *dst);
void codec_decode_row(const struct kvp_format *f, uint32_t n_kv, uint32_t d, const uint8_t *src, float *x);
/* Plain scalar types (f32, f16, bf16, fp8): n values. */
void codec_put_plain(enum kvp_dtype t, const float *x, uint64_t n, uint8_t *dst);
void codec_get_plain(enum kvp_dtype t, const uint8_t *src, uint64_t n, float *x);
uint32_t codec_plain_size(enum kvp_dtype t); /* bytes per value */
/* Channel-axis groups: g = group index, values of channel c, tokens j of the
 * group at code index (g*n + c)*G + j; meta at (g*n + c). x is (G, n). */
void codec_encode_groups(const struct kvp_format *f, uint64_t n, uint64_t g, const float *x,
                         uint8_t *codes, uint8_t *meta);
void codec_decode_value(const struct kvp_format *f, uint64_t n, uint64_t g, uint64_t c, uint64_t j,
                        const uint8_t *codes, const uint8_t *meta, float *out);
uint32_t codec_meta_size(const struct kvp_format *f); /* scale (+ zero point) bytes */

/* ---- rng ------------------------------------------------------------- */
struct pcg { uint64_t state, inc; };
void pcg_seed(struct pcg *r, uint64_t seed, uint64_t stream);
uint32_t pcg_next(struct pcg *r);
float pcg_float(struct pcg *r); /* uniform in [-1, 1) */

/* ---- cache.c: per-layer stores --------------------------------------- */
/* Append one token of sequence seq to every layer's stores: k[l] (n_kv*dk)
 * and v[l] (n_kv*dv) of layer l, NULL where the layer caches nothing; the
 * sequence then holds one more token. Dynamic caches grow smallest first. */
enum kvp_status cache_commit(struct kvp_ref_cache *c, uint32_t seq, const float *const *k, const float *const *v,
                             struct kvp_error *err);
/* Dequantized row of position pos (must be held). */
void cache_read_k(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, uint64_t pos, float *out);
void cache_read_v(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, uint64_t pos, float *out);
/* Recurrent state of (layer, seq) as floats (n elems), and write it back. */
enum kvp_status cache_state(struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, uint8_t **p,
                            struct kvp_error *err);
enum kvp_dtype cache_state_dtype(const struct kvp_ref_cache *c);
/* ---- decoder.c, for measure.c ------------------------------------------ */
/* Layer 0's roped query (hq, dk) for token at pos (its input is the embedding). */
void ref_layer0_query(const struct kvp_ref_model *rm, uint32_t token, uint64_t pos, float *q);
void ref_softmax(float *x, uint64_t n);

/* ---- measure.c, for decoder.c: the fidelity model's weights -------------- */
/* Shape the embeddings (vocab, H) and one attention spec's wq (hq*dk, H),
 * wk (hkv*dk, H), wv (hkv*dv, H) after their random fill, as o asks
 * (outlier key channels, heavy-hitter tokens, loud values); no-ops when o
 * asks for none of them. Uses its own PCG stream, so the other weights stay
 * those of the seed. */
void ref_shape_embed(const struct kvp_ref_opts *o, uint32_t H, uint32_t vocab, float *embed);
void ref_shape_attention(const struct kvp_ref_opts *o, uint32_t H, uint32_t hq, uint32_t hkv, uint32_t dk,
                         uint32_t dv, float *wq, float *wk, float *wv);

#endif
