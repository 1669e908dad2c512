/* view.c -- draws a struct tui_state with curses; never changes it.
 *
 * Layout at 80x24 (wider and taller terminals give each panel more room):
 *
 *   title                                                     ? help  q quit
 *   fields (12+ rows of 36    | memory bar per GPU, capacity, roofline,
 *   cols, scrolling; defaults | KV by layer kind
 *   dim)                      |
 *   KV vs context chart       | the derivation of the figures (x: which)
 *   status line
 *
 * The simulate view ('w') has the same frame: the workload's fields on the
 * left, the run's figures on the right, the blocks over time below them.
 *
 * Every write is clipped to the screen, so no size (even 1x1) can make a
 * draw fail; below 80x24 only a request for a bigger terminal is shown.
 */
#include <curses.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kvplan/num.h"
#include "view.h"

#define N_SEGS 5 /* the memory bar's segments (draw_bar) */

enum pair { P_TITLE = 1, P_WEIGHTS, P_KV, P_RESERVE, P_FREE, P_ERROR, P_OK, P_HEAD };

#define LEFT_W 36  /* fields and chart column, in cells */
#define LABEL_W 14 /* a field's label: its plan key (longer ones, activation_memory ..., push their value on) */
#define TUI_FIELD_ROWS 12 /* fields shown at once, at least; the list scrolls */

struct ctx {
    const struct tui_state *s;
    const struct tui_look *look;
    int rows, cols;
};

void tui_view_colors(void)
{
    use_default_colors();
    init_pair(P_TITLE, COLOR_BLACK, COLOR_CYAN);
    init_pair(P_WEIGHTS, COLOR_BLUE, -1);
    init_pair(P_KV, COLOR_GREEN, -1);
    init_pair(P_RESERVE, COLOR_YELLOW, -1);
    init_pair(P_FREE, -1, -1);
    init_pair(P_ERROR, COLOR_RED, -1);
    init_pair(P_OK, COLOR_GREEN, -1);
    init_pair(P_HEAD, COLOR_CYAN, -1);
}

static attr_t color(const struct ctx *c, enum pair p)
{
    return c->look->color ? COLOR_PAIR(p) : A_NORMAL;
}

/* printf at (y, x), clipped to w cells and to the screen. Text is ASCII. */
static void put(const struct ctx *c, int y, int x, int w, attr_t a, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void put(const struct ctx *c, int y, int x, int w, attr_t a, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int room = c->cols - x;

    if (y < 0 || y >= c->rows || x < 0 || x >= c->cols)
        return;
    if (w > room)
        w = room;
    if (w <= 0)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    attron(a);
    mvaddnstr(y, x, buf, w);
    attroff(a);
}

/* One glyph (UTF-8 or ASCII) at (y, x), if on screen. */
static void glyph(const struct ctx *c, int y, int x, attr_t a, const char *g)
{
    if (y < 0 || y >= c->rows || x < 0 || x >= c->cols)
        return;
    attron(a);
    mvaddstr(y, x, g);
    attroff(a);
}

static const char *bytes(uint64_t v, char *buf, uint32_t n)
{
    return kvp_bytes_text(v, false, buf, n);
}

static const char *grouped(uint64_t v, char *buf, uint32_t n)
{
    return kvp_count_text(v, buf, n);
}

/* ---- the fields ---- */

/* The fields that fit in h rows, scrolled to keep the selected one in view;
 * values the user did not give (the engine's defaults) are dim. */
static void draw_fields(const struct ctx *c, int y0, int h)
{
    const struct tui_state *s = c->s;
    uint32_t base, n, first = 0, sel_at;
    char v[128];

    if (h < 1)
        return;
    tui_view_fields(s, &base, &n);
    sel_at = s->field - base;
    if (n > (uint32_t)h && sel_at >= (uint32_t)h / 2)
        first = sel_at - (uint32_t)h / 2 < n - (uint32_t)h ? sel_at - (uint32_t)h / 2 : n - (uint32_t)h;
    for (uint32_t i = first; i < n && i < first + (uint32_t)h; i++) {
        uint32_t f = base + i;
        int y = y0 + (int)(i - first);
        bool sel = s->field == f;
        tui_field_value(s, f, v, sizeof v);
        if (sel && s->mode == TUI_MODE_EDIT)
            put(c, y, 0, LEFT_W, A_BOLD, "> %-*s [%s_]", LABEL_W, tui_field_label(f), s->input);
        else if (sel)
            put(c, y, 0, LEFT_W, A_REVERSE, "> %-*s %-*s", LABEL_W, tui_field_label(f), LEFT_W - LABEL_W - 3, v);
        else {
            int lw = (int)strlen(tui_field_label(f)) > LABEL_W ? (int)strlen(tui_field_label(f)) : LABEL_W;
            put(c, y, 0, LEFT_W, A_NORMAL, "  %-*s ", LABEL_W, tui_field_label(f));
            put(c, y, lw + 3, LEFT_W - lw - 3, tui_field_given(s, f) ? A_NORMAL : A_DIM, "%s", v);
        }
    }
    /* where the list goes on */
    if (first > 0)
        put(c, y0, LEFT_W - 1, 1, A_BOLD, "^");
    if (first + (uint32_t)h < n)
        put(c, y0 + h - 1, LEFT_W - 1, 1, A_BOLD, "v");
}

/* ---- the memory bars ---- */

/* One row of the memory bar: weights, KV, the reserve, free KV room, the rest
 * of the device, each cell the segment its midpoint falls in; past the
 * device's memory (a shortfall) in the error colour. */
static void draw_bar(const struct ctx *c, int y, int x, int w, const struct tui_bar *b, const char *label)
{
    const bool u = c->look->utf8;
    const struct {
        uint64_t bytes;
        enum pair pair;
        const char *glyph;
    } seg[] = {
        {b->weights, P_WEIGHTS, u ? "\xe2\x96\x88" : "#"}, /* █ */
        {b->kv, P_KV, u ? "\xe2\x96\x93" : "="},           /* ▓ */
        {b->reserve, P_RESERVE, u ? "\xe2\x96\x92" : "-"}, /* ▒ */
        {b->free, P_FREE, u ? "\xc2\xb7" : "."},            /* · */
        {b->rest, P_FREE, u ? "\xe2\x96\x91" : ":"},       /* ░ */
    };
    uint64_t scale = 0, edge[N_SEGS];
    int cells = w - (int)strlen(label) - 3;

    if (cells < 4)
        return;
    for (int i = 0; i < N_SEGS; i++)
        edge[i] = scale = kvp_sat_add(scale, seg[i].bytes);
    if (scale < b->total)
        scale = b->total;
    if (scale == 0)
        scale = 1;
    put(c, y, x, w, A_NORMAL, "%s [", label);
    for (int i = 0, k = 0; i < cells; i++) {
        long double mid = ((long double)i + 0.5L) * (long double)scale / cells;
        bool beyond = mid > (long double)b->total; /* past the GPU's memory: the shortfall */
        while (k < N_SEGS - 1 && mid >= (long double)edge[k])
            k++;
        glyph(c, y, x + (int)strlen(label) + 2 + i, color(c, beyond && k < 2 ? P_ERROR : seg[k].pair), seg[k].glyph);
    }
    put(c, y, x + (int)strlen(label) + 2 + cells, 1, A_NORMAL, "]");
}

static int draw_memory(const struct ctx *c, int y, int x, int w, int max_rows)
{
    const struct tui_state *s = c->s;
    const struct tui_look *l = c->look;
    struct tui_bar b;
    char g[4][32], label[24];
    int used = 0;
    uint32_t shown;
    bool same = s->d.engine != KVP_ENGINE_LLAMACPP; /* every rank sized alike */
    bool est;

    tui_bar_of(s, 0, &b);
    put(c, y, x, w, A_BOLD | color(c, P_HEAD), "Memory per GPU (%s each)", bytes(b.total, g[0], sizeof g[0]));
    used++;
    /* room for the bars after the legend's lines */
    shown = same ? 1 : s->d.n_gpus;
    if ((int)shown > max_rows - 4)
        shown = max_rows - 4 > 1 ? (uint32_t)(max_rows - 4) : 1;
    for (uint32_t i = 0; i < shown; i++) {
        tui_bar_of(s, i, &b);
        if (same)
            snprintf(label, sizeof label, s->d.n_gpus > 1 ? "x%-3u" : "gpu0", s->d.n_gpus);
        else
            snprintf(label, sizeof label, "gpu%-1u", i);
        draw_bar(c, y + used++, x, w, &b, label);
    }
    if (!same && shown < s->d.n_gpus)
        put(c, y + used - 1, x + w - 10, 10, A_NORMAL, " +%u more", s->d.n_gpus - shown);
    tui_bar_of(s, 0, &b);
    put(c, y + used, x, w, color(c, P_WEIGHTS), "%s weights %s", l->utf8 ? "\xe2\x96\x88" : "#",
        bytes(b.weights, g[0], sizeof g[0]));
    put(c, y + used, x + w / 2, w - w / 2, color(c, P_KV), "%s KV %s", l->utf8 ? "\xe2\x96\x93" : "=",
        bytes(b.kv, g[1], sizeof g[1]));
    used++;
    /* " est." only where the half row has room for it: the figure comes first */
    est = s->fit.reserve.activation_est || s->fit.reserve.non_torch_est || s->fit.reserve.cuda_graph_est;
    bytes(b.reserve, g[2], sizeof g[2]);
    put(c, y + used, x, w / 2, color(c, P_RESERVE), "%s reserve %s%s", l->utf8 ? "\xe2\x96\x92" : "-", g[2],
        est && (int)strlen(g[2]) + 15 <= w / 2 ? " est." : "");
    if (b.over)
        put(c, y + used, x + w / 2, w - w / 2, A_BOLD | color(c, P_ERROR), "SHORT %s",
            bytes(b.over, g[3], sizeof g[3]));
    else
        put(c, y + used, x + w / 2, w - w / 2, A_NORMAL, "%s free %s", l->utf8 ? "\xc2\xb7" : ".",
            bytes(b.free, g[3], sizeof g[3]));
    used++;
    if (!same && used < max_rows && (s->fit.host.model_layers || s->fit.host.layers)) {
        /* llama.cpp's host memory: the layers left there (-ngl, --n-cpu-moe, --no-kv-offload), as fit's device table */
        const struct kvp_device_kv *h = &s->fit.host;
        put(c, y + used, x, w, A_NORMAL, "host RAM: weights %s (%u layers), KV %s (%u), compute %s",
            bytes(h->weights_bytes, g[0], sizeof g[0]), h->model_layers, bytes(h->buffer_bytes, g[1], sizeof g[1]),
            h->layers, bytes(s->fit.host_compute, g[2], sizeof g[2]));
        used++;
    }
    if (b.rest && used < max_rows) {
        if (s->fit.util < 1.0)
            put(c, y + used, x, w, A_NORMAL, "%s outside util %.3f: %s", l->utf8 ? "\xe2\x96\x91" : ":",
                s->fit.util, bytes(b.rest, g[0], sizeof g[0]));
        else
            put(c, y + used, x, w, A_NORMAL, "%s unused %s", l->utf8 ? "\xe2\x96\x91" : ":",
                bytes(b.rest, g[0], sizeof g[0]));
        used++;
    }
    return used;
}

/* "Cannot ... this setup:" and the error's text wrapped over the rows there are. */
static int draw_error(const struct ctx *c, int y, int x, int w, int max_rows, const char *what,
                      const struct kvp_error *e)
{
    char t[KVP_ERROR_TEXT_MAX];
    const char *p = kvp_error_text(e, t, sizeof t);
    int r = 0;
    put(c, y + r++, x, w, A_BOLD | color(c, P_ERROR), "Cannot %s this setup:", what);
    while (*p && r < max_rows) {
        int n = (int)strlen(p) < w ? (int)strlen(p) : w;
        put(c, y + r++, x, n, color(c, P_ERROR), "%s", p);
        p += n;
    }
    return r;
}

static int draw_figures(const struct ctx *c, int y, int x, int w, int max_rows)
{
    const struct tui_state *s = c->s;
    const struct kvp_fit *f = &s->fit;
    char g[4][32];
    int r = 0;

    if (!s->ok)
        return draw_error(c, y, x, w, max_rows, "compute", &s->err);
    r += draw_memory(c, y, x, w, max_rows - 7 > 4 ? max_rows - 7 : 4);
    if (r >= max_rows)
        return r;
    if (f->fits)
        put(c, y + r++, x, w, A_BOLD | color(c, P_OK), "Capacity: fits, %s left",
            bytes(f->free_bytes, g[0], sizeof g[0]));
    else
        put(c, y + r++, x, w, A_BOLD | color(c, P_ERROR), "Capacity: DOES NOT FIT, %s short",
            bytes(f->short_bytes, g[0], sizeof g[0]));
    put(c, y + r++, x, w, A_NORMAL, " max concurrency %.2f at %s tokens", f->max_concurrency,
        grouped(s->d.context, g[0], sizeof g[0]));
    put(c, y + r++, x, w, A_NORMAL, " max context %s at batch %s", grouped(f->max_context, g[0], sizeof g[0]),
        grouped(tui_batch(s), g[1], sizeof g[1]));
    if (s->d.engine == KVP_ENGINE_LLAMACPP)
        put(c, y + r++, x, w, A_NORMAL, " %s cells, %s KV per token", grouped(f->cells, g[0], sizeof g[0]),
            bytes(f->kv_bytes_per_token_per_gpu, g[1], sizeof g[1]));
    else
        put(c, y + r++, x, w, A_NORMAL, " %s tokens, %s blocks of %u", grouped(f->kv_tokens, g[0], sizeof g[0]),
            grouped(f->num_blocks, g[1], sizeof g[1]), f->block_size);
    if (r < max_rows && s->have_roofline)
        put(c, y + r++, x, w, A_NORMAL, "Roofline: decode >= %.2f ms/tok, %.0f t/s", s->roof.tpot_s * 1e3,
            s->roof.tokens_per_s);
    if (r < max_rows && s->have_roofline && s->roof.host_s > 0)
        put(c, y + r++, x, w, A_NORMAL, " of it %.2f ms the host's (%s %.0f GB/s%s)", s->roof.host_s * 1e3,
            s->roof.streamed ? "copies over the link," : "CPU reads at", s->roof.streamed ? s->d.host_link / 1e9
            : s->roof.host_bandwidth / 1e9, s->roof.host_bandwidth_assumed && !s->roof.streamed ? " assumed" : "");
    if (r < max_rows && s->have_roofline)
        put(c, y + r++, x, w, A_NORMAL, " prefill of %s tokens >= %.3f s", grouped(s->d.context, g[0], sizeof g[0]),
            s->roof.ttft_s);
    if (r + 1 < max_rows) { /* the heading only with at least one row under it */
        put(c, y + r++, x, w, A_BOLD | color(c, P_HEAD), "KV by layer kind (batch %s, all GPUs)",
            grouped(tui_batch(s), g[0], sizeof g[0]));
        for (uint32_t i = 0; i < s->n_kinds && r < max_rows; i++)
            put(c, y + r++, x, w, A_NORMAL, " %-9s %3u L x %s tok = %s", kvp_layer_kind_name(s->kinds[i].kind),
                s->kinds[i].layers, grouped(s->kinds[i].tokens, g[0], sizeof g[0]),
                bytes(s->kinds[i].bytes, g[1], sizeof g[1]));
    }
    return r;
}

/* ---- the chart of KV vs context ---- */

static void short_count(uint64_t v, char *buf, size_t n)
{
    if (v >= 1048576 && v % 1048576 == 0)
        snprintf(buf, n, "%lluM", (unsigned long long)(v / 1048576));
    else if (v >= 1024)
        snprintf(buf, n, "%lluk", (unsigned long long)((v + 512) / 1024));
    else
        snprintf(buf, n, "%llu", (unsigned long long)v);
}

/* The chart's columns: the most of the TUI_CHART_POINTS contexts that leave each
 * column two cells (a bar and a gap), evenly spaced and ending at the last. */
static uint32_t chart_columns(int cells)
{
    uint32_t n = TUI_CHART_POINTS;
    while (n > 1 && ((int)n * 2 > cells || TUI_CHART_POINTS % n != 0))
        n--;
    return n;
}

/* The x axis under the columns: the first and last contexts at the ends,
 * the chosen one under a '^' at its column (in place of the last when they
 * would overlap). */
static void draw_axis(const struct ctx *c, int y, int x0, int cells, uint32_t n, uint32_t step, int col_w)
{
    const struct tui_state *s = c->s;
    char line[512], lo[24], hi[24], cx[24], at[32];
    uint32_t j = 0;
    int pos, len;

    if (cells >= (int)sizeof line)
        cells = (int)sizeof line - 1;
    while (j + 1 < n && s->chart_context[(j + 1) * step - 1] < s->d.context)
        j++; /* the first column at or past the chosen context */
    short_count(s->chart_context[step - 1], lo, sizeof lo);
    short_count(s->chart_context[n * step - 1], hi, sizeof hi);
    short_count(s->d.context, cx, sizeof cx);
    snprintf(at, sizeof at, "^%s", cx);
    memset(line, ' ', (size_t)cells);
    line[cells] = '\0';
    memcpy(line, lo, strlen(lo) < (size_t)cells ? strlen(lo) : (size_t)cells);
    pos = (int)j * col_w;
    len = (int)strlen(at);
    if (pos + len > cells - (int)strlen(hi) - 1) /* no room before the last label: it gives way */
        pos = cells - len;
    else
        memcpy(line + cells - strlen(hi), hi, strlen(hi));
    if (pos < (int)strlen(lo) + 1 && j > 0)
        pos = (int)strlen(lo) + 1;
    if (pos >= 0 && pos + len <= cells)
        memcpy(line + pos, at, (size_t)len);
    put(c, y, x0, cells, A_NORMAL, "%s", line);
}

static void draw_chart(const struct ctx *c, int y, int x, int w, int h)
{
    const struct tui_state *s = c->s;
    static const char *const eighths[] = {" ", "\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84",
                                          "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88"};
    uint64_t top = 0, budget = s->fit.kv_budget_bytes;
    char g[32];
    int plot_h = h - 3, col_w, x0, cells;
    uint32_t n, step;

    if (h < 5 || w < 24 || !s->ok || s->n_chart != TUI_CHART_POINTS)
        return;
    for (uint32_t i = 0; i < s->n_chart; i++)
        if (s->chart_kv[i] > top)
            top = s->chart_kv[i];
    /* the budget sets the scale only when it is near the curve: far above,
     * it would flatten the curve into the axis */
    if (budget > top && budget / 2 <= top)
        top = budget;
    if (top == 0)
        top = 1;
    put(c, y, x, w, A_BOLD | color(c, P_HEAD), "KV per GPU vs context (batch %llu)",
        (unsigned long long)tui_batch(s));
    bytes(top, g, sizeof g);
    x0 = x + (int)strlen(g) + 1; /* the y labels' width: the top one is the longest */
    cells = w - (x0 - x);
    n = chart_columns(cells);
    step = TUI_CHART_POINTS / n;
    col_w = cells / (int)n;
    put(c, y + 1, x, x0 - x - 1, A_NORMAL, "%s", g);
    put(c, y + plot_h, x, x0 - x - 1, A_NORMAL, "%*s", x0 - x - 1, "0");
    for (uint32_t i = 0; i < n; i++) {
        uint64_t kv = s->chart_kv[(i + 1) * step - 1];
        /* height in eighths of a row, so small steps still show in UTF-8 */
        long double frac = (long double)kv / (long double)top;
        int units = (int)(frac * plot_h * 8 + 0.5L);
        bool over = kv > budget;
        attr_t a = color(c, over ? P_ERROR : P_KV);
        for (int r = 0; r < plot_h; r++) {
            int cell = units - r * 8; /* eighths in this row, from the bottom */
            const char *gch;
            if (cell <= 0)
                continue;
            if (c->look->utf8)
                gch = eighths[cell >= 8 ? 8 : cell];
            else
                gch = cell >= 4 ? (over ? "!" : "#") : (cell > 0 ? "." : " ");
            for (int k = 0; k < col_w - (col_w > 1); k++)
                glyph(c, y + plot_h - r, x0 + (int)i * col_w + k, a, gch);
        }
    }
    /* the budget as a marker on the axis */
    if (budget > 0 && budget <= top) {
        int r = (int)((long double)budget / (long double)top * plot_h + 0.5L);
        if (r >= 1 && r <= plot_h)
            put(c, y + plot_h - r + 1, x0 - 1, 1, A_BOLD | color(c, P_ERROR), "%s", "<");
    }
    draw_axis(c, y + plot_h + 1, x0, col_w * (int)n, n, step, col_w);
    if (budget > top)
        put(c, y + plot_h + 2, x, w, A_NORMAL, "KV budget %s: off the top", bytes(budget, g, sizeof g));
    else
        put(c, y + plot_h + 2, x, w, A_NORMAL, "< KV budget %s%s", bytes(budget, g, sizeof g),
            c->look->color ? ", red: over" : c->look->utf8 ? "" : ", !: over");
}

/* ---- the simulate view ---- */

/* Seconds as ms below 10 s ("4.95 ms", "18.3 ms"), else as seconds. */
static const char *duration(double sec, char *buf, size_t n)
{
    if (sec >= 10)
        snprintf(buf, n, "%.1f s", sec);
    else
        snprintf(buf, n, sec * 1e3 < 10 ? "%.2f ms" : "%.1f ms", sec * 1e3);
    return buf;
}

static int draw_sim_figures(const struct ctx *c, int y, int x, int w, int max_rows)
{
    const struct tui_state *s = c->s;
    const struct kvp_sim_result *r = &s->sim;
    const struct kvp_sim_config *k = &s->sim_cfg;
    const char *unit = k->engine == KVP_SIM_LLAMACPP ? "cells" : "blocks";
    char g[4][32];
    int n = 0;

    if (!s->sim_ok)
        return draw_error(c, y, x, w, max_rows, "simulate", &s->sim_err);
    put(c, y + n++, x, w, A_BOLD | color(c, P_HEAD), "Simulated %s requests (%s)",
        grouped(s->work.synth.requests, g[0], sizeof g[0]),
        k->engine == KVP_SIM_LLAMACPP ? "llama.cpp slots" : "vLLM V1");
    if (k->engine == KVP_SIM_LLAMACPP)
        put(c, y + n++, x, w, A_NORMAL, " %s slots of %s cells", grouped(k->max_num_seqs, g[0], sizeof g[0]),
            grouped(k->max_model_len, g[1], sizeof g[1]));
    else
        put(c, y + n++, x, w, A_NORMAL, " pool %s blocks of %u, prefix cache %s",
            grouped(r->pool_blocks, g[0], sizeof g[0]), k->block_size, k->prefix_caching ? "on" : "off");
    put(c, y + n++, x, w, r->peak_blocks * 10 >= r->pool_blocks * 9 ? A_BOLD : A_NORMAL,
        " peak KV %s of %s %s (%.1f%%)", grouped(r->peak_blocks, g[0], sizeof g[0]),
        grouped(r->pool_blocks, g[1], sizeof g[1]), unit, 100.0 * (double)r->peak_blocks / (double)r->pool_blocks);
    put(c, y + n++, x, w, r->preemptions ? A_BOLD | color(c, P_ERROR) : color(c, P_OK), " preemptions %s",
        grouped(r->preemptions, g[0], sizeof g[0]));
    put(c, y + n++, x, w, A_NORMAL, " prefix hits %s of %s tokens", grouped(r->prefix_hit_tokens, g[0], sizeof g[0]),
        grouped(r->prompt_tokens, g[1], sizeof g[1]));
    put(c, y + n++, x, w, A_NORMAL, " TTFT p50 %s, p99 %s", duration(r->ttft.p50, g[0], sizeof g[0]),
        duration(r->ttft.p99, g[1], sizeof g[1]));
    put(c, y + n++, x, w, A_NORMAL, " TPOT p50 %s, p99 %s", duration(r->tpot.p50, g[0], sizeof g[0]),
        duration(r->tpot.p99, g[1], sizeof g[1]));
    put(c, y + n++, x, w, A_NORMAL, " %.1f tok/s over %.1f s, %s steps", r->throughput, r->duration_s,
        grouped(r->steps, g[0], sizeof g[0]));
    if (s->have_max_rate)
        put(c, y + n++, x, w, A_BOLD, " highest sustained rate %.3g requests/s", s->max_rate);
    else
        put(c, y + n++, x, w, A_NORMAL, " %s; r: highest sustained rate",
            kvp_sim_sustained(r, s->work.max_queue_s) ? "sustained" : "NOT sustained");
    if (n < max_rows)
        put(c, y + n++, x, w, A_DIM, " times: roofline lower bounds, not measured");
    return n;
}

/* Segment seg's cell: a group in use -- a glyph per run of groups of one
 * kind (the 6 sliding groups of a hybrid model alike, its full group
 * apart), a colour per group -- then cached and free. */
static const char *sim_glyph(const struct ctx *c, uint32_t seg, const struct kvp_sim_config *k, attr_t *a)
{
    static const char *const used_u[] = {"\xe2\x96\x88", "\xe2\x96\x93", "\xe2\x96\x92", "\xe2\x96\x86"};
    static const char *const used_a[] = {"#", "=", "%", "@"};
    static const enum pair used_p[] = {P_KV, P_WEIGHTS, P_RESERVE, P_HEAD};
    if (seg < k->n_groups) {
        uint32_t run = 0;
        for (uint32_t g = 1; g <= seg; g++)
            run += k->group[g].kind != k->group[g - 1].kind;
        *a = color(c, used_p[seg % 4]);
        return c->look->utf8 ? used_u[run % 4] : used_a[run % 4];
    }
    *a = seg == k->n_groups ? color(c, P_HEAD) : A_DIM;
    if (seg == k->n_groups)
        return c->look->utf8 ? "\xe2\x96\x91" : "-"; /* cached */
    return c->look->utf8 ? "\xc2\xb7" : ".";          /* free */
}

/* The blocks over time: a column per stretch of time (tui_sim_column), its
 * cells stacked from the bottom as used per group, cached, free, the pool at the top. */
static void draw_sim_chart(const struct ctx *c, int y, int x, int w, int h)
{
    const struct tui_state *s = c->s;
    const struct kvp_sim_config *k = &s->sim_cfg;
    const uint32_t segs = k->n_groups + 2;
    int plot_h = h - 3, x0 = x + 10, cols = w - 11;
    uint64_t pool = s->sim.pool_blocks ? s->sim.pool_blocks : 1;
    struct kvp_sim_step st;
    char g[32], t0[32];
    int lx;

    if (!s->sim_ok || plot_h < 2 || cols < 10)
        return;
    put(c, y, x, w, A_BOLD | color(c, P_HEAD), "KV %s over time (the busiest step of each column)",
        k->engine == KVP_SIM_LLAMACPP ? "cells" : "blocks");
    put(c, y + 1, x, 9, A_NORMAL, "%9s", grouped(pool, g, sizeof g));
    put(c, y + plot_h, x, 9, A_NORMAL, "%9s", "0");
    for (int col = 0; col < cols; col++) {
        uint64_t edge[KVP_SIM_MAX_GROUPS + 2], sum = 0;
        if (!tui_sim_column(s, (uint32_t)col, (uint32_t)cols, &st))
            return;
        for (uint32_t i = 0; i < segs; i++) {
            sum += i < k->n_groups ? st.used[i] : i == k->n_groups ? st.cached : st.free;
            edge[i] = sum;
        }
        for (int r = 0; r < plot_h; r++) {
            /* the cell's midpoint, in blocks, decides its segment */
            long double mid = ((long double)r + 0.5L) * (long double)pool / plot_h;
            uint32_t seg = 0;
            attr_t a;
            while (seg + 1 < segs && mid >= (long double)edge[seg])
                seg++;
            if (mid >= (long double)edge[segs - 1])
                continue;
            const char *gl = sim_glyph(c, seg, k, &a);
            glyph(c, y + plot_h - r, x0 + col, a, gl);
        }
    }
    /* the peak as a marker on the axis, as the fit's chart marks the budget */
    {
        int r = (int)((long double)s->sim.peak_blocks / (long double)pool * plot_h + 0.5L);
        if (r >= 1 && r <= plot_h)
            put(c, y + plot_h - r + 1, x0 - 1, 1, A_BOLD | color(c, P_ERROR), "%s", "<");
    }
    snprintf(t0, sizeof t0, "%.1f s", s->sim.series[s->sim.steps - 1].time_s);
    put(c, y + plot_h + 1, x0, cols, A_NORMAL, "0 s%*s", cols - 3, t0);
    /* the legend: the glyphs of each run of groups of one kind, then its name */
    lx = x;
    for (uint32_t i = 0, j; i < segs && lx < x + w; i = j) {
        char label[48];
        for (j = i; j < segs && (j == i || (j < k->n_groups && k->group[j].kind == k->group[i].kind)); j++) {
            attr_t a;
            const char *gl = sim_glyph(c, j, k, &a);
            glyph(c, y + plot_h + 2, lx++, a, gl);
        }
        if (i >= k->n_groups)
            snprintf(label, sizeof label, " %s  ", i == k->n_groups ? "cached" : "free");
        else if (j - i > 1)
            snprintf(label, sizeof label, " %s (%u groups)  ", kvp_layer_kind_name(k->group[i].kind), j - i);
        else
            snprintf(label, sizeof label, " %s%s  ", k->n_groups > 1 ? "" : "used, ",
                     kvp_layer_kind_name(k->group[i].kind));
        put(c, y + plot_h + 2, lx, x + w - lx, A_NORMAL, "%s", label);
        lx += (int)strlen(label);
    }
    put(c, y + plot_h + 2, lx, x + w - lx, A_NORMAL, "< peak");
}

/* ---- the derivation ---- */

static void draw_explain(const struct ctx *c, int y, int x, int w, int h)
{
    const struct tui_state *s = c->s;
    struct kvp_buf b = {0};
    uint32_t line = 0;
    int r = 1;

    static const char *const title[TUI_EXPLAIN_COUNT] = {"Derivation: capacity", "Derivation: KV size",
                                                         "Launch command"};
    put(c, y, x, w, A_BOLD | color(c, P_HEAD), "%s  x: switch  [ ]: scroll", title[s->explain]);
    tui_explain_text(s, &b);
    if (b.nomem) {
        put(c, y + 1, x, w, color(c, P_ERROR), "out of memory");
    } else if (b.len) {
        for (char *p = b.data, *nl; *p && r < h; p = nl ? nl + 1 : p + strlen(p)) {
            nl = strchr(p, '\n');
            if (line++ >= s->explain_scroll) {
                /* long formulas wrap, continued two cells in, rather than vanish at the edge */
                int n = nl ? (int)(nl - p) : (int)strlen(p), off = 0;
                while (r < h && off < n) {
                    int room = off ? w - 2 : w, take = n - off < room ? n - off : room;
                    if (room <= 0)
                        break;
                    /* break after a space when one is in the second half of the row */
                    if (off + take < n)
                        for (int k = take - 1; k > room / 2; k--)
                            if (p[off + k] == ' ') {
                                take = k + 1;
                                break;
                            }
                    put(c, y + r++, x + (off ? 2 : 0), take, A_NORMAL, "%.*s", take, p + off);
                    off += take;
                }
            }
            if (!nl)
                break;
        }
    }
    kvp_buf_release(&b);
}

/* ---- overlays ---- */

static void box_at(const struct ctx *c, int y, int x, int h, int w, const char *title)
{
    for (int r = 0; r < h; r++)
        put(c, y + r, x, w, A_NORMAL, "%*s", w, "");
    for (int i = 0; i < w; i++) {
        put(c, y, x + i, 1, A_NORMAL, "-");
        put(c, y + h - 1, x + i, 1, A_NORMAL, "-");
    }
    for (int r = 0; r < h; r++) {
        put(c, y + r, x, 1, A_NORMAL, "|");
        put(c, y + r, x + w - 1, 1, A_NORMAL, "|");
    }
    put(c, y, x + 2, w - 4, A_BOLD, " %s ", title);
}

static void draw_picker(const struct ctx *c)
{
    const struct tui_state *s = c->s;
    bool models = s->mode == TUI_MODE_PICK_MODEL;
    int w = c->cols - 8 > 70 ? 70 : c->cols - 8, h = c->rows - 4, y = 2, x = (c->cols - w) / 2;
    int list_h = h - 4;
    uint32_t first = 0;

    box_at(c, y, x, h, w, models ? "model: type to filter, or a path" : "GPU: type to filter");
    put(c, y + 1, x + 2, w - 4, A_BOLD, "> %s_", s->input);
    if (s->pick_sel >= (uint32_t)list_h)
        first = s->pick_sel - (uint32_t)list_h + 1;
    for (int r = 0; r < list_h && first + (uint32_t)r < s->n_pick; r++) {
        uint32_t i = first + (uint32_t)r;
        bool sel = i == s->pick_sel;
        char info[160] = "";
        if (models) {
            const struct kvp_model *m = s->cat->models[s->pick[i]];
            snprintf(info, sizeof info, "%s", m->hf_id);
        } else {
            char g[32];
            const struct kvp_gpu *gp = &s->gpus->gpus[s->pick[i]];
            snprintf(info, sizeof info, "%s  %s", bytes(gp->memory_bytes, g, sizeof g), gp->name);
        }
        put(c, y + 2 + r, x + 2, w - 4, sel ? A_REVERSE : A_NORMAL, "%c %-20s %s", sel ? '>' : ' ',
            tui_pick_name(s, i), info);
    }
    if (s->n_pick == 0)
        put(c, y + 2, x + 2, w - 4, A_NORMAL, models ? "no built-in model matches; Enter opens it as a path"
                                                     : "no GPU matches");
    put(c, y + h - 2, x + 2, w - 4, A_NORMAL, "Up/Down choose  Enter pick  Esc cancel  (%u shown)", s->n_pick);
}

static void draw_help(const struct ctx *c)
{
    static const char *const lines[] = {
        "Up/Down, Tab     choose a field (every `kvplan fit` option)",
        "Left/Right       change it (halve/double, previous/next)",
        "+ / -            step by one (context by 1024, sizes by 1 GiB)",
        "Enter            type a value (32k, 0.85, fp8, 80GiB); empty:",
        "                 back to the default (dim values are defaults)",
        "0-9              start typing a number on a numeric field",
        "t / p            more GPUs: tensor or pipeline parallel",
        "m, g             pick a model / a GPU (type to filter; Enter",
        "                 on the model field too)",
        "x, e             panel: capacity, KV size, launch command (e)",
        "[ ] PgUp PgDn    scroll the derivation",
        "s                save the setup as a plan for `kvplan check`",
        "w                simulate a workload on it (w, Esc: back);",
        "                 its fields are the workload's; r: max rate",
        "Esc              cancel typing; q quit",
        "",
        "Figures are per GPU, as `kvplan fit` computes them.",
        "Bar: weights, KV for the batch, reserve (activations, non-",
        "torch, CUDA graphs), free room for more KV, and the rest of",
        "the GPU, outside the engine's memory fraction (util).",
    };
    int n = (int)(sizeof lines / sizeof *lines), w = 68, h = n + 4;
    int y = (c->rows - h) / 2, x = (c->cols - w) / 2;

    box_at(c, y < 0 ? 0 : y, x < 0 ? 0 : x, h, w, "kvplan tui help (any key closes)");
    for (int i = 0; i < n; i++)
        put(c, (y < 0 ? 0 : y) + 2 + i, (x < 0 ? 0 : x) + 2, w - 4, A_NORMAL, "%s", lines[i]);
}

/* ---- the screen ---- */

static void draw_small(const struct ctx *c)
{
    char msg[160];
    int len, r = 0;
    snprintf(msg, sizeof msg, "kvplan tui needs at least %dx%d (now %dx%d): enlarge the terminal, or q to quit",
             TUI_MIN_COLS, TUI_MIN_ROWS, c->cols, c->rows);
    len = (int)strlen(msg);
    /* wrap at spaces; a word longer than the row is cut */
    for (int off = 0; off < len && r < c->rows; r++) {
        int take = len - off < c->cols ? len - off : c->cols;
        if (off + take < len)
            for (int k = take; k > 0; k--)
                if (msg[off + k] == ' ') {
                    take = k;
                    break;
                }
        put(c, r, 0, take, A_NORMAL, "%.*s", take, msg + off);
        off += take;
        while (msg[off] == ' ')
            off++;
    }
}

void tui_view_draw(const struct tui_state *s, const struct tui_look *look)
{
    struct ctx c = {s, look, LINES, COLS};
    int right_x = LEFT_W + 1, right_w, top_h, bottom_y, bottom_h, chart_w;
    struct tui_bar bar0;
    bool sim = s->view == TUI_VIEW_SIM;
    uint32_t first, n;

    erase();
    if (c.cols < TUI_MIN_COLS || c.rows < TUI_MIN_ROWS) {
        draw_small(&c);
        refresh();
        return;
    }
    right_w = c.cols - right_x;
    /* the top takes what the fields and figures need (more kinds of layers,
     * llama.cpp's bars per device), the chart and derivation the rest */
    tui_bar_of(s, 0, &bar0);
    top_h = 11 + (bar0.rest > 0) + (int)s->n_kinds + (s->d.engine == KVP_ENGINE_LLAMACPP ? (int)s->d.n_gpus - 1 : 0);
    if (top_h > c.rows - 1 - 9)
        top_h = c.rows - 1 - 9;
    /* a tall terminal shows more fields, up to half its rows */
    if (top_h < (int)tui_field_count() + 1 && top_h < c.rows / 2)
        top_h = (int)tui_field_count() + 1 < c.rows / 2 ? (int)tui_field_count() + 1 : c.rows / 2;
    if (top_h < TUI_FIELD_ROWS + 1)
        top_h = TUI_FIELD_ROWS + 1;
    bottom_y = 1 + top_h;
    bottom_h = c.rows - 1 - bottom_y;

    attron(A_BOLD | color(&c, P_TITLE) | (look->color ? 0 : A_REVERSE));
    mvhline(0, 0, ' ', c.cols);
    put(&c, 0, 1, c.cols - 28, A_BOLD | color(&c, P_TITLE) | (look->color ? 0 : A_REVERSE),
        "%s: %s on %u x %s, %s", sim ? "simulate" : "kvplan tui", s->model->name, s->d.n_gpus,
        s->gpu ? s->gpu->id : "?", kvp_engine_info(s->d.engine)->name);
    put(&c, 0, c.cols - 27, 27, A_BOLD | color(&c, P_TITLE) | (look->color ? 0 : A_REVERSE), "%s  ? help  q quit",
        sim ? "    w back" : "w simulate");
    attroff(A_BOLD | color(&c, P_TITLE) | (look->color ? 0 : A_REVERSE));

    tui_view_fields(s, &first, &n);
    if (sim) {
        /* the workload's fields and the run's figures, the chart under both */
        top_h = (int)n + 2 > 11 ? (int)n + 2 : 11;
        draw_fields(&c, 1, (int)n);
        put(&c, 1 + (int)n, 0, LEFT_W, A_DIM, "%u/%u Up/Dn, Lt/Rt, Enter: edit", s->field - first + 1, n);
        draw_sim_figures(&c, 1, right_x, right_w, top_h - 1);
        draw_sim_chart(&c, top_h, 0, c.cols, c.rows - 1 - top_h);
    } else {
        draw_fields(&c, 1, top_h - 1);
        put(&c, top_h, 0, LEFT_W, A_DIM, "%u/%u Up/Dn, Lt/Rt, Enter: edit", s->field - first + 1, n);
        draw_figures(&c, 1, right_x, right_w, top_h);
        /* the chart widens with the terminal; the derivation wraps in what is left */
        chart_w = c.cols >= 120 ? c.cols * 2 / 5 : LEFT_W;
        draw_chart(&c, bottom_y, 0, chart_w, bottom_h);
        draw_explain(&c, bottom_y, chart_w + 1, c.cols - chart_w - 1, bottom_h);
    }

    if (s->mode == TUI_MODE_SAVE)
        put(&c, c.rows - 1, 0, c.cols, A_BOLD, "save plan to: %s_   (Enter save, Esc cancel)", s->input);
    else if (s->mode == TUI_MODE_EDIT)
        put(&c, c.rows - 1, 0, c.cols, A_BOLD, "%s: %s; Enter sets (empty: default), Esc cancels",
            tui_field_label(s->field), tui_field_help(s->field));
    else if (s->mode == TUI_MODE_ASK_SPLIT)
        put(&c, c.rows - 1, 0, c.cols, A_BOLD, "%s", s->status);
    else if (s->mode == TUI_MODE_ASK_LIMIT)
        put(&c, c.rows - 1, 0, c.cols, A_BOLD,
            "the run preempted %" PRIu64
            " times; max_preemptions to assert: %s_   (Enter save, empty: none, Esc cancel)",
            s->sim.preemptions, s->input);
    else
        put(&c, c.rows - 1, 0, c.cols, s->status_error ? A_BOLD | color(&c, P_ERROR) : A_NORMAL, "%s", s->status);
    if (s->mode == TUI_MODE_PICK_MODEL || s->mode == TUI_MODE_PICK_GPU)
        draw_picker(&c);
    else if (s->mode == TUI_MODE_HELP)
        draw_help(&c);
    refresh();
}
