/* weights.c -- parameter counts and weight bytes (formulas in docs/model-format.md). */
#include <string.h>

#include "kvplan/engine.h"
#include "kvplan/num.h"

/* Accumulates parameters and bytes; `ok` turns false on the first overflow. */
struct tally {
    const struct kvp_format *wf; /* linear projections */
    struct kvp_format native;    /* everything else */
    uint64_t params, bytes;
    bool ok;
    enum kvp_status st;
    struct kvp_error *err;
};

/* A matrix of `rows` outputs x `cols` inputs in the weight format, grouped
 * along its input dimension. */
static void matrix(struct tally *t, uint64_t rows, uint64_t cols)
{
    uint64_t n, row;
    if (!t->ok)
        return;
    if (t->st == KVP_OK)
        t->st = kvp_format_row_bytes(t->wf, cols, &row, t->err);
    if (t->st != KVP_OK || !kvp_mul(rows, cols, &n) || !kvp_add(t->params, n, &t->params) ||
        !kvp_mul(rows, row, &n) || !kvp_add(t->bytes, n, &t->bytes))
        t->ok = false;
}

/* n values in the model's own dtype (embeddings, norms, biases, routers). */
static void vector(struct tally *t, uint64_t n)
{
    uint64_t b;
    if (!t->ok)
        return;
    if (!kvp_add(t->params, n, &t->params) ||
        !kvp_mul(n, kvp_dtype_info(t->native.dtype)->block_bits / 8, &b) || !kvp_add(t->bytes, b, &t->bytes))
        t->ok = false;
}

static void attention(struct tally *t, const struct kvp_model *m, const struct kvp_layer_spec *s)
{
    uint64_t h = m->hidden, hq = s->n_heads, hk = s->n_kv_heads, dk = s->head_dim_k, dv = s->head_dim_v;
    uint64_t gate = m->attn_gate ? 2 : 1;

    matrix(t, gate * hq * dk, h);
    if (s->kind != KVP_LAYER_SHARED) {
        matrix(t, hk * dk, h);
        matrix(t, hk * dv, h);
    }
    matrix(t, h, hq * dv);
    if (m->attn_qkv_bias)
        vector(t, gate * hq * dk + (s->kind != KVP_LAYER_SHARED ? hk * (dk + dv) : 0));
    if (m->attn_out_bias)
        vector(t, h);
    if (m->qk_norm)
        vector(t, 2 * dk);
    if (m->attn_sinks)
        vector(t, hq);
}

static void mla(struct tally *t, const struct kvp_model *m, const struct kvp_layer_spec *s)
{
    uint64_t h = m->hidden, hq = s->n_heads, dk = s->head_dim_k, dv = s->head_dim_v;
    uint64_t rope = s->qk_rope_dim, nope = dk - rope, r = s->kv_lora_rank, rq = s->q_lora_rank;

    if (rq) {
        matrix(t, rq, h);
        vector(t, rq);
        matrix(t, hq * dk, rq);
    } else {
        matrix(t, hq * dk, h);
    }
    matrix(t, r + rope, h);
    vector(t, r);
    matrix(t, hq * (nope + dv), r);
    matrix(t, h, hq * dv);
}

static void recurrent(struct tally *t, const struct kvp_model *m, const struct kvp_recurrent *r)
{
    uint64_t h = m->hidden, di = r->d_inner, ds = r->d_state, dc = r->d_conv;

    switch (r->kind) {
    case KVP_REC_MAMBA:
        matrix(t, 2 * di, h);
        vector(t, di * dc + di);                /* depthwise conv + bias */
        matrix(t, r->dt_rank + 2 * ds, di);
        matrix(t, di, r->dt_rank);
        vector(t, di + di * ds + di);           /* dt bias, A_log, D */
        matrix(t, h, di);
        if (r->bc_norms)
            vector(t, r->dt_rank + 2 * ds);
        break;
    case KVP_REC_MAMBA2: {
        uint64_t conv = di + 2ull * r->n_groups * ds;
        matrix(t, 2 * di + 2ull * r->n_groups * ds + r->n_heads, h);
        vector(t, conv * dc + conv);
        vector(t, 3ull * r->n_heads + di);      /* dt bias, A_log, D; gated norm */
        matrix(t, h, di);
        break;
    }
    default: { /* KVP_REC_GDN */
        uint64_t kd = (uint64_t)r->n_k_heads * r->k_head_dim, vd = (uint64_t)r->n_heads * r->v_head_dim;
        matrix(t, 2 * kd + 2 * vd, h);          /* q, k, v, z */
        matrix(t, 2ull * r->n_heads, h);        /* beta, alpha */
        vector(t, (2 * kd + vd) * dc);          /* depthwise conv, no bias */
        vector(t, 2ull * r->n_heads + r->v_head_dim); /* dt bias, A_log, gated norm */
        matrix(t, h, vd);
        break;
    }
    }
}

/* Parameters and bytes of a part of the model. */
struct share {
    uint64_t params, bytes;
};

/* One feed-forward block of width w; returns what it added. */
static struct share mlp(struct tally *t, const struct kvp_model *m, uint64_t w, bool bias)
{
    struct share before = {t->params, t->bytes};
    uint64_t h = m->hidden;
    bool gated = m->act == KVP_ACT_GATED;

    matrix(t, w, h);
    if (gated)
        matrix(t, w, h);
    matrix(t, h, w);
    if (bias)
        vector(t, (gated ? 2 * w : w) + h);
    return (struct share){t->params - before.params, t->bytes - before.bytes};
}

/* n - 1 more copies of what `one` added (experts are alike: count one, multiply). */
static void repeat_share(struct tally *t, struct share one, uint64_t n)
{
    uint64_t p, b;
    if (!t->ok || n <= 1)
        return;
    if (!kvp_mul(one.params, n - 1, &p) || !kvp_add(t->params, p, &t->params) || !kvp_mul(one.bytes, n - 1, &b) ||
        !kvp_add(t->bytes, b, &t->bytes))
        t->ok = false;
}

/* A MoE block; returns what one token does not read: the inactive experts. */
static struct share moe(struct tally *t, const struct kvp_model *m)
{
    struct share one;
    uint64_t idle = m->n_experts - m->n_experts_active;

    matrix(t, m->n_experts, m->hidden);
    if (m->router_bias)
        vector(t, m->n_experts);
    one = mlp(t, m, m->expert_intermediate, m->expert_bias);
    repeat_share(t, one, m->n_experts);
    if (m->n_shared_experts)
        repeat_share(t, mlp(t, m, m->shared_intermediate, false), m->n_shared_experts);
    if (m->shared_expert_gate)
        matrix(t, 1, m->hidden);
    /* the idle experts' share is at most the whole, which did not overflow */
    return (struct share){one.params * idle, one.bytes * idle};
}

static uint64_t norm_size(const struct kvp_model *m)
{
    return m->norm == KVP_NORM_LAYER ? 2ull * m->hidden : m->hidden;
}

/* The token mixer of one layer. */
static void mixer(struct tally *t, const struct kvp_model *m, const struct kvp_layer_spec *s)
{
    switch (s->kind) {
    case KVP_LAYER_FULL: case KVP_LAYER_SLIDING: case KVP_LAYER_CHUNKED: case KVP_LAYER_SHARED:
        attention(t, m, s);
        break;
    case KVP_LAYER_MLA:
        mla(t, m, s);
        break;
    case KVP_LAYER_RECURRENT:
        recurrent(t, m, &s->rec);
        break;
    default:
        break;
    }
}

enum kvp_status kvp_weights_compute(const struct kvp_model *m, const struct kvp_format *wf,
                                    struct kvp_weights *w, struct kvp_error *err)
{
    struct tally t = {.wf = wf, .native = kvp_format_plain(m->dtype), .ok = true, .st = KVP_OK, .err = err};
    struct share idle = {0, 0};
    uint64_t mark;

    memset(w, 0, sizeof *w);
    vector(&t, (uint64_t)m->vocab * m->hidden);
    if (!m->tied_embeddings)
        vector(&t, (uint64_t)m->vocab * m->hidden);
    vector(&t, (uint64_t)m->learned_positions * m->hidden);
    w->embedding_params = t.params;
    vector(&t, norm_size(m));
    w->norm_params = norm_size(m);
    for (uint32_t i = 0; i < m->n_layers; i++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, i);
        mark = t.params;
        mixer(&t, m, s);
        w->attention_params += t.params - mark;
        mark = t.params;
        vector(&t, m->norms_per_layer * norm_size(m));
        w->norm_params += t.params - mark;
        mark = t.params;
        if (s->mlp == KVP_MLP_DENSE) {
            mlp(&t, m, m->intermediate, m->mlp_bias);
        } else if (s->mlp == KVP_MLP_MOE) {
            struct share off = moe(&t, m);
            idle.params += off.params;
            idle.bytes += off.bytes;
        }
        w->mlp_params += t.params - mark;
    }
    if (t.st != KVP_OK)
        return t.st;
    if (!t.ok)
        return kvp_fail(err, KVP_ERR_OVERFLOW, "weights of '%s' overflow 64 bits", m->name);
    w->params = t.params;
    w->bytes = t.bytes;
    w->active_params = t.params - idle.params;
    w->active_bytes = t.bytes - idle.bytes;
    return KVP_OK;
}
