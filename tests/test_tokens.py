"""The item token store and the array helpers behind the fast scoring inputs."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from rankers.families.crossjem.packed import canonical_order
from rankers.inputs.tokens import ItemTokens, PaddedItemTokens, distinct_sorted, pad_ragged


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


def _same(got: object, expected: object) -> None:
    for name in ("ids", "lens", "distinct", "first", "n_distinct"):
        a, b = getattr(got, name), getattr(expected, name)
        assert a.dtype == b.dtype == np.int64, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def _random_texts(rng: random.Random, n: int) -> list[str]:
    words = ["a", "bb", "ccc", "dd", "e", "fff", "gg", "hhhh", "i", "jj"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 9))) for _ in range(n)]
    return [*texts, "", texts[0], texts[1]]  # an empty item and repeats


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_flat_store_gives_the_padded_oracles_arrays(chunk: int) -> None:
    """The flat store (ids end to end, offsets per item) against the simple padded store it
    replaced: the same arrays for held items, misses and mixes, over several add() calls whose
    chunks split them anywhere."""
    rng = random.Random(chunk)
    flat, oracle = ItemTokens(_Tokenizer(), 5, chunk=chunk), PaddedItemTokens(_Tokenizer(), 5)
    for _ in range(3):
        batch = _random_texts(rng, 20)
        assert flat.add(batch) == oracle.add(batch)
        assert len(flat) == len(oracle)
        asked = [*rng.sample(batch, 10), "never added text", batch[-3]]
        _same(flat.lookup(asked), oracle.lookup(asked))
        for store in (flat, oracle):  # the ids alone, held or not, as the full lookup's
            held = [t for t in asked if t != "never added text"]
            for texts in (asked, held):
                ids, full = store.lookup_ids(texts), oracle.lookup(texts)
                assert ids.ids.dtype == ids.lens.dtype == np.int64 and len(ids) == len(texts)
                assert np.array_equal(ids.ids, full.ids) and np.array_equal(ids.lens, full.lens)
        assert flat.rows(asked) is None and flat.rows(held) is not None
    assert flat.ids.dtype == flat.distinct.dtype == flat.first.dtype == np.int32
    # no padding held: exactly one int32 per kept token, one int64 offset per item (plus one)
    kept = oracle.lookup(list(oracle._row))
    assert flat.ids.size == kept.lens.sum() and flat.distinct.size == kept.n_distinct.sum()
    assert flat.offsets.size == flat.distinct_offsets.size == len(flat) + 1
    assert flat.nbytes == 4 * (flat.ids.size + 2 * flat.distinct.size) + 8 * 2 * (len(flat) + 1)


def test_flat_store_with_the_real_wordpiece_tokenizer(tiny_bert: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    texts = [
        "how do i reverse a list in python",
        "",
        "unbelievably long words tokenise into many word pieces",
        "list list list reverse",
    ]
    flat, oracle = ItemTokens(tokenizer, 6, chunk=2), PaddedItemTokens(tokenizer, 6)
    flat.add(texts)
    oracle.add(texts)
    asked = [texts[2], "a miss", texts[0], texts[1], texts[3]]
    _same(flat.lookup(asked), oracle.lookup(asked))


def _tokenizer_warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What transformers' tokenizers warn from now on (its logger may print nowhere pytest
    sees, so the messages are taken at the logger)."""
    import transformers.tokenization_utils_base as base

    said: list[str] = []
    monkeypatch.setattr(base.logger, "warning", lambda msg, *args, **kwargs: said.append(msg))
    return said


def test_a_long_item_is_cut_without_the_tokenizers_indexing_warning(
    tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 20,000-word item printed transformers' "will result in indexing errors" when its cut
    was counted, though the harness cuts every item itself: counted and cut, nothing is said;
    the tokenizer asked for its uncut ids directly still warns (the check can fail)."""
    from transformers import AutoTokenizer

    from rankers.inputs.batching import cut_counts, token_ids

    long_item = " ".join(["word"] * 20_000)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    tokenizer.model_max_length = 512  # a real model's limit (the tiny BERT's config sets none)
    said = _tokenizer_warnings(monkeypatch)
    counted = cut_counts(tokenizer, [long_item, "short"], 32)
    assert (counted["cut"], counted["tokens_lost"]) == (1, 20_000 - 32)
    assert [len(ids) for ids in token_ids(tokenizer, [long_item], 32)] == [32]
    assert said == []
    tokenizer([long_item], add_special_tokens=False)
    assert len(said) == 1 and "will result in indexing errors" in said[0]


def test_the_statistics_tokenizer_counts_a_long_item_without_the_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bench.reporting.reports import wordpiece_tokenizer

    tokenize = wordpiece_tokenizer()
    if tokenize is None:
        pytest.skip("MiniLM-L6's tokenizer is not installed")
    said = _tokenizer_warnings(monkeypatch)
    assert len(tokenize(" ".join(["word"] * 20_000))) == 20_000
    assert said == []
