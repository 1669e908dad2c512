/* chart.c -- memory-vs-context charts written as SVG text.
 *
 * Layout, in SVG user units (px): a title block, the plot area, axis titles,
 * then a legend under the plot (two columns, one when a label would not fit
 * its column), so no label ever sits on a curve or on another label. Both axes
 * are log2: context doubles per step, bytes double per step.
 * Coordinates are printed with one decimal, so output is byte-stable. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kvplan/chart.h"
#include "kvplan/kv.h"
#include "kvplan/num.h"
#include "svg.h"

/* canvas and plot area, px */
#define W 900.0
#define PLOT_L 96.0
#define PLOT_R 200.0 /* right margin: room for the capacity label */
#define PLOT_T 72.0
#define PLOT_H 380.0
#define LEGEND_ROW 22.0
#define LEGEND_COL 380.0  /* the second column's offset */
#define LEGEND_CHAR 7.5   /* an upper bound of a 13 px DejaVu Sans character's advance */
#define MAX_TICKS 10

/* Tableau 10: distinct at a glance, and in greyscale mostly */
static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
#define N_COLORS (sizeof palette / sizeof palette[0])
/* beyond ten series the dash pattern tells them apart */
static const char *const dashes[] = {"", "6 3", "2 3"};

void kvp_chart_init(struct kvp_chart *c, const char *title, const char *subtitle)
{
    memset(c, 0, sizeof *c);
    snprintf(c->title, sizeof c->title, "%s", title ? title : "");
    snprintf(c->subtitle, sizeof c->subtitle, "%s", subtitle ? subtitle : "");
}

enum kvp_status kvp_chart_set_x(struct kvp_chart *c, const uint64_t *x, uint32_t n, struct kvp_error *err)
{
    if (n == 0 || n > KVP_CHART_MAX_POINTS)
        return kvp_fail(err, KVP_ERR_USAGE, "a chart needs 1 to %u contexts (got %u)", KVP_CHART_MAX_POINTS, n);
    for (uint32_t i = 0; i < n; i++) {
        if (x[i] == 0)
            return kvp_fail(err, KVP_ERR_USAGE, "chart contexts must be at least 1 (got 0)");
        if (i && x[i] <= x[i - 1])
            return kvp_fail(err, KVP_ERR_USAGE, "chart contexts must increase (got %llu after %llu)",
                            (unsigned long long)x[i], (unsigned long long)x[i - 1]);
        c->x[i] = x[i];
    }
    c->n_x = n;
    return KVP_OK;
}

/* The next series of c for model m, its points up to m's own maximum
 * context (not past it), in its model's group; NULL when c is full. */
static struct kvp_chart_series *new_series(struct kvp_chart *c, const struct kvp_model *m, const char *label,
                                           struct kvp_error *err)
{
    struct kvp_chart_series *s;
    if (c->n_series == KVP_CHART_MAX_SERIES) {
        kvp_fail(err, KVP_ERR_USAGE, "too many series for one chart (at most %u)", KVP_CHART_MAX_SERIES);
        return NULL;
    }
    s = &c->series[c->n_series];
    memset(s, 0, sizeof *s);
    for (s->n_points = 0; s->n_points < c->n_x && c->x[s->n_points] <= m->max_context; s->n_points++)
        ;
    snprintf(s->label, sizeof s->label, "%s", label);
    snprintf(s->model, sizeof s->model, "%s", m->name);
    s->group = c->n_series; /* its own, unless an earlier series is of the same model */
    for (uint32_t i = 0; i < c->n_series; i++)
        if (strcmp(c->series[i].model, m->name) == 0) {
            s->group = c->series[i].group;
            break;
        }
    return s;
}

enum kvp_status kvp_chart_add(struct kvp_chart *c, const struct kvp_model *m, const struct kvp_format *f,
                              const char *label, struct kvp_error *err)
{
    struct kvp_chart_series *s = new_series(c, m, label, err);
    struct kvp_weights w;
    enum kvp_status st;

    if (!s)
        return err->code;
    if ((st = kvp_weights_compute(m, NULL, &w, err)) != KVP_OK)
        return st;
    for (uint32_t i = 0; i < s->n_points; i++) {
        struct kvp_kv_query q = {.context = c->x[i], .batch = c->batch ? c->batch : 1, .k = *f, .v = *f};
        struct kvp_kv_plan plan;
        if ((st = kvp_kv_compute(m, &q, &plan, err)) != KVP_OK)
            return st;
        s->kv[i] = plan.total_bytes;
    }
    s->weights = w.bytes;
    c->n_series++;
    return KVP_OK;
}

/* The start-up reserve of fit f: activations + non-torch + CUDA graphs. */
static uint64_t fit_reserve(const struct kvp_fit *f)
{
    return kvp_sat_add(kvp_sat_add(f->reserve.activation, f->reserve.non_torch), f->reserve.cuda_graph);
}

enum kvp_status kvp_chart_add_fit(struct kvp_chart *c, const struct kvp_model *m, const struct kvp_deploy *d,
                                  const char *label, struct kvp_error *err)
{
    struct kvp_chart_series *s = new_series(c, m, label, err);
    struct kvp_deploy at = *d;
    struct kvp_fit f;
    enum kvp_status st;

    if (!s)
        return err->code;
    at.concurrency = c->batch ? c->batch : 1;
    if ((st = kvp_fit_compute(m, &at, &f, err)) != KVP_OK)
        return st;
    s->weights = f.weights_bytes;
    s->max_context = f.max_context;
    s->max_concurrency = f.max_concurrency;
    if (!c->usable && f.util > 0 && f.util < 1 && f.kv_budget_bytes) { /* where the engine's budget ends */
        c->usable = kvp_sat_add(kvp_sat_add(f.weights_bytes, fit_reserve(&f)),
                                kvp_sat_add(f.kv_budget_bytes, kvp_sat_add(f.state_conv_bytes, f.state_ssm_bytes)));
        c->util = f.util;
    }
    for (uint32_t i = 0; i < s->n_points; i++) {
        at.context = c->x[i];
        if ((st = kvp_fit_compute(m, &at, &f, err)) != KVP_OK)
            return st;
        s->reserve[i] = fit_reserve(&f);
        s->kv[i] = kvp_sat_add(s->reserve[i], f.kv_bytes_required);
    }
    c->n_series++;
    return KVP_OK;
}

/* ---- the layout: scales and legend, computed before anything is drawn ---- */

/* A power of two of bytes as a tick label: "512 MiB", "1 GiB". */
static void bytes_tick(double log2v, char *buf, size_t n)
{
    int k = (int)lround(log2v);
    int u = k < 0 ? 0 : k / 10;
    if (u > (int)KVP_UNIT_MAX)
        u = KVP_UNIT_MAX;
    snprintf(buf, n, "%.0f %s", ldexp(1.0, k - 10 * u), kvp_unit_name((uint32_t)u, false));
}

static void tokens_tick(double log2v, char *buf, size_t n)
{
    int k = (int)lround(log2v);
    if (k >= 20)
        snprintf(buf, n, "%.0fM", ldexp(1.0, k - 20));
    else if (k >= 10)
        snprintf(buf, n, "%.0fk", ldexp(1.0, k - 10));
    else
        snprintf(buf, n, "%.0f", ldexp(1.0, k));
}

struct frame {
    double x0, x1, y0, y1; /* x: log2 tokens; y: log2 bytes, or bytes when linear */
    double xstep, ystep;   /* tick steps, in doublings (or bytes) */
    bool linear;           /* y from 0 in bytes: when the values span few doublings */
    double unit;           /* linear: bytes of the tick unit */
    const char *unit_name;
};

/* What kvp_chart_svg draws, decided before it draws: the scales, whether the
 * weights are a band (one model), the legend's entries and columns, the
 * canvas height. */
enum entry { ENTRY_SERIES, ENTRY_WEIGHTS, ENTRY_RESERVE, ENTRY_CAPACITY, ENTRY_USABLE };

struct layout {
    struct frame f;
    bool band;    /* one model: the weights (and its reserve) as bands under the curves */
    bool reserve; /* the band's series has a start-up reserve (kvp_chart_add_fit), drawn as its own band */
    bool usable;  /* the engine may use less than the capacity: a line at c->usable, the rest a band */
    bool per_gpu; /* some series is a deployment's, per GPU with its reserve */
    uint32_t n_legend, cols;
    enum entry legend[KVP_CHART_MAX_SERIES + 4];
    double h;
};

static const struct kvp_svg_area area = {PLOT_L, PLOT_T, W - PLOT_L - PLOT_R, PLOT_H};

static double px(const struct frame *f, uint64_t v)
{
    return PLOT_L + (log2((double)v) - f->x0) / (f->x1 - f->x0) * (W - PLOT_L - PLOT_R);
}

static double py(const struct frame *f, uint64_t v)
{
    if (f->linear)
        return PLOT_T + PLOT_H - (double)v / f->y1 * PLOT_H;
    double l = v ? log2((double)v) : f->y0;
    if (l < f->y0)
        l = f->y0;
    return PLOT_T + PLOT_H - (l - f->y0) / (f->y1 - f->y0) * PLOT_H;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    uint64_t t;
    return kvp_add(a, b, &t) ? t : UINT64_MAX;
}

/* Whole doublings covering [lo, hi], ticks every `step` doublings, at most MAX_TICKS. */
static void axis(double lo, double hi, double *a0, double *a1, double *step)
{
    *a0 = floor(lo);
    *a1 = ceil(hi);
    if (*a1 <= *a0)
        *a1 = *a0 + 1;
    *step = 1;
    while ((*a1 - *a0) / *step > MAX_TICKS)
        *step *= 2;
    *a0 = floor(*a0 / *step) * *step;
    *a1 = ceil(*a1 / *step) * *step;
}

static bool one_group(const struct kvp_chart *c)
{
    for (uint32_t i = 1; i < c->n_series; i++)
        if (c->series[i].group != c->series[0].group)
            return false;
    return true;
}

static void widen(double v, double *lo, double *hi)
{
    *lo = v < *lo ? v : *lo;
    *hi = v > *hi ? v : *hi;
}

/* The y scale over every plotted value, the weights and the capacity: log
 * when the values span 5+ doublings (a 4 KiB and a 4 MiB model on one chart);
 * else linear from 0, where the weights band reads as its share. */
static void y_scale(const struct kvp_chart *c, struct frame *f)
{
    double lo = INFINITY, hi = 0;

    for (uint32_t s = 0; s < c->n_series; s++) {
        const struct kvp_chart_series *se = &c->series[s];
        if (se->weights && log2((double)se->weights) < lo)
            lo = log2((double)se->weights);
        for (uint32_t i = 0; i < se->n_points; i++)
            widen(log2((double)sat_add(se->weights, se->kv[i]) + 1), &lo, &hi);
    }
    if (c->capacity)
        widen(log2((double)c->capacity), &lo, &hi);
    if (c->usable)
        widen(log2((double)c->usable), &lo, &hi);
    f->linear = hi - lo < 5;
    if (f->linear) {
        double top = exp2(hi) * 1.08;
        int u = (int)floor(log2(top) / 10);
        u = u < 0 ? 0 : u > (int)KVP_UNIT_MAX ? (int)KVP_UNIT_MAX : u;
        f->unit = ldexp(1.0, 10 * u);
        f->unit_name = kvp_unit_name((uint32_t)u, false);
        f->ystep = kvp_svg_tick_step(top / f->unit) * f->unit;
        f->y0 = 0;
        f->y1 = ceil(top / f->ystep) * f->ystep;
    } else {
        axis(lo - 0.5, hi + 0.25, &f->y0, &f->y1, &f->ystep);
    }
}

/* Legend entry e's label into lab: the series, then the weights (a band or
 * dotted lines), the reserve, the capacity and the part the engine uses. */
static void legend_label(const struct kvp_chart *c, const struct layout *lay, uint32_t e, char *lab, size_t size)
{
    char mem[32];

    switch (lay->legend[e]) {
        case ENTRY_SERIES: snprintf(lab, size, "%s", c->series[e].label); break;
        case ENTRY_WEIGHTS:
            if (lay->band)
                snprintf(lab, size, "weights (%s)", kvp_bytes_text(c->series[0].weights, false, mem, sizeof mem));
            else
                snprintf(lab, size, "weights alone (dotted, in the model's colour)");
            break;
        case ENTRY_RESERVE: snprintf(lab, size, "reserve: activations, non-torch, CUDA graphs"); break;
        case ENTRY_CAPACITY:
            snprintf(lab, size, "GPU memory: %s (%s)", c->capacity_label,
                     kvp_bytes_text(c->capacity, false, mem, sizeof mem));
            break;
        case ENTRY_USABLE:
            snprintf(lab, size, "usable: %s, fraction %.2f; rest shaded",
                     kvp_bytes_text(c->usable, false, mem, sizeof mem), c->util);
            break;
    }
}

/* The scales and the legend: entries series, weights (band or lines),
 * reserve, capacity, usable, in two columns unless a label is wider than
 * its column. */
static void chart_layout(const struct kvp_chart *c, struct layout *lay)
{
    char lab[256];

    memset(lay, 0, sizeof *lay);
    lay->band = one_group(c);
    for (uint32_t s = 0; s < c->n_series; s++)
        for (uint32_t i = 0; i < c->series[s].n_points; i++)
            lay->per_gpu = lay->per_gpu || c->series[s].reserve[i] > 0;
    for (uint32_t i = 0; i < c->series[0].n_points && lay->band; i++)
        lay->reserve = lay->reserve || c->series[0].reserve[i] > 0;
    lay->usable = c->capacity && c->usable && c->usable < c->capacity;
    y_scale(c, &lay->f);
    axis(log2((double)c->x[0]), log2((double)c->x[c->n_x - 1]), &lay->f.x0, &lay->f.x1, &lay->f.xstep);
    for (lay->n_legend = 0; lay->n_legend < c->n_series; lay->n_legend++)
        lay->legend[lay->n_legend] = ENTRY_SERIES;
    lay->legend[lay->n_legend++] = ENTRY_WEIGHTS;
    if (lay->reserve)
        lay->legend[lay->n_legend++] = ENTRY_RESERVE;
    if (c->capacity)
        lay->legend[lay->n_legend++] = ENTRY_CAPACITY;
    if (lay->usable)
        lay->legend[lay->n_legend++] = ENTRY_USABLE;
    lay->cols = 2;
    for (uint32_t e = 0; e < lay->n_legend; e++) {
        legend_label(c, lay, e, lab, sizeof lab);
        if (36 + LEGEND_CHAR * (double)strlen(lab) > LEGEND_COL)
            lay->cols = 1;
    }
    lay->h = PLOT_T + PLOT_H + 64 + (lay->n_legend + lay->cols - 1) / lay->cols * LEGEND_ROW + 8;
}

/* ---- rendering the layout ---- */

static void draw_axes(struct kvp_buf *b, const struct layout *lay)
{
    const struct frame *f = &lay->f;
    char lab[32];
    double right = W - PLOT_R, bottom = PLOT_T + PLOT_H;

    for (double t = f->y0; t <= f->y1 * (1 + 1e-9) + 1e-9; t += f->ystep) {
        double y = PLOT_T + PLOT_H - (t - f->y0) / (f->y1 - f->y0) * PLOT_H;
        if (f->linear)
            snprintf(lab, sizeof lab, "%g %s", t / f->unit, f->unit_name);
        else
            bytes_tick(t, lab, sizeof lab);
        kvp_svg_grid(b, &area, true, y, PLOT_L - 8, y + 4, "class=\"tick\" text-anchor=\"end\"", lab);
    }
    for (double t = f->x0; t <= f->x1 + 1e-9; t += f->xstep) {
        double x = PLOT_L + (t - f->x0) / (f->x1 - f->x0) * (right - PLOT_L);
        tokens_tick(t, lab, sizeof lab);
        kvp_svg_grid(b, &area, false, x, x, bottom + 18, "class=\"tick\" text-anchor=\"middle\"", lab);
    }
    kvp_svg_frame(b, &area);
    kvp_svg_text(b, (PLOT_L + right) / 2, bottom + 42, "class=\"axis\" text-anchor=\"middle\"",
                 "context (tokens per sequence, k = 1024; log scale)");
    kvp_buf_printf(b,
                   "<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" text-anchor=\"middle\" "
                   "transform=\"rotate(-90 %.1f %.1f)\">",
                   22.0, PLOT_T + PLOT_H / 2, 22.0, PLOT_T + PLOT_H / 2);
    kvp_buf_printf(b, "%s%s",
                   lay->per_gpu ? "memory per GPU: weights + reserve + KV cache" : "memory: weights + KV cache",
                   f->linear ? " (bytes, IEC)" : " (bytes, IEC; log scale)");
    kvp_buf_printf(b, "</text>\n");
}

/* The weights: a band under the curves when one model, else a dotted line
 * per model; over the band, each series' KV stacked on it, shaded so the
 * share reads at a glance. */
static void draw_weights(struct kvp_buf *b, const struct kvp_chart *c, const struct layout *lay)
{
    const struct frame *f = &lay->f;
    double right = W - PLOT_R, bottom = PLOT_T + PLOT_H;

    for (uint32_t s = 0; s < c->n_series; s++) {
        const struct kvp_chart_series *se = &c->series[s];
        double y = py(f, se->weights);
        if (se->group != s || !se->weights)
            continue; /* drawn once per model */
        if (lay->band)
            kvp_buf_printf(b,
                           "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#d9d9d9\" "
                           "fill-opacity=\"0.8\"/>\n",
                           PLOT_L, y, right - PLOT_L, bottom - y);
        else
            kvp_buf_printf(b,
                           "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.5\" "
                           "stroke-dasharray=\"2 4\"/>\n",
                           PLOT_L, y, right, y, palette[s % N_COLORS]);
    }
    if (lay->reserve) { /* the start-up reserve stacked on the weights, its own band */
        const struct kvp_chart_series *se = &c->series[0];
        kvp_buf_printf(b, "<polygon fill=\"#9e9e9e\" fill-opacity=\"0.6\" stroke=\"none\" points=\"");
        for (uint32_t i = 0; i < se->n_points; i++)
            kvp_buf_printf(b, "%.1f,%.1f ", px(f, c->x[i]), py(f, sat_add(se->weights, se->reserve[i])));
        kvp_buf_printf(b, "%.1f,%.1f %.1f,%.1f\"/>\n", px(f, c->x[se->n_points - 1]), py(f, se->weights),
                       px(f, c->x[0]), py(f, se->weights));
    }
    for (uint32_t s = 0; s < c->n_series && lay->band; s++) {
        const struct kvp_chart_series *se = &c->series[s];
        kvp_buf_printf(b, "<polygon fill=\"%s\" fill-opacity=\"0.10\" stroke=\"none\" points=\"",
                       palette[s % N_COLORS]);
        if (se->n_points == 0)
            continue;
        for (uint32_t i = 0; i < se->n_points; i++)
            kvp_buf_printf(b, "%.1f,%.1f ", px(f, c->x[i]), py(f, sat_add(se->weights, se->kv[i])));
        kvp_buf_printf(b, "%.1f,%.1f %.1f,%.1f\"/>\n", px(f, c->x[se->n_points - 1]), py(f, se->weights),
                       px(f, c->x[0]), py(f, se->weights));
    }
}

/* Series si as a polyline with a dot at each point. */
static void polyline(struct kvp_buf *b, const struct kvp_chart *c, const struct frame *f, uint32_t si,
                     const char *color, const char *dash)
{
    const struct kvp_chart_series *s = &c->series[si];
    kvp_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\"%s%s%s points=\"", color,
                   *dash ? " stroke-dasharray=\"" : "", dash, *dash ? "\"" : "");
    for (uint32_t i = 0; i < s->n_points; i++)
        kvp_buf_printf(b, "%s%.1f,%.1f", i ? " " : "", px(f, c->x[i]), py(f, sat_add(s->weights, s->kv[i])));
    kvp_buf_printf(b, "\"/>\n");
    for (uint32_t i = 0; i < s->n_points; i++)
        kvp_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(f, c->x[i]),
                       py(f, sat_add(s->weights, s->kv[i])), color);
}

/* The capacity as the line the curves stop at, labelled on the right. */
static void draw_capacity(struct kvp_buf *b, const struct kvp_chart *c, const struct frame *f)
{
    char mem[32];
    double y = py(f, c->capacity);

    kvp_svg_line(b, PLOT_L, y, W - PLOT_R, y, "stroke=\"#b00\" stroke-width=\"2\" stroke-dasharray=\"8 4\"");
    kvp_svg_text(b, W - PLOT_R + 6, y - 2, "class=\"cap\"", c->capacity_label);
    kvp_svg_text(b, W - PLOT_R + 6, y + 13, "class=\"cap\"", kvp_bytes_text(c->capacity, false, mem, sizeof mem));
}

/* The part of the capacity the engine may use (vLLM: util x GPU memory) as
 * the dashed line the curves stop at, the rest of the GPU a shaded band
 * above it under a thin line at the capacity; the capacity is labelled
 * above its line, the usable bytes under theirs. */
static void draw_usable(struct kvp_buf *b, const struct kvp_chart *c, const struct frame *f)
{
    char mem[32], lab[48];
    double top = py(f, c->capacity), y = py(f, c->usable);

    kvp_svg_rect(b, PLOT_L, top, W - PLOT_R - PLOT_L, y - top, "fill=\"#b00\" fill-opacity=\"0.08\"");
    kvp_svg_line(b, PLOT_L, top, W - PLOT_R, top, "stroke=\"#b00\" stroke-width=\"1\"");
    kvp_svg_line(b, PLOT_L, y, W - PLOT_R, y, "stroke=\"#b00\" stroke-width=\"2\" stroke-dasharray=\"8 4\"");
    kvp_svg_text(b, W - PLOT_R + 6, top - 16, "class=\"cap\"", c->capacity_label);
    kvp_svg_text(b, W - PLOT_R + 6, top - 2, "class=\"cap\"", kvp_bytes_text(c->capacity, false, mem, sizeof mem));
    snprintf(lab, sizeof lab, "usable: %s", kvp_bytes_text(c->usable, false, mem, sizeof mem));
    kvp_svg_text(b, W - PLOT_R + 6, y + 13, "class=\"cap\"", lab);
}

/* The series, each fit's longest context where it falls on the x axis (a
 * thin line in the series' colour), and the capacity line (or the usable part). */
static void draw_series(struct kvp_buf *b, const struct kvp_chart *c, const struct layout *lay)
{
    const struct frame *f = &lay->f;

    for (uint32_t s = 0; s < c->n_series; s++)
        polyline(b, c, f, s, palette[s % N_COLORS], dashes[(s / N_COLORS) % 3]);
    for (uint32_t s = 0; s < c->n_series; s++) {
        uint64_t t = c->series[s].max_context;
        if (t >= c->x[0] && t <= c->x[c->n_x - 1])
            kvp_buf_printf(b,
                           "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1\" "
                           "stroke-dasharray=\"3 3\"/>\n",
                           px(f, t), PLOT_T, px(f, t), PLOT_T + PLOT_H, palette[s % N_COLORS]);
    }
    if (lay->usable) /* the engine's part of the GPU: the line the curves stop at, the rest shaded */
        draw_usable(b, c, f);
    else if (c->capacity)
        draw_capacity(b, c, f);
}

/* Legend entry e's swatch, its baseline at y. */
static void swatch(struct kvp_buf *b, const struct layout *lay, uint32_t e, double x, double y)
{
    const char *dash = dashes[(e / N_COLORS) % 3];

    switch (lay->legend[e]) {
        case ENTRY_SERIES:
            kvp_buf_printf(
                b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2.5\"%s%s%s/>\n",
                x, y - 4, x + 28, y - 4, palette[e % N_COLORS], *dash ? " stroke-dasharray=\"" : "", dash,
                *dash ? "\"" : "");
            break;
        case ENTRY_WEIGHTS:
            if (lay->band)
                kvp_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"28\" height=\"12\" fill=\"#d9d9d9\"/>\n", x,
                               y - 10);
            else
                kvp_svg_line(b, x, y - 4, x + 28, y - 4,
                             "stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"2 4\"");
            break;
        case ENTRY_RESERVE:
            kvp_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"28\" height=\"12\" fill=\"#9e9e9e\"/>\n", x, y - 10);
            break;
        case ENTRY_CAPACITY:
            kvp_svg_line(b, x, y - 4, x + 28, y - 4,
                         lay->usable ? "stroke=\"#b00\" stroke-width=\"1\""
                                     : "stroke=\"#b00\" stroke-width=\"2\" stroke-dasharray=\"8 4\"");
            break;
        case ENTRY_USABLE:
            kvp_svg_line(b, x, y - 4, x + 28, y - 4, "stroke=\"#b00\" stroke-width=\"2\" stroke-dasharray=\"8 4\"");
            break;
    }
}

/* The legend under the plot: a swatch and a label per entry. */
static void draw_legend(struct kvp_buf *b, const struct kvp_chart *c, const struct layout *lay)
{
    char lab[256];

    for (uint32_t e = 0; e < lay->n_legend; e++) {
        double x = PLOT_L + (e % lay->cols) * LEGEND_COL, y = PLOT_T + PLOT_H + 64 + (e / lay->cols) * LEGEND_ROW;
        swatch(b, lay, e, x, y);
        legend_label(c, lay, e, lab, sizeof lab);
        kvp_svg_text(b, x + 36, y, "class=\"legend\"", lab);
    }
}

enum kvp_status kvp_chart_svg(const struct kvp_chart *c, struct kvp_buf *b, struct kvp_error *err)
{
    struct layout lay;

    if (c->n_x == 0 || c->n_series == 0)
        return kvp_fail(err, KVP_ERR_USAGE, "a chart needs contexts and at least one series");
    chart_layout(c, &lay);
    kvp_svg_begin(b, W, lay.h,
                  ".title { font-size: 18px; font-weight: bold; fill: #111; }\n"
                  ".sub { font-size: 13px; fill: #555; }\n.legend { font-size: 13px; fill: #222; }\n"
                  ".cap { font-size: 12px; fill: #b00; }\n");
    kvp_svg_text(b, PLOT_L, 28, "class=\"title\"", c->title);
    kvp_svg_text(b, PLOT_L, 50, "class=\"sub\"", c->subtitle);
    draw_axes(b, &lay);
    draw_weights(b, c, &lay);
    draw_series(b, c, &lay);
    draw_legend(b, c, &lay);
    return kvp_svg_end(b, err);
}
