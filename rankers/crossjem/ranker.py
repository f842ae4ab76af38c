"""CROSS-JEM as a :class:`~rankers.base.Ranker`: joint scoring of a query's whole list."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from torch import Tensor, nn

from bench.data.model import CandidateList
from rankers.base import RankerConfig, RankerError
from rankers.crossjem.inputs import Row, build_rows, length_buckets
from rankers.crossjem.model import CrossJEMBatch, CrossJEMModule, collate
from rankers.encoders import EncoderConfig, EncoderRanker, check_positions, token_ids

log = logging.getLogger(__name__)

#: a query text and its item texts: what training and scoring both start from
QueryItems = tuple[str, Sequence[str]]
#: most padding a scoring forward pass may add, as a fraction of its real tokens: the encoder
#: computes on padding, so scoring sorts rows by length and batches them in runs within this
PAD_TOLERANCE = 0.05


@dataclasses.dataclass(frozen=True)
class ScoringPass:
    """One forward pass of scoring: each row of ``batch`` is its own entry (items renumbered
    0..k-1); ``targets[r]`` says which list of the call and which of its items row ``r`` holds."""

    batch: CrossJEMBatch
    targets: list[tuple[int, tuple[int, ...]]]


@dataclasses.dataclass
class CrossJEMConfig(EncoderConfig):
    #: L_u: most union tokens per encoder row; longer unions are split into packed groups
    union_len: int = 242
    #: add sinusoidal encodings of each token's position in its item before pooling (paper 5.3)
    item_positions: bool = False
    #: queries per forward pass when scoring (each may take several rows)
    batch_queries: int = 8
    #: listwise by default; the paper's rpl needs teacher scores (see rankers.losses)
    loss: str = "listnet"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_item_len > self.union_len:
            raise RankerError(
                f"option max_item_len={self.max_item_len} exceeds union_len={self.union_len}: "
                "an item must fit in one encoder row"
            )
        if self.batch_queries < 1:
            raise RankerError(f"option batch_queries={self.batch_queries}: must be >= 1")


class CrossJEMRanker(EncoderRanker):
    """Scores all items of a query in one encoder pass over [CLS] query [SEP] union [SEP]."""

    name: ClassVar[str] = "crossjem"
    family: ClassVar[str] = "joint"
    Config: ClassVar[type[RankerConfig]] = CrossJEMConfig
    pointwise: ClassVar[bool] = False

    @property
    def cfg(self) -> CrossJEMConfig:
        assert isinstance(self.config, CrossJEMConfig)
        return self.config

    def _check_encoder(self, encoder: nn.Module) -> None:
        longest = self.cfg.max_query_len + self.cfg.union_len + 3
        check_positions(encoder, longest, "crossjem: max_query_len + union_len + 3")

    def _build_module(self, encoder: nn.Module) -> nn.Module:
        return CrossJEMModule(
            encoder,
            dropout=self.cfg.dropout,
            item_positions=self.cfg.item_positions,
            max_item_len=self.cfg.max_item_len,
        )

    # -- inputs --------------------------------------------------------------------------------
    def rows(self, query: str, items: Sequence[str]) -> list[Row]:
        """The encoder rows of one query (one per packed group of items)."""
        cfg = self.cfg
        q = token_ids(self.tokenizer, [query], cfg.max_query_len)[0]
        ids = token_ids(self.tokenizer, items, cfg.max_item_len)
        return build_rows(q, ids, cfg.union_len, self.special.cls, self.special.sep)

    def prepare(self, lists: Sequence[QueryItems]) -> CrossJEMBatch:
        """Tokenised, packed and padded batch for :meth:`forward` (on this ranker's device)."""
        rows = [self.rows(query, items) for query, items in lists]
        batch = collate(rows, self.special.pad, self.cfg.max_item_len)
        return batch.to(self.device)

    def forward(
        self, batch: CrossJEMBatch, module: nn.Module | None = None
    ) -> tuple[Tensor, Tensor]:
        """Logits (B, N_max) and item mask; train/eval mode and autograd are the caller's.

        ``module``: a wrapper of :attr:`module` to call instead (the trainer's DDP model)."""
        return (module if module is not None else self.module)(batch)

    # -- scoring -------------------------------------------------------------------------------
    def scoring_passes(self, lists: Sequence[QueryItems]) -> list[ScoringPass]:
        """Everything :meth:`score` does before the encoder: tokenise and pack every list, then
        batch all rows by length (:func:`length_buckets`), so little padding is computed.
        A row's logits do not depend on the rows batched with it."""
        rows = [(b, row) for b, (q, items) in enumerate(lists) for row in self.rows(q, items)]
        passes = []
        for bucket in length_buckets([len(row.input_ids) for _, row in rows], PAD_TOLERANCE):
            picked = [rows[i] for i in bucket]
            local = [
                [
                    dataclasses.replace(
                        row,
                        slots=tuple(
                            dataclasses.replace(slot, item=k) for k, slot in enumerate(row.slots)
                        ),
                    )
                ]
                for _, row in picked
            ]
            batch = collate(local, self.special.pad, self.cfg.max_item_len).to(self.device)
            targets = [(b, tuple(slot.item for slot in row.slots)) for b, row in picked]
            passes.append(ScoringPass(batch, targets))
        return passes

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        step = self.cfg.batch_queries
        with self.inference():
            for start in range(0, len(lists), step):
                chunk = lists[start : start + step]
                scores = [np.zeros(len(cl), dtype=np.float32) for cl in chunk]
                for p in self.scoring_passes([(cl.query.text, cl.texts) for cl in chunk]):
                    logits, _ = self.forward(p.batch)
                    values = logits.float().cpu().numpy()
                    for r, (b, items) in enumerate(p.targets):
                        scores[b][list(items)] = values[r, : len(items)]
                out.extend(scores)
        return out
