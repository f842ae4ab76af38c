"""The typed training summary reads and writes the JSON the untyped dict had:
records written before it still read, field for field, and a written summary has the old names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core.trained import ListTraining, TrainingSummary

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference" / "word-order"


@pytest.mark.parametrize("name", ["wikiqa-concat-row", "wikiqa-concat-item", "wikiqa-hybrid-item"])
def test_reference_records_round_trip(name: str) -> None:
    training = json.loads((REFERENCE / f"{name}.json").read_text())["training"]
    summary = TrainingSummary.from_json(training)
    written = summary.to_json()
    assert {k: v for k, v in written.items() if k in training} == training
    # these records predate steps_planned: it reads as unknown
    assert {k: v for k, v in written.items() if k not in training} == {"steps_planned": None}
    # typed access to what readers used to pick by string keys
    assert summary.dev_scores == training["dev_AP@10"]
    assert summary.best_epoch == training["best_epoch"]
    assert summary.lists is not None and summary.lists.loss_name == training["loss_name"]
    assert "model_dir" in summary.extra and "loss_name" not in summary.extra


def test_summary_json_names() -> None:
    summary = TrainingSummary(
        epochs=2,
        best_epoch=2,
        dev_scores=[0.25, None],
        dev_before=0.1,
        lists=ListTraining("bce", "qrels grades", None, 3, 9, 9, 4),
        extra={"list_size": 32},
    )
    data = summary.to_json()
    assert data["dev_AP@10"] == [0.25, None] and data["dev_AP@10_before"] == 0.1
    assert (data["loss_name"], data["train_batch_queries"], data["list_size"]) == ("bce", 4, 32)
    assert "dev_scores" not in data and "lists" not in data and "extra" not in data
    assert summary.kept_dev_score() is None  # the kept epoch has no dev score
    assert TrainingSummary(best_epoch=1, dev_scores=[0.5]).kept_dev_score() == 0.5
    assert TrainingSummary.from_json(data) == summary
