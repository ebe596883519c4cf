#!/usr/bin/python3
"""Modelled step time and scaling efficiency of data-parallel GPT-2 training
with tfc_ddp (all-reduce overlapped with backward) and with ZeRO-1
(tfc_optim_shard: reduce-scatter + all-gather after backward), for
docs/DISTRIBUTED.md, "Cost model".

    bench/dist_cost_model.py            prints the markdown table and the assumptions

Every number it prints is MODELLED. The only measured inputs are the
2-rank figures of bench/allreduce.c (MEASURED below), which fix what
libtfcore adds on top of MPI: nothing per byte (tfc/MPI busbw ratio ~1.0
from 1 MB up) and the agreement check per tfc_all_reduce call (~1 us at 2 ranks: one
small all-reduce). The network figures (latency per ring step, achieved
fraction of the line rate) and the compute throughput are assumptions,
stated in ASSUME and printed with the table.

Weak scaling: every rank keeps its own batch of TOKENS_PER_RANK tokens, so
the global batch grows with N and efficiency = step(1 rank) / step(N ranks).
"""
import math

# Measured on the 2-core VM (bench/allreduce.sh, Open MPI 4.1 over shared memory, 2 ranks).
MEASURED = {
    "mpi_4k_us": 3.4,        # bare MPI_Allreduce of 4 KB: the shared-memory latency floor
    "tfc_extra_us": 1.0,     # tfc_all_reduce minus bare MPI at 4 KB: the agreement all-reduce (+2 us before d2edb86: two)
    "busbw_gbs": 4.0,        # busbw plateau, 1-16 MB, both sides (memory-copy bound, not a network)
    "ratio_ge_1mb": 1.0,     # tfc/MPI busbw from 1 MB up (0.98-1.02 within noise)
}

ASSUME = {
    "flops_per_s": 125e12,        # per GPU: A100 bf16 peak 312 TFLOP/s at 40% model-FLOPs utilisation
    "tokens_per_rank": 8 * 1024,  # 8 sequences of 1024 tokens per rank per step
    "alpha_s": 5e-6,              # latency per ring step (one hop, software included): IB/RoCE class
    "link_efficiency": 0.8,       # achieved bus bandwidth / line rate
    "hbm_bytes_per_s": 2.0e12,    # per GPU, for the (memory-bound) AdamW step
    "bucket_bytes": 25 * 2**20,   # tfc_ddp's default bucket
    "grad_bytes_per_param": 4,    # f32 gradients (libtfcore's DDP and ZeRO reduce f32)
    "param_bytes_per_param": 4,   # f32 parameters (ZeRO-1 all-gathers them)
    "adamw_bytes_per_param": 28,  # AdamW reads p, g, m, v and writes p, m, v (f32)
}

MODELS = [("GPT-2 124M", 124_439_808), ("GPT-2 1.5B", 1_557_611_200)]
RANKS = [8, 64, 512]
LINKS_GBIT = [100, 400]


def ring_allreduce(nbytes, n, bw, alpha):
    """Ring all-reduce: 2(N-1)/N * bytes / bandwidth + 2(N-1) * latency."""
    return 2 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * alpha


def ring_half(nbytes, n, bw, alpha):
    """Ring reduce-scatter or all-gather: half an all-reduce."""
    return (n - 1) / n * nbytes / bw + (n - 1) * alpha


def small_allreduce(n, alpha):
    """A few bytes (agreement check, global norm): recursive doubling, log2(N) steps."""
    return math.ceil(math.log2(n)) * alpha


def ddp_exposed(params, n, bw, alpha, t_backward):
    """Seconds tfc_ddp_finish waits after backward: buckets become ready evenly through
    backward and are reduced one after another on the tfc_ddp thread."""
    grad = params * ASSUME["grad_bytes_per_param"]
    nb = math.ceil(grad / ASSUME["bucket_bytes"])
    end = 0.0
    total = 0.0
    for i in range(nb):
        size = min(ASSUME["bucket_bytes"], grad - i * ASSUME["bucket_bytes"])
        t = ring_allreduce(size, n, bw, alpha)  # tfc_ddp calls the raw all-reduce: no agreement per bucket
        total += t
        ready = t_backward * (i + 1) / nb
        end = max(ready, end) + t
    return total, end - t_backward, nb


def rows():
    out = []
    for name, p in MODELS:
        compute = 6 * p * ASSUME["tokens_per_rank"] / ASSUME["flops_per_s"]
        t_bwd = compute * 2 / 3  # backward is 4 of the 6 P*tokens FLOPs
        opt_full = p * ASSUME["adamw_bytes_per_param"] / ASSUME["hbm_bytes_per_s"]
        base = compute + opt_full  # one rank: no communication
        for gbit in LINKS_GBIT:
            bw = gbit / 8 * 1e9 * ASSUME["link_efficiency"]
            for n in RANKS:
                a = ASSUME["alpha_s"]
                comm, exposed, nb = ddp_exposed(p, n, bw, a, t_bwd)
                step = compute + exposed + opt_full
                mem = 16 * p  # f32 params + grads + AdamW m, v
                out.append((name, n, gbit, "DDP", compute, comm, exposed, opt_full, step, base / step, mem, nb))
                # ZeRO-1 as lib/optim/shard.c runs it: after backward, one reduce-scatter of the flat
                # gradients (agreement + norm all-reduce for clipping), update 1/N, one all-gather of params.
                rs = ring_half(p * ASSUME["grad_bytes_per_param"], n, bw, a)
                ag = ring_half(p * ASSUME["param_bytes_per_param"], n, bw, a)
                small = 2 * small_allreduce(n, a)
                zcomm = rs + ag + small
                opt_shard = opt_full / n
                zstep = compute + zcomm + opt_shard
                zmem = 8 * p + 8 * p / n
                out.append((name, n, gbit, "ZeRO-1", compute, zcomm, zcomm, opt_shard, zstep, base / zstep, zmem, 1))
    return out


def calibration():
    """The model's all-reduce formula against the 2-rank measurement (shared memory)."""
    a = MEASURED["mpi_4k_us"] * 1e-6 / 2  # 2(N-1) = 2 steps at N = 2
    bw = MEASURED["busbw_gbs"] * 1e9
    lines = []
    for mb in (1, 16):
        t = ring_allreduce(mb * 2**20, 2, bw, a)
        lines.append("%2d MB on 2 ranks: model %.2f ms with alpha = %.1f us, busbw = %.1f GB/s" % (mb, t * 1e3, a * 1e6, bw / 1e9))
    return lines


def main():
    print("Assumed: %.0f TFLOP/s per GPU, %d tokens per rank per step, %.0f us per ring step, "
          "%.0f%% of line rate achieved, %.1f TB/s memory for AdamW, %d MiB DDP buckets, f32 gradients and parameters."
          % (ASSUME["flops_per_s"] / 1e12, ASSUME["tokens_per_rank"], ASSUME["alpha_s"] * 1e6,
             ASSUME["link_efficiency"] * 100, ASSUME["hbm_bytes_per_s"] / 1e12, ASSUME["bucket_bytes"] >> 20))
    print("Measured (2 ranks, shared memory): tfc/MPI busbw %.2f from 1 MB up; +%.1f us per tfc_all_reduce call "
          "(the agreement check, not paid by tfc_ddp buckets)." % (MEASURED["ratio_ge_1mb"], MEASURED["tfc_extra_us"]))
    for line in calibration():
        print("Calibration: " + line)
    print()
    print("| model | ranks | link | mode | compute ms | comm ms | exposed ms | optim ms | step ms | efficiency | state GB/rank |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (name, n, gbit, mode, compute, comm, exposed, opt, step, eff, mem, nb) in rows():
        print("| %s | %d | %d Gb/s | %s | %.0f | %.0f | %.0f | %.1f | %.0f | %.0f%% | %.1f |"
              % (name, n, gbit, mode, compute * 1e3, comm * 1e3, exposed * 1e3, opt * 1e3, step * 1e3, eff * 100,
                 mem / 1e9))


if __name__ == "__main__":
    main()
