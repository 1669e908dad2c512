/* explain.c -- derivations with the values substituted. */
#include "kvplan/explain.h"

#include <stdio.h>
#include <string.h>

#include "kvplan/num.h"


struct fmtctx {
    char g[8][32];
    int gi;
    bool si;
};

static const char *grp(struct fmtctx *c, uint64_t v)
{
    return kvp_count_text(v, c->g[c->gi++ % 8], sizeof c->g[0]);
}

static const char *human(struct fmtctx *c, uint64_t v)
{
    return kvp_bytes_text(v, c->si, c->g[c->gi++ % 8], sizeof c->g[0]);
}

/* A plain format: bytes are exactly tokens x rows (no residual, no channel groups). */
static bool plain(const struct kvp_format *f)
{
    return !kvp_dtype_info(f->dtype)->grouped ||
           (f->axis == KVP_AXIS_TOKEN && f->residual == 0 && f->outliers_ppm == 0);
}

/* One head's bytes a token in f; token = what a token adds once quantized
 * (kvp_spec_bytes.k_token per head), which for axis=channel also carries
 * its share of the group's scales. */
static void row_line(struct fmtctx *c, struct kvp_buf *b, const char *which, const struct kvp_format *f,
                     uint64_t d, uint64_t token)
{
    char name[64];
    uint64_t row = 0;
    struct kvp_error err;
    kvp_format_row_bytes(f, d, &row, &err);
    kvp_buf_printf(b, "      row_%s = %s values of %s = ", which, grp(c, d), kvp_format_name(f, name, sizeof name));
    if (kvp_dtype_info(f->dtype)->grouped && f->axis == KVP_AXIS_CHANNEL && token > row)
        kvp_buf_printf(b, "%s B codes + %s B (its share of each %u-token group's scales) = ", grp(c, row),
                       grp(c, token - row), f->group);
    kvp_buf_printf(b, "%s B (%.4g bits/value)\n", grp(c, token), kvp_format_bits_per_value(f, d));
}

/* The regions of one sequence's K (or V) store: kvp_cache_tokens of the
 * context under the query (held tokens in blocks when paged). */
static void format_rule(struct fmtctx *c, struct kvp_buf *b, const char *which, const struct kvp_format *f,
                        const struct kvp_kv_query *q, uint64_t window, uint64_t held)
{
    uint64_t quant, resid, T = q->block ? held : q->context, w = q->block ? 0 : window;
    const char *sc = kvp_dtype_info(f->scale)->name;
    if (plain(f))
        return;
    kvp_cache_tokens(f, T, w, q->preallocated, &quant, &resid);
    if (f->axis == KVP_AXIS_CHANNEL) {
        uint64_t r = f->residual ? f->residual : f->group;
        kvp_buf_printf(b, "      %s: groups of %u tokens per channel, formed when the residual fills (R' = %s)\n",
                       which, f->group, grp(c, r));
        if (q->preallocated)
            kvp_buf_printf(b, "      %s: preallocated for every t <= T: quantized region %s tokens, residual region "
                           "min(T, R'-1) = %s tokens in %s\n", which, grp(c, quant), grp(c, resid), sc);
        else if (w && T > w)
            kvp_buf_printf(b, "      %s: residual = T mod R' = %s tokens in %s; quantized = the groups with a token in "
                           "the window = %u * ((T - %s)/%u - floor((T - W)/%u)) = %s tokens\n", which, grp(c, resid),
                           sc, f->group, grp(c, resid), f->group, f->group, grp(c, quant));
        else
            kvp_buf_printf(b, "      %s: residual = T mod R' = %s tokens in %s, quantized = %s tokens\n", which,
                           grp(c, resid), sc, grp(c, quant));
    } else {
        kvp_buf_printf(b, "      %s: residual = min(tokens held, %u) = %s tokens in %s, quantized = %s tokens\n", which,
                       f->residual, grp(c, resid), sc, grp(c, quant));
    }
    if (f->outliers_ppm)
        kvp_buf_printf(b, "      %s: outliers %.4g%% of values, 8 B each (fp32 value + int32 index)\n", which,
                       f->outliers_ppm / 1e4);
}

static void held_line(struct fmtctx *c, struct kvp_buf *b, const struct kvp_layer_spec *s,
                      const struct kvp_kv_query *q, uint64_t tokens)
{
    if (s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED)
        kvp_buf_printf(b, "      tokens attended = min(T, %s) = min(%s, %s) = %s\n",
                       s->kind == KVP_LAYER_SLIDING ? "W" : "C", grp(c, q->context), grp(c, s->window),
                       grp(c, tokens));
}

static void attention_spec(struct fmtctx *c, struct kvp_buf *b, const struct kvp_layer_spec *s,
                           const struct kvp_spec_bytes *sb, const struct kvp_kv_query *q)
{
    kvp_buf_printf(b, "  %u x %s attention, H_kv = %u, d_k = %u, d_v = %u\n", sb->layers,
                   kvp_layer_kind_name(s->kind), s->n_kv_heads, s->head_dim_k, s->head_dim_v);
    if (s->window)
        kvp_buf_printf(b, "      %s = %s tokens\n", s->kind == KVP_LAYER_SLIDING ? "window W" : "chunk C",
                       grp(c, s->window));
    row_line(c, b, "k", &q->k, s->head_dim_k, sb->k_token / s->n_kv_heads);
    row_line(c, b, "v", &q->v, s->head_dim_v, sb->v_token / s->n_kv_heads);
    kvp_buf_printf(b, "      per token    = L * H_kv * (row_k + row_v) = %u * %u * (%s + %s) = %s B\n",
                   sb->layers, s->n_kv_heads, grp(c, sb->k_token / s->n_kv_heads),
                   grp(c, sb->v_token / s->n_kv_heads), grp(c, (sb->k_token + sb->v_token) * sb->layers));
    held_line(c, b, s, q, sb->tokens);
    format_rule(c, b, "K", &q->k, q, s->window, sb->tokens);
    format_rule(c, b, "V", &q->v, q, s->window, sb->tokens);
    if (plain(&q->k) && plain(&q->v))
        kvp_buf_printf(b,
                       "      per sequence = L * H_kv * tokens * (row_k + row_v) = %u * %u * %s * (%s + %s) = %s B\n",
                       sb->layers, s->n_kv_heads, grp(c, sb->tokens), grp(c, sb->k_token / s->n_kv_heads),
                       grp(c, sb->v_token / s->n_kv_heads), grp(c, (sb->k_seq + sb->v_seq) * sb->layers));
    else
        kvp_buf_printf(b, "      per sequence = L * (K %s B + V %s B) = %s B\n", grp(c, sb->k_seq), grp(c, sb->v_seq),
                       grp(c, (sb->k_seq + sb->v_seq) * sb->layers));
}

static void mla_spec(struct fmtctx *c, struct kvp_buf *b, const struct kvp_layer_spec *s,
                     const struct kvp_spec_bytes *sb, const struct kvp_kv_query *q)
{
    uint64_t latent = (uint64_t)s->kv_lora_rank + s->qk_rope_dim;
    kvp_buf_printf(b, "  %u x MLA, one latent per token: kv_lora_rank + qk_rope_dim = %u + %u = %s values, no V\n",
                   sb->layers, s->kv_lora_rank, s->qk_rope_dim, grp(c, latent));
    row_line(c, b, "latent", &q->k, latent, sb->k_token);
    kvp_buf_printf(b, "      per token    = L * row_latent = %u * %s = %s B\n", sb->layers, grp(c, sb->k_token),
                   grp(c, sb->k_token * sb->layers));
    format_rule(c, b, "latent", &q->k, q, 0, sb->tokens);
    kvp_buf_printf(b, "      per sequence = L * %s B = %s B\n", grp(c, sb->k_seq), grp(c, sb->k_seq * sb->layers));
}

static void recurrent_spec(struct fmtctx *c, struct kvp_buf *b, const struct kvp_model *m,
                           const struct kvp_layer_spec *s, const struct kvp_spec_bytes *sb)
{
    uint64_t conv, ssm;
    kvp_recurrent_state_elems(&s->rec, &conv, &ssm);
    kvp_buf_printf(b, "  %u x recurrent (%s): fixed state per sequence, independent of T\n", sb->layers,
                   kvp_recurrent_kind_name(s->rec.kind));
    kvp_buf_printf(b, "      state = (conv %s + ssm %s values) * %u B (%s) = %s B per layer\n", grp(c, conv),
                   grp(c, ssm), kvp_dtype_info(m->state_dtype)->block_bits / 8,
                   kvp_dtype_info(m->state_dtype)->name, grp(c, sb->state_seq));
    kvp_buf_printf(b, "      per sequence = L * state = %u * %s = %s B\n", sb->layers, grp(c, sb->state_seq),
                   grp(c, sb->state_seq * sb->layers));
}

/* Two specs that differ only in what does not touch the cache (the MLP)
 * are explained as one group. */
static bool same_cache(const struct kvp_layer_spec *a, const struct kvp_layer_spec *b)
{
    struct kvp_layer_spec x = *a, y = *b;
    x.mlp = y.mlp = KVP_MLP_DENSE;
    return memcmp(&x, &y, sizeof x) == 0;
}

void kvp_explain_kv(const struct kvp_model *m, const struct kvp_kv_query *q, const struct kvp_kv_plan *p,
                    bool si, struct kvp_buf *b)
{
    struct fmtctx c = {.si = si};
    uint32_t idle = 0;
    bool merged[KVP_MAX_SPECS] = {false};

    kvp_buf_printf(b, "KV cache of %s (ideal profile: the bare formula)\n", m->name);
    kvp_buf_printf(b, "  T = %s tokens per sequence, B = %s sequence%s\n", grp(&c, q->context), grp(&c, q->batch),
                   q->batch == 1 ? "" : "s");
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        struct kvp_spec_bytes group = p->spec[i];
        const struct kvp_spec_bytes *sb = &group;
        if (merged[i])
            continue;
        for (uint32_t j = i + 1; j < m->n_specs; j++)
            if (same_cache(s, &m->specs[j])) {
                merged[j] = true;
                group.layers += p->spec[j].layers;
            }
        switch (s->kind) {
        case KVP_LAYER_FULL: case KVP_LAYER_SLIDING: case KVP_LAYER_CHUNKED:
            attention_spec(&c, b, s, sb, q);
            break;
        case KVP_LAYER_MLA:
            mla_spec(&c, b, s, sb, q);
            break;
        case KVP_LAYER_RECURRENT:
            recurrent_spec(&c, b, m, s, sb);
            break;
        default:
            idle += sb->layers;
        }
    }
    if (idle)
        kvp_buf_printf(b, "  %u layers hold no cache of their own (shared-KV or no attention)\n", idle);
    kvp_buf_printf(b, "  kv_bytes_per_token = %s B (%s)\n", grp(&c, p->kv_bytes_per_token),
                   human(&c, p->kv_bytes_per_token));
    kvp_buf_printf(b, "  kv_bytes    = sum of per sequence * B = %s B * %s = %s B (%s)\n",
                   grp(&c, q->batch ? p->kv_bytes / q->batch : 0), grp(&c, q->batch), grp(&c, p->kv_bytes),
                   human(&c, p->kv_bytes));
    if (p->state_bytes)
        kvp_buf_printf(b, "  state_bytes = %s B (%s)\n", grp(&c, p->state_bytes), human(&c, p->state_bytes));
}

/* "experts", "attention + mlp", or "the rest" for the part in the model dtype when others exist. */
static const char *part_classes(const struct kvp_weights *w, const struct kvp_wpart *p, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    if (w->n_parts > 1 && (p->classes >> KVP_WC_VECTOR) & 1)
        return "the rest";
    for (int c = 0; c < KVP_WC_COUNT; c++)
        if (c != KVP_WC_VECTOR && (p->classes >> c) & 1 && o < n)
            o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? " + " : "", kvp_wclass_name((enum kvp_wclass)c));
    return buf;
}

const char *kvp_weights_split(const struct kvp_weights *w, bool si, char *buf, uint32_t n)
{
    struct fmtctx c = {.si = si};
    char cls[128];
    size_t o = 0;

    buf[0] = '\0';
    if (w->n_parts <= 1) {
        snprintf(buf, n, "%s%s%s%s", w->n_parts ? w->parts[0].name : "none", w->source[0] ? " [" : "", w->source,
                 w->source[0] ? "]" : "");
        return buf;
    }
    for (uint32_t i = 0; i < w->n_parts && o < n; i++) {
        const char *what = part_classes(w, &w->parts[i], cls, sizeof cls);
        o += (size_t)snprintf(buf + o, n - o, "%s%s%s%s%s %s", i ? " + " : "", w->parts[i].name, what[0] ? " (" : "",
                              what, what[0] ? ")" : "", human(&c, w->parts[i].bytes));
    }
    if (w->source[0] && o < n)
        snprintf(buf + o, n - o, " [%s]", w->source);
    return buf;
}

/* Where the tower's count came from: the headers' tensors, else vision_config's formula. */
static const char *tower_source(const struct kvp_model *m, const struct kvp_weights *w)
{
    return !w->tower_params ? "" : m->wtable.tower_params ? "safetensors headers" : m->tower;
}

void kvp_json_weights(struct kvp_json *j, const struct kvp_model *m, const struct kvp_weights *w)
{
    kvp_json_begin(j, "weights", '{');
    kvp_json_str(j, "source", w->source[0] ? w->source : "computed");
    if (m->wtable.mixture[0])
        kvp_json_str(j, "file_type", m->wtable.mixture);
    kvp_json_u64(j, "bytes", w->bytes);
    kvp_json_u64(j, "active_bytes", w->active_bytes);
    /* the checkpoint by model: the text model, a multimodal tower, MTP layers left out */
    kvp_json_begin(j, "split", '{');
    kvp_json_begin(j, "text", '{');
    kvp_json_u64(j, "params", w->params - w->tower_params);
    kvp_json_u64(j, "bytes", w->bytes - w->tower_bytes);
    kvp_json_end(j, '}');
    kvp_json_begin(j, "tower", '{');
    kvp_json_u64(j, "params", w->tower_params);
    kvp_json_u64(j, "bytes", w->tower_bytes);
    kvp_json_str(j, "source", tower_source(m, w));
    kvp_json_end(j, '}');
    kvp_json_begin(j, "mtp", '{');
    kvp_json_u64(j, "tensors", m->wtable.mtp_tensors);
    kvp_json_u64(j, "bytes", m->wtable.mtp_bytes);
    kvp_json_bool(j, "loaded", false);
    kvp_json_end(j, '}');
    kvp_json_end(j, '}');
    kvp_json_begin(j, "parts", '[');
    for (uint32_t i = 0; i < w->n_parts; i++) {
        kvp_json_begin(j, NULL, '{');
        kvp_json_str(j, "dtype", w->parts[i].name);
        kvp_json_begin(j, "classes", '[');
        for (int c = 0; c < KVP_WC_COUNT; c++)
            if ((w->parts[i].classes >> c) & 1)
                kvp_json_str(j, NULL, kvp_wclass_name((enum kvp_wclass)c));
        kvp_json_end(j, ']');
        kvp_json_u64(j, "params", w->parts[i].params);
        kvp_json_u64(j, "bytes", w->parts[i].bytes);
        kvp_json_end(j, '}');
    }
    kvp_json_end(j, ']');
    kvp_json_end(j, '}');
}

void kvp_json_model_warnings(struct kvp_json *j, const struct kvp_model *m)
{
    kvp_json_begin(j, "warnings", '[');
    for (uint32_t i = 0; i < m->n_warnings; i++)
        kvp_json_str(j, NULL, m->warnings[i]);
    kvp_json_end(j, ']');
}

void kvp_explain_weights(const struct kvp_model *m, const struct kvp_weights *w, bool si, struct kvp_buf *b)
{
    struct fmtctx c = {.si = si};
    char cls[128];

    kvp_buf_printf(b, "Weights of %s (formulas in docs/model-format.md)\n", m->name);
    /* a model by Hub reference (catalog.c load_hub's source: "ORG/NAME@REV ... (where)") says how it was found */
    if (m->hf_id[0] && strncmp(m->source, m->hf_id, strlen(m->hf_id)) == 0 && m->source[strlen(m->hf_id)] == '@')
        kvp_buf_printf(b, "  read from %s: not a path or a built-in name, so a Hub reference, looked up in the "
                          "Hugging Face cache, kvplan's cache, then the Hub (docs/hub.md)\n", m->source);
    kvp_buf_printf(b, "  embeddings = vocab * hidden%s%s = %s\n", m->tied_embeddings ? "" : " * 2 (untied LM head)",
                   m->learned_positions ? " + positions * hidden" : "", grp(&c, w->embedding_params));
    kvp_buf_printf(b, "  mixers     = %s (attention / MLA / recurrent projections)\n", grp(&c, w->attention_params));
    kvp_buf_printf(b, "  MLPs       = %s%s\n", grp(&c, w->mlp_params), m->n_experts ? " (routers, experts)" : "");
    kvp_buf_printf(b, "  norms      = %s\n", grp(&c, w->norm_params));
    if (w->tower_params)
        kvp_buf_printf(b, "  tower      = %s (vision tower and projector: %s)\n", grp(&c, w->tower_params),
                       tower_source(m, w));
    kvp_buf_printf(b, "  params     = %s", grp(&c, w->params));
    if (w->active_params + w->tower_params != w->params)
        kvp_buf_printf(b, ", active per token = %s (%u of %u experts)", grp(&c, w->active_params),
                       m->n_experts_active, m->n_experts);
    kvp_buf_printf(b, "\n  stored as %s:\n", w->source[0] ? w->source : "computed tensor by tensor");
    for (uint32_t i = 0; i < w->n_parts; i++) {
        const char *what = part_classes(w, &w->parts[i], cls, sizeof cls);
        kvp_buf_printf(b, "    %-24s %s params -> %s B%s%s%s\n", w->parts[i].name, grp(&c, w->parts[i].params),
                       grp(&c, w->parts[i].bytes), what[0] ? " (" : "", what, what[0] ? ")" : "");
    }
    if (m->wtable.mixture[0])
        kvp_buf_printf(b, "    file type %s\n", m->wtable.mixture);
    kvp_buf_printf(b, "  weight_bytes = %s B (%s)\n", grp(&c, w->bytes), human(&c, w->bytes));
}

/* ---- engine logs and derivations ---- */

#define MIB 1048576.0
#define GIB 1073741824.0

static void llamacpp_log(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                         struct kvp_buf *b)
{
    static const char *const names[2] = {"non-SWA", "    SWA"};
    bool iswa = f->cache[1].layers > 0;
    uint32_t n_seq = f->n_seq ? f->n_seq : 1;
    /* b4862 (KVP_REL_LLAMACPP_KQV_GRAPH) prints from llama_kv_cache_init and
     * llama_init_from_model (llama_new_context_with_model before build 4528) */
    bool old = kvp_deploy_release(d)->rules & KVP_REL_LLAMACPP_KQV_GRAPH;
    bool unified = kvp_deploy_release(d)->rules & KVP_REL_LLAMACPP_PAD_FA;
    const char *fn = old ? "llama_kv_cache_init" : unified ? "llama_kv_cache_unified" : "llama_kv_cache";
    const char *ctx = old ? "llama_init_from_model" : "llama_context";
    (void)m;
    /* load_tensors prints a line per model buffer, by buffer type name: the host's tensors are mapped from
     * the file (CPU_Mapped; with --no-mmap a CPU buffer of exactly this size, the mapping can span more) */
    if (f->host.weights_bytes)
        kvp_buf_printf(b, "load_tensors: %12s model buffer size = %8.2f MiB%s\n", "CPU_Mapped",
                       f->host.weights_bytes / MIB, f->weights_exact ? "" : " (estimated)");
    for (uint32_t i = 0; i < f->n_devices; i++) {
        char dev[16];
        snprintf(dev, sizeof dev, "CUDA%u", i);
        if (f->device[i].weights_bytes && (f->host.weights_bytes || f->weights_exact))
            kvp_buf_printf(b, "load_tensors: %12s model buffer size = %8.2f MiB%s\n", dev,
                           f->device[i].weights_bytes / MIB, f->weights_exact ? "" : " (estimated)");
    }
    for (int c = 0; c < 2; c++) {
        uint64_t cells = c ? f->swa_cells : f->cells;
        if (f->cache[c].layers == 0)
            continue;
        if (iswa)
            kvp_buf_printf(b, "%s_iswa: creating %s KV cache, size = %llu cells\n", fn, names[c],
                           (unsigned long long)cells);
        if (f->host.cache_buffer[c]) /* buffers print in buffer type order: CPU before CUDA0 */
            kvp_buf_printf(b, "%s: %10s KV buffer size = %8.2f MiB\n", fn, "CPU", f->host.cache_buffer[c] / MIB);
        for (uint32_t i = 0; i < f->n_devices; i++) {
            char dev[16];
            snprintf(dev, sizeof dev, "CUDA%u", i);
            if (f->device[i].cache_buffer[c])
                kvp_buf_printf(b, "%s: %10s KV buffer size = %8.2f MiB\n", fn, dev,
                               f->device[i].cache_buffer[c] / MIB);
        }
        if (old)
            kvp_buf_printf(b, "%s: KV self size  = %7.2f MiB, K (%s): %7.2f MiB, V (%s): %7.2f MiB\n", ctx,
                           (f->cache[c].k_bytes + f->cache[c].v_bytes) / MIB, kvp_dtype_info(d->k.dtype)->name,
                           f->cache[c].k_bytes / MIB, kvp_dtype_info(d->v.dtype)->name, f->cache[c].v_bytes / MIB);
        else
            kvp_buf_printf(b, "%s: size = %7.2f MiB (%6llu cells, %3u layers, %2u/%u seqs), "
                           "K (%s): %7.2f MiB, V (%s): %7.2f MiB\n", fn,
                           (f->cache[c].k_bytes + f->cache[c].v_bytes) / MIB, (unsigned long long)cells,
                           f->cache[c].layers, n_seq, f->n_stream, kvp_dtype_info(d->k.dtype)->name,
                           f->cache[c].k_bytes / MIB, kvp_dtype_info(d->v.dtype)->name, f->cache[c].v_bytes / MIB);
    }
    /* the estimate puts every layer and the output on one device */
    if (f->n_devices == 1 && f->reserve.activation)
        kvp_buf_printf(b, "%s: %10s compute buffer size = %8.2f MiB%s\n", ctx, "CUDA0", f->reserve.activation / MIB,
                       f->reserve.activation_est ? " (estimated)" : "");
    /* then the graph's inputs in pinned host memory (CUDA_Host), always estimated */
    if (f->host_compute)
        kvp_buf_printf(b, "%s: %10s compute buffer size = %8.2f MiB (estimated)\n", ctx, "CUDA_Host",
                       f->host_compute / MIB);
}

/* mem_cache/memory_pool.py (MambaPool, MHATokenToKVPool, MLATokenToKVPool; GB = 2^30)
 * and the scheduler's max_total_num_tokens line. */
static void sglang_log(const struct kvp_fit *f, struct kvp_buf *b)
{
    if (f->state_slots)
        kvp_buf_printf(b, "Mamba Cache is allocated. max_mamba_cache_size: %llu, conv_state size: %.2fGB, "
                       "ssm_state size: %.2fGB \n", (unsigned long long)f->state_slots, f->state_conv_bytes / GIB,
                       f->state_ssm_bytes / GIB);
    if (f->cache[1].layers) /* set_num_tokens_hybrid_swa; SWAKVPool builds its SWA pool first */
        kvp_buf_printf(b, "Use sliding window memory pool. full_layer_tokens=%llu, swa_layer_tokens=%llu\n",
                       (unsigned long long)f->cells, (unsigned long long)f->swa_cells);
    for (int c = 1; c >= 0; c--) {
        const struct kvp_cache_sum *p = &f->cache[c];
        if (!p->layers)
            continue;
        if (p->v_bytes)
            kvp_buf_printf(b, "KV Cache is allocated. #tokens: %llu, K size: %.2f GB, V size: %.2f GB\n",
                           (unsigned long long)(c ? f->swa_cells : f->cells), p->k_bytes / GIB, p->v_bytes / GIB);
        else
            kvp_buf_printf(b, "KV Cache is allocated. #tokens: %llu, KV size: %.2f GB\n",
                           (unsigned long long)(c ? f->swa_cells : f->cells), p->k_bytes / GIB);
    }
    kvp_buf_printf(b, "max_total_num_tokens=%llu\n", (unsigned long long)f->kv_tokens);
}

void kvp_fit_log(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f, struct kvp_buf *b)
{
    struct fmtctx c = {.si = false};
    if (d->engine == KVP_ENGINE_VLLM && (kvp_deploy_release(d)->rules & KVP_REL_VLLM_V0)) {
        /* V0 worker.py and executor_base.py */
        kvp_buf_printf(b, "the rest of the memory reserved for KV Cache is %.2fGiB.\n", f->kv_budget_bytes / GIB);
        kvp_buf_printf(b, "# GPU blocks: %llu\n", (unsigned long long)f->num_blocks);
        kvp_buf_printf(b, "Maximum concurrency for %llu tokens per request: %.2fx\n", (unsigned long long)d->context,
                       f->max_concurrency);
    } else if (d->engine == KVP_ENGINE_VLLM) {
        kvp_buf_printf(b, "Available KV cache memory: %.2f GiB\n", f->kv_budget_bytes / GIB);
        kvp_buf_printf(b, "GPU KV cache size: %s tokens\n", grp(&c, f->kv_tokens));
        kvp_buf_printf(b, "Maximum concurrency for %s tokens per request: %.2fx\n", grp(&c, d->context),
                       f->max_concurrency);
    } else if (d->engine == KVP_ENGINE_LLAMACPP) {
        llamacpp_log(m, d, f, b);
    } else if (d->engine == KVP_ENGINE_SGLANG) {
        sglang_log(f, b);
    } else if (d->engine == KVP_ENGINE_TRTLLM) {
        /* _torch/pyexecutor/_util.py, then kvCacheManager.cpp (GiB of the pool, its tokens) */
        kvp_buf_printf(b, "Estimated max memory in KV cache : %.2f GiB\n"
                       "[MemUsageChange] Allocated %.2f GiB for max tokens in paged KV cache (%llu).\n",
                       (double)f->kv_budget_bytes / 1073741824.0, (double)f->kv_pool_bytes / 1073741824.0,
                       (unsigned long long)kvp_sat_mul(f->num_blocks, f->block_size));
    }
}

static void budget_lines(struct fmtctx *c, const struct kvp_deploy *d, const struct kvp_fit *f, struct kvp_buf *b)
{
    const char *e = kvp_engine_info(d->engine)->name;
    if (f->weights_load[0]) /* vLLM's MXFP4 experts (profile_vllm.c mxfp4_padding) */
        kvp_buf_printf(b,
                       "  weights    = the checkpoint's / (tp x pp) + what %s adds at load (mxfp4.py "
                       "Mxfp4MoEMethod.create_weights:\n               %s; a GPU's experts at the padded "
                       "shapes less their stored share)\n             = %s + %s = %s B\n",
                       e, f->weights_load, grp(c, f->weights_bytes - f->weights_padding), grp(c, f->weights_padding),
                       grp(c, f->weights_bytes));
    if (d->kv_memory) {
        kvp_buf_printf(b, "  KV budget  = the KV memory given = %s B\n", grp(c, d->kv_memory));
        return;
    }
    switch (d->engine) {
    case KVP_ENGINE_SGLANG:
        kvp_buf_printf(b, "  KV budget  = (memory - weights - non-torch) - memory * (1 - mem_fraction_static)%s\n"
                       "             = (%s - %s - %s) - %s * (1 - %.3f)%s%s = %s B\n",
                       f->state_slots ? " - mamba pool" : "", grp(c, d->gpu_memory), grp(c, f->weights_bytes),
                       grp(c, f->reserve.non_torch), grp(c, d->gpu_memory), f->util, f->state_slots ? " - " : "",
                       f->state_slots ? grp(c, kvp_sat_mul(f->state_slots, f->state_bytes_per_req)) : "",
                       grp(c, f->kv_budget_bytes));
        break;
    case KVP_ENGINE_TRTLLM:
        kvp_buf_printf(b,
                       "  KV budget  = (memory - weights - activations - non-torch) * free_gpu_memory_fraction\n"
                       "             = (%s - %s - %s - %s) * %.2f = %s B\n",
                       grp(c, d->gpu_memory), grp(c, f->weights_bytes),
                       grp(c, f->reserve.activation + f->reserve.cuda_graph), grp(c, f->reserve.non_torch), f->util,
                       grp(c, f->kv_budget_bytes));
        break;
    case KVP_ENGINE_LLAMACPP:
        kvp_buf_printf(b, "  KV room    = memory - weights - compute buffers - other = %s - %s - %s - %s = %s B\n",
                       grp(c, d->gpu_memory), grp(c, f->weights_bytes),
                       grp(c, f->reserve.activation + f->reserve.cuda_graph), grp(c, f->reserve.non_torch),
                       grp(c, f->kv_budget_bytes));
        break;
    default:
        kvp_buf_printf(b,
                       "  KV budget  = int(memory * %s - (weights + activations%s + non-torch%s))\n"
                       "             = int(%s * %.3f - (%s + %s%s%s + %s%s%s)) = %s B\n",
                       d->engine == KVP_ENGINE_VLLM ? "gpu_memory_utilization" : "fraction",
                       f->reserve.cuda_graph ? " + CUDA graphs" : "",
                       f->state_slots ? " + Mamba cache of max_num_seqs states" : "", grp(c, d->gpu_memory), f->util,
                       grp(c, f->weights_bytes), grp(c, f->reserve.activation), f->reserve.cuda_graph ? " + " : "",
                       f->reserve.cuda_graph ? grp(c, f->reserve.cuda_graph) : "", grp(c, f->reserve.non_torch),
                       f->state_slots ? " + " : "",
                       f->state_slots ? grp(c, kvp_sat_add(f->state_conv_bytes, f->state_ssm_bytes)) : "",
                       grp(c, f->kv_budget_bytes));
    }
    (void)e;
}

/* How the reserve was estimated (src/lib/engine/profile_reserve.c). */
static void reserve_lines(struct fmtctx *c, const struct kvp_deploy *d, const struct kvp_fit *f, struct kvp_buf *b)
{
    const struct kvp_reserve *r = &f->reserve;
    bool v1 = d->engine == KVP_ENGINE_VLLM && !(f->release->rules & KVP_REL_VLLM_V0);
    bool kqv_graph = f->release->rules & KVP_REL_LLAMACPP_KQV_GRAPH; /* profile_reserve.c llamacpp_compute */
    if (r->activation_est && d->engine == KVP_ENGINE_LLAMACPP)
        kvp_buf_printf(b,
                       "  compute    = max(n_ubatch * (vocab + %d * hidden) * 4 (logits), n_ubatch * %s B (%s, mask))\n"
                       "             = max(%s + ..., %s * %s) = %s B (estimated)\n",
                       kqv_graph ? 1 : 2, grp(c, r->per_token),
                       d->flash_attn != 0 ? "attention or MLP"
                       : kqv_graph        ? "KQ over one stream's cells, 4 hidden rows"
                                          : "KQ over one stream's cells, q, k, v",
                       grp(c, r->logits), grp(c, r->profile_tokens), grp(c, r->per_token), grp(c, r->activation));
    else if (r->activation_est && v1)
        kvp_buf_printf(
            b,
            "  activations = max(profiling tokens * (widest MLP + q,k,v) * dtype / tp,\n"
            "                   seqs * vocab * 14 (sampler: bf16 + fp32 logits, probs, noise) + held hidden states)\n"
            "             = max(%s * %s, %s (%s seqs) + ...) = %s B (estimated)\n",
            grp(c, r->profile_tokens), grp(c, r->per_token), grp(c, r->logits), grp(c, r->profile_seqs),
            grp(c, r->activation));
    else if (r->activation_est && d->engine == KVP_ENGINE_TRTLLM)
        kvp_buf_printf(
            b,
            "  activations = max(max_num_tokens * (widest MLP + q,k,v) * dtype / tp,\n"
            "                   requests * vocab * (dtype + 4) (last-token logits, fp32 copy) + held hidden states)\n"
            "             = max(%s * %s, %s (%s requests of min(max_num_tokens, max_seq_len - 1)) + ...) = %s B"
            " (estimated)\n",
            grp(c, r->profile_tokens), grp(c, r->per_token), grp(c, r->logits), grp(c, r->profile_seqs),
            grp(c, r->activation));
    else if (r->activation_est)
        kvp_buf_printf(b,
                       "  activations = profiling tokens * (widest MLP + q,k,v) * dtype / tp + seqs * vocab * 4 * 2\n"
                       "             = %s * %s + %s (%s seqs, fp32 logits and probs) = %s B (estimated)\n",
                       grp(c, r->profile_tokens), grp(c, r->per_token), grp(c, r->logits), grp(c, r->profile_seqs),
                       grp(c, r->activation));
    if (r->cuda_graph_est)
        kvp_buf_printf(b, "  CUDA graphs = capture sizes * largest size * (4 * hidden + MoE workspace) * dtype\n"
                       "             = %s B (estimated; this release subtracts them)\n", grp(c, r->cuda_graph));
    if (r->non_torch_est)
        kvp_buf_printf(b, "  non-torch  = %s B (estimated: CUDA context, %s%s)\n", grp(c, r->non_torch),
                       d->engine == KVP_ENGINE_TRTLLM ? "the pool of CUDA graphs of min(max_batch_size, 128) sequences"
                                                      : "cuBLAS workspaces", d->tp > 1 ? ", NCCL" : "");
    if (r->uncertainty)
        kvp_buf_printf(b,
                       "  the estimate may be off by %s B either way (each estimated term by its own size, plus 0.5%% "
                       "of the memory:\n  the interval fit on the logs, docs/engines.md \"The interval\")\n",
                       grp(c, r->uncertainty));
}

void kvp_explain_fit(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f, bool si,
                     struct kvp_buf *b)
{
    struct fmtctx c = {.si = si};
    const struct kvp_engine_info *e = kvp_engine_info(d->engine);

    kvp_buf_printf(b, "Capacity of %s under %s %s: %s\n", m->name, e->name, f->release->version, e->summary);
    kvp_buf_printf(b, "  per GPU: tp = %u splits KV heads as max(1, H_kv / tp); MLA latents are replicated\n", d->tp);
    reserve_lines(&c, d, f, b);
    budget_lines(&c, d, f, b);
    switch (d->engine) {
    case KVP_ENGINE_VLLM:
        kvp_buf_printf(b, "  page       = block_size * H_kv,rank * (d_k + d_v) * dtype bytes per layer; %u group%s\n",
                       f->n_groups, f->n_groups == 1 ? "" : "s");
        kvp_buf_printf(b, "  num_blocks = budget // (page * group_size) = %s // %s = %s\n", grp(&c, f->kv_budget_bytes),
                       grp(&c, f->num_blocks ? f->kv_pool_bytes / f->num_blocks : 0), grp(&c, f->num_blocks));
        kvp_buf_printf(b, "  tokens     = num_blocks // groups * block_size = %s // %u * %u = %s\n",
                       grp(&c, f->num_blocks), f->n_groups, f->block_size, grp(&c, f->kv_tokens));
        kvp_buf_printf(b, "  concurrency = num_blocks / blocks per request (cdiv(mem_per_req, mem_per_block)) = %.4f\n",
                       f->max_concurrency);
        break;
    case KVP_ENGINE_SGLANG:
        if (f->state_slots)
            kvp_buf_printf(b, "  mamba pool = rest * 0.9 / 1.9 // mamba_cache_per_req %s B = %s slots, taken from the "
                           "budget; max_running_requests <= slots // 3 = %s\n", grp(&c, f->state_bytes_per_req),
                           grp(&c, f->state_slots), grp(&c, f->max_running));
        kvp_buf_printf(b, "  cell       = sum over layers of H_kv,rank * (d_k + d_v) * dtype bytes = %s B\n",
                       grp(&c, f->kv_bytes_per_token_per_gpu));
        kvp_buf_printf(b, "  max_total_num_tokens = int(budget) // cell // page * page = %s\n", grp(&c, f->kv_tokens));
        kvp_buf_printf(b, "  pool       = (tokens + page) slots * cell = %s B\n", grp(&c, f->kv_pool_bytes));
        break;
    case KVP_ENGINE_TRTLLM:
        kvp_buf_printf(b, "  per token  = sum of local KV heads * kvFactor * head size * dtype = %s B\n",
                       grp(&c, f->kv_bytes_per_token_per_gpu));
        kvp_buf_printf(b, "  max tokens = budget // per token = %s; blocks = ceil(tokens / %u) = %s\n",
                       grp(&c, f->kv_tokens), f->block_size, grp(&c, f->num_blocks));
        break;
    case KVP_ENGINE_LLAMACPP:
        kvp_buf_printf(b,
                       "  cells      = PAD(n_ctx, %u)%s = %s x %u stream%s; SWA cells = PAD(min(cells, n_swa%s + "
                       "min(n_ubatch, n_batch)), %u) = %s\n",
                       f->cell_pad, f->n_stream > 1 ? " / n_seq, padded again" : "", grp(&c, f->cells), f->n_stream,
                       f->n_stream == 1 ? "" : "s", d->kv_unified ? " * n_seq" : "", f->cell_pad,
                       grp(&c, f->swa_cells));
        kvp_buf_printf(
            b, "  tensor     = ggml_row_size(type, H_kv * d_head) * cells * streams, padded to 128 B per buffer\n");
        break;
    default:
        kvp_buf_printf(b, "  request    = sum over layers of the tokens each holds * (row_k + row_v)%s = %s B\n",
                       d->engine == KVP_ENGINE_HF_DYNAMIC ? " + one layer's torch.cat copy" : "",
                       grp(&c, f->request_bytes));
        kvp_buf_printf(b, "  concurrency = floor(budget / request) = %.0f\n", f->max_concurrency);
    }
    kvp_buf_printf(b, "  required   = %s B for %s request%s of %s tokens (%s)\n", grp(&c, f->kv_bytes_required),
                   grp(&c, d->concurrency ? d->concurrency : 1), d->concurrency == 1 || !d->concurrency ? "" : "s",
                   grp(&c, d->context), human(&c, f->kv_bytes_required));
}

void kvp_explain_limits(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit_limits *l,
                        bool si, struct kvp_buf *b)
{
    struct fmtctx c = {.si = si};
    uint64_t want = d->concurrency ? d->concurrency : 1;

    kvp_buf_printf(b, "Longest context of %s request%s (kvp_fit_limits): bisection over 1..%s tokens of the engine's "
                   "whole fit at each context (weights + reserve at that context + KV), the model's limit lifted\n",
                   grp(&c, want), want == 1 ? "" : "s", grp(&c, l->search_top));
    kvp_buf_printf(b, "  at %s tokens: %s left; at %s: %s short\n", grp(&c, l->memory_context),
                   human(&c, l->edge_free), grp(&c, l->memory_context + 1), human(&c, l->edge_short));
    if (l->model_binds)
        kvp_buf_printf(b, "  the model's limit is lower: max_position_embeddings %s < %s; past it RoPE scaling, YaRN "
                       "factor = wanted / original = %s / %s = %.3f\n", grp(&c, l->model_context),
                       grp(&c, l->memory_context), grp(&c, l->memory_context), grp(&c, l->model_context),
                       l->rope_factor);
    else
        kvp_buf_printf(b, "  the memory binds: %s <= the model's max_position_embeddings %s\n",
                       grp(&c, l->memory_context), grp(&c, l->model_context));
    if (d->engine != KVP_ENGINE_LLAMACPP || !d->gpu_memory)
        return;
    kvp_buf_printf(b, "  most -ngl at %s tokens (bisection over 0..%u, the output layer last): ", grp(&c, d->context),
                   m->n_layers + 1);
    if (l->max_gpu_layers >= 0)
        kvp_buf_printf(b, "%lld, host memory %s\n", (long long)l->max_gpu_layers,
                       human(&c, l->host_at_max_gpu_layers));
    else
        kvp_buf_printf(b, "none fits\n");
    if (!m->n_experts)
        return;
    kvp_buf_printf(b, "  fewest --n-cpu-moe with every layer on the GPUs (bisection over 0..%u): ", m->n_layers);
    if (l->min_cpu_moe >= 0)
        kvp_buf_printf(b, "%lld, host memory %s\n", (long long)l->min_cpu_moe, human(&c, l->host_at_min_cpu_moe));
    else
        kvp_buf_printf(b, "none fits\n");
}
