"""TuRBO-1: trust-region Bayesian optimisation (Eriksson, Pearce, Gardner, Turner & Poloczek,
"Scalable Global Optimization via Local Bayesian Optimization", NeurIPS 2019).

One local Gaussian-process model and one hyper-rectangular trust region (TR), moved and resized
by a success/failure rule, with batches chosen by Thompson sampling. Minimisation. The
reference code is uber-research/TuRBO (``turbo/turbo_1.py``, ``turbo/gp.py``; "the reference"
below); the BoTorch tutorial ``tutorials/turbo_1`` ("the tutorial") describes the same algorithm.
Everything happens in the unit cube u = (x - lb) / (ub - lb) of a finite box [lb, ub]; d is the
dimension, q = ``popsize`` the batch size.

Initial design. n_init points (default 2d, the reference's recommendation) of a Latin hypercube
in the box (one point drawn uniformly inside each of n_init equal strata per coordinate, strata
matched by independent random permutations), told to the model as asks of q rows.

Model (reference ``train_gp``). On the data (U, y) of the current TR only: y standardised by
median and standard deviation, y~ = (y - median y) / std y (std < 1e-6 read as 1), and an exact
GP with constant mean and ARD Matern-5/2 kernel::

    k(u, u') = s^2 (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r),   r^2 = sum_i (u_i - u'_i)^2 / l_i^2,

noise variance sigma_n^2 in [5e-4, 0.2], lengthscales l_i in [0.005, 2], outputscale s^2 in
[0.05, 20] (gpytorch ``Interval`` constraints). The hyperparameters start every fit at
l_i = 0.5, s^2 = 1, sigma_n^2 = 0.005 (no warm start, so they are not state) and take
``n_training_steps`` = 50 Adam steps at lr 0.1 on the negative exact marginal log likelihood.

Trust region (reference ``_create_candidates``). Centre c = the TR's best point; side lengths
proportional to the lengthscales with geometric mean L::

    w_i = l_i / (prod_j l_j)^(1/d),    TR = [c - w L / 2, c + w L / 2] clipped to [0, 1]^d.

Candidates. n_cand = min(100 d, 5000) points: a scrambled Sobol sequence scaled to the TR,
s_k, replaces each coordinate of c with probability p = min(20/d, 1) (at least one coordinate
per candidate; that one uniformly chosen), i.e. u_k,i = s_k,i if mask_k,i else c_i.

Thompson sampling. q joint draws f^(1..q) from the GP's predictive distribution (observation
noise included, as the reference's ``likelihood(gp(X_cand)).sample``) over the n_cand points;
batch point j is argmin_k f^(j)(u_k) over the candidates not already chosen.

TR update (reference ``_adjust_length``), after each TR batch with values f_new, on the TR's
data before the batch, f_min = min y::

    success  <=>  min f_new < f_min - 1e-3 |f_min|;   success: n_s += 1, n_f = 0;  else n_f += 1, n_s = 0
    n_s = succtol  ->  L = min(2 L, L_max), n_s = 0;     n_f = failtol  ->  L = L / 2, n_f = 0

with L_init = 0.8, L_min = 0.5^7, L_max = 1.6, succtol = 3, failtol = ceil(max(4/q, d/q)). When
L < L_min the TR restarts: its data is discarded (the model sees only the new design), L and
the counters are reset, and a fresh Latin-hypercube design of n_init points follows. The best
point seen over all restarts (:attr:`x_best`) is :attr:`mean`.

One iteration is one ask/tell round of q rows: the design rounds included (``nit`` counts them).

Deviations from the reference code (each a choice the protocol or the study forces, or a fix):

* Box: the reference needs finite bounds. ``bounds`` is a parameter; its default is the box
  x0 +- 5 sigma0 (``BOX_SIGMAS``). The suite's x0/sigma0 describe a search distribution, not a
  box; five standard deviations contain it essentially whole, and for the prompt study
  (mu0 = 0, Sigma0 = I) the default is [-5, 5]^d, the box the BBT paper gives CMA-ES. The box
  affects results (a wider one means a coarser initial design and a larger first TR).
* Initial design honours x0: the first design's first point is x0, the other n_init - 1 points
  are a Latin hypercube of n_init - 1 strata (restart designs: n_init Latin-hypercube points,
  no x0). The reference's design ignores any starting point.
* Design size: n_init is rounded up to a multiple of q (every ask has q rows; the protocol's
  asks have a fixed size); ``stats["n_init"]`` is the size used. At the study's q = 100 the
  default 2d takes 4 (d = 200) to 20 (d = 1000) of the 100 iterations.
* Default batch size: the reference's ``batch_size`` defaults to 1; the protocol needs q >= 2,
  so ``popsize=None`` gives the suite's common default (the even number at or above
  4 + floor(3 ln d), as INGO and BES). failtol follows q as in the reference.
* succtol is a parameter, default 3 (the paper and the reference; the tutorial uses 10);
  failtol and n_cand are parameters with the reference's formulas as defaults, and n_cand is at
  least q (q distinct candidates must exist).
* The one forced coordinate of a candidate that the mask left unperturbed is drawn from all d
  coordinates; the reference's ``np.random.randint(0, d - 1)`` never picks the last one. The
  Sobol points are drawn in float64 (the reference draws float32 and converts), and a candidate's
  unperturbed coordinates are the centre's exactly (box coordinates, not a unit-cube round trip).
* Exact linear algebra at every size by default (``max_cholesky_size=None``: Cholesky, as the
  tutorial's ``max_cholesky_size = inf``). The reference sets gpytorch's ``max_cholesky_size``
  to 2000 (available as the option): above 2000 data points it fits with conjugate gradients
  and stochastic Lanczos log-determinants, and above 2000 candidates (n_cand = 100 d > 2000,
  i.e. d > 20) its Thompson draws come from a rank-100 Lanczos root of the predictive
  covariance instead of its Cholesky factor. With q = 100 and 100 iterations a TR holds up to
  10^4 points; exact solves cost O(n^3) (``benchmarks/bo_cost.py``).
* Device and dtype: float64 on every device (``device="cpu"`` default, ``"cuda"`` allowed). The
  reference computes in float64 on the CPU below 1024 points and in a chosen device/dtype
  above. float32 is not offered: the kernel matrix s^2 C + sigma_n^2 I has a condition number
  up to n s^2 / sigma_n^2 = 10^4 * 20 / 5e-4 = 4e8 at n = 10^4, which a float32 Cholesky
  (eps 1.2e-7) does not factor reliably; and on the GPUs the study targets the FP64 rate is
  half to all of the FP32 rate (H100 SXM vendor figures: 34 FP64, 67 FP64 tensor-core, 67 FP32
  TFLOP/s).
* Model and sampling through BoTorch's ``SingleTaskGP`` (gpytorch modules, no outcome or input
  transform: the standardisation above is done here). Predictive draws go through gpytorch's
  ``likelihood(model(X))`` as in the reference, not ``model.posterior``, which switches on
  LOVE (``fast_pred_var``) approximations by default.
* Randomness: everything comes from the optimizer's own generator. Each TR batch draws two
  integers from it: one seeds the Sobol engine, one seeds torch's generators inside
  ``torch.random.fork_rng`` for the fit (CG probe vectors when ``max_cholesky_size`` is set) and
  the posterior draws; torch's and NumPy's global states are left as they were.

Reference code licence: the Uber Non-Commercial License; nothing of it is copied here (this
module follows the paper's and the reference's description).
"""
from __future__ import annotations

import math
import time

import numpy as np

from sabo.gaussian_search import ingo_default_popsize
from sabo.protocol import ROUND_OVERHEAD, AskTellOptimizer
from sabo.state import Array, Integer, Real
from sabo.validation import as_real_array, check_int, check_x0, shown

LENGTH_INIT = 0.8
LENGTH_MIN = 0.5**7
LENGTH_MAX = 1.6
#: Improvement needed for a success, relative to |f_min| (reference ``_adjust_length``).
SUCCESS_RTOL = 1e-3
#: Half-width of the default box in units of sigma0: [x0 - 5 sigma0, x0 + 5 sigma0].
BOX_SIGMAS = 5.0
#: gpytorch Interval constraints of the reference (``turbo/gp.py``, ARD case).
NOISE_BOUNDS = (5e-4, 0.2)
LENGTHSCALE_BOUNDS = (0.005, 2.0)
OUTPUTSCALE_BOUNDS = (0.05, 20.0)
#: Where every fit starts (reference ``train_gp``), and its Adam learning rate.
INITIAL_HYPERPARAMETERS = {"covar_module.outputscale": 1.0, "covar_module.base_kernel.lengthscale": 0.5,
                           "likelihood.noise": 0.005}
ADAM_LR = 0.1

INSTALL_HINT = "pip install 'sabo-bench[bo]'"


def _import_bo():
    """torch, gpytorch and botorch, imported on first use so that ``import baselines`` needs none of them."""
    try:
        import botorch
        import gpytorch
        import torch
    except ImportError as exc:
        raise ImportError(f"TuRBO-1 needs PyTorch, GPyTorch and BoTorch ({exc}); install them with {INSTALL_HINT}") \
            from exc
    return torch, gpytorch, botorch


# ---------------------------------------------------------------------------- the algorithm's parts
def latin_hypercube(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """n points in [0, 1]^d, one in each of the n strata [k/n, (k+1)/n) of every coordinate."""
    strata = rng.permuted(np.tile(np.arange(n), (d, 1)), axis=1).T
    return (strata + rng.random((n, d))) / n


def standardize(y: np.ndarray) -> np.ndarray:
    """(y - median y) / std y, with a standard deviation below 1e-6 read as 1 (reference)."""
    std = float(np.std(y))
    return (y - np.median(y)) / (std if std >= 1e-6 else 1.0)


def trust_region(center: np.ndarray, lengthscales: np.ndarray, length: float) -> tuple[np.ndarray, np.ndarray]:
    """The TR around ``center`` in the unit cube: sides w_i L, w = l / geometric mean of l, clipped to [0, 1]."""
    weights = lengthscales / lengthscales.mean()  # rescaled first: the product of d raw lengthscales may underflow
    weights = weights / np.exp(np.mean(np.log(weights)))
    return np.clip(center - weights * length / 2.0, 0.0, 1.0), np.clip(center + weights * length / 2.0, 0.0, 1.0)


def perturbation_mask(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """Which coordinates of the centre each of n candidates replaces: each with probability
    min(20/d, 1), and one uniformly chosen coordinate where that chose none."""
    mask = rng.random((n, d)) <= min(20.0 / d, 1.0)
    empty = np.flatnonzero(~mask.any(axis=1))
    mask[empty, rng.integers(0, d, size=empty.size)] = True
    return mask


def thompson_select(samples: np.ndarray) -> np.ndarray:
    """Indices of the batch: for draw j (row j of ``samples``, shape (q, n_cand)), the minimiser
    over the candidates not chosen by draws 0..j-1."""
    taken = np.zeros(samples.shape[1], dtype=bool)
    chosen = np.empty(samples.shape[0], dtype=np.int64)
    for j, draw in enumerate(samples):
        k = int(np.argmin(np.where(taken, np.inf, draw)))
        chosen[j] = k
        taken[k] = True
    return chosen


def fit_gp(U, y, n_steps: int):
    """The reference's GP on (U, y) (torch tensors, y standardised), fitted by ``n_steps`` Adam steps.

    Returns the model in eval mode (a BoTorch ``SingleTaskGP``).
    """
    torch, _, botorch = _import_bo()
    from botorch.models import SingleTaskGP
    from gpytorch.constraints import Interval
    from gpytorch.kernels import MaternKernel, ScaleKernel
    from gpytorch.likelihoods import GaussianLikelihood
    from gpytorch.mlls import ExactMarginalLogLikelihood

    kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=U.shape[1],
                                      lengthscale_constraint=Interval(*LENGTHSCALE_BOUNDS)),
                         outputscale_constraint=Interval(*OUTPUTSCALE_BOUNDS))
    likelihood = GaussianLikelihood(noise_constraint=Interval(*NOISE_BOUNDS))
    # the median-centred y is not zero-mean, which BoTorch's input check would warn about
    with botorch.settings.validate_input_scaling(False):
        model = SingleTaskGP(U, y[:, None], likelihood=likelihood, covar_module=kernel, outcome_transform=None)
    model = model.to(U)
    model.initialize(**INITIAL_HYPERPARAMETERS)
    model.train()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    adam = torch.optim.Adam(model.parameters(), lr=ADAM_LR)
    for _ in range(n_steps):
        adam.zero_grad()
        loss = -mll(model(U), model.train_targets)
        loss.backward()
        adam.step()
    model.eval()
    return model


# ---------------------------------------------------------------------------- the optimizer
class TuRBO1(AskTellOptimizer):
    """TuRBO-1 under the suite's ask/tell protocol (algorithm and deviations: module docstring).

    Parameters
    ----------
    x0, sigma0, popsize, seed, nonfinite
        As in :class:`sabo.protocol.AskTellOptimizer`. ``x0`` is the first point evaluated;
        ``sigma0`` only sets the default box; ``popsize`` q is the batch size (``None``: the
        even number at or above 4 + floor(3 ln d)).
    bounds : array_like, shape (2, d) or (2,), or None
        The box [lb, ub] (rows lb and ub; a pair of numbers applies to every coordinate), finite,
        lb < ub, containing x0. ``None``: x0 -+ 5 sigma0 (module docstring: why 5).
    n_init : int or None
        Points of each initial design (``None``: 2d), rounded up to a multiple of q.
    succtol : int
        Consecutive successes that double the TR (default 3, as the paper).
    failtol : int or None
        Consecutive failures that halve it (``None``: ceil(max(4/q, d/q))).
    n_candidates : int or None
        Thompson-sampling candidates per batch, >= q (``None``: max(min(100 d, 5000), q)).
    n_training_steps : int
        Adam steps of each GP fit (default 50; 0 keeps the initial hyperparameters).
    max_cholesky_size : int or None
        Data sizes above it use gpytorch's CG/Lanczos instead of Cholesky (the reference: 2000);
        ``None`` (default): Cholesky at every size.
    device : str
        Torch device of the model: ``"cpu"`` (default) or ``"cuda"``/``"cuda:<k>"``; float64 on both.

    Notes
    -----
    ``stats``: ``length`` (L after the last tell), ``succ_count``/``fail_count`` (current
    counters), ``restarts``, ``expansions``, ``shrinks``, ``n_data`` (points in the TR's model),
    ``n_init``, and of the last fit ``lengthscale_min``/``lengthscale_max`` (unit cube),
    ``noise``, ``outputscale`` (standardised units; NaN before the first fit). The last batch's
    times are in :attr:`timings` (not state: they differ between identical runs).
    """

    name = "turbo"
    _STATE_FIELDS = (
        Array("X", lambda o: (None, o._dim)),  # the TR's data since its (re)start, in box coordinates
        Array("Y", lambda o: (None,)),
        Array("design", lambda o: (None, o._dim)),  # rows of the current initial design not yet told
        Real("length", positive=True),
        Integer("succ_count", maximum=lambda o: o._succtol - 1),
        Integer("fail_count", maximum=lambda o: o._failtol - 1),
        Array("tr_bounds", lambda o: (2, o._dim), optional=True),  # TR of the last TR batch, box coordinates
    ) + AskTellOptimizer._STATE_FIELDS

    @classmethod
    def default_popsize(cls, dim: int) -> int:
        """The suite's default batch (:func:`sabo.ingo_default_popsize`); the reference's is 1."""
        return ingo_default_popsize(dim)

    def __init__(self, x0, sigma0=1.0, popsize=None, seed=None, *, bounds=None, n_init=None, succtol=3,
                 failtol=None, n_candidates=None, n_training_steps=50, max_cholesky_size=None, device="cpu",
                 nonfinite="raise"):
        torch, _, _ = _import_bo()
        x0 = check_x0(x0)
        d = x0.size
        super().__init__(x0, sigma0=sigma0, popsize=self.default_popsize(d) if popsize is None else popsize,
                         seed=seed, nonfinite=nonfinite)
        q = self._popsize
        self._lb, self._ub = self._checked_bounds(bounds)
        n_init = check_int("n_init", 2 * d if n_init is None else n_init, minimum=1)
        self._n_init = q * math.ceil(n_init / q)
        self._succtol = check_int("succtol", succtol, minimum=1)
        self._failtol = check_int("failtol", math.ceil(max(4.0 / q, d / q)) if failtol is None else failtol,
                                  minimum=1)
        self._n_cand = check_int("n_candidates", max(min(100 * d, 5000), q) if n_candidates is None else n_candidates,
                                 minimum=q)
        self._n_steps = check_int("n_training_steps", n_training_steps, minimum=0)
        self._max_cholesky = (None if max_cholesky_size is None
                              else check_int("max_cholesky_size", max_cholesky_size, minimum=0))
        self._device = self._checked_device(torch, device)

        self._X = np.empty((0, d))
        self._Y = np.empty(0)
        self._design = np.vstack([self._x0, self._to_box(latin_hypercube(self._n_init - 1, d, self._rng))])
        self._length = LENGTH_INIT
        self._succ_count = 0
        self._fail_count = 0
        self._tr_bounds: np.ndarray | None = None
        self._timings = dict.fromkeys(("fit_seconds", "candidates_seconds", "fit_cpu_seconds",
                                       "candidates_cpu_seconds"), math.nan)
        self._stats.update(length=LENGTH_INIT, succ_count=0, fail_count=0, restarts=0, expansions=0, shrinks=0,
                           n_data=0, n_init=self._n_init, lengthscale_min=math.nan, lengthscale_max=math.nan,
                           noise=math.nan, outputscale=math.nan)

    # ------------------------------------------------------------------ configuration
    def _checked_bounds(self, bounds) -> tuple[np.ndarray, np.ndarray]:
        d = self._dim
        if bounds is None:
            name = "bounds (by default x0 -+ 5 sigma0)"
            with np.errstate(over="ignore"):  # an overflow is reported below as a non-finite box
                b = np.vstack([self._x0 - BOX_SIGMAS * self._sigma0, self._x0 + BOX_SIGMAS * self._sigma0])
        else:
            name = "bounds"
            b = as_real_array("bounds", bounds)
            if b.shape == (2,):
                b = np.repeat(b[:, None], d, axis=1)
            if b.shape != (2, d):
                raise ValueError(f"bounds must have shape (2, {d}) (rows lb and ub) or (2,) (got shape {b.shape})")
        if not np.all(np.isfinite(b)):
            raise ValueError(f"{name} must be finite (TuRBO works in the unit cube of a finite box)")
        lb, ub = b
        if not np.all(lb < ub):
            i = int(np.flatnonzero(lb >= ub)[0])
            raise ValueError(f"{name} must have lb < ub in every coordinate "
                             f"(coordinate {i}: {shown(lb[i])} >= {shown(ub[i])})")
        outside = np.flatnonzero((self._x0 < lb) | (self._x0 > ub))
        if outside.size:
            raise ValueError(f"bounds must contain x0 (x0 lies outside in coordinates {outside[:10].tolist()})")
        return lb.copy(), ub.copy()

    @staticmethod
    def _checked_device(torch, device) -> str:
        message = f"device must be 'cpu', 'cuda' or 'cuda:<index>' (got {device!r})"
        if not isinstance(device, str):
            raise ValueError(message)
        try:
            dev = torch.device(device)
        except RuntimeError as exc:
            raise ValueError(message) from exc
        if dev.type not in ("cpu", "cuda") or (dev.type == "cpu" and dev.index is not None):
            raise ValueError(message)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} was asked for, but torch.cuda.is_available() is False")
        if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: there are {torch.cuda.device_count()} CUDA devices")
        return device

    def _config(self) -> dict:
        return {**super()._config(), "bounds": np.vstack([self._lb, self._ub]), "n_init": self._n_init,
                "succtol": self._succtol, "failtol": self._failtol, "n_candidates": self._n_cand,
                "n_training_steps": self._n_steps, "max_cholesky_size": self._max_cholesky, "device": self._device}

    @classmethod
    def cost_per_iteration(cls, dim: int, popsize: int) -> float:
        """The mean iteration of a 100-iteration run with the default settings (:meth:`cost_of_iterations`)."""
        return cls.cost_of_iterations(dim, popsize, 100, {}) / 100.0

    @classmethod
    def cost_of_iterations(cls, dim: int, popsize: int, iterations: int, params) -> float:
        """The design's rounds, then per TR batch a GP fit and a Thompson draw on the TR's n points so far.

        50 Adam steps (``n_training_steps``) each build the n x n kernel (n^2 d) and factor it
        (n^3 / 3); the draw builds the n_c x n cross-covariance (n_c n d), the posterior covariance
        (n_c^2 n) and its factor (n_c^3 / 3), n_c = ``n_candidates``. Divided by 25: large float64
        BLAS-3 products and factorisations run about 25 multiply-adds per unit of
        :meth:`sabo.protocol.AskTellOptimizer.cost_per_iteration` (~0.015 us). The TR's data grows
        by q = ``popsize`` points a batch from the design's n_init and is dropped at a restart,
        which here comes after 7 failtol batches (L halved 7 times from 0.8, every batch a failure:
        the shortest cycle, and the usual one in high dimension), then a new design. Measured on the
        synthetic study's quick profile (d = 200, q = 100, 12 iterations, n_candidates = 1000):
        186-219 s of wall time a run beside GIBO's 190-191 s and CMA-ES's 0.05-0.09 us per unit on the
        same loaded 2-core machine, i.e. 0.02-0.03 us per unit of this estimate; the earlier estimate
        (n = 50 q whatever the run, n_c = min(100 d, 5000) whatever ``n_candidates``) was 250x that.
        """
        q = int(popsize)
        design = math.ceil((params.get("n_init") or 2 * dim) / q)  # iterations of a design (n_init rounded up)
        failtol = params.get("failtol") or math.ceil(max(4.0 / q, dim / q))
        n_c = float(params.get("n_candidates") or max(min(100 * dim, 5000), q))
        steps = params.get("n_training_steps", 50)
        cycle = design + 7 * failtol
        total = 0.0
        for k in range(int(iterations)):
            j = k % cycle
            if j < design:
                total += q * dim + ROUND_OVERHEAD
            else:
                n = float(j * q)
                total += (steps * (n * n * dim + n**3 / 3.0) + n_c * n * dim + n_c * n_c * n + n_c**3 / 3.0) / 25.0
        return total

    # ------------------------------------------------------------------ views
    @property
    def mean(self) -> np.ndarray:
        """The incumbent: the best point evaluated so far, over all restarts (x0 before the first tell)."""
        return self.x_best

    @property
    def bounds(self) -> np.ndarray:
        """The box, shape (2, d): rows lb and ub."""
        return np.vstack([self._lb, self._ub])

    @property
    def length(self) -> float:
        """L, the TR's side length (geometric mean over coordinates) in the unit cube."""
        return self._length

    @property
    def trust_region(self) -> np.ndarray | None:
        """The TR of the last TR batch in box coordinates, shape (2, d) (``None`` before the first)."""
        return None if self._tr_bounds is None else self._tr_bounds.copy()

    @property
    def timings(self) -> dict:
        """Seconds of the last TR batch: ``fit_seconds`` (GP fit) and ``candidates_seconds`` (the rest),
        wall-clock, and the process's CPU seconds of each (``*_cpu_seconds``, all threads)."""
        return dict(self._timings)

    def _to_unit(self, X: np.ndarray) -> np.ndarray:
        return np.clip((X - self._lb) / (self._ub - self._lb), 0.0, 1.0)

    def _to_box(self, U: np.ndarray) -> np.ndarray:
        return np.clip(self._lb + U * (self._ub - self._lb), self._lb, self._ub)

    def _finish_restore(self) -> None:
        q, n, rows = self._popsize, self._X.shape[0], self._design.shape[0]
        if self._Y.shape[0] != n:
            raise ValueError(f"state['state']['Y'] must have one value per row of X ({n}); got {self._Y.shape[0]}")
        if rows % q:
            raise ValueError(f"state['state']['design'] must have a multiple of popsize = {q} rows (got {rows})")
        if n == 0 and rows == 0:
            raise ValueError("state['state']: X and design are both empty (a TR batch needs data to model)")
        for key, value in (("X", self._X), ("design", self._design), ("tr_bounds", self._tr_bounds)):
            if value is not None and np.any((value < self._lb) | (value > self._ub)):
                raise ValueError(f"state['state']['{key}'] must lie inside the box state['config']['bounds']")
        if not LENGTH_MIN <= self._length <= LENGTH_MAX:
            raise ValueError(f"state['state']['length'] must lie in [{LENGTH_MIN}, {LENGTH_MAX}] "
                             f"(got {shown(self._length)})")
        if self._pending is not None and rows and not np.array_equal(self._pending, self._design[:q]):
            raise ValueError("state['state']['pending'] must be the first popsize rows of the design "
                             "while a design is being told")

    # ------------------------------------------------------------------ ask
    def _ask(self) -> np.ndarray:
        if self._design.shape[0]:
            return self._design[: self._popsize].copy()
        rng_state = self._rng.bit_generator.state
        try:
            return self._trust_region_batch()
        except BaseException:  # e.g. a Cholesky that fails even with jitter: the next ask starts from the same state
            self._rng.bit_generator.state = rng_state
            raise

    def _trust_region_batch(self) -> np.ndarray:
        """Fit the GP on the TR's data, build the TR and its candidates, Thompson-sample q of them."""
        torch, gpytorch, _ = _import_bo()
        d, q = self._dim, self._popsize
        U = self._to_unit(self._X)
        y = standardize(self._Y)
        best = int(np.argmin(y))
        sobol_seed, torch_seed = (int(s) for s in self._rng.integers(0, 2**62, size=2))
        mask = perturbation_mask(self._n_cand, d, self._rng)
        dev = torch.device(self._device)
        cuda_index = None
        if dev.type == "cuda":
            cuda_index = torch.cuda.current_device() if dev.index is None else dev.index
        cholesky = math.inf if self._max_cholesky is None else self._max_cholesky
        with torch.random.fork_rng(devices=[] if cuda_index is None else [cuda_index]), \
                gpytorch.settings.max_cholesky_size(cholesky):
            torch.default_generator.manual_seed(torch_seed)
            if cuda_index is not None:
                with torch.cuda.device(cuda_index):
                    torch.cuda.manual_seed(torch_seed)
            start, start_cpu = time.perf_counter(), time.process_time()
            model = fit_gp(torch.as_tensor(U, dtype=torch.float64, device=dev),
                           torch.as_tensor(y, dtype=torch.float64, device=dev), self._n_steps)
            fitted, fitted_cpu = time.perf_counter(), time.process_time()
            lengthscales = model.covar_module.base_kernel.lengthscale.detach().cpu().numpy().ravel()
            lb, ub = trust_region(U[best], lengthscales, self._length)
            sobol = torch.quasirandom.SobolEngine(d, scramble=True, seed=sobol_seed)
            points = self._to_box(lb + (ub - lb) * sobol.draw(self._n_cand, dtype=torch.float64).numpy())
            candidates = np.where(mask, points, self._X[best])  # kept coordinates are the centre's, exactly
            with torch.no_grad():
                U_cand = torch.as_tensor(self._to_unit(candidates), dtype=torch.float64, device=dev)
                samples = model.likelihood(model(U_cand)).sample(torch.Size([q])).cpu().numpy()
        chosen = thompson_select(samples)
        self._timings = {"fit_seconds": fitted - start, "candidates_seconds": time.perf_counter() - fitted,
                         "fit_cpu_seconds": fitted_cpu - start_cpu,
                         "candidates_cpu_seconds": time.process_time() - fitted_cpu}
        self._tr_bounds = self._to_box(np.vstack([lb, ub]))
        self._stats.update(lengthscale_min=float(lengthscales.min()), lengthscale_max=float(lengthscales.max()),
                           noise=float(model.likelihood.noise.item()),
                           outputscale=float(model.covar_module.outputscale.item()))
        return candidates[chosen]

    # ------------------------------------------------------------------ tell
    def _tell(self, values: np.ndarray) -> None:
        q = self._popsize
        X = np.vstack([self._X, self._pending])
        Y = np.concatenate([self._Y, values])
        design, length, succ, fail = self._design, self._length, self._succ_count, self._fail_count
        counts = {k: self._stats[k] for k in ("restarts", "expansions", "shrinks")}
        if design.shape[0]:
            design = design[q:]
        else:
            f_min = float(np.min(self._Y))
            if np.min(values) < f_min - SUCCESS_RTOL * abs(f_min):
                succ, fail = succ + 1, 0
            else:
                succ, fail = 0, fail + 1
            if succ == self._succtol:
                length, succ = min(2.0 * length, LENGTH_MAX), 0
                counts["expansions"] += 1
            elif fail == self._failtol:
                length, fail = length / 2.0, 0
                counts["shrinks"] += 1
            if length < LENGTH_MIN:  # restart: a fresh design, the old TR's data no longer modelled
                X, Y = np.empty((0, self._dim)), np.empty(0)
                design = self._to_box(latin_hypercube(self._n_init, self._dim, self._rng))
                length, succ, fail = LENGTH_INIT, 0, 0
                counts["restarts"] += 1
        self._X, self._Y, self._design = X, Y, design
        self._length, self._succ_count, self._fail_count = length, succ, fail
        self._nit += 1
        self._stats.update(length=length, succ_count=succ, fail_count=fail, n_data=Y.size, **counts)
