/* cmd_explain_log.c -- `kvplan explain-log FILE|- [MODEL]`: an engine's start-up log beside kvplan's fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvplan/explain_log.h"
#include "kvplan/io.h"
#include "kvplan/log.h"

/* the deployment options (settings.h) come first: they override what the log shows */
static const struct cli_opt log_opts[] = {
    {"format", "F", "text (default), json or md", NULL},
    {"si", NULL, "SI units (GB) instead of IEC (GiB)", NULL},
    {NULL, NULL, NULL, NULL},
};
static struct cli_opt opts[KVP_SETTINGS_MAX + 4];

static const struct cli_cmd cmd = {
    "explain-log", "FILE|- [MODEL] [options]",
    "Read a vLLM, SGLang, llama.cpp or TRT-LLM start-up log (as pasted: timestamps, process\n"
    "prefixes, colours, ranks interleaved; - reads the standard input), recover the model, GPU\n"
    "memory, release and settings it prints, fit the same deployment, and print each logged\n"
    "figure beside kvplan's with the term that explains the difference, then what to change\n"
    "for more KV cache. MODEL (a name, Hub id or file) replaces the model the log names; the\n"
    "deployment options replace what the log shows; settings neither gives are listed as assumed.",
    opts,
};

int cmd_explain_log(int argc, char **argv)
{
    const char *pos[2];
    int npos, rc;
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_error err = {0};
    struct kvp_log *log = NULL;
    char *text = NULL;
    uint64_t len;
    struct kvp_log_explain *x = NULL;
    struct kvp_settings given, merged;
    struct kvp_model *m = NULL;
    const struct kvp_gpu_catalog *gpus = NULL;
    struct kvp_buf b = {0};
    const char *model;

    if (!opts[0].name)
        cli_deploy_opts(opts, sizeof opts / sizeof opts[0], log_opts);
    if ((rc = cli_parse(&cmd, argc, argv, pos, 2, &npos)) != CLI_OK)
        return rc;
    if (npos < 1)
        return cli_usage_error("explain-log: which log? (usage: kvplan explain-log FILE|- [MODEL])");
    if ((rc = cli_out(&cmd, &fmt, true)) != CLI_OK)
        return rc;
    if (fmt != KVP_OUT_TEXT && fmt != KVP_OUT_JSON && fmt != KVP_OUT_MD)
        return cli_usage_error("explain-log: --format %s is not available (text, json or md)", cli_opt(&cmd, "format"));
    if ((rc = cli_deploy_settings(&cmd, &given)) != CLI_OK)
        return rc;
    if (!(log = malloc(sizeof *log)) || !(x = malloc(sizeof *x))) {
        free(log);
        return cli_usage_error("explain-log: out of memory");
    }
    if (kvp_read_input(pos[0], KVP_LOG_FILE_MAX, &text, &len, &err) != KVP_OK ||
        kvp_log_parse(text, (size_t)len, pos[0], log, &err) != KVP_OK) {
        rc = cli_error(&err);
        goto done;
    }
    model = npos > 1 ? pos[1] : log->model;
    if (!model[0]) {
        rc = cli_usage_error("explain-log: %s names no model: pass it after the log (kvplan explain-log %s MODEL)",
                             pos[0], pos[0]);
        goto done;
    }
    if ((rc = cli_model(model, &m)) != CLI_OK) {
        if (npos < 2)
            fprintf(stderr, "kvplan: explain-log: the log's model '%s' (line %u) is not one kvplan resolves: pass a "
                    "name from 'kvplan models', a Hub id or a config.json after the log\n", model, log->model_line);
        goto done;
    }
    merged = log->settings;
    kvp_settings_overlay(&merged, &given); /* the options win over the log */
    if ((given.given >> kvp_setting_find("gpu") & 1) &&
        (rc = cli_gpus_for(given.value[kvp_setting_find("gpu")], &gpus)) != CLI_OK)
        goto done;
    if (kvp_log_explain(log, &merged, m, gpus, x, &err) != KVP_OK) {
        rc = err.code == KVP_ERR_USAGE ? cli_usage_error("explain-log: %s: %s", pos[0], err.msg) : cli_error(&err);
        goto done;
    }
    kvp_log_explain_render(log, pos[0], m, x, fmt, cli_opt(&cmd, "si") != NULL, &b);
    rc = cli_write(&b);
done:
    kvp_buf_release(&b);
    kvp_model_free(m);
    free(x);
    free(log);
    free(text);
    return rc;
}
