/* weights.c -- parameter counts and weight bytes (formulas in docs/model-format.md). */
#include <stdio.h>
#include <string.h>

#include "kvplan/kv.h"
#include "kvplan/num.h"
#include "profile.h"

/* How each tensor is priced: one of the wstore kinds (see price()). */
struct tally {
    const struct kvp_model *m;
    const struct kvp_wstore *ws;
    struct kvp_wq native;            /* the model dtype, for what is not quantized */
    struct kvp_gguf_mix_state mix;   /* KVP_WSTORE_GGUF: llama.cpp's counters */
    uint32_t layer;                  /* layer being visited; UINT32_MAX outside the stack */
    struct kvp_weights *w;           /* parts accumulate here */
    /* the part each source of a stored form went to (FORM_*, or FORM_GGUF + a ggml type), 0 = not yet,
     * else index + 1: naming a form costs a formatted print, once per tensor of a large model */
    uint32_t part_of[3 + KVP_DTYPE_COUNT];
    uint64_t params, bytes;
    bool ok;
    enum kvp_status st;
    struct kvp_error *err;
};

/* Where price() took a tensor's stored form from: the same source, the same form. */
enum { FORM_CHOICE, FORM_NATIVE, FORM_SCHEME, FORM_GGUF };

/* The stored form of a tensor of role r under the tally's choice; *src says where it came from. */
static struct kvp_wq price(struct tally *t, const struct kvp_wtensor *x, uint32_t *src)
{
    enum kvp_wclass c = kvp_wrole_class(x->role);
    const struct kvp_wscheme *sc = &t->m->wscheme;

    switch (t->ws->kind) {
    case KVP_WSTORE_FORMAT:
        *src = (KVP_WC_LINEAR >> c) & 1 ? FORM_CHOICE : FORM_NATIVE;
        return *src == FORM_CHOICE ? t->ws->q : t->native;
    case KVP_WSTORE_GGUF: {
        struct kvp_wq q = {.kind = KVP_WQ_FORMAT,
                           .f = kvp_format_plain(kvp_gguf_mix_type(t->m, t->ws->ftype, x, &t->mix))};
        *src = FORM_GGUF + (uint32_t)q.f.dtype;
        return q;
    }
    default:
        *src = sc->method[0] && ((sc->classes >> c) & 1) ? FORM_SCHEME : FORM_NATIVE;
        return *src == FORM_SCHEME ? sc->q : t->native;
    }
}

/* Add `bytes` of `params` in stored form q to the parts list (same name = same part). */
static void add_part(struct tally *t, const struct kvp_wq *q, uint32_t src, enum kvp_wclass c, uint64_t params,
                     uint64_t bytes)
{
    struct kvp_weights *w = t->w;
    char name[KVP_WPART_NAME];
    uint32_t i = t->part_of[src] ? t->part_of[src] - 1 : 0; /* a new source is looked up by name below */

    if (!t->part_of[src]) {
        kvp_wq_name(q, name, sizeof name);
        for (i = 0; i < w->n_parts && strcmp(w->parts[i].name, name) != 0; i++)
            ;
    }
    if (i == w->n_parts) {
        if (w->n_parts == KVP_MAX_WPARTS)
            i = KVP_MAX_WPARTS - 1; /* more stored forms than rows: the last row takes the rest */
        else
            snprintf(w->parts[w->n_parts++].name, KVP_WPART_NAME, "%s", name);
    }
    t->part_of[src] = i + 1;
    w->parts[i].params += params;
    w->parts[i].bytes += bytes;
    w->parts[i].classes |= 1u << c;
    w->class_bytes[c] += bytes; /* a share of t->bytes, which did not overflow */
}

/* One tensor: `count` matrices of `rows` outputs x `cols` inputs, grouped
 * along the input. */
static void tensor(struct tally *t, enum kvp_wrole role, uint64_t rows, uint64_t cols, uint64_t count)
{
    struct kvp_wtensor x = {.role = role, .layer = t->layer, .rows = rows, .cols = cols, .count = count};
    struct kvp_wq q;
    uint64_t n, b;
    uint32_t src;

    if (!t->ok || t->st != KVP_OK || rows == 0 || cols == 0 || count == 0)
        return;
    q = price(t, &x, &src);
    if ((t->st = kvp_wq_tensor_bytes(&q, &x, &b, t->err)) != KVP_OK)
        return;
    if (!kvp_mul(rows, cols, &n) || !kvp_mul(n, count, &n) || !kvp_add(t->params, n, &t->params) ||
        !kvp_add(t->bytes, b, &t->bytes)) {
        t->ok = false;
        return;
    }
    add_part(t, &q, src, kvp_wrole_class(role), n, b);
}

static void matrix(struct tally *t, enum kvp_wrole role, uint64_t rows, uint64_t cols)
{
    tensor(t, role, rows, cols, 1);
}

/* n values of a 1-D tensor (norms, biases, convolutions). */
static void vector(struct tally *t, uint64_t n)
{
    tensor(t, KVP_WR_VECTOR, 1, n, 1);
}

static void attention(struct tally *t, const struct kvp_model *m, const struct kvp_layer_spec *s)
{
    uint64_t h = m->hidden, hq = s->n_heads, hk = s->n_kv_heads, dk = s->head_dim_k, dv = s->head_dim_v;
    uint64_t gate = m->attn_gate ? 2 : 1;

    matrix(t, KVP_WR_ATTN_Q, gate * hq * dk, h);
    if (s->kind != KVP_LAYER_SHARED) {
        matrix(t, KVP_WR_ATTN_K, hk * dk, h);
        matrix(t, KVP_WR_ATTN_V, hk * dv, h);
    }
    matrix(t, KVP_WR_ATTN_OUT, h, hq * dv);
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
        matrix(t, KVP_WR_MLA_Q_A, rq, h);
        vector(t, rq);
        matrix(t, KVP_WR_MLA_Q_B, hq * dk, rq);
    } else {
        matrix(t, KVP_WR_MLA_Q_B, hq * dk, h);
    }
    matrix(t, KVP_WR_MLA_KV_A, r + rope, h);
    vector(t, r);
    if (t->ws->kind == KVP_WSTORE_GGUF) {
        /* llama.cpp keeps kv_b as per-head attn_k_b (ne0 nope, ne1 r) and attn_v_b (ne0 r, ne1 dv)
         * (convert_hf_to_gguf splits kv_b_proj): a 128-wide k_b row falls back from 256-blocks */
        tensor(t, KVP_WR_MLA_KV_B, r, nope, hq);
        tensor(t, KVP_WR_MLA_KV_B, dv, r, hq);
    } else {
        matrix(t, KVP_WR_MLA_KV_B, hq * (nope + dv), r);
    }
    matrix(t, KVP_WR_ATTN_OUT, h, hq * dv);
}

static void recurrent(struct tally *t, const struct kvp_model *m, const struct kvp_recurrent *r)
{
    uint64_t h = m->hidden, di = r->d_inner, ds = r->d_state, dc = r->d_conv;

    switch (r->kind) {
    case KVP_REC_MAMBA:
        matrix(t, KVP_WR_SSM_IN, 2 * di, h);
        vector(t, di * dc + di);                /* depthwise conv + bias */
        matrix(t, KVP_WR_SSM_X, r->dt_rank + 2 * ds, di);
        matrix(t, KVP_WR_SSM_DT, di, r->dt_rank);
        vector(t, di + di * ds + di);           /* dt bias, A_log, D */
        matrix(t, KVP_WR_SSM_OUT, h, di);
        if (r->bc_norms)
            vector(t, r->dt_rank + 2 * ds);
        break;
    case KVP_REC_MAMBA2: {
        uint64_t conv = di + 2ull * r->n_groups * ds;
        matrix(t, KVP_WR_SSM_IN, 2 * di + 2ull * r->n_groups * ds + r->n_heads, h);
        vector(t, conv * dc + conv);
        vector(t, 3ull * r->n_heads + di);      /* dt bias, A_log, D; gated norm */
        matrix(t, KVP_WR_SSM_OUT, h, di);
        break;
    }
    default: { /* KVP_REC_GDN */
        uint64_t kd = (uint64_t)r->n_k_heads * r->k_head_dim, vd = (uint64_t)r->n_heads * r->v_head_dim;
        matrix(t, KVP_WR_SSM_IN, 2 * kd + 2 * vd, h); /* q, k, v, z */
        matrix(t, KVP_WR_SSM_IN, 2ull * r->n_heads, h); /* beta, alpha */
        vector(t, (2 * kd + vd) * dc);          /* depthwise conv, no bias */
        vector(t, 2ull * r->n_heads + r->v_head_dim); /* dt bias, A_log, gated norm */
        matrix(t, KVP_WR_SSM_OUT, h, vd);
        break;
    }
    }
}

/* Parameters and bytes of a part of the model. */
struct share {
    uint64_t params, bytes;
};

/* The roles of one feed-forward block's gate, up and down matrices. */
static const enum kvp_wrole ffn_roles[3][3] = {
    {KVP_WR_FFN_GATE, KVP_WR_FFN_UP, KVP_WR_FFN_DOWN},
    {KVP_WR_EXP_GATE, KVP_WR_EXP_UP, KVP_WR_EXP_DOWN},
    {KVP_WR_SHEXP_GATE, KVP_WR_SHEXP_UP, KVP_WR_SHEXP_DOWN},
};

/* `count` alike feed-forward blocks of width w over hidden size h (kind 0
 * dense, 1 routed experts, 2 shared experts); returns what one of them adds. */
static struct share mlp(struct tally *t, const struct kvp_model *m, int kind, uint64_t w, uint64_t h, bool bias,
                        uint64_t count)
{
    struct share before = {t->params, t->bytes};
    const enum kvp_wrole *r = ffn_roles[kind];
    bool gated = m->act == KVP_ACT_GATED;

    if (gated)
        tensor(t, r[0], w, h, count);
    tensor(t, r[1], w, h, count);
    tensor(t, r[2], h, w, count);
    if (bias)
        tensor(t, KVP_WR_VECTOR, 1, (gated ? 2 * w : w) + h, count);
    return (struct share){(t->params - before.params) / count, (t->bytes - before.bytes) / count};
}

/* A MoE block; returns what one token does not read: the inactive experts. */
static struct share moe(struct tally *t, const struct kvp_model *m)
{
    struct share one;
    uint64_t idle = m->n_experts - m->n_experts_active;

    matrix(t, KVP_WR_ROUTER, m->n_experts, m->hidden);
    if (m->router_bias)
        vector(t, m->n_experts);
    one = mlp(t, m, 1, m->expert_intermediate, m->hidden, m->expert_bias, m->n_experts);
    if (m->n_shared_experts)
        mlp(t, m, 2, m->shared_intermediate, m->hidden, false, m->n_shared_experts);
    if (m->shared_expert_gate)
        matrix(t, KVP_WR_ROUTER, 1, m->hidden);
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

enum kvp_dtype kvp_wstore_code_dtype(const struct kvp_wstore *ws, const struct kvp_model *m)
{
    const struct kvp_wq *q = ws->kind == KVP_WSTORE_FORMAT ? &ws->q
                             : ws->kind == KVP_WSTORE_CHECKPOINT && m->wscheme.method[0] &&
                                     (m->wscheme.classes >> KVP_WC_ATTN) & 1
                                 ? &m->wscheme.q
                                 : NULL;
    return q && (q->kind == KVP_WQ_FORMAT || q->kind == KVP_WQ_FP8) ? q->f.dtype : m->dtype;
}

/* The checkpoint's own table: its bytes, with the parameters counted above
 * (the tower's the headers' own); false when they overflow. */
static bool take_table(const struct kvp_model *m, struct kvp_weights *w)
{
    const struct kvp_wtable *tb = &m->wtable;
    uint64_t bytes = 0, expert = tb->expert_bytes, per_expert_idle;

    w->n_parts = 0;
    for (uint32_t i = 0; i < tb->n && i < KVP_MAX_WPARTS; i++) {
        struct kvp_wpart *p = &w->parts[w->n_parts++];
        memset(p, 0, sizeof *p);
        snprintf(p->name, sizeof p->name, "%s", kvp_dtype_info(tb->rows[i].dtype)->name);
        p->params = tb->rows[i].params;
        p->bytes = tb->rows[i].bytes;
    }
    for (uint32_t i = 0; i < tb->n; i++)
        bytes += tb->rows[i].bytes; /* the readers checked the sum (read_tensor_infos, safetensors tensor) */
    w->bytes = bytes;
    /* a token reads the file less its idle experts: the experts' bytes times idle/all */
    per_expert_idle = m->n_experts ? (uint64_t)((long double)expert * (m->n_experts - m->n_experts_active) /
                                                m->n_experts)
                                   : 0;
    w->active_bytes = bytes - (per_expert_idle <= bytes ? per_expert_idle : bytes);
    /* the tower as the headers store it (none there: the checkpoint holds none) */
    w->active_bytes -= tb->tower_bytes <= w->active_bytes ? tb->tower_bytes : w->active_bytes;
    w->tower_bytes = tb->tower_bytes;
    snprintf(w->source, sizeof w->source, "%s%s%s", tb->what, tb->mixture[0] ? ", file type " : "", tb->mixture);
    w->params -= w->tower_params;
    w->tower_params = tb->tower_params;
    return kvp_add(w->params, tb->tower_params, &w->params);
}

/* A tally of m's tensors under ws (NULL: as stored) into w, emptied. */
static struct tally tally_begin(const struct kvp_model *m, const struct kvp_wstore *ws, struct kvp_weights *w,
                                struct kvp_error *err)
{
    static const struct kvp_wstore stored = {.kind = KVP_WSTORE_CHECKPOINT};
    struct tally t = {.m = m, .ws = ws ? ws : &stored, .ok = true, .st = KVP_OK, .err = err, .w = w,
                      .layer = UINT32_MAX};
    memset(w, 0, sizeof *w);
    t.native.kind = KVP_WQ_FORMAT;
    t.native.f = kvp_format_plain(m->dtype);
    if (t.ws->kind == KVP_WSTORE_GGUF)
        kvp_gguf_mix_begin(m, &t.mix);
    return t;
}

enum kvp_status kvp_weights_experts(const struct kvp_model *m, const struct kvp_wstore *ws, uint32_t layer,
                                    uint64_t inter, uint64_t hidden, uint64_t *bytes, struct kvp_error *err)
{
    struct kvp_weights w;
    struct tally t = tally_begin(m, ws, &w, err);
    t.layer = layer;
    mlp(&t, m, 1, inter, hidden, m->expert_bias, m->n_experts);
    if (t.st != KVP_OK)
        return t.st;
    if (!t.ok)
        return kvp_fail(err, KVP_ERR_OVERFLOW, "the experts of '%s' overflow 64 bits", m->name);
    *bytes = t.bytes;
    return KVP_OK;
}

enum kvp_status kvp_weights_compute(const struct kvp_model *m, const struct kvp_wstore *ws,
                                    struct kvp_weights *w, struct kvp_error *err)
{
    struct tally t = tally_begin(m, ws, w, err);
    struct share idle = {0, 0};
    uint64_t mark;

    tensor(&t, KVP_WR_TOKEN_EMBD, m->vocab, m->hidden, 1);
    if (!m->tied_embeddings)
        tensor(&t, KVP_WR_OUTPUT, m->vocab, m->hidden, 1);
    tensor(&t, KVP_WR_POS_EMBD, m->learned_positions, m->hidden, 1);
    w->embedding_params = t.params;
    vector(&t, norm_size(m));
    w->norm_params = norm_size(m);
    for (uint32_t i = 0; i < m->n_layers; i++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, i);
        t.layer = i;
        mark = t.params;
        mixer(&t, m, s);
        w->attention_params += t.params - mark;
        mark = t.params;
        vector(&t, m->norms_per_layer * norm_size(m));
        w->norm_params += t.params - mark;
        mark = t.params;
        if (s->mlp == KVP_MLP_DENSE) {
            mlp(&t, m, 0, m->intermediate, m->hidden, m->mlp_bias, 1);
        } else if (s->mlp == KVP_MLP_MOE) {
            struct share off = moe(&t, m);
            idle.params += off.params;
            idle.bytes += off.bytes;
        }
        w->mlp_params += t.params - mark;
    }
    /* the tower, in the model dtype; llama.cpp keeps it in a GGUF of its own (mmproj), loaded apart */
    t.layer = UINT32_MAX;
    mark = t.bytes;
    if (t.ws->kind != KVP_WSTORE_GGUF && m->tower_params) {
        tensor(&t, KVP_WR_TOWER, 1, m->tower_params, 1);
        w->tower_params = m->tower_params;
    }
    w->tower_bytes = t.bytes - mark;
    if (t.st != KVP_OK)
        return t.st;
    if (!t.ok)
        return kvp_fail(err, KVP_ERR_OVERFLOW, "weights of '%s' overflow 64 bits", m->name);
    w->params = t.params;
    w->bytes = t.bytes;
    /* a decode step runs neither idle experts nor the tower */
    w->active_params = t.params - idle.params - w->tower_params;
    w->active_bytes = t.bytes - idle.bytes - w->tower_bytes;
    /* most bytes first (insertion sort of at most KVP_MAX_WPARTS) */
    for (uint32_t i = 1; i < w->n_parts; i++)
        for (uint32_t j = i; j > 0 && w->parts[j].bytes > w->parts[j - 1].bytes; j--) {
            struct kvp_wpart p = w->parts[j];
            w->parts[j] = w->parts[j - 1];
            w->parts[j - 1] = p;
        }
    if (t.ws->kind == KVP_WSTORE_CHECKPOINT && m->wtable.n) {
        if (!take_table(m, w))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "the parameters of '%s' overflow 64 bits", m->name);
    } else if (t.ws->kind == KVP_WSTORE_CHECKPOINT && m->wscheme.method[0]) {
        snprintf(w->source, sizeof w->source, "%s (%s)",
                 m->wscheme.assumed ? "assumed from the model id" : "quantization_config", m->wscheme.method);
    }
    return KVP_OK;
}
