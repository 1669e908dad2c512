/* cli.h -- what the subcommands share: options, model loading, output.
 *
 * Each subcommand is one file, cmd_<name>.c, with an entry point
 * `int cmd_<name>(int argc, char **argv)` returning an exit code. Options are
 * a table of struct cli_opt the command declares; cli_parse fills it.
 */
#ifndef KVPLAN_CLI_H
#define KVPLAN_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/catalog.h"
#include "kvplan/error.h"
#include "kvplan/format.h"
#include "kvplan/gpu.h"
#include "kvplan/render.h"
#include "kvplan/settings.h"

/* Exit codes, documented in kvplan(1). */
enum cli_exit {
    CLI_OK = 0,    /* done; or it fits / every check passed */
    CLI_FAIL = 1,  /* it does not fit, or a check failed */
    CLI_USAGE = 2, /* bad usage or bad input, with a message on stderr */
};

struct cli_opt {
    const char *name;  /* long name without "--" */
    const char *arg;   /* the value's name in help ("N"), NULL for a flag */
    const char *help;
    const char *value; /* filled: the value, or "1" for a set flag */
};

struct cli_cmd {
    const char *name;
    const char *usage; /* "MODEL [options]" */
    const char *summary;
    struct cli_opt *opts; /* terminated by {NULL} */
};

/* Parse argv[1..] into cmd's options and up to max positionals. On --help
 * prints the usage to stdout and returns -1 (caller exits 0); on a bad
 * option prints the error and usage to stderr and returns CLI_USAGE. */
int cli_parse(const struct cli_cmd *cmd, int argc, char **argv, const char **pos, int max, int *npos);
const char *cli_opt(const struct cli_cmd *cmd, const char *name); /* value or NULL */

/* Print an error as "kvplan: file:line:col: message" and return CLI_USAGE. */
int cli_error(const struct kvp_error *err);
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The catalog of shipped models, loaded once on first use. */
int cli_catalog(const struct kvp_catalog **out);
void cli_catalog_release(void);

/* Where the shipped data is: $KVPLAN_DATADIR, the source tree's models/, or the installed copy. */
void cli_models_dir(char *buf, size_t n);

/* The GPU catalog (<models dir>/gpus.yaml), loaded once on first use;
 * cli_gpus_for reads it only up to GPU name where name is an exact id or
 * alias (kvp_gpu_catalog_load_for), for a command that needs that one GPU. Every
 * catalog handed out stays valid until cli_gpus_release (at exit). */
int cli_gpus(const struct kvp_gpu_catalog **out);
int cli_gpus_for(const char *name, const struct kvp_gpu_catalog **out);
/* A comma-separated list (option --opt) into at most max items; an empty or
 * over-long item, or more than max, is a usage error naming the option. */
int cli_split(const char *opt, const char *list, char (*items)[KVP_SETTING_VALUE_MAX], uint32_t max, uint32_t *n);
void cli_gpus_release(void);

/* Resolve and load MODEL (name, HF id or path, Hub reference); prints its warnings. */
int cli_model(const char *s, struct kvp_model **out);

/* --refresh, taken by every command that reads a MODEL or a PLAN: a Hub
 * reference's branch or tag is resolved at the Hub again, not read from
 * the caches' refs/. */
extern bool cli_hub_refresh;
/* The catalog's Hub fetcher (kvp_hub_fetch_fn): runs kvplan-hub (hub.c). */
enum kvp_status cli_hub_fetch(const char *ref, const struct kvp_hub_ref *r, const struct kvp_hub_env *env,
                              char *path, size_t n, struct kvp_error *err);

/* Option readers: leave *out unchanged when the option is absent. */
int cli_count(const struct cli_cmd *cmd, const char *name, uint64_t min, uint64_t *out);
int cli_format(const struct cli_cmd *cmd, const char *name, struct kvp_format *out);
/* --NAME as weights storage (wquant.h); gguf: file type names mean llama.cpp file types. */
int cli_wstore(const struct cli_cmd *cmd, const char *name, bool gguf, struct kvp_wstore *out);
int cli_out(const struct cli_cmd *cmd, enum kvp_out *out, bool md_ok);
int cli_bytes(const struct cli_cmd *cmd, const char *name, uint64_t *out);
int cli_fraction(const struct cli_cmd *cmd, const char *name, double *out);

/* ---- deployment options: settings.h's table as --key-with-dashes ---- */

/* opts (room for cap entries) gets every deployment setting, then `extra`
 * (NULL-terminated), then the terminator. Call once, before cli_parse. */
void cli_deploy_opts(struct cli_opt *opts, size_t cap, const struct cli_opt *extra);
/* The deployment options cmd was given, checked for syntax ("--tp: ..."). */
int cli_deploy_settings(const struct cli_cmd *cmd, struct kvp_settings *s);
/* The deployment a front end sizing over axes of its own (table, compare,
 * plot) was given: cli_deploy_settings less the rows in `axes` (setting keys,
 * NULL-terminated, e.g. "context"), which the front end reads itself. *given
 * is whether any deployment option is left; one that names no GPU memory
 * (--gpu, --gpu-memory or --kv-cache-memory) is refused as `kvplan fit`
 * refuses it. */
int cli_deploy_front(const struct cli_cmd *cmd, const char *const *axes, struct kvp_settings *s, bool *given);
/* The check of cli_deploy_front on settings s already read (command name for the message). */
int cli_deploy_need_gpu(const char *name, const char *const *axes, struct kvp_settings *s, bool *given);
/* Applied to model m: the deployment and the GPU it names (NULL if none). */
int cli_deploy_apply(const struct kvp_settings *s, const struct kvp_model *m, struct kvp_deploy *d,
                     const struct kvp_gpu **gpu);

/* Write b to stdout; a write error (disk full, closed pipe) is an error. */
int cli_write(struct kvp_buf *b);

int cmd_models(int argc, char **argv);
int cmd_gpus(int argc, char **argv);
int cmd_engines(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_size(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_table(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_export_gguf(int argc, char **argv);
int cmd_explain_log(int argc, char **argv);
int cmd_tui(int argc, char **argv); /* src/tui/tui.c */

#endif
