/* kv.c -- KV-cache bytes under the `ideal` rules (see kv.h). */
#include "kvplan/kv.h"

#include <string.h>

#include "kvplan/num.h"

#define OVERFLOW(err, what) kvp_fail(err, KVP_ERR_OVERFLOW, "%s overflows 64 bits", what)

/* Bytes of `tokens` quantized tokens of n_kv heads x d values. */
static enum kvp_status quantized_bytes(const struct kvp_format *f, uint64_t n_kv, uint64_t d,
                                       uint64_t tokens, uint64_t *out, struct kvp_error *err)
{
    uint64_t row, bytes, outliers = 0;
    enum kvp_status st;

    if (f->axis == KVP_AXIS_CHANNEL && kvp_dtype_info(f->dtype)->grouped) {
        /* tokens is a whole number of G-token groups: codes + one scale set
         * per channel per group */
        uint64_t vals, bits, meta, per = f->zero_point ? 2 : 1;
        if (!kvp_mul3(n_kv, d, tokens, &vals) || !kvp_mul(vals, kvp_dtype_info(f->dtype)->block_bits, &bits) ||
            !kvp_mul3(n_kv * d, tokens / f->group, per * (kvp_dtype_info(f->scale)->block_bits / 8), &meta) ||
            !kvp_add(kvp_cdiv(bits, 8), meta, &bytes))
            return OVERFLOW(err, "cache size");
    } else {
        if ((st = kvp_format_row_bytes(f, d, &row, err)) != KVP_OK)
            return st;
#ifdef KVP_MUTATE_ROW /* test-only (make check-mutation): a byte too many per row of one format */
        if (f->dtype == KVP_MUTATE_ROW)
            row += 1;
#endif
        if (!kvp_mul3(row, n_kv, tokens, &bytes))
            return OVERFLOW(err, "cache size");
    }
    if (f->outliers_ppm) {
        /* KVQuant dense-and-sparse: fp32 value + int32 index per outlier,
         * ceil(fraction * values) per token row */
        uint64_t per_token;
        if (!kvp_mul3(n_kv, d, f->outliers_ppm, &per_token))
            return OVERFLOW(err, "outlier count");
        per_token = kvp_cdiv(per_token, 1000000);
        if (!kvp_mul3(per_token, tokens, 8, &outliers) || !kvp_add(bytes, outliers, &bytes))
            return OVERFLOW(err, "cache size");
    }
    *out = bytes;
    return KVP_OK;
}

void kvp_cache_tokens(const struct kvp_format *f, uint64_t t, uint64_t window, bool capacity, uint64_t *quant,
                      uint64_t *resid)
{
    uint64_t held = window && t > window ? window : t, g, r;

    if (!kvp_dtype_info(f->dtype)->grouped) {
        *quant = held;
        *resid = 0;
        return;
    }
    if (f->axis == KVP_AXIS_TOKEN) { /* monotone in t: the capacity is the count at t */
        *resid = held < f->residual ? held : f->residual;
        *quant = held - *resid;
        return;
    }
    g = f->group;
    r = f->residual ? f->residual : g; /* R' >= G >= 1 (format.h checks group and residual) */
    if (!capacity) {
        uint64_t hi = (t - t % r) / g, lo = window && t > window ? (t - window) / g : 0;
        *resid = t % r;
        *quant = hi > lo ? (hi - lo) * g : 0;
        return;
    }
    *resid = t < r - 1 ? t : r - 1;
    *quant = held - held % r;
    if (window && t / r > window / r) /* a flush once the window is full */
        *quant = kvp_cdiv(window, g) * g;
}

/* Bytes of quant quantized tokens (a multiple of G for axis=channel) and
 * resid residual tokens. */
static enum kvp_status region_bytes(const struct kvp_format *f, uint64_t n_kv, uint64_t d, uint64_t quant,
                                    uint64_t resid, uint64_t *out, struct kvp_error *err)
{
    uint64_t qbytes, rbytes = 0;
    enum kvp_status st;

    if ((st = quantized_bytes(f, n_kv, d, quant, &qbytes, err)) != KVP_OK)
        return st;
    if (resid && (!kvp_mul3(n_kv, d, resid, &rbytes) || !kvp_format_residual_bytes(f, rbytes, &rbytes)))
        return OVERFLOW(err, "residual size");
    if (!kvp_add(qbytes, rbytes, out))
        return OVERFLOW(err, "cache size");
    return KVP_OK;
}

enum kvp_status kvp_cache_bytes(const struct kvp_format *f, uint64_t n_kv, uint64_t d, uint64_t tokens,
                                uint64_t window, uint64_t *out, struct kvp_error *err)
{
    uint64_t quant, resid;
    kvp_cache_tokens(f, tokens, window, false, &quant, &resid);
    return region_bytes(f, n_kv, d, quant, resid, out, err);
}

enum kvp_status kvp_cache_capacity(const struct kvp_format *f, uint64_t n_kv, uint64_t d, uint64_t tokens,
                                   uint64_t window, uint64_t *out, struct kvp_error *err)
{
    uint64_t quant, resid;
    kvp_cache_tokens(f, tokens, window, true, &quant, &resid);
    return region_bytes(f, n_kv, d, quant, resid, out, err);
}

/* What one more token adds in steady state: for channel-axis groups, a
 * group's bytes spread over its G tokens (rounded up). */
static enum kvp_status token_bytes(const struct kvp_format *f, uint64_t n_kv, uint64_t d, uint64_t *out,
                                   struct kvp_error *err)
{
    uint64_t g = kvp_dtype_info(f->dtype)->grouped && f->axis == KVP_AXIS_CHANNEL ? f->group : 1;
    struct kvp_format q = *f;
    uint64_t bytes;
    enum kvp_status st;

    q.residual = 0;
    if ((st = quantized_bytes(&q, n_kv, d, g, &bytes, err)) != KVP_OK)
        return st;
    *out = kvp_cdiv(bytes, g);
    return KVP_OK;
}

void kvp_recurrent_state_elems(const struct kvp_recurrent *r, uint64_t *conv, uint64_t *ssm)
{
    uint64_t k = r->d_conv ? r->d_conv - 1 : 0;
    switch (r->kind) {
    case KVP_REC_MAMBA:
        *conv = k * r->d_inner;
        *ssm = (uint64_t)r->d_inner * r->d_state;
        break;
    case KVP_REC_MAMBA2:
        *conv = k * ((uint64_t)r->d_inner + 2ull * r->n_groups * r->d_state);
        *ssm = (uint64_t)r->n_heads * r->v_head_dim * r->d_state;
        break;
    default: /* KVP_REC_GDN */
        *conv = k * (2ull * r->n_k_heads * r->k_head_dim + (uint64_t)r->n_heads * r->v_head_dim);
        *ssm = (uint64_t)r->n_heads * r->k_head_dim * r->v_head_dim;
        break;
    }
#ifdef KVP_MUTATE_STATE /* test-only (make check-mutation): one state element too many */
    *ssm += 1;
#endif
}

/* The window of a layer's cache (0 = every token). */
static uint64_t window_of(const struct kvp_layer_spec *s)
{
    return s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED ? s->window : 0;
}

static uint64_t held_tokens(const struct kvp_layer_spec *s, uint64_t t)
{
    switch (s->kind) {
    case KVP_LAYER_SLIDING:
    case KVP_LAYER_CHUNKED:
        return t < s->window ? t : s->window;
    case KVP_LAYER_FULL:
    case KVP_LAYER_MLA:
        return t;
    default:
        return 0;
    }
}

/* Held tokens rounded up to whole blocks of `block` tokens (0 = no paging). */
static uint64_t block_tokens(uint64_t tokens, uint32_t block)
{
    return block ? kvp_cdiv(tokens, block) * block : tokens;
}

/* One sequence's bytes of one layer's K or V: held at T, or the capacity of
 * a preallocated cache; paged: its held tokens rounded up to whole blocks
 * (row formats only: kvp_format_check_paged). */
static enum kvp_status seq_bytes(const struct kvp_kv_query *q, const struct kvp_format *f, uint64_t n_kv,
                                 uint64_t d, const struct kvp_layer_spec *s, uint64_t *out, struct kvp_error *err)
{
    if (q->block)
        return kvp_cache_bytes(f, n_kv, d, block_tokens(held_tokens(s, q->context), q->block), 0, out, err);
    return q->preallocated ? kvp_cache_capacity(f, n_kv, d, q->context, window_of(s), out, err)
                           : kvp_cache_bytes(f, n_kv, d, q->context, window_of(s), out, err);
}

/* Per-layer bytes of one spec. */
static enum kvp_status spec_bytes(const struct kvp_model *m, const struct kvp_layer_spec *s,
                                  const struct kvp_kv_query *q, struct kvp_spec_bytes *b,
                                  struct kvp_error *err)
{
    enum kvp_status st = KVP_OK;

    b->tokens = block_tokens(held_tokens(s, q->context), q->block);
    switch (s->kind) {
    case KVP_LAYER_FULL:
    case KVP_LAYER_SLIDING:
    case KVP_LAYER_CHUNKED:
        if (q->block &&
            ((st = kvp_format_check_paged(&q->k, "K", err)) || (st = kvp_format_check_paged(&q->v, "V", err))))
            return st;
        if ((st = token_bytes(&q->k, s->n_kv_heads, s->head_dim_k, &b->k_token, err)) ||
            (st = token_bytes(&q->v, s->n_kv_heads, s->head_dim_v, &b->v_token, err)) ||
            (st = seq_bytes(q, &q->k, s->n_kv_heads, s->head_dim_k, s, &b->k_seq, err)) ||
            (st = seq_bytes(q, &q->v, s->n_kv_heads, s->head_dim_v, s, &b->v_seq, err)))
            return st;
        break;
    case KVP_LAYER_MLA: {
        uint64_t latent = (uint64_t)s->kv_lora_rank + s->qk_rope_dim;
        if (q->block && (st = kvp_format_check_paged(&q->k, "K", err)))
            return st;
        if ((st = token_bytes(&q->k, 1, latent, &b->k_token, err)) ||
            (st = seq_bytes(q, &q->k, 1, latent, s, &b->k_seq, err)))
            return st;
        break;
    }
    case KVP_LAYER_RECURRENT: {
        uint64_t conv, ssm;
        kvp_recurrent_state_elems(&s->rec, &conv, &ssm);
        if (!kvp_mul(conv + ssm, kvp_dtype_info(m->state_dtype)->block_bits / 8, &b->state_seq))
            return OVERFLOW(err, "recurrent state");
        break;
    }
    default:
        break;
    }
    return st;
}

/* acc += a * b * c, checked. */
static bool add_product(uint64_t *acc, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t p;
    return kvp_mul3(a, b, c, &p) && kvp_add(*acc, p, acc);
}

enum kvp_status kvp_kv_compute(const struct kvp_model *m, const struct kvp_kv_query *q,
                               struct kvp_kv_plan *plan, struct kvp_error *err)
{
    enum kvp_status st;

    memset(plan, 0, sizeof *plan);
    plan->n_specs = m->n_specs;
    /* layers per spec, counted in runs: consecutive layers mostly share a
     * spec, and a register count avoids a store-to-load chain on one
     * counter per layer (the hot spot of a sweep) */
    if (m->n_layers > 0) {
        uint8_t cur = m->layer_spec[0];
        uint32_t run = 0;
        for (uint32_t i = 0; i < m->n_layers; i++) {
            if (m->layer_spec[i] != cur) {
                plan->spec[cur].layers += run;
                cur = m->layer_spec[i];
                run = 0;
            }
            run++;
        }
        plan->spec[cur].layers += run;
    }
    for (uint32_t i = 0; i < m->n_specs; i++) {
        struct kvp_spec_bytes *b = &plan->spec[i];
        if (b->layers == 0)
            continue;
        if ((st = spec_bytes(m, &m->specs[i], q, b, err)) != KVP_OK && st != KVP_ERR_OVERFLOW)
            return st;
        if (st != KVP_OK ||!add_product(&plan->k_bytes_per_token, b->k_token, b->layers, 1) ||
            !add_product(&plan->v_bytes_per_token, b->v_token, b->layers, 1) ||
            !add_product(&plan->k_bytes, b->k_seq, b->layers, q->batch) ||
            !add_product(&plan->v_bytes, b->v_seq, b->layers, q->batch) ||
            !add_product(&plan->state_bytes, b->state_seq, b->layers, q->batch))
            return kvp_fail(err, KVP_ERR_OVERFLOW,
                            "KV cache of %llu sequences of %llu tokens overflows 64 bits",
                            (unsigned long long)q->batch, (unsigned long long)q->context);
    }
    if (!kvp_add(plan->k_bytes_per_token, plan->v_bytes_per_token, &plan->kv_bytes_per_token) ||
        !kvp_add(plan->k_bytes, plan->v_bytes, &plan->kv_bytes) ||
        !kvp_add(plan->kv_bytes, plan->state_bytes, &plan->total_bytes))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "KV cache of %llu sequences of %llu tokens overflows 64 bits",
                        (unsigned long long)q->batch, (unsigned long long)q->context);
    return KVP_OK;
}

/* Stores that grow alike under the dynamic policy: `count` per sequence
 * (the layers of one spec), one K or V tensor each. */
struct growth {
    const struct kvp_format *f;
    uint64_t n_kv, d, window, count;
};

/* The most bytes alive during decode step t (1 <= t <= T; tokens t-1 -> t)
 * of batch sequences that advance in turn, seq 0 first; each sequence's
 * stores grow in the order kv.h gives. state: recurrent bytes of one
 * sequence (allocated at its first step, before its stores grow). */
static enum kvp_status step_peak(const struct growth *g, uint32_t n, uint64_t state, uint64_t batch, uint64_t t,
                                 uint64_t *out, struct kvp_error *err)
{
    uint64_t now = state, prev = state, shrink = 0, grow = 0, b1, b0, p, others;
    bool shrinks = false, grows = false;
    enum kvp_status st;

    for (uint32_t i = 0; i < n; i++) {
        if ((st = kvp_cache_bytes(g[i].f, g[i].n_kv, g[i].d, t, g[i].window, &b1, err)) ||
            (st = kvp_cache_bytes(g[i].f, g[i].n_kv, g[i].d, t - 1, g[i].window, &b0, err)))
            return st;
        if (!add_product(&now, b1, g[i].count, 1) || !add_product(&prev, b0, g[i].count, 1))
            return OVERFLOW(err, "peak");
        if (b1 < b0) { /* the first shrinking store: nothing has been freed yet */
            shrinks = true;
            shrink = b1 > shrink ? b1 : shrink;
        } else {       /* the last growing store: everything else is at t */
            grows = true;
            grow = b0 > grow ? b0 : grow;
        }
    }
    p = now > prev ? now : prev;
    others = p; /* the other sequences: those done at t, the rest at t-1 */
    if ((shrinks && prev + shrink < prev) || (grows && now + grow < now))
        return OVERFLOW(err, "peak");
    if (shrinks && prev + shrink > p)
        p = prev + shrink;
    if (grows && now + grow > p)
        p = now + grow;
    if (!add_product(&p, others, batch - 1, 1))
        return OVERFLOW(err, "peak");
    *out = p;
    return KVP_OK;
}

enum kvp_status kvp_kv_dynamic_peak(const struct kvp_model *m, const struct kvp_kv_query *q, uint64_t *out,
                                    struct kvp_error *err)
{
    struct growth g[2 * KVP_MAX_SPECS] = {{0}};
    struct kvp_kv_plan plan;
    uint64_t state = 0, best = 0, p;
    uint32_t n = 0;
    enum kvp_status st;

    if (q->block || q->preallocated)
        return kvp_fail(err, KVP_ERR_USAGE, "the dynamic policy neither pages (block %u) nor preallocates", q->block);
    if ((st = kvp_kv_compute(m, q, &plan, err)) != KVP_OK)
        return st;
    *out = 0;
    if (q->context == 0 || q->batch == 0)
        return KVP_OK;
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        uint64_t layers = plan.spec[i].layers;
        if (layers == 0)
            continue;
        if (s->kind == KVP_LAYER_RECURRENT && !add_product(&state, plan.spec[i].state_seq, layers, 1))
            return OVERFLOW(err, "peak");
        if (s->kind == KVP_LAYER_MLA)
            g[n++] = (struct growth){&q->k, 1, (uint64_t)s->kv_lora_rank + s->qk_rope_dim, 0, layers};
        if (s->kind == KVP_LAYER_FULL || s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED) {
            g[n++] = (struct growth){&q->k, s->n_kv_heads, s->head_dim_k, window_of(s), layers};
            g[n++] = (struct growth){&q->v, s->n_kv_heads, s->head_dim_v, window_of(s), layers};
        }
    }
    if ((st = step_peak(g, n, state, q->batch, q->context, &best, err)) != KVP_OK)
        return st;
    /* only axis=channel stores shrink: at a flush (t = kR': R' tokens
     * quantized at once) and, windowed, when a group leaves the window
     * (t = W + kG). Between those steps every step's peak is nondecreasing,
     * so the candidates are T and each such step and the step before it. */
    uint64_t base[4 * KVP_MAX_SPECS], period[4 * KVP_MAX_SPECS];
    uint32_t np = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct kvp_format *f = g[i].f;
        if (!kvp_dtype_info(f->dtype)->grouped || f->axis != KVP_AXIS_CHANNEL)
            continue;
        for (int k = 0; k < 2; k++) {
            uint64_t b = k ? g[i].window : 0, per = k ? f->group : f->residual ? f->residual : f->group;
            uint32_t j = 0;
            if (k && !b)
                continue;
            while (j < np && !(base[j] == b && period[j] == per))
                j++;
            if (j == np) {
                base[np] = b;
                period[np++] = per;
            }
        }
    }
    for (uint32_t i = 0; i < np; i++)
        for (uint64_t j = 1; base[i] < q->context && j <= (q->context - base[i]) / period[i]; j++)
            for (uint64_t t = base[i] + j * period[i] - 1; t <= base[i] + j * period[i]; t++) {
                if (t < 1)
                    continue;
                if ((st = step_peak(g, n, state, q->batch, t, &p, err)) != KVP_OK)
                    return st;
                best = p > best ? p : best;
            }
    *out = best;
    return KVP_OK;
}
