"""Monte Carlo search gradients of J(theta) = E_{N(mu, Sigma)}[F(x)] for a diagonal Sigma.

The paper's estimators (eqs. alg1_1-alg1_4, and alg2_1-alg2_4 for mini-batches) are one
formula evaluated at two distributions. With ``x_j = mu + Sigma^{1/2} z_j`` and a utility
``u_j`` per sample,

    g = 1/N sum_j Sigma^{-1} (x_j - mu) u_j                       = 1/N sum_j u_j z_j / sigma
    G = 1/(2N) sum_j Sigma^{-1} [diag((x_j-mu)(x_j-mu)^T Sigma^{-1}) - 1] u_j
                                                                 = 1/(2N) sum_j u_j (z_j^2 - 1) / sigma^2

where G is the diagonal of the estimate of the gradient with respect to Sigma. The paper uses
``u_j = F(x_j) - F(mu)`` (eqs. alg1_1/alg1_2 at theta_t, alg1_3/alg1_4 at the perturbed
theta_t + delta_t). Its mini-batch versions (alg2_1-alg2_4) average
``F(x_j; (X_i, y_i)) - F(mu; (X_i, y_i))`` over the M examples of one batch, which equals
``F(x_j; B) - F(mu; B)`` with F(.; B) the batch mean: the same formula, applied to values
that the caller computed on one batch for the whole population (see ``sabo.protocol``).

Utilities are built from the raw values in two named steps (see :func:`utilities`):

* ``baseline``: what is subtracted. ``"center"`` = the value at the distribution's mean,
  F(mu), evaluated as one extra point of the same population (the paper's choice; costs one
  evaluation per population); ``"mean"`` = the sample mean of the population's values.
* ``shaping``: ``"none"`` = raw values (the paper); ``"zscore"`` = divide by the sample
  standard deviation (ddof=1), as INGO's reference code (FastINGO.m) does; ``"rank"`` =
  replace values by their ranks within the population, then standardise.

With ``baseline="center", shaping="none"`` g and G are unbiased (Lemma 'estimator_1' of the
paper, checked in tests/test_estimators.py). Z-score shaping is not: it divides by a random
scale, so E[g] is a rescaled, not the true, gradient (also shown in the tests). Z-score
shaping with the ``"mean"`` baseline is what reproduces the paper's synthetic figures: with
raw values the paper's setting (beta = 0.1, Sigma0 = I) diverges (see
``../shared/notes/references.md``); it is therefore the library default.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

BASELINES = ("center", "mean")
SHAPINGS = ("none", "zscore", "rank")


def utilities(values: np.ndarray, centre_value: float | None, *, baseline: str, shaping: str) -> np.ndarray:
    """Return ``u_j = (h(f_j) - h(b)) / s`` for the population values ``f``.

    h is the identity (``"none"``, ``"zscore"``) or the within-population rank (``"rank"``,
    0-based, ties averaged; the centre value gets its fractional rank among the population);
    b is ``centre_value`` (``baseline="center"``) or the population mean of h(f)
    (``baseline="mean"``); s is 1 for ``"none"`` and the sample standard deviation (ddof=1)
    of h(f) otherwise. A population of identical values has s = 0 and gets u = 0.

    Z-scores are computed without overflow at any magnitude: see :func:`shaped_utilities`,
    which also reports when they cannot be formed at all and rank shaping is used instead.
    """
    return shaped_utilities(values, centre_value, baseline=baseline, shaping=shaping)[0]


def shaped_utilities(values: np.ndarray, centre_value: float | None, *, baseline: str,
                     shaping: str) -> tuple[np.ndarray, bool]:
    """:func:`utilities`, plus whether z-score shaping had to fall back to rank shaping.

    The sample variance squares the deviations, which overflows once they exceed about
    1e154 (all utilities would then be ``u / inf = 0`` and the optimizer would freeze) and
    loses precision in subnormals below about 1e-154. Since z-scores are scale invariant,
    ``"zscore"`` first multiplies values (and the centre value) by 2^-k, with 2^k the binary
    order of magnitude of max |f|: a power-of-two scaling is exact, so the result equals the
    unscaled formula bit for bit wherever that formula does not overflow, and is the exact
    z-score up to rounding everywhere else. Only when no finite z-scores exist (non-finite
    values, or a centre value so far from the population that even the scaled difference
    overflows) are rank utilities returned, with ``True`` as the second element.
    """
    f = np.asarray(values, dtype=np.float64)
    if baseline == "center" and centre_value is None:
        raise ValueError("baseline='center' needs the value at the mean (centre_value)")
    if shaping == "zscore":
        u = _zscores(f, centre_value, baseline)
        if u is not None:
            return u, False
        return shaped_utilities(f, centre_value, baseline=baseline, shaping="rank")[0], True
    if shaping == "rank":
        h = rankdata(f) - 1.0
        if baseline == "mean":
            h_b = h.mean()
        else:
            h_b = np.count_nonzero(f < centre_value) + 0.5 * np.count_nonzero(f == centre_value) - 0.5
    else:
        h = f
        h_b = f.mean() if baseline == "mean" else float(centre_value)
    u = h - h_b
    if shaping == "none":
        return u, False
    scale = h.std(ddof=1)
    if scale == 0.0:
        return np.zeros_like(u), False
    return u / scale, False


def _zscores(f: np.ndarray, centre_value: float | None, baseline: str) -> np.ndarray | None:
    """Overflow-free ``(f - b) / std(f, ddof=1)`` (see :func:`shaped_utilities`); ``None`` if not finite."""
    if not np.all(np.isfinite(f)):
        return None
    peak = float(np.max(np.abs(f))) if f.size else 0.0
    k = int(np.frexp(peak)[1]) if peak > 0.0 else 0  # peak = m 2^k with m in [0.5, 1)
    h = np.ldexp(f, -k)
    with np.errstate(over="ignore", invalid="ignore"):
        h_b = h.mean() if baseline == "mean" else np.ldexp(float(centre_value), -k)
        u = h - h_b
        scale = h.std(ddof=1)
    if not (np.isfinite(scale) and np.all(np.isfinite(u))):
        return None
    if scale == 0.0:
        return np.zeros_like(u)
    return u / scale


def search_gradients(z: np.ndarray, sigma: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(g, G)`` from standard-normal draws ``z`` (N, d), std ``sigma`` (d,), utilities ``u`` (N,).

    ``g`` estimates grad_mu J, ``G`` the diagonal of grad_Sigma J, at the distribution
    N(mu, diag(sigma^2)) that produced ``x_j = mu + sigma * z_j`` (eqs. alg1_1-alg1_4, alg2_1-alg2_4).
    """
    n = u.size
    uz = u @ z
    uz2 = u @ (z * z)
    g = uz / (n * sigma)
    G = (uz2 - u.sum()) / (2.0 * n * sigma * sigma)
    return g, G
