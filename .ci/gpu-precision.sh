#!/usr/bin/env bash
# The precision grid on a lent GPU machine, as run for docs/results.md#precision (from the
# checkout with gpu-carry/ of docs/scaling.md#gpu, its data/ holding the datasets): the GPU suite
# and attention kernels, beside them semeval16b trained on CUDA and scored on CUDA in
# fp32/bf16/fp16 and on the host CPU in fp32/bf16/int8, then the CUDA latency of the union layout.
# Everything ends by SESSION_SECONDS (a short loan); logs and records go to $OUT/all2.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
DEADLINE=$(( T0 + ${SESSION_SECONDS:-280} ))
cap() { local l=$(( DEADLINE - $(date +%s) )); [ $l -lt $1 ] && echo $(( l > 5 ? l : 5 )) || echo $1; }
L=/tmp/logs; mkdir -p $L
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site gpu-carry/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD BENCH_MINILM_DIR=$PWD/gpu-carry/minilm-l6-fp16 \
  BENCH_DATA_DIR=$PWD/gpu-carry/data HF_HUB_OFFLINE=1 PYTHON=python3 BENCH_RESULTS_DIR=/tmp/res
B="python3 -m bench.cli -q"
chain() {
  local ds=$1
  for r in monobert crossjem; do
    for dt in float32 bfloat16 float16; do
      timeout $(cap 150) taskset -c 4-11 $B run -r $r -d $ds --device cuda --set dtype=$dt
      el "B $ds $r cuda $dt exit $?"
    done
  done
  for r in monobert crossjem; do
    m=$(ls -d /tmp/res/models/$ds/$r/*/ 2>/dev/null | head -1)
    [ -n "$m" ] || { el "D $ds $r: no model"; continue; }
    for dt in float32 bfloat16 int8; do
      rt=(); [ $dt = int8 ] && rt=(--set runtime=onnxruntime)
      ( timeout $(cap 120) $B run -r $r -d $ds --device cpu --threads 2 \
        --set checkpoint=$m --set dtype=$dt "${rt[@]}"; el "D $ds $r cpu $dt exit $?" ) &
    done
  done
  wait
}
chain semeval16b > $L/accuracy-semeval16b.log 2>&1 &
CH=$!
( taskset -c 0-3 python3 -m pytest -m gpu -rs -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tail -30
  el "pytest -m gpu"
  taskset -c 0-3 timeout $(cap 60) python3 .ci/attention_kernels.py cuda 2>&1 | grep "^|"
  el kernels ) > $L/gpu-suite.log 2>&1
cat $L/gpu-suite.log | tail -50
wait $CH; el "chain done"
for dt in float32 bfloat16 float16; do
  BENCH_RESULTS_DIR=/tmp/gpures timeout $(cap 60) $B latency -d wikiqa --device cuda \
    --rankers monobert,crossjem --n-items 100,700 --queries 4 --repeats 1 --warmup 2 \
    --monobert-batch-sizes 64,all --set dtype=$dt --set crossjem.order=union --format markdown \
    2>&1 | grep "^|" >> $L/cuda-latency.log
  el "latency $dt exit $?"
done
cat $L/cuda-latency.log
grep -h "exit" $L/accuracy-semeval16b.log
$B compare -d semeval16b --all-records > $L/compare-semeval16b.txt 2>&1
tar czf $OUT/all2.tgz -C /tmp logs res/runs gpures 2>/dev/null
