/* cmd_check.c -- `kvplan check PLAN...`: evaluate the capacity assertions of
 * plan files, the CI gate. Exit 0 when every assertion holds, 1 when one
 * fails (or regresses against --baseline), 2 when a plan is invalid; an
 * invalid plan never reports a pass. Reports are written atomically. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kvplan/emit.h"
#include "kvplan/plan.h"

#define MAX_PLANS 256

static struct cli_opt opts[] = {
    {"format", "F", "text (default), json or junit (JUnit XML for CI test reports)", NULL},
    {"output", "FILE", "write the report to FILE atomically (the text report still goes to stdout)", NULL},
    {"baseline", "FILE", "compare with an earlier JSON report; a drop beyond --tolerance fails", NULL},
    {"write-baseline", "FILE", "record this run's JSON report as the baseline (unless an assertion fails)", NULL},
    {"tolerance", "PCT", "how far a result may get worse than the baseline, in percent (default 5%)", NULL},
    {"si", NULL, "SI units (GB) instead of IEC (GiB)", NULL},
    {"emit", NULL, "print each deployment's launch command instead (as `kvplan fit --emit`; no assertion is run)",
     NULL},
    {NULL, NULL, NULL, NULL},
};

static const struct cli_cmd cmd = {
    "check", "PLAN... [options]",
    "Evaluate every assertion of the plan files (docs/plan-format.md): each with its measured\n"
    "value, its limit and, when it fails, the derivation. Exit 0 when all pass, 1 when one fails\n"
    "or regresses against --baseline, 2 when a plan is invalid (file:line:col: message).",
    opts,
};

/* Write b to path whole or not at all (kvp_buf_save). */
static int write_atomic(const char *path, const struct kvp_buf *b)
{
    struct kvp_error err = {0};
    return kvp_buf_save(b, path, &err) == KVP_OK ? CLI_OK : cli_error(&err);
}

/* "5", "5%", "0.5%" -> a fraction 0.05, 0.005. */
static int read_tolerance(double *out)
{
    const char *v = cli_opt(&cmd, "tolerance");
    char *end;
    double x;
    if (!v)
        return CLI_OK;
    x = strtod(v, &end);
    if (*end == '%')
        end++;
    if (end == v || *end != '\0' || !(x >= 0.0 && x < 100.0))
        return cli_usage_error("--tolerance must be a percentage in [0, 100) such as 5%% (got '%s')", v);
    *out = x / 100.0;
    return CLI_OK;
}

/* --emit: each deployment's launch command under a `#` line naming it; a
 * deployment whose engine has none says why there, and the rest go on. */
static int emit(const struct kvp_plan *plan)
{
    struct kvp_buf b = {0};
    int rc = CLI_OK;
    for (uint32_t i = 0; i < plan->n && rc == CLI_OK; i++) {
        const struct kvp_plan_deployment *dep = &plan->deps[i];
        struct kvp_fit f;
        struct kvp_error err = {0};
        kvp_buf_printf(&b, "%s# %s (%s:%u:%u)\n", i ? "\n" : "", dep->name, dep->file, dep->line, dep->col);
        if (kvp_fit_compute(dep->model, &dep->d, &f, &err) != KVP_OK)
            rc = cli_error(&err);
        else if (kvp_emit_command(dep->model, &dep->d, &f, &b, &err) != KVP_OK)
            kvp_buf_printf(&b, "# no launch command: %s\n", err.msg);
        else if (!f.fits)
            kvp_buf_printf(&b, "# warning: this deployment does not fit (kvplan check without --emit says why)\n");
    }
    if (rc == CLI_OK)
        rc = cli_write(&b);
    kvp_buf_release(&b);
    return rc;
}

static int run(const char **plans, int nplans, enum kvp_out fmt, double tolerance, bool si)
{
    const struct kvp_catalog *models = NULL;
    const struct kvp_gpu_catalog *gpus = NULL;
    const char *out = cli_opt(&cmd, "output"), *base = cli_opt(&cmd, "baseline");
    const char *record = cli_opt(&cmd, "write-baseline");
    struct kvp_plan plan = {0};
    struct kvp_plan_report rep = {0};
    struct kvp_buf b = {0};
    struct kvp_error err = {0};
    int rc;

    if ((rc = cli_catalog(&models)) != CLI_OK || (rc = cli_gpus(&gpus)) != CLI_OK)
        return rc;
    for (int i = 0; i < nplans; i++)
        if (kvp_plan_load(&plan, plans[i], models, gpus, &err) != KVP_OK) {
            rc = cli_error(&err);
            goto done;
        }
    for (uint32_t i = 0; i < plan.n; i++) {
        const struct kvp_model *m = plan.deps[i].model;
        for (uint32_t w = 0; w < m->n_warnings; w++)
            fprintf(stderr, "kvplan: warning: %s: %s\n", m->file[0] ? m->file : m->name, m->warnings[w]);
    }
    if (cli_opt(&cmd, "emit")) {
        rc = emit(&plan);
        goto done;
    }
    if (kvp_plan_evaluate(&plan, &rep, &err) != KVP_OK ||
        (base && kvp_plan_baseline_apply(&rep, base, tolerance, &err) != KVP_OK)) {
        rc = cli_error(&err);
        goto done;
    }
    kvp_plan_render(&rep, fmt, si, &b);
    if (b.nomem) {
        rc = cli_usage_error("out of memory rendering the report");
        goto done;
    }
    if (out) {
        if ((rc = write_atomic(out, &b)) != CLI_OK)
            goto done;
        if (fmt != KVP_OUT_TEXT) {
            kvp_buf_release(&b);
            kvp_plan_render(&rep, KVP_OUT_TEXT, si, &b);
        }
    }
    if ((rc = cli_write(&b)) != CLI_OK)
        goto done;
    if (record) {
        if (rep.failed) {
            fprintf(stderr, "kvplan: check: not writing the baseline '%s': %u assertion%s failed\n", record,
                    rep.failed, rep.failed == 1 ? "" : "s");
        } else {
            kvp_buf_release(&b);
            kvp_plan_render(&rep, KVP_OUT_JSON, si, &b);
            if (b.nomem)
                rc = cli_usage_error("out of memory rendering the baseline");
            else if ((rc = write_atomic(record, &b)) != CLI_OK)
                goto done;
        }
    }
    rc = rep.failed || rep.regressed ? CLI_FAIL : CLI_OK;
done:
    kvp_buf_release(&b);
    kvp_plan_report_release(&rep);
    kvp_plan_release(&plan);
    return rc;
}

int cmd_check(int argc, char **argv)
{
    const char *pos[MAX_PLANS];
    enum kvp_out fmt = KVP_OUT_TEXT;
    const char *f;
    double tolerance = 0.05;
    int npos, rc;

    if ((rc = cli_parse(&cmd, argc, argv, pos, MAX_PLANS, &npos)) != CLI_OK)
        return rc;
    if (npos == 0)
        return cli_usage_error("check: which plan? (usage: kvplan check PLAN... [options])");
    if ((f = cli_opt(&cmd, "format")) && !kvp_plan_out_from_name(f, &fmt))
        return cli_usage_error("--format must be text, json or junit (got '%s')", f);
    if ((rc = read_tolerance(&tolerance)) != CLI_OK)
        return rc;
    return run(pos, npos, fmt, tolerance, cli_opt(&cmd, "si") != NULL);
}
