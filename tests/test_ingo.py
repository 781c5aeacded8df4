"""INGO: the reference update, convergence, and its place in the shared protocol."""
import numpy as np
import pytest

from baselines import INGO
from replication.synthetic.functions import ellipsoid


def fastingo_step(mu, sigma2, z, f, beta):
    """FastINGO.m's diagonal update, transcribed from the formulas in references.md."""
    s = (f - np.mean(f)) / np.std(f, ddof=1) / len(f)
    mu_new = mu - beta * np.sqrt(sigma2) * (s @ z)
    precision = (1.0 / sigma2) * (1.0 + beta * (s @ z**2))
    return mu_new, 1.0 / precision


def test_update_matches_reference_transcription_over_many_steps():
    d, n, beta = 15, 20, 0.3
    opt = INGO(np.random.default_rng(0).uniform(0, 1, d), sigma0=0.5, popsize=n, lr=beta, seed=7)
    for _ in range(30):
        mu, sigma2 = opt.mean, opt.sigma2
        X = opt.ask()
        f = ellipsoid(X)
        z = (X - mu) / np.sqrt(sigma2)
        mu_ref, sigma2_ref = fastingo_step(mu, sigma2, z, f, beta)
        opt.tell(X, f)
        assert np.allclose(opt.mean, mu_ref, rtol=1e-10, atol=1e-13)
        assert np.allclose(opt.sigma2, sigma2_ref, rtol=1e-10)
    assert opt.nit == 30 and opt.nfev == 30 * n
    assert opt.stats["safeguard_update"] == 0


@pytest.mark.parametrize("fun,target", [(lambda X: np.sum(X**2, axis=1), 1e-6), (ellipsoid, 1e-6)])
def test_converges_on_sphere_and_ellipsoid_30d(fun, target):
    """Budget: 1500 iterations x N = 30 = 45,000 evaluations, paper's beta = 0.1, Sigma0 = I."""
    x0 = np.random.default_rng(1).uniform(0, 1, 30)
    opt = INGO(x0, sigma0=1.0, popsize=30, lr=0.1, seed=1)
    while opt.nit < 1500:
        X = opt.ask()
        opt.tell(X, fun(X))
    assert np.linalg.norm(opt.mean) < target


def test_centre_baseline_adds_one_row():
    opt = INGO(np.zeros(4), popsize=6, seed=0, baseline="center", shaping="none")
    X = opt.ask()
    assert X.shape == (7, 4) and np.array_equal(X[-1], opt.mean) and opt.evals_per_iteration == 7
