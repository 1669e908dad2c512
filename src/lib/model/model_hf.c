/* model_hf.c -- Hugging Face config.json importer.
 *
 * config.json is YAML flow syntax, so ydoc loads it and every error carries
 * file:line:col. The importer reads the text model -- the config itself, or
 * its nested `text_config` in multimodal configs -- in steps (see `steps`):
 *
 *   1. the model_type and its conventions (the `families` table: tied
 *      embeddings, norms, biases, defaults of keys real configs leave out);
 *   2. identity: name, hf_id, family, source, dtype, max_context;
 *   3. dimensions and weight flags, each from the generic key or one of its
 *      aliases (GPT-2 `n_layer`, Falcon `n_head_kv`, ...);
 *   4. the kind of each layer (MLA, `layer_types`, Jamba periods, Qwen3-Next
 *      interval, Llama 4 chunks, Gemma window patterns, Mistral/Qwen windows);
 *   5. the MLP of each layer (dense or MoE) and the MoE fields;
 *   6. the stack, one kvp_model_add_layers call per layer;
 *   7. beside it, a multimodal config's vision tower (hf_tower.c).
 *
 * The layer and MoE rules are driven by which keys are present, as in
 * transformers, so a model_type missing from the table still imports; it then
 * reads the generic fields and says so in a warning. Whatever the importer
 * assumes (a default dtype, a model_type default, a quantization it cannot apply)
 * becomes a warning on the model, never a silent guess.
 */
#define _XOPEN_SOURCE 700 /* realpath: a config.json is named by its folder */
#include "kvplan/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/num.h"
#include "hf_quant.h"
#include "hf_tower.h"
#include "base/ydoc.h"

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

struct hf;

/* ---- per-model_type conventions ------------------------------------------ */

/* The value transformers' config class gives a key a config.json leaves out
 * (booleans are 0 or 1). Only keys real configs omit are listed. */
struct hf_default {
    const char *key;
    uint64_t value;
};

enum hf_positions {
    POS_NONE,  /* RoPE or ALiBi: no position table */
    POS_OPT,   /* learned, max_position_embeddings + 2 rows (OPT's offset) */
    POS_TABLE, /* learned, n_positions rows (GPT-2) */
};

struct hf_family {
    const char *type;          /* model_type */
    bool tied;                 /* tie_word_embeddings when the config omits it */
    enum kvp_norm_kind norm;
    enum kvp_act_kind act;
    uint8_t norms;             /* hidden-sized norms per layer; 0 means 2 */
    bool qk_norm;              /* per-head q/k RMS norms with weights */
    bool qkv_bias, out_bias, mlp_bias;
    const char *bias_key;      /* one boolean key that sets all three biases */
    bool attn_sinks, attn_gate;
    bool router_bias, expert_bias;
    uint8_t shared_experts;    /* always-on experts, expert-wide, when no key says */
    bool bc_norms;             /* Mamba layers norm dt, B and C (Jamba) */
    bool ffn_4x;               /* the MLP width defaults to 4 x hidden */
    uint8_t pattern;           /* sliding_window_pattern default; 0 = none */
    enum hf_positions pos;
    enum kvp_status (*fixup)(struct hf *h); /* what a table row cannot say */
    const struct hf_default *defaults;      /* NULL-terminated, at most 32 */
};

static enum kvp_status falcon_fixup(struct hf *h);
static enum kvp_status opt_fixup(struct hf *h);

/* Gemma3TextConfig: the text_config of gemma-3-4b-it sets only four keys. */
static const struct hf_default gemma3_defaults[] = {
    {"vocab_size", 262208}, {"max_position_embeddings", 131072}, {"num_attention_heads", 8},
    {"num_key_value_heads", 4}, {"head_dim", 256}, {"sliding_window", 4096}, {NULL, 0},
};
/* FalconConfig: multi_query and parallel_attn default to true. */
static const struct hf_default falcon_defaults[] = {
    {"max_position_embeddings", 2048}, {"multi_query", 1}, {"parallel_attn", 1}, {NULL, 0},
};
/* Qwen2Config and its descendants: the window is off unless switched on. */
static const struct hf_default qwen_defaults[] = {
    {"use_sliding_window", 0}, {"max_window_layers", 28}, {NULL, 0},
};
/* JambaConfig. */
static const struct hf_default jamba_defaults[] = {
    {"attn_layer_period", 8}, {"attn_layer_offset", 4}, {"expert_layer_period", 2},
    {"expert_layer_offset", 1}, {"num_experts", 16}, {"num_experts_per_tok", 2},
    {"mamba_d_state", 16}, {"mamba_d_conv", 4}, {"mamba_expand", 2}, {NULL, 0},
};
/* Llama4TextConfig: RoPE layers attend within chunks, every 4th layer is NoPE and global. */
static const struct hf_default llama4_defaults[] = {
    {"attention_chunk_size", 8192}, {"no_rope_layer_interval", 4}, {NULL, 0},
};
/* Qwen3NextConfig. */
static const struct hf_default qwen3_next_defaults[] = {
    {"full_attention_interval", 4}, {"use_sliding_window", 0}, {NULL, 0},
};

#define GEMMA3 .tied = true, .norms = 4, .qk_norm = true, .pattern = 6, .defaults = gemma3_defaults
#define FALCON .tied = true, .norm = KVP_NORM_LAYER, .act = KVP_ACT_PLAIN, .bias_key = "bias", \
               .ffn_4x = true, .fixup = falcon_fixup, .defaults = falcon_defaults
#define LLAMA4 .shared_experts = 1, .defaults = llama4_defaults

static const struct hf_family families[] = {
    {.type = "llama"},
    {.type = "mistral"},
    {.type = "mixtral"},
    /* Phi-3's sliding_window (2047 in mini-4k) is really applied: Phi3Attention passes
     * config.sliding_window to the attention function and the Mistral-style model masks
     * with it, so every layer slides, as for Mistral. */
    {.type = "phi3"},
    {.type = "qwen2", .qkv_bias = true, .defaults = qwen_defaults}, /* q, k, v biases; no o bias */
    {.type = "qwen2_moe", .qkv_bias = true, .defaults = qwen_defaults},
    /* Qwen2-VL, Qwen2.5-VL: Qwen2's text model (M-RoPE changes no shape); the vision tower in hf_tower.c */
    {.type = "qwen2_vl", .qkv_bias = true, .defaults = qwen_defaults},
    {.type = "qwen2_vl_text", .qkv_bias = true, .defaults = qwen_defaults},
    {.type = "qwen2_5_vl", .qkv_bias = true, .defaults = qwen_defaults},
    {.type = "qwen2_5_vl_text", .qkv_bias = true, .defaults = qwen_defaults},
    {.type = "qwen3", .qk_norm = true, .defaults = qwen_defaults},
    {.type = "qwen3_moe", .qk_norm = true, .defaults = qwen_defaults},
    {.type = "qwen3_next", .qk_norm = true, .attn_gate = true, .defaults = qwen3_next_defaults},
    {.type = "gemma", .tied = true},
    {.type = "gemma2", .tied = true, .norms = 4, .pattern = 2}, /* layer i slides when i is even */
    {.type = "gemma3", GEMMA3},
    {.type = "gemma3_text", GEMMA3},
    {.type = "llama4", LLAMA4},
    {.type = "llama4_text", LLAMA4},
    /* MLA comes from kv_lora_rank, MoE from n_routed_experts, the router bias from topk_method */
    {.type = "deepseek_v2"},
    {.type = "deepseek_v3"},
    {.type = "kimi_k2"},
    {.type = "jamba", .bc_norms = true, .defaults = jamba_defaults},
    {.type = "gpt_oss", .attn_sinks = true, .router_bias = true, .expert_bias = true},
    {.type = "falcon", FALCON},
    {.type = "RefinedWebModel", FALCON}, /* Falcon-7B's first config.json */
    {.type = "RefinedWeb", FALCON},      /* Falcon-40B's first config.json */
    {.type = "opt", .tied = true, .norm = KVP_NORM_LAYER, .act = KVP_ACT_PLAIN, .qkv_bias = true,
     .out_bias = true, .mlp_bias = true, .bias_key = "enable_bias", .pos = POS_OPT, .fixup = opt_fixup},
    {.type = "gpt2", .tied = true, .norm = KVP_NORM_LAYER, .act = KVP_ACT_PLAIN, .qkv_bias = true,
     .out_bias = true, .mlp_bias = true, .ffn_4x = true, .pos = POS_TABLE},
};

/* An unknown model_type: the generic fields, Llama conventions. */
static const struct hf_family generic_family = {.type = NULL};

/* ---- parse state ---------------------------------------------------------- */

/* Where a value came from, for errors that name it. */
struct hf_at {
    const char *key;   /* the key read, the default's key, or keys[0] when absent */
    yaml_node_t *node; /* its key node, or the mapping that lacks it */
    bool set;          /* the config or the family default gave a value */
};

struct hf {
    struct ydoc d;
    yaml_node_t *root;            /* the whole config */
    yaml_node_t *cfg;             /* the text model: root, or root's text_config */
    char type[KVP_NAME_MAX];      /* model_type of the text model */
    const struct hf_family *fam;
    uint32_t defaults_used;       /* bit i: fam->defaults[i] stood in for a key */
    struct kvp_model *m;
    struct kvp_error *err;
    struct kvp_layer_spec attn;   /* the attention (or MLA) shape every such layer shares */
    struct hf_at hidden_at;       /* where hidden_size came from */
    struct hf_at heads_at, kv_at; /* where the head counts came from */
    uint32_t window;              /* sliding layers: window, tokens */
    uint32_t chunk;               /* chunked layers: chunk, tokens */
    struct kvp_recurrent rec;     /* the recurrent layers' mixer */
    bool has_rec;
    enum kvp_recurrent_kind rec_asked; /* GDN or MAMBA (which read_mamba may make MAMBA2) */
    enum kvp_layer_kind kind[KVP_MAX_LAYERS]; /* per layer */
    bool moe[KVP_MAX_LAYERS];                 /* per layer: MoE MLP, else dense */
};

/* ---- reading keys --------------------------------------------------------- */

/* The value node of key in map, with its key node in *kn; NULL if absent. */
static yaml_node_t *pair(struct hf *h, yaml_node_t *map, const char *key, yaml_node_t **kn)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = kvp_ydoc_node(&h->d, p->key);
        const char *s = kvp_ydoc_scalar(k);
        if (s && strcmp(s, key) == 0) {
            *kn = k;
            return kvp_ydoc_node(&h->d, p->value);
        }
    }
    return NULL;
}

/* The value of the first of keys that map holds, not null; NULL if none.
 * *at (if not NULL) names the key and its place, or keys[0] and map. */
static yaml_node_t *find(struct hf *h, yaml_node_t *map, const char *const *keys, struct hf_at *at)
{
    struct hf_at where = {keys[0], map, false};
    yaml_node_t *v = NULL;

    for (; *keys && !v; keys++) {
        yaml_node_t *kn;
        v = pair(h, map, *keys, &kn);
        if (v && kvp_ydoc_is_null(v))
            v = NULL;
        else if (v)
            where = (struct hf_at){*keys, kn, true};
    }
    if (at)
        *at = where;
    return v;
}

/* Whether map holds any of keys, null included (an explicit null turns a
 * family default off, as it does in transformers). */
static bool mentions(struct hf *h, yaml_node_t *map, const char *const *keys)
{
    yaml_node_t *kn;
    for (; *keys; keys++)
        if (pair(h, map, *keys, &kn))
            return true;
    return false;
}

/* The family default of any of keys, marked as used; NULL if there is none. */
static const struct hf_default *family_default(struct hf *h, const char *const *keys)
{
    const struct hf_default *d = h->fam->defaults;
    for (; *keys; keys++) {
        for (uint32_t i = 0; d && d[i].key; i++) {
            if (strcmp(d[i].key, *keys) == 0) {
                h->defaults_used |= 1u << i;
                return &d[i];
            }
        }
    }
    return NULL;
}

/* The text model's value of keys (any alias), or NULL with *def set to the
 * family default when no alias is present at all. */
static yaml_node_t *lookup(struct hf *h, const char *const *keys, struct hf_at *at,
                           const struct hf_default **def)
{
    yaml_node_t *v = find(h, h->cfg, keys, at);
    *def = v || mentions(h, h->cfg, keys) ? NULL : family_default(h, keys);
    if (*def)
        at->key = (*def)->key;
    at->set = v || *def;
    return v;
}

static enum kvp_status missing(struct hf *h, const char *key)
{
    return kvp_ydoc_fail(&h->d, h->cfg, h->err, KVP_ERR_SCHEMA, "missing required key '%s'", key);
}

/* Typed reads from the text model: the first alias present, else the family
 * default, else an error naming keys[0] when required (*out is unchanged when
 * an optional key is absent). *at, if not NULL, tells where the value came from. */
#define HF_GETTER(name, type, reader, from_default)                                              \
    static enum kvp_status name(struct hf *h, const char *const *keys, bool required, type *out, \
                                struct hf_at *at)                                                \
    {                                                                                            \
        struct hf_at where;                                                                      \
        const struct hf_default *def;                                                            \
        yaml_node_t *v = lookup(h, keys, &where, &def);                                          \
        if (at)                                                                                  \
            *at = where;                                                                         \
        if (v)                                                                                   \
            return reader(&h->d, v, where.key, out, h->err);                                     \
        if (def)                                                                                 \
            *out = from_default;                                                                 \
        return def || !required ? KVP_OK : missing(h, keys[0]);                                  \
    }
HF_GETTER(get_u64, uint64_t, kvp_ydoc_u64, def->value)
HF_GETTER(get_u32, uint32_t, kvp_ydoc_u32, (uint32_t)def->value)
HF_GETTER(get_bool, bool, kvp_ydoc_bool, def->value != 0)
#undef HF_GETTER

/* get_u32 for a count that must not be 0 when given. */
static enum kvp_status get_pos_u32(struct hf *h, const char *const *keys, bool required, uint32_t *out,
                                   struct hf_at *at)
{
    struct hf_at where;
    enum kvp_status st = get_u32(h, keys, required, out, &where);
    if (at)
        *at = where;
    if (st == KVP_OK && where.set && *out == 0)
        return kvp_ydoc_fail(&h->d, where.node, h->err, KVP_ERR_RANGE, "'%s' must be positive (got 0)", where.key);
    return st;
}

/* Whether the text model gives a value for key (or its family has a default). */
static bool has(struct hf *h, const char *key)
{
    struct hf_at at;
    const struct hf_default *def;
    return lookup(h, KEYS(key), &at, &def) || def;
}

/* A string value of keys in map (the first alias present); "" if absent. */
static enum kvp_status get_str(struct hf *h, yaml_node_t *map, const char *const *keys, char *buf,
                               uint32_t size, struct hf_at *at)
{
    struct hf_at where;
    yaml_node_t *v = find(h, map, keys, &where);
    if (at)
        *at = where;
    buf[0] = '\0';
    return v ? kvp_ydoc_str(&h->d, v, where.key, buf, size, h->err) : KVP_OK;
}

/* A uint32_t a*b, or an error at `at` naming both factors. */
static enum kvp_status mul_u32(struct hf *h, const struct hf_at *at, uint64_t a, uint64_t b,
                               uint32_t *out)
{
    uint64_t r;
    if (!kvp_mul(a, b, &r) || r > UINT32_MAX)
        return kvp_ydoc_fail(&h->d, at->node, h->err, KVP_ERR_RANGE,
                         "'%s' gives a width that does not fit in 32 bits (%llu x %llu)", at->key,
                         (unsigned long long)a, (unsigned long long)b);
    *out = (uint32_t)r;
    return KVP_OK;
}

/* ---- step 1: the text model and its model_type ---------------------------- */

static const struct hf_family *family_of(const char *type)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strcmp(families[i].type, type) == 0)
            return &families[i];
    return NULL;
}

/* Multimodal configs nest the language model in `text_config`; its
 * model_type (gemma3_text, llama4_text) names the family when it has one. */
static enum kvp_status read_family(struct hf *h)
{
    yaml_node_t *tc;
    enum kvp_status st;

    h->root = kvp_ydoc_root(&h->d);
    if ((st = kvp_ydoc_want_map(&h->d, h->root, "config", h->err)) != KVP_OK)
        return st;
    h->cfg = h->root;
    if ((tc = find(h, h->root, KEYS("text_config"), NULL))) {
        if ((st = kvp_ydoc_want_map(&h->d, tc, "text_config", h->err)) != KVP_OK)
            return st;
        h->cfg = tc;
        if ((st = get_str(h, tc, KEYS("model_type"), h->type, sizeof h->type, NULL)) != KVP_OK)
            return st;
    }
    if (!h->type[0] && (st = kvp_ydoc_get_str(&h->d, h->root, "model_type", true, h->type, sizeof h->type,
                                          h->err)) != KVP_OK)
        return st;
    h->fam = family_of(h->type);
    if (!h->fam) {
        h->fam = &generic_family;
        kvp_model_warn(h->m, "unknown model_type '%s': read the generic fields", h->type);
    }
    snprintf(h->m->family, sizeof h->m->family, "%s", h->type);
    return KVP_OK;
}

/* ---- step 2: identity ----------------------------------------------------- */

/* Copy the id s[0..n) into out, lower-cased; characters a model name may not
 * hold (anything but a-z, 0-9, '.', '-', '_') become '-'. */
static void copy_id(const char *s, size_t n, char *out, size_t size)
{
    size_t i;
    for (i = 0; i < n && i + 1 < size; i++) {
        char c = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] - 'A' + 'a') : s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
        out[i] = ok ? c : '-';
    }
    out[i] = '\0';
}

/* The last path component of path[0..n), without trailing slashes: *s, *len. */
static void last_component(const char *path, size_t n, const char **s, size_t *len)
{
    while (n > 0 && path[n - 1] == '/')
        n--;
    *len = 0;
    while (*len < n && path[n - *len - 1] != '/')
        (*len)++;
    *s = path + n - *len;
}

/* The name from the file: "dir/Model-7B/config.json" -> "model-7b",
 * "x/gemma-2-9b.json" -> "gemma-2-9b". A config.json named without a
 * folder, or as "./config.json", is named by the folder it is in (realpath),
 * not "config" or "." (a user in a model's folder runs `kvplan fit config.json`). */
static void name_from_file(const char *file, char *out, size_t size)
{
    const char *s;
    size_t len;
    char *real = NULL;

    last_component(file, strlen(file), &s, &len);
    if (len == strlen("config.json") && strncmp(s, "config.json", len) == 0) {
        const char *dir = s;
        last_component(file, (size_t)(dir - file), &s, &len);
        if ((len == 0 || (len == 1 && s[0] == '.') || (len == 2 && strncmp(s, "..", 2) == 0)) &&
            (real = realpath(file, NULL)) != NULL) {
            last_component(real, strlen(real), &dir, &len); /* the file; its folder before it */
            last_component(real, (size_t)(dir - real), &s, &len);
        }
        if (len == 0) { /* the root, or no folder to read: the file's own name */
            last_component(file, strlen(file), &s, &len);
            len -= 5;
        }
    } else if (len > 5 && strncmp(s + len - 5, ".json", 5) == 0) {
        len -= 5;
    }
    copy_id(s, len, out, size);
    free(real);
}

/* A Hugging Face repo id: "org/name", each part of letters, digits, '.', '-', '_'. */
static bool is_repo_id(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/') || s[0] == '.' || slash[1] == '.')
        return false;
    for (; *s; s++)
        if (*s != '/' && !strchr("._-", *s) && !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                                                  (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

/* name from `_name_or_path` (last component) or the file; hf_id when
 * `_name_or_path` is a repo id; source is the file. */
static enum kvp_status read_identity(struct hf *h)
{
    struct kvp_model *m = h->m;
    yaml_node_t *v = find(h, h->root, KEYS("_name_or_path"), NULL);
    const char *path = kvp_ydoc_scalar(v), *s = NULL;
    size_t len = 0;

    if (v && !path)
        return kvp_ydoc_fail(&h->d, v, h->err, KVP_ERR_SCHEMA, "'_name_or_path' must be a string");
    if (path)
        last_component(path, strlen(path), &s, &len);
    if (len > 0 && strncmp(s, ".", len) != 0 && strncmp(s, "..", len) != 0)
        copy_id(s, len, m->name, sizeof m->name);
    else
        name_from_file(h->d.file ? h->d.file : "", m->name, sizeof m->name);
    if (!m->name[0])
        snprintf(m->name, sizeof m->name, "model");
    if (path && is_repo_id(path) && strlen(path) < sizeof m->hf_id)
        snprintf(m->hf_id, sizeof m->hf_id, "%s", path);
    snprintf(m->source, sizeof m->source, "%s", h->d.file ? h->d.file : "");
    return KVP_OK;
}

/* torch_dtype (newer configs: dtype), in the text model or at the top;
 * bf16 with a warning when neither says. */
static enum kvp_status read_dtype(struct hf *h)
{
    struct hf_at at;
    yaml_node_t *v = find(h, h->cfg, KEYS("torch_dtype", "dtype"), &at);
    const char *s;
    enum kvp_dtype d;

    if (!v)
        v = find(h, h->root, KEYS("torch_dtype", "dtype"), &at);
    if (!v) {
        kvp_model_warn(h->m, "no 'torch_dtype' in the config: assumed bf16");
        return KVP_OK;
    }
    s = kvp_ydoc_scalar(v);
    if (!s)
        return kvp_ydoc_fail(&h->d, v, h->err, KVP_ERR_SCHEMA, "'%s' must be a string", at.key);
    if (!kvp_dtype_from_name(s, &d))
        return kvp_ydoc_fail(&h->d, v, h->err, KVP_ERR_SCHEMA,
                         "'%s' must name a dtype such as \"bfloat16\" (got \"%.40s\")", at.key, s);
    h->m->dtype = h->m->state_dtype = d;
    return KVP_OK;
}

/* The checkpoint's quantization_config (hf_quant.c), at the top or in the text model. */
static enum kvp_status read_quantization(struct hf *h)
{
    yaml_node_t *q = find(h, h->root, KEYS("quantization_config"), NULL);
    struct hf_quant_ctx c = {&h->d, h->m, h->err};

    if (!q)
        q = find(h, h->cfg, KEYS("quantization_config"), NULL);
    return q ? kvp_hf_quant_read(&c, q) : KVP_OK;
}

/* ---- step 3: dimensions and weight flags ---------------------------------- */

static enum kvp_status read_counts(struct hf *h)
{
    struct kvp_model *m = h->m;
    struct hf_at at;
    enum kvp_status st;

    if ((st = get_pos_u32(h, KEYS("num_hidden_layers", "n_layer", "num_layers"), true, &m->n_layers, &at)))
        return st;
    if (m->n_layers > KVP_MAX_LAYERS)
        return kvp_ydoc_fail(&h->d, at.node, h->err, KVP_ERR_RANGE, "'%s' must be at most %u (got %u)", at.key,
                         KVP_MAX_LAYERS, m->n_layers);
    if ((st = get_pos_u32(h, KEYS("hidden_size", "n_embd", "d_model"), true, &m->hidden, &h->hidden_at)) ||
        (st = get_pos_u32(h, KEYS("vocab_size"), true, &m->vocab, NULL)))
        return st;
    return get_u64(h, KEYS("max_position_embeddings", "n_positions", "seq_length", "max_sequence_length"), true,
                   &m->max_context, NULL);
}

/* Query heads, KV heads (absent: MHA) and the head dim (absent or null:
 * hidden / heads, as transformers computes it). */
static enum kvp_status read_heads(struct hf *h)
{
    struct kvp_layer_spec *a = &h->attn;
    struct hf_at at;
    enum kvp_status st;

    if ((st = get_pos_u32(h, KEYS("num_attention_heads", "n_head"), true, &a->n_heads, &h->heads_at)))
        return st;
    a->n_kv_heads = a->n_heads;
    if ((st = get_pos_u32(h, KEYS("num_key_value_heads", "num_kv_heads", "n_head_kv"), false, &a->n_kv_heads,
                          &h->kv_at)))
        return st;
    a->head_dim_k = h->m->hidden / a->n_heads;
    if ((st = get_pos_u32(h, KEYS("head_dim"), false, &a->head_dim_k, &at)))
        return st;
    if (a->head_dim_k == 0)
        return kvp_ydoc_fail(&h->d, h->heads_at.node, h->err, KVP_ERR_RANGE,
                         "'%s' must not exceed the hidden size without a 'head_dim' (got %u and %u)",
                         h->heads_at.key, a->n_heads, h->m->hidden);
    a->head_dim_v = a->head_dim_k;
    return KVP_OK;
}

/* Tied embeddings: the text model's key, the top-level key, the family's default. */
static enum kvp_status read_tied(struct hf *h)
{
    struct hf_at at;
    yaml_node_t *v = find(h, h->cfg, KEYS("tie_word_embeddings"), &at);

    if (!v)
        v = find(h, h->root, KEYS("tie_word_embeddings"), &at);
    h->m->tied_embeddings = h->fam->tied;
    return v ? kvp_ydoc_bool(&h->d, v, at.key, &h->m->tied_embeddings, h->err) : KVP_OK;
}

/* Biases: the family's defaults; its one switch (Falcon `bias`, OPT
 * `enable_bias`); then Llama's `attention_bias` (q, k, v and o) and `mlp_bias`. */
static enum kvp_status read_biases(struct hf *h)
{
    struct kvp_model *m = h->m;
    bool all = h->fam->qkv_bias, attn = h->fam->qkv_bias;
    struct hf_at at = {NULL, NULL, false};
    enum kvp_status st;

    m->attn_qkv_bias = h->fam->qkv_bias;
    m->attn_out_bias = h->fam->out_bias;
    m->mlp_bias = h->fam->mlp_bias;
    if (h->fam->bias_key && (st = get_bool(h, KEYS(h->fam->bias_key), false, &all, &at)) != KVP_OK)
        return st;
    if (at.set)
        m->attn_qkv_bias = m->attn_out_bias = m->mlp_bias = all;
    if ((st = get_bool(h, KEYS("attention_bias"), false, &attn, &at)) != KVP_OK)
        return st;
    if (at.set)
        m->attn_qkv_bias = m->attn_out_bias = attn;
    return get_bool(h, KEYS("mlp_bias"), false, &m->mlp_bias, NULL);
}

/* Norm kind, activation, norms per layer, q/k norms, output gate, sinks,
 * learned positions: the family's conventions. */
static enum kvp_status read_flags(struct hf *h)
{
    struct kvp_model *m = h->m;
    const struct hf_family *f = h->fam;
    enum kvp_status st;

    m->norm = f->norm;
    m->act = f->act;
    m->norms_per_layer = f->norms ? f->norms : 2;
    /* Llama 4's use_qk_norm is a weightless L2 norm: no parameters, so not read. */
    m->qk_norm = f->qk_norm;
    m->attn_sinks = f->attn_sinks;
    m->attn_gate = f->attn_gate;
    if ((st = get_bool(h, KEYS("attn_output_gate"), false, &m->attn_gate, NULL)) != KVP_OK)
        return st;
    if (f->pos == POS_OPT && m->max_context > UINT32_MAX - 2)
        return kvp_ydoc_fail(&h->d, h->cfg, h->err, KVP_ERR_RANGE, "'max_position_embeddings' is too large (got %llu)",
                         (unsigned long long)m->max_context);
    if (f->pos != POS_NONE && m->max_context > UINT32_MAX)
        return kvp_ydoc_fail(&h->d, h->cfg, h->err, KVP_ERR_RANGE, "'n_positions' is too large (got %llu)",
                         (unsigned long long)m->max_context);
    if (f->pos == POS_OPT)
        m->learned_positions = (uint32_t)m->max_context + 2;
    else if (f->pos == POS_TABLE)
        m->learned_positions = (uint32_t)m->max_context;
    return KVP_OK;
}

static enum kvp_status read_dims(struct hf *h)
{
    enum kvp_status st;
    if ((st = read_counts(h)) || (st = read_heads(h)) || (st = read_tied(h)) || (st = read_biases(h)))
        return st;
    return read_flags(h);
}

/* Falcon: KV heads and norms depend on the decoder layout. A first-revision
 * config (RefinedWeb*) with `n_head_kv` is the 40B "new decoder" layout, as
 * transformers' conversion script decides. KV heads: num_kv_heads in the new
 * layout or without multi_query, else 1. Norms: two (ln_attn, ln_mlp, or
 * input + post-attention without parallel_attn), else one input_layernorm. */
static enum kvp_status falcon_fixup(struct hf *h)
{
    yaml_node_t *kn;
    bool new_arch = pair(h, h->cfg, "n_head_kv", &kn) != NULL, multi_query = true, parallel = true;
    uint32_t n_ln;
    struct hf_at mq_at;
    enum kvp_status st;

    if ((st = get_bool(h, KEYS("new_decoder_architecture"), false, &new_arch, NULL)) ||
        (st = get_bool(h, KEYS("parallel_attn"), false, &parallel, NULL)))
        return st;
    if (!new_arch && (st = get_bool(h, KEYS("multi_query"), false, &multi_query, &mq_at)) != KVP_OK)
        return st;
    if (!new_arch && multi_query) {
        h->attn.n_kv_heads = 1;
        h->kv_at = mq_at;
    }
    n_ln = new_arch ? 2 : 1;
    if ((st = get_u32(h, KEYS("num_ln_in_parallel_attn"), false, &n_ln, NULL)) != KVP_OK)
        return st;
    h->m->norms_per_layer = !parallel || n_ln == 2 ? 2 : 1;
    return KVP_OK;
}

/* OPT: a word_embed_proj_dim other than hidden adds project_in/project_out
 * matrices (OPT-350M), which the model format does not count. OPT-350M also
 * has no final layer norm (do_layer_norm_before false); that hidden-sized
 * norm is counted anyway. */
static enum kvp_status opt_fixup(struct hf *h)
{
    uint32_t proj = h->m->hidden;
    enum kvp_status st = get_u32(h, KEYS("word_embed_proj_dim"), false, &proj, NULL);

    if (st == KVP_OK && proj != h->m->hidden)
        kvp_model_warn(h->m, "'word_embed_proj_dim' %u differs from 'hidden_size' %u: project_in/project_out "
                       "are not counted", proj, h->m->hidden);
    return st;
}

static enum kvp_status fixup(struct hf *h)
{
    return h->fam->fixup ? h->fam->fixup(h) : KVP_OK;
}

static enum kvp_status check_kv_heads(struct hf *h)
{
    const struct kvp_layer_spec *a = &h->attn;
    if (a->n_heads % a->n_kv_heads == 0)
        return KVP_OK;
    return kvp_ydoc_fail(&h->d, h->kv_at.node, h->err, KVP_ERR_RANGE, "'%s' must divide '%s' (got %u and %u)",
                     h->kv_at.key, h->heads_at.key, a->n_kv_heads, a->n_heads);
}

/* ---- step 4: the kind of each layer --------------------------------------- */

/* Every layer is one of n kinds; kinds of attention start as full. */
static void set_all(struct hf *h, enum kvp_layer_kind k)
{
    for (uint32_t i = 0; i < h->m->n_layers; i++)
        h->kind[i] = k;
}

/* Gated DeltaNet (Qwen3-Next linear attention) from the linear_* keys. */
static enum kvp_status read_gdn(struct hf *h)
{
    struct kvp_recurrent *r = &h->rec;
    enum kvp_status st;

    r->kind = KVP_REC_GDN;
    if ((st = get_pos_u32(h, KEYS("linear_num_value_heads"), true, &r->n_heads, NULL)) ||
        (st = get_pos_u32(h, KEYS("linear_num_key_heads"), true, &r->n_k_heads, NULL)) ||
        (st = get_pos_u32(h, KEYS("linear_key_head_dim"), true, &r->k_head_dim, NULL)) ||
        (st = get_pos_u32(h, KEYS("linear_value_head_dim"), true, &r->v_head_dim, NULL)))
        return st;
    return get_pos_u32(h, KEYS("linear_conv_kernel_dim"), true, &r->d_conv, NULL);
}

/* Mamba-1's dt rank: a number, or "auto" (absent too) = ceil(hidden / 16). */
static enum kvp_status read_dt_rank(struct hf *h, uint32_t *out)
{
    struct hf_at at;
    yaml_node_t *v = find(h, h->cfg, KEYS("mamba_dt_rank"), &at);
    const char *s = kvp_ydoc_scalar(v);

    if (!v || (s && strcmp(s, "auto") == 0)) {
        *out = h->m->hidden / 16 + (h->m->hidden % 16 != 0);
        return KVP_OK;
    }
    if (s && v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return kvp_ydoc_fail(&h->d, v, h->err, KVP_ERR_SCHEMA,
                         "'mamba_dt_rank' must be an integer or \"auto\" (got \"%.40s\")", s);
    return get_pos_u32(h, KEYS("mamba_dt_rank"), true, out, NULL);
}

/* Mamba from the Jamba-style mamba_* keys; Mamba-2 when mamba_n_heads is
 * given (GraniteMoeHybrid's layer_types "mamba"). d_inner = expand x hidden. */
static enum kvp_status read_mamba(struct hf *h)
{
    struct kvp_recurrent *r = &h->rec;
    struct hf_at at;
    uint32_t expand = 0;
    enum kvp_status st;

    if ((st = get_pos_u32(h, KEYS("mamba_d_state"), true, &r->d_state, NULL)) ||
        (st = get_pos_u32(h, KEYS("mamba_d_conv"), true, &r->d_conv, NULL)) ||
        (st = get_pos_u32(h, KEYS("mamba_expand"), true, &expand, &at)) ||
        (st = mul_u32(h, &at, expand, h->m->hidden, &r->d_inner)))
        return st;
    if (!has(h, "mamba_n_heads")) {
        r->kind = KVP_REC_MAMBA;
        r->bc_norms = h->fam->bc_norms;
        return read_dt_rank(h, &r->dt_rank);
    }
    r->kind = KVP_REC_MAMBA2;
    r->n_groups = 1;
    if ((st = get_pos_u32(h, KEYS("mamba_n_heads"), true, &r->n_heads, NULL)) ||
        (st = get_pos_u32(h, KEYS("mamba_n_groups"), false, &r->n_groups, NULL)))
        return st;
    return get_pos_u32(h, KEYS("mamba_d_head"), true, &r->v_head_dim, NULL);
}

/* The recurrent mixer, read once; a second kind in one model is not handled. */
static enum kvp_status want_recurrent(struct hf *h, enum kvp_recurrent_kind kind, yaml_node_t *where)
{
    if (h->has_rec && h->rec_asked != kind)
        return kvp_ydoc_fail(&h->d, where, h->err, KVP_ERR_UNSUPPORTED,
                         "a model with both %s and %s layers is not supported",
                         kvp_recurrent_kind_name(h->rec_asked), kvp_recurrent_kind_name(kind));
    if (h->has_rec)
        return KVP_OK;
    h->has_rec = true;
    h->rec_asked = kind;
    return kind == KVP_REC_GDN ? read_gdn(h) : read_mamba(h);
}

/* DeepSeek V2/V3, Kimi K2: every layer caches one latent of kv_lora_rank +
 * qk_rope_head_dim. K (and Q) heads are qk_nope + qk_rope wide, V heads
 * v_head_dim; num_key_value_heads means nothing here. q_lora_rank null: a
 * plain q projection. (num_nextn_predict_layers, the multi-token-prediction
 * head, is not part of the model and is ignored.) */
static enum kvp_status plan_mla(struct hf *h)
{
    struct kvp_layer_spec *a = &h->attn;
    uint32_t nope, rope;
    struct hf_at at;
    enum kvp_status st;

    if ((st = get_pos_u32(h, KEYS("kv_lora_rank"), true, &a->kv_lora_rank, NULL)) ||
        (st = get_pos_u32(h, KEYS("qk_rope_head_dim"), true, &rope, NULL)) ||
        (st = get_u32(h, KEYS("qk_nope_head_dim"), true, &nope, &at)) ||
        (st = get_pos_u32(h, KEYS("v_head_dim"), true, &a->head_dim_v, NULL)) ||
        (st = get_u32(h, KEYS("q_lora_rank"), false, &a->q_lora_rank, NULL)))
        return st;
    if ((uint64_t)nope + rope > UINT32_MAX)
        return kvp_ydoc_fail(&h->d, at.node, h->err, KVP_ERR_RANGE, "'qk_nope_head_dim' is too large (got %u)", nope);
    a->head_dim_k = nope + rope;
    a->qk_rope_dim = rope;
    a->n_kv_heads = 1;
    set_all(h, KVP_LAYER_MLA);
    return KVP_OK;
}

/* `layer_types` values and the kind each means. */
static const struct {
    const char *name;
    enum kvp_layer_kind kind;
    int rec; /* the recurrent kind, or -1 */
} layer_types[] = {
    {"full_attention", KVP_LAYER_FULL, -1},
    {"attention", KVP_LAYER_FULL, -1},
    {"sliding_attention", KVP_LAYER_SLIDING, -1},
    {"chunked_attention", KVP_LAYER_CHUNKED, -1},
    {"linear_attention", KVP_LAYER_RECURRENT, KVP_REC_GDN},
    {"mamba", KVP_LAYER_RECURRENT, KVP_REC_MAMBA},
};

/* Layer i's kind from one `layer_types` entry. */
static enum kvp_status layer_type(struct hf *h, yaml_node_t *v, uint32_t i)
{
    const char *s = kvp_ydoc_scalar(v);
    for (size_t t = 0; s && t < sizeof layer_types / sizeof layer_types[0]; t++) {
        if (strcmp(s, layer_types[t].name) != 0)
            continue;
        h->kind[i] = layer_types[t].kind;
        return layer_types[t].rec < 0 ? KVP_OK : want_recurrent(h, (enum kvp_recurrent_kind)layer_types[t].rec, v);
    }
    if (!s)
        return kvp_ydoc_fail(&h->d, v, h->err, KVP_ERR_SCHEMA, "'layer_types' entries must be strings");
    return kvp_ydoc_fail(&h->d, v, h->err, KVP_ERR_UNSUPPORTED, "unknown layer type '%.40s' in 'layer_types'", s);
}

/* How many layers are of kind k. */
static uint32_t count_kind(const struct hf *h, enum kvp_layer_kind k)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->m->n_layers; i++)
        n += h->kind[i] == k;
    return n;
}

/* The window (or chunk) that layers of `layer_types` need, from key. */
static enum kvp_status layer_types_window(struct hf *h, yaml_node_t *seq, enum kvp_layer_kind k,
                                          const char *key, uint32_t *out)
{
    struct hf_at at;
    enum kvp_status st;

    if (count_kind(h, k) == 0)
        return KVP_OK;
    if ((st = get_pos_u32(h, KEYS(key), false, out, &at)) != KVP_OK)
        return st;
    if (!at.set)
        return kvp_ydoc_fail(&h->d, seq, h->err, KVP_ERR_SCHEMA, "'layer_types' has %s layers but '%s' is not set",
                         kvp_layer_kind_name(k), key);
    return KVP_OK;
}

/* An explicit kind per layer (Gemma 3 newer configs, gpt-oss, Qwen3-Next...). */
static enum kvp_status plan_layer_types(struct hf *h, yaml_node_t *seq)
{
    uint32_t n;
    enum kvp_status st;

    if ((st = kvp_ydoc_want_seq(&h->d, seq, "layer_types", h->err)) != KVP_OK)
        return st;
    n = (uint32_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n != h->m->n_layers)
        return kvp_ydoc_fail(&h->d, seq, h->err, KVP_ERR_RANGE,
                         "'layer_types' must have one entry per layer (got %u for %u layers)", n, h->m->n_layers);
    for (uint32_t i = 0; i < n; i++)
        if ((st = layer_type(h, kvp_ydoc_node(&h->d, seq->data.sequence.items.start[i]), i)) != KVP_OK)
            return st;
    if ((st = layer_types_window(h, seq, KVP_LAYER_SLIDING, "sliding_window", &h->window)) != KVP_OK)
        return st;
    return layer_types_window(h, seq, KVP_LAYER_CHUNKED, "attention_chunk_size", &h->chunk);
}

/* Jamba: layer i attends when i % attn_layer_period == attn_layer_offset,
 * every other layer is Mamba. */
static enum kvp_status plan_periodic(struct hf *h)
{
    uint32_t period = 0, offset = 0;
    struct hf_at at;
    enum kvp_status st;

    if ((st = get_pos_u32(h, KEYS("attn_layer_period"), true, &period, NULL)) ||
        (st = get_u32(h, KEYS("attn_layer_offset"), true, &offset, &at)))
        return st;
    if (offset >= period)
        return kvp_ydoc_fail(&h->d, at.node, h->err, KVP_ERR_RANGE,
                         "'attn_layer_offset' must be less than 'attn_layer_period' (got %u and %u)", offset, period);
    for (uint32_t i = 0; i < h->m->n_layers; i++)
        h->kind[i] = i % period == offset ? KVP_LAYER_FULL : KVP_LAYER_RECURRENT;
    return want_recurrent(h, KVP_REC_MAMBA, h->cfg);
}

/* Qwen3-Next: layer i is full attention when (i + 1) % full_attention_interval
 * == 0, the others gated DeltaNet. */
static enum kvp_status plan_interval(struct hf *h)
{
    uint32_t every = 0;
    enum kvp_status st = get_pos_u32(h, KEYS("full_attention_interval"), true, &every, NULL);

    if (st != KVP_OK)
        return st;
    for (uint32_t i = 0; i < h->m->n_layers; i++)
        h->kind[i] = (i + 1) % every == 0 ? KVP_LAYER_FULL : KVP_LAYER_RECURRENT;
    return want_recurrent(h, KVP_REC_GDN, h->cfg);
}

/* Llama 4: the RoPE layers attend within attention_chunk_size chunks, the
 * NoPE layers globally. no_rope_layers[i] is 1 for a RoPE layer; empty or
 * absent, layer i is NoPE when (i + 1) % no_rope_layer_interval == 0. */
static enum kvp_status plan_chunks(struct hf *h)
{
    struct hf_at at;
    uint32_t every = 4, n;
    yaml_node_t *seq;
    enum kvp_status st;

    if ((st = get_pos_u32(h, KEYS("attention_chunk_size"), true, &h->chunk, NULL)) != KVP_OK)
        return st;
    seq = find(h, h->cfg, KEYS("no_rope_layers"), &at);
    if (seq && (st = kvp_ydoc_want_seq(&h->d, seq, "no_rope_layers", h->err)) != KVP_OK)
        return st;
    if (!seq || seq->data.sequence.items.top == seq->data.sequence.items.start) {
        if ((st = get_pos_u32(h, KEYS("no_rope_layer_interval"), false, &every, NULL)) != KVP_OK)
            return st;
        for (uint32_t i = 0; i < h->m->n_layers; i++)
            if (h->kind[i] == KVP_LAYER_FULL && (i + 1) % every != 0)
                h->kind[i] = KVP_LAYER_CHUNKED;
        return KVP_OK;
    }
    n = (uint32_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n != h->m->n_layers)
        return kvp_ydoc_fail(&h->d, seq, h->err, KVP_ERR_RANGE,
                         "'no_rope_layers' must have one entry per layer (got %u for %u layers)", n, h->m->n_layers);
    for (uint32_t i = 0; i < h->m->n_layers; i++) {
        uint32_t rope;
        if ((st = kvp_ydoc_u32(&h->d, kvp_ydoc_node(&h->d, seq->data.sequence.items.start[i]), "no_rope_layers", &rope,
                           h->err)) != KVP_OK)
            return st;
        if (h->kind[i] == KVP_LAYER_FULL && rope != 0)
            h->kind[i] = KVP_LAYER_CHUNKED;
    }
    return KVP_OK;
}

/* Gemma 2/3, Cohere 2: layer i is global when (i + 1) % pattern == 0 and
 * slides otherwise (Gemma 2: pattern 2, so the even layers slide). */
static enum kvp_status plan_pattern(struct hf *h, uint32_t pattern)
{
    enum kvp_status st = get_pos_u32(h, KEYS("sliding_window"), true, &h->window, NULL);

    if (st != KVP_OK)
        return st;
    for (uint32_t i = 0; i < h->m->n_layers; i++)
        if (h->kind[i] == KVP_LAYER_FULL && (i + 1) % pattern != 0)
            h->kind[i] = KVP_LAYER_SLIDING;
    return KVP_OK;
}

/* Mistral, Phi-3, Starcoder2: a non-null sliding_window applies to every
 * layer. Qwen2/Qwen3: only with use_sliding_window, and only from layer
 * max_window_layers on. Mixtral's null window: full attention. */
static enum kvp_status plan_sliding(struct hf *h)
{
    uint32_t from = 0;
    bool use = true;
    struct hf_at at;
    enum kvp_status st;

    if ((st = get_pos_u32(h, KEYS("sliding_window"), false, &h->window, &at)) != KVP_OK || !at.set)
        return st;
    if ((st = get_bool(h, KEYS("use_sliding_window"), false, &use, NULL)) != KVP_OK || !use)
        return st;
    if ((st = get_u32(h, KEYS("max_window_layers"), false, &from, NULL)) != KVP_OK)
        return st;
    for (uint32_t i = from; i < h->m->n_layers; i++)
        if (h->kind[i] == KVP_LAYER_FULL)
            h->kind[i] = KVP_LAYER_SLIDING;
    return KVP_OK;
}

/* Which attention layers are windowed or chunked, when layer_types does not say. */
static enum kvp_status plan_windows(struct hf *h)
{
    uint32_t pattern = h->fam->pattern;
    enum kvp_status st;

    if (has(h, "attention_chunk_size"))
        return plan_chunks(h);
    if ((st = get_pos_u32(h, KEYS("sliding_window_pattern"), false, &pattern, NULL)) != KVP_OK)
        return st;
    return pattern ? plan_pattern(h, pattern) : plan_sliding(h);
}

static enum kvp_status plan_layers(struct hf *h)
{
    yaml_node_t *seq;
    enum kvp_status st = KVP_OK;

    if (has(h, "kv_lora_rank"))
        return plan_mla(h);
    if ((st = check_kv_heads(h)) != KVP_OK)
        return st;
    if ((seq = find(h, h->cfg, KEYS("layer_types"), NULL)))
        return plan_layer_types(h, seq);
    set_all(h, KVP_LAYER_FULL);
    if (has(h, "attn_layer_period"))
        st = plan_periodic(h);
    else if (has(h, "full_attention_interval"))
        st = plan_interval(h);
    return st == KVP_OK ? plan_windows(h) : st;
}

/* ---- step 5: the MLP of each layer ---------------------------------------- */

/* Which layers a list of layer indices names (Qwen mlp_only_layers, Llama 4
 * moe_layers); *given says whether the key is there. */
static enum kvp_status read_layer_set(struct hf *h, const char *key, bool *set, bool *given)
{
    yaml_node_t *seq = find(h, h->cfg, KEYS(key), NULL);
    enum kvp_status st;

    *given = seq != NULL;
    if (!seq)
        return KVP_OK;
    if ((st = kvp_ydoc_want_seq(&h->d, seq, key, h->err)) != KVP_OK)
        return st;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
        yaml_node_t *v = kvp_ydoc_node(&h->d, *it);
        uint32_t i;
        if ((st = kvp_ydoc_u32(&h->d, v, key, &i, h->err)) != KVP_OK)
            return st;
        if (i >= h->m->n_layers)
            return kvp_ydoc_fail(&h->d, v, h->err, KVP_ERR_RANGE, "'%s' names layer %u of a %u-layer model", key, i,
                             h->m->n_layers);
        set[i] = true;
    }
    return KVP_OK;
}

/* The spacing keys of MoE layers, each neutral when absent. */
struct hf_moe_rule {
    uint32_t first_dense; /* DeepSeek first_k_dense_replace: layers below are dense */
    uint32_t freq;        /* DeepSeek moe_layer_freq: MoE when i % freq == 0 */
    uint32_t step;        /* Qwen decoder_sparse_step, Llama 4 interleave_moe_layer_step: (i + 1) % step == 0 */
    uint32_t period;      /* Jamba expert_layer_period/offset: i % period == offset */
    uint32_t offset;
};

static enum kvp_status read_moe_rule(struct hf *h, struct hf_moe_rule *r)
{
    enum kvp_status st;

    *r = (struct hf_moe_rule){0, 1, 1, 1, 0};
    if ((st = get_u32(h, KEYS("first_k_dense_replace"), false, &r->first_dense, NULL)) ||
        (st = get_pos_u32(h, KEYS("moe_layer_freq"), false, &r->freq, NULL)) ||
        (st = get_pos_u32(h, KEYS("decoder_sparse_step", "interleave_moe_layer_step"), false, &r->step, NULL)) ||
        (st = get_pos_u32(h, KEYS("expert_layer_period"), false, &r->period, NULL)))
        return st;
    return get_u32(h, KEYS("expert_layer_offset"), false, &r->offset, NULL);
}

/* Mark the MoE layers: every spacing rule present must agree, and the
 * explicit lists (mlp_only_layers out, moe_layers in) have the last word. */
static enum kvp_status plan_moe_layers(struct hf *h)
{
    bool dense_only[KVP_MAX_LAYERS] = {false}, moe_only[KVP_MAX_LAYERS] = {false};
    bool dense_listed, moe_listed;
    struct hf_moe_rule r;
    enum kvp_status st;

    if ((st = read_moe_rule(h, &r)) || (st = read_layer_set(h, "mlp_only_layers", dense_only, &dense_listed)) ||
        (st = read_layer_set(h, "moe_layers", moe_only, &moe_listed)))
        return st;
    for (uint32_t i = 0; i < h->m->n_layers; i++)
        h->moe[i] = i >= r.first_dense && i % r.freq == 0 && (i + 1) % r.step == 0 && i % r.period == r.offset &&
                    !dense_only[i] && (!moe_listed || moe_only[i]);
    return KVP_OK;
}

/* Shared experts: DeepSeek's n_shared_experts, each expert-wide; Qwen's one
 * shared_expert_intermediate_size-wide expert with a sigmoid gate; Llama 4's
 * one expert-wide (from the family). */
static enum kvp_status read_shared_experts(struct hf *h)
{
    struct kvp_model *m = h->m;
    uint32_t width = 0;
    enum kvp_status st;

    m->n_shared_experts = h->fam->shared_experts;
    if ((st = get_u32(h, KEYS("n_shared_experts"), false, &m->n_shared_experts, NULL)) ||
        (st = get_u32(h, KEYS("shared_expert_intermediate_size"), false, &width, NULL)))
        return st;
    if (width > 0) {
        m->n_shared_experts = m->n_shared_experts ? m->n_shared_experts : 1;
        m->shared_expert_gate = true;
    }
    /* as the YAML schema defaults it, so an emitted model reads back equal */
    m->shared_intermediate = width ? width : m->expert_intermediate;
    return KVP_OK;
}

/* Routed experts (Mixtral num_local_experts, DeepSeek n_routed_experts,
 * Qwen/Jamba num_experts), top-k, expert width (moe_intermediate_size, else
 * intermediate_size as in Mixtral, gpt-oss, Jamba, Llama 4), biases. */
static enum kvp_status read_moe(struct hf *h)
{
    struct kvp_model *m = h->m;
    char topk[32];
    struct hf_at n_at, k_at;
    enum kvp_status st;

    if ((st = get_u32(h, KEYS("num_local_experts", "n_routed_experts", "num_experts"), false, &m->n_experts, &n_at)))
        return st;
    if (m->n_experts == 0)
        return KVP_OK;
    if (m->n_experts > KVP_MAX_EXPERTS)
        return kvp_ydoc_fail(&h->d, n_at.node, h->err, KVP_ERR_RANGE, "'%s' must be at most %u (got %u)", n_at.key,
                         KVP_MAX_EXPERTS, m->n_experts);
    if ((st = get_pos_u32(h, KEYS("num_experts_per_tok", "experts_per_token", "moe_topk"), true, &m->n_experts_active,
                          &k_at)) ||
        (st = get_pos_u32(h, KEYS("moe_intermediate_size", "intermediate_size"), true, &m->expert_intermediate, NULL)))
        return st;
    if (m->n_experts_active > m->n_experts)
        return kvp_ydoc_fail(&h->d, k_at.node, h->err, KVP_ERR_RANGE, "'%s' must be at most '%s' (got %u and %u)",
                         k_at.key, n_at.key, m->n_experts_active, m->n_experts);
    if ((st = read_shared_experts(h)) ||
        (st = get_str(h, h->cfg, KEYS("topk_method"), topk, sizeof topk, NULL)))
        return st;
    m->router_bias = h->fam->router_bias || strcmp(topk, "noaux_tc") == 0; /* DeepSeek-V3 e_score_correction_bias */
    m->expert_bias = h->fam->expert_bias;
    return plan_moe_layers(h);
}

static bool any_dense(const struct hf *h)
{
    for (uint32_t i = 0; i < h->m->n_layers; i++)
        if (!h->moe[i])
            return true;
    return false;
}

/* The dense MLP width (Llama 4: intermediate_size_mlp; OPT ffn_dim; GPT-2
 * n_inner; Falcon ffn_hidden_size; GPT-2 and Falcon default to 4 x hidden).
 * Required only when some layer is dense. */
static enum kvp_status read_dense_width(struct hf *h)
{
    struct kvp_model *m = h->m;
    struct hf_at at;
    enum kvp_status st = get_pos_u32(h, KEYS("intermediate_size_mlp", "intermediate_size", "ffn_dim", "n_inner",
                                             "ffn_hidden_size"), false, &m->intermediate, &at);

    if (st != KVP_OK || at.set)
        return st;
    if (h->fam->ffn_4x)
        return mul_u32(h, &h->hidden_at, 4, m->hidden, &m->intermediate);
    return any_dense(h) ? missing(h, "intermediate_size") : KVP_OK;
}

/* ---- step 6: the stack ---------------------------------------------------- */

static void layer_spec(const struct hf *h, uint32_t i, struct kvp_layer_spec *s)
{
    *s = h->attn;
    s->kind = h->kind[i];
    s->mlp = h->moe[i] ? KVP_MLP_MOE : KVP_MLP_DENSE;
    s->window = s->kind == KVP_LAYER_SLIDING ? h->window : s->kind == KVP_LAYER_CHUNKED ? h->chunk : 0;
    s->rec = h->rec;
    if (s->kind == KVP_LAYER_RECURRENT)
        s->n_heads = s->n_kv_heads = s->head_dim_k = s->head_dim_v = 0;
}

static enum kvp_status add_layers(struct hf *h)
{
    uint32_t n = h->m->n_layers;
    enum kvp_status st;

    h->m->n_layers = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct kvp_layer_spec s;
        layer_spec(h, i, &s);
        if ((st = kvp_model_add_layers(h->m, &s, 1, h->err)) != KVP_OK) {
            kvp_error_place(h->err, h->d.file, h->cfg->start_mark.line + 1, h->cfg->start_mark.column + 1);
            return st;
        }
    }
    return KVP_OK;
}

/* One warning listing the family defaults that stood in for absent keys. */
static enum kvp_status note_defaults(struct hf *h)
{
    char text[KVP_TEXT_MAX] = "";
    size_t n = 0;

    for (uint32_t i = 0; h->fam->defaults && h->fam->defaults[i].key; i++) {
        const struct hf_default *d = &h->fam->defaults[i];
        if ((h->defaults_used >> i & 1) && n < sizeof text)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s%s %llu", n ? ", " : "", d->key,
                                  (unsigned long long)d->value);
    }
    if (n > 0)
        kvp_model_warn(h->m, "absent keys took the '%s' defaults: %s", h->type, text);
    return KVP_OK;
}

/* ---- step 7: beside the text model ----------------------------------------- */

/* A multimodal config's vision tower and projector (hf_tower.c). */
static enum kvp_status read_tower(struct hf *h)
{
    char type[KVP_NAME_MAX] = ""; /* as it is when the key is absent */
    enum kvp_status st = kvp_ydoc_get_str(&h->d, h->root, "model_type", false, type, sizeof type, h->err);
    return st == KVP_OK ? kvp_hf_tower_read(&h->d, h->root, type, h->m, h->err) : st;
}

/* ---- the importer ---------------------------------------------------------- */

typedef enum kvp_status hf_step(struct hf *h);

static hf_step *const steps[] = {
    read_family, read_identity, read_dtype, read_dims, fixup, plan_layers,
    read_moe, read_dense_width, add_layers, note_defaults, read_quantization, read_tower,
};

enum kvp_status kvp_model_parse_hf(const char *text, uint64_t len, const char *file,
                                   struct kvp_model *m, struct kvp_error *err)
{
    struct hf h; /* about 6 KiB: the per-layer plan */
    enum kvp_status st;

    memset(&h, 0, sizeof h);
    h.m = m;
    h.err = err;
    st = kvp_ydoc_load(&h.d, text, len, file, err);
    for (size_t i = 0; st == KVP_OK && i < sizeof steps / sizeof steps[0]; i++)
        st = steps[i](&h);
    kvp_ydoc_release(&h.d);
    return st;
}
