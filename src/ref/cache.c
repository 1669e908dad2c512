/* cache.c -- the reference decoder's KV cache: one store per (layer,
 * sequence, K|V), three allocation policies, every byte counted.
 *
 * A store holds what kvp_cache_tokens says one tensor keeps after T tokens
 * with its window (0 = all): the one rule the decoder shares with the engine,
 * checked by a step-by-step simulation in tests/check_engine.c. Its bytes
 * come from the codec's layouts (layout_bytes), never from the engine's
 * price, which `kvplan validate` compares them with. Two regions:
 *   quant    the older tokens, in the cache format        (quant(T) tokens)
 *   residual the newest tokens in the scale dtype (KIVI)  (resid(T) tokens)
 * Token-axis formats keep the last min(T, window) tokens, each region a
 * ring of rows (slot = pos mod capacity), so a window or a residual evicts
 * its oldest row in place.
 * Channel-axis formats store whole G-token groups per channel, aligned to
 * positions (group k: tokens kG..kG+G-1); the residual collects T mod R'
 * tokens and is quantized in one go when it fills; on a window a group goes
 * when all its tokens have left it (group_slot: where group k lives).
 * Dense-and-sparse outliers (outliers=F, KVQuant): every quantized token
 * keeps its ceil(F * n) largest-magnitude values as fp32 value + int32 index
 * (8 B each), left out of the group ranges. Token axis: after the row's
 * codes, in the same slot; channel axis: a region of its own, one entry
 * list per quantized token, between the meta and the residual. Residual
 * tokens carry none (the engine prices quantized tokens only).
 * Channel-axis bytes are not monotone in T, so a static store is sized by
 * kvp_cache_capacity instead: a quantized region of qcap tokens (a ring of
 * qcap/G group slots) and a residual of min(C, R'-1) tokens (the token that
 * completes R' goes straight into its groups, so the residual never holds R').
 *
 * Policies:
 *   static   one allocation per store for held(context) (channel axis: its
 *            capacity), made up front
 *   dynamic  every append allocates the store's next size, copies what it
 *            keeps and frees the old one (torch.cat): the copy is in the peak;
 *            a step's stores go in kvp_kv_dynamic_peak's order (shrinking
 *            ones first, largest new size first; then smallest first)
 *   paged    blocks of N rows from a per-layer free list; a block table per
 *            store; a window reuses its ceil(W/N) blocks as a ring; blocks
 *            return to the free list when the sequence ends
 */
#include <stdlib.h>
#include <string.h>

#include "kvplan/kv.h"
#include "kvplan/num.h"
#include "ref_internal.h"

/* ---- counting allocator --------------------------------------------------- */

void *kvp_ref_alloc_get(struct kvp_ref_alloc *a, enum kvp_ref_tag tag, uint64_t bytes)
{
    void *p;
    if (bytes == 0 || bytes > SIZE_MAX)
        return NULL;
    if ((p = malloc((size_t)bytes)) == NULL)
        return NULL;
    memset(p, a->canary, (size_t)bytes); /* touch every page: resident memory is what we count */
    a->cur[tag] += bytes;
    a->cur_total += bytes;
    if (a->cur[tag] > a->peak[tag])
        a->peak[tag] = a->cur[tag];
    if (a->cur_total > a->peak_total)
        a->peak_total = a->cur_total;
    a->live++;
    a->calls++;
    return p;
}

void kvp_ref_alloc_put(struct kvp_ref_alloc *a, enum kvp_ref_tag tag, void *p, uint64_t bytes)
{
    if (!p)
        return;
    free(p);
    a->cur[tag] -= bytes;
    a->cur_total -= bytes;
    a->live--;
}

/* ---- stores --------------------------------------------------------------- */

enum store_mode { ROWS, CHANNEL };

struct blocks { /* a free list, or a store's block table */
    uint8_t **p;
    uint64_t n, cap;
};

struct store {
    const struct kvp_format *f;
    enum kvp_ref_tag tag;
    enum store_mode mode;
    uint32_t n_kv, d;
    uint64_t n;        /* values per token: n_kv * d */
    uint64_t window;   /* 0 = every token */
    uint64_t R;        /* residual tokens: rows: f->residual; channel: R' */
    uint64_t qrow;     /* bytes of one quantized token row (rows mode), outliers included */
    uint64_t hrow;     /* bytes of one head of it, outliers excluded */
    uint64_t ob;       /* bytes of one quantized token's outliers: 8 * ceil(F * n) */
    float *otmp;       /* (n,) the cache's scratch: a row with its outliers taken out */
    struct codec_okey *heap; /* the cache's scratch: ceil(F * n) entries */
    uint64_t rrow;     /* bytes of one residual token: n values in the scale dtype */
    uint64_t len;      /* tokens appended */
    /* static / dynamic */
    uint8_t *buf;
    uint64_t bytes, qcap, rcap;
    bool fixed;        /* channel axis, static: regions sized for qcap / rcap tokens */
    /* paged */
    struct blocks table;
    struct blocks *free; /* the layer's free list */
};

struct kvp_ref_cache {
    const struct kvp_ref_model *rm;
    const struct kvp_model *m;
    struct kvp_ref_cache_opts o;
    struct kvp_ref_alloc *a;
    uint64_t *len;          /* (batch,) tokens per sequence */
    struct store *st;       /* (layers, batch, 2): K, V */
    uint8_t **state;        /* (layers, batch) recurrent state or NULL */
    uint64_t *state_bytes;  /* (layers,) */
    struct blocks *free;    /* (layers, 2) */
    float *tmp;             /* a store's row, or a G-token group (G, n) */
    float *otmp[2];         /* a store's row (outliers only), per side (K, V) */
    struct codec_okey *heap[2];
    uint8_t *rowbuf[2];     /* per side: one quantized row of its widest store (ref_cache_reread) */
    struct kvp_ref_cache *twin; /* mirrors every append (kvp_ref_cache_mirror), or NULL */
    void *scratch;          /* the decoder's step scratch (ref_cache_scratch) */
    uint64_t scratch_bytes;
    ref_cache_block_fn *blocks; /* paged: blocks the caller owns (ref_cache_set_blocks), or NULL */
    void *blocks_ctx;
};

static uint64_t held_of(const struct store *s, uint64_t T)
{
    return s->window && T > s->window ? s->window : T;
}

static uint64_t resid_of(const struct store *s, uint64_t T)
{
    if (s->mode == CHANNEL)
        return T % s->R;
    uint64_t h = held_of(s, T);
    return h < s->R ? h : s->R;
}

/* Channel axis: quantized tokens held after T tokens (the whole groups in
 * the window: kvp_cache_tokens), and the first of their groups. */
static uint64_t quant_of(const struct store *s, uint64_t T)
{
    uint64_t q, r;
    kvp_cache_tokens(s->f, T, s->window, false, &q, &r);
    return q;
}

static uint64_t first_group(const struct store *s, uint64_t T)
{
    return (T - T % s->R - quant_of(s, T)) / s->f->group;
}

/* Where group k lives after T tokens: a static store's ring of qcap/G
 * slots, or a dynamic store's k - first group. */
static uint64_t group_slot(const struct store *s, uint64_t k, uint64_t T)
{
    return s->fixed ? k % (s->qcap / s->f->group) : k - first_group(s, T);
}

/* Channel-axis layout of q quantized tokens: codes, then meta, then residual. */
static uint64_t codes_bytes(const struct store *s, uint64_t q)
{
    return (s->n * q * ref_codec_code_bits(s->f->dtype) + 7) / 8;
}

static uint64_t meta_bytes(const struct store *s, uint64_t q)
{
    return s->n * (q / s->f->group) * ref_codec_meta_size(s->f);
}

static uint64_t outl_bytes(const struct store *s, uint64_t q)
{
    return q * s->ob;
}

/* Channel-axis offsets with q quantized tokens held: meta after the codes,
 * the residual after the meta. Dynamic buffers are exactly q tokens long; a
 * static one keeps its regions at capacity, so nothing moves as groups fill. */
static uint64_t chan_meta_off(const struct store *s, uint64_t q)
{
    return codes_bytes(s, s->fixed ? s->qcap : q);
}

/* The outlier lists of the quantized tokens, after the meta. */
static uint64_t chan_out_off(const struct store *s, uint64_t q)
{
    uint64_t c = s->fixed ? s->qcap : q;
    return codes_bytes(s, c) + meta_bytes(s, c);
}

static uint64_t chan_res_off(const struct store *s, uint64_t q)
{
    uint64_t c = s->fixed ? s->qcap : q;
    return codes_bytes(s, c) + meta_bytes(s, c) + outl_bytes(s, c);
}

/* Bytes of a store that holds q quantized and r residual tokens, from its
 * own layout (the offset helpers above stay below this checked total):
 *   rows     q rows of qrow (codes, scales, outliers) + r rows of rrow
 *   channel  codes of q tokens (bit-packed over the store) + a scale set per
 *            channel per G-token group + q outlier lists + r rows of rrow
 * false when it overflows 64 bits. */
static bool layout_bytes(const struct store *s, uint64_t q, uint64_t r, uint64_t *out)
{
    uint64_t a, b, c;
    if (!kvp_mul(r, s->rrow, &b))
        return false;
    if (s->mode == ROWS)
        return kvp_mul(q, s->qrow, &a) && kvp_add(a, b, out);
    return kvp_mul3(s->n, q, ref_codec_code_bits(s->f->dtype), &a) &&
           kvp_mul3(s->n, q / s->f->group, ref_codec_meta_size(s->f), &c) && kvp_add(kvp_cdiv(a, 8), c, &a) &&
           kvp_mul(q, s->ob, &c) && kvp_add(a, c, &a) && kvp_add(a, b, out);
}

/* The store's bytes after T tokens (dynamic: the size of each new copy). */
static enum kvp_status store_bytes_at(const struct store *s, uint64_t T, uint64_t *out, struct kvp_error *err)
{
    uint64_t q, r;
    kvp_cache_tokens(s->f, T, s->window, false, &q, &r);
    if (!layout_bytes(s, q, r, out))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "cache size overflows 64 bits");
    return KVP_OK;
}

/* Rows mode: one quantized row, its outliers (if any) after the codes. */
static void row_encode(const struct store *s, const float *x, uint8_t *dst)
{
    if (!s->ob) {
        ref_codec_encode_row(s->f, s->n_kv, s->d, x, dst);
        return;
    }
    memcpy(s->otmp, x, s->n * sizeof *x);
    ref_codec_split_outliers(s->f, s->n, s->otmp, s->heap, dst + s->qrow - s->ob);
    ref_codec_encode_row(s->f, s->n_kv, s->d, s->otmp, dst);
}

/* Heads h0..h0+nh-1 of a quantized row (each head's codes and scales are
 * contiguous: ref_codec_row_bytes of one head apart). */
static void row_decode(const struct store *s, const uint8_t *src, uint32_t h0, uint32_t nh, float *out)
{
    ref_codec_decode_row(s->f, nh, s->d, src + h0 * s->hrow, out);
    if (s->ob)
        ref_codec_merge_outliers(s->f, s->n, src + s->qrow - s->ob, (uint64_t)h0 * s->d, (uint64_t)nh * s->d, out);
}

/* Channel axis: take the outliers of the G tokens of group x (G, n), the
 * tokens first..first+G-1, into the list region at out (in place: x is the
 * caller's scratch). */
static void chan_split(const struct store *s, float *x, uint64_t first, uint8_t *out)
{
    for (uint64_t j = 0; s->ob && j < s->f->group; j++)
        ref_codec_split_outliers(s->f, s->n, x + j * s->n, s->heap, out + (first + j) * s->ob);
}

/* Where a row of position pos lives (rows mode, static/dynamic). */
static uint8_t *row_at(const struct store *s, uint64_t pos, uint64_t T, bool *resid)
{
    uint64_t r = resid_of(s, T);
    *resid = pos >= T - r;
    if (*resid)
        return s->buf + s->qcap * s->qrow + (pos % s->rcap) * s->rrow;
    return s->buf + (pos % s->qcap) * s->qrow;
}

static uint8_t *paged_row(const struct kvp_ref_cache *c, struct store *s, uint64_t pos, bool make);

/* Paged: the row of pos, allocating its block when asked. */
static uint8_t *own_row(struct store *s, struct kvp_ref_alloc *a, uint32_t block, uint64_t pos, bool make)
{
    uint64_t nb_ring = s->window ? kvp_cdiv(s->window, block) : 0;
    uint64_t slot = nb_ring ? pos % (nb_ring * block) : pos, b = slot / block;
    if (b >= s->table.n) {
        if (!make)
            return NULL;
        if (b >= s->table.cap) {
            uint64_t cap = s->table.cap ? 2 * s->table.cap : 16;
            while (cap <= b)
                cap *= 2;
            uint8_t **p = realloc(s->table.p, cap * sizeof *p);
            if (!p)
                return NULL;
            s->table.p = p;
            s->table.cap = cap;
        }
        while (s->table.n <= b) {
            uint8_t *blk = s->free->n ? s->free->p[--s->free->n]
                                      : kvp_ref_alloc_get(a, s->tag, (uint64_t)block * s->qrow);
            if (!blk)
                return NULL;
            s->table.p[s->table.n++] = blk;
        }
    }
    return s->table.p[b] + (slot % block) * s->qrow;
}

/* Channel axis: heads h0..h0+nh-1 of the rows j0..j1-1, row j at
 * out + (j - j0) nh d: a group's rows decoded together (its scales read
 * once), the residual's rows converted. */
static void chan_read(const struct store *s, uint64_t j0, uint64_t j1, uint32_t h0, uint32_t nh, float *out)
{
    uint64_t T = s->len, lo = (uint64_t)h0 * s->d, cnt = (uint64_t)nh * s->d, plain = ref_codec_plain_size(s->f->scale);
    uint64_t q = quant_of(s, T), first = T - T % s->R, G = s->f->group;
    for (uint64_t j = j0; j < j1;) {
        float *o = out + (j - j0) * cnt;
        if (j >= first) {
            ref_codec_get_plain(s->f->scale, s->buf + chan_res_off(s, q) + (j - first) * s->rrow + lo * plain, cnt, o);
            j++;
            continue;
        }
        uint64_t e = (j / G + 1) * G, slot = group_slot(s, j / G, T);
        e = e < j1 ? e : j1;
        e = e < first ? e : first;
        ref_codec_decode_span(s->f, s->n, slot, j % G, j % G + (e - j), lo, cnt, s->buf, s->buf + chan_meta_off(s, q),
                              o);
        for (uint64_t p = j; s->ob && p < e; p++)
            ref_codec_merge_outliers(s->f, s->n, s->buf + chan_out_off(s, q) + (slot * G + p % G) * s->ob, lo, cnt,
                                     out + (p - j0) * cnt);
        j = e;
    }
}

/* Heads h0..h0+nh-1 of the row of pos, values lo..lo+cnt-1 of it. */
static void store_read(const struct kvp_ref_cache *c, const struct store *s, uint64_t pos, uint32_t h0, uint32_t nh,
                       float *out)
{
    uint64_t T = s->len, lo = (uint64_t)h0 * s->d, cnt = (uint64_t)nh * s->d, plain = ref_codec_plain_size(s->f->scale);
    bool resid;
    if (c->o.policy == KVP_REF_PAGED) {
        const uint8_t *row = paged_row(c, (struct store *)s, pos, false);
        row_decode(s, row, h0, nh, out);
        return;
    }
    if (s->mode == CHANNEL) {
        chan_read(s, pos, pos + 1, h0, nh, out);
        return;
    }
    const uint8_t *row = row_at(s, pos, T, &resid);
    if (resid)
        ref_codec_get_plain(s->f->scale, row + lo * plain, cnt, out);
    else
        row_decode(s, row, h0, nh, out);
}

/* Rows mode, static: the token leaving the residual is quantized into its
 * quant slot, then x goes into the residual (or straight into quant). */
static void rows_put(struct store *s, const float *x, float *tmp)
{
    uint64_t T = s->len, held2 = held_of(s, T + 1), r2 = resid_of(s, T + 1);
    bool resid;
    if (s->R && resid_of(s, T) == s->R && T >= s->R) {
        uint64_t out = T - s->R; /* leaves the residual */
        if (out >= T + 1 - held2 && s->qcap) {
            ref_codec_get_plain(s->f->scale, row_at(s, out, T, &resid), s->n, tmp);
            row_encode(s, tmp, s->buf + (out % s->qcap) * s->qrow);
        }
    }
    if (r2)
        ref_codec_put_plain(s->f->scale, x, s->n, s->buf + s->qcap * s->qrow + (T % s->rcap) * s->rrow);
    else
        row_encode(s, x, s->buf + (T % s->qcap) * s->qrow);
}

/* Channel axis: the groups the residual (r tokens) and x form when x
 * completes R' tokens, first token first, into their slots of codes, meta
 * and outlier lists; groups already out of the window at T+1 are left out. */
static void channel_flush(const struct store *s, const uint8_t *res, const float *x, float *tmp, uint8_t *codes,
                          uint8_t *meta, uint8_t *outl)
{
    uint64_t T = s->len, r = T % s->R, first = T - r, G = s->f->group, lo = first_group(s, T + 1);
    for (uint64_t k = 0; k < s->R / G; k++) {
        uint64_t grp = first / G + k, slot;
        if (grp < lo)
            continue;
        slot = group_slot(s, grp, T + 1);
        for (uint64_t j = 0; j < G; j++) { /* tmp: (G, n) */
            uint64_t i = k * G + j;
            if (i < r)
                ref_codec_get_plain(s->f->scale, res + i * s->rrow, s->n, tmp + j * s->n);
            else
                memcpy(tmp + j * s->n, x, s->n * sizeof *x);
        }
        chan_split(s, tmp, slot * G, outl);
        ref_codec_encode_groups(s->f, s->n, slot, tmp, codes, meta);
    }
}

/* Channel axis, static: x goes into the residual, or, when it completes R'
 * tokens, the residual and x are quantized into R'/G groups in place (the
 * regions are at capacity: see the top of the file). */
static void channel_put(struct store *s, const float *x, float *tmp)
{
    uint64_t r = s->len % s->R;
    uint8_t *res = s->buf + chan_res_off(s, 0);
    if (r + 1 < s->R)
        ref_codec_put_plain(s->f->scale, x, s->n, res + r * s->rrow);
    else
        channel_flush(s, res, x, tmp, s->buf, s->buf + chan_meta_off(s, 0), s->buf + chan_out_off(s, 0));
}

/* Dynamic: a new buffer of the next size; copy what stays; free the old. */
static enum kvp_status grow(struct store *s, struct kvp_ref_alloc *a, const float *x, float *tmp,
                            struct kvp_error *err)
{
    uint64_t T = s->len, T2 = T + 1, nb;
    enum kvp_status st = store_bytes_at(s, T2, &nb, err);
    if (st != KVP_OK)
        return st;
    uint8_t *nbuf = kvp_ref_alloc_get(a, s->tag, nb);
    if (!nbuf)
        return kvp_fail(err, KVP_ERR_NOMEM, "cannot allocate %llu bytes of cache", (unsigned long long)nb);
    if (s->mode == CHANNEL) {
        uint64_t G = s->f->group, r = T % s->R, q = quant_of(s, T), q2 = quant_of(s, T2);
        uint64_t lo = first_group(s, T), lo2 = first_group(s, T2), hi = (T - r) / G;
        if (s->buf && hi > lo2) { /* the groups [lo2, hi) stay, moved down by lo2 - lo */
            uint64_t keep = hi - lo2, skip = lo2 - lo, msz = s->n * ref_codec_meta_size(s->f);
            ref_codec_move_codes(s->f, nbuf, 0, s->buf, skip * G * s->n, keep * G * s->n);
            memcpy(nbuf + codes_bytes(s, q2), s->buf + codes_bytes(s, q) + skip * msz, keep * msz);
            if (s->ob)
                memcpy(nbuf + chan_out_off(s, q2), s->buf + chan_out_off(s, q) + skip * G * s->ob, keep * G * s->ob);
        }
        if (T2 % s->R == 0) { /* the residual is full: quantize its R'/G groups */
            channel_flush(s, s->buf ? s->buf + chan_res_off(s, q) : NULL, x, tmp, nbuf, nbuf + codes_bytes(s, q2),
                          nbuf + chan_out_off(s, q2));
        } else {
            uint8_t *res2 = nbuf + chan_res_off(s, q2);
            if (r)
                memcpy(res2, s->buf + chan_res_off(s, q), r * s->rrow);
            ref_codec_put_plain(s->f->scale, x, s->n, res2 + r * s->rrow);
        }
    } else {
        struct store old = *s;
        uint64_t h2 = held_of(s, T2), r2 = resid_of(s, T2);
        s->buf = nbuf;
        s->bytes = nb;
        s->qcap = h2 - r2;
        s->rcap = r2;
        for (uint64_t pos = T2 - h2; pos < T; pos++) {
            bool was, now = pos >= T2 - r2;
            const uint8_t *src = row_at(&old, pos, T, &was);
            uint8_t *dst =
                now ? nbuf + s->qcap * s->qrow + (pos % s->rcap) * s->rrow : nbuf + (pos % s->qcap) * s->qrow;
            if (was == now) {
                memcpy(dst, src, now ? s->rrow : s->qrow);
            } else { /* leaves the residual: quantize it now */
                ref_codec_get_plain(s->f->scale, src, s->n, tmp);
                row_encode(s, tmp, dst);
            }
        }
        if (r2)
            ref_codec_put_plain(s->f->scale, x, s->n, nbuf + s->qcap * s->qrow + (T % s->rcap) * s->rrow);
        else
            row_encode(s, x, nbuf + (T % s->qcap) * s->qrow);
        kvp_ref_alloc_put(a, s->tag, old.buf, old.bytes);
        s->len = T2;
        return KVP_OK;
    }
    kvp_ref_alloc_put(a, s->tag, s->buf, s->bytes);
    s->buf = nbuf;
    s->bytes = nb;
    s->len = T2;
    return KVP_OK;
}

static enum kvp_status store_append(struct kvp_ref_cache *c, struct store *s, const float *x, float *tmp,
                                    struct kvp_error *err)
{
    if (c->o.policy == KVP_REF_DYNAMIC)
        return grow(s, c->a, x, tmp, err);
    if (c->o.policy == KVP_REF_PAGED) {
        uint8_t *row = paged_row(c, s, s->len, true);
        if (!row)
            return c->blocks ? kvp_fail(err, KVP_ERR_RANGE, "position %llu has no block in the table",
                                        (unsigned long long)s->len)
                             : kvp_fail(err, KVP_ERR_NOMEM, "cannot allocate a block of %u tokens", c->o.block);
        row_encode(s, x, row);
    } else if (s->mode == CHANNEL) {
        channel_put(s, x, tmp);
    } else {
        rows_put(s, x, tmp);
    }
    s->len++;
    return KVP_OK;
}

static void store_release(struct kvp_ref_cache *c, struct store *s)
{
    if (c->o.policy == KVP_REF_PAGED) {
        for (uint64_t i = 0; i < s->table.n; i++) /* back to the free list */
            s->free->p[s->free->n++] = s->table.p[i];
        s->table.n = 0;
    } else if (c->o.policy == KVP_REF_DYNAMIC) {
        kvp_ref_alloc_put(c->a, s->tag, s->buf, s->bytes);
        s->buf = NULL;
        s->bytes = 0;
    }
    s->len = 0;
}

/* ---- the cache ------------------------------------------------------------ */

#define ST(c, l, b, kv) (&(c)->st[((uint64_t)(l) * (c)->o.batch + (b)) * 2 + (kv)])

/* The row of pos in a paged store: from the caller's blocks (store i is
 * layer i / 2B, sequence i / 2 mod B, K or V by i mod 2) or the cache's own. */
static uint8_t *paged_row(const struct kvp_ref_cache *c, struct store *s, uint64_t pos, bool make)
{
    if (c->blocks) {
        uint64_t i = (uint64_t)(s - c->st), B = c->o.batch;
        uint8_t *blk = c->blocks(c->blocks_ctx, (uint32_t)(i / (2 * B)), (int)(i % 2), (uint32_t)(i / 2 % B),
                                 pos / c->o.block, make);
        return blk ? blk + (pos % c->o.block) * s->qrow : NULL;
    }
    return own_row(s, c->a, c->o.block, pos, make);
}

const char *kvp_ref_policy_name(enum kvp_ref_policy p)
{
    static const char *const names[] = {"static", "dynamic", "paged"};
    return p < KVP_REF_POLICY_COUNT ? names[p] : "?";
}

bool kvp_ref_policy_from_name(const char *s, enum kvp_ref_policy *out)
{
    for (int i = 0; i < KVP_REF_POLICY_COUNT; i++)
        if (strcmp(s, kvp_ref_policy_name((enum kvp_ref_policy)i)) == 0) {
            *out = (enum kvp_ref_policy)i;
            return true;
        }
    return false;
}

/* Can a store of rows of d values hold f under the policy? The codec must
 * know f, and a block type's blocks must tile the row (as llama.cpp asks). */
static enum kvp_status check_format(const struct kvp_ref_cache_opts *o, const struct kvp_format *f, const char *which,
                                    uint32_t d, struct kvp_error *err)
{
    char name[64];
    kvp_format_name(f, name, sizeof name);
    if (!ref_codec_known(f->dtype) || !ref_codec_known(f->scale))
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s format '%s': the reference decoder has no codec for it", which,
                        name);
    if (f->outliers_ppm && !ref_codec_grouped(f->dtype)) /* format.h gives settings to the integer types only */
        return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                        "%s format '%s': outliers=%g needs an integer type (int8, int4, int2)", which, name,
                        f->outliers_ppm / 1e6);
    if (d % ref_codec_block_elems(f->dtype))
        return kvp_fail(err, KVP_ERR_RANGE, "%s stores blocks of %u values, which does not divide a row of %u", name,
                        ref_codec_block_elems(f->dtype), d);
    return o->policy == KVP_REF_PAGED ? kvp_format_check_paged(f, which, err) : KVP_OK;
}

static void store_init(struct store *s, const struct kvp_format *f, enum kvp_ref_tag tag, uint32_t n_kv, uint32_t d,
                       const struct kvp_layer_spec *sp, struct blocks *fl)
{
    memset(s, 0, sizeof *s);
    s->f = f;
    s->tag = tag;
    s->n_kv = n_kv;
    s->d = d;
    s->n = (uint64_t)n_kv * d;
    s->window = sp->kind == KVP_LAYER_SLIDING || sp->kind == KVP_LAYER_CHUNKED ? sp->window : 0;
    s->mode = ref_codec_grouped(f->dtype) && f->axis == KVP_AXIS_CHANNEL ? CHANNEL : ROWS;
    s->R = ref_codec_grouped(f->dtype) ? f->residual : 0;
    if (s->mode == CHANNEL && s->R == 0)
        s->R = f->group;
    s->ob = 8 * ref_codec_outliers(f, s->n);
    s->hrow = ref_codec_row_bytes(f, 1, d);
    s->qrow = s->hrow * n_kv + s->ob;
    s->rrow = s->n * ref_codec_plain_size(f->scale);
    s->free = fl;
}

void kvp_ref_cache_free(struct kvp_ref_cache *c)
{
    if (!c)
        return;
    uint32_t L = c->m ? c->m->n_layers : 0;
    if (c->st)
        for (uint64_t i = 0; i < (uint64_t)L * c->o.batch * 2; i++) {
            struct store *s = &c->st[i];
            if (!s->f)
                continue;
            if (c->o.policy == KVP_REF_PAGED) {
                for (uint64_t b = 0; b < s->table.n; b++)
                    kvp_ref_alloc_put(c->a, s->tag, s->table.p[b], (uint64_t)c->o.block * s->qrow);
                free(s->table.p);
            } else {
                kvp_ref_alloc_put(c->a, s->tag, s->buf, s->bytes);
            }
        }
    if (c->free)
        for (uint64_t i = 0; i < (uint64_t)L * 2; i++) {
            const struct store *s = NULL;
            for (uint32_t b = 0; b < c->o.batch && !s; b++)
                if (ST(c, i / 2, b, i % 2)->f)
                    s = ST(c, i / 2, b, i % 2);
            for (uint64_t j = 0; j < c->free[i].n; j++)
                kvp_ref_alloc_put(c->a, i % 2 ? KVP_REF_V : KVP_REF_K, c->free[i].p[j], (uint64_t)c->o.block * s->qrow);
            free(c->free[i].p);
        }
    if (c->state)
        for (uint64_t i = 0; i < (uint64_t)L * c->o.batch; i++)
            kvp_ref_alloc_put(c->a, KVP_REF_STATE, c->state[i], c->state_bytes[i / c->o.batch]);
    free(c->st);
    free(c->state);
    free(c->state_bytes);
    free(c->free);
    free(c->len);
    free(c->tmp);
    for (int kv = 0; kv < 2; kv++) {
        free(c->otmp[kv]);
        free(c->heap[kv]);
        free(c->rowbuf[kv]);
    }
    free(c->scratch);
    free(c);
}

enum kvp_status kvp_ref_cache_new(const struct kvp_ref_model *rm, const struct kvp_ref_cache_opts *o,
                                  struct kvp_ref_alloc *a, struct kvp_ref_cache **out, struct kvp_error *err)
{
    const struct kvp_model *m = kvp_ref_model_shape(rm);
    struct kvp_ref_cache *c;
    enum kvp_status st = KVP_ERR_NOMEM;

    *out = NULL;
    if (o->batch == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "'batch' must be at least 1 (got 0)");
    if (o->policy == KVP_REF_PAGED && o->block == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "'block-size' must be at least 1 for a paged cache (got 0)");
    if (!(c = calloc(1, sizeof *c)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    c->rm = rm;
    c->m = m;
    c->o = *o;
    c->a = a;
    uint64_t L = m->n_layers, B = o->batch;
    c->len = calloc(B, sizeof *c->len);
    c->st = calloc(L * B * 2, sizeof *c->st);
    c->state = calloc(L * B, sizeof *c->state);
    c->state_bytes = calloc(L, sizeof *c->state_bytes);
    c->free = calloc(L * 2, sizeof *c->free);
    if (!c->len || !c->st || !c->state || !c->state_bytes || !c->free)
        goto err;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const struct kvp_layer_spec *sp = kvp_model_layer(m, l);
        bool win = sp->kind == KVP_LAYER_SLIDING || sp->kind == KVP_LAYER_CHUNKED;
        if (sp->kind == KVP_LAYER_RECURRENT) { /* the decoder's own state shape (decoder.c) */
            if (!ref_codec_known(m->state_dtype) || ref_codec_grouped(m->state_dtype) ||
                ref_codec_block_elems(m->state_dtype) > 1) {
                struct kvp_format sf = kvp_format_plain(m->state_dtype);
                char sn[64];
                st = kvp_fail(err, KVP_ERR_UNSUPPORTED, "recurrent state dtype '%s': the reference decoder keeps state "
                              "in a plain type (f32, f16, bf16, fp8)", kvp_format_name(&sf, sn, sizeof sn));
                goto err;
            }
            if (!kvp_mul(rm->w[m->layer_spec[l]].S, ref_codec_plain_size(m->state_dtype), &c->state_bytes[l])) {
                st = kvp_fail(err, KVP_ERR_OVERFLOW, "recurrent state size overflows 64 bits");
                goto err;
            }
            continue;
        }
        if (sp->kind == KVP_LAYER_MLA) {
            uint32_t latent = sp->kv_lora_rank + sp->qk_rope_dim;
            if ((st = check_format(o, &o->k, "K", latent, err)) != KVP_OK)
                goto err;
            for (uint32_t b = 0; b < B; b++)
                store_init(ST(c, l, b, 0), &c->o.k, KVP_REF_K, 1, latent, sp, &c->free[2 * l]);
            continue;
        }
        if (sp->kind != KVP_LAYER_FULL && !win)
            continue;
        if ((st = check_format(o, &o->k, "K", sp->head_dim_k, err)) != KVP_OK ||
            (st = check_format(o, &o->v, "V", sp->head_dim_v, err)) != KVP_OK)
            goto err;
        for (uint32_t b = 0; b < B; b++) {
            store_init(ST(c, l, b, 0), &c->o.k, KVP_REF_K, sp->n_kv_heads, sp->head_dim_k, sp, &c->free[2 * l]);
            store_init(ST(c, l, b, 1), &c->o.v, KVP_REF_V, sp->n_kv_heads, sp->head_dim_v, sp, &c->free[2 * l + 1]);
        }
    }
    {
        uint64_t most = 1;
        for (uint64_t i = 0; i < L * B * 2; i++) {
            const struct store *s = &c->st[i];
            uint64_t need = s->f ? s->n * (s->mode == CHANNEL ? s->f->group : 1) : 0;
            most = need > most ? need : most;
        }
        if (!(c->tmp = malloc(most * sizeof *c->tmp)))
            goto err;
        uint64_t row = 1, k = 1; /* outlier scratch, shared by the stores of a side */
        for (uint64_t i = 0; i < L * B * 2; i++)
            if (c->st[i].f) {
                row = c->st[i].n > row ? c->st[i].n : row;
                k = c->st[i].ob / 8 > k ? c->st[i].ob / 8 : k;
            }
        uint64_t qrow = 1;
        for (uint64_t i = 0; i < L * B * 2; i++)
            qrow = c->st[i].f && c->st[i].qrow > qrow ? c->st[i].qrow : qrow;
        /* one set per side, so that the K and V sides may be encoded at once
         * (ref_cache_reread from two threads) */
        for (int kv = 0; kv < 2; kv++)
            if (!(c->otmp[kv] = malloc(row * sizeof *c->otmp[kv])) ||
                !(c->heap[kv] = malloc(k * sizeof *c->heap[kv])) || qrow > SIZE_MAX ||
                !(c->rowbuf[kv] = malloc((size_t)qrow)))
                goto err;
        for (uint64_t i = 0; i < L * B * 2; i++) {
            c->st[i].otmp = c->otmp[i % 2];
            c->st[i].heap = c->heap[i % 2];
        }
    }
    /* free lists can hold every block the batch may ever own */
    if (o->policy == KVP_REF_PAGED)
        for (uint32_t l = 0; l < m->n_layers; l++)
            for (int kv = 0; kv < 2; kv++) {
                const struct store *s = ST(c, l, 0, kv);
                if (!s->f)
                    continue;
                uint64_t per = kvp_cdiv(s->window && s->window < o->context ? s->window : o->context, o->block);
                if (!(c->free[2 * l + kv].p = malloc((per * B + 1) * sizeof(uint8_t *))))
                    goto err;
            }
    if (o->policy == KVP_REF_STATIC) {
        st = KVP_ERR_NOMEM;
        for (uint64_t i = 0; i < L * B * 2; i++) {
            struct store *s = &c->st[i];
            if (!s->f)
                continue;
            /* the most tokens each region holds at any step up to the context */
            kvp_cache_tokens(s->f, o->context, s->window, true, &s->qcap, &s->rcap);
            s->fixed = s->mode == CHANNEL;
            if (!layout_bytes(s, s->qcap, s->rcap, &s->bytes)) {
                st = kvp_fail(err, KVP_ERR_OVERFLOW, "cache size overflows 64 bits");
                goto err;
            }
            if (s->bytes && !(s->buf = kvp_ref_alloc_get(a, s->tag, s->bytes)))
                goto err;
        }
        for (uint64_t i = 0; i < L * B; i++)
            if (c->state_bytes[i / B] && !(c->state[i] = kvp_ref_alloc_get(a, KVP_REF_STATE, c->state_bytes[i / B])))
                goto err;
    }
    *out = c;
    return KVP_OK;
err:
    kvp_ref_cache_free(c);
    if (st == KVP_ERR_NOMEM)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory building the cache");
    return st;
}

uint64_t kvp_ref_seq_len(const struct kvp_ref_cache *c, uint32_t seq)
{
    return c->len[seq];
}

void kvp_ref_seq_end(struct kvp_ref_cache *c, uint32_t seq)
{
    for (uint32_t l = 0; l < c->m->n_layers; l++) {
        for (int kv = 0; kv < 2; kv++)
            if (ST(c, l, seq, kv)->f)
                store_release(c, ST(c, l, seq, kv));
        uint8_t **p = &c->state[(uint64_t)l * c->o.batch + seq];
        if (c->o.policy != KVP_REF_STATIC) { /* static: position 0 starts the state afresh (decoder.c recur) */
            kvp_ref_alloc_put(c->a, KVP_REF_STATE, *p, c->state_bytes[l]);
            *p = NULL;
        }
    }
    c->len[seq] = 0;
    if (c->twin)
        kvp_ref_seq_end(c->twin, seq);
}

/* ---- bytes written ------------------------------------------------------------ */

/* Counts n bytes at x and y of caches with canaries cx, cy. */
typedef uint64_t count_fn(const uint8_t *x, const uint8_t *y, uint64_t n, uint8_t cx, uint8_t cy);

/* Bytes i of n where x[i] != cx or y[i] != cy: 255 bytes at a time into a
 * byte count (a loop the compiler turns into vector compares), then into
 * the total. */
KVP_REF_HOT static uint64_t written_of(const uint8_t *x, const uint8_t *y, uint64_t n, uint8_t cx, uint8_t cy)
{
    uint64_t w = 0;
    for (uint64_t i = 0; i < n; i += 255) {
        uint64_t m = n - i < 255 ? n - i : 255;
        uint8_t k = 0;
        for (uint64_t j = 0; j < m; j++)
            k += (uint8_t)((x[i + j] ^ cx) | (y[i + j] ^ cy)) != 0;
        w += k;
    }
    return w;
}

/* Bytes i of n where x[i] != y[i], likewise. */
KVP_REF_HOT static uint64_t differing_of(const uint8_t *x, const uint8_t *y, uint64_t n, uint8_t cx, uint8_t cy)
{
    uint64_t w = 0;
    (void)cx, (void)cy;
    for (uint64_t i = 0; i < n; i += 255) {
        uint64_t m = n - i < 255 ? n - i : 255;
        uint8_t k = 0;
        for (uint64_t j = 0; j < m; j++)
            k += x[i + j] != y[i + j];
        w += k;
    }
    return w;
}

/* Count a's and b's allocation of n bytes at each pair into *w; false when
 * the two differ in shape (one is missing). */
static bool scan(const uint8_t *x, const uint8_t *y, uint64_t n, const struct kvp_ref_cache *a,
                 const struct kvp_ref_cache *b, count_fn *f, uint64_t *w)
{
    if (!x != !y)
        return false;
    if (x)
        *w += f(x, y, n, a->a->canary, b->a->canary);
    return true;
}

/* Every allocated byte of a and b (free blocks too) counted by f, by tag,
 * the stores (and states) split among the parts of the model's threads;
 * false when the two differ in layout. */
struct walk_job {
    const struct kvp_ref_cache *a, *b;
    count_fn *f;
    uint64_t out[KVP_REF_MAX_THREADS][KVP_REF_TAG_COUNT];
    bool same[KVP_REF_MAX_THREADS];
};

static void walk_part(void *arg, uint32_t part, uint32_t parts)
{
    struct walk_job *j = arg;
    const struct kvp_ref_cache *a = j->a, *b = j->b;
    uint64_t L = a->m->n_layers, B = a->o.batch, n = L * B * 2, *out = j->out[part];
    bool same = true;
    for (uint64_t i = n * part / parts; same && i < n * (part + 1) / parts; i++) {
        const struct store *s = &a->st[i], *t = &b->st[i];
        uint64_t *w = &out[s->tag], blk = (uint64_t)a->o.block * s->qrow;
        if (!s->f)
            continue;
        if (a->o.policy != KVP_REF_PAGED) {
            same = s->bytes == t->bytes && scan(s->buf, t->buf, s->bytes, a, b, j->f, w);
            continue;
        }
        same = s->table.n == t->table.n;
        for (uint64_t k = 0; same && k < s->table.n; k++)
            same = scan(s->table.p[k], t->table.p[k], blk, a, b, j->f, w);
        if (i / 2 % B == 0) /* the layer's free list (K or V), once */
            for (uint64_t k = 0; same && k < s->free->n; k++)
                same = s->free->n == t->free->n && scan(s->free->p[k], t->free->p[k], blk, a, b, j->f, w);
    }
    for (uint64_t i = L * B * part / parts; same && i < L * B * (part + 1) / parts; i++)
        same = a->state_bytes[i / B] == b->state_bytes[i / B] &&
               scan(a->state[i], b->state[i], a->state_bytes[i / B], a, b, j->f, &out[KVP_REF_STATE]);
    j->same[part] = same;
}

static bool walk(const struct kvp_ref_cache *a, const struct kvp_ref_cache *b, count_fn *f,
                 uint64_t out[KVP_REF_TAG_COUNT])
{
    struct walk_job j = {a, b, f, {{0}}, {0}};
    uint32_t parts = kvp_ref_pool_parts(a->rm->pool);
    bool same = a->m->n_layers == b->m->n_layers && a->o.batch == b->o.batch && a->o.policy == b->o.policy &&
                a->o.block == b->o.block;
    memset(out, 0, KVP_REF_TAG_COUNT * sizeof *out);
    if (!same)
        return false;
    kvp_ref_pool_run(a->rm->pool, walk_part, &j);
    for (uint32_t p = 0; p < parts; p++) {
        same = same && j.same[p];
        for (int t = 0; t < KVP_REF_TAG_COUNT; t++)
            out[t] += j.out[p][t];
    }
    return same;
}

enum kvp_status kvp_ref_cache_written(const struct kvp_ref_cache *a, const struct kvp_ref_cache *b,
                                      uint64_t written[KVP_REF_TAG_COUNT], struct kvp_error *err)
{
    if ((a->a->canary ^ b->a->canary) != 0xFF)
        return kvp_fail(err, KVP_ERR_USAGE,
                        "written bytes need canaries that are bitwise complements (got 0x%02X and 0x%02X)",
                        a->a->canary, b->a->canary);
    if (a->rm != b->rm || !walk(a, b, written_of, written))
        return kvp_fail(err, KVP_ERR_USAGE,
                        "written bytes need two caches of one layout driven through the same steps");
    return KVP_OK;
}

bool ref_cache_differing(const struct kvp_ref_cache *a, const struct kvp_ref_cache *b,
                         uint64_t differ[KVP_REF_TAG_COUNT])
{
    return walk(a, b, differing_of, differ);
}

/* ---- what the decoder calls ------------------------------------------------- */

struct pending {
    struct store *s;
    const float *x;
    uint64_t bytes, next; /* the store's bytes now, and after this append (dynamic) */
};

/* Dynamic: stores that shrink first, largest new size first; then the rest,
 * smallest first (kvp_kv_dynamic_peak's schedule). */
static int growth_order(const void *a, const void *b)
{
    const struct pending *x = a, *y = b;
    bool xs = x->next < x->bytes, ys = y->next < y->bytes;
    if (xs != ys)
        return xs ? -1 : 1;
    if (xs)
        return x->next > y->next ? -1 : x->next < y->next;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

enum kvp_status ref_cache_commit(struct kvp_ref_cache *c, uint32_t seq, const float *const *k, const float *const *v,
                             struct kvp_error *err)
{
    uint32_t L = c->m->n_layers, n = 0;
    struct pending *p;
    enum kvp_status st = KVP_OK;

    if (c->len[seq] >= c->o.context)
        return kvp_fail(err, KVP_ERR_RANGE, "sequence %u is full: the cache holds %llu tokens", seq,
                        (unsigned long long)c->o.context);
    if (!(p = malloc((uint64_t)L * 2 * sizeof *p)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    for (uint32_t l = 0; l < L; l++)
        for (int kv = 0; kv < 2; kv++) {
            struct store *s = ST(c, l, seq, kv);
            if (!s->f)
                continue;
            p[n] = (struct pending){s, kv ? v[l] : k[l], s->bytes, 0};
            if (c->o.policy == KVP_REF_DYNAMIC && (st = store_bytes_at(s, s->len + 1, &p[n].next, err)) != KVP_OK) {
                free(p);
                return st;
            }
            n++;
        }
    if (c->o.policy == KVP_REF_DYNAMIC)
        qsort(p, n, sizeof *p, growth_order);
    for (uint32_t i = 0; i < n && st == KVP_OK; i++)
        st = store_append(c, p[i].s, p[i].x, c->tmp, err);
    free(p);
    if (st == KVP_OK)
        c->len[seq]++;
    return st;
}

bool ref_cache_layerwise(const struct kvp_ref_cache *c)
{
    return c->o.policy == KVP_REF_STATIC && !c->blocks;
}

enum kvp_status ref_cache_commit_layer(struct kvp_ref_cache *c, uint32_t seq, uint32_t l, const float *k,
                                       const float *v, struct kvp_error *err)
{
    if (!ref_cache_layerwise(c))
        return kvp_fail(err, KVP_ERR_USAGE,
                        "only a static cache without the caller's blocks takes rows a layer at a time");
    for (int kv = 0; kv < 2; kv++) {
        struct store *s = ST(c, l, seq, kv);
        enum kvp_status st;
        if (!s->f)
            continue;
        if (s->len >= c->o.context)
            return kvp_fail(err, KVP_ERR_RANGE, "sequence %u is full: the cache holds %llu tokens", seq,
                            (unsigned long long)c->o.context);
        if ((st = store_append(c, s, kv ? v : k, c->tmp, err)) != KVP_OK)
            return st;
    }
    return KVP_OK;
}

enum kvp_status ref_cache_commit_end(struct kvp_ref_cache *c, uint32_t seq, uint64_t n, struct kvp_error *err)
{
    for (uint32_t l = 0; l < c->m->n_layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            const struct store *s = ST(c, l, seq, kv);
            if (s->f && s->len != c->len[seq] + n)
                return kvp_fail(err, KVP_ERR_USAGE, "layer %u holds %llu rows of sequence %u, not %llu", l,
                                (unsigned long long)s->len, seq, (unsigned long long)(c->len[seq] + n));
        }
    c->len[seq] += n;
    return KVP_OK;
}

/* Rows read one after another: a quantized row's heads read now start
 * their trip from memory for the row READ_AHEAD positions on (its cache
 * lines, 64 bytes apart), which the hardware does not foresee: the rows are
 * a row's bytes apart, each a few pages. */
#define READ_AHEAD 2

void ref_cache_read_heads(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, int kv, uint64_t pos,
                          uint32_t h0, uint32_t nh, float *out)
{
    const struct store *s = ST(c, layer, seq, kv);
    uint64_t next = pos + READ_AHEAD;
    bool resid;
    if (s->mode == ROWS && next < s->len && !c->blocks) { /* the caller's blocks count their reads */
        const uint8_t *row = c->o.policy == KVP_REF_PAGED ? own_row((struct store *)s, c->a, c->o.block, next, false)
                             : s->R ? NULL : row_at(s, next, s->len, &resid);
        for (uint64_t i = 0; row && i < (uint64_t)nh * s->hrow; i += 64)
            __builtin_prefetch(row + (uint64_t)h0 * s->hrow + i);
    }
    store_read(c, s, pos, h0, nh, out);
}

void ref_cache_read_span(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, int kv, uint64_t j0, uint64_t j1,
                         uint32_t h0, uint32_t nh, float *out)
{
    const struct store *s = ST(c, layer, seq, kv);
    if (s->mode == CHANNEL && c->o.policy != KVP_REF_PAGED) {
        chan_read(s, j0, j1, h0, nh, out);
        return;
    }
    for (uint64_t j = j0; j < j1; j++)
        ref_cache_read_heads(c, layer, seq, kv, j, h0, nh, out + (j - j0) * nh * s->d);
}

void ref_cache_read_k(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, uint64_t pos, float *out)
{
    ref_cache_read_heads(c, layer, seq, 0, pos, 0, ST(c, layer, seq, 0)->n_kv, out);
}

void ref_cache_read_v(const struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, uint64_t pos, float *out)
{
    ref_cache_read_heads(c, layer, seq, 1, pos, 0, ST(c, layer, seq, 1)->n_kv, out);
}

enum kvp_status ref_cache_state(struct kvp_ref_cache *c, uint32_t layer, uint32_t seq, uint8_t **out,
                            struct kvp_error *err)
{
    uint8_t **p = &c->state[(uint64_t)layer * c->o.batch + seq];
    if (c->blocks) { /* the caller's state slot */
        if (!(*out = c->blocks(c->blocks_ctx, layer, 0, seq, 0, true)))
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u: sequence %u has no state slot", layer, seq);
        return KVP_OK;
    }
    if (!*p && !(*p = kvp_ref_alloc_get(c->a, KVP_REF_STATE, c->state_bytes[layer])))
        return kvp_fail(err, KVP_ERR_NOMEM, "cannot allocate %llu bytes of recurrent state",
                        (unsigned long long)c->state_bytes[layer]);
    *out = *p;
    return KVP_OK;
}

enum kvp_dtype ref_cache_state_dtype(const struct kvp_ref_cache *c)
{
    return c->m->state_dtype;
}

bool ref_cache_rows_final(const struct kvp_ref_cache *c)
{
    for (uint64_t i = 0; i < (uint64_t)c->m->n_layers * c->o.batch * 2; i++)
        if (c->st[i].f && (c->st[i].mode != ROWS || c->st[i].R))
            return false;
    return true;
}

void ref_cache_reread(struct kvp_ref_cache *c, uint32_t layer, int kv, const float *x, float *out)
{
    const struct store *s = ST(c, layer, 0, kv);
    row_encode(s, x, c->rowbuf[kv]);
    row_decode(s, c->rowbuf[kv], 0, s->n_kv, out);
}

uint64_t ref_cache_context(const struct kvp_ref_cache *c)
{
    return c->o.context;
}

struct kvp_ref_cache *ref_cache_twin(const struct kvp_ref_cache *c)
{
    return c->twin;
}

void *ref_cache_scratch(struct kvp_ref_cache *c, uint64_t bytes)
{
    if (bytes > c->scratch_bytes) { /* grow by half again at least: a sequence's scores grow a row per step */
        uint64_t want = bytes + bytes / 2;
        void *p;
        if (want > SIZE_MAX || !(p = realloc(c->scratch, (size_t)want)))
            return NULL;
        c->scratch = p;
        c->scratch_bytes = want;
    }
    return c->scratch;
}

void kvp_ref_cache_trim(struct kvp_ref_cache *c)
{
    free(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
}

/* Field by field: a format's padding need not be initialised. */
static bool same_format(const struct kvp_format *a, const struct kvp_format *b)
{
    return a->dtype == b->dtype && a->group == b->group && a->axis == b->axis && a->scale == b->scale &&
           a->zero_point == b->zero_point && a->residual == b->residual && a->outliers_ppm == b->outliers_ppm;
}

enum kvp_status kvp_ref_cache_mirror(struct kvp_ref_cache *c, struct kvp_ref_cache *twin, struct kvp_error *err)
{
    bool same = c != twin && c->rm == twin->rm && c->o.policy == twin->o.policy && c->o.context == twin->o.context &&
                c->o.batch == twin->o.batch && c->o.block == twin->o.block && same_format(&c->o.k, &twin->o.k) &&
                same_format(&c->o.v, &twin->o.v);
    if (!same)
        return kvp_fail(err, KVP_ERR_USAGE, "a twin cache needs the model and options of the cache it mirrors");
    if (c->twin || twin->twin)
        return kvp_fail(err, KVP_ERR_USAGE, "a cache mirrors at most one twin, and a twin mirrors none");
    for (uint32_t b = 0; b < c->o.batch; b++)
        if (c->len[b] || twin->len[b])
            return kvp_fail(err, KVP_ERR_USAGE,
                            "a twin cache must be mirrored from the first token (sequence %u holds %llu)", b,
                            (unsigned long long)(c->len[b] ? c->len[b] : twin->len[b]));
    c->twin = twin;
    return KVP_OK;
}

struct twin_job {
    const struct kvp_ref_model *rm;
    const struct kvp_ref_cache_opts *o;
    struct kvp_ref_alloc *a[2];
    struct kvp_ref_cache *c[2];
    enum kvp_status st[2];
    struct kvp_error err[2];
};

static void twin_part(void *arg, uint32_t part, uint32_t parts)
{
    struct twin_job *j = arg;
    for (uint32_t i = 0; i < 2; i++)
        if (parts == 1 || part == i)
            j->st[i] = kvp_ref_cache_new(j->rm, j->o, j->a[i], &j->c[i], &j->err[i]);
}

enum kvp_status kvp_ref_cache_new_twin(const struct kvp_ref_model *rm, const struct kvp_ref_cache_opts *o,
                                       struct kvp_ref_alloc *a, struct kvp_ref_alloc *a2, struct kvp_ref_cache **c,
                                       struct kvp_ref_cache **twin, struct kvp_error *err)
{
    struct twin_job j = {rm, o, {a, a2}, {NULL, NULL}, {KVP_OK, KVP_OK}, {{0}}};
    enum kvp_status st = KVP_OK;
    *c = *twin = NULL;
    kvp_ref_pool_run(rm->pool, twin_part, &j);
    for (int i = 0; i < 2 && st == KVP_OK; i++)
        if ((st = j.st[i]) != KVP_OK && err)
            *err = j.err[i];
    if (st == KVP_OK)
        st = kvp_ref_cache_mirror(j.c[0], j.c[1], err);
    if (st != KVP_OK) {
        kvp_ref_cache_free(j.c[0]);
        kvp_ref_cache_free(j.c[1]);
        return st;
    }
    *c = j.c[0], *twin = j.c[1];
    return KVP_OK;
}

void ref_cache_set_blocks(struct kvp_ref_cache *c, ref_cache_block_fn *fn, void *ctx)
{
    c->blocks = fn;
    c->blocks_ctx = ctx;
}

void ref_cache_seq_skip(struct kvp_ref_cache *c, uint32_t seq, uint64_t pos)
{
    for (uint32_t l = 0; l < c->m->n_layers; l++)
        for (int kv = 0; kv < 2; kv++)
            ST(c, l, seq, kv)->len = pos;
    c->len[seq] = pos;
}

uint64_t ref_cache_block_bytes(const struct kvp_ref_cache *c, uint32_t layer, int kv)
{
    const struct store *s = ST(c, layer, 0, kv);
    if (c->state_bytes[layer])
        return kv ? 0 : c->state_bytes[layer];
    return s->f ? (uint64_t)c->o.block * s->qrow : 0;
}
