/* common.c -- option parsing, model and GPU catalog loading and output for every subcommand. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvplan/num.h"

bool cli_hub_refresh;

/* A command that reads models (from MODEL or a plan) takes --refresh. */
static bool reads_models(const struct cli_cmd *cmd)
{
    return strstr(cmd->usage, "MODEL") || strstr(cmd->usage, "PLAN");
}

static void print_usage(const struct cli_cmd *cmd, FILE *f)
{
    fprintf(f, "usage: kvplan %s %s\n%s\n", cmd->name, cmd->usage, cmd->summary);
    if (cmd->opts[0].name)
        fprintf(f, "\noptions:\n");
    for (const struct cli_opt *o = cmd->opts; o->name; o++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(f, "  %-26s %s\n", left, o->help);
    }
    if (reads_models(cmd))
        fprintf(f, "  %-26s %s\n", "--refresh",
                "a Hub model's branch or tag (ORG/NAME, ORG/NAME@main) is asked of the Hub again, not read from "
                "the caches");
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("kvplan: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_USAGE;
}

/* The command's option named `name` ('_' read as '-'), or NULL. */
static const char *option_named(const struct cli_cmd *cmd, const char *name)
{
    for (const struct cli_opt *o = cmd->opts; o->name; o++) {
        const char *a = o->name, *b = name;
        for (; *a && (*a == *b || (*a == '-' && *b == '_')); a++, b++)
            ;
        if (*a == '\0' && *b == '\0')
            return o->name;
    }
    return NULL;
}

/* The one option that `given` abbreviates (its letters in order, the first
 * one first: "ctx" for "context"), or NULL when none or several do. */
static const char *abbreviated(const struct cli_cmd *cmd, const char *given)
{
    const char *found = NULL;
    if (strlen(given) < 2)
        return NULL;
    for (const struct cli_opt *o = cmd->opts; o->name; o++) {
        const char *g = given;
        if (o->name[0] != given[0])
            continue;
        for (const char *c = o->name; *c && *g; c++)
            g += *c == *g;
        if (*g == '\0') {
            if (found)
                return NULL;
            found = o->name;
        }
    }
    return found;
}

/* "unknown option", with the option meant when it can be told: an engine's
 * own flag for a setting (vLLM's --max-model-len is --context), the option
 * with one dash, the nearest name, or the one option it abbreviates. */
static int unknown_option(const struct cli_cmd *cmd, const char *a, size_t len)
{
    const char *names[64], *near, *engine;
    char given[64];
    size_t n = 0;
    const char *s = a + (a[1] == '-' ? 2 : 1);
    int row;
    for (const struct cli_opt *o = cmd->opts; o->name && n < 64; o++)
        names[n++] = o->name;
    snprintf(given, sizeof given, "%.*s", (int)(len < sizeof given ? len : sizeof given - 1), s);
    if ((row = kvp_setting_engine_flag(given, &engine)) >= 0 &&
        (near = option_named(cmd, kvp_setting_at((uint32_t)row)->key)) != NULL)
        return cli_usage_error("%s: unknown option '%s' (%s's flag; kvplan's is '--%s')", cmd->name, a, engine, near);
    if ((near = option_named(cmd, given)) != NULL || (near = kvp_closest(given, names, n, 2)) != NULL ||
        (near = abbreviated(cmd, given)) != NULL)
        return cli_usage_error("%s: unknown option '%s' (did you mean '--%s'?)", cmd->name, a, near);
    return cli_usage_error("%s: unknown option '%s' (see 'kvplan %s --help')", cmd->name, a, cmd->name);
}

int cli_parse(const struct cli_cmd *cmd, int argc, char **argv, const char **pos, int max, int *npos)
{
    bool only_pos = false;
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        struct cli_opt *o;
        size_t len;
        const char *eq;
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (*npos == max)
                return cli_usage_error("%s: unexpected argument '%s' (see 'kvplan %s --help')", cmd->name, a,
                                       cmd->name);
            pos[(*npos)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_usage(cmd, stdout);
            return -1;
        }
        if (strcmp(a, "--refresh") == 0 && reads_models(cmd)) {
            cli_hub_refresh = true;
            continue;
        }
        if (a[1] != '-')
            return unknown_option(cmd, a, strlen(a));
        eq = strchr(a, '=');
        len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        for (o = cmd->opts; o->name; o++)
            if (strlen(o->name) == len && strncmp(o->name, a + 2, len) == 0)
                break;
        if (!o->name)
            return unknown_option(cmd, a, len);
        if (!o->arg) {
            if (eq)
                return cli_usage_error("%s: option '--%s' takes no value", cmd->name, o->name);
            o->value = "1";
        } else if (eq) {
            o->value = eq + 1;
        } else if (i + 1 < argc) {
            o->value = argv[++i];
        } else {
            return cli_usage_error("%s: option '--%s' needs a value (%s)", cmd->name, o->name, o->arg);
        }
    }
    return CLI_OK;
}

const char *cli_opt(const struct cli_cmd *cmd, const char *name)
{
    for (const struct cli_opt *o = cmd->opts; o->name; o++)
        if (strcmp(o->name, name) == 0)
            return o->value;
    return NULL;
}

int cli_error(const struct kvp_error *err)
{
    char text[KVP_ERROR_TEXT_MAX];
    fprintf(stderr, "kvplan: %s\n", kvp_error_text(err, text, sizeof text));
    return CLI_USAGE;
}

/* ---- the catalog ---- */

static struct kvp_catalog *catalog;
static struct kvp_hub_env hub_env;

/* Where the shipped models are: $KVPLAN_DATADIR, then models/ of the source
 * tree this binary was built in (build/<mode>/kvplan), then the installed copy. */
void cli_models_dir(char *buf, size_t n)
{
    const char *env = getenv("KVPLAN_DATADIR");
    char exe[PATH_MAX];
    ssize_t len;

    if (env && *env) {
        snprintf(buf, n, "%s", env);
        return;
    }
    len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        char *slash;
        exe[len] = '\0';
        if ((slash = strrchr(exe, '/')) != NULL) {
            *slash = '\0';
            snprintf(buf, n, "%s/../../models", exe);
            if (access(buf, R_OK) == 0)
                return;
        }
    }
    snprintf(buf, n, "%s/models", KVP_DATADIR);
}

int cli_catalog(const struct kvp_catalog **out)
{
    struct kvp_error err = {0};
    char dir[PATH_MAX + 32];

    if (!catalog) {
        cli_models_dir(dir, sizeof dir);
        if (kvp_catalog_load(dir, &catalog, &err) != KVP_OK)
            return cli_error(&err);
        kvp_hub_env_read(&hub_env);
        hub_env.refresh = cli_hub_refresh;
        catalog->hub = &hub_env;
        catalog->fetch = cli_hub_fetch;
    }
    *out = catalog;
    return CLI_OK;
}

void cli_catalog_release(void)
{
    kvp_catalog_free(catalog);
    catalog = NULL;
}

/* The GPU catalog beside the models, loaded once: whole, or for a command
 * that names one GPU, up to that GPU (kvp_gpu_catalog_load_for). A command that
 * then asks for another GPU gets the whole file, loaded beside the first
 * catalog: what it handed out (compare's rows, one per GPU) points into it,
 * so both live until cli_gpus_release. */
static struct kvp_gpu_catalog *gpus, *gpus_first;
static char gpus_for[KVP_GPU_ID_MAX]; /* the name gpus was loaded for; "" for the whole file */

int cli_gpus_for(const char *name, const struct kvp_gpu_catalog **out)
{
    struct kvp_error err = {0};
    char path[PATH_MAX + 64];

    if (!gpus || (gpus_for[0] && (!name || strcmp(name, gpus_for) != 0))) {
        if (gpus) { /* the first load was for one GPU: keep it, read the whole file */
            gpus_first = gpus;
            gpus = NULL;
            name = NULL;
        }
        cli_models_dir(path, PATH_MAX + 32);
        snprintf(path + strlen(path), sizeof path - strlen(path), "/gpus.yaml");
        if (kvp_gpu_catalog_load_for(path, name, &gpus, &err) != KVP_OK)
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
    kvp_gpu_catalog_free(gpus);
    kvp_gpu_catalog_free(gpus_first);
    gpus = gpus_first = NULL;
}

int cli_model(const char *s, struct kvp_model **out)
{
    struct kvp_error err = {0};
    struct kvp_hub_ref ref;
    const struct kvp_catalog *cat = NULL;
    int rc;

    char dir[PATH_MAX + 32];

    cli_models_dir(dir, sizeof dir);
    /* a shipped model by name or id loads alone; the whole catalog only for variants and suggestions */
    /* a Hub reference's variant of a built-in is read from its id only when no cache or Hub has it */
    if ((kvp_model_ref_is_path(s) && access(s, F_OK) == 0) ||
        kvp_catalog_open_one(dir, s, kvp_hub_ref_parse(s, &ref, &err) != KVP_OK, out, &err) != KVP_OK) {
        if (access(s, F_OK) != 0 && (rc = cli_catalog(&cat)) != CLI_OK)
            return rc;
        err = (struct kvp_error){0};
        if (kvp_model_open(cat, s, out, &err) != KVP_OK)
            return cli_error(&err);
    }
    for (uint32_t i = 0; i < (*out)->n_warnings; i++)
        fprintf(stderr, "kvplan: warning: %s: %s\n", (*out)->file[0] ? (*out)->file : (*out)->name,
                (*out)->warnings[i]);
    return CLI_OK;
}

/* ---- option values ---- */

int cli_split(const char *opt, const char *list, char (*items)[KVP_SETTING_VALUE_MAX], uint32_t max, uint32_t *n)
{
    *n = 0;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0 || len >= KVP_SETTING_VALUE_MAX)
            return cli_usage_error("--%s: bad list '%s'", opt, list);
        if (*n == max)
            return cli_usage_error("--%s: at most %u values (got '%s')", opt, max, list);
        memcpy(items[*n], p, len);
        items[(*n)++][len] = '\0';
        if (!end)
            return CLI_OK;
        p = end + 1;
    }
}

int cli_count(const struct cli_cmd *cmd, const char *name, uint64_t min, uint64_t *out)
{
    const char *v = cli_opt(cmd, name);
    struct kvp_error err = {0};
    uint64_t x;
    if (!v)
        return CLI_OK;
    if (kvp_parse_count(v, &x, &err) != KVP_OK)
        return cli_usage_error("--%s: %s", name, err.msg);
    if (x < min)
        return cli_usage_error("--%s must be at least %llu (got %s)", name, (unsigned long long)min, v);
    *out = x;
    return CLI_OK;
}

int cli_format(const struct cli_cmd *cmd, const char *name, struct kvp_format *out)
{
    const char *v = cli_opt(cmd, name);
    struct kvp_error err = {0};
    if (v && kvp_format_parse(v, out, &err) != KVP_OK)
        return cli_usage_error("--%s: %s", name, err.msg);
    return CLI_OK;
}

int cli_wstore(const struct cli_cmd *cmd, const char *name, bool gguf, struct kvp_wstore *out)
{
    const char *v = cli_opt(cmd, name);
    struct kvp_error err = {0};
    if (v && kvp_wstore_parse(v, gguf, out, &err) != KVP_OK)
        return cli_usage_error("--%s: %s", name, err.msg);
    return CLI_OK;
}

int cli_bytes(const struct cli_cmd *cmd, const char *name, uint64_t *out)
{
    const char *v = cli_opt(cmd, name);
    struct kvp_error err = {0};
    if (v && kvp_parse_bytes(v, out, &err) != KVP_OK)
        return cli_usage_error("--%s: %s", name, err.msg);
    return CLI_OK;
}

int cli_fraction(const struct cli_cmd *cmd, const char *name, double *out)
{
    const char *v = cli_opt(cmd, name);
    char *end;
    double x;
    if (!v)
        return CLI_OK;
    x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(x > 0.0 && x <= 1.0))
        return cli_usage_error("--%s must be a fraction in (0, 1] (got '%s')", name, v);
    *out = x;
    return CLI_OK;
}

int cli_out(const struct cli_cmd *cmd, enum kvp_out *out, bool md_ok)
{
    const char *v = cli_opt(cmd, "format");
    if (v && (!kvp_out_from_name(v, out) || (!md_ok && *out == KVP_OUT_MD)))
        return cli_usage_error("--format must be text, json, csv%s (got '%s')", md_ok ? " or md" : "", v);
    return CLI_OK;
}

int cli_write(struct kvp_buf *b)
{
    if (b->nomem)
        return cli_usage_error("out of memory rendering the output");
    if ((b->len && fwrite(b->data, 1, b->len, stdout) != b->len) || fflush(stdout) != 0)
        return cli_usage_error("cannot write the output: %s", strerror(errno));
    return CLI_OK;
}

/* ---- deployment options ---- */

void cli_deploy_opts(struct cli_opt *opts, size_t cap, const struct cli_opt *extra)
{
    static char names[KVP_SETTINGS_MAX][40];
    size_t n = 0;
    for (uint32_t i = 0; i < kvp_settings_count() && n + 1 < cap; i++, n++) {
        const struct kvp_setting *r = kvp_setting_at(i);
        snprintf(names[i], sizeof names[i], "%s", r->key);
        for (char *p = names[i]; *p; p++)
            *p = *p == '_' ? '-' : *p;
        opts[n] = (struct cli_opt){names[i], r->arg, r->help, NULL};
    }
    for (; extra && extra->name && n + 1 < cap; extra++, n++)
        opts[n] = *extra;
    opts[n] = (struct cli_opt){NULL, NULL, NULL, NULL};
}

int cli_deploy_settings(const struct cli_cmd *cmd, struct kvp_settings *s)
{
    struct kvp_error err = {0};
    kvp_settings_clear(s);
    for (const struct cli_opt *o = cmd->opts; o->name; o++) {
        int row = kvp_setting_find(o->name);
        if (row < 0 || !o->value)
            continue;
        /* a flag is given as "1" */
        if (kvp_settings_put(s, o->name, kvp_setting_at((uint32_t)row)->arg ? o->value : "true", &err) != KVP_OK)
            return cli_usage_error("--%s: %s", o->name, err.msg);
    }
    return CLI_OK;
}

int cli_deploy_need_gpu(const char *name, const char *const *axes, struct kvp_settings *s, bool *given)
{
    static const char *const memory[] = {"gpu", "gpu_memory", "kv_cache_memory"};
    bool has_memory = false;
    for (; *axes; axes++)
        s->given &= ~(1ull << kvp_setting_find(*axes));
    for (uint32_t i = 0; i < sizeof memory / sizeof memory[0]; i++)
        has_memory |= (s->given >> kvp_setting_find(memory[i])) & 1u;
    *given = s->given != 0;
    if (*given && !has_memory)
        return cli_usage_error("%s: which GPU? (--gpu NAME from 'kvplan gpus', or --gpu-memory SIZE)", name);
    return CLI_OK;
}

int cli_deploy_front(const struct cli_cmd *cmd, const char *const *axes, struct kvp_settings *s, bool *given)
{
    int rc = cli_deploy_settings(cmd, s);
    return rc != CLI_OK ? rc : cli_deploy_need_gpu(cmd->name, axes, s, given);
}

int cli_deploy_apply(const struct kvp_settings *s, const struct kvp_model *m, struct kvp_deploy *d,
                     const struct kvp_gpu **gpu)
{
    const struct kvp_gpu_catalog *gc = NULL;
    struct kvp_error err = {0};
    char opt[48];
    int bad, rc, gpu_row = kvp_setting_find("gpu");

    if ((s->given >> gpu_row) & 1u && (rc = cli_gpus_for(s->value[gpu_row], &gc)) != CLI_OK)
        return rc;
    if (kvp_settings_apply(s, m, gc, d, gpu, &bad, &err) != KVP_OK) {
        if (bad < 0)
            return cli_error(&err);
        snprintf(opt, sizeof opt, "%s", kvp_setting_at((uint32_t)bad)->key);
        for (char *p = opt; *p; p++)
            *p = *p == '_' ? '-' : *p;
        return cli_usage_error("--%s: %s", opt, err.msg);
    }
    return CLI_OK;
}
