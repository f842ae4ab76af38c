"""A training step is bounded by what it holds, not by a count of lists (issue 31): option
``train_max_items`` keeps each train list's positives and a seeded sample of its negatives, so a
step holds at most ``train_batch_queries x train_max_items`` items however long the lists are."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from toydata import WORDS

from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from rankers.base import RankerError
from rankers.targets import cap_lists


def _long_split(n_queries: int, n_items: int, seed: int = 0) -> RankingSplit:
    """Lists of ``n_items`` three-word items; item 3 and item ``n_items - 2`` are relevant."""
    rng = random.Random(seed)
    lists, qrels = [], {}
    for q in range(n_queries):
        cands = tuple(Candidate(f"d{i}", " ".join(rng.sample(WORDS, 3))) for i in range(n_items))
        qid = f"q{q}"
        lists.append(CandidateList(Query(qid, WORDS[q % len(WORDS)]), cands))
        qrels[qid] = {"d3": 1, f"d{n_items - 2}": 2, "d5": 0}
    return RankingSplit(dataset="long", split="train", lists=lists, qrels=qrels, checksum="long")


def test_cap_keeps_positives_and_a_seeded_sample_of_negatives() -> None:
    split = _long_split(3, 10)
    capped = cap_lists(split.lists, split.qrels, 4, seed=0)
    for before, after in zip(split.lists, capped, strict=True):
        ids = after.docids
        assert len(ids) == 4 and {"d3", "d8"} <= set(ids)  # both positives kept
        assert list(ids) == [d for d in before.docids if d in ids]  # the list's own order
    assert cap_lists(split.lists, split.qrels, 4, seed=0) == capped  # same seed, same lists
    other = cap_lists(split.lists, split.qrels, 4, seed=1)
    assert [cl.docids for cl in other] != [cl.docids for cl in capped]
    assert cap_lists(split.lists, split.qrels, 10, seed=0) == split.lists  # short lists stay
    # more positives than the cap: the first ones, no negative
    (one,) = cap_lists(split.lists[:1], split.qrels, 1, seed=0)
    assert one.docids == ["d3"]


@pytest.mark.parametrize("kind", ["monobert", "crossjem"])
def test_a_step_on_lists_of_hundreds_holds_at_most_the_cap(
    kind: str, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 candidates a list, 2 lists a step: with train_max_items=16 no step prepares more than
    32 items; with 0 (whole lists) a step holds 600, so the count sees the cap."""
    from rankers.crossjem import CrossJEMRanker
    from rankers.monobert import MonoBERTRanker

    cls: Any = {"monobert": MonoBERTRanker, "crossjem": CrossJEMRanker}[kind]
    split = _long_split(4, 300)
    largest: dict[int, int] = {}
    for cap in (16, 0):
        options = {"model": str(tiny_bert), "epochs": 1, "min_steps": 0, "train_batch_queries": 2}
        ranker = cls(cls.Config.from_options({**options, "train_max_items": cap}), "cpu")
        prepare = ranker.prepare
        sizes: list[int] = []

        def counted(lists: Any, prepare: Any = prepare, sizes: list[int] = sizes) -> Any:
            sizes.append(sum(len(items) for _, items in lists))
            return prepare(lists)

        monkeypatch.setattr(ranker, "prepare", counted)
        ranker.fit(split)
        largest[cap] = max(sizes)
    assert largest == {16: 32, 0: 600}


def test_cap_options_are_checked(tiny_bert: Path) -> None:
    from rankers.monobert import MonoBERTRanker

    with pytest.raises(RankerError, match="train_max_items=1 leaves a list one item"):
        MonoBERTRanker.Config.from_options({"train_max_items": 1})
    with pytest.raises(RankerError, match="train_list_size=100 grows lists beyond"):
        MonoBERTRanker.Config.from_options({"train_list_size": 100, "train_max_items": 64})
