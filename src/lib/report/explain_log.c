/* explain_log.c -- a start-up log beside kvplan's fit (kvp_log_explain,
 * include/kvplan/explain_log.h). */
#include "kvplan/explain_log.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kvplan/num.h"

static bool is_bytes(enum kvp_log_fig f)
{
    return f != KVP_LOG_KV_TOKENS && f != KVP_LOG_BLOCKS && f != KVP_LOG_CONCURRENCY;
}

static bool llamacpp(const struct kvp_log_explain *x)
{
    return x->d.engine == KVP_ENGINE_LLAMACPP;
}

/* kvplan's value of figure f in fit, the unit the log uses. */
static double figure(const struct kvp_log_explain *x, const struct kvp_fit *f, enum kvp_log_fig g)
{
    switch (g) {
    case KVP_LOG_GPU_MEMORY:
        return (double)x->d.gpu_memory;
    case KVP_LOG_WEIGHTS:
        return (double)f->weights_bytes;
    case KVP_LOG_ACTIVATION:
        return (double)f->reserve.activation;
    case KVP_LOG_NON_TORCH:
        return (double)f->reserve.non_torch;
    case KVP_LOG_CUDA_GRAPH:
        return (double)f->reserve.cuda_graph;
    case KVP_LOG_KV_BUDGET: /* llama.cpp logs what it allocated: the cache -c asks for */
        return (double)(llamacpp(x) ? f->kv_bytes_required : f->kv_budget_bytes);
    case KVP_LOG_KV_TOKENS:
        return (double)(llamacpp(x) ? f->cells : f->kv_tokens);
    case KVP_LOG_BLOCKS:
        return (double)f->num_blocks;
    default:
        return f->max_concurrency;
    }
}

/* What each figure is made of under the engine's rules, with kvplan's values. */
static void term(const struct kvp_log_explain *x, const struct kvp_model *m, struct kvp_log_row *r)
{
    const struct kvp_fit *f = &x->fit;
    const struct kvp_reserve *rs = &f->reserve;
    char a[48], b[48], c[48];
    switch (r->fig) {
    case KVP_LOG_GPU_MEMORY:
        snprintf(r->term, sizeof r->term, "%s", r->line ? "the device's total, as the log gives it"
                 : "as given (--gpu or --gpu-memory)");
        break;
    case KVP_LOG_WEIGHTS:
        if (llamacpp(x) && x->host_weights)
            snprintf(r->term, sizeof r->term, "the log keeps %s more on the host (-ngl, --n-cpu-moe); kvplan puts "
                     "every layer on the GPU", kvp_bytes_text((uint64_t)x->host_weights, false, a, sizeof a));
        else
            snprintf(r->term, sizeof r->term, "%s's stored tensors / (tp %u x pp %u)%s", m->name, x->d.tp, x->d.pp,
                     f->weights_padding ? ", with the engine's MXFP4 padding" : "");
        break;
    case KVP_LOG_ACTIVATION:
        if (x->d.engine == KVP_ENGINE_SGLANG)
            snprintf(r->term, sizeof r->term, "inside the (1 - mem_fraction_static) SGLang keeps apart");
        else if (x->d.engine == KVP_ENGINE_TRTLLM)
            snprintf(r->term, sizeof r->term, "the runtime's buffers (logged: execution context, runtime buffers, "
                     "decoder; set by max_batch_size and max_num_tokens), estimated for %s tokens",
                     kvp_count_text(rs->profile_tokens, a, sizeof a));
        else if (llamacpp(x))
            snprintf(r->term, sizeof r->term, "compute buffers of a %s-token micro-batch (n_ubatch), estimated",
                     kvp_count_text(rs->profile_tokens, a, sizeof a));
        else
            snprintf(r->term, sizeof r->term, "profiling run of %s tokens (max_num_batched_tokens) x %s a token + "
                     "logits of %s sequences, estimated", kvp_count_text(rs->profile_tokens, a, sizeof a),
                     kvp_bytes_text(rs->per_token, false, b, sizeof b), kvp_count_text(rs->profile_seqs, c, sizeof c));
        break;
    case KVP_LOG_NON_TORCH:
        snprintf(r->term, sizeof r->term, "CUDA context, cuBLAS and NCCL (tp %u), estimated", x->d.tp);
        break;
    case KVP_LOG_CUDA_GRAPH:
        snprintf(r->term, sizeof r->term, "%s", f->release->rules & KVP_REL_VLLM_CUDA_GRAPHS
                 ? "CUDA-graph estimate subtracted before the KV budget"
                 : "captured after the KV cache is sized: outside the budget, kvplan leaves it out");
        break;
    case KVP_LOG_KV_BUDGET:
        if (x->d.engine == KVP_ENGINE_VLLM)
            snprintf(r->term, sizeof r->term, "total x %.2f - weights - activation - non-torch%s", f->util,
                     f->release->rules & KVP_REL_VLLM_CUDA_GRAPHS ? " - CUDA graphs" : "");
        else
            snprintf(r->term, sizeof r->term, "%s", llamacpp(x) ? "cells x layers x (K + V) bytes per cell"
                     : x->d.engine == KVP_ENGINE_TRTLLM ? "free memory after weights and activations x fraction"
                     : "total x mem_fraction_static - weights - non-torch");
        break;
    case KVP_LOG_KV_TOKENS:
        if (llamacpp(x))
            snprintf(r->term, sizeof r->term, "-c padded to the cell multiple");
        else
            snprintf(r->term, sizeof r->term, "budget / %s a token, in blocks of %u",
                     kvp_bytes_text(f->kv_bytes_per_token_per_gpu, false, a, sizeof a), f->block_size);
        break;
    case KVP_LOG_BLOCKS:
        snprintf(r->term, sizeof r->term, "budget / (%u tokens x %s)", f->block_size,
                 kvp_bytes_text(f->kv_bytes_per_token_per_gpu, false, a, sizeof a));
        break;
    default:
        snprintf(r->term, sizeof r->term, "KV tokens / %s-token requests", kvp_count_text(x->d.context, a, sizeof a));
        break;
    }
}

/* The budget row says which reserve term's error explains most of its own. */
static void budget_blame(struct kvp_log_explain *x)
{
    struct kvp_log_row *budget = NULL, *worst = NULL;
    double worst_err = 0;
    for (uint32_t i = 0; i < x->n_rows; i++) {
        struct kvp_log_row *r = &x->row[i];
        if (r->fig == KVP_LOG_KV_BUDGET)
            budget = r;
        if (r->line && (r->fig == KVP_LOG_WEIGHTS || r->fig == KVP_LOG_ACTIVATION || r->fig == KVP_LOG_NON_TORCH ||
                        r->fig == KVP_LOG_GPU_MEMORY) && fabs(r->kvplan - r->logged) > worst_err) {
            worst_err = fabs(r->kvplan - r->logged);
            worst = r;
        }
    }
    if (!budget || !budget->line || llamacpp(x))
        return;
    size_t n = strlen(budget->term);
    if (worst && worst_err * 2 >= fabs(budget->kvplan - budget->logged)) {
        char a[48];
        snprintf(budget->term + n, sizeof budget->term - n, "; most of the difference from %s (kvplan %s%s)",
                 kvp_log_fig_name(worst->fig), worst->kvplan > worst->logged ? "+" : "-",
                 kvp_bytes_text((uint64_t)worst_err, false, a, sizeof a));
    } else {
        snprintf(budget->term + n, sizeof budget->term - n, "; most of the difference from the reserve the log does "
                 "not print (kvplan's estimate)");
    }
}

static void assume(struct kvp_log_explain *x, const struct kvp_settings *s, const struct kvp_log *log)
{
    static const char *const gpu_rows[] = {"tp", "pp", "context", "util", "kv_dtype", "weight_dtype", "block_size",
                                           "max_num_batched_tokens", "max_num_seqs", NULL};
    static const char *const llama_rows[] = {"context", "k_dtype", "v_dtype", "weight_dtype", "n_ubatch", "n_batch",
                                             "n_seq", "flash_attn", NULL};
    char v[KVP_SETTING_VALUE_MAX];
    size_t n = 0;
    if (!log->version_line)
        n += (size_t)snprintf(x->assumed, sizeof x->assumed, "release %s@%s (no version printed%s)",
                              kvp_engine_info(x->d.engine)->name, x->fit.release->version,
                              log->vllm_v0 ? "; V0 worker lines" : "");
    for (const char *const *k = llamacpp(x) ? llama_rows : gpu_rows; *k && n < sizeof x->assumed; k++) {
        int row = kvp_setting_find(*k);
        if (row < 0 || (s->given >> row & 1))
            continue;
        kvp_setting_text((uint32_t)row, &x->d, x->gpu, v, sizeof v);
        if (strcmp(*k, "util") == 0)
            snprintf(v, sizeof v, "%.2f", x->fit.util);
        else if (strcmp(*k, "block_size") == 0)
            snprintf(v, sizeof v, "%u", x->fit.block_size);
        else if (strcmp(*k, "max_num_batched_tokens") == 0 && x->fit.reserve.profile_tokens)
            snprintf(v, sizeof v, "%llu", (unsigned long long)x->fit.reserve.profile_tokens);
        n += (size_t)snprintf(x->assumed + n, sizeof x->assumed - n, "%s%s %s", n ? ", " : "", *k,
                              v[0] ? v : "(the engine's default)");
    }
}

/* s with key = value fitted: the change in KV budget and tokens over x->fit. */
static void try_change(struct kvp_log_explain *x, const struct kvp_settings *s, const struct kvp_model *m,
                       const struct kvp_gpu_catalog *gpus, const char *key, const char *value, const char *what)
{
    struct kvp_settings t = *s;
    struct kvp_deploy d;
    const struct kvp_gpu *gpu;
    struct kvp_fit f;
    struct kvp_error err = {0};
    int bad;
    struct kvp_log_change *c = &x->change[x->n_changes];
    if (x->n_changes >= KVP_LOG_CHANGES || kvp_settings_put(&t, key, value, &err) != KVP_OK ||
        kvp_settings_apply(&t, m, gpus, &d, &gpu, &bad, &err) != KVP_OK)
        return;
    d.gpu_memory = x->d.gpu_memory;
    if (kvp_fit_compute(m, &d, &f, &err) != KVP_OK || f.refused[0])
        return;
    c->kv_bytes = (int64_t)f.kv_budget_bytes - (int64_t)x->fit.kv_budget_bytes;
    c->kv_tokens = llamacpp(x) ? 0 : (int64_t)f.kv_tokens - (int64_t)x->fit.kv_tokens;
    if (c->kv_bytes <= 0 && c->kv_tokens <= 0)
        return;
    snprintf(c->what, sizeof c->what, "%s", what);
    x->n_changes++;
}

static void changes(struct kvp_log_explain *x, const struct kvp_settings *s, const struct kvp_model *m,
                    const struct kvp_gpu_catalog *gpus, const struct kvp_log *log)
{
    const struct kvp_reserve *r = &x->fit.reserve;
    const struct kvp_log_value *act = &log->fig[KVP_LOG_ACTIVATION];
    char what[200], v[32], a[48];
    uint64_t tokens = r->profile_tokens;
    kvp_bytes_text(act->line ? (uint64_t)act->value : r->activation, false, a, sizeof a);
    if (llamacpp(x)) {
        if (tokens > 64) {
            snprintf(v, sizeof v, "%llu", (unsigned long long)tokens / 2);
            snprintf(what, sizeof what, "compute buffers %s from n_ubatch %llu: -ub %s", a, (unsigned long long)tokens,
                     v);
            try_change(x, s, m, gpus, "n_ubatch", v, what);
        }
        return;
    }
    if (tokens > 2048 && x->d.engine == KVP_ENGINE_VLLM) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)(tokens / 2 < 2048 ? 2048 : tokens / 2));
        snprintf(what, sizeof what, "activation peak %s from max_num_batched_tokens %llu: set %s", a,
                 (unsigned long long)tokens, v);
        try_change(x, s, m, gpus, "max_num_batched_tokens", v, what);
    }
    if (x->fit.util < 0.95) {
        static const char *const names[KVP_ENGINE_COUNT] = {
            [KVP_ENGINE_VLLM] = "gpu_memory_utilization", [KVP_ENGINE_SGLANG] = "mem_fraction_static",
            [KVP_ENGINE_TRTLLM] = "kv_cache_free_gpu_memory_fraction",
        };
        snprintf(what, sizeof what, "%s %.2f (from %.2f)", names[x->d.engine] ? names[x->d.engine] : "util", 0.95,
                 x->fit.util);
        try_change(x, s, m, gpus, "util", "0.95", what);
    }
    if (x->d.k.dtype != KVP_DTYPE_FP8_E4M3) {
        snprintf(what, sizeof what, "kv_cache_dtype fp8 (half the bytes a token; check the accuracy)");
        try_change(x, s, m, gpus, "kv_dtype", "fp8", what);
    }
    if (x->d.tp < 8) {
        snprintf(v, sizeof v, "%u", x->d.tp * 2);
        snprintf(what, sizeof what, "tensor parallel %s (twice the GPUs; per GPU)", v);
        try_change(x, s, m, gpus, "tp", v, what);
    }
}

enum kvp_status kvp_log_explain(const struct kvp_log *log, const struct kvp_settings *s, const struct kvp_model *m,
                                const struct kvp_gpu_catalog *gpus, struct kvp_log_explain *x, struct kvp_error *err)
{
    struct kvp_settings t = *s;
    int bad = -1;
    enum kvp_status st;

    memset(x, 0, sizeof *x);
    x->host_weights = log->host_weights;
    if (!(t.given >> kvp_setting_find("gpu_memory") & 1) && !(t.given >> kvp_setting_find("gpu") & 1))
        return kvp_fail(err, KVP_ERR_USAGE, "the log does not give the GPU's memory: pass --gpu NAME or "
                        "--gpu-memory SIZE");
    if ((st = kvp_settings_apply(&t, m, gpus, &x->d, &x->gpu, &bad, err)) != KVP_OK) {
        if (bad >= 0) {
            char why[KVP_ERROR_MSG_MAX];
            snprintf(why, sizeof why, "%s", err->msg);
            kvp_fail(err, st, "'%s' %s: %s", kvp_setting_at((uint32_t)bad)->key, t.value[bad], why);
        }
        return st;
    }
    if ((st = kvp_fit_compute(m, &x->d, &x->fit, err)) != KVP_OK)
        return st;
    if (log->fig[KVP_LOG_KV_BUDGET].line && !llamacpp(x)) {
        struct kvp_deploy d = x->d;
        struct kvp_error e = {0};
        d.kv_memory = (uint64_t)log->fig[KVP_LOG_KV_BUDGET].value;
        x->have_replay = kvp_fit_compute(m, &d, &x->replay, &e) == KVP_OK && x->replay.kv_tokens; /* refused too */
    }
    for (int f = 0; f < KVP_LOG_FIG_COUNT; f++) {
        struct kvp_log_row *r = &x->row[x->n_rows];
        bool relevant = llamacpp(x) ? f == KVP_LOG_WEIGHTS || f == KVP_LOG_ACTIVATION || f == KVP_LOG_KV_BUDGET ||
                                          f == KVP_LOG_KV_TOKENS
                                    : f != KVP_LOG_CUDA_GRAPH || x->fit.reserve.cuda_graph;
        if (!log->fig[f].line && !relevant)
            continue;
        r->fig = (enum kvp_log_fig)f;
        r->logged = log->fig[f].value;
        r->line = log->fig[f].line;
        r->kvplan = figure(x, &x->fit, r->fig);
        r->replay = x->have_replay && f >= KVP_LOG_KV_TOKENS ? figure(x, &x->replay, r->fig) : -1;
        term(x, m, r);
        x->n_rows++;
    }
    budget_blame(x);
    assume(x, &t, log);
    changes(x, &t, m, gpus, log);
    return KVP_OK;
}

/* ---- rendering ---- */

static void value_text(enum kvp_log_fig f, double v, bool si, char *buf, uint32_t n)
{
    if (is_bytes(f))
        kvp_bytes_text((uint64_t)(v < 0 ? 0 : v), si, buf, n);
    else if (f == KVP_LOG_CONCURRENCY)
        snprintf(buf, n, "%.2fx", v);
    else
        kvp_count_text((uint64_t)v, buf, n);
}

static void diff_text(const struct kvp_log_row *r, char *buf, uint32_t n)
{
    if (!r->line)
        snprintf(buf, n, "-");
    else if (r->logged == 0)
        snprintf(buf, n, "%s", r->kvplan == 0 ? "0%" : "n/a");
    else
        snprintf(buf, n, "%+.1f%%", 100.0 * (r->kvplan - r->logged) / r->logged);
}

static void render_json(const struct kvp_log *log, const char *name, const struct kvp_model *m,
                        const struct kvp_log_explain *x, struct kvp_buf *b)
{
    struct kvp_json j;
    kvp_json_init(&j, b);
    kvp_json_begin(&j, NULL, '{');
    kvp_json_str(&j, "log", name);
    kvp_json_u64(&j, "lines", log->lines);
    kvp_json_str(&j, "engine", kvp_engine_info(x->d.engine)->name);
    kvp_json_str(&j, "engine_version", x->fit.release->version);
    kvp_json_str(&j, "logged_version", log->version);
    kvp_json_str(&j, "logged_model", log->model);
    kvp_json_str(&j, "model", m->name);
    kvp_json_u64(&j, "tp", x->d.tp);
    kvp_json_u64(&j, "pp", x->d.pp);
    kvp_json_u64(&j, "context", x->d.context);
    kvp_json_double(&j, "util", x->fit.util);
    kvp_json_u64(&j, "gpu_memory_bytes", x->d.gpu_memory);
    kvp_json_begin(&j, "read", '[');
    for (uint32_t row = 0; row < kvp_settings_count(); row++)
        if ((log->settings.given >> row & 1) && log->setting_line[row]) {
            kvp_json_begin(&j, NULL, '{');
            kvp_json_str(&j, "setting", kvp_setting_at(row)->key);
            kvp_json_str(&j, "value", log->settings.value[row]);
            kvp_json_u64(&j, "line", log->setting_line[row]);
            kvp_json_end(&j, '}');
        }
    kvp_json_end(&j, ']');
    kvp_json_str(&j, "assumed", x->assumed);
    kvp_json_str(&j, "unmodelled", log->unmodelled);
    kvp_json_str(&j, "refused", log->refused);
    kvp_json_begin(&j, "figures", '[');
    for (uint32_t i = 0; i < x->n_rows; i++) {
        const struct kvp_log_row *r = &x->row[i];
        kvp_json_begin(&j, NULL, '{');
        kvp_json_str(&j, "figure", kvp_log_fig_name(r->fig));
        kvp_json_str(&j, "unit", is_bytes(r->fig) ? "bytes" : r->fig == KVP_LOG_CONCURRENCY ? "requests" : "count");
        if (r->line) {
            kvp_json_u64(&j, "line", r->line);
            kvp_json_double(&j, "logged", r->logged);
            kvp_json_double(&j, "logged_resolution", log->fig[r->fig].resolution);
        } else {
            kvp_json_null(&j, "line");
            kvp_json_null(&j, "logged");
        }
        kvp_json_double(&j, "kvplan", r->kvplan);
        if (r->line && r->logged != 0)
            kvp_json_double(&j, "diff_pct", 100.0 * (r->kvplan - r->logged) / r->logged);
        else
            kvp_json_null(&j, "diff_pct");
        if (r->replay >= 0)
            kvp_json_double(&j, "kvplan_at_logged_budget", r->replay);
        kvp_json_str(&j, "term", r->term);
        kvp_json_end(&j, '}');
    }
    kvp_json_end(&j, ']');
    kvp_json_begin(&j, "more_kv", '[');
    for (uint32_t i = 0; i < x->n_changes; i++) {
        kvp_json_begin(&j, NULL, '{');
        kvp_json_str(&j, "change", x->change[i].what);
        kvp_json_double(&j, "kv_bytes", (double)x->change[i].kv_bytes);
        kvp_json_double(&j, "kv_tokens", (double)x->change[i].kv_tokens);
        kvp_json_end(&j, '}');
    }
    kvp_json_end(&j, ']');
    kvp_json_end(&j, '}');
}

void kvp_log_explain_render(const struct kvp_log *log, const char *name, const struct kvp_model *m,
                            const struct kvp_log_explain *x, enum kvp_out fmt, bool si, struct kvp_buf *b)
{
    static const char *const head[] = {"figure", "line", "logged", "kvplan", "diff", "at logged budget", "term"};
    static const bool right[] = {false, true, true, true, true, true, false};
    struct kvp_table t;
    char g[6][48];
    bool replay = false;
    const char *md = fmt == KVP_OUT_MD ? "\n" : ""; /* Markdown: each line its own paragraph */

    if (fmt == KVP_OUT_JSON) {
        render_json(log, name, m, x, b);
        return;
    }
    kvp_buf_printf(b, "%s%s: %s %s start-up (%u lines), model %s%s%s as %s\n", fmt == KVP_OUT_MD ? "## " : "", name,
                   kvp_engine_info(x->d.engine)->name, log->version[0] ? log->version : "(release not printed)",
                   log->lines, log->model[0] ? log->model : "(not named)", log->model_line ? " line " : "",
                   log->model_line ? kvp_count_text(log->model_line, g[0], sizeof g[0]) : "", m->name);
    kvp_buf_printf(b, "%sfitted as %s@%s: tp %u, pp %u, %s per GPU, context %s, util %.2f\n",
                   fmt == KVP_OUT_MD ? "\n" : "", kvp_engine_info(x->d.engine)->name, x->fit.release->version,
                   x->d.tp, x->d.pp, kvp_bytes_text(x->d.gpu_memory, si, g[1], sizeof g[1]),
                   kvp_count_text(x->d.context, g[2], sizeof g[2]), x->fit.util);
    kvp_buf_printf(b, "%sread from the log:", md);
    uint32_t n = 0;
    for (uint32_t row = 0; row < kvp_settings_count(); row++)
        if ((log->settings.given >> row & 1) && log->setting_line[row])
            kvp_buf_printf(b, "%s %s %s%s%s%s", n++ ? "," : "", kvp_setting_at(row)->key, log->settings.value[row],
                           " (line ", kvp_count_text(log->setting_line[row], g[3], sizeof g[3]), ")");
    kvp_buf_printf(b, "%s\n%sassumed (not in the log): %s\n", n ? "" : " nothing", md,
                   x->assumed[0] ? x->assumed : "nothing");
    if (log->unmodelled[0])
        kvp_buf_printf(b, "%snot modelled (the log sets them; kvplan leaves them out): %s\n", md, log->unmodelled);
    if (log->refused[0])
        kvp_buf_printf(b, "%sthe engine refused to start (line %u): %s\n", md, log->refused_line, log->refused);
    if (x->fit.refused[0])
        kvp_buf_printf(b, "%skvplan: it would not start: %s\n", md, x->fit.refused);
    kvp_buf_printf(b, "\n");
    for (uint32_t i = 0; i < x->n_rows; i++)
        replay |= x->row[i].replay >= 0 && x->row[i].line;
    kvp_table_init(&t, replay ? 7 : 6, replay ? head : (const char *const[]){"figure", "line", "logged", "kvplan",
                                                                          "diff", "term"},
                   replay ? right : (const bool[]){false, true, true, true, true, false});
    for (uint32_t i = 0; i < x->n_rows; i++) {
        const struct kvp_log_row *r = &x->row[i];
        const char *cells[7];
        uint32_t c = 0;
        if (r->line)
            value_text(r->fig, r->logged, si, g[0], sizeof g[0]);
        value_text(r->fig, r->kvplan, si, g[1], sizeof g[1]);
        diff_text(r, g[2], sizeof g[2]);
        snprintf(g[3], sizeof g[3], "%u", r->line);
        if (r->replay >= 0 && r->line)
            value_text(r->fig, r->replay, si, g[4], sizeof g[4]);
        cells[c++] = kvp_log_fig_name(r->fig);
        cells[c++] = r->line ? g[3] : "-";
        cells[c++] = r->line ? g[0] : "-";
        cells[c++] = g[1];
        cells[c++] = g[2];
        if (replay)
            cells[c++] = r->replay >= 0 && r->line ? g[4] : "";
        cells[c++] = r->term;
        kvp_table_row(&t, cells);
    }
    kvp_table_render(&t, fmt, b);
    kvp_table_release(&t);
    if (x->n_changes) {
        kvp_buf_printf(b, "\nto get more KV (kvplan's figures, per GPU):\n");
        for (uint32_t i = 0; i < x->n_changes; i++) {
            const struct kvp_log_change *c = &x->change[i];
            kvp_buf_printf(b, "  %s: ", c->what);
            if (c->kv_bytes)
                kvp_buf_printf(b, "%s%s %s", c->kv_bytes < 0 ? "-" : "+",
                               kvp_bytes_text((uint64_t)(c->kv_bytes < 0 ? -c->kv_bytes : c->kv_bytes), si, g[0],
                                              sizeof g[0]), llamacpp(x) ? "of room for KV" : "KV budget");
            if (c->kv_tokens)
                kvp_buf_printf(b, "%s%s%s tokens", c->kv_bytes ? ", " : "", c->kv_tokens < 0 ? "-" : "+",
                               kvp_count_text((uint64_t)(c->kv_tokens < 0 ? -c->kv_tokens : c->kv_tokens), g[1],
                                              sizeof g[1]));
            kvp_buf_printf(b, "\n");
        }
    }
}
