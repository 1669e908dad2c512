/* check_model.c -- the normalized model, the YAML parser and emitter.
 *
 * Every model file in models/ loads and survives emit -> parse unchanged; the stack's
 * `repeat` expands as written; each tests/data/bad/model-*.yaml fails with
 * exactly the text in its sibling .err file. Tests run from the repository root. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvplan/catalog.h"
#include "kvplan/kv.h"
#include "kvplan/format.h"
#include "kvplan/model.h"
#include "testutil.h"

#define BAD_DIR TEST_BAD_DIR

/* ---- helpers ------------------------------------------------------------ */

/* Parse YAML text into a fresh heap model; the caller frees it. */
static struct kvp_model *parse_text(const char *text, struct kvp_error *err, enum kvp_status *st)
{
    struct kvp_model *m = malloc(sizeof *m);
    ck_assert_ptr_nonnull(m);
    kvp_model_init(m);
    *st = kvp_model_parse_yaml(text, strlen(text), "inline.yaml", m, err);
    return m;
}

static struct kvp_model *parse_ok(const char *text)
{
    struct kvp_error err = {0};
    enum kvp_status st;
    struct kvp_model *m = parse_text(text, &err, &st);
    ck_assert_kvp_ok(st, err);
    ck_assert_kvp_ok(kvp_model_validate(m, &err), err);
    return m;
}

static char *emit_ok(const struct kvp_model *m)
{
    char *out = NULL;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_model_emit_yaml(m, &out, &err), err);
    ck_assert_ptr_nonnull(out);
    return out;
}

static void assert_same_spec(const struct kvp_layer_spec *a, const struct kvp_layer_spec *b, const char *what,
                             uint32_t i)
{
#define SAME(f) ck_assert_msg(a->f == b->f, "%s: spec %u: '" #f "' %llu vs %llu", what, i, \
                              (unsigned long long)a->f, (unsigned long long)b->f)
    SAME(kind);
    SAME(mlp);
    SAME(n_heads);
    SAME(n_kv_heads);
    SAME(head_dim_k);
    SAME(head_dim_v);
    SAME(window);
    SAME(shares);
    SAME(kv_lora_rank);
    SAME(qk_rope_dim);
    SAME(q_lora_rank);
    SAME(rec.kind);
    SAME(rec.d_inner);
    SAME(rec.d_state);
    SAME(rec.d_conv);
    SAME(rec.dt_rank);
    SAME(rec.n_groups);
    SAME(rec.n_heads);
    SAME(rec.n_k_heads);
    SAME(rec.k_head_dim);
    SAME(rec.v_head_dim);
    SAME(rec.bc_norms);
#undef SAME
}

/* Every field a model file carries (not `file` or warnings). */
static void assert_same_model(const struct kvp_model *a, const struct kvp_model *b, const char *what)
{
#define SAME(f) ck_assert_msg(a->f == b->f, "%s: '" #f "' %llu vs %llu", what, (unsigned long long)a->f, \
                              (unsigned long long)b->f)
#define SAME_STR(f) ck_assert_msg(strcmp(a->f, b->f) == 0, "%s: '" #f "' '%s' vs '%s'", what, a->f, b->f)
    SAME_STR(name);
    SAME_STR(hf_id);
    SAME_STR(family);
    SAME_STR(source);
    SAME(dtype);
    SAME(state_dtype);
    SAME(max_context);
    SAME(hidden);
    SAME(intermediate);
    SAME(vocab);
    SAME(tied_embeddings);
    SAME(learned_positions);
    SAME(norm);
    SAME(act);
    SAME(norms_per_layer);
    SAME(qk_norm);
    SAME(attn_qkv_bias);
    SAME(attn_out_bias);
    SAME(mlp_bias);
    SAME(attn_sinks);
    SAME(attn_gate);
    SAME(n_experts);
    SAME(n_experts_active);
    SAME(expert_intermediate);
    SAME(n_shared_experts);
    if (a->n_experts) /* without experts the width has no meaning */
        SAME(shared_intermediate);
    SAME(shared_expert_gate);
    SAME(router_bias);
    SAME(expert_bias);
    SAME(n_layers);
    SAME(n_specs);
#undef SAME
#undef SAME_STR
    for (uint32_t i = 0; i < a->n_specs; i++)
        assert_same_spec(&a->specs[i], &b->specs[i], what, i);
    for (uint32_t i = 0; i < a->n_layers; i++)
        ck_assert_msg(a->layer_spec[i] == b->layer_spec[i], "%s: layer %u: spec %u vs %u", what, i,
                      a->layer_spec[i], b->layer_spec[i]);
}

/* The engine gives the same answers (or the same refusal) for both. */
static void assert_same_numbers(const struct kvp_model *a, const struct kvp_model *b, const char *what)
{
    static const char *const fmts[][2] = {
        {"bf16", "bf16"}, {"q8_0", "f16"}, {"int2:group=32:axis=channel:residual=128", "int4"}, {"fp8", "fp8"},
    };
    const uint64_t ts[] = {0, 1, 4096, a->max_context};
    for (size_t f = 0; f < N_ELEMS(fmts); f++) {
        for (size_t t = 0; t < N_ELEMS(ts); t++) {
            struct kvp_kv_query q = {.context = ts[t], .batch = 3};
            struct kvp_kv_plan pa, pb;
            struct kvp_error ea = {0}, eb = {0};
            enum kvp_status sa, sb;
            ck_assert_kvp_ok(kvp_format_parse(fmts[f][0], &q.k, &ea), ea);
            ck_assert_kvp_ok(kvp_format_parse(fmts[f][1], &q.v, &ea), ea);
            sa = kvp_kv_compute(a, &q, &pa, &ea);
            sb = kvp_kv_compute(b, &q, &pb, &eb);
            ck_assert_msg(sa == sb, "%s: status %d vs %d", what, sa, sb);
            if (sa != KVP_OK) {
                ck_assert_str_eq(ea.msg, eb.msg);
                continue;
            }
            ck_assert_uint_eq(pa.k_bytes_per_token, pb.k_bytes_per_token);
            ck_assert_uint_eq(pa.v_bytes_per_token, pb.v_bytes_per_token);
            ck_assert_uint_eq(pa.k_bytes, pb.k_bytes);
            ck_assert_uint_eq(pa.v_bytes, pb.v_bytes);
            ck_assert_uint_eq(pa.state_bytes, pb.state_bytes);
            ck_assert_uint_eq(pa.total_bytes, pb.total_bytes);
            ck_assert_uint_eq(pa.n_specs, pb.n_specs);
            for (uint32_t i = 0; i < pa.n_specs; i++) {
                ck_assert_uint_eq(pa.spec[i].layers, pb.spec[i].layers);
                ck_assert_uint_eq(pa.spec[i].tokens, pb.spec[i].tokens);
                ck_assert_uint_eq(pa.spec[i].k_seq, pb.spec[i].k_seq);
                ck_assert_uint_eq(pa.spec[i].v_seq, pb.spec[i].v_seq);
                ck_assert_uint_eq(pa.spec[i].state_seq, pb.spec[i].state_seq);
            }
        }
    }
    {
        static const char *const wfs[] = {"bf16", "int4:group=128"};
        for (size_t i = 0; i < N_ELEMS(wfs); i++) {
            struct kvp_wstore wf;
            struct kvp_weights wa, wb;
            struct kvp_error ea = {0}, eb = {0};
            ck_assert_kvp_ok(kvp_wstore_parse(wfs[i], false, &wf, &ea), ea);
            ck_assert_int_eq(kvp_weights_compute(a, &wf, &wa, &ea), kvp_weights_compute(b, &wf, &wb, &eb));
            ck_assert_uint_eq(wa.params, wb.params);
            ck_assert_uint_eq(wa.active_params, wb.active_params);
            ck_assert_uint_eq(wa.bytes, wb.bytes);
            ck_assert_uint_eq(wa.active_bytes, wb.active_bytes);
        }
    }
}

/* Emit m, parse it back, emit again: the same model and the same text. */
static void assert_round_trip(const struct kvp_model *m, const char *what)
{
    char *first = emit_ok(m), *second;
    struct kvp_error err = {0};
    enum kvp_status st;
    struct kvp_model *back = parse_text(first, &err, &st);
    char ebuf[KVP_ERROR_TEXT_MAX];

    ck_assert_msg(st == KVP_OK, "%s: emitted YAML does not parse: %s\n%s", what,
                  kvp_error_text(&err, ebuf, sizeof ebuf), first);
    ck_assert_kvp_ok(kvp_model_validate(back, &err), err);
    second = emit_ok(back);
    ck_assert_msg(strcmp(first, second) == 0, "%s: emit differs after a round trip:\n%s\n---\n%s", what, first,
                  second);
    assert_same_model(m, back, what);
    assert_same_numbers(m, back, what);
    free(first);
    free(second);
    kvp_model_free(back);
}

/* ---- the shipped models ------------------------------------------------- */

/* A kvplan model file starts (after comments) with the 'kvplan:' key; other
 * YAML in models/ (a GPU catalog) is skipped. */
static bool is_model_file(const char *text)
{
    const char *p = text;
    while (*p == '#' || *p == '\n' || *p == '\r') {
        if (*p == '#')
            p += strcspn(p, "\n");
        else
            p++;
    }
    return test_starts_with(p, "kvplan:") || strstr(text, "\nkvplan:") != NULL;
}

START_TEST(shipped_models_round_trip)
{
    DIR *d = opendir("models");
    struct dirent *e;
    int n = 0;

    ck_assert_msg(d != NULL, "cannot open models/ (run from the repository root)");
    while ((e = readdir(d)) != NULL) {
        char path[512];
        char *text;
        struct kvp_model *m = NULL;
        struct kvp_error err = {0};
        if (!test_ends_with(e->d_name, ".yaml"))
            continue;
        snprintf(path, sizeof path, "models/%s", e->d_name);
        text = test_slurp(path);
        ck_assert_msg(text != NULL, "cannot read %s", path);
        if (!is_model_file(text)) {
            free(text);
            continue;
        }
        free(text);
        ck_assert_kvp_ok(kvp_model_load(path, &m, &err), err);
        ck_assert_str_eq(m->file, path);
        ck_assert_uint_gt(m->n_layers, 0);
        ck_assert_uint_gt(m->n_specs, 0);
        /* the file name is the model's name */
        {
            char want[256];
            snprintf(want, sizeof want, "%s.yaml", m->name);
            ck_assert_str_eq(e->d_name, want);
        }
        assert_round_trip(m, path);
        kvp_model_free(m);
        n++;
    }
    closedir(d);
    ck_assert_int_ge(n, 1);
}
END_TEST

/* ---- models built in code: every kind through the emitter ---------------- */

static struct kvp_layer_spec spec_of(enum kvp_layer_kind kind, enum kvp_mlp_kind mlp)
{
    struct kvp_layer_spec s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.mlp = mlp;
    if (kind != KVP_LAYER_RECURRENT && kind != KVP_LAYER_NONE) {
        s.n_heads = 16;
        s.n_kv_heads = kind == KVP_LAYER_MLA ? 1 : 4;
        s.head_dim_k = s.head_dim_v = 128;
    }
    return s;
}

static void add(struct kvp_model *m, const struct kvp_layer_spec *s, uint32_t n)
{
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_model_add_layers(m, s, n, &err), err);
}

static void base(struct kvp_model *m, const char *name)
{
    kvp_model_init(m);
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->source, sizeof m->source, "https://example.org/config.json#built: in code");
    m->hidden = 2048;
    m->intermediate = 8192;
    m->vocab = 50000;
    m->max_context = 65536;
}

START_TEST(every_kind_round_trip)
{
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_layer_spec full = spec_of(KVP_LAYER_FULL, KVP_MLP_DENSE);
    struct kvp_layer_spec slide = spec_of(KVP_LAYER_SLIDING, KVP_MLP_DENSE);
    struct kvp_layer_spec chunk = spec_of(KVP_LAYER_CHUNKED, KVP_MLP_MOE);
    struct kvp_layer_spec mla = spec_of(KVP_LAYER_MLA, KVP_MLP_MOE);
    struct kvp_layer_spec mamba = spec_of(KVP_LAYER_RECURRENT, KVP_MLP_DENSE);
    struct kvp_layer_spec mamba2 = spec_of(KVP_LAYER_RECURRENT, KVP_MLP_NONE);
    struct kvp_layer_spec gdn = spec_of(KVP_LAYER_RECURRENT, KVP_MLP_MOE);
    struct kvp_layer_spec shared = spec_of(KVP_LAYER_SHARED, KVP_MLP_DENSE);
    struct kvp_layer_spec none = spec_of(KVP_LAYER_NONE, KVP_MLP_DENSE);
    struct kvp_layer_spec full_kv = spec_of(KVP_LAYER_FULL, KVP_MLP_DENSE);
    struct kvp_error err = {0};

    ck_assert_ptr_nonnull(m);
    base(m, "every-kind");
    snprintf(m->hf_id, sizeof m->hf_id, "org/every-kind");
    snprintf(m->family, sizeof m->family, "hybrid");
    m->state_dtype = KVP_DTYPE_F32;
    m->tied_embeddings = true;
    m->learned_positions = 2050;
    m->norm = KVP_NORM_LAYER;
    m->act = KVP_ACT_PLAIN;
    m->norms_per_layer = 4;
    m->qk_norm = m->attn_qkv_bias = m->attn_out_bias = m->mlp_bias = m->attn_sinks = m->attn_gate = true;
    m->n_experts = 64;
    m->n_experts_active = 8;
    m->expert_intermediate = 768;
    m->n_shared_experts = 2;
    m->shared_intermediate = 1024;
    m->shared_expert_gate = m->router_bias = m->expert_bias = true;

    slide.window = 4096;
    chunk.window = 8192;
    mla.head_dim_k = 192;
    mla.kv_lora_rank = 512;
    mla.qk_rope_dim = 64;
    mla.q_lora_rank = 1536;
    mamba.rec = (struct kvp_recurrent){.kind = KVP_REC_MAMBA, .d_inner = 4096, .d_state = 16, .d_conv = 4,
                                       .dt_rank = 128, .bc_norms = true};
    mamba2.rec = (struct kvp_recurrent){.kind = KVP_REC_MAMBA2, .d_inner = 4096, .d_state = 128, .d_conv = 4,
                                        .n_groups = 8, .n_heads = 64, .v_head_dim = 64};
    gdn.rec = (struct kvp_recurrent){.kind = KVP_REC_GDN, .d_conv = 4, .n_heads = 32, .n_k_heads = 16,
                                     .k_head_dim = 128, .v_head_dim = 128};
    shared.shares = 0;
    full_kv.head_dim_v = 64; /* K and V dims differ */

    add(m, &full, 1);
    for (int i = 0; i < 3; i++) {
        add(m, &slide, 3);
        add(m, &full, 1);
    }
    add(m, &chunk, 2);
    add(m, &mla, 2);
    add(m, &mamba, 1);
    add(m, &mamba2, 1);
    add(m, &gdn, 1);
    add(m, &shared, 2);
    add(m, &none, 1);
    add(m, &full_kv, 1);
    ck_assert_kvp_ok(kvp_model_validate(m, &err), err);
    ck_assert_uint_eq(m->n_specs, 10);
    ck_assert_uint_eq(m->n_layers, 24);
    assert_round_trip(m, "every-kind");
    free(m);
}
END_TEST

/* The emitter folds repeated runs into `repeat` items; parsing gives them back. */
START_TEST(emit_folds_repeats)
{
    struct kvp_model *m = malloc(sizeof *m);
    struct kvp_layer_spec local = spec_of(KVP_LAYER_SLIDING, KVP_MLP_DENSE);
    struct kvp_layer_spec global = spec_of(KVP_LAYER_FULL, KVP_MLP_DENSE);
    char *text;

    ck_assert_ptr_nonnull(m);
    base(m, "gemma-like");
    local.window = 1024;
    for (int i = 0; i < 10; i++) {
        add(m, &local, 5);
        add(m, &global, 1);
    }
    add(m, &local, 2);
    text = emit_ok(m);
    ck_assert_msg(strstr(text, "repeat: 10") != NULL, "no fold:\n%s", text);
    free(text);
    assert_round_trip(m, "gemma-like");
    free(m);
}
END_TEST

/* ---- repeat expansion --------------------------------------------------- */

#define HEAD                                                                  \
    "kvplan: 1\nname: tiny\nmax_context: 4096\nhidden: 512\nintermediate: 1024\n" \
    "vocab: 1000\nspecs:\n"                                                   \
    "  a: {kind: full, heads: 8, kv_heads: 2, head_dim: 64}\n"                \
    "  b: {kind: sliding, window: 128, heads: 8, kv_heads: 2, head_dim: 64}\n"

START_TEST(repeat_expansion)
{
    static const struct {
        const char *layers;
        const char *want; /* one letter per layer */
    } t[] = {
        {"  - {spec: a}\n", "a"},
        {"  - {spec: a, count: 3}\n  - {spec: b, count: 2}\n", "aaabb"},
        {"  - repeat: 3\n    layers:\n      - {spec: b, count: 2}\n      - {spec: a}\n", "bbabbabba"},
        {"  - {spec: a}\n  - repeat: 2\n    layers:\n      - {spec: a, count: 2}\n"
         "      - repeat: 3\n        layers: [{spec: b}]\n  - {spec: a}\n",
         "aaabbbaabbba"},
        {"  - repeat: 2\n    layers: [{repeat: 2, layers: [{repeat: 2, layers: [{repeat: 2, layers: [{spec: "
         "b}]}]}]}]\n",
         "bbbbbbbbbbbbbbbb"},
        {"  - {repeat: 1, layers: [{spec: a}, {spec: b}]}\n", "ab"},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        char text[2048];
        struct kvp_model *m;
        snprintf(text, sizeof text, HEAD "layers:\n%s", t[i].layers);
        m = parse_ok(text);
        ck_assert_uint_eq(m->n_layers, strlen(t[i].want));
        for (uint32_t l = 0; l < m->n_layers; l++) {
            enum kvp_layer_kind want = t[i].want[l] == 'a' ? KVP_LAYER_FULL : KVP_LAYER_SLIDING;
            ck_assert_msg(kvp_model_layer(m, l)->kind == want, "case %zu layer %u", i, l);
        }
        free(m);
    }
}
END_TEST

/* The stack may hold exactly 1024 layers, by count or by repeat. */
START_TEST(repeat_limits)
{
    static const char *const ok[] = {
        "  - {spec: a, count: 1024}\n",
        "  - {repeat: 1024, layers: [{spec: a}]}\n",
        "  - {repeat: 4, layers: [{repeat: 4, layers: [{repeat: 4, layers: [{repeat: 4, layers: [{spec: b, count: "
        "4}]}]}]}]}\n",
        "  - {spec: a, count: 1000}\n  - {repeat: 2, layers: [{spec: b, count: 12}]}\n",
    };
    for (size_t i = 0; i < N_ELEMS(ok); i++) {
        char text[2048];
        struct kvp_model *m;
        snprintf(text, sizeof text, HEAD "layers:\n%s", ok[i]);
        m = parse_ok(text);
        ck_assert_uint_eq(m->n_layers, 1024);
        free(m);
    }
}
END_TEST

/* Stack errors from text, with place and message. */
START_TEST(stack_errors)
{
    static const struct {
        const char *layers, *text;
    } t[] = {
        {"  - {repeat: 0, layers: [{spec: a}]}\n", "inline.yaml:11:14: 'repeat' must be 1..1024 (got 0)"},
        {"  - {repeat: 2}\n", "inline.yaml:11:5: missing required key 'layers'"},
        {"  - {spec: a, repeat: 2, layers: [{spec: a}]}\n",
         "inline.yaml:11:5: a layers item needs either 'spec' or 'repeat'"},
        {"  - {count: 2}\n", "inline.yaml:11:5: a layers item needs either 'spec' or 'repeat'"},
        {"  - {spec: a, times: 2}\n", "inline.yaml:11:15: unknown key 'times'"},
        {"  - spec: a\n  - 3\n", "inline.yaml:12:5: 'layers item' must be a mapping, not a scalar"},
        {"  {spec: a}\n", "inline.yaml:11:3: 'layers' must be a sequence, not a mapping"},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        char text[2048], buf[KVP_ERROR_TEXT_MAX];
        struct kvp_error err = {0};
        enum kvp_status st;
        struct kvp_model *m;
        snprintf(text, sizeof text, HEAD "layers:\n%s", t[i].layers);
        m = parse_text(text, &err, &st);
        ck_assert_msg(st != KVP_OK, "case %zu parsed", i);
        ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf), t[i].text);
        free(m);
    }
}
END_TEST

/* ---- bad inputs: tests/data/bad/model-*.yaml against their .err ---------- */

static enum kvp_status load_model(const char *path, struct kvp_error *err)
{
    struct kvp_model *m = NULL;
    enum kvp_status st = kvp_model_load(path, &m, err);
    if (st != KVP_OK)
        ck_assert_ptr_null(m);
    kvp_model_free(m);
    return st;
}

START_TEST(bad_files)
{
    test_bad_files("model-", ".yaml", load_model);
}
END_TEST

/* A file in the working directory named like a built-in does not shadow
 * it: "llama-3.1-8b" is the built-in, "./llama-3.1-8b" the file; a plain name
 * that is no built-in still opens its file (issue #37: a modified copy
 * named llama-3.1-8b gave false figures under the real model's name). */
START_TEST(builtin_not_shadowed)
{
    struct kvp_catalog *cat = NULL;
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    char cwd[4096], *yaml = test_slurp("models/llama-3.1-8b.yaml"), *h;
    FILE *f;
    ck_assert_ptr_nonnull(yaml);
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_kvp_ok(kvp_catalog_load("models", &cat, &err), err);
    (void)mkdir("build/check_model-shadow", 0755);
    ck_assert_int_eq(chdir("build/check_model-shadow"), 0);
    ck_assert_ptr_nonnull(h = strstr(yaml, "\nhidden: 4096"));
    memcpy(h, "\nhidden: 2048", 13); /* another model under the same name */
    for (int i = 0; i < 2; i++) {
        ck_assert_ptr_nonnull(f = fopen(i ? "mine" : "llama-3.1-8b", "w"));
        fputs(yaml, f);
        ck_assert_int_eq(fclose(f), 0);
    }
    ck_assert_kvp_ok(kvp_model_open(cat, "llama-3.1-8b", &m, &err), err);
    ck_assert_uint_eq(m->hidden, 4096);
    kvp_model_free(m);
    ck_assert_kvp_ok(kvp_model_open(cat, "./llama-3.1-8b", &m, &err), err);
    ck_assert_uint_eq(m->hidden, 2048);
    kvp_model_free(m);
    ck_assert_kvp_ok(kvp_model_open(cat, "mine", &m, &err), err);
    ck_assert_uint_eq(m->hidden, 2048);
    kvp_model_free(m);
    remove("llama-3.1-8b");
    remove("mine");
    ck_assert_int_eq(chdir(cwd), 0);
    kvp_catalog_free(cat);
    free(yaml);
}
END_TEST

START_TEST(load_missing_file)
{
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    char buf[KVP_ERROR_TEXT_MAX];
    ck_assert_int_eq(kvp_model_load(BAD_DIR "/no-such-model.yaml", &m, &err), KVP_ERR_IO);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(kvp_error_text(&err, buf, sizeof buf), BAD_DIR "/no-such-model.yaml: cannot open the file");
}
END_TEST

/* ---- the model API ------------------------------------------------------- */

START_TEST(kind_names)
{
    static const char *const kinds[] = {"full", "sliding", "chunked", "mla", "recurrent", "shared", "none"};
    static const char *const mlps[] = {"dense", "moe", "none"};
    static const char *const recs[] = {"mamba", "mamba2", "gdn"};
    ck_assert_int_eq(N_ELEMS(kinds), KVP_LAYER_KIND_COUNT);
    for (int i = 0; i < KVP_LAYER_KIND_COUNT; i++) {
        enum kvp_layer_kind k = KVP_LAYER_KIND_COUNT;
        ck_assert_str_eq(kvp_layer_kind_name((enum kvp_layer_kind)i), kinds[i]);
        ck_assert(kvp_layer_kind_from_name(kinds[i], &k));
        ck_assert_int_eq(k, i);
    }
    for (int i = 0; i < KVP_MLP_KIND_COUNT; i++) {
        enum kvp_mlp_kind k = KVP_MLP_KIND_COUNT;
        ck_assert_str_eq(kvp_mlp_kind_name((enum kvp_mlp_kind)i), mlps[i]);
        ck_assert(kvp_mlp_kind_from_name(mlps[i], &k));
        ck_assert_int_eq(k, i);
    }
    for (int i = 0; i < KVP_REC_KIND_COUNT; i++) {
        enum kvp_recurrent_kind k = KVP_REC_KIND_COUNT;
        ck_assert_str_eq(kvp_recurrent_kind_name((enum kvp_recurrent_kind)i), recs[i]);
        ck_assert(kvp_recurrent_kind_from_name(recs[i], &k));
        ck_assert_int_eq(k, i);
    }
    {
        enum kvp_layer_kind k = KVP_LAYER_KIND_COUNT;
        enum kvp_mlp_kind mk = KVP_MLP_KIND_COUNT;
        enum kvp_recurrent_kind rk = KVP_REC_KIND_COUNT;
        ck_assert(!kvp_layer_kind_from_name("Full", &k));
        ck_assert(!kvp_layer_kind_from_name("", &k));
        ck_assert(!kvp_mlp_kind_from_name("gated", &mk));
        ck_assert(!kvp_recurrent_kind_from_name("mamba3", &rk));
        ck_assert_int_eq(k, KVP_LAYER_KIND_COUNT);
        ck_assert_int_eq(mk, KVP_MLP_KIND_COUNT);
        ck_assert_int_eq(rk, KVP_REC_KIND_COUNT);
    }
}
END_TEST

START_TEST(init_defaults)
{
    struct kvp_model m;
    memset(&m, 0x5a, sizeof m);
    kvp_model_init(&m);
    ck_assert_int_eq(m.dtype, KVP_DTYPE_BF16);
    ck_assert_int_eq(m.state_dtype, KVP_DTYPE_BF16);
    ck_assert_int_eq(m.norm, KVP_NORM_RMS);
    ck_assert_int_eq(m.act, KVP_ACT_GATED);
    ck_assert_uint_eq(m.norms_per_layer, 2);
    ck_assert_uint_eq(m.n_layers, 0);
    ck_assert_uint_eq(m.n_specs, 0);
    ck_assert_str_eq(m.name, "");
    kvp_model_free(NULL); /* a no-op */
}
END_TEST

/* Equal shapes share one spec; fields that do not apply to a kind are
 * cleared so they do not split specs. */
START_TEST(add_layers_dedup)
{
    struct kvp_model m;
    struct kvp_layer_spec a = spec_of(KVP_LAYER_FULL, KVP_MLP_DENSE), b = a;
    base(&m, "dedup");
    b.window = 4096; /* meaningless for a full layer */
    b.shares = 7;
    b.kv_lora_rank = 9;
    add(&m, &a, 3);
    add(&m, &b, 2);
    ck_assert_uint_eq(m.n_specs, 1);
    ck_assert_uint_eq(m.n_layers, 5);
    ck_assert_uint_eq(m.specs[0].window, 0);
    b = a;
    b.kind = KVP_LAYER_SLIDING;
    b.window = 4096;
    add(&m, &b, 1);
    ck_assert_uint_eq(m.n_specs, 2);
    ck_assert_uint_eq(m.layer_spec[5], 1);
}
END_TEST

START_TEST(add_layers_limits)
{
    struct kvp_model m;
    struct kvp_layer_spec s = spec_of(KVP_LAYER_SLIDING, KVP_MLP_DENSE);
    struct kvp_error err = {0};

    base(&m, "limits");
    s.window = 1;
    add(&m, &s, KVP_MAX_LAYERS - 1);
    ck_assert_int_eq(kvp_model_add_layers(&m, &s, 2, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(err.msg, "more than 1024 layers");
    ck_assert_uint_eq(m.n_layers, KVP_MAX_LAYERS - 1); /* untouched */
    ck_assert_int_eq(kvp_model_add_layers(&m, &s, UINT32_MAX, &err), KVP_ERR_RANGE);
    add(&m, &s, 1);
    ck_assert_uint_eq(m.n_layers, KVP_MAX_LAYERS);

    base(&m, "shapes");
    for (uint32_t i = 0; i < KVP_MAX_SPECS; i++) {
        s.window = i + 1;
        add(&m, &s, 1);
    }
    ck_assert_uint_eq(m.n_specs, KVP_MAX_SPECS);
    s.window = 1000;
    ck_assert_int_eq(kvp_model_add_layers(&m, &s, 1, &err), KVP_ERR_RANGE);
    ck_assert_str_eq(err.msg, "more than 32 distinct layer shapes");
    s.window = 1; /* an existing shape still fits */
    add(&m, &s, 1);
    ck_assert_uint_eq(m.n_specs, KVP_MAX_SPECS);
}
END_TEST

/* Each invariant of kvp_model_validate, one broken at a time. */
enum breakage {
    NO_LAYERS, HIDDEN_0, VOCAB_0, CONTEXT_0, HEADS_0, HEAD_DIM_0, KV_HEADS_0, KV_DIVIDE, WINDOW_0,
    MLA_KV_HEADS, MLA_RANK_0, MLA_ROPE_BIG, SHARES_LATER, SHARES_SELF, SHARES_NONE, REC_ZERO, DENSE_NO_WIDTH,
    MOE_UNSET, MOE_ACTIVE_BIG,
};

static const struct {
    enum breakage b;
    const char *msg;
} invalid[] = {
    {NO_LAYERS, "the model has no layers"},
    {HIDDEN_0, "'hidden' must be positive"},
    {VOCAB_0, "'vocab' must be positive"},
    {CONTEXT_0, "'max_context' must be positive"},
    {HEADS_0, "layer 1 (full): 'heads' must be positive"},
    {HEAD_DIM_0, "layer 1 (full): head dims must be positive (got 128 and 0)"},
    {KV_HEADS_0, "layer 1 (full): 'kv_heads' must be positive"},
    {KV_DIVIDE, "layer 1 (full): 'kv_heads' must divide 'heads' (got 7 and 32)"},
    {WINDOW_0, "layer 1 (sliding): 'window' must be positive (got 0)"},
    {MLA_KV_HEADS, "layer 1 (mla): 'kv_heads' must be 1 (got 4)"},
    {MLA_RANK_0, "layer 1 (mla): 'kv_lora_rank' must be positive"},
    {MLA_ROPE_BIG, "layer 1 (mla): 'qk_rope_dim' must be 1..head_dim_k (got 256 and 192)"},
    {SHARES_LATER, "layer 1 (shared): 'shares' must name an earlier layer (got 2)"},
    {SHARES_SELF, "layer 1 (shared): 'shares' must name an earlier layer (got 1)"},
    {SHARES_NONE, "layer 1 (shared): layer 0 it shares has no attention cache (none)"},
    {REC_ZERO, "layer 1 (recurrent mamba): a state dimension is zero"},
    {DENSE_NO_WIDTH, "layer 0 has a dense MLP but 'intermediate' is 0"},
    {MOE_UNSET, "layer 1 is MoE but the experts are not set (experts 0, active 0, intermediate 0)"},
    {MOE_ACTIVE_BIG, "'active' must be 1..'experts' (got 9 and 8)"},
};

/* Layer 0: a full layer (or none), layer 1: the broken one, layer 2: full. */
static void build_broken(struct kvp_model *m, enum breakage b)
{
    struct kvp_layer_spec first = spec_of(KVP_LAYER_FULL, KVP_MLP_DENSE), s = first;
    base(m, "broken");
    s.n_heads = 32;
    s.n_kv_heads = 8;
    switch (b) {
    case NO_LAYERS: return;
    case HIDDEN_0: m->hidden = 0; break;
    case VOCAB_0: m->vocab = 0; break;
    case CONTEXT_0: m->max_context = 0; break;
    case HEADS_0: s.n_heads = 0; break;
    case HEAD_DIM_0: s.head_dim_v = 0; break;
    case KV_HEADS_0: s.n_kv_heads = 0; break;
    case KV_DIVIDE: s.n_kv_heads = 7; break;
    case WINDOW_0: s.kind = KVP_LAYER_SLIDING; s.window = 0; break;
    case MLA_KV_HEADS:
    case MLA_RANK_0:
    case MLA_ROPE_BIG:
        s.kind = KVP_LAYER_MLA;
        s.n_kv_heads = b == MLA_KV_HEADS ? 4 : 1;
        s.head_dim_k = 192;
        s.kv_lora_rank = b == MLA_RANK_0 ? 0 : 512;
        s.qk_rope_dim = b == MLA_ROPE_BIG ? 256 : 64;
        break;
    case SHARES_LATER: s.kind = KVP_LAYER_SHARED; s.shares = 2; break;
    case SHARES_SELF: s.kind = KVP_LAYER_SHARED; s.shares = 1; break;
    case SHARES_NONE:
        first = spec_of(KVP_LAYER_NONE, KVP_MLP_DENSE);
        s.kind = KVP_LAYER_SHARED;
        s.shares = 0;
        break;
    case REC_ZERO:
        s = spec_of(KVP_LAYER_RECURRENT, KVP_MLP_DENSE);
        s.rec = (struct kvp_recurrent){.kind = KVP_REC_MAMBA, .d_inner = 4096, .d_state = 0, .d_conv = 4,
                                       .dt_rank = 128};
        break;
    case DENSE_NO_WIDTH: m->intermediate = 0; break;
    case MOE_UNSET: s.mlp = KVP_MLP_MOE; break;
    case MOE_ACTIVE_BIG:
        s.mlp = KVP_MLP_MOE;
        m->n_experts = 8;
        m->n_experts_active = 9;
        m->expert_intermediate = 256;
        break;
    }
    add(m, &first, 1);
    add(m, &s, 1);
    add(m, &first, 1);
}

START_TEST(validate_messages)
{
    for (size_t i = 0; i < N_ELEMS(invalid); i++) {
        struct kvp_model m;
        struct kvp_error err = {0};
        build_broken(&m, invalid[i].b);
        ck_assert_msg(kvp_model_validate(&m, &err) == KVP_ERR_RANGE, "case %zu passed", i);
        ck_assert_str_eq(err.msg, invalid[i].msg);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("model");
    TCase *core = tcase_create("core");
    TCase *limits = tcase_create("limits");

    tcase_set_timeout(core, 60);
    tcase_add_test(core, shipped_models_round_trip);
    tcase_add_test(core, every_kind_round_trip);
    tcase_add_test(core, emit_folds_repeats);
    tcase_add_test(core, repeat_expansion);
    tcase_add_test(core, kind_names);
    tcase_add_test(core, init_defaults);
    tcase_add_test(core, add_layers_dedup);
    suite_add_tcase(s, core);

    tcase_add_test(limits, bad_files);
    tcase_add_test(limits, load_missing_file);
    tcase_add_test(limits, builtin_not_shadowed);
    tcase_add_test(limits, repeat_limits);
    tcase_add_test(limits, stack_errors);
    tcase_add_test(limits, add_layers_limits);
    tcase_add_test(limits, validate_messages);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
