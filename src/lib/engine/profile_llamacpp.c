/* profile_llamacpp.c -- llama.cpp KV-cache sizing, after src/llama-context.cpp,
 * src/llama-kv-cache.cpp, llama-kv-cache-iswa.cpp and ggml-alloc/ggml-cuda
 * (docs/engines.md, section llamacpp; checked against the real library by
 * tests/oracle). */
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "profile.h"

#define PAD(x, n) (kvp_cdiv((x), (n)) * (n))
#define CELL_PAD 256           /* n_ctx and SWA cells are padded to 256 */
#define CELL_PAD_NO_FA 32      /* b6182 get_padding(): 256 with flash attention, else 32 */
#define MAX_SEQ 256            /* LLAMA_MAX_SEQ: "n_seq_max must be <= 256" */
#define CUDA_ALIGN 128         /* ggml-cuda buffer alignment */
#define MATRIX_ROW_PADDING 512 /* ggml-cuda pads quantized rows to 512 values */
#define HOST_ALIGN 32          /* the CPU buffer's alignment (ggml-impl.h TENSOR_ALIGNMENT) */

static bool quantized(enum kvp_dtype t)
{
    return kvp_dtype_info(t)->block_elems > 1;
}

/* ggml_row_size(type, n) */
static uint64_t row_size(enum kvp_dtype t, uint64_t n)
{
    const struct kvp_dtype_info *i = kvp_dtype_info(t);
    return n / i->block_elems * (i->block_bits / 8);
}

/* Bytes ggml-cuda allocates for a tensor of ne0 x rows: its size, plus a
 * padded row for quantized types, then the buffer alignment. UINT64_MAX if
 * that does not fit in 64 bits. */
static uint64_t alloc_size(enum kvp_dtype t, uint64_t ne0, uint64_t rows)
{
    uint64_t n = kvp_sat_mul(row_size(t, ne0), rows);
    if (quantized(t) && ne0 % MATRIX_ROW_PADDING != 0)
        n = kvp_sat_add(n, row_size(t, MATRIX_ROW_PADDING - ne0 % MATRIX_ROW_PADDING));
    return n > UINT64_MAX - CUDA_ALIGN ? UINT64_MAX : PAD(n, CUDA_ALIGN);
}

/* The same in the CPU buffer (host memory): the tensor padded to 32, no row padding. */
static uint64_t host_alloc_size(enum kvp_dtype t, uint64_t ne0, uint64_t rows)
{
    uint64_t n = kvp_sat_mul(row_size(t, ne0), rows);
    return n > UINT64_MAX - HOST_ALIGN ? UINT64_MAX : PAD(n, HOST_ALIGN);
}

/* acc += v, where UINT64_MAX anywhere means overflow. */
static bool add(uint64_t *acc, uint64_t v)
{
    *acc = kvp_sat_add(*acc, v);
    return *acc != UINT64_MAX;
}

/* Architectures whose sliding windows (or chunks) llama.cpp applies: their
 * GGUF carries the window and the layer pattern (llama-model.cpp). Others --
 * Mistral and Qwen2 run as arch llama/qwen2 -- get full caches in every layer. */
static bool honours_windows(const char *family)
{
    static const char *const arches[] = {
        "gemma2", "gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "gpt_oss", "gpt-oss",
        "cohere2", "olmo2", "exaone4", "llama4", "llama4_text", NULL,
    };
    for (const char *const *a = arches; *a; a++)
        if (strcmp(*a, family) == 0)
            return true;
    return false;
}

/* Architectures llama.cpp does not implement (llama-arch.cpp has no entry),
 * so the model never loads. */
static bool known_arch(const struct kvp_model *m)
{
    return strcmp(m->family, "opt") != 0;
}

static bool windowed(const struct kvp_model *m, const struct kvp_layer_spec *s)
{
    return (s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED) && honours_windows(m->family);
}

static enum kvp_status check_types(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_error *err)
{
    static const enum kvp_dtype ok[] = {KVP_DTYPE_F32, KVP_DTYPE_F16, KVP_DTYPE_BF16, KVP_DTYPE_Q8_0,
                                        KVP_DTYPE_Q4_0, KVP_DTYPE_Q4_1, KVP_DTYPE_Q5_0, KVP_DTYPE_Q5_1,
                                        KVP_DTYPE_IQ4_NL};
    enum kvp_status st = kvp_profile_formats(d, ok, 9, err);
    if (st != KVP_OK)
        return st;
    if (d->flash_attn == 0 && quantized(d->v.dtype))
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "llama.cpp: quantized V cache (%s) requires flash_attn to be enabled",
                        kvp_dtype_info(d->v.dtype)->name);
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        const struct { const char *which; enum kvp_dtype t; uint32_t dim; } kv[2] = {
            {"K", d->k.dtype, s->kind == KVP_LAYER_MLA ? s->kv_lora_rank + s->qk_rope_dim : s->head_dim_k},
            {"V", d->v.dtype, s->kind == KVP_LAYER_MLA ? s->kv_lora_rank : s->head_dim_v},
        };
        if (s->kind == KVP_LAYER_MLA && d->k.dtype != d->v.dtype)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                            "llama.cpp: model does not support different K and V cache types (MLA)");
        for (int j = 0; j < 2; j++) {
            uint32_t blk = kvp_dtype_info(kv[j].t)->block_elems;
            if (kv[j].dim && kv[j].dim % blk != 0)
                return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                                "llama.cpp: %s cache type %s with block size %u does not divide n_embd_head_%c=%u",
                                kv[j].which, kvp_dtype_info(kv[j].t)->name, blk, j ? 'v' : 'k', kv[j].dim);
        }
    }
    return KVP_OK;
}

/* Elements per cell of one layer's K and V tensors (n_embd_k_gqa, n_embd_v_gqa). */
static void layer_elems(const struct kvp_layer_spec *s, const struct kvp_deploy *d, uint64_t *k, uint64_t *v)
{
    *k = *v = 0;
    switch (s->kind) {
    case KVP_LAYER_FULL: case KVP_LAYER_SLIDING: case KVP_LAYER_CHUNKED:
        *k = (uint64_t)s->head_dim_k * s->n_kv_heads;
        *v = (uint64_t)s->head_dim_v * s->n_kv_heads;
        break;
    case KVP_LAYER_MLA: /* "deepseek2 using MLA converts into MQA with larger heads" */
        *k = (uint64_t)s->kv_lora_rank + s->qk_rope_dim;
        /* V-less cache since PR #19067 (2026-01-24); b6182 still caches V */
        *v = d->mla_v || (kvp_deploy_release(d)->rules & KVP_REL_LLAMACPP_MLA_V) ? s->kv_lora_rank : 0;
        break;
    default:
        break;
    }
}

struct lcells {
    uint64_t base, swa;  /* cells per stream of the non-SWA and SWA caches */
    uint32_t n_stream;
};

/* The cell padding of the release: 256, or in builds like b6182 256 only
 * with flash attention (off unless -fa on there) and 32 without. */
static uint64_t cell_pad(const struct kvp_deploy *d)
{
    if (kvp_deploy_release(d)->rules & KVP_REL_LLAMACPP_PAD_FA)
        return d->flash_attn == 1 ? CELL_PAD : CELL_PAD_NO_FA;
    return CELL_PAD;
}

uint64_t kvp_profile_llamacpp_ubatch(const struct kvp_deploy *d)
{
    return d->n_batch && d->n_batch < d->n_ubatch ? d->n_batch : d->n_ubatch;
}

static void cells(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t context, struct lcells *c)
{
    uint64_t pad = cell_pad(d), n_ctx = PAD(context, pad), n_swa = 0;
    uint32_t n_seq = d->n_seq ? d->n_seq : 1;

    if (n_seq > 1 && !d->kv_unified) {
        c->base = PAD(n_ctx / n_seq, pad);
        c->n_stream = n_seq;
    } else {
        c->base = n_ctx;
        c->n_stream = 1;
    }
    for (uint32_t i = 0; i < m->n_layers; i++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, i);
        if (windowed(m, s) && s->window > n_swa)
            n_swa = s->window;
    }
    c->swa = PAD(n_swa * (d->kv_unified ? n_seq : 1) + kvp_profile_llamacpp_ubatch(d), pad);
    if (c->swa > c->base || d->swa_full)
        c->swa = c->base;
}

/* Where llama.cpp puts the layers (llama_model_base::load_tensors, v0.5.0):
 * -ngl N takes the last N of the n_layers + 1 "layers", the output layer the
 * last of them (i_gpu_start = max(n_layer + 1 - N, 0)); the layers before
 * i_gpu_start and the input (token embeddings) stay on the host. The GPU's
 * repeating layers go to the devices in turn, count[dev] each: d->split, or
 * an even split; the output layer goes with the last device. */
struct lplace {
    uint32_t n_dev, gpu_start, count[KVP_MAX_STAGES];
    bool output_gpu;
};

static enum kvp_status place(const struct kvp_model *m, const struct kvp_deploy *d, struct lplace *p,
                             struct kvp_error *err)
{
    uint32_t n = 0, total = 0, ngl, rep;
    ngl = d->n_gpu_layers < 0 || (uint32_t)d->n_gpu_layers > m->n_layers ? m->n_layers + 1 : (uint32_t)d->n_gpu_layers;
    p->gpu_start = m->n_layers + 1 - ngl;
    p->output_gpu = ngl > 0;
    rep = p->gpu_start < m->n_layers ? m->n_layers - p->gpu_start : 0;
    for (; n < KVP_MAX_STAGES && d->split[n]; n++)
        total += p->count[n] = d->split[n];
    if (n) {
        if (total != rep)
            return kvp_fail(err, KVP_ERR_USAGE, "the layer split adds up to %u, but %u of the model's %u layers "
                            "are on the GPUs", total, rep, m->n_layers);
        p->n_dev = n;
        return KVP_OK;
    }
    n = d->n_gpus ? d->n_gpus : 1;
    if (n > KVP_MAX_STAGES || (n > 1 && n > rep))
        return kvp_fail(err, KVP_ERR_USAGE, "cannot split %u layers over %u devices", rep, n);
    for (uint32_t i = 0; i < n; i++)
        p->count[i] = (uint32_t)(((uint64_t)(i + 1) * rep) / n - ((uint64_t)i * rep) / n);
    p->n_dev = n;
    return KVP_OK;
}

/* The K/V tensors of layer `layer` into dk (a device, or the host) and f's cache sums. */
static enum kvp_status layer_kv(const struct kvp_model *m, const struct kvp_deploy *d, const struct lcells *c,
                                uint32_t layer, uint64_t context, struct kvp_device_kv *dk, struct kvp_fit *f,
                                struct kvp_error *err)
{
    const struct kvp_layer_spec *s = kvp_model_layer(m, layer);
    uint64_t ek, ev, rows, kb, vb;
    uint64_t (*alloc)(enum kvp_dtype, uint64_t, uint64_t) = dk == &f->host ? host_alloc_size : alloc_size;
    bool swa = windowed(m, s);
    if (s->kind == KVP_LAYER_RECURRENT) {
        uint64_t conv, ssm, n_seq = d->n_seq ? d->n_seq : 1;
        kvp_recurrent_state_elems(&s->rec, &conv, &ssm);
        /* llama_memory_recurrent: r and s tensors in f32, one row per sequence */
        if (!add(&dk->rs_bytes, alloc(KVP_DTYPE_F32, conv, n_seq)) ||
            !add(&dk->rs_bytes, alloc(KVP_DTYPE_F32, ssm, n_seq)))
            return kvp_fail(err, KVP_ERR_OVERFLOW, "the recurrent state of %llu sequences overflows 64 bits",
                            (unsigned long long)n_seq);
        return KVP_OK;
    }
    layer_elems(s, d, &ek, &ev);
    if (ek == 0)
        return KVP_OK;
    rows = kvp_sat_mul(swa ? c->swa : c->base, c->n_stream);
    dk->layers++;
    f->cache[swa].layers++;
    kb = kvp_sat_mul(row_size(d->k.dtype, ek), rows);
    vb = kvp_sat_mul(row_size(d->v.dtype, ev), rows);
    if (!add(&dk->k_bytes, kb) || !add(&f->cache[swa].k_bytes, kb) || !add(&dk->v_bytes, vb) ||
        !add(&f->cache[swa].v_bytes, vb) || !add(&dk->cache_buffer[swa], alloc(d->k.dtype, ek, rows)) ||
        (ev && !add(&dk->cache_buffer[swa], alloc(d->v.dtype, ev, rows))) ||
        !kvp_add(dk->cache_buffer[0], dk->cache_buffer[1], &dk->buffer_bytes))
        return kvp_fail(err, KVP_ERR_OVERFLOW, "a KV cache of %llu tokens overflows 64 bits",
                        (unsigned long long)context);
    return KVP_OK;
}

/* K/V tensors of the layers on each device, and on the host, at `context`:
 * a layer's KV lives on its layer's device, or on the host with
 * --no-kv-offload (llama_kv_cache: the layer's buft when offload, else the
 * CPU's). The host's KV buffer is the CPU buffer's: each tensor padded to
 * 32 B, no padded row for a quantized type (host_alloc_size). */
static enum kvp_status allocate(const struct kvp_model *m, const struct kvp_deploy *d, uint64_t context,
                                struct kvp_fit *f, struct kvp_error *err)
{
    struct lplace p;
    struct lcells c;
    enum kvp_status st;
    uint32_t layer;

    if ((st = place(m, d, &p, err)) != KVP_OK)
        return st;
    cells(m, d, context, &c);
    f->cells = c.base;
    f->cell_pad = (uint32_t)cell_pad(d);
    f->windows_ignored = false;
    for (uint32_t i = 0; i < m->n_specs; i++)
        if ((m->specs[i].kind == KVP_LAYER_SLIDING || m->specs[i].kind == KVP_LAYER_CHUNKED) &&
            !honours_windows(m->family))
            f->windows_ignored = true;
    f->swa_cells = c.swa;
    f->n_stream = c.n_stream;
    f->n_devices = p.n_dev;
    f->gpu_layers = m->n_layers + 1 - p.gpu_start;
    f->output_on_gpu = p.output_gpu;
    memset(f->cache, 0, sizeof f->cache);
    memset(&f->host, 0, sizeof f->host);
    f->host.model_layers = p.gpu_start < m->n_layers ? p.gpu_start : m->n_layers;
    for (layer = 0; layer < f->host.model_layers; layer++)
        if ((st = layer_kv(m, d, &c, layer, context, &f->host, f, err)) != KVP_OK)
            return st;
    for (uint32_t dev = 0; dev < p.n_dev; dev++) {
        struct kvp_device_kv *dk = &f->device[dev];
        memset(dk, 0, sizeof *dk);
        dk->model_layers = p.count[dev];
        for (uint32_t i = 0; i < p.count[dev]; i++, layer++)
            if ((st = layer_kv(m, d, &c, layer, context, d->no_kv_offload ? &f->host : dk, f, err)) != KVP_OK)
                return st;
    }
    return KVP_OK;
}

/* One more cell in every layer of the busiest device (0: no KV on a GPU). */
static uint64_t cell_bytes(const struct kvp_model *m, const struct kvp_deploy *d)
{
    struct lplace p;
    uint64_t best = 0;
    uint32_t layer;
    struct kvp_error ignored;
    if (d->no_kv_offload || place(m, d, &p, &ignored) != KVP_OK)
        return 0;
    layer = p.gpu_start < m->n_layers ? p.gpu_start : m->n_layers;
    for (uint32_t dev = 0; dev < p.n_dev; dev++) {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < p.count[dev]; i++, layer++) {
            uint64_t ek, ev;
            layer_elems(kvp_model_layer(m, layer), d, &ek, &ev);
            sum += row_size(d->k.dtype, ek) + row_size(d->v.dtype, ev);
        }
        best = sum > best ? sum : best;
    }
    return best;
}

/* llama.cpp --n-cpu-moe N: the expert tensors of layers [cpu_moe_first, cpu_moe_first + N) stay on
 * the host (the option: from layer 0; --fit's own overrides: from a later layer to the last). */
static bool cpu_moe(const struct kvp_model *m, const struct kvp_deploy *d, uint32_t layer)
{
    uint64_t end = d->n_cpu_moe < 0 ? m->n_layers : (uint64_t)d->cpu_moe_first + (uint32_t)d->n_cpu_moe;
    return (layer >= d->cpu_moe_first && layer < end) || (d->cpu_experts[layer / 64] >> (layer % 64) & 1);
}

/* The names llama.cpp gives a layer's tensors (llama-arch.cpp LLM_TENSOR_NAMES, ".weight"; the
 * experts first) and the model's own, for -ot's patterns to be tried on. */
static const char *const expert_names[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
static const char *const other_names[] = {
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_qkv", "attn_output", "attn_q_norm", "attn_k_norm",
    "attn_q_a", "attn_q_a_norm", "attn_q_b", "attn_kv_a_mqa", "attn_kv_a_norm", "attn_kv_b", "attn_k_b",
    "attn_v_b", "attn_sinks", "post_attention_norm", "ffn_norm", "post_ffw_norm", "ffn_gate", "ffn_up",
    "ffn_down", "ffn_gate_inp", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "ffn_gate_inp_shexp",
    "ssm_in", "ssm_conv1d", "ssm_x", "ssm_dt", "ssm_a", "ssm_d", "ssm_norm", "ssm_out",
};
static const char *const model_names[] = {"token_embd.weight", "output_norm.weight", "output.weight"};

/* One -ot pattern, std::regex's \d (a digit) written as POSIX [0-9]. */
static enum kvp_status compile(const char *pat, size_t len, regex_t *re, struct kvp_error *err)
{
    char buf[256];
    size_t o = 0;
    int rc;
    for (size_t i = 0; i < len && o + 6 < sizeof buf; i++) {
        if (pat[i] == '\\' && i + 1 < len && pat[i + 1] == 'd') {
            memcpy(buf + o, "[0-9]", 5);
            o += 5;
            i++;
        } else {
            buf[o++] = pat[i];
        }
    }
    buf[o] = '\0';
    if ((rc = regcomp(re, buf, REG_EXTENDED | REG_NOSUB)) != 0) {
        char why[96];
        regerror(rc, re, why, sizeof why);
        return kvp_fail(err, KVP_ERR_USAGE, "pattern '%.*s': %s", (int)len, pat, why);
    }
    return KVP_OK;
}

static bool matches(const regex_t *re, const char *name)
{
    return regexec(re, name, 0, NULL, 0) == 0;
}

/* Which of layer il's expert tensors one pattern matches (a bit each); a match on any other
 * tensor of the layer is refused. */
static enum kvp_status layer_matches(const struct kvp_model *m, const regex_t *re, const char *pat, uint32_t il,
                                     unsigned *bits, struct kvp_error *err)
{
    char name[64];
    bool moe = kvp_model_layer(m, il)->mlp == KVP_MLP_MOE;
    for (size_t k = 0; k < sizeof other_names / sizeof other_names[0]; k++) {
        snprintf(name, sizeof name, "blk.%u.%s.weight", il, other_names[k]);
        if (matches(re, name))
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "'%s' matches %s, and kvplan moves only expert "
                            "tensors by name (ffn_{gate,up,down}_exps)", pat, name);
    }
    for (unsigned k = 0; moe && k < 3; k++) {
        snprintf(name, sizeof name, "blk.%u.%s.weight", il, expert_names[k]);
        *bits |= matches(re, name) ? 1u << k : 0;
    }
    return KVP_OK;
}

enum kvp_status kvp_llamacpp_overrides(const struct kvp_model *m, const char *spec, struct kvp_deploy *d,
                                       struct kvp_error *err)
{
    unsigned bits[KVP_MAX_LAYERS] = {0};
    enum kvp_status st = KVP_OK;

    memset(d->cpu_experts, 0, sizeof d->cpu_experts);
    for (const char *p = spec; *p && st == KVP_OK;) {
        size_t len = strcspn(p, ","), plen;
        const char *eq = memchr(p, '=', len);
        char item[160];
        regex_t re;
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        if (!eq || eq == p)
            return kvp_fail(err, KVP_ERR_USAGE, "'%s': want PATTERN=BUFFER, e.g. exps=CPU", item);
        plen = (size_t)(eq - p);
        if (len - plen - 1 != 3 || strncmp(eq + 1, "CPU", 3) != 0)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "'%s': only =CPU (host memory) is modelled", item);
        if ((st = compile(p, plen, &re, err)) != KVP_OK)
            return st;
        for (size_t k = 0; k < sizeof model_names / sizeof model_names[0] && st == KVP_OK; k++)
            if (matches(&re, model_names[k]))
                st = kvp_fail(err, KVP_ERR_UNSUPPORTED, "'%s' matches %s, and kvplan moves only expert "
                              "tensors by name (ffn_{gate,up,down}_exps)", item, model_names[k]);
        for (uint32_t il = 0; m && il < m->n_layers && st == KVP_OK; il++)
            st = layer_matches(m, &re, item, il, &bits[il], err);
        regfree(&re);
        p += len + (p[len] == ',');
    }
    for (uint32_t il = 0; m && il < m->n_layers && st == KVP_OK; il++) {
        if (bits[il] && bits[il] != 7u)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "'%s' moves only some of layer %u's expert tensors, and "
                            "kvplan places a layer's experts whole", spec, il);
        if (bits[il])
            d->cpu_experts[il / 64] |= 1ull << (il % 64);
    }
    return st;
}

/* Each device's model buffers and the host's, from the GGUF's tensor table
 * (m->wtable.place, padded as each buffer pads them): the input on the host;
 * a layer on its device, its expert tensors on the host when --n-cpu-moe
 * takes its layer (common/arg.cpp: the override blk.I.ffn_(up|down|gate|
 * gate_up)_(ch|)exps = CPU for I < N); the output layer on the last GPU
 * (with a copy of token_embd when the output is tied: llama-model.cpp
 * creates it TENSOR_DUPLICATED in the output's buffer; on the host it is the
 * same tensor), else on the host. */
static void place_table(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f)
{
    const struct kvp_wplace *pl = m->wtable.place;
    uint32_t layer = 0;
    struct kvp_device_kv *last = &f->device[f->n_devices - 1];

    f->host.weights_bytes = pl[KVP_WPLACE_INPUT].host;
    for (; layer < f->host.model_layers; layer++) {
        f->host.weights_bytes = kvp_sat_add(f->host.weights_bytes, pl[KVP_WPLACE_LAYER + layer].host);
        f->host.expert_bytes = kvp_sat_add(f->host.expert_bytes, pl[KVP_WPLACE_LAYER + layer].exp_host);
    }
    for (uint32_t dev = 0; dev < f->n_devices; dev++) {
        struct kvp_device_kv *dk = &f->device[dev];
        for (uint32_t i = 0; i < dk->model_layers; i++, layer++) {
            const struct kvp_wplace *p = &pl[KVP_WPLACE_LAYER + layer];
            bool cpu = cpu_moe(m, d, layer);
            dk->weights_bytes = kvp_sat_add(dk->weights_bytes, cpu ? p->gpu - p->exp_gpu : p->gpu);
            dk->expert_bytes = kvp_sat_add(dk->expert_bytes, cpu ? 0 : p->exp_gpu);
            if (cpu) {
                f->host.weights_bytes = kvp_sat_add(f->host.weights_bytes, p->exp_host);
                f->host.expert_bytes = kvp_sat_add(f->host.expert_bytes, p->exp_host);
            }
        }
    }
    if (f->output_on_gpu)
        last->weights_bytes = kvp_sat_add(last->weights_bytes, kvp_sat_add(pl[KVP_WPLACE_OUTPUT].gpu,
                                          m->wtable.has_output ? 0 : pl[KVP_WPLACE_EMBD].gpu));
    else
        f->host.weights_bytes = kvp_sat_add(f->host.weights_bytes, pl[KVP_WPLACE_OUTPUT].host);
}

/* Without a GGUF table (or with weights priced in another file type): the
 * weights w in proportion to the layers, the routed experts' share of a
 * --n-cpu-moe layer moved to the host. An estimate: the embeddings and
 * output count as layers, and no buffer padding is added. */
static uint64_t place_estimate(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_weights *w,
                               struct kvp_fit *f)
{
    uint32_t layer = f->host.model_layers, n_moe = 0;
    uint64_t on_gpus = 0, expert = 0, idle = w->bytes - w->active_bytes - w->tower_bytes;

    for (uint32_t i = 0; i < m->n_layers; i++)
        n_moe += kvp_model_layer(m, i)->mlp == KVP_MLP_MOE;
    if (n_moe && m->n_experts > m->n_experts_active) /* idle = one layer's expert x idle experts x MoE layers */
        expert = (uint64_t)((long double)idle * m->n_experts / (m->n_experts - m->n_experts_active) / n_moe);
    for (uint32_t i = 0; i < f->host.model_layers; i++)
        if (kvp_model_layer(m, i)->mlp == KVP_MLP_MOE)
            f->host.expert_bytes = kvp_sat_add(f->host.expert_bytes, expert);
    for (uint32_t dev = 0; dev < f->n_devices; dev++) {
        struct kvp_device_kv *dk = &f->device[dev];
        dk->weights_bytes = (uint64_t)((long double)w->bytes * dk->model_layers / m->n_layers + 0.5L);
        for (uint32_t i = 0; i < dk->model_layers; i++, layer++) {
            if (kvp_model_layer(m, layer)->mlp != KVP_MLP_MOE)
                continue;
            if (!cpu_moe(m, d, layer)) {
                dk->expert_bytes = kvp_sat_add(dk->expert_bytes, expert);
                continue;
            }
            dk->weights_bytes -= expert <= dk->weights_bytes ? expert : dk->weights_bytes;
            f->host.expert_bytes = kvp_sat_add(f->host.expert_bytes, expert);
        }
        on_gpus = kvp_sat_add(on_gpus, dk->weights_bytes);
    }
    f->host.weights_bytes = w->bytes - (on_gpus <= w->bytes ? on_gpus : w->bytes);
    return expert;
}

/* What the GPU's compute buffer holds beyond a full offload's (an estimate,
 * read off tests/oracle section 8): an op whose weight lives in host memory
 * but runs on the GPU (ggml-cuda's offload_op: a batch of 32 tokens or more)
 * gets a copy of the weight in the GPU's compute buffer. The largest such
 * copies live at once: the output matrix when the output layer is on the host
 * (-ngl 0), or one of a layer's three expert tensors when a layer's experts
 * are; the host's dense layers add little. */
static uint64_t offload_copies(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                               uint64_t expert_layer)
{
    const struct kvp_wplace *pl = m->wtable.place;
    uint64_t copy = 0, exp = 0;
    if (!f->output_on_gpu)
        copy = !f->weights_exact ? kvp_sat_mul((uint64_t)m->vocab * m->hidden, kvp_dtype_info(m->dtype)->block_bits / 8)
               : m->wtable.has_output ? pl[KVP_WPLACE_OUTPUT].gpu : pl[KVP_WPLACE_EMBD].gpu;
    for (uint32_t i = 0; i < m->n_layers; i++) {
        if (i >= f->host.model_layers && !cpu_moe(m, d, i))
            continue;
        uint64_t e = f->weights_exact ? pl[KVP_WPLACE_LAYER + i].exp_gpu
                     : kvp_model_layer(m, i)->mlp == KVP_MLP_MOE ? expert_layer : 0;
        exp = e > exp ? e : exp;
    }
    return exp / 3 > copy ? exp / 3 : copy;
}

/* The host's compute buffer, an estimate read off tests/oracle section 8
 * (within 0.1% in f16 on its shapes, up to 3.5% under with q8_0 KV): the
 * graph's inputs the CPU backend keeps when the layers run on a GPU, two
 * n_ubatch x hidden f32 tensors (the embeddings' get_rows and its input),
 * the KQ mask of each cache (n_ubatch x cells, f16 with flash attention, f32
 * without) and 14,336 B of token, position and output-id inputs. */
static uint64_t host_compute(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f)
{
    uint64_t ub = kvp_profile_llamacpp_ubatch(d), per = d->flash_attn == 0 ? 4 : 2;
    uint64_t n = kvp_sat_mul(kvp_sat_mul(2 * ub, m->hidden), 4);
    n = kvp_sat_add(n, kvp_sat_mul(kvp_sat_mul(ub, f->cells), per));
    if (f->cache[1].layers)
        n = kvp_sat_add(n, kvp_sat_mul(kvp_sat_mul(ub, f->swa_cells), per));
    return kvp_sat_add(n, 14336);
}

struct lctx {
    const struct kvp_model *m;
    const struct kvp_deploy *d;
};

/* The busiest device's KV buffer at a context (for the max-context search). */
static enum kvp_status buffer_cost(void *ctx, uint64_t context, uint64_t *bytes, struct kvp_error *err)
{
    const struct lctx *c = ctx;
    struct kvp_fit f;
    enum kvp_status st;
    memset(&f, 0, sizeof f);
    if ((st = allocate(c->m, c->d, context, &f, err)) != KVP_OK)
        return st;
    *bytes = 0;
    for (uint32_t i = 0; i < f.n_devices; i++)
        if (f.device[i].buffer_bytes + f.device[i].rs_bytes > *bytes)
            *bytes = f.device[i].buffer_bytes + f.device[i].rs_bytes;
    return KVP_OK;
}

enum kvp_status kvp_profile_llamacpp(const struct kvp_model *m, const struct kvp_deploy *d, struct kvp_fit *f,
                                 struct kvp_error *err)
{
    struct lctx c = {m, d};
    uint64_t per_device_weights, reserve, busiest = 0, deficit = 0, expert_layer = 0, copies = 0;
    enum kvp_status st;

    if (d->n_seq > MAX_SEQ)
        return kvp_fail(err, KVP_ERR_USAGE, "llama.cpp: n_seq_max must be <= %u (got %u)", MAX_SEQ, d->n_seq);
    if ((st = check_types(m, d, err)) || (st = allocate(m, d, d->context, f, err)))
        return st;
    if (!known_arch(m))
        snprintf(f->refused, sizeof f->refused, "llama_model_load: error loading model: error loading model "
                 "architecture: unknown model architecture: '%s'", m->family);
    f->n_seq = d->n_seq ? d->n_seq : 1;
    f->block_size = 1;
    f->util = 1.0;
    for (uint32_t i = 0; i < f->n_devices; i++) {
        const struct kvp_device_kv *dk = &f->device[i];
        if (dk->buffer_bytes + dk->rs_bytes > busiest)
            busiest = dk->buffer_bytes + dk->rs_bytes;
    }
    f->kv_bytes_per_token_per_gpu = cell_bytes(m, d);
    f->kv_bytes_required = busiest;
    f->request_bytes = kvp_cdiv(busiest, f->n_stream);
    f->kv_tokens = f->cells * f->n_stream;
    f->num_blocks = f->kv_tokens;
    /* the weights on each device and the host; the busiest device's bound the KV budget */
    f->weights_exact = !d->weights_memory && m->wtable.placed && d->w.kind == KVP_WSTORE_CHECKPOINT;
    if (f->weights_exact) {
        place_table(m, d, f);
    } else if (!d->weights_memory) {
        struct kvp_weights w;
        if ((st = kvp_weights_compute(m, &d->w, &w, err)) != KVP_OK)
            return st;
        expert_layer = place_estimate(m, d, &w, f);
    }
    if (f->reserve.activation_est) { /* the estimate grows by the host weights copied in; given figures stand */
        copies = offload_copies(m, d, f, expert_layer);
        f->reserve.activation = kvp_sat_add(f->reserve.activation, copies);
    }
    f->host_compute = host_compute(m, d, f);
    per_device_weights = d->weights_memory;
    for (uint32_t i = 0; i < f->n_devices && !d->weights_memory; i++)
        if (f->device[i].weights_bytes > per_device_weights)
            per_device_weights = f->device[i].weights_bytes;
    f->weights_bytes = per_device_weights;
    reserve = kvp_sat_add(kvp_sat_add(per_device_weights, kvp_profile_reserve(d)), copies);
    if (d->gpu_memory) {
        f->kv_budget_bytes = kvp_profile_sub(d->gpu_memory, reserve, &deficit);
        /* the memory's bound, not the model's: llama.cpp takes any -c up to its uint32_t n_ctx
         * (llama-context.cpp warns "n_ctx_seq > n_ctx_train -- possible training context
         * overflow" past the trained length, and the model then needs RoPE scaling) */
        if ((st = kvp_profile_max_context(buffer_cost, &c, 1, f->kv_budget_bytes, UINT32_MAX, &f->max_context, err)))
            return st;
    } else {
        f->kv_budget_bytes = busiest;
        f->max_context = d->context;
    }
    f->kv_pool_bytes = busiest;
    if (d->concurrency > 1 && f->n_seq == d->concurrency)
        f->max_context /= f->n_seq; /* --concurrency N: N slots share -c */
    f->max_concurrency = busiest <= f->kv_budget_bytes ? (double)f->n_seq : 0.0;
    return kvp_profile_finish(f, busiest <= f->kv_budget_bytes, deficit, err);
}
