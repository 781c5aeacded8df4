"""The schema of ``params.yaml``'s ``bbob`` section (see :mod:`replication.params`).

One field per key; a new key of the section needs a field here (unknown keys are refused).
"""
from __future__ import annotations

from typing import Annotated

from annotated_types import Ge
from pydantic import AfterValidator

from replication.params import (
    Name,
    NameList,
    PosInt,
    PositiveFloat,
    Section,
    StudySection,
    _distinct,
    methods_field,
    one_of,
    references,
    rule,
)

from .suites import SUITES

PosInts = Annotated[list[Annotated[int, Ge(1)]], rule("must be a non-empty list of integers >= 1"),
                    AfterValidator(_distinct)]


class SuiteRuns(Section):
    """What a profile runs of one COCO suite."""

    dims: PosInts
    budget: PosInt                 # evaluations per dimension: a run has budget * d evaluations
    instances: PosInts             # COCO instance ids (one run per instance: COCO's repetitions)
    functions: PosInts = None      # function ids; default: every function of the suite
    methods: NameList = None       # default: every method of bbob.methods


class BbobProfile(Section):
    suites: dict[one_of(*SUITES), SuiteRuns]


class BbobParams(StudySection):
    profiles: dict[Name, BbobProfile]
    sigma0: PositiveFloat
    methods: methods_field(lists=False)

    def checks(self):
        for suite, runs in self.active.suites.items():
            where = ("profiles", self.profile, "suites", suite)
            info = SUITES[suite]
            for key, values, known in (("dims", runs.dims, info.dims), ("functions", runs.functions or [],
                                                                          info.functions)):
                for i, value in enumerate(values):
                    if value not in known:
                        yield (where + (key, i), value,
                               f"is not one of {suite}'s {key} ({known[0]}-{known[-1]})" if key == "functions"
                               else f"is not one of {suite}'s {key} ({', '.join(map(str, known))})")
            yield from references(where + ("methods",), runs.methods or [], list(self.methods),
                                  "a method of bbob.methods")

    def names(self) -> dict[str, set[str]]:
        return {"setting": set(SUITES), "method": set(self.methods),
                "function": {f"f{f}" for info in SUITES.values() for f in info.functions}}
