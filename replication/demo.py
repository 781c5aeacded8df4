"""A small end-to-end example: every registered method on the paper's four synthetic functions.

    python -m replication.demo [--dim 100] [--popsize 50] [--evals 200000] [--seed 0]

Each method gets the same evaluation budget (SABO spends 2N evaluations per iteration,
INGO and CMA-ES N, BES N + 1), starts from mu0 ~ U[0, 1]^d with Sigma0 = I and the paper's
synthetic-study step sizes (beta = 0.1, BES spacing c = 1, rho = 100/sqrt(T + 1) with T the
SABO horizon). It prints the error E = ||mu - x*||_2 reached, as in the paper's figures.
This is a smoke-sized preview; the full study is the synthetic pipeline.
"""
from __future__ import annotations

import argparse
import numpy as np

import baselines
import sabo
from replication.problems.synthetic import FUNCTIONS


def method_params(name: str, popsize: int, iterations: int) -> dict:
    common = {"sigma0": 1.0, "popsize": popsize}
    return {
        "sabo": {**common, "lr": 0.1, "rho": sabo.InvSqrt(100.0, horizon=iterations)},
        "ingo": {**common, "lr": 0.1},
        "bes": {**common, "lr": 0.1, "spacing": 1.0},
        "cmaes": common,
        "mmes": common,
    }[name]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--popsize", type=int, default=50)
    ap.add_argument("--evals", type=int, default=200_000, help="function evaluations per run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    x0 = np.random.default_rng(args.seed).uniform(0.0, 1.0, args.dim)
    names = list(baselines.REGISTRY)
    print(f"d = {args.dim}, N = {args.popsize}, budget = {args.evals} evaluations, seed = {args.seed}")
    print(f"{'function':<18}" + "".join(f"{n:>12}" for n in names))
    for fname, (fun, x_star) in FUNCTIONS.items():
        row = []
        for name in names:
            sabo_iterations = args.evals // (2 * args.popsize)
            opt = baselines.make(name, x0=x0, seed=args.seed, **method_params(name, args.popsize, sabo_iterations))
            try:
                res = sabo.run(opt, fun, max_nfev=args.evals, record_mean=False)
                row.append(f"{np.linalg.norm(res.x - x_star):12.3e}")
            except (FloatingPointError, ValueError):  # the optimizer's state or F overflowed
                row.append(f"{'diverged':>12}")
        print(f"{fname:<18}" + "".join(row), flush=True)


if __name__ == "__main__":
    main()
