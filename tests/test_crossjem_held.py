"""CROSS-JEM's union scoring step - the host's half (:func:`hold_lists`) and the device's
(:func:`expand`) - against the oracle: the simple array steps of ``pack_lists(...,
reference=True)`` uploaded, bit for bit, on the adversarial lists of the fast packer's test, on
real wikiqa lists, and through the ranker (scores equal to the packed path's)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_crossjem_fastpack import CLS, PAD_ID, SEP, _adversarial

from bench.data.model import Candidate, CandidateList
from rankers.families.crossjem.held import expand, hold_lists, takes_held_rows
from rankers.families.crossjem.inputs import UNION, Layout
from rankers.families.crossjem.model import CrossJEMBatch
from rankers.families.crossjem.packed import pack_lists
from rankers.families.crossjem.records import PackedRows
from rankers.inputs.tokens import PAD, ItemArrays, ItemTokens


class _IdTokenizer:
    """A tokenizer whose texts are keys of given id lists (the store's only call)."""

    def __init__(self, ids: dict[str, list[int]]) -> None:
        self.ids = ids

    def __call__(self, texts: list[str], **kwargs: Any) -> dict[str, list[list[int]]]:
        return {"input_ids": [self.ids[t][: kwargs["max_length"]] for t in texts]}


def _held(items: Sequence[ItemArrays], width: int) -> tuple[ItemTokens, list[np.ndarray]]:
    """A store holding every item of ``items`` (one text per distinct id sequence, so that
    copies share a row as equal texts do) and each list's rows in it."""
    texts = [[" ".join(map(str, it.row(i))) or "<empty>" for i in range(len(it))] for it in items]
    ids = {t: [int(x) for x in t.split()] if t != "<empty>" else [] for ts in texts for t in ts}
    store = ItemTokens(_IdTokenizer(ids), width)
    store.add([t for ts in texts for t in ts])
    rows = [store.rows(ts) for ts in texts]
    assert all(r is not None for r in rows)
    return store, [r for r in rows if r is not None]


def _check(
    queries: Sequence[np.ndarray],
    items: Sequence[ItemArrays],
    union_len: int,
    tolerance: float,
    width: int,
) -> None:
    """The expanded batch equals the oracle's uploaded one in every tensor, bucket and host
    array; an item too long for a row gives the oracle's error."""
    store, rows = _held(items, width)
    special = (CLS, SEP, PAD_ID)
    args = (queries, items, union_len, CLS, SEP, PAD_ID, tolerance, UNION)
    try:
        oracle = CrossJEMBatch.upload(pack_lists(*args, reference=True), "cpu")
    except ValueError as error:
        with pytest.raises(ValueError) as raised:
            hold_lists(queries, store, rows, union_len, special, tolerance, "cpu")
        assert str(raised.value) == str(error)
        return
    got = expand(hold_lists(queries, store, rows, union_len, special, tolerance, "cpu"), PAD_ID)
    for name in (*PackedRows.ARRAYS, "lengths"):
        want, have = getattr(oracle, name), getattr(got, name)
        assert have.dtype == want.dtype == torch.int64, name
        assert have.shape == want.shape and torch.equal(have, want), name
    assert got.buckets == oracle.buckets
    assert got.n_items == oracle.n_items
    assert got.host_row_len is not None and oracle.host_row_len is not None
    assert np.array_equal(got.host_row_len, oracle.host_row_len)


@pytest.mark.parametrize("union_len", [8, 20, 64])
def test_the_union_step_equals_the_oracle_on_adversarial_lists(union_len: int) -> None:
    """Copies, empty items, cut items, one item, no items, rows filled exactly, ids beyond 16
    bits, an empty query; alone and as one batch of several queries."""
    lists = _adversarial(random.Random(union_len), width=8)
    for query, items in lists:
        for tolerance in (0.05, 1.0):
            _check([query], [items], union_len, tolerance, width=8)
    queries, items = zip(*lists, strict=True)
    _check(list(queries), list(items), union_len, 1.0, width=8)
    _check(list(queries), list(items), union_len, 0.0, width=8)


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_a_list_at_the_rows_edge(extra: int) -> None:
    """Distinct tokens one fewer than, exactly, or one more than a row holds: one row, one
    row, two rows (the host's shortcut for a list that fits must not swallow the last)."""
    from test_crossjem_fastpack import _arrays

    union_len = 20
    tokens = list(range(3000, 3000 + union_len + extra))
    items = _arrays([tokens[k : k + 3] for k in range(0, len(tokens), 3)], width=8)
    query = np.asarray([2000, 2001], dtype=np.int64)
    store, rows = _held([items], width=8)
    held = hold_lists([query], store, rows, union_len, (CLS, SEP, PAD_ID), 0.05, "cpu")
    assert len(held.host_row_len) == (2 if extra > 0 else 1)
    _check([query], [items], union_len, 0.05, width=8)


def test_the_union_step_equals_the_oracle_on_real_lists(shared_data: Path, tiny_bert: Path) -> None:
    """wikiqa test lists, their own and 12 pooled into one long list, in rows of 242 and 40
    tokens (one row and many), alone and as one batch."""
    from transformers import AutoTokenizer

    from bench.data.splits import load_split
    from rankers.inputs.batching import token_ids
    from rankers.inputs.tokens import tokenise_items

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    lists = load_split("wikiqa", "test", shared_data).lists[:24]
    texts = [list(cl.texts) for cl in lists]
    texts.append([t for group in texts[:12] for t in group])
    queries = [cl.query.text for cl in lists] + [lists[0].query.text]
    q_ids = [np.asarray(q, dtype=np.int64) for q in token_ids(tokenizer, queries, 30)]
    items = [tokenise_items(tokenizer, t, 32) for t in texts]
    assert sum(len(it) for it in items) > 300
    for union_len in (242, 40):
        for q, it in zip(q_ids, items, strict=True):
            _check([q], [it], union_len, 0.05, width=32)
        _check(q_ids, items, union_len, 1.0, width=32)


def test_only_the_plain_union_takes_the_step() -> None:
    assert takes_held_rows(UNION)
    for layout in (
        Layout("concat"),
        Layout("hybrid"),
        Layout("union", merge_layers=1),
        Layout("union", query_pool=True),
    ):
        assert not takes_held_rows(layout)


def test_sequence_ranks_order_items_as_the_canonical_order() -> None:
    """Ties (equal sequences) share a rank, a prefix ranks first, ids beyond 16 bits too."""
    from rankers.families.crossjem.packed import canonical_order

    for shift in (0, 70000):
        seqs = [[5, 3], [5], [], [5, 3], [2, 9, 9], [5, 3, 1], [2, 9]]
        seqs = [[t + shift for t in s] for s in seqs]
        texts = [" ".join(map(str, s)) or "<empty>" for s in seqs]
        ids = {t: [int(x) for x in t.split()] if t != "<empty>" else [] for t in texts}
        store = ItemTokens(_IdTokenizer(ids), 4)
        store.add(texts)
        rows = store.rows(texts)
        assert rows is not None
        ranks = store.sequence_ranks[rows]
        assert ranks.tolist() == [4, 3, 0, 4, 2, 5, 1]  # [] [2 9] [2 9 9] [5] [5 3] [5 3 1]
        padded = np.full((len(seqs), 4), PAD, dtype=np.int64)
        for i, s in enumerate(seqs):
            padded[i, : len(s)] = s
        assert np.array_equal(np.argsort(ranks, kind="stable"), canonical_order(padded))
    assert store.rows(["not held"]) is None


@pytest.mark.parametrize("batch_queries", [1, 3])
def test_the_ranker_scores_the_union_like_the_packed_path(
    tiny_bert: Path, monkeypatch: pytest.MonkeyPatch, batch_queries: int
) -> None:
    """Scores through the host's and the device's halves equal, bit for bit, those of the
    packed batches (the path every other layout takes); an item the store does not hold
    sends its batch down the packed path."""
    from test_host_reads import LISTS

    from rankers import create_ranker
    from rankers.families.crossjem import ranker as module
    from rankers.families.crossjem.held import HeldBatch

    options = {"model": str(tiny_bert), "union_len": 8, "max_item_len": 8}
    ranker = create_ranker("crossjem", {**options, "batch_queries": batch_queries})
    ranker.item_tokens.add([t for cl in LISTS for t in cl.texts])  # what index() holds
    assert all(isinstance(p, HeldBatch) for p in ranker.prepare_scoring(LISTS))
    assert sum(len(ranker.pack([(cl.query.text, cl.texts)]).row_len) for cl in LISTS) > 3
    held = ranker.score(LISTS)
    monkeypatch.setattr(module, "takes_held_rows", lambda layout: False)
    packed = ranker.score(LISTS)
    for a, b in zip(held, packed, strict=True):
        assert a.dtype == b.dtype == np.float32 and np.array_equal(a, b)
    monkeypatch.undo()
    first = LISTS[0]
    unseen = Candidate("new", "a text the store never held")
    mixed = [CandidateList(first.query, (*first.candidates, unseen)), *LISTS[1:]]
    kinds = [type(p) for p in ranker.prepare_scoring(mixed)]
    assert kinds[0] is CrossJEMBatch and (batch_queries == 3 or kinds[1] is HeldBatch)
    assert np.array_equal(ranker.score(mixed)[0][:-1].shape, held[0].shape)
