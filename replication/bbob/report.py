"""Report of the BBOB study: solved fractions, runtime ECDFs, ERT ratios, claim verdicts, and cocopp.

Everything but ``cocopp``'s pages is computed from the records (so ``--from-table`` re-renders it):
each record holds the evaluation at which each of COCO's 51 targets (precision f - f_opt from
10^2 down to 10^-8, :data:`replication.bbob.problem.TARGETS`) was first reached. A *triple*
(function, target, instance) is solved by a run when its target was reached within the budget;
the solved fraction of a method on a set of functions at one dimension is the share of its
triples solved, which is the end point of COCO's runtime ECDF (cocopp's ``pprldmany`` figures).

``cocopp`` runs on the COCO data the runs' observers wrote (``runs/bbob/<suite>/<method>/<hash>.files``):
the report copies each method's finished runs into one folder per method and suite and runs
``python -m cocopp`` on them (offline: no reference archive is named, so none is fetched; numpy's
global generator seeded and its output otherwise fixed too, see :data:`COCOPP_SEEDED`: the same records
give the same files), into ``<out>/bbob/<suite>/``.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replication import bootstrap, figures
from replication.claims import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    Region,
    at_least,
    count_line,
    decide,
    evaluate,
    load_claims,
    parse_interval,
    render_markdown,
    straddle_text,
    write_report,
)
from replication.config import RunConfig
from replication.engine import files_path, provenance_summary, wall_minutes
from replication.table import records_note
from sabo.sabo import DEFAULT_LR

from .problem import TARGETS
from .runs import REPORT_NAME, TABLE_OMITS, configs, suite_methods
from .suites import SUITES

CLAIMS_FILE = Path(__file__).with_name("claims.yaml")
# `python -m cocopp`, made deterministic: it draws its bootstrap dispersions (the percentile ranges
# in its tables) and marker offsets from numpy's global generator unseeded, so the same records
# gave other pages at every regeneration; seeded here, with string hashing fixed (PYTHONHASHSEED in
# COCOPP_ENV: the order of its draws may follow set order) and matplotlib's SVG ids and dates fixed
COCOPP_SEEDED = ("import runpy, numpy, matplotlib; numpy.random.seed(0); "
                 "matplotlib.rcParams['svg.hashsalt'] = 'sabo-bench'; "
                 "runpy.run_module('cocopp', run_name='__main__', alter_sys=True)")
COCOPP_ENV = {"PYTHONHASHSEED": "0", "SOURCE_DATE_EPOCH": "0", "MPLBACKEND": "Agg"}
COCOPP_FOLDER = "all_methods"   # cocopp names its output folder after the methods and the time; we rename it
# cocopp's copies for LaTeX papers (a fifth of its output); the HTML pages show the SVGs. `python -m cocopp` on
# the runs' COCO data writes them again
UNUSED_BY_THE_PAGES = (".pdf", ".tex")
OFFLINE_PROXY = "http://127.0.0.1:9"   # the discard port: connections are refused at once


@dataclass
class Run:
    """What the report reads from one record."""

    suite: str
    dim: int
    function: int
    method: str
    instance: int
    runtimes: list       # evaluations to reach TARGETS[0], TARGETS[1], ... (those reached)
    nfev: int

    @property
    def solved(self) -> float:
        return len(self.runtimes) / TARGETS.size


def runs_of(records: list[dict]) -> list[Run]:
    out = []
    for r in records:
        pr = r["config"]["problem"]
        out.append(Run(pr["suite"], pr["dim"], pr["function"], r["config"]["method"], pr["instance"],
                       list(r["result"]["final_evaluation"]["runtimes"]), int(r["result"]["final"]["nfev"])))
    return out


def dim_group(dim: int) -> str:
    """The dimension groups of the solved-fraction table (cocopp's low / medium / high, and large scale)."""
    return "2-5" if dim <= 5 else "10-20" if dim <= 20 else "40" if dim <= 40 else "80-640"


def solved_fractions(records: list[dict]) -> dict[tuple, float]:
    """(suite, "d<dim>", method) -> fraction of its (function, target, instance) triples solved."""
    acc = defaultdict(list)
    for run in runs_of(records):
        acc[(run.suite, f"d{run.dim}", run.method)].append(run.solved)
    return {key: float(np.mean(v)) for key, v in acc.items()}


def evaluation_mismatches(records: list[dict]) -> list[str]:
    """Runs whose COCO evaluation count is not the engine's: a completed run must match exactly; a
    diverged one has COCO counting the batch whose values were rejected (1 to evals_per_iteration more)."""
    out = []
    for r in records:
        res = r["result"]
        coco, nfev = int(res["final_evaluation"]["coco_evaluations"]), int(res["final"]["nfev"])
        ok = coco == nfev if res["status"] == "completed" else 0 < coco - nfev <= res["evals_per_iteration"]
        if not ok:
            out.append(f"{RunConfig.from_dict(r['config']).label}: COCO {coco}, engine {nfev} ({res['status']})")
    return out


# ---------------------------------------------------------------------- claim checks
class Context:
    def __init__(self, runs: list[Run]):
        self.runs = runs

    def select(self, check: dict, method: str) -> list[Run]:
        functions, dims = check.get("functions"), check.get("dims")
        return [r for r in self.runs if r.suite == check.get("suite", "bbob") and r.method == method
                and (functions is None or r.function in functions) and (dims is None or r.dim in dims)]


def _scope(check: dict, ctx: Context) -> str:
    """What a check covers in these records: the functions *run* (a profile may run a subset of those a
    claim reads: the verdict is about these only) and the dimensions."""
    suite, asked = check.get("suite", "bbob"), check.get("functions")
    ran = sorted({r.function for r in ctx.runs if r.suite == suite and (asked is None or r.function in asked)})
    names = ", ".join(f"f{f}" for f in ran) or "none"
    total = len(SUITES[suite].functions)
    if asked is None:
        funcs = (f"all {total} functions" if len(ran) == total else "no function run" if not ran else
                 f"the {len(ran)} function{'s' * (len(ran) != 1)} run of {total} ({names})")
    else:
        missing = [f for f in asked if f not in ran]
        funcs = names + (f" ({', '.join(f'f{f}' for f in missing)} not run)" if missing else "")
    dims = "every dimension run" if check.get("dims") is None else "d in " + ", ".join(map(str, check["dims"]))
    return f"{suite}; {funcs}; {dims}"


def _instance_rows(suite: str, dim: int, function: int, n: int) -> np.ndarray:
    """The bootstrap's resamples of the ``n`` instances (by position, in instance order) of one function at one
    dimension: shared by every method there (an instance is the same problem for each: paired)."""
    return bootstrap.draws(f"bbob {suite} d{dim} f{function} instances", n)


def _mean_difference(suite: str, runs_a: list[Run], runs_b: list[Run], dim: int):
    """Solved fraction of ``runs_a`` minus ``runs_b`` at ``dim``, the mean over the (function, instance) pairs both
    ran: (on the runs, per resample: the functions resampled, then the instances of each, paired), or None when
    they share no pair."""
    solved = [{(r.function, r.instance): r.solved for r in runs if r.dim == dim} for runs in (runs_a, runs_b)]
    by_function = defaultdict(list)
    for key in sorted(solved[0].keys() & solved[1].keys()):
        by_function[key[0]].append(solved[0][key] - solved[1][key])
    if not by_function:
        return None
    functions = sorted(by_function)
    sums = np.stack([np.asarray(by_function[f])[_instance_rows(suite, dim, f, len(by_function[f]))].sum(axis=1)
                     for f in functions], axis=1)   # (resample, function): the drawn instances' summed difference
    counts = np.array([len(by_function[f]) for f in functions])
    pick = bootstrap.draws(f"bbob {suite} d{dim} functions {functions}", len(functions))
    return (sum(map(sum, by_function.values())) / counts.sum(),
            np.take_along_axis(sums, pick, axis=1).sum(axis=1) / counts[pick].sum(axis=1))


def check_solved_fraction(check, ctx):
    """Each method of ``a`` against each of ``b``, per dimension: the mean over (function, instance) of the
    difference in solved fractions, with its bootstrap interval. ``relation: ">="``: the difference is at least
    0; ``">"``: above 0. The claim's statistic is the difference ``min_fraction`` of the comparisons reach (the
    smallest when every one must hold), resampled jointly with the others."""
    a, b, rel = check["a"], check["b"], check.get("relation", ">=")
    need = check.get("min_fraction", 1.0)
    region = at_least(0.0) if rel == ">=" else Region(low=0.0, low_closed=False)
    what = "at least" if rel == ">=" else "above"
    op = (f"solved fraction of each of {', '.join(a)} minus each of {', '.join(b)} (mean over function x instance, "
          f"paired) {what} 0 per dimension, in >= {need:.0%} of comparisons ({_scope(check, ctx)})")
    selected = {m: ctx.select(check, m) for m in {*a, *b}}
    comparisons = []   # (label, on the runs, per resample)
    for ma in a:
        for mb in b:
            for dim in sorted({r.dim for r in selected[ma]} & {r.dim for r in selected[mb]}):
                difference = _mean_difference(check.get("suite", "bbob"), selected[ma], selected[mb], dim)
                if difference is not None:
                    comparisons.append((f"{ma}-{mb} d{dim}", *difference))
    if not comparisons:
        return NOT_RUN, op, "no dimension where both methods ran"
    n = len(comparisons)
    m = math.ceil(need * n)   # the claim holds when the m-th largest difference does
    measured = bootstrap.interval(np.sort([v for _, v, _ in comparisons])[n - m],
                                  np.sort(np.stack([x for _, _, x in comparisons], axis=1), axis=1)[:, n - m])
    verdict = decide(measured, region)
    each = [(label, bootstrap.interval(v, x)) for label, v, x in comparisons]
    verdicts = [decide(c, region) for _, c in each]
    statistic = "smallest difference" if m == n else f"difference at the {need:.0%} point ({m}th largest of {n})"
    meas = (f"{statistic}: {measured.text(_signed)}; per comparison "
            + ", ".join(f"{verdicts.count(k)} {k}" for k in (REPRODUCED, INCONCLUSIVE, NOT_REPRODUCED) if k in verdicts)
            + ": " + ", ".join(f"{label} {c.text(_signed)}" for label, c in each))
    failed = [f"{label} {c.text(_signed)}" for (label, c), v in zip(each, verdicts) if v != REPRODUCED]
    more = f", ... ({len(failed) - 3} more)" if len(failed) > 3 else ""
    reason = (f"{len(failed)} of {n} comparisons not {what} 0 over their whole interval: {', '.join(failed[:3])}{more}"
              + (f"; {straddle_text(measured, region, _signed)}" if verdict == INCONCLUSIVE else ""))
    return verdict, op, meas, reason


def _signed(x: float) -> str:
    return f"{x:+.3f}"


def erts(runs: list[Run], rows=None) -> np.ndarray:
    """COCO's expected running time to each of TARGETS: evaluations of all runs (the budget for the unsuccessful
    ones) over the number of successful runs, inf when none succeeded. Shape (1, targets), or with ``rows``
    ((R, n) resamples of the runs, by position) (R, targets)."""
    spent = np.array([[*r.runtimes, *[r.nfev] * (TARGETS.size - len(r.runtimes))] for r in runs], dtype=float)
    reached = np.array([[k < len(r.runtimes) for k in range(TARGETS.size)] for r in runs], dtype=float)
    # how often each run is drawn, so that a resample's sums are one matrix product
    times = np.ones((1, len(runs))) if rows is None else (rows[:, :, None] == np.arange(len(runs))).sum(axis=1)
    successes = times @ reached
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(successes > 0, (times @ spent) / successes, np.inf)


def ert(runs: list[Run], k: int) -> float:
    """COCO's expected running time to TARGETS[k] (:func:`erts`)."""
    return float(erts(runs)[0, k])


def check_ert_ratio(check, ctx):
    """ERT of ``a`` over ERT of ``b`` per (dimension, function, target) that both reach at least once; holds when
    the median of these ratios lies in ``range`` over its whole bootstrap interval (resampled: the (dimension,
    function) cases, and the instances of each, paired)."""
    a, b, inside = check["a"], check["b"], parse_interval(check["range"])
    suite = check.get("suite", "bbob")
    op = (f"ERT of {a} / ERT of {b} (COCO's expected running time, evaluations) per dimension, function and "
          f"target reached by both; median in {inside.text} ({_scope(check, ctx)})")
    cells = defaultdict(lambda: defaultdict(list))   # (dim, function) -> method -> runs, in instance order
    for method in (a, b):
        for r in sorted(ctx.select(check, method), key=lambda r: r.instance):
            cells[(r.dim, r.function)][method].append(r)
    cases = [(key, by_method[a], by_method[b]) for key, by_method in sorted(cells.items())
             if a in by_method and b in by_method]

    def ratios(runs_a, runs_b, rows_a, rows_b) -> np.ndarray:
        ea, eb = erts(runs_a, rows_a), erts(runs_b, rows_b)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.isfinite(ea) & np.isfinite(eb), ea / eb, np.nan)

    on_runs = {key: ratios(ra, rb, None, None)[0] for key, ra, rb in cases}
    every = [x for v in on_runs.values() for x in v if not np.isnan(x)]
    if not every:
        return NOT_RUN, op, "no (dimension, function, target) reached by both methods"
    resampled = np.stack([ratios(ra, rb, _instance_rows(suite, d, f, len(ra)), _instance_rows(suite, d, f, len(rb)))
                          for (d, f), ra, rb in cases], axis=1)   # (resample, case, target)
    pick = bootstrap.draws(f"bbob {suite} ert cases {[key for key, _, _ in cases]}", len(cases))
    picked = np.take_along_axis(resampled, pick[..., None], axis=1).reshape(len(pick), -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # a resample whose cases reach no common target: NaN
        measured = bootstrap.interval(float(np.median(every)), np.nanmedian(picked, axis=1))
    verdict = decide(measured, inside)
    per_dim = defaultdict(list)
    for (d, _), v in on_runs.items():
        per_dim[d] += [x for x in v if not np.isnan(x)]
    meas = (f"median ratio {measured.text()} over {len(every)} (dimension, function, target) cells; per dimension: "
            + ", ".join(f"d{d} {np.median(v):.2f} ({len(v)})" for d, v in sorted(per_dim.items()) if v))
    reason = (f"median ratio {measured.value:.2f}, outside {inside.text}" if verdict == NOT_REPRODUCED else
              straddle_text(measured, inside))
    return verdict, op, meas, reason


CHECKERS = {"solved_fraction": check_solved_fraction, "ert_ratio": check_ert_ratio}


# ---------------------------------------------------------------------- tables and figures
def solved_table(runs: list[Run], methods: list[str]) -> list[str]:
    """Rows: suite and dimension group; columns: methods; cells: fraction of (function, target, instance)
    triples solved, with the number of runs."""
    acc, dims_of = defaultdict(list), defaultdict(set)
    for r in runs:
        acc[(r.suite, dim_group(r.dim), r.method)].append(r.solved)
        dims_of[(r.suite, dim_group(r.dim))].add(r.dim)
    lines = ["| suite | d | " + " | ".join(figures.method_label(m) for m in methods) + " |",
             "|---|---|" + "---|" * len(methods)]
    for suite, group in sorted(dims_of, key=lambda sg: (sg[0], min(dims_of[sg]))):
        dims = sorted(dims_of[(suite, group)])
        cells = []
        best = max((np.mean(acc[(suite, group, m)]) for m in methods if acc.get((suite, group, m))), default=None)
        for m in methods:
            v = acc.get((suite, group, m))
            if not v:
                cells.append("not run")
                continue
            text = f"{np.mean(v):.3f}"
            cells.append(f"**{text}**" if np.isclose(np.mean(v), best) else text)
        lines.append(f"| {suite} | {', '.join(map(str, dims))} | " + " | ".join(cells) + " |")
    return lines


def plot_ecdf(runs: list[Run], methods: list[str], budgets: dict, path: Path, title: str) -> list[Path]:
    """Runtime ECDFs (one panel per suite and dimension): the fraction of (function, target, instance)
    triples solved within x evaluations / d, as cocopp's ``pprldmany`` without its simulated restarts."""
    by_panel = defaultdict(list)
    for r in runs:
        by_panel[(r.suite, r.dim, r.method)].append(r)
    panels = sorted({(suite, dim) for suite, dim, _ in by_panel})
    fig, axes = figures.new_figure(len(panels), title)
    for ax, (suite, dim) in zip(axes, panels):
        for method in methods:
            sel = by_panel.get((suite, dim, method))
            if not sel:
                continue
            times = np.sort(np.array([t for r in sel for t in r.runtimes], dtype=float)) / dim
            x = np.concatenate([[1.0 / dim], times, [budgets[(suite, dim)] / dim]])  # from the first evaluation
            y = np.concatenate([[0.0], np.arange(1, times.size + 1), [times.size]]) / (len(sel) * TARGETS.size)
            kw = figures.style(method)
            ax.step(x, y, where="post", lw=1.4, ms=4, markevery=0.12, **kw)
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_title(f"{suite}, d = {dim}", fontsize=10)
        ax.set_xlabel("evaluations / d")
        ax.set_ylabel("fraction of (f, target, instance)")
        ax.grid(alpha=0.3)
    return figures.save(fig, path)


# ---------------------------------------------------------------------- cocopp
def run_cocopp(records: list[dict], runs_dir: Path, out_dir: Path) -> dict[str, Path]:
    """cocopp on the COCO data of ``records``, one output folder per suite (``out_dir/<suite>``); returns them.

    Each method's runs are copied into ``<tmp>/<suite>/<method>/<hash>/`` (cocopp merges the instances
    of one function and dimension across the folders of an algorithm). cocopp names its output
    folder after the algorithms and the time; it is renamed to :data:`COCOPP_FOLDER` and the links
    to it rewritten, so that the same data gives the same file names. Its PDF and LaTeX copies
    (:data:`UNUSED_BY_THE_PAGES`) are not kept.
    """
    by_suite = defaultdict(list)
    for r in records:
        by_suite[r["config"]["setting"]].append(RunConfig.from_dict(r["config"]))
    written = {}
    with tempfile.TemporaryDirectory() as tmp:
        for suite, cfgs in sorted(by_suite.items()):
            methods = sorted({c.method for c in cfgs})
            for c in cfgs:
                src = files_path(runs_dir, c) / c.method
                if not src.is_dir():
                    raise FileNotFoundError(f"{src}: the COCO data of {c.label} is missing (rerun the run)")
                shutil.copytree(src, Path(tmp, suite, c.method, c.hash))
            pp = Path(tmp, f"pp-{suite}")
            # offline: cocopp looks up the list of official archives when imported; no archive is named
            # here, so its proxy points nowhere and the look-up fails at once instead of waiting on a network
            env = {**os.environ, **COCOPP_ENV, "http_proxy": OFFLINE_PROXY, "https_proxy": OFFLINE_PROXY,
                   "HTTP_PROXY": OFFLINE_PROXY, "HTTPS_PROXY": OFFLINE_PROXY, "no_proxy": "", "NO_PROXY": ""}
            proc = subprocess.run([sys.executable, "-c", COCOPP_SEEDED, "-o", str(pp),
                                   *(str(Path(tmp, suite, m)) for m in methods)],
                                  capture_output=True, text=True, env=env, cwd=tmp)
            folders = [p for p in pp.iterdir() if p.is_dir()] if pp.is_dir() else []
            if proc.returncode != 0 or len(folders) != 1:
                tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
                raise RuntimeError(f"cocopp failed on {suite} (exit {proc.returncode}):\n{tail}")
            old = folders[0].name
            folders[0].rename(pp / COCOPP_FOLDER)
            for path in list(pp.rglob("*")):
                if path.suffix in UNUSED_BY_THE_PAGES and path.is_file():
                    path.unlink()
                elif path.suffix in (".html", ".js") and path.is_file():
                    text = path.read_text(errors="surrogateescape")
                    if old in text:
                        path.write_text(text.replace(old, COCOPP_FOLDER), errors="surrogateescape")
            target = out_dir / suite
            shutil.rmtree(target, ignore_errors=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(pp, target)
            written[suite] = target
    return written


def _coverage_lines(profile: str, prof: dict, records: list[dict]) -> list[str]:
    """What the verdicts rest on, where it is less than a claim reads: a profile's function subset, and the
    runs that diverged (their targets reached before the overflow count; nothing after it)."""
    lines = []
    subsets = [f"{suite} ({len(spec['functions'])} of {len(SUITES[suite].functions)})"
               for suite, spec in prof["suites"].items() if spec.get("functions")]
    if subsets:
        lines += [f"Profile **{profile}** runs a subset of the functions on {', '.join(subsets)}: a verdict is about "
                  "the functions run, which its \"checked as\" column names.", ""]
    diverged, runs = defaultdict(list), defaultdict(int)   # method -> (suite, function) of each diverged run
    for r in records:
        c = r["config"]
        runs[c["method"]] += 1
        if r["result"]["status"] == "diverged":
            diverged[c["method"]].append((c["setting"], c["problem"]["function"]))
    if diverged:
        def where(cells):
            return ", ".join(f"{suite} f{f}" for suite, f in sorted(set(cells)))
        lines += ["Runs that diverged (the objective or the update overflowed; their targets reached before it "
                  "count): " + "; ".join(f"{m} {len(v)} of {runs[m]} ({where(v)})" for m, v in sorted(diverged.items()))
                  + ".", ""]
    return lines


#: Points of the solved percentage (:func:`solved_fractions`, x 100) a CI run may lose against an expected
#: file that ``--record-expected`` wrote. The committed ``ci_expected.json`` holds a tolerance per score
#: instead, measured by ``benchmarks/ci_spread.py --study bbob`` across numerical environments and
#: re-drawn trajectories: every ci claim is inconclusive at the ci profile's size (two instances of eight
#: functions), so the scores are what CI checks of this study.
SCORE_TOLERANCE = 5.0


def report(params: dict, records: list[dict], out_dir: Path, *, runs_dir=None) -> dict:
    p = params["bbob"]
    profile = p["profile"]
    prof = p["profiles"][profile]
    methods = list(p["methods"])
    runs = runs_of(records)
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    files = []
    budgets = {(suite, d): spec["budget"] * d for suite, spec in prof["suites"].items() for d in spec["dims"]}
    if runs:
        files += plot_ecdf(runs, methods, budgets, fig_dir / "bbob_ecdf.png",
                           f"COCO runtime ECDFs, 51 targets 1e2..1e-8 ({profile} profile)")
    cocopp_note = ("cocopp was not run: the records come from a run table, which holds no COCO data "
                   f"(`{REPORT_NAME}/` is left as it was)")
    cocopp_dirs = {}
    if runs_dir is not None and records:
        cocopp_dirs = run_cocopp(records, Path(runs_dir), out_dir / REPORT_NAME)
        files += list(cocopp_dirs.values())
        cocopp_note = "cocopp's pages, from the runs' COCO data: " + ", ".join(
            f"[{REPORT_NAME}/{s}/index.html]({REPORT_NAME}/{s}/index.html)" for s in cocopp_dirs)

    verdicts = evaluate(load_claims(CLAIMS_FILE), CHECKERS, Context(runs))
    mismatches = evaluation_mismatches(records)
    expected = len(configs(params))
    md = ["# COCO's BBOB suites (a fourth study: not in the paper)", "",
          f"Regenerated by `sabo-bench report bbob` from {len(records)} of {expected} run records of profile "
          f"**{profile}**. {records_note(REPORT_NAME)} {provenance_summary(records)}", "",
          "## Setup", "",
          "| suite | dimensions | functions | instances | budget (evaluations) | methods |",
          "|---|---|---|---|---|---|"]
    for suite, spec in prof["suites"].items():
        funcs = spec.get("functions")
        md.append(f"| {suite} | {', '.join(map(str, spec['dims']))} | "
                  f"{'all' if funcs is None else ', '.join(f'f{f}' for f in funcs)} | "
                  f"{', '.join(map(str, spec['instances']))} | {spec['budget']} d | "
                  f"{', '.join(suite_methods(p, spec))} |")
    md += ["",
           "Every method starts at COCO's initial solution (the centre of [-5, 5]^d) with "
           f"sigma0 = {p['sigma0']:g} and runs its own defaults: its class's default population size and, for "
           f"SABO, lr = {DEFAULT_LR:g} (sabo.sabo.DEFAULT_LR) and "
           "rho = 0.05 sqrt(d) (the library's rule, docs/sabo/choosing-rho.md); nothing is tuned per function. "
           "One run per instance (COCO's repetitions), no restarts; a run spends as many whole iterations as fit "
           "in the budget (SABO 2N evaluations per iteration, BES N + 1, the others N).", "",
           "COCO's evaluation count equals the engine's in every record: "
           + ("yes." if not mismatches else f"**no, {len(mismatches)} mismatches**: " + "; ".join(mismatches[:5])),
           "(A diverged run's last batch, whose values were not finite, is counted by COCO but not by the "
           "optimizer.)" if any(r["result"]["status"] == "diverged" for r in records) else "", "",
           "## Fraction of (function, target) pairs solved", "",
           "Share of (function, target, instance) triples solved within the budget, for COCO's 51 targets "
           "f - f_opt = 10^2 ... 10^-8 (the end point of the runtime ECDFs below; best per row in bold):", ""]
    md += solved_table(runs, methods) if runs else ["not run"]
    md += ["", "## Claims", "", count_line(verdicts), "", render_markdown(verdicts), "",
           bootstrap.method_note(
               "the functions a statistic aggregates (a solved-fraction difference is a mean over functions, the ERT "
               "ratio a median over (dimension, function) cases), and the instances of each function, drawn once per "
               "resample and shared by the methods compared (an instance is the same problem for each). A claim over "
               "several comparisons (method pairs, dimensions) is decided on the difference the required share of "
               "them reaches (the smallest when every one must hold), resampled jointly."), "",
           *_coverage_lines(profile, prof, records),
           "## Runtime ECDFs", "", "![runtime ECDFs](figures/bbob_ecdf.png)", "",
           "From the records: the fraction of (function, target, instance) triples solved within x d evaluations "
           "(no simulated restarts, unlike cocopp's).", ""]
    for suite, folder in cocopp_dirs.items():
        for svg in sorted((folder / COCOPP_FOLDER).glob("pprldmany_*D_*all.svg")):
            rel = svg.relative_to(out_dir).as_posix()
            md += [f"cocopp, {suite}, {svg.stem.split('_')[1]}:", "", f"![{svg.stem}]({rel})", ""]
    md += [cocopp_note + ".", "", "## Where the time goes", "",
           "Summed wall time of the runs (minutes), per suite, dimension and method:", "",
           "| suite | d | " + " | ".join(figures.method_label(m) for m in methods) + " |",
           "|---|---|" + "---|" * len(methods)]
    wall = wall_minutes(records, lambda c: (c["setting"], c["problem"]["dim"], c["method"]))
    for suite, dim in sorted({(s, d) for s, d, _ in wall}):
        md.append(f"| {suite} | {dim} | " + " | ".join(f"{wall[(suite, dim, m)]:.1f}" if (suite, dim, m) in wall
                                                       else "-" for m in methods) + " |")
    md += ["", "## Choices", "",
           "- Budget in evaluations, a multiple of d per suite (table above); x0 = COCO's initial solution; sigma0 "
           "as stated; library defaults otherwise (no tuning on BBOB).",
           "- Targets are reached by the *measured* f; on bbob-noisy, cocopp's pages use COCO's noise-free values "
           "instead.",
           "- TuRBO and GIBO are not run: a Gaussian-process fit per batch does not fit a budget of 10^3 d "
           "evaluations over 24 functions x 5 dimensions x 15 instances.", ""]
    meta = {"profile": profile, "records": len(records), "runs": expected,
            "omits": [] if cocopp_dirs or not records else [TABLE_OMITS]}
    scores = {f"{suite}/{dim}/{method}": 100 * value
              for (suite, dim, method), value in sorted(solved_fractions(records).items())}
    return write_report(out_dir, REPORT_NAME, md, verdicts, meta, files=files, scores=scores,
                        score_tolerance=SCORE_TOLERANCE)
