"""Sharpness-Aware Black-box Optimization (SABO) with a diagonal Gaussian search distribution.

Quick start::

    import numpy as np, sabo
    res = sabo.minimize(lambda x: np.sum(x**2), x0=np.ones(20), max_iter=300, seed=0)

or drive the optimizer yourself::

    opt = sabo.SABO(x0, sigma0=1.0, popsize=50, seed=0)  # lr: 0.3, rho: 0.05 sqrt(d)
    while opt.nit < 100:
        X = opt.ask()
        opt.tell(X, f(X))
"""
__version__ = "0.2.0"  # the package's release (CHANGELOG.md); no run config holds it

from . import serialization
from .distribution import DiagonalGaussian, kl_diag_gaussians
from .estimators import search_gradients, utilities
from .gaussian_search import GaussianSearch, ingo_default_popsize
from .minimize import OptimizeResult, minimize, run
from .perturbation import closed_form_lambda, exact_lambda, perturbation_from_lambda, perturbation_kl
from .protocol import AskTellOptimizer, NonFiniteValueError
from .sabo import SABO, SettingsWarning
from .schedules import Constant, InvSqrt

#: The version of the results: part of every run config's ``code_version`` (with the optimizer's
#: ``revision``), so of every record's identity. Bump it only for a change that alters every
#: method's results (a problem, the shared protocol); a change to one method bumps that class's
#: ``revision`` instead, and a release that alters no result bumps neither (docs/studies/dvc.md, "Versions").
RESULTS_VERSION = "0.1.0"

__all__ = [
    "SABO", "SettingsWarning", "AskTellOptimizer", "GaussianSearch", "NonFiniteValueError", "OptimizeResult",
    "minimize", "run",
    "ingo_default_popsize",
    "DiagonalGaussian", "kl_diag_gaussians", "search_gradients", "utilities",
    "closed_form_lambda", "exact_lambda", "perturbation_from_lambda", "perturbation_kl",
    "Constant", "InvSqrt", "serialization", "RESULTS_VERSION",
]
