"""Baseline black-box optimizers under SABO's ask/tell protocol, and a registry of all methods.

    >>> import baselines
    >>> opt = baselines.make("ingo", x0=[0.5] * 10, sigma0=1.0, popsize=20, lr=0.1, seed=0)

``baselines.make`` knows ``sabo`` too, so a study can name every method the same way.

Adding an optimizer is one new module and one :func:`register` call (docs/extending/optimizer.md):
a subclass of :class:`sabo.protocol.AskTellOptimizer` with a class attribute ``name``
(which also registers it in :data:`sabo.protocol.OPTIMIZERS`, the table saved states are
restored through), made known to the studies and the tests by ``register(cls)``.

TuRBO-1 (``turbo``) computes with PyTorch, GPyTorch and BoTorch (the ``bo`` extra:
``pip install 'sabo-bench[bo]'``), the Nevergrad adapter (``nevergrad:<algorithm>``) with
Nevergrad (the ``nevergrad`` extra); they are imported when one is built, so importing this
package needs none of them.

Optimizers of other packages join the registry through the entry-point group
``sabo_bench.optimizers`` (loaded on first use of their name, :func:`find`) or, without
installation, as ``module:Class`` allowed by name (:func:`load_class`); see
:mod:`baselines.plugins`. A *method family* (a class declaring ``family_parameter``) is named
``<family>:<member>``: ``make("nevergrad:NGOpt")`` is ``make("nevergrad", algorithm="NGOpt")``.
"""
from __future__ import annotations

import inspect

import sabo.protocol
from sabo import SABO
from sabo.protocol import AskTellOptimizer
from sabo.validation import did_you_mean

from . import plugins
from .bes import BES
from .cmaes import CMAES
from .gibo import GIBO
from .ingo import INGO
from .mmes import MMES
from .nevergrad import Nevergrad
from .plugins import PluginError, import_class, load_entry_point
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


for _cls in (SABO, INGO, BES, CMAES, MMES, TuRBO1, GIBO, Nevergrad):
    register(_cls)


#: ``module:Class`` -> class, for each optimizer :func:`load_class` imported in this process.
_IMPORTED: dict[str, type] = {}


def find(name: str) -> type | None:
    """The class that the method ``name`` builds, or None when nothing has that name.

    ``name`` is a registry name or ``<family>:<member>`` (the family's class). A name that is
    not registered yet but is an installed plugin's (entry point of ``sabo_bench.optimizers``)
    loads and registers that plugin first; a plugin that cannot be loaded raises
    :class:`~baselines.plugins.PluginError`. Only installed entry points are consulted: a
    ``module:Class`` is never imported from a name (that takes :func:`load_class`).
    """
    if not isinstance(name, str):
        return None
    family = name.partition(":")[0]
    if family not in REGISTRY:
        candidates = plugins.entry_points().get(family)
        if candidates is None:
            return None
        _register_plugin(load_entry_point(family, candidates), plugins.describe(candidates[0]))
    return REGISTRY[family]


def resolve(name: str) -> tuple[type, dict]:
    """``(class, fixed constructor arguments)`` of the method ``name``; ``ValueError`` if there is none.

    The ``ValueError`` for an unknown name suggests the closest method names, case ignored
    (``"SABO"``: did you mean ``'sabo'``), then lists every valid one.

    A family member ``"<family>:<member>"`` fixes the family's ``family_parameter`` to ``member``,
    which the class checks (:meth:`~sabo.protocol.AskTellOptimizer.check_member`).
    """
    cls = find(name)
    if cls is None:
        hint = ""
        if isinstance(name, str):  # "Nevergrad:NGOpt" suggests 'nevergrad:NGOpt': the family's name, member kept
            family, colon, member = name.partition(":")
            hint = did_you_mean(family, available(), suffix=colon + member)
        raise ValueError(f"unknown optimizer {name!r}{hint}; {_listing()}")
    family, colon, member = name.partition(":")
    if not colon:
        return cls, {}
    if cls.family_parameter is None:
        raise ValueError(f"optimizer name {name!r}: {family!r} is one method, not a family of methods "
                         f"('<family>:<member>' names a member of {_families() or 'no family here'})")
    if not member.isidentifier():
        raise ValueError(f"optimizer name {name!r}: the member after ':' must be a name (letters, digits, '_')")
    cls.check_member(member)
    return cls, {cls.family_parameter: member}


def get(name: str) -> type:
    """The class that the method ``name`` builds (:func:`resolve` without the fixed arguments)."""
    return resolve(name)[0]


def load_plugins() -> list[str]:
    """Load and register every installed optimizer plugin not registered yet; returns their names.

    Each plugin that cannot be loaded adds one line to the :class:`~baselines.plugins.PluginError`
    raised after the others are loaded.
    """
    loaded, problems = [], []
    for name, candidates in plugins.entry_points().items():
        if name in REGISTRY:
            continue
        try:
            _register_plugin(load_entry_point(name, candidates), plugins.describe(candidates[0]))
        except PluginError as exc:
            problems.append(str(exc))
        else:
            loaded.append(name)
    if problems:
        raise PluginError("\n".join(problems))
    return loaded


def load_class(spec: str, allow) -> type:
    """Import the optimizer class ``spec`` = ``"package.module:Class"`` and register it; returns the class.

    ``package.module`` must be listed in ``allow`` (exact module names;
    :func:`baselines.plugins.import_class`). The class is registered under its own ``name``,
    and that name is all a run config, record or checkpoint holds. Loading the same spec again
    does nothing.
    """
    cls = import_class(spec, allow)
    _register_plugin(cls, repr(spec))
    _IMPORTED[spec] = cls
    return cls


def imported_plugins() -> list[str]:
    """The ``module:Class`` specs :func:`load_class` registered and the registry still holds.

    What a worker process loads to know the same methods as its parent
    (:mod:`replication.executors`)."""
    return [spec for spec, cls in _IMPORTED.items() if REGISTRY.get(cls.name) is cls]


def _register_plugin(cls: type, what: str) -> None:
    try:
        register(cls)
    except (TypeError, ValueError) as exc:
        raise PluginError(f"{what}: {exc}") from exc


def available() -> list[str]:
    """Every method name there is: the registered ones, then the installed plugins not loaded yet (their
    entry points' names, :func:`find` loads them on first use)."""
    return [*REGISTRY, *sorted(set(plugins.entry_points()) - set(REGISTRY))]


def _families() -> str:
    return ", ".join(f"{n}:<{cls.family_parameter}>" for n, cls in REGISTRY.items() if cls.family_parameter)


def _listing() -> str:
    def shown(n):
        parameters = [p for p in inspect.signature(REGISTRY[n]).parameters if p != "self"]
        family = REGISTRY[n].family_parameter
        return f"{n}[:<{family}>]({', '.join(parameters)})" if family else f"{n}({', '.join(parameters)})"

    installed = available()[len(REGISTRY):]
    more = f"; installed plugins, loaded on first use: {', '.join(installed)}" if installed else ""
    return f"valid names and their parameters: {'; '.join(shown(n) for n in REGISTRY)}{more}"


def parameters(name: str) -> list[str]:
    """Constructor parameter names of the method ``name`` (without those its name fixes)."""
    cls, fixed = resolve(name)
    return [p for p in inspect.signature(cls).parameters if p != "self" and p not in fixed]


def make(name: str, **params):
    """Build the method ``name`` (a registry name, or ``<family>:<member>``) with keyword ``params``.

    An unknown name or parameter raises ``ValueError`` listing what is valid.
    """
    cls, fixed = resolve(name)
    unknown = sorted(set(params) - set(parameters(name)))
    if unknown:
        raise ValueError(f"{name} has no parameter(s) {unknown}; valid parameters: {parameters(name)}")
    return cls(**fixed, **params)


def restore(name: str, state: dict):
    """The optimizer of the method ``name`` restored from ``state`` (``AskTellOptimizer.state_dict()``).

    The state must have been saved by ``name``'s class (and, for a family member, by that
    member); the class comes from ``name``, never from the state.
    """
    cls, fixed = resolve(name)
    opt = cls.from_state_dict(state)
    for key, value in fixed.items():
        if state["config"].get(key) != value:
            raise ValueError(f"state['config'][{key!r}] is {state['config'].get(key)!r}, but the method is {name!r}")
    return opt


__all__ = ["BES", "CMAES", "GIBO", "INGO", "MMES", "Nevergrad", "SABO", "TuRBO1", "REGISTRY", "REQUIRED_PARAMETERS",
           "PluginError", "available", "find", "get", "imported_plugins", "load_class", "load_plugins", "make",
           "parameters", "register", "resolve", "restore"]
