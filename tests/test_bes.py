"""BES: population layout, the gradient estimate and convergence (the generic ask/tell contract,
save/restore and bad input: tests/test_protocol.py)."""

import numpy as np
from helpers import drive, sphere

from baselines.bes import BES
from replication.synthetic.functions import ellipsoid
from sabo import InvSqrt
from sabo.gaussian_search import ingo_default_popsize


def test_ask_returns_n_plus_one_rows_with_centre_last():
    d, n, c = 5, 6, 0.25
    opt = BES(np.arange(d, dtype=float), popsize=n, spacing=c, seed=0)
    X = opt.ask()
    assert X.shape == (n + 1, d) and X.dtype == np.float64
    assert np.array_equal(X[-1], opt.mean)
    eps = (X[:-1] - X[-1]) / c
    assert np.array_equal(np.abs(eps), np.ones((n, d)))
    opt.tell(X, sphere(X))
    assert opt.nit == 1 and opt.nfev == n + 1 == opt.evals_per_iteration


def test_default_popsize_is_ingos_even_rule():
    assert BES(np.zeros(20), seed=0).popsize == ingo_default_popsize(20) == 12


def test_gradient_estimate_on_a_linear_function_is_exact():
    """For F(x) = a.x every forward difference is exact: g = mean_i (a.eps_i) eps_i.

    Integer x0 and a, c = 1/2, N = 8 and lr = 1 keep every quantity a dyadic rational, so
    floating point reproduces the formula bit for bit.
    """
    d, n, c = 6, 8, 0.5
    a = np.array([3.0, -1.0, 4.0, 1.0, -5.0, 9.0])
    x0 = np.array([2.0, -7.0, 1.0, 8.0, 2.0, -8.0])
    opt = BES(x0, popsize=n, lr=1.0, spacing=c, seed=4)
    X = opt.ask()
    f = X @ a
    opt.tell(X, f)
    g = x0 - opt.mean
    eps = (X[:n] - X[n]) / c
    assert np.array_equal(g, np.mean((eps @ a)[:, None] * eps, axis=0))
    # the paper's estimator, transcribed term by term
    transcribed = np.zeros(d)
    for i in range(n):
        transcribed += (f[i] - f[n]) * eps[i]
    assert np.array_equal(g, transcribed / (c * n))
    assert opt.stats["lr"] == 1.0


def test_lr_schedule_is_called_with_the_iteration_index():
    opt = BES(np.ones(4), lr=InvSqrt(0.5), spacing=0.1, seed=1)
    drive(opt, sphere, 4)
    assert opt.stats["lr"] == InvSqrt(0.5)(3)


def test_sphere_20d_reaches_the_noise_floor():
    """lr = 0.05, c = 0.01, N = 12: 200 iterations (2600 evaluations) take ||x|| from 2.7 to < 0.06.

    With a fixed spacing the c^2 d term of each difference does not vanish at the optimum and
    x settles at ||x|| ~ c d sqrt(lr d / (4 N (1 - lr))) ~ 0.03.
    """
    x0 = np.random.default_rng(0).uniform(0, 1, 20)
    opt = BES(x0, lr=0.05, spacing=0.01, seed=0)
    drive(opt, sphere, 200)
    assert opt.nfev == 2600
    assert np.linalg.norm(opt.mean) < 0.06


def test_ellipsoid_20d_reaches_stated_precision():
    """lr = 0.004 (stable for the largest weight 100 needs lr < 0.01), c = 0.01, N = 12:
    800 iterations (10400 evaluations) take F from 136 to < 0.2 and ||x|| to < 0.2."""
    x0 = np.random.default_rng(0).uniform(0, 1, 20)
    opt = BES(x0, lr=0.004, spacing=0.01, seed=0)
    drive(opt, ellipsoid, 800)
    assert opt.nfev == 10400
    assert ellipsoid(opt.mean)[0] < 0.2
    assert np.linalg.norm(opt.mean) < 0.2
