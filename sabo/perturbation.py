"""The KL-constrained perturbation delta(theta) of Section 3.1.

For the linearised inner problem (eq. sec31_1)

    max_delta  <grad_mu J, delta_mu> + <grad_Sigma J, delta_Sigma>   s.t.  KL(p_{theta+delta} || p_theta) <= rho^2,

the stationarity conditions of the Lagrangian (eq. sec31_2) give, for a multiplier lambda > 0
(eq. sec31_4, used with the estimates g', G' in eq. sec32_5):

    delta_mu    = Sigma g' / lambda,
    delta_Sigma = 2 Sigma G' / (lambda Sigma^{-1} - 2 G'),
    i.e.  (Sigma + delta_Sigma)^{-1} = Sigma^{-1} (1 - 2 Sigma G' / lambda).

Two ways to choose lambda are provided:

* ``"closed_form"`` -- the paper's first-order solution (eq. sec31_5):
  lambda = (1/rho) sqrt(||Sigma G'||_F^2 + 0.5 ||Sigma^{1/2} g'||^2). KL(p_{theta+delta}||p_theta)
  then equals rho^2 only up to O(rho^3) (Appendix A, eq. A2_1); for rho >= 1/2 the precision
  ratio ``1 - 2 Sigma G'/lambda`` can reach zero (SABO's safeguard handles that).
* ``"exact"`` -- solves KL(p_{theta+delta(lambda)} || p_theta) = rho^2 for lambda by 1-D root
  finding. KL is strictly decreasing in lambda on the admissible range
  lambda > max(0, max_i 2 sigma_i^2 G'_i), so the root is unique and always yields a positive
  perturbed covariance; with it delta is the exact maximiser of the linearised problem.

Reading of rho (``rho_reading``). As printed, eq. (sec31_5) makes rho the radius of the KL ball:
the mean moves about rho standard deviations in Mahalanobis norm (exactly
rho ||Sigma^{1/2} g'|| / sqrt(||Sigma G'||_F^2 + 0.5 ||Sigma^{1/2} g'||^2) <= sqrt(2) rho), and
the paper's theorems assume rho < sqrt(d)/2. The paper's image and prompt grids
(rho in {100, ..., 5000}) lie far outside that range, so the suite offers two readings:

* ``"paper"``   -- radius = rho: eq. (sec31_5) as printed.
* ``"inverse"`` -- radius = 1/rho, i.e. lambda = rho sqrt(||Sigma G'||_F^2 + 0.5 ||Sigma^{1/2} g'||^2):
  the perturbation shrinks as rho grows, the reading under which large rho values are small
  perturbations. A deviation from the printed formula, offered to test whether it explains
  the paper's grids.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from .distribution import x_minus_log1p

PERTURBATIONS = ("closed_form", "exact")
RHO_READINGS = ("paper", "inverse")


def kl_radius(rho: float, reading: str) -> float:
    """The KL-ball radius that ``rho`` stands for under ``reading`` (see the module docstring)."""
    return rho if reading == "paper" else 1.0 / rho


def mahalanobis_norm(delta_mu: np.ndarray, sigma2: np.ndarray) -> float:
    """||Sigma^{-1/2} delta_mu||: how many standard deviations the perturbation moves the mean."""
    return float(np.sqrt(np.sum(delta_mu * delta_mu / sigma2)))


def closed_form_lambda(g: np.ndarray, G: np.ndarray, sigma2: np.ndarray, rho: float) -> float:
    """Eq. (sec31_5): lambda = (1/rho) * sqrt(||Sigma G||_F^2 + 0.5 * ||Sigma^{1/2} g||_2^2)."""
    return float(np.sqrt(np.sum((sigma2 * G) ** 2) + 0.5 * np.sum(sigma2 * g * g)) / rho)


def perturbation_from_lambda(g, G, sigma2, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (sec31_4)/(sec32_5) for a given lambda > 0.

    Returns ``(delta_mu, ratio)`` where ``ratio = 1 - 2 Sigma G / lambda`` is the factor by
    which the perturbation multiplies the precision: (Sigma + delta_Sigma)^{-1} = Sigma^{-1} * ratio,
    i.e. ``delta_Sigma = Sigma / ratio - Sigma = 2 Sigma G / (lambda Sigma^{-1} - 2 G)``.
    """
    return sigma2 * g / lam, 1.0 - 2.0 * sigma2 * G / lam


def perturbation_kl(g, G, sigma2, lam: float) -> float:
    """KL(p_{theta+delta(lambda)} || p_theta) for the perturbation of eq. (sec31_4); inf if lambda is inadmissible."""
    a = 2.0 * sigma2 * G / lam
    if np.any(a >= 1.0):
        return np.inf
    # perturbed/unperturbed variance ratio is 1/(1 - a), i.e. x = a / (1 - a)
    return float(0.5 * (np.sum(x_minus_log1p(a / (1.0 - a))) + np.sum(sigma2 * g * g) / lam**2))


def exact_lambda(g, G, sigma2, rho: float) -> float:
    """Lambda with KL(p_{theta+delta(lambda)} || p_theta) = rho^2 (0.0 when g = G = 0)."""
    target = rho * rho
    lam_cf = closed_form_lambda(g, G, sigma2, rho)
    if lam_cf == 0.0:
        return 0.0
    lam_min = max(0.0, float(np.max(2.0 * sigma2 * G)))

    def excess(lam):
        return perturbation_kl(g, G, sigma2, lam) - target

    lo = hi = max(lam_cf, 2.0 * lam_min)
    if excess(hi) > 0.0:
        while excess(hi) > 0.0:
            lo, hi = hi, 2.0 * hi
    else:
        while excess(lo) <= 0.0:
            hi, lo = lo, lam_min + 0.5 * (lo - lam_min)
            if lo == hi:  # KL cannot reach rho^2 above lam_min in float64: take the admissible limit
                return hi
    return float(brentq(excess, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500))


def kl_lambda(g, G, sigma2, rho: float, method: str) -> float:
    """The multiplier lambda for ``method`` in :data:`PERTURBATIONS`."""
    if method == "closed_form":
        return closed_form_lambda(g, G, sigma2, rho)
    return exact_lambda(g, G, sigma2, rho)
