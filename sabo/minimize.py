"""Drive any ask/tell optimizer on a vectorised objective; ``sabo.minimize`` for SABO itself."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .protocol import AskTellOptimizer
from .validation import check_int

STATUS_MESSAGES = {
    0: "maximum number of iterations reached",
    1: "maximum number of function evaluations reached",
    2: "stopped by callback",
}


class OptimizeResult(dict):
    """Outcome of :func:`run` / :func:`minimize`, used like ``scipy.optimize.OptimizeResult``.

    A dict whose keys are also attributes (``res.x is res["x"]``, ``res.keys()``), as scipy's
    is, so code written for scipy's optimizers reads it unchanged.

    - ``x``: the final mean of the search distribution (the method's estimate), and
      ``fun = F(x)``, evaluated once at the end and included in ``nfev``.
    - ``x_best``, ``fun_best``: the best candidate evaluated during the run and its value (on a
      noisy or mini-batch objective, a lucky draw; ``x`` is the estimate to use).
    - ``nit``, ``nfev``: iterations and function evaluations.
    - ``success``: True. A run stops only on a budget or the callback, both normal ends; a
      failure (bad input, non-finite values or state) raises instead of returning a result.
    - ``status``, ``message``: why it stopped (:data:`STATUS_MESSAGES`).
    - ``history``: one record per completed iteration, ``{"nit", "nfev", "f_best", "mean"}``
      (``mean`` is a copy of the mean after that iteration, so errors such as ||mean - x*|| can
      be computed afterwards).
    - ``stats``: the optimizer's statistics (e.g. SABO's safeguard counts).
    """

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    __setattr__ = dict.__setitem__
    __delattr__ = dict.__delitem__

    def __dir__(self):
        return list(self.keys())

    def __repr__(self):
        """The scalars and ``x``'s shape: the history holds a mean per iteration, too long to print."""
        shown = {k: v for k, v in self.items() if k not in ("x", "x_best", "history", "stats")}
        fields = [f"x=<array of shape {np.shape(self.get('x'))}>", *(f"{k}={v!r}" for k, v in shown.items()),
                  f"history=<{len(self.get('history', ()))} records>"]
        return f"OptimizeResult({', '.join(fields)})"


def _evaluate(fun: Callable, X: np.ndarray) -> np.ndarray:
    values = np.asarray(fun(X), dtype=np.float64)
    if values.shape != (X.shape[0],):
        raise ValueError(f"fun returned shape {values.shape} for a population of shape {X.shape}; "
                         f"expected ({X.shape[0]},)")
    return values


def run(opt: AskTellOptimizer, fun: Callable[[np.ndarray], np.ndarray], *, max_iter: int | None = None,
        max_nfev: int | None = None, callback: Callable[[AskTellOptimizer], bool] | None = None,
        record_mean: bool = True) -> OptimizeResult:
    """Run ``opt`` on ``fun((n, d) array) -> (n,) array`` until a budget is spent.

    ``fun`` is called exactly once per ask with the whole population, so an objective that
    draws a fresh data batch per call satisfies the mini-batch contract of ``sabo.protocol``.
    The run stops before an ask whose evaluation (plus the final evaluation of ``x``) would
    exceed ``max_nfev``, after ``max_iter`` iterations, or when ``callback(opt)`` returns a
    true value (checked after every completed iteration).

    ``fun`` must not modify its argument: an objective that changes ``X`` in place raises
    ``ValueError`` saying so. ``run`` detects this rather than passing ``fun`` a private copy,
    because the values of a modified ``X`` may belong to the modified points, and silently
    telling them for the sampled ones would corrupt the search without a trace.
    """
    if max_iter is None and max_nfev is None:
        raise ValueError("give at least one of max_iter and max_nfev")
    if max_iter is not None:
        check_int("max_iter", max_iter, minimum=0)
    if max_nfev is not None:
        check_int("max_nfev", max_nfev, minimum=1)
    history: list[dict] = []
    start_nit = opt.nit
    status = 0
    while max_iter is None or opt.nit - start_nit < max_iter:
        X = opt.ask()
        if max_nfev is not None and opt.nfev + X.shape[0] + 1 > max_nfev:
            status = 1
            break
        nit_before = opt.nit
        values = _evaluate(fun, X)
        if not np.array_equal(X, opt.ask(), equal_nan=True):  # ask() again: the unchanged pending population
            raise ValueError("fun modified its input array X in place; the values it returned may belong to "
                             "the modified points, not to the population the optimizer sampled. Copy X inside "
                             "fun before changing it (e.g. X = X.copy()).")
        opt.tell(X, values)
        if opt.nit > nit_before:
            record = {"nit": opt.nit, "nfev": opt.nfev, "f_best": opt.f_best}
            if record_mean:
                record["mean"] = opt.mean
            history.append(record)
            if callback is not None and callback(opt):
                status = 2
                break
    x = opt.mean
    fx = float(_evaluate(fun, x[None, :])[0])
    return OptimizeResult(x=x, fun=fx, x_best=opt.x_best, fun_best=opt.f_best, nit=opt.nit, nfev=opt.nfev + 1,
                          success=True, status=status, message=STATUS_MESSAGES[status], history=history,
                          stats=opt.stats)


def minimize(fun: Callable[[np.ndarray], np.ndarray], x0, *, max_iter: int | None = None,
             max_nfev: int | None = None, callback=None, record_mean: bool = True, **options) -> OptimizeResult:
    """Minimise ``fun`` with :class:`sabo.SABO` built from ``x0`` and ``options``; see :func:`run`."""
    from .sabo import SABO

    return run(SABO(x0, **options), fun, max_iter=max_iter, max_nfev=max_nfev, callback=callback,
               record_mean=record_mean)
