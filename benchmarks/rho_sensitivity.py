"""Sensitivity of SABO to its KL radius rho (and step size beta) against d and N, INGO as the reference.

    python benchmarks/rho_sensitivity.py              # full grid, 2508 runs: ~13 CPU-minutes; writes results/
    python benchmarks/rho_sensitivity.py --quick      # 126 runs: ~1 min with 2 workers; writes results/quick/
    python benchmarks/rho_sensitivity.py --reanalyse  # tables and figure again from the stored records

(The full grid took 33 min of wall time with 2 workers on 2 cores shared with about 12 other
busy processes, load average 12-14; /usr/bin/time: 39% of one core over the run.)

Setup (a library user's): x0 ~ U[0, 1]^d (one x0 per seed and d, shared by every method),
``sigma0=1.0``, z-score shaping with the sample-mean baseline, closed-form perturbation
(eq. sec31_5), covariance safeguard at 0.05 -- the library defaults except rho, beta and N,
which form the grid:

* rho: absolute values (``--rhos``) and rho = c sqrt(d) (``--rho-scales``), constant over a run;
* beta (``lr``): ``--lrs``;  N: ``--popsizes`` (``default`` = ``ingo_default_popsize(d)``);
* d: ``--dims``;  functions: ``sphere`` (sum x_i^2, defined here: not one of the paper's) and the
  paper's ``ellipsoid`` and ``levy`` (``replication.synthetic.functions``);  seeds: ``--seeds``.

The full grid is two blocks, factorial within each (see ``FULL``): d in {10, 20, 50, 200} with
beta in {0.03, 0.1, 0.3} and seeds {0, 1, 2}; d = 1000 with beta = 0.1 and seeds {0, 1} only (cost).

Budget: the same number of evaluations for both methods, E = T N with
T = max(``--ingo-iters``, ``--evals-per-dim`` d / N) (INGO: T iterations of N evaluations; SABO:
T/2 iterations of 2N). f(mean) is recorded at ``--checkpoints`` equally spaced evaluation counts;
SABO's value at E is compared with INGO's at E (equal evaluations) and at E/2 (equal iterations:
INGO's iteration count there equals SABO's at E).

Per run (one record, long format): f(mean) at the checkpoints, SABO's safeguard shares
(iterations with a clamp in the perturbation round, in the update round, per iteration) and
the Mahalanobis norm ||delta_mu||_{Sigma_t^-1} = ||(mu_hat - mu_t) / sigma_t|| of every
perturbation, measured on the optimizer (``perturbed_mean - mean`` after the perturbation
round). The closed form moves the mean by rho ||Sigma^1/2 g'|| / sqrt(||Sigma G'||^2 +
0.5 ||Sigma^1/2 g'||^2) <= sqrt(2) rho (Lemma rho_gradient).

Per cell (function, d, N, beta, rho; medians over seeds of log10 f): ``gap_evals`` =
log10 f_SABO(E) - log10 f_INGO(E); ``gap_iters`` = log10 f_SABO(E) - log10 f_INGO(E/2);
``progress_iters`` = log10(f_SABO(E)/f0) / log10(f_INGO(E/2)/f0), the share of INGO's
per-iteration progress (in decades) that SABO keeps (1 = the perturbation costs nothing per
iteration; at equal evaluations SABO then still has half INGO's iterations). A cell *keeps pace*
when progress_iters >= ``--tolerance`` (0.9). The proposed default c of rho = c sqrt(d) is the
largest c of the grid at which (as at every smaller c) the safeguard never fires in any run and
every case at the library's default beta = 0.1 keeps pace (:func:`rule_analysis`).

Writes ``--json`` (records, cells, the rule analysis), ``--markdown`` (tables) and
``--figure``.{png,svg}, by default ``<out>/rho_sensitivity.{json,md}`` and
``<out>/figures/rho_sensitivity.{png,svg}`` with ``--out`` = ``results`` for the full grid (the files
docs/sabo/choosing-rho.md cites), ``results/quick`` for ``--quick`` and ``results/custom`` for any other grid or budget.
A reduced run (any but the full grid with the default budget) refuses to replace the full grid's
results (:func:`replacement_refusal`) unless ``--force``. Warnings the optimizers raise are counted
per record, not shown.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # two single-threaded workers, not two workers fighting over BLAS threads

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's packages, not whichever one is installed

import sabo  # noqa: E402
from baselines.ingo import INGO  # noqa: E402
from replication.arguments import ArgumentParser, directory, int_at_least, number, positive_int, seed_int  # noqa: E402
from replication.synthetic.functions import ellipsoid, levy  # noqa: E402
from sabo.gaussian_search import ingo_default_popsize  # noqa: E402


def sphere(X) -> np.ndarray:
    """sum_i x_i^2 (x* = 0)."""
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    return np.sum(X * X, axis=1)


FUNCTIONS = {"sphere": (sphere, 0.0), "ellipsoid": (ellipsoid, 0.0), "levy": (levy, 1.0)}
"""name -> (function, every coordinate of x*); F(x*) = 0 for all three."""

GRID_KEYS = ("dims", "rhos", "rho_scales", "lrs", "popsizes", "functions", "seeds")
_BASE = {"rhos": [0.01, 1.0, 10.0], "rho_scales": [0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5],
         "popsizes": ["default", "100"], "functions": ["sphere", "ellipsoid", "levy"]}
FULL = [{**_BASE, "dims": [10, 20, 50, 200], "lrs": [0.03, 0.1, 0.3], "seeds": [0, 1, 2]},
        # d = 1000: one beta and two seeds (a run there costs ~5x one at d = 200; seeds differ little there)
        {**_BASE, "dims": [1000], "lrs": [0.1], "seeds": [0, 1]}]
"""The full grid as blocks (the factorial product within each block)."""
QUICK = [{"dims": [10, 50, 200], "rhos": [0.01, 1.0], "rho_scales": [0.05, 0.1, 0.2, 0.5], "lrs": [0.1],
          "popsizes": ["default"], "functions": ["sphere", "ellipsoid", "levy"], "seeds": [0, 1]}]

PROGRESS_TOLERANCE = 0.9   # a rho "costs nothing" if SABO keeps >= 90% of INGO's per-iteration progress
SHARE_THRESHOLDS = [0.0, 0.01, 0.05, 0.1, 0.2, 0.5]
DEFAULT_LR = 0.1           # the library's default beta: a default rho is judged together with it
MIN_INGO_DECADES = 0.3     # below this INGO made no measurable progress and a progress share means nothing

# Okabe-Ito (colour-blind safe), one colour and marker per d
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]


# ----------------------------------------------------------------------------------------- runs
def popsize_of(rule: str, d: int) -> int:
    return ingo_default_popsize(d) if rule == "default" else int(rule)


def perturbation_mahalanobis(opt: sabo.SABO) -> float:
    """||mu_hat - mu_t||_{Sigma_t^-1} of the pending perturbation (call after the perturbation round's tell)."""
    if opt.phase != 1:
        raise ValueError("perturbation_mahalanobis needs a SABO optimizer in its update round (phase 1)")
    return float(np.sqrt(np.sum((opt.perturbed_mean - opt.mean) ** 2 / opt.sigma2)))


def x0_for(seed: int, d: int) -> np.ndarray:
    return np.random.default_rng([seed, d]).uniform(0.0, 1.0, d)


def run_one(task: dict) -> dict:
    """One optimizer run of the grid; returns its record."""
    fn, x_star = FUNCTIONS[task["function"]]
    d, n, seed = task["d"], task["popsize"], task["seed"]
    budget = task["ingo_iters"] * n
    targets = [budget * k // task["checkpoints"] for k in range(1, task["checkpoints"] + 1)]
    x0 = x0_for(seed, d)
    t0, cpu0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if task["method"] == "sabo":
            opt = sabo.SABO(x0, sigma0=1.0, popsize=n, lr=task["lr"], rho=task["rho"], seed=seed)
        else:
            opt = INGO(x0, sigma0=1.0, popsize=n, lr=task["lr"], seed=seed)
        f_at, evals_at, maha, status = [float(fn(x0)[0])], [0], [], "ok"
        try:
            while opt.nfev < budget:
                X = opt.ask()
                opt.tell(X, fn(X))
                if task["method"] == "sabo" and opt.phase == 1:
                    maha.append(perturbation_mahalanobis(opt))
                    continue
                if opt.nfev >= targets[len(f_at) - 1]:
                    f_at.append(float(fn(opt.mean)[0]))
                    evals_at.append(opt.nfev)
        except (FloatingPointError, ValueError) as exc:  # a diverged run is a result, not a crash
            status = f"failed at nfev {opt.nfev}: {type(exc).__name__}: {exc}"[:300]
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - cpu0
    nit = max(opt.nit, 1)
    stats = opt.stats
    record = {
        **{k: task[k] for k in ("method", "function", "d", "popsize_rule", "popsize", "lr", "seed")},
        "rho": task.get("rho"), "rho_kind": task.get("rho_kind"), "rho_scale": task.get("rho_scale"),
        "rho_over_sqrt_d": None if task.get("rho") is None else task["rho"] / np.sqrt(d),
        "ingo_iters": task["ingo_iters"], "budget_evals": budget, "checkpoints": task["checkpoints"],
        "nfev": opt.nfev, "nit": opt.nit, "status": status,
        "x_star": x_star, "f0": f_at[0], "evals_at": evals_at, "f_at": f_at,
        "safeguard_update_share": stats["safeguard_update"] / nit,
        "warnings": len(caught), "seconds": seconds, "cpu_seconds": cpu_seconds,
    }
    if task["method"] == "sabo":
        m = np.asarray(maha)
        record.update(
            safeguard_perturbation_share=stats["safeguard_perturbation"] / nit,
            maha_mean=float(m.mean()) if m.size else None, maha_median=float(np.median(m)) if m.size else None,
            maha_max=float(m.max()) if m.size else None,
            maha_over_rho_mean=float(m.mean() / task["rho"]) if m.size else None)
    return record


def ingo_iterations(d: int, popsize: int, ingo_iters: int, evals_per_dim: float, checkpoints: int) -> int:
    """The budget in INGO iterations: max(ingo_iters, evals_per_dim d / N), rounded up so that every
    checkpoint falls on a SABO iteration (a multiple of 2 x checkpoints)."""
    step = 2 * checkpoints
    return int(-(-max(ingo_iters, int(np.ceil(evals_per_dim * d / popsize))) // step) * step)


def grid(blocks: list[dict], budget: dict) -> list[dict]:
    """Every run of the grid, the most expensive first (keeps both workers busy to the end)."""
    tasks = []
    for cfg in blocks:
        for d in cfg["dims"]:
            rhos = [(float(r), "absolute", None) for r in cfg["rhos"]]
            rhos += [(float(c * np.sqrt(d)), "sqrt_d", float(c)) for c in cfg["rho_scales"]]
            for rule in cfg["popsizes"]:
                n = popsize_of(rule, d)
                its = ingo_iterations(d, n, **budget)
                for fname in cfg["functions"]:
                    for lr in cfg["lrs"]:
                        for seed in cfg["seeds"]:
                            base = {"function": fname, "d": d, "popsize_rule": rule, "popsize": n,
                                    "lr": float(lr), "seed": seed, "ingo_iters": its,
                                    "checkpoints": budget["checkpoints"]}
                            tasks.append({**base, "method": "ingo"})
                            tasks += [{**base, "method": "sabo", "rho": r, "rho_kind": kind, "rho_scale": c}
                                      for r, kind, c in rhos]
    unique = {tuple(sorted(t.items())): t for t in tasks}  # command-line axes can make two blocks overlap
    return sorted(unique.values(), key=lambda t: -t["ingo_iters"] * t["popsize"] * t["d"])


# ------------------------------------------------------------------------------------- analysis
def log10f(f: float | None) -> float:
    """log10 of a value >= 0, floored at 1e-300; +inf for an overflow (stored as None in the JSON)."""
    return float(np.log10(max(f, 1e-300))) if f is not None and np.isfinite(f) else np.inf


def log10f_at(record: dict, k: int) -> float:
    """log10 f(mean) at checkpoint k (0 = x0); +inf once the run failed (k = -1: the budget's end)."""
    if record["status"] != "ok" and (k == -1 or k >= len(record["f_at"])):
        return np.inf
    return log10f(record["f_at"][k])


def median(values) -> float:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else float("nan")


def rho_label(r: dict) -> str:
    return f"{r['rho_scale']:g}*sqrt(d)" if r["rho_kind"] == "sqrt_d" else f"{r['rho']:g}"


def cells_of(records: list[dict]) -> list[dict]:
    """Aggregate seeds: one cell per (function, d, N, beta, rho), compared with INGO's cell."""
    groups = defaultdict(list)
    for r in records:
        groups[(r["method"], r["function"], r["d"], r["popsize_rule"], r["lr"], r["rho"], r["rho_kind"])].append(r)
    cells = []
    for key, runs in groups.items():
        method, fname, d, rule, lr, rho, kind = key
        if method != "sabo":
            continue
        ingo = groups[("ingo", fname, d, rule, lr, None, None)]
        half = runs[0]["checkpoints"] // 2  # checkpoint index of E/2
        lf0 = median(log10f(r["f0"]) for r in runs)
        sabo_end = median(log10f_at(r, -1) for r in runs)
        ingo_end = median(log10f_at(r, -1) for r in ingo)
        ingo_half = median(log10f_at(r, half) for r in ingo)
        ingo_decades = ingo_half - lf0
        cells.append({
            "function": fname, "d": d, "popsize_rule": rule, "popsize": runs[0]["popsize"], "lr": lr,
            "rho": rho, "rho_kind": kind, "rho_scale": runs[0]["rho_scale"], "rho_over_sqrt_d": rho / np.sqrt(d),
            "seeds": len(runs), "failed": sum(r["status"] != "ok" for r in runs),
            "log10_f0": lf0, "log10_f_sabo": sabo_end, "log10_f_ingo_evals": ingo_end,
            "log10_f_ingo_iters": ingo_half,
            "gap_evals": sabo_end - ingo_end, "gap_iters": sabo_end - ingo_half,
            "progress_iters": (sabo_end - lf0) / ingo_decades if ingo_decades < -MIN_INGO_DECADES else None,
            "progress_evals": (sabo_end - lf0) / (ingo_end - lf0) if ingo_end - lf0 < -MIN_INGO_DECADES else None,
            "safeguard_perturbation_share": median(r["safeguard_perturbation_share"] for r in runs),
            "safeguard_perturbation_share_max": max(r["safeguard_perturbation_share"] for r in runs),
            "safeguard_update_share": median(r["safeguard_update_share"] for r in runs),
            "ingo_safeguard_update_share": median(r["safeguard_update_share"] for r in ingo),
            "maha_mean": median(r["maha_mean"] for r in runs),
            "maha_over_rho": median(r["maha_over_rho_mean"] for r in runs),
            "maha_max_over_rho": max((r["maha_max"] or 0.0) / rho for r in runs),
        })
    return sorted(cells, key=lambda c: (c["function"], c["d"], c["popsize_rule"], c["lr"], c["rho"]))


def progress_ok(c: dict, tolerance: float) -> bool:
    return c["progress_iters"] is not None and c["progress_iters"] >= tolerance and c["failed"] == 0


def rule_analysis(cells: list[dict], tolerance: float) -> dict:
    """Candidate rules (rho = c sqrt(d), or a constant) judged over every (function, d, N, beta) case.

    ``chosen_scale``, the proposed default: the largest c of the grid such that, at that c and every
    smaller one, (i) the safeguard never fires in any run and (ii) every case at the library's default
    beta keeps pace. ``strict_scale``: the same with (ii) over every beta of the grid.
    """
    def summary(group):
        scored = [c for c in group if c["progress_iters"] is not None]
        prog = [c["progress_iters"] for c in scored]
        at_lr = [c for c in scored if c["lr"] == DEFAULT_LR]
        return {
            "cases": len(group), "cases_scored": len(scored),
            "cases_ok": sum(progress_ok(c, tolerance) for c in scored),
            "cases_scored_default_lr": len(at_lr), "cases_ok_default_lr": sum(progress_ok(c, tolerance) for c in at_lr),
            "progress_iters_min": min(prog) if prog else None, "progress_iters_median": median(prog),
            "progress_iters_min_default_lr": min((c["progress_iters"] for c in at_lr), default=None),
            "progress_iters_median_default_lr": median(c["progress_iters"] for c in at_lr),
            "gap_evals_median": median(c["gap_evals"] for c in group),
            "gap_iters_median": median(c["gap_iters"] for c in group),
            "gap_iters_max": max(c["gap_iters"] for c in group),
            "safeguard_share_max": max(c["safeguard_perturbation_share_max"] for c in group),
            "safeguard_share_median": median(c["safeguard_perturbation_share"] for c in group),
            "maha_over_sqrt_d_min": min(c["maha_mean"] / np.sqrt(c["d"]) for c in group),
            "maha_over_sqrt_d_max": max(c["maha_mean"] / np.sqrt(c["d"]) for c in group),
            "dims_failing": sorted({c["d"] for c in scored if not progress_ok(c, tolerance)}),
        }

    def largest(table, passes):
        best = None
        for key, v in table.items():  # ascending
            if not passes(v):
                break
            best = key
        return best

    by_scale, by_const = defaultdict(list), defaultdict(list)
    for c in cells:
        (by_scale[c["rho_scale"]] if c["rho_kind"] == "sqrt_d" else by_const[c["rho"]]).append(c)
    scales = {s: summary(g) for s, g in sorted(by_scale.items())}
    consts = {r: summary(g) for r, g in sorted(by_const.items())}
    chosen = largest(scales, lambda v: v["safeguard_share_max"] == 0 and v["cases_scored_default_lr"] > 0
                     and v["cases_ok_default_lr"] == v["cases_scored_default_lr"])
    strict = largest(scales, lambda v: v["cases_scored"] > 0 and v["cases_ok"] == v["cases_scored"])
    safe_consts = [r for r, v in consts.items() if v["cases_ok"] == v["cases_scored"] and v["cases_scored"]]

    # how well "safeguard share > s" flags the cells that lose more than (1 - tolerance) of INGO's progress
    scored = [c for c in cells if c["progress_iters"] is not None]
    bad = [c for c in scored if not progress_ok(c, tolerance)]
    flags = []
    for s in SHARE_THRESHOLDS:
        flagged = [c for c in scored if c["safeguard_perturbation_share"] > s]
        flags.append({"share_above": s, "cells_flagged": len(flagged),
                      "flagged_that_lose": sum(not progress_ok(c, tolerance) for c in flagged),
                      "flagged_progress_median": median(c["progress_iters"] for c in flagged),
                      "unflagged_losing_progress_median": median(c["progress_iters"] for c in bad
                                                                 if c["safeguard_perturbation_share"] <= s),
                      "losing_cells": len(bad), "losing_flagged": sum(c["safeguard_perturbation_share"] > s
                                                                      for c in bad)})
    at_bound = 0.5 * (1 - 1e-9)  # c = 0.5 lands on the bound up to rounding
    theorem = {}
    for name, pick in (("rho >= sqrt(d)/2", lambda c: c["rho_over_sqrt_d"] >= at_bound),
                       ("rho < sqrt(d)/2", lambda c: c["rho_over_sqrt_d"] < at_bound)):
        g = [c for c in scored if pick(c)]
        theorem[name] = {"cells": len(g), "cells_ok": sum(progress_ok(c, tolerance) for c in g),
                         "safeguard_share_median": median(c["safeguard_perturbation_share"] for c in g)}
    return {"tolerance": tolerance, "default_lr": DEFAULT_LR, "scales": scales, "constants": consts,
            "chosen_scale": chosen, "strict_scale": strict,
            "safe_constants": safe_consts, "largest_safe_rho": largest_safe_rho(cells, tolerance),
            "share_flags": flags, "theorem_bound": theorem}


def largest_safe_rho(cells: list[dict], tolerance: float) -> list[dict]:
    """Per d and per (d, beta, N): the largest rho (either kind) up to which every scored case keeps pace.

    If this rho grows like sqrt(d) across d, rho / sqrt(d) is the scale-free quantity a default should fix."""
    groups = defaultdict(lambda: defaultdict(list))
    for c in cells:
        if c["progress_iters"] is not None:
            groups[(c["d"], None, None)][c["rho"]].append(c)
            groups[(c["d"], c["lr"], c["popsize_rule"])][c["rho"]].append(c)
    out = []
    for (d, lr, rule), by_rho in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2] or "")):
        safe = None
        for rho in sorted(by_rho):
            if not all(progress_ok(c, tolerance) for c in by_rho[rho]):
                break
            safe = rho
        first_bad = next((r for r in sorted(by_rho) if safe is None or r > safe), None)
        out.append({"d": d, "lr": lr, "popsize_rule": rule, "rho": safe,
                    "rho_over_sqrt_d": None if safe is None else safe / np.sqrt(d),
                    "next_rho_over_sqrt_d": None if first_bad is None else first_bad / np.sqrt(d)})
    return out


# --------------------------------------------------------------------------------------- output
def fmt(v, spec=".2f") -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    return format(v, spec)


def rule_table(name: str, table: dict) -> list[str]:
    lines = [f"| {name} | cases keeping pace | at default beta | min / median progress_iters | at default beta | "
             "median gap, equal evals (decades) | median / max gap, equal iterations | median / max safeguard share "
             "| mean Mahalanobis shift / sqrt(d) | d failing |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, v in table.items():
        lines.append(f"| {key:g} | {v['cases_ok']}/{v['cases_scored']} | {v['cases_ok_default_lr']}/"
                     f"{v['cases_scored_default_lr']} | {fmt(v['progress_iters_min'])} / "
                     f"{fmt(v['progress_iters_median'])} | {fmt(v['progress_iters_min_default_lr'])} / "
                     f"{fmt(v['progress_iters_median_default_lr'])} | {fmt(v['gap_evals_median'])} | "
                     f"{fmt(v['gap_iters_median'])} / {fmt(v['gap_iters_max'])} | "
                     f"{fmt(v['safeguard_share_median'], '.1%')} / {fmt(v['safeguard_share_max'], '.1%')} | "
                     f"{fmt(v['maha_over_sqrt_d_min'], '.3f')}-{fmt(v['maha_over_sqrt_d_max'], '.3f')} | "
                     f"{v['dims_failing'] or '-'} |")
    return lines


def markdown(meta: dict, cells: list[dict], rules: dict) -> str:
    tol = rules["tolerance"]
    out = [f"# SABO rho sensitivity ({meta['grid_name']} grid)", "",
           f"Generated by `{meta['command']}` on {meta['date']} (commit `{meta['commit']}`), "
           f"{meta['runs']} runs in {meta['wall_seconds'] / 60:.1f} min with {meta['workers']} workers "
           f"({meta['run_seconds'] / 60:.1f} min of run time"
           + (f", {meta['cpu_seconds'] / 60:.1f} CPU-min" if meta.get("cpu_seconds") is not None else "")
           + (f"; load average at the end {meta['load_average_end'][0]:.1f}" if meta.get("load_average_end") else "")
           + ")" + (f"; tables rebuilt from its records on {meta['reanalysed']['date']} (commit "
                    f"`{meta['reanalysed']['commit']}`, `--reanalyse`)" if meta.get("reanalysed") else "") + ".", "",
           "Grid (factorial within each block): " + "; ".join(
               f"d in {b['dims']}, N in {b['popsizes']}, beta in {b['lrs']}, rho in {b['rhos']} and c*sqrt(d) for "
               f"c in {b['rho_scales']}, functions {b['functions']}, seeds {b['seeds']}" for b in meta["grid"])
           + ". Budget: E = T N evaluations, T = max({ingo_iters}, {evals_per_dim:g} d / N) rounded up to a "
           "multiple of {step} (INGO: T iterations, SABO: T/2); T by (d, N): {by_d}. x0 ~ U[0,1]^d, sigma0 = 1, "
           "library defaults otherwise.".format(step=2 * meta["budget"]["checkpoints"],
                                                 by_d=meta["ingo_iters_by_d_n"], **meta["budget"]), "",
           f"A case *keeps pace* when SABO keeps >= {tol:.0%} of INGO's per-iteration progress in decades "
           "(`progress_iters`, median over seeds). Safeguard share = share of iterations whose perturbation "
           "round clamped a precision ratio.", "",
           "## Rules rho = c sqrt(d)", "",
           f"progress_iters: over all cases, and at the default beta = {rules['default_lr']:g}. Max safeguard "
           "share: over every run of the row (not only the medians).", "",
           *rule_table("c", rules["scales"]), "", "## Constant rho", "", *rule_table("rho", rules["constants"])]
    chosen = rules["chosen_scale"]
    out += ["", f"Proposed c (the largest c at which, as at every smaller c, the safeguard never fires and every "
            f"case at beta = {rules['default_lr']:g} keeps pace): **{fmt(chosen, 'g')}**. Largest c with every "
            f"case at every beta keeping pace: {fmt(rules['strict_scale'], 'g')}. Constants with every case "
            f"keeping pace: {rules['safe_constants'] or 'none'}.", "",
            "## Largest rho keeping pace, per d", "",
            "Every (function, N, beta) case at that rho and at every smaller rho of the grid keeps pace; the "
            "next rho of the grid does not.", "",
            "| d | beta | N | largest rho | / sqrt(d) | next rho / sqrt(d) |", "|---|---|---|---|---|---|"]
    for v in rules["largest_safe_rho"]:
        out.append(f"| {v['d']} | {v['lr'] if v['lr'] is not None else 'all'} | "
                   f"{v['popsize_rule'] or 'all'} | {fmt(v['rho'], '.3g')} | {fmt(v['rho_over_sqrt_d'], '.3g')} | "
                   f"{fmt(v['next_rho_over_sqrt_d'], '.3g')} |")
    if chosen is not None:
        out += ["", f"## At c = {chosen:g} and at the current default rho = 1 (beta = 0.1, default N)", "",
                "| d | function | rho | gap equal evals | gap equal its | progress_iters | safeguard share | "
                "rho = 1: gap equal evals | gap equal its | progress_iters | safeguard share |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        pick = {(c["d"], c["function"], c["rho_kind"], c["rho_scale"] if c["rho_kind"] == "sqrt_d" else c["rho"]): c
                for c in cells if c["lr"] == 0.1 and c["popsize_rule"] == "default"}
        for d, fname in sorted({(c["d"], c["function"]) for c in cells}):
            a, b = pick.get((d, fname, "sqrt_d", chosen)), pick.get((d, fname, "absolute", 1.0))
            if a is None:
                continue
            row = (f"| {d} | {fname} | {a['rho']:.3g} | {fmt(a['gap_evals'], '.1f')} | {fmt(a['gap_iters'], '.2f')} "
                   f"| {fmt(a['progress_iters'])} | {a['safeguard_perturbation_share']:.0%} |")
            row += " - | - | - | - |" if b is None else (
                f" {fmt(b['gap_evals'], '.1f')} | {fmt(b['gap_iters'], '.2f')} | {fmt(b['progress_iters'])} | "
                f"{b['safeguard_perturbation_share']:.0%} |")
            out.append(row)
    out += ["", "## Safeguard share as a warning signal", "",
            "A cell is flagged when its median safeguard share exceeds the threshold.", "",
            "| share above | cells flagged | of which lose pace | median progress_iters of flagged | "
            "losing cells flagged / all losing | median progress_iters of losing cells not flagged |",
            "|---|---|---|---|---|---|"]
    for f in rules["share_flags"]:
        out.append(f"| {f['share_above']:.0%} | {f['cells_flagged']} | {f['flagged_that_lose']} | "
                   f"{fmt(f['flagged_progress_median'])} | {f['losing_flagged']}/{f['losing_cells']} | "
                   f"{fmt(f['unflagged_losing_progress_median'])} |")
    out += ["", "## The theorems' assumption rho < sqrt(d)/2", "", "| cells | keeping pace | median safeguard share |",
            "|---|---|---|"]
    for name, v in rules["theorem_bound"].items():
        out.append(f"| {name} | {v['cells_ok']}/{v['cells']} | {fmt(v['safeguard_share_median'], '.1%')} |")
    out += ["", "## Per cell at beta = 0.1, default N (median over seeds)", "",
            "| function | d | N | rho | rho/sqrt(d) | log10 f SABO | INGO (equal evals) | INGO (equal its) | "
            "gap evals | gap its | progress_iters | safeguard share | mean Mahalanobis shift / rho |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        if c["lr"] != 0.1 or c["popsize_rule"] != "default":
            continue
        out.append(f"| {c['function']} | {c['d']} | {c['popsize']} | {rho_label(c)} = {c['rho']:.3g} | "
                   f"{c['rho_over_sqrt_d']:.3g} | {fmt(c['log10_f_sabo'], '.1f')} | "
                   f"{fmt(c['log10_f_ingo_evals'], '.1f')} | {fmt(c['log10_f_ingo_iters'], '.1f')} | "
                   f"{fmt(c['gap_evals'], '.1f')} | {fmt(c['gap_iters'], '.1f')} | {fmt(c['progress_iters'])} | "
                   f"{c['safeguard_perturbation_share']:.0%} | {fmt(c['maha_over_rho'], '.2f')} |")
    return "\n".join(out) + "\n"


def figure(cells: list[dict], chosen: float | None, path: Path) -> list[Path]:
    """Per d (beta = 0.1, or the smallest beta run; the first N rule; median over functions and seeds):
    progress vs rho and rho/sqrt(d), gap at equal evaluations, safeguard share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lrs = {c["lr"] for c in cells}
    lr = 0.1 if 0.1 in lrs else min(lrs)
    rule = "default" if any(c["popsize_rule"] == "default" for c in cells) else cells[0]["popsize_rule"]
    sel = [c for c in cells if c["lr"] == lr and c["popsize_rule"] == rule]
    dims = sorted({c["d"] for c in sel})
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 6.6))
    panels = [(axes[0, 0], "rho", "progress_iters", "rho (absolute)", "SABO progress / INGO's, equal iterations"),
              (axes[0, 1], "rho_over_sqrt_d", "progress_iters", "rho / sqrt(d)",
               "SABO progress / INGO's, equal iterations"),
              (axes[1, 0], "rho_over_sqrt_d", "gap_evals", "rho / sqrt(d)",
               "log10 f: SABO - INGO, equal evaluations"),
              (axes[1, 1], "rho_over_sqrt_d", "safeguard_perturbation_share", "rho / sqrt(d)",
               "safeguard share (perturbation round)")]
    for ax, xkey, ykey, xlabel, ylabel in panels:
        for i, d in enumerate(dims):
            by_x = defaultdict(list)
            for c in sel:
                if c["d"] == d and c[ykey] is not None:
                    by_x[c[xkey]].append(c[ykey])
            xs = sorted(by_x)
            ax.plot(xs, [median(by_x[x]) for x in xs], color=PALETTE[i % len(PALETTE)],
                    marker=MARKERS[i % len(MARKERS)], ms=4, lw=1.2, label=f"d = {d}")
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel, fontsize=8.5)
        if xkey == "rho_over_sqrt_d":
            ax.axvline(0.5, color="0.3", ls=":", lw=1)
            if chosen is not None:
                ax.axvline(chosen, color="0.3", ls="--", lw=1)
        ax.grid(alpha=0.3, lw=0.5)
    axes[0, 0].legend(fontsize=7.5)
    fig.suptitle(f"SABO vs INGO: beta = {lr:g}, N = {rule}, median over functions and seeds\n"
                 "dotted: rho = sqrt(d)/2 (theorems' bound); dashed: proposed c", fontsize=9.5)
    fig.tight_layout()
    paths = [path.with_suffix(".png"), path.with_suffix(".svg")]
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(paths[0], dpi=110)
    fig.savefig(paths[1])
    plt.close(fig)
    return paths


def rounded(obj, digits: int = 6):
    """Floats to ``digits`` significant digits (keeps the JSON small and diffable)."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [rounded(v, digits) for v in obj]
    if isinstance(obj, np.generic):
        return rounded(obj.item(), digits)
    return obj


def git_commit(script: str = "benchmarks/rho_sensitivity.py") -> str:
    """HEAD's short hash, with "+local changes" when the code ``script`` runs differs from it."""
    def git(*cmd):
        return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--", script, "sabo", "baselines",
                      "replication")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" +local changes" if changed else "")


# ------------------------------------------------------------------------------------------ cli
DEFAULT_BUDGET = {"ingo_iters": 1000, "evals_per_dim": 50.0, "checkpoints": 10}
REPORT_NAME = "rho_sensitivity"


def outputs_in(out: Path) -> dict[str, Path]:
    """The files a run writes to the directory ``out``: ``<out>/rho_sensitivity.{json,md}`` and
    ``<out>/figures/rho_sensitivity`` (the figure's path without suffix: .png and .svg)."""
    return {"json": out / f"{REPORT_NAME}.json", "markdown": out / f"{REPORT_NAME}.md",
            "figure": out / "figures" / REPORT_NAME}


def committed_outputs() -> list[Path]:
    """The full grid's files that docs/sabo/choosing-rho.md cites (under ``results/``): only a full-grid run
    replaces them."""
    paths = outputs_in(ROOT / "results")
    return [paths["json"], paths["markdown"], paths["figure"].with_suffix(".png"), paths["figure"].with_suffix(".svg")]


positive_float = number(float, "a finite number > 0", lambda v: v > 0)
non_negative_float = number(float, "a finite number >= 0", lambda v: v >= 0)
tolerance_float = number(float, "a number in (0, 1]", lambda v: 0 < v <= 1)


def popsize_rule(text: str) -> str:
    """``--popsizes``: 'default' or an integer >= 2 (kept as text: the records name the rule)."""
    if text == "default":
        return text
    try:
        return str(int_at_least(2)(text))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be 'default' or an integer >= 2 (got {text!r})") from None


def workers_int(text: str) -> int:
    """``--workers``: an integer from 1 to the machine's CPU count."""
    cpus = os.cpu_count() or 1
    return number(int, f"an integer from 1 to {cpus}, this machine's CPU count", lambda v: 1 <= v <= cpus)(text)


def is_default_budget(args) -> bool:
    return {k: getattr(args, k) for k in DEFAULT_BUDGET} == DEFAULT_BUDGET


def grid_name_of(args) -> str:
    """``full`` or ``quick`` for those grids with the default budget, else ``custom``."""
    if any(getattr(args, k) is not None for k in GRID_KEYS) or not is_default_budget(args):
        return "custom"
    return "quick" if args.quick else "full"


def stored_results(path: Path) -> dict | None:
    """The results JSON at ``path`` (``meta`` and ``records`` at least), or None where there is none
    (or it is unreadable, or not such a file)."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(stored, dict) and isinstance(stored.get("meta"), dict) and isinstance(stored.get("records"), list)
    return stored if ok else None


def shown(path: Path) -> str:
    """``path`` relative to the working directory where it lies below it (for messages)."""
    path = Path(path).resolve()
    return str(path.relative_to(Path.cwd().resolve())) if path.is_relative_to(Path.cwd().resolve()) else str(path)


def replacement_refusal(args, grid_name: str, runs: int) -> str | None:
    """Why this run must not write its outputs (one line), or None.

    Only the full grid (with the default budget) replaces the full grid's results: a reduced run is
    refused, unless ``--force``, where it would write over one of the committed files docs/sabo/choosing-rho.md cites
    (``results/rho_sensitivity.{json,md}``, ``results/figures/rho_sensitivity.{png,svg}``), or over a
    JSON (at any path) that holds a full-grid run.
    """
    if args.force or grid_name == "full":
        return None
    outputs = [args.json, args.markdown, args.figure.with_suffix(".png"), args.figure.with_suffix(".svg")]
    committed = {p.resolve() for p in committed_outputs()}
    over = [p for p in outputs if p.exists() and p.resolve() in committed]
    existing = stored_results(args.json) if args.json.is_file() else None
    if existing is not None and existing["meta"].get("grid_name") == "full":
        refused, what = args.json, f"{shown(args.json)} holds the full grid ({existing['meta'].get('runs', '?')} runs)"
    elif over:
        refused, what = over[0], f"{shown(over[0])} is the full grid's result that docs/sabo/choosing-rho.md cites"
    else:
        return None
    elsewhere = outputs_in(ROOT / "results" / grid_name)
    there = {elsewhere["json"], elsewhere["markdown"], *(elsewhere["figure"].with_suffix(s) for s in (".png", ".svg"))}
    where = ("another --out" if refused.resolve() in {p.resolve() for p in there}
             else f"`--out {shown(ROOT / 'results' / grid_name)}`")
    return (f"{what}; not replaced by this {grid_name} grid ({runs} runs): write it elsewhere with {where}, "
            "or use --force")


def parse(argv=None) -> argparse.Namespace:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="the small grid instead of the full one (written to results/quick/ by default)")
    grid_opts = ap.add_argument_group("grid (each option replaces that axis in every block of the grid)")
    grid_opts.add_argument("--dims", type=int_at_least(2), nargs="+")
    grid_opts.add_argument("--rhos", type=positive_float, nargs="*", help="absolute rho values")
    grid_opts.add_argument("--rho-scales", type=positive_float, nargs="*", help="c of rho = c sqrt(d)")
    grid_opts.add_argument("--lrs", type=positive_float, nargs="+")
    grid_opts.add_argument("--popsizes", type=popsize_rule, nargs="+", help="'default' or integers >= 2")
    grid_opts.add_argument("--functions", nargs="+", choices=sorted(FUNCTIONS))
    grid_opts.add_argument("--seeds", type=seed_int, nargs="+")
    ap.add_argument("--ingo-iters", type=positive_int, default=DEFAULT_BUDGET["ingo_iters"],
                    help="budget: T = max(this, --evals-per-dim x d / N) INGO iterations = T N evaluations")
    ap.add_argument("--evals-per-dim", type=non_negative_float, default=DEFAULT_BUDGET["evals_per_dim"])
    ap.add_argument("--checkpoints", type=int_at_least(2), default=DEFAULT_BUDGET["checkpoints"],
                    help="f(mean) recorded at this many evaluation counts (even)")
    ap.add_argument("--tolerance", type=tolerance_float, default=PROGRESS_TOLERANCE,
                    help="share of INGO's per-iteration progress a case must keep")
    ap.add_argument("--workers", type=workers_int, default=min(2, os.cpu_count() or 1),
                    help="worker processes, 1 to the CPU count (default: %(default)s)")
    ap.add_argument("--reanalyse", action="store_true",
                    help="no runs: rebuild cells, tables and figure from the records already in --json")
    ap.add_argument("--out", type=directory, default=None,
                    help="output directory: <out>/rho_sensitivity.{json,md}, <out>/figures/rho_sensitivity.{png,svg} "
                         "(default: results for the full grid, results/quick for --quick, results/custom for any "
                         "other grid or budget)")
    ap.add_argument("--json", type=Path, help="the records, cells and rules (default: in --out)")
    ap.add_argument("--markdown", type=Path, help="the tables (default: in --out)")
    ap.add_argument("--figure", type=Path, help="path without suffix; .png and .svg are written (default: in --out)")
    ap.add_argument("--force", action="store_true",
                    help="replace the full grid's results (docs/sabo/choosing-rho.md's evidence) with a reduced grid's")
    args = ap.parse_args(argv)
    args.blocks = []
    for block in QUICK if args.quick else FULL:
        block = {**block, **{k: getattr(args, k) for k in GRID_KEYS if getattr(args, k) is not None}}
        if block not in args.blocks:  # overriding the axes that tell blocks apart merges them
            args.blocks.append(block)
    args.grid_name = grid_name_of(args)
    defaults = outputs_in(Path(args.out) if args.out is not None else
                          ROOT / "results" if args.grid_name == "full" else ROOT / "results" / args.grid_name)
    for key, path in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, path)
    for block in args.blocks:
        if not block["rhos"] and not block["rho_scales"]:
            ap.error("--rhos and --rho-scales are both empty: no SABO run")
    if args.checkpoints % 2:
        ap.error(f"--checkpoints must be even and >= 2 (got {args.checkpoints}): E/2 must be a checkpoint")
    if args.ingo_iters < 2 * args.checkpoints:
        ap.error(f"--ingo-iters must be >= 2 x --checkpoints = {2 * args.checkpoints} (got {args.ingo_iters})")
    if args.reanalyse:
        args.stored = stored_results(args.json) if args.json.is_file() else None
        if args.stored is None:
            ap.error(f"--reanalyse: no results JSON with records at {shown(args.json)} (give it with --json or --out)")
        grid_name = args.stored["meta"].get("grid_name", "custom")
        runs = len(args.stored["records"])
    else:
        budget = {k: getattr(args, k) for k in DEFAULT_BUDGET}
        grid_name, runs = args.grid_name, len(grid(args.blocks, budget))
    refusal = replacement_refusal(args, grid_name, runs)
    if refusal:
        ap.error(refusal)
    return args


def run_grid(args) -> tuple[list[dict], dict]:
    budget = {"ingo_iters": args.ingo_iters, "evals_per_dim": args.evals_per_dim, "checkpoints": args.checkpoints}
    tasks = grid(args.blocks, budget)
    print(f"{len(tasks)} runs, {args.workers} worker(s)", flush=True)
    t0 = time.perf_counter()
    records = []
    records += run_tasks(run_one, tasks, args.workers, t0)
    wall = time.perf_counter() - t0
    records.sort(key=lambda r: (r["function"], r["d"], r["popsize_rule"], r["lr"], r["method"], r["rho"] or 0.0,
                                r["seed"]))
    dims = sorted({r["d"] for r in records})
    meta = {"grid_name": args.grid_name,
            "command": " ".join(["python benchmarks/rho_sensitivity.py", *(sys.argv[1:] if args.argv is None
                                                                            else args.argv)]),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git_commit(), "python": platform.python_version(), "numpy": np.__version__,
            "workers": args.workers, "runs": len(records), "wall_seconds": wall,
            "run_seconds": sum(r["seconds"] for r in records),
            "cpu_seconds": sum(r["cpu_seconds"] for r in records),
            "load_average_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "run_seconds_by_d": {str(d): sum(r["seconds"] for r in records if r["d"] == d) for d in dims},
            "ingo_iters_by_d_n": {f"{r['d']},{r['popsize']}": r["ingo_iters"] for r in records},
            "grid": args.blocks, "budget": budget}
    return records, meta


def run_tasks(run_one, tasks: list, workers: int, t0: float) -> list:
    """``run_one`` of every task, on ``workers`` processes (in completion order), with a progress line every 5%."""
    records = []
    if workers == 1:
        results = map(run_one, tasks)
    else:
        pool = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn").Pool(workers)
        results = pool.imap_unordered(run_one, tasks)
    try:
        for i, rec in enumerate(results, 1):
            records.append(rec)
            if i % max(1, len(tasks) // 20) == 0 or i == len(tasks):
                print(f"  {i}/{len(tasks)} runs, {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        if workers > 1:
            pool.terminate()
    return records


def main(argv=None) -> dict:
    args = parse(argv)
    args.argv = argv
    if args.reanalyse:
        records, meta = args.stored["records"], args.stored["meta"]
        meta["reanalysed"] = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                              "commit": git_commit()}
    else:
        records, meta = run_grid(args)
    meta["progress_tolerance"] = args.tolerance
    cells = cells_of(records)
    rules = rule_analysis(cells, args.tolerance)
    fig_paths = figure(cells, rules["chosen_scale"], args.figure) if cells else []
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rounded({"meta": meta, "rules": rules, "cells": cells, "records": records}),
                                    separators=(",", ":")) + "\n")
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(markdown(meta, cells, rules))
    print(f"wall {meta['wall_seconds']:.0f} s; run time {meta['run_seconds']:.0f} s; by d: "
          + ", ".join(f"{d}: {s:.0f} s" for d, s in meta["run_seconds_by_d"].items()))
    print(f"proposed c: {rules['chosen_scale']}; every case at every beta keeps pace up to c = "
          f"{rules['strict_scale']}; constants keeping pace everywhere: {rules['safe_constants']}")
    print("wrote", args.json, args.markdown, *fig_paths)
    return {"meta": meta, "rules": rules, "cells": cells, "records": records}


if __name__ == "__main__":
    main()
