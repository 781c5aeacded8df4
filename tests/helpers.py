"""Shared test helpers: objectives, an ask/tell driver, small run configs of the synthetic study."""
import numpy as np

from replication.config import RunConfig, code_version


def sphere(X):
    return np.sum(np.atleast_2d(X) ** 2, axis=1)


def drive(opt, fun, rounds):
    """``rounds`` ask/tell rounds (for SABO two rounds make one iteration)."""
    for _ in range(rounds):
        X = opt.ask()
        opt.tell(X, fun(X))


def small_config(method="sabo", *, function="ellipsoid", dim=20, popsize=10, T=150, seed=0, **params) -> RunConfig:
    defaults = {  # the synthetic study's settings; another registered method runs with its defaults
        "sabo": {"lr": 0.1, "rho": {"kind": "inv_sqrt", "scale": 100.0, "horizon": 3000}},
        "ingo": {"lr": 0.1},
        "bes": {"lr": 0.1, "spacing": 1.0},
    }.get(method, {})
    return RunConfig(study="synthetic", setting=f"d{dim}_N{popsize}",
                     problem={"name": function, "dim": dim, "mu0": {"low": 0.0, "high": 1.0}},
                     method=method, params={"sigma0": 1.0, "popsize": popsize, **defaults, **params},
                     seed=seed, budget={"max_iter": T}, code_version=code_version(method, params))


def deterministic_part(record: dict) -> dict:
    """What must not depend on timing, resumption or scheduling."""
    return {"config": record["config"], "config_hash": record["config_hash"], "result": record["result"]}


def tiny_params(functions=("ellipsoid", "levy"), methods=("sabo", "ingo")) -> dict:
    """A parameter file with one small synthetic setting (d = 10, N = 6) and profiles full and tiny."""
    grids = {"sabo": {"lr": 0.1, "rho": {"kind": "inv_sqrt", "scale": 10.0, "horizon": "T"}}, "ingo": {"lr": 0.1}}
    return {
        "synthetic": {
            "profile": "tiny",
            "profiles": {"full": {"seeds": [0], "iterations": {"d10_N6": 60}},
                         "tiny": {"seeds": [0, 1], "iterations": {"d10_N6": 30}}},
            "settings": {"d10_N6": {"dim": 10, "popsize": 6}},
            "functions": list(functions),
            "mu0": {"low": 0.0, "high": 1.0},
            "sigma0": 1.0,
            "methods": {m: grids[m] for m in methods},
        }
    }
