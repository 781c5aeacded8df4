"""COCO's BBOB suites through the run engine: configs from ``params.yaml``, problems, costs.

Each (suite, function, dimension, instance, method) is one run of :func:`replication.engine.execute`
with a budget of ``budget * d`` function evaluations (``{"max_evals": ...}``: as many whole
iterations as fit). The setting is the suite (``runs/bbob/<suite>/<method>/``), the problem
``{"name": "f<id>", "suite", "function", "dim", "instance"}``, and the seed is the COCO instance
(COCO's repetitions are instances; the optimizer's seed is derived from the whole config as in
every study). Every method starts at COCO's initial solution (the centre of [-5, 5]^d) with
sigma0 = ``bbob.sigma0`` and its own defaults otherwise: the default population size of its class
(``default_popsize(d)``) and, for SABO, the library's defaults lr = 0.1 and rho = 0.05 sqrt(d)
(``sabo.DEFAULT_RHO_SCALE``; README, "Choosing rho"): no parameter is tuned per function.

Every run's COCO observer output lands in its own directory next to its record
(:func:`replication.engine.files_path`); the report assembles one folder per method for
``cocopp``.
"""
from __future__ import annotations

import numpy as np

from replication.config import RunConfig, code_version
from replication.studies import active_profile

from .problem import CocoProblem

STUDY = "bbob"
REPORT_NAME = "bbob"  # results/bbob.md, results/bbob_claims.json, results/bbob/ (cocopp)
#: what a report made from a run table lacks (``sabo-bench report`` will not replace a page that has it unasked)
TABLE_OMITS = "cocopp's pages (a run table holds no COCO data)"


def suite_methods(p: dict, runs: dict) -> list[str]:
    """The methods a profile runs on one suite: its ``methods``, else every method of ``bbob.methods``."""
    return list(runs.get("methods") or p["methods"])


def configs(params: dict) -> list[RunConfig]:
    """Every run of the active profile: suites x dimensions x functions x methods x instances."""
    from .suites import SUITES

    p = params[STUDY]
    _, prof = active_profile(params, STUDY)
    out = []
    for suite, runs in prof["suites"].items():
        functions = runs.get("functions") or SUITES[suite].functions
        for dim in runs["dims"]:
            for function in functions:
                problem = {"name": f"f{function}", "suite": suite, "function": int(function), "dim": int(dim)}
                for method in suite_methods(p, runs):
                    opt_params = {"sigma0": p["sigma0"], **p["methods"][method]}
                    for instance in runs["instances"]:
                        out.append(RunConfig(study=STUDY, setting=suite, problem={**problem, "instance": int(instance)},
                                             method=method, params=opt_params, seed=int(instance),
                                             budget={"max_evals": int(runs["budget"]) * int(dim)},
                                             code_version=code_version(method, opt_params)))
    return out


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
    """What ``dvc metrics`` shows: the fraction of (function, target, instance) triples solved per suite,
    dimension and method (the report's table, per dimension), and COCO-vs-engine evaluation mismatches."""
    from replication.outcomes import nested

    from .report import evaluation_mismatches, solved_fractions

    return {"metrics": {"solved_fraction": nested(solved_fractions(records).items()),
                        "evaluation_count_mismatches": len(evaluation_mismatches(records))},
            "curves": None}
