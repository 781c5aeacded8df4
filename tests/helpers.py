"""Shared test helpers: objectives, an ask/tell driver, small run configs of the synthetic study, documentation parts,
benchmark scripts as modules."""
import importlib.util
import itertools
import os
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

from replication.config import RunConfig, code_version
from replication.engine import checkpoint_path, execute
from sabo.protocol import AskTellOptimizer


def benchmark_script(name: str):
    """``benchmarks/<name>.py`` imported as a module (the scripts are not a package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def define_random_search(registry_name="toy_random_search", *, global_rng=False, rounds=1, default_popsize=10):
    """A complete optimizer (not registered): Gaussian samples around the best point so far.

    ``global_rng`` and ``rounds`` break it on purpose (draws from NumPy's global generator; claims
    more ask/tell rounds per iteration than it takes) for the negative controls; ``default_popsize``
    is its constructor's ``popsize`` default (the documented class has 10).
    """
    class RandomSearch(AskTellOptimizer):
        name = registry_name
        rounds_per_iteration = rounds

        def __init__(self, x0, sigma0=1.0, popsize=default_popsize, seed=None, *, nonfinite="raise"):
            super().__init__(x0, sigma0=sigma0, popsize=popsize, seed=seed, nonfinite=nonfinite)

        @property
        def mean(self):
            return self.x_best

        def _ask(self):
            draw = np.random.standard_normal if global_rng else self._rng.standard_normal
            return self._x_best + self._sigma0 * draw((self._popsize, self._dim))

        def _tell(self, values):
            self._nit += 1  # the base class keeps x_best, f_best and nfev

    return RandomSearch


def sphere(X):
    return np.sum(np.atleast_2d(X) ** 2, axis=1)


def drive(opt, fun, rounds):
    """``rounds`` ask/tell rounds (for SABO two rounds make one iteration)."""
    for _ in range(rounds):
        X = opt.ask()
        opt.tell(X, fun(X))


def small_config(method="sabo", *, function="ellipsoid", dim=20, popsize=10, T=150, seed=0, max_evals=None,
                 **params) -> RunConfig:
    """A synthetic-study run of ``T`` iterations, or of ``max_evals`` evaluations where given."""
    defaults = {  # the synthetic study's settings; another registered method runs with its defaults
        "sabo": {"lr": 0.1, "rho": {"kind": "inv_sqrt", "scale": 100.0, "horizon": 3000}},
        "ingo": {"lr": 0.1},
        "bes": {"lr": 0.1, "spacing": 1.0},
    }.get(method, {})
    return RunConfig(study="synthetic", setting=f"d{dim}_N{popsize}",
                     problem={"name": function, "dim": dim, "mu0": {"low": 0.0, "high": 1.0}},
                     method=method, params={"sigma0": 1.0, "popsize": popsize, **defaults, **params},
                     seed=seed, budget={"max_iter": T} if max_evals is None else {"max_evals": max_evals},
                     code_version=code_version(method, params))


def deterministic_part(record: dict) -> dict:
    """What must not depend on timing, resumption or scheduling."""
    return {"config": record["config"], "config_hash": record["config_hash"], "result": record["result"]}


def tiny_params(functions=("ellipsoid", "levy"), methods=("sabo", "ingo")) -> dict:
    """A parameter file with one small synthetic setting (d = 10, N = 6) and profiles full and tiny."""
    grids = {"sabo": {"lr": 0.1, "rho": {"kind": "inv_sqrt", "scale": 10.0, "horizon": "T"}}, "ingo": {"lr": 0.1}}
    return {
        "synthetic": {
            "profile": "tiny",
            "profiles": {"full": {"seeds": [0], "iterations": {"d10_N6": 60}},
                         "tiny": {"seeds": [0, 1], "iterations": {"d10_N6": 30}}},
            "settings": {"d10_N6": {"dim": 10, "popsize": 6}},
            "functions": list(functions),
            "mu0": {"low": 0.0, "high": 1.0},
            "sigma0": 1.0,
            "methods": {m: grids[m] for m in methods},
        }
    }


def checkpoint_of(cfg, runs_dir, iters=40):
    """Leave the checkpoint a fresh run has after ``iters`` iterations (as if killed right after writing it)."""
    class Stop(Exception):
        pass

    calls = itertools.count(1)

    def progress(_done, _total):  # called once per iteration, before that iteration's checkpoint is written
        if next(calls) == iters + 1:
            raise Stop

    with pytest.raises(Stop):
        execute(cfg, runs_dir, checkpoint_every_s=1e9, checkpoint_every_iters=iters, progress=progress)
    path = checkpoint_path(runs_dir, cfg)
    assert path.exists()
    return path


MLFLOW_PAGE = Path(__file__).resolve().parents[1] / "docs" / "mlflow.md"


def readme_comparison() -> tuple[str, str]:
    """(the `sabo-bench track` command, the filter) of the documentation's "Comparing runs in MLflow"."""
    section = MLFLOW_PAGE.read_text()
    [command] = re.findall(r"`(sabo-bench track \S+ --profile [^`]+)`", section)
    [query] = [line for line in section.splitlines() if line.startswith("tags.sabo_bench_level")]
    return command, query


def mlflow_steps() -> tuple[str, str, str]:
    """docs/mlflow.md's comparison steps in order: its `sabo-bench run`, `mlflow ui` and `sabo-bench track`."""
    section = MLFLOW_PAGE.read_text()
    [run] = re.findall(r"`(sabo-bench run \S+ --profile [^`]+)`", section)
    [ui] = re.findall(r"`(mlflow ui [^`]+)`", section)
    return run, ui, readme_comparison()[0]


def for_selection(command: str, **values) -> list[str]:
    """The words of a documented command with the values of its options replaced (``profile="ci"``...)."""
    words = shlex.split(command)
    for option, value in values.items():
        words[words.index(f"--{option}") + 1] = value
    return words


def readme_filter(profile: str, setting: str, function: str) -> str:
    """docs/mlflow.md's comparison filter for another profile, setting and function than its example."""
    _, query = readme_comparison()
    example = ("'quick'", "'d200_N50'", "'ellipsoid'")
    assert all(query.count(value) == 1 for value in example), query
    for value, new in zip(example, (profile, setting, function)):
        query = query.replace(value, f"'{new}'")
    return query


def chromium() -> str | None:
    """Debian's Chromium for the browser tests (Playwright's own download is unreachable): $SABO_BENCH_CHROMIUM, else
    `chromium` or `chromium-browser` on the PATH; None when there is none."""
    for candidate in (os.environ.get("SABO_BENCH_CHROMIUM"), shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None
