"""The anytime curve of a run, recorded on a log-spaced grid.

Points are taken after iteration 0 (the initial mean) and after the iterations of a
log-spaced grid in [1, T]. Every method here spends a fixed number of evaluations per
iteration, so the grid is log-spaced in evaluations too; each point stores both, so curves
can be plotted against iterations or evaluations.
"""
from __future__ import annotations

import numpy as np


def log_grid(max_iter: int, points: int = 120) -> list[int]:
    """Sorted unique iterations, log-spaced in [1, max_iter], always including both ends."""
    if max_iter < 1:
        return []
    grid = np.unique(np.round(np.logspace(0.0, np.log10(max_iter), points)).astype(int))
    return [int(t) for t in grid]


class Curve:
    """Columns ``nit``, ``nfev``, ``f_best`` and one per metric, appended in grid order."""

    def __init__(self, max_iter: int, points: int = 120):
        self.grid = log_grid(max_iter, points)
        self.columns: dict[str, list] = {"nit": [], "nfev": [], "f_best": []}
        self._next = 0

    def due(self, nit: int) -> bool:
        """Is ``nit`` the initial point or the next grid iteration?"""
        if not self.columns["nit"]:
            return True
        return self._next < len(self.grid) and nit >= self.grid[self._next]

    def add(self, nit: int, nfev: int, f_best: float, metrics: dict[str, float]) -> None:
        self.columns["nit"].append(int(nit))
        self.columns["nfev"].append(int(nfev))
        self.columns["f_best"].append(float(f_best))
        for key, value in metrics.items():
            self.columns.setdefault(key, []).append(float(value))
        while self._next < len(self.grid) and self.grid[self._next] <= nit:
            self._next += 1

    def last(self) -> dict:
        return {k: v[-1] for k, v in self.columns.items() if v}

    def state(self) -> dict:
        """The curve so far as plain data (for checkpoints)."""
        return {"columns": {k: list(v) for k, v in self.columns.items()}, "next": self._next}

    @classmethod
    def from_state(cls, max_iter: int, state, points: int = 120) -> Curve:
        """Rebuild a curve from :meth:`state`; a malformed state raises ``ValueError`` saying what is wrong."""
        curve = cls(max_iter, points)
        if not isinstance(state, dict) or set(state) != {"columns", "next"}:
            raise ValueError("curve state must be a dict with keys 'columns' and 'next'")
        columns, nxt = state["columns"], state["next"]
        if not isinstance(columns, dict) or not {"nit", "nfev", "f_best"} <= set(columns):
            raise ValueError("curve state: columns must hold at least 'nit', 'nfev' and 'f_best'")
        lengths = set()
        for key, values in columns.items():
            if not isinstance(values, list) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                raise ValueError(f"curve state: column {key!r} must be a list of numbers")
            lengths.add(len(values))
        if len(lengths) != 1:
            raise ValueError("curve state: columns have different lengths")
        if isinstance(nxt, bool) or not isinstance(nxt, int) or not 0 <= nxt <= len(curve.grid):
            raise ValueError(f"curve state: next must be an integer in [0, {len(curve.grid)}] (got {nxt!r})")
        if columns["nit"] != [0, *curve.grid[:nxt]]:  # points are taken at iteration 0 and at each grid iteration
            raise ValueError(f"curve state: points at iterations {columns['nit']} are not those of the grid for "
                             f"{max_iter} iterations up to its point {nxt}")
        curve.columns = {k: list(v) for k, v in columns.items()}
        curve._next = nxt
        return curve
