"""SABO: Sharpness-Aware Black-box Optimization (Algorithms 1 and 2 of the paper).

One iteration t has two ask/tell rounds:

1. *Perturbation round* -- sample x'_j = mu_t + Sigma_t^{1/2} z'_j and estimate g'_t, G'_t
   (eqs. alg1_1, alg1_2); choose lambda (eq. sec31_5, or the exact KL root) and form
   delta_t (eq. sec32_5): mu_hat = mu_t + Sigma_t g'_t / lambda,
   Sigma_hat^{-1} = Sigma_t^{-1} (1 - 2 Sigma_t G'_t / lambda).
2. *Update round* -- sample x_j = mu_hat + Sigma_hat^{1/2} z_j, estimate g_t, G_t at the
   perturbed distribution (eqs. alg1_3, alg1_4) and update (eq. 32_update):
   mu_{t+1} = mu_t - beta_t Sigma_t g_t,  Sigma_{t+1}^{-1} = Sigma_t^{-1} + 2 beta_t G_t.

Algorithm 2 (mini-batch SABO) is the same optimizer driven by a caller that evaluates each
ask on one freshly drawn data batch (eqs. alg2_1-alg2_4; see ``sabo.protocol``). With
``baseline="center"`` each ask has N + 1 rows, the last one being the centre (mu_t in round
1, mu_hat in round 2), so that F(mu; B) is computed on the same batch as the samples.

Deviations from the paper, all named parameters:

* ``shaping``/``baseline`` default to INGO's reference z-score shaping with the sample-mean
  baseline; ``baseline="center", shaping="none"`` is the paper's literal estimator
  (see ``sabo.estimators`` for why the default differs).
* ``precision_floor``: the covariance safeguard of ``sabo.safeguard``; activations are
  counted in ``stats``.
* ``perturbation="exact"`` replaces the first-order lambda by the exact KL root.
* ``rho_reading="inverse"`` takes 1/rho as the KL radius (``sabo.perturbation``).

Settings outside the paper's theory are flagged with :class:`SettingsWarning` (once per
optimizer each): a KL radius >= sqrt(d)/2 (the theorems assume rho < sqrt(d)/2), and the
perturbation-round safeguard acting in more than :data:`SAFEGUARD_WARN_SHARE` of the first
:data:`SAFEGUARD_WARN_AFTER` or more iterations.
"""
from __future__ import annotations

import warnings

import numpy as np

from .distribution import kl_diag_gaussians
from .estimators import search_gradients
from .gaussian_search import GaussianSearch
from .perturbation import PERTURBATIONS, RHO_READINGS, kl_lambda, kl_radius, mahalanobis_norm, perturbation_from_lambda
from .safeguard import clamp_precision_ratio
from .schedules import as_schedule, schedule_mapping
from .state import Array, Integer
from .validation import check_choice

#: ``rho=None`` means rho = DEFAULT_RHO_SCALE * sqrt(d): the largest c of the sensitivity study
#: (docs/sabo/choosing-rho.md; ``benchmarks/rho_sensitivity.py``) at which, for d in 10..1000, the
#: safeguard never fired and SABO kept >= 90% of INGO's progress per iteration at beta = 0.1.
DEFAULT_RHO_SCALE = 0.05
#: ``lr`` by default: the step size that kept pace with the best of {0.03, 0.1, 0.2, 0.3, 0.5, 1} in the
#: most (function, d, budget) cells without diverging or leaning on the safeguard, at the default rho
#: (docs/sabo/choosing-lr.md; ``benchmarks/lr_sensitivity.py``). The rho rule above was set at 0.1; the
#: lr measurement ran with it.
DEFAULT_LR = 0.3

#: Share of iterations with a perturbation-round safeguard activation above which SABO warns
#: (checked from iteration :data:`SAFEGUARD_WARN_AFTER` on): in the sensitivity study every run
#: above 5% lost at least 10% of INGO's progress per iteration.
SAFEGUARD_WARN_SHARE = 0.05
SAFEGUARD_WARN_AFTER = 20


class SettingsWarning(UserWarning):
    """A SABO setting outside the paper's assumptions (see :class:`SABO`)."""


class SABO(GaussianSearch):
    """Sharpness-Aware Black-box Optimization with a diagonal Gaussian search distribution.

    Parameters
    ----------
    x0 : array_like, shape (d,)
        Initial mean mu_0.
    sigma0 : float or array_like
        Initial standard deviation; Sigma_0 = diag(sigma0**2) (so Sigma_0 = 0.5 I is
        ``sigma0=sqrt(0.5)``).
    popsize : int, optional
        N, samples per round (>= 2). Default: :func:`ingo_default_popsize`.
    lr : float or schedule
        Step size beta_t (> 0); a number is a constant schedule. Default 0.3 (:data:`DEFAULT_LR`):
        it kept pace with the best of six step sizes in 78 of 148 (function, d, budget) cells from
        d = 2 to 1000, against 23 for the earlier 0.1, and never diverged (docs/sabo/choosing-lr.md).
    rho : float, schedule or None
        Neighbourhood size rho_t (> 0) of the KL ball; ``InvSqrt(100, horizon=T)`` is the
        paper's synthetic setting. ``None`` (default): rho = 0.05 sqrt(d) (:data:`DEFAULT_RHO_SCALE`),
        whatever the reading. Under ``rho_reading="paper"`` this is the KL radius, and the
        perturbation moves the mean about 0.05 sqrt(d) standard deviations (at most sqrt(2) times
        that; ``sabo.perturbation``), where it costs little progress per iteration at any d
        (docs/sabo/choosing-rho.md, measured under this reading). Under ``"inverse"`` the radius is
        1/rho = 20/sqrt(d): the mean moves about 20/sqrt(d) standard deviations (6.3 at d = 10, 2 at
        d = 100, 0.63 at d = 1000), a size the study did not measure, and below d = 40 the radius is
        >= sqrt(d)/2 (a :class:`SettingsWarning`). For a radius c sqrt(d) under ``"inverse"``, pass
        rho = 1/(c sqrt(d)).
    rho_reading : {"paper", "inverse"}
        What rho means: the KL radius (``"paper"``, eq. sec31_5 as printed) or its inverse;
        see ``sabo.perturbation``.
    seed : int or None
        Seed of the optimizer's own random generator.
    baseline : {"mean", "center"}
    shaping : {"zscore", "none", "rank"}
        Utility construction; see ``sabo.estimators``.
    perturbation : {"closed_form", "exact"}
        How lambda is chosen; see ``sabo.perturbation``.
    precision_floor : float in (0, 1]
        Covariance safeguard floor on the per-coordinate precision ratio.
    nonfinite : {"raise", "worst"}
        Handling of NaN/inf objective values; see ``sabo.protocol``.
    """

    name = "sabo"
    revision = 2  # 2: the default lr is 0.3 (was 0.1): runs that rely on it (the BBOB study's) change
    rounds_per_iteration = 2  # perturbation round, then update round
    _STATE_FIELDS = (
        Integer("phase", maximum=1),
        Array("mu_hat", lambda o: (o._dim,)),
        Array("sigma2_hat", lambda o: (o._dim,), positive=True),
    ) + GaussianSearch._STATE_FIELDS

    def __init__(self, x0, sigma0=1.0, popsize=None, lr=DEFAULT_LR, rho=None, seed=None, *,
                 baseline="mean", shaping="zscore", perturbation="closed_form",
                 rho_reading="paper", precision_floor=0.05, nonfinite="raise"):
        super().__init__(x0, sigma0=sigma0, popsize=popsize, lr=lr, seed=seed, baseline=baseline,
                         shaping=shaping, precision_floor=precision_floor, nonfinite=nonfinite)
        self._rho = as_schedule("rho", DEFAULT_RHO_SCALE * np.sqrt(self._dim) if rho is None else rho)
        self._perturbation = check_choice("perturbation", perturbation, PERTURBATIONS)
        self._rho_reading = check_choice("rho_reading", rho_reading, RHO_READINGS)
        self._warned: set[str] = set()  # SettingsWarning categories already issued (not state)
        self._phase = 0  # 0: perturbation round at theta_t; 1: update round at theta_t + delta_t
        self._mu_hat = self._mu
        self._sigma2_hat = self._sigma2
        self._stats.update(safeguard_perturbation=0, safeguard_perturbation_coords=0,
                           lam=np.nan, rho=np.nan, kl_radius=np.nan, perturbation_kl=np.nan,
                           perturbation_mahalanobis=np.nan, perturbation_mahalanobis_sum=0.0)

    def _config(self) -> dict:
        return {**super()._config(), "rho": schedule_mapping(self._rho), "perturbation": self._perturbation,
                "rho_reading": self._rho_reading}

    # ------------------------------------------------------------------ views
    @property
    def phase(self) -> int:
        """0 before/within the perturbation round, 1 within the update round."""
        return self._phase

    @property
    def perturbed_mean(self) -> np.ndarray:
        """mu_t + delta_mu (equals mu_t in round 0)."""
        return self._mu_hat.copy()

    @property
    def perturbed_sigma2(self) -> np.ndarray:
        """Diagonal of Sigma_t + delta_Sigma (equals Sigma_t in round 0)."""
        return self._sigma2_hat.copy()

    # ------------------------------------------------------------------ protocol
    def _tell_population(self, X, values, j, f_spread) -> None:
        """As :meth:`AskTellOptimizer._tell_population`; after a perturbation round, checks the settings.

        The check runs after the state is committed, so a ``SettingsWarning`` turned into an error by a
        warnings filter cannot leave a half-told optimizer."""
        super()._tell_population(X, values, j, f_spread)
        if self._phase == 1:
            self._check_settings(self._stats["kl_radius"])

    def _ask(self) -> np.ndarray:
        if self._phase == 0:
            return self._sample(self._mu, self._sigma2)
        return self._sample(self._mu_hat, self._sigma2_hat)

    def _tell(self, values: np.ndarray) -> None:
        u = self._utilities(values)
        if self._phase == 0:
            self._tell_perturbation(u)
        else:
            self._tell_update(u)

    def _tell_perturbation(self, u: np.ndarray) -> None:
        t, sigma2 = self._nit, self._sigma2
        g_p, G_p = search_gradients(self._z, np.sqrt(sigma2), u)          # eqs. (alg1_1), (alg1_2)
        rho = self._rho(t)
        radius = kl_radius(rho, self._rho_reading)
        lam = kl_lambda(g_p, G_p, sigma2, radius, self._perturbation)     # eq. (sec31_5) or exact
        if lam > 0.0:
            delta_mu, ratio = perturbation_from_lambda(g_p, G_p, sigma2, lam)  # eq. (sec32_5)
        else:  # g' = G' = 0: no ascent direction, no perturbation
            delta_mu, ratio = np.zeros_like(sigma2), np.ones_like(sigma2)
        ratio, clamped = clamp_precision_ratio(ratio, self._floor)
        mu_hat, sigma2_hat = self._mu + delta_mu, sigma2 / ratio
        self._require_finite(perturbed_mean=mu_hat, perturbed_covariance=sigma2_hat)
        self._mu_hat, self._sigma2_hat, self._phase = mu_hat, sigma2_hat, 1
        moved = mahalanobis_norm(delta_mu, sigma2)
        self._stats["safeguard_perturbation"] += clamped > 0
        self._stats["safeguard_perturbation_coords"] += clamped
        self._stats["perturbation_mahalanobis_sum"] += moved
        self._stats.update(lam=lam, rho=rho, kl_radius=radius, perturbation_mahalanobis=moved,
                           perturbation_kl=kl_diag_gaussians(mu_hat, sigma2_hat, self._mu, sigma2))

    def _check_settings(self, radius: float) -> None:
        """Issue each :class:`SettingsWarning` once (see the module docstring)."""
        bound = 0.5 * np.sqrt(self._dim)
        if radius >= bound:
            self._warn_once("radius", f"SABO's KL radius {radius:.3g} is >= sqrt(d)/2 = {bound:.3g}, outside the "
                                      "paper's theorems (rho < sqrt(d)/2): the mean moves about that many standard "
                                      "deviations per perturbation; see docs/sabo/choosing-rho.md")
        done = self._nit + 1
        share = self._stats["safeguard_perturbation"] / done
        if done >= SAFEGUARD_WARN_AFTER and share > SAFEGUARD_WARN_SHARE:
            self._warn_once("safeguard", f"SABO's covariance safeguard acted in {share:.0%} of {done} perturbation "
                                         f"rounds (more than {SAFEGUARD_WARN_SHARE:.0%}): rho (KL radius "
                                         f"{radius:.3g}) is too large for this problem; see docs/sabo/choosing-rho.md")

    def _warn_once(self, category: str, message: str) -> None:
        if category not in self._warned:
            self._warned.add(category)
            warnings.warn(message, SettingsWarning, stacklevel=5)  # the caller of tell()

    def _tell_update(self, u: np.ndarray) -> None:
        g, G = search_gradients(self._z, np.sqrt(self._sigma2_hat), u)     # eqs. (alg1_3), (alg1_4)
        self._step(g, G)                                                   # eq. (32_update), at Sigma_t
        self._mu_hat, self._sigma2_hat, self._phase = self._mu, self._sigma2, 0
