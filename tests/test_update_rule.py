"""Numerical verification of the update rule, eq. (32_update).

(i) The formula mu_{t+1} = mu_t - beta s_t g, 1/s_{t+1} = 1/s_t + 2 beta G is the minimiser of the
KL-regularised linear problem (sec31_6_reg_taylor)

    min_{mu, s}  <mu - mu_t, g> + <s - s_t, G> + (1/beta) KL(N(mu, s) || N(mu_t, s_t)),

found independently with scipy.optimize (L-BFGS-B, analytic gradient).
(ii) INGO and SABO, driven through ask/tell on a known objective, apply exactly that formula
to the search gradients of the samples they returned (z reconstructed from X).
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from baselines.ingo import INGO
from sabo import SABO, kl_diag_gaussians


# ----------------------------------------------------------------------------- (i) variational problem
def regularised_objective(mu, s, mu_t, s_t, g, G, beta):
    return (mu - mu_t) @ g + (s - s_t) @ G + kl_diag_gaussians(mu, s, mu_t, s_t) / beta


def numerical_minimiser(mu_t, s_t, g, G, beta):
    """Minimise over v = (mu - mu_t)/sqrt(s_t) and w = log(s/s_t) (a change of variables only)."""
    d = mu_t.size
    sq = np.sqrt(s_t)

    def fun(p):
        v, w = p[:d], p[d:]
        ew = np.exp(w)
        val = sq * g @ v + s_t * (ew - 1) @ G + 0.5 / beta * np.sum(ew - 1 - w + v * v)
        grad = np.r_[sq * g + v / beta, s_t * ew * G + 0.5 / beta * (ew - 1)]
        return val, grad

    res = minimize(fun, np.zeros(2 * d), jac=True, method="L-BFGS-B",
                   options=dict(ftol=1e-16, gtol=1e-13, maxiter=10_000, maxcor=30))
    v, w = res.x[:d], res.x[d:]
    mu, s = mu_t + sq * v, s_t * np.exp(w)
    # the change of variables is faithful: same value as the problem written with the library's KL
    np.testing.assert_allclose(res.fun, regularised_objective(mu, s, mu_t, s_t, g, G, beta), rtol=1e-9, atol=1e-12)
    return mu, s


def update_formula(mu_t, s_t, g, G, beta):
    return mu_t - beta * s_t * g, 1.0 / (1.0 / s_t + 2.0 * beta * G)


def assert_took_update_step(opt, mu_t, s_t, g, G, beta):
    """The optimizer's new mean and covariance are eq. (32_update) applied at (mu_t, s_t)."""
    mu_f, s_f = update_formula(mu_t, s_t, g, G, beta)
    np.testing.assert_allclose(opt.mean, mu_f, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(opt.sigma2, s_f, rtol=1e-10)


@pytest.mark.parametrize("seed", range(8))
def test_update_formula_is_the_minimiser_of_the_regularised_problem(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 7))
    mu_t = rng.standard_normal(d) * 2
    s_t = 10 ** rng.uniform(-1, 1, d)
    beta = 10 ** rng.uniform(-2, 0)
    g = rng.standard_normal(d) * 2
    G = rng.standard_normal(d) * 2
    # the problem is bounded below only if 1 + 2 beta s_t G > 0: keep it >= 0.2
    G = np.maximum(G, (0.2 - 1) / (2 * beta * s_t))
    mu_num, s_num = numerical_minimiser(mu_t, s_t, g, G, beta)
    mu_f, s_f = update_formula(mu_t, s_t, g, G, beta)
    np.testing.assert_allclose(mu_num, mu_f, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mu_num - mu_t, mu_f - mu_t, rtol=1e-6, atol=1e-9)  # the step itself
    np.testing.assert_allclose(s_num, s_f, rtol=1e-6)
    # the formula is at least as good as what the optimiser found
    f_formula = regularised_objective(mu_f, s_f, mu_t, s_t, g, G, beta)
    assert f_formula <= regularised_objective(mu_num, s_num, mu_t, s_t, g, G, beta) + 1e-12 * (1 + abs(f_formula))


def test_regularised_problem_check_detects_wrong_update():
    """A factor-2 error in the precision update (Sigma^-1 + beta G) is far outside the 1e-6 tolerance."""
    rng = np.random.default_rng(99)
    mu_t, s_t, g, G, beta = rng.standard_normal(3), np.array([0.5, 1.0, 2.0]), rng.standard_normal(3), \
        np.array([0.4, -0.2, 0.3]), 0.3
    _, s_num = numerical_minimiser(mu_t, s_t, g, G, beta)
    wrong = 1.0 / (1.0 / s_t + beta * G)
    assert np.max(np.abs(wrong / s_num - 1)) > 1e-2


# ----------------------------------------------------------------------------- (ii) through the optimizers
D, N = 4, 8
A = np.array([1.0, 0.5, 2.0, 0.8])
B = np.array([0.3, -1.0, 0.5, 0.2])


def objective(X):
    return np.sum(A * X * X + B * X, axis=1) + 0.3 * np.sin(X[:, 0] * X[:, 1])


def hand_gradients(X, mu, s, *, baseline, shaping):
    """(z, g, G) from the returned population, written out independently of sabo.estimators."""
    f = objective(X)
    if baseline == "center":
        np.testing.assert_array_equal(X[-1], mu)  # the centre point is the last row
        fx, f0 = f[:-1], f[-1]
        Xs = X[:-1]
    else:
        fx, Xs = f, X
        f0 = fx.mean()
    z = (Xs - mu) / np.sqrt(s)
    u = fx - f0
    if shaping == "zscore":
        u = u / fx.std(ddof=1)
    n = u.size
    g = np.sum(u[:, None] * z, axis=0) / n / np.sqrt(s)
    G = np.sum(u[:, None] * (z * z - 1), axis=0) / (2 * n * s)
    return f, z, u, g, G


@pytest.mark.parametrize("baseline, shaping", [("center", "none"), ("mean", "zscore")])
def test_ingo_update_equals_formula(baseline, shaping):
    beta = 0.05
    opt = INGO(np.array([0.5, -1.0, 0.3, 1.2]), sigma0=np.array([0.7, 1.0, 0.5, 1.2]), popsize=N, lr=beta,
               seed=3, baseline=baseline, shaping=shaping, precision_floor=1e-3)
    for _ in range(5):
        mu, s = opt.mean, opt.sigma2
        X = opt.ask()
        f, z, u, g, G = hand_gradients(X, mu, s, baseline=baseline, shaping=shaping)
        opt.tell(X, f)
        assert_took_update_step(opt, mu, s, g, G, beta)
        if shaping == "zscore":
            # FastINGO.m's form: w = u / N, mu -= beta sqrt(s) sum w z, 1/s *= 1 + beta sum w z^2
            w = u / u.size
            np.testing.assert_allclose(opt.mean, mu - beta * np.sqrt(s) * (w @ z), rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(1 / opt.sigma2, (1 + beta * (w @ (z * z))) / s, rtol=1e-10)
    assert opt.stats["safeguard_update"] == 0


@pytest.mark.parametrize("perturbation", ["closed_form", "exact"])
@pytest.mark.parametrize("baseline, shaping", [("center", "none"), ("mean", "zscore")])
def test_sabo_iteration_equals_formulas(perturbation, baseline, shaping):
    """Round 0: delta_t of eq. sec32_5; round 1: eq. 32_update with gradients at theta_t + delta_t,
    applied at Sigma_t."""
    beta, rho = 0.05, 0.2
    opt = SABO(np.array([0.5, -1.0, 0.3, 1.2]), sigma0=np.array([0.7, 1.0, 0.5, 1.2]), popsize=N, lr=beta,
               rho=rho, seed=4, baseline=baseline, shaping=shaping, perturbation=perturbation,
               precision_floor=1e-3)
    for _ in range(4):
        mu, s = opt.mean, opt.sigma2
        # perturbation round
        X = opt.ask()
        f, z, u, g1, G1 = hand_gradients(X, mu, s, baseline=baseline, shaping=shaping)
        opt.tell(X, f)
        mu_hat, s_hat = opt.perturbed_mean, opt.perturbed_sigma2
        if perturbation == "closed_form":
            lam = np.sqrt(np.sum((s * G1) ** 2) + 0.5 * np.sum(s * g1 * g1)) / rho
            np.testing.assert_allclose(mu_hat, mu + s * g1 / lam, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(s_hat, s + 2 * s * G1 / (lam / s - 2 * G1), rtol=1e-10)
        else:
            np.testing.assert_allclose(kl_diag_gaussians(mu_hat, s_hat, mu, s), rho**2, rtol=1e-9)
            # KKT form of eq. sec31_4 with one common lambda > 0
            lam_mu = s * g1 / (mu_hat - mu)
            lam_s = 2 * G1 / (1 / s - 1 / s_hat)
            np.testing.assert_allclose(np.r_[lam_mu, lam_s], lam_mu[0], rtol=1e-8)
            assert lam_mu[0] > 0
        np.testing.assert_allclose(opt.stats["perturbation_kl"], kl_diag_gaussians(mu_hat, s_hat, mu, s), rtol=1e-12)
        # update round, sampled at the perturbed distribution
        X = opt.ask()
        f, z, u, g, G = hand_gradients(X, mu_hat, s_hat, baseline=baseline, shaping=shaping)
        opt.tell(X, f)
        assert_took_update_step(opt, mu, s, g, G, beta)
        # Sigma_t, not the perturbed Sigma_hat, scales the step
        assert not np.allclose(opt.mean, mu - beta * s_hat * g, rtol=1e-6, atol=0)
    st = opt.stats
    assert st["safeguard_update"] == 0 and st["safeguard_perturbation"] == 0
    assert opt.nit == 4
