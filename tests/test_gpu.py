"""The GPU suite: ``pytest -m gpu`` on a machine with CUDA; without one the same
tests run on the CPU (low-precision scoring against float32, training), all but the CUDA-event
timing test.

What the CPU tests of tests/test_gpu_path.py reach only through fakes, run for real: every
ranker's CUDA scores against its CPU float32 scores, the latency tracker's device time on
``cuda:0`` and one training run on CUDA. The tolerances below are set from the dtypes' rounding
are derived from the error measured on the CPU (see TOLERANCE); not yet run on a GPU: a failure
says which ranker and by how much.
docs/scaling.md "GPU" says how to run this on a machine without network.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import torch
from test_gpu_path import MODEL, _many_items, _ranker, _stcross

#: where the suite runs: the GPU when there is one; without one every test that needs no CUDA
#: event runs on the CPU (the same bodies, scoring in the same dtypes against float32), so an
#: error in a test itself (a TypeError, a wrong attribute) cannot hide behind a skip
CUDA = torch.cuda.is_available()
DEVICE = "cuda:0" if CUDA else "cpu"
pytestmark = [pytest.mark.gpu]
needs_cuda = pytest.mark.skipif(
    not CUDA, reason="no CUDA device: this test (pytest -m gpu) needs one"
)

KINDS = ["monobert", "crossjem", "rankt5", "dpr", "ance", "colbert", "stcross"]
#: dtype -> largest |low precision - float32| allowed, as a share of the largest |float32 score|.
#: Measured on CPU (torch 2.13, the minilm-l6 weights, the two lists below): float32 0 for every
#: ranker; float16 0.0003 (dpr, ance) to 0.0036 (rankt5); bfloat16 0.0028 (dpr, ance) to 0.0247
#: (monobert). The bounds are about 2.5x the worst (float32: a GPU's kernels sum in another
#: order), so another device's kernels pass and an error of the encoder's size on top fails.
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 6e-2}


def _build(kind: str, device: str, **options: Any) -> Any:
    if kind == "stcross":  # no dtype option: it scores in its model's float32
        options.pop("dtype", None)
        torch.manual_seed(0)  # its classifier head is new: the same one on both devices
        return _stcross(MODEL, device, **options)
    return _ranker(kind, MODEL, device, **options)


def _lists() -> list[Any]:
    return [_many_items(), _many_items(17)]


@functools.cache
def _cpu_float32_scores(kind: str) -> tuple[np.ndarray, ...]:
    """``kind``'s CPU float32 scores of :func:`_lists`: the reference of every dtype, computed
    once per ranker (read only)."""
    return tuple(_build(kind, "cpu").score(_lists()))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("kind", KINDS)
def test_device_scores_match_cpu_float32(kind: str, dtype: str) -> None:
    from bench.core.device import bf16_supported

    if CUDA and dtype == "bfloat16" and not bf16_supported(DEVICE):
        pytest.skip("this GPU has no native bfloat16")
    lists = _lists()
    ref = _cpu_float32_scores(kind)
    got = _build(kind, DEVICE, dtype=dtype).score(lists)
    from scipy.stats import spearmanr

    for r, g in zip(ref, got, strict=True):
        assert g.dtype in (np.float32, np.float64)
        share = float(np.abs(g - r).max()) / float(np.abs(r).max())
        assert share <= TOLERANCE[dtype], (kind, dtype, share)
        assert spearmanr(g, r).statistic > (0.999 if dtype == "float32" else 0.95)


@needs_cuda
def test_latency_tracker_measures_device_time_on_cuda0() -> None:
    from bench.core.timing import LatencyTracker

    tracker = LatencyTracker("cuda:0")
    a = torch.randn(2048, 2048, device="cuda:0")
    with tracker.track(queries=1, candidates=1):
        for _ in range(4):
            a = a @ a / 2048
    assert len(tracker.device_s) == 1 and tracker.device_s[0] > 0


@pytest.mark.parametrize("kind", ["crossjem", "monobert"])
def test_training_runs_on_the_device(kind: str) -> None:
    from toydata import gold_split

    ranker = _ranker(kind, MODEL, DEVICE, epochs=1, train_batch_queries=4, lr=2e-4)
    before = {k: v.detach().cpu().clone() for k, v in ranker.module.state_dict().items()}  # type: ignore[attr-defined]
    summary = ranker.fit(gold_split("train", 0, 12))  # type: ignore[attr-defined]
    assert summary.steps == 3 and ranker.device == DEVICE
    assert all(p.device == torch.device(DEVICE) for p in ranker.module.parameters())  # type: ignore[attr-defined]
    after = ranker.module.state_dict()  # type: ignore[attr-defined]
    assert any(not torch.equal(before[k], after[k].cpu()) for k in before)
    assert all(np.isfinite(s).all() for s in ranker.score(gold_split("dev", 1, 2).lists))


@needs_cuda
@pytest.mark.parametrize("kind", ["monobert", "crossjem"])
def test_cuda_graph_replays_equal_eager_scores(kind: str) -> None:
    """Option cuda_graphs on the GPU: scores replayed from the bucketed graphs equal eager
    scores up to float32 summation order (padded widths sum attention in other blocks), and a
    second call (replays only) gives the first call's scores bit for bit."""
    lists = [_many_items(), _many_items(17)]
    eager = _build(kind, DEVICE).score(lists)
    graphed = _build(kind, DEVICE, cuda_graphs=True)
    first = graphed.score(lists)
    again = graphed.score(lists)
    scale = max(float(np.abs(e).max()) for e in eager)
    for a, b, c in zip(first, eager, again, strict=True):
        assert float(np.abs(a - b).max()) <= TOLERANCE["float32"] * scale
        assert np.array_equal(a, c)
