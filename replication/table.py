"""The run table: every record of a report as one row of a Parquet file, and the records back from it.

``sabo-bench report`` writes ``<out>/<REPORT_NAME>_runs.parquet`` beside the report, from the
records the report was made from, so that the committed ``results/`` carries its own data: a
fresh clone re-renders every report and claim from it without ``runs/``
(``sabo-bench report STUDY --from-table results/<REPORT_NAME>_runs.parquet``), and it is the
table to load into pandas (``pandas.read_parquet``). One row per run, in the order of the
profile's configs:

* identity: ``study``, ``setting``, ``problem.name``, ``method``, ``seed``, ``config_hash``,
  ``group_hash``, ``code_version``;
* the rest of the config, flattened with dots (``problem.dim``, ``params.lr``,
  ``params.rho.scale``, ``budget.max_iter``);
* the result: ``status``, ``message``, ``evals_per_iteration``, ``seeds.*``, the final curve
  point ``final.*`` (e.g. ``final.error``, ``final.test_accuracy``), the optimizer's
  ``stats.*`` and, where a study has one, ``final_evaluation.*``;
* ``provenance.*`` (commit, start and finish times, wall time, versions, host);
* the curve: one list column per curve key (``curve.nit``, ``curve.nfev``, ``curve.error``,
  ...), float64 and int64 exactly as recorded;
* ``record``: the record without its curve values, as canonical JSON (sorted keys; NaN kept).

The flattened columns are for reading; ``record`` and the ``curve.*`` columns are what
:func:`records_from_table` rebuilds records from, so a rebuilt record is the record (same JSON
types, NaN and key order of the curve included): a report made from the table is byte for
byte the report made from ``runs/``. A flattened column whose values have no common Arrow
type (a value that is a string in one run and a number in another) holds them as JSON text.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

from .config import RunConfig, flatten
from .storage import atomic_write_bytes

TABLE_SCHEMA = 1
METADATA_KEY = b"sabo_bench_table"
IDENTITY = ("study", "setting", "problem.name", "method", "seed", "config_hash", "group_hash", "code_version")
CURVE = "curve."


def table_path(out_dir, report_name: str) -> Path:
    """Where ``sabo-bench report`` writes the run table of a report: ``<out_dir>/<report_name>_runs.parquet``."""
    return Path(out_dir) / f"{report_name}_runs.parquet"


def records_note(report_name: str) -> str:
    """How a report's page names its records: the run table beside it. True wherever the records came from
    (any ``--runs-dir``, or a run table), so a page re-rendered from its table stays byte-identical."""
    return f"Records: `{table_path('.', report_name).name}` beside this page, one row per run."


def _row(record: dict) -> dict:
    """The flattened columns of one record (its curve as ``curve.<key>`` lists)."""
    result = record["result"]
    row: dict = {}
    flatten("", record["config"], row)
    flatten("", {k: v for k, v in result.items() if k != "curve"}, row)
    for key in ("config_hash", "group_hash"):
        row[key] = record.get(key)
    flatten("provenance", record["provenance"], row)
    for key, values in result["curve"].items():
        row[CURVE + key] = values
    shell = {**record, "result": {**result, "curve": list(result["curve"])}}  # curve keys only, in order
    row["record"] = json.dumps(shell, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return row


def _column(values: list):
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else json.dumps(v, sort_keys=True) for v in values], pa.string())


def to_table(records: list[dict]):
    """A ``pyarrow.Table`` with one row per record (see the module docstring)."""
    import pyarrow as pa

    rows = [_row(r) for r in records]
    names = list(IDENTITY)
    rest = sorted({k for row in rows for k in row} - set(IDENTITY) - {"record"},
                  key=lambda k: (k.startswith(CURVE), k))  # curve lists last: the scalars read first
    names += [*rest, "record"]
    columns = [_column([row.get(name) for row in rows]) if rows else pa.array([], pa.string()) for name in names]
    meta = {METADATA_KEY: json.dumps({"schema": TABLE_SCHEMA, "rows": len(rows)}).encode()}
    return pa.Table.from_arrays(columns, names=names).replace_schema_metadata(meta)


def write_table(path, records: list[dict]) -> Path:
    """Write the run table of ``records`` to ``path`` (Parquet, zstd, written atomically)."""
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(to_table(records), buffer, compression="zstd")
    atomic_write_bytes(path, buffer.getvalue())
    return Path(path)


def read_table_records(path) -> list[dict]:
    """Every record held by the run table at ``path``, in its row order.

    Raises ``ValueError`` naming the file if it is not a run table of a known schema.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"{path}: not a readable Parquet file ({exc})") from None
    meta = (table.schema.metadata or {}).get(METADATA_KEY)
    try:
        schema = json.loads(meta)["schema"] if meta else None
    except (ValueError, KeyError, TypeError):
        schema = None
    if schema != TABLE_SCHEMA:
        raise ValueError(f"{path}: not a sabo-bench run table of schema {TABLE_SCHEMA} (written by `sabo-bench "
                         "report`; found " + ("no run-table metadata" if schema is None else f"schema {schema}") + ")")
    shells = table.column("record").to_pylist()
    curves = {name[len(CURVE):]: table.column(name).to_pylist() for name in table.column_names
              if name.startswith(CURVE)}
    records = []
    for i, text in enumerate(shells):
        record = json.loads(text)
        keys = record["result"]["curve"]
        missing = [k for k in keys if k not in curves or curves[k][i] is None]
        if missing:
            raise ValueError(f"{path}: row {i} ({record.get('config_hash')}) lacks curve column(s) "
                             + ", ".join(CURVE + k for k in missing))
        record["result"]["curve"] = {k: curves[k][i] for k in keys}
        records.append(record)
    return records


def records_from_table(path, configs: list[RunConfig]) -> list[dict]:
    """The records of ``configs`` that the run table at ``path`` holds, in the order of ``configs``.

    Rows of other runs (another profile's) are left out, as ``runs/`` would leave them. A row
    that claims a config's hash but holds another config, or a hash found twice, is an error
    (``ValueError``): a table is written whole by one report, so either means it was altered.
    """
    from .engine import record_problem

    by_hash: dict[str, dict] = {}
    for record in read_table_records(path):
        digest = record.get("config_hash")
        if digest in by_hash:
            raise ValueError(f"{path}: config hash {digest} occurs twice")
        by_hash[digest] = record
    studies = sorted({str(r.get("config", {}).get("study")) for r in by_hash.values()})
    if configs and by_hash and configs[0].study not in studies:  # else: "no records", as if the runs were missing
        raise ValueError(f"{path} is a run table of study {', '.join(map(repr, studies))}, not of "
                         f"{configs[0].study!r}")
    out = []
    for config in configs:
        record = by_hash.get(config.hash)
        if record is None:
            continue
        problem = record_problem(record, config)
        if problem is not None:
            raise ValueError(f"{path}: the row of {config.label} ({config.hash}) is unusable: {problem}")
        out.append(record)
    return out
