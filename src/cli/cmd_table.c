/* cmd_table.c -- `kvplan table MODEL...`: KV bytes over contexts x batches x
 * cache formats and, with --gpu, what fits. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvplan/deploy.h"
#include "kvplan/table.h"

#define MAX_MODELS 64

static struct cli_opt opts[] = {
    {"contexts", "LIST", "tokens per sequence, comma-separated (default 1k,4k,32k,128k)", NULL},
    {"batches", "LIST", "sequences, comma-separated (default 1)", NULL},
    {"kv-dtypes", "LIST", "cache formats for K and V, comma-separated (default bf16,fp8,q4_0; with --engine bf16,fp8)", NULL},
    {"gpu", "NAME", "GPU type from the catalog (kvplan gpus): adds max concurrency and marks what does not fit", NULL},
    {"gpus", "N", "GPUs in all (default: tp)", NULL},
    {"tp", "N", "tensor parallel degree (default 1)", NULL},
    {"engine", "E", "size with an engine's rules (needs --gpu): vllm, sglang, trtllm, llamacpp, hf-dynamic, "
                    "hf-static, hf-quantized, ideal; bytes are then per GPU", NULL},
    {"format", "F", "text (default), md, csv, json or html", NULL},
    {"si", NULL, "SI units (GB) instead of IEC (GiB)", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "table", "MODEL... [options]",
    "A sizing table per model: KV-cache bytes (ideal engine, whole model; recurrent state\n"
    "included) for every context, batch and cache format. With --gpu, also the most\n"
    "sequences of each context that fit beside the weights, and '*' on cells that do not fit.\n"
    "CSV and JSON give exact bytes, one row per model x context x batch x format.",
    opts,
};

static int list_opt(const char *name, const char *dflt, uint64_t *out, uint32_t *n)
{
    const char *v = cli_opt(&cmd, name);
    struct kvp_error err = {0};
    if (kvp_parse_count_list(v ? v : dflt, out, KVP_SIZING_MAX_AXIS, n, &err) != KVP_OK)
        return cli_usage_error("--%s: %s", name, err.msg);
    for (uint32_t i = 0; i < *n; i++)
        if (out[i] == 0)
            return cli_usage_error("--%s: counts must be at least 1 (got '%s')", name, v);
    return CLI_OK;
}

static int u32_opt(const char *name, uint32_t *out)
{
    uint64_t v = *out;
    int rc = cli_count(&cmd, name, 1, &v);
    if (rc == CLI_OK && v > 4096)
        return cli_usage_error("--%s is too large (got %llu, at most 4096)", name, (unsigned long long)v);
    *out = (uint32_t)v;
    return rc;
}

static int deployment(struct kvp_sizing *s)
{
    const char *g = cli_opt(&cmd, "gpu"), *e = cli_opt(&cmd, "engine");
    const struct kvp_gpu_catalog *gc;
    const struct kvp_gpu *gpu;
    struct kvp_error err = {0};
    int rc;

    s->engine = KVP_ENGINE_IDEAL;
    if (e && !kvp_engine_from_name(e, &s->engine))
        return cli_usage_error("--engine: unknown engine '%s' (vllm, sglang, trtllm, llamacpp, hf-dynamic, "
                               "hf-static, hf-quantized, ideal)", e);
    if (!g) {
        if (e || cli_opt(&cmd, "tp") || cli_opt(&cmd, "gpus"))
            return cli_usage_error("table: --engine, --tp and --gpus need --gpu NAME");
        return CLI_OK;
    }
    if ((rc = cli_gpus(&gc)) != CLI_OK)
        return rc;
    if (kvp_gpu_find(gc, g, &gpu, &err) != KVP_OK)
        return cli_usage_error("--gpu: %s", err.msg);
    s->gpu_memory = gpu->memory_bytes;
    s->gpu_name = gpu->id;
    s->tp = 1;
    if ((rc = u32_opt("tp", &s->tp)) != CLI_OK)
        return rc;
    s->n_gpus = s->tp;
    if ((rc = u32_opt("gpus", &s->n_gpus)) != CLI_OK)
        return rc;
    s->use_engine = e != NULL;
    return CLI_OK;
}

int cmd_table(int argc, char **argv)
{
    const char *pos[MAX_MODELS];
    struct kvp_model *models[MAX_MODELS] = {0};
    uint64_t ctx[KVP_SIZING_MAX_AXIS], batch[KVP_SIZING_MAX_AXIS];
    struct kvp_format fmts[KVP_SIZING_MAX_AXIS];
    struct kvp_sizing s = {0};
    struct kvp_error err = {0};
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    const char *f, *kd;
    int npos, rc;

    if ((rc = cli_parse(&cmd, argc, argv, pos, MAX_MODELS, &npos)) != CLI_OK)
        return rc;
    if (npos < 1)
        return cli_usage_error("table: which models? (usage: kvplan table MODEL... [options])");
    if ((f = cli_opt(&cmd, "format")) && !kvp_table_out_from_name(f, &fmt))
        return cli_usage_error("--format must be text, md, csv, json or html (got '%s')", f);
    if ((rc = list_opt("contexts", "1k,4k,32k,128k", ctx, &s.n_contexts)) ||
        (rc = list_opt("batches", "1", batch, &s.n_batches)))
        return rc;
    kd = cli_opt(&cmd, "kv-dtypes");
    /* serving engines take no llama.cpp block types: default to what they all store */
    if (!kd)
        kd = cli_opt(&cmd, "engine") ? "bf16,fp8" : "bf16,fp8,q4_0";
    if (kvp_parse_format_list(kd, fmts, KVP_SIZING_MAX_AXIS, &s.n_formats, &err) != KVP_OK)
        return cli_usage_error("--kv-dtypes: %s", err.msg);
    if ((rc = deployment(&s)) != CLI_OK)
        return rc;
    for (int i = 0; i < npos; i++)
        if ((rc = cli_model(pos[i], &models[i])) != CLI_OK)
            goto out;
    s.models = (const struct kvp_model *const *)models;
    s.n_models = (uint32_t)npos;
    s.contexts = ctx;
    s.batches = batch;
    s.formats = fmts;
    s.si = cli_opt(&cmd, "si") != NULL;
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
