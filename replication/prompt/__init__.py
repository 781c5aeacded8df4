"""Black-box prompt tuning of a masked language model (the paper's Section 5.2, BBT setup).

Following Black-Box Tuning (BBT; Sun et al., ICML 2022), which the SABO paper's prompt
experiments adopt: a vector z in R^d is mapped by a fixed random matrix A in R^{d x (50 D)} to
50 soft-prompt vectors p = A^T z (D = hidden size), which are added to the output of the
backbone's embedding module at sequence positions 1..50 (right after ``<s>``). The objective a
black-box optimizer minimises is the cross-entropy of the masked-LM logits at ``<mask>``,
restricted to the task's label words, averaged over the few-shot training set.

Modules (``torch`` and ``transformers`` are needed; this package is not imported by
``replication`` itself):

- :mod:`replication.prompt.model` -- load a backbone offline (:func:`load_backbone`) or build
  one with random weights (:func:`random_backbone`).
- :mod:`replication.prompt.soft_prompt` -- the projection A (:class:`PromptProjection`) and the
  forward hook that adds a population of prompts (:class:`PromptInjector`).
- :mod:`replication.prompt.objective` -- encoding (:func:`encode_template`, :func:`encode_ids`,
  :func:`label_word_ids`) and the batched objective (:class:`PromptObjective`).
- :mod:`replication.prompt.tasks` -- the six tasks as data: datasets, templates, label words.
- :mod:`replication.prompt.data` -- BBT's few-shot splits and the data-preparation step that
  writes them to local files (:func:`prepare_task`), with a clear offline error.
- :mod:`replication.prompt.problem` -- the problem the run engine drives (:class:`PromptProblem`:
  objective, train/dev metrics and best-dev tracking, test evaluation; the zero-shot problem).
- :mod:`replication.prompt.study` -- the study's configs (``params.yaml: prompt``), data
  preparation and problem construction; :mod:`replication.prompt.report` -- Tables 1 and 2.

The names below are imported lazily so that ``import replication.prompt`` stays cheap.
"""
from __future__ import annotations

from replication.lazy import lazy_getattr

_EXPORTS = {
    "Task": "tasks",
    "TASKS": "tasks",
    "get_task": "tasks",
    "few_shot_split": "data",
    "prepare_task": "data",
    "read_split": "data",
    "load_task_split": "data",
    "TaskDataUnavailable": "data",
    "BackboneUnavailable": "model",
    "load_backbone": "model",
    "random_backbone": "model",
    "roberta_large_config": "model",
    "PromptProjection": "soft_prompt",
    "PromptInjector": "soft_prompt",
    "embedding_std": "soft_prompt",
    "EncodedSplit": "objective",
    "PromptObjective": "objective",
    "encode_ids": "objective",
    "encode_template": "objective",
    "label_word_ids": "objective",
    "f1_score": "objective",
    "PromptProblem": "problem",
    "encode_task": "problem",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
