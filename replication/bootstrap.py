"""Bootstrap intervals of the claims' statistics, reproducible from the records alone.

A claim's statistic (a count of cases, a share, a median ratio, a mean difference) is recomputed on
:data:`RESAMPLES` resamples of the runs it rests on; its interval is the two-sided percentile
interval at level :data:`LEVEL` of those values (lower end: the largest resampled value with at most
(1 - LEVEL)/2 of them below it; upper end likewise from above: no interpolation, so a count stays a
count), widened where needed to contain the statistic measured on the runs themselves (a skewed
resampling distribution can leave it outside; the verdict must not contradict the measurement).

Units are drawn with replacement by :func:`draws`: row r of ``draws(key, n)`` holds the n indices of
resample r. The generator is seeded by :data:`SEED` and a stable hash of ``key`` (not Python's
``hash``, which changes between processes), so the same units under the same key are drawn the same
way in every claim, every process and every machine: a report re-rendered from its run table gives
the same intervals byte for byte. Units drawn under one key are paired: e.g. the seeds of one case,
shared by every method run on it.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

RESAMPLES = 2000
"""Resamples per statistic: the 2.5% and 97.5% percentiles rest on 50 resamples each."""
LEVEL = 0.95
SEED = 0
"""Seeds the bootstrap generator, with each key's hash."""


@lru_cache(maxsize=4096)
def draws(key: str, n: int) -> np.ndarray:
    """A read-only ``(RESAMPLES, n)`` array of indices into ``n`` units, drawn with replacement, the
    same for the same ``key`` and ``n``."""
    if n < 1:
        raise ValueError(f"draws({key!r}, n={n}): n must be at least 1")
    rng = np.random.default_rng([SEED, zlib.crc32(key.encode())])
    out = rng.integers(0, n, size=(RESAMPLES, n))
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class Interval:
    """A statistic measured on the runs (``value``) and its bootstrap interval [``low``, ``high``]."""

    value: float
    low: float
    high: float

    def text(self, fmt=lambda x: f"{x:.2f}") -> str:
        """'1.08 (95% interval 1.00 to 1.22)', each number written by ``fmt``."""
        return f"{fmt(self.value)} ({LEVEL:.0%} interval {fmt(self.low)} to {fmt(self.high)})"


def interval(value: float, resampled) -> Interval:
    """The percentile interval of the ``resampled`` values of a statistic whose value on the runs is
    ``value`` (see the module's docstring). NaN resamples (the statistic undefined there, e.g. no
    case left that qualifies) are left out; when all are, the interval is the value alone."""
    x = np.asarray(resampled, dtype=float).ravel()
    x = x[~np.isnan(x)]
    if x.size == 0:
        return Interval(float(value), float(value), float(value))
    tail = (1 - LEVEL) / 2
    low = float(np.quantile(x, tail, method="lower"))
    high = float(np.quantile(x, 1 - tail, method="higher"))
    return Interval(float(value), min(low, value), max(high, value))


def every_one(held_on_runs: int, held) -> tuple[Interval, float]:
    """For a claim that every one of n cases holds: the number that hold on the runs with its interval from
    ``held`` ((case, resample) booleans), and the share of resamples in which all n hold together."""
    held = np.asarray(held, dtype=bool).reshape(len(held), RESAMPLES)
    return interval(held_on_runs, held.sum(axis=0)), float(np.mean(held.all(axis=0)))


def whole(x: float) -> str:
    """A count as a whole number."""
    return f"{x:.0f}"


def method_note(units: str) -> str:
    """The reports' paragraph on how verdicts are reached; ``units``: what this study resamples."""
    return (f"Each verdict rests on a {LEVEL:.0%} bootstrap interval of the claim's statistic (shown in the "
            f"\"measured\" column; {RESAMPLES:,} resamples, percentile interval, widened to contain the measured "
            "value; the resampling generator is seeded, so the same records give the same intervals): "
            "**reproduced** when the interval lies on the claim's side of its threshold, **not reproduced** when "
            f"it lies on the other side, **inconclusive** when it reaches both. Resampled: {units}")
