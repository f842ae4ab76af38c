"""The CUDA code paths, reached without a GPU (issue 23).

Each test pins one defect of the review: it reaches the branch a CUDA run takes (through the
low-precision scoring copy on CPU, or fakes of the CUDA and Accelerate calls) and fails on the
code before the fix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from toydata import WORDS

from bench.data.model import Candidate, CandidateList, Query
from rankers.base import Ranker

# -- row 1: the latency tracker's CUDA events are on its own device's stream ---------------------


class FakeEvent:
    """``torch.cuda.Event``: records which stream it was recorded on; 5 ms between two."""

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.stream: object = "not recorded"

    def record(self, stream: object = None) -> None:
        self.stream = stream

    def elapsed_time(self, end: FakeEvent) -> float:
        return 5.0


def test_tracker_records_events_on_its_devices_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.latency.tracker import LatencyTracker

    events: list[FakeEvent] = []
    streams: dict[str, object] = {}
    synced: list[str] = []

    def event(enable_timing: bool = False) -> FakeEvent:
        events.append(FakeEvent(enable_timing))
        return events[-1]

    def current_stream(device: object = None) -> object:
        return streams.setdefault(str(device), f"stream of {device}")

    monkeypatch.setattr(torch.cuda, "Event", event)
    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    tracker = LatencyTracker("cuda:1")
    with tracker.track(queries=1, candidates=3):
        pass
    assert [e.stream for e in events] == ["stream of cuda:1"] * 2
    assert synced == ["cuda:1", "cuda:1"]
    assert tracker.device_s == [0.005]


# -- row 2: training honours cuda:N ---------------------------------------------------------------


class FakeAccelerator:
    """``accelerate.Accelerator`` in one process: placed on the current CUDA device (what
    Accelerate does without a launcher), or on ``rank_device`` (a launcher's rank); records the
    options and the current device it was created under."""

    created: list[FakeAccelerator] = []
    rank_device: str | None = None

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.current_at_creation = torch.cuda.current_device()
        self.device = torch.device(self.rank_device or "cuda")
        FakeAccelerator.created.append(self)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch.cuda's device calls and accelerate.Accelerator faked; returns the set_device log."""
    import accelerate

    current = {"index": 0}
    calls: list[str] = []

    def set_device(device: object) -> None:
        calls.append(str(device))
        current["index"] = torch.device(device).index or 0  # type: ignore[arg-type]

    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current["index"])
    monkeypatch.setattr(accelerate, "Accelerator", FakeAccelerator)
    monkeypatch.setattr(FakeAccelerator, "created", [])
    monkeypatch.setattr(FakeAccelerator, "rank_device", None)
    return calls


def test_training_accelerator_is_placed_on_the_requested_gpu(fake_cuda: list[str]) -> None:
    from rankers import training

    accelerator = training.make_accelerator("cuda:1", "float32")
    assert fake_cuda == ["cuda:1"]
    (created,) = FakeAccelerator.created
    assert created.current_at_creation == 1  # the device was set before Accelerate chose
    assert created.options["cpu"] is False and created.options["mixed_precision"] == "no"
    # what the ranker is moved to after Accelerate: the GPU asked for, not Accelerate's "cuda"
    assert training.accelerated_device(accelerator) == "cuda:1"  # type: ignore[arg-type]


def test_training_refuses_a_gpu_other_than_the_requested_one(fake_cuda: list[str]) -> None:
    from rankers import training
    from rankers.base import RankerError

    FakeAccelerator.rank_device = "cuda:0"  # a launcher's rank 0 gets GPU 0
    with pytest.raises(RankerError, match=r"asked for cuda:1 .* placed this process on cuda:0"):
        training.make_accelerator("cuda:1", "float32")


# -- row 3: the bf16 scoring copy keeps pooling, head and logits in float32 ----------------------

#: the pre-trained MiniLM: its items differ by more than bf16 encoder noise (a random tiny BERT
#: gives near-equal scores whose order that noise alone decides)
MODEL = "minilm-l6"


def _many_items(n: int = 60) -> CandidateList:
    """One list of ``n`` distinct short items over the toy vocabulary (close scores: where bf16
    logits would tie)."""
    rng = np.random.default_rng(0)
    texts = sorted({" ".join(rng.choice(WORDS, size=4)) for _ in range(4 * n)})[:n]
    cands = tuple(Candidate(f"d{i}", t) for i, t in enumerate(texts))
    return CandidateList(Query("q", "apple banana cherry"), cands)


def _ranker(kind: str, model: str, **options: object) -> Ranker:
    from rankers.colbert import ColBERTRanker
    from rankers.crossjem import CrossJEMRanker
    from rankers.dense import DPRRanker
    from rankers.monobert import MonoBERTRanker
    from rankers.rankt5 import ENCDEC_PREFIX, RankT5Ranker

    classes: dict[str, tuple[type[Ranker], dict[str, Any]]] = {
        "crossjem": (CrossJEMRanker, {"model": str(model), "union_len": 64, "max_item_len": 8}),
        "monobert": (MonoBERTRanker, {"model": str(model)}),
        "monobert-mean": (MonoBERTRanker, {"model": str(model), "pooling": "mean"}),
        "colbert": (ColBERTRanker, {"model": str(model)}),
        "rankt5": (RankT5Ranker, {"model": ENCDEC_PREFIX + str(model)}),
        "dpr": (DPRRanker, {"model": str(model)}),
    }
    cls, base = classes[kind]
    return cls(cls.Config.from_options({**base, **options}))


@pytest.mark.parametrize("kind", ["crossjem", "monobert", "monobert-mean", "rankt5"])
def test_bfloat16_scoring_keeps_float32_logits(kind: str) -> None:
    """Scores of the bf16 copy: float32, as many distinct values as float32 scoring (a bf16
    head rounds logits to steps of 2^-7..2^-6 and ties close items) and the same ranking up to
    the encoder's own bf16 noise."""
    lists = [_many_items()]
    ref = _ranker(kind, MODEL).score(lists)[0]
    low = _ranker(kind, MODEL, dtype="bfloat16").score(lists)[0]
    assert np.asarray(low).dtype in (np.float32, np.float64)
    assert len(np.unique(low)) == len(np.unique(ref))
    from scipy.stats import spearmanr

    assert spearmanr(low, ref).statistic > 0.9
    assert int(np.argmax(low)) == int(np.argmax(ref))


def test_bfloat16_colbert_and_dense_vectors_are_float32() -> None:
    """ColBERT's projection and the dual encoders' pooling stay float32 over the bf16 encoder:
    their scores are float32 dot products of the vectors, so a bf16 head shows in the vectors
    (rounded to 8 bits) rather than as ties."""
    colbert = _ranker("colbert", MODEL, dtype="bfloat16")
    vectors, _ = colbert.encode_documents(["apple banana", "cherry"])  # type: ignore[attr-defined]
    assert vectors.dtype == torch.float32
    assert next(colbert.scoring_model().bert.parameters()).dtype == torch.bfloat16  # type: ignore[attr-defined]
    dense = _ranker("dpr", MODEL, dtype="bfloat16")
    model = dense.encoding_model()  # type: ignore[attr-defined]
    assert next(model.parameters()).dtype == torch.bfloat16
    embeddings = model.encode(["apple banana"], convert_to_tensor=True, convert_to_numpy=False)
    assert embeddings.dtype == torch.float32
