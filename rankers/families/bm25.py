"""BM25 (rank-bm25 Okapi) with statistics over the dataset's whole candidate collection.

Candidate lists hold 10-100 items; BM25 fitted on one such list degenerates (rank-bm25 floors
negative IDFs at epsilon * mean IDF, which on tiny corpora flattens every common term). So
:meth:`BM25Ranker.index` fits one model on every distinct candidate of the split and scoring looks
candidates up in it.

The index and its tokenization live in :mod:`rankers.inputs.lexical` (DPR's negative mining and
the list trainer use it too). Parameters default to Anserini's (k1=0.9, b=0.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench.data.model import CandidateList, RankingSplit
from rankers.base import SCORE, Ranker, RankerConfig, RankerError, option
from rankers.hooks import LatencyParts
from rankers.inputs.lexical import BM25Index, tokenize


@dataclass
class BM25Config(RankerConfig):
    """BM25's parameters have a meaning only in their declared ranges (checked before any work)."""

    k1: float = option(0.9, role=SCORE, min=0, help="term-frequency saturation")
    b: float = option(0.4, role=SCORE, min=0, max=1, help="document-length normalisation")


class BM25Ranker(Ranker[BM25Config], LatencyParts):
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
        return [index.batch_scores(tokens, index.rows(docids)) for tokens, docids in prepared]

    def scoring_mode(self) -> str:
        return "pre-tokenised"
