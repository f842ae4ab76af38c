"""The time model of rows whose encoder runs on ONNX Runtime (``--set runtime=onnxruntime``,
float32 or int8): a ranker's encoder time per query predicted from ONNX Runtime's calibrated
kernel rates (:mod:`bench.latency.ortcalibration`) and the same encoder calls the torch model
reads (:meth:`rankers.hooks.LatencyParts.encoder_calls`).

Per encoder call of ``rows`` sequences padded to ``width`` tokens (``M = rows x width``), each
layer ``i`` costs, in the precision its int8 recipe gives each weight MatMul of that layer
(:func:`~bench.latency.ortcalibration.layer_precisions`: e.g. ``ffn-float`` keeps both
feed-forward MatMuls float32, ``ffn-out-first-float`` all of layer 0):

* linear: ``sum over the layer's weight MatMuls k x n of 2 M k n / rate(precision, k x n, M)``,
  interpolated in ``log M`` as the torch model does; on the fused graph without Q, K and V,
  which run inside the fused attention;
* attention: ``rows x t(precision, width)``, the calibrated ms per row (on the fused graph the
  ``Attention`` / ``QAttention`` op with its QKV projection, in the projection's precision; on
  the plain graph the exported pattern, float32); padded or not alike, since both graphs always
  apply the mask;
* other: ``M x`` the calibrated ns per token (residual layer norms, GELU).

Left out, as in the torch model: embeddings (``EmbedLayerNormalization``), the once-per-call mask
arithmetic, pooling and heads (torch, after the encoder), the host step, and what the call costs
beyond the session (NumPy copies of the inputs and outputs). Also left out: the plain int8
graph quantizes the input of Q, K and V once for the three (each calibrated MatMul quantizes its
own), and calls are assumed to start at layer 0 (every runtime call does: a runtime refuses
``merge_layers``). Pure arithmetic over an
:class:`~bench.latency.ortcalibration.OrtCalibration`, so a test can check it by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from bench.latency.efficiency import EncoderShape
from bench.latency.ortcalibration import (
    IN_ATTENTION,
    OrtCalibration,
    attention_precision,
    layer_plans,
    matmul_kinds,
)
from bench.latency.records import LatencyRow
from bench.latency.timemodel import (
    CallTime,
    call_flops,
    expand_calls,
    rate_at,
    row_ms_at,
    with_prediction,
    work_cost,
)
from rankers.hooks import EncoderCall


def ort_call_time(cal: OrtCalibration, shape: EncoderShape, call: EncoderCall) -> CallTime:
    """Predicted time of one encoder call on ONNX Runtime (all its layers) and its FLOPs."""
    tokens = call.rows * call.width
    kinds = matmul_kinds(shape)
    linear = attention = 0.0
    for plan, layers in layer_plans(cal.dtype, cal.recipe, call.layers):
        for kind, (k, n, count) in kinds.items():
            if kind in IN_ATTENTION[cal.graph]:
                continue
            rate = rate_at(cal.linear[plan[kind]][f"{k}x{n}"], tokens)
            linear += layers * count * 2 * tokens * k * n / rate / 1e6
        points = cal.attention[attention_precision(cal.graph, plan)]
        attention += layers * call.rows * row_ms_at(points, call.width)
    return CallTime(
        linear_ms=linear,
        attention_ms=attention,
        other_ms=call.layers * tokens * cal.other_ns_per_token / 1e6,
        flops=call_flops(shape, call),
    )


def ort_predict(cal: OrtCalibration, shape: EncoderShape, calls: Iterable[EncoderCall]) -> CallTime:
    """The summed prediction of ``calls``."""
    out = CallTime()
    for call in calls:
        out = out + ort_call_time(cal, shape, call)
    return out


def ort_row_cost(
    cal: OrtCalibration | None,
    shape: EncoderShape,
    calls: Sequence[EncoderCall],
    queries: int,
    measured_ms: float,
) -> dict[str, Any]:
    """What a row timed on ONNX Runtime says about its encoder work per query, as
    :func:`bench.latency.timemodel.row_cost` for torch rows: FLOPs and achieved GFLOP/s; with a
    calibration also the runtime's MatMul peak in the row's precision, the share of it achieved
    and the predicted encoder time by kernel."""
    out = work_cost(shape, calls, queries, measured_ms)
    if cal is None:
        return out
    per_query = ort_predict(cal, shape, calls).scaled(1 / queries)
    return with_prediction(out, per_query, cal.peak_gflops, [cal.summary()])


def add_runtime_costs(
    rows: Iterable[LatencyRow],
    calibration: Callable[[EncoderShape, Mapping[str, Any]], OrtCalibration | None],
) -> None:
    """Fill :attr:`LatencyRow.cost` of every row whose encoder ran on another runtime than
    PyTorch, predicted with ``calibration(shape, encoder work)`` (None: FLOPs and achieved
    GFLOP/s only)."""
    for row in rows:
        if not row.encoder or row.encoder.get("runtime", "torch") == "torch":
            continue
        shape = EncoderShape(**row.encoder["shape"])
        row.cost = ort_row_cost(
            calibration(shape, row.encoder),
            shape,
            expand_calls(row.encoder["calls"]),
            int(row.encoder["queries"]),
            row.latency["mean_ms"],
        )
