"""Option ``runtime`` of the encoder rankers (rankers.compute.runtimes): monoBERT and CROSS-JEM
scored on ONNX Runtime and OpenVINO give torch float32's scores, int8 within a stated tolerance;
the export happens once per weights, never in fit; options and missing packages fail clearly.

The runtimes are optional (the ``runtimes`` extra): tests that run one skip where its package
is absent; the error tests need none of them."""

from __future__ import annotations

import random
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from toydata import gold_split

from bench.data.model import Candidate, CandidateList, Query
from rankers.base import RankerError
from rankers.compute import runtimes
from rankers.families.crossjem.ranker import CrossJEMRanker
from rankers.families.encoder import EncoderRanker
from rankers.families.monobert import MonoBERTRanker

#: float32 runtimes: largest score difference to torch float32, as a share of the scores' range
FLOAT32_TOLERANCE = 1e-4
#: int8 weights (ONNX Runtime) and bfloat16 inference (OpenVINO): largest score difference to
#: torch float32 as a share of the largest score magnitude (the range is no scale here: the tiny
#: BERT's untrained monoBERT scores span 0.0008-0.01 around -0.14 and 0.7). Measured: int8
#: monoBERT 0.05% (cls) and 0.8% (pooler), CROSS-JEM 0.02%; OpenVINO bf16 at most 0.35%.
LOW_PRECISION_TOLERANCE = 0.02

WORDS = [
    "python",
    "list",
    "sort",
    "java",
    "dict",
    "value",
    "tuple",
    "reverse",
    "key",
    "map",
    "set",
    "the",
    "a",
    "of",
    "in",
    "by",
]

#: (ranker, options): monoBERT with both poolings the graph serves; CROSS-JEM's union, a masked
#: order-keeping layout with item position ids, and hybrid (shared block + own tokens)
CASES: list[tuple[type[EncoderRanker[Any]], dict[str, Any]]] = [
    (MonoBERTRanker, {"batch_size": 7}),
    (MonoBERTRanker, {"pooling": "pooler", "batch_size": 64}),
    (CrossJEMRanker, {"union_len": 20, "max_item_len": 8}),
    (CrossJEMRanker, {"order": "concat", "positions": "item", "union_len": 20, "max_item_len": 8}),
    (CrossJEMRanker, {"order": "hybrid", "union_len": 20, "max_item_len": 8, "batch_queries": 3}),
]
CASE_IDS = ["monobert", "monobert-pooler", "crossjem-union", "crossjem-concat-item", "hybrid"]


def _lists(seed: int = 0, n: int = 6) -> list[CandidateList]:
    """Lists of random lengths (empty items included), so batches are padded and rows split."""
    rng = random.Random(seed)

    def text(k: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(k))

    out = []
    for q in range(n):
        items = [text(rng.randrange(0, 9)) for _ in range(rng.randrange(1, 25))]
        cands = tuple(Candidate(f"d{i}", t) for i, t in enumerate(items))
        out.append(CandidateList(Query(f"q{q}", text(rng.randrange(1, 5))), cands))
    return out


def _ranker(cls: type[EncoderRanker[Any]], model: Path, **options: Any) -> EncoderRanker[Any]:
    return cls(cls.Config.from_options({"model": str(model), **options}))


def _needs(runtime: str, dtype: str) -> None:
    for package in runtimes.required_packages(runtime, runtimes.runtime_precision(runtime, dtype)):
        pytest.importorskip(package)


def _worst(scores: list[np.ndarray], reference: list[np.ndarray], scale: str = "range") -> float:
    """The largest score difference as a share of the reference scores' range (``scale``
    "range") or of their largest magnitude ("magnitude")."""
    got, ref = np.concatenate(scores), np.concatenate(reference)
    size = np.ptp(ref) if scale == "range" else np.abs(ref).max()
    return float(np.abs(got - ref).max() / size)


@pytest.mark.parametrize(
    ("runtime", "dtype"),
    [
        ("onnxruntime", "float32"),
        ("openvino", "float32"),
        ("onnxruntime", "int8"),
        ("openvino", "bfloat16"),
    ],
)
@pytest.mark.parametrize(("cls", "options"), CASES, ids=CASE_IDS)
def test_scores_equal_torch_float32(
    tiny_bert: Path,
    cls: type[EncoderRanker[Any]],
    options: dict[str, Any],
    runtime: str,
    dtype: str,
) -> None:
    _needs(runtime, dtype)
    lists = _lists()
    reference = _ranker(cls, tiny_bert, **options).score(lists)
    ranker = _ranker(cls, tiny_bert, runtime=runtime, dtype=dtype, **options)
    scores = ranker.score(lists)
    assert [len(s) for s in scores] == [len(cl) for cl in lists]
    if dtype == "float32":
        assert _worst(scores, reference) <= FLOAT32_TOLERANCE
    else:  # close, but not float32's scores: the low precision did run
        assert 1e-5 < _worst(scores, reference, "magnitude") <= LOW_PRECISION_TOLERANCE


def test_pooler_output_is_exported_only_when_read(tiny_bert: Path) -> None:
    """monoBERT's ``pooling=pooler`` reads BERT's pooler output; the other poolings do not, so
    their graph does not compute it."""
    assert _ranker(MonoBERTRanker, tiny_bert).encoder_outputs() == ("last_hidden_state",)
    pooler = _ranker(MonoBERTRanker, tiny_bert, pooling="pooler")
    assert pooler.encoder_outputs() == ("last_hidden_state", "pooler_output")
    assert _ranker(CrossJEMRanker, tiny_bert).encoder_outputs() == ("last_hidden_state",)


def _count_exports(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    export = runtimes.export_encoder

    def counting(*args: Any, **kwargs: Any) -> bytes:
        calls.append(1)
        return export(*args, **kwargs)

    monkeypatch.setattr(runtimes, "export_encoder", counting)
    monkeypatch.setattr(runtimes, "_GRAPHS", runtimes.OrderedDict())
    return calls


def test_export_once_per_weights_in_index_and_again_after_they_change(
    tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """index() exports and compiles (never a timed call); scoring and a second ranker on the same
    weights reuse that export; changed weights are exported anew and scored as torch scores them."""
    pytest.importorskip("onnxruntime")
    calls = _count_exports(monkeypatch)
    lists = _lists(1)
    split = gold_split("test", 0)
    ranker = _ranker(CrossJEMRanker, tiny_bert, runtime="onnxruntime", union_len=40)
    ranker.index(split)
    assert len(calls) == 1
    ranker.score(lists)
    _ranker(MonoBERTRanker, tiny_bert, runtime="onnxruntime", onnx_graph="fused").score(lists)
    assert len(calls) == 1
    encoder = ranker.module.encoder
    with torch.no_grad():
        encoder.embeddings.word_embeddings.weight.mul_(1.5)
    reference = _ranker(CrossJEMRanker, tiny_bert, union_len=40)
    with torch.no_grad():
        reference.module.encoder.embeddings.word_embeddings.weight.mul_(1.5)
    assert _worst(ranker.score(lists), reference.score(lists)) <= FLOAT32_TOLERANCE
    assert len(calls) == 2


def test_fit_trains_and_selects_in_torch(tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime is not in the trained-model key, so training and its dev scoring never use
    it: no export during fit; scoring afterwards runs the runtime on the trained weights."""
    pytest.importorskip("onnxruntime")
    calls = _count_exports(monkeypatch)
    ranker = _ranker(
        MonoBERTRanker, tiny_bert, runtime="onnxruntime", epochs=1, train_batch_queries=4
    )
    ranker.fit(gold_split("train", 0, n=8), gold_split("dev", 1, n=4))
    assert calls == []
    lists = _lists(2)
    torch_scores = [s.copy() for s in ranker.score(lists)]
    assert len(calls) == 1
    ranker.config.runtime = "torch"
    assert _worst(torch_scores, ranker.score(lists)) <= FLOAT32_TOLERANCE


def test_threads_labels_and_records_name_the_runtime(tiny_bert: Path) -> None:
    """The session runs torch's intra-op threads; latency labels, the record's dtype and the
    ranker's description say which runtime and precision scored."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ranker = _ranker(MonoBERTRanker, tiny_bert, runtime="onnxruntime", dtype="int8")
        info = ranker.describe()["runtime"]
    finally:
        torch.set_num_threads(threads)
    assert info["runtime"] == "onnxruntime" and info["precision"] == "int8"
    assert info["intra_op_threads"] == 1
    assert ranker.compute_dtype() == "int8 weights (onnxruntime)"
    assert [v.label for v in ranker.latency_variants([8])] == [
        "monobert (batch_size=8) [pre-tokenised, onnxruntime int8]",
        "monobert (batch_size=8) [end-to-end, onnxruntime int8]",
    ]
    torch_ranker = _ranker(MonoBERTRanker, tiny_bert)
    assert torch_ranker.latency_variants(None)[0].label == "monobert [pre-tokenised]"
    assert "runtime" not in torch_ranker.describe()


@pytest.mark.parametrize(
    ("cls", "options", "message"),
    [
        (
            MonoBERTRanker,
            {"dtype": "int8"},
            "option dtype=int8 is not available with runtime=torch (dtype=int8 needs "
            "runtime=onnxruntime)",
        ),
        (
            MonoBERTRanker,
            {"runtime": "onnxruntime", "dtype": "bfloat16"},
            "option dtype=bfloat16 is not available with runtime=onnxruntime "
            "(it takes dtype auto, float32, int8)",
        ),
        (
            MonoBERTRanker,
            {"runtime": "openvino", "dtype": "int8"},
            "option dtype=int8 is not available with runtime=openvino",
        ),
        (MonoBERTRanker, {"runtime": "tensorrt"}, "option runtime='tensorrt': expected one of"),
        (
            CrossJEMRanker,
            {"runtime": "onnxruntime", "merge_layers": 2},
            "option merge_layers=2 runs the encoder's layers one by one",
        ),
    ],
)
def test_bad_runtime_options_fail_before_loading(
    cls: type[EncoderRanker[Any]], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(RankerError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        cls.Config.from_options(options)


def test_runtime_needs_the_cpu(tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    monkeypatch.setattr(
        "rankers.families.encoder.resolve_device", lambda device: device
    )  # no GPU here
    config = MonoBERTRanker.Config.from_options({"model": str(tiny_bert), "runtime": "onnxruntime"})
    with pytest.raises(RankerError, match="runtime=onnxruntime runs on the CPU, not on device"):
        MonoBERTRanker(config, device="cuda")


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_a_missing_runtime_names_the_extra(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the package, the option is refused when the config is made (before any model
    loads), and an import at session time says the same: both name the extra."""
    monkeypatch.setitem(sys.modules, runtime, None)  # `import runtime` now raises ImportError
    extra = 'pip install "crossjem-bench[runtimes]"'
    with pytest.raises(RankerError) as made:
        MonoBERTRanker.Config.from_options({"runtime": runtime})
    # the runtime's package first; others it needs (onnx) follow where absent too
    message = str(made.value)
    assert f"option runtime={runtime} (dtype=auto) needs {runtime}" in message
    assert "not installed" in message
    assert extra in str(made.value)
    with pytest.raises(RankerError) as imported:
        runtimes.require(runtime, runtime)
    assert f"option runtime={runtime} needs the package {runtime!r}" in str(imported.value)
    assert extra in str(imported.value)


def test_torch_default_is_unchanged(tiny_bert: Path) -> None:
    """runtime=torch (the default) scores through the torch module, no session built."""
    ranker = _ranker(MonoBERTRanker, tiny_bert)
    assert ranker.cfg.runtime == "torch"
    assert ranker.scoring_module() is ranker.module
    assert ranker.compute_dtype() == "float32"


def test_run_label_names_the_runtime_and_precision() -> None:
    """A `bench run` row scored on a runtime says so in its label (a runtime option, so the
    trained model it scores is the torch run's)."""
    pytest.importorskip("openvino")
    from bench.execution.runner import label_for
    from rankers.base import Role

    config = MonoBERTRanker.Config.from_options({"runtime": "openvino", "dtype": "float32"})
    label = label_for(MonoBERTRanker(config), fitted=True)
    assert label == "monobert (minilm-l6, dtype=float32, runtime=openvino, fine-tuned)"
    assert "runtime" not in MonoBERTRanker.Config.fields_with_role(Role.TRAINING)


def test_bench_latency_times_the_runtime(
    tiny_bert: Path, shared_data: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench latency --set runtime=onnxruntime`: every row is timed on ONNX Runtime with the
    command's thread count, and its label, dtype and ranker_info say so (no warm-up call: the
    export happened in index(), before timing)."""
    import json

    from typer.testing import CliRunner

    from bench.cli.main import app

    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("BENCH_DATA_DIR", str(shared_data))
    args = ["-q", "latency", "-d", "wikiqa", "--rankers", "monobert,crossjem", "--n-items", "10"]
    args += ["--queries", "1", "--repeats", "1", "--warmup", "0", "--threads", "1"]
    args += ["--monobert-batch-sizes", "16", "--set", f"model={tiny_bert}"]
    result = CliRunner().invoke(app, [*args, "--set", "runtime=onnxruntime"])
    assert result.exit_code == 0, result.output
    (path,) = results_dir.glob("latency/wikiqa/*.json")
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
    assert {r["ranker"] for r in rows} == {"monobert", "crossjem"} and len(rows) == 4
    for row in rows:
        assert "onnxruntime float32]" in row["label"]
        assert row["options"]["runtime"] == "onnxruntime"
        assert row["dtype"] == "float32 (onnxruntime)"
        assert row["ranker_info"]["runtime"]["intra_op_threads"] == 1


@pytest.mark.parametrize(("dtype", "attention"), [("float32", "Attention"), ("int8", "QAttention")])
def test_onnxruntime_runs_the_fused_graph(tiny_bert: Path, dtype: str, attention: str) -> None:
    """On ONNX Runtime every layer's attention is one fused op (int8: with int8 QKV weights), the
    embeddings and residual layer norms fused too; the session's account says so. OpenVINO gets
    the plain export (it runs no ONNX Runtime ops)."""
    _needs("onnxruntime", dtype)
    ranker = _ranker(CrossJEMRanker, tiny_bert, runtime="onnxruntime", dtype=dtype)
    layers = ranker.module.encoder.config.num_hidden_layers
    ops = ranker.describe()["runtime"]["fused_ops"]
    assert ops[attention] == layers and ops["EmbedLayerNormalization"] == 1
    assert ops["SkipLayerNormalization"] >= layers
    assert ("Attention" in ops) == (dtype == "float32")
    plain = runtimes.encoder_graph(ranker.module.encoder, ("last_hidden_state",), "float32")
    assert runtimes.fused_ops(plain) == {}


def test_each_ranker_gets_its_faster_onnx_graph(tiny_bert: Path) -> None:
    """CROSS-JEM's long rows run the fused graph, monoBERT's short pairs the plain one (faster
    for them) unless ``onnx_graph=fused`` asks; the record says which graph ran."""
    _needs("onnxruntime", "int8")
    assert CrossJEMRanker.Config().onnx_graph == "fused"
    mono = _ranker(MonoBERTRanker, tiny_bert, runtime="onnxruntime", dtype="int8")
    info = mono.describe()["runtime"]
    assert mono.cfg.onnx_graph == "plain" and info["fused_ops"] == {}
    assert info["graph"] == "plain export (sdpa attention)"
    assert info["quantization"] == "quantize_dynamic: MatMul weights QInt8 per channel"
    fused = _ranker(
        MonoBERTRanker, tiny_bert, runtime="onnxruntime", dtype="int8", onnx_graph="fused"
    )
    assert fused.describe()["runtime"]["fused_ops"]["QAttention"] == 2
    lists = _lists(3)
    reference = _ranker(MonoBERTRanker, tiny_bert).score(lists)
    assert _worst(fused.score(lists), reference, "magnitude") <= LOW_PRECISION_TOLERANCE


def test_fused_graph_reads_any_mask_as_torch_does(tiny_bert: Path) -> None:
    """The fused attention reads the raw mask, not key lengths: a mask with a one after a zero
    gives torch's hidden states on every unmasked token (the lengths form would attend to the
    masked ones)."""
    _needs("onnxruntime", "float32")
    ranker = _ranker(MonoBERTRanker, tiny_bert, runtime="onnxruntime", onnx_graph="fused")
    fused, encoder = ranker.scoring_module().encoder, ranker.module.encoder
    assert fused.session.info["fused_ops"]["Attention"] == 2
    ids = torch.arange(1000, 1012).reshape(2, 6)
    types = torch.zeros_like(ids)
    for mask in (
        [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]],
        [[1, 1, 0, 1, 1, 1], [1, 0, 1, 0, 0, 1]],
    ):
        keep = torch.tensor(mask)
        got = fused(ids, keep, types).last_hidden_state
        with torch.no_grad():
            want = encoder(input_ids=ids, attention_mask=keep, token_type_ids=types)
        diff = (got - want.last_hidden_state).abs()[keep.bool()].max()
        assert float(diff) < 1e-4, (mask, float(diff))


#: the tiny BERT's weight MatMuls: 2 layers x (query, key, value, attention output, the two
#: feed-forward ones)
TINY_MATMULS = 12


@pytest.mark.parametrize(
    ("recipe", "graph", "integer", "attention", "kept"),
    [
        ("all", "plain", TINY_MATMULS, 0, 0),
        ("ffn-out-float", "plain", TINY_MATMULS - 2, 0, 2),
        ("ffn-float", "plain", TINY_MATMULS - 4, 0, 4),
        ("ffn-out-first-float", "plain", TINY_MATMULS - 7, 0, 7),
        # fused: query, key and value are one QAttention per layer; layer 0's stays float32
        ("all", "fused", 2 * 3, 2, 0),
        ("ffn-out-float", "fused", 2 * 2, 2, 2),
        ("ffn-out-first-float", "fused", 1 * 2, 1, 4),
    ],
)
def test_int8_recipe_keeps_its_matmuls_float32(
    tiny_bert: Path, recipe: str, graph: str, integer: int, attention: int, kept: int
) -> None:
    """Each int8 recipe quantizes exactly the weight MatMuls it does not keep in float32: the
    quantized graph's integer MatMuls, QAttention ops and float MatMuls with a weight say so,
    and the record names the recipe."""
    _needs("onnxruntime", "int8")
    import onnx

    options = {"runtime": "onnxruntime", "dtype": "int8", "onnx_graph": graph}
    ranker = _ranker(MonoBERTRanker, tiny_bert, int8_recipe=recipe, **options)
    module = ranker.scoring_module()
    model = runtimes.encoder_graph(
        ranker.module.encoder, ("last_hidden_state",), "int8", graph == "fused", recipe
    )
    nodes = onnx.load_from_string(model).graph
    weights = {w.name for w in nodes.initializer}
    ops = [n.op_type for n in nodes.node]
    float_weight = [n for n in nodes.node if n.op_type == "MatMul" and n.input[1] in weights]
    assert ops.count("MatMulInteger") + ops.count("DynamicQuantizeMatMul") == integer
    assert ops.count("QAttention") == attention
    assert ops.count("Attention") == (2 - attention if graph == "fused" else 0)
    assert len(float_weight) == kept
    summary = runtimes.INT8_RECIPES[recipe].summary
    assert module.encoder.session.info["int8_recipe"] == f"{recipe}: {summary}"
    lists = _lists(2)
    reference = _ranker(MonoBERTRanker, tiny_bert).score(lists)
    assert 1e-5 < _worst(ranker.score(lists), reference, "magnitude") <= LOW_PRECISION_TOLERANCE


def test_int8_recipe_default_and_refusals(tiny_bert: Path) -> None:
    """The default recipe keeps both feed-forward MatMuls in float32 (the smallest score error of
    the recipes measured: docs/results.md#precision); a recipe without dtype=int8 is refused
    before any model loads, and an encoder whose MatMuls the recipe cannot find is refused by
    name."""
    assert MonoBERTRanker.Config().int8_recipe == "ffn-float"
    assert CrossJEMRanker.Config().int8_recipe == "ffn-float"
    refused = (
        r"^option int8_recipe=all has no effect under dtype=auto "
        r"\(int8_recipe=all needs dtype=int8\)"
    )
    with pytest.raises(RankerError, match=refused):
        MonoBERTRanker.Config.from_options({"runtime": "onnxruntime", "int8_recipe": "all"})
    _needs("onnxruntime", "int8")
    ranker = _ranker(MonoBERTRanker, tiny_bert)
    model = runtimes.encoder_graph(ranker.module.encoder, ("last_hidden_state",), "float32")
    assert len(runtimes.float_nodes(model, "ffn-out-float", 2)) == 2
    with pytest.raises(
        RankerError,
        match=r"^option int8_recipe=ffn-out-float keeps the ffn_out MatMuls in float32, but the "
        r"exported encoder holds 2 such nodes for its 3 layers",
    ):
        runtimes.float_nodes(model, "ffn-out-float", 3)


def test_int8_weights_have_one_scale_per_output_channel(tiny_bert: Path) -> None:
    """dtype=int8 quantizes each weight MatMul per output channel (one scale and zero point per
    column): per-tensor scales moved MiniLM's hidden states about 2.5x more. Every int8 weight of
    the quantized tiny encoder (12 MatMuls: 6 per layer) has as many scales as columns."""
    _needs("onnxruntime", "int8")
    import onnx

    ranker = _ranker(MonoBERTRanker, tiny_bert)
    model = runtimes.encoder_graph(ranker.module.encoder, ("last_hidden_state",), "float32")
    graph = onnx.load_from_string(runtimes.quantize_int8(model)).graph
    tensors = {t.name: t for t in graph.initializer}
    weights = [
        t for t in graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 2
    ]
    assert len(weights) == TINY_MATMULS
    for weight in weights:
        stem = weight.name.removesuffix("_quantized")
        columns = [weight.dims[1]]
        assert list(tensors[f"{stem}_scale"].dims) == columns, weight.name
        assert list(tensors[f"{stem}_zero_point"].dims) == columns, weight.name


@pytest.mark.parametrize(("precision", "hint"), [("float32", "f32"), ("bfloat16", "bf16")])
def test_openvino_is_given_its_precision_hint_on_any_cpu(
    precision: str, hint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """float32 on OpenVINO sets ``INFERENCE_PRECISION_HINT=f32`` explicitly (the CPU plugin's
    default is bf16 where the CPU has native bf16), bfloat16 sets bf16: read from what the
    session compiles with, so it holds on a CPU whose default is f32 anyway and without
    OpenVINO installed (a stand-in records the call)."""
    compiled: dict[str, Any] = {}

    class Compiled:
        outputs: list[str] = []

        def create_infer_request(self) -> None:
            return None

        def get_property(self, name: str) -> Any:
            return compiled["config"][name]

    class Core:
        def get_property(self, device: str, name: str) -> list[str]:
            return ["FP32"]

        def read_model(self, model: bytes) -> bytes:
            return model

        def compile_model(self, model: bytes, device: str, config: dict[str, Any]) -> Compiled:
            compiled.update(model=model, device=device, config=config)
            return Compiled()

    stand_in = types.SimpleNamespace(Core=Core, __version__="stand-in")
    monkeypatch.setattr(runtimes, "require", lambda package, runtime: stand_in)
    session = runtimes.openvino_session(b"graph", precision, 2)
    assert compiled["device"] == "CPU" and compiled["model"] == b"graph"
    assert compiled["config"]["INFERENCE_PRECISION_HINT"] == hint
    assert session.info["inference_precision"] == hint
