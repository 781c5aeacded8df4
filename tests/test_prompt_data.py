"""Offline tests of the prompt study's data layer: tasks as data, BBT's few-shot split, prepared files.

No network: tiny in-memory data sets in the real Hugging Face schemas are injected through
``prepare_task(loader=...)``. The check of ``load_task_split`` against the real ``datasets``
library in offline mode runs in a subprocess and is skipped only when ``datasets`` is not installed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from replication.prompt.data import TaskDataUnavailable, few_shot_split, load_task_split, prepare_task, read_split
from replication.prompt.tasks import MASK_TOKEN, PROMPT_MARKER, TASK_NAMES, TASKS, get_task

EXPECTED_TRAIN_SIZES = {"sst2": 32, "yelp_polarity": 32, "ag_news": 64, "mrpc": 32, "rte": 32, "snli": 48}
# the columns each Hugging Face data set really has (label column: "label")
HF_SCHEMAS = {
    "sst2": ("sentence", "label", "idx"),
    "yelp_polarity": ("text", "label"),
    "ag_news": ("text", "label"),
    "mrpc": ("sentence1", "sentence2", "label", "idx"),
    "rte": ("sentence1", "sentence2", "label", "idx"),
    "snli": ("premise", "hypothesis", "label"),
}


def fake_rows(task_name, split, n_per_class=40, n_invalid=0, seed=0):
    """Rows in the data set's schema: n_per_class per class (shuffled), plus n_invalid rows labelled -1."""
    task = TASKS[task_name]
    labels = [c for c in range(task.n_classes) for _ in range(n_per_class)] + [-1] * n_invalid
    labels = list(np.random.default_rng(seed).permutation(labels))
    rows = []
    for i, y in enumerate(labels):
        row = {}
        for col in HF_SCHEMAS[task_name]:
            if col == "label":
                row[col] = int(y)
            elif col == "idx":
                row[col] = i
            else:
                row[col] = f"{task_name} {split} {col} {i} {{braces}} é"
        rows.append(row)
    return rows


def make_loader(n_per_class=40, n_invalid=0, calls=None):
    def loader(task, split):
        if calls is not None:
            calls.append((task.name, split))
        return fake_rows(task.name, split, n_per_class=n_per_class, n_invalid=n_invalid,
                         seed=len(split))
    return loader


# -- tasks ------------------------------------------------------------------------------------
def test_six_tasks_with_bbt_facts():
    assert TASK_NAMES == ("sst2", "yelp_polarity", "ag_news", "mrpc", "rte", "snli")
    hf = {n: (t.path, t.config, t.train_split, t.test_split) for n, t in TASKS.items()}
    assert hf == {"sst2": ("glue", "sst2", "train", "validation"),
                  "yelp_polarity": ("yelp_polarity", None, "train", "test"),
                  "ag_news": ("ag_news", None, "train", "test"),
                  "mrpc": ("glue", "mrpc", "train", "validation"),
                  "rte": ("glue", "rte", "train", "validation"),
                  "snli": ("snli", None, "train", "test")}
    assert TASKS["sst2"].template == "{P} . {sentence} . It was <mask> ."
    assert TASKS["yelp_polarity"].template == "{P} . {text} . It was <mask> ."
    assert TASKS["ag_news"].template == "{P} . <mask> News: {text}"
    assert TASKS["mrpc"].template == TASKS["rte"].template == "{P} . {sentence1} ? <mask> , {sentence2}"
    assert TASKS["snli"].template == "{P} . {premise} ? <mask> , {hypothesis}"
    assert {n: t.metric for n, t in TASKS.items()} == {n: ("f1" if n == "mrpc" else "accuracy") for n in TASKS}
    assert all(t.label_field == "label" for t in TASKS.values())
    assert TASKS["snli"].valid_labels == (0, 1, 2)
    assert get_task("rte") is TASKS["rte"] and get_task(TASKS["rte"]) is TASKS["rte"]
    with pytest.raises(ValueError, match="unknown task 'sst-2'"):
        get_task("sst-2")


def test_label_words_in_label_index_order_and_distinct():
    words = {n: t.label_words for n, t in TASKS.items()}
    assert words == {"sst2": ("bad", "great"), "yelp_polarity": ("bad", "great"),
                     "ag_news": ("World", "Sports", "Business", "Tech"), "mrpc": ("No", "Yes"),
                     "rte": ("Yes", "No"), "snli": ("Yes", "Maybe", "No")}
    # the datasets' ClassLabel names, same order: the words line up with the meanings
    assert TASKS["rte"].label_names[0] == "entailment" and TASKS["rte"].label_words[0] == "Yes"
    assert TASKS["mrpc"].label_names[1] == "equivalent" and TASKS["mrpc"].label_words[1] == "Yes"
    assert TASKS["snli"].label_names == ("entailment", "neutral", "contradiction")
    assert TASKS["ag_news"].label_names == ("World", "Sports", "Business", "Sci/Tech")
    assert TASKS["sst2"].label_names == ("negative", "positive")
    for t in TASKS.values():
        assert len(set(t.label_words)) == t.n_classes == len(t.label_names)


@pytest.mark.parametrize("name", TASK_NAMES)
def test_template_fields_exist_and_fill(name):
    task = TASKS[name]
    assert set(task.template_fields) <= set(HF_SCHEMAS[name]) - {"label", "idx"}
    assert task.template_fields == list(task.fields)
    row = fake_rows(name, "train", n_per_class=1)[0]
    filled = task.fill(row)
    assert filled.count(MASK_TOKEN) == 1 and filled.count(PROMPT_MARKER) == 1
    assert filled.startswith(PROMPT_MARKER)
    for f in task.fields:
        assert row[f] in filled  # verbatim, braces in the data kept
    with pytest.raises(KeyError, match="lacks field"):
        task.fill({"label": 0})


# -- few-shot split ---------------------------------------------------------------------------
def test_few_shot_split_bbt_construction():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, size=300)
    examples = [f"ex{i}" for i in range(300)]
    sp = few_shot_split(examples, labels, k=16, seed=7)
    assert len(sp.train) == len(sp.dev) == 48
    assert not set(sp.train) & set(sp.dev)
    for part in (sp.train, sp.dev):
        assert np.bincount(labels[part], minlength=3).tolist() == [16, 16, 16]
    # the construction itself: walk the seed's permutation, first k per class -> train, next k -> dev
    order = np.random.default_rng(7).permutation(300)
    seen = {0: 0, 1: 0, 2: 0}
    exp_train, exp_dev = [], []
    for i in order:
        c = int(labels[i])
        seen[c] += 1
        if seen[c] <= 16:
            exp_train.append(int(i))
        elif seen[c] <= 32:
            exp_dev.append(int(i))
    assert sp.train == exp_train and sp.dev == exp_dev
    # deterministic per seed, different across seeds
    assert few_shot_split(examples, labels, k=16, seed=7) == sp
    assert few_shot_split(examples, labels, k=16, seed=8).train != sp.train


def test_few_shot_split_skips_negative_labels_and_validates():
    labels = np.array([0] * 4 + [1] * 4 + [-1] * 10)
    sp = few_shot_split(list(range(18)), labels, k=2, seed=0)
    assert all(labels[i] >= 0 for i in sp.train + sp.dev)
    with pytest.raises(ValueError, match=r"2k = 6 .*class\(es\) with too few: 0: 4, 1: 4"):
        few_shot_split(list(range(18)), labels, k=3, seed=0)
    with pytest.raises(ValueError, match="too few: 2: 0"):
        few_shot_split(list(range(18)), labels, k=2, seed=0, classes=[0, 1, 2])
    with pytest.raises(ValueError, match="3 examples but 18 labels"):
        few_shot_split([1, 2, 3], labels, k=2, seed=0)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            few_shot_split(list(range(18)), labels, k=bad, seed=0)
    for bad in (-1, None, 0.0):
        with pytest.raises(ValueError, match="seed must be an integer >= 0"):
            few_shot_split(list(range(18)), labels, k=2, seed=bad)
    with pytest.raises(ValueError, match="labels must be integers"):
        few_shot_split([1, 2], [0.5, 1.0], k=1, seed=0)


# -- prepare_task -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", TASK_NAMES)
def test_prepare_task_sizes_files_and_roundtrip(tmp_path, name):
    calls = []
    task = TASKS[name]
    m = prepare_task(name, 3, tmp_path, loader=make_loader(calls=calls))
    assert calls == [(name, task.train_split), (name, task.test_split)]
    d = tmp_path / name / "seed3"
    assert sorted(p.name for p in d.iterdir()) == ["dev.jsonl", "manifest.json", "test.jsonl", "train.jsonl"]
    assert json.loads((d / "manifest.json").read_text()) == m
    assert m["sizes"] == {"train": EXPECTED_TRAIN_SIZES[name], "dev": EXPECTED_TRAIN_SIZES[name],
                          "test": 40 * task.n_classes}
    assert (m["task"], m["seed"], m["k"], m["template"], m["metric"]) == (name, 3, 16, task.template, task.metric)
    assert m["label_words"] == list(task.label_words)
    assert (m["dataset"]["path"], m["dataset"]["config"]) == (task.path, task.config)

    train_rows = fake_rows(name, task.train_split, seed=len(task.train_split))
    train, dev, test = (read_split(d / f"{s}.jsonl") for s in ("train", "dev", "test"))
    expect = lambda r: {**{f: r[f] for f in task.fields}, "label": r["label"]}  # noqa: E731
    assert train == [expect(train_rows[i]) for i in m["train_indices"]]
    assert dev == [expect(train_rows[i]) for i in m["dev_indices"]]
    assert not set(m["train_indices"]) & set(m["dev_indices"])
    for part in (train, dev):
        assert np.bincount([r["label"] for r in part], minlength=task.n_classes).tolist() == [16] * task.n_classes
        assert all(set(r) == {*task.fields, "label"} for r in part)
    test_rows = fake_rows(name, task.test_split, seed=len(task.test_split))
    assert test == [expect(r) for r in test_rows]
    # deterministic per seed, different across seeds
    m2 = prepare_task(name, 3, tmp_path / "again", loader=make_loader())
    assert m2["train_indices"] == m["train_indices"] and m2["dev_indices"] == m["dev_indices"]
    m3 = prepare_task(name, 4, tmp_path, loader=make_loader())
    assert m3["train_indices"] != m["train_indices"]
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no temporaries


def test_snli_invalid_labels_dropped(tmp_path):
    m = prepare_task("snli", 0, tmp_path, loader=make_loader(n_invalid=25))
    assert m["dropped_invalid_label"] == {"train": 25, "test": 25}
    assert m["sizes"] == {"train": 48, "dev": 48, "test": 120}
    for s in ("train", "dev", "test"):
        assert {r["label"] for r in read_split(tmp_path / "snli" / "seed0" / f"{s}.jsonl")} == {0, 1, 2}


def test_prepare_task_class_too_small_and_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"task ag_news, split 'train': .*too few: 0: 20, 1: 20, 2: 20, 3: 20"):
        prepare_task("ag_news", 0, tmp_path, loader=make_loader(n_per_class=20))
    assert not (tmp_path / "ag_news").exists()
    assert prepare_task("ag_news", 0, tmp_path, k=10, loader=make_loader(n_per_class=20))["sizes"]["train"] == 40
    with pytest.raises(ValueError, match="unknown task"):
        prepare_task("cola", 0, tmp_path, loader=make_loader())
    with pytest.raises(ValueError, match="seed must be"):
        prepare_task("sst2", -1, tmp_path, loader=make_loader())
    with pytest.raises(ValueError, match="loader must be callable"):
        prepare_task("sst2", 0, tmp_path, loader="glue")

    def wrong_schema(task, split):
        return [{"text": "x", "label": i % 2} for i in range(80)]
    with pytest.raises(KeyError, match=r"lacks field\(s\) \['sentence1', 'sentence2'\]"):
        prepare_task("mrpc", 0, tmp_path, loader=wrong_schema)


def test_read_split_errors(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n[1]\n')
    with pytest.raises(ValueError, match=r"x.jsonl:3: expected a JSON object"):
        read_split(p)
    p.write_text('{"a": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"x.jsonl:2: not valid JSON"):
        read_split(p)


def test_prepared_split_encodes_through_encode_template(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from tiny_roberta import placeholder_ids, tiny_tokenizer

    from replication.prompt.objective import encode_template

    tok = tiny_tokenizer()
    for name in TASK_NAMES:
        task = TASKS[name]
        m = prepare_task(name, 0, tmp_path, k=2, loader=make_loader(n_per_class=5))
        rows = read_split(tmp_path / name / "seed0" / "train.jsonl")
        enc = encode_template(tok, task.template, rows, [r["label"] for r in rows], placeholder_ids=placeholder_ids())
        assert len(enc) == m["sizes"]["train"] == 2 * task.n_classes and enc.n_dropped == 0


# -- missing data -----------------------------------------------------------------------------
def test_loader_error_propagates(tmp_path):
    def offline(task, split):
        raise TaskDataUnavailable(f"cannot load {task.hf_id} {split}")
    with pytest.raises(TaskDataUnavailable, match="glue/rte train"):
        prepare_task("rte", 0, tmp_path, loader=offline)


def test_load_task_split_without_datasets_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(TaskDataUnavailable, match=r"\(glue/sst2, split 'train'\).*not installed.*HF_DATASETS_CACHE"):
        load_task_split("sst2", "train")


def test_load_task_split_maps_offline_errors_only(monkeypatch, tmp_path):
    seen = []

    def load_dataset(*args, split, cache_dir):
        seen.append((args, split, cache_dir))
        if args[0] == "snli":
            raise ConnectionError("Couldn't reach 'snli' on the Hub (OfflineModeIsEnabled)")
        if args[0] == "ag_news":
            raise FileNotFoundError("Dataset 'ag_news' doesn't exist on the Hub or cannot be accessed")
        raise ValueError('Unknown split "bogus"')

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(TaskDataUnavailable,
                       match=r"SNLI data set \(snli, split 'test'\).*HF_HOME.*HF_DATASETS_OFFLINE=1"):
        load_task_split("snli", "test", cache_dir=tmp_path)
    with pytest.raises(TaskDataUnavailable, match="ag_news"):
        load_task_split(TASKS["ag_news"], "train")
    with pytest.raises(ValueError, match="Unknown split"):  # not an availability problem: passed through
        load_task_split("mrpc", "bogus")
    assert seen == [(("snli",), "test", os.fspath(tmp_path)), (("ag_news",), "train", None),
                    (("glue", "mrpc"), "bogus", None)]


def test_load_task_split_real_datasets_offline_empty_cache(tmp_path):
    if importlib.util.find_spec("datasets") is None:
        pytest.skip("the 'datasets' package is not installed; the offline check with the real library is skipped")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_CACHE": str(tmp_path / "hf" / "datasets"),
           "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    code = ("from replication.prompt.data import load_task_split, TaskDataUnavailable\n"
            "try:\n    load_task_split('sst2', 'train')\n"
            "except TaskDataUnavailable as e:\n    print('UNAVAILABLE', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("UNAVAILABLE") and "glue/sst2" in out.stdout and "HF_HOME" in out.stdout
