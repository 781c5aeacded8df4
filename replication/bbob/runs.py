"""The BBOB study's runs: every run config of the active profile, and the names of its report's parts.

What both the study (:mod:`replication.bbob.study`) and its report (:mod:`replication.bbob.report`)
read, so that neither imports the other's module for it: this module <- ``report.py`` <- ``study.py``.
The study itself is described in :mod:`replication.bbob.study`.
"""
from __future__ import annotations

from replication.config import RunConfig, code_version
from replication.studies import active_profile

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
