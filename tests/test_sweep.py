"""bench sweep: a grid trained and scored on dev and test, chosen on dev, written to the
settings file with the sweep as a comment."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from toydata import write_toy_mteb

from bench.execution.runner import RunOptions, run
from bench.experiments.sweep import (
    Sweep,
    SweepRow,
    combinations,
    parse_grid,
    run_sweep,
    table_lines,
    write_chosen,
)
from rankers import RankerError


@pytest.fixture()
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path) -> Path:
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "monobert.yaml").write_text(
        "# monoBERT settings\n"
        f"default:\n  model: {tiny_bert}\n  epochs: 1\n  loss: bce\n"
        "datasets:\n  # the toy set's items are short\n  toy: {max_item_len: 8}\n"
    )
    monkeypatch.setattr("bench.execution.ranker_settings.CONFIG_DIR", folder)
    return folder


def _base(tmp_path: Path) -> RunOptions:
    write_toy_mteb(tmp_path / "data" / "toy")
    return RunOptions(
        ranker="monobert",
        dataset="toy",
        data_dir=tmp_path / "data",
        device="cpu",
        warmup=0,
        progress=False,
    )


def test_grid_parsing_and_order() -> None:
    grid = parse_grid({"lr": "3e-5, 1e-4", "epochs": "3,6"})
    assert grid == {"lr": ["3e-5", "1e-4"], "epochs": ["3", "6"]}
    assert combinations(grid) == [
        {"lr": "3e-5", "epochs": "3"},
        {"lr": "3e-5", "epochs": "6"},
        {"lr": "1e-4", "epochs": "3"},
        {"lr": "1e-4", "epochs": "6"},
    ]
    with pytest.raises(ValueError, match="--set lr=1e-4,"):
        parse_grid({"lr": "1e-4,"})


def test_sweep_chooses_on_dev_and_writes_the_settings_file(
    configs: Path, tmp_path: Path, results_dir: Path
) -> None:
    base = _base(tmp_path)
    sweep = run_sweep(base, {"lr": ["1e-6", "5e-3"]}, command="bench sweep -r monobert -d toy")
    assert [r.settings for r in sweep.rows] == [{"lr": "1e-6"}, {"lr": "5e-3"}]
    for row in sweep.rows:  # each row's scores are those of its own dev and test runs
        opts = RunOptions(**{**base.__dict__, "options": row.settings})
        assert row.test == run(opts).metrics
        assert row.dev == run(RunOptions(**{**opts.__dict__, "split": "dev"})).metrics["AP@10"]
    devs = [r.dev for r in sweep.rows]
    assert sweep.chosen == devs.index(max(devs))

    written = write_chosen(sweep)
    chosen_lr = float(sweep.rows[sweep.chosen].settings["lr"])
    assert written.settings == {"max_item_len": 8, "lr": chosen_lr} and written.kept is None
    text = (configs / "monobert.yaml").read_text()
    data = yaml.safe_load(text)
    assert data["datasets"]["toy"] == {"max_item_len": 8, "lr": chosen_lr}
    assert data["default"]["epochs"] == 1
    assert "# monoBERT settings" in text and "# the toy set's items are short" in text
    assert "  # sweep (" in text and "bench sweep -r monobert -d toy" in text
    assert f"chosen on dev: lr={sweep.rows[sweep.chosen].settings['lr']}" in text

    # a second sweep adds its comment after the first one's and keeps the other comments
    write_chosen(sweep)
    again = (configs / "monobert.yaml").read_text()
    assert again.count("  # sweep (") == 2 and "# the toy set's items are short" in again


def test_a_bad_value_stops_the_sweep_before_any_training(
    configs: Path, tmp_path: Path, results_dir: Path
) -> None:
    with pytest.raises(RankerError, match="sweep setting epochs=0"):
        run_sweep(_base(tmp_path), {"epochs": ["1", "0"]})
    with pytest.raises(ValueError, match="--measure 'AP@1O'"):
        run_sweep(_base(tmp_path / "m"), {"epochs": ["1"]}, measure="AP@1O")
    assert not (results_dir / "models").exists()


def test_written_settings_add_a_dataset_section(tmp_path: Path) -> None:
    path = tmp_path / "crossjem.yaml"
    path.write_text("# CROSS-JEM\ndefault:\n  lr: 1.0e-4\ndatasets: {}\n")
    row = SweepRow({"epochs": "6", "lr": "3e-5"}, 0.7, {"AP@10": 0.6}, 4, 12.0, "d", "t")
    other = SweepRow({"epochs": "3", "lr": "1e-4"}, 0.6, {"AP@10": 0.65}, 3, 9.0, "d", "t")
    sweep = Sweep("crossjem", "wikiqa", "AP@10", "dev", "test", "bench sweep", [other, row])
    assert write_chosen(sweep, path).settings == {"epochs": 6, "lr": 3e-5}
    data = yaml.safe_load(path.read_text())
    assert data == {"default": {"lr": 1e-4}, "datasets": {"wikiqa": {"epochs": 6, "lr": 3e-5}}}
    lines = table_lines(sweep)
    assert lines[0].split() == [
        "epochs",
        "lr",
        "dev",
        "AP@10",
        "test",
        "AP@10",
        "epoch",
        "train",
        "s",
    ]
    assert lines[2].split() == ["6", "3e-5", "0.7000", "0.6000", "4", "12"]
    assert lines[-1] == "chosen on dev: epochs=6, lr=3e-5"


def test_a_trainable_ranker_is_trained_for_every_combination(tmp_path: Path) -> None:
    """A zero-shot DPR would otherwise score every learning rate the same: the sweep trains
    each combination of a trainable ranker; BM25 (nothing to train) only scores."""
    from bench.experiments.sweep import sweep_runs

    base = _base(tmp_path)
    _, dpr = sweep_runs(RunOptions(**{**base.__dict__, "ranker": "dpr"}), {"lr": ["1e-5"]})
    assert [(test.fit, dev.fit) for _, test, dev in dpr] == [(True, True)]
    _, bm25 = sweep_runs(RunOptions(**{**base.__dict__, "ranker": "bm25"}), {"k1": ["0.9", "1.2"]})
    assert [(test.fit, dev.fit) for _, test, dev in bm25] == [(False, False)] * 2
