"""What the run engine needs from a study's problem instance."""
from __future__ import annotations

from typing import Protocol

import numpy as np


class Problem(Protocol):
    """A problem instance built from a :class:`~replication.config.RunConfig`.

    ``x0``: the initial mean. ``objective(X)``: the values the optimizer sees (each call is
    one ask; counted in the optimizer's evaluations; a mini-batch objective draws a fresh
    batch per call). ``metrics(mean)``: quantities recorded on the anytime curve at the
    current mean (not counted as evaluations; e.g. the error ||mu - x*||).
    ``get_state``/``set_state``: any random state the objective carries (e.g. the batch
    sampler), saved in checkpoints so a resumed run continues identically.

    Optional: ``final_evaluation(mean) -> dict[str, float]``, called once at the end of a run
    (and of a ``max_iter = 0`` evaluation) for what is too costly to compute at every curve
    point, e.g. a large test set; the engine stores it as ``result["final_evaluation"]``.

    Optional, together: ``attach_output(directory)`` and ``close()``, for a problem that writes
    files of its own as it evaluates (COCO's observer, :mod:`replication.bbob.problem`). The
    engine passes a fresh directory of the run's own before the first evaluation, calls
    ``close()`` after ``final_evaluation`` and commits the directory with the record
    (:func:`replication.engine.files_path`); such a run is never checkpointed and restarts from
    its beginning when interrupted (:mod:`replication.engine`).
    """

    x0: np.ndarray

    def objective(self, X: np.ndarray) -> np.ndarray: ...

    def metrics(self, mean: np.ndarray) -> dict[str, float]: ...

    def get_state(self): ...

    def set_state(self, state) -> None: ...
