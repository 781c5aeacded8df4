"""COCO's BBOB suites through the run engine: configs from ``params.yaml``, problems, costs.

Each (suite, function, dimension, instance, method) is one run of :func:`replication.engine.execute`
with a budget of ``budget * d`` function evaluations (``{"max_evals": ...}``: as many whole
iterations as fit). The setting is the suite (``runs/bbob/<suite>/<method>/``), the problem
``{"name": "f<id>", "suite", "function", "dim", "instance"}``, and the seed is the COCO instance
(COCO's repetitions are instances; the optimizer's seed is derived from the whole config as in
every study). Every method starts at COCO's initial solution (the centre of [-5, 5]^d) with
sigma0 = ``bbob.sigma0`` and its own defaults otherwise: the default population size of its class
(``default_popsize(d)``) and, for SABO, the library's defaults lr = 0.3 (``sabo.sabo.DEFAULT_LR``) and
rho = 0.05 sqrt(d) (``sabo.DEFAULT_RHO_SCALE``; docs/sabo/choosing-rho.md): no parameter is tuned per function.

Every run's COCO observer output lands in its own directory next to its record
(:func:`replication.engine.files_path`); the report assembles one folder per method for
``cocopp``.
"""
from __future__ import annotations

import numpy as np

from replication.config import RunConfig

from .problem import CocoProblem
from .runs import REPORT_NAME as REPORT_NAME  # the Study contract: re-exported
from .runs import TABLE_OMITS as TABLE_OMITS
from .runs import configs as configs


def make_problem(config: RunConfig) -> CocoProblem:
    pr = config.problem
    return CocoProblem(pr["suite"], pr["function"], pr["dim"], pr["instance"], config.method)


def x0(config: RunConfig) -> np.ndarray:
    """COCO's initial solution: the centre of the search domain [-5, 5]^d of every suite here."""
    return np.zeros(config.problem["dim"])


def cost(config: RunConfig) -> float:
    """Relative cost: the optimizer's declared work per iteration (:mod:`replication.costs`) plus the
    evaluations, each a Python call into COCO's C code (1.1-1.8 us at d = 2 .. 10, 2.2-3 us at d = 40,
    observer included: about 80 + 2 d of the units of
    :meth:`sabo.protocol.AskTellOptimizer.cost_per_iteration`, ~0.015 us each)."""
    from replication.costs import run_cost

    dim = config.problem["dim"]
    return run_cost(config, dim=dim, eval_cost=80.0 + 2.0 * dim)


def report(params: dict, records: list[dict], out_dir, *, tracker=None, runs_dir=None) -> dict:
    from .report import report as _report

    return _report(params, records, out_dir, runs_dir=runs_dir)


def outcomes(params: dict, records: list[dict]) -> dict:
    """What ``dvc metrics`` shows (:mod:`replication.outcomes`): per method, the mean over (suite,
    dimension) cells of the fraction of (function, target, instance) triples solved (the report's
    table, each dimension weighing alike, as in its claims). No curve plot: the ECDF figure is the
    report's own."""
    from replication.outcomes import per_method

    from .report import solved_fractions

    return {"metrics": per_method(((m, v) for (_, _, m), v in solved_fractions(records).items()), "fraction",
                                  reduce=np.mean),
            "curves": None}
