"""BM25 (rank-bm25 Okapi) with statistics over the dataset's whole candidate collection.

Candidate lists hold 10-100 items; BM25 fitted on one such list degenerates (rank-bm25 floors
negative IDFs at epsilon * mean IDF, which on tiny corpora flattens every common term). So
:meth:`BM25Ranker.index` fits one model on every distinct candidate of the split and scoring looks
candidates up in it.

Tokenization: Unicode lower-casing, then maximal runs of word characters (``\\w+``); no stemming,
no stop-word removal. Parameters default to Anserini's (k1=0.9, b=0.4).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench.data.model import CandidateList, RankingSplit
from rankers.base import SCORE, Ranker, RankerConfig, RankerError, option

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """The documented BM25 tokenization: lower-case word-character runs."""
    return _TOKEN.findall(text.lower())


class BM25Index:
    """rank-bm25 Okapi over a collection, addressable by docid."""

    def __init__(self, collection: dict[str, str], k1: float = 0.9, b: float = 0.4) -> None:
        from rank_bm25 import BM25Okapi

        if not collection:
            raise RankerError("BM25 needs a non-empty collection")
        self.docids = list(collection)
        self.position = {d: i for i, d in enumerate(self.docids)}
        # rank-bm25 divides by zero on an empty document; give such documents a placeholder token
        corpus = [tokenize(collection[d]) or ["\x00"] for d in self.docids]
        self.model = BM25Okapi(corpus, k1=k1, b=b)

    def score(self, query: str, docids: Sequence[str]) -> np.ndarray:
        missing = [d for d in docids if d not in self.position]
        if missing:
            raise RankerError(f"docid {missing[0]!r} is not in the BM25 collection")
        idx = [self.position[d] for d in docids]
        return np.asarray(self.model.get_batch_scores(tokenize(query), idx), dtype=np.float64)

    def top_k(self, query: str, k: int, exclude: set[str] | None = None) -> list[str]:
        """The k best docids for ``query`` over the whole collection (hard-negative mining)."""
        scores = self.model.get_scores(tokenize(query))
        order = np.argsort(-scores, kind="stable")
        out: list[str] = []
        for i in order:
            d = self.docids[i]
            if exclude and d in exclude:
                continue
            out.append(d)
            if len(out) == k:
                break
        return out


@dataclass
class BM25Config(RankerConfig):
    """BM25's parameters have a meaning only in their declared ranges (checked before any work)."""

    k1: float = option(0.9, role=SCORE, min=0, help="term-frequency saturation")
    b: float = option(0.4, role=SCORE, min=0, max=1, help="document-length normalisation")


class BM25Ranker(Ranker[BM25Config]):
    name = "bm25"
    family = "sparse"
    Config = BM25Config
    pointwise = True
    host_step: ClassVar[str | None] = (
        "query tokenisation: lower-case + \\w+ split (items were tokenised in index())"
    )

    def __init__(self, config: BM25Config | None = None, device: str = "cpu") -> None:
        super().__init__(config, device)
        self._index: BM25Index | None = None

    def index(self, split: RankingSplit) -> None:
        self._index = BM25Index(split.collection(), k1=self.config.k1, b=self.config.b)

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        if self._index is None:
            raise RankerError("BM25Ranker.index(split) must be called before score()")
        return [self._index.score(cl.query.text, cl.docids) for cl in lists]

    # -- latency hooks: BM25Index.score in its two halves --------------------------------------
    def prepare_scoring(self, lists: Sequence[CandidateList]) -> list[tuple[list[str], list[str]]]:
        """Each list's query tokens and docids."""
        return [(tokenize(cl.query.text), cl.docids) for cl in lists]

    def score_prepared(self, prepared: list[tuple[list[str], list[str]]]) -> list[np.ndarray]:
        index = self._index
        if index is None:
            raise RankerError("BM25Ranker.index(split) must be called before score()")
        out = []
        for tokens, docids in prepared:
            missing = [d for d in docids if d not in index.position]
            if missing:
                raise RankerError(f"docid {missing[0]!r} is not in the BM25 collection")
            rows = [index.position[d] for d in docids]
            out.append(np.asarray(index.model.get_batch_scores(tokens, rows), dtype=np.float64))
        return out

    def scoring_mode(self) -> str:
        return "pre-tokenised"
