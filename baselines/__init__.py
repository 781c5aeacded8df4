"""Baseline black-box optimizers under SABO's ask/tell protocol, and a registry of all methods.

    >>> import baselines
    >>> opt = baselines.make("ingo", x0=[0.5] * 10, sigma0=1.0, popsize=20, lr=0.1, seed=0)

``baselines.make`` knows ``sabo`` too, so a study can name every method the same way.
"""
from __future__ import annotations

import inspect

from sabo import SABO

from .bes import BES
from .cmaes import CMAES
from .ingo import INGO
from .mmes import MMES

#: Every method by its registry name (each class's ``name``, which also identifies its saved states).
REGISTRY = {cls.name: cls for cls in (SABO, INGO, BES, CMAES, MMES)}


def parameters(name: str) -> list[str]:
    """Constructor parameter names of the optimizer registered as ``name``."""
    return [p for p in inspect.signature(REGISTRY[name]).parameters if p != "self"]


def make(name: str, **params):
    """Build the optimizer registered as ``name`` with keyword ``params``.

    An unknown name or parameter raises ``ValueError`` listing what is valid.
    """
    if name not in REGISTRY:
        listing = "; ".join(f"{n}({', '.join(parameters(n))})" for n in REGISTRY)
        raise ValueError(f"unknown optimizer {name!r}; valid names and their parameters: {listing}")
    unknown = sorted(set(params) - set(parameters(name)))
    if unknown:
        raise ValueError(f"{name} has no parameter(s) {unknown}; valid parameters: {parameters(name)}")
    return REGISTRY[name](**params)


__all__ = ["BES", "CMAES", "INGO", "MMES", "SABO", "REGISTRY", "make", "parameters"]
