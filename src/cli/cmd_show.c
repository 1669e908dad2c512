/* cmd_show.c -- `kvplan show MODEL`: architecture and KV cost per layer kind. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvplan/explain.h"
#include "kvplan/kv.h"
#include "kvplan/num.h"

static struct cli_opt opts[] = {
    {"format", "F", "text (default), json, csv or md", NULL},
    {"si", NULL, "SI units (GB) instead of IEC (GiB)", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "show", "MODEL [options]",
    "The model as kvplan understood it: its layer shapes, what each caches per token\n"
    "in the model's dtype, and its weights.",
    opts,
};

static const char *attention_name(const struct kvp_layer_spec *s, char *buf, size_t n)
{
    switch (s->kind) {
    case KVP_LAYER_MLA:
        snprintf(buf, n, "MLA latent %u+%u", s->kv_lora_rank, s->qk_rope_dim);
        break;
    case KVP_LAYER_RECURRENT:
        snprintf(buf, n, "%s state", kvp_recurrent_kind_name(s->rec.kind));
        break;
    case KVP_LAYER_NONE:
        snprintf(buf, n, "-");
        break;
    case KVP_LAYER_SHARED:
        snprintf(buf, n, "reads layer %u", s->shares);
        break;
    default:
        snprintf(buf, n, "%s %u/%u", s->n_kv_heads == s->n_heads ? "MHA" : s->n_kv_heads == 1 ? "MQA" : "GQA",
                 s->n_heads, s->n_kv_heads);
    }
    return buf;
}

static void spec_row(struct kvp_table *t, const struct kvp_layer_spec *s, const struct kvp_spec_bytes *sb, bool si)
{
    char c[9][48];
    snprintf(c[0], sizeof c[0], "%u", sb->layers);
    snprintf(c[1], sizeof c[1], "%s", kvp_layer_kind_name(s->kind));
    attention_name(s, c[2], sizeof c[2]);
    if (s->head_dim_k)
        snprintf(c[3], sizeof c[3], s->head_dim_k == s->head_dim_v ? "%u" : "%u/%u", s->head_dim_k, s->head_dim_v);
    else
        snprintf(c[3], sizeof c[3], "-");
    if (s->window)
        kvp_count_text(s->window, c[4], sizeof c[4]);
    else
        snprintf(c[4], sizeof c[4], "-");
    snprintf(c[5], sizeof c[5], "%s", kvp_mlp_kind_name(s->mlp));
    kvp_count_text(sb->k_token + sb->v_token, c[6], sizeof c[6]);
    kvp_count_text((sb->k_token + sb->v_token) * sb->layers, c[7], sizeof c[7]);
    if (sb->state_seq)
        kvp_bytes_text(sb->state_seq * sb->layers, si, c[8], sizeof c[8]);
    else
        snprintf(c[8], sizeof c[8], "-");
    const char *row[] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]};
    kvp_table_row(t, row);
}

static void render_json(const struct kvp_model *m, const struct kvp_kv_plan *p, const struct kvp_weights *w,
                        struct kvp_buf *b)
{
    struct kvp_json j;
    kvp_json_init(&j, b);
    kvp_json_begin(&j, NULL, '{');
    kvp_json_str(&j, "model", m->name);
    kvp_json_str(&j, "hf_id", m->hf_id);
    kvp_json_str(&j, "family", m->family);
    kvp_json_str(&j, "source", m->source);
    kvp_json_str(&j, "dtype", kvp_dtype_info(m->dtype)->name);
    kvp_json_u64(&j, "max_context", m->max_context);
    kvp_json_u64(&j, "layers", m->n_layers);
    kvp_json_u64(&j, "hidden", m->hidden);
    kvp_json_u64(&j, "vocab", m->vocab);
    kvp_json_u64(&j, "params", w->params);
    kvp_json_u64(&j, "active_params", w->active_params);
    kvp_json_u64(&j, "weight_bytes", w->bytes);
    kvp_json_weights(&j, m, w);
    kvp_json_model_warnings(&j, m);
    kvp_json_u64(&j, "kv_bytes_per_token", p->kv_bytes_per_token);
    kvp_json_begin(&j, "specs", '[');
    for (uint32_t i = 0; i < m->n_specs; i++) {
        const struct kvp_layer_spec *s = &m->specs[i];
        kvp_json_begin(&j, NULL, '{');
        kvp_json_str(&j, "kind", kvp_layer_kind_name(s->kind));
        kvp_json_u64(&j, "count", p->spec[i].layers);
        kvp_json_str(&j, "mlp", kvp_mlp_kind_name(s->mlp));
        kvp_json_u64(&j, "heads", s->n_heads);
        kvp_json_u64(&j, "kv_heads", s->n_kv_heads);
        kvp_json_u64(&j, "head_dim_k", s->head_dim_k);
        kvp_json_u64(&j, "head_dim_v", s->head_dim_v);
        kvp_json_u64(&j, "window", s->window);
        kvp_json_u64(&j, "kv_bytes_per_token_per_layer", p->spec[i].k_token + p->spec[i].v_token);
        kvp_json_u64(&j, "state_bytes_per_layer", p->spec[i].state_seq);
        kvp_json_end(&j, '}');
    }
    kvp_json_end(&j, ']');
    kvp_json_end(&j, '}');
}

int cmd_show(int argc, char **argv)
{
    static const char *const head[] = {"layers", "kind", "attention", "d_head", "window", "mlp",
                                       "KV B/token/layer", "KV B/token", "state/seq"};
    static const bool right[] = {true, false, false, true, true, false, true, true, true};
    const char *pos[1];
    int npos, rc;
    struct kvp_model *m = NULL;
    struct kvp_kv_query q = {.context = 1, .batch = 1};
    struct kvp_kv_plan p;
    struct kvp_weights w;
    struct kvp_error err = {0};
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    bool si = false;

    if ((rc = cli_parse(&cmd, argc, argv, pos, 1, &npos)) != CLI_OK)
        return rc;
    if (npos != 1)
        return cli_usage_error("show: which model? (usage: kvplan show MODEL [options])");
    if ((rc = cli_out(&cmd, &fmt, true)) != CLI_OK || (rc = cli_model(pos[0], &m)) != CLI_OK)
        return rc;
    si = cli_opt(&cmd, "si") != NULL;
    q.k = q.v = kvp_format_plain(m->dtype);
    if (kvp_kv_compute(m, &q, &p, &err) != KVP_OK || kvp_weights_compute(m, NULL, &w, &err) != KVP_OK) {
        kvp_model_free(m);
        return cli_error(&err);
    }
    if (fmt == KVP_OUT_JSON) {
        render_json(m, &p, &w, &b);
    } else {
        struct kvp_table t;
        char sum[160], g[4][40];
        if (fmt != KVP_OUT_CSV) {
            kvp_buf_printf(&b, "%s%s%s%s%s\n", fmt == KVP_OUT_MD ? "## " : "", m->name, m->hf_id[0] ? " (" : "",
                           m->hf_id, m->hf_id[0] ? ")" : "");
            kvp_buf_printf(&b, "%s%s; hidden %u, vocab %u, %s, max context %s\n", fmt == KVP_OUT_MD ? "\n" : "",
                           kvp_model_layer_summary(m, sum, sizeof sum), m->hidden, m->vocab,
                           kvp_dtype_info(m->dtype)->name, kvp_count_text(m->max_context, g[0], sizeof g[0]));
            kvp_buf_printf(&b, "params %s", kvp_count_text(w.params, g[1], sizeof g[1]));
            if (w.tower_params)
                kvp_buf_printf(&b, " (text %s + vision tower %s)",
                               kvp_count_text(w.params - w.tower_params, g[2], sizeof g[2]),
                               kvp_count_text(w.tower_params, g[3], sizeof g[3]));
            if (w.active_params + w.tower_params != w.params)
                kvp_buf_printf(&b, " (%s active: %u of %u experts)", kvp_count_text(w.active_params, g[2], sizeof g[2]),
                               m->n_experts_active, m->n_experts);
            kvp_buf_printf(&b, ", weights %s; KV %s B per token (%s)\n", kvp_bytes_text(w.bytes, si, g[3], sizeof g[3]),
                           kvp_count_text(p.kv_bytes_per_token, g[0], sizeof g[0]), kvp_dtype_info(m->dtype)->name);
            if (w.n_parts > 1 || w.source[0]) {
                char split[400];
                kvp_buf_printf(&b, "%sweights: %s\n", fmt == KVP_OUT_MD ? "\n" : "",
                               kvp_weights_split(&w, si, split, sizeof split));
            }
            if (m->source[0])
                kvp_buf_printf(&b, "%ssource: %s\n", fmt == KVP_OUT_MD ? "\n" : "", m->source);
            kvp_buf_printf(&b, "\n");
        }
        kvp_table_init(&t, 9, head, right);
        for (uint32_t i = 0; i < m->n_specs; i++)
            spec_row(&t, &m->specs[i], &p.spec[i], si);
        kvp_table_render(&t, fmt, &b);
        kvp_table_release(&t);
    }
    rc = cli_write(&b);
    kvp_buf_release(&b);
    kvp_model_free(m);
    return rc;
}
