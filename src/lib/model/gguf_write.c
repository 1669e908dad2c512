/* gguf_write.c -- write a model's shape as GGUF v3 (see gguf.h).
 *
 * Layout (little-endian), as src/lib/model/model_gguf.c reads it and llama.cpp's
 * gguf.cpp writes it:
 *
 *     "GGUF", u32 3, u64 n_tensors, u64 n_kv
 *     n_kv pairs       key (u64 length + bytes), u32 type, value
 *     n_tensors infos  name, u32 n_dims, u64 ne[n_dims] (ne0 innermost), u32 ggml type, u64 offset
 *     zero padding to a multiple of 32, then the data, each tensor at a multiple of 32
 *
 * The keys and tensor names per architecture follow llama.cpp's loaders
 * (src/models/llama.cpp, gemma3.cpp, deepseek2.cpp at v0.5.0). The header is
 * built in memory first (a few hundred KB at most), so every size is known
 * and checked before the file is touched.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvplan/gguf.h"
#include "kvplan/num.h"
#include "kvplan/render.h"

#include "gguf_types.h"
#include "base/io.h"

const char *const kvp_gguf_archs[] = {"llama", "gemma3", "deepseek2", NULL};

enum { ARCH_LLAMA, ARCH_GEMMA3, ARCH_DEEPSEEK2 };

#define ALIGN 32 /* GGUF_DEFAULT_ALIGNMENT */
#define DEFAULT_MAX_DENSE (UINT64_C(4) << 30)

/* ggml tensor types used here (GGUF value types: gguf_types.h). */
enum { GGML_F32 = 0, GGML_F16 = 1 };

/* ---- the header being built ---------------------------------------------- */

struct tensor {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[3];
    uint32_t type;
    bool norm;        /* filled with 1.0 rather than random values */
    uint64_t offset;  /* from the data start */
    uint64_t bytes;
};

struct writer {
    struct kvp_buf kv;      /* the key/value pairs */
    uint64_t n_kv;
    struct tensor *t;
    uint64_t n_t, cap_t;
    uint64_t data_bytes;    /* running end of the data, aligned */
    bool sparse;
    struct kvp_error *err;
    enum kvp_status st;     /* first failure; later calls are no-ops */
    char prefix[16];        /* "<arch>." */
};

static void put_le(struct kvp_buf *b, uint64_t v, unsigned n)
{
    char c[8];
    for (unsigned i = 0; i < n; i++)
        c[i] = (char)(v >> (8 * i) & 0xff);
    kvp_buf_put(b, c, n);
}

static void put_str(struct kvp_buf *b, const char *s)
{
    put_le(b, strlen(s), 8);
    kvp_buf_put(b, s, strlen(s));
}

/* A key under general./tokenizer. (full) or the arch prefix (arch = true). */
static void key(struct writer *w, bool arch, const char *name, uint32_t type)
{
    char full[96];
    snprintf(full, sizeof full, "%s%s", arch ? w->prefix : "", name);
    put_str(&w->kv, full);
    put_le(&w->kv, type, 4);
    w->n_kv++;
}

static void kv_u32(struct writer *w, const char *name, uint32_t v)
{
    key(w, true, name, GGUF_UINT32);
    put_le(&w->kv, v, 4);
}

static void kv_f32(struct writer *w, const char *name, float v)
{
    uint32_t raw;
    memcpy(&raw, &v, 4);
    key(w, true, name, GGUF_FLOAT32);
    put_le(&w->kv, raw, 4);
}

static void kv_str(struct writer *w, bool arch, const char *name, const char *v)
{
    key(w, arch, name, GGUF_STRING);
    put_str(&w->kv, v);
}

/* Append a tensor of n_dims dims; its type follows the mode: f32 when dense
 * (exact for a reference decoder), f16 matrices when sparse (the real file's
 * size), f32 for 1-D norms and 3-D tensors (llama.cpp aborts on f16 3-D
 * attn_k_b/attn_v_b on the CPU backend). */
static void tensor(struct writer *w, const char *name, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                   bool norm)
{
    struct tensor *t;
    uint64_t n, bytes, end;

    if (w->st != KVP_OK)
        return;
    if (w->n_t == w->cap_t) {
        uint64_t cap = w->cap_t ? w->cap_t * 2 : 64;
        struct tensor *p = realloc(w->t, (size_t)cap * sizeof *p);
        if (!p) {
            w->st = kvp_fail(w->err, KVP_ERR_NOMEM, "out of memory for %" PRIu64 " tensor infos", cap);
            return;
        }
        w->t = p;
        w->cap_t = cap;
    }
    t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->norm = norm;
    t->type = w->sparse && n_dims == 2 ? GGML_F16 : GGML_F32;
    if (!kvp_mul3(ne0, n_dims > 1 ? ne1 : 1, n_dims > 2 ? ne2 : 1, &n) ||
        !kvp_mul(n, t->type == GGML_F16 ? 2 : 4, &bytes) || !kvp_add(w->data_bytes, bytes, &end) ||
        !kvp_add(end, ALIGN - 1, &end)) {
        w->st = kvp_fail(w->err, KVP_ERR_OVERFLOW, "tensor '%s' does not fit in 64 bits", name);
        return;
    }
    t->offset = w->data_bytes;
    t->bytes = bytes;
    w->data_bytes = end / ALIGN * ALIGN;
    w->n_t++;
}

static void tensor1(struct writer *w, const char *name, uint64_t ne0, bool norm)
{
    tensor(w, name, 1, ne0, 1, 1, norm);
}

static void tensor2(struct writer *w, const char *name, uint64_t ne0, uint64_t ne1)
{
    tensor(w, name, 2, ne0, ne1, 1, false);
}

/* blk.<il>.<name> */
static void layer_tensor(struct writer *w, uint32_t il, const char *name, uint32_t n_dims, uint64_t ne0,
                         uint64_t ne1, uint64_t ne2, bool norm)
{
    char full[64];
    snprintf(full, sizeof full, "blk.%" PRIu32 ".%s", il, name);
    tensor(w, full, n_dims, ne0, ne1, ne2, norm);
}

/* ---- what each architecture can express ------------------------------------ */

static enum kvp_status refuse(struct kvp_error *err, const struct kvp_model *m, const char *arch, const char *why)
{
    return kvp_fail(err, KVP_ERR_UNSUPPORTED, "cannot write '%s' as GGUF arch '%s': %s", m->name, arch, why);
}

/* Pick the arch from the layer kinds when none is asked. */
static int arch_default(const struct kvp_model *m)
{
    int a = ARCH_LLAMA;
    for (uint32_t i = 0; i < m->n_specs; i++) {
        if (m->specs[i].kind == KVP_LAYER_MLA)
            return ARCH_DEEPSEEK2;
        if (m->specs[i].kind == KVP_LAYER_SLIDING)
            a = ARCH_GEMMA3;
    }
    return a;
}

/* The sliding period n with "layer il slides iff il % n < n - 1", or 0 if
 * the layout has none (then a per-layer bool array is written). */
static uint32_t swa_period(const struct kvp_model *m)
{
    for (uint32_t n = 2; n <= m->n_layers + 1; n++) {
        bool ok = true;
        for (uint32_t il = 0; il < m->n_layers && ok; il++)
            ok = (kvp_model_layer(m, il)->kind == KVP_LAYER_SLIDING) == (il % n < n - 1);
        if (ok)
            return n;
    }
    return 0;
}

/* One attention shape for every layer (kinds may differ between full and
 * sliding); check what the arch's loader can hold. */
static enum kvp_status check_shape(const struct kvp_model *m, int arch, const char *name,
                                   const struct kvp_gguf_options *opt, struct kvp_error *err)
{
    const struct kvp_layer_spec *s0 = kvp_model_layer(m, 0);
    char why[200];
    uint32_t window = 0;

    if (m->norm != KVP_NORM_RMS)
        return refuse(err, m, name, "'norm' is layer norm; the arch has RMS norms");
    if (m->act != KVP_ACT_GATED)
        return refuse(err, m, name, "'act' is a plain 2-matrix MLP; the arch has a gated MLP");
    if (m->learned_positions)
        return refuse(err, m, name, "learned position embeddings; the arch uses RoPE");
    if (m->attn_out_bias || m->mlp_bias || m->attn_sinks || m->attn_gate)
        return refuse(err, m, name, "output/MLP biases, attention sinks or gates are not written");
    if (m->attn_qkv_bias && arch != ARCH_LLAMA)
        return refuse(err, m, name, "q/k/v biases are written for arch 'llama' only");
    if (m->qk_norm && arch == ARCH_LLAMA)
        return refuse(err, m, name, "'qk_norm' is set; arch 'llama' has no q/k norms");
    if (!m->qk_norm && arch == ARCH_GEMMA3)
        return refuse(err, m, name, "arch 'gemma3' always has q/k norms ('qk_norm' is false)");
    if (m->n_experts && !opt->dense_moe && (arch != ARCH_LLAMA || m->n_shared_experts || m->shared_expert_gate ||
                                            m->router_bias || m->expert_bias))
        return refuse(err, m, name, "MoE layers are written for arch 'llama' only (Mixtral's: routed experts, no "
                                    "shared ones, no biases; else ask for dense MLPs: --dense-moe; the KV cache is "
                                    "the same)");
    if (m->vocab == 0 || m->hidden == 0 || m->intermediate == 0)
        return refuse(err, m, name, "'vocab', 'hidden' and 'intermediate' must be set");
    if (m->max_context > UINT32_MAX)
        return refuse(err, m, name, "'max_context' does not fit in 32 bits");
    for (uint32_t il = 0; il < m->n_layers; il++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, il);
        bool same = s->n_heads == s0->n_heads && s->n_kv_heads == s0->n_kv_heads &&
                    s->head_dim_k == s0->head_dim_k && s->head_dim_v == s0->head_dim_v &&
                    s->kv_lora_rank == s0->kv_lora_rank && s->qk_rope_dim == s0->qk_rope_dim &&
                    s->q_lora_rank == s0->q_lora_rank;
        if (!same) {
            snprintf(why, sizeof why, "layer %" PRIu32 " has another attention shape than layer 0", il);
            return refuse(err, m, name, why);
        }
        if (s->mlp == KVP_MLP_NONE) {
            snprintf(why, sizeof why, "layer %" PRIu32 " has no MLP", il);
            return refuse(err, m, name, why);
        }
        if (m->n_experts && !opt->dense_moe && s->mlp != KVP_MLP_MOE) {
            snprintf(why, sizeof why, "layer %" PRIu32 " is dense; arch 'llama' writes MoE in every layer", il);
            return refuse(err, m, name, why);
        }
        switch (s->kind) {
        case KVP_LAYER_FULL:
            if (arch == ARCH_DEEPSEEK2) {
                snprintf(why, sizeof why, "layer %" PRIu32 " is full attention; the arch is MLA only", il);
                return refuse(err, m, name, why);
            }
            break;
        case KVP_LAYER_SLIDING:
            /* llama.cpp's converter writes Mistral as arch llama, with no window:
             * its layers are cached in full, and so are they here */
            if (arch == ARCH_LLAMA)
                break;
            if (arch != ARCH_GEMMA3) {
                snprintf(why, sizeof why, "layer %" PRIu32 " is sliding; use arch 'gemma3'", il);
                return refuse(err, m, name, why);
            }
            if (window && s->window != window)
                return refuse(err, m, name, "sliding layers have different windows");
            window = s->window;
            break;
        case KVP_LAYER_MLA:
            if (arch != ARCH_DEEPSEEK2) {
                snprintf(why, sizeof why, "layer %" PRIu32 " is MLA; use arch 'deepseek2'", il);
                return refuse(err, m, name, why);
            }
            break;
        default:
            snprintf(why, sizeof why, "layer %" PRIu32 " is '%s'", il, kvp_layer_kind_name(s->kind));
            return refuse(err, m, name, why);
        }
    }
    if (arch != ARCH_DEEPSEEK2 && s0->head_dim_k != s0->head_dim_v) {
        snprintf(why, sizeof why, "K and V head dims differ (%" PRIu32 " and %" PRIu32 ")", s0->head_dim_k,
                 s0->head_dim_v);
        return refuse(err, m, name, why);
    }
    if (arch == ARCH_DEEPSEEK2) {
        if (s0->qk_rope_dim == 0 || s0->head_dim_k <= s0->qk_rope_dim)
            return refuse(err, m, name, "MLA needs 0 < 'qk_rope_dim' < 'head_dim_k' (the nope part)");
        /* llama.cpp reads q_lora_rank unless the model is "lite" (26 or 27 layers) */
        if (s0->q_lora_rank == 0 && m->n_layers != 26 && m->n_layers != 27)
            return refuse(err, m, name, "'q_lora_rank' is 0 but llama.cpp requires it unless the model "
                                        "has 26 or 27 layers");
        if (s0->q_lora_rank != 0 && (m->n_layers == 26 || m->n_layers == 27))
            return refuse(err, m, name, "a model of 26 or 27 layers is read by llama.cpp as 'lite', "
                                        "without 'q_lora_rank'");
    }
    return KVP_OK;
}

/* ---- keys and tensors ------------------------------------------------------- */

static void keys(struct writer *w, const struct kvp_model *m, int arch, const char *name, bool any_f16,
                 const struct kvp_gguf_options *opt)
{
    const struct kvp_layer_spec *s0 = kvp_model_layer(m, 0);
    bool moe = m->n_experts && !opt->dense_moe;

    kv_str(w, false, "general.architecture", name);
    kv_str(w, false, "general.name", m->name);
    key(w, false, "general.file_type", GGUF_UINT32); /* llama_ftype: ALL_F32 0, MOSTLY_F16 1 */
    put_le(&w->kv, any_f16 ? 1 : 0, 4);
    kv_str(w, false, "tokenizer.ggml.model", "none"); /* no token list: llama.cpp makes vocab_size dummies */
    kv_u32(w, "context_length", (uint32_t)m->max_context);
    kv_u32(w, "embedding_length", m->hidden);
    kv_u32(w, "block_count", m->n_layers);
    /* Mixtral's llama MoE: n_ff is the experts' width */
    kv_u32(w, "feed_forward_length", moe ? m->expert_intermediate : m->intermediate);
    if (moe) {
        kv_u32(w, "expert_count", m->n_experts);
        kv_u32(w, "expert_used_count", m->n_experts_active);
    }
    kv_u32(w, "vocab_size", m->vocab);
    kv_u32(w, "attention.head_count", s0->n_heads);
    kv_f32(w, "attention.layer_norm_rms_epsilon", opt->rms_eps > 0 ? opt->rms_eps : 1e-6f);
    kv_f32(w, "rope.freq_base", opt->rope_base > 0 ? opt->rope_base : 10000.0f);
    if (arch == ARCH_DEEPSEEK2) {
        /* MLA is stored as MQA of one latent "head": K = latent + rope, V = latent */
        kv_u32(w, "attention.head_count_kv", 1);
        kv_u32(w, "attention.kv_lora_rank", s0->kv_lora_rank);
        if (s0->q_lora_rank)
            kv_u32(w, "attention.q_lora_rank", s0->q_lora_rank);
        kv_u32(w, "attention.key_length", s0->kv_lora_rank + s0->qk_rope_dim);
        kv_u32(w, "attention.value_length", s0->kv_lora_rank);
        kv_u32(w, "attention.key_length_mla", s0->head_dim_k);
        kv_u32(w, "attention.value_length_mla", s0->head_dim_v);
        kv_u32(w, "rope.dimension_count", s0->qk_rope_dim);
        kv_u32(w, "leading_dense_block_count", m->n_layers); /* every layer dense: no MoE */
        kv_u32(w, "expert_feed_forward_length", m->intermediate);
        kv_u32(w, "expert_shared_count", 0);
        return;
    }
    kv_u32(w, "attention.head_count_kv", s0->n_kv_heads);
    kv_u32(w, "attention.key_length", s0->head_dim_k);
    kv_u32(w, "attention.value_length", s0->head_dim_v);
    kv_u32(w, "rope.dimension_count", s0->head_dim_k);
    if (arch == ARCH_GEMMA3) {
        uint32_t window = 0, n = swa_period(m);
        for (uint32_t il = 0; il < m->n_layers; il++)
            if (kvp_model_layer(m, il)->kind == KVP_LAYER_SLIDING)
                window = kvp_model_layer(m, il)->window;
        if (window == 0)
            return; /* no sliding layer: llama.cpp caches every layer in full */
        kv_u32(w, "attention.sliding_window", window);
        if (n) {
            kv_u32(w, "attention.sliding_window_pattern", n);
        } else { /* per-layer bools, true = sliding (llama.cpp load_swa_pattern reads an array too) */
            key(w, true, "attention.sliding_window_pattern", GGUF_ARRAY);
            put_le(&w->kv, GGUF_BOOL, 4);
            put_le(&w->kv, m->n_layers, 8);
            for (uint32_t il = 0; il < m->n_layers; il++)
                put_le(&w->kv, kvp_model_layer(m, il)->kind == KVP_LAYER_SLIDING, 1);
        }
    }
}

static void tensors(struct writer *w, const struct kvp_model *m, int arch, bool untied, bool moe)
{
    const struct kvp_layer_spec *s0 = kvp_model_layer(m, 0);
    uint64_t E = m->hidden, V = m->vocab, F = m->intermediate, H = s0->n_heads;

    tensor2(w, "token_embd.weight", E, V);
    tensor1(w, "output_norm.weight", E, true);
    if (!m->tied_embeddings || untied)
        tensor2(w, "output.weight", E, V);
    for (uint32_t il = 0; il < m->n_layers && w->st == KVP_OK; il++) {
        layer_tensor(w, il, "attn_norm.weight", 1, E, 1, 1, true);
        if (arch == ARCH_DEEPSEEK2) {
            uint64_t r = s0->kv_lora_rank, rope = s0->qk_rope_dim, ql = s0->q_lora_rank;
            uint64_t nope = s0->head_dim_k - rope, vh = s0->head_dim_v;
            if (ql) {
                layer_tensor(w, il, "attn_q_a_norm.weight", 1, ql, 1, 1, true);
                layer_tensor(w, il, "attn_q_a.weight", 2, E, ql, 1, false);
                layer_tensor(w, il, "attn_q_b.weight", 2, ql, H * s0->head_dim_k, 1, false);
            } else {
                layer_tensor(w, il, "attn_q.weight", 2, E, H * s0->head_dim_k, 1, false);
            }
            layer_tensor(w, il, "attn_kv_a_mqa.weight", 2, E, r + rope, 1, false);
            layer_tensor(w, il, "attn_kv_a_norm.weight", 1, r, 1, 1, true);
            layer_tensor(w, il, "attn_k_b.weight", 3, nope, r, H, false);
            layer_tensor(w, il, "attn_v_b.weight", 3, r, vh, H, false);
            layer_tensor(w, il, "attn_output.weight", 2, H * vh, E, 1, false);
        } else {
            uint64_t hd = s0->head_dim_k, kv = s0->n_kv_heads;
            layer_tensor(w, il, "attn_q.weight", 2, E, H * hd, 1, false);
            layer_tensor(w, il, "attn_k.weight", 2, E, kv * hd, 1, false);
            layer_tensor(w, il, "attn_v.weight", 2, E, kv * hd, 1, false);
            if (m->attn_qkv_bias) {
                layer_tensor(w, il, "attn_q.bias", 1, H * hd, 1, 1, false);
                layer_tensor(w, il, "attn_k.bias", 1, kv * hd, 1, 1, false);
                layer_tensor(w, il, "attn_v.bias", 1, kv * hd, 1, 1, false);
            }
            layer_tensor(w, il, "attn_output.weight", 2, H * hd, E, 1, false);
            if (arch == ARCH_GEMMA3) {
                layer_tensor(w, il, "attn_q_norm.weight", 1, hd, 1, 1, true);
                layer_tensor(w, il, "attn_k_norm.weight", 1, hd, 1, 1, true);
                layer_tensor(w, il, "post_attention_norm.weight", 1, E, 1, 1, true);
                layer_tensor(w, il, "post_ffw_norm.weight", 1, E, 1, 1, true);
            }
        }
        layer_tensor(w, il, "ffn_norm.weight", 1, E, 1, 1, true);
        if (moe) { /* llama-model.cpp, arch llama with n_expert > 0 (Mixtral) */
            uint64_t X = m->n_experts, FE = m->expert_intermediate;
            layer_tensor(w, il, "ffn_gate_inp.weight", 2, E, X, 1, false);
            layer_tensor(w, il, "ffn_gate_exps.weight", 3, E, FE, X, false);
            layer_tensor(w, il, "ffn_down_exps.weight", 3, FE, E, X, false);
            layer_tensor(w, il, "ffn_up_exps.weight", 3, E, FE, X, false);
            continue;
        }
        layer_tensor(w, il, "ffn_gate.weight", 2, E, F, 1, false);
        layer_tensor(w, il, "ffn_up.weight", 2, E, F, 1, false);
        layer_tensor(w, il, "ffn_down.weight", 2, F, E, 1, false);
    }
}

/* ---- output ------------------------------------------------------------------ */

/* splitmix64: a seeded stream; the weights are U(-0.1, 0.1) from its top 24 bits. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static enum kvp_status io_fail(struct kvp_error *err, const char *what, const char *path)
{
    return kvp_fail(err, KVP_ERR_IO, "cannot %s '%s': %s", what, path, strerror(errno));
}

/* The dense data: each f32 tensor in order, norms 1.0, the rest random; zero padding between. */
static enum kvp_status write_data(FILE *f, const struct writer *w, const struct kvp_gguf_options *opt,
                                  const char *tmp, struct kvp_error *err)
{
    static const char zeros[ALIGN] = {0};
    uint64_t at = 0, s = opt->seed;
    float buf[1024];

    for (uint64_t i = 0; i < w->n_t; i++) {
        const struct tensor *t = &w->t[i];
        uint64_t left = t->bytes / 4;
        if (fwrite(zeros, 1, (size_t)(t->offset - at), f) != t->offset - at)
            return io_fail(err, "write", tmp);
        if (opt->weights) { /* the caller's floats, already f32 in GGUF order */
            const float *p = opt->weights(opt->weights_ctx, t->name, left);
            if (!p)
                return kvp_fail(err, KVP_ERR_UNSUPPORTED, "no weights for tensor '%s' of %" PRIu64 " values",
                                t->name, left);
            if (left && fwrite(p, 4, (size_t)left, f) != left)
                return io_fail(err, "write", tmp);
            left = 0;
        }
        while (left) {
            size_t n = left < 1024 ? (size_t)left : 1024;
            for (size_t j = 0; j < n; j++)
                buf[j] = t->norm ? 1.0f : (float)((double)(next(&s) >> 40) / 16777216.0 * 0.2 - 0.1);
            if (fwrite(buf, 4, n, f) != n)
                return io_fail(err, "write", tmp);
            left -= n;
        }
        at = t->offset + t->bytes;
    }
    if (fwrite(zeros, 1, (size_t)(w->data_bytes - at), f) != w->data_bytes - at)
        return io_fail(err, "write", tmp);
    return KVP_OK;
}

/* The whole file at tmp: header, infos, padding, then data or a hole. */
static enum kvp_status write_file(const struct writer *w, const char *tmp, const struct kvp_gguf_options *opt,
                                  uint64_t *header, struct kvp_error *err)
{
    struct kvp_buf h = {0};
    enum kvp_status st = KVP_OK;
    FILE *f;

    kvp_buf_put(&h, "GGUF", 4);
    put_le(&h, 3, 4);
    put_le(&h, w->n_t, 8);
    put_le(&h, w->n_kv, 8);
    kvp_buf_put(&h, w->kv.data, w->kv.len);
    for (uint64_t i = 0; i < w->n_t; i++) {
        const struct tensor *t = &w->t[i];
        put_str(&h, t->name);
        put_le(&h, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_le(&h, t->ne[d], 8);
        put_le(&h, t->type, 4);
        put_le(&h, t->offset, 8);
    }
    while (h.len % ALIGN)
        kvp_buf_put(&h, "", 1);
    if (h.nomem) {
        kvp_buf_release(&h);
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory for the GGUF header");
    }
    *header = h.len;
    if (!(f = fopen(tmp, "wb"))) {
        kvp_buf_release(&h);
        return io_fail(err, "create", tmp);
    }
    if (fwrite(h.data, 1, h.len, f) != h.len)
        st = io_fail(err, "write", tmp);
    else if (w->sparse) {
        /* the data is a hole: llama.cpp checks tensor bounds against the file size only */
        if (fflush(f) != 0 || ftruncate(fileno(f), (off_t)(h.len + w->data_bytes)) != 0)
            st = io_fail(err, "extend", tmp);
    } else {
        st = write_data(f, w, opt, tmp, err);
    }
    if (fclose(f) != 0 && st == KVP_OK)
        st = io_fail(err, "close", tmp);
    kvp_buf_release(&h);
    return st;
}

enum kvp_status kvp_gguf_write(const struct kvp_model *m, const char *path, struct kvp_gguf_options *opt,
                               struct kvp_error *err)
{
    struct writer w;
    const char *name;
    char tmp[KVP_TEXT_MAX + 32];
    int fd;
    uint64_t limit = opt->max_dense_bytes ? opt->max_dense_bytes : DEFAULT_MAX_DENSE, header = 0, total;
    int arch = -1;
    enum kvp_status st;

    if (opt->arch) {
        for (int i = 0; kvp_gguf_archs[i]; i++)
            if (strcmp(opt->arch, kvp_gguf_archs[i]) == 0)
                arch = i;
        if (arch < 0)
            return kvp_fail(err, KVP_ERR_USAGE, "unknown GGUF arch '%s' (known: llama, gemma3, deepseek2)",
                            opt->arch);
    } else {
        arch = arch_default(m);
    }
    name = kvp_gguf_archs[arch];
    if (m->n_layers == 0)
        return refuse(err, m, name, "the model has no layers");
    if ((st = check_shape(m, arch, name, opt, err)) != KVP_OK)
        return st;
    if (opt->weights && (arch != ARCH_LLAMA || opt->sparse || m->attn_qkv_bias))
        return refuse(err, m, name, "the caller's weights are written for arch 'llama' only, dense, "
                                    "without q/k/v biases");
    if (strlen(path) > KVP_TEXT_MAX)
        return kvp_fail(err, KVP_ERR_USAGE, "output path is too long (%zu bytes)", strlen(path));

    memset(&w, 0, sizeof w);
    w.sparse = opt->sparse;
    w.err = err;
    snprintf(w.prefix, sizeof w.prefix, "%s.", name);
    tensors(&w, m, arch, opt->untied, m->n_experts && !opt->dense_moe);
    keys(&w, m, arch, name, w.sparse, opt);
    if (w.st == KVP_OK && w.kv.nomem)
        w.st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory for the GGUF keys");
    if ((st = w.st) != KVP_OK)
        goto out;
    if (!w.sparse && w.data_bytes > limit) {
        char a[32], b[32];
        st = kvp_fail(err, KVP_ERR_RANGE, "'%s' has %s of weights, over the %s limit for random weights "
                      "(write it sparse)", m->name, kvp_bytes_text(w.data_bytes, false, a, sizeof a),
                      kvp_bytes_text(limit, false, b, sizeof b));
        goto out;
    }
    /* beside the target, removed if a signal ends the process (gigabytes of it otherwise) */
    if ((st = kvp_tmp_beside(path, tmp, sizeof tmp, &fd, err)) != KVP_OK)
        goto out;
    close(fd); /* write_file opens it again by name */
    if ((st = write_file(&w, tmp, opt, &header, err)) != KVP_OK) {
        remove(tmp);
        goto out;
    }
    if (!kvp_add(header, w.data_bytes, &total)) {
        remove(tmp);
        st = kvp_fail(err, KVP_ERR_OVERFLOW, "the file size of '%s' does not fit in 64 bits", m->name);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        st = io_fail(err, "rename into", path);
        remove(tmp);
        goto out;
    }
    snprintf(opt->arch_out, sizeof opt->arch_out, "%s", name);
    opt->n_tensors = w.n_t;
    opt->header_bytes = header;
    opt->file_bytes = total;
out:
    kvp_tmp_unguard();
    kvp_buf_release(&w.kv);
    free(w.t);
    return st;
}
