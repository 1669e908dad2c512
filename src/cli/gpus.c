/* gpus.c -- the GPU catalog for every subcommand, loaded once. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static struct kvp_gpu_catalog *gpus;

int cli_gpus(const struct kvp_gpu_catalog **out)
{
    struct kvp_error err = {0};
    char path[PATH_MAX + 64];

    if (!gpus) {
        cli_models_dir(path, PATH_MAX + 32);
        snprintf(path + strlen(path), sizeof path - strlen(path), "/gpus.yaml");
        if (kvp_gpus_load(path, &gpus, &err) != KVP_OK)
            return cli_error(&err);
    }
    *out = gpus;
    return CLI_OK;
}

void cli_gpus_release(void)
{
    kvp_gpus_free(gpus);
    gpus = NULL;
}
