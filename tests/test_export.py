"""`bench export`: a saved model as a folder another library loads, with bench's own scores."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from bench.cli.main import app
from rankers import RankerError, create_ranker
from rankers.io.export import EXPORT_FILE, staged

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


#: 32 WordPiece tokens (monoBERT's max_query_len): a query exactly at its limit
LONG_QUERY = " ".join(["capital", "of", "france", "paris", "city", "river", "seine", "europe"] * 4)
#: items of 36 to 68 tokens, all longer than max_item_len (32): bench cuts each to its first 32
LONG_ITEMS = [
    " ".join(
        [*ITEMS[i % len(ITEMS)].split(), *f"item {i} ends with words the cut drops".split()] * 4
    )
    for i in range(4)
]


@pytest.mark.parametrize("pooling", ["cls", "pooler"])
def test_monobert_export_cuts_long_texts_where_bench_does(
    tmp_path: Path, tiny_bert: Path, pooling: str
) -> None:
    """The exported CrossEncoder cuts a pair to max_query_len + max_item_len + 3 = 67 tokens: for
    a query at its limit that is bench's own cut of every longer item, so the scores are equal.
    An export that keeps the tokenizer's 512 would read the items' tails too."""
    if pooling != "pooler" and _st_major() < 6:
        pytest.skip("pooling=cls exports as a modular CrossEncoder (sentence-transformers 6)")
    from sentence_transformers import CrossEncoder

    source, _ = _saved_monobert(tmp_path, tiny_bert, pooling)
    bench_ranker = create_ranker("monobert", {"checkpoint": str(source)})
    tokenizer = bench_ranker.tokenizer
    assert len(tokenizer(LONG_QUERY, add_special_tokens=False)["input_ids"]) == 32
    lengths = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in LONG_ITEMS]
    assert min(lengths) > 32
    expected = bench_ranker.score_texts(LONG_QUERY, LONG_ITEMS)
    out = tmp_path / "exported"
    _export(source, out)
    model = CrossEncoder(str(out), device="cpu")
    assert model.max_length == 67
    got = model.predict([(LONG_QUERY, item) for item in LONG_ITEMS])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


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

    from rankers.families.crossjem.ranker import CrossJEMRanker

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
    from rankers.families.crossjem.ranker import CrossJEMRanker
    from rankers.families.monobert import MonoBERTRanker

    source, _ = _saved_monobert(tmp_path, tiny_bert, "pooler")
    monobert = MonoBERTRanker(MonoBERTRanker.Config.from_options({"checkpoint": str(source)}))
    EncoderExport = type(monobert).__mro__[1]  # EncoderRanker: the generic Hugging Face export
    with staged(tmp_path / "hf") as stage:
        EncoderExport.export(monobert, stage)
    with pytest.raises(RankerError, match="exported by 'monobert', not 'crossjem'"):
        CrossJEMRanker.from_exported(tmp_path / "hf")
    with pytest.raises(RankerError, match="no bench-ranker.json"):
        CrossJEMRanker.from_exported(tmp_path)


def _refused(*args: str) -> str:
    """The one error line of a refused ``bench export``, rich's wrapping undone."""
    result = runner.invoke(app, ["export", *args])
    assert result.exit_code == 2, result.output + repr(result.exception)
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_only_an_earlier_export_is_replaced(tmp_path: Path, tiny_bert: Path) -> None:
    source, _ = _saved_monobert(tmp_path, tiny_bert, "pooler")
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    for extra in ([], ["--overwrite"]):  # a folder bench did not write stays, --overwrite or not
        printed = _refused(str(source), str(out), *extra)
        assert f"{out}: exists, is not empty and is not an earlier export (no {EXPORT_FILE})" in (
            printed
        )
        assert _files(out) == {"mine.txt": b"keep"}
    marker = out / EXPORT_FILE
    for text, problem in [  # a damaged marker says what is wrong with it
        ("[1, 2]", "holds a JSON list, not an export's description"),
        ("{}", "damaged (no 'loads_with', which says how the folder loads)"),
        ('{"loads_with": "x"}', "damaged or written by an older bench (no 'files'"),
        ('{"loads_with": "x", "files": "mine.txt"}', "damaged or written by an older bench"),
        ('{"loads_w', "not valid JSON (Unterminated string"),
    ]:
        marker.write_text(text)
        printed = _refused(str(source), str(out), "--overwrite")
        assert f"{out}: is not an earlier export: {marker}: {problem}" in printed, text
        assert "no bench-export.json" not in printed
        assert _files(out) == {"mine.txt": b"keep", EXPORT_FILE: text.encode()}
    marker.unlink()
    empty = tmp_path / "empty"
    empty.mkdir()
    _export(source, empty)  # an empty folder holds nothing to lose
    assert f"{empty}: exists and is not empty: it holds an earlier export (pass --overwrite" in (
        _refused(str(source), str(empty))
    )
    written = _files(empty)
    assert sorted(json.loads(written[EXPORT_FILE])["files"]) == sorted(written)
    (empty / "config.json").write_text("stale")  # a file the export wrote is replaced
    _export(source, empty, "--overwrite")
    assert (empty / "config.json").read_text() != "stale"
    assert json.loads((empty / EXPORT_FILE).read_text())["source"]["name"] == "monobert"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_overwrite_refuses_an_export_holding_files_it_did_not_write(
    tmp_path: Path, tiny_bert: Path
) -> None:
    """`bench export M OUT; echo notes > OUT/notes.txt; bench export M OUT --overwrite` deleted
    notes.txt: an export replaces only the files its marker lists, and names anything else."""
    source, _ = _saved_monobert(tmp_path, tiny_bert, "pooler")
    out = tmp_path / "out"
    _export(source, out)
    (out / "notes.txt").write_text("notes")
    (out / "mine").mkdir()
    (out / "mine" / "a.txt").write_text("a")
    (out / "empty").mkdir()
    before = _files(out)
    printed = _refused(str(source), str(out), "--overwrite")
    assert (
        f"{out}: holds what the earlier export there did not write (empty/, mine/a.txt, "
        "notes.txt), which an export never deletes; move it away first"
    ) in printed
    assert _files(out) == before
    assert (out / "empty").is_dir()
    (out / "notes.txt").unlink()
    (out / "mine" / "a.txt").unlink()
    (out / "mine").rmdir()
    (out / "empty").rmdir()
    _export(source, out, "--overwrite")  # only its own files left: replaced


def test_the_model_and_results_roots_are_never_replaced(
    tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved, _ = _saved_monobert(tmp_path, tiny_bert, "pooler")
    results = tmp_path / "results"
    source = results / "models" / "toy" / "monobert" / "abc"
    source.parent.mkdir(parents=True)
    saved.rename(source)
    (source / "training.json").write_text("{}")
    run = results / "runs" / "toy" / "bm25" / "test-1"
    run.mkdir(parents=True)
    (run / "record.json").write_text("{}")
    other = tmp_path / "elsewhere" / "old-results"  # a results root nobody configured
    (other / "runs" / "toy" / "bm25" / "test-1").mkdir(parents=True)
    (other / "runs" / "toy" / "bm25" / "test-1" / "record.json").write_text("{}")
    configured = tmp_path / "configured"
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(configured))
    before = _files(tmp_path)
    cases = [
        (source, f"{source}: is the model folder being exported"),
        (results, f"{results}: holds the model folder being exported {source}"),
        (tmp_path, f"{tmp_path}: holds the model folder being exported {source}"),
        (source / "x", f"{source / 'x'}: lies inside the model folder being exported {source}"),
        (results / "out", f"{results / 'out'}: lies inside the results root {results}"),
        (other, f"{other}: is the results root"),
        # a folder above one: no marker of an export, so not replaced
        (other.parent, f"{other.parent}: exists, is not empty and is not an earlier export"),
        (other / "out", f"{other / 'out'}: lies inside the results root {other}"),
        (configured, f"{configured}: is the results root"),
        (configured / "out", f"{configured / 'out'}: lies inside the results root {configured}"),
    ]
    for out, message in cases:
        assert message in _refused(str(source), str(out), "--overwrite"), out
    elsewhere = tmp_path / "given"  # --results-dir is a results root too
    assert f"lies inside the results root {elsewhere}" in _refused(
        str(source), str(elsewhere / "out"), "--results-dir", str(elsewhere)
    )
    assert _files(tmp_path) == before  # nothing was written, moved or removed


def test_the_current_folder_is_refused_by_name(
    tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, _ = _saved_monobert(tmp_path, tiny_bert, "pooler")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert f"{here}: is the current folder" in _refused(str(source), ".")
    assert f"{tmp_path}: holds the current folder" in _refused(str(source), "..")
    assert "/: is the filesystem root" in _refused(str(source), "/")
    assert list(here.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[1, 2]", "holds a JSON list, not the object a ranker's save() writes"),
        ('{"name": "monob', "not valid JSON (Unterminated string"),
    ],
)
def test_a_damaged_ranker_json_is_named(tmp_path: Path, text: str, problem: str) -> None:
    source = tmp_path / "model"
    source.mkdir()
    (source / "ranker.json").write_text(text)
    printed = _refused(str(source), str(tmp_path / "out"))
    assert f"{source / 'ranker.json'}: {problem}" in printed
    assert not (tmp_path / "out").exists()


def _full_disk(path: str) -> OSError:
    return OSError(errno.ENOSPC, "No space left on device", path)


def _raise_safetensor_error(*args: object, **kwargs: object) -> None:
    from safetensors import SafetensorError

    raise SafetensorError(
        "Error while serializing: I/O error: No space left on device (os error 28)"
    )


@pytest.mark.parametrize("writer", ["description", "safetensors"])
def test_a_full_disk_names_out_and_keeps_the_earlier_export(
    tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    import transformers.modeling_utils

    import rankers.io.export

    source, _ = _saved_monobert(tmp_path, tiny_bert, "pooler")
    out = tmp_path / "out"
    _export(source, out)
    before = _files(out)

    def no_space(stage: Path, *args: object) -> None:
        raise _full_disk(str(stage / EXPORT_FILE))

    if writer == "description":
        monkeypatch.setattr(rankers.io.export, "write_description", no_space)
    else:
        monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", _raise_safetensor_error)
    printed = _refused(str(source), str(out), "--overwrite")
    assert f"{out}: the export was not written (" in printed
    assert "No space left on device" in printed
    assert "the earlier export there is as it was" in printed
    assert _files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["monobert-pooler", "out"]


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
