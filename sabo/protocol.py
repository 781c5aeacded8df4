"""The ask/tell protocol shared by SABO and every baseline.

An optimizer proposes a population with :meth:`AskTellOptimizer.ask` and receives the
objective values of exactly that population through :meth:`AskTellOptimizer.tell`.
Cost is counted in function evaluations (``nfev``): every row of every told population
counts once, including centre points an estimator needs.

Mini-batch contract (Algorithm 2 of the paper): when the objective is an average over
data, the caller evaluates *all rows of one ask on one freshly drawn data batch*. Every
estimator in this suite compares values within one ask (e.g. ``F(x_j; B) - F(mu; B)``),
so mixing batches inside an ask adds batch noise to every difference.

Pieces (pycma's ``ask(number)``): ``ask(number)`` hands the pending population out ``number`` rows
at a time (to a pool of workers, or one candidate at a time as Nevergrad asks), each piece is told
on its own and in any order, and the optimizer updates once every row has been told
(:meth:`AskTellOptimizer.ask`). Termination, pycma's way: :meth:`AskTellOptimizer.stop` and
:attr:`AskTellOptimizer.result`, one implementation for every optimizer.

Subclasses implement ``_ask()`` (return the next population, float64 ``(n, d)`` without NaN,
which ``ask()`` checks) and ``_tell(values)`` (update from the values of the pending
population; ``values`` is a fresh float64 array, the optimizer's to keep). A failed ``_tell``
must leave the optimizer as it was: compute the new state in temporaries and assign it only
after :meth:`_require_finite` has accepted it (the CMA-ES adapter, whose library updates in
place, instead rebuilds the library's object by replay after a failure).

Saved states are data only (:meth:`AskTellOptimizer.state_dict`, :mod:`sabo.serialization`):
restoring finds the class through the registry :data:`OPTIMIZERS` and validates every entry
(:mod:`sabo.state`), so a checkpoint file can neither name code to import nor smuggle objects.
"""
from __future__ import annotations

import copy
import inspect
import math
import re
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .state import Array, Integer, Real, Stats, check_keys, check_tree, to_data, tree_equal
from .validation import as_real_array, check_choice, check_int, check_positive, check_seed, check_sigma0, check_x0

NONFINITE_POLICIES = ("raise", "worst")

#: Population-size limits of every optimizer: at most ``MAX_POPSIZE`` candidates per
#: population and at most ``MAX_POPULATION_ELEMENTS`` numbers (popsize * d) in one population
#: array, i.e. 2 GiB of float64. Each optimizer holds a few arrays of that size (samples,
#: population, pending copy), and pycma builds Python lists of length popsize; beyond these
#: limits construction would hang or exhaust memory instead of failing with a message.
MAX_POPSIZE = 10**6
MAX_POPULATION_ELEMENTS = 2**28

#: The fixed part of one ask/tell round in :meth:`AskTellOptimizer.cost_per_iteration`'s units
#: (one coordinate of one sample): measured 70-100 us per round for INGO, BES, MMES and SABO at
#: d = 2 (``benchmarks/optimizer_overhead.py --hints``), the work of about 5,000 coordinates.
ROUND_OVERHEAD = 5000.0

#: Version of the layout written by :meth:`AskTellOptimizer.state_dict` (3: the pieces of a pending population
#: told so far, the spreads of the last told population and the evaluation of the best point).
STATE_FORMAT = 3

#: :meth:`AskTellOptimizer.stop`'s default tolerances: pycma's ``tolfun`` and ``tolx``.
DEFAULT_FTOL = 1e-11
DEFAULT_XTOL = 1e-11

_COLOR = re.compile(r"#[0-9A-Fa-f]{6}")

#: Registry of optimizer classes by their ``name`` (filled by ``AskTellOptimizer.__init_subclass__``);
#: the only way :meth:`AskTellOptimizer.from_state_dict` turns a saved name into a class.
OPTIMIZERS: dict[str, type] = {}

#: Bit generators a saved random state may name, mapped to their NumPy classes (an explicit
#: table: a name read from a file is never looked up as an arbitrary attribute).
BIT_GENERATORS = {"PCG64": np.random.PCG64, "PCG64DXSM": np.random.PCG64DXSM, "MT19937": np.random.MT19937,
                  "Philox": np.random.Philox, "SFC64": np.random.SFC64}

_STATE_KEYS = ("format", "optimizer", "config", "state", "rng")

_FLOAT64 = np.dtype(np.float64)

#: :meth:`AskTellOptimizer.tell` compares a told population with the pending one by their bytes first up to this
#: many numbers (a 512 KiB copy of each); larger ones, number by number only.
_BYTES_COMPARED = 2**16


class NonFiniteValueError(ValueError):
    """The objective returned NaN/inf for some candidates (and the policy is to raise)."""


class Result(NamedTuple):
    """:attr:`AskTellOptimizer.result`, with the fields of pycma's ``CMAEvolutionStrategyResult``."""

    xbest: np.ndarray
    fbest: float
    evals_best: int
    evaluations: int
    iterations: int
    xfavorite: np.ndarray
    stds: np.ndarray | None
    stop: dict


class AskTellOptimizer:
    """Base class: population bookkeeping, input validation, statistics and state save/restore.

    Parameters
    ----------
    x0 : array_like, shape (d,)
        Initial mean (finite).
    sigma0 : float or array_like, shape (d,)
        Initial standard deviation per coordinate (> 0); the covariance is ``diag(sigma0**2)``.
    popsize : int
        Number of sampled candidates per population, in [``min_popsize``, :data:`MAX_POPSIZE`]
        (``min_popsize`` is 2 unless the class declares otherwise), with popsize * d <=
        :data:`MAX_POPULATION_ELEMENTS`.
    seed : int or None
        Seed of the optimizer's own ``numpy.random.Generator``; ``None`` draws OS entropy and
        records it in ``opt.seed``. Global NumPy random state is never touched.
    nonfinite : {"raise", "worst"}
        What ``tell`` does with NaN/inf values: raise a ``ValueError`` naming the offending
        candidate indices (default), or replace them by the worst finite value of the same
        population (each replacement counted in ``stats["nonfinite_replaced"]``).

    Notes
    -----
    A concrete optimizer declares its registry name as the class attribute ``name`` (e.g.
    ``name = "sabo"``); declaring it registers the class in :data:`OPTIMIZERS`, through
    which saved states are restored. It declares its evolving state in ``_STATE_FIELDS``
    (:mod:`sabo.state`) and its constructor arguments in ``_config()``. What a caller needs to
    know about a method without running it is declared on the class too, so that no caller
    compares method names: ``rounds_per_iteration`` (ask/tell rounds per iteration),
    :meth:`rows_per_ask` and :meth:`cost_per_iteration` (a relative cost hint, as Nevergrad's
    class-level capabilities), :attr:`min_popsize` (whether one candidate per population works), and
    how figures and reports show it (:attr:`display_name`, :attr:`color`).
    """

    name: str | None = None

    #: The smallest ``popsize`` the method works with. 2 by default: every estimator of this suite compares
    #: candidates within one population (z-scores, ranks, differences). A method that works with one candidate
    #: per population (a (1+1)-ES) declares 1.
    min_popsize: int = 2

    #: How figures and reports name and colour the method (:mod:`replication.figures`): a plain-text name and a
    #: colour ``"#RRGGBB"``. None: the registry name, and a colour of the fallback palette.
    display_name: str | None = None
    color: str | None = None

    #: Revision of this method's algorithm: bump it when a change alters the results it computes
    #: (same seed, different numbers). It is part of every run's ``code_version``
    #: (:func:`replication.config.code_version`), so a study recomputes exactly the runs of the
    #: changed method and keeps everyone else's records.
    revision: int = 1

    @classmethod
    def default_popsize(cls, dim: int) -> int:
        """The population size ``popsize=None`` stands for at dimension ``dim``.

        Declared on the class so that a study can cost a run without building it
        (:mod:`replication.costs`). The base class has no default and raises ``ValueError``."""
        raise ValueError(f"{cls.__qualname__} has no default population size; pass popsize")

    #: Ask/tell rounds that make one iteration (one update of the search distribution). SABO
    #: has two (perturbation and update round); budgets in iterations cost this many asks.
    rounds_per_iteration: int = 1

    #: A *method family*: the constructor parameter that a registry name ``"<name>:<member>"`` sets
    #: to ``member`` (``baselines.make("nevergrad:NGOpt", ...)`` builds the class named
    #: ``nevergrad`` with ``algorithm="NGOpt"``). None: the class is one method. Saved states name
    #: the class (``name``); the member is a constructor argument in their ``config``.
    family_parameter: str | None = None

    @classmethod
    def check_member(cls, member: str) -> None:
        """Refuse a family member ``member`` that the family does not have (``ValueError`` naming the valid ones).

        Called when a name ``"<name>:<member>"`` is resolved, before anything is built; the
        default accepts any member (the constructor then validates the argument)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._check_declarations()
        name = cls.__dict__.get("name")
        if name is None:
            return
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"{cls.__qualname__}.name must be an identifier string (got {name!r})")
        known = OPTIMIZERS.get(name)
        if known is not None and known is not cls:
            raise ValueError(f"optimizer name {name!r} of {cls.__module__}.{cls.__qualname__} is already "
                             f"registered for {known.__module__}.{known.__qualname__}")
        OPTIMIZERS[name] = cls

    @classmethod
    def _check_declarations(cls) -> None:
        """Refuse (``ValueError`` naming the class) a ``min_popsize``, ``display_name`` or ``color`` of a wrong kind."""
        own = cls.__dict__
        where = f"{cls.__module__}.{cls.__qualname__}"
        if "min_popsize" in own:
            value = own["min_popsize"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{where}.min_popsize must be an integer >= 1 (got {value!r})")
        if own.get("display_name") is not None:
            value = own["display_name"]
            if not isinstance(value, str) or not value.strip() or not value.isprintable():
                raise ValueError(f"{where}.display_name must be a non-empty one-line string (got {value!r})")
        if own.get("color") is not None:
            value = own["color"]
            if not isinstance(value, str) or not _COLOR.fullmatch(value):
                raise ValueError(f"{where}.color must be a colour '#RRGGBB' (got {value!r})")

    def __init__(self, x0, *, sigma0, popsize, seed, nonfinite="raise"):
        self._x0 = check_x0(x0)
        self._dim = self._x0.size
        self._sigma0 = check_sigma0(sigma0, self._dim)
        self._popsize = check_int("popsize", popsize, minimum=type(self).min_popsize, maximum=MAX_POPSIZE)
        if self._popsize * self._dim > MAX_POPULATION_ELEMENTS:
            raise ValueError(f"popsize * d must be <= {MAX_POPULATION_ELEMENTS} (2**28, 2 GiB of float64 per "
                             f"population); got popsize {self._popsize} * d {self._dim} = {self._popsize * self._dim}")
        self._seed = check_seed(seed)
        self._nonfinite = check_choice("nonfinite", nonfinite, NONFINITE_POLICIES)
        self._rng = np.random.default_rng(self._seed)
        self._nfev = 0
        self._nit = 0
        self._pending: np.ndarray | None = None
        self._handed = 0  # rows of the pending population handed out by ask(number)
        self._told_rows: np.ndarray | None = None  # 1 where a piece told the row's value (with ask(number) only)
        self._piece_values: np.ndarray | None = None  # the values those pieces told
        self._x_best = self._x0.copy()
        self._f_best = np.inf
        self._evals_best = 0
        # the last told population and the span of its values: its extent computed when asked for (_last_spreads)
        self._last_told: tuple[np.ndarray, float] | None = None
        self._spreads = np.full(2, np.inf)
        self._stats: dict = {"nonfinite_replaced": 0}

    # ------------------------------------------------------------------ protocol
    def ask(self, number: int | None = None) -> np.ndarray:
        """Return the next population as a float64 array of shape ``(n, d)``, n >= 1, free of NaN.

        Calling ``ask`` again before ``tell`` returns the same pending population. What the
        subclass's ``_ask()`` returns is checked once, here (:meth:`_checked_population`): a list
        or a float32 array is refused, not converted.

        ``ask(number)`` (pycma's ``ask(number)``, for a pool of ``number`` workers or Nevergrad's one
        candidate at a time) hands the pending population out in pieces: each call returns the next
        rows not handed out yet, at most ``number`` of them (fewer at the population's end). Each
        piece is told on its own, ``tell(piece, values)``, in any order; the optimizer is updated
        when every row has been told (``nfev`` counts a population then). The population is one
        sample: its rows are not available again once handed out, and its size is the optimizer's,
        so asking while every row is out raises ``RuntimeError`` (the next population depends on
        the values still to come); plain ``ask()`` is refused while pieces are out.
        """
        if self._pending is None:
            X = self._ask()
            # what _checked_population requires, tested here at less cost (issue 32): no Python call, the dtype
            # compared with a dtype object (!= np.float64 converts the type at every call), and NaN found by argmin,
            # which takes NaN for the minimum (the first NaN's index): one index search and no boolean array of X's
            # size (0.8 us where np.minimum.reduce takes 1.6, at N = 17, d = 100). Only a population that fails
            # goes there, to be refused with a message.
            if not (isinstance(X, np.ndarray) and X.dtype == _FLOAT64 and X.ndim == 2 and X.shape[0] >= 1
                    and X.shape[1] == self._dim and not math.isnan(X.item(X.argmin()))):
                self._checked_population(X)
            self._pending = X
        if number is None:
            if self._handed:
                raise RuntimeError(f"ask() returns whole populations, but {self._handed} of the "
                                   f"{self._pending.shape[0]} rows of the pending one were handed out by ask(number): "
                                   "ask(number) hands out the rest")
            return self._pending.copy()
        number = check_int("number", number, minimum=1)
        rows = self._pending.shape[0]
        if self._handed == rows:
            told = 0 if self._told_rows is None else int(self._told_rows.sum())
            raise RuntimeError(f"all {rows} rows of the pending population are handed out and {rows - told} of them "
                               "are not told yet: tell their values before asking for more (the next population "
                               "depends on them)")
        if self._handed == 0:
            self._told_rows, self._piece_values = np.zeros(rows, dtype=np.int64), np.zeros(rows)
        piece = self._pending[self._handed:self._handed + number].copy()
        self._handed += piece.shape[0]
        return piece

    def _checked_population(self, X) -> np.ndarray:
        """``X``, what ``_ask()`` returned, if it keeps :meth:`ask`'s promise; else one ``TypeError``/``ValueError``.

        Required: a ``numpy.ndarray`` of dtype float64 with 2 dimensions, d columns, at least one
        row, and no NaN. The number of rows is not checked against one attribute: it differs
        between asks of one optimizer (MMES's first ask adds x0, a ``baseline="center"`` ask the
        centre). Infinities pass: a sample drawn from a finite state can overflow (MMES near the
        float64 limit), the objective's value there is the caller's to give, and the update that
        follows is refused by :meth:`_require_finite` if it would not be finite. Anything else is
        refused, not converted: a list or a float32 array would be a silent copy or rounding of
        what the subclass computed, and a NaN is no point at all (and would make ``tell`` refuse
        the very population it was given, as NaN != NaN); refusing names the subclass's ``_ask``
        as the place to fix.

        :meth:`ask` tests the same requirements inline, where it costs less, and calls this only for a
        population that fails them.
        """
        d = self._dim
        required = (f"{type(self).__name__}._ask() must return a numpy float64 array of shape (n, {d}) "
                    "with n >= 1 and no NaN")
        if not isinstance(X, np.ndarray):
            raise TypeError(f"{required}; it returned a {type(X).__name__}")
        if X.dtype != np.float64 or X.ndim != 2 or X.shape[0] < 1 or X.shape[1] != d:
            raise TypeError(f"{required}; it returned an array of dtype {X.dtype} and shape {X.shape}")
        bad = np.flatnonzero(np.any(np.isnan(X), axis=1))
        if bad.size:
            raise ValueError(f"{required}; it returned an array of shape {X.shape} with NaN in rows "
                             f"{bad[:10].tolist()}")
        return X

    def tell(self, X, values) -> None:
        """Update the optimizer with ``values[j] = F(X[j])`` for the population ``X`` from ``ask``.

        ``X`` is the whole pending population, or, once :meth:`ask` handed it out in pieces, rows of it
        handed out and not told yet (a piece, in any order); the update happens when the last row is told.
        A refused tell (wrong rows, wrong values, a failed update) changes nothing.
        """
        if self._pending is None:
            raise RuntimeError("tell() was called without a pending ask(); call ask() first")
        X = np.asarray(X, dtype=np.float64)
        pending = self._pending
        if not self._handed or (X.shape == pending.shape and not self._told_rows.any()):
            if X.shape != pending.shape:
                raise ValueError(
                    f"X has shape {X.shape}, expected {pending.shape}: "
                    "tell() takes the population returned by the last ask()"
                )
            # the pending population is free of NaN (ask() and restoring refuse it), so equality is exact:
            # an X with a NaN is never it. Equal bytes are equal numbers (0.9 us instead of 2.4 at N = 17,
            # d = 100: issue 32), for populations small enough that two copies of their bytes cost nothing;
            # different bytes may still be equal numbers (-0.0 == 0.0), which the exact test accepts.
            if ((pending.size <= _BYTES_COMPARED and X.tobytes() == pending.tobytes())
                    or (X == pending).all()):
                self._tell_population(pending, *self._checked_values(values, X.shape[0]))
                return
            if not self._handed:
                raise ValueError("X is not the population returned by the last ask(); tell() takes exactly that array")
        rows = self._piece_rows(X)
        values = as_real_array("values", values)
        if values.shape != (rows.size,):
            raise ValueError(f"values has shape {values.shape}, expected ({rows.size},): one objective value per "
                             "row of X")
        told, piece_values = self._told_rows.copy(), self._piece_values.copy()
        told[rows], piece_values[rows] = 1, values
        if self._nonfinite == "raise":  # refused now, naming the rows in the population, rather than at its end
            self._checked_values(np.where(told == 1, piece_values, 0.0), pending.shape[0])
        if told.all():
            self._tell_population(pending, *self._checked_values(piece_values, pending.shape[0]))
        else:
            self._told_rows, self._piece_values = told, piece_values

    def _piece_rows(self, X: np.ndarray) -> np.ndarray:
        """The rows of the pending population that ``X``'s rows are, each a handed-out row not told yet (the first
        such row equal to it); ``ValueError`` for a row that is none of them."""
        pending = self._pending
        if X.ndim != 2 or X.shape[1] != self._dim or X.shape[0] < 1:
            raise ValueError(f"X has shape {X.shape}; tell() takes rows of the pending population, shape (k, "
                             f"{self._dim}) with k >= 1, as ask(number) handed them out")
        free = np.flatnonzero(self._told_rows[:self._handed] == 0)
        rows = []
        for i, x in enumerate(X):
            match = [r for r in free[(pending[free] == x).all(axis=1)] if r not in rows]
            if not match:
                raise ValueError(f"X[{i}] is not a row of the pending population handed out by ask(number) and not "
                                 "told yet; tell() takes exactly such rows")
            rows.append(match[0])
        return np.array(rows, dtype=np.int64)

    def _tell_population(self, X: np.ndarray, values: np.ndarray, j: int, f_spread: float) -> None:
        """The update from the checked values of the whole pending population ``X``, then the bookkeeping
        (``j``, the index of the smallest value, and ``f_spread``, max - min: :meth:`_checked_values`)."""
        self._tell(values)
        self._nfev += X.shape[0]
        if values.item(j) < self._f_best:  # item: the Python float, float(values[j]) without a NumPy scalar
            self._f_best = values.item(j)
            self._x_best = X[j].copy()
            self._evals_best = self._nfev
        # the spreads' array is made when they are asked for (_last_spreads), not at every tell
        self._last_told = (X, f_spread)
        self._pending, self._handed, self._told_rows, self._piece_values = None, 0, None, None

    def _checked_values(self, values, n: int) -> tuple[np.ndarray, int, float]:
        """``values`` as a fresh float64 array of ``n`` finite values (non-finite ones refused, or replaced under
        ``nonfinite="worst"``), the index of its smallest value (the first) and its span max - min."""
        # a float64 array (what a vectorised objective returns) is copied as as_real_array would copy it, without
        # its checks for other kinds (issue 32)
        if type(values) is np.ndarray and values.dtype == _FLOAT64:
            v = values.copy()
        else:
            v = as_real_array("values", values)
        if v.shape != (n,):
            raise ValueError(f"values has shape {v.shape}, expected ({n},): one objective value per row of X")
        # argmin and argmax take NaN for the extreme (the first NaN's index), so the extremes are finite exactly
        # when every value is, and the tell needs them anyway: two index searches instead of np.isfinite, np.max,
        # np.min and a later argmin (0.8 us instead of 7.6 at N = 17: issue 32)
        j, k = int(v.argmin()), int(v.argmax())
        lowest, highest = v.item(j), v.item(k)  # item: Python floats, no NumPy scalars
        if not (math.isfinite(lowest) and math.isfinite(highest)):
            v = self._replaced_nonfinite(v)
            j, k = int(v.argmin()), int(v.argmax())
            lowest, highest = v.item(j), v.item(k)
        # np.max(v) - np.min(v): ties of equal values differ only in the sign of a zero, which shows in the
        # difference only when every value is a zero (of either sign); that span is taken from np.max and np.min
        return v, j, (highest - lowest if highest != lowest else float(np.max(v) - np.min(v)))

    def _replaced_nonfinite(self, v: np.ndarray) -> np.ndarray:
        """``v`` with its NaN/inf replaced by its worst finite value (``nonfinite="worst"``), else
        ``NonFiniteValueError`` naming them."""
        n = v.size
        finite = np.isfinite(v)
        bad = np.flatnonzero(~finite)
        if self._nonfinite == "raise" or bad.size == n:
            shown = ", ".join(f"{i}: {v[i]}" for i in bad[:10])
            hint = ("" if bad.size == n
                    else "; pass nonfinite='worst' to treat such values as the worst of the population")
            raise NonFiniteValueError(f"objective returned non-finite values for candidates {{{shown}}} "
                                      f"(index: value){hint}")
        v[bad] = np.max(v[finite])
        self._stats["nonfinite_replaced"] += int(bad.size)
        return v

    # ------------------------------------------------------------------ termination, pycma's way
    def stop(self, *, ftol: float | None = DEFAULT_FTOL, xtol: float | None = DEFAULT_XTOL,
             max_iter: int | None = None, max_nfev: int | None = None) -> dict:
        """The termination conditions that hold, as pycma's ``es.stop()``: ``{condition: threshold}``, empty while
        none does (``while not opt.stop(): X = opt.ask(); opt.tell(X, F(X))``).

        - ``"ftol"``: the values of the last told population span at most ``ftol`` (max - min; pycma's
          ``tolfun``, and the ``fatol`` of scipy's Nelder-Mead on its simplex);
        - ``"xtol"``: the last told population spans at most ``xtol`` in every coordinate (max - min over its
          rows: the search has contracted around its mean to that width; pycma's ``tolx``, Nelder-Mead's
          ``xatol``);
        - ``"max_iter"``, ``"max_nfev"``: ``nit``/``nfev`` reached the given budget.

        ``None`` leaves a condition out; nothing holds before the first told population. The spreads are
        measured on the population as told (non-finite values replaced under ``nonfinite="worst"``), so the
        same for every method; a method whose population does not contract (BES's fixed spacing) stops on
        ``ftol`` or a budget only.
        """
        conditions = {}
        f_spread, x_extent = self._last_spreads
        if ftol is not None and f_spread <= check_positive("ftol", ftol, allow_zero=True):
            conditions["ftol"] = ftol
        if xtol is not None and x_extent <= check_positive("xtol", xtol, allow_zero=True):
            conditions["xtol"] = xtol
        if max_iter is not None and self._nit >= check_int("max_iter", max_iter, minimum=0):
            conditions["max_iter"] = max_iter
        if max_nfev is not None and self._nfev >= check_int("max_nfev", max_nfev, minimum=0):
            conditions["max_nfev"] = max_nfev
        return conditions

    @property
    def result(self) -> Result:
        """pycma's ``es.result``: best point and value, the evaluations when it was found, evaluations,
        iterations, the favourite (:attr:`mean`), the per-coordinate standard deviations (:attr:`stds`) and
        :meth:`stop` with its default tolerances."""
        return Result(self.x_best, self._f_best, self._evals_best, self._nfev, self._nit, self.mean, self.stds,
                      self.stop())

    @property
    def stds(self) -> np.ndarray | None:
        """The search distribution's per-coordinate standard deviations (pycma's ``result.stds``), where the
        method has one; None here."""
        return None

    @property
    def _last_spreads(self) -> np.ndarray:
        """[span of the values, largest span of a coordinate] of the last told population (inf before any);
        the coordinates' span is computed when first asked for, not at every tell (an O(N d) pass)."""
        if self._last_told is not None:
            X, f_spread = self._last_told
            extent = np.max(X, axis=0) - np.min(X, axis=0)
            # inf - inf (an overflowed sample) is nan: no extent
            self._spreads = np.array([f_spread, float(np.max(np.where(np.isnan(extent), np.inf, extent)))])
            self._last_told = None
        return self._spreads

    @_last_spreads.setter
    def _last_spreads(self, value: np.ndarray) -> None:
        self._spreads, self._last_told = value, None

    @staticmethod
    def _require_finite(**arrays) -> None:
        """Refuse to commit a state containing NaN/inf; names the offending quantity."""
        for name, value in arrays.items():
            # a float64 array whose sum is finite is finite (NaN and inf propagate; 1.2 us instead of 1.7 at
            # d = 100: issue 32); the exact test otherwise (a sum that overflowed, another type)
            if isinstance(value, float):
                if math.isfinite(value):
                    continue
            elif ((type(value) is np.ndarray and value.dtype == _FLOAT64
                   and math.isfinite(np.add.reduce(value, axis=None))) or np.isfinite(value).all()):
                continue
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
    def evals_per_iteration(self) -> int:
        """Function evaluations of the next iteration: the rows of its ``rounds_per_iteration`` asks.

        Declared here so that callers (the run engine, budgets in evaluations) never need to
        know which method they drive; an optimizer whose asks differ in size overrides it.
        """
        return self.rounds_per_iteration * self._ask_rows()

    @classmethod
    def rows_per_ask(cls, popsize: int, params: Mapping[str, object]) -> int:
        """Rows of one ask of ``cls(popsize=popsize, **params)`` after its first iteration: ``popsize``.

        Declared on the class so that a run is costed without building it
        (:func:`replication.costs.evaluations_per_iteration`); ``params`` are constructor keyword
        arguments, the signature's defaults where omitted. A method whose asks add rows to the N
        samples overrides it: BES's centre point, INGO's and SABO's with ``baseline="center"``.
        """
        return int(popsize)

    @classmethod
    def cost_per_iteration(cls, dim: int, popsize: int) -> float:
        """Relative work of the optimizer's own ask/tell in one iteration, without the objective.

        A hint for scheduling (start the longest runs first) and, until a method's runs are
        measured, for the progress bar's ETA, in units of one coordinate of one sample (about
        0.015 us for the built-in diagonal methods on one core). Sampling and a diagonal or
        low-rank update touch each coordinate of each row a bounded number of times; each ask/tell
        round also costs a fixed :data:`ROUND_OVERHEAD` of Python and validation, which decides
        the small runs (COCO's d = 2 .. 40). So the default is ``rounds_per_iteration * (popsize *
        dim + ROUND_OVERHEAD)``. A method whose work grows faster (full-covariance CMA-ES: N d^2)
        overrides it. Studies add their objective's cost per evaluation (:mod:`replication.costs`);
        ``python benchmarks/optimizer_overhead.py --hints`` measures the hints against run times.
        """
        return float(cls.rounds_per_iteration * (popsize * dim + ROUND_OVERHEAD))

    @classmethod
    def cost_of_iterations(cls, dim: int, popsize: int, iterations: int, params: Mapping[str, object]) -> float:
        """Relative work of ``iterations`` iterations of ``cls(popsize=popsize, **params)`` at dimension ``dim``,
        in :meth:`cost_per_iteration`'s units: ``iterations * cost_per_iteration(dim, popsize)``.

        What a study's run is costed by (:func:`replication.costs.run_cost`). A method whose
        iterations grow costlier through a run (a GP's data: TuRBO-1) or whose parameters change
        its work overrides it; ``params`` are constructor keyword arguments, the signature's
        defaults where omitted.
        """
        return float(iterations) * cls.cost_per_iteration(dim, popsize)

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
    #: Evolving state saved by :meth:`state_dict`, in load order (a field's shape may depend on
    #: one loaded before it). Subclasses prepend their own fields to their parent's.
    _STATE_FIELDS = (
        Integer("nfev"),
        Integer("nit"),
        Real("f_best", allow_posinf=True),
        Array("x_best", lambda o: (o._dim,), finite="no_nan"),
        Array("pending", lambda o: (o._ask_rows(), o._dim), finite="no_nan", optional=True),  # as ask() promises
        Integer("handed", maximum=lambda o: 0 if o._pending is None else o._pending.shape[0]),
        Array("told_rows", lambda o: (0 if o._pending is None else o._pending.shape[0],), integer=True, minimum=0,
              optional=True),
        Array("piece_values", lambda o: (0 if o._pending is None else o._pending.shape[0],), finite=False,
              optional=True),
        Integer("evals_best"),
        Array("spreads", lambda o: (2,), finite="no_nan", minimum=0, attr="_last_spreads"),
        Stats("stats"),
    )

    def _ask_rows(self) -> int:
        """Rows of the next ask (checked against a restored pending population): :meth:`rows_per_ask`.

        An optimizer whose first ask differs from the later ones (MMES evaluates x0 in it) overrides this."""
        return self.rows_per_ask(self._popsize, self._config())

    def _config(self) -> dict:
        """Constructor keyword arguments, as data, that rebuild this optimizer's configuration."""
        return {"x0": self._x0.copy(), "sigma0": self._sigma0.copy(), "popsize": self._popsize,
                "seed": self._seed, "nonfinite": self._nonfinite}

    def state_dict(self) -> dict:
        """Everything needed to continue bit-identically, RNG and any pending ask included, as data.

        The result is a *state tree* (dicts with str keys, lists, str, int, float, bool, None
        and numeric NumPy arrays, no objects), which :func:`sabo.serialization.dumps` writes
        without pickle::

            {"format": 2, "optimizer": <registry name>, "config": <constructor arguments>,
             "state": <evolving state: counters, mean, covariance, pending ask, stats, ...>,
             "rng": {"bit_generator": "PCG64", "state": <bit_generator.state>}}

        Schedules are saved in their mapping form ``{"kind": ..., **fields}``.
        """
        cls = type(self)
        name = cls.__dict__.get("name")
        if name is None or OPTIMIZERS.get(name) is not cls:
            raise TypeError(f"{cls.__qualname__} declares no registry name of its own; set the class attribute "
                            "name = '...' to make its state saveable")
        bit_generator = self._rng.bit_generator
        bg_name = type(bit_generator).__name__
        if BIT_GENERATORS.get(bg_name) is not type(bit_generator):
            raise TypeError(f"the random generator's bit generator {bg_name} cannot be saved "
                            f"(supported: {sorted(BIT_GENERATORS)})")
        return {
            "format": STATE_FORMAT,
            "optimizer": name,
            "config": to_data(self._config(), "config"),
            "state": {f.key: f.dump(getattr(self, f.attr)) for f in cls._STATE_FIELDS},
            "rng": {"bit_generator": bg_name, "state": to_data(bit_generator.state, "rng")},
        }

    @classmethod
    def from_state_dict(cls, state: dict):
        """Rebuild an optimizer saved by :meth:`state_dict` (call on the class or on ``AskTellOptimizer``).

        The class is looked up by name in :data:`OPTIMIZERS` only (nothing named in the data
        is ever imported) and must be a subclass of the class this is called on. The
        configuration goes through the class's constructor, so it is validated as user input
        is; every field of the evolving state is then checked (type, dtype, shape against d
        and the population size, finiteness, range) and the random state is checked against
        :data:`BIT_GENERATORS`. Anything wrong raises ``ValueError`` naming the entry.
        """
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            got = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"state must be a dict produced by state_dict() (format {STATE_FORMAT}; got {got!r})")
        check_keys("state", state, _STATE_KEYS)
        name = state["optimizer"]
        target = OPTIMIZERS.get(name) if isinstance(name, str) else None
        if target is None:
            raise ValueError(f"state['optimizer'] names an unknown optimizer {name!r}; known: {sorted(OPTIMIZERS)} "
                             "(an optimizer is known once the module defining it is imported: `import baselines` for "
                             "the suite's methods; an installed plugin's after `baselines.load_plugins()`)")
        if not issubclass(target, cls):
            raise ValueError(f"state was saved from optimizer {name!r} ({target.__qualname__}), "
                             f"which is not a {cls.__qualname__}")
        config = state["config"]
        params = [p for p in inspect.signature(target).parameters]
        check_keys("state['config']", config, params)
        check_tree("state['config']", config)
        target._check_config(config)
        try:
            obj = target(**config)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"state['config']: {exc}") from exc
        fields = target._STATE_FIELDS
        check_keys("state['state']", state["state"], [f.key for f in fields])
        for f in fields:
            setattr(obj, f.attr, f.load(state["state"][f.key], obj, f"state['state'][{f.key!r}]"))
        obj._check_restored_pieces()
        obj._finish_restore()
        obj._adopt_rng(generator_from_state(state["rng"]))
        return obj

    @classmethod
    def _check_config(cls, config: dict) -> None:
        """Refuse saved constructor arguments that are valid for users but unsafe from a file (default: none)."""

    def _check_restored_pieces(self) -> None:
        """The base class's cross-field checks: pieces of the pending population as :meth:`ask` hands them out
        and :meth:`tell` records them, and the best point found within the evaluations made."""
        where = "state['state']"
        pieces = self._told_rows is not None
        if (self._handed > 0) != pieces or pieces != (self._piece_values is not None):
            raise ValueError(f"{where}: 'told_rows' and 'piece_values' must be arrays exactly when 'handed' > 0 "
                             f"(handed {self._handed})")
        if self._told_rows is not None:
            if np.any(self._told_rows > 1) or np.any(self._told_rows[self._handed:]) or self._told_rows.all():
                raise ValueError(f"{where}['told_rows'] must be 0 or 1, 1 only among the {self._handed} rows handed "
                                 "out, and not 1 in every row (a population told in full is no longer pending)")
        if self._evals_best > self._nfev:
            raise ValueError(f"{where}['evals_best'] must be <= nfev = {self._nfev} (got {self._evals_best})")

    def _finish_restore(self) -> None:
        """Cross-field checks and derived quantities after the fields are loaded (default: none)."""

    def _adopt_rng(self, rng: np.random.Generator) -> None:
        """Continue with the restored generator (CMA-ES instead replays and compares)."""
        self._rng = rng


def checked_mean(opt: AskTellOptimizer) -> np.ndarray:
    """``opt.mean``, refused with one ``TypeError`` naming the class unless it is a numpy float64 array of shape (d,).

    For the drivers of the protocol (:func:`sabo.run`, the suite's run engine), which score the mean."""
    mean = opt.mean
    if not (isinstance(mean, np.ndarray) and mean.dtype == np.float64 and mean.shape == (opt.dim,)):
        got = (f"an array of dtype {mean.dtype} and shape {mean.shape}" if isinstance(mean, np.ndarray)
               else f"a {type(mean).__name__}")
        raise TypeError(f"{type(opt).__name__}.mean must be a numpy float64 array of shape ({opt.dim},), one "
                        f"entry per coordinate of x0; it is {got}")
    return mean


def check_iteration_advanced(opt: AskTellOptimizer, rounds: int) -> None:
    """Refuse (``RuntimeError`` naming the class) an optimizer whose ``nit`` stayed put for ``rounds`` ask/tell
    rounds in a row, ``rounds >= rounds_per_iteration``: it does not count iterations, and a driver waiting for
    ``max_iter`` would loop forever (:func:`sabo.run`, the suite's run engine)."""
    if rounds >= opt.rounds_per_iteration:
        name = type(opt).__name__
        raise RuntimeError(f"{name}.nit did not advance in {rounds} ask/tell round(s) in a row (it stayed at "
                           f"{opt.nit}), though one iteration takes {name}.rounds_per_iteration = "
                           f"{opt.rounds_per_iteration}: its _tell must add 1 to self._nit when an iteration completes")


def generator_from_state(spec, where: str = "state['rng']") -> np.random.Generator:
    """A ``numpy.random.Generator`` from a saved ``{"bit_generator": name, "state": ...}``, validated.

    The bit generator is taken from :data:`BIT_GENERATORS` only; ``where`` names the entry in messages.
    """
    check_keys(where, spec, ("bit_generator", "state"))
    name = spec["bit_generator"]
    if not isinstance(name, str) or name not in BIT_GENERATORS:
        raise ValueError(f"{where}['bit_generator'] must be one of {sorted(BIT_GENERATORS)} (got {name!r})")
    inner = spec["state"]
    if not isinstance(inner, dict) or inner.get("bit_generator") != name:
        raise ValueError(f"{where}['state'] must be a {name} state dict with 'bit_generator': {name!r}")
    check_tree(f"{where}['state']", inner)
    bit_generator = BIT_GENERATORS[name]()
    try:
        bit_generator.state = inner
    except (TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
        raise ValueError(f"{where}['state'] is not a valid {name} state ({type(exc).__name__}: {exc})") from exc
    if not tree_equal(to_data(bit_generator.state), inner):
        raise ValueError(f"{where}['state'] is not a valid {name} state (NumPy does not read it back unchanged)")
    return np.random.Generator(bit_generator)
