"""Library edge cases: z-scores at extreme magnitudes, real input of any numeric type, objectives
that modify their input, the largest population sizes. (Non-real input and absurd population
sizes are part of every optimizer's contract: tests/test_protocol.py.)"""
import warnings
from fractions import Fraction

import numpy as np
import pytest
from helpers import sphere

import baselines
import sabo
from baselines import INGO, MMES
from sabo.estimators import shaped_utilities, utilities
from sabo.protocol import MAX_POPSIZE


# ---------------------------------------------------------------------------- z-scores
def exact_zscores(f, centre=None):
    """Reference: z-scores in exact rational arithmetic, rounded once at the end."""
    q = [Fraction(float(v)) for v in f]
    mean = sum(q) / len(q)
    var = sum((v - mean) ** 2 for v in q) / (len(q) - 1)
    b = mean if centre is None else Fraction(float(centre))
    return np.array([((v > b) - (v < b)) * np.sqrt(float((v - b) ** 2 / var)) for v in q])


@pytest.mark.parametrize("values", [
    1e160 * (1 + 1e-3 * np.random.default_rng(0).standard_normal(12)),
    np.logspace(155, 160, 9),
    -np.logspace(155, 160, 9),
    np.array([1.7e308, -1.7e308, 1.7e308, 0.0]),        # the plain mean and variance overflow
    1e-160 * (1 + np.random.default_rng(1).standard_normal(10)),  # the plain variance is subnormal
])
@pytest.mark.parametrize("baseline", ["mean", "center"])
def test_zscores_are_exact_at_extreme_magnitudes(values, baseline):
    centre = None if baseline == "mean" else float(np.median(values))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or underflow on the way
        u, fell_back = shaped_utilities(values, centre, baseline=baseline, shaping="zscore")
    assert not fell_back and np.any(u != 0)
    np.testing.assert_allclose(u, exact_zscores(values, centre), rtol=1e-12, atol=1e-12)


def test_zscores_equal_the_plain_formula_bit_for_bit_at_ordinary_magnitudes():
    rng = np.random.default_rng(5)
    for _ in range(200):
        f = (rng.standard_normal(rng.integers(2, 40)) + rng.uniform(-3, 3)) * 10.0 ** rng.uniform(-150, 150)
        np.testing.assert_array_equal(utilities(f, None, baseline="mean", shaping="zscore"),
                                      (f - f.mean()) / f.std(ddof=1))


def test_zscores_fall_back_to_ranks_when_no_finite_zscores_exist():
    f = np.array([1e-300, 3e-300, 2e-300])
    u, fell_back = shaped_utilities(f, 1e300, baseline="center", shaping="zscore")  # (f - c)/s overflows
    assert fell_back
    np.testing.assert_array_equal(u, utilities(f, 1e300, baseline="center", shaping="rank"))
    u, fell_back = shaped_utilities(np.array([1.0, np.inf, 2.0]), None, baseline="mean", shaping="zscore")
    assert fell_back and np.all(np.isfinite(u)) and np.argmax(u) == 1

    opt = INGO(np.zeros(3), popsize=4, baseline="center", seed=0)
    X = opt.ask()
    opt.tell(X, np.array([1e-300, 4e-300, 2e-300, 3e-300, 1e300]))  # centre (last row) far above
    assert opt.stats["zscore_rank_fallback"] == 1 and opt.stats["flat_populations"] == 0
    assert not np.array_equal(opt.mean, np.zeros(3))


@pytest.mark.parametrize("name", ["sabo", "ingo"])
@pytest.mark.parametrize("scale", [1e160, 2.0**530, 1e-160])
def test_zscore_optimizers_are_invariant_to_the_scale_of_the_objective(name, scale):
    """Values near 1e160 used to overflow the variance: all-zero utilities and a frozen optimizer."""
    ref = baselines.make(name, x0=np.linspace(-1, 1, 8), popsize=10, seed=1)
    big = baselines.make(name, x0=np.linspace(-1, 1, 8), popsize=10, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning is the failure this test looks for
        warnings.simplefilter("ignore", sabo.SettingsWarning)  # advice on rho, not numerics
        for _ in range(200):
            X, Y = ref.ask(), big.ask()
            ref.tell(X, sphere(X))
            big.tell(Y, scale * sphere(Y))
    assert big.stats["flat_populations"] == 0 and big.stats["zscore_rank_fallback"] == 0
    assert np.linalg.norm(big.mean) < 0.6 * np.linalg.norm(np.linspace(-1, 1, 8))  # it made progress
    if scale == 2.0**530:  # a power of two scales exactly: same bits
        np.testing.assert_array_equal(big.mean, ref.mean)
    else:  # only the rounding of scale * sphere differs
        np.testing.assert_allclose(big.mean, ref.mean, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------- real input of any type
def test_real_numbers_of_any_numeric_type_are_accepted():
    a = sabo.SABO([Fraction(1, 2), 1, np.float32(2.0)], sigma0=[1, Fraction(1, 4), 2.0], seed=0)
    np.testing.assert_array_equal(a.mean, [0.5, 1.0, 2.0])
    X = a.ask()
    a.tell(X, np.arange(X.shape[0], dtype=np.int32))
    assert a.nfev == X.shape[0]


# ---------------------------------------------------------------------------- in-place objectives
def test_minimize_explains_an_objective_that_modifies_its_input():
    def clipping(X):
        np.clip(X, -0.5, 0.5, out=X)  # the user's bug: changes the population it was given
        return sphere(X)

    with pytest.raises(ValueError, match="fun modified its input array X in place"):
        sabo.minimize(clipping, np.ones(4), vectorized=True, popsize=6, seed=0, max_iter=3)
    res = sabo.minimize(lambda X: clipping(X.copy()), np.ones(4), vectorized=True, popsize=6, seed=0, max_iter=3)
    assert res.nit == 3


def test_run_detects_in_place_changes_for_every_optimizer():
    for name in baselines.REGISTRY:
        opt = baselines.make(name, x0=np.ones(4), seed=0)

        def shifting(X):
            X[0, 0] += 1.0
            return sphere(X)

        with pytest.raises(ValueError, match="modified its input array X in place"):
            sabo.run(opt, shifting, max_iter=2)
        assert opt.nfev == 0  # nothing was told


# ---------------------------------------------------------------------------- largest popsize
def test_largest_popsize_is_accepted():
    opt = baselines.make("bes", x0=np.ones(2), popsize=MAX_POPSIZE, seed=0)
    assert opt.ask().shape == (MAX_POPSIZE + 1, 2)


def test_mmes_restarts_stop_doubling_at_the_popsize_limit():
    n = 2**19  # doubling gives 2**20 > MAX_POPSIZE
    opt = MMES(np.zeros(2), popsize=n, seed=0, restarts=True)
    while opt.stats["restarts"] == 0:
        X = opt.ask()
        opt.tell(X, np.zeros(len(X)))  # flat: no improvement, so the run restarts
    assert opt.popsize == n and opt.ask().shape == (n + 1, 2)  # the new run's first ask evaluates x0 too
