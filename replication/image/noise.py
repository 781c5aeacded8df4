"""Symmetric label noise on the training labels (the paper's "noise rate", Table 3).

The paper, following SAM (Foret et al., 2021), trains on "a corrupted version of Fashion-MNIST,
where some of its training labels are randomly flipped according to different noise rates,
while the testing set is clean" (Appendix ``sec:app_synthetic_image``), with noise rates
0, 20, 40, 60 and 80 %. It does not define the flipping further; we use the *symmetric*
model: independently for each training example i,

    with probability r:       y~_i ~ Uniform({0, ..., K-1} \\ {y_i})   (never the true class)
    with probability 1 - r:   y~_i = y_i

so the observed label is wrong with probability exactly r, and
P(y~ = k | y) = (1 - r) [k = y] + r / (K - 1) [k != y]. With K = 10 the true class keeps the
plurality up to r < 0.9 (at r = 0.8: 0.2 against 0.089 for each other class), so even the
80 % setting is learnable, as the paper's accuracies show. (The other common convention,
"replace by a label uniform over all K classes", corrupts only r (K-1)/K of the labels.)

Only training labels are ever passed in; the test set is not part of this API.
"""
from __future__ import annotations

import numbers

import numpy as np

from sabo.validation import check_in_interval

__all__ = ["symmetric_label_noise", "apply_label_noise"]

# Domain tag mixed into integer seeds (np.random.default_rng([seed, tag])), so the noise stream
# differs from other streams built from the same integer (the projection, the batch sampler).
NOISE_SEED_TAG = 0x4E4F  # "NO"


def _generator(seed, tag: int) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or a numpy.random.Generator (got {seed!r})")
    return np.random.default_rng([int(seed), tag])


def symmetric_label_noise(labels, rate: float, *, n_classes: int, seed) -> tuple[np.ndarray, np.ndarray]:
    """Flip each label with probability ``rate`` to a class drawn uniformly from the other classes.

    Parameters
    ----------
    labels : array_like of int, shape (n,)
        Clean training labels in ``0 .. n_classes - 1``. Not modified.
    rate : float in [0, 1)
        Flip probability r (the paper's noise rate; 0.8 for "noise = 80 %"). ``rate = 1`` is
        rejected: it would leave no correct label, and the problem would not be learnable.
    n_classes : int >= 2
        Number of classes K (explicit: inferring it from the labels under-counts when a class
        is absent).
    seed : int >= 0 or numpy.random.Generator
        An integer seeds a fresh generator ``default_rng([seed, NOISE_SEED_TAG])``; a Generator
        is used (and advanced) as given.

    Returns
    -------
    noisy : ndarray, int64, shape (n,)
        The observed labels.
    flipped : ndarray, bool, shape (n,)
        True where ``noisy != labels`` (every flip changes the label).

    Method: ``flipped = U_i < r`` with U_i ~ U[0, 1), then ``noisy = (y + s) mod K`` with the
    shift s ~ Uniform{1, ..., K-1}, which is uniform over the K - 1 other classes.
    """
    rate = check_in_interval("rate", rate, 0.0, 1.0, closed="left")
    if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2 (got {n_classes!r})")
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must be a 1-D array (got shape {y.shape})")
    if y.size and not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be integers (got dtype {y.dtype})")
    y = y.astype(np.int64)  # a copy: the caller's labels are never touched
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(f"labels must lie in 0..{n_classes - 1} (got range [{y.min()}, {y.max()}])")
    rng = _generator(seed, NOISE_SEED_TAG)
    flipped = rng.random(y.size) < rate
    shift = rng.integers(1, n_classes, size=int(flipped.sum()))  # 1..K-1: never the class itself
    y[flipped] = (y[flipped] + shift) % n_classes
    return y, flipped


def apply_label_noise(dataset, rate: float, *, seed):
    """A copy of ``dataset`` whose *training* labels carry symmetric noise; the test set is shared.

    Returns ``(noisy_dataset, flipped)``. The name is unchanged (the images, and so the UMAP
    cache key, do not depend on the labels).
    """
    from dataclasses import replace

    noisy, flipped = symmetric_label_noise(dataset.train_y, rate, n_classes=dataset.n_classes, seed=seed)
    return replace(dataset, train_y=noisy), flipped
