"""The linear classifier's cross-entropy, for a whole population at once, on mini-batches.

The paper (Appendix ``sec:app_synthetic_image``): "a linear layer is used as a classifier.
Therefore, the total number of the trainable parameters is d = 10 x d~", with "the
cross-entropy loss ... as the training objective" and batches of M = 2048 examples. A linear
layer with a bias would have 10 d~ + 10 parameters, so the paper's count means **no bias**;
we follow the count. A candidate x in R^d is read as the weight matrix W in R^{10 x d~} in
row-major order (``W = x.reshape(10, d~)``: W[k, j] = x[k d~ + j]). For features phi_i in
R^{d~} (:func:`replication.image.features.project`) and labels y_i,

    logits  z_i = W phi_i                    in R^K   (K = 10 classes)
    F(x; B) = (1/|B|) sum_{i in B} [ log sum_k exp(z_ik) - z_{i y_i} ]

the mean cross-entropy (negative log-likelihood of softmax(z_i)) over the batch B; the log-sum-exp
subtracts max_k z_ik first, so large logits neither overflow nor lose the loss (float64).

:func:`population_losses` evaluates n candidates on the same examples with one matrix product
(features (m, d~) times all n K weight rows at once). :class:`MiniBatchObjective` draws one
fresh batch per call and evaluates every row of the population on it: the mini-batch contract
of :mod:`sabo.protocol` (Algorithm 2 samples B' for the perturbation round and a new B for the
update round; one call is one round).
"""
from __future__ import annotations

import copy

import numpy as np

from sabo.protocol import generator_from_state
from sabo.validation import check_int

__all__ = ["population_losses", "MiniBatchObjective", "accuracy", "predict", "check_data", "mean_cross_entropy",
           "DEFAULT_BATCH_SIZE"]

DEFAULT_BATCH_SIZE = 2048  # the paper's M
BATCH_SEED_TAG = 0x4D42  # "MB": keeps the sampler's stream apart from others seeded with the same integer
# Upper bound on the logits held at once (n candidates x rows x K); larger problems are cut into
# row chunks. 2**22 float64 = 32 MiB per temporary; the paper's ask (100 x 2048 x 10) is one chunk.
MAX_LOGITS = 2**22


def check_data(features, labels, n_classes) -> tuple[np.ndarray, np.ndarray]:
    """(phi, y) validated for :func:`mean_cross_entropy`: C-contiguous finite float64 features (m, d~), m >= 1,
    and int64 labels (m,) in 0..n_classes-1; a ``ValueError`` naming the problem otherwise."""
    phi = np.asarray(features)
    if phi.ndim != 2 or phi.shape[0] == 0 or phi.shape[1] == 0:
        raise ValueError(f"features must be a non-empty 2-D array (m, d~) (got shape {phi.shape})")
    phi = np.ascontiguousarray(phi, dtype=np.float64)
    if not np.all(np.isfinite(phi)):
        raise ValueError("features must be finite")
    y = np.asarray(labels)
    if y.shape != (phi.shape[0],):
        raise ValueError(f"labels must have shape ({phi.shape[0]},), one per row of features (got {y.shape})")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be integers (got dtype {y.dtype})")
    y = y.astype(np.int64)
    if y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"labels must lie in 0..{n_classes - 1} (got range [{y.min()}, {y.max()}])")
    return phi, y


def _check_population(X, dim: int, name: str = "X") -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != dim:
        raise ValueError(f"{name} must have shape (n, {dim}) -- one flattened weight matrix W (K x d~, "
                         f"row-major) per row (got shape {X.shape})")
    return X


def mean_cross_entropy(X: np.ndarray, phi: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Mean cross-entropy of each row of X (n, K d~) on (phi, y), shape (n,); no validation (hot path).

    ``phi`` and ``y`` as :func:`check_data` returns them, X float64 of shape (n, n_classes d~);
    :func:`population_losses` is the validating entry point.

    Layout: the weight rows are ordered class-major (row k n + c = class k of candidate c), so
    the one matrix product gives logits of shape (rows, K, n) whose class reductions run over
    a middle axis with contiguous candidates -- about twice as fast in NumPy as reducing a
    trailing axis of length 10. Per example i and candidate c, with z_max = max_k z_k:
    loss = log sum_k exp(z_k - z_max) - (z_{y_i} - z_max).
    """
    n = X.shape[0]
    m, d_tilde = phi.shape
    Wk = X.reshape(n, n_classes, d_tilde).transpose(1, 0, 2).reshape(n_classes * n, d_tilde)
    total = np.zeros(n)
    rows = max(1, MAX_LOGITS // max(1, n * n_classes))
    for start in range(0, m, rows):
        stop = min(m, start + rows)
        logits = (phi[start:stop] @ Wk.T).reshape(stop - start, n_classes, n)  # one GEMM
        logits -= logits.max(axis=1, keepdims=True)  # shift by z_max: exp cannot overflow
        label = np.broadcast_to(y[start:stop, None, None], (stop - start, 1, n))
        true = np.take_along_axis(logits, label, axis=1)[:, 0, :]  # z_{y_i} - z_max, (rows, n)
        np.exp(logits, out=logits)
        total += (np.log(logits.sum(axis=1)) - true).sum(axis=0)
    return total / m


def population_losses(W, features, labels, *, n_classes: int = 10) -> np.ndarray:
    """Mean cross-entropy of each of n candidates on the same m examples, shape (n,), float64.

    Parameters
    ----------
    W : array_like, shape (n, n_classes * d~)
        One flattened weight matrix per row (row-major, ``W[c].reshape(n_classes, d~)``).
    features : array_like, shape (m, d~)
    labels : array_like of int, shape (m,)
    n_classes : int
        K (10 in the paper).

    All n K weight rows multiply the features in one matrix product (chunked over examples
    only when n m K exceeds :data:`MAX_LOGITS`). Non-finite weights give non-finite losses; the
    optimizer's ``nonfinite`` policy decides what happens to them.
    """
    n_classes = check_int("n_classes", n_classes, minimum=2)
    phi, y = check_data(features, labels, n_classes)
    X = _check_population(W, n_classes * phi.shape[1], "W")
    return mean_cross_entropy(X, phi, y, n_classes)


class MiniBatchObjective:
    """F(x; B) for a population, on one freshly drawn mini-batch B per call (mini-batch SABO).

    Parameters
    ----------
    features : array_like, shape (m, d~)
        Training features phi (:func:`~replication.image.features.project`).
    labels : array_like of int, shape (m,)
        Training labels (the noisy ones in the noisy-label study).
    batch_size : int
        Requested batch size M (the paper: 2048). **Cap rule:** the effective size is
        ``min(batch_size, m)``; when M >= m every call uses the whole training set (the
        objective is then deterministic; on the digits stand-in, m = 1,437 < 2048, so the paper's
        M means full batch there -- pass a smaller M to keep batch noise).
        ``batch_size_requested`` and ``batch_size`` record both.
    seed : int >= 0 or numpy.random.Generator
        The batch sampler: an integer seeds ``default_rng([seed, BATCH_SEED_TAG])``.
    n_classes : int
        K (10).

    Each call ``objective(X)`` with X of shape (n, K d~): draws one batch -- M distinct indices,
    ``rng.choice(m, M, replace=False)`` (i.i.d. across calls, as Algorithm 2's "sample a batch
    of data"; when M = m the whole set in index order, without touching the generator) -- and
    returns the n mean losses on it. An invalid X raises before a batch is drawn, so a
    rejected call does not advance the sampler. ``n_calls`` counts calls, ``last_batch`` holds
    the last batch's indices. ``get_state()``/``set_state()`` save and restore the sampler
    (and the counter), so a resumed run draws the same batches as an uninterrupted one.
    """

    def __init__(self, features, labels, batch_size: int = DEFAULT_BATCH_SIZE, seed=0, *, n_classes: int = 10):
        self.n_classes = check_int("n_classes", n_classes, minimum=2)
        self.features, self.labels = check_data(features, labels, self.n_classes)
        self.n_examples, self.d_tilde = self.features.shape
        self.dim = self.n_classes * self.d_tilde
        self.batch_size_requested = check_int("batch_size", batch_size, minimum=1)
        self.batch_size = min(self.batch_size_requested, self.n_examples)
        if isinstance(seed, np.random.Generator):
            self._rng = seed
        else:
            seed = check_int("seed", seed, minimum=0)
            self._rng = np.random.default_rng([seed, BATCH_SEED_TAG])
        self.n_calls = 0
        self.last_batch: np.ndarray | None = None

    @property
    def full_batch(self) -> bool:
        """True when every call evaluates on the whole training set (M >= m)."""
        return self.batch_size == self.n_examples

    def sample_batch(self) -> np.ndarray:
        """Indices of the next batch (advances the sampler)."""
        if self.full_batch:
            return np.arange(self.n_examples)
        return self._rng.choice(self.n_examples, size=self.batch_size, replace=False)

    def __call__(self, X) -> np.ndarray:
        X = _check_population(X, self.dim)
        batch = self.sample_batch()
        self.last_batch = batch
        self.n_calls += 1
        return mean_cross_entropy(X, self.features[batch], self.labels[batch], self.n_classes)

    def full_loss(self, X) -> np.ndarray:
        """Losses on the whole training set, without drawing a batch (for metrics)."""
        return mean_cross_entropy(_check_population(X, self.dim), self.features, self.labels, self.n_classes)

    def get_state(self) -> dict:
        """The sampler's state and the call counter (a fresh dict of plain data)."""
        return {"bit_generator": type(self._rng.bit_generator).__name__,
                "state": copy.deepcopy(self._rng.bit_generator.state), "n_calls": self.n_calls}

    def set_state(self, state: dict) -> None:
        """Restore what :meth:`get_state` returned: the next batches are those that followed it.

        The state is validated (it may come from a checkpoint file): the bit generator must be
        one of NumPy's (``sabo.protocol.BIT_GENERATORS``), the counter an integer >= 0.
        """
        if not isinstance(state, dict) or set(state) != {"bit_generator", "state", "n_calls"}:
            raise ValueError("state must be a dict returned by MiniBatchObjective.get_state()")
        rng = generator_from_state({"bit_generator": state["bit_generator"], "state": state["state"]},
                                   "objective state")
        self._rng, self.n_calls = rng, check_int("objective state['n_calls']", state["n_calls"], minimum=0)


def predict(w, features, *, n_classes: int = 10) -> np.ndarray:
    """Predicted classes argmax_k (W phi_i)_k of one parameter vector (ties: the lowest class)."""
    n_classes = check_int("n_classes", n_classes, minimum=2)
    phi = np.asarray(features, dtype=np.float64)
    if phi.ndim != 2:
        raise ValueError(f"features must be 2-D (m, d~) (got shape {phi.shape})")
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (n_classes * phi.shape[1],):
        raise ValueError(f"w must have shape ({n_classes * phi.shape[1]},) = n_classes x d~ (got {w.shape})")
    return np.argmax(phi @ w.reshape(n_classes, -1).T, axis=1)


def accuracy(w, features, labels, *, n_classes: int = 10) -> float:
    """Fraction of examples whose label is the predicted class (e.g. clean test accuracy of the mean)."""
    n_classes = check_int("n_classes", n_classes, minimum=2)
    phi, y = check_data(features, labels, n_classes)
    return float(np.mean(predict(w, phi, n_classes=n_classes) == y))
