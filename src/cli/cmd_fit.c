/* cmd_fit.c -- `kvplan fit MODEL --gpu G`: what an engine allocates and what fits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvplan/deploy.h"
#include "kvplan/emit.h"
#include "kvplan/explain.h"
#include "kvplan/gpu.h"
#include "kvplan/io.h"
#include "kvplan/num.h"

/* the deployment options (settings.h) come first, then these */
static const struct cli_opt fit_opts[] = {
    {"engine-args", "FILE",
     "the engine's own flags from a YAML file, as vLLM's and SGLang's --config read it "
     "(--engine picks which; the file's model unless MODEL is given)",
     NULL},
    {"max-gpus", "N", "largest GPU count the inverse search tries (default 64)", NULL},
    {"explain", NULL, "print the engine's formula for each figure with the values", NULL},
    {"emit", NULL, "print the engine's launch command for this deployment instead (every flag that sizes memory set)",
     NULL},
    {"format", "F", "text (default), json or md", NULL},
    {"si", NULL, "SI units (GB) instead of IEC (GiB)", NULL},
    {NULL, NULL, NULL, NULL},
};
static struct cli_opt opts[KVP_SETTINGS_MAX + 8];

static const struct cli_cmd cmd = {
    "fit", "MODEL --gpu NAME [options]  |  --gpu NAME [options] -- ENGINE COMMAND",
    "How an engine sizes the KV cache on these GPUs, from the same inputs it uses: the budget,\n"
    "tokens, blocks, the concurrency at --context, the longest context at --concurrency, and\n"
    "the fewest GPUs or lowest memory fraction that reach the target. Figures are per GPU.\n"
    "The start-up reserve (activations, non-torch memory) is estimated when not given.\n"
    "Exit 1 when --concurrency requests of --context tokens do not fit or the engine would not\n"
    "start; exit 2 for settings the engine rejects as invalid.",
    opts,
};

/* llama.cpp's --fit defaults (common/common.h: fit_params_target 1024 MiB per device, fit_params_min_ctx 4096) */
#define LLAMACPP_FIT_TARGET (1024ull << 20)
#define LLAMACPP_FIT_CTX 4096u

struct fitted {
    struct kvp_model *m;
    const struct kvp_gpu *gpu;
    struct kvp_deploy d;
    struct kvp_fit f;
    uint32_t min_tp, min_dp;
    double min_util;
    struct kvp_fit_limits lim; /* the longest context, most -ngl, fewest --n-cpu-moe (have_lim) */
    bool have_lim;
    struct kvp_params_fit auto_fit; /* llama.cpp's own --fit (step NONE: not modelled) */
    bool ctx_given;                 /* --context (llama.cpp -c): --fit keeps it */
    bool have_roofline;
    struct kvp_roofline r;
};

/* The deployment: kvplan's options over the engine command's settings
 * (engine argv after `--`, argc 0 when none), then the model. */
static int setup(struct fitted *x, const char *model, char **engine_argv, int engine_argc)
{
    struct kvp_settings st, from;
    struct kvp_buf ignored = {0};
    struct kvp_error err = {0};
    char named[KVP_TEXT_MAX];
    int rc;

    static const char *const no_axes[] = {NULL};
    bool given;

    if ((rc = cli_deploy_settings(&cmd, &st)) != CLI_OK)
        return rc;
    if (engine_argc) {
        const char *const *eargv = (const char *const *)engine_argv,
                          *conf = kvp_command_config_path(eargv, engine_argc);
        char *text = NULL;
        uint64_t len = 0;
        enum kvp_status ok = conf ? kvp_read_input(conf, KVP_COMMAND_CONFIG_MAX, &text, &len, &err) : KVP_OK;
        if (ok == KVP_OK)
            ok = kvp_settings_from_command(eargv, engine_argc, text, len, &from, named, sizeof named, &ignored, &err);
        free(text);
        if (ok != KVP_OK) {
            kvp_buf_release(&ignored);
            if (err.file[0]) /* in a --config file: its place */
                return cli_error(&err);
            return cli_usage_error("fit -- %s: %s", engine_argv[0], err.msg);
        }
        if (ignored.len)
            fprintf(stderr, "kvplan: warning: ignored, they do not size memory: %s\n", ignored.data);
        kvp_buf_release(&ignored);
        kvp_settings_overlay(&from, &st); /* kvplan's own options win: --gpu, what the command cannot say */
        st = from;
        if (!model && !named[0]) /* `ollama serve` names none */
            return cli_usage_error("fit -- %s: the command names no model: give it before '--' (kvplan fit MODEL "
                                   "-- ...)", engine_argv[0]);
        model = model ? model : named;
    }
    if ((rc = cli_deploy_need_gpu(cmd.name, no_axes, &st, &given)) != CLI_OK)
        return rc;
    x->ctx_given = (st.given >> kvp_setting_find("context")) & 1u;
    if (!given) /* given without a GPU or a memory cli_deploy_need_gpu refused */
        return cli_usage_error("fit: which GPU? (--gpu NAME from 'kvplan gpus', or --gpu-memory SIZE)");
    if ((rc = cli_model(model, &x->m)) != CLI_OK)
        return rc;
    return cli_deploy_apply(&st, x->m, &x->d, &x->gpu);
}

static int compute(struct fitted *x)
{
    struct kvp_error err = {0};
    uint64_t max_gpus = 64;
    int rc;

    if ((rc = cli_count(&cmd, "max-gpus", 1, &max_gpus)) != CLI_OK)
        return rc;
    if (kvp_fit_compute(x->m, &x->d, &x->f, &err) != KVP_OK)
        return cli_error(&err);
    if (x->d.engine != KVP_ENGINE_LLAMACPP && !x->d.kv_memory) {
        if (kvp_fit_min_gpus(x->m, &x->d, max_gpus > 4096 ? 4096 : (uint32_t)max_gpus, &x->min_tp, &x->min_dp,
                             &err) != KVP_OK ||
            kvp_fit_min_util(x->m, &x->d, &x->min_util, &err) != KVP_OK)
            return cli_error(&err);
    }
    if (x->d.gpu_memory || x->d.kv_memory) {
        if (kvp_fit_limits(x->m, &x->d, &x->lim, &err) != KVP_OK)
            return cli_error(&err);
        x->have_lim = true;
    }
    if (kvp_fit_llamacpp_auto(x->m, &x->d, LLAMACPP_FIT_TARGET, LLAMACPP_FIT_CTX, x->ctx_given ? x->d.context : 0,
                              &x->auto_fit, &err) != KVP_OK)
        return cli_error(&err);
    if (x->gpu) {
        double peak = kvp_gpu_peak_flops(x->gpu, kvp_wstore_code_dtype(&x->d.w, x->m));
        uint64_t batch = x->d.concurrency ? x->d.concurrency : 1;
        if (kvp_roofline(x->m, &x->d, batch, (double)x->gpu->bandwidth_bytes_per_s, peak, &x->r, &err) != KVP_OK)
            return cli_error(&err);
        x->have_roofline = true;
    }
    return CLI_OK;
}

/* The headroom (left, or short) is smaller than the estimate's interval: it may
 * not start, or it may start after all (reserve.uncertainty, fit on the logs). */
static bool within_interval(const struct kvp_fit *f)
{
    return f->reserve.uncertainty > (f->fits ? f->free_bytes : f->short_bytes);
}

static void json_log(struct kvp_json *j, const struct fitted *x)
{
    struct kvp_buf log = {0};
    if (!x->f.refused[0])
        kvp_fit_log(x->m, &x->d, &x->f, &log);
    kvp_json_begin(j, "log", '[');
    for (char *line = log.data, *nl; line && *line; line = nl + 1) {
        if (!(nl = strchr(line, '\n')))
            break;
        *nl = '\0';
        kvp_json_str(j, NULL, line);
    }
    kvp_json_end(j, ']');
    kvp_buf_release(&log);
}

/* weight_dtype auto: the rungs that do not fit (kvp_deploy_pick_weights), ", "-separated; *all: every rung */
static const char *auto_rejected(const struct fitted *x, char *buf, size_t n, bool *all)
{
    struct kvp_wstore rung[KVP_WLADDER_MAX];
    struct kvp_error err = {0};
    uint32_t count = 0;
    size_t len = 0;

    buf[0] = '\0';
    *all = false;
    if (kvp_weights_ladder(x->m, &x->d, rung, &count, &err) != KVP_OK) /* it succeeded in the pick */
        return buf;
    *all = x->d.w_auto_rejected >= count;
    for (uint32_t i = 0; i < x->d.w_auto_rejected && i < count && len + 2 < n; i++) {
        char w[64];
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "", kvp_wstore_name(&rung[i], w, sizeof w));
    }
    return buf;
}

/* One llama.cpp device's (or the host's) KV and model buffers. */
static void json_device(struct kvp_json *j, const struct kvp_device_kv *dk)
{
    kvp_json_u64(j, "layers", dk->layers);
    kvp_json_u64(j, "model_layers", dk->model_layers);
    kvp_json_u64(j, "weights_bytes", dk->weights_bytes);
    kvp_json_u64(j, "k_bytes", dk->k_bytes);
    kvp_json_u64(j, "v_bytes", dk->v_bytes);
    kvp_json_u64(j, "buffer_bytes", dk->buffer_bytes);
    kvp_json_u64(j, "recurrent_bytes", dk->rs_bytes);
}

static void json_count_or_null(struct kvp_json *j, const char *key, int64_t v)
{
    if (v >= 0)
        kvp_json_u64(j, key, (uint64_t)v);
    else
        kvp_json_null(j, key);
}

/* kvp_fit_limits: the longest context the memory holds, which limit binds, the offload answers */
static void json_limits(struct kvp_json *j, const struct kvp_fit_limits *l)
{
    kvp_json_begin(j, "limits", '{');
    kvp_json_u64(j, "memory_context", l->memory_context);
    kvp_json_u64(j, "model_context", l->model_context);
    kvp_json_str(j, "binds", l->model_binds ? "model" : "memory");
    if (l->model_binds)
        kvp_json_double(j, "rope_factor", l->rope_factor);
    else
        kvp_json_null(j, "rope_factor");
    json_count_or_null(j, "max_gpu_layers", l->max_gpu_layers);
    json_count_or_null(j, "host_bytes_at_max_gpu_layers", l->max_gpu_layers >= 0 ? (int64_t)l->host_at_max_gpu_layers
                                                                                 : -1);
    json_count_or_null(j, "min_cpu_moe", l->min_cpu_moe);
    json_count_or_null(j, "host_bytes_at_min_cpu_moe", l->min_cpu_moe >= 0 ? (int64_t)l->host_at_min_cpu_moe : -1);
    kvp_json_end(j, '}');
}

static void render_json(const struct fitted *x, struct kvp_buf *b)
{
    const struct kvp_deploy *d = &x->d;
    const struct kvp_fit *f = &x->f;
    struct kvp_json j;
    struct kvp_weights wt;
    struct kvp_error err = {0};
    char k[64], v[64], w[64];

    kvp_json_init(&j, b);
    kvp_json_begin(&j, NULL, '{');
    kvp_json_str(&j, "model", x->m->name);
    kvp_json_str(&j, "engine", kvp_engine_info(d->engine)->name);
    kvp_json_str(&j, "engine_version", f->release->version);
    kvp_json_str(&j, "gpu", x->gpu ? x->gpu->id : "");
    kvp_json_u64(&j, "gpus", d->n_gpus);
    kvp_json_u64(&j, "tp", d->tp);
    kvp_json_u64(&j, "pp", d->pp);
    kvp_json_u64(&j, "dp", d->dp);
    kvp_json_bool(&j, "dp_attention", d->dp_attention);
    kvp_json_bool(&j, "expert_parallel", d->expert_parallel);
    kvp_json_u64(&j, "ep", kvp_deploy_ep(d));
    kvp_json_u64(&j, "redundant_experts", d->redundant_experts);
    kvp_json_u64(&j, "experts_per_gpu", kvp_deploy_experts_per_gpu(x->m, d));
    kvp_json_u64(&j, "context", d->context);
    kvp_json_u64(&j, "concurrency", d->concurrency ? d->concurrency : 1);
    kvp_json_str(&j, "k_dtype", kvp_format_name(&d->k, k, sizeof k));
    kvp_json_str(&j, "v_dtype", kvp_format_name(&d->v, v, sizeof v));
    kvp_json_str(&j, "weight_dtype", kvp_wstore_name(&d->w, w, sizeof w));
    if (f->release->rules & KVP_REL_OLLAMA) {
        kvp_json_bool(&j, "ollama_context_auto", d->ollama_auto & KVP_OLLAMA_CONTEXT);
        kvp_json_bool(&j, "ollama_batch_auto", d->ollama_auto & KVP_OLLAMA_BATCH);
        kvp_json_bool(&j, "ollama_one_stream", d->ollama_auto & KVP_OLLAMA_PARALLEL);
        kvp_json_u64(&j, "n_batch", d->n_batch);
    }
    if (d->w_auto) {
        char tried[256];
        bool all;
        kvp_json_str(&j, "weight_dtype_auto_rejected", auto_rejected(x, tried, sizeof tried, &all));
    }
    if (kvp_weights_compute(x->m, &d->w, &wt, &err) == KVP_OK) /* it succeeded in the fit already */
        kvp_json_weights(&j, x->m, &wt);
    kvp_json_model_warnings(&j, x->m);
    kvp_json_double(&j, "util", f->util);
    kvp_json_u64(&j, "block_size", f->block_size);
    kvp_json_u64(&j, "gpu_memory_bytes", d->gpu_memory);
    kvp_json_u64(&j, "weights_bytes_per_gpu", f->weights_bytes);
    kvp_json_u64(&j, "weights_checkpoint_bytes_per_gpu", f->weights_bytes - f->weights_padding - f->lora_bytes);
    kvp_json_u64(&j, "weights_load_padding_bytes", f->weights_padding);
    kvp_json_u64(&j, "lora_bytes_per_gpu", f->lora_bytes);
    if (f->weights_load[0])
        kvp_json_str(&j, "weights_load", f->weights_load);
    else
        kvp_json_null(&j, "weights_load");
    kvp_json_u64(&j, "activation_bytes", f->reserve.activation);
    kvp_json_bool(&j, "activation_estimated", f->reserve.activation_est);
    kvp_json_u64(&j, "non_torch_bytes", f->reserve.non_torch);
    kvp_json_bool(&j, "non_torch_estimated", f->reserve.non_torch_est);
    kvp_json_u64(&j, "cuda_graph_bytes", f->reserve.cuda_graph);
    kvp_json_bool(&j, "cuda_graph_estimated", f->reserve.cuda_graph_est);
    kvp_json_u64(&j, "reserve_uncertainty_bytes", f->reserve.uncertainty);
    if (f->refused[0])
        kvp_json_str(&j, "refused", f->refused);
    else
        kvp_json_null(&j, "refused");
    kvp_json_u64(&j, "kv_bytes_per_token_per_gpu", f->kv_bytes_per_token_per_gpu);
    kvp_json_u64(&j, "request_bytes", f->request_bytes);
    kvp_json_u64(&j, "kv_bytes_required", f->kv_bytes_required);
    kvp_json_u64(&j, "kv_budget_bytes", f->kv_budget_bytes);
    kvp_json_u64(&j, "kv_pool_bytes", f->kv_pool_bytes);
    kvp_json_u64(&j, "kv_tokens", f->kv_tokens);
    kvp_json_u64(&j, "num_blocks", f->num_blocks);
    kvp_json_double(&j, "max_concurrency", f->max_concurrency);
    kvp_json_u64(&j, "total_kv_tokens", kvp_sat_mul(f->kv_tokens, d->dp)); /* every DP rank's pool */
    kvp_json_double(&j, "total_max_concurrency", f->max_concurrency * d->dp);
    kvp_json_u64(&j, "max_context", f->max_context);
    kvp_json_u64(&j, "offload_tokens", f->offload_tokens);
    kvp_json_double(&j, "offload_concurrency", f->offload_concurrency);
    kvp_json_bool(&j, "fits", f->fits);
    kvp_json_u64(&j, "free_bytes", f->free_bytes);
    kvp_json_u64(&j, "short_bytes", f->short_bytes);
    kvp_json_bool(&j, "within_interval", within_interval(f)); /* may not start, or may start */
    if (x->min_tp) {
        kvp_json_u64(&j, "min_tp", x->min_tp);
        kvp_json_u64(&j, "min_dp", x->min_dp);
    } else {
        kvp_json_null(&j, "min_tp");
        kvp_json_null(&j, "min_dp");
    }
    if (x->min_util > 0)
        kvp_json_double(&j, "min_util", x->min_util);
    else
        kvp_json_null(&j, "min_util");
    if (x->have_lim)
        json_limits(&j, &x->lim);
    if (x->auto_fit.step != KVP_PARAMS_FIT_NONE) {
        static const char *const step[] = {"", "unchanged", "context", "layers", "experts", "abort"};
        kvp_json_begin(&j, "llamacpp_fit", '{');
        kvp_json_str(&j, "step", step[x->auto_fit.step]);
        kvp_json_bool(&j, "ctx_given", x->auto_fit.ctx_given);
        kvp_json_u64(&j, "n_ctx", x->auto_fit.n_ctx);
        if (x->auto_fit.step == KVP_PARAMS_FIT_LAYERS || x->auto_fit.step == KVP_PARAMS_FIT_EXPERTS) {
            kvp_json_u64(&j, "n_gpu_layers", x->auto_fit.n_gpu_layers);
            kvp_json_u64(&j, "cpu_moe_first", x->auto_fit.cpu_moe_first);
            kvp_json_u64(&j, "projected_bytes", (uint64_t)(x->auto_fit.used > 0 ? x->auto_fit.used : 0));
        }
        kvp_json_end(&j, '}');
    }
    if (f->state_slots) { /* a Mamba/linear-attention hybrid's state pool (SGLang, vLLM V0) */
        kvp_json_u64(&j, "mamba_slots", f->state_slots);
        kvp_json_u64(&j, "mamba_bytes", kvp_sat_add(f->state_conv_bytes, f->state_ssm_bytes));
    }
    if (f->max_running)
        kvp_json_u64(&j, "max_running_requests", f->max_running);
    if (d->engine == KVP_ENGINE_LLAMACPP) {
        kvp_json_u64(&j, "cells", f->cells);
        kvp_json_u64(&j, "swa_cells", f->swa_cells);
        kvp_json_u64(&j, "streams", f->n_stream);
        kvp_json_u64(&j, "gpu_layers", f->gpu_layers);
        kvp_json_bool(&j, "output_on_gpu", f->output_on_gpu);
        kvp_json_bool(&j, "weights_exact", f->weights_exact);
        kvp_json_begin(&j, "devices", '[');
        for (uint32_t i = 0; i < f->n_devices; i++) {
            kvp_json_begin(&j, NULL, '{');
            json_device(&j, &f->device[i]);
            kvp_json_end(&j, '}');
        }
        kvp_json_end(&j, ']');
        kvp_json_begin(&j, "host", '{'); /* what stays in host memory */
        json_device(&j, &f->host);
        kvp_json_u64(&j, "compute_bytes", f->host_compute);
        kvp_json_end(&j, '}');
    }
    if (x->have_roofline) {
        kvp_json_begin(&j, "roofline", '{');
        kvp_json_u64(&j, "decode_weight_bytes", x->r.weight_bytes);
        kvp_json_u64(&j, "decode_kv_bytes", x->r.kv_bytes);
        kvp_json_double(&j, "tpot_s", x->r.tpot_s);
        kvp_json_double(&j, "tokens_per_s", x->r.tokens_per_s);
        kvp_json_u64(&j, "host_weight_bytes", x->r.host_weight_bytes);
        kvp_json_u64(&j, "host_kv_bytes", x->r.host_kv_bytes);
        kvp_json_u64(&j, "stream_bytes", x->r.stream_bytes);
        kvp_json_double(&j, "host_bandwidth", x->r.host_bandwidth);
        kvp_json_bool(&j, "host_bandwidth_assumed", x->r.host_bandwidth_assumed);
        kvp_json_bool(&j, "streamed", x->r.streamed);
        kvp_json_double(&j, "host_s", x->r.host_s);
        kvp_json_double(&j, "prefill_flops", x->r.prefill_flops);
        kvp_json_double(&j, "prefill_compute_s", x->r.prefill_compute_s);
        kvp_json_double(&j, "prefill_stream_s", x->r.prefill_stream_s);
        kvp_json_double(&j, "ttft_s", x->r.ttft_s);
        kvp_json_end(&j, '}');
    }
    json_log(&j, x);
    kvp_json_end(&j, '}');
}

static void row(struct kvp_table *t, const char *what, const char *value, const char *note)
{
    const char *r[] = {what, value, note};
    kvp_table_row(t, r);
}

static void bytes_row(struct kvp_table *t, const char *what, uint64_t v, bool si, const char *note)
{
    char h[32], e[48], n[160];
    snprintf(n, sizeof n, "%s B%s%s", kvp_count_text(v, e, sizeof e), note[0] ? "; " : "", note);
    row(t, what, kvp_bytes_text(v, si, h, sizeof h), n);
}

static void reserve_rows(struct kvp_table *t, const struct kvp_fit *f, bool si)
{
    const struct kvp_reserve *r = &f->reserve;
    char note[96];
    snprintf(note, sizeof note, "%s", r->activation_est ? "estimated (--explain shows how)" : "as given");
    bytes_row(t, f->engine == KVP_ENGINE_LLAMACPP ? "compute buffers" : "activations", r->activation, si,
              r->activation_est || r->activation ? note : "none");
    bytes_row(t, "non-torch", r->non_torch, si, r->non_torch_est ? "estimated: CUDA context, cuBLAS, NCCL"
                                                : r->non_torch ? "as given" : "none");
    if (r->cuda_graph)
        bytes_row(t, "CUDA graphs", r->cuda_graph, si,
                  r->cuda_graph_est ? "estimated (--explain shows how)" : "as given");
}

/* The max context row's note past "tokens, with N requests": which limit binds (kvp_fit_limits) and, past
 * the model's, the RoPE scaling it needs (llama.cpp's flags, common/arg.cpp: --rope-scaling, --rope-scale,
 * --yarn-orig-ctx; elsewhere the config's rope_scaling entry the engine reads). */
static void context_note(const struct fitted *x, char *note, size_t n)
{
    const struct kvp_fit_limits *l = &x->lim;
    size_t len = strlen(note);
    char a[32], c[32];
    kvp_count_text(l->model_context, a, sizeof a);
    kvp_count_text(l->memory_context, c, sizeof c);
    if (!l->model_binds)
        snprintf(note + len, n - len, "; the memory binds (the model's limit %s is higher)", a);
    else if (x->d.engine == KVP_ENGINE_LLAMACPP)
        snprintf(note + len, n - len, "; the memory's bound, the model's limit %s lower: past it RoPE scaling, YaRN "
                 "factor %.2f (--rope-scaling yarn --rope-scale %.2f --yarn-orig-ctx %llu)", a, l->rope_factor,
                 l->rope_factor, (unsigned long long)l->model_context);
    else
        snprintf(note + len, n - len, "; the model's limit binds: the memory holds %s, past %s with RoPE scaling, "
                 "YaRN factor %.2f (rope_scaling {rope_type: yarn, factor: %.2f, original_max_position_embeddings: "
                 "%llu})", c, a, l->rope_factor, l->rope_factor, (unsigned long long)l->model_context);
}

/* llama.cpp at --context: the most -ngl and the fewest --n-cpu-moe that fit, with the host memory of each. */
static void offload_line(const struct fitted *x, bool si, struct kvp_buf *b)
{
    const struct kvp_fit_limits *l = &x->lim;
    char h[32], c[32];
    kvp_buf_printf(b, "\nto fit %s tokens on the GPU: ", kvp_count_text(x->d.context, c, sizeof c));
    if (l->max_gpu_layers >= 0)
        kvp_buf_printf(b, "most -ngl %lld of %u (host memory %s)", (long long)l->max_gpu_layers, x->m->n_layers + 1,
                       kvp_bytes_text(l->host_at_max_gpu_layers, si, h, sizeof h));
    else
        kvp_buf_printf(b, "no -ngl fits");
    if (x->m->n_experts && l->min_cpu_moe >= 0)
        kvp_buf_printf(b, "; fewest --n-cpu-moe %lld with every layer on the GPU (host memory %s)",
                       (long long)l->min_cpu_moe, kvp_bytes_text(l->host_at_min_cpu_moe, si, h, sizeof h));
    else if (x->m->n_experts)
        kvp_buf_printf(b, "; no --n-cpu-moe fits with every layer on the GPU");
    kvp_buf_printf(b, "\n");
}

/* --fit's steps 3 and 4: the layers and experts it keeps on the GPU. */
static void fit_layers_line(const struct fitted *x, struct kvp_buf *b)
{
    const struct kvp_params_fit *p = &x->auto_fit;
    uint32_t L = x->m->n_layers;
    char u[32];
    kvp_buf_printf(b, "step %d sets -ngl %u of %u", p->step == KVP_PARAMS_FIT_EXPERTS ? 4 : 3, p->n_gpu_layers, L + 1);
    if (p->cpu_moe_first < L)
        kvp_buf_printf(b, " with the experts of layers %u-%u in host memory (its overrides: "
                       "blk\\.N\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU for N = %u..%u)",
                       p->cpu_moe_first, L - 1, p->cpu_moe_first, L - 1);
    kvp_buf_printf(b, ", projected %s of device memory", kvp_bytes_text((uint64_t)(p->used > 0 ? p->used : 0), false,
                                                                       u, sizeof u));
    if (p->step == KVP_PARAMS_FIT_EXPERTS)
        kvp_buf_printf(b, "; it then tries part of one more layer's experts on the GPU (not reproduced)");
    kvp_buf_printf(b, "\n");
}

/* What llama.cpp's own --fit (on by default) does (kvp_fit_llamacpp_auto): with -c unset it picks the
 * context first; with -c given it keeps it; then layers and experts. */
static void auto_fit_line(const struct fitted *x, struct kvp_buf *b)
{
    const struct kvp_params_fit *p = &x->auto_fit;
    char c[32], t[32];
    kvp_count_text(p->n_ctx, c, sizeof c);
    kvp_count_text(x->m->max_context, t, sizeof t);
    kvp_buf_printf(b, "llama.cpp's --fit (on by default) with -c %s: ", p->ctx_given ? c : "unset");
    if (p->step == KVP_PARAMS_FIT_UNCHANGED && p->ctx_given)
        kvp_buf_printf(b, "it leaves its 1 GiB target free, so nothing changes\n");
    else if (p->step == KVP_PARAMS_FIT_UNCHANGED)
        kvp_buf_printf(b, "-c %s, the model's n_ctx_train, leaves its 1 GiB target free\n", c);
    else if (p->step == KVP_PARAMS_FIT_CONTEXT)
        kvp_buf_printf(b, "-c %s (n_ctx_train %s lowered to keep its 1 GiB target free)\n", c, t);
    else {
        if (p->ctx_given)
            kvp_buf_printf(b, "it does not keep its 1 GiB target free, and the context is the user's, ");
        else
            kvp_buf_printf(b, "-c %s does not keep its 1 GiB target free either, ", c);
        if (p->step == KVP_PARAMS_FIT_ABORT)
            kvp_buf_printf(b, "and it moves no layers itself when -ngl, --n-cpu-moe or -ot is given (\"already set "
                           "by user, abort\"): it runs with them\n");
        else {
            kvp_buf_printf(b, "so ");
            fit_layers_line(x, b);
        }
    }
}

/* llama.cpp with layers, experts or KV kept in host memory: where each part lives. */
static void device_table(const struct fitted *x, enum kvp_out fmt, bool si, struct kvp_buf *b)
{
    static const char *const head[] = {"device", "layers", "weights", "KV", "compute"};
    static const bool right[] = {false, true, true, true, true};
    const struct kvp_fit *f = &x->f;
    struct kvp_table t;
    char name[16], layers[32], w[32], kv[32], a[32], c[48];

    kvp_buf_printf(b, "\n-ngl %u of %u layers (the output layer %s); weights %s\n", f->gpu_layers,
                   x->m->n_layers + 1, f->output_on_gpu ? "on the GPU" : "in host memory",
                   f->weights_exact ? "from the GGUF's tensors, to the byte" : "estimated in proportion to the layers");
    kvp_table_init(&t, 5, head, right);
    for (uint32_t i = 0; i <= f->n_devices; i++) {
        const struct kvp_device_kv *dk = i < f->n_devices ? &f->device[i] : &f->host;
        const char *r[] = {name, layers, w, kv, c};
        if (i < f->n_devices)
            snprintf(name, sizeof name, "GPU%u", i);
        else
            snprintf(name, sizeof name, "host");
        snprintf(layers, sizeof layers, "%u", dk->model_layers + (i + 1 == f->n_devices && f->output_on_gpu));
        kvp_bytes_text(dk->weights_bytes, si, w, sizeof w);
        kvp_bytes_text(kvp_sat_add(dk->buffer_bytes, dk->rs_bytes), si, kv, sizeof kv);
        if (i < f->n_devices)
            snprintf(c, sizeof c, "%s%s", kvp_bytes_text(f->reserve.activation, si, a, sizeof a),
                     f->reserve.activation_est ? " (est.)" : "");
        else
            snprintf(c, sizeof c, "%s (est.)", kvp_bytes_text(f->host_compute, si, a, sizeof a));
        kvp_table_row(&t, r);
    }
    kvp_table_render(&t, fmt, b);
    kvp_table_release(&t);
}

/* The roofline's bounds; with llama.cpp's tensors in host memory, the host's share of a step
 * and of the prompt on a line of its own. */
static void render_roofline(const struct fitted *x, uint64_t batch, bool si, struct kvp_buf *b)
{
    const struct kvp_roofline *r = &x->r;
    const struct kvp_deploy *d = &x->d;
    char g[4][32];

    kvp_buf_printf(b, "roofline bounds (batch %s, %.0f GB/s, %.0f TFLOP/s): decode >= %.2f ms per token "
                   "(<= %.1f tokens/s), reading %s of weights and %s of KV per GPU per step; "
                   "prefill of %s tokens >= %.3f s\n",
                   kvp_count_text(batch, g[0], sizeof g[0]), x->gpu->bandwidth_bytes_per_s / 1e9,
                   r->prefill_flops / r->prefill_compute_s / d->tp / 1e12, r->tpot_s * 1e3, r->tokens_per_s,
                   kvp_bytes_text(r->weight_bytes, si, g[1], sizeof g[1]),
                   kvp_bytes_text(r->kv_bytes, si, g[2], sizeof g[2]),
                   kvp_count_text(d->context, g[3], sizeof g[3]), r->ttft_s);
    if (!r->host_weight_bytes && !r->host_kv_bytes)
        return;
    kvp_buf_printf(b, "  of a decode step, %.2f ms is the host's:", r->host_s * 1e3);
    if (r->streamed)
        kvp_buf_printf(b, " %s of weights copied to the GPU over its link at %.1f GB/s (a batch of 32 or more: "
                       "ggml-cuda runs the op on the GPU)%s", kvp_bytes_text(r->stream_bytes, si, g[0], sizeof g[0]),
                       d->host_link / 1e9, r->host_kv_bytes ? " and" : "\n");
    if (!r->streamed || r->host_kv_bytes) {
        kvp_buf_printf(b, " the CPU reads ");
        if (!r->streamed && r->host_weight_bytes)
            kvp_buf_printf(b, "%s of weights%s", kvp_bytes_text(r->host_weight_bytes, si, g[0], sizeof g[0]),
                           r->host_kv_bytes ? " and " : "");
        if (r->host_kv_bytes)
            kvp_buf_printf(b, "%s of KV", kvp_bytes_text(r->host_kv_bytes, si, g[0], sizeof g[0]));
        kvp_buf_printf(b, " in host memory at %.1f GB/s%s\n", r->host_bandwidth / 1e9,
                       r->host_bandwidth_assumed ? " (assumed: --host-bandwidth GBPS sets it)"
                       : d->unified_memory && !d->host_bandwidth ? " (unified memory: the GPU's)" : "");
    }
    if (r->prefill_stream_s > 0)
        kvp_buf_printf(b, "  prefill copies the host's %s of weights to the GPU for every micro-batch of 32 tokens or "
                       "more (-ub %llu): %.3f s over the link at %.1f GB/s, %s the %.3f s of compute\n",
                       kvp_bytes_text(r->stream_bytes, si, g[0], sizeof g[0]), (unsigned long long)r->ubatch,
                       r->prefill_stream_s, d->host_link / 1e9,
                       r->prefill_stream_s > r->prefill_compute_s ? "above" : "under", r->prefill_compute_s);
}

static void render_text(const struct fitted *x, enum kvp_out fmt, bool si, struct kvp_buf *b)
{
    static const char *const head[] = {"per GPU", "value", "note"};
    static const bool right[] = {false, true, false};
    const struct kvp_deploy *d = &x->d;
    const struct kvp_fit *f = &x->f;
    const struct kvp_engine_info *e = kvp_engine_info(d->engine);
    struct kvp_table t;
    char g[6][48], k[64], v[64], w[64], note[320], split[400];
    uint64_t want = d->concurrency ? d->concurrency : 1;
    struct kvp_weights wt;
    struct kvp_error err = {0};
    const char *engine, *version;

    kvp_release_names(d->engine, f->release, &engine, &version);
    kvp_buf_printf(b, "%s%s on %u x %s (%s each), engine %s %s\n", fmt == KVP_OUT_MD ? "## " : "", x->m->name,
                   d->n_gpus, x->gpu ? x->gpu->id : "GPU", kvp_bytes_text(d->gpu_memory, si, g[0], sizeof g[0]),
                   engine, version);
    if (d->dp > 1)
        snprintf(note, sizeof note, "dp %u%s, ", d->dp, d->dp_attention ? " (DP attention inside tp)" : "");
    else
        note[0] = '\0';
    kvp_deploy_ep_text(x->m, d, note + strlen(note), sizeof note - strlen(note));
    kvp_buf_printf(b, "%s%stp %u, pp %u; K %s, V %s; weights %s; %s request%s of %s tokens\n",
                   fmt == KVP_OUT_MD ? "\n" : "", note, d->tp, d->pp, kvp_format_name(&d->k, k, sizeof k),
                   kvp_format_name(&d->v, v, sizeof v), kvp_wstore_name(&d->w, w, sizeof w),
                   kvp_count_text(want, g[1], sizeof g[1]), want == 1 ? "" : "s",
                   kvp_count_text(d->context, g[2], sizeof g[2]));
    if (!d->weights_memory && kvp_weights_compute(x->m, &d->w, &wt, &err) == KVP_OK)
        kvp_buf_printf(b, "weights: %s\n", kvp_weights_split(&wt, si, split, sizeof split));
    if (d->ollama_auto) {
        uint64_t vram = kvp_sat_mul(d->gpu_memory, d->n_gpus);
        kvp_buf_printf(b, "ollama chose:");
        if (d->ollama_auto & KVP_OLLAMA_PARALLEL)
            kvp_buf_printf(b, " np 1 (%s takes one request at a time in Ollama, whatever OLLAMA_NUM_PARALLEL "
                           "says);", x->m->arch[0] ? x->m->arch : x->m->family);
        if (d->ollama_auto & KVP_OLLAMA_CONTEXT)
            kvp_buf_printf(b, " num_ctx %s (%s of VRAM: 4096 under 23 GiB, 32768 under 47 GiB, else 262144; at most "
                           "the model's %s)%s", kvp_count_text(d->context, g[3], sizeof g[3]),
                           kvp_bytes_text(vram, si, g[4], sizeof g[4]),
                           kvp_count_text(x->m->max_context, g[5], sizeof g[5]),
                           d->ollama_auto & KVP_OLLAMA_BATCH ? ";" : "");
        if (d->ollama_auto & KVP_OLLAMA_BATCH)
            kvp_buf_printf(b, " num_batch %u (-b and -ub, by %s tokens and the headroom Ollama predicts)",
                           d->n_batch, kvp_count_text(kvp_sat_mul(d->context, d->n_seq), g[3], sizeof g[3]));
        kvp_buf_printf(b, "\n");
    }
    if (d->w_auto) {
        char tried[256];
        bool all;
        auto_rejected(x, tried, sizeof tried, &all);
        if (all)
            kvp_buf_printf(b, "weight dtype auto: none fits; the smallest, %s, is shown\n", w);
        else
            kvp_buf_printf(b, "weight dtype auto: %s, the least lossy that fits%s%s%s\n", w, tried[0] ? " (" : "",
                           tried, tried[0] ? " do not)" : "");
    }
    kvp_buf_printf(b, "\n");
    kvp_table_init(&t, 3, head, right);
    if (f->weights_padding)
        snprintf(note, sizeof note, "as loaded: the checkpoint's %s per GPU + %s of MXFP4 expert padding "
                 "(estimated; --explain shows how)", kvp_bytes_text(f->weights_bytes - f->weights_padding, si, g[3],
                 sizeof g[3]), kvp_bytes_text(f->weights_padding, si, g[4], sizeof g[4]));
    else if (f->lora_bytes)
        snprintf(note, sizeof note, "the checkpoint's %s per GPU + %s of LoRA slots (%u of rank %u: A and B stacks "
                 "of every attention and MLP projection)", kvp_bytes_text(f->weights_bytes - f->lora_bytes, si, g[3],
                 sizeof g[3]), kvp_bytes_text(f->lora_bytes, si, g[4], sizeof g[4]), d->max_loras,
                 d->max_lora_rank ? d->max_lora_rank : 16);
    bytes_row(&t, "weights", f->weights_bytes, si,
              d->weights_memory ? "as given"
              : d->engine == KVP_ENGINE_LLAMACPP && f->weights_exact ? "the busiest GPU's tensors (GGUF table)"
              : d->engine == KVP_ENGINE_LLAMACPP ? "computed, shared as the layers"
              : f->weights_padding || f->lora_bytes ? note
              : kvp_deploy_experts_per_gpu(x->m, d)
                  ? (d->dp_attention ? "computed: whole routed experts (EP), attention / (tp / dp), embedding whole, "
                                       "the rest / tp"
                                     : "computed: whole routed experts (EP), the rest / tp")
              : d->dp > 1 && (d->engine == KVP_ENGINE_VLLM || d->engine == KVP_ENGINE_SGLANG)
                  ? (d->dp_attention ? "computed: attention / (tp / dp), embedding whole, the rest / tp"
                                     : "computed: routed experts / (dp x tp), the rest / tp")
                  : "computed / (tp x pp)");
    reserve_rows(&t, f, si);
    if (d->engine != KVP_ENGINE_LLAMACPP) {
        snprintf(g[3], sizeof g[3], "%.3f", f->util);
        row(&t, "memory fraction", g[3], d->util ? "as given" : "the engine's default");
    }
    bytes_row(&t, d->engine == KVP_ENGINE_LLAMACPP ? "room for KV" : "KV budget", f->kv_budget_bytes, si, "");
    bytes_row(&t, "KV per token", f->kv_bytes_per_token_per_gpu, si, "");
    bytes_row(&t, "KV required", f->kv_bytes_required, si, "the requests under the engine's rounding");
    if (d->engine == KVP_ENGINE_LLAMACPP) {
        snprintf(note, sizeof note, "%u stream%s%s", f->n_stream, f->n_stream == 1 ? "" : "s",
                 f->windows_ignored ? "; llama.cpp runs this family without its window" : "");
        if (f->cache[1].layers)
            snprintf(note + strlen(note), sizeof note - strlen(note), "; SWA layers %s cells",
                     kvp_count_text(f->swa_cells, g[4], sizeof g[4]));
        row(&t, "cells", kvp_count_text(f->cells, g[3], sizeof g[3]), note);
    } else {
        snprintf(note, sizeof note, "of %u tokens%s", f->block_size, f->n_groups > 1 ? ", shared by the groups" : "");
        row(&t, "blocks", kvp_count_text(f->num_blocks, g[3], sizeof g[3]), note);
        row(&t, "KV tokens", kvp_count_text(f->kv_tokens, g[4], sizeof g[4]), "");
    }
    snprintf(g[3], sizeof g[3], "%.2f", f->max_concurrency);
    snprintf(note, sizeof note, "requests of %s tokens", kvp_count_text(d->context, g[4], sizeof g[4]));
    row(&t, "max concurrency", g[3], d->engine == KVP_ENGINE_LLAMACPP ? "the configured sequences, if they fit" : note);
    if (d->dp > 1) { /* each DP rank its own pool and scheduler: the deployment holds dp times one rank */
        snprintf(note, sizeof note, "%u DP ranks' pools", d->dp);
        row(&t, "KV tokens in all", kvp_count_text(kvp_sat_mul(f->kv_tokens, d->dp), g[4], sizeof g[4]), note);
        snprintf(g[3], sizeof g[3], "%.2f", f->max_concurrency * d->dp);
        snprintf(note, sizeof note, "requests of %s tokens, %u ranks", kvp_count_text(d->context, g[4], sizeof g[4]),
                 d->dp);
        row(&t, "max concurrency in all", g[3], note);
    }
    snprintf(note, sizeof note, "tokens, with %s request%s", kvp_count_text(want, g[4], sizeof g[4]),
             want == 1 ? "" : "s");
    if (x->have_lim)
        context_note(x, note, sizeof note);
    row(&t, "max context", kvp_count_text(f->max_context, g[5], sizeof g[5]), note);
    if (d->cpu_offload) {
        snprintf(note, sizeof note, "tokens in %s of host memory; %.0f requests parked",
                 kvp_bytes_text(d->cpu_offload, si, g[4], sizeof g[4]), f->offload_concurrency);
        row(&t, "CPU offload tier", kvp_count_text(f->offload_tokens, g[5], sizeof g[5]), note);
    }
    snprintf(note, sizeof note, "%s %s%s", kvp_bytes_text(f->fits ? f->free_bytes : f->short_bytes, si, g[4],
                                                          sizeof g[4]),
             f->fits ? "left" : "short", !within_interval(f) ? "" : f->fits ? "; may not start" : "; may start");
    if (f->refused[0])
        snprintf(note, sizeof note, "the engine would not start%s", within_interval(f) ? " (it may: within the "
                                                                                            "interval)" : "");
    row(&t, "fits", f->fits ? "yes" : "NO", note);
    kvp_table_render(&t, fmt, b);
    kvp_table_release(&t);
    if (d->engine == KVP_ENGINE_LLAMACPP &&
        (f->gpu_layers <= x->m->n_layers || d->n_cpu_moe || d->override_tensor[0] || d->no_kv_offload ||
         f->n_devices > 1))
        device_table(x, fmt, si, b);
    if (x->have_lim && d->engine == KVP_ENGINE_LLAMACPP)
        offload_line(x, si, b);
    if (x->auto_fit.step != KVP_PARAMS_FIT_NONE)
        auto_fit_line(x, b);
    if (within_interval(f))
        kvp_buf_printf(b, "\nwarning: %s %s is inside the estimate's interval (+-%s): it may %sstart; measure the "
                       "reserve at a first start and pass it\n",
                       kvp_bytes_text(f->fits ? f->free_bytes : f->short_bytes, si, g[0], sizeof g[0]),
                       f->fits ? "left" : "short", kvp_bytes_text(f->reserve.uncertainty, si, g[1], sizeof g[1]),
                       f->fits ? "not " : "");
    if (d->engine != KVP_ENGINE_LLAMACPP && !d->kv_memory) {
        kvp_buf_printf(b, "\nto serve %s x %s tokens: ", kvp_count_text(want, g[0], sizeof g[0]),
                       kvp_count_text(d->context, g[1], sizeof g[1]));
        if (x->min_tp && x->min_dp > 1 && x->min_dp == x->min_tp && d->engine == KVP_ENGINE_SGLANG)
            kvp_buf_printf(b, "fewest GPUs: tp %u with DP attention dp %u (x pp %u = %u GPUs)", x->min_tp, x->min_dp,
                           d->pp, x->min_tp * d->pp);
        else if (x->min_tp && x->min_dp > 1)
            kvp_buf_printf(b, "fewest GPUs: dp %u x tp %u (x pp %u = %u GPUs)", x->min_dp, x->min_tp, d->pp,
                           x->min_dp * x->min_tp * d->pp);
        else if (x->min_tp)
            kvp_buf_printf(b, "fewest GPUs: tp %u (x pp %u = %u GPU%s)", x->min_tp, d->pp, x->min_tp * d->pp,
                           x->min_tp * d->pp == 1 ? "" : "s");
        else
            kvp_buf_printf(b, "no tp up to the --max-gpus limit fits");
        if (d->dp > 1)
            snprintf(note, sizeof note, "dp %u x tp %u", d->dp, d->tp);
        else
            snprintf(note, sizeof note, "tp %u", d->tp);
        if (x->min_util > 0)
            kvp_buf_printf(b, "; lowest memory fraction at %s: %.3f\n", note, x->min_util);
        else
            kvp_buf_printf(b, "; no memory fraction fits at %s\n", note);
    }
    if (x->have_roofline)
        render_roofline(x, want, si, b);
    {
        struct kvp_buf log = {0};
        kvp_fit_log(x->m, d, f, &log);
        if (f->refused[0]) {
            kvp_buf_printf(b, "\n%s would not start:\n  %s\n", e->name, f->refused);
        } else if (log.len) {
            kvp_buf_printf(b, "\n%s would log:\n", e->name);
            for (char *line = log.data, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1)
                kvp_buf_printf(b, "  %.*s\n", (int)(nl - line), line);
        }
        kvp_buf_release(&log);
    }
}

/* --engine-args FILE: the engine's command that reads it, `vllm serve --config FILE` or SGLang's. */
static int engine_args(int given, char **args, char ***argv, int *argc)
{
    const char *engine = cli_opt(&cmd, "engine"), *file = cli_opt(&cmd, "engine-args");
    int n = 0;
    if (given)
        return cli_usage_error("fit: --engine-args FILE or -- ENGINE COMMAND, not both");
    if (!engine || strncmp(engine, "vllm", 4) == 0) {
        args[n++] = "vllm", args[n++] = "serve";
    } else if (strncmp(engine, "sglang", 6) == 0) {
        args[n++] = "python3", args[n++] = "-m", args[n++] = "sglang.launch_server";
    } else {
        return cli_usage_error("--engine-args: a --config file of vLLM or SGLang (got --engine %s)", engine);
    }
    args[n++] = "--config";
    args[n++] = (char *)file;
    *argv = args;
    *argc = n;
    return CLI_OK;
}

int cmd_fit(int argc, char **argv)
{
    const char *pos[1];
    int npos, rc;
    struct fitted x;
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    bool si;

    int engine_at = argc, eargc;
    char **eargv, *args[6];
    memset(&x, 0, sizeof x);
    if (!opts[0].name)
        cli_deploy_opts(opts, sizeof opts / sizeof opts[0], fit_opts);
    for (int i = 1; i < argc; i++) /* `-- vllm serve ...`: the engine's own command line */
        if (strcmp(argv[i], "--") == 0) {
            engine_at = i;
            break;
        }
    if ((rc = cli_parse(&cmd, engine_at, argv, pos, 1, &npos)) != CLI_OK)
        return rc;
    eargv = argv + engine_at + 1;
    eargc = argc - engine_at - (engine_at < argc);
    if (cli_opt(&cmd, "engine-args") && (rc = engine_args(eargc, args, &eargv, &eargc)) != CLI_OK)
        return rc;
    if (npos != 1 && !(npos == 0 && eargc > 0))
        return cli_usage_error("fit: which model? (usage: kvplan fit MODEL --gpu NAME [options], or kvplan fit "
                               "--gpu NAME -- ENGINE COMMAND)");
    if ((rc = cli_out(&cmd, &fmt, true)) != CLI_OK)
        return rc;
    if (fmt == KVP_OUT_CSV)
        return cli_usage_error("fit: --format csv is not available (text, json or md)");
    si = cli_opt(&cmd, "si") != NULL;
    if ((rc = setup(&x, npos ? pos[0] : NULL, eargv, eargc)) != CLI_OK ||
        (rc = compute(&x)) != CLI_OK) {
        kvp_model_free(x.m);
        return rc;
    }
    if (cli_opt(&cmd, "emit")) {
        struct kvp_error err = {0};
        if (kvp_emit_command(x.m, &x.d, &x.f, &b, &err) != KVP_OK) {
            kvp_buf_release(&b);
            kvp_model_free(x.m);
            return cli_error(&err);
        }
        if (!x.f.fits)
            fprintf(stderr, "kvplan: warning: this deployment does not fit (kvplan fit without --emit says why)\n");
    } else if (fmt == KVP_OUT_JSON) {
        render_json(&x, &b);
    } else {
        render_text(&x, fmt, si, &b);
    }
    if (cli_opt(&cmd, "explain") && fmt != KVP_OUT_JSON && !cli_opt(&cmd, "emit")) {
        kvp_buf_printf(&b, "\n");
        kvp_explain_fit(x.m, &x.d, &x.f, si, &b);
        if (x.have_lim)
            kvp_explain_limits(x.m, &x.d, &x.lim, si, &b);
    }
    rc = cli_write(&b);
    if (rc == CLI_OK && !x.f.fits)
        rc = CLI_FAIL;
    kvp_buf_release(&b);
    kvp_model_free(x.m);
    return rc;
}
