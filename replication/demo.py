"""A small end-to-end example: every registered method on the paper's four synthetic functions.

    python -m replication.demo [--dim 100] [--popsize 50] [--evals 200000] [--seed 0]

Each method gets the same evaluation budget (SABO spends 2N evaluations per iteration,
INGO and CMA-ES N, BES N + 1), starts from mu0 ~ U[0, 1]^d with Sigma0 = I and the paper's
synthetic-study step sizes (beta = 0.1, BES spacing c = 1, rho = 100/sqrt(T + 1) with T the
SABO horizon). A method the paper does not use (one added with ``baselines.register``, or an
installed optimizer plugin) runs with its constructor's defaults. It prints the error
E = ||mu - x*||_2 reached, as in the paper's figures. This is a smoke-sized preview; the full
study is the synthetic pipeline. A method whose declared work per iteration is well above
that of CMA-ES and SABO (:data:`PREVIEW_COST_RATIO`: the Bayesian-optimisation baselines, and
Nevergrad's per-candidate Python) is listed as skipped unless ``--all`` is given, one whose
optional package is not installed (the Nevergrad adapter without the ``nevergrad`` extra) as n/a.
It computes with one BLAS thread, as every study's run does (:func:`replication.executors.one_thread`):
on the 2-core machine shared with other jobs two threads took 1,024 s (637 CPU-s) at load 6-9,
where one thread takes 70-79 s (68-76 CPU-s) and two 82 s (138 CPU-s) at load 1-1.5 (2026-11-27;
the same table either way).
"""
from __future__ import annotations

import warnings

import numpy as np

import baselines
import sabo
from replication.arguments import ArgumentParser, int_at_least, positive_int, seed_int
from replication.costs import evaluations_per_iteration
from replication.executors import one_thread
from replication.synthetic.functions import FUNCTIONS

#: The paper's synthetic-study settings of the methods it compares, as functions of the method's
#: horizon T (iterations within the budget). A method not listed runs with its constructor's
#: defaults, so every registered optimizer can be previewed (CMA-ES and MMES use theirs).
PAPER_SETTINGS = {
    "sabo": lambda T: {"lr": 0.1, "rho": sabo.InvSqrt(100.0, horizon=T)},
    "ingo": lambda T: {"lr": 0.1},
    "bes": lambda T: {"lr": 0.1, "spacing": 1.0},
}


#: A method is previewed when its ``cost_per_iteration(d, N)`` is at most this multiple of the larger
#: of CMA-ES's and SABO's (CMA-ES's work grows as d^2, SABO's as d, so neither alone bounds the
#: paper's methods at every d). With the defaults (d = 100, N = 50, 200,000 evaluations) the
#: preview takes one to two minutes, CMA-ES most of it; GIBO (~190x CMA-ES's hint; 0.39 s an
#: iteration on one core), TuRBO-1 (hours: benchmarks/bo_cost.py) and the Nevergrad adapter (11x;
#: 21 ms an iteration, 90 s a function) would take from minutes to hours.
PREVIEW_COST_RATIO = 4.0
PREVIEW_REFERENCES = ("cmaes", "sabo")


def previewed(name: str, dim: int, popsize: int) -> bool:
    """Whether the demo runs the registered method ``name`` at (d, N) (see :data:`PREVIEW_COST_RATIO`)."""
    reference = max(baselines.REGISTRY[r].cost_per_iteration(dim, popsize) for r in PREVIEW_REFERENCES)
    return baselines.REGISTRY[name].cost_per_iteration(dim, popsize) <= PREVIEW_COST_RATIO * reference


def method_params(name: str, dim: int, popsize: int, evals: int) -> dict:
    """Constructor parameters of the registered method ``name`` for a budget of ``evals`` evaluations.

    ``sigma0`` and ``popsize`` are parameters of every registered optimizer
    (``baselines.REQUIRED_PARAMETERS``); the horizon counts the evaluations of an iteration as a
    study does (:func:`replication.costs.evaluations_per_iteration`; the paper's settings here add
    no centre point).
    """
    horizon = evals // evaluations_per_iteration(baselines.REGISTRY[name], dim, popsize, {})
    paper = PAPER_SETTINGS.get(name)
    return {"sigma0": 1.0, "popsize": popsize, **(paper(horizon) if paper is not None else {})}


def main(argv=None) -> None:
    ap = ArgumentParser(prog="replication.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dim", type=positive_int, default=100)
    ap.add_argument("--popsize", type=int_at_least(2), default=50)
    ap.add_argument("--evals", type=positive_int, default=200_000, help="function evaluations per run")
    ap.add_argument("--seed", type=seed_int, default=0)
    ap.add_argument("--all", action="store_true", help="also run the methods skipped for their cost")
    args = ap.parse_args(argv)
    restore = one_thread()
    try:
        preview(args, ap)
    finally:
        restore()


def preview(args, ap) -> None:
    """The table of :func:`main` for its parsed arguments."""
    x0 = np.random.default_rng(args.seed).uniform(0.0, 1.0, args.dim)
    try:  # installed optimizer plugins are previewed too
        baselines.load_plugins()
    except baselines.PluginError as exc:  # one line per plugin that cannot be loaded; the others are
        for line in str(exc).splitlines():
            print(f"not previewed: {line}")
    names = list(baselines.REGISTRY)
    first = max(evaluations_per_iteration(baselines.REGISTRY[n], args.dim, args.popsize, {}) for n in names)
    if args.evals < first:  # else a method that cannot take one step would be reported as diverged
        ap.error(f"argument --evals: must be at least {first}, one iteration of every method at N = {args.popsize} "
                 f"(got {args.evals})")
    width = {n: max(12, len(n) + 2) for n in names}
    print(f"d = {args.dim}, N = {args.popsize}, budget = {args.evals} evaluations, seed = {args.seed}")
    print(f"{'function':<18}" + "".join(f"{n:>{width[n]}}" for n in names))
    def build(name):
        return baselines.make(name, x0=x0, seed=args.seed, **method_params(name, args.dim, args.popsize, args.evals))

    skipped = [] if args.all else [n for n in names if not previewed(n, args.dim, args.popsize)]
    missing: dict[str, str] = {}  # method -> why it cannot be built here (an optional extra not installed)
    for name in skipped:  # built once: n/a (cannot run here) says more than skipped (too slow for a preview)
        try:
            build(name)
        except ImportError as exc:
            missing[name] = str(exc)
    notes: dict[tuple[str, str], list[str]] = {}  # (method, SettingsWarning) -> functions: after the table
    for fname, (fun, x_star) in FUNCTIONS.items():
        row = []
        for name in names:
            if name in missing or name in skipped:
                row.append(f"{'n/a' if name in missing else 'skipped':>{width[name]}}")
                continue
            try:
                opt = build(name)
            except ImportError as exc:
                missing[name] = str(exc)
                row.append(f"{'n/a':>{width[name]}}")
                continue
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", sabo.SettingsWarning)
                    res = sabo.run(opt, fun, max_nfev=args.evals, record_mean=False)
                for w in caught:
                    if issubclass(w.category, sabo.SettingsWarning):
                        notes.setdefault((name, str(w.message)), []).append(fname)
                    else:  # shown as it would have been
                        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                row.append(f"{np.linalg.norm(res.x - x_star):{width[name]}.3e}")
            except (FloatingPointError, ValueError):  # the optimizer's state or F overflowed
                row.append(f"{'diverged':>{width[name]}}")
        print(f"{fname:<18}" + "".join(row), flush=True)
    skipped = [n for n in skipped if n not in missing]
    if skipped:
        print(f"skipped: {', '.join(skipped)} (work per iteration above {PREVIEW_COST_RATIO:g} x CMA-ES's or SABO's; "
              "--all runs them, or run them in a study)")
    for name, why in missing.items():
        print(f"n/a: {name} ({why})")
    for (name, message), functions in notes.items():  # the paper's settings trigger some
        print(f"settings warning, {name} on {', '.join(functions)}: {message}")


if __name__ == "__main__":
    main()
