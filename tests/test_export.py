"""`bench export`: a saved model as a folder another library loads, with bench's own scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from bench.cli.main import app
from rankers import RankerError, create_ranker
from rankers.export import EXPORT_FILE, staged

runner = CliRunner()

QUERY = "what is the capital of france"
ITEMS = [
    "paris is the capital and largest city of france",
    "berlin is the capital of germany",
    "the eiffel tower stands in paris",
    "cheese",
]


def _st_major() -> int:
    import sentence_transformers

    return int(sentence_transformers.__version__.split(".", 1)[0])


def _saved_monobert(tmp_path: Path, tiny_bert: Path, pooling: str) -> tuple[Path, np.ndarray]:
    """A saved monoBERT whose head is far from zero (an untrained head scores near-equal)."""
    ranker = create_ranker("monobert", {"model": str(tiny_bert), "pooling": pooling, "seed": 1})
    with torch.no_grad():
        ranker.module.classifier.weight.mul_(40.0)
        ranker.module.classifier.bias.fill_(0.25)
    folder = tmp_path / f"monobert-{pooling}"
    ranker.save(folder)
    return folder, ranker.score_texts(QUERY, ITEMS)


def _export(source: Path, out: Path, *extra: str) -> str:
    result = runner.invoke(app, ["export", str(source), str(out), *extra])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("pooling", ["cls", "mean", "pooler"])
def test_monobert_exports_as_a_cross_encoder_with_the_same_scores(
    tmp_path: Path, tiny_bert: Path, pooling: str
) -> None:
    if pooling != "pooler" and _st_major() < 6:
        pytest.skip("pooling=cls/mean export as a modular CrossEncoder (sentence-transformers 6)")
    from sentence_transformers import CrossEncoder

    source, expected = _saved_monobert(tmp_path, tiny_bert, pooling)
    assert np.ptp(expected) > 1e-2  # scores that differ by far more than the tolerance
    out = tmp_path / "exported"
    printed = _export(source, out)
    assert "sentence_transformers.CrossEncoder" in printed
    model = CrossEncoder(str(out), device="cpu")
    got = model.predict([(QUERY, item) for item in ITEMS])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    described = json.loads((out / EXPORT_FILE).read_text())
    assert described["source"]["name"] == "monobert"
    assert described["source"]["config"]["pooling"] == pooling
    assert repr(str(out)) in described["example"]
    # the export is a copy: the source folder still loads and scores as before
    reloaded = create_ranker("monobert", {"checkpoint": str(source)})
    np.testing.assert_allclose(reloaded.score_texts(QUERY, ITEMS), expected, rtol=0, atol=1e-6)


def test_monobert_cls_export_names_the_version_it_needs(tmp_path: Path, tiny_bert: Path) -> None:
    if _st_major() >= 6:
        pytest.skip("sentence-transformers >= 6 exports pooling=cls")
    source, _ = _saved_monobert(tmp_path, tiny_bert, "cls")
    result = runner.invoke(app, ["export", str(source), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "sentence-transformers >= 6" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_dpr_exports_as_a_sentence_transformer_with_the_same_scores(
    tmp_path: Path, tiny_bert: Path, similarity: str
) -> None:
    from sentence_transformers import SentenceTransformer

    options = {
        "model": str(tiny_bert),
        "similarity": similarity,
        "query_prefix": "query: ",
        "document_prefix": "passage: ",
    }
    ranker = create_ranker("dpr", options)
    expected = ranker.score_texts(QUERY, ITEMS)
    source = tmp_path / "dpr"
    ranker.save(source)
    out = tmp_path / "exported"
    assert "SentenceTransformer" in _export(source, out)
    model = SentenceTransformer(str(out), device="cpu")
    assert model.prompts["query"] == "query: " and model.prompts["document"] == "passage: "
    got = model.similarity(model.encode_query([QUERY]), model.encode_document(ITEMS))[0]
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-5)
    # without the prompts the scores differ: the test would see a lost prefix
    plain = model.similarity(model.encode([QUERY]), model.encode(ITEMS))[0]
    assert not np.allclose(plain.numpy(), expected, atol=1e-5)


def test_crossjem_exports_as_a_hugging_face_folder_and_loads_back(
    tmp_path: Path, tiny_bert: Path
) -> None:
    from transformers import AutoModel

    from rankers.crossjem import CrossJEMRanker

    ranker = create_ranker("crossjem", {"model": str(tiny_bert), "order": "concat", "seed": 2})
    expected = ranker.score_texts(QUERY, ITEMS)
    source = tmp_path / "crossjem"
    ranker.save(source)
    out = tmp_path / "exported"
    assert "CrossJEMRanker.from_exported" in _export(source, out)
    AutoModel.from_pretrained(str(out))  # a Hugging Face folder: the encoder loads alone
    loaded = CrossJEMRanker.from_exported(out)
    assert loaded.cfg.order == "concat"
    np.testing.assert_allclose(loaded.score_texts(QUERY, ITEMS), expected, rtol=0, atol=1e-6)
    # permuting the items permutes the scores (the loader keeps the layout's invariance)
    order = [2, 0, 3, 1]
    permuted = loaded.score_texts(QUERY, [ITEMS[i] for i in order])
    np.testing.assert_allclose(permuted, expected[order], rtol=0, atol=1e-5)


def test_from_exported_refuses_another_rankers_folder(tmp_path: Path, tiny_bert: Path) -> None:
    from rankers.crossjem import CrossJEMRanker
    from rankers.monobert import MonoBERTRanker

    source, _ = _saved_monobert(tmp_path, tiny_bert, "pooler")
    monobert = MonoBERTRanker(MonoBERTRanker.Config.from_options({"checkpoint": str(source)}))
    EncoderExport = type(monobert).__mro__[1]  # EncoderRanker: the generic Hugging Face export
    with staged(tmp_path / "hf") as stage:
        EncoderExport.export(monobert, stage)
    with pytest.raises(RankerError, match="exported by 'monobert', not 'crossjem'"):
        CrossJEMRanker.from_exported(tmp_path / "hf")
    with pytest.raises(RankerError, match="no bench-ranker.json"):
        CrossJEMRanker.from_exported(tmp_path)


def test_an_existing_folder_is_refused_and_left_as_it_was(tmp_path: Path, tiny_bert: Path) -> None:
    source, _ = _saved_monobert(tmp_path, tiny_bert, "pooler")
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    result = runner.invoke(app, ["export", str(source), str(out)])
    assert result.exit_code == 2
    assert "exists and is not empty (pass --overwrite" in result.output
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    _export(source, out, "--overwrite")
    assert (out / EXPORT_FILE).is_file() and not (out / "mine.txt").exists()


def test_a_failed_export_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(RuntimeError), staged(out) as stage:
        (stage / "part").write_text("half")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_rankers_without_a_format_and_bad_sources_are_named(tmp_path: Path) -> None:
    bm25 = create_ranker("bm25")
    bm25.save(tmp_path / "bm25")
    result = runner.invoke(app, ["export", str(tmp_path / "bm25"), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "ranker 'bm25' has no export format" in result.output
    result = runner.invoke(app, ["export", str(tmp_path / "nowhere"), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "not a saved ranker folder (no ranker.json)" in result.output
    assert not (tmp_path / "out").exists()


def test_a_model_reading_sorted_items_is_not_exported(tmp_path: Path, tiny_bert: Path) -> None:
    ranker = create_ranker("dpr", {"model": str(tiny_bert), "sort_item_tokens": True})
    ranker.save(tmp_path / "dpr")
    result = runner.invoke(app, ["export", str(tmp_path / "dpr"), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "sort_item_tokens=true" in result.output
    assert not (tmp_path / "out").exists()
