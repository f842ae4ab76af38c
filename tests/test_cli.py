"""The `bench` CLI end to end on the real shared data (BM25 and first stage: no model weights)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bench.cli.main import app

runner = CliRunner()


def bench(*args: str, ok: bool = True) -> str:
    result = runner.invoke(app, ["-q", *args])
    if ok:
        assert result.exit_code == 0, result.output + str(result.exception)
    return result.output


@pytest.fixture()
def env(shared_data: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BENCH_DATA_DIR", str(shared_data))
    return results_dir


def test_help_explains_commands() -> None:
    out = bench("--help")
    for cmd in ("datasets", "rankers", "run", "train", "compare", "check", "demo"):
        assert cmd in out
    assert "--ranker" in bench("run", "--help")


@pytest.mark.parametrize("command", ["latency", "sweep", "train", "run"])
def test_help_paragraphs_reflow_at_80_columns(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A docstring's line breaks are not the terminal's: each paragraph of a command's help is
    filled to the width, a line ending only where its next word would not fit."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERMINAL_WIDTH", "80")
    out = bench(command, "--help")
    text = out.split("Usage:", 1)[1].split("╭", 1)[0]  # the description, before the options
    paragraphs: list[list[str]] = [[]]
    for line in text.splitlines()[1:]:  # after the usage line
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    assert sum(len(rows) > 1 for rows in paragraphs) >= 1, out  # some paragraph wraps
    for rows in paragraphs:
        for row, following in zip(rows, rows[1:], strict=False):
            # the help is indented by one column and keeps one free at the right
            assert len(row) + 1 + len(following.split()[0]) > 80 - 2, (row, following)


def test_datasets_lists_real_sets_with_sizes(env: Path) -> None:
    out = bench("datasets", "--no-wordpiece")
    for name in ("wikiqa", "semeval16b", "trec-dl19-passage", "sodq", "msmarco-titles"):
        assert name in out
    assert "243" in out and "873" in out  # wikiqa test and train queries
    rows: list[list[str]] = []  # cells that wrap continue on lines whose first cell is empty
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if not cells:
            continue
        if cells[0] or not rows:
            rows.append(cells)
        else:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
    wikiqa = {row[2]: row for row in rows if row[0] == "wikiqa"}
    # headers may wrap over several lines: join each column's parts
    parts = [[c.strip() for c in line.split("┃")[1:-1]] for line in out.splitlines() if "┃" in line]
    header = [" ".join(p for p in column if p) for column in zip(*parts, strict=True)]
    column = header.index("all relevant")
    # queries whose every candidate is relevant, kept (the card's default)
    assert {split: row[column] for split, row in wikiqa.items()} == {
        "train": "16 (kept)",
        "dev": "4 (kept)",
        "test": "6 (kept)",
    }


def test_run_writes_record_run_and_per_query_then_reuses(env: Path) -> None:
    bench("run", "--ranker", "bm25", "--dataset", "wikiqa")
    (rec_file,) = env.glob("runs/wikiqa/bm25/test-*/record.json")
    record = json.loads(rec_file.read_text())
    assert record["data"]["queries"] == 243
    assert record["data"]["all_relevant"] == {
        "queries": 6,
        "treatment": "kept",
        "convention": "kept and scored (every ranker scores 1.0 on them)",
    }
    assert set(record["metrics"]) == {"AP@5", "AP@10", "AP", "RR@5", "RR@10", "nDCG@10", "P@1"}
    assert 0.0 < record["metrics"]["AP@10"] < 1.0
    assert record["latency"]["queries"] == 243 and record["latency"]["p50_ms"] > 0
    assert record["provenance"]["packages"]["rank-bm25"]
    assert record["data"]["checksum"]
    run_lines = (rec_file.parent / "run.trec").read_text().splitlines()
    assert len(run_lines) == 2350  # every candidate of the 243 lists
    qid, q0, docid, rank, score, tag = run_lines[0].split()
    assert (q0, rank, tag) == ("Q0", "1", "bm25")
    per_query = (rec_file.parent / "perquery.tsv").read_text().splitlines()
    assert len(per_query) == 1 + 243
    # same config -> reused, not recomputed
    created = record["created"]
    bench("run", "--ranker", "bm25", "--dataset", "wikiqa")
    assert json.loads(rec_file.read_text())["created"] == created
    # another option -> another result directory
    bench("run", "--ranker", "bm25", "--dataset", "wikiqa", "--set", "k1=1.2")
    assert len(list(env.glob("runs/wikiqa/bm25/test-*/record.json"))) == 2


def test_firststage_compare_and_json(env: Path) -> None:
    bench("run", "-r", "firststage", "-d", "trec-dl19-passage")
    bench("run", "-r", "bm25", "-d", "trec-dl19-passage")
    table = bench("compare", "--dataset", "trec-dl19-passage")
    assert "First stage" in table and "Sparse" in table
    rows = json.loads(bench("compare", "--dataset", "trec-dl19-passage", "--format", "json"))
    assert {r["ranker"] for r in rows} == {"firststage", "bm25"}
    assert set(rows[0]) >= {"ranker", "dataset", "split", "metrics", "latency"}
    md = bench("compare", "-d", "trec-dl19-passage", "-f", "markdown")
    assert md.lstrip().startswith("|") or "| System" in md


def test_check_passes_then_fails_when_expected_value_changes(env: Path, tmp_path: Path) -> None:
    bench("run", "-r", "bm25", "-d", "semeval16b")
    (rec,) = env.glob("runs/semeval16b/bm25/test-*/record.json")
    actual = json.loads(rec.read_text())["metrics"]["AP@10"]
    expected = tmp_path / "exp.yaml"
    entry = {
        "dataset": "semeval16b",
        "split": "test",
        "ranker": "bm25",
        "metric": "AP@10",
        "expected": round(actual, 4),
        "tolerance": 0.001,
    }
    expected.write_text(yaml.safe_dump([entry]))
    out = bench("check", "--expected", str(expected))
    assert "OK" in out
    entry["expected"] = round(actual + 0.05, 4)
    expected.write_text(yaml.safe_dump([entry]))
    result = runner.invoke(app, ["check", "--expected", str(expected)])
    assert result.exit_code == 1 and "FAIL" in result.output
    entry.update(ranker="dpr", expected=0.5)
    expected.write_text(yaml.safe_dump([entry]))
    result = runner.invoke(app, ["check", "--expected", str(expected)])
    assert result.exit_code == 1 and "MISSING" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "-r", "bm25", "-d", "nosuchset"], "nosuchset"),
        (["run", "-r", "monobart", "-d", "wikiqa"], "known: "),
        (["run", "-r", "bm25", "-d", "wikiqa", "--split", "val"], "val"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--set", "k1"], "key=value"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--set", "k1=abc"], "k1='abc'"),
        (["run", "-r", "firststage", "-d", "wikiqa"], "no first-stage scores"),
        (["run", "-r", "bm25", "-d", "wikiqa", "--device", "tpu"], "--device"),
        (["compare", "-d", "wikiqa"], "no results"),
    ],
)
def test_bad_input_is_one_clear_error(env: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and message in result.output
    assert "Traceback" not in result.output


def test_malformed_dataset_line_is_named(env: Path, tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "data" / "broken"
    data.mkdir(parents=True)
    (data / "test.jsonl").write_text('{"query": "a", "positive": ["b"], "negative": []}\n{oops\n')
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    result = runner.invoke(app, ["run", "-r", "bm25", "-d", "broken"])
    assert result.exit_code == 2
    assert "test.jsonl:2" in result.output.replace("\n", "")


def test_latency_and_plot_commands(env: Path) -> None:
    out = bench(
        "latency",
        "-d",
        "semeval16b",
        "--rankers",
        "bm25",
        "--n-items",
        "20",
        "--queries",
        "3",
        "--repeats",
        "1",
        "--warmup",
        "1",
        "--threads",
        "1",
    )
    assert "bm25" in out and "record:" in out
    (record,) = env.glob("latency/semeval16b/*.json")
    data = json.loads(record.read_text())
    assert data["blocks"][0]["n"] == 20
    bench("run", "-r", "bm25", "-d", "semeval16b")
    out = bench("plot", "-d", "semeval16b", "--out", str(env / "p.png"))
    assert (env / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Pareto front: bm25" in out


def test_check_ignores_latency_records_for_run_expectations(env: Path, tmp_path: Path) -> None:
    """A `bench latency` record is no run; after one, a passing expectation still
    passes and a failing one still fails (it used to read MISSING, from the latency record)."""
    bench("run", "-r", "bm25", "-d", "wikiqa")
    expected = tmp_path / "exp.yaml"
    entry = {
        "dataset": "wikiqa",
        "split": "test",
        "ranker": "bm25",
        "metric": "AP@10",
        "expected": 0.6175,
        "tolerance": 0.0005,
    }
    expected.write_text(yaml.safe_dump([entry]))
    assert "OK   wikiqa/test bm25 AP@10" in bench("check", "-e", str(expected))
    bench("latency", "-d", "wikiqa", "--rankers", "bm25", "--queries", "2", "--n-items", "10")
    assert list(env.glob("latency/wikiqa/*.json"))
    out = bench("check", "-e", str(expected))
    assert "OK   wikiqa/test bm25 AP@10" in out and "checks: 1 OK, 0 FAIL, 0 MISSING" in out
    assert "runs/wikiqa/bm25/test-" in out
    entry["expected"] = 0.7
    expected.write_text(yaml.safe_dump([entry]))
    result = runner.invoke(app, ["check", "-e", str(expected)])
    assert result.exit_code == 1
    assert "FAIL wikiqa/test bm25 AP@10" in result.output
    assert "checks: 0 OK, 1 FAIL, 0 MISSING" in result.output


def test_readers_show_the_record_of_the_data_as_it_is_now(
    env: Path, tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run, delete lines of the split, run (a new record), restore, run (the
    first record, reused): compare and check read the first record, not the newest one, and say
    that one record of other data was left out; --all-records shows it again."""
    data = tmp_path / "data"
    shutil.copytree(shared_data / "semeval16b", data / "semeval16b")
    monkeypatch.setenv("BENCH_DATA_DIR", str(data))
    test_file = data / "semeval16b" / "test.jsonl"
    test_file.chmod(0o644)
    whole = test_file.read_text()

    def ap10() -> dict[str, float]:
        return {
            json.loads(p.read_text())["created"]: json.loads(p.read_text())["metrics"]["AP@10"]
            for p in env.glob("runs/semeval16b/bm25/test-*/record.json")
        }

    bench("run", "-r", "bm25", "-d", "semeval16b")
    (now,) = ap10().values()
    test_file.write_text("".join(whole.splitlines(keepends=True)[40:]))
    time.sleep(1.1)  # a later `created`
    bench("run", "-r", "bm25", "-d", "semeval16b")
    (deleted,) = set(ap10().values()) - {now}
    test_file.write_text(whole)
    bench("run", "-r", "bm25", "-d", "semeval16b")
    assert sorted(ap10().values()) == sorted([now, deleted])  # reused, no third record
    rows = json.loads(
        runner.invoke(app, ["-q", "compare", "-d", "semeval16b", "-f", "json"]).stdout
    )
    assert [r["metrics"]["AP@10"] for r in rows] == [now]
    out = bench("compare", "-d", "semeval16b", "-f", "markdown")
    assert f"{now:.4f}" in out and f"{deleted:.4f}" not in out
    assert "1 record of other data left out; --all-records shows them" in out
    every = json.loads(
        runner.invoke(
            app, ["-q", "compare", "-d", "semeval16b", "-f", "json", "--all-records"]
        ).stdout
    )
    # both, the record of other data marked as such on a row of its own
    assert sorted((r["label"], r["metrics"]["AP@10"]) for r in every) == [
        ("bm25", now),
        ("bm25 (STALE: other data)", deleted),
    ]
    expected = tmp_path / "exp.yaml"
    entry = {"dataset": "semeval16b", "split": "test", "ranker": "bm25", "metric": "AP@10"}
    expected.write_text(yaml.safe_dump([{**entry, "expected": round(now, 4), "tolerance": 1e-4}]))
    out = bench("check", "-e", str(expected))
    assert f"OK   semeval16b/test bm25 AP@10 expected {round(now, 4):g}" in out
    assert "1 record of other data left out; --all-records shows them" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]\n", "has no entries: nothing to check"),
        ("", "has no entries: nothing to check"),
        (
            "- {dataset: wikiqa, split: test, ranker: bm25, metric: AP@10, expected: 0.6, "
            "tolerance: 0.1}\n",
            "is about a dataset with records (entries: wikiqa; records: semeval16b)",
        ),
    ],
)
def test_check_that_checks_nothing_exits_1(
    env: Path, tmp_path: Path, text: str, message: str
) -> None:
    """`bench check` cannot pass while checking nothing: a green check must mean that values
    were compared."""
    bench("run", "-r", "bm25", "-d", "semeval16b")
    expected = tmp_path / "e.yaml"
    expected.write_text(text)
    result = runner.invoke(app, ["check", "-e", str(expected)])
    assert result.exit_code == 1, result.output
    assert "error:" in result.output and message in result.output.replace("\n", "")
    assert "checks:" not in result.output


def test_process_counts_that_cannot_help_are_warned_about() -> None:
    from bench.cli.experiments import process_warnings

    assert process_warnings(2, False, 2) == []
    assert process_warnings(1, True, 2) == []
    (more,) = process_warnings(32, False, 2)
    assert more.startswith("--processes 32 on 2 CPU cores") and "--processes 2" in more
    (ignored,) = process_warnings(4, True, 16)
    assert ignored.startswith("--processes 4 is ignored under a launcher")


@pytest.mark.parametrize(("before", "after"), [(None, "FALSE"), ("TRUE", "TRUE")])
def test_the_cli_turns_mkl_dynamic_off_unless_the_user_set_it(
    monkeypatch: pytest.MonkeyPatch, before: str | None, after: str
) -> None:
    """Importing the CLI sets ``MKL_DYNAMIC=FALSE`` (MKL's per-call thread choice made CPU
    training differ from run to run) before torch first calls MKL, so every command and the
    processes it starts inherit it; a value the user set is kept. The module is executed afresh
    (``runpy``) in an environment without or with the variable."""
    import runpy

    import bench.cli.main

    if before is None:
        monkeypatch.delenv("MKL_DYNAMIC", raising=False)
    else:
        monkeypatch.setenv("MKL_DYNAMIC", before)
    runpy.run_path(bench.cli.main.__file__, run_name="bench_cli_main_fresh")
    assert os.environ["MKL_DYNAMIC"] == after
