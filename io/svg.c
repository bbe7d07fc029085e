/* svg.c - line charts as SVG (see svg.h). Every chart is a box of CHART_W x
 * CHART_H user units; inside it the plot area leaves margins for the tick
 * labels (left, bottom), the axis titles and the chart's title. Data
 * coordinates map linearly onto the plot area, y growing upwards. */
#include <math.h>
#include <string.h>
#include "io/svg.h"

enum { CHART_W = 520, CHART_H = 360, HEADER_H = 36, M_LEFT = 72, M_RIGHT = 20, M_TOP = 34, M_BOTTOM = 52 };

static const char *PALETTE[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf" };
#define N_PALETTE ((int)(sizeof PALETTE / sizeof PALETTE[0]))

void ct_svg_write_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':  fputs("&amp;", f); break;
        case '<':  fputs("&lt;", f); break;
        case '>':  fputs("&gt;", f); break;
        case '"':  fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:   fputc(*s, f);
        }
    }
}

int ct_svg_ticks(double lo, double hi, int max_ticks, double *first, double *step)
{
    if (max_ticks < 2) max_ticks = 2;
    double rough = (hi - lo) / (max_ticks - 1);
    if (!(rough > 0)) rough = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;
    double mag = pow(10, floor(log10(rough))), norm = rough / mag;
    *step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
    *first = ceil(lo / *step - 1e-9) * *step;
    return (int)floor((hi - *first) / *step + 1e-9) + 1;
}

/* A tick label with as many decimals as the step needs. */
static void tick_label(char *buf, size_t n, double v, double step)
{
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) < step * 1e-6) v = 0;   /* no "-0" */
    if (fabs(v) >= 1e6 || decimals > 6) snprintf(buf, n, "%g", v);
    else snprintf(buf, n, "%.*f", decimals, v);
}

typedef struct {
    double x0, x1, y0, y1;          /* data range of the axes */
    double px, py, pw, ph;          /* plot area in user units */
} frame;

static double map_x(const frame *fr, double x) { return fr->px + (x - fr->x0) / (fr->x1 - fr->x0) * fr->pw; }
static double map_y(const frame *fr, double y) { return fr->py + fr->ph - (y - fr->y0) / (fr->y1 - fr->y0) * fr->ph; }

/* The finite range of the chart's data; returns 0 when there is no finite point. */
static int data_range(const ct_svg_chart *c, double *x0, double *x1, double *y0, double *y1)
{
    int any = 0;
    for (int s = 0; s < c->n_series; s++)
        for (int i = 0; i < c->series[s].n; i++) {
            double x = c->series[s].x[i], y = c->series[s].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            if (!any) { *x0 = *x1 = x; *y0 = *y1 = y; any = 1; }
            if (x < *x0) *x0 = x;
            if (x > *x1) *x1 = x;
            if (y < *y0) *y0 = y;
            if (y > *y1) *y1 = y;
        }
    return any;
}

/* Widens [*lo, *hi] to whole ticks (never empty) and returns the tick step. */
static double axis_range(double *lo, double *hi, int integer)
{
    if (*hi - *lo < 1e-12 * (fabs(*lo) + 1)) { double d = fabs(*lo) > 0 ? fabs(*lo) * 0.1 : 1; *lo -= d; *hi += d; }
    double first, step;
    ct_svg_ticks(*lo, *hi, 6, &first, &step);
    if (integer && step < 1) step = 1;
    *lo = floor(*lo / step + 1e-9) * step;
    *hi = ceil(*hi / step - 1e-9) * step;
    return step;
}

static void text_at(FILE *f, double x, double y, const char *anchor, const char *extra, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor, extra);
    ct_svg_write_text(f, s);
    fputs("</text>\n", f);
}

static void draw_axes(FILE *f, const frame *fr, const ct_svg_chart *c, double xstep, double ystep)
{
    char label[64];
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", fr->px, fr->py, fr->pw, fr->ph);
    for (double v = fr->x0; v <= fr->x1 + xstep * 1e-6; v += xstep) {
        double x = map_x(fr, v), yb = fr->py + fr->ph;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", x, yb, x, yb + 5);
        tick_label(label, sizeof label, v, xstep);
        text_at(f, x, yb + 19, "middle", "", label);
    }
    for (double v = fr->y0; v <= fr->y1 + ystep * 1e-6; v += ystep) {
        double y = map_y(fr, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", fr->px, y, fr->px + fr->pw, y);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", fr->px - 5, y, fr->px, y);
        tick_label(label, sizeof label, v, ystep);
        text_at(f, fr->px - 8, y + 4, "end", "", label);
    }
    text_at(f, fr->px + fr->pw / 2, fr->py + fr->ph + 42, "middle", "", c->xlabel ? c->xlabel : "");
    char rot[96];
    double ly = fr->py + fr->ph / 2, lx = fr->px - 54;
    snprintf(rot, sizeof rot, " transform=\"rotate(-90 %.1f %.1f)\"", lx, ly);
    text_at(f, lx, ly, "middle", rot, c->ylabel ? c->ylabel : "");
}

static void draw_series(FILE *f, const frame *fr, const ct_svg_series *s)
{
    const char *color = PALETTE[(s->color % N_PALETTE + N_PALETTE) % N_PALETTE];
    int open = 0;
    for (int i = 0; i <= s->n; i++) {
        int ok = i < s->n && isfinite(s->x[i]) && isfinite(s->y[i]);
        if (ok && !open) { fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", color, s->dashed ? " stroke-dasharray=\"6 4\"" : ""); open = 1; }
        if (ok) fprintf(f, "%.1f,%.1f ", map_x(fr, s->x[i]), map_y(fr, s->y[i]));
        if (!ok && open) { fputs("\"/>\n", f); open = 0; }
    }
    for (int i = 0; i < s->n; i++)   /* a marker on every point, so a single point shows too */
        if (isfinite(s->x[i]) && isfinite(s->y[i]))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", map_x(fr, s->x[i]), map_y(fr, s->y[i]), color);
}

static void draw_legend(FILE *f, const frame *fr, const ct_svg_chart *c)
{
    double w = 0, row = 18;
    for (int s = 0; s < c->n_series; s++) {
        double tw = 7.0 * (double)strlen(c->series[s].name ? c->series[s].name : "");
        if (tw > w) w = tw;
    }
    w += 44;
    double x = fr->px + fr->pw - w - 8, y = fr->py + 8;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#999\"/>\n",
            x, y, w, row * c->n_series + 8);
    for (int s = 0; s < c->n_series; s++) {
        const ct_svg_series *se = &c->series[s];
        double ly = y + 4 + row * s + row / 2;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", x + 6, ly, x + 32, ly,
                PALETTE[(se->color % N_PALETTE + N_PALETTE) % N_PALETTE], se->dashed ? " stroke-dasharray=\"6 4\"" : "");
        text_at(f, x + 38, ly + 4, "start", "", se->name ? se->name : "");
    }
}

static void draw_chart(FILE *f, const ct_svg_chart *c, double ox, double oy)
{
    frame fr = { 0, 1, 0, 1, ox + M_LEFT, oy + M_TOP, CHART_W - M_LEFT - M_RIGHT, CHART_H - M_TOP - M_BOTTOM };
    text_at(f, ox + CHART_W / 2.0, oy + 22, "middle", " font-weight=\"bold\"", c->title ? c->title : "");
    if (!data_range(c, &fr.x0, &fr.x1, &fr.y0, &fr.y1)) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", fr.px, fr.py, fr.pw, fr.ph);
        text_at(f, fr.px + fr.pw / 2, fr.py + fr.ph / 2, "middle", "", "no data");
        return;
    }
    if (c->y_from_zero && fr.y0 > 0) fr.y0 = 0;
    fr.y1 += (fr.y1 - fr.y0) * (0.1 + 0.1 * c->n_series);   /* headroom: the legend sits top right, above the data */
    double xstep = axis_range(&fr.x0, &fr.x1, c->x_integer), ystep = axis_range(&fr.y0, &fr.y1, 0);
    draw_axes(f, &fr, c, xstep, ystep);
    for (int s = 0; s < c->n_series; s++) draw_series(f, &fr, &c->series[s]);
    if (c->n_series > 0) draw_legend(f, &fr, c);
}

void ct_svg_render(FILE *f, const char *title, const ct_svg_chart *charts, int n_charts)
{
    int cols = n_charts < 1 ? 1 : n_charts, W = CHART_W * cols, H = CHART_H + HEADER_H;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    text_at(f, W / 2.0, 24, "middle", " font-size=\"15\" font-weight=\"bold\"", title ? title : "");
    for (int i = 0; i < n_charts; i++) draw_chart(f, &charts[i], (double)CHART_W * i, HEADER_H);
    fputs("</svg>\n", f);
}

ct_status ct_svg_write(const char *path, const char *title, const ct_svg_chart *charts, int n_charts)
{
    FILE *f = fopen(path, "w");
    if (!f) return ct_fail(CT_EIO, "%s: cannot write the picture (directory missing or not writable?)", path);
    ct_svg_render(f, title, charts, n_charts);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return ct_fail(CT_EIO, "%s: writing the picture failed (disk full?)", path);
    return CT_OK;
}
