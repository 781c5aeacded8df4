"""How well the studies' cost estimates predict the measured run times of finished records.

    python benchmarks/cost_accuracy.py [--runs-dir runs] [--study bbob synthetic image]

A study's ``cost(config)`` (the optimizers' ``cost_per_iteration`` hints plus the evaluations,
:mod:`replication.costs`) orders runs longest first and, until the ETA has measured a method,
stands for its time. For every completed record under ``--runs-dir`` this divides the recorded
wall time (``provenance.wall_time_s``) by the run's cost, and prints per study and method:

* ``spread``: the 90th over the 10th percentile of seconds per unit of cost across the method's
  runs (1 for estimates exactly proportional to time; what the ETA gets wrong for a method's
  runs of sizes it has not measured yet);
* ``vs all``: the method's median seconds per unit over the study's (how far its cost is off
  relative to the other methods before it is measured);

and per study the Spearman rank correlation of cost and wall time over all its runs (what the
longest-first order relies on). Run it against two versions of the code on the same records to
compare their estimates; the wall times are whatever the machine gave when the runs were made.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from replication.config import RunConfig
from replication.engine import record_paths
from replication.studies import get_study


def rates(runs_dir: Path, study: str) -> dict[str, list[tuple[float, float]]]:
    """method -> [(cost, seconds)] of the study's completed records."""
    out, cost_of = defaultdict(list), get_study(study).cost
    for path in record_paths(runs_dir / study):
        record = json.loads(path.read_text())
        if record["result"]["status"] != "completed":
            continue
        config = RunConfig.from_dict(record["config"])
        cost, seconds = cost_of(config), record["provenance"].get("wall_time_s") or 0.0
        if cost > 0 and seconds > 0:  # not an evaluation without optimizer (max_iter = 0), not an old record
            out[config.method].append((cost, seconds))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs-dir", type=Path, default=Path("runs"))
    ap.add_argument("--study", nargs="+", default=["bbob", "synthetic", "image"])
    args = ap.parse_args(argv)
    for study in args.study:
        by_method = rates(args.runs_dir, study)
        if not by_method:
            print(f"{study}: no records under {args.runs_dir / study}")
            continue
        pairs = np.array([p for v in by_method.values() for p in v])
        overall = np.median(pairs[:, 1] / pairs[:, 0])
        rho = spearmanr(pairs[:, 0], pairs[:, 1]).statistic
        print(f"{study}: {len(pairs)} runs, Spearman(cost, wall time) = {rho:.3f}")
        print(f"  {'method':<16}{'runs':>6}{'spread':>10}{'vs all':>10}")
        for method, v in sorted(by_method.items()):
            per_unit = np.array([s / c for c, s in v])
            p10, p90 = np.percentile(per_unit, [10, 90])
            print(f"  {method:<16}{len(v):>6}{p90 / p10:>10.2f}{np.median(per_unit) / overall:>10.2f}")


if __name__ == "__main__":
    main()
