"""Per-iteration optimizer overhead of every method, as a ratio to CMA-ES (pycma) in the same run.

    python benchmarks/optimizer_overhead.py [--dims 200 1000] [--popsize 100] [--seconds 3]

Each optimizer runs on a zero-cost objective (a fixed, pre-drawn value array per population
size), so the time measured is the optimizer's own ask/tell work. One "iteration" is one
update of the search distribution: two ask/tell rounds for SABO, one for the others. Each
method is timed for about ``--seconds`` after a warm-up; the table prints ms/iteration and the
ratio to CMA-ES at the same d.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import baselines


def ms_per_iteration(opt, seconds: float) -> float:
    values = {}

    def one_iteration():
        nit = opt.nit
        while opt.nit == nit:
            X = opt.ask()
            v = values.get(X.shape[0])
            if v is None:
                v = values[X.shape[0]] = np.random.default_rng(X.shape[0]).standard_normal(X.shape[0])
            opt.tell(X, v)

    for _ in range(3):
        one_iteration()
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        one_iteration()
        count += 1
    return (time.perf_counter() - t0) / count * 1e3


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--popsize", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args(argv)
    names = ["sabo", "ingo", "bes", "mmes", "cmaes"]
    print(f"N = {args.popsize}; ms per iteration (ratio to CMA-ES)")
    print(f"{'d':>6}" + "".join(f"{n:>20}" for n in names))
    for d in args.dims:
        ms = {n: ms_per_iteration(baselines.make(n, x0=np.zeros(d), popsize=args.popsize, seed=0), args.seconds)
              for n in names}
        print(f"{d:>6}" + "".join(f"{ms[n]:>11.3f} ({ms[n] / ms['cmaes']:5.2f})" for n in names))


if __name__ == "__main__":
    main()
