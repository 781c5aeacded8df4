"""Plot helpers shared by the studies' reports (matplotlib, headless), made for papers.

* Colours from the Okabe-Ito palette (Okabe and Ito 2008, "Color Universal Design"), which stays
  distinguishable under the common colour-vision deficiencies, and a distinct marker and line
  style per method, so that curves are told apart in grey-scale print too.
* Labels in matplotlib mathtext (``$\\rho$``); :func:`method_label` gives the plain-text name for
  tables.
* One legend per figure, below the panels (:func:`save`), never over data; every panel has its
  axis labels.
* Every figure is written twice: a PNG for the Markdown reports and an SVG (vector) copy beside
  it for papers, both without time stamps so that re-rendering the same data gives the same files.
"""
from __future__ import annotations

import io
import warnings
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from .storage import atomic_write_bytes

matplotlib.rcParams["svg.hashsalt"] = "sabo-bench"  # stable element ids: identical data, identical SVG

OKABE_ITO = {"black": "#000000", "orange": "#E69F00", "sky blue": "#56B4E9", "bluish green": "#009E73",
             "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish purple": "#CC79A7",
             "grey": "#999999"}

#: method -> (plain-text label for tables, mathtext label for figures, colour, marker, line style)
METHOD_STYLE = {
    "sabo": ("SABO", "SABO", OKABE_ITO["vermillion"], "o", "-"),
    "ingo": ("INGO", "INGO", OKABE_ITO["blue"], "s", "--"),
    "bes": ("BES", "BES", OKABE_ITO["bluish green"], "^", "-."),
    "cmaes": ("CMA-ES", "CMA-ES", OKABE_ITO["reddish purple"], "D", ":"),
    "mmes": ("MMES", "MMES", OKABE_ITO["orange"], "v", (0, (5, 1, 1, 1))),
    "sabo_small_rho": ("SABO, rho <= 1 (deviation)", r"SABO, $\rho \leq 1$ (deviation)", OKABE_ITO["black"], "P",
                       (0, (3, 1))),
    "sabo_inverse": ("SABO, radius 1/rho (deviation)", r"SABO, radius $1/\rho$ (deviation)", OKABE_ITO["sky blue"],
                     "X", (0, (1, 1))),
    "turbo": ("TuRBO-1", "TuRBO-1", OKABE_ITO["grey"], "*", (0, (6, 2))),
    "gibo": ("GIBO", "GIBO", OKABE_ITO["yellow"], "h", (0, (2, 2, 6, 2))),
    "zero_shot": ("Zero-shot", "Zero-shot", OKABE_ITO["grey"], "x", ":"),
}
#: colours of methods without an entry (a plug-in's): none is close to a colour of METHOD_STYLE (at least
#: 0.29 apart in RGB, in [0, 1]^3; matplotlib's default C0 is 0.12 from INGO's blue), nor to one another
#: (at least 0.32): Paul Tol's indigo, wine, olive, teal, green, then brown, lavender and magenta
FALLBACK_COLORS = ("#332288", "#882255", "#999933", "#44AA99", "#117733", "#8C510A", "#AA99FF", "#E000E0")
#: markers of methods without an entry, none of them one of METHOD_STYLE's
FALLBACK_MARKERS = ("p", "<", ">", "d", "H", "8", "+", "1")
_fallback_slots: dict[str, int] = {}  # method without an entry -> its slot, fixed at its first request


def declared(method: str) -> type | None:
    """The optimizer class registered as ``method`` (an installed plugin's is loaded), whose ``display_name`` and
    ``color`` a method without an entry in :data:`METHOD_STYLE` is shown with; None for a label that is no
    registry name (``sabo_inverse``, ``zero_shot``) or a plugin that cannot be loaded."""
    import baselines

    try:
        return baselines.find(method)
    except baselines.PluginError:
        return None


def method_label(method: str) -> str:
    """The method's name in plain text (Markdown tables): :data:`METHOD_STYLE`'s, else the ``display_name`` its
    class declares, else ``method``."""
    if method in METHOD_STYLE:
        return METHOD_STYLE[method][0]
    cls = declared(method)
    return cls.display_name if cls is not None and cls.display_name else method


def grid_text(grid: dict | None) -> str:
    """A method's grid from ``params.yaml`` for a report's setup: ``defaults`` when empty, a null value
    as ``default`` (the optimizer's own, e.g. MMES's population 4 + floor(3 ln d))."""
    if not grid:
        return "defaults"
    return "{" + ", ".join(f"{k}: {'default' if v is None else v}" for k, v in grid.items()) + "}"


def style(method: str) -> dict:
    """Keyword arguments of ``Axes.plot`` for ``method``: mathtext label, colour, marker, line style.

    A method without an entry (e.g. one a user registered) is labelled and coloured as its class
    declares (``display_name``, ``color``: :class:`sabo.protocol.AskTellOptimizer`); what it does not
    declare comes from :data:`FALLBACK_COLORS` and :data:`FALLBACK_MARKERS`, so it is still
    distinguishable from the known methods and from other such methods (:func:`_fallback_slot`)."""
    if method in METHOD_STYLE:
        _, tex, color, marker, ls = METHOD_STYLE[method]
        return {"label": tex, "color": color, "marker": marker, "linestyle": ls}
    cls = declared(method)
    slot, n = _fallback_slot(method), len(FALLBACK_COLORS)
    return {"label": method_label(method), "color": (cls.color if cls is not None and cls.color else
                                                     FALLBACK_COLORS[slot % n]),
            "marker": FALLBACK_MARKERS[(slot + slot // n) % n], "linestyle": "-"}


def _fallback_slot(method: str) -> int:
    """The style slot of a method without an entry, the same for the process's lifetime: the slot its
    name's CRC-32 points to, or the next free one if another such method took that slot first (so up
    to len(FALLBACK_COLORS) of them get distinct colours and markers; beyond that, distinct pairs)."""
    if method not in _fallback_slots:
        n, taken = len(FALLBACK_COLORS), set(_fallback_slots.values())
        start = zlib.crc32(method.encode()) % n
        free = [slot for slot in ((start + i) % n for i in range(n)) if slot not in taken]
        _fallback_slots[method] = free[0] if free else len(_fallback_slots)
    return _fallback_slots[method]


def median_band(ax, curves: list[tuple[np.ndarray, np.ndarray]], method: str, *, markers: int = 8) -> None:
    """The median over seeds (a line with ``markers`` markers) and the min-max range (a band) of
    positive y values, for a log-scaled y axis.

    Seeds share their x grid; a seed that stopped early (diverged) is padded with NaN and drops
    out of the statistics from there on. Non-positive or non-finite values count as missing.
    """
    length = max(len(x) for x, _ in curves)
    x = next(x for x, _ in curves if len(x) == length)
    ys = np.full((len(curves), length), np.nan)
    for i, (_, y) in enumerate(curves):
        y = np.asarray(y, dtype=float)
        ys[i, : len(y)] = np.where(np.isfinite(y) & (y > 0), y, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns after every seed stopped
        centre, low, high = np.nanmedian(ys, 0), np.nanmin(ys, 0), np.nanmax(ys, 0)
    kw = style(method)
    line, = ax.plot(x, centre, lw=1.4, ms=4, markevery=_mark_every(x, markers), **kw)
    ax.fill_between(x, low, high, color=line.get_color(), alpha=0.18, lw=0)


def _mark_every(x: np.ndarray, count: int):
    """Indices of ``count`` points evenly spaced along a log axis (the grids are log-spaced)."""
    x = np.asarray(x, dtype=float)
    positive = np.flatnonzero(x > 0)
    if positive.size <= count:
        return None
    targets = np.logspace(np.log10(x[positive[0]]), np.log10(x[-1]), count)
    return sorted({int(np.argmin(np.abs(x - t))) for t in targets})


def new_figure(ncols: int, title: str):
    # at least 6.5 in wide: the title and the shared legend need the room even for one panel
    fig, axes = plt.subplots(1, ncols, figsize=(max(3.6 * ncols, 6.5), 3.3), squeeze=False)
    fig.suptitle(title, fontsize=11)
    return fig, axes[0]


def save(fig, path) -> list[Path]:
    """Add the figure's one shared legend below the panels, write ``path`` (PNG) and its SVG copy,
    each atomically (:func:`replication.storage.atomic_write_bytes`), close the figure; returns both paths."""
    handles, labels = {}, []
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in handles:
                handles[label] = h
                labels.append(label)
    fig.tight_layout()
    if labels:
        ncol = min(len(labels), max(1, int(fig.get_figwidth() / 2.1)))  # about 2.1 in per entry
        rows = -(-len(labels) // ncol)
        legend_in = 0.22 * rows + 0.1
        height = fig.get_figheight()
        top_in, bottom_in = (1 - fig.subplotpars.top) * height, fig.subplotpars.bottom * height
        fig.set_figheight(height + legend_in)  # grow the figure: the panels keep their size
        fig.subplots_adjust(top=1 - top_in / fig.get_figheight(),
                            bottom=(bottom_in + legend_in) / fig.get_figheight())
        fig.legend([handles[label] for label in labels], labels, loc="lower center", ncol=ncol, fontsize=8,
                   frameon=False, bbox_to_anchor=(0.5, 0.0))
    path = Path(path)
    vector = path.with_suffix(".svg")
    try:
        for target, options in ((path, {"format": "png", "dpi": 110, "metadata": {"Software": None}}),
                                (vector, {"format": "svg", "metadata": {"Date": None, "Creator": None}})):
            # rendered in memory, then written atomically: a full disk or a kill mid-write leaves the old figure
            buffer = io.BytesIO()
            fig.savefig(buffer, **options)
            atomic_write_bytes(target, buffer.getvalue())
    finally:
        plt.close(fig)
    return [path, vector]
