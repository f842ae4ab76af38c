"""CROSS-JEM's fast host step against its oracle: ``pack_lists`` with the kernels of
:mod:`rankers.families.crossjem.fastpack` gives bit-identical arrays (values and dtypes) to the
simple array steps (``reference=True``) for every layout the packer supports, on real wikiqa and
semeval16b test lists and on adversarial synthetic ones."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from rankers.families.crossjem import fastpack
from rankers.families.crossjem.inputs import Layout
from rankers.families.crossjem.packed import PackedRows, pack_lists
from rankers.inputs.tokens import ItemArrays, distinct_sorted, pad_ragged

CLS, SEP, PAD_ID = 101, 102, 0
FUNCTION = frozenset({1, 2, 3, 1000, 1012, 1996, 1997})  # synthetic ids; real lists bind MiniLM's

#: every option the packer reads: order, share_min / share_frac, positions, share (function
#: words, content_min), query_pool, merge_layers, and their combinations the layout accepts
LAYOUTS = [
    Layout("union"),
    Layout("union", query_pool=True),
    Layout("union", merge_layers=1),
    Layout("concat"),
    Layout("concat", positions="item"),
    Layout("concat", query_pool=True),
    Layout("hybrid"),
    Layout("hybrid", share_min=1),
    Layout("hybrid", share_min=3, positions="item"),
    Layout("hybrid", share_min=4, query_pool=True),
    Layout("hybrid", share_frac=0.03),
    Layout("hybrid", share_frac=0.3, positions="item"),
    Layout("hybrid", merge_layers=1),
    Layout("hybrid", share_min=3, merge_layers=2),
    Layout("hybrid", share="function", function_ids=FUNCTION),
    Layout("hybrid", share="function", function_ids=FUNCTION, share_min=1),
    Layout("hybrid", share="function", function_ids=FUNCTION, query_pool=True),
    Layout("hybrid", share="function", function_ids=FUNCTION, content_min=3, positions="item"),
    Layout("hybrid", share="function", function_ids=FUNCTION, merge_layers=1),
]


def _arrays(rows: Sequence[Sequence[int]], width: int) -> ItemArrays:
    ids, lens = pad_ragged([list(r)[:width] for r in rows], width)
    distinct, first, n_distinct = distinct_sorted(ids)
    return ItemArrays(ids, lens, distinct, first, n_distinct)


def _assert_same(fast: PackedRows, oracle: PackedRows) -> None:
    """Every array field equal in values, shape and dtype; buckets and list sizes equal."""
    for field in dataclasses.fields(PackedRows):
        got, want = getattr(fast, field.name), getattr(oracle, field.name)
        if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
            assert isinstance(got, np.ndarray) and isinstance(want, np.ndarray), field.name
            assert got.dtype == want.dtype, (field.name, got.dtype, want.dtype)
            assert np.array_equal(got, want), field.name
        else:
            assert got == want, field.name


def _check(
    queries: Sequence[np.ndarray],
    items: Sequence[ItemArrays],
    layout: Layout,
    union_len: int,
    tolerance: float | None,
) -> None:
    args = (queries, items, union_len, CLS, SEP, PAD_ID, tolerance, layout)
    try:
        oracle = pack_lists(*args, reference=True)
    except ValueError as error:  # an item too long for a row: the same error, same message
        with pytest.raises(ValueError) as raised:
            pack_lists(*args)
        assert str(raised.value) == str(error)
        return
    _assert_same(pack_lists(*args), oracle)


def _adversarial(rng: random.Random, width: int) -> list[tuple[np.ndarray, ItemArrays]]:
    """Lists that stress the kernels: copies, empty items, items cut to ``width``, one item,
    items holding the same tokens, no items, disjoint items of 4 tokens (rows of 8, 20 and 64
    tokens filled exactly), ids beyond 16 bits, an empty query."""
    vocab = [1, 2, 3, 1000, 1012, 1996, 1997, *range(2000, 2030)]

    def item(lo: int, hi: int) -> list[int]:
        return [rng.choice(vocab) for _ in range(rng.randint(lo, hi))]

    query = np.asarray([2000, 1996, 2001], dtype=np.int64)
    base = [item(1, width) for _ in range(12)]
    same_tokens = [sorted(set(base[0]))] + [rng.sample(base[0], len(base[0])) for _ in range(5)]
    out = [
        [*base, *base[:4], base[0], base[0]],  # copies, some adjacent after sorting
        [*base[:5], [], [], *base[5:], []],  # empty items
        [item(width + 1, 3 * width) for _ in range(9)],  # cut to width
        [base[3]],  # a single item
        [[]],  # a single empty item
        same_tokens,  # every item holds the same tokens
        [list(query) * 2, list(query), base[1]],  # items made of query terms
        [],  # no items
        [item(1, width) for _ in range(150)],  # long enough for many rows
        [list(range(3000 + 4 * k, 3004 + 4 * k)) for k in range(16)],  # rows filled exactly
    ]
    lists = [(query, _arrays(rows, width)) for rows in out]
    big = [[t + 70000 for t in r] for r in base]  # ids that do not fit 16 bits
    lists.append((query + 70000, _arrays(big, width)))
    lists.append((np.zeros(0, dtype=np.int64), _arrays(base, width)))  # an empty query
    return lists


@pytest.mark.parametrize("layout", LAYOUTS, ids=repr)
@pytest.mark.parametrize("union_len", [8, 20, 64])
def test_fast_packing_equals_the_oracle_on_adversarial_lists(
    layout: Layout, union_len: int
) -> None:
    rng = random.Random(union_len)
    lists = _adversarial(rng, width=8)
    for query, items in lists:
        for tolerance in (None, 0.05):
            _check([query], [items], layout, union_len, tolerance)
    queries, items = zip(*lists, strict=True)  # several queries in one call
    _check(list(queries), list(items), layout, union_len, 1.0)


@pytest.fixture(scope="module")
def real_lists(shared_data: Path, tiny_bert: Path) -> dict[str, tuple[list, list, object]]:
    """Per dataset: the first test queries' WordPiece ids, their candidate lists (their own,
    and the candidates of 12 lists pooled into one long list), and MiniLM's tokenizer."""
    from transformers import AutoTokenizer

    from bench.data.splits import load_split
    from rankers.inputs.batching import token_ids
    from rankers.inputs.tokens import tokenise_items

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    out = {}
    for dataset in ("wikiqa", "semeval16b"):
        lists = load_split(dataset, "test", shared_data).lists[:24]
        texts = [list(cl.texts) for cl in lists]
        texts.append([t for group in texts[:12] for t in group])
        queries = [cl.query.text for cl in lists] + [lists[0].query.text]
        q_ids = [np.asarray(q, dtype=np.int64) for q in token_ids(tokenizer, queries, 30)]
        items = [tokenise_items(tokenizer, t, 32) for t in texts]
        out[dataset] = (q_ids, items, tokenizer)
    return out


@pytest.mark.parametrize("dataset", ["wikiqa", "semeval16b"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=repr)
def test_fast_packing_equals_the_oracle_on_real_lists(
    real_lists: dict, dataset: str, layout: Layout
) -> None:
    queries, items, tokenizer = real_lists[dataset]
    if layout.share == "function":  # the tokenizer's function words
        layout = dataclasses.replace(layout, function_ids=None).bind(tokenizer)
    assert sum(len(it) for it in items) > 300
    for union_len in (242, 40):
        for q, it in zip(queries, items, strict=True):
            _check([q], [it], layout, union_len, 0.05)
        _check(queries, items, layout, union_len, None)  # a training batch: one bucket


def test_stable_argsort_equals_numpys_with_and_without_the_radix_path() -> None:
    rng = np.random.default_rng(0)
    for keys in (
        rng.integers(0, 50, 1000),  # 16 bits: radix sort
        rng.integers(0, 1 << 40, 1000),  # wider: NumPy's stable sort
        rng.integers(-5, 5, 1000),  # negative: NumPy's stable sort
        np.zeros(0, dtype=np.int64),
    ):
        np.testing.assert_array_equal(
            fastpack.stable_argsort(keys), np.argsort(keys, kind="stable")
        )


def test_next_fit_by_hand() -> None:
    """Items of 2, 0, 3 and 2 occurrences whose tokens repeat: rows of 4 new tokens take the
    first three items (2 + 0 + 2 new: the third repeats one), then the fourth; items without
    occurrences alone make one empty group; an item over the row is refused, not looped on."""
    # occurrences: a b | - | a c d | e f ; prev: the previous occurrence of the same token
    item_end = np.asarray([2, 2, 5, 7])
    prev = np.asarray([-1, -1, 0, -1, -1, -1, -1])
    assert fastpack.next_fit(item_end, prev, 4) == ([0, 3], [4, 2], [5, 7])
    assert fastpack.next_fit(item_end, prev, 6) == ([0], [6], [7])
    assert fastpack.next_fit(np.asarray([0, 0]), prev[:0], 4) == ([0], [0], [0])
    with pytest.raises(ValueError, match="union_len=2"):
        fastpack.next_fit(item_end, prev, 2)
