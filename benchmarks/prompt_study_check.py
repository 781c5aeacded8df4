"""End-to-end check of the prompt-tuning study on this machine, with nothing downloaded.

    python benchmarks/prompt_study_check.py                                   # CPU, small model
    python benchmarks/prompt_study_check.py --device cuda --model roberta-large-shape

Builds, in a temporary directory: a byte-level BPE tokenizer with RoBERTa's special tokens
(trained on a few sentences, as the tests do), a masked LM of the chosen shape with random weights
over that vocabulary, saved with ``save_pretrained``; SST-2-schema sentences (``--per-class`` per
class), prepared with BBT's few-shot split (k = 16). Then it runs the study's ``smoke`` profile
from ``params.yaml`` (SST-2, d = 200, one seed, CMA-ES / INGO / SABO grids and the zero-shot
row) through ``sabo-bench run prompt`` and ``sabo-bench report prompt``, with the backbone, the
device and the precision (``--weights``) replaced, and prints per-run wall times and seconds per
iteration.

What it checks: the whole path a GPU run takes (loading from a local directory, encoding once,
the batched objective under bf16 autocast, metrics and best-dev tracking every iteration, the
test evaluation at the end, records, report) at the backbone's real compute size. What it does
not: accuracy (the weights are random and the data are made up).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

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
    ap.add_argument("--weights", choices=["fp32", "bf16"], default="fp32", help="prompt.weights (precision)")
    ap.add_argument("--iterations", type=int, default=None, help="override the smoke profile's T")
    ap.add_argument("--per-class", type=int, default=64, help="made-up training sentences per class")
    ap.add_argument("--out", default=None, help="copy the report here")
    args = ap.parse_args(argv)

    import torch

    from replication import cli
    from replication.prompt import study
    from replication.prompt.data import prepare_task
    from replication.prompt.model import random_backbone, roberta_large_config
    from replication.storage import read_json
    from tiny_roberta import tiny_tokenizer

    work = Path(tempfile.mkdtemp(prefix="prompt-check-"))
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
    p.update(profile="smoke", backbone=str(work / "model"), device=args.device, placeholder_offset=100,
             weights=args.weights)
    if args.iterations is not None:
        p["profiles"]["smoke"]["iterations"] = args.iterations
    (work / "params.yaml").write_text(yaml.safe_dump(params))
    common = ["--params", str(work / "params.yaml"), "--runs-dir", str(work / "runs")]
    t0 = time.perf_counter()
    rc = cli.main(["run", "prompt", *common, "--no-track", "--quiet"])
    wall = time.perf_counter() - t0
    if rc != 0:
        return rc
    records = [read_json(path) for path in sorted((work / "runs").rglob("*.json"))]
    where = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"# {len(records)} runs in {wall:.1f} s on {where}, weights {args.weights}")
    # random weights: the prompt (scale sigma_e, added after the embedding LayerNorm) moves the loss
    # only slightly, hence the change is printed rather than the two values
    print(f"{'method':<10} {'params':<22} {'T':>3} {'wall s':>8} {'s/iter':>8} {'train loss':>10} {'change':>10} "
          f"{'test final':>10} {'test best-dev':>13}")
    for r in records:
        c, res = r["config"], r["result"]
        T = c["budget"]["max_iter"]
        hp = ", ".join(f"{k}={v}" for k, v in c["params"].items() if k not in ("sigma0", "popsize")) or "-"
        ev, curve = res["final_evaluation"], res["curve"]
        per_iter = r["provenance"]["wall_time_s"] / T if T else float("nan")
        change = curve["train_loss"][-1] - curve["train_loss"][0]
        print(f"{c['method']:<10} {hp:<22} {T:>3} {r['provenance']['wall_time_s']:>8.2f} {per_iter:>8.3f} "
              f"{curve['train_loss'][0]:>10.5f} {change:>10.2e} {ev['test_metric_final']:>10.3f} "
              f"{ev['test_metric_best_dev']:>13.3f}")
    rc = cli.main(["report", "prompt", *common, "--out", str(work / "results"), "--no-track"])
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "prompt_tuning_check.md").write_text((work / "results" / "prompt_tuning.md").read_text())
    return rc


if __name__ == "__main__":
    sys.exit(main())
