"""The sentence-transformers CrossEncoder ranker: predict's scores from its two halves, honest
about an untrained head, and refused by `bench run` when it would score with one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.data.model import Candidate, CandidateList, Query
from bench.latency.plan import checkpoint_for
from rankers import RankerError, create_ranker, get_ranker_class
from rankers.families.stcross import STCrossEncoderRanker


def _lists() -> list[CandidateList]:
    texts = ["how to sort a list in python", "sort", "java hash map", "a b c d e f g h", "x"]
    return [
        CandidateList(
            Query("q1", "python list sort"),
            tuple(Candidate(f"a{i}", t) for i, t in enumerate(texts)),
        ),
        CandidateList(
            Query("q2", "hash map"), tuple(Candidate(f"b{i}", t) for i, t in enumerate(texts[:3]))
        ),
    ]


def test_registered_as_an_early_interaction_ranker() -> None:
    cls = get_ranker_class("st-crossencoder")
    assert cls is STCrossEncoderRanker and cls.family == "early" and not cls.trainable
    assert cls.host_step is not None


def test_prepared_halves_give_predicts_scores(tiny_bert: Path) -> None:
    ranker = create_ranker("st-crossencoder", {"model": str(tiny_bert), "batch_size": 3})
    lists = _lists()
    scores = ranker.score(lists)
    halves = ranker.score_prepared(ranker.prepare_scoring(lists))
    assert [len(s) for s in scores] == [5, 3]
    for a, b in zip(scores, halves, strict=True):
        np.testing.assert_array_equal(a, b)
    pairs = [(cl.query.text, t) for cl in lists for t in cl.texts]
    predicted = ranker.model.predict(pairs, batch_size=3, show_progress_bar=False)
    np.testing.assert_array_equal(np.concatenate(scores), predicted)
    assert ranker.compute_dtype() == "float32"


def test_the_peer_runs_in_the_precision_asked(tiny_bert: Path) -> None:
    """``dtype`` casts the CrossEncoder once (what a user does with ``.to(torch.bfloat16)``), so
    the peer row is timed in the precision of the rows beside it; its scores stay those of the
    float32 model within bfloat16's rounding."""
    import torch

    lists = _lists()
    full = create_ranker("st-crossencoder", {"model": str(tiny_bert), "dtype": "float32"})
    half = create_ranker("st-crossencoder", {"model": str(tiny_bert), "dtype": "bfloat16"})
    assert {p.dtype for p in half.model.parameters()} == {torch.bfloat16}
    assert half.compute_dtype() == "bfloat16 weights" and full.compute_dtype() == "float32"
    for a, b in zip(full.score(lists), half.score(lists), strict=True):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_allclose(a, b, atol=0.02)
    with pytest.raises(RankerError, match="option dtype='int8'"):
        create_ranker("st-crossencoder", {"model": str(tiny_bert), "dtype": "int8"})


def test_untrained_head_is_reported(tiny_bert: Path, tmp_path: Path) -> None:
    bare = create_ranker("st-crossencoder", {"model": str(tiny_bert)})
    assert bare.untrained_weights() == f"a new sequence-classification head on {tiny_bert}"
    assert bare.weights_note(None) == (
        "untrained head on the pre-trained encoder (same cost as trained)"
    )
    # a folder with a trained sequence-classification head scores as it is
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig.from_pretrained(tiny_bert, num_labels=1)
    trained = tmp_path / "trained"
    BertForSequenceClassification(config).save_pretrained(trained)
    ranker = create_ranker("st-crossencoder", {"model": str(trained)})
    assert ranker.untrained_weights() is None
    assert ranker.weights_note(None) == f"trained ({trained})"
    # a monoBERT checkpoint lends its encoder; the head stays new
    (tmp_path / "monobert" / "encoder").mkdir(parents=True)
    for f in tiny_bert.iterdir():
        (tmp_path / "monobert" / "encoder" / f.name).write_bytes(f.read_bytes())
    borrowed = create_ranker("st-crossencoder", {"checkpoint": str(tmp_path / "monobert")})
    assert borrowed.untrained_weights() is not None
    assert borrowed.weights_note(str(tmp_path / "monobert")).startswith(
        f"untrained head on the encoder of {tmp_path / 'monobert'}"
    )
    assert len(borrowed.score(_lists()[:1])[0]) == 5
    with pytest.raises(RankerError, match="has no encoder/ folder"):
        create_ranker("st-crossencoder", {"checkpoint": str(tmp_path)}).untrained_weights()


def test_latency_benchmark_lends_it_monoberts_checkpoint() -> None:
    assert checkpoint_for("st-crossencoder", {"monobert": "/m"}) == "/m"
    assert checkpoint_for("st-crossencoder", {"monobert": "/m", "st-crossencoder": "/s"}) == "/s"
    assert checkpoint_for("crossjem", {"monobert": "/m"}) is None


def test_bench_run_refuses_an_untrained_head(shared_data: Path, results_dir: Path) -> None:
    result = CliRunner().invoke(
        app, ["run", "-r", "st-crossencoder", "-d", "wikiqa", "--data-dir", str(shared_data)]
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())  # the console wraps long lines
    assert text.startswith("error: st-crossencoder would score with a new sequence-classification")
    assert "cannot train it" in text and "--fit" not in text
    assert "Traceback" not in result.output
    assert not list(results_dir.glob("runs/**/record.json"))
