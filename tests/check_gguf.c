/* check_gguf.c -- the GGUF header reader, on headers written by a tiny in-test writer. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kvplan/model.h"
#include "kvplan/num.h"
#include "model/gguf_types.h" /* the value-type codes, as the reader numbers them */
#include "testutil.h"


/* ---- a tiny GGUF writer ------------------------------------------------- */

/* A GGUF file being built: v3 preamble at 0, n_kv and n_tensors patched as they grow. */
struct gbuf {
    uint8_t d[1 << 16];
    uint64_t n;       /* bytes written */
    uint64_t n_kv, n_tensors;
    uint64_t data;    /* the data section so far: the next tensor's offset */
};

static void put(struct gbuf *b, const void *p, uint64_t n)
{
    ck_assert_uint_le(b->n + n, sizeof b->d);
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

static void put_le(struct gbuf *b, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        put(b, &c, 1);
    }
}

static void put_u32(struct gbuf *b, uint32_t v) { put_le(b, v, 4); }
static void put_u64(struct gbuf *b, uint64_t v) { put_le(b, v, 8); }

static void put_str(struct gbuf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void patch_u64(struct gbuf *b, uint64_t at, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        b->d[at + i] = (uint8_t)(v >> (8 * i));
}

/* Magic, version, and zero counts that the writers below keep current. */
static void g_begin(struct gbuf *b, uint32_t version)
{
    memset(b, 0, sizeof *b);
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, 0); /* n_tensors at offset 8 */
    put_u64(b, 0); /* n_kv at offset 16 */
}

static void g_key(struct gbuf *b, const char *key, uint32_t type)
{
    put_str(b, key);
    put_u32(b, type);
    patch_u64(b, 16, ++b->n_kv);
}

static void kv_u32(struct gbuf *b, const char *key, uint32_t v)
{
    g_key(b, key, GGUF_UINT32);
    put_u32(b, v);
}

static void kv_str(struct gbuf *b, const char *key, const char *s)
{
    g_key(b, key, GGUF_STRING);
    put_str(b, s);
}

static void kv_arr_u32(struct gbuf *b, const char *key, const uint32_t *v, uint64_t n)
{
    g_key(b, key, GGUF_ARRAY);
    put_u32(b, GGUF_UINT32);
    put_u64(b, n);
    for (uint64_t i = 0; i < n; i++)
        put_u32(b, v[i]);
}

/* A token list of n one-letter strings. */
static void kv_tokens(struct gbuf *b, uint64_t n)
{
    g_key(b, "tokenizer.ggml.tokens", GGUF_ARRAY);
    put_u32(b, GGUF_STRING);
    put_u64(b, n);
    for (uint64_t i = 0; i < n; i++)
        put_str(b, "t");
}

/* A tensor info of ggml type `type` and n_dims dims ne (ne[0] innermost). */
/* A tensor info at the data section's end, as llama.cpp lays them out (each
 * one's bytes padded to 32); a type or shape kvplan refuses adds nothing. */
static void tensor(struct gbuf *b, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne)
{
    enum kvp_dtype dt;
    uint64_t rows = 1, row;
    struct kvp_error err = {0};
    put_str(b, name);
    put_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        put_u64(b, ne[d]);
    put_u32(b, type);
    put_u64(b, b->data);
    patch_u64(b, 8, ++b->n_tensors);
    for (uint32_t d = 1; d < n_dims; d++)
        rows = kvp_mul(rows, ne[d], &rows) ? rows : 0;
    if (kvp_dtype_from_ggml(type, &dt) &&
        kvp_format_row_bytes(&(struct kvp_format){.dtype = dt}, ne[0], &row, &err) == KVP_OK &&
        kvp_mul(row, rows, &row))
        b->data += (row + 31) / 32 * 32;
}

/* A 2-D F16 tensor info [ne0, ne1]. */
static void tensor2(struct gbuf *b, const char *name, uint64_t ne0, uint64_t ne1)
{
    tensor(b, name, 1, 2, (const uint64_t[]){ne0, ne1});
}

/* Parse b as "model.gguf" into m; validate when it parsed. */
static enum kvp_status parse(const struct gbuf *b, uint64_t len, struct kvp_model *m, struct kvp_error *err)
{
    enum kvp_status st;
    kvp_model_init(m);
    memset(err, 0, sizeof *err);
    st = kvp_model_parse_gguf(b->d, len, "model.gguf", m, err);
    if (st == KVP_OK)
        st = kvp_model_validate(m, err);
    return st;
}

static const char *text(const struct kvp_error *err)
{
    static char buf[KVP_ERROR_TEXT_MAX];
    return kvp_error_text(err, buf, sizeof buf);
}

/* llama GQA: 4 layers, E 256, 8 heads, 2 KV heads, hd 32, 100 tokens. */
static void llama_header(struct gbuf *b, bool with_kv)
{
    g_begin(b, 3);
    kv_str(b, "general.architecture", "llama");
    kv_str(b, "general.name", "Tiny Llama 3 GQA!");
    kv_u32(b, "general.file_type", 1);
    kv_u32(b, "llama.block_count", 4);
    kv_u32(b, "llama.context_length", 4096);
    kv_u32(b, "llama.embedding_length", 256);
    kv_u32(b, "llama.feed_forward_length", 688);
    kv_u32(b, "llama.attention.head_count", 8);
    if (with_kv)
        kv_u32(b, "llama.attention.head_count_kv", 2);
    kv_tokens(b, 100);
    tensor2(b, "token_embd.weight", 256, 100);
    tensor2(b, "output.weight", 256, 100);
}

/* ---- core ------------------------------------------------------------------ */

START_TEST(llama_gqa)
{
    struct gbuf b;
    struct kvp_model m;
    struct kvp_error err;

    llama_header(&b, true);
    ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
    ck_assert_uint_eq(m.n_layers, 4);
    ck_assert_uint_eq(m.n_specs, 1);
    ck_assert_int_eq(kvp_model_layer(&m, 3)->kind, KVP_LAYER_FULL);
    ck_assert_uint_eq(kvp_model_layer(&m, 0)->n_heads, 8);
    ck_assert_uint_eq(kvp_model_layer(&m, 0)->n_kv_heads, 2);
    ck_assert_uint_eq(kvp_model_layer(&m, 0)->head_dim_k, 32);
    ck_assert_uint_eq(kvp_model_layer(&m, 0)->head_dim_v, 32);
    ck_assert_int_eq(kvp_model_layer(&m, 0)->mlp, KVP_MLP_DENSE);
    ck_assert_uint_eq(m.max_context, 4096);
    ck_assert_uint_eq(m.hidden, 256);
    ck_assert_uint_eq(m.intermediate, 688);
    ck_assert_uint_eq(m.vocab, 100);
    ck_assert(!m.tied_embeddings);
    ck_assert_int_eq(m.dtype, KVP_DTYPE_F16);
    ck_assert_str_eq(m.name, "tiny-llama-3-gqa");
    ck_assert_str_eq(m.family, "llama");
    ck_assert_str_eq(m.arch, "llama"); /* a GGUF's own: q4_0, q6_k ... name llama.cpp file types */
    ck_assert_str_eq(m.source, "GGUF header of model.gguf");
    ck_assert_uint_eq(m.n_warnings, 0);
}
END_TEST

START_TEST(llama_vocab_size_and_tied)
{
    struct gbuf b;
    struct kvp_model m;
    struct kvp_error err;

    g_begin(&b, 2);
    kv_u32(&b, "llama.block_count", 2); /* before general.architecture: order does not matter */
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "llama.context_length", 8192);
    kv_u32(&b, "llama.embedding_length", 128);
    kv_u32(&b, "llama.feed_forward_length", 256);
    kv_u32(&b, "llama.attention.head_count", 4);
    kv_u32(&b, "llama.vocab_size", 32000);
    kv_u32(&b, "general.file_type", 15); /* Q4_K_M: the tensor table says what is stored */
    tensor2(&b, "token_embd.weight", 128, 32000);
    ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
    ck_assert_uint_eq(m.vocab, 32000);
    ck_assert(m.tied_embeddings);
    ck_assert_uint_eq(kvp_model_layer(&m, 0)->n_kv_heads, 4); /* default: MHA */
    ck_assert_str_eq(m.name, "model");                         /* no general.name: the file name */
    ck_assert_int_eq(m.dtype, KVP_DTYPE_F16);
    ck_assert_uint_eq(m.n_warnings, 0);
    ck_assert_str_eq(m.wtable.mixture, "Q4_K_M");
}
END_TEST

START_TEST(vocab_from_embedding_rows)
{
    struct gbuf b;
    struct kvp_model m;
    struct kvp_error err;

    g_begin(&b, 3);
    kv_str(&b, "general.architecture", "qwen2");
    kv_u32(&b, "general.file_type", 7);
    kv_u32(&b, "qwen2.block_count", 2);
    kv_u32(&b, "qwen2.context_length", 32768);
    kv_u32(&b, "qwen2.embedding_length", 128);
    kv_u32(&b, "qwen2.feed_forward_length", 256);
    kv_u32(&b, "qwen2.attention.head_count", 4);
    kv_u32(&b, "qwen2.attention.head_count_kv", 1);
    tensor2(&b, "token_embd.weight", 128, 151936);
    tensor2(&b, "output.weight", 128, 151936);
    ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
    ck_assert_uint_eq(m.vocab, 151936);
    ck_assert_int_eq(m.dtype, KVP_DTYPE_F16);
    ck_assert(m.attn_qkv_bias);
    ck_assert(!m.tied_embeddings);
}
END_TEST

START_TEST(per_layer_kv_heads)
{
    static const uint32_t kv[4] = {2, 2, 0, 4};
    struct gbuf b;
    struct kvp_model m;
    struct kvp_error err;

    g_begin(&b, 3);
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "general.file_type", 0);
    kv_u32(&b, "llama.block_count", 4);
    kv_u32(&b, "llama.context_length", 2048);
    kv_u32(&b, "llama.embedding_length", 256);
    kv_u32(&b, "llama.feed_forward_length", 512);
    kv_u32(&b, "llama.attention.head_count", 8);
    kv_arr_u32(&b, "llama.attention.head_count_kv", kv, 4);
    kv_u32(&b, "llama.vocab_size", 64);
    ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
    ck_assert_int_eq(m.dtype, KVP_DTYPE_F16);
    ck_assert_uint_eq(m.n_layers, 4);
    ck_assert_uint_eq(m.n_specs, 3);
    ck_assert_uint_eq(kvp_model_layer(&m, 0)->n_kv_heads, 2);
    ck_assert_uint_eq(kvp_model_layer(&m, 1)->n_kv_heads, 2);
    ck_assert_int_eq(kvp_model_layer(&m, 2)->kind, KVP_LAYER_NONE);
    ck_assert_uint_eq(kvp_model_layer(&m, 3)->n_kv_heads, 4);
    ck_assert_int_eq(kvp_model_layer(&m, 3)->kind, KVP_LAYER_FULL);
    ck_assert_uint_eq(m.n_warnings, 1); /* a layer without KV heads */
    ck_assert_uint_eq(m.wtable.n, 0);   /* no tensor infos: no table */
}
END_TEST

/* gemma3: 12 layers, window 1024, pattern 6 (given, or gemma3's default): layers 5 and 11 full. */
static void gemma3_header(struct gbuf *b, bool with_pattern)
{
    g_begin(b, 3);
    kv_str(b, "general.architecture", "gemma3");
    kv_str(b, "general.name", "Gemma 3 Tiny");
    kv_u32(b, "general.file_type", 32);
    kv_u32(b, "gemma3.block_count", 12);
    kv_u32(b, "gemma3.context_length", 131072);
    kv_u32(b, "gemma3.embedding_length", 1152);
    kv_u32(b, "gemma3.feed_forward_length", 6912);
    kv_u32(b, "gemma3.attention.head_count", 4);
    kv_u32(b, "gemma3.attention.head_count_kv", 1);
    kv_u32(b, "gemma3.attention.key_length", 256);
    kv_u32(b, "gemma3.attention.value_length", 256);
    kv_u32(b, "gemma3.attention.sliding_window", 1024);
    if (with_pattern)
        kv_u32(b, "gemma3.attention.sliding_window_pattern", 6);
    kv_tokens(b, 300);
    tensor2(b, "token_embd.weight", 1152, 300);
}

START_TEST(gemma3_swa)
{
    for (int with_pattern = 0; with_pattern < 2; with_pattern++) {
        struct gbuf b;
        struct kvp_model m;
        struct kvp_error err;

        gemma3_header(&b, with_pattern);
        ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
        ck_assert_uint_eq(m.n_layers, 12);
        for (uint32_t il = 0; il < 12; il++) {
            const struct kvp_layer_spec *s = kvp_model_layer(&m, il);
            bool full = il % 6 == 5;
            ck_assert_msg(s->kind == (full ? KVP_LAYER_FULL : KVP_LAYER_SLIDING), "layer %u: kind %s", il,
                          kvp_layer_kind_name(s->kind));
            ck_assert_uint_eq(s->window, full ? 0 : 1024);
            ck_assert_uint_eq(s->head_dim_k, 256);
            ck_assert_uint_eq(s->n_kv_heads, 1);
        }
        ck_assert_int_eq(m.dtype, KVP_DTYPE_F16);
        ck_assert_str_eq(m.name, "gemma-3-tiny");
        ck_assert(m.tied_embeddings);
        ck_assert(m.qk_norm);
        ck_assert_uint_eq(m.norms_per_layer, 4);
        ck_assert_uint_eq(m.vocab, 300);
    }
}
END_TEST

/* deepseek2 MLA: 3 layers, the first dense, then MoE. new_keys: key_length_mla present. */
static void deepseek2_header(struct gbuf *b, bool new_keys)
{
    g_begin(b, 3);
    kv_str(b, "general.architecture", "deepseek2");
    kv_u32(b, "general.file_type", 1);
    kv_u32(b, "deepseek2.block_count", 3);
    kv_u32(b, "deepseek2.context_length", 163840);
    kv_u32(b, "deepseek2.embedding_length", 1024);
    kv_u32(b, "deepseek2.feed_forward_length", 2048);
    kv_u32(b, "deepseek2.attention.head_count", 16);
    kv_u32(b, "deepseek2.attention.head_count_kv", new_keys ? 1 : 16);
    kv_u32(b, "deepseek2.attention.kv_lora_rank", 512);
    kv_u32(b, "deepseek2.attention.q_lora_rank", 1536);
    kv_u32(b, "deepseek2.rope.dimension_count", 64);
    kv_u32(b, "deepseek2.attention.key_length", new_keys ? 576 : 192);
    kv_u32(b, "deepseek2.attention.value_length", new_keys ? 512 : 128);
    if (new_keys) {
        kv_u32(b, "deepseek2.attention.key_length_mla", 192);
        kv_u32(b, "deepseek2.attention.value_length_mla", 128);
    }
    kv_u32(b, "deepseek2.leading_dense_block_count", 1);
    kv_u32(b, "deepseek2.expert_count", 64);
    kv_u32(b, "deepseek2.expert_used_count", 6);
    kv_u32(b, "deepseek2.expert_feed_forward_length", 256);
    kv_u32(b, "deepseek2.expert_shared_count", 2);
    kv_u32(b, "deepseek2.vocab_size", 1000);
    tensor2(b, "token_embd.weight", 1024, 1000);
    tensor2(b, "output.weight", 1024, 1000);
}

START_TEST(deepseek2_mla)
{
    for (int new_keys = 0; new_keys < 2; new_keys++) {
        struct gbuf b;
        struct kvp_model m;
        struct kvp_error err;

        deepseek2_header(&b, new_keys);
        ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
        ck_assert_uint_eq(m.n_layers, 3);
        ck_assert_uint_eq(m.n_specs, 2);
        for (uint32_t il = 0; il < 3; il++) {
            const struct kvp_layer_spec *s = kvp_model_layer(&m, il);
            ck_assert_int_eq(s->kind, KVP_LAYER_MLA);
            ck_assert_int_eq(s->mlp, il == 0 ? KVP_MLP_DENSE : KVP_MLP_MOE);
            ck_assert_uint_eq(s->n_heads, 16);
            ck_assert_uint_eq(s->n_kv_heads, 1);
            ck_assert_uint_eq(s->head_dim_k, 192);
            ck_assert_uint_eq(s->head_dim_v, 128);
            ck_assert_uint_eq(s->kv_lora_rank, 512);
            ck_assert_uint_eq(s->qk_rope_dim, 64);
            ck_assert_uint_eq(s->q_lora_rank, 1536);
        }
        ck_assert_uint_eq(m.n_experts, 64);
        ck_assert_uint_eq(m.n_experts_active, 6);
        ck_assert_uint_eq(m.expert_intermediate, 256);
        ck_assert_uint_eq(m.n_shared_experts, 2);
        ck_assert_uint_eq(m.shared_intermediate, 256);
        ck_assert_uint_eq(m.intermediate, 2048);
    }
}
END_TEST

START_TEST(unknown_arch_warns)
{
    struct gbuf b;
    struct kvp_model m;
    struct kvp_error err;

    g_begin(&b, 3);
    kv_str(&b, "general.architecture", "futurenet");
    kv_u32(&b, "general.file_type", 1);
    kv_u32(&b, "futurenet.block_count", 2);
    kv_u32(&b, "futurenet.context_length", 1024);
    kv_u32(&b, "futurenet.embedding_length", 64);
    kv_u32(&b, "futurenet.feed_forward_length", 128);
    kv_u32(&b, "futurenet.attention.head_count", 4);
    kv_u32(&b, "futurenet.vocab_size", 10);
    ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
    ck_assert_uint_eq(m.n_warnings, 1);
    ck_assert_str_eq(m.warnings[0],
                     "architecture 'futurenet' is not known to kvplan: only the generic keys were read");
}
END_TEST

/* Every tensor's exact bytes, summed per ggml type (ggml-common.h block sizes):
 *   q6_K   token_embd + output [4096, 100]      2 x 100 rows x 16 x 210 B  = 672000
 *   q4_K   attn_q [4096, 4096]                  4096 rows x 16 x 144 B     = 9437184
 *   q8_0   ffn_down_exps [256, 4096, 8]         32768 rows x 8 x 34 B      = 8912896 (experts)
 *   f32    attn_norm [4096]                     4096 x 4 B                 = 16384
 *   iq4_xs ffn_gate [256, 10]                   10 rows x 136 B            = 1360
 *   bf16   attn_k [64, 3]                       192 x 2 B                  = 384
 *   tq2_0  ffn_up [256, 2, 1, 3], 4 dims        6 rows x 66 B              = 396 */
START_TEST(tensor_table)
{
    static const struct { enum kvp_dtype d; uint64_t tensors, params, bytes; } want[] = {
        {KVP_DTYPE_Q4_K, 1, 4096 * 4096, 9437184},   {KVP_DTYPE_Q8_0, 1, 256 * 4096 * 8, 8912896},
        {KVP_DTYPE_Q6_K, 2, 2 * 4096 * 100, 672000}, {KVP_DTYPE_F32, 1, 4096, 16384},
        {KVP_DTYPE_IQ4_XS, 1, 2560, 1360},           {KVP_DTYPE_TQ2_0, 1, 256 * 6, 396},
        {KVP_DTYPE_BF16, 1, 192, 384},
    };
    struct gbuf b;
    struct kvp_model m;
    struct kvp_error err;

    g_begin(&b, 3);
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "general.file_type", 15);
    kv_u32(&b, "llama.block_count", 1);
    kv_u32(&b, "llama.context_length", 8192);
    kv_u32(&b, "llama.embedding_length", 4096);
    kv_u32(&b, "llama.feed_forward_length", 14336);
    kv_u32(&b, "llama.attention.head_count", 32);
    tensor(&b, "token_embd.weight", 14, 2, (const uint64_t[]){4096, 100});
    tensor(&b, "output.weight", 14, 2, (const uint64_t[]){4096, 100});
    tensor(&b, "blk.0.attn_norm.weight", 0, 1, (const uint64_t[]){4096});
    tensor(&b, "blk.0.attn_q.weight", 12, 2, (const uint64_t[]){4096, 4096});
    tensor(&b, "blk.0.attn_k.weight", 30, 2, (const uint64_t[]){64, 3});
    tensor(&b, "blk.0.ffn_gate.weight", 23, 2, (const uint64_t[]){256, 10});
    tensor(&b, "blk.0.ffn_up.weight", 35, 4, (const uint64_t[]){256, 2, 1, 3});
    tensor(&b, "blk.0.ffn_down_exps.weight", 8, 3, (const uint64_t[]){256, 4096, 8});
    ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
    ck_assert_uint_eq(m.wtable.n, N_ELEMS(want));
    for (size_t i = 0; i < N_ELEMS(want); i++) {
        ck_assert_msg(m.wtable.rows[i].dtype == want[i].d, "row %zu is %s", i,
                      kvp_dtype_info(m.wtable.rows[i].dtype)->name);
        ck_assert_uint_eq(m.wtable.rows[i].tensors, want[i].tensors);
        ck_assert_uint_eq(m.wtable.rows[i].params, want[i].params);
        ck_assert_uint_eq(m.wtable.rows[i].bytes, want[i].bytes);
    }
    ck_assert_uint_eq(m.wtable.expert_bytes, 8912896);
    ck_assert_str_eq(m.wtable.what, "GGUF tensor table");
    ck_assert_str_eq(m.wtable.mixture, "Q4_K_M");
    ck_assert_int_eq(m.dtype, KVP_DTYPE_F16); /* the KV cache's default, as in llama.cpp */
    ck_assert_uint_eq(m.n_warnings, 0);
}
END_TEST

/* ---- limits ---------------------------------------------------------------- */

/* Every prefix of a valid header is an error (never a crash); the whole is OK. */
START_TEST(truncated_prefixes)
{
    struct gbuf b;
    llama_header(&b, true);
    for (uint64_t len = 0; len <= b.n; len++) {
        struct kvp_model m;
        struct kvp_error err;
        enum kvp_status st = parse(&b, len, &m, &err);
        if (len == b.n)
            ck_assert_kvp_ok(st, err);
        else
            ck_assert_msg(st != KVP_OK && err.msg[0], "prefix of %llu bytes was accepted", (unsigned long long)len);
    }
}
END_TEST

/* gguf-split's first part: its table lists its own tensors only, said in a warning */
START_TEST(split_part_warns)
{
    struct gbuf b;
    struct kvp_model m;
    struct kvp_error err;

    g_begin(&b, 3);
    kv_str(&b, "general.architecture", "llama");
    kv_u32(&b, "split.no", 0);
    kv_u32(&b, "split.count", 3);
    kv_u32(&b, "llama.block_count", 4);
    kv_u32(&b, "llama.context_length", 4096);
    kv_u32(&b, "llama.embedding_length", 256);
    kv_u32(&b, "llama.feed_forward_length", 688);
    kv_u32(&b, "llama.attention.head_count", 8);
    kv_tokens(&b, 100);
    tensor2(&b, "token_embd.weight", 256, 100);
    ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
    ck_assert_uint_ge(m.n_warnings, 1);
    ck_assert_str_eq(m.warnings[m.n_warnings - 1],
                     "part 1 of 3 of a split GGUF (gguf-split): its tensor table lists this part's tensors only, so "
                     "the weights are this part's, not the model's");
    llama_header(&b, true);
    ck_assert_kvp_ok(parse(&b, b.n, &m, &err), err);
    for (uint32_t i = 0; i < m.n_warnings; i++)
        ck_assert_ptr_null(strstr(m.warnings[i], "split GGUF"));
}
END_TEST

START_TEST(truncated_message)
{
    struct gbuf b;
    struct kvp_model m;
    struct kvp_error err;

    llama_header(&b, true);
    /* preamble 24, general.architecture 45, general.name 49, general.file_type 33, then
     * key 3's name and type (8 + 17 + 4): its u32 value is at 180; cut after 2 of its bytes */
    ck_assert_int_eq(parse(&b, 180 + 2, &m, &err), KVP_ERR_TRUNCATED);
    ck_assert_str_eq(text(&err), "model.gguf: truncated header: key 3 ('llama.block_count') needs 4 bytes "
                                 "at offset 180, 2 left");
}
END_TEST

/* A hostile header after a valid preamble, and the exact error it gives. */
struct hostile {
    const char *what;
    enum kvp_status code;
    const char *want;
};

/* Build case i into b. */
static void hostile_header(struct gbuf *b, int i)
{
    static const uint32_t kv3[3] = {2, 2, 2};
    switch (i) {
    case 0: /* string length 2^63 */
        g_begin(b, 3);
        put_u64(b, UINT64_C(1) << 63);
        put(b, "abcdefghijklmnop", 16);
        patch_u64(b, 16, 1);
        break;
    case 1: /* array count 2^60 */
        g_begin(b, 3);
        g_key(b, "llama.attention.head_count_kv", GGUF_ARRAY);
        put_u32(b, GGUF_UINT32);
        put_u64(b, UINT64_C(1) << 60);
        put_u32(b, 8);
        break;
    case 2: /* unknown value type 99 */
        g_begin(b, 3);
        g_key(b, "general.architecture", 99);
        put_u64(b, 0);
        break;
    case 3: /* version 1 */
        g_begin(b, 1);
        break;
    case 4: /* n_kv 2^40 */
        g_begin(b, 3);
        patch_u64(b, 16, UINT64_C(1) << 40);
        put(b, "0123456789abcdef0123456789abcdef", 32);
        break;
    case 5: /* per-layer array of 3 entries for 4 layers */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        kv_u32(b, "llama.block_count", 4);
        kv_u32(b, "llama.embedding_length", 64);
        kv_u32(b, "llama.attention.head_count", 4);
        kv_arr_u32(b, "llama.attention.head_count_kv", kv3, 3);
        break;
    case 6: /* missing block_count */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        kv_u32(b, "llama.embedding_length", 64);
        break;
    case 7: /* an array of arrays */
        g_begin(b, 3);
        g_key(b, "x.nested", GGUF_ARRAY);
        put_u32(b, GGUF_ARRAY);
        put_u64(b, 1);
        put_u32(b, GGUF_UINT32);
        put_u64(b, 1);
        put_u32(b, 1);
        break;
    case 8: /* more layers than kvplan holds */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        kv_u32(b, "llama.block_count", 5000);
        break;
    case 9: /* a string where a count belongs */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        kv_str(b, "llama.block_count", "32");
        break;
    case 10: /* no architecture */
        g_begin(b, 3);
        kv_u32(b, "llama.block_count", 2);
        break;
    case 11: /* big-endian */
        g_begin(b, 0x03000000u);
        break;
    case 12: /* a string array whose count cannot fit */
        g_begin(b, 3);
        g_key(b, "tokenizer.ggml.tokens", GGUF_ARRAY);
        put_u32(b, GGUF_STRING);
        put_u64(b, UINT64_C(1) << 40);
        put_str(b, "a");
        break;
    case 13: /* n_tensors 2^50 */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        patch_u64(b, 8, UINT64_C(1) << 50);
        break;
    case 14: /* a tensor of ggml type 31 (the removed Q4_0_4_4) */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        tensor(b, "blk.0.attn_q.weight", 31, 2, (const uint64_t[]){4096, 4096});
        break;
    case 15: /* a q4_K row of 4000 values: not a multiple of 256 */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        tensor(b, "blk.0.attn_q.weight", 12, 2, (const uint64_t[]){4000, 4096});
        break;
    case 16: /* 2^40 x 2^40 x 2^40 values */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        tensor(b, "x", 0, 3, (const uint64_t[]){UINT64_C(1) << 40, UINT64_C(1) << 40, UINT64_C(1) << 40});
        break;
    case 17: /* the second tensor placed over the first (overlap: its bytes counted twice) */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        tensor2(b, "a", 256, 100);
        tensor2(b, "b", 256, 100);
        patch_u64(b, b->n - 8, 0);
        break;
    case 18: /* an alignment of 48 bytes */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        kv_u32(b, "general.alignment", 48);
        tensor2(b, "a", 256, 100);
        break;
    case 19: /* 2^62 bytes in each of four ggml types: each type's sum fits, the file's does not (the
              * weights' total wrapped to "0 B, fits") */
        g_begin(b, 3);
        kv_str(b, "general.architecture", "llama");
        tensor(b, "a", 0, 2, (const uint64_t[]){UINT64_C(1) << 30, UINT64_C(1) << 30});
        tensor(b, "b", 1, 2, (const uint64_t[]){UINT64_C(1) << 31, UINT64_C(1) << 30});
        tensor(b, "c", 30, 2, (const uint64_t[]){UINT64_C(1) << 31, UINT64_C(1) << 30});
        tensor(b, "d", 24, 2, (const uint64_t[]){UINT64_C(1) << 31, UINT64_C(1) << 31});
        break;
    default:
        ck_abort_msg("no hostile case %d", i);
    }
}

static const struct hostile hostile[] = {
    {"string length 2^63", KVP_ERR_TRUNCATED,
     "model.gguf: truncated header: key 0 name needs 9223372036854775808 bytes at offset 32, 16 left"},
    {"array count 2^60", KVP_ERR_TRUNCATED,
     "model.gguf: truncated header: key 0 ('llama.attention.head_count_kv') has 1152921504606846976 uint32 "
     "values, more than fit in the 4 bytes left at offset 77"},
    {"value type 99", KVP_ERR_SYNTAX,
     "model.gguf: key 0 ('general.architecture') has unknown value type 99 at offset 52"},
    {"version 1", KVP_ERR_UNSUPPORTED,
     "model.gguf: GGUF version 1 is not supported (kvplan reads versions 2 and 3)"},
    {"n_kv 2^40", KVP_ERR_TRUNCATED,
     "model.gguf: truncated header: 1099511627776 key/value pairs do not fit in the 32 bytes left at offset 24"},
    {"per-layer length", KVP_ERR_SCHEMA,
     "model.gguf: 'llama.attention.head_count_kv' has 3 entries but 'llama.block_count' is 4"},
    {"missing block_count", KVP_ERR_SCHEMA, "model.gguf: missing key 'llama.block_count'"},
    {"nested array", KVP_ERR_UNSUPPORTED,
     "model.gguf: key 0 ('x.nested') is an array of arrays at offset 44 (not supported)"},
    {"5000 layers", KVP_ERR_RANGE, "model.gguf: 'llama.block_count' must be 1..1024 (got 5000)"},
    {"string count", KVP_ERR_SCHEMA, "model.gguf: 'llama.block_count' must be an integer (got string)"},
    {"no architecture", KVP_ERR_SCHEMA, "model.gguf: missing key 'general.architecture'"},
    {"big-endian", KVP_ERR_UNSUPPORTED, "model.gguf: big-endian GGUF is not supported (version field 0x03000000)"},
    {"string array count", KVP_ERR_TRUNCATED,
     "model.gguf: truncated header: key 0 ('tokenizer.ggml.tokens') has 1099511627776 strings, more than fit "
     "in the 9 bytes left at offset 69"},
    {"n_tensors 2^50", KVP_ERR_TRUNCATED,
     "model.gguf: truncated header: 1125899906842624 tensor infos do not fit in the 0 bytes left at offset 69"},
    {"ggml type 31", KVP_ERR_UNSUPPORTED,
     "model.gguf: tensor 0 ('blk.0.attn_q.weight') has unknown ggml type 31 at offset 116"},
    {"q4_K row of 4000", KVP_ERR_SYNTAX,
     "model.gguf: tensor 0 ('blk.0.attn_q.weight') has rows of 4000 values, not a multiple of the q4_K block "
     "of 256 at offset 116"},
    {"2^120 values", KVP_ERR_OVERFLOW,
     "model.gguf: tensor 0 ('x') has 1099511627776 x 1099511627776 x 1099511627776 x 1 values, more than "
     "2^64, at offset 106"},
    /* llama.cpp gguf.cpp gguf_init_from_file_impl: each tensor where the ones before it end */
    {"overlapping tensor", KVP_ERR_SYNTAX,
     "model.gguf: tensor 1 ('b') has offset 0, expected 51200 (the tensors before it, each padded to 32 bytes; "
     "llama.cpp refuses it)"},
    {"alignment 48", KVP_ERR_SCHEMA, "model.gguf: 'general.alignment' must be a power of 2 below 2^32 (key 1)"},
    {"2^64 bytes of data", KVP_ERR_OVERFLOW,
     "model.gguf: tensor 3 ('d'): the data section overflows 64 bits at offset 221"},
};

START_TEST(hostile_inputs)
{
    for (size_t i = 0; i < N_ELEMS(hostile); i++) {
        struct gbuf b;
        struct kvp_model m;
        struct kvp_error err;
        enum kvp_status st;

        hostile_header(&b, (int)i);
        st = parse(&b, b.n, &m, &err);
        ck_assert_msg(st == hostile[i].code, "%s: status %d, want %d (%s)", hostile[i].what, st, hostile[i].code,
                      text(&err));
        ck_assert_msg(strcmp(text(&err), hostile[i].want) == 0, "%s:\n got  '%s'\n want '%s'", hostile[i].what,
                      text(&err), hostile[i].want);
        ck_assert_uint_eq(err.line, 0);
    }
}
END_TEST

/* A header's sizes are claims about its file: a GGUF whose tensor table
 * places data past the file's end loads with a warning that says so (a
 * header alone is an input kvplan takes; a 400-byte file claimed 8 EiB of
 * weights without a word, issue #37); with its data section there (zeros up
 * to the end the table gives) it loads without one. */
START_TEST(data_within_the_file)
{
    const char *path = "build/check_gguf-claims.gguf";
    struct gbuf b;
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    FILE *f;
    uint64_t end;

    llama_header(&b, true);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b.d, 1, b.n, f), b.n);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_kvp_ok(kvp_model_load(path, &m, &err), err);
    end = (b.n + 31) / 32 * 32 + 2 * 51200; /* two f16 tensors of 256 x 100, at the aligned data start */
    ck_assert_uint_eq(m->wtable.file_bytes, end);
    ck_assert_uint_eq(m->n_warnings, 1);
    ck_assert_msg(strstr(m->warnings[0], "its tensor table places data up to byte") &&
                      strstr(m->warnings[0], "a header alone"),
                  "%s", m->warnings[0]);
    kvp_model_free(m);
    f = fopen(path, "ab");
    ck_assert_ptr_nonnull(f);
    for (uint64_t i = b.n; i < end; i++)
        ck_assert_int_ne(fputc(0, f), EOF);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_kvp_ok(kvp_model_load(path, &m, &err), err);
    ck_assert_uint_eq(m->n_warnings, 0);
    kvp_model_free(m);
    remove(path);
}
END_TEST

/* Every prefix of the hostile headers too: an error, never a crash. */
START_TEST(hostile_prefixes)
{
    for (size_t i = 0; i < N_ELEMS(hostile); i++) {
        struct gbuf b;
        hostile_header(&b, (int)i);
        for (uint64_t len = 0; len <= b.n; len++) {
            struct kvp_model m;
            struct kvp_error err;
            ck_assert_msg(parse(&b, len, &m, &err) != KVP_OK, "%s: prefix %llu accepted", hostile[i].what,
                          (unsigned long long)len);
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gguf");
    TCase *core = tcase_create("core");
    TCase *limits = tcase_create("limits");

    tcase_add_test(core, llama_gqa);
    tcase_add_test(core, llama_vocab_size_and_tied);
    tcase_add_test(core, vocab_from_embedding_rows);
    tcase_add_test(core, per_layer_kv_heads);
    tcase_add_test(core, gemma3_swa);
    tcase_add_test(core, deepseek2_mla);
    tcase_add_test(core, unknown_arch_warns);
    tcase_add_test(core, tensor_table);
    tcase_add_test(core, split_part_warns);
    suite_add_tcase(s, core);
    tcase_add_test(limits, truncated_prefixes);
    tcase_add_test(limits, truncated_message);
    tcase_add_test(limits, hostile_inputs);
    tcase_add_test(limits, data_within_the_file);
    tcase_add_test(limits, hostile_prefixes);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
