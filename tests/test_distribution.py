"""Numerical verification of the diagonal Gaussian and its KL divergence (sabo.distribution)."""
from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy import stats

from sabo import DiagonalGaussian, kl_diag_gaussians


def dense_kl(mu1, s1, mu0, s0):
    """1/2 [tr(S0^-1 S1) + (mu1-mu0)^T S0^-1 (mu1-mu0) + log(|S0|/|S1|) - d] with full matrices."""
    S1, S0 = np.diag(s1), np.diag(s0)
    S0inv = np.linalg.inv(S0)
    dm = mu1 - mu0
    logdet0, logdet1 = np.linalg.slogdet(S0)[1], np.linalg.slogdet(S1)[1]
    return 0.5 * (np.trace(S0inv @ S1) + dm @ S0inv @ dm + logdet0 - logdet1 - mu1.size)


def random_pair(rng, d):
    return (rng.standard_normal(d) * 2, 10 ** rng.uniform(-2, 2, d),
            rng.standard_normal(d) * 2, 10 ** rng.uniform(-2, 2, d))


def test_kl_equals_dense_matrix_formula():
    rng = np.random.default_rng(0)
    for _ in range(300):
        mu1, s1, mu0, s0 = random_pair(rng, int(rng.integers(1, 10)))
        np.testing.assert_allclose(kl_diag_gaussians(mu1, s1, mu0, s0), dense_kl(mu1, s1, mu0, s0), rtol=1e-11)


def test_kl_argument_order():
    """KL(p1 || p0) with p1 the first pair: a swap would be caught (KL is asymmetric)."""
    mu, s1, s0 = np.zeros(1), np.array([4.0]), np.array([1.0])
    np.testing.assert_allclose(kl_diag_gaussians(mu, s1, mu, s0), 0.5 * (4 - 1 - np.log(4)), rtol=1e-15)
    np.testing.assert_allclose(kl_diag_gaussians(np.array([1.0]), s0, mu, s1), 0.5 * (0.25 + 0.25 - 1 + np.log(4)),
                               rtol=1e-15)


def test_kl_of_identical_distributions_is_zero():
    rng = np.random.default_rng(1)
    for _ in range(100):
        mu, s, _, _ = random_pair(rng, int(rng.integers(1, 10)))
        assert kl_diag_gaussians(mu, s, mu, s) == 0.0


def test_kl_nonnegative():
    rng = np.random.default_rng(2)
    for _ in range(1000):
        mu1, s1, mu0, s0 = random_pair(rng, int(rng.integers(1, 6)))
        if rng.random() < 0.5:  # nearby pairs too
            s1 = s0 * (1 + 10 ** rng.uniform(-12, -1) * rng.choice([-1, 1], s0.size))
            mu1 = mu0 + 10 ** rng.uniform(-12, -1) * rng.standard_normal(s0.size)
        assert kl_diag_gaussians(mu1, s1, mu0, s0) >= 0.0


def test_kl_matches_monte_carlo():
    """E_p[log p(x) - log q(x)] by Monte Carlo (scipy.stats densities), within 4 standard errors."""
    rng = np.random.default_rng(3)
    mu1, s1 = np.array([0.3, -0.5, 1.0]), np.array([0.5, 1.5, 0.6])
    mu0, s0 = np.array([0.0, 0.2, 0.7]), np.array([2.0, 1.0, 3.0])
    n = 400_000
    x = mu1 + np.sqrt(s1) * rng.standard_normal((n, 3))
    llr = (stats.norm.logpdf(x, mu1, np.sqrt(s1)) - stats.norm.logpdf(x, mu0, np.sqrt(s0))).sum(axis=1)
    mc, se = llr.mean(), llr.std(ddof=1) / np.sqrt(n)
    kl = kl_diag_gaussians(mu1, s1, mu0, s0)
    assert abs(mc - kl) < 4 * se, (mc, kl, se)
    # power: the reversed divergence is many standard errors away
    assert abs(mc - kl_diag_gaussians(mu0, s0, mu1, s1)) > 20 * se


@pytest.mark.parametrize("x", [1e-6, -1e-6, 1e-8, -1e-8, 1e-10, -1e-10])
def test_kl_of_nearby_distributions_keeps_relative_precision(x):
    """The docstring promises that nearby distributions do not lose their KL to cancellation.

    Reference: 50-digit evaluation of r - 1 - log r for the very float64 inputs passed in, so
    no representation error is involved. A cancellation-free evaluation reaches a few eps;
    ``(r - 1) - log1p(r - 1)`` loses ~eps/|r - 1| relative (2e-10 at |r - 1| = 1e-6, 1e-6 at 1e-10),
    because both operands are ~|r - 1| and the result is ~(r - 1)^2 / 2.
    """
    s0 = np.array([0.7, 1.3, 2.9])
    s1 = s0 * (1 + x * np.array([1.0, 0.6, 0.8]))
    zero = np.zeros(3)
    with mpmath.workdps(50):
        ref = sum((mpmath.mpf(float(b)) / mpmath.mpf(float(a)) - 1
                   - mpmath.log(mpmath.mpf(float(b)) / mpmath.mpf(float(a))))
                  for a, b in zip(s0, s1)) / 2
    got = kl_diag_gaussians(zero, s1, zero, s0)
    assert abs(got / float(ref) - 1) < 1e-12, (got, float(ref), got / float(ref) - 1)


# ----------------------------------------------------------------------------- DiagonalGaussian
def test_sample_uses_only_the_given_generator():
    p = DiagonalGaussian([0.5, -1.0, 2.0], [0.3, 1.0, 4.0])
    np.random.seed(12345)
    before = np.random.get_state()
    z1, x1 = p.sample(np.random.default_rng(7), 50)
    after = np.random.get_state()
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:]
    z2, x2 = p.sample(np.random.default_rng(7), 50)
    np.testing.assert_array_equal(z1, z2)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(x1, p.mean + np.sqrt(p.sigma2) * z1)
    # successive calls advance the generator; another seed gives other draws
    rng = np.random.default_rng(7)
    za, _ = p.sample(rng, 50)
    zb, _ = p.sample(rng, 50)
    assert not np.array_equal(za, zb)
    assert not np.array_equal(z1, p.sample(np.random.default_rng(8), 50)[0])


def test_sample_dtype_shape_and_moments():
    p = DiagonalGaussian(np.array([0.5, -1.0], dtype=np.float32), np.array([0.25, 4.0], dtype=np.float32))
    assert p.mean.dtype == np.float64 and p.sigma2.dtype == np.float64
    n = 200_000
    z, x = p.sample(np.random.default_rng(9), n)
    assert z.dtype == np.float64 and x.dtype == np.float64
    assert z.shape == x.shape == (n, 2)
    se_mean = np.sqrt(p.sigma2 / n)
    assert np.all(np.abs(x.mean(0) - p.mean) < 4 * se_mean)
    se_var = p.sigma2 * np.sqrt(2 / (n - 1))  # SE of the sample variance of a Gaussian
    assert np.all(np.abs(x.var(0, ddof=1) - p.sigma2) < 4 * se_var)


def test_construction_copies_inputs():
    m, s = np.array([1.0, 2.0]), np.array([1.0, 1.0])
    p = DiagonalGaussian(m, s)
    m[0], s[0] = 99.0, 99.0
    assert p.mean[0] == 1.0 and p.sigma2[0] == 1.0
    assert p.dim == 2


def test_method_kl_equals_function():
    p, q = DiagonalGaussian([0.1, 0.2], [1.0, 2.0]), DiagonalGaussian([0.0, -0.3], [0.5, 3.0])
    assert p.kl(q) == kl_diag_gaussians(p.mean, p.sigma2, q.mean, q.sigma2)


@pytest.mark.parametrize("mean, sigma2", [
    ([[0.0, 1.0]], [[1.0, 1.0]]),          # not 1-D
    ([0.0, 1.0], [1.0]),                   # length mismatch
    ([0.0, 1.0], [1.0, 0.0]),              # zero variance
    ([0.0, 1.0], [1.0, -2.0]),             # negative variance
    ([0.0, 1.0], [1.0, np.nan]),           # NaN variance
    (0.0, 1.0),                            # scalars
])
def test_invalid_construction_raises(mean, sigma2):
    with pytest.raises(ValueError):
        DiagonalGaussian(mean, sigma2)
