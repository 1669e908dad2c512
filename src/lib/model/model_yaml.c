/* model_yaml.c -- kvplan YAML models: the parser and libyaml's emitter.
 * The schema is docs/model-format.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "kvplan/model.h"
#include "base/ydoc.h"

#define MAX_REPEAT_DEPTH 4

/* ---- parsing ----------------------------------------------------------- */

struct named_spec {
    char name[KVP_NAME_MAX];
    struct kvp_layer_spec spec;
};

struct yparse {
    struct ydoc d;
    struct kvp_model *m;
    struct kvp_error *err;
    uint32_t n_named;
    struct named_spec named[KVP_MAX_SPECS];
};

static enum kvp_status get_dtype(struct yparse *p, yaml_node_t *map, const char *key, enum kvp_dtype *out)
{
    char name[32];
    yaml_node_t *n = kvp_ydoc_get(&p->d, map, key);
    enum kvp_status st;

    if (!n)
        return KVP_OK;
    if ((st = kvp_ydoc_str(&p->d, n, key, name, sizeof name, p->err)) != KVP_OK)
        return st;
    if (!kvp_dtype_from_name(name, out))
        return kvp_ydoc_fail(&p->d, n, p->err, KVP_ERR_SCHEMA, "'%s': unknown dtype '%s'", key, name);
    return KVP_OK;
}

/* Read a string key whose value must be one of names[0..n). */
static enum kvp_status get_choice(struct yparse *p, yaml_node_t *map, const char *key,
                                  const char *const *names, int n, int *out)
{
    char v[32];
    yaml_node_t *node = kvp_ydoc_get(&p->d, map, key);
    enum kvp_status st;

    if (!node)
        return KVP_OK;
    if ((st = kvp_ydoc_str(&p->d, node, key, v, sizeof v, p->err)) != KVP_OK)
        return st;
    for (int i = 0; i < n; i++) {
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return KVP_OK;
        }
    }
    {
        char list[160] = "";
        for (int i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
        return kvp_ydoc_fail(&p->d, node, p->err, KVP_ERR_SCHEMA, "'%s': unknown value '%s' (%s)", key, v, list);
    }
}

static const char *const top_keys[] = {
    "kvplan", "name", "hf_id", "family", "source", "dtype", "state_dtype", "max_context",
    "hidden", "intermediate", "vocab", "tied_embeddings", "learned_positions", "norm", "act",
    "norms_per_layer", "qk_norm", "attn_qkv_bias", "attn_out_bias", "mlp_bias", "attn_sinks",
    "attn_gate", "quantization", "moe", "tower", "specs", "layers", NULL,
};

/* quantization: {method, format, modules}: how the published checkpoint
 * stores its weights (wquant.h): the classes in `modules` in `format`, the
 * rest in `dtype`. */
static enum kvp_status parse_quantization(struct yparse *p, yaml_node_t *q)
{
    static const char *const keys[] = {"method", "format", "modules", NULL};
    struct kvp_wscheme *sc = &p->m->wscheme;
    struct ydoc *d = &p->d;
    char fmt[96] = "";
    yaml_node_t *mods;
    enum kvp_status st;

    memset(sc, 0, sizeof *sc);
    if ((st = kvp_ydoc_want_map(d, q, "'quantization'", p->err)) || (st = kvp_ydoc_check_keys(d, q, keys, p->err)) ||
        (st = kvp_ydoc_get_str(d, q, "method", true, sc->method, sizeof sc->method, p->err)) ||
        (st = kvp_ydoc_get_str(d, q, "format", true, fmt, sizeof fmt, p->err)))
        return st;
    if (kvp_wq_parse(fmt, &sc->q, p->err) != KVP_OK)
        return kvp_ydoc_fail(d, kvp_ydoc_get(d, q, "format"), p->err, KVP_ERR_SCHEMA, "'format': %s", p->err->msg);
    mods = kvp_ydoc_get(d, q, "modules");
    if (!mods)
        return kvp_ydoc_fail(d, q, p->err, KVP_ERR_SCHEMA, "'quantization' needs 'modules' (attention, mlp, experts, "
                         "shared_experts, router, embeddings, lm_head)");
    if ((st = kvp_ydoc_want_seq(d, mods, "'modules'", p->err)) != KVP_OK)
        return st;
    for (yaml_node_item_t *it = mods->data.sequence.items.start; it < mods->data.sequence.items.top; it++) {
        yaml_node_t *n = kvp_ydoc_node(d, *it);
        const char *v = kvp_ydoc_scalar(n);
        enum kvp_wclass c;
        if (!v || !kvp_wclass_from_name(v, &c))
            return kvp_ydoc_fail(d, n, p->err, KVP_ERR_SCHEMA, "'modules': unknown module class '%s' (attention, mlp, "
                             "experts, shared_experts, router, embeddings, lm_head)", v ? v : "?");
        sc->classes |= 1u << c;
    }
    return KVP_OK;
}

static enum kvp_status parse_moe(struct yparse *p, yaml_node_t *moe)
{
    static const char *const keys[] = {
        "experts", "active", "intermediate", "shared_experts", "shared_intermediate",
        "shared_gate", "router_bias", "expert_bias", NULL,
    };
    struct ydoc *d = &p->d;
    struct kvp_model *m = p->m;
    enum kvp_status st;

    if ((st = kvp_ydoc_want_map(d, moe, "moe", p->err)) ||
        (st = kvp_ydoc_check_keys(d, moe, keys, p->err)) ||
        (st = kvp_ydoc_get_u32(d, moe, "experts", true, &m->n_experts, p->err)) ||
        (st = kvp_ydoc_get_u32(d, moe, "active", true, &m->n_experts_active, p->err)) ||
        (st = kvp_ydoc_get_u32(d, moe, "intermediate", true, &m->expert_intermediate, p->err)) ||
        (st = kvp_ydoc_get_u32(d, moe, "shared_experts", false, &m->n_shared_experts, p->err)))
        return st;
    m->shared_intermediate = m->expert_intermediate;
    if ((st = kvp_ydoc_get_u32(d, moe, "shared_intermediate", false, &m->shared_intermediate, p->err)) ||
        (st = kvp_ydoc_get_bool(d, moe, "shared_gate", false, &m->shared_expert_gate, p->err)) ||
        (st = kvp_ydoc_get_bool(d, moe, "router_bias", false, &m->router_bias, p->err)) ||
        (st = kvp_ydoc_get_bool(d, moe, "expert_bias", false, &m->expert_bias, p->err)))
        return st;
    if (m->n_experts == 0 || m->n_experts_active == 0 || m->n_experts_active > m->n_experts)
        return kvp_ydoc_fail(d, moe, p->err, KVP_ERR_RANGE, "'active' must be 1..'experts' (got %u and %u)",
                         m->n_experts_active, m->n_experts);
    return KVP_OK;
}

/* tower: {params, what}: a multimodal checkpoint's vision tower and
 * projector, stored beside the text model and loaded with it. */
static enum kvp_status parse_tower(struct yparse *p, yaml_node_t *n)
{
    static const char *const keys[] = {"params", "what", NULL};
    struct ydoc *d = &p->d;
    enum kvp_status st;

    if ((st = kvp_ydoc_want_map(d, n, "tower", p->err)) || (st = kvp_ydoc_check_keys(d, n, keys, p->err)) ||
        (st = kvp_ydoc_get_u64(d, n, "params", true, &p->m->tower_params, p->err)))
        return st;
    return kvp_ydoc_get_str(d, n, "what", false, p->m->tower, sizeof p->m->tower, p->err);
}

static enum kvp_status parse_recurrent(struct yparse *p, yaml_node_t *n, struct kvp_recurrent *r)
{
    static const char *const keys[] = {
        "kind", "d_inner", "d_state", "d_conv", "dt_rank", "n_groups", "n_heads", "n_k_heads",
        "k_head_dim", "v_head_dim", "bc_norms", NULL,
    };
    static const char *const kinds[] = {"mamba", "mamba2", "gdn"};
    struct ydoc *d = &p->d;
    int kind = -1;
    enum kvp_status st;

    if ((st = kvp_ydoc_want_map(d, n, "recurrent", p->err)) || (st = kvp_ydoc_check_keys(d, n, keys, p->err)) ||
        (st = get_choice(p, n, "kind", kinds, 3, &kind)))
        return st;
    if (kind < 0)
        return kvp_ydoc_fail(d, n, p->err, KVP_ERR_SCHEMA, "missing required key 'kind'");
    r->kind = (enum kvp_recurrent_kind)kind;
    if ((st = kvp_ydoc_get_u32(d, n, "d_inner", false, &r->d_inner, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "d_state", false, &r->d_state, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "d_conv", true, &r->d_conv, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "dt_rank", false, &r->dt_rank, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "n_groups", false, &r->n_groups, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "n_heads", false, &r->n_heads, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "n_k_heads", false, &r->n_k_heads, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "k_head_dim", false, &r->k_head_dim, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "v_head_dim", false, &r->v_head_dim, p->err)) ||
        (st = kvp_ydoc_get_bool(d, n, "bc_norms", false, &r->bc_norms, p->err)))
        return st;
    return KVP_OK;
}

static enum kvp_status parse_spec(struct yparse *p, yaml_node_t *n, const char *name,
                                  struct kvp_layer_spec *s)
{
    static const char *const keys[] = {
        "kind", "mlp", "heads", "kv_heads", "head_dim", "head_dim_k", "head_dim_v", "window",
        "shares", "kv_lora_rank", "qk_rope_dim", "q_lora_rank", "recurrent", NULL,
    };
    static const char *const kinds[] = {"full", "sliding", "chunked", "mla", "recurrent", "shared", "none"};
    static const char *const mlps[] = {"dense", "moe", "none"};
    struct ydoc *d = &p->d;
    int kind = KVP_LAYER_FULL, mlp = KVP_MLP_DENSE;
    uint32_t hd = 0;
    yaml_node_t *rec;
    enum kvp_status st;

    memset(s, 0, sizeof *s);
    if ((st = kvp_ydoc_want_map(d, n, name, p->err)) || (st = kvp_ydoc_check_keys(d, n, keys, p->err)) ||
        (st = get_choice(p, n, "kind", kinds, KVP_LAYER_KIND_COUNT, &kind)) ||
        (st = get_choice(p, n, "mlp", mlps, KVP_MLP_KIND_COUNT, &mlp)) ||
        (st = kvp_ydoc_get_u32(d, n, "heads", false, &s->n_heads, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "head_dim", false, &hd, p->err)))
        return st;
    s->kind = (enum kvp_layer_kind)kind;
    s->mlp = (enum kvp_mlp_kind)mlp;
    s->n_kv_heads = s->kind == KVP_LAYER_MLA ? 1 : s->n_heads;
    s->head_dim_k = s->head_dim_v = hd;
    if ((st = kvp_ydoc_get_u32(d, n, "kv_heads", false, &s->n_kv_heads, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "head_dim_k", false, &s->head_dim_k, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "head_dim_v", false, &s->head_dim_v, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "window", s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED,
                           &s->window, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "shares", s->kind == KVP_LAYER_SHARED, &s->shares, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "kv_lora_rank", s->kind == KVP_LAYER_MLA, &s->kv_lora_rank, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "qk_rope_dim", s->kind == KVP_LAYER_MLA, &s->qk_rope_dim, p->err)) ||
        (st = kvp_ydoc_get_u32(d, n, "q_lora_rank", false, &s->q_lora_rank, p->err)))
        return st;
    rec = kvp_ydoc_get(d, n, "recurrent");
    if (s->kind == KVP_LAYER_RECURRENT && !rec)
        return kvp_ydoc_fail(d, n, p->err, KVP_ERR_SCHEMA, "spec '%s' of kind recurrent needs a 'recurrent' mapping",
                             name);
    if (rec && (st = parse_recurrent(p, rec, &s->rec)) != KVP_OK)
        return st;
    return KVP_OK;
}

static enum kvp_status parse_specs(struct yparse *p, yaml_node_t *specs)
{
    struct ydoc *d = &p->d;
    enum kvp_status st;

    if ((st = kvp_ydoc_want_map(d, specs, "specs", p->err)) != KVP_OK)
        return st;
    for (yaml_node_pair_t *pr = specs->data.mapping.pairs.start; pr < specs->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = kvp_ydoc_node(d, pr->key);
        struct named_spec *ns;
        if (p->n_named == KVP_MAX_SPECS)
            return kvp_ydoc_fail(d, k, p->err, KVP_ERR_RANGE, "more than %u specs", KVP_MAX_SPECS);
        ns = &p->named[p->n_named++];
        if ((st = kvp_ydoc_str(d, k, "spec name", ns->name, sizeof ns->name, p->err)) ||
            (st = parse_spec(p, kvp_ydoc_node(d, pr->value), ns->name, &ns->spec)))
            return st;
    }
    return KVP_OK;
}

static enum kvp_status parse_stack(struct yparse *p, yaml_node_t *seq, int depth);

static enum kvp_status parse_item(struct yparse *p, yaml_node_t *it, int depth)
{
    static const char *const keys[] = {"spec", "count", "repeat", "layers", NULL};
    struct ydoc *d = &p->d;
    yaml_node_t *spec, *rep;
    enum kvp_status st;

    if ((st = kvp_ydoc_want_map(d, it, "layers item", p->err)) || (st = kvp_ydoc_check_keys(d, it, keys, p->err)))
        return st;
    spec = kvp_ydoc_get(d, it, "spec");
    rep = kvp_ydoc_get(d, it, "repeat");
    if (!spec == !rep)
        return kvp_ydoc_fail(d, it, p->err, KVP_ERR_SCHEMA, "a layers item needs either 'spec' or 'repeat'");
    if (spec) {
        char name[KVP_NAME_MAX];
        uint32_t count = 1, i;
        if ((st = kvp_ydoc_str(d, spec, "spec", name, sizeof name, p->err)) ||
            (st = kvp_ydoc_get_u32(d, it, "count", false, &count, p->err)))
            return st;
        for (i = 0; i < p->n_named && strcmp(p->named[i].name, name) != 0; i++)
            ;
        if (i == p->n_named)
            return kvp_ydoc_fail(d, spec, p->err, KVP_ERR_SCHEMA, "unknown spec '%s'", name);
        if (count == 0)
            return kvp_ydoc_fail(d, kvp_ydoc_get(d, it, "count"), p->err, KVP_ERR_RANGE, "'count' must be positive");
        if (count > KVP_MAX_LAYERS - p->m->n_layers)
            return kvp_ydoc_fail(d, it, p->err, KVP_ERR_RANGE,
                                 "the stack has more than %u layers (%llu with this item)", KVP_MAX_LAYERS,
                                 (unsigned long long)p->m->n_layers + count);
        if ((st = kvp_model_add_layers(p->m, &p->named[i].spec, count, p->err)) != KVP_OK)
            return kvp_ydoc_fail(d, it, p->err, st, "%s", p->err->msg);
        return KVP_OK;
    }
    {
        uint32_t times;
        yaml_node_t *inner = kvp_ydoc_get(d, it, "layers");
        if ((st = kvp_ydoc_u32(d, rep, "repeat", &times, p->err)) != KVP_OK)
            return st;
        if (!inner)
            return kvp_ydoc_fail(d, it, p->err, KVP_ERR_SCHEMA, "missing required key 'layers'");
        if (depth >= MAX_REPEAT_DEPTH)
            return kvp_ydoc_fail(d, it, p->err, KVP_ERR_RANGE, "'repeat' nested deeper than %d", MAX_REPEAT_DEPTH);
        if (times == 0 || times > KVP_MAX_LAYERS)
            return kvp_ydoc_fail(d, rep, p->err, KVP_ERR_RANGE, "'repeat' must be 1..%u (got %u)", KVP_MAX_LAYERS,
                                 times);
        if (inner->type == YAML_SEQUENCE_NODE && inner->data.sequence.items.start == inner->data.sequence.items.top)
            return kvp_ydoc_fail(d, inner, p->err, KVP_ERR_SCHEMA, "'layers' of a 'repeat' must not be empty");
        for (uint32_t t = 0; t < times; t++)
            if ((st = parse_stack(p, inner, depth + 1)) != KVP_OK)
                return st;
    }
    return KVP_OK;
}

static enum kvp_status parse_stack(struct yparse *p, yaml_node_t *seq, int depth)
{
    enum kvp_status st;
    if ((st = kvp_ydoc_want_seq(&p->d, seq, "layers", p->err)) != KVP_OK)
        return st;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++)
        if ((st = parse_item(p, kvp_ydoc_node(&p->d, *it), depth)) != KVP_OK)
            return st;
    return KVP_OK;
}

static bool valid_id(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '.' || *s == '-' || *s == '_'))
            return false;
    return true;
}

static enum kvp_status parse_top(struct yparse *p, yaml_node_t *root)
{
    static const char *const norms[] = {"rms", "layer"};
    static const char *const acts[] = {"gated", "plain"};
    struct ydoc *d = &p->d;
    struct kvp_model *m = p->m;
    uint32_t version = 0;
    int norm = KVP_NORM_RMS, act = KVP_ACT_GATED;
    yaml_node_t *n;
    enum kvp_status st;

    if ((st = kvp_ydoc_want_schema(d, root, "kvplan", "model", &version, p->err)) ||
        (st = kvp_ydoc_check_keys(d, root, top_keys, p->err)))
        return st;
    if (version != 1)
        return kvp_ydoc_fail(d, kvp_ydoc_get(d, root, "kvplan"), p->err, KVP_ERR_UNSUPPORTED,
                         "'kvplan' schema version %u is not supported (this kvplan reads 1)", version);
    if ((st = kvp_ydoc_get_str(d, root, "name", true, m->name, sizeof m->name, p->err)) ||
        (st = kvp_ydoc_get_str(d, root, "hf_id", false, m->hf_id, sizeof m->hf_id, p->err)) ||
        (st = kvp_ydoc_get_str(d, root, "family", false, m->family, sizeof m->family, p->err)) ||
        (st = kvp_ydoc_get_str(d, root, "source", false, m->source, sizeof m->source, p->err)) ||
        (st = get_dtype(p, root, "dtype", &m->dtype)))
        return st;
    if (!valid_id(m->name))
        return kvp_ydoc_fail(d, kvp_ydoc_get(d, root, "name"), p->err, KVP_ERR_SCHEMA,
                         "'name' must be lower-case letters, digits, '.', '-' or '_' (got '%s')", m->name);
    m->state_dtype = m->dtype;
    if ((st = get_dtype(p, root, "state_dtype", &m->state_dtype)) ||
        (st = kvp_ydoc_get_u64(d, root, "max_context", true, &m->max_context, p->err)) ||
        (st = kvp_ydoc_get_u32(d, root, "hidden", true, &m->hidden, p->err)) ||
        (st = kvp_ydoc_get_u32(d, root, "intermediate", false, &m->intermediate, p->err)) ||
        (st = kvp_ydoc_get_u32(d, root, "vocab", true, &m->vocab, p->err)) ||
        (st = kvp_ydoc_get_bool(d, root, "tied_embeddings", false, &m->tied_embeddings, p->err)) ||
        (st = kvp_ydoc_get_u32(d, root, "learned_positions", false, &m->learned_positions, p->err)) ||
        (st = get_choice(p, root, "norm", norms, 2, &norm)) ||
        (st = get_choice(p, root, "act", acts, 2, &act)) ||
        (st = kvp_ydoc_get_u32(d, root, "norms_per_layer", false, &m->norms_per_layer, p->err)) ||
        (st = kvp_ydoc_get_bool(d, root, "qk_norm", false, &m->qk_norm, p->err)) ||
        (st = kvp_ydoc_get_bool(d, root, "attn_qkv_bias", false, &m->attn_qkv_bias, p->err)) ||
        (st = kvp_ydoc_get_bool(d, root, "attn_out_bias", false, &m->attn_out_bias, p->err)) ||
        (st = kvp_ydoc_get_bool(d, root, "mlp_bias", false, &m->mlp_bias, p->err)) ||
        (st = kvp_ydoc_get_bool(d, root, "attn_sinks", false, &m->attn_sinks, p->err)) ||
        (st = kvp_ydoc_get_bool(d, root, "attn_gate", false, &m->attn_gate, p->err)))
        return st;
    {
        static const char *const positive[] = {"max_context", "hidden", "vocab"};
        for (int i = 0; i < 3; i++) {
            yaml_node_t *v = kvp_ydoc_get(d, root, positive[i]);
            if (v && strcmp(kvp_ydoc_scalar(v) ? kvp_ydoc_scalar(v) : "", "0") == 0)
                return kvp_ydoc_fail(d, v, p->err, KVP_ERR_RANGE, "'%s' must be positive", positive[i]);
        }
    }
    m->norm = (enum kvp_norm_kind)norm;
    m->act = (enum kvp_act_kind)act;
    if ((n = kvp_ydoc_get(d, root, "moe")) && (st = parse_moe(p, n)) != KVP_OK)
        return st;
    if ((n = kvp_ydoc_get(d, root, "tower")) && (st = parse_tower(p, n)) != KVP_OK)
        return st;
    if ((n = kvp_ydoc_get(d, root, "quantization")) && (st = parse_quantization(p, n)) != KVP_OK)
        return st;
    if (!(n = kvp_ydoc_get(d, root, "specs")))
        return kvp_ydoc_fail(d, root, p->err, KVP_ERR_SCHEMA, "missing required key 'specs'");
    if ((st = parse_specs(p, n)) != KVP_OK)
        return st;
    if (!(n = kvp_ydoc_get(d, root, "layers")))
        return kvp_ydoc_fail(d, root, p->err, KVP_ERR_SCHEMA, "missing required key 'layers'");
    if ((st = parse_stack(p, n, 0)) != KVP_OK)
        return st;
    if ((st = kvp_model_validate(m, p->err)) != KVP_OK)
        return kvp_ydoc_fail(d, n, p->err, st, "%s", p->err->msg);
    return KVP_OK;
}

enum kvp_status kvp_model_parse_yaml(const char *text, uint64_t len, const char *file,
                                     struct kvp_model *m, struct kvp_error *err)
{
    struct yparse *p = calloc(1, sizeof *p);
    enum kvp_status st;

    if (!p)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory parsing '%s'", file);
    p->m = m;
    p->err = err;
    st = kvp_ydoc_load(&p->d, text, len, file, err);
    if (st == KVP_OK)
        st = parse_top(p, kvp_ydoc_root(&p->d));
    kvp_ydoc_release(&p->d);
    free(p);
    return st;
}

/* ---- emitting ---------------------------------------------------------- */

struct out {
    char *buf;
    size_t len, cap;
    bool nomem;
};

static int write_out(void *data, unsigned char *bytes, size_t size)
{
    struct out *o = data;
    if (o->len + size + 1 > o->cap) {
        size_t cap = (o->cap ? o->cap * 2 : 4096) + size;
        char *nb = realloc(o->buf, cap);
        if (!nb) {
            o->nomem = true;
            return 0;
        }
        o->buf = nb;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, bytes, size);
    o->len += size;
    o->buf[o->len] = '\0';
    return 1;
}

struct emit {
    yaml_emitter_t e;
    bool ok;
};

static void ev(struct emit *em, yaml_event_t *event)
{
    if (em->ok && !yaml_emitter_emit(&em->e, event))
        em->ok = false;
}

static void scalar(struct emit *em, const char *v, bool quoted)
{
    yaml_event_t event;
    yaml_scalar_event_initialize(&event, NULL, NULL, (yaml_char_t *)v, (int)strlen(v), 1, 1,
                                 quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE);
    ev(em, &event);
}

static void map_start(struct emit *em, bool flow)
{
    yaml_event_t event;
    yaml_mapping_start_event_initialize(&event, NULL, NULL, 1,
                                        flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
    ev(em, &event);
}

static void map_end(struct emit *em)
{
    yaml_event_t event;
    yaml_mapping_end_event_initialize(&event);
    ev(em, &event);
}

static void seq_start(struct emit *em)
{
    yaml_event_t event;
    yaml_sequence_start_event_initialize(&event, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
    ev(em, &event);
}

static void seq_end(struct emit *em)
{
    yaml_event_t event;
    yaml_sequence_end_event_initialize(&event);
    ev(em, &event);
}

static void kv_str(struct emit *em, const char *k, const char *v)
{
    scalar(em, k, false);
    scalar(em, v, strchr(v, ':') || strchr(v, '#') || *v == '\0');
}

static void kv_u64(struct emit *em, const char *k, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    scalar(em, k, false);
    scalar(em, b, false);
}

static void kv_bool(struct emit *em, const char *k, bool v)
{
    scalar(em, k, false);
    scalar(em, v ? "true" : "false", false);
}

/* Spec names: the kind, "-moe"/"-nomlp" when the MLP is not dense, and a
 * number when two specs would share a name. */
static void spec_name(const struct kvp_model *m, uint32_t i, char *buf, size_t n)
{
    const struct kvp_layer_spec *s = &m->specs[i];
    uint32_t same = 0;
    for (uint32_t j = 0; j < i; j++)
        if (m->specs[j].kind == s->kind && m->specs[j].mlp == s->mlp)
            same++;
    snprintf(buf, n, "%s%s", kvp_layer_kind_name(s->kind),
             s->mlp == KVP_MLP_MOE ? "-moe" : s->mlp == KVP_MLP_NONE ? "-nomlp" : "");
    if (same)
        snprintf(buf + strlen(buf), n - strlen(buf), "-%u", same + 1);
}

static void emit_recurrent(struct emit *em, const struct kvp_recurrent *r)
{
    scalar(em, "recurrent", false);
    map_start(em, false);
    kv_str(em, "kind", kvp_recurrent_kind_name(r->kind));
    if (r->d_inner) kv_u64(em, "d_inner", r->d_inner);
    if (r->d_state) kv_u64(em, "d_state", r->d_state);
    kv_u64(em, "d_conv", r->d_conv);
    if (r->dt_rank) kv_u64(em, "dt_rank", r->dt_rank);
    if (r->n_groups) kv_u64(em, "n_groups", r->n_groups);
    if (r->n_heads) kv_u64(em, "n_heads", r->n_heads);
    if (r->n_k_heads) kv_u64(em, "n_k_heads", r->n_k_heads);
    if (r->k_head_dim) kv_u64(em, "k_head_dim", r->k_head_dim);
    if (r->v_head_dim) kv_u64(em, "v_head_dim", r->v_head_dim);
    if (r->bc_norms) kv_bool(em, "bc_norms", true);
    map_end(em);
}

static void emit_spec(struct emit *em, const struct kvp_layer_spec *s)
{
    map_start(em, false);
    kv_str(em, "kind", kvp_layer_kind_name(s->kind));
    if (s->mlp != KVP_MLP_DENSE)
        kv_str(em, "mlp", kvp_mlp_kind_name(s->mlp));
    if (s->n_heads)
        kv_u64(em, "heads", s->n_heads);
    if (s->kind != KVP_LAYER_MLA && s->kind != KVP_LAYER_RECURRENT && s->kind != KVP_LAYER_NONE)
        kv_u64(em, "kv_heads", s->n_kv_heads);
    if (s->head_dim_k == s->head_dim_v && s->head_dim_k) {
        kv_u64(em, "head_dim", s->head_dim_k);
    } else if (s->head_dim_k || s->head_dim_v) {
        kv_u64(em, "head_dim_k", s->head_dim_k);
        kv_u64(em, "head_dim_v", s->head_dim_v);
    }
    if (s->window) kv_u64(em, "window", s->window);
    if (s->kind == KVP_LAYER_SHARED) kv_u64(em, "shares", s->shares);
    if (s->kind == KVP_LAYER_MLA) {
        kv_u64(em, "kv_lora_rank", s->kv_lora_rank);
        kv_u64(em, "qk_rope_dim", s->qk_rope_dim);
        if (s->q_lora_rank) kv_u64(em, "q_lora_rank", s->q_lora_rank);
    }
    if (s->kind == KVP_LAYER_RECURRENT)
        emit_recurrent(em, &s->rec);
    map_end(em);
}

struct run {
    uint8_t spec;
    uint32_t count;
};

static void emit_runs(struct emit *em, const struct kvp_model *m, const struct run *r, uint32_t n)
{
    char name[KVP_NAME_MAX];
    for (uint32_t i = 0; i < n; i++) {
        map_start(em, true);
        spec_name(m, r[i].spec, name, sizeof name);
        kv_str(em, "spec", name);
        kv_u64(em, "count", r[i].count);
        map_end(em);
    }
}

/* How many times runs[0..p) repeats back to back at the start of runs[0..n). */
static uint32_t repeats(const struct run *r, uint32_t n, uint32_t p)
{
    uint32_t k = 1;
    while ((k + 1) * p <= n && memcmp(r, r + k * p, p * sizeof *r) == 0)
        k++;
    return k;
}

/* Emit the run list, folding the longest back-to-back repetition at each
 * point into a `repeat` item. */
static void emit_stack(struct emit *em, const struct kvp_model *m, const struct run *r, uint32_t n)
{
    uint32_t i = 0;
    while (i < n) {
        uint32_t best_p = 0, best_k = 1;
        for (uint32_t p = 1; p <= (n - i) / 2; p++) {
            uint32_t k = repeats(r + i, n - i, p);
            if (k >= 2 && p * k > best_p * best_k) {
                best_p = p;
                best_k = k;
            }
        }
        if (best_p == 0) {
            emit_runs(em, m, r + i, 1);
            i++;
            continue;
        }
        map_start(em, false);
        kv_u64(em, "repeat", best_k);
        scalar(em, "layers", false);
        seq_start(em);
        emit_runs(em, m, r + i, best_p);
        seq_end(em);
        map_end(em);
        i += best_p * best_k;
    }
}

static void emit_model(struct emit *em, const struct kvp_model *m, struct run *runs)
{
    uint32_t nruns = 0;
    char name[KVP_NAME_MAX];

    map_start(em, false);
    kv_u64(em, "kvplan", 1);
    kv_str(em, "name", m->name);
    if (m->hf_id[0]) kv_str(em, "hf_id", m->hf_id);
    if (m->family[0]) kv_str(em, "family", m->family);
    if (m->source[0]) kv_str(em, "source", m->source);
    kv_str(em, "dtype", kvp_dtype_info(m->dtype)->name);
    if (m->state_dtype != m->dtype) kv_str(em, "state_dtype", kvp_dtype_info(m->state_dtype)->name);
    kv_u64(em, "max_context", m->max_context);
    kv_u64(em, "hidden", m->hidden);
    kv_u64(em, "intermediate", m->intermediate);
    kv_u64(em, "vocab", m->vocab);
    kv_bool(em, "tied_embeddings", m->tied_embeddings);
    if (m->learned_positions) kv_u64(em, "learned_positions", m->learned_positions);
    kv_str(em, "norm", m->norm == KVP_NORM_RMS ? "rms" : "layer");
    kv_str(em, "act", m->act == KVP_ACT_GATED ? "gated" : "plain");
    kv_u64(em, "norms_per_layer", m->norms_per_layer);
    kv_bool(em, "qk_norm", m->qk_norm);
    kv_bool(em, "attn_qkv_bias", m->attn_qkv_bias);
    kv_bool(em, "attn_out_bias", m->attn_out_bias);
    kv_bool(em, "mlp_bias", m->mlp_bias);
    kv_bool(em, "attn_sinks", m->attn_sinks);
    if (m->attn_gate) kv_bool(em, "attn_gate", true);
    if (m->wscheme.method[0]) {
        char fmt[96];
        scalar(em, "quantization", false);
        map_start(em, false);
        kv_str(em, "method", m->wscheme.method);
        kv_str(em, "format", kvp_wq_name(&m->wscheme.q, fmt, sizeof fmt));
        scalar(em, "modules", false);
        seq_start(em);
        for (int c = 0; c < KVP_WC_VECTOR; c++)
            if ((m->wscheme.classes >> c) & 1)
                scalar(em, kvp_wclass_name((enum kvp_wclass)c), false);
        seq_end(em);
        map_end(em);
    }
    if (m->n_experts) {
        scalar(em, "moe", false);
        map_start(em, false);
        kv_u64(em, "experts", m->n_experts);
        kv_u64(em, "active", m->n_experts_active);
        kv_u64(em, "intermediate", m->expert_intermediate);
        kv_u64(em, "shared_experts", m->n_shared_experts);
        kv_u64(em, "shared_intermediate", m->shared_intermediate);
        kv_bool(em, "shared_gate", m->shared_expert_gate);
        kv_bool(em, "router_bias", m->router_bias);
        kv_bool(em, "expert_bias", m->expert_bias);
        map_end(em);
    }
    if (m->tower_params) {
        scalar(em, "tower", false);
        map_start(em, false);
        kv_u64(em, "params", m->tower_params);
        if (m->tower[0]) kv_str(em, "what", m->tower);
        map_end(em);
    }
    scalar(em, "specs", false);
    map_start(em, false);
    for (uint32_t i = 0; i < m->n_specs; i++) {
        spec_name(m, i, name, sizeof name);
        scalar(em, name, false);
        emit_spec(em, &m->specs[i]);
    }
    map_end(em);
    for (uint32_t i = 0; i < m->n_layers; i++) {
        if (nruns && runs[nruns - 1].spec == m->layer_spec[i]) {
            runs[nruns - 1].count++;
        } else {
            runs[nruns].spec = m->layer_spec[i];
            runs[nruns++].count = 1;
        }
    }
    scalar(em, "layers", false);
    seq_start(em);
    emit_stack(em, m, runs, nruns);
    seq_end(em);
    map_end(em);
}

enum kvp_status kvp_model_emit_yaml(const struct kvp_model *m, char **out, struct kvp_error *err)
{
    struct emit em = {.ok = true};
    struct out o = {0};
    struct run *runs = calloc(KVP_MAX_LAYERS, sizeof *runs);
    yaml_event_t event;

    if (!runs || !yaml_emitter_initialize(&em.e)) {
        free(runs);
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory emitting '%s'", m->name);
    }
    yaml_emitter_set_output(&em.e, write_out, &o);
    yaml_emitter_set_width(&em.e, 100);
    yaml_emitter_set_unicode(&em.e, 1);
    yaml_stream_start_event_initialize(&event, YAML_UTF8_ENCODING);
    ev(&em, &event);
    yaml_document_start_event_initialize(&event, NULL, NULL, NULL, 1);
    ev(&em, &event);
    emit_model(&em, m, runs);
    yaml_document_end_event_initialize(&event, 1);
    ev(&em, &event);
    yaml_stream_end_event_initialize(&event);
    ev(&em, &event);
    yaml_emitter_delete(&em.e);
    free(runs);
    if (!em.ok || o.nomem || !o.buf) {
        free(o.buf);
        return kvp_fail(err, o.nomem ? KVP_ERR_NOMEM : KVP_ERR_IO, "could not emit YAML for '%s'", m->name);
    }
    *out = o.buf;
    return KVP_OK;
}
