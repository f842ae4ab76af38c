"""CROSS-JEM row layouts that keep word order (option ``order``): hand-checked rows and pooling
sets, the array path against the simple implementation, order invariance, hand-pooled logits."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from test_crossjem import ITEMS, _list, _random_lists, _ranker

from rankers.base import RankerError
from rankers.families.crossjem.inputs import Layout, build_rows, pack_groups, share_threshold
from rankers.families.crossjem.model import collate
from rankers.families.crossjem.ranker import CrossJEMConfig

CLS, SEP = 101, 102
# query [5, 6]; items: 0 = [9, 7, 9], 1 = [7, 8], 2 = [4, 7, 9]
# canonical order (by ids): item 2 [4, 7, 9], item 1 [7, 8], item 0 [9, 7, 9]
# holders: 7 -> 3 items, 9 -> 2 (items 0, 2), 4 -> 1, 8 -> 1
QUERY = [5, 6]
THREE = [[9, 7, 9], [7, 8], [4, 7, 9]]

LAYOUTS = [
    Layout("union"),
    Layout("concat"),
    Layout("concat", positions="item"),
    Layout("hybrid"),
    Layout("hybrid", share_min=3, positions="item"),
    Layout("hybrid", share="function", function_ids=frozenset({4, 5, 7}), query_pool=True),
    Layout(
        "hybrid",
        share="function",
        function_ids=frozenset({4, 5, 7}),
        content_min=3,
        query_pool=True,
        positions="item",
    ),
]


def _one_row(layout: Layout):
    (row,) = build_rows(QUERY, THREE, 40, CLS, SEP, layout)
    return row, {s.item: s for s in row.slots}


def test_union_three_items_hand_checked() -> None:
    row, slot = _one_row(Layout("union"))
    # positions:     0    1  2  3    4  5  6  7  8
    assert row.input_ids == (CLS, 5, 6, SEP, 4, 7, 8, 9, SEP)
    assert row.position_ids == tuple(range(9))
    assert slot[0].pool == (1, 2, 3, 5, 7) and slot[0].offsets == (1, 0)
    assert slot[1].pool == (1, 2, 3, 5, 6) and slot[1].offsets == (0, 1)
    assert slot[2].pool == (1, 2, 3, 4, 5, 7) and slot[2].offsets == (0, 1, 2)


def test_concat_three_items_hand_checked() -> None:
    row, slot = _one_row(Layout("concat"))
    # items in canonical order 2, 1, 0, every token as written
    # positions:     0    1  2  3    4  5  6  7  8  9  10 11 12
    assert row.input_ids == (CLS, 5, 6, SEP, 4, 7, 9, 7, 8, 9, 7, 9, SEP)
    assert row.token_type_ids == (0,) * 4 + (1,) * 9
    assert row.position_ids == tuple(range(13))
    assert slot[2].pool == (1, 2, 3, 4, 5, 6) and slot[2].offsets == (0, 1, 2)
    assert slot[1].pool == (1, 2, 3, 7, 8) and slot[1].offsets == (0, 1)
    assert slot[0].pool == (1, 2, 3, 9, 10, 11) and slot[0].offsets == (0, 1, 2)
    assert [s.item for s in row.slots] == [2, 1, 0]


def test_concat_item_positions_restart_per_item() -> None:
    row, _ = _one_row(Layout("concat", positions="item"))
    # query part 0..3; every item's tokens at 4 + their place in the item; final [SEP] at 12
    assert row.position_ids == (0, 1, 2, 3, 4, 5, 6, 4, 5, 4, 5, 6, 12)


def test_hybrid_three_items_hand_checked() -> None:
    row, slot = _one_row(Layout("hybrid"))  # shared: held by >= 2 items: 7 and 9
    # positions:     0    1  2  3    4  5  6  7  8
    assert row.input_ids == (CLS, 5, 6, SEP, 7, 9, 4, 8, SEP)
    # item 0 [9, 7, 9] has no own token; item 1's 8 and item 2's 4 keep their item order
    assert slot[0].pool == (1, 2, 3, 4, 5) and slot[0].offsets == (1, 0)
    assert slot[1].pool == (1, 2, 3, 4, 7) and slot[1].offsets == (0, 1)
    assert slot[2].pool == (1, 2, 3, 4, 5, 6) and slot[2].offsets == (1, 2, 0)


def test_hybrid_share_min_three_with_item_positions() -> None:
    row, slot = _one_row(Layout("hybrid", share_min=3, positions="item"))  # shared: only 7
    # positions:     0    1  2  3    4  5  6  7  8  9  10
    assert row.input_ids == (CLS, 5, 6, SEP, 7, 4, 9, 8, 9, 9, SEP)
    # own tokens at 4 + their place in the item: 4 (item 2, 0) 9 (item 2, 2) 8 (item 1, 1)
    # 9 (item 0, 0) 9 (item 0, 2); the shared 7 after the longest item (3 tokens): 4 + 3
    assert row.position_ids == (0, 1, 2, 3, 7, 4, 6, 5, 4, 6, 10)
    assert slot[2].pool == (1, 2, 3, 4, 5, 6) and slot[2].offsets == (1, 0, 2)
    assert slot[1].pool == (1, 2, 3, 4, 7) and slot[1].offsets == (0, 1)
    assert slot[0].pool == (1, 2, 3, 4, 8, 9) and slot[0].offsets == (1, 0, 2)


@pytest.mark.parametrize("layout", LAYOUTS + [Layout("union", merge_layers=1)])
def test_position_rule_per_layout(layout: Layout) -> None:
    """Row positions number the row 0, 1, 2, ...; item positions give each own token
    start + its place in its item and the shared block ids after the row's longest item, so a
    shared token never shares an id with an own one; the query part and the final [SEP] keep
    their row positions."""
    rng = random.Random(7)
    for _ in range(20):
        items = [[rng.randrange(3, 12) for _ in range(rng.randrange(1, 6))] for _ in range(6)]
        for row in build_rows(QUERY, items, 40, CLS, SEP, layout):
            start, n = len(QUERY) + 2, len(row.input_ids)
            if layout.positions == "row":
                assert row.position_ids == tuple(range(n))
                continue
            assert row.position_ids[:start] == tuple(range(start))
            assert row.position_ids[-1] == n - 1
            shared_end = start + len(
                set(row.input_ids[start:-1]) & layout.shared_tokens(items, QUERY)
            )
            longest = max(len(items[s.item]) for s in row.slots)
            own = row.position_ids[shared_end:-1]
            assert row.position_ids[start:shared_end] == tuple(
                range(start + longest, start + longest + shared_end - start)
            )
            assert all(start <= p < start + longest for p in own)
            for slot in row.slots:  # each own token at start + its offset in the item
                places = [p for p in slot.pool[start - 1 :] if p >= shared_end]
                offsets = slot.offsets[len(slot.offsets) - len(places) :]
                assert [row.position_ids[p] for p in places] == [start + o for o in offsets]


def test_function_words_shared_and_query_terms_pooled_from_the_query_hand_checked() -> None:
    # query [5, 9]: 9 is pooled from the query (position 2); function words {7, 8}: 7 is held by
    # 3 items (shared), 8 by one (own); 4 is a content word (own, in item order)
    layout = Layout("hybrid", share="function", function_ids=frozenset({7, 8}), query_pool=True)
    (row,) = build_rows([5, 9], THREE, 40, CLS, SEP, layout)
    # positions:     0    1  2  3    4  5  6  7
    assert row.input_ids == (CLS, 5, 9, SEP, 7, 4, 8, SEP)
    slot = {s.item: s for s in row.slots}
    # pooled: the query part, then query terms and shared tokens by row position, then own
    assert slot[2].pool == (1, 2, 3, 2, 4, 5) and slot[2].offsets == (2, 1, 0)
    assert slot[1].pool == (1, 2, 3, 4, 6) and slot[1].offsets == (0, 1)
    assert slot[0].pool == (1, 2, 3, 2, 4) and slot[0].offsets == (0, 1)
    # a query term costs no row place: contents {7} + 4 + 8 = 3 tokens; written, the 9s make
    # {7} + 4 9 (3), + 8 (4 > 3: a new row), {7} + 8 (2), + 9 9 (4 > 3: a new row)
    assert pack_groups(THREE, 3, layout, [5, 9]) == [[2, 1, 0]]
    written = dataclasses.replace(layout, query_pool=False)
    assert pack_groups(THREE, 3, written, [5, 9]) == [[2], [1], [0]]


def test_content_words_shared_from_content_min_holders_hand_checked() -> None:
    # function words {8} (one holder: own); content 7 has 3 holders (shared at content_min 3),
    # content 9 has 2 (own, in item order)
    layout = Layout("hybrid", share="function", function_ids=frozenset({8}), content_min=3)
    (row,) = build_rows(QUERY, THREE, 40, CLS, SEP, layout)
    assert row.input_ids == (CLS, 5, 6, SEP, 7, 4, 9, 8, 9, 9, SEP)
    assert layout.shared_tokens(THREE) == {7}
    assert (
        Layout("hybrid", share="function", function_ids=frozenset({8})).shared_tokens(THREE)
        == set()
    )
    with pytest.raises(ValueError, match="content_min=1 needs share=function and content_min"):
        Layout("hybrid", share="function", content_min=1)


def test_function_words_are_words_and_punctuation_of_the_vocabulary() -> None:
    from rankers.families.crossjem.function_words import is_function_token

    assert [is_function_token(p) for p in ("the", "of", ",", "##.", "?!")] == [True] * 5
    assert [is_function_token(p) for p in ("python", "##s", "[CLS]", "##", "theory")] == [False] * 5
    with pytest.raises(ValueError, match="share=function needs the tokenizer"):
        Layout("hybrid", share="function").shared_tokens(THREE)


def test_a_copy_writes_nothing_and_pools_the_first_items_tokens() -> None:
    items = [[9, 7, 9], [7, 8], [9, 7, 9]]
    (row,) = build_rows(QUERY, items, 40, CLS, SEP, Layout("concat"))
    # canonical order: item 1 [7, 8], item 0 [9, 7, 9], item 2 (its copy, written once)
    assert row.input_ids == (CLS, 5, 6, SEP, 7, 8, 9, 7, 9, SEP)
    slot = {s.item: s for s in row.slots}
    assert slot[0].pool == slot[2].pool == (1, 2, 3, 6, 7, 8)
    assert slot[0].offsets == slot[2].offsets == (0, 1, 2)
    assert pack_groups(items, 5, Layout("concat")) == [[1, 0, 2]]  # the copy costs nothing


def test_packing_counts_shared_tokens_once_and_own_tokens_each_time() -> None:
    # union: contents {4,7,9} + {8} = 4 tokens; concat: 3 + 2 + 3 = 8; hybrid: {7,9} + 4 + 8 = 4
    assert pack_groups(THREE, 4, Layout("union")) == [[2, 1, 0]]
    assert pack_groups(THREE, 7, Layout("concat")) == [[2, 1], [0]]
    assert pack_groups(THREE, 8, Layout("concat")) == [[2, 1, 0]]
    assert pack_groups(THREE, 4, Layout("hybrid")) == [[2, 1, 0]]
    with pytest.raises(ValueError, match="item 2 needs 3 row tokens, more than union_len=2"):
        pack_groups(THREE, 2, Layout("concat"))


def test_layout_rejects_unknown_values() -> None:
    with pytest.raises(ValueError, match="order must be one of union, concat, hybrid"):
        Layout("sorted")
    with pytest.raises(ValueError, match="positions must be one of row, item"):
        Layout("concat", positions="left")
    with pytest.raises(ValueError, match="share must be one of all, function"):
        Layout("hybrid", share="rare")
    with pytest.raises(ValueError, match="share=function needs order=hybrid, not union"):
        Layout("union", share="function")
    with pytest.raises(ValueError, match="query_pool cannot be combined with merge_layers"):
        Layout("union", query_pool=True, merge_layers=1)


def test_options_choose_the_layout(tiny_bert: Path) -> None:
    ranker = _ranker(tiny_bert, order="hybrid", share_min=3, positions="item")
    assert ranker.cfg.layout == Layout("hybrid", share_min=3, positions="item")
    with pytest.raises(RankerError, match="order"):
        _ranker(tiny_bert, order="sorted")
    with pytest.raises(RankerError, match="share_min"):
        _ranker(tiny_bert, order="hybrid", share_min=1)
    with pytest.raises(RankerError, match="share=function needs order=hybrid"):
        _ranker(tiny_bert, order="concat", share="function")
    with pytest.raises(RankerError, match="query_pool cannot be combined with merge_layers"):
        _ranker(tiny_bert, order="hybrid", query_pool=True, merge_layers=1)
    from rankers.families.crossjem.function_words import function_token_ids

    fw = _ranker(tiny_bert, order="hybrid", share="function", query_pool=True)
    assert fw.layout.function_ids == function_token_ids(fw.tokenizer)
    assert fw.layout.function_ids and fw.cfg.layout.function_ids is None


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [("query_pool", True, "query_pool"), ("content_share_min", 3, "content_min")],
)
def test_each_layout_option_changes_the_rows_the_ranker_builds(
    tiny_bert: Path, option: str, value: object, field: str
) -> None:
    """An option of the layout reaches the rows the ranker packs: its arrays are those of the
    layout with the option set, and differ from those without it (query terms pooled from the
    query, content words held by 3 items shared)."""
    from rankers.inputs.batching import token_ids

    base = {"order": "hybrid", "share": "function", "union_len": 40, "max_item_len": 8}
    plain = _ranker(tiny_bert, **base)
    ranker = _ranker(tiny_bert, **base, **{option: value})
    wanted = dataclasses.replace(plain.cfg.layout, **{field: value})
    assert ranker.cfg.layout == wanted
    query, texts = "how to sort a list in python", ITEMS
    q = token_ids(ranker.tokenizer, [query], ranker.cfg.max_query_len)[0]
    ids = token_ids(ranker.tokenizer, texts, ranker.cfg.max_item_len)
    sp = ranker.special
    expected = collate([build_rows(q, ids, 40, sp.cls, sp.sep, wanted.bind(ranker.tokenizer))])
    got, without = ranker.pack([(query, texts)]), plain.pack([(query, texts)])
    for name in got.ARRAYS:
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), name)
    assert (
        got.input_ids.shape != without.input_ids.shape or (got.input_ids != without.input_ids).any()
    )


OPTIONS = [
    {"order": "concat"},
    {"order": "concat", "positions": "item"},
    {"order": "hybrid"},
    {"order": "hybrid", "positions": "item", "share_min": 3},
    {"order": "hybrid", "merge_layers": 1},
    {"order": "union", "merge_layers": 1},
    {"order": "hybrid", "share": "function", "query_pool": True},
    {"order": "hybrid", "share": "function", "content_share_min": 3, "positions": "item"},
    {"order": "union", "query_pool": True},
    {"order": "hybrid", "share_frac": 0.3},
    {"order": "hybrid", "share_frac": 0.15, "positions": "item"},
]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("union_len", [8, 12, 40])
def test_packed_layouts_equal_the_simple_implementation(
    tiny_bert: Path, options: dict, union_len: int
) -> None:
    ranker = _ranker(tiny_bert, union_len=union_len, max_item_len=8, **options)
    rng = random.Random(union_len)
    for _ in range(5):
        lists = _random_lists(rng, 3)
        lists.append((lists[0][0], [*lists[0][1], *lists[0][1][:3]]))  # copies of items
        fast = ranker.pack(lists)
        simple = collate([ranker.rows(q, items) for q, items in lists])
        for name in fast.ARRAYS:
            np.testing.assert_array_equal(getattr(fast, name), getattr(simple, name), name)
        if fast.position_ids is None or simple.position_ids is None:
            assert fast.position_ids is None and simple.position_ids is None
        else:
            np.testing.assert_array_equal(fast.position_ids, simple.position_ids)
        # merged layouts: the concat rows the first layers read and where each position goes
        merged = bool(options.get("merge_layers"))
        for name in fast.MERGE_ARRAYS:
            got, want = getattr(fast, name), getattr(simple, name)
            assert (got is not None, want is not None) == (merged, merged), name
            if merged:
                np.testing.assert_array_equal(got, want, name)
        assert fast.n_items == simple.n_items


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("union_len", [242, 16])
def test_layout_scores_permute_with_candidates(
    tiny_bert: Path, options: dict, union_len: int
) -> None:
    ranker = _ranker(tiny_bert, union_len=union_len, max_item_len=8, **options)
    base = ranker.score([_list(ITEMS)])[0]
    assert base[1] == pytest.approx(base[9], abs=1e-6)  # a copy pools the first item's tokens
    rng = random.Random(2)
    for _ in range(3):
        perm = list(range(len(ITEMS)))
        rng.shuffle(perm)
        shuffled = ranker.score([_list([ITEMS[p] for p in perm])])[0]
        np.testing.assert_allclose(shuffled, base[perm], atol=1e-5)


@pytest.mark.parametrize("options", OPTIONS)
def test_layout_scores_equal_the_simple_implementation(tiny_bert: Path, options: dict) -> None:
    ranker = _ranker(tiny_bert, union_len=20, max_item_len=8, item_positions=True, **options)
    lists = [_list(ITEMS, "q1"), _list(ITEMS[2:7], "q2", query="java sort"), _list([], "q3")]
    with ranker.inference():
        logits, _ = ranker.forward(
            ranker.prepare_simple([(cl.query.text, cl.texts) for cl in lists])
        )
    for b, (cl, s) in enumerate(zip(lists, ranker.score(lists), strict=True)):
        np.testing.assert_allclose(s, logits[b, : len(cl)].numpy(), atol=1e-5)


@pytest.mark.parametrize("options", OPTIONS[:4])
def test_layout_logits_equal_hand_pooled_classifier(tiny_bert: Path, options: dict) -> None:
    """The encoder sees the oracle's ids, types and position ids; each logit is the classifier on
    the mean of the item's pooled hidden states."""
    ranker = _ranker(tiny_bert, **options)
    query, texts = "how to sort a list in python", ITEMS[:5]
    module = ranker.module
    with ranker.inference():
        logits, _ = ranker.forward(ranker.prepare([(query, texts)]))
        (row,) = ranker.rows(query, texts)
        ids = torch.tensor([row.input_ids])
        hidden = module.encoder(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            token_type_ids=torch.tensor([row.token_type_ids]),
            position_ids=torch.tensor([row.position_ids]),
        ).last_hidden_state[0]
        w, b = module.classifier.weight[0], module.classifier.bias[0]
        for slot in row.slots:
            expected = float(w @ hidden[list(slot.pool)].mean(dim=0) + b)
            assert logits[0, slot.item].item() == pytest.approx(expected, abs=1e-5)


def test_merged_hybrid_three_items_hand_checked() -> None:
    row, slot = _one_row(Layout("hybrid", merge_layers=1))
    # first row: the concat row (items 2, 1, 0 as written); merged row: 7 and 9 shared (held by
    # 3 and 2 items), own tokens 4 (item 2) and 8 (item 1)
    assert row.first_ids == (CLS, 5, 6, SEP, 4, 7, 9, 7, 8, 9, 7, 9, SEP)
    assert row.input_ids == (CLS, 5, 6, SEP, 7, 9, 4, 8, SEP)
    assert row.merge_dst == (0, 1, 2, 3, 6, 4, 5, 4, 7, 5, 4, 5, 8)
    assert row.position_ids == tuple(range(9))
    assert slot[0].pool == (1, 2, 3, 4, 5) and slot[2].pool == (1, 2, 3, 4, 5, 6)
    union = _one_row(Layout("union", merge_layers=2))[0]
    assert union.input_ids == (CLS, 5, 6, SEP, 4, 7, 8, 9, SEP)
    assert union.merge_dst == (0, 1, 2, 3, 4, 5, 7, 5, 6, 7, 5, 7, 8)


def test_merged_rows_are_packed_by_their_concat_rows() -> None:
    # concat content: 3 + 2 + 3 tokens; the merged row would hold 4 (union) or 4 (hybrid)
    for layout in (Layout("union", merge_layers=1), Layout("hybrid", merge_layers=1)):
        assert pack_groups(THREE, 8, layout) == [[2, 1, 0]]
        assert pack_groups(THREE, 7, layout) == [[2, 1], [0]]
    assert pack_groups(THREE, 4, Layout("union")) == [[2, 1, 0]]


def test_merging_nothing_equals_concat(tiny_bert: Path) -> None:
    """With no token shared (share_min above the list size) the merge moves every state to its
    own place: the scores are concat's, so the staged layers equal the encoder's forward."""
    lists = [_list(ITEMS, "q1"), _list(ITEMS[2:7], "q2", query="java sort")]
    concat = _ranker(tiny_bert, order="concat", union_len=60, max_item_len=8).score(lists)
    merged = _ranker(
        tiny_bert, order="hybrid", share_min=50, merge_layers=1, union_len=60, max_item_len=8
    ).score(lists)
    for a, b in zip(concat, merged, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("order", ["hybrid", "union"])
def test_merged_logits_equal_hand_merged_layers(tiny_bert: Path, order: str) -> None:
    """Layer 1 over the concat row (the encoder's own hidden states), each merged position the
    mean of the states sent to it, the other layers over the merged row, then the pooled mean."""
    ranker = _ranker(tiny_bert, order=order, merge_layers=1)
    query, texts = "how to sort a list in python", ITEMS[:5]
    module = ranker.module
    with ranker.inference():
        logits, _ = ranker.forward(ranker.prepare([(query, texts)]))
        (row,) = ranker.rows(query, texts)
        first = torch.tensor([row.first_ids])
        start = row.token_type_ids.index(1)
        types = torch.tensor([[0] * start + [1] * (len(row.first_ids) - start)])
        after_one = module.encoder(
            input_ids=first, token_type_ids=types, output_hidden_states=True
        ).hidden_states[1][0]
        merged = torch.zeros(len(row.input_ids), after_one.shape[1])
        for p in range(len(row.input_ids)):
            sources = [i for i, d in enumerate(row.merge_dst) if d == p]
            assert sources, f"position {p} of the merged row receives nothing"
            merged[p] = after_one[sources].mean(dim=0)
        hidden = merged[None]
        for layer in module.encoder.encoder.layer[1:]:
            out = layer(hidden)
            hidden = out[0] if isinstance(out, tuple) else out
        w, b = module.classifier.weight[0], module.classifier.bias[0]
        for slot in row.slots:
            expected = float(w @ hidden[0, list(slot.pool)].mean(dim=0) + b)
            assert logits[0, slot.item].item() == pytest.approx(expected, abs=1e-5)


def test_layers_mask_padding_without_the_encoders_mask_builder(tiny_bert: Path) -> None:
    """transformers 5 removed ``get_extended_attention_mask``: the additive mask built instead
    gives the states the encoder's own builder gives, padding included."""
    from rankers.families.crossjem.model import run_layers

    encoder = _ranker(tiny_bert).module.encoder
    layers = list(encoder.encoder.layer)
    hidden = torch.randn(
        2, 5, encoder.config.hidden_size, generator=torch.Generator().manual_seed(0)
    )
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])

    class WithoutBuilder:  # the encoder as transformers 5 has it: no mask builder
        pass

    with torch.no_grad():
        own = run_layers(encoder, layers, hidden, mask)
        built = run_layers(WithoutBuilder(), layers, hidden, mask)  # type: ignore[arg-type]
    torch.testing.assert_close(built, own, rtol=0, atol=1e-6)


def test_merge_options_are_checked(tiny_bert: Path) -> None:
    with pytest.raises(RankerError, match="positions=item has no effect"):
        _ranker(tiny_bert, order="hybrid", merge_layers=1, positions="item")
    with pytest.raises(RankerError, match="positions=item has no effect"):
        _ranker(tiny_bert, order="union", positions="item")
    needs = "merge_layers=1 needs order=union or order=hybrid"
    with pytest.raises(
        RankerError, match=f"merge_layers=1 has no effect under order=concat \\({needs}"
    ):
        _ranker(tiny_bert, order="concat", merge_layers=1)
    layers = _ranker(tiny_bert).module.encoder.config.num_hidden_layers
    with pytest.raises(RankerError, match="must be below the encoder's"):
        _ranker(tiny_bert, merge_layers=layers).module  # noqa: B018


def test_order_keeping_layouts_see_word_order(tiny_bert: Path) -> None:
    """The union cannot tell two orderings of the same words apart; concat and hybrid can."""
    texts = ["python sort list", "list sort python", "java"]
    union = _ranker(tiny_bert).score([_list(texts)])[0]
    assert union[0] == pytest.approx(union[1], abs=1e-6)
    for options in OPTIONS[:2]:
        ordered = _ranker(tiny_bert, **options).score([_list(texts)])[0]
        assert abs(ordered[0] - ordered[1]) > 1e-4
    # hybrid: the three words are held by two items, so they are shared: a bag again
    hybrid = _ranker(tiny_bert, order="hybrid").score([_list(texts)])[0]
    assert hybrid[0] == pytest.approx(hybrid[1], abs=1e-6)
    rare = _ranker(tiny_bert, order="hybrid", share_min=3).score([_list(texts)])[0]
    assert abs(rare[0] - rare[1]) > 1e-4
    # merged layouts: a shared token has one state for all its holders (two items that are
    # orderings of the same words tie), but the first layer read each copy in its item's order,
    # so reordering one item's words changes its score where the union's cannot
    others = ["python sort", "java list"]
    for options in ({}, {"order": "hybrid", "merge_layers": 1}, {"merge_layers": 1}):
        ranker = _ranker(tiny_bert, **options)
        one, two = (ranker.score([_list([t, *others])])[0][0] for t in texts[:2])
        assert abs(one - two) > 1e-4 if options else one == pytest.approx(two, abs=1e-6)


def test_latency_columns_are_tagged_with_the_layout(tiny_bert: Path) -> None:
    union = _ranker(tiny_bert).latency_variants()
    assert [v.column for v in union] == ["crossjem", "crossjem (end-to-end)"]
    concat = _ranker(tiny_bert, order="concat", positions="item").latency_variants()
    assert [v.column for v in concat] == [
        "crossjem {concat, item positions}",
        "crossjem {concat, item positions} (end-to-end)",
    ]
    hybrid = _ranker(tiny_bert, order="hybrid", share_min=3).latency_variants()
    assert hybrid[0].column == "crossjem {hybrid share_min=3}"


def test_order_ablation_trains_every_layout_on_the_same_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path, results_dir: Path
) -> None:
    from toydata import write_toy_mteb

    from bench.execution.runner import RunOptions
    from bench.experiments.ablate import run_ablation

    data = tmp_path / "data"
    write_toy_mteb(data / "toy")
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "crossjem.yaml").write_text(
        f"default:\n  model: {tiny_bert}\n  epochs: 1\n  min_steps: 0\n  teacher: null\n"
    )
    monkeypatch.setattr("bench.execution.ranker_settings.CONFIG_DIR", folder)
    base = RunOptions(
        ranker="crossjem", dataset="toy", data_dir=data, warmup=0, progress=False, device="cpu"
    )
    records = run_ablation("order", base)
    assert [r.label for r in records] == [
        "crossjem order=union",
        "crossjem order=concat, positions=row",
        "crossjem order=concat, positions=item",
        "crossjem order=hybrid, positions=item",
        "crossjem order=hybrid, positions=row",
        "crossjem order=hybrid, positions=row, share_min=3",
        "crossjem order=hybrid, positions=row, share_min=4",
        "crossjem order=union, positions=row, merge_layers=1",
        "crossjem order=hybrid, positions=row, share=function, content_share_min=3",
        "crossjem order=hybrid, positions=row, share=function, content_share_min=4, "
        "query_pool=True",
    ]
    layouts = [
        (r.config["order"], r.config["positions"], r.config["share_min"], r.config["merge_layers"])
        for r in records
    ]
    shares = [
        (r.config["share"], r.config["content_share_min"], r.config["query_pool"]) for r in records
    ]
    assert shares == [("all", 0, False)] * 8 + [("function", 3, False), ("function", 4, True)]
    assert layouts == [
        ("union", "row", 2, 0),
        ("concat", "row", 2, 0),
        ("concat", "item", 2, 0),
        ("hybrid", "item", 2, 0),
        ("hybrid", "row", 2, 0),
        ("hybrid", "row", 3, 0),
        ("hybrid", "row", 4, 0),
        ("union", "row", 2, 1),
        ("hybrid", "row", 2, 0),
        ("hybrid", "row", 2, 0),
    ]
    assert len({r.training["model_dir"] for r in records}) == 10  # one model each
    # the same data for every layout: train and dev splits, their sizes and the test lists
    assert len({r.training["key_parts"]["data"] for r in records}) == 1
    assert len({(r.training["train_queries"], r.training["train_items"]) for r in records}) == 1
    assert len({r.data["checksum"] for r in records}) == 1
    assert all(r.training["targets"] == records[0].training["targets"] for r in records)
    with pytest.raises(ValueError, match="--set order=concat: the order ablation sets"):
        run_ablation("order", dataclasses.replace(base, options={"order": "concat"}))


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"share_min": 3},
            "share_min=3 has no effect under order=union (share_min=3 needs "
            "order=hybrid); leave share_min at its default, 2",
        ),
        ({"order": "concat", "share_min": 4}, "share_min=4 has no effect under order=concat"),
        (
            {"order": "concat", "share": "function"},
            "share=function has no effect under "
            "order=concat (share=function needs order=hybrid); leave share at its default, all",
        ),
        (
            {"order": "hybrid", "content_share_min": 3},
            "content_share_min=3 has no effect under "
            "share=all (content_share_min=3 needs share=function)",
        ),
        (
            {"positions": "item"},
            "positions=item has no effect under order=union "
            "(positions=item needs order=concat or order=hybrid)",
        ),
        (
            {"order": "hybrid", "merge_layers": 1, "positions": "item"},
            "positions=item has no "
            "effect under merge_layers=1 (positions=item needs merge_layers=0)",
        ),
        (
            {"order": "concat", "merge_layers": 1},
            "merge_layers=1 has no effect under "
            "order=concat (merge_layers=1 needs order=union or order=hybrid)",
        ),
    ],
)
def test_a_layout_option_that_does_nothing_is_refused_naming_it(
    options: dict[str, object], said: str
) -> None:
    """Each layout option declares where it means something (``needs``); a value other than
    its default anywhere else is refused when the config is built, so before any work, and
    the default is always accepted (``share_min=2`` is the union's own value)."""
    with pytest.raises(RankerError) as caught:
        CrossJEMConfig.from_options(options)
    assert said in str(caught.value)
    CrossJEMConfig.from_options({"order": "union", "share_min": "2", "share": "all"})
    CrossJEMConfig.from_options({"order": "hybrid", "share_min": 3, "positions": "item"})


# -- share_frac: the hybrid's count as a share of the list -----------------------------------------
# five items: a = [9, 7, 9], b = [7, 8], c = [4, 7, 9], d = [7, 3], e = [8, 9]
# holders: 7 -> 4 items (a, b, c, d), 9 -> 3 (a, c, e), 8 -> 2 (b, e), 4 -> 1, 3 -> 1
# canonical order (by ids): c [4, 7, 9], d [7, 3], b [7, 8], e [8, 9], a [9, 7, 9]
FIVE = [[9, 7, 9], [7, 8], [4, 7, 9], [7, 3], [8, 9]]


@pytest.mark.parametrize(
    ("share_frac", "ids"),
    [
        # 0.5 x 5 = 2.5 -> 3 holders: 7 and 9 shared; own tokens c: 4, d: 3, b: 8, e: 8, a: none
        (0.5, (CLS, 5, 6, SEP, 7, 9, 4, 3, 8, 8, SEP)),
        # 0.8 x 5 = 4 holders: only 7; own c: 4 9, d: 3, b: 8, e: 8 9, a: 9 9
        (0.8, (CLS, 5, 6, SEP, 7, 4, 9, 3, 8, 8, 9, 9, 9, SEP)),
        # 0.2 x 5 = 1, floored at 2: 7, 8 and 9 shared; own c: 4, d: 3
        (0.2, (CLS, 5, 6, SEP, 7, 8, 9, 4, 3, SEP)),
    ],
)
def test_share_frac_rows_hand_checked(share_frac: float, ids: tuple[int, ...]) -> None:
    (row,) = build_rows(QUERY, FIVE, 40, CLS, SEP, Layout("hybrid", share_frac=share_frac))
    assert row.input_ids == ids
    assert row.position_ids == tuple(range(len(ids)))
    assert [s.item for s in row.slots] == [2, 3, 1, 4, 0]


@pytest.mark.parametrize(
    ("share_frac", "n", "need"),
    [
        (0.04, 10, 2),
        (0.04, 50, 2),
        (0.04, 51, 3),
        (0.04, 100, 4),
        (0.04, 700, 28),
        (0.07, 100, 7),  # 0.07 x 100 is 7.000000000000001 in floats: still 7
        (0.25, 10, 3),
        (0.2, 10, 2),
        (1.0, 5, 5),
        (0.5, 1, 2),
        (0.5, 0, 2),
    ],
)
def test_share_threshold_per_list_length(share_frac: float, n: int, need: int) -> None:
    assert share_threshold(share_frac, n) == need
    assert Layout("hybrid", share_frac=share_frac).min_holders(n) == need


def test_share_frac_threshold_follows_each_lists_length() -> None:
    """One layout, two lists: a token held by 3 items is shared in a list of 10 under 0.3
    (ceil(3.0) = 3) and not once an eleventh item makes it ceil(3.3) = 4."""
    layout = Layout("hybrid", share_frac=0.3)
    ten = [[7], [7], [7], *([20 + i] for i in range(7))]
    assert layout.shared_tokens(ten) == {7}
    assert layout.shared_tokens([*ten, [30]]) == set()
    assert Layout("hybrid", share_min=3).shared_tokens([*ten, [30]]) == {7}


@pytest.mark.parametrize("share_frac", [0.1, 0.25, 0.5])
@pytest.mark.parametrize("positions", ["row", "item"])
def test_share_frac_equals_share_min_of_its_threshold(share_frac: float, positions: str) -> None:
    """Every list's rows under a fraction are those of ``share_min`` = its threshold for that
    list's length, with either position rule and when packing splits the list."""
    rng = random.Random(11)
    needs = set()
    for _ in range(30):
        n = rng.randrange(1, 31)
        items = [[rng.randrange(3, 10) for _ in range(rng.randrange(1, 5))] for _ in range(n)]
        need = share_threshold(share_frac, n)
        needs.add(need)
        frac = Layout("hybrid", share_frac=share_frac, positions=positions)
        count = Layout("hybrid", share_min=need, positions=positions)
        for union_len in (6, 40):
            assert build_rows(QUERY, items, union_len, CLS, SEP, frac) == build_rows(
                QUERY, items, union_len, CLS, SEP, count
            )
    assert len(needs) > 1  # the lists' lengths gave several thresholds


def test_layout_refuses_bad_share_frac() -> None:
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"share_frac must be in \(0, 1\]"):
            Layout("hybrid", share_frac=bad)
    with pytest.raises(ValueError, match="share_frac=0.5 needs order=hybrid, not union"):
        Layout("union", share_frac=0.5)
    with pytest.raises(ValueError, match="share_frac=0.5 replaces share_min=3"):
        Layout("hybrid", share_min=3, share_frac=0.5)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"order": "hybrid", "share_frac": "1.5"},
            "option share_frac=1.5: must be between 0 and 1",
        ),
        ({"order": "hybrid", "share_frac": "-0.2"}, "option share_frac=-0.2: must be between 0"),
        (
            {"order": "concat", "share_frac": "0.04"},
            "share_frac=0.04 has no effect under order=concat (share_frac=0.04 needs order=hybrid)",
        ),
        (
            {"order": "hybrid", "share_min": "4", "share_frac": "0.04"},
            "option share_frac=0.04 replaces share_min=4",
        ),
    ],
)
def test_share_frac_option_refuses_bad_values_naming_them(
    options: dict[str, object], said: str
) -> None:
    with pytest.raises(RankerError) as caught:
        CrossJEMConfig.from_options(options)
    assert said in str(caught.value)


def test_share_frac_reaches_layout_tag_keys_and_cost_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset, the option is in no config dict (so no existing key changes); set, the config's
    keys, its layout, its latency tag and the cost model's settings all carry it."""
    from bench.latency import lists
    from rankers.base import Role

    plain = CrossJEMConfig.from_options({"order": "hybrid", "share_min": 4})
    assert "share_frac" not in plain.to_dict() and "share_frac" not in plain.to_dict(Role.TRAINING)
    assert plain.layout_tag == "hybrid share_min=4"
    cfg = CrossJEMConfig.from_options({"order": "hybrid", "share_frac": "0.04"})
    assert cfg.to_dict()["share_frac"] == cfg.to_dict(Role.TRAINING)["share_frac"] == 0.04
    assert cfg.layout == Layout("hybrid", share_frac=0.04)
    assert cfg.layout_tag == "hybrid share_frac=0.04"
    monkeypatch.setattr(
        "bench.execution.ranker_settings.ranker_options",
        lambda name, dataset, options=None: dict(options or {}),
    )
    paper = lists.cost_model_ranker("wikiqa", {"crossjem": {"order": "hybrid", "share_frac": 0.04}})
    assert lists.token_settings(paper)["share_frac"] == 0.04
    assert paper.cfg.layout == Layout("hybrid", share_frac=0.04)
    plain_paper = lists.cost_model_ranker("wikiqa", {"crossjem": {"order": "hybrid"}})
    assert "share_frac" not in lists.token_settings(plain_paper)


def test_a_checkpoint_without_share_frac_restores_it_off(tiny_bert: Path, tmp_path: Path) -> None:
    """A saved config leaves share_frac out at its default: loading it turns a caller's
    share_frac off (the checkpoint was trained without it), and a saved share_frac is restored."""
    counted = _ranker(tiny_bert, order="hybrid", share_min=3)
    counted.save(tmp_path / "count")
    asked = _ranker(tiny_bert, order="hybrid", share_frac=0.2)
    asked.load(tmp_path / "count")
    assert (asked.cfg.share_frac, asked.cfg.share_min) == (0.0, 3)
    frac = _ranker(tiny_bert, order="hybrid", share_frac=0.2)
    frac.save(tmp_path / "frac")
    loaded = _ranker(tiny_bert)
    loaded.load(tmp_path / "frac")
    assert (loaded.cfg.order, loaded.cfg.share_frac) == ("hybrid", 0.2)
