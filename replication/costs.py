"""Relative run costs (the executors start the longest runs first), from the optimizers' own hints.

A study's ``cost(config)`` states what one objective evaluation costs in its problem; the
optimizer's part comes from the optimizer's class (``rounds_per_iteration``, ``rows_per_ask``,
``cost_per_iteration`` and ``cost_of_iterations``, declared on :class:`sabo.protocol.AskTellOptimizer`), found through
:data:`baselines.REGISTRY` under the name the run engine builds it by. So no study compares
method names, a method that runs a registered optimizer under another label
(``sabo_small_rho: {optimizer: sabo, ...}``) costs what that optimizer costs, and a newly
registered optimizer is costed without touching any study.
"""
from __future__ import annotations

import inspect

import baselines

from .config import RunConfig, iterations
from .errors import UsageError
from .studies import get_study


def optimizer_class(config: RunConfig) -> type:
    """The class of the optimizer ``config`` runs: ``params["optimizer"]`` if given, else the method name.

    The same rule as the run engine's (:func:`replication.engine.execute`); a ``<family>:<member>``
    name gives the family's class, an installed plugin's name loads it (:func:`baselines.find`).
    """
    name = config.params.get("optimizer", config.method)
    cls = baselines.find(name)
    if cls is None:
        raise ValueError(f"{config.label}: method {config.method!r} runs optimizer {name!r}, which is not registered "
                         f"(registered: {sorted(baselines.REGISTRY)}; see baselines.register)")
    return cls


def evaluations_per_iteration(cls: type, dim: int, popsize, params: dict) -> int:
    """Function evaluations of one iteration of ``cls`` at dimension ``dim`` built with constructor
    arguments ``params``: ``rounds_per_iteration`` asks of ``rows_per_ask`` rows (``popsize=None``: the
    class's ``default_popsize``; a centre point adds a row). The budget in evaluations the run engine
    gives an optimizer that takes one (``budget`` = max_iter x this)."""
    return cls.rounds_per_iteration * cls.rows_per_ask(_popsize(cls, dim, popsize), params)


def _popsize(cls: type, dim: int, popsize) -> int:
    """``popsize`` if given, else what the constructor uses without it: its own default where that is a
    number (a plug-in's ``popsize=10``), else the class's ``default_popsize(dim)`` (the built-in
    optimizers' ``popsize=None``)."""
    if popsize is not None:
        return int(popsize)
    parameter = inspect.signature(cls).parameters.get("popsize")
    if parameter is not None and isinstance(parameter.default, int) and not isinstance(parameter.default, bool):
        return parameter.default
    try:
        return cls.default_popsize(dim)
    except ValueError as exc:
        raise UsageError(f"{exc}: its constructor has no numeric popsize default either; set popsize among the "
                         f"method's parameters in params.yaml") from None


def optimizer_popsize(config: RunConfig, dim: int | None) -> int:
    """The population size a run of ``config`` at dimension ``dim`` uses (:func:`_popsize`); raises
    ``UsageError`` where it has none and ``ValueError`` where the method is not registered."""
    return _popsize(optimizer_class(config), dim, config.params.get("popsize"))


def run_cost(config: RunConfig, *, dim: int, eval_cost: float = 0.0) -> float:
    """T iterations (``max_iter``, or as many as fit in ``max_evals``: :func:`replication.config.iterations`):
    the optimizer's own work over them (:meth:`~sabo.protocol.AskTellOptimizer.cost_of_iterations`) + its
    evaluations x ``eval_cost``, in the units of :meth:`~sabo.protocol.AskTellOptimizer.cost_per_iteration`
    (one coordinate of one sample).

    A run with ``max_iter = 0`` has no optimizer (the engine evaluates ``x0`` once, e.g. the
    prompt study's zero-shot row, whose method is not an optimizer): it costs one evaluation.
    """
    if config.budget.get("max_iter") == 0:
        return float(eval_cost)
    cls = optimizer_class(config)
    popsize = _popsize(cls, dim, config.params.get("popsize"))
    evaluations = evaluations_per_iteration(cls, dim, popsize, config.params)
    steps = iterations(config.budget, evaluations)
    return cls.cost_of_iterations(dim, popsize, steps, config.params) + steps * evaluations * eval_cost


def cost_estimate(config: RunConfig) -> float:
    """A run's cost estimate: its study's ``cost(config)``, a negative one counted as 0.

    The executors start the costliest runs first; the ETA calibrates the estimates with measured times
    (:mod:`replication.eta`), so their scale does not matter (the prompt study's are ~1e13).
    """
    return max(float(get_study(config.study).cost(config)), 0.0)


def cost_estimates(configs) -> dict[str, float]:
    """:func:`cost_estimate` of each config, by config hash."""
    return {c.hash: cost_estimate(c) for c in configs}
