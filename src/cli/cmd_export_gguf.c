/* cmd_export_gguf.c -- `kvplan export-gguf MODEL FILE`: the model's shape as a GGUF llama.cpp loads. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvplan/gguf.h"
#include "kvplan/num.h"

static struct cli_opt opts[] = {
    {"sparse", NULL, "no weights: header, then a hole to the full length (llama.cpp plans with no_alloc)", NULL},
    {"arch", "A", "llama, gemma3 or deepseek2 (default: from the layer kinds)", NULL},
    {"seed", "N", "seed of the random weights U(-0.1, 0.1) (default 0)", NULL},
    {"dense-moe", NULL, "write MoE layers as dense MLPs of 'intermediate' (the KV cache is the same)", NULL},
    {"max-size", "SIZE", "largest file with random weights (default 4GiB)", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "export-gguf", "MODEL FILE [options]",
    "Write MODEL's shape as a GGUF v3 file: layers, heads, head dims, windows, MLA ranks,\n"
    "vocab and MLP width under a llama.cpp architecture, with seeded random f32 weights, or\n"
    "sparse (f16 shapes, no data) for real-size models. llama.cpp loads it with\n"
    "tokenizer 'none'; tests/oracle uses it to check kvplan's llamacpp profile. The file is\n"
    "written to a temporary name and renamed, so a failure leaves no partial file.",
    opts,
};

int cmd_export_gguf(int argc, char **argv)
{
    const char *pos[2];
    int npos, rc;
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_gguf_options o;
    struct kvp_buf b = {0};
    char size[32], grouped[32];

    memset(&o, 0, sizeof o);
    if ((rc = cli_parse(&cmd, argc, argv, pos, 2, &npos)) != CLI_OK)
        return rc;
    if (npos != 2)
        return cli_usage_error("export-gguf: which model and file? (usage: kvplan export-gguf MODEL FILE)");
    o.sparse = cli_opt(&cmd, "sparse") != NULL;
    o.dense_moe = cli_opt(&cmd, "dense-moe") != NULL;
    o.arch = cli_opt(&cmd, "arch");
    if (cli_opt(&cmd, "seed") && !kvp_parse_u64(cli_opt(&cmd, "seed"), &o.seed))
        return cli_usage_error("--seed must be an unsigned integer (got '%s')", cli_opt(&cmd, "seed"));
    if ((rc = cli_bytes(&cmd, "max-size", &o.max_dense_bytes)) != CLI_OK)
        return rc;
    if ((rc = cli_model(pos[0], &m)) != CLI_OK)
        return rc;
    if (kvp_gguf_write(m, pos[1], &o, &err) != KVP_OK) {
        kvp_model_free(m);
        return cli_error(&err);
    }
    kvp_buf_printf(&b, "wrote %s: %s as arch %s, %llu tensors, %s (%s B)%s\n", pos[1], m->name, o.arch_out,
                   (unsigned long long)o.n_tensors, kvp_format_bytes(o.file_bytes, false, size, sizeof size),
                   kvp_format_grouped(o.file_bytes, grouped, sizeof grouped),
                   o.sparse ? ", sparse" : ", random f32 weights");
    rc = cli_write(&b);
    kvp_buf_release(&b);
    kvp_model_free(m);
    return rc;
}
