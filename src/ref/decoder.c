/* decoder.c -- a Llama-style decoder in plain float32, every layer kind.
 *
 * Read it like llama2.c's run.c, top to bottom: a layer's parts (the MLP,
 * the recurrence, the logits), then tokens through the cache (a chunk of
 * them, or one step: the scratch, attention, the rows into the cache, the
 * forward pass), then the same model recomputed from scratch. The kernels
 * (matrix products, RMS norm, RoPE, softmax) are in kernels.c and kernels.h;
 * the model it runs and its weights are built in model.c.
 *   x = embed[token]                                   (hidden,)
 *   per layer: x += mixer(rmsnorm(x)); x += mlp(rmsnorm(x))
 *   logits = lm_head @ rmsnorm(x)                      (vocab,)
 * Mixers: attention over the layer's cache (full, sliding, chunked, shared,
 * MLA) or a gated linear recurrence (recurrent). MLPs are SwiGLU; a MoE
 * layer runs one dense SwiGLU (the cache does not see experts).
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kvplan/num.h"

/* ---- windows ----------------------------------------------------------------- */

/* Positions a query at pos attends in a layer of spec s. */
static uint64_t attended(const struct kvp_layer_spec *s, uint64_t pos)
{
    if (s->kind == KVP_LAYER_SLIDING)
        return pos + 1 < s->window ? pos + 1 : s->window;
    if (s->kind == KVP_LAYER_CHUNKED)
        return pos % s->window + 1;
    return pos + 1;
}

/* ---- a layer's parts ----------------------------------------------------------- */

#define CHUNK_MAX 32 /* tokens per chunk (kvp_ref_prefill) */

/* ptr[t] = base + t * stride for the nt vectors of a chunk. */
static void rows_of(float *base, uint64_t stride, uint64_t nt, float **ptr)
{
    for (uint64_t t = 0; t < nt; t++)
        ptr[t] = base + t * stride;
}

/* For nt <= CHUNK_MAX tokens: x += W2 (silu(W1 xb) * (W3 xb)); x, xb
 * (nt, hidden); h1, h3 (nt, inter) scratch. */
static void mlp(const struct kvp_ref_model *rm, const struct ref_layer *w, float *x, float *xb, float *h1, float *h3,
                uint64_t nt)
{
    uint64_t H = rm->hidden, I = rm->inter;
    float *pb[CHUNK_MAX] = {NULL}, *p1[CHUNK_MAX] = {NULL}, *p3[CHUNK_MAX] = {NULL};
    rows_of(xb, H, nt, pb);
    rows_of(h1, I, nt, p1);
    rows_of(h3, I, nt, p3);
    for (uint64_t t = 0; t < nt; t++)
        ref_rmsnorm(pb[t], x + t * H, w->ffn_norm, H);
    ref_matmat(rm, p1, w->w1, (const float *const *)pb, nt, I, H);
    ref_matmat(rm, p3, w->w3, (const float *const *)pb, nt, I, H);
    for (uint64_t i = 0; i < nt * I; i++)
        h1[i] = h1[i] / (1.0f + expf(-h1[i])) * h3[i];
    ref_matmat(rm, pb, w->w2, (const float *const *)p1, nt, H, I);
    for (uint64_t i = 0; i < nt * H; i++)
        x[i] += xb[i];
}

/* Elements of a recurrent state that recur takes at a time: whole rows of
 * H (element i feeds channel i mod H), about RECUR_GROUP of them. */
#define RECUR_GROUP 1024

static uint64_t recur_group(const struct kvp_ref_model *rm)
{
    return rm->hidden >= RECUR_GROUP ? rm->hidden : RECUR_GROUP / rm->hidden * rm->hidden;
}

/* n steps of the gated linear recurrence over S state elements, one per
 * token t (its input xb[t], its output y[t], both (H,)):
 *   s_i = sigmoid(a_i) s_i + b_i xb[i mod H];  y[i mod H] += c_i s_i
 * The state is kept in the model's state dtype (st, S values) and rounded
 * through it before it is read; it is converted a group of elements
 * (recur_group) at a time through tmp (a group's floats). The steps go a
 * group at a time, every token's step of it in turn, so that its bytes
 * stay in the core's cache for all n steps (each step's floats as if it
 * ran alone: an element's value is that of the token before, and
 * y[t][j] sums its elements in increasing order). fresh
 * (the sequence's first token is t = 0) starts from s = 0 without reading
 * st, so the decoder never reads a state byte it has not written. twin (or
 * NULL) receives a copy of every step's new bytes: the twin cache's state
 * (kvp_ref_cache_mirror), written, never read. */
KVP_REF_HOT static void recur(const struct kvp_ref_model *rm, const struct ref_layer *w, enum kvp_dtype dt, uint8_t *st,
                              uint8_t *twin, bool fresh, const float *const *xb, float *const *y, uint64_t nt,
                              float *tmp)
{
    uint32_t H = rm->hidden, sz = ref_codec_plain_size(dt);
    uint64_t G = recur_group(rm);
    for (uint64_t t = 0; t < nt; t++)
        memset(y[t], 0, H * sizeof *y[t]);
    for (uint64_t base = 0; base < w->S; base += G) { /* element base + j feeds channel j mod H */
        uint64_t n = w->S - base < G ? w->S - base : G;
        const float *den = w->rden + base, *gb = w->rb + base, *gc = w->rc + base;
        uint8_t *p = st + base * sz;
        for (uint64_t t = 0; t < nt; t++) {
            if (fresh && t == 0)
                memset(tmp, 0, n * sizeof *tmp);
            else
                ref_codec_get_plain(dt, p, n, tmp);
            for (uint64_t r = 0; r < n; r += H) {
                uint64_t m = n - r < H ? n - r : H;
                float *u = tmp + r;
                const float *d = den + r, *b = gb + r, *x = xb[t];
                for (uint64_t j = 0; j < m; j++)
                    u[j] = u[j] / d[j] + b[j] * x[j];
            }
            ref_codec_put_plain(dt, tmp, n, p);
            if (twin) /* the same bytes */
                memcpy(twin + base * sz, p, n * sz);
            ref_codec_get_plain(dt, p, n, tmp);
            for (uint64_t r = 0; r < n; r += H) {
                uint64_t m = n - r < H ? n - r : H;
                const float *u = tmp + r, *c = gc + r;
                float *o = y[t];
                for (uint64_t j = 0; j < m; j++)
                    o[j] += c[j] * u[j];
            }
        }
    }
}

/* The recurrence of layer l for sequence seq on c's state (nt tokens, the
 * first of them the sequence's first when fresh), writing the new state
 * into c's twin too (kvp_ref_cache_mirror). */
static enum kvp_status recur_layer(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, const struct ref_layer *w,
                                   uint32_t l, uint32_t seq, bool fresh, const float *const *xb, float *const *y,
                                   uint64_t nt, float *tmp, struct kvp_error *err)
{
    uint8_t *state, *twin = NULL;
    enum kvp_status st = ref_cache_state(c, l, seq, &state, err);
    if (st == KVP_OK && ref_cache_twin(c))
        st = ref_cache_state(ref_cache_twin(c), l, seq, &twin, err);
    if (st == KVP_OK)
        recur(rm, w, ref_cache_state_dtype(c), state, twin, fresh, xb, y, nt, tmp);
    return st;
}

static void logits_of(const struct kvp_ref_model *rm, const float *x, float *xb, float *logits)
{
    ref_rmsnorm(xb, x, rm->out_norm, rm->hidden);
    ref_matvec(rm, logits, rm->lm_head, xb, rm->vocab, rm->hidden);
}

/* ---- tokens through the cache ---------------------------------------------- */

/* Tokens of one call (a chunk) share every cached row they read: each row
 * is read (dequantized) once and scored against every query of the chunk,
 * so a chunk of n tokens reads the cache once where n steps read it n times.
 * Every token's arithmetic is that of a step of its own: its scores in row
 * order, its value sums in row order, and the rows of the chunk's earlier
 * tokens as the cache gives them back (ref_cache_reread), so the logits and
 * the cache's bytes are those of n steps, bit for bit (tests/check_ref.c
 * `prefill_equals_steps`). Only a cache whose rows never change once written
 * (ref_cache_rows_final: no residual, no channel-axis groups) is read in
 * chunks; another one a token at a time. */
#define CHUNK_BYTES (1ull << 30) /* pending rows of a chunk (CHUNK_MAX tokens at most) */

struct scratch {
    uint64_t n, pos0, T;  /* tokens in the chunk, the first one's position, pos0 + n */
    float *x, *xb;        /* (n, hidden) residual stream, normed input */
    float *q, *o, *ql;    /* (n, wide) queries, mixer outputs, MLA latent queries/outputs */
    float *row;           /* (threads, 2, wide) per thread: a cached row as read, a chunk row rotated */
    float *h1, *h3;       /* (n, inter) MLP */
    float *st;            /* recurrent state values being updated (recur_group) */
    float *att;           /* (n, heads, T) scores, then weights */
    float *blk;           /* (threads, blk_n) per thread: a block of cached rows (attend), not zeroed */
    uint64_t blk_n;
    float **pk, **pv;     /* (n, layers) pending K (MLA: latent) and V rows of each token; one
                           * row per token for every layer where by_layer */
    bool by_layer;        /* each layer's rows into the cache once its attention is done */
    float **rk, **rv;     /* (n, layers) the same rows as the cache gives them back: one row per
                           * token for every layer, that of the layer being run (reread_rows) */
    float *cs;            /* (n, dmax) RoPE angles of the chunk's positions for cs_d dims (rope_table) */
    uint32_t cs_d, dmax;
    uint64_t heads;
};

/* The chunk's table of RoPE angles for d dims (d <= dmax), filled when it
 * holds another d: every layer of the same head width reads the angles
 * computed once per chunk. */
static void rope_table(struct scratch *s, uint32_t d)
{
    if (s->cs_d == d)
        return;
    for (uint64_t u = 0; u < s->n; u++)
        for (uint32_t i = 0; i + 1 < d; i += 2)
            ref_rope_angle(i, d, s->pos0 + u, s->cs + u * s->dmax + i);
    s->cs_d = d;
}

/* Below this many values a chunk's rotation runs on the calling thread. */
#define ROPE_PAR_MIN (1ull << 16)

struct rope_job {
    float *const *x;
    const struct scratch *s;
    uint64_t off;
    uint32_t h, d, stride;
};

KVP_REF_HOT static void rope_part(void *arg, uint32_t part, uint32_t parts)
{
    const struct rope_job *j = arg;
    for (uint64_t t = j->s->n * part / parts; t < j->s->n * (part + 1) / parts; t++)
        rope_by(j->x[t] + j->off, j->h, j->d, j->stride, j->s->cs + t * j->s->dmax);
}

/* RoPE of the chunk's rows x[t] + off (h heads of d dims, stride floats
 * apart) at their positions, by the chunk's table (filled first), tokens
 * split among the model's threads when there are many values. */
static void rope_rows(const struct kvp_ref_model *rm, struct scratch *s, float *const *x, uint64_t off, uint32_t h,
                      uint32_t d, uint32_t stride)
{
    struct rope_job job = {x, s, off, h, d, stride};
    rope_table(s, d);
    if (s->n * h * d < ROPE_PAR_MIN)
        rope_part(&job, 0, 1);
    else
        kvp_ref_pool_run(rm->pool, rope_part, &job);
}

/* attend's blocks of cached rows: a group of KV heads of ATT_RUN floats of
 * a row at most (one KV head at least), ATT_BLOCK floats of its rows (one
 * row at least) */
#define ATT_RUN 1024
#define ATT_BLOCK (1u << 18)

/* Floats of a layer's K (MLA: latent) and V rows of one token; 0 for a
 * layer that caches none. */
static uint64_t k_floats(const struct ref_layer *w)
{
    return w->wk ? (uint64_t)w->hkv * w->dk : w->wdkv ? (uint64_t)w->rank + w->rope : 0;
}

static uint64_t v_floats(const struct ref_layer *w)
{
    return w->wk ? (uint64_t)w->hkv * w->dv : 0;
}

/* Floats of one token's pending rows, all layers. */
static uint64_t pending_floats(const struct kvp_ref_model *rm)
{
    uint64_t pend = 0;
    for (uint32_t l = 0; l < rm->m.n_layers; l++) {
        const struct ref_layer *w = &rm->w[rm->m.layer_spec[l]];
        pend += k_floats(w) + v_floats(w);
    }
    return pend;
}

/* Widest per-token row of the scratch (see scratch_of). */
static uint64_t scratch_wide(const struct kvp_ref_model *rm)
{
    uint64_t wide = rm->hidden;
    for (uint32_t i = 0; i < rm->m.n_specs; i++) {
        const struct ref_layer *w = &rm->w[i];
        uint64_t a = (uint64_t)w->hq * (w->dk > w->dv ? w->dk : w->dv) + w->rank + w->rope;
        uint64_t b = (uint64_t)w->hkv * (w->dk > w->dv ? w->dk : w->dv) + w->rank + w->rope + (uint64_t)w->hq * w->rank;
        wide = a > wide ? a : wide;
        wide = b > wide ? b : wide;
    }
    return wide;
}

/* Whether a chunk's rows go into the cache a layer at a time, each layer's
 * once its attention is done (so that the pending rows are one layer's,
 * reused): where the cache's layers commute (ref_cache_layerwise, its twin
 * too) and no layer reads another's rows (shared). */
static bool by_layer(const struct kvp_ref_model *rm, const struct kvp_ref_cache *c)
{
    if (!ref_cache_layerwise(c) || (ref_cache_twin(c) && !ref_cache_layerwise(ref_cache_twin(c))))
        return false;
    for (uint32_t l = 0; l < rm->m.n_layers; l++)
        if (kvp_model_layer(&rm->m, l)->kind == KVP_LAYER_SHARED)
            return false;
    return true;
}

/* The chunk's scratch, carved from the cache's scratch memory (kept by the
 * cache from call to call, so that a step allocates nothing once the
 * longest sequence's scores fit), zeroed. */
static enum kvp_status scratch_of(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint64_t pos0, uint64_t n,
                                  struct scratch *s, struct kvp_error *err)
{
    uint64_t H = rm->hidden, wide = scratch_wide(rm), heads = 1, pend = pending_floats(rm), L = rm->m.n_layers,
             parts = kvp_ref_pool_parts(rm->pool), kmax = 0, vmax = 0;
    memset(s, 0, sizeof *s);
    for (uint32_t i = 0; i < rm->m.n_specs; i++) {
        const struct ref_layer *w = &rm->w[i];
        uint64_t nk = k_floats(w), nv = v_floats(w);
        heads = w->hq > heads ? w->hq : heads;
        kmax = nk > kmax ? nk : kmax;
        vmax = nv > vmax ? nv : vmax;
    }
    s->by_layer = by_layer(rm, c);
    if (s->by_layer) /* one layer's rows per token, 16 floats apart more than their size (rows a multiple
                      * of 4 KiB apart would share one set of L1's lines) */
        pend = kmax + vmax + 16;
    uint64_t I = rm->inter, per, att, rows, nf, bytes, ptrs, blk = ATT_BLOCK, total, angles;
    uint32_t dmax = 1;
    for (uint32_t i = 0; i < rm->m.n_specs; i++) {
        blk = rm->w[i].dk > blk ? rm->w[i].dk : blk;
        blk = rm->w[i].dv > blk ? rm->w[i].dv : blk;
        dmax = rm->w[i].dk > dmax ? rm->w[i].dk : dmax;
    }
    /* per token: x, xb, q, o, ql, h1, h3, pending and re-read rows; once:
     * row (a cached row, then a rotated one; one per thread), st; the
     * pending and re-read rows (the last ones), the blocks and the RoPE
     * angles are written before they are read, so left out of the zeroing */
    if (!kvp_add(2 * H + 3 * wide + 2 * I, pend + kmax + vmax, &per) || !kvp_mul(per, n, &nf) ||
        !kvp_mul3(n, heads, pos0 + n, &att) || !kvp_add(nf, att, &nf) || !kvp_mul3(2, wide, parts, &rows) ||
        !kvp_add(nf, rows, &nf) || !kvp_add(nf, recur_group(rm), &nf) || !kvp_mul(nf, sizeof(float), &bytes) ||
        !kvp_mul3(4, n * L, sizeof(float *), &ptrs) || !kvp_add(bytes, ptrs, &bytes) ||
        !kvp_mul3(blk, parts, sizeof(float), &total) || !kvp_add(bytes, total, &total) ||
        !kvp_mul3(n, dmax, sizeof(float), &angles) || !kvp_add(total, angles, &total) ||
        !kvp_mul3(pend + kmax + vmax, n, sizeof(float), &rows))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "the decoder's scratch overflows 64 bits");
    void *mem = ref_cache_scratch(c, total);
    if (!mem)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory for the decoder's scratch");
    memset(mem, 0, (size_t)(bytes - rows)); /* rows: the pending and re-read rows' bytes */
    s->n = n, s->pos0 = pos0, s->T = pos0 + n, s->heads = heads;
    s->pk = mem;
    s->pv = s->pk + n * L;
    s->rk = s->pv + n * L;
    s->rv = s->rk + n * L;
    s->x = (float *)(s->rv + n * L);
    s->xb = s->x + n * H;
    s->q = s->xb + n * H;
    s->o = s->q + n * wide;
    s->ql = s->o + n * wide;
    s->h1 = s->ql + n * wide;
    s->h3 = s->h1 + n * I;
    s->row = s->h3 + n * I;
    s->st = s->row + 2 * wide * parts;
    s->att = s->st + recur_group(rm);
    s->blk = s->x + nf;
    s->blk_n = blk;
    s->cs = s->blk + blk * parts;
    s->dmax = dmax;
    float *p = s->att + att;
    for (uint64_t t = 0; t < n; t++, p += kmax + vmax)
        for (uint32_t l = 0; l < L; l++) {
            const struct ref_layer *w = &rm->w[rm->m.layer_spec[l]];
            if (!w->wk && !w->wdkv)
                continue;
            s->rk[t * L + l] = p;
            if (w->wk)
                s->rv[t * L + l] = p + kmax;
        }
    for (uint64_t t = 0; t < n; t++) {
        float *own = p;
        for (uint32_t l = 0; l < L; l++) {
            const struct ref_layer *w = &rm->w[rm->m.layer_spec[l]];
            uint64_t nk = k_floats(w), nv = v_floats(w);
            if (!w->wk && !w->wdkv)
                continue;
            if (s->by_layer)
                p = own;
            s->pk[t * L + l] = p, p += nk;
            if (nv)
                s->pv[t * L + l] = p, p += nv;
        }
        if (s->by_layer)
            p = own + pend;
    }
    return KVP_OK;
}

static uint64_t window_lo(const struct kvp_layer_spec *s, uint64_t pos)
{
    return pos + 1 - attended(s, pos);
}

uint64_t kvp_ref_window_lo(const struct kvp_layer_spec *s, uint64_t pos)
{
    return window_lo(s, pos);
}

/* Row j of layer l (K, or V with kv) as query token t of the chunk reads
 * it: from the cache before the chunk, its own pending row, or an earlier
 * token's row as the cache gives it back. NULL when the row is cached (the
 * caller reads it once for all tokens). */
static const float *chunk_row(const struct scratch *s, uint32_t L, uint32_t l, int kv, uint64_t j, uint64_t t)
{
    if (j < s->pos0)
        return NULL;
    uint64_t i = (j - s->pos0) * L + l;
    return j - s->pos0 == t ? (kv ? s->pv : s->pk)[i] : (kv ? s->rv : s->rk)[i];
}

/* Key row j of layer src for token t, from its value off on (nk values),
 * into buf as attention reads it (rotated here when the cache holds
 * un-rotated keys); rows of the chunk only (j >= pos0). */
static const float *key_of(const struct kvp_ref_model *rm, const struct scratch *s, uint32_t src, uint64_t off,
                           uint64_t nk, uint32_t rope_at, uint32_t rope_d, uint32_t rope_h, uint32_t rope_stride,
                           uint64_t j, uint64_t t, float *buf)
{
    const float *k = chunk_row(s, rm->m.n_layers, src, 0, j, t) + off;
    if (!rm->o.pre_rope_keys)
        return k;
    memcpy(buf, k, nk * sizeof *k);
    ref_rope(buf + rope_at, rope_h, rope_d, rope_stride, j); /* the cache holds un-rotated keys: rotate after reading */
    return buf;
}

/* Attention of a chunk in parts by query heads: part i of k runs heads
 * [hq i / k, hq (i + 1) / k) (whole KV heads' query heads when there are k
 * KV heads or more) of every token through every phase (scores, softmax,
 * value sums), in the order one thread runs them, reading rows into
 * buffers of its own (row + 2 wide i, blk + blk_n i). */
struct att_job {
    const struct kvp_ref_model *rm;
    const struct kvp_ref_cache *c;
    const struct ref_layer *w;
    uint32_t l, seq; /* the layer whose rows are read (shared: its source) */
    struct scratch *s;
    uint64_t wide;
    bool mla;
};

/* KV heads [k0, k1) of layer src's rows (K, or V with kv) of positions
 * [j0, j1), into blk (j1 - j0, (k1 - k0) d) as the chunk's later tokens
 * read them: from the cache, or a row of the chunk as the cache gives it
 * back (j1 < pos0 + n: the last token's row is only its own); keys
 * rotated here when the cache holds them un-rotated. */
static void read_block(const struct att_job *jb, int kv, uint32_t k0, uint32_t k1, uint64_t j0, uint64_t j1, float *blk)
{
    const struct scratch *s = jb->s;
    uint32_t d = kv ? jb->w->dv : jb->w->dk;
    uint64_t width = (uint64_t)(k1 - k0) * d, jc = j1 < s->pos0 ? j1 : s->pos0 > j0 ? s->pos0 : j0;
    ref_cache_read_span(jb->c, jb->l, jb->seq, kv, j0, jc, k0, k1 - k0, blk); /* the cached rows [j0, jc) */
    for (uint64_t j = j0; j < j1; j++) {
        float *r = blk + (j - j0) * width;
        if (j >= jc)
            memcpy(r, (kv ? s->rv : s->rk)[(j - s->pos0) * jb->rm->m.n_layers + jb->l] + (uint64_t)k0 * d,
                   width * sizeof *r);
        if (!kv && jb->rm->o.pre_rope_keys)
            ref_rope(r, k1 - k0, d, d, j);
    }
}

/* Scores of KV head kh's query heads of qa..qb (every token of the chunk)
 * with the keys of positions j0..j1 (rows k, stride floats apart; read_block),
 * DOTS_NT queries by DOTS_ROWS keys at a time: the floats of dot, each
 * times scale, where the token attends the position before its own. */
KVP_REF_HOT static void score_block(const struct att_job *jb, uint32_t kh, uint32_t qa, uint32_t qb, const float *k,
                        uint64_t stride, uint64_t j0, uint64_t j1, float scale)
{
    const struct ref_layer *w = jb->w;
    const struct scratch *s = jb->s;
    const struct kvp_layer_spec *ss = kvp_model_layer(&jb->rm->m, jb->l);
    uint32_t g = w->hq / w->hkv, ha = kh * g > qa ? kh * g : qa, hb = (kh + 1) * g < qb ? (kh + 1) * g : qb,
             nh = hb - ha;
    uint64_t nv = s->n * nh, T = s->T; /* query v: token v / nh, head ha + v mod nh */
    for (uint64_t v0 = 0; v0 < nv; v0 += DOTS_NT) {
        uint64_t m = nv - v0 < DOTS_NT ? nv - v0 : DOTS_NT;
        const float *xs[DOTS_NT];
        _Alignas(64) float xt[DOTS_COLS * DOTS_NT], res[DOTS_ROWS * DOTS_NT];
        for (uint64_t v = 0; v < DOTS_NT; v++) {
            uint64_t u = v0 + (v < m ? v : m - 1);
            xs[v] = s->q + u / nh * jb->wide + (uint64_t)(ha + u % nh) * w->dk;
        }
        uint64_t jend = s->pos0 + (v0 + m - 1) / nh; /* the group's last token's own row */
        if (jend > j1)
            jend = j1;
        if (w->dk <= DOTS_COLS)
            dots_transpose(xs, 0, w->dk, xt);
        for (uint64_t j = j0; j < jend; j += DOTS_ROWS) {
            uint64_t ni = jend - j < DOTS_ROWS ? jend - j : DOTS_ROWS;
            dots(k + (j - j0) * stride, stride, ni, xs, w->dk, xt, res);
            for (uint64_t r0 = 0; r0 < ni; r0 += 16) { /* a run of 16 keys per query */
                uint64_t nr = ni - r0 < 16 ? ni - r0 : 16, a = j + r0;
                v16 b[16];
                res_runs(res, r0, nr, b);
                for (uint64_t v = 0; v < m; v++) {
                    uint64_t u = v0 + v, t = u / nh, pos = s->pos0 + t, tlo = window_lo(ss, pos);
                    uint64_t lo = a > tlo ? a : tlo, hi = a + nr < pos ? a + nr : pos; /* its keys [lo, hi) */
                    float *att = s->att + t * s->heads * T + (uint64_t)(ha + u % nh) * T - tlo;
                    v16 sc = b[v] * scale;
                    if (lo == a && hi == a + 16)
                        V16_STORE(att + a, sc);
                    else
                        for (uint64_t i = lo; i < hi; i++)
                            att[i] = sc[i - a];
                }
            }
        }
    }
}

/* Attention of the chunk's queries q (n, hq, dk), heads h0..h1, over each
 * one's positions of layer src (its window), out o (n, hq, dv). A group of
 * KV heads at a time (ATT_RUN floats of a row, read in one run), its rows
 * a block of positions at a time (ATT_BLOCK floats; read_block: cached
 * rows and the chunk's own as the cache gives them back): the group's
 * rows, queries and outputs stay in the core's cache while its query heads
 * score them and sum them; each token's own row (pending, as computed)
 * apart. Every score and every value sum is that of a step of its own, in
 * row order (blocks in order, the own row last), so the result does not
 * depend on the group or block sizes. */
KVP_REF_HOT static void attend(const struct att_job *jb, uint32_t h0, uint32_t h1, float *row, float *blk)
{
    const struct kvp_ref_model *rm = jb->rm;
    const struct ref_layer *w = jb->w;
    uint32_t src = jb->l;
    struct scratch *s = jb->s;
    uint64_t wide = jb->wide;
    const struct kvp_layer_spec *ss = kvp_model_layer(&rm->m, src);
    uint32_t g = w->hq / w->hkv, dmax = w->dk > w->dv ? w->dk : w->dv, klo = h0 / g, khi = (h1 - 1) / g + 1;
    uint32_t G = ATT_RUN / dmax ? ATT_RUN / dmax : 1;
    uint64_t T = s->T, lo = window_lo(ss, s->pos0);
    uint32_t L = rm->m.n_layers;
    float scale = 1.0f / sqrtf((float)w->dk);
    for (uint32_t k0 = klo; k0 < khi; k0 += G) {
        uint32_t k1 = k0 + G < khi ? k0 + G : khi, qa = k0 * g > h0 ? k0 * g : h0, qb = k1 * g < h1 ? k1 * g : h1;
        uint64_t wk = (uint64_t)(k1 - k0) * w->dk, wv = (uint64_t)(k1 - k0) * w->dv;
        uint64_t jbk = s->blk_n / wk, jbv = s->blk_n / wv; /* >= 1: G = 1 where a head is wider than ATT_RUN */
        for (uint64_t j0 = lo; j0 < T; j0 += jbk) {
            uint64_t j1 = j0 + jbk < T ? j0 + jbk : T;
            uint64_t je = j1 < T - 1 ? j1 : T - 1; /* [j0, je) read into blk */
            bool many = s->n * (qb - qa) / (k1 - k0) >= DOTS_MIN; /* query vectors per KV head */
            if (j0 < je)
                read_block(jb, 0, k0, k1, j0, je, blk);
            for (uint32_t kh = k0; kh < k1 && many && j0 < je; kh++)
                score_block(jb, kh, qa, qb, blk + (uint64_t)(kh - k0) * w->dk, wk, j0, je, scale);
            for (uint64_t t = 0; t < s->n; t++) {
                uint64_t pos = s->pos0 + t, tlo = window_lo(ss, pos), a = j0 > tlo ? j0 : tlo,
                         b = j1 < pos + 1 ? j1 : pos + 1;
                uint64_t own = b > pos ? pos : b; /* the rows before it are in blk */
                float *att = s->att + t * s->heads * T;
                if (many && a < own) /* score_block scored them */
                    a = own;
                for (uint32_t kh = k0; kh < k1; kh++)
                    for (uint64_t j = a; j < b; j++) {
                        const float *k = j < pos ? blk + (j - j0) * wk + (uint64_t)(kh - k0) * w->dk
                                                 : key_of(rm, s, src, (uint64_t)kh * w->dk, w->dk, 0, w->dk, 1, w->dk,
                                                          j, t, row);
                        uint32_t ha = kh * g > qa ? kh * g : qa, hb = (kh + 1) * g < qb ? (kh + 1) * g : qb;
                        for (uint32_t h = ha; h < hb; h++)
                            att[h * T + (j - tlo)] = dot(s->q + t * wide + (uint64_t)h * w->dk, k, w->dk) * scale;
                    }
            }
        }
        for (uint64_t t = 0; t < s->n; t++) {
            uint64_t pos = s->pos0 + t, m = pos - window_lo(ss, pos) + 1;
            ref_softmax_rows(s->att + t * s->heads * T + (uint64_t)qa * T, T, qb - qa, m);
            memset(s->o + t * wide + (uint64_t)qa * w->dv, 0, (uint64_t)(qb - qa) * w->dv * sizeof(float));
        }
        for (uint64_t j0 = lo; j0 < T; j0 += jbv) {
            uint64_t j1 = j0 + jbv < T ? j0 + jbv : T;
            if (j0 < T - 1)
                read_block(jb, 1, k0, k1, j0, j1 < T - 1 ? j1 : T - 1, blk);
            for (uint64_t t = 0; t < s->n; t++) {
                /* tokens t.. t + nq - 1 (up to WSUM_NQ that read the block's
                 * rows from the same one on) summed together over t's rows
                 * of the block; then each later one's next rows; then each
                 * one's own row */
                uint64_t a[WSUM_NQ], b[WSUM_NQ], c[WSUM_NQ], tlo[WSUM_NQ];
                uint32_t nq = 0;
                for (uint32_t q = 0; q < WSUM_NQ && t + q < s->n; q++) {
                    uint64_t pos = s->pos0 + t + q;
                    tlo[q] = window_lo(ss, pos);
                    a[q] = j0 > tlo[q] ? j0 : tlo[q];
                    b[q] = j1 < pos + 1 ? j1 : pos + 1;
                    c[q] = b[q] < pos ? b[q] : pos; /* [a, c) in blk; [c, b) the own row, if in the block */
                    if (q > 0 && (a[q] != a[0] || a[0] >= c[0]))
                        break;
                    nq = q + 1;
                }
                for (uint32_t h = qa; h < qb; h++) {
                    uint64_t kh = h / g;
                    float *oh[WSUM_NQ];
                    const float *ph[WSUM_NQ];
                    for (uint32_t q = 0; q < nq; q++) {
                        oh[q] = s->o + (t + q) * wide + (uint64_t)h * w->dv;
                        ph[q] = s->att + (t + q) * s->heads * T + h * T - tlo[q] + a[0];
                    }
                    const float *vb = blk + (kh - k0) * w->dv;
                    if (a[0] < c[0])
                        wsum(oh, ph, nq, vb + (a[0] - j0) * wv, c[0] - a[0], wv, w->dv);
                    for (uint32_t q = 1; q < nq; q++)
                        if (c[0] < c[q]) { /* its rows after t's */
                            const float *pj = ph[q] + (c[0] - a[0]);
                            wsum(&oh[q], &pj, 1, vb + (c[0] - j0) * wv, c[q] - c[0], wv, w->dv);
                        }
                    for (uint32_t q = 0; q < nq; q++)
                        if (a[q] <= c[q] && c[q] < b[q]) { /* the own row */
                            const float *pj = s->att + (t + q) * s->heads * T + h * T - tlo[q] + c[q];
                            wsum(&oh[q], &pj, 1, chunk_row(s, L, src, 1, c[q], t + q) + kh * w->dv, 1, 0, w->dv);
                        }
                }
                t += nq - 1;
            }
        }
    }
}

/* MLA through the cache, in the absorbed form: per head, q_lat = W_uk^T q_nope
 * (rank,) scores the cached latents directly, and the output latent is
 * decompressed once by W_uv. Equal in exact arithmetic to decompressing every
 * cached latent per head (what kvp_ref_recompute does). */
KVP_REF_HOT static void attend_mla(const struct att_job *jb, uint32_t h0, uint32_t h1, float *row)
{
    const struct kvp_ref_model *rm = jb->rm;
    const struct kvp_ref_cache *c = jb->c;
    const struct ref_layer *w = jb->w;
    uint32_t l = jb->l, seq = jb->seq;
    struct scratch *s = jb->s;
    uint64_t wide = jb->wide;
    uint64_t R = w->rank, T = s->T, nk = R + w->rope;
    uint32_t L = rm->m.n_layers;
    float scale = 1.0f / sqrtf((float)w->dk);
    float *buf = row + wide; /* the row's second half */
    for (uint64_t t = 0; t < s->n; t++) { /* qlat[r] sums U[i][r] q[i] over i in order, all r at once */
        float *qlat = s->ql + t * wide; /* (hq, rank) */
        memset(qlat + (uint64_t)h0 * R, 0, (uint64_t)(h1 - h0) * R * sizeof *qlat);
        for (uint32_t h = h0; h < h1; h++) {
            const float *qn = s->q + t * wide + (uint64_t)h * w->dk, *U = w->wuk + (uint64_t)h * w->nope * R;
            float *ql = qlat + (uint64_t)h * R;
            for (uint32_t i = 0; i < w->nope; i++)
                for (uint64_t r = 0; r < R; r++)
                    ql[r] += U[i * R + r] * qn[i];
        }
    }
    for (uint64_t j = 0; j < T; j++) {
        if (j < s->pos0) {
            ref_cache_read_k(c, l, seq, j, row);
            if (rm->o.pre_rope_keys) /* the decoupled RoPE key, cached un-rotated */
                ref_rope(row + R, 1, w->rope, w->rope, j);
        }
        for (uint64_t t = 0; t < s->n; t++) {
            if (j > s->pos0 + t)
                continue;
            const float *lat = j < s->pos0 ? row : key_of(rm, s, l, 0, nk, (uint32_t)R, w->rope, 1, w->rope, j, t, buf);
            float *att = s->att + t * s->heads * T;
            for (uint32_t h = h0; h < h1; h++) {
                const float *qr = s->q + t * wide + (uint64_t)h * w->dk + w->nope;
                att[h * T + j] = (dot(s->ql + t * wide + h * R, lat, R) + dot(qr, lat + R, w->rope)) * scale;
            }
        }
    }
    for (uint64_t t = 0; t < s->n; t++) {
        ref_softmax_rows(s->att + t * s->heads * T + (uint64_t)h0 * T, T, h1 - h0, s->pos0 + t + 1);
        memset(s->ql + t * wide + (uint64_t)h0 * R, 0,
               (uint64_t)(h1 - h0) * R * sizeof(float)); /* reuse: the output latents (hq, rank) */
    }
    for (uint64_t j = 0; j < T; j++) {
        if (j < s->pos0)
            ref_cache_read_k(c, l, seq, j, row);
        for (uint64_t t = 0; t < s->n; t++) {
            if (j > s->pos0 + t)
                continue;
            const float *lat = j < s->pos0 ? row : chunk_row(s, L, l, 0, j, t);
            const float *att = s->att + t * s->heads * T;
            float *olat = s->ql + t * wide;
            for (uint32_t h = h0; h < h1; h++)
                for (uint64_t r = 0; r < R; r++)
                    olat[h * R + r] += att[h * T + j] * lat[r];
        }
    }
    for (uint64_t t = 0; t < s->n; t++)
        for (uint32_t h = h0; h < h1; h++) {
            float *oh = s->o + t * wide + (uint64_t)h * w->dv;
            const float *lh = s->ql + t * wide + h * R;
            ref_matvec_rows(&oh, w->wuv + (uint64_t)h * w->dv * R, &lh, 1, 0, w->dv, R);
        }
}

/* Below this many multiply-adds (scores and value sums of all heads) a
 * chunk's attention runs on the calling thread. */
#define ATTEND_PAR_MIN (1ull << 16)

static void att_part(void *arg, uint32_t part, uint32_t parts)
{
    const struct att_job *jb = arg;
    uint32_t hq = jb->w->hq, h0 = (uint32_t)((uint64_t)hq * part / parts),
             h1 = (uint32_t)((uint64_t)hq * (part + 1) / parts);
    float *row = jb->s->row + 2 * jb->wide * part;
    if (!jb->mla && jb->w->hkv >= parts) { /* whole KV heads: each group's rows are read by one part */
        uint32_t g = hq / jb->w->hkv;
        h0 = (uint32_t)((uint64_t)jb->w->hkv * part / parts) * g;
        h1 = (uint32_t)((uint64_t)jb->w->hkv * (part + 1) / parts) * g;
    }
    if (h0 == h1)
        return;
    if (jb->mla)
        attend_mla(jb, h0, h1, row);
    else
        attend(jb, h0, h1, row, jb->s->blk + jb->s->blk_n * part);
}

/* The chunk's attention over layer l's rows (MLA, or attention over layer
 * src's: itself, or the layer a shared one reads), its heads split among
 * the model's threads. */
static void attention(const struct kvp_ref_model *rm, const struct kvp_ref_cache *c, const struct ref_layer *w,
                      uint32_t l, uint32_t seq, struct scratch *s, uint64_t wide, bool mla)
{
    struct att_job jb = {rm, c, w, l, seq, s, wide, mla};
    uint64_t work = s->n * s->T * w->hq * ((uint64_t)w->dk + w->dv + w->rank);
    if (w->hq < 2 || work < ATTEND_PAR_MIN)
        att_part(&jb, 0, 1);
    else
        kvp_ref_pool_run(rm->pool, att_part, &jb);
}

/* Layer l's pending rows of every token of the chunk, as the cache will
 * give them back (for the chunk's later tokens): K rows in part 0, V rows
 * in part 1 where there are two (each side has its own codec scratch). */
struct reread_job {
    struct kvp_ref_cache *c;
    const struct scratch *s;
    uint32_t l, L;
    bool v; /* the layer caches V rows */
};

static void reread_part(void *arg, uint32_t part, uint32_t parts)
{
    const struct reread_job *j = arg;
    const struct scratch *s = j->s;
    for (int kv = 0; kv < 2; kv++) {
        if ((kv && !j->v) || (parts > 1 && part != (uint32_t)kv))
            continue;
        float *const *x = kv ? s->pv : s->pk, *const *out = kv ? s->rv : s->rk;
        for (uint64_t t = 0; t + 1 < s->n; t++) /* the last token's rows are read by no later one */
            ref_cache_reread(j->c, j->l, kv, x[t * j->L + j->l], out[t * j->L + j->l]);
    }
}

static void reread_rows(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, const struct ref_layer *w, uint32_t l,
                        struct scratch *s)
{
    struct reread_job job = {c, s, l, rm->m.n_layers, w->wk != NULL};
    if (job.v && s->n > 2 && kvp_ref_pool_parts(rm->pool) > 1)
        kvp_ref_pool_run(rm->pool, reread_part, &job);
    else
        reread_part(&job, 0, 1);
}

/* The n tokens' rows of a chunk (pk, pv: (n, layers) pointers) into
 * c and into its twin, every layer's (ref_cache_commit) or layer's only
 * (its rows of every token, ref_cache_commit_layer; the tokens counted by
 * ref_cache_commit_end once every layer's are in): the two caches in parts
 * 0 and 1 where there are two (each has its own scratch and allocator),
 * else one after the other. */
#define ALL_LAYERS UINT32_MAX

struct commit_job {
    struct kvp_ref_cache *c[2]; /* the cache, its twin (or NULL) */
    uint32_t seq, L, layer;     /* layer: ALL_LAYERS, or the one */
    float *const *pk, *const *pv;
    uint64_t n;
    enum kvp_status st[2];
    struct kvp_error err[2];
};

static void commit_part(void *arg, uint32_t part, uint32_t parts)
{
    struct commit_job *j = arg;
    for (int i = 0; i < 2; i++) {
        if (!j->c[i] || (parts > 1 && part != (uint32_t)i))
            continue;
        for (uint64_t t = 0; t < j->n && j->st[i] == KVP_OK; t++) {
            const float *const *k = (const float *const *)j->pk + t * j->L;
            const float *const *v = (const float *const *)j->pv + t * j->L;
            j->st[i] = j->layer == ALL_LAYERS
                           ? ref_cache_commit(j->c[i], j->seq, k, v, &j->err[i])
                           : ref_cache_commit_layer(j->c[i], j->seq, j->layer, k[j->layer], v[j->layer], &j->err[i]);
        }
    }
}

static enum kvp_status commit_rows(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                                   uint32_t layer, float *const *pk, float *const *pv, uint64_t n,
                                   struct kvp_error *err)
{
    struct commit_job job = {{c, ref_cache_twin(c)}, seq, rm->m.n_layers, layer, pk, pv, n, {KVP_OK, KVP_OK}, {{0}}};
    if (job.c[1] && kvp_ref_pool_parts(rm->pool) > 1)
        kvp_ref_pool_run(rm->pool, commit_part, &job);
    else
        commit_part(&job, 0, 1);
    for (int i = 0; i < 2; i++)
        if (job.st[i] != KVP_OK) {
            if (err)
                *err = job.err[i];
            return job.st[i];
        }
    return KVP_OK;
}

/* Layer l's rows of the chunk into the cache and its twin where they go a
 * layer at a time (s->by_layer), once nothing reads them any more. */
static enum kvp_status layer_done(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                                  const struct scratch *s, uint32_t l, struct kvp_error *err)
{
    const struct ref_layer *w = &rm->w[rm->m.layer_spec[l]];
    if (!s->by_layer || (!w->wk && !w->wdkv))
        return KVP_OK;
    return commit_rows(rm, c, seq, l, s->pk, s->pv, s->n, err);
}

/* The chunk's tokens into the cache and its twin: every layer's rows, or
 * (by_layer) counted, their rows in already. */
static enum kvp_status chunk_done(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                                  const struct scratch *s, struct kvp_error *err)
{
    enum kvp_status st;
    if (!s->by_layer)
        return commit_rows(rm, c, seq, ALL_LAYERS, s->pk, s->pv, s->n, err);
    if ((st = ref_cache_commit_end(c, seq, s->n, err)) != KVP_OK || !ref_cache_twin(c))
        return st;
    return ref_cache_commit_end(ref_cache_twin(c), seq, s->n, err);
}

/* The chunk's n tokens (at positions pos0..) through every layer, the
 * logits of the last one (when asked for), each token's rows into the
 * cache in order: at the end, or a layer at a time (by_layer). */
static enum kvp_status forward(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                               const uint32_t *tok, float *logits, struct scratch *s, uint64_t wide,
                               struct kvp_error *err)
{
    uint64_t H = rm->hidden, n = s->n;
    uint32_t L = rm->m.n_layers;
    enum kvp_status st;

    for (uint64_t t = 0; t < n; t++) {
        if (tok[t] >= rm->vocab)
            return kvp_fail(err, KVP_ERR_RANGE, "token %u is outside the vocabulary of %u", tok[t], rm->vocab);
        memcpy(s->x + t * H, rm->embed + (uint64_t)tok[t] * H, H * sizeof(float));
    }
    for (uint32_t l = 0; l < L; l++) {
        const struct kvp_layer_spec *sp = kvp_model_layer(&rm->m, l);
        const struct ref_layer *w = &rm->w[rm->m.layer_spec[l]];
        if (sp->kind != KVP_LAYER_NONE) {
            float *xb[CHUNK_MAX] = {NULL}, *q[CHUNK_MAX] = {NULL}, *k[CHUNK_MAX] = {NULL}, *v[CHUNK_MAX] = {NULL},
                  *kr[CHUNK_MAX] = {NULL};
            const float *const *in = (const float *const *)xb;
            rows_of(s->xb, H, n, xb);
            rows_of(s->q, wide, n, q);
            for (uint64_t t = 0; t < n; t++) {
                ref_rmsnorm(xb[t], s->x + t * H, w->attn_norm, H);
                k[t] = s->pk[t * L + l], v[t] = s->pv[t * L + l];
                kr[t] = k[t] ? k[t] + w->rank : NULL;
            }
            switch (sp->kind) {
            case KVP_LAYER_FULL:
            case KVP_LAYER_SLIDING:
            case KVP_LAYER_CHUNKED:
                ref_matmat(rm, k, w->wk, in, n, (uint64_t)w->hkv * w->dk, H);
                ref_matmat(rm, v, w->wv, in, n, (uint64_t)w->hkv * w->dv, H);
                if (!rm->o.pre_rope_keys) /* else attention rotates them after reading */
                    rope_rows(rm, s, k, 0, w->hkv, w->dk, w->dk);
                /* fallthrough */
            case KVP_LAYER_SHARED:
                ref_matmat(rm, q, w->wq, in, n, (uint64_t)w->hq * w->dk, H);
                rope_rows(rm, s, q, 0, w->hq, w->dk, w->dk);
                break;
            case KVP_LAYER_MLA:
                ref_matmat(rm, q, w->wq, in, n, (uint64_t)w->hq * w->dk, H);
                ref_matmat(rm, k, w->wdkv, in, n, w->rank, H);
                ref_matmat(rm, kr, w->wkr, in, n, w->rope, H);
                rope_rows(rm, s, q, w->nope, w->hq, w->rope, w->dk);
                if (!rm->o.pre_rope_keys)
                    rope_rows(rm, s, kr, 0, 1, w->rope, w->rope);
                break;
            case KVP_LAYER_RECURRENT: {
                float *o[CHUNK_MAX] = {NULL};
                rows_of(s->o, wide, n, o);
                if ((st = recur_layer(rm, c, w, l, seq, s->pos0 == 0, in, o, n, s->st, err)) != KVP_OK)
                    return st;
                for (uint64_t t = 0; t < n; t++)
                    for (uint64_t i = 0; i < H; i++)
                        s->x[t * H + i] += o[t][i];
                break;
            }
            default:
                break;
            }
            if (w->wk || w->wdkv)
                reread_rows(rm, c, w, l, s);
            else if (sp->kind == KVP_LAYER_SHARED) /* the rows of the layer it reads, once more */
                reread_rows(rm, c, &rm->w[rm->m.layer_spec[sp->shares]], sp->shares, s);
            if (w->wq)
                attention(rm, c, w, sp->kind == KVP_LAYER_SHARED ? sp->shares : l, seq, s, wide,
                          sp->kind == KVP_LAYER_MLA);
            if ((st = layer_done(rm, c, seq, s, l, err)) != KVP_OK)
                return st;
            if (w->wo) {
                float *o[CHUNK_MAX] = {NULL};
                rows_of(s->o, wide, n, o);
                ref_matmat(rm, xb, w->wo, (const float *const *)o, n, H, (uint64_t)w->hq * w->dv);
                for (uint64_t i = 0; i < n * H; i++)
                    s->x[i] += s->xb[i];
            }
        }
        if (w->w1)
            mlp(rm, w, s->x, s->xb, s->h1, s->h3, n);
    }
    if (logits)
        logits_of(rm, s->x + (n - 1) * H, s->xb, logits);
    return chunk_done(rm, c, seq, s, err);
}

enum kvp_status kvp_ref_prefill(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                                const uint32_t *tokens, uint64_t n, float *logits, struct kvp_error *err)
{
    uint64_t per = 2 * pending_floats(rm) * sizeof(float), most = CHUNK_MAX, wide = scratch_wide(rm);
    if (per && CHUNK_BYTES / per < most)
        most = CHUNK_BYTES / per ? CHUNK_BYTES / per : 1;
    if (most > DOTS_NT) /* whole groups of vectors for dots */
        most = most / DOTS_NT * DOTS_NT;
    if (!ref_cache_rows_final(c))
        most = 1;
    for (uint64_t i = 0; i < n;) {
        uint64_t pos0 = kvp_ref_seq_len(c, seq), m = n - i < most ? n - i : most;
        struct scratch s;
        enum kvp_status st;
        if (pos0 + m > ref_cache_context(c))
            return kvp_fail(err, KVP_ERR_RANGE, "sequence %u is full: the cache holds %llu tokens", seq,
                            (unsigned long long)ref_cache_context(c));
        if ((st = scratch_of(rm, c, pos0, m, &s, err)) != KVP_OK ||
            (st = forward(rm, c, seq, tokens + i, i + m == n ? logits : NULL, &s, wide, err)) != KVP_OK)
            return st;
        i += m;
    }
    return KVP_OK;
}

enum kvp_status kvp_ref_step(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                             uint32_t token, float *logits, struct kvp_error *err)
{
    return kvp_ref_prefill(rm, c, seq, &token, 1, logits, err);
}

enum kvp_status kvp_ref_fill(const struct kvp_ref_model *rm, struct kvp_ref_cache *c, uint32_t seq,
                             struct kvp_error *err)
{
    struct scratch s;
    enum kvp_status st;
    uint64_t pos = kvp_ref_seq_len(c, seq);
    if ((st = scratch_of(rm, c, 0, 1, &s, err)) != KVP_OK) /* no scores */
        return st;
    for (uint32_t l = 0; l < rm->m.n_layers && st == KVP_OK; l++) {
        const struct ref_layer *w = &rm->w[rm->m.layer_spec[l]];
        uint64_t nk = k_floats(w), nv = v_floats(w);
        struct pcg r; /* synthetic, varied, bounded entries: a PCG32 stream per (position, layer) */
        ref_pcg_seed(&r, pos, l);
        for (uint64_t i = 0; i < nk; i++)
            s.pk[l][i] = ref_pcg_float(&r);
        for (uint64_t i = 0; i < nv; i++)
            s.pv[l][i] = ref_pcg_float(&r);
        if (w->ra)
            st = recur_layer(rm, c, w, l, seq, pos == 0, (const float *const *)&rm->embed, &s.o, 1, s.st, err);
        if (st == KVP_OK)
            st = layer_done(rm, c, seq, &s, l, err);
    }
    return st == KVP_OK ? chunk_done(rm, c, seq, &s, err) : st;
}

void kvp_ref_layer0_query(const struct kvp_ref_model *rm, uint32_t token, uint64_t pos, float *q)
{
    const struct ref_layer *w = &rm->w[rm->m.layer_spec[0]];
    float *xb = malloc(rm->hidden * sizeof *xb);
    if (!xb)
        return;
    ref_rmsnorm(xb, rm->embed + (uint64_t)token * rm->hidden, w->attn_norm, rm->hidden);
    ref_matvec(rm, q, w->wq, xb, (uint64_t)w->hq * w->dk, rm->hidden);
    ref_rope(q, w->hq, w->dk, w->dk, pos);
    free(xb);
}

/* ---- recompute from scratch ------------------------------------------------ */

/* Every layer's K, V (or MLA latent) for all n positions is computed again,
 * and MLA latents are decompressed per head for every position: nothing is
 * reused from a previous call. */
enum kvp_status kvp_ref_recompute(const struct kvp_ref_model *rm, const uint32_t *tokens, uint64_t n,
                                  float *logits, struct kvp_error *err)
{
    uint64_t H = rm->hidden, L = rm->m.n_layers, kmax = 1, smax = 1, wide = H;
    for (uint32_t i = 0; i < rm->m.n_specs; i++) {
        const struct ref_layer *w = &rm->w[i];
        uint64_t a =
            (uint64_t)w->hq * (w->dk > w->dv ? w->dk : w->dv) + (uint64_t)w->hkv * (w->dk + w->dv) + w->rank + w->rope;
        kmax = a > kmax ? a : kmax;
        smax = w->S > smax ? w->S : smax;
        wide = a > wide ? a : wide;
    }
    /* X (n, H); per layer K (n, hkv*dk), V (n, hkv*dv) kept for shared layers */
    float *X = calloc(n * H, sizeof(float)), *KV = calloc(L * n * kmax, sizeof(float));
    float *xb = calloc(H + wide * 4 + 2 * (uint64_t)rm->inter + n + rm->vocab, sizeof(float));
    uint8_t *state = calloc(smax, 4);
    float *stmp = calloc(recur_group(rm), sizeof(float));
    enum kvp_status st = KVP_OK;
    if (!X || !KV || !xb || !state || !stmp) {
        st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory recomputing %llu tokens", (unsigned long long)n);
        goto out;
    }
    float *q = xb + H, *o = q + wide, *kt = o + wide, *vt = kt + wide, *h1 = vt + wide, *h3 = h1 + rm->inter,
          *att = h3 + rm->inter;
    for (uint64_t t = 0; t < n; t++) {
        if (tokens[t] >= rm->vocab) {
            st = kvp_fail(err, KVP_ERR_RANGE, "token %u is outside the vocabulary of %u", tokens[t], rm->vocab);
            goto out;
        }
        memcpy(X + t * H, rm->embed + (uint64_t)tokens[t] * H, H * sizeof(float));
    }
    for (uint32_t l = 0; l < L; l++) {
        const struct kvp_layer_spec *sp = kvp_model_layer(&rm->m, l);
        const struct ref_layer *w = &rm->w[rm->m.layer_spec[l]];
        float *K = KV + (uint64_t)l * n * kmax; /* (n, kmax): K then V of each position */
        /* pass 1: this layer's K/V (or latent) of every position */
        if (sp->kind == KVP_LAYER_FULL || sp->kind == KVP_LAYER_SLIDING || sp->kind == KVP_LAYER_CHUNKED ||
            sp->kind == KVP_LAYER_MLA)
            for (uint64_t t = 0; t < n; t++) {
                float *row = K + t * kmax;
                ref_rmsnorm(xb, X + t * H, w->attn_norm, H);
                if (sp->kind == KVP_LAYER_MLA) {
                    ref_matvec(rm, row, w->wdkv, xb, w->rank, H);
                    ref_matvec(rm, row + w->rank, w->wkr, xb, w->rope, H);
                    ref_rope(row + w->rank, 1, w->rope, w->rope, t);
                } else {
                    ref_matvec(rm, row, w->wk, xb, (uint64_t)w->hkv * w->dk, H);
                    ref_matvec(rm, row + (uint64_t)w->hkv * w->dk, w->wv, xb, (uint64_t)w->hkv * w->dv, H);
                    ref_rope(row, w->hkv, w->dk, w->dk, t);
                }
            }
        /* pass 2: each position's mixer and MLP */
        for (uint64_t t = 0; t < n; t++) {
            float *x = X + t * H;
            if (sp->kind != KVP_LAYER_NONE) {
                ref_rmsnorm(xb, x, w->attn_norm, H);
                if (sp->kind == KVP_LAYER_RECURRENT) {
                    recur(rm, w, rm->m.state_dtype, state, NULL, t == 0, (const float *const *)&xb, &o, 1, stmp);
                    for (uint64_t i = 0; i < H; i++)
                        x[i] += o[i];
                } else {
                    uint32_t src = sp->kind == KVP_LAYER_SHARED ? sp->shares : l;
                    const struct kvp_layer_spec *ss = kvp_model_layer(&rm->m, src);
                    const float *SK = KV + (uint64_t)src * n * kmax;
                    uint64_t lo = window_lo(ss, t), m = t - lo + 1;
                    float scale = 1.0f / sqrtf((float)w->dk);
                    ref_matvec(rm, q, w->wq, xb, (uint64_t)w->hq * w->dk, H);
                    memset(o, 0, (uint64_t)w->hq * w->dv * sizeof(float));
                    if (sp->kind == KVP_LAYER_MLA) {
                        ref_rope(q + w->nope, w->hq, w->rope, w->dk, t);
                        for (uint32_t h = 0; h < w->hq; h++) {
                            const float *Uk = w->wuk + (uint64_t)h * w->nope * w->rank;
                            const float *Uv = w->wuv + (uint64_t)h * w->dv * w->rank;
                            for (uint64_t j = lo; j <= t; j++) {
                                const float *lat = SK + j * kmax;
                                ref_matvec(rm, kt, Uk, lat, w->nope, w->rank); /* k_nope of head h at j */
                                float acc = 0;
                                for (uint32_t i = 0; i < w->nope; i++)
                                    acc += q[(uint64_t)h * w->dk + i] * kt[i];
                                for (uint32_t i = 0; i < w->rope; i++)
                                    acc += q[(uint64_t)h * w->dk + w->nope + i] * lat[w->rank + i];
                                att[j - lo] = acc * scale;
                            }
                            ref_softmax(att, m);
                            for (uint64_t j = lo; j <= t; j++) {
                                ref_matvec(rm, vt, Uv, SK + j * kmax, w->dv, w->rank); /* v of head h at j */
                                for (uint32_t i = 0; i < w->dv; i++)
                                    o[(uint64_t)h * w->dv + i] += att[j - lo] * vt[i];
                            }
                        }
                    } else {
                        const struct ref_layer *sw = &rm->w[rm->m.layer_spec[src]];
                        uint64_t g = w->hq / sw->hkv;
                        ref_rope(q, w->hq, w->dk, w->dk, t);
                        for (uint32_t h = 0; h < w->hq; h++) {
                            for (uint64_t j = lo; j <= t; j++) {
                                const float *kh = SK + j * kmax + (h / g) * w->dk;
                                float acc = 0;
                                for (uint32_t i = 0; i < w->dk; i++)
                                    acc += q[(uint64_t)h * w->dk + i] * kh[i];
                                att[j - lo] = acc * scale;
                            }
                            ref_softmax(att, m);
                            for (uint64_t j = lo; j <= t; j++) {
                                const float *vh = SK + j * kmax + (uint64_t)sw->hkv * w->dk + (h / g) * w->dv;
                                for (uint32_t i = 0; i < w->dv; i++)
                                    o[(uint64_t)h * w->dv + i] += att[j - lo] * vh[i];
                            }
                        }
                    }
                    ref_matvec(rm, xb, w->wo, o, H, (uint64_t)w->hq * w->dv);
                    for (uint64_t i = 0; i < H; i++)
                        x[i] += xb[i];
                }
            }
            if (w->w1)
                mlp(rm, w, x, xb, h1, h3, 1);
        }
    }
    logits_of(rm, X + (n - 1) * H, xb, logits);
out:
    free(X);
    free(KV);
    free(xb);
    free(state);
    free(stmp);
    return st;
}
