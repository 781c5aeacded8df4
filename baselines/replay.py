"""Saved state as the told values, replayed on restore: for optimizers that wrap a library whose
objects cannot be saved as data (pycma's CMA-ES, Nevergrad).

:class:`TellReplay` keeps the values of every completed tell (``_told``, one row of ``popsize``
values per iteration), saves them as the state's ``told`` array (:data:`TOLD_FIELD`) and checks
on restore that there is one row per completed iteration. On restore (``_adopt_rng``) each
optimizer's ``_replay_told`` asks and tells the wrapped library again; the replayed random
generator, the pending population and whatever else the optimizer names must then equal the
saved ones bit for bit, or the state is refused.
"""
from __future__ import annotations

import numpy as np

from sabo.state import Array, to_data, tree_equal

#: The state field of the told values: one row per completed iteration.
TOLD_FIELD = Array("told", lambda o: (None, o._popsize), attr="_told_values")


#: What the replay recomputes and must leave as it was saved (restored after the comparison).
KEPT = ("_nit", "_nfev", "_f_best", "_x_best", "_pending", "_stats")


class TellReplay:
    """Mixin of an :class:`~sabo.protocol.AskTellOptimizer` (listed before it) whose state is its told values.

    Subclasses define ``_library`` (its name in messages) and ``_replay_told``.
    """

    _library: str

    def _replay_told(self, pending: bool) -> tuple[np.ndarray | None, tuple[tuple[str, bool], ...]]:
        """Rebuild the wrapped library's object from the told values; (the population asked again if
        ``pending``, else None; the optimizer's own checks as (what, reproduced) pairs)."""
        raise NotImplementedError

    def _adopt_rng(self, rng: np.random.Generator) -> None:
        """Replay every saved tell on the freshly built optimizer; refuse a state it does not reproduce.

        The constructor seeded ``self._rng`` from the saved seed, so the replay draws exactly as the
        original run did; ``rng`` is the saved generator to compare with.
        """
        try:
            mismatch = self._replay_checked(rng)
        except Exception as exc:  # the library failing on values it accepted when they were first told
            raise ValueError(f"replay did not reproduce the saved state: {self._library} failed "
                             f"({type(exc).__name__}: {exc})") from exc
        if mismatch:
            raise ValueError(f"replay did not reproduce the saved state ({', '.join(mismatch)} differ)")

    def _replay_checked(self, rng: np.random.Generator | None = None) -> list[str]:
        """Replay every saved tell (``_replay_told``) on a freshly built library object and put back what the
        replay recomputes (:data:`KEPT`); what came out different from the kept state, by name: the optimizer's
        own checks, the pending population, and the generator compared with ``rng`` where one is given."""
        saved = {k: getattr(self, k) for k in KEPT}
        try:
            pending, checks = self._replay_told(pending=saved["_pending"] is not None)
        finally:  # also when the library fails: the optimizer keeps its counters and pending population
            for k, v in saved.items():
                setattr(self, k, v)
        return [what for what, same in (
            ("random generator", rng is None or (
                type(self._rng.bit_generator) is type(rng.bit_generator)
                and tree_equal(to_data(self._rng.bit_generator.state), to_data(rng.bit_generator.state)))),
            *checks,
            ("pending population", pending is None or np.array_equal(pending, saved["_pending"], equal_nan=True)),
        ) if not same]

    @property
    def _told_values(self) -> np.ndarray:
        """The told values as a (nit, popsize) array (saved as the state's ``told``)."""
        return np.array(self._told, dtype=np.float64).reshape(len(self._told), self._popsize)

    @_told_values.setter
    def _told_values(self, values: np.ndarray) -> None:
        self._told = list(values)

    def _finish_restore(self) -> None:
        if len(self._told) != self._nit:
            raise ValueError(f"state['state']['told'] must have one row per completed iteration: nit = {self._nit}, "
                             f"got {len(self._told)} rows")
