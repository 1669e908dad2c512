/* cmd_export_gguf.c -- `kvplan export-gguf MODEL FILE`: the model's shape as a GGUF llama.cpp loads. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvplan/gguf.h"
#include "kvplan/num.h"
#include "kvplan/ref.h"

static struct cli_opt opts[] = {
    {"sparse", NULL, "no weights: header, then a hole to the full length (llama.cpp plans with no_alloc)", NULL},
    {"arch", "A", "llama, gemma3 or deepseek2 (default: from the layer kinds)", NULL},
    {"seed", "N", "seed of the random weights U(-0.1, 0.1) (default 0)", NULL},
    {"dense-moe", NULL, "write MoE layers as dense MLPs of 'intermediate' (the KV cache is the same)", NULL},
    {"max-size", "SIZE", "largest file with random weights (default 4GiB)", NULL},
    {"ref-weights", NULL, "the reference decoder's weights for --seed (arch llama): llama.cpp runs the same model",
     NULL},
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

/* The reference decoder's weights, built at the first tensor the writer asks
 * for: after its size check, so a model too large is refused before its
 * weights are allocated. */
struct ref_src {
    const struct kvp_model *m;
    struct kvp_ref_opts o;
    struct kvp_ref_weights *w;
    enum kvp_status st;
    struct kvp_error err; /* why the weights could not be built */
};

/* kvp_gguf_options.weights: the decoder's tensor of that name, if its size is n. */
static const float *ref_tensor(void *ctx, const char *name, uint64_t n)
{
    struct ref_src *r = ctx;
    uint64_t ne[2];
    const float *p;
    if (!r->w && r->st == KVP_OK)
        r->st = kvp_ref_weights_new(r->m, &r->o, &r->w, &r->err);
    if (!r->w)
        return NULL;
    p = kvp_ref_weights_get(r->w, name, ne);
    return p && ne[0] * ne[1] == n ? p : NULL;
}

int cmd_export_gguf(int argc, char **argv)
{
    const char *pos[2];
    int npos, rc;
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_gguf_options o;
    struct kvp_buf b = {0};
    struct ref_src rs;
    char size[32], grouped[32];

    memset(&o, 0, sizeof o);
    memset(&rs, 0, sizeof rs);
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
    if (cli_opt(&cmd, "ref-weights")) {
        if (o.sparse) {
            kvp_model_free(m);
            return cli_usage_error("--ref-weights writes weights; it cannot be --sparse");
        }
        rs.m = m;
        rs.o.seed = o.seed;
        o.weights = ref_tensor;
        o.weights_ctx = &rs;
        o.rms_eps = KVP_REF_RMS_EPS;
        o.rope_base = KVP_REF_ROPE_BASE;
        o.untied = true; /* the decoder has its own lm_head */
    }
    if (kvp_gguf_write(m, pos[1], &o, &err) != KVP_OK) {
        kvp_ref_weights_free(rs.w);
        kvp_model_free(m);
        return cli_error(rs.st != KVP_OK ? &rs.err : &err);
    }
    kvp_ref_weights_free(rs.w);
    kvp_buf_printf(&b, "wrote %s: %s as arch %s, %llu tensors, %s (%s B)%s\n", pos[1], m->name, o.arch_out,
                   (unsigned long long)o.n_tensors, kvp_bytes_text(o.file_bytes, false, size, sizeof size),
                   kvp_count_text(o.file_bytes, grouped, sizeof grouped),
                   o.sparse    ? ", sparse"
                   : o.weights ? ", the reference decoder's f32 weights"
                               : ", random f32 weights");
    rc = cli_write(&b);
    kvp_buf_release(&b);
    kvp_model_free(m);
    return rc;
}
