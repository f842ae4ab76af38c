"""ONNX Runtime's kernel rates on this machine, for the time model of rows whose encoder runs
there (``--set runtime=onnxruntime``, ``dtype=int8`` included; :mod:`bench.latency.ortmodel`).

The torch calibration (:mod:`bench.latency.calibration`) times PyTorch's kernels; a row timed on
ONNX Runtime runs other kernels (MLAS MatMuls, the fused ``Attention`` op, int8
``DynamicQuantizeMatMul``), so its time is predicted from rates of those. Each kernel is a tiny
ONNX graph built with ``onnx.helper`` as the exported encoder holds it
(:mod:`rankers.runtimes`), quantized for int8 by the ranker's own quantizer
(:func:`rankers.runtimes.quantize_int8`, same ``quantize_dynamic`` settings) and run in a
session built like the ranker's (:func:`rankers.runtimes.onnxruntime_session`: all graph
optimisations, ``threads`` intra-op threads, one inter-op thread, no spinning), so that the
kernel timed is the one the model runs after the runtime's own fusions. Per graph
(:data:`rankers.runtimes.ONNX_GRAPHS`):

* ``linear``: ``tokens x k`` by a ``k x n`` weight for each weight shape of a layer, at
  :data:`~bench.latency.calibration.TOKENS`, as GFLOP/s, in each precision the int8 recipe uses
  for that shape (:func:`layer_precisions`): on the plain graph MatMul and bias Add (int8: fused
  into one ``DynamicQuantizeMatMul`` by the session), on the fused graph the MatMul alone (its
  bias is added by the fused layer norm or GELU);
* ``attention``: ms per row at :data:`~bench.latency.calibration.LENGTHS` of what the graph runs
  per layer between the projections: on the plain graph the exported pattern (scaled ``Q K^T``,
  additive ``rows x 1 x L x L`` mask, softmax, NaN guard, ``P V`` and the head reshapes), on the
  fused graph the ``Attention`` op (int8: ``QAttention``) on a raw 2-D padding mask, *its QKV
  projection included*; both graphs always apply the mask, so there is one rate per precision
  whether the call is padded or not;
* ``other``: ns per token of a layer's two residual layer norms and GELU (plain: Add and
  ``LayerNormalization``, the erf GELU pattern; fused: ``SkipLayerNormalization`` and
  ``BiasGelu``);
* ``peak``: a 1024 x 1024 by 1024 x 1024 MatMul in the calibration's precision (int8: quantized),
  the limit achieved GFLOP/s are set against.

Cached like the torch calibration, keyed by runtime, ONNX Runtime's version, dtype, int8 recipe,
graph, threads, CPU model and encoder size, as ``<results root>/latency/calibration-onnxruntime-
<dtype>[-<recipe>]-<graph>-t<threads>-<hash>.json``; ``bench latency --calibrate`` measures it
anew. onnx and onnxruntime are optional: nothing here
imports them until a calibration is measured, and without them no time is predicted.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.metadata
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.latency.calibration import (
    ATTENTION_TOKENS,
    LENGTHS,
    TOKENS,
    CachedCalibration,
    cached,
    cpu_model,
    median_ms,
)
from bench.latency.efficiency import EncoderShape
from bench.latency.records import LATENCY_DIR
from bench.results.records import config_hash
from rankers.precision import INT8
from rankers.runtimes import (
    DEFAULT_INT8_RECIPE,
    INT8_RECIPES,
    ONNX_GRAPHS,
    OPSET,
    missing_packages,
)

log = logging.getLogger(__name__)

RUNTIME = "onnxruntime"
#: bumped when what is measured changes, so older cached calibrations are measured anew
VERSION = 1
#: precisions a calibration is measured in (the runtime's, :data:`rankers.runtimes.PRECISIONS`)
PRECISIONS = ("float32", INT8)
FLOAT32 = "float32"
#: a layer's weight MatMuls by kind (the kinds :data:`rankers.runtimes.FLOAT_KINDS` keeps in
#: float32, and the attention projections): (rows of the weight, columns, count per layer)
KINDS = ("qkv", "attn_out", "ffn_in", "ffn_out")
#: what the fused graph runs inside its ``Attention`` op rather than as a MatMul
IN_ATTENTION = {"fused": ("qkv",), "plain": ()}
#: the peak graph's side
PEAK_SIDE = 1024


def matmul_kinds(shape: EncoderShape) -> dict[str, tuple[int, int, int]]:
    """``kind -> (k, n, count)`` of one BERT layer: Q, K and V, the attention output, the
    feed-forward pair (together :func:`bench.latency.calibration.linear_shapes`)."""
    d, ff = shape.hidden, shape.intermediate
    return {"qkv": (d, d, 3), "attn_out": (d, d, 1), "ffn_in": (d, ff, 1), "ffn_out": (ff, d, 1)}


def layer_precisions(dtype: str, recipe: str | None, layer: int) -> dict[str, str]:
    """The precision of each weight MatMul kind (:data:`KINDS`) in layer ``layer`` (0-based)
    of an encoder scored in ``dtype`` with int8 recipe ``recipe``
    (:data:`rankers.runtimes.INT8_RECIPES`): what the ranker's quantizer leaves in float32."""
    if dtype != INT8:
        return dict.fromkeys(KINDS, FLOAT32)
    keep = INT8_RECIPES[recipe or DEFAULT_INT8_RECIPE].keep_float
    if layer == 0 and "first_layer" in keep:
        return dict.fromkeys(KINDS, FLOAT32)
    return {kind: FLOAT32 if kind in keep else INT8 for kind in KINDS}


def layer_plans(dtype: str, recipe: str | None, layers: int) -> list[tuple[dict[str, str], int]]:
    """The distinct :func:`layer_precisions` of ``layers`` layers from layer 0, each with how many
    layers have it."""
    plans: list[tuple[dict[str, str], int]] = []
    for layer in range(layers):
        plan = layer_precisions(dtype, recipe, layer)
        for i, (seen, count) in enumerate(plans):
            if seen == plan:
                plans[i] = (seen, count + 1)
                break
        else:
            plans.append((plan, 1))
    return plans


def attention_precision(graph: str, plan: Mapping[str, str]) -> str:
    """The precision of a layer's attention rate: the fused op's is its QKV projection's; the
    plain graph's activation products run float32 in every recipe."""
    return plan["qkv"] if "qkv" in IN_ATTENTION[graph] else FLOAT32


@dataclass
class OrtCalibration(CachedCalibration):
    """Measured ONNX Runtime rates of one machine, dtype (and int8 recipe), graph, thread count
    and encoder size.

    ``linear``: precision -> ``"KxN"`` -> ``[[tokens, GFLOP/s], ...]``; ``attention``: precision
    -> ``[[L, ms per row], ...]``; only the precisions the recipe runs are measured."""

    dtype: str
    recipe: str | None
    graph: str
    threads: int
    hidden: int
    heads: int
    intermediate: int
    peak_gflops: float
    linear: dict[str, dict[str, list[list[float]]]]
    attention: dict[str, list[list[float]]]
    other_ns_per_token: float
    runtime: str = RUNTIME
    runtime_version: str = ""
    machine: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    seconds: float = 0.0
    path: Path | None = field(default=None, compare=False)

    def summary(self) -> dict[str, Any]:
        """What a latency record keeps of the calibration it was predicted with."""
        return {
            "file": self.path.name if self.path else None,
            "runtime": f"{self.runtime} {self.runtime_version}".strip(),
            "dtype": self.dtype,
            "int8_recipe": self.recipe,
            "graph": self.graph,
            "threads": self.threads,
            "peak_gflops": self.peak_gflops,
            "created": self.created,
        }


def needed_rates(
    shape: EncoderShape, dtype: str, recipe: str | None, graph: str
) -> tuple[dict[str, set[tuple[int, int]]], set[str]]:
    """What a calibration measures: precision -> weight shapes ``(k, n)`` timed as MatMuls, and
    the precisions of the attention rate; layer 0 and one later layer cover every recipe."""
    linear: dict[str, set[tuple[int, int]]] = {}
    attention: set[str] = set()
    for plan, _ in layer_plans(dtype, recipe, 2):
        for kind, (k, n, _count) in matmul_kinds(shape).items():
            if kind not in IN_ATTENTION[graph]:
                linear.setdefault(plan[kind], set()).add((k, n))
        attention.add(attention_precision(graph, plan))
    return linear, attention


def runtime_version() -> str | None:
    """The installed onnxruntime's version (None: not installed), read without importing it."""
    try:
        return importlib.metadata.version("onnxruntime")
    except importlib.metadata.PackageNotFoundError:
        return None


def calibration_key(
    dtype: str, recipe: str | None, graph: str, threads: int, shape: EncoderShape
) -> dict[str, Any]:
    """Everything an ONNX Runtime calibration's rates depend on."""
    return {
        "runtime": RUNTIME,
        "onnxruntime": runtime_version(),
        "cpu": cpu_model(),
        "threads": threads,
        "dtype": dtype,
        "int8_recipe": recipe,
        "graph": graph,
        "hidden": shape.hidden,
        "heads": shape.heads,
        "intermediate": shape.intermediate,
        "version": VERSION,
    }


def calibration_path(root: Path, key: Mapping[str, Any]) -> Path:
    recipe = f"-{key['int8_recipe']}" if key["int8_recipe"] else ""
    name = f"calibration-{RUNTIME}-{key['dtype']}{recipe}-{key['graph']}-t{key['threads']}"
    return root / LATENCY_DIR / f"{name}-{config_hash(dict(key))}.json"


# -- the tiny graphs (onnx imported here only) -------------------------------------------------
def _model(nodes: list[Any], inputs: list[Any], outputs: list[str], inits: list[Any]) -> bytes:
    """A model of ``nodes`` (float32 outputs named ``outputs``), at the exported encoder's
    opset with Microsoft's domain for the fused ops."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "calibration",
        inputs,
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
    )
    return bytes(model.SerializeToString())


def _float_input(name: str, dims: list[Any]) -> Any:
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _weight(name: str, *dims: int) -> Any:
    """A random float32 initializer (seeded: the quantizer sees the same weights every time)."""
    from onnx import numpy_helper

    rng = np.random.default_rng(len(name) + sum(dims))
    return numpy_helper.from_array(rng.standard_normal(dims).astype(np.float32) * 0.05, name)


def _ints(name: str, values: list[int]) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def linear_graph(k: int, n: int, bias: bool) -> bytes:
    """``x (tokens x k) @ W (k x n)`` (``+ b`` with ``bias``), ``W`` an initializer as the
    exported encoder's weights are, so the quantizer quantizes it."""
    from onnx import helper

    nodes = [helper.make_node("MatMul", ["x", "w"], ["y" if bias else "out"])]
    inits = [_weight("w", k, n)]
    if bias:
        nodes.append(helper.make_node("Add", ["y", "b"], ["out"]))
        inits.append(_weight("b", n))
    return _model(nodes, [_float_input("x", ["tokens", k])], ["out"], inits)


def fused_attention_graph(hidden: int, heads: int) -> bytes:
    """ONNX Runtime's fused ``Attention`` as its optimizer writes it for BERT: input (rows, L,
    d), QKV weight (d, 3d) and bias, the raw int32 (rows, L) mask."""
    from onnx import TensorProto, helper

    node = helper.make_node(
        "Attention", ["x", "qkv_w", "qkv_b", "mask"], ["out"], domain="com.microsoft"
    )
    node.attribute.append(helper.make_attribute("num_heads", heads))
    inputs = [
        _float_input("x", ["rows", "length", hidden]),
        helper.make_tensor_value_info("mask", TensorProto.INT32, ["rows", "length"]),
    ]
    inits = [_weight("qkv_w", hidden, 3 * hidden), _weight("qkv_b", 3 * hidden)]
    return _model([node], inputs, ["out"], inits)


def plain_attention_graph(hidden: int, heads: int) -> bytes:
    """The exported sdpa pattern between a layer's projections: Q, K, V (rows, L, d) split into
    heads, ``Q K^T`` scaled, the additive (rows, 1, L, L) mask, softmax, the NaN guard, ``P V``,
    heads merged back (the session fuses the scale into ``FusedMatMul`` as in the model)."""
    from onnx import helper, numpy_helper

    dim = hidden // heads
    node = helper.make_node
    nodes = [
        *(node("Reshape", [x, "split"], [f"{x}4"]) for x in ("q", "k", "v")),
        node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
        node("MatMul", ["qt", "kt"], ["scores"]),
        node("Mul", ["scores", "scale"], ["scaled"]),
        node("Add", ["scaled", "mask"], ["masked"]),
        node("Softmax", ["masked"], ["probs"], axis=-1),
        node("IsNaN", ["probs"], ["nan"]),
        node("Where", ["nan", "zero", "probs"], ["safe"]),
        node("MatMul", ["safe", "vt"], ["ctx"]),
        node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        node("Reshape", ["ctx_t", "merge"], ["out"]),
    ]
    inputs = [_float_input(x, ["rows", "length", hidden]) for x in ("q", "k", "v")]
    inputs.append(_float_input("mask", ["rows", 1, "length", "length"]))
    inits = [
        _ints("split", [0, 0, heads, dim]),
        _ints("merge", [0, 0, hidden]),
        numpy_helper.from_array(np.asarray(1 / math.sqrt(dim), dtype=np.float32), "scale"),
        numpy_helper.from_array(np.asarray(0.0, dtype=np.float32), "zero"),
    ]
    return _model(nodes, inputs, ["out"], inits)


def other_graph(graph: str, hidden: int, intermediate: int) -> bytes:
    """A layer's work besides its MatMuls and attention: two residual layer norms (inputs ``a``
    and ``r``, (1, tokens, d)) and GELU on ``h`` (1, tokens, d_ff), as ``graph`` holds them."""
    from onnx import helper, numpy_helper

    node = helper.make_node
    inits = [_weight("g", hidden), _weight("beta", hidden)]
    if graph == "fused":
        ms = "com.microsoft"
        nodes = [
            node("SkipLayerNormalization", ["a", "r", "g", "beta", "b_d"], ["o1"], domain=ms),
            node("BiasGelu", ["h", "b_ff"], ["o2"], domain=ms),
            node("SkipLayerNormalization", ["r", "a", "g", "beta", "b_d"], ["o3"], domain=ms),
        ]
        inits += [_weight("b_d", hidden), _weight("b_ff", intermediate)]
    else:
        nodes = [
            node("Add", ["a", "r"], ["s1"]),
            node("LayerNormalization", ["s1", "g", "beta"], ["o1"], axis=-1),
            node("Div", ["h", "sqrt2"], ["hd"]),
            node("Erf", ["hd"], ["he"]),
            node("Add", ["he", "one"], ["h1"]),
            node("Mul", ["h", "h1"], ["hm"]),
            node("Mul", ["hm", "half"], ["o2"]),
            node("Add", ["r", "a"], ["s2"]),
            node("LayerNormalization", ["s2", "g", "beta"], ["o3"], axis=-1),
        ]
        scalars = {"sqrt2": math.sqrt(2), "one": 1.0, "half": 0.5}
        inits += [numpy_helper.from_array(np.float32(v), k) for k, v in scalars.items()]
    inputs = [_float_input(x, [1, "tokens", hidden]) for x in ("a", "r")]
    inputs.append(_float_input("h", [1, "tokens", intermediate]))
    return _model(nodes, inputs, ["o1", "o2", "o3"], inits)


# -- measuring ---------------------------------------------------------------------------------
#: a timed session: feeds -> ms (median, :func:`bench.latency.calibration.median_ms`)
Timer = Callable[[dict[str, np.ndarray]], float]


def _session_timer(model: bytes, precision: str, threads: int) -> Timer:
    """A session of ``model`` built as the ranker's (quantized first for int8), timed on feeds."""
    from rankers.runtimes import onnxruntime_session, quantize_int8

    if precision == INT8:
        model = quantize_int8(model)
    session = onnxruntime_session(model, precision, threads)
    return lambda feeds: median_ms(partial(session.run, feeds))


def _random(*dims: int) -> np.ndarray:
    return np.random.default_rng(sum(dims)).standard_normal(dims).astype(np.float32)


def _measure_linear(
    needed: Mapping[str, set[tuple[int, int]]], graph: str, threads: int
) -> dict[str, dict[str, list[list[float]]]]:
    out: dict[str, dict[str, list[list[float]]]] = {}
    for precision, shapes in sorted(needed.items()):
        for k, n in sorted(shapes):
            timer = _session_timer(linear_graph(k, n, bias=graph == "plain"), precision, threads)
            out.setdefault(precision, {})[f"{k}x{n}"] = [
                [t, 2 * t * k * n / timer({"x": _random(t, k)}) / 1e6] for t in TOKENS
            ]
    return out


def _attention_feeds(graph: str, rows: int, length: int, hidden: int) -> dict[str, np.ndarray]:
    """Inputs of :func:`fused_attention_graph` / :func:`plain_attention_graph`, the last
    eighth of each row padding (as the torch calibration's masked rate)."""
    keep = np.arange(length) < length - length // 8
    if graph == "fused":
        mask = np.broadcast_to(keep.astype(np.int32), (rows, length)).copy()
        return {"x": _random(rows, length, hidden), "mask": mask}
    additive = np.where(keep, 0.0, np.finfo(np.float32).min).astype(np.float32)
    mask = np.broadcast_to(additive, (rows, 1, length, length)).copy()
    return {**{x: _random(rows, length, hidden) for x in ("q", "k", "v")}, "mask": mask}


def _measure_attention(
    shape: EncoderShape, precisions: set[str], graph: str, threads: int
) -> dict[str, list[list[float]]]:
    build = fused_attention_graph if graph == "fused" else plain_attention_graph
    out: dict[str, list[list[float]]] = {}
    for precision in sorted(precisions):
        timer = _session_timer(build(shape.hidden, shape.heads), precision, threads)
        out[precision] = []
        for length in LENGTHS:
            rows = max(1, ATTENTION_TOKENS // length)
            ms = timer(_attention_feeds(graph, rows, length, shape.hidden))
            out[precision].append([length, ms / rows])
    return out


def _measure_other(shape: EncoderShape, graph: str, threads: int) -> float:
    tokens = max(TOKENS)
    model = other_graph(graph, shape.hidden, shape.intermediate)
    feeds = {x: _random(1, tokens, shape.hidden) for x in ("a", "r")}
    feeds["h"] = _random(1, tokens, shape.intermediate)
    return _session_timer(model, FLOAT32, threads)(feeds) * 1e6 / tokens


def _measure_peak(precision: str, threads: int) -> float:
    side = PEAK_SIDE
    ms = _session_timer(linear_graph(side, side, bias=False), precision, threads)(
        {"x": _random(side, side)}
    )
    return 2 * side**3 / ms / 1e6


def measure(shape: EncoderShape, dtype: str, recipe: str | None, graph: str) -> OrtCalibration:
    """Measure every rate ``dtype`` (and ``recipe``) needs on ``graph`` at this process's torch
    thread count, which the rankers give their sessions (some seconds)."""
    import torch

    if dtype not in PRECISIONS or graph not in ONNX_GRAPHS:
        raise ValueError(
            f"no ONNX Runtime calibration for dtype {dtype!r} on graph {graph!r}; known: dtype "
            f"{', '.join(PRECISIONS)}, graph {', '.join(ONNX_GRAPHS)}"
        )
    threads = torch.get_num_threads()
    linear, attention = needed_rates(shape, dtype, recipe, graph)
    start = time.perf_counter()
    cal = OrtCalibration(
        dtype=dtype,
        recipe=recipe if dtype == INT8 else None,
        graph=graph,
        threads=threads,
        hidden=shape.hidden,
        heads=shape.heads,
        intermediate=shape.intermediate,
        peak_gflops=_measure_peak(dtype, threads),
        linear=_measure_linear(linear, graph, threads),
        attention=_measure_attention(shape, attention, graph, threads),
        other_ns_per_token=_measure_other(shape, graph, threads),
        runtime_version=runtime_version() or "",
    )
    cal.seconds = time.perf_counter() - start
    cal.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return cal


#: measure(shape, dtype, recipe, graph): what :class:`OrtCalibrations` calls to measure
MeasureFn = Callable[[EncoderShape, str, "str | None", str], OrtCalibration]


def load_or_measure(
    root: Path,
    shape: EncoderShape,
    dtype: str,
    recipe: str | None,
    graph: str,
    fresh: bool = False,
    measure_fn: MeasureFn | None = None,
) -> OrtCalibration:
    """The cached ONNX Runtime calibration of this machine and setting, measured (and cached)
    when there is none or ``fresh``; ``measure_fn`` measures (default :func:`measure`)."""
    import torch

    recipe = recipe if dtype == INT8 else None
    key = calibration_key(dtype, recipe, graph, torch.get_num_threads(), shape)
    what = f"ONNX Runtime {dtype}{f' ({recipe})' if recipe else ''} kernels, {graph} graph"
    return cached(
        calibration_path(root, key),
        OrtCalibration,
        key,
        partial(measure_fn or measure, shape, dtype, recipe, graph),
        fresh,
        f"{what} ({key['threads']} thread(s))",
    )


class OrtCalibrations:
    """The ONNX Runtime calibrations of one benchmark run, each loaded (or measured) once, as
    :class:`bench.latency.calibration.Calibrations` does for torch's."""

    def __init__(
        self,
        root: Path,
        device: str = "cpu",
        fresh: bool = False,
        measure_fn: MeasureFn | None = None,
    ) -> None:
        self.root, self.device, self.fresh, self.measure_fn = root, device, fresh, measure_fn
        self._held: dict[tuple[Any, ...], OrtCalibration | None] = {}

    def get(self, shape: EncoderShape, encoder: Mapping[str, Any]) -> OrtCalibration | None:
        """The calibration for a row's ``encoder`` work (:func:`bench.latency.protocol.
        encoder_work`: runtime, dtype, graph, int8 recipe); None where there is none to measure
        (another runtime or device, or onnx / onnxruntime not installed) or measuring it failed:
        the rows are timed by then, and a record without a prediction beats no record (a
        warning says why)."""
        if encoder.get("runtime") != RUNTIME or self.device != "cpu":
            return None
        missing = missing_packages(RUNTIME, str(encoder["dtype"]))
        if missing and self.measure_fn is None:
            log.info("no ONNX Runtime time model: %s not installed", ", ".join(missing))
            return None
        dtype, graph = str(encoder["dtype"]), str(encoder["graph"])
        recipe = encoder.get("int8_recipe") if dtype == INT8 else None
        key = (dataclasses.replace(shape, layers=0), dtype, recipe, graph)
        if key not in self._held:
            try:
                self._held[key] = load_or_measure(
                    self.root, shape, dtype, recipe, graph, self.fresh, self.measure_fn
                )
            except Exception as exc:  # the runtime's own errors derive from Exception only
                log.warning(
                    "no ONNX Runtime time model for %s, %s graph: calibrating failed (%s: %s)",
                    dtype,
                    graph,
                    type(exc).__name__,
                    exc,
                )
                self._held[key] = None
        return self._held[key]
