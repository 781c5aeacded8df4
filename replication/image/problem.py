"""The noisy-label classification problem in the form the run engine expects.

:class:`ImageProblem` implements :class:`replication.problem.Problem`: ``x0`` (the paper's
mu_0 = 0), ``objective`` (:class:`~replication.image.objective.MiniBatchObjective`: one fresh
batch per ask), ``metrics`` at the current mean (clean test accuracy and loss, full training
loss on the noisy labels; computed on whole sets, so they never draw a batch and never
disturb the sampler), and ``get_state``/``set_state`` (the batch sampler).

:meth:`ImageProblem.from_dataset` assembles it from a :class:`~replication.image.data.Dataset`:
label noise on the training labels, the pinned UMAP embedding u and the projection P (the
features phi = u P are never formed: the objective folds P into the weights). Which seeds a
study passes for each part (noise, UMAP, P, batches) is the study's decision, not made here.
"""
from __future__ import annotations

import numpy as np

from .objective import DEFAULT_BATCH_SIZE, MiniBatchObjective, check_data, mean_cross_entropy, predict

__all__ = ["ImageProblem"]


class ImageProblem:
    """Linear classifier trained by a black-box optimizer on (possibly noisy) training labels.

    Parameters
    ----------
    train_features, train_labels : the training set the objective sees (labels as observed).
    test_features, test_labels : the clean test set, for metrics only.
    projection : (k, d~) array, optional
        P: the features given are then embeddings u, and the classifier sees u P (folded into its
        weights, :mod:`replication.image.objective`).
    batch_size, batch_seed : the mini-batch sampler (see :class:`MiniBatchObjective`).
    dtype : the precision of the objective's losses, "float64" or "float32" (:mod:`replication.image.objective`,
        "Precision"); the metrics are float64 either way.
    n_classes : int
    info : dict, optional
        Free-form description (noise rate, seeds, cache key...), kept as ``problem.info``.
    """

    def __init__(self, train_features, train_labels, test_features, test_labels, *,
                 batch_size: int = DEFAULT_BATCH_SIZE, batch_seed=0, n_classes: int = 10, info=None,
                 val_features=None, val_labels=None, projection=None, dtype: str = "float64"):
        self._objective = MiniBatchObjective(train_features, train_labels, batch_size, batch_seed, n_classes=n_classes,
                                             projection=projection, dtype=dtype)
        self._test_phi, self._test_y = check_data(test_features, test_labels, n_classes)
        self._val = None if val_features is None else check_data(val_features, val_labels, n_classes)
        columns = self._objective.features.shape[1]
        for name, arr in (("test", self._test_phi), ("validation", None if self._val is None else self._val[0])):
            if arr is not None and arr.shape[1] != columns:
                raise ValueError(f"{name} features have {arr.shape[1]} columns, training features {columns}")
        self.n_classes = n_classes
        self.dim = self._objective.dim
        self.x0 = np.zeros(self.dim)  # the paper: mu_0 = 0
        self.info = dict(info or {})

    @property
    def minibatch(self) -> MiniBatchObjective:
        return self._objective

    def objective(self, X: np.ndarray) -> np.ndarray:
        return self._objective(X)

    def metrics(self, mean: np.ndarray) -> dict[str, float]:
        w = np.asarray(mean, dtype=np.float64)[None, :]
        P, K = self._objective.projection, self.n_classes
        out = {
            "test_accuracy": float(np.mean(predict(w[0], self._test_phi, n_classes=K, projection=P) == self._test_y)),
            "test_loss": float(mean_cross_entropy(w, self._test_phi, self._test_y, K, P)[0]),
            "train_loss": float(self._objective.full_loss(w)[0]),
        }
        if self._val is not None:  # held out from the (noisy) training data: for model selection
            phi, y = self._val
            out["val_accuracy"] = float(np.mean(predict(w[0], phi, n_classes=K, projection=P) == y))
        return out

    def get_state(self):
        return self._objective.get_state()

    def set_state(self, state) -> None:
        self._objective.set_state(state)

    @classmethod
    def from_dataset(cls, dataset, *, d_tilde: int, noise_rate: float, noise_seed: int, projection_seed: int,
                     umap_seed: int = 0, n_components: int = 8, batch_size: int = DEFAULT_BATCH_SIZE,
                     batch_seed: int = 0, cache_dir=None, embedding=None, validation_fraction: float = 0.0,
                     split_seed: int = 0, dtype: str = "float64") -> ImageProblem:
        """Noise -> UMAP (pinned or cached) -> P, folded into the weights; ``embedding`` skips the UMAP step.

        ``validation_fraction`` > 0 holds out that share of the (noisy) training set, drawn by
        ``split_seed``, as a validation set for hyperparameter selection (``val_accuracy``);
        the objective then sees only the rest.
        """
        from .features import projection, umap_embedding
        from .noise import symmetric_label_noise

        noisy, flipped = symmetric_label_noise(dataset.train_y, noise_rate, n_classes=dataset.n_classes,
                                               seed=noise_seed)
        if embedding is None:
            embedding = umap_embedding(dataset, n_components=n_components, seed=umap_seed, cache_dir=cache_dir)
        P = projection(d_tilde, projection_seed, n_components=embedding.train.shape[1])
        info = {"dataset": dataset.name, "is_stand_in": dataset.is_stand_in, "noise_rate": float(noise_rate),
                "dtype": dtype, "flipped": int(flipped.sum()), "umap_key": embedding.key,
                "umap_sha256": embedding.sha256, "d_tilde": int(d_tilde)}
        train_u = np.asarray(embedding.train, dtype=np.float64)
        if not 0.0 <= validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must lie in [0, 1) (got {validation_fraction!r})")
        n_val = int(round(validation_fraction * noisy.size))
        order = np.random.default_rng([split_seed, 0x56414C]).permutation(noisy.size)
        val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
        info.update(n_train=int(train.size), n_val=int(val.size))
        return cls(train_u[train], noisy[train], np.asarray(embedding.test, dtype=np.float64), dataset.test_y,
                   batch_size=batch_size, batch_seed=batch_seed, n_classes=dataset.n_classes, info=info,
                   val_features=train_u[val] if n_val else None, val_labels=noisy[val] if n_val else None,
                   projection=P, dtype=dtype)
