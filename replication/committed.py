"""Committed run tables as baselines: which runs of a profile a run table holds, and why it lacks the others.

A report's run table (``results/<REPORT_NAME>_runs.parquet``, :mod:`replication.table`) is committed
with it, so a fresh clone has every record the report was made from although its ``runs/`` is empty.
``sabo-bench list`` counts those runs (recorded under ``runs/``, only in the table, or pending) and
``sabo-bench run --compare-with TABLE`` takes the other methods' records from a table instead of
computing them. Both go through :func:`coverage`, which matches runs by config hash: a row counts for
a run only if it holds exactly the record of that run's config, so same problem, parameters, budget,
seed and code version (``code_version``: ``sabo.RESULTS_VERSION`` and the optimizer's ``revision``). A run
the table lacks is explained (:attr:`Coverage.reasons`): the table's row of the same setting, problem,
method and seed differs in a named key (a bumped code version, another profile's budget), or the table
has no such row.

Which table: ``--table`` / ``--compare-with`` name one; by default (:func:`default_table`) the one
beside the parameter file that ``sabo-bench report`` writes for the profile: ``results/<profile>/``
(where ``sabo-bench report --profile P --out results/P`` puts a profile's report, as the committed
``results/ci/``), else ``results/`` (the committed report of the full study).
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .config import RunConfig, flatten

RESULTS = "results"


def default_table(params_path, report_name: str, profile: str) -> Path | None:
    """The committed run table of ``profile`` beside the parameter file at ``params_path``, or None: the first
    of ``results/<profile>/<report_name>_runs.parquet`` and ``results/<report_name>_runs.parquet`` that exists."""
    from .table import table_path

    results = Path(params_path).parent / RESULTS
    for place in (results / profile, results):
        path = table_path(place, report_name)
        if path.is_file():
            return path
    return None


def _key(config: dict) -> tuple:
    """Runs a table's row may stand for: the same setting, method and seed (the rest may differ)."""
    return config["setting"], config["method"], config["seed"]


_FIRST = ("code_version", "problem.name")  # the differences named first: the telling ones
_ABSENT = "(absent)"
_SHOWN = 2  # differing keys named per reason


def _differences(there: dict, here: dict) -> list[str]:
    """The keys of the flattened configs ``there`` and ``here`` whose values differ, the telling ones first."""
    keys = [k for k in there.keys() | here.keys() if there.get(k, _ABSENT) != here.get(k, _ABSENT)]
    return sorted(keys, key=lambda k: (_FIRST.index(k) if k in _FIRST else len(_FIRST), k))


@dataclass
class Coverage:
    """What a run table holds of some runs (:func:`coverage`)."""

    path: Path
    #: config hash -> record, for the runs whose exact record the table holds
    records: dict[str, dict] = field(default_factory=dict)
    #: the runs it does not hold, in the order given
    missing: list[RunConfig] = field(default_factory=list)
    #: why, one line per (method, reason), with how many runs it concerns
    reasons: list[str] = field(default_factory=list)


def coverage(path, configs: list[RunConfig]) -> Coverage:
    """The records of ``configs`` that the run table at ``path`` holds, and why it lacks the others.

    Raises ``ValueError`` (one line naming the file) if ``path`` is not a readable run table, is one of
    another study, or holds under a run's config hash a record that is not that run's
    (:func:`replication.table.read_table_records`, :func:`replication.engine.record_problem`).
    """
    from .engine import record_problem
    from .table import read_table_records

    path = Path(path)
    rows = read_table_records(path)
    studies = sorted({r["config"].get("study") for r in rows})
    if configs and rows and configs[0].study not in studies:
        raise ValueError(f"{path} is a run table of study {', '.join(map(repr, studies))}, not of "
                         f"{configs[0].study!r}")
    by_hash = {r["config_hash"]: r for r in rows}
    out = Coverage(path)
    for config in configs:
        record = by_hash.get(config.hash)
        if record is None:
            out.missing.append(config)
            continue
        problem = record_problem(record, config)
        if problem is not None:
            raise ValueError(f"{path}: the row of {config.label} ({config.hash}) is unusable: {problem}")
        out.records[config.hash] = record
    if out.missing:
        out.reasons = _reasons(out.missing, rows)
    return out


def _reasons(missing: list[RunConfig], rows: list[dict]) -> list[str]:
    """Why the table of ``rows`` lacks the runs ``missing``: one line per method and reason, naming the (first
    :data:`_SHOWN`) keys in which the nearest row of the same setting, method and seed (the one of the fewest
    differing keys) differs."""
    by_key: dict = {}
    for r in rows:
        by_key.setdefault(_key(r["config"]), []).append(flatten("", r["config"], {}))
    counts: Counter = Counter()
    examples: dict = {}
    for config in missing:
        here = flatten("", config.to_dict(), {})
        candidates = [(_differences(there, here), there) for there in by_key.get(_key(config.to_dict()), [])]
        if not candidates:
            reason = (config.method, (), 0)
        else:
            keys, there = min(candidates, key=lambda candidate: len(candidate[0]))
            shown = tuple((key, there.get(key, _ABSENT), here.get(key, _ABSENT)) for key in keys[:_SHOWN])
            reason = (config.method, shown, len(keys) - len(shown))
        counts[reason] += 1
        examples.setdefault(reason, config.label)
    lines = []
    for (method, shown, more), n in counts.items():
        runs = f"{n} run{'s' if n != 1 else ''} of {method} (e.g. {examples[method, shown, more]})"
        if not shown:
            lines.append(f"{runs}: no row of that setting, method and seed")
            continue
        named = [f"code version {there} there, {here} here" if key == "code_version" else
                 f"{key} = {there!r} there, {here!r} here" for key, there, here in shown]
        lines.append(f"{runs}: " + ", ".join(named) + (f" ({more} more key(s) differ)" if more else ""))
    return lines


def sha256(path) -> str:
    """The SHA-256 of the file at ``path`` (a comparison names the exact table its baselines came from)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _by_method(configs: list[RunConfig]) -> dict[str, list[RunConfig]]:
    out: dict[str, list[RunConfig]] = {}
    for config in configs:
        out.setdefault(config.method, []).append(config)
    return out


def _commits(records: list[dict]) -> str:
    """The commits (short) the records were computed at, from their provenance."""
    commits = sorted({(r["provenance"].get("git_revision") or "unknown")[:10] for r in records})
    return ", ".join(commits)


def sources_section(committed: Coverage, *, computed: list[RunConfig], records: dict[str, dict],
                    baseline: list[RunConfig], runs_dir, command: str, report_name: str) -> str:
    """The markdown section a comparison's page ends with: which methods' records were computed here and which are
    rows of the committed table (named with its SHA-256), with each method's code version and commits."""
    lines = ["## Where these records come from", "",
             f"This page compares methods computed here with the records of the other methods in a committed run "
             f"table: `{command}`. Rows from the table are the table's records of the same configs and code "
             f"versions (the same config hashes) that this code runs, not recomputed; `{committed.path}` had SHA-256 "
             f"`{sha256(committed.path)}`. Every record is in `{report_name}_runs.parquet` beside this page, and "
             f"`{report_name}_sources.json` lists the config hashes from each source.", "",
             "| method | runs | code version | records from | computed at commit |", "| --- | ---: | --- | --- | --- |"]
    for source, configs, pool in (("computed here (`" + str(runs_dir) + "`)", computed, records),
                                  (f"committed run table `{committed.path}`", baseline, committed.records)):
        for method, runs in _by_method(configs).items():
            versions = ", ".join(sorted({c.code_version for c in runs}))
            lines.append(f"| {method} | {len(runs)} | {versions} | {source} | "
                         f"{_commits([pool[c.hash] for c in runs])} |")
    return "\n".join(lines) + "\n"


def write_sources(out_dir, report_name: str, committed: Coverage, *, computed: list[RunConfig],
                  baseline: list[RunConfig], command: str) -> Path:
    """``<out_dir>/<report_name>_sources.json``: the comparison's command, the table (path and SHA-256) and the
    config hashes of each method's runs by source (``computed_here``, ``from_table``)."""
    from .storage import write_json

    path = Path(out_dir) / f"{report_name}_sources.json"
    write_json(path, {"command": command, "table": str(committed.path), "table_sha256": sha256(committed.path),
                      "computed_here": {m: [c.hash for c in cs] for m, cs in _by_method(computed).items()},
                      "from_table": {m: [c.hash for c in cs] for m, cs in _by_method(baseline).items()}})
    return path
