"""Shared machinery of the diagonal-Gaussian search-gradient methods (SABO and INGO).

Both sample ``x_j = mu + sigma * z_j`` (plus the centre point when the F(mu) baseline is
used), turn values into utilities (``sabo.estimators``) and take the KL-regularised step
of eq. (32_update) -- INGO at theta_t, SABO with gradients taken at theta_t + delta_t.
"""
from __future__ import annotations

import inspect

import numpy as np

from .estimators import BASELINES, SHAPINGS, shaped_utilities
from .protocol import AskTellOptimizer
from .safeguard import clamp_precision_ratio
from .schedules import as_schedule, schedule_mapping
from .state import Array
from .validation import check_choice, check_in_interval, check_x0


def ingo_default_popsize(dim: int) -> int:
    """INGO's reference default: the even number at or above 4 + floor(3 ln d).

    Not pycma's rule (:func:`baselines.cmaes.pycma_default_popsize`, the same without rounding
    up to even): the names say whose default each is."""
    n = 4 + int(np.floor(3 * np.log(dim)))
    return n + (n % 2)


class GaussianSearch(AskTellOptimizer):
    """Base of :class:`sabo.SABO` and :class:`baselines.INGO`; see their docstrings for parameters."""

    def __init__(self, x0, *, sigma0, popsize, lr, seed, baseline, shaping, precision_floor, nonfinite):
        x0 = check_x0(x0)
        super().__init__(x0, sigma0=sigma0, popsize=self.default_popsize(x0.size) if popsize is None else popsize,
                         seed=seed, nonfinite=nonfinite)
        self._lr = as_schedule("lr", lr)
        self._baseline = check_choice("baseline", baseline, BASELINES)
        self._shaping = check_choice("shaping", shaping, SHAPINGS)
        self._floor = check_in_interval("precision_floor", precision_floor, 0.0, 1.0, closed="right")
        self._mu = self._x0.copy()
        self._sigma2 = self._sigma0**2
        self._z: np.ndarray | None = None
        self._stats.update(safeguard_update=0, safeguard_update_coords=0, flat_populations=0,
                           zscore_rank_fallback=0, lr=np.nan)

    @classmethod
    def default_popsize(cls, dim: int) -> int:
        """INGO's reference default, :func:`ingo_default_popsize`."""
        return ingo_default_popsize(dim)

    _STATE_FIELDS = (
        Array("mu", lambda o: (o._dim,)),
        Array("sigma2", lambda o: (o._dim,), positive=True),
        Array("z", lambda o: (o._popsize, o._dim), optional=True),  # draws of the last ask
    ) + AskTellOptimizer._STATE_FIELDS

    def _config(self) -> dict:
        return {**super()._config(), "lr": schedule_mapping(self._lr), "baseline": self._baseline,
                "shaping": self._shaping, "precision_floor": self._floor}

    @classmethod
    def rows_per_ask(cls, popsize: int, params) -> int:
        """N, plus the centre point with ``baseline="center"`` (the signature's default where ``params`` omits it)."""
        baseline = params["baseline"] if "baseline" in params else \
            inspect.signature(cls).parameters["baseline"].default
        return int(popsize) + (baseline == "center")

    def _ask_rows(self) -> int:
        return self.rows_per_ask(self._popsize, {"baseline": self._baseline})

    def _finish_restore(self) -> None:
        if self._pending is not None and self._z is None:
            raise ValueError("state['state']['z'] is None while an ask is pending: the update needs its draws")

    @property
    def mean(self) -> np.ndarray:
        """mu_t."""
        return self._mu.copy()

    @property
    def sigma2(self) -> np.ndarray:
        """Diagonal of Sigma_t."""
        return self._sigma2.copy()

    @property
    def stds(self) -> np.ndarray:
        """sqrt(diag Sigma_t), the per-coordinate standard deviations (``result.stds``)."""
        return np.sqrt(self._sigma2)

    def _sample(self, mu: np.ndarray, sigma2: np.ndarray) -> np.ndarray:
        """Draw z ~ N(0, I) (kept for the estimator) and return the population; centre last."""
        self._z = self._rng.standard_normal((self._popsize, self._dim))
        X = mu + np.sqrt(sigma2) * self._z
        return np.vstack([X, mu]) if self._baseline == "center" else X

    def _utilities(self, values: np.ndarray) -> np.ndarray:
        n = self._popsize
        centre = values[n] if self._baseline == "center" else None
        u, fell_back = shaped_utilities(values[:n], centre, baseline=self._baseline, shaping=self._shaping)
        self._stats["zscore_rank_fallback"] += fell_back
        if not np.any(u):
            self._stats["flat_populations"] += 1
        return u

    def _step(self, g: np.ndarray, G: np.ndarray) -> None:
        """Eq. (32_update): mu <- mu - beta Sigma g,  Sigma^{-1} <- Sigma^{-1} + 2 beta G (safeguarded)."""
        beta, sigma2 = self._lr(self._nit), self._sigma2
        mu_new = self._mu - beta * sigma2 * g
        ratio, clamped = clamp_precision_ratio(1.0 + 2.0 * beta * sigma2 * G, self._floor)
        sigma2_new = sigma2 / ratio
        self._require_finite(mean=mu_new, covariance=sigma2_new)
        self._mu, self._sigma2 = mu_new, sigma2_new
        self._nit += 1
        self._stats["safeguard_update"] += clamped > 0
        self._stats["safeguard_update_coords"] += clamped
        self._stats["lr"] = beta
