"""Seconds per iteration of a Bayesian-optimisation baseline as its data grows (N = 100, d = 200..1000).

    python benchmarks/bo_cost.py --method turbo [--dims 200 500 1000] [--popsize 100]
        [--iterations 10 50 100] [--threads 2] [--device cpu] [--param n_training_steps=5 ...]

A BO method's own work per iteration grows with the data its model is fitted on: at iteration k
of a run with N points per ask that is up to k N points. Running k iterations to get there would
take hours at d = 1000 on a CPU, so for a method listed in :data:`STATE_AT` the script builds the
optimizer's state at iteration k directly, as a checkpoint of such a run would hold it (k N points
uniform in the method's box with the values of a cheap objective, the sphere), restores it with
``from_state_dict`` and times one ask and one tell on it. A method not listed there is driven for
k iterations on the sphere and its k-th iteration is timed (slow, but needs no knowledge of its
state). The objective's own time is not included.

Columns: d, k, nfev (points evaluated before the timed iteration; for TuRBO-1's built state also
the points its GP is fitted on), ask and tell wall-clock seconds, the ask's CPU seconds (all
threads of the process: on a shared machine the better measure of the work), and what the optimizer
reports in ``opt.timings`` (TuRBO-1: the GP fit and the candidate/Thompson-sampling part of the
ask), then the process's peak resident memory so far. ``--param KEY=VALUE`` (VALUE read as JSON)
passes constructor options, e.g. fewer Adam steps (``n_training_steps``) to keep the largest cases
affordable on a CPU; the fit's time is then close to proportional to the steps.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import baselines  # noqa: E402
from sabo.protocol import AskTellOptimizer  # noqa: E402


def sphere(X: np.ndarray) -> np.ndarray:
    return np.sum(X**2, axis=1)


def turbo_state_at(opt, k: int, rng: np.random.Generator):
    """TuRBO-1 after k iterations without a restart: its trust region's data is all k N points.

    At d = 1000 the default initial design (2d = 2000 points) takes the first 20 iterations, so
    there iteration 10 would be a design ask (no model); the row then shows a TR batch on 1000 points.
    """
    state = opt.state_dict()
    lb, ub = opt.bounds
    X = rng.uniform(lb, ub, (k * opt.popsize, opt.dim))
    Y = sphere(X)
    best = int(np.argmin(Y))
    state["state"].update(X=X, Y=Y, design=np.empty((0, opt.dim)), nit=k, nfev=X.shape[0], pending=None,
                          f_best=float(Y[best]), x_best=X[best].copy())
    state["state"]["stats"]["n_data"] = X.shape[0]
    return AskTellOptimizer.from_state_dict(state)


#: method name -> function(fresh optimizer, k, rng) returning the optimizer at iteration k.
STATE_AT = {"turbo": turbo_state_at}


def at_iteration(name: str, params: dict, d: int, popsize: int, k: int):
    opt = baselines.make(name, x0=np.zeros(d), sigma0=1.0, popsize=popsize, seed=0, **params)
    if name in STATE_AT:
        return STATE_AT[name](opt, k, np.random.default_rng(k))
    while opt.nit < k - 1:
        X = opt.ask()
        opt.tell(X, sphere(X))
    return opt


def time_one_iteration(opt) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    X = opt.ask()
    t1, c1 = time.perf_counter(), time.process_time()
    values = sphere(X)
    t2 = time.perf_counter()
    opt.tell(X, values)
    t3 = time.perf_counter()
    return {"ask": t1 - t0, "ask_cpu": c1 - c0, "tell": t3 - t2,
            **{k.removesuffix("_seconds"): v for k, v in getattr(opt, "timings", {}).items()}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", required=True, help=f"a registered method (state built directly: {sorted(STATE_AT)})")
    ap.add_argument("--dims", type=int, nargs="+", default=[200, 500, 1000])
    ap.add_argument("--popsize", type=int, default=100)
    ap.add_argument("--iterations", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--device", default=None, help="passed as the method's `device` option")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a constructor option, VALUE as JSON (repeatable)")
    args = ap.parse_args(argv)
    params = {}
    for item in args.param:
        key, _, value = item.partition("=")
        params[key] = json.loads(value)
    if args.device is not None:
        params["device"] = args.device
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    import torch

    print(f"method {args.method}, N = {args.popsize}, options {params}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU threads, state at iteration k "
          f"{'built directly' if args.method in STATE_AT else 'by driving k - 1 iterations'}")
    time_one_iteration(at_iteration(args.method, params, 5, 4, 2))  # one-time costs (imports, lazy init) untimed
    head = None
    for d in args.dims:
        for k in args.iterations:
            opt = at_iteration(args.method, params, d, args.popsize, k)
            nfev = opt.nfev
            times = time_one_iteration(opt)
            if head is None:
                head = list(times)
                print(f"{'d':>6} {'k':>5} {'nfev':>7} " + " ".join(f"{h + ' s':>16}" for h in head)
                      + f" {'peak RSS GiB':>13}")
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
            print(f"{d:>6} {k:>5} {nfev:>7} " + " ".join(f"{times.get(h, float('nan')):>16.3f}" for h in head)
                  + f" {rss:>13.2f}", flush=True)


if __name__ == "__main__":
    main()
