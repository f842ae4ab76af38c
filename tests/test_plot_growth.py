"""Latency against N (``bench plot --growth``): series from records, the
table, the slope, a real PNG."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core.io import atomic_write_json
from bench.latency.records import LatencyRecord, LatencyRow, ListBlock, mark_best
from bench.reporting.plot_growth import growth_series, growth_table, plot_latency_growth, slope

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _row(column: str, n: int, p50: float, batch: int = 32) -> LatencyRow:
    return LatencyRow(
        label=f"{column} (batch_size={batch})",
        ranker=column.split(" (")[0],
        column=column,
        family="cross",
        n=n,
        batch_queries=1,
        options={"batch_size": batch},
        weights="",
        dtype="float32",
        latency={"p50_ms": p50, "mean_ms": p50 + 1},
    )


def _record(created: str, rows: list[LatencyRow]) -> LatencyRecord:
    mark_best(rows)
    ns = sorted({r.n for r in rows})
    blocks = [ListBlock(n, 4, {}) for n in ns]
    return LatencyRecord("synth", "test", created, {}, "h", "cpu", 2, 1, blocks, rows, {}, {})


OLD = _record(
    "20261125T000000",
    [
        _row("monobert", 10, 25.0, batch=64),  # slower batch size: not the best row
        _row("monobert", 10, 20.0),
        _row("monobert", 100, 200.0),
        _row("crossjem", 10, 9.0),
        _row("crossjem", 100, 99.0),  # timed again in NEW: the newer figure wins
    ],
)
NEW = _record("20261125T010000", [_row("crossjem", 100, 40.0), _row("crossjem", 1000, 400.0)])


def test_series_take_the_best_row_and_the_newest_record() -> None:
    series = growth_series([OLD, NEW])
    assert series == {
        "monobert": {10: 20.0, 100: 200.0},
        "crossjem": {10: 9.0, 100: 40.0, 1000: 400.0},
    }
    assert growth_series([NEW, OLD]) == series  # order given does not matter, created does
    assert growth_series([OLD], "mean_ms")["monobert"] == {10: 21.0, 100: 201.0}


def test_slope_and_table() -> None:
    assert slope({10: 20.0, 100: 200.0}) == pytest.approx(1.0)
    assert slope({10: 5.0, 1000: 5.0}) == pytest.approx(0.0)
    assert slope({10: 5.0}) is None
    table = growth_table({"monobert": {10: 20.0, 100: 200.0}, "bm25": {100: 0.5}})
    assert table.splitlines() == [
        "| ranker (p50_ms) | N=10 | N=100 | slope |",
        "|---|---|---|---|",
        "| bm25 | - | 0.50 | - |",
        "| monobert | 20.00 | 200.00 | 1.00 |",
    ]


def test_bench_plot_growth_writes_one_png_for_every_ranker(tmp_path: Path) -> None:
    for record in (OLD, NEW):
        atomic_write_json(
            tmp_path / "latency" / "synth" / f"{record.created}.json", record.to_json()
        )
    path, series = plot_latency_growth("synth", results_dir=tmp_path)
    assert path == tmp_path / "plots" / "synth-test-latency-growth.png"
    assert path.read_bytes()[:8] == PNG_MAGIC and set(series) == {"monobert", "crossjem"}
    out = CliRunner().invoke(
        app,
        [
            "plot",
            "-d",
            "synth",
            "--growth",
            "--results-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "g.png"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert (tmp_path / "g.png").read_bytes()[:8] == PNG_MAGIC
    assert (
        "| crossjem | 9.00 | 40.00 | 400.00 | 0.82 |"
    )  # (ln 400 - ln 9) / (2 ln 10) in out.output
    none = CliRunner().invoke(
        app, ["plot", "-d", "other", "--growth", "--results-dir", str(tmp_path)]
    )
    assert none.exit_code == 2 and "no latency-benchmark record for other" in none.output
