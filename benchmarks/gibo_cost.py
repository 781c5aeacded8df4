"""Seconds per GIBO iteration (its own ask/tell work) at the prompt study's scale.

    python benchmarks/gibo_cost.py [--dims 200 500 1000] [--popsize 100] [--checkpoints 10 50 100]
                                   [--fit] [--threads K] [--device cpu] [--set name=value ...]

Each d runs one GIBO (default settings unless ``--set`` changes them; ``--fit`` adds a run with
``fit_hyperparameters=True``) for max(checkpoints) real iterations on the synthetic study's
ellipsoid (x0 ~ U[0, 1]^d, sigma0 = 1; evaluating it costs microseconds, so the times are
GIBO's own). The window (n_max = 2 popsize by default) is full from iteration 3 on, so the
checkpoints time full-window iterations; the table gives ask (the popsize - 1 acquisitions),
tell (step, and the hyperparameter fit when enabled) and their sum at each checkpoint, and
the mean over all full-window iterations. ``--threads`` sets torch's intra-op threads (the
default leaves torch's choice); the machine's load average is printed with the table.
"""
from __future__ import annotations

import argparse
import ast
import os
import platform
import time

import numpy as np

import baselines
from replication.synthetic.functions import ellipsoid


def parse_settings(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        out[name] = ast.literal_eval(value)
    return out


def time_run(dim: int, popsize: int, checkpoints: list[int], params: dict) -> dict:
    """{iteration: (ask s, tell s)} for every iteration up to max(checkpoints)."""
    opt = baselines.make("gibo", x0=np.random.default_rng(0).uniform(0.0, 1.0, dim), sigma0=1.0,
                         popsize=popsize, seed=0, **params)
    times = {}
    for it in range(1, max(checkpoints) + 1):
        t0 = time.perf_counter()
        X = opt.ask()
        t1 = time.perf_counter()
        values = ellipsoid(X)
        t2 = time.perf_counter()
        opt.tell(X, values)
        times[it] = (t1 - t0, time.perf_counter() - t2)
    return times


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", type=int, nargs="+", default=[200, 500, 1000])
    ap.add_argument("--popsize", type=int, default=100)
    ap.add_argument("--checkpoints", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--fit", action="store_true", help="also time fit_hyperparameters=True")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE", help="other GIBO parameters")
    args = ap.parse_args(argv)
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    base = {"device": args.device, **parse_settings(args.set)}
    variants = [("fixed", {**base, "fit_hyperparameters": False})]
    if args.fit:
        variants.append(("fit", {**base, "fit_hyperparameters": True}))
    print(f"GIBO, N = {args.popsize} evaluations per iteration; settings {base}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s), {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    header = "".join(f"{'it ' + str(c) + ' ask/tell/total':>26}" for c in args.checkpoints)
    print(f"{'d':>6}{'hypers':>8}{header}{'mean it >= 3':>14}")
    for dim in args.dims:
        for label, params in variants:
            times = time_run(dim, args.popsize, args.checkpoints, params)
            cells = "".join(f"{times[c][0]:>10.2f}{times[c][1]:>8.2f}{sum(times[c]):>8.2f}" for c in args.checkpoints)
            full = [sum(v) for k, v in times.items() if k >= 3]
            print(f"{dim:>6}{label:>8}{cells}{np.mean(full):>14.2f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end (seconds per iteration above)")


if __name__ == "__main__":
    main()
