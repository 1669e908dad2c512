/* svg.c -- the SVG scaffolding the charts share (svg.h). */
#include <math.h>

#include "svg.h"

void kvp_svg_begin(struct kvp_buf *b, double w, double h, const char *style)
{
    kvp_buf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                      "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
                   w, h, w, h);
    kvp_buf_printf(b, "<style>\n.grid { stroke: #e3e3e3; stroke-width: 1; }\n"
                      ".frame { fill: none; stroke: #555; stroke-width: 1; }\n"
                      ".tick { font-size: 12px; fill: #333; }\n.axis { font-size: 13px; fill: #222; }\n%s</style>\n",
                   style);
    kvp_buf_printf(b, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", w, h);
}

enum kvp_status kvp_svg_end(struct kvp_buf *b, struct kvp_error *err)
{
    kvp_buf_printf(b, "</svg>\n");
    if (b->nomem)
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory rendering a chart");
    return KVP_OK;
}

void kvp_svg_text(struct kvp_buf *b, double x, double y, const char *attrs, const char *s)
{
    kvp_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" %s>", x, y, attrs);
    kvp_buf_xml(b, s);
    kvp_buf_printf(b, "</text>\n");
}

void kvp_svg_line(struct kvp_buf *b, double x1, double y1, double x2, double y2, const char *attrs)
{
    kvp_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" %s/>\n", x1, y1, x2, y2, attrs);
}

void kvp_svg_rect(struct kvp_buf *b, double x, double y, double w, double h, const char *attrs)
{
    kvp_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" %s/>\n", x, y, w, h, attrs);
}

void kvp_svg_grid(struct kvp_buf *b, const struct kvp_svg_area *a, bool horizontal, double at, double lx, double ly,
                  const char *attrs, const char *label)
{
    if (horizontal)
        kvp_svg_line(b, a->l, at, a->l + a->w, at, "class=\"grid\"");
    else
        kvp_svg_line(b, at, a->t, at, a->t + a->h, "class=\"grid\"");
    kvp_svg_text(b, lx, ly, attrs, label);
}

void kvp_svg_frame(struct kvp_buf *b, const struct kvp_svg_area *a)
{
    kvp_svg_rect(b, a->l, a->t, a->w, a->h, "class=\"frame\"");
}

double kvp_svg_tick_step(double top)
{
    double raw = top / 6, mag;
    if (!(raw > 0))
        return 1;
    mag = pow(10, floor(log10(raw)));
    return (raw <= mag ? 1 : raw <= 2 * mag ? 2 : raw <= 5 * mag ? 5 : 10) * mag;
}
