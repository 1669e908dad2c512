/* state_sim.c -- the TUI's simulate view: a synthetic workload as fields,
 * run through the engine's scheduler and block pool (kvplan/sim.h).
 *
 * The workload's fields are the rows of sim.h's key table (a plan's
 * `workloads` keys, `kvplan simulate`'s options): kvp_synth_set reads what is
 * typed, kvp_synth_text prints the fields and the plan writer's values, and
 * the arrows here step a row by its kind. The run is the one
 * `kvplan simulate` makes for the same deployment and options: the pool and
 * limits of kvp_sim_config_from_fit, step times from the GPU's roofline. It
 * runs again only when an input changed (sim_stale), never on a redraw.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"
#include "kvplan/num.h"

/* u doubled or halved (arrows), or one step of `by` (+ and -), within [lo, hi]. */
static uint64_t step_count(uint64_t u, int dir, bool add, uint64_t by, uint64_t lo, uint64_t hi)
{
    if (add)
        u = dir > 0 ? kvp_sat_add(u, by) : (u >= lo + by ? u - by : lo);
    else
        u = dir > 0 ? kvp_sat_mul(u, 2) : (u / 2 >= lo ? u / 2 : lo);
    return u > hi ? hi : u < lo ? lo : u;
}

/* x doubled or halved (add false), or one up or down (add), never below 0; from 0, up is 1. */
static double step_real(double x, int dir, bool add)
{
    x = add ? x + dir : dir > 0 ? (x > 0 ? x * 2 : 1) : x / 2;
    return x < 0 ? 0 : x;
}

const char *tui_wl_step(const struct tui_workload *w, uint32_t row, int dir, bool add, char *buf, uint32_t n)
{
    const struct kvp_synth_key *k = kvp_synth_key_at(row);
    struct tui_workload t = *w; /* stepped, then printed as the table prints it */
    struct kvp_synth *s = &t.synth;
    struct kvp_range *r = k && strcmp(k->key, "prompt") == 0 ? &s->prompt : &s->output;
    double x;

    if (!k) {
        buf[0] = '\0';
        return buf;
    }
    switch (k->kind) {
    case KVP_SYNTH_RATE:
        s->rate = step_real(s->rate, dir, add);
        break;
    case KVP_SYNTH_RANGE: /* both ends move: a range keeps its shape */
        r->lo = (uint32_t)step_count(r->lo, dir, add, 1, 1, UINT32_MAX);
        r->hi = (uint32_t)step_count(r->hi, dir, add, 1, 1, UINT32_MAX);
        break;
    case KVP_SYNTH_COUNT:
        s->requests = (uint32_t)step_count(s->requests, dir, add, 1, 1, KVP_SIM_MAX_REQUESTS);
        break;
    case KVP_SYNTH_SEED: /* a seed has no size: every step is one */
        s->seed = dir > 0 ? s->seed + 1 : s->seed ? s->seed - 1 : 0;
        break;
    case KVP_SYNTH_PREFIX: /* from none, a block's worth of tokens the arrows then double */
        s->prefix = (uint32_t)(!s->prefix && dir > 0 ? 16 : step_count(s->prefix, dir, add, 1, 0, UINT32_MAX));
        break;
    case KVP_SYNTH_FRACTION:
        x = s->prefix_share + dir * (add ? 0.01 : 0.1);
        s->prefix_share = x < 0 ? 0 : x > 1 ? 1 : round(x * 100) / 100;
        s->prefix = s->prefix ? s->prefix : 1; /* printed without one too: the edit then says it needs one */
        break;
    case KVP_SYNTH_SECONDS:
        t.max_queue_s = step_real(t.max_queue_s, dir, add);
        break;
    }
    return kvp_synth_text(s, t.max_queue_s, k->key, buf, n);
}

void tui_wl_default(const struct tui_state *s, struct tui_workload *w)
{
    memset(w, 0, sizeof *w);
    w->synth = (struct kvp_synth)KVP_SYNTH_DEFAULTS;
    w->max_queue_s = KVP_SYNTH_MAX_QUEUE_S;
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
