"""A result over seeds, as the reports give it: the mean and sample standard deviation (ddof = 1) of
the seeds that did not diverge, with how many ran and how many diverged. One seed has no standard
deviation (NaN, shown as "(1 seed)", never as "± 0.00")."""
from __future__ import annotations

import numpy as np


def over_seeds(values, diverged: int) -> dict:
    """``{"mean", "std", "seeds", "diverged"}`` of the finished seeds' ``values`` and ``diverged`` more;
    mean NaN when every seed diverged, std NaN below two finished seeds."""
    v = np.asarray(values, dtype=float)
    return {"mean": float(np.mean(v)) if v.size else np.nan, "std": float(np.std(v, ddof=1)) if v.size > 1 else np.nan,
            "seeds": int(v.size + diverged), "diverged": int(diverged)}


def seeds_text(summary: dict, *, bold: bool = False) -> str:
    """'mean ± std' (``bold``: in markdown bold), '(1 seed)' where one finished, the diverged seeds in
    brackets; 'diverged (n/n seeds)' when none finished."""
    n, diverged = summary["seeds"], summary["diverged"]
    if diverged == n:
        return f"diverged ({n}/{n} seeds)"
    finished = n - diverged
    number = f"{summary['mean']:.2f}" + ("" if finished == 1 else f" ± {summary['std']:.2f}")
    notes = (["1 seed"] if finished == 1 else []) + ([f"{diverged}/{n} seeds diverged"] if diverged else [])
    return (f"**{number}**" if bold else number) + (f" ({'; '.join(notes)})" if notes else "")
