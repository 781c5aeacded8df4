"""MMES: Mixture Model-based Evolution Strategy (He, Zheng & Zhou, IEEE TEVC 25(2), 2021).

A CMA-ES variant for large d whose covariance matrix is never formed: it is represented by
m stored evolution paths, and mutations are drawn from a cheap mixture model whose covariance
equals the truncated rank-one CMA covariance. Cost per sample O(l d), memory O(m d).

Reference code. The defaults reproduce the authors' MATLAB implementation,
https://github.com/hxyokokok/MMES: ``MMES.m`` (commit 17540ec, "Last Modified time:
2020-11-02"; "L<n>" below are its line numbers) and the MEX sampler ``MMES_mixing.c`` (commit
691cff9), which computes the same mixing sum as L132-135. An older ``MMES.m`` (2020-08-23) has
the same algorithm. Only the paper's abstract was at hand, so no equation numbers are cited.
pypop7 0.0.82's port (``pypop7/optimizers/es/mmes.py``) serves as a test-time oracle; where it
differs from MMES.m this is said below.

Notation: d = dimension, N = popsize = lambda, mu = floor(N/2), x0 and sigma_0 the starting
point and step size of a run, t = 1, 2, ... the generation.

Population and recombination (L38-42)::

    N = 4 + floor(3 ln d)  (odd N allowed),   w_i = ln(mu + 1/2) - ln i  (i = 1..mu),
    normalised to sum 1,   mu_eff = 1 / sum_i w_i^2,   m_{t+1} = sum_i w_i x_{i:N}  (L150-153)

Mirrored sampling (L101, L143-144): h = ceil(N/2) mutations z_1..z_h are drawn and the
population is m_t + sigma_t [z_1, ..., z_h, -z_1, ..., -z_{N-h}], so for odd N the last drawn
mutation has no mirror.

Evolution path (L154-155, c_c = 0.4/sqrt(d), L51 and L72)::

    p_{t+1} = (1 - c_c) p_t + sqrt(c_c (2 - c_c) mu_eff) (m_{t+1} - m_t) / sigma_t,   p_0 = 0

Archive of direction vectors (L86, L93-97, L158-168; LM-CMA's rule as simplified in Rm-ES):
m = 2 ceil(sqrt d) slots q_1..q_m (L46), kept oldest first, each stamped with the generation its
path was stored. In generations t = 1..m, p_{t+1} is written into slot t (L158-159). Afterwards
one vector is dropped and p_{t+1} appended as the newest: with g the smallest gap between
consecutive stamps (the first such pair if several), the later vector of that pair is dropped
if g <= T = ceil(1/c_c), and the oldest vector if g > T (L161-166). The warm-up stamps 1..m are
thinned out first (their gaps double, 2, 4, ..., up to 2T, which at m = T = 8 takes about 150
generations); in steady state the archive holds snapshots of the path T + 1 generations apart,
plus the current path.

Covariance model and mixture sampling (L104, L124, L131-141)::

    C = (1 - gamma) I + gamma sum_{i=1}^{m} pi_i q_{(i)} q_{(i)}^T,
    gamma = 1 - (1 - c_a)^m,   pi_i = c_a (1 - c_a)^{i-1} / gamma,   c_a = 3.8/d  (L56, L71),

    z = sqrt(1 - gamma) z_0 + sqrt(gamma / l) sum_{j=1}^{l} r_j q_{(K_j)},
    z_0 ~ N(0, I_d),  r_j ~ N(0, 1),  K_j ~ pi  i.i.d.,  l = 4 (L60),

q_{(i)} the i-th newest slot. MMES.m draws G ~ geometric(c_a) on {0, 1, ...} and takes the
slot at position m - (G mod m) (L124): the geometric distribution wrapped modulo m, which gives
exactly pi (newest most likely). E[z] = 0 and Cov[z] = C, while z itself is a Gaussian scale
mixture, not Gaussian.

Warm-up (L86, L104): gamma counts all m slots from the first generation on, and the slots no
path has been written into yet hold tiny random vectors 1e-6 N(0, I_d) (drawn here from the
optimizer's generator when a run starts). Those empty slots are the newest positions, so they
carry most of the mixture weight: in generation 1, z = sqrt(1 - gamma) z_0 up to 1e-6, i.e. the
first mutations are damped by sqrt(1 - gamma) (0.44 at d = 30, 0.75 at d = 200, 0.89 at d = 1000),
and the damping fades as the first m paths are stored.

First generation (L76-78, L82): MMES.m evaluates f(x0) before the loop, counts it
(FEs = 1), and sets the previous population's values to f(x0) repeated, so the first step-size
update compares the best mu values with f(x0). Under ask/tell the first ask of a run has
N + 1 rows: row 0 is the run's starting point x0 (MMES.m evaluates it first), rows 1..N the
population. ``nfev`` counts all N + 1, ``evals_per_iteration`` is N + 1 until the first tell,
and f(x0) is a candidate for ``f_best`` as MMES.m's ``fbest`` (L76).

Step size (L172-176, the PTA rule: a paired test between consecutive populations; c_s = 0.3
and a_z = 0.05, L66-68). With f^t_{i:N} the i-th best value of generation t (f^0_{i:N} = f(x0))::

    l_w = sum_{i=1}^{mu} w_i 1[f^t_{i:N} < f^{t-1}_{i:N}]                  (weighted success rate)
    z_t = sqrt(mu_eff) (2 l_w - 1)        (~ N(0,1) under H0: no change between generations)
    s_{t+1} = (1 - c_s) s_t + sqrt(c_s (2 - c_s)) z_t,   s_0 = 0            (stays N(0,1) under H0)
    sigma_{t+1} = sigma_t exp(Phi(s_{t+1}) - (1 - a_z))

Phi is the standard normal CDF, so 1 - Phi(s) is the one-sided p-value of "this generation
improved on the last": sigma grows when that p-value is below a_z and shrinks otherwise. The
exponent lies in [a_z - 1, a_z], so the rule needs no further damping. Ties count as failures
(strict "<", L172): on a plateau sigma shrinks.

Options that replace a rule of MMES.m by this module's earlier choice (each off by default):

* ``warmup="stored_paths"``: before m paths are stored, the model uses only the k stored ones,
  with gamma_k = 1 - (1 - c_a)^k and pi truncated to k terms (k = 0 gives z = z_0): the
  truncated rank-one recursion started from C_0 = I, without the damping.
* ``archive_gap="inclusive"``: the oldest vector is dropped already when the smallest gap is
  g >= T (MMES.m: g > T), giving a steady-state spacing of T instead of T + 1, without the
  transient gaps of 2T.
* ``first_generation="skip"``: x0 is not evaluated (every ask has N rows) and sigma is not
  adapted after a run's first generation (there is no previous population to compare with).
* MMES.m's population size is fixed ("do NOT change them", L36-38); here ``popsize`` may be
  any N >= 2, and the studies pass theirs. The earlier default, 4 + floor(3 ln d) rounded up to
  an even number, is ``popsize=n + n % 2`` with ``n = mmes_default_popsize(d)``. An odd N leaves
  one unmirrored sample, as in MMES.m.

Remaining deviations from MMES.m:

* c_a = min(3.8/d, 0.5): for d <= 7 the formula gives c_a >= 0.54 (>= 1 for d <= 3, where the
  geometric draw of L124 and gamma are meaningless); MMES.m targets large d.
* A per-coordinate ``sigma0`` is a fixed diagonal rescaling D of the search space (as pycma's
  ``CMA_stds``): x = m + sigma D z with sigma_0 = max(sigma0), D = sigma0 / sigma_0; the path and
  the archive live in the rescaled coordinates. MMES.m takes a scalar sigma0.
* No stopping rule: MMES.m stops on a target value, an evaluation budget, sigma < stopsigma or
  a time limit (L119); here the caller decides when to stop.
* Optional restarts (``restarts=True``, off by default; MMES.m has none): IPOP-style population
  doubling. A run restarts when sigma_t < 1e-12 sigma_0 or when its best population value has
  not improved by more than 1e-12 max(1, |f|) for 10 + ceil(30 d / N) generations; the new run
  starts from x0 with sigma_0, 2N samples, an empty path and a fresh archive, and (with the
  default ``first_generation``) evaluates x0 again in its first ask. Doubling stops once the
  population would exceed the suite's limits (``sabo.protocol.MAX_POPSIZE``,
  ``MAX_POPULATION_ELEMENTS``); later restarts keep its size.
* ``n_paths=1`` is accepted (MMES.m's gap search, L161, needs m >= 2): the single slot always
  holds the newest path.
* Random numbers come from NumPy's generator, so runs match MMES.m in distribution, not
  sample by sample; the stable sort of the values breaks ties by row order as MATLAB's sort.

* Non-finite objective values follow the suite's ``nonfinite`` policy (raise, or replace by the
  ask's worst finite value), and an update that would make the state non-finite is refused
  with the state unchanged; MMES.m does neither.

pypop7 0.0.82 follows MMES.m in the four rules above (fixed gamma with empty slots, g > T,
f(x0) first, odd N) but differs in four other points: it maps NumPy's geometric draw (support
1, 2, ...) as if it started at 0 like geornd, which makes the second-newest slot the most likely
and the newest the least likely; its empty slots are zero vectors rather than 1e-6 noise; its
warm-up stamps are all 0 rather than 1..m; and its weights use ln((N + 1)/2) instead of
ln(mu + 1/2), which differs for odd N. The cross-check in ``tests/test_mmes.py`` corrects the
first (its effect is measurable: uncorrected, pypop7 needs about 3% more evaluations than this
module to reach 1e-8 on a 30-d ellipsoid) and runs at an even N.
"""
from __future__ import annotations

import math

import numpy as np

from sabo.protocol import MAX_POPSIZE, MAX_POPULATION_ELEMENTS, AskTellOptimizer
from sabo.state import Array, Integer, Real
from sabo.validation import check_choice, check_in_interval, check_int, check_x0, shown

RESTART_SIGMA_RATIO = 1e-12
RESTART_FTOL = 1e-12
#: Scale of the random vectors in the archive slots no path has been written into (MMES.m L86).
EMPTY_SLOT_SCALE = 1e-6
WARMUPS = ("official", "stored_paths")
ARCHIVE_GAPS = ("strict", "inclusive")
FIRST_GENERATIONS = ("compare_x0", "skip")


def mmes_default_popsize(dim: int) -> int:
    """4 + floor(3 ln d), as MMES.m (L38); may be odd."""
    return 4 + int(np.floor(3 * np.log(dim)))


def recombination_weights(popsize: int) -> np.ndarray:
    """Log weights over the best mu = floor(N/2): w_i prop. to ln(mu + 1/2) - ln i, summing to 1."""
    mu = popsize // 2
    w = np.log(mu + 0.5) - np.log(np.arange(1, mu + 1))
    return w / w.sum()


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


class MMES(AskTellOptimizer):
    """MMES under the suite's ask/tell protocol (formulas, options and deviations: module docstring).

    Parameters
    ----------
    x0, sigma0, popsize, seed, nonfinite
        As in :class:`sabo.protocol.AskTellOptimizer`; ``popsize=None`` gives 4 + floor(3 ln d).
    n_paths : int, optional
        m, the number of stored evolution paths (default 2 ceil(sqrt d)).
    c_c : float, optional
        Learning rate of the evolution path, in (0, 1] (default 0.4/sqrt d). The archive spacing
        threshold is T = ceil(1/c_c) generations.
    mixing_strength : int
        l, the number of stored vectors mixed into each sample (default 4).
    c_s : float
        Smoothing rate of the step-size statistic, in (0, 1] (default 0.3).
    target_significance : float
        a_z in (0, 1) (default 0.05).
    restarts : bool
        IPOP-style restarts with population doubling (default off: fixed population).
    warmup : {"official", "stored_paths"}
        Mixture model before m paths are stored: MMES.m's fixed gamma over all m slots, empty
        slots holding 1e-6 noise (default), or gamma_k over the k stored paths.
    archive_gap : {"strict", "inclusive"}
        Drop the oldest stored path when the smallest stamp gap is > T (MMES.m, default) or >= T.
    first_generation : {"compare_x0", "skip"}
        Evaluate x0 in a run's first ask and adapt sigma against f(x0) (MMES.m, default), or
        evaluate only the population and leave sigma unchanged after the first generation.
    """

    name = "mmes"
    revision = 2  # 2: the defaults of the authors' MMES.m (warm-up, archive rule, f(x0), popsize)
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
        Array("z", lambda o: (o._popsize, o._dim), optional=True),  # mutations of the last ask's population
    ) + AskTellOptimizer._STATE_FIELDS

    @classmethod
    def default_popsize(cls, dim: int) -> int:
        """MMES.m's lambda, :func:`mmes_default_popsize`."""
        return mmes_default_popsize(dim)

    def __init__(self, x0, sigma0=1.0, popsize=None, seed=None, *, n_paths=None, c_c=None,
                 mixing_strength=4, c_s=0.3, target_significance=0.05, restarts=False,
                 warmup="official", archive_gap="strict", first_generation="compare_x0", nonfinite="raise"):
        x0 = check_x0(x0)
        d = x0.size
        super().__init__(x0, sigma0=sigma0, popsize=self.default_popsize(d) if popsize is None else popsize,
                         seed=seed, nonfinite=nonfinite)
        self._m = check_int("n_paths", 2 * math.ceil(math.sqrt(d)) if n_paths is None else n_paths, minimum=1)
        self._c_c = check_in_interval("c_c", 0.4 / math.sqrt(d) if c_c is None else c_c, 0.0, 1.0, closed="right")
        self._l = check_int("mixing_strength", mixing_strength, minimum=1)
        self._c_s = check_in_interval("c_s", c_s, 0.0, 1.0, closed="right")
        self._a_z = check_in_interval("target_significance", target_significance, 0.0, 1.0)
        if not isinstance(restarts, (bool, np.bool_)):
            raise ValueError(f"restarts must be True or False (got {shown(restarts)})")
        self._restarts = bool(restarts)
        self._warmup = check_choice("warmup", warmup, WARMUPS)
        self._archive_gap = check_choice("archive_gap", archive_gap, ARCHIVE_GAPS)
        self._first_generation = check_choice("first_generation", first_generation, FIRST_GENERATIONS)
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
        # rows 0..n_stored-1 hold the stored paths, oldest first; the rest are empty slots
        if self._warmup == "official":
            self._archive = EMPTY_SLOT_SCALE * self._rng.standard_normal((self._m, d))
        else:
            self._archive = np.zeros((self._m, d))
        self._archive_gen = np.zeros(self._m, dtype=np.int64)
        self._n_stored = 0
        self._pta_s = 0.0
        self._prev_sorted = np.empty(0)  # best mu values of the previous generation, sorted
        self._gen = 0  # generations of the current run
        self._run_best_hist = np.empty(0)  # best-so-far population value of the run after each generation
        self._z: np.ndarray | None = None

    def _config(self) -> dict:
        return {**super()._config(), "popsize": self._popsize_init, "n_paths": self._m, "c_c": self._c_c,
                "mixing_strength": self._l, "c_s": self._c_s, "target_significance": self._a_z,
                "restarts": self._restarts, "warmup": self._warmup, "archive_gap": self._archive_gap,
                "first_generation": self._first_generation}

    def _asks_x0(self) -> bool:
        """Whether the next ask starts with the run's starting point (first generation, MMES.m's f(x0))."""
        return self._first_generation == "compare_x0" and self._gen == 0

    def _ask_rows(self) -> int:
        return self._popsize + int(self._asks_x0())

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
        """gamma and the probabilities of archive rows 0..k-1 (oldest first; the last row most likely)."""
        keep = 1.0 - self._c_a
        gamma = 1.0 - keep**k
        ages = np.arange(k - 1, -1, -1)  # row k-1 has age 0
        return gamma, self._c_a * keep**ages / gamma

    def _ask(self) -> np.ndarray:
        n, d = self._popsize, self._dim
        # MMES.m mixes over all m slots, empty ones included; "stored_paths" over the stored ones only
        k = self._m if self._warmup == "official" else self._n_stored
        h = (n + 1) // 2  # distinct mutation vectors; the rest are mirrors of the first n - h
        z = self._rng.standard_normal((h, d))
        if k > 0:
            gamma, probs = self._mixture_probabilities(k)
            idx = self._rng.choice(k, size=(h, self._l), p=probs)
            r = self._rng.standard_normal((h, self._l))
            mix = np.zeros((h, d))
            for j in range(self._l):  # O(h d) memory, whatever l is
                mix += r[:, j, None] * self._archive[idx[:, j]]
            z = math.sqrt(1.0 - gamma) * z + math.sqrt(gamma / self._l) * mix
        Z = np.concatenate([z, -z[:n - h]])
        self._z = Z
        X = self._mean + self._sigma * self._scale * Z
        return np.concatenate([self._mean[None, :], X]) if self._asks_x0() else X

    # ------------------------------------------------------------------ update
    def _tell(self, values: np.ndarray) -> None:
        w, mu = self._weights, self._weights.size
        if self._asks_x0():  # row 0 is x0; MMES.m compares the first generation with f(x0)
            prev, values = np.full(mu, values[0]), values[1:]
        else:
            prev = self._prev_sorted if self._prev_sorted.size == mu else None
        order = np.argsort(values, kind="stable")
        best = values[order[:mu]]
        z_w = w @ self._z[order[:mu]]  # = D^{-1} (m_{t+1} - m_t) / sigma_t
        mean_new = self._mean + self._sigma * self._scale * z_w
        path_new = (1.0 - self._c_c) * self._path + math.sqrt(self._c_c * (2.0 - self._c_c) * self._mu_eff) * z_w
        gen_new = self._gen + 1

        # PTA: weighted paired sign test of this generation's best mu against the last one's
        if prev is not None:
            l_w = float(w @ (best < prev))
            pta_z = math.sqrt(self._mu_eff) * (2.0 * l_w - 1.0)
            s_new = (1.0 - self._c_s) * self._pta_s + math.sqrt(self._c_s * (2.0 - self._c_s)) * pta_z
            sigma_new = self._sigma * math.exp(_normal_cdf(s_new) - (1.0 - self._a_z))
        else:  # first_generation="skip": no previous population to compare with
            pta_z, s_new, sigma_new = np.nan, self._pta_s, self._sigma

        self._require_finite(mean=mean_new, evolution_path=path_new, sigma=sigma_new)

        # archive update (in temporaries, then assigned)
        archive, stamps, k = self._archive.copy(), self._archive_gen.copy(), self._n_stored
        if k == self._m:
            drop = 0
            if self._m > 1:
                gaps = np.diff(stamps)
                j = int(np.argmin(gaps))
                keeps_pair = gaps[j] <= self._T if self._archive_gap == "strict" else gaps[j] < self._T
                if keeps_pair:
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
