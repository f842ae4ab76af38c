"""Ranker interface, registry, options, BM25 and the first-stage row."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pytest

from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from rankers import RankerError, available, canonical_name, create_ranker, get_ranker_class
from rankers.base import RankerConfig, Role, TrainingConfig, option_spec
from rankers.families.bm25 import BM25Ranker
from rankers.inputs.lexical import tokenize


def _split(lists: list[CandidateList]) -> RankingSplit:
    return RankingSplit("toy", "test", lists, {cl.query.qid: {} for cl in lists})


def test_unknown_ranker_lists_known_ones() -> None:
    with pytest.raises(RankerError) as exc:
        canonical_name("monobart")
    for name in ("bm25", "dpr", "ance", "firststage"):
        assert name in str(exc.value)
    assert canonical_name("BM25") == "bm25"
    assert set(available()) >= {"bm25", "dpr", "ance", "firststage"}


@dataclass
class _Cfg(RankerConfig):
    lr: float = 1e-4
    epochs: int = 1
    positions: bool = False
    name: str | None = None
    sizes: list[int] | None = None


def test_options_are_converted_by_field_type() -> None:
    cfg = _Cfg.from_options(
        {"lr": "2e-5", "epochs": "3", "positions": "yes", "name": "none", "sizes": "1,2"}
    )
    assert cfg == _Cfg(lr=2e-5, epochs=3, positions=True, name=None, sizes=[1, 2])
    with pytest.raises(RankerError, match="epochs='x': expected int"):
        _Cfg.from_options({"epochs": "x"})
    with pytest.raises(RankerError, match="known: epochs, lr, name, positions, sizes"):
        _Cfg.from_options({"epoch": "3"})


def test_every_trainable_config_is_a_training_config() -> None:
    # the one training loop reads the shared options from any trainable ranker's config
    for name in available():
        cls = get_ranker_class(name)
        assert issubclass(cls.Config, TrainingConfig) == cls.trainable, name


def test_a_ranker_specific_default_and_help_keep_the_role_and_range() -> None:
    dense = {f.name: f for f in dataclasses.fields(get_ranker_class("dpr").Config)}
    seed = option_spec(dense["seed"])
    assert seed is not None and (seed.role, seed.help) == (Role.TRAINING, "shuffling and dropout")
    assert dense["seed"].default == 42
    epochs = option_spec(dense["epochs"])
    assert epochs is not None and (epochs.min, epochs.help) == (1, "passes over the training pairs")


def test_unknown_option_for_a_real_ranker() -> None:
    with pytest.raises(RankerError, match="known: b, k1"):
        create_ranker("bm25", {"k3": "1"})


def test_bm25_tokenization_is_lowercase_word_runs() -> None:
    assert tokenize("How do I sort a Python-dict? (3.x)") == [
        "how",
        "do",
        "i",
        "sort",
        "a",
        "python",
        "dict",
        "3",
        "x",
    ]


def test_bm25_uses_the_whole_collection_not_the_list() -> None:
    # Collection of 4 two-word documents; the list to rank holds only d1 and d2.
    docs = {"d1": "apple banana", "d2": "banana cherry", "d3": "cherry date", "d4": "date fig"}
    full = CandidateList(Query("q", "apple"), tuple(Candidate(d, t) for d, t in docs.items()))
    short = CandidateList(Query("q", "apple"), full.candidates[:2])
    ranker = BM25Ranker()
    ranker.index(_split([full]))
    (scores,) = ranker.score([short])
    # idf(apple) over N=4 docs, n=1: ln((4 - 1 + 0.5) / (1 + 0.5)); every doc has length avgdl=2,
    # so the tf part is tf*(k1+1)/(tf+k1) = 1 for tf=1.
    assert scores[0] == pytest.approx(math.log(3.5 / 1.5))
    assert scores[1] == 0.0
    # Fitted on the 2-document list alone, idf(apple) = ln(1.5/1.5) = 0: no signal at all.
    alone = BM25Ranker()
    alone.index(_split([short]))
    assert alone.score([short])[0].tolist() == [0.0, 0.0]


def test_bm25_requires_index() -> None:
    with pytest.raises(RankerError, match="index"):
        BM25Ranker().score([])


def test_firststage_uses_run_scores_and_refuses_files_without_them() -> None:
    scored = CandidateList(Query("q", "x"), (Candidate("a", "a", 3.0), Candidate("b", "b", 7.5)))
    ranker = get_ranker_class("firststage")()
    ranker.index(_split([scored]))
    assert np.array_equal(ranker.score([scored])[0], [3.0, 7.5])
    unscored = CandidateList(Query("q", "x"), (Candidate("a", "a"), Candidate("b", "b")))
    with pytest.raises(RankerError, match="no first-stage scores"):
        ranker.index(_split([unscored]))
