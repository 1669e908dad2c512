/* settings.c -- the one table of deployment settings: parse, apply, print. */
#include "kvplan/settings.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/num.h"
#include "profile.h"

#define U32_MAX_SETTING (1u << 20)

/* Applied in this order: the engine first (its defaults), the GPU (its
 * memory), tp and pp before gpus (whose default is tp x pp). */
#define OFF(member) offsetof(struct kvp_deploy, member)
static const struct kvp_setting table[] = {
    {"engine", KVP_SET_ENGINE, "E[@REL]",
     "vllm (default), sglang, trtllm, llamacpp, hf-dynamic, hf-static, hf-quantized, ideal; @REL picks a release "
     "(kvplan engines)",
     "vllm@0.11.0", 0},
    {"gpu", KVP_SET_GPU, "NAME", "GPU type from the catalog (kvplan gpus), e.g. h100, a100-80gb", "h100", 0},
    {"tp", KVP_SET_U32, "N", "tensor parallel degree (default 1)", "2", OFF(tp)},
    {"pp", KVP_SET_U32, "N", "pipeline parallel degree (default 1)", "1", OFF(pp)},
    {"dp", KVP_SET_U32, "N",
     "data-parallel ranks, each its own KV pool and scheduler (vLLM --data-parallel-size, SGLang --dp-size; default 1)",
     "2", OFF(dp)},
    {"dp_attention", KVP_SET_FLAG, NULL,
     "SGLang --enable-dp-attention: the dp ranks share the tp GPUs, attention split by tp / dp", "true",
     OFF(dp_attention)},
    {"gpus", KVP_SET_U32, "N",
     "GPUs in all (default dp x tp x pp, tp x pp under SGLang DP attention, which must use "
     "them all; llama.cpp: devices the layers are split over)",
     "2", OFF(n_gpus)},
    {"util", KVP_SET_FRACTION, "F",
     "memory fraction: vLLM gpu_memory_utilization, SGLang mem_fraction_static, TRT-LLM free fraction "
     "(default: the release's)",
     "0.85", 0},
    {"context", KVP_SET_COUNT, "N", "tokens per request (vLLM max_model_len, llama.cpp -c); default: the model's max",
     "8k", OFF(context)},
    {"concurrency", KVP_SET_COUNT, "C", "requests that must fit at the context (default 1)", "4", OFF(concurrency)},
    {"kv_dtype", KVP_SET_FORMAT, "T", "K and V cache format (default: the engine's default for the model)", "fp8", 0},
    {"k_dtype", KVP_SET_FORMAT, "T", "K cache format (llama.cpp -ctk; vLLM, SGLang and TRT-LLM take one for both)",
     "q8_0", 0},
    {"v_dtype", KVP_SET_FORMAT, "T", "V cache format (llama.cpp -ctv)", "q4_0", 0},
    {"weight_dtype", KVP_SET_WEIGHTS, "T",
     "weights as: stored (default: the checkpoint's storage), a format for every projection (int4:group=128, fp8), "
     "a llama.cpp file type (q4_k_m), or auto: the least lossy that fits the target",
     "int4:group=128", 0},
    {"gpu_memory", KVP_SET_BYTES, "SIZE",
     "memory per GPU as the device reports it (overrides the GPU's), e.g. 23.58GiB", "80GiB", OFF(gpu_memory)},
    {"weights_memory", KVP_SET_BYTES, "SIZE",
     "weights per GPU as the engine logged them (default: computed / (tp x pp))", "16GiB", OFF(weights_memory)},
    {"activation_memory", KVP_SET_BYTES, "SIZE", "activation peak / compute buffers per GPU (default: estimated)",
     "2GiB", OFF(activation_memory)},
    {"non_torch_memory", KVP_SET_BYTES, "SIZE",
     "non-torch memory per GPU: NCCL, cuBLAS, CUDA context (default: estimated)", "512MiB", OFF(non_torch_memory)},
    {"cuda_graph_memory", KVP_SET_BYTES, "SIZE",
     "CUDA-graph memory per GPU subtracted before the KV budget (default: estimated for vllm@0.21.0, else 0)", "1GiB",
     OFF(cuda_graph_memory)},
    {"kv_cache_memory", KVP_SET_BYTES, "SIZE", "KV budget per GPU given outright (vLLM --kv-cache-memory)", "40GiB",
     OFF(kv_memory)},
    {"cpu_offload", KVP_SET_BYTES, "SIZE", "host memory per GPU for an offloaded KV tier (e.g. 256GiB)", "64GiB",
     OFF(cpu_offload)},
    {"block_size", KVP_SET_U32, "N", "tokens per block/page (vLLM 16, MLA 64; TRT-LLM 32; SGLang page 1)", "32",
     OFF(block_size)},
    {"max_num_batched_tokens", KVP_SET_COUNT, "N",
     "vLLM: tokens per step (default: the release's, 8192 or 2048 by GPU)", "4096", OFF(max_batched_tokens)},
    {"max_num_seqs", KVP_SET_COUNT, "N",
     "vLLM: sequences per step, sampled in the profiling run (default: the release's)", "128", OFF(max_num_seqs)},
    {"n_ubatch", KVP_SET_U32, "N", "llama.cpp micro-batch (default 512, at most n_batch)", "256", OFF(n_ubatch)},
    {"n_batch", KVP_SET_U32, "N", "llama.cpp logical batch (default 2048)", "1024", OFF(n_batch)},
    {"n_seq", KVP_SET_U32, "N", "llama.cpp parallel sequences (default 1)", "2", OFF(n_seq)},
    {"kv_unified", KVP_SET_FLAG, NULL, "llama.cpp: one KV stream shared by all sequences", "true", OFF(kv_unified)},
    {"swa_full", KVP_SET_FLAG, NULL, "llama.cpp: full-size cache for sliding-window layers", "true", OFF(swa_full)},
    {"mla_v", KVP_SET_FLAG, NULL, "llama.cpp before 2026-01-24: MLA also caches V", "true", OFF(mla_v)},
    {"flash_attn", KVP_SET_SWITCH, "on|off|auto", "llama.cpp -fa (default auto); a quantized V needs it on", "on", 0},
    {"split", KVP_SET_SPLIT, "L1,L2,...", "llama.cpp: layers per device, e.g. 41,23", "20,12", 0},
    {"n_gpu_layers", KVP_SET_LAYERS, "N|all",
     "llama.cpp -ngl: layers on the GPUs, counted from the output layer (default all); the rest stay in host memory",
     "20", OFF(n_gpu_layers)},
    {"n_cpu_moe", KVP_SET_LAYERS, "N|all",
     "llama.cpp --n-cpu-moe: the MoE expert tensors of the first N layers stay in host memory (all: --cpu-moe)", "8",
     OFF(n_cpu_moe)},
    {"override_tensor", KVP_SET_OVERRIDES, "PATTERN=CPU",
     "llama.cpp -ot: tensors to host memory by name, PATTERN=CPU[,...]; only expert tensors are modelled (exps=CPU: "
     "every layer's experts)",
     "exps=CPU", 0},
    {"no_kv_offload", KVP_SET_FLAG, NULL, "llama.cpp --no-kv-offload: the KV cache in host memory", "true",
     OFF(no_kv_offload)},
    {"expert_parallel", KVP_SET_FLAG, NULL,
     "vLLM --enable-expert-parallel, SGLang --ep-size tp: each GPU holds whole routed experts, (E + redundant) / EP "
     "of them (EP = dp x tp; SGLang: tp)",
     "true", OFF(expert_parallel)},
    {"redundant_experts", KVP_SET_U32, "N",
     "EPLB's extra physical experts per MoE layer, with expert_parallel (vLLM --eplb-config num_redundant_experts, "
     "SGLang --ep-num-redundant-experts; default none)",
     "32", OFF(redundant_experts)},
    {"max_loras", KVP_SET_U32, "N",
     "vLLM --enable-lora --max-loras: LoRA slots on each GPU, A and B stacks of max_lora_rank per wrapped layer "
     "(default: no LoRA; --enable-lora alone is 1)",
     "4", OFF(max_loras)},
    {"max_lora_rank", KVP_SET_U32, "R", "vLLM --max-lora-rank: the LoRA slots' rank (default 16)", "64",
     OFF(max_lora_rank)},
    {"host_bandwidth", KVP_SET_U32, "GBPS",
     "GB/s the CPU reads host memory at, for the roofline of weights and KV left in host memory (llama.cpp -ngl, "
     "--n-cpu-moe; default: the GPU's on unified memory, else 102 assumed, two channels of DDR5-6400)",
     "400", OFF(host_bandwidth)},
};
#define N_ROWS (sizeof table / sizeof table[0])
_Static_assert(N_ROWS <= KVP_SETTINGS_MAX && N_ROWS <= 64, "the table outgrew struct kvp_settings");

uint32_t kvp_settings_count(void)
{
    return (uint32_t)N_ROWS;
}

const struct kvp_setting *kvp_setting_at(uint32_t row)
{
    return row < N_ROWS ? &table[row] : NULL;
}

/* key (with '_') names what was given (with '_' or '-')? */
static bool same_key(const char *key, const char *given)
{
    for (; *key && (*key == *given || (*key == '_' && *given == '-')); key++, given++)
        ;
    return *key == '\0' && *given == '\0';
}

int kvp_setting_find(const char *key)
{
    for (uint32_t i = 0; i < N_ROWS; i++)
        if (same_key(table[i].key, key))
            return (int)i;
    return -1;
}

/* The engines' flags for the settings above, as their argument parsers
 * name them: vLLM 0.11.0 vllm/engine/arg_utils.py (EngineArgs; -dp is --data-parallel-size), SGLang
 * 0.5 python/sglang/srt/server_args.py (ServerArgs: "--tensor-parallel-size",
 * "--tp-size"; "--pipeline-parallel-size", "--pp-size"), llama.cpp
 * common/arg.cpp (long and short names), TRT-LLM 1.0
 * tensorrt_llm/commands/serve.py (trtllm-serve's options). A flag whose meaning differs from
 * the setting (llama.cpp --tensor-split takes proportions, vLLM
 * --cpu-offload-gb offloads weights) is left out. */
static const struct {
    const char *flag, *key, *engine;
} engine_flags[] = {
    {"tensor_parallel_size", "tp", "vLLM and SGLang"}, {"tp_size", "tp", "SGLang and TRT-LLM"},
    {"pipeline_parallel_size", "pp", "vLLM and SGLang"}, {"pp_size", "pp", "SGLang and TRT-LLM"},
    {"data_parallel_size", "dp", "vLLM and SGLang"}, {"dp_size", "dp", "SGLang"},
    {"enable_dp_attention", "dp_attention", "SGLang"},
    {"enable_expert_parallel", "expert_parallel", "vLLM"}, {"enable_ep_moe", "expert_parallel", "SGLang"},
    {"num_redundant_experts", "redundant_experts", "vLLM"},
    {"ep_num_redundant_experts", "redundant_experts", "SGLang"},
    {"max_model_len", "context", "vLLM"},        {"context_length", "context", "SGLang"},
    {"ctx_size", "context", "llama.cpp"},        {"c", "context", "llama.cpp"},
    {"gpu_memory_utilization", "util", "vLLM"},  {"mem_fraction_static", "util", "SGLang"},
    {"kv_cache_dtype", "kv_dtype", "vLLM and SGLang"},
    {"cache_type_k", "k_dtype", "llama.cpp"},    {"ctk", "k_dtype", "llama.cpp"},
    {"cache_type_v", "v_dtype", "llama.cpp"},    {"ctv", "v_dtype", "llama.cpp"},
    {"quantization", "weight_dtype", "vLLM"},    {"kv_cache_memory_bytes", "kv_cache_memory", "vLLM"},
    {"max_num_seqs", "max_num_seqs", "vLLM"},    {"max_num_batched_tokens", "max_num_batched_tokens", "vLLM"},
    {"block_size", "block_size", "vLLM"}, /* kvplan's names too: listed for kvp_setting_engine_flag_abbrev */
    {"max_running_requests", "max_num_seqs", "SGLang"},
    {"page_size", "block_size", "SGLang"},       {"batch_size", "n_batch", "llama.cpp"},
    {"b", "n_batch", "llama.cpp"},               {"ubatch_size", "n_ubatch", "llama.cpp"},
    {"ub", "n_ubatch", "llama.cpp"},             {"parallel", "n_seq", "llama.cpp"},
    {"np", "n_seq", "llama.cpp"},                {"fa", "flash_attn", "llama.cpp"},
    {"kvu", "kv_unified", "llama.cpp"},        {"max_seq_len", "context", "TRT-LLM"},
    {"ngl", "n_gpu_layers", "llama.cpp"},      {"gpu_layers", "n_gpu_layers", "llama.cpp"},
    {"ncmoe", "n_cpu_moe", "llama.cpp"},       {"nkvo", "no_kv_offload", "llama.cpp"},
    {"max_batch_size", "max_num_seqs", "TRT-LLM"}, {"max_num_tokens", "max_num_batched_tokens", "TRT-LLM"},
    {"kv_cache_free_gpu_memory_fraction", "util", "TRT-LLM"},
};

int kvp_setting_engine_flag(const char *flag, const char **engine)
{
    for (size_t i = 0; i < sizeof engine_flags / sizeof engine_flags[0]; i++)
        if (same_key(engine_flags[i].flag, flag)) {
            *engine = engine_flags[i].engine;
            return kvp_setting_find(engine_flags[i].key);
        }
    return -1;
}

int kvp_setting_engine_flag_abbrev(const char *flag, const char *engine, const char **full)
{
    size_t n = strlen(flag);
    int row = -1;
    *full = NULL;
    for (size_t i = 0; i < sizeof engine_flags / sizeof engine_flags[0]; i++) {
        const char *f = engine_flags[i].flag;
        size_t j = 0;
        if (!strstr(engine_flags[i].engine, engine) || strlen(f) <= n)
            continue;
        while (j < n && (f[j] == flag[j] || (f[j] == '_' && flag[j] == '-')))
            j++;
        if (j < n)
            continue;
        if (*full)
            return -1; /* argparse: "ambiguous option" */
        *full = f;
        row = kvp_setting_find(engine_flags[i].key);
    }
    return row;
}

void kvp_settings_clear(struct kvp_settings *s)
{
    memset(s, 0, sizeof *s);
}

void kvp_settings_overlay(struct kvp_settings *base, const struct kvp_settings *top)
{
    for (uint32_t i = 0; i < N_ROWS; i++)
        if ((top->given >> i) & 1u) {
            memcpy(base->value[i], top->value[i], sizeof base->value[i]);
            base->given |= 1ull << i;
        }
}

/* ---- values ------------------------------------------------------------------ */

static enum kvp_status count_value(const char *v, uint64_t lo, uint64_t hi, uint64_t *out, struct kvp_error *err)
{
    if (kvp_parse_count(v, out, err) != KVP_OK)
        return err->code;
    if (*out < lo || *out > hi)
        return kvp_fail(err, KVP_ERR_RANGE, "must be %" PRIu64 "..%" PRIu64 " (got %.40s)", lo, hi, v);
    return KVP_OK;
}

static enum kvp_status fraction_value(const char *v, double *out, struct kvp_error *err)
{
    char *end;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(x > 0.0 && x <= 1.0))
        return kvp_fail(err, KVP_ERR_RANGE, "must be a fraction in (0, 1] (got '%.40s')", v);
    *out = x;
    return KVP_OK;
}

static enum kvp_status flag_value(const char *v, bool *out, struct kvp_error *err)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "on") == 0)
        *out = true;
    else if (strcmp(v, "false") == 0 || strcmp(v, "no") == 0 || strcmp(v, "off") == 0)
        *out = false;
    else
        return kvp_fail(err, KVP_ERR_SCHEMA, "must be true or false (got '%.40s')", v);
    return KVP_OK;
}

static enum kvp_status switch_value(const char *v, int *out, struct kvp_error *err)
{
    if (strcmp(v, "on") == 0 || strcmp(v, "true") == 0)
        *out = 1;
    else if (strcmp(v, "off") == 0 || strcmp(v, "false") == 0)
        *out = 0;
    else if (strcmp(v, "auto") == 0)
        *out = -1;
    else
        return kvp_fail(err, KVP_ERR_SCHEMA, "must be on, off or auto (got '%.40s')", v);
    return KVP_OK;
}

/* "41,23": layers per device, each 1..KVP_MAX_LAYERS, at most KVP_MAX_STAGES. */
static enum kvp_status split_value(const char *v, uint32_t *split, struct kvp_error *err)
{
    uint32_t n = 0;
    const char *p = v;
    memset(split, 0, KVP_MAX_STAGES * sizeof *split);
    while (*p) {
        char item[24];
        size_t len = strcspn(p, ",");
        uint64_t x;
        if (n == KVP_MAX_STAGES)
            return kvp_fail(err, KVP_ERR_RANGE, "more than %d devices in '%.40s'", KVP_MAX_STAGES, v);
        if (len == 0 || len >= sizeof item)
            return kvp_fail(err, KVP_ERR_SCHEMA, "'%.60s' is not a list of layer counts such as 41,23", v);
        memcpy(item, p, len);
        item[len] = '\0';
        if (!kvp_parse_u64(item, &x) || x == 0 || x > KVP_MAX_LAYERS)
            return kvp_fail(err, KVP_ERR_RANGE, "layer counts must be 1..%d (got '%s')", KVP_MAX_LAYERS, item);
        split[n++] = (uint32_t)x;
        p += len + (p[len] == ',');
    }
    if (n == 0)
        return kvp_fail(err, KVP_ERR_SCHEMA, "'split' must not be empty");
    return KVP_OK;
}

/* "all" (-1) or a layer count 0..U32_MAX_SETTING. */
static enum kvp_status layers_value(const char *v, int32_t *out, struct kvp_error *err)
{
    uint64_t u;
    if (strcmp(v, "all") == 0) {
        *out = -1;
        return KVP_OK;
    }
    if (!kvp_parse_u64(v, &u) || u > U32_MAX_SETTING)
        return kvp_fail(err, KVP_ERR_RANGE, "must be a layer count 0..%u or all (got '%.40s')", U32_MAX_SETTING, v);
    *out = (int32_t)u;
    return KVP_OK;
}

/* Check v for row's type without a model: what put() can know. */
static enum kvp_status check_value(const struct kvp_setting *row, const char *v, struct kvp_error *err)
{
    struct kvp_deploy d;
    enum kvp_engine_id e;
    uint32_t rel;
    uint64_t u;
    int32_t n;
    switch (row->type) {
    case KVP_SET_ENGINE: return kvp_engine_parse(v, &e, &rel, err);
    case KVP_SET_GPU: return v[0] ? KVP_OK : kvp_fail(err, KVP_ERR_SCHEMA, "names no GPU");
    case KVP_SET_U32: return count_value(v, 1, U32_MAX_SETTING, &u, err);
    case KVP_SET_COUNT: return count_value(v, 1, UINT64_MAX, &u, err);
    case KVP_SET_BYTES: return kvp_parse_bytes(v, &u, err);
    case KVP_SET_FORMAT: return kvp_format_parse(v, &d.k, err);
    case KVP_SET_WEIGHTS: return strcmp(v, "auto") == 0 ? KVP_OK : kvp_wstore_parse(v, false, &d.w, err);
    case KVP_SET_FRACTION: return fraction_value(v, &d.util, err);
    case KVP_SET_FLAG: return flag_value(v, &d.swa_full, err);
    case KVP_SET_SWITCH: return switch_value(v, &d.flash_attn, err);
    case KVP_SET_LAYERS: return layers_value(v, &n, err);
    case KVP_SET_OVERRIDES: return kvp_llamacpp_overrides(NULL, v, &d, err);
    default: return split_value(v, d.split, err);
    }
}

enum kvp_status kvp_settings_put(struct kvp_settings *s, const char *key, const char *value, struct kvp_error *err)
{
    int row = kvp_setting_find(key);
    enum kvp_status st;
    if (row < 0)
        return kvp_fail(err, KVP_ERR_USAGE, "unknown setting '%.60s'", key);
    if (strlen(value) >= KVP_SETTING_VALUE_MAX)
        return kvp_fail(err, KVP_ERR_RANGE, "'%.40s...' is too long", value);
    if ((st = check_value(&table[row], value, err)) != KVP_OK)
        return st;
    snprintf(s->value[row], sizeof s->value[row], "%s", value);
    s->given |= 1ull << row;
    return KVP_OK;
}

/* ---- applying ------------------------------------------------------------------ */

/* The member of struct kvp_deploy a number or flag row sets (row->off). */
#define FIELD(T, d, row) ((T *)(void *)((char *)(d) + (row)->off))
#define CFIELD(T, d, row) ((const T *)(const void *)((const char *)(d) + (row)->off))

/* Apply row's value v to d (the engine row is applied by the caller). */
static enum kvp_status apply_row(const struct kvp_setting *row, const char *v, const struct kvp_model *m,
                                 const struct kvp_gpu_catalog *gpus, struct kvp_deploy *d, const struct kvp_gpu **gpu,
                                 struct kvp_error *err)
{
    uint64_t u;
    enum kvp_status st;
    switch (row->type) {
    case KVP_SET_GPU:
        if (!gpus)
            return kvp_fail(err, KVP_ERR_USAGE, "needs the GPU catalog (got '%.40s')", v);
        if ((st = kvp_gpu_find(gpus, v, gpu, err)) != KVP_OK)
            return st;
        d->gpu_memory = (*gpu)->memory_bytes;
        d->compute_capability = (*gpu)->compute_capability;
        d->host_link = (*gpu)->host_link_bytes_per_s;
        d->unified_memory = (*gpu)->unified_memory;
        return KVP_OK;
    case KVP_SET_U32:
        if ((st = count_value(v, 1, U32_MAX_SETTING, &u, err)) != KVP_OK)
            return st;
        *FIELD(uint32_t, d, row) = (uint32_t)u;
        if (strcmp(row->key, "tp") == 0 || strcmp(row->key, "pp") == 0 || strcmp(row->key, "dp") == 0)
            d->n_gpus = (uint32_t)kvp_deploy_gpus(d); /* gpus, applied after, may say otherwise */
        return KVP_OK;
    case KVP_SET_COUNT:
        return count_value(v, 1, UINT64_MAX, FIELD(uint64_t, d, row), err);
    case KVP_SET_BYTES:
        if ((st = kvp_parse_bytes(v, FIELD(uint64_t, d, row), err)) != KVP_OK)
            return st;
        d->activation_given |= row->off == OFF(activation_memory);
        d->non_torch_given |= row->off == OFF(non_torch_memory);
        return KVP_OK;
    case KVP_SET_FORMAT: /* kv_dtype sets K and V */
        if (strcmp(row->key, "v_dtype") != 0 && (st = kvp_format_parse(v, &d->k, err)) != KVP_OK)
            return st;
        return strcmp(row->key, "k_dtype") != 0 ? kvp_format_parse(v, &d->v, err) : KVP_OK;
    case KVP_SET_WEIGHTS: /* auto: chosen when every other setting is in (kvp_settings_apply) */
        if ((d->w_auto = strcmp(v, "auto") == 0))
            return KVP_OK;
        return kvp_wstore_parse(v, d->engine == KVP_ENGINE_LLAMACPP || m->arch[0], &d->w, err);
    case KVP_SET_FRACTION:
        return fraction_value(v, &d->util, err);
    case KVP_SET_FLAG:
        if ((st = flag_value(v, FIELD(bool, d, row), err)) != KVP_OK)
            return st;
        if (row->off == OFF(dp_attention))
            d->n_gpus = (uint32_t)kvp_deploy_gpus(d);
        return KVP_OK;
    case KVP_SET_SWITCH:
        return switch_value(v, &d->flash_attn, err);
    case KVP_SET_SPLIT:
        return split_value(v, d->split, err);
    case KVP_SET_LAYERS:
        return layers_value(v, FIELD(int32_t, d, row), err);
    case KVP_SET_OVERRIDES:
        snprintf(d->override_tensor, sizeof d->override_tensor, "%s", v);
        return kvp_llamacpp_overrides(m, v, d, err);
    default:
        return KVP_OK;
    }
}

static bool given(const struct kvp_settings *s, const char *key)
{
    return (s->given >> kvp_setting_find(key)) & 1u;
}

enum kvp_status kvp_settings_apply(const struct kvp_settings *s, const struct kvp_model *m,
                                   const struct kvp_gpu_catalog *gpus, struct kvp_deploy *d, const struct kvp_gpu **gpu,
                                   int *bad_row, struct kvp_error *err)
{
    enum kvp_engine_id engine = KVP_ENGINE_VLLM;
    uint32_t release = UINT32_MAX;
    enum kvp_status st;

    *gpu = NULL;
    *bad_row = 0; /* the engine row */
    if ((s->given & 1u) && (st = kvp_engine_parse(s->value[0], &engine, &release, err)) != KVP_OK)
        return st;
    kvp_deploy_init(d, engine, m);
    d->release = release;
    for (uint32_t i = 1; i < N_ROWS; i++) {
        if (!((s->given >> i) & 1u))
            continue;
        *bad_row = (int)i;
        if ((st = apply_row(&table[i], s->value[i], m, gpus, d, gpu, err)) != KVP_OK)
            return st;
    }
    *bad_row = -1;
    if (kvp_deploy_release(d)->rules & KVP_REL_OLLAMA)
        kvp_deploy_ollama(m, d, given(s, "context"), given(s, "n_batch") || given(s, "n_ubatch"));
    return d->w_auto ? kvp_deploy_pick_weights(m, d, err) : KVP_OK;
}

enum kvp_status kvp_setting_apply(uint32_t row, const char *value, const struct kvp_model *m,
                                  const struct kvp_gpu_catalog *gpus, struct kvp_deploy *d, const struct kvp_gpu **gpu,
                                  struct kvp_error *err)
{
    struct kvp_settings s;
    enum kvp_status st;
    int bad;

    if (row >= N_ROWS)
        return kvp_fail(err, KVP_ERR_USAGE, "no setting %u", row);
    if ((st = check_value(&table[row], value, err)) != KVP_OK)
        return st;
    if (table[row].type != KVP_SET_ENGINE) {
        if ((st = apply_row(&table[row], value, m, gpus, d, gpu, err)) != KVP_OK)
            return st;
        return d->w_auto ? kvp_deploy_pick_weights(m, d, err) : KVP_OK; /* auto answers for the new value */
    }
    /* a new engine: its defaults, then what the deployment says of every other row */
    kvp_settings_clear(&s);
    snprintf(s.value[0], sizeof s.value[0], "%s", value);
    s.given = 1;
    for (uint32_t i = 1; i < N_ROWS; i++) {
        if (table[i].type == KVP_SET_GPU || strcmp(table[i].key, "kv_dtype") == 0)
            continue; /* the GPU stays as it is; K and V are their own rows */
        kvp_setting_text(i, d, *gpu, s.value[i], sizeof s.value[i]);
        if (s.value[i][0])
            s.given |= 1ull << i;
    }
    {
        const struct kvp_gpu *keep = *gpu;
        uint64_t memory = d->gpu_memory;
        if ((st = kvp_settings_apply(&s, m, NULL, d, gpu, &bad, err)) != KVP_OK)
            return st;
        *gpu = keep;
        d->gpu_memory = memory;
    }
    return KVP_OK;
}

/* ---- printing ------------------------------------------------------------------- */

const char *kvp_setting_text(uint32_t row, const struct kvp_deploy *d, const struct kvp_gpu *gpu, char *buf,
                             uint32_t n)
{
    const struct kvp_setting *r = kvp_setting_at(row);
    const char *name, *version;
    buf[0] = '\0';
    if (!r)
        return buf;
    switch (r->type) {
    case KVP_SET_ENGINE:
        kvp_release_names(d->engine, kvp_deploy_release(d), &name, &version);
        snprintf(buf, n, "%s@%s", name, version);
        break;
    case KVP_SET_GPU:
        snprintf(buf, n, "%s", gpu ? gpu->id : "");
        break;
    case KVP_SET_U32:
        if (*CFIELD(uint32_t, d, r))
            snprintf(buf, n, "%" PRIu32, *CFIELD(uint32_t, d, r));
        break;
    case KVP_SET_COUNT:
        if (*CFIELD(uint64_t, d, r))
            snprintf(buf, n, "%" PRIu64, *CFIELD(uint64_t, d, r));
        break;
    case KVP_SET_BYTES: {
        uint64_t v = *CFIELD(uint64_t, d, r);
        bool given = strcmp(r->key, "activation_memory") == 0   ? d->activation_given
                     : strcmp(r->key, "non_torch_memory") == 0 ? d->non_torch_given
                     : strcmp(r->key, "gpu_memory") == 0       ? !gpu || v != gpu->memory_bytes
                                                               : v != 0;
        if (given) { /* exact, in the largest binary unit that divides it: 80GiB, 512MiB, 1000B */
            uint32_t u = 0;
            while (u < 4 && v && v % 1024 == 0) { /* up to TiB: kvp_parse_bytes reads no larger unit */
                v /= 1024;
                u++;
            }
            snprintf(buf, n, "%" PRIu64 "%s", v, kvp_unit_name(u, false));
        }
        break;
    }
    case KVP_SET_FORMAT: /* K and V each; kv_dtype is what both say, "" where they differ */
        if (strcmp(r->key, "kv_dtype") != 0) {
            kvp_format_name(r->key[0] == 'k' ? &d->k : &d->v, buf, n);
        } else {
            char v[KVP_SETTING_VALUE_MAX];
            if (strcmp(kvp_format_name(&d->k, buf, n), kvp_format_name(&d->v, v, sizeof v)) != 0)
                buf[0] = '\0';
        }
        break;
    case KVP_SET_WEIGHTS: /* auto stays auto: what it chose is d->w */
        if (d->w_auto)
            snprintf(buf, n, "auto");
        else
            kvp_wstore_name(&d->w, buf, n);
        break;
    case KVP_SET_FRACTION:
        if (d->util > 0)
            snprintf(buf, n, "%.17g", d->util);
        break;
    case KVP_SET_FLAG:
        if (*CFIELD(bool, d, r))
            snprintf(buf, n, "true");
        break;
    case KVP_SET_SWITCH:
        if (d->flash_attn >= 0)
            snprintf(buf, n, "%s", d->flash_attn ? "on" : "off");
        break;
    case KVP_SET_SPLIT:
        for (uint32_t i = 0, o = 0; i < KVP_MAX_STAGES && d->split[i] && o < n; i++)
            o += (uint32_t)snprintf(buf + o, n - o, "%s%" PRIu32, i ? "," : "", d->split[i]);
        break;
    case KVP_SET_OVERRIDES:
        snprintf(buf, n, "%s", d->override_tensor);
        break;
    case KVP_SET_LAYERS: { /* nothing for the default: all GPU layers, no experts kept in host memory */
        int32_t v = *CFIELD(int32_t, d, r);
        if (v == (strcmp(r->key, "n_gpu_layers") == 0 ? -1 : 0))
            break;
        if (v < 0)
            snprintf(buf, n, "all");
        else
            snprintf(buf, n, "%" PRId32, v);
        break;
    }
    }
    return buf;
}
