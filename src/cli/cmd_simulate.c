/* cmd_simulate.c -- `kvplan simulate MODEL --gpu G [workload]`: the engine's
 * scheduler and block pool under a stream of requests (docs/simulate.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvplan/deploy.h"
#include "kvplan/num.h"
#include "kvplan/ref_serve.h"
#include "kvplan/sim.h"

/* the deployment options (settings.h) come first, then --trace, the workload's keys (sim.h's table) and these */
static const struct cli_opt trace_opt = {
    "trace", "FILE", "requests from a CSV or JSONL trace (docs/simulate.md gives the columns) instead of the "
                     "synthetic workload the options below draw", NULL};
static const struct cli_opt sim_opts[] = {
    {"no-prefix-caching", NULL,
     "vLLM --no-enable-prefix-caching (SGLang --disable-radix-cache, TRT-LLM no block reuse)", NULL},
    {"step-time", "MS,MS", "step time = fixed ms + ms per scheduled token, instead of the GPU's roofline", NULL},
    {"find-max-rate", NULL, "bisect --rate for the highest sustained rate (no preemption, queueing bounded)", NULL},
    {"offload-bandwidth", "GB/s",
     "with --cpu-offload: the host link loads from the CPU tier cross (default 55, "
     "PCIe 5.0 x16 less overhead)",
     NULL},
    {"format", "F", "text (default), json, or csv (the time series)", NULL},
    {"svg", "FILE", "write the KV blocks over time as an SVG chart", NULL},
    {"validate", NULL,
     "replay the decisions on the reference decoder's real block pool and compare every step "
     "(exit 1 on a difference; at most 8,000 decoded tokens and 64 GB of cache read)",
     NULL},
    {NULL, NULL, NULL, NULL},
};
static struct cli_opt opts[KVP_SETTINGS_MAX + 24];

static const struct cli_cmd cmd = {
    "simulate", "MODEL --gpu NAME [--trace FILE | --rate R --prompt N --output N --requests N] [options]",
    "Run a workload through the engine's scheduler and KV block pool as kvplan fit sizes it:\n"
    "blocks allocated as tokens are added, prefix blocks shared, sliding-window blocks freed,\n"
    "requests preempted (recomputed) when blocks run out. vLLM V1 (0.11.0 rules), SGLang (radix\n"
    "cache, retraction), TensorRT-LLM (GUARANTEED_NO_EVICT, block reuse) and llama.cpp slots.\n"
    "Step times are roofline bounds (or --step-time), not measurements, so TTFT and\n"
    "TPOT are lower bounds; the block counts are exact under the engine's rules.",
    opts,
};

static int read_step(struct kvp_step_model *s, bool *given)
{
    const char *v = cli_opt(&cmd, "step-time");
    double a, b;
    int n = 0;
    *given = v != NULL;
    if (!v)
        return CLI_OK;
    if (sscanf(v, "%lf,%lf%n", &a, &b, &n) != 2 || v[n] != '\0' || !(a >= 0 && b >= 0) || !(a + b > 0) ||
        !isfinite(a + b))
        return cli_usage_error("--step-time must be FIXED_MS,PER_TOKEN_MS, not both 0 (got '%s')", v);
    memset(s, 0, sizeof *s);
    s->fixed_s = a / 1e3;
    s->per_token_s = b / 1e3;
    return CLI_OK;
}

/* --offload-bandwidth GB/s: the host link of the CPU tier, in bytes/s into c. */
static int read_offload_bandwidth(struct kvp_sim_config *c)
{
    const char *v = cli_opt(&cmd, "offload-bandwidth");
    double gbs;
    int n = 0;
    if (!v)
        return CLI_OK;
    if (!c->offload_blocks)
        return cli_usage_error("simulate: --offload-bandwidth needs --cpu-offload SIZE");
    if (sscanf(v, "%lf%n", &gbs, &n) != 1 || v[n] != '\0' || !isfinite(gbs) || !(gbs >= 0.001))
        return cli_usage_error("--offload-bandwidth must be a number >= 0.001 (got '%s')", v);
    c->offload_bandwidth = gbs * 1e9;
    return CLI_OK;
}

static void build_opts(void)
{
    size_t n = 0, cap = sizeof opts / sizeof opts[0];
    const struct cli_opt *o = sim_opts;
    cli_deploy_opts(opts, cap, NULL);
    while (opts[n].name)
        n++;
    opts[n++] = trace_opt;
    for (uint32_t i = 0; i < KVP_SYNTH_KEYS && n + 1 < cap; i++, n++) {
        const struct kvp_synth_key *k = kvp_synth_key_at(i);
        opts[n] = (struct cli_opt){k->opt, k->arg, k->help, NULL};
    }
    for (; o->name && n + 1 < cap; o++, n++)
        opts[n] = *o;
    opts[n] = (struct cli_opt){NULL, NULL, NULL, NULL};
}

static int workload(struct kvp_synth *s, double *max_queue, struct kvp_workload *w)
{
    struct kvp_error err = {0};
    const char *trace = cli_opt(&cmd, "trace");

    *s = (struct kvp_synth)KVP_SYNTH_DEFAULTS;
    *max_queue = KVP_SYNTH_MAX_QUEUE_S;
    for (uint32_t i = 0; i < KVP_SYNTH_KEYS; i++) { /* in the table's order: a prefix before its share */
        const struct kvp_synth_key *k = kvp_synth_key_at(i);
        const char *v = cli_opt(&cmd, k->opt);
        if (v && trace && k->synthetic)
            return cli_usage_error("simulate: --%s describes a synthetic workload; --trace gives its own", k->opt);
        if (v && kvp_synth_set(s, max_queue, k->key, v, &err) != KVP_OK)
            return cli_usage_error("--%s: %s", k->opt, err.msg);
    }
    if (trace) {
        if (cli_opt(&cmd, "find-max-rate"))
            return cli_usage_error("simulate: --find-max-rate varies a synthetic workload's rate, not a trace's");
        return kvp_workload_load(trace, w, &err) == KVP_OK ? CLI_OK : cli_error(&err);
    }
    return kvp_workload_synth(s, w, &err) == KVP_OK ? CLI_OK : cli_error(&err);
}

static void json_pct(struct kvp_json *j, const char *key, const struct kvp_percentiles *p)
{
    kvp_json_begin(j, key, '{');
    kvp_json_double(j, "p50", p->p50);
    kvp_json_double(j, "p90", p->p90);
    kvp_json_double(j, "p99", p->p99);
    kvp_json_double(j, "mean", p->mean);
    kvp_json_end(j, '}');
}

struct run {
    struct kvp_model *m;
    const struct kvp_gpu *gpu;
    struct kvp_deploy d;
    struct kvp_fit f;
    struct kvp_sim_config c;
    struct kvp_workload w;
    struct kvp_synth s;
    struct kvp_sim_result r;
    bool step_given, find;
    double max_queue, max_rate;
    const struct kvp_serve_report *v; /* --validate's, or NULL */
};

static const char *time_basis(const struct run *x)
{
    return x->step_given ? "step-time model (as given)" : "roofline lower bound (not measured)";
}

static void render_json(const struct run *x, struct kvp_buf *b)
{
    const struct kvp_sim_result *r = &x->r;
    struct kvp_json j;
    kvp_json_init(&j, b);
    kvp_json_begin(&j, NULL, '{');
    kvp_json_str(&j, "model", x->m->name);
    kvp_json_str(&j, "engine", kvp_engine_info(x->d.engine)->name);
    kvp_json_str(&j, "engine_version", x->f.release->version);
    kvp_json_str(&j, "gpu", x->gpu ? x->gpu->id : "");
    kvp_json_u64(&j, "requests", x->w.n);
    kvp_json_u64(&j, "block_size", x->c.block_size);
    kvp_json_u64(&j, "kv_groups", x->c.n_groups);
    kvp_json_u64(&j, "pool_blocks", r->pool_blocks);
    kvp_json_u64(&j, "max_num_batched_tokens", x->c.max_batched_tokens);
    kvp_json_u64(&j, "max_num_seqs", x->c.max_num_seqs);
    kvp_json_bool(&j, "prefix_caching", x->c.prefix_caching);
    kvp_json_u64(&j, "steps", r->steps);
    kvp_json_u64(&j, "peak_kv_blocks", r->peak_blocks);
    kvp_json_u64(&j, "preemptions", r->preemptions);
    kvp_json_u64(&j, "prefix_hit_tokens", r->prefix_hit_tokens);
    if (x->c.offload_blocks) {
        kvp_json_u64(&j, "offload_blocks", x->c.offload_blocks);
        kvp_json_u64(&j, "offload_hit_tokens", r->offload_hit_tokens);
        kvp_json_u64(&j, "offload_stored_blocks", r->offload_stored_blocks);
        kvp_json_u64(&j, "offload_loaded_blocks", r->offload_loaded_blocks);
        kvp_json_double(&j, "offload_bandwidth_bytes_per_s", x->c.offload_bandwidth);
        kvp_json_double(&j, "offload_load_s", r->offload_load_s);
    }
    kvp_json_u64(&j, "prompt_tokens", r->prompt_tokens);
    kvp_json_u64(&j, "output_tokens", r->output_tokens);
    kvp_json_str(&j, "time_basis", time_basis(x));
    kvp_json_double(&j, "duration_s", r->duration_s);
    kvp_json_double(&j, "throughput_tokens_per_s", r->throughput);
    json_pct(&j, "ttft_s", &r->ttft);
    json_pct(&j, "tpot_s", &r->tpot);
    json_pct(&j, "queue_s", &r->queue);
    kvp_json_bool(&j, "sustained", kvp_sim_sustained(r, x->max_queue));
    if (x->find)
        kvp_json_double(&j, "max_sustained_rate", x->max_rate);
    if (x->v) {
        kvp_json_bool(&j, "match", x->v->match);
        kvp_json_begin(&j, "validate", '{');
        kvp_json_u64(&j, "steps_compared", x->v->steps);
        kvp_json_u64(&j, "blocks_compared", x->v->blocks_compared);
        kvp_json_u64(&j, "hits_compared", x->v->hits_compared);
        kvp_json_u64(&j, "hit_tokens", x->v->hit_tokens);
        kvp_json_u64(&j, "preemptions_compared", x->v->preemptions_compared);
        kvp_json_u64(&j, "supplies_checked", x->v->supplies_checked);
        kvp_json_u64(&j, "logit_checks", x->v->logit_checks);
        kvp_json_u64(&j, "decoded_tokens", x->v->decoded_tokens);
        kvp_json_u64(&j, "peak_bytes", x->v->peak_bytes);
        kvp_json_double(&j, "wall_s", x->v->wall_s);
        if (!x->v->match) {
            kvp_json_u64(&j, "first_step", x->v->step + 1);
            kvp_json_str(&j, "field", x->v->field);
            kvp_json_u64(&j, "claimed", x->v->claimed);
            kvp_json_u64(&j, "measured", x->v->measured);
        }
        kvp_json_end(&j, '}');
    }
    kvp_json_end(&j, '}');
    kvp_buf_printf(b, "\n");
}

static void render_csv(const struct run *x, struct kvp_buf *b)
{
    kvp_buf_printf(b, "step,time_s,running,waiting,scheduled_tokens");
    for (uint32_t g = 0; g < x->c.n_groups; g++)
        kvp_buf_printf(b, ",used_g%u", g);
    kvp_buf_printf(b, x->c.offload_blocks ? ",cached,free,offloaded\n" : ",cached,free\n");
    for (uint64_t i = 0; i < x->r.steps; i++) {
        const struct kvp_sim_step *s = &x->r.series[i];
        kvp_buf_printf(b, "%llu,%.6f,%u,%u,%llu", (unsigned long long)i + 1, s->time_s, s->running, s->waiting,
                       (unsigned long long)s->scheduled_tokens);
        for (uint32_t g = 0; g < x->c.n_groups; g++)
            kvp_buf_printf(b, ",%llu", (unsigned long long)s->used[g]);
        kvp_buf_printf(b, ",%llu,%llu", (unsigned long long)s->cached, (unsigned long long)s->free);
        if (x->c.offload_blocks)
            kvp_buf_printf(b, ",%llu", (unsigned long long)s->offloaded);
        kvp_buf_printf(b, "\n");
    }
}

static void ms3(char *buf, size_t n, const struct kvp_percentiles *p)
{
    snprintf(buf, n, "%.1f / %.1f / %.1f ms", p->p50 * 1e3, p->p90 * 1e3, p->p99 * 1e3);
}

static void render_text(const struct run *x, struct kvp_buf *b)
{
    const struct kvp_sim_result *r = &x->r;
    char g[8][48], p[3][64];
    const char *unit = kvp_sim_unit(x->c.engine), *engine, *version;

    kvp_release_names(x->d.engine, x->f.release, &engine, &version);
    kvp_buf_printf(b, "%s on %s, engine %s %s: %u requests\n", x->m->name, x->gpu ? x->gpu->id : "the GPU", engine,
                   version, x->w.n);
    if (x->c.engine == KVP_SIM_VLLM || x->c.engine == KVP_SIM_VLLM0)
        kvp_buf_printf(b, "pool %s blocks of %u tokens, %u KV-cache group%s; max_num_batched_tokens %s, "
                          "max_num_seqs %s; prefix caching %s\n\n",
                       kvp_count_text(r->pool_blocks, g[0], sizeof g[0]), x->c.block_size, x->c.n_groups,
                       x->c.n_groups == 1 ? "" : "s", kvp_count_text(x->c.max_batched_tokens, g[1], sizeof g[1]),
                       kvp_count_text(x->c.max_num_seqs, g[2], sizeof g[2]), x->c.prefix_caching ? "on" : "off");
    else if (x->c.engine == KVP_SIM_SGLANG)
        kvp_buf_printf(b, "token pool %s tokens; chunked_prefill_size %s, max_prefill_tokens %s, "
                          "max_running_requests %s; radix cache %s\n\n",
                       kvp_count_text(r->pool_blocks, g[0], sizeof g[0]),
                       kvp_count_text(x->c.max_batched_tokens, g[1], sizeof g[1]),
                       kvp_count_text(x->c.max_prefill_tokens, g[5], sizeof g[5]),
                       kvp_count_text(x->c.max_num_seqs, g[2], sizeof g[2]), x->c.prefix_caching ? "on" : "off");
    else if (x->c.engine == KVP_SIM_TRTLLM)
        kvp_buf_printf(b, "pool %s blocks of %u tokens; max_num_tokens %s, max_batch_size %s; GUARANTEED_NO_EVICT; "
                          "block reuse %s\n\n",
                       kvp_count_text(r->pool_blocks, g[0], sizeof g[0]), x->c.block_size,
                       kvp_count_text(x->c.max_batched_tokens, g[1], sizeof g[1]),
                       kvp_count_text(x->c.max_num_seqs, g[2], sizeof g[2]), x->c.prefix_caching ? "on" : "off");
    else
        kvp_buf_printf(b, "%s slots of %s cells; n_batch %s\n\n", kvp_count_text(x->c.max_num_seqs, g[0], sizeof g[0]),
                       kvp_count_text(x->c.max_model_len, g[1], sizeof g[1]),
                       kvp_count_text(x->c.max_batched_tokens, g[2], sizeof g[2]));
    kvp_buf_printf(b, "peak KV           %s of %s %s (%.1f%%)\n", kvp_count_text(r->peak_blocks, g[3], sizeof g[3]),
                   kvp_count_text(r->pool_blocks, g[4], sizeof g[4]), unit,
                   100.0 * (double)r->peak_blocks / (double)r->pool_blocks);
    kvp_buf_printf(b, "preemptions       %s\n", kvp_count_text(r->preemptions, g[5], sizeof g[5]));
    kvp_buf_printf(b, "prefix cache hits %s of %s prompt tokens\n",
                   kvp_count_text(r->prefix_hit_tokens, g[6], sizeof g[6]),
                   kvp_count_text(r->prompt_tokens, g[7], sizeof g[7]));
    if (x->c.offload_blocks)
        kvp_buf_printf(b, "CPU offload tier  %s of %s prompt tokens loaded from %s host blocks (%s stored, %s "
                          "loaded; %.3f s of loads at %g GB/s, a bound)\n",
                       kvp_count_text(r->offload_hit_tokens, g[0], sizeof g[0]),
                       kvp_count_text(r->prompt_tokens, g[1], sizeof g[1]),
                       kvp_count_text(x->c.offload_blocks, g[2], sizeof g[2]),
                       kvp_count_text(r->offload_stored_blocks, g[3], sizeof g[3]),
                       kvp_count_text(r->offload_loaded_blocks, g[4], sizeof g[4]), r->offload_load_s,
                       x->c.offload_bandwidth / 1e9);
    kvp_buf_printf(b, "steps             %llu over %.2f s\n", (unsigned long long)r->steps, r->duration_s);
    ms3(p[0], sizeof p[0], &r->ttft);
    ms3(p[1], sizeof p[1], &r->tpot);
    ms3(p[2], sizeof p[2], &r->queue);
    kvp_buf_printf(b, "TTFT p50/p90/p99  %s\nTPOT p50/p90/p99  %s\nqueue p50/p90/p99 %s\n", p[0], p[1], p[2]);
    kvp_buf_printf(b, "throughput        %.1f output tokens/s\n", r->throughput);
    kvp_buf_printf(b, "sustained         %s (sustained: no preemption and queue p99 <= %g s)\n",
                   kvp_sim_sustained(r, x->max_queue) ? "yes" : "no", x->max_queue);
    if (x->find)
        kvp_buf_printf(b, "max sustained rate %.3g requests/s\n", x->max_rate);
    kvp_buf_printf(b, "times: %s\n", time_basis(x));
    if (x->v && x->v->match)
        kvp_buf_printf(b, "validate: match, %llu steps (%llu block counts), %llu admissions (%llu hit tokens), "
                          "%llu preemption%s, %llu supplies checked; %llu tokens decoded, %llu logit checks bitwise, "
                          "%.1f MiB of blocks, %.2f s\n",
                       (unsigned long long)x->v->steps, (unsigned long long)x->v->blocks_compared,
                       (unsigned long long)x->v->hits_compared, (unsigned long long)x->v->hit_tokens,
                       (unsigned long long)x->v->preemptions_compared, x->v->preemptions_compared == 1 ? "" : "s",
                       (unsigned long long)x->v->supplies_checked,
                       (unsigned long long)x->v->decoded_tokens, (unsigned long long)x->v->logit_checks,
                       (double)x->v->peak_bytes / 1048576.0, x->v->wall_s);
    else if (x->v)
        kvp_buf_printf(b, "validate: MISMATCH at step %llu: %s: simulated %llu, measured %llu\n",
                       (unsigned long long)x->v->step + 1, x->v->field, (unsigned long long)x->v->claimed,
                       (unsigned long long)x->v->measured);
}

static int write_svg(const struct run *x, const char *path)
{
    struct kvp_buf b = {0};
    struct kvp_error err = {0};
    char title[256];
    int rc = CLI_OK;
    snprintf(title, sizeof title, "%s on %s, %s %s: KV blocks over time", x->m->name, x->gpu ? x->gpu->id : "GPU",
             kvp_engine_info(x->d.engine)->name, x->f.release->version);
    if (kvp_sim_svg(&x->c, &x->r, title, &b, &err) != KVP_OK)
        return cli_error(&err);
    if (kvp_buf_save(&b, path, &err) != KVP_OK) /* whole or not at all: a failure keeps the old chart */
        rc = cli_error(&err);
    kvp_buf_release(&b);
    return rc;
}

static int setup(struct run *x, const char *model)
{
    static const char *const no_axes[] = {NULL};
    struct kvp_settings st;
    struct kvp_error err = {0};
    double bw = 0, peak = 0;
    bool given;
    int rc;

    if ((rc = cli_deploy_front(&cmd, no_axes, &st, &given)) != CLI_OK)
        return rc;
    if (!given)
        return cli_usage_error("simulate: which GPU? (--gpu NAME from 'kvplan gpus', or --gpu-memory SIZE)");
    if ((rc = read_step(&x->c.step, &x->step_given)))
        return rc;
    if ((rc = cli_model(model, &x->m)) != CLI_OK || (rc = cli_deploy_apply(&st, x->m, &x->d, &x->gpu)) != CLI_OK)
        return rc;
    if (kvp_fit_compute(x->m, &x->d, &x->f, &err) != KVP_OK)
        return cli_error(&err);
    if (!x->step_given) {
        if (!x->gpu)
            return cli_usage_error("simulate: the roofline needs --gpu NAME (bandwidth, peak FLOP/s), "
                                   "or give --step-time FIXED_MS,PER_TOKEN_MS");
        bw = (double)x->gpu->bandwidth_bytes_per_s;
        peak = kvp_gpu_peak_flops(x->gpu, kvp_wstore_code_dtype(&x->d.w, x->m));
    }
    struct kvp_step_model step = x->c.step;
    if (kvp_sim_config_from_fit(x->m, &x->d, &x->f, bw, peak, &x->c, &err) != KVP_OK)
        return cli_error(&err);
    if (x->step_given)
        x->c.step = step;
    if (cli_opt(&cmd, "no-prefix-caching"))
        x->c.prefix_caching = false;
    if ((rc = read_offload_bandwidth(&x->c)))
        return rc;
    return workload(&x->s, &x->max_queue, &x->w);
}

int cmd_simulate(int argc, char **argv)
{
    const char *pos[1], *svg;
    int npos, rc;
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct run x = {0};
    struct kvp_error err = {0};
    struct kvp_buf b = {0};
    struct kvp_serve_report rep;
    struct kvp_serve_opts o;
    bool validate;

    build_opts();
    if ((rc = cli_parse(&cmd, argc, argv, pos, 1, &npos)) != CLI_OK)
        return rc;
    if (npos < 1)
        return cli_usage_error("simulate: which model? (usage: kvplan simulate %s)", cmd.usage);
    if ((rc = cli_out(&cmd, &fmt, false)) != CLI_OK)
        return rc;
    x.find = cli_opt(&cmd, "find-max-rate") != NULL;
    svg = cli_opt(&cmd, "svg");
    validate = cli_opt(&cmd, "validate") != NULL;
    if ((rc = setup(&x, pos[0])) != CLI_OK)
        goto done;
    if (validate && x.c.engine != KVP_SIM_VLLM) {
        rc = cli_usage_error("simulate: --validate replays vLLM V1's paged block pool; %s (%s) is not validated yet",
                             kvp_engine_info(x.d.engine)->name, kvp_sim_scheduler(x.c.engine));
        goto done;
    }
    if (validate && x.c.offload_blocks) {
        rc = cli_usage_error("simulate: --validate replays the GPU block pool only; the CPU offload tier "
                             "(--cpu-offload) is not replayed: drop one of them");
        goto done;
    }
    x.c.log_decisions = validate;
    x.c.audit = validate; /* the replay costs far more than the pool audit */
    o = (struct kvp_serve_opts)KVP_SERVE_DEFAULTS;
    if ((validate && kvp_serve_check_workload(&x.w, &o, &err) != KVP_OK) ||
        kvp_sim_run(&x.c, &x.w, fmt == KVP_OUT_CSV || svg || validate, &x.r, &err) != KVP_OK ||
        (x.find && kvp_sim_max_rate(&x.c, &x.s, x.max_queue, &x.max_rate, &err) != KVP_OK)) {
        rc = cli_error(&err);
        goto done;
    }
    if (validate) {
        if (kvp_serve_validate(x.m, &x.c, &x.w, &x.r, &o, &rep, &err) != KVP_OK) {
            rc = cli_error(&err);
            goto done;
        }
        x.v = &rep;
    }
    if (svg && (rc = write_svg(&x, svg)) != CLI_OK)
        goto done;
    if (fmt == KVP_OUT_JSON)
        render_json(&x, &b);
    else if (fmt == KVP_OUT_CSV)
        render_csv(&x, &b);
    else
        render_text(&x, &b);
    rc = cli_write(&b);
    if (rc == CLI_OK && x.v && !x.v->match)
        rc = CLI_FAIL;
done:
    kvp_buf_release(&b);
    kvp_sim_result_free(&x.r);
    kvp_workload_free(&x.w);
    kvp_model_free(x.m);
    return rc;
}
