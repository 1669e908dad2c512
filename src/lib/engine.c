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

/* The largest single K or V tensor of one layer of one sequence at T-1
 * tokens: what growth by concatenation copies last (see peak_bytes). */
static enum kvp_status largest_tensor(const struct kvp_model *m, const struct kvp_kv_query *q,
                                      const struct kvp_kv_plan *plan, uint64_t *out, struct kvp_error *err)
{
    uint64_t best = 0, b;
    enum kvp_status st;

    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        uint64_t t = held_tokens(s, q->context - 1);
        if (plan->spec[i].layers == 0)
            continue;
        if (s->kind == KVP_LAYER_MLA) {
            if ((st = kvp_cache_bytes(&q->k, 1, (uint64_t)s->kv_lora_rank + s->qk_rope_dim, t, &b, err)))
                return st;
            best = b > best ? b : best;
        } else if (s->kind == KVP_LAYER_FULL || s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED) {
            if ((st = kvp_cache_bytes(&q->k, s->n_kv_heads, s->head_dim_k, t, &b, err)))
                return st;
            best = b > best ? b : best;
            if ((st = kvp_cache_bytes(&q->v, s->n_kv_heads, s->head_dim_v, t, &b, err)))
                return st;
            best = b > best ? b : best;
        }
    }
    *out = best;
    return KVP_OK;
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
        if ((st = token_bytes(&q->k, s->n_kv_heads, s->head_dim_k, &b->k_token, err)) ||
            (st = token_bytes(&q->v, s->n_kv_heads, s->head_dim_v, &b->v_token, err)) ||
            (st = seq_bytes(q, &q->k, s->n_kv_heads, s->head_dim_k, b->tokens, &b->k_seq, err)) ||
            (st = seq_bytes(q, &q->v, s->n_kv_heads, s->head_dim_v, b->tokens, &b->v_seq, err)))
            return st;
        break;
    case KVP_LAYER_MLA: {
        uint64_t latent = (uint64_t)s->kv_lora_rank + s->qk_rope_dim;
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
    plan->peak_bytes = plan->total_bytes;
    /* a preallocated cache copies nothing: its peak is what it holds */
    if (q->block == 0 && q->context > 0 && !q->preallocated) {
        /* the peak is an extra figure: a cache whose size fits but whose
         * peak does not still gets its plan, with peak_bytes = UINT64_MAX */
        uint64_t copy;
        /* err NULL: its message is not wanted, and zeroing a struct
         * kvp_error per call cost a fifth of the time of a call */
        if (largest_tensor(m, q, plan, &copy, NULL) != KVP_OK || !kvp_add(plan->total_bytes, copy, &plan->peak_bytes))
            plan->peak_bytes = UINT64_MAX;
    }
    return KVP_OK;
}
