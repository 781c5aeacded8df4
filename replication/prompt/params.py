"""The schema of ``params.yaml``'s ``prompt`` section (see :mod:`replication.params`).

One field per key: a new key of the section needs a field in :class:`PromptParams` (unknown keys
are refused), e.g. ``compile: Flag = DEFAULTS["compile"]`` (a default keeps older files valid; the
defaults live in :data:`replication.prompt.options.DEFAULTS`, which the study reads too).
"""
from __future__ import annotations

from typing import Annotated

from annotated_types import Ge
from pydantic import StrictBool

from replication.params import (
    Name,
    NameList,
    NonNegInt,
    Popsize,
    PosInt,
    PositiveFloat,
    Section,
    Seeds,
    StudySection,
    Text,
    methods_field,
    one_of,
    references,
    rule,
)

from .options import ATTENTIONS, DEFAULTS, SELECTIONS, WEIGHTS
from .tasks import ZERO_SHOT

Iterations = Annotated[int, Ge(0), rule("must be an integer >= 0")]
Flag = Annotated[StrictBool, rule("must be true or false")]


class PromptProfile(Section):
    tasks: NameList
    seeds: Seeds
    iterations: Iterations
    # optional narrowings (absent: all of the section's dims / methods; null is refused)
    dims: NameList = None
    methods: NameList = None


class PromptParams(StudySection):
    profile: Name
    profiles: dict[Name, PromptProfile]
    backbone: Text                 # a hub name or a local directory
    device: Text                   # cuda, cuda:1, cpu, ...
    weights: one_of(*WEIGHTS)
    attention: one_of(*ATTENTIONS) = DEFAULTS["attention"]
    bucketing: Flag = DEFAULTS["bucketing"]
    compile: Flag = DEFAULTS["compile"]
    k_shot: PosInt
    max_length: PosInt
    placeholder_offset: NonNegInt
    selection: one_of(*SELECTIONS)
    dims: dict[Name, PosInt]       # setting -> d
    popsize: Popsize
    sigma0: PositiveFloat
    methods: methods_field(lists=True, reserved=(ZERO_SHOT,))

    def checks(self):
        from .tasks import TASK_NAMES

        if ZERO_SHOT in self.dims:
            yield ("dims",), self.dims[ZERO_SHOT], f"key {ZERO_SHOT!r} is reserved for the zero-shot runs"
        where = ("profiles", self.profile)
        yield from references(where + ("tasks",), self.active.tasks, list(TASK_NAMES), "a prompt task")
        if self.active.dims is not None:
            yield from references(where + ("dims",), self.active.dims, list(self.dims), "a setting under prompt.dims")
        if self.active.methods is not None:
            yield from references(where + ("methods",), self.active.methods, list(self.methods),
                                  "a method under prompt.methods")

    def names(self) -> dict[str, set[str]]:
        from .tasks import TASK_NAMES

        return {"setting": set(self.dims) | {ZERO_SHOT}, "method": set(self.methods) | {ZERO_SHOT},
                "function": set(TASK_NAMES)}
