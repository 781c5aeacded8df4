"""The main job's wall time on this machine today, projected from short runs of the current code.

    python benchmarks/main_job_today.py [--fraction 0.05] [--workers 2] [--params params.yaml]

The committed run tables' times were measured on other machines and loads (``provenance.host``,
``numerics``; ``benchmarks/main_job.py --tables`` adds them up). This measures instead: for every
run stage of ``dvc repro`` (a study's setting and method) and every cost class in it (the problem's
dimension, and the budget), one of its runs is executed twice, with k = ``--fraction`` of its
iterations (at least 5) and with 2k, one BLAS thread, as the executors run it. The difference is
the cost of k iterations; what the short run cost beyond its k iterations is the run's fixed cost
(the problem's set-up, e.g. the image study's data, the record); a run of T iterations is
projected at fixed + T x the cost per iteration. A stage's runs are packed longest first on
``--workers`` (the executors' order: :func:`main_job.packed`), and ``dvc repro`` runs the stages
one after the other. Per-iteration costs are taken as constant over a run (what the first 2k
iterations cost): true of the objectives and of the methods' linear algebra, whose sizes do not
change; the image study evaluates its test accuracy at log-spaced iterations, more often early,
so its projection is an upper bound.

The image study needs its data prepared (``sabo-bench prepare image``, 7 s with the Debian route)
in the working directory's ``data/``: run it from a directory where that was done, with ``--params``
pointing at the parameter file.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from main_job import packed  # noqa: E402

from replication.config import RunConfig, iterations  # noqa: E402
from replication.costs import evaluations_per_iteration, optimizer_class, optimizer_popsize  # noqa: E402
from replication.engine import execute  # noqa: E402
from replication.executors import one_thread  # noqa: E402
from replication.studies import get_study  # noqa: E402

STUDIES = ("synthetic", "image", "bbob")  # the prompt study's offline profile runs nothing


def total_iterations(config: RunConfig) -> int:
    """The iterations ``config``'s budget allows (a budget in evaluations: over the evaluations per iteration)."""
    if "max_iter" in config.budget:
        return int(config.budget["max_iter"])
    dim = int(config.problem["dim"])
    cls = optimizer_class(config)
    per = evaluations_per_iteration(cls, dim, optimizer_popsize(config, dim), config.params)
    return iterations(config.budget, per)


def timed(config: RunConfig, n: int) -> float:
    """Wall seconds of ``config`` run for ``n`` iterations in a fresh directory."""
    d = config.to_dict()
    d["budget"] = {"max_iter": n}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        execute(RunConfig.from_dict(d), Path(tmp))
        return time.perf_counter() - t0


def cost_class(config: RunConfig) -> tuple:
    """What a run's cost per iteration depends on, besides its stage: the problem's dimension and the budget."""
    return (config.problem.get("dim"), tuple(sorted(config.budget.items())))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--fraction", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--studies", nargs="+", default=list(STUDIES))
    args = ap.parse_args(argv)
    one_thread()
    params = yaml.safe_load(args.params.read_text())
    grand, measured = 0.0, 0.0
    print(f"{'stage':<30} {'runs':>5} {'work min':>9} {'packed min':>11}")
    for study in args.studies:
        stages: dict[tuple, list[RunConfig]] = defaultdict(list)
        for c in get_study(study).configs(params):
            stages[(c.setting, c.method)].append(c)
        study_work = study_span = 0.0
        for (setting, method), configs in stages.items():
            classes: dict[tuple, list[RunConfig]] = defaultdict(list)
            for c in configs:
                classes[cost_class(c)].append(c)
            durations = []
            for members in classes.values():
                c = members[0]
                k = min(max(5, round(args.fraction * total_iterations(c))), total_iterations(c) // 2)
                spent = {n: timed(c, n) for n in (k, 2 * k)}
                measured += sum(spent.values())
                per_iteration = max(0.0, spent[2 * k] - spent[k]) / k
                fixed = max(0.0, spent[k] - k * per_iteration)
                durations += [fixed + per_iteration * total_iterations(m) for m in members]
            work, span = sum(durations), packed(durations, args.workers)
            study_work, study_span = study_work + work, study_span + span
            print(f"{study + '/' + setting + '/' + method:<30} {len(configs):5d} {work / 60:9.1f} {span / 60:11.1f}",
                  flush=True)
        grand += study_span
        print(f"{study}: work {study_work / 60:.1f} min, {study_span / 60:.1f} min on {args.workers} workers "
              f"(stages packed longest first, one after another)\n", flush=True)
    print(f"projected main job (run stages): {grand / 60:.1f} min on {args.workers} workers; "
          f"measured in {measured / 60:.1f} min of short runs")


if __name__ == "__main__":
    main()
