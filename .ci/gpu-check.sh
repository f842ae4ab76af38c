#!/usr/bin/env bash
# `make gpu-check`: what a lent CUDA machine (no network, a short loan) should run, in one go.
#   1. the GPU suite: `pytest -m gpu` (every ranker's CUDA scores against CPU float32, the
#      latency tracker's device time, a short CUDA training);
#   2. which attention kernel (flash, memory-efficient, cuDNN, math) each CROSS-JEM layout and
#      monoBERT gets on CUDA in each dtype (.ci/attention_kernels.py);
#   3. the CUDA latency of monoBERT and every CROSS-JEM row layout of `bench ablate --what
#      order` (bench/experiments/ablate.py is the one list) at N=100 and 700, in float32, bfloat16
#      and float16: one `bench latency` run per layout and dtype, monoBERT timed in the same run,
#      so each record's speed-up is a ratio measured on one machine in one run.
# Records go to $BENCH_RESULTS_DIR/latency/wikiqa/ (default ./gpu-results); the output ends with
# the time each step took. GPU_CHECK_QUICK=1 times the union layout only; GPU_CHECK_QUERIES,
# _REPEATS, _WARMUP change the 10 queries, 3 repeats, 3 warm-up calls; GPU_CHECK_DEVICE=cpu
# runs the latency part on the CPU (to try the script where there is no GPU).
# Needs: python with CUDA torch and the stack (docs/scaling.md#gpu), the project on PYTHONPATH,
# $BENCH_DATA_DIR holding wikiqa.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
: "${BENCH_DATA_DIR:?set BENCH_DATA_DIR to a folder holding wikiqa}"
export BENCH_RESULTS_DIR="${BENCH_RESULTS_DIR:-$PWD/gpu-results}"
export HF_HUB_OFFLINE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
sizes=100,700; dtypes="float32 bfloat16 float16"
if [ "$DEVICE" = cpu ]; then dtypes="float32 bfloat16"; fi
start=$(date +%s)
step() { echo "[gpu-check] $1 done at $(( $(date +%s) - start )) s"; }

if [ "$DEVICE" = cuda ]; then
  "$PY" -m pytest -m gpu -rs -q -p no:cacheprovider tests/test_gpu.py
  step "pytest -m gpu"
  "$PY" .ci/attention_kernels.py cuda
  step "attention kernels"
fi

# one line of --set arguments per CROSS-JEM layout, from the order ablation's own list
mapfile -t layouts < <("$PY" -c '
from bench.experiments.ablate import ABLATIONS
ab = ABLATIONS["order"]
quick = __import__("os").environ.get("GPU_CHECK_QUICK") == "1"
for i in range(1 if quick else len(ab.values)):
    print(" ".join(f"--set crossjem.{k}={v}" for k, v in ab.options(i).items()))
')
for dtype in $dtypes; do
  for layout in "${layouts[@]}"; do
    # shellcheck disable=SC2086 # one word per --set argument
    "$PY" -m bench.cli -q latency -d wikiqa --device "$DEVICE" --rankers monobert,crossjem \
      --n-items "$sizes" --queries "${GPU_CHECK_QUERIES:-10}" --repeats "${GPU_CHECK_REPEATS:-3}" \
      --warmup "${GPU_CHECK_WARMUP:-3}" --monobert-batch-sizes 64,all \
      --set "dtype=$dtype" $layout --format markdown
    step "latency $dtype ${layout//--set crossjem./}"
  done
done
echo "[gpu-check] records: $BENCH_RESULTS_DIR/latency/wikiqa/"
