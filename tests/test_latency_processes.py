"""`bench latency --processes N`: the throughput mode.

Two gloo processes time their shards of the calls at once. The record keeps both processes' raw
calls (pooled, they are the calls one process makes), the aggregate pairs/s is all pairs over the
longest measured span, the report shows it per ranker with the process count, a failed rank is
one error line and no record, and a one-process record is written as before.

The commands run as real processes (the spawned ranks need their own interpreters), on
semeval16b with bm25 and dpr (both DPR modes; on the tiny BERT: what is checked is how the calls
are split and pooled, not what the encoder costs), 5 queries in calls of 2 lists, 2 timed passes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from commands import BENCH, PROJECT_ROOT, at_once, run_command

from bench.core.timing import pool
from bench.latency.processes import THROUGHPUT_DEFINITION
from bench.latency.records import LatencyRecord
from bench.reporting.latency_tables import merge_records

pytestmark = pytest.mark.processes

ARGS = ("-d", "semeval16b", "--rankers", "bm25,dpr", "--n-items", "10", "--queries", "5")
ARGS += ("--batch-queries", "2", "--repeats", "2", "--warmup", "1", "--threads", "1")


def bench_latency(
    root: Path, data: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_command(root, data, [*BENCH, "latency", *args], env, timeout=180)


def record_of(root: Path) -> dict[str, Any]:
    (path,) = root.glob("latency/semeval16b/*.json")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def runs(
    shared_data: Path, tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The same benchmark with 1 and with 2 processes (markdown, so no line is wrapped), both
    at once: what is checked is how the calls are split and pooled, not what they cost."""
    roots = {processes: tmp_path_factory.mktemp(f"latency-{processes}") for processes in (1, 2)}

    def benchmark(processes: int) -> subprocess.CompletedProcess[str]:
        return bench_latency(
            roots[processes],
            shared_data,
            *ARGS,
            *("--set", f"dpr.model={tiny_bert}", "--processes", str(processes)),
            *("--format", "markdown"),
        )

    out: dict[str, Any] = {}
    results = at_once(lambda: benchmark(1), lambda: benchmark(2))
    for processes, result in zip((1, 2), results, strict=True):
        assert result.returncode == 0, result.stderr[-3000:]
        root = roots[processes]
        out[processes] = {"record": record_of(root), "stdout": result.stdout, "root": root}
    return out


def rows(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["label"]: row for row in record["rows"]}


def test_the_record_keeps_every_process_raw_calls(runs: dict[str, Any]) -> None:
    one, two = runs[1]["record"], runs[2]["record"]
    assert two["processes"] == 2 and two["config"]["processes"] == 2 and two["threads"] == 1
    assert two["config"]["throughput"] == THROUGHPUT_DEFINITION
    assert rows(one).keys() == rows(two).keys() == {"bm25", "dpr (precomputed)", "dpr (query time)"}
    for label, row in rows(two).items():
        alone = rows(one)[label]["latency"]
        per = row["per_process"]
        assert [p["rank"] for p in per] == [0, 1]
        # the shards split the calls one process makes (5 lists in calls of 2: 2, 2, 1), by pairs
        assert [p["calls"] for p in per] == [len(p["latency"]["call_s"]) for p in per] == [4, 2]
        assert sum(p["calls"] for p in per) == row["latency"]["calls"] == alone["calls"] == 6
        pooled_queries = [q for p in per for q in p["latency"]["call_queries"]]
        assert sorted(pooled_queries) == sorted(alone["call_queries"]) == [1, 1, 2, 2, 2, 2]
        pooled_pairs = [c for p in per for c in p["latency"]["call_candidates"]]
        assert sorted(pooled_pairs) == sorted(alone["call_candidates"])
        # the row's figures pool the raw calls in rank order, and re-pooling gives them again
        assert row["latency"]["call_s"] == [s for p in per for s in p["latency"]["call_s"]]
        again = pool([p["latency"] for p in per]).to_dict()
        for stat in ("calls", "candidates", "p50_ms", "p95_ms", "mean_ms", "candidates_per_s"):
            assert again[stat] == row["latency"][stat], stat
        if row["tokenisation"] is not None:  # a ranker with a host step: its steps per process
            assert all(len(p["tokenisation"]["call_s"]) == p["calls"] for p in per)
            assert all(len(p["model_only"]["call_s"]) == p["calls"] for p in per)


def test_aggregate_throughput_is_all_pairs_over_the_longest_span(runs: dict[str, Any]) -> None:
    for label, row in rows(runs[2]["record"]).items():
        per, agg = row["per_process"], row["throughput"]
        pairs = sum(sum(p["latency"]["call_candidates"]) for p in per)
        wall = max(p["span_s"] for p in per)
        assert agg["processes"] == 2 and agg["definition"] == THROUGHPUT_DEFINITION
        assert agg["candidates"] == pairs == row["latency"]["candidates"], label
        assert agg["queries"] == sum(sum(p["latency"]["call_queries"]) for p in per) == 10
        assert agg["wall_s"] == wall
        assert agg["candidates_per_s"] == pairs / wall
        assert agg["queries_per_s"] == 10 / wall
        assert agg["per_process_candidates_per_s"] == [p["candidates"] / p["span_s"] for p in per]
        assert [p["candidates"] for p in per] == [sum(p["latency"]["call_candidates"]) for p in per]
        # a span is the wall time around the process's timed calls: they and the work between
        # them (checking the scores, recording), not only the calls' own time
        assert all(p["span_s"] > sum(p["latency"]["call_s"]) for p in per)
        starts = [p["start_unix"] for p in per]
        assert agg["start_skew_s"] == max(starts) - min(starts)


def test_the_report_shows_aggregate_pairs_per_ranker_and_processes(runs: dict[str, Any]) -> None:
    record, out = runs[2]["record"], runs[2]["stdout"]
    assert "Throughput mode: 2 processes timed at once" in out
    best = [r for r in record["rows"] if r["best"]]
    cells = []
    for row in best:
        each = ", ".join(f"{v:,.0f}" for v in row["throughput"]["per_process_candidates_per_s"])
        cells.append(
            f"{row['column']} {row['throughput']['candidates_per_s']:,.0f} (per process {each})"
        )
    assert f"N=10, 2 processes at once: aggregate pairs/s {'; '.join(cells)}." in out
    assert "processes at once" not in runs[1]["stdout"]


def test_a_one_process_record_is_written_as_before(runs: dict[str, Any]) -> None:
    record = runs[1]["record"]
    assert "processes" not in record and "processes" not in record["config"]
    assert all("per_process" not in row and "throughput" not in row for row in record["rows"])
    # and records written before the throughput mode load as one-process records (the
    # throughput-mode reference records, throughput-*-2proc*.json, are the measured 2-process ones)
    files = sorted((PROJECT_ROOT / "results" / "reference" / "latency").glob("*.json"))
    before = [path for path in files if "2proc" not in path.name]
    assert before and len(before) < len(files)
    for path in before:
        data = json.loads(path.read_text())
        rec = LatencyRecord.from_json(data, path)
        assert rec.processes == 1 and all(r.throughput is None for r in rec.rows)
        assert "processes" not in rec.to_json()
        assert all("per_process" not in r for r in rec.to_json()["rows"])
    for path in files:
        if "2proc" in path.name:  # and a 2-process record round-trips with its raw calls
            data = json.loads(path.read_text())
            rec = LatencyRecord.from_json(data, path)
            assert rec.processes == 2 and rec.to_json()["rows"] == data["rows"]


def test_records_of_other_process_counts_do_not_share_a_table(runs: dict[str, Any]) -> None:
    one, two = (LatencyRecord.from_json(runs[k]["record"]) for k in (1, 2))
    with pytest.raises(ValueError, match="processes=2"):
        merge_records([one, two])


def test_a_failed_rank_is_named_and_nothing_is_written(shared_data: Path, tmp_path: Path) -> None:
    result = bench_latency(
        tmp_path,
        shared_data,
        *("-d", "semeval16b", "--rankers", "bm25", "--n-items", "10", "--queries", "4"),
        *("--repeats", "1", "--warmup", "1", "--processes", "2"),
        env={"BENCH_TEST_FAIL_RANK": "1"},
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: rank 1 of 2 failed while timing bm25: RuntimeError: injected failure "
        "(BENCH_TEST_FAIL_RANK=1)"
    ]
    assert not list(tmp_path.glob("latency/**/*.json"))


def test_the_same_under_torchrun(shared_data: Path, tmp_path: Path) -> None:
    """torchrun starts the ranks itself: the command uses them (one thread each by default)
    instead of spawning its own, and one record is written, by the main rank."""
    torchrun = Path(sys.executable).with_name("torchrun")
    result = run_command(
        tmp_path,
        shared_data,
        [str(torchrun), "--nproc_per_node", "2", "-m", "bench.cli", "latency"]
        + ["-d", "semeval16b", "--rankers", "bm25", "--n-items", "10", "--queries", "3"]
        + ["--repeats", "1", "--warmup", "1", "--format", "markdown"],
        env={"OMP_NUM_THREADS": "1"},
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = record_of(tmp_path)
    assert (record["processes"], record["threads"]) == (2, 1)
    (row,) = record["rows"]
    assert [p["calls"] for p in row["per_process"]] == [2, 1]
    assert result.stdout.count("2 processes at once: aggregate pairs/s bm25") == 1


def test_more_processes_than_calls(shared_data: Path, tmp_path: Path) -> None:
    result = bench_latency(
        tmp_path,
        shared_data,
        *("-d", "semeval16b", "--rankers", "bm25", "--n-items", "10", "--queries", "1"),
        *("--repeats", "1", "--warmup", "1", "--processes", "2"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (row,) = record_of(tmp_path)["rows"]
    idle = row["per_process"][1]
    assert [p["calls"] for p in row["per_process"]] == [1, 0] and row["latency"]["calls"] == 1
    assert idle["latency"] is None and idle["candidates"] == 0
    assert row["throughput"]["candidates"] == 10 and row["throughput"]["processes"] == 2
