"""The CROSS-JEM module: encoder, selective mean pooling, shared linear classifier.

Pooling reads index tensors, not a dense (rows, items, seq) mask: every item of a row shares the
row's query part (summed once per row), and each item adds the hidden states of its own tokens
(its shared tokens and, in order-keeping layouts, its own segment) with one ``index_add`` over
all pooled tokens of the batch. Sums are taken in float32 whatever
the encoder's dtype, so bf16 scoring does not lose the counts' precision. A forward pass costs
one encoder call per length bucket, whatever the list size.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from torch import Tensor, nn

from rankers.compute.precision import float32_logits
from rankers.families.crossjem.inputs import Row
from rankers.families.crossjem.packed import Bucket, PackedRows, drop_default_positions
from rankers.inputs.batching import scatter_to_lists
from rankers.inputs.masks import encoder_mask
from rankers.inputs.transfer import upload

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclasses.dataclass
class CrossJEMBatch:
    """:class:`~rankers.families.crossjem.packed.PackedRows` on the device (same fields as tensors),
    plus the host copies of ``slot_list``/``slot_item`` that scoring scatters scores with."""

    input_ids: Tensor
    row_len: Tensor
    query_end: Tensor
    slot_row: Tensor
    slot_count: Tensor
    slot_list: Tensor
    slot_item: Tensor
    tok_slot: Tensor
    tok_row: Tensor
    tok_pos: Tensor
    tok_offset: Tensor
    buckets: list[Bucket]
    n_items: list[int]
    position_ids: Tensor | None = None
    #: the rows' lengths on the host: whether a bucket has padding, asked without a device read
    host_row_len: np.ndarray | None = None
    #: ``n_items`` on the device, uploaded with the batch (the item mask of training steps)
    lengths: Tensor | None = None
    #: merged layouts: the first (concat) rows, their lengths and merge targets
    first_ids: Tensor | None = None
    first_len: Tensor | None = None
    merge_dst: Tensor | None = None

    @classmethod
    def upload(cls, packed: PackedRows, device: str) -> CrossJEMBatch:
        """One host-to-device copy for the whole batch (pinned and non-blocking on CUDA)."""
        arrays = {name: getattr(packed, name) for name in PackedRows.ARRAYS}
        for name in ("position_ids", *PackedRows.MERGE_ARRAYS):
            if getattr(packed, name) is not None:
                arrays[name] = getattr(packed, name)
        arrays["lengths"] = np.asarray(packed.n_items, dtype=np.int64)
        tensors = upload(arrays, device)
        return cls(
            **tensors,
            buckets=packed.buckets,
            n_items=list(packed.n_items),
            host_row_len=packed.row_len,
        )

    def bucket_full(self, b: Bucket) -> bool | None:
        """Whether every row of bucket ``b`` fills its width (no padding), from the host
        lengths (None without them)."""
        if self.host_row_len is None or b.r1 <= b.r0:
            return None
        return bool(self.host_row_len[b.r0 : b.r1].min() == b.width)


def collate(rows_per_list: Sequence[Sequence[Row]]) -> PackedRows:
    """The simple implementation's rows (:func:`~rankers.families.crossjem.inputs.build_rows`) as
    one
    bucket of :class:`PackedRows`, query ``b``'s rows mapping to list ``b``: the oracle that
    :func:`~rankers.families.crossjem.packed.pack_lists` is tested against."""
    rows = [(b, row) for b, rows in enumerate(rows_per_list) for row in rows]
    width = max((len(row.input_ids) for _, row in rows), default=0)
    input_ids = np.zeros((len(rows), width), dtype=np.int64)
    position_ids = np.broadcast_to(np.arange(width), input_ids.shape).copy()
    merged = any(row.first_ids for _, row in rows)
    first_width = max((len(row.first_ids) for _, row in rows), default=0)
    first_ids = np.zeros((len(rows), first_width), dtype=np.int64)
    merge_dst = np.full((len(rows), first_width), -1, dtype=np.int64)
    row_len, query_end = [], []
    slots: dict[str, list[int]] = {k: [] for k in ("row", "count", "list", "item")}
    toks: dict[str, list[int]] = {k: [] for k in ("slot", "row", "pos", "offset")}
    for r, (b, row) in enumerate(rows):
        input_ids[r, : len(row.input_ids)] = row.input_ids
        if row.position_ids:
            position_ids[r, : len(row.position_ids)] = row.position_ids
        first_ids[r, : len(row.first_ids)] = row.first_ids
        merge_dst[r, : len(row.merge_dst)] = row.merge_dst
        start = row.token_type_ids.index(1) if 1 in row.token_type_ids else len(row.input_ids)
        row_len.append(len(row.input_ids))
        query_end.append(start)
        for slot in row.slots:
            own = slot.pool[start - 1 :]  # after the shared part: positions 1 .. start - 1
            assert slot.pool[: start - 1] == tuple(range(1, start))
            for pos, offset in zip(own, slot.offsets, strict=True):
                toks["slot"].append(len(slots["row"]))
                toks["row"].append(r)
                toks["pos"].append(pos)
                toks["offset"].append(offset)
            for key, value in zip(slots, (r, len(slot.pool), b, slot.item), strict=True):
                slots[key].append(value)

    def arr(values: list[int]) -> np.ndarray:
        return np.asarray(values, dtype=np.int64)

    n = len(rows)
    return PackedRows(
        input_ids=input_ids,
        row_len=arr(row_len),
        query_end=arr(query_end),
        slot_row=arr(slots["row"]),
        slot_count=arr(slots["count"]),
        slot_list=arr(slots["list"]),
        slot_item=arr(slots["item"]),
        tok_slot=arr(toks["slot"]),
        tok_row=arr(toks["row"]),
        tok_pos=arr(toks["pos"]),
        tok_offset=arr(toks["offset"]),
        buckets=[Bucket(0, n, 0, len(slots["row"]), 0, len(toks["slot"]), width, first_width)]
        if n
        else [],
        n_items=[sum(len(row.slots) for row in rows) for rows in rows_per_list],
        position_ids=drop_default_positions(position_ids),
        first_ids=first_ids if merged else None,
        first_len=arr([len(row.first_ids) for _, row in rows]) if merged else None,
        merge_dst=merge_dst if merged else None,
    )


def sinusoids(length: int, dim: int) -> Tensor:
    """Vaswani et al. positional encodings, (length, dim): sin on even, cos on odd dims."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)[:, : dim // 2]
    return table


class ItemPositions(nn.Module):
    """The fixed sinusoids of each token's position in its item, added to its hidden state
    before pooling. A module of its own so the bf16 scoring copy keeps it in float32 with the
    classifier (:data:`CrossJEMModule.FLOAT32_PARTS`): pooling is float32 and a bf16 table would
    round the positions it adds to 8 bits of mantissa."""

    table: Tensor

    def __init__(self, max_item_len: int, hidden: int) -> None:
        super().__init__()
        # fixed, not trained: kept out of the state dict so checkpoints hold weights only
        self.register_buffer("table", sinusoids(max_item_len, hidden), persistent=False)

    def forward(self, offsets: Tensor) -> Tensor:
        return self.table[offsets].float()


class CrossJEMModule(nn.Module):
    """Encoder + selective mean pooling (+ optional item positions) + shared linear classifier."""

    #: the submodules a low-precision scoring copy keeps in float32
    #: (rankers.compute.precision.CastCache)
    FLOAT32_PARTS = ("classifier", "item_position")

    def __init__(
        self,
        encoder: PreTrainedModel,
        dropout: float,
        item_positions: bool,
        max_item_len: int,
        merge_layers: int = 0,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.merge_layers = merge_layers
        hidden = int(encoder.config.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden, 1)
        self.item_positions = item_positions
        self.item_position = ItemPositions(max_item_len, hidden)

    def forward(self, batch: CrossJEMBatch) -> tuple[Tensor, Tensor]:
        """Logits (B, N_max) for every item of every query in the batch, and the item mask."""
        device = batch.input_ids.device
        parts = [self.bucket_logits(batch, b) for b in batch.buckets]
        logits = torch.cat(parts) if parts else torch.zeros(0, device=device)
        return scatter_to_lists(
            logits, batch.slot_list, batch.slot_item, batch.n_items, batch.lengths
        )

    def bucket_logits(self, batch: CrossJEMBatch, b: Bucket, full: bool | None = None) -> Tensor:
        """float32 logits of the slots ``[b.s0, b.s1)``: one encoder call over rows ``[r0, r1)``.
        ``full``: whether no row of the bucket is padded, known on the host
        (:meth:`CrossJEMBatch.bucket_full`; the encoder then reads nothing back); None
        (training): not known."""
        ids = batch.input_ids[b.r0 : b.r1, : b.width]
        positions = torch.arange(b.width, device=ids.device)[None, :]
        row_len = batch.row_len[b.r0 : b.r1, None]
        query_end = batch.query_end[b.r0 : b.r1, None]
        attention = positions < row_len
        types = (positions >= query_end) & attention
        position_ids = None
        if batch.position_ids is not None:  # own tokens numbered by their place in the item
            position_ids = batch.position_ids[b.r0 : b.r1, : b.width]
        if batch.first_ids is not None:
            hidden = self.merged_hidden(batch, b, attention, types).float()
        else:
            hidden = self.encoder(
                input_ids=ids,
                attention_mask=encoder_mask(self.encoder, attention, full),
                token_type_ids=types.long(),
                position_ids=position_ids,
            ).last_hidden_state.float()
        # pooling sums in float32 also under autocast (CUDA training), which would run the bmm
        # in bf16 and leave index_add with two dtypes
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            shared_mask = ((positions >= 1) & (positions < query_end)).float()
            shared = torch.bmm(shared_mask[:, None, :], hidden).squeeze(1)  # (rows, hidden)
            slot_row = batch.slot_row[b.s0 : b.s1]
            tok_slot = batch.tok_slot[b.t0 : b.t1]
            # gathers by index_select, not advanced indexing: the latter's backward adds
            # repeated indices (a union token pooled by many items, a row shared by its slots)
            # with parallel atomic adds on CPU, in an order that follows thread timing, so
            # training under load differed in its last bits; index_select's backward adds them
            # in index order
            rows, width, dim = hidden.shape
            at = batch.tok_row[b.t0 : b.t1] * width + batch.tok_pos[b.t0 : b.t1]
            own = hidden.reshape(rows * width, dim).index_select(0, at)
            if self.item_positions:
                own = own + self.item_position(batch.tok_offset[b.t0 : b.t1])
            summed = shared.index_select(0, slot_row).index_add(0, tok_slot, own)
            pooled = summed / batch.slot_count[b.s0 : b.s1, None].float().clamp_min(1.0)
        return float32_logits(self.classifier, self.dropout(pooled))

    def merged_hidden(
        self, batch: CrossJEMBatch, b: Bucket, attention: Tensor, types: Tensor
    ) -> Tensor:
        """Last hidden states of a merged layout's rows ``[r0, r1)``: the first
        ``merge_layers`` layers over the concat rows, then each row's copies of a token averaged
        into the token's place (:func:`merge_rows`), then the other layers over the merged rows
        (``attention``/``types``: their mask and token types)."""
        assert batch.first_ids is not None and batch.first_len is not None
        assert batch.merge_dst is not None
        ids = batch.first_ids[b.r0 : b.r1, : b.first_width]
        positions = torch.arange(b.first_width, device=ids.device)[None, :]
        first_mask = positions < batch.first_len[b.r0 : b.r1, None]
        query_end = batch.query_end[b.r0 : b.r1, None]
        first_types = (positions >= query_end) & first_mask
        layers = list(encoder_layers(self.encoder))
        embeddings = cast(nn.Module, self.encoder.embeddings)
        hidden = embeddings(input_ids=ids, token_type_ids=first_types.long())
        hidden = run_layers(self.encoder, layers[: self.merge_layers], hidden, first_mask)
        dst = batch.merge_dst[b.r0 : b.r1, : b.first_width]
        hidden = merge_rows(hidden, dst, b.width)
        return run_layers(self.encoder, layers[self.merge_layers :], hidden, attention)


def encoder_layers(encoder: nn.Module) -> nn.ModuleList:
    """The transformer layers of a BERT-style encoder (``encoder.encoder.layer``)."""
    layers = getattr(getattr(encoder, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(
            f"merge_layers needs a BERT-style encoder (encoder.layer); {type(encoder).__name__} "
            "has none"
        )
    return layers


def run_layers(
    encoder: PreTrainedModel, layers: Sequence[nn.Module], hidden: Tensor, mask: Tensor
) -> Tensor:
    """``hidden`` through ``layers`` with padding ``mask`` (rows, width) as the encoder's own
    forward builds it (an additive mask in the encoder's dtype)."""
    build = getattr(encoder, "get_extended_attention_mask", None)
    if build is not None:  # transformers 4: the encoder's own builder
        extended = build(mask.long(), tuple(mask.shape))
    else:  # transformers 5 removed it: the same additive (rows, 1, 1, width) mask
        extended = (1.0 - mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min
    for layer in layers:
        out = layer(hidden, attention_mask=extended)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


def merge_rows(hidden: Tensor, dst: Tensor, width: int) -> Tensor:
    """Rows of ``width`` positions whose position ``p`` is the mean of the ``hidden`` states
    (rows, first width, d) that ``dst`` sends to ``p`` (-1: padding, dropped). Positions nothing
    is sent to (the merged rows' padding) are zero."""
    rows, first_width, dim = hidden.shape
    target = (
        torch.where(dst < 0, width, dst)
        + (width + 1) * torch.arange(rows, device=dst.device)[:, None]
    )
    flat = hidden.reshape(rows * first_width, dim)
    summed = hidden.new_zeros(rows * (width + 1), dim).index_add(0, target.reshape(-1), flat)
    # counted by index_add, not bincount: bincount reads the largest index back to the host
    ones = torch.ones(target.numel(), dtype=torch.long, device=dst.device)
    counts = torch.zeros(rows * (width + 1), dtype=torch.long, device=dst.device)
    counts = counts.index_add(0, target.reshape(-1), ones)
    merged = summed / counts.clamp_min(1)[:, None].to(summed.dtype)
    return merged.reshape(rows, width + 1, dim)[:, :width]
