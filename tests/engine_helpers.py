"""Small run configs of the synthetic study for engine, executor and tracking tests."""
import sabo
from replication.config import RunConfig


def small_config(method="sabo", *, function="ellipsoid", dim=20, popsize=10, T=150, seed=0, **params) -> RunConfig:
    defaults = {
        "sabo": {"lr": 0.1, "rho": {"kind": "inv_sqrt", "scale": 100.0, "horizon": 3000}},
        "ingo": {"lr": 0.1},
        "bes": {"lr": 0.1, "spacing": 1.0},
        "cmaes": {},
        "mmes": {},
    }[method]
    return RunConfig(study="synthetic", setting=f"d{dim}_N{popsize}",
                     problem={"name": function, "dim": dim, "mu0": {"low": 0.0, "high": 1.0}},
                     method=method, params={"sigma0": 1.0, "popsize": popsize, **defaults, **params},
                     seed=seed, budget={"max_iter": T}, code_version=sabo.__version__)


def deterministic_part(record: dict) -> dict:
    """What must not depend on timing, resumption or scheduling."""
    return {"config": record["config"], "config_hash": record["config_hash"], "result": record["result"]}
