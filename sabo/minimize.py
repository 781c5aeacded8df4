"""Drive any ask/tell optimizer on a vectorised objective; ``sabo.minimize`` for SABO itself, scipy-style.

``sabo.minimize(fun, x0, args=(), *, bounds=None, vectorized=False, ...)`` follows
``scipy.optimize.minimize``'s conventions, and is a custom method of it:
``scipy.optimize.minimize(fun, x0, method=sabo.minimize, tol=..., options={"maxiter": ..., "popsize": ...})``.
``fun(x, *args) -> float`` on one point by default (``vectorized=True``: ``fun(X, *args)`` on a
population ``(n, d) -> (n,)``, one call per ask, which the mini-batch contract of Algorithm 2
needs), ``args`` a tuple (anything else is one argument, as in scipy), ``bounds`` as a sequence of
``(low, high)`` pairs (``None`` for no bound) or a ``scipy.optimize.Bounds``, ``maxiter``/``maxfev``
and ``tol`` as scipy's, ``callback(intermediate_result)`` or ``callback(xk)`` (a true return value
or ``StopIteration`` ends the run), derivatives (``jac``, ``hess``, ``hessp``) accepted and not
used, and the result a ``scipy.optimize.OptimizeResult`` whose ``success`` means converged.

Convergence (:meth:`sabo.protocol.AskTellOptimizer.stop`): the run ends successfully once the
values of a told population span at most ``ftol`` or the population spans at most ``xtol`` in
every coordinate (the search has contracted around its mean); a budget (``max_iter``,
``max_nfev``) or the callback ends it unsuccessfully, as scipy's methods report reaching maxiter.

Bounds (not in the paper; a deviation named in docs/sabo/options.md): SABO's search distribution lives on
R^d, as always, and each sample x is evaluated at its *reflection* into the box, F(T(x)), where
T folds every coordinate back at the bounds (:func:`reflect`: identity inside the box, a mirror
at each bound, period 2 (high - low) when both are finite). F is therefore never evaluated
outside the box, and SABO minimises E[F(T(x))] over the unbounded Gaussian instead of E[F(x)]: the
KL ball of the perturbation and the update are those of the unfolded distribution. The reported
points (``x``, ``x_best``, the history's means, the callback's ``x``) are T of the optimizer's
points; ``intermediate_result.optimizer.mean`` is the unfolded mean (``reflect(opt.mean, low, high)``
maps it into the box). Nevergrad's ``"bouncing"`` bounds and pycma's default boundary handling fold
likewise; clipping would make F flat outside the box, with nothing to pull the mean back.
"""
from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable

import numpy as np
import scipy.optimize

from .protocol import DEFAULT_FTOL, DEFAULT_XTOL, AskTellOptimizer, check_iteration_advanced, checked_mean
from .validation import as_real_array, check_int, check_positive, check_x0, did_you_mean

#: With ``bounds`` and no ``sigma0``, ``sigma0 = BOX_SIGMA0 * (high - low)`` in each coordinate bounded on
#: both sides (1.0 elsewhere), pycma's rule of thumb for a box.
BOX_SIGMA0 = 0.25
#: The largest sigma0 the rule above may give: SABO's search gradients divide by 2 N sigma^2
#: (:func:`sabo.estimators.search_gradients`), which stays finite in float64 for sigma <= 1e150 and
#: any population below 10^7 (a box of width 2e300 gave sigma0 = 5e299, sigma^2 = inf and NaN samples).
#: Wider boxes are refused; an explicit ``sigma0`` is not limited by this.
MAX_BOX_SIGMA0 = 1e150

#: Without ``max_iter``/``maxiter`` or ``max_nfev``/``maxfev``, :func:`minimize` stops at this many evaluations
#: per coordinate (COCO's budgets are counted so; scipy's Nelder-Mead allows 200 d), or earlier at convergence.
DEFAULT_EVALS_PER_DIM = 1000

#: ``status`` -> ``message``, the codes of scipy's Nelder-Mead (0 success, 1 maxfev, 2 maxiter, 99 callback).
STATUS_MESSAGES = {
    0: "converged: {conditions}",
    1: "maximum number of function evaluations reached",
    2: "maximum number of iterations reached",
    99: "stopped by the callback",
}


class OptimizeResult(scipy.optimize.OptimizeResult):
    """Outcome of :func:`run` / :func:`minimize`: a ``scipy.optimize.OptimizeResult``.

    A dict whose keys are also attributes (``res.x is res["x"]``, ``res.keys()``), scipy's own
    class with a shorter ``repr``, so code written for scipy's optimizers reads it unchanged.

    - ``x``: the final mean of the search distribution (the method's estimate), and
      ``fun = F(x)``, evaluated once at the end and included in ``nfev``.
    - ``x_best``, ``fun_best``: the best point evaluated during the run and its value, over every
      evaluation counted in ``nfev``: the told candidates and the final evaluation of ``x``. So
      ``fun_best <= fun``, and a run that tells nothing (``max_iter=0``, or ``max_nfev`` below the
      first ask plus one) has ``x_best = x`` and ``fun_best = fun`` (for SABO, ``x0`` and F(x0)).
      ``opt.x_best``/``opt.f_best`` cover the told candidates only. On a noisy or mini-batch
      objective ``fun_best`` is a lucky draw; ``x`` is the estimate to use.
    - ``nit``, ``nfev``: iterations and function evaluations.
    - ``success``: True when the run converged (``status`` 0: a tolerance of
      :meth:`~sabo.protocol.AskTellOptimizer.stop` held), False when a budget or the callback
      ended it, as scipy reports reaching ``maxiter``; a failure (bad input, non-finite values or
      state) raises instead of returning a result.
    - ``status``, ``message``: why it stopped (:data:`STATUS_MESSAGES`: 0 converged, 1 maxfev,
      2 maxiter, 99 callback, scipy's codes).
    - ``history``: one record per completed iteration, ``{"nit", "nfev", "f_best", "mean"}``
      (``mean`` is a copy of the mean after that iteration, so errors such as ||mean - x*|| can
      be computed afterwards).
    - ``stats``: the optimizer's statistics (e.g. SABO's safeguard counts).
    """

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
        max_nfev: int | None = None, ftol: float | None = None, xtol: float | None = None,
        callback: Callable[[AskTellOptimizer], bool] | None = None, record_mean: bool = True) -> OptimizeResult:
    """Run ``opt`` on ``fun((n, d) array) -> (n,) array`` until it converges or a budget is spent.

    ``fun`` is called exactly once per ask with the whole population, so an objective that
    draws a fresh data batch per call satisfies the mini-batch contract of ``sabo.protocol``.
    After every completed iteration, ``callback(opt)`` is called (a true return value or
    ``StopIteration`` ends the run: status 99), then the tolerances are checked
    (``opt.stop(ftol=ftol, xtol=xtol)``; None leaves one out, both None: no convergence test):
    once one holds the run has converged (status 0, ``success`` True). Otherwise it stops before
    an ask whose evaluation (plus the final evaluation of ``x``) would exceed ``max_nfev``
    (status 1), or after ``max_iter`` iterations (status 2).

    Every optimizer declares how many ask/tell rounds one iteration takes
    (``rounds_per_iteration``: 1, SABO's 2). If ``opt.nit`` has not advanced after that many
    rounds in a row, the optimizer's ``_tell`` does not count iterations and ``max_iter`` would
    never be reached: ``run`` raises ``RuntimeError`` naming the class instead of looping forever
    (with ``max_nfev`` too, where the budget would end the loop, since ``nit`` would be wrong).

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
    for name, tol in (("ftol", ftol), ("xtol", xtol)):
        if tol is not None:
            check_positive(name, tol, allow_zero=True)
    history: list[dict] = []
    start_nit = opt.nit
    status, converged = 2, {}
    stalled = 0  # ask/tell rounds in a row after which opt.nit had not advanced
    while max_iter is None or opt.nit - start_nit < max_iter:
        X = opt.ask()
        if max_nfev is not None and opt.nfev + X.shape[0] + 1 > max_nfev:
            status = 1
            break
        nit_before = opt.nit
        values = _evaluate(fun, X)
        if not np.array_equal(X, opt.ask()):  # ask() again: the unchanged pending population (NaN-free)
            raise ValueError("fun modified its input array X in place; the values it returned may belong to "
                             "the modified points, not to the population the optimizer sampled. Copy X inside "
                             "fun before changing it (e.g. X = X.copy()).")
        opt.tell(X, values)
        if opt.nit > nit_before:
            stalled = 0
            record = {"nit": opt.nit, "nfev": opt.nfev, "f_best": opt.f_best}
            if record_mean:
                record["mean"] = checked_mean(opt)
            history.append(record)
            if callback is not None and _stops(callback, opt):
                status = 99
                break
            if ftol is not None or xtol is not None:
                converged = opt.stop(ftol=ftol, xtol=xtol)
                if converged:
                    status = 0
                    break
        else:
            stalled += 1
            check_iteration_advanced(opt, stalled)
    x = checked_mean(opt)
    fx = float(_evaluate(fun, x[None, :])[0])
    # F(x) is an evaluation of the run (counted in nfev), so x competes for the best point
    x_best, fun_best = (x.copy(), fx) if fx < opt.f_best else (opt.x_best, opt.f_best)
    message = STATUS_MESSAGES[status].format(
        conditions=" and ".join(f"{'the values span' if k == 'ftol' else 'the population spans'} at most {k} = {v:g}"
                                for k, v in converged.items()))
    return OptimizeResult(x=x, fun=fx, x_best=x_best, fun_best=fun_best, nit=opt.nit, nfev=opt.nfev + 1,
                          success=status == 0, status=status, message=message, history=history, stats=opt.stats)


def _stops(callback: Callable, argument) -> bool:
    """Whether ``callback(argument)`` ends the run: it returned a true value or raised ``StopIteration`` (scipy's)."""
    try:
        return bool(callback(argument))
    except StopIteration:
        return True


def reflect(X, low, high) -> np.ndarray:
    """T(X): every coordinate folded into [low_i, high_i] by reflection at the bounds (works on (d,) and (n, d)).

    With both bounds finite, T is the triangle wave of period 2 w (w = high - low):
    t = (x - low) mod 2w, T(x) = low + min(t, 2w - t); with one bound, a single mirror
    (low + |x - low|, or high - |high - x|); with none, the identity. T is continuous, is the
    identity inside the box and maps R^d onto the box.
    """
    X = np.asarray(X, dtype=np.float64)
    has_low, has_high = np.isfinite(low), np.isfinite(high)
    lo, hi = np.where(has_low, low, 0.0), np.where(has_high, high, 0.0)  # finite stand-ins where a bound is absent
    width = np.where(has_low & has_high, hi - lo, 1.0)
    t = np.mod(X - lo, 2.0 * width)
    return np.select([has_low & has_high, has_low, has_high],
                     [lo + np.minimum(t, 2.0 * width - t), lo + np.abs(X - lo), hi - np.abs(hi - X)], X)


def check_bounds(bounds, x0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` arrays of shape (d,) from ``bounds`` (``(low, high)`` pairs, None for no bound, or an
    object with ``lb``/``ub`` such as ``scipy.optimize.Bounds``); ``ValueError`` naming what is wrong."""
    d = x0.size
    if hasattr(bounds, "lb") and hasattr(bounds, "ub"):
        low, high = (as_real_array(f"bounds.{k}", getattr(bounds, k)) for k in ("lb", "ub"))
        if low.shape not in ((), (1,), (d,)) or high.shape not in ((), (1,), (d,)):
            raise ValueError(f"bounds.lb and bounds.ub must be scalars or have shape ({d},) (got {low.shape} and "
                             f"{high.shape})")
        low, high = np.broadcast_to(low, (d,)).copy(), np.broadcast_to(high, (d,)).copy()
    else:
        pairs = list(bounds) if isinstance(bounds, (list, tuple, np.ndarray)) else None
        if pairs is None or len(pairs) != d or not all(np.ndim(pair) == 1 and len(pair) == 2 for pair in pairs):
            raise ValueError(f"bounds must be a sequence of d = {d} (low, high) pairs (None for no bound) or a "
                             f"scipy.optimize.Bounds (got {bounds!r})")
        low = as_real_array("bounds (low)", [-np.inf if low is None else low for low, _ in pairs])
        high = as_real_array("bounds (high)", [np.inf if high is None else high for _, high in pairs])
    if np.any(np.isnan(low) | np.isnan(high)) or np.any(low == np.inf) or np.any(high == -np.inf):
        raise ValueError("bounds must be real numbers with low < +inf and high > -inf (None or -inf/inf: no bound)")
    bad = np.flatnonzero(~(low < high))
    if bad.size:
        raise ValueError(f"bounds must have low < high in every coordinate; not at indices {bad[:10].tolist()}")
    with np.errstate(over="ignore"):
        overflow = np.flatnonzero(np.isfinite(low) & np.isfinite(high) & ~np.isfinite(high - low))
    if overflow.size:  # reflect() folds with period 2 (high - low)
        raise ValueError(f"bounds must have a width high - low that is finite in float64 (< 1.8e308); not at indices "
                         f"{overflow[:10].tolist()} (a box this wide bounds nothing: give None for no bound)")
    outside = np.flatnonzero((x0 < low) | (x0 > high))
    if outside.size:
        i = outside[0]
        raise ValueError(f"x0 must lie within bounds; x0[{i}] = {float(x0[i])!r} is outside "
                         f"[{float(low[i])!r}, {float(high[i])!r}] "
                         f"(indices outside: {outside[:10].tolist()})")
    return low, high


def _per_point(fun: Callable, args: tuple) -> Callable[[np.ndarray], np.ndarray]:
    """The vectorised form of ``fun(x, *args) -> float``: one call per row."""
    def vectorised(X: np.ndarray) -> np.ndarray:
        values = np.empty(X.shape[0])
        for j, x in enumerate(X):
            value = np.asarray(fun(x, *args))
            if value.size != 1:
                raise ValueError(f"fun(x) returned shape {value.shape} for a point of shape {x.shape}; with "
                                 "vectorized=False fun takes one point (d,) and returns a number (pass "
                                 "vectorized=True for fun((n, d)) -> (n,))")
            values[j] = as_real_array("fun(x)", value).reshape(())
        return values
    return vectorised


#: scipy's names for :func:`minimize`'s budgets (``options={"maxiter": ...}`` reaches a custom method as keywords)
SCIPY_ALIASES = {"maxiter": "max_iter", "maxfev": "max_nfev"}


def _scipy_options(options, settings: dict, explicit: dict) -> tuple[dict, dict]:
    """``explicit`` (:func:`minimize`'s own keyword arguments) and ``settings`` (the others) after folding in scipy's
    ``options`` dict and its names ``maxiter``/``maxfev``; a value given twice raises ``TypeError``."""
    if options is not None:
        if not isinstance(options, dict):
            raise TypeError(f"options must be a dict of keyword arguments (got {type(options).__name__})")
        twice = sorted(set(options) & set(settings))
        if twice:
            raise TypeError(f"minimize() got {', '.join(map(repr, twice))} both as keyword(s) and in options")
        settings = {**settings, **options}
    settings = dict(settings)
    for alias, name in SCIPY_ALIASES.items():
        if alias in settings:
            if name in settings or explicit[name] is not _DEFAULTS[name]:
                raise TypeError(f"minimize() got both {name!r} and scipy's {alias!r}; give one")
            settings[name] = settings.pop(alias)
    out = dict(explicit)
    for name in explicit:
        if name in settings:
            if explicit[name] is not _DEFAULTS[name]:
                raise TypeError(f"minimize() got {name!r} twice: as a keyword and in options")
            out[name] = settings.pop(name)
    return out, settings


def _scipy_callback(callback: Callable, low, high) -> Callable[[AskTellOptimizer], bool]:
    """``run``'s ``callback(opt)`` calling a scipy-style ``callback``: ``callback(intermediate_result)`` when that is
    its only parameter's name (scipy's rule), else ``callback(xk)``, with the mean (folded into the box)."""
    try:
        parameters = set(inspect.signature(callback).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: the old-style callback(xk)
        parameters = set()

    def per_iteration(opt: AskTellOptimizer):
        x = checked_mean(opt) if low is None else reflect(checked_mean(opt), low, high)
        if parameters == {"intermediate_result"}:
            x_best = opt.x_best if low is None else reflect(opt.x_best, low, high)
            return callback(intermediate_result=OptimizeResult(x=x, x_best=x_best, fun_best=opt.f_best, nit=opt.nit,
                                                               nfev=opt.nfev, optimizer=opt))
        return callback(x)
    return per_iteration


def minimize(fun: Callable, x0, args=(), *, bounds=None, vectorized: bool = False, max_iter: int | None = None,
             max_nfev: int | None = None, tol: float | None = None, ftol: float | None = None,
             xtol: float | None = None, callback=None, record_mean: bool = True, options: dict | None = None,
             jac=None, hess=None, hessp=None, constraints=(), disp: bool = False, **settings) -> OptimizeResult:
    """Minimise ``fun`` with :class:`sabo.SABO` built from ``x0`` and ``settings``; see :func:`run`.

    A custom method of ``scipy.optimize.minimize`` (``method=sabo.minimize``), and callable the same way directly:

    - ``fun(x, *args) -> float`` takes one point of shape (d,), or, with ``vectorized=True``,
      ``fun(X, *args)`` takes a population (n, d) and returns its n values, once per ask
      (Algorithm 2's mini-batch contract needs this form: one batch per call). ``args`` is a tuple;
      anything else is passed as one argument, as scipy does.
    - ``bounds``: ``(low, high)`` per coordinate (``None``: unbounded) or a ``scipy.optimize.Bounds``;
      samples are evaluated at their reflection into the box (module docstring: a deviation from
      the paper), and ``x``, ``x_best``, the history's means and the callback's ``x`` are reported
      in the box. ``x0`` must lie within the bounds; ``sigma0`` defaults to :data:`BOX_SIGMA0` times
      each bounded coordinate's width (SABO's 1.0 would spread the samples over several folds of a
      unit box; a width whose default would exceed :data:`MAX_BOX_SIGMA0` is refused: give
      ``sigma0`` then). ``constraints`` other than none are refused (SABO handles bounds only).
    - Budget: ``max_iter`` (scipy's ``maxiter``) iterations, ``max_nfev`` (``maxfev``) evaluations;
      neither given: ``max_nfev`` = :data:`DEFAULT_EVALS_PER_DIM` d.
    - Convergence: ``ftol`` and ``xtol`` (default ``tol``, else pycma's 1e-11:
      :meth:`~sabo.protocol.AskTellOptimizer.stop`); ``success`` is True when one held.
    - ``callback(intermediate_result)`` (scipy's rule: that parameter name alone) receives an
      :class:`OptimizeResult` with ``x`` (the mean), ``x_best``, ``fun_best``, ``nit``, ``nfev`` and
      ``optimizer`` (F(x) is not evaluated per iteration: it would cost an evaluation), any other
      callback ``callback(xk)`` the mean; either ends the run by returning a true value or raising
      ``StopIteration``.
    - ``jac``, ``hess``, ``hessp``: accepted, not used (SABO uses no derivatives; a ``RuntimeWarning``
      says so, as scipy's derivative-free methods do); ``jac=True`` (``fun`` returns ``(f, g)``)
      uses ``f``. ``disp=True`` prints the outcome, as scipy's methods.
    - ``options``: a dict of the keyword arguments above and SABO's, scipy's way.

    Any other keyword argument must be one of SABO's (``sigma0``, ``popsize``, ``lr``, ``rho``, ...);
    an unknown one raises ``TypeError`` suggesting the closest names (``Popsize``: ``popsize``).
    """
    from .sabo import SABO

    own = [p for p in inspect.signature(minimize).parameters if p not in ("fun", "x0", "settings")]
    sabo_options = [p for p in inspect.signature(SABO).parameters if p != "x0"]
    explicit, settings = _scipy_options(options, settings, {
        "max_iter": max_iter, "max_nfev": max_nfev, "tol": tol, "ftol": ftol, "xtol": xtol, "vectorized": vectorized,
        "record_mean": record_mean, "disp": disp})
    max_iter, max_nfev, tol, ftol, xtol, vectorized, record_mean, disp = explicit.values()
    unknown = [key for key in settings if key not in sabo_options]
    if unknown:
        wrong = ", ".join(f"{key!r}{did_you_mean(key, own + sabo_options)}" for key in unknown)
        raise TypeError(f"minimize() got unexpected keyword argument(s) {wrong}; its own are {', '.join(own)} (and "
                        f"scipy's maxiter, maxfev), and SABO's options are {', '.join(sabo_options)}")
    if not isinstance(vectorized, (bool, np.bool_)):
        raise ValueError(f"vectorized must be True or False (got {vectorized!r})")
    if not (constraints is None or isinstance(constraints, (list, tuple, dict)) and len(constraints) == 0):
        raise ValueError("SABO handles bounds, not constraints: pass bounds=..., or add a penalty to fun "
                         f"(got constraints={constraints!r})")
    used = [name for name, value in (("jac", jac), ("hess", hess), ("hessp", hessp)) if value is not None
            and value is not False]
    if used:
        warnings.warn(f"SABO does not use derivatives ({', '.join(used)})", RuntimeWarning, stacklevel=2)
    if tol is not None:
        check_positive("tol", tol, allow_zero=True)
    ftol = (DEFAULT_FTOL if tol is None else tol) if ftol is None else ftol
    xtol = (DEFAULT_XTOL if tol is None else tol) if xtol is None else xtol
    args = args if isinstance(args, tuple) else (args,)  # scipy's rule: a list is one argument
    point = (lambda x, *a: fun(x, *a)[0]) if jac is True else fun  # scipy's jac=True: fun returns (f, gradient)
    objective = (lambda X: point(X, *args)) if vectorized else _per_point(point, args)
    x0 = check_x0(x0)
    low = high = None
    if bounds is not None:
        low, high = check_bounds(bounds, x0)
        if "sigma0" not in settings:  # pycma's advice for a box: a step size of about a quarter of its width
            sigma0 = np.where(np.isfinite(high - low), BOX_SIGMA0 * (high - low), 1.0)
            wide = np.flatnonzero(sigma0 > MAX_BOX_SIGMA0)
            if wide.size:
                raise ValueError(f"bounds are too wide for the default sigma0 = {BOX_SIGMA0:g} (high - low) at indices "
                                 f"{wide[:10].tolist()} (it would be {float(sigma0[wide[0]]):.3g} > "
                                 f"{MAX_BOX_SIGMA0:g}, where SABO's estimates overflow float64): give sigma0, or None "
                                 "for no bound")
            settings["sigma0"] = sigma0
        inner = objective

        def objective(X):
            return inner(reflect(X, low, high))
    if max_iter is None and max_nfev is None:
        max_nfev = DEFAULT_EVALS_PER_DIM * x0.size
    opt = SABO(x0, **settings)
    res = run(opt, objective, max_iter=max_iter, max_nfev=max_nfev, ftol=ftol, xtol=xtol,
              callback=None if callback is None else _scipy_callback(callback, low, high), record_mean=record_mean)
    if bounds is not None:
        res.x, res.x_best = reflect(res.x, low, high), reflect(res.x_best, low, high)
        for record in res.history:
            if "mean" in record:
                record["mean"] = reflect(record["mean"], low, high)
    if disp:
        print(f"{res.message}\n         Current function value: {res.fun:.6g}\n         Iterations: {res.nit}\n"
              f"         Function evaluations: {res.nfev}")
    return res


_DEFAULTS = {p.name: p.default for p in inspect.signature(minimize).parameters.values()
             if p.default is not inspect.Parameter.empty}
