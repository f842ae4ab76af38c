"""Scoring an encoder ranker's encoder on ONNX Runtime or OpenVINO instead of eager PyTorch.

Nobody deploys a CPU re-ranker as float32 eager PyTorch: ONNX Runtime (often with int8 weights)
and OpenVINO are what users run. Option ``runtime`` of the encoder rankers
(:class:`rankers.families.encoder.EncoderConfig`) swaps the Hugging Face encoder inside the ranker's
module for :class:`RuntimeEncoder`, which runs the same encoder exported to ONNX; everything
around it (monoBERT's pair batches, CROSS-JEM's packed rows, masks and position ids, pooling and
the head) stays the ranker's own torch code in float32, so both rankers are compared on one
runtime with the same inputs and only the encoder changes hands.

* The graph is exported once per set of weights (:func:`encoder_graph`, kept in memory and keyed
  by the encoder's weight hash), never on a timed path: the rankers build their session in
  ``index()``, which every scoring job and the latency benchmark call before timing.
* On ONNX Runtime (float32 and int8) the graph is fused first (:func:`fuse_for_onnxruntime`;
  option ``onnx_graph=plain`` skips it, which short pairs such as monoBERT's run faster):
  exported with the classic (eager) attention pattern, ONNX Runtime's transformer optimizer
  turns each layer's attention into one ``Attention`` op (its CPU kernel applies the padding
  mask inside the fused softmax, where the exported ``scaled_dot_product_attention`` pattern
  spends separate passes over every score on masking, a large share of CROSS-JEM's long rows)
  and the embeddings, residual layer norms and GELU into their fused kernels. The fused op
  reads the raw 2-D mask (any mask, not only right padding: the key-lengths form measured no
  faster on this CPU).
* ``dtype=int8`` on ONNX Runtime: the fused graph quantized by
  ``onnxruntime.quantization.quantize_dynamic`` (quantizing after fusion is the recipe ONNX
  Runtime documents): the linear layers' weights (``MatMul``) and each fused ``Attention``'s
  QKV projection (``QAttention``) to int8, one scale per output channel, except the MatMuls
  option ``int8_recipe`` keeps in float32 (:data:`INT8_RECIPES`; by default both feed-forward
  ones, whose outlier inputs per-call activation scales coarsen most); attention's activation
  products, layer norms, pooling and heads stay float32.
* ``dtype=bfloat16`` on OpenVINO (the plain export: OpenVINO does not run ONNX Runtime's
  fused ops): ``INFERENCE_PRECISION_HINT=bf16`` (float32 weights, the CPU
  plugin computes in bf16 where it can). float32 sets the hint to f32 explicitly, since
  OpenVINO's CPU default is bf16 on CPUs with native bf16.
* Threads: the runtime's intra-op threads are torch's (``torch.get_num_threads()``, which
  ``--threads`` sets), one inter-op thread, and no spin-waiting (the harness runs OpenMP passive
  for the same reason: spinning threads steal a loaded machine's cores).

The packages are optional (the ``runtimes`` extra): nothing here imports them until a session
is built, and a missing one is a :class:`~rankers.errors.RankerError` naming the extra.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import importlib.util
import logging
import re
import tempfile
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from rankers.errors import RankerError

log = logging.getLogger(__name__)

#: values of option ``runtime``; torch is eager PyTorch (the default)
RUNTIMES: tuple[str, ...] = ("torch", "onnxruntime", "openvino")
#: how to install the optional runtimes
EXTRA = 'pip install "crossjem-bench[runtimes]"'
#: the ``dtype`` values each non-torch runtime scores in -> the precision it runs (``auto``: the
#: runtime's float32 on CPU, as torch's ``auto`` is on CPU)
PRECISIONS: dict[str, dict[str, str]] = {
    "onnxruntime": {"auto": "float32", "float32": "float32", "int8": "int8"},
    "openvino": {"auto": "float32", "float32": "float32", "bfloat16": "bfloat16"},
}
#: the packages each runtime needs, per precision ("*": every precision)
PACKAGES: dict[str, dict[str, tuple[str, ...]]] = {
    "onnxruntime": {"*": ("onnxruntime", "onnx")},  # onnx: the fusion and the quantizer
    "openvino": {"*": ("openvino",)},
}
#: ONNX opset of the exported graphs (LayerNormalization is one op from 17)
OPSET = 17
#: exported graphs kept in memory (a latency run times both rankers on the same encoder)
_GRAPHS_KEPT = 4
INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")
#: values of option ``onnx_graph``: the graph ONNX Runtime runs (:func:`encoder_graph`)
ONNX_GRAPHS: tuple[str, ...] = ("fused", "plain")


def runtime_precision(runtime: str, dtype: str) -> str:
    """The precision a non-torch ``runtime`` scores in for option ``dtype``; a RankerError naming
    both options and the valid values when the runtime has no such precision."""
    table = PRECISIONS[runtime]
    if dtype not in table:
        raise RankerError(
            f"option dtype={dtype} is not available with runtime={runtime} "
            f"(it takes dtype {', '.join(table)})"
        )
    return table[dtype]


def required_packages(runtime: str, precision: str) -> tuple[str, ...]:
    """The packages ``runtime`` needs to score in ``precision``."""
    needs = PACKAGES[runtime]
    return (*needs["*"], *needs.get(precision, ()))


def missing_packages(runtime: str, precision: str) -> list[str]:
    """Which of :func:`required_packages` cannot be imported here (found without importing)."""
    return [p for p in required_packages(runtime, precision) if not _installed(p)]


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def require(package: str, runtime: str) -> ModuleType:
    """``import package`` for ``runtime``, or a RankerError naming the extra that installs it."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise RankerError(
            f"option runtime={runtime} needs the package {package!r}, which is not installed "
            f"({exc}); install the optional runtimes: {EXTRA}"
        ) from exc


def check_runtime(runtime: str, dtype: str) -> None:
    """Fail before any work when ``runtime`` cannot score in ``dtype`` here: a dtype the
    runtime lacks, or a package missing (named with the extra that installs it)."""
    if runtime == "torch":
        return
    precision = runtime_precision(runtime, dtype)
    missing = missing_packages(runtime, precision)
    if missing:
        raise RankerError(
            f"option runtime={runtime} (dtype={dtype}) needs {', '.join(missing)}, not "
            f"installed; install the optional runtimes: {EXTRA}"
        )


# -- the exported graph ----------------------------------------------------------------------------
class _EncoderGraph(nn.Module):
    """What is exported: the encoder on all four inputs, returning the named outputs."""

    def __init__(self, encoder: nn.Module, outputs: Sequence[str]) -> None:
        super().__init__()
        self.encoder = encoder
        self.outputs = tuple(outputs)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        token_type_ids: Tensor,
        position_ids: Tensor,
    ) -> tuple[Tensor, ...]:
        out = self.encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
        )
        return tuple(getattr(out, name) for name in self.outputs)


def _trace_inputs() -> tuple[Tensor, ...]:
    """Two rows of 9 tokens, the second padded after 5, so the traced graph holds the attention
    mask's arithmetic whatever the encoder does with an all-ones mask (transformers skips such
    a mask outside tracing; on 5.24 an unpadded sample traces the same graph)."""
    ids = torch.full((2, 9), 1000, dtype=torch.long)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 5:] = 0
    types = torch.zeros(2, 9, dtype=torch.long)
    types[:, 4:] = 1
    positions = torch.arange(9)[None, :].repeat(2, 1)
    return ids, mask, types, positions


def export_encoder(encoder: nn.Module, outputs: Sequence[str], eager: bool = False) -> bytes:
    """The float32 ``encoder`` as an ONNX model (bytes) with :data:`INPUTS` and ``outputs``,
    rows and width dynamic; ``eager``: a copy of the encoder with the classic attention
    (``attn_implementation="eager"``: matmul, mask add, softmax, matmul), the pattern ONNX
    Runtime's optimizer fuses, where the default ``sdpa`` exports a masked pattern it does not.
    torch's TorchScript exporter (``dynamo=False``): the export-based one needs onnxscript,
    which the extra does not install; its deprecation notes are logged once at debug level."""
    if eager:
        encoder = _eager_copy(encoder)
    graph = _EncoderGraph(encoder, outputs).eval()
    dims = {0: "rows", 1: "width"}
    with (
        tempfile.TemporaryDirectory(prefix="bench-onnx-") as tmp,
        warnings.catch_warnings(record=True) as caught,
        torch.no_grad(),
    ):
        warnings.simplefilter("always")
        path = Path(tmp) / "encoder.onnx"
        torch.onnx.export(
            graph,
            _trace_inputs(),
            path,
            input_names=list(INPUTS),
            output_names=list(outputs),
            dynamic_axes={name: dims for name in (*INPUTS, *outputs)},
            opset_version=OPSET,
            dynamo=False,
        )
        model = path.read_bytes()
    for note in {str(w.message).splitlines()[0] for w in caught}:
        log.debug("ONNX export: %s", note)
    return model


def _eager_copy(encoder: nn.Module) -> nn.Module:
    """A copy of a Hugging Face ``encoder`` running the classic (eager) attention; the scoring
    encoder itself is left as it is."""
    copied: Any = copy.deepcopy(encoder)
    switch = getattr(copied, "set_attn_implementation", None)
    if callable(switch):
        switch("eager")
    else:  # transformers 4 before set_attn_implementation: the config says which one runs
        copied.config._attn_implementation = "eager"
    return copied


def fuse_for_onnxruntime(model: bytes, num_heads: int, hidden_size: int) -> bytes:
    """``model`` (an eager-attention export) with ONNX Runtime's BERT fusions
    (``onnxruntime.transformers.optimizer``: ``Attention``, ``EmbedLayerNormalization``,
    ``SkipLayerNormalization``, ``BiasGelu``), Python fusions only; the session applies the
    runtime's own graph optimisations on top. The attention reads the raw mask (the BERT
    default, key lengths, would read a mask with a one after a zero as right padding). What
    fused is logged; an encoder whose pattern does not fuse keeps the plain ops (correct, only
    slower), with a warning."""
    onnx = require("onnx", "onnxruntime")
    optimizer = require("onnxruntime.transformers.optimizer", "onnxruntime")
    fusion = require("onnxruntime.transformers.fusion_options", "onnxruntime")
    options = fusion.FusionOptions("bert")
    options.use_raw_attention_mask(True)
    fused = optimizer.optimize_model(
        onnx.load_from_string(model),
        model_type="bert",
        num_heads=num_heads,
        hidden_size=hidden_size,
        optimization_options=options,
        opt_level=0,
    )
    counts = {op: n for op, n in fused.get_fused_operator_statistics().items() if n}
    log.info("ONNX Runtime fusions: %s", counts)
    if not counts.get("Attention"):
        log.warning(
            "ONNX Runtime's optimizer fused no attention in this encoder (fused: %s); its "
            "attention runs unfused",
            counts or "nothing",
        )
    with tempfile.TemporaryDirectory(prefix="bench-fused-") as tmp:
        path = Path(tmp) / "fused.onnx"
        fused.save_model_to_file(str(path))  # sorted, with the com.microsoft opset declared
        return path.read_bytes()


def fused_ops(model: bytes) -> dict[str, int]:
    """How many nodes of each fused (``com.microsoft``) op ``model`` holds: what a record says
    the runtime ran."""
    onnx = require("onnx", "onnxruntime")
    counts: dict[str, int] = {}
    for node in onnx.load_from_string(model).graph.node:
        if node.domain == "com.microsoft":
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items()))


@dataclasses.dataclass(frozen=True)
class Int8Recipe:
    """Which of the encoder's weight MatMuls ONNX Runtime's dynamic quantizer leaves in float32.

    Dynamic quantization scales each MatMul's input per call, one scale for the whole tensor, so
    a few outlier channels (the feed-forward output's input, after GELU, reaches 20-30 where most
    values stay under 3 on MiniLM) coarsen every other value; keeping such MatMuls in float32
    trades speed for accuracy (docs/results.md#precision measured each recipe)."""

    #: kinds of weight MatMul kept in float32 (:data:`FLOAT_KINDS`)
    keep_float: tuple[str, ...]
    summary: str


#: a weight MatMul's kind -> the pattern of its node name in the exported BERT graph (module path
#: ``encoder.layer.N.output.dense``...); ``first_layer`` is every weight MatMul of layer 0 and, on
#: the fused graph, its fused attention (the first in the graph's topological order)
FLOAT_KINDS: dict[str, str] = {
    "ffn_out": r"/layer\.\d+/output/dense/MatMul$",
    "ffn_in": r"/layer\.\d+/intermediate/dense/MatMul$",
    "first_layer": r"/layer\.0/.*MatMul$",
}
#: values of option ``int8_recipe``
INT8_RECIPES: dict[str, Int8Recipe] = {
    "all": Int8Recipe((), "every weight MatMul and fused attention's QKV projection int8"),
    "ffn-out-float": Int8Recipe(
        ("ffn_out",), "each layer's feed-forward output MatMul float32, the other MatMuls int8"
    ),
    "ffn-out-first-float": Int8Recipe(
        ("ffn_out", "first_layer"),
        "each layer's feed-forward output MatMul and the whole first layer float32",
    ),
    "ffn-float": Int8Recipe(
        ("ffn_out", "ffn_in"),
        "both feed-forward MatMuls float32: only attention's projections int8",
    ),
}
DEFAULT_INT8_RECIPE = "ffn-float"


def float_nodes(model: bytes, recipe: str, layers: int) -> list[str]:
    """The names of the nodes of ``model`` that ``recipe`` keeps in float32; a RankerError when a
    kind does not find what a BERT encoder of ``layers`` layers holds (an encoder whose module
    names differ would otherwise be quantized whole without a word)."""
    onnx = require("onnx", "onnxruntime")
    nodes = onnx.load_from_string(model).graph.node
    kept: list[str] = []
    for kind in INT8_RECIPES[recipe].keep_float:
        found = [
            n.name for n in nodes if n.op_type == "MatMul" and re.search(FLOAT_KINDS[kind], n.name)
        ]
        if kind == "first_layer":
            attention = [n.name for n in nodes if n.op_type == "Attention"][:1]
            found += attention
            ok = bool(found)
        else:
            ok = len(found) == layers
        if not ok:
            raise RankerError(
                f"option int8_recipe={recipe} keeps the {kind} MatMuls in float32, but the "
                f"exported encoder holds {len(found)} such nodes for its {layers} layers (their "
                f"names follow BERT's modules); use int8_recipe=all for this encoder"
            )
        kept += [name for name in found if name not in kept]
    return kept


def quantize_int8(model: bytes, keep_float: Sequence[str] = ()) -> bytes:
    """``model`` with its weight MatMuls and fused ``Attention`` ops' QKV weights quantized
    dynamically to int8 (QInt8 weights, one scale per output channel: per-tensor scales moved
    MiniLM's hidden states about 2.5x more), activations quantized per call (uint8), except the
    nodes named in ``keep_float`` (:func:`float_nodes`); other ops float32. The fused ops'
    outputs have no type ONNX shape inference knows, hence float32 as the quantizer's default
    tensor type."""
    onnx = require("onnx", "onnxruntime")
    quantization = require("onnxruntime.quantization", "onnxruntime")
    with tempfile.TemporaryDirectory(prefix="bench-int8-") as tmp:
        source, target = Path(tmp) / "float32.onnx", Path(tmp) / "int8.onnx"
        source.write_bytes(model)
        quiet = logging.getLogger()  # the quantizer's advice to pre-process goes to the root
        level = quiet.level
        quiet.setLevel(max(level, logging.ERROR))
        try:
            quantization.quantize_dynamic(
                source,
                target,
                weight_type=quantization.QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul", "Attention"],
                nodes_to_exclude=list(keep_float),
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        finally:
            quiet.setLevel(level)
        return target.read_bytes()


_GRAPHS: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()


def encoder_graph(
    encoder: nn.Module,
    outputs: Sequence[str],
    precision: str,
    fused: bool = False,
    recipe: str = DEFAULT_INT8_RECIPE,
) -> bytes:
    """The ONNX model of ``encoder`` in ``precision`` (int8: quantized by ``recipe``,
    :data:`INT8_RECIPES`), ``fused`` for ONNX Runtime (:func:`fuse_for_onnxruntime`, before
    quantizing), exported once per weights: kept in memory by the encoder's weight hash, so
    rankers loading the same weights in one process (the latency benchmark's variants) share one
    export."""
    from rankers.io.models import state_hash

    quantized = recipe if precision == "int8" else None
    key = (state_hash(encoder), tuple(outputs), fused, quantized)
    if key not in _GRAPHS:
        base = (*key[:3], None)
        if base not in _GRAPHS:
            log.info("exporting the encoder (%s) to ONNX", key[0])
            model = export_encoder(encoder, outputs, eager=fused)
            if fused:
                config: Any = encoder.config
                model = fuse_for_onnxruntime(
                    model, int(config.num_attention_heads), int(config.hidden_size)
                )
            _keep(base, model)
        if quantized:
            layers = int(getattr(encoder.config, "num_hidden_layers", 0))
            keep = float_nodes(_GRAPHS[base], quantized, layers)
            log.info(
                "quantizing the encoder to int8 (ONNX Runtime, recipe %s: %d MatMuls float32)",
                quantized,
                len(keep),
            )
            _keep(key, quantize_int8(_GRAPHS[base], keep))
    _GRAPHS.move_to_end(key)
    return _GRAPHS[key]


def _keep(key: tuple[Any, ...], model: bytes) -> None:
    _GRAPHS[key] = model
    while len(_GRAPHS) > _GRAPHS_KEPT:
        _GRAPHS.popitem(last=False)


# -- sessions --------------------------------------------------------------------------------------
#: a compiled encoder: input arrays by name -> output arrays in the exported order
Run = Callable[[dict[str, np.ndarray]], Sequence[np.ndarray]]


@dataclasses.dataclass(frozen=True)
class Session:
    """A runtime's compiled encoder and what records say about it."""

    run: Run
    info: dict[str, Any]


def onnxruntime_session(model: bytes, precision: str, threads: int) -> Session:
    """An ONNX Runtime CPU session of ``model`` (fused, and quantized for int8:
    :func:`encoder_graph`) with ``threads`` intra-op threads, one inter-op thread, all graph
    optimisations and no spin-waiting."""
    ort = require("onnxruntime", "onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    info = {
        "runtime": "onnxruntime",
        "version": ort.__version__,
        "precision": precision,
        # what the session runs with, read back from it
        "intra_op_threads": session.get_session_options().intra_op_num_threads,
        "provider": "CPUExecutionProvider",
        "fused_ops": fused_ops(model),
    }
    fused = bool(info["fused_ops"])
    info["graph"] = (
        "eager-attention export fused by onnxruntime.transformers.optimizer (bert)"
        if fused
        else "plain export (sdpa attention)"
    )
    if precision == "int8":
        info["quantization"] = "quantize_dynamic: MatMul weights QInt8 per channel" + (
            ", fused Attention's QKV weights too (after fusion)" if fused else ""
        )
    return Session(lambda feeds: session.run(None, feeds), info)


def openvino_session(model: bytes, precision: str, threads: int) -> Session:
    """``model`` compiled by OpenVINO for its CPU plugin with ``threads`` inference threads, one
    stream, and ``INFERENCE_PRECISION_HINT`` f32 or bf16 (logged: what the plugin reports)."""
    ov = require("openvino", "openvino")
    core = ov.Core()
    hint = {"float32": "f32", "bfloat16": "bf16"}[precision]
    capabilities = list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    if precision == "bfloat16" and "BF16" not in capabilities:
        log.warning(
            "OpenVINO's CPU plugin reports no native bf16 on this CPU (capabilities: %s): "
            "bfloat16 inference may be emulated and slower than float32",
            ", ".join(capabilities),
        )
    compiled = core.compile_model(
        core.read_model(model=model),
        "CPU",
        {
            "INFERENCE_PRECISION_HINT": hint,
            "INFERENCE_NUM_THREADS": threads,
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
        },
    )
    request = compiled.create_infer_request()
    outputs = list(compiled.outputs)

    def run(feeds: dict[str, np.ndarray]) -> Sequence[np.ndarray]:
        result = request.infer(feeds)
        return [np.array(result[o], copy=True) for o in outputs]

    info = {
        "runtime": "openvino",
        "version": ov.__version__,
        "precision": precision,
        "inference_precision": str(compiled.get_property("INFERENCE_PRECISION_HINT")),
        "inference_threads": int(compiled.get_property("INFERENCE_NUM_THREADS")),
        "cpu_capabilities": capabilities,
    }
    return Session(run, info)


SESSIONS: dict[str, Callable[[bytes, str, int], Session]] = {
    "onnxruntime": onnxruntime_session,
    "openvino": openvino_session,
}


# -- the stand-in encoder --------------------------------------------------------------------------
@dataclasses.dataclass
class EncoderOutput:
    """What the rankers read of a Hugging Face encoder's output."""

    last_hidden_state: Tensor
    pooler_output: Tensor | None = None


class RuntimeEncoder(nn.Module):
    """Stands in for a Hugging Face encoder (same keyword call, same ``last_hidden_state``) and
    runs the exported graph on a runtime session. Position ids left out are the encoder's own
    default, ``0 .. width - 1`` on every row."""

    #: the exported graph takes the 2D padding mask (:func:`rankers.inputs.masks.encoder_mask`)
    TAKES_ROW_MASK = False

    def __init__(self, session: Session, config: Any, outputs: Sequence[str]) -> None:
        super().__init__()
        self.session = session
        self.config = config
        self.outputs = tuple(outputs)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        token_type_ids: Tensor,
        position_ids: Tensor | None = None,
    ) -> EncoderOutput:
        if position_ids is None:
            width = input_ids.shape[1]
            position_ids = torch.arange(width, dtype=torch.long).expand(input_ids.shape[0], width)
        tensors = (input_ids, attention_mask, token_type_ids, position_ids)
        feeds = {
            name: np.ascontiguousarray(t.detach().cpu().numpy().astype(np.int64, copy=False))
            for name, t in zip(INPUTS, tensors, strict=True)
        }
        values = dict(zip(self.outputs, self.session.run(feeds), strict=True))
        return EncoderOutput(
            last_hidden_state=torch.from_numpy(values["last_hidden_state"]),
            pooler_output=(
                torch.from_numpy(values["pooler_output"]) if "pooler_output" in values else None
            ),
        )


def with_encoder(module: nn.Module, encoder: nn.Module) -> nn.Module:
    """A shallow copy of ``module`` whose ``encoder`` is ``encoder``; every other submodule
    (heads, pooling tables) is the original's, so it scores with the current head weights."""
    clone = copy.copy(module)
    clone._modules = {**module._modules, "encoder": encoder}
    return clone


class RuntimeCache:
    """The ranker's module with its encoder on a runtime, built once per weights, runtime and
    precision; rebuilt when a parameter has changed since (tensors' version counters), as
    :class:`rankers.compute.precision.CastCache` does for cast copies."""

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._module: nn.Module | None = None
        self.info: dict[str, Any] = {}

    def get(
        self,
        module: nn.Module,
        runtime: str,
        precision: str,
        outputs: Sequence[str],
        fused: bool = False,
        recipe: str = DEFAULT_INT8_RECIPE,
    ) -> nn.Module:
        """The module with its encoder on ``runtime`` in ``precision``, the graph ``fused`` for
        ONNX Runtime and int8 quantized by ``recipe`` (:func:`encoder_graph`)."""
        threads = torch.get_num_threads()
        versions = tuple(p._version for p in module.parameters())
        key = (id(module), runtime, precision, tuple(outputs), fused, recipe, threads, versions)
        if self._key != key or self._module is None:
            for package in required_packages(runtime, precision):
                require(package, runtime)
            encoder = module.encoder
            assert isinstance(encoder, nn.Module)
            graph = encoder_graph(encoder, outputs, precision, fused=fused, recipe=recipe)
            session = SESSIONS[runtime](graph, precision, threads)
            if precision == "int8":
                session.info["int8_recipe"] = f"{recipe}: {INT8_RECIPES[recipe].summary}"
            stand_in = RuntimeEncoder(session, getattr(encoder, "config", None), outputs)
            self._module = with_encoder(module, stand_in)
            self._key = key
            self.info = session.info
            log.info(
                "encoder on %s (%s, %d intra-op thread%s, as torch)",
                runtime,
                precision,
                threads,
                "s" * (threads != 1),
            )
        return self._module
