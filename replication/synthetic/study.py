"""The synthetic study: configs from ``params.yaml``, problem instances, and cost estimates.

Paper setting (Section 5.1 and appendix "Synthetic Problems"): the four functions of
``replication.synthetic.functions``; d in {200, 500, 1000} with N = 50 and d = 200 with
N in {10, 100}; mu0 ~ U[0, 1]^d, Sigma0 = I; beta = 0.1 for INGO, BES and SABO;
rho = 100/sqrt(T + 1) for SABO; BES spacing c = 1; MMES defaults; 3 seeds; error
E = ||mu - x*||_2. The paper does not state T: it is set per setting and profile in
``params.yaml`` and recorded in every config. In a method's parameters the string ``"T"``
stands for the setting's horizon: its number of iterations in the full profile (so a reduced
profile uses the same rho and its curves are prefixes of the full study's curves).

``extra_methods`` are methods outside the paper's study (the BO baselines of its prompt
study): a profile runs one only at the settings its own ``extra_methods`` lists, so the full
profile, which lists none, is the paper's study. A profile gives each a budget of its own at
each of its settings (``{method: {setting: T}}``): the quick profile's BO baselines, whose cost
per iteration grows with their GP's data, run fewer iterations than the others.
"""
from __future__ import annotations

import numpy as np

from replication.config import RunConfig

from .functions import FUNCTIONS
from .runs import REPORT_NAME as REPORT_NAME  # the Study contract: re-exported
from .runs import configs as configs


def initial_mean(dim: int, low: float, high: float, seed: int) -> np.ndarray:
    """mu0 ~ U[low, high]^d, drawn from the run's problem seed."""
    return np.random.default_rng(seed).uniform(low, high, dim)


class SyntheticProblem:
    """One test function at one dimension with a seeded initial mean mu0 ~ U[low, high]^d."""

    def __init__(self, function: str, dim: int, mu0_low: float, mu0_high: float, seed: int):
        if function not in FUNCTIONS:
            raise ValueError(f"unknown synthetic function {function!r}; available: {sorted(FUNCTIONS)}")
        self._f, optimum = FUNCTIONS[function]
        self.x_star = np.full(dim, optimum)
        self.x0 = initial_mean(dim, mu0_low, mu0_high, seed)

    def objective(self, X: np.ndarray) -> np.ndarray:
        return self._f(X)

    def metrics(self, mean: np.ndarray) -> dict[str, float]:
        return {"error": float(np.linalg.norm(mean - self.x_star)), "f_mean": float(self._f(mean)[0])}

    def get_state(self):
        return None

    def set_state(self, state) -> None:
        pass


def report(params: dict, records: list[dict], out_dir, *, tracker=None, runs_dir=None) -> dict:
    from .report import report as _report

    return _report(params, records, out_dir, tracker=tracker)


def outcomes(params: dict, records: list[dict]) -> dict:
    """What ``dvc metrics`` and ``dvc plots`` show (:mod:`replication.outcomes`): per method, the median
    over (setting, function) cells of the decade (log10) of the cell's median over seeds of the final
    error E_T (the report's tables, in decades: -7.3 rather than DVC's 0.0 for 5e-8), and every run's
    error curve, one panel per setting and function."""
    from replication.outcomes import Curves, decade, per_method

    finals: dict = {}
    for r in records:
        c = r["config"]
        finals.setdefault((c["setting"], c["problem"]["name"], c["method"]), []).append(r["result"]["final"]["error"])
    metrics = per_method(((method, decade(np.median(v))) for (_, _, method), v in finals.items()), "decade")

    def label(c: dict) -> dict:
        return {"panel": f"{c['setting']} {c['problem']['name']}", "method": c["method"], "seed": c["seed"],
                "setting": c["setting"], "function": c["problem"]["name"]}

    return {"metrics": metrics,
            "curves": Curves(records, label, values=("error",), extra_labels=("setting", "function"))}


def make_problem(config: RunConfig) -> SyntheticProblem:
    pr = config.problem
    return SyntheticProblem(pr["name"], pr["dim"], pr["mu0"]["low"], pr["mu0"]["high"], config.problem_seed())


def x0(config: RunConfig) -> np.ndarray:
    """mu0 without building the problem (the study contract: executors call it for every run up front)."""
    pr = config.problem
    return initial_mean(pr["dim"], pr["mu0"]["low"], pr["mu0"]["high"], config.problem_seed())


def cost(config: RunConfig) -> float:
    """Relative cost: the optimizer's declared per-iteration work (:mod:`replication.costs`: N d
    and a fixed part per ask/tell round for the diagonal methods, twice for SABO's two rounds;
    N d^2 and pycma's Python for CMA-ES). An evaluation of a test function is O(d), already the
    order of the optimizer's work per sample, so it is not added."""
    from replication.costs import run_cost

    return run_cost(config, dim=config.problem["dim"])
