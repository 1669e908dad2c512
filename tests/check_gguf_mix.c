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

/* Assert column col of every layer: `more` where the layer is listed in
 * layers (ended by -1), `base` elsewhere. */
static void expect_column(const struct walk *w, uint32_t n_layers, int col, const int *layers, enum kvp_dtype more,
                          enum kvp_dtype base)
{
    for (uint32_t il = 0; il < n_layers; il++) {
        bool listed = false;
        for (const int *p = layers; *p >= 0; p++)
            listed |= (uint32_t)*p == il;
        ck_assert_msg(w->layer[il][col] == (listed ? more : base), "layer %u column %d: %s", il, col,
                      kvp_dtype_info(w->layer[il][col])->name);
    }
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

/* Llama 3.1 8B (32 layers, GQA 32/8, untied), Q4_K_M: attn_v and ffn_down in
 * q6_K on the use_more_bits layers, the output in q6_K, the rest q4_K. */
START_TEST(llama_q4_k_m)
{
    struct kvp_model *m = test_load("llama-3.1-8b");
    static struct walk w;

    walk(m, ftype("q4_k_m"), &w);
    ck_assert_int_eq(w.embd, KVP_DTYPE_Q4_K);
    ck_assert_int_eq(w.out, KVP_DTYPE_Q6_K);
    ck_assert_int_eq(w.norm, KVP_DTYPE_F32);
    expect_column(&w, 32, V, more_32, KVP_DTYPE_Q6_K, KVP_DTYPE_Q4_K);
    expect_column(&w, 32, DOWN, more_32, KVP_DTYPE_Q6_K, KVP_DTYPE_Q4_K);
    for (int c = Q; c < PER_LAYER; c++)
        if (c != V && c != DOWN)
            expect_column(&w, 32, c, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K);
    kvp_model_free(m);
}
END_TEST

START_TEST(llama_other_k_mixes)
{
    static const int first2[] = {0, 1, -1}, first4[] = {0, 1, 2, 3, -1};
    struct kvp_model *m = test_load("llama-3.1-8b");
    static struct walk w;

    walk(m, ftype("q3_k_m"), &w); /* attn_v: q5_K for the first two, ffn_down: q5_K below 32/16 */
    expect_column(&w, 32, V, first2, KVP_DTYPE_Q5_K, KVP_DTYPE_Q4_K);
    expect_column(&w, 32, DOWN, first2, KVP_DTYPE_Q5_K, KVP_DTYPE_Q4_K);
    expect_column(&w, 32, O, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K);
    expect_column(&w, 32, Q, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K);
    ck_assert_int_eq(w.out, KVP_DTYPE_Q6_K);

    walk(m, ftype("q4_k_s"), &w); /* attn_v: q5_K for the first four; ffn_down below 32/8 */
    expect_column(&w, 32, V, first4, KVP_DTYPE_Q5_K, KVP_DTYPE_Q4_K);
    expect_column(&w, 32, DOWN, first4, KVP_DTYPE_Q5_K, KVP_DTYPE_Q4_K);

    walk(m, ftype("q2_k"), &w); /* GQA 4: attn_v q4_K; ffn_down q3_K; attn_output q3_K */
    expect_column(&w, 32, V, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K);
    expect_column(&w, 32, DOWN, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K);
    expect_column(&w, 32, O, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K);
    expect_column(&w, 32, GATE, none, KVP_DTYPE_Q2_K, KVP_DTYPE_Q2_K);

    walk(m, ftype("q4_0"), &w); /* legacy types: only the output moves, to q6_K */
    ck_assert_int_eq(w.out, KVP_DTYPE_Q6_K);
    ck_assert_int_eq(w.embd, KVP_DTYPE_Q4_0);
    expect_column(&w, 32, DOWN, none, KVP_DTYPE_Q4_0, KVP_DTYPE_Q4_0);

    walk(m, ftype("q8_0"), &w);
    ck_assert_int_eq(w.out, KVP_DTYPE_Q8_0);

    walk(m, ftype("iq4_xs"), &w); /* GQA 4: attn_v q5_K; ffn_down q5_K below 32/8 (no imatrix) */
    expect_column(&w, 32, V, none, KVP_DTYPE_Q5_K, KVP_DTYPE_Q5_K);
    expect_column(&w, 32, DOWN, first4, KVP_DTYPE_Q5_K, KVP_DTYPE_IQ4_XS);

    walk(m, ftype("iq2_xxs"), &w); /* token_embd q2_K, output q5_K, attn_v q4_K, first ffn_down q2_K */
    ck_assert_int_eq(w.embd, KVP_DTYPE_Q2_K);
    ck_assert_int_eq(w.out, KVP_DTYPE_Q5_K);
    expect_column(&w, 32, V, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K);
    expect_column(&w, 32, DOWN, first4, KVP_DTYPE_Q2_K, KVP_DTYPE_IQ2_XXS);

    walk(m, ftype("f16"), &w); /* no mixture: every matrix f16, vectors f32 */
    ck_assert_int_eq(w.embd, KVP_DTYPE_F16);
    ck_assert_int_eq(w.out, KVP_DTYPE_F16);
    ck_assert_int_eq(w.norm, KVP_DTYPE_F32);
    expect_column(&w, 32, V, none, KVP_DTYPE_F16, KVP_DTYPE_F16);
    kvp_model_free(m);
}
END_TEST

/* Llama 3.1 70B (80 layers, GQA): LLM_TYPE_70B lifts a q3_K or q4_K attn_v to q5_K. */
START_TEST(llama_70b)
{
    struct kvp_model *m = test_load("llama-3.1-70b");
    static struct walk w;

    walk(m, ftype("q3_k_s"), &w);
    expect_column(&w, 80, V, none, KVP_DTYPE_Q5_K, KVP_DTYPE_Q5_K);
    expect_column(&w, 80, K, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K);
    kvp_model_free(m);
    m = test_load("llama-3.1-8b");
    walk(m, ftype("q3_k_s"), &w);
    expect_column(&w, 32, V, none, KVP_DTYPE_Q3_K, KVP_DTYPE_Q3_K);
    kvp_model_free(m);
}
END_TEST

/* Mixtral 8x7B (8 experts): attn_v and attn_k q8_0, attn_output q5_K; the
 * experts' ffn_down by their own layer; MXFP4_MOE: experts mxfp4, the rest q8_0. */
START_TEST(mixtral)
{
    struct kvp_model *m = test_load("mixtral-8x7b");
    static struct walk w;

    ck_assert_uint_eq(m->n_layers, 32);
    walk(m, ftype("q4_k_m"), &w);
    expect_column(&w, 32, V, none, KVP_DTYPE_Q8_0, KVP_DTYPE_Q8_0);
    expect_column(&w, 32, K, none, KVP_DTYPE_Q8_0, KVP_DTYPE_Q8_0);
    expect_column(&w, 32, O, none, KVP_DTYPE_Q5_K, KVP_DTYPE_Q5_K);
    expect_column(&w, 32, DOWN, more_32, KVP_DTYPE_Q6_K, KVP_DTYPE_Q4_K);
    expect_column(&w, 32, UP, none, KVP_DTYPE_Q4_K, KVP_DTYPE_Q4_K);

    walk(m, ftype("mxfp4_moe"), &w);
    ck_assert_int_eq(w.embd, KVP_DTYPE_Q8_0);
    ck_assert_int_eq(w.out, KVP_DTYPE_Q8_0);
    expect_column(&w, 32, Q, none, KVP_DTYPE_Q8_0, KVP_DTYPE_Q8_0);
    expect_column(&w, 32, DOWN, none, KVP_DTYPE_MXFP4, KVP_DTYPE_MXFP4);
    expect_column(&w, 32, GATE, none, KVP_DTYPE_MXFP4, KVP_DTYPE_MXFP4);
    kvp_model_free(m);
}
END_TEST

/* Falcon 7B (fused attn_qkv, hidden 4544 = 17.75 x 256): the tied embeddings q8_0;
 * q, k and v take attn_v's rule, and every q4_K/q6_K row of 4544 falls back
 * to q5_0/q8_0; ffn_down's rows of 18176 = 71 x 256 do not. */
START_TEST(falcon_fallbacks)
{
    struct kvp_model *m = test_load("falcon-7b");
    static struct walk w;

    ck_assert_uint_eq(m->n_layers, 32);
    walk(m, ftype("q4_k_m"), &w);
    ck_assert(m->tied_embeddings);
    ck_assert_int_eq(w.embd, KVP_DTYPE_Q8_0); /* tied: the output's rule, q8_0 for falcon */
    expect_column(&w, 32, Q, more_32, KVP_DTYPE_Q8_0, KVP_DTYPE_Q5_0);
    expect_column(&w, 32, K, more_32, KVP_DTYPE_Q8_0, KVP_DTYPE_Q5_0);
    expect_column(&w, 32, V, more_32, KVP_DTYPE_Q8_0, KVP_DTYPE_Q5_0);
    for (uint32_t il = 0; il < 32; il++) { /* ffn_down: q6_K below 32/16, q5_K on more bits, else q4_K */
        bool more = false;
        for (const int *p = more_32; *p >= 0; p++)
            more |= (uint32_t)*p == il;
        ck_assert_int_eq(w.layer[il][DOWN], il < 2 ? KVP_DTYPE_Q6_K : more ? KVP_DTYPE_Q5_K : KVP_DTYPE_Q4_K);
    }
    kvp_model_free(m);
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
    tcase_add_test(core, llama_q4_k_m);
    tcase_add_test(core, llama_other_k_mixes);
    tcase_add_test(core, llama_70b);
    tcase_add_test(core, mixtral);
    tcase_add_test(core, falcon_fallbacks);
    tcase_add_test(limits, fallbacks_and_vectors);
    suite_add_tcase(s, core);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
