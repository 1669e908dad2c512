/* emit.c -- the launch command of a planned deployment (include/kvplan/emit.h).
 *
 * Every flag that changes the engine's memory is set explicitly, with the
 * value the fit used (the release's defaults included), so that the
 * engine's start-up reproduces the planned pool whatever its defaults are.
 * Flag names, as each engine's argument parser spells them:
 *   vLLM 0.11.0    vllm/engine/arg_utils.py EngineArgs.add_cli_args
 *   SGLang 0.5     python/sglang/srt/server_args.py ServerArgs.add_cli_args
 *   llama.cpp      common/arg.cpp common_params_parser_init (llama-server)
 *   TRT-LLM 1.0    tensorrt_llm/commands/serve.py (trtllm-serve's click options)
 * Settings that are kvplan's assumptions about a run, not engine flags
 * (--activation-memory, --weights-memory ...), have no flag: they are named
 * after the command as a comment.
 */
#include "kvplan/emit.h"

#include <stdio.h>
#include <string.h>

#include "kvplan/num.h"
#include "profile.h"

/* A word of a shell command: as it is when it needs no quoting, else in single quotes. */
static void word(struct kvp_buf *b, const char *w)
{
    bool plain = w[0] != '\0';
    for (const char *c = w; *c && plain; c++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@+,", *c) != NULL;
    if (plain) {
        kvp_buf_printf(b, " %s", w);
        return;
    }
    kvp_buf_put(b, " '", 2);
    for (const char *c = w; *c; c++)
        if (*c == '\'')
            kvp_buf_put(b, "'\\''", 4);
        else
            kvp_buf_put(b, c, 1);
    kvp_buf_put(b, "'", 1);
}

static void flag_u64(struct kvp_buf *b, const char *flag, uint64_t v)
{
    kvp_buf_printf(b, " %s %llu", flag, (unsigned long long)v);
}

/* The model as vLLM, SGLang and TRT-LLM take it, written to b: its Hugging
 * Face id; a GGUF file; for a config.json, its folder (where the weights lie
 * beside it); else a stand-in, its name, that notes says a user replaces
 * (a kvplan YAML or a config file named otherwise is no model an engine loads). */
static void model_word(const struct kvp_model *m, struct kvp_buf *b, struct kvp_buf *notes)
{
    const char *base = strrchr(m->file, '/');
    char dir[sizeof m->file];
    base = base ? base + 1 : m->file;
    if (m->hf_id[0] || (m->file[0] && strstr(m->file, ".gguf"))) {
        word(b, m->hf_id[0] ? m->hf_id : m->file);
    } else if (strcmp(base, "config.json") == 0) {
        snprintf(dir, sizeof dir, "%.*s", base > m->file + 1 ? (int)(base - m->file - 1) : base > m->file ? 1 : 0,
                 m->file);
        word(b, dir[0] ? dir : ".");
        kvp_buf_printf(notes, "%s %s: the folder of config.json, with the weights beside it", notes->len ? ";" : "",
                       dir[0] ? dir : ".");
    } else {
        word(b, m->name);
        kvp_buf_printf(notes, "%s %s stands for the model's Hugging Face id or folder (%s is no model an engine "
                       "loads)", notes->len ? ";" : "", m->name, m->file[0] ? base : "a built-in without a Hub id");
    }
}

static bool plain(const struct kvp_format *f)
{
    char name[64];
    return strcmp(kvp_format_name(f, name, sizeof name), kvp_dtype_info(f->dtype)->name) == 0;
}

/* The KV cache dtype flag's value for f under vLLM or SGLang (names: their choices). */
static enum kvp_status cache_dtype(const struct kvp_model *m, const struct kvp_format *f, bool sglang,
                                   const char **out, struct kvp_error *err)
{
    char name[64];
    *out = NULL;
    if (plain(f) && f->dtype == m->dtype)
        *out = "auto";
    else if (plain(f) && f->dtype == KVP_DTYPE_FP8_E4M3)
        *out = sglang ? "fp8_e4m3" : "fp8";
    else if (plain(f) && f->dtype == KVP_DTYPE_FP8_E5M2)
        *out = "fp8_e5m2";
    else if (plain(f) && f->dtype == KVP_DTYPE_BF16 && !sglang)
        *out = "bfloat16";
    if (*out)
        return KVP_OK;
    return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s has no KV cache dtype '%s' (its --kv-cache-dtype takes %s)",
                    sglang ? "SGLang" : "vLLM", kvp_format_name(f, name, sizeof name),
                    sglang ? "auto, fp8_e4m3, fp8_e5m2" : "auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2");
}

/* Weights other than as stored: what the engine can be told (an fp8 online quantization),
 * else a note that the checkpoint must be stored so. */
static void weights(const struct kvp_deploy *d, bool vllm, struct kvp_buf *b, struct kvp_buf *notes)
{
    char name[64];
    if (d->w.kind == KVP_WSTORE_CHECKPOINT)
        return;
    if (d->w.kind == KVP_WSTORE_FORMAT &&
        (d->w.q.kind == KVP_WQ_FP8 || (d->w.q.kind == KVP_WQ_FORMAT && d->w.q.f.dtype == KVP_DTYPE_FP8_E4M3))) {
        kvp_buf_printf(b, " --quantization fp8");
        return;
    }
    kvp_buf_printf(notes, "%s weights as %s: serve a checkpoint stored so (%s quantizes only to fp8 at load)",
                   notes->len ? ";" : "", kvp_wstore_name(&d->w, name, sizeof name), vllm ? "vLLM" : "SGLang");
}

static enum kvp_status vllm(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                            struct kvp_buf *b, struct kvp_buf *notes, struct kvp_error *err)
{
    const char *kv;
    enum kvp_status st;
    if ((st = cache_dtype(m, &d->k, false, &kv, err)) != KVP_OK)
        return st;
    kvp_buf_printf(b, "vllm serve");
    model_word(m, b, notes);
    flag_u64(b, "--tensor-parallel-size", d->tp);
    flag_u64(b, "--pipeline-parallel-size", d->pp);
    if (d->dp > 1)
        flag_u64(b, "--data-parallel-size", d->dp);
    if (d->expert_parallel)
        kvp_buf_printf(b, " --enable-expert-parallel");
    if (d->redundant_experts) /* 0.11.0 arg_utils.py: --num-redundant-experts is deprecated for --eplb-config */
        kvp_buf_printf(b, " --enable-eplb --eplb-config '{\"num_redundant_experts\":%u}'", d->redundant_experts);
    flag_u64(b, "--max-model-len", d->context);
    if (d->kv_memory)
        flag_u64(b, "--kv-cache-memory-bytes", d->kv_memory);
    else
        kvp_buf_printf(b, " --gpu-memory-utilization %.4g", f->util);
    kvp_buf_printf(b, " --kv-cache-dtype %s", kv);
    flag_u64(b, "--block-size", f->block_size);
    flag_u64(b, "--max-num-seqs", kvp_profile_max_seqs(d));
    flag_u64(b, "--max-num-batched-tokens", f->reserve.profile_tokens);
    if (d->max_loras) {
        kvp_buf_printf(b, " --enable-lora");
        flag_u64(b, "--max-loras", d->max_loras);
        flag_u64(b, "--max-lora-rank", d->max_lora_rank ? d->max_lora_rank : 16);
    }
    weights(d, true, b, notes);
    return KVP_OK;
}

static enum kvp_status sglang(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                              struct kvp_buf *b, struct kvp_buf *notes, struct kvp_error *err)
{
    const char *kv;
    enum kvp_status st;
    if ((st = cache_dtype(m, &d->k, true, &kv, err)) != KVP_OK)
        return st;
    kvp_buf_printf(b, "python3 -m sglang.launch_server --model-path");
    model_word(m, b, notes);
    flag_u64(b, "--tp-size", d->tp);
    flag_u64(b, "--pp-size", d->pp);
    if (d->dp > 1)
        flag_u64(b, "--dp-size", d->dp);
    if (d->dp_attention)
        kvp_buf_printf(b, " --enable-dp-attention");
    if (d->expert_parallel)
        flag_u64(b, "--ep-size", d->tp);
    if (d->redundant_experts)
        flag_u64(b, "--ep-num-redundant-experts", d->redundant_experts);
    flag_u64(b, "--context-length", d->context);
    kvp_buf_printf(b, " --mem-fraction-static %.4g", f->util);
    kvp_buf_printf(b, " --kv-cache-dtype %s", kv);
    flag_u64(b, "--page-size", f->block_size);
    if (f->max_running)
        flag_u64(b, "--max-running-requests", f->max_running);
    if (f->reserve.profile_tokens)
        flag_u64(b, "--chunked-prefill-size", f->reserve.profile_tokens);
    weights(d, false, b, notes);
    return KVP_OK;
}

/* llama.cpp's -ctk/-ctv take a ggml type of its KV list (common/arg.cpp kv_cache_types). */
static enum kvp_status ggml_cache(const struct kvp_format *f, const char **out, struct kvp_error *err)
{
    static const enum kvp_dtype ok[] = {KVP_DTYPE_F32,  KVP_DTYPE_F16,  KVP_DTYPE_BF16, KVP_DTYPE_Q8_0,  KVP_DTYPE_Q4_0,
                                        KVP_DTYPE_Q4_1, KVP_DTYPE_IQ4_NL, KVP_DTYPE_Q5_0, KVP_DTYPE_Q5_1};
    char name[64];
    for (size_t i = 0; plain(f) && i < sizeof ok / sizeof ok[0]; i++)
        if (f->dtype == ok[i]) {
            *out = kvp_dtype_info(f->dtype)->name;
            return KVP_OK;
        }
    return kvp_fail(err, KVP_ERR_UNSUPPORTED, "llama.cpp has no KV cache type '%s' (-ctk/-ctv take f32, f16, "
                    "bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)", kvp_format_name(f, name, sizeof name));
}

static enum kvp_status llamacpp(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                                struct kvp_buf *b, struct kvp_buf *notes, struct kvp_error *err)
{
    const char *k, *v;
    char file[KVP_NAME_MAX + 8];
    enum kvp_status st;
    if ((st = ggml_cache(&d->k, &k, err)) != KVP_OK || (st = ggml_cache(&d->v, &v, err)) != KVP_OK)
        return st;
    kvp_buf_printf(b, "llama-server -m");
    if (m->file[0] && strstr(m->file, ".gguf")) {
        word(b, m->file);
    } else {
        snprintf(file, sizeof file, "%s.gguf", m->name);
        word(b, file);
        kvp_buf_printf(notes, "%s the model as a GGUF file (%s here stands for it)", notes->len ? ";" : "", file);
    }
    flag_u64(b, "-c", f->cells * f->n_stream); /* -c is every sequence's cells together */
    flag_u64(b, "-np", f->n_seq);
    if (d->n_gpu_layers < 0)
        kvp_buf_printf(b, " -ngl 999"); /* more than the layers: all of them, the output layer too */
    else
        kvp_buf_printf(b, " -ngl %d", (int)d->n_gpu_layers);
    if (d->n_cpu_moe < 0)
        kvp_buf_printf(b, " --cpu-moe");
    else if (d->n_cpu_moe > 0)
        kvp_buf_printf(b, " --n-cpu-moe %d", (int)d->n_cpu_moe);
    if (d->override_tensor[0]) {
        kvp_buf_printf(b, " -ot");
        word(b, d->override_tensor);
    }
    if (d->no_kv_offload)
        kvp_buf_printf(b, " -nkvo");
    kvp_buf_printf(b, " -ctk %s -ctv %s -fa %s", k, v, d->flash_attn < 0 ? "auto" : d->flash_attn ? "on" : "off");
    flag_u64(b, "-b", d->n_batch);
    flag_u64(b, "-ub", d->n_ubatch);
    if (d->kv_unified)
        kvp_buf_printf(b, " --kv-unified");
    if (d->swa_full)
        kvp_buf_printf(b, " --swa-full");
    if (d->n_gpus > 1) {
        kvp_buf_printf(b, " -ts ");
        for (uint32_t i = 0; i < f->n_devices; i++)
            kvp_buf_printf(b, "%s%u", i ? "," : "", f->device[i].model_layers);
    }
    return KVP_OK;
}

/* Ollama takes its server's settings from the environment (envconfig/config.go): the context
 * (OLLAMA_CONTEXT_LENGTH), the streams (OLLAMA_NUM_PARALLEL), the KV type (OLLAMA_KV_CACHE_TYPE: f16,
 * q8_0, q4_0) and flash attention (OLLAMA_FLASH_ATTENTION); the batch it picks itself. */
static enum kvp_status ollama(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                              struct kvp_buf *b, struct kvp_buf *notes, struct kvp_error *err)
{
    char name[64];
    (void)f;
    if (!plain(&d->k) || !plain(&d->v) || d->k.dtype != d->v.dtype ||
        (d->k.dtype != KVP_DTYPE_F16 && d->k.dtype != KVP_DTYPE_Q8_0 && d->k.dtype != KVP_DTYPE_Q4_0))
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "Ollama's OLLAMA_KV_CACHE_TYPE sets K and V alike to f16, q8_0 or "
                        "q4_0 (not K %s)", kvp_format_name(&d->k, name, sizeof name));
    kvp_buf_printf(b, "OLLAMA_CONTEXT_LENGTH=%llu OLLAMA_NUM_PARALLEL=%u", (unsigned long long)d->context, d->n_seq);
    if (d->k.dtype != KVP_DTYPE_F16)
        kvp_buf_printf(b, " OLLAMA_KV_CACHE_TYPE=%s", kvp_dtype_info(d->k.dtype)->name);
    if (d->flash_attn >= 0)
        kvp_buf_printf(b, " OLLAMA_FLASH_ATTENTION=%d", d->flash_attn);
    kvp_buf_printf(b, " ollama serve");
    kvp_buf_printf(notes, "%s then `ollama run %s`; Ollama picks num_batch itself (%u here%s)", notes->len ? ";" : "",
                   m->name, d->n_batch, d->ollama_auto & KVP_OLLAMA_BATCH ? "" : ": `num_batch` in a Modelfile");
    return KVP_OK;
}

static enum kvp_status trtllm(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                              struct kvp_buf *b, struct kvp_buf *notes, struct kvp_error *err)
{
    if (!(plain(&d->k) && (d->k.dtype == m->dtype || d->k.dtype == KVP_DTYPE_FP8_E4M3)))
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "trtllm-serve takes the KV cache dtype from an options file "
                        "(kv_cache_config.dtype: auto or fp8); kvplan writes only those two");
    kvp_buf_printf(b, "trtllm-serve");
    model_word(m, b, notes);
    flag_u64(b, "--tp_size", d->tp);
    flag_u64(b, "--pp_size", d->pp);
    flag_u64(b, "--max_seq_len", d->context);
    flag_u64(b, "--max_batch_size", kvp_profile_max_seqs(d));
    if (f->reserve.profile_tokens)
        flag_u64(b, "--max_num_tokens", f->reserve.profile_tokens);
    kvp_buf_printf(b, " --kv_cache_free_gpu_memory_fraction %.4g", f->util);
    if (d->k.dtype == KVP_DTYPE_FP8_E4M3 && d->k.dtype != m->dtype)
        kvp_buf_printf(notes, "%s fp8 KV cache: kv_cache_config: {dtype: fp8} in --extra_llm_api_options",
                       notes->len ? ";" : "");
    return KVP_OK;
}

enum kvp_status kvp_emit_command(const struct kvp_model *m, const struct kvp_deploy *d, const struct kvp_fit *f,
                                 struct kvp_buf *b, struct kvp_error *err)
{
    struct kvp_buf notes = {0};
    enum kvp_status st;
    switch (d->engine) {
    case KVP_ENGINE_VLLM: st = vllm(m, d, f, b, &notes, err); break;
    case KVP_ENGINE_SGLANG: st = sglang(m, d, f, b, &notes, err); break;
    case KVP_ENGINE_LLAMACPP:
        st = (kvp_deploy_release(d)->rules & KVP_REL_OLLAMA ? ollama : llamacpp)(m, d, f, b, &notes, err);
        break;
    case KVP_ENGINE_TRTLLM: st = trtllm(m, d, f, b, &notes, err); break;
    default:
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s has no launch command to emit (vllm, sglang, llamacpp, trtllm)",
                        kvp_engine_info(d->engine)->name);
    }
    if (st == KVP_OK) {
        if (d->activation_given || d->non_torch_given || d->weights_memory || d->cuda_graph_memory)
            kvp_buf_printf(&notes, "%s the reserve kvplan was given (--activation-memory, --non-torch-memory, "
                           "--weights-memory, --cuda-graph-memory) is no engine flag", notes.len ? ";" : "");
        if (d->cpu_offload)
            kvp_buf_printf(&notes, "%s the CPU KV tier (--cpu-offload) needs the engine's offloading connector, "
                           "configured apart", notes.len ? ";" : "");
        kvp_buf_put(b, "\n", 1);
        if (notes.len)
            kvp_buf_printf(b, "#%s\n", notes.data);
    }
    kvp_buf_release(&notes);
    if (st == KVP_OK && b->nomem)
        st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory writing the command");
    return st;
}
