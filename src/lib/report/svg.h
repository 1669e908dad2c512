/* svg.h -- internal: the SVG scaffolding the charts share (chart.c's memory
 * against context, sim_svg.c's KV occupancy over time), so that the two read
 * as one set: the document and its style, text, lines, the plot area's frame
 * and grid, the 1-2-5 tick step. Everything is written into a kvp_buf with
 * coordinates to one decimal, so the output is deterministic to the byte. */
#ifndef KVPLAN_SVG_H
#define KVPLAN_SVG_H

#include <stdbool.h>

#include "kvplan/error.h"
#include "kvplan/render.h"

/* The plot area, px: left, top, width, height. */
struct kvp_svg_area {
    double l, t, w, h;
};

/* The XML declaration, the <svg> element of w x h px, the style (the shared
 * classes grid, frame, tick and axis, then `style`, the chart's own rules)
 * and a white background. */
void kvp_svg_begin(struct kvp_buf *b, double w, double h, const char *style);
/* Close the document; KVP_ERR_NOMEM when b ran out of memory on the way. */
enum kvp_status kvp_svg_end(struct kvp_buf *b, struct kvp_error *err);

/* <text> at (x, y) with attributes attrs, s escaped. */
void kvp_svg_text(struct kvp_buf *b, double x, double y, const char *attrs, const char *s);
/* <line> from (x1, y1) to (x2, y2) with attributes attrs. */
void kvp_svg_line(struct kvp_buf *b, double x1, double y1, double x2, double y2, const char *attrs);
/* <rect> at (x, y), w x h, with attributes attrs. */
void kvp_svg_rect(struct kvp_buf *b, double x, double y, double w, double h, const char *attrs);

/* A grid line across area a, horizontal at y = at or vertical at x = at, and
 * its tick label at (lx, ly) with text attributes attrs. */
void kvp_svg_grid(struct kvp_buf *b, const struct kvp_svg_area *a, bool horizontal, double at, double lx, double ly,
                  const char *attrs, const char *label);
/* The frame around area a. */
void kvp_svg_frame(struct kvp_buf *b, const struct kvp_svg_area *a);

/* A 1-2-5 step giving about six ticks from 0 up to top (1 when top is not positive). */
double kvp_svg_tick_step(double top);

#endif
