"""Study costs come from the optimizer a run uses (its class's declared hints), never from its label."""
from dataclasses import replace

import pytest
from helpers import define_random_search, small_config

import sabo
from baselines.cmaes import CMAES
from replication.config import RunConfig
from replication.costs import evaluations_per_iteration, optimizer_class, run_cost
from replication.synthetic import study as synthetic
from sabo.protocol import ROUND_OVERHEAD


def test_synthetic_costs_are_the_declared_hints():
    ingo, sabo_cfg, cmaes = (small_config(m, dim=200, popsize=50, T=3000) for m in ("ingo", "sabo", "cmaes"))
    assert synthetic.cost(ingo) == 3000 * (50 * 200 + ROUND_OVERHEAD)  # N d per iteration, and the round's fixed part
    assert synthetic.cost(sabo_cfg) == 2 * synthetic.cost(ingo)  # SABO's two rounds per iteration
    assert synthetic.cost(cmaes) == 3000 * CMAES.cost_per_iteration(200, 50)
    # pycma: N d^2 grows past the diagonal methods' N d, its ~0.5 ms of Python per iteration is the floor
    assert CMAES.cost_per_iteration(1000, 50) / CMAES.cost_per_iteration(200, 50) > 2 * (1000 / 200)
    assert CMAES.cost_per_iteration(2, 6) > 5 * optimizer_class(small_config("ingo")).cost_per_iteration(2, 6)


def test_a_method_label_is_costed_as_the_optimizer_it_runs():
    cfg = small_config("sabo")
    relabelled = replace(cfg, method="sabo_variant", params={**cfg.params, "optimizer": "sabo"})
    assert optimizer_class(relabelled) is sabo.SABO
    assert (run_cost(relabelled, dim=20, eval_cost=3.0) == run_cost(cfg, dim=20, eval_cost=3.0)
            == 150 * (2 * (10 * 20 + ROUND_OVERHEAD) + 2 * 10 * 3.0))


def test_an_unregistered_optimizer_is_named():
    cfg = replace(small_config("sabo"), method="sabo_variant", params={"optimizer": "nelder_mead", "popsize": 10})
    with pytest.raises(ValueError,
                       match=r"method 'sabo_variant' runs optimizer 'nelder_mead', which is not registered"):
        run_cost(cfg, dim=20)


def test_a_run_without_optimizer_costs_one_evaluation():
    """The prompt study's zero-shot row: method ``zero_shot`` is no optimizer; max_iter = 0 evaluates x0 once."""
    zero_shot = RunConfig(study="prompt", setting="zero_shot", problem={"name": "sst2", "dim": 0, "k_shot": 16},
                          method="zero_shot", params={}, seed=0, budget={"max_iter": 0})
    assert run_cost(zero_shot, dim=0, eval_cost=7.0) == 7.0
    from replication.prompt import study as prompt

    sst2 = {"name": "sst2", "dim": 200, "k_shot": 16}
    tuned = RunConfig(study="prompt", setting="d200", problem=sst2, method="ingo",
                      params={"sigma0": 1.0, "popsize": 20, "lr": 0.1}, seed=0, budget={"max_iter": 100})
    assert prompt.cost(zero_shot) == 1e10 * 16 * 2  # one forward pass over 16 x 2 classes sequences
    assert prompt.cost(tuned) == pytest.approx(100 * 20 * prompt.cost(zero_shot), rel=1e-6)


@pytest.mark.parametrize("method,params,rows", [
    ("bes", {}, 11), ("ingo", {}, 10), ("ingo", {"baseline": "center"}, 11), ("sabo", {"baseline": "center"}, 2 * 11),
])
def test_a_centre_point_is_costed_as_the_evaluation_it_is(method, params, rows):
    """BES, and INGO/SABO with ``baseline="center"``, evaluate the centre besides the N = 10 samples: N + 1 rows per
    ask, as the built optimizer counts them (``evals_per_iteration``)."""
    cfg = small_config(method, dim=20, popsize=10, T=150, **params)
    cls = optimizer_class(cfg)
    assert evaluations_per_iteration(cls, 20, 10, cfg.params) == rows
    assert run_cost(cfg, dim=20, eval_cost=3.0) == 150 * (cls.cost_per_iteration(20, 10) + rows * 3.0)
    budgeted = small_config(method, dim=20, popsize=10, max_evals=1000, **params)
    assert run_cost(budgeted, dim=20) == (1000 // rows) * cls.cost_per_iteration(20, 10)


def test_a_run_without_popsize_is_costed_at_the_constructors_own_default(registries):
    """The LocalSearch of docs/extending/optimizer.md (``popsize=10`` in its constructor, no ``default_popsize``) in a
    study that passes no popsize (BBOB): costed at 10, what the constructor uses; with no default anywhere, one
    UsageError line."""
    import numpy as np

    import baselines
    from replication.errors import UsageError

    local = baselines.register(define_random_search("local_search"))
    cfg = RunConfig(study="synthetic", setting="s", problem={}, method="local_search", params={"sigma0": 1.0},
                    seed=0, budget={"max_iter": 7})
    assert evaluations_per_iteration(local, 5, None, {}) == 10 == local(np.zeros(5)).evals_per_iteration
    assert run_cost(cfg, dim=5) == 7 * local.cost_per_iteration(5, 10)
    baselines.register(define_random_search("needs_popsize", default_popsize=None))
    with pytest.raises(UsageError, match="has no default population size; pass popsize: its constructor has no "
                                         "numeric popsize default either; set popsize among the method's parameters"):
        run_cost(replace(cfg, method="needs_popsize"), dim=5)


def test_turbo_is_costed_for_its_run_length_and_candidates():
    """TuRBO-1's GP work grows with the trust region's data, so a run costs by its length and ``n_candidates``. The
    quick profile's runs (d = 200, q = 100, 12 iterations, 1000 candidates) took 187-219 s of wall time, GIBO's (40
    iterations) 190-218 s, on the same loaded 2-core machine (2026-11-27): costed within 2x of each other; the
    earlier estimate (n = 50 q points whatever the run, 5000 candidates) made TuRBO-1's about 290x GIBO's and filled the
    progress bar with its four runs."""
    from baselines.turbo import TuRBO1

    turbo = small_config("turbo", dim=200, popsize=100, T=12, n_candidates=1000)
    gibo = small_config("gibo", dim=200, popsize=100, T=40)
    assert 0.5 < synthetic.cost(turbo) / synthetic.cost(gibo) < 2
    # per iteration: 4 design rounds (n_init = 2d), then GP fits on 400, 500, ... points until the restart after
    # 7 failtol = 14 batches, then a new design
    cost = [TuRBO1.cost_of_iterations(200, 100, k, {}) for k in range(23)]
    per = [b - a for a, b in zip(cost, cost[1:])]
    assert per[:4] == [100 * 200 + ROUND_OVERHEAD] * 4 == per[18:22]
    assert all(a < b for a, b in zip(per[4:18], per[5:18]))
    more = TuRBO1.cost_of_iterations(200, 100, 12, {"n_candidates": 5000})
    assert more > TuRBO1.cost_of_iterations(200, 100, 12, {"n_candidates": 1000})
    assert TuRBO1.cost_per_iteration(200, 100) == pytest.approx(TuRBO1.cost_of_iterations(200, 100, 100, {}) / 100)
