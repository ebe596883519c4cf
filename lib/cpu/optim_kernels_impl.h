/*
 * Per-element bodies of the optimizer kernels for one element type.
 * Included by optim_kernels.c with T and SFX defined. Each function works
 * on elements [lo, hi) of one segment; pointers are restrict so the loops
 * vectorise (the flags are loop-invariant: the compiler unswitches them).
 */
#define TFC_CAT_(a, b) a##_##b
#define TFC_CAT(a, b) TFC_CAT_(a, b)
#define FN(name) TFC_CAT(name, SFX)

static void FN(sgd_piece)(const tfc_optim_hyper *h, const tfc_optim_seg *s, int64_t lo, int64_t hi) {
    T *restrict p = (T *)s->param;
    const T *restrict g = (const T *)s->grad;
    T *restrict b = (T *)s->buf[0];
    const T sign = h->maximize ? (T)-1 : (T)1;
    const T wd = (T)s->weight_decay, neg_lr = (T)(-s->lr);
    const T mu = (T)h->momentum, one_minus_damp = (T)(1.0 - h->dampening);
    const int use_wd = s->weight_decay != 0, use_mom = h->momentum != 0, nesterov = h->nesterov,
              first = s->first;
    for (int64_t i = lo; i < hi; i++) {
        T d = sign * g[i];
        if (use_wd) d = d + wd * p[i];
        if (use_mom) {
            T bi = first ? d : b[i] * mu + one_minus_damp * d;
            b[i] = bi;
            d = nesterov ? d + mu * bi : bi;
        }
        p[i] = p[i] + neg_lr * d;
    }
}

static void FN(adam_piece)(const tfc_optim_hyper *h, const tfc_optim_seg *s, int64_t lo, int64_t hi) {
    T *restrict p = (T *)s->param;
    const T *restrict g = (const T *)s->grad;
    T *restrict m = (T *)s->buf[0];
    T *restrict v = (T *)s->buf[1];
    T *restrict vmax = (T *)s->buf[2];
    const T sign = h->maximize ? (T)-1 : (T)1;
    const T b1 = (T)h->beta1, one_minus_b1 = (T)(1.0 - h->beta1);
    const T b2 = (T)h->beta2, one_minus_b2 = (T)(1.0 - h->beta2);
    const T eps = (T)h->eps, bc2_sqrt = (T)s->bc2_sqrt, neg_step = (T)(-s->step_size);
    const T wd = (T)s->weight_decay, decay = (T)(1.0 - s->lr * s->weight_decay);
    const int l2 = !h->decoupled && s->weight_decay != 0;
    const int decoupled = h->decoupled && s->weight_decay != 0, amsgrad = h->amsgrad;
    for (int64_t i = lo; i < hi; i++) {
        T pi = p[i];
        T d = sign * g[i];
        if (decoupled) pi = pi * decay;
        if (l2) d = d + wd * pi;
        T mi = m[i] * b1 + one_minus_b1 * d;
        T vi = v[i] * b2 + (one_minus_b2 * d) * d;
        m[i] = mi;
        v[i] = vi;
        if (amsgrad) {
            T vm = vmax[i] < vi ? vi : vmax[i];
            vmax[i] = vm;
            vi = vm;
        }
        T denom = SQRT(vi) / bc2_sqrt + eps;
        p[i] = pi + (neg_step * mi) / denom;
    }
}

/* Σ (scale·x)² of x[lo, hi) with four fixed lanes: the same order however it is vectorised. */
static double FN(sumsq_piece)(const tfc_optim_seg *s, int64_t lo, int64_t hi, double scale) {
    const T *restrict x = (const T *)s->grad;
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        double x0 = (double)x[i] * scale, x1 = (double)x[i + 1] * scale;
        double x2 = (double)x[i + 2] * scale, x3 = (double)x[i + 3] * scale;
        a0 += x0 * x0;
        a1 += x1 * x1;
        a2 += x2 * x2;
        a3 += x3 * x3;
    }
    for (; i < hi; i++) {
        double xi = (double)x[i] * scale;
        a0 += xi * xi;
    }
    return (a0 + a1) + (a2 + a3);
}

static double FN(maxabs_piece)(const tfc_optim_seg *s, int64_t lo, int64_t hi) {
    const T *restrict x = (const T *)s->grad;
    double mx = 0;
    for (int64_t i = lo; i < hi; i++) {
        double a = fabs((double)x[i]);
        if (a != a) return a; /* NaN wins */
        if (a > mx) mx = a;
    }
    return mx;
}

static void FN(scale_piece)(const tfc_optim_seg *s, int64_t lo, int64_t hi, double c) {
    T *restrict x = (T *)s->grad;
    const T cc = (T)c;
    for (int64_t i = lo; i < hi; i++) x[i] = x[i] * cc;
}

#undef FN
#undef TFC_CAT
#undef TFC_CAT_
#undef T
#undef SFX
#undef SQRT
