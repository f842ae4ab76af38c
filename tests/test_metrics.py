"""bench.results.metrics against qrels and runs small enough to score by hand.

AP@k is trec_eval's map_cut_k: precision at each relevant rank <= k, summed, divided by the number
of relevant documents in the qrels (not by min(R, k)). nDCG uses trec_eval's linear gains
(gain = grade) and discount log2(rank + 1), with the ideal ranking built from the qrels.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.data.model import Candidate, CandidateList, Query
from bench.results.metrics import DEFAULT_MEASURES, build_run, evaluate, parse, rank_order

EXACT = 1e-9


def ranked(docids: list[str]) -> dict[str, float]:
    """A run for one query that ranks ``docids`` in the given order (distinct scores)."""
    return {d: float(len(docids) - i) for i, d in enumerate(docids)}


def clist(qid: str, docids: list[str]) -> CandidateList:
    candidates = tuple(Candidate(d, f"text {d}") for d in docids)
    return CandidateList(Query(qid, f"query {qid}"), candidates)


# q1: 3 relevant at ranks 2, 7, 11 of 12; q2: 1 relevant at rank 7; q3: 1 relevant at rank 1;
# q4: judged but absent from the run.
Q1 = ["n1", "r1", "n2", "n3", "n4", "n5", "r2", "n6", "n7", "n8", "r3", "n9"]
Q2 = ["m1", "m2", "m3", "m4", "m5", "m6", "s1", "m7"]
Q3 = ["t1", "u1", "u2"]
BINARY_QRELS = {
    "q1": {"r1": 1, "r2": 1, "r3": 1, "n1": 0, "n2": 0},
    "q2": {"s1": 1, "m1": 0},
    "q3": {"t1": 1},
    "q4": {"v1": 1},
}
BINARY_RUN = {"q1": ranked(Q1), "q2": ranked(Q2), "q3": ranked(Q3)}

PER_QUERY = {
    "q1": {
        "AP@5": (1 / 2) / 3,
        "AP@10": (1 / 2 + 2 / 7) / 3,  # 11/42
        "AP": (1 / 2 + 2 / 7 + 3 / 11) / 3,  # 163/462
        "RR@5": 1 / 2,
        "RR@10": 1 / 2,
        "P@1": 0.0,
    },
    "q2": {"AP@5": 0.0, "AP@10": 1 / 7, "AP": 1 / 7, "RR@5": 0.0, "RR@10": 1 / 7, "P@1": 0.0},
    "q3": {"AP@5": 1.0, "AP@10": 1.0, "AP": 1.0, "RR@5": 1.0, "RR@10": 1.0, "P@1": 1.0},
    "q4": {"AP@5": 0.0, "AP@10": 0.0, "AP": 0.0, "RR@5": 0.0, "RR@10": 0.0, "P@1": 0.0},
}
MEANS = {  # over all 4 qrels queries, q4 counting 0
    "AP@5": 7 / 24,
    "AP@10": 59 / 168,
    "AP": 691 / 1848,
    "RR@5": 3 / 8,
    "RR@10": 23 / 56,
    "P@1": 1 / 4,
}


def test_binary_measures_per_query_and_mean() -> None:
    measures = list(MEANS)
    ev = evaluate(BINARY_QRELS, BINARY_RUN, measures=measures)
    assert set(ev.per_query) == {"q1", "q2", "q3", "q4"}
    for qid, expected in PER_QUERY.items():
        for m, value in expected.items():
            assert ev.per_query[qid][m] == pytest.approx(value, abs=EXACT), (qid, m)
    for m, value in MEANS.items():
        assert ev.aggregate[m] == pytest.approx(value, abs=EXACT), m


def test_query_missing_from_run_counts_zero_in_the_mean() -> None:
    only_q3 = evaluate({"q3": {"t1": 1}, "q4": {"v1": 1}}, {"q3": ranked(Q3)}, measures=["AP"])
    assert only_q3.per_query["q4"] == {"AP": 0.0}
    assert only_q3.aggregate["AP"] == pytest.approx(0.5, abs=EXACT)  # (1 + 0) / 2, not 1


def test_run_queries_without_qrels_are_ignored() -> None:
    ev = evaluate({"q3": {"t1": 1}}, {"q3": ranked(Q3), "extra": ranked(["t1"])}, measures=["AP"])
    assert set(ev.per_query) == {"q3"}
    assert ev.aggregate["AP"] == 1.0


def test_empty_run_scores_zero() -> None:
    ev = evaluate(BINARY_QRELS, {}, measures=["AP@10", "RR@10"])
    assert ev.aggregate == {"AP@10": 0.0, "RR@10": 0.0}


# Graded: a=2, b=0, c=1, d=2 ranked b, a, c, d; e=1 is judged but not retrieved.
GRADED_QRELS = {"q": {"a": 2, "b": 0, "c": 1, "d": 2, "e": 1}}
GRADED_RUN = {"q": ranked(["b", "a", "c", "d"])}
# DCG@10  = 0/log2(2) + 2/log2(3) + 1/log2(4) + 2/log2(5)
#         = 0 + 1.2618595 + 0.5 + 0.8613531                          = 2.6232126
# IDCG@10 = 2/log2(2) + 2/log2(3) + 1/log2(4) + 1/log2(5)   (gains 2,2,1,1 from the qrels)
#         = 2 + 1.2618595 + 0.5 + 0.4306766                          = 4.1925361
# nDCG@10 = 2.6232126 / 4.1925361                                     = 0.6256864
DCG = 2 / math.log2(3) + 1 / math.log2(4) + 2 / math.log2(5)
IDCG = 2 + 2 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(5)


def test_ndcg_graded_linear_gains() -> None:
    ev = evaluate(GRADED_QRELS, GRADED_RUN, measures=["nDCG@10"])
    assert abs(DCG / IDCG - 0.6256864) < 1e-7
    assert ev.aggregate["nDCG@10"] == pytest.approx(DCG / IDCG, abs=EXACT)


def test_relevance_level_two_binarises_ap_but_not_ndcg() -> None:
    measures = ["AP", "RR@10", "P@1", "nDCG@10"]
    level1 = evaluate(GRADED_QRELS, GRADED_RUN, relevance_level=1, measures=measures).aggregate
    level2 = evaluate(GRADED_QRELS, GRADED_RUN, relevance_level=2, measures=measures).aggregate
    # level 1: relevant a, c, d, e (R=4) at ranks 2, 3, 4 -> (1/2 + 2/3 + 3/4) / 4 = 23/48
    assert level1["AP"] == pytest.approx(23 / 48, abs=EXACT)
    # level 2: relevant a, d (R=2) at ranks 2, 4; c (grade 1) no longer counts -> (1/2 + 2/4) / 2
    assert level2["AP"] == pytest.approx(0.5, abs=EXACT)
    assert level1["RR@10"] == level2["RR@10"] == pytest.approx(0.5, abs=EXACT)
    assert level1["P@1"] == level2["P@1"] == 0.0
    # nDCG keeps the grades: grade 1 still contributes, identical at both levels
    assert level1["nDCG@10"] == level2["nDCG@10"] == pytest.approx(DCG / IDCG, abs=EXACT)


def test_parse_adds_rel_only_to_binary_measures() -> None:
    assert str(parse("AP@10", 2)) == "AP(rel=2)@10"
    assert str(parse("RR@5", 2)) == "RR(rel=2)@5"
    assert str(parse("nDCG@10", 2)) == "nDCG@10"
    assert str(parse("AP@10", 1)) == "AP@10"


# Ties: d2 (relevant) and d1 share the top score; d2 comes first in the input. The harness rule
# (score desc, then docid asc) ranks d1 first -> AP = 1/2. Input order, or trec_eval's own rule
# (docid descending), would put d2 first -> AP = 1.
TIE_DOCS = ["d2", "d1", "d3"]
TIE_SCORES = [1.0, 1.0, 0.5]
TIE_QRELS = {"q": {"d2": 1, "d1": 0, "d3": 0}}


def test_rank_order_breaks_ties_by_docid_ascending() -> None:
    assert rank_order(TIE_DOCS, TIE_SCORES) == [1, 0, 2]


def test_tie_break_changes_ap_through_build_run() -> None:
    run = build_run([clist("q", TIE_DOCS)], [np.array(TIE_SCORES)])
    assert run == {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
    ev = evaluate(TIE_QRELS, run, measures=["AP", "RR@10", "P@1"])
    assert ev.aggregate == pytest.approx({"AP": 0.5, "RR@10": 0.5, "P@1": 0.0}, abs=EXACT)


def test_tie_break_applies_to_raw_runs_too() -> None:
    """A run read from disk with tied scores obeys the same rule, for every measure alike."""
    raw = {"q": dict(zip(TIE_DOCS, TIE_SCORES, strict=True))}
    ev = evaluate(TIE_QRELS, raw, measures=["AP", "RR@10", "P@1", "nDCG@10"])
    assert ev.aggregate == pytest.approx(
        {"AP": 0.5, "RR@10": 0.5, "P@1": 0.0, "nDCG@10": 1 / math.log2(3)}, abs=EXACT
    )


def test_build_run_orders_by_score_and_keeps_best_duplicate() -> None:
    lists = [clist("a", ["x", "y", "z"]), clist("b", ["p", "q", "p"])]
    run = build_run(lists, [np.array([0.1, 0.9, 0.5]), np.array([0.1, 0.5, 0.9])])
    assert run["a"] == {"y": 3.0, "z": 2.0, "x": 1.0}
    assert list(run["a"]) == ["y", "z", "x"]
    # p's best occurrence (0.9, rank 1) wins; its later duplicate is dropped
    assert run["b"] == {"p": 3.0, "q": 2.0}


def test_build_run_rejects_nan_and_length_mismatch() -> None:
    with pytest.raises(ValueError, match="NaN"):
        build_run([clist("a", ["x", "y"])], [np.array([0.3, np.nan])])
    with pytest.raises(ValueError, match="2 scores for 3 candidates"):
        build_run([clist("a", ["x", "y", "z"])], [np.array([0.3, 0.1])])
    with pytest.raises(ValueError, match="NaN"):
        evaluate({"q": {"x": 1}}, {"q": {"x": float("nan")}})


def test_default_measures_all_present() -> None:
    ev = evaluate(BINARY_QRELS, BINARY_RUN)
    assert list(ev.aggregate) == list(DEFAULT_MEASURES)
    assert all(list(v) == list(DEFAULT_MEASURES) for v in ev.per_query.values())
