"""The prompt-tuning problem in the form the run engine expects (the SABO paper, Section 5.2).

:class:`PromptProblem` implements :class:`replication.problem.Problem`:

- ``x0 = 0`` (the paper's mu_0 = 0), ``objective(Z)``: the cross-entropy on the whole few-shot
  training set of every candidate of a population (:class:`PromptObjective`, batched);
- ``metrics(mean)`` at every curve point: training loss and metric, dev loss and metric of the
  current mean. The few-shot dev set (BBT's: the next k examples per class) is what picks the
  reported prompt: the problem remembers the mean with the best dev metric so far (ties: the
  lower dev loss, then the earlier point);
- ``final_evaluation(mean)`` once at the end: the test metric (accuracy, F1 for MRPC) of the
  final mean and of the best-dev mean, so a report can use either selection rule;
- ``get_state``/``set_state``: the best-dev memory, saved in checkpoints.

The *zero-shot* problem (:meth:`PromptProblem.build` with ``dim=None``) has no prompt: inputs are the
task's template without the 50 placeholder tokens and nothing is added to the embeddings;
it is evaluated by a ``max_iter = 0`` run (``x0`` is empty, the mean is ignored).
"""
from __future__ import annotations

import numpy as np

from sabo.validation import check_int

from .objective import EncodedSplit, PromptObjective

__all__ = ["PromptProblem", "encode_task"]


class PromptProblem:
    """Black-box prompt tuning of one task: train/dev/test splits encoded once, one objective.

    Parameters
    ----------
    objective : PromptObjective
        Built on the few-shot training split; its projection fixes d (None: zero-shot).
    dev, test : EncodedSplit
        Encoded like the training split (same template and prompt length).
    info : dict, optional
        Free-form description (task, sizes, dropped examples...), kept as ``problem.info``.
    """

    def __init__(self, objective: PromptObjective, dev: EncodedSplit, test: EncodedSplit, *, info=None):
        for name, split in (("dev", dev), ("test", test)):
            if not isinstance(split, EncodedSplit) or len(split) == 0:
                raise ValueError(f"{name} must be a non-empty EncodedSplit")
            if split.n_prompt_tokens != objective.n_prompt_tokens:
                raise ValueError(f"the {name} split has {split.n_prompt_tokens} prompt slots, the objective "
                                 f"{objective.n_prompt_tokens}")
        self._objective = objective
        self._dev, self._test = dev, test
        self.dim = 0 if objective.projection is None else objective.projection.dim
        self.x0 = np.zeros(self.dim)
        self.info = dict(info or {})
        self._best: dict | None = None   # {"key": (dev metric, -dev loss), "point": k, "mean": array}
        self._points = 0                 # metrics() calls so far = index of the next curve point

    @property
    def prompted(self) -> bool:
        return self.dim > 0

    @property
    def prompt_objective(self) -> PromptObjective:
        return self._objective

    def _z(self, mean):
        return np.asarray(mean, dtype=np.float64) if self.prompted else None

    def objective(self, X: np.ndarray) -> np.ndarray:
        return self._objective.losses(X)

    def metrics(self, mean: np.ndarray) -> dict[str, float]:
        z = self._z(mean)
        train = self._objective.scores(z)
        dev = self._objective.scores(z, self._dev)
        key = (dev["metric"], -dev["loss"])
        if self._best is None or key > self._best["key"]:
            self._best = {"key": key, "point": self._points, "mean": np.array(mean, dtype=np.float64)}
        self._points += 1
        return {"train_loss": train["loss"], "train_metric": train["metric"],
                "dev_loss": dev["loss"], "dev_metric": dev["metric"]}

    def final_evaluation(self, mean: np.ndarray) -> dict[str, float]:
        """Test metric and loss of the final mean and of the best-dev mean (curve point ``best_dev_point``)."""
        final = self._objective.scores(self._z(mean), self._test)
        out = {"test_metric_final": final["metric"], "test_loss_final": final["loss"]}
        if self._best is None:  # no curve point was recorded: the final mean is the only candidate
            best, point, dev_metric = final, -1, float("nan")
        else:
            same = np.array_equal(self._best["mean"], np.asarray(mean, dtype=np.float64))
            best = final if same else self._objective.scores(self._z(self._best["mean"]), self._test)
            point, dev_metric = self._best["point"], self._best["key"][0]
        out.update(test_metric_best_dev=best["metric"], test_loss_best_dev=best["loss"],
                   best_dev_point=float(point), best_dev_metric=float(dev_metric))
        return out

    def get_state(self):
        # plain data only (checkpoints serialise dicts, lists, numbers, arrays): the key as a list
        best = None if self._best is None else {**self._best, "key": [float(k) for k in self._best["key"]],
                                                "mean": self._best["mean"].copy()}
        return {"best": best, "points": self._points}

    def set_state(self, state) -> None:
        """Restore :meth:`get_state` (read from a checkpoint file: checked, ``ValueError`` if malformed)."""
        if not isinstance(state, dict) or set(state) != {"best", "points"}:
            raise ValueError("prompt problem state must be a dict with keys 'best' and 'points'")
        best = state["best"]
        if best is not None:
            best = {**best, "key": tuple(float(k) for k in best["key"]), "point": int(best["point"]),
                    "mean": np.asarray(best["mean"], dtype=np.float64)}
            if best["mean"].shape != self.x0.shape or not np.all(np.isfinite(best["mean"])):
                raise ValueError(f"prompt problem state: best mean must be {self.x0.shape[0]} finite numbers")
        self._best, self._points = best, check_int("prompt problem state['points']", state["points"], minimum=0)

    @classmethod
    def build(cls, model, tokenizer, task, encoded: dict, *, dim: int | None, projection_seed: int = 0,
              max_length: int = 512, sigma_e: float | None = None, autocast: bool | None = None,
              bucketing: bool = True, packed: bool = False, compile: bool = False, info=None) -> PromptProblem:
        """The problem of a task from its encoded splits (:func:`encode_task`).

        ``dim`` None builds the zero-shot problem (the splits must be encoded without prompt
        slots); otherwise the projection A (d = ``dim``, entries N(0, sigma_e^2 / d)) is drawn
        with ``projection_seed`` on the model's device. ``autocast``, ``bucketing``, ``packed``,
        ``compile``: see :class:`PromptObjective`.
        """
        from .soft_prompt import PromptProjection
        from .tasks import get_task

        task = get_task(task)
        missing = [s for s in ("train", "dev", "test") if s not in encoded]
        if missing:
            raise ValueError(f"encoded splits lack {missing}")
        projection = None if dim is None else PromptProjection.from_model(model, dim, seed=projection_seed,
                                                                           sigma_e=sigma_e)
        objective = PromptObjective(model, tokenizer, encoded["train"], None, list(task.label_words), projection,
                                    metric=task.metric, max_length=max_length, autocast=autocast,
                                    bucketing=bucketing, packed=packed, compile=compile)
        info = {**dict(info or {}), "task": task.name, "metric": task.metric,
                **{f"n_{s}": len(e) for s, e in encoded.items()},
                **{f"dropped_{s}": e.n_dropped for s, e in encoded.items()}}
        if projection is not None:
            info.update(sigma_e=projection.sigma_e, projection_std=projection.std)
        return cls(objective, encoded["dev"], encoded["test"], info=info)


def encode_task(tokenizer, task, rows: dict, *, prompt: bool = True, placeholder_offset: int | None = None,
                max_length: int = 512) -> dict[str, EncodedSplit]:
    """Encode a task's ``{"train", "dev", "test"}`` rows (dicts with its fields and ``label``) with its template.

    ``prompt``: with the 50 placeholder tokens ``placeholder_offset .. + 49`` (default BBT's
    1000..1049) right after ``<s>``, or without them (zero-shot). Inputs over ``max_length``
    tokens *with* the placeholders are dropped and counted (``EncodedSplit.n_dropped``): the
    zero-shot encoding drops at ``max_length - 50``, so that it scores the same examples.
    """
    from .objective import DEFAULT_PLACEHOLDER_OFFSET, encode_template
    from .soft_prompt import N_PROMPT_TOKENS
    from .tasks import get_task

    task = get_task(task)
    n_tokens = N_PROMPT_TOKENS if prompt else 0
    offset = DEFAULT_PLACEHOLDER_OFFSET if placeholder_offset is None else int(placeholder_offset)
    placeholders = list(range(offset, offset + n_tokens))
    limit = max_length - (N_PROMPT_TOKENS - n_tokens)
    return {split: encode_template(tokenizer, task.template, split_rows, [r["label"] for r in split_rows],
                                   n_prompt_tokens=n_tokens, placeholder_ids=placeholders, max_length=limit)
            for split, split_rows in rows.items()}
