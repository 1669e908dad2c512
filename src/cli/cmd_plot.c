/* cmd_plot.c -- `kvplan plot MODEL... --svg FILE`: memory (weights + KV)
 * against context as an SVG chart, written atomically. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kvplan/chart.h"
#include "kvplan/num.h"
#include "kvplan/sizing.h"

#define MAX_MODELS KVP_CHART_MAX_SERIES

/* the deployment options (settings.h) come first, as `kvplan fit` takes them, then these */
static const struct cli_opt plot_opts[] = {
    {"svg", "FILE", "where to write the chart (required); replaced atomically", NULL},
    {"contexts", "LIST", "tokens per sequence, increasing (default: 1k, 2k, ... up to the largest max context)", NULL},
    {"kv-dtypes", "LIST", "cache formats, one line each (default: each model's dtype, or with a GPU the engine's "
                          "default; --kv-dtype T: one)", NULL},
    {"title", "TEXT", "chart title (default: the model, or 'memory against context')", NULL},
    {NULL, NULL, NULL, NULL},
};
static struct cli_opt opts[KVP_SETTINGS_MAX + 8];

static const struct cli_cmd cmd = {
    "plot", "MODEL... --svg FILE [--gpu NAME [options]]",
    "Memory against context, context in doublings, each model up to its own max context.\n"
    "Without a GPU: the weights as stored and the ideal KV cache of --concurrency sequences\n"
    "(default 1), whole model. With --gpu (and any of `kvplan fit`'s deployment options, the\n"
    "same defaults: vLLM's default release) per GPU: the weights, then the start-up reserve\n"
    "(its own band for one model) and the KV the requests need under the engine's rules; the\n"
    "part of the GPU the engine may use (vLLM: util of it) as the line the curves stop at, the\n"
    "rest shaded up to the GPU's memory; each line's longest context as `kvplan fit` gives it\n"
    "in the legend. Written atomically.",
    opts,
};

/* 1k, 2k, ... up to max (and max itself when it is not a power of two). */
static uint32_t default_contexts(uint64_t max, uint64_t *x)
{
    uint32_t n = 0;
    for (uint64_t t = 1024; t <= max && n < KVP_CHART_MAX_POINTS; t *= 2)
        x[n++] = t;
    if (n == 0 || (x[n - 1] < max && n < KVP_CHART_MAX_POINTS))
        x[n++] = max ? max : 1;
    return n;
}

/* The legend's text for model m in format fname (the caller adds a deployment's longest context). */
static void series_label(const struct kvp_model *m, const char *fname, int nmodels, uint32_t nf, bool deployed,
                         char *buf, size_t n)
{
    const char *what = deployed ? "weights + reserve + KV" : "weights + KV";
    if (nmodels == 1)
        snprintf(buf, n, "%s in %s", what, fname);
    else if (nf <= 1)
        snprintf(buf, n, "%s: %s", m->name, what);
    else
        snprintf(buf, n, "%s: %s in %s", m->name, what, fname);
}

/* One line: model m in format f (NULL: the model's dtype, or the deployment's default). */
static int add_series(struct kvp_chart *c, const struct kvp_model *m, const struct kvp_format *f,
                      const struct kvp_settings *st, int nmodels, uint32_t nf, char *engine, size_t en)
{
    struct kvp_error err = {0};
    struct kvp_format plain = kvp_format_plain(m->dtype);
    char label[KVP_CHART_TEXT], fname[64], ctx[32];
    struct kvp_deploy d;
    const struct kvp_gpu *gpu;
    int rc;

    if (!st) {
        kvp_format_name(f ? f : &plain, fname, sizeof fname);
        series_label(m, fname, nmodels, nf, false, label, sizeof label);
        return kvp_chart_add(c, m, f ? f : &plain, label, &err) == KVP_OK ? CLI_OK : cli_error(&err);
    }
    if ((rc = cli_deploy_apply(st, m, &d, &gpu)) != CLI_OK)
        return rc;
    if (f)
        d.k = d.v = *f;
    kvp_format_name(&d.k, fname, sizeof fname);
    series_label(m, fname, nmodels, nf, true, label, sizeof label);
    if (kvp_chart_add_fit(c, m, &d, label, &err) != KVP_OK)
        return cli_error(&err);
    {
        struct kvp_chart_series *s = &c->series[c->n_series - 1];
        size_t l = strlen(s->label);
        snprintf(s->label + l, sizeof s->label - l, "; longest context %s",
                 s->max_context ? kvp_count_text(s->max_context, ctx, sizeof ctx) : "none");
    }
    snprintf(engine, en, "%s %s", kvp_engine_info(d.engine)->name, kvp_deploy_release(&d)->version);
    if (!c->capacity) { /* the chart prints the bytes beside the label */
        c->capacity = d.gpu_memory;
        snprintf(c->capacity_label, sizeof c->capacity_label, "%s, one of %u", gpu ? gpu->id : "GPU", d.n_gpus);
    }
    return CLI_OK;
}

int cmd_plot(int argc, char **argv)
{
    static const char *const axes[] = {"concurrency", "kv_dtype", NULL};
    const char *pos[MAX_MODELS], *svg, *kd, *cs, *title;
    struct kvp_model *models[MAX_MODELS] = {0};
    struct kvp_format fmts[KVP_CHART_MAX_SERIES];
    uint64_t ctx[KVP_CHART_MAX_POINTS], max = 0, batch = 1;
    uint32_t nf = 0, nc = 0;
    struct kvp_chart *c = NULL;
    struct kvp_settings st;
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    char sub[KVP_CHART_TEXT], names[128] = "", fname[64], engine[64] = "";
    bool deployed;
    int npos, rc;

    if (!opts[0].name)
        cli_deploy_opts(opts, sizeof opts / sizeof opts[0], plot_opts);
    if ((rc = cli_parse(&cmd, argc, argv, pos, MAX_MODELS, &npos)) != CLI_OK)
        return rc;
    if (npos < 1)
        return cli_usage_error("plot: which models? (usage: kvplan plot MODEL... --svg FILE)");
    if (!(svg = cli_opt(&cmd, "svg")))
        return cli_usage_error("plot: where to? (--svg FILE)");
    if (cli_opt(&cmd, "context") || cli_opt(&cmd, "k-dtype") || cli_opt(&cmd, "v-dtype"))
        return cli_usage_error("plot: contexts are the x axis (--contexts LIST) and a line holds K and V in one "
                               "format (--kv-dtypes LIST)");
    if ((kd = cli_opt(&cmd, "kv-dtypes")) && cli_opt(&cmd, "kv-dtype"))
        return cli_usage_error("plot: --kv-dtypes and --kv-dtype are one axis (give one of them)");
    kd = kd ? kd : cli_opt(&cmd, "kv-dtype");
    if (kd && kvp_parse_format_list(kd, fmts, KVP_CHART_MAX_SERIES, &nf, &err) != KVP_OK)
        return cli_usage_error("--kv-dtypes: %s", err.msg);
    if ((cs = cli_opt(&cmd, "contexts")) && kvp_parse_count_list(cs, ctx, KVP_CHART_MAX_POINTS, &nc, &err) != KVP_OK)
        return cli_usage_error("--contexts: %s", err.msg);
    if ((rc = cli_count(&cmd, "concurrency", 1, &batch)) != CLI_OK ||
        (rc = cli_deploy_front(&cmd, axes, &st, &deployed)) != CLI_OK)
        return rc;
    if ((kd ? nf : 1) * (uint32_t)npos > KVP_CHART_MAX_SERIES)
        return cli_usage_error("plot: at most %d lines (models x formats) in one chart", KVP_CHART_MAX_SERIES);
    for (int i = 0; i < npos; i++) {
        if ((rc = cli_model(pos[i], &models[i])) != CLI_OK)
            goto out;
        if (models[i]->max_context > max)
            max = models[i]->max_context;
    }
    if (!cs)
        nc = default_contexts(max, ctx);
    if (!(c = malloc(sizeof *c))) {
        rc = cli_usage_error("out of memory");
        goto out;
    }
    title = cli_opt(&cmd, "title");
    if (!title)
        title = npos == 1 ? models[0]->name : "memory against context";
    kvp_chart_init(c, title, "");
    c->batch = batch;
    if (kvp_chart_set_x(c, ctx, nc, &err) != KVP_OK) {
        rc = cli_usage_error("--contexts: %s", err.msg);
        goto out;
    }
    for (int i = 0; i < npos; i++)
        for (uint32_t k = 0; k < (nf ? nf : 1); k++)
            if ((rc = add_series(c, models[i], nf ? &fmts[k] : NULL, deployed ? &st : NULL, npos, nf, engine,
                                 sizeof engine)) != CLI_OK)
                goto out;
    for (uint32_t i = 0; i < nf; i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", kvp_format_name(&fmts[i], fname, sizeof fname));
    }
    if (deployed)
        snprintf(sub, sizeof sub, "per GPU under %s, as kvplan fit sizes it: weights, then reserve + KV of %llu "
                 "request%s; KV in %s", engine, (unsigned long long)batch, batch == 1 ? "" : "s",
                 nf ? names : "the engine's default");
    else
        snprintf(sub, sizeof sub,
                 "%llu sequence%s, ideal engine; weights as the checkpoint stores them; KV cache in %s",
                 (unsigned long long)batch, batch == 1 ? "" : "s", nf ? names : "the model's dtype");
    snprintf(c->subtitle, sizeof c->subtitle, "%s", sub);
    if (kvp_chart_svg(c, &b, &err) != KVP_OK) {
        rc = cli_error(&err);
        goto out;
    }
    rc = kvp_buf_save(&b, svg, &err) == KVP_OK ? CLI_OK : cli_error(&err);
out:
    kvp_buf_release(&b);
    free(c);
    for (int i = 0; i < npos; i++)
        kvp_model_free(models[i]);
    return rc;
}
