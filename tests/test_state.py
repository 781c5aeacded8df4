"""Data-only optimizer state: round trips through sabo.serialization, registry-only class lookup,
and validation of every restored entry (a checkpoint may come from an untrusted directory)."""
import copy
import importlib

import numpy as np
import pytest

import baselines
import sabo
from baselines.cmaes import CMAES
from baselines.mmes import MMES
from sabo.protocol import BIT_GENERATORS, OPTIMIZERS, AskTellOptimizer
from sabo.serialization import dumps, loads
from sabo.state import check_tree, tree_equal
from replication.problems.synthetic import ellipsoid

D = 6
PARAMS = {
    "sabo": {"popsize": 6, "lr": 0.1, "rho": sabo.InvSqrt(5.0, horizon=100), "baseline": "center",
             "nonfinite": "worst"},
    "ingo": {"popsize": 6, "lr": {"kind": "inv_sqrt", "scale": 0.5}, "shaping": "rank"},
    "bes": {"popsize": 6, "lr": 0.05, "spacing": 0.1},
    "cmaes": {"popsize": 6, "options": {"CMA_diagonal": True, "bounds": [[-5.0] * D, None]}},
    "mmes": {"popsize": 6, "restarts": True},
}


def objective(X):
    return np.round(ellipsoid(X), 2)  # plateaus: MMES restarts, SABO/INGO meet ties


def make(name, seed=3):
    return baselines.make(name, x0=np.linspace(0.2, 1.0, D), sigma0=np.linspace(0.3, 0.6, D), seed=seed,
                          **PARAMS[name])


def driven(name, rounds=9, pending=True):
    opt = make(name)
    for _ in range(rounds):
        X = opt.ask()
        opt.tell(X, objective(X))
    if pending:
        opt.ask()
    return opt


def round_trip(state):
    return AskTellOptimizer.from_state_dict(loads(dumps(state)))


def assert_same_stats(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert tree_equal(sabo.state.to_data(a[k]), sabo.state.to_data(b[k])), k


def test_registry_is_the_declared_names():
    assert baselines.REGISTRY == {n: OPTIMIZERS[n] for n in ("sabo", "ingo", "bes", "cmaes", "mmes")}
    assert all(cls.name == n for n, cls in baselines.REGISTRY.items())


@pytest.mark.parametrize("pending", [False, True])
@pytest.mark.parametrize("name", list(baselines.REGISTRY))
def test_state_survives_serialization_and_continues_bit_identically(name, pending):
    opt = driven(name, pending=pending)
    state = opt.state_dict()
    check_tree("state", state)  # data only: no objects, tuples or NumPy scalars
    assert state["format"] == 2 and state["optimizer"] == name
    snapshot = loads(dumps(state))
    assert tree_equal(snapshot, state)
    restored = AskTellOptimizer.from_state_dict(snapshot)
    assert type(restored) is type(opt) and restored._rng is not opt._rng
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
    assert tree_equal(state, loads(dumps(state))) and tree_equal(snapshot, state)


def test_restored_optimizer_owns_its_generator():
    opt = driven("sabo", pending=False)
    restored = round_trip(opt.state_dict())
    X = opt.ask()
    opt.tell(X, objective(X))
    assert np.array_equal(restored.ask(), X)


def test_schedules_are_saved_as_mappings():
    state = driven("sabo").state_dict()
    assert state["config"]["rho"] == {"kind": "inv_sqrt", "scale": 5.0, "horizon": 100}
    assert state["config"]["lr"] == {"kind": "constant", "value": 0.1}


# ---------------------------------------------------------------------------- class lookup
@pytest.fixture
def no_imports(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"from_state_dict imported {args}")

    monkeypatch.setattr(importlib, "import_module", refuse)


@pytest.mark.parametrize("bad_name", ["os:system", "os.system", "baselines.cmaes:CMAES", "sabo.sabo:SABO",
                                      "subprocess", "", 3, None])
def test_unknown_optimizer_name_is_refused_without_importing(bad_name, no_imports):
    state = driven("ingo").state_dict()
    state["optimizer"] = bad_name
    with pytest.raises(ValueError, match=r"unknown optimizer .*known: \['bes', 'cmaes', 'ingo', 'mmes', 'sabo'\]"):
        AskTellOptimizer.from_state_dict(state)


def test_restoring_imports_nothing(no_imports):
    round_trip(driven("cmaes").state_dict())


def test_state_of_another_class_is_refused():
    with pytest.raises(ValueError, match="not a SABO"):
        sabo.SABO.from_state_dict(driven("ingo").state_dict())
    assert isinstance(baselines.INGO.from_state_dict(driven("ingo").state_dict()), baselines.INGO)


def test_duplicate_registry_name_raises():
    with pytest.raises(ValueError, match="'sabo' .* already registered"):
        type("Impostor", (AskTellOptimizer,), {"name": "sabo"})
    assert OPTIMIZERS["sabo"] is sabo.SABO


def test_subclass_without_its_own_name_cannot_save():
    class Tweaked(sabo.SABO):  # inherits name "sabo" but is not the registered class
        pass

    opt = Tweaked(np.ones(3), seed=0)
    with pytest.raises(TypeError, match="declares no registry name of its own"):
        opt.state_dict()


def test_cmaes_string_options_are_never_saved_or_restored(monkeypatch):
    opt = CMAES(np.ones(4), seed=0, options={"tolfun": "1e-11"})
    with pytest.raises(ValueError, match=r"options\['tolfun'\] is a string .*eval"):
        opt.state_dict()
    state = driven("cmaes").state_dict()
    state["config"]["options"]["tolx"] = "__import__('os').getpid()"
    state["config"]["options"]["bounds"] = [["0"] * D, None]
    with pytest.raises(ValueError, match=r"state\['config'\]\['options'\]\['bounds'\]\[0\]\[0\] is a string .*eval"):
        AskTellOptimizer.from_state_dict(state)


# ---------------------------------------------------------------------------- validation
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


COMMON = [  # (mutation, message) valid for every optimizer
    (_set(["format"], 1), r"format 2"),
    (_delete(["rng"]), r"state: missing keys \['rng'\]"),
    (_set(["extra"], 0), r"state: unexpected keys \['extra'\]"),
    (_set(["state", "nfev"], -6), r"\['nfev'\] must be an integer >= 0"),
    (_set(["state", "nit"], 2.0), r"\['nit'\] must be an integer >= 0"),
    (_set(["state", "nit"], True), r"\['nit'\] must be an integer >= 0"),
    (_set(["state", "f_best"], np.nan), r"\['f_best'\] must be finite or \+inf"),
    (_set(["state", "f_best"], "0.0"), r"\['f_best'\] must be a real number"),
    (_set(["state", "x_best"], lambda a: a[:-1]), r"\['x_best'\] must have shape \(6,\)"),
    (_set(["state", "x_best"], lambda a: a.tolist()), r"\['x_best'\] must be a numpy array"),
    (_set(["state", "pending"], lambda a: a[:, :-1]), r"\['pending'\] must have shape"),
    (_set(["state", "pending"], lambda a: np.vstack([a, a])), r"\['pending'\] must have shape"),
    (_set(["state", "pending"], lambda a: a.astype(np.float32)), r"\['pending'\] must have dtype float64"),
    (_delete(["state", "stats"]), r"state\['state'\]: missing keys \['stats'\]"),
    (_set(["state", "stats", "nonfinite_replaced"], -1), r"\['nonfinite_replaced'\] must be an integer >= 0"),
    (_set(["state", "stats", "surprise"], 1), r"\['stats'\]: unexpected keys \['surprise'\]"),
    (_set(["config", "evil"], 1), r"state\['config'\]: unexpected keys \['evil'\]"),
    (_delete(["config", "seed"]), r"state\['config'\]: missing keys \['seed'\]"),
    (_set(["config", "x0"], lambda a: np.append(a, 1.0)), r"state\['config'\]: sigma0 must be a scalar or an array of shape \(7,\)"),
    (_set(["config", "x0"], lambda a: np.where(np.arange(D) == 2, np.inf, a)), r"state\['config'\]: x0 must be finite"),
    (_set(["config", "x0"], lambda a: a > 0.5), r"state\['config'\]: x0 must contain real numbers, not booleans"),
    (_set(["config", "popsize"], 10**9), r"state\['config'\]: popsize must be an integer in \[2, 1000000\]"),
    (_set(["config", "nonfinite"], "ignore"), r"state\['config'\]: nonfinite must be one of"),
    (_set(["config", "seed"], (1, 2)), r"state\['config'\]\['seed'\]: tuple is not state data"),
    (_set(["rng", "bit_generator"], "RandomState"), r"bit_generator'\] must be one of \['MT19937', 'PCG64'"),
    (_set(["rng", "bit_generator"], "os.system"), r"bit_generator'\] must be one of"),
    (_set(["rng", "state", "state"], "seed"), r"state\['rng'\]\['state'\] is not a valid PCG64 state"),
    (_set(["rng", "state", "state"], {"state": -1, "inc": 1}), r"state\['rng'\]\['state'\] is not a valid PCG64 state"),
    (_set(["rng", "state", "bit_generator"], "MT19937"), r"must be a PCG64 state dict"),
]

SPECIFIC = [  # (optimizer, mutation, message)
    ("sabo", _set(["state", "mu"], lambda a: np.append(a, 0.0)), r"\['mu'\] must have shape \(6,\) .*d = 6"),
    ("sabo", _set(["state", "mu"], lambda a: np.where(np.arange(D) == 1, np.nan, a)), r"\['mu'\] must be finite"),
    ("sabo", _set(["state", "sigma2"], lambda a: -a), r"\['sigma2'\] must be > 0"),
    ("sabo", _set(["state", "sigma2"], lambda a: a * np.inf), r"\['sigma2'\] must be finite"),
    ("sabo", _set(["state", "sigma2_hat"], lambda a: a.reshape(2, 3)), r"\['sigma2_hat'\] must have shape"),
    ("sabo", _set(["state", "mu_hat"], lambda a: a.astype(int)), r"\['mu_hat'\] must have dtype float64"),
    ("sabo", _set(["state", "phase"], 2), r"\['phase'\] must be an integer in \[0, 1\]"),
    ("sabo", _set(["state", "z"], None), r"\['z'\] is None while an ask is pending"),
    ("sabo", _set(["config", "rho"], {"kind": "exec", "code": "0"}), r"rho schedule kind must be one of"),
    ("sabo", _set(["config", "lr"], lambda _: sabo.Constant(0.1)), r"\['lr'\]: Constant is not state data"),
    ("ingo", _set(["state", "z"], lambda a: a[:, :2]), r"\['z'\] must have shape \(6, 6\)"),
    ("ingo", _set(["config", "shaping"], "softmax"), r"shaping must be one of"),
    ("bes", _set(["state", "x"], lambda a: a * np.nan), r"\['x'\] must be finite"),
    ("bes", _set(["state", "eps"], lambda a: a * 0.5), r"\['eps'\] must contain only -1 and \+1"),
    ("bes", _set(["config", "spacing"], -1.0), r"spacing must be > 0"),
    ("mmes", _set(["state", "archive"], lambda a: np.vstack([a, a[:1]])), r"\['archive'\] must have shape"),
    ("mmes", _set(["state", "archive_gen"], lambda a: a - 100), r"\['archive_gen'\] must be >= 0"),
    ("mmes", _set(["state", "archive_gen"], lambda a: a.astype(float)), r"\['archive_gen'\] must have an integer dtype"),
    ("mmes", _set(["state", "n_stored"], 99), r"\['n_stored'\] must be an integer in \[0, 6\]"),
    ("mmes", _set(["state", "sigma"], 0.0), r"\['sigma'\] must be > 0"),
    ("mmes", _set(["state", "sigma"], np.inf), r"\['sigma'\] must be finite"),
    ("mmes", _set(["state", "popsize"], 10**9), r"\['popsize'\] must be an integer in \[2, 1000000\]"),
    ("mmes", _set(["state", "path"], lambda a: a[:3]), r"\['path'\] must have shape \(6,\)"),
    ("mmes", _set(["state", "prev_sorted"], lambda a: np.zeros(5)), r"\['prev_sorted'\] must have 0 or popsize // 2"),
    ("cmaes", _set(["state", "told"], lambda a: a[:, :-1]), r"\['told'\] must have shape \(any, 6\)"),
    ("cmaes", _set(["state", "told"], lambda a: a[:-1]), r"\['told'\] must have one row per completed iteration"),
    # pycma is rank based: shifting the told values would replay to the same state, reversing them does not
    ("cmaes", _set(["state", "told"], lambda a: a[:, ::-1].copy()), r"replay did not reproduce the saved state \(.*mean"),
    ("cmaes", _set(["state", "mean_after_tell"], lambda a: a + 1e-12), r"replay did not reproduce the saved state \(mean"),
    ("cmaes", _set(["state", "pending"], lambda a: a + 1e-12), r"replay did not reproduce .*pending population"),
    ("cmaes", _set(["rng", "state", "state", "inc"], lambda v: v + 2), r"replay did not reproduce .*random generator"),
    ("cmaes", _set(["config", "options"], {"seed": 1}), r"options may not set 'seed'"),
    ("cmaes", _set(["config", "options"], "CMA_diagonal"), r"\['options'\] must be a dict"),
]


def _check_refused(name, mutate, message):
    state = loads(dumps(driven(name).state_dict()))
    mutate(state)
    with pytest.raises(ValueError, match=message):
        AskTellOptimizer.from_state_dict(state)


@pytest.mark.parametrize("name", list(baselines.REGISTRY))
@pytest.mark.parametrize("mutate,message", COMMON, ids=[m for _, m in COMMON])
def test_mutated_state_is_refused_naming_the_entry(name, mutate, message):
    _check_refused(name, mutate, message)


@pytest.mark.parametrize("name,mutate,message", SPECIFIC, ids=[f"{n}:{m}" for n, _, m in SPECIFIC])
def test_mutated_optimizer_specific_state_is_refused(name, mutate, message):
    _check_refused(name, mutate, message)


def test_unmutated_copies_restore():
    """The mutation tests above start from states that restore: their failures come from the mutation."""
    for name in baselines.REGISTRY:
        state = loads(dumps(driven(name).state_dict()))
        AskTellOptimizer.from_state_dict(copy.deepcopy(state))


def test_other_bit_generators_are_accepted():
    opt = driven("ingo", pending=False)
    state = opt.state_dict()
    for name, cls in BIT_GENERATORS.items():
        bg = cls(5)
        state["rng"] = {"bit_generator": name, "state": sabo.state.to_data(bg.state)}
        restored = round_trip(state)
        assert type(restored._rng.bit_generator) is cls
        np.testing.assert_array_equal(restored._rng.standard_normal(3), np.random.Generator(cls(5)).standard_normal(3))


def test_mmes_restored_popsize_after_restart_rebuilds_its_weights():
    opt = MMES(np.zeros(4), popsize=6, seed=0, restarts=True)
    while opt.stats["restarts"] == 0:
        X = opt.ask()
        opt.tell(X, np.zeros(len(X)))  # flat: sigma collapses and the run restarts
    restored = round_trip(opt.state_dict())
    assert restored.popsize == opt.popsize == 12 and np.array_equal(restored._weights, opt._weights)
    assert restored.state_dict()["config"]["popsize"] == 6
