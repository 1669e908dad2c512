/* cmd_compare.c -- `kvplan compare MODEL --attention mha,gqa:8,mqa,mla:512+64`:
 * the same model with its attention layers rewritten, side by side.
 *
 * The seeds' what-if (004: MHA -> GQA -> MQA -> MLA): cutting KV heads cuts
 * the cache, a compressed latent cuts it further. Each variant is a copy of
 * the model with its attention specs rewritten and validated again, so the
 * engine prices it exactly like a shipped model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvplan/engine.h"
#include "kvplan/num.h"
#include "kvplan/table.h"

#define MAX_VARIANTS 8
#define CONTEXT_LIMIT ((uint64_t)1 << 32) /* past this the search stops: "unbounded" */

static struct cli_opt opts[] = {
    {"attention", "LIST", "variants, comma-separated: mha, gqa:N (N KV heads), mqa, mla:R+P (latent rank R, "
                          "RoPE dims P); default mha,gqa:8,mqa,mla:512+64", NULL},
    {"gpu", "NAME", "GPU from the catalog: adds the longest context that fits (weights + KV, batch 1)", NULL},
    {"context", "N", "tokens for the KV-cache column (default: the model's max context)", NULL},
    {"kv-dtype", "T", "cache format (default: the model's dtype), e.g. fp8, q8_0", NULL},
    {"format", "F", "text (default), md, csv or json", NULL},
    {"si", NULL, "SI units (GB) instead of IEC (GiB)", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "compare", "MODEL [--attention LIST] [options]",
    "The model with its attention layers rewritten as MHA (KV heads = heads), GQA with N KV\n"
    "heads, MQA (one) or MLA (one latent of R + P values per token): KV bytes per token,\n"
    "savings against the first variant, and with --gpu the longest context that fits at\n"
    "batch 1 (weights in the model's dtype + KV <= the GPU's memory).",
    opts,
};

struct variant {
    char label[32];
    struct kvp_model m;
    struct kvp_kv_plan plan;  /* at the context, batch 1 */
    struct kvp_weights w;
    uint64_t max_context;     /* with a GPU: 0 = weights alone do not fit; CONTEXT_LIMIT = unbounded */
};

static bool is_attention(enum kvp_layer_kind k)
{
    return k == KVP_LAYER_FULL || k == KVP_LAYER_SLIDING || k == KVP_LAYER_CHUNKED || k == KVP_LAYER_MLA;
}

/* Rewrite every attention spec of v->m (a copy of the model) as `what`. */
static int rewrite(struct variant *v, const char *what, bool *windows_dropped)
{
    unsigned long n = 0, r = 0, p = 0;
    char tail;
    enum { MHA, GQA, MQA, MLA } kind;
    struct kvp_error err = {0};

    if (strcmp(what, "mha") == 0)
        kind = MHA;
    else if (strcmp(what, "mqa") == 0)
        kind = MQA;
    else if (sscanf(what, "gqa:%lu%c", &n, &tail) == 1 && n > 0 && n <= 65536)
        kind = GQA;
    else if (sscanf(what, "mla:%lu+%lu%c", &r, &p, &tail) == 2 && r > 0 && p > 0 && r <= 65536 && p <= 65536)
        kind = MLA;
    else
        return cli_usage_error("--attention: unknown variant '%s' (mha, gqa:N, mqa, mla:R+P)", what);
    snprintf(v->label, sizeof v->label, "%s", what);
    for (uint32_t i = 0; i < v->m.n_specs; i++) {
        struct kvp_layer_spec *s = &v->m.specs[i];
        if (s->kind == KVP_LAYER_SHARED && kind == MLA)
            return cli_usage_error("compare: '%s' has shared-KV layers, which cannot read an MLA latent", v->m.name);
        if (!is_attention(s->kind))
            continue;
        if (kind == MLA) {
            /* one latent per token; the K head dim stays (it reads as nope + rope) */
            if (s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED)
                *windows_dropped = true;
            s->kind = KVP_LAYER_MLA;
            s->n_kv_heads = 1;
            s->window = 0;
            s->kv_lora_rank = (uint32_t)r;
            s->qk_rope_dim = (uint32_t)p;
            if (s->head_dim_k <= p)
                s->head_dim_k += (uint32_t)p; /* a rope part beyond the head's own dims */
            continue;
        }
        if (s->kind == KVP_LAYER_MLA) {
            s->kind = KVP_LAYER_FULL; /* decompressed: heads of head_dim_k and head_dim_v */
            s->kv_lora_rank = s->qk_rope_dim = s->q_lora_rank = 0;
        }
        if (kind == GQA && (n > s->n_heads || s->n_heads % n != 0))
            return cli_usage_error("--attention: 'gqa:%lu' needs KV heads that divide the %u query heads", n,
                                   s->n_heads);
        s->n_kv_heads = kind == MHA ? s->n_heads : kind == MQA ? 1 : (uint32_t)n;
    }
    if (kvp_model_validate(&v->m, &err) != KVP_OK)
        return cli_usage_error("compare: variant '%s': %s", what, err.msg);
    return CLI_OK;
}

/* weights + KV of one sequence of T tokens, saturating. */
static enum kvp_status need(const struct variant *v, const struct kvp_format *f, uint64_t T, uint64_t *out,
                            struct kvp_error *err)
{
    struct kvp_kv_query q = {.context = T, .batch = 1, .k = *f, .v = *f};
    struct kvp_kv_plan plan;
    enum kvp_status st = kvp_kv_compute(&v->m, &q, &plan, err);
    if (st == KVP_ERR_OVERFLOW) {
        *out = UINT64_MAX;
        return KVP_OK;
    }
    if (st != KVP_OK)
        return st;
    if (!kvp_add(plan.total_bytes, v->w.bytes, out))
        *out = UINT64_MAX;
    return KVP_OK;
}

/* Longest T with weights + KV(T) <= mem: bytes grow with T, so bisect. */
static enum kvp_status longest(struct variant *v, const struct kvp_format *f, uint64_t mem, struct kvp_error *err)
{
    uint64_t lo = 0, hi = CONTEXT_LIMIT, b;
    enum kvp_status st;
    if ((st = need(v, f, hi, &b, err)) != KVP_OK)
        return st;
    if (b <= mem) {
        v->max_context = CONTEXT_LIMIT;
        return KVP_OK;
    }
    while (hi - lo > 1) { /* invariant: need(lo) fits (or lo = 0), need(hi) does not */
        uint64_t mid = lo + (hi - lo) / 2;
        if ((st = need(v, f, mid, &b, err)) != KVP_OK)
            return st;
        if (b <= mem)
            lo = mid;
        else
            hi = mid;
    }
    v->max_context = lo;
    return KVP_OK;
}

static const char *context_text(uint64_t t, char *buf, uint32_t n)
{
    if (t >= CONTEXT_LIMIT)
        return snprintf(buf, n, "unbounded"), buf;
    if (t == 0)
        return snprintf(buf, n, "none (weights do not fit)"), buf;
    return kvp_count_text(t, buf, n);
}

static void heads_text(const struct kvp_model *m, char *buf, uint32_t n)
{
    for (uint32_t i = 0; i < m->n_layers; i++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, i);
        if (s->kind == KVP_LAYER_MLA) {
            snprintf(buf, n, "latent %u+%u", s->kv_lora_rank, s->qk_rope_dim);
            return;
        }
        if (is_attention(s->kind)) {
            snprintf(buf, n, "%u of %u", s->n_kv_heads, s->n_heads);
            return;
        }
    }
    snprintf(buf, n, "-");
}

struct job {
    const struct kvp_model *m;
    struct variant *v;
    uint32_t n;
    uint64_t context;
    struct kvp_format f;
    char fname[64];
    const struct kvp_gpu *gpu;
    bool si;
    bool windows_dropped; /* an MLA variant replaced sliding or chunked layers */
};

static void render(const struct job *j, enum kvp_out fmt, struct kvp_buf *b)
{
    char c[KVP_TABLE_MAX_COLS][48], vs[64], at[64], gp[64];
    const char *head[] = {"attention", "KV heads", "KV per token", vs, at, "weights", gp};
    static const bool right[] = {false, true, true, true, true, true, true};
    struct kvp_table t;
    uint32_t ncols = j->gpu ? 7 : 6;

    if (fmt == KVP_OUT_JSON) {
        struct kvp_json js;
        kvp_json_init(&js, b);
        kvp_json_begin(&js, NULL, '{');
        kvp_json_str(&js, "model", j->m->name);
        kvp_json_u64(&js, "context", j->context);
        kvp_json_str(&js, "kv_dtype", j->fname);
        if (j->gpu) {
            kvp_json_str(&js, "gpu", j->gpu->id);
            kvp_json_u64(&js, "gpu_memory_bytes", j->gpu->memory_bytes);
        } else {
            kvp_json_null(&js, "gpu");
        }
        kvp_json_begin(&js, "variants", '[');
        for (uint32_t i = 0; i < j->n; i++) {
            const struct variant *v = &j->v[i];
            kvp_json_begin(&js, NULL, '{');
            kvp_json_str(&js, "attention", v->label);
            kvp_json_u64(&js, "kv_bytes_per_token", v->plan.kv_bytes_per_token);
            kvp_json_u64(&js, "kv_bytes", v->plan.total_bytes);
            kvp_json_u64(&js, "weight_bytes", v->w.bytes);
            kvp_json_double(&js, "savings", v->plan.kv_bytes_per_token
                                               ? (double)j->v[0].plan.kv_bytes_per_token / (double)v->plan.kv_bytes_per_token
                                               : 0);
            if (!j->gpu)
                ;
            else if (v->max_context >= CONTEXT_LIMIT)
                kvp_json_null(&js, "max_context");
            else
                kvp_json_u64(&js, "max_context", v->max_context);
            kvp_json_end(&js, '}');
        }
        kvp_json_end(&js, ']');
        kvp_json_end(&js, '}');
        return;
    }
    if (fmt == KVP_OUT_CSV) {
        kvp_buf_printf(b, "model,attention,context,kv_dtype,kv_bytes_per_token,kv_bytes,weight_bytes,savings,gpu,"
                          "max_context\n");
        for (uint32_t i = 0; i < j->n; i++) {
            const struct variant *v = &j->v[i];
            kvp_buf_printf(b, "%s,%s,%llu,%s,%llu,%llu,%llu,%.4f,%s,", j->m->name, v->label,
                           (unsigned long long)j->context, j->fname, (unsigned long long)v->plan.kv_bytes_per_token,
                           (unsigned long long)v->plan.total_bytes, (unsigned long long)v->w.bytes,
                           v->plan.kv_bytes_per_token
                               ? (double)j->v[0].plan.kv_bytes_per_token / (double)v->plan.kv_bytes_per_token : 0,
                           j->gpu ? j->gpu->id : "");
            if (j->gpu && v->max_context < CONTEXT_LIMIT)
                kvp_buf_printf(b, "%llu", (unsigned long long)v->max_context);
            kvp_buf_printf(b, "\n");
        }
        return;
    }
    kvp_buf_printf(b, "%s%s: attention rewritten, K and V in %s, batch 1, ideal engine\n\n",
                   fmt == KVP_OUT_MD ? "## " : "", j->m->name, j->fname);
    snprintf(vs, sizeof vs, "vs %s", j->v[0].label);
    snprintf(at, sizeof at, "KV at %s", kvp_tokens_label(j->context, c[0], sizeof c[0]));
    if (j->gpu) {
        char mem[32];
        snprintf(gp, sizeof gp, "longest context on %s (%s)", j->gpu->id,
                 kvp_bytes_text(j->gpu->memory_bytes, j->si, mem, sizeof mem));
    }
    kvp_table_init(&t, ncols, head, right);
    for (uint32_t i = 0; i < j->n; i++) {
        const struct variant *v = &j->v[i];
        const char *row[7];
        heads_text(&v->m, c[0], sizeof c[0]);
        kvp_bytes_text(v->plan.kv_bytes_per_token, j->si, c[1], sizeof c[1]);
        if (v->plan.kv_bytes_per_token) {
            double r = (double)j->v[0].plan.kv_bytes_per_token / (double)v->plan.kv_bytes_per_token;
            snprintf(c[2], sizeof c[2], r >= 1 ? "%.2fx smaller" : "%.2fx larger", r >= 1 ? r : 1 / r);
        } else
            snprintf(c[2], sizeof c[2], "-");
        if (i == 0)
            snprintf(c[2], sizeof c[2], "1.00x");
        kvp_bytes_text(v->plan.total_bytes, j->si, c[3], sizeof c[3]);
        kvp_bytes_text(v->w.bytes, j->si, c[4], sizeof c[4]);
        context_text(v->max_context, c[5], sizeof c[5]);
        row[0] = v->label, row[1] = c[0], row[2] = c[1], row[3] = c[2], row[4] = c[3], row[5] = c[4], row[6] = c[5];
        kvp_table_row(&t, row);
    }
    kvp_table_render(&t, fmt, b);
    kvp_table_release(&t);
    kvp_buf_printf(b, "\nKV per token: sum over layers of what one more token adds (MHA/GQA/MQA: "
                      "2 x KV heads x head dim; MLA: R + P, once).\n");
    if (j->windows_dropped)
        kvp_buf_printf(b, "MLA variants drop the sliding windows and chunks: every layer keeps a latent per token.\n");
    if (j->gpu)
        kvp_buf_printf(b, "Longest context: the largest T with weights + KV(T) <= memory, one sequence.\n");
}

int cmd_compare(int argc, char **argv)
{
    const char *pos[1], *list, *g;
    struct kvp_model *m = NULL;
    struct job j;
    struct kvp_error err = {0};
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    char items[MAX_VARIANTS][32];
    uint32_t ni = 0;
    int npos, rc;

    memset(&j, 0, sizeof j);
    if ((rc = cli_parse(&cmd, argc, argv, pos, 1, &npos)) != CLI_OK)
        return rc;
    if (npos != 1)
        return cli_usage_error("compare: which model? (usage: kvplan compare MODEL [--attention LIST])");
    list = cli_opt(&cmd, "attention");
    list = list ? list : "mha,gqa:8,mqa,mla:512+64";
    for (const char *p = list;;) { /* split the list */
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0 || len >= sizeof items[0])
            return cli_usage_error("--attention: bad list '%s'", list);
        if (ni == MAX_VARIANTS)
            return cli_usage_error("--attention: at most %d variants (got '%s')", MAX_VARIANTS, list);
        memcpy(items[ni], p, len);
        items[ni++][len] = '\0';
        if (!end)
            break;
        p = end + 1;
    }
    g = cli_opt(&cmd, "gpu");
    if (g) {
        const struct kvp_gpu_catalog *gc;
        if ((rc = cli_gpus(&gc)) != CLI_OK)
            return rc;
        if (kvp_gpu_find(gc, g, &j.gpu, &err) != KVP_OK)
            return cli_usage_error("--gpu: %s", err.msg);
    }
    if ((rc = cli_out(&cmd, &fmt, true)) != CLI_OK || (rc = cli_model(pos[0], &m)) != CLI_OK)
        return rc;
    j.m = m;
    j.context = m->max_context;
    j.f = kvp_format_plain(m->dtype);
    j.si = cli_opt(&cmd, "si") != NULL;
    if ((rc = cli_count(&cmd, "context", 1, &j.context)) || (rc = cli_format(&cmd, "kv-dtype", &j.f)))
        goto out;
    kvp_format_name(&j.f, j.fname, sizeof j.fname);
    if (!(j.v = calloc(ni, sizeof *j.v))) {
        rc = cli_usage_error("out of memory");
        goto out;
    }
    for (j.n = 0; j.n < ni; j.n++) {
        struct variant *v = &j.v[j.n];
        struct kvp_kv_query q = {.context = j.context, .batch = 1, .k = j.f, .v = j.f};
        v->m = *m;
        if ((rc = rewrite(v, items[j.n], &j.windows_dropped)) != CLI_OK)
            goto out;
        if (kvp_kv_compute(&v->m, &q, &v->plan, &err) != KVP_OK ||
            kvp_weights_compute(&v->m, NULL, &v->w, &err) != KVP_OK ||
            (j.gpu && longest(v, &j.f, j.gpu->memory_bytes, &err) != KVP_OK)) {
            rc = cli_error(&err);
            goto out;
        }
    }
    render(&j, fmt, &b);
    rc = cli_write(&b);
out:
    kvp_buf_release(&b);
    free(j.v);
    kvp_model_free(m);
    return rc;
}
