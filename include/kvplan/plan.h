/* plan.h -- capacity promises as code: deployment plans with assertions,
 * evaluated for a CI gate (`kvplan check`).
 *
 * A plan file (YAML, `kvplan_plan: 1`, described in docs/plan-format.md)
 * names deployments -- a model, GPUs, parallelism, an engine and its
 * settings, the same inputs as `kvplan fit` -- and assertions on each: it
 * fits; at least N requests at a context; at least T tokens at a
 * concurrency; at most a share of GPU memory or bytes per token for KV; a
 * decode-time bound; a minimum headroom. Evaluating a plan runs the engine
 * profiles of deploy.h and reports each assertion with its measured value,
 * its limit and, when it fails, the derivation.
 *
 *     struct kvp_plan plan = {0};
 *     struct kvp_plan_report rep = {0};
 *     struct kvp_buf out = {0};
 *     if (kvp_plan_load(&plan, "plan.yaml", models, gpus, &err) != KVP_OK ||
 *         kvp_plan_evaluate(&plan, &rep, &err) != KVP_OK)
 *         ... err: "plan.yaml:12:7: 'min_concurrency' must be ..." -> exit 2
 *     kvp_plan_baseline_apply(&rep, "baseline.json", 0.05, &err);   // optional
 *     kvp_plan_render(&rep, KVP_OUT_JUNIT, false, &out);
 *     ... rep.failed + rep.regressed ? exit 1 : exit 0
 *     kvp_buf_release(&out);
 *     kvp_plan_report_release(&rep);
 *     kvp_plan_release(&plan);
 *
 * A kvp_plan owns its deployments and their models until kvp_plan_release;
 * its GPU pointers point into the GPU catalog passed to kvp_plan_load, which
 * must outlive it. A report points into the plan it was evaluated from and
 * owns its derivation texts until kvp_plan_report_release. Both start zeroed
 * and are safe to release after a failed call.
 */
#ifndef KVPLAN_PLAN_H
#define KVPLAN_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/api.h"
#include "kvplan/catalog.h"
#include "kvplan/deploy.h"
#include "kvplan/error.h"
#include "kvplan/gpu.h"
#include "kvplan/render.h"
#include "kvplan/sim.h"

#define KVP_PLAN_VERSION 1       /* the `kvplan_plan:` this library reads */
#define KVP_PLAN_REPORT_VERSION 1 /* the `kvplan_check:` of JSON reports and baselines */
#define KVP_PLAN_MAX_INCLUDE_DEPTH 8
#define KVP_PLAN_MAX_FILES 64          /* files one kvp_plan_load reads, the same file counted each time */
#define KVP_PLAN_MAX_DEPLOYMENTS 1024  /* in one plan */
#define KVP_PLAN_MAX_CHECKS 2048       /* assertions in one plan (each costs a fit or a search) */
#define KVP_PLAN_MAX_WORKLOADS 256     /* named workloads in one plan (each a trace read or a draw) */
#define KVP_PLAN_NAME_MAX 64    /* deployment and assertion names, NUL included */
#define KVP_PLAN_ID_MAX 160     /* "deployment/assertion", NUL included */
#define KVP_PLAN_PATH_MAX 1024

enum kvp_check_kind {
    KVP_CHECK_FITS,                   /* the requests fit at all (1 yes, 0 no) */
    KVP_CHECK_MIN_CONCURRENCY,        /* requests of `context` tokens that fit >= limit */
    KVP_CHECK_MIN_CONTEXT,            /* tokens per request with `concurrency` requests >= limit */
    KVP_CHECK_MAX_KV_SHARE,           /* required KV / GPU memory <= limit (a fraction) */
    KVP_CHECK_MAX_KV_BYTES_PER_TOKEN, /* KV bytes one token costs on the busiest GPU <= limit */
    KVP_CHECK_MAX_TPOT,               /* roofline decode time per output token, ms <= limit */
    KVP_CHECK_MIN_HEADROOM,           /* bytes per GPU left after weights, reserve, KV >= limit */
    KVP_CHECK_MIN_SUSTAINED_RATE,     /* kvp_sim_max_rate of a synthetic `workload`, requests/s >= limit */
    KVP_CHECK_MAX_PREEMPTIONS,        /* preemptions kvp_sim_run counts under `workload` <= limit */
    KVP_CHECK_KIND_COUNT
};

/* The plan key of kind k ("min_concurrency"); never NULL. */
KVP_API const char *kvp_check_kind_name(enum kvp_check_kind k);
/* true when a bigger measured value is better (fits, min_*), false for max_*. */
KVP_API bool kvp_check_higher_is_better(enum kvp_check_kind k);

/* A named workload (`workloads:` of a plan file): a trace, read when the
 * plan loads, or a synthetic one, drawn when an assertion needs it. */
struct kvp_plan_workload {
    char name[KVP_PLAN_NAME_MAX];
    char file[KVP_PLAN_PATH_MAX]; /* the plan file it is written in */
    uint32_t line, col;
    bool is_trace;
    struct kvp_workload trace;    /* owned, when is_trace */
    struct kvp_synth synth;       /* when not */
    double max_queue_s;           /* sustained: queueing p99 at most this (default 1 s) */
};

/* One assertion as written. */
struct kvp_plan_check {
    enum kvp_check_kind kind;
    char id[KVP_PLAN_ID_MAX]; /* "deployment/name", or "deployment/kind[:context=T][:concurrency=C]" */
    char test[KVP_PLAN_ID_MAX]; /* a name free of numbers, for CI test history: "deployment/name", or
                                 * "deployment/kind", "#2" on for the second unnamed one of a kind */
    bool named;                 /* the plan gave it a 'name' */
    double limit;             /* in the kind's unit: requests, tokens, fraction, bytes, ms; fits: 1 or 0 */
    uint64_t context;         /* tokens per request for this check; 0 = the deployment's */
    uint64_t concurrency;     /* requests for this check; 0 = the deployment's */
    int32_t workload;         /* min_sustained_rate, max_preemptions: index into kvp_plan.workloads; else -1 */
    uint32_t line, col;       /* where it is written, in its deployment's file */
};

struct kvp_plan_deployment {
    char name[KVP_PLAN_NAME_MAX];
    char file[KVP_PLAN_PATH_MAX]; /* the plan file as opened (relative to the caller's directory) */
    uint32_t line, col;
    struct kvp_model *model;      /* owned */
    const struct kvp_gpu *gpu;    /* into the GPU catalog; NULL when only memory sizes are given */
    struct kvp_deploy d;          /* the settings, as `kvplan fit` would take them */
    uint32_t n_checks;
    struct kvp_plan_check *checks; /* owned */
};

struct kvp_plan {
    uint32_t n, cap;
    struct kvp_plan_deployment *deps; /* owned, in file order (includes first) */
    uint32_t n_workloads, cap_workloads;
    struct kvp_plan_workload *workloads; /* owned; a deployment sees those of its own file */
};

/* Load a plan file and the files it includes, appending its deployments to
 * p (several files may be loaded into one plan; deployment names must be
 * unique across them). Models are resolved with kvp_model_open against
 * models (may be NULL: paths only), GPUs with kvp_gpu_find against gpus
 * (may be NULL: memory sizes only). Model paths and includes are relative to
 * the directory of the file that names them. Every error carries the
 * offending node's file:line:col; include cycles, includes nested deeper
 * than KVP_PLAN_MAX_INCLUDE_DEPTH, more than KVP_PLAN_MAX_FILES files or 4 MiB
 * read, more than KVP_PLAN_MAX_DEPLOYMENTS deployments or KVP_PLAN_MAX_CHECKS
 * assertions are errors. Deployments naming the same model share one read of
 * it. On failure p keeps the deployments of earlier successful calls only. */
KVP_API enum kvp_status kvp_plan_load(struct kvp_plan *p, const char *path, const struct kvp_catalog *models,
                              const struct kvp_gpu_catalog *gpus, struct kvp_error *err);

/* Free what p owns and zero it; a zeroed plan is a no-op. */
KVP_API void kvp_plan_release(struct kvp_plan *p);

/* The outcome of one assertion. */
struct kvp_check_result {
    const struct kvp_plan_deployment *dep; /* into the plan */
    const struct kvp_plan_check *check;    /* into the plan */
    uint64_t context, concurrency;         /* what it was evaluated at (concurrency >= 1) */
    double measured;                       /* in the kind's unit, like check->limit */
    bool pass;                             /* the assertion holds */
    bool has_baseline;                     /* the baseline had this id */
    double baseline;                       /* its measured value there */
    bool regressed;                        /* worse than the baseline beyond the tolerance */
    char *derivation;                      /* owned; how `measured` came about, set when it fails */
};

struct kvp_plan_report {
    const struct kvp_plan *plan;      /* evaluated from (its workloads name the simulated checks) */
    uint32_t n;
    struct kvp_check_result *results; /* owned, in plan order */
    uint32_t passed, failed;          /* by assertion: held (and not regressed), did not hold */
    uint32_t regressed;               /* held, but worse than the baseline (after a baseline) */
    bool have_baseline;
    double tolerance;                 /* fraction the baseline comparison allowed */
    uint32_t baseline_missing;        /* checks the baseline did not know (new ones: not failures) */
};

/* Evaluate every assertion of p into r (which must be zeroed or released).
 * An engine that refuses a deployment (a cache format it cannot store, a
 * tp x pp that needs more GPUs) is an error at the deployment's place. */
KVP_API enum kvp_status kvp_plan_evaluate(const struct kvp_plan *p, struct kvp_plan_report *r, struct kvp_error *err);

/* Compare r with an earlier JSON report (`kvplan check --format json`,
 * `--write-baseline`): a result whose id is in the baseline regresses when
 * it got worse by more than tolerance (a fraction: 0.05 = 5%) of the
 * baseline value -- lower for fits and min_*, higher for max_*. Errors: the
 * file cannot be read, is not a kvplan_check report, an id appears twice. */
KVP_API enum kvp_status kvp_plan_baseline_apply(struct kvp_plan_report *r, const char *path, double tolerance,
                                        struct kvp_error *err);

KVP_API bool kvp_plan_out_from_name(const char *s, enum kvp_out *out);

/* Append r to b as human text, JSON (schema in docs/plan-format.md) or JUnit
 * XML. si: SI units (GB) in human-readable sizes. */
KVP_API void kvp_plan_render(const struct kvp_plan_report *r, enum kvp_out fmt, bool si, struct kvp_buf *b);

/* Free what r owns and zero it. */
KVP_API void kvp_plan_report_release(struct kvp_plan_report *r);

#endif
