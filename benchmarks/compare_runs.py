"""Two run tables of one study against each other: did a change move any result beyond the seeds' spread?

    python benchmarks/compare_runs.py OLD_RUNS.parquet NEW_RUNS.parquet [--ignore problem.dtype]
        [--metric final.test_accuracy] [--curve curve.test_accuracy] [--claims OLD.json NEW.json]

For a change that alters results without meaning to alter what they say (the image objective in
float32, another machine's rounding): runs are matched by their configuration (study, setting,
method, the ``problem.*`` and ``params.*`` columns, seed) less the columns ``--ignore`` names, and
a configuration's seeds are compared as two samples.

0. ``--metric`` per run, paired by seed (meaningful where the change keeps the seeds, as a precision
   does: ``replication.config.COMPUTATION_KEYS``): the share of runs with the same value and the
   median, 90th percentile and largest absolute difference.
1. ``--metric`` per configuration: Welch's t-test of the seeds' values, old against new. Without a
   change the p-values are uniform: about 5% of the configurations below 0.05 and 1% below 0.01 (the
   configurations share their problems' seeds, so they are not independent: read these shares as
   a check, not as one test). And the mean difference over configurations with its standard error
   (over configurations): a systematic shift shows there even where each one is small.
2. ``--curve``: the same test at every point of every configuration's curve (its share of points with
   p < 0.05), and the configurations with the most such points.
3. ``--claims``: the verdict of every claim in both claims files, side by side.

``--method`` compares only those methods' runs (the claims stay whole); ``--log10`` compares the
metric's and the curve's decades (errors that span many: values clipped to [1e-300, 1e300] first,
so an exact 0 or an overflow stays a number).

Exit status 1 when a verdict differs or a run of one table has no match in the other (``--common``:
the runs without a match are left out).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import warnings

import numpy as np
import pandas as pd
from scipy import stats

NOT_CONFIG = ("problem.directory",)  # where the data lay, not what the run computed


def config_columns(table: pd.DataFrame, ignore) -> list[str]:
    keys = ["study", "setting", "method"] + sorted(c for c in table.columns
                                                   if c.startswith(("problem.", "params.")))
    return [c for c in keys if c not in ignore and c not in NOT_CONFIG]


def keyed(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The table with one hashable key per configuration (NaN, a parameter a method lacks, as 'unset')."""
    out = table.copy()
    for c in columns:
        if c not in out:
            out[c] = np.nan
    out["_config"] = [json.dumps([None if _missing(v) else _plain(v) for v in row])
                      for row in out[columns].itertuples(index=False)]
    return out


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _plain(v):
    """A JSON-ready value; numbers as floats (a column with gaps is float, the same column without them int)."""
    v = v.item() if hasattr(v, "item") else v
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def decades(table: pd.DataFrame, metric: str, curve: str) -> pd.DataFrame:
    """``table`` with log10 of ``metric`` and of every ``curve`` point, values clipped to [1e-300, 1e300]."""
    def log10(v):
        return np.log10(np.clip(np.asarray(v, dtype=float), 1e-300, 1e300))

    out = table.copy()
    out[metric] = log10(out[metric])
    out[curve] = [log10(c) for c in out[curve]]
    return out


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p of Welch's t-test; 1 where both samples are equal constants, 0 where they are
    different constants. NaN is no value (a curve that ended earlier: :func:`stacked`); NaN where a
    sample has fewer than two values left."""
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if np.array_equal(np.sort(a), np.sort(b)):
        return 1.0
    if a.size < 2 or b.size < 2:
        return float("nan")
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return 0.0
    with warnings.catch_warnings():  # seeds equal up to rounding (e.g. a curve's chance-level start)
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def compare_paired(old: pd.DataFrame, new: pd.DataFrame, metric: str) -> list[str]:
    both = old[["_config", metric]].merge(new[["_config", metric]], on="_config", suffixes=("_old", "_new"))
    diff = np.abs(both[f"{metric}_new"].to_numpy(float) - both[f"{metric}_old"].to_numpy(float))
    return [f"{metric} per run, paired by seed: {len(both)} pairs, {np.mean(diff == 0):.1%} equal; |difference| "
            f"median {np.median(diff):.4g}, 90th percentile {np.quantile(diff, 0.9):.4g}, largest {diff.max():.4g}"]


def compare_metric(old: pd.DataFrame, new: pd.DataFrame, metric: str) -> list[str]:
    rows = []
    for config, a in old.groupby("_config"):
        b = new[new["_config"] == config]
        x, y = a[metric].to_numpy(float), b[metric].to_numpy(float)
        rows.append((config, welch_p(x, y), y.mean() - x.mean()))
    p = np.array([r[1] for r in rows])
    diff = np.array([r[2] for r in rows])
    se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else float("nan")
    return [f"{metric}: {len(rows)} configurations; p < 0.05 in {np.mean(p < 0.05):.1%}, p < 0.01 in "
            f"{np.mean(p < 0.01):.1%} (no change: about 5% and 1%); mean difference new - old "
            f"{diff.mean():+.4g} (standard error over configurations {se:.2g}), largest |difference| "
            f"{np.abs(diff).max():.4g}"]


def stacked(curves: list, n_old: int) -> tuple[np.ndarray, np.ndarray]:
    """The old and the new seeds' curves as two arrays, padded with NaN to the longest: a run that diverged
    ends its curve there (the points after it are compared among the seeds that reached them)."""
    n = max(len(c) for c in curves)
    rows = np.vstack([np.pad(np.asarray(c, dtype=float), (0, n - len(c)), constant_values=np.nan) for c in curves])
    return rows[:n_old], rows[n_old:]


def compare_curves(old: pd.DataFrame, new: pd.DataFrame, curve: str, top: int = 5) -> list[str]:
    outside, points, worst = 0, 0, []
    for config, a in old.groupby("_config"):
        b = new[new["_config"] == config]
        x, y = stacked(list(a[curve]) + list(b[curve]), len(a))
        p = np.array([welch_p(x[:, j], y[:, j]) for j in range(x.shape[1])])
        p = p[~np.isnan(p)]
        outside += int(np.sum(p < 0.05))
        points += p.size
        worst.append((int(np.sum(p < 0.05)), p.size, config))
    worst.sort(reverse=True)
    lines = [f"{curve}: {points} curve points of {len(worst)} configurations; p < 0.05 at {outside / points:.1%} "
             f"of them (no change: about 5%)"]
    lines += [f"  {n} of {m} points: {config}" for n, m, config in worst[:top] if n]
    return lines


def compare_claims(old_path: str, new_path: str) -> tuple[list[str], bool]:
    def verdicts(path):
        with open(path, encoding="utf-8") as f:
            return {c["id"]: c["verdict"] for c in json.load(f)["claims"]}

    a, b = verdicts(old_path), verdicts(new_path)
    same = a == b
    lines = [f"claims: {'every verdict unchanged' if same else 'VERDICTS DIFFER'}"]
    lines += [f"  {cid}: {a.get(cid, '-')} -> {b.get(cid, '-')}" for cid in sorted(set(a) | set(b))]
    return lines, same


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--ignore", nargs="*", default=[], help="config columns that differ by design")
    ap.add_argument("--metric", default="final.test_accuracy")
    ap.add_argument("--curve", default="curve.test_accuracy")
    ap.add_argument("--claims", nargs=2, metavar=("OLD", "NEW"))
    ap.add_argument("--common", action="store_true",
                    help="compare the runs both tables hold (e.g. while the new one is still being made)")
    ap.add_argument("--method", nargs="+", help="only these methods' runs")
    ap.add_argument("--log10", action="store_true", help="compare decades of --metric and --curve")
    args = ap.parse_args(argv)
    old_table, new_table = pd.read_parquet(args.old), pd.read_parquet(args.new)
    if args.method:
        old_table, new_table = (t[t["method"].isin(args.method)] for t in (old_table, new_table))
    if args.log10:
        old_table, new_table = (decades(t, args.metric, args.curve) for t in (old_table, new_table))
    columns = sorted(set(config_columns(old_table, args.ignore)) | set(config_columns(new_table, args.ignore)))
    old, new = keyed(old_table, columns + ["seed"]), keyed(new_table, columns + ["seed"])
    only_old, only_new = set(old["_config"]) - set(new["_config"]), set(new["_config"]) - set(old["_config"])
    print(f"{len(old)} old runs, {len(new)} new runs; matched by {', '.join(columns)} and seed; "
          f"{len(only_old)} old and {len(only_new)} new without a match")
    if args.common:
        old, new = old[~old["_config"].isin(only_old)], new[~new["_config"].isin(only_new)]
        old_table, new_table = old_table.loc[old.index], new_table.loc[new.index]
    elif only_old or only_new:
        print(f"error: the tables hold other runs (e.g. {sorted(only_old or only_new)[0]}): name the config columns "
              "that differ by design with --ignore")
        return 1
    ok = True
    lines = compare_paired(old, new, args.metric)
    old, new = keyed(old_table, columns), keyed(new_table, columns)
    lines += compare_metric(old, new, args.metric) + compare_curves(old, new, args.curve)
    if args.claims:
        claim_lines, same = compare_claims(*args.claims)
        lines += claim_lines
        ok = ok and same
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
