"""Raw per-call timings kept in latency summaries; pooling and throughput over processes."""

from __future__ import annotations

import pytest

from bench.core.timing import aggregate_throughput, pool, summarise
from bench.latency.processes import throughput
from bench.latency.records import LatencyRow


def test_summary_keeps_raw_calls() -> None:
    out = summarise([0.1, 0.4], [1, 2], [10, 20]).to_dict()
    assert out["call_s"] == [0.1, 0.4]
    assert out["call_queries"] == [1, 2]
    assert out["call_candidates"] == [10, 20]
    assert out["call_device_s"] == []


def test_pooling_two_records_equals_summarising_all_calls() -> None:
    a = summarise([0.1, 0.3], [1, 1], [10, 10]).to_dict()
    b = summarise([0.2, 0.6, 0.5], [1, 2, 1], [10, 20, 10]).to_dict()
    pooled = pool([a, b])
    whole = summarise([0.1, 0.3, 0.2, 0.6, 0.5], [1, 1, 1, 2, 1], [10, 10, 10, 20, 10])
    assert pooled == whole
    assert pooled.p50_ms == pytest.approx(300.0)  # per query: 100, 300, 200, 300, 500
    assert pooled.calls == 5 and pooled.candidates == 60


def test_a_record_without_raw_values_still_reads_but_cannot_be_pooled() -> None:
    old = summarise([0.1], [1], [10]).to_dict()
    for key in ("call_s", "call_queries", "call_candidates", "call_device_s"):
        del old[key]
    row = LatencyRow.from_json(
        {
            "label": "x",
            "ranker": "bm25",
            "column": "bm25",
            "family": "lexical",
            "n": 10,
            "batch_queries": 1,
            "options": {},
            "weights": "",
            "dtype": "float32",
            "latency": old,
        }
    )
    assert row.latency["p50_ms"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="summary 0 keeps no raw per-call timings"):
        pool([row.latency])


def test_throughput_of_concurrent_processes_is_all_pairs_over_the_longest_wall_time() -> None:
    a = summarise([1.0, 1.0], [1, 1], [100, 100]).to_dict()  # 200 pairs in 2 s
    b = summarise([1.0, 1.5], [1, 1], [100, 100]).to_dict()  # 200 pairs in 2.5 s
    out = aggregate_throughput([a, b])
    assert out == {
        "processes": 2.0,
        "wall_s": 2.5,
        "candidates_per_s": 160.0,
        "queries_per_s": 1.6,
    }


def test_throughput_is_not_the_sum_of_each_process_rate() -> None:
    """Two processes of 100 pairs each, one done in 1 s and one in 2 s: 200 pairs in 2 s of
    wall time is 100 pairs/s, where a sum of their own rates would claim 150."""
    spans = [
        {"span_s": 1.0, "candidates": 100, "queries": 4, "start_unix": 10.0},
        {"span_s": 2.0, "candidates": 100, "queries": 6, "start_unix": 10.25},
    ]
    out = throughput(spans)
    assert out["candidates_per_s"] == 100.0 and out["queries_per_s"] == 5.0
    assert out["per_process_candidates_per_s"] == [100.0, 50.0]
    assert (out["wall_s"], out["candidates"], out["processes"], out["start_skew_s"]) == (
        2.0,
        200,
        2,
        0.25,
    )


def test_a_process_without_calls_counts_in_the_processes_not_in_the_rates() -> None:
    """More processes than calls: a rank with an empty shard has no rate of its own and adds
    nothing to the pairs, but it was one of the processes."""
    spans = [
        {"span_s": 0.5, "candidates": 30, "queries": 3, "start_unix": 1.0},
        {"span_s": 0.0, "candidates": 0, "queries": 0, "start_unix": 1.0},
    ]
    out = throughput(spans)
    assert (out["processes"], out["candidates"], out["wall_s"]) == (2, 30, 0.5)
    assert out["candidates_per_s"] == 60.0 and out["per_process_candidates_per_s"] == [60.0, None]
