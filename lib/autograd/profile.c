/*
 * The per-op profile table (see profile.h): op name -> calls, forward and
 * backward seconds; on through TFC_PROFILE=1 (table at exit) or
 * tfc_profile_enable (table through tfc_profile_report).
 */
#include "autograd/profile.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "tfcore/graph.h"

#define MAX_ROWS 128
#define BETWEEN_STEPS "(between steps: clip, optimizer, data)"

typedef struct {
    const char *name; /* ops pass static strings */
    long calls;
    double fwd, bwd;
} prof_row;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_row g_rows[MAX_ROWS];
static int g_nrows;
/* -1 until the environment is read; read unlocked on every recorded node, hence atomic */
static atomic_int g_enabled = -1;
static long g_passes;
static double g_mark;        /* end of the last recorded node or backward pass */
static int g_after_backward; /* the next forward gap is between steps */

static void print_table(void);

/* Read TFC_PROFILE once; a later tfc_profile_enable overrides it. */
static void read_env(void) {
    pthread_mutex_lock(&g_lock);
    if (atomic_load(&g_enabled) < 0) {
        const char *e = getenv("TFC_PROFILE");
        int on = e && *e && strcmp(e, "0") != 0;
        if (on) {
            g_mark = tfc_profile_now();
            atexit(print_table);
        }
        atomic_store(&g_enabled, on);
    }
    pthread_mutex_unlock(&g_lock);
}

int tfc_profile_enabled(void) {
    int e = atomic_load_explicit(&g_enabled, memory_order_relaxed);
    if (e < 0) {
        read_env();
        e = atomic_load(&g_enabled);
    }
    return e;
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

/* Give the time since the last backward pass to the between-steps row (caller holds g_lock). */
static void close_between_steps(double t) {
    if (!g_after_backward) return;
    prof_row *r = row(BETWEEN_STEPS);
    if (r) r->fwd += t - g_mark;
    g_after_backward = 0;
    g_mark = t;
}

void tfc_profile_forward(const char *name) {
    double t = tfc_profile_now();
    pthread_mutex_lock(&g_lock);
    if (g_after_backward) {
        close_between_steps(t);
    } else {
        prof_row *r = row(name);
        if (r) r->fwd += t - g_mark;
    }
    prof_row *r = row(name);
    if (r) r->calls++;
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

/* Append printf output to a growing string; *failed set on OOM. */
typedef struct {
    char *s;
    size_t len, cap;
    int failed;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? 2 * b->cap : 4096;
        while (cap <= b->len + (size_t)n) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/*
 * The table, rows by total time, every figure per backward pass. Empty
 * when nothing was recorded. Snapshots the rows under the lock so the
 * live table keeps its order and recording may go on.
 */
static char *format_table(void) {
    prof_row rows[MAX_ROWS];
    pthread_mutex_lock(&g_lock);
    int n = g_nrows;
    long passes = g_passes;
    memcpy(rows, g_rows, (size_t)n * sizeof *rows);
    pthread_mutex_unlock(&g_lock);
    strbuf b = {0};
    if (n == 0) {
        b.s = calloc(1, 1);
        return b.s;
    }
    double total = 0;
    for (int i = 0; i < n; i++) total += rows[i].fwd + rows[i].bwd;
    qsort(rows, (size_t)n, sizeof *rows, by_total);
    const double per = passes > 0 ? (double)passes : 1.0;
    sb_printf(&b, "backward passes: %ld; calls and ms per pass\n", passes);
    sb_printf(&b, "%-42s %9s %10s %10s %10s %6s\n", "op", "calls", "fwd ms", "bwd ms", "total ms", "%");
    for (int i = 0; i < n; i++) {
        const prof_row *r = &rows[i];
        double t = r->fwd + r->bwd;
        sb_printf(&b, "%-42s %9.1f %10.3f %10.3f %10.3f %6.1f\n", r->name, (double)r->calls / per, 1e3 * r->fwd / per,
                  1e3 * r->bwd / per, 1e3 * t / per, total > 0 ? 100 * t / total : 0);
    }
    sb_printf(&b, "%-42s %9s %10s %10s %10.3f\n", "total", "", "", "", 1e3 * total / per);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

static void print_table(void) {
    pthread_mutex_lock(&g_lock);
    close_between_steps(tfc_profile_now());
    pthread_mutex_unlock(&g_lock);
    char *s = format_table();
    if (s && *s) fprintf(stderr, "\nTFC_PROFILE (the first pass includes warm-up) — %s", s);
    free(s);
}

/* ---- public API (tfcore/graph.h) ------------------------------------------------ */

TFC_API tfc_status tfc_profile_enable(int32_t on) {
    if (on != 0 && on != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "tfc_profile_enable: on must be 0 or 1, got %d", (int)on);
    (void)tfc_profile_enabled(); /* TFC_PROFILE is read first, so it cannot override this call later */
    pthread_mutex_lock(&g_lock);
    double t = tfc_profile_now();
    if (on && !atomic_load(&g_enabled)) {
        g_mark = t; /* the first op's forward starts now, not at the last mark */
        g_after_backward = 0;
    }
    if (!on) close_between_steps(t); /* the optimizer step after the last backward is counted */
    atomic_store(&g_enabled, on);
    pthread_mutex_unlock(&g_lock);
    return TFC_OK;
}

TFC_API int32_t tfc_profile_is_enabled(void) { return tfc_profile_enabled(); }

TFC_API tfc_status tfc_profile_reset(void) {
    pthread_mutex_lock(&g_lock);
    memset(g_rows, 0, sizeof g_rows);
    g_nrows = 0;
    g_passes = 0;
    g_after_backward = 0;
    g_mark = tfc_profile_now();
    pthread_mutex_unlock(&g_lock);
    return TFC_OK;
}

TFC_API tfc_status tfc_profile_report(char **out) {
    TFC_CHECK_NOT_NULL("tfc_profile_report", out);
    char *s = format_table();
    if (!s) return tfc_err(TFC_ERR_OOM, "tfc_profile_report: out of memory");
    *out = s;
    return TFC_OK;
}
