"""The CROSS-JEM module: encoder, selective mean pooling, shared linear classifier.

All items of all rows are pooled with one (rows, items, seq) mask and one batched matmul, and
scored with one linear layer, so a forward pass costs one encoder call whatever the list size.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from rankers.crossjem.inputs import Row
from rankers.encoders import pad_rows, scatter_to_lists


@dataclasses.dataclass
class CrossJEMBatch:
    """Encoder rows of several queries, with where each pooled item belongs.

    ``pool[r, g]`` is the selective pooling mask of the ``g``-th item of row ``r``;
    ``offsets[r, g, p]`` is 1 when that item has a pooled token at item position ``p`` (for the
    item-position variant); ``list_index``/``item_index`` map valid slots back to (query, item).
    """

    input_ids: Tensor
    attention_mask: Tensor
    token_type_ids: Tensor
    pool: Tensor
    offsets: Tensor
    slot_mask: Tensor
    list_index: Tensor
    item_index: Tensor
    n_items: list[int]

    def to(self, device: str) -> CrossJEMBatch:
        moved = {
            f.name: getattr(self, f.name).to(device)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), Tensor)
        }
        return dataclasses.replace(self, **moved)


def collate(
    rows_per_list: Sequence[Sequence[Row]], pad_id: int, max_item_len: int
) -> CrossJEMBatch:
    """Pad the rows of several queries into one batch (query ``b``'s rows map to list ``b``)."""
    rows = [(b, row) for b, rows in enumerate(rows_per_list) for row in rows]
    n_items = [sum(len(row.slots) for row in rows) for rows in rows_per_list]
    input_ids = pad_rows([row.input_ids for _, row in rows], pad_id)
    seq = input_ids.shape[1] if rows else 0
    width = max((len(row.slots) for _, row in rows), default=0)
    # gather every index first, then one vectorised write per tensor (this runs per query)
    pool_idx: list[list[int]] = [[], [], []]
    off_idx: list[list[int]] = [[], [], []]
    slots: list[list[int]] = [[], [], [], []]  # row, slot, list, item
    for r, (b, row) in enumerate(rows):
        for g, slot in enumerate(row.slots):
            for idx, positions in ((pool_idx, slot.pool), (off_idx, slot.offsets)):
                idx[0].extend([r] * len(positions))
                idx[1].extend([g] * len(positions))
                idx[2].extend(positions)
            for column, value in zip(slots, (r, g, b, slot.item), strict=True):
                column.append(value)
    pool = torch.zeros(len(rows), width, seq)
    pool[_index(pool_idx)] = 1.0
    offsets = torch.zeros(len(rows), width, max_item_len)
    offsets[_index(off_idx)] = 1.0
    where = _index(slots[:2])
    slot_mask = torch.zeros(len(rows), width, dtype=torch.bool)
    slot_mask[where] = True
    list_index = torch.zeros(len(rows), width, dtype=torch.long)
    list_index[where] = torch.tensor(slots[2], dtype=torch.long)
    item_index = torch.zeros(len(rows), width, dtype=torch.long)
    item_index[where] = torch.tensor(slots[3], dtype=torch.long)
    return CrossJEMBatch(
        input_ids=input_ids,
        attention_mask=pad_rows([[1] * len(row.input_ids) for _, row in rows], 0),
        token_type_ids=pad_rows([row.token_type_ids for _, row in rows], 0),
        pool=pool,
        offsets=offsets,
        slot_mask=slot_mask,
        list_index=list_index,
        item_index=item_index,
        n_items=n_items,
    )


def _index(columns: Sequence[list[int]]) -> tuple[Tensor, ...]:
    return tuple(torch.tensor(c, dtype=torch.long) for c in columns)


def sinusoids(length: int, dim: int) -> Tensor:
    """Vaswani et al. positional encodings, (length, dim): sin on even, cos on odd dims."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)[:, : dim // 2]
    return table


class CrossJEMModule(nn.Module):
    """Encoder + selective mean pooling (+ optional item positions) + shared linear classifier."""

    def __init__(
        self, encoder: nn.Module, dropout: float, item_positions: bool, max_item_len: int
    ) -> None:
        super().__init__()
        self.encoder = encoder
        hidden = int(encoder.config.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden, 1)
        self.item_positions = item_positions
        # fixed, not trained: kept out of the state dict so checkpoints hold weights only
        self.register_buffer("position_table", sinusoids(max_item_len, hidden), persistent=False)

    def forward(self, batch: CrossJEMBatch) -> tuple[Tensor, Tensor]:
        """Logits (B, N_max) for every item of every query in the batch, and the item mask."""
        if batch.input_ids.shape[0] == 0:
            return scatter_to_lists(
                torch.zeros(0, device=batch.input_ids.device),
                batch.list_index.flatten(),
                batch.item_index.flatten(),
                batch.n_items,
            )
        hidden = self.encoder(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            token_type_ids=batch.token_type_ids,
        ).last_hidden_state
        pool = batch.pool.to(hidden.dtype)
        summed = pool @ hidden  # (rows, items, hidden): all items in one matmul
        if self.item_positions:
            summed = summed + batch.offsets.to(hidden.dtype) @ self.position_table.to(hidden.dtype)
        # counts from the float32 mask: bf16 cannot hold every count above 256 exactly
        pooled = summed / batch.pool.sum(dim=-1, keepdim=True).clamp_min(1.0)
        logits = self.classifier(self.dropout(pooled)).squeeze(-1)
        valid = batch.slot_mask
        return scatter_to_lists(
            logits[valid].float(),
            batch.list_index[valid],
            batch.item_index[valid],
            batch.n_items,
        )
