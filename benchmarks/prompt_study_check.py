"""End-to-end check of the prompt-tuning study on this machine, with nothing downloaded.

    python benchmarks/prompt_study_check.py                                   # CPU, small model
    python benchmarks/prompt_study_check.py --device cuda --model roberta-large-shape

Builds, in a temporary directory: a byte-level BPE tokenizer with RoBERTa's special tokens
(trained on a few sentences, as the tests do), a masked LM of the chosen shape with random weights
over that vocabulary, saved with ``save_pretrained``; SST-2-schema sentences (``--per-class`` per
class), prepared with BBT's few-shot split (k = 16). Then it runs the study's ``smoke`` profile
from ``params.yaml`` (SST-2, d = 200, one seed, CMA-ES / INGO / SABO grids and the zero-shot
row) through ``sabo-bench run prompt`` and ``sabo-bench report prompt``, with the backbone and
the device replaced and the objective's options from ``params.yaml`` unless given (``--weights``,
``--attention``, ``--bucketing``/``--no-bucketing``, ``--compile``; ``--earlier`` = the set-up before
these options: fp32 weights, sdpa, no bucketing, no compile), and prints per-run wall times and
seconds per iteration, and their medians for the one-round methods and SABO (``--json``).
``--workers K`` runs K runs at a time (default: the CLI's, one per visible GPU for CUDA runs);
the check then prints on which device (each record's ``CUDA_VISIBLE_DEVICES``) the runs ran and
how many pairs of runs on distinct devices overlapped in time: on a machine with several GPUs,
the evidence that parallel runs land on distinct devices instead of piling onto one.
Nothing is tracked (``--no-track``); ``--no-report`` skips the report (it needs matplotlib).

What it checks: the whole path a GPU run takes (loading from a local directory, encoding once,
the batched objective under bf16 autocast, metrics and best-dev tracking every iteration, the
test evaluation at the end, records, report) at the backbone's real compute size. What it does
not: accuracy (the weights are random and the data are made up).
"""
from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from replication.prompt.options import ATTENTIONS  # noqa: E402  (after the path set-up)

SHAPES = {"small": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
          "roberta-large-shape": {}}


def sentences(per_class: int, seed: int) -> list[dict]:
    """Made-up SST-2 rows: two phrases of the tests' sentiment vocabulary per sentence."""
    from tiny_roberta import NEGATIVE, POSITIVE

    rng = np.random.default_rng(seed)
    rows = []
    for label, pool in ((1, POSITIVE), (0, NEGATIVE)):
        for _ in range(per_class):
            a, b = rng.choice(len(pool), 2)
            rows.append({"sentence": f"{pool[a]} , {pool[b]}", "label": label})
    return [rows[i] for i in rng.permutation(len(rows))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", choices=sorted(SHAPES), default="small")
    ap.add_argument("--weights", choices=["fp32", "bf16"], default=None, help="prompt.weights (default: params.yaml)")
    ap.add_argument("--attention", choices=list(ATTENTIONS), default=None, help="prompt.attention")
    ap.add_argument("--bucketing", action=argparse.BooleanOptionalAction, default=None, help="prompt.bucketing")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None, help="prompt.compile")
    ap.add_argument("--earlier", action="store_true",
                    help="the set-up before these options: fp32 weights, sdpa, no bucketing, no compile")
    ap.add_argument("--no-report", action="store_true", help="skip `sabo-bench report prompt`")
    ap.add_argument("--json", default=None, help="write per-run times and the medians here")
    ap.add_argument("--iterations", type=int, default=None, help="override the smoke profile's T")
    ap.add_argument("--per-class", type=int, default=64, help="made-up training sentences per class")
    ap.add_argument("--out", default=None, help="copy the report here")
    ap.add_argument("--workers", type=int, default=None, help="runs at a time (default: one per visible GPU)")
    args = ap.parse_args(argv)

    import torch
    from tiny_roberta import tiny_tokenizer

    from replication import cli
    from replication.prompt import study
    from replication.prompt.data import prepare_task
    from replication.prompt.model import random_backbone, roberta_large_config
    from replication.storage import read_json

    work = Path(tempfile.mkdtemp(prefix="prompt-check-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # the backbone, data and runs: GBs on a GPU machine
    tok = tiny_tokenizer()
    t0 = time.perf_counter()
    model = random_backbone(roberta_large_config(vocab_size=len(tok), **SHAPES[args.model]), args.device)
    model.save_pretrained(work / "model")
    tok.save_pretrained(work / "model")
    del model
    print(f"# backbone {args.model} (vocabulary {len(tok)}), saved in {time.perf_counter() - t0:.1f} s")
    rows = {"train": sentences(args.per_class, 0), "validation": sentences(args.per_class, 1)}
    os.environ[study.DATA_ENV] = str(work / "data")
    prepare_task("sst2", 0, work / "data", loader=lambda task, split: rows[split])

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    p = params["prompt"]
    p.update(profile="smoke", backbone=str(work / "model"), device=args.device, placeholder_offset=100)
    if args.earlier:
        p.update(weights="fp32", attention="sdpa", bucketing=False, compile=False)
    for key in ("weights", "attention", "bucketing", "compile"):
        if getattr(args, key) is not None:
            p[key] = getattr(args, key)
    options = {k: p.get(k) for k in ("weights", "attention", "bucketing", "compile")}
    if args.iterations is not None:
        p["profiles"]["smoke"]["iterations"] = args.iterations
    (work / "params.yaml").write_text(yaml.safe_dump(params))
    common = ["--params", str(work / "params.yaml"), "--runs-dir", str(work / "runs")]
    t0 = time.perf_counter()
    workers = [] if args.workers is None else ["--workers", str(args.workers)]
    quiet = [] if sys.stderr.isatty() else ["--quiet"]  # the progress bar, where someone watches
    rc = cli.main(["run", "prompt", *common, *workers, "--no-track", *quiet])
    wall = time.perf_counter() - t0
    if rc != 0:  # interrupted (a time limit) or failed: report the runs that finished
        print(f"# sabo-bench run prompt exited with status {rc}; the table shows the finished runs")
    records = [r for r in (read_json(path) for path in sorted((work / "runs").rglob("*.json")))
               if isinstance(r, dict) and "config" in r and "result" in r]   # records, not checkpoints
    where = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"# {len(records)} runs in {wall:.1f} s on {where}, {options}")
    # random weights: the prompt (scale sigma_e, added after the embedding LayerNorm) moves the loss
    # only slightly, hence the change is printed rather than the two values
    print(f"{'method':<10} {'params':<22} {'T':>3} {'wall s':>8} {'s/iter':>8} {'train loss':>10} {'change':>10} "
          f"{'test final':>10} {'test best-dev':>13}")
    per_run = []
    for r in records:
        c, res = r["config"], r["result"]
        T = c["budget"]["max_iter"]
        hp = ", ".join(f"{k}={v}" for k, v in c["params"].items() if k not in ("sigma0", "popsize")) or "-"
        ev, curve = res["final_evaluation"], res["curve"]
        per_iter = r["provenance"]["wall_time_s"] / T if T else float("nan")
        per_run.append({"method": c["method"], "params": c["params"], "T": T, "wall_s": r["provenance"]["wall_time_s"],
                        "s_per_iter": per_iter})
        change = curve["train_loss"][-1] - curve["train_loss"][0]
        print(f"{c['method']:<10} {hp:<22} {T:>3} {r['provenance']['wall_time_s']:>8.2f} {per_iter:>8.3f} "
              f"{curve['train_loss'][0]:>10.5f} {change:>10.2e} {ev['test_metric_final']:>10.3f} "
              f"{ev['test_metric_best_dev']:>13.3f}")
    one_round = [x["s_per_iter"] for x in per_run if x["T"] and x["params"].get("optimizer", x["method"]) != "sabo"]
    two_round = [x["s_per_iter"] for x in per_run if x["T"] and x["params"].get("optimizer", x["method"]) == "sabo"]
    summary = {"one_round_s_per_iter_median": float(np.median(one_round)) if one_round else None,
               "sabo_s_per_iter_median": float(np.median(two_round)) if two_round else None}
    print(f"# median s/iteration: one-round methods {summary['one_round_s_per_iter_median']}, "
          f"SABO {summary['sabo_s_per_iter_median']} ({len(one_round)} + {len(two_round)} runs)")
    summary.update(device_use(records))
    print(f"# runs per device (CUDA_VISIBLE_DEVICES): {summary['runs_per_device']}; pairs of runs on distinct "
          f"devices that overlapped in time: {summary['overlapping_pairs_on_distinct_devices']}")
    if args.json:
        import json

        Path(args.json).write_text(json.dumps({"device": where, "model": args.model, "options": options,
                                               "runs": len(records), "wall_s": wall, **summary, "per_run": per_run},
                                              indent=2))
    if args.no_report or rc != 0:
        return rc
    rc = cli.main(["report", "prompt", *common, "--out", str(work / "results"), "--no-track"])
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "prompt_tuning_check.md").write_text((work / "results" / "prompt_tuning.md").read_text())
    return rc


def device_use(records: list[dict]) -> dict:
    """Runs per device (the ``CUDA_VISIBLE_DEVICES`` each record's worker had; "-" if unset) and overlaps.

    ``overlapping_pairs_on_distinct_devices``: pairs of runs whose [started, finished] intervals
    intersect while their devices differ (runs on one device never overlap when the pinning works).
    """
    from collections import Counter
    from datetime import datetime

    spans = [(r["provenance"].get("cuda_visible_devices") or "-",
              datetime.fromisoformat(r["provenance"]["started_utc"]),
              datetime.fromisoformat(r["provenance"]["finished_utc"])) for r in records]
    pairs = sum(1 for i, (d1, s1, e1) in enumerate(spans) for d2, s2, e2 in spans[i + 1:]
                if d1 != d2 and s1 < e2 and s2 < e1)
    return {"runs_per_device": dict(sorted(Counter(d for d, _, _ in spans).items())),
            "overlapping_pairs_on_distinct_devices": pairs}


if __name__ == "__main__":
    sys.exit(main())
