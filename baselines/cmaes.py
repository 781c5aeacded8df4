"""CMA-ES (Hansen 2006, "The CMA Evolution Strategy: A Comparing Review") through pycma.

Per iteration CMA-ES samples x_k = m + sigma B D z_k, z_k ~ N(0, I), k = 1..lambda, where
C = B D^2 B^T; ranks the values; moves the mean to the weighted average of the mu best,
m <- sum_i w_i x_{i:lambda}; updates the evolution paths p_sigma (conjugate) and p_c; adapts
the step size by cumulative step-size adaptation, sigma <- sigma exp((c_s / d_s)
(||p_sigma|| / E||N(0, I)|| - 1)); and updates C by the rank-one (p_c p_c^T) and rank-mu
(weighted outer products of the selected steps, negative weights for the worst: "active"
CMA) terms. All of this is pycma's ``CMAEvolutionStrategy`` with its defaults; this module
only adapts it to the suite's ask/tell protocol.

pycma options set here, and why:

* ``popsize``: our ``popsize`` (default pycma's own 4 + floor(3 ln d)).
* ``randn`` and ``seed = nan``: every normal sample pycma draws comes through ``randn``,
  here a :class:`GeneratorNormal` on the optimizer's own generator ``self._rng``. pycma's
  ``seed`` option reseeds NumPy's *global* RNG (0/None meaning "from the clock"), which
  pycma 4.x skips when ``randn`` is not ``np.random.randn``; ``nan`` ("do nothing") makes
  that explicit rather than relying on it.
* ``verbose = -9``, ``verb_disp = 0``, ``verb_log = 0``: silent, and no ``outcmaes*`` data
  files (the ask/tell path of ``CMAEvolutionStrategy`` never logs, and with ``verb_log = 0``
  pycma's logger opens no file even if called, so ``verb_filenameprefix`` is left alone).
* ``signals_filename = ""``: pycma's ``stop()`` would otherwise read ``cma_signals.in``
  from the working directory and let it change options mid-run.
* ``CMA_stds``: a per-coordinate ``sigma0`` is passed as pycma's scalar
  sigma0 = max_i sigma0_i times the multipliers sigma0_i / max_i sigma0_i.

In pycma 4.x the default sampling, mirroring (``CMA_mirrormethod = 2``) and step-size
paths draw only through ``opts['randn']``. For d >= 300 pycma's default step-size rule is
two-point adaptation (TPA) instead of CSA; its ``check_consistency`` picks coordinates to
verify with ``np.random.randint``. That choice does not affect the optimisation, but it
advances NumPy's global RNG, so under TPA ``tell`` saves and restores the global state around
pycma's update (about 0.15 ms, which is why it is not done under CSA, whose tell never draws
from it). The code paths that still call ``np.random``
(``CMA_mirrormethod`` 0/1 via stochastic rounding, ``AdaptSigma = CMAAdaptSigmaTPA``'s
consistency check, ``integer_variables``, a custom ``CMA_sampler``, and a numeric
``CMA_diagonal``, whose switch to full covariance builds a sampler without ``randn``) are
closed by rejecting those options.

Save and restore (``state_dict``/``from_state_dict``) work by *replay*. A pycma object cannot
be stored as data, and pycma evaluates string-valued options with ``eval()``, so neither a
pycma object nor a string option ever comes from a saved state. The state holds the
constructor arguments (``x0``, ``sigma0``, ``popsize``, ``seed``, and ``options`` as JSON-like
data: saving or restoring string-valued options raises ``ValueError``), the values told in
every completed iteration (a ``(nit, popsize)`` array), the counters, best point, ``stats``,
the pending population (if any), the RNG state and pycma's mean after the last tell.
``from_state_dict`` builds a fresh optimizer from the arguments and asks/tells the saved
values again; the replayed RNG state, mean and pending population must equal the saved
ones exactly ("replay did not reproduce the saved state" otherwise). Cost: restoring takes
the optimizer's own time of the run so far (pycma's sampling and updates, no objective
calls), and the state grows by ``popsize`` floats per iteration.

Ask and tell are pycma's own loop: ``es.ask()``, then ``es.tell`` of those same solution
arrays with the values as a list, then ``es.stop()`` (every tell: it counts flat-fitness
iterations), with no copy of pycma's state; the population the caller sees is a separate array
(tests/test_cmaes.py compares every population, mean, step size and termination dict with
pycma driven directly). pycma updates its object in place, so a tell that fails inside it (an
exception, an interrupt, or a non-finite mean or step size, ``FloatingPointError``) drops the
object; the next use rebuilds it by the same replay, from a fresh generator, and checks that
the mean and the pending population come out as kept ("could not be rebuilt by replay"
otherwise). The optimizer is then exactly as before the failed tell, its generator included
even where pycma drew from it, at the cost of a replay, paid only after a failure; a copy of
pycma's state per tell, kept if the update succeeded, would cost 9% of a d = 1000 iteration and
twice pycma's own time at d = 10.

Deviations: none in the algorithm by default; only the source of random numbers is changed (the
optimizer's own ``numpy.random.Generator`` instead of NumPy's global state). pycma's
termination conditions are recorded in ``stats["stop"]`` but never acted on: the caller's
budget decides when a run ends.

``lazy_gap_factor`` (default 1: pycma's own) stretches pycma's lazy eigendecomposition. pycma
samples from C = B D^2 B^T but decomposes C only every g = 1 / (10 d (c_1 + c_mu)) iterations (its
``GaussFullSampler.lazy_update_gap``; 3.8 at d = 1000 with lambda = 50), sampling in between from
the B, D of the last decomposition while C itself is updated every iteration. A factor k
decomposes every k g iterations instead: the same algorithm with a staler sampling basis
(pycma's option ``updatecovwait`` sets g itself, the same for every d). At d = 1000, lambda =
50, eigh is about 60% of an iteration, and k = 2 makes an iteration 1.6x faster (measured,
interleaved, one BLAS thread). Any k other than 1 is a DEVIATION from pycma's defaults, and a
config that sets it says so (its ``params``).
"""
from __future__ import annotations

import copy
import math
import warnings

import numpy as np

from sabo.protocol import AskTellOptimizer
from sabo.state import Array, to_data
from sabo.validation import check_positive, check_x0, shown

from .replay import TOLD_FIELD, TellReplay

with warnings.catch_warnings():  # pycma warns on import when matplotlib is absent (the library's own install,
    # `pip install sabo-bench`): its plots, the only thing that needs it, are never used here
    warnings.filterwarnings("ignore", message="Could not import matplotlib", category=UserWarning)
    import cma

# pycma option -> why it may not be passed through ``options``
FORBIDDEN_OPTIONS = {
    "seed": "it reseeds NumPy's global RNG; pass seed= to CMAES",
    "randn": "samples come from the optimizer's own generator; pass seed= to CMAES",
    "popsize": "pass popsize= to CMAES",
    "CMA_stds": "pass a per-coordinate sigma0 to CMAES",
    "verbose": "the adapter keeps pycma silent",
    "verb_disp": "the adapter keeps pycma silent",
    "verb_log": "the adapter writes no pycma data files",
    "signals_filename": "options may not change mid-run from a file",
    "CMA_mirrormethod": "methods 0 and 1 draw from NumPy's global RNG",
    "AdaptSigma": "CMAAdaptSigmaTPA draws from NumPy's global RNG",
    "integer_variables": "integer handling draws from NumPy's global RNG",
    "CMA_sampler": "a custom sampler is not given the optimizer's generator",
    "CMA_sampler_options": "a custom sampler is not given the optimizer's generator",
}

# pycma option -> why it cannot act under ask/tell (pycma would ignore it without a word: its warnings are off)
INERT_OPTIONS = {
    "eval_final_mean": "only cma.fmin evaluates the final mean; the suite evaluates the mean itself",
    "CMA_dampsvec_fade": "pycma does not read it",
}


def pycma_default_popsize(dim: int) -> int:
    """pycma's default population size 4 + floor(3 ln d) (not INGO's even rule,
    :func:`sabo.gaussian_search.ingo_default_popsize`)."""
    return 4 + int(np.floor(3 * np.log(dim)))


class GeneratorNormal:
    """pycma's ``randn(*shape)`` drawing from a ``numpy.random.Generator``.

    A plain object (not a bound method), so that ``copy.deepcopy`` of an optimizer gives a
    copy that draws from the copied generator.
    """

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def __call__(self, *shape) -> np.ndarray:
        return self.rng.standard_normal(shape)


class CMAES(TellReplay, AskTellOptimizer):
    """pycma's CMA-ES under the suite's ask/tell protocol.

    Parameters
    ----------
    x0 : array_like, shape (d,)
        Initial mean.
    sigma0 : float or array_like, shape (d,)
        Initial standard deviation(s); per-coordinate values go to pycma's ``CMA_stds``.
    popsize : int or None
        lambda (>= 2); ``None`` uses pycma's default 4 + floor(3 ln d).
    seed : int or None
        Seed of the optimizer's own generator, the only source of pycma's samples.
    options : dict or None
        Further ``cma.CMAOptions`` passed to pycma unchanged (e.g. ``{"CMA_diagonal": True}``,
        ``{"bounds": [lb, ub]}``). Unknown keys and the keys of :data:`FORBIDDEN_OPTIONS`
        (which would break RNG isolation, silence or our bookkeeping) raise ``ValueError``, and so
        do options that cannot act under ask/tell, where pycma would ignore them without a word
        (its warnings are silenced here): :data:`INERT_OPTIONS` and ``CMA_elitist="initial"``.
    nonfinite : {"raise", "worst"}
        See :class:`sabo.protocol.AskTellOptimizer`.
    lazy_gap_factor : float > 0
        The iterations between pycma's eigendecompositions of C, as a multiple of pycma's own gap
        (module docstring); 1 (the default) is pycma's.

    Notes
    -----
    One iteration is one ask/tell round of ``popsize`` rows. ``stats`` holds pycma's step
    size ``sigma`` and its termination conditions ``stop`` (``{}`` when none holds).
    """

    name = "cmaes"
    _STATE_FIELDS = (
        TOLD_FIELD,
        Array("mean_after_tell", lambda o: (o._dim,)),
    ) + AskTellOptimizer._STATE_FIELDS

    @classmethod
    def default_popsize(cls, dim: int) -> int:
        """pycma's default, :func:`pycma_default_popsize`."""
        return pycma_default_popsize(dim)

    def __init__(self, x0, sigma0=1.0, popsize=None, seed=None, *, options=None, nonfinite="raise",
                 lazy_gap_factor=1.0):
        x0 = check_x0(x0)
        super().__init__(x0, sigma0=sigma0, popsize=self.default_popsize(x0.size) if popsize is None else popsize,
                         seed=seed, nonfinite=nonfinite)
        self._options = copy.deepcopy(self._checked_options(options))
        self._lazy_gap_factor = check_positive("lazy_gap_factor", lazy_gap_factor)
        self._build(self._rng)
        # Checked on pycma's evaluated value, which may have been given as an expression string.
        diagonal = self._cma.opts["CMA_diagonal"]
        if diagonal is not True and diagonal:
            raise ValueError(f"options: CMA_diagonal must be True or 0 (got {shown(diagonal)}): after a number of "
                             "diagonal iterations pycma switches to a full-covariance sampler that draws from "
                             "NumPy's global RNG")
        if self._cma.opts["CMA_elitist"] == "initial":
            raise ValueError("options: CMA_elitist='initial' cannot act under ask/tell: it needs f(x0) as es.f0, which "
                             "only cma.fmin evaluates (pycma would warn and ignore it); CMA_elitist=True keeps the "
                             "best solution so far")
        self._stats.update(sigma=float(self._cma.sigma), stop={})
        self._told: list[np.ndarray] = []  # values of every completed tell, replayed on restore
        self._mean_after_tell = np.array(self._cma.mean, dtype=np.float64)

    def _build(self, rng: np.random.Generator) -> None:
        """A fresh pycma object drawing from ``rng``, which becomes the optimizer's generator.

        Built from the saved constructor arguments alone (``self._options`` is a private deep copy, as
        pycma may keep and change what it is given), so every build with a generator in the same
        state is the same pycma object as right after construction.
        """
        opts = copy.deepcopy(self._options)
        sigma_scalar = float(np.max(self._sigma0))
        if np.any(self._sigma0 != sigma_scalar):
            opts["CMA_stds"] = self._sigma0 / sigma_scalar
        opts.update(popsize=self._popsize, seed=np.nan, randn=GeneratorNormal(rng), verbose=-9,
                    verb_disp=0, verb_log=0, signals_filename="")
        self._rng = rng
        self._asked = None  # the solutions of pycma's pending ask, as pycma returned them
        self._cma = cma.CMAEvolutionStrategy(self._x0.copy(), sigma_scalar, opts)
        if self._lazy_gap_factor != 1.0:
            if not hasattr(self._cma.sm, "lazy_update_gap"):
                raise ValueError(f"lazy_gap_factor: pycma's sampler {type(self._cma.sm).__name__} (CMA_diagonal) "
                                 "decomposes nothing; only 1 applies")
            self._cma.sm.lazy_update_gap *= self._lazy_gap_factor
        # TPA's consistency check in tell draws from NumPy's global RNG (pycma's default for d >= 300)
        self._draws_globally = isinstance(self._cma.adapt_sigma, cma.sigma_adaptation.CMAAdaptSigmaTPA)

    @property
    def _es(self) -> cma.CMAEvolutionStrategy:
        """pycma's object; after a tell that failed inside it, rebuilt as it was before that tell (:meth:`_rebuild`)."""
        if self._cma is None:
            self._rebuild()
        return self._cma

    def _rebuild(self) -> None:
        """pycma's object before the failed tell, by replay: a fresh generator from the seed (as the constructor's)
        and a fresh pycma object, told every completed iteration's values again and asked the pending population
        again. The replayed mean and pending population must equal the kept ones, else ``RuntimeError`` (and the
        next use tries again)."""
        self._build(np.random.default_rng(self._seed))
        try:
            mismatch = self._replay_checked()
        except Exception as exc:
            self._cma = None
            raise RuntimeError(f"pycma's state before the failed tell could not be rebuilt by replay "
                               f"({type(exc).__name__}: {exc})") from exc
        if mismatch:
            self._cma = None
            raise RuntimeError(f"pycma's state before the failed tell could not be rebuilt by replay "
                               f"({', '.join(mismatch)} differ)")

    @staticmethod
    def _checked_options(options) -> dict:
        """Validate ``options``; keys are returned in pycma's canonical spelling.

        pycma accepts any case and unique prefixes ("Seed", "rand"), so forbidden keys are
        matched after pycma's own key correction.
        """
        if options is None:
            return {}
        if not isinstance(options, dict):
            raise ValueError(f"options must be a dict of pycma options or None (got {type(options).__name__})")
        canonical = cma.CMAOptions().corrected_key
        checked = {}
        for key, value in options.items():
            name = canonical(key) if isinstance(key, str) else None
            if name is None:
                raise ValueError(f"options: {key!r} is not a pycma option (or an ambiguous prefix of several); "
                                 "see cma.CMAOptions()")
            if name in FORBIDDEN_OPTIONS:
                raise ValueError(f"options may not set {name!r}: {FORBIDDEN_OPTIONS[name]}")
            if name in INERT_OPTIONS:
                raise ValueError(f"options: {name!r} cannot act under ask/tell: {INERT_OPTIONS[name]}")
            if name in checked:
                raise ValueError(f"options sets {name!r} twice (as {key!r} and another spelling)")
            checked[name] = value
        return checked

    @property
    def mean(self) -> np.ndarray:
        """pycma's distribution mean m, mapped to the coordinates of ``x0`` as pycma's own
        ``result.xfavorite`` (the identity unless options set bounds or a transformation)."""
        return np.array(self._es.to_phenotype(self._es.mean), dtype=np.float64)

    @property
    def sigma(self) -> float:
        """pycma's overall step size sigma."""
        return float(self._es.sigma)

    @property
    def stds(self) -> np.ndarray:
        """pycma's ``stds``: sigma times the square root of C's diagonal (``result.stds``, as pycma's own)."""
        return np.array(self._es.stds, dtype=np.float64)

    @classmethod
    def cost_per_iteration(cls, dim: int, popsize: int) -> float:
        """pycma's full covariance: N (d^2 / 12 + 1,200) + 1.2 d^2 + 26,000, not the N d of diagonal methods.

        Sampling (B D z) and the rank-mu update grow like N d^2, the rank-one and path updates like
        d^2 per iteration, and the eigendecomposition (O(d^3), redone lazily every O(d / N)
        iterations) is amortised into both; pycma's Python per candidate (about 18 us: its archive
        of asked solutions, per-solution copies) and per iteration (about 0.4 ms) are the rest,
        which decide COCO's small dimensions. Fitted to one-thread times on d = 2 .. 1000,
        N = 6 .. 100 (``python benchmarks/optimizer_overhead.py --hints``: 0.50 ms at d = 2, N = 6;
        7.6 ms at d = 200, N = 100; 79 ms at d = 1000, N = 50), in the units of the diagonal methods
        (:meth:`sabo.protocol.AskTellOptimizer.cost_per_iteration`).
        """
        return popsize * (dim * dim / 12.0 + 1200.0) + 1.2 * dim * dim + 26_000.0

    def _ask(self) -> np.ndarray:
        # pycma's own arrays go back to its tell, as in pycma's loop; the population the suite sees
        # (and checks the told X against) is a separate array
        # self._cma unless a failed tell dropped it (the property _es then rebuilds it): one Python call less on
        # the hot path, here and in _tell (issue 32)
        es = self._cma if self._cma is not None else self._es
        self._asked = es.ask()
        return np.array(self._asked, dtype=np.float64)

    def _tell(self, values: np.ndarray) -> None:
        # pycma updates its object in place: a tell that fails inside it (anything raised, or a non-finite
        # mean or sigma) drops the object, and the next use rebuilds it by replay (_es, module docstring).
        # The state saved meanwhile never reads pycma's object.
        es = self._cma if self._cma is not None else self._es
        global_state = np.random.get_state() if self._draws_globally else None  # ~0.1 ms: only where needed
        try:
            es.tell(self._asked, values.tolist())
            # a finite m.m shows every coordinate of m finite (NaN and inf propagate); the exact test
            # (_require_finite) only when it is not, or overflowed (issue 32: 0.6 us instead of 1.7 at d = 100)
            if not (math.isfinite(es.sigma) and math.isfinite(es.mean.dot(es.mean))):
                self._require_finite(mean=es.mean, sigma=es.sigma)
            stop = dict(es.stop())  # every tell, as pycma's loop: stop() counts flat-fitness iterations
        except BaseException:
            self._cma = None
            raise
        finally:
            if global_state is not None:
                np.random.set_state(global_state)
        self._asked = None
        self._told.append(values)  # a fresh array of the base class's tell, not the caller's
        self._mean_after_tell = np.array(es.mean, dtype=np.float64)
        self._nit += 1
        self._stats["sigma"] = float(es.sigma)
        self._stats["stop"] = stop

    # ------------------------------------------------------------------ save / restore (replay)
    def state_dict(self) -> dict:
        """:meth:`sabo.protocol.AskTellOptimizer.state_dict`, after rebuilding a pycma object dropped by a failed
        tell: the generator saved is then the one from before that tell, even had pycma drawn from it."""
        if self._cma is None:
            self._rebuild()
        return super().state_dict()

    def _config(self) -> dict:
        return {**super()._config(), "options": _options_as_data(self._options, "options"),
                "lazy_gap_factor": self._lazy_gap_factor}

    @classmethod
    def _check_config(cls, config: dict) -> None:
        """Refuse string-valued options from a saved state: pycma would ``eval()`` them."""
        _options_as_data(config["options"], "state['config']['options']")

    _library = "pycma"

    def _replay_told(self, pending: bool):
        """Tell pycma the saved values again (see :class:`~baselines.replay.TellReplay`); its mean must match."""
        told, mean = self._told, self._mean_after_tell
        self._told, self._nit = [], 0
        try:
            for values in told:
                self._pending = self._ask()
                self._tell(values)
            return (self._ask() if pending else None), (("mean", np.array_equal(self._es.mean, mean)),)
        finally:  # the kept record, also when pycma fails (the replayed one equals it otherwise)
            self._told, self._mean_after_tell = told, mean


def _options_as_data(options: dict, where: str) -> dict:
    """pycma options as a state tree; string values (anywhere) are refused.

    pycma evaluates string-valued options with ``eval()``, so a state may never carry one:
    saving refuses them (pass the evaluated value to ``options`` instead) and so does
    restoring.
    """
    def walk(value, at):
        if isinstance(value, (str, bytes)):
            raise ValueError(f"{at} is a string ({value!r}); pycma evaluates string-valued options with eval(), "
                             "so they cannot be saved in or restored from an optimizer state; "
                             "give the value itself (e.g. a number) instead")
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{at}[{k!r}]")
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{at}[{i}]")
        elif isinstance(value, np.ndarray) and value.dtype.kind in "USO":
            raise ValueError(f"{at} is an array of dtype {value.dtype}; only numeric options can be saved")

    if not isinstance(options, dict):
        raise ValueError(f"{where} must be a dict (got {type(options).__name__})")
    walk(options, where)
    return to_data(options, where)
