"""Option ``cuda_graphs`` (:mod:`rankers.inputs.graphs`) on the CPU: buckets, the padding into a
bucket's static buffers and the capture/replay orchestration, with a fake graph maker that runs
the captured call again on each replay. tests/test_gpu.py replays real graphs on a GPU."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_host_reads import LISTS, HostReads
from torch import Tensor

from rankers import create_ranker
from rankers.base import RankerError
from rankers.inputs.graphs import bucket_rows, bucket_width


class FakeGraph:
    """A captured call: ``replay()`` runs it again and writes into the captured outputs."""

    def __init__(self, call: Callable[[], tuple[Tensor, ...]], outputs: tuple[Tensor, ...]):
        self.call, self.outputs, self.replays = call, outputs, 0

    def replay(self) -> None:
        self.replays += 1
        for static, value in zip(self.outputs, self.call(), strict=True):
            static.copy_(value)


class FakeGraphs:
    """:class:`rankers.inputs.graphs.CudaGraphs` on the CPU: records each capture's graph and
    the shapes of the static inputs the call reads."""

    def __init__(self) -> None:
        self.graphs: list[FakeGraph] = []

    def capture(
        self, call: Callable[[], tuple[Tensor, ...]], device: torch.device
    ) -> tuple[Any, tuple[Tensor, ...]]:
        assert device.type == "cpu"  # the inputs' device, where the graph would run
        outputs = tuple(t.clone() for t in call())
        self.graphs.append(FakeGraph(call, outputs))
        return self.graphs[-1], outputs


CASES = {
    "monobert": ("monobert", {"batch_size": 4}),
    "monobert-pooler": ("monobert", {"batch_size": 4, "pooling": "pooler"}),
    "crossjem-union": ("crossjem", {"union_len": 32, "max_item_len": 8}),
    "crossjem-concat": ("crossjem", {"order": "concat", "union_len": 32, "max_item_len": 8}),
}


def _graphed(case: str, model: Path) -> tuple[Any, Any, FakeGraphs]:
    """The eager ranker and the same ranker scoring through fake graphs (on the CPU, where the
    option itself is refused: set after construction)."""
    name, options = CASES[case]
    eager = create_ranker(name, {"model": str(model), **options})
    graphed: Any = create_ranker(name, {"model": str(model), **options})
    graphed.config = dataclasses.replace(graphed.cfg, cuda_graphs=True)
    graphed._graph_maker = maker = FakeGraphs()
    return eager, graphed, maker


def test_buckets() -> None:
    assert [bucket_rows(n) for n in (0, 1, 2, 3, 4, 5, 64, 65)] == [1, 1, 2, 4, 4, 8, 64, 128]
    assert [bucket_width(w, 512) for w in (1, 16, 17, 42, 500, 512)] == [16, 16, 32, 48, 512, 512]
    assert bucket_width(70, 67) == 70  # never below the call's own width
    assert bucket_width(60, 67) == 64 and bucket_width(66, 67) == 67


#: largest |bucket-padded - eager| score allowed, as a share of the largest |eager score|. Not
#: zero: masked keys add exact zeros to attention, but CPU SDPA sums a row over its keys in
#: blocks, so a wider row groups the real keys' terms differently: hidden states move by a few
#: float32 ulps (2e-7 to 7e-7 measured on the tiny BERT, torch 2.13), scores by up to 6e-8
#: (-0.24111423 vs -0.24111417). Four times that bound; an unmasked padding column or a
#: shifted row moves scores by 1e-2 or more.
RELATIVE = 1e-6


def _close(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    scale = max(float(np.abs(e).max()) for e in expected)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == np.float32 and a.shape == b.shape
        assert float(np.abs(a - b).max()) <= RELATIVE * scale


@pytest.mark.parametrize("case", sorted(CASES))
def test_bucket_padded_scores_equal_eager_scores(case: str, tiny_bert: Path) -> None:
    """Every encoder call padded into its bucket (rows to a power of two, width to a multiple
    of 16) gives the eager scores up to float32 summation order (:data:`RELATIVE`); a bucket
    is captured on its first call only, every later call replays, bit for bit the same."""
    eager, graphed, maker = _graphed(case, tiny_bert)
    expected = eager.score(LISTS)
    first = graphed.score(LISTS)
    _close(first, expected)
    module = graphed.scoring_module()
    buckets = set(module.encoder.captured)
    assert len(maker.graphs) == len(buckets) >= 1
    assert all(rows & (rows - 1) == 0 and width % 16 == 0 for rows, width, _ in buckets)
    replays = sum(g.replays for g in maker.graphs)
    again = graphed.score(LISTS)
    assert len(maker.graphs) == len(buckets)  # nothing captured again
    assert sum(g.replays for g in maker.graphs) == 2 * replays
    for a, b in zip(again, first, strict=True):
        assert np.array_equal(a, b)


def test_a_graphed_model_step_reads_nothing_back(tiny_bert: Path) -> None:
    """Copying a call into its bucket's buffers reads nothing from the device either (a read
    would break the capture on a GPU)."""
    _, graphed, _ = _graphed("crossjem-concat", tiny_bert)
    graphed.score(LISTS)  # captures outside the watch
    prepared = graphed.prepare_scoring(LISTS)
    watch = HostReads()
    with watch:
        graphed.score_prepared(prepared)
    assert watch.reads == []


def test_static_buffers_hold_the_call_and_mask_the_rest() -> None:
    """A bucket's buffers after a call: its ids, types and mask top-left, padding rows with one
    unmasked first token (no empty attention), everything else zero and masked."""
    from rankers.inputs.graphs import fill

    inputs = {
        "input_ids": torch.full((4, 16), 9),
        "attention_mask": torch.ones(4, 1, 1, 16, dtype=torch.bool),
        "token_type_ids": torch.full((4, 16), 9),
    }
    ids = torch.tensor([[5, 6, 7], [8, 9, 0]])
    valid = torch.tensor([[True, True, True], [True, True, False]])
    fill(inputs, ids, valid[:, None, None, :], torch.ones(2, 3, dtype=torch.long), None)
    assert inputs["input_ids"][:2, :4].tolist() == [[5, 6, 7, 0], [8, 9, 0, 0]]
    assert int(inputs["input_ids"].sum()) == 35 and int(inputs["token_type_ids"].sum()) == 6
    mask = inputs["attention_mask"][:, 0, 0]
    assert mask[:, :4].tolist() == [
        [True, True, True, False],
        [True, True, False, False],
        [True, False, False, False],
        [True, False, False, False],
    ]
    assert not mask[:, 4:].any()
    fill(inputs, ids, None, None, None)  # no padding: the call's corner all real
    assert inputs["attention_mask"][:2, 0, 0, :3].all() and int(inputs["token_type_ids"].sum()) == 0


def test_cuda_graphs_are_refused_where_they_cannot_run(tiny_bert: Path) -> None:
    model = str(tiny_bert)
    with pytest.raises(RankerError, match=r"cuda_graphs=true .* needs a CUDA device .*'cpu'"):
        create_ranker("monobert", {"model": model, "cuda_graphs": True})
    for name, options, why in (
        ("set-encoder", {}, "runs its layers itself"),
        ("crossjem", {"merge_layers": 1}, "merge_layers=1"),
    ):
        ranker: Any = create_ranker(name, {"model": model, **options})
        ranker.device = "cuda:0"
        with pytest.raises(RankerError, match=why):
            ranker._check_cuda_graphs()
