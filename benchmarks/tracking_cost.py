"""What logging a stage's records to MLflow costs the stage's parent process, per record.

    python benchmarks/tracking_cost.py runs/image/d100/sabo [--records 45] [--rounds 3] [--store BIG.db]

Two ways to log the same records (whole seed groups, in seed order), alternated in one process,
each round into a fresh copy of the store:

* **per seed**: ``Tracker.log_record`` for each record -- the seed run, then its group run
  written anew from every seed logged so far (what ``sabo-bench run`` did before);
* **per group**: ``replication.cli.SafeLogger`` -- the seed runs, and each group run once, when
  its last seed has come (what ``sabo-bench run`` and ``track`` do).

Printed: CPU milliseconds per record of each, and their ratio. The parent's CPU comes out of the
two workers' cores in ``dvc repro``. ``--store`` starts each round from a copy of an existing
store (e.g. a full main job's ``mlflow.db``): MLflow's searches and inserts slow down as it grows.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replication.cli import SafeLogger  # noqa: E402
from replication.config import RunConfig  # noqa: E402
from replication.tracking import Tracker  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a stage's records: runs/<study>/<setting>/<method>")
    ap.add_argument("--records", type=int, default=45, help="records logged per round (whole groups first)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--store", type=Path, help="an MLflow SQLite store each round starts from (default: empty)")
    args = ap.parse_args(argv)
    records = [json.loads(p.read_text()) for p in sorted(args.folder.glob("*.json"))]
    if not records:
        ap.error(f"{args.folder}: no records (*.json)")
    records.sort(key=lambda r: (r["group_hash"], r["config"]["seed"]))
    records = records[:args.records]
    configs = [RunConfig.from_dict(r["config"]) for r in records]
    groups = len({r["group_hash"] for r in records})
    cpu = {"per seed": [], "per group": []}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for way in cpu:
                db = Path(tmp, f"{rnd}-{way.replace(' ', '_')}.db")
                if args.store:
                    shutil.copyfile(args.store, db)
                tracker = Tracker(f"sqlite:///{db}")
                start = time.process_time()
                if way == "per seed":
                    for record in records:
                        tracker.log_record(record, profile="benchmark")
                else:
                    logger = SafeLogger(tracker, "", profile="benchmark", configs=configs)
                    for record in records:
                        logger(record)
                    logger.flush()
                cpu[way].append((time.process_time() - start) / len(records))
                db.unlink()
    print(f"{len(records)} records in {groups} groups of {args.folder}, {args.rounds} rounds"
          f"{f' from a copy of {args.store}' if args.store else ' into an empty store'}:")
    for way, values in cpu.items():
        print(f"  {way:9}: {1000 * min(values):6.0f} ms CPU per record (best round; all: "
              f"{', '.join(f'{1000 * v:.0f}' for v in values)})")
    print(f"  per group / per seed: {min(cpu['per group']) / min(cpu['per seed']):.2f}")


if __name__ == "__main__":
    main()
