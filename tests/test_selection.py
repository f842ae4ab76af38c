"""bench.execution.selection: the records `bench run` would reuse now, on real BM25 runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bench.execution.runner import RunOptions, run
from bench.execution.selection import (
    OTHER_CODE,
    OTHER_DATA,
    UNKNOWN_INPUTS,
    UNREADABLE_DATA,
    CurrentInputs,
    load_selected,
    select_records,
)


def test_runs_of_any_options_are_current_and_others_are_counted(
    shared_data: Path, results_dir: Path
) -> None:
    full = run(RunOptions("bm25", "semeval16b", data_dir=shared_data, progress=False))
    smoke = run(RunOptions("bm25", "semeval16b", subset=5, data_dir=shared_data, progress=False))
    tuned = run(
        RunOptions("bm25", "semeval16b", options={"k1": 1.2}, data_dir=shared_data, progress=False)
    )
    selection = load_selected(results_dir, shared_data)
    assert {r.path for r in selection.records} == {full.path, smoke.path, tuned.path}
    assert selection.summary() is None

    assert full.key_parts is not None
    old_code = dataclasses.replace(full, key_parts={**full.key_parts, "code": "0" * 12})
    other_model = dataclasses.replace(full, training={"key_parts": {"data": "1" * 12}})
    made_up = dataclasses.replace(full, key_parts=None)
    inputs = CurrentInputs(shared_data)
    chosen = select_records([full, old_code, other_model, made_up, smoke], inputs=inputs)
    assert chosen.records == [full, smoke]
    assert chosen.left_out == {
        OTHER_CODE: [old_code],
        OTHER_DATA: [other_model],
        UNKNOWN_INPUTS: [made_up],
    }
    assert chosen.summary() == (
        "3 records left out (1 of other code, 1 of other data, 1 of unrecorded inputs); "
        "--all-records shows them"
    )
    assert select_records([old_code], inputs=inputs).summary() == (
        "1 record of other code left out; --all-records shows them"
    )
    every = select_records([full, old_code], all_records=True, inputs=inputs)
    assert every.records[0] is full and every.summary() is None
    assert every.records[1].label == f"{old_code.label} (STALE: other code)"
    assert every.records[1].metrics == old_code.metrics


def test_a_card_changed_and_changed_back_selects_the_first_record(
    shared_data: Path, tmp_path: Path, results_dir: Path
) -> None:
    """The record made under a card since changed back is left out, though it is the newest: it
    describes data that is not the data now."""
    import shutil
    import time

    data = tmp_path / "data"
    shutil.copytree(shared_data / "semeval16b", data / "semeval16b")
    card = data / "semeval16b" / "card.yaml"
    card.write_text("layout: mteb\n")
    opts = RunOptions("bm25", "semeval16b", data_dir=data, progress=False)
    first = run(opts)
    card.write_text("layout: mteb\nhf_revision: another\n")
    time.sleep(1.1)  # a later `created`
    other = run(opts)
    card.write_text("layout: mteb\n")
    assert run(opts).path == first.path  # reused
    assert other.path != first.path and other.created > first.created
    selection = load_selected(results_dir, data)
    assert [r.path for r in selection.records] == [first.path]
    assert [r.path for r in selection.left_out[OTHER_DATA]] == [other.path]
    assert selection.summary() == "1 record of other data left out; --all-records shows them"


def test_unreadable_data_and_a_trained_models_code_are_checked(
    shared_data: Path, tmp_path: Path, results_dir: Path
) -> None:
    """The outcomes the other tests do not reach: a split that cannot be read now, and a
    record whose model was trained by other training code (or on other train data)."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(shared_data / "semeval16b", data / "semeval16b")
    record = run(RunOptions("bm25", "semeval16b", data_dir=data, progress=False))
    inputs = CurrentInputs(data)
    assert select_records([record], inputs=inputs).records == [record]
    trained_on = inputs.training_data("semeval16b")
    assert trained_on is not None
    train_code = inputs.code(record.ranker, "train")
    model = {"key_parts": {"data": trained_on, "code": train_code}}
    current = dataclasses.replace(record, training=model)
    assert select_records([current], inputs=inputs).records == [current]
    other_code = dataclasses.replace(
        record, training={"key_parts": {"data": trained_on, "code": "0" * 12}}
    )
    other_train = dataclasses.replace(
        record, training={"key_parts": {"data": "1" * 12, "code": train_code}}
    )
    chosen = select_records([other_code, other_train], inputs=inputs)
    assert chosen.left_out == {OTHER_CODE: [other_code], OTHER_DATA: [other_train]}
    # the train split gone: the trained model's data cannot be told now
    (data / "semeval16b" / "train.jsonl").unlink()
    assert select_records([current], inputs=CurrentInputs(data)).left_out == {
        UNREADABLE_DATA: [current]
    }
    # the test split gone: nor can the run's
    (data / "semeval16b" / "test.jsonl").unlink()
    assert select_records([record], inputs=CurrentInputs(data)).left_out == {
        UNREADABLE_DATA: [record]
    }
