"""Saved state as the told values, replayed on restore: for optimizers that wrap a library whose
objects cannot be saved as data (pycma's CMA-ES, Nevergrad).

:class:`TellReplay` keeps the values of every completed tell (``_told``, one row of ``popsize``
values per iteration), saves them as the state's ``told`` array (:data:`TOLD_FIELD`) and checks
on restore that there is one row per completed iteration. Each optimizer replays them in its own
``_adopt_rng`` (asking and telling the wrapped library again) and compares what it must reproduce.
"""
from __future__ import annotations

import numpy as np

from sabo.state import Array

#: The state field of the told values: one row per completed iteration.
TOLD_FIELD = Array("told", lambda o: (None, o._popsize), attr="_told_values")


class TellReplay:
    """Mixin of an :class:`~sabo.protocol.AskTellOptimizer` (listed before it) whose state is its told values."""

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
