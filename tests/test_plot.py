"""Accuracy-latency plot: Pareto front by hand, points from records, a real PNG written."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.latency.records import LatencyRecord, LatencyRow, ListBlock, mark_best
from bench.reporting.plot import (
    Point,
    accuracy_latency_points,
    choose_metric,
    pareto_front,
    plot_accuracy_latency,
    plot_dataset,
)
from bench.results.records import ResultRecord, run_dir, write_result

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_pareto_front_hand_example() -> None:
    pts = [
        Point("bm25", 0.5, 0.60),
        Point("dpr", 5.0, 0.65),
        Point("slow-worse", 50.0, 0.62),  # dominated by dpr
        Point("monobert", 100.0, 0.75),
        Point("crossjem", 20.0, 0.74),
        Point("tie-latency", 20.0, 0.70),  # same latency as crossjem, less accurate
        Point("twin", 5.0, 0.65),  # identical to dpr: neither dominates the other
    ]
    assert [p.label for p in pareto_front(pts)] == ["bm25", "dpr", "twin", "crossjem", "monobert"]
    assert pareto_front([]) == []


def _record(ranker: str, label: str, metrics: dict, p50: float | None, **config) -> ResultRecord:
    return ResultRecord(
        ranker=ranker,
        dataset="wikiqa",
        split="test",
        family="early",
        label=label,
        metrics=metrics,
        latency={} if p50 is None else {"p50_ms": p50},
        config=config,
        run_config={},
        config_hash=label,
        data={},
        provenance={},
        created="2025-01-01T00:00:00",
    )


RECORDS = [
    _record("bm25", "bm25", {"AP@10": 0.6, "RR@10": 0.61}, 0.4),
    _record("dpr", "dpr (minilm-l6)", {"AP@10": 0.65}, 8.0, precompute=True),
    _record("monobert", "monobert", {"AP@10": 0.7}, None),  # no latency: left out
    _record("crossjem", "crossjem", {"RR@10": 0.8}, 9.0),  # no AP@10: left out
]


def test_points_from_run_records() -> None:
    assert choose_metric(RECORDS) == "AP@10"
    with pytest.raises(ValueError, match="metric 'P@1' is in no record"):
        choose_metric(RECORDS, "P@1")
    points = accuracy_latency_points(RECORDS, "AP@10")
    assert points == [Point("bm25", 0.4, 0.6, "bm25"), Point("dpr (minilm-l6)", 8.0, 0.65, "dpr")]


def test_points_take_benchmark_latency_for_the_matching_column() -> None:
    def row(label: str, column: str, ranker: str, p50: float) -> LatencyRow:
        return LatencyRow(
            label=label,
            ranker=ranker,
            column=column,
            family="dual",
            n=100,
            batch_queries=1,
            options={},
            weights="",
            dtype="float32",
            latency={"p50_ms": p50, "mean_ms": p50},
        )

    rows = [
        row("dpr (precomputed)", "dpr (precomputed)", "dpr", 3.0),
        row("dpr (query time)", "dpr (query time)", "dpr", 30.0),
        row("monobert (batch_size=64)", "monobert", "monobert", 70.0),
    ]
    mark_best(rows)
    bench = LatencyRecord(
        "wikiqa", "test", "", {}, "h", "cpu", 2, 1, [ListBlock(100, 5, {})], rows, {}, {}
    )
    points = accuracy_latency_points(RECORDS, "AP@10", benchmark=bench)
    # dpr ran with precompute=True -> the precomputed column; monobert's run record had no
    # latency but the benchmark has one; bm25 was not benchmarked
    assert points == [
        Point("dpr (minilm-l6)", 3.0, 0.65, "dpr"),
        Point("monobert", 70.0, 0.7, "monobert"),
    ]


def test_each_crossjem_layout_takes_the_benchmark_that_timed_it() -> None:
    def record(column: str, p50: float) -> LatencyRecord:
        row = LatencyRow(
            column,
            column.split(" ")[0],
            column,
            "joint",
            100,
            1,
            {},
            "",
            "float32",
            {"p50_ms": p50, "mean_ms": p50},
        )
        mark_best([row])
        return LatencyRecord(
            "wikiqa", "test", "", {}, "h", "cpu", 2, 1, [ListBlock(100, 5, {})], [row], {}, {}
        )

    union, concat = record("crossjem", 50.0), record("crossjem {concat, item positions}", 90.0)
    runs = [
        _record("crossjem", "crossjem", {"AP@10": 0.73}, 1.0),
        _record(
            "crossjem",
            "crossjem order=concat",
            {"AP@10": 0.78},
            2.0,
            order="concat",
            positions="item",
        ),
    ]
    points = accuracy_latency_points(runs, "AP@10", benchmark=[concat, union])
    assert [(p.label, p.latency_ms) for p in points] == [
        ("crossjem", 50.0),
        ("crossjem order=concat", 90.0),
    ]
    only_union = accuracy_latency_points(runs, "AP@10", benchmark=union)
    assert [p.label for p in only_union] == ["crossjem"]  # concat was never timed: left out


def test_png_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = plot_accuracy_latency(
        [Point("bm25", 0.4, 0.6), Point("dpr", 8.0, 0.65), Point("monobert", 80.0, 0.62)],
        tmp_path / "sub" / "plot.png",
        metric="AP@10",
    )
    data = out.read_bytes()
    assert out == tmp_path / "sub" / "plot.png" and len(data) > 1000
    assert data[:8] == PNG_MAGIC
    long = plot_accuracy_latency(  # long labels are numbered with a key under the axes
        [Point("crossjem (minilm-l6, teacher=monobert, union_len=72, fine-tuned)", 16.0, 0.78)],
        tmp_path / "long.png",
        metric="AP@10",
    )
    assert long.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_accuracy_latency([], tmp_path / "empty.png", metric="AP@10")


def test_plot_dataset_from_written_records(results_dir: Path) -> None:
    pytest.importorskip("matplotlib")
    for rec in RECORDS:
        write_result(
            rec,
            {},
            {"q1": rec.metrics},
            run_dir(results_dir, rec.dataset, rec.ranker, rec.split, rec.config_hash),
        )
    # records made up here carry no cache key, so none is current: all_records shows them
    with pytest.raises(ValueError, match="4 records of unrecorded inputs left out"):
        plot_dataset("wikiqa", results_dir=results_dir)
    path, points = plot_dataset("wikiqa", results_dir=results_dir, all_records=True)
    assert path == results_dir / "plots" / "wikiqa-test-APat10.png"
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert [p.label for p in points] == [  # shown, each marked as not current
        "bm25 (STALE: unrecorded inputs)",
        "dpr (minilm-l6) (STALE: unrecorded inputs)",
    ]
    with pytest.raises(ValueError, match="no latency-benchmark record"):
        plot_dataset("wikiqa", results_dir=results_dir, use_benchmark=True, all_records=True)
