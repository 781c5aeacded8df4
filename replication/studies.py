"""The registry of studies. A study module provides:

* ``configs(params, *, settings=None, methods=None, seeds=None) -> list[RunConfig]`` built
  from its section of ``params.yaml`` (the active profile is ``params[study]["profile"]``);
* ``make_problem(config) -> Problem``;
* ``cost(config) -> float``, a rough relative cost used to start long runs first;
* ``report(params, records, out_dir) -> dict`` writing its tables and figures;
* optionally ``prepare(params) -> list[str]``: data preparation (``sabo-bench prepare``);
* optionally ``gpus(config) -> int``: GPUs one run needs (default 0); the executors give each
  such run a device of its own (:mod:`replication.devices`).
"""
from __future__ import annotations

import importlib

STUDIES = {"synthetic": "replication.synthetic.study", "image": "replication.image.study",
           "prompt": "replication.prompt.study"}


def get_study(name: str):
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; available: {sorted(STUDIES)}")
    return importlib.import_module(STUDIES[name])


def active_profile(params: dict, study: str) -> tuple[str, dict]:
    """(name, settings) of the profile selected by ``params[study]["profile"]``."""
    p = params[study]
    name = p["profile"]
    if name not in p["profiles"]:
        raise ValueError(f"{study}.profile must be one of {sorted(p['profiles'])} (got {name!r})")
    return name, p["profiles"][name]


def run_gpus(config) -> int:
    """GPUs one run of ``config`` needs: its study's ``gpus(config)``, 0 if the study declares none."""
    gpus = getattr(get_study(config.study), "gpus", None)
    return int(gpus(config)) if gpus is not None else 0
