"""Adding an optimizer is one class and one registration.

A random search defined at test time (``helpers.define_random_search``) and registered the public way
(the class attribute ``name``, then ``baselines.register``) passes the registry-wide conformance checks of
tests/test_protocol.py (the same functions, not copies), runs and resumes a synthetic-study run
through the engine, is costed by the study and previewed by the demo; the registries are copies
restored by monkeypatch, so other tests never see it. The example of docs/extending/optimizer.md runs here too.
"""
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import checkpoint_of, define_random_search, deterministic_part, small_config
from test_protocol import (
    CHECKS,
    check_evals_per_iteration_matches_the_asks,
    check_global_random_states_untouched,
    check_same_seed_same_run,
)

import baselines
import sabo.protocol
from replication import demo
from replication.engine import execute
from replication.synthetic import study as synthetic
from sabo.protocol import ROUND_OVERHEAD, AskTellOptimizer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def random_search(registries):
    return baselines.register(define_random_search())


def test_registration_is_explicit_and_checked(registries):
    cls = define_random_search()
    assert sabo.protocol.OPTIMIZERS["toy_random_search"] is cls  # the name alone makes its states restorable
    with pytest.raises(ValueError, match="unknown optimizer 'toy_random_search'"):
        baselines.make("toy_random_search", x0=np.ones(3))  # but studies see registered methods only
    assert baselines.register(cls) is cls and baselines.REGISTRY["toy_random_search"] is cls
    assert baselines.register(cls) is cls  # registering again changes nothing
    assert isinstance(baselines.make("toy_random_search", x0=np.ones(3), seed=0), cls)

    with pytest.raises(ValueError, match="'toy_random_search' .* already registered"):
        define_random_search()
    with pytest.raises(ValueError, match="declares no registry name of its own"):
        baselines.register(type("Unnamed", (cls,), {}))
    with pytest.raises(TypeError, match="subclass of sabo.protocol.AskTellOptimizer"):
        baselines.register(object)

    class NoSeed(AskTellOptimizer):
        name = "no_seed"

        def __init__(self, x0, sigma0=1.0, popsize=4):
            super().__init__(x0, sigma0=sigma0, popsize=popsize, seed=0)

    with pytest.raises(ValueError, match=r"constructor must take .*missing \['seed'\]"):
        baselines.register(NoSeed)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_a_registered_optimizer_passes_the_conformance_checks(random_search, check):
    check("toy_random_search")


def test_the_checks_catch_a_broken_optimizer(registries):
    baselines.register(define_random_search("global_draws", global_rng=True))
    with pytest.raises(AssertionError, match="NumPy's global random state changed"):
        check_global_random_states_untouched("global_draws")
    with pytest.raises(AssertionError):
        check_same_seed_same_run("global_draws")
    baselines.register(define_random_search("two_rounds_claimed", rounds=2))
    with pytest.raises(AssertionError, match="one iteration took 1 asks; the class declares rounds_per_iteration = 2"):
        check_evals_per_iteration_matches_the_asks("two_rounds_claimed")


def test_a_registered_optimizer_runs_and_resumes_in_the_synthetic_study(random_search, tmp_path):
    cfg = small_config("toy_random_search", dim=8, popsize=10, T=60)
    assert cfg.params == {"sigma0": 1.0, "popsize": 10}  # a method the study does not know runs with its defaults
    assert synthetic.cost(cfg) == 60 * random_search.cost_per_iteration(8, 10) == 60 * (10 * 8 + ROUND_OVERHEAD)

    record = execute(cfg, tmp_path / "straight")
    result = record["result"]
    assert result["status"] == "completed" and result["evals_per_iteration"] == 10
    assert result["curve"]["nfev"][-1] == 600 and result["final"]["f_mean"] < result["curve"]["f_mean"][0]

    checkpoint_of(cfg, tmp_path / "resumed", iters=30)  # asserts that the checkpoint exists
    resumed = execute(cfg, tmp_path / "resumed")  # restored by registry name from the checkpoint
    assert resumed["provenance"]["resumed"] == 1
    assert deterministic_part(resumed) == deterministic_part(record)


def test_the_demo_previews_every_registered_method(random_search, capsys, monkeypatch):
    assert demo.method_params("toy_random_search", 4, 6, 600) == {"sigma0": 1.0, "popsize": 6}

    def not_installed(member):  # as without the `nevergrad` extra
        raise ImportError("the Nevergrad adapter needs the nevergrad package")

    monkeypatch.setattr(baselines.Nevergrad, "check_member", staticmethod(not_installed))
    from threadpoolctl import threadpool_info

    def threads():  # the BLAS pools (torch's own is checked in test_executors)
        return {p["filepath"]: p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    seen, run = [], demo.sabo.run
    monkeypatch.setattr(demo.sabo, "run", lambda *a, **k: seen.append(max(threads().values())) or run(*a, **k))
    before = threads()
    demo.main(["--dim", "4", "--popsize", "6", "--evals", "240"])
    after = threads()  # the demo may load libraries: those loaded before are compared
    # one BLAS thread while it runs the methods, as a study's runs; the caller's threads again after it
    assert set(seen) == {1} and {k: after[k] for k in before} == before
    out, err = capsys.readouterr()
    lines = out.splitlines()
    header = lines[1].split()
    # every registered method, the toy among them (an installed plugin loaded by another test may follow it)
    assert header == ["function", *baselines.REGISTRY] and "toy_random_search" in header
    column = header.index("nevergrad")
    assert all(line.split()[column] == "n/a" for line in lines[2:6])  # n/a, not skipped: it cannot run here
    assert "n/a: nevergrad (the Nevergrad adapter needs the nevergrad package)" in lines
    # the paper's rho = 100 / sqrt(T + 1) at d = 4: SABO's warnings, once each after the table, not on stderr
    assert "settings warning, sabo on ellipsoid, l12_ellipsoid, different_powers, levy: SABO's KL radius" in out
    assert "SettingsWarning" not in err


@pytest.mark.parametrize("argv, message", [
    (["--dim", "0"], "argument --dim: must be an integer >= 1 (got '0')"),
    (["--popsize", "1"], "argument --popsize: must be an integer >= 2 (got '1')"),
    # below one iteration of SABO (2N): it used to be run and reported as "diverged"
    (["--popsize", "6", "--evals", "11"], "argument --evals: must be at least 12, one iteration of every method at "
                                          "N = 6 (got 11)"),
])
def test_the_demo_refuses_bad_arguments_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        demo.main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err == f"replication.demo: error: {message}\n"


def test_the_registries_are_restored_after_a_test(monkeypatch):
    before = dict(baselines.REGISTRY)
    monkeypatch.setattr(sabo.protocol, "OPTIMIZERS", dict(sabo.protocol.OPTIMIZERS))
    monkeypatch.setattr(baselines, "REGISTRY", dict(baselines.REGISTRY))
    baselines.register(define_random_search())
    monkeypatch.undo()
    assert "toy_random_search" not in sabo.protocol.OPTIMIZERS and "toy_random_search" not in baselines.REGISTRY
    assert baselines.REGISTRY == before


def test_the_documented_example_runs(registries, capsys):
    text = (ROOT / "docs" / "extending" / "optimizer.md").read_text()
    section = text[text.index("## Adding an optimizer to this repository"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace = {}
    exec(compile(code, "docs/extending/optimizer.md", "exec"), namespace)
    assert namespace["opt"].evals_per_iteration == 20 and namespace["res"].nit == 300
    assert np.array_equal(namespace["again"].ask(), namespace["opt"].ask())
    fun, evals = capsys.readouterr().out.split()
    assert float(fun) < 0.2 and evals == "20"
