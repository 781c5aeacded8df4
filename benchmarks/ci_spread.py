"""How much a study's CI scores move across numerical environments and trajectories; the tolerances CI uses.

A run is bit-reproducible where the versions and the numerical environment are equal (the BLAS
kernels OpenBLAS picks for the CPU, the SIMD paths NumPy dispatches to: a record's
``provenance.numerics``). Elsewhere the last bits of the sums differ, and a run's trajectory can
drift apart from the reference's: a CI score (one seed) then comes out as another draw of the
same statistic. This script measures both spreads through the real command line:

* **environments**: the ``ci`` profile under each ``--env``: the native one and emulated others
  -- ``OPENBLAS_CORETYPE`` makes OpenBLAS use another CPU's kernels (Haswell, Sandybridge,
  Prescott), ``NPY_DISABLE_CPU_FEATURES`` removes NumPy's SIMD levels (X86_V4, X86_V3) -- plus
  files measured on other machines (``--add``);
* **re-drawn trajectories**: what a score becomes when a run's trajectory drifts apart from
  the reference's is the same statistic on the same problem with another trajectory. With
  ``--redraws K`` every method runs again K times under another label (``<method>.r<k>``,
  ``optimizer: <method>``): the run's problem seed (data split, label noise, P, batches) depends
  on the problem alone and stays, its optimizer seed depends on the label and changes
  (:meth:`replication.config.RunConfig.optimizer_seed`).

``--write FILE`` records what ``--check-claims`` compares (``tests/test_image_ci_claims.py``):
per score the mean over the trajectories (the reference and its re-draws), and the tolerance
``3 sigma_u``, where ``sigma_u`` is the 95% upper confidence bound of their standard deviation
(chi-square, n - 1 degrees of freedom), never less than the largest deviation from that mean
seen in any environment; a correct build on any machine then fails a score's check with a
probability of about 0.1%, however far its trajectories drift. A score whose mean minus
tolerance is not above ``--chance`` (what guessing scores) could not show a regression: it is
measured but not checked, and the mean of all scores is checked instead (``score_means``, with
its own spread). Also written: the claims reproduced in every environment, and every measurement
(``spread``).

Usage (about 1 minute per job on 2 cores for the image study)::

    python3 benchmarks/ci_spread.py --redraws 9 --env native --env haswell:OPENBLAS_CORETYPE=Haswell \\
        --env numpy-v3:NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" \\
        --out /tmp/spread --write replication/image/ci_expected.json
    python3 benchmarks/ci_spread.py --add /tmp/spread-h200/spread.json --out /tmp/spread --chance 10 --write ...
"""
from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replication.storage import read_json, write_json  # noqa: E402

#: the multiple of the trajectories' standard deviation (its 95% upper bound) a score may lose
SIGMAS = 3.0


def parse_env(text: str) -> tuple[str, dict]:
    """``NAME[:VAR=VALUE,VAR=VALUE...]`` -> (name, variables)."""
    name, _, rest = text.partition(":")
    pairs = [p for p in rest.split(",") if p] if rest else []
    bad = [p for p in pairs if "=" not in p]
    if not name or bad:
        raise argparse.ArgumentTypeError(f"--env {text!r}: must be NAME or NAME:VAR=VALUE,VAR=VALUE")
    return name, dict(p.split("=", 1) for p in pairs)


def redrawn(params: dict, study: str, k: int) -> dict:
    """``params`` with every method of ``study`` relabelled ``<method>.r<k>`` (same optimizer and grid)."""
    methods = params[study]["methods"]
    params[study]["methods"] = {f"{m}.r{k}": {**grid, "optimizer": grid.get("optimizer", m)}
                                for m, grid in methods.items()}
    return params


def measure(study: str, profile: str, params_file: Path, out: Path, env_name: str, variables: dict, redraw: int,
            workers: int) -> dict:
    """One CI run of ``study``'s ``profile`` under ``variables``, its trajectories re-drawn ``redraw`` times
    over (0: the reference): its scores, reproduced claims and the numerics its records name."""
    tag = f"{env_name}-r{redraw}"
    params = yaml.safe_load(params_file.read_text())
    if redraw:
        params = redrawn(params, study, redraw)
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "params.yaml"
        p.write_text(yaml.safe_dump(params, sort_keys=False))
        common = ["--params", str(p), "--profile", profile, "--runs-dir", str(out / "runs" / tag)]
        cli = [sys.executable, "-m", "replication.cli"]
        env = {**os.environ, **variables, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        expected = out / f"{tag}.json"
        for args in (["run", study, *common, "--workers", str(workers), "--no-track", "--quiet"],
                     ["report", study, *common, "--out", str(out / "results" / tag), "--no-track",
                      "--record-expected", str(expected)]):
            done = subprocess.run([*cli, *args], env=env, cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{tag}: {' '.join(args[:2])} failed: {done.stderr.strip()[-400:]}")
    record = next((out / "runs" / tag).rglob("*.json"))
    provenance = read_json(record)["provenance"]
    result = read_json(expected)
    scores = {key.removesuffix(f".r{redraw}"): value for key, value in result.get("scores", {}).items()}
    return {"env": env_name, "redraw": redraw, "variables": variables, "numerics": provenance.get("numerics"),
            "versions": provenance.get("versions"), "host": provenance.get("host"),
            "scores": scores, "reproduced": result["reproduced"]}


def upper_sigma(values: list[float]) -> float:
    """The 95% upper confidence bound of the standard deviation of ``values`` (normal model)."""
    from scipy.stats import chi2

    n = len(values)
    return float(np.std(values, ddof=1) * math.sqrt((n - 1) / chi2.ppf(0.05, n - 1)))


def spread(by_draw: list[float], by_env: dict[str, float]) -> dict:
    """Mean and standard deviation over the trajectories; the tolerance :data:`SIGMAS` ``sigma_u``, at
    least the largest deviation of an environment from the mean."""
    mean = float(np.mean(by_draw))
    sigma_u = upper_sigma(by_draw) if len(by_draw) > 2 else float("nan")
    worst = max(abs(v - mean) for v in by_env.values())
    return {"mean": mean, "sd": float(np.std(by_draw, ddof=1)) if len(by_draw) > 1 else float("nan"),
            "trajectories": by_draw, "environments": by_env, "tolerance": max(SIGMAS * sigma_u, worst)}


def summarize(runs: list[dict]) -> tuple[dict, dict]:
    """Per score, and for the mean of all scores: the environments' values (every reference run, of every
    machine), the trajectories' values (the native runs of the machine that re-drew the most) and
    :func:`spread` of them."""
    envs = {f"{r['machine']}/{r['env']}": r for r in runs if r["redraw"] == 0}
    native = [r for r in runs if r["env"] == "native"]
    machines = sorted({r["machine"] for r in native}, key=lambda h: -sum(r["machine"] == h for r in native))
    draws = sorted((r for r in native if r["machine"] == machines[0]), key=lambda r: r["redraw"]) if machines else []
    keys = sorted(next(iter(envs.values()))["scores"]) if envs else []
    per_score = {key: spread([r["scores"][key] for r in draws], {n: r["scores"][key] for n, r in envs.items()})
                 for key in keys}
    mean_of = {"keys": keys, **spread([float(np.mean([r["scores"][k] for k in keys])) for r in draws],
                                      {n: float(np.mean([r["scores"][k] for k in keys])) for n, r in envs.items()})}
    return per_score, mean_of


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", default="image")
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--env", type=parse_env, action="append", default=[],
                    help="NAME[:VAR=VALUE,...]: an environment for the reference run (native: the unchanged one)")
    ap.add_argument("--redraws", type=int, default=0, help="re-drawn trajectories in the native environment")
    ap.add_argument("--machine", default=platform.node(), help="this machine's name in the measurements")
    ap.add_argument("--workers", type=int, default=2, help="workers per run")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once")
    ap.add_argument("--out", type=Path, required=True, help="where runs, reports and spread.json go")
    ap.add_argument("--add", type=Path, action="append", default=[], help="spread.json files measured elsewhere")
    ap.add_argument("--chance", type=float, default=None,
                    help="the score a method gets by guessing (the image study: 10, ten classes): a score whose "
                         "mean minus tolerance is not above it cannot show a regression and is not checked")
    ap.add_argument("--write", type=Path, help="write the expected file (--check-claims) from the measurements")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(name, variables, 0) for name, variables in args.env]
    if args.redraws:
        jobs += [("native", {}, k) for k in range(0 if ("native", {}, 0) not in jobs else 1, args.redraws + 1)]
    runs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(measure, args.study, args.profile, args.params, args.out, name, variables, k,
                               args.workers) for name, variables, k in jobs]
        for future in concurrent.futures.as_completed(futures):
            run = {**future.result(), "machine": args.machine}
            runs.append(run)
            print(f"measured {run['env']} trajectory {run['redraw']} ({run['numerics']})", flush=True)
    if runs:
        write_json(args.out / "spread.json", {"study": args.study, "profile": args.profile, "runs": runs})
    for extra in args.add:
        runs += read_json(extra)["runs"]
    per_score, mean_of = summarize(runs)
    envs = [r for r in runs if r["redraw"] == 0]
    print(f"{len(envs)} environments on {len({r['machine'] for r in envs})} machines; trajectories: "
          f"{len(mean_of.get('trajectories', []))}")
    print(f"{'score':<32} {'mean':>7} {'sd':>6} {'tol':>6} {'env min':>8} {'env max':>8}  envs equal to first")
    for key, s in [*per_score.items(), ("mean of the scores", mean_of)] if per_score else []:
        values = list(s["environments"].values())
        print(f"{key:<32} {s['mean']:7.2f} {s['sd']:6.2f} {s['tolerance']:6.2f} {min(values):8.2f} {max(values):8.2f}"
              f"  {sum(v == values[0] for v in values)}/{len(values)}")
    if args.write:
        reproduced = sorted(set.intersection(*(set(r["reproduced"]) for r in envs)))
        chance = -math.inf if args.chance is None else args.chance
        checked = {k: s for k, s in per_score.items() if s["mean"] - s["tolerance"] > chance}
        expected = {"profile": args.profile, "reproduced": reproduced,
                    "scores": {k: s["mean"] for k, s in checked.items()},
                    "score_tolerance": {k: round(s["tolerance"], 4) for k, s in checked.items()}}
        if per_score:
            expected["score_means"] = {"mean of the scores": {"keys": mean_of["keys"], "value": mean_of["mean"],
                                                              "tolerance": round(mean_of["tolerance"], 4)}}
        expected["spread"] = {
            "rule": f"score: mean over re-drawn trajectories; tolerance: max({SIGMAS:g} x the 95% upper bound of their "
                    "standard deviation, the largest deviation of any environment from the mean); a score whose "
                    f"mean minus tolerance is not above chance ({args.chance}) is measured but not checked "
                    "(benchmarks/ci_spread.py)",
            "not_checked": sorted(set(per_score) - set(checked)),
            "environments": {f"{r['machine']}/{r['env']}": {"variables": r["variables"], "numerics": r["numerics"],
                                                            "versions": r["versions"]} for r in envs},
            "scores": {k: {f: s[f] for f in ("trajectories", "environments", "sd", "tolerance")}
                       for k, s in [*per_score.items(), ("mean of the scores", mean_of)] if per_score}}
        write_json(args.write, expected)
        print(f"wrote {args.write}: {len(checked)} of {len(per_score)} scores checked"
              + (f", not {', '.join(expected['spread']['not_checked'])}" if expected["spread"]["not_checked"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
