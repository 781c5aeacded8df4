"""CMA-ES adapter: defaults, convergence, RNG isolation on pycma's own code paths, replay on restore
and option checks (the generic ask/tell contract: tests/test_protocol.py)."""
import copy

import cma
import numpy as np
import pytest
from helpers import benchmark_script, drive, sphere

from baselines.cmaes import CMAES, pycma_default_popsize
from replication.synthetic.functions import ellipsoid
from sabo.serialization import dumps, loads
from sabo.state import tree_equal


def global_state_equal(a, b):
    return a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2:] == b[2:]


def test_defaults_and_population_shape():
    opt = CMAES(np.arange(20.0), seed=0)
    assert opt.popsize == 12 == opt.evals_per_iteration == pycma_default_popsize(20)  # 4 + floor(3 ln 20)
    assert pycma_default_popsize(3) == 7  # not rounded up to even (INGO's rule)
    assert np.array_equal(opt.mean, np.arange(20.0)) and opt.sigma == 1.0
    X = opt.ask()
    assert X.shape == (12, 20) and X.dtype == np.float64
    opt.tell(X, sphere(X))
    assert opt.nit == 1 and opt.nfev == 12
    assert opt.stats["sigma"] == opt.sigma and opt.stats["stop"] == {}


@pytest.mark.parametrize("fun,budget", [(sphere, 4000), (ellipsoid, 6000)])
def test_20d_reaches_1e_minus_10_within_budget(fun, budget):
    """x0 ~ U[0, 1]^20, sigma0 = 0.5, lambda = 12: f < 1e-10 within 4000 evaluations on the
    sphere and 6000 on the ellipsoid (condition 1e4); with seed 0 pycma needs about 2900 and
    4300."""
    x0 = np.random.default_rng(0).uniform(0, 1, 20)
    opt = CMAES(x0, 0.5, seed=0)
    drive(opt, fun, budget // opt.popsize)
    assert opt.nfev <= budget
    assert opt.f_best < 1e-10
    assert fun(opt.mean)[0] < 1e-10


@pytest.mark.parametrize("d,popsize", [(2, 4), (300, 10)])  # popsize < 6: mirroring; d >= 300: TPA
def test_numpy_global_rng_is_never_touched(d, popsize):
    np.random.seed(12345)
    before = np.random.get_state()
    opt = CMAES(np.ones(d), np.linspace(0.5, 1.0, d), popsize=popsize, seed=0)
    drive(opt, ellipsoid, 10)
    opt.ask()
    state = opt.state_dict()
    restored = CMAES.from_state_dict(loads(dumps(state)))
    drive(restored, ellipsoid, 10)
    assert global_state_equal(np.random.get_state(), before)


def test_restore_links_pycmas_sampler_to_the_restored_generator():
    """Replay rebuilds pycma around the restored generator; saving leaves the live optimizer's links alone."""
    x0 = np.random.default_rng(2).uniform(0, 1, 10)
    opt = CMAES(x0, 0.5, seed=7)
    drive(opt, ellipsoid, 10)
    opt.ask()
    restored = CMAES.from_state_dict(loads(dumps(opt.state_dict())))
    assert opt._es.opts["randn"].rng is opt._rng and opt._es.sm.randn is opt._es.opts["randn"]
    assert restored._es.opts["randn"].rng is restored._rng and restored._es.sm.randn.rng is restored._rng
    drive(restored, ellipsoid, 5)
    drive(opt, ellipsoid, 5)
    assert np.array_equal(opt.mean, restored.mean) and opt.sigma == restored.sigma


def pycma_loop(*args, **kwargs):
    """pycma's own ask/tell loop, built from pycma's options alone (benchmarks/optimizer_overhead.py)."""
    return benchmark_script("optimizer_overhead").pycma_loop(*args, **kwargs)


@pytest.mark.parametrize("d,sigma0,popsize,options", [
    (2, 0.7, 4, None),                                   # popsize < 6: mirrored samples
    (10, np.linspace(0.2, 1.0, 10), None, None),         # per-coordinate sigma0: CMA_stds; pycma's default popsize
    (6, 0.5, 8, {"CMA_diagonal": True, "bounds": [[-0.5] * 6, None]}),  # options passed on: diagonal, bounds
    (300, 1.0, 10, None),                                # d >= 300: TPA, whose check draws from NumPy's global RNG
])
def test_the_adapter_is_pycmas_own_loop_bit_for_bit(d, sigma0, popsize, options):
    """Golden comparison: every population, mean, step size and termination dict of the adapter equals those of
    pycma driven directly with the same seed and options (ask, tell, stop), after every iteration. What the
    adapter adds (checks, bookkeeping, global-RNG protection, no copy of pycma's state) changes no number."""
    x0 = np.random.default_rng(1).uniform(0, 1, d)
    opt = CMAES(x0, sigma0, popsize=popsize, seed=11, options=options)
    es = pycma_loop(x0, sigma0, opt.popsize, 11, options)
    for _ in range(40 if d < 300 else 8):
        X, solutions = opt.ask(), es.ask()
        assert np.array_equal(X, np.array(solutions))
        values = ellipsoid(X)
        opt.tell(X, values)
        es.tell(solutions, values.tolist())
        assert np.array_equal(opt.mean, es.result.xfavorite) and opt.sigma == es.sigma
        assert opt.stats["stop"] == dict(es.stop())
    assert opt.nit == es.countiter and opt.nfev == es.countevals


def test_an_interrupted_run_resumes_to_the_record_of_pycmas_own_loop():
    """Resume equality against the reference: the optimizer saved mid-run (a pending ask included) and restored
    from its JSON state continues exactly as pycma's own uninterrupted loop."""
    x0 = np.random.default_rng(3).uniform(0, 1, 12)
    opt = CMAES(x0, 0.5, seed=4)
    es = pycma_loop(x0, 0.5, opt.popsize, 4)
    for step in range(30):
        if step == 17:
            opt.ask()
            opt = CMAES.from_state_dict(loads(dumps(opt.state_dict())))
        X, solutions = opt.ask(), es.ask()
        assert np.array_equal(X, np.array(solutions))
        opt.tell(X, ellipsoid(X))
        es.tell(solutions, ellipsoid(X).tolist())
        es.stop()
    assert np.array_equal(opt.mean, es.mean) and opt.sigma == es.sigma


def test_lazy_gap_factor_is_pycmas_loop_with_the_gap_stretched_and_survives_a_restore():
    """lazy_gap_factor = k is pycma's own loop with its sampler's lazy_update_gap times k, bit for bit, through a
    save and restore mid-run; at k = 2 the eigendecompositions (and so the populations) differ from k = 1's."""
    x0 = np.random.default_rng(5).uniform(0, 1, 40)
    opt = CMAES(x0, 0.5, seed=9, lazy_gap_factor=2.0)
    default = CMAES(x0, 0.5, seed=9)
    es = pycma_loop(x0, 0.5, opt.popsize, 9)
    es.sm.lazy_update_gap *= 2.0
    assert opt._es.sm.lazy_update_gap == es.sm.lazy_update_gap == 2 * default._es.sm.lazy_update_gap > 1
    differs = False
    for step in range(40):
        if step == 23:
            opt.ask()
            opt = CMAES.from_state_dict(loads(dumps(opt.state_dict())))
        X, solutions, Y = opt.ask(), es.ask(), default.ask()
        assert np.array_equal(X, np.array(solutions))
        differs |= not np.array_equal(X, Y)
        opt.tell(X, ellipsoid(X))
        default.tell(Y, ellipsoid(Y))
        es.tell(solutions, ellipsoid(X).tolist())
        es.stop()
    assert np.array_equal(opt.mean, es.mean) and opt.sigma == es.sigma and differs


@pytest.mark.parametrize("value,message", [(0, "must be > 0"), (-1.0, "must be > 0"),
                                           (float("nan"), "must be a finite"), (True, "must be a finite real number")])
def test_lazy_gap_factor_is_validated(value, message):
    with pytest.raises(ValueError, match=f"lazy_gap_factor {message}"):
        CMAES(np.zeros(5), lazy_gap_factor=value)
    with pytest.raises(ValueError, match="CMA_diagonal"):
        CMAES(np.zeros(5), options={"CMA_diagonal": True}, lazy_gap_factor=2.0)


class Interrupted(KeyboardInterrupt):
    pass


def fails_halfway(es, *args, **kwargs):
    """pycma's tell failing after it has changed its object and drawn from the optimizer's generator."""
    es.mean[:] = np.nan
    es.sigma = np.inf
    es.opts["randn"](3)
    raise RuntimeError("pycma failed")


def overflows(es, solutions, values, **kwargs):
    """pycma's tell completing with a non-finite step size (and a generator draw)."""
    TELL(es, solutions, values, **kwargs)
    es.opts["randn"](3)
    es.sigma = np.inf


def interrupted(es, *args, **kwargs):
    es.sigma = 0.0
    raise Interrupted()


TELL = cma.CMAEvolutionStrategy.tell


@pytest.mark.parametrize("failing,error,message", [
    (fails_halfway, RuntimeError, "pycma failed"),
    (overflows, FloatingPointError, "non-finite sigma"),
    (interrupted, Interrupted, None),
], ids=["exception", "non-finite", "keyboard-interrupt"])
def test_failed_update_leaves_the_optimizer_unchanged(monkeypatch, failing, error, message):
    """A tell that fails inside pycma (which updates in place) leaves the optimizer as before it: pycma's object,
    rebuilt by replay, has the mean, step size and generator of its twin that was never told the failing values,
    the pending population is still the one to tell, and the saved state is the twin's."""
    opt = CMAES(np.ones(5), seed=5)
    twin = CMAES(np.ones(5), seed=5)
    drive(opt, sphere, 3)
    drive(twin, sphere, 3)
    X = opt.ask()
    monkeypatch.setattr(cma.CMAEvolutionStrategy, "tell", failing)
    with pytest.raises(error, match=message):
        opt.tell(X, sphere(X))
    monkeypatch.setattr(cma.CMAEvolutionStrategy, "tell", TELL)
    Xt = twin.ask()
    assert tree_equal(opt.state_dict(), twin.state_dict())  # first: saving alone must rebuild the generator
    assert (np.array_equal(opt.mean, twin.mean) and opt.sigma == twin.sigma and opt.nit == 3
            and opt.nfev == 3 * opt.popsize)
    assert np.array_equal(opt.ask(), Xt)
    opt.tell(X, sphere(X))
    twin.tell(Xt, sphere(Xt))
    assert np.array_equal(opt.mean, twin.mean) and opt.sigma == twin.sigma
    assert np.array_equal(opt.ask(), twin.ask())


def test_a_tell_right_after_a_failed_one_rebuilds_pycma_first(monkeypatch):
    """The first use after a failure may be the next tell itself: it tells the rebuilt pycma object."""
    opt, twin = CMAES(np.ones(5), seed=7), CMAES(np.ones(5), seed=7)
    drive(opt, sphere, 2)
    drive(twin, sphere, 2)
    X = opt.ask()
    monkeypatch.setattr(cma.CMAEvolutionStrategy, "tell", fails_halfway)
    with pytest.raises(RuntimeError, match="pycma failed"):
        opt.tell(X, sphere(X))
    monkeypatch.setattr(cma.CMAEvolutionStrategy, "tell", TELL)
    opt.tell(X, sphere(X))
    Xt = twin.ask()
    twin.tell(Xt, sphere(Xt))
    assert tree_equal(opt.state_dict(), twin.state_dict())


def test_a_rebuild_that_does_not_reproduce_the_kept_state_is_refused(monkeypatch):
    """The replay after a failed tell is checked: kept values it does not reproduce raise, at every use."""
    opt = CMAES(np.ones(5), seed=6)
    drive(opt, sphere, 3)
    X = opt.ask()
    monkeypatch.setattr(cma.CMAEvolutionStrategy, "tell", fails_halfway)
    with pytest.raises(RuntimeError, match="pycma failed"):
        opt.tell(X, sphere(X))
    monkeypatch.setattr(cma.CMAEvolutionStrategy, "tell", TELL)
    opt._told[1] = opt._told[1][::-1].copy()  # another ranking: another mean
    for _ in range(2):
        with pytest.raises(RuntimeError, match=r"could not be rebuilt by replay \(mean, pending population differ\)"):
            opt.state_dict()


def test_deepcopy_of_the_optimizer_owns_its_generator():
    opt = CMAES(np.ones(5), seed=4)
    drive(opt, sphere, 3)
    twin = copy.deepcopy(opt)
    assert twin._es.opts["randn"].rng is twin._rng is not opt._rng
    drive(opt, sphere, 2)
    assert np.array_equal(twin.ask(), CMAES.from_state_dict(twin.state_dict()).ask())


def test_per_coordinate_sigma0_sets_the_initial_standard_deviations():
    sigma0 = np.array([0.01, 0.1, 1.0, 10.0])
    X = CMAES(np.zeros(4), sigma0, popsize=4000, seed=0).ask()
    assert np.allclose(X.std(axis=0), sigma0, rtol=0.05)


def test_options_are_forwarded_to_pycma():
    opt = CMAES(np.ones(6), seed=0, options={"CMA_diagonal": True, "tolx": 1e-3})
    assert opt._es.opts["CMA_diagonal"] is True and opt._es.opts["tolx"] == 1e-3


@pytest.mark.parametrize("key", ["seed", "Seed", "randn", "rand", "popsize", "CMA_stds", "verbose", "verb_log",
                                 "signals_filename", "CMA_mirrormethod", "AdaptSigma", "integer_variables",
                                 "CMA_sampler"])
def test_forbidden_options_raise_value_error(key):
    with pytest.raises(ValueError, match="options may not set"):
        CMAES(np.ones(3), seed=0, options={key: 1})


@pytest.mark.parametrize("options, message", [
    ({"CMA_elitist": "initial"}, r"^options: CMA_elitist='initial' cannot act under ask/tell: it needs f\(x0\)"),
    ({"eval_final_mean": False}, r"^options: 'eval_final_mean' cannot act under ask/tell: only cma.fmin"),
    ({"CMA_dampsvec_fade": 0.2}, r"^options: 'CMA_dampsvec_fade' cannot act under ask/tell: pycma does not read it"),
])
def test_options_that_cannot_act_under_ask_tell_are_refused(options, message):
    """pycma's own ask/tell loop takes them and ignores them: CMA_elitist='initial' only warns, and only where pycma
    may print (the negative control; the adapter silences pycma, so the option would vanish without a word)."""
    with pytest.raises(ValueError, match=message) as refused:
        CMAES(np.ones(3), seed=0, options=options)
    assert "\n" not in str(refused.value)
    es = cma.CMAEvolutionStrategy(np.ones(3), 1.0, {"CMA_elitist": "initial", "verbose": 0, "seed": 1})
    with pytest.warns(UserWarning, match="Set attribute `es.f0` to make initial elitism"):
        X = es.ask()
        es.tell(X, [float(np.sum(x**2)) for x in X])
    assert CMAES(np.ones(3), seed=0, options={"CMA_elitist": True})._es.opts["CMA_elitist"] is True


@pytest.mark.parametrize("value", [10, "100 * N / popsize**0.5"])
def test_diagonal_then_full_covariance_is_rejected(value):
    """pycma's diagonal-to-full switch builds a sampler on np.random.randn."""
    with pytest.raises(ValueError, match="CMA_diagonal"):
        CMAES(np.ones(3), seed=0, options={"CMA_diagonal": value})


@pytest.mark.parametrize("options", [{"no_such_option": 1}, {"CMA_m": 1}, [("tolx", 1e-3)]])
def test_unknown_or_malformed_options_raise_value_error(options):
    with pytest.raises(ValueError, match="options"):
        CMAES(np.ones(3), seed=0, options=options)


def test_pycma_version_supports_the_isolation_options():
    """``seed = nan`` (leave the global RNG alone) and a callable ``randn`` are pycma >= 3 features."""
    assert int(cma.__version__.split(".")[0]) >= 3


def test_the_overhead_benchmark_times_the_adapter_against_pycmas_loop(capsys):
    """``optimizer_overhead.py --pycma`` runs (a few lockstep iterations here) and checks the two loops agree."""
    benchmark_script("optimizer_overhead").main(["--pycma", "--dims", "3", "300", "--seconds", "0"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(r[0], r[1]) for r in rows] == [("3", "7"), ("300", "21")]  # pycma's default N = 4 + floor(3 ln d)
    assert all(int(r[2]) >= 3 and r[5].endswith("%") for r in rows)
