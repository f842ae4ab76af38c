#!/usr/bin/env bash
# `make gpu-bench`: the one prepared run for a lent CUDA machine (no network, a loan of minutes).
#
# Latency first, tests last, every step under its own timeout, everything under $OUT:
#   1. env.log: python, torch, CUDA device, transformers (what the records will name);
#   2. one interleaved `bench latency` run per encoder width (MiniLM-L6 with its real weights;
#      distilbert-6l, the paper's width, random weights of that size): monoBERT at its best
#      batch, CROSS-JEM (union layout) and the sentence-transformers CrossEncoder peer, at
#      N = 10, 100, 700, in float32, tf32 and bfloat16 (each precision a row of the same run),
#      warmed up once per timed list so no first-call cost is timed; one profiler pass per
#      entry after the timing (kernels launched and device busy time per query: --profile);
#      records under $OUT/results/latency/wikiqa/, the printed tables in $OUT/latency-*.md;
#   3. gpu-bench.md: the paper-style table rendered from those records
#      (`bench latency-table`), one row per (width, precision, N);
#   4. the GPU test suite (`pytest -m gpu`) into $OUT/pytest-gpu.log (on CUDA only).
# A step that fails or times out is reported and the next one runs: one failing test never
# loses the latency records. steps.txt ends with each step's status and seconds.
#
# GPU_BENCH_DEVICE=cpu runs the same steps on the CPU, 1 thread (tf32 is a CUDA matmul mode:
# there it is skipped with a line saying why, and float32 and bfloat16 are timed); QUICK=1 cuts
# it to N = 10, 2 queries, 1 repeat, each ranker's batch of the whole list only (float32 and
# the skipped tf32 on a CPU), so `GPU_BENCH_DEVICE=cpu make gpu-bench QUICK=1` keeps the whole
# script working in CI (make test runs it as gpu-bench-cpu).
# Needs: $BENCH_DATA_DIR holding wikiqa; python with torch, transformers 5 and the stack
# (docs/scaling.md#gpu says how to carry what a machine without network lacks, at most 64 MiB).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
: "${BENCH_DATA_DIR:?set BENCH_DATA_DIR to a folder holding wikiqa}"
OUT="${OUT:-$PWD/gpu-bench-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export BENCH_RESULTS_DIR="$OUT/results" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 \
  TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
DEVICE="${GPU_BENCH_DEVICE:-cuda}"
QUICK="${QUICK:-0}"
if [ "$QUICK" = 1 ]; then
  sizes=10; queries=2; repeats=1; step_timeout=120; batches=all
else
  sizes=10,100,700; queries=10; repeats=3; step_timeout=150; batches=64,all
fi
if [ "$DEVICE" = cpu ]; then
  # a CPU shared with other jobs (make test runs this beside pytest) is slow, not stuck: the
  # step limits are a lent GPU's, so a CPU gets 10 minutes a step
  step_timeout=600
  dtypes=float32,tf32,bfloat16; threads=(--threads "${GPU_BENCH_THREADS:-1}")
  if [ "$QUICK" = 1 ]; then dtypes=float32,tf32; fi
else
  dtypes=float32,tf32,bfloat16; threads=()
fi
archs="${GPU_BENCH_ARCHS:-minilm-l6 distilbert-6l}"
start=$(date +%s)
failed=0
: > "$OUT/steps.txt"

# run NAME SECONDS CMD...: one step under its own timeout, its output in $OUT/NAME.log
run() {
  local name=$1 limit=$2 t0 status
  shift 2
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  status=$?
  [ $status -eq 0 ] || failed=$((failed + 1))
  local line="[gpu-bench] $name: exit $status after $(( $(date +%s) - t0 )) s (at $(( $(date +%s) - start )) s)"
  [ $status -eq 124 ] && line="$line: TIMED OUT after $limit s"
  echo "$line" | tee -a "$OUT/steps.txt"
  return $status
}

run env 60 "$PY" -c '
import platform, sys, torch, transformers
print("python", sys.version.split()[0], platform.machine())
print("torch", torch.__version__, "cuda", torch.version.cuda)
print("transformers", transformers.__version__)
if torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        print("device", i, torch.cuda.get_device_name(i))
cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
print("cpu", cpu[0] if cpu else platform.processor() or "?", "threads", torch.get_num_threads())
'
cat "$OUT/env.log"

for arch in $archs; do
  run "latency-$arch" "$step_timeout" "$PY" -m bench.cli -q latency -d wikiqa --device "$DEVICE" \
    --arch "$arch" --rankers monobert,crossjem,st-crossencoder --n-items "$sizes" \
    --queries "$queries" --repeats "$repeats" --warmup "$queries" \
    --monobert-batch-sizes "$batches" --peer-batch-sizes "$batches" --set crossjem.order=union \
    --dtypes "$dtypes" --profile "${threads[@]}" --format markdown
  grep '^|' "$OUT/latency-$arch.log" > "$OUT/latency-$arch.md" || true
done

run table 60 "$PY" -m bench.cli -q latency-table "$BENCH_RESULTS_DIR/latency/wikiqa" \
  --output "$OUT/gpu-bench.md"
[ -f "$OUT/gpu-bench.md" ] && cat "$OUT/gpu-bench.md"

if [ "$DEVICE" != cpu ]; then
  run pytest-gpu 240 "$PY" -m pytest -m gpu -rs -q -p no:cacheprovider tests/test_gpu.py
  tail -3 "$OUT/pytest-gpu.log"
fi

# the random weights of --arch (written under results/models/, hundreds of MB) are the seed's
# again on any machine: only the records and tables come back
rm -rf "$BENCH_RESULTS_DIR/models"
echo "[gpu-bench] $failed step(s) failed; total $(( $(date +%s) - start )) s; everything under $OUT"
exit $(( failed > 0 ))
