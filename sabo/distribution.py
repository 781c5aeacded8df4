"""The search distribution: a diagonal Gaussian N(mu, diag(sigma2)) kept in float64."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def x_minus_log1p(x: np.ndarray) -> np.ndarray:
    """``x - log(1 + x)`` elementwise (x > -1), by its Taylor series for |x| < 1e-3.

    The direct formula loses about eps/|x| of relative precision to cancellation; this is
    the per-coordinate variance term ``r - 1 - log r`` of a KL between Gaussians, r = 1 + x.
    """
    x = np.asarray(x, dtype=np.float64)
    small = np.abs(x) < 1e-3
    xs = np.where(small, x, 0.0)
    # sum_{k>=2} (-1)^k x^k / k, truncated after x^7 (relative error < 1e-18 for |x| < 1e-3)
    series = xs * xs * (0.5 + xs * (-1.0 / 3.0 + xs * (0.25 + xs * (-0.2 + xs * (1.0 / 6.0 - xs / 7.0)))))
    with np.errstate(invalid="ignore", divide="ignore"):
        direct = x - np.log1p(x)
    return np.where(small, series, direct)


def kl_diag_gaussians(mu1, sigma2_1, mu0, sigma2_0) -> float:
    """KL(N(mu1, diag(sigma2_1)) || N(mu0, diag(sigma2_0))).

    = 1/2 [ tr(S0^-1 S1) + (mu1-mu0)^T S0^-1 (mu1-mu0) + log(|S0|/|S1|) - d ],
    the expression of Appendix A ("Determine the optimal solution") for diagonal S0, S1.
    The variance terms use :func:`x_minus_log1p` of ``x = (sigma2_1 - sigma2_0) / sigma2_0``, so
    nearby distributions keep their KL to full relative precision.
    """
    mu1, s1, mu0, s0 = (np.asarray(a, dtype=np.float64) for a in (mu1, sigma2_1, mu0, sigma2_0))
    x = (s1 - s0) / s0  # s1 - s0 is exact (Sterbenz) whenever the ratio lies in [1/2, 2]
    var_term = x_minus_log1p(x)
    return float(0.5 * (np.sum(var_term) + np.sum((mu1 - mu0) ** 2 / s0)))


@dataclass
class DiagonalGaussian:
    """N(mean, diag(sigma2)); ``sample`` draws from a caller-supplied Generator only."""

    mean: np.ndarray
    sigma2: np.ndarray

    def __post_init__(self):
        self.mean = np.array(self.mean, dtype=np.float64)
        self.sigma2 = np.array(self.sigma2, dtype=np.float64)
        if self.mean.ndim != 1 or self.sigma2.shape != self.mean.shape:
            raise ValueError(f"mean and sigma2 must be 1-D of equal length "
                             f"(got {self.mean.shape}, {self.sigma2.shape})")
        if not np.all(self.sigma2 > 0):
            raise ValueError("sigma2 must be > 0 in every coordinate")

    @property
    def dim(self) -> int:
        return self.mean.size

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(z, x)`` with ``z ~ N(0, I)`` of shape (n, d) and ``x = mean + sqrt(sigma2) * z``."""
        z = rng.standard_normal((n, self.dim))
        return z, self.mean + np.sqrt(self.sigma2) * z

    def kl(self, other: DiagonalGaussian) -> float:
        """KL(self || other)."""
        return kl_diag_gaussians(self.mean, self.sigma2, other.mean, other.sigma2)
