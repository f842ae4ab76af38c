"""CROSS-JEM ``union_len=auto``: candidate lengths, the FLOP cost of packed rows, the choice on
hand-made lists, where auto is refused, the record of a latency run, and semeval16b's test rows
(which every choice leaves as they are)."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from bench.data.model import Candidate, CandidateList, Query
from bench.execution.ranker_settings import ranker_options
from bench.latency.plan import chosen_options, entries_for, with_latency_defaults
from bench.results.records import config_hash
from rankers.base import RankerError
from rankers.families.crossjem.packed import pack_lists
from rankers.families.crossjem.ranker import CrossJEMConfig, CrossJEMRanker
from rankers.families.crossjem.rowlength import FlopCost, candidate_lengths
from rankers.hooks import EncoderCall
from rankers.inputs.tokens import tokenise_items


class NumberTokenizer:
    """``"w12 w13"`` -> ids 12, 13: lists whose shared tokens are written out by hand."""

    cls_token_id, sep_token_id, pad_token_id = 1, 2, 0

    def __call__(self, texts, add_special_tokens, truncation, max_length):  # noqa: ANN001
        return {"input_ids": [[int(w[1:]) for w in t.split()][:max_length] for t in texts]}


def _items(*token_sets: range | list[int]) -> CandidateList:
    cands = tuple(
        Candidate(f"d{i}", " ".join(f"w{t}" for t in ids)) for i, ids in enumerate(token_sets)
    )
    return CandidateList(Query("q", "w9"), cands)


#: one layer, d = d_ff = 1: a call costs 12 per token (linear) plus 4 width^2 per row
#: (attention); 74 positions leave union_len 70 to a query of one token
TINY = types.SimpleNamespace(
    hidden_size=1, intermediate_size=1, num_hidden_layers=1, max_position_embeddings=74
)


def _ranker(**options: object) -> CrossJEMRanker:
    config = {"union_len": "auto", "max_query_len": 1, "max_item_len": 32, **options}
    return CrossJEMRanker(CrossJEMConfig.from_options(config))


def test_candidate_lengths_are_multiples_of_32_and_the_longest() -> None:
    assert candidate_lengths(32, 477) == (32, *range(64, 477, 32), 477)
    assert candidate_lengths(40, 100) == (64, 96, 100)
    assert candidate_lengths(64, 64) == (64,)
    with pytest.raises(ValueError, match="an item needs 65 tokens and the encoder's positions"):
        candidate_lengths(65, 64)


def test_flop_cost_of_a_call_by_hand() -> None:
    # 2 rows x 3 tokens, d=4, d_ff=8: 2 x 6 x (4 x 16 + 2 x 4 x 8) + 4 x 2 x 9 x 4 per layer
    cost = FlopCost(hidden=4, intermediate=8)
    assert cost(EncoderCall(rows=2, width=3, layers=1, masked=False)) == 1536 + 288
    assert cost(EncoderCall(rows=2, width=3, layers=6, masked=True)) == 6 * 1824
    assert FlopCost(4, 8, attention_weight=0.0)(EncoderCall(2, 3, 1, False)) == 1536


def test_auto_picks_the_predicted_cheapest_length_on_hand_made_lists() -> None:
    tokenizer, ranker = NumberTokenizer(), _ranker()
    # four titles of 32 tokens sharing 30: the union (38 tokens) fits one row from 64 on.
    # 32: 4 rows of 1 + 32 + 3 = 36 -> 12 x 144 + 4 x 4 x 36^2; 64 and 70: 1 row of 42
    shared = _items(*[[*range(100, 130), 200 + 2 * i, 201 + 2 * i] for i in range(4)])
    choice = ranker.choose_union_len([shared], tokenizer, TINY)
    assert dict(choice.costs) == {32: 22464.0, 64: 7560.0, 70: 7560.0}
    assert choice.union_len == 64  # cheapest; 70 costs the same and is longer
    # four items sharing nothing: 64 holds two per row (2 rows of 68), and attention on the
    # longer rows costs more than the tokens they save
    apart = _items(*[range(100 + 32 * i, 132 + 32 * i) for i in range(4)])
    choice = ranker.choose_union_len([apart], tokenizer, TINY)
    assert dict(choice.costs) == {32: 22464.0, 64: 38624.0, 70: 38624.0}
    assert choice.union_len == 32
    # without the attention term longer rows win: the quadratic term decides
    linear = FlopCost(1, 1, attention_weight=0.0)
    assert ranker.choose_union_len([apart], tokenizer, TINY, linear).union_len == 64
    # the choice is over every list: two lists of each kind pick 32 (2 x 22464 + ...)
    both = ranker.choose_union_len([shared, apart], tokenizer, TINY)
    assert dict(both.costs) == {32: 44928.0, 64: 46184.0, 70: 46184.0}
    assert both.union_len == 32


def test_auto_packs_as_scoring_batches() -> None:
    """With the padding tolerance a GPU gets (1.0: twice the padding in one call) the shared
    list's row of 42 joins the other list's two rows of 68 in one call of width 68."""
    shared = _items(*[[*range(100, 130), 200 + 2 * i, 201 + 2 * i] for i in range(4)])
    apart = _items(*[range(100 + 32 * i, 132 + 32 * i) for i in range(4)])
    ranker = _ranker(pad_tolerance=1.0)
    choice = ranker.choose_union_len([shared, apart], NumberTokenizer(), TINY)
    # 64: 3 rows of 68, 12 x 204 + 4 x 3 x 68^2
    assert dict(choice.costs) == {32: 44928.0, 64: 57936.0, 70: 57936.0}


def test_auto_choice_does_not_depend_on_candidate_order() -> None:
    tokenizer, ranker = NumberTokenizer(), _ranker()
    items = [[*range(100, 130), 200 + 2 * i, 201 + 2 * i] for i in range(4)]
    forward = ranker.choose_union_len([_items(*items)], tokenizer, TINY)
    backward = ranker.choose_union_len([_items(*items[::-1])], tokenizer, TINY)
    assert forward == backward


def test_union_len_auto_parses_and_bad_words_are_named() -> None:
    assert CrossJEMConfig.from_options({"union_len": "auto"}).union_len == "auto"
    assert CrossJEMConfig.from_options({"union_len": "300"}).union_len == 300
    with pytest.raises(RankerError, match=r"option union_len='often': expected a number >= 1 or"):
        CrossJEMConfig.from_options({"union_len": "often"})
    with pytest.raises(RankerError, match=r"option union_len=0: must be >= 1 or auto"):
        CrossJEMConfig.from_options({"union_len": "0"})


def test_auto_is_refused_where_rows_need_one_length() -> None:
    ranker = _ranker()
    with pytest.raises(RankerError, match="bench latency chooses it per N; bench run and train"):
        ranker.check_model()
    with pytest.raises(RankerError, match="union_len=auto"):
        ranker.training_step_shape([10])


def test_latency_uses_auto_unless_set_or_trained() -> None:
    given = {"crossjem": {"order": "union"}, "monobert": {"batch_size": 8}}
    out = with_latency_defaults(given, ["monobert", "crossjem"], {})
    assert out["crossjem"] == {"union_len": "auto", "order": "union"}
    assert out["monobert"] == {"batch_size": 8}
    explicit = with_latency_defaults({"crossjem": {"union_len": 242}}, ["crossjem"], {})
    assert explicit == {"crossjem": {"union_len": 242}}
    trained = with_latency_defaults({}, ["crossjem"], {"crossjem": "/some/checkpoint"})
    assert trained == {}


def test_chosen_value_keys_entries_as_the_same_value_given(shared_data: Path) -> None:
    """The entries timed (their options are the rows' and the ranker's config) hold the chosen
    number, never the word: a key differs from one of the value given only when the chosen
    value differs."""
    from bench.data.splits import load_split
    from bench.latency.lists import bm25_lists

    lists = bm25_lists(load_split("semeval16b", "test", shared_data), 100, queries=2).lists
    auto = {"crossjem": {"union_len": "auto", "order": "union"}}
    chosen = chosen_options(["crossjem"], "semeval16b", auto, lists)
    value = chosen["crossjem"]["union_len"]
    assert isinstance(value, int) and value != 72  # the settings file's value for semeval16b
    resolved = {"crossjem": {**auto["crossjem"], **chosen["crossjem"]}}
    from_auto = entries_for(["crossjem"], "semeval16b", 100, 1, options=resolved)
    assert [e.options["union_len"] for e in from_auto] == [value, value]  # both modes
    given = {"crossjem": {"order": "union", "union_len": value}}
    from_value = entries_for(["crossjem"], "semeval16b", 100, 1, options=given)
    assert [e.options for e in from_auto] == [e.options for e in from_value]
    other = {"crossjem": {"order": "union", "union_len": value + 32}}
    from_other = entries_for(["crossjem"], "semeval16b", 100, 1, options=other)
    for a, b in zip(from_auto, from_other, strict=True):
        assert config_hash(a.options) != config_hash(b.options)
    # the same lists choose the same value again
    assert chosen_options(["crossjem"], "semeval16b", auto, lists) == chosen


def test_semeval16b_test_rows_are_the_same_under_the_settings_value_and_auto(
    shared_data: Path,
) -> None:
    """semeval16b's published CROSS-JEM accuracy was trained and scored at union_len 72: every
    test list (10 items) fits one row at 72, at the old default 242 and at the length auto
    chooses, so every packed array is identical under each."""
    from transformers import AutoConfig, AutoTokenizer

    from bench.data.splits import load_split
    from rankers.io.models import resolve_model

    split = load_split("semeval16b", "test", shared_data)
    options = ranker_options("crossjem", "semeval16b")
    assert options["union_len"] == 72
    cfg = CrossJEMConfig.from_options({**options, "union_len": "auto"})
    ranker = CrossJEMRanker(cfg)
    path = resolve_model(cfg.model).path
    tokenizer, encoder = AutoTokenizer.from_pretrained(path), AutoConfig.from_pretrained(path)
    chosen = ranker.choose_union_len(split.lists, tokenizer, encoder).union_len
    assert chosen not in (72, 242)
    layout = cfg.layout.bind(tokenizer)
    special = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
    for cl in split.lists:
        # the settings file's value, the old default, auto over the split and over this list
        own = ranker.choose_union_len([cl], tokenizer, encoder).union_len
        lengths = [72, 242, chosen, own]
        query = np.asarray(tokenizer([cl.query.text], add_special_tokens=False)["input_ids"][0])
        items = tokenise_items(tokenizer, cl.texts, cfg.max_item_len)
        packs = [
            pack_lists([query[: cfg.max_query_len]], [items], n, *special, 0.05, layout)
            for n in lengths
        ]
        assert packs[0].rows == 1, cl.query.qid
        for other in packs[1:]:
            for name in other.ARRAYS:
                assert np.array_equal(getattr(packs[0], name), getattr(other, name)), name
            assert other.buckets == packs[0].buckets
            assert other.position_ids is None and packs[0].position_ids is None


def test_trained_settings_and_the_ci_regression_keep_their_numbers() -> None:
    """auto is for timing: the settings file's numbers (the published accuracies and the CI
    regression's CROSS-JEM run on wikiqa, order=union) stay what they were trained with."""
    regression = {"epochs": 1, "teacher": "none", "min_steps": 0, "order": "union"}
    config = CrossJEMConfig.from_options(ranker_options("crossjem", "wikiqa", regression))
    assert config.union_len == config.fixed_union_len == 272
    assert ranker_options("crossjem", "semeval16b")["union_len"] == 72
    assert CrossJEMConfig().union_len == 242
