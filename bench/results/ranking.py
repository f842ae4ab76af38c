"""Scores -> a run: the harness's tie rule (score descending, then docid ascending) and the run
that encodes it (qid -> docid -> N, N-1, ..., 1).

Apart from :mod:`bench.results.metrics` because a run file is what a scoring job caches: its key
covers this module, while the measures computed from the run are evaluated again when they change.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.data.model import CandidateList

# Run: qid -> docid -> score
Run = dict[str, dict[str, float]]


def rank_order(docids: Sequence[str], scores: Sequence[float] | np.ndarray) -> list[int]:
    """Indices sorted by score descending, then docid ascending (the harness's tie rule)."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) != len(docids):
        raise ValueError(f"{len(scores)} scores for {len(docids)} candidates")
    if np.isnan(scores).any():
        raise ValueError("NaN score: a ranker returned an invalid score")
    return sorted(range(len(docids)), key=lambda i: (-scores[i], docids[i]))


def build_run(lists: Sequence[CandidateList], scores: Sequence[np.ndarray]) -> Run:
    """Ranker scores -> a run whose scores encode the tie-broken order (N, N-1, ..., 1).

    Duplicate docids within a list keep their best-ranked occurrence.
    """
    run: Run = {}
    for cl, s in zip(lists, scores, strict=True):
        order = rank_order(cl.docids, s)
        ranked: dict[str, float] = {}
        for rank, i in enumerate(order):
            ranked.setdefault(cl.candidates[i].docid, float(len(order) - rank))
        run[cl.query.qid] = ranked
    return run
