"""The GPU suite (issue 23): ``pytest -m gpu`` on a machine with CUDA; skipped without one.

What the CPU tests of tests/test_gpu_path.py reach only through fakes, run for real: every
ranker's CUDA scores against its CPU float32 scores, the latency tracker's device time on
``cuda:0`` and one training run on CUDA. The tolerances below are set from the dtypes' rounding
(float32: TF32 off by default; bf16 8 bits of mantissa, fp16 11, through six encoder layers),
not yet measured on a GPU: a failure says which ranker and by how much, for calibrating them.
README "GPU" says how to run this on a machine without network.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from test_gpu_path import MODEL, _many_items, _ranker, _stcross

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="no CUDA device: the GPU suite (pytest -m gpu) needs one",
    ),
]

KINDS = ["monobert", "crossjem", "rankt5", "dpr", "ance", "colbert", "stcross"]
#: dtype -> largest |cuda - cpu| allowed, as a share of the largest |cpu score| (plus 1e-3)
TOLERANCE = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 6e-2}


def _build(kind: str, device: str, **options: Any) -> Any:
    if kind == "stcross":  # no dtype option: it scores in its model's float32
        options.pop("dtype", None)
        return _stcross(MODEL, device, **options)
    return _ranker(kind, MODEL, device, **options)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kind", KINDS)
def test_cuda_scores_match_cpu_float32(kind: str, dtype: str) -> None:
    from bench.device import bf16_supported

    if dtype == "bfloat16" and not bf16_supported("cuda:0"):
        pytest.skip("this GPU has no native bfloat16")
    lists = [_many_items(), _many_items(17)]
    ref = _build(kind, "cpu").score(lists)
    got = _build(kind, "cuda:0", dtype=dtype).score(lists)
    from scipy.stats import spearmanr

    for r, g in zip(ref, got, strict=True):
        assert g.dtype in (np.float32, np.float64)
        scale = float(np.abs(r).max())
        worst = float(np.abs(g - r).max())
        assert worst <= TOLERANCE[dtype] * scale + 1e-3, (kind, dtype, worst, scale)
        assert spearmanr(g, r).statistic > (0.999 if dtype == "float32" else 0.9)


def test_latency_tracker_measures_device_time_on_cuda0() -> None:
    from bench.latency.tracker import LatencyTracker

    tracker = LatencyTracker("cuda:0")
    a = torch.randn(2048, 2048, device="cuda:0")
    with tracker.track(queries=1, candidates=1):
        for _ in range(4):
            a = a @ a / 2048
    assert len(tracker.device_s) == 1 and tracker.device_s[0] > 0


@pytest.mark.parametrize("kind", ["crossjem", "monobert"])
def test_training_runs_on_cuda(kind: str) -> None:
    from toydata import gold_split

    ranker = _ranker(kind, MODEL, "cuda:0", epochs=1, train_batch_queries=4, lr=2e-4)
    before = {k: v.detach().cpu().clone() for k, v in ranker.module.state_dict().items()}  # type: ignore[attr-defined]
    summary = ranker.fit(gold_split("train", 0, 12))  # type: ignore[attr-defined]
    assert summary["steps"] == 3 and ranker.device == "cuda:0"
    assert all(p.device == torch.device("cuda:0") for p in ranker.module.parameters())  # type: ignore[attr-defined]
    after = ranker.module.state_dict()  # type: ignore[attr-defined]
    assert any(not torch.equal(before[k], after[k].cpu()) for k in before)
    assert all(np.isfinite(s).all() for s in ranker.score(gold_split("dev", 1, 2).lists))
