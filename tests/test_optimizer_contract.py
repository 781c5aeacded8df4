"""What the library layer promises a user's optimizer and a user's call, checked where a mistake first shows.

A user's ``AskTellOptimizer`` subclass is held to the contract at the point of the mistake:
``ask()`` checks what ``_ask()`` returns, ``sabo.run`` checks ``mean`` and that ``nit`` advances.
Each bad input gets one line naming what was wrong and what is allowed. The user's class here
declares no registry ``name`` (nothing here saves its state), so it registers nowhere.
"""
import io
import pickle
import warnings
import zipfile

import numpy as np
import pytest

import baselines
import sabo
from sabo.protocol import AskTellOptimizer
from sabo.serialization import StateFormatError, dumps, loads

D, N = 4, 5


def user_optimizer(*, population=None, mean=None, counts_every=1, rounds=1):
    """A user's random search at d = D, popsize = N, broken on purpose by the arguments.

    ``population(opt)`` replaces what ``_ask`` returns, ``mean(opt)`` the ``mean`` property;
    ``_tell`` advances ``nit`` once every ``counts_every`` tells (0: never); ``rounds`` is the
    declared ``rounds_per_iteration``.
    """
    class UserSearch(AskTellOptimizer):
        rounds_per_iteration = rounds

        def __init__(self, x0, sigma0=1.0, popsize=N, seed=None, *, nonfinite="raise"):
            super().__init__(x0, sigma0=sigma0, popsize=popsize, seed=seed, nonfinite=nonfinite)
            self._tells = 0

        @property
        def mean(self):
            return self.x_best if mean is None else mean(self)

        def _ask(self):
            X = self._x_best + self._sigma0 * self._rng.standard_normal((self._popsize, self._dim))
            return X if population is None else population(X)

        def _tell(self, values):
            self._tells += 1
            if counts_every and self._tells % counts_every == 0:
                self._nit += 1

    return UserSearch(np.ones(D), seed=0)


def sphere(X):
    return np.sum(X**2, axis=1)


def one_line(exc_info) -> str:
    message = str(exc_info.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------------- 1. ask() checks _ask()
REQUIRED = r"UserSearch\._ask\(\) must return a numpy float64 array of shape \(n, 4\) with n >= 1 and no NaN"


def with_nan(X):
    X[2, 1] = np.nan
    return X


def with_nan_among_infinities(X):
    X[0, 0], X[1, 3] = np.inf, -np.inf
    return with_nan(X)


@pytest.mark.parametrize("population, error, returned", [
    (lambda X: np.ones((N, D + 1)), TypeError, r"an array of dtype float64 and shape \(5, 5\)"),
    (lambda X: X.tolist(), TypeError, "a list"),
    (lambda X: X.astype(np.float32), TypeError, r"an array of dtype float32 and shape \(5, 4\)"),
    (lambda X: X[:0], TypeError, r"an array of dtype float64 and shape \(0, 4\)"),
    (lambda X: X[0], TypeError, r"an array of dtype float64 and shape \(4,\)"),
    (with_nan, ValueError, r"an array of shape \(5, 4\) with NaN in rows \[2\]"),
    (with_nan_among_infinities, ValueError, r"an array of shape \(5, 4\) with NaN in rows \[2\]"),
], ids=["wrong-width", "list", "float32", "no-rows", "1-d", "nan", "nan-among-infinities"])
def test_ask_refuses_what_breaks_its_promise_naming_the_subclass(population, error, returned):
    opt = user_optimizer(population=population)
    with pytest.raises(error, match=f"^{REQUIRED}; it returned {returned}") as refused:
        opt.ask()
    one_line(refused)
    with pytest.raises(error, match=REQUIRED):  # sabo.run stops at the same place, before any evaluation
        sabo.run(user_optimizer(population=population), sphere, max_iter=6)


@pytest.mark.parametrize("population", [None, lambda X: np.where(X > 1.0, np.inf, X),
                                        lambda X: np.where(X > 1.0, np.inf, np.where(X < 0.5, -np.inf, X))],
                         ids=["finite", "overflowed", "overflowed-both-ways"])  # inf - inf is NaN, the points are not
def test_a_legitimate_population_is_told_back_and_only_it(population):
    """Infinities pass ask() (a sample can overflow from a finite state) and compare equal when told back."""
    opt = user_optimizer(population=population)
    X = opt.ask()
    assert X.dtype == np.float64 and X.shape == (N, D) and not np.any(np.isnan(X))
    assert population is None or np.any(np.isinf(X))
    for other in (12345.0, np.nan):
        moved = X.copy()
        moved[0, 0] = other
        with pytest.raises(ValueError, match="X is not the population returned by the last ask"):
            opt.tell(moved, np.ones(N))
    opt.tell(X.copy(), np.ones(N))  # an equal copy is that population
    assert opt.nfev == N and opt.nit == 1


def test_a_mean_of_the_wrong_length_is_refused_when_the_result_is_built():
    opt = user_optimizer(mean=lambda o: np.ones(D + 2))
    with pytest.raises(TypeError, match=r"^UserSearch\.mean must be a numpy float64 array of shape \(4,\), one entry "
                                        r"per coordinate of x0; it is an array of dtype float64 and shape \(6,\)$"):
        sabo.run(opt, sphere, max_iter=3)
    with pytest.raises(TypeError, match=r"UserSearch\.mean .*; it is a list$"):
        sabo.run(user_optimizer(mean=lambda o: [1.0] * D), sphere, max_iter=3, record_mean=False)


# ---------------------------------------------------------------------------- 2. run() needs nit to advance
def guarded(limit=200):
    """``sphere``, failing the test after ``limit`` calls instead of letting a run loop forever."""
    calls = []

    def fun(X):
        calls.append(1)
        if len(calls) > limit:
            pytest.fail(f"sabo.run called the objective {limit} times without stopping")
        return sphere(X)
    return fun


@pytest.mark.parametrize("budget", [{"max_iter": 6}, {"max_nfev": 10**6}])
def test_run_refuses_an_optimizer_whose_tell_never_counts_an_iteration(budget):
    with pytest.raises(RuntimeError, match=r"^UserSearch\.nit did not advance in 1 ask/tell round\(s\) in a row \(it "
                                           r"stayed at 0\), though one iteration takes UserSearch\."
                                           r"rounds_per_iteration = 1: its _tell must add 1 to self\._nit") as stuck:
        sabo.run(user_optimizer(counts_every=0), guarded(), **budget)
    one_line(stuck)


def test_the_guard_allows_the_declared_rounds_per_iteration_and_no_more():
    two_rounds = sabo.run(user_optimizer(counts_every=2, rounds=2), guarded(), max_iter=6)  # as SABO
    assert two_rounds.nit == 6 and two_rounds.nfev == 6 * 2 * N + 1
    with pytest.raises(RuntimeError, match=r"did not advance in 2 ask/tell round\(s\) .*\.rounds_per_iteration = 2"):
        sabo.run(user_optimizer(counts_every=3, rounds=2), guarded(), max_iter=6)
    sabo_run = sabo.run(sabo.SABO(np.ones(D), popsize=N, seed=0), guarded(), max_iter=6)
    assert sabo_run.nit == 6


# ---------------------------------------------------------------------------- 3. restoring a plugin's state
def test_restoring_an_unknown_optimizer_says_how_to_load_plugins():
    state = baselines.make("ingo", x0=np.ones(D), seed=0).state_dict()
    with pytest.raises(ValueError, match=r"names an unknown optimizer 'local_search'; known: .*`import baselines` for "
                                         r"the suite's methods; an installed plugin's after "
                                         r"`baselines\.load_plugins\(\)`") as unknown:
        AskTellOptimizer.from_state_dict({**state, "optimizer": "local_search"})
    one_line(unknown)
    assert callable(baselines.load_plugins)  # the function the hint names


# ---------------------------------------------------------------------------- 4. numbers, not numpy reprs
@pytest.mark.parametrize("build, expected", [
    (lambda: sabo.SABO(np.ones(D), sigma0=np.float64(0.0)),
     r"sigma0 must be finite and > 0 in every coordinate; entries at indices \[0, 1, 2, 3\] are \[0\.0, 0\.0, 0\.0, "
     r"0\.0\]"),
    (lambda: sabo.SABO(np.ones(D), sigma0=np.array([1.0, np.nan, 2.0, -1.0])),
     r"entries at indices \[1, 3\] are \[nan, -1\.0\]"),
    (lambda: sabo.SABO(np.ones(D), lr=np.float64(-0.5)), r"lr must be > 0 \(got -0\.5\)"),
    (lambda: sabo.SABO(np.ones(D), popsize=np.int64(1)), r"popsize must be an integer in \[2, 1000000\] \(got 1\)"),
    (lambda: sabo.SABO(np.ones(D), precision_floor=np.float64(2.0)), r"precision_floor must lie in \(0\.0, 1\.0\] "
                                                                     r"\(got 2\.0\)"),
    (lambda: sabo.SABO(np.ones(D), seed=np.int64(-1)), r"seed must be a non-negative integer or None \(got -1\)"),
    (lambda: baselines.make("mmes", x0=np.ones(D), restarts=np.int64(1)), r"restarts must be True or False \(got 1\)"),
], ids=["sigma0-zero", "sigma0-nan", "lr", "popsize", "precision_floor", "seed", "restarts"])
def test_messages_show_numpy_numbers_as_python_numbers(build, expected):
    with pytest.raises(ValueError, match=expected) as refused:
        build()
    assert "np." not in one_line(refused)


def test_turbo_bounds_messages_show_python_numbers():
    pytest.importorskip("botorch")
    with pytest.raises(ValueError, match=r"coordinate 1: 1\.0 >= 0\.5\)$") as refused:
        baselines.make("turbo", x0=np.zeros(2), bounds=np.array([[-1.0, 1.0], [1.0, 0.5]]))
    assert "np." not in one_line(refused)


def test_restored_state_messages_show_python_numbers():
    opt = baselines.make("ingo", x0=np.ones(D), seed=0)
    state = opt.state_dict()
    state["state"]["sigma2"] = np.array([1.0, -2.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"\['sigma2'\] must be > 0 everywhere \(min -2\.0\)$") as refused:
        AskTellOptimizer.from_state_dict(state)
    assert "np." not in one_line(refused)


# ---------------------------------------------------------------------------- 5. minimize's keyword arguments
@pytest.mark.parametrize("options, named", [
    ({"max_iter": 3, "maxiters": 10}, r"'maxiters' \(did you mean 'max_iter'\?\)"),
    ({"max_iter": 3, "Popsize": 6, "sigma": 0.5}, r"'Popsize' \(did you mean 'popsize'\?\), 'sigma' \(did you mean "
                                                  r"'sigma0'\?\)"),
    ({"max_iter": 3, "zzz": 1}, r"'zzz';"),
    ({"options": {"max_iter": 3, "zzz": 1}}, r"'zzz';"),  # scipy's options dict: the same names, the same check
])
def test_minimize_names_the_real_keyword_for_an_unknown_one(options, named):
    with pytest.raises(TypeError, match=f"^minimize\\(\\) got unexpected keyword argument\\(s\\) {named}") as refused:
        sabo.minimize(lambda x: float(x @ x), np.ones(D), **options)
    message = one_line(refused)
    assert ("its own are args, bounds, vectorized, max_iter, max_nfev, tol, ftol, xtol, callback, record_mean, "
            "options, jac, hess, hessp, constraints, disp (and scipy's maxiter, maxfev)") in message
    assert "SABO's options are sigma0, popsize, lr, rho, seed" in message


@pytest.mark.parametrize("arguments, message", [
    ({"max_iter": 3, "maxiter": 4}, "got both 'max_iter' and scipy's 'maxiter'; give one"),
    ({"max_iter": 3, "options": {"maxiter": 4}}, "got both 'max_iter' and scipy's 'maxiter'; give one"),
    ({"max_iter": 3, "options": {"max_iter": 4}}, "got 'max_iter' twice: as a keyword and in options"),
    ({"popsize": 6, "options": {"popsize": 8, "max_iter": 3}}, r"got 'popsize' both as keyword\(s\) and in options"),
    ({"options": [("maxiter", 3)]}, "options must be a dict of keyword arguments"),
])
def test_minimize_refuses_a_value_given_twice(arguments, message):
    with pytest.raises(TypeError, match=message) as refused:
        sabo.minimize(lambda x: float(x @ x), np.ones(D), **arguments)
    one_line(refused)


# ---------------------------------------------------------------------------- 6. loads() on foreign bytes
def npz_with(**members) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **members)
    return buf.getvalue()


def zip_with(name, content: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr(name, content)
    return buf.getvalue()


def npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ones(3))
    return buf.getvalue()


@pytest.mark.parametrize("data, said", [
    (b"garbage", r"got 7 bytes beginning b'garbage'$"),
    (b"", r"got 0 bytes$"),
    (npy(), r"got 152 bytes beginning b'\\x93NUMPY"),
    (zip_with("tree", b"not an array"), r"archive members \['tree'\] are not NumPy arrays"),
])
def test_loads_says_foreign_bytes_are_not_a_state_file_without_blaming_pickle(data, said):
    with pytest.raises(StateFormatError, match=f"^not a state file of this format.*{said}") as refused:
        loads(data)
    assert "pickle" not in one_line(refused)


def test_loads_names_pickled_data_only_when_it_is_pickled():
    with pytest.raises(StateFormatError, match=r"got a Python pickle, which is never unpickled$"):
        loads(pickle.dumps({"format": 2}))
    with pytest.raises(StateFormatError, match="has dtype object, whose arrays are pickles, never unpickled"):
        loads(npz_with(tree=np.array([object()], dtype=object)))
    with pytest.raises(TypeError, match=r"loads\(\) takes the bytes of a state file \(got str\)"):
        loads("garbage")
    tree = {"a": np.arange(3.0), "b": [1, None, "x"]}
    assert str(loads(bytearray(dumps(tree)))) == str(tree)


def npy_header(shape) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buf.getvalue()


def bomb(megabytes: int) -> bytes:
    """A state file whose one array, ``megabytes`` MB of zeros, is deflated to a few hundred kB (written a MB at a
    time: the test never holds the array)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("tree.npy", npz_member(np.frombuffer(b'{"a": {"__ndarray__": "a0"}}', np.uint8)),
                         compress_type=zipfile.ZIP_STORED)
        with archive.open("a0.npy", "w", force_zip64=True) as fh:
            fh.write(npy_header((megabytes * 2**17,)))
            for _ in range(megabytes):
                fh.write(bytes(2**20))
    return buf.getvalue()


def npz_member(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def test_a_zip_bomb_state_file_is_refused_before_anything_is_inflated():
    """200 MB deflated into ~200 kB: refused from the archive's directory, the peak memory of loads a few MB
    (it inflated the whole array before it looked at it)."""
    import tracemalloc

    data = bomb(200)
    assert len(data) < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(StateFormatError, match=r"archive member 'a0.npy' is compressed, \d+ bytes declaring "
                                                   r"209715328; dumps writes members uncompressed"):
            loads(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20


def test_an_array_header_declaring_more_than_its_member_holds_is_refused():
    """NumPy allocates the array an .npy header declares before it reads it: 8 TB here (a MemoryError)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("tree.npy", npz_member(np.frombuffer(b'{"a": {"__ndarray__": "a0"}}', np.uint8)))
        archive.writestr("a0.npy", npy_header((10**12,)) + bytes(8))
    with pytest.raises(StateFormatError, match=r"'a0.npy' declares an array of shape \(1000000000000,\) and dtype "
                                               r"float64, 8000000000128 bytes with its header, but holds 136\)"):
        loads(buf.getvalue())


def test_an_archive_whose_entries_overlap_is_refused():
    """The central directory's entry of a 1 MB stored array repeated 2,000 times: each would be read in full."""
    import struct

    data = dumps({"a": np.zeros(2**17)})  # members tree.npy, then a0.npy
    end = data.rindex(b"PK\x05\x06")  # the end-of-central-directory record
    entries, size, offset = struct.unpack_from("<HII", data, end + 10)
    directory = data[offset:offset + size]
    array_entry = directory[directory.index(b"PK\x01\x02", 1):]
    directory += array_entry * 2000
    tail = bytearray(data[end:])
    struct.pack_into("<HHII", tail, 8, entries + 2000, entries + 2000, len(directory), offset)
    with pytest.raises(StateFormatError, match=r"its members claim \d+ bytes, more than the \d+ bytes of the "
                                               r"archive"):
        loads(data[:offset] + directory + bytes(tail))


def test_a_state_structure_nested_100000_deep_is_refused_in_one_line():
    deep = np.frombuffer(b"[" * 100_000 + b"]" * 100_000, np.uint8)
    with pytest.raises(StateFormatError, match=r"^garbled structure \(JSON nested more than 100 levels deep"):
        loads(npz_with(tree=deep))


# ---------------------------------------------------------------------------- 7. the best point and max_iter=0
def test_max_iter_0_reports_x0_as_the_best_point_with_its_value():
    res = sabo.minimize(lambda x: float(np.sum((x - 0.5) ** 2)), np.ones(D), max_iter=0)
    assert res.nit == 0 and res.nfev == 1 and res.history == []
    np.testing.assert_array_equal(res.x_best, np.ones(D))
    assert res.fun_best == res.fun == pytest.approx(D * 0.25)
    res.x_best[0] = 7.0  # the best point is a copy of x, not x itself
    assert res.x[0] == 1.0


def test_fun_best_is_the_best_of_every_evaluation_the_final_one_included():
    for seed in range(5):
        opt = sabo.SABO(np.ones(D), popsize=N, seed=seed)
        res = sabo.run(opt, sphere, max_iter=40)
        assert res.fun_best == min(res.fun, opt.f_best) <= res.fun
        assert res.fun_best == sphere(res.x_best[None])[0]
        if res.fun < opt.f_best:  # the mean ended better than every sample: it is the best point
            assert np.array_equal(res.x_best, res.x)
    budget = sabo.run(sabo.SABO(np.ones(D), popsize=N, seed=0), sphere, max_nfev=N)  # stops before the first ask
    assert budget.nfev == 1 and budget.fun_best == budget.fun == pytest.approx(D)


# ---------------------------------------------------------------------------- 8. method names
@pytest.mark.parametrize("name, suggested", [
    ("SABO", "'sabo'"), ("CMA-ES", "'cmaes' or 'mmes'"), ("Nevergrad:NGOpt", "'nevergrad:NGOpt'"),
    ("InGo", "'ingo'")])
def test_a_misspelt_method_name_gets_a_suggestion(name, suggested):
    with pytest.raises(ValueError, match=f"^unknown optimizer '{name}' \\(did you mean {suggested}\\?\\); valid "
                                         "names and their parameters: sabo\\(") as unknown:
        baselines.make(name, x0=np.ones(D))
    one_line(unknown)
    with pytest.raises(ValueError, match=r"^unknown optimizer 'zzz'; valid names"):
        baselines.make("zzz", x0=np.ones(D))


# ---------------------------------------------------------------------------- 9. the default rho under each reading
@pytest.mark.parametrize("d", [16, 100])
def test_the_default_rho_is_a_kl_radius_of_0_05_sqrt_d_or_its_inverse(d):
    """What SABO's docstring states: radius 0.05 sqrt(d) (paper) or 20/sqrt(d) (inverse), the mean moving about
    the radius in standard deviations (at most sqrt(2) times it), and a warning below d = 40 under "inverse"."""
    for reading, radius in (("paper", 0.05 * np.sqrt(d)), ("inverse", 20.0 / np.sqrt(d))):
        opt = sabo.SABO(np.ones(d), seed=0, rho_reading=reading)
        X = opt.ask()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", sabo.SettingsWarning)
            opt.tell(X, sphere(X))
        assert opt.stats["kl_radius"] == pytest.approx(radius)
        assert 0.5 * radius < opt.stats["perturbation_mahalanobis"] <= np.sqrt(2) * radius
        warned = any(issubclass(w.category, sabo.SettingsWarning) for w in caught)
        assert warned == (reading == "inverse" and d < 40)
