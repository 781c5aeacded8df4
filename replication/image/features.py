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
import platform
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from replication.errors import PackageUnavailable, ResourceUnavailable, one_line
from sabo.validation import check_int

__all__ = ["Embedding", "EmbeddingMismatch", "umap_embedding", "projection", "project", "default_cache_dir",
           "embedding_key", "embedding_inputs", "embedding_sha256", "shipped_path", "write_embedding"]

CACHE_FORMAT = 2
PROJECTION_SEED_TAG = 0x5052  # "PR": keeps P's stream apart from others seeded with the same integer
#: embeddings that ship with sabo-bench: ``<data set>-umap<k>-seed<s>-<sha256[:16]>.npz``
SHIPPED_DIR = Path(__file__).with_name("embeddings")
#: the software whose versions are part of a computed embedding's cache key
SOFTWARE = ("umap-learn", "pynndescent", "numba", "llvmlite", "numpy", "scipy", "scikit-learn")


class EmbeddingMismatch(ResourceUnavailable, ValueError):
    """The embedding a configuration pins (``image.umap.sha256``) is neither shipped nor cached, and
    the one computed here differs from it: a different embedding is a different configuration."""


def default_cache_dir() -> Path:
    """``$SABO_BENCH_CACHE/umap`` when the variable is set, else ``~/.cache/sabo-bench/umap``."""
    root = os.environ.get("SABO_BENCH_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "sabo-bench") / "umap"


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


@dataclass(frozen=True, eq=False)
class Embedding:
    """A UMAP embedding of a data set's training and test images.

    ``train`` (n, k) and ``test`` (m, k) float32; ``sha256`` the checksum of their contents
    (:func:`embedding_sha256`: what ``image.umap.sha256`` pins); ``source`` where it came from
    (``"shipped"``: a file of sabo-bench's, ``"cache"``: computed earlier on this machine,
    ``"fit"``: computed by this call); ``key`` the cache key of the inputs and software that
    compute it; ``path`` the file it was read from or written to (None when caching is off);
    ``from_cache`` whether it was read rather than fitted; ``fit_seconds`` the wall time of the
    fit that produced it (fit plus transform of the test images, as recorded when computed);
    ``params`` the fields hashed into the key.
    """

    train: np.ndarray
    test: np.ndarray
    key: str
    path: Path | None
    from_cache: bool
    fit_seconds: float
    params: dict = field(default_factory=dict)
    sha256: str = ""
    source: str = "fit"


def embedding_sha256(train, test) -> str:
    """SHA-256 (hex) of an embedding's two arrays: their names, dtypes, shapes and bytes (C order)."""
    h = hashlib.sha256()
    for name, arr in (("train", train), ("test", test)):
        arr = np.ascontiguousarray(arr)
        h.update(f"{name}:{arr.dtype.str}:{arr.shape};".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def embedding_inputs(dataset, *, n_components: int, seed: int, n_neighbors: int, min_dist: float) -> dict:
    """What an embedding is *of*: the data set's images (name and checksum) and UMAP's parameters."""
    return {
        "format": CACHE_FORMAT,
        "dataset": dataset.name,
        "images_sha256": dataset.checksum(labels=False),
        "n_components": int(n_components),
        "seed": int(seed),
        "n_neighbors": int(n_neighbors),
        "min_dist": float(min_dist),
        "metric": "euclidean",
    }


def embedding_key(dataset, *, n_components: int, seed: int, n_neighbors: int, min_dist: float) -> tuple[str, dict]:
    """``(sha256 hex, fields)``: the cache key of an embedding computed here, and what it hashes.

    The fields are :func:`embedding_inputs` plus ``software``: the versions of :data:`SOFTWARE`,
    numba's compilation target (``generic``: see :mod:`replication.image.umap_fit`) and the
    machine's architecture, since any of them can change the embedding: a new release
    recomputes instead of reusing.
    """
    from .umap_fit import PORTABLE_ENV

    software = {dist: _version(dist) for dist in SOFTWARE}
    software.update(numba_target=PORTABLE_ENV["NUMBA_CPU_NAME"], machine=platform.machine())
    fields = {**embedding_inputs(dataset, n_components=n_components, seed=seed, n_neighbors=n_neighbors,
                                 min_dist=min_dist), "software": software}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest(), fields


def _fit_umap(train_x, test_x, *, n_components, seed, n_neighbors, min_dist):
    """Fit UMAP on the training images, transform the test images; float32 arrays (n, k), (m, k).

    Runs :mod:`replication.image.umap_fit` in a child process compiled for numba's portable
    target, so that the embedding does not depend on which CPU computes it (that module says
    why). Module-level so that tests can count (or replace) fits.
    """
    import subprocess
    import sys
    import tempfile

    from .umap_fit import child_env

    if _version("umap-learn") is None:
        raise PackageUnavailable("the UMAP embedding needs umap-learn: python3 -m pip install umap-learn")
    params = {"n_components": int(n_components), "seed": int(seed), "n_neighbors": int(n_neighbors),
              "min_dist": float(min_dist)}
    with tempfile.TemporaryDirectory(prefix="sabo-umap-") as tmp:
        np.save(Path(tmp) / "train.npy", np.ascontiguousarray(train_x))
        np.save(Path(tmp) / "test.npy", np.ascontiguousarray(test_x))
        done = subprocess.run([sys.executable, "-m", "replication.image.umap_fit", tmp, json.dumps(params)],
                              env=child_env(), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise RuntimeError(f"the UMAP fit failed in its child process: {one_line(last)}")
        with np.load(Path(tmp) / "embedding.npz", allow_pickle=False) as npz:
            return npz["train"], npz["test"]


def _read_npz(path: Path):
    """(train, test, meta) of an embedding file, or None (with a warning) when it cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            return npz["train"], npz["test"], json.loads(str(npz["meta"]))
    except Exception as exc:  # a damaged file is recomputed, never trusted
        warnings.warn(f"ignoring unreadable UMAP embedding file {path} ({type(exc).__name__}: {exc})",
                      RuntimeWarning, stacklevel=4)
        return None


def _load_cache(path: Path, key: str, n_train: int, n_test: int, k: int):
    """The cached (train, test, meta), or None when the file is absent, unreadable or not ours."""
    if not path.is_file():
        return None
    hit = _read_npz(path)
    if hit is None:
        return None
    train, test, meta = hit
    if meta.get("key") != key or train.shape != (n_train, k) or test.shape != (n_test, k):
        warnings.warn(f"ignoring UMAP cache file {path}: its key or shapes do not match; refitting",
                      RuntimeWarning, stacklevel=3)
        return None
    return hit


def shipped_path(sha256: str, shipped_dir=None) -> Path | None:
    """The shipped embedding file whose name carries ``sha256[:16]``, or None."""
    directory = Path(shipped_dir) if shipped_dir is not None else SHIPPED_DIR
    found = sorted(directory.glob(f"*-{sha256[:16]}.npz")) if directory.is_dir() else []
    return found[0] if found else None


def _load_shipped(sha256: str, inputs: dict, shipped_dir=None):
    """(train, test, meta, path) of the shipped embedding with checksum ``sha256`` computed from
    ``inputs``, or None: a file whose contents or inputs differ is ignored with a warning."""
    path = shipped_path(sha256, shipped_dir)
    if path is None:
        return None
    hit = _read_npz(path)
    if hit is None:
        return None
    train, test, meta = hit
    if embedding_sha256(train, test) != sha256 or meta.get("inputs") != inputs:
        warnings.warn(f"ignoring shipped UMAP embedding {path}: its contents or inputs do not match "
                      f"(data set {inputs['dataset']}, sha256 {sha256[:16]}...)", RuntimeWarning, stacklevel=3)
        return None
    return train, test, meta, path


def write_embedding(path: Path, emb: Embedding, inputs: dict) -> None:
    """Write ``emb`` as an ``.npz`` file (atomically): ``train``, ``test`` and a JSON ``meta`` holding
    its key and fields, its inputs (:func:`embedding_inputs`), its checksum and its fit time."""
    from replication.storage import atomic_write_bytes

    buf = io.BytesIO()
    meta = {**emb.params, "key": emb.key, "inputs": inputs, "sha256": emb.sha256, "fit_seconds": emb.fit_seconds}
    np.savez(buf, train=emb.train, test=emb.test, meta=np.array(json.dumps(meta, sort_keys=True)))
    atomic_write_bytes(path, buf.getvalue())


def umap_embedding(dataset, n_components: int = 8, seed: int = 0, cache_dir=None, *, cache: bool = True,
                   n_neighbors: int = 15, min_dist: float = 0.1, expected_sha256: str | None = None,
                   shipped_dir=None) -> Embedding:
    """UMAP embedding u of every image of ``dataset``: fitted on the training images only.

    Parameters
    ----------
    dataset : replication.image.data.Dataset
    n_components : int
        Embedding dimension k (the paper: 8).
    seed : int
        UMAP's ``random_state`` and ``transform_seed``; the result is deterministic given it
        (and numba's compilation target, pinned: :mod:`replication.image.umap_fit`).
    cache_dir : path, optional
        Where computed embeddings are cached (default :func:`default_cache_dir`).
    cache : bool
        False: neither read nor write the cache (a shipped embedding is still used).
    n_neighbors, min_dist : UMAP parameters (umap-learn's defaults).
    expected_sha256 : str, optional
        The checksum (:func:`embedding_sha256`) the caller's configuration pins. Looked for first
        among the embeddings that ship with sabo-bench (``shipped_dir``, default
        :data:`SHIPPED_DIR`), which need no umap-learn and are the same on every machine; then
        in the cache; then computed. A computed or cached embedding with another checksum
        raises :class:`EmbeddingMismatch`, which says how to run on it instead.

    A computed embedding is cached as ``umap-<key>.npz`` (``train``, ``test``, a JSON ``meta``),
    written atomically, so a run killed mid-write leaves no partial file. The key
    (:func:`embedding_key`) covers the data set's name, the SHA-256 of its images (labels
    excluded: UMAP does not see them), k, the seed, ``n_neighbors``, ``min_dist``, and the
    software that computes it.
    """
    n_components = check_int("n_components", n_components, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    n_neighbors = check_int("n_neighbors", n_neighbors, minimum=2)
    if isinstance(min_dist, bool) or not isinstance(min_dist, numbers.Real) or not 0.0 <= min_dist:
        raise ValueError(f"min_dist must be a real number >= 0 (got {min_dist!r})")
    if n_components >= dataset.n_features:
        raise ValueError(f"n_components must be below the number of features {dataset.n_features} "
                         f"(got {n_components})")
    if expected_sha256 is not None and not (isinstance(expected_sha256, str)
                                            and len(expected_sha256) == 64
                                            and all(c in "0123456789abcdef" for c in expected_sha256)):
        raise ValueError(f"expected_sha256 must be 64 lower-case hex digits (got {expected_sha256!r})")
    umap_params = {"n_components": n_components, "seed": seed, "n_neighbors": n_neighbors, "min_dist": min_dist}
    inputs = embedding_inputs(dataset, **umap_params)
    if expected_sha256 is not None:
        hit = _load_shipped(expected_sha256, inputs, shipped_dir)
        if hit is not None:
            train, test, meta, path = hit
            return Embedding(train, test, meta["key"], path, True, float(meta.get("fit_seconds", float("nan"))),
                             {k: v for k, v in meta.items() if k in ("software", *inputs)}, expected_sha256,
                             "shipped")
    key, fields = embedding_key(dataset, **umap_params)
    emb, path = None, None
    if cache:
        path = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        path = path / f"umap-{key}.npz"
        hit = _load_cache(path, key, dataset.n_train, dataset.n_test, n_components)
        if hit is not None:
            train, test, meta = hit
            emb = Embedding(train, test, key, path, True, float(meta.get("fit_seconds", float("nan"))), fields,
                            embedding_sha256(train, test), "cache")
    if emb is None:
        t0 = time.perf_counter()
        train, test = _fit_umap(dataset.train_x, dataset.test_x, **umap_params)
        seconds = time.perf_counter() - t0
        if train.shape != (dataset.n_train, n_components) or test.shape != (dataset.n_test, n_components):
            raise RuntimeError(f"UMAP returned shapes {train.shape}, {test.shape}; expected "
                               f"({dataset.n_train}, {n_components}), ({dataset.n_test}, {n_components})")
        if not (np.all(np.isfinite(train)) and np.all(np.isfinite(test))):
            raise FloatingPointError("UMAP returned non-finite coordinates")
        emb = Embedding(train, test, key, path, False, seconds, fields, embedding_sha256(train, test), "fit")
        if path is not None:
            write_embedding(path, emb, inputs)
    if expected_sha256 is not None and emb.sha256 != expected_sha256:
        software = ", ".join(f"{k} {v}" for k, v in fields["software"].items())
        raise EmbeddingMismatch(
            f"the UMAP embedding of {dataset.name} pinned by image.umap.sha256 ({expected_sha256[:16]}...) is not "
            f"shipped for these inputs, and the one {'cached' if emb.from_cache else 'computed'} here differs "
            f"({emb.sha256[:16]}..., {software}): to run on this machine's embedding (a different "
            f"configuration), pin {emb.sha256} for this data set under image.umap.sha256 in params.yaml")
    return emb


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
