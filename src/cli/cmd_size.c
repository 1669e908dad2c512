/* cmd_size.c -- `kvplan size MODEL`: KV cache and weight bytes. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvplan/kv.h"
#include "kvplan/explain.h"
#include "kvplan/num.h"

static struct cli_opt opts[] = {
    {"context", "N", "tokens per sequence (default: the model's max context); 32k, 128K, 1M", NULL},
    {"batch", "B", "sequences (default 1)", NULL},
    {"kv-dtype", "T", "K and V cache format (default: the model's dtype), e.g. fp8, q8_0, int4:group=64", NULL},
    {"k-dtype", "T", "K cache format, overrides --kv-dtype for K", NULL},
    {"v-dtype", "T", "V cache format, overrides --kv-dtype for V", NULL},
    {"weight-dtype", "T", "weights as: stored (default: the checkpoint's own storage), a format for every projection\n"
     "(int4:group=128, fp8, mxfp4), or a llama.cpp file type (q4_k_m, q8_0, iq4_xs)", NULL},
    {"explain", NULL, "print the derivation of every figure with the values substituted", NULL},
    {"format", "F", "text (default), json, csv or md", NULL},
    {"si", NULL, "SI units (GB) instead of IEC (GiB) in text", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "size", "MODEL [options]",
    "KV-cache bytes per token and at a context and batch, recurrent state, and weights.\n"
    "MODEL is a built-in name (kvplan models), a Hugging Face repo id of one, a kvplan YAML,\n"
    "a config.json (or a folder holding one) or a GGUF file.",
    opts,
};

struct sized {
    const struct kvp_model *m;
    struct kvp_kv_query q;
    struct kvp_kv_plan plan;
    struct kvp_wstore ws;
    struct kvp_weights w;
    char kname[64], vname[64], wname[64];
};

static void render_json(const struct sized *s, struct kvp_buf *b)
{
    struct kvp_json j;
    kvp_json_init(&j, b);
    kvp_json_begin(&j, NULL, '{');
    kvp_json_str(&j, "model", s->m->name);
    kvp_json_str(&j, "profile", "ideal");
    kvp_json_u64(&j, "context", s->q.context);
    kvp_json_u64(&j, "batch", s->q.batch);
    kvp_json_str(&j, "k_dtype", s->kname);
    kvp_json_str(&j, "v_dtype", s->vname);
    kvp_json_u64(&j, "kv_bytes_per_token", s->plan.kv_bytes_per_token);
    kvp_json_u64(&j, "k_bytes_per_token", s->plan.k_bytes_per_token);
    kvp_json_u64(&j, "v_bytes_per_token", s->plan.v_bytes_per_token);
    kvp_json_u64(&j, "kv_bytes", s->plan.kv_bytes);
    kvp_json_u64(&j, "k_bytes", s->plan.k_bytes);
    kvp_json_u64(&j, "v_bytes", s->plan.v_bytes);
    kvp_json_u64(&j, "state_bytes", s->plan.state_bytes);
    kvp_json_str(&j, "weight_dtype", s->wname);
    kvp_json_u64(&j, "params", s->w.params);
    kvp_json_u64(&j, "active_params", s->w.active_params);
    kvp_json_u64(&j, "weight_bytes", s->w.bytes);
    kvp_json_weights(&j, s->m, &s->w);
    kvp_json_model_warnings(&j, s->m);
    kvp_json_u64(&j, "total_bytes", s->plan.total_bytes + s->w.bytes);
    kvp_json_begin(&j, "layers", '[');
    for (uint32_t i = 0; i < s->m->n_specs; i++) {
        const struct kvp_layer_spec *sp = &s->m->specs[i];
        const struct kvp_spec_bytes *sb = &s->plan.spec[i];
        kvp_json_begin(&j, NULL, '{');
        kvp_json_str(&j, "kind", kvp_layer_kind_name(sp->kind));
        kvp_json_u64(&j, "count", sb->layers);
        kvp_json_u64(&j, "kv_heads", sp->n_kv_heads);
        kvp_json_u64(&j, "head_dim_k", sp->head_dim_k);
        kvp_json_u64(&j, "head_dim_v", sp->head_dim_v);
        if (sp->window)
            kvp_json_u64(&j, "window", sp->window);
        kvp_json_u64(&j, "tokens_held", sb->tokens);
        kvp_json_u64(&j, "kv_bytes_per_token", (sb->k_token + sb->v_token) * sb->layers);
        kvp_json_u64(&j, "kv_bytes", (sb->k_seq + sb->v_seq) * sb->layers * s->q.batch);
        kvp_json_u64(&j, "state_bytes", sb->state_seq * sb->layers * s->q.batch);
        kvp_json_end(&j, '}');
    }
    kvp_json_end(&j, ']');
    kvp_json_end(&j, '}');
}

static void render_csv(const struct sized *s, struct kvp_buf *b)
{
    kvp_buf_printf(b,
                   "model,context,batch,k_dtype,v_dtype,kv_bytes_per_token,kv_bytes,state_bytes,params,weight_bytes\n");
    kvp_buf_printf(b, "%s,%llu,%llu,%s,%s,%llu,%llu,%llu,%llu,%llu\n", s->m->name,
                   (unsigned long long)s->q.context, (unsigned long long)s->q.batch, s->kname, s->vname,
                   (unsigned long long)s->plan.kv_bytes_per_token, (unsigned long long)s->plan.kv_bytes,
                   (unsigned long long)s->plan.state_bytes, (unsigned long long)s->w.params,
                   (unsigned long long)s->w.bytes);
}

/* One figure: human size and exact bytes. */
static void figure_row(struct kvp_table *t, const char *what, uint64_t bytes, bool si, const char *note)
{
    char h[32], e[40], x[48];
    snprintf(x, sizeof x, "%s B", kvp_count_text(bytes, e, sizeof e));
    const char *row[] = {what, kvp_bytes_text(bytes, si, h, sizeof h), x, note};
    kvp_table_row(t, row);
}

static void render_table(const struct sized *s, enum kvp_out fmt, bool si, struct kvp_buf *b)
{
    static const char *const head[] = {"figure", "size", "bytes", "note"};
    static const bool right[] = {false, true, true, false};
    struct kvp_table t;
    char sum[160], note[128], g1[32], g2[32], pbuf[32], split[400];

    kvp_buf_printf(b, "%s%s: %s\n", fmt == KVP_OUT_MD ? "## " : "", s->m->name,
                   kvp_model_layer_summary(s->m, sum, sizeof sum));
    kvp_buf_printf(b, "%scontext %s tokens x batch %s, K %s, V %s, weights %s, profile ideal\n",
                   fmt == KVP_OUT_MD ? "\n" : "", kvp_count_text(s->q.context, g1, sizeof g1),
                   kvp_count_text(s->q.batch, g2, sizeof g2), s->kname, s->vname, s->wname);
    kvp_buf_printf(b, "weights: %s\n\n", kvp_weights_split(&s->w, si, split, sizeof split));
    kvp_table_init(&t, 4, head, right);
    figure_row(&t, "KV per token", s->plan.kv_bytes_per_token, si, "while the context is within every window");
    figure_row(&t, "KV cache", s->plan.kv_bytes, si, "");
    if (s->plan.state_bytes)
        figure_row(&t, "recurrent state", s->plan.state_bytes, si, "constant in the context");
    snprintf(note, sizeof note, "%s params", kvp_count_text(s->w.params, pbuf, sizeof pbuf));
    if (s->w.tower_params)
        snprintf(note + strlen(note), sizeof note - strlen(note), ", %s of them the vision tower",
                 kvp_count_text(s->w.tower_params, g2, sizeof g2));
    if (s->w.active_params + s->w.tower_params != s->w.params)
        snprintf(note + strlen(note), sizeof note - strlen(note), ", %s active",
                 kvp_count_text(s->w.active_params, g1, sizeof g1));
    figure_row(&t, "weights", s->w.bytes, si, note);
    figure_row(&t, "total", s->plan.total_bytes + s->w.bytes, si, "KV + state + weights");
    kvp_table_render(&t, fmt, b);
    kvp_table_release(&t);
}

static int compute(struct sized *s, struct kvp_error *err)
{
    if (kvp_kv_compute(s->m, &s->q, &s->plan, err) != KVP_OK ||
        kvp_weights_compute(s->m, &s->ws, &s->w, err) != KVP_OK)
        return cli_error(err);
    return CLI_OK;
}

int cmd_size(int argc, char **argv)
{
    const char *pos[1];
    int npos, rc;
    struct kvp_model *m = NULL;
    struct sized s;
    struct kvp_error err = {0};
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    bool si;

    if ((rc = cli_parse(&cmd, argc, argv, pos, 1, &npos)) != CLI_OK)
        return rc;
    if (npos != 1)
        return cli_usage_error("size: which model? (usage: kvplan size MODEL [options])");
    if ((rc = cli_model(pos[0], &m)) != CLI_OK)
        return rc;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.q.context = m->max_context;
    s.q.batch = 1;
    s.q.k = s.q.v = kvp_format_plain(m->dtype);
    si = cli_opt(&cmd, "si") != NULL;
    if ((rc = cli_count(&cmd, "context", 0, &s.q.context)) || (rc = cli_count(&cmd, "batch", 1, &s.q.batch)) ||
        (rc = cli_format(&cmd, "kv-dtype", &s.q.k)) || (rc = cli_format(&cmd, "kv-dtype", &s.q.v)) ||
        (rc = cli_format(&cmd, "k-dtype", &s.q.k)) || (rc = cli_format(&cmd, "v-dtype", &s.q.v)) ||
        (rc = cli_wstore(&cmd, "weight-dtype", m->arch[0] != '\0', &s.ws)) || (rc = cli_out(&cmd, &fmt, true)) ||
        (rc = compute(&s, &err))) {
        kvp_model_free(m);
        return rc;
    }
    kvp_format_name(&s.q.k, s.kname, sizeof s.kname);
    kvp_format_name(&s.q.v, s.vname, sizeof s.vname);
    kvp_wstore_name(&s.ws, s.wname, sizeof s.wname);
    if (fmt == KVP_OUT_JSON)
        render_json(&s, &b);
    else if (fmt == KVP_OUT_CSV)
        render_csv(&s, &b);
    else
        render_table(&s, fmt, si, &b);
    if (cli_opt(&cmd, "explain") && fmt != KVP_OUT_JSON && fmt != KVP_OUT_CSV) {
        kvp_buf_printf(&b, "\n");
        kvp_explain_kv(m, &s.q, &s.plan, si, &b);
        kvp_buf_printf(&b, "\n");
        kvp_explain_weights(m, &s.w, si, &b);
    }
    rc = cli_write(&b);
    kvp_buf_release(&b);
    kvp_model_free(m);
    return rc;
}
