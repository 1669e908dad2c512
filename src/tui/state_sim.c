/* state_sim.c -- the TUI's simulate view: a synthetic workload as fields,
 * run through the engine's scheduler and block pool (kvplan/sim.h).
 *
 * The workload is a table of rows like settings.h's: each key of a plan's
 * synthetic workload (docs/plan-format.md, `kvplan simulate`'s options with
 * '_' for '-') with its type, so the view's fields, their arrows and typed
 * values, and the plan writer all read and print it here. The run is the one
 * `kvplan simulate` makes for the same deployment and options: the pool and
 * limits of kvp_sim_config_from_fit, step times from the GPU's roofline. It
 * runs again only when an input changed (sim_stale), never on a redraw.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"
#include "kvplan/num.h"

enum wl_type {
    WL_RATE,    /* requests per second >= 0 */
    WL_RANGE,   /* tokens, N or LO-HI */
    WL_COUNT,   /* 1..KVP_SIM_MAX_REQUESTS */
    WL_SEED,    /* any 64-bit count */
    WL_PREFIX,  /* tokens, 0 = none */
    WL_SHARE,   /* 0..1 */
    WL_SECONDS, /* >= 0 */
};

static const struct wl_row {
    const char *key; /* the plan's workload key */
    enum wl_type type;
    const char *help;
} rows[] = {
    {"rate", WL_RATE, "requests per second, Poisson arrivals (0: all at once; default 1)"},
    {"prompt", WL_RANGE, "prompt tokens, N or LO-HI drawn uniformly (default 1024)"},
    {"output", WL_RANGE, "output tokens, N or LO-HI drawn uniformly (default 256)"},
    {"requests", WL_COUNT, "how many requests (default 1000)"},
    {"seed", WL_SEED, "the generator's seed: the same seed, the same workload (default 1)"},
    {"prefix", WL_PREFIX, "tokens of a shared prefix (system prompt) at the start of prompts (0: none)"},
    {"prefix_share", WL_SHARE, "fraction of requests that start with the prefix, 0 to 1 (default 1)"},
    {"max_queue", WL_SECONDS, "seconds: sustained is no preemption and queueing p99 at most this (default 1)"},
};
#define N_ROWS (sizeof rows / sizeof rows[0])

uint32_t tui_wl_count(void)
{
    return (uint32_t)N_ROWS;
}

const char *tui_wl_key(uint32_t row)
{
    return row < N_ROWS ? rows[row].key : "?";
}

const char *tui_wl_help(uint32_t row)
{
    return row < N_ROWS ? rows[row].help : "";
}

/* The range row holds: prompt or output. */
static struct kvp_range *range_of(struct tui_workload *w, uint32_t row)
{
    return strcmp(rows[row].key, "prompt") == 0 ? &w->synth.prompt : &w->synth.output;
}

/* A double as the shortest text strtod reads back to it. */
static const char *num_text(double v, char *buf, uint32_t n)
{
    snprintf(buf, n, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, n, "%.17g", v);
    return buf;
}

const char *tui_wl_text(const struct tui_workload *w, uint32_t row, char *buf, uint32_t n)
{
    const struct kvp_synth *s = &w->synth;
    buf[0] = '\0';
    if (row >= N_ROWS)
        return buf;
    switch (rows[row].type) {
    case WL_RATE:
        return num_text(s->rate, buf, n);
    case WL_RANGE: {
        const struct kvp_range *r = range_of((struct tui_workload *)w, row);
        if (r->lo == r->hi)
            snprintf(buf, n, "%" PRIu32, r->lo);
        else
            snprintf(buf, n, "%" PRIu32 "-%" PRIu32, r->lo, r->hi);
        return buf;
    }
    case WL_COUNT:
        snprintf(buf, n, "%" PRIu32, s->requests);
        return buf;
    case WL_SEED:
        snprintf(buf, n, "%" PRIu64, s->seed);
        return buf;
    case WL_PREFIX:
        if (s->prefix)
            snprintf(buf, n, "%" PRIu32, s->prefix);
        return buf;
    case WL_SHARE:
        return s->prefix ? num_text(s->prefix_share, buf, n) : buf;
    case WL_SECONDS:
        return num_text(w->max_queue_s, buf, n);
    }
    return buf;
}

/* A number >= lo (and <= hi) as typed; KVP_ERR_USAGE otherwise. */
static enum kvp_status read_number(const char *v, double lo, double hi, const char *what, double *out,
                                   struct kvp_error *err)
{
    char *end;
    double x;
    errno = 0;
    x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || errno || !isfinite(x) || x < lo || x > hi)
        return kvp_fail(err, KVP_ERR_USAGE, "must be %s (got '%s')", what, v);
    *out = x;
    return KVP_OK;
}

enum kvp_status tui_wl_put(struct tui_workload *w, uint32_t row, const char *v, struct kvp_error *err)
{
    const struct kvp_synth def = KVP_SYNTH_DEFAULTS;
    struct kvp_synth *s = &w->synth;
    enum kvp_status st;
    uint64_t u;

    if (row >= N_ROWS)
        return kvp_fail(err, KVP_ERR_USAGE, "no such workload key");
    switch (rows[row].type) {
    case WL_RATE:
        if (!v)
            s->rate = def.rate;
        else if ((st = read_number(v, 0, INFINITY, "a number of requests/s >= 0", &s->rate, err)) != KVP_OK)
            return st;
        return KVP_OK;
    case WL_RANGE:
        if (!v)
            *range_of(w, row) = strcmp(rows[row].key, "prompt") == 0 ? def.prompt : def.output;
        else if ((st = kvp_range_parse(v, range_of(w, row), err)) != KVP_OK)
            return st;
        return KVP_OK;
    case WL_COUNT:
        if (!v) {
            s->requests = def.requests;
            return KVP_OK;
        }
        if ((st = kvp_parse_count(v, &u, err)) != KVP_OK)
            return st;
        if (u < 1 || u > KVP_SIM_MAX_REQUESTS)
            return kvp_fail(err, KVP_ERR_USAGE, "must be 1 to %u requests (got '%s')", KVP_SIM_MAX_REQUESTS, v);
        s->requests = (uint32_t)u;
        return KVP_OK;
    case WL_SEED:
        if (!v)
            s->seed = def.seed;
        else if (!kvp_parse_u64(v, &u))
            return kvp_fail(err, KVP_ERR_USAGE, "must be a whole number (got '%s')", v);
        else
            s->seed = u;
        return KVP_OK;
    case WL_PREFIX:
        if (!v || strcmp(v, "0") == 0 || strcmp(v, "none") == 0) {
            s->prefix = 0;
            s->prefix_share = 0;
            return KVP_OK;
        }
        if ((st = kvp_parse_count(v, &u, err)) != KVP_OK)
            return st;
        if (u > UINT32_MAX)
            return kvp_fail(err, KVP_ERR_USAGE, "must be at most %u tokens (got '%s')", UINT32_MAX, v);
        if (!s->prefix) /* as `kvplan simulate --prefix N` and a plan's 'prefix': every request */
            s->prefix_share = 1.0;
        s->prefix = (uint32_t)u;
        return KVP_OK;
    case WL_SHARE:
        if (!v) {
            s->prefix_share = s->prefix ? 1.0 : 0.0;
            return KVP_OK;
        }
        if (!s->prefix)
            return kvp_fail(err, KVP_ERR_USAGE, "needs a prefix (the shared tokens) first");
        return read_number(v, 0, 1, "a fraction from 0 to 1", &s->prefix_share, err);
    case WL_SECONDS:
        if (!v) {
            w->max_queue_s = 1.0;
            return KVP_OK;
        }
        return read_number(v, 0, INFINITY, "a number of seconds >= 0", &w->max_queue_s, err);
    }
    return KVP_OK;
}

/* u doubled or halved (arrows), or one step of `by` (+ and -), within [lo, hi]. */
static uint64_t step_count(uint64_t u, int dir, bool add, uint64_t by, uint64_t lo, uint64_t hi)
{
    if (add)
        u = dir > 0 ? kvp_sat_add(u, by) : (u >= lo + by ? u - by : lo);
    else
        u = dir > 0 ? kvp_sat_mul(u, 2) : (u / 2 >= lo ? u / 2 : lo);
    return u > hi ? hi : u < lo ? lo : u;
}

const char *tui_wl_step(const struct tui_workload *w, uint32_t row, int dir, bool add, char *buf, uint32_t n)
{
    const struct kvp_synth *s = &w->synth;
    double x;

    if (row >= N_ROWS)
        return tui_wl_text(w, row, buf, n);
    switch (rows[row].type) {
    case WL_RATE:
        x = add ? s->rate + dir : dir > 0 ? (s->rate > 0 ? s->rate * 2 : 1) : s->rate / 2;
        return num_text(x < 0 ? 0 : x, buf, n);
    case WL_RANGE: { /* both ends move: a range keeps its shape */
        const struct kvp_range *r = range_of((struct tui_workload *)w, row);
        uint64_t lo = step_count(r->lo, dir, add, 1, 1, UINT32_MAX), hi = step_count(r->hi, dir, add, 1, 1, UINT32_MAX);
        if (lo == hi)
            snprintf(buf, n, "%" PRIu64, lo);
        else
            snprintf(buf, n, "%" PRIu64 "-%" PRIu64, lo, hi);
        return buf;
    }
    case WL_COUNT:
        snprintf(buf, n, "%" PRIu64, step_count(s->requests, dir, add, 1, 1, KVP_SIM_MAX_REQUESTS));
        return buf;
    case WL_SEED: /* a seed has no size: every step is one */
        snprintf(buf, n, "%" PRIu64, dir > 0 ? s->seed + 1 : s->seed ? s->seed - 1 : 0);
        return buf;
    case WL_PREFIX: /* from none, a block's worth of tokens the arrows then double */
        snprintf(buf, n, "%" PRIu64, !s->prefix && dir > 0 ? 16 : step_count(s->prefix, dir, add, 1, 0, UINT32_MAX));
        return buf;
    case WL_SHARE:
        x = s->prefix_share + dir * (add ? 0.01 : 0.1);
        return num_text(x < 0 ? 0 : x > 1 ? 1 : round(x * 100) / 100, buf, n);
    case WL_SECONDS:
        x = add ? w->max_queue_s + dir : dir > 0 ? (w->max_queue_s > 0 ? w->max_queue_s * 2 : 1) : w->max_queue_s / 2;
        return num_text(x < 0 ? 0 : x, buf, n);
    }
    return buf;
}

void tui_wl_default(const struct tui_state *s, struct tui_workload *w)
{
    memset(w, 0, sizeof *w);
    w->synth = (struct kvp_synth)KVP_SYNTH_DEFAULTS;
    w->max_queue_s = 1.0;
    for (uint32_t k = 1;; k++) {
        bool taken = false;
        if (k == 1)
            snprintf(w->name, sizeof w->name, "tui");
        else
            snprintf(w->name, sizeof w->name, "tui-%" PRIu32, k);
        for (uint32_t i = 0; i < s->n_plan_wl; i++)
            taken |= strcmp(s->plan_wl[i].name, w->name) == 0;
        if (!taken)
            return;
    }
}

enum kvp_status tui_wl_check(const struct tui_workload *w, struct kvp_error *err)
{
    struct kvp_workload drawn = {0};
    enum kvp_status st;
    uint64_t out;

    if (!kvp_mul(w->synth.requests, w->synth.output.hi, &out) || out > TUI_SIM_MAX_OUTPUT_TOKENS)
        return kvp_fail(err, KVP_ERR_USAGE,
                        "the view simulates at most %u output tokens (requests x output: %" PRIu32 " x %" PRIu32
                        "); kvplan simulate runs more",
                        TUI_SIM_MAX_OUTPUT_TOKENS, w->synth.requests, w->synth.output.hi);
    st = kvp_workload_synth(&w->synth, &drawn, err);
    kvp_workload_free(&drawn);
    return st;
}

/* The pool, limits and step times kvplan simulate uses for the deployment. */
static enum kvp_status sim_config(const struct tui_state *s, struct kvp_sim_config *c, struct kvp_error *err)
{
    if (!s->ok) {
        *err = s->err;
        return err->code;
    }
    if (!s->gpu)
        return kvp_fail(err, KVP_ERR_USAGE,
                        "simulate: the step times need a GPU from the catalog (its bandwidth and FLOP/s), not only a "
                        "memory size");
    return kvp_sim_config_from_fit(s->model, &s->d, &s->fit, (double)s->gpu->bandwidth_bytes_per_s,
                                   kvp_gpu_peak_flops(s->gpu, kvp_wstore_code_dtype(&s->d.w, s->model)), c, err);
}

void tui_sim_update(struct tui_state *s)
{
    struct kvp_workload w = {0};

    if (!s->sim_stale)
        return;
    s->sim_stale = false;
    s->sim_ok = false;
    s->have_max_rate = false;
    kvp_sim_result_free(&s->sim);
    memset(&s->sim_err, 0, sizeof s->sim_err);
    if (sim_config(s, &s->sim_cfg, &s->sim_err) != KVP_OK || tui_wl_check(&s->work, &s->sim_err) != KVP_OK ||
        kvp_workload_synth(&s->work.synth, &w, &s->sim_err) != KVP_OK)
        return;
    s->sim_runs++;
    s->sim_ok = kvp_sim_run(&s->sim_cfg, &w, true, &s->sim, &s->sim_err) == KVP_OK;
    kvp_workload_free(&w);
}

bool tui_sim_find_max_rate(struct tui_state *s, struct kvp_error *err)
{
    tui_sim_update(s);
    if (!s->sim_ok) {
        *err = s->sim_err;
        return false;
    }
    if (kvp_sim_max_rate(&s->sim_cfg, &s->work.synth, s->work.max_queue_s, &s->max_rate, err) != KVP_OK)
        return false;
    s->have_max_rate = true;
    return true;
}

/* The first step of the series that ends at or after t. */
static uint64_t step_at(const struct kvp_sim_result *r, double t)
{
    uint64_t lo = 0, hi = r->steps;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (r->series[mid].time_s < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t used_of(const struct kvp_sim_config *c, const struct kvp_sim_step *st)
{
    uint64_t u = 0;
    for (uint32_t g = 0; g < c->n_groups; g++)
        u += st->used[g];
    return u;
}

bool tui_sim_column(const struct tui_state *s, uint32_t col, uint32_t ncols, struct kvp_sim_step *out)
{
    const struct kvp_sim_result *r = &s->sim;
    double t0, t1, span;
    uint64_t a, b, best;

    if (!s->sim_ok || !r->series || r->steps == 0 || col >= ncols)
        return false;
    span = r->series[r->steps - 1].time_s;
    t0 = span * col / ncols;
    t1 = span * (col + 1) / ncols;
    a = step_at(r, t0);
    b = col + 1 == ncols ? r->steps : step_at(r, t1);
    if (a >= b) /* no step ends here: what the last one left */
        best = a > 0 ? a - 1 : 0;
    else
        for (best = a; a < b; a++)
            if (used_of(&s->sim_cfg, &r->series[a]) > used_of(&s->sim_cfg, &r->series[best]))
                best = a;
    *out = r->series[best < r->steps ? best : r->steps - 1];
    return true;
}

void tui_sim_free(struct tui_state *s)
{
    kvp_sim_result_free(&s->sim);
    free(s->plan_wl);
    free(s->plan_checks);
    s->plan_wl = NULL;
    s->plan_checks = NULL;
    s->n_plan_wl = s->n_plan_checks = 0;
}
