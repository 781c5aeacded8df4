"""Baseline black-box optimizers under SABO's ask/tell protocol, and a registry of all methods.

    >>> import baselines
    >>> opt = baselines.make("ingo", x0=[0.5] * 10, sigma0=1.0, popsize=20, lr=0.1, seed=0)

``baselines.make`` knows ``sabo`` too, so a study can name every method the same way.

Adding an optimizer is one new module and one :func:`register` call (README, "Extending"):
a subclass of :class:`sabo.protocol.AskTellOptimizer` with a class attribute ``name``
(which also registers it in :data:`sabo.protocol.OPTIMIZERS`, the table saved states are
restored through), made known to the studies and the tests by ``register(cls)``.

TuRBO-1 (``turbo``) computes with PyTorch, GPyTorch and BoTorch (the ``bo`` extra:
``pip install 'sabo-bench[bo]'``); they are imported when one is built, so importing this
package needs none of them.
"""
from __future__ import annotations

import inspect

import sabo.protocol
from sabo import SABO
from sabo.protocol import AskTellOptimizer

from .bes import BES
from .cmaes import CMAES
from .gibo import GIBO
from .ingo import INGO
from .mmes import MMES
from .turbo import TuRBO1

#: Every method by its registry name (each class's ``name``, which also identifies its saved
#: states). Filled by :func:`register` only; the studies (``baselines.make``), the run engine
#: and the registry-wide conformance tests (``tests/test_protocol.py``) all read it.
REGISTRY: dict[str, type] = {}

#: Constructor arguments every registered optimizer takes: the run engine passes ``x0`` and
#: ``seed``, the studies ``sigma0`` and ``popsize`` (an optimizer without a covariance, like
#: BES, accepts ``sigma0`` and ignores it).
REQUIRED_PARAMETERS = ("x0", "sigma0", "popsize", "seed")


def register(cls: type) -> type:
    """Make the optimizer class ``cls`` available as ``baselines.make(cls.name, ...)``; returns ``cls``.

    The public route for a new method (usable as a class decorator). ``cls`` must subclass
    :class:`~sabo.protocol.AskTellOptimizer` and declare its own ``name`` (so its states can be
    saved and restored), and its constructor must take :data:`REQUIRED_PARAMETERS`. A name
    already registered for another class raises ``ValueError``; registering the same class
    again does nothing.
    """
    if not (isinstance(cls, type) and issubclass(cls, AskTellOptimizer)):
        raise TypeError(f"register() takes a subclass of sabo.protocol.AskTellOptimizer (got {cls!r})")
    name = cls.__dict__.get("name")
    if name is None or sabo.protocol.OPTIMIZERS.get(name) is not cls:
        raise ValueError(f"{cls.__qualname__} declares no registry name of its own; set the class attribute "
                         "name = '...' (an identifier) before registering it")
    known = REGISTRY.get(name)
    if known is not None and known is not cls:
        raise ValueError(f"optimizer name {name!r} is already registered for {known.__module__}.{known.__qualname__}")
    accepted = inspect.signature(cls).parameters
    missing = [p for p in REQUIRED_PARAMETERS if p not in accepted]
    if missing:
        raise ValueError(f"{cls.__qualname__}'s constructor must take the suite's parameters "
                         f"{list(REQUIRED_PARAMETERS)}; missing {missing}")
    REGISTRY[name] = cls
    return cls


for _cls in (SABO, INGO, BES, CMAES, MMES, TuRBO1, GIBO):
    register(_cls)


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


__all__ = ["BES", "CMAES", "GIBO", "INGO", "MMES", "SABO", "TuRBO1", "REGISTRY", "REQUIRED_PARAMETERS", "make",
           "parameters", "register"]
