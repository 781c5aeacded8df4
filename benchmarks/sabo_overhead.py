"""SABO's per-iteration overhead relative to drawing its own random numbers.

    python benchmarks/sabo_overhead.py [--dim 1000] [--popsize 100] [--iters 200] [--repeats 5]

One SABO iteration (two ask/tell rounds) on a zero-cost objective (values are a fixed,
pre-drawn array) is timed and divided by the time to draw the 2N x d standard normals
that iteration needs, with the same kind of Generator. Target (issue 2): ratio <= 3.
Prints the median over repeats of each timing and the ratio.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from sabo import SABO


def time_per_call(fn, calls: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return float(np.median(times))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dim", type=int, default=1000)
    ap.add_argument("--popsize", type=int, default=100)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--perturbation", default="closed_form", choices=["closed_form", "exact"])
    args = ap.parse_args(argv)
    d, n = args.dim, args.popsize

    rng = np.random.default_rng(0)
    t_rng = time_per_call(lambda: rng.standard_normal((2 * n, d)), args.iters, args.repeats)

    opt = SABO(np.zeros(d), popsize=n, lr=0.1, rho=1.0, seed=0, perturbation=args.perturbation)
    values = np.random.default_rng(1).standard_normal(n)

    def iteration():
        for _ in range(2):
            X = opt.ask()
            opt.tell(X, values)

    iteration()  # warm-up (allocations, first-call costs)
    t_iter = time_per_call(iteration, args.iters, args.repeats)
    print(f"d = {d}, N = {n}, perturbation = {args.perturbation}")
    print(f"draw 2N x d standard normals : {t_rng * 1e3:8.3f} ms")
    print(f"one SABO iteration           : {t_iter * 1e3:8.3f} ms")
    print(f"ratio (target <= 3)          : {t_iter / t_rng:8.2f}")


if __name__ == "__main__":
    main()
