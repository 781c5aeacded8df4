"""Plot helpers shared by the studies' reports (matplotlib, headless)."""
from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

METHOD_STYLE = {
    "sabo": ("SABO", "tab:red"),
    "ingo": ("INGO", "tab:blue"),
    "bes": ("BES", "tab:green"),
    "cmaes": ("CMA-ES", "tab:purple"),
    "mmes": ("MMES", "tab:orange"),
    "sabo_small_rho": ("SABO, rho <= 1 (deviation)", "tab:brown"),
    "sabo_inverse": ("SABO, radius 1/rho (deviation)", "tab:pink"),
    "turbo": ("TuRBO-1", "tab:olive"),
    "gibo": ("GIBO", "tab:cyan"),
    "zero_shot": ("Zero-shot", "tab:gray"),
}


def method_label(method: str) -> str:
    return METHOD_STYLE.get(method, (method, None))[0]


def log_band(ax, curves: list[tuple[np.ndarray, np.ndarray]], method: str) -> None:
    """Geometric mean over seeds (a line) and the min-max range (a band) of positive y values.

    Seeds share their x grid; a seed that stopped early (diverged) is padded with NaN and
    drops out of the statistics from there on.
    """
    label, color = METHOD_STYLE.get(method, (method, None))
    length = max(len(x) for x, _ in curves)
    x = next(x for x, _ in curves if len(x) == length)
    logs = np.full((len(curves), length), np.nan)
    for i, (_, y) in enumerate(curves):
        with np.errstate(divide="ignore", invalid="ignore"):
            logs[i, : len(y)] = np.log10(np.where(np.asarray(y) > 0, y, np.nan))
    logs[~np.isfinite(logs)] = np.nan
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns after a seed diverged
        centre, low, high = np.nanmean(logs, 0), np.nanmin(logs, 0), np.nanmax(logs, 0)
    ax.plot(x, 10**centre, color=color, label=label, lw=1.4)
    ax.fill_between(x, 10**low, 10**high, color=color, alpha=0.2, lw=0)


def new_figure(ncols: int, title: str):
    fig, axes = plt.subplots(1, ncols, figsize=(4.0 * ncols, 3.4), squeeze=False)
    fig.suptitle(title, fontsize=11)
    return fig, axes[0]


def save(fig, path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
