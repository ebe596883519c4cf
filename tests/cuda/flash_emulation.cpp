/*
 * The tensor-core attention kernels of cuda/attention_flash.cu, compiled
 * as host C++ and run on the CPU, against a naive double reference.
 *
 * Each CUDA thread of a block is a fiber (ucontext); __syncthreads and the
 * warp-collective instructions are barriers of the block's or the warp's
 * fibers. The PTX the kernels use is re-implemented here from the PTX ISA
 * text, independently of the kernels' addressing:
 *  - mma.m16n8k16 .bf16 (row.col, f32 accumulate): A a0..a7 at (groupID
 *    [+8 for a2,a3,a6,a7], 2·tig + (i&1) [+8 for a4..a7]), B b0..b3 at
 *    (2·tig + (i&1) [+8 for b2,b3], groupID), C/D c0..c3 at (groupID [+8 for
 *    c2,c3], 2·tig + (i&1)), groupID = lane >> 2, tig = lane % 4;
 *  - ldmatrix.x4: lanes 8i..8i+7 give the row addresses of matrix i; lane
 *    l receives row l/4, columns 2(l%4), 2(l%4)+1 of each matrix into
 *    register i, and with .trans rows 2(l%4), 2(l%4)+1 of column l/4;
 *  - cp.async 16 bytes with zero fill; run either at issue ("eager") or at
 *    the thread's next wait_group ("deferred"), the two extremes of when a
 *    copy can land;
 *  - three fiber schedules: all warps in step, and one warp at a time as
 *    far as it gets (first to last, last to first). Every case runs under
 *    all six combinations and must give identical bits: a missing wait or
 *    barrier lets a warp read a tile another warp has not loaded yet or
 *    has already replaced.
 * Shared memory starts as 0xFF bytes (bf16 NaN), so a read of a byte no
 * copy wrote shows up as NaN; shared accesses are bounds-checked against
 * the launch's dynamic size, global reads against the input buffers.
 *
 * What this checks: fragment layouts, ldmatrix addressing and swizzles,
 * tile bookkeeping, masking, the online softmax and the backward
 * recurrences of the real kernel source. What it cannot: timing, real
 * bank conflicts, the hardware's accumulation order, compiler behaviour
 * (the module's nvcc build), anything about the device itself. Run by
 * tests/cuda/flash-emulation.sh.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

/* ---- what the kernels need from CUDA ---- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct emu_dim3 {
    unsigned x, y, z;
};
struct float2 {
    float x, y;
};
struct __nv_bfloat16 {
    uint16_t x;
};
struct __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
typedef __nv_bfloat16 bf16;

static uint16_t emu_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float emu_bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {{emu_f2bf(a)}, {emu_f2bf(b)}}; }
static float2 __bfloat1622float2(__nv_bfloat162 h) { return {emu_bf2f(h.x.x), emu_bf2f(h.y.x)}; }

/* ---- fibers ---- */

enum { RUN, AT_WARP, AT_BLOCK, DONE };
struct emu_fiber {
    ucontext_t ctx;
    emu_dim3 tid;
    int state;
    std::vector<char> stack;
    std::vector<uint32_t> pend_dst;
    std::vector<const void *> pend_src;
    std::vector<char> pend_full;
};
static emu_fiber g_f[128];
static emu_fiber *g_cur;
static ucontext_t g_sched;
static emu_dim3 g_block_idx, g_grid_dim, g_block_dim;
static std::function<void()> g_body;
static int g_failed;

#define threadIdx (g_cur->tid)
#define blockIdx g_block_idx
#define gridDim g_grid_dim
#define blockDim g_block_dim

static void emu_wait(int state) {
    g_cur->state = state;
    swapcontext(&g_cur->ctx, &g_sched);
}
static void __syncthreads() { emu_wait(AT_BLOCK); }

/* Exchange slots of each warp's lanes for the collectives. */
static uint32_t g_xu[4][32][8];
static float g_xf[4][32];

static float __shfl_xor_sync(unsigned, float v, int m) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    g_xf[w][l] = v;
    emu_wait(AT_WARP);
    float r = g_xf[w][l ^ m];
    emu_wait(AT_WARP);
    return r;
}
static float tfcu_warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* ---- shared and global memory ---- */

alignas(128) static unsigned char g_smem[232 * 1024];
static size_t g_smem_size;
static int g_eager;
/* Fiber order: 0 all warps in step, 1 warp 0 runs ahead first, 2 the last warp does. */
static int g_schedule;
/* The forward's 64-row variant for D 64 (TFC_CUDA_FLASH_FWD_ROWS=64 in the module). */
static int g_fwd_rows64;
struct emu_range {
    const void *p;
    size_t n;
};
static std::vector<emu_range> g_inputs;

#define FA_SHARED(name) unsigned char *name = g_smem

static void emu_fail(const char *what, unsigned long long a) {
    if (g_failed++ < 10)
        fprintf(stderr, "FAIL: %s (%llu) in block (%u, %u) thread %u\n", what, a, g_block_idx.x, g_block_idx.y,
                g_cur ? g_cur->tid.x : 0u);
}
static void smem_check(uint32_t a, uint32_t n, uint32_t align) {
    if (a % align || a + n > g_smem_size) emu_fail("shared access out of bounds or misaligned", a);
}
static uint32_t fa_smem(const void *p) { return (uint32_t)((const unsigned char *)p - g_smem); }

static void cp_do(uint32_t dst, const void *src, bool full) {
    smem_check(dst, 16, 16);
    if (dst + 16 > g_smem_size) return;
    if (!full) {
        memset(g_smem + dst, 0, 16);
        return;
    }
    bool ok = false;
    for (const emu_range &r : g_inputs)
        if ((const char *)src >= (const char *)r.p && (const char *)src + 16 <= (const char *)r.p + r.n) ok = true;
    if (((uintptr_t)src & 15) != 0) ok = false;
    if (!ok) {
        emu_fail("cp.async source outside the inputs or misaligned", (unsigned long long)(uintptr_t)src);
        return;
    }
    memcpy(g_smem + dst, src, 16);
}
static void fa_cp16(uint32_t dst, const void *src, bool full) {
    if (g_eager) return cp_do(dst, src, full);
    g_cur->pend_dst.push_back(dst), g_cur->pend_src.push_back(src), g_cur->pend_full.push_back(full);
}
static void fa_cp_commit() {}
static void fa_cp_wait_all() {
    for (size_t i = 0; i < g_cur->pend_dst.size(); i++)
        cp_do(g_cur->pend_dst[i], g_cur->pend_src[i], g_cur->pend_full[i]);
    g_cur->pend_dst.clear(), g_cur->pend_src.clear(), g_cur->pend_full.clear();
}

static uint16_t sm16(uint32_t a) {
    smem_check(a, 2, 2);
    uint16_t v = 0;
    if (a + 2 <= g_smem_size) memcpy(&v, g_smem + a, 2);
    return v;
}

static void ldsm(uint32_t (&r)[4], uint32_t addr, bool trans) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    g_xu[w][l][0] = addr;
    emu_wait(AT_WARP);
    for (int i = 0; i < 4; i++) {
        if (!trans) {
            uint32_t row = g_xu[w][8 * i + (l >> 2)][0];
            smem_check(row, 16, 16);
            r[i] = (uint32_t)sm16(row + (l & 3) * 4) | (uint32_t)sm16(row + (l & 3) * 4 + 2) << 16;
        } else {
            uint32_t r0 = g_xu[w][8 * i + 2 * (l & 3)][0], r1 = g_xu[w][8 * i + 2 * (l & 3) + 1][0];
            smem_check(r0, 16, 16), smem_check(r1, 16, 16);
            r[i] = (uint32_t)sm16(r0 + (l >> 2) * 2) | (uint32_t)sm16(r1 + (l >> 2) * 2) << 16;
        }
    }
    emu_wait(AT_WARP);
}
static void fa_ldsm4(uint32_t (&r)[4], uint32_t addr) { ldsm(r, addr, false); }
static void fa_ldsm4_t(uint32_t (&r)[4], uint32_t addr) { ldsm(r, addr, true); }

static float half_of(uint32_t reg, int hi) { return emu_bf2f((uint16_t)(hi ? reg >> 16 : reg & 0xffff)); }

static void fa_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    for (int i = 0; i < 4; i++) g_xu[w][l][i] = a[i];
    g_xu[w][l][4] = b0, g_xu[w][l][5] = b1;
    emu_wait(AT_WARP);
    /* A[r][k]: a_i with row groupID (+8) and col 2 tig + (i & 1) (+8); register j holds a_{2j}, a_{2j+1}. */
    auto A_ = [&](int r, int k) {
        int lane = (r & 7) * 4 + (k & 7) / 2, reg = (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
        return half_of(g_xu[w][lane][reg], k & 1);
    };
    auto B_ = [&](int k, int n) {
        int lane = n * 4 + (k & 7) / 2;
        return half_of(g_xu[w][lane][k >= 8 ? 5 : 4], k & 1);
    };
    int g = l >> 2, t = l & 3;
    for (int e = 0; e < 4; e++) {
        int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        float acc = d[e];
        for (int k = 0; k < 16; k++) acc += A_(row, k) * B_(k, col);
        d[e] = acc;
    }
    emu_wait(AT_WARP);
}

/* ex2.approx.ftz: the emulation takes the exact 2^x. */
static float fa_exp2(float x) { return exp2f(x); }

/* ---- the kernels ---- */

#define TFCU_FLASH_HOST_EMULATION 1
#include "../../cuda/attention_flash.cu"

/* ---- launching ---- */

static void fiber_entry(int i) {
    g_body();
    g_f[i].state = DONE;
}

static void run_block(int nthreads) {
    for (int i = 0; i < nthreads; i++) {
        emu_fiber &f = g_f[i];
        f.stack.resize(256 * 1024);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = &g_sched;
        makecontext(&f.ctx, (void (*)())fiber_entry, 1, i);
        f.tid = {(unsigned)i, 0, 0};
        f.state = RUN;
        f.pend_dst.clear(), f.pend_src.clear(), f.pend_full.clear();
    }
    const int nw = nthreads / 32;
    for (;;) {
        if (g_schedule == 0) {
            for (int i = 0; i < nthreads; i++)
                if (g_f[i].state == RUN) {
                    g_cur = &g_f[i];
                    swapcontext(&g_sched, &g_f[i].ctx);
                }
        } else {
            /* One warp at a time, through its warp collectives, up to a block barrier or its end. */
            for (int o = 0; o < nw; o++) {
                int w = g_schedule == 1 ? o : nw - 1 - o;
                for (;;) {
                    for (int l = 0; l < 32; l++)
                        if (g_f[w * 32 + l].state == RUN) {
                            g_cur = &g_f[w * 32 + l];
                            swapcontext(&g_sched, &g_cur->ctx);
                        }
                    int at = 0;
                    for (int l = 0; l < 32; l++) at += g_f[w * 32 + l].state == AT_WARP;
                    if (at != 32) break;
                    for (int l = 0; l < 32; l++) g_f[w * 32 + l].state = RUN;
                }
            }
        }
        g_cur = NULL;
        int done = 0, block = 0, released = 0;
        for (int i = 0; i < nthreads; i++) done += g_f[i].state == DONE, block += g_f[i].state == AT_BLOCK;
        if (done == nthreads) return;
        for (int w = 0; w < nthreads / 32; w++) {
            int at = 0;
            for (int l = 0; l < 32; l++) at += g_f[w * 32 + l].state == AT_WARP;
            if (at == 32) {
                for (int l = 0; l < 32; l++) g_f[w * 32 + l].state = RUN;
                released = 1;
            }
        }
        if (!released && block == nthreads) {
            for (int i = 0; i < nthreads; i++) g_f[i].state = RUN;
            released = 1;
        }
        if (!released) {
            emu_fail("deadlock: threads wait at different barriers (or some exited)", (unsigned long long)done);
            exit(1);
        }
    }
}

static void launch(unsigned gx, unsigned gy, size_t smem, std::function<void()> body) {
    if (smem > sizeof g_smem) emu_fail("dynamic shared memory over the emulator's 232 KiB", smem);
    g_grid_dim = {gx, gy, 1}, g_block_dim = {128, 1, 1}, g_smem_size = smem;
    g_body = body;
    for (unsigned y = 0; y < gy; y++)
        for (unsigned x = 0; x < gx; x++) {
            g_block_idx = {x, y, 0};
            memset(g_smem, 0xff, sizeof g_smem);
            run_block(128);
        }
}

/* ---- the test ---- */

static std::vector<uint16_t> rnd(size_t n, uint64_t seed) {
    std::vector<uint16_t> x(n ? n : 1);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = emu_f2bf(-1.0f + 2.0f * (float)((s >> 40) * (1.0 / 16777216.0)));
    }
    return x;
}

struct result {
    std::vector<uint16_t> out, dq, dk, dv;
    std::vector<float> lse;
};

/*
 * The entries' sequence (prep, dk/dv, dq) on the host, as tfcu_flash_attention_forward/backward launch it:
 * BH query heads, BH / G kv heads (q [BH, T, HD], k and v [BH / G, S, HD]), window W (0: none).
 */
template <int HD>
static result run_flash(const std::vector<uint16_t> &q, const std::vector<uint16_t> &k, const std::vector<uint16_t> &v,
                        const std::vector<uint16_t> &dout, int BH, int G, int T, int S, float scale, int causal, int W) {
    result r;
    r.out.assign((size_t)BH * T * HD, 0xffff), r.lse.assign((size_t)BH * T, NAN);
    r.dq.assign((size_t)BH * T * HD, 0xffff), r.dk.assign((size_t)BH / G * S * HD, 0xffff);
    r.dv.assign((size_t)BH / G * S * HD, 0xffff);
    const bf16 *Q = (const bf16 *)q.data(), *K = (const bf16 *)k.data(), *V = (const bf16 *)v.data(),
               *DO = (const bf16 *)dout.data();
    const float sl2 = scale * 1.4426950408889634f;
    g_inputs = {{q.data(), q.size() * 2}, {k.data(), k.size() * 2}, {v.data(), v.size() * 2}};
    if (HD == 64 && g_fwd_rows64)
        launch((unsigned)((T + 63) / 64), (unsigned)BH, (size_t)(64 + 2 * 64) * 64 * 2,
               [&] { flash_fwd_kernel<64, 1>(Q, K, V, (bf16 *)r.out.data(), r.lse.data(), T, S, G, sl2, causal, W); });
    else
        launch((unsigned)((T + fwd_rows(HD) - 1) / fwd_rows(HD)), (unsigned)BH, fwd_smem(HD), [&] {
            flash_fwd_kernel<HD, fwd_mt(HD)>(Q, K, V, (bf16 *)r.out.data(), r.lse.data(), T, S, G, sl2, causal, W);
        });
    std::vector<float> prep((size_t)2 * BH * T);
    float *delta = prep.data(), *lse2 = delta + (size_t)BH * T;
    size_t rows = (size_t)BH * T;
    launch((unsigned)((rows + 3) / 4), 1, 0,
           [&] { flash_bwd_prep_kernel<HD>(DO, (const bf16 *)r.out.data(), r.lse.data(), delta, lse2, rows); });
    g_inputs.push_back({dout.data(), dout.size() * 2});
    launch((unsigned)((S + 63) / 64), (unsigned)(BH / G), dkdv_smem(HD), [&] {
        flash_bwd_dkdv_kernel<HD, dkdv_bq(HD)>(DO, Q, K, V, lse2, delta, (bf16 *)r.dk.data(), (bf16 *)r.dv.data(), T, S,
                                               G, scale, sl2, causal, W, false);
    });
    launch((unsigned)((T + 63) / 64), (unsigned)BH, dq_smem(HD), [&] {
        flash_bwd_dq_kernel<HD, dq_bn(HD)>(DO, Q, K, V, lse2, delta, (bf16 *)r.dq.data(), T, S, G, scale, sl2, causal,
                                           W, false);
    });
    return r;
}

/*
 * Query head bh reads kv head bh / G (Hugging Face's repeat_kv order: kv head j serves query heads jG .. jG + G - 1);
 * causal keeps j <= i + S - T, a window W > 0 also j > i + S - T - W.
 */
static void naive(const std::vector<uint16_t> &q16, const std::vector<uint16_t> &k16, const std::vector<uint16_t> &v16,
                  const std::vector<uint16_t> &do16, int BH, int G, int T, int S, int D, double scale, int causal,
                  int W, std::vector<double> &out, std::vector<double> &lse, std::vector<double> &dq,
                  std::vector<double> &dk, std::vector<double> &dv) {
    auto f = [](const std::vector<uint16_t> &x, size_t i) { return (double)emu_bf2f(x[i]); };
    out.assign((size_t)BH * T * D, 0), lse.assign((size_t)BH * T, 0), dq.assign((size_t)BH * T * D, 0);
    dk.assign((size_t)BH / G * S * D, 0), dv.assign((size_t)BH / G * S * D, 0);
    std::vector<double> p(S + 1);
    for (int bh = 0; bh < BH; bh++)
        for (int i = 0; i < T; i++) {
            const int kvh = bh / G;
            size_t qi = ((size_t)bh * T + i) * D;
            double m = -INFINITY, sum = 0, delta = 0;
            for (int j = 0; j < S; j++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += f(q16, qi + d) * f(k16, ((size_t)kvh * S + j) * D + d);
                bool seen = !causal || (j <= i + S - T && (W <= 0 || j > i + S - T - W));
                p[j] = seen ? s * scale : -INFINITY;
                m = fmax(m, p[j]);
            }
            for (int j = 0; j < S; j++) sum += m == -INFINITY ? 0 : exp(p[j] - m);
            lse[(size_t)bh * T + i] = sum > 0 ? m + log(sum) : -INFINITY;
            for (int j = 0; j < S; j++) p[j] = sum > 0 ? exp(p[j] - m) / sum : 0;
            for (int d = 0; d < D; d++) {
                double o = 0;
                for (int j = 0; j < S; j++) o += p[j] * f(v16, ((size_t)kvh * S + j) * D + d);
                out[qi + d] = o;
                delta += o * f(do16, qi + d);
            }
            for (int j = 0; j < S; j++) {
                size_t kj = ((size_t)kvh * S + j) * D;
                double g = 0;
                for (int d = 0; d < D; d++) g += f(do16, qi + d) * f(v16, kj + d);
                double ds = p[j] * (g - delta);
                for (int d = 0; d < D; d++) {
                    dq[qi + d] += scale * ds * f(k16, kj + d);
                    dk[kj + d] += scale * ds * f(q16, qi + d);
                    dv[kj + d] += p[j] * f(do16, qi + d);
                }
            }
        }
}

static int g_checks;
static void check(const char *what, const char *name, const float *got, const double *want, size_t n, double tol) {
    g_checks++;
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(want[i]) && got[i] == want[i]) continue;
        double e = fabs(got[i] - want[i]) / (1 + fabs(want[i]));
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e, wi = i;
        if (isinf(worst)) break;
    }
    if (!(worst <= tol)) {
        g_failed++;
        fprintf(stderr, "FAIL: %s %s: element %zu is %.9g, want %.9g (rel err %.3g > %.3g)\n", what, name, wi,
                (double)got[wi], want[wi], worst, tol);
    }
}
static std::vector<float> widen(const std::vector<uint16_t> &x) {
    std::vector<float> y(x.size());
    for (size_t i = 0; i < x.size(); i++) y[i] = emu_bf2f(x[i]);
    return y;
}

static void run_case(int BH, int G, int T, int S, int D, int causal, int W) {
    float scale = 1.0f / sqrtf((float)D);
    uint64_t seed = 11 + (uint64_t)T * 7 + (uint64_t)S * 3 + (uint64_t)D + (uint64_t)causal;
    const int BHkv = BH / G;
    auto q = rnd((size_t)BH * T * D, seed), k = rnd((size_t)BHkv * S * D, seed + 1),
         v = rnd((size_t)BHkv * S * D, seed + 2), dout = rnd((size_t)BH * T * D, seed + 3);
    std::vector<double> out, lse, dq, dk, dv;
    naive(q, k, v, dout, BH, G, T, S, D, scale, causal, W, out, lse, dq, dk, dv);
    /* Every (copy timing, warp schedule): any missing wait or barrier shows as a difference. */
    result r[6];
    for (int mode = 0; mode < 6; mode++) {
        g_eager = mode & 1, g_schedule = mode >> 1, g_fwd_rows64 = 0;
        r[mode] = D == 64 ? run_flash<64>(q, k, v, dout, BH, G, T, S, scale, causal, W)
                          : run_flash<128>(q, k, v, dout, BH, G, T, S, scale, causal, W);
    }
    char what[128];
    snprintf(what, sizeof what, "BH %d G %d T %d S %d D %d causal %d window %d", BH, G, T, S, D, causal, W);
    check(what, "out", widen(r[0].out).data(), out.data(), out.size(), 1.5e-2);
    check(what, "lse", r[0].lse.data(), lse.data(), lse.size(), 2e-5); /* test_cuda.c asks 2e-5 of bf16 lse */
    check(what, "dq", widen(r[0].dq).data(), dq.data(), dq.size(), 3e-2);
    check(what, "dk", widen(r[0].dk).data(), dk.data(), dk.size(), 3e-2);
    check(what, "dv", widen(r[0].dv).data(), dv.data(), dv.size(), 3e-2);
    for (int m = 1; m < 6; m++) {
        g_checks++;
        if (r[0].out != r[m].out || r[0].dq != r[m].dq || r[0].dk != r[m].dk || r[0].dv != r[m].dv ||
            memcmp(r[0].lse.data(), r[m].lse.data(), r[0].lse.size() * 4) != 0) {
            g_failed++;
            fprintf(stderr, "FAIL: %s: copies landing %s with warp schedule %d differ from the first run\n", what,
                    m & 1 ? "at issue" : "at the wait", m >> 1);
        }
    }
    if (D == 64) {
        /* The 64-row forward variant: the same values and gradients. */
        g_eager = 0, g_schedule = 1, g_fwd_rows64 = 1;
        result r64 = run_flash<64>(q, k, v, dout, BH, G, T, S, scale, causal, W);
        g_fwd_rows64 = 0;
        char w64[160];
        snprintf(w64, sizeof w64, "%s, 64-row forward", what);
        check(w64, "out", widen(r64.out).data(), out.data(), out.size(), 1.5e-2);
        check(w64, "lse", r64.lse.data(), lse.data(), lse.size(), 2e-5);
        check(w64, "dq", widen(r64.dq).data(), dq.data(), dq.size(), 3e-2);
    }
    printf("%s %s\n", g_failed ? "after" : "ok  ", what);
    fflush(stdout);
}

int main(int argc, char **argv) {
    /*
     * (BH, G, T, S, D, causal, window); "quick" keeps the first 9. G > 1: grouped-query heads (BH / G kv heads, each
     * read by G query heads; G = BH is multi-query); window > 0: a sliding window shorter than the keys, so key
     * blocks left of it are skipped and the tiles on its edge masked, with T < S as a KV cache has it.
     */
    static const int cfg[][7] = {
        {2, 1, 1, 1, 64, 1, 0},     {2, 1, 17, 17, 64, 1, 0},    {1, 1, 100, 100, 64, 1, 0}, {1, 1, 100, 100, 128, 1, 0},
        {1, 1, 70, 70, 64, 0, 0},   {1, 1, 33, 100, 64, 1, 0},   {4, 2, 70, 70, 64, 1, 0},   {3, 3, 33, 140, 64, 1, 20},
        {2, 2, 130, 130, 128, 1, 50}, {1, 1, 100, 40, 128, 1, 0}, {1, 1, 17, 33, 128, 0, 0},  {1, 1, 130, 130, 128, 1, 0},
        {1, 1, 200, 200, 64, 1, 0}, {4, 4, 200, 200, 64, 1, 64}, {2, 1, 150, 200, 64, 1, 70}, {4, 2, 100, 40, 128, 1, 7}};
    int n = argc > 1 && !strcmp(argv[1], "quick") ? 9 : (int)(sizeof cfg / sizeof cfg[0]);
    for (int c = 0; c < n; c++) run_case(cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3], cfg[c][4], cfg[c][5], cfg[c][6]);
    printf("%d checks, %d failed\n", g_checks, g_failed);
    return g_failed ? 1 : 0;
}
