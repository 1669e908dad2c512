/* check_gguf_mix.c -- llama.cpp's tensor types per file type (gguf_mix.c).
 *
 * The expected types are written out by hand from llama.cpp v0.5.0's
 * src/llama-quant.cpp for shipped model shapes (not computed with the rules
 * under test); `make oracle` checks the same rules against llama.cpp's own
 * quantizer. */
#include <stdint.h>
#include <string.h>

#include "kvplan/wquant.h"
#include "testutil.h"

/* The tensors of one dense or MoE layer, in the columns of the tables below. */
enum { Q, K, V, O, GATE, UP, DOWN, PER_LAYER };

/* The types of every tensor of m under ftype: token_embd, output (F32 when
 * tied: not offered), an f32 norm, then PER_LAYER per layer, walked layer by
 * layer as weights.c does. */
struct walk {
    enum kvp_dtype embd, out, norm;
    enum kvp_dtype layer[128][PER_LAYER];
};

static void walk(const struct kvp_model *m, uint32_t ftype, struct walk *w)
{
    struct kvp_gguf_mix_state st;
    uint64_t E = m->hidden, V_ = m->vocab;
    bool moe = m->n_experts > 0;

    ck_assert_uint_le(m->n_layers, 128);
    kvp_gguf_mix_begin(m, &st);
    w->embd = kvp_gguf_mix_type(m, ftype, &(struct kvp_wtensor){KVP_WR_TOKEN_EMBD, UINT32_MAX, V_, E, 1}, &st);
    w->out = m->tied_embeddings
                 ? KVP_DTYPE_F32
                 : kvp_gguf_mix_type(m, ftype, &(struct kvp_wtensor){KVP_WR_OUTPUT, UINT32_MAX, V_, E, 1}, &st);
    w->norm = kvp_gguf_mix_type(m, ftype, &(struct kvp_wtensor){KVP_WR_VECTOR, UINT32_MAX, 1, E, 1}, &st);
    for (uint32_t il = 0; il < m->n_layers; il++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, il);
        uint64_t hd = s->head_dim_k, F = moe ? m->expert_intermediate : m->intermediate, n = moe ? m->n_experts : 1;
        const struct kvp_wtensor t[PER_LAYER] = {
            [Q] = {KVP_WR_ATTN_Q, il, s->n_heads * hd, E, 1},
            [K] = {KVP_WR_ATTN_K, il, s->n_kv_heads * hd, E, 1},
            [V] = {KVP_WR_ATTN_V, il, s->n_kv_heads * hd, E, 1},
            [O] = {KVP_WR_ATTN_OUT, il, E, s->n_heads * hd, 1},
            [GATE] = {moe ? KVP_WR_EXP_GATE : KVP_WR_FFN_GATE, il, F, E, n},
            [UP] = {moe ? KVP_WR_EXP_UP : KVP_WR_FFN_UP, il, F, E, n},
            [DOWN] = {moe ? KVP_WR_EXP_DOWN : KVP_WR_FFN_DOWN, il, E, F, n},
        };
        for (int j = 0; j < PER_LAYER; j++)
            w->layer[il][j] = kvp_gguf_mix_type(m, ftype, &t[j], &st);
    }
}

static uint32_t ftype(const char *name)
{
    uint32_t ft = UINT32_MAX;
    ck_assert_msg(kvp_gguf_ftype_from_name(name, &ft), "'%s' is not a file type", name);
    return ft;
}

/* The layers llama.cpp's use_more_bits(i, 32) picks: i < 4, i >= 28, or (i - 4) % 3 == 2. */
static const int more_32[] = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31, -1};
static const int none[] = {-1};

/* ---- core ------------------------------------------------------------------ */

START_TEST(names)
{
    static const struct { const char *name; uint32_t ftype; } t[] = {
        {"q4_k_m", 15}, {"Q4_K_M", 15}, {"mostly_q4_k_m", 15}, {"MOSTLY_Q5_K_S", 16}, {"q4_k", 15},
        {"q3_k", 12}, {"q5_k", 17}, {"q8_0", 7}, {"f16", 1}, {"bf16", 32}, {"f32", 0}, {"iq4_xs", 30},
        {"iq2_m", 29}, {"tq1_0", 36}, {"mxfp4_moe", 38}, {"q2_k_s", 21},
    };
    uint32_t ft;
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        ck_assert_uint_eq(ftype(t[i].name), t[i].ftype);
        ck_assert_ptr_nonnull(kvp_gguf_ftype_name(t[i].ftype));
        ck_assert(kvp_gguf_ftype_from_name(kvp_gguf_ftype_name(t[i].ftype), &ft) && ft == t[i].ftype);
    }
    ck_assert_str_eq(kvp_gguf_ftype_name(15), "Q4_K_M");
    ck_assert_str_eq(kvp_gguf_ftype_name(38), "MXFP4_MOE");
    ck_assert_ptr_null(kvp_gguf_ftype_name(4));  /* Q4_1_SOME_F16, removed */
    ck_assert_ptr_null(kvp_gguf_ftype_name(39)); /* NVFP4: llama-quantize has no default type for it */
    ck_assert(!kvp_gguf_ftype_from_name("q4_k_x", &ft));
    ck_assert(!kvp_gguf_ftype_from_name("mostly_", &ft));
    ck_assert(!kvp_gguf_ftype_from_name("int4", &ft));
}
END_TEST

/* Is layer il in the list (ended by -1)? */
static bool in_list(const int *layers, uint32_t il)
{
    for (; *layers >= 0; layers++)
        if ((uint32_t)*layers == il)
            return true;
    return false;
}

/* One column of a walk: `more` on the listed layers, `base` on the others. */
struct column_case {
    const char *model, *ftype;
    int col;
    const int *layers;
    enum kvp_dtype more, base;
};

static const int first2[] = {0, 1, -1}, first4[] = {0, 1, 2, 3, -1};

static const struct column_case columns[] = {
    /* Llama 3.1 8B (32 layers, GQA 32/8): Q4_K_M puts attn_v and ffn_down in q6_K where
     * use_more_bits, the rest in q4_K */
    {"llama-3.1-8b", "q4_k_m", V, more_32, KVP_DTYPE_Q6_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q4_k_m", DOWN, more_32, KVP_DTYPE_Q6_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q4_k_m", Q, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q4_k_m", K, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q4_k_m", O, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q4_k_m", GATE, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q4_k_m", UP, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K},
    /* Q3_K_M: attn_v q5_K for the first two; ffn_down q5_K below 32/16; attn_output q4_K */
    {"llama-3.1-8b", "q3_k_m", V, first2, KVP_DTYPE_Q5_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q3_k_m", DOWN, first2, KVP_DTYPE_Q5_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q3_k_m", O, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q3_k_m", Q, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K},
    /* Q4_K_S: attn_v q5_K for the first four; ffn_down below 32/8 */
    {"llama-3.1-8b", "q4_k_s", V, first4, KVP_DTYPE_Q5_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q4_k_s", DOWN, first4, KVP_DTYPE_Q5_K, KVP_DTYPE_Q4_K},
    /* Q2_K with GQA 4: attn_v q4_K, ffn_down and attn_output q3_K */
    {"llama-3.1-8b", "q2_k", V, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "q2_k", DOWN, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K},
    {"llama-3.1-8b", "q2_k", O, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K},
    {"llama-3.1-8b", "q2_k", GATE, none, KVP_DTYPE_Q2_K, KVP_DTYPE_Q2_K},
    {"llama-3.1-8b", "q4_0", DOWN, none, KVP_DTYPE_Q4_0, KVP_DTYPE_Q4_0},
    /* IQ4_XS with GQA 4: attn_v q5_K; ffn_down q5_K below 32/8 (no imatrix) */
    {"llama-3.1-8b", "iq4_xs", V, none, KVP_DTYPE_Q5_K, KVP_DTYPE_Q5_K},
    {"llama-3.1-8b", "iq4_xs", DOWN, first4, KVP_DTYPE_Q5_K, KVP_DTYPE_IQ4_XS},
    /* IQ2_XXS: attn_v q4_K (GQA 4); ffn_down q2_K while the running count < 32/8 */
    {"llama-3.1-8b", "iq2_xxs", V, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K},
    {"llama-3.1-8b", "iq2_xxs", DOWN, first4, KVP_DTYPE_Q2_K, KVP_DTYPE_IQ2_XXS},
    {"llama-3.1-8b", "f16", V, none, KVP_DTYPE_F16, KVP_DTYPE_F16},
    {"llama-3.1-8b", "q3_k_s", V, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K},
    /* Llama 3.1 70B (80 layers, GQA): LLM_TYPE_70B lifts a q3_K attn_v to q5_K */
    {"llama-3.1-70b", "q3_k_s", V, none, KVP_DTYPE_Q5_K, KVP_DTYPE_Q5_K},
    {"llama-3.1-70b", "q3_k_s", K, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K},
    /* Mixtral 8x7B (8 experts): attn_v, attn_k q8_0, attn_output q5_K, the experts'
     * ffn_down by their own layer; MXFP4_MOE: experts mxfp4, the rest q8_0 */
    {"mixtral-8x7b", "q4_k_m", V, none, KVP_DTYPE_Q8_0, KVP_DTYPE_Q8_0},
    {"mixtral-8x7b", "q4_k_m", K, none, KVP_DTYPE_Q8_0, KVP_DTYPE_Q8_0},
    {"mixtral-8x7b", "q4_k_m", O, none, KVP_DTYPE_Q5_K, KVP_DTYPE_Q5_K},
    {"mixtral-8x7b", "q4_k_m", DOWN, more_32, KVP_DTYPE_Q6_K, KVP_DTYPE_Q4_K},
    {"mixtral-8x7b", "q4_k_m", UP, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K},
    {"mixtral-8x7b", "mxfp4_moe", Q, none, KVP_DTYPE_Q8_0, KVP_DTYPE_Q8_0},
    {"mixtral-8x7b", "mxfp4_moe", DOWN, none, KVP_DTYPE_MXFP4, KVP_DTYPE_MXFP4},
    {"mixtral-8x7b", "mxfp4_moe", GATE, none, KVP_DTYPE_MXFP4, KVP_DTYPE_MXFP4},
    /* Falcon 7B (fused attn_qkv, hidden 4544 = 17.75 x 256): q, k and v take attn_v's
     * rule, and every q4_K/q6_K row of 4544 falls back to q5_0/q8_0 */
    {"falcon-7b", "q4_k_m", Q, more_32, KVP_DTYPE_Q8_0, KVP_DTYPE_Q5_0},
    {"falcon-7b", "q4_k_m", K, more_32, KVP_DTYPE_Q8_0, KVP_DTYPE_Q5_0},
    {"falcon-7b", "q4_k_m", V, more_32, KVP_DTYPE_Q8_0, KVP_DTYPE_Q5_0},
};

START_TEST(layer_columns)
{
    static struct walk w;
    for (size_t i = 0; i < N_ELEMS(columns); i++) {
        const struct column_case *c = &columns[i];
        struct kvp_model *m = test_load(c->model);
        walk(m, ftype(c->ftype), &w);
        for (uint32_t il = 0; il < m->n_layers; il++) {
            bool listed = in_list(c->layers, il);
            ck_assert_msg(w.layer[il][c->col] == (listed ? c->more : c->base), "%s %s layer %u column %d: %s",
                          c->model, c->ftype, il, c->col, kvp_dtype_info(w.layer[il][c->col])->name);
        }
        kvp_model_free(m);
    }
}
END_TEST

/* Token embeddings, output (F32 = not offered: tied) and a norm. */
static const struct {
    const char *model, *ftype;
    enum kvp_dtype embd, out, norm;
} ends[] = {
    {"llama-3.1-8b", "q4_k_m", KVP_DTYPE_Q4_K, KVP_DTYPE_Q6_K, KVP_DTYPE_F32},
    {"llama-3.1-8b", "q4_0", KVP_DTYPE_Q4_0, KVP_DTYPE_Q6_K, KVP_DTYPE_F32}, /* legacy types: output q6_K */
    {"llama-3.1-8b", "q8_0", KVP_DTYPE_Q8_0, KVP_DTYPE_Q8_0, KVP_DTYPE_F32},
    {"llama-3.1-8b", "iq2_xxs", KVP_DTYPE_Q2_K, KVP_DTYPE_Q5_K, KVP_DTYPE_F32},
    {"llama-3.1-8b", "f16", KVP_DTYPE_F16, KVP_DTYPE_F16, KVP_DTYPE_F32},
    {"llama-3.1-8b", "tq1_0", KVP_DTYPE_Q4_K, KVP_DTYPE_Q6_K, KVP_DTYPE_F32},
    {"mixtral-8x7b", "mxfp4_moe", KVP_DTYPE_Q8_0, KVP_DTYPE_Q8_0, KVP_DTYPE_F32},
    {"falcon-7b", "q4_k_m", KVP_DTYPE_Q8_0, KVP_DTYPE_F32, KVP_DTYPE_F32}, /* tied: the output's rule */
};

START_TEST(embeddings_and_output)
{
    static struct walk w;
    for (size_t i = 0; i < N_ELEMS(ends); i++) {
        struct kvp_model *m = test_load(ends[i].model);
        walk(m, ftype(ends[i].ftype), &w);
        ck_assert_msg(w.embd == ends[i].embd && w.out == ends[i].out && w.norm == ends[i].norm,
                      "%s %s: %s %s %s", ends[i].model, ends[i].ftype, kvp_dtype_info(w.embd)->name,
                      kvp_dtype_info(w.out)->name, kvp_dtype_info(w.norm)->name);
        kvp_model_free(m);
    }
}
END_TEST

/* Falcon's ffn_down under Q4_K_M: q6_K below 32/16, q5_K where use_more_bits, else q4_K. */
START_TEST(falcon_ffn_down)
{
    struct kvp_model *m = test_load("falcon-7b");
    static struct walk w;

    walk(m, ftype("q4_k_m"), &w);
    for (uint32_t il = 0; il < 32; il++)
        ck_assert_int_eq(w.layer[il][DOWN],
                         il < 2 ? KVP_DTYPE_Q6_K : in_list(more_32, il) ? KVP_DTYPE_Q5_K : KVP_DTYPE_Q4_K);
    kvp_model_free(m);
}
END_TEST

/* attn_v's count n is of the layers that have one: 8 full layers then 8 that
 * share layer 7's cache (q and o only) put Q4_K_M's q6_K on use_more_bits(i, 8):
 * layers 0, 3, 6, 7 (with n = 16 it would be 0, 1, 4, 7). */
START_TEST(attn_v_count_skips_shared_layers)
{
    static const char yaml[] = "kvplan: 1\nname: shared-kv\ndtype: bf16\nmax_context: 4096\nhidden: 256\n"
                               "intermediate: 512\nvocab: 256\nspecs:\n"
                               "  attn: {kind: full, heads: 8, kv_heads: 2, head_dim: 32}\n"
                               "  reuse: {kind: shared, shares: 7, heads: 8, kv_heads: 2, head_dim: 32}\n"
                               "layers:\n  - {spec: attn, count: 8}\n  - {spec: reuse, count: 8}\n";
    static const int more_8[] = {0, 3, 6, 7, -1};
    struct kvp_model m;
    struct kvp_error err = {0};
    struct kvp_gguf_mix_state st;

    kvp_model_init(&m);
    ck_assert_kvp_ok(kvp_model_parse_yaml(yaml, sizeof yaml - 1, "shared-kv.yaml", &m, &err), err);
    kvp_gguf_mix_begin(&m, &st);
    ck_assert_uint_eq(st.n_attn_v, 8);
    for (uint32_t il = 0; il < 8; il++) {
        struct kvp_wtensor v = {KVP_WR_ATTN_V, il, 64, 256, 1};
        enum kvp_dtype d = kvp_gguf_mix_type(&m, ftype("q4_k_m"), &v, &st);
        ck_assert_msg(d == (in_list(more_8, il) ? KVP_DTYPE_Q6_K : KVP_DTYPE_Q4_K), "layer %u: %s", il,
                      kvp_dtype_info(d)->name);
    }
}
END_TEST

/* ---- limits ---------------------------------------------------------------- */

/* The fallback chain on rows that no block divides, and 1-D tensors. */
START_TEST(fallbacks_and_vectors)
{
    static const struct { const char *ft; uint64_t cols; enum kvp_dtype want; } t[] = {
        {"q4_k_s", 96, KVP_DTYPE_Q5_0},   {"q4_k_s", 100, KVP_DTYPE_F16},  {"q5_k_s", 96, KVP_DTYPE_Q5_1},
        {"q6_k", 96, KVP_DTYPE_Q8_0},     {"q3_k_s", 96, KVP_DTYPE_Q4_0},  {"iq4_xs", 96, KVP_DTYPE_IQ4_NL},
        {"tq2_0", 64, KVP_DTYPE_Q4_0},    {"q8_0", 48, KVP_DTYPE_F16},     {"mxfp4_moe", 48, KVP_DTYPE_F16},
        {"q4_k_s", 512, KVP_DTYPE_Q4_K},
    };
    struct kvp_model *m = test_load("llama-3.1-8b");
    struct kvp_gguf_mix_state st;

    for (size_t i = 0; i < N_ELEMS(t); i++) {
        struct kvp_wtensor up = {KVP_WR_FFN_UP, 5, 14336, t[i].cols, 1};
        kvp_gguf_mix_begin(m, &st);
        ck_assert_msg(kvp_gguf_mix_type(m, ftype(t[i].ft), &up, &st) == t[i].want, "%s, rows of %llu", t[i].ft,
                      (unsigned long long)t[i].cols);
    }
    kvp_gguf_mix_begin(m, &st);
    ck_assert_int_eq(kvp_gguf_mix_type(m, ftype("q4_k_m"), &(struct kvp_wtensor){KVP_WR_FFN_UP, 0, 1, 4096, 1}, &st),
                     KVP_DTYPE_F32); /* 1-D, whatever the role */
    ck_assert_int_eq(kvp_gguf_mix_type(m, ftype("q4_k_m"), &(struct kvp_wtensor){KVP_WR_ROUTER, 0, 8, 4096, 1}, &st),
                     KVP_DTYPE_F32); /* ffn_gate_inp is never quantized */
    kvp_model_free(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gguf_mix");
    TCase *core = tcase_create("core");
    TCase *limits = tcase_create("limits");

    tcase_add_test(core, names);
    tcase_add_test(core, layer_columns);
    tcase_add_test(core, embeddings_and_output);
    tcase_add_test(core, falcon_ffn_down);
    tcase_add_test(core, attn_v_count_skips_shared_layers);
    tcase_add_test(limits, fallbacks_and_vectors);
    suite_add_tcase(s, core);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
