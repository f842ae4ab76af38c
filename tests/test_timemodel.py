"""The latency cost model in time, one model for every runtime: predictions from hand-made
calibrations with hand-computed values (PyTorch and ONNX Runtime rows, what each int8 recipe runs
in int8), the calibration cache and the checks a cached file passes, the encoder calls rankers
declare, the record fields, and (where onnx and onnxruntime are installed) the real tiny graphs
and a benchmark run that predicts its runtime rows. No timed assertions."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.core.io import StorageError
from bench.data.model import Candidate, CandidateList, Query
from bench.latency import benchmark, protocol
from bench.latency.benchmark import run_benchmark
from bench.latency.costmodel import kernels, probes
from bench.latency.costmodel.flops import EncoderShape
from bench.latency.costmodel.kernels import (
    BACKENDS,
    Calibration,
    load_or_measure,
    measure_calibration,
)
from bench.latency.costmodel.probes import layer_plans, layer_precisions, matmul_kinds
from bench.latency.costmodel.time import (
    Calibrations,
    add_costs,
    call_time,
    compress_calls,
    expand_calls,
    linear_gflops,
    predict,
    row_cost,
    row_ms_at,
)
from bench.latency.plan import BenchOptions
from bench.latency.records import (
    LatencyRecord,
    LatencyRow,
    ListBlock,
    load_latency_records,
    speedup_summary,
)
from bench.reporting.latency_tables import build_latency_table, latency_summary, render_latency
from rankers import create_ranker
from rankers.hooks import EncoderCall, EncoderRun

# d = 4, d_ff = 8, 2 heads: a layer's MatMuls are Q, K, V and the output (4x4), 4x8 and 8x4
SHAPE = EncoderShape(layers=2, hidden=4, intermediate=8, heads=2)
# 10 rows of 100 tokens: 1,000 tokens per layer
CALL = EncoderCall(rows=10, width=100, layers=2, masked=True)
F32, I8, ORT = "float32", "int8", "onnxruntime"


def fake_calibration(dtype: str = F32, threads: int = 1) -> Calibration:
    """PyTorch rates chosen so that every prediction below is exact by hand."""
    return Calibration(
        runtime="torch",
        dtype=dtype,
        setting={"attention": "sdpa"},
        threads=threads,
        hidden=4,
        heads=2,
        intermediate=8,
        peak_gflops=10.0,
        # 4x4: 1 GFLOP/s at 100 tokens, 3 at 10,000 -> 2 at 1,000 (midway in log tokens)
        linear={
            dtype: {"4x4": [[100, 1.0], [10000, 3.0]], "4x8": [[100, 4.0]], "8x4": [[100, 4.0]]}
        },
        attention={"masked": [[50, 0.1], [200, 0.4]], "unmasked": [[50, 0.05], [200, 0.2]]},
        other_ns_per_token=10.0,
    )


def fake_ort_calibration(
    dtype: str = I8, recipe: str | None = "ffn-float", graph: str = "fused", threads: int = 1
) -> Calibration:
    """ONNX Runtime rates chosen so that every prediction below is exact by hand: int8 MatMuls at
    2 GFLOP/s (4x4) and 4 (4x8), float32 ones at 1; attention 0.2 ms per row at L = 100 in
    float32 (0.1 + 50/150 x 0.3), half that in int8."""
    return Calibration(
        runtime=ORT,
        dtype=dtype,
        setting={"graph": graph, "int8_recipe": recipe if dtype == I8 else None},
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


# -- PyTorch rows by hand -----------------------------------------------------------------------
def test_rates_interpolate_and_extrapolate_by_hand() -> None:
    cal = fake_calibration()
    assert linear_gflops(cal, F32, 4, 4, 1000) == pytest.approx(2.0)
    assert linear_gflops(cal, F32, 4, 4, 10) == 1.0  # below the grid: its first rate
    assert linear_gflops(cal, F32, 4, 4, 10**6) == 3.0  # above: its last
    assert row_ms_at(cal.attention["masked"], 100) == pytest.approx(0.2)  # 0.1 + 50/150 * 0.3
    assert row_ms_at(cal.attention["unmasked"], 25) == pytest.approx(0.025)  # from 0 at L = 0
    assert row_ms_at(cal.attention["masked"], 400) == pytest.approx(1.6)  # 0.4 * (400/200)^2


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
    got = call_time(fake_ort_calibration(), SHAPE, CALL)
    # per layer: 32,000 / 2 GFLOP/s = 0.016 ms + 2 x 64,000 / 1 GFLOP/s = 0.128 ms; 2 layers
    assert got.linear_ms == pytest.approx(0.288)
    assert got.attention_ms == pytest.approx(2.0)  # 10 rows x 0.1 ms x 2 layers
    assert got.other_ms == pytest.approx(0.02)  # 1,000 tokens x 10 ns x 2 layers
    assert got.flops == 3_712_000  # the torch model's FLOPs of the same call
    every = call_time(fake_ort_calibration(recipe="all"), SHAPE, CALL)
    assert every.linear_ms == pytest.approx(2 * (0.016 + 2 * 0.016))  # 64,000 / 4 GFLOP/s


def test_first_layer_recipe_by_hand() -> None:
    got = call_time(fake_ort_calibration(recipe="ffn-out-first-float"), SHAPE, CALL)
    # layer 0 float32: 0.032 + 0.064 + 0.064; layer 1: 0.016 + 0.016 (4x8 int8) + 0.064
    assert got.linear_ms == pytest.approx(0.16 + 0.096)
    assert got.attention_ms == pytest.approx(10 * 0.2 + 10 * 0.1)  # float32 layer 0, int8 layer 1


def test_plain_graph_times_qkv_as_matmuls_and_attention_in_float32() -> None:
    got = call_time(fake_ort_calibration(graph="plain"), SHAPE, CALL)
    # Q, K, V and output int8: 4 x 0.016; feed-forward float32: 2 x 0.064; x 2 layers
    assert got.linear_ms == pytest.approx(2 * (0.064 + 0.128))
    assert got.attention_ms == pytest.approx(4.0)  # the exported pattern runs float32: 0.2 ms
    fp32 = call_time(fake_ort_calibration(F32, None, "plain"), SHAPE, CALL)
    assert fp32.linear_ms == pytest.approx(2 * (4 * 0.032 + 2 * 0.064))
    assert fp32.attention_ms == pytest.approx(4.0)
    unpadded = EncoderCall(rows=10, width=100, layers=2, masked=False)  # the mask always runs
    assert call_time(fake_ort_calibration(), SHAPE, unpadded) == call_time(
        fake_ort_calibration(), SHAPE, CALL
    )


def test_row_cost_states_the_prediction_and_the_runtime_peak() -> None:
    calls = [CALL, CALL]
    cost = row_cost({"sdpa": fake_ort_calibration()}, SHAPE, calls, queries=4, measured_ms=0.5)
    assert cost["flops_per_query"] == 2 * 3_712_000 / 4
    assert cost["achieved_gflops"] == pytest.approx(3.712)
    assert cost["peak_gflops"] == 10.0 and cost["of_peak"] == pytest.approx(0.3712)
    assert cost["predicted_ms"] == pytest.approx(2 * 2.308 / 4)
    assert cost["predicted"]["linear_ms"] == pytest.approx(0.144)
    [summary] = cost["calibration"]
    assert summary["runtime"] == "onnxruntime 1.0" and summary["int8_recipe"] == "ffn-float"
    assert predict({"sdpa": fake_ort_calibration()}, SHAPE, calls).total_ms == pytest.approx(4.616)
    bare = row_cost({}, SHAPE, calls, queries=4, measured_ms=0.5)
    assert set(bare) == {"flops_per_query", "achieved_gflops"}


def test_a_calibration_measures_what_its_recipe_runs() -> None:
    def needed(dtype: str, recipe: str | None, graph: str) -> tuple[Any, Any]:
        setting = {"graph": graph, "int8_recipe": recipe}
        found = BACKENDS[ORT, "cpu"].needed(SHAPE, dtype, setting)
        return found.linear, found.attention

    linear, attention = needed(I8, "ffn-float", "fused")
    assert linear == {I8: {(4, 4)}, F32: {(4, 8), (8, 4)}} and attention == {I8}
    linear, attention = needed(I8, "ffn-out-first-float", "fused")
    assert linear == {F32: {(4, 4), (4, 8), (8, 4)}, I8: {(4, 4), (4, 8)}}
    assert attention == {F32, I8}
    linear, attention = needed(F32, None, "plain")
    assert linear == {F32: {(4, 4), (4, 8), (8, 4)}} and attention == {F32}
    torch_needs = BACKENDS["torch", "cpu"].needed(SHAPE, "bfloat16", {"attention": "sdpa"})
    assert torch_needs.linear == {"bfloat16": {(4, 4), (4, 8), (8, 4)}}
    assert torch_needs.attention == {"masked", "unmasked"}


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
    calibration to mistake for its own); a torch row never gets the runtime's: one add_costs
    asks for each row's own runtime, dtype and setting."""
    runtime = _row({"runtime": ORT, "dtype": F32, "graph": "fused"})
    plain = _row({"dtype": F32})
    asked: list[Any] = []

    def calibration(shape: EncoderShape, work: dict, attention: str) -> Calibration | None:
        asked.append((dict(work), attention))
        if work.get("runtime") == ORT:
            return fake_ort_calibration(F32, None, "fused")
        return None

    add_costs([runtime, plain], calibration)
    assert asked == [(runtime.encoder, "sdpa"), (plain.encoder, "sdpa")]
    assert plain.cost == {"flops_per_query": 2 * 3_712_000 / 4, "achieved_gflops": 3.712}
    # float32 on the fused graph: Q, K, V in the attention (0.2 ms per row), 3 MatMuls at 1
    assert runtime.cost["predicted"]["attention_ms"] == pytest.approx(2 * 4.0 / 4)
    assert runtime.cost["calibration"][0]["graph"] == "fused"
    # the torch calibration reads the row's attention rate by mask, PyTorch's layer plan
    assert call_time(fake_calibration(), SHAPE, CALL).attention_ms == pytest.approx(4.0)


# -- calibration cache -------------------------------------------------------------------------
class Counting:
    """A fake measurement that counts its calls: (runtime, dtype, setting values, threads)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.devices: list[str] = []

    def __call__(
        self,
        runtime: str,
        shape: EncoderShape,
        dtype: str,
        setting: dict[str, Any],
        device: str = "cpu",
    ) -> Calibration:
        threads = torch.get_num_threads()
        self.calls.append((runtime, dtype, *setting.values(), threads))
        self.devices.append(device)
        rates = {f"{k}x{n}": [[100, 4.0]] for k, n, _ in matmul_kinds(shape).values()}
        if runtime == ORT:
            cal = fake_ort_calibration(dtype, setting["int8_recipe"], setting["graph"], threads)
            cal.linear = {F32: rates, I8: rates}
        else:
            cal = fake_calibration(dtype, threads)
            cal.linear = {dtype: rates}
        if device.startswith("cuda"):  # as a GPU's calibration: a fixed cost per call
            cal.device, cal.call_ms, cal.call_layer_ms = "cuda", 1.5, 0.25
        return cal


def ten(runtime: str, dtype: str, device: str = "cpu") -> float:
    """A fake matmul peak, as the fakes' rates are set against."""
    return 10.0


@pytest.fixture()
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


TORCH_SDPA = {"attention": "sdpa"}


def test_calibration_is_measured_once_then_read(tmp_path: Path, one_thread: None) -> None:
    fake = Counting()
    kw: dict[str, Any] = {"measure_fn": fake, "peak_fn": ten}
    first = load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, **kw)
    assert first.path is not None and first.path.parent == tmp_path / "latency"
    assert first.path.name.startswith("calibration-float32-t1-")
    second = load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, **kw)
    assert fake.calls == [("torch", F32, "sdpa", 1)]  # the second call read the file
    assert second == first and second.machine["cpu"] == kernels.cpu_model()
    load_or_measure(tmp_path, SHAPE, "torch", "bfloat16", TORCH_SDPA, **kw)  # another dtype
    torch.set_num_threads(2)
    load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, **kw)  # other threads: measured
    assert fake.calls == [("torch", F32, "sdpa", 1), ("torch", "bfloat16", "sdpa", 1)] + [
        ("torch", F32, "sdpa", 2)
    ]
    torch.set_num_threads(1)
    load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, fresh=True, **kw)  # --calibrate
    assert len(fake.calls) == 4
    assert len(list((tmp_path / "latency").glob("calibration-*.json"))) == 3


def test_runtime_calibration_is_measured_once_per_setting(tmp_path: Path, one_thread: None) -> None:
    fake = Counting()
    kw: dict[str, Any] = {"measure_fn": fake, "peak_fn": ten}
    backend = BACKENDS[ORT, "cpu"]

    def load(dtype: str, recipe: str, graph: str, **more: Any) -> Calibration:
        work = {"dtype": dtype, "graph": graph, "int8_recipe": recipe}
        setting = backend.setting(work, "sdpa")
        assert setting is not None
        return load_or_measure(tmp_path, SHAPE, ORT, dtype, setting, **kw, **more)

    first = load(I8, "ffn-float", "fused")
    assert first.path is not None and first.path.parent == tmp_path / "latency"
    assert first.path.name.startswith("calibration-onnxruntime-int8-ffn-float-fused-t1-")
    again = load(I8, "ffn-float", "fused")
    assert again == first and len(fake.calls) == 1  # read back
    assert again.machine["cpu"] == kernels.cpu_model() and again.machine["graph"] == "fused"
    assert again.machine["runtime_version"] == backend.version()
    load(I8, "all", "fused")  # another recipe
    load(I8, "ffn-float", "plain")  # another graph
    # float32 has no recipe: the one given is not part of its key
    load(F32, "all", "fused")
    load(F32, "ffn-float", "fused")
    torch.set_num_threads(2)
    load(I8, "ffn-float", "fused")  # threads
    assert fake.calls == [
        (ORT, I8, "fused", "ffn-float", 1),
        (ORT, I8, "fused", "all", 1),
        (ORT, I8, "plain", "ffn-float", 1),
        (ORT, F32, "fused", None, 1),
        (ORT, I8, "fused", "ffn-float", 2),
    ]
    load(I8, "ffn-float", "fused", fresh=True)
    assert len(fake.calls) == 6  # --calibrate


@pytest.mark.parametrize("runtime", ["torch", ORT])
def test_calibrations_of_a_run_measure_each_setting_once(
    tmp_path: Path, one_thread: None, runtime: str
) -> None:
    fake = Counting()
    cals = Calibrations(tmp_path, "cpu", fresh=True, measure_fn=fake, peak_fn=ten)
    work = {"dtype": F32} if runtime == "torch" else {"runtime": ORT, "dtype": I8, "graph": "fused"}
    got = cals.get(SHAPE, work, "sdpa")
    assert got is not None and got is cals.get(SHAPE, work, "sdpa") and got.runtime == runtime
    assert len(fake.calls) == 1  # fresh: measured anew once per run, not once per row
    assert cals.get(SHAPE, {**work, "dtype": "int4"}, "sdpa") is None  # no such dtype
    assert cals.get(SHAPE, {**work, "runtime": "openvino"}, "sdpa") is None  # no backend
    # a CUDA device has no ONNX Runtime entry: no prediction, nothing measured
    if runtime == ORT:
        assert Calibrations(tmp_path, "cuda:0", measure_fn=fake).get(SHAPE, work, "sdpa") is None
        assert len(fake.calls) == 1


def test_each_precision_of_a_run_has_its_own_calibration(tmp_path: Path, one_thread: None) -> None:
    """A ``--dtypes`` run asks for every precision: each gets the calibration measured in it,
    never another precision's (the dtype is part of the run's key)."""
    fake = Counting()
    cals = Calibrations(tmp_path, "cpu", measure_fn=fake, peak_fn=ten)
    by_dtype = {d: cals.get(SHAPE, {"dtype": d}, "sdpa") for d in (F32, "bfloat16", "float16")}
    assert {d: c.dtype for d, c in by_dtype.items() if c} == {
        F32: F32,
        "bfloat16": "bfloat16",
        "float16": "float16",
    }
    assert [c[1] for c in fake.calls] == [F32, "bfloat16", "float16"]


def test_a_failed_calibration_leaves_the_rows_without_prediction(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Measuring failing must not lose the rows: no prediction, a warning, no second try."""
    tries: list[str] = []

    def failing(*args: Any) -> Calibration:
        tries.append("measured")
        raise RuntimeError("op not implemented")

    cals = Calibrations(tmp_path, "cpu", measure_fn=failing)
    work = {"runtime": ORT, "dtype": F32, "graph": "plain"}
    assert cals.get(SHAPE, work, "sdpa") is None and cals.get(SHAPE, work, "sdpa") is None
    assert tries == ["measured"]  # not tried again for every row
    assert "calibrating failed (RuntimeError: op not implemented)" in caplog.text


# -- a cached file is read like every record -----------------------------------------------------
def _times_1000(data: dict) -> dict:
    """Every rate of a calibration file x1000 (GFLOP/s and ms alike)."""
    data["peak_gflops"] *= 1000
    data["other_ns_per_token"] *= 1000
    for shapes in data["linear"].values():
        for points in shapes.values():
            for p in points:
                p[1] *= 1000
    for points in data["attention"].values():
        for p in points:
            p[1] *= 1000
    return data


def _rates_x1000_only(data: dict) -> dict:
    """The GFLOP/s rates x1000, the peak kept: a kernel faster than the machine can be."""
    for shapes in data["linear"].values():
        for points in shapes.values():
            for p in points:
                p[1] *= 1000
    return data


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda text: "[1, 2]", "expected a JSON object, not a list"),
        (lambda text: text[: len(text) // 2], "column"),  # truncated: json's own message
        (
            lambda text: json.dumps({**json.loads(text), "peak_gflops": "10"}),
            "field 'peak_gflops': expected a finite number, not '10'",
        ),
        (
            lambda text: text.replace('"other_ns_per_token": 10.0', '"other_ns_per_token": "x"'),
            "field 'other_ns_per_token'",
        ),
        (lambda text: json.dumps(_times_1000(json.loads(text))), "field 'peak_gflops': 10000"),
        (lambda text: json.dumps(_rates_x1000_only(json.loads(text))), "field 'linear.float32.4x4"),
        (
            lambda text: json.dumps({**json.loads(text), "linear": {}}),
            "field 'linear.float32': missing",
        ),
        (lambda text: json.dumps({**json.loads(text), "dtype": "bfloat16"}), "field 'dtype'"),
    ],
)
def test_a_bad_cached_file_is_named_and_measured_anew(
    tmp_path: Path,
    one_thread: None,
    caplog: pytest.LogCaptureFixture,
    damage: Any,
    named: str,
) -> None:
    """A JSON list, strings where numbers belong, rates x1000, a truncated file, another
    setting's rates: the warning names the file and the field, and the calibration is measured
    anew (its rates, not the file's, predict)."""
    fake = Counting()
    kw: dict[str, Any] = {"measure_fn": fake, "peak_fn": ten}
    first = load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, **kw)
    assert first.path is not None
    first.path.write_text(damage(first.path.read_text(encoding="utf-8")), encoding="utf-8")
    again = load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, **kw)
    assert len(fake.calls) == 2  # measured anew
    assert again.peak_gflops == 10.0 and again.linear == first.linear
    assert f"measuring anew: {first.path} is not a usable calibration" in caplog.text
    assert named in caplog.text
    assert load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, **kw) == again
    assert len(fake.calls) == 2  # the file written anew reads back


def test_a_peak_of_another_machine_is_measured_anew(
    tmp_path: Path, one_thread: None, caplog: pytest.LogCaptureFixture
) -> None:
    fake = Counting()
    load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, measure_fn=fake, peak_fn=ten)
    # the same file read where the matmul peak is 200x higher: the rates are not this machine's
    load_or_measure(
        tmp_path, SHAPE, "torch", F32, TORCH_SDPA, measure_fn=fake, peak_fn=lambda *a: 2000.0
    )
    assert len(fake.calls) == 2 and "field 'peak_gflops': 10 GFLOP/s, measured now 2000" in (
        caplog.text
    )


def _tiny_options(tiny_bert: Path, shared_data: Path, results_dir: Path, **more: Any) -> Any:
    names = ("bm25", "monobert", "crossjem")
    return BenchOptions(
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
        **more,
    )


def test_the_calibration_is_read_before_the_timing(
    shared_data: Path,
    tiny_bert: Path,
    results_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bad cache is named and measured anew before any call is timed, not after all of them."""
    events: list[str] = []
    fake = Counting()

    def measured(*args: Any) -> Calibration:
        events.append("calibrated")
        return fake(*args)

    timing = protocol.time_parts

    def timed(*args: Any, **kw: Any) -> Any:
        events.append("timed")
        return timing(*args, **kw)

    monkeypatch.setattr(kernels, "measure_calibration", measured)
    monkeypatch.setattr(kernels, "measure_peak", ten)
    monkeypatch.setattr(protocol, "time_parts", timed)
    opts = _tiny_options(tiny_bert, shared_data, results_dir)
    run_benchmark(opts)
    assert events == ["calibrated", "timed"]
    [path] = (results_dir / "latency").glob("calibration-*.json")
    path.write_text("[1, 2]", encoding="utf-8")
    events.clear()
    rec = run_benchmark(opts)
    assert events == ["calibrated", "timed"]  # the list named and measured anew, first
    assert f"measuring anew: {path} is not a usable calibration" in caplog.text
    assert all(r.cost.get("predicted_ms") for r in rec.rows if r.ranker != "bm25")


def test_calibrating_into_a_read_only_folder_fails_before_the_timing(
    shared_data: Path, tiny_bert: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--calibrate`` writes into the results root's latency/: a folder that refuses writes stops
    the command before any timing (the test runs as any user: the folder check is what is
    faked, as a read-only mount would answer it)."""
    from bench.core.io import ensure_writable

    calibrations = results_dir / "latency"

    def read_only(folder: Path, what: str = "results", *args: Any) -> None:
        if folder == calibrations:
            raise StorageError(f"the {what} folder {folder} is not writable: read-only")
        ensure_writable(folder, what, *args)

    timed: list[str] = []
    monkeypatch.setattr(benchmark, "ensure_writable", read_only)
    monkeypatch.setattr(protocol, "time_parts", lambda *a, **k: timed.append("timed"))
    opts = _tiny_options(tiny_bert, shared_data, results_dir, calibrate=True)
    with pytest.raises(StorageError, match="latency calibration folder .* is not writable"):
        run_benchmark(opts)
    assert timed == []


def test_a_real_calibration_has_every_rate(one_thread: None) -> None:
    shape = EncoderShape(layers=2, hidden=32, intermediate=64, heads=2)
    cal = measure_calibration("torch", shape, F32, TORCH_SDPA)
    assert set(cal.linear) == {F32}
    assert set(cal.linear[F32]) == {"32x32", "32x64", "64x32"}
    assert [p[0] for p in cal.linear[F32]["32x64"]] == list(probes.TOKENS)
    for name in ("masked", "unmasked"):
        assert [p[0] for p in cal.attention[name]] == list(probes.LENGTHS)
    values = [p[1] for ps in cal.linear[F32].values() for p in ps]
    values += [p[1] for ps in cal.attention.values() for p in ps]
    assert all(v > 0 for v in values) and cal.peak_gflops > 0 and cal.other_ns_per_token > 0
    assert cal.threads == 1 and cal.dtype == F32
    # what it measured passes the checks a cached file passes, against a peak measured now
    assert kernels.implausible(cal, kernels.measure_peak("torch", F32)) is None
    with pytest.raises(ValueError, match="no torch calibration for dtype 'int8'"):
        measure_calibration("torch", shape, "int8", TORCH_SDPA)


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
        # no mask: a batch without padding (the scorers choose it on the host: rankers.inputs.masks)
        masked = mask is not None and bool((mask == 0).any())
        seen.append(EncoderCall(rows, width, 2, masked=masked))

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
    monkeypatch.setattr(kernels, "measure_calibration", fake)
    monkeypatch.setattr(kernels, "measure_peak", ten)
    opts = _tiny_options(tiny_bert, shared_data, results_dir)
    rec = run_benchmark(opts)
    assert fake.calls == [("torch", F32, "sdpa", 1)]  # one calibration for both rankers
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


# -- with onnx and onnxruntime -------------------------------------------------------------------
def _ops(model: bytes) -> set[str]:
    import onnx

    return {node.op_type for node in onnx.load_from_string(model).graph.node}


def test_int8_kernels_are_quantized_by_the_rankers_quantizer() -> None:
    """The tiny graphs go through the ranker's own quantize_dynamic settings: int8 MatMuls and
    QAttention, as in the quantized encoder; the plain attention's products stay float32."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from rankers.compute.runtimes import quantize_int8

    assert "MatMulInteger" in _ops(quantize_int8(probes.linear_graph(8, 16, bias=True)))
    assert "QAttention" in _ops(quantize_int8(probes.fused_attention_graph(8, 2)))
    plain = quantize_int8(probes.plain_attention_graph(8, 2))
    assert "MatMul" in _ops(plain) and "MatMulInteger" not in _ops(plain)


QUANTIZED = {"MatMulInteger", "QAttention", "DynamicQuantizeLinear"}


def test_a_real_runtime_calibration_has_every_rate(
    one_thread: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every rate measured and positive, each int8 kernel timed quantized in a session built as
    the ranker's, each float32 one not."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from rankers.compute import runtimes

    sessions: list[tuple[str, bool, int]] = []
    build = runtimes.onnxruntime_session

    def spy(model: bytes, precision: str, threads: int) -> runtimes.Session:
        sessions.append((precision, bool(_ops(model) & QUANTIZED), threads))
        return build(model, precision, threads)

    monkeypatch.setattr(runtimes, "onnxruntime_session", spy)
    shape = EncoderShape(layers=2, hidden=32, intermediate=64, heads=2)
    for graph in ("fused", "plain"):
        sessions.clear()
        setting = {"graph": graph, "int8_recipe": "ffn-out-first-float"}
        cal = measure_calibration(ORT, shape, I8, setting)
        # peak, 5 MatMuls, attention in each precision the graph runs it, the rest (float32)
        kernels = [(I8, True, 1)] * 3 + [(F32, False, 1)] * 4 + [(F32, False, 1)]
        kernels += [(I8, graph == "fused", 1)] if graph == "fused" else []
        assert sorted(sessions) == sorted(kernels)
        assert set(cal.linear[F32]) == {"32x32", "32x64", "64x32"}
        assert set(cal.linear[I8]) == {"32x32", "32x64"}
        assert set(cal.attention) == ({F32, I8} if graph == "fused" else {F32})
        assert [p[0] for p in cal.linear[I8]["32x64"]] == list(probes.TOKENS)
        assert [p[0] for p in cal.attention[F32]] == list(probes.LENGTHS)
        rates = [p[1] for ps in cal.linear.values() for pts in ps.values() for p in pts]
        rates += [p[1] for pts in cal.attention.values() for p in pts]
        assert all(r > 0 for r in rates) and cal.peak_gflops > 0 and cal.other_ns_per_token > 0
        assert cal.threads == 1 and cal.runtime_version == BACKENDS[ORT, "cpu"].version()
        # every call of the model predicted from it
        assert call_time(cal, shape, EncoderCall(3, 40, 2, True)).total_ms > 0
    with pytest.raises(ValueError, match="no onnxruntime calibration for dtype 'bfloat16'"):
        measure_calibration(ORT, shape, "bfloat16", {"graph": "fused", "int8_recipe": None})


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
    fake = Counting()
    monkeypatch.setattr(kernels, "measure_calibration", fake)
    monkeypatch.setattr(kernels, "measure_peak", ten)
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
    # never torch's rates; each ranker on its faster graph, the default recipe: one calibration each
    assert sorted(fake.calls) == [
        (ORT, I8, "fused", "ffn-float", 1),
        (ORT, I8, "plain", "ffn-float", 1),
    ]
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


# -- on a CUDA GPU (faked: this machine has none) -------------------------------------------------
def cuda_calibration(dtype: str = "tf32") -> Calibration:
    """:func:`fake_calibration` as a GPU's: 1.5 ms per call and 0.25 ms per layer of fixed cost."""
    cal = fake_calibration(dtype)
    cal.device, cal.call_ms, cal.call_layer_ms = "cuda", 1.5, 0.25
    return cal


def test_a_gpu_call_pays_its_fixed_cost_beside_its_kernels() -> None:
    """Per call: the kernels as on a CPU (4.212 ms, :func:`test_call_time_by_hand`) plus
    1.5 ms + 2 layers x 0.25 ms; a row of 2 calls over 4 queries: 2 x 6.212 / 4 per query."""
    got = call_time(cuda_calibration(), SHAPE, CALL)
    assert got.call_ms == pytest.approx(2.0)
    assert got.linear_ms == pytest.approx(0.192) and got.attention_ms == pytest.approx(4.0)
    assert got.total_ms == pytest.approx(6.212)
    cost = row_cost({"sdpa": cuda_calibration()}, SHAPE, [CALL, CALL], queries=4, measured_ms=0.5)
    assert cost["predicted_ms"] == pytest.approx(2 * 6.212 / 4)
    assert cost["predicted"]["call_ms"] == pytest.approx(1.0)  # 2 calls x 2.0 ms / 4 queries
    assert cost["flops_per_query"] == 2 * 3_712_000 / 4  # FLOPs do not change
    one_layer = EncoderCall(rows=10, width=100, layers=1, masked=True)
    assert call_time(cuda_calibration(), SHAPE, one_layer).call_ms == pytest.approx(1.75)
    # a CPU calibration has no fixed cost: its prediction and record read as before
    cpu = row_cost({"sdpa": fake_calibration()}, SHAPE, [CALL, CALL], queries=4, measured_ms=0.5)
    assert cpu["predicted_ms"] == pytest.approx(2 * 4.212 / 4)
    assert "call_ms" not in cpu["predicted"]


@pytest.fixture()
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A CUDA device named "NVIDIA H200" whose probes answer given timings: peak 50,000
    GFLOP/s, every MatMul at 4 GFLOP/s, 1.5 ms per call and 0.25 per layer; the fixture's value
    lists the probes the rates were timed with."""
    cuda = BACKENDS["torch", "cuda"]
    monkeypatch.setattr(type(cuda), "machine", lambda self, device: {"gpu": "NVIDIA H200"})
    asked: list[Any] = []

    def rates(shape: EncoderShape, dtype: str, shapes: Any, attention: str, probe: Any) -> Any:
        asked.append(probe)
        return probes.Rates(
            peak_gflops=50_000.0,
            linear={dtype: {f"{k}x{n}": [[100, 4.0]] for k, n in shapes}},
            attention=fake_calibration().attention,
            other_ns_per_token=10.0,
        )

    monkeypatch.setattr(probes, "torch_rates", rates)
    monkeypatch.setattr(probes, "torch_call_ms", lambda *args: (1.5, 0.25))
    monkeypatch.setattr(probes, "torch_peak", lambda *args: 50_000.0)
    return asked  # the probes the rates were asked with


def test_a_gpu_calibration_measures_on_the_device_with_its_call_cost(
    tmp_path: Path, one_thread: None, fake_gpu: Any
) -> None:
    """`bench latency --device cuda --calibrate` on a faked GPU: the CUDA entry times its
    kernels with the GPU's probe (its token grid, bursts), records the fixed cost, keys the file
    by the GPU's name, and tf32 is its own calibration; the prediction is exact by hand."""
    cals = Calibrations(tmp_path, "cuda:0", fresh=True)
    tf32 = cals.get(SHAPE, {"dtype": "tf32"}, "sdpa")
    assert tf32 is not None and tf32.device == "cuda" and tf32.dtype == "tf32"
    [probe] = fake_gpu
    assert probe == probes.cuda_probe("cuda:0") and probe.tokens == probes.CUDA_TOKENS
    assert (tf32.call_ms, tf32.call_layer_ms) == (1.5, 0.25)
    assert tf32.machine["gpu"] == "NVIDIA H200" and "cpu" not in tf32.machine
    assert tf32.path is not None and tf32.path.name.startswith("calibration-cuda-tf32-t1-")
    assert tf32.summary()["gpu"] == "NVIDIA H200"
    # every MatMul at 4 GFLOP/s: per layer 4 x 32,000 + 2 x 64,000 FLOPs = 0.064 ms; 2 layers;
    # attention 4.0, other 0.02 as on a CPU; fixed 1.5 + 2 x 0.25
    assert call_time(tf32, SHAPE, CALL).total_ms == pytest.approx(0.128 + 4.0 + 0.02 + 2.0)
    float32 = cals.get(SHAPE, {"dtype": F32}, "sdpa")
    assert float32 is not None and float32.path != tf32.path and len(fake_gpu) == 2
    # read back by the next run on this GPU, not measured again
    again = Calibrations(tmp_path, "cuda").get(SHAPE, {"dtype": "tf32"}, "sdpa")
    assert again == tf32 and len(fake_gpu) == 2
    # an ONNX Runtime row on the GPU: no entry, no prediction
    ort = {"runtime": ORT, "dtype": F32, "graph": "fused"}
    assert Calibrations(tmp_path, "cuda:0").get(SHAPE, ort, "sdpa") is None


def test_the_cpu_key_is_as_before(one_thread: None) -> None:
    """A CPU calibration's key names the same fields as before the GPU had an entry, so its
    cached files keep their names and still load."""
    key = kernels.calibration_key("torch", F32, TORCH_SDPA, 1, SHAPE)
    assert list(key) == [
        "runtime",
        "runtime_version",
        "cpu",
        "threads",
        "dtype",
        "attention",
        "hidden",
        "heads",
        "intermediate",
        "version",
    ]
    assert key["cpu"] == kernels.cpu_model() and key["version"] == 2


def test_a_file_from_before_the_call_cost_loads(tmp_path: Path, one_thread: None) -> None:
    """A CPU calibration written without ``device``, ``call_ms`` and ``call_layer_ms`` reads
    back as it was (no fixed cost) and is not measured anew; a wrong fixed cost is named."""
    fake = Counting()
    kw: dict[str, Any] = {"measure_fn": fake, "peak_fn": ten}
    first = load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, **kw)
    assert first.path is not None
    data = json.loads(first.path.read_text(encoding="utf-8"))
    for name in ("device", "call_ms", "call_layer_ms"):
        del data[name]
    first.path.write_text(json.dumps(data), encoding="utf-8")
    old = load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, **kw)
    assert len(fake.calls) == 1 and old == first and old.call_ms == 0.0
    assert call_time(old, SHAPE, CALL).total_ms == pytest.approx(0.02 + 4.0 + 2 * 4 * 0.016)
    data["call_ms"] = -1.0
    first.path.write_text(json.dumps(data), encoding="utf-8")
    load_or_measure(tmp_path, SHAPE, "torch", F32, TORCH_SDPA, **kw)
    assert len(fake.calls) == 2  # named and measured anew


def test_gpu_probes_wait_for_the_device_after_each_burst(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU a call only queues kernels: each sample is a burst of calls and a wait for the
    device, the sample's time divided by the burst; a CPU probe waits for nothing."""
    events: list[str] = []
    monkeypatch.setattr(probes, "synchronize", lambda device: events.append(f"sync {device}"))
    probe = probes.Probe("cuda:1", burst=3)
    probes.median_ms(lambda: events.append("call"), min_reps=2, min_s=0.0, probe=probe)
    assert events == ["call", "sync cuda:1"] + (["call"] * 3 + ["sync cuda:1"]) * 2
    events.clear()
    probes.median_ms(lambda: events.append("call"), min_reps=2, min_s=0.0)
    assert events == ["call", "sync cpu", "call", "sync cpu", "call", "sync cpu"]


def test_a_probe_times_its_own_grid_and_a_call_cost(one_thread: None) -> None:
    """The PyTorch probes take their device and grid from the probe (run here on the CPU), and
    the fixed cost of a call through a real one- and two-layer BERT is measured, at least 0."""
    shape = EncoderShape(layers=2, hidden=32, intermediate=64, heads=2)
    probe = probes.Probe("cpu", tokens=(16, 64), attention_tokens=256, burst=2)
    rates = probes.torch_rates(shape, F32, [(32, 64)], "sdpa", probe)
    assert [p[0] for p in rates.linear[F32]["32x64"]] == [16, 64]
    assert all(p[1] > 0 for p in rates.linear[F32]["32x64"])
    assert (rates.call_ms, rates.call_layer_ms) == (0.0, 0.0)  # a CPU's rates hold none
    call, layer = probes.torch_call_ms(shape, F32, "sdpa", "cpu")
    assert call >= 0 and layer >= 0 and call + layer > 0


def test_a_tf32_row_is_calibrated_as_tf32(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ranker scoring with option dtype=tf32 computes in float32 weights (its encoder run says
    float32), but on TF32 kernels: its row's encoder work and calibration say tf32; every other
    precision as the ranker says."""
    config = type("Config", (), {"num_hidden_layers": 2})()

    def parts(ranker: Any) -> Any:
        return type("Parts", (), {"encoder_run": lambda self: EncoderRun(config, F32)})()

    monkeypatch.setattr(protocol, "latency_parts", parts)
    tf32 = type("Ranker", (), {"config": type("Cfg", (), {"dtype": "tf32"})()})()
    run = protocol.encoder_run(tf32)  # type: ignore[arg-type]
    assert run is not None and run.dtype == "tf32" and run.config is config
    assert protocol.encoder_setting(run) == {"dtype": "tf32"}
    plain = type("Ranker", (), {"config": type("Cfg", (), {"dtype": F32})()})()
    assert protocol.encoder_run(plain).dtype == F32  # type: ignore[arg-type, union-attr]
