/* check_hf.c -- the Hugging Face config.json importer (src/lib/model/model_hf.c).
 *
 * core:   real configs under tests/data/hf/ (copies of shared/hf-configs plus
 *         public configs of other model_types) load into the expected model;
 *         each imports, emits as kvplan YAML and reads back equal; small inline
 *         configs pin one convention each (names, windows, MoE spacing, ...).
 * limits: bad inputs under tests/data/bad/hf-*.json fail with the exact text
 *         of their .err file; size limits and overflowing widths.
 * Tests run from the repository root (paths are relative to it).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvplan/kv.h"
#include "kvplan/model.h"
#include "testutil.h"

#define HF_DIR "tests/data/hf/"
#define BAD_DIR TEST_BAD_DIR "/"

/* ---- helpers ------------------------------------------------------------- */

static struct kvp_model *load_ok(const char *path)
{
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_model_load(path, &m, &err), err);
    return m;
}

/* Parse inline config text; the caller frees the model. */
static struct kvp_model *parse_ok(const char *text, const char *file)
{
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_error err = {0};
    ck_assert_ptr_nonnull(m);
    kvp_model_init(m);
    ck_assert_kvp_ok(kvp_model_parse_hf(text, strlen(text), file, m, &err), err);
    ck_assert_kvp_ok(kvp_model_validate(m, &err), err);
    return m;
}

/* One letter per layer: F full, S sliding, C chunked, M mla, R recurrent. */
static char kind_letter(enum kvp_layer_kind k)
{
    static const char letters[KVP_LAYER_KIND_COUNT] = {'F', 'S', 'C', 'M', 'R', 'H', 'N'};
    return letters[k];
}

/* The model's layers as letters: kinds (F/S/C/M/R) or MLPs (d dense, m MoE). */
static void layer_letters(const struct kvp_model *m, bool mlp, char *out, size_t size)
{
    uint32_t i;
    for (i = 0; i < m->n_layers && i + 1 < size; i++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, i);
        out[i] = mlp ? (s->mlp == KVP_MLP_MOE ? 'm' : 'd') : kind_letter(s->kind);
    }
    out[i] = '\0';
}

/* want is one letter per layer, or a single letter for every layer. */
static void check_letters(const struct kvp_model *m, bool mlp, const char *want, const char *what)
{
    char got[KVP_MAX_LAYERS + 1], all[KVP_MAX_LAYERS + 1];
    layer_letters(m, mlp, got, sizeof got);
    if (strlen(want) == 1) {
        memset(all, want[0], m->n_layers);
        all[m->n_layers] = '\0';
        want = all;
    }
    ck_assert_msg(strcmp(got, want) == 0, "%s: layer %s\n got  %s\n want %s", what, mlp ? "MLPs" : "kinds", got, want);
}

/* The weight flags that are set, as words: "qk_norm qkv_bias out_bias mlp_bias sinks gate". */
static void flag_words(const struct kvp_model *m, char *out, size_t size)
{
    snprintf(out, size, "%s%s%s%s%s%s", m->qk_norm ? "qk_norm " : "", m->attn_qkv_bias ? "qkv_bias " : "",
             m->attn_out_bias ? "out_bias " : "", m->mlp_bias ? "mlp_bias " : "", m->attn_sinks ? "sinks " : "",
             m->attn_gate ? "gate " : "");
    if (out[0])
        out[strlen(out) - 1] = '\0';
}

/* Every warning, joined with " | ". */
static void warning_text(const struct kvp_model *m, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < m->n_warnings && n < size; i++)
        n += (size_t)snprintf(out + n, size - n, "%s%s", i ? " | " : "", m->warnings[i]);
}

/* The first layer of kind k, or NULL. */
static const struct kvp_layer_spec *first_of(const struct kvp_model *m, enum kvp_layer_kind k)
{
    for (uint32_t i = 0; i < m->n_layers; i++)
        if (kvp_model_layer(m, i)->kind == k)
            return kvp_model_layer(m, i);
    return NULL;
}

/* ---- core: real configs ----------------------------------------------------- */

struct want_attn {
    uint32_t heads, kv, dk, dv;
    uint32_t window; /* sliding window or chunk of the windowed layers */
};

struct want_moe {
    uint32_t experts, active, inter, shared, shared_inter;
    bool shared_gate, router_bias, expert_bias;
};

static const struct real_case {
    const char *file; /* under tests/data/hf/ */
    const char *name, *hf_id, *family;
    enum kvp_dtype dtype;
    uint64_t max_context;
    uint32_t hidden, intermediate, vocab;
    bool tied;
    uint32_t learned_positions;
    enum kvp_norm_kind norm;
    enum kvp_act_kind act;
    uint32_t norms;      /* per layer */
    const char *flags;   /* see flag_words */
    uint32_t layers;
    const char *kinds;   /* per layer, or one letter for all */
    const char *mlps;    /* per layer, or one letter for all */
    struct want_attn attn;         /* every attention or MLA layer */
    uint32_t kv_lora_rank, qk_rope_dim, q_lora_rank;
    struct kvp_recurrent rec;      /* every recurrent layer */
    struct want_moe moe;
    const char *warnings; /* joined with " | " */
} real_cases[] = {
    /* shared/hf-configs */
    {.file = "deepseek-v2-lite.json", .name = "deepseek-v2-lite", .hf_id = "", .family = "deepseek_v2",
     .dtype = KVP_DTYPE_BF16, .max_context = 163840, .hidden = 2048, .intermediate = 10944, .vocab = 102400,
     .norms = 2, .flags = "", .layers = 27, .kinds = "M", .mlps = "dmmmmmmmmmmmmmmmmmmmmmmmmmm",
     .attn = {16, 1, 192, 128, 0}, .kv_lora_rank = 512, .qk_rope_dim = 64, .q_lora_rank = 0,
     .moe = {64, 6, 1408, 2, 1408, false, false, false}, .warnings = ""},
    {.file = "falcon-7b.json", .name = "falcon-7b", .hf_id = "", .family = "RefinedWebModel",
     .dtype = KVP_DTYPE_BF16, .max_context = 2048, .hidden = 4544, .intermediate = 18176, .vocab = 65024,
     .tied = true, .norm = KVP_NORM_LAYER, .act = KVP_ACT_PLAIN, .norms = 1, .flags = "", .layers = 32,
     .kinds = "F", .mlps = "d", .attn = {71, 1, 64, 64, 0},
     .warnings = "absent keys took the 'RefinedWebModel' defaults: max_position_embeddings 2048"},
    {.file = "gemma-2-9b.json", .name = "gemma-2-9b", .hf_id = "", .family = "gemma2", .dtype = KVP_DTYPE_BF16,
     .max_context = 8192, .hidden = 3584, .intermediate = 14336, .vocab = 256000, .tied = true, .norms = 4,
     .flags = "", .layers = 42, .kinds = "SFSFSFSFSFSFSFSFSFSFSFSFSFSFSFSFSFSFSFSFSF", .mlps = "d",
     .attn = {16, 8, 256, 256, 4096}, .warnings = ""},
    {.file = "llama-2-7b.json", .name = "llama-2-7b", .hf_id = "", .family = "llama", .dtype = KVP_DTYPE_F16,
     .max_context = 2048, .hidden = 4096, .intermediate = 11008, .vocab = 32000, .norms = 2, .flags = "",
     .layers = 32, .kinds = "F", .mlps = "d", .attn = {32, 32, 128, 128, 0}, .warnings = ""},
    {.file = "llama-3.1-8b.json", .name = "llama-3.1-8b", .hf_id = "", .family = "llama", .dtype = KVP_DTYPE_BF16,
     .max_context = 131072, .hidden = 4096, .intermediate = 14336, .vocab = 128256, .norms = 2, .flags = "",
     .layers = 32, .kinds = "F", .mlps = "d", .attn = {32, 8, 128, 128, 0}, .warnings = ""},
    {.file = "mistral-7b-v0.1.json", .name = "mistral-7b-v0.1", .hf_id = "", .family = "mistral",
     .dtype = KVP_DTYPE_BF16, .max_context = 32768, .hidden = 4096, .intermediate = 14336, .vocab = 32000,
     .norms = 2, .flags = "", .layers = 32, .kinds = "S", .mlps = "d", .attn = {32, 8, 128, 128, 4096},
     .warnings = ""},
    {.file = "mixtral-8x7b-v0.1.json", .name = "mixtral-8x7b-v0.1", .hf_id = "", .family = "mixtral",
     .dtype = KVP_DTYPE_BF16, .max_context = 32768, .hidden = 4096, .intermediate = 14336, .vocab = 32000,
     .norms = 2, .flags = "", .layers = 32, .kinds = "F", .mlps = "m", .attn = {32, 8, 128, 128, 0},
     .moe = {8, 2, 14336, 0, 14336, false, false, false}, .warnings = ""},
    {.file = "opt-13b.json", .name = "opt-13b", .hf_id = "", .family = "opt", .dtype = KVP_DTYPE_BF16,
     .max_context = 2048, .hidden = 5120, .intermediate = 20480, .vocab = 50272, .tied = true,
     .learned_positions = 2050, .norm = KVP_NORM_LAYER, .act = KVP_ACT_PLAIN, .norms = 2,
     .flags = "qkv_bias out_bias mlp_bias", .layers = 40, .kinds = "F", .mlps = "d", .attn = {40, 40, 128, 128, 0},
     .warnings = "no 'torch_dtype' in the config: assumed bf16"},
    /* Phi-3: transformers applies sliding_window to every layer */
    {.file = "phi-3-mini-4k-instruct.json", .name = "phi-3-mini-4k-instruct", .hf_id = "", .family = "phi3",
     .dtype = KVP_DTYPE_BF16, .max_context = 4096, .hidden = 3072, .intermediate = 8192, .vocab = 32064,
     .norms = 2, .flags = "", .layers = 32, .kinds = "S", .mlps = "d", .attn = {32, 32, 96, 96, 2047},
     .warnings = ""},
    /* use_sliding_window false: the 131072 window is off */
    {.file = "qwen2.5-7b.json", .name = "qwen2.5-7b", .hf_id = "", .family = "qwen2", .dtype = KVP_DTYPE_BF16,
     .max_context = 131072, .hidden = 3584, .intermediate = 18944, .vocab = 152064, .norms = 2,
     .flags = "qkv_bias", .layers = 28, .kinds = "F", .mlps = "d", .attn = {28, 4, 128, 128, 0}, .warnings = ""},
    {.file = "qwen3-30b-a3b.json", .name = "qwen3-30b-a3b", .hf_id = "", .family = "qwen3_moe",
     .dtype = KVP_DTYPE_BF16, .max_context = 40960, .hidden = 2048, .intermediate = 6144, .vocab = 151936,
     .norms = 2, .flags = "qk_norm", .layers = 48, .kinds = "F", .mlps = "m", .attn = {32, 4, 128, 128, 0},
     .moe = {128, 8, 768, 0, 768, false, false, false}, .warnings = ""},
    /* other public configs */
    {.file = "ai21-jamba-1.5-mini.json", .name = "ai21-jamba-1.5-mini", .hf_id = "", .family = "jamba",
     .dtype = KVP_DTYPE_BF16, .max_context = 262144, .hidden = 4096, .intermediate = 14336, .vocab = 65536,
     .norms = 2, .flags = "", .layers = 32, .kinds = "RRRRFRRRRRRRFRRRRRRRFRRRRRRRFRRR",
     .mlps = "dmdmdmdmdmdmdmdmdmdmdmdmdmdmdmdm", .attn = {32, 8, 128, 128, 0},
     .rec = {.kind = KVP_REC_MAMBA, .d_inner = 8192, .d_state = 16, .d_conv = 4, .dt_rank = 256, .bc_norms = true},
     .moe = {16, 2, 14336, 0, 14336, false, false, false}, .warnings = ""},
    {.file = "deepseek-v3.json", .name = "deepseek-v3", .hf_id = "", .family = "deepseek_v3",
     .dtype = KVP_DTYPE_BF16, .max_context = 163840, .hidden = 7168, .intermediate = 18432, .vocab = 129280,
     .norms = 2, .flags = "", .layers = 61, .kinds = "M",
     .mlps = "dddmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm", .attn = {128, 1, 192, 128, 0},
     .kv_lora_rank = 512, .qk_rope_dim = 64, .q_lora_rank = 1536, .moe = {256, 8, 2048, 1, 2048, false, true, false},
     .warnings = ""},
    /* first-revision Falcon-40B: RefinedWeb, n_layer/n_head/n_head_kv, the new decoder layout */
    {.file = "falcon-40b.json", .name = "falcon-40b", .hf_id = "", .family = "RefinedWeb", .dtype = KVP_DTYPE_BF16,
     .max_context = 2048, .hidden = 8192, .intermediate = 32768, .vocab = 65024, .tied = true,
     .norm = KVP_NORM_LAYER, .act = KVP_ACT_PLAIN, .norms = 2, .flags = "", .layers = 60, .kinds = "F",
     .mlps = "d", .attn = {128, 8, 64, 64, 0},
     .warnings = "absent keys took the 'RefinedWeb' defaults: max_position_embeddings 2048"},
    {.file = "gemma-3-1b-it.json", .name = "gemma-3-1b-it", .hf_id = "", .family = "gemma3_text",
     .dtype = KVP_DTYPE_BF16, .max_context = 32768, .hidden = 1152, .intermediate = 6912, .vocab = 262144,
     .tied = true, .norms = 4, .flags = "qk_norm", .layers = 26, .kinds = "SSSSSFSSSSSFSSSSSFSSSSSFSS", .mlps = "d",
     .attn = {4, 1, 256, 256, 512}, .warnings = ""},
    /* nested text_config; vocab and context are Gemma3TextConfig defaults */
    {.file = "gemma-3-27b-it.json", .name = "gemma-3-27b-it", .hf_id = "", .family = "gemma3_text",
     .dtype = KVP_DTYPE_BF16, .max_context = 131072, .hidden = 5376, .intermediate = 21504, .vocab = 262208,
     .tied = true, .norms = 4, .flags = "qk_norm", .layers = 62,
     .kinds = "SSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSS", .mlps = "d",
     .attn = {32, 16, 128, 128, 1024},
     .warnings = "absent keys took the 'gemma3_text' defaults: vocab_size 262208, max_position_embeddings 131072"},
    {.file = "gemma-3-4b-it.json", .name = "gemma-3-4b-it", .hf_id = "", .family = "gemma3_text",
     .dtype = KVP_DTYPE_BF16, .max_context = 131072, .hidden = 2560, .intermediate = 10240, .vocab = 262208,
     .tied = true, .norms = 4, .flags = "qk_norm", .layers = 34, .kinds = "SSSSSFSSSSSFSSSSSFSSSSSFSSSSSFSSSS",
     .mlps = "d", .attn = {8, 4, 256, 256, 1024},
     .warnings = "absent keys took the 'gemma3_text' defaults: vocab_size 262208, max_position_embeddings 131072, "
                 "num_attention_heads 8, num_key_value_heads 4, head_dim 256"},
    {.file = "gpt-oss-20b.json", .name = "gpt-oss-20b", .hf_id = "", .family = "gpt_oss", .dtype = KVP_DTYPE_BF16,
     .max_context = 131072, .hidden = 2880, .intermediate = 2880, .vocab = 201088, .norms = 2,
     .flags = "qkv_bias out_bias sinks", .layers = 24, .kinds = "SFSFSFSFSFSFSFSFSFSFSFSF", .mlps = "m",
     .attn = {64, 8, 64, 64, 128}, .moe = {32, 4, 2880, 0, 2880, false, true, true},
     .warnings = "no 'torch_dtype' in the config: assumed bf16"},
    {.file = "gpt2.json", .name = "gpt2", .hf_id = "", .family = "gpt2", .dtype = KVP_DTYPE_BF16,
     .max_context = 1024, .hidden = 768, .intermediate = 3072, .vocab = 50257, .tied = true,
     .learned_positions = 1024, .norm = KVP_NORM_LAYER, .act = KVP_ACT_PLAIN, .norms = 2,
     .flags = "qkv_bias out_bias mlp_bias", .layers = 12, .kinds = "F", .mlps = "d", .attn = {12, 12, 64, 64, 0},
     .warnings = "no 'torch_dtype' in the config: assumed bf16"},
    /* nested text_config; NoPE every 4th layer is global, the others chunked */
    {.file = "llama-4-scout-17b-16e.json", .name = "llama-4-scout-17b-16e", .hf_id = "", .family = "llama4_text",
     .dtype = KVP_DTYPE_BF16, .max_context = 262144, .hidden = 5120, .intermediate = 16384, .vocab = 202048,
     .norms = 2, .flags = "", .layers = 48, .kinds = "CCCFCCCFCCCFCCCFCCCFCCCFCCCFCCCFCCCFCCCFCCCFCCCF",
     .mlps = "m", .attn = {40, 8, 128, 128, 8192}, .moe = {16, 1, 8192, 1, 8192, false, false, false},
     .warnings = ""},
    {.file = "olmo-7b-hf.json", .name = "olmo-7b-hf", .hf_id = "", .family = "olmo", .dtype = KVP_DTYPE_F32,
     .max_context = 2048, .hidden = 4096, .intermediate = 11008, .vocab = 50304, .norms = 2, .flags = "",
     .layers = 32, .kinds = "F", .mlps = "d", .attn = {32, 32, 128, 128, 0},
     .warnings = "unknown model_type 'olmo': read the generic fields"},
    {.file = "opt-350m.json", .name = "opt-350m", .hf_id = "facebook/opt-350m", .family = "opt",
     .dtype = KVP_DTYPE_F16, .max_context = 2048, .hidden = 1024, .intermediate = 4096, .vocab = 50272,
     .tied = true, .learned_positions = 2050, .norm = KVP_NORM_LAYER, .act = KVP_ACT_PLAIN, .norms = 2,
     .flags = "qkv_bias out_bias mlp_bias", .layers = 24, .kinds = "F", .mlps = "d", .attn = {16, 16, 64, 64, 0},
     .warnings = "'word_embed_proj_dim' 512 differs from 'hidden_size' 1024: project_in/project_out are not counted"},
    /* Qwen2-MoE: q/k/v biases without an o bias; one gated shared expert */
    {.file = "qwen1.5-moe-a2.7b.json", .name = "qwen1.5-moe-a2.7b", .hf_id = "", .family = "qwen2_moe",
     .dtype = KVP_DTYPE_BF16, .max_context = 8192, .hidden = 2048, .intermediate = 5632, .vocab = 151936,
     .norms = 2, .flags = "qkv_bias", .layers = 24, .kinds = "F", .mlps = "m", .attn = {16, 16, 128, 128, 0},
     .moe = {60, 4, 1408, 1, 5632, true, false, false}, .warnings = ""},
    {.file = "qwen3-next-80b-a3b-instruct.json", .name = "qwen3-next-80b-a3b-instruct", .hf_id = "",
     .family = "qwen3_next", .dtype = KVP_DTYPE_BF16, .max_context = 262144, .hidden = 2048, .intermediate = 5120,
     .vocab = 151936, .norms = 2, .flags = "qk_norm gate", .layers = 48,
     .kinds = "RRRFRRRFRRRFRRRFRRRFRRRFRRRFRRRFRRRFRRRFRRRFRRRF", .mlps = "m", .attn = {16, 2, 256, 256, 0},
     .rec = {.kind = KVP_REC_GDN, .d_conv = 4, .n_heads = 32, .n_k_heads = 16, .k_head_dim = 128, .v_head_dim = 128},
     .moe = {512, 10, 512, 1, 512, true, false, false}, .warnings = ""},
};

static void check_identity(const struct kvp_model *m, const struct real_case *c)
{
    ck_assert_str_eq(m->name, c->name);
    ck_assert_str_eq(m->hf_id, c->hf_id);
    ck_assert_str_eq(m->family, c->family);
    ck_assert_msg(strstr(m->source, c->file) != NULL, "source '%s'", m->source);
    ck_assert_int_eq(m->dtype, c->dtype);
    ck_assert_int_eq(m->state_dtype, c->dtype);
    ck_assert_uint_eq(m->max_context, c->max_context);
}

static void check_weights(const struct kvp_model *m, const struct real_case *c)
{
    char flags[128];
    ck_assert_uint_eq(m->hidden, c->hidden);
    ck_assert_uint_eq(m->intermediate, c->intermediate);
    ck_assert_uint_eq(m->vocab, c->vocab);
    ck_assert_int_eq(m->tied_embeddings, c->tied);
    ck_assert_uint_eq(m->learned_positions, c->learned_positions);
    ck_assert_int_eq(m->norm, c->norm);
    ck_assert_int_eq(m->act, c->act);
    ck_assert_uint_eq(m->norms_per_layer, c->norms);
    flag_words(m, flags, sizeof flags);
    ck_assert_str_eq(flags, c->flags);
}

/* Every layer of each kind has the expected shape. */
static void check_shapes(const struct kvp_model *m, const struct real_case *c)
{
    for (uint32_t i = 0; i < m->n_layers; i++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, i);
        if (s->kind == KVP_LAYER_RECURRENT) {
            ck_assert_msg(memcmp(&s->rec, &c->rec, sizeof s->rec) == 0, "%s: layer %u recurrent dims", c->file, i);
            continue;
        }
        ck_assert_uint_eq(s->n_heads, c->attn.heads);
        ck_assert_uint_eq(s->n_kv_heads, c->attn.kv);
        ck_assert_uint_eq(s->head_dim_k, c->attn.dk);
        ck_assert_uint_eq(s->head_dim_v, c->attn.dv);
        ck_assert_uint_eq(s->window, s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED ? c->attn.window : 0);
        ck_assert_uint_eq(s->kv_lora_rank, c->kv_lora_rank);
        ck_assert_uint_eq(s->qk_rope_dim, c->qk_rope_dim);
        ck_assert_uint_eq(s->q_lora_rank, c->q_lora_rank);
    }
}

static void check_moe(const struct kvp_model *m, const struct real_case *c)
{
    ck_assert_uint_eq(m->n_experts, c->moe.experts);
    ck_assert_uint_eq(m->n_experts_active, c->moe.active);
    ck_assert_uint_eq(m->expert_intermediate, c->moe.inter);
    ck_assert_uint_eq(m->n_shared_experts, c->moe.shared);
    ck_assert_uint_eq(m->shared_intermediate, c->moe.shared_inter);
    ck_assert_int_eq(m->shared_expert_gate, c->moe.shared_gate);
    ck_assert_int_eq(m->router_bias, c->moe.router_bias);
    ck_assert_int_eq(m->expert_bias, c->moe.expert_bias);
}

START_TEST(real_config)
{
    const struct real_case *c = &real_cases[_i];
    char path[256], warnings[KVP_MAX_WARNINGS * KVP_TEXT_MAX];
    struct kvp_model *m;

    snprintf(path, sizeof path, HF_DIR "%s", c->file);
    m = load_ok(path);
    check_identity(m, c);
    check_weights(m, c);
    ck_assert_uint_eq(m->n_layers, c->layers);
    check_letters(m, false, c->kinds, c->file);
    check_letters(m, true, c->mlps, c->file);
    check_shapes(m, c);
    check_moe(m, c);
    warning_text(m, warnings, sizeof warnings);
    ck_assert_str_eq(warnings, c->warnings);
    kvp_model_free(m);
}
END_TEST

/* `kvplan import`: the model emitted as kvplan YAML reads back equal. */
START_TEST(round_trip)
{
    const struct real_case *c = &real_cases[_i];
    char path[256], *yaml = NULL;
    struct kvp_error err = {0};
    struct kvp_model *m, back;

    snprintf(path, sizeof path, HF_DIR "%s", c->file);
    m = load_ok(path);
    ck_assert_kvp_ok(kvp_model_emit_yaml(m, &yaml, &err), err);
    kvp_model_init(&back);
    ck_assert_kvp_ok(kvp_model_parse_yaml(yaml, strlen(yaml), "emitted.yaml", &back, &err), err);
    memcpy(back.file, m->file, sizeof back.file); /* set by kvp_model_load only */
    back.n_warnings = m->n_warnings;               /* warnings are not part of the format */
    memcpy(back.warnings, m->warnings, sizeof back.warnings);
    { /* a stored form compares by its name (struct padding is not part of it) */
        char a[96], b[96];
        ck_assert_str_eq(kvp_wq_name(&m->wscheme.q, a, sizeof a), kvp_wq_name(&back.wscheme.q, b, sizeof b));
        ck_assert_str_eq(m->wscheme.method, back.wscheme.method);
        ck_assert_uint_eq(m->wscheme.classes, back.wscheme.classes);
        back.wscheme = m->wscheme;
    }
    ck_assert_msg(memcmp(m, &back, sizeof back) == 0, "%s: the emitted YAML reads back different:\n%s", c->file, yaml);
    free(yaml);
    kvp_model_free(m);
}
END_TEST

/* ---- core: one convention per inline config ----------------------------------
 * JSON is YAML flow syntax, so the inline configs leave out the quotes. */

#define CFG(type, layers, extra)                                                                   \
    "{model_type: " type ", num_hidden_layers: " layers ", hidden_size: 512, vocab_size: 1000, "  \
    "max_position_embeddings: 4096, torch_dtype: bfloat16" extra "}"

static const struct {
    const char *what, *json;
    const char *kinds, *mlps; /* per layer, or one letter for all */
    uint32_t kv_heads;        /* of the first attention layer; 0 = none */
    uint32_t norms;
} layer_cases[] = {
    {"mistral, null window: full", CFG("mistral", "4", ", num_attention_heads: 8, intermediate_size: 1024, "
                                                       "sliding_window: null"), "F", "d", 8, 2},
    {"qwen2 window on from max_window_layers",
     CFG("qwen2", "4", ", num_attention_heads: 8, num_key_value_heads: 2, intermediate_size: 1024, "
                       "sliding_window: 256, use_sliding_window: true, max_window_layers: 2"), "FFSS", "d", 2, 2},
    {"qwen2 window off by default",
     CFG("qwen2", "4", ", num_attention_heads: 8, intermediate_size: 1024, sliding_window: 256"), "F", "d", 8, 2},
    {"gemma2: even layers slide",
     CFG("gemma2", "4", ", num_attention_heads: 8, head_dim: 64, intermediate_size: 1024, sliding_window: 256"),
     "SFSF", "d", 8, 4},
    {"gemma3 pattern 3 from the config",
     CFG("gemma3_text", "6", ", num_attention_heads: 8, intermediate_size: 1024, sliding_window: 256, "
                             "sliding_window_pattern: 3"), "SSFSSF", "d", 4, 4},
    {"layer_types win over the pattern",
     CFG("gemma3_text", "3", ", num_attention_heads: 8, intermediate_size: 1024, sliding_window: 256, "
                             "layer_types: [full_attention, sliding_attention, full_attention]"), "FSF", "d", 4, 4},
    {"llama4: empty no_rope_layers use the interval",
     CFG("llama4_text", "8", ", num_attention_heads: 8, intermediate_size: 1024, attention_chunk_size: 1024, "
                             "no_rope_layers: [], no_rope_layer_interval: 4"), "CCCFCCCF", "d", 8, 2},
    {"llama4: null chunk size turns chunking off",
     CFG("llama4_text", "4", ", num_attention_heads: 8, intermediate_size: 1024, attention_chunk_size: null"),
     "F", "d", 8, 2},
    {"llama4: interleaved MoE every 2nd layer",
     CFG("llama4_text", "4", ", num_attention_heads: 8, intermediate_size: 256, intermediate_size_mlp: 1024, "
                             "num_local_experts: 4, num_experts_per_tok: 1, interleave_moe_layer_step: 2"),
     "CCCF", "dmdm", 8, 2},
    {"qwen MoE: sparse step 2, layer 3 forced dense",
     CFG("qwen2_moe", "6", ", num_attention_heads: 8, intermediate_size: 1024, moe_intermediate_size: 256, "
                           "num_experts: 8, num_experts_per_tok: 2, decoder_sparse_step: 2, mlp_only_layers: [3]"),
     "F", "dmdddm", 8, 2},
    {"deepseek: first 2 dense, then every 2nd layer",
     CFG("deepseek_v2", "6", ", num_attention_heads: 8, intermediate_size: 1024, moe_intermediate_size: 256, "
                             "n_routed_experts: 8, num_experts_per_tok: 2, "
                             "first_k_dense_replace: 2, moe_layer_freq: 2, "
                             "kv_lora_rank: 64, qk_rope_head_dim: 16, qk_nope_head_dim: 32, v_head_dim: 32, "
                             "q_lora_rank: null"), "M", "ddmdmd", 1, 2},
    {"kimi_k2 is DeepSeek-V3 shaped",
     CFG("kimi_k2", "2", ", num_attention_heads: 8, intermediate_size: 1024, kv_lora_rank: 64, "
                         "qk_rope_head_dim: 16, qk_nope_head_dim: 32, v_head_dim: 32"), "M", "d", 1, 2},
    {"falcon, new layout, one norm (Falcon2-11B)",
     CFG("falcon", "2", ", num_attention_heads: 8, num_kv_heads: 2, new_decoder_architecture: true, "
                        "num_ln_in_parallel_attn: 1"), "F", "d", 2, 1},
    {"falcon, sequential attention and MLP, no multi-query",
     CFG("falcon", "2", ", num_attention_heads: 8, multi_query: false, parallel_attn: false"), "F", "d", 8, 2},
    {"falcon, multi-query by default",
     CFG("falcon", "2", ", num_attention_heads: 8"), "F", "d", 1, 1},
    {"layer_types mamba with Mamba-2 keys",
     CFG("granitemoehybrid", "4", ", num_attention_heads: 8, intermediate_size: 1024, mamba_n_heads: 16, "
                                  "mamba_d_head: 64, mamba_n_groups: 1, mamba_d_state: 128, mamba_d_conv: 4, "
                                  "mamba_expand: 2, layer_types: [mamba, mamba, mamba, attention]"),
     "RRRF", "d", 8, 2},
    {"jamba defaults: attention at layer 4 of 8, MoE on odd layers",
     CFG("jamba", "8", ", num_attention_heads: 8, intermediate_size: 1024"), "RRRRFRRR", "dmdmdmdm", 8, 2},
};

START_TEST(layer_rules)
{
    struct kvp_model *m = parse_ok(layer_cases[_i].json, "inline.json");
    const struct kvp_layer_spec *a = first_of(m, KVP_LAYER_FULL);

    check_letters(m, false, layer_cases[_i].kinds, layer_cases[_i].what);
    check_letters(m, true, layer_cases[_i].mlps, layer_cases[_i].what);
    if (!a)
        a = first_of(m, KVP_LAYER_MLA);
    ck_assert_uint_eq(a ? a->n_kv_heads : 0, layer_cases[_i].kv_heads);
    ck_assert_uint_eq(m->norms_per_layer, layer_cases[_i].norms);
    free(m);
}
END_TEST

static const struct {
    const char *json, *file;
    const char *name, *hf_id;
} name_cases[] = {
    {CFG("llama", "1", ", num_attention_heads: 8, intermediate_size: 64, _name_or_path: meta-llama/Llama-3.1-8B"),
     "x/config.json", "llama-3.1-8b", "meta-llama/Llama-3.1-8B"},
    {CFG("llama", "1", ", num_attention_heads: 8, intermediate_size: 64, _name_or_path: /fsx/ckpt/Cosmo2 1T/"),
     "x/config.json", "cosmo2-1t", ""},
    {CFG("llama", "1", ", num_attention_heads: 8, intermediate_size: 64, _name_or_path: ./"),
     "snapshots/Mistral-Nemo-Base-2407/config.json", "mistral-nemo-base-2407", ""},
    {CFG("llama", "1", ", num_attention_heads: 8, intermediate_size: 64"), "models/SmolLM-135M.json",
     "smollm-135m", ""},
    {CFG("llama", "1", ", num_attention_heads: 8, intermediate_size: 64"), "config.json", "config", ""},
};

START_TEST(names)
{
    struct kvp_model *m = parse_ok(name_cases[_i].json, name_cases[_i].file);
    ck_assert_str_eq(m->name, name_cases[_i].name);
    ck_assert_str_eq(m->hf_id, name_cases[_i].hf_id);
    ck_assert_str_eq(m->source, name_cases[_i].file);
    free(m);
}
END_TEST

/* A config.json without _name_or_path named as `config.json` or
 * `./config.json` from inside its folder takes the folder's name (it gave
 * "config" and "."), as dir/NAME/config.json always did. */
START_TEST(names_by_folder)
{
    static const char *const labels[] = {"config.json", "./config.json", "../My-Model-7B/config.json"};
    const char *json = CFG("llama", "1", ", num_attention_heads: 8, intermediate_size: 64");
    char dir[] = "/tmp/kvplan-hf-XXXXXX", sub[64], cfg[96];
    FILE *f;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/My-Model-7B", dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", sub);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_ptr_nonnull(f = fopen(cfg, "w"));
    fputs(json, f);
    fclose(f);
    ck_assert_int_eq(chdir(sub), 0);
    for (size_t i = 0; i < N_ELEMS(labels); i++) {
        struct kvp_model *m = parse_ok(json, labels[i]);
        ck_assert_str_eq(m->name, "my-model-7b");
        free(m);
    }
    remove(cfg);
    rmdir(sub);
    rmdir(dir);
}
END_TEST

/* Multimodal: dtype, tie and the name at the top level, the rest in text_config. */
START_TEST(text_config_top_level_keys)
{
    struct kvp_model *m = parse_ok("{model_type: llava, torch_dtype: float16, tie_word_embeddings: true, "
                                   "_name_or_path: llava-hf/llava-1.5-7b-hf, text_config: {model_type: llama, "
                                   "num_hidden_layers: 2, num_attention_heads: 8, hidden_size: 512, "
                                   "intermediate_size: 1024, vocab_size: 1000, max_position_embeddings: 4096}}",
                                   "llava.json");
    ck_assert_str_eq(m->family, "llama");
    ck_assert_str_eq(m->name, "llava-1.5-7b-hf");
    ck_assert_int_eq(m->dtype, KVP_DTYPE_F16);
    ck_assert(m->tied_embeddings);
    ck_assert_uint_eq(m->n_warnings, 0);
    free(m);
}
END_TEST

/* Jamba's mamba_dt_rank "auto" (or absent) is ceil(hidden / 16). */
START_TEST(dt_rank_auto)
{
    static const struct {
        const char *json;
        uint32_t dt_rank;
    } cases[] = {
        {"{model_type: jamba, num_hidden_layers: 1, num_attention_heads: 8, hidden_size: 4001, "
         "intermediate_size: 64, vocab_size: 10, max_position_embeddings: 64, torch_dtype: bfloat16, "
         "attn_layer_period: 2, attn_layer_offset: 1, mamba_dt_rank: \"auto\"}", 251},
        {"{model_type: jamba, num_hidden_layers: 1, num_attention_heads: 8, hidden_size: 4000, "
         "intermediate_size: 64, vocab_size: 10, max_position_embeddings: 64, torch_dtype: bfloat16, "
         "attn_layer_period: 2, attn_layer_offset: 1}", 250},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = parse_ok(cases[i].json, "jamba.json");
        const struct kvp_layer_spec *s = first_of(m, KVP_LAYER_RECURRENT);
        ck_assert_ptr_nonnull(s);
        ck_assert_uint_eq(s->rec.dt_rank, cases[i].dt_rank);
        ck_assert_uint_eq(s->rec.d_inner, 2 * m->hidden);
        free(m);
    }
}
END_TEST

/* Biases: OPT's enable_bias switch, Llama's attention_bias and mlp_bias. */
START_TEST(bias_switches)
{
    static const struct {
        const char *json, *flags;
    } cases[] = {
        {CFG("opt", "1", ", num_attention_heads: 8, ffn_dim: 64, enable_bias: false"), ""},
        {CFG("llama", "1", ", num_attention_heads: 8, intermediate_size: 64, attention_bias: true"),
         "qkv_bias out_bias"},
        {CFG("llama", "1", ", num_attention_heads: 8, intermediate_size: 64, mlp_bias: true"), "mlp_bias"},
        {CFG("qwen2", "1", ", num_attention_heads: 8, intermediate_size: 64, attention_bias: null"), "qkv_bias"},
        {CFG("falcon", "1", ", num_attention_heads: 8, bias: true"), "qkv_bias out_bias mlp_bias"},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        char flags[128];
        struct kvp_model *m = parse_ok(cases[i].json, "bias.json");
        flag_words(m, flags, sizeof flags);
        ck_assert_str_eq(flags, cases[i].flags);
        free(m);
    }
}
END_TEST

/* ---- limits ------------------------------------------------------------------ */

static enum kvp_status load_model(const char *path, struct kvp_error *err)
{
    struct kvp_model *m = NULL;
    enum kvp_status st = kvp_model_load(path, &m, err);
    if (st != KVP_OK)
        ck_assert_ptr_null(m);
    kvp_model_free(m);
    return st;
}

/* Every tests/data/bad/hf-*.json fails with exactly the text of its .err file. */
START_TEST(bad_input)
{
    test_bad_files("hf-", ".json", load_model);
}
END_TEST

static const struct {
    const char *json;
    enum kvp_status code;
    const char *msg; /* NULL: the parse must succeed */
} limit_cases[] = {
    {CFG("llama", "1024", ", num_attention_heads: 8, intermediate_size: 64"), KVP_OK, NULL},
    {CFG("llama", "1025", ", num_attention_heads: 8, intermediate_size: 64"), KVP_ERR_RANGE,
     "'num_hidden_layers' must be at most 1024 (got 1025)"},
    {CFG("llama", "1", ", num_attention_heads: 4294967296, intermediate_size: 64"), KVP_ERR_RANGE,
     "'num_attention_heads' must be at most 4294967295 (got 4294967296)"},
    {CFG("llama", "1", ", num_attention_heads: 1024, intermediate_size: 64"), KVP_ERR_RANGE,
     "'num_attention_heads' must not exceed the hidden size without a 'head_dim' (got 1024 and 512)"},
    {"{model_type: gpt2, n_layer: 1, n_head: 1, n_embd: 1073741824, vocab_size: 10, n_positions: 64}",
     KVP_ERR_RANGE, "'n_embd' gives a width that does not fit in 32 bits (4 x 1073741824)"},
    {"{model_type: jamba, num_hidden_layers: 1, num_attention_heads: 8, hidden_size: 2147483648, "
     "intermediate_size: 64, vocab_size: 10, max_position_embeddings: 64, torch_dtype: bfloat16, "
     "attn_layer_period: 2, attn_layer_offset: 1}",
     KVP_ERR_RANGE, "'mamba_expand' gives a width that does not fit in 32 bits (2 x 2147483648)"},
    {"{model_type: opt, num_hidden_layers: 1, num_attention_heads: 1, hidden_size: 8, ffn_dim: 8, vocab_size: 10, "
     "max_position_embeddings: 4294967294, torch_dtype: float16}",
     KVP_ERR_RANGE, "'max_position_embeddings' is too large (got 4294967294)"},
    {"{model_type: llama, num_hidden_layers: 1, num_attention_heads: 8, hidden_size: 512, intermediate_size: 64, "
     "vocab_size: 10, max_position_embeddings: 18446744073709551615, torch_dtype: bfloat16}", KVP_OK, NULL},
    {"", KVP_ERR_SCHEMA, "the file is empty"},
    {CFG("llama", "2", ", num_attention_heads: 8, intermediate_size: 64, layer_types: full_attention"),
     KVP_ERR_SCHEMA, "'layer_types' must be a sequence, not a scalar"},
    {CFG("llama", "1", ", num_attention_heads: 8, intermediate_size: 64, layer_types: [[full_attention]]"),
     KVP_ERR_SCHEMA, "'layer_types' entries must be strings"},
    {CFG("llama", "2", ", num_attention_heads: 8, intermediate_size: 64, linear_num_value_heads: 4, "
                       "linear_num_key_heads: 2, linear_key_head_dim: 8, linear_value_head_dim: 8, "
                       "linear_conv_kernel_dim: 4, mamba_d_state: 16, mamba_d_conv: 4, mamba_expand: 2, "
                       "layer_types: [linear_attention, mamba]"),
     KVP_ERR_UNSUPPORTED, "a model with both gdn and mamba layers is not supported"},
    {CFG("qwen3_next", "4", ", num_attention_heads: 8, intermediate_size: 64, full_attention_interval: 0"),
     KVP_ERR_RANGE, "'full_attention_interval' must be positive (got 0)"},
    {CFG("qwen2_moe", "2", ", num_attention_heads: 8, intermediate_size: 64, num_experts: 4, "
                           "num_experts_per_tok: 2, decoder_sparse_step: 0"),
     KVP_ERR_RANGE, "'decoder_sparse_step' must be positive (got 0)"},
    {CFG("gemma2", "2", ", num_attention_heads: 8, intermediate_size: 64"), KVP_ERR_SCHEMA,
     "missing required key 'sliding_window'"},
};

START_TEST(limits)
{
    struct kvp_model m;
    struct kvp_error err = {0};
    const char *json = limit_cases[_i].json;
    enum kvp_status st;

    kvp_model_init(&m);
    st = kvp_model_parse_hf(json, strlen(json), "limits.json", &m, &err);
    if (st == KVP_OK)
        st = kvp_model_validate(&m, &err);
    ck_assert_msg(st == limit_cases[_i].code, "case %d: status %d, want %d (%s)", _i, st, limit_cases[_i].code,
                  err.msg);
    if (limit_cases[_i].msg)
        ck_assert_str_eq(err.msg, limit_cases[_i].msg);
}
END_TEST

/* Warnings come in the order the importer meets what it assumed. */
/* ---- safetensors headers: claims checked against the file ---- */

#define ST_DIR "build/check_hf-st"

/* ST_DIR/model.safetensors: the 8-byte length, json, then `data` zero bytes. */
static void write_shard(const char *json, uint64_t data)
{
    FILE *f = fopen(ST_DIR "/model.safetensors", "wb");
    uint64_t n = strlen(json);
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 8; i++)
        ck_assert_int_ne(fputc((int)(n >> (8 * i) & 0xff), f), EOF);
    ck_assert_uint_eq(fwrite(json, 1, n, f), n);
    for (uint64_t i = 0; i < data; i++)
        ck_assert_int_ne(fputc(0, f), EOF);
    ck_assert_int_eq(fclose(f), 0);
}

/* ST_DIR/config.json: a copy of the config at path. */
static void write_config(const char *path)
{
    char config[1 << 16];
    FILE *f = fopen(path, "rb");
    size_t n;
    ck_assert_ptr_nonnull(f);
    n = fread(config, 1, sizeof config, f);
    fclose(f);
    (void)mkdir("build", 0755);
    (void)mkdir(ST_DIR, 0755);
    f = fopen(ST_DIR "/config.json", "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(config, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Each shard's tensors tile its data from 0, without a hole or an overlap,
 * each one its shape's values times its dtype's size, the data ending where
 * the file does (safetensors' Metadata::validate and SafeTensors::deserialize):
 * else an error, not weights counted twice or wrapped (issue #37: a 130-byte
 * shard claimed 8 EiB, overlapping tensors were counted twice). A file that
 * ends before its data is a header alone: it loads, with a warning. */
START_TEST(safetensors_claims_checked)
{
    static const char two[] = "{\"a\": {\"dtype\": \"F16\", \"shape\": [2, 3], \"data_offsets\": [0, 12]}, "
                              "\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [12, 28]}}";
    static const struct {
        const char *what, *json;
        uint64_t data;
        enum kvp_status st;
        const char *msg; /* in the error, or in the last warning when it loads; NULL: no warning */
    } cases[] = {
        {"whole", two, 28, KVP_OK, NULL},
        {"header alone", two, 0, KVP_OK, "1 of 1 safetensors files end before their tensors' data"},
        {"a byte past the data", two, 29, KVP_ERR_SCHEMA, "the data must end where the file does"},
        {"overlap", "{\"a\": {\"dtype\": \"F16\", \"shape\": [2, 3], \"data_offsets\": [0, 12]}, "
                    "\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}",
         24, KVP_ERR_SCHEMA, "'b' begins at byte 8 of the data, where a ends at 12"},
        {"hole", "{\"a\": {\"dtype\": \"F16\", \"shape\": [2, 3], \"data_offsets\": [0, 12]}, "
                 "\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [16, 32]}}",
         32, KVP_ERR_SCHEMA, "'b' begins at byte 16 of the data, where a ends at 12"},
        {"span not the shape's", "{\"a\": {\"dtype\": \"F16\", \"shape\": [2, 3], \"data_offsets\": [0, 10]}}", 10,
         KVP_ERR_SCHEMA, "'a': 'data_offsets' span 10 bytes, its shape and dtype F16 make another size"},
        {"2^63 values of F16", "{\"a\": {\"dtype\": \"F16\", \"shape\": [9223372036854775808], "
                               "\"data_offsets\": [0, 0]}}", 0, KVP_ERR_SCHEMA, "more than 2^64"},
    };
    write_config(HF_DIR "llama-3.1-8b.json");
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = NULL;
        struct kvp_error err = {0};
        enum kvp_status st;
        write_shard(cases[i].json, cases[i].data);
        st = kvp_model_load(ST_DIR, &m, &err);
        ck_assert_msg(st == cases[i].st, "%s: status %d (%s)", cases[i].what, st, err.msg);
        if (st != KVP_OK) {
            ck_assert_msg(strstr(err.msg, cases[i].msg), "%s: '%s'", cases[i].what, err.msg);
            continue;
        }
        ck_assert_uint_eq(m->wtable.rows[0].bytes + m->wtable.rows[1].bytes, 28);
        if (cases[i].msg)
            ck_assert_msg(m->n_warnings && strstr(m->warnings[m->n_warnings - 1], cases[i].msg), "%s: %s",
                          cases[i].what, m->n_warnings ? m->warnings[m->n_warnings - 1] : "no warning");
        else
            for (uint32_t w = 0; w < m->n_warnings; w++)
                ck_assert_msg(!strstr(m->warnings[w], "safetensors"), "%s: %s", cases[i].what, m->warnings[w]);
        kvp_model_free(m);
    }
    remove(ST_DIR "/model.safetensors");
    remove(ST_DIR "/config.json");
    remove(ST_DIR);
}
END_TEST

/* A multimodal config's vision tower and projector, counted from its
 * vision_config (hf_tower.c): the tower and the whole model against the
 * published totals -- Gemma 3 technical report, table 1 (vision encoder
 * 417M; 4B: 675M embedding + 3,209M non-embedding; 12B: 1,012M + 10,759M;
 * 27B: 1,416M + 25,600M), Mistral Small 3.1's card (24B), Llama 4 Scout's
 * card (109B total), Qwen2-VL-7B's and Qwen2.5-VL-7B's (8.29B). The tower is in the model dtype under a chosen weight
 * format, and out of a GGUF (llama.cpp's mmproj file holds it). */
START_TEST(vision_towers_published)
{
    static const struct {
        const char *file;
        uint64_t tower, published;
    } cases[] = {
        /* SigLIP 416,866,032 + Gemma3MultiModalProjector 1152 x hidden + 1152 */
        {"gemma-3-4b-it.json", 416866032ull + 1152 * 2560 + 1152, 4301000000ull},
        {"gemma-3-12b-it.json", 416866032ull + 1152 * 3840 + 1152, 12188000000ull},
        {"gemma-3-27b-it.json", 416866032ull + 1152 * 5376 + 1152, 27433000000ull},
        /* Pixtral 403,305,472 + Mistral3 projector: norm, merger 4096 x 1024, 1024 x 5120, 5120 x 5120 */
        {"mistral-small-3.1-24b-instruct-2503.json", 403305472ull + 1024 + 4096 * 1024 + 1024 * 5120 + 5120 * 5120,
         24000000000ull},
        /* Llama 4 vision 850,960,896 (pixel-shuffle adapter included) + 4096 x 5120 */
        {"llama-4-scout-17b-16e.json", 850960896ull + 4096ull * 5120, 109000000000ull},
        /* Qwen2-VL / Qwen2.5-VL 7B: their cards' 8.29B; the merger (4 x 1280 wide, into 3584) is the projector */
        {"qwen2-vl-7b-instruct.json", 631183360ull + 2 * 1280 + 5120ull * 5121 + 5121ull * 3584, 8290000000ull},
        {"qwen2.5-vl-7b-instruct.json", 631975680ull + 1280 + 5120ull * 5121 + 5121ull * 3584, 8290000000ull},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        char path[256];
        struct kvp_model *m;
        struct kvp_weights w, q, g;
        struct kvp_wstore int4, gguf;
        struct kvp_error err = {0};
        double off;

        snprintf(path, sizeof path, HF_DIR "%s", cases[i].file);
        m = load_ok(path);
        ck_assert_msg(m->tower_params == cases[i].tower, "%s: tower %llu, want %llu", cases[i].file,
                      (unsigned long long)m->tower_params, (unsigned long long)cases[i].tower);
        ck_assert_kvp_ok(kvp_weights_compute(m, NULL, &w, &err), err);
        off = ((double)w.params - (double)cases[i].published) / (double)cases[i].published;
        ck_assert_msg(off > -0.005 && off < 0.005, "%s: %llu params, %.2f%% off the published", cases[i].file,
                      (unsigned long long)w.params, 100 * off);
        ck_assert_uint_eq(w.tower_params, cases[i].tower);
        ck_assert_uint_eq(w.tower_bytes, 2 * cases[i].tower);
        ck_assert_uint_eq(w.embedding_params + w.attention_params + w.mlp_params + w.norm_params + w.tower_params,
                          w.params);
        ck_assert_uint_le(w.active_params, w.params - w.tower_params);
        ck_assert_kvp_ok(kvp_wstore_parse("int4", false, &int4, &err), err);
        ck_assert_kvp_ok(kvp_weights_compute(m, &int4, &q, &err), err);
        ck_assert_uint_eq(q.tower_bytes, 2 * cases[i].tower);
        ck_assert_kvp_ok(kvp_wstore_parse("q4_k_m", true, &gguf, &err), err);
        ck_assert_kvp_ok(kvp_weights_compute(m, &gguf, &g, &err), err);
        ck_assert_uint_eq(g.tower_params, 0);
        ck_assert_uint_eq(g.params, w.params - w.tower_params);
        kvp_model_free(m);
    }
}
END_TEST

/* Safetensors headers price the tower by its tensors' names, its layers not
 * taken for MTP ones (SigLIP's layer 40 of a 34-layer text model), and the
 * parameters become the headers' own; the text model's layers past
 * num_hidden_layers are left out and counted apart. */
START_TEST(vision_tower_from_headers)
{
    static const char json[] =
        "{\"language_model.model.layers.0.mlp.down_proj.weight\": {\"dtype\": \"BF16\", \"shape\": [4, 4], "
        "\"data_offsets\": [0, 32]}, "
        "\"vision_tower.vision_model.encoder.layers.40.mlp.fc1.weight\": {\"dtype\": \"BF16\", \"shape\": [8, 2], "
        "\"data_offsets\": [32, 64]}, "
        "\"multi_modal_projector.mm_input_projection_weight\": {\"dtype\": \"F32\", \"shape\": [2], "
        "\"data_offsets\": [64, 72]}, "
        "\"language_model.model.layers.34.mlp.down_proj.weight\": {\"dtype\": \"BF16\", \"shape\": [2], "
        "\"data_offsets\": [72, 76]}}";
    struct kvp_model *m = NULL, *cfg;
    struct kvp_weights w, wc;
    struct kvp_error err = {0};

    write_config(HF_DIR "gemma-3-4b-it.json");
    write_shard(json, 76);
    ck_assert_kvp_ok(kvp_model_load(ST_DIR, &m, &err), err);
    ck_assert_uint_eq(m->wtable.tower_params, 18);
    ck_assert_uint_eq(m->wtable.tower_bytes, 40);
    ck_assert_uint_eq(m->wtable.mtp_tensors, 1);
    ck_assert_uint_eq(m->wtable.mtp_bytes, 4);
    ck_assert_kvp_ok(kvp_weights_compute(m, NULL, &w, &err), err);
    ck_assert_uint_eq(w.bytes, 72);
    ck_assert_uint_eq(w.tower_bytes, 40);
    ck_assert_uint_eq(w.tower_params, 18);
    cfg = load_ok(HF_DIR "gemma-3-4b-it.json");
    ck_assert_kvp_ok(kvp_weights_compute(cfg, NULL, &wc, &err), err);
    ck_assert_uint_eq(w.params, wc.params - wc.tower_params + 18);
    kvp_model_free(cfg);
    kvp_model_free(m);
    remove(ST_DIR "/model.safetensors");
    remove(ST_DIR "/config.json");
    remove(ST_DIR);
}
END_TEST

START_TEST(warnings_in_order)
{
    static const char json[] = "{model_type: opt, num_hidden_layers: 1, num_attention_heads: 1, hidden_size: 8, "
                               "ffn_dim: 8, vocab_size: 10, max_position_embeddings: 64, word_embed_proj_dim: 4, "
                               "text_config: {model_type: mystery, num_hidden_layers: 1, num_attention_heads: 1, "
                               "hidden_size: 8, intermediate_size: 8, vocab_size: 10, max_position_embeddings: 64, "
                               "quantization_config: {quant_method: hqq}}}";
    struct kvp_model *m = parse_ok(json, "warn.json");
    ck_assert_uint_eq(m->n_warnings, 3);
    ck_assert_str_eq(m->warnings[0], "unknown model_type 'mystery': read the generic fields");
    ck_assert_str_eq(m->warnings[1], "no 'torch_dtype' in the config: assumed bf16");
    ck_assert_str_eq(m->warnings[2], "'quantization_config' (hqq) is not applied: weights are counted in bf16");
    free(m);
}
END_TEST

/* ---- quantized checkpoints ----------------------------------------------- */

/* Published quantization_config blocks, verbatim, on a Llama-3.1-8B shape. */
static const struct quant_case {
    const char *what, *qc, *method, *wq;
    uint32_t classes;
} quant_cases[] = {
    {"Qwen/Qwen2.5-7B-Instruct-AWQ",
     "{\"bits\": 4, \"group_size\": 128, \"modules_to_not_convert\": null, \"quant_method\": \"awq\", "
     "\"version\": \"gemm\", \"zero_point\": true}",
     "awq", "packed:bits=4:group=128:zp", KVP_WC_LINEAR},
    {"Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4",
     "{\"bits\": 4, \"damp_percent\": 0.01, \"desc_act\": false, \"group_size\": 128, "
     "\"modules_in_block_to_quantize\": null, \"quant_method\": \"gptq\", \"sym\": true, \"true_sequential\": true}",
     "gptq", "packed:bits=4:group=128:zp:g_idx", KVP_WC_LINEAR},
    {"unsloth/llama-3-8b-bnb-4bit",
     "{\"bnb_4bit_compute_dtype\": \"bfloat16\", \"bnb_4bit_quant_type\": \"nf4\", \"bnb_4bit_use_double_quant\": "
     "true, \"llm_int8_enable_fp32_cpu_offload\": false, \"llm_int8_has_fp16_weight\": false, "
     "\"llm_int8_skip_modules\": null, \"llm_int8_threshold\": 6.0, \"load_in_4bit\": true, \"load_in_8bit\": false, "
     "\"quant_method\": \"bitsandbytes\"}",
     "bitsandbytes", "nf4:double", KVP_WC_LINEAR},
    {"Qwen/Qwen3-8B-FP8",
     "{\"activation_scheme\": \"dynamic\", \"modules_to_not_convert\": [\"lm_head\"], \"fmt\": \"e4m3\", "
     "\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}",
     "fp8", "fp8_e4m3:block=128x128", KVP_WC_LINEAR},
    {"RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
     "{\"config_groups\": {\"group_0\": {\"input_activations\": null, \"output_activations\": null, \"targets\": "
     "[\"Linear\"], \"weights\": {\"actorder\": null, \"block_structure\": null, \"dynamic\": false, "
     "\"group_size\": 128, \"num_bits\": 4, \"observer\": \"minmax\", \"observer_kwargs\": {}, \"strategy\": "
     "\"group\", \"symmetric\": true, \"type\": \"int\"}}}, \"format\": \"pack-quantized\", "
     "\"global_compression_ratio\": null, \"ignore\": [\"lm_head\"], \"kv_cache_scheme\": null, \"quant_method\": "
     "\"compressed-tensors\", \"quantization_status\": \"compressed\"}",
     "compressed-tensors", "packed:bits=4:group=128:scale=bf16:tensor=16", KVP_WC_LINEAR},
    {"RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic",
     "{\"config_groups\": {\"group_0\": {\"input_activations\": {\"dynamic\": true, \"num_bits\": 8, \"strategy\": "
     "\"token\", \"symmetric\": true, \"type\": \"float\"}, \"targets\": [\"Linear\"], \"weights\": {\"dynamic\": "
     "false, \"num_bits\": 8, \"strategy\": \"channel\", \"symmetric\": true, \"type\": \"float\"}}}, \"format\": "
     "\"float-quantized\", \"ignore\": [\"lm_head\"], \"quant_method\": \"compressed-tensors\"}",
     "compressed-tensors", "fp8_e4m3:scale=channel:bf16", KVP_WC_LINEAR},
    {"nvidia/Llama-3.1-8B-Instruct-FP4",
     "{\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", \"group_size\": 16, \"exclude_modules\": "
     "[\"lm_head\"], \"kv_cache_quant_algo\": \"FP8\"}",
     "modelopt", "nvfp4:tensor=8", KVP_WC_LINEAR},
    {"a config that keeps attention in bf16 (modules_to_not_convert)",
     "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 64, \"modules_to_not_convert\": "
     "[\"model.layers.*.self_attn\"]}",
     "awq", "packed:bits=4:group=64:zp", KVP_WC_LINEAR & ~(1u << KVP_WC_ATTN)},
};

START_TEST(quantized_config)
{
    const struct quant_case *c = &quant_cases[_i];
    char json[2048], name[96];
    struct kvp_model *m;
    struct kvp_weights w;
    struct kvp_error err = {0};

    snprintf(json, sizeof json,
             "{\"model_type\": \"llama\", \"num_hidden_layers\": 32, \"num_attention_heads\": 32, "
             "\"num_key_value_heads\": 8, \"hidden_size\": 4096, \"intermediate_size\": 14336, \"vocab_size\": "
             "128256, \"max_position_embeddings\": 131072, \"torch_dtype\": \"bfloat16\", \"quantization_config\": %s}",
             c->qc);
    m = parse_ok(json, "quant.json");
    ck_assert_msg(m->n_warnings == 0, "%s: %s", c->what, m->warnings[0]);
    ck_assert_str_eq(m->wscheme.method, c->method);
    ck_assert_str_eq(kvp_wq_name(&m->wscheme.q, name, sizeof name), c->wq);
    ck_assert_uint_eq(m->wscheme.classes, c->classes);
    /* the quantized part is smaller than bf16, the rest is bf16 to the byte */
    ck_assert_kvp_ok(kvp_weights_compute(m, NULL, &w, &err), err);
    ck_assert_uint_eq(w.n_parts, 2);
    ck_assert_uint_lt(w.bytes, 2 * w.params);
    ck_assert_uint_ge(w.parts[0].bytes, w.parts[1].bytes); /* most bytes first */
    for (int i = 0; i < 2; i++)
        if (strcmp(w.parts[i].name, "bf16") == 0)
            ck_assert_uint_eq(w.parts[i].bytes, 2 * w.parts[i].params);
        else
            ck_assert_str_eq(w.parts[i].name, c->wq);
    free(m);
}
END_TEST

/* One 4096 x 4096 projection in each stored form, derived by hand. */
START_TEST(quantized_tensor_bytes)
{
    static const struct {
        const char *wq;
        uint64_t bytes;
    } cases[] = {
        /* qweight 4096*4096/2 + f16 scales 32 groups*4096*2 + qzeros 32*4096/8*4 + g_idx 4096*4 */
        {"packed:bits=4:group=128:zp:g_idx", 8388608 + 262144 + 65536 + 16384},
        {"packed:bits=4:group=128:zp", 8388608 + 262144 + 65536},
        /* compressed-tensors: bf16 scales, int64 weight_shape [2] */
        {"packed:bits=4:group=128:scale=bf16:tensor=16", 8388608 + 262144 + 16},
        /* e4m3 + f32 scale_inv per 128 x 128 block: 32 x 32 scales */
        {"fp8_e4m3:block=128x128", 16777216 + 32 * 32 * 4},
        {"fp8_e4m3:scale=channel:bf16", 16777216 + 4096 * 2},
        /* nf4: codes n/2; absmax per 64: uint8 + f32 per 256 absmax + 256-entry f32 code + f32 offset;
         * the 16-entry f32 quant_map */
        {"nf4:double", 8388608 + 262144 + 1024 * 4 + 1024 + 4 + 64},
        {"nf4", 8388608 + 262144 * 4 + 64},
        {"int8:bnb", 16777216 + 4096 * 4},
        {"mxfp4", 16777216 / 32 * 17},
        {"nvfp4:tensor=8", 16777216 / 16 * 9 + 8},
        {"q4_K", 16777216 / 256 * 144},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_wq q;
        struct kvp_wtensor t = {.role = KVP_WR_ATTN_Q, .rows = 4096, .cols = 4096, .count = 1};
        struct kvp_error err = {0};
        uint64_t b;
        char name[96];
        ck_assert_kvp_ok(kvp_wq_parse(cases[i].wq, &q, &err), err);
        ck_assert_str_eq(kvp_wq_name(&q, name, sizeof name), cases[i].wq); /* names round-trip */
        ck_assert_kvp_ok(kvp_wq_tensor_bytes(&q, &t, &b, &err), err);
        ck_assert_msg(b == cases[i].bytes, "%s: %llu B, want %llu", cases[i].wq, (unsigned long long)b,
                      (unsigned long long)cases[i].bytes);
    }
}
END_TEST

/* The checkpoints' own totals: model.safetensors.index.json "total_size" of
 * openai/gpt-oss-20b (13,761,264,768 B) from its config; gpt-oss-120b's
 * (65,248,815,744 B) and DeepSeek-V3's main model from the shipped models. */
START_TEST(quantized_published_totals)
{
    static const struct {
        const char *path;
        uint64_t bytes;
    } cases[] = {
        {HF_DIR "gpt-oss-20b.json", 13761264768ull},
        {"models/gpt-oss-120b.yaml", 65248815744ull},
        {"models/gpt-oss-20b.yaml", 13761264768ull},
        /* 61 layers, no MTP: e4m3 + f32 per 128 x 128 block for every projection, bf16 for the rest */
        {"models/deepseek-v3.yaml", 673150582112ull},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct kvp_model *m = load_ok(cases[i].path);
        struct kvp_weights w;
        struct kvp_error err = {0};
        ck_assert_kvp_ok(kvp_weights_compute(m, NULL, &w, &err), err);
        ck_assert_msg(w.bytes == cases[i].bytes, "%s: %llu B, want %llu", cases[i].path,
                      (unsigned long long)w.bytes, (unsigned long long)cases[i].bytes);
        kvp_model_free(m);
    }
}
END_TEST

/* Patterns a config names that kvplan cannot apply are said, not guessed. */
START_TEST(quantized_patterns_warn)
{
    static const char json[] =
        "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
        "\"hidden_size\": 64, \"intermediate_size\": 128, \"vocab_size\": 100, "
        "\"max_position_embeddings\": 64, \"torch_dtype\": \"bfloat16\", \"quantization_config\": "
        "{\"quant_method\": \"awq\", \"modules_to_not_convert\": [\"model.layers.0.mlp\", "
        "\"frobnicator\", \"visual.blocks\"]}}";
    struct kvp_model *m = parse_ok(json, "q.json");
    ck_assert_uint_eq(m->n_warnings, 2);
    ck_assert_str_eq(m->warnings[0], "quantization_config: 'model.layers.0.mlp' leaves some layers unquantized: "
                                     "counted as quantized");
    ck_assert_str_eq(m->warnings[1], "quantization_config: module pattern 'frobnicator' not understood: counted as "
                                     "quantized");
    ck_assert_uint_eq(m->wscheme.classes, KVP_WC_LINEAR);
    free(m);
}
END_TEST

static Suite *hf_suite(void)
{
    Suite *s = suite_create("hf");
    TCase *core = tcase_create("core"), *lim = tcase_create("limits");

    tcase_add_loop_test(core, real_config, 0, (int)N_ELEMS(real_cases));
    tcase_add_loop_test(core, round_trip, 0, (int)N_ELEMS(real_cases));
    tcase_add_loop_test(core, layer_rules, 0, (int)N_ELEMS(layer_cases));
    tcase_add_loop_test(core, names, 0, (int)N_ELEMS(name_cases));
    tcase_add_test(core, names_by_folder);
    tcase_add_test(core, text_config_top_level_keys);
    tcase_add_test(core, dt_rank_auto);
    tcase_add_test(core, bias_switches);
    tcase_add_loop_test(core, quantized_config, 0, (int)N_ELEMS(quant_cases));
    tcase_add_test(core, quantized_tensor_bytes);
    tcase_add_test(core, quantized_published_totals);
    tcase_add_test(core, vision_towers_published);
    tcase_add_test(lim, vision_tower_from_headers);
    tcase_add_test(lim, quantized_patterns_warn);
    tcase_add_test(lim, bad_input);
    tcase_add_loop_test(lim, limits, 0, (int)N_ELEMS(limit_cases));
    tcase_add_test(lim, warnings_in_order);
    tcase_add_test(lim, safetensors_claims_checked);
    suite_add_tcase(s, core);
    suite_add_tcase(s, lim);
    return s;
}

int main(void)
{
    return run_suite(hf_suite());
}
