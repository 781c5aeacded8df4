"""Throughput of the black-box prompt-tuning objective: batched population vs per-candidate loop.

    python benchmarks/prompt_objective.py                                    # CPU, small model
    python benchmarks/prompt_objective.py --device cuda --model roberta-large-shape [--json out.json]

One *generation* evaluates N candidates (``--n``, default 100; z in R^d, ``--d`` default 500) on
the whole few-shot training set (``--examples``, default 32), i.e. N x 32 sequences. For each
workload the same model and data are timed in two modes:

- ``batched``: :meth:`PromptObjective.losses` -- the population in forward passes of up to
  ``--chunk-rows`` (candidate x example) rows (several values may be given; default: the
  objective's default, ~65k padded tokens per forward on CUDA, ~8k on CPU);
- ``loop``: :meth:`PromptObjective.loss_loop` -- one candidate at a time, all its examples in one
  forward (as BBT does).

Workloads (random token ids, no data needed; lengths include ``<s>``, 50 prompt slots, the
template ``" . {text} . It was <mask> ."`` and ``</s>``, i.e. text + 58 tokens):

- ``sst2``: text lengths uniform in [13, 37] tokens (~25), sequences ~83 tokens;
- ``yelp``: text lengths uniform in [120, 240] tokens (~180), sequences ~238 tokens.

Models: ``small`` (random weights; hidden 128, 2 layers, 2 heads, intermediate 512, RoBERTa's
vocabulary; for CPU runs) and ``roberta-large-shape`` (random weights, hidden 1024, 24 layers,
16 heads, intermediate 4096, vocab 50265). Random weights run exactly the computation of the
real model (same shapes, same kernels); the numbers are throughput only. On CUDA the objective
uses bf16 autocast (weights fp32 unless ``--dtype bf16``), as the study does; ``--no-autocast``
computes in the weight dtype (``--dtype bf16 --no-autocast``: all bf16). On CPU fp32.
``--compile`` wraps the encoder (not the embeddings, whose hook adds the prompts) in
``torch.compile(dynamic=True)``; it applies to both modes.

FLOP count (forward only, per forward pass of ``r`` rows padded to length ``L``; padding is
counted because it is computed):

    FLOPs = 2 * P_enc * r * L  +  4 * n_layers * r * L^2 * D  +  2 * r * (D^2 + D * V)

with P_enc the number of encoder parameters (all transformer layers, embeddings excluded; each
weight does one multiply-add per token), 4 L^2 D per layer for QK^T and attention x V, and the
MLM head (dense D x D and decoder D x V) applied only at the ``<mask>`` row. TFLOP/s = FLOPs per
generation x generations per second; ``%peak`` divides by ``--peak-tflops`` (default 989, the
H100/H200 SXM dense bf16 peak). On CUDA a large bf16 matmul (``--matmul-size``, default 8192) is
timed in the same run as an achievable reference.

Timing: ``--warmup`` untimed generations (default 1) then ``--repeats`` timed ones (default 3 on
CUDA, 1 on CPU); the loop is timed on ``--loop-candidates`` candidates (default: all N) and
scaled to N (its cost is linear in the number of candidates). CUDA timings are bracketed by
``torch.cuda.synchronize()``. The speed-up is batched / loop generations per second.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

from replication.prompt.model import random_backbone, roberta_large_config  # noqa: E402
from replication.prompt.objective import DEFAULT_EXAMPLE_BLOCK, PromptObjective, encode_ids  # noqa: E402
from replication.prompt.soft_prompt import PromptProjection  # noqa: E402

# RoBERTa's special ids and a few template token ids (Ġ. = 479, ĠIt = 85, Ġwas = 21)
BOS, PAD, EOS, UNK, MASK = 0, 1, 2, 3, 50264
DOT, IT, WAS = 479, 85, 21
N_PROMPT = 50
PLACEHOLDERS = list(range(1000, 1000 + N_PROMPT))  # BBT's placeholder ids
LABEL_IDS = [10999, 12338]  # two ordinary token ids; which ones is irrelevant with random weights

WORKLOADS = {"sst2": (13, 37), "yelp": (120, 240)}
MODELS = {
    "small": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
    "roberta-large-shape": {},
}


def make_split(n_examples: int, text_range: tuple[int, int], vocab: int, seed: int):
    """Random pre-tokenised inputs ``<s> P*50 . text . It was <mask> . </s>`` and balanced labels."""
    rng = np.random.default_rng(seed)
    seqs = []
    for _ in range(n_examples):
        text = rng.integers(4, vocab - 1, size=int(rng.integers(text_range[0], text_range[1] + 1))).tolist()
        seqs.append([BOS, *PLACEHOLDERS, DOT, *text, DOT, IT, WAS, MASK, DOT, EOS])
    labels = np.arange(n_examples) % 2
    return encode_ids(seqs, labels, mask_token_id=MASK, n_prompt_tokens=N_PROMPT, max_length=512)


def forward_flops(model, shapes) -> float:
    """Forward FLOPs of passes with the given (rows, padded length) shapes (formula in the docstring)."""
    cfg = model.config
    D, V, layers = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    p_enc = sum(p.numel() for p in model.roberta.encoder.parameters())
    total = 0.0
    for r, L in shapes:
        total += 2.0 * p_enc * r * L + 4.0 * layers * r * L * L * D + 2.0 * r * (D * D + D * V)
    return total


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, repeats: int) -> float:
    """Median seconds per call over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def matmul_reference(device, size: int, dtype=torch.bfloat16, iters: int = 20) -> float:
    """TFLOP/s of a size^3 matmul in ``dtype``: an achievable reference on this GPU."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        a @ b
    sync(device)
    return 2.0 * size**3 * iters / (time.perf_counter() - t0) / 1e12


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", choices=sorted(MODELS), default=None,
                    help="default: small on CPU, roberta-large-shape on CUDA")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="weight dtype")
    ap.add_argument("--no-autocast", action="store_true",
                    help="compute in the weight dtype (default on CUDA: bf16 autocast, as the study runs)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the encoder (dynamic shapes; the embedding hook stays eager)")
    ap.add_argument("--n", type=int, default=100, help="candidates per generation")
    ap.add_argument("--d", type=int, default=500, help="intrinsic dimension")
    ap.add_argument("--examples", type=int, default=32, help="few-shot training examples")
    ap.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=["sst2", "yelp"])
    ap.add_argument("--chunk-rows", type=int, nargs="+", default=[0],
                    help="rows per batched forward; several values: one batched row each; 0: the objective's default")
    ap.add_argument("--example-block", type=int, default=DEFAULT_EXAMPLE_BLOCK,
                    help="length-sorted example block of the batched row order (0: all examples in one block)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=None, help="timed generations (default 3 on CUDA, 1 on CPU)")
    ap.add_argument("--loop-candidates", type=int, default=None, help="candidates timed in loop mode (default N)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--matmul-size", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the numbers to this path")
    args = ap.parse_args(argv)

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.threads:
        torch.set_num_threads(args.threads)
    model_name = args.model or ("roberta-large-shape" if cuda else "small")
    repeats = args.repeats or (3 if cuda else 1)
    n, loop_n = args.n, min(args.n, args.loop_candidates or args.n)

    config = roberta_large_config(**MODELS[model_name])
    model = random_backbone(config, device, torch.bfloat16 if args.dtype == "bf16" else torch.float32, seed=args.seed)
    autocast = cuda and not args.no_autocast
    if args.compile:
        model.roberta.encoder = torch.compile(model.roberta.encoder, dynamic=True)
    tokenizer = SimpleNamespace(pad_token_id=PAD, mask_token_id=MASK, bos_token_id=BOS, eos_token_id=EOS)
    proj = PromptProjection.from_model(model, args.d, seed=args.seed)
    Z = np.random.default_rng(args.seed).standard_normal((n, args.d))

    import transformers

    info = {"device": torch.cuda.get_device_name(device) if cuda else platform.processor() or platform.machine(),
            "torch": torch.__version__, "transformers": transformers.__version__, "model": model_name,
            "weights": args.dtype, "compute": "bf16 autocast" if autocast else args.dtype,
            "compiled_encoder": args.compile, "n": n, "d": args.d,
            "examples": args.examples, "threads": torch.get_num_threads(), "repeats": repeats,
            "loop_candidates": loop_n, "peak_tflops": args.peak_tflops,
            "encoder_params": sum(p.numel() for p in model.roberta.encoder.parameters())}
    if cuda:
        info["matmul_bf16_tflops"] = matmul_reference(device, args.matmul_size)
    print(f"# {info['device']} | torch {info['torch']} | transformers {info['transformers']} | model {model_name} "
          f"({info['encoder_params'] / 1e6:.1f}M encoder params) | {info['compute']} | N = {n}, d = {args.d}, "
          f"{args.examples} examples | threads {info['threads']}" + (" | compiled encoder" if args.compile else ""))
    if cuda:
        mm = info["matmul_bf16_tflops"]
        print(f"# reference: {args.matmul_size}^3 bf16 matmul {mm:.0f} TFLOP/s ({100 * mm / args.peak_tflops:.0f}% of "
              f"{args.peak_tflops:.0f} peak)")

    rows = []
    for wname in args.workloads:
        split = make_split(args.examples, WORKLOADS[wname], config.vocab_size, args.seed)
        real_tokens = float(split.lengths.sum())
        # BBT: one candidate, the whole training set in one forward
        loop_obj = PromptObjective(model, tokenizer, split, None, LABEL_IDS, proj, chunk_rows=len(split),
                                   autocast=autocast)
        results = []
        for chunk in args.chunk_rows:
            obj = PromptObjective(model, tokenizer, split, None, LABEL_IDS, proj, chunk_rows=chunk or None,
                                  example_block=args.example_block or None, autocast=autocast)
            for _ in range(args.warmup):
                obj.losses(Z)
            t = timed(lambda: obj.losses(Z), device, repeats)
            shapes = obj.forward_shapes(n)
            results.append(("batched", obj.chunk_rows if obj.chunk_rows < n * len(split) else n * len(split),
                            t, shapes, obj))
        for _ in range(args.warmup):
            loop_obj.loss_loop(Z[: min(loop_n, 2)])
        t_loop = timed(lambda: loop_obj.loss_loop(Z[:loop_n]), device, max(1, repeats if cuda else 1)) * n / loop_n
        results.append(("loop", min(loop_obj.chunk_rows, len(split)), t_loop, loop_obj.forward_shapes(n, loop=True),
                        loop_obj))
        # correctness on the side: batched and loop agree on the timed candidates
        check = results[0][4].losses(Z[:4])
        ref = loop_obj.loss_loop(Z[:4])
        max_rel = float(np.max(np.abs(check - ref) / np.abs(ref)))
        for mode, rpf, t, shapes, _ in results:
            flops = forward_flops(model, shapes)
            processed = float(sum(r * L for r, L in shapes))
            rows.append({"workload": wname, "mode": mode, "rows_per_forward": int(rpf), "forwards": len(shapes),
                         "seconds_per_generation": t, "generations_per_s": 1.0 / t,
                         "sequences_per_s": n * len(split) / t, "speedup_vs_loop": t_loop / t,
                         "tflops": flops / t / 1e12, "pct_peak": 100.0 * flops / t / 1e12 / args.peak_tflops,
                         "real_token_fraction": n * real_tokens / processed,
                         "mean_seq_len": float(split.lengths.mean()), "max_seq_len": int(split.lengths.max()),
                         "batched_vs_loop_max_rel_diff": max_rel})

    hdr = (f"{'workload':<9}{'mode':<9}{'rows/fwd':>9}{'fwds':>6}{'gen/s':>10}{'seq/s':>11}{'speed-up':>10}"
           f"{'TFLOP/s':>10}{'%peak':>7}{'real tok':>9}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        peak = f"{r['pct_peak']:.1f}%" if cuda else "-"  # a GPU peak means nothing for a CPU run
        print(f"{r['workload']:<9}{r['mode']:<9}{r['rows_per_forward']:>9}{r['forwards']:>6}"
              f"{r['generations_per_s']:>10.4g}{r['sequences_per_s']:>11.1f}{r['speedup_vs_loop']:>9.2f}x"
              f"{r['tflops']:>10.3g}{peak:>7}"
              f"{100 * r['real_token_fraction']:>8.0f}%")
    for w in args.workloads:
        r = next(x for x in rows if x["workload"] == w)
        print(f"# {w}: sequence length mean {r['mean_seq_len']:.0f}, max {r['max_seq_len']}; batched vs loop losses "
              f"max relative difference {r['batched_vs_loop_max_rel_diff']:.1e}")
    out = {"info": info, "rows": rows}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


if __name__ == "__main__":
    main()
