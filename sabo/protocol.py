"""The ask/tell protocol shared by SABO and every baseline.

An optimizer proposes a population with :meth:`AskTellOptimizer.ask` and receives the
objective values of exactly that population through :meth:`AskTellOptimizer.tell`.
Cost is counted in function evaluations (``nfev``): every row of every told population
counts once, including centre points an estimator needs.

Mini-batch contract (Algorithm 2 of the paper): when the objective is an average over
data, the caller evaluates *all rows of one ask on one freshly drawn data batch*. Every
estimator in this suite compares values within one ask (e.g. ``F(x_j; B) - F(mu; B)``),
so mixing batches inside an ask adds batch noise to every difference.

Subclasses implement ``_ask()`` (return the next population, float64 ``(n, d)``) and
``_tell(values)`` (update from the values of the pending population). ``_tell`` must
compute the new state in temporaries and assign it only after
:meth:`_require_finite` has accepted it, so a failed update leaves the optimizer as it was.
"""
from __future__ import annotations

import copy
import importlib

import numpy as np

from .validation import check_choice, check_int, check_seed, check_sigma0, check_x0

NONFINITE_POLICIES = ("raise", "worst")


class NonFiniteValueError(ValueError):
    """The objective returned NaN/inf for some candidates (and the policy is to raise)."""


class AskTellOptimizer:
    """Base class: population bookkeeping, input validation, statistics and state save/restore.

    Parameters
    ----------
    x0 : array_like, shape (d,)
        Initial mean (finite).
    sigma0 : float or array_like, shape (d,)
        Initial standard deviation per coordinate (> 0); the covariance is ``diag(sigma0**2)``.
    popsize : int
        Number of sampled candidates per population (>= 2).
    seed : int or None
        Seed of the optimizer's own ``numpy.random.Generator``; ``None`` draws OS entropy and
        records it in ``opt.seed``. Global NumPy random state is never touched.
    nonfinite : {"raise", "worst"}
        What ``tell`` does with NaN/inf values: raise a ``ValueError`` naming the offending
        candidate indices (default), or replace them by the worst finite value of the same
        population (each replacement counted in ``stats["nonfinite_replaced"]``).
    """

    def __init__(self, x0, *, sigma0, popsize, seed, nonfinite="raise"):
        self._x0 = check_x0(x0)
        self._dim = self._x0.size
        self._sigma0 = check_sigma0(sigma0, self._dim)
        self._popsize = check_int("popsize", popsize, minimum=2)
        self._seed = check_seed(seed)
        self._nonfinite = check_choice("nonfinite", nonfinite, NONFINITE_POLICIES)
        self._rng = np.random.default_rng(self._seed)
        self._nfev = 0
        self._nit = 0
        self._pending: np.ndarray | None = None
        self._x_best = self._x0.copy()
        self._f_best = np.inf
        self._stats: dict = {"nonfinite_replaced": 0}

    # ------------------------------------------------------------------ protocol
    def ask(self) -> np.ndarray:
        """Return the next population as a float64 array of shape ``(n, d)``.

        Calling ``ask`` again before ``tell`` returns the same pending population.
        """
        if self._pending is None:
            self._pending = self._ask()
        return self._pending.copy()

    def tell(self, X, values) -> None:
        """Update the optimizer with ``values[j] = F(X[j])`` for the population ``X`` from ``ask``."""
        if self._pending is None:
            raise RuntimeError("tell() was called without a pending ask(); call ask() first")
        X = np.asarray(X, dtype=np.float64)
        if X.shape != self._pending.shape:
            raise ValueError(
                f"X has shape {X.shape}, expected {self._pending.shape}: "
                "tell() takes the population returned by the last ask()"
            )
        if not np.array_equal(X, self._pending):
            raise ValueError("X is not the population returned by the last ask(); tell() takes exactly that array")
        values = self._checked_values(values, X.shape[0])
        self._tell(values)
        j = int(np.argmin(values))
        if values[j] < self._f_best:
            self._f_best = float(values[j])
            self._x_best = X[j].copy()
        self._nfev += X.shape[0]
        self._pending = None

    def _checked_values(self, values, n: int) -> np.ndarray:
        try:
            v = np.array(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"values must be an array of {n} real numbers (got {type(values).__name__})") from exc
        if v.shape != (n,):
            raise ValueError(f"values has shape {v.shape}, expected ({n},): one objective value per row of X")
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size == 0:
            return v
        if self._nonfinite == "raise" or bad.size == n:
            shown = ", ".join(f"{i}: {v[i]}" for i in bad[:10])
            hint = "" if bad.size == n else "; pass nonfinite='worst' to treat such values as the worst of the population"
            raise NonFiniteValueError(f"objective returned non-finite values for candidates {{{shown}}} (index: value){hint}")
        v[bad] = np.max(v[np.isfinite(v)])
        self._stats["nonfinite_replaced"] += int(bad.size)
        return v

    @staticmethod
    def _require_finite(**arrays) -> None:
        """Refuse to commit a state containing NaN/inf; names the offending quantity."""
        for name, value in arrays.items():
            if not np.all(np.isfinite(value)):
                raise FloatingPointError(
                    f"update produced a non-finite {name}; the optimizer state was left unchanged "
                    "(try a smaller lr, or shaping='zscore')"
                )

    def _ask(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _tell(self, values: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ read-only views
    @property
    def dim(self) -> int:
        return self._dim

    @property
    def popsize(self) -> int:
        return self._popsize

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def nfev(self) -> int:
        """Function evaluations told so far (every row of every told population)."""
        return self._nfev

    @property
    def nit(self) -> int:
        """Completed iterations (for SABO, one iteration is two ask/tell rounds)."""
        return self._nit

    @property
    def mean(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def x_best(self) -> np.ndarray:
        """Best evaluated candidate so far (``x0`` before the first tell)."""
        return self._x_best.copy()

    @property
    def f_best(self) -> float:
        """Value of :attr:`x_best` (``inf`` before the first tell)."""
        return self._f_best

    @property
    def stats(self) -> dict:
        """Counters and last-iteration diagnostics (a copy)."""
        return copy.deepcopy(self._stats)

    # ------------------------------------------------------------------ save / restore
    def state_dict(self) -> dict:
        """Everything needed to continue bit-identically, RNG and any pending ask included.

        The dict holds deep copies of the optimizer's attributes (NumPy arrays, scalars,
        schedules; for the pycma adapter also the pycma object) and the RNG's
        ``bit_generator.state``; it pickles, and :meth:`from_state_dict` restores it.
        """
        attrs = {k: copy.deepcopy(v) for k, v in self.__dict__.items() if k != "_rng"}
        return {
            "format": 1,
            "class": f"{type(self).__module__}:{type(self).__qualname__}",
            "attrs": attrs,
            "rng": {"bit_generator": type(self._rng.bit_generator).__name__, "state": self._rng.bit_generator.state},
        }

    @classmethod
    def from_state_dict(cls, state: dict):
        """Rebuild an optimizer saved by :meth:`state_dict` (call on the class or on ``AskTellOptimizer``)."""
        if not isinstance(state, dict) or state.get("format") != 1 or "class" not in state:
            raise ValueError("state must be a dict produced by state_dict() (format 1)")
        module, qualname = state["class"].split(":")
        target = getattr(importlib.import_module(module), qualname)
        if not issubclass(target, cls):
            raise ValueError(f"state was saved from {state['class']}, which is not a {cls.__name__}")
        obj = target.__new__(target)
        obj.__dict__.update(copy.deepcopy(state["attrs"]))
        bit_generator = getattr(np.random, state["rng"]["bit_generator"])()
        bit_generator.state = state["rng"]["state"]
        obj._rng = np.random.Generator(bit_generator)
        obj._on_restore()
        return obj

    def _on_restore(self) -> None:
        """Re-link objects that must share ``self._rng`` after :meth:`from_state_dict` (default: none)."""
