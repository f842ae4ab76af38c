#!/usr/bin/env bash
# `make precision`: accuracy per scoring precision, a benchmark (not a test). Each dataset's
# rankers are trained once (bench run trains CROSS-JEM's teachers and CROSS-JEM; dtype is a
# scoring option, so it is not in the trained model's key), then every ranker is scored on the
# test split in every precision: `bench run --set dtype=D` reuses the trained model. int8 runs on
# ONNX Runtime (`--set runtime=onnxruntime`, the `runtimes` extra). The rows land in the results
# root as usual; `bench compare -d DATASET` lists them and docs/results.md renders them.
#   PRECISION_DATASETS  (default "wikiqa semeval16b")
#   PRECISION_RANKERS   (default "monobert crossjem")
#   PRECISION_DTYPES    (default on cpu "float32 bfloat16 int8", on cuda "float32 bfloat16 float16")
#   PRECISION_INT8_RECIPES (int8 on the CPU: the int8_recipe values to score, default "" = the
#                       default recipe only; e.g. "all ffn-float" adds those rows)
#   PRECISION_DEVICE    (default cpu), PRECISION_THREADS (torch threads, default torch's)
#   PRECISION_ARGS      (extra `bench run` arguments, e.g. a smoke run's --subset 20)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
: "${BENCH_DATA_DIR:?set BENCH_DATA_DIR to a folder holding the datasets}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
device="${PRECISION_DEVICE:-cpu}"
if [ "$device" = cpu ]; then default_dtypes="float32 bfloat16 int8"; else default_dtypes="float32 bfloat16 float16"; fi
threads=()
if [ -n "${PRECISION_THREADS:-}" ]; then threads=(--threads "$PRECISION_THREADS"); fi
read -r -a extra <<< "${PRECISION_ARGS:-}"
start=$(date +%s)
for ds in ${PRECISION_DATASETS:-wikiqa semeval16b}; do
  for ranker in ${PRECISION_RANKERS:-monobert crossjem}; do
    for dtype in ${PRECISION_DTYPES:-$default_dtypes}; do
      runtime=()
      if [ "$dtype" = int8 ]; then runtime=(--set runtime=onnxruntime); fi
      "$PY" -m bench.cli -q run -r "$ranker" -d "$ds" --device "$device" "${threads[@]}" \
        --set "dtype=$dtype" "${runtime[@]}" "${extra[@]}"
      echo "[precision] $ds $ranker $dtype on $device done at $(( $(date +%s) - start )) s"
      if [ "$dtype" = int8 ]; then
        for recipe in ${PRECISION_INT8_RECIPES:-}; do
          "$PY" -m bench.cli -q run -r "$ranker" -d "$ds" --device "$device" "${threads[@]}" \
            --set "dtype=$dtype" "${runtime[@]}" --set "int8_recipe=$recipe" "${extra[@]}"
          echo "[precision] $ds $ranker int8 ($recipe) on $device done at $(( $(date +%s) - start )) s"
        done
      fi
    done
  done
done
