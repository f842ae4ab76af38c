"""The latency cost model in time: a ranker's encoder time per query predicted from the machine's
kernel rates (:mod:`bench.latency.costmodel.kernels`) and the encoder calls it makes
(:meth:`rankers.hooks.LatencyParts.encoder_calls`), one model for every runtime.

The FLOP model (:mod:`bench.latency.costmodel.flops`) predicts the same CROSS-JEM speed-up in every
precision; measured, it is not the same, because the kernels do not speed up alike (on a CPU with
native bfloat16 the projections gain 4-7x while attention on long rows gains nothing). Per encoder
call of ``rows`` sequences padded to ``width`` tokens (``M = rows x width``), each layer ``i``
costs, in the precision its runtime gives each weight MatMul of that layer (its layer plan,
:meth:`~bench.latency.costmodel.kernels.Backend.layer_plans`: PyTorch runs every one in the
scoring dtype; an ONNX Runtime int8 recipe such as ``ffn-float`` keeps some in float32):

* linear: ``sum over the layer's weight MatMuls k x n of 2 M k n / rate(precision, k x n, M)``,
  the rate interpolated in ``log M`` between the calibrated token counts (the end rate beyond
  them); without the MatMuls the runtime's attention rate includes (ONNX Runtime's fused graph
  runs Q, K and V inside its ``Attention`` op);
* attention: ``rows x t(width)``, ``t`` the calibrated ms per row of the attention rate the
  runtime names for the call (PyTorch: the call's attention, masked or not; ONNX Runtime: the
  precision of what its graph runs), interpolated linearly in L (from 0 at L = 0; beyond the
  longest calibrated L, scaled as L^2);
* other: ``M x`` the calibrated ns per token (layer norms, GELU, residual adds);
* call: the call's fixed cost, ``call_ms + layers x call_layer_ms`` as calibrated: on a GPU, what
  a call costs before any FLOP (launches, host work, the wait for the scores; the calls per query
  are the ranker's encoder calls over the queries, so whole-list batches pay it once per list);
  0 on a CPU, whose rates include their own launches.

Embeddings, pooling, the heads, the host step (tokenisation, packing) and, on a CPU, Python's
per-call overhead (on ONNX Runtime also the NumPy copies of inputs and outputs, and the plain
int8 graph's one quantization of the input of Q, K and V for the three) are left out: the
prediction is of the encoder's time. Pure arithmetic over a
:class:`~bench.latency.costmodel.kernels.Calibration`, so a test can check it by hand.

:class:`Calibrations` holds the calibrations of one run, on its device.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.latency.costmodel.flops import EncoderShape, sequence_flops
from bench.latency.costmodel.kernels import (
    TORCH,
    Calibration,
    MeasureFn,
    PeakFn,
    backend_for,
    load_or_measure,
)
from bench.latency.costmodel.probes import matmul_kinds
from bench.latency.records import LatencyRow
from rankers.hooks import EncoderCall

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallTime:
    """Predicted ms of encoder calls, by kernel, and their FLOPs (padding included)."""

    linear_ms: float = 0.0
    attention_ms: float = 0.0
    other_ms: float = 0.0
    flops: int = 0
    #: the calls' fixed cost (:attr:`Calibration.call_ms`, 0 on a CPU)
    call_ms: float = 0.0

    @property
    def total_ms(self) -> float:
        return self.linear_ms + self.attention_ms + self.other_ms + self.call_ms

    def __add__(self, other: CallTime) -> CallTime:
        return CallTime(
            self.linear_ms + other.linear_ms,
            self.attention_ms + other.attention_ms,
            self.other_ms + other.other_ms,
            self.flops + other.flops,
            self.call_ms + other.call_ms,
        )

    def scaled(self, factor: float) -> CallTime:
        """Times and FLOPs times ``factor`` (per query: 1 / queries)."""
        return CallTime(
            self.linear_ms * factor,
            self.attention_ms * factor,
            self.other_ms * factor,
            round(self.flops * factor),
            self.call_ms * factor,
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field and the total; the fixed cost only where there is one (a CPU record's
        prediction reads as before it was modelled)."""
        out = {**dataclasses.asdict(self), "total_ms": self.total_ms}
        if not self.call_ms:
            del out["call_ms"]
        return out


def rate_at(points: Sequence[Sequence[float]], tokens: int) -> float:
    """A calibrated rate ``[[tokens, GFLOP/s], ...]`` at ``tokens``, interpolated in
    log(tokens); the end rates beyond the grid."""
    xs = [math.log(t) for t, _ in points]
    return float(np.interp(math.log(max(tokens, 1)), xs, [r for _, r in points]))


def row_ms_at(points: Sequence[Sequence[float]], length: int) -> float:
    """Calibrated ms per row ``[[L, ms], ...]`` at ``length``: linear in L from 0 at L = 0,
    scaled as L^2 beyond the longest calibrated L."""
    longest, at_longest = points[-1]
    if length > longest:
        return at_longest * (length / longest) ** 2
    return float(np.interp(length, [0, *(p[0] for p in points)], [0, *(p[1] for p in points)]))


def linear_gflops(cal: Calibration, precision: str, k: int, n: int, tokens: int) -> float:
    """Calibrated GFLOP/s of ``tokens x k`` by ``k x n`` in ``precision``, interpolated in
    log(tokens)."""
    return rate_at(cal.linear[precision][f"{k}x{n}"], tokens)


def call_time(cal: Calibration, shape: EncoderShape, call: EncoderCall) -> CallTime:
    """Predicted time of one encoder call (all its layers) and its FLOPs."""
    backend = cal.backend
    tokens = call.rows * call.width
    inside = backend.in_attention(cal)
    linear = attention = 0.0
    for plan, layers in backend.layer_plans(cal, call.layers):
        for kind, (k, n, count) in matmul_kinds(shape).items():
            if kind not in inside:
                rate = linear_gflops(cal, plan[kind], k, n, tokens)
                linear += layers * count * 2 * tokens * k * n / rate / 1e6
        points = cal.attention[backend.attention_rate(cal, plan, call.masked)]
        attention += layers * call.rows * row_ms_at(points, call.width)
    return CallTime(
        linear_ms=linear,
        attention_ms=attention,
        other_ms=call.layers * tokens * cal.other_ns_per_token / 1e6,
        flops=call_flops(shape, call),
        call_ms=cal.call_ms + call.layers * cal.call_layer_ms,
    )


def call_flops(shape: EncoderShape, call: EncoderCall) -> int:
    """FLOPs (2 x multiply-accumulates, :func:`~bench.latency.costmodel.flops.sequence_flops`) of
    one encoder call, padding included: what the machine computes."""
    return (
        2 * call.rows * sequence_flops(call.width, dataclasses.replace(shape, layers=call.layers))
    )


def predict(
    cals: Mapping[str, Calibration], shape: EncoderShape, calls: Iterable[EncoderCall]
) -> CallTime:
    """The summed prediction of ``calls``, each with the calibration of its attention."""
    out = CallTime()
    for call in calls:
        out = out + call_time(cals[call.attention], shape, call)
    return out


# -- what a latency record keeps ------------------------------------------------------------
def compress_calls(calls: Sequence[EncoderCall]) -> list[dict[str, Any]]:
    """``calls`` as distinct shapes with a count (a record keeps them small)."""
    counts: dict[EncoderCall, int] = {}
    for call in calls:
        counts[call] = counts.get(call, 0) + 1
    return [{**dataclasses.asdict(c), "count": k} for c, k in counts.items()]


def expand_calls(stored: Sequence[dict[str, Any]]) -> list[EncoderCall]:
    """The calls :func:`compress_calls` stored."""
    names = {f.name for f in dataclasses.fields(EncoderCall)}
    return [
        EncoderCall(**{k: v for k, v in entry.items() if k in names})
        for entry in stored
        for _ in range(int(entry["count"]))
    ]


def row_cost(
    cals: Mapping[str, Calibration],
    shape: EncoderShape,
    calls: Sequence[EncoderCall],
    queries: int,
    measured_ms: float,
) -> dict[str, Any]:
    """What a latency row says about its encoder work per query: FLOPs, achieved GFLOP/s
    (model FLOPs / measured mean time of the whole call); with calibrations (attention name ->
    :class:`Calibration`, one runtime and dtype) also the calibrated matmul peak, the share of
    it achieved ("% of the limit") and the predicted encoder time by kernel."""
    out = work_cost(shape, calls, queries, measured_ms)
    if not cals or any(c.attention not in cals for c in calls):
        return out
    distinct = list({id(c): c for c in cals.values()}.values())
    return with_prediction(
        out,
        predict(cals, shape, calls).scaled(1 / queries),
        distinct[0].peak_gflops,
        [c.summary() for c in distinct],
    )


def work_cost(
    shape: EncoderShape, calls: Sequence[EncoderCall], queries: int, measured_ms: float
) -> dict[str, Any]:
    """FLOPs per query of ``calls`` (padding included) and the GFLOP/s achieved in the measured
    mean time of the whole call."""
    flops = sum(call_flops(shape, c) for c in calls) / queries
    achieved = flops / measured_ms / 1e6 if measured_ms else None
    return {"flops_per_query": flops, "achieved_gflops": achieved}


def with_prediction(
    work: dict[str, Any],
    per_query: CallTime,
    peak_gflops: float,
    calibrations: list[dict[str, Any]],
) -> dict[str, Any]:
    """``work`` (:func:`work_cost`) with the matmul peak, the share of it achieved ("% of the
    limit"), the predicted encoder time per query by kernel and the calibrations it came from."""
    achieved = work["achieved_gflops"]
    return {
        **work,
        "peak_gflops": peak_gflops,
        "of_peak": achieved / peak_gflops if achieved else None,
        "predicted_ms": per_query.total_ms,
        "predicted": per_query.to_dict(),
        "calibration": calibrations,
    }


def add_costs(
    rows: Iterable[LatencyRow],
    calibration: Callable[[EncoderShape, Mapping[str, Any], str], Calibration | None],
) -> None:
    """Fill :attr:`LatencyRow.cost` of every row with encoder work, predicted with
    ``calibration(shape, encoder work, attention)`` for each attention its calls run (None: FLOPs
    and achieved GFLOP/s only), whatever runtime ran it:
    :meth:`Calibrations.get` picks the runtime's rates."""
    for row in rows:
        if not row.encoder:
            continue
        shape = EncoderShape(**row.encoder["shape"])
        calls = expand_calls(row.encoder["calls"])
        cals = {}
        for name in dict.fromkeys(c.attention for c in calls):
            found = calibration(shape, row.encoder, name)
            if found is not None:
                cals[name] = found
        row.cost = row_cost(cals, shape, calls, int(row.encoder["queries"]), row.latency["mean_ms"])


# -- the calibrations of a run --------------------------------------------------------------
class Calibrations:
    """The calibrations of one benchmark run on ``device``, each loaded (or measured) once:
    ``fresh`` measures every one anew, once per run, as ``bench latency --calibrate`` asks."""

    def __init__(
        self,
        root: Path,
        device: str = "cpu",
        fresh: bool = False,
        measure_fn: MeasureFn | None = None,
        peak_fn: PeakFn | None = None,
    ) -> None:
        self.root, self.device, self.fresh = root, device, fresh
        self.measure_fn, self.peak_fn = measure_fn, peak_fn
        self._held: dict[tuple[Any, ...], Calibration | None] = {}

    def get(
        self, shape: EncoderShape, work: Mapping[str, Any], attention: str = "sdpa"
    ) -> Calibration | None:
        """The calibration for a row's encoder ``work`` (:func:`bench.latency.protocol.
        encoder_work`: runtime, dtype and the runtime's options) and a call's ``attention``;
        None where there is none to measure (a runtime without a backend on this device, a dtype or
        setting not calibrated, its packages not installed) or measuring it failed (a warning
        says why: a record without a prediction beats no record)."""
        runtime, dtype = str(work.get("runtime", TORCH)), str(work.get("dtype"))
        backend = backend_for(runtime, self.device)
        setting = backend.setting(work, attention) if backend else None
        if backend is None or setting is None:
            log.info("no calibrated time model for %s %s on %s", runtime, dtype, self.device)
            return None
        if dtype not in backend.precisions:
            log.info("no calibrated time model for %s %s", runtime, dtype)
            return None
        missing = backend.unavailable(dtype)
        if missing and self.measure_fn is None:
            log.info("no %s time model: %s not installed", runtime, ", ".join(missing))
            return None
        key = (dataclasses.replace(shape, layers=0), runtime, dtype, *sorted(setting.items()))
        if key not in self._held:
            try:
                self._held[key] = load_or_measure(
                    self.root,
                    shape,
                    runtime,
                    dtype,
                    setting,
                    device=self.device,
                    fresh=self.fresh,
                    measure_fn=self.measure_fn,
                    peak_fn=self.peak_fn,
                )
            except Exception as exc:  # the runtimes' own errors derive from Exception only
                log.warning(
                    "no %s time model for %s (%s): calibrating failed (%s: %s)",
                    runtime,
                    dtype,
                    setting,
                    type(exc).__name__,
                    exc,
                )
                self._held[key] = None
        return self._held[key]
