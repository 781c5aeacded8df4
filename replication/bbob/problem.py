"""One problem of a COCO suite (``cocoex``) as a :class:`replication.problem.Problem`.

Evaluations go through ``cocoex`` one point at a time, so COCO counts them (``evaluations``) and,
when the engine attaches an output directory, its ``bbob`` observer logs them in COCO's own data
format (``<dir>/<method>/bbobexp_f<k>.info``, ``data_f<k>/...``), which ``cocopp`` and other
people's archives read. The engine gives every run a fresh directory of its own and commits it
with the record (:mod:`replication.engine`), so a killed run never leaves half a COCO log behind
and the report can assemble each method's folder from finished runs only.

Besides COCO's log, the problem keeps what the report and the claims read from the records:
the best f - f_opt seen so far (the ``precision`` curve; the engine's curve points must not
evaluate the problem, which would count and log an extra evaluation) and, for COCO's 51 standard
targets 10^2, 10^1.8, ..., 10^-8 (precision f - f_opt), the evaluation at which each was first
reached (the run's runtimes, from which runtime ECDFs and ERTs follow).

f_opt is not exposed by ``cocoex``: it is f(x_opt) on an unobserved copy of the problem, with
x_opt from ``cocoex``'s ``_best_parameter("print")`` (which writes it to the current directory;
we call it inside a temporary one). On bbob-noisy the targets are reached by *measured* values
(COCO's own post-processing uses the noise-free ones it logs); see docs/studies/bbob.md.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

TARGETS = 10.0 ** np.linspace(2, -8, 51)
"""COCO's standard precision targets for runtime ECDFs, easiest first (10^2 ... 10^-8, 0.2 decade apart)."""


def _cocoex():
    import cocoex

    cocoex.log_level("warning")  # no "COCO INFO: ..." line per problem
    return cocoex


def _coco_problem(suite: str, function: int, dim: int, instance: int):
    # a suite narrowed to one problem: the whole bbob-largescale suite takes seconds to build
    s = _cocoex().Suite(suite, f"instances: {instance}", f"dimensions: {dim} function_indices: {function}")
    return s, s.get_problem_by_function_dimension_instance(function, dim, instance)


def optimal_value(suite: str, function: int, dim: int, instance: int) -> float:
    """f_opt of a COCO problem: f(x_opt) on an unobserved copy (see the module docstring)."""
    _suite, problem = _coco_problem(suite, function, dim, instance)
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            problem._best_parameter("print")
            x_opt = np.loadtxt(Path(tmp, f"._{suite.split('-')[0]}_problem_best_parameter.txt"), ndmin=1)
        finally:
            os.chdir(here)
    return float(problem(x_opt))


class CocoProblem:
    """A COCO problem, counted by COCO and optionally logged by its observer; see the module docstring."""

    def __init__(self, suite: str, function: int, dim: int, instance: int, algorithm: str):
        self._suite, self._problem = _coco_problem(suite, function, dim, instance)
        self.algorithm = algorithm
        self.x0 = np.array(self._problem.initial_solution, dtype=float)  # COCO's proposal: the domain's centre
        self.f_opt = optimal_value(suite, function, dim, instance)
        self._observer = None
        self._best = np.inf       # best f - f_opt so far
        self._runtimes: list[int] = []  # evaluation at which TARGETS[k] was first reached, k = 0, 1, ...

    @property
    def evaluations(self) -> int:
        """COCO's own count of evaluations."""
        return int(self._problem.evaluations)

    def attach_output(self, directory: Path) -> None:
        """Log every evaluation with COCO's ``bbob`` observer into ``directory/<algorithm>/``."""
        directory = Path(directory).resolve()
        if any(c.isspace() for c in str(directory)):  # COCO's option string is split at white space
            raise ValueError(f"COCO's observer cannot write to a path with white space: {directory}")
        self._observer = _cocoex().Observer("bbob", f"outer_folder: {directory} result_folder: {self.algorithm} "
                                                    f"algorithm_name: {self.algorithm}")
        self._problem.observe_with(self._observer)

    def close(self) -> None:
        """Free the problem, which finalises and closes the observer's files."""
        self._problem.free()
        self._observer = None

    def objective(self, X: np.ndarray) -> np.ndarray:
        done = self.evaluations
        f = np.array([self._problem(x) for x in np.asarray(X, dtype=float)])
        best = np.minimum.accumulate(np.minimum(f - self.f_opt, self._best))
        while len(self._runtimes) < TARGETS.size and best[-1] <= TARGETS[len(self._runtimes)]:
            self._runtimes.append(done + 1 + int(np.argmax(best <= TARGETS[len(self._runtimes)])))
        self._best = float(best[-1]) if best.size else self._best
        return f

    def metrics(self, mean: np.ndarray) -> dict[str, float]:
        """The best precision f - f_opt evaluated so far (inf before the first evaluation)."""
        return {"precision": self._best}

    def final_evaluation(self, mean: np.ndarray) -> dict:
        """COCO's evaluation count (the report checks it equals the engine's nfev), f_opt, the best
        precision and the runtimes of the targets reached (a prefix of :data:`TARGETS`)."""
        return {"coco_evaluations": self.evaluations, "f_opt": self.f_opt, "best_precision": self._best,
                "runtimes": list(self._runtimes)}

    def get_state(self):
        return None

    def set_state(self, state) -> None:
        raise ValueError("a COCO problem is not checkpointed: its run restarts from the beginning")
