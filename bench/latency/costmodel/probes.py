"""How each runtime's kernels are timed for the latency cost model: the probes behind a
calibration (:mod:`bench.latency.costmodel.kernels`, which keeps, keys and checks what they
measure).

**PyTorch** (:func:`torch_rates`). Counting FLOPs predicts one speed-up in every precision, but a
CPU does not speed every kernel up alike: a bfloat16 matrix product may run several times faster
(or, without native bf16, slower) than a float32 one while the attention kernel on long rows gains
nothing. So the probes time the kernels a BERT layer runs:

* ``linear``: ``F.linear`` of ``tokens x k`` by ``k x n`` for each weight shape of a layer at
  :data:`TOKENS`, as GFLOP/s;
* ``attention``: the attention the ranker runs (:data:`ATTENTIONS`, by name) on
  ``rows x heads x L x head_dim`` inputs laid out as a BERT layer hands them over (transposed
  views of the projections), without a mask and with the boolean ``rows x 1 x L x L`` padding
  mask transformers builds, at lengths :data:`LENGTHS`, as ms per row (all heads);
* ``other``: what else a layer does per token (two layer norms, GELU on ``d_ff`` values, two
  residual adds), as ns per token;
* ``peak``: ``torch.matmul`` of 1024 x 1024 matrices, the limit achieved GFLOP/s are set against.

**ONNX Runtime** (:func:`ort_rates`). A row timed there runs other kernels (MLAS MatMuls, the
fused ``Attention`` op, int8 ``DynamicQuantizeMatMul``). Each is a tiny ONNX graph built with
``onnx.helper`` as the exported encoder holds it (:mod:`rankers.runtimes`), quantized for int8 by
the ranker's own quantizer (:func:`rankers.runtimes.quantize_int8`) and run in a session built
like the ranker's (:func:`rankers.runtimes.onnxruntime_session`), so that the kernel timed is the
one the model runs after the runtime's own fusions. Per graph
(:data:`rankers.runtimes.ONNX_GRAPHS`):

* ``linear``: ``tokens x k`` by a ``k x n`` weight for each weight shape the precision runs, at
  :data:`TOKENS`, as GFLOP/s: on the plain graph MatMul and bias Add (int8: fused into one
  ``DynamicQuantizeMatMul`` by the session), on the fused graph the MatMul alone (its bias is
  added by the fused layer norm or GELU);
* ``attention``: ms per row at :data:`LENGTHS` of what the graph runs per layer between the
  projections: on the plain graph the exported pattern (scaled ``Q K^T``, additive
  ``rows x 1 x L x L`` mask, softmax, NaN guard, ``P V`` and the head reshapes), on the fused
  graph the ``Attention`` op (int8: ``QAttention``) on a raw 2-D padding mask, *its QKV projection
  included*; both graphs always apply the mask, so there is one rate per precision;
* ``other``: ns per token of a layer's two residual layer norms and GELU (plain: Add and
  ``LayerNormalization``, the erf GELU pattern; fused: ``SkipLayerNormalization`` and
  ``BiasGelu``);
* ``peak``: a 1024 x 1024 by 1024 x 1024 MatMul in the precision (int8: quantized).

torch, onnx and onnxruntime are imported only when a probe runs.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.latency.costmodel.flops import EncoderShape
from rankers.precision import INT8
from rankers.runtimes import OPSET

if TYPE_CHECKING:
    import torch

#: token counts (rows x width) the linear rates are measured at
TOKENS = (128, 512, 2048)
#: sequence lengths the attention is measured at; rows per measurement: ATTENTION_TOKENS // L
LENGTHS = (16, 32, 64, 128, 256, 512)
ATTENTION_TOKENS = 2048
#: the dtypes PyTorch's kernels are timed in
TORCH_DTYPES = ("float32", "bfloat16", "float16")
FLOAT32 = "float32"
#: the peak MatMul's side
PEAK_SIDE = 1024

#: attention(q, k, v, mask) -> output, q/k/v (rows, heads, L, head_dim), mask None or boolean
#: (rows, 1, L, L) with True where a position may be attended to
AttentionFn = Callable[["torch.Tensor", "torch.Tensor", "torch.Tensor", "torch.Tensor | None"], Any]


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> Any:
    """What transformers' BERT runs (``attn_implementation="sdpa"``)."""
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


#: the attention implementations the rankers run, by the name their
#: :class:`~rankers.hooks.EncoderCall` gives: the one place to register a new one, so that its
#: calibration times the attention the ranker really runs
ATTENTIONS: dict[str, AttentionFn] = {"sdpa": sdpa}


@dataclass
class Rates:
    """What a probe measures: the matmul peak (GFLOP/s), ``linear`` precision -> ``"KxN"`` ->
    ``[[tokens, GFLOP/s], ...]``, ``attention`` rate name -> ``[[L, ms per row], ...]`` and the
    layer's other work in ns per token."""

    peak_gflops: float
    linear: dict[str, dict[str, list[list[float]]]]
    attention: dict[str, list[list[float]]]
    other_ns_per_token: float


# -- PyTorch ---------------------------------------------------------------------------------
def median_ms(call: Callable[[], Any], min_reps: int = 3, min_s: float = 0.05) -> float:
    """Median ms of ``call`` after one untimed call: at least ``min_reps`` timed calls and
    ``min_s`` seconds (the median, as the benchmark's p50, shrugs off a burst of load)."""
    call()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < min_s:
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _torch_linear(
    shapes: Sequence[tuple[int, int]], dtype: torch.dtype
) -> dict[str, list[list[float]]]:
    import torch
    import torch.nn.functional as F

    out: dict[str, list[list[float]]] = {}
    for k, n in shapes:
        weight, bias = torch.randn(n, k, dtype=dtype), torch.randn(n, dtype=dtype)
        points = []
        for tokens in TOKENS:
            x = torch.randn(tokens, k, dtype=dtype)
            ms = median_ms(partial(F.linear, x, weight, bias))
            points.append([tokens, 2 * tokens * k * n / ms / 1e6])
        out[f"{k}x{n}"] = points
    return out


def _torch_attention(
    shape: EncoderShape, dtype: torch.dtype, attention: AttentionFn
) -> dict[str, list[list[float]]]:
    """ms per row of ``attention``, inputs as a BERT layer passes them: (rows, L, heads, dim)
    projections viewed as (rows, heads, L, dim); the mask boolean (rows, 1, L, L), the last
    eighth of each row padding."""
    import torch

    heads, dim = shape.heads, shape.hidden // shape.heads
    out: dict[str, list[list[float]]] = {"unmasked": [], "masked": []}
    for length in LENGTHS:
        rows = max(1, ATTENTION_TOKENS // length)
        q, k, v = (
            torch.randn(rows, length, heads, dim, dtype=dtype).transpose(1, 2) for _ in range(3)
        )
        keep = torch.arange(length) < length - length // 8
        mask = keep[None, None, None, :].expand(rows, 1, length, length).contiguous()
        for name, m in (("unmasked", None), ("masked", mask)):
            ms = median_ms(partial(attention, q, k, v, m))
            out[name].append([length, ms / rows])
    return out


def _torch_other(shape: EncoderShape, dtype: torch.dtype) -> float:
    """ns per token of a layer's other work: two layer norms, GELU, two residual adds."""
    import torch
    import torch.nn.functional as F

    tokens, d, ff = max(TOKENS), shape.hidden, shape.intermediate
    x, y = torch.randn(tokens, d, dtype=dtype), torch.randn(tokens, d, dtype=dtype)
    h = torch.randn(tokens, ff, dtype=dtype)
    norm = torch.nn.LayerNorm(d).to(dtype)

    def layer_rest() -> None:
        with torch.inference_mode():
            norm(x + y)
            F.gelu(h)
            norm(x + y)

    return median_ms(layer_rest) * 1e6 / tokens


def torch_peak(name: str) -> float:
    """GFLOP/s of ``torch.matmul`` of two 1024 x 1024 matrices in dtype ``name``."""
    import torch

    dtype = torch_dtype(name)
    a, b = torch.randn(1024, 1024, dtype=dtype), torch.randn(1024, 1024, dtype=dtype)
    return 2 * 1024**3 / median_ms(lambda: torch.matmul(a, b)) / 1e6


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a calibration dtype name (:data:`TORCH_DTYPES`)."""
    import torch

    if name not in TORCH_DTYPES:
        raise ValueError(f"no calibration for dtype {name!r}; known: {', '.join(TORCH_DTYPES)}")
    return getattr(torch, name)


def torch_rates(
    shape: EncoderShape, dtype: str, shapes: Sequence[tuple[int, int]], attention: str
) -> Rates:
    """PyTorch's rates in ``dtype`` for the weight shapes ``shapes`` and the attention named
    ``attention``, at this process's torch thread count (a few seconds)."""
    import torch

    if attention not in ATTENTIONS:
        raise ValueError(f"unknown attention {attention!r}; known: {', '.join(ATTENTIONS)}")
    kind = torch_dtype(dtype)
    with torch.inference_mode():
        return Rates(
            peak_gflops=torch_peak(dtype),
            linear={dtype: _torch_linear(shapes, kind)},
            attention=_torch_attention(shape, kind, ATTENTIONS[attention]),
            other_ns_per_token=_torch_other(shape, kind),
        )


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
#: a timed session: feeds -> ms (median, :func:`median_ms`)
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


def _ort_linear(
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
    eighth of each row padding (as the PyTorch probe's masked rate)."""
    keep = np.arange(length) < length - length // 8
    if graph == "fused":
        mask = np.broadcast_to(keep.astype(np.int32), (rows, length)).copy()
        return {"x": _random(rows, length, hidden), "mask": mask}
    additive = np.where(keep, 0.0, np.finfo(np.float32).min).astype(np.float32)
    mask = np.broadcast_to(additive, (rows, 1, length, length)).copy()
    return {**{x: _random(rows, length, hidden) for x in ("q", "k", "v")}, "mask": mask}


def _ort_attention(
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


def _ort_other(shape: EncoderShape, graph: str, threads: int) -> float:
    tokens = max(TOKENS)
    model = other_graph(graph, shape.hidden, shape.intermediate)
    feeds = {x: _random(1, tokens, shape.hidden) for x in ("a", "r")}
    feeds["h"] = _random(1, tokens, shape.intermediate)
    return _session_timer(model, FLOAT32, threads)(feeds) * 1e6 / tokens


def ort_peak(precision: str, threads: int) -> float:
    """GFLOP/s of a 1024 x 1024 by 1024 x 1024 MatMul in ``precision`` (int8: quantized)."""
    side = PEAK_SIDE
    ms = _session_timer(linear_graph(side, side, bias=False), precision, threads)(
        {"x": _random(side, side)}
    )
    return 2 * side**3 / ms / 1e6


def ort_rates(
    shape: EncoderShape,
    dtype: str,
    linear: Mapping[str, set[tuple[int, int]]],
    attention: set[str],
    graph: str,
    threads: int,
) -> Rates:
    """ONNX Runtime's rates on ``graph``: the MatMuls ``linear`` (precision -> weight shapes),
    the attention in each precision of ``attention``, the layer's other work and the peak in
    ``dtype``, with ``threads`` intra-op threads (some seconds)."""
    return Rates(
        peak_gflops=ort_peak(dtype, threads),
        linear=_ort_linear(linear, graph, threads),
        attention=_ort_attention(shape, attention, graph, threads),
        other_ns_per_token=_ort_other(shape, graph, threads),
    )
