"""monoBERT (Nogueira & Cho): a cross-encoder scoring each (query, item) pair on its own.

Input ``[CLS] query [SEP] item [SEP]`` with the same WordPiece truncation as CROSS-JEM, a linear
head on the last layer's [CLS] state (``pooling=cls``, default), the BERT pooler (``pooler``) or the
masked mean of all tokens (``mean``). Scoring sorts all pairs of a call by length, batches them,
and restores the order, so padding stays small and the baseline is fairly fast.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from bench.data.model import CandidateList
from rankers.base import RankerConfig, RankerError
from rankers.encoders import (
    EncoderConfig,
    EncoderRanker,
    bucketed_scores,
    check_positions,
    pad_rows,
    scatter_to_lists,
    token_ids,
)

log = logging.getLogger(__name__)

POOLINGS = ("cls", "pooler", "mean")


@dataclasses.dataclass
class MonoBERTConfig(EncoderConfig):
    #: cls: last-layer [CLS] state; pooler: BERT's tanh pooler on it; mean: masked token mean
    pooling: str = "cls"
    #: pairs per forward pass when scoring
    batch_size: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pooling not in POOLINGS:
            raise RankerError(f"option pooling={self.pooling!r}: expected one of {POOLINGS}")
        if self.batch_size < 1:
            raise RankerError(f"option batch_size={self.batch_size}: must be >= 1")


@dataclasses.dataclass
class PairBatch:
    """Padded (query, item) pairs and, for list-level use, where each pair belongs."""

    input_ids: Tensor
    attention_mask: Tensor
    token_type_ids: Tensor
    list_index: Tensor
    item_index: Tensor
    n_items: list[int]


class MonoBERTModule(nn.Module):
    def __init__(self, encoder: nn.Module, dropout: float, pooling: str) -> None:
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(int(encoder.config.hidden_size), 1)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor) -> Tensor:
        """One logit per pair, shape (P,)."""
        out = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        )
        hidden = out.last_hidden_state
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.pooling == "pooler":
            if getattr(out, "pooler_output", None) is None:
                raise RankerError("monobert: pooling=pooler but the encoder has no pooler")
            pooled = out.pooler_output
        else:
            weights = attention_mask.to(hidden.dtype)[..., None]
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)
        return self.classifier(self.dropout(pooled)).squeeze(-1)


class MonoBERTRanker(EncoderRanker):
    """Pointwise cross-encoder baseline (early interaction)."""

    name: ClassVar[str] = "monobert"
    family: ClassVar[str] = "early"
    Config: ClassVar[type[RankerConfig]] = MonoBERTConfig
    pointwise: ClassVar[bool] = True

    @property
    def cfg(self) -> MonoBERTConfig:
        assert isinstance(self.config, MonoBERTConfig)
        return self.config

    def _check_encoder(self, encoder: nn.Module) -> None:
        longest = self.cfg.max_query_len + self.cfg.max_item_len + 3
        check_positions(encoder, longest, "monobert: max_query_len + max_item_len + 3")

    def _build_module(self, encoder: nn.Module) -> nn.Module:
        return MonoBERTModule(encoder, dropout=self.cfg.dropout, pooling=self.cfg.pooling)

    # -- inputs --------------------------------------------------------------------------------
    def pairs(self, query: str, items: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """(input_ids, token_type_ids) of ``[CLS] query [SEP] item [SEP]`` for each item."""
        cfg, sp = self.cfg, self.special
        q = token_ids(self.tokenizer, [query], cfg.max_query_len)[0]
        head = [sp.cls, *q, sp.sep]
        return [
            (head + ids + [sp.sep], [0] * len(head) + [1] * (len(ids) + 1))
            for ids in token_ids(self.tokenizer, items, cfg.max_item_len)
        ]

    def _pad(self, pairs: Sequence[tuple[list[int], list[int]]]) -> tuple[Tensor, Tensor, Tensor]:
        ids = pad_rows([p[0] for p in pairs], self.special.pad).to(self.device)
        mask = pad_rows([[1] * len(p[0]) for p in pairs], 0).to(self.device)
        types = pad_rows([p[1] for p in pairs], 0).to(self.device)
        return ids, mask, types

    def prepare(self, lists: Sequence[tuple[str, Sequence[str]]]) -> PairBatch:
        """All pairs of several lists as one padded batch for :meth:`forward` (training)."""
        pairs, list_index, item_index = [], [], []
        for b, (query, items) in enumerate(lists):
            for j, pair in enumerate(self.pairs(query, items)):
                pairs.append(pair)
                list_index.append(b)
                item_index.append(j)
        ids, mask, types = self._pad(pairs)
        return PairBatch(
            input_ids=ids,
            attention_mask=mask,
            token_type_ids=types,
            list_index=torch.tensor(list_index, dtype=torch.long, device=self.device),
            item_index=torch.tensor(item_index, dtype=torch.long, device=self.device),
            n_items=[len(items) for _, items in lists],
        )

    def forward(self, batch: PairBatch, module: nn.Module | None = None) -> tuple[Tensor, Tensor]:
        """Logits (B, N_max) and item mask, like CROSS-JEM's, so one trainer fits both.

        ``module``: a wrapper of :attr:`module` to call instead (the trainer's DDP model)."""
        if batch.input_ids.shape[0] == 0:  # only empty lists
            logits = torch.zeros(0, device=batch.input_ids.device)
        else:
            net = module if module is not None else self.module
            logits = net(batch.input_ids, batch.attention_mask, batch.token_type_ids)
        return scatter_to_lists(logits.float(), batch.list_index, batch.item_index, batch.n_items)

    # -- scoring -------------------------------------------------------------------------------
    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        pairs = [p for cl in lists for p in self.pairs(cl.query.text, cl.texts)]
        with self.inference():
            return bucketed_scores(
                pairs,
                [len(cl) for cl in lists],
                self.cfg.batch_size,
                lambda batch: self.module(*self._pad(batch)),
                length=lambda pair: len(pair[0]),
            )
