/* main.c -- kvplan's entry point: dispatch to a subcommand, git style. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *summary;
} commands[] = {
    {"models", cmd_models, "list the built-in models"},
    {"gpus", cmd_gpus, "list the GPU catalog: memory, bandwidth, peak FLOP/s"},
    {"engines", cmd_engines, "list the serving engines and their releases (--engine E@REL)"},
    {"show", cmd_show, "a model's architecture and its KV cost per layer kind"},
    {"size", cmd_size, "KV cache and weight bytes at a context and batch"},
    {"fit", cmd_fit, "what fits on GPUs under an engine's rules: tokens, blocks, concurrency, context"},
    {"table", cmd_table, "sizing tables: KV bytes over contexts, batches and cache formats; what fits"},
    {"compare", cmd_compare, "what-if: the model's attention as MHA, GQA, MQA or MLA, bytes and longest context"},
    {"plot", cmd_plot, "an SVG chart of memory (weights + KV) against context"},
    {"simulate", cmd_simulate, "a workload through the engine's scheduler and block pool: peak blocks, preemptions"},
    {"validate", cmd_validate, "run the reference decoder and check predicted bytes against measured ones"},
    {"import", cmd_import, "read a config.json or GGUF and print it as kvplan YAML"},
    {"check", cmd_check, "evaluate the capacity assertions of plan files (CI gate)"},
#ifndef KVP_NO_TUI /* the web build (make web) has no terminal */
    {"tui", cmd_tui, "size a deployment interactively (ncurses)"},
#endif
    {"explain-log", cmd_explain_log, "an engine's start-up log beside kvplan's fit: each figure and its term"},
    {"export-gguf", cmd_export_gguf, "write a model's shape as GGUF (random or sparse weights) for llama.cpp"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: kvplan COMMAND [options]   (kvplan COMMAND --help for its options)\n\n"
               "kvplan sizes the KV cache of an LLM: bytes per token and per sequence for every\n"
               "layer kind and cache format, and the weights.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexit codes: 0 ok, 1 does not fit or a check failed, 2 usage or input error\n");
}

int main(int argc, char **argv)
{
    int rc = CLI_USAGE;

    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        rc = CLI_OK;
    } else if (strcmp(argv[1], "--version") == 0) {
        printf("kvplan %s\n", KVP_VERSION);
        rc = CLI_OK;
    } else {
        size_t i;
        for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (strcmp(argv[1], commands[i].name) == 0)
                break;
        if (i == sizeof commands / sizeof commands[0]) {
            const char *names[sizeof commands / sizeof commands[0]], *near;
            for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
                names[i] = commands[i].name;
            near = kvp_closest(argv[1], names, i, 2);
            if (near) {
                fprintf(stderr, "kvplan: unknown command '%s' (did you mean '%s'?)\n", argv[1], near);
            } else {
                fprintf(stderr, "kvplan: unknown command '%s'\n\n", argv[1]);
                usage(stderr);
            }
            return CLI_USAGE;
        }
        rc = commands[i].run(argc - 1, argv + 1);
        if (rc < 0)
            rc = CLI_OK; /* --help */
    }
    cli_catalog_release();
    cli_gpus_release();
    /* a full disk or a closed pipe must not pass as success */
    if (fclose(stdout) != 0 && rc == CLI_OK) {
        fprintf(stderr, "kvplan: cannot write the output: %s\n", strerror(errno));
        rc = CLI_USAGE;
    }
    return rc;
}
