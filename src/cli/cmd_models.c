/* cmd_models.c -- `kvplan models`: the built-in models. */
#include <stdio.h>

#include "cli.h"
#include "kvplan/kv.h"
#include "kvplan/num.h"

static struct cli_opt opts[] = {
    {"format", "F", "text (default), json, csv or md", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "models", "[options]",
    "The built-in models (names are matched case-insensitively; their Hugging Face ids work too).\n"
    "KV per token is in each model's own dtype.",
    opts,
};

int cmd_models(int argc, char **argv)
{
    static const char *const head[] = {"name", "hf_id", "layers", "params", "KV B/token", "max context"};
    static const bool right[] = {false, false, false, true, true, true};
    const char *pos[1];
    int npos, rc;
    const struct kvp_catalog *cat;
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    struct kvp_table t;
    struct kvp_json j;

    if ((rc = cli_parse(&cmd, argc, argv, pos, 0, &npos)) != CLI_OK || (rc = cli_out(&cmd, &fmt, true)) != CLI_OK ||
        (rc = cli_catalog(&cat)) != CLI_OK)
        return rc;
    kvp_table_init(&t, 6, head, right);
    kvp_json_init(&j, &b);
    if (fmt == KVP_OUT_JSON)
        kvp_json_begin(&j, NULL, '[');
    for (uint32_t i = 0; i < cat->n; i++) {
        const struct kvp_model *m = cat->models[i];
        struct kvp_kv_query q = {
            .context = 1, .batch = 1, .k = kvp_format_plain(m->dtype), .v = kvp_format_plain(m->dtype)};
        struct kvp_kv_plan p;
        struct kvp_weights w;
        struct kvp_error err = {0};
        char c[4][160];
        if (kvp_kv_compute(m, &q, &p, &err) != KVP_OK || kvp_weights_compute(m, NULL, &w, &err) != KVP_OK) {
            kvp_table_release(&t);
            kvp_buf_release(&b);
            return cli_error(&err);
        }
        if (fmt == KVP_OUT_JSON) {
            kvp_json_begin(&j, NULL, '{');
            kvp_json_str(&j, "name", m->name);
            kvp_json_str(&j, "hf_id", m->hf_id);
            kvp_json_u64(&j, "layers", m->n_layers);
            kvp_json_u64(&j, "params", w.params);
            kvp_json_u64(&j, "kv_bytes_per_token", p.kv_bytes_per_token);
            kvp_json_u64(&j, "max_context", m->max_context);
            kvp_json_str(&j, "dtype", kvp_dtype_info(m->dtype)->name);
            kvp_json_end(&j, '}');
            continue;
        }
        kvp_model_layer_summary(m, c[0], sizeof c[0]);
        snprintf(c[1], sizeof c[1], "%.2fB", w.params / 1e9);
        kvp_count_text(p.kv_bytes_per_token, c[2], sizeof c[2]);
        kvp_count_text(m->max_context, c[3], sizeof c[3]);
        const char *row[] = {m->name, m->hf_id[0] ? m->hf_id : "-", c[0], c[1], c[2], c[3]};
        kvp_table_row(&t, row);
    }
    if (fmt == KVP_OUT_JSON)
        kvp_json_end(&j, ']');
    else
        kvp_table_render(&t, fmt, &b);
    kvp_table_release(&t);
    rc = cli_write(&b);
    kvp_buf_release(&b);
    return rc;
}
