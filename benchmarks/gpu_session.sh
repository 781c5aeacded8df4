#!/usr/bin/env bash
# One GPU session for the prompt-tuning throughput issue (run once, from the repository root):
#
#     bash benchmarks/gpu_session.sh                          # on the GPU machine, ~8 minutes (464 s, H200)
#     GPU_SESSION_TINY=1 OUT=/tmp/gs PYTHON=.venv/bin/python bash benchmarks/gpu_session.sh
#                                                             # dry run on CPU, small sizes (PYTHON: one with torch)
#
# Parts, in order, each in its own process with its own time limit (a failing or timed-out part
# prints its error and the script goes on), all under one overall deadline (GPU_SESSION_BUDGET_S,
# default 540 s; a part that would start with under 25 s left is skipped):
#   fusion      prompt_objective.py --breakdown, N = 100, SST-2- and Yelp-like: varlen-compile (the
#               reference), varlen-sdpa (packed rows, attention through SDPA's fixed-length kernels),
#               varlen-tanh (bias + tanh GELU in the FFN product's cuBLASLt epilogue),
#               varlen-sdpa-tanh (both), varlen-autotune (max-autotune-no-cudagraphs: Triton products
#               with fused epilogues; last, its autotuning is the slowest warm-up)
#                                                                          -> fusion.json
#   multi_gpu   only with more than one GPU: prompt_study_check.py --workers <GPUs> (runs per device,
#               overlapping runs on distinct devices)                    -> multi_gpu.json
#   bench       prompt_objective.py, N = 100, SST-2- and Yelp-like: baseline (fp32 + autocast,
#               earlier layout), bucket (bf16, SDPA, length buckets: the best padded layout), varlen
#               (bf16, packed rows, variable-length flash attention), varlen-big (128k tokens per
#               forward), varlen-compile, varlen-fp32 (fp32 + autocast, packed), varlen-fp32-compile;
#               GPU idle share of the study loop for baseline and varlen-fp32-compile -> bench.json
#   study_old   prompt_study_check.py --earlier (fp32, no bucketing)       -> study_earlier.json
#   study_new   prompt_study_check.py --attention varlen --compile (fp32)  -> study_new.json
#   bo          bo_cost.py --quick-gpu: TuRBO-1 and GIBO on CUDA at d 200 500 1000, k 10 50 100, and
#               the projection of their part of the gpu profile              -> bo_cost.json
#               (the measurements in README were taken with the two earlier scripts it replaces,
#               bo_cost.py --method turbo and gibo_cost.py, iterations 3 and 6)
#   study_bf16  prompt_study_check.py --attention varlen --compile --weights bf16 -> study_bf16.json
# Everything goes under $OUT: <part>.json, <part>.out (stdout+stderr), session.log, summary.txt.
# Run it through the device tool with carry [".whl"] (cma, pydantic; see README, Benchmarks).
# Make .whl/ once on a machine with PyPI (GPU machine: Python 3.12, manylinux x86_64), e.g.
#     pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux2014_x86_64 -d .whl cma==4.5.0 pydantic annotated-types typing-inspection
# and move the binary pydantic_core wheel into .whl/cp312/.
set -u
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"
LOG="$OUT/session.log"
: > "$LOG"
T0=$(date +%s)
BUDGET=${GPU_SESSION_BUDGET_S:-540}
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then  # packages the GPU machine lacks (cma, pydantic), carried as wheels:
  # pure-Python ones in .whl/, binary ones per Python version in .whl/cpXY/
  CPV=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl $(ls .whl/"$CPV"/*.whl 2>/dev/null) || echo "WARNING: wheel install failed" | tee -a "$LOG"
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=.:${PYTHONPATH:-}
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

if [ "${GPU_SESSION_TINY:-0}" = "1" ]; then
  DEV=(--device cpu --model small)
  BENCH=(--n 8 --examples 8 --repeats 1 --threads 2 --profile-iters 1)
  STUDY=(--iterations 1)
  BO_DIMS=(20) BO_K=(2)
  L_FUSION=600 L_BENCH=600 L_STUDY=900 L_STUDY_COMPILED=900 L_BO=300
  BUDGET=${GPU_SESSION_BUDGET_S:-3600}
else
  DEV=(--device cuda --model roberta-large-shape)
  BENCH=(--n 100 --examples 32 --repeats 2 --profile-iters 3)
  STUDY=()
  L_FUSION=240 L_BENCH=160 L_STUDY=75 L_STUDY_COMPILED=110 L_BO=90   # compiled: + its one-off compilation
fi

part() {  # part NAME LIMIT_S COMMAND...
  local name=$1 limit=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  if [ "$left" -lt 25 ]; then
    echo "== $name SKIPPED (${left}s of the session budget left)" | tee -a "$LOG"; return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (limit ${limit}s): $*" | tee -a "$LOG"
  local s=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  echo "== $name rc=$rc in $(( $(date +%s) - s ))s$( [ $rc -eq 124 ] && echo ' (TIMED OUT)')" | tee -a "$LOG"
  if [ $rc -ne 0 ]; then tail -n 15 "$OUT/$name.out" | tee -a "$LOG"; fi
  return 0
}

{ echo "# $(date -u) $(hostname)"; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null
  $PY -c "import sys, torch, transformers; print('python', sys.version.split()[0], '| torch', torch.__version__, \
'| transformers', transformers.__version__, '| cuda', torch.cuda.is_available())"; } 2>&1 | tee -a "$LOG"

part fusion "$L_FUSION" $PY benchmarks/prompt_objective.py "${DEV[@]}" "${BENCH[@]}" \
  --modes varlen-compile varlen-sdpa varlen-tanh varlen-sdpa-tanh varlen-autotune --breakdown --json "$OUT/fusion.json"
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${GPUS:-0}" -gt 1 ]; then
  part multi_gpu "$L_STUDY_COMPILED" $PY benchmarks/prompt_study_check.py "${DEV[@]}" "${STUDY[@]}" --workers "$GPUS" \
    --no-report --json "$OUT/multi_gpu.json"
else
  echo "== multi_gpu SKIPPED (${GPUS:-0} GPU visible)" | tee -a "$LOG"
fi
part bench "$L_BENCH" $PY benchmarks/prompt_objective.py "${DEV[@]}" "${BENCH[@]}" \
  --modes baseline bucket varlen varlen-big varlen-compile varlen-fp32 varlen-fp32-compile \
  --profile-modes baseline varlen-fp32-compile --json "$OUT/bench.json"
part study_old "$L_STUDY" $PY benchmarks/prompt_study_check.py "${DEV[@]}" "${STUDY[@]}" --earlier --no-report \
  --json "$OUT/study_earlier.json"
part study_new "$L_STUDY_COMPILED" $PY benchmarks/prompt_study_check.py "${DEV[@]}" "${STUDY[@]}" --attention varlen \
  --compile --no-report --json "$OUT/study_new.json"
if [ "${GPU_SESSION_TINY:-0}" = "1" ]; then
  part bo "$L_BO" $PY benchmarks/bo_cost.py --device cpu --dims "${BO_DIMS[@]}" --iterations "${BO_K[@]}" \
    --json "$OUT/bo_cost.json"
else
  part bo "$L_BO" $PY benchmarks/bo_cost.py --quick-gpu --json "$OUT/bo_cost.json"
fi
part study_bf16 "$L_STUDY_COMPILED" $PY benchmarks/prompt_study_check.py "${DEV[@]}" "${STUDY[@]}" --attention varlen \
  --compile --weights bf16 --no-report --json "$OUT/study_bf16.json"

$PY - "$OUT" <<'PYEOF' 2>&1 | tee "$OUT/summary.txt"
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as fh:
            return json.load(fh)
    except Exception as exc:  # noqa: BLE001
        print(f"[{name}: missing ({type(exc).__name__})]")
        return None
for name in ("fusion.json", "bench.json"):
    b = load(name)
    if not b:
        continue
    i = b["info"]
    print(f"## {name}: {i['device']} | torch {i['torch']} | {i['model']} | N={i['n']} | matmul ref "
          f"{i.get('matmul_bf16_tflops', float('nan')):.0f} TFLOP/s")
    print(f"{'workload':<6}{'mode':<20}{'fwd':>4}{'gen/s':>8}{'TFLOP/s':>9}{'%peak':>7}{'useful':>8}{'pad%':>6}{'warm s':>8}{'maxrel':>9}{'spearm':>8}")
    for r in b["rows"]:
        if "error" in r:
            print(f"{r['workload']:<6}{r['mode']:<20} FAILED {r['error'][:70]}")
        else:
            print(f"{r['workload']:<6}{r['mode']:<20}{r['forwards']:>4}{r['generations_per_s']:>8.3f}{r['tflops']:>9.1f}"
                  f"{r['pct_peak']:>7.1f}{r['useful_tflops']:>8.1f}{100 * r['padding_fraction']:>6.1f}{r['warmup_s']:>8.1f}"
                  f"{r['max_rel_diff_vs_first_mode']:>9.1e}{r['spearman_vs_first_mode']:>8.3f}")
            if "breakdown" in r:
                print("      kernel time: " + ", ".join(f"{c} {100 * v:.1f}%" for c, v in r["breakdown"]["shares"].items()))
    for p in b.get("idle_share", []):
        if "error" in p:
            print(f"idle share {p['mode']}: FAILED {p['error'][:70]}")
        else:
            idle = "n/a" if p["idle_share"] is None else f"{100 * p['idle_share']:.1f}%"
            print(f"study loop {p['workload']} {p['mode']}: {p['seconds_per_iteration']:.3f} s/iter (SABO), GPU idle {idle}")
for name in ("multi_gpu.json", "study_earlier.json", "study_new.json", "study_bf16.json"):
    if name == "multi_gpu.json" and not os.path.exists(os.path.join(out, name)):
        continue
    s = load(name)
    if s:
        print(f"## {name}: {s['options']} | {s['runs']} runs in {s['wall_s']:.1f} s | median s/iter: one-round "
              f"{s['one_round_s_per_iter_median']}, SABO {s['sabo_s_per_iter_median']} | runs per device "
              f"{s['runs_per_device']}, overlapping pairs on distinct devices {s['overlapping_pairs_on_distinct_devices']}")
PYEOF
echo "== session done in $(( $(date +%s) - T0 ))s; outputs in $OUT" | tee -a "$LOG"
