"""PyTerrier: a bench ranker as a re-ranking ``pt.Transformer`` gives `bench run`'s AP@10 inside
``pt.Experiment`` on the same lists; saved folders open as their ranker; bad frames are named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.data.model import RankingSplit
from bench.data.splits import load_split
from bench.execution.runner import RunOptions, run
from bench.execution.terrier import frame_lists, reranker
from rankers import create_ranker, open_ranker

pt = pytest.importorskip("pyterrier")
pd = pytest.importorskip("pandas")


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


def test_experiment_gives_bench_runs_ap_at_10(shared_data: Path, results_dir: Path) -> None:
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


def test_ranks_follow_the_scores_and_the_harness_tie_rule() -> None:
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


def test_a_saved_folder_opens_as_its_ranker(tiny_bert: Path, tmp_path: Path) -> None:
    ranker = create_ranker("monobert", {"model": str(tiny_bert)})
    ranker.save(tmp_path / "saved")
    frame = pd.DataFrame(
        {"qid": ["q"] * 3, "query": ["sort list"] * 3, "docno": list("xyz")}
        | {"text": ["sort the list", "java", "python list sort"]}
    )
    expected = ranker.score(frame_lists(frame))[0]
    opened = open_ranker(tmp_path / "saved")
    assert opened.name == "monobert"
    got = reranker(tmp_path / "saved").transform(frame).set_index("docno")["ranker_score"]
    np.testing.assert_allclose([got[d] for d in "xyz"], expected, atol=1e-6)


def test_a_frame_without_text_is_named() -> None:
    frame = pd.DataFrame({"qid": ["q"], "query": ["x"], "docno": ["d"]})
    with pytest.raises(ValueError, match="lacks column\\(s\\) text .*pt.text.get_text"):
        frame_lists(frame)
