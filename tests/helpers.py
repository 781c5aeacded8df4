"""Shared test helpers: objectives, an ask/tell driver, small run configs of the synthetic study."""
import numpy as np

import sabo
from replication.config import RunConfig


def sphere(X):
    return np.sum(np.atleast_2d(X) ** 2, axis=1)


def drive(opt, fun, rounds):
    """``rounds`` ask/tell rounds (for SABO two rounds make one iteration)."""
    for _ in range(rounds):
        X = opt.ask()
        opt.tell(X, fun(X))


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


def restore_and_compare(opt, fun, rounds=20):
    """Restore ``opt`` from its state_dict written and read by ``sabo.serialization`` (data only,
    no pickle), drive both ``rounds`` rounds, assert identical asks.

    Returns the restored optimizer (in step with ``opt``) for further checks.
    """
    from sabo.serialization import dumps, loads

    restored = type(opt).from_state_dict(loads(dumps(opt.state_dict())))
    for _ in range(rounds):
        Xa, Xb = opt.ask(), restored.ask()
        assert np.array_equal(Xa, Xb)
        opt.tell(Xa, fun(Xa))
        restored.tell(Xb, fun(Xb))
    assert np.array_equal(opt.mean, restored.mean)
    return restored
