"""Run configurations: what one run is, its content hash, and the seeds derived from it.

A run is (study, setting, problem, method, optimizer parameters, seed, budget, code
version). Its identity is the SHA-256 of its canonical JSON (sorted keys, no whitespace):
two runs with the same hash are the same computation, which makes the engine idempotent.
``code_version`` (:func:`code_version`) is ``sabo.RESULTS_VERSION`` plus the method's
``revision``: bump the method's ``revision`` when a change to its algorithm changes results
(``sabo.RESULTS_VERSION`` when a change alters every method's, e.g. the problems), so that every
record computed with the old code is recomputed (records are keyed by their config, not by the
commit that produced them; the commit is in their provenance). The package's release
(``sabo.__version__``) is not part of it: a release that alters no result keeps every record. Seeds for the
initial mean and for the optimizer are derived from the config's content with
``numpy.random.SeedSequence``, so they do not depend on the order in which runs are
scheduled or on which worker runs them; a problem's computation keys (:data:`COMPUTATION_KEYS`,
e.g. a precision) are in its hash but not in its seeds.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass

import numpy as np

from .names import check_name


def code_version(method: str, params: dict) -> str:
    """The ``code_version`` of a run of ``method`` with ``params``: ``"<results version>+<optimizer>.r<revision>"``.

    The optimizer is ``params["optimizer"]`` when a study runs a registered method under another
    label, else ``method``; a method that is not a registered optimizer (a zero-shot evaluation)
    gets ``sabo.RESULTS_VERSION`` alone.
    """
    import baselines
    import sabo

    optimizer = params.get("optimizer", method)
    cls = baselines.find(optimizer)
    return sabo.RESULTS_VERSION if cls is None else f"{sabo.RESULTS_VERSION}+{optimizer}.r{cls.revision}"


def flatten(prefix: str, value, out: dict) -> dict:
    """``out[<dotted path>] = leaf`` for every leaf of the nested dicts ``value`` (an empty dict has no
    leaf); returns ``out``. The column names of the run tables and the MLflow parameters."""
    if isinstance(value, dict):
        for key, item in value.items():
            flatten(f"{prefix}.{key}" if prefix else str(key), item, out)
    else:
        out[prefix] = value
    return out


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def content_hash(obj, length: int = 16) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]


def expand_grid(grid: dict) -> list[dict]:
    """``{"lr": [0.1, 1], "spacing": [1]}`` -> every combination as a dict (a scalar is a 1-point axis)."""
    keys = sorted(grid)
    axes = [grid[k] if isinstance(grid[k], list) else [grid[k]] for k in keys]
    return [dict(zip(keys, combo)) for combo in itertools.product(*axes)]


def method_params(grid: dict | None, **fixed) -> list[dict]:
    """The optimizer parameters of each point of a method's grid in ``params.yaml``, with ``fixed`` added.

    A grid may name the registered optimizer it runs under another label (``optimizer: sabo``);
    that entry is kept as is in every point (the engine pops it).
    """
    grid = dict(grid or {})
    label = {"optimizer": grid.pop("optimizer")} if "optimizer" in grid else {}
    return [{**fixed, **label, **hp} for hp in expand_grid(grid)]


#: problem keys that change how a run computes, not what it computes on: part of the config and its hash,
#: not of its seeds, so that runs differing only there draw the same noise, batches and samples
#: (e.g. the image study's ``dtype``: float32 and float64 runs then differ by their precision alone)
COMPUTATION_KEYS = frozenset({"dtype"})


def _stable_int(obj) -> int:
    return int(content_hash(obj, 8), 16)


@dataclass(frozen=True)
class RunConfig:
    """One run. ``problem`` and ``params`` are plain JSON data; ``budget`` is ``{"max_iter": T}``."""

    study: str
    setting: str
    problem: dict
    method: str
    params: dict
    seed: int
    budget: dict
    code_version: str = ""

    def __post_init__(self):
        # these names are path components (runs/<study>/<setting>/<method>/...): none may leave runs/
        for field in ("study", "setting", "method"):
            check_name(getattr(self, field), f"RunConfig.{field}")
        if not isinstance(self.problem, dict):
            raise ValueError(f"RunConfig.problem must be a dict (got {type(self.problem).__name__})")
        if "name" in self.problem:
            check_name(self.problem["name"], "RunConfig.problem['name']")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        return cls(**{k: d[k] for k in ("study", "setting", "problem", "method", "params", "seed", "budget",
                                         "code_version")})

    @property
    def hash(self) -> str:
        return content_hash(self.to_dict())

    @property
    def group(self) -> dict:
        """Everything but the seed: the runs that are averaged over seeds."""
        d = self.to_dict()
        d.pop("seed")
        return d

    @property
    def group_hash(self) -> str:
        return content_hash(self.group)

    @property
    def label(self) -> str:
        name = self.problem.get("name", "problem")
        return f"{self.setting}/{name}/{self.method}/seed{self.seed}"

    @property
    def instance(self) -> dict:
        """The problem less the keys that say how it is computed, not which problem it is
        (:data:`COMPUTATION_KEYS`): what the seeds are drawn from."""
        return {k: v for k, v in self.problem.items() if k not in COMPUTATION_KEYS}

    def problem_seed(self) -> int:
        """Seed of the problem instance (e.g. the initial mean): shared by all methods."""
        ss = np.random.SeedSequence([self.seed, _stable_int([self.study, self.setting, self.instance])])
        return int(ss.generate_state(1, dtype=np.uint64)[0] >> 1)

    def optimizer_seed(self) -> int:
        ss = np.random.SeedSequence([self.seed, _stable_int([self.study, self.setting, self.instance, self.method])])
        return int(ss.generate_state(1, dtype=np.uint64)[0] >> 1)


def iterations(budget: dict, evals_per_iteration: int) -> int:
    """The iterations a ``budget`` allows: ``max_iter``, or the whole iterations of ``evals_per_iteration``
    evaluations that fit in ``max_evals`` (an estimate where the iterations differ in size)."""
    if "max_iter" in budget:
        return int(budget["max_iter"])
    return int(budget["max_evals"]) // int(evals_per_iteration)
