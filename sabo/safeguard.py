"""Covariance safeguard: keep every variance positive when a noisy estimate would not.

Both covariance changes of SABO multiply the precision of each coordinate by a ratio r:

* perturbation (eq. sec32_5):  (Sigma_t + delta_Sigma)^{-1} = Sigma_t^{-1} * (1 - 2 Sigma_t G'_t / lambda)
* update (eq. 32_update):      Sigma_{t+1}^{-1}            = Sigma_t^{-1} * (1 + 2 beta_t Sigma_t G_t)

The paper applies them as they are; with Monte Carlo estimates r can be <= 0, which leaves
no Gaussian at all (observed tens of times per 3000 iterations in the paper's synthetic
setting, see references.md). The safeguard replaces r by ``max(r, floor)`` coordinate-wise,
so that one step can inflate a variance by at most ``1/floor``. It is a deviation from the
paper that only acts when r < floor; every activation is counted in the optimizer's
``stats`` and reported with every run.
"""
from __future__ import annotations

import numpy as np


def clamp_precision_ratio(ratio: np.ndarray, floor: float) -> tuple[np.ndarray, int]:
    """Return ``(max(ratio, floor), number of clamped coordinates)``."""
    low = ratio < floor
    n = int(np.count_nonzero(low))
    if n == 0:
        return ratio, 0
    return np.where(low, floor, ratio), n
