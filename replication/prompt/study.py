"""The black-box prompt-tuning study (the SABO paper, Section 5.2, Table 1; appendix Table 2).

Per run: one task (SST-2, Yelp P., AG News, MRPC, RTE, SNLI), one dimension d, one optimizer
with one hyperparameter configuration, one seed. The seed selects BBT's few-shot split
(``data/prompt/<task>/seed<seed>``, written by ``sabo-bench prepare prompt``) and, with the
task and d, the projection A (:func:`projection_seed`: shared by all methods, independent of
the device and precision). The optimizer minimises the cross-entropy on the few-shot training
set for T iterations from mu0 = 0, Sigma0 = I with N candidates per ask. Recorded on the curve
(every iteration at T = 100): training and dev loss and metric of the mean; at the end: the test
metric of the final mean and of the best-dev mean.
The zero-shot row is a ``max_iter = 0`` run per task (method ``zero_shot``): the template
without prompt slots, evaluated once.

Choices the paper leaves open, all in ``params.yaml`` (those that change a run also in its
config; the selection rules only in the report): which prompt is reported (``selection``:
``best_dev``, the mean with the best dev metric over the run, or ``final``, the last mean; both
are recorded), how the grid is searched (the configuration with
the best mean dev metric over seeds, under the same selection rule), the seeds, the device and
how the objective is computed: ``weights`` (``fp32``, the default: fp32 weights, bf16 autocast
on CUDA; ``bf16``: weights and compute in bf16), ``attention`` (``varlen``, the default: rows
packed without padding through :class:`~replication.prompt.packed.PackedEncoder`,
variable-length flash attention on CUDA, ``bucketing`` unused and ``compile`` compiling the packed
encoder's layers; or the model's own ``sdpa`` or ``eager``), ``bucketing`` (length buckets for
``sdpa``/``eager``, on by default; see
:class:`~replication.prompt.objective.PromptObjective`) and ``compile`` (``torch.compile`` of the
encoder, once per process; on by default). All four are part of every run's config (a change
is a different run); configs written before they existed (no ``attention``/``bucketing``/
``compile`` key) run as they did then: transformers' default attention, no bucketing, no compile.

The optimizers that compute with torch (a constructor argument ``device``: TuRBO-1's and GIBO's
Gaussian processes) run on ``prompt.device`` too (:func:`~replication.prompt.runs.optimizer_device`): with ``cuda``, the
worker's pinned GPU. The device is part of their parameters, so of the config: a record says
where its optimizer computed. It splits no records: ``prompt.device`` is already in every config
(``problem``), and the other methods' parameters do not change.

Profiles: ``offline`` (the default: no run; a prompt run needs a GPU, roberta-large and the six
data sets, none of which the offline CI machine has), ``gpu`` (the paper's study), ``smoke`` (a
set-up check: one task, d = 200, one seed, a few iterations).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from replication.config import RunConfig, content_hash
from replication.errors import ResourceUnavailable

from .options import option
from .runs import REPORT_NAME as REPORT_NAME  # the Study contract: re-exported
from .runs import STUDY, checked_profile
from .runs import configs as configs

DATA_ENV = "SABO_BENCH_PROMPT_DATA"
DEFAULT_DATA_DIR = "data/prompt"


def data_dir() -> Path:
    """Where prepared few-shot data live: ``$SABO_BENCH_PROMPT_DATA``, else ``data/prompt``."""
    return Path(os.environ.get(DATA_ENV, DEFAULT_DATA_DIR))


@functools.lru_cache(maxsize=1)
def _backbone(name: str, device: str, weights: str, attention: str | None = None, compile: bool = False):
    """(model, tokenizer, sigma_e), loaded once per process; ``compile``: the encoder is compiled once here.

    ``attention: varlen`` loads the model with SDPA (its own forward is not used then: the
    objective runs the packed encoder, and compiles that when ``compile`` is set).
    """
    import torch

    from .model import compile_encoder, load_backbone
    from .soft_prompt import embedding_std

    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise ResourceUnavailable(f"prompt.device is {device!r} but torch sees no CUDA device (torch "
                                  f"{torch.__version__}); run on a GPU machine, or set prompt.device: cpu "
                                  "(fp32, far slower at RoBERTa-large's size)")
    model, tokenizer = load_backbone(name, device=device, dtype=torch.bfloat16 if weights == "bf16" else None,
                                     attn_implementation="sdpa" if attention == "varlen" else attention)
    sigma_e = embedding_std(model.get_input_embeddings().weight)
    if compile and attention != "varlen":
        compile_encoder(model)
    return model, tokenizer, sigma_e


def task_dir(task: str, seed: int) -> Path:
    return data_dir() / task / f"seed{seed}"


def load_rows(task: str, seed: int, k: int) -> dict:
    """The prepared train/dev/test rows of ``task`` and ``seed``; a clear error when they are missing."""
    from replication.storage import read_json

    from .data import MANIFEST_NAME, SPLIT_NAMES, TaskDataUnavailable, read_split

    d = task_dir(task, seed)
    manifest = d / MANIFEST_NAME
    if not manifest.exists():
        raise TaskDataUnavailable(f"no prepared data for task {task!r}, seed {seed} in {d}: run "
                                  f"`sabo-bench prepare prompt` (needs the data set online or in the Hugging Face "
                                  f"cache), or set ${DATA_ENV} to the directory that holds it")
    found = read_json(manifest)
    if found["k"] != k:
        raise ValueError(f"{d} holds k = {found['k']} examples per class, the config asks for k = {k}: "
                         f"rerun `sabo-bench prepare prompt`")
    return {s: read_split(d / f"{s}.jsonl") for s in SPLIT_NAMES}


@functools.lru_cache(maxsize=4)
def _encoded(tokenizer, task: str, seed: int, k: int, prompt: bool, offset: int, max_length: int):
    from .problem import encode_task

    return encode_task(tokenizer, task, load_rows(task, seed, k), prompt=prompt, placeholder_offset=offset,
                       max_length=max_length)


def projection_seed(config: RunConfig) -> int:
    """The seed of A: a function of the run's seed, the task and d only.

    Not ``RunConfig.problem_seed`` (which hashes the whole problem entry): the backbone's path,
    the device and the precision must not change A.
    """
    pr = config.problem
    return int(content_hash(["prompt-projection", config.seed, pr["name"], pr["dim"]], 15), 16)


def make_problem(config: RunConfig):
    from .problem import PromptProblem

    pr = config.problem
    # configs from before these keys existed run as they did then
    model, tokenizer, sigma_e = _backbone(pr["backbone"], pr["device"], pr["weights"], pr.get("attention"),
                                          bool(pr.get("compile", False)))
    prompted = pr["dim"] > 0
    encoded = _encoded(tokenizer, pr["name"], config.seed, pr["k_shot"], prompted, pr["placeholder_offset"],
                       pr["max_length"])
    # bf16 weights compute in bf16; fp32 weights get bf16 autocast on CUDA (the objective's default)
    autocast = False if pr["weights"] == "bf16" else None
    return PromptProblem.build(model, tokenizer, pr["name"], encoded, dim=pr["dim"] if prompted else None,
                               projection_seed=projection_seed(config), max_length=pr["max_length"], sigma_e=sigma_e,
                               autocast=autocast, bucketing=bool(pr.get("bucketing", False)),
                               packed=pr.get("attention") == "varlen",
                               compile=pr.get("attention") == "varlen" and bool(pr.get("compile", False)),
                               info={"backbone": pr["backbone"], "device": pr["device"], "seed": config.seed})


def prepare(params: dict) -> list[str]:
    """Write the few-shot splits of every task and seed of the active profile, and load the backbone once.

    Idempotent: a task/seed directory whose manifest has the same k is kept. Writes
    ``<data dir>/prepared.json`` listing what the profile uses (empty under ``offline``).
    """
    from replication.storage import read_json, write_json

    from .data import MANIFEST_NAME, prepare_task

    p = params[STUDY]
    name, prof = checked_profile(params)
    k = int(p["k_shot"])
    lines, prepared = [], []
    for task in prof["tasks"]:
        for seed in prof["seeds"]:
            manifest = task_dir(task, int(seed)) / MANIFEST_NAME
            found = read_json(manifest) if manifest.exists() else None
            state = "cached"
            if found is None or found["k"] != k:
                found = prepare_task(task, int(seed), data_dir(), k=k)
                state = "written"
            prepared.append({"task": task, "seed": int(seed), "sizes": found["sizes"]})
            lines.append(f"{task} seed {seed}: {found['sizes']} ({state})")
    if prof["tasks"]:
        _backbone(p["backbone"], p["device"], p["weights"], option(p, "attention"), option(p, "compile"))
        lines.append(f"backbone {p['backbone']!r} loads on {p['device']}")
    else:
        lines.append(f"profile {name!r} runs no prompt task: nothing to prepare")
    write_json(data_dir() / "prepared.json", {"profile": name, "k_shot": k, "backbone": p["backbone"],
                                               "prepared": prepared})
    return lines


def x0(config: RunConfig) -> np.ndarray:
    """mu_0 = 0 (the paper's), of the prompt's dimension d (empty for the zero-shot run)."""
    return np.zeros(config.problem["dim"])


def cost(config: RunConfig) -> float:
    """Relative cost: one forward pass over the few-shot training set (k x classes sequences) per
    evaluation, plus the optimizer's declared work (:mod:`replication.costs`; negligible here).

    The zero-shot run (``max_iter = 0``, method ``zero_shot``: no optimizer) is one evaluation.
    A forward pass of one sequence is counted as 1e10 coordinate operations (RoBERTa-large:
    2 x 355M parameters x ~80 tokens ~ 6e10 FLOPs), the unit of the optimizer's hint.
    """
    from replication.costs import run_cost

    from .tasks import get_task

    sequences = config.problem["k_shot"] * get_task(config.problem["name"]).n_classes
    return run_cost(config, dim=config.problem["dim"], eval_cost=1e10 * sequences)


def gpus(config: RunConfig) -> int:
    """One GPU per run on CUDA (the executors pin each worker to its own device), none on CPU.

    With one device per worker ``prompt.device: cuda`` means the worker's device; a numbered
    device (``cuda:1``) is taken as written and bypasses that assignment.
    """
    return 1 if str(config.problem.get("device", "cpu")).startswith("cuda") else 0


def outcomes(params: dict, records: list[dict]) -> dict:
    """What ``dvc metrics`` shows (:mod:`replication.outcomes`): per method, the median over (task, d)
    cells of the selected test metric (%, the report's Table 1 and 2 cells under ``prompt.selection``;
    the zero-shot row is in the report). No curve plot: the study's outcome is its tables."""
    from replication.outcomes import per_method

    from .report import select

    selected = select(records, params[STUDY]["selection"])
    return {"metrics": per_method(((m, v["mean"]) for (_, _, m), v in sorted(selected.items())), "percent")}


def report(params: dict, records: list[dict], out_dir, *, tracker=None, runs_dir=None) -> dict:
    from .report import report as _report

    return _report(params, records, out_dir, tracker=tracker)
