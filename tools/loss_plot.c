/* The loss curve of a training run, as CSV and as an SVG line chart any browser opens. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void loss_log_add(loss_log *l, int64_t step, double loss, double val, double lr) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 256;
        int64_t *s = realloc(l->step, (size_t)cap * sizeof *s);
        if (s) l->step = s;
        double *a = realloc(l->loss, (size_t)cap * sizeof *a);
        if (a) l->loss = a;
        double *b = realloc(l->val, (size_t)cap * sizeof *b);
        if (b) l->val = b;
        double *c = realloc(l->lr, (size_t)cap * sizeof *c);
        if (c) l->lr = c;
        if (!s || !a || !b || !c) return; /* drop the point rather than fail training */
        l->cap = cap;
    }
    l->step[l->n] = step;
    l->loss[l->n] = loss;
    l->val[l->n] = val;
    l->lr[l->n] = lr;
    l->n++;
}

void loss_log_free(loss_log *l) {
    free(l->step);
    free(l->loss);
    free(l->val);
    free(l->lr);
}

int loss_log_write_csv(const loss_log *l, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "step,loss,val_loss,lr\n");
    for (int64_t i = 0; i < l->n; i++) {
        fprintf(f, "%lld,%.6f,", (long long)l->step[i], l->loss[i]);
        if (!isnan(l->val[i])) fprintf(f, "%.6f", l->val[i]);
        fprintf(f, ",%.6g\n", l->lr[i]);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* The number at *p, *p moved past it; with allow_empty an empty field (',' or end of line next) is NAN. */
static int csv_double(const char **p, int allow_empty, double *out) {
    const char *q = *p;
    if ((*q == ',' || *q == '\n' || *q == '\r' || !*q) && allow_empty) {
        *out = NAN;
        return 1;
    }
    char *end = NULL;
    *out = strtod(q, &end);
    if (end == q) return 0;
    *p = end;
    return 1;
}

int loss_log_read_csv(loss_log *l, const char *path, int64_t upto, int64_t *bad_line) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int64_t n = 0, n0 = l->n, prev = 0;
    int rc = 0;
    *bad_line = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = -2;
            break;
        } /* no row is this long */
        if (n == 1) {
            if (strncmp(line, "step,loss,val_loss,lr", 21) != 0 || (line[21] != '\n' && line[21] != '\r')) {
                rc = -2;
                break;
            }
            continue;
        }
        char *end = NULL;
        long long step = strtoll(line, &end, 10);
        const char *p = end;
        double loss, val, lr;
        if (end == line || *p++ != ',' || !csv_double(&p, 0, &loss) || *p++ != ',' || !csv_double(&p, 1, &val) ||
            *p++ != ',' || !csv_double(&p, 0, &lr) || (*p != '\n' && *p != '\r' && *p != '\0') || step <= prev) {
            rc = -2;
            break;
        }
        prev = step;
        if (step <= upto) loss_log_add(l, step, loss, val, lr);
    }
    if (!rc && ferror(f)) rc = -1;
    if (rc == -2) *bad_line = n;
    if (rc) l->n = n0; /* all or nothing: a half-read history would draw a misleading curve */
    fclose(f);
    return rc;
}

int loss_log_write_svg(const loss_log *l, const char *path, const char *title) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const double W = 800, H = 480, L = 70, R = 20, T = 40, B = 50;
    double lo = INFINITY, hi = -INFINITY;
    int64_t s0 = l->n ? l->step[0] : 0, s1 = l->n ? l->step[l->n - 1] : 1;
    if (s1 <= s0) s1 = s0 + 1;
    for (int64_t i = 0; i < l->n; i++) {
        lo = fmin(lo, l->loss[i]);
        hi = fmax(hi, l->loss[i]);
        if (!isnan(l->val[i])) lo = fmin(lo, l->val[i]), hi = fmax(hi, l->val[i]);
    }
    if (!(hi > lo)) lo = 0, hi = 1;
    double pad = (hi - lo) * 0.05;
    lo -= pad;
    hi += pad;
#define X(s) (L + (W - L - R) * (double)((s)-s0) / (double)(s1 - s0))
#define Y(v) (T + (H - T - B) * (1.0 - ((v)-lo) / (hi - lo)))
    fprintf(
        f,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" font-size=\"12\">\n",
        W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%g\" y=\"24\" font-size=\"15\">%s</text>\n", L, title);
    for (int k = 0; k <= 5; k++) {
        double v = lo + (hi - lo) * k / 5.0, y = Y(v);
        fprintf(f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y, W - R, y);
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", L - 6, y + 4, v);
        int64_t s = s0 + (int64_t)((double)(s1 - s0) * k / 5.0);
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%lld</text>\n", X(s), H - B + 18, (long long)s);
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2, H - 10);
    fprintf(f,
            "<text x=\"16\" y=\"%g\" transform=\"rotate(-90 16 %g)\" text-anchor=\"middle\">loss (nats/token)</text>\n",
            (T + H - B) / 2, (T + H - B) / 2);
    fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.2\" points=\"");
    for (int64_t i = 0; i < l->n; i++) fprintf(f, "%.1f,%.1f ", X(l->step[i]), Y(l->loss[i]));
    fprintf(f, "\"/>\n<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\" points=\"");
    for (int64_t i = 0; i < l->n; i++)
        if (!isnan(l->val[i])) fprintf(f, "%.1f,%.1f ", X(l->step[i]), Y(l->val[i]));
    fprintf(f, "\"/>\n");
    for (int64_t i = 0; i < l->n; i++)
        if (!isnan(l->val[i]))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#d62728\"/>\n", X(l->step[i]), Y(l->val[i]));
    fprintf(f, "<text x=\"%g\" y=\"%g\" fill=\"#1f77b4\">train loss</text>\n", W - R - 160, T + 14);
    fprintf(f, "<text x=\"%g\" y=\"%g\" fill=\"#d62728\">val loss</text>\n", W - R - 70, T + 14);
    fprintf(f, "</svg>\n");
#undef X
#undef Y
    return fclose(f) == 0 ? 0 : -1;
}
