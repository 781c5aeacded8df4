"""INGO: Implicit Natural Gradient Optimization (Lyu & Tsang, 2021), diagonal version.

Per iteration, with z_j ~ N(0, I) and x_j = mu + Sigma^{1/2} z_j (j = 1..N):

    u_j          = utilities of F(x_j)                 (``sabo.estimators.utilities``)
    g, G         = search gradients at (mu, Sigma)     (``sabo.estimators.search_gradients``)
    mu          <- mu - beta Sigma g
    Sigma^{-1}  <- Sigma^{-1} + 2 beta G

With the default ``shaping="zscore", baseline="mean"`` this is exactly the reference code
FastINGO.m: s = (f - mean f) / std f / N,  mu <- mu - beta Sigma^{1/2} sum_j s_j z_j,
Sigma^{-1} <- Sigma^{-1} (1 + beta sum_j s_j z_j^2) (the ``-1`` of ``z^2 - 1`` vanishes
because z-scored utilities sum to zero). It is SABO's update round without the
perturbation, so SABO with rho -> 0 and INGO agree on the same samples.

Deviations from the reference code: the covariance safeguard of ``sabo.safeguard`` (counted
in ``stats``; the reference code has none), and the choice of shaping/baseline, kept equal to
SABO's for like-for-like comparisons. The reference defaults (Sigma0 = 0.25 I,
beta = 1/sqrt(d)) are not ours: the paper sets beta and Sigma0 per study.
"""
from __future__ import annotations

import numpy as np

from sabo.estimators import search_gradients
from sabo.gaussian_search import GaussianSearch


class INGO(GaussianSearch):
    """Diagonal INGO under the suite's ask/tell protocol.

    Parameters are those of :class:`sabo.SABO` without ``rho``/``perturbation``:
    ``x0, sigma0=1.0, popsize=None, lr=0.1, seed=None, baseline="mean", shaping="zscore",
    precision_floor=0.05, nonfinite="raise"``. One iteration is one ask/tell round of
    N rows (N + 1 with ``baseline="center"``).
    """

    name = "ingo"

    def __init__(self, x0, sigma0=1.0, popsize=None, lr=0.1, seed=None, *,
                 baseline="mean", shaping="zscore", precision_floor=0.05, nonfinite="raise"):
        super().__init__(x0, sigma0=sigma0, popsize=popsize, lr=lr, seed=seed, baseline=baseline,
                         shaping=shaping, precision_floor=precision_floor, nonfinite=nonfinite)

    def _ask(self) -> np.ndarray:
        return self._sample(self._mu, self._sigma2)

    def _tell(self, values: np.ndarray) -> None:
        g, G = search_gradients(self._z, np.sqrt(self._sigma2), self._utilities(values))
        self._step(g, G)
