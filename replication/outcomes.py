"""What ``dvc metrics`` shows of a report (a few headline numbers), and the curves behind its figures.

``sabo-bench report`` writes beside each report (:func:`write_outcomes`):

* ``<out>/<REPORT_NAME>_metrics.json``, a DVC metrics file (``metrics:`` of the report stage in
  ``dvc.yaml``) of flat keys: ``profile``, ``records`` and ``runs`` (what the report was made from,
  which the refusal to replace a report reads: :func:`replication.claims.replacement_refusal`),
  ``reproduced`` (how many of the study's claims were reproduced) and, from the study's optional
  ``outcomes`` hook (:class:`replication.studies.Study`), one headline number per method of
  :data:`HEADLINE_METHODS`, keyed by the method: the synthetic study's median over (setting,
  function) cells of the decade (log10) of the median final error; the image study's median over
  (dimension, noise rate) cells of the selected test accuracy (%); the BBOB study's mean over
  (suite, dimension) cells of the solved fraction; the prompt study's median over (task, d) cells
  of the selected test metric (%). A number that is not finite (an error that overflowed, a cell
  whose seeds all diverged) is ``null`` (which DVC leaves out of its table). No key names a
  setting, so DVC's sorting of keys as text (d10 before d2) cannot scatter them.

  Why so few: ``dvc metrics show`` prints one column per key (its header plus 4 spaces wide, after
  the file's path), so a file must hold about ten short keys to fit :data:`WIDTH` columns; the
  per-cell numbers are in the report's tables and, every record, in its run table
  (:mod:`replication.table`). Why decades: DVC rounds a float to 5 decimals for display, so an
  error of 1e-8 would show as 0.0; its decade shows as -8.0. The numbers are rounded here
  (:data:`DIGITS`) to keep the columns narrow. The keys are the same in every study's file, so a
  plain ``dvc metrics show`` is one row per study and one column per method (each row in its
  study's unit).
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .claims import REPRODUCED
from .storage import atomic_write_bytes, write_json

WIDTH = 120
"""The widest line ``dvc metrics show <metrics file>`` may print (tests/test_results_table.py checks it)."""
HEADLINE_METHODS = ("bes", "cmaes", "ingo", "mmes", "sabo")
"""The methods a metrics file has a number for: the paper's five, which every study runs. A study's
other methods (the deviations ``sabo_inverse`` and ``sabo_small_rho``, the BO baselines, a plug-in)
are in its report and run table: with their keys ``dvc metrics show`` would exceed :data:`WIDTH`."""
DIGITS = {"decade": 2, "percent": 2, "fraction": 3}
"""Decimals a headline number keeps, by unit: 0.01 decade is a factor 1.023 of an error, 0.01 % a
hundredth of an accuracy point, 0.001 a thousandth of the (function, target, instance) triples."""
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


def decade(error) -> float:
    """log10 of an error (-inf for 0, inf for inf, NaN for NaN): what a metrics file shows of an error,
    which DVC's rounding to 5 decimals would show as 0.0 below 5e-6."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.log10(float(error)))


def per_method(cells: Iterable[tuple[str, float]], unit: str, reduce: Callable = np.median) -> dict:
    """``{method: reduce(values of its cells)}`` for the :data:`HEADLINE_METHODS` that have cells, in that
    order, rounded to :data:`DIGITS` [``unit``]; ``cells`` are (method, value) pairs, one per cell of the
    report's tables. A NaN cell (every seed diverged) makes its method's number ``null``: a headline
    that left the cell out would look better than the table it sums up."""
    values: dict[str, list[float]] = {}
    for method, value in cells:
        values.setdefault(method, []).append(float(value))
    out = {}
    for method in HEADLINE_METHODS:
        if method in values:
            value = number(reduce(values[method]))
            out[method] = None if value is None else round(value, DIGITS[unit])
    return out


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
    (``{"metrics": {method: number}, "curves": Curves | None}``), or None for a study without the hook.
    Of the claim verdicts only the number reproduced is a key (the four counts would not fit
    :data:`WIDTH`); every verdict is in ``<report_name>_claims.json``.
    """
    outcomes = outcomes or {}
    out_dir = Path(out_dir)
    metrics = {"profile": profile, "records": len(records), "runs": runs,
               "reproduced": sum(claim["verdict"] == REPRODUCED for claim in claims), **outcomes.get("metrics", {})}
    path = out_dir / f"{report_name}_metrics.json"
    write_json(path, metrics)
    written = [path]
    if outcomes.get("curves") is not None:
        path = out_dir / f"{report_name}_curves.csv"
        atomic_write_bytes(path, curves_csv(outcomes["curves"]))
        written.append(path)
    return written
