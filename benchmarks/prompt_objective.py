"""Throughput of the black-box prompt-tuning objective, step by step from the earlier set-up to the new defaults.

    python benchmarks/prompt_objective.py                                    # CPU, small model
    python benchmarks/prompt_objective.py --device cuda --model roberta-large-shape [--json out.json]
    python benchmarks/prompt_objective.py --device cuda --profile-iters 4    # + GPU idle share of the study loop

One *generation* evaluates N candidates (``--n``, default 100; z in R^d, ``--d`` default 500) on
the whole few-shot training set (``--examples``, default 32), i.e. N x 32 sequences, with
:meth:`PromptObjective.losses`. Modes (``--modes``; each adds one step to the one before):

- ``baseline``: the earlier study set-up -- fp32 weights under bf16 autocast on CUDA (fp32 on
  CPU), transformers' default attention (``sdpa``, with the padding mask in every forward), rows
  in blocks of 8 length-sorted examples cut into chunks of ~64k padded tokens (``bucketing=False``);
- ``bf16-eager``: weights and compute in bf16, eager attention (the "without SDPA" reference);
- ``bf16``: weights and compute in bf16, SDPA;
- ``bucket``: + length buckets (the objective's defaults: one bucket per length, merged only
  below 4096 tokens; a forward with no padding gets no mask, so SDPA may use flash attention);
- ``bucket-exact``: buckets never merged (``bucket_tokens=0``): no padding at all;
- ``bucket-pad``: lengths merged while padding stays <= ``--bucket-pad`` (default 0.03): fewer,
  larger forwards, masked;
- ``compile``: ``bucket`` + ``torch.compile`` of the encoder (``dynamic=True``: one graph for all
  bucket shapes, one more if masked and unmasked forwards mix; default mode, ``--compile-mode``
  to change it; the compilation is in the warm-up, excluded from the timings, once per process);
- ``varlen``: bf16, rows packed without padding into forwards of ~64k real tokens, run through
  :class:`replication.prompt.packed.PackedEncoder` (fused QKV projection, PyTorch's
  variable-length flash attention; ``prompt.attention: varlen``); ``varlen-big``: ~128k tokens
  per forward; ``varlen-compile``: + ``torch.compile`` of each layer's work after attention
  (one graph for every token count); ``varlen-fp32`` and ``varlen-fp32-compile``: the same with
  fp32 weights under bf16 autocast (the study's default precision); ``varlen-sdpa``:
  ``varlen-compile`` with attention through SDPA's fixed-length kernels, one dense batch per run
  of equal-length rows (views of the packed tokens, rows packed in length order) instead of the
  variable-length flash kernel (slower per FLOP than cuDNN's fixed-length one on the H100);
  ``varlen-tanh``:
  ``varlen-compile`` with the FFN's GELU in its tanh form, fused with the bias into the FFN's first
  product on CUDA (cuBLASLt epilogue; a deviation from RoBERTa's exact GELU, see
  :mod:`replication.prompt.packed`; the losses' max rel / spearman columns show what it changes);
  ``varlen-sdpa-tanh``: both of the two before (the ceiling of these two levers together; the tanh
  GELU makes it a benchmark mode too); ``varlen-autotune``: ``varlen-compile`` in
  ``torch.compile``'s ``max-autotune-no-cudagraphs`` mode (generated matrix-product kernels with
  the bias and exact GELU in their epilogue, where the autotuner finds them faster than cuBLAS;
  its warm-up, excluded from the timings, includes the autotuning).

``--loop`` also times :meth:`PromptObjective.loss_loop` (one candidate at a time, as BBT) in the
first mode. The losses of every mode are compared with the first mode's (max relative
difference, Spearman rank correlation over the N candidates).

Workloads (random token ids, no data needed; lengths include ``<s>``, 50 prompt slots, the
template ``" . {text} . It was <mask> ."`` and ``</s>``, i.e. text + 58 tokens):

- ``sst2``: text lengths uniform in [13, 37] tokens (~25), sequences ~83 tokens;
- ``yelp``: text lengths uniform in [120, 240] tokens (~180), sequences ~238 tokens.

Models: ``small`` (random weights; hidden 128, 2 layers, 2 heads, intermediate 512, RoBERTa's
vocabulary; for CPU runs) and ``roberta-large-shape`` (random weights, hidden 1024, 24 layers,
16 heads, intermediate 4096, vocab 50265). Random weights run exactly the computation of the
real model (same shapes, same kernels); the numbers are throughput only.

FLOP accounting (unchanged from the earlier benchmark; forward only, per forward pass of ``r``
rows padded to length ``L``; padding is counted because it is computed):

    FLOPs = 2 * P_enc * r * L  +  4 * n_layers * r * L^2 * D  +  2 * r * (D^2 + D * V)

with P_enc the number of encoder parameters (all transformer layers, embeddings excluded; each
weight does one multiply-add per token), 4 L^2 D per layer for QK^T and attention x V, and the
MLM head (dense D x D and decoder D x V) at the ``<mask>`` row. (The objective now runs the
decoder for the K label words only; the head term still counts V, as before: <= 0.3% of the
total.) TFLOP/s = FLOPs per generation x generations per second; ``%peak`` divides by
``--peak-tflops`` (default 989, the H100/H200 SXM dense bf16 peak). ``useful TFLOP/s`` counts
real tokens only (each row at its own length): the padding removed by bucketing shows there,
not in TFLOP/s. On CUDA a large bf16 matmul (``--matmul-size``, default 8192) is timed in the
same run as an achievable reference. ``padding`` is the share of processed tokens that are
padding (:func:`replication.prompt.objective.padding_fraction`).

Timing: ``--warmup`` untimed generations (default 1; compilation happens there) then
``--repeats`` timed ones (default 3 on CUDA, 1 on CPU); CUDA timings are bracketed by
``torch.cuda.synchronize()``.

GPU idle share (``--profile-iters K``, in the modes of ``--profile-modes``): K iterations of the
study's loop -- SABO ask/tell (two rounds of N candidates per iteration), then the metrics of
the mean on the training and a dev set (as :class:`PromptProblem` records them every iteration)
-- after one untimed iteration, under ``torch.profiler``. Per iteration, idle share = 1 - (union
of the GPU's kernel and memory-copy intervals) / wall time of the iteration.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

from replication.prompt.model import compile_encoder, random_backbone, roberta_large_config, set_attention
from replication.prompt.objective import PromptObjective, encode_ids
from replication.prompt.soft_prompt import PromptProjection
from replication.storage import write_json

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
# mode -> (weights, attention, objective keyword arguments, compile)
MODES = {
    "baseline": ("fp32", "sdpa", dict(bucketing=False), False),
    "bf16-eager": ("bf16", "eager", dict(bucketing=False), False),
    "bf16": ("bf16", "sdpa", dict(bucketing=False), False),
    "bucket": ("bf16", "sdpa", dict(), False),
    "bucket-exact": ("bf16", "sdpa", dict(bucket_tokens=0), False),
    "bucket-pad": ("bf16", "sdpa", dict(bucket_pad=None), False),   # None: --bucket-pad
    "compile": ("bf16", "sdpa", dict(), True),
    "varlen": ("bf16", "sdpa", dict(packed=True), False),
    "varlen-big": ("bf16", "sdpa", dict(packed=True, chunk_tokens=131072), False),
    "varlen-compile": ("bf16", "sdpa", dict(packed=True, compile=True), False),
    "varlen-fp32": ("fp32", "sdpa", dict(packed=True), False),
    "varlen-fp32-compile": ("fp32", "sdpa", dict(packed=True, compile=True), False),
    "varlen-sdpa": ("bf16", "sdpa", dict(packed=True, compile=True, encoder_options=dict(attention="sdpa")), False),
    "varlen-tanh": ("bf16", "sdpa", dict(packed=True, compile=True, encoder_options=dict(gelu="tanh")), False),
    "varlen-sdpa-tanh": ("bf16", "sdpa", dict(packed=True, compile=True,
                                              encoder_options=dict(attention="sdpa", gelu="tanh")), False),
    "varlen-autotune": ("bf16", "sdpa", dict(packed=True, compile=True,
                                             encoder_options=dict(compile_mode="max-autotune-no-cudagraphs")), False),
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
    p_enc = sum(p.numel() for p in model.base_model.encoder.parameters())
    total = 0.0
    for r, L in shapes:
        total += 2.0 * p_enc * r * L + 4.0 * layers * r * L * L * D + 2.0 * r * (D * D + D * V)
    return total


def useful_flops(model, row_lengths) -> float:
    """The same formula with every row at its own (real) length: the FLOPs that are not padding."""
    return sum(forward_flops(model, [(1, int(L)) for L in lengths]) for lengths in row_lengths)


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


def spearman(a, b) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b)[0])


def gpu_idle_share(objective, dev_split, Z0, iters: int, device, seed: int = 0) -> dict:
    """Idle share of the GPU per iteration of the study loop (see the module docstring)."""
    import sabo
    from replication.prompt.problem import PromptProblem

    problem = PromptProblem(objective, dev_split, dev_split)
    n, d = Z0.shape
    opt = sabo.SABO(np.zeros(d), sigma0=1.0, popsize=n, lr=0.5, rho=10.0, seed=seed)

    def iteration():
        start = opt.nit
        while opt.nit == start:
            X = opt.ask()
            opt.tell(X, problem.objective(X))
        problem.metrics(opt.mean)
        sync(device)

    iteration()  # warm-up: plans for N and for one candidate, compilation
    walls = []
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for k in range(iters):
            with torch.profiler.record_function(f"study_iteration_{k}"):
                t0 = time.perf_counter()
                iteration()
                walls.append(time.perf_counter() - t0)
    events = prof.events()
    spans = sorted((e.time_range.start, e.time_range.end) for e in events
                   if e.name.startswith("study_iteration_") and e.device_type == torch.autograd.DeviceType.CPU)
    gpu = sorted((e.time_range.start, e.time_range.end) for e in events
                 if e.device_type == torch.autograd.DeviceType.CUDA)
    shares = []
    for lo, hi in spans:
        busy, cur_lo, cur_hi = 0.0, None, None   # union of GPU intervals clipped to the iteration
        for s, e in gpu:
            s, e = max(s, lo), min(e, hi)
            if e <= s:
                continue
            if cur_hi is None or s > cur_hi:
                if cur_hi is not None:
                    busy += cur_hi - cur_lo
                cur_lo, cur_hi = s, e
            else:
                cur_hi = max(cur_hi, e)
        if cur_hi is not None:
            busy += cur_hi - cur_lo
        shares.append(1.0 - busy / (hi - lo) if hi > lo else float("nan"))
    out = {"iterations": iters, "seconds_per_iteration": float(np.median(walls)),
           "wall_s": walls, "gpu_events": len(gpu)}
    if device.type == "cuda":
        out.update(idle_share=float(np.median(shares)), idle_share_per_iteration=shares)
    else:
        out.update(idle_share=None, idle_share_per_iteration=None)
    return out


# GPU kernel categories of --breakdown, matched in this order on the lower-cased kernel name
# (attention first: flash kernels' names hold cutlass types; inductor's element-wise and reduction
# kernels before matmul: they are named after the ops they fuse, "addmm" among them; its matrix
# product templates, "triton_tem_*", are matmuls)
KERNEL_CATEGORIES = (
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("compiled (triton)", ("triton_poi", "triton_per", "triton_red", "triton_for")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "matmul", "addmm", "linear", "triton_tem")),
    ("layernorm", ("layer_norm", "layernorm")),
    ("copy/cast/index", ("copy", "cast", "index", "gather", "scatter", "cat", "memcpy", "memset", "fill")),
    ("element-wise", ("elementwise", "vectorized", "unrolled", "gelu", "add", "mul", "reduce", "softmax")),
)


def kernel_breakdown(fn, device) -> dict:
    """Shares of GPU kernel time per category (:data:`KERNEL_CATEGORIES`) in one call of ``fn``; top kernels.

    On CUDA the GPU kernels' own time (the operators that launch them are not counted again, nor
    CUPTI's "Command Buffer Full" markers, which time the launch queue, not the GPU); on the CPU
    the operators' own CPU time instead.
    """
    activities = [torch.profiler.ProfilerActivity.CPU]
    gpu = device.type == "cuda"
    if gpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    sync(device)
    with torch.profiler.profile(activities=activities) as prof:
        fn()
        sync(device)
    totals, kernels = {}, {}
    for e in prof.key_averages():
        name = e.key.lower()
        if gpu and (e.device_type != torch.autograd.DeviceType.CUDA or "command buffer full" in name):
            continue
        t = e.self_device_time_total if gpu else e.self_cpu_time_total
        if t <= 0:
            continue
        cat = next((c for c, keys in KERNEL_CATEGORIES if any(k in name for k in keys)), "other")
        totals[cat] = totals.get(cat, 0.0) + t
        kernels[e.key] = kernels.get(e.key, 0.0) + t
    total = sum(totals.values()) or 1.0
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:8]
    return {"total_us": total, "shares": {c: v / total for c, v in sorted(totals.items(), key=lambda kv: -kv[1])},
            "top": [(k[:90], v / total) for k, v in top]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", choices=sorted(MODELS), default=None,
                    help="default: small on CPU, roberta-large-shape on CUDA")
    ap.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    ap.add_argument("--n", type=int, default=100, help="candidates per generation")
    ap.add_argument("--d", type=int, default=500, help="intrinsic dimension")
    ap.add_argument("--examples", type=int, default=32, help="few-shot training examples")
    ap.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=["sst2", "yelp"])
    ap.add_argument("--bucket-pad", type=float, default=0.03, help="padding tolerance of the bucket-pad mode")
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode of the compile mode (default: default)")
    ap.add_argument("--loop", action="store_true", help="also time the per-candidate loop in the first mode")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=None, help="timed generations (default 3 on CUDA, 1 on CPU)")
    ap.add_argument("--profile-iters", type=int, default=0, help="study-loop iterations profiled for the idle share")
    ap.add_argument("--profile-modes", nargs="+", choices=list(MODES), default=["baseline", "bucket"])
    ap.add_argument("--profile-workload", choices=sorted(WORKLOADS), default="sst2")
    ap.add_argument("--breakdown", action="store_true",
                    help="share of GPU kernel time per category (matmul, attention, ...) in one generation per mode")
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
    n = args.n
    modes = [m for m in MODES if m in args.modes]          # compile last: it changes the bf16 model in place
    config = roberta_large_config(**MODELS[model_name])
    models = {}

    def model_for(weights, attention, compiled):
        if weights not in models:
            if weights == "bf16" and "fp32" in models:
                models["bf16"] = random_backbone(config, device, torch.float32, seed=args.seed).to(torch.bfloat16)
            else:
                models[weights] = random_backbone(config, device, torch.float32, seed=args.seed).to(
                    torch.bfloat16 if weights == "bf16" else torch.float32)
        m = set_attention(models[weights], attention)
        if compiled and not getattr(m, "_bench_compiled", False):
            compile_encoder(m, mode=args.compile_mode)
            m._bench_compiled = True
        return m

    tokenizer = SimpleNamespace(pad_token_id=PAD, mask_token_id=MASK, bos_token_id=BOS, eos_token_id=EOS)
    ref_model = model_for("fp32" if "baseline" in modes else "bf16", "sdpa", False)
    proj = PromptProjection.from_model(ref_model, args.d, seed=args.seed)
    Z = np.random.default_rng(args.seed).standard_normal((n, args.d))

    import transformers

    info = {"device": torch.cuda.get_device_name(device) if cuda else platform.processor() or platform.machine(),
            "torch": torch.__version__, "transformers": transformers.__version__, "model": model_name,
            "n": n, "d": args.d, "examples": args.examples, "threads": torch.get_num_threads(), "repeats": repeats,
            "peak_tflops": args.peak_tflops, "modes": modes, "bucket_pad": args.bucket_pad,
            "compile_mode": args.compile_mode,
            "encoder_params": sum(p.numel() for p in ref_model.base_model.encoder.parameters())}
    if cuda:
        info["matmul_bf16_tflops"] = matmul_reference(device, args.matmul_size)
    print(f"# {info['device']} | torch {info['torch']} | transformers {info['transformers']} | model {model_name} "
          f"({info['encoder_params'] / 1e6:.1f}M encoder params) | N = {n}, d = {args.d}, {args.examples} examples "
          f"| threads {info['threads']}", flush=True)
    if cuda:
        mm = info["matmul_bf16_tflops"]
        print(f"# reference: {args.matmul_size}^3 bf16 matmul {mm:.0f} TFLOP/s ({100 * mm / args.peak_tflops:.0f}% of "
              f"{args.peak_tflops:.0f} peak)", flush=True)

    def kw_of(mode):
        return {k: (args.bucket_pad if v is None else v) for k, v in MODES[mode][2].items()}

    def objective(mode, split):
        weights, attention, _, compiled = MODES[mode]
        kw = kw_of(mode)
        m = model_for(weights, attention, compiled)
        return PromptObjective(m, tokenizer, split, None, LABEL_IDS, proj, autocast=cuda and weights == "fp32",
                               **kw)

    rows, splits, profiles = [], {}, []

    def save():  # after every mode: a part stopped by its time limit keeps what it measured
        out = {"info": info, "rows": rows, "idle_share": profiles}
        if args.json:
            write_json(args.json, out)
        return out

    for wname in args.workloads:
        split = splits[wname] = make_split(args.examples, WORKLOADS[wname], config.vocab_size, args.seed)
        first = None
        for mode in modes:
            try:
                obj = objective(mode, split)
                t0 = time.perf_counter()
                for _ in range(args.warmup):
                    obj.losses(Z)
                sync(device)
                warm = time.perf_counter() - t0
                last = {}
                t = timed(lambda last=last, obj=obj: last.update(losses=obj.losses(Z)), device, repeats)
                losses = last["losses"]
            except Exception as exc:  # one failing mode must not lose the others
                print(f"# {wname} {mode}: FAILED {type(exc).__name__}: {exc}", flush=True)
                rows.append({"workload": wname, "mode": mode, "error": f"{type(exc).__name__}: {exc}"})
                save()
                continue
            fws = obj._plan(obj._batch, n, obj._plan_kind())
            shapes = obj.forward_shapes(n)   # packed: one (1, length) per segment, the same FLOPs
            flops = forward_flops(obj.model, shapes)
            useful = useful_flops(obj.model, [f.lengths for f in fws])
            if first is None:
                first = losses
            rel = np.abs(losses - first) / np.abs(first)
            row = {"workload": wname, "mode": mode, "weights": MODES[mode][0], "attention": MODES[mode][1],
                   "bucketing": obj.bucketing, "packed": obj.packed,
                   "compiled": MODES[mode][3] or bool(kw_of(mode).get("compile")), "forwards": len(fws),
                   "unmasked_forwards": sum(getattr(f, "att", None) is None for f in fws),
                   "max_rows_per_forward": max(f.rows for f in fws), "warmup_s": warm,
                   "seconds_per_generation": t, "generations_per_s": 1.0 / t,
                   "sequences_per_s": n * len(split) / t, "tflops": flops / t / 1e12,
                   "pct_peak": 100.0 * flops / t / 1e12 / args.peak_tflops, "useful_tflops": useful / t / 1e12,
                   "padding_fraction": obj.padding_fraction(n),
                   "mean_seq_len": float(split.lengths.mean()), "max_seq_len": int(split.lengths.max()),
                   "max_rel_diff_vs_first_mode": float(rel.max()), "spearman_vs_first_mode": spearman(losses, first)}
            if args.breakdown:
                row["breakdown"] = kernel_breakdown(lambda obj=obj: obj.losses(Z), device)
                shares = ", ".join(f"{c} {100 * v:.1f}%" for c, v in row["breakdown"]["shares"].items())
                print(f"# {wname:<5} {mode:<12} kernel time: {shares}", flush=True)
                for k, v in row["breakdown"]["top"]:
                    print(f"#     {100 * v:5.1f}%  {k}", flush=True)
            rows.append(row)
            print(f"# {wname:<5} {mode:<12} {row['generations_per_s']:.4g} gen/s  {row['tflops']:.4g} TFLOP/s "
                  f"({row['pct_peak']:.1f}%)  padding {100 * row['padding_fraction']:.1f}%  forwards {len(fws)}  "
                  f"warm-up {warm:.1f} s", flush=True)
            if args.loop and mode == modes[0]:
                loop_n = min(n, 8 if not cuda else n)
                t_loop = timed(lambda obj=obj, loop_n=loop_n: obj.loss_loop(Z[:loop_n]), device, 1) * n / loop_n
                lshapes = obj.forward_shapes(n, loop=True)
                rows.append({**row, "mode": f"{mode}-loop", "forwards": len(lshapes),
                             "seconds_per_generation": t_loop, "generations_per_s": 1.0 / t_loop,
                             "sequences_per_s": n * len(split) / t_loop,
                             "tflops": forward_flops(obj.model, lshapes) / t_loop / 1e12,
                             "pct_peak": 100.0 * forward_flops(obj.model, lshapes) / t_loop / 1e12 / args.peak_tflops,
                             "useful_tflops": float("nan"), "padding_fraction": obj.padding_fraction(n, loop=True)})
            save()

    hdr = (f"{'workload':<9}{'mode':<15}{'fwds':>5}{'gen/s':>9}{'speed-up':>9}{'TFLOP/s':>9}{'%peak':>7}"
           f"{'useful':>8}{'padding':>8}{'max rel':>9}{'spearman':>9}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        if "error" in r:
            print(f"{r['workload']:<9}{r['mode']:<15} FAILED: {r['error'][:80]}")
            continue
        base = next(x for x in rows if x["workload"] == r["workload"] and "error" not in x)
        peak = f"{r['pct_peak']:.1f}%" if cuda else "-"  # a GPU peak means nothing for a CPU run
        print(f"{r['workload']:<9}{r['mode']:<15}{r['forwards']:>5}{r['generations_per_s']:>9.4g}"
              f"{r['generations_per_s'] / base['generations_per_s']:>8.2f}x{r['tflops']:>9.4g}{peak:>7}"
              f"{r['useful_tflops']:>8.4g}{100 * r['padding_fraction']:>7.1f}%{r['max_rel_diff_vs_first_mode']:>9.1e}"
              f"{r['spearman_vs_first_mode']:>9.4f}")
    print("# speed-up: generations per second relative to the workload's first mode; TFLOP/s counts padding "
          "(as before), useful TFLOP/s does not; max rel / spearman: losses vs the first mode's")

    if args.profile_iters > 0:
        split = splits.get(args.profile_workload) or make_split(args.examples, WORKLOADS[args.profile_workload],
                                                                 config.vocab_size, args.seed)
        dev = make_split(args.examples, WORKLOADS[args.profile_workload], config.vocab_size, args.seed + 1)
        for mode in [m for m in modes if m in args.profile_modes]:
            try:
                res = gpu_idle_share(objective(mode, split), dev, Z, args.profile_iters, device, args.seed)
            except Exception as exc:
                print(f"# idle-share {mode}: FAILED {type(exc).__name__}: {exc}", flush=True)
                profiles.append({"mode": mode, "error": f"{type(exc).__name__}: {exc}"})
                continue
            res.update(mode=mode, workload=args.profile_workload)
            profiles.append(res)
            idle = "n/a (no GPU)" if res["idle_share"] is None else f"{100 * res['idle_share']:.1f}%"
            print(f"# study loop ({args.profile_workload}, {mode}; SABO, 2 x N = {2 * n} candidates + metrics per "
                  f"iteration): {res['seconds_per_iteration']:.3f} s/iteration, GPU idle {idle}", flush=True)
    return save()


if __name__ == "__main__":
    main()
