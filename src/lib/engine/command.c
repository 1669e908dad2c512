/* command.c -- an engine's launch command read as kvplan's settings
 * (kvp_settings_from_command, include/kvplan/settings.h).
 *
 * `vllm serve M ...`, `python3 -m vllm.entrypoints.openai.api_server
 * --model M ...`, `python3 -m sglang.launch_server --model-path M ...`,
 * `llama-server -m F ...` / `llama-cli`, `trtllm-serve M ...`: the program
 * names the engine, each flag is taken by its engine name
 * (kvp_setting_engine_flag) or kvplan's own, its value translated where the
 * engine spells it otherwise (`auto`, `bfloat16`, a byte count without a
 * unit). A flag that would change the memory but that kvplan does not model
 * is refused, naming it; any other unknown flag is ignored with a note.
 * What kvp_emit_command writes, this reads back (tests/check_emit.c).
 */
#include "kvplan/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/deploy.h"
#include "kvplan/render.h"

/* Flags that size memory and that kvplan does not model yet: refused. */
static const char *const unmodelled[] = {
    "cpu-offload-gb", "enable-lora", "max-loras", "max-lora-rank", "speculative-config", "num-speculative-tokens",
    "enable-expert-parallel", "ep-size", "ep_size",
    "num-gpu-blocks-override", "kv-transfer-config", "kv-offloading-size", "n-cpu-moe", "cpu-moe", "ot",
    "override-tensor", "no-kv-offload", "nkvo", "limit-mm-per-prompt", "max-total-tokens", "dtype",
    "tensor-split-mode", "sm", "split-mode", "extra_llm_api_options", NULL,
};

/* Flags without a value (the ones kvplan reads among them, and common ones it ignores). */
static const char *const switches[] = {
    "kv-unified", "kvu", "swa-full", "enable-dp-attention", "enable-prefix-caching", "no-enable-prefix-caching",
    "disable-radix-cache",
    "trust-remote-code", "enforce-eager", "disable-log-requests", "disable-log-stats", "enable-chunked-prefill",
    "no-enable-chunked-prefill", "cont-batching", "no-mmap", "mlock", "verbose", "jinja", "metrics", NULL,
};

static bool among(const char *const *list, const char *s)
{
    for (; *list; list++) {
        const char *a = *list, *b = s;
        for (; *a && (*a == *b || ((*a == '-' || *a == '_') && (*b == '-' || *b == '_'))); a++, b++)
            ;
        if (!*a && !*b)
            return true;
    }
    return false;
}

static enum kvp_status put(struct kvp_settings *s, const char *key, const char *value, const char *flag,
                           struct kvp_error *err)
{
    enum kvp_status st = kvp_settings_put(s, key, value, err);
    char why[KVP_ERROR_MSG_MAX];
    if (st == KVP_OK)
        return KVP_OK;
    snprintf(why, sizeof why, "%s", err->msg); /* the message is rewritten in place: not from itself */
    return kvp_fail(err, st, "%s %s: %s", flag, value, why);
}

/* One engine flag with its value (NULL for a switch) into s. */
static enum kvp_status take(struct kvp_settings *s, enum kvp_engine_id e, const char *flag, const char *name,
                            const char *v, struct kvp_buf *notes, struct kvp_error *err)
{
    const char *engine;
    int row = kvp_setting_find(name);
    char buf[KVP_SETTING_VALUE_MAX];
    if (row < 0)
        row = kvp_setting_engine_flag(name, &engine);
    if (strcmp(name, "ngl") == 0 || strcmp(name, "n-gpu-layers") == 0 || strcmp(name, "gpu-layers") == 0) {
        char *end;
        unsigned long long n = v ? strtoull(v, &end, 10) : 0;
        if (!v || *end || n < 999)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s %s: layers kept on the host are not modelled yet (kvplan "
                            "sizes every layer on the GPUs; -ngl 999 is what it plans)", flag, v ? v : "");
        return KVP_OK;
    }
    if (strcmp(name, "quantization") == 0 || strcmp(name, "q") == 0) {
        if (v && strcmp(v, "fp8") == 0)
            return put(s, "weight_dtype", "fp8", flag, err);
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s %s: a quantized checkpoint: give its Hub id or file as the model "
                        "(kvplan reads its storage from it)", flag, v ? v : "");
    }
    if (e == KVP_ENGINE_LLAMACPP && (strcmp(name, "ts") == 0 || strcmp(name, "tensor-split") == 0))
        return put(s, "split", v ? v : "", flag, err); /* as kvp_emit_command writes it: layers per device */
    if (among(unmodelled, name))
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s: it changes the memory, and kvplan does not model it yet", flag);
    if (row < 0) {
        kvp_buf_printf(notes, "%s%s", notes->len ? ", " : "", flag);
        return KVP_OK;
    }
    name = kvp_setting_at((uint32_t)row)->key;
    if (!v)
        return put(s, name, "true", flag, err);
    if (strcmp(name, "kv_dtype") == 0 || strcmp(name, "k_dtype") == 0 || strcmp(name, "v_dtype") == 0) {
        if (strcmp(v, "auto") == 0)
            return KVP_OK; /* the model's dtype: kvplan's default */
        v = strcmp(v, "bfloat16") == 0 ? "bf16" : strcmp(v, "float16") == 0 || strcmp(v, "half") == 0 ? "f16" : v;
    }
    if (strcmp(name, "kv_cache_memory") == 0 && v[0] && strspn(v, "0123456789") == strlen(v)) {
        snprintf(buf, sizeof buf, "%sB", v); /* vLLM's --kv-cache-memory-bytes: a byte count */
        v = buf;
    }
    return put(s, name, v, flag, err);
}

enum kvp_status kvp_settings_from_command(const char *const *argv, int argc, struct kvp_settings *s, char *model,
                                          size_t nmodel, struct kvp_buf *ignored, struct kvp_error *err)
{
    enum kvp_engine_id e;
    const char *prog = argc > 0 ? strrchr(argv[0], '/') : NULL, *engine;
    int i = 1;
    enum kvp_status st;

    kvp_settings_clear(s);
    model[0] = '\0';
    if (argc == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "no engine command after '--'");
    prog = prog ? prog + 1 : argv[0];
    if (strcmp(prog, "vllm") == 0 && argc > 1 && strcmp(argv[1], "serve") == 0) {
        e = KVP_ENGINE_VLLM, i = 2;
    } else if (strncmp(prog, "python", 6) == 0 && argc > 2 && strcmp(argv[1], "-m") == 0) {
        i = 3;
        if (strcmp(argv[2], "vllm.entrypoints.openai.api_server") == 0)
            e = KVP_ENGINE_VLLM;
        else if (strcmp(argv[2], "sglang.launch_server") == 0)
            e = KVP_ENGINE_SGLANG;
        else
            return kvp_fail(err, KVP_ERR_USAGE, "'%s -m %.60s': not an engine kvplan reads (vllm.entrypoints.openai."
                            "api_server, sglang.launch_server)", prog, argv[2]);
    } else if (strcmp(prog, "llama-server") == 0 || strcmp(prog, "llama-cli") == 0) {
        e = KVP_ENGINE_LLAMACPP;
    } else if (strcmp(prog, "trtllm-serve") == 0) {
        e = KVP_ENGINE_TRTLLM;
    } else {
        return kvp_fail(err, KVP_ERR_USAGE, "'%.60s': not an engine command kvplan reads (vllm serve, python3 -m "
                        "sglang.launch_server, llama-server, llama-cli, trtllm-serve)", prog);
    }
    engine = kvp_engine_info(e)->name;
    if ((st = put(s, "engine", engine, prog, err)) != KVP_OK)
        return st;
    if ((e == KVP_ENGINE_VLLM || e == KVP_ENGINE_TRTLLM) && i < argc && argv[i][0] != '-')
        snprintf(model, nmodel, "%s", argv[i++]);
    for (; i < argc; i++) {
        const char *a = argv[i], *flag = argv[i], *eq, *v = NULL;
        char name[64];
        size_t n;
        if (a[0] != '-') {
            if (model[0])
                return kvp_fail(err, KVP_ERR_USAGE, "'%.60s': a second model in the command", a);
            snprintf(model, nmodel, "%s", a);
            continue;
        }
        a += a[1] == '-' ? 2 : 1;
        eq = strchr(a, '=');
        n = eq ? (size_t)(eq - a) : strlen(a);
        if (n == 0 || n >= sizeof name)
            return kvp_fail(err, KVP_ERR_USAGE, "'%.60s': not a flag", argv[i]);
        memcpy(name, a, n);
        name[n] = '\0';
        if (eq)
            v = eq + 1;
        else if (!among(switches, name) && i + 1 < argc && (argv[i + 1][0] != '-' || argv[i + 1][1] == '\0' ||
                                                             strspn(argv[i + 1] + 1, "0123456789.") ==
                                                                 strlen(argv[i + 1] + 1)))
            v = argv[++i];
        if (strcmp(name, "model") == 0 || strcmp(name, "model-path") == 0 || strcmp(name, "m") == 0 ||
            strcmp(name, "hf") == 0 || strcmp(name, "hf-repo") == 0) {
            if (!v)
                return kvp_fail(err, KVP_ERR_USAGE, "%s needs the model", flag);
            snprintf(model, nmodel, "%s", v);
            continue;
        }
        if ((st = take(s, e, flag, name, v, ignored, err)) != KVP_OK)
            return st;
    }
    if (!model[0])
        return kvp_fail(err, KVP_ERR_USAGE, "the %s command names no model", engine);
    return KVP_OK;
}
