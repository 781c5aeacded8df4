"""Step-size (beta_t) and neighbourhood-size (rho_t) schedules.

Schedules are small frozen dataclasses, called with the iteration index t = 0, 1, ...;
being plain data they appear verbatim in run records. In configuration files and in saved
optimizer states a schedule is written as a mapping, e.g.
``{"kind": "inv_sqrt", "scale": 100, "horizon": 3000}`` or ``{"kind": "constant", "value": 0.1}``;
:func:`as_schedule` accepts either form and :func:`schedule_mapping` writes the mapping.
"""
from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

import numpy as np

from .state import MAX_COUNT
from .validation import check_int, check_positive, shown


@dataclass(frozen=True)
class Constant:
    """value_t = value."""

    value: float

    def __call__(self, t: int) -> float:
        return self.value


@dataclass(frozen=True)
class InvSqrt:
    """value_t = scale / sqrt(T + 1).

    With ``horizon`` set, T is the run's total number of iterations and the value is constant
    over the run: this is the paper's rho = 100 / sqrt(T + 1) read as in Theorem 1, which
    asks for rho = O(1/sqrt(T)) with T the horizon. Without ``horizon``, T is the current
    iteration t, giving a decaying schedule scale / sqrt(t + 1). The paper does not say
    which reading its experiments use; both are available and recorded by name.
    """

    scale: float
    horizon: int | None = None

    def __call__(self, t: int) -> float:
        T = self.horizon if self.horizon is not None else t
        return self.scale / np.sqrt(T + 1.0)


KINDS = {"constant": Constant, "inv_sqrt": InvSqrt}


def as_schedule(name: str, value) -> Constant | InvSqrt:
    """Accept a positive number (constant schedule), a schedule instance or a mapping
    ``{"kind": <"constant" | "inv_sqrt">, **fields}``; validate it."""
    if isinstance(value, dict):
        spec = dict(value)
        kind = spec.pop("kind", None)
        if kind not in KINDS:
            raise ValueError(f"{name} schedule kind must be one of {sorted(KINDS)} (got {kind!r})")
        try:
            value = KINDS[kind](**spec)
        except TypeError as exc:
            raise ValueError(f"{name}: invalid fields for schedule {kind!r}: {sorted(spec)}") from exc
    if isinstance(value, Constant):
        check_positive(name, value.value)
        return value
    if isinstance(value, InvSqrt):
        check_positive(f"{name}.scale", value.scale)
        if value.horizon is not None:  # np.sqrt(horizon + 1.0) overflows beyond int64
            check_int(f"{name}.horizon", value.horizon, minimum=0, maximum=MAX_COUNT)
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return Constant(check_positive(name, value))
    raise ValueError(f"{name} must be a number > 0, a schedule (Constant, InvSqrt) or a schedule mapping "
                     f"(got {shown(value)})")


def schedule_mapping(schedule: Constant | InvSqrt) -> dict:
    """The mapping form ``{"kind": ..., **fields}`` of a schedule; ``as_schedule`` reads it back.

    NumPy scalars among the fields become Python numbers, so the mapping is plain data
    (see :mod:`sabo.serialization`).
    """
    kind = next((k for k, c in KINDS.items() if type(schedule) is c), None)
    if kind is None:
        raise ValueError(f"not a schedule: {schedule!r}")
    fields = {f.name: getattr(schedule, f.name) for f in dataclasses.fields(schedule)}
    return {"kind": kind, **{k: v.item() if isinstance(v, np.generic) else v for k, v in fields.items()}}
