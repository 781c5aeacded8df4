"""Where the main job's time goes, and what its wall time is on 2 workers, from the records of a run.

    python benchmarks/main_job.py [--runs-dir runs] [--workers 2]
    python benchmarks/main_job.py --tables results/synthetic_runs.parquet results/noisy_labels_runs.parquet ...

For every run stage of ``dvc.yaml`` (a study's ``sabo-bench run --setting S --method M``), in
``dvc repro``'s order, from the records under ``--runs-dir`` (``provenance.started_utc``,
``finished_utc``, ``wall_time_s``):

* **work**: the runs' summed wall time (CPU-bound single-threaded runs: their CPU time);
* **packed**: the stage's span if its runs were packed longest first on ``--workers`` cores
  (the executors' order), the floor a stage can reach;
* **span** and **idle**: the stage's measured span (first start to last finish) and the core time it
  left idle (workers x span - work): the tail where fewer runs remain than workers, and
  whatever else kept a core from a run;
* **gap**: the time between this stage's last record and the next stage's first start (process
  start-up, DVC's hashing, the report stages), measured only where consecutive stages ran in one
  ``dvc repro`` (gaps over 10 minutes are taken for separate invocations and not counted).

Then per study and for the whole job: work / workers (the floor with perfect packing), the sum of
packed spans, the measured spans and gaps, and the top cells by work.

``--tables`` reads the runs from run tables (``sabo-bench report``'s ``<name>_runs.parquet``, e.g. the
committed ones) instead: on a fresh clone, the main job's projected wall time on ``--workers`` from
the committed results' own run times. Their spans and gaps mean little there (the studies ran in
separate sessions, on other machines and loads: ``provenance.host`` and ``numerics`` say which);
the work and the packed spans are the projection.
"""
from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replication.engine import record_paths  # noqa: E402

MAX_GAP_S = 600.0


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def packed(durations: list[float], workers: int) -> float:
    """The span of ``durations`` scheduled longest first onto ``workers`` identical workers."""
    free = [0.0] * workers
    for d in sorted(durations, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def stage_runs(runs_dir: Path) -> dict[tuple[str, str, str], list[dict]]:
    """(study, setting, method) -> [{"start", "end", "wall"}] of the completed or diverged records."""
    out = defaultdict(list)
    for path in record_paths(runs_dir):
        try:
            record = json.loads(path.read_text())
            c, p = record["config"], record["provenance"]
            out[(c["study"], c["setting"], c["method"])].append(
                {"start": _time(p["started_utc"]), "end": _time(p["finished_utc"]), "wall": float(p["wall_time_s"])})
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a record of this engine: nothing to time
    return out


def table_runs(paths: list[Path]) -> dict[tuple[str, str, str], list[dict]]:
    """:func:`stage_runs` from run tables (their ``study``, ``setting``, ``method`` and ``provenance.*`` columns)."""
    import pyarrow.parquet as pq

    columns = ["study", "setting", "method", "provenance.started_utc", "provenance.finished_utc",
               "provenance.wall_time_s"]
    out = defaultdict(list)
    for path in paths:
        for row in pq.read_table(path, columns=columns).to_pylist():
            out[(row["study"], row["setting"], row["method"])].append(
                {"start": _time(row["provenance.started_utc"]), "end": _time(row["provenance.finished_utc"]),
                 "wall": float(row["provenance.wall_time_s"])})
    return out


def stage_order() -> list[tuple[str, str, str]]:
    """The run stages of dvc.yaml as (study, setting, method), in the file's order."""
    order = []
    for name, stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items():
        items = list(stage["foreach"].values()) if "foreach" in stage else None
        if "matrix" in stage:
            m = stage["matrix"]
            key = next(k for k in m if k != "method")
            items = [{"setting": s, "method": meth} for s in m[key] for meth in m["method"]]
        for item in items or []:
            order.append((name, item["setting"], item["method"]))
    return order


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "runs")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--tables", type=Path, nargs="+", metavar="RUNS_PARQUET",
                    help="read the runs from these run tables instead of --runs-dir (a fresh clone's projection)")
    args = ap.parse_args(argv)
    runs = table_runs(args.tables) if args.tables else stage_runs(args.runs_dir)
    order = [key for key in stage_order() if key in runs]
    order += sorted(key for key in runs if key not in order)  # runs of no stage (e.g. another profile)
    rows, totals = [], defaultdict(lambda: defaultdict(float))
    previous_end = None
    for key in sorted(order, key=lambda k: min(r["start"] for r in runs[k])):  # as they ran
        rs = runs[key]
        work = sum(r["wall"] for r in rs)
        start, end = min(r["start"] for r in rs), max(r["end"] for r in rs)
        span = end - start
        gap = start - previous_end if previous_end is not None and 0 <= start - previous_end <= MAX_GAP_S else 0.0
        previous_end = end
        row = {"stage": "/".join(key), "runs": len(rs), "work": work, "packed": packed([r["wall"] for r in rs],
                                                                                    args.workers),
               "span": span, "idle": max(0.0, args.workers * span - work), "gap": gap}
        rows.append(row)
        for scope in (key[0], "all"):
            for field in ("work", "packed", "span", "idle", "gap"):
                totals[scope][field] += row[field]
            totals[scope]["runs"] += len(rs)
    print(f"{'stage':<32} {'runs':>5} {'work min':>9} {'packed':>7} {'span':>7} {'idle':>7} {'gap s':>6}")
    for row in rows:
        print(f"{row['stage']:<32} {row['runs']:5d} {row['work'] / 60:9.1f} {row['packed'] / 60:7.1f} "
              f"{row['span'] / 60:7.1f} {row['idle'] / 60:7.1f} {row['gap']:6.0f}")
    print()
    for scope, t in sorted(totals.items(), key=lambda kv: kv[0] == "all"):
        floor = t["work"] / 60 / args.workers
        print(f"{scope:<10} {int(t['runs']):5d} runs: work {t['work'] / 60:.1f} min = {floor:.1f} "
              f"min on {args.workers} workers if perfectly packed; stages packed longest first "
              f"{t['packed'] / 60:.1f} min; measured spans {t['span'] / 60:.1f} min (idle core time "
              f"{t['idle'] / 60:.1f} min) + gaps {t['gap'] / 60:.1f} min = {(t['span'] + t['gap']) / 60:.1f} min")
    print(f"\ntop {args.top} stages by work:")
    for row in sorted(rows, key=lambda r: -r["work"])[:args.top]:
        print(f"  {row['stage']:<32} {row['work'] / 60:7.1f} min ({row['work'] / totals['all']['work']:.0%})")


if __name__ == "__main__":
    main()
