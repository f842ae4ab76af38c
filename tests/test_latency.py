"""Latency protocol pieces, without timing assertions."""

from __future__ import annotations

import numpy as np
import pytest
from toymodels import CountingRanker

from bench.core.timing import LatencyTracker, summarise
from bench.data.batching import batches
from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from bench.execution.scoring import score_split


def test_summary_percentiles_and_throughput_from_known_calls() -> None:
    # 4 calls of 1 query each: 10, 20, 30, 40 ms; 5 candidates per call.
    s = summarise([0.010, 0.020, 0.030, 0.040], [1, 1, 1, 1], [5, 5, 5, 5])
    assert s.p50_ms == pytest.approx(25.0)  # numpy linear interpolation between 20 and 30
    assert s.p95_ms == pytest.approx(38.5)  # 30 + 0.85 * 10
    assert s.mean_ms == pytest.approx(25.0)
    assert s.std_ms == pytest.approx(np.std([10, 20, 30, 40], ddof=1))
    assert s.total_s == pytest.approx(0.1)
    # throughput = volume / total time, not a mean of per-call rates
    assert s.candidates_per_s == pytest.approx(200.0)
    assert s.queries_per_s == pytest.approx(40.0)


def test_per_query_latency_divides_batched_calls() -> None:
    s = summarise([0.040, 0.080], [4, 8], [40, 80])
    assert s.p50_ms == pytest.approx(10.0)
    assert s.queries == 12 and s.candidates == 120


def test_tracker_records_each_call() -> None:
    tracker = LatencyTracker("cpu")
    for _ in range(3):
        with tracker.track(queries=2, candidates=7):
            sum(range(1000))
    assert tracker.queries == [2, 2, 2]
    s = tracker.summary(note="x")
    assert s.calls == 3 and s.candidates == 21
    assert s.to_dict()["note"] == "x"
    assert s.device_mean_ms is None


def test_tracker_rejects_empty() -> None:
    with pytest.raises(ValueError, match="no tracked calls to summarise"):
        LatencyTracker().summary()
    with (
        pytest.raises(ValueError, match="a tracked call scores at least one query"),
        LatencyTracker().track(queries=0),
    ):
        pass
    with pytest.raises(ValueError, match="a tracked call scores at least one query"):
        LatencyTracker().record(0.1, queries=0)


def _split(n: int) -> RankingSplit:
    lists = [
        CandidateList(Query(f"q{i}", "x"), (Candidate("a", "a"), Candidate("b", "b")))
        for i in range(n)
    ]
    return RankingSplit("toy", "test", lists, {f"q{i}": {"a": 1} for i in range(n)})


def test_warmup_calls_are_not_recorded() -> None:
    ranker = CountingRanker()
    scores, tracker = score_split(ranker, _split(6), batch_queries=1, warmup=2, progress=False)
    assert len(ranker.calls) == 2 + 6  # warm-up calls happened ...
    assert len(tracker.call_s) == 6  # ... but only the scoring pass was timed
    assert len(scores) == 6


def test_batches_keep_lists_whole() -> None:
    split = _split(5)
    got = [[cl.query.qid for cl in b] for b in batches(split.lists, 2)]
    assert got == [["q0", "q1"], ["q2", "q3"], ["q4"]]
    ranker = CountingRanker()
    _, tracker = score_split(ranker, split, batch_queries=2, warmup=0, progress=False)
    assert tracker.queries == [2, 2, 1]
    with pytest.raises(ValueError, match="batch size must be >= 1, not 0"):
        list(batches(split.lists, 0))
