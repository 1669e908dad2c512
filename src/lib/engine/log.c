/* log.c -- an engine's start-up log read back (kvp_log_parse, include/kvplan/log.h).
 *
 * Each line is cleaned (ANSI escapes and '\r' dropped), then searched for
 * the phrases the engines print: no prefix is parsed, so a timestamp or a
 * process tag in front of the phrase changes nothing. Settings printed as
 * Python keyword arguments (vLLM's "non-default args: {...}" and "with
 * config: ...", SGLang's "ServerArgs(...)") are read with the engine's flag
 * names by kvp_settings_from_command, one flag at a time, so a flag means
 * here what it means on a command line. docs/engines.md lists the phrases.
 */
#include "kvplan/log.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/render.h"

#define LINE_MAX_BYTES 16384 /* a longer line is read up to here (vLLM's config line is ~3 KiB) */
#define MIN_LINE 12           /* the shortest line read: "GPU blocks: N" */
#define SEARCH_LINES 262144  /* lines searched: a start-up is at the top, and a figure's first print wins */
#define KWARGS_LINES 4        /* argument dumps read (each rank prints one); later ones cost time and change nothing */
#define GIB 1073741824.0
#define MIB 1048576.0

struct parse {
    struct kvp_log *log;
    bool engine_set;
    bool strong; /* the engine was named by a phrase of its own */
    bool other_rank[KVP_LOG_FIG_COUNT]; /* the figure came from a rank other than 0 */
    uint32_t line;
    bool rank0; /* the current line is rank 0's (or names no rank) */
    uint32_t kwargs_lines; /* argument lines read: the first KWARGS_LINES, as a setting's first print wins */
};

static const char *const fig_names[KVP_LOG_FIG_COUNT] = {
    "gpu_memory", "weights", "activation", "non_torch", "cuda_graph", "kv_budget", "kv_tokens", "blocks",
    "max_concurrency",
};

const char *kvp_log_fig_name(enum kvp_log_fig f)
{
    return f < KVP_LOG_FIG_COUNT ? fig_names[f] : "?";
}

/* A number at or after s (within 48 bytes, not past a ';'): "75,824", "14.9888", "1.56x". *res gets
 * half its last digit; *end the byte after it. */
static bool number(const char *s, double *v, double *res, const char **end)
{
    char buf[64];
    size_t n = 0;
    int decimals = -1;
    for (int i = 0; *s && !isdigit((unsigned char)*s); s++, i++)
        if (i >= 48 || *s == ';')
            return false;
    for (; (isdigit((unsigned char)*s) || *s == '.' || *s == ',') && n + 1 < sizeof buf; s++) {
        if (*s == ',') {
            if (!(isdigit((unsigned char)s[1]) && isdigit((unsigned char)s[2]) && isdigit((unsigned char)s[3])))
                break; /* a list's comma, not a thousands separator */
            continue;
        }
        if (*s == '.') {
            if (decimals >= 0 || !isdigit((unsigned char)s[1]))
                break;
            decimals = 0;
        } else if (decimals >= 0) {
            decimals++;
        }
        buf[n++] = *s;
    }
    buf[n] = '\0';
    *v = strtod(buf, NULL);
    *res = 0.5;
    for (int i = 0; i < decimals; i++)
        *res /= 10;
    *end = s;
    return true;
}

/* The unit after a number: GiB or GB (vLLM and SGLang print bytes / 2^30 as "GB"), MiB or MB, KiB; 0 = none. */
static double unit(const char *s)
{
    while (*s == ' ')
        s++;
    if (strncmp(s, "GiB", 3) == 0 || strncmp(s, "GB", 2) == 0)
        return GIB;
    if (strncmp(s, "MiB", 3) == 0 || strncmp(s, "MB", 2) == 0)
        return MIB;
    if (strncmp(s, "KiB", 3) == 0 || strncmp(s, "KB", 2) == 0)
        return 1024.0;
    return 0;
}

/* A figure a log can print: a byte count or a count below 2^63 (a longer number is no figure, and
 * would not convert to an integer). */
static bool plausible(double v)
{
    return v >= 0 && v < 9.0e18;
}

static void put_fig(struct parse *p, enum kvp_log_fig f, double v, double res)
{
    struct kvp_log_value *x = &p->log->fig[f];
    if (!plausible(v))
        return;
    if (x->line && !(p->other_rank[f] && p->rank0))
        return; /* the first rank-0 figure wins */
    *x = (struct kvp_log_value){v, res, p->line};
    p->other_rank[f] = !p->rank0;
}

/* The figure after key in s: bytes (a unit required) or a count. Returns where it ended, or NULL. */
static const char *fig_after(struct parse *p, const char *s, const char *key, enum kvp_log_fig f, bool bytes)
{
    const char *at = strstr(s, key), *end;
    double v, res, u = 1;
    if (!at || !number(at + strlen(key), &v, &res, &end))
        return NULL;
    if (bytes && (u = unit(end)) == 0)
        return NULL;
    put_fig(p, f, v * u, res * u);
    return end;
}

/* Add a MiB figure (llama.cpp logs one line per device or cache). */
static void add_fig(struct parse *p, enum kvp_log_fig f, double v, double res)
{
    struct kvp_log_value *x = &p->log->fig[f];
    if (!plausible(x->value + v))
        return;
    if (!x->line)
        x->line = p->line;
    x->value += v;
    x->resolution += res;
}

/* ---- settings ---- */

static void put_setting(struct parse *p, const char *key, const char *value)
{
    struct kvp_error e = {0};
    int row = kvp_setting_find(key);
    if (row < 0 || (p->log->settings.given >> row & 1))
        return; /* the first print of a setting wins */
    if (kvp_settings_put(&p->log->settings, key, value, &e) == KVP_OK)
        p->log->setting_line[row] = p->line;
}

static void note_unmodelled(struct parse *p, const char *key, const char *value)
{
    char *u = p->log->unmodelled;
    size_t n = strlen(u);
    if (strstr(u, key))
        return;
    snprintf(u + n, sizeof p->log->unmodelled - n, "%s%s=%s", n ? ", " : "", key, value);
}

/* One engine flag as the engine's command line would give it. */
static void engine_flag(struct parse *p, const char *key, const char *value)
{
    static const char *const skip[] = {"dtype", "tokenizer", "served_model_name", "device", "seed", NULL};
    struct kvp_settings one;
    struct kvp_buf ignored = {0};
    struct kvp_error e = {0};
    char flag[80], model[8];
    const char *argv[8];
    int n = 0;

    for (const char *const *s = skip; *s; s++)
        if (strcmp(key, *s) == 0)
            return;
    switch (p->log->engine) {
    case KVP_ENGINE_SGLANG:
        argv[n++] = "python3", argv[n++] = "-m", argv[n++] = "sglang.launch_server", argv[n++] = "--model-path";
        break;
    case KVP_ENGINE_TRTLLM:
        argv[n++] = "trtllm-serve";
        break;
    default:
        argv[n++] = "vllm", argv[n++] = "serve";
        break;
    }
    argv[n++] = "m";
    snprintf(flag, sizeof flag, "--%s", key);
    argv[n++] = flag;
    if (strcmp(value, "True") != 0)
        argv[n++] = value;
    if (kvp_settings_from_command(argv, n, NULL, 0, &one, model, sizeof model, &ignored, &e) == KVP_OK) {
        for (uint32_t row = 1; row < kvp_settings_count(); row++) /* row 0, the engine, is the program's */
            if ((one.given >> row & 1) && !(p->log->settings.given >> row & 1)) {
                p->log->settings.given |= 1ull << row;
                memcpy(p->log->settings.value[row], one.value[row], sizeof one.value[row]);
                p->log->setting_line[row] = p->line;
            }
    } else if (e.code == KVP_ERR_UNSUPPORTED && strcmp(value, "0") != 0 && strcmp(value, "1") != 0) {
        note_unmodelled(p, key, value);
    }
    kvp_buf_release(&ignored);
}

/* Python keyword arguments or a dict from s: key=value, 'key': value; values quoted, None, True, numbers. */
static void kwargs(struct parse *p, const char *s)
{
    if (p->kwargs_lines++ >= KWARGS_LINES)
        return;
    while (*s) {
        char key[64], value[KVP_SETTING_VALUE_MAX];
        size_t k = 0, v = 0;
        while (*s && !(isalpha((unsigned char)*s) || *s == '_'))
            s++;
        while ((isalnum((unsigned char)*s) || *s == '_') && k + 1 < sizeof key)
            key[k++] = *s++;
        key[k] = '\0';
        if (*s == '\'' || *s == '"')
            s++;
        while (*s == ' ')
            s++;
        if (*s != '=' && *s != ':')
            continue;
        for (s++; *s == ' '; s++)
            ;
        if (*s == '\'' || *s == '"') {
            char q = *s++;
            for (; *s && *s != q; s++)
                if (v + 1 < sizeof value)
                    value[v++] = *s;
            if (*s)
                s++;
        } else {
            int depth = 0;
            for (; *s && (depth || (*s != ',' && *s != ')' && *s != '}')); s++) {
                depth += *s == '(' || *s == '[' || *s == '{';
                depth -= depth && (*s == ')' || *s == ']' || *s == '}');
                if (v + 1 < sizeof value)
                    value[v++] = *s;
            }
            while (v && value[v - 1] == ' ')
                v--;
        }
        value[v] = '\0';
        if (!k || !v || strcmp(value, "None") == 0 || strcmp(value, "False") == 0 || strchr("[({", value[0]))
            continue;
        if (strcmp(key, "model") == 0 || strcmp(key, "model_path") == 0) {
            if (!p->log->model[0]) {
                snprintf(p->log->model, sizeof p->log->model, "%s", value);
                p->log->model_line = p->line;
            }
            continue;
        }
        engine_flag(p, key, value);
    }
}

/* ---- the engines' lines ---- */

static void vllm_line(struct parse *p, const char *s)
{
    const char *at;
    double v, res, u;
    char buf[32];

    if ((at = strstr(s, "vLLM API server version ")))
        at += strlen("vLLM API server version ");
    else if ((at = strstr(s, "LLM engine (v")))
        at += strlen("LLM engine (v");
    if (at && !p->log->version[0] && sscanf(at, "%31[0-9.]", p->log->version) == 1)
        p->log->version_line = p->line;
    if ((at = strstr(s, "non-default args:")))
        kwargs(p, at + strlen("non-default args:"));
    if ((at = strstr(s, "with config:")))
        kwargs(p, at + strlen("with config:"));
    if (strstr(s, "Memory profiling results") || strstr(s, "GPU blocks:") || strstr(s, "CUDA blocks:") ||
        strstr(s, "cuda blocks:") || strstr(s, "the rest of the memory reserved for KV Cache"))
        p->log->vllm_v0 = true;
    fig_after(p, s, "Loading model weights took", KVP_LOG_WEIGHTS, true);
    fig_after(p, s, "Model loading took", KVP_LOG_WEIGHTS, true);
    fig_after(p, s, "model weights take", KVP_LOG_WEIGHTS, true);
    fig_after(p, s, "total_gpu_memory", KVP_LOG_GPU_MEMORY, true);
    fig_after(p, s, "non_torch_memory", KVP_LOG_NON_TORCH, true);
    fig_after(p, s, "activation peak memory", KVP_LOG_ACTIVATION, true);
    fig_after(p, s, "kv_cache_size=", KVP_LOG_KV_BUDGET, true);
    fig_after(p, s, "reserved for KV Cache is", KVP_LOG_KV_BUDGET, true);
    fig_after(p, s, "available_kv_cache_memory", KVP_LOG_KV_BUDGET, true);
    fig_after(p, s, "Available KV cache memory", KVP_LOG_KV_BUDGET, true);
    fig_after(p, s, "GPU KV cache size:", KVP_LOG_KV_TOKENS, false);
    if (!fig_after(p, s, "GPU blocks:", KVP_LOG_BLOCKS, false) &&
        !fig_after(p, s, "CUDA blocks:", KVP_LOG_BLOCKS, false))
        fig_after(p, s, "cuda blocks:", KVP_LOG_BLOCKS, false);
    fig_after(p, s, "Graph capturing finished", KVP_LOG_CUDA_GRAPH, true);
    if ((at = strstr(s, "peak_torch_memory=")) && number(at, &v, &res, &at) && (u = unit(at)) > 0 &&
        p->log->fig[KVP_LOG_WEIGHTS].line) /* V0's profile line: the peak holds the weights */
        put_fig(p, KVP_LOG_ACTIVATION, v * u - p->log->fig[KVP_LOG_WEIGHTS].value, res * u);
    if ((at = strstr(s, "gpu_memory_utilization")) && (at += strlen("gpu_memory_utilization"), true) &&
        isdigit((unsigned char)at[strspn(at, "'\" :=(")]) && number(at, &v, &res, &at) && v > 0 && v <= 1) {
        snprintf(buf, sizeof buf, "%g", v);
        put_setting(p, "util", buf);
    }
    if ((at = strstr(s, "enabled with max_num_batched_tokens=")) && number(at + 36, &v, &res, &at)) {
        snprintf(buf, sizeof buf, "%.0f", v);
        put_setting(p, "max_num_batched_tokens", buf);
    }
    if ((at = strstr(s, "Maximum concurrency for ")) && number(at, &v, &res, &at) && strstr(at, "per request:")) {
        if (!p->log->fig[KVP_LOG_CONCURRENCY].line && plausible(v))
            p->log->concurrency_context = (uint64_t)v;
        fig_after(p, at, "per request:", KVP_LOG_CONCURRENCY, false);
    }
    if ((at = strstr(s, "maximum number of tokens that can be stored in KV cache")) && !p->log->refused[0]) {
        const char *from = strstr(s, "The model's");
        snprintf(p->log->refused, sizeof p->log->refused, "%s", from ? from : at);
        p->log->refused_line = p->line;
        fig_after(p, at, "KV cache", KVP_LOG_KV_TOKENS, false);
        if ((at = strstr(s, "max seq len (")) && number(at, &v, &res, &at)) {
            snprintf(buf, sizeof buf, "%.0f", v);
            put_setting(p, "context", buf);
        }
    }
}

static void sglang_line(struct parse *p, const char *s)
{
    const char *at;
    double k, v, res;

    if ((at = strstr(s, "ServerArgs(")))
        kwargs(p, at + strlen("ServerArgs("));
    if ((at = strstr(s, "Load weight end")))
        fig_after(p, at, "mem usage=", KVP_LOG_WEIGHTS, true);
    if ((at = strstr(s, "Capture cuda graph end")))
        fig_after(p, at, "mem usage=", KVP_LOG_CUDA_GRAPH, true);
    if ((at = strstr(s, "KV Cache is allocated"))) {
        fig_after(p, at, "#tokens:", KVP_LOG_KV_TOKENS, false);
        if ((at = strstr(at, "K size:")) && number(at, &k, &res, &at) && unit(at) > 0 && (at = strstr(at, "V size:")) &&
            number(at, &v, &res, &at) && unit(at) > 0)
            put_fig(p, KVP_LOG_KV_BUDGET, (k + v) * GIB, 2 * res * GIB);
    }
    fig_after(p, s, "max_total_num_tokens=", KVP_LOG_KV_TOKENS, false);
}

/* A llama.cpp buffer line "DEV model buffer size = X MiB": the device's, host buffers aside. */
static void llamacpp_buffer(struct parse *p, const char *s, const char *what, enum kvp_log_fig f)
{
    const char *at = strstr(s, what), *dev, *end;
    char name[32];
    double v, res;
    if (!at || !number(at + strlen(what), &v, &res, &end) || unit(end) != MIB)
        return;
    for (dev = at; dev > s && dev[-1] == ' '; dev--)
        ;
    while (dev > s && dev[-1] != ' ' && dev[-1] != ':')
        dev--;
    snprintf(name, sizeof name, "%.*s", (int)strcspn(dev, " "), dev);
    if (strncmp(name, "CPU", 3) == 0 || strstr(name, "_Host")) {
        if (f == KVP_LOG_WEIGHTS && plausible(p->log->host_weights + v * MIB)) {
            p->log->host_weights += v * MIB;
            p->log->host_weights_line = p->log->host_weights_line ? p->log->host_weights_line : p->line;
        }
        return;
    }
    add_fig(p, f, v * MIB, res * MIB);
}

static void llamacpp_line(struct parse *p, const char *s)
{
    static const struct { const char *key, *setting; } ctx[] = {
        {"n_ctx", "context"}, {"n_batch", "n_batch"}, {"n_ubatch", "n_ubatch"}, {"n_seq_max", "n_seq"},
        {"flash_attn", "flash_attn"}, {"kv_unified", "kv_unified"},
    };
    const char *at, *end;
    double v, res;
    char dtype[16];

    if ((at = strstr(s, "build: ")) && !p->log->version[0] && sscanf(at + 7, "%30[0-9]", p->log->version + 1) == 1) {
        p->log->version[0] = 'b';
        p->log->version_line = p->line;
    }
    if ((at = strstr(s, "loaded meta data with")) && (at = strstr(at, " from ")) && !p->log->model[0]) {
        size_t n = strcspn(at + 6, " ");
        snprintf(p->log->model, sizeof p->log->model, "%.*s", (int)n, at + 6);
        p->log->model_line = p->line;
    }
    if (strstr(s, "llama_context:") || strstr(s, "llama_new_context_with_model:"))
        for (size_t i = 0; i < sizeof ctx / sizeof ctx[0]; i++) {
            char val[16];
            size_t n = strlen(ctx[i].key);
            if (!(at = strstr(s, ctx[i].key)) || (at[n] != ' ' && at[n] != '=') ||
                sscanf(at + n, " = %15s", val) != 1)
                continue;
            if (strcmp(ctx[i].setting, "flash_attn") == 0) {
                bool on = strcmp(val, "1") == 0 || strcmp(val, "enabled") == 0;
                bool off = strcmp(val, "0") == 0 || strcmp(val, "disabled") == 0;
                snprintf(val, sizeof val, "%s", on ? "on" : off ? "off" : "auto");
            }
            put_setting(p, ctx[i].setting, val);
        }
    llamacpp_buffer(p, s, "model buffer size =", KVP_LOG_WEIGHTS);
    llamacpp_buffer(p, s, "compute buffer size =", KVP_LOG_ACTIVATION);
    at = strstr(s, "llama_kv_cache") ? strstr(s, " size = ") : strstr(s, "KV self size");
    if (at && strstr(at, "K (") && number(at, &v, &res, &end) && unit(end) == MIB) {
        add_fig(p, KVP_LOG_KV_BUDGET, v * MIB, res * MIB);
        if (strstr(end, "cells") && !p->log->fig[KVP_LOG_KV_TOKENS].line && number(end, &v, &res, &end))
            put_fig(p, KVP_LOG_KV_TOKENS, v, 0.5);
        if (sscanf(strstr(at, "K (") + 3, "%15[a-z0-9_]", dtype) == 1)
            put_setting(p, "k_dtype", dtype);
        if (strstr(at, "V (") && sscanf(strstr(at, "V (") + 3, "%15[a-z0-9_]", dtype) == 1)
            put_setting(p, "v_dtype", dtype);
    }
}

static void trtllm_line(struct parse *p, const char *s)
{
    static const char *const reserve[] = {"for execution context memory", "GPU memory for runtime buffers",
                                          "GPU memory for decoder"};
    const char *at;
    if ((at = strstr(s, "TensorRT-LLM version: ")) && !p->log->version[0] &&
        sscanf(at + strlen("TensorRT-LLM version: "), "%31[0-9.]", p->log->version) == 1)
        p->log->version_line = p->line;
    if ((at = strstr(s, "for max tokens in paged KV cache"))) {
        fig_after(p, s, "Allocated", KVP_LOG_KV_BUDGET, true);
        fig_after(p, at, "KV cache", KVP_LOG_KV_TOKENS, false);
    }
    if ((at = strstr(s, "Using ")) && strstr(at, "tokens in paged KV cache")) /* before 0.9 */
        fig_after(p, at, "Using", KVP_LOG_KV_TOKENS, false);
    if ((at = strstr(s, "Allocate ")) && strstr(at, "bytes for k/v cache"))
        fig_after(p, at, "Allocate", KVP_LOG_KV_BUDGET, false); /* a byte count */
    if ((at = strstr(s, "calculating max tokens in paged kv cache")))
        fig_after(p, at, "total:", KVP_LOG_GPU_MEMORY, true);
    fig_after(p, s, "after loading model weights", KVP_LOG_WEIGHTS, true);
    fig_after(p, s, "Loaded engine size:", KVP_LOG_WEIGHTS, true); /* a TensorRT engine: its weights */
    for (size_t i = 0; i < sizeof reserve / sizeof reserve[0]; i++) { /* the C++ runtime's buffers: its reserve */
        const char *end;
        double v, res, u;
        if ((at = strstr(s, "Allocated ")) && strstr(at, reserve[i]) && number(at, &v, &res, &end) &&
            (u = unit(end)) > 0)
            add_fig(p, KVP_LOG_ACTIVATION, v * u, res * u);
    }
    if ((at = strstr(s, "Number of tokens per block:"))) {
        char n[16];
        if (sscanf(at + strlen("Number of tokens per block:"), " %15[0-9]", n) == 1)
            put_setting(p, "block_size", n);
    }
}

/* Which engine a line is from, if it says: a phrase only one engine prints names it for good; the
 * engine's bare name (a path, a URL) names it until such a phrase does. */
static void detect(struct parse *p, const char *s)
{
    static const struct {
        enum kvp_engine_id e;
        bool strong;
        const char *phrase;
    } marks[] = {
        {KVP_ENGINE_TRTLLM, true, "[TensorRT-LLM]"}, {KVP_ENGINE_TRTLLM, true, "TensorRT-LLM version"},
        {KVP_ENGINE_TRTLLM, true, "tokens in paged KV cache"}, {KVP_ENGINE_TRTLLM, true, "bytes for k/v cache"},
        {KVP_ENGINE_SGLANG, true, "ServerArgs("}, {KVP_ENGINE_SGLANG, true, "KV Cache is allocated"},
        {KVP_ENGINE_SGLANG, true, "Load weight begin"}, {KVP_ENGINE_SGLANG, true, "max_total_num_tokens="},
        {KVP_ENGINE_LLAMACPP, true, "llama_context:"}, {KVP_ENGINE_LLAMACPP, true, "llama_kv_cache"},
        {KVP_ENGINE_LLAMACPP, true, "load_tensors:"}, {KVP_ENGINE_LLAMACPP, true, "llama_model_loader:"},
        {KVP_ENGINE_LLAMACPP, true, "llama_new_context_with_model"},
        {KVP_ENGINE_VLLM, true, "vLLM API server version"}, {KVP_ENGINE_VLLM, true, "Memory profiling results"},
        {KVP_ENGINE_VLLM, true, "Available KV cache memory"}, {KVP_ENGINE_VLLM, true, "GPU KV cache size"},
        {KVP_ENGINE_VLLM, true, "Model loading took"}, {KVP_ENGINE_VLLM, true, "Loading model weights took"},
        {KVP_ENGINE_VLLM, true, "Maximum concurrency for"}, {KVP_ENGINE_VLLM, true, "model weights take"},
        {KVP_ENGINE_VLLM, true, "LLM engine (v"},
        {KVP_ENGINE_VLLM, true, "non-default args:"}, {KVP_ENGINE_VLLM, true, "total_gpu_memory"},
        {KVP_ENGINE_TRTLLM, false, "tensorrt_llm"}, {KVP_ENGINE_SGLANG, false, "sglang"},
        {KVP_ENGINE_LLAMACPP, false, "llama.cpp"}, {KVP_ENGINE_LLAMACPP, false, "ggml_"},
        {KVP_ENGINE_VLLM, false, "vllm"}, {KVP_ENGINE_VLLM, false, "vLLM"},
    };
    if (p->strong)
        return;
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if ((marks[i].strong || !p->engine_set) && strstr(s, marks[i].phrase)) {
            p->engine_set = true;
            p->strong = marks[i].strong;
            p->log->engine = marks[i].e;
            p->log->engine_line = p->line;
            return;
        }
}

/* Rank 0's line, or one that names no rank: "rank=N", "TPN", or V0's worker processes (the driver logs bare). */
static bool rank0(const char *s)
{
    const char *at;
    if ((at = strstr(s, "rank=")))
        return atoi(at + 5) == 0;
    for (at = s; (at = strstr(at, "TP")) != NULL; at += 2)
        if (isdigit((unsigned char)at[2]) && (at == s || at[-1] == ' ' || at[-1] == '[' || at[-1] == ','))
            return atoi(at + 2) == 0;
    return !strstr(s, "(VllmWorkerProcess") && !strstr(s, "(RayWorkerWrapper");
}

/* The release: the newest kvplan knows at or before the logged one (vLLM: of the log's V0 or V1 engine). */
static uint64_t version_key(const char *v)
{
    uint64_t k = 0;
    int parts = 0;
    v += v[0] == 'b';
    for (; parts < 3; parts++) {
        k = k * 100000 + strtoul(v, (char **)&v, 10);
        if (*v != '.')
            break;
        v++;
    }
    for (; parts < 2; parts++)
        k *= 100000;
    return k;
}

static void release(struct parse *p)
{
    struct kvp_log *log = p->log;
    uint32_t n;
    const struct kvp_release *r = kvp_releases(&n), *first = NULL, *at_or_before = NULL, *oldest = NULL, *newest = NULL;
    const struct kvp_release *best;
    uint64_t want = version_key(log->version);
    char buf[64];
    for (uint32_t i = 0; i < n; i++) {
        uint64_t k = version_key(r[i].version);
        if (r[i].engine != log->engine || !isdigit((unsigned char)r[i].version[r[i].version[0] == 'b']))
            continue;
        if (log->engine == KVP_ENGINE_VLLM && !(r[i].rules & KVP_REL_VLLM_V0) != !log->vllm_v0)
            continue; /* a V0 log is replayed by a V0 release, a V1 log by a V1 one */
        first = first ? first : &r[i];
        if (k <= want && (!at_or_before || k > version_key(at_or_before->version)))
            at_or_before = &r[i];
        if (!oldest || k < version_key(oldest->version))
            oldest = &r[i];
        if (!newest || k > version_key(newest->version))
            newest = &r[i];
    }
    best = !log->version[0] ? first : at_or_before ? at_or_before : oldest;
    if (log->engine == KVP_ENGINE_LLAMACPP && log->version[0] && newest && want > version_key(newest->version))
        best = NULL; /* a build past the newest numbered one: the default release */
    snprintf(buf, sizeof buf, "%s%s%s", kvp_engine_info(log->engine)->name, best ? "@" : "", best ? best->version : "");
    kvp_settings_put(&log->settings, "engine", buf, &(struct kvp_error){0});
    log->setting_line[0] = log->version_line;
}

/* The next line of text from *at, cleaned into s (LINE_MAX_BYTES): ANSI escapes and CR dropped, tabs as
 * blanks, the rest of a longer line skipped. Errors: a control byte (binary input), at its place. */
static enum kvp_status next_line(const char *text, size_t len, size_t *at, char *s, size_t *n, uint32_t line,
                                 const char *name, struct kvp_error *err)
{
    size_t i = *at, start = i;
    *n = 0;
    for (; i < len && text[i] != '\n'; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == 0x1b) { /* ESC [ params final: a colour */
            if (i + 1 < len && text[i + 1] == '[')
                for (i += 2; i < len && !(text[i] >= 0x40 && text[i] <= 0x7e); i++)
                    ;
            continue;
        }
        if (c == '\r')
            continue;
        if (c == 0 || (c < 0x20 && c != '\t'))
            return kvp_fail_at(err, KVP_ERR_SYNTAX, name, line, (uint32_t)(i - start) + 1,
                               "not a text log (byte 0x%02x): paste the engine's output as text", c);
        if (*n + 1 < LINE_MAX_BYTES)
            s[(*n)++] = c == '\t' ? ' ' : (char)c;
    }
    s[*n] = '\0';
    *at = i + 1;
    return KVP_OK;
}

/* Whether line s is searched: no phrase read is shorter, and every one carries a number. */
static bool worth(const char *s, size_t n)
{
    return n >= MIN_LINE && strpbrk(s, "0123456789");
}

enum kvp_status kvp_log_parse(const char *text, size_t len, const char *name, struct kvp_log *out,
                              struct kvp_error *err)
{
    struct parse p = {out, false, false, {false}, 0, true, 0};
    char s[LINE_MAX_BYTES];
    size_t n;
    uint32_t searched = 0;
    enum kvp_status st;

    memset(out, 0, sizeof *out);
    kvp_settings_clear(&out->settings);
    /* first the engine, from the whole log (its own phrase may come late), then the lines as it prints them */
    for (size_t at = 0; at < len && !p.strong;) {
        if ((st = next_line(text, len, &at, s, &n, ++p.line, name, err)) != KVP_OK)
            return st;
        if (worth(s, n) && ++searched <= SEARCH_LINES)
            detect(&p, s);
    }
    p.line = 0;
    searched = 0;
    for (size_t at = 0; at < len;) {
        if ((st = next_line(text, len, &at, s, &n, ++p.line, name, err)) != KVP_OK)
            return st;
        if (!p.engine_set || !worth(s, n) || ++searched > SEARCH_LINES)
            continue;
        p.rank0 = rank0(s);
        switch (out->engine) {
        case KVP_ENGINE_SGLANG:
            sglang_line(&p, s);
            break;
        case KVP_ENGINE_LLAMACPP:
            llamacpp_line(&p, s);
            break;
        case KVP_ENGINE_TRTLLM:
            trtllm_line(&p, s);
            break;
        default:
            vllm_line(&p, s);
            break;
        }
    }
    out->lines = p.line;
    if (!p.engine_set)
        return kvp_fail_at(err, KVP_ERR_UNSUPPORTED, name, 1, 1,
                           "no line of a vLLM, SGLang, llama.cpp or TRT-LLM start-up found in %u line%s", out->lines,
                           out->lines == 1 ? "" : "s");
    if (out->concurrency_context || (out->engine == KVP_ENGINE_LLAMACPP && out->fig[KVP_LOG_KV_TOKENS].line)) {
        char buf[32]; /* max_model_len from the concurrency line; -c from the cells (llama.cpp pads it) */
        bool vllm = out->concurrency_context != 0;
        p.line = vllm ? out->fig[KVP_LOG_CONCURRENCY].line : out->fig[KVP_LOG_KV_TOKENS].line;
        snprintf(buf, sizeof buf, "%.0f", vllm ? (double)out->concurrency_context : out->fig[KVP_LOG_KV_TOKENS].value);
        put_setting(&p, "context", buf);
    }
    if (out->fig[KVP_LOG_GPU_MEMORY].line) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.0fB", out->fig[KVP_LOG_GPU_MEMORY].value);
        put_setting(&p, "gpu_memory", buf);
        out->setting_line[kvp_setting_find("gpu_memory")] = out->fig[KVP_LOG_GPU_MEMORY].line;
    }
    release(&p);
    return KVP_OK;
}
