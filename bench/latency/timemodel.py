"""The latency cost model in time: a ranker's encoder time per query predicted from the machine's
kernel rates (:mod:`bench.latency.calibration`) and the encoder calls it makes
(:meth:`rankers.hooks.LatencyParts.encoder_calls`).

The FLOP model (:mod:`bench.latency.efficiency`) predicts the same CROSS-JEM speed-up in every
precision; measured, it is not the same, because the kernels do not speed up alike (on a CPU
with native bfloat16 the projections gain 4-7x while attention on long rows gains nothing). Per
encoder call of ``rows`` sequences padded to ``width`` tokens (``M = rows x width``), each of its
layers costs

* linear: ``sum over the layer's weight shapes k x n of 2 M k n / rate(k x n, M)``, the rate
  interpolated in ``log M`` between the calibrated token counts (the end rate beyond them);
* attention: ``rows x t(width)``, ``t`` the calibrated ms per row of the attention the call runs,
  masked or not, interpolated linearly in L (from 0 at L = 0; beyond the longest calibrated L,
  scaled as L^2);
* other: ``M x`` the calibrated ns per token (layer norms, GELU, residual adds).

Embeddings, pooling, the heads, the host step (tokenisation, packing) and Python's per-call
overhead are left out: the prediction is of the encoder's time. Pure arithmetic over a
:class:`~bench.latency.calibration.Calibration`, so a test can check it by hand.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.latency.calibration import Calibration, linear_shapes
from bench.latency.efficiency import EncoderShape, sequence_flops
from bench.latency.records import LatencyRow
from rankers.hooks import EncoderCall


@dataclass(frozen=True)
class CallTime:
    """Predicted ms of encoder calls, by kernel, and their FLOPs (padding included)."""

    linear_ms: float = 0.0
    attention_ms: float = 0.0
    other_ms: float = 0.0
    flops: int = 0

    @property
    def total_ms(self) -> float:
        return self.linear_ms + self.attention_ms + self.other_ms

    def __add__(self, other: CallTime) -> CallTime:
        return CallTime(
            self.linear_ms + other.linear_ms,
            self.attention_ms + other.attention_ms,
            self.other_ms + other.other_ms,
            self.flops + other.flops,
        )

    def scaled(self, factor: float) -> CallTime:
        """Times and FLOPs times ``factor`` (per query: 1 / queries)."""
        return CallTime(
            self.linear_ms * factor,
            self.attention_ms * factor,
            self.other_ms * factor,
            round(self.flops * factor),
        )

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_ms": self.total_ms}


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


def linear_gflops(cal: Calibration, k: int, n: int, tokens: int) -> float:
    """Calibrated GFLOP/s of ``tokens x k`` by ``k x n``, interpolated in log(tokens)."""
    return rate_at(cal.linear[f"{k}x{n}"], tokens)


def attention_row_ms(cal: Calibration, length: int, masked: bool) -> float:
    """Calibrated ms of one row (all heads) of attention at ``length``."""
    return row_ms_at(cal.attention["masked" if masked else "unmasked"], length)


def call_time(cal: Calibration, shape: EncoderShape, call: EncoderCall) -> CallTime:
    """Predicted time of one encoder call (all its layers) and its FLOPs."""
    tokens = call.rows * call.width
    linear = sum(
        count * 2 * tokens * k * n / linear_gflops(cal, k, n, tokens) / 1e6
        for k, n, count in linear_shapes(shape)
    )
    return CallTime(
        linear_ms=call.layers * linear,
        attention_ms=call.layers * call.rows * attention_row_ms(cal, call.width, call.masked),
        other_ms=call.layers * tokens * cal.other_ns_per_token / 1e6,
        flops=call_flops(shape, call),
    )


def call_flops(shape: EncoderShape, call: EncoderCall) -> int:
    """FLOPs (2 x multiply-accumulates, :func:`~bench.latency.efficiency.sequence_flops`) of
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
    :class:`Calibration`, one dtype) also the calibrated matmul peak, the share of it achieved
    ("% of the limit") and the predicted encoder time by kernel."""
    out = work_cost(shape, calls, queries, measured_ms)
    if not cals or any(c.attention not in cals for c in calls):
        return out
    first = next(iter(cals.values()))
    return with_prediction(
        out,
        predict(cals, shape, calls).scaled(1 / queries),
        first.peak_gflops,
        [c.summary() for c in cals.values()],
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
    calibration: Callable[[EncoderShape, str, str], Calibration | None],
) -> None:
    """Fill :attr:`LatencyRow.cost` of every row whose encoder ran on PyTorch with encoder work,
    predicted with ``calibration(shape, dtype, attention)`` (None: FLOPs and achieved GFLOP/s
    only). Rows of another runtime are left to that runtime's model
    (:func:`bench.latency.ortmodel.add_runtime_costs`): torch's rates do not time its kernels."""
    for row in rows:
        if not row.encoder or row.encoder.get("runtime", "torch") != "torch":
            continue
        shape = EncoderShape(**row.encoder["shape"])
        calls = expand_calls(row.encoder["calls"])
        cals = {}
        for name in dict.fromkeys(c.attention for c in calls):
            found = calibration(shape, row.encoder["dtype"], name)
            if found is not None:
                cals[name] = found
        row.cost = row_cost(cals, shape, calls, int(row.encoder["queries"]), row.latency["mean_ms"])
