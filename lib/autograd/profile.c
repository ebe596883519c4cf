/* The TFC_PROFILE table (see profile.h): op name -> calls, forward and backward seconds. */
#include "autograd/profile.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ROWS 128
#define BETWEEN_STEPS "(between steps: clip, optimizer, data)"

typedef struct {
    const char *name; /* ops pass static strings */
    long calls;
    double fwd, bwd;
} prof_row;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_row g_rows[MAX_ROWS];
static int g_nrows, g_enabled = -1;
static long g_passes;
static double g_mark;        /* end of the last recorded node or backward pass */
static int g_after_backward; /* the next forward gap is between steps */

static void print_table(void);

int tfc_profile_enabled(void) {
    if (g_enabled < 0) {
        const char *e = getenv("TFC_PROFILE");
        g_enabled = e && *e && strcmp(e, "0") != 0;
        if (g_enabled) {
            g_mark = tfc_profile_now();
            atexit(print_table);
        }
    }
    return g_enabled;
}

double tfc_profile_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static prof_row *row(const char *name) {
    for (int i = 0; i < g_nrows; i++)
        if (g_rows[i].name == name || !strcmp(g_rows[i].name, name)) return &g_rows[i];
    if (g_nrows == MAX_ROWS) return NULL;
    g_rows[g_nrows].name = name;
    return &g_rows[g_nrows++];
}

void tfc_profile_forward(const char *name) {
    double t = tfc_profile_now();
    pthread_mutex_lock(&g_lock);
    prof_row *r = row(g_after_backward ? BETWEEN_STEPS : name);
    if (r) r->fwd += t - g_mark;
    r = row(name);
    if (r) r->calls++;
    g_after_backward = 0;
    g_mark = t;
    pthread_mutex_unlock(&g_lock);
}

void tfc_profile_backward_pass(int begin) {
    pthread_mutex_lock(&g_lock);
    if (!begin) {
        g_passes++;
        g_after_backward = 1;
    }
    g_mark = tfc_profile_now();
    pthread_mutex_unlock(&g_lock);
}

void tfc_profile_backward(const char *name, double secs) {
    pthread_mutex_lock(&g_lock);
    prof_row *r = row(name);
    if (r) r->bwd += secs;
    pthread_mutex_unlock(&g_lock);
}

static int by_total(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    double tx = x->fwd + x->bwd, ty = y->fwd + y->bwd;
    return tx < ty ? 1 : tx > ty ? -1 : 0;
}

static void print_table(void) {
    pthread_mutex_lock(&g_lock);
    double total = 0;
    for (int i = 0; i < g_nrows; i++) total += g_rows[i].fwd + g_rows[i].bwd;
    qsort(g_rows, (size_t)g_nrows, sizeof *g_rows, by_total);
    long steps = g_passes > 0 ? g_passes : 1;
    fprintf(stderr, "\nTFC_PROFILE: %ld backward passes; ms per pass (the first includes warm-up)\n", g_passes);
    fprintf(stderr, "%-42s %9s %10s %10s %10s %6s\n", "op", "calls", "fwd ms", "bwd ms", "total ms", "%");
    for (int i = 0; i < g_nrows; i++) {
        const prof_row *r = &g_rows[i];
        double t = r->fwd + r->bwd;
        fprintf(stderr, "%-42s %9.1f %10.3f %10.3f %10.3f %6.1f\n", r->name, (double)r->calls / (double)steps,
                1e3 * r->fwd / (double)steps, 1e3 * r->bwd / (double)steps, 1e3 * t / (double)steps,
                total > 0 ? 100 * t / total : 0);
    }
    fprintf(stderr, "%-42s %9s %10s %10s %10.3f\n", "total", "", "", "", 1e3 * total / (double)steps);
    pthread_mutex_unlock(&g_lock);
}
