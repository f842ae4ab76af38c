"""`bench latency --profile` (one profiled pass per entry, stored in its row, shown in a table)
and `bench latency-table` (the paper-style table rendered from records): exact cells from
hand-made records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core.profiling import CPU_UNIT
from bench.data.model import Candidate, CandidateList, Query
from bench.latency.protocol import profile_entry
from bench.latency.records import LatencyRecord, LatencyRow, ListBlock
from bench.reporting.latency_paper import (
    HEADER,
    build_paper_table,
    paper_rows,
    profile_rows,
    read_latency_records,
    render_paper,
)
from rankers.base import Ranker


class OneOpPerList(Ranker):
    """Scores each list with exactly one top-level aten operator (``aten::add``)."""

    name = "one-op"
    family = "early"

    base = torch.zeros(2)

    def score(self, lists):  # type: ignore[no-untyped-def, override]
        for _ in lists:
            torch.add(self.base, 1.0)
        return [np.zeros(len(cl)) for cl in lists]


def _lists(count: int) -> list[CandidateList]:
    return [
        CandidateList(Query(f"q{i}", "q"), (Candidate("a", "x"), Candidate("b", "y")))
        for i in range(count)
    ]


def test_profile_entry_calls_as_the_timing_does() -> None:
    """One call per query (or per --batch-queries lists), per-query figures over all queries."""
    ranker = OneOpPerList()
    one = profile_entry(ranker, _lists(5), batch_queries=1, device="cpu")
    assert (one.unit, one.calls, one.queries, one.kernels) == (CPU_UNIT, 5, 5, 5)
    batched = profile_entry(ranker, _lists(5), batch_queries=2, device="cpu")
    assert (batched.calls, batched.queries, batched.kernels) == (3, 5, 5)
    assert batched.kernels_per_query == 1.0


def _row(
    ranker: str,
    p50: float,
    n: int = 100,
    mode: str = "pre-tokenised",
    precision: str = "tf32",
    profile: dict[str, Any] | None = None,
    **options: Any,
) -> LatencyRow:
    return LatencyRow(
        label=f"{ranker} {options} [{mode}] @ {precision}",
        ranker=ranker,
        column=f"{ranker} @ {precision}",
        family="early",
        n=n,
        batch_queries=1,
        options={"dtype": precision, **options},
        weights="random weights of distilbert-6l's size",
        dtype="float32, tf32 matmuls",
        latency={"p50_ms": p50},
        mode=mode,
        precision=precision,
        profile=profile,
    )


def _profile(kernels: float, busy: float) -> dict[str, Any]:
    return {
        "unit": "cuda kernels",
        "kernels_per_query": kernels,
        "busy_ms_per_query": busy,
        "wall_ms_per_query": 2 * busy,
        "busy_share": 0.5,
    }


def _record(rows: list[LatencyRow], created: str, arch: str = "distilbert-6l") -> LatencyRecord:
    return LatencyRecord(
        dataset="wikiqa",
        split="test",
        created=created,
        config={"arch": arch},
        config_hash="h",
        device="cuda",
        threads=2,
        batch_queries=1,
        blocks=[ListBlock(n=n, queries=2, tokens={}) for n in sorted({r.n for r in rows})],
        rows=rows,
        data={},
        provenance={"device": {"gpu": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0"}},
    )


RECORD_ROWS = [
    _row("monobert", 10.0, batch_size=32, profile=_profile(300, 9.0)),
    _row("monobert", 8.0, batch_size=100, profile=_profile(120, 7.5)),  # its best batch
    _row("monobert", 5.0, mode="end-to-end", batch_size=100),  # another mode: not shown
    _row("crossjem", 2.0, order="union", profile=_profile(150, 1.25)),
    _row("crossjem", 1.0, order="concat"),  # another layout: not shown
    _row("crossjem", 1.5, mode="end-to-end", order="union"),  # another mode: not shown
    _row("st-crossencoder", 12.0, mode="end-to-end", batch_size=64),
    _row("st-crossencoder", 11.0, mode="end-to-end", batch_size=32),
    _row("monobert", 3.0, n=10, batch_size=10),  # N=10: monoBERT alone
    _row("monobert", 4.0, precision="bfloat16", batch_size=100),
]


def test_paper_table_cells() -> None:
    older = _record([_row("monobert", 99.0, batch_size=7)], "2026-01-01T00:00:00+00:00")
    table = build_paper_table([_record(RECORD_ROWS, "2026-02-01T00:00:00+00:00"), older])
    assert paper_rows(table) == [
        [
            "distilbert-6l",
            "bfloat16",
            "100",
            "4.00",
            "100",
            "–",
            "–",
            "–",
            "–",
            "– / – / –",
            "– / – / –",
        ],
        ["distilbert-6l", "tf32", "10", "3.00", "10", "–", "–", "–", "–", "– / – / –", "– / – / –"],
        # the newer record's line replaces the older one's
        [
            "distilbert-6l",
            "tf32",
            "100",
            "8.00",
            "100",
            "2.00",
            "11.00",
            "4.00x",
            "5.50x",
            "120 / 150 / –",
            "7.50 / 1.25 / –",
        ],
    ]
    assert table.notes[0] == "device: NVIDIA H200 (cuda, torch 2.11.0, CUDA 13.0)"
    assert table.notes[-1] == "weights distilbert-6l: random weights of distilbert-6l's size"
    text = render_paper(table)
    assert text.startswith("**Latency, CROSS-JEM against cross-encoders: wikiqa/test**\n\n| ")
    assert "| " + " | ".join(HEADER) + " |" in text
    assert "| distilbert-6l | tf32 | 100 | 8.00 | 100 | 2.00 | 11.00 | 4.00x | 5.50x |" in text


def test_profile_table_rows() -> None:
    rows = profile_rows(_record(RECORD_ROWS, "2026-02-01T00:00:00+00:00"))
    assert rows[0] == [
        "100",
        "monobert {'batch_size': 32} [pre-tokenised] @ tf32",
        "cuda kernels",
        "300",
        "9.00",
        "18.00",
        "50%",
    ]
    assert len(rows) == 3  # the profiled rows only


def test_records_round_trip_their_profile_and_the_cli_writes_the_table(tmp_path: Path) -> None:
    record = _record(RECORD_ROWS, "2026-02-01T00:00:00+00:00")
    data = record.to_json()
    assert "profile" not in data["rows"][2]  # a row without one is written as before the field
    folder = tmp_path / "latency" / "wikiqa"
    folder.mkdir(parents=True)
    (folder / "r.json").write_text(json.dumps(data), encoding="utf-8")
    assert read_latency_records([folder])[0].rows[0].profile == _profile(300, 9.0)
    out = tmp_path / "out" / "table.md"
    result = CliRunner().invoke(app, ["latency-table", str(folder), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") == render_paper(build_paper_table([record]))
    (folder / "bad.json").write_text("[1, 2]", encoding="utf-8")
    result = CliRunner().invoke(app, ["latency-table", str(folder)])
    assert result.exit_code != 0 and f"{folder / 'bad.json'}: not a latency record" in " ".join(
        result.output.split()
    )
    with pytest.raises(ValueError, match="nowhere: no such file or folder"):
        read_latency_records([tmp_path / "nowhere"])
    assert np.isclose(float(data["rows"][0]["latency"]["p50_ms"]), 10.0)


def test_a_profiled_benchmark_stores_each_rows_pass(
    shared_data: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rankers
    from bench.latency.benchmark import run_benchmark
    from bench.latency.plan import BenchOptions

    monkeypatch.setitem(rankers._REGISTRY, "one-op", f"{__name__}:OneOpPerList")
    opts = BenchOptions(
        dataset="wikiqa",
        split="test",
        n_values=(2,),
        queries=3,
        repeats=1,
        warmup=0,
        rankers=("one-op",),
        threads=1,
        data_dir=shared_data,
        results_dir=results_dir,
        profile=True,
    )
    record = run_benchmark(opts)
    profile = record.rows[0].profile
    assert profile is not None
    assert (profile["unit"], profile["calls"], profile["queries"], profile["kernels"]) == (
        CPU_UNIT,
        3,
        3,
        3,
    )
    assert record.path is not None
    written = json.loads(record.path.read_text(encoding="utf-8"))
    assert written["rows"][0]["profile"]["kernels_per_query"] == 1.0
    opts.profile = False
    assert run_benchmark(opts).rows[0].profile is None
