"""Shared toy models for the tests: a tiny random BERT."""

from __future__ import annotations

from pathlib import Path


def write_tiny_bert(
    path: Path,
    tokenizer_from: str = "minilm-l6",
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    seed: int = 0,
) -> Path:
    """Save a small randomly initialised BERT with a real tokenizer (fast tests)."""
    from rankers.models import write_random_bert

    return write_random_bert(
        path, hidden, layers, heads, 4 * hidden, seed, tokenizer_from, pipeline=False
    )
