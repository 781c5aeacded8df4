"""Report of the prompt-tuning study: Tables 1 and 2 laid out as in the paper, ours beside the paper's.

Selection (the paper does not state it): for each (task, d, method) the hyperparameter
configuration with the highest mean *dev* metric over seeds is reported with the mean +- std of
its test metric (accuracy; F1 for MRPC), in %. ``params.yaml: prompt.selection`` decides which
prompt of a run counts: ``best_dev`` (the mean with the best few-shot dev metric over the run;
its dev metric drives the grid selection too) or ``final`` (the last mean and its dev metric).
The other rule is reported in a second table. Every cell we have no result for says why.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

import baselines
from replication import figures, rho_readings
from replication.claims import (
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    count_line,
    evaluate,
    load_claims,
    render_markdown,
    write_report,
)
from replication.config import RunConfig, canonical_json
from replication.engine import provenance_summary
from replication.figures import grid_text
from replication.seeds import over_seeds, seeds_text

from .options import option
from .runs import REPORT_NAME, configs
from .tasks import TASKS, ZERO_SHOT

HERE = Path(__file__).parent
CLAIMS_FILE = HERE / "claims.yaml"
PAPER_FILE = HERE / "paper_tables.yaml"
TABLE1_METHODS = ["cmaes", "mmes", "bes", "ingo", "sabo"]
TABLE2_METHODS = ["gibo", "turbo", "sabo"]
# the record keys of each selection rule: (dev metric that selects, test metric reported)
RULES = {"best_dev": ("best_dev_metric", "test_metric_best_dev"), "final": ("dev_metric", "test_metric_final")}


def _hp_label(params: dict) -> str:
    hp = {k: v for k, v in params.items() if k not in ("sigma0", "popsize", "optimizer", "device")}
    return ", ".join(f"{k}={v}" for k, v in sorted(hp.items())) or "defaults"


def _run_scores(record: dict, rule: str) -> tuple[float, float] | None:
    """(dev metric, test metric) of a run under ``rule``; None for a diverged run (it is not scored)."""
    if record["result"]["status"] != "completed":
        return None
    dev_key, test_key = RULES[rule]
    ev = record["result"]["final_evaluation"]
    dev = ev[dev_key] if dev_key in ev else record["result"]["final"][dev_key]
    return float(dev), float(ev[test_key])


def select(records: list[dict], rule: str) -> dict:
    """(task, setting, method) -> the configuration with the best mean dev metric over seeds, in %."""
    groups: dict = defaultdict(lambda: defaultdict(lambda: {"dev": [], "test": [], "params": None, "diverged": 0}))
    for r in records:
        c = RunConfig.from_dict(r["config"])
        if c.method == ZERO_SHOT:
            continue
        slot = groups[(c.problem["name"], c.setting, c.method)][canonical_json(c.params)]
        slot["params"] = c.params
        scores = _run_scores(r, rule)
        if scores is None:
            slot["diverged"] += 1
            continue
        slot["dev"].append(scores[0])
        slot["test"].append(scores[1])
    out = {}
    for key, grid in groups.items():
        # fewest diverged seeds first, then the best mean dev metric; ties: the first configuration
        best = max(grid.values(), key=lambda s: (-s["diverged"], np.mean(s["dev"]) if s["dev"] else -np.inf))
        out[key] = {"params": best["params"], **over_seeds(100 * np.asarray(best["test"], dtype=float),
                                                           best["diverged"]),
                    "dev": 100 * float(np.mean(best["dev"])) if best["dev"] else np.nan}
    return out


def zero_shot(records: list[dict]) -> dict:
    """task -> test metric (%) of the zero-shot evaluation."""
    return {r["config"]["problem"]["name"]: 100 * r["result"]["final_evaluation"]["test_metric_final"]
            for r in records if r["config"]["method"] == ZERO_SHOT}


class Context:
    def __init__(self, selected: dict, tasks: list[str], settings: list[str]):
        self.selected, self.tasks, self.settings = selected, tasks, settings

    def cells(self, methods) -> list[tuple[str, str]]:
        return [(t, s) for t in self.tasks for s in self.settings
                if all((t, s, m) in self.selected for m in methods)]

    def mean(self, task, setting, method) -> float:
        mean = self.selected[(task, setting, method)]["mean"]
        return -np.inf if np.isnan(mean) else mean  # every seed diverged: below everyone


def check_best_everywhere(check, ctx: Context):
    m, against = check["method"], check["against"]
    them = ", ".join(figures.method_label(b) for b in against)
    op = f"{figures.method_label(m)}'s mean test metric above {them} in every (task, d) cell"
    missing = [b for b in against if b not in baselines.REGISTRY]
    if missing:
        return NOT_RUN, op, f"{', '.join(figures.method_label(b) for b in missing)} not implemented in this suite yet"
    cells = ctx.cells([m, *against])
    if not cells:
        return NOT_RUN, op, "no (task, d) cell has results for all of these methods"
    losses = [f"{TASKS[t].display_name} {s} "
              f"(best: {figures.method_label(max(against, key=lambda b: ctx.mean(t, s, b)))})"
              for t, s in cells if not all(ctx.mean(t, s, m) > ctx.mean(t, s, b) for b in against)]
    meas = f"above in {len(cells) - len(losses)}/{len(cells)} cells with results (the paper: 18)"
    if losses:
        meas += f"; not in: {', '.join(losses)}"
    return (NOT_REPRODUCED if losses else REPRODUCED), op, meas


def check_best_overall(check, ctx: Context):
    m = check["method"]
    cells = [tuple(c) for c in check["cells"]]
    names = ", ".join(f"{TASKS[t].display_name} {s}" for t, s in cells)
    op = f"{figures.method_label(m)} highest of all Table 1 methods at every d in: {names}"
    ok, bad, missing = 0, [], []
    for t, s in cells:
        rivals = [(s2, b) for s2 in ctx.settings for b in TABLE1_METHODS if (t, s2, b) in ctx.selected]
        if (t, s, m) not in ctx.selected or len(rivals) < len(ctx.settings) * len(TABLE1_METHODS):
            missing.append(f"{TASKS[t].display_name} {s}")
            continue
        top = max(rivals, key=lambda sb: ctx.mean(t, *sb))
        if top == (s, m):
            ok += 1
        else:
            bad.append(f"{TASKS[t].display_name} {s} (best: {figures.method_label(top[1])} at {top[0]})")
    if missing and not ok and not bad:
        return NOT_RUN, op, f"incomplete results for {', '.join(missing)}"
    meas = f"highest in {ok}/{len(cells)}"
    if bad:
        meas += f"; not in: {', '.join(bad)}"
    if missing:
        meas += f"; incomplete: {', '.join(missing)}"
    return (REPRODUCED if ok == len(cells) else NOT_REPRODUCED), op, meas


CHECKERS = {"best_everywhere": check_best_everywhere, "best_overall": check_best_overall}


class Reasons:
    """Footnotes saying why a cell has no result of ours."""

    def __init__(self, p: dict, profile: str, prof: dict):
        self.p, self.profile, self.prof = p, profile, prof
        self.used: dict[str, str] = {}

    def _mark(self, text: str) -> str:
        if text not in self.used:
            self.used[text] = f"({chr(ord('a') + len(self.used))})"
        return self.used[text]

    def why(self, task: str, setting: str | None, method: str) -> str:
        prof = self.prof
        if method not in baselines.REGISTRY and method != ZERO_SHOT:
            text = (f"{figures.method_label(method)} is not implemented in this suite yet "
                    "(registry: `baselines.REGISTRY`)")
        elif task not in prof["tasks"] or (setting is not None and setting not in prof.get("dims", self.p["dims"])) \
                or (method not in (ZERO_SHOT, *prof.get("methods", self.p["methods"]))):
            text = (f"not in the active profile `{self.profile}`" +
                    (" (the offline default: a prompt run needs a GPU, `roberta-large` and the six data sets; "
                     "run the `gpu` profile on such a machine, see docs/studies/prompt-gpu.md)"
                     if not prof["tasks"] else ""))
        else:
            text = "in the profile, but no record yet: run `sabo-bench run prompt` (or `dvc repro`)"
        return f"not run {self._mark(text)}"

    def legend(self) -> list[str]:
        return [f"- {mark} {text}" for text, mark in self.used.items()]


def _cell(ours, paper_cell, reason) -> str:
    mine = reason if ours is None else seeds_text(ours, bold=True)
    if paper_cell is None:
        return mine
    return f"{mine} (paper {paper_cell[0]:.2f} ± {paper_cell[1]:.2f})"


def _table(selected, paper_rows, zero, paper_zero, methods, settings, tasks, reasons: Reasons) -> list[str]:
    head = "| method | " + " | ".join(TASKS[t].display_name + (" (F1)" if TASKS[t].metric == "f1" else "")
                                     for t in tasks) + " |"
    lines = [head, "|---" * (len(tasks) + 1) + "|"]
    row = ["Zero-shot"]
    for t in tasks:
        mine = f"**{zero[t]:.2f}**" if t in zero else reasons.why(t, None, ZERO_SHOT)
        row.append(f"{mine} (paper {paper_zero[t]:.2f})")
    lines.append("| " + " | ".join(row) + " |")
    for s in settings:
        lines.append(f"| *d = {s[1:]}* |" + " |" * len(tasks))
        for m in methods:
            row = [figures.method_label(m)]
            for t in tasks:
                ours = selected.get((t, s, m))
                paper_cell = paper_rows.get(s, {}).get(m, {}).get(t)
                row.append(_cell(ours, paper_cell, None if ours else reasons.why(t, s, m)))
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _cell_table(selected, tasks, settings, methods, fmt) -> list[str]:
    """One row per (task, d) with any result, one column per method, ``fmt(cell)`` in each."""
    lines = ["| task | d | " + " | ".join(figures.method_label(m) for m in methods) + " |",
             "|---" * (len(methods) + 2) + "|"]
    for t in tasks:
        for s in settings:
            cells = [selected.get((t, s, m)) for m in methods]
            if any(cells):
                lines.append(f"| {TASKS[t].display_name} | {s[1:]} | "
                             + " | ".join("-" if c is None else fmt(c) for c in cells) + " |")
    return lines


def rho_section(p: dict, records: list[dict]) -> list[str]:
    """"The rho question": the perturbation size of every SABO reading in ``prompt.methods`` at each d,
    predicted on the CPU (no run needed), and measured from the records when there are any."""
    variants = rho_readings.sabo_variants(p["methods"])
    dims = sorted(int(d) for d in p["dims"].values())
    rows = [(m, reading, float(rho), d, rho_readings.predicted(d, int(p["popsize"]), float(p["sigma0"]), rho, reading))
            for m, reading in variants.items() for rho in p["methods"][m]["rho"] for d in dims]
    md = ["## The rho question: SABO's perturbation under each reading of rho", "",
          "The closed form as printed (eq. sec31_5) moves the mean about rho standard deviations; the paper's "
          "theorems assume rho < sqrt(d)/2. The `gpu` profile runs the paper's grid under the printed reading "
          "(`sabo`), under the inverse reading (`sabo_inverse`, KL radius 1/rho) and the printed reading on "
          "rho <= 1 (`sabo_small_rho`); their rows in Table 1 and their claims above answer which reading "
          "reproduces the paper.", "",
          f"Predicted on the CPU, without a run: one perturbation round at mu_0 = 0 with N = {p['popsize']} and "
          f"Sigma_0 = {float(p['sigma0']) ** 2:g} I on a flat objective with noisy values (i.i.d. N(0, 1), the "
          "regime of a first iteration on a noisy loss); mean over 5 seeds, and the share of seeds in which the "
          "safeguard acted.", "", *rho_readings.sizes_table(rows, figures.method_label), ""]
    sizes = rho_readings.measured(records, variants, dim=lambda problem: int(problem["dim"]))
    if sizes:
        measured = [(m, variants[m], rho, d, v) for (m, rho, d), v in sorted(sizes.items())]
        md += ["Measured in the runs: per run, the mean over iterations of ||Sigma^-1/2 delta_mu|| and the share of "
               "iterations with a safeguard activation; median (range) over runs.", "",
               *rho_readings.sizes_table(measured, figures.method_label), ""]
    return md


def report(params: dict, records: list[dict], out_dir: Path, tracker=None) -> dict:
    p = params["prompt"]
    profile = p["profile"]
    prof = p["profiles"][profile]
    rule = p["selection"]
    other = next(r for r in RULES if r != rule)
    paper = yaml.safe_load(PAPER_FILE.read_text())
    tasks, settings = paper["columns"], list(dict.fromkeys([*paper["table1"], *p["dims"]]))  # paper's d first
    selected, selected_other, zero = select(records, rule), select(records, other), zero_shot(records)
    extra = [m for m in p["methods"] if m not in TABLE1_METHODS and any(k[2] == m for k in selected)]
    reasons = Reasons(p, profile, prof)
    verdicts = evaluate(load_claims(CLAIMS_FILE), CHECKERS, Context(selected, tasks, settings))

    md = ["# Black-box prompt tuning of RoBERTa-large (paper Tables 1 and 2)", "",
          "Regenerated by `sabo-bench report prompt` from "
          f"{len(records)} run records of profile **{profile}**."
          + (f" {provenance_summary(records)}" if records else ""), ""]
    if not records:
        md += ["**No prompt run has been made here.** The machine that regenerates this file has no GPU and no "
               "network: neither `roberta-large` nor the six data sets can be fetched. Every cell below shows the "
               "paper's number and says why ours is missing. On a GPU machine with access to the Hugging Face hub "
               "(or a filled `HF_HOME`): set `prompt.profile: gpu` in `params.yaml` and `dvc repro prompt_report`, or "
               "`sabo-bench prepare prompt --profile gpu && sabo-bench run prompt --profile gpu && "
               "sabo-bench report prompt --profile gpu`.",
               ""]
    # the setup of the study the tables are about: the active profile, or the gpu profile when it runs nothing
    shown_name, shown = (profile, prof) if prof["tasks"] else ("gpu", p["profiles"].get("gpu", prof))
    md += ["## Setup", "",
           f"Backbone `{p['backbone']}` on `{p['device']}`, "
           + ("fp32 weights with bf16 autocast on CUDA" if p["weights"] == "fp32" else "weights and compute in bf16")
           + (", rows packed without padding (variable-length attention)"
              if option(p, "attention") == "varlen" else
              f", {p['attention']} attention" + (", length-bucketed batches" if option(p, "bucketing") else ""))
           + (", compiled encoder" if option(p, "compile") else "") + ". "
           + "BBT's setup: 50 soft-prompt "
           "tokens added to the embedding output at positions 1..50, p = A z with A ~ N(0, sigma_e^2 / d), "
           f"templates and label words of BBT, k = {p['k_shot']} examples per class for train and for dev, "
           f"inputs over {p['max_length']} tokens dropped. Objective: cross-entropy over the label words on the "
           f"whole few-shot training set. N = {p['popsize']}, mu0 = 0, Sigma0 = {p['sigma0'] ** 2:g} I, "
           f"T = {shown['iterations']} iterations, seeds {shown['seeds']} (profile `{shown_name}`). Grids: "
           + "; ".join(f"{figures.method_label(m)}: {grid_text(g)}" for m, g in p["methods"].items()
                       if m in TABLE1_METHODS or m in extra) + ".",
           "",
           f"Reported prompt: **{rule}** (`best_dev`: the mean with the best dev metric over the run; `final`: the "
           "last mean). Grid selection: the configuration with the best mean dev metric over seeds. Cells: ours "
           "(mean ± std over seeds, in %; bold) and the paper's in brackets. Zero-shot: the templates without "
           "prompt slots.", ""]
    md += ["## Claims of the paper", "", count_line(verdicts), "", render_markdown(verdicts), ""]
    md += ["## Table 1: test accuracy (%), F1 for MRPC", "",
           *_table(selected, paper["table1"], zero, paper["zero_shot"], TABLE1_METHODS + extra, settings, tasks,
                   reasons), ""]
    table2 = {s: {**paper["table2"].get(s, {}), "sabo": paper["table1"].get(s, {}).get("sabo", {})}
              for s in settings}  # the paper's Table 2 repeats Table 1's SABO row
    md += ["## Table 2: against local Bayesian optimisation", "",
           *_table(selected, table2, zero, paper["zero_shot"], TABLE2_METHODS, settings, tasks, reasons), ""]
    md += ["Why cells are empty:", "", *reasons.legend(), ""]
    md += rho_section(p, records)
    if selected:
        methods = TABLE1_METHODS + extra
        md += [f"## Selected hyperparameters (mean dev metric %, rule {rule})", "",
               *_cell_table(selected, tasks, settings, methods,
                            lambda c: f"{_hp_label(c['params'])} ({c['dev']:.1f})"),
               "", f"## The other rule: test metric of the `{other}` prompt (%)", "",
               *_cell_table(selected_other, tasks, settings, methods, seeds_text),
               ""]
    meta = {"profile": profile, "records": len(records), "runs": len(configs(params)), "selection": rule}
    return write_report(out_dir, REPORT_NAME, md, verdicts, meta)
