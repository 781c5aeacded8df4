"""BES: Bernoulli smoothing random search (Gao & Sener, ICML 2022, "Generalizing Gaussian
Smoothing for Random Search").

BES replaces the Gaussian directions of Gaussian-smoothing random search by Rademacher
(Bernoulli +-1) directions. Per iteration, with N directions eps_i drawn uniformly from
{-1, +1}^d and the spacing c > 0,

    g       = sum_i (F(x + c eps_i) - F(x)) eps_i / (c N)
    x      <- x - beta_t g

i.e. a forward finite difference of F along each eps_i. Since E[eps eps^T] = I, g is an
unbiased estimate of the gradient of the Bernoulli-smoothed objective E[F(x + c eps)]; for a
linear F it is exactly mean_i (a . eps_i) eps_i. One iteration costs N + 1 evaluations: the N
points x + c eps_i and the centre x.

Deviations: none in the algorithm. Protocol details: the centre x is the *last* row of each
ask; the paper's "spacing c" is the finite-difference radius (``spacing``), not a sampling
standard deviation, so ``sigma0`` (taken by every optimizer of the suite) is validated and
otherwise ignored.
"""
from __future__ import annotations

import numpy as np

from sabo.gaussian_search import ingo_default_popsize
from sabo.protocol import AskTellOptimizer
from sabo.schedules import as_schedule, schedule_mapping
from sabo.state import Array
from sabo.validation import check_positive, check_x0


class BES(AskTellOptimizer):
    """Bernoulli-smoothing random search under the suite's ask/tell protocol.

    Parameters
    ----------
    x0 : array_like, shape (d,)
        Initial point.
    sigma0 : float or array_like, shape (d,)
        Accepted for a uniform constructor across the suite and validated like everywhere
        else, but **ignored**: BES keeps no covariance; its only scale is ``spacing``.
    popsize : int or None
        Number N of Rademacher directions (>= 2); ``None`` uses
        :func:`sabo.gaussian_search.ingo_default_popsize` (the even number at or above
        4 + floor(3 ln d)). Each ask has N + 1 rows.
    lr : float or schedule
        Step size beta_t (a number > 0, or a :mod:`sabo.schedules` schedule called with
        t = ``nit``).
    spacing : float
        Finite-difference radius c > 0.
    seed, nonfinite
        See :class:`sabo.protocol.AskTellOptimizer`.
    """

    name = "bes"
    _STATE_FIELDS = (
        Array("x", lambda o: (o._dim,)),
        Array("eps", lambda o: (o._popsize, o._dim), optional=True),  # directions of the last ask
    ) + AskTellOptimizer._STATE_FIELDS

    @classmethod
    def default_popsize(cls, dim: int) -> int:
        """INGO's default (:func:`sabo.ingo_default_popsize`): BES's reference states none."""
        return ingo_default_popsize(dim)

    def __init__(self, x0, sigma0=1.0, popsize=None, lr=0.1, spacing=1.0, seed=None, *, nonfinite="raise"):
        x0 = check_x0(x0)
        super().__init__(x0, sigma0=sigma0, popsize=self.default_popsize(x0.size) if popsize is None else popsize,
                         seed=seed, nonfinite=nonfinite)
        self._lr = as_schedule("lr", lr)
        self._spacing = check_positive("spacing", spacing)
        self._x = self._x0.copy()
        self._eps: np.ndarray | None = None
        self._stats["lr"] = np.nan

    def _config(self) -> dict:
        return {**super()._config(), "lr": schedule_mapping(self._lr), "spacing": self._spacing}

    @classmethod
    def rows_per_ask(cls, popsize: int, params) -> int:
        """N + 1: the N perturbed points and the centre (also ``evals_per_iteration``)."""
        return int(popsize) + 1

    def _ask_rows(self) -> int:
        # its rule reads no constructor argument: skip the base class's _config() (called every iteration
        # under an evaluation budget, it was a tenth of a BES iteration at d = 10)
        return self.rows_per_ask(self._popsize, {})

    def _finish_restore(self) -> None:
        if self._pending is not None and self._eps is None:
            raise ValueError("state['state']['eps'] is None while an ask is pending: the update needs its directions")
        if self._eps is not None and not np.all(np.abs(self._eps) == 1.0):
            raise ValueError("state['state']['eps'] must contain only -1 and +1 (Rademacher directions)")

    @property
    def mean(self) -> np.ndarray:
        """The current iterate x_t."""
        return self._x.copy()

    def _ask(self) -> np.ndarray:
        """Draw eps ~ U{-1, +1}^{N x d} (kept for the update); return x + c eps with x appended last."""
        self._eps = 2.0 * self._rng.integers(0, 2, size=(self._popsize, self._dim)) - 1.0
        return np.vstack([self._x + self._spacing * self._eps, self._x])

    def _tell(self, values: np.ndarray) -> None:
        n, c = self._popsize, self._spacing
        g = (values[:n] - values[n]) @ self._eps / (c * n)
        beta = self._lr(self._nit)
        x_new = self._x - beta * g
        self._require_finite(mean=x_new)
        self._x = x_new
        self._nit += 1
        self._stats["lr"] = beta
