"""sabo-bench: run the paper's studies, list their runs, and regenerate their reports.

Typical use (from the repository root, where params.yaml lives):

    sabo-bench prepare image                         # data and cached features, where a study has them
    sabo-bench run synthetic --workers 2            # every run of the active profile
    sabo-bench run synthetic --profile quick         # the < 5 minute preview
    sabo-bench run-one synthetic --setting d200_N50 --function levy --method sabo --seed 0
    sabo-bench list synthetic                        # which runs are done, diverged, pending
    sabo-bench report synthetic                      # tables, figures and claim verdicts -> results/

Runs are idempotent (finished ones are skipped) and resumable (an interrupted run continues
from its last checkpoint). Records go to runs/<study>/<setting>/<method>/<config-hash>.json
and, unless --no-track, to MLflow (MLFLOW_TRACKING_URI, default sqlite:///mlflow.db;
browse with `mlflow ui`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from .engine import checkpoint_path, execute, load_record
from .errors import ResourceUnavailable
from .executors import EXECUTORS, run_configs
from .studies import STUDIES, get_study


def load_params(path: str, study: str, profile: str | None) -> dict:
    with open(path) as fh:
        params = yaml.safe_load(fh)
    if study not in params:
        raise SystemExit(f"{path} has no section {study!r}")
    if profile is not None:
        params[study]["profile"] = profile
    return params


def select(args) -> tuple[dict, list]:
    study = get_study(args.study)
    params = load_params(args.params, args.study, args.profile)
    configs = study.configs(params, settings=args.setting, methods=args.method, seeds=args.seed,
                            functions=args.function)
    return params, configs


def add_common(p: argparse.ArgumentParser, *, selection: bool = True) -> None:
    p.add_argument("study", choices=sorted(STUDIES), help="which study of the paper")
    p.add_argument("--params", default="params.yaml", help="parameter file (default: %(default)s)")
    p.add_argument("--profile", help="override the study's profile from the parameter file (e.g. full, quick, ci)")
    p.add_argument("--runs-dir", default="runs", help="where run records and checkpoints live (default: %(default)s)")
    if selection:
        p.add_argument("--setting", nargs="+", help="only these settings (e.g. d200_N50)")
        p.add_argument("--method", nargs="+", help="only these methods (sabo ingo bes cmaes mmes)")
        p.add_argument("--function", nargs="+", help="only these problems (e.g. ellipsoid levy)")
        p.add_argument("--seed", nargs="+", type=int, help="only these seeds")


def make_tracker(args):
    if args.no_track:
        return None
    from .tracking import Tracker

    return Tracker()


class SafeLogger:
    """Log records to MLflow without letting a tracking failure stop the study.

    Records are on disk already; a record that failed to log is logged by the next
    ``sabo-bench run`` (logging is idempotent). Failures are reported and make the command
    exit with status 1 at the end.
    """

    def __init__(self, tracker):
        self.tracker, self.failures = tracker, 0

    def __call__(self, record: dict) -> None:
        try:
            self.tracker.log_record(record)
        except Exception as exc:  # noqa: BLE001 - any tracking error is reported, the runs go on
            self.failures += 1
            print(f"warning: MLflow logging of {record['config_hash']} failed: {exc!r}", file=sys.stderr)


def cmd_run(args) -> int:
    params, configs = select(args)
    Path(args.runs_dir, args.study).mkdir(parents=True, exist_ok=True)  # a pipeline output even when empty
    if not configs:
        if args.allow_empty:
            print(f"profile {params[args.study]['profile']!r} of study {args.study!r} has no run matching the "
                  "selection: nothing to do")
            return 0
        print("no runs match the selection", file=sys.stderr)
        return 1
    tracker = make_tracker(args)
    logger = SafeLogger(tracker) if tracker else None
    records = run_configs(configs, args.runs_dir, workers=args.workers, executor=args.executor,
                          on_record=logger, progress=not args.quiet, checkpoint_every_s=args.checkpoint_every)
    diverged = sum(r["result"]["status"] == "diverged" for r in records)
    print(f"{len(records)} runs finished ({diverged} diverged) under {args.runs_dir}/{args.study}")
    if logger is not None and logger.failures:
        print(f"{logger.failures} records could not be logged to MLflow; rerun to retry", file=sys.stderr)
        return 1
    return 0


def cmd_run_one(args) -> int:
    _, configs = select(args)
    if len(configs) != 1:
        labels = ", ".join(c.label for c in configs[:8])
        print(f"the selection matches {len(configs)} runs ({labels}{', ...' if len(configs) > 8 else ''}); "
              "narrow it with --setting/--function/--method/--seed to exactly one", file=sys.stderr)
        return 1
    from tqdm.auto import tqdm

    config = configs[0]
    bar = tqdm(total=config.budget["max_iter"], desc=config.label, unit="it", disable=args.quiet)

    def progress(nit, _max_iter):
        bar.update(nit - bar.n)

    record = execute(config, args.runs_dir, checkpoint_every_s=args.checkpoint_every, progress=progress)
    bar.close()
    tracker = make_tracker(args)
    if tracker:
        tracker.log_record(record)
    final = record["result"]["final"]
    print(f"{config.label}: {record['result']['status']}, " + ", ".join(f"{k} = {v:.4g}" for k, v in final.items()))
    return 0


def cmd_list(args) -> int:
    _, configs = select(args)
    counts: dict[str, int] = {}
    for c in configs:
        record = load_record(args.runs_dir, c)
        if record is not None:
            status = record["result"]["status"]
            detail = f"wall {record['provenance']['wall_time_s']:.1f}s"
        elif checkpoint_path(args.runs_dir, c).exists():
            status, detail = "partial", "checkpoint present"
        else:
            status, detail = "pending", ""
        counts[status] = counts.get(status, 0) + 1
        if not args.summary:
            print(f"{c.hash}  {status:<9} {c.label:<48} {detail}")
    print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no runs")
    return 0


def cmd_prepare(args) -> int:
    study = get_study(args.study)
    if not hasattr(study, "prepare"):
        print(f"study {args.study!r} needs no data preparation")
        return 0
    for line in study.prepare(load_params(args.params, args.study, args.profile)):
        print(line)
    return 0


def cmd_report(args) -> int:
    study = get_study(args.study)
    params = load_params(args.params, args.study, args.profile)
    configs = study.configs(params)
    records = [r for r in (load_record(args.runs_dir, c) for c in configs) if r is not None]
    print(f"{len(records)} of {len(configs)} runs of profile {params[args.study]['profile']!r} have records")
    outcome = study.report(params, records, Path(args.out), tracker=make_tracker(args))
    for path in outcome["files"]:
        print(f"wrote {path}")
    if args.record_expected:
        from .claims import REPRODUCED
        from .storage import write_json

        held = [v["id"] for v in outcome["claims"] if v["verdict"] == REPRODUCED]
        write_json(args.record_expected, {"profile": params[args.study]["profile"], "reproduced": held})
        print(f"recorded {len(held)} reproduced claims in {args.record_expected}")
    if args.check_claims:
        from .claims import check_against_expected

        failures = check_against_expected(outcome["claims"], args.check_claims)
        for line in failures:
            print(f"CLAIM REGRESSION: {line}", file=sys.stderr)
        if failures:
            return 1
        print(f"claims: every claim expected in {args.check_claims} still holds")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="sabo-bench", description=__doc__.split("\n\n")[0],
                                 epilog="Run `sabo-bench COMMAND --help` for the options of a command.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="execute every selected run of a study (skips finished ones, resumes partial ones)")
    add_common(p)
    p.add_argument("--workers", type=int, default=1, help="parallel worker processes / Ray CPUs (default: 1)")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local worker processes, or Ray (RAY_ADDRESS, else a local Ray instance)")
    p.add_argument("--checkpoint-every", type=float, default=30.0, metavar="SECONDS",
                   help="checkpoint each run this often (default: %(default)s)")
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--allow-empty", action="store_true",
                   help="exit 0 when no run matches (e.g. the prompt study's offline profile)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("run-one", help="execute exactly one run (the selection must match one), with a progress bar")
    add_common(p)
    p.add_argument("--checkpoint-every", type=float, default=30.0, metavar="SECONDS")
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run_one)

    p = sub.add_parser("list", help="list the selected runs with their status (done, diverged, partial, pending)")
    add_common(p)
    p.add_argument("--summary", action="store_true", help="only the counts per status")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("prepare", help="prepare a study's data (e.g. the image study's cached UMAP features)")
    add_common(p, selection=False)
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("report", help="regenerate a study's tables, figures and claim verdicts from its records")
    add_common(p, selection=False)
    p.add_argument("--out", default="results", help="output directory (default: %(default)s)")
    p.add_argument("--no-track", action="store_true", help="do not attach the figures to MLflow")
    p.add_argument("--check-claims", metavar="EXPECTED_JSON",
                   help="exit 1 if a claim listed as reproduced in this file no longer is")
    p.add_argument("--record-expected", metavar="EXPECTED_JSON",
                   help="write the ids of the claims reproduced now (regenerate deliberately, e.g. for CI)")
    p.set_defaults(func=cmd_report)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ResourceUnavailable as exc:  # a missing model or data set: the message says how to supply it
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
