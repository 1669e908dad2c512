/* cmd_import.c -- `kvplan import PATH`: print what was understood, as kvplan YAML. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static struct cli_opt opts[] = {
    {"name", "ID", "the model's name in the output (default: derived from the config)", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "import", "PATH [options]",
    "Read a Hugging Face config.json (or a folder holding one), a GGUF file or a kvplan YAML,\n"
    "or a Hub model (ORG/NAME[@REV], ORG/NAME:TYPE: docs/hub.md), and print it as kvplan YAML\n"
    "on stdout (docs/model-format.md), so you can see what was understood; save it under\n"
    "models/ to use it by name.",
    opts,
};

int cmd_import(int argc, char **argv)
{
    const char *pos[1], *name;
    int npos, rc;
    struct kvp_model *m = NULL;
    struct kvp_error err = {0};
    struct kvp_hub_ref ref;
    struct kvp_buf b = {0};
    char *yaml = NULL;

    if ((rc = cli_parse(&cmd, argc, argv, pos, 1, &npos)) != CLI_OK)
        return rc;
    if (npos != 1)
        return cli_usage_error("import: which file? (usage: kvplan import PATH)");
    if (access(pos[0], F_OK) != 0 && kvp_hub_ref_parse(pos[0], &ref, &err) == KVP_OK) {
        if ((rc = cli_model(pos[0], &m)) != CLI_OK)
            return rc;
    } else {
        if (kvp_model_load(pos[0], &m, &err) != KVP_OK)
            return cli_error(&err);
        for (uint32_t i = 0; i < m->n_warnings; i++)
            fprintf(stderr, "kvplan: warning: %s: %s\n", m->file, m->warnings[i]);
    }
    if ((name = cli_opt(&cmd, "name")) != NULL)
        snprintf(m->name, sizeof m->name, "%s", name);
    if (kvp_model_emit_yaml(m, &yaml, &err) != KVP_OK) {
        kvp_model_free(m);
        return cli_error(&err);
    }
    kvp_buf_printf(&b, "%s", yaml);
    rc = cli_write(&b);
    free(yaml);
    kvp_buf_release(&b);
    kvp_model_free(m);
    return rc;
}
