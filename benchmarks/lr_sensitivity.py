"""SABO's step size beta (``lr``) against dimension and budget: which default serves small and large budgets.

    python benchmarks/lr_sensitivity.py              # full grid, 1248 runs: ~90 CPU-minutes; writes results/
    python benchmarks/lr_sensitivity.py --quick      # 48 runs, ~1 min; writes results/quick/
    python benchmarks/lr_sensitivity.py --reanalyse  # tables and figure again from the stored records
    python benchmarks/lr_sensitivity.py --resume     # runs the grid's runs that the stored records lack

Setup, as ``benchmarks/rho_sensitivity.py``'s (a library user's): x0 ~ U[0, 1]^d (one x0 per seed and d),
``sigma0=1.0`` and SABO's defaults otherwise (N = ``ingo_default_popsize(d)``, rho = 0.05 sqrt(d), z-score
shaping, covariance safeguard at 0.05), except beta, the grid's axis. Functions: ``sphere``, the paper's
``ellipsoid`` and ``levy`` (those of the rho study) and ``rosenbrock`` (a curved valley, x* = (1, ..., 1)).

Per run, f(mean) and ||mean - x*|| are recorded after every iteration whose evaluation count first
reaches a budget B = b d of ``BUDGETS_PER_D`` (b = 25 .. 1000, COCO's unit), so that one run answers
every budget: the *per-iteration progress* of each beta is kept along the whole run, not only at its
end. A run that fails (a non-finite state, ``FloatingPointError``) scores +inf from there on.

Per cell (function, d, B) and beta, the median over seeds of log10 f(mean) at B, floored at ``TARGET``
(f <= 1e-8 is solved: decades beyond it would reward the rate of convergence to meaningless
precision); ``decades`` = log10 f0 - that (progress made), and the *share* of the cell's best beta's
progress that beta keeps,
``share = decades / max over beta of decades`` (1: as good as the best beta there). A beta *keeps
pace* in a cell when share >= ``PACE`` (0.9, the rho study's criterion); cells where no beta gained
``MIN_DECADES`` are not scored. The proposed default is the beta of the grid keeping pace in the most
scored cells among the *safe* ones: no failed run, no (function, d) whose median f(mean) at its
largest budget is above f0 (the run diverged), and a median update-safeguard share of at most
``SAFE_SHARE`` (5%) in every cell (:func:`choice`; the criterion was set after seeing the data: the
largest beta that does not diverge shrinks with d, beta = 1 diverging from d = 200 on with the
safeguard acting in 31-75% of its iterations, beta = 0.5 at d = 1000 with it acting in 0.1-0.5%);
the tables list every beta, per budget and per d, for the reader to weigh otherwise.

Writes ``<out>/lr_sensitivity.{json,md}`` and ``<out>/figures/lr_sensitivity.{png,svg}``; ``--out``
defaults to ``results`` (full grid), ``results/quick`` (``--quick``) or ``results/custom`` (any grid
option). A run that is not the full grid refuses to write over a JSON holding the full grid.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # single-threaded workers, as the rho study's

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]  # this checkout, and the sibling script

import rho_sensitivity as rho_study  # noqa: E402

import sabo  # noqa: E402
from replication.arguments import ArgumentParser, directory, int_at_least, seed_int  # noqa: E402
from sabo.gaussian_search import ingo_default_popsize  # noqa: E402


def rosenbrock(X) -> np.ndarray:
    """sum_i 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2 (x* = (1, ..., 1), F(x*) = 0)."""
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    return np.sum(100.0 * (X[:, 1:] - X[:, :-1] ** 2) ** 2 + (1.0 - X[:, :-1]) ** 2, axis=1)


FUNCTIONS = {**rho_study.FUNCTIONS, "rosenbrock": (rosenbrock, 1.0)}
"""name -> (function, every coordinate of x*); F(x*) = 0 for all."""

#: budgets B = b d evaluations, b from these (COCO's budgets are multiples of d)
BUDGETS_PER_D = (25, 50, 100, 200, 500, 1000)
GRID_KEYS = ("dims", "lrs", "functions", "seeds")
_AXES = {"lrs": [0.03, 0.1, 0.2, 0.3, 0.5, 1.0], "functions": ["sphere", "ellipsoid", "rosenbrock", "levy"]}
FULL = [{**_AXES, "dims": [2, 5, 10, 20], "seeds": list(range(10))},
        # d = 50 and 200: five seeds (a run at d = 200 costs ~25 s, 100x one at d = 2; seeds differ less there)
        {**_AXES, "dims": [50, 200], "seeds": list(range(5))},
        # d = 1000: two seeds, budgets up to 100 d (a run to 1000 d would take ~5 min)
        {**_AXES, "dims": [1000], "seeds": [0, 1], "budgets_per_d": [25, 50, 100]}]
"""The full grid as blocks (the factorial product within each block; budgets ``BUDGETS_PER_D`` unless a block
names its own)."""
QUICK = [{"dims": [2, 20], "lrs": [0.1, 0.3, 1.0], "functions": ["sphere", "levy"], "seeds": [0, 1, 2, 3]}]
PACE = 0.9          # a beta keeps pace in a cell when it makes >= 90% of the best beta's progress there
TARGET = -8.0       # log10 f is floored here: f <= 1e-8 is solved (COCO's final target); decades below it mean nothing
SAFE_SHARE = 0.05   # the most update-safeguard activity (median share of iterations, in every cell) a default may show
MIN_DECADES = 0.3   # cells where no beta gained this much are not scored (a share of ~0 means nothing)
EARLIER_LR = 0.1    # the library's default beta when this was measured (now sabo.sabo.DEFAULT_LR = 0.3): dashed
NEAR = 0.15         # "within 0.15 of x*": the distance the 2-d measurement used


# ----------------------------------------------------------------------------------------- runs
def run_one(task: dict) -> dict:
    """One SABO run to the largest budget; f(mean) and the distance to x* at every budget."""
    fn, x_star = FUNCTIONS[task["function"]]
    d, seed = task["d"], task["seed"]
    budgets = [b * d for b in task["budgets_per_d"]]
    x0 = rho_study.x0_for(seed, d)
    t0 = time.perf_counter()
    opt = sabo.SABO(x0, sigma0=1.0, lr=task["lr"], seed=seed)
    f_at, dist_at, status = [], [], "ok"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SettingsWarnings: the safeguard shares are recorded instead
        try:
            while len(f_at) < len(budgets):
                X = opt.ask()
                opt.tell(X, fn(X))
                while opt.phase == 0 and len(f_at) < len(budgets) and opt.nfev >= budgets[len(f_at)]:
                    mean = opt.mean
                    f_at.append(float(fn(mean)[0]))
                    dist_at.append(float(np.linalg.norm(mean - x_star)))
        except FloatingPointError as exc:  # a diverged run is a result, not a crash
            status = f"failed at nfev {opt.nfev}: {exc}"[:200]
    nit = max(opt.nit, 1)
    return {**{k: task[k] for k in ("function", "d", "lr", "seed")}, "popsize": opt.popsize, "budgets": budgets,
            "status": status, "nfev": opt.nfev, "nit": opt.nit, "f0": float(fn(x0)[0]),
            "dist0": float(np.linalg.norm(x0 - x_star)), "f_at": f_at, "dist_at": dist_at,
            "safeguard_update_share": opt.stats["safeguard_update"] / nit,
            "safeguard_perturbation_share": opt.stats["safeguard_perturbation"] / nit,
            "seconds": time.perf_counter() - t0}


def grid(blocks: list[dict]) -> list[dict]:
    """Every run of the grid, the longest first (keeps the workers busy to the end)."""
    tasks = {(f, d, float(lr), s): {"function": f, "d": d, "lr": float(lr), "seed": s,
                                    "budgets_per_d": list(spec.get("budgets_per_d", BUDGETS_PER_D))}
             for spec in blocks for d in spec["dims"] for f in spec["functions"] for lr in spec["lrs"]
             for s in spec["seeds"]}  # overridden axes can make two blocks overlap
    return sorted(tasks.values(), key=lambda t: -t["d"])


# ------------------------------------------------------------------------------------- analysis
def value_at(record: dict, key: str, k: int) -> float:
    """``record[key][k]`` (budget index k), +inf where the run had failed before that budget."""
    values = record[key]
    return values[k] if k < len(values) else np.inf


def cells_of(records: list[dict]) -> list[dict]:
    """One cell per (function, d, budget, beta): medians over seeds; ``share`` against the cell's best beta."""
    groups = defaultdict(list)
    for r in records:
        groups[(r["function"], r["d"], r["lr"])].append(r)
    cells = []
    for (fname, d, lr), runs in groups.items():
        lf0 = rho_study.median(rho_study.log10f(r["f0"]) for r in runs)
        for k, budget in enumerate(runs[0]["budgets"]):
            log10f = max(TARGET, rho_study.median(rho_study.log10f(value_at(r, "f_at", k)) for r in runs))
            cells.append({"function": fname, "d": d, "lr": lr, "budget": budget, "budget_per_d": budget // d,
                          "seeds": len(runs), "failed": sum(k >= len(r["f_at"]) for r in runs),
                          "log10_f0": lf0, "log10_f": log10f, "decades": lf0 - log10f,
                          "near": sum(value_at(r, "dist_at", k) < NEAR for r in runs),
                          "safeguard_update_share": rho_study.median(r["safeguard_update_share"] for r in runs),
                          "safeguard_perturbation_share": rho_study.median(r["safeguard_perturbation_share"]
                                                                           for r in runs)})
    best = defaultdict(lambda: -np.inf)
    for c in cells:
        key = (c["function"], c["d"], c["budget"])
        best[key] = max(best[key], c["decades"])
    for c in cells:
        top = best[(c["function"], c["d"], c["budget"])]
        c["best_decades"] = top
        c["share"] = c["decades"] / top if top >= MIN_DECADES else None
    return sorted(cells, key=lambda c: (c["function"], c["d"], c["budget"], c["lr"]))


def keeps_pace(c: dict) -> bool:
    return c["share"] is not None and c["share"] >= PACE and c["failed"] == 0


def choice(cells: list[dict]) -> dict:
    """Per beta: cells scored and kept pace in (all; per budget b; per d), failures, divergences, safeguard
    shares; and the proposed default: the beta keeping pace in the most scored cells among the *safe* ones
    (no failed run, no (function, d) whose median f at its largest budget is above f0, median
    update-safeguard share <= ``SAFE_SHARE`` in every cell)."""
    last = defaultdict(int)  # (function, d) -> the largest budget run there
    for c in cells:
        last[(c["function"], c["d"])] = max(last[(c["function"], c["d"])], c["budget"])
    per_lr = {}
    for lr in sorted({c["lr"] for c in cells}):
        group = [c for c in cells if c["lr"] == lr]
        scored = [c for c in group if c["share"] is not None]
        per_lr[lr] = {
            "diverged": sorted(f"{c['function']} d = {c['d']}" for c in group
                               if c["budget"] == last[(c["function"], c["d"])] and c["decades"] < 0),
            "cells": len(scored), "pace": sum(keeps_pace(c) for c in scored),
            "share_min": min((c["share"] for c in scored), default=None),
            "share_median": rho_study.median(c["share"] for c in scored),
            "failed_runs_max": max(c["failed"] for c in group),
            "safeguard_update_share_max": max(c["safeguard_update_share"] for c in group),
            "by_budget": {b: [sum(keeps_pace(c) for c in scored if c["budget_per_d"] == b),
                              sum(c["budget_per_d"] == b for c in scored)]
                          for b in sorted({c["budget_per_d"] for c in group})},
            "by_d": {d: [sum(keeps_pace(c) for c in scored if c["d"] == d), sum(c["d"] == d for c in scored)]
                     for d in sorted({c["d"] for c in group})},
        }
    safe = [lr for lr, v in per_lr.items() if v["failed_runs_max"] == 0 and not v["diverged"]
            and v["safeguard_update_share_max"] <= SAFE_SHARE]
    chosen = max(safe, key=lambda lr: (per_lr[lr]["pace"], per_lr[lr]["share_median"]), default=None)
    return {"pace": PACE, "min_decades": MIN_DECADES, "per_lr": per_lr, "safe": safe, "chosen": chosen}


# --------------------------------------------------------------------------------------- output
def markdown(meta: dict, cells: list[dict], result: dict) -> str:
    fmt = rho_study.fmt
    lrs = list(result["per_lr"])
    budgets = sorted({c["budget_per_d"] for c in cells})
    dims = sorted({c["d"] for c in cells})
    out = [f"# SABO step-size (lr) sensitivity ({meta['grid_name']} grid)", "",
           "Generated by " + ", then ".join(f"`{c}`" for c in meta["commands"])
           + f" on {meta['date']} (commit `{meta['commit']}`), {meta['runs']} runs in "
           f"{meta['wall_seconds'] / 60:.1f} min with {meta['workers']} workers "
           f"({meta['run_seconds'] / 60:.1f} min of run time).", "",
           "Grid (factorial within each block): " + "; ".join(
               f"d in {b['dims']}, beta in {b['lrs']}, functions {b['functions']}, seeds {b['seeds']}, "
               f"b in {b.get('budgets_per_d', meta['budgets_per_d'])}" for b in meta["grid"])
           + ". Budgets B = b d evaluations, all read off one run. "
           "x0 ~ U[0,1]^d, sigma0 = 1, SABO's defaults otherwise (N = INGO's default, rho = 0.05 sqrt(d)).", "",
           f"A beta *keeps pace* in a cell (function, d, B) when its median progress in decades, log10 f0 - log10 "
           f"f(mean at B) with log10 f floored at {TARGET:g} (f <= 1e-8 counts as solved), is at least {PACE:.0%} of "
           f"the best beta's there; cells where no beta gained {MIN_DECADES} decades are not scored.", "",
           "## Per beta", "",
           "| beta | cells keeping pace | share min / median | failed runs (worst cell) | diverged (median f above "
           "f0 at the largest budget) | update-safeguard share (worst cell median) | "
           + " | ".join(f"b = {b}" for b in budgets) + " |",
           "|---|---|---|---|---|---|" + "---|" * len(budgets)]
    for lr, v in result["per_lr"].items():
        mark = "**" if lr == result["chosen"] else ""
        out.append(f"| {mark}{lr:g}{mark} | {v['pace']}/{v['cells']} | {fmt(v['share_min'])} / "
                   f"{fmt(v['share_median'])} | {v['failed_runs_max']} | {', '.join(v['diverged']) or '-'} | "
                   f"{v['safeguard_update_share_max']:.1%} | "
                   + " | ".join(f"{v['by_budget'][b][0]}/{v['by_budget'][b][1]}" for b in budgets) + " |")
    out += ["", "Per d (cells keeping pace / scored):", "",
            "| beta | " + " | ".join(f"d = {d}" for d in dims) + " |", "|---|" + "---|" * len(dims)]
    for lr, v in result["per_lr"].items():
        out.append(f"| {lr:g} | " + " | ".join(f"{v['by_d'][d][0]}/{v['by_d'][d][1]}" for d in dims) + " |")
    out += ["", f"Proposed default (keeps pace in the most cells among the betas with no failed run, no divergence "
            f"and a median update-safeguard share of at most {SAFE_SHARE:.0%} in every cell): "
            f"**{fmt(result['chosen'], 'g')}** (safe: {result['safe']}).", "",
            f"## Runs within {NEAR} of x*, sphere (of the seeds run at that d)", "",
            "| d | seeds | B | " + " | ".join(f"beta = {lr:g}" for lr in lrs) + " |",
            "|---|---|---|" + "---|" * len(lrs)]
    pick = {(c["function"], c["d"], c["budget"], c["lr"]): c for c in cells}
    for d in dims:
        for b in budgets:
            row = [pick.get(("sphere", d, b * d, lr)) for lr in lrs]
            if all(c is not None for c in row):
                out.append(f"| {d} | {row[0]['seeds']} | {b * d} | " + " | ".join(str(c["near"]) for c in row) + " |")
    out += ["", "## Median log10 f(mean) per cell", "",
            "| function | d | B | log10 f0 | " + " | ".join(f"beta = {lr:g}" for lr in lrs) + " |",
            "|---|---|---|---|" + "---|" * len(lrs)]
    for fname in sorted({c["function"] for c in cells}):
        for d in dims:
            for b in budgets:
                row = [pick.get((fname, d, b * d, lr)) for lr in lrs]
                if any(c is None for c in row):
                    continue
                out.append(f"| {fname} | {d} | {b * d} | {row[0]['log10_f0']:.1f} | " + " | ".join(
                    ("**" if keeps_pace(c) else "") + fmt(c["log10_f"], ".1f") + ("**" if keeps_pace(c) else "")
                    for c in row) + " |")
    out += ["", "Bold: keeps pace. A failed run counts as +inf (`-`)."]
    return "\n".join(out) + "\n"


def figure(cells: list[dict], result: dict, path: Path) -> list[Path]:
    """Share of the best beta's progress (median over functions) against the budget per d, one line per beta;
    and the cells keeping pace per beta against the budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lrs = list(result["per_lr"])
    dims = sorted({c["d"] for c in cells})
    budgets = sorted({c["budget_per_d"] for c in cells})

    def budget_axis(ax):
        ax.set_xscale("log")
        ax.set_xticks(budgets, [str(b) for b in budgets], fontsize=7.5)
        ax.minorticks_off()
        ax.set_xlim(budgets[0] / 1.3, budgets[-1] * 1.3)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("budget / d (evaluations)")
        ax.grid(alpha=0.3, lw=0.5)

    shown_dims = dims if len(dims) <= 4 else [dims[0], dims[len(dims) // 3], dims[2 * len(dims) // 3], dims[-1]]
    fig, axes = plt.subplots(1, len(shown_dims) + 1, figsize=(3.0 * (len(shown_dims) + 1), 3.4), squeeze=False)
    axes = axes[0]
    colours, markers = rho_study.PALETTE, rho_study.MARKERS
    for ax, d in zip(axes, shown_dims):
        for i, lr in enumerate(lrs):
            by_b = defaultdict(list)
            for c in cells:
                if c["d"] == d and c["lr"] == lr and c["share"] is not None:
                    by_b[c["budget_per_d"]].append(c["share"] if c["failed"] == 0 else 0.0)
            bs = sorted(by_b)
            ax.plot(bs, [rho_study.median(by_b[b]) for b in bs], color=colours[i % len(colours)],
                    marker=markers[i % len(markers)], ms=4, lw=1.8 if lr == result["chosen"] else 1.0,
                    ls="-" if lr != EARLIER_LR else "--", label=f"beta = {lr:g}")
        ax.axhline(PACE, color="0.4", ls=":", lw=1)
        budget_axis(ax)
        ax.set_title(f"d = {d}", fontsize=9)
    axes[0].set_ylabel("share of the best beta's progress\n(median over functions; below 0: worse than f0)",
                       fontsize=8)
    ax = axes[-1]
    for i, lr in enumerate(lrs):
        v = result["per_lr"][lr]["by_budget"]
        bs = sorted(v)
        ax.plot(bs, [v[b][0] / v[b][1] if v[b][1] else np.nan for b in bs], color=colours[i % len(colours)],
                marker=markers[i % len(markers)], ms=4, lw=1.8 if lr == result["chosen"] else 1.0,
                ls="-" if lr != EARLIER_LR else "--", label=f"beta = {lr:g}")
    budget_axis(ax)
    ax.set_title("all d and functions", fontsize=9)
    ax.set_ylabel(f"share of cells keeping pace (>= {PACE:.0%})", fontsize=8.5)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(lrs), fontsize=8, frameon=False)
    fig.suptitle(f"SABO: step size beta against budget (dashed: beta = {EARLIER_LR:g}, the earlier default; thick: "
                 "proposed)", fontsize=9.5)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    paths = [path.with_suffix(".png"), path.with_suffix(".svg")]
    path.parent.mkdir(parents=True, exist_ok=True)
    matplotlib.rcParams["svg.hashsalt"] = "sabo-bench"  # stable ids: the same records, the same SVG
    fig.savefig(paths[0], dpi=110)
    fig.savefig(paths[1], metadata={"Date": None})
    plt.close(fig)
    return paths


# ------------------------------------------------------------------------------------------ cli
REPORT_NAME = "lr_sensitivity"


def outputs_in(out: Path) -> dict[str, Path]:
    return {"json": out / f"{REPORT_NAME}.json", "markdown": out / f"{REPORT_NAME}.md",
            "figure": out / "figures" / REPORT_NAME}


def parse(argv=None) -> argparse.Namespace:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the small grid (written to results/quick/ by default)")
    axes = ap.add_argument_group("grid (each option replaces that axis)")
    axes.add_argument("--dims", type=int_at_least(2), nargs="+")
    axes.add_argument("--lrs", type=rho_study.positive_float, nargs="+")
    axes.add_argument("--functions", nargs="+", choices=sorted(FUNCTIONS))
    axes.add_argument("--seeds", type=seed_int, nargs="+")
    ap.add_argument("--workers", type=rho_study.workers_int, default=min(2, os.cpu_count() or 1),
                    help="worker processes, 1 to the CPU count (default: %(default)s)")
    ap.add_argument("--reanalyse", action="store_true", help="no runs: tables and figure from the stored records")
    ap.add_argument("--resume", action="store_true",
                    help="keep the records of the grid's runs already in the JSON at --out, run only the others")
    ap.add_argument("--out", type=directory, default=None,
                    help="output directory (default: results for the full grid, results/quick for --quick, "
                         "results/custom otherwise)")
    args = ap.parse_args(argv)
    overridden = {k: getattr(args, k) for k in GRID_KEYS if getattr(args, k) is not None}
    args.blocks = [{**block, **overridden} for block in (QUICK if args.quick else FULL)]
    args.grid_name = "custom" if overridden else "quick" if args.quick else "full"
    out = Path(args.out) if args.out is not None else \
        ROOT / "results" if args.grid_name == "full" else ROOT / "results" / args.grid_name
    args.paths = outputs_in(out)
    stored = rho_study.stored_results(args.paths["json"]) if args.paths["json"].is_file() else None
    if args.reanalyse or args.resume:
        if stored is None:
            ap.error(f"--{'reanalyse' if args.reanalyse else 'resume'}: no results JSON with records at "
                     f"{rho_study.shown(args.paths['json'])}")
        args.stored = stored
    elif stored is not None and stored["meta"].get("grid_name") == "full" and args.grid_name != "full":
        ap.error(f"{rho_study.shown(args.paths['json'])} holds the full grid; not replaced by this {args.grid_name} "
                 "grid: write it elsewhere with --out")
    return args


def task_key(t: dict) -> tuple:
    """What identifies a run (a task or its record): function, d, beta, seed and its budgets."""
    budgets = t["budgets"] if "budgets" in t else [b * t["d"] for b in t["budgets_per_d"]]
    return t["function"], t["d"], float(t["lr"]), t["seed"], tuple(budgets)


def run_grid(args, argv) -> tuple[list[dict], dict]:
    tasks = grid(args.blocks)
    wanted = {task_key(t) for t in tasks}
    kept = [r for r in args.stored["records"] if task_key(r) in wanted] if args.resume else []
    done = {task_key(r) for r in kept}
    tasks = [t for t in tasks if task_key(t) not in done]
    print(f"{len(tasks)} runs ({len(kept)} kept), {args.workers} worker(s)", flush=True)
    t0 = time.perf_counter()
    records = list(kept)
    records += rho_study.run_tasks(run_one, tasks, args.workers, t0)
    records.sort(key=lambda r: (r["function"], r["d"], r["lr"], r["seed"]))
    command = " ".join(["python benchmarks/lr_sensitivity.py", *(sys.argv[1:] if argv is None else argv)])
    meta = {"grid_name": args.grid_name,
            "commands": [*(args.stored["meta"]["commands"] if kept else []), command],
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": rho_study.git_commit("benchmarks/lr_sensitivity.py"), "python": platform.python_version(),
            "numpy": np.__version__, "workers": args.workers, "runs": len(records),
            "wall_seconds": time.perf_counter() - t0 + (args.stored["meta"]["wall_seconds"] if kept else 0.0),
            "run_seconds": sum(r["seconds"] for r in records),
            "grid": args.blocks, "budgets_per_d": list(BUDGETS_PER_D), "resumed": bool(kept),
            "popsize_by_d": {str(d): ingo_default_popsize(d) for d in sorted({r["d"] for r in records})}}
    return records, meta


def main(argv=None) -> dict:
    args = parse(argv)
    if args.reanalyse:
        records, meta = args.stored["records"], args.stored["meta"]
    else:
        records, meta = run_grid(args, argv)
    cells = cells_of(records)
    result = choice(cells)
    fig_paths = figure(cells, result, args.paths["figure"])
    args.paths["json"].parent.mkdir(parents=True, exist_ok=True)
    args.paths["json"].write_text(json.dumps(rho_study.rounded({"meta": meta, "choice": result, "cells": cells,
                                                                "records": records}), separators=(",", ":")) + "\n")
    args.paths["markdown"].write_text(markdown(meta, cells, result))
    print("cells keeping pace per beta: " + ", ".join(f"{lr:g}: {v['pace']}/{v['cells']}"
                                                       for lr, v in result["per_lr"].items()))
    print(f"proposed default beta: {result['chosen']} (safe: {result['safe']})")
    print("wrote", args.paths["json"], args.paths["markdown"], *fig_paths)
    return {"meta": meta, "choice": result, "cells": cells, "records": records}


if __name__ == "__main__":
    main()
