"""MMES: Mixture Model-based Evolution Strategy (He, Zheng & Zhou, IEEE TEVC 25(2), 2021).

A CMA-ES variant for large d whose covariance matrix is never formed: it is represented by
m stored evolution paths, and mutations are drawn from a cheap mixture model whose covariance
equals the truncated rank-one CMA covariance. Cost per sample O(l d), memory O(m d).

Notation (d = dimension, N = popsize = lambda, mu = floor(N/2)). "Sec. III" below is the part of
the paper (arXiv:2203.12675) that builds and analyses the mixture model and its fast sampler,
"Sec. IV" the part that assembles MMES and introduces its mutation-strength adaptation. Only the
abstract of the paper was at hand while writing this module, so these pointers follow the
paper's outline and no equation numbers are cited; the defaults are those of references.md.

Recombination (Sec. IV, standard CMA-ES weights over the best half)::

    w_i = ln(mu + 1/2) - ln i  (i = 1..mu),  normalised to sum 1,   mu_eff = 1 / sum_i w_i^2
    m_{t+1} = sum_i w_i x_{i:N}

Evolution path (Sec. IV, CMA-ES cumulation with rate c_c = 0.4/sqrt(d))::

    p_{t+1} = (1 - c_c) p_t + sqrt(c_c (2 - c_c) mu_eff) (m_{t+1} - m_t) / sigma_t

Candidate direction vectors (Sec. IV, the vector-selection rule LM-CMA uses): an archive
q_1..q_k (k <= m = n_paths = 2 ceil(sqrt d)), oldest first, each stamped with the generation it
was stored. Every generation the new path p_{t+1} is appended. While k < m nothing is dropped;
once full, one vector is dropped first: the later of the two stamps closest in time if some
consecutive stamps are fewer than T = ceil(1/c_c) generations apart, else the oldest. In steady
state the archive therefore holds snapshots of the path T generations apart plus the current path.

Covariance model (Sec. III). The rank-one CMA update C <- (1 - c_a) C + c_a p p^T with C_0 = I,
truncated to the k stored vectors, is::

    C = (1 - gamma) I + gamma sum_{i=1}^{k} pi_i q_{(i)} q_{(i)}^T,
    gamma = 1 - (1 - c_a)^k,   pi_i = c_a (1 - c_a)^{i-1} / gamma,

q_{(i)} the i-th newest vector (pi is a geometric distribution truncated to k terms, newest
most likely), c_a = 3.8/d (the reference MATLAB value per references.md; pypop7 notes that the
paper's text has 4/d).

Fast mixture sampling (Sec. III, the "mixture model"): with mixing strength l,

    z = sqrt(1 - gamma) z_0 + sqrt(gamma / l) sum_{j=1}^{l} r_j q_{(K_j)},
    z_0 ~ N(0, I_d),  r_j ~ N(0, 1),  K_j ~ pi  i.i.d. (drawn with replacement),

so E[z] = 0 and Cov[z] = C exactly, while z itself is a Gaussian scale mixture, not Gaussian.
Mirrored sampling: row pairs (2j, 2j+1) are m + sigma z_j and m - sigma z_j.

Step size (Sec. IV, the PTA rule: a paired significance test between consecutive populations).
With f^t_{i:N} the i-th best value of generation t::

    l_w = sum_{i=1}^{mu} w_i 1[f^t_{i:N} < f^{t-1}_{i:N}]                  (weighted success rate)
    z_t = sqrt(mu_eff) (2 l_w - 1)        (~ N(0,1) under H0: no change between generations)
    s_{t+1} = (1 - c_s) s_t + sqrt(c_s (2 - c_s)) z_t                   (stays N(0,1) under H0)
    sigma_{t+1} = sigma_t exp(Phi(s_{t+1}) - (1 - a_z))

Phi is the standard normal CDF, so 1 - Phi(s) is the one-sided p-value of "this generation
improved on the last": sigma grows when that p-value is below the target significance a_z and
shrinks otherwise. The exponent lies in [a_z - 1, a_z], so the rule needs no further damping
(d_sigma = 1).

Restarts (``restarts=True``, off by default): IPOP-style population doubling. A run restarts when
sigma_t < 1e-12 sigma_0 or when its best value has not improved by more than 1e-12 max(1, |f|)
for 10 + ceil(30 d / N) generations; the new run starts from x0 with sigma_0, 2N samples and an
empty path/archive.

A per-coordinate ``sigma0`` is treated as a fixed diagonal rescaling D of the search space
(as pycma's ``CMA_stds``): x = m + sigma D z with sigma_0 = max(sigma0), D = sigma0 / sigma_0;
the path and the archive live in the rescaled coordinates.

Deviations (choices the paper leaves open, and differences from the reference code):

* Warm-up: before m paths are stored the model uses the k stored ones with
  gamma_k = 1 - (1 - c_a)^k (k = 0 gives z = z_0), which is exactly the truncated rank-one
  recursion started from C_0 = I. pypop7's port instead keeps zero vectors in the empty slots,
  which shrinks the early mutations by sqrt(1 - gamma).
* Mixture index: the i-th newest vector has probability c_a (1 - c_a)^{i-1} / gamma, newest most
  likely (the rank-one recursion). pypop7 0.0.82 maps a numpy geometric draw (support 1, 2, ...)
  as if it started at 0, which makes the *second* newest vector the most likely and the newest
  the least likely; we do not reproduce that shift.
* Archive: the oldest vector is dropped when all consecutive stamps are at least T apart
  (">= T"), giving a steady-state spacing of T; pypop7 drops it only when they are more than T
  apart, which gives a spacing of T + 1.
* First generation: there is no previous population, so sigma is not adapted after the first
  tell (pypop7's port compares with f(x0) instead, which costs an extra evaluation of the
  initial mean that this ask/tell version does not make).
* Ties f^t_{i:N} = f^{t-1}_{i:N} count as failures (strict "<"), as in pypop7's port: on a
  plateau sigma shrinks.
* Popsize: default N = 4 + floor(3 ln d) rounded up to an even number so every sample has its
  mirror; an odd user-given N is accepted and its last row is an unpaired sample.
* c_a = min(3.8/d, 0.5): for d <= 7 the formula gives c_a >= 0.54 (>= 1 for d <= 3, where
  gamma would be meaningless); the paper targets d >= 100 and leaves small d open.
* Restarts stop doubling the population once it would exceed the suite's population limits
  (``sabo.protocol.MAX_POPSIZE``, ``MAX_POPULATION_ELEMENTS``); later restarts keep its size.
* Restart criteria, and restarting from x0 rather than a random point of a box (this interface
  has no box), are our choices; the paper's large-scale experiments do not restart.
"""
from __future__ import annotations

import math

import numpy as np

from sabo.protocol import MAX_POPSIZE, MAX_POPULATION_ELEMENTS, AskTellOptimizer
from sabo.state import Array, Integer, Real
from sabo.validation import check_in_interval, check_int, check_x0

RESTART_SIGMA_RATIO = 1e-12
RESTART_FTOL = 1e-12


def mmes_default_popsize(dim: int) -> int:
    """4 + floor(3 ln d), rounded up to an even number for mirrored sampling."""
    n = 4 + int(np.floor(3 * np.log(dim)))
    return n + (n % 2)


def recombination_weights(popsize: int) -> np.ndarray:
    """Log weights over the best mu = floor(N/2): w_i prop. to ln(mu + 1/2) - ln i, summing to 1."""
    mu = popsize // 2
    w = np.log(mu + 0.5) - np.log(np.arange(1, mu + 1))
    return w / w.sum()


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


class MMES(AskTellOptimizer):
    """MMES under the suite's ask/tell protocol (formulas and deviations: module docstring).

    Parameters
    ----------
    x0, sigma0, popsize, seed, nonfinite
        As in :class:`sabo.protocol.AskTellOptimizer`; ``popsize=None`` gives
        4 + floor(3 ln d) rounded up to an even number.
    n_paths : int, optional
        m, the number of stored evolution paths (default 2 ceil(sqrt d)).
    c_c : float, optional
        Learning rate of the evolution path, in (0, 1] (default 0.4/sqrt d). The archive spacing
        is T = ceil(1/c_c) generations.
    mixing_strength : int
        l, the number of stored vectors mixed into each sample (default 4).
    c_s : float
        Smoothing rate of the step-size statistic, in (0, 1] (default 0.3).
    target_significance : float
        a_z in (0, 1) (default 0.05).
    restarts : bool
        IPOP-style restarts with population doubling (default off: fixed population).
    """

    name = "mmes"
    _STATE_FIELDS = (
        Integer("popsize", minimum=2, maximum=lambda o: min(MAX_POPSIZE, MAX_POPULATION_ELEMENTS // o._dim)),
        Array("mean", lambda o: (o._dim,)),
        Real("sigma", positive=True),
        Array("path", lambda o: (o._dim,)),
        Array("archive", lambda o: (o._m, o._dim)),
        Array("archive_gen", lambda o: (o._m,), integer=True, minimum=0),
        Integer("n_stored", maximum=lambda o: o._m),
        Real("pta_s"),
        Array("prev_sorted", lambda o: (None,)),
        Integer("gen"),
        Array("run_best_hist", lambda o: (None,)),
        Array("z", lambda o: (o._popsize, o._dim), optional=True),  # mutations of the last ask
    ) + AskTellOptimizer._STATE_FIELDS

    def __init__(self, x0, sigma0=1.0, popsize=None, seed=None, *, n_paths=None, c_c=None,
                 mixing_strength=4, c_s=0.3, target_significance=0.05, restarts=False,
                 nonfinite="raise"):
        x0 = check_x0(x0)
        d = x0.size
        super().__init__(x0, sigma0=sigma0, popsize=mmes_default_popsize(d) if popsize is None else popsize,
                         seed=seed, nonfinite=nonfinite)
        self._m = check_int("n_paths", 2 * math.ceil(math.sqrt(d)) if n_paths is None else n_paths, minimum=1)
        self._c_c = check_in_interval("c_c", 0.4 / math.sqrt(d) if c_c is None else c_c, 0.0, 1.0, closed="right")
        self._l = check_int("mixing_strength", mixing_strength, minimum=1)
        self._c_s = check_in_interval("c_s", c_s, 0.0, 1.0, closed="right")
        self._a_z = check_in_interval("target_significance", target_significance, 0.0, 1.0)
        if not isinstance(restarts, (bool, np.bool_)):
            raise ValueError(f"restarts must be True or False (got {restarts!r})")
        self._restarts = bool(restarts)
        self._T = int(math.ceil(1.0 / self._c_c))
        self._c_a = min(3.8 / d, 0.5)
        self._sigma_init = float(np.max(self._sigma0))
        self._scale = self._sigma0 / self._sigma_init  # fixed diagonal D (all ones for scalar sigma0)
        self._popsize_init = self._popsize
        self._stats.update(sigma=self._sigma_init, pta_z=np.nan, pta_statistic=0.0, n_paths_stored=0,
                           restarts=0, popsize=self._popsize)
        self._reset_run(self._popsize)

    # ------------------------------------------------------------------ state
    def _reset_run(self, popsize: int) -> None:
        """(Re)start a run from x0 with ``popsize`` samples: fresh path, archive and PTA state."""
        d = self._dim
        self._popsize = popsize
        self._weights = recombination_weights(popsize)
        self._mu_eff = float(1.0 / np.sum(self._weights**2))
        self._mean = self._x0.copy()
        self._sigma = self._sigma_init
        self._path = np.zeros(d)
        self._archive = np.zeros((self._m, d))  # rows 0..k-1 used, oldest first
        self._archive_gen = np.zeros(self._m, dtype=np.int64)
        self._n_stored = 0
        self._pta_s = 0.0
        self._prev_sorted = np.empty(0)  # best mu values of the previous generation, sorted
        self._gen = 0  # generations of the current run
        self._run_best_hist = np.empty(0)  # best-so-far value of the run after each generation
        self._z: np.ndarray | None = None

    def _config(self) -> dict:
        return {**super()._config(), "popsize": self._popsize_init, "n_paths": self._m, "c_c": self._c_c,
                "mixing_strength": self._l, "c_s": self._c_s, "target_significance": self._a_z,
                "restarts": self._restarts}

    def _finish_restore(self) -> None:
        """Recompute what depends on the restored popsize; check the sizes that depend on it."""
        self._weights = recombination_weights(self._popsize)
        self._mu_eff = float(1.0 / np.sum(self._weights**2))
        if self._prev_sorted.size not in (0, self._weights.size):
            raise ValueError(f"state['state']['prev_sorted'] must have 0 or popsize // 2 = {self._weights.size} "
                             f"entries (got {self._prev_sorted.size})")
        window = 10 + math.ceil(30 * self._dim / self._popsize)
        if self._run_best_hist.size > window + 1:
            raise ValueError(f"state['state']['run_best_hist'] must have at most {window + 1} entries "
                             f"(got {self._run_best_hist.size})")
        if self._pending is not None and self._z is None:
            raise ValueError("state['state']['z'] is None while an ask is pending: the update needs its mutations")

    @property
    def mean(self) -> np.ndarray:
        """m_t."""
        return self._mean.copy()

    @property
    def sigma(self) -> float:
        """Global step size sigma_t (in units of the diagonal scaling D = sigma0 / max(sigma0))."""
        return self._sigma

    @property
    def n_paths_stored(self) -> int:
        return self._n_stored

    # ------------------------------------------------------------------ sampling
    def _mixture_probabilities(self, k: int) -> tuple[float, np.ndarray]:
        """gamma_k and the probabilities of the k stored vectors, oldest first (newest most likely)."""
        keep = 1.0 - self._c_a
        gamma = 1.0 - keep**k
        ages = np.arange(k - 1, -1, -1)  # newest has age 0
        return gamma, self._c_a * keep**ages / gamma

    def _ask(self) -> np.ndarray:
        n, d, k = self._popsize, self._dim, self._n_stored
        h = (n + 1) // 2  # distinct mutation vectors; the rest are their mirrors
        z = self._rng.standard_normal((h, d))
        if k > 0:
            gamma, probs = self._mixture_probabilities(k)
            idx = self._rng.choice(k, size=(h, self._l), p=probs)
            r = self._rng.standard_normal((h, self._l))
            mix = np.zeros((h, d))
            for j in range(self._l):  # O(h d) memory, whatever l is
                mix += r[:, j, None] * self._archive[idx[:, j]]
            z = math.sqrt(1.0 - gamma) * z + math.sqrt(gamma / self._l) * mix
        signs = np.tile([1.0, -1.0], h)[:n]
        Z = np.repeat(z, 2, axis=0)[:n] * signs[:, None]
        self._z = Z
        return self._mean + self._sigma * self._scale * Z

    # ------------------------------------------------------------------ update
    def _tell(self, values: np.ndarray) -> None:
        w, mu = self._weights, self._weights.size
        order = np.argsort(values, kind="stable")
        best = values[order[:mu]]
        z_w = w @ self._z[order[:mu]]  # = D^{-1} (m_{t+1} - m_t) / sigma_t
        mean_new = self._mean + self._sigma * self._scale * z_w
        path_new = (1.0 - self._c_c) * self._path + math.sqrt(self._c_c * (2.0 - self._c_c) * self._mu_eff) * z_w
        gen_new = self._gen + 1

        # PTA: weighted paired sign test of this generation's best mu against the last one's
        if self._prev_sorted.size == mu:
            l_w = float(w @ (best < self._prev_sorted))
            pta_z = math.sqrt(self._mu_eff) * (2.0 * l_w - 1.0)
            s_new = (1.0 - self._c_s) * self._pta_s + math.sqrt(self._c_s * (2.0 - self._c_s)) * pta_z
            sigma_new = self._sigma * math.exp(_normal_cdf(s_new) - (1.0 - self._a_z))
        else:  # first generation of a run: no previous population to compare with
            pta_z, s_new, sigma_new = np.nan, self._pta_s, self._sigma

        self._require_finite(mean=mean_new, evolution_path=path_new, sigma=sigma_new)

        # archive update (in temporaries, then assigned)
        archive, stamps, k = self._archive.copy(), self._archive_gen.copy(), self._n_stored
        if k == self._m:
            drop = 0
            if self._m > 1:
                gaps = np.diff(stamps)
                j = int(np.argmin(gaps))
                if gaps[j] < self._T:
                    drop = j + 1  # the later of the closest pair
            archive[drop:-1], stamps[drop:-1] = archive[drop + 1:].copy(), stamps[drop + 1:].copy()
            k -= 1
        archive[k], stamps[k] = path_new, gen_new
        k += 1

        run_best = min(self._run_best_hist[-1], float(best[0])) if self._run_best_hist.size else float(best[0])

        self._mean, self._path, self._sigma, self._pta_s = mean_new, path_new, sigma_new, s_new
        self._archive, self._archive_gen, self._n_stored = archive, stamps, k
        self._prev_sorted = best.copy()
        self._gen = gen_new
        window = 10 + math.ceil(30 * self._dim / self._popsize)
        self._run_best_hist = np.append(self._run_best_hist[-window:], run_best)
        self._nit += 1
        self._stats.update(sigma=sigma_new, pta_z=pta_z, pta_statistic=s_new, n_paths_stored=k)
        if self._restarts and self._should_restart():
            doubled = 2 * self._popsize
            fits = doubled <= MAX_POPSIZE and doubled * self._dim <= MAX_POPULATION_ELEMENTS
            self._reset_run(doubled if fits else self._popsize)
            self._stats["restarts"] += 1
            self._stats.update(sigma=self._sigma, pta_statistic=0.0, n_paths_stored=0)
        self._stats["popsize"] = self._popsize

    def _should_restart(self) -> bool:
        if self._sigma < RESTART_SIGMA_RATIO * self._sigma_init:
            return True
        window = 10 + math.ceil(30 * self._dim / self._popsize)
        hist = self._run_best_hist  # the last window + 1 run-best values
        if hist.size <= window:
            return False
        old, new = hist[-1 - window], hist[-1]
        return bool(old - new <= RESTART_FTOL * max(1.0, abs(new)))
