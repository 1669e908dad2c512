/* gpus.c -- the GPU catalog for every subcommand, loaded once: whole, or for
 * a command that names one GPU, up to that GPU (kvp_gpus_load_for). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static struct kvp_gpu_catalog *gpus;
static char gpus_for[KVP_GPU_ID_MAX]; /* the name gpus was loaded for; "" for the whole file */

int cli_gpus_for(const char *name, const struct kvp_gpu_catalog **out)
{
    struct kvp_error err = {0};
    char path[PATH_MAX + 64];

    if (!gpus || (gpus_for[0] && (!name || strcmp(name, gpus_for) != 0))) {
        cli_gpus_release();
        cli_models_dir(path, PATH_MAX + 32);
        snprintf(path + strlen(path), sizeof path - strlen(path), "/gpus.yaml");
        if (kvp_gpus_load_for(path, name, &gpus, &err) != KVP_OK)
            return cli_error(&err);
        /* a longer name is no id or alias, so it got the whole file */
        snprintf(gpus_for, sizeof gpus_for, "%s", name && strlen(name) < sizeof gpus_for ? name : "");
    }
    *out = gpus;
    return CLI_OK;
}

int cli_gpus(const struct kvp_gpu_catalog **out)
{
    return cli_gpus_for(NULL, out);
}

void cli_gpus_release(void)
{
    kvp_gpus_free(gpus);
    gpus = NULL;
}
