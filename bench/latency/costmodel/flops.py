"""Cost model of monoBERT versus CROSS-JEM (any row layout): tokens processed, union compression,
FLOPs.

Pure arithmetic over token counts, so the predicted speed-up can be checked by hand and set beside
the measured one. Sequences (paper section ``SubSubSec_Efficiency``):

* monoBERT encodes one ``[CLS] q [SEP] k [SEP]`` row per item: ``L_q + L_k + 3`` tokens each;
* CROSS-JEM encodes one ``[CLS] q [SEP] U_g [SEP]`` row per packed group ``g``: ``L_q + |U_g| + 3``;
  in an order-keeping layout (:class:`rankers.families.crossjem.inputs.Layout`) a row holds its
  group's
  shared tokens once plus every own token: ``L_q + |S_g| + sum_k |O_k| + 3`` (``concat``: the
  items' lengths summed, nothing shared).

The paper writes the costs as ``(L_q + L_k)^2 L N`` and ``(L_q + L_k N / C)^2 L`` with the union
compression factor ``C = L_k N / |U|``. That keeps only the attention-like square term; a BERT layer
also pays a term linear in the sequence length (projections and feed-forward), which dominates at
these lengths, so :func:`sequence_flops` counts both per layer:

* linear: ``4 n d^2`` (Q, K, V and output projections) ``+ 2 n d d_ff`` (feed-forward; with
  ``d_ff = 4d`` this is ``8 n d^2``, so ``12 n d^2`` in all);
* attention: ``2 n^2 d`` (``Q K^T`` and the weighted sum of ``V``).

Counts are multiply-accumulates (one MAC = two floating-point operations); embeddings, layer norms,
softmax and the heads are left out. Only ratios are compared, which the unit does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: special tokens around one pair or one union row: [CLS] ... [SEP] ... [SEP]
SPECIAL_TOKENS = 3


@dataclass(frozen=True)
class EncoderShape:
    """What the FLOP estimate needs from a BERT-style encoder's config."""

    layers: int
    hidden: int
    intermediate: int
    #: attention heads: FLOPs do not depend on them, the attention kernel's time does
    heads: int = 12

    @classmethod
    def from_config(cls, config: Any) -> EncoderShape:
        """From a Hugging Face config (``num_hidden_layers``, ``hidden_size``,
        ``intermediate_size``, ``num_attention_heads``)."""
        return cls(
            layers=int(config.num_hidden_layers),
            hidden=int(config.hidden_size),
            intermediate=int(config.intermediate_size),
            heads=int(config.num_attention_heads),
        )


#: sentence-transformers all-MiniLM-L6-v2 (the harness's minilm-l6): 6 layers, d = 384, d_ff = 4d,
#: 12 heads of 32
MINILM_L6 = EncoderShape(layers=6, hidden=384, intermediate=1536, heads=12)


def sequence_flops(n: int, shape: EncoderShape) -> int:
    """Multiply-accumulates to encode one sequence of ``n`` tokens (all layers)."""
    d = shape.hidden
    linear = 4 * n * d * d + 2 * n * d * shape.intermediate
    attention = 2 * n * n * d
    return shape.layers * (linear + attention)


# -- token counts --------------------------------------------------------------------------------
def monobert_lengths(query_len: int, item_lens: Sequence[int]) -> list[int]:
    """Encoder row lengths of monoBERT: one ``L_q + L_k + 3`` row per item."""
    return [query_len + k + SPECIAL_TOKENS for k in item_lens]


def crossjem_lengths(query_len: int, row_tokens: Sequence[int]) -> list[int]:
    """Encoder row lengths of CROSS-JEM: one ``L_q + (item tokens of the row) + 3`` row per packed
    group; the item tokens are ``|U_g|`` in the paper's union."""
    return [query_len + u + SPECIAL_TOKENS for u in row_tokens]


@dataclass(frozen=True)
class UnionStats:
    """Token overlap of one candidate list (items already truncated to ``max_item_len``)."""

    n_items: int
    max_item_len: int  # L_k
    item_tokens: int  # sum of the items' lengths (the paper's m for this query)
    union: int  # |U|: distinct token ids over all items

    @property
    def compression(self) -> float:
        """The paper's ``C = L_k N / |U|`` (L_k the length limit, not the realised length)."""
        return self.max_item_len * self.n_items / self.union if self.union else float("inf")

    @property
    def realised_compression(self) -> float:
        """Sum of the realised item lengths over ``|U|``: the redundancy actually removed."""
        return self.item_tokens / self.union if self.union else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "compression": self.compression,
            "realised_compression": self.realised_compression,
        }


def union_stats(items: Sequence[Sequence[int]], max_item_len: int) -> UnionStats:
    """Union size and compression of one list; each item is cut to ``max_item_len`` first."""
    cut = [list(ids)[:max_item_len] for ids in items]
    return UnionStats(
        n_items=len(cut),
        max_item_len=max_item_len,
        item_tokens=sum(len(ids) for ids in cut),
        union=len({t for ids in cut for t in ids}),
    )


# -- per-query estimate --------------------------------------------------------------------------
@dataclass(frozen=True)
class CostEstimate:
    """Tokens and MACs one query costs each model, and the speed-up they predict."""

    monobert_tokens: int
    crossjem_tokens: int
    monobert_flops: int
    crossjem_flops: int

    @property
    def token_ratio(self) -> float:
        return self.monobert_tokens / self.crossjem_tokens if self.crossjem_tokens else float("inf")

    @property
    def predicted_speedup(self) -> float:
        """monoBERT FLOPs / CROSS-JEM FLOPs."""
        return self.monobert_flops / self.crossjem_flops if self.crossjem_flops else float("inf")

    def __add__(self, other: CostEstimate) -> CostEstimate:
        return CostEstimate(
            self.monobert_tokens + other.monobert_tokens,
            self.crossjem_tokens + other.crossjem_tokens,
            self.monobert_flops + other.monobert_flops,
            self.crossjem_flops + other.crossjem_flops,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "token_ratio": self.token_ratio,
            "predicted_speedup": self.predicted_speedup,
        }


def estimate(
    query_len: int,
    item_lens: Sequence[int],
    row_tokens: Sequence[int],
    shape: EncoderShape,
    first_row_tokens: Sequence[int] = (),
    first_layers: int = 0,
) -> CostEstimate:
    """Cost of one query: ``item_lens`` as monoBERT sees them, ``row_tokens`` (item tokens of
    each row, in whichever layout) CROSS-JEM's.

    Token merging (``first_layers`` > 0): the first layers run over rows of
    ``first_row_tokens`` item tokens (the concat rows, one per row of ``row_tokens``), the others
    over ``row_tokens``; CROSS-JEM's tokens are then the layer-weighted mean row tokens."""
    mono = monobert_lengths(query_len, item_lens)
    joint = crossjem_lengths(query_len, row_tokens)
    flops = sum(sequence_flops(n, shape) for n in joint)
    tokens = sum(joint)
    if first_layers:
        first = crossjem_lengths(query_len, first_row_tokens)
        per_layer = sum(sequence_flops(n, shape) for n in first) // shape.layers
        flops = flops // shape.layers * (shape.layers - first_layers) + per_layer * first_layers
        tokens = round(
            (sum(first) * first_layers + tokens * (shape.layers - first_layers)) / shape.layers
        )
    return CostEstimate(
        monobert_tokens=sum(mono),
        crossjem_tokens=tokens,
        monobert_flops=sum(sequence_flops(n, shape) for n in mono),
        crossjem_flops=flops,
    )


def total(estimates: Sequence[CostEstimate]) -> CostEstimate:
    """Sum over queries: its predicted speed-up is the ratio of mean costs (mean latencies)."""
    out = CostEstimate(0, 0, 0, 0)
    for e in estimates:
        out = out + e
    return out


def paper_speedup(query_len: float, item_len: float, n_items: int, compression: float) -> float:
    """The paper's ratio ``(L_q + L_k)^2 N / (L_q + L_k N / C)^2`` (square terms only)."""
    joint = query_len + item_len * n_items / compression
    return (query_len + item_len) ** 2 * n_items / joint**2
