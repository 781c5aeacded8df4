"""Data-only optimizer state: registry-only class lookup and validation of every restored entry
(a checkpoint may come from an untrusted directory). The registry-wide part (round trips through
sabo.serialization, the hostile states every optimizer must refuse) is in tests/test_protocol.py;
this file keeps the class lookup and the optimizer-specific hostile states."""
import importlib
import importlib.util
import re

import numpy as np
import pytest
from test_protocol import D, _set, check_refused, driven, prepare, round_trip

import baselines
import sabo
from baselines.cmaes import CMAES
from baselines.mmes import MMES
from sabo.protocol import BIT_GENERATORS, OPTIMIZERS, AskTellOptimizer

if importlib.util.find_spec("torch") is not None:
    # GIBO's small tensors: on a loaded machine a second torch thread made its checks 5-10x slower
    pytestmark = pytest.mark.usefixtures("one_torch_thread")


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
    known = re.escape(str(sorted(OPTIMIZERS)))  # ['bes', 'cmaes', 'ingo', 'mmes', 'sabo', ...]
    with pytest.raises(ValueError, match=r"unknown optimizer .*known: " + known):
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
def _empty_region(state):
    state["state"]["X"], state["state"]["Y"] = np.empty((0, D)), np.empty(0)


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
    ("sabo", _set(["config", "rho"], {"kind": "inv_sqrt", "scale": 5.0, "horizon": 10**400}),
     r"rho\.horizon must be an integer in \[0, 9223372036854775807\] \(got an integer of about 401 digits\)"),
    ("ingo", _set(["state", "z"], lambda a: a[:, :2]), r"\['z'\] must have shape \(6, 6\)"),
    ("ingo", _set(["config", "shaping"], "softmax"), r"shaping must be one of"),
    ("bes", _set(["state", "x"], lambda a: a * np.nan), r"\['x'\] must be finite"),
    ("bes", _set(["state", "eps"], lambda a: a * 0.5), r"\['eps'\] must contain only -1 and \+1"),
    ("bes", _set(["config", "spacing"], -1.0), r"spacing must be > 0"),
    ("mmes", _set(["state", "archive"], lambda a: np.vstack([a, a[:1]])), r"\['archive'\] must have shape"),
    ("mmes", _set(["state", "archive_gen"], lambda a: a - 100), r"\['archive_gen'\] must be >= 0"),
    ("mmes", _set(["state", "archive_gen"], lambda a: a.astype(float)),
     r"\['archive_gen'\] must have an integer dtype"),
    ("mmes", _set(["state", "n_stored"], 99), r"\['n_stored'\] must be an integer in \[0, 6\]"),
    ("mmes", _set(["state", "sigma"], 0.0), r"\['sigma'\] must be > 0"),
    ("mmes", _set(["state", "sigma"], np.inf), r"\['sigma'\] must be finite"),
    ("mmes", _set(["state", "popsize"], 10**9), r"\['popsize'\] must be an integer in \[2, 1000000\]"),
    ("mmes", _set(["state", "path"], lambda a: a[:3]), r"\['path'\] must have shape \(6,\)"),
    ("mmes", _set(["state", "prev_sorted"], lambda a: np.zeros(5)), r"\['prev_sorted'\] must have 0 or popsize // 2"),
    ("cmaes", _set(["state", "told"], lambda a: a[:, :-1]), r"\['told'\] must have shape \(any, 6\)"),
    ("cmaes", _set(["state", "told"], lambda a: a[:-1]), r"\['told'\] must have one row per completed iteration"),
    # pycma is rank based: shifting the told values would replay to the same state, reversing them does not
    ("cmaes", _set(["state", "told"], lambda a: a[:, ::-1].copy()),
     r"replay did not reproduce the saved state \(.*mean"),
    ("cmaes", _set(["state", "mean_after_tell"], lambda a: a + 1e-12),
     r"replay did not reproduce the saved state \(mean"),
    ("cmaes", _set(["state", "pending"], lambda a: a + 1e-12), r"replay did not reproduce .*pending population"),
    ("cmaes", _set(["rng", "state", "state", "inc"], lambda v: v + 2), r"replay did not reproduce .*random generator"),
    ("cmaes", _set(["config", "options"], {"seed": 1}), r"options may not set 'seed'"),
    ("cmaes", _set(["config", "options"], "CMA_diagonal"), r"\['options'\] must be a dict"),
    # turbo: box [-2, 3]^6, popsize 6, succtol 3, failtol 1; the state has a TR batch pending
    ("turbo", _set(["state", "X"], lambda a: a + 10.0), r"\['X'\] must lie inside the box"),
    ("turbo", _set(["state", "X"], lambda a: a[:, :-1]), r"\['X'\] must have shape \(any, 6\)"),
    ("turbo", _set(["state", "Y"], lambda a: a[:-1]), r"\['Y'\] must have one value per row of X"),
    ("turbo", _set(["state", "Y"], lambda a: a * np.nan), r"\['Y'\] must be finite"),
    ("turbo", _set(["state", "design"], np.zeros((5, D))), r"\['design'\] must have a multiple of popsize = 6 rows"),
    ("turbo", _set(["state", "design"], np.zeros((6, D))), r"\['pending'\] must be the first popsize rows"),
    ("turbo", _empty_region, r"X and design are both empty"),
    ("turbo", _set(["state", "length"], 0.0), r"\['length'\] must be > 0"),
    ("turbo", _set(["state", "length"], 3.2), r"\['length'\] must lie in \[0.0078125, 1.6\]"),
    ("turbo", _set(["state", "succ_count"], 3), r"\['succ_count'\] must be an integer in \[0, 2\]"),
    ("turbo", _set(["state", "fail_count"], 1), r"\['fail_count'\] must be an integer in \[0, 0\]"),
    ("turbo", _set(["state", "tr_bounds"], lambda a: a[:1]), r"\['tr_bounds'\] must have shape \(2, 6\)"),
    ("turbo", _set(["config", "bounds"], lambda a: a[::-1].copy()), r"bounds must have lb < ub"),
    ("turbo", _set(["config", "device"], "tpu"), r"device must be 'cpu', 'cuda'"),
    ("turbo", _set(["config", "n_candidates"], 2), r"n_candidates must be an integer >= 6"),
    ("gibo", _set(["state", "Y"], lambda a: a[:-1]), r"\['X'\] and \['Y'\] must hold the same number of points"),
    ("gibo", _set(["state", "X"], lambda a: np.vstack([a, a])), r"at most n_max = 12"),
    ("gibo", _set(["state", "raw_lengthscale"], lambda a: a * np.nan), r"\['raw_lengthscale'\] must be finite"),
    ("gibo", _set(["state", "raw_outputscale"], np.inf), r"\['raw_outputscale'\] must be finite"),
    ("gibo", _set(["state", "theta"], lambda a: a[:-1]), r"\['theta'\] must have shape \(6,\)"),
]


@pytest.mark.parametrize("name,mutate,message", SPECIFIC, ids=[f"{n}:{m}" for n, _, m in SPECIFIC])
def test_mutated_optimizer_specific_state_is_refused(name, mutate, message, request):
    prepare(name, request)
    check_refused(name, mutate, message)


def test_the_largest_count_a_state_may_hold_still_runs():
    """nit = 10**400 was restored, and the next ask of a decaying schedule raised OverflowError (sqrt(nit + 1.0));
    the bound, int64's largest, is one the arithmetic takes."""
    state = driven("sabo").state_dict()
    state["config"]["rho"] = {"kind": "inv_sqrt", "scale": 5.0}  # rho_t = 5 / sqrt(t + 1)
    state["state"]["nit"] = 10**400
    with pytest.raises(ValueError, match=r"\['nit'\] must be an integer in \[0, 9223372036854775807\]"):
        AskTellOptimizer.from_state_dict(state)
    state["state"]["nit"] = 2**63 - 1
    opt = AskTellOptimizer.from_state_dict(state)
    for _ in range(2):
        X = opt.ask()
        opt.tell(X, np.sum(X**2, axis=1))
    assert opt.nit == 2**63 and np.all(np.isfinite(opt.mean))


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
