"""Numerical verification of the KL-constrained perturbation (eqs. sec31_4, sec31_5, sec32_5).

For a multiplier lambda the perturbation is delta_mu = Sigma g / lambda and
(Sigma + delta_Sigma)^-1 = Sigma^-1 (1 - a), a = 2 Sigma G / lambda. Its KL to the
unperturbed Gaussian is

    KL(lambda) = 1/2 sum_i [a_i / (1 - a_i) + log(1 - a_i) + s_i g_i^2 / lambda^2]
               = rho_cf^2 + (1/3) sum_i a_i^3 + O(a^4)        with lambda = closed_form_lambda(rho_cf),

since a/(1-a) + log(1-a) = sum_{k>=2} (1 - 1/k) a^k. The closed form therefore has
KL/rho^2 - 1 = (8/3) sum_i (s_i G_i)^3 / c^3 * rho + O(rho^2), c = lambda rho (Appendix A's
neglected O(rho^3) terms); the tests check both the slope (1) and this coefficient.
"""
from __future__ import annotations

import mpmath
import numpy as np
import pytest

from sabo import closed_form_lambda, exact_lambda, kl_diag_gaussians, perturbation_from_lambda, perturbation_kl
from sabo.perturbation import kl_lambda

EPS = np.finfo(np.float64).eps


def random_case(rng, d=None, big_G=False):
    d = int(rng.integers(1, 9)) if d is None else d
    g = rng.standard_normal(d) * 10 ** rng.uniform(-2, 2)
    G = rng.standard_normal(d) * 10 ** rng.uniform(-2, 2)
    sigma2 = 10 ** rng.uniform(-2, 2, d)
    if big_G:  # large positive entries: the precision ratio 1 - 2 s G / lambda approaches 0
        k = rng.integers(0, d)
        G[k] = abs(G[k]) * 10 ** rng.uniform(2, 4) / sigma2[k]
    return g, G, sigma2


def perturbed(g, G, sigma2, lam, mu=None):
    """(mu + delta_mu, Sigma + delta_Sigma) of eq. sec31_4 via the library."""
    mu = np.zeros_like(sigma2) if mu is None else mu
    delta_mu, ratio = perturbation_from_lambda(g, G, sigma2, lam)
    assert np.all(ratio > 0)
    return mu + delta_mu, sigma2 / ratio


def kl_of(g, G, sigma2, lam):
    mu1, s1 = perturbed(g, G, sigma2, lam)
    return kl_diag_gaussians(mu1, s1, np.zeros_like(sigma2), sigma2)


def mp_perturbation_kl(g, G, sigma2, lam, dps=60):
    """KL(lambda) in 60-digit arithmetic from the float64 inputs (reference)."""
    with mpmath.workdps(dps):
        lam = mpmath.mpf(float(lam))
        total = mpmath.mpf(0)
        for gi, Gi, si in zip(g, G, sigma2):
            gi, Gi, si = (mpmath.mpf(float(v)) for v in (gi, Gi, si))
            a = 2 * si * Gi / lam
            total += a / (1 - a) + mpmath.log(1 - a) + si * gi**2 / lam**2
        return total / 2


# ----------------------------------------------------------------------------- closed form (eq. sec31_5)
CLOSED_FORM_CASES = [
    (np.array([0.8, -1.2, 0.3, 2.0, -0.5, 1.1]), np.array([1.5, -0.7, 2.2, 0.4, -1.9, 0.9]),
     np.array([0.5, 2.0, 1.0, 0.3, 1.5, 0.8])),
    (np.array([3.0, 0.1]), np.array([-2.0, -0.5]), np.array([0.2, 4.0])),
    (np.array([0.0, 0.0, 0.0]), np.array([0.5, 1.0, -0.2]), np.array([1.0, 1.0, 1.0])),
    (np.array([1.0, -1.0, 0.5, 0.5]), np.array([5.0, 0.1, 0.2, 3.0]), np.array([1.0, 0.5, 2.0, 0.25])),
]


@pytest.mark.parametrize("g, G, sigma2", CLOSED_FORM_CASES)
def test_closed_form_kl_over_rho2_tends_to_one_with_slope_one(g, G, sigma2):
    rhos = np.logspace(-4, -1, 13)
    kls = np.array([kl_of(g, G, sigma2, closed_form_lambda(g, G, sigma2, r)) for r in rhos])
    err = kls / rhos**2 - 1
    # -> 1 as rho -> 0
    assert abs(err[0]) < 1e-3
    assert np.all(np.diff(np.abs(err)) > 0)  # shrinks monotonically as rho decreases
    # error linear in rho: log-log slope 1 +- 0.1
    slope = np.polyfit(np.log(rhos), np.log(np.abs(err)), 1)[0]
    assert abs(slope - 1) < 0.1, slope
    # and its coefficient is the one derived above: (8/3) sum (s G)^3 / c^3
    c = np.sqrt(np.sum((sigma2 * G) ** 2) + 0.5 * np.sum(sigma2 * g * g))
    coef = 8.0 / 3.0 * np.sum((sigma2 * G) ** 3) / c**3
    assert abs(coef) > 0.1  # the case is informative
    np.testing.assert_allclose(err[:4] / rhos[:4], coef, rtol=1e-2)


def test_closed_form_lambda_equals_literal_formula():
    rng = np.random.default_rng(1)
    for _ in range(50):
        g, G, sigma2 = random_case(rng)
        rho = 10 ** rng.uniform(-3, 0.5)
        Sig, Gm = np.diag(sigma2), np.diag(G)
        lit = np.sqrt(np.linalg.norm(Sig @ Gm, "fro") ** 2 + 0.5 * np.linalg.norm(np.sqrt(Sig) @ g) ** 2) / rho
        np.testing.assert_allclose(closed_form_lambda(g, G, sigma2, rho), lit, rtol=1e-13)
        assert kl_lambda(g, G, sigma2, rho, "closed_form") == closed_form_lambda(g, G, sigma2, rho)


# ----------------------------------------------------------------------------- literal eq. sec31_4
def test_perturbation_equals_literal_matrix_formula():
    """Sigma + delta_Sigma with delta_Sigma = 2 Sigma G (lambda Sigma^-1 - 2 G)^-1, dense matrices."""
    rng = np.random.default_rng(2)
    checked = 0
    for k in range(200):
        g, G, sigma2 = random_case(rng, big_G=k % 2 == 0)
        rho = 10 ** rng.uniform(-3, 0.5)
        lam = exact_lambda(g, G, sigma2, rho) if k % 3 else closed_form_lambda(g, G, sigma2, rho)
        delta_mu, ratio = perturbation_from_lambda(g, G, sigma2, lam)
        if np.min(ratio) < 1e-3:  # the literal inverse then loses ~eps/ratio: not a fair reference
            continue
        Sig, Gm = np.diag(sigma2), np.diag(G)
        dSig = 2 * Sig @ Gm @ np.linalg.inv(lam * np.linalg.inv(Sig) - 2 * Gm)
        np.testing.assert_allclose(sigma2 / ratio, np.diag(Sig + dSig), rtol=1e-12, atol=0)
        np.testing.assert_allclose(delta_mu, Sig @ g / lam, rtol=1e-13, atol=0)
        # off-diagonal entries stay zero: the perturbed covariance is diagonal
        assert np.count_nonzero(dSig - np.diag(np.diag(dSig))) == 0
        checked += 1
    assert checked > 100


def test_perturbation_direction_signs():
    """delta_mu has the sign of g (ascent), and the variance grows exactly where G > 0."""
    rng = np.random.default_rng(3)
    for _ in range(100):
        g, G, sigma2 = random_case(rng)
        lam = exact_lambda(g, G, sigma2, 0.5)
        mu1, s1 = perturbed(g, G, sigma2, lam)
        np.testing.assert_array_equal(np.sign(mu1), np.sign(g))
        np.testing.assert_array_equal(np.sign(s1 - sigma2), np.sign(G))


# ----------------------------------------------------------------------------- exact variant
def test_exact_lambda_meets_kl_constraint_exactly():
    rng = np.random.default_rng(4)
    worst = 0.0
    for k in range(400):
        g, G, sigma2 = random_case(rng, big_G=k % 2 == 1)
        if k % 7 == 0:
            g = np.zeros_like(g)  # pure covariance perturbation
        elif k % 7 == 1:
            G = np.zeros_like(G)  # pure mean perturbation
        elif k % 7 == 2:
            G = -np.abs(G)  # only shrinking variances (lambda_min = 0)
        rho = 10 ** rng.uniform(-4, np.log10(3.0))
        lam = exact_lambda(g, G, sigma2, rho)
        assert lam > max(0.0, np.max(2 * sigma2 * G))
        kl = kl_of(g, G, sigma2, lam)
        worst = max(worst, abs(kl / rho**2 - 1))
        assert abs(kl / rho**2 - 1) < 1e-9, (k, rho, kl)
        assert kl_lambda(g, G, sigma2, rho, "exact") == lam
    assert worst > 0  # sanity: the comparison is not between identical code paths


def test_exact_lambda_large_positive_G_and_large_rho():
    """Where the closed form is inadmissible (ratio <= 0) the exact root still exists."""
    g, G, sigma2 = np.array([0.1, -0.2]), np.array([50.0, 0.3]), np.array([1.0, 2.0])
    for rho in (0.6, 1.0, 2.0, 3.0):
        _, ratio_cf = perturbation_from_lambda(g, G, sigma2, closed_form_lambda(g, G, sigma2, rho))
        assert ratio_cf[0] <= 0  # the first-order lambda gives no Gaussian here
        lam = exact_lambda(g, G, sigma2, rho)
        np.testing.assert_allclose(kl_of(g, G, sigma2, lam), rho**2, rtol=1e-9)


def test_exact_lambda_converges_to_closed_form_as_rho_to_zero():
    g, G, sigma2 = CLOSED_FORM_CASES[0]
    rhos = np.logspace(-5, -2, 4)
    rel = np.array([exact_lambda(g, G, sigma2, r) / closed_form_lambda(g, G, sigma2, r) - 1 for r in rhos])
    assert abs(rel[0]) < 1e-4
    assert np.all(np.abs(rel[1:]) / np.abs(rel[:-1]) > 5)  # O(rho): x10 per decade


def test_exact_lambda_zero_gradient():
    z = np.zeros(3)
    assert exact_lambda(z, z, np.ones(3), 0.7) == 0.0


# ----------------------------------------------------------------------------- optimality on the KL ball
def _ray_kl(t, dmu, ds, sigma2):
    """Exact KL(N(t dmu, s + t ds) || N(0, s)) for many rays at once (t: (n,), dmu/ds: (n, d))."""
    x = t[:, None] * ds / sigma2
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.where(x > -1, x - np.log1p(x), np.inf)
    return 0.5 * np.sum(var + t[:, None] ** 2 * dmu**2 / sigma2, axis=1)


def _scale_to_kl(dmu, ds, sigma2, target, iters=200):
    """t > 0 with KL(t dmu, t ds) = target for every row, by bisection (KL increases in t)."""
    n = dmu.shape[0]
    with np.errstate(divide="ignore"):
        t_max = np.min(np.where(ds < 0, sigma2 / -ds, np.inf), axis=1)  # variance stays > 0 below
    lo = np.zeros(n)
    hi = np.where(np.isfinite(t_max), t_max, 1.0)
    for _ in range(200):
        grow = np.isinf(t_max) & (_ray_kl(hi, dmu, ds, sigma2) < target)
        if not grow.any():
            break
        hi[grow] *= 2.0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        below = _ray_kl(mid, dmu, ds, sigma2) <= target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return lo


def _random_feasible(rng, g, G, sigma2, target, best_dmu, best_ds, n=10_000):
    d = sigma2.size
    dmu = rng.standard_normal((n, d)) * np.sqrt(sigma2)
    ds = rng.standard_normal((n, d)) * sigma2
    # a quarter of them close to the optimum's direction, so that the comparison is tight
    k = n // 4
    scale = 10 ** rng.uniform(-4, -1, (k, 1))
    dmu[:k] = best_dmu + scale * dmu[:k] * np.linalg.norm(best_dmu / np.sqrt(sigma2)) / np.sqrt(d)
    ds[:k] = best_ds + scale * ds[:k] * np.linalg.norm(best_ds / sigma2) / np.sqrt(d)
    t = _scale_to_kl(dmu, ds, sigma2, target)
    dmu, ds = t[:, None] * dmu, t[:, None] * ds
    kls = _ray_kl(np.ones(n), dmu, ds, sigma2)
    np.testing.assert_allclose(kls, target, rtol=1e-9)
    for i in range(0, n, 2500):  # the vectorised KL is the library's KL
        np.testing.assert_allclose(kl_diag_gaussians(dmu[i], sigma2 + ds[i], 0 * sigma2, sigma2), kls[i], rtol=1e-10)
    return dmu @ g + ds @ G


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rho", [0.05, 0.7, 2.5])
def test_exact_perturbation_maximises_linearised_objective_on_kl_ball(seed, rho):
    rng = np.random.default_rng(100 + seed)
    g, G, sigma2 = random_case(rng, d=4, big_G=seed == 3)
    lam = exact_lambda(g, G, sigma2, rho)
    mu1, s1 = perturbed(g, G, sigma2, lam)
    best = g @ mu1 + G @ (s1 - sigma2)
    others = _random_feasible(rng, g, G, sigma2, rho**2, mu1, s1 - sigma2)
    assert np.all(others <= best * (1 + 1e-12)), (best, others.max())
    assert others.max() > best * (1 - 1e-3)  # near-optimal competitors get close: the test is tight
    # the negated perturbation (same KL for the mean part) is far worse
    assert g @ (-mu1) < best


@pytest.mark.parametrize("rho", [0.01, 0.1, 0.3])
def test_closed_form_perturbation_is_optimal_for_the_kl_it_achieves(rho):
    """delta(lambda) is the KKT point of the ball of radius KL(delta(lambda)) for any admissible lambda."""
    rng = np.random.default_rng(200)
    g, G, sigma2 = CLOSED_FORM_CASES[0]
    lam = closed_form_lambda(g, G, sigma2, rho)
    mu1, s1 = perturbed(g, G, sigma2, lam)
    target = kl_diag_gaussians(mu1, s1, 0 * sigma2, sigma2)
    best = g @ mu1 + G @ (s1 - sigma2)
    others = _random_feasible(rng, g, G, sigma2, target, mu1, s1 - sigma2)
    assert np.all(others <= best * (1 + 1e-12)), (best, others.max())
    assert others.max() > best * (1 - 1e-3)


# ----------------------------------------------------------------------------- perturbation_kl
def test_perturbation_kl_equals_kl_of_perturbed_distribution():
    rng = np.random.default_rng(5)
    for k in range(300):
        g, G, sigma2 = random_case(rng, big_G=k % 3 == 0)
        rho = 10 ** rng.uniform(-3, np.log10(3.0))
        lam = exact_lambda(g, G, sigma2, rho) if k % 2 else closed_form_lambda(g, G, sigma2, rho)
        if np.any(2 * sigma2 * G / lam >= 1):  # closed form inadmissible: covered below
            assert perturbation_kl(g, G, sigma2, lam) == np.inf
            continue
        mu = rng.standard_normal(sigma2.size)
        mu1, s1 = perturbed(g, G, sigma2, lam, mu=mu)
        np.testing.assert_allclose(perturbation_kl(g, G, sigma2, lam),
                                   kl_diag_gaussians(mu1, s1, mu, sigma2), rtol=1e-10)


def test_perturbation_kl_inadmissible_lambda_is_inf():
    g, G, sigma2 = np.array([1.0, 0.0]), np.array([2.0, -1.0]), np.array([1.0, 1.0])
    assert perturbation_kl(g, G, sigma2, 4.0) == np.inf       # a = 1
    assert perturbation_kl(g, G, sigma2, 3.0) == np.inf       # a > 1
    assert np.isfinite(perturbation_kl(g, G, sigma2, 4.0001))


@pytest.mark.parametrize("rho", [1e-6, 1e-7])
def test_perturbation_kl_tiny_perturbations(rho):
    """rho ~ 1e-6: a ~ 1e-6, where 1/r - 1 + log r cancels to ~a^2/2.

    (i) perturbation_kl against a 60-digit evaluation of the same formula: 1e-14 relative.
    (ii) against kl_diag_gaussians of the stored perturbed distribution. That distribution is
    itself only a float64 rounding of the exact one: s1/s0 - 1 ~ a is known to absolute
    ~ few eps, so the variance term ~a^2/2 carries an absolute uncertainty of ~few eps |a|
    per coordinate, a relative ~eps/rho that no KL routine can remove (at rho = 1e-6 the
    60-digit KL of the stored distribution itself differs from the exact KL by ~2e-10).
    The bound used is 4 eps sum_i |a_i| + 1e-13 KL.
    """
    rng = np.random.default_rng(6)
    for k in range(200):
        g, G, sigma2 = random_case(rng)
        lam = closed_form_lambda(g, G, sigma2, rho) if k % 2 else exact_lambda(g, G, sigma2, rho)
        pkl = perturbation_kl(g, G, sigma2, lam)
        ref = float(mp_perturbation_kl(g, G, sigma2, lam))
        assert abs(pkl / ref - 1) < 1e-14, (pkl, ref)
        mu1, s1 = perturbed(g, G, sigma2, lam)
        kl = kl_diag_gaussians(mu1, s1, 0 * sigma2, sigma2)
        a = 2 * sigma2 * G / lam
        assert abs(pkl - kl) <= 4 * EPS * np.sum(np.abs(a)) + 1e-13 * pkl, (pkl, kl)


@pytest.mark.parametrize("a", [9.99e-4, -9.99e-4, 1.001e-3, -1.001e-3, 0.3, -5.0, 0.999])
def test_perturbation_kl_variance_term_accurate_on_both_branches(a):
    """The series branch (|a| < 1e-3) and the closed branch agree with a 60-digit reference."""
    sigma2 = np.array([0.7])
    lam = 1.3
    G = np.array([a * lam / (2 * sigma2[0])])
    g = np.zeros(1)
    got = perturbation_kl(g, G, sigma2, lam)
    ref = float(mp_perturbation_kl(g, G, sigma2, lam))
    assert abs(got / ref - 1) < 1e-12, (got, ref)
