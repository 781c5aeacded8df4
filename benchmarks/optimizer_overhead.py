"""Per-iteration optimizer overhead of every method, as a ratio to CMA-ES (pycma) in the same run.

    python benchmarks/optimizer_overhead.py [--dims 200 1000] [--popsize 100] [--seconds 3]
    python benchmarks/optimizer_overhead.py --hints [--seconds 1] [--methods sabo ingo bes mmes cmaes nevergrad gibo]
    python benchmarks/optimizer_overhead.py --pycma [--dims 10 40 100 200 1000] [--popsize N] [--seconds 10]

``--pycma`` measures the CMA-ES adapter (``baselines.cmaes.CMAES``) against pycma's own ask/tell
loop (``X = es.ask(); es.tell(X, values); es.stop()``) built directly with the same seed and
options (:func:`pycma_loop`), one BLAS thread: the two run in lockstep, one iteration of each in
turn (which goes first alternates), each timed in CPU time (``time.process_time``: other
processes on the machine do not count), so every eigendecomposition falls in the same iteration
of both. It prints ms per iteration of each and the adapter's overhead, and checks at the end that
the adapter's mean and step size equal pycma's bit for bit. Populations default to pycma's
4 + floor(3 ln d), the smallest, where the adapter's fixed cost weighs most; both runs restart
every :data:`RESTART_EVERY` iterations (a long run on fixed values drifts to extreme
conditioning that no study reaches).

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


RESTART_EVERY = 300


def pycma_loop(x0, sigma0, popsize: int, seed: int, options=None):
    """pycma's ``CMAEvolutionStrategy`` configured as the CMA-ES adapter documents (``baselines/cmaes.py``), built
    here from pycma's own options, not through the adapter: samples from ``numpy.random.default_rng(seed)`` via
    ``randn``, ``seed = nan``, silent, no signals file; a per-coordinate ``sigma0`` as its maximum times the
    multipliers ``CMA_stds``; ``options`` passed on. Driven with ``es.tell(es.ask(), values); es.stop()`` it is
    pycma's own loop (tests/test_cmaes.py compares the adapter with it, as :func:`adapter_against_pycma` does)."""
    import cma

    rng = np.random.default_rng(seed)
    sigma0 = np.broadcast_to(np.asarray(sigma0, dtype=np.float64), np.shape(x0))
    scale = float(sigma0.max())
    opts = {**(options or {}), "popsize": popsize, "seed": np.nan, "randn": lambda *shape: rng.standard_normal(shape),
            "verbose": -9, "verb_disp": 0, "verb_log": 0, "signals_filename": ""}
    if np.any(sigma0 != scale):
        opts["CMA_stds"] = sigma0 / scale
    return cma.CMAEvolutionStrategy(np.array(x0, dtype=np.float64), scale, opts)


def adapter_against_pycma(dims, popsize, seconds: float) -> None:
    """Print the adapter's CPU time per iteration against pycma's own loop's (module docstring), one BLAS thread."""
    from baselines.cmaes import pycma_default_popsize
    from replication.executors import one_thread

    restore = one_thread()
    clock = time.process_time
    print("CMA-ES adapter against pycma's own ask/tell loop, lockstep, CPU ms per iteration (one BLAS thread)")
    print(f"{'d':>6}{'N':>5}{'iterations':>12}{'adapter':>11}{'pycma':>11}{'overhead':>10}")
    try:
        for d in dims:
            n = popsize or pycma_default_popsize(d)
            values = np.random.default_rng(n).standard_normal(n)
            listed = values.tolist()
            spent = {"adapter": 0.0, "pycma": 0.0}
            count, start = 0, clock()
            while clock() - start < seconds or count < 3:
                if count % RESTART_EVERY == 0:
                    opt = baselines.make("cmaes", x0=np.zeros(d), popsize=n, seed=count)
                    es = pycma_loop(np.zeros(d), 1.0, n, count)
                for who in (("adapter", "pycma") if count % 2 == 0 else ("pycma", "adapter")):
                    t0 = clock()
                    if who == "adapter":
                        X = opt.ask()
                        opt.tell(X, values)
                    else:
                        es.tell(es.ask(), listed)
                        es.stop()
                    spent[who] += clock() - t0
                count += 1
            if not (np.array_equal(opt.mean, es.mean) and opt.sigma == es.sigma):
                raise SystemExit(f"d = {d}: the adapter's mean or sigma differs from pycma's own loop")
            a, p = (spent[k] / count * 1e3 for k in ("adapter", "pycma"))
            print(f"{d:>6}{n:>5}{count:>12}{a:>11.3f}{p:>11.3f}{a / p - 1:>+10.1%}")
    finally:
        restore()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", type=int, nargs="+", help="default: 200 1000 (--pycma: 10 40 100 200 1000)")
    ap.add_argument("--popsize", type=int, help="default: 100 (--pycma: pycma's 4 + floor(3 ln d))")
    ap.add_argument("--seconds", type=float, help="per method and size; default 3 (--pycma: 10 per d)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--hints", action="store_true", help="check the declared cost_per_iteration hints")
    mode.add_argument("--pycma", action="store_true", help="the CMA-ES adapter against pycma's own loop")
    ap.add_argument("--methods", nargs="+", default=["sabo", "ingo", "bes", "mmes", "cmaes"],
                    help="registered methods (TuRBO-1 takes hours an iteration at the larger sizes)")
    args = ap.parse_args(argv)
    if args.pycma:
        return adapter_against_pycma(args.dims or [10, 40, 100, 200, 1000], args.popsize,
                                     10.0 if args.seconds is None else args.seconds)
    args.dims, args.popsize = args.dims or [200, 1000], args.popsize or 100
    args.seconds = 3.0 if args.seconds is None else args.seconds
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
