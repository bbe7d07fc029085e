/* verify_report.c - the scores file, the DET curve (and its SVG picture) and
 * the JSON report of a scored trial list (formats in verify_report.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train/verify_report.h"
#include "io/json.h"
#include "io/svg.h"

/* ---- the scores file ---- */

ct_status ct_scores_write(const char *path, const float *score, const ct_trial *t, int n, const ct_corpus *c)
{
    FILE *f = fopen(path, "w");
    if (!f) return ct_fail(CT_EIO, "--scores %s: cannot write (%s); check the directory", path, strerror(errno));
    for (int k = 0; k < n; k++) {
        char a[32], b[32];
        snprintf(a, sizeof a, "utterance%d", t[k].a);
        snprintf(b, sizeof b, "utterance%d", t[k].b);
        fprintf(f, "%.9g %d %s %s\n", (double)score[k], t[k].label, c->path ? c->path[t[k].a] : a, c->path ? c->path[t[k].b] : b);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return ct_fail(CT_EIO, "--scores %s: writing failed (disk full?)", path);
    return CT_OK;
}

/* ---- the DET curve ---- */

double ct_probit(double p)
{
    /* P. J. Acklam's rational approximation (relative error 1.15e-9), then one
     * Halley step on Phi(x) - p, with Phi(x) = erfc(-x / sqrt 2) / 2. */
    static const double a[6] = { -3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00 };
    static const double b[5] = { -5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01 };
    static const double c[6] = { -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00 };
    static const double d[4] = { 7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00 };
    if (!(p > 0)) return -INFINITY;
    if (!(p < 1)) return INFINITY;
    double x, q, r;
    if (p < 0.02425) {
        q = sqrt(-2 * log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    } else if (p <= 1 - 0.02425) {
        q = p - 0.5;
        r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    } else {
        q = sqrt(-2 * log1p(-p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    }
    double e = 0.5 * erfc(-x / sqrt(2.0)) - p;
    double u = e * 2.5066282746310002 * exp(x * x / 2);   /* sqrt(2 pi) */
    return x - u / (1 + x * u / 2);
}

void ct_det_free(ct_det *d)
{
    free(d->pfa);
    free(d->pmiss);
    memset(d, 0, sizeof *d);
}

ct_status ct_det_build(ct_det *d, const float *score, const int *label, int n)
{
    memset(d, 0, sizeof *d);
    double *fpr, *fnr, *thr;
    int m;
    CT_TRY(ct_roc_points(score, label, n, &fpr, &fnr, &thr, &m));
    ct_status st = ct_eer(score, label, n, &d->eer, &d->eer_threshold);
    /* minDCF as ct_min_dcf computes it (c_miss = c_fa = 1), keeping the point */
    const double pt[CT_DET_DCF] = { 0.01, 0.05 };
    for (int j = 0; st == CT_OK && j < CT_DET_DCF; j++) {
        double best = INFINITY;
        int at = 0;
        for (int k = 0; k < m; k++) {
            double dcf = 1.0 * fnr[k] * pt[j] + 1.0 * fpr[k] * (1 - pt[j]);
            if (dcf < best) { best = dcf; at = k; }
        }
        d->p_target[j] = pt[j];
        d->dcf[j] = best / fmin(pt[j], 1 - pt[j]);
        d->dcf_threshold[j] = thr[at];
        d->dcf_pfa[j] = fpr[at];
        d->dcf_pmiss[j] = fnr[at];
    }
    /* the curve: the ROC points less the inner points of horizontal and vertical runs */
    if (st == CT_OK) {
        d->pfa = ct_malloc((size_t)m * sizeof *d->pfa, "DET curve");
        d->pmiss = ct_malloc((size_t)m * sizeof *d->pmiss, "DET curve");
        if (!d->pfa || !d->pmiss) st = CT_ENOMEM;
    }
    for (int k = 0; st == CT_OK && k < m; k++) {
        int inner = k > 0 && k + 1 < m && ((fpr[k - 1] == fpr[k] && fpr[k] == fpr[k + 1]) || (fnr[k - 1] == fnr[k] && fnr[k] == fnr[k + 1]));
        if (inner) continue;
        d->pfa[d->n] = fpr[k];
        d->pmiss[d->n] = fnr[k];
        d->n++;
    }
    /* P_miss - P_fa falls strictly along the curve: the EER lies after the last point where it is > 0 */
    while (st == CT_OK && d->eer_index + 1 < d->n && d->pmiss[d->eer_index + 1] - d->pfa[d->eer_index + 1] > 0) d->eer_index++;
    free(fpr); free(fnr); free(thr);
    if (st != CT_OK) ct_det_free(d);
    return st;
}

/* ---- its picture ---- */

enum { DET_X0 = 84, DET_Y0 = 64, DET_SIZE = 480, DET_W = 800, DET_H = 612 };

typedef struct { double lo, hi, plo, phi; } det_axes;   /* probability range of both axes, and its probits */

/* A probability's position along an axis of DET_SIZE units; 0 and 1 map far outside (clipped). */
static double det_pos(const det_axes *ax, double p)
{
    double z = p <= 0 ? ax->plo - 10 : p >= 1 ? ax->phi + 10 : ct_probit(p);
    return (z - ax->plo) / (ax->phi - ax->plo) * DET_SIZE;
}
static double det_x(const det_axes *ax, double p) { return DET_X0 + det_pos(ax, p); }
static double det_y(const det_axes *ax, double p) { return DET_Y0 + DET_SIZE - det_pos(ax, p); }
/* A marked point stays visible: a rate of 0 (or beyond the axes) is drawn on the frame. */
static double det_clamp(const det_axes *ax, double p) { return fmin(fmax(p, ax->lo), ax->hi); }

static void det_text(FILE *f, double x, double y, const char *anchor, const char *extra, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor, extra);
    ct_svg_write_text(f, s);
    fputs("</text>\n", f);
}

/* A marker: 0 circle, 1 square, 2 diamond. */
static void det_marker(FILE *f, double x, double y, int shape, const char *color)
{
    if (shape == 0) fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5.5\" fill=\"%s\" stroke=\"black\"/>\n", x, y, color);
    else if (shape == 1) fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\" stroke=\"black\"/>\n", x - 5, y - 5, color);
    else fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\" stroke=\"black\"/>\n",
                 x, y - 7, x + 7, y, x, y + 7, x - 7, y, color);
}

static void det_render(FILE *f, const ct_det *d, const char *title)
{
    /* the usual ticks; the lower end goes below 0.1 % only as far as the smallest nonzero rate needs */
    static const double ticks[] = { 0.00001, 0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                    0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.98, 0.99 };
    static const double lows[] = { 0.0005, 0.0002, 0.0001, 0.00005, 0.00002, 0.00001, 0.000005 };
    static const double highs[] = { 0.6, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995 };
    double smallest = 1;
    for (int k = 0; k < d->n; k++) {
        if (d->pfa[k] > 0 && d->pfa[k] < smallest) smallest = d->pfa[k];
        if (d->pmiss[k] > 0 && d->pmiss[k] < smallest) smallest = d->pmiss[k];
    }
    det_axes ax = { lows[0], 0, 0, 0 };
    for (size_t i = 0; i < sizeof lows / sizeof lows[0] && smallest < ax.lo; i++) ax.lo = lows[i];
    ax.plo = ct_probit(ax.lo);
    /* the upper end: 60 %, or further when a marked point lies beyond (a weak model's minDCF is at a high miss rate) */
    double need = d->eer;
    for (int j = 0; j < CT_DET_DCF; j++) need = fmax(need, fmax(d->dcf_pmiss[j], d->dcf_pfa[j]));
    double hi = highs[0];
    for (size_t i = 0; i < sizeof highs / sizeof highs[0] && ct_probit(need) + 0.25 > ct_probit(hi); i++) hi = highs[i];
    ax.hi = hi;
    ax.phi = ct_probit(hi);

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", DET_W, DET_H, DET_W, DET_H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", DET_W, DET_H);
    fprintf(f, "<defs><clipPath id=\"plot\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/></clipPath></defs>\n",
            DET_X0, DET_Y0, DET_SIZE, DET_SIZE);
    det_text(f, DET_W / 2.0, 24, "middle", " font-size=\"15\" font-weight=\"bold\"", "DET curve");
    det_text(f, DET_W / 2.0, 44, "middle", "", title ? title : "");
    char label[64];
    double last_x = -1e9, last_w = 0, last_y = 1e9;
    for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {   /* grid, ticks and their labels */
        if (ticks[i] < ax.lo * 1.01 || ticks[i] > hi * 0.99) continue;   /* none on the frame's corners */
        double x = det_x(&ax, ticks[i]), y = det_y(&ax, ticks[i]);
        snprintf(label, sizeof label, "%g", 100 * ticks[i]);
        /* a label only where it does not run into the previous one (about 6 units per character) */
        double w = 6.0 * (double)strlen(label);
        int room_x = x - last_x >= (w + last_w) / 2 + 3, room_y = last_y - y >= 13;
        if (room_x) { last_x = x; last_w = w; }
        if (room_y) last_y = y;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, DET_Y0, x, DET_Y0 + DET_SIZE);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", DET_X0, y, DET_X0 + DET_SIZE, y);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n", x, DET_Y0 + DET_SIZE, x, DET_Y0 + DET_SIZE + 5);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n", DET_X0 - 5, y, DET_X0, y);
        if (room_x) det_text(f, x, DET_Y0 + DET_SIZE + 19, "middle", "", label);
        if (room_y) det_text(f, DET_X0 - 8, y + 4, "end", "", label);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n", DET_X0, DET_Y0, DET_SIZE, DET_SIZE);
    det_text(f, DET_X0 + DET_SIZE / 2.0, DET_Y0 + DET_SIZE + 42, "middle", "", "False alarm rate (%)");
    char rot[96];
    snprintf(rot, sizeof rot, " transform=\"rotate(-90 %d %.1f)\"", DET_X0 - 50, DET_Y0 + DET_SIZE / 2.0);
    det_text(f, DET_X0 - 50, DET_Y0 + DET_SIZE / 2.0, "middle", rot, "Miss rate (%)");

    /* P_miss = P_fa, then the curve, then the marked points, all clipped to the frame */
    fprintf(f, "<g clip-path=\"url(#plot)\">\n");
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-dasharray=\"5 4\"/>\n",
            det_x(&ax, ax.lo), det_y(&ax, ax.lo), det_x(&ax, hi), det_y(&ax, hi));
    fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"");
    for (int k = 0; k < d->n; k++) {
        fprintf(f, "%.2f,%.2f ", det_x(&ax, d->pfa[k]), det_y(&ax, d->pmiss[k]));
        if (k == d->eer_index) fprintf(f, "%.2f,%.2f ", det_x(&ax, d->eer), det_y(&ax, d->eer));   /* the EER point, on the curve */
    }
    fputs("\"/>\n", f);
    static const char *dcf_color[CT_DET_DCF] = { "#2ca02c", "#ff7f0e" };
    fputs("</g>\n", f);
    for (int j = 0; j < CT_DET_DCF; j++)
        det_marker(f, det_x(&ax, det_clamp(&ax, d->dcf_pfa[j])), det_y(&ax, det_clamp(&ax, d->dcf_pmiss[j])), 1 + j, dcf_color[j]);
    det_marker(f, det_x(&ax, det_clamp(&ax, d->eer)), det_y(&ax, det_clamp(&ax, d->eer)), 0, "#d62728");

    /* the legend, beside the plot */
    double lx = DET_X0 + DET_SIZE + 24, ly = DET_Y0 + 14;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n", lx, ly, lx + 22, ly);
    det_text(f, lx + 30, ly + 4, "start", "", "DET curve");
    ly += 24;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-dasharray=\"5 4\"/>\n", lx, ly, lx + 22, ly);
    det_text(f, lx + 30, ly + 4, "start", "", "miss rate = false alarms");
    ly += 26;
    det_marker(f, lx + 11, ly, 0, "#d62728");
    snprintf(label, sizeof label, "EER %.2f%%", 100 * d->eer);
    det_text(f, lx + 30, ly + 4, "start", "", label);
    snprintf(label, sizeof label, "threshold %.4g", d->eer_threshold);
    det_text(f, lx + 30, ly + 20, "start", " fill=\"#555\"", label);
    for (int j = 0; j < CT_DET_DCF; j++) {
        ly += 42;
        det_marker(f, lx + 11, ly, 1 + j, dcf_color[j]);
        snprintf(label, sizeof label, "minDCF(p=%g) %.4f", d->p_target[j], d->dcf[j]);
        det_text(f, lx + 30, ly + 4, "start", "", label);
        snprintf(label, sizeof label, "miss %.2f%%, fa %.3f%%%s", 100 * d->dcf_pmiss[j], 100 * d->dcf_pfa[j],
                 d->dcf_pfa[j] <= 0 || d->dcf_pmiss[j] <= 0 ? " *" : "");
        det_text(f, lx + 30, ly + 20, "start", " fill=\"#555\"", label);
    }
    ly += 44;
    for (int j = 0; j < CT_DET_DCF; j++)
        if (d->dcf_pfa[j] <= 0 || d->dcf_pmiss[j] <= 0) {
            det_text(f, lx, ly, "start", " fill=\"#555\"", "* a rate of 0: drawn on the frame");
            ly += 24;
            break;
        }
    det_text(f, lx, ly, "start", " fill=\"#555\"", "normal-deviate axes:");
    det_text(f, lx, ly + 16, "start", " fill=\"#555\"", "Gaussian scores give");
    det_text(f, lx, ly + 32, "start", " fill=\"#555\"", "a straight line");
    fputs("</svg>\n", f);
}

ct_status ct_det_svg_write(const char *path, const ct_det *d, const char *title)
{
    FILE *f = fopen(path, "w");
    if (!f) return ct_fail(CT_EIO, "--det %s: cannot write (%s); check the directory", path, strerror(errno));
    det_render(f, d, title);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return ct_fail(CT_EIO, "--det %s: writing failed (disk full?)", path);
    return CT_OK;
}

/* ---- the JSON report ---- */

ct_status ct_verify_json_write(const char *path, const ct_verify_result *r, const ct_det *d, const char *model,
                               const char *data, const char *trials)
{
    FILE *f = fopen(path, "w");
    if (!f) return ct_fail(CT_EIO, "--json %s: cannot write (%s); check the directory", path, strerror(errno));
    ct_json_writer w;
    ct_json_writer_init(&w, f);
    ct_json_object_begin(&w, NULL);
    ct_json_str(&w, "model", model);
    ct_json_str(&w, "data", data);
    ct_json_str(&w, "trials", trials);
    ct_json_str(&w, "score", "-euclidean distance; higher = same speaker");
    ct_json_int(&w, "n_trials", r->n_trials);
    ct_json_int(&w, "n_same", r->n_same);
    ct_json_int(&w, "n_different", r->n_trials - r->n_same);
    ct_json_int(&w, "n_utterances", r->n_utts);
    ct_json_int(&w, "n_cut", r->n_cut);
    ct_json_num(&w, "eer", r->eer);
    ct_json_num(&w, "eer_threshold", r->eer_threshold);
    ct_json_array_begin(&w, "min_dcf");
    for (int j = 0; j < CT_DET_DCF; j++) {
        ct_json_object_begin(&w, NULL);
        ct_json_num(&w, "p_target", d->p_target[j]);
        ct_json_num(&w, "c_miss", 1);
        ct_json_num(&w, "c_fa", 1);
        ct_json_num(&w, "value", d->dcf[j]);
        if (isfinite(d->dcf_threshold[j])) ct_json_num(&w, "threshold", d->dcf_threshold[j]);
        else ct_json_str(&w, "threshold", "inf");   /* reject everything */
        ct_json_num(&w, "p_miss", d->dcf_pmiss[j]);
        ct_json_num(&w, "p_fa", d->dcf_pfa[j]);
        ct_json_object_end(&w);
    }
    ct_json_array_end(&w);
    ct_json_object_end(&w);
    ct_status st = ct_json_writer_finish(&w);
    if (fclose(f) != 0 && st == CT_OK) st = CT_EIO;
    if (st != CT_OK) return ct_fail(CT_EIO, "--json %s: writing failed (disk full?)", path);
    return CT_OK;
}

ct_status ct_verify_reports_write(const char *scores_path, const char *det_path, const char *json_path, const ct_verify_result *r,
                                  const float *score, const ct_trial *t, int n, const ct_corpus *c, const char *model,
                                  const char *data, const char *trials)
{
    if (scores_path) CT_TRY(ct_scores_write(scores_path, score, t, n, c));
    if (!det_path && !json_path) return CT_OK;
    int *label = ct_malloc((size_t)n * sizeof *label + 1, "trial labels");
    if (!label) return CT_ENOMEM;
    for (int k = 0; k < n; k++) label[k] = t[k].label;
    ct_det d;
    ct_status st = ct_det_build(&d, score, label, n);
    free(label);
    if (st != CT_OK) return st;
    char title[1024];
    snprintf(title, sizeof title, "%s on %s (%d trials)", model, trials, n);
    if (det_path) st = ct_det_svg_write(det_path, &d, title);
    if (st == CT_OK && json_path) st = ct_verify_json_write(json_path, r, &d, model, data, trials);
    ct_det_free(&d);
    return st;
}
