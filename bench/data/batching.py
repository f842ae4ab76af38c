"""Candidate lists in calls of several queries, each list whole.

Scoring a split (:mod:`bench.execution.scoring`) and timing a ranker (:mod:`bench.latency.protocol`)
cut lists into calls the same way, so that a measured call is the call a run makes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from bench.data.model import CandidateList


def batches(lists: Sequence[CandidateList], size: int) -> Iterator[list[CandidateList]]:
    """Whole candidate lists, ``size`` queries at a time (a list is never split)."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, not {size}")
    for i in range(0, len(lists), size):
        yield list(lists[i : i + size])
