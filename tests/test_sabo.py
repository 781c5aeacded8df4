"""SABO's two-round ask/tell behaviour, consistency with INGO, convergence and schedules (the generic
ask/tell contract, save/restore and bad input: tests/test_protocol.py)."""

import warnings

import numpy as np
import pytest
from helpers import drive, sphere

import sabo
from replication.synthetic.functions import ellipsoid
from sabo import SABO, InvSqrt


@pytest.mark.parametrize("baseline,rows", [("mean", 8), ("center", 9)])
def test_ask_returns_population_with_centre_last(baseline, rows):
    opt = SABO(np.arange(5.0), popsize=8, seed=0, baseline=baseline)
    X0 = opt.ask()
    assert X0.shape == (rows, 5) and X0.dtype == np.float64
    if baseline == "center":
        assert np.array_equal(X0[-1], opt.mean)
    opt.tell(X0, sphere(X0))
    assert opt.phase == 1 and opt.nit == 0
    X1 = opt.ask()
    if baseline == "center":
        assert np.array_equal(X1[-1], opt.perturbed_mean)
    assert not np.array_equal(opt.perturbed_mean, opt.mean)
    opt.tell(X1, sphere(X1))
    assert opt.phase == 0 and opt.nit == 1 and opt.nfev == 2 * rows == opt.evals_per_iteration


def test_rho_to_zero_update_equals_fastingo_transcription():
    """With rho -> 0 the perturbation vanishes and the update round is FastINGO's update."""
    d, n, beta = 6, 12, 0.3
    opt = SABO(np.linspace(-1, 1, d), sigma0=np.linspace(0.5, 1.5, d), popsize=n, lr=beta, rho=1e-12, seed=3)
    mu0, s0 = opt.mean, opt.sigma2
    X = opt.ask()
    opt.tell(X, ellipsoid(X))
    assert np.allclose(opt.perturbed_mean, mu0, rtol=0, atol=1e-11)
    assert np.allclose(opt.perturbed_sigma2, s0, rtol=1e-11)
    X = opt.ask()
    f = ellipsoid(X)
    opt.tell(X, f)
    # FastINGO.m, transcribed: s = (f - mean f)/std f/N; mu -= beta sqrt(S) sum s z; S^-1 *= 1 + beta sum s z^2
    z = (X - mu0) / np.sqrt(s0)
    s = (f - f.mean()) / f.std(ddof=1) / n
    mu_ref = mu0 - beta * np.sqrt(s0) * (s @ z)
    prec_ref = (1.0 / s0) * (1.0 + beta * (s @ z**2))
    assert np.allclose(opt.mean, mu_ref, rtol=1e-9, atol=1e-12)
    assert np.allclose(1.0 / opt.sigma2, prec_ref, rtol=1e-9)


def test_rho_to_zero_matches_ingo_on_the_same_samples():
    from baselines.ingo import INGO

    d, n = 10, 16
    x0 = np.random.default_rng(5).uniform(0, 1, d)
    s = SABO(x0, popsize=n, lr=0.2, rho=1e-12, seed=11)
    i = INGO(x0, popsize=n, lr=0.2, seed=99)
    for _ in range(5):
        X = s.ask()
        s.tell(X, ellipsoid(X))
        i._rng.bit_generator.state = s._rng.bit_generator.state  # INGO draws SABO's update-round z
        Xs, Xi = s.ask(), i.ask()
        assert np.allclose(Xs, Xi, rtol=1e-10, atol=1e-10)
        s.tell(Xs, ellipsoid(Xs))
        i.tell(Xi, ellipsoid(Xi))
        assert np.allclose(s.mean, i.mean, rtol=1e-8, atol=1e-10)
        assert np.allclose(s.sigma2, i.sigma2, rtol=1e-8)


def test_minimize_equals_ask_tell_loop():
    x0 = np.full(8, 0.7)
    res = sabo.minimize(ellipsoid, x0, vectorized=True, popsize=10, lr=0.1, rho=0.3, seed=4, max_iter=25)
    opt = SABO(x0, popsize=10, lr=0.1, rho=0.3, seed=4)
    while opt.nit < 25:
        X = opt.ask()
        opt.tell(X, ellipsoid(X))
    assert np.array_equal(res.x, opt.mean)
    assert res.nit == 25 and res.nfev == opt.nfev + 1 == 25 * 20 + 1
    assert res.fun == ellipsoid(opt.mean)[0]
    assert len(res.history) == 25 and np.array_equal(res.history[-1]["mean"], opt.mean)
    assert res.fun_best == opt.f_best and np.array_equal(res.x_best, opt.x_best)


def test_minimize_budget_and_callback():
    res = sabo.minimize(sphere, np.ones(4), vectorized=True, popsize=6, seed=0, max_nfev=100)
    assert res.status == 1 and res.nfev <= 100 and res.nfev + 6 + 1 > 100
    res = sabo.minimize(sphere, np.ones(4), vectorized=True, popsize=6, seed=0, max_iter=50,
                        callback=lambda intermediate_result: intermediate_result.nit >= 3)
    assert res.status == 99 and res.nit == 3 and not res.success


def test_convergence_smoke_ellipsoid_50d():
    """Budget: 1000 iterations = 100,000 evaluations (N = 50); observed reduction 1.6e4 with seed 0."""
    x0 = np.random.default_rng(0).uniform(0, 1, 50)
    res = sabo.minimize(ellipsoid, x0, vectorized=True, popsize=50, lr=0.1, rho=0.5, seed=0, max_iter=1000,
                        record_mean=False)
    assert np.linalg.norm(x0) / np.linalg.norm(res.x) >= 1e3


def test_exact_perturbation_hits_the_kl_radius():
    opt = SABO(np.full(20, 0.5), popsize=20, rho=0.7, seed=2, perturbation="exact")
    X = opt.ask()
    opt.tell(X, ellipsoid(X))
    assert opt.stats["safeguard_perturbation"] == 0
    assert opt.stats["perturbation_kl"] == pytest.approx(0.49, rel=1e-9)


def test_rho_schedules_are_applied_per_iteration():
    horizon = SABO(np.ones(3), popsize=4, rho=InvSqrt(10.0, horizon=99), seed=0)
    decaying = SABO(np.ones(3), popsize=4, rho=InvSqrt(10.0), seed=0)
    for opt in (horizon, decaying):
        drive(opt, sphere, 2 * 3 + 1)
    assert horizon.stats["rho"] == pytest.approx(1.0)
    assert decaying.stats["rho"] == pytest.approx(10.0 / 2.0)  # t = 3


def test_minibatch_contract_one_fresh_batch_per_ask():
    """Algorithm 2: least squares on data, a fresh batch per call of fun (= per ask)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((2000, 5))
    w_true = np.arange(1.0, 6.0)
    y = A @ w_true + 0.1 * rng.standard_normal(2000)
    batches = np.random.default_rng(1)
    calls = []

    def batch_loss(W):
        idx = batches.choice(2000, size=64, replace=False)
        calls.append(W.shape[0])
        return np.mean((W @ A[idx].T - y[idx]) ** 2, axis=1)

    res = sabo.minimize(batch_loss, np.zeros(5), vectorized=True, popsize=20, lr=0.2, rho=0.2, seed=0,
                        baseline="center", max_iter=400, record_mean=False)
    assert calls[:-1] == [21] * (2 * 400) and calls[-1] == 1
    assert np.linalg.norm(res.x - w_true) < 0.1 * np.linalg.norm(w_true)


def test_schedule_mappings_as_in_config_files():
    from sabo.schedules import as_schedule

    assert as_schedule("rho", {"kind": "inv_sqrt", "scale": 100, "horizon": 3}) == InvSqrt(100, horizon=3)
    assert as_schedule("lr", {"kind": "constant", "value": 0.5})(7) == 0.5
    with pytest.raises(ValueError, match="rho schedule kind must be one of"):
        as_schedule("rho", {"kind": "cosine"})
    with pytest.raises(ValueError, match="invalid fields for schedule 'inv_sqrt'"):
        as_schedule("rho", {"kind": "inv_sqrt", "c": 1})


def _run(opt, iterations, fun=ellipsoid):
    while opt.nit < iterations:
        X = opt.ask()
        opt.tell(X, fun(X))
    return opt


def test_inverse_reading_is_the_paper_reading_at_one_over_rho():
    """rho_reading="inverse" with rho is eq. (sec31_5) with radius 1/rho: identical trajectories."""
    x0, kw = np.linspace(-1, 1, 8), {"popsize": 10, "lr": 0.2, "seed": 5}
    inverse = _run(SABO(x0, rho=4.0, rho_reading="inverse", **kw), 15)
    paper = _run(SABO(x0, rho=0.25, **kw), 15)
    assert np.array_equal(inverse.mean, paper.mean) and np.array_equal(inverse.sigma2, paper.sigma2)
    assert inverse.stats["kl_radius"] == 0.25 and inverse.stats["rho"] == 4.0
    with pytest.raises(ValueError, match="rho_reading"):
        SABO(x0, rho_reading="inverted")


@pytest.mark.parametrize("reading,rho", [("paper", 0.3), ("inverse", 5.0)])
def test_perturbation_size_statistics(reading, rho):
    """stats["perturbation_mahalanobis"] is ||Sigma^{-1/2} delta_mu|| of the round just told; the closed
    form bounds it by sqrt(2) radius; the sum over iterations is kept for the mean."""
    opt = SABO(np.full(6, 2.0), sigma0=np.linspace(0.5, 1.0, 6), popsize=12, rho=rho, rho_reading=reading, seed=1)
    total = 0.0
    for _ in range(5):
        X = opt.ask()
        opt.tell(X, ellipsoid(X))
        moved = np.sqrt(np.sum((opt.perturbed_mean - opt.mean) ** 2 / opt.sigma2))
        assert opt.stats["perturbation_mahalanobis"] == pytest.approx(moved, rel=1e-12)
        assert 0.0 < moved <= np.sqrt(2.0) * opt.stats["kl_radius"] * (1 + 1e-12)
        total += moved
        X = opt.ask()
        opt.tell(X, ellipsoid(X))
    assert opt.stats["perturbation_mahalanobis_sum"] == pytest.approx(total, rel=1e-12)


def test_radius_outside_the_theorems_warns_once():
    """The theorems assume rho < sqrt(d)/2 (= 2 at d = 16): 2 warns (once), 1.9 does not."""
    x0 = np.zeros(16)
    with pytest.warns(sabo.SettingsWarning, match=r"sqrt\(d\)/2 = 2") as caught:
        _run(SABO(x0, rho=2.0, popsize=8, seed=0, precision_floor=1e-9), 3, fun=sphere)
    assert sum("sqrt(d)/2" in str(w.message) for w in caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", sabo.SettingsWarning)
        _run(SABO(x0, rho=1.9, popsize=8, seed=0, precision_floor=1e-9), 3, fun=sphere)


def test_frequent_safeguard_warns_and_an_error_filter_leaves_a_consistent_optimizer():
    """rho = 1 on a 10-d sphere (the library's old default) clamps in most perturbation rounds; rho = 0.01
    never does. A filter that turns the warning into an error raises after the state is committed."""
    small = _run(SABO(np.ones(10), rho=0.01, seed=0), 40, fun=sphere)
    assert small.stats["safeguard_perturbation"] == 0
    opt = SABO(np.ones(10), rho=1.0, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sabo.SettingsWarning)
        with pytest.raises(sabo.SettingsWarning, match="safeguard acted in"):
            _run(opt, 40, fun=sphere)
    assert opt.phase == 1 and opt.nit >= sabo.sabo.SAFEGUARD_WARN_AFTER - 1
    assert opt.stats["safeguard_perturbation"] > sabo.sabo.SAFEGUARD_WARN_SHARE * (opt.nit + 1)
    X = opt.ask()  # the told round stands: the update round follows
    opt.tell(X, sphere(X))
    assert opt.phase == 0


def test_default_rho_is_the_sqrt_d_rule_and_keeps_pace_with_ingo_on_a_10d_sphere():
    """The library default (rho = 0.05 sqrt(d), docs/sabo/choosing-rho.md): on the issue's 10-d sphere with the
    default popsize the safeguard never fires and SABO keeps >= 85% of INGO's progress per iteration
    (the sensitivity study measured 0.98 here; the old default rho = 1 kept 0.34 with the safeguard in
    68% of iterations). Median over 3 seeds; the seeds' spread in progress share was 0.02."""
    assert SABO(np.zeros(400))._rho(0) == pytest.approx(0.05 * 20.0)
    shares, clamps = [], []
    for seed in range(3):
        x0 = np.random.default_rng(seed).uniform(0, 1, 10)
        f0 = sphere(x0[None])[0]
        s = _run(SABO(x0, seed=seed), 150, fun=sphere)
        i = _run(sabo_ingo(x0, seed), 150, fun=sphere)
        shares.append(np.log10(sphere(s.mean[None])[0] / f0) / np.log10(sphere(i.mean[None])[0] / f0))
        clamps.append(s.stats["safeguard_perturbation"])
    assert clamps == [0, 0, 0] and np.median(shares) >= 0.85, (shares, clamps)


def sabo_ingo(x0, seed):
    import baselines

    return baselines.make("ingo", x0=x0, seed=seed)
