"""The prompt-tuning study's runs: every run config of the active profile, and the name of its report.

What both the study (:mod:`replication.prompt.study`) and its report
(:mod:`replication.prompt.report`) read, so that neither imports the other's module for it: this
module <- ``report.py`` <- ``study.py``. The study itself is described in
:mod:`replication.prompt.study`.
"""
from __future__ import annotations

from replication.config import RunConfig, code_version, method_params
from replication.studies import active_profile

from .options import ATTENTIONS, SELECTIONS, WEIGHTS, option
from .tasks import ZERO_SHOT

STUDY = "prompt"
REPORT_NAME = "prompt_tuning"  # results/prompt_tuning.md, results/prompt_tuning_claims.json


def checked_profile(params: dict) -> tuple[str, dict]:
    """(name, settings) of the active profile, after checking the options that every run of it reads."""
    name, prof = active_profile(params, STUDY)
    p = params[STUDY]
    if p["selection"] not in SELECTIONS:
        raise ValueError(f"prompt.selection must be one of {SELECTIONS} (got {p['selection']!r})")
    if p["weights"] not in WEIGHTS:
        raise ValueError(f"prompt.weights must be one of {WEIGHTS} (got {p['weights']!r})")
    if option(p, "attention") not in ATTENTIONS:
        raise ValueError(f"prompt.attention must be one of {ATTENTIONS} (got {p['attention']!r})")
    for key in ("bucketing", "compile"):
        if not isinstance(option(p, key), bool):
            raise ValueError(f"prompt.{key} must be true or false (got {p[key]!r})")
    unknown = set(prof.get("methods", [])) - set(p["methods"])
    if unknown:
        raise ValueError(f"prompt.profiles.{name}.methods names unknown method(s) {sorted(unknown)}; "
                         f"known: {sorted(p['methods'])}")
    return name, prof


def _problem(p: dict, task: str, dim: int) -> dict:
    return {"name": task, "dim": int(dim), "backbone": p["backbone"], "device": p["device"], "weights": p["weights"],
            "attention": option(p, "attention"), "bucketing": option(p, "bucketing"), "compile": option(p, "compile"),
            "k_shot": int(p["k_shot"]), "max_length": int(p["max_length"]),
            "placeholder_offset": int(p["placeholder_offset"])}


def optimizer_device(p: dict, method: str) -> dict:
    """``{"device": prompt.device}`` for a method whose optimizer takes a ``device`` argument, else ``{}``.

    TuRBO-1 and GIBO fit their GPs on that device (float64 on both; their docstrings say why). On
    CUDA the GPs share the run's GPU with the backbone; their memory is small beside it (GIBO: a
    200-point window; TuRBO-1: at most 10^4 points, 0.8 GB for the kernel matrix in float64).
    """
    import baselines

    optimizer = (p["methods"][method] or {}).get("optimizer", method)
    takes_device = baselines.find(optimizer) is not None and "device" in baselines.parameters(optimizer)
    return {"device": p["device"]} if takes_device else {}


def configs(params: dict) -> list[RunConfig]:
    """Every run of the active profile: tasks x dims x methods x grid x seeds, plus one zero-shot run per task.

    The problem's ``name`` is the task (what ``--function`` selects); the zero-shot runs have
    setting and method ``zero_shot`` and the profile's first seed.
    """
    p = params[STUDY]
    _, prof = checked_profile(params)
    budget = {"max_iter": int(prof["iterations"])}
    wanted_methods = prof.get("methods", list(p["methods"]))
    out = []
    for task in prof["tasks"]:
        if prof["seeds"]:
            seed = int(prof["seeds"][0])  # the test set does not depend on the seed: one evaluation
            out.append(RunConfig(study=STUDY, setting=ZERO_SHOT, problem=_problem(p, task, 0), method=ZERO_SHOT,
                                 params={}, seed=seed, budget={"max_iter": 0},
                                 code_version=code_version(ZERO_SHOT, {})))
        for setting, dim in p["dims"].items():
            if setting not in prof.get("dims", list(p["dims"])):
                continue
            for method in wanted_methods:
                grid = p["methods"][method]
                for opt_params in method_params(grid, sigma0=float(p["sigma0"]), popsize=int(p["popsize"]),
                                                **optimizer_device(p, method)):
                    for seed in prof["seeds"]:
                        out.append(RunConfig(study=STUDY, setting=setting, problem=_problem(p, task, dim),
                                             method=method, params=opt_params, seed=int(seed), budget=budget,
                                             code_version=code_version(method, opt_params)))
    return out
