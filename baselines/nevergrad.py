"""Any Nevergrad optimizer as a method of the suite: ``nevergrad:<algorithm>`` (``nevergrad:NGOpt``, ...).

Nevergrad (Rapin & Teytaud 2018, facebookresearch/nevergrad) asks and tells one candidate at a
time; the suite asks for a population. One iteration here is one batch: ``popsize`` candidates
asked from Nevergrad's optimizer built with ``num_workers = popsize`` (the number of asks it
must accept before the first tell), then their values told in the order asked. Nevergrad's
own generations need not coincide with these batches (its CMA-ES uses a population of
max(num_workers, 4 + 3 ln d), so a batch smaller than that is part of a generation).

Mapping of the suite's parameters:

* ``x0``, ``sigma0``: the parametrization ``ng.p.Array(init=x0).set_mutation(sigma=sigma0)``:
  Nevergrad's standardised space is (x - x0) / sigma0, in which its optimizers start at 0 with
  scale 1.
* ``popsize``: ``num_workers``; by default 4 + floor(3 ln d), the population Nevergrad's CMA-ES
  (the default member's) uses (Nevergrad's own default, one worker, is not a population).
* ``budget``: Nevergrad's budget in function evaluations (many algorithms, NGOpt's choice of a
  sub-optimizer included, depend on it). The run engine passes max_iter x popsize
  (:func:`replication.costs.evaluations_per_iteration`); ``None`` leaves it open.
* ``seed``: the optimizer's generator draws two 32-bit seeds, one for the parametrization's
  ``numpy.random.RandomState`` (Nevergrad's documented source of randomness,
  ``parametrization.random_state``) and one for a private copy of NumPy's *global* random state:
  several Nevergrad algorithms draw from ``np.random`` directly, so every call into Nevergrad runs
  with the global state swapped for the private one and swapped back afterwards. The caller's
  global state is therefore never touched and the run depends on its seed only. (Not
  thread-safe, as any use of NumPy's global state.)
* ``mean``: Nevergrad's recommendation (``optimizer.recommend()``, what ``minimize`` returns);
  for most algorithms the best point evaluated, for CMA-ES pycma's ``xbest``. It is computed
  with every random state saved and restored, so reading it never changes the run.

Save and restore work by *replay*, as for pycma (:mod:`baselines.cmaes`): Nevergrad optimizers
cannot be stored as data (only pickled, which a saved state may never be). The state holds the
constructor arguments, the values told in every completed batch (a ``(nit, popsize)`` array),
the counters, best point, ``stats`` and pending population of the base class, and a SHA-256
fingerprint of the two random states after the last tell. ``from_state_dict`` builds a fresh
optimizer with the same seed, asks and tells the saved values again and requires the
fingerprint, the generator and the pending population to come out identical ("replay did not
reproduce the saved state" otherwise); a resumed run therefore continues exactly as the
uninterrupted one. Cost: restoring takes the optimizer's own time of the run so far (no
objective calls); the state grows by ``popsize`` floats per iteration.

A failed call into Nevergrad (an exception inside its ``ask`` or ``tell``) leaves Nevergrad's
optimizer half-updated; it is rebuilt by the same replay, so the adapter is left as it was before
the call (the pending population still to be told), and the error is raised as a
``RuntimeError`` naming the algorithm.

Deviations from using Nevergrad directly: the random streams (seeded as above, not from NumPy's
global state); values are told in batches of ``popsize``; algorithms that do not accept parallel
asks (``no_parallelization``, e.g. NelderMead, Cobyla, SQP: scipy driven from a thread) are
refused. Nevergrad itself clips told losses above 5e20 to 5e20 (with a ``LossTooLargeWarning``).
Known limitation (nevergrad 1.0.12 with NumPy 2.4): MetaModel's surrogate step calls ``float()``
on a 1-element array, which NumPy 2.4 refuses (``TypeError``), so a run of MetaModel fails a few
batches in. An optimizer that is or chooses MetaModel (``nevergrad:NGOpt`` at small d, or with
many workers per dimension; docs/baselines.md) is therefore refused when it is built, in one
line, under a NumPy that refuses such a ``float()`` (:func:`refuses_metamodel`): a study stops
before its first run (the engine builds every method once up front), not hours in. The default
member is ``DiagonalCMA``, which runs at every d.
"""
from __future__ import annotations

import contextlib
import hashlib
import struct

import numpy as np

from sabo.protocol import AskTellOptimizer
from sabo.state import MAX_COUNT, Array
from sabo.validation import check_int, check_x0

from .cmaes import pycma_default_popsize
from .replay import TOLD_FIELD, TellReplay

#: The member ``nevergrad`` alone builds (see the module docstring for why not NGOpt).
DEFAULT_ALGORITHM = "DiagonalCMA"


def nevergrad_module():
    """``import nevergrad`` with an error that says which extra provides it."""
    try:
        import nevergrad
    except ImportError as exc:
        raise ImportError("the Nevergrad adapter needs the nevergrad package: "
                          "pip install 'sabo-bench[nevergrad]'") from exc
    return nevergrad


def numpy_refuses_float_of_arrays() -> bool:
    """Whether this NumPy refuses ``float()`` of a 1-element array (NumPy 2.4 does; MetaModel relies on it)."""
    try:
        float(np.array([1.0]))
    except TypeError:
        return True
    return False


def refuses_metamodel(optimizer, algorithm: str, where: str) -> None:
    """``ValueError`` (one line) if the Nevergrad ``optimizer`` is or has chosen MetaModel (NGOpt's choice is its
    ``optim``) and this NumPy refuses what MetaModel's surrogate step does (:func:`numpy_refuses_float_of_arrays`)."""
    from nevergrad.optimization.optimizerlib import _MetaModel

    chosen, seen = optimizer, set()
    while chosen is not None and id(chosen) not in seen:
        seen.add(id(chosen))
        if isinstance(chosen, _MetaModel):
            if numpy_refuses_float_of_arrays():
                import nevergrad

                raise ValueError(f"algorithm {algorithm!r} runs Nevergrad's MetaModel here ({where}), whose surrogate "
                                 f"step calls float() on a 1-element array, which NumPy {np.__version__} refuses: the "
                                 f"run would fail a few batches in (nevergrad {nevergrad.__version__}); use another "
                                 "member (nevergrad:DiagonalCMA, the default, or nevergrad:CMA), or a setting where "
                                 "NGOpt chooses another optimizer (it decides by d, popsize and budget)")
            return
        chosen = getattr(chosen, "optim", None)


class Nevergrad(TellReplay, AskTellOptimizer):
    """A Nevergrad optimizer (``ng.optimizers.registry[algorithm]``) under the suite's ask/tell protocol.

    Parameters
    ----------
    x0 : array_like, shape (d,)
        Initial point: the parametrization's ``init``.
    sigma0 : float or array_like, shape (d,)
        Per-coordinate scale: the parametrization's mutation ``sigma``.
    popsize : int or None
        Candidates per batch, Nevergrad's ``num_workers``; ``None``: :meth:`default_popsize`.
    seed : int or None
        Seed of every random draw (module docstring).
    algorithm : str
        A name of ``nevergrad.optimizers.registry`` that accepts parallel asks; the family
        member of ``nevergrad:<algorithm>`` (default :data:`DEFAULT_ALGORITHM`).
    budget : int or None
        Nevergrad's budget in function evaluations (the run engine passes the run's), at most
        :data:`sabo.state.MAX_COUNT` (NumPy's int64).
    nonfinite : {"raise", "worst"}
        See :class:`sabo.protocol.AskTellOptimizer`.
    """

    name = "nevergrad"
    family_parameter = "algorithm"
    _STATE_FIELDS = (
        TOLD_FIELD,                                                   # one row per completed batch
        Array("fingerprint", lambda o: (8,), integer=True, attr="_fingerprint"),
    ) + AskTellOptimizer._STATE_FIELDS

    @classmethod
    def default_popsize(cls, dim: int) -> int:
        """4 + floor(3 ln d): the population of Nevergrad's CMA-ES, the default member (pycma's rule)."""
        return pycma_default_popsize(dim)

    @classmethod
    def cost_per_iteration(cls, dim: int, popsize: int) -> float:
        """N (d + 30,000): Nevergrad asks and tells one candidate at a time through its parametrization
        objects, about half a millisecond of Python per candidate whatever d.

        Measured with the default member (DiagonalCMA) on one thread: 21.4 ms per iteration at d = 100,
        N = 50 and 4.8 ms at d = 10, N = 10, i.e. 29,000-32,000 units per candidate at
        :meth:`sabo.protocol.AskTellOptimizer.cost_per_iteration`'s ~0.015 us per unit.
        """
        return float(popsize * (dim + 30_000))

    @classmethod
    def check_member(cls, member: str) -> None:
        """``member`` must name a Nevergrad optimizer that accepts ``num_workers > 1``."""
        registry = nevergrad_module().optimizers.registry
        if not isinstance(member, str) or member not in registry:
            raise ValueError(f"algorithm must be a name of nevergrad.optimizers.registry, e.g. NGOpt, DiagonalCMA, "
                             f"TwoPointsDE, PSO, OnePlusOne (got {member!r})")
        if registry[member].no_parallelization:
            raise ValueError(f"algorithm {member!r} does not accept parallel asks (Nevergrad's no_parallelization); "
                             "the adapter asks popsize >= 2 candidates before telling their values")

    def __init__(self, x0, sigma0=1.0, popsize=None, seed=None, *, algorithm=DEFAULT_ALGORITHM, budget=None,
                 nonfinite="raise"):
        x0 = check_x0(x0)
        super().__init__(x0, sigma0=sigma0, popsize=self.default_popsize(x0.size) if popsize is None else popsize,
                         seed=seed, nonfinite=nonfinite)
        self.check_member(algorithm)
        self._algorithm = algorithm
        self._budget = None if budget is None else check_int("budget", budget, minimum=1, maximum=MAX_COUNT)
        self._ng_seed, self._global_seed = (int(s) for s in self._rng.integers(2**32, size=2))
        self._told: list[np.ndarray] = []  # values of every completed batch, replayed on restore
        self._saved_fingerprint: np.ndarray | None = None
        self._build()

    # ------------------------------------------------------------------ Nevergrad, isolated
    def _build(self) -> None:
        """A fresh Nevergrad optimizer and random states, as right after construction."""
        ng = nevergrad_module()
        self._global_state = np.random.RandomState(self._global_seed).get_state()
        parametrization = ng.p.Array(init=self._x0.copy()).set_mutation(sigma=self._sigma0.copy())
        parametrization.random_state = np.random.RandomState(self._ng_seed)
        self._candidates: list = []
        with self._isolated():
            self._ng = ng.optimizers.registry[self._algorithm](parametrization=parametrization, budget=self._budget,
                                                               num_workers=self._popsize)
            refuses_metamodel(self._ng, self._algorithm, f"d = {self._dim}, popsize {self._popsize}, budget "
                                                         f"{self._budget}")

    @contextlib.contextmanager
    def _isolated(self, *, keep: bool = True):
        """Run Nevergrad code on the private global random state; ``keep=False`` also undoes its draws."""
        outer = np.random.get_state()
        np.random.set_state(self._global_state)
        if not keep:
            local = self._ng.parametrization.random_state.get_state()
        try:
            yield
        finally:
            if keep:
                self._global_state = np.random.get_state()
            else:
                self._ng.parametrization.random_state.set_state(local)
            np.random.set_state(outer)

    def _ng_ask(self) -> np.ndarray:
        with self._isolated():
            self._candidates = [self._ng.ask() for _ in range(self._popsize)]
        return np.array([c.value for c in self._candidates], dtype=np.float64).reshape(self._popsize, self._dim)

    def _ng_tell(self, values: np.ndarray) -> None:
        with self._isolated():
            for candidate, value in zip(self._candidates, values.tolist()):
                self._ng.tell(candidate, value)
        self._candidates = []
        self._told.append(values.copy())

    def _replay(self, told, pending: bool) -> np.ndarray | None:
        """Rebuild Nevergrad's optimizer, tell it ``told`` batch by batch, and ask again if ``pending``."""
        self._build()
        self._told = []
        for values in told:
            self._ng_ask()
            self._ng_tell(values)
        return self._ng_ask() if pending else None

    def _failed(self, where: str, exc: Exception) -> RuntimeError:
        """Undo a failed call into Nevergrad by replay; the error to raise."""
        self._replay(list(self._told), pending=self._pending is not None)
        return RuntimeError(f"Nevergrad's {self._algorithm} failed in {where} ({type(exc).__name__}: {exc}); "
                            "the optimizer was restored to its state before the call")

    # ------------------------------------------------------------------ protocol
    @property
    def mean(self) -> np.ndarray:
        """Nevergrad's recommendation (read without changing any random state)."""
        with self._isolated(keep=False):
            value = self._ng.recommend().value
        return np.array(value, dtype=np.float64).reshape(self._dim)

    @property
    def algorithm(self) -> str:
        return self._algorithm

    def _ask(self) -> np.ndarray:
        try:
            return self._ng_ask()
        except Exception as exc:  # Nevergrad's own failure: undone, then reported
            raise self._failed("ask()", exc) from exc

    def _tell(self, values: np.ndarray) -> None:
        try:
            self._ng_tell(values)
        except Exception as exc:  # Nevergrad's own failure: undone, then reported
            raise self._failed("tell()", exc) from exc
        self._nit += 1

    # ------------------------------------------------------------------ save / restore (replay)
    def _config(self) -> dict:
        return {**super()._config(), "algorithm": self._algorithm, "budget": self._budget}

    @property
    def _fingerprint(self) -> np.ndarray:
        """SHA-256 of Nevergrad's random state and the private global one, as 8 32-bit words."""
        digest = hashlib.sha256()
        for name, keys, pos, has_gauss, cached in (self._ng.parametrization.random_state.get_state(),
                                                   self._global_state):
            digest.update(name.encode() + keys.astype("<u4").tobytes() + struct.pack("<iid", pos, has_gauss, cached))
        return np.frombuffer(digest.digest(), dtype="<u4").astype(np.int64)

    @_fingerprint.setter
    def _fingerprint(self, value: np.ndarray) -> None:
        self._saved_fingerprint = value

    @property
    def _library(self) -> str:
        return f"Nevergrad's {self._algorithm}"

    def _replay_told(self, pending: bool):
        """Replay every saved batch (see :class:`~baselines.replay.TellReplay`); the random states must match."""
        asked = self._replay(list(self._told), pending=pending)
        return asked, (("random-state fingerprint", np.array_equal(self._fingerprint, self._saved_fingerprint)),)
