"""The schema of a run record (``<hash>.json``, written by :mod:`replication.engine`), checked wherever one is read.

A record read back, from ``runs/`` or from a run table (:mod:`replication.table`), may have been
damaged or edited, and everything downstream (``sabo-bench list``, the studies' tables and figures,
the run table, MLflow) indexes into it: a record of the wrong shape would end in a ``KeyError`` or
``TypeError`` deep inside a report. :func:`schema_problem` checks a record against the pydantic
model :class:`Record` and says in one line what is wrong; a record with a problem counts as
unusable, as an unreadable file does (the engine moves it aside and recomputes the run).

What is checked: every key the engine writes, with strict JSON types (a number is an int or a
float, never a string or a bool; counts are integers >= 0; an optimizer's ``stats`` are numbers,
or mappings of plain data, as ``sabo.state.Stats`` restores them); the curve has the columns ``nit``,
``nfev`` and ``f_best``, all of one length >= 1, the counts non-decreasing integers, no metric
column without a single value that is not NaN (``f_best`` is NaN in a run without an optimizer);
``final`` is the curve's last point; ``curve_time_unix_s``, where kept, has a finite time or None
per curve point; start and finish are ISO 8601 times with a time zone. Keys present only in records
of some versions are optional: ``provenance.numerics``, ``provenance.curve_time_unix_s`` (records
written before they were kept) and ``result.final_evaluation`` (studies whose problems have one).
Keys the schema does not know are allowed and not checked (a later version may add some), as are the
contents of ``config`` (compared with the run's own), ``final_evaluation`` and ``numerics``: JSON, by how
they were read.
What a study's report needs beyond this (the synthetic study's ``error`` column, ...) is its own business.
"""
from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from annotated_types import Ge
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

#: Version of the record layout (``record["schema"]``).
RECORD_SCHEMA = 1
#: Curve columns every record has (:class:`replication.curve.Curve`).
CURVE_COLUMNS = ("nit", "nfev", "f_best")


def _problem(message: str, **context) -> PydanticCustomError:
    return PydanticCustomError("record", message, context)


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _problem("must be a number (got {type})", type=type(value).__name__)
    return value


def _schema_version(value):
    if type(value) is not int or value != RECORD_SCHEMA:
        raise _problem("must be {schema}, the record layout this version reads (got {value})", schema=RECORD_SCHEMA,
                       value=repr(value))
    return value


def _statistic(value):
    """A counter or diagnostic (a number), or a group of them (a mapping of plain data: CMA-ES's ``stop``)."""
    if not isinstance(value, dict) and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise _problem("must be a number or a mapping (got {type})", type=type(value).__name__)
    return value


def _finite_time(value):
    if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                  and math.isfinite(value)):
        raise _problem("must be a finite time in seconds or null (got {value})", value=repr(value))
    return value


def _non_negative_seconds(value):
    if not (math.isfinite(_number(value)) and value >= 0):
        raise _problem("must be a finite number of seconds >= 0 (got {value})", value=repr(value))
    return value


def _iso_time(value):
    if not isinstance(value, str):
        raise _problem("must be an ISO 8601 time (got {type})", type=type(value).__name__)
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise _problem("must be an ISO 8601 time (got {value})", value=repr(value)) from None
    if when.tzinfo is None:
        raise _problem("must be an ISO 8601 time with a time zone (got {value})", value=repr(value))
    return value


Number = Annotated[Any, PlainValidator(_number)]
Count = Annotated[StrictInt, Ge(0)]
Time = Annotated[Any, PlainValidator(_iso_time)]


class _Part(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", populate_by_name=True)


class Result(_Part):
    status: Literal["completed", "diverged"]
    message: StrictStr
    seeds: dict[StrictStr, StrictInt]
    evals_per_iteration: Count
    final: dict[StrictStr, Number]
    curve: dict[StrictStr, list[Number]]
    stats: dict[StrictStr, Annotated[Any, PlainValidator(_statistic)]]
    final_evaluation: dict[StrictStr, Any] | None = None

    @model_validator(mode="after")
    def _curve_and_final(self):
        curve = self.curve
        missing = [k for k in CURVE_COLUMNS if k not in curve]
        if missing:
            raise _problem("curve: lacks the column(s) {missing}", missing=", ".join(missing))
        lengths = {len(values) for values in curve.values()}
        if len(lengths) != 1 or 0 in lengths:
            raise _problem("curve: columns must all have one length >= 1 (lengths {lengths})",
                           lengths=", ".join(f"{k} {len(v)}" for k, v in curve.items()))
        for key in ("nit", "nfev"):
            values = curve[key]
            if not all(isinstance(v, int) and v >= 0 for v in values) or values != sorted(values):
                raise _problem("curve: {key} must be non-decreasing integers >= 0", key=key)
        for key, values in curve.items():
            if key != "f_best" and all(isinstance(v, float) and math.isnan(v) for v in values):
                raise _problem("curve: column {key} holds no number (every value is NaN)", key=key)
        last = {k: v[-1] for k, v in curve.items()}
        if self.final.keys() != last.keys() or not all(_same(self.final[k], last[k]) for k in last):
            raise _problem("final must be the curve's last point")
        return self


class Provenance(_Part):
    versions: dict[StrictStr, StrictStr | None]
    numerics: dict[StrictStr, Any] | None = None
    git_revision: StrictStr | None
    host: StrictStr
    started_utc: Time
    finished_utc: Time
    wall_time_s: Annotated[Any, PlainValidator(_non_negative_seconds)]
    curve_time_unix_s: list[Annotated[Any, PlainValidator(_finite_time)]] | None = None
    resumed: Count
    cuda_visible_devices: StrictStr | None


class Record(_Part):
    schema_: Annotated[Any, PlainValidator(_schema_version)] = Field(alias="schema")
    config: dict[StrictStr, Any]
    config_hash: StrictStr
    group_hash: StrictStr
    result: Result
    provenance: Provenance

    @model_validator(mode="after")
    def _one_time_per_point(self):
        times, points = self.provenance.curve_time_unix_s, len(self.result.curve["nit"])
        if times is not None and len(times) != points:
            raise _problem("provenance.curve_time_unix_s: must hold one time per curve point ({points}; got "
                           "{times})", points=points, times=len(times))
        return self


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN (``final`` is a copy of the curve's last values)."""
    return type(a) is type(b) and (a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))


def schema_problem(record) -> str | None:
    """What is wrong with ``record`` as a run record (one line naming the key), or None if nothing is."""
    if not isinstance(record, dict):
        return f"not a JSON object but {type(record).__name__}"
    try:
        Record.model_validate(record)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        shown = [_where(e) + e["msg"] for e in errors[:3]]
        more = f" (and {len(errors) - 3} more problems)" if len(errors) > 3 else ""
        return "; ".join(shown) + more
    return None


def _where(error: dict) -> str:
    """``result.curve.error: `` for an error at that key (a problem of a whole part names its keys itself)."""
    loc = ".".join(str(part) for part in error["loc"])
    return f"{loc}: " if loc else ""
