/* engine.c -- KV-cache bytes under the `ideal` rules (see engine.h). */
#include "kvplan/engine.h"

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

enum kvp_status kvp_cache_bytes(const struct kvp_format *f, uint64_t n_kv, uint64_t d,
                                uint64_t tokens, uint64_t *out, struct kvp_error *err)
{
    uint64_t resid = 0, quant, qbytes, rbytes = 0;
    enum kvp_status st;

    if (kvp_dtype_info(f->dtype)->grouped) {
        if (f->axis == KVP_AXIS_CHANNEL) {
            uint64_t r = f->residual ? f->residual : f->group;
            resid = tokens % r;
        } else {
            resid = tokens < f->residual ? tokens : f->residual;
        }
    }
    quant = tokens - resid;
    if ((st = quantized_bytes(f, n_kv, d, quant, &qbytes, err)) != KVP_OK)
        return st;
    if (resid && (!kvp_mul3(n_kv, d, resid, &rbytes) || !kvp_format_residual_bytes(f, rbytes, &rbytes)))
        return OVERFLOW(err, "residual size");
    if (!kvp_add(qbytes, rbytes, out))
        return OVERFLOW(err, "cache size");
    return KVP_OK;
}

enum kvp_status kvp_cache_capacity(const struct kvp_format *f, uint64_t n_kv, uint64_t d, uint64_t tokens,
                                   uint64_t *out, struct kvp_error *err)
{
    uint64_t r, quant, resid, qbytes, rbytes = 0;
    enum kvp_status st;

    if (!kvp_dtype_info(f->dtype)->grouped || f->axis != KVP_AXIS_CHANNEL)
        return kvp_cache_bytes(f, n_kv, d, tokens, out, err); /* monotone in tokens */
    /* R' >= G >= 1 (format.h checks group and residual) */
    r = f->residual ? f->residual : f->group;
    quant = tokens - tokens % r;          /* the most whole groups held at any t <= T */
    resid = tokens < r - 1 ? tokens : r - 1; /* the most residual tokens held at any t <= T */
    if ((st = quantized_bytes(f, n_kv, d, quant, &qbytes, err)) != KVP_OK)
        return st;
    if (resid && (!kvp_mul3(n_kv, d, resid, &rbytes) || !kvp_format_residual_bytes(f, rbytes, &rbytes)))
        return OVERFLOW(err, "residual size");
    if (!kvp_add(qbytes, rbytes, out))
        return OVERFLOW(err, "cache size");
    return KVP_OK;
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
 * a preallocated cache (held tokens are monotone in T, so the capacity of
 * held(T) covers every held(t), t <= T). */
static enum kvp_status seq_bytes(const struct kvp_kv_query *q, const struct kvp_format *f, uint64_t n_kv,
                                 uint64_t d, uint64_t tokens, uint64_t *out, struct kvp_error *err)
{
    return q->preallocated ? kvp_cache_capacity(f, n_kv, d, tokens, out, err)
                           : kvp_cache_bytes(f, n_kv, d, tokens, out, err);
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
        if (q->block && ((st = kvp_format_check_paged(&q->k, "K", err)) || (st = kvp_format_check_paged(&q->v, "V", err))))
            return st;
        if ((st = token_bytes(&q->k, s->n_kv_heads, s->head_dim_k, &b->k_token, err)) ||
            (st = token_bytes(&q->v, s->n_kv_heads, s->head_dim_v, &b->v_token, err)) ||
            (st = seq_bytes(q, &q->k, s->n_kv_heads, s->head_dim_k, b->tokens, &b->k_seq, err)) ||
            (st = seq_bytes(q, &q->v, s->n_kv_heads, s->head_dim_v, b->tokens, &b->v_seq, err)))
            return st;
        break;
    case KVP_LAYER_MLA: {
        uint64_t latent = (uint64_t)s->kv_lora_rank + s->qk_rope_dim;
        if (q->block && (st = kvp_format_check_paged(&q->k, "K", err)))
            return st;
        if ((st = token_bytes(&q->k, 1, latent, &b->k_token, err)) ||
            (st = seq_bytes(q, &q->k, 1, latent, b->tokens, &b->k_seq, err)))
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
    const struct kvp_layer_spec *s;
    const struct kvp_format *f;
    uint64_t n_kv, d, count;
};

/* The most bytes alive during decode step t (1 <= t <= T; tokens t-1 -> t)
 * of batch sequences that advance in turn, seq 0 first; each sequence's
 * stores grow in the order engine.h gives. state: recurrent bytes of one
 * sequence (allocated at its first step, before its stores grow). */
static enum kvp_status step_peak(const struct growth *g, uint32_t n, uint64_t state, uint64_t batch, uint64_t t,
                                 uint64_t *out, struct kvp_error *err)
{
    uint64_t now = state, prev = state, shrink = 0, grow = 0, b1, b0, p, others;
    bool shrinks = false, grows = false;
    enum kvp_status st;

    for (uint32_t i = 0; i < n; i++) {
        if ((st = kvp_cache_bytes(g[i].f, g[i].n_kv, g[i].d, held_tokens(g[i].s, t), &b1, err)) ||
            (st = kvp_cache_bytes(g[i].f, g[i].n_kv, g[i].d, held_tokens(g[i].s, t - 1), &b0, err)))
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
    struct growth g[2 * KVP_MAX_SPECS];
    struct kvp_kv_plan plan;
    uint64_t state = 0, r[2] = {0, 0}, best = 0, p;
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
            g[n++] = (struct growth){s, &q->k, 1, (uint64_t)s->kv_lora_rank + s->qk_rope_dim, layers};
        if (s->kind == KVP_LAYER_FULL || s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED) {
            g[n++] = (struct growth){s, &q->k, s->n_kv_heads, s->head_dim_k, layers};
            g[n++] = (struct growth){s, &q->v, s->n_kv_heads, s->head_dim_v, layers};
        }
    }
    /* only a flush (axis=channel: R' tokens quantized at once) shrinks a
     * store; between flushes every step's peak is nondecreasing, so the
     * candidates are T and each flush step and the step before it */
    for (uint32_t i = 0; i < n; i++)
        if (kvp_dtype_info(g[i].f->dtype)->grouped && g[i].f->axis == KVP_AXIS_CHANNEL)
            r[g[i].f == &q->v] = g[i].f->residual ? g[i].f->residual : g[i].f->group;
    if (r[1] == r[0])
        r[1] = 0;
    if ((st = step_peak(g, n, state, q->batch, q->context, &best, err)) != KVP_OK)
        return st;
    for (int k = 0; k < 2; k++)
        for (uint64_t j = 1; r[k] && j <= q->context / r[k]; j++)
            for (uint64_t t = j * r[k] - 1; t <= j * r[k]; t++)
                if (t >= 1) {
                    if ((st = step_peak(g, n, state, q->batch, t, &p, err)) != KVP_OK)
                        return st;
                    best = p > best ? p : best;
                }
    *out = best;
    return KVP_OK;
}
