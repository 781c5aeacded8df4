"""The four synthetic test functions of the paper's appendix (eqs. test_1-test_4), vectorised.

Every function takes a population ``X`` of shape (n, d) (a single point of shape (d,) is
also accepted) and returns the n values. The optimum is x* = 0 for the first three
(F(x*) = 0) and x* = 1 for Levy (F(x*) = 0).
"""
from __future__ import annotations

import numpy as np


def _pop(X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    return X[None, :] if X.ndim == 1 else X


def _weights(d: int) -> np.ndarray:
    """10^(2(i-1)/(d-1)), i = 1..d (all ones when d = 1)."""
    return 10.0 ** (2.0 * np.arange(d) / max(d - 1, 1))


def ellipsoid(X) -> np.ndarray:
    """Eq. (test_1): sum_i 10^{2(i-1)/(d-1)} x_i^2."""
    X = _pop(X)
    return (X * X) @ _weights(X.shape[1])


def l12_ellipsoid(X) -> np.ndarray:
    """sum_i 10^{2(i-1)/(d-1)} |x_i|^{1/2} (non-smooth at the optimum)."""
    X = _pop(X)
    return np.sqrt(np.abs(X)) @ _weights(X.shape[1])


def different_powers(X) -> np.ndarray:
    """sqrt(sum_i |x_i|^{2 + 4 (i-1)/(d-1)})."""
    X = _pop(X)
    d = X.shape[1]
    powers = 2.0 + 4.0 * np.arange(d) / max(d - 1, 1)
    return np.sqrt(np.sum(np.abs(X) ** powers, axis=1))


def levy(X) -> np.ndarray:
    """Eq. (test_4) with w_i = 1 + (x_i - 1)/4.

    The paper writes the middle term as (w_i - 1)^2 (1 + 10 sin^2(w_i pi + 1)); we follow
    it literally (the usual Levy definition has the same form).
    """
    X = _pop(X)
    w = 1.0 + (X - 1.0) / 4.0
    head = np.sin(np.pi * w[:, 0]) ** 2
    mid = np.sum((w[:, :-1] - 1.0) ** 2 * (1.0 + 10.0 * np.sin(np.pi * w[:, :-1] + 1.0) ** 2), axis=1)
    tail = (w[:, -1] - 1.0) ** 2 * (1.0 + np.sin(2.0 * np.pi * w[:, -1]) ** 2)
    return head + mid + tail


FUNCTIONS = {
    "ellipsoid": (ellipsoid, 0.0),
    "l12_ellipsoid": (l12_ellipsoid, 0.0),
    "different_powers": (different_powers, 0.0),
    "levy": (levy, 1.0),
}
"""name -> (function, value of every coordinate of x*)."""
