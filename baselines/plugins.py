"""Optimizers from other packages: installed entry points, and ``module:Class`` names a parameter file allows.

Both routes end in :func:`baselines.register`, under the class's own ``name``, so that everything
downstream (run configs, records, checkpoints, saved states) names the optimizer by its registry
name only:

* **Entry points** (an installed package; the public route). The package declares, in its
  ``pyproject.toml``::

      [project.entry-points."sabo_bench.optimizers"]
      local_search = "my_package.search:LocalSearch"

  The entry point's name must be the class's registry name (``LocalSearch.name``), so that a
  name can be resolved by loading only its own plugin: :func:`baselines.find` loads it the first
  time the name is looked up and is not registered yet; :func:`baselines.load_plugins` loads all.
  Entry points are installed metadata: importing one is importing installed code, as any import.
* **``module:Class``** (a module on the Python path, nothing installed): :func:`import_class`
  imports ``module`` only when it is listed in an explicit allow-list (``params.yaml``:
  ``plugins: {allow: [my_package.search], optimizers: ["my_package.search:LocalSearch"]}``).

A plugin that cannot be loaded raises :class:`PluginError` with one line naming it (the entry
point and its distribution, or the ``module:Class``) and saying what is wrong.

What is *never* imported: anything named in a record, a checkpoint or a saved optimizer state.
:meth:`sabo.protocol.AskTellOptimizer.from_state_dict` looks the saved name up in
:data:`sabo.protocol.OPTIMIZERS` only (no entry point, no import), and the run engine takes the
optimizer's name from the run's own config (which comes from ``params.yaml``, not from the file).
"""
from __future__ import annotations

import functools
import importlib
import importlib.metadata
import re
import sys

from sabo.protocol import AskTellOptimizer

#: The entry-point group an installed package declares its optimizers in.
ENTRY_POINT_GROUP = "sabo_bench.optimizers"

_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class PluginError(ValueError):
    """An optimizer plugin could not be loaded; the message is one line that names it."""


def is_module_path(value) -> bool:
    """True for a dotted module path such as ``my_package.search``."""
    return isinstance(value, str) and _MODULE.fullmatch(value) is not None


def class_path(spec) -> tuple[str, str] | None:
    """``(module, attribute)`` of ``spec`` = ``"package.module:Class"``, or None when it is not of that form."""
    module, sep, attr = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    return (module, attr) if sep and is_module_path(module) and attr.isidentifier() else None


def entry_points() -> dict[str, list[importlib.metadata.EntryPoint]]:
    """The group's entry points by name, from the installed metadata (nothing is imported).

    Read once per ``sys.path`` (scanning every installed distribution takes milliseconds, and
    a name that is no optimizer, such as a zero-shot row's, is looked up once per run config).
    """
    return dict(_scan(tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def _scan(path: tuple[str, ...]) -> dict[str, list]:
    found: dict[str, list] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, []).append(ep)
    return found


def describe(ep) -> str:
    """``entry point 'name' = 'module:Class' (group ..., distribution ...)``: how error messages name one."""
    dist = getattr(ep, "dist", None)
    where = f", distribution {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {ep.name!r} = {ep.value!r} (group {ENTRY_POINT_GROUP}{where})"


def load_entry_point(name: str, candidates: list) -> type:
    """The optimizer class of the entry point ``name`` (one of ``candidates``, all declaring that name)."""
    if len(candidates) > 1:
        raise PluginError(f"optimizer plugin {name!r} is declared by several entry points: "
                          f"{'; '.join(describe(ep) for ep in candidates)}; uninstall all but one")
    [ep] = candidates
    try:
        obj = ep.load()
    except Exception as exc:  # whatever the plugin's import raises: one line, naming the plugin
        raise PluginError(f"{describe(ep)} cannot be loaded: {_one_line(exc)}") from exc
    cls = checked_class(obj, describe(ep))
    if cls.__dict__.get("name") != name:
        raise PluginError(f"{describe(ep)}: the entry point's name must be the class's registry name "
                          f"{cls.__dict__.get('name')!r}")
    return cls


def import_class(spec, allow) -> type:
    """The optimizer class named by ``spec`` = ``"package.module:Class"``, if ``package.module`` is in ``allow``.

    ``allow`` lists exact module names (a package does not allow its submodules): the explicit
    setting without which nothing named in a parameter file is imported.
    """
    parsed = class_path(spec)
    if parsed is None:
        raise PluginError(f"{spec!r} is not of the form 'package.module:Class'")
    module, attr = parsed
    if module not in allow:
        listed = ", ".join(allow) or "empty"
        raise PluginError(f"{spec!r}: module {module!r} is not in the allow-list ({listed}); list it under "
                          "plugins.allow to let it be imported")
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:  # whatever the module's import raises: one line, naming the plugin
        raise PluginError(f"{spec!r}: module {module!r} cannot be imported: {_one_line(exc)}") from exc
    if not hasattr(loaded, attr):
        raise PluginError(f"{spec!r}: module {module!r} has no attribute {attr!r}")
    return checked_class(getattr(loaded, attr), repr(spec))


def checked_class(obj, what: str) -> type:
    """``obj`` if it is an optimizer class with a registry name of its own, else :class:`PluginError`."""
    if not (isinstance(obj, type) and issubclass(obj, AskTellOptimizer)):
        raise PluginError(f"{what} is {obj!r}, not a subclass of sabo.protocol.AskTellOptimizer")
    if obj.__dict__.get("name") is None:
        raise PluginError(f"{what}: {obj.__qualname__} declares no registry name (class attribute name = '...')")
    return obj


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
