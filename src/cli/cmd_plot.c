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
#include "kvplan/table.h"

#define MAX_MODELS KVP_CHART_MAX_SERIES

static struct cli_opt opts[] = {
    {"svg", "FILE", "where to write the chart (required); replaced atomically", NULL},
    {"contexts", "LIST", "tokens per sequence, increasing (default: 1k, 2k, ... up to the largest max context)", NULL},
    {"kv-dtypes", "LIST", "cache formats, one line each (default: each model's dtype)", NULL},
    {"batch", "B", "sequences whose KV is stacked on the weights (default 1)", NULL},
    {"gpu", "NAME", "GPU from the catalog: its memory as a horizontal line", NULL},
    {"gpus", "N", "GPUs: the line is N x the memory (default 1)", NULL},
    {"title", "TEXT", "chart title (default: the model, or 'memory against context')", NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "plot", "MODEL... --svg FILE [options]",
    "Memory against context: the weights (model dtype) with the KV cache of --batch sequences\n"
    "(default 1) of each model and cache format stacked on them, context in doublings, and\n"
    "the GPU's memory as a line. Ideal engine. Written atomically (temp file + rename).",
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

/* Write b to path through a temporary file in the same folder and rename:
 * a reader never sees half a chart, and a failure leaves the old file. */
static int write_atomic(const char *path, const struct kvp_buf *b)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    FILE *f;
    int fd, rc = CLI_OK;

    if (!tmp)
        return cli_usage_error("out of memory");
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
    if ((fd = mkstemp(tmp)) < 0) {
        rc = cli_usage_error("cannot create a file beside '%s': %s", path, strerror(errno));
        free(tmp);
        return rc;
    }
    {
        mode_t mask = umask(0); /* mkstemp makes 0600; give the chart the usual 0666 & ~umask */
        umask(mask);
        if (fchmod(fd, 0666 & ~mask) != 0) {
            close(fd);
            unlink(tmp);
            free(tmp);
            return cli_usage_error("cannot set the mode of '%s': %s", path, strerror(errno));
        }
    }
    if (!(f = fdopen(fd, "wb"))) {
        close(fd);
        rc = cli_usage_error("cannot write '%s': %s", tmp, strerror(errno));
    } else {
        bool ok = fwrite(b->data, 1, b->len, f) == b->len;
        ok = fflush(f) == 0 && ok;
        ok = fsync(fileno(f)) == 0 && ok;
        if (fclose(f) != 0 || !ok)
            rc = cli_usage_error("cannot write '%s': %s", tmp, strerror(errno));
        else if (rename(tmp, path) != 0)
            rc = cli_usage_error("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    }
    if (rc != CLI_OK)
        unlink(tmp);
    free(tmp);
    return rc;
}

int cmd_plot(int argc, char **argv)
{
    const char *pos[MAX_MODELS], *svg, *kd, *cs, *g, *title;
    struct kvp_model *models[MAX_MODELS] = {0};
    struct kvp_format fmts[KVP_CHART_MAX_SERIES];
    uint64_t ctx[KVP_CHART_MAX_POINTS], gpus = 1, max = 0, batch = 1;
    uint32_t nf = 0, nc = 0;
    struct kvp_chart *c = NULL;
    const struct kvp_gpu *gpu = NULL;
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    char sub[KVP_CHART_TEXT], names[128] = "", fname[64];
    int npos, rc;

    if ((rc = cli_parse(&cmd, argc, argv, pos, MAX_MODELS, &npos)) != CLI_OK)
        return rc;
    if (npos < 1)
        return cli_usage_error("plot: which models? (usage: kvplan plot MODEL... --svg FILE)");
    if (!(svg = cli_opt(&cmd, "svg")))
        return cli_usage_error("plot: where to? (--svg FILE)");
    if ((kd = cli_opt(&cmd, "kv-dtypes")) &&
        kvp_parse_format_list(kd, fmts, KVP_CHART_MAX_SERIES, &nf, &err) != KVP_OK)
        return cli_usage_error("--kv-dtypes: %s", err.msg);
    if ((cs = cli_opt(&cmd, "contexts")) && kvp_parse_count_list(cs, ctx, KVP_CHART_MAX_POINTS, &nc, &err) != KVP_OK)
        return cli_usage_error("--contexts: %s", err.msg);
    if ((rc = cli_count(&cmd, "gpus", 1, &gpus)) != CLI_OK || (rc = cli_count(&cmd, "batch", 1, &batch)) != CLI_OK)
        return rc;
    if ((g = cli_opt(&cmd, "gpu"))) {
        const struct kvp_gpu_catalog *gc;
        if ((rc = cli_gpus(&gc)) != CLI_OK)
            return rc;
        if (kvp_gpu_find(gc, g, &gpu, &err) != KVP_OK)
            return cli_usage_error("--gpu: %s", err.msg);
    }
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
    for (uint32_t i = 0; i < nf; i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", kvp_format_name(&fmts[i], fname, sizeof fname));
    }
    snprintf(sub, sizeof sub, "%llu sequence%s, ideal engine; weights as the checkpoint stores them; KV cache in %s",
             (unsigned long long)batch, batch == 1 ? "" : "s", nf ? names : "the model's dtype");
    kvp_chart_init(c, title, sub);
    c->batch = batch;
    if (kvp_chart_set_x(c, ctx, nc, &err) != KVP_OK) {
        rc = cli_usage_error("--contexts: %s", err.msg);
        goto out;
    }
    for (int i = 0; i < npos; i++)
        for (uint32_t k = 0; k < (nf ? nf : 1); k++) {
            struct kvp_format f = nf ? fmts[k] : kvp_format_plain(models[i]->dtype);
            char label[KVP_CHART_TEXT];
            kvp_format_name(&f, fname, sizeof fname);
            if (npos == 1)
                snprintf(label, sizeof label, "weights + KV in %s", fname);
            else if (nf <= 1)
                snprintf(label, sizeof label, "%s: weights + KV", models[i]->name);
            else
                snprintf(label, sizeof label, "%s: weights + KV in %s", models[i]->name, fname);
            if (kvp_chart_add(c, models[i], &f, label, &err) != KVP_OK) {
                rc = cli_error(&err);
                goto out;
            }
        }
    if (gpu) {
        if (!kvp_mul(gpu->memory_bytes, gpus, &c->capacity)) {
            rc = cli_usage_error("--gpus: memory overflows (got %llu)", (unsigned long long)gpus);
            goto out;
        }
        snprintf(c->capacity_label, sizeof c->capacity_label, "%llu x %s", (unsigned long long)gpus, gpu->id);
    }
    if (kvp_chart_svg(c, &b, &err) != KVP_OK) {
        rc = cli_error(&err);
        goto out;
    }
    rc = write_atomic(svg, &b);
out:
    kvp_buf_release(&b);
    free(c);
    for (int i = 0; i < npos; i++)
        kvp_model_free(models[i]);
    return rc;
}
