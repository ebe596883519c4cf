#!/usr/bin/python3
"""Replay the trajectories printed by optim_trajectories with torch.optim.

    /usr/bin/python3 torch_check.py PATH/TO/optim_trajectories

For every case the same tiny MLP (same initial values, printed by the C
program) is trained with torch 1.13: backward, clip_grad_norm_(0.5), lr
from nanoGPT's get_lr (written here), SGD/Adam/AdamW step, zero_grad.
The library's lr, pre-clip norm and parameters after every step must match:
f64 to 1e-12 relative, f32 to 1e-5 (f32 rounding differs: FMA, BLAS order).
Exit 77 (meson: skipped) when torch is not importable.
"""
import math
import subprocess
import sys

try:
    import torch
except ImportError:
    print("torch not available: skipped")
    sys.exit(77)

STEPS, WARMUP, MAX_NORM, MIN_LR_FRAC = 60, 5, 0.5, 0.1


def get_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    """nanoGPT's train.py get_lr."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def parse(text):
    cases, cur = [], None
    for line in text.splitlines():
        f = line.split()
        if f[0] == "case":
            cur = {"label": f[1], "dtype": f[2], "kind": f[3], "lr": float(f[4]), "wd": float(f[5]),
                   "momentum": float(f[6]), "dampening": float(f[7]), "nesterov": bool(int(f[8])),
                   "betas": (float(f[9]), float(f[10])), "eps": float(f[11]), "amsgrad": bool(int(f[12])),
                   "maximize": bool(int(f[13])), "data": {}, "steps": []}
            cases.append(cur)
        elif f[0] == "data":
            cur["data"][f[1]] = [float(v) for v in f[3:]]
        elif f[0] == "step":
            cur["steps"].append({"lr": float(f[2]), "norm": float(f[3]), "params": []})
        elif f[0] == "param":
            cur["steps"][-1]["params"].append([float(v) for v in f[3:]])
    return cases


def rel(a, b):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return float(((a - b).abs() / b.abs().clamp(min=1.0)).max())


def replay(c):
    dt = torch.float64 if c["dtype"] == "f64" else torch.float32
    tol = 1e-12 if dt == torch.float64 else 1e-5
    d = c["data"]
    x = torch.tensor(d["x"], dtype=dt).reshape(6, 3)
    t = torch.tensor(d["t"], dtype=dt).reshape(6, 2)
    w1 = torch.tensor(d["w1"], dtype=dt).reshape(3, 4).requires_grad_()
    b1 = torch.tensor(d["b1"], dtype=dt).requires_grad_()
    w2 = torch.tensor(d["w2"], dtype=dt).reshape(4, 2).requires_grad_()
    b2 = torch.tensor(d["b2"], dtype=dt).requires_grad_()
    params = [w1, b1, w2, b2]
    groups = [{"params": [w1, w2], "weight_decay": c["wd"]}, {"params": [b1, b2], "weight_decay": 0.0}]
    if c["kind"] == "sgd":
        opt = torch.optim.SGD(groups, lr=c["lr"], momentum=c["momentum"], dampening=c["dampening"],
                              nesterov=c["nesterov"], maximize=c["maximize"], foreach=False)
    else:
        cls = torch.optim.Adam if c["kind"] == "adam" else torch.optim.AdamW
        opt = cls(groups, lr=c["lr"], betas=c["betas"], eps=c["eps"], amsgrad=c["amsgrad"],
                  maximize=c["maximize"], foreach=False)
    worst = {"lr": 0.0, "norm": 0.0, "param": 0.0}
    for s, lib in enumerate(c["steps"]):
        loss = ((torch.tanh(x @ w1 + b1) @ w2 + b2 - t) ** 2).mean()
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(params, MAX_NORM))
        lr = get_lr(s, c["lr"], c["lr"] * MIN_LR_FRAC, WARMUP, STEPS - 10)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        opt.zero_grad(set_to_none=True)
        worst["lr"] = max(worst["lr"], abs(lr - lib["lr"]) / lr)
        worst["norm"] = max(worst["norm"], abs(norm - lib["norm"]) / norm)
        for p, q in zip(params, lib["params"]):
            worst["param"] = max(worst["param"], rel(q, p.detach().reshape(-1)))
    ok = worst["lr"] <= 1e-15 and worst["norm"] <= tol and worst["param"] <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {c['label']:<24} {c['dtype']}  worst relative difference: "
          f"lr {worst['lr']:.2g}  norm {worst['norm']:.2g}  params {worst['param']:.2g}  (bar {tol:g})")
    return ok


def main():
    torch.set_num_threads(1)
    out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
    cases = parse(out)
    if len(cases) != 10 or any(len(c["steps"]) != STEPS for c in cases):
        print(f"unexpected output: {len(cases)} cases")
        return 1
    results = [replay(c) for c in cases]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
