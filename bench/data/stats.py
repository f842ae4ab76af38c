"""Size and length statistics of a split (``bench datasets``).

Lengths are in whitespace words and, given a tokenizer, in its tokens. The size of each list's
token union is reported too: that is what CROSS-JEM's ``union_len`` (L_u) must hold. Beside it
the paper's motivation table (b): a list's item tokens (m, the sum of its items' lengths), its
union size (N_u) and their ratio m / N_u (the compression C of the cost model): how much a list's
items repeat one another, hence how much CROSS-JEM's union saves and how much order it drops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.data.model import RankingSplit

Tokenizer = Callable[[str], Sequence[Any]]


def _summary(values: Sequence[int], keys: Sequence[str] = ("mean", "p50", "p95", "max")) -> dict:
    """min and max keep the values' type (counts stay integers); the rest are floats."""
    arr = np.asarray(values) if len(values) else np.zeros(1, dtype=np.int64)
    every = {
        "min": arr.min().item(),
        "mean": float(arr.mean()),
        "p50": float(np.percentile(arr, 50)),
        "p95": float(np.percentile(arr, 95)),
        "max": arr.max().item(),
    }
    return {k: every[k] for k in keys}


#: the encoder rankers' default item limit (``max_item_len``): what ``item_cut`` counts against
ITEM_LIMIT = 32


def cut_summary(lengths: Sequence[int], limit: int) -> dict[str, Any]:
    """Texts longer than ``limit`` tokens, and the share of all tokens a cut to it drops."""
    total = sum(lengths)
    lost = sum(n - limit for n in lengths if n > limit)
    return {
        "limit": limit,
        "cut": sum(1 for n in lengths if n > limit),
        "of": len(lengths),
        "tokens_lost_share": lost / total if total else 0.0,
    }


def split_stats(
    split: RankingSplit,
    tokenizer: Tokenizer | None = None,
    unit: str = "wordpiece",
    item_limit: int = ITEM_LIMIT,
) -> dict[str, Any]:
    """Queries, candidates, candidates and positives per query, text lengths, and the queries
    whose every candidate is relevant (how many, and whether they were kept or dropped).

    ``query_length``, ``candidate_length``, ``list_tokens`` (the sum of a list's item lengths)
    and ``union_length`` (distinct tokens per list) map a unit to mean/p50/p95/max: ``"words"``
    (whitespace) always, ``unit`` when a tokenizer is given. ``compression`` maps a unit to mean
    list tokens / mean union size (the paper's m / N_u, table (b)), over whole items; ``item_cut``
    maps a unit to how many distinct candidates exceed ``item_limit`` (the encoders cut them
    there) and the share of their tokens the cut drops.
    """
    queries = [cl.query.text for cl in split.lists]
    candidates = [c.text for cl in split.lists for c in cl.candidates]
    positives = [
        sum(split.qrels.get(cl.query.qid, {}).get(d, 0) >= split.relevance_level for d in cl.docids)
        for cl in split.lists
    ]
    tokenizers: dict[str, Tokenizer] = {"words": str.split}
    if tokenizer is not None:
        tokenizers[unit] = tokenizer
    lengths: dict[str, dict[str, Any]] = {"query": {}, "candidate": {}, "list": {}, "union": {}}
    compression: dict[str, float] = {}
    item_cut: dict[str, dict[str, Any]] = {}
    for name, tok in tokenizers.items():
        tokens = {t: list(tok(t)) for t in {*queries, *candidates}}
        item_cut[name] = cut_summary([len(tokens[t]) for t in set(candidates)], item_limit)
        lengths["query"][name] = _summary([len(tokens[t]) for t in queries])
        lengths["candidate"][name] = _summary([len(tokens[t]) for t in candidates])
        lengths["list"][name] = _summary(
            [sum(len(tokens[t]) for t in cl.texts) for cl in split.lists]
        )
        lengths["union"][name] = _summary(
            [len({x for t in cl.texts for x in tokens[t]}) for cl in split.lists]
        )
        union_mean = lengths["union"][name]["mean"]
        compression[name] = lengths["list"][name]["mean"] / union_mean if union_mean else 0.0
    return {
        "dataset": split.dataset,
        "split": split.split,
        "queries": len(split.lists),
        "candidates": split.n_candidates,
        "candidates_per_query": _summary([len(cl) for cl in split.lists], ("min", "mean", "max")),
        "positives_per_query": _summary(positives, ("mean",)),
        "query_length": lengths["query"],
        "candidate_length": lengths["candidate"],
        "list_tokens": lengths["list"],
        "union_length": lengths["union"],
        "compression": compression,
        "item_cut": item_cut,
        "dropped": dict(split.dropped),
        "all_relevant": split.all_relevant_summary(),
    }
