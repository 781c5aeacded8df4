"""Nevergrad both ways: its optimizers as methods of the suite (baselines/nevergrad.py), SABO as a Nevergrad
optimizer (sabo/integrations/nevergrad.py).

The adapter passes the registry-wide conformance checks of tests/test_protocol.py: there on
``nevergrad`` with the member of ``PARAMS``, here the same check functions on further members.
"""
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import test_protocol
from helpers import checkpoint_of, deterministic_part, small_config, tiny_params
from test_protocol import (
    CHECKS,
    check_bad_parameters_raise_naming_them,
    check_default_popsize_is_declared_on_the_class,
    check_popsize_bounds,
)

ng = pytest.importorskip("nevergrad")  # the `nevergrad` extra, installed by the dev extra
import baselines  # noqa: E402
from baselines.nevergrad import Nevergrad, numpy_refuses_float_of_arrays  # noqa: E402
from replication import engine  # noqa: E402
from replication.config import RunConfig  # noqa: E402
from replication.errors import UsageError  # noqa: E402
from replication.params import validate_params  # noqa: E402
from replication.storage import read_state, write_state  # noqa: E402
from replication.synthetic import study as synthetic  # noqa: E402
from sabo.state import tree_equal  # noqa: E402


def sphere(X):
    return np.sum(X**2, axis=1)


def drive(opt, rounds, fun=sphere):
    for _ in range(rounds):
        X = opt.ask()
        opt.tell(X, fun(X))
    return opt


# ---------------------------------------------------------------------------- the adapter
#: the checks that build through test_protocol.build (and so read PARAMS); the others do not depend on the member
MEMBER_CHECKS = [c for c in CHECKS if c not in (check_bad_parameters_raise_naming_them, check_popsize_bounds,
                                                check_default_popsize_is_declared_on_the_class)]


@pytest.mark.parametrize("check", MEMBER_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize("member", ["TwoPointsDE", "OnePlusOne", "PSO"])
def test_more_members_pass_the_conformance_checks(member, check, monkeypatch):
    monkeypatch.setitem(test_protocol.PARAMS, "nevergrad", {"algorithm": member})
    check("nevergrad")


def test_a_member_is_named_family_colon_algorithm():
    opt = drive(baselines.make("nevergrad:PSO", x0=np.ones(4), popsize=6, seed=0), 3)
    assert type(opt) is Nevergrad and opt.algorithm == "PSO" and baselines.get("nevergrad:PSO") is Nevergrad
    assert "algorithm" in baselines.parameters("nevergrad") and "algorithm" not in baselines.parameters("nevergrad:PSO")
    state = opt.state_dict()
    assert state["optimizer"] == "nevergrad" and state["config"]["algorithm"] == "PSO"  # saved by its class's name
    assert np.array_equal(baselines.restore("nevergrad:PSO", state).ask(), opt.ask())
    with pytest.raises(ValueError, match=r"state\['config'\]\['algorithm'\] is 'PSO', but the method is "
                                         r"'nevergrad:OnePlusOne'"):
        baselines.restore("nevergrad:OnePlusOne", state)
    assert baselines.make("nevergrad", x0=np.ones(4), seed=0).algorithm == "DiagonalCMA"
    refused = [
        ("nevergrad:PSO", {"algorithm": "CMA"}, r"nevergrad:PSO has no parameter\(s\) \['algorithm'\]"),
        ("nevergrad:NoSuchOptimizer", {}, "algorithm must be a name of nevergrad.optimizers.registry"),
        ("nevergrad:NelderMead", {}, "'NelderMead' does not accept parallel asks"),
        ("nevergrad", {"algorithm": "Cobyla"}, "'Cobyla' does not accept parallel asks"),
        ("nevergrad:Bad-Name", {}, "the member after ':' must be a name"),
        ("nevergrad:", {}, "the member after ':' must be a name"),
        ("sabo:PSO", {}, r"'sabo' is one method, not a family of methods .*nevergrad:<algorithm>"),
        ("nevergrad", {"budget": 0}, r"budget must be an integer in \[1, 9223372036854775807\]"),
    ]
    for name, params, message in refused:
        with pytest.raises(ValueError, match=message):
            baselines.make(name, x0=np.ones(4), seed=0, **params)


def test_nevergrads_draws_from_the_global_random_state_are_private():
    """LognormalDiscreteOnePlusOne draws from np.random in its ask: directly its run depends on the caller's
    global seed (the negative control); through the adapter it does not, and the global state is untouched."""
    member = "LognormalDiscreteOnePlusOne"

    def direct(global_seed):
        np.random.seed(global_seed)
        parametrization = ng.p.Array(init=np.ones(6))
        parametrization.random_state = np.random.RandomState(0)
        optimizer = ng.optimizers.registry[member](parametrization=parametrization, budget=100, num_workers=4)
        values = []
        for _ in range(5):
            candidates = [optimizer.ask() for _ in range(4)]
            for c in candidates:
                optimizer.tell(c, float(np.sum(c.value**2)))
            values.append([c.value for c in candidates])
        return np.array(values)

    def adapted(global_seed):
        np.random.seed(global_seed)
        before = np.random.get_state()[1].copy()
        opt = baselines.make(f"nevergrad:{member}", x0=np.ones(6), popsize=4, seed=0, budget=100)
        populations = []
        for _ in range(5):
            X = opt.ask()
            opt.tell(X, sphere(X))
            populations.append(X)
        assert np.array_equal(np.random.get_state()[1], before)
        return np.array(populations)

    assert not np.array_equal(direct(1), direct(2))
    assert np.array_equal(adapted(1), adapted(2))


@pytest.mark.parametrize("call", ["ask", "tell"])
def test_a_failed_call_into_nevergrad_is_undone(call, monkeypatch):
    opt, twin = (drive(baselines.make("nevergrad", x0=np.linspace(0.5, 1.0, 5), popsize=6, seed=1), 3)
                 for _ in range(2))
    X = opt.ask() if call == "tell" else None
    before = opt.state_dict()
    real, calls = getattr(opt._ng, call), []

    def fails_on_the_fourth(*args):
        if len(calls) == 3:
            raise ArithmeticError("boom")
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(opt._ng, call, fails_on_the_fourth)
    with pytest.raises(RuntimeError, match=rf"Nevergrad's DiagonalCMA failed in {call}\(\) \(ArithmeticError: boom\); "
                                           "the optimizer was restored to its state before the call"):
        opt.tell(X, sphere(X)) if call == "tell" else opt.ask()
    assert len(calls) == 3 and tree_equal(opt.state_dict(), before)
    drive(opt, 4)  # continues as if the failed call had never happened
    drive(twin, 4)
    assert tree_equal(opt.state_dict(), twin.state_dict())


@pytest.mark.skipif(not numpy_refuses_float_of_arrays(), reason="this NumPy converts 1-element arrays with float()")
def test_ngopt_is_refused_up_front_where_it_would_run_metamodel_under_this_numpy(tmp_path):
    """The known failure of docs/baselines.md: nevergrad 1.0.12's MetaModel, NGOpt's choice at d = 6 with 6 workers
    and 300 evaluations, fails a few batches in under NumPy 2.4 (the negative control: Nevergrad itself); the adapter
    refuses it when built, so a study stops before its first run with one line (the engine builds each method first)."""
    parametrization = ng.p.Array(init=np.ones(6))
    direct = ng.optimizers.registry["NGOpt"](parametrization=parametrization, budget=300, num_workers=6)
    with warnings.catch_warnings(), pytest.raises(TypeError, match="only 0-dimensional arrays"):
        warnings.simplefilter("ignore")
        for _ in range(20):
            candidates = [direct.ask() for _ in range(6)]
            for c in candidates:
                direct.tell(c, float(np.sum(c.value**2)))
    with pytest.raises(ValueError, match=r"^algorithm 'NGOpt' runs Nevergrad's MetaModel here \(d = 6, popsize 6, "
                                         r"budget 300\), whose surrogate step calls float\(\) on a 1-element array"):
        baselines.make("nevergrad:NGOpt", x0=np.ones(6), popsize=6, seed=0, budget=300)
    with pytest.raises(ValueError, match="'MetaModel' runs Nevergrad's MetaModel here"):
        baselines.make("nevergrad:MetaModel", x0=np.ones(30), popsize=6, seed=0, budget=300)
    assert baselines.make("nevergrad:NGOpt", x0=np.ones(20), popsize=10, seed=0, budget=1000).nit == 0  # CMA-ES there
    refused, fine = (small_config("ngopt", dim=dim, popsize=n, T=T, optimizer="nevergrad:NGOpt")
                     for dim, n, T in ((6, 6, 50), (20, 10, 100)))  # 300 and 1000 evaluations
    engine.check_parameters([fine])
    with pytest.raises(UsageError, match=r"^run synthetic/d6_N6/ellipsoid/ngopt/seed0: method 'ngopt' \(optimizer "
                                         r"'nevergrad:NGOpt'\) refuses its parameters: algorithm 'NGOpt' runs "
                                         r"Nevergrad's MetaModel here"):
        engine.check_parameters([fine, refused])


def test_the_engine_passes_the_budget_and_resumes_a_nevergrad_run_identically(tmp_path):
    assert engine._budget_argument("nevergrad:NGOpt", {"popsize": 10}, 10, {"max_iter": 100}) == {"budget": 1000}
    assert engine._budget_argument("nevergrad", {"popsize": None}, 12, {"max_iter": 30}) == {"budget": 30 * (4 + 7)}
    assert engine._budget_argument("nevergrad", {"popsize": 10}, 12, {"max_evals": 555}) == {"budget": 555}
    assert engine._budget_argument("sabo", {"popsize": 8}, 12, {"max_iter": 30}) == {}  # SABO takes no budget
    # d = 10, 10 workers, 1000 evaluations: NGOpt chooses CMA-ES (not MetaModel: docs/baselines.md, known failure)
    cfg = small_config("ngopt", dim=10, popsize=10, T=100, optimizer="nevergrad:NGOpt")
    assert cfg.code_version.endswith("+nevergrad:NGOpt.r1")
    straight = engine.execute(cfg, tmp_path / "straight")
    result = straight["result"]
    assert result["status"] == "completed" and result["curve"]["nfev"][-1] == 1000
    assert result["final"]["f_mean"] < 1e-2 * result["curve"]["f_mean"][0]
    ckpt = checkpoint_of(cfg, tmp_path / "resumed", iters=40)
    saved = read_state(ckpt)["optimizer"]
    assert saved["optimizer"] == "nevergrad" and saved["config"]["algorithm"] == "NGOpt"
    assert saved["config"]["budget"] == 1000 and saved["state"]["told"].shape == (40, 10)
    resumed = engine.execute(cfg, tmp_path / "resumed")
    assert resumed["provenance"]["resumed"] == 1
    assert deterministic_part(resumed) == deterministic_part(straight)
    # the ':' stays inside the config: the run's directory is its label's
    assert engine.record_path(tmp_path, cfg) == tmp_path / "synthetic" / "d10_N10" / "ngopt" / f"{cfg.hash}.json"
    with pytest.raises(ValueError, match=r"RunConfig.method: 'nevergrad:NGOpt' is not a valid name"):
        RunConfig(**{**cfg.to_dict(), "method": "nevergrad:NGOpt"})


def test_a_saved_budget_beyond_int64_is_refused():
    """A budget read from a state file is checked as a user's is: an integer in [1, int64 max] (10**400 was
    accepted). A budget within that range but other than the run's (600 -> 10**6) is a consistent state of another
    configuration: the run engine finds it (the next test)."""
    state = drive(baselines.make("nevergrad", x0=np.zeros(4), popsize=6, seed=0, budget=600), 3).state_dict()
    for budget in (10**400, 2**63, 0):
        state["config"]["budget"] = budget
        with pytest.raises(ValueError, match=r"^state\['config'\]: budget must be an integer in \[1, "
                                             r"9223372036854775807\]"):
            Nevergrad.from_state_dict(state)
    state["config"]["budget"] = 2**63 - 1
    assert Nevergrad.from_state_dict(state)._budget == 2**63 - 1


def test_a_checkpoint_whose_budget_is_not_the_runs_is_not_resumed(tmp_path, capsys):
    """The issue's case: a Nevergrad checkpoint whose saved budget was changed from the run's 600 to 10**6 replayed
    fine (the budget does not change DiagonalCMA's draws) and the run resumed; its optimizer state is bound to the
    run's config, so it is moved aside and the run computed afresh."""
    cfg = small_config("nevergrad", dim=4, popsize=6, T=100)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=30)
    state = read_state(ckpt)
    assert state["optimizer"]["config"]["budget"] == 600
    state["optimizer"]["config"]["budget"] = 10**6
    write_state(ckpt, state)
    capsys.readouterr()
    record = engine.execute(cfg, tmp_path / "runs")
    assert record["provenance"]["resumed"] == 0
    assert deterministic_part(record) == deterministic_part(engine.execute(cfg, tmp_path / "fresh"))
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "its optimizer state is not this run's: saved with budget 1000000, this run's 600" in line


def test_params_yaml_runs_a_member_under_a_label():
    params = tiny_params(methods=("sabo",))
    methods = params["synthetic"]["methods"]
    methods["nevergrad:NGOpt"] = {}
    with pytest.raises(UsageError) as refused:  # a method name is a directory: no ':'
        validate_params(params)
    assert str(refused.value) == (
        "params.yaml: synthetic.methods: key 'nevergrad:NGOpt' is not a valid name (letters, digits, '_', '-', '.'; "
        "not starting with '.'); a method named family:member runs under a label of its own: "
        "`nevergrad_NGOpt: {optimizer: 'nevergrad:NGOpt'}`")
    del methods["nevergrad:NGOpt"]
    for grid, message in [
        ({"optimizer": "nevergrad:NoSuch"}, "synthetic.methods.ngopt.optimizer = 'nevergrad:NoSuch': algorithm must be "
                                            "a name of nevergrad.optimizers.registry"),
        ({"optimizer": "nevergrad:NGOpt", "algorithm": "PSO"}, "key 'algorithm' is not a parameter of nevergrad:NGOpt"),
        ({"optimizer": "nevergrad:NGOpt", "budget": 5}, "key 'budget' is not a parameter"),  # the engine's to give
    ]:
        methods["ngopt"] = grid
        with pytest.raises(UsageError, match=re.escape(message)):
            validate_params(params)
    methods["ngopt"] = {"optimizer": "nevergrad:NGOpt"}
    validate_params(params)
    [cfg] = [c for c in synthetic.configs(params) if c.method == "ngopt" and c.seed == 0 and
             c.problem["name"] == "ellipsoid"]
    assert cfg.params["optimizer"] == "nevergrad:NGOpt"
    assert synthetic.cost(cfg) == 30 * Nevergrad.cost_per_iteration(10, 6)  # costed by the family's class


# ---------------------------------------------------------------------------- SABO in Nevergrad
def shifted_sphere(x):
    return float(np.sum((x - 0.5) ** 2))


def test_sabo_minimises_a_10d_sphere_as_a_nevergrad_optimizer():
    """docs/sabo/nevergrad.md: defaults, budget 8000 evaluations, seed 0: F = 5.7e-7 measured (F(0) = 2.5)."""
    import sabo
    import sabo.integrations.nevergrad as integration

    assert ng.optimizers.registry["SABO"] is integration.SABO
    optimizer = ng.optimizers.registry["SABO"](parametrization=10, budget=8000)
    optimizer.parametrization.random_state = np.random.RandomState(0)
    recommendation = optimizer.minimize(shifted_sphere)
    assert optimizer.num_tell == 8000 and optimizer.sabo.nit == 8000 // (2 * sabo.ingo_default_popsize(10))
    assert np.array_equal(recommendation.value, optimizer.sabo.mean)
    assert shifted_sphere(recommendation.value) < 1e-6


def test_sabo_in_nevergrad_hands_out_whole_populations():
    from sabo.integrations.nevergrad import ParametrizedSABO

    configured = ParametrizedSABO(popsize=6, lr=0.2, baseline="center")
    assert repr(configured) == "ParametrizedSABO(baseline='center', lr=0.2, popsize=6)"
    with pytest.raises(ValueError, match="lr must be > 0"):
        ParametrizedSABO(lr=-1.0)
    parametrization = ng.p.Array(init=np.zeros(3)).set_bounds(-1.0, 1.0)
    parametrization.random_state = np.random.RandomState(1)
    optimizer = configured(parametrization=parametrization, budget=700, num_workers=6)  # popsize max(6, 6)
    for _ in range(2):  # perturbation and update round: 6 samples + the centre each
        candidates = [optimizer.ask() for _ in range(7)]
        assert all(np.all(np.abs(c.value) <= 1.0) for c in candidates)  # the parametrization's bounds hold
        for c in reversed(candidates):  # in any order
            optimizer.tell(c, shifted_sphere(c.value))
    assert optimizer.sabo.nit == 1 and optimizer.sabo.nfev == 14
    candidates = [optimizer.ask() for _ in range(7)]
    extra = optimizer.ask()  # every row is out: a sample of the round's distribution, not one of SABO's
    assert optimizer.extra_candidates == 1 and not any(np.array_equal(extra.value, c.value) for c in candidates)
    optimizer.tell(extra, 0.0)  # the best value of all, and not SABO's: nothing changes
    with pytest.raises(ng.errors.TellNotAskedNotSupportedError, match="SABO takes the values of its own samples"):
        optimizer.tell(optimizer.parametrization.spawn_child(new_value=np.zeros(3)), 1.0)
    assert optimizer.sabo.nfev == 14
    for c in candidates:
        optimizer.tell(c, shifted_sphere(c.value))
    assert optimizer.sabo.nfev == 21
    with pytest.raises(ng.errors.TellNotAskedNotSupportedError):  # told once already
        optimizer.tell(candidates[0], 1.0)


def test_sabo_does_not_need_nevergrad():
    code = "import sys, sabo, baselines, replication.engine; sys.exit('nevergrad' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_the_nevergrad_sabo_has_sabos_defaults_and_passes_every_setting_on():
    """ParametrizedSABO repeats SABO's keyword defaults (Nevergrad's repr lists the arguments set): they must agree."""
    import inspect

    import sabo
    from sabo.integrations.nevergrad import ParametrizedSABO

    config = ParametrizedSABO()
    expected = inspect.signature(sabo.SABO).parameters
    assert config.settings == {k: expected[k].default for k in config.settings}
    assert set(inspect.signature(ParametrizedSABO).parameters) == {"popsize", "scale", *config.settings}
    chosen = ParametrizedSABO(lr=0.3, rho=0.7, baseline="center", shaping="none", precision_floor=0.1)
    assert (chosen.lr, chosen.rho, chosen.popsize, chosen.scale) == (0.3, 0.7, None, 1.0)
    config = chosen(ng.p.Array(shape=(5,)), budget=40).sabo.state_dict()["config"]
    assert config["lr"] == {"kind": "constant", "value": 0.3} and config["rho"] == {"kind": "constant", "value": 0.7}
    assert (config["baseline"], config["shaping"], config["precision_floor"]) == ("center", "none", 0.1)


def sabo_optimizer(parametrization, budget, num_workers=1, seed=0, config=None):
    import sabo.integrations.nevergrad as integration

    configured = ng.optimizers.registry["SABO"] if config is None else integration.ParametrizedSABO(**config)
    optimizer = configured(parametrization=parametrization, budget=budget, num_workers=num_workers)
    optimizer.parametrization.random_state = np.random.RandomState(seed)
    return optimizer


@pytest.mark.parametrize("d, workers", [(2, 4), (10, 8), (5, 3)])
def test_num_workers_need_not_divide_sabos_population(d, workers):
    """The issue's call: Nevergrad's minimize asks num_workers candidates, then tells them. The default population is
    the smallest multiple of num_workers at or above SABO's default, so that batches fill it exactly."""
    import sabo

    optimizer = sabo_optimizer(d, 40 * workers, workers)
    recommendation = optimizer.minimize(lambda x: float(sum(x**2)))
    default = sabo.ingo_default_popsize(d)
    assert optimizer.sabo.popsize % workers == 0 and default <= optimizer.sabo.popsize < default + workers
    assert optimizer.num_tell == 40 * workers and optimizer.extra_candidates == 0
    assert optimizer.sabo.nfev == 40 * workers // optimizer.sabo.popsize * optimizer.sabo.popsize
    assert float(np.sum(recommendation.value**2)) < d  # F(0) = d for the initial mean... and it moved downhill
    configured = sabo_optimizer(d, 40 * workers, workers, config={"popsize": 6})
    configured.minimize(lambda x: float(sum(x**2)))  # a population that batches do not fill: extras, no error
    assert configured.sabo.popsize == 6 and configured.num_tell == 40 * workers
    assert (configured.extra_candidates == 0) == (6 % workers == 0)


def test_steady_state_workers_get_extra_candidates_whose_values_sabo_does_not_use():
    """Nevergrad's steady state (a real executor, batch_mode=False): num_workers candidates in flight, a new one
    asked whenever one is told. Once every row of a population is out, an extra candidate keeps the worker busy."""
    import concurrent.futures

    optimizer = sabo_optimizer(4, 400, 4)
    in_flight = [optimizer.ask() for _ in range(4)]
    while optimizer.num_ask < 400:  # deterministic: the oldest candidate finishes first
        done = in_flight.pop(0)
        optimizer.tell(done, shifted_sphere(done.value))
        in_flight.append(optimizer.ask())
    rows = optimizer.sabo.nfev
    assert optimizer.extra_candidates > 0 and rows + optimizer.extra_candidates + 4 >= 400 - optimizer.sabo.popsize
    assert rows == 2 * optimizer.sabo.nit * optimizer.sabo.popsize > 0
    threaded = sabo_optimizer(4, 2000, 4)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as executor:
        recommendation = threaded.minimize(shifted_sphere, executor=executor, batch_mode=False)
    assert threaded.num_tell == 2000 and shifted_sphere(recommendation.value) < 0.01  # F(0) = 1


def test_nevergrads_cheap_constraint_example_runs():
    """Nevergrad's documented example (its NGOpt reaches [1.0004, 0.5068]): a candidate violating the constraint is
    told +inf (the worst of its population) and asked again; the recommendation satisfies the constraint."""
    for budget, most in ((100, 1.0), (1000, 0.26)):  # the constrained optimum: 0.25 at (1, 0.5)
        optimizer = sabo_optimizer(2, budget)
        optimizer.parametrization.register_cheap_constraint(lambda x: x[0] >= 1)
        recommendation = optimizer.minimize(shifted_sphere)
        assert recommendation.value[0] >= 1 and shifted_sphere(recommendation.value) < most
        assert optimizer.num_tell == budget and optimizer.sabo.nit > budget // 12  # rejected samples told too


def test_multiobjective_losses_run():
    """Nevergrad passes +inf for points outside its hypervolume's bound: the worst of their population, and a
    population without a finite loss leaves SABO's distribution as it was."""
    optimizer = sabo_optimizer(3, 600)
    optimizer.minimize(lambda x: [float(np.sum(x**2)), float(np.sum((x - 1.0) ** 2))])
    front = optimizer.pareto_front()
    assert optimizer.num_tell == 600 and len(front) >= 5
    assert all(np.all(np.isfinite(c.losses)) for c in front)
    import sabo.integrations.nevergrad as integration

    assert np.array_equal(integration.worst_for_inf(np.array([1.0, np.inf, 3.0])), [1.0, 3.0, 3.0])
    assert np.array_equal(integration.worst_for_inf(np.array([np.inf, np.inf])), [0.0, 0.0])


def test_bounded_parametrizations_start_at_nevergrads_cma_scale():
    """set_bounds(-1, 1): the standardised box is [-1, 1]^d, so SABO starts at Nevergrad's CMA-ES scale, 0.3 (0.15 from
    d = 18); with scale 1 the samples would cover the box and beyond (measured: F = 0.33 at d = 2 and 1.4 at d = 10
    after 4000 evaluations, now 1e-11 and 1.7e-4)."""
    results = {}
    for d in (2, 10, 20):
        parametrization = ng.p.Array(shape=(d,)).set_bounds(-1.0, 1.0)
        optimizer = sabo_optimizer(parametrization, 4000)
        recommendation = optimizer.minimize(shifted_sphere)
        assert np.all(optimizer.sabo.state_dict()["config"]["sigma0"] == (0.3 if d < 18 else 0.15))
        results[d] = shifted_sphere(recommendation.value)
    assert results[2] < 1e-8 and results[10] < 1e-2 and results[20] < 1.0  # F(0) = d / 4
    unbounded = sabo_optimizer(ng.p.Array(shape=(2,)), 100)
    unbounded.ask()
    assert np.all(unbounded.sabo.state_dict()["config"]["sigma0"] == 1.0)


def test_a_suggested_point_is_told_and_starts_sabo_there():
    optimizer = sabo_optimizer(2, 200)
    optimizer.suggest(np.array([0.5, 0.25]))
    first = optimizer.ask()
    assert np.array_equal(first.value, [0.5, 0.25])
    optimizer.tell(first, shifted_sphere(first.value))  # Nevergrad tells a suggestion as not asked
    assert np.array_equal(optimizer.sabo.mean, [0.5, 0.25]) and optimizer.sabo.nfev == 0
    optimizer.suggest(np.array([9.0, 9.0]))  # after the start: evaluated, not SABO's sample
    later = optimizer.ask()
    optimizer.tell(later, shifted_sphere(later.value))
    recommendation = optimizer.minimize(shifted_sphere)
    assert optimizer.num_tell == 200 and shifted_sphere(recommendation.value) < 1e-2
