/* svg.h - line charts as a standalone SVG file, written by hand (no library):
 * one or more charts side by side, each with axes, "nice" ticks (1, 2, 5 x 10^k)
 * and their labels, axis titles, and a legend naming every series.
 *
 * `ctrain time --json run.json` draws run.svg with this: per-epoch seconds per
 * device, and the training and validation loss curves.
 *
 *   double x[] = { 1, 2, 3 }, y[] = { 2.0, 1.5, 1.4 };
 *   ct_svg_series s = { "cpu", x, y, 3, 0 };
 *   ct_svg_chart c = { "Seconds per epoch", "epoch", "seconds", &s, 1, 1, 1 };
 *   ct_svg_write("run.svg", "ctrain time cnn", &c, 1);
 *
 * Text is escaped for XML (& < > " '). Points whose x or y is not finite are
 * left out (a line is broken there); a chart with no finite point says so.
 */
#ifndef CT_SVG_H
#define CT_SVG_H
#include <stdio.h>
#include "core/error.h"

typedef struct {
    const char *name;          /* the legend's label */
    const double *x, *y;       /* [n] */
    int n;
    int dashed;                /* drawn dashed (e.g. validation beside training) */
    int color;                 /* index into the palette; series of one colour belong together */
} ct_svg_series;

typedef struct {
    const char *title, *xlabel, *ylabel;
    const ct_svg_series *series;
    int n_series;
    int x_integer;             /* x values are counts (epochs): ticks at whole numbers only */
    int y_from_zero;           /* the y axis starts at 0 (for durations: small differences stay small) */
} ct_svg_chart;

/* Writes the charts side by side under a common title. */
void      ct_svg_render(FILE *f, const char *title, const ct_svg_chart *charts, int n_charts);
ct_status ct_svg_write(const char *path, const char *title, const ct_svg_chart *charts, int n_charts);
/* s with XML's special characters escaped. */
void      ct_svg_write_text(FILE *f, const char *s);
/* Up to max_ticks "nice" tick values covering [lo, hi]: *first, *step, returns the count. */
int       ct_svg_ticks(double lo, double hi, int max_ticks, double *first, double *step);

#endif
