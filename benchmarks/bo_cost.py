"""Seconds per iteration of the Bayesian-optimisation baselines as their data grows (N = 100, d = 200..1000),
and what their part of the prompt study's ``gpu`` profile costs.

    python benchmarks/bo_cost.py [--method turbo gibo] [--dims 200 500 1000] [--popsize 100]
        [--iterations 10 50 100] [--device cpu|cuda] [--threads K] [--param [METHOD.]KEY=VALUE ...]
        [--budget-s S] [--json PATH]
    python benchmarks/bo_cost.py --quick-gpu --json bo_cost.json     # the GPU measurement, < 90 s on an H100

A BO method's own work per iteration depends on the data its model holds at iteration k of a run
with N points per ask. Running k iterations to get there would take hours at d = 1000 on a CPU,
so the script builds the optimizer's state at iteration k directly, as a checkpoint of such a run
would hold it, restores it with ``from_state_dict`` and times one ask and one tell on it (the
objective, the sphere, is not timed):

* TuRBO-1: k N points uniform in its box, all in the trust region's model (no restart so far:
  the GP grows by N points an iteration). At d = 1000 the default initial design (2d = 2000
  points) takes the first 20 iterations, so there iteration 10 would be a design ask (no model);
  the row then shows a trust-region batch on 1000 points.
* GIBO: a window of min(k N, n_max) points (n_max = 2N by default) uniform in its acquisition box
  theta +- delta sigma0. The window is full from iteration 2 on, so with fixed hyperparameters
  (the default) iterations 10, 50 and 100 do the same work: the rows differ only by noise.

Columns: method, d, k, n (the points the model is fitted on), ask and tell wall-clock seconds,
their sum, the ask's CPU seconds (all threads of the process: on a shared machine the better
measure of the work), TuRBO-1's split of the ask (GP fit / candidates and Thompson sampling,
``opt.timings``), and the process's peak resident memory so far (and the peak CUDA memory of
the row on a GPU). ``--param KEY=VALUE`` (VALUE as JSON) passes a constructor option to every
method, ``--param gibo.KEY=VALUE`` to one, e.g. ``--param turbo.n_training_steps=5`` to keep
the largest TuRBO-1 cases affordable on a CPU (the fit's time is close to proportional to the
steps) or ``--param gibo.fit_hyperparameters=true`` (GIBO then refits in every tell).

Projection: seconds per run of each method at each d of the ``gpu`` profile (``params.yaml``,
counted from the study's configs), the sum over its T = 100 iterations of the measured times
interpolated linearly in k between the measured iterations (constant before the first and after
the last), times the number of its runs at that d. It counts the optimizer's work only (the
objective's forward passes are the study's main cost, ``benchmarks/prompt_objective.py``), and
assumes TuRBO-1 never restarts and models all k N points (design iterations and restarts cost
less), so it is an upper estimate for TuRBO-1.

``--budget-s S`` stops the measurements after S seconds (counted from the first one; an alarm
ends the running row between two Python operations, e.g. between two Adam steps) and reports
what it measured so far: rows run in order of k, then d, so the largest cases are the ones left
out. ``--json PATH`` writes the rows, the projection and the run's set-up, rewritten after
every row (a run killed from outside leaves the rows measured until then).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import baselines  # noqa: E402
from replication import storage  # noqa: E402
from sabo.protocol import AskTellOptimizer  # noqa: E402

METHODS = ("turbo", "gibo")
QUICK_GPU = {"method": list(METHODS), "dims": [200, 500, 1000], "iterations": [10, 50, 100], "device": "cuda",
             "budget_s": 85.0}


def sphere(X: np.ndarray) -> np.ndarray:
    return np.sum(X**2, axis=1)


def _restore(opt, state: dict, X: np.ndarray, k: int, **fields):
    """``opt`` at iteration k with the data X (and its sphere values) and any other state ``fields``."""
    Y = sphere(X)
    best = int(np.argmin(Y))
    state["state"].update(X=X, Y=Y, nit=k, nfev=k * opt.popsize, pending=None, f_best=float(Y[best]),
                          x_best=X[best].copy(), **fields)
    return AskTellOptimizer.from_state_dict(state)


def turbo_state_at(opt, k: int, rng: np.random.Generator):
    """TuRBO-1 after k iterations without a restart: its trust region's data is all k N points."""
    state = opt.state_dict()
    lb, ub = opt.bounds
    state["state"]["stats"]["n_data"] = k * opt.popsize
    return _restore(opt, state, rng.uniform(lb, ub, (k * opt.popsize, opt.dim)), k, design=np.empty((0, opt.dim)))


def gibo_state_at(opt, k: int, rng: np.random.Generator):
    """GIBO after k iterations: a window of min(k N, n_max) points in its acquisition box around theta."""
    state = opt.state_dict()
    cfg = state["config"]
    half = cfg["delta"] * np.broadcast_to(np.asarray(cfg["sigma0"], dtype=float), (opt.dim,))
    theta = opt.mean
    X = theta + rng.uniform(-half, half, (min(k * opt.popsize, cfg["n_max"]), opt.dim))
    return _restore(opt, state, X, k)


#: method -> function(fresh optimizer, k, rng) returning the optimizer at iteration k.
STATE_AT = {"turbo": turbo_state_at, "gibo": gibo_state_at}


def at_iteration(method: str, params: dict, d: int, popsize: int, k: int):
    opt = baselines.make(method, x0=np.zeros(d), sigma0=1.0, popsize=popsize, seed=0, **params)
    return STATE_AT[method](opt, k, np.random.default_rng(k))


def time_one_iteration(opt, torch, device: str) -> dict:
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0, c0 = time.perf_counter(), time.process_time()
    X = opt.ask()  # returns NumPy arrays: the GPU's work is done when it returns
    t1, c1 = time.perf_counter(), time.process_time()
    values = sphere(X)
    t2 = time.perf_counter()
    opt.tell(X, values)
    t3 = time.perf_counter()
    row = {"ask_s": t1 - t0, "tell_s": t3 - t2, "total_s": (t1 - t0) + (t3 - t2), "ask_cpu_s": c1 - c0}
    row.update({k.replace("_seconds", "_s"): v for k, v in getattr(opt, "timings", {}).items()
                if not k.endswith("cpu_seconds")})
    row["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    if cuda:
        row["peak_cuda_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return row


def model_points(opt) -> int:
    return int(opt.state_dict()["state"]["X"].shape[0])


# ---------------------------------------------------------------------------- projection
def gpu_profile_runs(methods) -> dict:
    """{(method, d): (runs, T)} of the prompt study's ``gpu`` profile, counted from its configs."""
    import yaml

    from replication.prompt import study

    # read as plain YAML (no schema check): the GPU machine may lack pydantic, and the study's configs
    # need only the prompt section
    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    params["prompt"]["profile"] = "gpu"
    out: dict = {}
    for c in study.configs(params):
        if c.method in methods:
            runs, T = out.get((c.method, c.problem["dim"]), (0, c.budget["max_iter"]))
            out[(c.method, c.problem["dim"])] = (runs + 1, T)
    return out


def seconds_per_run(measured: dict[int, float], T: int) -> float:
    """sum_{k=1..T} t(k), t interpolated linearly between the measured iterations k (constant outside)."""
    ks = sorted(measured)
    return float(np.sum(np.interp(np.arange(1, T + 1), ks, [measured[k] for k in ks])))


def projection(rows: list[dict], methods) -> list[dict]:
    out = []
    for (method, d), (runs, T) in sorted(gpu_profile_runs(methods).items()):
        measured = {r["k"]: r["total_s"] for r in rows if r["method"] == method and r["d"] == d}
        per_run = seconds_per_run(measured, T) if measured else None
        out.append({"method": method, "d": d, "runs": runs, "T": T, "measured_k": sorted(measured),
                    "seconds_per_run": per_run, "hours": None if per_run is None else per_run * runs / 3600.0})
    return out


# ---------------------------------------------------------------------------- budget, output
class BudgetExceeded(Exception):
    pass


@contextlib.contextmanager
def budget(seconds: float | None):
    """Raise :class:`BudgetExceeded` in this (main) thread once ``seconds`` have passed."""
    if seconds is None:
        yield
        return

    def expired(signum, frame):
        raise BudgetExceeded

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def write_json(path: Path | None, report: dict) -> None:
    if path is not None:
        storage.write_json(path, report)  # atomic: a stopped measurement keeps its last complete report


COLUMNS = (("ask_s", "ask s"), ("tell_s", "tell s"), ("total_s", "total s"), ("ask_cpu_s", "ask CPU s"),
           ("fit_s", "fit s"), ("candidates_s", "cand. s"), ("peak_rss_gib", "RSS GiB"), ("peak_cuda_gib", "CUDA GiB"))


def print_row(row: dict) -> None:
    cells = "".join(f"{row[key]:>10.3f}" if key in row else f"{'-':>10}" for key, _ in COLUMNS)
    print(f"{row['method']:>6} {row['d']:>5} {row['k']:>4} {row['n']:>6}{cells}", flush=True)


def print_projection(proj: list[dict]) -> None:
    print("\nprojection, the prompt study's gpu profile (optimizer work only; measured seconds per iteration "
          "interpolated over k = 1..T):")
    print(f"{'method':>6} {'d':>5} {'runs':>5} {'T':>4} {'measured k':>12} {'s / run':>10} {'hours':>8}")
    totals: dict = {}
    for p in proj:
        ks = ",".join(map(str, p["measured_k"])) or "none"
        if p["seconds_per_run"] is None:
            print(f"{p['method']:>6} {p['d']:>5} {p['runs']:>5} {p['T']:>4} {ks:>12} {'-':>10} {'-':>8}")
            continue
        totals[p["method"]] = totals.get(p["method"], 0.0) + p["hours"]
        print(f"{p['method']:>6} {p['d']:>5} {p['runs']:>5} {p['T']:>4} {ks:>12} {p['seconds_per_run']:>10.1f} "
              f"{p['hours']:>8.2f}")
    for method, hours in totals.items():
        missing = [p["d"] for p in proj if p["method"] == method and p["seconds_per_run"] is None]
        print(f"{method}: {hours:.2f} device-hours over the measured dimensions"
              + (f" (d = {missing} not measured)" if missing else ""))


# ---------------------------------------------------------------------------- main
def parse_params(items: list[str], methods) -> dict:
    """{method: options} from ``KEY=VALUE`` (every method) and ``METHOD.KEY=VALUE`` (one) items."""
    out = {m: {} for m in methods}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--param {item!r}: expected KEY=VALUE or METHOD.KEY=VALUE")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"--param {item!r}: VALUE must be JSON (e.g. 5, true, \"cpu\")") from None
        method, dot, name = key.rpartition(".")
        if dot and method not in METHODS:
            raise ValueError(f"--param {item!r}: METHOD must be one of {', '.join(METHODS)}")
        for m in ([method] if dot else methods):
            if m in out:
                out[m][name] = parsed
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", nargs="+", choices=METHODS, default=list(METHODS))
    ap.add_argument("--dims", type=int, nargs="+", default=[200, 500, 1000])
    ap.add_argument("--popsize", type=int, default=100)
    ap.add_argument("--iterations", type=int, nargs="+", default=[10, 50, 100], help="k of each row (>= 1)")
    ap.add_argument("--device", default="cpu", help="the methods' torch device: cpu or cuda (float64 on both)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--param", action="append", default=[], metavar="[METHOD.]KEY=VALUE",
                    help="a constructor option, VALUE as JSON (repeatable)")
    ap.add_argument("--budget-s", type=float, default=None, metavar="S",
                    help="stop measuring after S seconds and report what was measured")
    ap.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the results here")
    ap.add_argument("--quick-gpu", action="store_true",
                    help=f"the GPU preset: {QUICK_GPU} (explicit --budget-s overrides its budget)")
    args = ap.parse_args(argv)
    if args.quick_gpu:
        budget_s = args.budget_s
        for key, value in QUICK_GPU.items():
            setattr(args, key, value)
        args.budget_s = budget_s if budget_s is not None else QUICK_GPU["budget_s"]
    if min(args.iterations) < 1 or min(args.dims) < 1 or args.popsize < 2:
        ap.error("--iterations and --dims must be >= 1 and --popsize >= 2")
    if args.budget_s is not None and args.budget_s <= 0:
        ap.error(f"--budget-s must be > 0 (got {args.budget_s})")
    try:
        params = parse_params(args.param, args.method)
    except ValueError as exc:
        ap.error(str(exc))
    for options in params.values():
        options["device"] = args.device

    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error(f"--device {args.device}: torch {torch.__version__} sees no CUDA device")
    gpu = torch.cuda.get_device_name(torch.device(args.device)) if args.device.startswith("cuda") else None
    report = {"setup": {"methods": args.method, "popsize": args.popsize, "options": params, "device": args.device,
                        "gpu": gpu, "torch": torch.__version__, "threads": torch.get_num_threads(),
                        "cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                        "load_average_start": os.getloadavg()[0], "budget_s": args.budget_s},
              "rows": [], "stopped": None}
    print(f"methods {args.method}, N = {args.popsize}, device {args.device}{f' ({gpu})' if gpu else ''}, "
          f"options {params}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads, load average "
          f"{os.getloadavg()[0]:.1f}; states at iteration k built directly")
    cases = [(k, d, m) for k in sorted(args.iterations) for d in sorted(args.dims) for m in args.method]
    start = time.perf_counter()
    try:
        with budget(args.budget_s):
            for m in args.method:  # one-time costs (imports, CUDA context and kernels) untimed
                time_one_iteration(at_iteration(m, params[m], 5, 4, 2), torch, args.device)
            print(f"{'method':>6} {'d':>5} {'k':>4} {'n':>6}" + "".join(f"{label:>10}" for _, label in COLUMNS))
            for k, d, m in cases:
                opt = at_iteration(m, params[m], d, args.popsize, k)
                row = {"method": m, "d": d, "k": k, "n": model_points(opt),
                       **time_one_iteration(opt, torch, args.device)}
                report["rows"].append(row)
                print_row(row)
                write_json(args.json, report)
    except BudgetExceeded:
        done = len(report["rows"])
        report["stopped"] = (f"budget of {args.budget_s:g} s reached after {time.perf_counter() - start:.1f} s: "
                             f"{done} of {len(cases)} rows measured")
        print(report["stopped"], flush=True)
    report["setup"]["load_average_end"] = os.getloadavg()[0]
    try:
        report["projection"] = projection(report["rows"], args.method)
    except Exception as exc:  # e.g. a package the study's configs need is missing: keep the measurements
        report["projection"] = None
        print(f"\nprojection skipped: {type(exc).__name__}: {exc}")
    else:
        print_projection(report["projection"])
    write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
