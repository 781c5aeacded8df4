"""The ask/tell contract, checked for every optimizer in ``baselines.REGISTRY`` (the Nevergrad /
evosax pattern: one set of checks, parametrised over the registry).

Each ``check_*`` function takes a registry name and checks one part of the contract that
``sabo.protocol.AskTellOptimizer`` promises; :data:`CHECKS` lists them. They build optimizers
with :func:`build` (``PARAMS`` gives the registered methods a configuration that exercises
non-default options; a method not listed there runs with its constructor's defaults), so an
optimizer added with ``baselines.register`` goes through the same checks, unchanged
(``tests/test_extending.py`` does that with one defined at test time). Optimizer-specific
behaviour stays in each optimizer's own test file; ``tests/test_state.py`` keeps the
optimizer-specific hostile states.
"""
import importlib.util
import time
import warnings

import numpy as np
import pytest

import baselines
import sabo
from replication.synthetic.functions import ellipsoid
from sabo.protocol import (
    MAX_POPSIZE,
    MAX_POPULATION_ELEMENTS,
    OPTIMIZERS,
    STATE_FORMAT,
    AskTellOptimizer,
    NonFiniteValueError,
)
from sabo.serialization import dumps, loads
from sabo.state import check_tree, to_data, tree_equal

if importlib.util.find_spec("torch") is not None:
    # GIBO's small tensors: on a loaded machine a second torch thread made its checks 5-10x slower
    pytestmark = pytest.mark.usefixtures("one_torch_thread")

D = 6
PARAMS = {  # non-default options worth exercising; a name not listed runs with its defaults
    "sabo": {"lr": 0.1, "rho": sabo.InvSqrt(5.0, horizon=100), "baseline": "center", "perturbation": "exact",
             "nonfinite": "worst"},
    "ingo": {"lr": {"kind": "inv_sqrt", "scale": 0.5}, "shaping": "rank"},
    "bes": {"lr": 0.05, "spacing": 0.1},
    "cmaes": {"options": {"CMA_diagonal": True, "bounds": [[-5.0] * D, None]}},
    "mmes": {"restarts": True},
    # few Adam steps and candidates keep its GP cheap; max_cholesky_size below the data size takes
    # gpytorch's CG/Lanczos path, whose random probe vectors the RNG checks then cover; with
    # failtol 1 the trust region expands, shrinks and restarts (at round 25: inside the 9 + 25
    # rounds of the round-trip check)
    "turbo": {"n_training_steps": 5, "n_candidates": 64, "max_cholesky_size": 16, "failtol": 1,
              "bounds": [-2.0, 3.0]},
    # hyperparameter fits from the second tell on; acquisitions from raw samples only (no L-BFGS-B, which
    # tests/test_gibo.py runs) keep the checks fast
    "gibo": {"fit_hyperparameters": True, "n_max": 12, "raw_samples": 8, "acq_maxiter": 0, "fit_maxiter": 5,
             "lr": 0.1},
    # the default member, DiagonalCMA, with a budget (tests/test_nevergrad.py runs the checks on more members)
    "nevergrad": {"budget": 300},
}

#: Methods that need an optional package, and the package of their extra: without it their checks
#: skip (which tests/conftest.py turns into a failure under CI=true).
EXTRA_PACKAGES = {"turbo": "botorch", "gibo": "botorch", "nevergrad": "nevergrad"}
#: Methods that compute with PyTorch: they run on one torch thread (on the shared 2-core machine,
#: two threads made them 6x slower).
TORCH_METHODS = {"turbo", "gibo"}


def prepare(name, request):
    if name in EXTRA_PACKAGES:
        pytest.importorskip(EXTRA_PACKAGES[name])
    if name in TORCH_METHODS:
        request.getfixturevalue("one_torch_thread")


def objective(X):
    return np.round(ellipsoid(X), 2)  # plateaus: MMES restarts, SABO/INGO meet ties


def build(name, seed=3, **overrides):
    """The registered optimizer ``name`` at d = D with popsize 6 and ``PARAMS[name]``, then ``overrides``."""
    params = {"popsize": 6, **PARAMS.get(name, {}), **overrides}
    return baselines.make(name, x0=np.linspace(0.2, 1.0, D), sigma0=np.linspace(0.3, 0.6, D), seed=seed, **params)


def drive(opt, rounds, fun=objective):
    for _ in range(rounds):
        X = opt.ask()
        opt.tell(X, fun(X))
    return opt


def driven(name, rounds=9, pending=True):
    opt = drive(build(name), rounds)
    if pending:
        opt.ask()
    return opt


def round_trip(state):
    return AskTellOptimizer.from_state_dict(loads(dumps(state)))


def assert_same_stats(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert tree_equal(to_data(a[k]), to_data(b[k])), k


def assert_same_state(opt, before, what):
    assert tree_equal(opt.state_dict(), before), f"{what} changed the optimizer's state"


# ---------------------------------------------------------------------------- the checks
def check_ask_twice_returns_the_pending_population(name):
    opt = build(name)
    for _ in range(5):  # several rounds: SABO alternates two kinds of asks
        X = opt.ask()
        assert X.dtype == np.float64 and X.ndim == 2 and X.shape[1] == D
        Y = opt.ask()
        assert np.array_equal(X, Y), "a second ask() before tell() must return the pending population"
        Y[0, 0] += 1.0  # ask() returns a copy: changing it does not change the pending population
        assert np.array_equal(opt.ask(), X)
        opt.tell(X, objective(X))


def check_evals_per_iteration_matches_the_asks(name):
    """... and, after the first iteration, what the class declares without an instance (``rows_per_ask``: how
    a study costs a run, :func:`replication.costs.evaluations_per_iteration`)."""
    opt = build(name)
    cls = type(opt)
    params = {"popsize": 6, **PARAMS.get(name, {})}
    for _ in range(4):
        expected, nit, nfev = opt.evals_per_iteration, opt.nit, opt.nfev
        if nit > 0:
            assert expected == cls.rounds_per_iteration * cls.rows_per_ask(opt.popsize, params), \
                f"{cls.__name__}.rows_per_ask does not count the rows its asks have"
        rows = asks = 0
        while opt.nit == nit:
            assert asks < cls.rounds_per_iteration, f"an iteration took more than rounds_per_iteration = {asks} asks"
            X = opt.ask()
            rows += X.shape[0]
            asks += 1
            opt.tell(X, objective(X))
        assert opt.nit == nit + 1 and asks == cls.rounds_per_iteration, \
            f"one iteration took {asks} asks; the class declares rounds_per_iteration = {cls.rounds_per_iteration}"
        assert rows == expected == opt.nfev - nfev, "evals_per_iteration must be the rows of one iteration's asks"


def check_state_round_trip_is_bit_identical(name):
    for pending in (False, True):
        opt = driven(name, pending=pending)
        state = opt.state_dict()
        check_tree("state", state)  # data only: no objects, tuples or NumPy scalars
        assert state["format"] == STATE_FORMAT and state["optimizer"] == name
        snapshot = loads(dumps(state))
        assert tree_equal(snapshot, state)
        restored = AskTellOptimizer.from_state_dict(snapshot)
        assert type(restored) is type(opt) and restored._rng is not opt._rng
        assert tree_equal(restored.state_dict(), state), "a restored optimizer must save the state it was restored from"
        assert restored.nfev == opt.nfev and restored.nit == opt.nit and restored.f_best == opt.f_best
        for _ in range(25):
            Xa, Xb = opt.ask(), restored.ask()
            assert np.array_equal(Xa, Xb)
            opt.tell(Xa, objective(Xa))
            restored.tell(Xb, objective(Xb))
        assert np.array_equal(opt.mean, restored.mean) and np.array_equal(opt.x_best, restored.x_best)
        assert opt.nfev == restored.nfev and opt.nit == restored.nit
        assert_same_stats(opt.stats, restored.stats)
        # a state is a snapshot: it shares nothing with the optimizer it came from or was restored into
        assert tree_equal(snapshot, state)
        # the restored optimizer owns its generator: advancing the original leaves it where it was
        again = round_trip(opt.state_dict())
        X = opt.ask()
        opt.tell(X, objective(X))
        assert np.array_equal(again.ask(), X)


def _torch_rng_state():
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return torch.random.get_rng_state()


def check_global_random_states_untouched(name):
    np.random.seed(12345)
    before, torch_before = np.random.get_state(), _torch_rng_state()
    opt = driven(name, rounds=10)
    restored = round_trip(opt.state_dict())
    drive(restored, 10)
    build(name, seed=None).ask()  # seed=None draws OS entropy, not the global generator
    after = np.random.get_state()
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:], \
        "NumPy's global random state changed"
    if torch_before is not None:
        import torch

        assert torch.equal(torch.random.get_rng_state(), torch_before), "torch's global random state changed"


def check_same_seed_same_run(name):
    a, b = build(name, seed=4), build(name, seed=4)
    for _ in range(12):  # interleaved: no shared (global) random state between instances
        Xa, Xb = a.ask(), b.ask()
        assert np.array_equal(Xa, Xb)
        a.tell(Xa, objective(Xa))
        b.tell(Xb, objective(Xb))
    assert np.array_equal(a.mean, b.mean)
    assert not np.array_equal(build(name, seed=5).ask(), build(name, seed=4).ask())


NON_REAL = {
    "complex": lambda v: np.asarray(v, dtype=complex) + 1j,
    "bool": lambda v: np.asarray(v) > 0,
    "str": lambda v: np.asarray(v).astype(str),
    "object-str": lambda v: np.asarray([str(x) for x in np.ravel(v)], dtype=object),
}
NON_REAL_WORDS = {"complex": "complex", "bool": "booleans", "str": "strings", "object-str": "real numbers only"}


def check_failed_tell_leaves_the_state_unchanged(name):
    """A tell that is refused (wrong population, wrong or non-real or all-NaN values) changes nothing."""
    opt, twin = driven(name, rounds=3, pending=False), driven(name, rounds=3, pending=False)
    with pytest.raises(RuntimeError, match="without a pending ask"):
        opt.tell(np.zeros((6, D)), np.zeros(6))
    X = opt.ask()
    n = X.shape[0]
    before = opt.state_dict()
    moved = X.copy()
    moved[0, 0] += 1e-9
    refused = [
        (X[:-1], objective(X)[:-1], rf"X has shape \({n - 1}, {D}\), expected \({n}, {D}\)"),
        (moved, objective(X), "not the population returned by the last ask"),
        (X, objective(X)[:, None], rf"values has shape \({n}, 1\), expected \({n},\)"),
        (X, np.full(n, np.nan), "non-finite values for candidates"),  # nothing finite, whatever the policy
        *[(X, make(objective(X) + 1.0), f"values must contain .*{NON_REAL_WORDS[kind]}")
          for kind, make in NON_REAL.items()],
    ]
    for Xt, values, message in refused:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. no ComplexWarning: an error instead
            with pytest.raises(ValueError, match=message):
                opt.tell(Xt, values)
        assert_same_state(opt, before, f"a tell refused with {message!r}")
    Xt = twin.ask()
    assert np.array_equal(opt.ask(), Xt)  # the pending population is still the one to tell
    opt.tell(X, objective(X))
    twin.tell(Xt, objective(Xt))
    assert tree_equal(opt.state_dict(), twin.state_dict()), "the refused tells left a trace"


def check_nonfinite_policies(name):
    """``nonfinite="raise"`` names the offending candidates; ``"worst"`` replaces and counts them."""
    opt = build(name, nonfinite="raise")
    X = opt.ask()
    values = objective(X)
    values[[1, 3]] = [np.nan, np.inf]
    before = opt.state_dict()
    with pytest.raises(NonFiniteValueError, match=r"non-finite values for candidates \{1: nan, 3: inf\}"):
        opt.tell(X, values)
    assert_same_state(opt, before, "a tell refused for NaN/inf values")
    worst = build(name, nonfinite="worst")
    X = worst.ask()
    worst.tell(X, values)
    assert worst.stats["nonfinite_replaced"] == 2 and worst.nfev == X.shape[0]
    assert np.all(np.isfinite(worst.mean))
    # one NaN or infinity anywhere among finite values (tell finds them by argmin and argmax: issue 32)
    X = opt.ask()  # still the pending population: the refused tell changed nothing
    for i, bad in [(0, np.nan), (X.shape[0] - 1, np.nan), (2, np.inf), (3, -np.inf)]:
        lone = objective(X)
        lone[i] = bad
        with pytest.raises(NonFiniteValueError, match=rf"non-finite values for candidates \{{{i}: {bad}\}}"):
            opt.tell(X, lone)
    assert_same_state(opt, before, "a tell refused for one NaN/inf value")


BAD_COMMON = [  # (constructor arguments, message): every optimizer validates the suite's parameters
    ({"popsize": 2.5}, "popsize must be an integer"),
    ({"sigma0": 0.0}, "sigma0 must be finite and > 0"),
    ({"sigma0": [1.0, -1.0, 1.0]}, "sigma0 must be finite and > 0"),
    ({"sigma0": [1.0, 1.0]}, r"sigma0 must be a scalar or an array of shape \(3,\)"),
    ({"sigma0": True}, "sigma0 must contain real numbers, not booleans"),
    ({"seed": -3}, "seed must be a non-negative integer"),
    ({"seed": 1.5}, "seed must be a non-negative integer"),
    ({"nonfinite": "ignore"}, "nonfinite must be one of"),
    ({"x0": [0.0, np.nan, 1.0]}, r"x0 must be finite; entries at indices \[1\]"),
    ({"x0": [[1.0, 2.0]]}, "x0 must be a non-empty 1-D array"),
    ({"x0": []}, "x0 must be a non-empty 1-D array"),
    *[({"x0": make([0.5, 1.0, 2.0])}, f"x0 must contain .*{NON_REAL_WORDS[kind]}") for kind, make in NON_REAL.items()],
    *[({"sigma0": make([0.5, 1.0, 2.0])}, f"sigma0 must contain .*{NON_REAL_WORDS[kind]}")
      for kind, make in NON_REAL.items()],
]

BAD_SPECIFIC = {  # name -> [(constructor arguments, message)]: each method's own parameters
    "sabo": [
        ({"rho": 0.0}, "rho must be > 0"),
        ({"rho": -1.0}, "rho must be > 0"),
        ({"rho": sabo.InvSqrt(-2.0)}, "rho.scale must be > 0"),
        ({"lr": 0.0}, "lr must be > 0"),
        ({"lr": float("nan")}, "lr must be a finite"),
        ({"baseline": "median"}, "baseline must be one of"),
        ({"shaping": "softmax"}, "shaping must be one of"),
        ({"perturbation": "taylor2"}, "perturbation must be one of"),
        ({"precision_floor": 0.0}, r"precision_floor must lie in \(0.0, 1.0\]"),
    ],
    "ingo": [
        ({"lr": -1.0}, "lr must be > 0"),
        ({"shaping": "softmax"}, "shaping must be one of"),
        ({"precision_floor": 1.5}, r"precision_floor must lie in \(0.0, 1.0\]"),
    ],
    "bes": [
        ({"spacing": 0.0}, "spacing must be > 0"),
        ({"spacing": -0.1}, "spacing must be > 0"),
        ({"spacing": np.nan}, "spacing"),
        ({"lr": 0.0}, "lr must be > 0"),
        ({"lr": -1.0}, "lr must be > 0"),
    ],
    "mmes": [
        ({"n_paths": 0}, "n_paths"),
        ({"n_paths": 2.5}, "n_paths"),
        ({"c_s": 0.0}, "c_s"),
        ({"c_s": -0.1}, "c_s"),
        ({"c_s": 1.5}, "c_s"),
        ({"c_c": 0.0}, "c_c"),
        ({"c_c": 1.2}, "c_c"),
        ({"mixing_strength": 0}, "mixing_strength"),
        ({"target_significance": 0.0}, "target_significance"),
        ({"target_significance": 1.0}, "target_significance"),
        ({"restarts": "yes"}, "restarts"),
        ({"warmup": "none"}, "warmup must be one of 'official', 'stored_paths'"),
        ({"archive_gap": 1}, "archive_gap must be one of 'strict', 'inclusive'"),
        ({"first_generation": "x0"}, "first_generation must be one of 'compare_x0', 'skip'"),
    ],
    "turbo": [
        ({"bounds": [[-1.0] * 2, [1.0] * 2]}, r"bounds must have shape \(2, 3\)"),
        ({"bounds": [1.0, -1.0]}, "bounds must have lb < ub"),
        ({"bounds": [-1.0, np.inf]}, "bounds must be finite"),
        ({"bounds": [0.5, 1.0]}, "bounds must contain x0"),
        ({"bounds": ["a", "b"]}, "bounds must contain real numbers"),
        ({"n_init": 0}, "n_init must be an integer >= 1"),
        ({"succtol": 0}, "succtol must be an integer >= 1"),
        ({"failtol": 0}, "failtol must be an integer >= 1"),
        ({"failtol": 1.5}, "failtol must be an integer"),
        ({"popsize": 10, "n_candidates": 9}, "n_candidates must be an integer >= 10"),
        ({"n_training_steps": -1}, "n_training_steps must be an integer >= 0"),
        ({"max_cholesky_size": -1}, "max_cholesky_size must be an integer >= 0"),
        ({"device": "tpu"}, "device must be 'cpu', 'cuda'"),
        ({"device": "cpu:1"}, "device must be 'cpu', 'cuda'"),
        ({"device": 0}, "device must be 'cpu', 'cuda'"),
    ],
    "gibo": [
        ({"lr": 0.0}, "lr must be > 0"),
        ({"delta": -1.0}, "delta must be > 0"),
        ({"n_max": 2}, r"n_max must be an integer >= 4"),  # popsize d + 1 = 4
        ({"noise": 0.0}, "noise must be > 0"),
        ({"normalize_gradient": "yes"}, "normalize_gradient must be True or False"),
        ({"fit_hyperparameters": 1}, "fit_hyperparameters must be True or False"),
        ({"lengthscale_bounds": (0.5, 0.9)}, r"lengthscale_bounds must be a pair .*0 < low < 1 < high"),
        ({"outputscale_bounds": (0.5,)}, "outputscale_bounds must be a pair"),
        ({"num_restarts": 0}, "num_restarts must be an integer >= 1"),
        ({"raw_samples": 1, "num_restarts": 2}, "raw_samples must be an integer >= 2"),
        ({"acq_maxiter": -1}, "acq_maxiter must be an integer >= 0"),
        ({"fit_maxiter": 0}, "fit_maxiter must be an integer >= 1"),
        ({"device": "tpu"}, "device must"),
    ],
    # CMA-ES's own parameter is pycma's options: tests/test_cmaes.py checks what it refuses and why
}


def check_bad_parameters_raise_naming_them(name):
    smallest = baselines.REGISTRY[name].min_popsize  # 2, or 1 where the class declares that one candidate works
    too_small = ({"popsize": smallest - 1}, rf"popsize must be an integer in \[{smallest}, 1000000\]")
    for kwargs, message in [too_small, *BAD_COMMON, *BAD_SPECIFIC.get(name, [])]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError, match=message):
                baselines.make(name, **{"x0": np.zeros(3), "seed": 0, **kwargs})


def check_popsize_bounds(name):
    least = baselines.REGISTRY[name].min_popsize
    for popsize in (10**9, 10**12, MAX_POPSIZE + 1):
        start = time.perf_counter()
        with pytest.raises(ValueError, match=rf"popsize must be an integer in \[{least}, 1000000\]"):
            baselines.make(name, x0=np.ones(5), popsize=popsize, seed=0)
        assert time.perf_counter() - start < 0.5, "an absurd popsize must fail before allocating"
    d = 1000
    popsize = MAX_POPULATION_ELEMENTS // d + 1
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"popsize \* d must be <= 268435456 .*popsize 268436 \* d 1000"):
        baselines.make(name, x0=np.ones(d), popsize=popsize, seed=0)
    assert time.perf_counter() - start < 0.5
    smallest = drive(baselines.make(name, x0=np.ones(3), popsize=least, seed=0), 4, ellipsoid)
    assert smallest.popsize == least and smallest.nit >= 1


def check_default_popsize_is_declared_on_the_class(name):
    """``popsize=None`` builds the population the class declares (what a study costs a run by), or is refused
    when the class declares none."""
    cls = baselines.REGISTRY[name]
    try:
        declared = cls.default_popsize(D)
    except ValueError:
        with pytest.raises((ValueError, TypeError)):
            baselines.make(name, x0=np.ones(D), popsize=None, seed=0)
        return
    assert baselines.make(name, x0=np.ones(D), popsize=None, seed=0).popsize == declared


def told_in_pieces(opt, fun=objective, number=2, order=lambda pieces: pieces[::-1]):
    """One population asked ``number`` rows at a time (pycma's ``ask(number)``) and told piece by piece in
    ``order``; the pieces, as asked."""
    pieces = []
    while True:
        try:
            pieces.append(opt.ask(number))
        except RuntimeError:  # every row is out
            break
    for piece in order(pieces):
        opt.tell(piece, fun(piece))
    return pieces


def check_pieces_are_told_as_one_population(name):
    """``ask(number)`` hands a population out in pieces, told in any order: the same run as whole tells, the
    update at the last piece; a state saved between pieces restores them; what breaks the rules changes nothing."""
    whole, pieces = build(name), build(name)
    for _ in range(4):
        X = whole.ask()
        nit, nfev = pieces.nit, pieces.nfev
        asked = told_in_pieces(pieces, order=lambda p: p[1:] + p[:1])  # the first piece last
        assert np.array_equal(np.vstack(asked), X) and pieces.nfev == nfev + X.shape[0]
        whole.tell(X, objective(X))
        assert pieces.nit == whole.nit >= nit
    assert tree_equal(pieces.state_dict(), whole.state_dict())

    X = pieces.ask()
    first, second = pieces.ask(3), pieces.ask(1)
    assert np.array_equal(first, X[:3]) and np.array_equal(second, X[3:4])
    with pytest.raises(RuntimeError, match=r"ask\(\) returns whole populations, but 4 of the"):
        pieces.ask()
    pieces.tell(second, objective(second))
    before = pieces.state_dict()
    assert before["state"]["handed"] == 4 and before["state"]["told_rows"].tolist()[:4] == [0, 0, 0, 1]
    for bad, values, message in [(second, objective(second), r"X\[0\] is not a row .* not told yet"),  # told already
                                 (X[-1:], objective(X[-1:]), r"X\[0\] is not a row"),  # not handed out yet
                                 (first[:2], objective(first), r"values has shape \(3,\), expected \(2,\)"),
                                 (first[:, :-1], objective(first), r"X has shape \(3, \d\); tell\(\) takes rows")]:
        with pytest.raises(ValueError, match=message):
            pieces.tell(bad, values)
        assert_same_state(pieces, before, f"a piece refused with {message!r}")
    restored = round_trip(before)
    for opt in (pieces, restored):  # the rest, told in pieces again: restored mid-population, the same run
        opt.tell(first, objective(first))
        rest = told_in_pieces(opt, number=5)
        assert np.array_equal(np.vstack([first, second, *rest]), X)
    assert tree_equal(restored.state_dict(), pieces.state_dict())
    assert np.array_equal(whole.ask(), X)
    whole.tell(X, objective(X))
    assert tree_equal(pieces.state_dict(), whole.state_dict())


def test_the_spread_of_the_told_values_is_max_minus_min_bit_for_bit():
    """The saved span of the values is np.max - np.min of them, zeros of both signs included (tell takes it from
    argmin and argmax, whose ties may pick the other zero: issue 32)."""
    rng = np.random.default_rng(1)
    zeros = np.array([0.0, -0.0, 0.0, -0.0, 0.0, -0.0])
    for values in [rng.standard_normal(6), np.full(6, 2.5), zeros, -zeros, np.full(6, -0.0),
                   np.array([1e308, -1e308, 0, 0, 0, 0])]:
        opt = build("ingo")
        with np.errstate(over="ignore"):
            expected = np.max(values) - np.min(values)
            opt.tell(opt.ask(), values)
        spread = opt.state_dict()["state"]["spreads"][0]
        assert np.float64(spread).tobytes() == np.float64(expected).tobytes(), (values, spread, expected)


def check_stop_and_result_read_like_pycmas(name):
    """``stop()`` and ``result``, pycma's way, from the optimizer's own bookkeeping; a restored optimizer says the
    same."""
    opt = build(name)
    assert opt.stop() == {} and opt.stop(ftol=1e300, xtol=1e300) == {}  # nothing holds before a told population
    assert opt.stop(max_iter=0, max_nfev=0) == {"max_iter": 0, "max_nfev": 0}
    drive(opt, 6)
    res = opt.result
    assert np.array_equal(res.xbest, opt.x_best) and res.fbest == opt.f_best and res.evaluations == opt.nfev
    assert res.iterations == opt.nit and np.array_equal(res.xfavorite, opt.mean) and res.stop == opt.stop()
    assert 0 < res.evals_best <= opt.nfev
    assert res.stds is None or (res.stds.shape == (D,) and np.all(res.stds > 0))
    assert opt.stop(ftol=1e300, xtol=1e300) == {"ftol": 1e300, "xtol": 1e300}
    assert opt.stop(ftol=0.0, xtol=0.0, max_iter=opt.nit + 1) == {}  # the last population is not flat nor a point
    assert opt.stop(max_iter=opt.nit) == {"max_iter": opt.nit}
    restored = round_trip(opt.state_dict())
    assert restored.stop(ftol=1.0, xtol=1.0) == opt.stop(ftol=1.0, xtol=1.0)
    assert tree_equal(to_data(restored.result._asdict()), to_data(res._asdict()))
    with pytest.raises(ValueError, match="ftol must be >= 0"):
        opt.stop(ftol=-1.0)


# ---------------------------------------------------------------------------- hostile states
def _set(path, value):
    def mutate(state):
        node = state
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value(node[path[-1]]) if callable(value) else value
    return mutate


def _delete(path):
    def mutate(state):
        node = state
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return mutate


HOSTILE_COMMON = [  # (mutation, message) valid for every optimizer (d = 6, an ask pending)
    (_set(["format"], 2), rf"format {STATE_FORMAT}; got 2"),
    (_delete(["rng"]), r"state: missing keys \['rng'\]"),
    (_set(["extra"], 0), r"state: unexpected keys \['extra'\]"),
    (_set(["state", "nfev"], -6), r"\['nfev'\] must be an integer in \[0, 9223372036854775807\]"),
    (_set(["state", "nit"], 2.0), r"\['nit'\] must be an integer in \[0, 9223372036854775807\]"),
    (_set(["state", "nit"], True), r"\['nit'\] must be an integer in \[0, 9223372036854775807\]"),
    # beyond int64 a count overflows the float arithmetic of the next ask or tell (a decaying schedule's sqrt)
    (_set(["state", "nit"], 10**400), r"\['nit'\] must be an integer in \[0, 9223372036854775807\] \(got an "
                                      r"integer of about 401 digits\)"),
    (_set(["state", "nfev"], 2**63), r"\['nfev'\] must be an integer in \[0, 9223372036854775807\]"),
    (_set(["state", "f_best"], np.nan), r"\['f_best'\] must be finite or \+inf"),
    (_set(["state", "f_best"], "0.0"), r"\['f_best'\] must be a real number"),
    (_set(["state", "x_best"], lambda a: a[:-1]), r"\['x_best'\] must have shape \(6,\)"),
    (_set(["state", "x_best"], lambda a: a.tolist()), r"\['x_best'\] must be a numpy array"),
    (_set(["state", "pending"], lambda a: a[:, :-1]), r"\['pending'\] must have shape"),
    (_set(["state", "pending"], lambda a: np.vstack([a, a])), r"\['pending'\] must have shape"),
    (_set(["state", "pending"], lambda a: a.astype(np.float32)), r"\['pending'\] must have dtype float64"),
    (_delete(["state", "stats"]), r"state\['state'\]: missing keys \['stats'\]"),
    (_set(["state", "stats", "nonfinite_replaced"], -1), r"\['nonfinite_replaced'\] must be an integer in \[0, "),
    (_set(["state", "stats", "nonfinite_replaced"], 10**400), r"\['nonfinite_replaced'\] must be an integer in \[0, "),
    (_set(["state", "stats", "surprise"], 1), r"\['stats'\]: unexpected keys \['surprise'\]"),
    (_set(["config", "evil"], 1), r"state\['config'\]: unexpected keys \['evil'\]"),
    (_delete(["config", "seed"]), r"state\['config'\]: missing keys \['seed'\]"),
    (_set(["config", "x0"], lambda a: np.append(a, 1.0)),
     r"state\['config'\]: sigma0 must be a scalar or an array of shape \(7,\)"),
    (_set(["config", "x0"], lambda a: np.where(np.arange(D) == 2, np.inf, a)), r"state\['config'\]: x0 must be finite"),
    (_set(["config", "x0"], lambda a: a > 0.5), r"state\['config'\]: x0 must contain real numbers, not booleans"),
    (_set(["config", "popsize"], 10**9), r"state\['config'\]: popsize must be an integer in \[\d, 1000000\]"),
    (_set(["config", "nonfinite"], "ignore"), r"state\['config'\]: nonfinite must be one of"),
    (_set(["config", "seed"], (1, 2)), r"state\['config'\]\['seed'\]: tuple is not state data"),
    (_set(["rng", "bit_generator"], "RandomState"), r"bit_generator'\] must be one of \['MT19937', 'PCG64'"),
    (_set(["rng", "bit_generator"], "os.system"), r"bit_generator'\] must be one of"),
    (_set(["rng", "state", "state"], "seed"), r"state\['rng'\]\['state'\] is not a valid PCG64 state"),
    (_set(["rng", "state", "state"], {"state": -1, "inc": 1}), r"state\['rng'\]\['state'\] is not a valid PCG64 state"),
    (_set(["rng", "state", "bit_generator"], "MT19937"), r"must be a PCG64 state dict"),
]


def check_refused(name, mutate, message):
    """The state of ``driven(name)``, written and read back, then mutated, is refused naming the entry."""
    state = loads(dumps(driven(name).state_dict()))
    mutate(state)
    with pytest.raises(ValueError, match=message):
        AskTellOptimizer.from_state_dict(state)


def check_hostile_states_are_refused(name):
    round_trip(driven(name).state_dict())  # unmutated, it restores: the failures below come from the mutations
    for mutate, message in HOSTILE_COMMON:
        check_refused(name, mutate, message)


#: The registry-wide checks; tests/test_extending.py runs the same list on a toy optimizer.
CHECKS = [
    check_ask_twice_returns_the_pending_population,
    check_evals_per_iteration_matches_the_asks,
    check_state_round_trip_is_bit_identical,
    check_global_random_states_untouched,
    check_same_seed_same_run,
    check_failed_tell_leaves_the_state_unchanged,
    check_nonfinite_policies,
    check_bad_parameters_raise_naming_them,
    check_default_popsize_is_declared_on_the_class,
    check_popsize_bounds,
    check_pieces_are_told_as_one_population,
    check_stop_and_result_read_like_pycmas,
    check_hostile_states_are_refused,
]

try:  # installed plugins get the checks too (docs/extending/optimizer.md)
    baselines.load_plugins()
    PLUGIN_ERROR = None
except baselines.PluginError as exc:
    PLUGIN_ERROR = str(exc)
NAMES = list(baselines.REGISTRY)


def test_installed_plugins_load():
    assert PLUGIN_ERROR is None, PLUGIN_ERROR


# ---------------------------------------------------------------------------- the tests
def test_registry_holds_each_class_under_its_declared_name():
    assert {"sabo", "ingo", "bes", "cmaes", "mmes", "gibo", "nevergrad"} <= set(NAMES)
    for name, cls in baselines.REGISTRY.items():
        assert cls.name == name and OPTIMIZERS[name] is cls  # saved states restore to the registered class
        assert set(baselines.REQUIRED_PARAMETERS) <= set(baselines.parameters(name))


@pytest.mark.parametrize("check", [c for c in CHECKS if c is not check_hostile_states_are_refused],
                         ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize("name", NAMES)
def test_conformance(name, check, request):
    prepare(name, request)
    check(name)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mutate,message", HOSTILE_COMMON, ids=[m for _, m in HOSTILE_COMMON])
def test_mutated_state_is_refused_naming_the_entry(name, mutate, message, request):
    prepare(name, request)
    check_refused(name, mutate, message)


@pytest.mark.parametrize("name", NAMES)
def test_unmutated_states_restore(name, request):
    """The mutation tests above start from states that restore: their failures come from the mutation."""
    prepare(name, request)
    round_trip(driven(name).state_dict())


# ---------------------------------------------------------------------------- non-finite updates
# An update that would make the state non-finite raises FloatingPointError and leaves the state as
# it was. Reaching such an update takes method-specific values; pycma is rank based, so CMA-ES's
# case (pycma failing halfway through its in-place update) is in tests/test_cmaes.py.
OVERFLOW = {  # name -> (constructor arguments, warm-up rounds, values of the overflowing round, message)
    "sabo": ({"x0": np.zeros(3), "popsize": 4, "lr": 1e10, "shaping": "none", "baseline": "mean"}, 1,
             lambda X: np.array([1e300, -1e300, 1e300, -1e300]), "non-finite mean"),
    "ingo": ({"x0": np.zeros(3), "popsize": 4, "lr": 1e10, "shaping": "none", "baseline": "mean"}, 0,
             lambda X: np.array([1e300, -1e300, 1e300, -1e300]), "non-finite mean"),
    "bes": ({"x0": np.ones(3), "lr": 1e300, "spacing": 1.0}, 0,
            lambda X: 1e300 * np.arange(X.shape[0], dtype=float), "non-finite mean"),
    # near the float64 limit, the mirrored sample that overflows is made the best one (the first
    # mutations are damped by sqrt(1 - gamma) = 0.125 at d = 5: sigma0 * 0.125 * z overflows
    # 1.75e308 once z > 0.38 in some coordinate of one of the two mirrored samples)
    "mmes": ({"x0": np.full(5, 1.75e308), "sigma0": 1e308, "popsize": 2}, 0,
             lambda X: np.where(np.all(np.isfinite(X), axis=1), 1.0, 0.0), "non-finite mean"),
}


@pytest.mark.parametrize("name", sorted(OVERFLOW))
def test_nonfinite_update_is_refused_and_the_state_kept(name):
    kwargs, warmup, values, message = OVERFLOW[name]
    opt = baselines.make(name, seed=2, **kwargs)
    drive(opt, warmup, lambda X: np.sum(X**2, axis=1))
    with np.errstate(over="ignore", invalid="ignore"):
        X = opt.ask()
        before = opt.state_dict()
        with pytest.raises(FloatingPointError, match=message):
            opt.tell(X, values(X))
    assert_same_state(opt, before, "a refused non-finite update")
    assert np.all(np.isfinite(opt.mean))
