/* sizing.c -- sizing tables over models x contexts x batches x cache formats.
 *
 * Each cell is computed once by kvp_sizing_cell (the ideal engine, and the
 * chosen engine's fit when a GPU is given); the renderers only lay figures
 * out. Text and Markdown go through render.h's kvp_table; HTML is written
 * here, escaped; CSV and JSON carry exact bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvplan/kv.h"
#include "kvplan/explain.h"
#include "kvplan/num.h"
#include "kvplan/sizing.h"

bool kvp_table_out_from_name(const char *s, enum kvp_out *out)
{
    static const struct {
        const char *name;
        enum kvp_out fmt;
    } names[] = {{"text", KVP_OUT_TEXT}, {"md", KVP_OUT_MD}, {"csv", KVP_OUT_CSV}, {"json", KVP_OUT_JSON},
                 {"html", KVP_OUT_HTML}};
    for (uint32_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].fmt;
            return true;
        }
    return false;
}

struct kvp_unit kvp_unit_for(uint64_t max_bytes, bool si)
{
    uint64_t step = si ? 1000 : 1024, u = 1;
    uint32_t i = 0;
    while (i < 5 && max_bytes / u >= step) { /* up to PiB: a table's column keeps 4 digits */
        u *= step;
        i++;
    }
    return (struct kvp_unit){kvp_unit_name(i, si), u};
}

const char *kvp_tokens_label(uint64_t tokens, char *buf, uint32_t n)
{
    if (tokens >= (1u << 20) && tokens % (1u << 20) == 0)
        snprintf(buf, n, "%lluM", (unsigned long long)(tokens >> 20));
    else if (tokens >= 1024 && tokens % 1024 == 0)
        snprintf(buf, n, "%lluk", (unsigned long long)(tokens >> 10));
    else
        snprintf(buf, n, "%llu", (unsigned long long)tokens);
    return buf;
}

/* Split s at commas; call item() on each piece (NUL-terminated copy). */
static enum kvp_status split_list(const char *s, uint32_t max, uint32_t *n, struct kvp_error *err, void *out,
                                  enum kvp_status (*item)(const char *, void *, uint32_t, struct kvp_error *))
{
    char piece[128];
    enum kvp_status st;
    *n = 0;
    for (const char *p = s;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0)
            return kvp_fail(err, KVP_ERR_USAGE, "empty item in the list '%s'", s);
        if (len >= sizeof piece)
            return kvp_fail(err, KVP_ERR_USAGE, "item too long in the list '%s'", s);
        if (*n == max)
            return kvp_fail(err, KVP_ERR_USAGE, "too many items in the list '%s' (at most %u)", s, max);
        memcpy(piece, p, len);
        piece[len] = '\0';
        if ((st = item(piece, out, (*n)++, err)) != KVP_OK)
            return st;
        if (!end)
            return KVP_OK;
        p = end + 1;
    }
}

static enum kvp_status count_item(const char *s, void *out, uint32_t i, struct kvp_error *err)
{
    return kvp_parse_count(s, (uint64_t *)out + i, err);
}

static enum kvp_status format_item(const char *s, void *out, uint32_t i, struct kvp_error *err)
{
    return kvp_format_parse(s, (struct kvp_format *)out + i, err);
}

enum kvp_status kvp_parse_count_list(const char *s, uint64_t *out, uint32_t max, uint32_t *n, struct kvp_error *err)
{
    return split_list(s, max, n, err, out, count_item);
}

enum kvp_status kvp_parse_format_list(const char *s, struct kvp_format *out, uint32_t max, uint32_t *n,
                                      struct kvp_error *err)
{
    return split_list(s, max, n, err, out, format_item);
}

enum kvp_status kvp_sizing_deploy(const struct kvp_sizing *s, uint32_t mi, uint32_t gi, struct kvp_deploy *d,
                                  const struct kvp_gpu **gpu, struct kvp_error *err)
{
    struct kvp_settings on;
    const struct kvp_settings *set = s->deploy;
    enum kvp_status st;
    int bad;
    if (s->n_gpu_ids) { /* the GPU axis: this column group's GPU in deploy's "gpu" row */
        on = *s->deploy;
        if ((st = kvp_settings_put(&on, "gpu", s->gpu_ids[gi], err)) != KVP_OK)
            return st;
        set = &on;
    }
    if ((st = kvp_settings_apply(set, s->models[mi], s->gpus, d, gpu, &bad, err)) != KVP_OK) {
        if (bad >= 0) { /* name the setting, as a plan or the CLI would */
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return kvp_fail(err, st, "'%s': %s", kvp_setting_at((uint32_t)bad)->key, msg);
        }
        return st;
    }
    if (!d->gpu_memory && !d->kv_memory)
        return kvp_fail(err, KVP_ERR_USAGE,
                        "a deployment needs a GPU or its memory (gpu, gpu_memory or kv_cache_memory)");
    return KVP_OK;
}

enum kvp_status kvp_sizing_cell(const struct kvp_sizing *s, uint32_t mi, uint32_t gi, uint32_t ci, uint32_t bi,
                                uint32_t fi, struct kvp_sizing_cell *out, struct kvp_error *err)
{
    const struct kvp_model *m = s->models[mi];
    struct kvp_kv_query q = {.context = s->contexts[ci], .batch = s->batches[bi],
                             .k = s->formats[fi], .v = s->formats[fi]};
    struct kvp_kv_plan plan;
    struct kvp_weights w;
    struct kvp_deploy d;
    const struct kvp_gpu *gpu;
    struct kvp_fit f;
    enum kvp_status st;

    memset(out, 0, sizeof *out);
    if (!s->deploy) {
        if ((st = kvp_kv_compute(m, &q, &plan, err)) != KVP_OK ||
            (st = kvp_weights_compute(m, NULL, &w, err)) != KVP_OK)
            return st;
        out->kv_bytes = plan.kv_bytes;
        out->state_bytes = plan.state_bytes;
        out->weight_bytes = w.bytes;
        return KVP_OK;
    }
    if ((st = kvp_sizing_deploy(s, mi, gi, &d, &gpu, err)) != KVP_OK)
        return st;
    if (m->max_context && q.context > m->max_context) {
        snprintf(out->why, sizeof out->why, "past %s's max context of %llu tokens", m->name,
                 (unsigned long long)m->max_context);
        out->beyond = true;
        return KVP_OK;
    }
    d.k = d.v = s->formats[fi];
    d.context = q.context;
    d.concurrency = q.batch;
    if ((st = kvp_fit_compute(m, &d, &f, err)) == KVP_ERR_UNSUPPORTED) {
        snprintf(out->why, sizeof out->why, "%.199s", err->msg); /* KVP_SIZING_WHY - 1 */
        out->unsupported = true;
        return KVP_OK;
    }
    if (st != KVP_OK)
        return st;
    out->kv_bytes = f.kv_bytes_required;
    out->weight_bytes = f.weights_bytes;
    out->max_concurrency = f.max_concurrency;
    out->fits = f.fits;
    return KVP_OK;
}

/* ---- shared pieces ---- */


/* A figure in unit u with two decimals; "<0.01" rather than a false zero. */
static const char *in_unit(uint64_t bytes, struct kvp_unit u, char *buf, uint32_t n)
{
    double v = (double)bytes / (double)u.bytes;
    if (bytes > 0 && v < 0.005)
        snprintf(buf, n, "<0.01");
    else if (u.bytes == 1)
        snprintf(buf, n, "%llu", (unsigned long long)bytes);
    else
        snprintf(buf, n, "%.2f", v);
    return buf;
}

/* The deployment of model mi on GPU gi in words: "2 x h100-sxm (79.19 GiB
 * each), tp 2, pp 1, vllm 0.11.0"; "ideal engine" without one. */
static enum kvp_status deploy_phrase(const struct kvp_sizing *s, uint32_t mi, uint32_t gi, char *buf, uint32_t n,
                                     struct kvp_error *err)
{
    struct kvp_deploy d;
    const struct kvp_gpu *gpu;
    char mem[32], dp[48] = "", ep[96];
    enum kvp_status st;
    if (!s->deploy) {
        snprintf(buf, n, "ideal engine");
        return KVP_OK;
    }
    if ((st = kvp_sizing_deploy(s, mi, gi, &d, &gpu, err)) != KVP_OK)
        return st;
    if (d.dp > 1) /* the figures are one rank's */
        snprintf(dp, sizeof dp, "dp %u%s (per rank), ", d.dp, d.dp_attention ? " with DP attention" : "");
    snprintf(buf, n, "%u x %s (%s each), %s%stp %u, pp %u, %s %s", d.n_gpus, gpu ? gpu->id : "GPU",
             kvp_bytes_text(d.gpu_memory, s->si, mem, sizeof mem), dp,
             kvp_deploy_ep_text(s->models[mi], &d, ep, sizeof ep), d.tp, d.pp, kvp_engine_info(d.engine)->name,
             kvp_deploy_release(&d)->version);
    return KVP_OK;
}

/* ---- grid: all cells of one model computed up front ---- */

struct grid {
    uint32_t nc, nb, nf;
    struct kvp_sizing_cell cell[KVP_SIZING_MAX_AXIS * KVP_SIZING_MAX_AXIS];
    uint64_t per_token[KVP_SIZING_MAX_AXIS]; /* ideal KV bytes per token, per format */
};

static struct kvp_sizing_cell *at(struct grid *g, uint32_t ci, uint32_t fi)
{
    return &g->cell[ci * g->nf + fi];
}

/* Cells of model mi on GPU gi at batch bi; per-token bytes once per model. */
static enum kvp_status fill(const struct kvp_sizing *s, uint32_t mi, uint32_t gi, uint32_t bi, struct grid *g,
                            struct kvp_error *err)
{
    enum kvp_status st;
    g->nc = s->n_contexts;
    g->nf = s->n_formats;
    for (uint32_t fi = 0; fi < s->n_formats; fi++) {
        struct kvp_kv_query q = {.context = 1, .batch = 1, .k = s->formats[fi], .v = s->formats[fi]};
        struct kvp_kv_plan plan;
        if ((st = kvp_kv_compute(s->models[mi], &q, &plan, err)) != KVP_OK)
            return st;
        g->per_token[fi] = plan.kv_bytes_per_token;
        for (uint32_t ci = 0; ci < s->n_contexts; ci++)
            if ((st = kvp_sizing_cell(s, mi, gi, ci, bi, fi, at(g, ci, fi), err)) != KVP_OK)
                return st;
    }
    return KVP_OK;
}

/* What a table cell shows: caches plus recurrent state (saturating: only a
 * unit is chosen from it; the exact figures travel in CSV and JSON). */
static uint64_t shown(const struct kvp_sizing_cell *c)
{
    uint64_t t;
    return kvp_add(c->kv_bytes, c->state_bytes, &t) ? t : UINT64_MAX;
}

/* ---- text, Markdown, HTML ---- */

/* Cell text of one rendered table: rows x (context + formats). */
#define CELL_CHARS 100 /* a model name in a combined table's first column */
typedef char cell_text[CELL_CHARS];

struct doc {
    const struct kvp_sizing *s;
    enum kvp_out fmt;
    struct kvp_buf *b;
    cell_text *cells; /* KVP_SIZING_MAX_AXIS * KVP_TABLE_MAX_COLS, the caller's */
};

static void heading(struct doc *d, int level, const char *text)
{
    if (d->fmt == KVP_OUT_HTML) {
        kvp_buf_printf(d->b, "<h%d>", level);
        kvp_buf_xml(d->b, text);
        kvp_buf_printf(d->b, "</h%d>\n", level);
    } else if (d->fmt == KVP_OUT_MD) {
        kvp_buf_printf(d->b, "%s %s\n\n", level == 2 ? "##" : "###", text);
    } else {
        kvp_buf_printf(d->b, "%s\n", text);
        for (size_t i = 0; i < strlen(text); i++)
            kvp_buf_put(d->b, level == 2 ? "=" : "-", 1);
        kvp_buf_put(d->b, "\n", 1);
    }
}

static void para(struct doc *d, const char *text)
{
    if (d->fmt == KVP_OUT_HTML) {
        kvp_buf_put(d->b, "<p>", 3);
        kvp_buf_xml(d->b, text);
        kvp_buf_put(d->b, "</p>\n", 5);
    } else {
        kvp_buf_printf(d->b, "%s\n\n", text);
    }
}

/* Rows of ncols strings (row-major, nrows), header head. */
static void grid_table(struct doc *d, uint32_t ncols, const char *const *head, cell_text *cells, uint32_t nrows)
{
    if (d->fmt == KVP_OUT_HTML) {
        kvp_buf_printf(d->b, "<table>\n<thead><tr>");
        for (uint32_t c = 0; c < ncols; c++) {
            kvp_buf_printf(d->b, "<th>");
            kvp_buf_xml(d->b, head[c]);
            kvp_buf_printf(d->b, "</th>");
        }
        kvp_buf_printf(d->b, "</tr></thead>\n<tbody>\n");
        for (uint32_t r = 0; r < nrows; r++) {
            kvp_buf_printf(d->b, "<tr>");
            for (uint32_t c = 0; c < ncols; c++) {
                kvp_buf_printf(d->b, c ? "<td class=\"num\">" : "<td>");
                kvp_buf_xml(d->b, cells[r * ncols + c]);
                kvp_buf_printf(d->b, "</td>");
            }
            kvp_buf_printf(d->b, "</tr>\n");
        }
        kvp_buf_printf(d->b, "</tbody>\n</table>\n");
        return;
    }
    struct kvp_table t;
    bool right[KVP_TABLE_MAX_COLS];
    const char *row[KVP_TABLE_MAX_COLS];
    for (uint32_t c = 0; c < ncols; c++)
        right[c] = c > 0;
    kvp_table_init(&t, ncols, head, right);
    for (uint32_t r = 0; r < nrows; r++) {
        for (uint32_t c = 0; c < ncols; c++)
            row[c] = cells[r * ncols + c];
        kvp_table_row(&t, row);
    }
    kvp_table_render(&t, d->fmt == KVP_OUT_MD ? KVP_OUT_MD : KVP_OUT_TEXT, d->b);
    if (t.nomem)
        d->b->nomem = true;
    kvp_table_release(&t);
    kvp_buf_put(d->b, "\n", 1);
}

/* Format names for column heads, computed once. */
struct names {
    char f[KVP_SIZING_MAX_AXIS][48];
};

/* The text of one sized cell (bytes in u, or the concurrency); "-" for a
 * cell left unsized. Returns whether the cell is marked "*" (does not fit). */
typedef bool (*cell_fn)(const struct kvp_sizing *s, const struct kvp_sizing_cell *c, struct kvp_unit u, char *p);

static bool bytes_text(const struct kvp_sizing *s, const struct kvp_sizing_cell *c, struct kvp_unit u, char *p)
{
    in_unit(shown(c), u, p, 20);
    if (s->deploy && !c->fits) {
        strcat(p, " *");
        return true;
    }
    return false;
}

static bool concurrency_text(const struct kvp_sizing *s, const struct kvp_sizing_cell *c, struct kvp_unit u, char *p)
{
    (void)s, (void)u;
    if (c->max_concurrency >= 1e15)
        snprintf(p, CELL_CHARS, "unbounded");
    else
        snprintf(p, CELL_CHARS, "%.2f", c->max_concurrency); /* as `kvplan fit` and the engine's log give it */
    return false;
}

/* The grid g as tables (formats split past the width limit); true if a cell was marked. */
static bool grid_tables(struct doc *d, const struct grid *g, const struct names *nm, cell_fn text, struct kvp_unit u)
{
    const struct kvp_sizing *s = d->s;
    const char *head[KVP_TABLE_MAX_COLS];
    bool marked = false;
    for (uint32_t f0 = 0; f0 < g->nf; f0 += KVP_TABLE_MAX_COLS - 1) {
        uint32_t fn = g->nf - f0 < KVP_TABLE_MAX_COLS - 1 ? g->nf - f0 : KVP_TABLE_MAX_COLS - 1, nc = fn + 1;
        cell_text *cl = d->cells;
        head[0] = "context";
        for (uint32_t fi = 0; fi < fn; fi++)
            head[fi + 1] = nm->f[f0 + fi];
        for (uint32_t ci = 0; ci < g->nc; ci++) {
            kvp_tokens_label(s->contexts[ci], cl[ci * nc], CELL_CHARS);
            for (uint32_t fi = 0; fi < fn; fi++) {
                const struct kvp_sizing_cell *c = &g->cell[ci * g->nf + f0 + fi];
                char *p = cl[ci * nc + fi + 1];
                if (c->beyond || c->unsupported)
                    snprintf(p, CELL_CHARS, "-");
                else
                    marked |= text(s, c, u, p);
            }
        }
        grid_table(d, nc, head, cl, g->nc);
    }
    return marked;
}

/* "-: why" once for each distinct reason a cell of g was left unsized. */
static void unsized_notes(struct doc *d, const struct grid *g)
{
    char line[KVP_SIZING_WHY + 8];
    for (uint32_t i = 0; i < g->nc * g->nf; i++) {
        bool seen = false;
        if (!g->cell[i].beyond && !g->cell[i].unsupported)
            continue;
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = strcmp(g->cell[j].why, g->cell[i].why) == 0;
        if (!seen) {
            snprintf(line, sizeof line, "-: %s", g->cell[i].why);
            para(d, line);
        }
    }
}

/* The ledger of model mi: layers, weights, what a token costs; g is left
 * holding the cells of the first GPU at the first batch. */
static enum kvp_status render_ledger(struct doc *d, uint32_t mi, struct grid *g, const struct names *nm,
                                     struct kvp_error *err)
{
    const struct kvp_sizing *s = d->s;
    const struct kvp_model *m = s->models[mi];
    char line[1024], sum[160], tmp[64], tmp2[64], split[400], maxc[32];
    struct kvp_weights w;
    enum kvp_status st;
    size_t n;

    heading(d, 2, m->name);
    if ((st = kvp_weights_compute(m, NULL, &w, err)) != KVP_OK)
        return st;
    snprintf(line, sizeof line, "%s; weights %s (%s params, stored as %s); max context %s tokens.",
             kvp_model_layer_summary(m, sum, sizeof sum), kvp_bytes_text(w.bytes, s->si, tmp, sizeof tmp),
             kvp_count_text(w.params, tmp2, sizeof tmp2), kvp_weights_split(&w, s->si, split, sizeof split),
             kvp_count_text(m->max_context, maxc, sizeof maxc));
    para(d, line);
    if ((st = fill(s, mi, 0, 0, g, err)) != KVP_OK)
        return st;
    n = (size_t)snprintf(line, sizeof line, "KV cache per token (ideal, while the context is within every window):");
    for (uint32_t fi = 0; fi < s->n_formats && n < sizeof line; fi++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%s %s %s", fi ? "," : "", nm->f[fi],
                              kvp_bytes_text(g->per_token[fi], s->si, tmp, sizeof tmp));
    if (n < sizeof line)
        snprintf(line + n, sizeof line - n, ".");
    para(d, line);
    return KVP_OK;
}

/* Model mi's tables on GPU gi: one per batch, then the max concurrency;
 * `filled`: g holds this GPU's first batch already. */
static enum kvp_status render_on_gpu(struct doc *d, uint32_t mi, uint32_t gi, bool filled, struct grid *g,
                                     const struct names *nm, struct kvp_error *err)
{
    const struct kvp_sizing *s = d->s;
    char line[1024], tmp2[64], gp[192], on[80] = "";
    enum kvp_status st;

    if ((st = deploy_phrase(s, mi, gi, gp, sizeof gp, err)) != KVP_OK)
        return st;
    if (s->n_gpu_ids > 1)
        snprintf(on, sizeof on, " on %s", s->gpu_ids[gi]);
    for (uint32_t bi = 0; bi < s->n_batches; bi++) {
        uint64_t max = 0;
        struct kvp_unit u;
        if ((bi > 0 || !filled) && (st = fill(s, mi, gi, bi, g, err)) != KVP_OK)
            return st;
        for (uint32_t i = 0; i < g->nc * g->nf; i++)
            if (shown(&g->cell[i]) > max)
                max = shown(&g->cell[i]);
        u = kvp_unit_for(max, s->si);
        snprintf(line, sizeof line, "KV cache at batch %llu%s, in %s", (unsigned long long)s->batches[bi], on, u.name);
        heading(d, 3, line);
        if (s->deploy)
            snprintf(line, sizeof line, "In %s per GPU, as `kvplan fit` sizes it on %s: the KV the requests need "
                     "under the engine's rounding; rows: tokens per sequence (k = 1024); columns: cache format.",
                     u.name, gp);
        else
            snprintf(line, sizeof line, "In %s (1 %s = %s bytes); whole model, ideal engine%s; rows: tokens per "
                     "sequence (k = 1024); columns: cache format.", u.name, u.name,
                     kvp_count_text(u.bytes, tmp2, sizeof tmp2),
                     g->cell[0].state_bytes ? ", recurrent state included" : "");
        para(d, line);
        if (grid_tables(d, g, nm, bytes_text, u)) {
            snprintf(line, sizeof line,
                     "* does not fit: weights, the start-up reserve and %llu sequence%s of KV "
                     "exceed the memory on %s.",
                     (unsigned long long)s->batches[bi], s->batches[bi] == 1 ? "" : "s", gp);
            para(d, line);
        }
        unsized_notes(d, g);
    }
    if (s->deploy) {
        /* concurrency does not depend on the batch: sized at the first */
        if (s->n_batches > 1 && (st = fill(s, mi, gi, 0, g, err)) != KVP_OK)
            return st;
        snprintf(line, sizeof line, "Max concurrency on %s", gp);
        heading(d, 3, line);
        para(d, "Requests of each context the KV cache holds at once, as `kvplan fit` gives it (the engine's "
                "\"maximum concurrency\"; below 1: not even one).");
        grid_tables(d, g, nm, concurrency_text, kvp_unit_for(0, false));
        unsized_notes(d, g);
    }
    return KVP_OK;
}

static uint32_t gpu_count(const struct kvp_sizing *s)
{
    return s->n_gpu_ids ? s->n_gpu_ids : 1;
}

static enum kvp_status render_model(struct doc *d, uint32_t mi, struct grid *g, const struct names *nm,
                                    struct kvp_error *err)
{
    enum kvp_status st;
    if ((st = render_ledger(d, mi, g, nm, err)) != KVP_OK)
        return st;
    for (uint32_t gi = 0; gi < gpu_count(d->s); gi++)
        if ((st = render_on_gpu(d, mi, gi, gi == 0, g, nm, err)) != KVP_OK)
            return st;
    return KVP_OK;
}

/* ---- CSV and JSON: one row per model x context x batch x format ---- */

/* What a CSV or JSON row says of the deployment: engine, release, GPUs. */
struct row_deploy {
    const char *engine, *version, *gpu;
    uint32_t gpus, tp, pp;
};

static enum kvp_status row_deploy(const struct kvp_sizing *s, uint32_t mi, uint32_t gi, struct row_deploy *r,
                                  struct kvp_error *err)
{
    struct kvp_deploy d;
    const struct kvp_gpu *gpu;
    enum kvp_status st;
    if (!s->deploy) {
        *r = (struct row_deploy){kvp_engine_info(KVP_ENGINE_IDEAL)->name, "", "", 0, 0, 0};
        return KVP_OK;
    }
    if ((st = kvp_sizing_deploy(s, mi, gi, &d, &gpu, err)) != KVP_OK)
        return st;
    *r = (struct row_deploy){kvp_engine_info(d.engine)->name, kvp_deploy_release(&d)->version, gpu ? gpu->id : "",
                             d.n_gpus, d.tp, d.pp};
    return KVP_OK;
}

static bool sized(const struct kvp_sizing_cell *c)
{
    return !c->beyond && !c->unsupported;
}

static void csv_row(const struct kvp_sizing *s, uint32_t mi, uint32_t ci, uint32_t bi, const char *fname,
                    const struct row_deploy *r, const struct kvp_sizing_cell *c, struct kvp_buf *b)
{
    kvp_buf_printf(b, "%s,%s,%s,%s,%u,%u,%u,%llu,%llu,%s,", s->models[mi]->name, r->engine, r->version, r->gpu, r->gpus,
                   r->tp, r->pp, (unsigned long long)s->contexts[ci], (unsigned long long)s->batches[bi], fname);
    if (sized(c))
        kvp_buf_printf(b, "%llu,%llu,%llu,", (unsigned long long)c->kv_bytes, (unsigned long long)c->state_bytes,
                       (unsigned long long)c->weight_bytes);
    else
        kvp_buf_printf(b, ",,,");
    if (s->deploy && sized(c))
        kvp_buf_printf(b, "%.4f,%s\n", c->max_concurrency, c->fits ? "true" : "false");
    else
        kvp_buf_printf(b, ",\n");
}

static void json_row(const struct kvp_sizing *s, uint32_t mi, uint32_t ci, uint32_t bi, const char *fname,
                     const struct row_deploy *r, const struct kvp_sizing_cell *c, struct kvp_json *j)
{
    kvp_json_begin(j, NULL, '{');
    kvp_json_str(j, "model", s->models[mi]->name);
    if (s->deploy) {
        kvp_json_str(j, "engine", r->engine);
        kvp_json_str(j, "engine_version", r->version);
        if (s->n_gpu_ids)
            kvp_json_str(j, "gpu", r->gpu);
    }
    kvp_json_u64(j, "context", s->contexts[ci]);
    kvp_json_u64(j, "batch", s->batches[bi]);
    kvp_json_str(j, "kv_dtype", fname);
    if (!sized(c)) {
        kvp_json_str(j, "not_sized", c->why);
    } else {
        kvp_json_u64(j, "kv_bytes", c->kv_bytes);
        kvp_json_u64(j, "state_bytes", c->state_bytes);
        kvp_json_u64(j, "weight_bytes", c->weight_bytes);
        if (s->deploy) {
            kvp_json_double(j, "max_concurrency", c->max_concurrency);
            kvp_json_bool(j, "fits", c->fits);
        }
    }
    kvp_json_end(j, '}');
}

/* ---- one table for all models: rows = models ---- */

#define KVP_SIZING_COMBINED_COLS 64

static uint64_t combined_cols(const struct kvp_sizing *s)
{
    return (uint64_t)gpu_count(s) * s->n_contexts * s->n_batches * s->n_formats;
}

/* Column k of the combined table: its GPU, context, batch and format, the
 * format varying fastest. */
static void combined_col(const struct kvp_sizing *s, uint32_t k, uint32_t *gi, uint32_t *ci, uint32_t *bi,
                         uint32_t *fi)
{
    *fi = k % s->n_formats;
    k /= s->n_formats;
    *bi = k % s->n_batches;
    k /= s->n_batches;
    *ci = k % s->n_contexts;
    *gi = k / s->n_contexts;
}

/* A column's head: the values of its axes that have more than one. */
static void combined_head(const struct kvp_sizing *s, const struct names *nm, uint32_t k, char *buf, uint32_t n)
{
    uint32_t gi, ci, bi, fi, len = 0;
    char t[32];
    combined_col(s, k, &gi, &ci, &bi, &fi);
    buf[0] = '\0';
    if (s->n_gpu_ids > 1)
        len += (uint32_t)snprintf(buf + len, n - len, "%s ", s->gpu_ids[gi]);
    if (s->n_contexts > 1 && len < n)
        len += (uint32_t)snprintf(buf + len, n - len, "%s ", kvp_tokens_label(s->contexts[ci], t, sizeof t));
    if (s->n_batches > 1 && len < n)
        len += (uint32_t)snprintf(buf + len, n - len, "x%llu ", (unsigned long long)s->batches[bi]);
    if ((s->n_formats > 1 || len == 0) && len < n)
        len += (uint32_t)snprintf(buf + len, n - len, "%s ", nm->f[fi]);
    if (len > 0 && len <= n)
        buf[len - 1] = '\0';
}

/* The caption: what the cells are, and the axes of one value. */
static enum kvp_status combined_caption(struct doc *d, const struct names *nm, struct kvp_unit u, bool state,
                                        struct kvp_error *err)
{
    const struct kvp_sizing *s = d->s;
    char line[1024], gp[192], t[32];
    size_t n;
    enum kvp_status st;
    if (s->deploy) {
        struct kvp_deploy dep;
        const struct kvp_gpu *gpu;
        if ((st = kvp_sizing_deploy(s, 0, 0, &dep, &gpu, err)) != KVP_OK)
            return st;
        if (s->n_gpu_ids > 1)
            snprintf(gp, sizeof gp, "%u of each GPU, tp %u, pp %u, %s %s", dep.n_gpus, dep.tp, dep.pp,
                     kvp_engine_info(dep.engine)->name, kvp_deploy_release(&dep)->version);
        else if ((st = deploy_phrase(s, 0, 0, gp, sizeof gp, err)) != KVP_OK)
            return st;
        n = (size_t)snprintf(line, sizeof line, "Max concurrency: requests of the context the KV cache holds at "
                             "once, as `kvplan fit` gives it on %s; * the batch does not fit; - not sized", gp);
    } else {
        n = (size_t)snprintf(line, sizeof line, "KV cache in %s, whole model, ideal engine%s", u.name,
                             state ? ", recurrent state included" : "");
    }
    if (s->n_contexts == 1 && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, "; context %s",
                              kvp_tokens_label(s->contexts[0], t, sizeof t));
    if (s->n_batches == 1 && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, "; batch %llu", (unsigned long long)s->batches[0]);
    if (s->n_formats == 1 && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, "; K and V %s", nm->f[0]);
    if (n < sizeof line)
        snprintf(line + n, sizeof line - n, ".");
    para(d, line);
    return KVP_OK;
}

static enum kvp_status render_combined(struct doc *d, const struct names *nm, struct kvp_error *err)
{
    const struct kvp_sizing *s = d->s;
    uint32_t ncols = (uint32_t)combined_cols(s);
    struct kvp_sizing_cell *cell = calloc((size_t)s->n_models * ncols, sizeof *cell);
    char head_text[KVP_TABLE_MAX_COLS][64];
    const char *head[KVP_TABLE_MAX_COLS];
    uint64_t max = 0;
    struct kvp_unit u;
    bool state = false;
    enum kvp_status st = KVP_OK;

    if (!cell)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory for a combined sizing table");
    for (uint32_t mi = 0; mi < s->n_models && st == KVP_OK; mi++)
        for (uint32_t k = 0; k < ncols && st == KVP_OK; k++) {
            uint32_t gi, ci, bi, fi;
            combined_col(s, k, &gi, &ci, &bi, &fi);
            st = kvp_sizing_cell(s, mi, gi, ci, bi, fi, &cell[mi * ncols + k], err);
            if (st == KVP_OK && shown(&cell[mi * ncols + k]) > max)
                max = shown(&cell[mi * ncols + k]);
            state |= st == KVP_OK && cell[mi * ncols + k].state_bytes;
        }
    u = kvp_unit_for(max, s->si);
    heading(d, 2, s->deploy ? "Max concurrency by model" : "KV cache by model");
    if (st == KVP_OK)
        st = combined_caption(d, nm, u, state, err);
    for (uint32_t k0 = 0; k0 < ncols && st == KVP_OK; k0 += KVP_TABLE_MAX_COLS - 1) {
        uint32_t kn = ncols - k0 < KVP_TABLE_MAX_COLS - 1 ? ncols - k0 : KVP_TABLE_MAX_COLS - 1, nc = kn + 1;
        head[0] = "model";
        for (uint32_t k = 0; k < kn; k++) {
            combined_head(s, nm, k0 + k, head_text[k], sizeof head_text[k]);
            head[k + 1] = head_text[k];
        }
        for (uint32_t mi = 0; mi < s->n_models; mi++) {
            snprintf(d->cells[mi * nc], CELL_CHARS, "%s", s->models[mi]->name);
            for (uint32_t k = 0; k < kn; k++) {
                const struct kvp_sizing_cell *c = &cell[mi * ncols + k0 + k];
                char *p = d->cells[mi * nc + k + 1];
                if (!sized(c)) {
                    snprintf(p, CELL_CHARS, "-");
                } else if (s->deploy) {
                    concurrency_text(s, c, u, p);
                    if (!c->fits)
                        strcat(p, " *");
                } else {
                    bytes_text(s, c, u, p);
                }
            }
        }
        grid_table(d, nc, head, d->cells, s->n_models);
    }
    free(cell);
    return st;
}

static enum kvp_status check_axes(const struct kvp_sizing *s, struct kvp_error *err)
{
    const uint32_t n[] = {s->n_models, s->n_contexts, s->n_batches, s->n_formats};
    static const char *const what[] = {"models", "contexts", "batches", "cache formats"};
    for (uint32_t i = 0; i < 4; i++) {
        if (n[i] == 0)
            return kvp_fail(err, KVP_ERR_USAGE, "a sizing table needs at least one of its %s", what[i]);
        if (i > 0 && n[i] > KVP_SIZING_MAX_AXIS)
            return kvp_fail(err, KVP_ERR_USAGE, "too many %s for one table (got %u, at most %u)", what[i], n[i],
                            KVP_SIZING_MAX_AXIS);
    }
    if (s->n_gpu_ids && !s->deploy)
        return kvp_fail(err, KVP_ERR_USAGE, "a GPU axis needs a deployment (the settings each GPU is sized under)");
    if (s->n_gpu_ids > KVP_SIZING_MAX_GPUS)
        return kvp_fail(err, KVP_ERR_USAGE, "too many GPUs for one table (got %u, at most %u)", s->n_gpu_ids,
                        KVP_SIZING_MAX_GPUS);
    if (s->combined && s->n_models > KVP_SIZING_MAX_AXIS)
        return kvp_fail(err, KVP_ERR_USAGE, "a combined table has at most %u models (got %u)", KVP_SIZING_MAX_AXIS,
                        s->n_models);
    if (s->combined && combined_cols(s) > KVP_SIZING_COMBINED_COLS)
        return kvp_fail(err, KVP_ERR_USAGE, "a combined table has at most %u columns (GPUs x contexts x batches x "
                        "formats; got %llu)", KVP_SIZING_COMBINED_COLS, (unsigned long long)combined_cols(s));
    return KVP_OK;
}

static const char html_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>kvplan sizing</title>\n"
    "<style>\nbody { font-family: sans-serif; }\ntable { border-collapse: collapse; margin-bottom: 1em; }\n"
    "th, td { border: 1px solid #ccc; padding: 2px 8px; }\ntd.num { text-align: right; "
    "font-variant-numeric: tabular-nums; }\n</style>\n</head>\n<body>\n";

struct work {
    struct grid g;
    cell_text cells[KVP_SIZING_MAX_AXIS * KVP_TABLE_MAX_COLS];
    struct names nm;
};

enum kvp_status kvp_sizing_render(const struct kvp_sizing *s, enum kvp_out fmt, struct kvp_buf *b,
                                  struct kvp_error *err)
{
    enum kvp_status st;
    struct work *w;

    if ((st = check_axes(s, err)) != KVP_OK)
        return st;
    if (!(w = calloc(1, sizeof *w)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory for a sizing table");
    for (uint32_t fi = 0; fi < s->n_formats; fi++)
        kvp_format_name(&s->formats[fi], w->nm.f[fi], sizeof w->nm.f[fi]);

    if (fmt == KVP_OUT_CSV || fmt == KVP_OUT_JSON) {
        struct kvp_json j;
        struct row_deploy r;
        if (fmt == KVP_OUT_CSV) {
            kvp_buf_printf(b, "model,engine,engine_version,gpu,gpus,tp,pp,context,batch,kv_dtype,kv_bytes,state_bytes,"
                              "weight_bytes,max_concurrency,fits\n");
        } else {
            kvp_json_init(&j, b);
            kvp_json_begin(&j, NULL, '{');
            if ((st = row_deploy(s, 0, 0, &r, err)) != KVP_OK)
                goto out;
            kvp_json_str(&j, "engine", r.engine);
            if (s->deploy) {
                kvp_json_str(&j, "engine_version", r.version);
                if (s->n_gpu_ids > 1) /* several: each cell names its own */
                    kvp_json_null(&j, "gpu");
                else
                    kvp_json_str(&j, "gpu", r.gpu);
                kvp_json_u64(&j, "gpus", r.gpus);
                kvp_json_u64(&j, "tp", r.tp);
                kvp_json_u64(&j, "pp", r.pp);
            } else {
                kvp_json_null(&j, "gpu");
            }
            kvp_json_str(&j, "kv_bytes_scope", s->deploy ? "per GPU, engine rules" : "whole model, ideal");
            kvp_json_begin(&j, "cells", '[');
        }
        for (uint32_t mi = 0; mi < s->n_models; mi++)
            for (uint32_t gi = 0; gi < gpu_count(s); gi++) {
                if ((st = row_deploy(s, mi, gi, &r, err)) != KVP_OK)
                    goto out;
                for (uint32_t ci = 0; ci < s->n_contexts; ci++)
                    for (uint32_t bi = 0; bi < s->n_batches; bi++)
                        for (uint32_t fi = 0; fi < s->n_formats; fi++) {
                            struct kvp_sizing_cell c;
                            if ((st = kvp_sizing_cell(s, mi, gi, ci, bi, fi, &c, err)) != KVP_OK)
                                goto out;
                            if (fmt == KVP_OUT_CSV)
                                csv_row(s, mi, ci, bi, w->nm.f[fi], &r, &c, b);
                            else
                                json_row(s, mi, ci, bi, w->nm.f[fi], &r, &c, &j);
                        }
            }
        if (fmt == KVP_OUT_JSON) {
            kvp_json_end(&j, ']');
            kvp_json_end(&j, '}');
        }
    } else {
        struct doc d = {s, fmt, b, w->cells};
        if (fmt == KVP_OUT_HTML)
            kvp_buf_put(b, html_head, sizeof html_head - 1);
        if (s->combined)
            st = render_combined(&d, &w->nm, err);
        for (uint32_t mi = 0; mi < s->n_models && !s->combined; mi++)
            if ((st = render_model(&d, mi, &w->g, &w->nm, err)) != KVP_OK)
                break;
        if (st != KVP_OK)
            goto out;
        if (fmt == KVP_OUT_HTML)
            kvp_buf_printf(b, "</body>\n</html>\n");
    }
    st = b->nomem ? kvp_fail(err, KVP_ERR_NOMEM, "out of memory rendering a sizing table") : KVP_OK;
out:
    free(w);
    return st;
}
