/* cmd_compare.c -- `kvplan compare MODEL [--attention LIST] [deployment options]`:
 * attention designs and deployments side by side.
 *
 * The seeds' what-if (004: MHA -> GQA -> MQA -> MLA): cutting KV heads cuts
 * the cache, a compressed latent cuts it further. Each variant is a copy of
 * the model with its attention specs rewritten and validated again, so the
 * engine prices it exactly like a shipped model. Deployment options are
 * `kvplan fit`'s (settings.h), with its defaults; any of them may be a
 * comma-separated list ("--engine vllm,sglang --tp 1,2"), and every
 * combination with every variant is one row, sized as `kvplan fit` sizes it.
 * `--plan FILE` makes the deployments of a plan (`kvplan check`'s) the rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kvplan/deploy.h"
#include "kvplan/kv.h"
#include "kvplan/num.h"
#include "kvplan/plan.h"

#define MAX_ROWS 16
#define MAX_LIST 8 /* values of one option, variants */

/* the deployment options (settings.h) come first, then these */
static const struct cli_opt compare_opts[] = {
    {"attention", "LIST", "variants, comma-separated: as (the model's own), mha, gqa:N (N KV heads), mqa, mla:R+P "
                          "(latent rank R, RoPE dims P); default mha,gqa:8,mqa,mla:512+64", NULL},
    {"plan", "FILE", "rows: the deployments of a plan file (kvplan check's), as written; no MODEL then", NULL},
    {"format", "F", "text (default), md, csv or json", NULL},
    {"si", NULL, "SI units (GB) instead of IEC (GiB)", NULL},
    {NULL, NULL, NULL, NULL},
};
static struct cli_opt opts[KVP_SETTINGS_MAX + 8];

static const struct cli_cmd cmd = {
    "compare", "MODEL [--attention LIST] [--gpu NAME [options]] | --plan FILE",
    "The model with its attention layers rewritten as MHA (KV heads = heads), GQA with N KV\n"
    "heads, MQA (one) or MLA (one latent of R + P values per token), and deployments: every\n"
    "deployment option of `kvplan fit` is taken, with its defaults (vLLM's default release),\n"
    "and any may list values (--engine vllm,sglang --kv-dtype bf16,fp8 --tp 1,2). One row per\n"
    "variant and combination: KV per token and at the context, savings against the first row,\n"
    "and with a GPU the engine's figures per GPU: KV required, weights, max concurrency and\n"
    "the longest context, as `kvplan fit` gives them. --plan FILE compares the deployments of\n"
    "a plan file instead, each as written there.",
    opts,
};


/* One row: a variant of the model under one deployment. */
struct row {
    char label[96];           /* what sets the row apart: "gqa:8, --engine sglang" */
    struct kvp_model m;       /* the variant */
    struct kvp_deploy d;      /* the deployment applied to it */
    const struct kvp_gpu *gpu;
    struct kvp_kv_plan plan;  /* ideal, whole model, at d.context, batch 1 */
    struct kvp_weights w;     /* whole model as stored */
    bool fitted;              /* a GPU was given: f holds `kvplan fit`'s answer */
    struct kvp_fit f;
};

static bool is_attention(enum kvp_layer_kind k)
{
    return k == KVP_LAYER_FULL || k == KVP_LAYER_SLIDING || k == KVP_LAYER_CHUNKED || k == KVP_LAYER_MLA;
}

/* Rewrite every attention spec of v->m (a copy of the model) as `what`. */
static int rewrite(struct row *v, const char *what, bool *windows_dropped)
{
    unsigned long n = 0, r = 0, p = 0;
    char tail;
    enum { MHA, GQA, MQA, MLA } kind;
    struct kvp_error err = {0};

    if (strcmp(what, "as") == 0)
        return CLI_OK;
    if (strcmp(what, "mha") == 0)
        kind = MHA;
    else if (strcmp(what, "mqa") == 0)
        kind = MQA;
    else if (sscanf(what, "gqa:%lu%c", &n, &tail) == 1 && n > 0 && n <= 65536)
        kind = GQA;
    else if (sscanf(what, "mla:%lu+%lu%c", &r, &p, &tail) == 2 && r > 0 && p > 0 && r <= 65536 && p <= 65536)
        kind = MLA;
    else
        return cli_usage_error("--attention: unknown variant '%s' (as, mha, gqa:N, mqa, mla:R+P)", what);
    for (uint32_t i = 0; i < v->m.n_specs; i++) {
        struct kvp_layer_spec *s = &v->m.specs[i];
        if (s->kind == KVP_LAYER_SHARED && kind == MLA)
            return cli_usage_error("compare: '%s' has shared-KV layers, which cannot read an MLA latent", v->m.name);
        if (!is_attention(s->kind))
            continue;
        if (kind == MLA) {
            /* one latent per token; the K head dim stays (it reads as nope + rope) */
            if (s->kind == KVP_LAYER_SLIDING || s->kind == KVP_LAYER_CHUNKED)
                *windows_dropped = true;
            s->kind = KVP_LAYER_MLA;
            s->n_kv_heads = 1;
            s->window = 0;
            s->kv_lora_rank = (uint32_t)r;
            s->qk_rope_dim = (uint32_t)p;
            if (s->head_dim_k <= p)
                s->head_dim_k += (uint32_t)p; /* a rope part beyond the head's own dims */
            continue;
        }
        if (s->kind == KVP_LAYER_MLA) {
            s->kind = KVP_LAYER_FULL; /* decompressed: heads of head_dim_k and head_dim_v */
            s->kv_lora_rank = s->qk_rope_dim = s->q_lora_rank = 0;
        }
        if (kind == GQA && (n > s->n_heads || s->n_heads % n != 0))
            return cli_usage_error("--attention: 'gqa:%lu' needs KV heads that divide the %u query heads", n,
                                   s->n_heads);
        s->n_kv_heads = kind == MHA ? s->n_heads : kind == MQA ? 1 : (uint32_t)n;
    }
    if (kvp_model_validate(&v->m, &err) != KVP_OK)
        return cli_usage_error("compare: variant '%s': %s", what, err.msg);
    return CLI_OK;
}

static void heads_text(const struct kvp_model *m, char *buf, uint32_t n)
{
    for (uint32_t i = 0; i < m->n_layers; i++) {
        const struct kvp_layer_spec *s = kvp_model_layer(m, i);
        if (s->kind == KVP_LAYER_MLA) {
            snprintf(buf, n, "latent %u+%u", s->kv_lora_rank, s->qk_rope_dim);
            return;
        }
        if (is_attention(s->kind)) {
            snprintf(buf, n, "%u of %u", s->n_kv_heads, s->n_heads);
            return;
        }
    }
    snprintf(buf, n, "-");
}

/* The deployment options given, each a list of values ("split" is one value: its commas are its own). */
struct axis {
    const char *opt; /* "engine" */
    char v[MAX_LIST][KVP_SETTING_VALUE_MAX];
    uint32_t n;
};

struct job {
    const struct kvp_model *m; /* the model compared (NULL: a plan's rows, each its own) */
    const char *plan;          /* the plan file the rows are from, or NULL */
    struct row *r;
    uint32_t n;
    bool si;
    bool fitted;          /* a GPU was given */
    bool varied;          /* a deployment option lists several values */
    bool windows_dropped; /* an MLA variant replaced sliding or chunked layers */
};

/* Row k of the product variants x axes: its settings and label. */
static int row_settings(uint32_t k, char (*variants)[KVP_SETTING_VALUE_MAX], uint32_t nv, bool label_variant,
                        const struct axis *ax, uint32_t nax, struct kvp_settings *st, struct row *r,
                        const char **variant)
{
    struct kvp_error err = {0};
    size_t len = 0;
    *variant = variants[k % nv];
    if (label_variant)
        len = (size_t)snprintf(r->label, sizeof r->label, "%s", *variant);
    k /= nv;
    kvp_settings_clear(st);
    for (uint32_t i = 0; i < nax; i++) {
        const char *v = ax[i].v[k % ax[i].n];
        if (kvp_settings_put(st, ax[i].opt, v, &err) != KVP_OK)
            return cli_usage_error("--%s: %s", ax[i].opt, err.msg);
        if (ax[i].n > 1 && len < sizeof r->label)
            len += (size_t)snprintf(r->label + len, sizeof r->label - len, "%s--%s %s", len ? ", " : "", ax[i].opt, v);
        k /= ax[i].n;
    }
    if (!r->label[0])
        snprintf(r->label, sizeof r->label, "%s", *variant);
    return CLI_OK;
}

/* Size row r under its deployment r->d: the ideal cache and, with a GPU, `kvplan fit`'s answer. */
static int measure(struct row *r, bool fitted)
{
    struct kvp_error err = {0};
    struct kvp_kv_query q;
    q = (struct kvp_kv_query){.context = r->d.context, .batch = 1, .k = r->d.k, .v = r->d.v};
    if (kvp_kv_compute(&r->m, &q, &r->plan, &err) != KVP_OK ||
        kvp_weights_compute(&r->m, &r->d.w, &r->w, &err) != KVP_OK ||
        (fitted && kvp_fit_compute(&r->m, &r->d, &r->f, &err) != KVP_OK))
        return cli_error(&err);
    r->fitted = fitted;
    return CLI_OK;
}

/* Per-token bytes the comparison is on: per GPU under the engine, else ideal whole model. */
static uint64_t per_token(const struct row *r)
{
    return r->fitted ? r->f.kv_bytes_per_token_per_gpu : r->plan.kv_bytes_per_token;
}

static double savings(const struct job *j, const struct row *r)
{
    return per_token(r) ? (double)per_token(&j->r[0]) / (double)per_token(r) : 0;
}

/* The engine a row was sized under: the deployment's with a GPU, else the ideal cache. */
static const char *engine_name(const struct row *r)
{
    return kvp_engine_info(r->fitted ? r->d.engine : KVP_ENGINE_IDEAL)->name;
}

static const char *engine_version(const struct row *r)
{
    return r->fitted ? kvp_deploy_release(&r->d)->version : "";
}

static void render_json(const struct job *j, struct kvp_buf *b)
{
    struct kvp_json js;
    char k[64], v[64];
    kvp_json_init(&js, b);
    kvp_json_begin(&js, NULL, '{');
    if (j->m)
        kvp_json_str(&js, "model", j->m->name);
    else
        kvp_json_str(&js, "plan", j->plan);
    kvp_json_begin(&js, "rows", '[');
    for (uint32_t i = 0; i < j->n; i++) {
        const struct row *r = &j->r[i];
        kvp_json_begin(&js, NULL, '{');
        kvp_json_str(&js, "label", r->label);
        kvp_json_str(&js, "model", r->m.name);
        kvp_json_str(&js, "engine", engine_name(r));
        kvp_json_str(&js, "engine_version", engine_version(r));
        kvp_json_u64(&js, "context", r->d.context);
        kvp_json_str(&js, "k_dtype", kvp_format_name(&r->d.k, k, sizeof k));
        kvp_json_str(&js, "v_dtype", kvp_format_name(&r->d.v, v, sizeof v));
        kvp_json_u64(&js, "kv_bytes_per_token", r->plan.kv_bytes_per_token);
        kvp_json_u64(&js, "kv_bytes", r->plan.total_bytes);
        kvp_json_u64(&js, "weight_bytes", r->w.bytes);
        kvp_json_double(&js, "savings", savings(j, r));
        if (r->fitted) {
            kvp_json_str(&js, "gpu", r->gpu ? r->gpu->id : "");
            kvp_json_u64(&js, "gpu_memory_bytes", r->d.gpu_memory);
            kvp_json_u64(&js, "gpus", r->d.n_gpus);
            kvp_json_u64(&js, "tp", r->d.tp);
            kvp_json_u64(&js, "pp", r->d.pp);
            kvp_json_u64(&js, "concurrency", r->d.concurrency ? r->d.concurrency : 1);
            kvp_json_u64(&js, "kv_bytes_per_token_per_gpu", r->f.kv_bytes_per_token_per_gpu);
            kvp_json_u64(&js, "kv_bytes_required", r->f.kv_bytes_required);
            kvp_json_u64(&js, "weights_bytes_per_gpu", r->f.weights_bytes);
            kvp_json_double(&js, "max_concurrency", r->f.max_concurrency);
            kvp_json_u64(&js, "max_context", r->f.max_context);
            kvp_json_bool(&js, "fits", r->f.fits);
        }
        kvp_json_end(&js, '}');
    }
    kvp_json_end(&js, ']');
    kvp_json_end(&js, '}');
}

static void render_csv(const struct job *j, struct kvp_buf *b)
{
    char k[64], v[64];
    kvp_buf_printf(b, "model,label,engine,engine_version,gpu,gpus,tp,context,k_dtype,v_dtype,kv_bytes_per_token,"
                      "kv_bytes,weight_bytes,savings,kv_bytes_per_token_per_gpu,kv_bytes_required,"
                      "weights_bytes_per_gpu,max_concurrency,max_context,fits\n");
    for (uint32_t i = 0; i < j->n; i++) {
        const struct row *r = &j->r[i];
        kvp_buf_printf(b, "%s,\"%s\",%s,%s,%s,%u,%u,%llu,%s,%s,%llu,%llu,%llu,%.4f,", r->m.name, r->label,
                       engine_name(r), engine_version(r),
                       r->gpu ? r->gpu->id : "", r->fitted ? r->d.n_gpus : 0, r->fitted ? r->d.tp : 0,
                       (unsigned long long)r->d.context, kvp_format_name(&r->d.k, k, sizeof k),
                       kvp_format_name(&r->d.v, v, sizeof v), (unsigned long long)r->plan.kv_bytes_per_token,
                       (unsigned long long)r->plan.total_bytes, (unsigned long long)r->w.bytes, savings(j, r));
        if (r->fitted)
            kvp_buf_printf(b, "%llu,%llu,%llu,%.4f,%llu,%s\n", (unsigned long long)r->f.kv_bytes_per_token_per_gpu,
                           (unsigned long long)r->f.kv_bytes_required, (unsigned long long)r->f.weights_bytes,
                           r->f.max_concurrency, (unsigned long long)r->f.max_context, r->f.fits ? "true" : "false");
        else
            kvp_buf_printf(b, ",,,,,\n");
    }
}

static void render_text(const struct job *j, enum kvp_out fmt, struct kvp_buf *b)
{
    static const char *const ideal_head[] = {"row", "KV heads", "KV per token", "vs first", "KV at context",
                                             "weights"};
    static const char *const fit_head[] = {"row", "KV heads", "engine", "KV per token", "vs first", "KV required",
                                           "weights", "max concurrency", "longest context", "fits"};
    static const bool right[] = {false, true, false, true, true, true, true, true, true, false};
    const struct row *r0 = &j->r[0];
    char c[10][48], k[64], v[64], mem[32];
    struct kvp_table t;
    uint64_t want = r0->d.concurrency ? r0->d.concurrency : 1;

    if (j->plan)
        kvp_buf_printf(b, "%sthe deployments of %s, each as written there and as `kvplan fit` sizes it, per GPU\n\n",
                       fmt == KVP_OUT_MD ? "## " : "", j->plan);
    else if (j->fitted)
        kvp_buf_printf(b, "%s%s on %u x %s (%s each), tp %u, pp %u: K %s, V %s, %s request%s of %s tokens; each row as "
                       "`kvplan fit` sizes it, per GPU%s\n\n", fmt == KVP_OUT_MD ? "## " : "",
                       j->m->name, r0->d.n_gpus, r0->gpu ? r0->gpu->id : "GPU",
                       kvp_bytes_text(r0->d.gpu_memory, j->si, mem, sizeof mem), r0->d.tp, r0->d.pp,
                       kvp_format_name(&r0->d.k, k, sizeof k), kvp_format_name(&r0->d.v, v, sizeof v),
                       kvp_count_text(want, c[0], sizeof c[0]), want == 1 ? "" : "s",
                       kvp_count_text(r0->d.context, c[1], sizeof c[1]),
                       j->varied ? " (the first row's deployment: each row names what it changes)" : "");
    else
        kvp_buf_printf(b, "%s%s: K %s, V %s, one sequence of %s tokens, ideal engine (whole model)\n\n",
                       fmt == KVP_OUT_MD ? "## " : "", j->m->name, kvp_format_name(&r0->d.k, k, sizeof k),
                       kvp_format_name(&r0->d.v, v, sizeof v), kvp_count_text(r0->d.context, c[1], sizeof c[1]));
    kvp_table_init(&t, j->fitted ? 10 : 6, j->fitted ? fit_head : ideal_head, right);
    for (uint32_t i = 0; i < j->n; i++) {
        const struct row *r = &j->r[i];
        const char *row[10];
        uint32_t n = 0;
        double x = savings(j, r);
        row[n++] = r->label;
        heads_text(&r->m, c[0], sizeof c[0]);
        row[n++] = c[0];
        if (r->fitted) {
            snprintf(c[1], sizeof c[1], "%s %s", engine_name(r), engine_version(r));
            row[n++] = c[1];
        }
        row[n++] = kvp_bytes_text(per_token(r), j->si, c[2], sizeof c[2]);
        if (!per_token(r))
            snprintf(c[3], sizeof c[3], "-");
        else if (per_token(r) == per_token(r0))
            snprintf(c[3], sizeof c[3], "1.00x");
        else
            snprintf(c[3], sizeof c[3], x >= 1 ? "%.2fx smaller" : "%.2fx larger", x >= 1 ? x : 1 / x);
        row[n++] = c[3];
        row[n++] = kvp_bytes_text(r->fitted ? r->f.kv_bytes_required : r->plan.total_bytes, j->si, c[4], sizeof c[4]);
        row[n++] = kvp_bytes_text(r->fitted ? r->f.weights_bytes : r->w.bytes, j->si, c[5], sizeof c[5]);
        if (r->fitted) {
            snprintf(c[6], sizeof c[6], "%.2f", r->f.max_concurrency);
            row[n++] = c[6];
            row[n++] = r->f.max_context ? kvp_count_text(r->f.max_context, c[7], sizeof c[7]) : "none";
            row[n++] = r->f.fits ? "yes" : r->f.refused[0] ? "NO (would not start)" : "NO";
        }
        kvp_table_row(&t, row);
    }
    kvp_table_render(&t, fmt, b);
    kvp_table_release(&t);
    kvp_buf_printf(b, "\nKV per token: what one more token adds (MHA/GQA/MQA: 2 x KV heads x head dim per layer; "
                      "MLA: R + P, once)%s.\n", j->fitted ? ", per GPU under the engine's rules" : "");
    if (j->windows_dropped)
        kvp_buf_printf(b, "MLA variants drop the sliding windows and chunks: every layer keeps a latent per token.\n");
    if (j->fitted)
        kvp_buf_printf(b, "Max concurrency: requests of the context the KV cache holds; longest context: with the "
                          "requests asked (default 1).\n");
}

/* Was any deployment option given? (--plan takes none.) */
static bool deployment_given(void)
{
    for (const struct cli_opt *o = opts; o->name; o++)
        if (o->value && kvp_setting_find(o->name) >= 0)
            return true;
    return false;
}

/* The rows of j: the deployments of plan file j->plan, as written (each its own model and GPU). */
static int plan_rows(struct job *j, struct kvp_plan *plan)
{
    const struct kvp_catalog *cat;
    const struct kvp_gpu_catalog *gc;
    struct kvp_error err = {0};
    int rc;

    if ((rc = cli_catalog(&cat)) != CLI_OK || (rc = cli_gpus(&gc)) != CLI_OK)
        return rc;
    if (kvp_plan_load(plan, j->plan, cat, gc, &err) != KVP_OK)
        return cli_error(&err);
    if (plan->n == 0 || plan->n > MAX_ROWS)
        return cli_usage_error("compare: '%s' has %u deployments (1 to %d rows)", j->plan, plan->n, MAX_ROWS);
    if (!(j->r = calloc(plan->n, sizeof *j->r)))
        return cli_usage_error("out of memory");
    j->fitted = true;
    for (j->n = 0; j->n < plan->n; j->n++) {
        const struct kvp_plan_deployment *dep = &plan->deps[j->n];
        struct row *r = &j->r[j->n];
        snprintf(r->label, sizeof r->label, "%s", dep->name);
        r->m = *dep->model;
        r->d = dep->d;
        r->gpu = dep->gpu;
        if ((rc = measure(r, true)) != CLI_OK)
            return rc;
    }
    return CLI_OK;
}

int cmd_compare(int argc, char **argv)
{
    const char *pos[1], *list;
    struct kvp_model *m = NULL;
    struct job j;
    struct kvp_settings st;
    enum kvp_out fmt = KVP_OUT_TEXT;
    struct kvp_buf b = {0};
    char variants[MAX_LIST][KVP_SETTING_VALUE_MAX];
    struct axis *ax = NULL;
    struct kvp_plan plan = {0};
    uint32_t nv = 0, nax = 0, nrows;
    int npos, rc;

    memset(&j, 0, sizeof j);
    if (!opts[0].name)
        cli_deploy_opts(opts, sizeof opts / sizeof opts[0], compare_opts);
    if ((rc = cli_parse(&cmd, argc, argv, pos, 1, &npos)) != CLI_OK)
        return rc;
    if ((j.plan = cli_opt(&cmd, "plan")) != NULL) {
        if (npos || cli_opt(&cmd, "attention") || deployment_given())
            return cli_usage_error("compare: --plan FILE compares the plan's deployments as written (no MODEL, "
                                   "--attention or deployment options)");
        if ((rc = cli_out(&cmd, &fmt, true)) != CLI_OK)
            return rc;
        j.si = cli_opt(&cmd, "si") != NULL;
        if ((rc = plan_rows(&j, &plan)) != CLI_OK)
            goto out;
        goto render;
    }
    if (npos != 1)
        return cli_usage_error("compare: which model? (usage: kvplan compare MODEL [--attention LIST])");
    list = cli_opt(&cmd, "attention");
    if ((rc = cli_split("attention", list ? list : "mha,gqa:8,mqa,mla:512+64", variants, MAX_LIST, &nv)) != CLI_OK ||
        (rc = cli_out(&cmd, &fmt, true)) != CLI_OK)
        return rc;
    if (!(ax = calloc(KVP_SETTINGS_MAX, sizeof *ax)))
        return cli_usage_error("out of memory");
    nrows = nv;
    for (const struct cli_opt *o = opts; o->name; o++) {
        int row = kvp_setting_find(o->name);
        if (row < 0 || !o->value)
            continue;
        ax[nax].opt = o->name;
        if (strcmp(o->name, "split") == 0 || !kvp_setting_at((uint32_t)row)->arg) { /* one value: a split or a flag */
            snprintf(ax[nax].v[0], sizeof ax[nax].v[0], "%s", kvp_setting_at((uint32_t)row)->arg ? o->value : "true");
            ax[nax].n = 1;
        } else if ((rc = cli_split(o->name, o->value, ax[nax].v, MAX_LIST, &ax[nax].n)) != CLI_OK) {
            goto out;
        }
        j.varied |= ax[nax].n > 1;
        nrows *= ax[nax++].n;
        if (nrows > MAX_ROWS) {
            rc = cli_usage_error("compare: at most %d rows (variants x values; got more)", MAX_ROWS);
            goto out;
        }
    }
    { /* a GPU is needed for anything but the ideal cache: checked on the first row's settings */
        static const char *const ideal_rows[] = {"context", "concurrency", "kv_dtype", "k_dtype", "v_dtype",
                                                 "weight_dtype", NULL};
        struct row r0 = {0};
        const char *variant;
        if ((rc = row_settings(0, variants, nv, false, ax, nax, &st, &r0, &variant)) != CLI_OK ||
            (rc = cli_deploy_need_gpu(cmd.name, ideal_rows, &st, &j.fitted)) != CLI_OK)
            goto out;
    }
    if ((rc = cli_model(pos[0], &m)) != CLI_OK)
        goto out;
    j.m = m;
    j.si = cli_opt(&cmd, "si") != NULL;
    if (!(j.r = calloc(nrows, sizeof *j.r))) {
        rc = cli_usage_error("out of memory");
        goto out;
    }
    for (j.n = 0; j.n < nrows; j.n++) {
        struct row *r = &j.r[j.n];
        const char *variant;
        r->m = *m;
        if ((rc = row_settings(j.n, variants, nv, list || nv > 1, ax, nax, &st, r, &variant)) != CLI_OK ||
            (rc = rewrite(r, variant, &j.windows_dropped)) != CLI_OK ||
            (rc = cli_deploy_apply(&st, &r->m, &r->d, &r->gpu)) != CLI_OK || (rc = measure(r, j.fitted)) != CLI_OK)
            goto out;
    }
render:
    if (fmt == KVP_OUT_JSON)
        render_json(&j, &b);
    else if (fmt == KVP_OUT_CSV)
        render_csv(&j, &b);
    else
        render_text(&j, fmt, &b);
    rc = cli_write(&b);
out:
    kvp_buf_release(&b);
    free(j.r);
    free(ax);
    kvp_model_free(m);
    kvp_plan_release(&plan);
    return rc;
}
