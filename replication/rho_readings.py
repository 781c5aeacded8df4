"""The rho question: how far SABO's perturbation moves the search distribution under each reading of rho.

SABO's closed form (eq. sec31_5) makes rho the radius of a KL ball, which moves the mean about
rho standard deviations in Mahalanobis norm (at most sqrt(2) rho); the paper's theorems assume
rho < sqrt(d)/2, while its image and prompt grids use rho >= 10. A study runs SABO under each
reading (``rho_reading`` in a method's grid, ``sabo.perturbation``) and its report shows, from
this module, what the perturbation did:

* :func:`measured` -- from run records: per rho value, the mean Mahalanobis norm of delta_mu
  over the iterations of each run (``stats["perturbation_mahalanobis_sum"] / nit``) and the
  share of iterations in which the perturbation-round safeguard acted;
* :func:`predicted` -- without a run: one perturbation round of SABO at mu_0 on a flat
  (pure-noise) objective, the regime of a first iteration on a noisy objective, for a grid the
  study has not run (the prompt study's ``gpu`` profile on a machine without a GPU).

One piece of code for every study that asks the question; the studies only choose the labels.
"""
from __future__ import annotations

import warnings
from collections import defaultdict

import numpy as np

from sabo import SABO, SettingsWarning
from sabo.perturbation import kl_radius


def sabo_variants(methods: dict) -> dict[str, str]:
    """Label -> rho reading of every method of a study's ``methods`` that runs SABO."""
    return {label: grid.get("rho_reading", "paper") for label, grid in methods.items()
            if grid.get("optimizer", label) == "sabo"}


def measured(records: list[dict], labels, dim) -> dict[tuple[str, float, int], dict]:
    """(label, rho, d) -> {"moved": [per-run mean ||Sigma^-1/2 delta_mu||], "safeguard": [per-run share]}.

    ``dim(problem)``: the search dimension d of a run's problem entry (the study's own rule).
    Runs that did not complete one iteration are left out.
    """
    out: dict = defaultdict(lambda: {"moved": [], "safeguard": []})
    for r in records:
        c = r["config"]
        if c["method"] not in labels:
            continue
        stats, nit = r["result"]["stats"], r["result"]["final"].get("nit", 0)
        if nit < 1 or "perturbation_mahalanobis_sum" not in stats:
            continue
        slot = out[(c["method"], float(c["params"]["rho"]), dim(c["problem"]))]
        slot["moved"].append(stats["perturbation_mahalanobis_sum"] / nit)
        slot["safeguard"].append(stats["safeguard_perturbation"] / nit)
    return dict(out)


def predicted(dim: int, popsize: int, sigma0: float, rho: float, reading: str, seeds=range(5)) -> dict:
    """One perturbation round at mu_0 = 0 on i.i.d. N(0, 1) objective values (a flat, noisy objective).

    Returns the KL radius, the mean over ``seeds`` of ||Sigma^-1/2 delta_mu|| and the share of
    seeds in which the safeguard acted.
    """
    moved, clamped = [], []
    for seed in seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SettingsWarning)  # large radii are what this measures
            opt = SABO(np.zeros(dim), sigma0=sigma0, popsize=popsize, rho=rho, rho_reading=reading, seed=seed)
            X = opt.ask()
            opt.tell(X, np.random.default_rng([seed, 1]).standard_normal(X.shape[0]))
        moved.append(opt.stats["perturbation_mahalanobis"])
        clamped.append(opt.stats["safeguard_perturbation"] > 0)
    return {"radius": kl_radius(rho, reading), "moved": float(np.mean(moved)), "safeguard": float(np.mean(clamped))}


def theorem_bound(dim: int) -> float:
    """sqrt(d)/2: the theorems' assumption is rho < sqrt(d)/2."""
    return 0.5 * float(np.sqrt(dim))


def sizes_table(rows: list[tuple[str, str, float, int, dict]], label_of) -> list[str]:
    """Markdown table from ``(label, reading, rho, d, {"moved", "safeguard", ...})`` rows.

    ``moved``/``safeguard`` are numbers (predicted) or lists over runs (measured: median and range shown).
    """
    lines = ["| method | reading | rho | KL radius | d | sqrt(d)/2 | mean moved (sd) | safeguard acted |",
             "|---|---|---|---|---|---|---|---|"]
    for label, reading, rho, dim, v in rows:
        lines.append(f"| {label_of(label)} | {reading} | {rho:g} | {kl_radius(rho, reading):.3g} | {dim} | "
                     f"{theorem_bound(dim):.3g} | {_spread(v['moved'], '{:.3g}')} | "
                     f"{_spread(v['safeguard'], '{:.0%}')} |")
    return lines


def _spread(values, fmt: str) -> str:
    if np.isscalar(values):
        return fmt.format(values)
    values = np.asarray(values, dtype=float)
    if values.size == 1 or np.ptp(values) == 0:
        return fmt.format(np.median(values))
    return f"{fmt.format(np.median(values))} ({fmt.format(values.min())}-{fmt.format(values.max())})"
