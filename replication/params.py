"""The schema of ``params.yaml``: shared pieces, reading, validation and one-line error messages.

Each study declares its section as a pydantic model next to its code
(:mod:`replication.synthetic.params`, :mod:`replication.image.params`,
:mod:`replication.prompt.params`; registered in :data:`SCHEMAS`), built from the pieces here:

* :class:`Section`: strict types (YAML's ``"01"`` is not 1, ``true`` is not 1), unknown keys
  refused with the list of allowed ones, one field per key;
* :class:`StudySection`: ``profile`` + ``profiles``, the active profile among the profiles,
  and a hook (:meth:`StudySection.checks`) for the cross-references of each study (a profile
  naming a setting that does not exist, ...). References are checked for the *active* profile
  (after ``--profile``): the others are checked for structure, and for their references when
  they become active;
* leaf types that carry their allowed range in their error message (:data:`Seeds`,
  :data:`PosInt`, :data:`PositiveFloat`, :data:`Name`, ...);
* method grids (:func:`methods_field`): mappings of optimizer parameter -> value (a value, a
  list of values to search, or a mapping such as SABO's ``rho`` schedule), whose method names and
  parameters are checked against :data:`baselines.REGISTRY` (``optimizer: <registered name>``
  runs a registered optimizer under another label; ``optimizer: nevergrad:NGOpt`` a family member);
* ``plugins`` (:class:`PluginsSection`, top level): optimizer classes of other modules, imported
  by ``module:Class`` only when their module is in its explicit ``allow`` list.

:func:`validate_params` checks a whole file (or some sections) before anything runs and raises
:class:`replication.errors.UsageError` with one line per problem, e.g.::

    params.yaml: synthetic.profiles.full.seeds = '01': must be a list of integers >= 0
    params.yaml: synthetic.settings: key '../x' is not a valid name (letters, digits, '_', '-', '.';
        not starting with '.')
"""
from __future__ import annotations

import importlib
import math
import re
from typing import Annotated

import yaml
from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    FiniteFloat,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .errors import UsageError
from .names import is_valid_name, name_problem

#: study -> "module:Model" of its section of params.yaml
SCHEMAS = {"synthetic": "replication.synthetic.params:SyntheticParams",
           "image": "replication.image.params:ImageParams",
           "prompt": "replication.prompt.params:PromptParams",
           "bbob": "replication.bbob.params:BbobParams"}

_RULE = "params_rule"   # a leaf's value is outside its allowed range; the message says what is allowed
_AT = "params_at"       # a problem found by a check below the location pydantic reports (ctx: _at, _value, _key)


# -- building blocks -----------------------------------------------------------------------------
def rule(message: str) -> WrapValidator:
    """Replace whatever pydantic says about a value by ``message`` (which states what is allowed)."""
    def check(value, handler):
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError(_RULE, message) from None
    return WrapValidator(check)


def at(where: tuple, value, message: str, *, key: bool = False) -> PydanticCustomError:
    """An error about ``value`` at ``where`` below the location being validated (``key``: the key itself)."""
    return PydanticCustomError(_AT, message, {"_at": tuple(where), "_value": value, "_key": key})


def _name(value):
    if not is_valid_name(value):
        raise PydanticCustomError(_RULE, name_problem(value))
    return value


Name = Annotated[str, WrapValidator(lambda v, handler: _name(v))]
NonNegInt = Annotated[int, Ge(0), rule("must be an integer >= 0")]
PosInt = Annotated[int, Ge(1), rule("must be an integer >= 1")]
Popsize = Annotated[int, Ge(2), rule("must be an integer >= 2")]
PositiveFloat = Annotated[FiniteFloat, Gt(0), rule("must be a finite number > 0")]
Fraction = Annotated[FiniteFloat, Gt(0), Lt(1), rule("must be a number in (0, 1)")]
Rate = Annotated[FiniteFloat, Ge(0), Le(1), rule("must be a number in [0, 1]")]
Text = Annotated[str, MinLen(1), rule("must be a non-empty string")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$"),
                   rule("must be 64 lower-case hex digits (a SHA-256)")]


def _distinct(values):
    if len(set(values)) != len(values):
        raise PydanticCustomError(_RULE, "must not repeat a value")
    return values


Seeds = Annotated[list[Annotated[int, Ge(0)]], rule("must be a list of integers >= 0"), AfterValidator(_distinct)]
NameList = Annotated[list[Name], AfterValidator(_distinct)]   # each name's error is reported at its index
Rates = Annotated[list[Annotated[FiniteFloat, Ge(0), Le(1)]], rule("must be a list of numbers in [0, 1]"),
                  AfterValidator(_distinct)]


def one_of(*choices: str):
    """A string among ``choices``."""
    def check(value):
        if not isinstance(value, str) or value not in choices:
            raise PydanticCustomError(_RULE, f"must be one of {', '.join(choices)}")
        return value
    return Annotated[str, WrapValidator(lambda v, handler: check(v))]


class Section(BaseModel):
    """A mapping of params.yaml with declared keys: strict types, unknown keys refused."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data):
        if isinstance(data, dict):
            for key in data:
                if key not in cls.model_fields:
                    raise at((key,), data[key], f"unknown key (allowed here: {', '.join(cls.model_fields)})")
        return data


class StudySection(Section):
    """A study's section: ``profile`` names one of ``profiles``; :meth:`checks` cross-references the rest."""

    profile: Name

    @model_validator(mode="after")
    def _cross_check(self):
        if self.profile not in self.profiles:  # every study declares `profiles: dict[Name, <its profile>]`
            raise at(("profile",), self.profile, f"must be one of the profiles ({', '.join(self.profiles)})")
        for where, value, message in self.checks():
            raise at(where, value, message)
        return self

    @property
    def active(self):
        return self.profiles[self.profile]

    def checks(self):
        """Yield ``(where, value, message)`` for each cross-reference that does not hold (the first is reported)."""
        return iter(())

    def names(self) -> dict[str, set[str]]:
        """The names ``--setting``, ``--method`` and ``--function`` may take for this study."""
        raise NotImplementedError


def references(where: tuple, names, known, what: str):
    """``(where + (i,), name, message)`` for each of ``names`` that is not among ``known``."""
    for i, name in enumerate(names):
        if name not in known:
            yield where + (i,), name, f"is not {what} ({', '.join(known) or 'none defined'})"


# -- method grids --------------------------------------------------------------------------------
Scalar = StrictBool | StrictInt | FiniteFloat | StrictStr
# null passes None: the optimizer's own default (e.g. MMES's population size in the image study)
GridValue = Annotated[None | Scalar | Annotated[list[Scalar], MinLen(1)] | dict[StrictStr, Scalar],
                      rule("must be null (the optimizer's default), a number, string or boolean, a non-empty list "
                           "of those, or a mapping of those")]


def _grid_mapping(value, handler):
    if not isinstance(value, dict):
        raise PydanticCustomError(_RULE, "must be a mapping of optimizer parameter -> value (empty for the defaults)")
    return handler(value)


Grid = Annotated[dict[StrictStr, GridValue], WrapValidator(_grid_mapping)]
#: the optimizer's constructor arguments that the engine passes itself (``budget`` only to an optimizer that takes one)
ENGINE_ARGUMENTS = ("x0", "seed", "budget")
#: "module:Class" -> the constructor argument whose string values that optimizer (and any subclass) evaluates
#: as Python: pycma ``eval()``s string-valued options (``maxfevals: "9**9**8"`` hung the check of the
#: parameters before a study until killed), and :mod:`baselines.cmaes` refuses to save them in a checkpoint
EVALUATED_STRINGS = {"baselines.cmaes:CMAES": "options"}


def _evaluated_strings(cls: type) -> str | None:
    """The argument of :data:`EVALUATED_STRINGS` for ``cls`` or one of its bases, or None."""
    for base in cls.__mro__:
        param = EVALUATED_STRINGS.get(f"{base.__module__}:{base.__qualname__}")
        if param is not None:
            return param
    return None


def _strings_refused(where: tuple, value):
    """An error for the first string inside ``value`` (a grid value: scalar, list or mapping), else None."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(item, str):
            return at(where + (key,), item, "must not be a string: pycma evaluates string-valued options as Python "
                                            "expressions; give the value itself (a number or boolean)")
    return None


def _method_labels(value, handler):
    """A method name is a path component (runs/<study>/<setting>/<method>/): a ``family:member``
    optimizer runs under a label of its own, which the message says how to give."""
    if isinstance(value, dict):
        for key in value:
            if isinstance(key, str) and ":" in key:
                label = re.sub(r"[^A-Za-z0-9_.-]", "_", key).strip("._") or "label"
                raise at((key,), value[key], f"{name_problem(key)}; a method named family:member runs under a "
                                             f"label of its own: `{label}: {{optimizer: '{key}'}}`", key=True)
    return handler(value)


def methods_field(*, lists: bool, reserved: tuple[str, ...] = ()):
    """The type of a study's ``methods``: method name -> parameter grid, checked against baselines.REGISTRY.

    ``lists``: whether the study expands lists into a grid search (image, prompt) or passes every
    value to the optimizer as is (synthetic). ``reserved``: names the study uses itself. A method
    is a registered optimizer's name, an installed plugin's (loaded here, :func:`baselines.find`),
    or a label whose grid says ``optimizer: <name>`` (a registered name or ``<family>:<member>``).
    """
    def check(methods: dict) -> dict:
        import baselines

        registry = ", ".join(baselines.available())
        for name, grid in methods.items():
            if name in reserved:
                raise at((name,), grid, "is reserved by the study; choose another name", key=True)
            optimizer = grid.get("optimizer", name)
            is_key = "optimizer" not in grid
            where, value = ((name,), grid) if is_key else ((name, "optimizer"), optimizer)
            try:
                known = baselines.find(optimizer) is not None
                if known:
                    baselines.resolve(optimizer)  # a family member the family has
            except ValueError as exc:  # a plugin that cannot be loaded, a member the family lacks
                # a key's message follows its name ("key 'x' <message>"): the error needs a verb of its own
                raise at(where, value, f"cannot be used: {exc}" if is_key else str(exc), key=is_key) from None
            if not known and not is_key:
                raise at(where, value, f"must be a registered optimizer ({registry})")
            if not known:
                raise at(where, value, f"is not a registered optimizer ({registry}); to run one under another "
                                       "label, set `optimizer: <registered name>` in its grid", key=True)
            allowed = [p for p in baselines.parameters(optimizer) if p not in ENGINE_ARGUMENTS]
            evaluated = _evaluated_strings(baselines.get(optimizer))
            for param, value in grid.items():
                if param == "optimizer":
                    continue
                if param not in allowed:
                    raise at((name, param), value, f"is not a parameter of {optimizer} (allowed: {', '.join(allowed)})",
                             key=True)
                if isinstance(value, list) and not lists:
                    raise at((name, param), value, "must be a single value: this study runs one configuration per "
                                                   "method (lists are not expanded into a grid)")
                refused = _strings_refused((name, param), value) if param == evaluated else None
                if refused is not None:
                    raise refused
        return methods

    return Annotated[dict[Name, Grid], WrapValidator(_method_labels), AfterValidator(check)]


# -- optimizers from other modules ---------------------------------------------------------------
def _module_path(value):
    from baselines.plugins import is_module_path

    if not is_module_path(value):
        raise PydanticCustomError(_RULE, "must be a module path (dotted names, e.g. my_package.search)")
    return value


def _class_path(value):
    from baselines.plugins import class_path

    if class_path(value) is None:
        raise PydanticCustomError(_RULE, "must be 'package.module:Class' (a dotted module path, a colon, a class name)")
    return value


ModulePath = Annotated[StrictStr, WrapValidator(lambda v, handler: _module_path(handler(v)))]
ClassPath = Annotated[StrictStr, WrapValidator(lambda v, handler: _class_path(handler(v)))]


class PluginsSection(Section):
    """``plugins:`` at the top level of params.yaml: optimizer classes imported by ``module:Class``.

    ``optimizers`` lists ``package.module:Class`` names; each module must be listed in ``allow``
    (exact module names), the explicit setting without which nothing named in the file is
    imported. Each class is registered under its own ``name`` (:func:`baselines.load_class`),
    which is all that methods, run configs, records and checkpoints refer to it by. Installed
    packages need no entry here: their entry points (``sabo_bench.optimizers``) are found by name.
    """

    allow: Annotated[list[ModulePath], AfterValidator(_distinct)] = []
    optimizers: Annotated[list[ClassPath], AfterValidator(_distinct)] = []

    @model_validator(mode="after")
    def _allowed(self):
        for i, spec in enumerate(self.optimizers):
            module = spec.partition(":")[0]
            if module not in self.allow:
                raise at(("optimizers", i), spec, f"module {module!r} is not in plugins.allow "
                                                  f"({', '.join(self.allow) or 'empty'}); list it there to let it be "
                                                  "imported")
        return self


PLUGINS = "plugins"


def load_plugins(raw, source: str) -> list[str]:
    """Validate the ``plugins`` section ``raw`` and register its optimizers; one line per problem (empty: none)."""
    import baselines

    try:
        section = PluginsSection.model_validate(raw)
    except ValidationError as exc:
        return [format_error(err, source, (PLUGINS,)) for err in exc.errors()]
    lines = []
    for i, spec in enumerate(section.optimizers):
        try:
            baselines.load_class(spec, section.allow)
        except ValueError as exc:  # PluginError: import failed, not an optimizer class, name taken
            reason = str(exc)  # PluginError's messages about a spec start with the spec itself
            shown = reason if reason.startswith(repr(spec)) else f"{spec!r}: {reason}"
            lines.append(f"{source}: {PLUGINS}.optimizers[{i}] = {shown}")
    return lines


# -- reading, validating, reporting --------------------------------------------------------------
def schema(study: str) -> type[StudySection]:
    module, _, model = SCHEMAS[study].partition(":")
    return getattr(importlib.import_module(module), model)


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases (``*name``) as it meets them.

    An alias shares its anchor's node, so a few lines of aliases of aliases describe 10^7 leaves
    ("billion laughs"): loading is cheap, but anything that walks the result (validation, a
    message that shows a refused value) expands them, which took 20 s and 260 MB before the
    refusal. params.yaml needs no aliases; refusing them bounds every later walk by the size of
    the file itself.
    """

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"aliases (*{event.anchor}) are not allowed in a parameter file; write the value out",
                event.start_mark)
        return super().compose_node(parent, index)


def read_params(path) -> dict:
    """The mapping in the YAML file ``path``; a one-line :class:`UsageError` if it cannot be one
    (aliases, ``*name``, are refused: :class:`_NoAliasLoader`)."""
    try:
        with open(path) as fh:
            raw = yaml.load(fh, Loader=_NoAliasLoader)  # a SafeLoader: no Python objects
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the parameter file ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{path}: not valid YAML: {what}{where}") from None
    if raw is None:
        raise UsageError(f"{path}: the file is empty (expected the sections {', '.join(SCHEMAS)})")
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: must be a mapping of study sections ({', '.join(SCHEMAS)}), "
                         f"not a {type(raw).__name__}")
    return raw


def validate_params(raw: dict, *, source: str = "params.yaml", studies=None) -> dict[str, StudySection]:
    """Validate the sections ``studies`` of ``raw`` (default: every section present).

    Returns study -> validated model; raises :class:`UsageError` with one line per problem. The
    sections named in ``studies`` must be present; top-level keys must be study names or
    ``plugins``, whose optimizers are imported and registered first (:class:`PluginsSection`).
    """
    lines = [f"{source}: {key} = {_show(value)}: unknown key (allowed here: {', '.join([*SCHEMAS, PLUGINS])})"
             for key, value in raw.items() if key not in SCHEMAS and key != PLUGINS]
    if PLUGINS in raw:  # before the studies: their methods may name the optimizers it registers
        problems = load_plugins(raw[PLUGINS], source)
        if problems:  # the studies' checks would only repeat them as unknown methods
            raise UsageError("\n".join(lines + problems))
    wanted = list(SCHEMAS if studies is None else studies)
    models = {}
    for study in wanted:
        if study not in raw:
            if studies is not None:
                present = ", ".join(str(k) for k in raw) or "none"
                lines.append(f"{source}: {study}: section missing (the file has: {present})")
            continue
        try:
            models[study] = schema(study).model_validate(raw[study])
        except ValidationError as exc:
            lines.extend(format_error(err, source, (study,)) for err in exc.errors())
    if lines:
        raise UsageError("\n".join(lines))
    return models


def format_error(err: dict, source: str, prefix: tuple = ()) -> str:
    """One line from one pydantic error: ``<source>: <key path> = <value>: <what is allowed>``."""
    loc, value, kind = prefix + tuple(err["loc"]), err.get("input"), err["type"]
    message, is_key = err["msg"], False
    if kind == _AT:
        ctx = err["ctx"]
        loc, value, is_key = loc + tuple(ctx["_at"]), ctx["_value"], ctx["_key"]
    elif loc and loc[-1] == "[key]":
        loc, is_key = loc[:-1], True
    elif kind == "missing":
        return f"{source}: {_path(loc)}: required key missing"
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        message = "must be a mapping"
    elif kind == "list_type":
        message = "must be a list"
    elif message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if is_key:
        return f"{source}: {_path(loc[:-1])}: key {_show_key(loc[-1])} {message}"
    return f"{source}: {_path(loc)} = {_show(value)}: {message}"


def _path(loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) and not isinstance(part, bool) else f".{part}"
    return out.lstrip(".") or "(top level)"


def _show_key(key) -> str:
    return repr(key)


def _show(value, limit: int = 80) -> str:
    text = repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        text = str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def selectable(study: str, section: dict) -> dict[str, set[str]]:
    """The names ``--setting``/``--method``/``--function`` may take, from a study's (valid) section."""
    return schema(study).model_validate(section).names()


__all__ = ["SCHEMAS", "PLUGINS", "PluginsSection", "load_plugins",
           "Section", "StudySection", "Name", "NameList", "NonNegInt", "PosInt", "Popsize",
           "PositiveFloat", "Fraction", "Rate", "Rates", "Seeds", "Text", "Grid", "one_of", "rule", "at",
           "references", "methods_field", "schema", "read_params", "validate_params", "format_error", "selectable"]
