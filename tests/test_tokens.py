"""The item token store and the array helpers behind the fast scoring inputs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rankers.crossjem.packed import canonical_order
from rankers.tokens import ItemTokens, distinct_sorted, pad_ragged


def test_pad_ragged_and_distinct_sorted_hand_example() -> None:
    ids, lens = pad_ragged([[9, 7, 9, 3], [], [5]], 5)
    assert ids.tolist() == [[9, 7, 9, 3, -1], [-1] * 5, [5, -1, -1, -1, -1]]
    assert lens.tolist() == [4, 0, 1]
    distinct, first, n = distinct_sorted(ids)
    # item 0: distinct 3 (first at 3), 7 (at 1), 9 (first at 0, again at 2)
    assert distinct.tolist() == [[3, 7, 9, -1, -1], [-1] * 5, [5, -1, -1, -1, -1]]
    assert first[0, :3].tolist() == [3, 1, 0] and first[2, 0] == 0
    assert n.tolist() == [3, 0, 1]


def test_canonical_order_is_the_tuple_order() -> None:
    rng = random.Random(0)
    for width in (1, 4, 9):
        rows = [
            [rng.randrange(0, 300) for _ in range(rng.randrange(0, width + 1))] for _ in range(60)
        ]
        rows += [rows[3], [], rows[7][:1]]  # duplicates, an empty row, a prefix
        ids, _ = pad_ragged(rows, width)
        expected = sorted(range(len(rows)), key=lambda i: (tuple(rows[i]), i))
        assert canonical_order(ids).tolist() == expected
    big = np.array([[70000, 1], [70000, 0], [5, -1]])  # ids beyond 16 bits: column sort
    assert canonical_order(big).tolist() == [2, 1, 0]


class _Tokenizer:
    """Whitespace 'WordPiece': a word's id is its length * 10 + its first letter's rank."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str], **kwargs: object) -> dict[str, list[list[int]]]:
        self.calls.append(list(texts))
        limit = int(kwargs["max_length"])  # type: ignore[call-overload]
        ids = [[len(w) * 10 + ord(w[0]) - 96 for w in t.split()][:limit] for t in texts]
        return {"input_ids": ids}


def test_item_tokens_store_looks_up_and_tokenises_misses() -> None:
    tok = _Tokenizer()
    store = ItemTokens(tok, max_len=3)
    assert store.add(["a bb", "ccc", "a bb"]) == 2 and len(store) == 2
    assert store.add(["ccc"]) == 0  # already held: no tokenizer call
    assert len(tok.calls) == 1
    got = store.lookup(["ccc", "new word here too", "a bb"])
    assert [got.row(i) for i in range(3)] == [[33], [44, 63, 48], [11, 22]]  # cut at 3
    assert tok.calls[-1] == ["new word here too"]  # only the miss was tokenised
    assert len(store) == 2  # a miss is not kept
    fresh = store.tokenise(["ccc", "new word here too", "a bb"])
    for name in ("ids", "lens", "distinct", "first", "n_distinct"):
        np.testing.assert_array_equal(getattr(got, name), getattr(fresh, name))


@pytest.mark.parametrize("texts", [[], ["only"]])
def test_item_tokens_edge_cases(texts: list[str]) -> None:
    store = ItemTokens(_Tokenizer(), max_len=4)
    assert len(store.lookup(texts)) == len(texts)
