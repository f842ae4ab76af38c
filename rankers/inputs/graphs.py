"""CUDA graphs of encoder calls over bucketed shapes (option ``cuda_graphs``).

An eager encoder call launches a few hundred kernels one by one from Python; on a fast GPU and a
short call that launching, not the arithmetic, is its time. A CUDA graph replays a captured call
with one launch, but only at the shapes it was captured with. :class:`GraphedEncoder` stands in
for a Hugging Face encoder (same keyword call, same ``last_hidden_state``) and rounds every call
up to a bucket: rows to a power of two, width to a multiple of :data:`WIDTH_STEP` (at most the
encoder's positions). The inputs are copied into that bucket's static buffers, the extra columns
masked out and the extra rows given one real token each (so no row's attention is empty), the
graph captured on the bucket's first call and replayed on every later one, and the output cut
back to the call's rows and width. Padding changes no real token's hidden state: masked keys
add exact zeros to attention, and every other op works per token.

The orchestration (buckets, buffers, capture once, replay) does not depend on CUDA: the graph
maker is a parameter (:class:`CudaGraphs` on a GPU), so a test drives it on the CPU with a fake.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

#: widths are rounded up to a multiple of this many tokens
WIDTH_STEP = 16
#: eager calls on a side stream before a capture (cuBLAS and the allocator set up outside it)
WARMUP_CALLS = 2


def bucket_rows(rows: int) -> int:
    """``rows`` rounded up to a power of two (at least 1)."""
    return 1 << max(rows - 1, 0).bit_length()


def bucket_width(width: int, limit: int) -> int:
    """``width`` rounded up to a multiple of :data:`WIDTH_STEP`, at most ``limit`` (the
    encoder's positions; a width above it is refused by the encoder anyway)."""
    return min(-(-width // WIDTH_STEP) * WIDTH_STEP, max(limit, width))


class CudaGraphs:
    """Captures calls as CUDA graphs sharing one memory pool (graphs replay one at a time on
    one stream, so their buffers may share memory)."""

    def __init__(self) -> None:
        self._pool: Any = None

    def capture(
        self, call: Callable[[], tuple[Tensor, ...]], device: torch.device
    ) -> tuple[Any, tuple[Tensor, ...]]:
        """``call`` (on ``device``) captured as a graph after :data:`WARMUP_CALLS` eager calls
        on a side stream; returns the graph (``replay()`` reruns it) and the call's static
        outputs."""
        with torch.cuda.device(device):
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(WARMUP_CALLS):
                    call()
            torch.cuda.current_stream().wait_stream(stream)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool):
                outputs = call()
        return graph, outputs


@dataclasses.dataclass
class Captured:
    """One bucket's graph, the static inputs it reads and the static outputs it writes."""

    graph: Any
    inputs: dict[str, Tensor]
    outputs: tuple[Tensor, ...]


@dataclasses.dataclass
class GraphedOutput:
    """What the rankers read of an encoder's output, cut back to the call's rows and width: the
    graph's static output, valid until the next call (the rankers pool it at once)."""

    last_hidden_state: Tensor
    pooler_output: Tensor | None = None


class GraphedEncoder(nn.Module):
    """A Hugging Face encoder called through CUDA graphs, one per (rows, width) bucket; takes
    the row masks of :func:`rankers.inputs.masks.encoder_mask` (None: no padding)."""

    TAKES_ROW_MASK = True

    def __init__(self, encoder: nn.Module, graphs: Any = None) -> None:
        super().__init__()
        self.encoder = encoder
        self.config = getattr(encoder, "config", None)
        self.limit = int(getattr(self.config, "max_position_embeddings", 512))
        self.graphs = graphs if graphs is not None else CudaGraphs()
        self.captured: dict[tuple[int, int, bool], Captured] = {}

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> GraphedOutput:
        rows, width = input_ids.shape
        key = (bucket_rows(rows), bucket_width(width, self.limit), position_ids is not None)
        captured = self.captured.get(key)
        if captured is None:
            captured = self.captured[key] = self._capture(*key, device=input_ids.device)
        fill(captured.inputs, input_ids, attention_mask, token_type_ids, position_ids)
        captured.graph.replay()
        hidden, *pooled = captured.outputs
        return GraphedOutput(
            last_hidden_state=hidden[:rows, :width].contiguous(),
            pooler_output=pooled[0][:rows] if pooled else None,
        )

    def _capture(self, rows: int, width: int, positions: bool, device: torch.device) -> Captured:
        """The bucket's static inputs (one real token per row until filled) and its graph."""
        inputs = {
            "input_ids": torch.zeros(rows, width, dtype=torch.long, device=device),
            "attention_mask": torch.zeros(rows, 1, 1, width, dtype=torch.bool, device=device),
            "token_type_ids": torch.zeros(rows, width, dtype=torch.long, device=device),
        }
        inputs["attention_mask"][..., 0] = True
        if positions:
            inputs["position_ids"] = torch.zeros(rows, width, dtype=torch.long, device=device)
        encoder = self.encoder

        def call() -> tuple[Tensor, ...]:
            out = encoder(**inputs)
            pooled = getattr(out, "pooler_output", None)
            return (out.last_hidden_state,) if pooled is None else (out.last_hidden_state, pooled)

        graph, outputs = self.graphs.capture(call, device)
        return Captured(graph, inputs, outputs)


def fill(
    inputs: dict[str, Tensor],
    input_ids: Tensor,
    attention_mask: Tensor | None,
    token_type_ids: Tensor | None,
    position_ids: Tensor | None,
) -> None:
    """Copy a call into a bucket's static inputs (device copies, no read back): its ids, mask,
    token types and positions in the top-left corner; the rest zero ids, types and positions,
    masked out but for each padding row's first token."""
    rows, width = input_ids.shape
    mask = inputs["attention_mask"]
    mask.zero_()
    mask[rows:, ..., 0] = True
    if attention_mask is None:
        mask[:rows, ..., :width] = True
    else:
        valid = attention_mask if attention_mask.dim() == 4 else attention_mask[:, None, None, :]
        mask[:rows, ..., :width].copy_(valid)
    given = {"input_ids": input_ids, "token_type_ids": token_type_ids}
    if "position_ids" in inputs:
        given["position_ids"] = position_ids
    for name, value in given.items():
        static = inputs[name]
        static.zero_()
        if value is not None:
            static[:rows, :width].copy_(value)
