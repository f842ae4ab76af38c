"""How each runtime's kernels are timed for the latency cost model: the probes behind a
calibration (:mod:`bench.latency.costmodel.kernels`, which keeps, keys and checks what they
measure), and what each layer runs (its weight MatMuls by kind, and which precision an int8
recipe gives each: :func:`layer_plans`).

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

**PyTorch on a CUDA GPU** (the same probes, :func:`cuda_probe`): the tensors on the device, each
sample a burst of calls up to a wait for the device (:class:`Probe`), token counts up to 131,072
(a GPU's MatMuls reach their rate only there) and more attention rows; ``tf32`` timed with TF32
matmuls on, every other precision with them off
(:func:`rankers.compute.precision.matmul_precision`).
And ``call``: the fixed cost of an encoder call (:func:`torch_call_ms`), the whole time of a
one-row call through a one- and a two-layer BERT, which a GPU call pays before any FLOP.

**ONNX Runtime** (:func:`ort_rates`). A row timed there runs other kernels (MLAS MatMuls, the
fused ``Attention`` op, int8 ``DynamicQuantizeMatMul``). Each is a tiny ONNX graph built with
``onnx.helper`` as the exported encoder holds it (:mod:`rankers.compute.runtimes`), quantized
for int8 by the ranker's own quantizer (:func:`rankers.compute.runtimes.quantize_int8`) and run
in a session built like the ranker's (:func:`rankers.compute.runtimes.onnxruntime_session`), so
that the kernel timed is the one the model runs after the runtime's own fusions. Per graph
(:data:`rankers.compute.runtimes.ONNX_GRAPHS`):

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

from bench.core.device import synchronize
from bench.latency.costmodel.flops import EncoderShape
from rankers.compute.precision import INT8, TF32
from rankers.compute.runtimes import DEFAULT_INT8_RECIPE, INT8_RECIPES, OPSET

if TYPE_CHECKING:
    import torch

#: token counts (rows x width) the linear rates are measured at
TOKENS = (128, 512, 2048)
#: sequence lengths the attention is measured at; rows per measurement: ATTENTION_TOKENS // L
LENGTHS = (16, 32, 64, 128, 256, 512)
ATTENTION_TOKENS = 2048
#: the dtypes PyTorch's kernels are timed in on a CPU, and on a GPU (``tf32``: float32 weights
#: on TF32 tensor cores, :data:`rankers.compute.precision.TF32`)
TORCH_DTYPES = ("float32", "bfloat16", "float16")
CUDA_DTYPES = ("float32", TF32, "bfloat16", "float16")
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
    ``[[tokens, GFLOP/s], ...]``, ``attention`` rate name -> ``[[L, ms per row], ...]``, the
    layer's other work in ns per token and an encoder call's fixed cost, ms per call and per
    layer (:func:`torch_call_ms`; 0 where it is not timed: on a CPU, whose calls wait for no
    device)."""

    peak_gflops: float
    linear: dict[str, dict[str, list[list[float]]]]
    attention: dict[str, list[list[float]]]
    other_ns_per_token: float
    call_ms: float = 0.0
    call_layer_ms: float = 0.0


# -- what each layer runs ---------------------------------------------------------------
#: a layer's weight MatMuls by kind (the kinds :data:`rankers.compute.runtimes.FLOAT_KINDS` keeps in
#: float32, and the attention projections)
KINDS = ("qkv", "attn_out", "ffn_in", "ffn_out")

#: kind -> precision of one layer's weight MatMuls
LayerPlan = dict[str, str]


def matmul_kinds(shape: EncoderShape) -> dict[str, tuple[int, int, int]]:
    """``kind -> (k, n, count)`` of one BERT layer: Q, K and V, the attention output, the
    feed-forward pair."""
    d, ff = shape.hidden, shape.intermediate
    return {"qkv": (d, d, 3), "attn_out": (d, d, 1), "ffn_in": (d, ff, 1), "ffn_out": (ff, d, 1)}


#: what the fused graph runs inside its ``Attention`` op rather than as a MatMul
IN_ATTENTION = {"fused": ("qkv",), "plain": ()}


def layer_precisions(dtype: str, recipe: str | None, layer: int) -> LayerPlan:
    """The precision of each weight MatMul kind (:data:`KINDS`) in layer ``layer`` (0-based)
    of an encoder scored in ``dtype`` with int8 recipe ``recipe``
    (:data:`rankers.compute.runtimes.INT8_RECIPES`): what the ranker's quantizer leaves in
    float32."""
    if dtype != INT8:
        return dict.fromkeys(KINDS, FLOAT32)
    keep = INT8_RECIPES[recipe or DEFAULT_INT8_RECIPE].keep_float
    if layer == 0 and "first_layer" in keep:
        return dict.fromkeys(KINDS, FLOAT32)
    return {kind: FLOAT32 if kind in keep else INT8 for kind in KINDS}


def layer_plans(dtype: str, recipe: str | None, layers: int) -> list[tuple[LayerPlan, int]]:
    """The distinct :func:`layer_precisions` of ``layers`` layers from layer 0, each with how many
    layers have it."""
    plans: list[tuple[LayerPlan, int]] = []
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
    """The precision of a layer's attention rate on ONNX Runtime: the fused op's is its QKV
    projection's; the plain graph's activation products run float32 in every recipe."""
    return plan["qkv"] if "qkv" in IN_ATTENTION[graph] else FLOAT32


# -- PyTorch ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    """Where and how PyTorch's kernels are timed: on ``device``, the linear rates at ``tokens``,
    the attention over ``attention_tokens`` per length, each sample ``burst`` calls long. A CPU
    call returns when its work is done (a burst of one). A GPU call only queues its kernels, so
    each sample waits for them (:func:`bench.core.device.synchronize`) and times a burst of
    calls queued back to back, as an encoder queues its layers: the kernels' time, not one
    launch and one wait per kernel (the encoder call's own fixed cost is timed apart,
    :func:`torch_call_ms`)."""

    device: str = "cpu"
    tokens: tuple[int, ...] = TOKENS
    attention_tokens: int = ATTENTION_TOKENS
    burst: int = 1


CPU = Probe()
#: a GPU's MatMuls reach their rate only at many more tokens than a CPU's: up to monoBERT's
#: whole-list batches (700 rows of ~50 tokens) and beyond, and 16x a CPU's attention rows
CUDA_TOKENS = (128, 512, 2048, 8192, 32768, 131072)
CUDA_ATTENTION_TOKENS = 32768
CUDA_BURST = 10


def cuda_probe(device: str) -> Probe:
    """How kernels are timed on the CUDA ``device``."""
    return Probe(device, CUDA_TOKENS, CUDA_ATTENTION_TOKENS, CUDA_BURST)


def median_ms(
    call: Callable[[], Any], min_reps: int = 3, min_s: float = 0.05, probe: Probe = CPU
) -> float:
    """Median ms of one ``call`` after one untimed call: at least ``min_reps`` timed samples of
    ``probe.burst`` calls, and ``min_s`` seconds (the median, as the benchmark's p50, shrugs off
    a burst of load); on a GPU, each sample up to its kernels' end."""
    call()
    synchronize(probe.device)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < min_s:
        t0 = time.perf_counter()
        for _ in range(probe.burst):
            call()
        synchronize(probe.device)
        times.append((time.perf_counter() - t0) * 1000 / probe.burst)
    return statistics.median(times)


def _torch_linear(
    shapes: Sequence[tuple[int, int]], dtype: torch.dtype, probe: Probe
) -> dict[str, list[list[float]]]:
    import torch
    import torch.nn.functional as F

    on = partial(torch.randn, dtype=dtype, device=probe.device)
    out: dict[str, list[list[float]]] = {}
    for k, n in shapes:
        weight, bias = on(n, k), on(n)
        points = []
        for tokens in probe.tokens:
            x = on(tokens, k)
            ms = median_ms(partial(F.linear, x, weight, bias), probe=probe)
            points.append([tokens, 2 * tokens * k * n / ms / 1e6])
        out[f"{k}x{n}"] = points
    return out


def _torch_attention(
    shape: EncoderShape, dtype: torch.dtype, attention: AttentionFn, probe: Probe
) -> dict[str, list[list[float]]]:
    """ms per row of ``attention``, inputs as a BERT layer passes them: (rows, L, heads, dim)
    projections viewed as (rows, heads, L, dim); the mask boolean (rows, 1, L, L), the last
    eighth of each row padding."""
    import torch

    heads, dim = shape.heads, shape.hidden // shape.heads
    out: dict[str, list[list[float]]] = {"unmasked": [], "masked": []}
    for length in LENGTHS:
        rows = max(1, probe.attention_tokens // length)
        q, k, v = (
            torch.randn(rows, length, heads, dim, dtype=dtype, device=probe.device).transpose(1, 2)
            for _ in range(3)
        )
        keep = torch.arange(length, device=probe.device) < length - length // 8
        mask = keep[None, None, None, :].expand(rows, 1, length, length).contiguous()
        for name, m in (("unmasked", None), ("masked", mask)):
            ms = median_ms(partial(attention, q, k, v, m), probe=probe)
            out[name].append([length, ms / rows])
    return out


def _torch_other(shape: EncoderShape, dtype: torch.dtype, probe: Probe) -> float:
    """ns per token of a layer's other work: two layer norms, GELU, two residual adds."""
    import torch
    import torch.nn.functional as F

    tokens, d, ff = max(probe.tokens), shape.hidden, shape.intermediate
    on = partial(torch.randn, dtype=dtype, device=probe.device)
    x, y, h = on(tokens, d), on(tokens, d), on(tokens, ff)
    norm = torch.nn.LayerNorm(d).to(device=probe.device, dtype=dtype)

    def layer_rest() -> None:
        with torch.inference_mode():
            norm(x + y)
            F.gelu(h)
            norm(x + y)

    return median_ms(layer_rest, probe=probe) * 1e6 / tokens


def torch_peak(name: str, probe: Probe = CPU) -> float:
    """GFLOP/s of ``torch.matmul`` of two 1024 x 1024 matrices in dtype ``name`` (``tf32``:
    float32 on TF32 tensor cores)."""
    import torch

    from rankers.compute.precision import matmul_precision

    dtype, side = torch_dtype(name), PEAK_SIDE
    a, b = (torch.randn(side, side, dtype=dtype, device=probe.device) for _ in range(2))
    with matmul_precision(name, probe.device):
        return 2 * side**3 / median_ms(lambda: torch.matmul(a, b), probe=probe) / 1e6


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a calibration dtype name (:data:`CUDA_DTYPES`: ``tf32`` is float32)."""
    import torch

    if name not in CUDA_DTYPES:
        raise ValueError(f"no calibration for dtype {name!r}; known: {', '.join(CUDA_DTYPES)}")
    return torch.float32 if name == TF32 else getattr(torch, name)


def torch_rates(
    shape: EncoderShape,
    dtype: str,
    shapes: Sequence[tuple[int, int]],
    attention: str,
    probe: Probe = CPU,
) -> Rates:
    """PyTorch's rates in ``dtype`` for the weight shapes ``shapes`` and the attention named
    ``attention``, at this process's torch thread count, timed as ``probe`` says (a few
    seconds); on a GPU in the matmul mode of ``dtype`` (TF32 for ``tf32`` only)."""
    import torch

    from rankers.compute.precision import matmul_precision

    if attention not in ATTENTIONS:
        raise ValueError(f"unknown attention {attention!r}; known: {', '.join(ATTENTIONS)}")
    kind = torch_dtype(dtype)
    with torch.inference_mode(), matmul_precision(dtype, probe.device):
        return Rates(
            peak_gflops=torch_peak(dtype, probe),
            linear={dtype: _torch_linear(shapes, kind, probe)},
            attention=_torch_attention(shape, kind, ATTENTIONS[attention], probe),
            other_ns_per_token=_torch_other(shape, kind, probe),
        )


#: the encoder call a call's fixed cost is timed on: one row of this many tokens, the last one
#: padding (the 2-D mask the rankers pass)
CALL_TOKENS = 8


def torch_call_ms(
    shape: EncoderShape, dtype: str, attention: str, device: str
) -> tuple[float, float]:
    """The fixed cost of one encoder call on ``device``: (ms per call, ms per layer), from the
    whole time of a one-row call of :data:`CALL_TOKENS` tokens (waited for, as a scoring call
    waits for its scores) through a randomly initialised transformers BERT of ``shape``'s sizes
    with one layer and with two, in ``dtype`` with ``attention``. What such a call costs is
    launches, host work (transformers' mask handling, which reads the mask on the host) and the
    wait, nearly no arithmetic: a cost the kernel rates do not see. Each at least 0 (noise)."""
    import torch
    from transformers import AutoModel, BertConfig

    from rankers.compute.precision import matmul_precision

    ids = torch.arange(CALL_TOKENS, device=device)[None, :]
    mask = (ids < CALL_TOKENS - 1).long()
    times = []
    for layers in (1, 2):
        config = BertConfig(
            vocab_size=CALL_TOKENS,
            hidden_size=shape.hidden,
            num_hidden_layers=layers,
            num_attention_heads=shape.heads,
            intermediate_size=shape.intermediate,
            max_position_embeddings=CALL_TOKENS,
        )
        model = AutoModel.from_config(config, attn_implementation=attention)
        model = model.to(device=device, dtype=torch_dtype(dtype)).eval()
        with torch.inference_mode(), matmul_precision(dtype, device):
            call = partial(model, input_ids=ids, attention_mask=mask)
            times.append(median_ms(call, probe=Probe(device)))
    layer = max(0.0, times[1] - times[0])
    return max(0.0, times[0] - layer), layer


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
    from rankers.compute.runtimes import onnxruntime_session, quantize_int8

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
