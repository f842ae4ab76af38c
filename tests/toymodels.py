"""Shared toy models for the tests: a tiny random BERT and a ranker that counts its calls."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.data.model import CandidateList
from rankers.base import Ranker


def write_tiny_bert(
    path: Path,
    tokenizer_from: str = "minilm-l6",
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    seed: int = 0,
) -> Path:
    """Save a small randomly initialised BERT with a real tokenizer (fast tests)."""
    from rankers.io.models import write_random_bert

    return write_random_bert(
        path, hidden, layers, heads, 4 * hidden, seed, tokenizer_from, pipeline=False
    )


class CountingRanker(Ranker):
    """Scores by candidate position (first highest) and records every call, to see which calls
    were made and timed: ``calls`` holds each call's qids; ``log`` gets ``tag`` + the call's
    first qid (share one log between rankers to see the order they were called in)."""

    name = "counting"
    family = "sparse"

    def __init__(self, tag: str = "", log: list[str] | None = None) -> None:
        super().__init__()
        self.calls: list[list[str]] = []
        self.tag, self.log = tag, log if log is not None else []

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        self.calls.append([cl.query.qid for cl in lists])
        self.log.append(self.tag + lists[0].query.qid)
        return [np.arange(len(cl), 0, -1, dtype=float) for cl in lists]
