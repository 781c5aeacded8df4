"""The synthetic study's runs: every run config of the active profile, and the name of its report.

What both the study (:mod:`replication.synthetic.study`) and its report
(:mod:`replication.synthetic.report`) read, so that neither imports the other's module for it:
this module <- ``report.py`` <- ``study.py``. The study's setting is described in
:mod:`replication.synthetic.study`.
"""
from __future__ import annotations

from replication.config import RunConfig, code_version
from replication.errors import UsageError
from replication.studies import active_profile

STUDY = "synthetic"
REPORT_NAME = "synthetic"  # results/synthetic.md, results/synthetic_claims.json


def _substitute_horizon(value, T: int):
    if isinstance(value, dict):
        return {k: _substitute_horizon(v, T) for k, v in value.items()}
    return T if value == "T" else value


def methods_at(p: dict, prof: dict, setting: str) -> dict:
    """Method -> parameters of every method a profile ``prof`` runs at ``setting``."""
    extra = {m: p["extra_methods"][m] for m, where in (prof.get("extra_methods") or {}).items() if setting in where}
    return {**p["methods"], **extra}


def iterations_at(prof: dict, method: str, setting: str) -> int:
    """T of ``method``'s runs at ``setting`` under profile ``prof``: the setting's, or an extra method's own."""
    where = (prof.get("extra_methods") or {}).get(method)
    return int(prof["iterations"][setting] if where is None else where[setting])


def profile_methods(p: dict, prof: dict) -> list[str]:
    """Every method a profile runs at some setting: the paper's, then its extra methods."""
    return [*p["methods"], *(prof.get("extra_methods") or {})]


def configs(params: dict) -> list[RunConfig]:
    """Every run of the active profile: settings x functions x methods x seeds (narrowed by ``studies.select``)."""
    p = params[STUDY]
    _, prof = active_profile(params, STUDY)
    horizons = p["profiles"]["full"]["iterations"]
    out = []
    for setting in prof["iterations"]:
        if setting not in p["settings"]:
            raise ValueError(f"{STUDY}: profile names setting {setting!r}, which is not under {STUDY}.settings")
        shape = p["settings"][setting]
        for function in p["functions"]:
            problem = {"name": function, "dim": int(shape["dim"]), "mu0": dict(p["mu0"])}
            for method, mparams in methods_at(p, prof, setting).items():
                if "popsize" in mparams:  # the setting's N is the one its tables and figures are labelled with
                    where = "extra_methods" if method not in p["methods"] else "methods"
                    raise UsageError(f"params.yaml: {STUDY}.{where}.{method}.popsize = {mparams['popsize']!r}: in this "
                                     f"study the settings set the population size (N = {int(shape['popsize'])} at "
                                     f"{setting}); remove it, or add a setting with the N you want")
                opt_params = {"sigma0": p["sigma0"], "popsize": int(shape["popsize"]),
                              **_substitute_horizon(mparams, int(horizons[setting]))}
                for seed in prof["seeds"]:
                    out.append(RunConfig(study=STUDY, setting=setting, problem=problem, method=method,
                                         params=opt_params, seed=int(seed),
                                         budget={"max_iter": iterations_at(prof, method, setting)},
                                         code_version=code_version(method, opt_params)))
    return out
