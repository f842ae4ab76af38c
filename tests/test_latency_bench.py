"""Latency benchmark protocol pieces (no timing assertions): lists, token statistics, warm-up,
best-of selection, speed-ups, the table, check records, and one tiny end-to-end run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.checks import OK, run_checks
from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from bench.efficiency import EncoderShape
from bench.latency_bench import (
    BenchOptions,
    LatencyRecord,
    LatencyRow,
    ListBlock,
    bm25_lists,
    build_latency_table,
    check_records,
    entries_for,
    list_tokens,
    load_latency_records,
    mark_best,
    merge_records,
    render_latency,
    run_benchmark,
    speedup_summary,
    time_interleaved,
    time_scoring,
    time_tokeniser,
    token_summary,
)
from rankers.base import Ranker
from rankers.encoders import write_tiny_bert

DOCS = {
    "d1": "python list sort",
    "d2": "python list",
    "d3": "sort",
    "d4": "java map",
    "d5": "rust vector",
    "d6": "go slice",
    "d7": "haskell monad",
    "d8": "ruby hash",
}


def _split() -> RankingSplit:
    # two queries whose own lists are short; the collection is every distinct candidate
    items = tuple(Candidate(d, t) for d, t in DOCS.items())
    lists = [
        CandidateList(Query("q1", "python list sort"), items[:4]),
        CandidateList(Query("q2", "ruby hash"), items[4:]),
    ]
    return RankingSplit("toy", "test", lists, {"q1": {"d1": 1}, "q2": {"d8": 1}}, checksum="c")


def test_bm25_lists_have_exactly_n_items_in_bm25_order() -> None:
    out = bm25_lists(_split(), 3)
    assert [len(cl) for cl in out.lists] == [3, 3]
    # q1 matches d1 on 3 terms, d2 on 2, d3 on 1; every term is rare, so that is BM25's order
    assert out.lists[0].docids == ["d1", "d2", "d3"]
    assert out.lists[1].docids[0] == "d8"  # the only document with "ruby" or "hash"
    for cl in out.lists:
        scores = [c.score for c in cl.candidates]
        assert scores == sorted(scores, reverse=True)
        assert all(c.text == DOCS[c.docid] for c in cl.candidates)
    assert bm25_lists(_split(), 2, queries=1).qrels == {"q1": {"d1": 1}}


def test_bm25_lists_reject_n_above_the_collection() -> None:
    with pytest.raises(ValueError, match="collection has 8 distinct items, fewer than N=9"):
        bm25_lists(_split(), 9)


class WordTokenizer:
    """Whitespace tokenizer with fixed ids: lets the token statistics be computed by hand."""

    vocab = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "q": 9}

    def __call__(self, texts, add_special_tokens, truncation, max_length):  # noqa: ANN001
        return {"input_ids": [[self.vocab[w] for w in t.split()][:max_length] for t in texts]}


def test_list_tokens_union_compression_and_groups() -> None:
    cands = tuple(Candidate(f"d{i}", t) for i, t in enumerate(["a b c", "b c d e", "a e", "c"]))
    cl = CandidateList(Query("q", "q q"), cands)
    [tok] = list_tokens(WordTokenizer(), [cl], max_query_len=32, max_item_len=3, union_len=4)
    assert tok.query_len == 2
    assert tok.item_lens == (3, 3, 2, 1)  # "b c d e" cut to 3
    assert (tok.union.union, tok.union.item_tokens) == (5, 9)  # {a, b, c, d, e}
    assert tok.union.compression == pytest.approx(3 * 4 / 5)
    # packing in token order: [1,2,3] [1,5] [2,3,4] [3] -> {a,b,c,e} and {b,c,d}
    assert sorted(tok.group_unions) == [3, 4]
    shape = EncoderShape(layers=2, hidden=4, intermediate=16)
    summary = token_summary([tok], shape)
    assert summary["monobert_tokens_per_query"] == 8 + 8 + 7 + 6  # L_q + L_k + 3 per item
    assert summary["crossjem_tokens_per_query"] == (2 + 4 + 3) + (2 + 3 + 3)
    assert summary["union_mean"] == 5 and summary["groups_mean"] == 2


class CountingRanker(Ranker):
    name = "counting"
    family = "sparse"

    def __init__(self, tag: str = "", log: list[str] | None = None) -> None:
        super().__init__()
        self.calls: list[int] = []
        self.tag, self.log = tag, log if log is not None else []

    def score(self, lists):  # type: ignore[override]
        self.calls.append(len(lists))
        self.log.append(self.tag + lists[0].query.qid)
        return [np.zeros(len(cl)) for cl in lists]


def _lists(n: int) -> list[CandidateList]:
    return [CandidateList(Query(f"q{i}", "x"), (Candidate("a", "a"),)) for i in range(n)]


def test_warmup_calls_are_not_timed() -> None:
    ranker = CountingRanker()
    tracker = time_scoring(ranker, _lists(5), batch_queries=2, warmup=4, repeats=3)
    assert len(ranker.calls) == 4 + 3 * 3  # 4 warm-up calls, then 3 passes of 3 calls (2+2+1)
    assert len(tracker.call_s) == 9
    assert tracker.queries == [2, 2, 1] * 3


def test_interleaved_rankers_take_turns_after_their_warmup() -> None:
    log: list[str] = []
    a, b = CountingRanker("a", log), CountingRanker("b", log)
    trackers = time_interleaved([a, b], _lists(2), batch_queries=1, warmup=1, repeats=2)
    # warm-up (untimed): a then b on q0; timed: each call both rankers, the order rotating
    assert log == ["aq0", "bq0", "aq0", "bq0", "bq1", "aq1", "aq0", "bq0", "bq1", "aq1"]
    assert [len(t.call_s) for t in trackers] == [4, 4]


def test_tokeniser_timing_counts_tokens_of_one_pass() -> None:
    seen: list[int] = []

    def tokenise(lists):  # noqa: ANN001, ANN202
        seen.append(len(lists))
        return 10 * len(lists)

    tracker, per_query = time_tokeniser(tokenise, _lists(3), batch_queries=1, repeats=2)
    assert len(seen) == 1 + 6 and len(tracker.call_s) == 6
    assert per_query == 10.0


def test_entries_cover_both_dual_modes_and_batch_sizes() -> None:
    entries = entries_for(
        ["bm25", "dpr", "monobert", "st-crossencoder", "crossjem"],
        "wikiqa",
        30,
        1,
        monobert_batch_sizes=(32, "all"),
        peer_batch_sizes=(32, 64),
    )
    assert [e.label for e in entries] == [
        "bm25",
        "dpr (precomputed)",
        "dpr (query time)",
        "monobert (batch_size=32)",
        "monobert (batch_size=30)",
        "st-crossencoder (batch_size=32)",
        "st-crossencoder (batch_size=64)",
        "crossjem",
    ]
    assert [e.options["precompute"] for e in entries[1:3]] == [True, False]
    crossjem = entries[-1]
    assert crossjem.options["batch_queries"] == 1 and crossjem.options["union_len"] == 272


def _row(label: str, column: str, n: int, p50: float, mean: float) -> LatencyRow:
    return LatencyRow(
        label=label,
        ranker=column,
        column=column,
        family="early",
        n=n,
        batch_queries=1,
        options={},
        weights="untrained",
        dtype="float32",
        latency={"p50_ms": p50, "mean_ms": mean},
        tokenisation=None,
        tokens={},
    )


def _record() -> LatencyRecord:
    rows = [
        _row("bm25", "bm25", 30, 0.5, 0.5),
        _row("monobert (batch_size=32)", "monobert", 30, 40.0, 42.0),
        _row("monobert (batch_size=64)", "monobert", 30, 30.0, 33.0),
        _row("crossjem", "crossjem", 30, 10.0, 11.0),
        _row("monobert (batch_size=32)", "monobert", 100, 90.0, 100.0),
        _row("crossjem", "crossjem", 100, 20.0, 25.0),
    ]
    rows[0].family, rows[3].family, rows[5].family = "sparse", "joint", "joint"
    mark_best(rows)
    blocks = [
        ListBlock(
            n, 5, {"cost": {"predicted_speedup": p, "token_ratio": 2.0}, "compression_mean": c}
        )
        for n, p, c in ((30, 2.0, 2.5), (100, 5.0, 6.0))
    ]
    for b in blocks:
        b.speedup = speedup_summary(rows, b)
    return LatencyRecord(
        "wikiqa",
        "test",
        "2025-01-01T00:00:00+00:00",
        {"repeats": 3, "warmup": 3},
        "abc",
        "cpu",
        2,
        1,
        blocks,
        rows,
        {},
        {},
    )


def test_best_of_column_and_speedups() -> None:
    rec = _record()
    assert [r.best for r in rec.rows] == [True, False, True, True, True, True]
    sp30 = rec.block(30).speedup
    assert sp30["baseline"] == "monobert (batch_size=64)"
    assert sp30["measured_mean"] == pytest.approx(3.0)  # 33 / 11
    assert sp30["measured_p50"] == pytest.approx(3.0)  # 30 / 10
    assert sp30["fraction_of_prediction"] == pytest.approx(1.5)  # 3.0 / 2.0
    assert rec.block(100).speedup["measured_mean"] == pytest.approx(4.0)


def test_latency_table_layout() -> None:
    table = build_latency_table(_record())
    assert table.header() == [
        "N",
        "bm25",
        "monobert",
        "crossjem",
        "speed-up measured",
        "speed-up predicted",
        "C",
    ]
    assert table.text_rows() == [
        ["30", "0.50", "30.00", "10.00", "3.00x", "2.00x", "2.5"],
        ["100", "–", "90.00", "20.00", "4.00x", "5.00x", "6.0"],
    ]
    md = render_latency(table, "markdown")
    assert "| 30 | **0.50** | 30.00 | 10.00 | 3.00x | 2.00x | 2.5 |" in md
    assert (
        "monobert at N=30, each configuration (best shown): batch_size=32: 40.00, "
        "batch_size=64: 30.00." in md
    )
    with pytest.raises(ValueError, match="unknown latency table format"):
        render_latency(table, "latex")


def test_records_of_one_setting_merge_into_one_table() -> None:
    old, new = _record(), _record()
    old.blocks, old.rows = old.blocks[:1], [r for r in old.rows if r.n == 30]
    new.blocks, new.rows = new.blocks[1:], [r for r in new.rows if r.n == 100]
    new.created = "2025-02-01T00:00:00+00:00"
    merged = merge_records([new, old])
    assert [b.n for b in merged.blocks] == [30, 100] and len(merged.rows) == 6
    assert build_latency_table([old, new]).text_rows() == build_latency_table(_record()).text_rows()
    new.threads = 1
    with pytest.raises(ValueError, match="different settings"):
        merge_records([old, new])


def test_check_records_feed_ratio_expectations(tmp_path: Path) -> None:
    recs = check_records([_record()])
    assert len(recs) == 5  # best rows only
    expected = tmp_path / "latency.yaml"
    expected.write_text(
        "- kind: ratio\n  dataset: wikiqa\n  split: test\n"
        "  numerator: {ranker: monobert, field: mean_ms, config: {benchmark: latency, n: 100}}\n"
        "  denominator: {ranker: crossjem, field: mean_ms, config: {benchmark: latency, n: 100}}\n"
        "  min: 4.0\n"
    )
    [result] = run_checks(expected, recs)
    assert result.status == OK and result.actual == pytest.approx(4.0)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


def test_tiny_end_to_end_run(shared_data: Path, tiny_bert: Path, results_dir: Path) -> None:
    model = {"model": str(tiny_bert)}
    opts = BenchOptions(
        dataset="wikiqa",
        split="test",
        n_values=(30,),
        queries=2,
        repeats=1,
        warmup=1,
        rankers=("bm25", "dpr", "monobert", "st-crossencoder", "crossjem"),
        monobert_batch_sizes=(16, "all"),
        peer_batch_sizes=(16,),
        threads=1,
        options={"dpr": model, "monobert": model, "crossjem": model, "st-crossencoder": model},
        data_dir=shared_data,
        results_dir=results_dir,
    )
    rec = run_benchmark(opts)
    assert [r.label for r in rec.rows] == [
        "bm25",
        "dpr (precomputed)",
        "dpr (query time)",
        "monobert (batch_size=16)",
        "monobert (batch_size=30)",
        "st-crossencoder (batch_size=16)",
        "crossjem",
    ]
    for row in rec.rows:
        assert row.n == 30 and row.latency["calls"] == 2 and row.latency["candidates"] == 60
        assert row.tokenisation is not None and row.tokenisation["covers"]
    by_label = {r.label: r for r in rec.rows}
    block = rec.block(30)
    # the tokeniser's own count agrees with the cost model's token count
    assert (
        by_label["crossjem"].tokens["tokens_per_query"] == block.tokens["crossjem_tokens_per_query"]
    )
    assert (
        by_label["monobert (batch_size=16)"].tokens["tokens_per_query"]
        == block.tokens["monobert_tokens_per_query"]
    )
    assert set(block.speedup) >= {"measured_mean", "predicted_flops", "fraction_of_prediction"}
    assert block.tokens["max_item_len"] == 32 and block.tokens["union_len"] == 272
    assert rec.path is not None and rec.path.parent == results_dir / "latency" / "wikiqa"
    [loaded] = load_latency_records(results_dir, "wikiqa")
    assert loaded.to_json() == rec.to_json()
    assert "| 30 |" in render_latency(build_latency_table(loaded), "markdown")
