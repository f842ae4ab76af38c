"""`bench latency` options: every bad value is one clear error before any work, and the table
can show throughput (pairs/s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli.main import app

runner = CliRunner()
BASE = ["latency", "-d", "semeval16b", "--rankers", "bm25", "--n-items", "20"]
QUICK = ["--queries", "3", "--repeats", "1", "--warmup", "1", "--threads", "1"]


@pytest.fixture()
def env(shared_data: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BENCH_DATA_DIR", str(shared_data))
    return results_dir


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--n-items", "30,x"], "--n-items: expected comma-separated integers"),
        (["--n-items", "0"], "--n-items: list sizes must be integers >= 1"),
        (["--batch-queries", "two"], "--batch-queries: expected comma-separated integers"),
        (["--queries", "0"], "--queries must be >= 1, not 0"),
        (["--repeats", "0"], "--repeats must be >= 1, not 0"),
        (["--warmup", "-1"], "--warmup must be >= 0, not -1"),
        (["--stat", "pairs_s"], "unknown statistic 'pairs_s'; valid: total_s, p50_ms"),
        (["--arch", "bert-large"], "--arch 'bert-large' is unknown; known: minilm-l6"),
        (["--format", "latex"], "--format 'latex' is unknown"),
        (["--batch-sizes", "monobert"], "--batch-sizes expects NAME=32,64,all"),
        (["--batch-sizes", "monobert=32,big"], "--batch-sizes: expected comma-separated"),
        (["--monobert-batch-sizes", "0"], "batch size for monobert must be an integer >= 1"),
        (["--rankers", "bm25,monobart"], "unknown ranker 'monobart'"),
        # a run file's scores are read, not computed: the true reason, not a query it "lacks"
        (
            ["--rankers", "runfile", "--set", "path=run.trec"],
            "--rankers runfile: bench latency cannot time it: its scores are read from a run "
            "file, not computed",
        ),
    ],
)
def test_bad_options_fail_before_any_work(env: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*BASE, *args])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and message in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not (env / "latency").exists() and not (env / "models").exists()


def test_throughput_table_and_batch_size_options(env: Path) -> None:
    result = runner.invoke(
        app,
        ["-q", *BASE, *QUICK, "--stat", "candidates_per_s", "--batch-sizes", "bm25=2,all"],
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "pairs/s (candidates_per_s)" in out
    assert "N=20: pairs/s (best row of each column): bm25 " in out
    (record,) = env.glob("latency/semeval16b/*.json")
    config = json.loads(record.read_text())["config"]
    assert config["batch_sizes"]["bm25"] == [2, "all"]
    assert config["batch_sizes"]["monobert"] == [32, 64, 128, "all"]  # the CLI default kept
    assert config["arch"] == "minilm-l6"
    row = json.loads(record.read_text())["rows"][0]
    assert row["tokenisation"]["covers"] and row["model_only"]["calls"] == 3
