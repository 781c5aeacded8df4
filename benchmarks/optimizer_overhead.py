"""Per-iteration optimizer overhead of every method, as a ratio to CMA-ES (pycma) in the same run.

    python benchmarks/optimizer_overhead.py [--dims 200 1000] [--popsize 100] [--seconds 3]
    python benchmarks/optimizer_overhead.py --hints [--seconds 1] [--methods sabo ingo bes mmes cmaes nevergrad gibo]

``--hints`` checks the optimizers' declared ``cost_per_iteration`` (what orders runs and sizes the
progress bar before the ETA has measured a method) against measured times on a grid of d and N,
one BLAS thread as the executors run: per (method, d, N) the measured microseconds per unit of the
hint, and per method the spread of that over the grid (max / min; 1 for a perfect hint, up to a
common scale that the ETA measures anyway).

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


HINT_GRID = [(2, 6), (10, 10), (40, 15), (200, 10), (200, 100), (1000, 50)]  # (d, N): BBOB's small end to the studies'


def hints(names, seconds: float) -> None:
    from replication.executors import one_thread

    one_thread()
    print("microseconds per unit of cost_per_iteration (one BLAS thread)")
    print(f"{'d':>6}{'N':>5}" + "".join(f"{n:>10}" for n in names))
    per_unit = {n: [] for n in names}
    for d, n_pop in HINT_GRID:
        row = []
        for n in names:
            cls = baselines.REGISTRY[n]
            ms = ms_per_iteration(baselines.make(n, x0=np.zeros(d), popsize=n_pop, seed=0), seconds)
            per_unit[n].append(ms * 1e3 / cls.cost_per_iteration(d, n_pop))
            row.append(per_unit[n][-1])
        print(f"{d:>6}{n_pop:>5}" + "".join(f"{u:>10.4f}" for u in row))
    print(f"{'spread':>11}" + "".join(f"{max(u) / min(u):>10.1f}" for u in per_unit.values()))
    everything = [u for v in per_unit.values() for u in v]
    print(f"spread over all methods and sizes: {max(everything) / min(everything):.1f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--popsize", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--hints", action="store_true", help="check the declared cost_per_iteration hints")
    ap.add_argument("--methods", nargs="+", default=["sabo", "ingo", "bes", "mmes", "cmaes"],
                    help="registered methods (TuRBO-1 takes hours an iteration at the larger sizes)")
    args = ap.parse_args(argv)
    names = list(args.methods)
    if args.hints:
        return hints(names, args.seconds)
    if "cmaes" not in names:  # the reference of the ratios
        names.append("cmaes")
    print(f"N = {args.popsize}; ms per iteration (ratio to CMA-ES)")
    print(f"{'d':>6}" + "".join(f"{n:>20}" for n in names))
    for d in args.dims:
        ms = {n: ms_per_iteration(baselines.make(n, x0=np.zeros(d), popsize=args.popsize, seed=0), args.seconds)
              for n in names}
        print(f"{d:>6}" + "".join(f"{ms[n]:>11.3f} ({ms[n] / ms['cmaes']:5.2f})" for n in names))


if __name__ == "__main__":
    main()
