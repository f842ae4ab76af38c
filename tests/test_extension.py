"""A new ranker is one module plus one registry line (plus, optionally, a settings file).

The toy ranker below lives in a module of its own written under ``tmp_path`` (no file of this
repository changes), is registered with one :func:`rankers.register` call, and must then work in
every command that lists, runs, compares or times rankers. A harness change that names rankers
(an if-chain keyed on names, a hard-coded family, a required ``rankers/configs/<name>.yaml``)
breaks this test.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from toydata import write_toy_mteb
from typer.testing import CliRunner

import rankers
from bench.cli.main import app

runner = CliRunner()

#: a complete ranker module: word overlap with the query, a family no built-in ranker has
TOY_MODULE = textwrap.dedent(
    '''
    """Word overlap: a ranker kept outside the repository."""

    from __future__ import annotations

    import dataclasses
    from collections.abc import Sequence

    import numpy as np

    from bench.data.model import CandidateList
    from rankers.base import SCORE, Ranker, RankerConfig, option


    @dataclasses.dataclass
    class OverlapConfig(RankerConfig):
        weight: float = option(1.0, role=SCORE, help="score per shared word", min=0)


    class OverlapRanker(Ranker):
        name = "overlap"
        family = "lexical-toy"
        Config = OverlapConfig
        pointwise = True

        def score(self, lists: Sequence[CandidateList]) -> list[np.ndarray]:
            out = []
            for cl in lists:
                words = set(cl.query.text.split())
                overlap = [len(words & set(c.text.split())) for c in cl.candidates]
                out.append(self.config.weight * np.asarray(overlap, dtype=np.float64))
            return out
    '''
)


@pytest.fixture()
def toy_ranker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Write the module and register it: the one line a new ranker needs. Returns the data root."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "toy_overlap.py").write_text(TOY_MODULE)
    config = plugin / "overlap.yaml"
    config.write_text("default:\n  weight: 2.0\ndatasets:\n  toy: {weight: 3.0}\n")
    monkeypatch.syspath_prepend(str(plugin))
    # registry state is restored after the test, so no other test sees the toy ranker
    monkeypatch.setattr(rankers, "_REGISTRY", dict(rankers._REGISTRY))
    monkeypatch.setattr(rankers, "_CONFIG_FILES", dict(rankers._CONFIG_FILES))
    monkeypatch.delitem(sys.modules, "toy_overlap", raising=False)

    rankers.register("overlap", "toy_overlap:OverlapRanker", config=config)

    data = tmp_path / "data"
    write_toy_mteb(data / "toy")
    monkeypatch.setenv("BENCH_DATA_DIR", str(data))
    return data


def _ok(args: list[str]) -> str:
    # -q: the CLI sets the ``bench`` loggers' level, which outlives the call; at INFO it would
    # leak log records into later tests' caplog
    result = runner.invoke(app, ["-q", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _cells(table: str) -> list[list[str]]:
    """The cells of each row of a rendered table (rich box or markdown), stripped."""
    return [
        [cell.strip() for cell in re.split(r"[│┃|]", line)[1:-1]]
        for line in table.splitlines()
        if re.search(r"[│┃|]", line)
    ]


def _options_of(listing: str, ranker: str) -> list[str]:
    """The option names `bench rankers` lists under ``ranker``'s heading (exact names)."""
    lines = listing.splitlines()
    [start] = [i for i, line in enumerate(lines) if line.strip().startswith(f"{ranker} (")]
    end = next(i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("└"))
    return [row[0] for row in _cells("\n".join(lines[start + 1 : end])) if row and row[0]]


def test_registered_ranker_works_in_every_command(toy_ranker: Path, results_dir: Path) -> None:
    assert "overlap" in rankers.available()  # a list of names: membership, not a substring
    assert _options_of(_ok(["rankers"]), "overlap") == ["option", "weight"]

    _ok(["run", "-r", "overlap", "-d", "toy", "--split", "test", "--device", "cpu"])
    _ok(["run", "-r", "bm25", "-d", "toy", "--split", "test", "--device", "cpu"])
    (record_file,) = results_dir.glob("runs/toy/overlap/*/record.json")
    record = json.loads(record_file.read_text())
    assert record["family"] == "lexical-toy"
    assert record["config"]["weight"] == 3.0  # its own settings file, dataset section
    assert record["metrics"]["P@1"] == 1.0  # the positive shares both query words

    table = _cells(_ok(["compare", "-d", "toy", "--no-reference"]))
    label = "overlap"  # weight=3.0 is its settings file's value, not an override: not named
    assert [row[:2] for row in table[1:]] == [["Sparse", "bm25"], ["lexical-toy", label]]
    rows = json.loads(_ok(["compare", "-d", "toy", "--format", "json"]))
    [row] = [r for r in rows if r["ranker"] == "overlap"]
    assert row["label"] == label and row["metrics"]["P@1"] == 1.0

    quick = ["--queries", "2", "--repeats", "1", "--warmup", "0", "--threads", "1"]
    out = _ok(
        ["latency", "-d", "toy", "--split", "test", "--rankers", "bm25,overlap", "--n-items", "3"]
        + quick
    )
    assert any("overlap" in row for row in _cells(out)), out
    (latency_file,) = results_dir.glob("latency/toy/*.json")
    timed = {row["ranker"] for row in json.loads(latency_file.read_text())["rows"]}
    assert timed == {"bm25", "overlap"}


def test_ranker_without_settings_file_runs_on_its_defaults(
    toy_ranker: Path, results_dir: Path
) -> None:
    rankers.register("overlap", "toy_overlap:OverlapRanker")  # no config: defaults apply
    _ok(["run", "-r", "overlap", "-d", "toy", "--split", "test", "--device", "cpu"])
    (record_file,) = results_dir.glob("runs/toy/overlap/*/record.json")
    assert json.loads(record_file.read_text())["config"]["weight"] == 1.0


def test_register_rejects_a_malformed_target() -> None:
    with pytest.raises(rankers.RankerError, match="module:Class"):
        rankers.register("broken", "toy_overlap.OverlapRanker")
