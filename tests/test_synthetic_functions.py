"""The four test functions of the paper's appendix (eqs. test_1-test_4)."""
import math

import numpy as np
import pytest

from replication.synthetic.functions import FUNCTIONS, different_powers, ellipsoid, l12_ellipsoid, levy


def ellipsoid_ref(x):
    d = len(x)
    return sum(10 ** (2 * i / (d - 1)) * x[i] ** 2 for i in range(d))


def l12_ref(x):
    d = len(x)
    return sum(10 ** (2 * i / (d - 1)) * abs(x[i]) ** 0.5 for i in range(d))


def different_powers_ref(x):
    d = len(x)
    return math.sqrt(sum(abs(x[i]) ** (2 + 4 * i / (d - 1)) for i in range(d)))


def levy_ref(x):
    w = [1 + (xi - 1) / 4 for xi in x]
    d = len(x)
    total = math.sin(math.pi * w[0]) ** 2
    for i in range(d - 1):
        total += (w[i] - 1) ** 2 * (1 + 10 * math.sin(w[i] * math.pi + 1) ** 2)
    return total + (w[-1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[-1]) ** 2)


@pytest.mark.parametrize("fun,ref", [(ellipsoid, ellipsoid_ref), (l12_ellipsoid, l12_ref),
                                     (different_powers, different_powers_ref), (levy, levy_ref)])
def test_vectorised_equals_scalar_transcription(fun, ref):
    X = np.random.default_rng(0).normal(size=(7, 13)) * 2
    expected = np.array([ref(list(x)) for x in X])
    assert np.allclose(fun(X), expected, rtol=1e-12, atol=1e-12)
    assert fun(X[0]).shape == (1,)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_optimum_has_value_zero_and_is_a_minimum(name):
    fun, x_star = FUNCTIONS[name]
    d = 20
    star = np.full(d, x_star)
    assert fun(star)[0] == pytest.approx(0.0, abs=1e-12)
    around = star + 1e-3 * np.random.default_rng(1).normal(size=(50, d))
    assert np.all(fun(around) > fun(star)[0])


def test_ellipsoid_conditioning_is_1e2_across_coordinates():
    d = 5
    e = np.eye(d)
    values = ellipsoid(e)
    assert values[0] == pytest.approx(1.0) and values[-1] == pytest.approx(100.0)
