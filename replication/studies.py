"""The registry of studies and the contract a study module fulfils (:class:`Study`).

A study is a module (``replication.<name>.study``) registered by one line in :data:`STUDIES`.
The command line, the executors and the engine reach it only through this module:
:func:`get_study` (checked against :class:`Study`), :func:`select` (the runs a
``--setting/--method/--seed/--function/--hash`` selection keeps) and :func:`optional_hook`
(``prepare``, ``gpus``, ``outcomes``).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .config import RunConfig
    from .problem import Problem

STUDIES = {"synthetic": "replication.synthetic.study", "image": "replication.image.study",
           "prompt": "replication.prompt.study", "bbob": "replication.bbob.study"}
"""study name -> module implementing :class:`Study`. Adding a study is one line here."""


@runtime_checkable
class Study(Protocol):
    """What a study module provides (module-level functions; the module itself is the study).

    ``configs(params) -> list[RunConfig]``: **every** run of the active profile
    (``params[study]["profile"]``, see :func:`active_profile`), built from the study's section of
    the validated ``params.yaml``. Selecting runs by setting, method, seed or function is not the
    study's business: :func:`select` does it, on ``config.setting``, ``config.method``,
    ``config.seed`` and ``config.problem["name"]`` (so ``problem["name"]`` is what ``--function``
    names: a test function, a data set, a task).

    ``make_problem(config) -> Problem``: the problem instance of one run
    (:class:`replication.problem.Problem`); called in the worker that executes the run.

    ``x0(config) -> numpy array``: the run's starting point, from its config alone (no problem
    built), equal to ``make_problem(config).x0`` (the engine checks). The executors build every
    optimizer once there before the first run starts (:func:`replication.engine.check_parameters`).

    ``cost(config) -> float``: a rough relative cost, used to start long runs first.

    ``report(params, records, out_dir, *, tracker=None, runs_dir=None) -> dict``: write the study's tables,
    figures and claim verdicts under ``out_dir`` from the finished run records (those of
    ``configs(params)`` that exist); returns ``{"files": [paths written], "claims": [verdict
    dicts]}`` (:func:`replication.claims.write_report` writes the markdown and the claims file).
    ``tracker``, when given, has ``log_setting_artifacts(study, setting, paths)`` to attach
    figures to MLflow. ``runs_dir``: where the records are, for a study whose runs wrote files of
    their own (:func:`replication.engine.files_path`); None when the records come from a run table.

    ``REPORT_NAME: str``: the stem of the report's files, ``<out_dir>/<REPORT_NAME>.md`` and
    ``<REPORT_NAME>_claims.json``; ``sabo-bench report`` reads the claims file already there
    before it writes, so that a preview never silently replaces a fuller report.

    ``TABLE_OMITS: str`` (optional): what the study's report lacks when made from a run table
    (``--from-table``), e.g. the BBOB study's cocopp pages; its claims file then lists it under
    ``"omits"``, and ``sabo-bench report`` will not replace a report that has it without ``--force``
    (:func:`replication.claims.replacement_refusal`).

    Optional hooks (absent means the default; read them with :func:`optional_hook` only):

    - ``prepare(params) -> list[str]``: data preparation for ``sabo-bench prepare`` (download,
      cached features); returns lines describing what it did. Default: nothing to prepare.
    - ``gpus(config) -> int``: GPUs one run needs. Default: 0. The executors give each run that
      needs one a device of its own (:mod:`replication.devices`).
    - ``outcomes(params, records) -> dict``: the study's headline numbers for ``dvc metrics``
      (``{"metrics": {method: number}, "curves": replication.outcomes.Curves | None}``: one number per
      method of :data:`replication.outcomes.HEADLINE_METHODS`, from
      :func:`replication.outcomes.per_method`; the curves: the data behind its figures, which ``dvc
      plots`` shows). Default: the metrics file holds only the profile, the record counts and the
      number of claims reproduced (:mod:`replication.outcomes`).
    """

    def configs(self, params: dict) -> list[RunConfig]: ...

    def make_problem(self, config: RunConfig) -> Problem: ...

    def x0(self, config: RunConfig): ...

    def cost(self, config: RunConfig) -> float: ...

    def report(self, params: dict, records: list[dict], out_dir: Path, *, tracker=None, runs_dir=None) -> dict: ...

    REPORT_NAME: str


OPTIONAL_HOOKS = ("prepare", "gpus", "outcomes")
"""The optional members of :class:`Study`."""


def get_study(name: str) -> Study:
    """The study module registered as ``name``; a clear error if it is unknown or misses part of :class:`Study`."""
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; available: {sorted(STUDIES)}")
    module = importlib.import_module(STUDIES[name])
    if not isinstance(module, Study):
        missing = [m for m in ("configs", "make_problem", "x0", "cost", "report")
                   if not callable(getattr(module, m, None))]
        missing += [] if isinstance(getattr(module, "REPORT_NAME", None), str) else ["REPORT_NAME"]
        raise TypeError(f"study module {STUDIES[name]} does not implement replication.studies.Study: "
                        f"missing {', '.join(missing)}")
    return module


def optional_hook(study: Study, name: str) -> Callable | None:
    """The optional hook ``name`` (one of :data:`OPTIONAL_HOOKS`) of ``study``, or None where it has none."""
    if name not in OPTIONAL_HOOKS:
        raise ValueError(f"{name!r} is not an optional hook of a study; those are {', '.join(OPTIONAL_HOOKS)}")
    return getattr(study, name, None)


def select(configs: Iterable[RunConfig], *, settings=None, methods=None, seeds=None,
           functions=None, hashes=None) -> list[RunConfig]:
    """The configs whose setting, method, seed, problem name and hash are among those given, in their order.

    Each argument is a collection of allowed values, or None for no restriction on that field:
    ``settings`` -> ``config.setting``, ``methods`` -> ``config.method``, ``seeds`` ->
    ``config.seed``, ``functions`` -> ``config.problem["name"]`` (the synthetic study's test
    function, the image study's data set, the prompt study's task), ``hashes`` -> ``config.hash``
    (the one handle every run has: labels need not be unique, e.g. the image study's noise rates).
    """
    wanted = [(settings, lambda c: c.setting), (methods, lambda c: c.method), (seeds, lambda c: c.seed),
              (functions, lambda c: c.problem.get("name")), (hashes, lambda c: c.hash)]
    wanted = [(set(values), field) for values, field in wanted if values is not None]
    return [c for c in configs if all(field(c) in values for values, field in wanted)]


def active_profile(params: dict, study: str) -> tuple[str, dict]:
    """(name, settings) of the profile selected by ``params[study]["profile"]``."""
    p = params[study]
    name = p["profile"]
    if name not in p["profiles"]:
        raise ValueError(f"{study}.profile must be one of {sorted(p['profiles'])} (got {name!r})")
    return name, p["profiles"][name]


def run_gpus(config) -> int:
    """GPUs one run of ``config`` needs: its study's ``gpus(config)``, 0 if the study declares none."""
    gpus = optional_hook(get_study(config.study), "gpus")
    return int(gpus(config)) if gpus is not None else 0
