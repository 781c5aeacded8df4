"""Numerical verification of the search-gradient estimators (eqs. alg1_1-alg1_4, alg2_1-alg2_4).

J(mu, s) = E_{N(mu, diag(s))}[F(x)] has closed-form gradients for polynomial F, so the
estimators' expectations can be checked against the truth.

Statistical bounds (all derived from the replicates of the test itself, fixed seeds):

* coordinate-wise: |mean_r(est) - truth| < 4 SE with SE = std_r(est, ddof=1) / sqrt(R)
  (two-sided normal tail 6.3e-5 per coordinate);
* jointly (norm): Hotelling's T^2 = R (m - truth)^T S^-1 (m - truth), S the sample covariance
  of the replicates; under unbiasedness T^2 (R - p) / (p (R - 1)) ~ F(p, R - p), and the test
  uses the 1 - 1e-6 quantile. In addition ||m - truth|| < 4 sqrt(sum_i SE_i^2): E||m - truth||^2
  = sum_i SE_i^2, and a weighted sum of chi^2_1 variables with weights summing to one exceeds
  16 with probability at most about P(chi^2_1 > 16) = 6e-5.

The "power" tests apply exactly the same checks to deliberately wrong estimators (missing -1
in z^2 - 1, factor 2 in G, Sigma^-1 replaced by Sigma^-1/2 in g) and require them to be
rejected, so a bug of that kind in the library could not pass.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sabo import search_gradients, utilities

R, N, D = 4000, 10, 5
Z_BOUND = 4.0
HOTELLING_LEVEL = 1e-6

MU = np.array([0.5, -1.0, 0.3, 1.2, -0.4])
S = np.array([0.5, 1.5, 0.8, 2.0, 1.2])  # diagonal of Sigma
A = np.array([1.0, 0.5, 2.0, -0.7, 1.5])
B = np.array([0.3, -1.0, 0.5, 0.2, 0.0])
C4 = np.array([0.2, 0.1, 0.3, 0.05, 0.15])
S_QUARTIC = np.array([0.3, 0.6, 0.4, 0.8, 0.5])


# ----------------------------------------------------------------------------- objectives
def quadratic(x):
    return np.sum(A * x * x + B * x, axis=-1)


def quadratic_grads(mu, s):
    """J = sum a (mu^2 + s) + b mu."""
    return 2 * A * mu + B, A.copy()


def quartic(x):
    return np.sum(C4 * x**4 + B * x, axis=-1)


def quartic_grads(mu, s):
    """E[x^4] = mu^4 + 6 mu^2 s + 3 s^2 for x ~ N(mu, s)."""
    return C4 * (4 * mu**3 + 12 * mu * s) + B, C4 * (6 * mu**2 + 6 * s)


# ----------------------------------------------------------------------------- helpers
def draw(seed, mu, s, objective, r=R, n=N):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((r, n, mu.size))
    x = mu + np.sqrt(s) * z
    return z, objective(x), np.full(r, objective(mu))


def replicate(z, sigma, f, f0, *, baseline="center", shaping="none", estimator=None):
    """(R, 2d) array of stacked (g, G), one row per independent population."""
    r, _, d = z.shape
    out = np.empty((r, 2 * d))
    est = search_gradients if estimator is None else estimator
    for k in range(r):
        u = utilities(f[k], f0[k], baseline=baseline, shaping=shaping)
        g, G = est(z[k], sigma, u)
        out[k, :d], out[k, d:] = g, G
    return out


def unbiasedness_stats(est, truth):
    r, p = est.shape
    mean = est.mean(axis=0)
    se = est.std(axis=0, ddof=1) / np.sqrt(r)
    diff = mean - truth
    cov = np.cov(est, rowvar=False)
    t2 = r * diff @ np.linalg.solve(cov, diff)
    t2_bound = p * (r - 1) / (r - p) * stats.f.ppf(1 - HOTELLING_LEVEL, p, r - p)
    return dict(mean=mean, se=se, zscores=diff / se, t2=t2, t2_bound=t2_bound,
                norm=np.linalg.norm(diff), norm_bound=Z_BOUND * np.sqrt(np.sum(se**2)))


def assert_unbiased(est, truth, label):
    st = unbiasedness_stats(est, truth)
    assert np.all(np.abs(st["zscores"]) < Z_BOUND), f"{label}: z-scores {np.round(st['zscores'], 2)}"
    assert st["t2"] < st["t2_bound"], f"{label}: Hotelling T^2 {st['t2']:.1f} >= {st['t2_bound']:.1f}"
    assert st["norm"] < st["norm_bound"], f"{label}: ||mean - truth|| {st['norm']:.3g} >= {st['norm_bound']:.3g}"
    return st


def assert_rejected(est, truth, label):
    st = unbiasedness_stats(est, truth)
    assert st["t2"] > st["t2_bound"] and np.max(np.abs(st["zscores"])) > Z_BOUND, (
        f"{label}: a wrong estimator passed the unbiasedness check (T^2 {st['t2']:.1f}, "
        f"max |z| {np.max(np.abs(st['zscores'])):.1f})")
    return st


# deliberately wrong estimators, used to show that the checks have power
def g_without_minus_one(z, sigma, u):
    n = u.size
    return u @ z / (n * sigma), (u @ (z * z)) / (2.0 * n * sigma**2)


def G_factor_two(z, sigma, u):
    g, G = search_gradients(z, sigma, u)
    return g, 2.0 * G


def g_wrong_scale(z, sigma, u):
    g, G = search_gradients(z, sigma, u)
    return g / sigma, G  # Sigma^-1 (x - mu) = z / sigma, not z / sigma^2


# ----------------------------------------------------------------------------- unbiasedness
@pytest.mark.parametrize("objective, grads, s, seed", [
    (quadratic, quadratic_grads, S, 11),
    (quartic, quartic_grads, S_QUARTIC, 12),
], ids=["quadratic", "quartic"])
def test_centre_baseline_estimator_is_unbiased(objective, grads, s, seed):
    z, f, f0 = draw(seed, MU, s, objective)
    est = replicate(z, np.sqrt(s), f, f0)
    tg, tG = grads(MU, s)
    assert_unbiased(est, np.r_[tg, tG], objective.__name__)


@pytest.mark.parametrize("objective, grads, s, seed", [
    (quadratic, quadratic_grads, S, 11),
    (quartic, quartic_grads, S_QUARTIC, 12),
], ids=["quadratic", "quartic"])
@pytest.mark.parametrize("wrong", [g_without_minus_one, G_factor_two, g_wrong_scale])
def test_unbiasedness_check_rejects_wrong_estimators(objective, grads, s, seed, wrong):
    z, f, f0 = draw(seed, MU, s, objective)
    est = replicate(z, np.sqrt(s), f, f0, estimator=wrong)
    tg, tG = grads(MU, s)
    assert_rejected(est, np.r_[tg, tG], f"{objective.__name__}/{wrong.__name__}")


def test_mean_baseline_is_biased_by_exactly_n_minus_one_over_n():
    """baseline="mean" is NOT unbiased for finite N.

    u_j = f_j - (1/N) sum_k f_k and f_k (k != j) is independent of z_j, so
    E[u_j z_j] = (1 - 1/N) E[f_j z_j] (same for z_j^2 - 1): E[g, G] = (N - 1)/N * grad J.
    The test checks that scaled target and rejects the unscaled one.
    """
    z, f, f0 = draw(13, MU, S, quadratic, r=4 * R)  # 4x the replicates: the bias is only 10 %
    est = replicate(z, np.sqrt(S), f, f0, baseline="mean", shaping="none")
    truth = np.r_[quadratic_grads(MU, S)]
    assert_unbiased(est, (N - 1) / N * truth, "mean baseline vs (N-1)/N grad")
    assert_rejected(est, truth, "mean baseline vs grad")


@pytest.mark.parametrize("baseline", ["mean", "center"])
def test_zscore_shaping_is_biased_in_scale_not_in_direction(baseline):
    """Documents the bias of z-score shaping (the library default): not a failure.

    Dividing by the random sample std rescales the expectation (here to ~0.15-0.17 of the
    true gradient norm, hundreds of SE away) while g and G keep their direction.
    """
    z, f, f0 = draw(14, MU, S, quadratic)
    est = replicate(z, np.sqrt(S), f, f0, baseline=baseline, shaping="zscore")
    tg, tG = quadratic_grads(MU, S)
    st = unbiasedness_stats(est, np.r_[tg, tG])
    assert np.max(np.abs(st["zscores"])) > 25 * Z_BOUND
    assert st["t2"] > 100 * st["t2_bound"]
    mg, mG = st["mean"][:D], st["mean"][D:]
    for m, t in ((mg, tg), (mG, tG)):
        cos = m @ t / (np.linalg.norm(m) * np.linalg.norm(t))
        ratio = np.linalg.norm(m) / np.linalg.norm(t)
        assert cos > 0.99, cos
        assert 0.05 < ratio < 0.5, ratio


# ----------------------------------------------------------------------------- mini-batch
N_DATA, D_MB, M_BATCH = 200, 4, 20


def _regression_data():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((N_DATA, D_MB))
    y = X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.3 * rng.standard_normal(N_DATA)
    return X, y


def test_minibatch_estimator_is_unbiased_for_full_data_gradient():
    """Eqs. alg2_1/alg2_2: F(x_j; B) and F(mu; B) on the same random batch B.

    F(x; D) = mean_i (X_i . x - y_i)^2 = x^T Q x - 2 q . x + c with Q = X^T X / n, q = X^T y / n,
    so J(mu, s) = mu^T Q mu + sum_i Q_ii s_i - 2 q . mu + c:
    grad_mu = 2 Q mu - 2 q, grad_s = diag(Q). E over batches and samples is the full-data gradient.
    """
    X, y = _regression_data()
    mu = np.array([0.3, -1.0, 0.8, 0.2])
    s = np.array([0.4, 0.9, 0.6, 1.3])
    Q, q = X.T @ X / N_DATA, X.T @ y / N_DATA
    truth = np.r_[2 * Q @ mu - 2 * q, np.diag(Q)]

    rng = np.random.default_rng(15)
    batches = np.argsort(rng.random((R, N_DATA)), axis=1)[:, :M_BATCH]  # without replacement
    Xb, yb = X[batches], y[batches]                                      # (R, M, d), (R, M)
    z = rng.standard_normal((R, N, D_MB))
    x = mu + np.sqrt(s) * z
    f = np.mean((np.einsum("rnd,rmd->rnm", x, Xb) - yb[:, None, :]) ** 2, axis=2)  # F(x_j; B)
    f0 = np.mean((Xb @ mu - yb) ** 2, axis=1)                                        # F(mu; B)
    est = replicate(z, np.sqrt(s), f, f0)
    assert_unbiased(est, truth, "mini-batch")
    # and the check has power here too
    assert_rejected(replicate(z, np.sqrt(s), f, f0, estimator=G_factor_two), truth, "mini-batch, 2G")


def test_minibatch_double_sum_equals_batch_mean_utilities():
    """Eq. alg2_1/alg2_2 literally (double sum over samples j and examples i) equals
    search_gradients applied to u_j = F(x_j; B) - F(mu; B)."""
    X, y = _regression_data()
    rng = np.random.default_rng(16)
    mu, s = rng.standard_normal(D_MB), rng.uniform(0.3, 2.0, D_MB)
    batch = rng.choice(N_DATA, M_BATCH, replace=False)
    z = rng.standard_normal((N, D_MB))
    x = mu + np.sqrt(s) * z
    loss = lambda v, i: (X[i] @ v - y[i]) ** 2  # noqa: E731
    Sinv = np.diag(1 / s)
    g_lit, G_lit = np.zeros(D_MB), np.zeros(D_MB)
    for j in range(N):
        e = (x[j] - mu)[:, None]
        for i in batch:
            du = loss(x[j], i) - loss(mu, i)
            g_lit += Sinv @ e[:, 0] * du
            G_lit += np.diag(Sinv @ (np.diag(np.diag(e @ e.T @ Sinv - np.eye(D_MB))) * du))
    g_lit /= N * M_BATCH
    G_lit /= 2 * N * M_BATCH
    f = np.array([np.mean([loss(xj, i) for i in batch]) for xj in x])
    u = utilities(f, np.mean([loss(mu, i) for i in batch]), baseline="center", shaping="none")
    g, G = search_gradients(z, np.sqrt(s), u)
    np.testing.assert_allclose(g, g_lit, rtol=1e-12, atol=0)
    np.testing.assert_allclose(G, G_lit, rtol=1e-12, atol=0)


# ----------------------------------------------------------------------------- exact algebra
@pytest.mark.parametrize("d", [1, 3, 6])
def test_search_gradients_equal_literal_matrix_formula(d):
    """Eqs. alg1_1/alg1_2 with dense Sigma = diag(s) and explicit (x - mu)(x - mu)^T."""
    rng = np.random.default_rng(100 + d)
    n = 7
    mu, s = rng.standard_normal(d), rng.uniform(0.1, 5.0, d)
    z = rng.standard_normal((n, d))
    x = mu + np.sqrt(s) * z
    fx, fmu = rng.standard_normal(n) * 3, 0.7
    Sigma = np.diag(s)
    Sinv = np.linalg.inv(Sigma)
    g_lit = sum(Sinv @ (x[j] - mu) * (fx[j] - fmu) for j in range(n)) / n
    G_lit = sum(
        np.diag(Sinv @ (np.diag(np.diag(np.outer(x[j] - mu, x[j] - mu) @ Sinv - np.eye(d))) * (fx[j] - fmu)))
        for j in range(n)) / (2 * n)
    u = utilities(fx, fmu, baseline="center", shaping="none")
    np.testing.assert_array_equal(u, fx - fmu)
    g, G = search_gradients(z, np.sqrt(s), u)
    np.testing.assert_allclose(g, g_lit, rtol=1e-12, atol=0)
    np.testing.assert_allclose(G, G_lit, rtol=1e-12, atol=0)


# ----------------------------------------------------------------------------- utilities
@pytest.mark.parametrize("baseline", ["mean", "center"])
@pytest.mark.parametrize("transform", [
    lambda v: np.exp(v / 4.0),
    lambda v: v**3 + 2.0 * v,
    lambda v: np.arctan(v) - 7.0,
], ids=["exp", "cubic", "arctan"])
def test_rank_shaping_invariant_to_monotone_transform(baseline, transform):
    rng = np.random.default_rng(17)
    for _ in range(50):
        f = np.round(rng.standard_normal(12) * 3, 1)  # rounding makes ties likely
        c = float(np.round(rng.standard_normal() * 3, 1))
        u1 = utilities(f, c, baseline=baseline, shaping="rank")
        u2 = utilities(transform(f), float(transform(c)), baseline=baseline, shaping="rank")
        np.testing.assert_array_equal(u1, u2)
    # an affine map with negative slope reverses the ranks: invariance is not vacuous
    f = rng.standard_normal(12)
    assert not np.array_equal(utilities(f, 0.0, baseline=baseline, shaping="rank"),
                              utilities(-f, 0.0, baseline=baseline, shaping="rank"))


def test_rank_utilities_small_example():
    f = np.array([3.0, 1.0, 2.0])  # ranks 2, 0, 1; std(ddof=1) = 1
    np.testing.assert_array_equal(utilities(f, None, baseline="mean", shaping="rank"), [1.0, -1.0, 0.0])
    # centre 1.5 has fractional rank 0.5 among the population
    np.testing.assert_array_equal(utilities(f, 1.5, baseline="center", shaping="rank"), [1.5, -0.5, 0.5])


@pytest.mark.parametrize("shaping", ["zscore", "rank"])
@pytest.mark.parametrize("baseline, centre", [("mean", None), ("center", 2.5), ("center", -1.0)])
def test_constant_population_gives_zero_utilities(shaping, baseline, centre):
    f = np.full(9, 2.5)
    u = utilities(f, centre, baseline=baseline, shaping=shaping)
    np.testing.assert_array_equal(u, np.zeros(9))
    g, G = search_gradients(np.random.default_rng(0).standard_normal((9, 3)), np.ones(3), u)
    np.testing.assert_array_equal(g, 0.0)
    np.testing.assert_array_equal(G, 0.0)


@pytest.mark.parametrize("shaping", ["none", "zscore", "rank"])
def test_centre_baseline_without_centre_value_raises(shaping):
    with pytest.raises(ValueError):
        utilities(np.arange(5.0), None, baseline="center", shaping=shaping)
