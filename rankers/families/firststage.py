"""The dataset's own first-stage order and scores: the "before re-ranking" row.

Only datasets with a real first stage (a TREC run) have one. MTEB files list positives before
negatives, so their file order would leak the labels: such datasets get an error, not a row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.data.model import CandidateList, RankingSplit
from rankers.base import Ranker, RankerConfig, RankerError


class FirstStageRanker(Ranker[RankerConfig]):
    name = "firststage"
    family = "firststage"
    Config = RankerConfig
    pointwise = True

    def index(self, split: RankingSplit) -> None:
        if any(c.score is None for cl in split.lists for c in cl.candidates):
            raise RankerError(
                f"dataset {split.dataset!r} has no first-stage scores "
                f"(layout {split.layout or '?'}); the firststage row needs a TREC run file"
            )

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        out = []
        for cl in lists:
            if any(c.score is None for c in cl.candidates):
                raise RankerError(f"query {cl.query.qid}: a candidate has no first-stage score")
            out.append(np.array([c.score for c in cl.candidates], dtype=np.float64))
        return out
