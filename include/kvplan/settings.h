/* settings.h -- every setting of a deployment, once.
 *
 * One row per setting: its key (the plan key; `kvplan fit`'s option is the
 * same with '-' for '_'), its type, the CLI's metavariable, a one-line help
 * with the default, and an example value. `kvplan fit`'s options, the plan
 * keys, the TUI's fields and the TUI's plan writer all come from this table,
 * so a setting cannot exist in one front end and not another.
 *
 *     struct kvp_settings s;
 *     kvp_settings_clear(&s);
 *     kvp_settings_put(&s, "engine", "vllm@0.7.3", &err); // syntax checked here
 *     kvp_settings_put(&s, "tp", "2", &err);
 *     int bad;
 *     kvp_settings_apply(&s, model, gpus, &d, &gpu, &bad, &err); // the engine's defaults, then each row
 *
 * Values are kept as written until applied: what a value means can depend on
 * the model and the engine (`weight_dtype: q4_0` is a llama.cpp file type
 * under llama.cpp, a block format elsewhere).
 */
#ifndef KVPLAN_SETTINGS_H
#define KVPLAN_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/deploy.h"
#include "kvplan/error.h"
#include "kvplan/gpu.h"
#include "kvplan/model.h"

enum kvp_setting_type {
    KVP_SET_GPU,      /* a GPU from the catalog: its memory */
    KVP_SET_ENGINE,   /* engine[@release] */
    KVP_SET_U32,      /* a count 1..2^20 */
    KVP_SET_COUNT,    /* a count >= 1 (32k, 1M) */
    KVP_SET_BYTES,    /* a size with a unit */
    KVP_SET_FORMAT,   /* a cache format (format.h) */
    KVP_SET_WEIGHTS,  /* weights storage (wquant.h) */
    KVP_SET_FRACTION, /* a fraction in (0, 1] */
    KVP_SET_FLAG,     /* true / false (a CLI flag without a value) */
    KVP_SET_SPLIT,    /* layers per device: 41,23 (a plan may write a list) */
    KVP_SET_SWITCH,   /* on / off / auto */
    KVP_SET_LAYERS,   /* a layer count 0..2^20, or all (an int32_t, -1 = all) */
    KVP_SET_OVERRIDES, /* llama.cpp -ot: PATTERN=BUFFER[,PATTERN=BUFFER...] (kvp_llamacpp_overrides) */
};

struct kvp_setting {
    const char *key;     /* plan key, e.g. "max_num_batched_tokens" */
    enum kvp_setting_type type;
    const char *arg;     /* the CLI's metavariable: "N", "SIZE"; NULL for a flag */
    const char *help;    /* one line, with the default */
    const char *example; /* a valid value, for tests and docs */
    size_t off;          /* numbers and flags: the member of struct kvp_deploy it sets */
};

#define KVP_SETTINGS_MAX 48
#define KVP_SETTING_VALUE_MAX 128

/* The table, in the order settings are applied (engine and GPU first). */
KVP_API uint32_t kvp_settings_count(void);
KVP_API const struct kvp_setting *kvp_setting_at(uint32_t row);
/* The row of key ("tp", "max_num_seqs"; '-' reads as '_'), or -1. */
KVP_API int kvp_setting_find(const char *key);

/* An engine's own name for a setting (vLLM's "tensor-parallel-size",
 * SGLang's "mem_fraction_static", llama.cpp's "ctx-size" or "c"; '-' and
 * '_' alike, no leading dashes): the row it is, or -1; *engine names whose
 * flag it is. For suggestions only: the value is not translated. */
KVP_API int kvp_setting_engine_flag(const char *flag, const char **engine);

/* The engine flag that flag abbreviates, as Python's argparse (vLLM's and
 * SGLang's parsers, allow_abbrev on) takes a unique prefix of a long option
 * for it: `gpu-memory-util` for `gpu_memory_utilization`. Only the flags of
 * engine ("vLLM", "SGLang": as kvp_setting_engine_flag names them) count.
 * Returns the row and sets *full to the whole flag ('_' for '-'); -1 when no
 * flag begins with it (*full NULL) or several do (*full the first of them). */
KVP_API int kvp_setting_engine_flag_abbrev(const char *flag, const char *engine, const char **full);

struct kvp_buf;

/* What was given, as written, row by row. */
struct kvp_settings {
    uint64_t given; /* bit i: row i was given */
    char value[KVP_SETTINGS_MAX][KVP_SETTING_VALUE_MAX];
};

KVP_API void kvp_settings_clear(struct kvp_settings *s);

/* Give key the value text (checked for its type's syntax: a count, a size,
 * a format ...). Errors name neither key nor place: the caller prefixes
 * "--tp: " or "file:line:col: 'tp': ". */
KVP_API enum kvp_status kvp_settings_put(struct kvp_settings *s, const char *key, const char *value,
                                         struct kvp_error *err);

/* An engine's launch command (argv: `vllm serve MODEL --tensor-parallel-size
 * 2 ...`, `python3 -m sglang.launch_server --model-path M ...`,
 * `llama-server -m F ...`, `trtllm-serve M ...`, `OLLAMA_CONTEXT_LENGTH=N
 * ollama serve` / `ollama run M`) as settings: the engine from the program
 * (after `env` and NAME=VALUE words: Ollama's OLLAMA_* settings taken, any
 * other noted in *ignored), each flag by the engine's name for a setting, values
 * translated (auto, bfloat16, a byte count); the model into model (of size
 * nmodel). A flag that sizes memory and that kvplan does not model is an
 * error naming it (KVP_ERR_UNSUPPORTED); other unknown flags are appended
 * to *ignored, comma-separated. No I/O: the file a vLLM or SGLang command's
 * --config names (kvp_command_config_path) is read by the caller and given
 * as config (config_len bytes), its flags taken first, the command line's
 * winning; errors in it at its path:line:col. A --config without its text
 * (config NULL) is KVP_ERR_USAGE. src/lib/engine/command.c. */
KVP_API enum kvp_status kvp_settings_from_command(const char *const *argv, int argc, const char *config,
                                                  uint64_t config_len, struct kvp_settings *s, char *model,
                                                  size_t nmodel, struct kvp_buf *ignored, struct kvp_error *err);

#define KVP_COMMAND_CONFIG_MAX (1u << 20) /* bytes of an engine's --config file; it holds a few dozen flags */

/* The file a vLLM or SGLang command's --config names (`--config F`,
 * `--config=F`), or NULL: none, or another engine's command. */
KVP_API const char *kvp_command_config_path(const char *const *argv, int argc);

/* Every row given in top replaces base's. */
KVP_API void kvp_settings_overlay(struct kvp_settings *base, const struct kvp_settings *top);

/* The deployment: kvp_deploy_init for the engine (vLLM when none is given),
 * then each given row in table order. gpus may be NULL when no row names a
 * GPU. *gpu is the named GPU or NULL. On an error, *bad_row is the row whose
 * value failed (-1: none in particular). */
KVP_API enum kvp_status kvp_settings_apply(const struct kvp_settings *s, const struct kvp_model *m,
                                   const struct kvp_gpu_catalog *gpus, struct kvp_deploy *d, const struct kvp_gpu **gpu,
                                   int *bad_row, struct kvp_error *err);

/* One setting applied to an existing deployment d (an edit in the TUI): the
 * value is checked as kvp_settings_put checks it. The engine row re-reads
 * every other row's text (kvp_setting_text) over the new engine's defaults,
 * so what the user set survives a change of engine. */
KVP_API enum kvp_status kvp_setting_apply(uint32_t row, const char *value, const struct kvp_model *m,
                                  const struct kvp_gpu_catalog *gpus, struct kvp_deploy *d, const struct kvp_gpu **gpu,
                                  struct kvp_error *err);

/* Row's value in d as a setting's text would give it back ("2", "80GiB",
 * "vllm@0.7.3", "int4:group=128"); "" where the deployment leaves it to the
 * engine's default (kv_dtype: where K and V differ). Returns buf. */
KVP_API const char *kvp_setting_text(uint32_t row, const struct kvp_deploy *d, const struct kvp_gpu *gpu, char *buf,
                             uint32_t n);

#endif
