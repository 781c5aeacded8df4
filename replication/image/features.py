"""Features of the noisy-label study: a UMAP embedding u in R^8 and a fixed random projection.

The paper (Appendix ``sec:app_synthetic_image``): "we first adopt UMAP (McInnes et al., 2018) to
reduce the dimension of Fashion-MNIST to 8 while preserving the class discriminability
(Sagawa et al., 2022), and then employ a fixed randomly initialized matrix P in R^{8 x d~} to
project the extracted features to a d~-dimensional space." The classifier's input for an image
with embedding u (a row vector) is therefore

    phi = u P  in R^{d~}.

Choices the paper leaves open, made here:

- **UMAP is unsupervised** (no labels passed to ``fit``) and fitted on the *training images
  only*; test images are mapped with the fitted model's ``transform``. Labels never enter the
  embedding, so it cannot leak clean labels into the noisy-label setting and one embedding
  serves every noise rate. UMAP's defaults otherwise (``n_neighbors=15``, ``min_dist=0.1``,
  Euclidean metric), with ``random_state = transform_seed = seed`` (which makes umap-learn run
  single-threaded and deterministic).
- **P has i.i.d. N(0, 1/8) entries** (generally N(0, 1/k) for a k-dimensional embedding): the
  fan-in scaling of common initialisers, so each feature phi_j = sum_k u_k P_kj has variance
  ||u||^2 / k, the mean square of u's coordinates, whatever d~ is. P is drawn from
  ``default_rng([seed, PROJECTION_SEED_TAG])``, fixed by its seed.
- The features are not centred or standardised (the paper mentions no such step).

:func:`umap_embedding` caches its result as an ``.npz`` file keyed by a SHA-256 over the data
set's name, a checksum of its images, the UMAP parameters, the seed and the umap-learn version;
a second call with the same key loads the file without fitting.
"""
from __future__ import annotations

import hashlib
import io
import json
import numbers
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sabo.validation import check_int

__all__ = ["Embedding", "umap_embedding", "projection", "project", "default_cache_dir", "embedding_key"]

CACHE_FORMAT = 1
PROJECTION_SEED_TAG = 0x5052  # "PR": keeps P's stream apart from others seeded with the same integer


def default_cache_dir() -> Path:
    """``$SABO_BENCH_CACHE/umap`` when the variable is set, else ``~/.cache/sabo-bench/umap``."""
    root = os.environ.get("SABO_BENCH_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "sabo-bench") / "umap"


def _umap_version() -> str:
    """umap-learn's version, without importing it (the import compiles numba code: seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("umap-learn")
    except PackageNotFoundError as exc:
        raise ImportError("umap_embedding needs umap-learn: python3 -m pip install umap-learn") from exc


@dataclass(frozen=True, eq=False)
class Embedding:
    """A UMAP embedding of a data set's training and test images.

    ``train`` (n, k) and ``test`` (m, k) float32; ``key`` the cache key; ``path`` the cache file
    (None when caching is off); ``from_cache`` whether this call loaded it instead of fitting;
    ``fit_seconds`` the wall time of the fit that produced it (fit plus transform of the test
    images, as recorded when it was computed); ``params`` the fields hashed into the key.
    """

    train: np.ndarray
    test: np.ndarray
    key: str
    path: Path | None
    from_cache: bool
    fit_seconds: float
    params: dict = field(default_factory=dict)


def embedding_key(dataset, *, n_components: int, seed: int, n_neighbors: int, min_dist: float) -> tuple[str, dict]:
    """``(sha256 hex, fields)``: the cache key of an embedding and what it is computed from."""
    fields = {
        "format": CACHE_FORMAT,
        "dataset": dataset.name,
        "images_sha256": dataset.checksum(labels=False),
        "n_components": int(n_components),
        "seed": int(seed),
        "n_neighbors": int(n_neighbors),
        "min_dist": float(min_dist),
        "metric": "euclidean",
        "umap_learn": _umap_version(),
    }
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest(), fields


def _fit_umap(train_x, test_x, *, n_components, seed, n_neighbors, min_dist):
    """Fit UMAP on the training images, transform the test images; float32 arrays (n, k), (m, k).

    Module-level so that tests can count (or replace) fits.
    """
    try:
        import umap
    except ImportError as exc:
        raise ImportError("umap_embedding needs umap-learn: python3 -m pip install umap-learn") from exc
    model = umap.UMAP(n_components=n_components, n_neighbors=n_neighbors, min_dist=min_dist, metric="euclidean",
                      random_state=seed, transform_seed=seed, n_jobs=1)  # n_jobs=1: what random_state forces anyway
    with warnings.catch_warnings():
        # umap-learn warns that a seed disables parallelism; that is the point of the seed
        warnings.filterwarnings("ignore", message=".*random_state.*", category=UserWarning)
        train_u = np.asarray(model.fit_transform(train_x), dtype=np.float32)
        test_u = (np.asarray(model.transform(test_x), dtype=np.float32) if len(test_x)
                  else np.zeros((0, n_components), dtype=np.float32))
    return train_u, test_u


def _load_cache(path: Path, key: str, n_train: int, n_test: int, k: int):
    """The cached (train, test, meta), or None when the file is absent, unreadable or not ours."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            train, test, meta = npz["train"], npz["test"], json.loads(str(npz["meta"]))
    except Exception as exc:  # a damaged cache file is recomputed, never trusted
        warnings.warn(f"ignoring unreadable UMAP cache file {path} ({type(exc).__name__}: {exc}); refitting",
                      RuntimeWarning, stacklevel=3)
        return None
    if meta.get("key") != key or train.shape != (n_train, k) or test.shape != (n_test, k):
        warnings.warn(f"ignoring UMAP cache file {path}: its key or shapes do not match; refitting",
                      RuntimeWarning, stacklevel=3)
        return None
    return train, test, meta


def umap_embedding(dataset, n_components: int = 8, seed: int = 0, cache_dir=None, *, cache: bool = True,
                   n_neighbors: int = 15, min_dist: float = 0.1) -> Embedding:
    """UMAP embedding u of every image of ``dataset``: fitted on the training images only.

    Parameters
    ----------
    dataset : replication.image.data.Dataset
    n_components : int
        Embedding dimension k (the paper: 8).
    seed : int
        UMAP's ``random_state`` and ``transform_seed``; the result is deterministic given it.
    cache_dir : path, optional
        Where the ``.npz`` cache lives (default :func:`default_cache_dir`).
    cache : bool
        False: neither read nor write the cache.
    n_neighbors, min_dist : UMAP parameters (umap-learn's defaults).

    The cache file ``umap-<key>.npz`` holds ``train``, ``test`` and a JSON ``meta`` (the key's
    fields, the key, the fit time); it is written atomically, so a run killed mid-write leaves
    no partial file. The key covers the data set's name, the SHA-256 of its images (labels
    excluded: UMAP does not see them), k, the seed, ``n_neighbors``, ``min_dist`` and the
    umap-learn version: a new umap-learn release recomputes instead of reusing.
    """
    from replication.storage import atomic_write_bytes

    n_components = check_int("n_components", n_components, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    n_neighbors = check_int("n_neighbors", n_neighbors, minimum=2)
    if isinstance(min_dist, bool) or not isinstance(min_dist, numbers.Real) or not 0.0 <= min_dist:
        raise ValueError(f"min_dist must be a real number >= 0 (got {min_dist!r})")
    if n_components >= dataset.n_features:
        raise ValueError(f"n_components must be below the number of features {dataset.n_features} "
                         f"(got {n_components})")
    key, fields = embedding_key(dataset, n_components=n_components, seed=seed, n_neighbors=n_neighbors,
                                min_dist=min_dist)
    path = None
    if cache:
        path = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        path = path / f"umap-{key}.npz"
        hit = _load_cache(path, key, dataset.n_train, dataset.n_test, n_components)
        if hit is not None:
            train, test, meta = hit
            return Embedding(train, test, key, path, True, float(meta.get("fit_seconds", float("nan"))), fields)
    t0 = time.perf_counter()
    train, test = _fit_umap(dataset.train_x, dataset.test_x, n_components=n_components, seed=seed,
                            n_neighbors=n_neighbors, min_dist=min_dist)
    seconds = time.perf_counter() - t0
    if train.shape != (dataset.n_train, n_components) or test.shape != (dataset.n_test, n_components):
        raise RuntimeError(f"UMAP returned shapes {train.shape}, {test.shape}; expected "
                           f"({dataset.n_train}, {n_components}), ({dataset.n_test}, {n_components})")
    if not (np.all(np.isfinite(train)) and np.all(np.isfinite(test))):
        raise FloatingPointError("UMAP returned non-finite coordinates")
    if path is not None:
        buf = io.BytesIO()
        meta = {**fields, "key": key, "fit_seconds": seconds}
        np.savez(buf, train=train, test=test, meta=np.array(json.dumps(meta, sort_keys=True)))
        atomic_write_bytes(path, buf.getvalue())
    return Embedding(train, test, key, path, False, seconds, fields)


def projection(d_tilde: int, seed: int, n_components: int = 8) -> np.ndarray:
    """The fixed random matrix P in R^{k x d~} (k = ``n_components``, the paper's 8), float64.

    Entries i.i.d. N(0, 1/k), drawn from ``default_rng([seed, PROJECTION_SEED_TAG])``. The
    paper says only "a fixed randomly initialized matrix"; the variance 1/k is our choice (see
    the module docstring). Same ``(d_tilde, seed, k)``, same P.
    """
    d_tilde = check_int("d_tilde", d_tilde, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    k = check_int("n_components", n_components, minimum=1)
    rng = np.random.default_rng([seed, PROJECTION_SEED_TAG])
    return rng.standard_normal((k, d_tilde)) / np.sqrt(k)


def project(u, P) -> np.ndarray:
    """The classifier's features phi = u P: ``(m, k) @ (k, d~) -> (m, d~)`` in float64."""
    u = np.asarray(u, dtype=np.float64)
    P = np.asarray(P, dtype=np.float64)
    if u.ndim != 2 or P.ndim != 2 or u.shape[1] != P.shape[0]:
        raise ValueError(f"u must be (m, k) and P (k, d~) with the same k (got {u.shape} and {P.shape})")
    return u @ P
