/* sim_svg.c -- the simulator's KV occupancy over time as a standalone SVG:
 * blocks in use (stacked by layer kind, the groups of one kind summed),
 * cached free blocks above them, the
 * pool as a line. Deterministic to the byte: the steps are bucketed into at
 * most one column per pixel, each column the bucket's highest value. The
 * scaffolding (document, style, grid, frame) is svg.c's, shared with chart.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kvplan/sim.h"
#include "svg.h"

#define W 900.0
#define H 505.0
#define L 80.0
#define R 30.0
#define T 70.0
#define B 105.0
#define COLS 800u

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};

/* Stacked layer `layer` of ng kinds (ng: the cached blocks) as one polygon:
 * its top along the columns, then its bottom back, each column the highest
 * stack of its bucket of steps. layer_of: each group's layer. */
static void stacked(struct kvp_buf *b, const struct kvp_sim_config *c, const struct kvp_sim_result *r,
                    const uint8_t *layer_of, uint32_t layer, uint32_t ng)
{
    double x1 = r->duration_s > 0 ? r->duration_s : 1, y1 = (double)r->pool_blocks, pw = W - L - R, ph = H - T - B;
    uint32_t cols = r->steps < COLS ? (uint32_t)r->steps : COLS;

    kvp_buf_printf(b, "<polygon fill=\"%s\" fill-opacity=\"%s\" stroke=\"none\" points=\"",
                   layer < ng ? palette[layer % 6] : "#bbbbbb", layer < ng ? "0.55" : "0.45");
    for (int side = 0; side < 2; side++)
        for (uint32_t k = 0; k < cols; k++) {
            uint32_t col = side ? cols - 1 - k : k;
            uint64_t lo = col * r->steps / cols, hi = (col + 1) * r->steps / cols;
            double top = 0, bottom = 0, x;
            for (uint64_t i = lo; i < hi; i++) {
                const struct kvp_sim_step *s = &r->series[i];
                double below = 0, here = layer < ng ? 0 : (double)s->cached;
                for (uint32_t g = 0; g < c->n_groups; g++) {
                    below += layer_of[g] < layer ? (double)s->used[g] : 0;
                    here += layer_of[g] == layer ? (double)s->used[g] : 0;
                }
                if (below + here > top) {
                    top = below + here;
                    bottom = below;
                }
            }
            x = L + pw * r->series[hi - 1].time_s / x1;
            kvp_buf_printf(b, "%.1f,%.1f ", x, T + ph - ph * (side ? bottom : top) / y1);
        }
    kvp_buf_printf(b, "\"/>\n");
}

enum kvp_status kvp_sim_svg(const struct kvp_sim_config *c, const struct kvp_sim_result *r, const char *title,
                            struct kvp_buf *b, struct kvp_error *err)
{
    double x1 = r->duration_s > 0 ? r->duration_s : 1, y1 = (double)r->pool_blocks, xs, ys;
    double pw = W - L - R, ph = H - T - B;
    const struct kvp_svg_area area = {L, T, pw, ph};
    uint32_t ng = 0, n_of[KVP_SIM_MAX_GROUPS] = {0};
    enum kvp_layer_kind kinds[KVP_SIM_MAX_GROUPS];
    uint8_t layer_of[KVP_SIM_MAX_GROUPS]; /* each group's stacked layer: one per kind */
    char lab[160];

    for (uint32_t g = 0; g < c->n_groups; g++) {
        uint32_t k;
        for (k = 0; k < ng && kinds[k] != c->group[g].kind; k++)
            ;
        if (k == ng)
            kinds[ng++] = c->group[g].kind;
        layer_of[g] = (uint8_t)k;
        n_of[k]++;
    }

    if (r->steps == 0 || !r->series)
        return kvp_fail(err, KVP_ERR_USAGE, "simulate: the chart needs the time series");
    xs = kvp_svg_tick_step(x1);
    ys = kvp_svg_tick_step(y1);
    kvp_svg_begin(b, W, H, ".title { font-size: 16px; font-weight: bold; fill: #111; }\n"
                           ".legend { font-size: 12px; fill: #222; }\n");
    kvp_svg_text(b, L, 28, "class=\"title\"", title);
    snprintf(lab, sizeof lab, "%s over %.2f s; times are %s", kvp_sim_unit(c->engine),
             r->duration_s, c->step.bandwidth > 0 ? "roofline lower bounds" : "from the given step-time model");
    kvp_svg_text(b, L, 48, "class=\"legend\"", lab);
    for (double v = 0; v <= x1 + 1e-9 * x1; v += xs) {
        double x = L + pw * v / x1;
        snprintf(lab, sizeof lab, "%g", v);
        kvp_svg_grid(b, &area, false, x, x - 8, T + ph + 18, "class=\"tick\"", lab);
    }
    for (double v = 0; v <= y1 + 1e-9 * y1; v += ys) {
        double y = T + ph - ph * v / y1;
        snprintf(lab, sizeof lab, "%g", v);
        kvp_svg_grid(b, &area, true, y, 8, y + 4, "class=\"tick\"", lab);
    }
    kvp_svg_text(b, L + pw / 2 - 30, T + ph + 38, "class=\"axis\"", "time (s)");
    for (uint32_t layer = 0; layer <= ng; layer++) /* the groups' kinds, then the cached blocks on top */
        stacked(b, c, r, layer_of, layer, ng);
    kvp_svg_line(b, L, T, L + pw, T, "stroke=\"#b00\" stroke-width=\"2\" stroke-dasharray=\"8 4\"");
    kvp_svg_frame(b, &area);
    for (uint32_t e = 0; e <= ng + 1; e++) {
        double x = L + (e % 3) * 260.0, y = T + ph + 60 + (e / 3) * 15.0;
        const char *color = e < ng ? palette[e % 6] : e == ng ? "#bbbbbb" : "#b00";
        if (e < ng)
            snprintf(lab, sizeof lab, "%s in use (%u group%s)", kvp_layer_kind_name(kinds[e]), n_of[e],
                     n_of[e] == 1 ? "" : "s");
        else
            snprintf(lab, sizeof lab, e == ng ? "cached, free (evictable)" : "pool: %llu",
                     (unsigned long long)r->pool_blocks);
        kvp_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"10\" fill=\"%s\"/>\n", x, y - 9, color);
        kvp_svg_text(b, x + 16, y, "class=\"legend\"", lab);
    }
    return kvp_svg_end(b, err);
}
