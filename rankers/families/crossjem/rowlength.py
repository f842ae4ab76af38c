"""``union_len=auto``: the row length whose packed rows a cost model predicts cheapest.

A longer row lets more of a list's items share its tokens (fewer, fuller rows: short titles
compress 10-15x), but attention grows with the square of a row's width; on sentences that share
little, long rows save few tokens and pay for attention. No one length is right for every list
and encoder, so ``auto`` packs the lists with each candidate length and keeps the one whose
encoder calls cost least:

* candidates (:func:`candidate_lengths`): multiples of :data:`STEP` from ``max_item_len`` (an item
  must fit in a row) up to the longest the encoder's positions allow (``max_query_len +
  union_len + 3 <= max_position_embeddings``), and that longest;
* the calls are those scoring makes (:func:`packed_calls`): ``batch_queries`` lists per pack,
  their rows cut into length buckets within the padding tolerance
  (:func:`~rankers.families.crossjem.packed.pack_lists`), one call of ``rows x width`` each;
* the cost of a call (:class:`FlopCost`) is the paper's FLOP model over the padded rows: per
  layer, ``2 M (4 d^2 + 2 d d_ff)`` for the projections and the feed-forward and ``4 rows
  width^2 d`` for attention (``Q K^T`` and the weighted sum), 2 FLOPs per multiply-accumulate,
  ``M = rows x width``. A caller that knows the machine's kernel rates may give its own cost of
  a call (:data:`CallCost`) instead.

Ties go to the shorter length. The choice depends on the lists, the options and the cost only,
so the same lists always get the same length, hence the same rows, scores and result keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rankers.families.crossjem.packed import Bucket, PackedRows
from rankers.hooks import EncoderCall

#: the option value that asks for the chosen length
AUTO = "auto"
#: candidate lengths are multiples of this (plus the longest the positions allow)
STEP = 32
#: [CLS] query [SEP] ... [SEP]
SPECIAL_TOKENS = 3

#: the predicted cost of one encoder call (any unit; only comparisons between lengths are made)
CallCost = Callable[[EncoderCall], float]


def longest_union_len(max_positions: int, max_query_len: int, extra: int = 0) -> int:
    """The longest ``union_len`` whose rows fit the encoder's ``max_positions``: ``max_query_len
    + union_len + extra + 3 <= max_positions`` (``extra``: tokens a layout adds beyond the
    union, e.g. the longest item of a hybrid row numbered by item positions)."""
    return max_positions - max_query_len - extra - SPECIAL_TOKENS


def candidate_lengths(shortest: int, longest: int, step: int = STEP) -> tuple[int, ...]:
    """The lengths ``auto`` compares: multiples of ``step`` in ``[shortest, longest]`` and
    ``longest`` itself, ascending. ValueError when none fits (``shortest > longest``)."""
    if shortest > longest:
        raise ValueError(
            f"no row length fits: an item needs {shortest} tokens and the encoder's positions "
            f"leave {longest}"
        )
    first = -(-shortest // step) * step
    return (*range(first, longest, step), longest)


@dataclasses.dataclass(frozen=True)
class FlopCost:
    """The paper's FLOP model of one encoder call over padded rows (2 FLOPs per
    multiply-accumulate): per layer ``2 M (4 d^2 + 2 d d_ff) + 4 rows width^2 d``.
    ``attention_weight`` scales the attention term, for hardware whose attention kernels run
    slower per FLOP than its MatMuls (1: the FLOP model as the paper counts it)."""

    hidden: int
    intermediate: int
    attention_weight: float = 1.0

    @classmethod
    def of_config(cls, config: Any, attention_weight: float = 1.0) -> FlopCost:
        """From a Hugging Face encoder config (``hidden_size``, ``intermediate_size``)."""
        return cls(int(config.hidden_size), int(config.intermediate_size), attention_weight)

    def __call__(self, call: EncoderCall) -> float:
        d, tokens = self.hidden, call.rows * call.width
        linear = 2 * tokens * (4 * d * d + 2 * d * self.intermediate)
        attention = 4 * call.rows * call.width * call.width * d
        return call.layers * (linear + self.attention_weight * attention)


def packed_calls(
    row_len: Sequence[int],
    buckets: Sequence[Bucket],
    layers: int,
    merge_layers: int = 0,
    attention: str = "sdpa",
) -> list[EncoderCall]:
    """The encoder calls one pack's ``buckets`` make (rows of ``row_len``): one per bucket,
    masked unless every row fills the bucket's width; a merged layout's bucket (``merge_layers``
    > 0) is two calls, its first layers over the concat rows, the others over the merged rows,
    both masked."""
    out = []
    for b in buckets:
        rows = b.r1 - b.r0
        if not merge_layers:
            full = min(row_len[b.r0 : b.r1]) == b.width
            out.append(EncoderCall(rows, b.width, layers, not full, attention))
            continue
        out.append(EncoderCall(rows, b.first_width, merge_layers, True, attention))
        out.append(EncoderCall(rows, b.width, layers - merge_layers, True, attention))
    return out


@dataclasses.dataclass(frozen=True)
class Choice:
    """The chosen length and the predicted cost of every candidate (for the record)."""

    union_len: int
    costs: Mapping[int, float]

    def to_dict(self) -> dict[str, Any]:
        return {"union_len": self.union_len, "costs": {str(k): v for k, v in self.costs.items()}}


def choose(
    candidates: Sequence[int],
    pack: Callable[[int], Iterable[PackedRows]],
    call_cost: CallCost,
    layers: int,
    merge_layers: int = 0,
) -> Choice:
    """The candidate whose packs (``pack(length)``: the packed rows scoring would run at that
    length) cost least under ``call_cost``; ties go to the shorter length."""
    if not candidates:
        raise ValueError("no candidate row length to choose from")
    costs: dict[int, float] = {}
    for length in sorted(candidates):
        calls = (
            call
            for packed in pack(length)
            for call in packed_calls(packed.row_len.tolist(), packed.buckets, layers, merge_layers)
        )
        costs[length] = float(sum(call_cost(c) for c in calls))
    best = min(costs, key=lambda k: (costs[k], k))
    return Choice(best, costs)
