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

the mean cross-entropy (negative log-likelihood of softmax(z_i)) over the batch B.

**Precision.** By default every step is float64. ``dtype="float32"`` computes the logits and the
log-sum-exp in float32 and sums the per-example losses into float64 means (the weights are
folded with the projection in float64 first, then rounded): 2.6-2.8x faster on the paper's
population (NumPy's float64 exp is scalar without AVX-512, its float32 exp vectorised) and within
4e-8 of the float64 losses relative to their size (measured on Fashion-MNIST). It changes every result (the optimizer
sees other losses), so it is part of the run's config (``problem.dtype``, image study); the
metrics (:class:`replication.image.problem.ImageProblem`) stay float64 whatever it is.

**The projection folded into the weights.** The study's features are phi_i = u_i P, a UMAP
embedding u_i in R^k (k = 8) times a fixed P in R^{k x d~}
(:mod:`replication.image.features`). Given ``projection=P``, the features passed are the
embeddings u_i and the logits are computed as

    z_i = u_i (P W^T)                        (k x K per candidate, then k multiply-adds per logit)

instead of (u_i P) W^T: the same numbers in exact arithmetic, M k K + k d~ K multiply-adds per
candidate instead of M d~ K (d~ = 100, M = 2048: 12x fewer), and phi is never formed. The
rounding differs from the unfolded product's, so results differ from an unfolded objective's
in the last bits (the image study's records are computed with the folded form throughout).

**The log-sum-exp, exactly and without underflow.** With s_k = z_ik - max_k z_ik <= 0 (one
s_k = 0), loss_i = log(sum_k e^{s_k}) - s_{y_i}. The sum is accumulated from 1 upwards:
S = fl(...fl(fl(1 + e^{s_0}) + e^{s_1}) ... + e^{s_{K-1}}), and sum_k e^{s_k} = S - 1, which is
exact in floating point (S >= 2 because one term is e^0 = 1, so S - 1 is a multiple of the
unit in the last place of S). Every partial sum is >= 1, so a term below 2^-53 (half a unit in
the last place of 1) leaves it unchanged, whatever its value: the s_k below :data:`EXP_FLOOR`
(e^-64 < 2^-92) are raised to it before the exponential, which then never underflows into
denormal numbers or zero (a slow path: ~5x slower on the logits of a diverged run), and the
sum is bit for bit the one the unclipped terms give (in float32 too: there the threshold is 2^-24, and
e^-64 is still a normal float32). ``s_{y_i}`` is taken before clipping.

:func:`population_losses` evaluates n candidates on the same examples with one matrix product
(features times all n K weight rows at once). :class:`MiniBatchObjective` draws one fresh batch
per call and evaluates every row of the population on it: the mini-batch contract of
:mod:`sabo.protocol` (Algorithm 2 samples B' for the perturbation round and a new B for the
update round; one call is one round).
"""
from __future__ import annotations

import copy

import numpy as np

from sabo.protocol import generator_from_state
from sabo.validation import check_int

__all__ = ["population_losses", "MiniBatchObjective", "accuracy", "predict", "check_data", "mean_cross_entropy",
           "log_sum_exp_shifted", "DEFAULT_BATCH_SIZE", "DTYPES"]

DEFAULT_BATCH_SIZE = 2048  # the paper's M
BATCH_SEED_TAG = 0x4D42  # "MB": keeps the sampler's stream apart from others seeded with the same integer
# The logits held at once (n candidates x rows x K): larger problems are cut into row chunks. The
# log-sum-exp makes several passes over them, and 2**17 float64 (1 MiB) per temporary keeps those
# passes in a core's cache: about 1.5-2x faster than one 32 MiB chunk for the paper's ask
# (100 x 2048 x 10), measured with benchmarks/image_scale.py.
MAX_LOGITS = 2**17
#: shifted logits below this are raised to it before the exponential (module docstring: the loss
#: is bit for bit the same, since e^EXP_FLOOR < 2^-53)
EXP_FLOOR = -64.0
#: the arithmetic the objective may compute in (module docstring, "Precision")
DTYPES = ("float64", "float32")


def check_dtype(dtype) -> np.dtype:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (got {dtype!r})")
    return np.dtype(dtype)


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


def _check_projection(projection, k: int) -> np.ndarray | None:
    """P as a C-contiguous finite float64 (k, d~) array, or None."""
    if projection is None:
        return None
    P = np.ascontiguousarray(projection, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != k or P.shape[1] == 0:
        raise ValueError(f"projection must have shape ({k}, d~): one row per feature column (got shape {P.shape})")
    if not np.all(np.isfinite(P)):
        raise ValueError("projection must be finite")
    return P


def weight_dim(features: np.ndarray, projection: np.ndarray | None) -> int:
    """d~: the columns of the features the weights act on (P's columns when folded)."""
    return (projection if projection is not None else features).shape[1]


def class_blocks(X: np.ndarray, n_classes: int, projection: np.ndarray | None) -> np.ndarray:
    """The weights as K blocks B_k with logits of class k = features @ B_k, shape (K, k or d~, n): block k
    holds W_k^T (column c: class k's weights of candidate c), or P W_k^T with the projection folded in."""
    n = X.shape[0]
    Wt = X.reshape(n, n_classes, -1).transpose(1, 2, 0)  # (K, d~, n)
    return Wt if projection is None else np.matmul(projection, Wt)


def mean_cross_entropy(X: np.ndarray, phi: np.ndarray, y: np.ndarray, n_classes: int,
                       projection: np.ndarray | None = None, dtype=np.float64) -> np.ndarray:
    """Mean cross-entropy of each row of X (n, K d~) on (phi, y), shape (n,) float64; no validation (hot path).

    ``phi`` and ``y`` as :func:`check_data` returns them (with ``projection`` P of shape (k, d~):
    the embeddings u, of shape (m, k)), X float64 of shape (n, n_classes d~); :func:`population_losses`
    is the validating entry point.

    Layout: the logits of a chunk of rows come from one batched product with the blocks of
    :func:`class_blocks`, shaped (K, rows, n): the reductions over classes then combine K
    contiguous slabs, which NumPy does about 1.5x faster than reducing a middle or trailing axis.
    The log-sum-exp is the module docstring's; ``dtype`` (np.float64 or np.float32) is the precision
    of the logits and the log-sum-exp (module docstring, "Precision"), the sums over examples are float64.
    """
    n = X.shape[0]
    m = phi.shape[0]
    blocks = class_blocks(X, n_classes, projection).astype(dtype, copy=False)
    phi = phi.astype(dtype, copy=False)
    total = np.zeros(n)
    rows = min(m, max(1, MAX_LOGITS // max(1, n * n_classes)))
    floor = np.full((n_classes, rows, n), EXP_FLOOR, dtype=blocks.dtype)
    for start in range(0, m, rows):
        stop = min(m, start + rows)
        logits = np.matmul(phi[start:stop], blocks)  # (K, rows, n)
        logits -= logits.max(axis=0)  # s_k = z_k - z_max <= 0
        true = logits[y[start:stop], np.arange(stop - start)]  # s_{y_i}, (rows, n), before clipping
        total += (log_sum_exp_shifted(logits, floor[:, :stop - start]) - true).sum(axis=0, dtype=np.float64)
    return total / m


def log_sum_exp_shifted(s: np.ndarray, floor: np.ndarray | None = None) -> np.ndarray:
    """log sum_k e^{s_k} over axis 0 of shifted logits s (K, rows, n), max_k s_k = 0; overwrites s.

    The module docstring's computation: s raised to :data:`EXP_FLOOR`, exponentiated, summed from 1
    upwards in class order, and 1 subtracted (exactly); the result is bit for bit the unclipped
    one's, since every term below 2^-53 is added to a partial sum >= 1. ``floor``: optionally
    :data:`EXP_FLOOR` in an array of s's shape and dtype, to reuse across calls -- the same numbers
    (NaN still propagates), but NumPy 2.4's ``maximum`` against an array is about 2x faster than
    against a scalar on these arrays (float32, 10 x 131 x 100: 28 vs 64 us).
    """
    np.maximum(s, EXP_FLOOR if floor is None else floor, out=s)
    np.exp(s, out=s)
    total = np.ones(s.shape[1:], dtype=s.dtype)  # 1 + sum_k e^{s_k}, accumulated from 1 upwards
    for block in s:
        total += block
    total -= 1.0  # exact: total >= 2
    return np.log(total)


def population_losses(W, features, labels, *, n_classes: int = 10, projection=None,
                      dtype: str = "float64") -> np.ndarray:
    """Mean cross-entropy of each of n candidates on the same m examples, shape (n,), float64.

    Parameters
    ----------
    W : array_like, shape (n, n_classes * d~)
        One flattened weight matrix per row (row-major, ``W[c].reshape(n_classes, d~)``).
    features : array_like, shape (m, d~), or (m, k) with ``projection``
    labels : array_like of int, shape (m,)
    n_classes : int
        K (10 in the paper).
    projection : array_like, shape (k, d~), optional
        P: the features are then the embeddings u and the classifier sees u P (folded into the
        weights: module docstring).
    dtype : "float64" (default) or "float32"
        The precision of the logits and the log-sum-exp (module docstring, "Precision").

    All n K weight rows multiply the features in one matrix product (chunked over examples
    only when n m K exceeds :data:`MAX_LOGITS`). Non-finite weights give non-finite losses; the
    optimizer's ``nonfinite`` policy decides what happens to them.
    """
    n_classes = check_int("n_classes", n_classes, minimum=2)
    phi, y = check_data(features, labels, n_classes)
    P = _check_projection(projection, phi.shape[1])
    X = _check_population(W, n_classes * weight_dim(phi, P), "W")
    return mean_cross_entropy(X, phi, y, n_classes, P, check_dtype(dtype))


class MiniBatchObjective:
    """F(x; B) for a population, on one freshly drawn mini-batch B per call (mini-batch SABO).

    Parameters
    ----------
    features : array_like, shape (m, d~), or (m, k) with ``projection``
        Training features phi (:func:`~replication.image.features.project`), or their embeddings u.
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
    projection : array_like, shape (k, d~), optional
        P, folded into the weights (module docstring): features are then u and phi = u P.
    dtype : "float64" (default) or "float32"
        The precision of each call's losses (module docstring, "Precision"); :meth:`full_loss`,
        a metric, is float64 whatever it is.

    Each call ``objective(X)`` with X of shape (n, K d~): draws one batch -- M distinct indices,
    ``rng.choice(m, M, replace=False)`` (i.i.d. across calls, as Algorithm 2's "sample a batch
    of data"; when M = m the whole set in index order, without touching the generator) -- and
    returns the n mean losses on it. An invalid X raises before a batch is drawn, so a
    rejected call does not advance the sampler. ``n_calls`` counts calls, ``last_batch`` holds
    the last batch's indices. ``get_state()``/``set_state()`` save and restore the sampler
    (and the counter), so a resumed run draws the same batches as an uninterrupted one.
    """

    def __init__(self, features, labels, batch_size: int = DEFAULT_BATCH_SIZE, seed=0, *, n_classes: int = 10,
                 projection=None, dtype: str = "float64"):
        self.n_classes = check_int("n_classes", n_classes, minimum=2)
        self.dtype = check_dtype(dtype)
        self.features, self.labels = check_data(features, labels, self.n_classes)
        self.projection = _check_projection(projection, self.features.shape[1])
        self.n_examples = self.features.shape[0]
        self.d_tilde = weight_dim(self.features, self.projection)
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
        return mean_cross_entropy(X, self.features[batch], self.labels[batch], self.n_classes, self.projection,
                                  self.dtype)

    def full_loss(self, X) -> np.ndarray:
        """Losses on the whole training set, without drawing a batch (for metrics)."""
        return mean_cross_entropy(_check_population(X, self.dim), self.features, self.labels, self.n_classes,
                                  self.projection)

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


def predict(w, features, *, n_classes: int = 10, projection=None) -> np.ndarray:
    """Predicted classes argmax_k (W phi_i)_k of one parameter vector (ties: the lowest class); with
    ``projection`` P the features are embeddings u and phi = u P (folded: u (P W^T))."""
    n_classes = check_int("n_classes", n_classes, minimum=2)
    phi = np.asarray(features, dtype=np.float64)
    if phi.ndim != 2:
        raise ValueError(f"features must be 2-D (m, d~) (got shape {phi.shape})")
    P = _check_projection(projection, phi.shape[1])
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (n_classes * weight_dim(phi, P),):
        raise ValueError(f"w must have shape ({n_classes * weight_dim(phi, P)},) = n_classes x d~ (got {w.shape})")
    return np.argmax(np.matmul(phi, class_blocks(w[None, :], n_classes, P))[:, :, 0].T, axis=1)


def accuracy(w, features, labels, *, n_classes: int = 10, projection=None) -> float:
    """Fraction of examples whose label is the predicted class (e.g. clean test accuracy of the mean)."""
    n_classes = check_int("n_classes", n_classes, minimum=2)
    phi, y = check_data(features, labels, n_classes)
    return float(np.mean(predict(w, phi, n_classes=n_classes, projection=projection) == y))
