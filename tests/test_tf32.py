"""TF32 as a named scoring precision (``dtype=tf32``, ``--dtypes tf32``): float32 weights with
TF32 tensor-core matmuls on CUDA, set for the scoring call and restored after, every other
precision true float32 matmuls; refused on a CPU with the option named, and skipped with a line
in a ``--dtypes`` run where another precision runs. The CUDA device is faked: the flags are
torch's global cuBLAS/cuDNN switches, which a CPU build keeps too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.data.model import Candidate, CandidateList, Query
from bench.latency.plan import BenchOptions, Skip, plan_precisions
from rankers.base import RankerError
from rankers.compute import precision
from rankers.families.crossjem.ranker import CrossJEMRanker
from rankers.families.monobert import MonoBERTRanker

NO_TF32 = "option dtype=tf32 runs float32 weights on TF32 tensor cores, a CUDA matmul mode"


@pytest.fixture()
def flags() -> Iterator[None]:
    """torch's TF32 switches as they were before the test, whatever it sets."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture()
def fake_cuda(monkeypatch: pytest.MonkeyPatch, flags: None) -> None:
    """Every device taken as one with TF32 matmuls (the CPU runs the model meanwhile)."""
    monkeypatch.setattr(precision, "tf32_device", lambda device: True)


def _tf32_now() -> tuple[bool, bool]:
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


def test_matmul_mode_is_set_for_the_call_and_restored(fake_cuda: None) -> None:
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, True
    with precision.matmul_precision("tf32", "cuda"):
        assert _tf32_now() == (True, True)
    assert _tf32_now() == (False, True)
    for dtype in ("float32", "bfloat16", "auto"):  # true float32 matmuls, cuDNN's default too
        with precision.matmul_precision(dtype, "cuda"):
            assert _tf32_now() == (False, False)
        assert _tf32_now() == (False, True)
    with pytest.raises(KeyError), precision.matmul_precision("tf32", "cuda"):
        raise KeyError("restored on error too")
    assert _tf32_now() == (False, True)


def test_a_cpu_has_no_tf32(flags: None) -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    with precision.matmul_precision("float32", "cpu"):  # nothing changes on a CPU
        assert _tf32_now()[0] is True
    for refuse in (
        lambda: precision.scoring_dtype("tf32", "cpu"),
        lambda: MonoBERTRanker(MonoBERTRanker.Config.from_options({"dtype": "tf32"})),
        lambda: CrossJEMRanker(CrossJEMRanker.Config.from_options({"dtype": "tf32"})),
    ):
        with pytest.raises(RankerError, match=NO_TF32 + r": device 'cpu' has no TF32 \(use"):
            refuse()
    assert precision.scoring_dtype("tf32", "cuda:0") == torch.float32
    assert [precision.dtype_label(d, "cuda:0") for d in ("tf32", "float32", "bfloat16")] == [
        "float32, tf32 matmuls",
        "float32, ieee fp32 matmuls",
        "bfloat16 weights",
    ]
    assert precision.dtype_label("float32", "cpu") == "float32"


def _lists() -> list[CandidateList]:
    texts = ["sorting a list in python", "java arrays sort", "python", ""]
    query = Query("q1", "how to sort a list in python")
    return [CandidateList(query, tuple(Candidate(f"d{i}", t) for i, t in enumerate(texts)))]


@pytest.mark.parametrize("family", [MonoBERTRanker, CrossJEMRanker])
def test_scoring_runs_in_its_precisions_matmul_mode(
    family: type[MonoBERTRanker | CrossJEMRanker], tiny_bert: Path, fake_cuda: None
) -> None:
    """The encoder of a tf32 ranker runs with TF32 on, a float32 one with it off (though the
    process had it on), and the flags are the process's again after each call; the scores of
    the two are the same (float32 weights both; a CPU ignores the flag)."""
    seen: list[tuple[bool, bool]] = []

    def scorer(dtype: str) -> MonoBERTRanker | CrossJEMRanker:
        ranker = family(family.Config.from_options({"model": str(tiny_bert), "dtype": dtype}))
        ranker.module.encoder.register_forward_pre_hook(lambda *_: seen.append(_tf32_now()))
        return ranker

    tf32, fp32 = scorer("tf32"), scorer("float32")
    assert tf32.compute_dtype() == "float32, tf32 matmuls"
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, False
    got = tf32.score(_lists())
    assert seen and set(seen) == {(True, True)} and _tf32_now() == (False, False)
    seen.clear()
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = True, True
    np.testing.assert_array_equal(fp32.score(_lists())[0], got[0])
    assert seen and set(seen) == {(False, False)} and _tf32_now() == (True, True)


def test_a_latency_run_skips_tf32_on_a_cpu_with_a_line() -> None:
    rankers = ["monobert", "crossjem", "st-crossencoder"]
    plan = plan_precisions(["float32", "tf32"], rankers, "wikiqa", {}, device="cpu")
    assert plan.names == ["float32"] and plan.takers == {"float32": rankers}
    why = f"{NO_TF32}: device 'cpu' has no TF32 (use --device cuda, or dtype=float32)"
    assert plan.skipped == [Skip(r, "tf32", why) for r in rankers]
    assert plan.skipped[0].line() == f"monobert is not timed in tf32: {why}"
    on_gpu = plan_precisions(["float32", "tf32"], rankers, "wikiqa", {}, device="cuda")
    assert on_gpu.takers == {"float32": rankers, "tf32": rankers} and not on_gpu.skipped
    with pytest.raises(ValueError, match=r"^--dtypes tf32: " + NO_TF32):
        plan_precisions(["tf32"], rankers, "wikiqa", {}, device="cpu")
    opts = BenchOptions(
        dataset="wikiqa", rankers=("monobert",), options={"monobert": {"dtype": "tf32"}}
    )
    with pytest.raises(ValueError, match=r"^--set monobert.dtype=tf32: " + NO_TF32):
        opts.validate()
