"""The UMAP fit of the noisy-label study, run in a child process compiled for a portable CPU target.

Why a child process: umap-learn and pynndescent are numba code compiled with ``fastmath``, and
numba compiles for the *host* CPU by default. The vector width and instruction choice then
change the order of floating-point reductions, and UMAP's stochastic layout amplifies a
last-bit difference into a different embedding: on one machine (Intel Sapphire Rapids,
numba 0.68.1) the stand-in's embedding compiled for the host differs from the one compiled for
``haswell`` or ``generic`` by about one unit in its coordinates, and the CI profile's selected
accuracies then move by up to 10 points. numba reads its target (``NUMBA_CPU_NAME``,
``NUMBA_CPU_FEATURES``) once, when it is imported, so the fit runs in a fresh interpreter
whose environment names numba's ``generic`` target (the architecture's baseline instruction
set, the same code on every CPU of that architecture) and one thread for every thread pool.

The parent (:func:`replication.image.features._fit_umap`) writes the images as ``.npy`` files
into a temporary directory and runs ``python -m replication.image.umap_fit DIR PARAMS_JSON``;
this module writes ``DIR/embedding.npz`` (``train``, ``test``, float32, and ``target``: the
CPU name and features numba compiled for, as JSON). Nothing is pickled either way.
"""
from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np

#: the child's environment on top of the parent's: numba's portable target, one thread per pool
PORTABLE_ENV = {"NUMBA_CPU_NAME": "generic", "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: removed from the child's environment: with NUMBA_CPU_NAME=generic and no features set, numba
#: compiles for the architecture's baseline features
UNSET_ENV = ("NUMBA_CPU_FEATURES",)


def child_env() -> dict:
    """The environment of the fitting process: the parent's, with :data:`PORTABLE_ENV` applied."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET_ENV}
    env.update(PORTABLE_ENV)
    return env


def fit(train_x, test_x, *, n_components: int, seed: int, n_neighbors: int, min_dist: float):
    """Fit UMAP on ``train_x``, transform ``test_x``: float32 arrays (n, k), (m, k), in this process.

    Deterministic given the seed *and* numba's compilation target: call it through the child
    process (:func:`replication.image.features._fit_umap`), not directly.
    """
    import umap

    model = umap.UMAP(n_components=n_components, n_neighbors=n_neighbors, min_dist=min_dist, metric="euclidean",
                      random_state=seed, transform_seed=seed, n_jobs=1)  # n_jobs=1: what random_state forces anyway
    with warnings.catch_warnings():
        # umap-learn warns that a seed disables parallelism; that is the point of the seed
        warnings.filterwarnings("ignore", message=".*random_state.*", category=UserWarning)
        train_u = np.asarray(model.fit_transform(train_x), dtype=np.float32)
        test_u = (np.asarray(model.transform(test_x), dtype=np.float32) if len(test_x)
                  else np.zeros((0, n_components), dtype=np.float32))
    return train_u, test_u


def numba_target() -> dict:
    """The CPU name and features numba compiles for in this process (its configuration, as read)."""
    from numba.core import config

    return {"cpu_name": config.CPU_NAME, "cpu_features": config.CPU_FEATURES}


def main(argv=None) -> int:
    directory, params = (argv if argv is not None else sys.argv[1:])
    directory = Path(directory)
    params = json.loads(params)
    train_x = np.load(directory / "train.npy", allow_pickle=False)
    test_x = np.load(directory / "test.npy", allow_pickle=False)
    train_u, test_u = fit(train_x, test_x, **params)
    target = json.dumps(numba_target(), sort_keys=True)
    np.savez(directory / "embedding.npz", train=train_u, test=test_u, target=np.array(target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
