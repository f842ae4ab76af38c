"""Rows of token ids into padded arrays, and per-item values back into lists.

The helpers every encoder family shares to batch its inputs (monoBERT's pairs, CROSS-JEM's packed
rows, DPR's and ColBERT's texts, RankT5's pairs): special token ids, WordPiece ids cut to a
length, right-padding into int64 arrays, length-bucketed pointwise scoring, and the scatter of
per-item values into (lists x items) tensors with their mask. Apart from the encoder ranker base
(:mod:`rankers.families.encoder`), so a family that uses only these helpers is not re-keyed when
that base changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rankers.errors import RankerError


@dataclasses.dataclass(frozen=True)
class SpecialIds:
    cls: int
    sep: int
    pad: int


def special_ids(tokenizer: Any) -> SpecialIds:
    """[CLS], [SEP] and [PAD] ids; an encoder without them cannot be used here."""
    ids = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
    if any(i is None for i in ids):
        raise RankerError(
            f"tokenizer {tokenizer.name_or_path!r} lacks [CLS]/[SEP]/[PAD] tokens (got {ids}); "
            "use a BERT-style encoder"
        )
    return SpecialIds(*ids)


def token_ids(tokenizer: Any, texts: Sequence[str], max_len: int) -> list[list[int]]:
    """WordPiece ids without special tokens, each cut to ``max_len``."""
    if not texts:
        return []
    enc = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=max_len)
    return [list(ids) for ids in enc["input_ids"]]


def cut_counts(tokenizer: Any, texts: Sequence[str], max_len: int) -> dict[str, Any]:
    """How many of ``texts`` exceed ``max_len`` WordPiece tokens (no special tokens) and the
    share of all their tokens that the cut drops. Counted uncut, without the tokenizer's warning
    that a sequence over its model's limit "will result in indexing errors": the harness cuts
    every text itself (:func:`token_ids`), so none reaches the model whole."""
    enc = tokenizer(list(texts), add_special_tokens=False, verbose=False)
    lengths = [len(ids) for ids in enc["input_ids"]]
    cut = [n for n in lengths if n > max_len]
    total = sum(lengths)
    return {
        "max_len": max_len,
        "texts": len(lengths),
        "cut": len(cut),
        "tokens": total,
        "tokens_lost": sum(n - max_len for n in cut),
        "share_lost": sum(n - max_len for n in cut) / total if total else 0.0,
    }


def pad_array(rows: Sequence[Sequence[int]], value: int) -> np.ndarray:
    """Right-pad integer rows into one (len(rows), longest) int64 array (host, for upload)."""
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), value, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def pad_rows(rows: Sequence[Sequence[int]], value: int) -> Tensor:
    """Right-pad integer rows into one (len(rows), longest) tensor."""
    return torch.from_numpy(pad_array(rows, value))


def bucketed_scores(
    rows: Sequence[Any],
    list_sizes: Sequence[int],
    batch_size: int,
    score_batch: Callable[[list[Any]], Tensor],
    length: Callable[[Any], int] = len,
) -> list[np.ndarray]:
    """Score pointwise rows in length-sorted batches and split the scores back per list.

    Similar lengths share a batch, so padding stays small (a fair, fast pointwise baseline); the
    stable sort keeps batching deterministic. ``score_batch`` gets the rows of one batch;
    ``length`` gives a row's token count.
    """
    order = sorted(range(len(rows)), key=lambda i: length(rows[i]))
    flat = np.zeros(len(rows), dtype=np.float32)
    # the batches' scores stay on the device and come to the host in one copy per call
    parts = [
        score_batch([rows[i] for i in order[start : start + batch_size]]).float().reshape(-1)
        for start in range(0, len(order), batch_size)
    ]
    if parts:
        flat[order] = torch.cat(parts).cpu().numpy()
    bounds = np.cumsum([0, *list_sizes])
    return [flat[bounds[k] : bounds[k + 1]].copy() for k in range(len(list_sizes))]


def check_positions(config: Any, longest: int, formula: str) -> None:
    """Fail early when the longest input row would not fit the position embeddings of the
    encoder whose config (``transformers.PretrainedConfig``) is ``config``."""
    limit = int(getattr(config, "max_position_embeddings", longest))
    if longest > limit:
        raise RankerError(f"{formula} = {longest} exceeds the encoder's {limit} positions")


def scatter_to_lists(
    values: Tensor,
    list_index: Tensor,
    item_index: Tensor,
    n_items: Sequence[int],
    lengths: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Put per-item values back into (B, N_max) padded lists plus the boolean item mask.

    ``lengths``: ``n_items`` already on the values' device (uploaded with the batch by
    :func:`upload`), so a training step makes no copy of its own; without it they are copied."""
    n_max = max(n_items, default=0)
    out = values.new_zeros((len(n_items), n_max))
    out = out.index_put((list_index, item_index), values)
    if lengths is None:
        lengths = torch.as_tensor(list(n_items), dtype=torch.long).to(values.device)
    mask = torch.arange(n_max, device=values.device)[None, :] < lengths[:, None]
    return out, mask


def list_arrays(
    pairs_per_list: Sequence[int],
) -> dict[str, np.ndarray]:
    """``list_index``, ``item_index`` (each pair's list and place in it) and ``lengths`` of lists
    with ``pairs_per_list`` pairs: the scatter arrays a training batch uploads with its ids."""
    sizes = np.asarray(pairs_per_list, dtype=np.int64)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    return {
        "list_index": np.repeat(np.arange(len(sizes), dtype=np.int64), sizes),
        "item_index": np.arange(int(sizes.sum()), dtype=np.int64) - starts,
        "lengths": sizes,
    }
