"""monoBERT (Nogueira & Cho): a cross-encoder scoring each (query, item) pair on its own.

Input ``[CLS] query [SEP] item [SEP]`` with the same WordPiece truncation as CROSS-JEM, a linear
head on the last layer's [CLS] state (``pooling=cls``, default), the BERT pooler (``pooler``) or the
masked mean of all tokens (``mean``).

Scoring gets the same care as CROSS-JEM's, so the baseline is not slow by construction: item ids
come from the index-time store, the pairs of a call are built as one id matrix by concatenating
ids with array operations, sorted by length and copied to the device once; each batch is a slice
cut to its own longest pair, and the scores come back in one copy. :meth:`MonoBERTRanker.pairs`
is the simple implementation, kept as the oracle.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from bench.data.model import CandidateList
from rankers.base import RUNTIME, SCORE, TRAINING, RankerError, inherit_option, option
from rankers.compute.precision import float32_logits
from rankers.families.encoder import EncoderConfig, EncoderRanker
from rankers.hooks import EncoderCall
from rankers.inputs.batching import (
    check_positions,
    list_arrays,
    pad_array,
    pad_rows,
    scatter_to_lists,
    token_ids,
)
from rankers.inputs.masks import encoder_mask
from rankers.inputs.tokens import PAD, ItemIds
from rankers.inputs.transfer import upload
from rankers.itemorder import sort_items_option
from rankers.trainconfig import ListTrainingConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from rankers.io.export import Exported

log = logging.getLogger(__name__)

POOLINGS = ("cls", "pooler", "mean")


@dataclasses.dataclass
class MonoBERTConfig(EncoderConfig):
    pooling: str = option(
        "cls",
        role=TRAINING | SCORE,
        choices=POOLINGS,
        help="cls: last-layer [CLS] state; pooler: BERT's tanh pooler on it; mean: token mean",
    )
    batch_size: int = option(64, role=RUNTIME, min=1, help="pairs per scoring forward pass")
    # short pairs ran 8-14% faster on the plain graph than on the fused one (ONNX Runtime 1.32,
    # 1 thread, float32 and int8): each ranker gets its faster graph by default
    onnx_graph: str = inherit_option(
        EncoderConfig,
        "onnx_graph",
        "plain",
        help="the graph runtime=onnxruntime runs: plain (the sdpa export; monoBERT's short pairs "
        "run it faster) or fused (ONNX Runtime's BERT fusions, as CROSS-JEM runs)",
    )
    sort_item_tokens: bool = sort_items_option()
    # a pair of up to 67 tokens per item (CROSS-JEM packs items into shared rows): half the
    # list trainer's default keeps a default step of 8 lists x 64 items near 2.7 GB resident
    train_micro_items: int = inherit_option(
        ListTrainingConfig,
        "train_micro_items",
        128,
        help="most (query, item) pairs one forward/backward pass of a training step holds: a "
        "larger step is split into micro-batches whose gradients add up (a long list in chunks, "
        "scored first), which bounds its memory (0: the whole step at once)",
    )


@dataclasses.dataclass
class ScoringPairs:
    """The pairs of one ``score()`` call on the device, sorted by length: ``input_ids``
    (P, longest), each pair's length and query end (token types switch there); ``order`` maps
    sorted position -> flat pair index, ``n_items`` the list sizes."""

    input_ids: Tensor
    length: Tensor
    query_end: Tensor
    host_length: np.ndarray
    order: np.ndarray
    n_items: list[int]


def pair_matrix(
    queries: Sequence[np.ndarray], items: Sequence[ItemIds], cls: int, sep: int, pad: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[CLS] q [SEP] k [SEP]`` ids of every (query, item) pair, list after list, as one padded
    matrix, with each pair's length and query end; built by concatenating id arrays."""
    blocks, lengths, ends = [], [], []
    for q, it in zip(queries, items, strict=True):
        start = len(q) + 2
        n, width = it.ids.shape
        ids = np.full((n, start + width + 1), pad, dtype=np.int64)
        ids[:, 0] = cls
        ids[:, 1 : start - 1] = q
        ids[:, start - 1] = sep
        ids[:, start : start + width] = np.where(it.ids == PAD, pad, it.ids)
        ids[np.arange(n), start + it.lens] = sep
        blocks.append(ids)
        lengths.append(start + it.lens + 1)
        ends.append(np.full(n, start, dtype=np.int64))
    longest = max((b.shape[1] for b in blocks), default=0)
    matrix = np.full((sum(len(b) for b in blocks), longest), pad, dtype=np.int64)
    row = 0
    for b in blocks:
        matrix[row : row + len(b), : b.shape[1]] = b
        row += len(b)

    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    return matrix, cat(lengths), cat(ends)


@dataclasses.dataclass
class PairBatch:
    """Padded (query, item) pairs and, for list-level use, where each pair belongs."""

    input_ids: Tensor
    attention_mask: Tensor
    token_type_ids: Tensor
    list_index: Tensor
    item_index: Tensor
    n_items: list[int]
    #: ``n_items`` on the device (uploaded with the batch; None: copied when scattering)
    lengths: Tensor | None = None


class MonoBERTModule(nn.Module):
    def __init__(self, encoder: PreTrainedModel, dropout: float, pooling: str) -> None:
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(int(encoder.config.hidden_size), 1)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        token_type_ids: Tensor,
        full: bool | None = None,
    ) -> Tensor:
        """One float32 logit per pair, shape (P,): pooling and head in float32 whatever the
        encoder's dtype (a bf16 scoring copy keeps the head in float32). ``full``: whether no
        pair is padded, known on the host (:func:`~rankers.inputs.masks.encoder_mask`: the
        encoder then reads nothing back); None (training): not known."""
        out = self.encoder(
            input_ids=input_ids,
            attention_mask=encoder_mask(self.encoder, attention_mask, full),
            token_type_ids=token_type_ids,
        )
        hidden = out.last_hidden_state.float()
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.pooling == "pooler":
            if getattr(out, "pooler_output", None) is None:
                raise RankerError("monobert: pooling=pooler but the encoder has no pooler")
            pooled = out.pooler_output.float()
        else:
            weights = attention_mask.to(hidden.dtype)[..., None]
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)
        return float32_logits(self.classifier, self.dropout(pooled))


class MonoBERTRanker(EncoderRanker[MonoBERTConfig]):
    """Pointwise cross-encoder baseline (early interaction)."""

    name: ClassVar[str] = "monobert"
    family: ClassVar[str] = "early"
    Config = MonoBERTConfig
    pointwise: ClassVar[bool] = True
    graphs_encoder: ClassVar[bool] = True

    def _check_config(self, config: Any) -> None:
        longest = self.cfg.max_query_len + self.cfg.max_item_len + 3
        check_positions(config, longest, "monobert: max_query_len + max_item_len + 3")

    def _build_module(self, encoder: PreTrainedModel) -> nn.Module:
        return MonoBERTModule(encoder, dropout=self.cfg.dropout, pooling=self.cfg.pooling)

    def encoder_outputs(self) -> tuple[str, ...]:
        """``pooling=pooler`` reads BERT's pooler too."""
        if self.cfg.pooling == "pooler":
            return ("last_hidden_state", "pooler_output")
        return ("last_hidden_state",)

    # -- export ------------------------------------------------------------------------------
    def export(self, folder: Path) -> Exported:
        """A sentence-transformers ``CrossEncoder`` whose ``predict`` gives this ranker's scores
        (the raw logit: the activation is the identity)."""
        from rankers.io.export import Exported, cross_encoder_folder, refuse_sorted_items

        refuse_sorted_items(self.name, self.cfg.sort_item_tokens)
        module = self.module
        assert isinstance(module, MonoBERTModule)
        longest = self.cfg.max_query_len + self.cfg.max_item_len + 3
        loads_with = cross_encoder_folder(
            folder, module.encoder, self.tokenizer, module.classifier, self.cfg.pooling, longest
        )
        return Exported(
            loads_with=loads_with,
            example=(
                "from sentence_transformers import CrossEncoder\n"
                "model = CrossEncoder({folder})\n"
                "scores = model.predict([(query, item) for item in items])"
            ),
            notes=(
                f"bench cuts a query to {self.cfg.max_query_len} and an item to "
                f"{self.cfg.max_item_len} WordPiece tokens; the CrossEncoder cuts a pair to "
                f"{longest} tokens: scores are equal wherever no text is longer than its limit",
            ),
        )

    # -- inputs --------------------------------------------------------------------------------
    def pairs(self, query: str, items: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """(input_ids, token_type_ids) of ``[CLS] query [SEP] item [SEP]`` for each item."""
        cfg, sp = self.cfg, self.special
        q = token_ids(self.tokenizer, [query], cfg.max_query_len)[0]
        head = [sp.cls, *q, sp.sep]
        return [
            (head + ids + [sp.sep], [0] * len(head) + [1] * (len(ids) + 1))
            for ids in self.item_token_ids(items)
        ]

    def _pad(self, pairs: Sequence[tuple[list[int], list[int]]]) -> tuple[Tensor, Tensor, Tensor]:
        ids = pad_rows([p[0] for p in pairs], self.special.pad).to(self.device)
        mask = pad_rows([[1] * len(p[0]) for p in pairs], 0).to(self.device)
        types = pad_rows([p[1] for p in pairs], 0).to(self.device)
        return ids, mask, types

    def prepare(self, lists: Sequence[tuple[str, Sequence[str]]]) -> PairBatch:
        """All pairs of several lists as one padded batch for :meth:`forward` (training): ids,
        masks and scatter indices reach the device in one :func:`upload` copy."""
        pairs = [pair for query, items in lists for pair in self.pairs(query, items)]
        n_items = [len(items) for _, items in lists]
        tensors = upload(
            {
                "input_ids": pad_array([p[0] for p in pairs], self.special.pad),
                "attention_mask": pad_array([[1] * len(p[0]) for p in pairs], 0),
                "token_type_ids": pad_array([p[1] for p in pairs], 0),
                **list_arrays(n_items),
            },
            self.device,
        )
        return PairBatch(**tensors, n_items=n_items)

    def forward(self, batch: PairBatch, module: nn.Module | None = None) -> tuple[Tensor, Tensor]:
        """Logits (B, N_max) and item mask, like CROSS-JEM's, so one trainer fits both.

        ``module``: a wrapper of :attr:`module` to call instead (the trainer's DDP model)."""
        if batch.input_ids.shape[0] == 0:  # only empty lists
            logits = torch.zeros(0, device=batch.input_ids.device)
        else:
            net = module if module is not None else self.module
            logits = net(batch.input_ids, batch.attention_mask, batch.token_type_ids)
        return scatter_to_lists(
            logits.float(), batch.list_index, batch.item_index, batch.n_items, batch.lengths
        )

    # -- scoring -------------------------------------------------------------------------------
    host_step: ClassVar[str | None] = (
        "query WordPiece; item ids from the index-time store (WordPiece in end-to-end mode); "
        "[CLS] q [SEP] k [SEP] id matrix with NumPy, sorted by length; one host-to-device copy "
        "per call"
    )

    def prepare_scoring(self, lists: Sequence[CandidateList]) -> ScoringPairs:
        sp = self.special
        queries = self.query_tokens([cl.query.text for cl in lists])
        items = [self.lookup_item_ids(cl.texts) for cl in lists]
        matrix, length, query_end = pair_matrix(queries, items, sp.cls, sp.sep, sp.pad)
        order = np.argsort(length, kind="stable")
        tensors = upload(
            {"input_ids": matrix[order], "length": length[order], "query_end": query_end[order]},
            self.device,
        )
        return ScoringPairs(
            **tensors, host_length=length[order], order=order, n_items=[len(cl) for cl in lists]
        )

    def score_prepared(self, prepared: ScoringPairs) -> list[np.ndarray]:
        """Length-sorted batches of ``batch_size`` pairs, each cut to its longest pair."""
        module = self.scoring_module()
        p, step = prepared, self.cfg.batch_size
        parts = []
        with self.inference():
            for start in range(0, len(p.order), step):
                end = min(start + step, len(p.order))
                width = int(p.host_length[end - 1])  # sorted: the batch's longest is its last
                full = bool(p.host_length[start] == width)  # and its shortest the first
                positions = torch.arange(width, device=p.input_ids.device)[None, :]
                attention = positions < p.length[start:end, None]
                types = (positions >= p.query_end[start:end, None]) & attention
                ids = p.input_ids[start:end, :width]
                parts.append(module(ids, attention, types.long(), full).float())
            values = torch.cat(parts).cpu().numpy() if parts else np.zeros(0, np.float32)
        flat = np.zeros(len(p.order), dtype=np.float32)
        flat[p.order] = values
        bounds = np.cumsum([0, *p.n_items])
        return [flat[bounds[k] : bounds[k + 1]].copy() for k in range(len(p.n_items))]

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        return self.score_prepared(self.prepare_scoring(lists))

    def encoder_calls(self, prepared: ScoringPairs) -> list[EncoderCall]:
        """The batches of :meth:`score_prepared`: ``batch_size`` length-sorted pairs cut to the
        longest; masked unless every pair of the batch is that long."""
        layers = int(self.encoder_config().num_hidden_layers)
        lengths, step = prepared.host_length, self.cfg.batch_size
        out = []
        for start in range(0, len(lengths), step):
            batch = lengths[start : start + step]  # sorted: the longest is the last
            width = int(batch[-1])
            out.append(EncoderCall(len(batch), width, layers, masked=bool(batch[0] < width)))
        return out
