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
  included, are Nevergrad's business): mean 0 (the parametrization's initial value, or the point
  suggested before the first ask) and ``sigma0 = scale`` times Nevergrad's CMA-ES multiplier for a
  parametrization bounded on every side (0.3 below d = 18, 0.15 from there; 1 otherwise): with the
  bounds at +-1 standard deviation of the standardised space, a unit step would spread the samples
  over the whole box and beyond.
* Each :meth:`sabo.SABO.ask` population is handed out row by row, each candidate tagged with its
  population and row; when every row has been told, SABO is told the population (two such rounds
  make one SABO iteration). ``popsize``, unless configured, is the smallest multiple of
  ``num_workers`` at or above SABO's default for d, so that Nevergrad's batches (``minimize``
  asks ``num_workers`` candidates, then tells them) fill populations exactly.
* Asked while every row of the population is out and some are not told yet (``num_workers``
  candidates in flight, as Nevergrad's steady state or a configured ``popsize`` that is no
  multiple of them allows), SABO cannot draw its next population (it depends on the missing
  values): it hands out an *extra* candidate, drawn from the round's distribution with Nevergrad's
  random state, whose value is counted by Nevergrad but not used by SABO (counted in
  ``optimizer.extra_candidates``).
* Losses: ``+inf`` is Nevergrad's "worst" (a candidate violating a cheap constraint, which
  Nevergrad tells ``inf`` and asks again: ``register_cheap_constraint``; a multi-objective point
  outside the hypervolume's bound): it counts as the worst finite loss of its population, and a
  population without any finite loss carries no ranking (SABO is told a flat population and
  keeps its distribution). Other non-finite losses follow ``nonfinite``.
* Suggested points (``optimizer.suggest(x)``) are asked and told as Nevergrad does, but are not
  SABO's samples: their values are not used, and a point suggested before the first ask is SABO's
  initial mean. Telling any other point that was not asked is refused
  (``TellNotAskedNotSupportedError``): SABO's estimators need the values of its own samples.
* The recommendation is SABO's mean (its estimate of the minimiser), as in ``sabo.minimize``; where
  the mean violates a cheap constraint, Nevergrad's best evaluated candidate (which satisfied them).
* Randomness: SABO's generator is seeded with a number drawn from the parametrization's random
  state (Nevergrad's way to seed a run: ``parametrization.random_state``) when the first
  candidate is asked.
"""
from __future__ import annotations

import numpy as np
from nevergrad.common import errors
from nevergrad.optimization import base
from nevergrad.parametrization import helpers

import sabo

_ROW = "#SABO#row"  # candidate._meta key: (population number, row) of the candidate in SABO's population


def bounded_scale(parametrization) -> float:
    """Nevergrad's CMA-ES multiplier of its scale: 0.3 (d < 18) or 0.15 for a parametrization bounded on every
    side, 1 otherwise (``nevergrad.optimization.optimizerlib._CMA.es``)."""
    if helpers.Normalizer(parametrization).fully_bounded:
        return 0.3 if parametrization.dimension < 18 else 0.15
    return 1.0


class _SABO(base.Optimizer):
    """The Nevergrad optimizer that :class:`ParametrizedSABO` builds (use ``registry["SABO"]``)."""

    def __init__(self, parametrization, budget=None, num_workers=1, *, config: ParametrizedSABO | None = None):
        super().__init__(parametrization, budget=budget, num_workers=num_workers)
        self._config = ParametrizedSABO() if config is None else config
        default = sabo.ingo_default_popsize(self.dimension)
        self._popsize = (self.num_workers * -(-default // self.num_workers) if self._config.popsize is None
                         else self._config.popsize)
        # Nevergrad asks again for a candidate that violates a cheap constraint: tell SABO +inf (the worst) for it
        self._penalize_cheap_violations = True
        self._x0 = np.zeros(self.dimension)  # a point suggested before the first ask replaces it
        self._sabo: sabo.SABO | None = None  # built at the first ask, seeded from the parametrization
        self._population: np.ndarray | None = None
        self._number = 0  # populations told so far: tags candidates, so that a stale one is recognised
        self._values = np.empty(0)
        self._next_row = 0
        self._suggested: set[str] = set()
        self.extra_candidates = 0

    @property
    def sabo(self) -> sabo.SABO:
        """The :class:`sabo.SABO` instance driven (built on first use)."""
        if self._sabo is None:
            sigma0 = self._config.scale * bounded_scale(self.parametrization)
            self._sabo = sabo.SABO(self._x0, sigma0=sigma0, popsize=self._popsize,
                                   seed=int(self._rng.randint(2**31 - 1)), **self._config.settings)
        return self._sabo

    def suggest(self, *args, **kwargs) -> None:
        """Nevergrad's ``suggest``; the point is asked and told but is not one of SABO's samples, and before the
        first ask it becomes SABO's initial mean."""
        super().suggest(*args, **kwargs)
        candidate = self._suggestions[-1]
        self._suggested.add(candidate.uid)
        if self._sabo is None:
            self._x0 = candidate.get_standardized_data(reference=self.parametrization)

    def _internal_ask_candidate(self):
        if self._population is None:
            self._population = self.sabo.ask()
            self._values = np.full(self._population.shape[0], np.nan)
            self._next_row = 0
        if self._next_row == self._population.shape[0]:
            return self._extra_candidate()
        row = self._next_row
        self._next_row += 1
        candidate = self.parametrization.spawn_child().set_standardized_data(self._population[row])
        candidate._meta[_ROW] = (self._number, row)
        return candidate

    def _extra_candidate(self):
        """A sample of the round's distribution (N(mu, Sigma), or the perturbed one in SABO's update round), drawn
        from Nevergrad's random state; its value is not SABO's (module docstring)."""
        opt = self.sabo
        mean, sigma2 = (opt.mean, opt.sigma2) if opt.phase == 0 else (opt.perturbed_mean, opt.perturbed_sigma2)
        self.extra_candidates += 1
        return self.parametrization.spawn_child().set_standardized_data(
            mean + np.sqrt(sigma2) * self._rng.standard_normal(self.dimension))

    def _internal_tell_candidate(self, candidate, loss) -> None:
        tag = candidate._meta.get(_ROW)
        if tag is None or tag[0] != self._number:  # an extra, a suggestion, the constraint solver's own point
            return
        self._values[tag[1]] = loss
        if not np.isnan(self._values).any():
            self.sabo.tell(self._population, worst_for_inf(self._values))
            self._population = None
            self._number += 1

    def _internal_tell_not_asked(self, candidate, loss) -> None:
        if candidate.uid in self._suggested:  # Nevergrad tells a suggestion as not asked
            self._suggested.discard(candidate.uid)
            return
        raise errors.TellNotAskedNotSupportedError(
            "SABO takes the values of its own samples only (its estimators are expectations over them); suggest a "
            "point with optimizer.suggest(x) before asking to start SABO there")

    def _internal_provide_recommendation(self):
        if self._sabo is None:
            return None
        mean = self._sabo.mean
        point = self.parametrization.spawn_child().set_standardized_data(mean)
        # None: Nevergrad recommends its best evaluated candidate, which satisfied the constraints (asked ones must)
        return mean if point.satisfies_constraints(self.parametrization) else None


def worst_for_inf(values: np.ndarray) -> np.ndarray:
    """``values`` with ``+inf`` (Nevergrad's "worst") as the worst finite value, or all 0 when none is finite."""
    values = values.copy()
    worst = values == np.inf
    if worst.any():
        finite = values[np.isfinite(values)]
        values[worst] = finite.max() if finite.size else 0.0
    return values


class ParametrizedSABO(base.ConfiguredOptimizer):
    """SABO (Sharpness-Aware Black-box Optimization) configured for Nevergrad; see :class:`sabo.SABO`.

    Parameters
    ----------
    popsize : int or None
        Samples per population; None: the smallest multiple of num_workers at or above SABO's default
        for the dimension.
    scale : float
        Initial standard deviation in Nevergrad's standardised space (sigma0), times 0.3 (d < 18) or
        0.15 for a parametrization bounded on every side, as Nevergrad's CMA-ES.
    lr, rho, baseline, shaping, perturbation, rho_reading, precision_floor, nonfinite
        As for :class:`sabo.SABO` (same defaults; ``rho=None``: 0.05 sqrt(d)).
    """

    # keyword-only arguments, as in Nevergrad's configured optimizers (its repr lists those set)
    def __init__(self, *, popsize: int | None = None, scale: float = 1.0, lr=sabo.sabo.DEFAULT_LR, rho=None,
                 baseline: str = "mean",
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
