"""What a trainer trains on and for how long: teacher ensembles and target modes, train lists
grown with BM25 negatives, a minimum number of steps and early stopping on dev."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from toydata import gold_split

from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from rankers.base import Ranker, RankerConfig, RankerError
from rankers.families.crossjem.ranker import CrossJEMRanker
from rankers.fit.lists import fit_lists
from rankers.fit.loop import LoopPlan, out_of_patience, planned_epochs
from rankers.fit.resume import Progress
from rankers.fit.targets import (
    ensemble_logits,
    extend_lists,
    sigmoid,
    teacher_parts,
    training_targets,
)
from rankers.inputs.lexical import BM25Index


# -- teachers ------------------------------------------------------------------------------------
def test_teacher_parts(tmp_path: Path) -> None:
    assert teacher_parts("monobert") == ["monobert"]
    assert teacher_parts("monobert+colbert") == ["monobert", "colbert"]
    assert teacher_parts(" monobert + rankt5 ") == ["monobert", "rankt5"]
    folder = tmp_path / "model+v2"
    folder.mkdir()
    assert teacher_parts(str(folder)) == [str(folder)]  # an existing folder stays whole
    with pytest.raises(RankerError, match="empty member"):
        teacher_parts("monobert++colbert")


def test_ensemble_averages_per_list_z_scores() -> None:
    one = [np.array([0.5, -2.0, 3.0])]
    assert np.array_equal(ensemble_logits([one])[0], one[0])  # one teacher: its logits as they are
    a = [np.array([1.0, 2.0, 3.0]), np.array([4.0, 4.0])]
    b = [np.array([10.0, 10.0, 40.0]), np.array([0.0, 1.0])]
    lists = ensemble_logits([a, b])
    # a: mean 2, std sqrt(2/3) -> -1.2247, 0, 1.2247
    # b: mean 20, std sqrt(200) -> -0.7071, -0.7071, 1.4142
    expected = [(-1.224745 - 0.707107) / 2, (0.0 - 0.707107) / 2, (1.224745 + 1.414214) / 2]
    assert lists[0] == pytest.approx(expected, abs=1e-6)
    assert lists[1] == pytest.approx([(0.0 - 1.0) / 2, (0.0 + 1.0) / 2])  # constant list: zeros


class FixedTeacher(Ranker):
    """Scores item i of every list with ``offset + i``: known logits for the target tests."""

    name = "fixed"
    family = "test"
    Config = RankerConfig

    def __init__(self, offset: float) -> None:
        super().__init__(RankerConfig())
        self.offset = offset

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        return [self.offset + np.arange(len(cl), dtype=np.float64) for cl in lists]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "weights_hash": f"fixed{self.offset:g}"}


class RankTeacher(Ranker):
    """Scores item i of every list ``sign x i`` and counts its calls: ``+1`` ranks the last item
    first, ``-1`` the first."""

    name = "rank"
    family = "test"
    Config = RankerConfig

    def __init__(self, sign: float) -> None:
        super().__init__(RankerConfig())
        self.sign = sign

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        return [self.sign * np.arange(len(cl), dtype=np.float64) for cl in lists]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "weights_hash": f"rank{self.sign:+g}"}


def test_a_repeated_ensemble_member_counts_as_often_as_it_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``up+up+down`` weighs ``up`` 2/3: the targets are the sigmoid of the mean of the members'
    z-scores, (2 z_up + z_down) / 3 = z_up / 3 on lists of three items, where z_up is
    (-1.2247, 0, 1.2247) and z_down its negative (as ``up+down`` would give all 0.5)."""
    from rankers.fit import targets as module

    assert teacher_parts("monobert+monobert+colbert") == ["monobert", "monobert", "colbert"]
    members = {"up": 1.0, "down": -1.0}
    monkeypatch.setattr(module, "load_teacher", lambda path, device: RankTeacher(members[path]))
    student = CrossJEMRanker(CrossJEMRanker.Config.from_options({"teacher": "up+up+down"}))
    train = _three_item_split()
    got = training_targets(student, train, train.lists)
    third = 1.224745 / 3  # z of (0, 1, 2): (i - 1) / sqrt(2/3)
    expected = [1 / (1 + np.exp(third)), 0.5, 1 / (1 + np.exp(-third))]  # 0.39933, 0.5, 0.60067
    for values in got.values:
        assert values == pytest.approx(expected, abs=1e-6)
    assert [m["name"] for m in got.teacher["members"]] == ["rank", "rank", "rank"]
    assert got.source == "teacher rank+1+rank+1+rank-1"


def _three_item_split(texts: tuple[str, str, str] = ("a b", "c d", "e f")) -> RankingSplit:
    """Two queries of three candidates each (ids d0-d2, ``texts``), checksum from the texts."""
    lists = [
        CandidateList(
            Query(f"q{q}", "a"), tuple(Candidate(f"d{i}", t) for i, t in enumerate(texts))
        )
        for q in range(2)
    ]
    qrels = {f"q{q}": {"d0": 1} for q in range(2)}
    return RankingSplit(
        dataset="toy", split="train", lists=lists, qrels=qrels, checksum="-".join(texts)
    )


class LengthTeacher(Ranker):
    """Scores each item by its text's length, and counts its calls."""

    name = "length"
    family = "test"
    Config = RankerConfig
    calls = 0

    def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
        LengthTeacher.calls += 1
        return [np.array([len(t) for t in cl.texts], dtype=np.float64) for cl in lists]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "weights_hash": "length"}


def test_cached_teacher_scores_follow_the_split_texts_not_only_its_ids(tmp_path: Path) -> None:
    """The teacher-score cache is keyed by the split's checksum too: a split whose texts changed
    under the same query and item ids is scored anew, never given the old texts' scores."""
    from rankers.fit.targets import teacher_logits

    teacher = LengthTeacher()
    old, new = _three_item_split(), _three_item_split(("a", "bb", "a much longer text"))
    assert [cl.docids for cl in old.lists] == [cl.docids for cl in new.lists]
    LengthTeacher.calls = 0
    first, path = teacher_logits(teacher, old.lists, old.checksum, tmp_path)
    again, same = teacher_logits(teacher, old.lists, old.checksum, tmp_path)
    assert LengthTeacher.calls == 1 and same == path  # the same split: read from the cache
    assert [s.tolist() for s in again] == [[3.0, 3.0, 3.0]] * 2
    changed, other = teacher_logits(teacher, new.lists, new.checksum, tmp_path)
    assert LengthTeacher.calls == 2 and other != path
    assert [s.tolist() for s in changed] == [[1.0, 2.0, 18.0]] * 2


def test_teacher_scores_option_chooses_sigmoid_or_logits(tiny_bert: Path) -> None:
    train = gold_split("train", 0, n=2)
    teacher = FixedTeacher(-1.0)
    for mode, transform in (("sigmoid", sigmoid), ("logits", lambda x: x)):
        student = CrossJEMRanker(
            CrossJEMRanker.Config.from_options(
                {
                    "model": str(tiny_bert),
                    "teacher": "monobert",
                    "teacher_scores": mode,
                    "union_len": 64,
                }
            )
        )
        targets = training_targets(student, train, train.lists, teacher)
        logits = -1.0 + np.arange(6, dtype=np.float64)
        assert np.allclose(targets.values[0], transform(logits))
        assert targets.teacher["scores"] == mode
        assert targets.source == "teacher fixed-1" + ("" if mode == "sigmoid" else " (logits)")


def test_logits_targets_need_a_loss_that_takes_real_values(tiny_bert: Path) -> None:
    with pytest.raises(RankerError, match="teacher_scores=logits needs a loss"):
        CrossJEMRanker.Config.from_options(
            {"teacher": "monobert", "teacher_scores": "logits", "loss": "ce"}
        )
    config = CrossJEMRanker.Config.from_options(
        {"teacher": "monobert", "teacher_scores": "logits", "loss": "pl"}
    )
    assert config.teacher_scores == "logits"


# -- train lists grown with BM25 negatives -------------------------------------------------------
def _split() -> RankingSplit:
    texts = {
        "q0": ["red apple pie", "green apple tart", "blue sky"],
        "q1": ["apple orchard tour", "pie crust recipe"],
        "q2": ["red apple pie", "sky diving"],  # a copy of q0's first item under another docid
    }
    queries = {"q0": "apple pie", "q1": "apple orchard", "q2": "red sky"}
    lists = [
        CandidateList(
            Query(qid, queries[qid]),
            tuple(Candidate(f"{qid}-{i}", t) for i, t in enumerate(items)),
        )
        for qid, items in texts.items()
    ]
    qrels = {qid: {f"{qid}-0": 1} for qid in texts}
    return RankingSplit(dataset="toy", split="train", lists=lists, qrels=qrels, checksum="x")


def test_lists_grow_with_the_best_bm25_items_not_in_the_list() -> None:
    train = _split()
    grown = extend_lists(train, train.lists, 4)
    assert [len(cl) for cl in grown] == [4, 4, 4]
    collection = train.collection()
    index = BM25Index(collection)
    for before, after in zip(train.lists, grown, strict=True):
        assert after.candidates[: len(before)] == before.candidates  # the given items first
        texts = {c.text for c in before.candidates}
        own = set(before.docids) | {d for d, t in collection.items() if t in texts}
        mined = after.docids[len(before) :]
        assert not set(mined) & own  # neither a listed item nor a copy of one's text
        assert mined == index.top_k(before.query.text, len(mined), exclude=own)
    # q0 lists "red apple pie", so q2's copy of it is never mined for q0, and vice versa
    assert "q2-0" not in grown[0].docids and "q0-0" not in grown[2].docids
    assert extend_lists(train, train.lists, 2) == list(train.lists)  # long enough already


# -- schedule ------------------------------------------------------------------------------------
def test_min_steps_raises_epochs_and_patience_stops() -> None:
    plan = LoopPlan(epochs=3, lr=1e-4, weight_decay=0.0, max_grad_norm=1.0, seed=0, min_steps=50)
    assert planned_epochs(plan, 10) == 5
    assert planned_epochs(plan, 20) == 3  # 60 steps already
    assert planned_epochs(LoopPlan(3, 1e-4, 0.0, 1.0, 0), 1) == 3  # off
    patient = LoopPlan(3, 1e-4, 0.0, 1.0, 0, patience=2)
    assert out_of_patience(patient, Progress(epochs_done=4, best_epoch=2), has_dev=True)
    assert not out_of_patience(patient, Progress(epochs_done=3, best_epoch=2), has_dev=True)
    assert not out_of_patience(patient, Progress(epochs_done=4, best_epoch=2), has_dev=False)


def test_small_train_set_trains_min_steps_and_stops_when_dev_stalls(tiny_bert: Path) -> None:
    """8 lists, 4 a step: 2 steps an epoch, so min_steps=10 plans 5 epochs; with a learning
    rate too small to change the dev ranking, epoch 2 is no better and patience 1 stops there."""
    ranker = CrossJEMRanker(
        CrossJEMRanker.Config.from_options(
            {
                "model": str(tiny_bert),
                "max_item_len": 8,
                "union_len": 64,
                "train_batch_queries": 4,
                "loss": "listnet",
                "epochs": 1,
                "min_steps": 10,
                "patience": 1,
                "lr": 1e-12,
            }
        )
    )
    summary = fit_lists(ranker, gold_split("train", 0, n=8), gold_split("dev", 1, n=4)).to_json()
    assert summary["epochs_planned"] == 5
    assert summary["epochs"] == 2 and summary["stopped_early"] is True
    assert summary["best_epoch"] == 1 and summary["steps"] == 4
