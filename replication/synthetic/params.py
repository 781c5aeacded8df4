"""The schema of ``params.yaml``'s ``synthetic`` section (see :mod:`replication.params`).

One field per key; a new key of the section needs a field here (unknown keys are refused).
"""
from __future__ import annotations

from typing import Annotated

from pydantic import FiniteFloat, model_validator

from replication.params import (
    Name,
    NameList,
    Popsize,
    PosInt,
    PositiveFloat,
    Section,
    Seeds,
    StudySection,
    at,
    methods_field,
    references,
    rule,
)

Number = Annotated[FiniteFloat, rule("must be a finite number")]


class SyntheticProfile(Section):
    seeds: Seeds
    iterations: dict[Name, PosInt]     # setting -> T
    # methods of synthetic.extra_methods this profile also runs: method -> {setting: T}, each at the
    # settings named, for its own T there (the quick profile's BO baselines run fewer iterations)
    extra_methods: dict[Name, dict[Name, PosInt]] = None


class SyntheticSetting(Section):
    dim: PosInt
    popsize: Popsize


class Mu0(Section):
    """mu0 ~ U[low, high]^d."""

    low: Number
    high: Number

    @model_validator(mode="after")
    def _ordered(self):
        if self.low > self.high:
            raise at(("low",), self.low, f"must be <= high ({self.high})")
        return self


class SyntheticParams(StudySection):
    profile: Name
    profiles: dict[Name, SyntheticProfile]   # `full` sets the horizon T of every setting (rho's "T")
    settings: dict[Name, SyntheticSetting]
    functions: NameList
    mu0: Mu0
    sigma0: PositiveFloat
    methods: methods_field(lists=False)
    # methods outside the paper's study, run only by the profiles that name them (extra_methods)
    extra_methods: methods_field(lists=False) = {}

    def checks(self):
        from replication.synthetic.functions import FUNCTIONS

        yield from references(("functions",), self.functions, list(FUNCTIONS), "a synthetic function")
        if "full" not in self.profiles:
            yield ("profiles",), list(self.profiles), "must include `full`: it sets each setting's horizon T"
            return
        for setting in self.active.iterations:
            where = ("profiles", self.profile, "iterations", setting)
            if setting not in self.settings:
                yield where, self.active.iterations[setting], (f"names setting {setting!r}, which is not under "
                                                               f"synthetic.settings ({', '.join(self.settings)})")
            elif setting not in self.profiles["full"].iterations:
                yield where, self.active.iterations[setting], (f"setting {setting!r} has no horizon: "
                                                               "synthetic.profiles.full.iterations must name it")

        for method, settings in (self.active.extra_methods or {}).items():
            where = ("profiles", self.profile, "extra_methods", method)
            if method not in self.extra_methods:
                yield where, method, (f"is not defined under synthetic.extra_methods "
                                      f"({', '.join(self.extra_methods) or 'none defined'})")
            for setting, T in settings.items():
                if setting not in self.active.iterations:
                    known = ", ".join(self.active.iterations)
                    yield where + (setting,), T, (f"is at {setting!r}, which is not a setting of profile "
                                                  f"{self.profile!r}'s iterations ({known})")
        both = sorted(set(self.methods) & set(self.extra_methods))
        if both:
            yield ("extra_methods",), both, "names methods already under synthetic.methods"

    def names(self) -> dict[str, set[str]]:
        return {"setting": set(self.settings), "method": set(self.methods) | set(self.extra_methods),
                "function": set(self.functions)}
