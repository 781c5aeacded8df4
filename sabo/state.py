"""Declared, validated fields of an optimizer's saved state (see ``AskTellOptimizer.state_dict``).

A saved state may come from an untrusted file, so restoring it never trusts its contents:
every optimizer declares the fields of its evolving state (its configuration is restored
through its constructor, which validates it), and each field checks type, dtype, shape
(against the dimension d and the population size), finiteness and range of the value it
restores, raising ``ValueError`` that names the field. The helpers here also define what a
*state tree* is (the data :mod:`sabo.serialization` can store) and compare two of them.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np

from .validation import shown

ARRAY_KINDS = "biuf"
#: The largest count a saved state may hold (NumPy's int64): counters feed float and int64 arithmetic
#: (``np.sqrt(nit + 1.0)`` in a decaying schedule), which a larger Python int overflows.
MAX_COUNT = 2**63 - 1


def to_data(value, where: str = "state"):
    """Return ``value`` as a state tree: NumPy scalars become Python numbers, tuples lists,
    arrays are copied; anything that is not data raises ``ValueError`` naming ``where``."""
    if isinstance(value, np.generic) and value.dtype.kind in ARRAY_KINDS:
        return value.item()  # before the next test: np.float64 is a float subclass
    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, np.generic):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in ARRAY_KINDS:
            raise ValueError(f"{where}: an array of dtype {value.dtype} is not state data")
        return value.copy()
    if isinstance(value, (list, tuple)):
        return [to_data(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise ValueError(f"{where}: key {k!r} is not a str, so it cannot be saved as state data")
        return {k: to_data(v, f"{where}[{k!r}]") for k, v in value.items()}
    raise ValueError(f"{where}: {type(value).__name__} is not state data "
                     "(allowed: dict, list, str, int, float, bool, None, numeric numpy arrays)")


def check_tree(where: str, node) -> None:
    """Raise ``ValueError`` unless ``node`` is a state tree (no tuples, objects or NumPy scalars)."""
    if isinstance(node, np.generic):
        raise ValueError(f"{where}: NumPy scalar {node!r} is not state data (use a Python number)")
    if node is None or isinstance(node, (bool, int, float, str)):
        return
    if isinstance(node, np.ndarray):
        if node.dtype.kind not in ARRAY_KINDS:
            raise ValueError(f"{where}: arrays must have a bool, int or float dtype (got {node.dtype})")
        return
    if isinstance(node, list):
        for i, v in enumerate(node):
            check_tree(f"{where}[{i}]", v)
        return
    if isinstance(node, dict):
        for k, v in node.items():
            if not isinstance(k, str):
                raise ValueError(f"{where}: keys must be str (got {k!r})")
            check_tree(f"{where}[{k!r}]", v)
        return
    raise ValueError(f"{where}: {type(node).__name__} is not state data "
                     "(allowed: dict, list, str, int, float, bool, None, numeric numpy arrays)")


def tree_equal(a, b) -> bool:
    """Exact equality of two state trees (arrays: same dtype kind, shape and values, NaN equal to NaN)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        return a.dtype.kind == b.dtype.kind and a.shape == b.shape and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(tree_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(tree_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return type(a) is type(b) and a == b


def check_keys(where: str, mapping, expected) -> None:
    """``mapping`` must be a dict with exactly the keys ``expected``; names missing and unexpected ones."""
    if not isinstance(mapping, dict):
        raise ValueError(f"{where} must be a dict (got {type(mapping).__name__})")
    missing = sorted(set(expected) - set(mapping), key=str)
    unexpected = sorted(set(mapping) - set(expected), key=str)
    if missing or unexpected:
        parts = (([f"missing keys {missing}"] if missing else [])
                 + ([f"unexpected keys {unexpected}"] if unexpected else []))
        raise ValueError(f"{where}: {' and '.join(parts)}")


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class Field:
    """One entry of an optimizer's evolving state: attribute ``attr`` saved under ``key``."""

    def __init__(self, key: str, attr: str | None = None):
        self.key = key
        self.attr = attr or f"_{key}"

    def dump(self, value):
        return to_data(value, self.key)

    def load(self, value, opt, where: str):  # pragma: no cover - abstract
        raise NotImplementedError


class Integer(Field):
    """An integer in ``[minimum, maximum]``; ``maximum`` (default :data:`MAX_COUNT`) may depend on the
    optimizer (callable)."""

    def __init__(self, key, *, minimum: int = 0, maximum: int | Callable = MAX_COUNT, attr=None):
        super().__init__(key, attr)
        self.minimum, self.maximum = minimum, maximum

    def load(self, value, opt, where):
        high = self.maximum(opt) if callable(self.maximum) else self.maximum
        if not _is_int(value) or not self.minimum <= value <= high:
            raise ValueError(f"{where} must be an integer in [{self.minimum}, {high}] (got {shown(value)})")
        return int(value)


class Real(Field):
    """A real number: finite (default), or ``+inf`` too with ``allow_posinf``; ``> 0`` with ``positive``."""

    def __init__(self, key, *, positive: bool = False, allow_posinf: bool = False, attr=None):
        super().__init__(key, attr)
        self.positive, self.allow_posinf = positive, allow_posinf

    def load(self, value, opt, where):
        if not _is_real(value):
            raise ValueError(f"{where} must be a real number (got {type(value).__name__}: {shown(value)})")
        value = float(value)
        if not (np.isfinite(value) or (self.allow_posinf and value == np.inf)):
            allowed = "finite or +inf" if self.allow_posinf else "finite"
            raise ValueError(f"{where} must be {allowed} (got {shown(value)})")
        if self.positive and not value > 0:
            raise ValueError(f"{where} must be > 0 (got {shown(value)})")
        return value


class Array(Field):
    """A NumPy array of float64 (or integer, ``integer=True``) values with a checked shape.

    ``shape(opt)`` gives the expected shape; ``None`` entries accept any length. ``finite``
    is True (no NaN/inf), ``"no_nan"`` (infinities allowed) or False. ``optional`` accepts
    ``None``. ``encode``/``decode`` convert between the attribute and the saved array.
    """

    def __init__(self, key, shape: Callable, *, integer: bool = False, finite=True, positive: bool = False,
                 minimum: int | None = None, optional: bool = False, encode=None, decode=None, attr=None):
        super().__init__(key, attr)
        self.shape, self.integer, self.finite, self.positive = shape, integer, finite, positive
        self.minimum, self.optional, self.encode, self.decode = minimum, optional, encode, decode

    def dump(self, value):
        if self.encode is not None:
            value = self.encode(value)
        return super().dump(value)

    def load(self, value, opt, where):
        if value is None:
            if self.optional:
                return None
            raise ValueError(f"{where} must be an array (got None)")
        if not isinstance(value, np.ndarray):
            raise ValueError(f"{where} must be a numpy array (got {type(value).__name__})")
        if self.integer:
            if value.dtype.kind not in "iu":
                raise ValueError(f"{where} must have an integer dtype (got {value.dtype})")
        elif value.dtype != np.float64:
            raise ValueError(f"{where} must have dtype float64 (got {value.dtype})")
        expected = tuple(self.shape(opt))
        if value.ndim != len(expected) or any(e is not None and s != e for s, e in zip(value.shape, expected)):
            expected_shape = ("(" + ", ".join("any" if e is None else str(e) for e in expected)
                              + ("," if len(expected) == 1 else "") + ")")
            raise ValueError(f"{where} must have shape {expected_shape} for this optimizer (d = {opt.dim}); "
                             f"got {value.shape}")
        if not self.integer and self.finite:
            no_nan_only = self.finite == "no_nan"
            bad = np.isnan(value) if no_nan_only else ~np.isfinite(value)
            if bad.any():
                raise ValueError(f"{where} must be {'free of NaN' if no_nan_only else 'finite'}; "
                                 f"offending entries at {np.argwhere(bad)[:5].tolist()}")
        if self.positive and not np.all(value > 0):
            raise ValueError(f"{where} must be > 0 everywhere (min {shown(value.min())})")
        if self.minimum is not None and value.size and value.min() < self.minimum:
            raise ValueError(f"{where} must be >= {self.minimum} everywhere (min {shown(value.min())})")
        if self.integer:
            converted = value.astype(np.int64)
            if not np.array_equal(converted, value):
                raise ValueError(f"{where} has entries outside the int64 range")
            value = converted
        else:
            value = value.copy()
        return self.decode(value) if self.decode is not None else value


class Stats(Field):
    """``opt.stats``: the same keys as a fresh optimizer's, counters integers in [0, :data:`MAX_COUNT`],
    diagnostics real numbers (NaN allowed: "not yet computed"), nested dicts plain data."""

    def load(self, value, opt, where):
        template = opt._stats
        check_keys(where, value, template)
        out = {}
        for key, fresh in template.items():
            v, at = value[key], f"{where}[{key!r}]"
            if isinstance(fresh, dict):
                if not isinstance(value[key], dict):
                    raise ValueError(f"{at} must be a dict (got {type(v).__name__})")
                check_tree(at, v)
                out[key] = to_data(v, at)
            elif _is_int(fresh):
                if not _is_int(v) or not 0 <= v <= MAX_COUNT:
                    raise ValueError(f"{at} must be an integer in [0, {MAX_COUNT}] (got {shown(v)})")
                out[key] = int(v)
            else:
                if not _is_real(v):
                    raise ValueError(f"{at} must be a real number (got {type(v).__name__}: {shown(v)})")
                out[key] = v
        return out
