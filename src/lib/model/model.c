/* model.c -- the normalized model: kind names, construction, validation.
 *
 * Loading a model from a path (the dispatch on the file's kind) is model_load.c,
 * so that the parsers (model_yaml.c, model_hf.c, model_gguf.c), which build
 * models with this file's functions, are not also called from here. */
#include "kvplan/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>


static const char *const layer_kinds[KVP_LAYER_KIND_COUNT] = {
    "full", "sliding", "chunked", "mla", "recurrent", "shared", "none",
};
static const char *const mlp_kinds[KVP_MLP_KIND_COUNT] = {"dense", "moe", "none"};
static const char *const rec_kinds[KVP_REC_KIND_COUNT] = {"mamba", "mamba2", "gdn"};

static bool lookup(const char *const *names, int n, const char *s, int *out)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], s) == 0) {
            *out = i;
            return true;
        }
    }
    return false;
}

const char *kvp_layer_kind_name(enum kvp_layer_kind k) { return layer_kinds[k]; }
const char *kvp_mlp_kind_name(enum kvp_mlp_kind k) { return mlp_kinds[k]; }
const char *kvp_recurrent_kind_name(enum kvp_recurrent_kind k) { return rec_kinds[k]; }

bool kvp_layer_kind_from_name(const char *s, enum kvp_layer_kind *out)
{
    int i;
    if (!lookup(layer_kinds, KVP_LAYER_KIND_COUNT, s, &i))
        return false;
    *out = (enum kvp_layer_kind)i;
    return true;
}

bool kvp_mlp_kind_from_name(const char *s, enum kvp_mlp_kind *out)
{
    int i;
    if (!lookup(mlp_kinds, KVP_MLP_KIND_COUNT, s, &i))
        return false;
    *out = (enum kvp_mlp_kind)i;
    return true;
}

bool kvp_recurrent_kind_from_name(const char *s, enum kvp_recurrent_kind *out)
{
    int i;
    if (!lookup(rec_kinds, KVP_REC_KIND_COUNT, s, &i))
        return false;
    *out = (enum kvp_recurrent_kind)i;
    return true;
}

void kvp_model_init(struct kvp_model *m)
{
    memset(m, 0, sizeof *m);
    m->dtype = KVP_DTYPE_BF16;
    m->state_dtype = KVP_DTYPE_BF16;
    m->norm = KVP_NORM_RMS;
    m->act = KVP_ACT_GATED;
    m->norms_per_layer = 2;
}

void kvp_model_warn(struct kvp_model *m, const char *fmt, ...)
{
    va_list ap;
    if (m->n_warnings == KVP_MAX_WARNINGS) {
        snprintf(m->warnings[KVP_MAX_WARNINGS - 1], KVP_TEXT_MAX, "more warnings were dropped");
        return;
    }
    va_start(ap, fmt);
    vsnprintf(m->warnings[m->n_warnings++], KVP_TEXT_MAX, fmt, ap);
    va_end(ap);
}

static bool spec_equal(const struct kvp_layer_spec *a, const struct kvp_layer_spec *b)
{
    return a->kind == b->kind && a->mlp == b->mlp && a->n_heads == b->n_heads &&
           a->n_kv_heads == b->n_kv_heads && a->head_dim_k == b->head_dim_k &&
           a->head_dim_v == b->head_dim_v && a->window == b->window && a->shares == b->shares &&
           a->kv_lora_rank == b->kv_lora_rank && a->qk_rope_dim == b->qk_rope_dim &&
           a->q_lora_rank == b->q_lora_rank && memcmp(&a->rec, &b->rec, sizeof a->rec) == 0;
}

enum kvp_status kvp_model_add_layers(struct kvp_model *m, const struct kvp_layer_spec *s,
                                     uint32_t n, struct kvp_error *err)
{
    uint32_t i;
    struct kvp_layer_spec c = *s;

    /* zero fields that do not apply, so equal shapes compare equal */
    if (c.kind != KVP_LAYER_RECURRENT)
        memset(&c.rec, 0, sizeof c.rec);
    if (c.kind != KVP_LAYER_SHARED)
        c.shares = 0;
    if (c.kind != KVP_LAYER_SLIDING && c.kind != KVP_LAYER_CHUNKED)
        c.window = 0;
    if (c.kind != KVP_LAYER_MLA)
        c.kv_lora_rank = c.qk_rope_dim = c.q_lora_rank = 0;
    if (n > KVP_MAX_LAYERS - m->n_layers)
        return kvp_fail(err, KVP_ERR_RANGE, "more than %u layers", KVP_MAX_LAYERS);
    for (i = 0; i < m->n_specs; i++)
        if (spec_equal(&m->specs[i], &c))
            break;
    if (i == m->n_specs) {
        if (m->n_specs == KVP_MAX_SPECS)
            return kvp_fail(err, KVP_ERR_RANGE, "more than %u distinct layer shapes", KVP_MAX_SPECS);
        memset(&m->specs[i], 0, sizeof m->specs[i]);
        m->specs[i] = c;
        m->n_specs++;
    }
    for (uint32_t j = 0; j < n; j++)
        m->layer_spec[m->n_layers++] = (uint8_t)i;
    return KVP_OK;
}

const char *kvp_model_layer_summary(const struct kvp_model *m, char *buf, uint32_t n)
{
    uint32_t count[KVP_LAYER_KIND_COUNT] = {0};
    bool done[KVP_LAYER_KIND_COUNT] = {false};
    int o = snprintf(buf, n, "%u layers:", m->n_layers);

    for (uint32_t i = 0; i < m->n_layers; i++)
        count[kvp_model_layer(m, i)->kind]++;
    for (int first = 1;; first = 0) {
        int best = -1;
        for (int k = 0; k < KVP_LAYER_KIND_COUNT; k++)
            if (count[k] && !done[k] && (best < 0 || count[k] > count[best]))
                best = k;
        if (best < 0 || o < 0 || (uint32_t)o >= n)
            break;
        done[best] = true;
        o += snprintf(buf + o, n - (uint32_t)o, "%s %u %s", first ? "" : " +", count[best],
                      kvp_layer_kind_name((enum kvp_layer_kind)best));
    }
    return buf;
}

static bool is_attention(enum kvp_layer_kind k)
{
    return k == KVP_LAYER_FULL || k == KVP_LAYER_SLIDING || k == KVP_LAYER_CHUNKED ||
           k == KVP_LAYER_SHARED;
}

/* One bounded field of a layer: its name and value. */
struct bounded {
    const char *name;
    uint32_t v;
};

static enum kvp_status bounds_spec(uint32_t layer, const struct kvp_layer_spec *s, struct kvp_error *err)
{
    const struct kvp_recurrent *r = &s->rec;
    const struct bounded f[] = {
        {"heads", s->n_heads}, {"kv_heads", s->n_kv_heads}, {"head_dim_k", s->head_dim_k},
        {"head_dim_v", s->head_dim_v}, {"kv_lora_rank", s->kv_lora_rank}, {"qk_rope_dim", s->qk_rope_dim},
        {"q_lora_rank", s->q_lora_rank},
    };
    const struct bounded rf[] = {
        {"d_inner", r->d_inner}, {"d_state", r->d_state}, {"d_conv", r->d_conv}, {"dt_rank", r->dt_rank},
        {"n_groups", r->n_groups}, {"n_heads", r->n_heads}, {"n_k_heads", r->n_k_heads},
        {"k_head_dim", r->k_head_dim}, {"v_head_dim", r->v_head_dim},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v > KVP_MAX_DIM)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (%s): '%s' must be at most %u (got %u)", layer,
                            kvp_layer_kind_name(s->kind), f[i].name, KVP_MAX_DIM, f[i].v);
    for (size_t i = 0; s->kind == KVP_LAYER_RECURRENT && i < sizeof rf / sizeof rf[0]; i++)
        if (rf[i].v > KVP_MAX_DIM)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (recurrent %s): '%s' must be at most %u (got %u)", layer,
                            kvp_recurrent_kind_name(r->kind), rf[i].name, KVP_MAX_DIM, rf[i].v);
    return KVP_OK;
}

static enum kvp_status bounds_model(const struct kvp_model *m, struct kvp_error *err)
{
    const struct bounded f[] = {
        {"hidden", m->hidden}, {"intermediate", m->intermediate}, {"expert intermediate", m->expert_intermediate},
        {"shared_intermediate", m->shared_intermediate}, {"norms_per_layer", m->norms_per_layer},
        {"shared_experts", m->n_shared_experts},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v > KVP_MAX_DIM)
            return kvp_fail(err, KVP_ERR_RANGE, "'%s' must be at most %u (got %u)", f[i].name, KVP_MAX_DIM, f[i].v);
    if (m->vocab > KVP_MAX_VOCAB)
        return kvp_fail(err, KVP_ERR_RANGE, "'vocab' must be at most %u (got %u)", KVP_MAX_VOCAB, m->vocab);
    if (m->learned_positions > KVP_MAX_VOCAB)
        return kvp_fail(err, KVP_ERR_RANGE, "'learned_positions' must be at most %u (got %u)", KVP_MAX_VOCAB,
                        m->learned_positions);
    if (m->n_experts > KVP_MAX_EXPERTS)
        return kvp_fail(err, KVP_ERR_RANGE, "'experts' must be at most %u (got %u)", KVP_MAX_EXPERTS, m->n_experts);
    if (m->n_experts && (m->n_experts_active == 0 || m->n_experts_active > m->n_experts))
        return kvp_fail(err, KVP_ERR_RANGE, "'active' must be 1..'experts' (got %u and %u)", m->n_experts_active,
                        m->n_experts);
    return KVP_OK;
}

static enum kvp_status validate_spec(const struct kvp_model *m, uint32_t layer,
                                     const struct kvp_layer_spec *s, struct kvp_error *err)
{
    const char *kind = kvp_layer_kind_name(s->kind);
    enum kvp_status st;

    if ((st = bounds_spec(layer, s, err)) != KVP_OK)
        return st;

    if (is_attention(s->kind) || s->kind == KVP_LAYER_MLA) {
        if (s->n_heads == 0)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (%s): 'heads' must be positive", layer, kind);
        if (s->head_dim_k == 0 || s->head_dim_v == 0)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (%s): head dims must be positive (got %u and %u)",
                            layer, kind, s->head_dim_k, s->head_dim_v);
    }
    if (is_attention(s->kind)) {
        if (s->n_kv_heads == 0)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (%s): 'kv_heads' must be positive", layer, kind);
        if (s->n_heads % s->n_kv_heads != 0)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (%s): 'kv_heads' must divide 'heads' (got %u and %u)",
                            layer, kind, s->n_kv_heads, s->n_heads);
    }
    if ((s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED) && s->window == 0)
        return kvp_fail(err, KVP_ERR_RANGE, "layer %u (%s): 'window' must be positive (got 0)", layer, kind);
    if (s->kind == KVP_LAYER_MLA) {
        if (s->n_kv_heads != 1)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (mla): 'kv_heads' must be 1 (got %u)", layer, s->n_kv_heads);
        if (s->kv_lora_rank == 0)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (mla): 'kv_lora_rank' must be positive", layer);
        if (s->qk_rope_dim == 0 || s->qk_rope_dim > s->head_dim_k)
            return kvp_fail(err, KVP_ERR_RANGE,
                            "layer %u (mla): 'qk_rope_dim' must be 1..head_dim_k (got %u and %u)", layer,
                            s->qk_rope_dim, s->head_dim_k);
    }
    if (s->kind == KVP_LAYER_SHARED) {
        const struct kvp_layer_spec *t;
        if (s->shares >= layer)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (shared): 'shares' must name an earlier layer (got %u)",
                            layer, s->shares);
        t = kvp_model_layer(m, s->shares);
        if (t->kind != KVP_LAYER_FULL && t->kind != KVP_LAYER_SLIDING && t->kind != KVP_LAYER_CHUNKED)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (shared): layer %u it shares has no attention cache (%s)",
                            layer, s->shares, kvp_layer_kind_name(t->kind));
    }
    if (s->kind == KVP_LAYER_RECURRENT) {
        const struct kvp_recurrent *r = &s->rec;
        bool ok = r->d_conv > 0;
        switch (r->kind) {
        case KVP_REC_MAMBA: ok = ok && r->d_inner && r->d_state && r->dt_rank; break;
        case KVP_REC_MAMBA2: ok = ok && r->d_inner && r->d_state && r->n_groups && r->n_heads && r->v_head_dim; break;
        case KVP_REC_GDN: ok = ok && r->n_heads && r->n_k_heads && r->k_head_dim && r->v_head_dim; break;
        default: ok = false;
        }
        if (!ok)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u (recurrent %s): a state dimension is zero", layer,
                            kvp_recurrent_kind_name(r->kind));
    }
    if (s->mlp == KVP_MLP_DENSE && m->intermediate == 0)
        return kvp_fail(err, KVP_ERR_RANGE, "layer %u has a dense MLP but 'intermediate' is 0", layer);
    if (s->mlp == KVP_MLP_MOE && (m->n_experts == 0 || m->n_experts_active == 0 ||
                                  m->n_experts_active > m->n_experts || m->expert_intermediate == 0))
        return kvp_fail(err, KVP_ERR_RANGE,
                        "layer %u is MoE but the experts are not set (experts %u, active %u, intermediate %u)",
                        layer, m->n_experts, m->n_experts_active, m->expert_intermediate);
    return KVP_OK;
}

enum kvp_status kvp_model_validate(const struct kvp_model *m, struct kvp_error *err)
{
    enum kvp_status st;

    if (m->n_layers == 0)
        return kvp_fail(err, KVP_ERR_RANGE, "the model has no layers");
    if (m->hidden == 0)
        return kvp_fail(err, KVP_ERR_RANGE, "'hidden' must be positive");
    if (m->vocab == 0)
        return kvp_fail(err, KVP_ERR_RANGE, "'vocab' must be positive");
    if (m->max_context == 0)
        return kvp_fail(err, KVP_ERR_RANGE, "'max_context' must be positive");
    if ((st = bounds_model(m, err)) != KVP_OK)
        return st;
    for (uint32_t i = 0; i < m->n_layers; i++) {
        if (m->layer_spec[i] >= m->n_specs)
            return kvp_fail(err, KVP_ERR_RANGE, "layer %u refers to a missing layer shape", i);
        if ((st = validate_spec(m, i, kvp_model_layer(m, i), err)) != KVP_OK)
            return st;
    }
    return KVP_OK;
}
