"""The lists every ranker is timed on, and their token statistics.

The dataset's own lists are short (WikiQA: at most 30 items), so the benchmark builds lists of
exactly N items with a real first stage - BM25 over the split's whole candidate collection - which
keeps the token overlap between candidates realistic (CROSS-JEM's speed depends on it). The token
statistics of those lists feed the cost model (:mod:`bench.latency.costmodel.flops`), whose
predicted CROSS-JEM speed-up over monoBERT is set beside the measured one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.data.model import Candidate, CandidateList, RankingSplit
from bench.execution.policy import SPEEDUP_PAIRS
from bench.latency.costmodel import flops as efficiency
from bench.results.records import config_hash
from rankers.hooks import latency_parts

if TYPE_CHECKING:
    from rankers.base import Ranker
    from rankers.inputs.lexical import BM25Index


def bm25_lists(
    split: RankingSplit, n: int, *, index: BM25Index | None = None, queries: int | None = None
) -> RankingSplit:
    """The first ``queries`` queries of ``split``, each with its BM25 top ``n`` items (BM25
    order, first-stage score kept) over the split's whole candidate collection."""
    from rankers.inputs.lexical import BM25Index

    collection = split.collection()
    if len(collection) < n:
        raise ValueError(
            f"{split.dataset}/{split.split}: the candidate collection has {len(collection)} "
            f"distinct items, fewer than N={n}; choose N <= {len(collection)}"
        )
    if n < 1:
        raise ValueError(f"N must be >= 1, not {n}")
    index = index or BM25Index(collection)
    lists = []
    for cl in split.lists[:queries]:
        docids = index.top_k(cl.query.text, n)
        scores = index.score(cl.query.text, docids)
        cands = tuple(
            Candidate(d, collection[d], float(s)) for d, s in zip(docids, scores, strict=True)
        )
        lists.append(CandidateList(cl.query, cands))
    keep = {cl.query.qid for cl in lists}
    return dataclasses.replace(
        split,
        lists=lists,
        qrels={q: r for q, r in split.qrels.items() if q in keep},
        checksum=config_hash({"data": split.checksum, "bm25_top": n, "queries": len(lists)}),
        notes=[
            *split.notes,
            f"BM25 top {n} over the split's {len(collection)} distinct items "
            f"for the first {len(lists)} queries",
        ],
    )


@dataclass(frozen=True)
class QueryTokens:
    """WordPiece lengths of one list as the encoder rankers truncate it."""

    query_len: int  # L_q after truncation
    item_lens: tuple[int, ...]  # each item's L_k after truncation
    union: efficiency.UnionStats  # over all N items
    #: item tokens of each CROSS-JEM row (after [CLS] query [SEP]): |U_g| in the paper's union,
    #: shared plus own tokens in the order-keeping layouts
    row_tokens: tuple[int, ...]
    #: merged layouts: item tokens of each row's concat row, which the first ``first_layers``
    #: encoder layers run over
    first_row_tokens: tuple[int, ...] = ()
    first_layers: int = 0


def list_tokens(
    tokenizer: Any, lists: Sequence[CandidateList], ranker: Ranker
) -> list[QueryTokens]:
    """Per list: lengths, token union and the rows ``ranker`` (the one the cost model is about,
    :func:`cost_model_ranker`) packs it into, with its lengths (:func:`token_settings`)."""
    from rankers.inputs.batching import token_ids

    settings, parts = token_settings(ranker), latency_parts(ranker)
    max_item_len = settings["max_item_len"]
    out = []
    for cl in lists:
        q = token_ids(tokenizer, [cl.query.text], settings["max_query_len"])[0]
        items = token_ids(tokenizer, cl.texts, max_item_len)
        rows = parts.row_lengths(tokenizer, q, items)
        if rows is None:
            raise ValueError(f"{ranker.name} packs no rows for the cost model")
        own = len(q) + efficiency.SPECIAL_TOKENS
        out.append(
            QueryTokens(
                query_len=len(q),
                item_lens=tuple(len(ids) for ids in items),
                union=efficiency.union_stats(items, max_item_len),
                row_tokens=tuple(n - own for n in rows.rows),
                first_row_tokens=tuple(n - own for n in rows.first_rows),
                first_layers=rows.first_layers,
            )
        )
    return out


def token_summary(tokens: Sequence[QueryTokens], shape: efficiency.EncoderShape) -> dict[str, Any]:
    """Means over queries of the quantities the paper's complexity analysis uses, plus the cost
    model's totals (its predicted speed-up is the ratio of mean costs)."""
    costs = [
        efficiency.estimate(
            t.query_len, t.item_lens, t.row_tokens, shape, t.first_row_tokens, t.first_layers
        )
        for t in tokens
    ]
    cost = efficiency.total(costs)

    def mean(values: Sequence[float]) -> float:
        return float(np.mean(values)) if len(values) else float("nan")

    return {
        "queries": len(tokens),
        "max_item_len": tokens[0].union.max_item_len if tokens else None,
        "query_len_mean": mean([t.query_len for t in tokens]),
        "item_len_mean": mean([k for t in tokens for k in t.item_lens]),
        "item_tokens_mean": mean([t.union.item_tokens for t in tokens]),  # the paper's m
        "union_mean": mean([t.union.union for t in tokens]),  # the paper's N_u
        "union_max": max((t.union.union for t in tokens), default=0),
        "groups_mean": mean([len(t.row_tokens) for t in tokens]),
        # lists whose items do not fit one row: items in different rows never see each other
        "groups_max": max((len(t.row_tokens) for t in tokens), default=0),
        "lists_split": sum(1 for t in tokens if len(t.row_tokens) > 1),
        "compression_mean": mean([t.union.compression for t in tokens]),
        "realised_compression_mean": mean([t.union.realised_compression for t in tokens]),
        "monobert_tokens_per_query": cost.monobert_tokens / max(len(tokens), 1),
        "crossjem_tokens_per_query": cost.crossjem_tokens / max(len(tokens), 1),
        "encoder": dataclasses.asdict(shape),
        "cost": cost.to_dict(),
    }


def cost_model_ranker(dataset: str, options: Mapping[str, Mapping[str, Any]]) -> Ranker:
    """The ranker the paper's cost model is about - the fast side of the paper's speed-up pair
    (:data:`~bench.execution.policy.SPEEDUP_PAIRS`, CROSS-JEM) - configured as on ``dataset``
    with ``options`` (per canonical ranker name), whichever rankers are timed; creating it loads
    nothing."""
    from bench.execution.ranker_settings import ranker_options
    from rankers import get_ranker_class

    name = SPEEDUP_PAIRS[""][1]
    cls = get_ranker_class(name)
    return cls(cls.Config.from_options(ranker_options(name, dataset, options.get(name))))


def token_settings(ranker: Ranker) -> dict[str, Any]:
    """What the cost model reads of ``ranker`` (:meth:`~rankers.hooks.LatencyParts.
    cost_model_settings`: L_q, L_k, L_u, row layout and model; monoBERT shares L_q and L_k)."""
    settings = latency_parts(ranker).cost_model_settings()
    if settings is None:
        raise ValueError(f"the paper's cost model is not about ranker {ranker.name}")
    return settings


def encoder_shape_and_tokenizer(model: str) -> tuple[efficiency.EncoderShape, Any]:
    """The cost model's encoder shape and the tokenizer of ``model`` (alias, id or folder)."""
    from transformers import AutoConfig, AutoTokenizer

    from rankers.io.models import resolve_model

    path = resolve_model(model).path
    shape = efficiency.EncoderShape.from_config(AutoConfig.from_pretrained(path))
    return shape, AutoTokenizer.from_pretrained(path)
