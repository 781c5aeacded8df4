"""Parameter checks shared by every optimizer in the suite.

Each check raises ``ValueError`` naming the parameter, the allowed range and the value
received, in the style of scikit-learn's parameter validation.
"""
from __future__ import annotations

import difflib
import math
import numbers

import numpy as np

#: Arrays up to this many entries are shown in full in messages; larger ones by their shape.
SHOWN_ARRAY_ENTRIES = 10


def shown(value) -> str:
    """``repr(value)`` for a message, with NumPy scalars and small arrays as the Python numbers and lists they hold.

    NumPy 2 writes ``repr(np.float64(0.0))`` as ``np.float64(0.0)``; a user who passed a NumPy
    scalar wants to read ``0.0``. An integer beyond 2**100 (one read from a hostile file) is shown by
    its number of digits: its repr could fill a screen, or exceed Python's limit on int-to-str conversion."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > 100:
        return f"an integer of about {math.ceil(abs(value).bit_length() * math.log10(2))} digits"
    if isinstance(value, np.generic):
        return repr(value.item())
    if isinstance(value, np.ndarray):
        if value.size > SHOWN_ARRAY_ENTRIES:
            return f"an array of shape {value.shape}"
        return repr(value.tolist())
    return repr(value)


def did_you_mean(word: str, choices, *, suffix: str = "") -> str:
    """``" (did you mean 'x'?)"`` for the ``choices`` closest to ``word`` ignoring case, or ``""`` if none is close.

    Close means difflib's similarity ratio >= 0.6 between the lower-cased strings (``difflib.get_close_matches``,
    at most 3, best first); lower-casing first makes a wrong case (``"SABO"`` for ``"sabo"``) an exact match.
    ``suffix`` is appended to each suggestion shown."""
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    matches = [by_lower[m] for m in difflib.get_close_matches(word.lower(), list(by_lower), n=3)]
    return f" (did you mean {' or '.join(repr(m + suffix) for m in matches)}?)" if matches else ""


def check_positive(name: str, value, *, allow_zero: bool = False) -> float:
    """Return ``value`` as float after checking it is a finite number > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number (got {shown(value)})")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound} (got {shown(value)})")
    return float(value)


def check_in_interval(name: str, value, low: float, high: float, *, closed: str = "neither") -> float:
    """Check ``low < value < high``; ``closed`` in {"neither", "left", "right", "both"}."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number (got {shown(value)})")
    left_ok = value >= low if closed in ("left", "both") else value > low
    right_ok = value <= high if closed in ("right", "both") else value < high
    if not (left_ok and right_ok):
        lb = "[" if closed in ("left", "both") else "("
        rb = "]" if closed in ("right", "both") else ")"
        raise ValueError(f"{name} must lie in {lb}{low}, {high}{rb} (got {shown(value)})")
    return float(value)


def check_int(name: str, value, *, minimum: int, maximum: int | None = None) -> int:
    """Check ``value`` is an integer (not bool) with ``minimum <= value`` (``<= maximum`` if given)."""
    allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer {allowed} (got {shown(value)})")
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer {allowed} (got {shown(value)})")
    return int(value)


def check_choice(name: str, value, choices) -> str:
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {allowed} (got {shown(value)})")
    return value


_DTYPE_WORDS = {"c": "complex numbers (the imaginary part would be dropped)", "b": "booleans",
                "U": "strings", "S": "bytes", "M": "datetimes", "m": "timedeltas", "V": "structured values"}


def as_real_array(name: str, value) -> np.ndarray:
    """Return ``value`` as a fresh float64 array, refusing anything but real numbers.

    NumPy's own ``float64`` conversion would drop imaginary parts (with a mere warning), turn
    booleans into 0/1 and parse strings such as ``"1.5"``; each of those hides a caller's
    mistake, so complex, boolean, string and other non-numeric input raises ``ValueError``
    naming ``name``. Object arrays are accepted when every element is a real number (e.g.
    ``fractions.Fraction``; ``None`` reads as NaN, as in NumPy), as they convert exactly as
    their elements do.
    """
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged nesting
        raise ValueError(f"{name} must be an array of real numbers (got {value!r})") from exc
    kind = raw.dtype.kind
    if kind == "O":
        for item in raw.flat:
            if item is None:  # NumPy reads it as NaN, which the finiteness checks then report
                continue
            if isinstance(item, (bool, np.bool_)) or not isinstance(item, numbers.Real):
                raise ValueError(f"{name} must contain real numbers only (got an element {shown(item)} "
                                 f"of type {type(item).__name__})")
    elif kind not in "iuf":
        what = _DTYPE_WORDS.get(kind, f"dtype {raw.dtype}")
        raise ValueError(f"{name} must contain real numbers, not {what} (got dtype {raw.dtype})")
    try:
        return np.array(raw, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name} must be an array of real numbers (got {value!r})") from exc


def check_x0(x0) -> np.ndarray:
    """Return ``x0`` as a fresh float64 1-D array; reject empty, non-1-D, non-real or non-finite input."""
    arr = as_real_array("x0", x0)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"x0 must be a non-empty 1-D array (got shape {arr.shape})")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(f"x0 must be finite; entries at indices {bad[:10].tolist()} are {arr[bad[:10]].tolist()}")
    return arr


def check_sigma0(sigma0, dim: int) -> np.ndarray:
    """Initial standard deviation: a scalar or a length-``dim`` array, every entry finite and > 0.

    Returns the per-coordinate *standard deviations* as float64 (the covariance is
    ``diag(sigma0**2)``, as in pycma).
    """
    arr = as_real_array("sigma0", sigma0)
    if arr.ndim == 0:
        arr = np.full(dim, float(arr))
    if arr.shape != (dim,):
        raise ValueError(f"sigma0 must be a scalar or an array of shape ({dim},) (got shape {arr.shape})")
    bad = np.flatnonzero(~(np.isfinite(arr) & (arr > 0)))
    if bad.size:
        raise ValueError(f"sigma0 must be finite and > 0 in every coordinate; entries at indices {bad[:10].tolist()} "
                         f"are {arr[bad[:10]].tolist()}")
    return arr


def check_seed(seed) -> int:
    """A seed is a non-negative integer; ``None`` draws fresh OS entropy, which is then recorded."""
    if seed is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None (got {shown(seed)})")
    return int(seed)
