"""The dataset's own first-stage order: the "before re-ranking" row.

Uses the first-stage scores when the dataset has them (TREC runs); otherwise the candidates' file
order, as descending scores. For MTEB files that order is positives first, so the row is only
meaningful for datasets with a real first stage - results say which was used.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.data.model import CandidateList
from rankers.base import Ranker, RankerConfig


class FirstStageRanker(Ranker):
    name = "firststage"
    family = "firststage"
    Config = RankerConfig
    pointwise = True

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        out = []
        for cl in lists:
            if all(c.score is not None for c in cl.candidates):
                out.append(np.array([c.score for c in cl.candidates], dtype=np.float64))
            else:
                out.append(np.arange(len(cl), 0, -1, dtype=np.float64))
        return out
