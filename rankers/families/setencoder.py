"""Set-Encoder (Schlatt et al., ECIR 2025): monoBERT's rows that see each other's first token.

Each candidate is its own row ``[CLS] query [SEP] item [SEP]``, exactly monoBERT's pair. At every
encoder layer each row's first token, its ``[CLS]``, also attends to the ``[CLS]`` tokens of the
other candidates of the same query (*inter-passage attention*); every other token attends within
its own row only. The other rows' first tokens enter without any position of their own (each is
at position 0 of its row, and the keys they add are not ordered), so permuting the candidates
permutes the scores and changes nothing else. The score is a linear head on the last layer's
``[CLS]`` state, as monoBERT's ``pooling=cls``.

The interaction token is the ``[CLS]`` token, not an added ``[INT]`` token (the paper's and
lightning-ir's option): a new token's embedding would start random and be learnt from a few
hundred training lists here (wikiqa, semeval16b); with ``[CLS]`` the row is monoBERT's row token for
token, so the ranker costs what monoBERT costs (no extra token per row) and a list of one
candidate is scored exactly as monoBERT scores that pair with the same weights (a test holds
this).

Two implementations of the same layer:

* :func:`simple_layer` (the oracle): every row's keys and values are concatenated with the first
  tokens' keys and values of its list, and one explicit additive mask lets only the first token
  see the extra keys, and not its own (it is already in its row);
* :func:`fast_layer` (what training and scoring run): rows sorted by length in chunks of
  ``batch_size`` cut to their own width (monoBERT's batching), each chunk's attention by
  ``scaled_dot_product_attention`` as monoBERT's; then only the first token's attention is done
  again over its row's keys plus the other first tokens of its list, the lists laid out as
  (lists, items) so the extra scores are one batched product per layer. A test compares the two.

The cost model (:meth:`SetEncoderRanker.encoder_calls`) declares monoBERT's calls (one per
chunk). The inter-passage part it leaves out is, per layer and head, a ``rows x (width + N)``
score row for first tokens: at N=700 and 64-token rows about 0.5% of the encoder's FLOPs,
growing as N^2 over the items' N.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bench.data.model import CandidateList
from rankers.base import RUNTIME, RankerError, inherit_option, option
from rankers.compute.precision import float32_logits
from rankers.families.encoder import EncoderConfig, EncoderRanker
from rankers.families.monobert import pair_matrix
from rankers.hooks import EncoderCall
from rankers.inputs.batching import check_positions, list_arrays, scatter_to_lists
from rankers.inputs.transfer import upload
from rankers.trainconfig import ListTrainingConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel

QueryItems = tuple[str, Sequence[str]]


@dataclasses.dataclass
class SetEncoderConfig(EncoderConfig):
    # monoBERT's fastest batch on a CPU (docs/results.md): larger chunks pad more
    batch_size: int = option(
        32,
        role=RUNTIME,
        min=1,
        help="rows (one per candidate) per length-sorted chunk of a pass; the chunks of a pass "
        "run layer by layer together, as the first tokens of a list see each other",
    )
    batch_queries: int = option(
        8, role=RUNTIME, min=1, help="lists per scoring pass (all rows of a list are in one pass)"
    )
    # a list's rows must be in one pass; a default step (8 lists x 64 items) in one pass holds
    # about 5 GB on a CPU, and splitting it costs a pass without a graph (the micro-batch rule)
    train_micro_items: int = inherit_option(
        ListTrainingConfig,
        "train_micro_items",
        512,
        help="most items one forward/backward pass of a training step holds: a larger step is "
        "split into micro-batches of whole lists whose gradients add up (0: the whole step)",
    )
    # layers run one by one in torch: the exported whole-encoder graphs cannot take the
    # inter-passage keys
    runtime: str = inherit_option(
        EncoderConfig,
        "runtime",
        "torch",
        choices=("torch",),
        help="what runs the encoder: torch only (its layers run one by one, each adding the "
        "other candidates' first tokens, which an exported whole-encoder graph cannot take)",
    )
    dtype: str = inherit_option(
        EncoderConfig,
        "dtype",
        "auto",
        help="scoring precision, not part of the trained model: weights cast once to it (auto: "
        "bf16 on a GPU with native bf16, else fp16; fp32 on CPU), run by torch",
    )
    #: listwise by default, as CROSS-JEM's: the ranker sees the whole list
    loss: str = inherit_option(EncoderConfig, "loss", "listnet")


@dataclasses.dataclass
class Chunk:
    """Rows ``[r0, r1)`` of a length-sorted pass, cut to ``width`` tokens; ``full``: every row
    is that long (no padding mask)."""

    r0: int
    r1: int
    width: int
    full: bool


@dataclasses.dataclass
class SetBatch:
    """The rows of a pass on the device, sorted by length: ids, each row's length and query end,
    each row's list and place in it (``list_index``, ``item_index``), the chunks; ``order``
    maps a sorted row to its place in the lists' flat order (host)."""

    input_ids: Tensor
    length: Tensor
    query_end: Tensor
    list_index: Tensor
    item_index: Tensor
    lengths: Tensor
    chunks: list[Chunk]
    n_items: list[int]
    order: np.ndarray


def chunk_rows(lengths: np.ndarray, size: int) -> list[Chunk]:
    """Consecutive chunks of ``size`` rows of length-sorted ``lengths``, each cut to its last
    (longest) row."""
    out = []
    for r0 in range(0, len(lengths), size):
        r1 = min(r0 + size, len(lengths))
        width = int(lengths[r1 - 1])
        out.append(Chunk(r0, r1, width, bool(lengths[r0] == width)))
    return out


def other_first(
    item_index: Tensor, lengths: Tensor, list_index: Tensor, n_max: int | None = None
) -> Tensor:
    """(rows, N_max) bool: which items of its list a row's first token attends to (every item
    of the list but itself). ``n_max``: the longest list, known on the host (None: read from
    ``lengths`` on the device)."""
    if n_max is None:
        n_max = int(lengths.max()) if lengths.numel() else 0
    slots = torch.arange(n_max, device=item_index.device)[None, :]
    return (slots < lengths[list_index, None]) & (slots != item_index[:, None])


def heads(attn: nn.Module, hidden: Tensor, name: str) -> Tensor:
    """Projection ``name`` (query, key, value) of ``hidden`` (rows, width, d) as (rows, heads,
    width, head_dim)."""
    size = int(cast(Any, attn).attention_head_size)
    proj = cast(nn.Linear, getattr(attn, name))(hidden)
    return proj.view(*hidden.shape[:2], -1, size).transpose(1, 2)


def finish_layer(layer: nn.Module, context: Tensor, hidden: Tensor) -> Tensor:
    """The rest of a BERT layer after its attention: output projection, residual and norm, then
    the feed-forward block. ``context``: (rows, heads, width, head_dim)."""
    merged = context.transpose(1, 2).reshape(hidden.shape)
    attention = cast(Any, layer).attention.output(merged, hidden)
    return cast(Any, layer).feed_forward_chunk(attention)


def additive(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """0 where ``mask`` is True, the dtype's lowest value elsewhere."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
        ~mask, torch.finfo(dtype).min
    )


def simple_layer(
    layer: nn.Module,
    hidden: Tensor,
    valid: Tensor,
    list_index: Tensor,
    item_index: Tensor,
    lengths: Tensor,
) -> Tensor:
    """One layer over all rows padded to one width (the oracle): each row's keys/values are its
    own followed by the first tokens' keys/values of the items of its list, in list order; an
    explicit mask lets only position 0 see those, and not its own item's."""
    attn = cast(Any, layer).attention.self
    q, k, v = (heads(attn, hidden, name) for name in ("query", "key", "value"))
    rows, n_heads, width, size = q.shape
    n_max = int(lengths.max())
    first_k = k.new_zeros(len(lengths), n_max, n_heads, size)
    first_k[list_index, item_index] = k[:, :, 0]
    first_v = v.new_zeros(len(lengths), n_max, n_heads, size)
    first_v[list_index, item_index] = v[:, :, 0]
    keys = torch.cat([k, first_k[list_index].transpose(1, 2)], dim=2)
    values = torch.cat([v, first_v[list_index].transpose(1, 2)], dim=2)
    extra = torch.zeros(rows, width, n_max, dtype=torch.bool, device=hidden.device)
    extra[:, 0] = other_first(item_index, lengths, list_index)
    allowed = torch.cat([valid[:, None, :].expand(rows, width, width), extra], dim=2)
    scores = q @ keys.transpose(-1, -2) * float(attn.scaling)
    probs = attn.dropout(torch.softmax(scores + additive(allowed, scores.dtype)[:, None], -1))
    return finish_layer(layer, probs @ values, hidden)


def fast_layer(
    layer: nn.Module,
    hidden: list[Tensor],
    valid: list[Tensor | None],
    list_index: Tensor,
    item_index: Tensor,
    lengths: Tensor,
    n_max: int | None = None,
) -> list[Tensor]:
    """One layer over length-sorted chunks (``hidden``: (rows, width, d) each; ``valid``: its
    padding mask, None for a full chunk): each chunk's attention by SDPA, then the first tokens'
    attention redone over their row plus the other first tokens of their list. ``n_max``: the
    longest list, from the host (scoring then reads nothing back; None: read from ``lengths``)."""
    attn = cast(Any, layer).attention.self
    drop = float(attn.dropout.p) if attn.training else 0.0
    scale = float(attn.scaling)
    parts = []
    for h, ok in zip(hidden, valid, strict=True):
        q, k, v = (heads(attn, h, name) for name in ("query", "key", "value"))
        mask = None if ok is None else ok[:, None, None, :]
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)
        row = torch.einsum("rhd,rhld->rhl", q[:, :, 0], k) * scale  # first token's row scores
        if ok is not None:
            row = row + additive(ok, row.dtype)[:, None]
        parts.append((context, row, q[:, :, 0], k[:, :, 0], v))
    # the lists laid out (lists, items, heads, head_dim): first-to-first scores, one product
    n_lists = len(lengths)
    if n_max is None:
        n_max = int(lengths.max())
    q0, k0 = (torch.cat([p[i] for p in parts]) for i in (2, 3))
    v0 = torch.cat([p[4][:, :, 0] for p in parts])
    at = (list_index, item_index)
    grid = q0.new_zeros(n_lists, n_max, *q0.shape[1:])
    q_list, k_list, v_list = (grid.index_put(at, t) for t in (q0, k0, v0))
    group = torch.einsum("bihd,bjhd->bihj", q_list, k_list)[at] * scale  # (rows, heads, N_max)
    others = other_first(item_index, lengths, list_index, n_max)
    group = group + additive(others, group.dtype)[:, None]
    probs, start = [], 0
    for context, row, *_ in parts:
        end = start + len(context)
        joint = attn.dropout(torch.softmax(torch.cat([row, group[start:end]], dim=-1), -1))
        probs.append(joint)
        start = end
    widths = [p[1].shape[-1] for p in parts]
    group_probs = torch.cat([p[:, :, w:] for p, w in zip(probs, widths, strict=True)])
    from_others = torch.einsum(
        "bihj,bjhd->bihd",
        group_probs.new_zeros(n_lists, n_max, *group_probs.shape[1:]).index_put(at, group_probs),
        v_list,
    )[at]
    out, start = [], 0
    for (context, _, _, _, v), p, w, h in zip(parts, probs, widths, hidden, strict=True):
        end = start + len(context)
        first = torch.einsum("rhl,rhld->rhd", p[:, :, :w], v) + from_others[start:end]
        context = torch.cat([first[:, :, None], context[:, :, 1:]], dim=2)
        out.append(finish_layer(layer, context, h))
        start = end
    return out


class SetEncoderModule(nn.Module):
    """The encoder run layer by layer with inter-passage attention, and a linear head on each
    row's last ``[CLS]`` state."""

    def __init__(self, encoder: PreTrainedModel, dropout: float) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(int(encoder.config.hidden_size), 1)

    def layers(self) -> nn.ModuleList:
        """The transformer layers of the BERT-style encoder."""
        from rankers.families.crossjem.model import encoder_layers

        return encoder_layers(self.encoder)

    def embed(self, ids: Tensor, length: Tensor, query_end: Tensor) -> tuple[Tensor, Tensor]:
        """Embeddings of rows ``ids`` (positions along the row, token types from the query end)
        and their padding mask."""
        positions = torch.arange(ids.shape[1], device=ids.device)[None, :]
        valid = positions < length[:, None]
        types = (positions >= query_end[:, None]) & valid
        embeddings = cast(nn.Module, self.encoder.embeddings)
        return embeddings(input_ids=ids, token_type_ids=types.long()), valid

    def head(self, first: Tensor) -> Tensor:
        """float32 logits from the last ``[CLS]`` states (rows, d)."""
        return float32_logits(self.classifier, self.dropout(first.float()))

    def forward(self, batch: SetBatch) -> Tensor:
        """float32 logits of the batch's rows in their sorted order (:func:`fast_layer`)."""
        if not batch.chunks:  # only empty lists
            return torch.zeros(0, device=batch.input_ids.device)
        hidden, valid = [], []
        for c in batch.chunks:
            h, ok = self.embed(
                batch.input_ids[c.r0 : c.r1, : c.width],
                batch.length[c.r0 : c.r1],
                batch.query_end[c.r0 : c.r1],
            )
            hidden.append(h)
            valid.append(None if c.full else ok)
        index = (batch.list_index, batch.item_index, batch.lengths)
        for layer in self.layers():
            hidden = fast_layer(layer, hidden, valid, *index, n_max=max(batch.n_items))
        return self.head(torch.cat([h[:, 0] for h in hidden]))

    def simple(self, batch: SetBatch) -> Tensor:
        """:meth:`forward` by :func:`simple_layer` over all rows at one width (the oracle)."""
        hidden, valid = self.embed(batch.input_ids, batch.length, batch.query_end)
        for layer in self.layers():
            hidden = simple_layer(
                layer, hidden, valid, batch.list_index, batch.item_index, batch.lengths
            )
        return self.head(hidden[:, 0])


class SetEncoderRanker(EncoderRanker[SetEncoderConfig]):
    """monoBERT's rows whose first tokens attend to each other's across the list."""

    name: ClassVar[str] = "set-encoder"
    family: ClassVar[str] = "joint"
    Config = SetEncoderConfig
    pointwise: ClassVar[bool] = False

    def _check_config(self, config: Any) -> None:
        longest = self.cfg.max_query_len + self.cfg.max_item_len + 3
        check_positions(config, longest, "set-encoder: max_query_len + max_item_len + 3")
        if getattr(config, "model_type", "bert") not in ("bert",):
            raise RankerError(
                f"set-encoder runs a BERT encoder's layers one by one; model type "
                f"{config.model_type!r} is not BERT"
            )

    def _build_module(self, encoder: PreTrainedModel) -> nn.Module:
        return SetEncoderModule(encoder, dropout=self.cfg.dropout)

    # -- inputs --------------------------------------------------------------------------------
    def pack(self, lists: Sequence[QueryItems]) -> SetBatch:
        """The rows of ``lists`` (monoBERT's pairs, :func:`~rankers.families.monobert.pair_matrix`)
        sorted by length in chunks of ``batch_size``, on the device in one copy."""
        sp = self.special
        queries = self.query_tokens([q for q, _ in lists])
        items = [self.lookup_item_ids(texts) for _, texts in lists]
        matrix, length, query_end = pair_matrix(queries, items, sp.cls, sp.sep, sp.pad)
        n_items = [len(texts) for _, texts in lists]
        order = np.argsort(length, kind="stable")
        where = list_arrays(n_items)
        tensors = upload(
            {
                "input_ids": matrix[order],
                "length": length[order],
                "query_end": query_end[order],
                "list_index": where["list_index"][order],
                "item_index": where["item_index"][order],
                "lengths": where["lengths"],
            },
            self.device,
        )
        chunks = chunk_rows(length[order], self.cfg.batch_size)
        return SetBatch(**tensors, chunks=chunks, n_items=n_items, order=order)

    def prepare(self, lists: Sequence[QueryItems]) -> SetBatch:
        """:meth:`pack` for :meth:`forward` (training)."""
        return self.pack(lists)

    def forward(self, batch: SetBatch, module: nn.Module | None = None) -> tuple[Tensor, Tensor]:
        """Logits (B, N_max) and item mask, as monoBERT's and CROSS-JEM's.

        ``module``: a wrapper of :attr:`module` to call instead (the trainer's DDP model)."""
        logits = (module if module is not None else self.module)(batch)
        return scatter_to_lists(
            logits, batch.list_index, batch.item_index, batch.n_items, batch.lengths
        )

    # -- scoring -------------------------------------------------------------------------------
    host_step: ClassVar[str | None] = (
        "query WordPiece; item ids from the index-time store (WordPiece in end-to-end mode); "
        "[CLS] q [SEP] k [SEP] id matrix with NumPy, sorted by length into chunks; one "
        "host-to-device copy per batch of lists"
    )

    def prepare_scoring(self, lists: Sequence[CandidateList]) -> list[SetBatch]:
        step = self.cfg.batch_queries
        return [
            self.pack([(cl.query.text, cl.texts) for cl in lists[i : i + step]])
            for i in range(0, len(lists), step)
        ]

    def score_prepared(self, prepared: list[SetBatch]) -> list[np.ndarray]:
        module = self.scoring_module()
        with self.inference():
            values = [module(batch).float() for batch in prepared]
            host = torch.cat(values).cpu().numpy() if values else np.zeros(0, np.float32)
        out: list[np.ndarray] = []
        start = 0
        for batch in prepared:
            flat = np.zeros(len(batch.order), dtype=np.float32)
            flat[batch.order] = host[start : start + len(batch.order)]
            start += len(batch.order)
            out.extend(np.split(flat, np.cumsum(batch.n_items)[:-1]))
        return out

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        return self.score_prepared(self.prepare_scoring(lists))

    def encoder_calls(self, prepared: list[SetBatch]) -> list[EncoderCall]:
        """monoBERT's calls: one per chunk of ``batch_size`` length-sorted rows cut to the
        longest, masked unless every row is that long (the inter-passage scores are left out:
        see the module's docstring)."""
        layers = int(self.encoder_config().num_hidden_layers)
        return [
            EncoderCall(c.r1 - c.r0, c.width, layers, masked=not c.full)
            for batch in prepared
            for c in batch.chunks
        ]
