"""``sabo.minimize`` the scipy way: a per-point objective by default, ``args``, and ``bounds`` by reflection."""
import numpy as np
import pytest
from scipy.optimize import Bounds

import sabo
from replication.synthetic.functions import ellipsoid
from sabo.minimize import reflect


def test_a_per_point_objective_runs_as_its_vectorised_form():
    x0 = np.full(6, 0.7)
    calls = []

    def per_point(x, scale):
        calls.append(x.shape)
        return scale * ellipsoid(x)[0]

    res = sabo.minimize(per_point, x0, args=(2.0,), popsize=8, seed=3, max_iter=15)
    vec = sabo.minimize(lambda X, scale: scale * ellipsoid(X), x0, args=(2.0,), vectorized=True, popsize=8, seed=3,
                        max_iter=15)
    assert set(calls) == {(6,)} and len(calls) == res.nfev == vec.nfev == 15 * 2 * 8 + 1
    np.testing.assert_allclose(res.x, vec.x, rtol=1e-10)
    assert res.fun == pytest.approx(vec.fun, rel=1e-10) and res.nit == vec.nit == 15


def test_objective_form_errors_name_the_fix():
    with pytest.raises(ValueError, match=r"fun\(x\) returned shape \(2,\) for a point of shape \(2,\); with "
                                         r"vectorized=False fun takes one point"):
        sabo.minimize(lambda x: x**2, np.ones(2), popsize=4, seed=0, max_iter=1)
    with pytest.raises(ValueError, match="vectorized must be True or False"):
        sabo.minimize(lambda x: 0.0, np.ones(2), vectorized="yes", max_iter=1)
    with pytest.raises(ValueError, match=r"fun\(x\) must contain real numbers"):
        sabo.minimize(lambda x: "1.0", np.ones(2), popsize=4, seed=0, max_iter=1)


def test_reflect_folds_into_the_box():
    low, high = np.array([0.0, -np.inf, 1.0, -np.inf]), np.array([1.0, 2.0, np.inf, np.inf])
    X = np.array([[0.25, 1.5, 3.0, -7.0],    # inside: unchanged
                  [-0.25, 2.5, 0.5, 7.0],    # one mirror each
                  [2.25, 5.0, -2.0, 0.0],    # 2.25 -> 0.25 (period 2), 5 -> -1, -2 -> 4
                  [-1.75, 2.0, 1.0, 0.0]])   # -1.75 -> 0.25 (periodic both ways); on a bound: unchanged
    expected = np.array([[0.25, 1.5, 3.0, -7.0],
                         [0.25, 1.5, 1.5, 7.0],
                         [0.25, -1.0, 4.0, 0.0],
                         [0.25, 2.0, 1.0, 0.0]])
    np.testing.assert_allclose(reflect(X, low, high), expected, atol=1e-15)
    Y = np.random.default_rng(0).normal(0.0, 50.0, (1000, 4))
    folded = reflect(Y, low, high)
    assert np.all(folded >= low) and np.all(folded <= high)
    eps = 1e-7  # continuous: no jump at the bounds or at the fold points 2 low - high, 2 high - low
    for point in (0.0, 1.0, -1.0, 2.0):
        a, b = reflect(np.array([point - eps]), low[:1], high[:1]), reflect(np.array([point + eps]), low[:1], high[:1])
        assert abs(a[0] - b[0]) < 3 * eps


def test_the_objective_is_never_evaluated_outside_the_box():
    seen = []

    def far_optimum(x):  # unconstrained minimum at 2, outside [0, 1]^5
        seen.append(x.copy())
        return np.sum((x - 2.0) ** 2)

    res = sabo.minimize(far_optimum, np.full(5, 0.5), bounds=[(0.0, 1.0)] * 5, seed=0, max_iter=300)
    seen = np.array(seen)
    assert seen.min() >= 0.0 and seen.max() <= 1.0 and len(seen) == res.nfev
    assert np.all(res.x <= 1.0) and np.all(res.x > 0.999) and res.fun - 5.0 < 0.01  # F(x) on the box: 5 at (1, ..., 1)
    means = np.array([h["mean"] for h in res.history])
    assert means.min() >= 0.0 and means.max() <= 1.0 and np.all((res.x_best >= 0.0) & (res.x_best <= 1.0))


def test_interior_optimum_and_the_default_step_size_in_a_box():
    """docs/sabo/index.md, "Bounds": 5-d sphere centred at 0.3 in [0, 1]^5 from x0 = 0.5, 300 iterations, seed 0."""
    def fun(x):
        return np.sum((x - 0.3) ** 2)

    default = sabo.minimize(fun, np.full(5, 0.5), bounds=[(0.0, 1.0)] * 5, seed=0, max_iter=300)
    unit = sabo.minimize(fun, np.full(5, 0.5), bounds=[(0.0, 1.0)] * 5, seed=0, max_iter=300, sigma0=1.0)
    assert default.fun < 1e-6 and unit.fun > 0.1  # measured 1.0e-8 and 0.22
    one_sided = sabo.minimize(fun, np.full(5, 0.5), bounds=Bounds(0.4, np.inf), seed=0, max_iter=300, sigma0=0.2)
    assert np.all(one_sided.x >= 0.4) and np.allclose(one_sided.x, 0.4, atol=1e-2)  # the bound nearest 0.3


@pytest.mark.parametrize("bounds, message", [
    ([(0.0, 1.0)] * 4, r"bounds must be a sequence of d = 5 \(low, high\) pairs"),
    ([(0.0, 1.0, 2.0)] * 5, r"bounds must be a sequence of d = 5 \(low, high\) pairs"),
    ([(1.0, 0.0)] + [(0.0, 1.0)] * 4, r"bounds must have low < high in every coordinate; not at indices \[0\]"),
    ([(0.0, 1.0)] * 4 + [(0.6, 1.0)], r"x0 must lie within bounds; x0\[4\] = 0.5 is outside \[0.6, 1.0\]"),
    ([(np.nan, 1.0)] * 5, "bounds must be real numbers"),
    ([("0", 1.0)] * 5, r"bounds \(low\) must contain real numbers"),
    (Bounds([0.0, 0.0], [1.0, 1.0]), r"bounds.lb and bounds.ub must be scalars or have shape \(5,\)"),
])
def test_bad_bounds_are_refused_naming_the_problem(bounds, message):
    with pytest.raises(ValueError, match=message):
        sabo.minimize(lambda x: 0.0, np.full(5, 0.5), bounds=bounds, max_iter=1)


# ---------------------------------------------------------------------------- scipy's minimize(method=sabo.minimize)
def shifted_sphere(x):
    return float(np.sum((x - 0.5) ** 2))


def test_sabo_minimize_is_a_custom_method_of_scipys_minimize():
    """scipy passes jac, hess, hessp, bounds, constraints and callback to a custom method, options as keywords; the
    result is scipy's class and the same run as calling sabo.minimize directly."""
    import scipy.optimize

    res = scipy.optimize.minimize(shifted_sphere, np.zeros(3), method=sabo.minimize,
                                  options={"maxiter": 40, "popsize": 8, "seed": 1})
    direct = sabo.minimize(shifted_sphere, np.zeros(3), max_iter=40, popsize=8, seed=1)
    assert isinstance(res, scipy.optimize.OptimizeResult) and isinstance(res, sabo.OptimizeResult)
    assert np.array_equal(res.x, direct.x) and res.nit == 40 and res.nfev == 40 * 2 * 8 + 1
    assert (res.success, res.status, res.message) == (False, 2, "maximum number of iterations reached")
    default = scipy.optimize.minimize(shifted_sphere, np.zeros(3), method=sabo.minimize, options={"seed": 0})
    assert default.status == 1 and default.nfev <= sabo.minimize.__globals__["DEFAULT_EVALS_PER_DIM"] * 3
    assert default.message == "maximum number of function evaluations reached" and not default.success
    assert shifted_sphere(default.x) < 1e-3  # the default budget does solve it


def test_tol_stops_where_the_tolerances_first_hold():
    """``tol`` (scipy's, both tolerances): the run stops at the first iteration whose population's values span at most
    tol or whose population spans at most tol in every coordinate (``opt.stop``), reported as success."""
    import scipy.optimize

    tol = 1e-4
    res = scipy.optimize.minimize(shifted_sphere, np.zeros(3), method=sabo.minimize, tol=tol,
                                  options={"popsize": 8, "lr": 0.3, "seed": 2, "maxfev": 20_000})
    assert res.success and res.status == 0 and res.message.startswith("converged: the values span at most ftol = ")
    opt = sabo.SABO(np.zeros(3), popsize=8, lr=0.3, seed=2)
    F = lambda X: np.sum((X - 0.5) ** 2, axis=1)  # noqa: E731
    while not opt.stop(ftol=tol, xtol=tol):
        X = opt.ask()
        opt.tell(X, F(X))
        assert opt.nfev < 20_000
    assert opt.nit == res.nit and np.array_equal(opt.mean, res.x) and res.nfev == opt.nfev + 1 < 20_000
    ftol_only = sabo.minimize(shifted_sphere, np.zeros(3), ftol=tol, xtol=None, popsize=8, lr=0.3, seed=2)
    assert ftol_only.nit == res.nit  # the values' span decides on a sphere: the population is still wider than tol
    xtol_only = sabo.minimize(shifted_sphere, np.zeros(3), ftol=None, xtol=tol, popsize=8, lr=0.3, seed=2)
    assert xtol_only.nit > res.nit and xtol_only.message == f"converged: the population spans at most xtol = {tol:g}"


def test_args_is_a_tuple_and_anything_else_one_argument_as_in_scipy():
    import scipy.optimize

    def fun(x, target, offset=0.0):
        return float(np.sum((x - np.asarray(target)) ** 2)) + offset

    for method in ("Nelder-Mead", sabo.minimize):  # scipy's own method and SABO receive the same arguments
        listed = scipy.optimize.minimize(fun, np.zeros(2), args=[1.0, 2.0], method=method, options={"maxiter": 200})
        assert np.allclose(listed.x, [1.0, 2.0], atol=0.1)
        tupled = scipy.optimize.minimize(fun, np.zeros(2), args=([1.0, 2.0], 3.0), method=method,
                                         options={"maxiter": 200})
        assert tupled.fun == pytest.approx(3.0, abs=0.05)


def test_a_callback_stops_the_run_the_scipy_way():
    import scipy.optimize

    def stopping_at_5(calls):
        def callback(intermediate_result):
            assert isinstance(intermediate_result, scipy.optimize.OptimizeResult)
            assert intermediate_result.x.shape == (2,)
            calls.append(intermediate_result.x)
            if len(calls) == 5:
                raise StopIteration
        return callback

    for method in ("Nelder-Mead", sabo.minimize):
        calls = []
        res = scipy.optimize.minimize(shifted_sphere, np.zeros(2), method=method, callback=stopping_at_5(calls))
        assert len(calls) == 5 and not res.success and res.status == 99 and np.array_equal(res.x, calls[-1])
        assert res.nit == 5 or method == "Nelder-Mead"  # which counts the iteration it was stopped in
    seen = []
    res = scipy.optimize.minimize(shifted_sphere, np.full(2, 0.3), method=sabo.minimize, callback=seen.append,
                                  bounds=[(0.0, 0.4), (0.0, 0.4)], options={"maxiter": 30, "seed": 0})
    assert len(seen) == 30 and all(x.shape == (2,) and np.all((x >= 0.0) & (x <= 0.4)) for x in seen)  # in the box
    assert np.array_equal(seen[-1], res.x)


def test_derivatives_are_accepted_not_used_and_constraints_refused(capsys):
    import scipy.optimize

    def with_gradient(x):
        return shifted_sphere(x), 2.0 * (x - 0.5)

    with pytest.warns(RuntimeWarning, match=r"SABO does not use derivatives \(jac\)"):
        via_scipy = scipy.optimize.minimize(with_gradient, np.zeros(2), jac=True, method=sabo.minimize,
                                            options={"maxiter": 10, "seed": 0})
    with pytest.warns(RuntimeWarning, match=r"SABO does not use derivatives \(jac, hess\)"):
        direct = sabo.minimize(with_gradient, np.zeros(2), jac=True, hess=lambda x: np.eye(2), max_iter=10, seed=0,
                               disp=True)
    plain = sabo.minimize(shifted_sphere, np.zeros(2), max_iter=10, seed=0)
    assert np.array_equal(via_scipy.x, plain.x) and np.array_equal(direct.x, plain.x)
    assert capsys.readouterr().out.startswith("maximum number of iterations reached\n         Current function value:")
    with pytest.raises(ValueError, match="SABO handles bounds, not constraints"):
        scipy.optimize.minimize(shifted_sphere, np.zeros(2), method=sabo.minimize,
                                constraints=[{"type": "ineq", "fun": lambda x: x[0]}])


@pytest.mark.parametrize("bounds, message", [
    # the default sigma0 = 0.25 (high - low) = 5e299 squared to inf: every sample was NaN
    ([(-1e300, 1e300)] * 2, r"bounds are too wide for the default sigma0 = 0.25 \(high - low\) at indices \[0, 1\]"),
    # high - low overflowed: the fold's period was inf and reflect() gave NaN
    ([(-1e308, 1e308), (0.0, 1.0)], r"bounds must have a width high - low that is finite .* indices \[0\]"),
])
def test_bounds_too_wide_for_float64_are_refused_in_one_line(bounds, message):
    with pytest.raises(ValueError, match=message):
        sabo.minimize(lambda x: float(np.sum(x ** 2)), np.zeros(2), bounds=bounds, max_iter=3)


def test_a_wide_box_with_an_explicit_sigma0_stays_finite():
    res = sabo.minimize(lambda x: float(np.sum(x ** 2)), np.full(2, 0.5), bounds=[(-1e300, 1e300)] * 2, sigma0=1.0,
                        seed=0, max_iter=20)
    assert np.all(np.isfinite(res.x)) and np.isfinite(res.fun) and res.fun < 0.5
