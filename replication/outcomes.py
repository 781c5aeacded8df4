"""What ``dvc metrics`` shows of a report (its outcome numbers), and the curves behind its figures.

``sabo-bench report`` writes beside each report (:func:`write_outcomes`):

* ``<out>/<REPORT_NAME>_metrics.json``, a DVC metrics file (``metrics:`` of the report stage in
  ``dvc.yaml``): the profile, how many records of how many runs the report was made from, the
  claim verdict counts (``claims.reproduced``, ``claims.not_reproduced``, ``claims.inconclusive``,
  ``claims.not_run``, all four always present) and the study's outcome numbers from its optional ``outcomes``
  hook (:class:`replication.studies.Study`): the synthetic study's median final error per
  setting, function and method, the image study's selected test accuracy per dimension, noise
  rate and method, the prompt study's selected test metric per task, d and method. A number
  that is not finite (an error that overflowed, a cell whose seeds all diverged) is ``null``.
* ``<out>/<REPORT_NAME>_curves.csv``, the curves behind the study's figures (which ``dvc.yaml``'s
  ``plots:`` show as images), where the hook names curves (:class:`Curves`): long format, one row per run
  and curve point, with ``panel`` (the facet), ``method``, ``seed``, the study's label columns,
  ``nit``, ``nfev`` and its curve columns. Values have 6 significant digits: the file is for
  looking; the exact curves are in the run table (:mod:`replication.table`).
"""
from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED
from .storage import atomic_write_bytes, write_json

VERDICT_KEYS = {REPRODUCED: "reproduced", NOT_REPRODUCED: "not_reproduced", INCONCLUSIVE: "inconclusive",
                NOT_RUN: "not_run"}
PLOT_LABELS = ("panel", "method", "seed")
"""The label columns every curves file starts with (a plot of it facets by ``panel``, colours by ``method``
and draws one line per ``seed``)."""


@dataclass
class Curves:
    """The curves a study's plots show: ``label(config)`` gives each run's label columns
    (:data:`PLOT_LABELS` first, then ``extra_labels``); ``values`` are the curve keys written
    after ``nit`` and ``nfev``."""

    records: list[dict]
    label: Callable[[dict], dict]
    values: Sequence[str]
    extra_labels: Sequence[str] = field(default_factory=tuple)

    @property
    def header(self) -> list[str]:
        return [*PLOT_LABELS, *self.extra_labels, "nit", "nfev", *self.values]


def number(value) -> float | None:
    """``value`` as a float, or None when it is not finite (JSON has no inf or NaN)."""
    value = float(value)
    return value if math.isfinite(value) else None


def nested(items, levels: int = 3) -> dict:
    """``{(a, b, c): v}`` -> ``{a: {b: {c: v}}}`` (keys as given; values through :func:`number`)."""
    out: dict = {}
    for key, value in items:
        if len(key) != levels:
            raise ValueError(f"nested: key {key!r} must have {levels} parts")
        slot = out
        for part in key[:-1]:
            slot = slot.setdefault(str(part), {})
        slot[str(key[-1])] = number(value)
    return out


def claim_counts(claims: list[dict]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICT_KEYS.values(), 0)
    for claim in claims:
        counts[VERDICT_KEYS[claim["verdict"]]] += 1
    return counts


def _cell(value) -> str | int:
    if isinstance(value, float):
        return format(value, ".6g")
    return value


def curves_csv(curves: Curves) -> bytes:
    """The long-format curves file (header, then one row per run and curve point)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(curves.header)
    for record in curves.records:
        labels = curves.label(record["config"])
        if list(labels) != [*PLOT_LABELS, *curves.extra_labels]:
            raise ValueError(f"Curves.label returned columns {list(labels)}, expected "
                             f"{[*PLOT_LABELS, *curves.extra_labels]}")
        curve = record["result"]["curve"]
        for i in range(len(curve["nit"])):
            writer.writerow([*labels.values(), curve["nit"][i], curve["nfev"][i],
                             *(_cell(curve[k][i]) for k in curves.values)])
    return text.getvalue().encode()


def write_outcomes(out_dir, report_name: str, *, profile: str, records: list[dict], runs: int,
                   claims: list[dict], outcomes: dict | None) -> list[Path]:
    """Write ``<report_name>_metrics.json`` (and ``_curves.csv`` where ``outcomes`` has curves); the paths.

    ``outcomes`` is what the study's ``outcomes(params, records)`` hook returned
    (``{"metrics": {...}, "curves": Curves | None}``), or None for a study without the hook.
    """
    outcomes = outcomes or {}
    out_dir = Path(out_dir)
    metrics = {"profile": profile, "records": len(records), "runs": runs, "claims": claim_counts(claims),
               **outcomes.get("metrics", {})}
    path = out_dir / f"{report_name}_metrics.json"
    write_json(path, metrics)
    written = [path]
    if outcomes.get("curves") is not None:
        path = out_dir / f"{report_name}_curves.csv"
        atomic_write_bytes(path, curves_csv(outcomes["curves"]))
        written.append(path)
    return written
