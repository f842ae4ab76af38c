"""Several precisions in one `bench latency` run (``--dtypes``): parsing, the plan (who runs
which precision, what is skipped or refused before any work), the entries and their labels, the
interleaving of every precision's calls, the per-precision speed-ups and gains, the table."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import rankers
from bench.cli.main import app
from bench.latency.benchmark import precision_speedups, run_benchmark
from bench.latency.plan import (
    BenchOptions,
    Precision,
    PrecisionPlan,
    Skip,
    parse_precisions,
    plan_precisions,
    precision_entries,
    precision_options,
)
from bench.latency.records import LatencyRecord, LatencyRow, ListBlock, mark_best
from bench.reporting.latency_tables import build_latency_table, latency_summary, render_latency
from rankers.base import RUNTIME, Ranker, RankerConfig, RankerError, option
from rankers.hooks import LatencyParts, LatencyVariant

#: every toy call, as "ranker/dtype:qid", in the order made
CALLS: list[str] = []


# -- toy rankers: one with dtype and runtime, one with dtype only (like the sentence-transformers
# -- peer), one without a dtype (like BM25) ----------------------------------------------------
@dataclass
class TypedConfig(RankerConfig):
    dtype: str = option(
        "float32", role=RUNTIME, choices=("float32", "bfloat16", "float16", "int8"), help=""
    )
    runtime: str = option("torch", role=RUNTIME, choices=("torch", "onnxruntime"), help="")

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.dtype == "int8") != (self.runtime == "onnxruntime"):
            raise RankerError("toy: int8 runs on onnxruntime only, and only int8 does")


@dataclass
class PeerConfig(RankerConfig):
    dtype: str = option(
        "float32", role=RUNTIME, choices=("float32", "bfloat16", "float16"), help=""
    )


class _Toy(Ranker, LatencyParts):
    family = "early"

    def score(self, lists):  # type: ignore[no-untyped-def, override]
        dtype = getattr(self.config, "dtype", "-")
        CALLS.append(f"{self.name}/{dtype}:{lists[0].query.qid}")
        return [np.arange(len(cl), 0, -1, dtype=float) for cl in lists]

    def compute_dtype(self) -> str:
        return str(getattr(self.config, "dtype", "n/a"))


class TypedToy(_Toy):
    """Names its runtime's precision in its labels, as the encoder rankers do."""

    name = "typed"
    Config = TypedConfig

    def latency_variants(self, batch_sizes=None):  # type: ignore[no-untyped-def, override]
        cfg = self.config
        runtime = f" [{cfg.runtime} {cfg.dtype}]" if cfg.runtime != "torch" else ""
        return [LatencyVariant(f"typed{runtime}", {}, "typed")]


class PeerToy(_Toy):
    name = "peer"
    Config = PeerConfig


class UntypedToy(_Toy):
    name = "untyped"
    family = "sparse"


@pytest.fixture()
def toys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, cls in (("typed", "TypedToy"), ("peer", "PeerToy"), ("untyped", "UntypedToy")):
        monkeypatch.setitem(rankers._REGISTRY, name, f"{__name__}:{cls}")
    CALLS.clear()


# -- parsing and the plan ----------------------------------------------------------------------
def test_precisions_parse_with_their_runtime() -> None:
    assert parse_precisions(["float32", "bfloat16", "int8", "float32@openvino"]) == [
        Precision("float32"),
        Precision("bfloat16"),
        Precision("int8", "onnxruntime"),  # the one runtime with int8
        Precision("float32", "openvino"),
    ]
    assert [p.name for p in parse_precisions(["float16", "int8"])] == [
        "float16",
        "onnxruntime int8",
    ]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (
            ["auto"],
            "--dtypes auto: torch scores in float32, tf32, bfloat16, float16, not 'auto' (auto",
        ),
        (["int8@torch"], "--dtypes int8@torch: torch scores in float32, tf32, bfloat16, float16"),
        (["bfloat16@onnxruntime"], "onnxruntime scores in float32, int8, not 'bfloat16'"),
        (["float32@tensorrt"], "--dtypes float32@tensorrt: unknown runtime 'tensorrt'"),
        (["int8", "int8@onnxruntime"], "precision 'onnxruntime int8' is given twice"),
        ([], "--dtypes: name at least one precision"),
    ],
)
def test_bad_precisions_are_named(items: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_precisions(items)


def test_plan_skips_what_a_ranker_cannot_run_and_refuses_what_none_can(toys: None) -> None:
    plan = plan_precisions(["float32", "int8"], ["untyped", "typed", "peer"], "toy", {})
    assert plan.takers == {"float32": ["typed", "peer"], "onnxruntime int8": ["typed"]}
    assert plan.untyped == ["untyped"]
    assert plan.skipped == [
        Skip(
            "peer",
            "onnxruntime int8",
            "it scores in PyTorch only (no runtime option), not on onnxruntime",
        )
    ]
    assert plan.skipped[0].line().startswith("peer is not timed in onnxruntime int8: it scores")
    assert plan.config() == {
        "precisions": ["float32", "onnxruntime int8"],
        "skipped": [
            {"ranker": "peer", "precision": "onnxruntime int8", "why": plan.skipped[0].why}
        ],
    }
    with pytest.raises(ValueError, match=r"--dtypes onnxruntime int8: no timed ranker can run"):
        plan_precisions(["float32", "int8"], ["peer"], "toy", {})
    with pytest.raises(ValueError, match=r"--dtypes: peer runs none of onnxruntime int8"):
        plan_precisions(["int8"], ["typed", "peer"], "toy", {})
    with pytest.raises(ValueError, match=r"none of the timed rankers \(untyped\) has a dtype"):
        plan_precisions(["float32"], ["untyped"], "toy", {})
    with pytest.raises(ValueError, match=r"--dtypes sets each row's dtype; drop --set typed.dtype"):
        plan_precisions(["float32"], ["typed"], "toy", {"typed": {"dtype": "bfloat16"}})
    with pytest.raises(ValueError, match="onnxruntime runs on the CPU, not on device 'cuda'"):
        plan_precisions(["float32", "int8"], ["typed"], "toy", {}, device="cuda")


@pytest.fixture
def runtimes_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The optional runtime packages taken as installed (make test runs without them): the
    plan only asks :func:`rankers.compute.runtimes.missing_packages`, nothing is loaded."""
    from rankers.compute import runtimes

    monkeypatch.setattr(runtimes, "missing_packages", lambda runtime, precision: [])


def test_int8_without_onnxruntime_is_refused_naming_each_ranker(
    runtimes_installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real rankers' configs (nothing loaded): int8 with ONNX Runtime missing is one error
    before any work, naming each ranker and what to install; the peer's int8 is a skip."""
    from rankers.compute import runtimes

    plan = plan_precisions(["float32", "int8"], ["monobert", "st-crossencoder"], "wikiqa", {})
    assert [(s.ranker, s.precision) for s in plan.skipped] == [
        ("st-crossencoder", "onnxruntime int8")
    ]
    monkeypatch.setattr(runtimes, "missing_packages", lambda runtime, precision: ["onnxruntime"])
    with pytest.raises(ValueError) as error:
        plan_precisions(["float32", "int8"], ["monobert", "crossjem"], "wikiqa", {})
    text = str(error.value)
    assert text.startswith("--dtypes onnxruntime int8: no timed ranker can run it (monobert: ")
    assert "crossjem: option runtime=onnxruntime (dtype=int8) needs onnxruntime" in text
    assert 'pip install "crossjem-bench[runtimes]"' in text


def test_an_option_of_one_precision_goes_to_that_precision_only(runtimes_installed: None) -> None:
    overrides = {"int8_recipe": "all", "order": "union"}
    int8 = precision_options("crossjem", overrides, Precision("int8", "onnxruntime"))
    assert int8 == {**overrides, "dtype": "int8", "runtime": "onnxruntime"}
    bf16 = precision_options("crossjem", overrides, Precision("bfloat16"))
    assert bf16 == {"order": "union", "dtype": "bfloat16", "runtime": "torch"}
    # the peer has no runtime option: only its dtype is set
    assert precision_options("st-crossencoder", {}, Precision("bfloat16")) == {"dtype": "bfloat16"}
    opts = BenchOptions(
        dataset="wikiqa",
        rankers=("monobert", "crossjem"),
        options={"crossjem": overrides},
        dtypes=("float32", "int8"),
    )
    opts.validate()  # int8_recipe alone would be refused under float32


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"options": {"monobert": {"dtype": "float32,bfloat16"}}},
            "--set monobert.dtype=float32,bfloat16: one dtype per --set; time several "
            "precisions in one run with --dtypes float32,bfloat16",
        ),
        (
            {"options": {"monobert": {"runtime": "onnxruntime"}}, "dtypes": ("int8",)},
            "--dtypes sets each row's runtime; drop --set monobert.runtime=onnxruntime",
        ),
        ({"dtypes": ("float32", "fp8")}, "--dtypes fp8: torch scores in float32"),
    ],
)
def test_precision_options_are_checked_before_any_work(change: dict, message: str) -> None:
    # the dataset does not exist: validation has to fail before anything is loaded
    opts = BenchOptions(dataset="no-such-dataset", rankers=("monobert", "crossjem"), **change)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        run_benchmark(opts)


def test_cli_refuses_a_bad_precision_before_any_work(
    shared_data: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch, runtimes_installed: None
) -> None:
    monkeypatch.setenv("BENCH_DATA_DIR", str(shared_data))
    args = ["latency", "-d", "wikiqa", "--rankers", "monobert,st-crossencoder", "--n-items", "10"]
    for dtypes, message in (
        (
            "float32,fp8",
            "--dtypes fp8: torch scores in float32, tf32, bfloat16, float16, not 'fp8'",
        ),
        ("int8", "--dtypes: st-crossencoder runs none of onnxruntime int8"),
        (",", "--dtypes: name at least one precision"),
    ):
        result = CliRunner().invoke(app, [*args, "--dtypes", dtypes])
        assert result.exit_code == 2, result.output
        assert "error:" in result.output and message in " ".join(result.output.split())
        assert "Traceback" not in result.output
    assert not (results_dir / "latency").exists() and not (results_dir / "models").exists()


# -- entries, labels and the interleaving ------------------------------------------------------
def test_each_precision_is_an_entry_interleaved_call_by_call(
    toys: None, shared_data: Path, results_dir: Path
) -> None:
    """The whole benchmark on toys: the entries of every precision, their labels and columns,
    and the exact order of their calls (one warm-up call each, then every timed call of every
    precision taking its turn with the others, the order rotating by one per call)."""
    plan = plan_precisions(["float32", "bfloat16", "int8"], ["untyped", "typed", "peer"], "toy", {})
    entries = precision_entries(plan, "toy", 2, 1)
    expected = [
        ("untyped", "untyped", ""),  # no dtype: timed once, untagged
        ("typed @ float32", "typed @ float32", "float32"),
        ("peer @ float32", "peer @ float32", "float32"),
        ("typed @ bfloat16", "typed @ bfloat16", "bfloat16"),
        ("peer @ bfloat16", "peer @ bfloat16", "bfloat16"),
        # the label names the runtime's precision already; the column is tagged
        ("typed [onnxruntime int8]", "typed @ onnxruntime int8", "onnxruntime int8"),
    ]
    assert [(e.label, e.column, e.precision) for e in entries] == expected
    assert entries[-1].options == {"dtype": "int8", "runtime": "onnxruntime"}
    record = run_benchmark(
        BenchOptions(
            dataset="wikiqa",
            split="test",
            n_values=(2,),
            queries=2,
            repeats=1,
            warmup=1,
            rankers=("untyped", "typed", "peer"),
            dtypes=("float32", "bfloat16", "int8"),
            threads=1,
            data_dir=shared_data,
            results_dir=results_dir,
        )
    )
    assert [(r.label, r.column, r.precision) for r in record.rows] == expected
    assert [r.dtype for r in record.rows] == [
        "n/a",
        "float32",
        "float32",
        "bfloat16",
        "bfloat16",
        "int8",
    ]
    qids = list(dict.fromkeys(call.split(":")[1] for call in CALLS))
    calls = [f"{call.split(':')[0]}:q{qids.index(call.split(':')[1])}" for call in CALLS]
    order = ["untyped/-", "typed/float32", "peer/float32", "typed/bfloat16", "peer/bfloat16"]
    order.append("typed/int8")
    assert (
        calls
        == [
            *(f"{r}:q0" for r in order),  # warm-up
            *(f"{r}:q0" for r in order),  # timed call 1
            *(f"{r}:q1" for r in order[1:] + order[:1]),  # timed call 2: the order rotated
        ]
    )
    assert all(r.latency["calls"] == 2 for r in record.rows)
    assert record.config["skipped"][0]["ranker"] == "peer"


# -- per-precision speed-ups, gains and the table ----------------------------------------------
def _row(column: str, precision: str, mean: float, **extra: object) -> LatencyRow:
    base = column if not precision else f"{column} @ {precision}"
    return LatencyRow(
        label=str(extra.pop("label", base)),
        ranker=column.split(" ")[0],
        column=base,
        family="early",
        n=100,
        batch_queries=1,
        options={},
        weights="untrained",
        dtype=precision or "n/a",
        latency={"p50_ms": mean - 10, "mean_ms": mean, "candidates_per_s": 1e5 / mean},
        precision=precision,
        encoder={"dtype": precision} if "cost" in extra else {},
        **extra,  # type: ignore[arg-type]
    )


def _cost(predicted_ms: float, gflops: float, of_peak: float) -> dict:
    peak = gflops / of_peak
    return {
        "predicted_ms": predicted_ms,
        "achieved_gflops": gflops,
        "of_peak": of_peak,
        "peak_gflops": peak,
    }


def _precision_record() -> LatencyRecord:
    """Hand numbers: float32 monoBERT 2,000 ms (mean) against CROSS-JEM 1,000; bfloat16 600
    against 400; the peer 900 in bfloat16 only; BM25 without a dtype 10."""
    rows = [
        _row("bm25", "", 10.0),
        _row("monobert", "float32", 2000.0, cost=_cost(1800.0, 30.0, 0.70)),
        _row("monobert", "float32", 2600.0, label="monobert (bs=128) @ float32"),
        _row("crossjem", "float32", 1000.0, cost=_cost(900.0, 28.0, 0.65)),
        _row("monobert", "bfloat16", 600.0, cost=_cost(500.0, 90.0, 0.20)),
        _row("crossjem", "bfloat16", 400.0, cost=_cost(250.0, 70.0, 0.15)),
        _row("st-crossencoder", "bfloat16", 900.0),
    ]
    mark_best(rows)
    block = ListBlock(100, 3, {"cost": {"predicted_speedup": 2.18, "token_ratio": 2.0}})
    block.tokens["compression_mean"] = 3.0
    plan = PrecisionPlan([Precision("float32"), Precision("bfloat16")], {}, ["bm25"])
    block.speedup = {"precisions": precision_speedups(rows, block, plan)}
    config = {**plan.config(), "skipped": [{"ranker": "x", "precision": "y", "why": "z"}]}
    return LatencyRecord(
        "wikiqa", "test", "2025-01-01T00:00:00+00:00", config, "h", "cpu", 1, 1, [block], rows,
        {}, {},
    )  # fmt: skip


def test_speedup_per_precision_and_gain_over_float32() -> None:
    record = _precision_record()
    sp = record.blocks[0].speedup["precisions"]
    assert sp["float32"]["measured_mean"] == pytest.approx(2.0)  # 2,000 / 1,000
    assert sp["float32"]["baseline"] == "monobert @ float32"  # the best batch size
    assert sp["float32"]["predicted_time"] == pytest.approx(2.0)  # 1,800 / 900
    assert sp["bfloat16"]["measured_mean"] == pytest.approx(1.5)  # 600 / 400: same precision
    assert sp["bfloat16"]["predicted_time"] == pytest.approx(2.0)  # 500 / 250
    assert sp["bfloat16"]["predicted_flops"] == 2.18
    assert sp["bfloat16"]["gain"] == {
        "monobert": pytest.approx(2000 / 600),
        "crossjem": pytest.approx(2.5),  # 1,000 / 400; the peer has no float32 row
    }
    assert sp["float32"]["gain"] == {"monobert": 1.0, "crossjem": 1.0}
    assert sp["bfloat16"]["gain_over"] == "float32"


def test_gains_are_over_float32_wherever_it_is_listed() -> None:
    """``--dtypes bfloat16,float32``: the gains are still over float32, not over the precision
    listed first; without float32 they are over the first listed."""
    record = _precision_record()
    block = record.blocks[0]
    plan = PrecisionPlan([Precision("bfloat16"), Precision("float32")], {}, ["bm25"])
    assert plan.reference == "float32"
    sp = precision_speedups(record.rows, block, plan)
    assert sp["bfloat16"]["gain_over"] == "float32"
    assert sp["bfloat16"]["gain"]["monobert"] == pytest.approx(2000 / 600)
    assert sp["float32"]["gain"] == {"monobert": 1.0, "crossjem": 1.0}
    half = PrecisionPlan([Precision("float16"), Precision("bfloat16")], {}, ["bm25"])
    assert half.reference == "float16"


def test_precision_table_lines() -> None:
    table = build_latency_table(_precision_record())
    assert table.precision is not None
    header, rows, text_columns = table.grid()
    assert text_columns == 3 and header == [
        "N",
        "precision",
        "column",
        "p50_ms",
        "speed-up vs monoBERT",
        "speed-up predicted",
        "speed-up predicted (time)",
        "gain over float32",
        "GFLOP/s",
        "% of peak",
    ]
    assert [" | ".join(texts) for texts in rows] == [
        "100 | n/a | bm25 | 0.00 | – | – | – | – | – | –",
        "100 | float32 | monobert | 1,990.00 | 1.00x | – | – | 1.00x | 30.0 | 70%",
        "100 | float32 | crossjem | 990.00 | 2.00x | 2.18x | 2.00x | 1.00x | 28.0 | 65%",
        "100 | bfloat16 | monobert | 590.00 | 1.00x | – | – | 3.33x | 90.0 | 20%",
        "100 | bfloat16 | crossjem | 390.00 | 1.50x | 2.18x | 2.00x | 2.50x | 70.0 | 15%",
        "100 | bfloat16 | st-crossencoder | 890.00 | 0.67x | – | – | – | – | –",
    ]
    md = render_latency(table, "markdown")
    assert "| 100 | bfloat16 | crossjem | 390.00 | 1.50x | 2.18x | 2.00x | 2.50x |" in md
    assert "Not timed: x in y (z)." in md
    # each ranker named once in the notes, not once per precision
    assert "weights: untrained (bm25, monobert, crossjem, st-crossencoder)." in md
    data = json.loads(render_latency(table, "json"))
    assert data["precisions"][4]["gain"] == 2.5 and data["precisions"][4]["speedup"] == 1.5
    lines = latency_summary(record := _precision_record())
    assert "N=100, bfloat16: CROSS-JEM speed-up over monoBERT measured 1.50x (mean)" in "\n".join(
        lines
    )
    back = LatencyRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert back == record and back.rows[1].base_column == "monobert"


def test_one_precision_records_are_written_as_before() -> None:
    row = _row("monobert", "", 5.0)
    data = LatencyRecord("d", "s", "", {}, "h", "cpu", 1, 1, [], [row], {}, {}).to_json()
    assert "precision" not in data["rows"][0]


# -- a whole run -------------------------------------------------------------------------------
def test_tiny_run_in_two_precisions(shared_data: Path, tiny_bert: Path, results_dir: Path) -> None:
    model = {"model": str(tiny_bert)}
    rec = run_benchmark(
        BenchOptions(
            dataset="wikiqa",
            split="test",
            n_values=(10,),
            queries=2,
            repeats=1,
            warmup=1,
            rankers=("monobert", "crossjem"),
            batch_sizes={"monobert": (16,)},
            threads=1,
            options={"monobert": model, "crossjem": {**model, "order": "union"}},
            dtypes=("float32", "bfloat16"),
            data_dir=shared_data,
            results_dir=results_dir,
        )
    )
    assert [(r.column, r.precision, r.dtype) for r in rec.rows] == [
        (f"{ranker}{mode} @ {p}", p, "float32" if p == "float32" else "bfloat16 weights")
        for p in ("float32", "bfloat16")
        for ranker in ("monobert", "crossjem")
        for mode in ("", " (end-to-end)")
    ]
    assert rec.rows[2].label == "crossjem [pre-tokenised] @ float32"
    assert all(r.options["dtype"] == r.precision for r in rec.rows)
    assert all(r.encoder["dtype"] == r.precision for r in rec.rows)
    # each precision predicted from the calibration measured in it, never another's
    assert all(r.cost["calibration"][0]["dtype"] == r.precision for r in rec.rows)
    assert rec.config["precisions"] == ["float32", "bfloat16"] and rec.config["skipped"] == []
    sp = rec.blocks[0].speedup["precisions"]
    assert set(sp) == {"float32", "bfloat16"}
    for p in sp:
        assert sp[p]["model"] == f"crossjem [pre-tokenised] @ {p}"
        assert set(sp[p]["gain"]) == {
            "monobert",
            "crossjem",
            "monobert (end-to-end)",
            "crossjem (end-to-end)",
        }
    table = build_latency_table(rec)
    assert table.precision is not None and len(table.precision.cells) == 8


def test_a_cost_line_names_a_torch_dtype_once() -> None:
    """A --dtypes label already ends in the torch dtype, so the cost line does not repeat it; a
    runtime row keeps what ran its encoder (its time model's settings), and a row of a
    single-precision run still says its dtype."""
    from bench.reporting.latency_tables import cost_line

    tagged = _row("crossjem", "float32", 1000.0, cost=_cost(900.0, 28.0, 0.65))
    assert cost_line(tagged).startswith("N=100 crossjem @ float32: measured 1,000.0 ms/query")
    plain = _row("crossjem", "float32", 1000.0, cost=_cost(900.0, 28.0, 0.65), label="crossjem")
    assert cost_line(plain).startswith("N=100 crossjem, float32: measured")
    ort = dataclasses.replace(
        tagged,
        label="crossjem [pre-tokenised, onnxruntime int8]",
        encoder={"dtype": "int8", "runtime": "onnxruntime", "graph": "fused"},
    )
    assert cost_line(ort).startswith(
        "N=100 crossjem [pre-tokenised, onnxruntime int8], int8 (onnxruntime, fused graph): "
    )
