"""PyTerrier: a bench ranker as a re-ranking ``pt.Transformer`` gives `bench run`'s AP@10 inside
``pt.Experiment`` on the same lists; saved folders open as their ranker; bad frames are named."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.data.model import RankingSplit
from bench.data.splits import load_split
from bench.execution.runner import RunOptions, run
from bench.execution.terrier import frame_lists, rerank_frame, reranker
from rankers import create_ranker, open_ranker

pd = pytest.importorskip("pandas")


@pytest.fixture
def pt() -> Any:
    """PyTerrier, for the tests of the transformer itself (the frame's preparation and ranking
    need only pandas, so they run without it)."""
    return pytest.importorskip("pyterrier")


def _frame(split: RankingSplit) -> pd.DataFrame:
    """The split's candidate lists as a PyTerrier result frame, in first-stage order."""
    rows = [
        (cl.query.qid, cl.query.text, c.docid, c.text, float(-rank))
        for cl in split.lists
        for rank, c in enumerate(cl.candidates)
    ]
    return pd.DataFrame(rows, columns=["qid", "query", "docno", "text", "score"])


def _qrels(split: RankingSplit) -> pd.DataFrame:
    rows = [(q, d, g) for q, judged in split.qrels.items() for d, g in judged.items()]
    return pd.DataFrame(rows, columns=["qid", "docno", "label"])


def test_experiment_gives_bench_runs_ap_at_10(
    shared_data: Path, results_dir: Path, pt: Any
) -> None:
    """Zero-shot DPR on semeval16b test (which has candidates of identical text, so tied
    scores): the same AP@10 from pt.Experiment as from `bench run`."""
    from ir_measures import AP

    split = load_split("semeval16b", "test", shared_data)
    record = run(RunOptions("dpr", "semeval16b", data_dir=shared_data, progress=False, warmup=1))
    frame = _frame(split)
    topics = frame[["qid", "query"]].drop_duplicates()
    pipeline = pt.Transformer.from_df(frame) >> reranker("dpr", {"model": "minilm-l6"})
    table = pt.Experiment([pipeline], topics, _qrels(split), eval_metrics=[AP @ 10])
    assert table["AP@10"].iloc[0] == pytest.approx(record.metrics["AP@10"], abs=1e-12)


def test_ranks_follow_the_scores_and_the_harness_tie_rule(pt: Any) -> None:
    frame = pd.DataFrame(
        {
            "qid": ["q1", "q1", "q1", "q2", "q2"],
            "query": ["sort a list"] * 3 + ["java"] * 2,
            "docno": ["b", "c", "a", "e", "d"],
            "text": ["sort a list", "python snake", "sort a list", "tea", "java code"],
        }
    )
    out = reranker("bm25").transform(frame)
    assert list(out["qid"]) == ["q1", "q1", "q1", "q2", "q2"]
    # "a" and "b" tie (same text): docno ascending; "c" and "e" share no query term
    assert list(out["docno"]) == ["a", "b", "c", "d", "e"]
    assert list(out["rank"]) == [0, 1, 2, 0, 1]
    assert out["ranker_score"].iloc[0] == out["ranker_score"].iloc[1] > out["ranker_score"].iloc[2]
    assert list(out["score"]) == [3.0, 2.0, 1.0, 2.0, 1.0]  # as `bench run` writes its run file


def test_a_saved_folder_opens_as_its_ranker(tiny_bert: Path, tmp_path: Path, pt: Any) -> None:
    ranker = create_ranker("monobert", {"model": str(tiny_bert)})
    ranker.save(tmp_path / "saved")
    frame = pd.DataFrame(
        {"qid": ["q"] * 3, "query": ["sort list"] * 3, "docno": list("xyz")}
        | {"text": ["sort the list", "java", "python list sort"]}
    )
    expected = ranker.score(frame_lists(frame).lists)[0]
    opened = open_ranker(tmp_path / "saved")
    assert opened.name == "monobert"
    got = reranker(tmp_path / "saved").transform(frame).set_index("docno")["ranker_score"]
    np.testing.assert_allclose([got[d] for d in "xyz"], expected, atol=1e-6)


def test_a_frame_without_text_is_named() -> None:
    frame = pd.DataFrame({"qid": ["q"], "query": ["x"], "docno": ["d"]})
    with pytest.raises(ValueError, match="lacks column\\(s\\) text .*pt.text.get_text"):
        frame_lists(frame)


def test_missing_texts_are_named_and_ranked_last_never_scored_as_words(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What a failed text lookup leaves (None, NaN, pandas' NA) is no text: the ranker never
    sees the words "None" or "nan" (BM25 would match the query "nan bread" on them), the rows
    come last in their query, unscored, docno ascending, and a warning names them."""
    frame = pd.DataFrame(
        {
            "qid": ["q1", "q1", "q1", "q1", "q2", "q2"],
            "query": ["nan bread none"] * 4 + [None, None],
            "docno": ["d4", "d1", "d2", "d3", "e1", "e2"],
            "text": [None, "naan bread recipe", math.nan, "flat bread", "a", pd.NA],
        }
    )
    with caplog.at_level(logging.WARNING):
        parsed = frame_lists(frame)
    assert [(cl.query.qid, cl.docids) for cl in parsed.lists] == [("q1", ["d1", "d3"])]
    assert parsed.missing == [("q1", "d4"), ("q1", "d2"), ("q2", "e1"), ("q2", "e2")]
    assert "4 row(s) without a query or candidate text" in caplog.text
    assert "q1/d4, q1/d2, q2/e1, q2/e2; they are not scored and are ranked last" in caplog.text
    out = rerank_frame(create_ranker("bm25"), frame)
    assert list(zip(out["qid"], out["docno"], out["rank"], out["score"], strict=True)) == [
        ("q1", "d1", 0, 4.0),
        ("q1", "d3", 1, 3.0),
        ("q1", "d2", 2, 2.0),
        ("q1", "d4", 3, 1.0),
        ("q2", "e1", 0, 2.0),
        ("q2", "e2", 1, 1.0),
    ]
    assert out["ranker_score"].iloc[:2].notna().all() and out["ranker_score"].iloc[2:].isna().all()
