"""Few-shot data of the prompt-tuning study (BBT setup; the SABO paper, Section 5.2).

Black-Box Tuning (BBT; Sun et al., ICML 2022; its ``construct_true_few_shot_data``) builds a
"true few-shot" setting from each task's training split: shuffle the training split with the
run's seed, walk through it, and put the first k = 16 examples of each class into the training
set and the next k of each class into the development set (so train and dev are disjoint and
both come from the training split; train sizes 32, 32, 64, 32, 32, 48 for SST-2, Yelp P.,
AG News, MRPC, RTE, SNLI). The test set is the task's whole test split (``validation`` for the
GLUE tasks). :func:`few_shot_split` does the selection, :func:`prepare_task` writes the three
sets as JSON Lines with a manifest, :func:`read_split` reads one back.

Examples longer than 512 tokens are dropped by BBT; here that happens later, at encoding
(:func:`replication.prompt.objective.encode_template` drops and counts them), since it needs the
tokenizer. Rows whose label is not a valid class (SNLI's -1) are dropped here, before the split.

Deviation from BBT, on purpose: BBT shuffles with numpy's global generator (``np.random.seed``);
we use ``np.random.default_rng(seed).permutation``, so the same seed selects different examples
than BBT's code, with the same construction.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from replication.errors import ResourceUnavailable
from replication.storage import atomic_write_bytes
from sabo.validation import check_int

from .tasks import Task, get_task

__all__ = ["FewShotIndices", "TaskDataUnavailable", "few_shot_split", "load_task_split", "prepare_task",
           "read_split", "SPLIT_NAMES", "MANIFEST_NAME", "DEFAULT_K"]

DEFAULT_K = 16
SPLIT_NAMES = ("train", "dev", "test")
MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1


class TaskDataUnavailable(ResourceUnavailable, RuntimeError):
    """A task's data set cannot be loaded (``datasets`` missing, or offline with nothing cached)."""


class FewShotIndices(NamedTuple):
    """Indices into the example list: ``train`` and ``dev``, each in shuffled order."""

    train: list[int]
    dev: list[int]


def few_shot_split(examples, labels, *, k: int = DEFAULT_K, seed: int, classes=None) -> FewShotIndices:
    """BBT's few-shot train/dev selection: shuffle with ``seed``, first k per class -> train, next k -> dev.

    ``examples`` and ``labels`` are parallel sequences (only their lengths must agree; the
    examples themselves are not inspected). Returns :class:`FewShotIndices` -- index lists into
    ``examples``, in the shuffled order, exactly k per class each, disjoint. Rows with a negative
    label are skipped (as BBT does). ``classes`` are the classes to draw (default: the distinct
    non-negative labels present); labels outside ``classes`` are skipped. Deterministic per
    ``seed`` (``np.random.default_rng(seed)``).

    Raises ``ValueError`` if a class has fewer than 2k examples.
    """
    k = check_int("k", k, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got shape {labels.shape}")
    if len(examples) != labels.size:
        raise ValueError(f"{len(examples)} examples but {labels.size} labels")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be integers, got dtype {labels.dtype}")
    labels = labels.astype(np.int64)
    if classes is None:
        classes = sorted(int(c) for c in np.unique(labels) if c >= 0)
    classes = [int(c) for c in classes]
    if not classes:
        raise ValueError("no classes to draw from (no non-negative labels)")
    counts = {c: int(np.sum(labels == c)) for c in classes}
    short = {c: n for c, n in counts.items() if n < 2 * k}
    if short:
        raise ValueError(f"few-shot split needs 2k = {2 * k} examples per class (k for train, k for dev); "
                         f"class(es) with too few: " + ", ".join(f"{c}: {n}" for c, n in sorted(short.items())))
    order = np.random.default_rng(seed).permutation(labels.size)
    n_train = dict.fromkeys(classes, 0)
    n_dev = dict.fromkeys(classes, 0)
    train, dev = [], []
    remaining = 2 * k * len(classes)
    for i in order:
        c = int(labels[i])
        if c not in n_train:
            continue
        if n_train[c] < k:
            n_train[c] += 1
            train.append(int(i))
        elif n_dev[c] < k:
            n_dev[c] += 1
            dev.append(int(i))
        else:
            continue
        remaining -= 1
        if remaining == 0:
            break
    return FewShotIndices(train, dev)


def _missing_message(task: Task, split: str, reason: str) -> str:
    return (f"cannot load the {task.display_name} data set ({task.hf_id}, split {split!r}): {reason}. "
            f"Supply it by running once with network access (datasets.load_dataset"
            f"({task.path!r}{', ' + repr(task.config) if task.config else ''}) downloads and caches it), "
            f"or point HF_HOME / HF_DATASETS_CACHE at a cache that holds it (and set HF_DATASETS_OFFLINE=1 "
            f"to use it offline)")


def _is_unavailable_error(exc: BaseException) -> bool:
    """Whether ``exc`` is how ``datasets`` says "not reachable / not cached" (vs. a bug or bad argument)."""
    if isinstance(exc, (ConnectionError, FileNotFoundError, TimeoutError)):
        return True
    for cls in type(exc).__mro__:
        mod = cls.__module__ or ""
        if mod.split(".")[0] in ("requests", "urllib3", "httpx", "huggingface_hub"):
            return True
        if cls.__name__ in ("DatasetNotFoundError", "OfflineModeIsEnabled", "LocalEntryNotFoundError",
                            "ConnectionError"):
            return True
    return False


def load_task_split(task, split: str, *, cache_dir=None):
    """Load one split of a task's Hugging Face data set with ``datasets.load_dataset``.

    ``split`` is the Hugging Face split name (``task.train_split`` / ``task.test_split``).
    Returns the ``datasets.Dataset`` (indexable rows as dicts, columns by name). Raises
    :class:`TaskDataUnavailable`, naming the data set and split and how to supply it, when
    ``datasets`` is not installed or the data can be neither downloaded nor found in the cache
    (e.g. offline with an empty cache).
    """
    task = get_task(task)
    if not isinstance(split, str) or not split:
        raise ValueError(f"split must be a non-empty split name, got {split!r}")
    try:
        import datasets
    except ImportError as exc:
        raise TaskDataUnavailable(_missing_message(
            task, split, "the 'datasets' package is not installed (pip install datasets)")) from exc
    args = (task.path,) if task.config is None else (task.path, task.config)
    try:
        return datasets.load_dataset(*args, split=split,
                                     cache_dir=None if cache_dir is None else os.fspath(cache_dir))
    except Exception as exc:  # narrowed by _is_unavailable_error, re-raised otherwise
        if _is_unavailable_error(exc):
            raise TaskDataUnavailable(_missing_message(
                task, split, f"not downloadable and not cached ({type(exc).__name__}: {exc})")) from exc
        raise


def _column(ds, name):
    """A column as a list, for a ``datasets.Dataset`` (``ds[name]``) or a list of dicts."""
    if hasattr(ds, "column_names"):
        if name not in ds.column_names:
            raise KeyError(f"data set has no column {name!r}; columns: {ds.column_names}")
        return list(ds[name])
    return [row[name] for row in ds]


def _rows(task: Task, ds, indices=None) -> list[dict]:
    """Rows reduced to the task's fields + ``label``, with a clear error for a wrong schema."""
    out = []
    it = range(len(ds)) if indices is None else indices
    for i in it:
        row = ds[int(i)]
        missing = [f for f in (*task.fields, task.label_field) if f not in row]
        if missing:
            raise KeyError(f"task {task.name}: row {i} lacks field(s) {missing}; it has {sorted(row)}")
        rec = {f: row[f] for f in task.fields}
        rec["label"] = int(row[task.label_field])
        out.append(rec)
    return out


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def prepare_task(task, seed: int, out_dir, *, k: int = DEFAULT_K, loader=load_task_split) -> dict:
    """Build a task's few-shot train/dev sets and its test set and write them to disk.

    Writes ``out_dir/<task>/seed<seed>/{train,dev,test}.jsonl`` -- one JSON object per line with
    the task's text fields and ``label`` -- and then ``manifest.json`` (task, seed, k, sizes,
    data set, splits, label words, template, metric, and the training-split indices of the
    few-shot rows), each written atomically (:func:`replication.storage.atomic_write_bytes`);
    the manifest is written last, so its presence marks a complete directory. Returns the
    manifest.

    Train and dev come from ``task.train_split`` via :func:`few_shot_split` (BBT), after dropping
    rows whose label is not in ``task.valid_labels`` (SNLI's -1); the test set is every valid row
    of ``task.test_split``, in order. Over-long examples (> 512 tokens) are NOT dropped here:
    :func:`replication.prompt.objective.encode_template` drops and counts them at encoding.

    ``loader(task, split)`` returns a split's rows (a ``datasets.Dataset`` or a list of dicts in
    the data set's schema); the default loads from Hugging Face (:func:`load_task_split`), tests
    pass tiny in-memory data sets.
    """
    task = get_task(task)
    seed = check_int("seed", seed, minimum=0)
    k = check_int("k", k, minimum=1)
    if not callable(loader):
        raise ValueError(f"loader must be callable as loader(task, split), got {loader!r}")
    valid = set(task.valid_labels)

    train_ds = loader(task, task.train_split)
    train_labels = np.asarray(_column(train_ds, task.label_field), dtype=np.int64)
    keep = np.flatnonzero(np.isin(train_labels, list(valid)))
    try:
        idx = few_shot_split(keep, train_labels[keep], k=k, seed=seed, classes=task.valid_labels)
    except ValueError as exc:
        raise ValueError(f"task {task.name}, split {task.train_split!r}: {exc}") from None
    train_idx = [int(keep[i]) for i in idx.train]
    dev_idx = [int(keep[i]) for i in idx.dev]
    splits = {"train": _rows(task, train_ds, train_idx), "dev": _rows(task, train_ds, dev_idx)}

    test_ds = loader(task, task.test_split)
    test_labels = np.asarray(_column(test_ds, task.label_field), dtype=np.int64)
    test_keep = np.flatnonzero(np.isin(test_labels, list(valid)))
    splits["test"] = _rows(task, test_ds, test_keep)
    if not splits["test"]:
        raise ValueError(f"task {task.name}: split {task.test_split!r} has no rows with a valid label")

    d = Path(out_dir) / task.name / f"seed{seed}"
    for name in SPLIT_NAMES:
        atomic_write_bytes(d / f"{name}.jsonl", _jsonl(splits[name]))
    manifest = {
        "version": MANIFEST_VERSION,
        "task": task.name,
        "seed": seed,
        "k": k,
        "dataset": {"path": task.path, "config": task.config, "hf_id": task.hf_id,
                    "train_split": task.train_split, "test_split": task.test_split},
        "sizes": {name: len(splits[name]) for name in SPLIT_NAMES},
        "dropped_invalid_label": {task.train_split: int(train_labels.size - keep.size),
                                  **({task.test_split: int(test_labels.size - test_keep.size)}
                                     if task.test_split != task.train_split else {})},
        "fields": list(task.fields),
        "label_field": "label",
        "label_words": list(task.label_words),
        "label_names": list(task.label_names),
        "template": task.template,
        "metric": task.metric,
        "train_indices": train_idx,
        "dev_indices": dev_idx,
        "files": {name: f"{name}.jsonl" for name in SPLIT_NAMES},
        "note": "examples longer than 512 tokens are dropped at encoding (encode_template), not here",
    }
    atomic_write_bytes(d / MANIFEST_NAME, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    return manifest


def read_split(path) -> list[dict]:
    """Read a JSON Lines split written by :func:`prepare_task`: a list of dicts (blank lines skipped)."""
    path = Path(path)
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{path}:{n}: expected a JSON object, got {type(rec).__name__}")
            out.append(rec)
    return out
