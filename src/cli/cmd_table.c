/* cmd_table.c -- `kvplan table MODEL...`: KV bytes over contexts x batches x
 * cache formats and, with --gpu, what fits. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvplan/deploy.h"
#include "kvplan/sizing.h"

#define MAX_MODELS 64

/* the deployment options (settings.h) come first, as `kvplan fit` takes them, then these */
static const struct cli_opt table_opts[] = {
    {"contexts", "LIST", "tokens per sequence, comma-separated (default 1k,4k,32k,128k; --context N: one row)", NULL},
    {"batches", "LIST", "requests, comma-separated (default 1; --concurrency C: one)", NULL},
    {"kv-dtypes", "LIST", "cache formats for K and V, comma-separated (default bf16,fp8,q4_0; with a GPU the "
                          "engine's default and its 8-bit cache, fp8 or q8_0; --kv-dtype T: one)", NULL},
    {"combined", NULL, "one table for all models: rows = models, columns = GPUs x contexts x batches x formats "
                       "(max concurrency with a GPU, KV bytes without)", NULL},
    {"format", "F", "text (default), md, csv, json or html", NULL},
    {"si", NULL, "SI units (GB) instead of IEC (GiB)", NULL},
    {NULL, NULL, NULL, NULL},
};
static struct cli_opt opts[KVP_SETTINGS_MAX + 8];

static const struct cli_cmd cmd = {
    "table", "MODEL... [--gpu NAME[,NAME...] [options]] [--combined]",
    "A sizing table per model: KV-cache bytes for every context, batch and cache format.\n"
    "Without a GPU: the ideal engine, whole model, recurrent state included. With --gpu (and\n"
    "any of `kvplan fit`'s deployment options, the same defaults: vLLM's default release) each\n"
    "cell is what `kvplan fit` gives: the KV per GPU the requests need, the max concurrency,\n"
    "and '*' on cells that do not fit; several GPUs (--gpu h100,l40s) each get their tables.\n"
    "--combined: one table, models as rows (for a wiki page). CSV and JSON give exact bytes,\n"
    "one row per model x GPU x context x batch x format.",
    opts,
};

/* The text of an axis: --list (comma-separated), or the one value of the
 * deployment option --one (`kvplan fit`'s), or dflt; both given is an error. */
static int axis(const char *list, const char *one, const char *dflt, const char **out)
{
    const char *l = cli_opt(&cmd, list), *v = cli_opt(&cmd, one);
    if (l && v)
        return cli_usage_error("table: --%s and --%s are one axis (give one of them)", list, one);
    *out = l ? l : v ? v : dflt;
    return CLI_OK;
}

/* A count axis (contexts, batches), each at least 1. */
static int count_axis(const char *list, const char *one, const char *dflt, uint64_t *out, uint32_t *n)
{
    const char *v;
    struct kvp_error err = {0};
    int rc = axis(list, one, dflt, &v);
    if (rc != CLI_OK)
        return rc;
    if (kvp_parse_count_list(v, out, KVP_SIZING_MAX_AXIS, n, &err) != KVP_OK)
        return cli_usage_error("--%s: %s", list, err.msg);
    for (uint32_t i = 0; i < *n; i++)
        if (out[i] == 0)
            return cli_usage_error("--%s: counts must be at least 1 (got '%s')", list, v);
    return CLI_OK;
}

/* Columns when none are given: the ideal engine takes every format; a
 * deployment the engine's default for the first model (as `kvplan fit`), and
 * its 8-bit cache (fp8; llama.cpp's is q8_0). */
static int default_formats(const struct kvp_settings *st, const struct kvp_model *m, struct kvp_format *f,
                           uint32_t *n)
{
    struct kvp_deploy d;
    const struct kvp_gpu *gpu;
    struct kvp_error err = {0};
    int rc;
    if (!st)
        return kvp_parse_format_list("bf16,fp8,q4_0", f, KVP_SIZING_MAX_AXIS, n, &err) == KVP_OK ? CLI_OK
                                                                                               : cli_error(&err);
    if ((rc = cli_deploy_apply(st, m, &d, &gpu)) != CLI_OK)
        return rc;
    f[0] = d.k;
    f[1] = kvp_format_plain(d.engine == KVP_ENGINE_LLAMACPP ? KVP_DTYPE_Q8_0 : KVP_DTYPE_FP8_E4M3);
    *n = memcmp(&f[0], &f[1], sizeof f[0]) == 0 ? 1 : 2;
    return CLI_OK;
}

/* --gpu h100,l40s: the GPU axis (one GPU: no axis, as `kvplan fit` takes it). */
static int gpu_axis(char (*list)[KVP_SETTING_VALUE_MAX], uint32_t *n)
{
    const char *v = cli_opt(&cmd, "gpu");
    *n = 0;
    return v && strchr(v, ',') ? cli_split("gpu", v, list, KVP_SIZING_MAX_GPUS, n) : CLI_OK;
}

int cmd_table(int argc, char **argv)
{
    static const char *const axes[] = {"context", "concurrency", "kv_dtype", NULL};
    const char *pos[MAX_MODELS];
    char gpu_list[KVP_SIZING_MAX_GPUS][KVP_SETTING_VALUE_MAX];
    const char *gpu_ids[KVP_SIZING_MAX_GPUS];
    struct kvp_model *models[MAX_MODELS] = {0};
    uint64_t ctx[KVP_SIZING_MAX_AXIS], batch[KVP_SIZING_MAX_AXIS];
    struct kvp_format fmts[KVP_SIZING_MAX_AXIS];
    struct kvp_sizing s = {0};
    struct kvp_settings st;
    struct kvp_error err = {0};
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    const char *f, *kd;
    bool deployed;
    int npos, rc;

    if (!opts[0].name)
        cli_deploy_opts(opts, sizeof opts / sizeof opts[0], table_opts);
    if ((rc = cli_parse(&cmd, argc, argv, pos, MAX_MODELS, &npos)) != CLI_OK)
        return rc;
    if (npos < 1)
        return cli_usage_error("table: which models? (usage: kvplan table MODEL... [options])");
    if ((f = cli_opt(&cmd, "format")) && !kvp_table_out_from_name(f, &fmt))
        return cli_usage_error("--format must be text, md, csv, json or html (got '%s')", f);
    if (cli_opt(&cmd, "k-dtype") || cli_opt(&cmd, "v-dtype"))
        return cli_usage_error("table: a column holds K and V in one format (--kv-dtypes LIST)");
    if ((rc = count_axis("contexts", "context", "1k,4k,32k,128k", ctx, &s.n_contexts)) != CLI_OK ||
        (rc = count_axis("batches", "concurrency", "1", batch, &s.n_batches)) != CLI_OK ||
        (rc = axis("kv-dtypes", "kv-dtype", NULL, &kd)) != CLI_OK)
        return rc;
    if ((rc = gpu_axis(gpu_list, &s.n_gpu_ids)) != CLI_OK ||
        (rc = cli_deploy_front(&cmd, axes, &st, &deployed)) != CLI_OK)
        return rc;
    for (int i = 0; i < npos; i++) /* each model's deployment checked here, so errors name the option */
        for (uint32_t g = 0; g < (s.n_gpu_ids ? s.n_gpu_ids : 1); g++) {
            struct kvp_deploy d;
            const struct kvp_gpu *gpu;
            if (s.n_gpu_ids)
                snprintf(st.value[kvp_setting_find("gpu")], KVP_SETTING_VALUE_MAX, "%s", gpu_list[g]);
            if ((!models[i] && (rc = cli_model(pos[i], &models[i])) != CLI_OK) ||
                (deployed && (rc = cli_deploy_apply(&st, models[i], &d, &gpu)) != CLI_OK))
                goto out;
        }
    if (kd && kvp_parse_format_list(kd, fmts, KVP_SIZING_MAX_AXIS, &s.n_formats, &err) != KVP_OK) {
        rc = cli_usage_error("--kv-dtypes: %s", err.msg);
        goto out;
    }
    if (!kd && (rc = default_formats(deployed ? &st : NULL, models[0], fmts, &s.n_formats)) != CLI_OK)
        goto out;
    if (deployed) {
        s.deploy = &st;
        int gpu_row = kvp_setting_find("gpu"); /* s.gpus serves only this row (kvp_settings_apply) */
        if (s.n_gpu_ids ? (rc = cli_gpus(&s.gpus)) != CLI_OK /* the axis: the whole catalog */
                        : st.given >> gpu_row & 1u && (rc = cli_gpus_for(st.value[gpu_row], &s.gpus)) != CLI_OK)
            goto out;
    }
    s.models = (const struct kvp_model *const *)models;
    s.n_models = (uint32_t)npos;
    s.contexts = ctx;
    s.batches = batch;
    s.formats = fmts;
    s.si = cli_opt(&cmd, "si") != NULL;
    s.combined = cli_opt(&cmd, "combined") != NULL;
    for (uint32_t g = 0; g < s.n_gpu_ids; g++)
        gpu_ids[g] = gpu_list[g];
    s.gpu_ids = gpu_ids;
    if (kvp_sizing_render(&s, fmt, &b, &err) != KVP_OK)
        rc = cli_error(&err);
    else
        rc = cli_write(&b);
out:
    kvp_buf_release(&b);
    for (int i = 0; i < npos; i++)
        kvp_model_free(models[i]);
    return rc;
}
