"""GIBO: gradient-informative Bayesian optimization (Mueller, von Rohr & Trimpe, NeurIPS 2021,
"Local policy search with Bayesian optimization"; reference code sarmueller/gibo, MIT:
``src/optimizers.py`` ``BayesianGradientAscent``, ``src/model.py`` ``DerivativeExactGPSEModel``,
``src/acquisition_function.py`` ``GradientInformation``), ported to botorch 0.18 / gpytorch 1.15
and turned around to *minimise*.

GIBO is gradient descent on the posterior mean of a Gaussian process (GP), where the points
it evaluates are chosen to make the GP's estimate of the gradient at the current iterate
theta as certain as possible.

Model. f ~ GP(0, k) on the standardised values of a sliding window of the last ``n_max``
evaluated points, with the squared-exponential (SE, RBF) ARD kernel and Gaussian noise:

    k(x, x') = s^2 exp(-1/2 (x - x')^T Lambda^{-1} (x - x')),   Lambda = diag(l_1^2 .. l_d^2),
    K = k(X, X) + sigma_n^2 I.

Differentiation is linear, so the gradient of f at theta is jointly Gaussian with the data.
With g_i = d k(theta, x_i) / d theta = -Lambda^{-1} (theta - x_i) k(theta, x_i) (the columns of
the d x N matrix G) and d^2 k(theta, theta') / d theta d theta' at theta = theta' equal to
s^2 Lambda^{-1}, the posterior of grad f(theta) given the window (X, y) is (reference:
``DerivativeExactGPSEModel.posterior_derivative``; paper eq. 5)

    mean  grad mu(theta) = G K^{-1} y,
    cov   Sigma(theta)   = s^2 Lambda^{-1} - G K^{-1} G^T.

Acquisition (``GradientInformation``, paper eq. 7): the next point z maximises the decrease
of tr Sigma(theta) when z joins the window. Adding one point is a rank-one (Schur complement)
update of K, so with k_z = k(X, z), g_z = d k(theta, z) / d theta and
c_z = s^2 + sigma_n^2 - k_z^T K^{-1} k_z,

    tr Sigma_{X + z}(theta) = tr Sigma_X(theta) - || G K^{-1} k_z - g_z ||^2 / c_z.

The reference evaluates the same trace by an explicit one-step Cholesky update per candidate
(O(d^2 N + N^2 d)); the closed form costs O(N d + N^2) per candidate and has the same
maximiser. Like the reference, the decrease is computed on the current window plus z, and the
oldest point leaves the window only after z has joined it. The posterior covariance does not
depend on the observed values, so the whole sequence of acquisitions is known before any of
them is evaluated.

One iteration (``BayesianGradientAscent.step``):

    1. evaluate theta and add it to the window;
    2. acquire popsize - 1 points one at a time (q = 1 each), each maximising the decrease of
       tr Sigma(theta) inside the box theta +- delta, and add each to the window;
    3. step:  theta <- theta - lr * l (.) grad mu(theta) / ||grad mu(theta)||   (normalize_gradient)
              theta <- theta - lr * grad mu(theta)                                (otherwise);
    4. once the window holds n_max points, refit the hyperparameters (l, s) by maximising the
       marginal likelihood (warm-started from the current values).

Protocol mapping. Because the acquisitions do not depend on the values, one ask returns a
whole iteration: the popsize - 1 acquired points (rows 0 .. popsize - 2, in acquisition order)
and theta (the last row, as the centre in BES and INGO). So ``rounds_per_iteration`` is 1, an
iteration costs exactly ``popsize`` evaluations, and a budget of T iterations is T * popsize
evaluations as for every other method. The rows enter the window in the reference's
evaluation order (theta first).

Scales. ``sigma0`` (per coordinate, as everywhere in the suite: the standard deviation of the
search distribution) sets GIBO's length scales. The GP works in the coordinates
u = (x - theta) / (sigma0 sqrt(d)): its initial lengthscale is sigma0 sqrt(d) per coordinate, the
distance of a sample of N(theta, sigma0^2 I) from theta (the reference's synthetic lengthscales
grow with sqrt(D) as well, ``get_lengthscales``), and fitted lengthscales are bounded relative
to it (``lengthscale_bounds``). The acquisition box is theta +- delta * sigma0. Values are
standardised over the window before every use.

Randomness. The only random numbers are the raw samples of the acquisition optimisation, drawn
from the optimizer's NumPy generator; the L-BFGS-B runs (botorch's ``gen_candidates_scipy``)
and the hyperparameter fit (``fit_gpytorch_mll_scipy``, exact Cholesky inference at every
window size) are deterministic. No torch random number is drawn, so torch's global generators
are untouched, and a restored state continues bit-identically on the same device.

Device and precision. ``device="cpu"`` (default) or a CUDA device; float64 on both. The
reference runs in float32 (torch's default dtype), but K's condition number reaches
N s^2 / sigma_n^2 (2e4 for a window of 200 points and sigma_n^2 = 0.01), which leaves about 3
of float32's 7 digits in K^{-1}; the matrices here are small (N <= n_max, d <= a few thousand),
so the work is bound by latency, not arithmetic, and float64 costs little even on a GPU.

Deviations from the reference code:

- Minimisation (the reference maximises): the step goes against the gradient.
- Outputs are standardised over the window and the GP has a zero mean. The reference uses raw
  values with ``ConstantMean`` and ignores the constant in ``posterior_derivative``
  (harmless for its zero-mean synthetic functions, not for losses around some c != 0).
- No early stop of the acquisitions (``epsilon_diff_acq_value``): each iteration acquires
  exactly popsize - 1 points, so that every iteration costs the same ``popsize`` evaluations
  (the suite's budgets are iterations x popsize).
- Hyperparameters fixed by default (``fit_hyperparameters=False``, the reference's synthetic
  configuration, which fixes them to the true ones; ours are the initial ones: lengthscales
  sigma0 sqrt(d), outputscale 1). ``fit_hyperparameters=True`` refits them as the reference's RL
  configuration does. Measured f(theta), fitted against fixed, seeds 0-2 or 1-3: with N = d + 1
  (the reference's synthetic setting, 30 iterations) fitting helps on the sphere (d = 20:
  0.0005-0.013 against 0.022-0.040) and not on Ackley (d = 10: 0.054-0.14 against 0.043-0.10)
  or Levy (d = 10: 0.23-0.45 against 0.20-0.38); with a window smaller than d, the prompt
  study's regime (N = 100, n_max = 200, d = 200..1000), here N = 6 on the sphere d = 20 (25
  iterations), fitted runs end at 0.18-2.27, fixed ones at 0.18-0.25. On such windows the
  marginal likelihood of the ARD kernel drives lengthscales to their bounds, and with
  ``normalize_gradient`` the step is proportional to them. A fit also costs seconds per
  iteration at d = 1000 (table below).
- Bounds instead of priors: lengthscales in ``lengthscale_bounds`` x sigma0 sqrt(d) (default
  (0.065, 1.94): the reference RL prior U(0.01, 0.3) relative to its mean 0.155, the initial
  value) and the outputscale in ``outputscale_bounds`` (default (0.05, 20), TuRBO's; the RL
  configuration has a Normal(2, 1) prior), as gpytorch ``Interval`` constraints. The noise
  variance is fixed (``noise``, in units of the standardised values; the RL configuration fixes
  it at 0.01 too).
- Hyperparameters are refitted at the end of an iteration, on its window (so the next
  iteration's acquisitions and step use them). The reference refits at the start of the next
  iteration, after evaluating the new theta: our fit misses that one point.
- One fit attempt of at most ``fit_maxiter`` L-BFGS-B iterations; a failed fit keeps the
  previous hyperparameters (counted in ``stats["fit_failures"]``). The reference's
  ``fit_gpytorch_model`` runs to convergence and retries.
- The acquisition optimisation calls botorch's ``gen_candidates_scipy`` (the L-BFGS-B step of
  ``optimize_acqf``; all starts as one problem, as botorch 0.3.1 did) on initial conditions
  chosen here: ``raw_samples`` points drawn uniformly in the box and each shrunk towards theta
  by a factor from U(0, 1), of which the best ``num_restarts`` start L-BFGS-B. optimize_acqf
  instead draws scrambled Sobol points and picks starts by Boltzmann sampling; in high
  dimension uniform box points all lie at about the same distance delta sigma0 sqrt(d / 3) from
  theta, while the best acquisition is often closer, and scrambling a 1000-d Sobol engine alone
  took 45 ms per acquisition. Calling ``gen_candidates_scipy`` directly also avoids
  optimize_acqf 0.18.1 passing an empty fixed-features dict, which makes every evaluation copy
  the d columns one at a time (about 10 ms per evaluation at d = 1000). L-BFGS-B failures other
  than reaching ``acq_maxiter`` are counted in ``stats["acq_failures"]`` (the best point found
  is used).
- Reduced settings. The reference's (num_restarts 5, raw_samples 64, L-BFGS-B to convergence,
  N_max = 5 D and D acquisitions per iteration on synthetic functions) do not fit 100
  iterations of 100 evaluations at d = 200..1000; the defaults are ``num_restarts=1``,
  ``raw_samples=64``, ``acq_maxiter=3``, ``n_max=2 popsize`` (the reference's RL ratio, N_max =
  32 for 16 samples), ``fit_maxiter=50``. What they cost in gradient information, measured as
  the explained share 1 - tr Sigma / tr(prior) of the gradient's variance after the third
  iteration (N = 100, ellipsoid, 1 torch thread, loaded 2-core machine): d = 200: 0.816
  (acq_maxiter 10), 0.810 (3, the default), 0.659 (0: best raw sample); d = 1000: 0.1627,
  0.1627, 0.1604, with ask times of 3.2-6.7 s, 3.2-4.7 s and 0.5-1.0 s per iteration (iterations
  1-3).

Cost per iteration, seconds (ask + tell of real iterations; the former ``benchmarks/gibo_cost.py
--fit --threads 1``, since merged into ``benchmarks/bo_cost.py``, which times one iteration from a
built state; N = 100 evaluations per iteration, defaults above, the ellipsoid as objective; 2-core x86-64
shared with other jobs, 1 torch thread; the first columns at load average 5-10, the last one
with ``--checkpoints 3 4 5`` at load 3):

    d     hyperparameters   it 10   it 50   it 100   mean it >= 3   mean it 3-5 (load 3)
    200   fixed              2.29    4.53     2.65       4.36            0.99
    200   fitted             8.37    2.32     3.45       4.98            1.46
    500   fixed              1.38    5.24     8.20       5.01            1.12
    500   fitted             5.62   14.30    21.43      11.30            2.51
    1000  fixed              5.02    1.87     2.58       3.62            2.09
    1000  fitted             2.93    4.85     2.63       4.08            2.55

The window is full from iteration 3 on, so iterations 10, 50 and 100 differ only in the
machine's load, which moved the times by up to 6x. The acquisitions (the ask) are most of the
cost; a fit adds 0.1-1.1 s (load 3). With torch's default two threads on the loaded machine,
small backward passes were 10-50x slower than with one.
"""
from __future__ import annotations

import functools
import numbers
import types
import warnings

import numpy as np

from sabo.protocol import AskTellOptimizer
from sabo.state import Array, Real
from sabo.validation import check_int, check_positive, check_x0, shown

INSTALL_HINT = "pip install 'sabo-bench[bo]'"


@functools.cache
def _bo() -> types.SimpleNamespace:
    """torch, gpytorch and the botorch pieces GIBO uses, imported on first construction."""
    try:
        # linear_operator (under gpytorch) decorates functions with the deprecated torch.jit.script
        # at import: not the caller's to act on, and an error under -W error
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import gpytorch
            import torch
            from botorch.exceptions.warnings import InputDataWarning, OptimizationWarning
            from botorch.generation import gen_candidates_scipy
            from botorch.models import SingleTaskGP
            from botorch.optim.core import OptimizationStatus
            from botorch.optim.fit import fit_gpytorch_mll_scipy
            from linear_operator.utils.errors import NotPSDError
    except ImportError as exc:
        raise ImportError(f"GIBO needs botorch and gpytorch ({exc}); install them with: {INSTALL_HINT}") from exc
    return types.SimpleNamespace(torch=torch, gpytorch=gpytorch, InputDataWarning=InputDataWarning,
                                 OptimizationWarning=OptimizationWarning, gen_candidates_scipy=gen_candidates_scipy,
                                 SingleTaskGP=SingleTaskGP, OptimizationStatus=OptimizationStatus,
                                 fit_gpytorch_mll_scipy=fit_gpytorch_mll_scipy, NotPSDError=NotPSDError)


def _se_kernel(A, B, outputscale):
    """s^2 exp(-|a - b|^2 / 2) between the rows of A and B, already divided by the lengthscales."""
    sq = (A * A).sum(-1)[:, None] + (B * B).sum(-1)[None, :] - 2.0 * A @ B.T
    return outputscale * (-0.5 * sq.clamp_min(0.0)).exp()


def _check_bounds(name: str, value) -> tuple[float, float]:
    """A pair (low, high) with 0 < low < 1 < high: the initial value 1 must lie strictly inside."""
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v) for v in value)
            or not 0.0 < value[0] < 1.0 < value[1]):
        raise ValueError(f"{name} must be a pair (low, high) of finite numbers with 0 < low < 1 < high "
                         f"(got {shown(value)})")
    return float(value[0]), float(value[1])


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False (got {shown(value)})")
    return bool(value)


class GIBO(AskTellOptimizer):
    """GIBO under the suite's ask/tell protocol (minimisation).

    Parameters
    ----------
    x0 : array_like, shape (d,)
        Initial iterate theta_0.
    sigma0 : float or array_like, shape (d,)
        Scale per coordinate: initial lengthscales sigma0 sqrt(d), acquisition box theta +- delta sigma0.
    popsize : int or None
        Evaluations per iteration: popsize - 1 acquisitions and theta (>= 2). ``None``: d + 1
        (the reference's synthetic setting, D acquisitions per iteration).
    seed, nonfinite
        See :class:`sabo.protocol.AskTellOptimizer`.
    lr : float
        SGD step size (reference: 0.25 on synthetic functions).
    delta : float
        Half-width of the acquisition box in units of sigma0 (> 0). The default 1.34 is the
        reference's synthetic setting (0.2 on [0, 1]^D with lengthscales about 0.15 sqrt(D)).
    n_max : int or None
        Window size (>= popsize, so that the window holds the whole last iteration); ``None``: 2 popsize.
    noise : float
        Fixed noise variance sigma_n^2 in units of the standardised values (> 0; reference: 0.01).
    normalize_gradient : bool
        Step along l (.) grad / ||grad|| (reference default) instead of the raw gradient.
    fit_hyperparameters : bool
        Refit lengthscales and outputscale once the window is full; False keeps the initial ones.
    lengthscale_bounds, outputscale_bounds : (float, float)
        Bounds of the fitted lengthscales (relative to sigma0 sqrt(d)) and outputscale
        (standardised units); 0 < low < 1 < high (both start at 1).
    num_restarts, raw_samples : int
        L-BFGS-B starts per acquisition, and the raw samples they are chosen from (>= num_restarts).
    acq_maxiter : int
        L-BFGS-B iterations per acquisition (0: take the best raw sample).
    fit_maxiter : int
        L-BFGS-B iterations of one hyperparameter fit (>= 1).
    device : str
        torch device of the GP computations: "cpu" or a CUDA device ("cuda", "cuda:1"); float64 on both.
    """

    name = "gibo"
    _STATE_FIELDS = (
        Array("theta", lambda o: (o._dim,)),
        Array("X", lambda o: (None, o._dim)),  # the window, oldest first
        Array("Y", lambda o: (None,)),
        # gpytorch's raw (unconstrained) parameters: the constrained values would not map back bit-identically
        Array("raw_lengthscale", lambda o: (o._dim,)),
        Real("raw_outputscale"),
    ) + AskTellOptimizer._STATE_FIELDS

    @classmethod
    def default_popsize(cls, dim: int) -> int:
        """d + 1: d acquisitions and the iterate (the reference's synthetic max_samples_per_iteration = D)."""
        return dim + 1

    def __init__(self, x0, sigma0=1.0, popsize=None, seed=None, *, lr=0.25, delta=1.34, n_max=None, noise=0.01,
                 normalize_gradient=True, fit_hyperparameters=False, lengthscale_bounds=(0.065, 1.94),
                 outputscale_bounds=(0.05, 20.0), num_restarts=1, raw_samples=64, acq_maxiter=3, fit_maxiter=50,
                 device="cpu", nonfinite="raise"):
        x0 = check_x0(x0)
        super().__init__(x0, sigma0=sigma0, popsize=self.default_popsize(x0.size) if popsize is None else popsize,
                         seed=seed,
                         nonfinite=nonfinite)
        self._lr = check_positive("lr", lr)
        self._delta = check_positive("delta", delta)
        self._n_max = check_int("n_max", 2 * self._popsize if n_max is None else n_max, minimum=self._popsize)
        self._noise = check_positive("noise", noise)
        self._normalize_gradient = _check_bool("normalize_gradient", normalize_gradient)
        self._fit_hyperparameters = _check_bool("fit_hyperparameters", fit_hyperparameters)
        self._lengthscale_bounds = _check_bounds("lengthscale_bounds", lengthscale_bounds)
        self._outputscale_bounds = _check_bounds("outputscale_bounds", outputscale_bounds)
        self._num_restarts = check_int("num_restarts", num_restarts, minimum=1)
        self._raw_samples = check_int("raw_samples", raw_samples, minimum=self._num_restarts)
        self._acq_maxiter = check_int("acq_maxiter", acq_maxiter, minimum=0)
        self._fit_maxiter = check_int("fit_maxiter", fit_maxiter, minimum=1)
        if not isinstance(device, str):
            raise ValueError(f"device must be a string such as 'cpu' or 'cuda:0' (got {device!r})")
        self._device_name = device

        bo = self._bo = _bo()
        torch = bo.torch
        try:
            self._device = torch.device(device)
        except RuntimeError as exc:
            raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda:0' (got {device!r})") from exc
        if self._device.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or a CUDA device (got {device!r})")
        if self._device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device is {device!r} but torch sees no CUDA device (torch {torch.__version__})")
        self._lengthscale_constraint, self._outputscale_constraint = self._constraints()
        one = self._tensor(1.0)
        self._theta = self._x0.copy()
        self._X = np.empty((0, self._dim))
        self._Y = np.empty(0)
        self._raw_lengthscale = np.full(self._dim, float(self._lengthscale_constraint.inverse_transform(one)))
        self._raw_outputscale = float(self._outputscale_constraint.inverse_transform(one))
        # u = (x - theta) / scale: the GP's coordinates, in which the initial lengthscale is 1
        self._scale = self._sigma0 * np.sqrt(self._dim)
        # weights that make the trace in u equal to the trace in x (up to a constant factor)
        self._trace_weights = self._scale**-2 / np.mean(self._scale**-2)
        self._stats.update({"fit_failures": 0, "acq_failures": 0, "grad_norm": np.nan, "grad_var_explained": np.nan,
                            "lengthscale_median": np.nan, "outputscale": np.nan})

    def _config(self) -> dict:
        return {**super()._config(), "lr": self._lr, "delta": self._delta, "n_max": self._n_max, "noise": self._noise,
                "normalize_gradient": self._normalize_gradient, "fit_hyperparameters": self._fit_hyperparameters,
                "lengthscale_bounds": list(self._lengthscale_bounds),
                "outputscale_bounds": list(self._outputscale_bounds), "num_restarts": self._num_restarts,
                "raw_samples": self._raw_samples, "acq_maxiter": self._acq_maxiter, "fit_maxiter": self._fit_maxiter,
                "device": self._device_name}

    def _finish_restore(self) -> None:
        if self._X.shape[0] != self._Y.shape[0] or self._X.shape[0] > self._n_max:
            raise ValueError(f"state['state']['X'] and ['Y'] must hold the same number of points, at most n_max = "
                             f"{self._n_max} (got {self._X.shape[0]} and {self._Y.shape[0]})")

    @property
    def mean(self) -> np.ndarray:
        """The current iterate theta."""
        return self._theta.copy()

    @classmethod
    def cost_per_iteration(cls, dim: int, popsize: int) -> float:
        """N - 1 acquisitions of a fixed cost and O(N d) kernel rows each: 350,000 N + 35 N^2 d.

        Each acquisition evaluates the acquisition at its 64 raw samples and at about 5 L-BFGS-B
        points (a forward and a backward pass) against the n_max = 2 N window points in d
        coordinates, about 140 N d multiply-adds in small torch products, and pays scipy's
        L-BFGS-B driving torch, about 5 ms whatever the size. Fitted to one-thread times with the
        default settings, 53 ms per iteration at d = 10, N = 10 and 393 ms at d = 100, N = 50, in
        :meth:`sabo.protocol.AskTellOptimizer.cost_per_iteration`'s units (~0.015 us).
        """
        return 350_000.0 * popsize + 35.0 * popsize * popsize * dim

    # ------------------------------------------------------------------ the GP in u coordinates
    def _constraints(self):
        """The Interval constraints of lengthscales and outputscale, with float64 bounds on the device.

        A fresh pair for every kernel: moving a kernel to a dtype converts its constraints' bounds
        in place (gpytorch makes them float32), which would change the transforms of the others.
        """
        Interval = self._bo.gpytorch.constraints.Interval
        return (Interval(*(self._tensor(b) for b in self._lengthscale_bounds)),
                Interval(*(self._tensor(b) for b in self._outputscale_bounds)))

    def _tensor(self, a):
        return self._bo.torch.as_tensor(a, dtype=self._bo.torch.float64, device=self._device)

    def _hyperparameters(self, raw_lengthscale, raw_outputscale):
        """(lengthscales in u, outputscale) as tensors, through the same constraints the fit uses."""
        return (self._lengthscale_constraint.transform(self._tensor(raw_lengthscale)),
                self._outputscale_constraint.transform(self._tensor(raw_outputscale)))

    def _to_u(self, X, theta):
        return self._tensor((np.asarray(X, dtype=np.float64) - theta) / self._scale)

    @staticmethod
    def _standardised(Y):
        sd = np.std(Y) if Y.size > 1 else 0.0
        return (Y - np.mean(Y)) / sd if sd > 0 else np.zeros_like(Y)

    def _gradient_posterior_u(self, U, y, lengthscale, outputscale):
        """Mean and variances (diagonal of Sigma) of grad f at u = 0 given the window (U, y), in u."""
        torch = self._bo.torch
        V = U / lengthscale
        K = _se_kernel(V, V, outputscale) + self._noise * torch.eye(U.shape[0], dtype=U.dtype, device=U.device)
        L = torch.linalg.cholesky(K)
        G = V / lengthscale * (outputscale * (-0.5 * (V * V).sum(-1)).exp())[:, None]  # row i: g_i
        mean = G.T @ torch.cholesky_solve(y[:, None], L)[:, 0]
        variance = outputscale / lengthscale**2 - (G * torch.cholesky_solve(G, L)).sum(0)
        return mean, variance

    def gradient_posterior(self, X=None, Y=None):
        """Posterior mean and variances of grad f(theta) in x coordinates, shape (d,) each.

        ``X``/``Y`` (default: the window) is the data conditioned on; the variances do not depend
        on ``Y`` (default for a given ``X``: zeros). Uses the current hyperparameters.
        """
        if X is None:
            X, Y = self._X, self._Y
        else:
            X = np.asarray(X, dtype=np.float64).reshape(-1, self._dim)
            Y = np.zeros(X.shape[0]) if Y is None else np.asarray(Y, dtype=np.float64)
        lengthscale, outputscale = self._hyperparameters(self._raw_lengthscale, self._raw_outputscale)
        mean, variance = self._gradient_posterior_u(self._to_u(X, self._theta), self._tensor(self._standardised(Y)),
                                                    lengthscale, outputscale)
        return mean.cpu().numpy() / self._scale, variance.cpu().numpy() / self._scale**2

    # ------------------------------------------------------------------ ask: theta and the acquisitions
    def _ask(self) -> np.ndarray:
        torch = self._bo.torch
        lengthscale, outputscale = self._hyperparameters(self._raw_lengthscale, self._raw_outputscale)
        eye = functools.partial(torch.eye, dtype=torch.float64, device=self._device)
        weights = self._tensor(self._trace_weights)
        half = self._tensor(self._delta * self._sigma0 / self._scale)  # the box theta +- delta sigma0, in u
        # the window as the first acquisition sees it: theta (u = 0) joins, then the oldest point may leave
        V = torch.cat([self._to_u(self._X, self._theta), self._tensor(np.zeros((1, self._dim)))])[-self._n_max:]
        V = V / lengthscale
        K = _se_kernel(V, V, outputscale)
        G = V / lengthscale * (outputscale * (-0.5 * (V * V).sum(-1)).exp())[:, None]
        acquired = []
        for _ in range(self._popsize - 1):
            L = torch.linalg.cholesky(K + self._noise * eye(K.shape[0]))

            def decrease(Z, V=V, G=G, L=L):
                """tr Sigma(theta) before minus after adding each row of Z (u coordinates, shape (b, d))."""
                Zl = Z / lengthscale
                kz = _se_kernel(Zl, V, outputscale)
                w = torch.cholesky_solve(kz.T, L).T
                gz = Zl / lengthscale * (outputscale * (-0.5 * (Zl * Zl).sum(-1)).exp())[:, None]
                r = w @ G - gz
                return (r * r * weights).sum(-1) / (outputscale + self._noise - (kz * w).sum(-1))

            z = self._maximise(decrease, half)
            zl = (z / lengthscale)[None]
            kz = _se_kernel(zl, V, outputscale)
            K = torch.cat([torch.cat([K, kz.T], 1), torch.cat([kz, outputscale.reshape(1, 1)], 1)])[-self._n_max:,
                                                                                                   -self._n_max:]
            V = torch.cat([V, zl])[-self._n_max:]
            G = torch.cat([G, zl / lengthscale * (outputscale * (-0.5 * (zl * zl).sum(-1)).exp())[:, None]])
            G = G[-self._n_max:]
            acquired.append(z)
        Z = torch.stack(acquired).cpu().numpy() if acquired else np.empty((0, self._dim))
        return np.vstack([self._theta + Z * self._scale, self._theta])

    def _maximise(self, decrease, half):
        """argmax of ``decrease`` over the box [-half, half]: best raw samples, then L-BFGS-B (botorch)."""
        bo = self._bo
        torch = bo.torch
        shrink = self._rng.uniform(0.0, 1.0, size=(self._raw_samples, 1))
        raw = self._tensor(self._rng.uniform(-1.0, 1.0, size=(self._raw_samples, self._dim)) * shrink) * half
        with torch.no_grad():
            starts = raw[torch.topk(decrease(raw), self._num_restarts).indices]
        if self._acq_maxiter == 0:
            return starts[0]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", bo.OptimizationWarning)
            candidates, values = bo.gen_candidates_scipy(starts[:, None, :], lambda Z: decrease(Z[:, 0, :]),
                                                         lower_bounds=-half, upper_bounds=half,
                                                         options={"maxiter": self._acq_maxiter},
                                                         use_parallel_mode=False)
        # an abnormal L-BFGS-B stop (e.g. in the line search) still returns its best point
        self._stats["acq_failures"] += sum(issubclass(w.category, bo.OptimizationWarning) for w in caught)
        for w in caught:
            if not issubclass(w.category, bo.OptimizationWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return candidates[torch.argmax(values), 0].detach()

    # ------------------------------------------------------------------ tell: window, step, fit
    def _tell(self, values: np.ndarray) -> None:
        X_new = self._pending  # acquisitions, then theta: the window takes theta first (evaluation order)
        X = np.vstack([self._X, X_new[-1:], X_new[:-1]])[-self._n_max:]
        Y = np.concatenate([self._Y, values[-1:], values[:-1]])[-self._n_max:]
        lengthscale, outputscale = self._hyperparameters(self._raw_lengthscale, self._raw_outputscale)
        mean_u, variance_u = self._gradient_posterior_u(self._to_u(X, self._theta),
                                                        self._tensor(self._standardised(Y)), lengthscale, outputscale)
        grad = mean_u.cpu().numpy() / self._scale
        norm = float(np.linalg.norm(grad))
        if self._normalize_gradient:
            step = self._scale * lengthscale.cpu().numpy() * grad / norm if norm > 0 else np.zeros(self._dim)
        else:
            step = grad
        theta = self._theta - self._lr * step
        prior_u = (outputscale / lengthscale**2).cpu().numpy()
        explained = 1.0 - float(variance_u.cpu().numpy() @ self._trace_weights / (prior_u @ self._trace_weights))
        raw_lengthscale, raw_outputscale, failed = self._raw_lengthscale, self._raw_outputscale, 0
        if self._fit_hyperparameters and X.shape[0] >= self._n_max:
            raw_lengthscale, raw_outputscale, failed = self._fit(X, Y, theta)
        self._require_finite(mean=theta, raw_lengthscale=raw_lengthscale, raw_outputscale=raw_outputscale)
        self._theta, self._X, self._Y = theta, X, Y
        self._raw_lengthscale, self._raw_outputscale = raw_lengthscale, raw_outputscale
        self._nit += 1
        lengthscale, outputscale = self._hyperparameters(raw_lengthscale, raw_outputscale)
        self._stats.update({"fit_failures": self._stats["fit_failures"] + failed, "grad_norm": norm,
                            "grad_var_explained": explained,
                            "lengthscale_median": float(lengthscale.median()), "outputscale": float(outputscale)})

    def _fit(self, X, Y, theta):
        """Maximise the marginal likelihood over lengthscales and outputscale, starting from the
        current values; returns (raw lengthscale, raw outputscale, 1 if the fit failed else 0)."""
        bo = self._bo
        torch, gpytorch = bo.torch, bo.gpytorch
        lengthscale_constraint, outputscale_constraint = self._constraints()
        kernel = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(ard_num_dims=self._dim, lengthscale_constraint=lengthscale_constraint),
            outputscale_constraint=outputscale_constraint).to(device=self._device, dtype=torch.float64)
        with torch.no_grad():
            kernel.base_kernel.raw_lengthscale.copy_(self._tensor(self._raw_lengthscale).reshape(1, -1))
            kernel.raw_outputscale.copy_(self._tensor(self._raw_outputscale))
        y = self._tensor(self._standardised(Y))[:, None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bo.InputDataWarning)  # u is not scaled to the unit cube, on purpose
            model = bo.SingleTaskGP(self._to_u(X, theta), y, train_Yvar=torch.full_like(y, self._noise),
                                    covar_module=kernel, mean_module=gpytorch.means.ZeroMean(),
                                    outcome_transform=None)
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model).train()
        try:
            with gpytorch.settings.max_cholesky_size(float("inf")), warnings.catch_warnings():
                warnings.simplefilter("ignore", bo.OptimizationWarning)  # the status below says it
                result = bo.fit_gpytorch_mll_scipy(mll, options={"maxiter": self._fit_maxiter})
        except bo.NotPSDError:
            return self._raw_lengthscale, self._raw_outputscale, 1
        if result.status == bo.OptimizationStatus.FAILURE:
            return self._raw_lengthscale, self._raw_outputscale, 1
        return (kernel.base_kernel.raw_lengthscale.detach().cpu().numpy().reshape(-1).astype(np.float64),
                float(kernel.raw_outputscale.detach()), 0)
