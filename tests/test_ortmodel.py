"""The ONNX Runtime time model: predictions from hand-made calibrations with hand-computed
values, what each int8 recipe runs in int8, the calibration cache, and (where onnx and onnxruntime
are installed) the real tiny graphs and a benchmark run that predicts its runtime rows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.latency import calibration, ortcalibration
from bench.latency.efficiency import EncoderShape
from bench.latency.ortcalibration import (
    OrtCalibration,
    OrtCalibrations,
    layer_plans,
    layer_precisions,
    load_or_measure,
    matmul_kinds,
    needed_rates,
)
from bench.latency.ortmodel import add_runtime_costs, ort_call_time, ort_predict, ort_row_cost
from bench.latency.records import LatencyRow
from bench.latency.timemodel import add_costs, compress_calls
from rankers.hooks import EncoderCall

# d = 4, d_ff = 8, 2 heads: a layer's MatMuls are Q, K, V and the output (4x4), 4x8 and 8x4
SHAPE = EncoderShape(layers=2, hidden=4, intermediate=8, heads=2)
# 10 rows of 100 tokens: 1,000 tokens per layer
CALL = EncoderCall(rows=10, width=100, layers=2, masked=True)
F32, I8 = "float32", "int8"


def fake_calibration(
    dtype: str = I8, recipe: str | None = "ffn-float", graph: str = "fused", threads: int = 1
) -> OrtCalibration:
    """Rates chosen so that every prediction below is exact by hand: int8 MatMuls at 2 GFLOP/s
    (4x4) and 4 (4x8), float32 ones at 1; attention 0.2 ms per row at L = 100 in float32 (0.1 +
    50/150 x 0.3), half that in int8."""
    return OrtCalibration(
        dtype=dtype,
        recipe=recipe,
        graph=graph,
        threads=threads,
        hidden=4,
        heads=2,
        intermediate=8,
        peak_gflops=10.0,
        linear={
            I8: {"4x4": [[100, 2.0]], "4x8": [[100, 4.0]], "8x4": [[100, 4.0]]},
            F32: {"4x4": [[100, 1.0]], "4x8": [[100, 1.0]], "8x4": [[100, 1.0]]},
        },
        attention={F32: [[50, 0.1], [200, 0.4]], I8: [[50, 0.05], [200, 0.2]]},
        other_ns_per_token=10.0,
        runtime_version="1.0",
    )


# FLOPs of one layer's MatMuls over 1,000 tokens: 4x4 32,000 each, 4x8 and 8x4 64,000 each
def test_each_recipe_sets_each_layers_matmul_precision() -> None:
    assert layer_precisions(F32, None, 0) == dict.fromkeys(
        ("qkv", "attn_out", "ffn_in", "ffn_out"), F32
    )
    assert layer_precisions(I8, "all", 3) == dict.fromkeys(
        ("qkv", "attn_out", "ffn_in", "ffn_out"), I8
    )
    ffn_float = {"qkv": I8, "attn_out": I8, "ffn_in": F32, "ffn_out": F32}
    assert layer_precisions(I8, "ffn-float", 0) == ffn_float
    assert layer_precisions(I8, None, 5) == ffn_float  # the ranker's default recipe
    out_float = {"qkv": I8, "attn_out": I8, "ffn_in": I8, "ffn_out": F32}
    assert layer_precisions(I8, "ffn-out-float", 0) == out_float
    # the whole first layer float32, the others as ffn-out-float
    assert layer_plans(I8, "ffn-out-first-float", 6) == [
        (dict.fromkeys(out_float, F32), 1),
        (out_float, 5),
    ]


def test_fused_int8_call_by_hand() -> None:
    """ffn-float on the fused graph: the attention output MatMul int8, both feed-forward ones
    float32; Q, K and V inside the fused attention, at its int8 (QAttention) rate."""
    got = ort_call_time(fake_calibration(), SHAPE, CALL)
    # per layer: 32,000 / 2 GFLOP/s = 0.016 ms + 2 x 64,000 / 1 GFLOP/s = 0.128 ms; 2 layers
    assert got.linear_ms == pytest.approx(0.288)
    assert got.attention_ms == pytest.approx(2.0)  # 10 rows x 0.1 ms x 2 layers
    assert got.other_ms == pytest.approx(0.02)  # 1,000 tokens x 10 ns x 2 layers
    assert got.flops == 3_712_000  # the torch model's FLOPs of the same call
    every = ort_call_time(fake_calibration(recipe="all"), SHAPE, CALL)
    assert every.linear_ms == pytest.approx(2 * (0.016 + 2 * 0.016))  # 64,000 / 4 GFLOP/s


def test_first_layer_recipe_by_hand() -> None:
    got = ort_call_time(fake_calibration(recipe="ffn-out-first-float"), SHAPE, CALL)
    # layer 0 float32: 0.032 + 0.064 + 0.064; layer 1: 0.016 + 0.016 (4x8 int8) + 0.064
    assert got.linear_ms == pytest.approx(0.16 + 0.096)
    assert got.attention_ms == pytest.approx(10 * 0.2 + 10 * 0.1)  # float32 layer 0, int8 layer 1


def test_plain_graph_times_qkv_as_matmuls_and_attention_in_float32() -> None:
    got = ort_call_time(fake_calibration(graph="plain"), SHAPE, CALL)
    # Q, K, V and output int8: 4 x 0.016; feed-forward float32: 2 x 0.064; x 2 layers
    assert got.linear_ms == pytest.approx(2 * (0.064 + 0.128))
    assert got.attention_ms == pytest.approx(4.0)  # the exported pattern runs float32: 0.2 ms
    fp32 = ort_call_time(fake_calibration(F32, None, "plain"), SHAPE, CALL)
    assert fp32.linear_ms == pytest.approx(2 * (4 * 0.032 + 2 * 0.064))
    assert fp32.attention_ms == pytest.approx(4.0)
    unpadded = EncoderCall(rows=10, width=100, layers=2, masked=False)  # the mask always runs
    assert ort_call_time(fake_calibration(), SHAPE, unpadded) == ort_call_time(
        fake_calibration(), SHAPE, CALL
    )


def test_row_cost_states_the_prediction_and_the_runtime_peak() -> None:
    calls = [CALL, CALL]
    cost = ort_row_cost(fake_calibration(), SHAPE, calls, queries=4, measured_ms=0.5)
    assert cost["flops_per_query"] == 2 * 3_712_000 / 4
    assert cost["achieved_gflops"] == pytest.approx(3.712)
    assert cost["peak_gflops"] == 10.0 and cost["of_peak"] == pytest.approx(0.3712)
    assert cost["predicted_ms"] == pytest.approx(2 * 2.308 / 4)
    assert cost["predicted"]["linear_ms"] == pytest.approx(0.144)
    [summary] = cost["calibration"]
    assert summary["runtime"] == "onnxruntime 1.0" and summary["int8_recipe"] == "ffn-float"
    assert ort_predict(fake_calibration(), SHAPE, calls).total_ms == pytest.approx(4.616)
    bare = ort_row_cost(None, SHAPE, calls, queries=4, measured_ms=0.5)
    assert set(bare) == {"flops_per_query", "achieved_gflops"}


def test_a_calibration_measures_what_its_recipe_runs() -> None:
    linear, attention = needed_rates(SHAPE, I8, "ffn-float", "fused")
    assert linear == {I8: {(4, 4)}, F32: {(4, 8), (8, 4)}} and attention == {I8}
    linear, attention = needed_rates(SHAPE, I8, "ffn-out-first-float", "fused")
    assert linear == {F32: {(4, 4), (4, 8), (8, 4)}, I8: {(4, 4), (4, 8)}}
    assert attention == {F32, I8}
    linear, attention = needed_rates(SHAPE, F32, None, "plain")
    assert linear == {F32: {(4, 4), (4, 8), (8, 4)}} and attention == {F32}


def _row(encoder: dict[str, Any]) -> LatencyRow:
    return LatencyRow(
        "r",
        "monobert",
        "monobert",
        "cross-encoder",
        10,
        1,
        {},
        "",
        "",
        {"mean_ms": 0.5},
        encoder={
            **encoder,
            "shape": dataclasses.asdict(SHAPE),
            "queries": 4,
            "calls": compress_calls([CALL, CALL]),
        },
    )


def test_each_row_is_predicted_by_its_runtimes_model() -> None:
    """A runtime row never gets torch's rates (a float32 ONNX Runtime row has a torch float32
    calibration to mistake for its own); a torch row never gets the runtime's."""
    runtime = _row({"runtime": "onnxruntime", "dtype": F32, "graph": "fused"})
    plain = _row({"dtype": F32})
    asked: list[Any] = []
    add_costs([runtime, plain], lambda shape, dtype, attention: asked.append(dtype))
    assert asked == [F32] and runtime.cost == {}  # the torch row's alone
    assert plain.cost == {"flops_per_query": 2 * 3_712_000 / 4, "achieved_gflops": 3.712}
    plain.cost = {}
    add_runtime_costs([runtime, plain], lambda shape, enc: asked.append(enc) or fake_calibration())
    assert asked == [F32, runtime.encoder] and plain.cost == {}
    assert runtime.cost["predicted_ms"] == pytest.approx(2 * 2.308 / 4)


# -- calibration cache -------------------------------------------------------------------------
class Counting:
    """A fake measurement that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __call__(
        self, shape: EncoderShape, dtype: str, recipe: str | None, graph: str
    ) -> OrtCalibration:
        self.calls.append((dtype, recipe, graph, torch.get_num_threads()))
        cal = fake_calibration(dtype, recipe, graph, torch.get_num_threads())
        rates = {f"{k}x{n}": [[100, 4.0]] for k, n, _ in matmul_kinds(shape).values()}
        cal.linear = {F32: rates, I8: rates}
        return cal


@pytest.fixture()
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_calibration_is_measured_once_per_setting(tmp_path: Path, one_thread: None) -> None:
    fake = Counting()
    first = load_or_measure(tmp_path, SHAPE, I8, "ffn-float", "fused", measure_fn=fake)
    assert first.path is not None and first.path.parent == tmp_path / "latency"
    assert first.path.name.startswith("calibration-onnxruntime-int8-ffn-float-fused-t1-")
    again = load_or_measure(tmp_path, SHAPE, I8, "ffn-float", "fused", measure_fn=fake)
    assert again == first and len(fake.calls) == 1  # read back
    assert again.machine["cpu"] == calibration.cpu_model() and again.machine["graph"] == "fused"
    assert again.machine["onnxruntime"] == ortcalibration.runtime_version()
    load_or_measure(tmp_path, SHAPE, I8, "all", "fused", measure_fn=fake)  # another recipe
    load_or_measure(tmp_path, SHAPE, I8, "ffn-float", "plain", measure_fn=fake)  # another graph
    # float32 has no recipe: the one given is not part of its key
    load_or_measure(tmp_path, SHAPE, F32, "all", "fused", measure_fn=fake)
    load_or_measure(tmp_path, SHAPE, F32, "ffn-float", "fused", measure_fn=fake)
    torch.set_num_threads(2)
    load_or_measure(tmp_path, SHAPE, I8, "ffn-float", "fused", measure_fn=fake)  # threads
    assert fake.calls == [
        (I8, "ffn-float", "fused", 1),
        (I8, "all", "fused", 1),
        (I8, "ffn-float", "plain", 1),
        (F32, None, "fused", 1),
        (I8, "ffn-float", "fused", 2),
    ]
    load_or_measure(tmp_path, SHAPE, I8, "ffn-float", "fused", fresh=True, measure_fn=fake)
    assert len(fake.calls) == 6  # --calibrate
    saved = json.loads(first.path.read_text(encoding="utf-8"))
    assert OrtCalibration.from_json(saved, first.path) == first


def test_run_calibrations_follow_each_rows_runtime(tmp_path: Path, one_thread: None) -> None:
    fake = Counting()
    cals = OrtCalibrations(tmp_path, "cpu", fresh=True, measure_fn=fake)
    work = {"runtime": "onnxruntime", "dtype": I8, "graph": "fused", "int8_recipe": "all"}
    got = cals.get(SHAPE, work)
    assert got is not None and got is cals.get(SHAPE, work)
    assert fake.calls == [(I8, "all", "fused", 1)]  # fresh: once per run, not once per row
    assert cals.get(SHAPE, {"dtype": F32}) is None  # torch rows: the torch calibration's
    assert cals.get(SHAPE, {**work, "runtime": "openvino"}) is None
    assert OrtCalibrations(tmp_path, "cuda:0", measure_fn=fake).get(SHAPE, work) is None


def test_a_failed_calibration_leaves_the_rows_without_prediction(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The rows are timed before their calibration: its failure must not lose them."""
    tries: list[str] = []

    def failing(*args: Any) -> OrtCalibration:
        tries.append("measured")
        raise RuntimeError("op not implemented")

    cals = OrtCalibrations(tmp_path, "cpu", measure_fn=failing)
    work = {"runtime": "onnxruntime", "dtype": F32, "graph": "plain"}
    assert cals.get(SHAPE, work) is None and cals.get(SHAPE, work) is None
    assert tries == ["measured"]  # not tried again for every row
    assert "calibrating failed (RuntimeError: op not implemented)" in caplog.text


# -- with onnx and onnxruntime -------------------------------------------------------------------
def _ops(model: bytes) -> set[str]:
    import onnx

    return {node.op_type for node in onnx.load_from_string(model).graph.node}


def test_int8_kernels_are_quantized_by_the_rankers_quantizer() -> None:
    """The tiny graphs go through the ranker's own quantize_dynamic settings: int8 MatMuls and
    QAttention, as in the quantized encoder; the plain attention's products stay float32."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from rankers.runtimes import quantize_int8

    assert "MatMulInteger" in _ops(quantize_int8(ortcalibration.linear_graph(8, 16, bias=True)))
    assert "QAttention" in _ops(quantize_int8(ortcalibration.fused_attention_graph(8, 2)))
    plain = quantize_int8(ortcalibration.plain_attention_graph(8, 2))
    assert "MatMul" in _ops(plain) and "MatMulInteger" not in _ops(plain)


QUANTIZED = {"MatMulInteger", "QAttention", "DynamicQuantizeLinear"}


def test_a_real_calibration_has_every_rate(
    one_thread: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every rate measured and positive, each int8 kernel timed quantized in a session built as
    the ranker's, each float32 one not."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from rankers import runtimes

    sessions: list[tuple[str, bool, int]] = []
    build = runtimes.onnxruntime_session

    def spy(model: bytes, precision: str, threads: int) -> runtimes.Session:
        sessions.append((precision, bool(_ops(model) & QUANTIZED), threads))
        return build(model, precision, threads)

    monkeypatch.setattr(runtimes, "onnxruntime_session", spy)
    shape = EncoderShape(layers=2, hidden=32, intermediate=64, heads=2)
    for graph in ("fused", "plain"):
        sessions.clear()
        cal = ortcalibration.measure(shape, I8, "ffn-out-first-float", graph)
        # peak, 5 MatMuls, attention in each precision the graph runs it, the rest (float32)
        kernels = [(I8, True, 1)] * 3 + [(F32, False, 1)] * 4 + [(F32, False, 1)]
        kernels += [(I8, graph == "fused", 1)] if graph == "fused" else []
        assert sorted(sessions) == sorted(kernels)
        assert set(cal.linear[F32]) == {"32x32", "32x64", "64x32"}
        assert set(cal.linear[I8]) == {"32x32", "32x64"}
        assert set(cal.attention) == ({F32, I8} if graph == "fused" else {F32})
        assert [p[0] for p in cal.linear[I8]["32x64"]] == list(calibration.TOKENS)
        assert [p[0] for p in cal.attention[F32]] == list(calibration.LENGTHS)
        rates = [p[1] for ps in cal.linear.values() for pts in ps.values() for p in pts]
        rates += [p[1] for pts in cal.attention.values() for p in pts]
        assert all(r > 0 for r in rates) and cal.peak_gflops > 0 and cal.other_ns_per_token > 0
        assert cal.threads == 1 and cal.runtime_version == ortcalibration.runtime_version()
        # every call of the model predicted from it
        assert ort_call_time(cal, shape, EncoderCall(3, 40, 2, True)).total_ms > 0
    with pytest.raises(ValueError, match="no ONNX Runtime calibration for dtype 'bfloat16'"):
        ortcalibration.measure(shape, "bfloat16", None, "fused")


def test_tiny_run_predicts_runtime_rows(
    shared_data: Path,
    tiny_bert: Path,
    results_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`bench latency --set runtime=onnxruntime --set dtype=int8`: each row's encoder work names
    its runtime, graph and recipe, its time is predicted from the ONNX Runtime calibration of that
    setting (never from torch's), and the summary prints it beside the measured time."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from bench.latency.benchmark import run_benchmark
    from bench.latency.protocol import BenchOptions
    from bench.latency.tables import latency_summary

    fake, torch_measured = Counting(), []
    monkeypatch.setattr(ortcalibration, "measure", fake)
    monkeypatch.setattr(calibration, "measure", lambda *a: torch_measured.append(a))
    opts = BenchOptions(
        dataset="wikiqa",
        split="test",
        n_values=(10,),
        queries=1,
        repeats=1,
        warmup=0,
        rankers=("monobert", "crossjem"),
        batch_sizes={"monobert": (16,)},
        threads=1,
        options={
            name: {"model": str(tiny_bert), "runtime": "onnxruntime", "dtype": "int8"}
            for name in ("monobert", "crossjem")
        },
        data_dir=shared_data,
        results_dir=results_dir,
    )
    rec = run_benchmark(opts)
    assert torch_measured == []
    # each ranker on its faster graph, the default recipe: one calibration each
    assert sorted(fake.calls) == [(I8, "ffn-float", "fused", 1), (I8, "ffn-float", "plain", 1)]
    for row in rec.rows:
        graph = "plain" if row.ranker == "monobert" else "fused"
        assert {k: row.encoder[k] for k in ("runtime", "dtype", "graph", "int8_recipe")} == {
            "runtime": "onnxruntime",
            "dtype": I8,
            "graph": graph,
            "int8_recipe": "ffn-float",
        }
        assert row.cost["peak_gflops"] == 10.0 and row.cost["predicted_ms"] > 0
        assert row.cost["calibration"][0]["graph"] == graph
    assert rec.block(10).speedup["predicted_time"] > 0
    lines = latency_summary(rec)
    assert any("time model" in line for line in lines)
    assert any(
        "int8 (onnxruntime, fused graph, int8_recipe=ffn-float): measured" in line
        and "predicted encoder" in line
        for line in lines
    )
