"""The flat BM25 index (no Python object per token, so 10^6 items fit) against rank-bm25's
BM25Okapi, its oracle: bit-identical scores, the same top-k."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from rankers.inputs.lexical import BM25Index, tokenize

HAND = {
    "a": "the cat sat on the mat",
    "b": "the dog",
    "c": "",  # empty: a placeholder token, as rank-bm25 needs
    "d": "the the the cat",
    "e": "dogs and cats; the end",
}


def _oracle(collection: dict[str, str], k1: float, b: float) -> BM25Okapi:
    corpus = [tokenize(t) or ["\x00"] for t in collection.values()]
    return BM25Okapi(corpus, k1=k1, b=b)


def _check(collection: dict[str, str], queries: list[str], k1: float, b: float) -> None:
    flat, oracle = BM25Index(collection, k1=k1, b=b, chunk=3), _oracle(collection, k1, b)
    rng = random.Random(0)
    for query in queries:
        tokens = tokenize(query)
        full = flat.all_scores(tokens)
        assert full.dtype == np.float64
        np.testing.assert_array_equal(full, oracle.get_scores(tokens), err_msg=query)
        rows = rng.sample(range(len(collection)), min(7, len(collection)))
        np.testing.assert_array_equal(
            flat.batch_scores(tokens, rows), np.asarray(oracle.get_batch_scores(tokens, rows))
        )
        order = np.argsort(-oracle.get_scores(tokens), kind="stable")[:5]
        assert flat.top_k(query, 5) == [flat.docids[i] for i in order]


def test_hand_collection_bit_identical_with_a_negative_idf_floored() -> None:
    flat = BM25Index(HAND)
    # "the" is in 3 of 5 documents: log(2.5) - log(3.5) < 0, floored at 0.25 * mean idf
    the = flat.vocab["the"]
    assert flat.idf[the] == pytest.approx(0.25 * _oracle(HAND, 0.9, 0.4).average_idf)
    assert flat.post_tf[flat.post_offsets[the] : flat.post_offsets[the + 1]].tolist() == [
        2,
        1,
        3,
        1,
    ]
    _check(HAND, ["the cat", "dog dog the", "zebra", "", "cats end mat"], 0.9, 0.4)


@pytest.mark.parametrize(("k1", "b"), [(0.9, 0.4), (1.5, 0.75)])
def test_real_collection_bit_identical(shared_data: Path, k1: float, b: float) -> None:
    collection: dict[str, str] = {}
    queries: list[str] = []
    for line in (shared_data / "wikiqa" / "test.jsonl").read_text().splitlines()[:60]:
        row = json.loads(line)
        queries.append(row["query"])
        for text in row["positive"] + row["negative"]:
            collection.setdefault(f"d{len(collection)}", text)
    _check(collection, queries[:15], k1, b)
