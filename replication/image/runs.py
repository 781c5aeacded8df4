"""The image study's runs: every run config of the active profile, and the name of its report.

What both the study (:mod:`replication.image.study`) and its report (:mod:`replication.image.report`)
read, so that neither imports the other's module for it: this module <- ``report.py`` <- ``study.py``.
The study itself is described in :mod:`replication.image.study`.
"""
from __future__ import annotations

import os

from replication.config import RunConfig, code_version, method_params
from replication.studies import active_profile

STUDY = "image"
REPORT_NAME = "noisy_labels"  # results/noisy_labels.md, results/noisy_labels_claims.json


def dataset_name(p: dict) -> str:
    """The data set of the active profile: its own ``dataset`` where it names one, else ``image.dataset``."""
    prof = p["profiles"][p["profile"]]
    return prof.get("dataset") or p["dataset"]


def umap_spec(p: dict) -> dict:
    """The UMAP part of a run's problem: k, the seed and, where ``image.umap.sha256`` pins one for the
    active data set, the checksum of the embedding (so a different embedding is a different config)."""
    u = p["umap"]
    pin = (u.get("sha256") or {}).get(dataset_name(p))
    return {"n_components": int(u["n_components"]), "seed": int(u["seed"]), **({"sha256": pin} if pin else {})}


def dataset_spec(p: dict) -> dict:
    name = dataset_name(p)
    if name == "fashion_mnist":
        return {"name": name, "directory": os.environ.get("FASHION_MNIST_DIR", p["fashion_mnist_dir"])}
    return {"name": name}


def dtype_spec(p: dict, name: str) -> dict:
    """The objective's precision for the data set ``name`` (``image.dtype``), as a part of the run's problem:
    ``{"dtype": "float32"}``, or nothing for float64 (the default, so the configs of float64 runs, and their
    hashes, are those they had before the key existed)."""
    dtype = (p.get("dtype") or {}).get(name, "float64")
    return {} if dtype == "float64" else {"dtype": dtype}


def configs(params: dict) -> list[RunConfig]:
    """Every run of the active profile: dims x noise rates x methods x hyperparameter grid x seeds.

    The problem's ``name`` is the data set's (``digits_stand_in`` or ``fashion_mnist``): what
    ``--function`` selects; its ``dtype`` is :func:`dtype_spec`'s.
    """
    p = params[STUDY]
    _, prof = active_profile(params, STUDY)
    data = dataset_spec(p)
    out = []
    for setting, d_tilde in p["dims"].items():
        if setting not in prof.get("dims", p["dims"]):
            continue
        for rate in prof.get("noise_rates", p["noise_rates"]):
            problem = {**data, "d_tilde": int(d_tilde), "noise_rate": float(rate),
                       "batch_size": int(p["batch_size"][data["name"]]),
                       "validation_fraction": float(p["validation_fraction"]), "umap": umap_spec(p),
                       **dtype_spec(p, data["name"])}
            for method, grid in p["methods"].items():
                for opt_params in method_params(grid, sigma0=float(p["sigma0"]), popsize=int(p["popsize"])):
                    for seed in prof["seeds"]:
                        out.append(RunConfig(study=STUDY, setting=setting, problem=problem, method=method,
                                             params=opt_params, seed=int(seed),
                                             budget={"max_iter": int(prof["iterations"])},
                                             code_version=code_version(method, opt_params)))
    return out


def search_dim(d_tilde: int) -> int:
    """d = 10 d~: one weight vector of d~ per class, and every data set of the study has 10 classes."""
    return 10 * int(d_tilde)
