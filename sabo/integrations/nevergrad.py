"""SABO as a Nevergrad optimizer: ``import sabo.integrations.nevergrad`` registers ``"SABO"``.

    import nevergrad as ng
    import sabo.integrations.nevergrad  # registers ng.optimizers.registry["SABO"]

    optimizer = ng.optimizers.registry["SABO"](parametrization=10, budget=8000)
    optimizer.parametrization.random_state = np.random.RandomState(0)
    recommendation = optimizer.minimize(lambda x: float(np.sum((x - 0.5) ** 2)))  # F = 5.7e-7 (F(0) = 2.5)

Nevergrad's conventions (its ``ParametrizedCMA``/``_CMA`` pair): :class:`ParametrizedSABO` is a
``ConfiguredOptimizer`` (the configuration, e.g. ``ParametrizedSABO(lr=0.2)``), :data:`SABO` its
default instance registered under the name ``"SABO"``, and :class:`_SABO` the optimizer it builds
for a parametrization, budget and ``num_workers``.

How SABO meets Nevergrad's one-candidate ask/tell:

* SABO runs in Nevergrad's *standardised* space (where the parametrization's transforms, bounds
  included, are Nevergrad's business): mean 0 (the parametrization's initial value) and
  ``sigma0 = scale`` (default 1: the parametrization's own mutation scale), as Nevergrad's CMA-ES.
* Each :meth:`sabo.SABO.ask` population is handed out row by row, each candidate tagged with its
  row; when every row of the population has been told, SABO is told the values
  (two such rounds make one SABO iteration). ``popsize`` is max(num_workers, the configured
  popsize or SABO's default for d), so that ``num_workers`` pending asks never exceed a
  population; asking more candidates than a population has before telling them raises
  ``RuntimeError``.
* Telling a point that was not asked is refused (``TellNotAskedNotSupportedError``): SABO's
  estimators need the values of its own samples.
* The recommendation is SABO's mean (its estimate of the minimiser), as in ``sabo.minimize``.
* Randomness: SABO's generator is seeded with a number drawn from the parametrization's random
  state (Nevergrad's way to seed a run: ``parametrization.random_state``) when the first
  candidate is asked.
"""
from __future__ import annotations

import numpy as np
from nevergrad.common import errors
from nevergrad.optimization import base

import sabo

_ROW = "#SABO#row"  # candidate._meta key: the candidate's row in SABO's population


class _SABO(base.Optimizer):
    """The Nevergrad optimizer that :class:`ParametrizedSABO` builds (use ``registry["SABO"]``)."""

    def __init__(self, parametrization, budget=None, num_workers=1, *, config: ParametrizedSABO | None = None):
        super().__init__(parametrization, budget=budget, num_workers=num_workers)
        self._config = ParametrizedSABO() if config is None else config
        default = sabo.ingo_default_popsize(self.dimension)
        self._popsize = max(self.num_workers, default if self._config.popsize is None else self._config.popsize)
        self._sabo: sabo.SABO | None = None  # built at the first ask, seeded from the parametrization
        self._population: np.ndarray | None = None
        self._values = np.empty(0)
        self._next_row = 0

    @property
    def sabo(self) -> sabo.SABO:
        """The :class:`sabo.SABO` instance driven (built on first use)."""
        if self._sabo is None:
            self._sabo = sabo.SABO(np.zeros(self.dimension), sigma0=self._config.scale, popsize=self._popsize,
                                   seed=int(self._rng.randint(2**31 - 1)), **self._config.settings)
        return self._sabo

    def _internal_ask_candidate(self):
        if self._population is None:
            self._population = self.sabo.ask()
            self._values = np.full(self._population.shape[0], np.nan)
            self._next_row = 0
        if self._next_row == self._population.shape[0]:
            raise RuntimeError(f"SABO hands out one population of {self._population.shape[0]} candidates at a time; "
                               "tell their values before asking for more (num_workers must not exceed popsize)")
        row = self._next_row
        self._next_row += 1
        candidate = self.parametrization.spawn_child().set_standardized_data(self._population[row])
        candidate._meta[_ROW] = row
        return candidate

    def _internal_tell_candidate(self, candidate, loss) -> None:
        # Nevergrad calls this once per asked candidate (its uid leaves the asked set), so every
        # candidate told belongs to the current population
        self._values[candidate._meta[_ROW]] = loss
        if not np.isnan(self._values).any():
            self.sabo.tell(self._population, self._values)
            self._population = None

    def _internal_tell_not_asked(self, candidate, loss) -> None:
        raise errors.TellNotAskedNotSupportedError

    def _internal_provide_recommendation(self):
        return None if self._sabo is None else self._sabo.mean


class ParametrizedSABO(base.ConfiguredOptimizer):
    """SABO (Sharpness-Aware Black-box Optimization) configured for Nevergrad; see :class:`sabo.SABO`.

    Parameters
    ----------
    popsize : int or None
        Samples per population; None: max(num_workers, SABO's default for the dimension).
    scale : float
        Initial standard deviation in Nevergrad's standardised space (sigma0).
    lr, rho, baseline, shaping, perturbation, rho_reading, precision_floor, nonfinite
        As for :class:`sabo.SABO` (same defaults; ``rho=None``: 0.05 sqrt(d)).
    """

    # keyword-only arguments, as in Nevergrad's configured optimizers (its repr lists those set)
    def __init__(self, *, popsize: int | None = None, scale: float = 1.0, lr=0.1, rho=None, baseline: str = "mean",
                 shaping: str = "zscore", perturbation: str = "closed_form", rho_reading: str = "paper",
                 precision_floor: float = 0.05, nonfinite: str = "raise") -> None:
        super().__init__(_SABO, locals(), as_config=True)
        for name, value in self.config().items():  # public attributes, as Nevergrad's configured optimizers have
            setattr(self, name, value)
        # SABO validates its arguments; building one here reports a bad configuration at once
        sabo.SABO(np.zeros(2), sigma0=scale, popsize=popsize or 4, seed=0, **self.settings)

    @property
    def settings(self) -> dict:
        """The keyword arguments passed on to :class:`sabo.SABO` as they are (all but ``popsize`` and ``scale``)."""
        return {k: v for k, v in self.config().items() if k not in ("popsize", "scale")}


#: The default configuration, registered as ``ng.optimizers.registry["SABO"]``.
SABO = ParametrizedSABO().set_name("SABO", register=True)

__all__ = ["SABO", "ParametrizedSABO"]
