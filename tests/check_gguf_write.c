/* check_gguf_write.c -- the GGUF writer: write, read back with the GGUF reader, same KV geometry. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvplan/gguf.h"
#include "kvplan/model.h"
#include "testutil.h"


static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/kvplan-gguf-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    rmdir(dir);
}

/* The first n bytes of path (the header; the rest of a sparse file is a hole). */
static uint8_t *read_head(const char *path, uint64_t n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *d = malloc((size_t)n);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_eq(fread(d, 1, (size_t)n, f), n);
    fclose(f);
    return d;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* Every layer of a and b holds the same cache: kind, KV heads, head dims, window, MLA ranks. */
static void same_kv_geometry(const struct kvp_model *a, const struct kvp_model *b)
{
    ck_assert_uint_eq(a->n_layers, b->n_layers);
    ck_assert_uint_eq(a->hidden, b->hidden);
    ck_assert_uint_eq(a->vocab, b->vocab);
    ck_assert_uint_eq(a->intermediate, b->intermediate);
    ck_assert_uint_eq(a->max_context, b->max_context);
    ck_assert(a->tied_embeddings == b->tied_embeddings);
    for (uint32_t il = 0; il < a->n_layers; il++) {
        const struct kvp_layer_spec *x = kvp_model_layer(a, il), *y = kvp_model_layer(b, il);
        ck_assert_msg(x->kind == y->kind, "layer %u: %s vs %s", il, kvp_layer_kind_name(x->kind),
                      kvp_layer_kind_name(y->kind));
        ck_assert_uint_eq(x->n_heads, y->n_heads);
        ck_assert_uint_eq(x->n_kv_heads, y->n_kv_heads);
        ck_assert_uint_eq(x->head_dim_k, y->head_dim_k);
        ck_assert_uint_eq(x->head_dim_v, y->head_dim_v);
        ck_assert_uint_eq(x->window, y->window);
        ck_assert_uint_eq(x->kv_lora_rank, y->kv_lora_rank);
        ck_assert_uint_eq(x->qk_rope_dim, y->qk_rope_dim);
        ck_assert_uint_eq(x->q_lora_rank, y->q_lora_rank);
    }
}

/* Write m, check the file's size and alignment, read it back and compare. */
static void round_trip(const struct kvp_model *m, struct kvp_gguf_options *o, const char *want_arch)
{
    char path[256];
    struct kvp_model back;
    struct kvp_error err = {0};
    uint8_t *head;

    snprintf(path, sizeof path, "%s/%s.gguf", dir, m->name);
    ck_assert_kvp_ok(kvp_gguf_write(m, path, o, &err), err);
    ck_assert_str_eq(o->arch_out, want_arch);
    ck_assert_uint_eq(o->header_bytes % 32, 0);
    ck_assert_uint_gt(o->n_tensors, 3);
    ck_assert_uint_eq(file_size(path), o->file_bytes);
    head = read_head(path, o->header_bytes);
    kvp_model_init(&back);
    ck_assert_kvp_ok(kvp_model_parse_gguf(head, o->header_bytes, path, &back, &err), err);
    ck_assert_str_eq(back.family, want_arch);
    same_kv_geometry(m, &back);
    free(head);
    ck_assert_int_eq(remove(path), 0);
}

/* ---- core -------------------------------------------------------------------- */

static const struct {
    const char *file;
    const char *arch;
    uint64_t file_bytes; /* sparse: f16 matrices, f32 norms and 3-D tensors, header included */
} shipped[] = {
    {"models/llama-3.1-8b.yaml", "llama", 16061072960},     /* GQA 32/8 */
    {"models/llama-2-7b.yaml", "llama", 13477381696},       /* MHA: 13,477,363,712 B of tensors + 17,984 B header */
    {"models/qwen2.5-7b.yaml", "llama", 15231919648},       /* GQA 28/4 with q/k/v biases */
    {"models/gemma-3-4b.yaml", "gemma3", 0},                /* SWA, pattern 6 */
    {"models/gemma-3-27b.yaml", "gemma3", 54021450496},
    {"models/deepseek-v2-lite.yaml", "deepseek2", 5326767232}, /* MLA, no q_lora, 27 layers */
    {"models/deepseek-v3.yaml", "deepseek2", 76940588256},    /* MLA, MoE written dense */
};

START_TEST(test_shipped_sparse)
{
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_gguf_options o;

    make_dir();
    ck_assert_kvp_ok(kvp_model_load(shipped[_i].file, &m, &err), err);
    memset(&o, 0, sizeof o);
    o.sparse = true;
    o.dense_moe = true;
    round_trip(m, &o, shipped[_i].arch);
    if (shipped[_i].file_bytes)
        ck_assert_uint_eq(o.file_bytes, shipped[_i].file_bytes);
    kvp_model_free(m);
    remove_dir();
}
END_TEST

/* A small model built in code: 6 layers, head dim 32, GQA 4/2. */
static void tiny(struct kvp_model *m, const char *name, enum kvp_layer_kind kind)
{
    struct kvp_layer_spec full = {.kind = KVP_LAYER_FULL, .n_heads = 4, .n_kv_heads = 2, .head_dim_k = 32,
                                  .head_dim_v = 32};
    struct kvp_layer_spec slide = full;
    struct kvp_error err = {0};
    slide.kind = KVP_LAYER_SLIDING;
    slide.window = 128;
    kvp_model_init(m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->hidden = 128;
    m->intermediate = 256;
    m->vocab = 64;
    m->max_context = 4096;
    m->tied_embeddings = true;
    if (kind == KVP_LAYER_SLIDING) { /* irregular: s s f s f f (no period: a per-layer array) */
        m->qk_norm = true;
        ck_assert_kvp_ok(kvp_model_add_layers(m, &slide, 2, &err), err);
        ck_assert_kvp_ok(kvp_model_add_layers(m, &full, 1, &err), err);
        ck_assert_kvp_ok(kvp_model_add_layers(m, &slide, 1, &err), err);
        ck_assert_kvp_ok(kvp_model_add_layers(m, &full, 2, &err), err);
    } else {
        ck_assert_kvp_ok(kvp_model_add_layers(m, &full, 6, &err), err);
    }
}

START_TEST(test_dense_random)
{
    struct kvp_model m;
    struct kvp_gguf_options o;
    struct kvp_error err = {0};
    char path[128];
    uint8_t *a, *b, *c;
    uint64_t n;

    make_dir();
    tiny(&m, "tiny-dense", KVP_LAYER_FULL);
    memset(&o, 0, sizeof o);
    o.seed = 7;
    round_trip(&m, &o, "llama");
    /* f32: embeddings 128x64 + 6 layers of q,k,v,o (128x128, 64x128 x2, 128x128) and MLP 3x128x256 */
    n = o.file_bytes - o.header_bytes;
    ck_assert_uint_eq(n, (128 * 64 + 128 + 6 * (128 * 2 + 128 * 128 * 2 + 128 * 64 * 2 + 3 * 128 * 256)) * 4);
    /* the weights are a function of the seed */
    snprintf(path, sizeof path, "%s/w.gguf", dir);
    ck_assert_kvp_ok(kvp_gguf_write(&m, path, &o, &err), err);
    a = read_head(path, o.file_bytes);
    ck_assert_kvp_ok(kvp_gguf_write(&m, path, &o, &err), err);
    b = read_head(path, o.file_bytes);
    o.seed = 8;
    ck_assert_kvp_ok(kvp_gguf_write(&m, path, &o, &err), err);
    c = read_head(path, o.file_bytes);
    ck_assert_mem_eq(a, b, (size_t)o.file_bytes);
    ck_assert_int_ne(memcmp(a + o.header_bytes, c + o.header_bytes, (size_t)n), 0);
    /* the output norm (second tensor, after the 128x64 embeddings) is all 1.0 */
    {
        float one;
        memcpy(&one, a + o.header_bytes + 128 * 64 * 4, 4);
        ck_assert_float_eq(one, 1.0f);
    }
    free(a);
    free(b);
    free(c);
    ck_assert_int_eq(remove(path), 0);
    remove_dir();
}
END_TEST

START_TEST(test_irregular_swa)
{
    struct kvp_model m;
    struct kvp_gguf_options o;

    make_dir();
    tiny(&m, "tiny-swa", KVP_LAYER_SLIDING);
    memset(&o, 0, sizeof o);
    round_trip(&m, &o, "gemma3");
    remove_dir();
}
END_TEST

/* ---- limits -------------------------------------------------------------------- */

static const struct {
    const char *file;
    const char *arch;
    bool dense_moe;
    enum kvp_status code;
    const char *msg;
} refused[] = {
    {"models/falcon-7b.yaml", NULL, false, KVP_ERR_UNSUPPORTED,
     "cannot write 'falcon-7b' as GGUF arch 'llama': 'norm' is layer norm; the arch has RMS norms"},
    {"models/deepseek-v2-lite.yaml", NULL, false, KVP_ERR_UNSUPPORTED,
     "cannot write 'deepseek-v2-lite' as GGUF arch 'deepseek2': MoE layers are written for arch 'llama' only "
     "(Mixtral's: routed experts, no shared ones, no biases; else ask for dense MLPs: --dense-moe; the KV cache is "
     "the same)"},
    {"models/gemma-3-4b.yaml", "llama", false, KVP_ERR_UNSUPPORTED,
     "cannot write 'gemma-3-4b' as GGUF arch 'llama': 'qk_norm' is set; arch 'llama' has no q/k norms"},
    {"models/llama-3.1-8b.yaml", "gemma3", false, KVP_ERR_UNSUPPORTED,
     "cannot write 'llama-3.1-8b' as GGUF arch 'gemma3': arch 'gemma3' always has q/k norms ('qk_norm' is false)"},
    {"models/llama-3.1-8b.yaml", "deepseek2", false, KVP_ERR_UNSUPPORTED,
     "cannot write 'llama-3.1-8b' as GGUF arch 'deepseek2': layer 0 is full attention; the arch is MLA only"},
    {"models/deepseek-v3.yaml", "llama", true, KVP_ERR_UNSUPPORTED,
     "cannot write 'deepseek-v3' as GGUF arch 'llama': layer 0 is MLA; use arch 'deepseek2'"},
    {"models/llama-3.1-8b.yaml", "gpt2", false, KVP_ERR_USAGE,
     "unknown GGUF arch 'gpt2' (known: llama, gemma3, deepseek2)"},
    {"models/llama-3.1-8b.yaml", NULL, false, KVP_ERR_RANGE,
     "'llama-3.1-8b' has 29.92 GiB of weights, over the 4.00 GiB limit for random weights (write it sparse)"},
};

START_TEST(test_refused)
{
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_gguf_options o;
    char path[128];

    make_dir();
    ck_assert_kvp_ok(kvp_model_load(refused[_i].file, &m, &err), err);
    memset(&o, 0, sizeof o);
    o.arch = refused[_i].arch;
    o.dense_moe = refused[_i].dense_moe;
    snprintf(path, sizeof path, "%s/r.gguf", dir);
    ck_assert_int_eq(kvp_gguf_write(m, path, &o, &err), refused[_i].code);
    ck_assert_str_eq(err.msg, refused[_i].msg);
    ck_assert_int_ne(access(path, F_OK), 0); /* nothing left behind */
    ck_assert_int_eq(rmdir(dir), 0);         /* not even the temporary file */
    kvp_model_free(m);
}
END_TEST

START_TEST(test_unwritable)
{
    struct kvp_model m;
    struct kvp_gguf_options o;
    struct kvp_error err = {0};

    tiny(&m, "tiny-io", KVP_LAYER_FULL);
    memset(&o, 0, sizeof o);
    ck_assert_int_eq(kvp_gguf_write(&m, "/nonexistent-dir/x.gguf", &o, &err), KVP_ERR_IO);
    ck_assert_str_eq(err.msg, "cannot write '/nonexistent-dir/x.gguf': No such file or directory");
}
END_TEST

START_TEST(test_deepseek_q_lora)
{
    /* llama.cpp reads q_lora_rank unless the model has 26 or 27 layers ("lite") */
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_gguf_options o;
    char path[128];

    make_dir();
    ck_assert_kvp_ok(kvp_model_load("models/deepseek-v2-lite.yaml", &m, &err), err);
    ck_assert_kvp_ok(kvp_model_add_layers(m, kvp_model_layer(m, 1), 1, &err), err); /* 28 layers */
    memset(&o, 0, sizeof o);
    o.sparse = o.dense_moe = true;
    snprintf(path, sizeof path, "%s/q.gguf", dir);
    ck_assert_int_eq(kvp_gguf_write(m, path, &o, &err), KVP_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.msg, "cannot write 'deepseek-v2-lite' as GGUF arch 'deepseek2': 'q_lora_rank' is 0 but "
                              "llama.cpp requires it unless the model has 26 or 27 layers");
    kvp_model_free(m);
    remove_dir();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gguf_write");
    TCase *core = tcase_create("core"), *limits = tcase_create("limits");
    tcase_set_timeout(core, 30);
    tcase_add_loop_test(core, test_shipped_sparse, 0, N_ELEMS(shipped));
    tcase_add_test(core, test_dense_random);
    tcase_add_test(core, test_irregular_swa);
    tcase_add_loop_test(limits, test_refused, 0, N_ELEMS(refused));
    tcase_add_test(limits, test_unwritable);
    tcase_add_test(limits, test_deepseek_q_lora);
    suite_add_tcase(s, core);
    suite_add_tcase(s, limits);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
