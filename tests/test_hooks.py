"""The thin Ranker contract and its hook groups (rankers/hooks.py)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from toydata import gold_split

from bench.data.model import CandidateList
from rankers.base import Ranker, RankerConfig, RankerError
from rankers.hooks import (
    Exportable,
    Fits,
    InputChecks,
    LatencyParts,
    LatencyVariant,
    Persistent,
    fits,
    input_checks,
    latency_parts,
    view_as,
)


class Bare(Ranker):
    """Only what a ranker must give."""

    name = "bare"
    family = "toy"

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        return [np.arange(len(cl), dtype=float) for cl in lists]


class Partial(Bare):
    """Two hooks of two groups, without naming the protocols (a ranker of the older layout)."""

    def weights_note(self, checkpoint: str | None) -> str:
        return "own note"

    def untrained_weights(self) -> str | None:
        return "a fresh head"


def test_the_required_surface_is_thin() -> None:
    """The public methods every ranker inherits: scoring, the two persistence entry points and
    its description; the optional parts live in hook groups."""
    public = {
        name
        for name, member in inspect.getmembers(Ranker)
        if not name.startswith("_")
        and name != "Config"
        and (callable(member) or isinstance(member, property))
    }
    assert public == {"cfg", "index", "score", "score_texts", "save", "load", "describe"}
    assert Ranker.__abstractmethods__ == frozenset({"score"})


def test_a_bare_ranker_gets_every_default() -> None:
    ranker = Bare()
    parts = latency_parts(ranker)
    lists = gold_split("toy", 0).lists[:2]
    assert parts.prepare_scoring(lists) is lists
    assert [s.tolist() for s in parts.score_prepared(lists)] == [
        s.tolist() for s in ranker.score(lists)
    ]
    assert parts.encoder_calls(lists) is None
    assert parts.latency_variants([8]) == [LatencyVariant("bare", {}, "bare")]
    assert parts.scoring_mode() == "end-to-end"
    assert parts.compute_dtype() == "n/a"
    assert parts.weights_note("DIR") == "trained (DIR)" and parts.weights_note(None) == "n/a"
    checks = input_checks(ranker)
    assert checks.input_files() == {} and checks.input_fingerprint() is None
    assert checks.input_report(lists) == {}
    assert fits(ranker).untrained_weights() is None
    assert fits(ranker).training_step_shape([3, 4]) is None
    with pytest.raises(RankerError, match="ranker 'bare' is not trainable"):
        fits(ranker).fit(gold_split("toy", 0))
    assert view_as(ranker, Persistent).saved_parts() == ()
    assert not isinstance(ranker, Exportable)


def test_a_ranker_keeps_the_hooks_it_defines_and_gets_the_rest() -> None:
    ranker = Partial()
    assert not isinstance(ranker, LatencyParts) and not isinstance(ranker, Fits)
    assert latency_parts(ranker).weights_note("DIR") == "own note"
    assert latency_parts(ranker).scoring_mode() == "end-to-end"
    assert fits(ranker).untrained_weights() == "a fresh head"
    assert fits(ranker).training_step_shape([2]) is None


def test_a_family_naming_the_groups_is_asked_directly() -> None:
    """The built-in families name their groups: the harness gets the ranker itself (no view),
    and the group's defaults come through ordinary inheritance."""
    from rankers.families.bm25 import BM25Ranker
    from rankers.families.runfile import RunFileRanker

    bm25 = BM25Ranker()
    assert latency_parts(bm25) is bm25
    assert bm25.latency_variants(None) == [LatencyVariant("bm25", {}, "bm25")]
    assert issubclass(RunFileRanker, InputChecks)


def test_the_default_weights_hooks_need_a_training_module(tmp_path: Path) -> None:
    class Trainable(Bare):
        trainable = True

        def training_module(self) -> object:
            raise AssertionError("not reached: the folder check fails first")

    assert view_as(Trainable(), Persistent).saved_parts() == ("weights.safetensors",)
    with pytest.raises(RankerError, match="not a bare checkpoint"):
        Trainable().load(tmp_path)


def test_a_ranker_without_options_keeps_the_default_config() -> None:
    assert isinstance(Bare().config, RankerConfig)
