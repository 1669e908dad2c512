/* log.h -- an engine's start-up log read back: the settings it prints and
 * the memory figures it logs, each with the line it came from.
 *
 * The text is taken as users paste it: timestamps, process prefixes
 * ("(VllmWorker rank=0 pid=123)", "[2025-01-01 12:00:00 TP0]"), ANSI colour
 * codes and several ranks interleaved. A figure is the first one logged by
 * rank 0 (a line naming another rank is read only when rank 0 logs none);
 * docs/engines.md ("Start-up logs") lists the lines read for each engine.
 *
 *     struct kvp_log log;
 *     if (kvp_log_parse(text, len, "vllm.log", &log, &err) != KVP_OK) ...
 *     if (log.fig[KVP_LOG_KV_BUDGET].line)  // 0: the log does not give it
 *         printf("%.2f GiB\n", log.fig[KVP_LOG_KV_BUDGET].value / (1u << 30));
 *
 * kvp_log_parse does no I/O: a front end reads the file or the standard
 * input ("-") first, kvp_read_input (kvplan/io.h) up to KVP_LOG_FILE_MAX
 * bytes. The caller owns *out.
 */
#ifndef KVPLAN_LOG_H
#define KVPLAN_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/deploy.h"
#include "kvplan/error.h"
#include "kvplan/settings.h"

/* The figures an engine logs at start-up, per GPU. Bytes unless said. */
enum kvp_log_fig {
    KVP_LOG_GPU_MEMORY,  /* the device's total (vLLM total_gpu_memory, TRT-LLM "total") */
    KVP_LOG_WEIGHTS,     /* "Model loading took", SGLang "mem usage" at weight load, llama.cpp model buffers */
    KVP_LOG_ACTIVATION,  /* vLLM activation peak; llama.cpp compute buffers */
    KVP_LOG_NON_TORCH,   /* vLLM non_torch_memory */
    KVP_LOG_CUDA_GRAPH,  /* CUDA graph capture (vLLM V0 after the KV cache; SGLang's capture) */
    KVP_LOG_KV_BUDGET,   /* the KV cache's memory (vLLM budget, SGLang K + V, llama.cpp KV size) */
    KVP_LOG_KV_TOKENS,   /* token capacity (count; vLLM V0: blocks x block size) */
    KVP_LOG_BLOCKS,      /* GPU blocks (count) */
    KVP_LOG_CONCURRENCY, /* requests of max_model_len tokens (vLLM "Maximum concurrency") */
    KVP_LOG_FIG_COUNT
};

struct kvp_log_value {
    double value;      /* bytes or a count */
    double resolution; /* half the last digit printed, in the same unit: the rounding of the print */
    uint32_t line;     /* 1-based; 0 = not logged */
};

#define KVP_LOG_TEXT_MAX 256

struct kvp_log {
    enum kvp_engine_id engine;     /* KVP_ENGINE_VLLM, _SGLANG, _LLAMACPP or _TRTLLM */
    uint32_t engine_line;          /* the first line that named it */
    char version[32];              /* the release the log prints ("0.7.3", "b6182"); "" = none */
    uint32_t version_line;
    bool vllm_v0;                  /* vLLM V0 worker lines ("# GPU blocks", "Memory profiling results") */
    char model[KVP_LOG_TEXT_MAX];  /* the model the log names ("" = none) */
    uint32_t model_line;
    struct kvp_settings settings;  /* what the log prints, as kvplan settings (engine, context, tp ...) */
    uint32_t setting_line[KVP_SETTINGS_MAX]; /* the line of each given row */
    struct kvp_log_value fig[KVP_LOG_FIG_COUNT];
    uint64_t concurrency_context;  /* the tokens per request of KVP_LOG_CONCURRENCY */
    char refused[KVP_LOG_TEXT_MAX]; /* the engine's start-up error, "" = none */
    uint32_t refused_line;
    double host_weights;           /* llama.cpp: model buffers on the host (-ngl, --n-cpu-moe), bytes */
    uint32_t host_weights_line;
    char unmodelled[KVP_LOG_TEXT_MAX]; /* settings printed that size memory and kvplan does not model */
    uint32_t lines;                /* lines read */
};

/* A figure's name for reports and JSON keys: "kv_budget", "weights" ... */
KVP_API const char *kvp_log_fig_name(enum kvp_log_fig f);

/* Read a start-up log of len bytes (name for messages). Errors, at
 * name:line:col: a NUL byte or other binary input (KVP_ERR_SYNTAX); no line
 * of any engine kvplan reads (KVP_ERR_UNSUPPORTED, at line 1). */
KVP_API enum kvp_status kvp_log_parse(const char *text, size_t len, const char *name, struct kvp_log *out,
                                      struct kvp_error *err);

#define KVP_LOG_FILE_MAX (16u << 20) /* bytes of a log a front end reads (kvp_read_input); more is an error */

#endif
