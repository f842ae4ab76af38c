"""The latency time model: predictions from a fake calibration with hand-computed values, the
calibration cache, the encoder calls rankers declare, and the record fields (no timed
assertions)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.data.model import Candidate, CandidateList, Query
from bench.latency import calibration
from bench.latency.benchmark import run_benchmark
from bench.latency.calibration import (
    Calibration,
    Calibrations,
    linear_shapes,
    load_or_measure,
    measure,
)
from bench.latency.efficiency import EncoderShape
from bench.latency.protocol import BenchOptions
from bench.latency.records import LatencyRecord, ListBlock, load_latency_records, speedup_summary
from bench.latency.tables import build_latency_table, latency_summary, render_latency
from bench.latency.timemodel import (
    attention_row_ms,
    call_time,
    compress_calls,
    expand_calls,
    linear_gflops,
    predict,
    row_cost,
)
from rankers import create_ranker
from rankers.hooks import EncoderCall

# d = 4, d_ff = 8, 2 heads: a layer's linears are 4 x (4x4), 4x8 and 8x4
SHAPE = EncoderShape(layers=2, hidden=4, intermediate=8, heads=2)


def fake_calibration(dtype: str = "float32", threads: int = 1) -> Calibration:
    """Rates chosen so that every prediction below is exact by hand."""
    return Calibration(
        dtype=dtype,
        threads=threads,
        attention_name="sdpa",
        hidden=4,
        heads=2,
        intermediate=8,
        peak_gflops=10.0,
        # 4x4: 1 GFLOP/s at 100 tokens, 3 at 10,000 -> 2 at 1,000 (midway in log tokens)
        linear={"4x4": [[100, 1.0], [10000, 3.0]], "4x8": [[100, 4.0]], "8x4": [[100, 4.0]]},
        attention={"masked": [[50, 0.1], [200, 0.4]], "unmasked": [[50, 0.05], [200, 0.2]]},
        other_ns_per_token=10.0,
    )


def test_rates_interpolate_and_extrapolate_by_hand() -> None:
    cal = fake_calibration()
    assert linear_gflops(cal, 4, 4, 1000) == pytest.approx(2.0)
    assert linear_gflops(cal, 4, 4, 10) == 1.0  # below the grid: its first rate
    assert linear_gflops(cal, 4, 4, 10**6) == 3.0  # above: its last
    assert attention_row_ms(cal, 100, masked=True) == pytest.approx(0.2)  # 0.1 + 50/150 * 0.3
    assert attention_row_ms(cal, 25, masked=False) == pytest.approx(0.025)  # from 0 at L = 0
    assert attention_row_ms(cal, 400, masked=True) == pytest.approx(1.6)  # 0.4 * (400/200)^2


def test_call_time_by_hand() -> None:
    call = EncoderCall(rows=10, width=100, layers=2, masked=True)
    got = call_time(fake_calibration(), SHAPE, call)
    # 1,000 tokens per layer: 4 x 2*1000*4*4 FLOPs at 2 GFLOP/s = 0.064 ms, 2*1000*4*8 at 4
    # GFLOP/s twice = 0.032 ms -> 0.096 ms x 2 layers
    assert got.linear_ms == pytest.approx(0.192)
    assert got.attention_ms == pytest.approx(4.0)  # 10 rows x 0.2 ms x 2 layers
    assert got.other_ms == pytest.approx(0.02)  # 1,000 tokens x 10 ns x 2 layers
    assert got.total_ms == pytest.approx(4.212)
    # per row and layer 4*100*16 + 2*100*4*8 + 2*100^2*4 = 92,800 MACs; x 2 layers x 10 rows x 2
    assert got.flops == 3_712_000


def test_predict_sums_calls_each_with_its_attentions_calibration() -> None:
    masked = EncoderCall(rows=10, width=100, layers=2, masked=True)
    other = EncoderCall(rows=1, width=400, layers=1, masked=True, attention="blocked")
    fast = fake_calibration()
    fast.attention = {"masked": [[200, 0.0]], "unmasked": [[200, 0.0]]}
    got = predict({"sdpa": fake_calibration(), "blocked": fast}, SHAPE, [masked, masked, other])
    assert got.attention_ms == pytest.approx(8.0)  # 2 x 4.0; the blocked call's attention: 0
    assert got.other_ms == pytest.approx(0.044)  # (2 x 2,000 + 400) tokens x 10 ns
    with pytest.raises(KeyError):  # an attention without a calibration is not guessed
        predict({"sdpa": fake_calibration()}, SHAPE, [other])


def test_row_cost_states_achieved_gflops_against_the_peak() -> None:
    calls = [EncoderCall(rows=10, width=100, layers=2, masked=True)] * 2
    cost = row_cost({"sdpa": fake_calibration()}, SHAPE, calls, queries=4, measured_ms=0.5)
    assert cost["flops_per_query"] == 2 * 3_712_000 / 4
    assert cost["achieved_gflops"] == pytest.approx(1_856_000 / 0.5 / 1e6)  # 3.712
    assert cost["peak_gflops"] == 10.0
    assert cost["of_peak"] == pytest.approx(0.3712)
    assert cost["predicted_ms"] == pytest.approx(2 * 4.212 / 4)
    assert cost["predicted"]["attention_ms"] == pytest.approx(2.0)
    # without a calibration: FLOPs and achieved GFLOP/s only
    bare = row_cost({}, SHAPE, calls, queries=4, measured_ms=0.5)
    assert set(bare) == {"flops_per_query", "achieved_gflops"}


def test_calls_compress_and_expand() -> None:
    a, b = EncoderCall(2, 9, 6, True), EncoderCall(1, 5, 6, False)
    stored = compress_calls([a, b, a])
    assert stored == [
        {"rows": 2, "width": 9, "layers": 6, "masked": True, "attention": "sdpa", "count": 2},
        {"rows": 1, "width": 5, "layers": 6, "masked": False, "attention": "sdpa", "count": 1},
    ]
    assert expand_calls(json.loads(json.dumps(stored))) == [a, a, b]


# -- calibration cache -------------------------------------------------------------------------
class Counting:
    """A fake measurement that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, shape: EncoderShape, dtype: str, attention: str) -> Calibration:
        self.calls.append((dtype, torch.get_num_threads()))
        cal = fake_calibration(dtype, torch.get_num_threads())
        cal.linear = {f"{k}x{n}": [[100, 4.0]] for k, n, _ in linear_shapes(shape)}
        return cal


@pytest.fixture()
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_calibration_is_measured_once_then_read(tmp_path: Path, one_thread: None) -> None:
    fake = Counting()
    first = load_or_measure(tmp_path, SHAPE, "float32", measure_fn=fake)
    assert first.path is not None and first.path.parent == tmp_path / "latency"
    assert first.path.name.startswith("calibration-float32-t1-")
    second = load_or_measure(tmp_path, SHAPE, "float32", measure_fn=fake)
    assert fake.calls == [("float32", 1)]  # the second call read the file
    assert second == first and second.machine["cpu"] == calibration.cpu_model()
    load_or_measure(tmp_path, SHAPE, "bfloat16", measure_fn=fake)  # another dtype: measured
    torch.set_num_threads(2)
    load_or_measure(tmp_path, SHAPE, "float32", measure_fn=fake)  # other threads: measured
    assert fake.calls == [("float32", 1), ("bfloat16", 1), ("float32", 2)]
    torch.set_num_threads(1)
    load_or_measure(tmp_path, SHAPE, "float32", fresh=True, measure_fn=fake)  # --calibrate
    assert len(fake.calls) == 4
    assert len(list((tmp_path / "latency").glob("calibration-*.json"))) == 3


def test_calibrations_of_a_run_measure_each_setting_once(tmp_path: Path, one_thread: None) -> None:
    fake = Counting()
    cals = Calibrations(tmp_path, "cpu", fresh=True, measure_fn=fake)
    assert cals.get(SHAPE, "float32", "sdpa") is cals.get(SHAPE, "float32", "sdpa")
    assert len(fake.calls) == 1  # fresh: measured anew once per run, not once per row
    assert cals.get(SHAPE, "int8", "sdpa") is None  # no calibration for that dtype
    assert Calibrations(tmp_path, "cuda:0", measure_fn=fake).get(SHAPE, "float32", "sdpa") is None


def test_a_real_calibration_has_every_rate(one_thread: None) -> None:
    cal = measure(EncoderShape(layers=2, hidden=32, intermediate=64, heads=2), "float32")
    assert set(cal.linear) == {"32x32", "32x64", "64x32"}
    assert [p[0] for p in cal.linear["32x64"]] == list(calibration.TOKENS)
    for name in ("masked", "unmasked"):
        assert [p[0] for p in cal.attention[name]] == list(calibration.LENGTHS)
    values = [p[1] for ps in [*cal.linear.values(), *cal.attention.values()] for p in ps]
    assert all(v > 0 for v in values) and cal.peak_gflops > 0 and cal.other_ns_per_token > 0
    assert cal.threads == 1 and cal.dtype == "float32"
    with pytest.raises(ValueError, match="no calibration for dtype 'int8'"):
        measure(EncoderShape(layers=2, hidden=32, intermediate=64, heads=2), "int8")


# -- what rankers declare ----------------------------------------------------------------------
def _list(n: int, qid: str = "q") -> CandidateList:
    words = ["python list sort", "java map", "a b c d e f g", "rust", "go slice of things"]
    cands = tuple(Candidate(f"d{i}", words[i % len(words)] * (1 + i % 3)) for i in range(n))
    return CandidateList(Query(qid, "python sort"), cands)


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("monobert", {"batch_size": 4}),
        ("crossjem", {"union_len": 24, "max_item_len": 8, "pad_tolerance": 0.3}),
    ],
)
def test_encoder_calls_are_the_batches_the_encoder_runs(
    tiny_bert: Path, name: str, options: dict
) -> None:
    """The calls a ranker declares are the (rows, width, masked) its encoder really gets."""
    ranker = create_ranker(name, {"model": str(tiny_bert), **options})
    lists = [_list(9), _list(7, "q2")]
    prepared = ranker.prepare_scoring(lists)
    seen: list[EncoderCall] = []

    def spy(_module: Any, _args: Any, kwargs: dict) -> None:
        ids, mask = kwargs["input_ids"], kwargs["attention_mask"]
        rows, width = ids.shape
        seen.append(EncoderCall(rows, width, 2, masked=bool((mask == 0).any())))

    encoder = ranker.scoring_module().encoder
    handle = encoder.register_forward_pre_hook(spy, with_kwargs=True)
    try:
        ranker.score_prepared(prepared)
    finally:
        handle.remove()
    declared = ranker.encoder_calls(prepared)
    assert declared == seen
    assert len(seen) > 1 and any(c.masked for c in seen)


# -- the record --------------------------------------------------------------------------------
def test_predicted_speedup_and_table_column(tmp_path: Path) -> None:
    from test_latency_bench import _record

    rec = _record()
    header = build_latency_table(rec).header()
    assert "speed-up predicted (time)" not in header  # records before the time model: as before
    for row in rec.rows:
        if row.n == 100 and row.ranker in ("monobert", "crossjem"):
            row.cost = {"predicted_ms": 90.0 if row.ranker == "monobert" else 30.0}
    rec.blocks[1].speedup = speedup_summary(rec.rows, rec.blocks[1])
    sp = rec.block(100).speedup
    assert sp["predicted_time"] == 3.0
    assert sp["fraction_of_time_prediction"] == pytest.approx(4.0 / 3.0)  # measured 100 / 25
    table = build_latency_table(rec)
    assert "speed-up predicted (time)" in table.header()
    md = render_latency(table, "markdown")
    assert "| 100 | " in md and "| 3.00x |" in md


def test_tiny_run_records_cost_and_prediction(
    shared_data: Path, tiny_bert: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = Counting()
    monkeypatch.setattr(calibration, "measure", fake)
    names = ("bm25", "monobert", "crossjem")
    opts = BenchOptions(
        dataset="wikiqa",
        split="test",
        n_values=(30,),
        queries=2,
        repeats=1,
        warmup=0,
        rankers=names,
        batch_sizes={"monobert": (16,)},
        threads=1,
        options={name: {"model": str(tiny_bert)} for name in names if name != "bm25"},
        data_dir=shared_data,
        results_dir=results_dir,
    )
    rec = run_benchmark(opts)
    assert fake.calls == [("float32", 1)]  # one calibration for both rankers
    encoders = [r for r in rec.rows if r.ranker != "bm25"]
    for row in encoders:
        assert row.encoder["dtype"] == "float32" and row.encoder["queries"] == 2
        assert row.encoder["shape"] == {"layers": 2, "hidden": 32, "intermediate": 128, "heads": 2}
        assert set(row.cost) >= {"flops_per_query", "achieved_gflops", "peak_gflops", "of_peak"}
        assert row.cost["peak_gflops"] == 10.0 and row.cost["predicted_ms"] > 0
        assert row.cost["of_peak"] == pytest.approx(row.cost["achieved_gflops"] / 10.0)
    bm25 = next(r for r in rec.rows if r.ranker == "bm25")
    assert bm25.encoder == {} and bm25.cost == {}
    assert "predicted_time" in rec.block(30).speedup
    [loaded] = load_latency_records(results_dir, "wikiqa")
    assert loaded.to_json() == json.loads(json.dumps(rec.to_json()))
    assert "encoder" not in loaded.to_json()["rows"][0]  # bm25's row as before the fields
    lines = latency_summary(loaded)
    assert any("time model" in line for line in lines)
    assert any("% of the 10 GFLOP/s peak" in line for line in lines)
    run_benchmark(dataclasses.replace(opts, calibrate=True))
    assert len(fake.calls) == 2  # --calibrate measured anew


def test_old_blocks_without_time_prediction_render_as_before() -> None:
    block = ListBlock(30, 2, {"cost": {"predicted_speedup": 2.0}, "compression_mean": 3.0})
    rec = LatencyRecord("w", "test", "t", {}, "h", "cpu", 1, 1, [block], [], {}, {})
    assert build_latency_table(rec).header()[-2:] == ["speed-up predicted", "C"]
