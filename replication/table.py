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

Reading (a table may come from anywhere): only a regular file is opened, and its Parquet
metadata is checked before any data is read: the run-table schema, at most :data:`MAX_ROWS`
rows, the columns ``config_hash``, ``study`` and ``record`` of strings, ``curve.*`` of lists of
int64 or float64 numbers, and at most :data:`MAX_READ_BYTES` in these columns once decompressed.
Only these columns are read, ``record`` and ``curve.*`` only for the rows asked for; each record
rebuilt is checked as one read from ``runs/`` (:func:`replication.records.schema_problem`).
Memory is thus bounded by the columns needed, whatever else the file holds.
"""
from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

from sabo import bounded_json

from .config import RunConfig, flatten
from .storage import atomic_write_bytes, kind_of

TABLE_SCHEMA = 1
METADATA_KEY = b"sabo_bench_table"
IDENTITY = ("study", "setting", "problem.name", "method", "seed", "config_hash", "group_hash", "code_version")
CURVE = "curve."
#: The most rows a run table may have: one row per run of a profile (1,860 in the largest committed table).
MAX_ROWS = 1_000_000
#: The most bytes of the columns read from a run table (checked from its Parquet metadata before any data is
#: read, and for the rows asked for before they become Python objects); the committed tables' are at most 6.5 MB.
MAX_READ_BYTES = 128 * 2**20
#: The longest config hash or study name a run table may hold (a config hash has 16 characters).
MAX_NAME_LENGTH = 256
_STRINGS = ("config_hash", "study", "record")  # the string columns read


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


def read_table_records(path, hashes=None) -> list[dict]:
    """The records held by the run table at ``path``, in its row order: every row's, or with ``hashes`` only
    those of the rows whose ``config_hash`` is among them.

    Raises ``ValueError`` naming the file (and the row) if it is not a run table of a known schema, or
    a record it holds is not one (:func:`replication.records.schema_problem`). What is read is bounded
    (module docstring, "Reading"): the file's metadata is checked before any data, then only the
    columns ``config_hash``, ``study``, ``record`` and ``curve.*`` are read, the last two only for the
    selected rows' row groups.
    """
    table = _RunTable(path)
    selected = table.rows(hashes)
    return table.records(selected)


class _RunTable:
    """A run table whose metadata and schema are checked before any data is read (:func:`read_table_records`).

    The string columns are read dictionary-encoded, as Parquet stores them, so that a value repeated in many
    rows takes its memory once: their lengths are checked before any is decoded into Python strings."""

    def __init__(self, path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = path
        try:
            mode = os.stat(path).st_mode
            if not stat.S_ISREG(mode):
                raise ValueError(f"{path}: not a regular file but {kind_of(mode)}")
            self.schema = pq.ParquetFile(path).schema_arrow
        except (OSError, pa.ArrowException) as exc:
            raise ValueError(f"{path}: not a readable Parquet file ({exc})") from None
        meta = (self.schema.metadata or {}).get(METADATA_KEY)
        try:
            schema = json.loads(meta)["schema"] if meta else None
        except (ValueError, KeyError, TypeError):
            schema = None
        if schema != TABLE_SCHEMA:
            raise ValueError(f"{path}: not a sabo-bench run table of schema {TABLE_SCHEMA} (written by `sabo-bench "
                             "report`; found " + ("no run-table metadata" if schema is None else f"schema {schema}")
                             + ")")
        self.curves = [name for name in self.schema.names if name.startswith(CURVE)]
        for name in _STRINGS:
            self._require(name, self._type(name) in (pa.string(), pa.large_string()), "a column of strings")
        for name in self.curves:
            kind = self._type(name)
            self._require(name, pa.types.is_list(kind) and kind.value_type in (pa.int64(), pa.float64()),
                          "a column of lists of int64 or float64 numbers")
        try:  # the string columns as stored: dictionary-encoded (class docstring)
            self.file = pq.ParquetFile(path, read_dictionary=list(_STRINGS))
        except (OSError, pa.ArrowException) as exc:
            raise ValueError(f"{path}: not a readable Parquet file ({exc})") from None
        rows = self.file.metadata.num_rows
        if rows > MAX_ROWS:
            raise ValueError(f"{path}: {rows} rows, more than the {MAX_ROWS} a run table may have")
        size = self._decoded_size()
        if size > MAX_READ_BYTES:
            raise ValueError(f"{path}: its columns {', '.join(_STRINGS)} and curve.* hold {size} bytes, more than "
                             f"the {MAX_READ_BYTES} read from a run table")

    def _type(self, name: str):
        index = self.schema.get_field_index(name)
        if index < 0 or self.schema.get_all_field_indices(name) != [index]:
            raise ValueError(f"{self.path}: not a run table: it has " + ("no" if index < 0 else "more than one")
                             + f" column {name!r}")
        return self.schema.field(index).type

    def _require(self, name: str, ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(f"{self.path}: not a run table: column {name!r} must be {what} (it holds "
                             f"{self._type(name)})")

    def _decoded_size(self) -> int:
        """Bytes of the columns read, from the file's metadata: a string column's as stored (it is read
        dictionary-encoded), a curve column's 8 bytes per number (a Parquet leaf's path is its column's name,
        then ``.list.element``)."""
        total, meta = 0, self.file.metadata
        curves = {name + ".list.element" for name in self.curves}
        for group in range(meta.num_row_groups):
            chunks = meta.row_group(group)
            for leaf in range(chunks.num_columns):
                chunk = chunks.column(leaf)
                if chunk.path_in_schema in _STRINGS:
                    total += chunk.total_uncompressed_size
                elif chunk.path_in_schema in curves:
                    total += max(chunk.total_uncompressed_size, 8 * chunk.num_values)
        return total

    def _short_strings(self, name: str) -> list:
        """The column ``name`` (config_hash, study) as Python strings, once its values are known to be short."""
        import pyarrow.compute as pc

        column = self.file.read(columns=[name]).column(name)
        longest = max((pc.max(pc.binary_length(chunk.dictionary)).as_py() or 0 for chunk in column.chunks), default=0)
        if longest > MAX_NAME_LENGTH:
            raise ValueError(f"{self.path}: not a run table: column {name!r} holds a value of {longest} characters "
                             f"(at most {MAX_NAME_LENGTH})")
        return column.to_pylist()

    def rows(self, hashes) -> list[int]:
        """The rows whose config hash is among ``hashes`` (every row for None); a hash found twice is a
        ``ValueError``."""
        digests = self._short_strings("config_hash")
        seen: set[str] = set()
        for digest in digests:
            if digest in seen:
                raise ValueError(f"{self.path}: config hash {digest} occurs twice")
            if digest is not None:
                seen.add(digest)
        return [i for i, digest in enumerate(digests) if hashes is None or digest in hashes]

    def studies(self) -> list[str]:
        """The studies the table's rows are of."""
        return sorted({str(study) for study in self._short_strings("study")})

    def records(self, rows: list[int]) -> list[dict]:
        """The records of ``rows`` (ascending), each rebuilt from its ``record`` and ``curve.*`` cells and checked;
        read one row group at a time, the cells' sizes checked before they become Python objects."""
        out, first = [], 0
        meta = self.file.metadata
        for group in range(meta.num_row_groups):
            size = meta.row_group(group).num_rows
            here = [i - first for i in rows if first <= i < first + size]
            if here:
                cells = self.file.read_row_group(group, columns=["config_hash", "record", *self.curves]).take(here)
                self._check_cells(cells, [first + i for i in here])
                digests, shells = cells.column("config_hash").to_pylist(), cells.column("record").to_pylist()
                curves = {name[len(CURVE):]: cells.column(name).to_pylist() for name in self.curves}
                for j, i in enumerate(here):
                    out.append(self._record(first + i, digests[j], shells[j], {k: v[j] for k, v in curves.items()}))
            first += size
        return out

    def _check_cells(self, cells, rows: list[int]) -> None:
        """Refuse cells that would take more than :data:`MAX_READ_BYTES` as Python strings and numbers (a
        dictionary-encoded string column holds a value repeated in many rows once)."""
        import pyarrow.compute as pc

        size = sum(8 * (pc.sum(pc.list_value_length(cells.column(name))).as_py() or 0) for name in self.curves)
        for chunk in cells.column("record").chunks:
            size += pc.sum(pc.take(pc.binary_length(chunk.dictionary), chunk.indices)).as_py() or 0
        if size > MAX_READ_BYTES:
            raise ValueError(f"{self.path}: the records of rows {rows[0]} to {rows[-1]} hold {size} bytes, more than "
                             f"the {MAX_READ_BYTES} read from a run table")

    def _record(self, row: int, digest, text, curves: dict) -> dict:
        from .records import schema_problem

        where = f"{self.path}: row {row} ({digest})"
        if text is None:
            raise ValueError(f"{where}: its record is empty (null)")
        try:
            record = bounded_json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{where}: its record is not JSON ({exc})") from None
        result = record.get("result") if isinstance(record, dict) else None
        keys = result.get("curve") if isinstance(result, dict) else None
        if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            raise ValueError(f"{where}: its record must name its curve columns (a list under result.curve)")
        missing = [k for k in keys if curves.get(k) is None]
        if missing:
            raise ValueError(f"{where} lacks curve column(s) " + ", ".join(CURVE + k for k in missing))
        result["curve"] = {k: curves[k] for k in keys}
        problem = schema_problem(record)
        if problem is not None:
            raise ValueError(f"{where}: its record is unusable: {problem}")
        if record["config_hash"] != digest:
            raise ValueError(f"{where}: its record holds config hash {record['config_hash']}")
        return record


def records_from_table(path, configs: list[RunConfig]) -> list[dict]:
    """The records of ``configs`` that the run table at ``path`` holds, in the order of ``configs``.

    Rows of other runs (another profile's) are left out, as ``runs/`` would leave them. A row
    that claims a config's hash but holds another config, or a hash found twice, is an error
    (``ValueError``): a table is written whole by one report, so either means it was altered.
    """
    from .engine import record_problem

    table = _RunTable(path)
    rows = table.rows({c.hash for c in configs})
    studies = table.studies()
    if configs and studies and configs[0].study not in studies:  # else: "no records", as if the runs were missing
        raise ValueError(f"{path} is a run table of study {', '.join(map(repr, studies))}, not of "
                         f"{configs[0].study!r}")
    by_hash = {record["config_hash"]: record for record in table.records(rows)}
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
