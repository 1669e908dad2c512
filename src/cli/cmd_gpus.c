/* cmd_gpus.c -- `kvplan gpus`: the GPU catalog. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvplan/num.h"

static struct cli_opt opts[] = {
    {"format", "F", "text (default), json, csv or md", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "gpus", "[options]",
    "The GPU catalog (models/gpus.yaml). Memory is the total the device reports (an \"80 GB\"\n"
    "H100 reports 79.19 GiB); TFLOP/s are peak dense tensor figures. A GPU is named by id,\n"
    "alias or a unique prefix, ignoring case.",
    opts,
};

static void json_gpu(struct kvp_json *j, const struct kvp_gpu *g)
{
    kvp_json_begin(j, NULL, '{');
    kvp_json_str(j, "id", g->id);
    kvp_json_begin(j, "aliases", '[');
    for (uint32_t a = 0; a < g->n_aliases; a++)
        kvp_json_str(j, NULL, g->aliases[a]);
    kvp_json_end(j, ']');
    kvp_json_str(j, "name", g->name);
    kvp_json_u64(j, "memory_bytes", g->memory_bytes);
    kvp_json_u64(j, "bandwidth_bytes_per_s", g->bandwidth_bytes_per_s);
    kvp_json_double(j, "bf16_tflops", g->bf16_flops / 1e12);
    kvp_json_double(j, "fp8_tflops", g->fp8_flops / 1e12);
    kvp_json_u64(j, "host_link_bytes_per_s", g->host_link_bytes_per_s);
    kvp_json_bool(j, "unified_memory", g->unified_memory);
    kvp_json_str(j, "memory_source", g->memory_source);
    kvp_json_str(j, "source", g->source);
    kvp_json_end(j, '}');
}

int cmd_gpus(int argc, char **argv)
{
    static const char *const head[] = {"id",          "aliases",     "name",        "memory",        "memory B",
                                       "bandwidth GB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "host link GB/s"};
    static const bool right[] = {false, false, false, true, true, true, true, true, true};
    const char *pos[1];
    int npos, rc;
    const struct kvp_gpu_catalog *gc;
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    struct kvp_table t;
    struct kvp_json j;

    if ((rc = cli_parse(&cmd, argc, argv, pos, 0, &npos)) != CLI_OK || (rc = cli_out(&cmd, &fmt, true)) != CLI_OK ||
        (rc = cli_gpus(&gc)) != CLI_OK)
        return rc;
    kvp_table_init(&t, 9, head, right);
    kvp_json_init(&j, &b);
    if (fmt == KVP_OUT_JSON)
        kvp_json_begin(&j, NULL, '[');
    for (uint32_t i = 0; i < gc->n; i++) {
        const struct kvp_gpu *g = &gc->gpus[i];
        char aliases[KVP_GPU_ALIASES_MAX * (KVP_GPU_ID_MAX + 1) + 1] = "";
        char c[6][40];
        if (fmt == KVP_OUT_JSON) {
            json_gpu(&j, g);
            continue;
        }
        for (uint32_t a = 0; a < g->n_aliases; a++)
            snprintf(aliases + strlen(aliases), sizeof aliases - strlen(aliases), "%s%s", a ? " " : "",
                     g->aliases[a]);
        kvp_bytes_text(g->memory_bytes, false, c[0], sizeof c[0]);
        if (fmt == KVP_OUT_CSV)
            snprintf(c[1], sizeof c[1], "%llu", (unsigned long long)g->memory_bytes);
        else
            kvp_count_text(g->memory_bytes, c[1], sizeof c[1]);
        snprintf(c[2], sizeof c[2], "%llu", (unsigned long long)(g->bandwidth_bytes_per_s / 1000000000u));
        snprintf(c[3], sizeof c[3], "%.6g", g->bf16_flops / 1e12);
        snprintf(c[4], sizeof c[4], "%.6g", g->fp8_flops / 1e12);
        /* one direction of its PCIe link, or unified memory (docs/gpus.md host_link) */
        if (g->host_link_bytes_per_s)
            snprintf(c[5], sizeof c[5], "%.1f", g->host_link_bytes_per_s / 1e9);
        else
            snprintf(c[5], sizeof c[5], "%s", g->unified_memory ? "unified" : "-");
        const char *row[] = {g->id, aliases[0] ? aliases : "-", g->name, c[0], c[1], c[2], c[3], c[4], c[5]};
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
