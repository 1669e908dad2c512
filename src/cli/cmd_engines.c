/* cmd_engines.c -- `kvplan engines`: the engines and the releases whose
 * rules kvplan applies (docs/engines.md has each rule's source). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kvplan/deploy.h"

static struct cli_opt opts[] = {
    {"format", "F", "text (default), json or md", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "engines", "[options]",
    "The serving engines kvplan sizes like, each with the releases it knows and the month each\n"
    "was tagged (\"-\": not read); --engine E means the default (the newest release whose source\n"
    "was read), --engine E@REL another one.",
    opts,
};

int cmd_engines(int argc, char **argv)
{
    static const char *const head[] = {"engine", "release", "date", "default", "source"};
    static const bool right[] = {false, false, false, false, false};
    const char *pos[1];
    int npos, rc;
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    struct kvp_table t;
    struct kvp_json j;
    uint32_t n;
    const struct kvp_release *r = kvp_releases(&n);

    if ((rc = cli_parse(&cmd, argc, argv, pos, 0, &npos)) != CLI_OK || (rc = cli_out(&cmd, &fmt, true)) != CLI_OK)
        return rc;
    if (fmt == KVP_OUT_CSV)
        return cli_usage_error("engines: --format csv is not available (text, json or md)");
    kvp_table_init(&t, 5, head, right);
    kvp_json_init(&j, &b);
    if (fmt == KVP_OUT_JSON)
        kvp_json_begin(&j, NULL, '[');
    for (int e = 0; e < KVP_ENGINE_COUNT; e++) {
        const struct kvp_engine_info *info = kvp_engine_info((enum kvp_engine_id)e);
        if (fmt == KVP_OUT_JSON) {
            kvp_json_begin(&j, NULL, '{');
            kvp_json_str(&j, "engine", info->name);
            kvp_json_str(&j, "default", info->version);
            kvp_json_str(&j, "summary", info->summary);
            kvp_json_begin(&j, "releases", '[');
        }
        for (uint32_t i = 0; i < n; i++) {
            if (r[i].engine != (enum kvp_engine_id)e)
                continue;
            if (fmt == KVP_OUT_JSON) {
                kvp_json_begin(&j, NULL, '{');
                kvp_json_str(&j, "version", r[i].version);
                kvp_json_str(&j, "date", r[i].date);
                kvp_json_str(&j, "source", r[i].source);
                kvp_json_end(&j, '}');
            } else {
                const char *row[] = {info->name, r[i].version, r[i].date,
                                     strcmp(r[i].version, info->version) ? "" : "yes", r[i].source};
                kvp_table_row(&t, row);
            }
        }
        if (fmt == KVP_OUT_JSON) {
            kvp_json_end(&j, ']');
            kvp_json_end(&j, '}');
        }
    }
    if (fmt == KVP_OUT_JSON)
        kvp_json_end(&j, ']');
    else
        kvp_table_render(&t, fmt, &b);
    kvp_table_release(&t);
    rc = cli_write(&b);
    kvp_buf_release(&b);
    return rc;
}
