/* command.c -- an engine's launch command read as kvplan's settings
 * (kvp_settings_from_command, include/kvplan/settings.h).
 *
 * `vllm serve M ...`, `python3 -m vllm.entrypoints.openai.api_server
 * --model M ...`, `python3 -m sglang.launch_server --model-path M ...`,
 * `llama-server -m F ...` / `llama-cli`, `trtllm-serve M ...`,
 * `OLLAMA_CONTEXT_LENGTH=N ... ollama serve` / `ollama run M` (Ollama's
 * settings are its environment: the words NAME=VALUE before a program; other
 * engines' are noted as ignored): the program
 * names the engine, each flag is taken by that engine's name for it
 * (kvp_setting_engine_flag; under vLLM and SGLang also a unique prefix of
 * one, as their argparse reads it) or kvplan's own, its value translated
 * where the engine spells it otherwise (`auto`, `bfloat16`, a byte count
 * without a unit, llama.cpp's `-c 0`). A flag that would change the memory
 * but that kvplan does not model is refused, naming it; any other unknown
 * flag is ignored with a note. vLLM's and SGLang's `--config FILE` (a YAML
 * mapping of the same flags; the caller reads it, kvp_command_config_path
 * names it: this layer does no I/O) is taken first and the command line's
 * own flags win over it, as the engines do. What kvp_emit_command writes, this reads
 * back (tests/check_emit.c); real commands from issue threads, with what
 * their logs show the engines took, are tests/check_command.c.
 */
#include "kvplan/settings.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/ydoc.h"
#include "kvplan/deploy.h"
#include "kvplan/render.h"


/* Flags that size memory and that kvplan does not model yet: refused. A draft
 * model is one more model's weights and cache: vLLM 0.7's --speculative-model,
 * SGLang's --speculative-draft-model-path (srt/server_args.py), llama.cpp's
 * -md/--model-draft and -hfd/-hfrd/--hf-repo-draft (common/arg.cpp). */
static const char *const unmodelled[] = {
    "cpu-offload-gb", "max-loras-per-batch", "fully-sharded-loras", "num-speculative-tokens", "speculative-algorithm",
    "speculative-model", "speculative-draft-model-path", "md", "model-draft", "hfd", "hfrd", "hf-repo-draft",
    "enable-deepep-moe", "deepep-mode", "ep-size", /* TRT-LLM's --ep_size (vLLM has none, SGLang's is read) */
    "num-gpu-blocks-override", "kv-transfer-config", "kv-offloading-size",
    "limit-mm-per-prompt", "max-total-tokens", "dtype",
    "tensor-split-mode", "sm", "split-mode", "extra_llm_api_options", NULL,
};

/* Flags without a value (the ones kvplan reads among them, and common ones it ignores). */
static const char *const switches[] = {
    "kv-unified", "kvu", "swa-full", "enable-dp-attention", "enable-expert-parallel", "enable-ep-moe", "enable-eplb",
    "enable-prefix-caching", "no-enable-prefix-caching", "enable-lora",
    "disable-radix-cache",
    "trust-remote-code", "enforce-eager", "disable-log-requests", "disable-log-stats", "enable-chunked-prefill",
    "no-enable-chunked-prefill", "cont-batching", "no-mmap", "mlock", "verbose", "jinja", "metrics", "cpu-moe", "cmoe",
    "no-kv-offload", "nkvo", NULL,
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

/* The engine as kvp_setting_engine_flag names it. */
static const char *engine_label(enum kvp_engine_id e)
{
    switch (e) {
    case KVP_ENGINE_VLLM: return "vLLM";
    case KVP_ENGINE_SGLANG: return "SGLang";
    case KVP_ENGINE_LLAMACPP: return "llama.cpp";
    case KVP_ENGINE_TRTLLM: return "TRT-LLM";
    default: return "?";
    }
}

/* The scalar of `key` in a flag's JSON value (vLLM's --eplb-config,
 * --speculative-config) into out ("" when absent); errors name the flag. */
static enum kvp_status json_key(const char *flag, const char *v, const char *key, char *out, size_t size,
                                struct kvp_error *err)
{
    struct ydoc d = {0};
    yaml_node_t *root;
    enum kvp_status st = kvp_ydoc_load(&d, v ? v : "", v ? strlen(v) : 0, flag, err);
    out[0] = '\0';
    if (st == KVP_OK && (root = kvp_ydoc_root(&d)) != NULL &&
        (st = kvp_ydoc_want_map(&d, root, "the flag's JSON", err)) == KVP_OK)
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
            const char *k = kvp_ydoc_scalar(kvp_ydoc_node(&d, p->key));
            const char *n = kvp_ydoc_scalar(kvp_ydoc_node(&d, p->value));
            if (k && n && strcmp(k, key) == 0)
                snprintf(out, size, "%s", n);
        }
    kvp_ydoc_release(&d);
    if (st != KVP_OK) {
        char why[KVP_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err->msg); /* the message is rewritten in place: not from itself */
        st = kvp_fail(err, st, "%s %s: %s", flag, v ? v : "", why);
    }
    return st;
}

/* vLLM's and SGLang's flags of expert parallelism and speculative decoding
 * (docs/engines.md, "Expert parallelism", "Speculative decoding"): SGLang's
 * --ep-size N (N > 1: whole experts, (E + R) / tp of them per GPU whatever
 * N divides tp), vLLM's --eplb-config JSON (its num_redundant_experts; the
 * window and step keys do not size memory), the all-to-all backends, whose
 * buffers kvplan does not model (vLLM --all2all-backend other than
 * allgather_reducescatter or naive, SGLang --moe-a2a-backend other than
 * none); --enable-eplb read as sizing nothing by itself; vLLM's
 * --speculative-config refused unless its method is ngram (no draft weights,
 * no draft KV, no lookahead slots: then noted as not sizing memory). True:
 * the flag was taken here, *st says how. */
static bool moe_spec_flag(struct kvp_settings *s, enum kvp_engine_id e, const char *flag, const char *name,
                          const char *v, enum kvp_status *st, struct kvp_error *err)
{
    static const char *const ep_size[] = {"ep-size", "ep", "expert-parallel-size", NULL};
    static const char *const a2a[] = {"all2all-backend", "moe-a2a-backend", NULL};
    char value[KVP_SETTING_VALUE_MAX];
    *st = KVP_OK;
    if (e == KVP_ENGINE_SGLANG && among(ep_size, name)) {
        if (!v || !v[0] || strspn(v, "0123456789") != strlen(v) || strtoul(v, NULL, 10) == 0)
            *st = kvp_fail(err, KVP_ERR_USAGE, "%s %s: a positive count", flag, v ? v : "");
        else if (strtoul(v, NULL, 10) > 1)
            *st = put(s, "expert_parallel", "true", flag, err);
        return true;
    }
    if (among((const char *const[]){"enable-eplb", NULL}, name))
        return true; /* the rebalancing itself sizes nothing; its redundant experts are read apart */
    if (among(a2a, name)) {
        if (!v || (strcmp(v, "allgather_reducescatter") != 0 && strcmp(v, "naive") != 0 && strcmp(v, "none") != 0))
            *st = kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s %s: its all-to-all buffers change the memory, and kvplan "
                           "does not model them yet", flag, v ? v : "");
        return true;
    }
    if (e == KVP_ENGINE_VLLM && among((const char *const[]){"eplb-config", NULL}, name)) {
        if ((*st = json_key(flag, v, "num_redundant_experts", value, sizeof value, err)) == KVP_OK && value[0] &&
            strcmp(value, "0") != 0)
            *st = put(s, "redundant_experts", value, flag, err);
        return true;
    }
    if (e == KVP_ENGINE_VLLM && among((const char *const[]){"speculative-config", NULL}, name)) {
        if ((*st = json_key(flag, v, "method", value, sizeof value, err)) != KVP_OK)
            return true;
        if (strcmp(value, "ngram") == 0)
            return false; /* noted with the flags that do not size memory */
        *st = kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s: method '%s' adds a draft's weights and KV cache, and kvplan "
                       "does not model it yet (ngram it does: it adds neither)", flag, value[0] ? value : "?");
        return true;
    }
    return among((const char *const[]){"num-redundant-experts", "ep-num-redundant-experts", NULL}, name) && v &&
           strcmp(v, "0") == 0; /* a count of none: kvplan's default */
}

/* One engine flag with its value (NULL for a switch) into s; *lora: vLLM's --enable-lora was seen. */
static enum kvp_status take(struct kvp_settings *s, enum kvp_engine_id e, const char *flag, const char *name,
                            const char *v, bool *lora, struct kvp_buf *notes, struct kvp_error *err)
{
    const char *engine;
    int row = kvp_setting_find(name);
    char buf[KVP_SETTING_VALUE_MAX];
    enum kvp_status st;
    if (row < 0 && (row = kvp_setting_engine_flag(name, &engine)) >= 0 && !strstr(engine, engine_label(e)))
        row = -1; /* another engine's flag: vLLM takes `--max-seq-len` for --max-seq-len-to-capture, not TRT-LLM's */
    if (row < 0 && (e == KVP_ENGINE_VLLM || e == KVP_ENGINE_SGLANG) && strncmp(flag, "--", 2) == 0) {
        /* argparse takes a unique prefix of a long flag for the flag (allow_abbrev): vLLM read vllm#6211's
         * `--max-seq-len` as --max-seq-len-to-capture, intel/llm-scaler#129's `--gpu-memory-util=0.96` as
         * --gpu-memory-utilization; a prefix of several is its "ambiguous option" */
        const char *full;
        if ((row = kvp_setting_engine_flag_abbrev(name, engine_label(e), &full)) < 0 && full) {
            snprintf(buf, sizeof buf, "%s", full);
            for (char *p = buf; *p; p++)
                *p = *p == '_' ? '-' : *p;
            return kvp_fail(err, KVP_ERR_USAGE, "%s: an abbreviation of more than one flag (--%s, ...)", flag, buf);
        }
        if (row >= 0)
            name = full;
    }
    if (row >= 0 && strcmp(kvp_setting_at((uint32_t)row)->key, "n_gpu_layers") == 0 && v && strcmp(v, "auto") == 0)
        return KVP_OK; /* npm-3.22.1's default (-1): every layer, --fit's choice on its own line (kvplan fit) */
    if (e == KVP_ENGINE_LLAMACPP && (strcmp(name, "cpu-moe") == 0 || strcmp(name, "cmoe") == 0))
        return put(s, "n_cpu_moe", "all", flag, err);
    if (strcmp(name, "enable-lora") == 0 || strcmp(name, "enable_lora") == 0) {
        /* vLLM's LoRA slots: --max-loras of them (default 1, vllm/config/lora.py); SGLang's pool is not modelled */
        if (e != KVP_ENGINE_VLLM)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s: it changes the memory, and kvplan models vLLM's LoRA "
                            "only", flag);
        *lora = true;
        return (s->given >> kvp_setting_find("max_loras")) & 1u ? KVP_OK : put(s, "max_loras", "1", flag, err);
    }
    if (e == KVP_ENGINE_LLAMACPP && (strcmp(name, "ot") == 0 || strcmp(name, "override-tensor") == 0) && v) {
        /* common/arg.cpp: each -ot adds its comma-separated PATTERN=BUFFER pairs to the list */
        int at = kvp_setting_find("override_tensor");
        const char *had = (s->given >> at) & 1u ? s->value[at] : "";
        if ((size_t)snprintf(buf, sizeof buf, "%s%s%s", had, had[0] ? "," : "", v) >= sizeof buf)
            return kvp_fail(err, KVP_ERR_RANGE, "%s: the overrides pass %d characters", flag,
                            KVP_SETTING_VALUE_MAX - 1);
        return put(s, "override_tensor", buf, flag, err);
    }
    if ((e == KVP_ENGINE_VLLM || e == KVP_ENGINE_SGLANG) && strcmp(name, "dtype") == 0) {
        /* the weights' and activations' type (vLLM engine/arg_utils.py and SGLang srt/server_args.py: auto, half,
         * float16, bfloat16, float, float32): in 16 bits, as kvplan sizes them (auto: the checkpoint's bf16 or
         * fp16; fp16 for a float32 checkpoint), the KV cache's auto the same 2 bytes */
        if (v && (strcmp(v, "auto") == 0 || strcmp(v, "half") == 0 || strcmp(v, "float16") == 0 ||
                  strcmp(v, "bfloat16") == 0))
            return KVP_OK;
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s %s: weights in 32 bits are not modelled (auto, half, float16 "
                        "and bfloat16 are)", flag, v ? v : "");
    }
    if (e == KVP_ENGINE_LLAMACPP && row >= 0 && strcmp(kvp_setting_at((uint32_t)row)->key, "context") == 0 && v &&
        strcmp(v, "0") == 0)
        return KVP_OK; /* -c 0: "0 = loaded from model" (common/arg.cpp), the trained context: kvplan's default */
    if (strcmp(name, "quantization") == 0 || strcmp(name, "q") == 0) {
        if (v && strcmp(v, "fp8") == 0)
            return put(s, "weight_dtype", "fp8", flag, err);
        return kvp_fail(err, KVP_ERR_UNSUPPORTED, "%s %s: a quantized checkpoint: give its Hub id or file as the model "
                        "(kvplan reads its storage from it)", flag, v ? v : "");
    }
    if (e == KVP_ENGINE_LLAMACPP && (strcmp(name, "ts") == 0 || strcmp(name, "tensor-split") == 0))
        return put(s, "split", v ? v : "", flag, err); /* as kvp_emit_command writes it: layers per device */
    if ((e == KVP_ENGINE_VLLM || e == KVP_ENGINE_SGLANG) && moe_spec_flag(s, e, flag, name, v, &st, err))
        return st;
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

/* The model flags of every engine: the value names the model, not a setting. */
static bool model_flag(const char *name)
{
    static const char *const names[] = {"model", "model-path", "m", "hf", "hf-repo", NULL};
    return among(names, name);
}

/* A --config file's value as a flag's: a scalar as it is, a sequence of
 * scalars comma-separated (`tensor-split: [41, 23]`); NULL for a switch set
 * true; "" (skip) for a switch set false. */
static enum kvp_status config_value(struct ydoc *d, yaml_node_t *n, const char *name, char *buf, size_t size,
                                    const char **out, struct kvp_error *err)
{
    const char *v = kvp_ydoc_scalar(n);
    size_t len = 0;
    if (v) {
        bool yes = strcmp(v, "true") == 0 || strcmp(v, "True") == 0, no = strcmp(v, "false") == 0 ||
                                                                              strcmp(v, "False") == 0;
        *out = among(switches, name) && (yes || no) ? (yes ? NULL : "") : v;
        return KVP_OK;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return kvp_ydoc_fail(d, n, err, KVP_ERR_USAGE, "'%s': a flag's value is a scalar or a list", name);
    buf[0] = '\0';
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        const char *item = kvp_ydoc_scalar(kvp_ydoc_node(d, *it));
        if (!item || len + strlen(item) + 2 > size)
            return kvp_ydoc_fail(d, n, err, KVP_ERR_USAGE, "'%s': a list of short scalars is expected", name);
        len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? "," : "", item);
    }
    *out = buf;
    return KVP_OK;
}

/* vLLM's and SGLang's --config FILE (its text, len bytes, read by the
 * caller) into s (and the model), each key a flag taken as on the command
 * line; errors at the key's place in path. */
static enum kvp_status read_config(const char *path, const char *text, uint64_t len, struct kvp_settings *s,
                                   enum kvp_engine_id e, char *model, size_t nmodel, bool *lora,
                                   struct kvp_buf *ignored, struct kvp_error *err)
{
    struct ydoc d = {0};
    yaml_node_t *root;
    enum kvp_status st;

    if (len > KVP_COMMAND_CONFIG_MAX)
        return kvp_fail_at(err, KVP_ERR_RANGE, path, 0, 0, "an engine config file larger than %u KiB",
                           KVP_COMMAND_CONFIG_MAX >> 10);
    if ((st = kvp_ydoc_load(&d, text, len, path, err)) != KVP_OK)
        goto out;
    root = kvp_ydoc_root(&d);
    if (!root || kvp_ydoc_is_null(root)) /* an empty file: no flags */
        goto out;
    if ((st = kvp_ydoc_want_map(&d, root, "an engine config file", err)) != KVP_OK)
        goto out;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top && !st; p++) {
        const char *key = kvp_ydoc_scalar(kvp_ydoc_node(&d, p->key)), *v;
        yaml_node_t *n = kvp_ydoc_node(&d, p->value);
        char flag[80], buf[KVP_SETTING_VALUE_MAX];
        snprintf(flag, sizeof flag, "--%.70s", key);
        if ((st = config_value(&d, n, key, buf, sizeof buf, &v, err)) != KVP_OK)
            break;
        if (v && !v[0])
            continue;
        if (model_flag(key)) {
            snprintf(model, nmodel, "%s", v ? v : "");
            continue;
        }
        if ((st = take(s, e, flag, key, v, lora, ignored, err)) != KVP_OK)
            st = kvp_ydoc_fail(&d, kvp_ydoc_node(&d, p->key), err, st, "%s", err->msg);
    }
out:
    kvp_ydoc_release(&d);
    return st;
}

/* The argument of --config (`--config F` or `--config=F`) in argv from i, or NULL. */
static const char *config_arg(const char *const *argv, int argc, int i)
{
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], "--config=", 9) == 0)
            return argv[i] + 9;
    }
    return NULL;
}

/* The engine the program of argv names (*e) and the index of its first
 * argument (*first); *name, the program's base name. */
static enum kvp_status program(const char *const *argv, int argc, enum kvp_engine_id *e, int *first,
                               const char **name, bool *ollama, struct kvp_error *err)
{
    const char *prog = argc > 0 ? strrchr(argv[0], '/') : NULL;
    int i = 1;
    if (argc == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "no engine command after '--'");
    prog = prog ? prog + 1 : argv[0];
    *name = prog;
    *ollama = false;
    if (strcmp(prog, "ollama") == 0 && argc > 1 && (strcmp(argv[1], "serve") == 0 || strcmp(argv[1], "run") == 0)) {
        *e = KVP_ENGINE_LLAMACPP, i = 2, *ollama = true; /* Ollama runs llama-server (its release ollama-...) */
    } else if (strcmp(prog, "vllm") == 0 && argc > 1 && strcmp(argv[1], "serve") == 0) {
        *e = KVP_ENGINE_VLLM, i = 2;
    } else if (strncmp(prog, "python", 6) == 0 && argc > 2 && strcmp(argv[1], "-m") == 0) {
        i = 3;
        if (strcmp(argv[2], "vllm.entrypoints.openai.api_server") == 0)
            *e = KVP_ENGINE_VLLM;
        else if (strcmp(argv[2], "sglang.launch_server") == 0)
            *e = KVP_ENGINE_SGLANG;
        else
            return kvp_fail(err, KVP_ERR_USAGE, "'%s -m %.60s': not an engine kvplan reads (vllm.entrypoints.openai."
                            "api_server, sglang.launch_server)", prog, argv[2]);
    } else if (strcmp(prog, "llama-server") == 0 || strcmp(prog, "llama-cli") == 0) {
        *e = KVP_ENGINE_LLAMACPP;
    } else if (strcmp(prog, "trtllm-serve") == 0) {
        *e = KVP_ENGINE_TRTLLM;
    } else {
        return kvp_fail(err, KVP_ERR_USAGE, "'%.60s': not an engine command kvplan reads (vllm serve, python3 -m "
                        "sglang.launch_server, llama-server, llama-cli, trtllm-serve, ollama serve, ollama run)", prog);
    }
    *first = i;
    return KVP_OK;
}

/* The words before the program that set its environment: `env`, NAME=VALUE. */
static int env_words(const char *const *argv, int argc)
{
    int n = argc > 0 && strcmp(argv[0], "env") == 0;
    while (n < argc && (isalpha((unsigned char)argv[n][0]) || argv[n][0] == '_') && strchr(argv[n], '=') &&
           strspn(argv[n], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == strcspn(argv[n], "="))
        n++;
    return n;
}

/* Ollama's server settings from its environment (envconfig/config.go), the name without OLLAMA_. */
static const struct {
    const char *var, *key;
} ollama_env[] = {
    {"CONTEXT_LENGTH", "context"}, {"NUM_PARALLEL", "n_seq"}, {"KV_CACHE_TYPE", "kv_dtype"},
    {"FLASH_ATTENTION", "flash_attn"},
};

/* One NAME=VALUE before the program: Ollama's own into s, OLLAMA_GPU_OVERHEAD (less VRAM for its
 * context tiers) refused, any other noted as ignored. */
static enum kvp_status take_env(struct kvp_settings *s, bool ollama, const char *word, struct kvp_buf *notes,
                                struct kvp_error *err)
{
    const char *eq = strchr(word, '='), *v = eq + 1;
    size_t n = (size_t)(eq - word);
    if (ollama && n > 7 && strncmp(word, "OLLAMA_", 7) == 0) {
        for (size_t i = 0; i < sizeof ollama_env / sizeof ollama_env[0]; i++)
            if (strlen(ollama_env[i].var) == n - 7 && strncmp(word + 7, ollama_env[i].var, n - 7) == 0) {
                if (strcmp(ollama_env[i].key, "flash_attn") == 0)
                    v = strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 ? "on" : "off";
                return put(s, ollama_env[i].key, v, word, err);
            }
        if (strncmp(word, "OLLAMA_GPU_OVERHEAD=", 20) == 0)
            return kvp_fail(err, KVP_ERR_UNSUPPORTED, "OLLAMA_GPU_OVERHEAD: it changes the memory, and kvplan does not "
                            "model it yet");
    }
    kvp_buf_printf(notes, "%s%.*s", notes->len ? ", " : "", (int)n, word);
    return KVP_OK;
}

const char *kvp_command_config_path(const char *const *argv, int argc)
{
    enum kvp_engine_id e;
    const char *prog;
    int i, env = env_words(argv, argc);
    bool ollama;
    struct kvp_error err;
    if (program(argv + env, argc - env, &e, &i, &prog, &ollama, &err) != KVP_OK ||
        (e != KVP_ENGINE_VLLM && e != KVP_ENGINE_SGLANG))
        return NULL;
    return config_arg(argv + env, argc - env, i);
}

enum kvp_status kvp_settings_from_command(const char *const *argv, int argc, const char *config, uint64_t config_len,
                                          struct kvp_settings *s, char *model, size_t nmodel, struct kvp_buf *ignored,
                                          struct kvp_error *err)
{
    enum kvp_engine_id e;
    const char *prog, *engine, *path;
    bool model_given, ollama, lora = false;
    int i, env = env_words(argv, argc);
    enum kvp_status st;

    kvp_settings_clear(s);
    model[0] = '\0';
    if ((st = program(argv + env, argc - env, &e, &i, &prog, &ollama, err)) != KVP_OK)
        return st;
    engine = ollama ? "ollama" : kvp_engine_info(e)->name;
    if ((st = put(s, "engine", engine, prog, err)) != KVP_OK)
        return st;
    for (int w = argv[0] && strcmp(argv[0], "env") == 0; w < env; w++)
        if ((st = take_env(s, ollama, argv[w], ignored, err)) != KVP_OK)
            return st;
    argv += env, argc -= env;
    /* first the --config file: the command line's own flags (its model too) win over the file's */
    if ((path = kvp_command_config_path(argv, argc)) != NULL) {
        if (!config)
            return kvp_fail(err, KVP_ERR_USAGE, "--config %.200s: the file's text is not given here", path);
        if ((st = read_config(path, config, config_len, s, e, model, nmodel, &lora, ignored, err)) != KVP_OK)
            return st;
    }
    if ((model_given = (e == KVP_ENGINE_VLLM || e == KVP_ENGINE_TRTLLM || ollama) && i < argc && argv[i][0] != '-'))
        snprintf(model, nmodel, "%s", argv[i++]);
    for (; i < argc; i++) {
        const char *a = argv[i], *flag = argv[i], *eq, *v = NULL;
        char name[64];
        size_t n;
        if (a[0] != '-') {
            if (model_given)
                return kvp_fail(err, KVP_ERR_USAGE, "'%.60s': a second model in the command", a);
            snprintf(model, nmodel, "%s", a);
            model_given = true;
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
        if (strcmp(name, "config") == 0 && (e == KVP_ENGINE_VLLM || e == KVP_ENGINE_SGLANG))
            continue; /* read before the loop */
        if (model_flag(name)) {
            if (!v)
                return kvp_fail(err, KVP_ERR_USAGE, "%s needs the model", flag);
            snprintf(model, nmodel, "%s", v);
            continue;
        }
        if ((st = take(s, e, flag, name, v, &lora, ignored, err)) != KVP_OK)
            return st;
    }
    if (e == KVP_ENGINE_VLLM && !lora && ((s->given >> kvp_setting_find("max_loras")) & 1u)) {
        /* --max-loras without --enable-lora: vLLM makes no LoRA config (engine/arg_utils.py) */
        s->given &= ~(1ull << kvp_setting_find("max_loras"));
        kvp_buf_printf(ignored, "%s--max-loras (without --enable-lora)", ignored->len ? ", " : "");
    }
    if (!model[0] && !(ollama && strcmp(argv[1], "serve") == 0)) /* `ollama serve`: the model comes later */
        return kvp_fail(err, KVP_ERR_USAGE, "the %s command names no model", engine);
    return KVP_OK;
}
