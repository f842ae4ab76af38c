"""Latency benchmark protocol pieces (no timing assertions): lists, token statistics, warm-up,
entries from ranker hooks, host-step and model-only timing, best-of selection, speed-ups, the
table, records, check records, --arch weights, and tiny end-to-end runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from toymodels import CountingRanker

import rankers
from bench.data.model import Candidate, CandidateList, Query, RankingSplit
from bench.data.splits import load_split
from bench.execution.ranker_settings import ranker_options
from bench.latency import plan
from bench.latency.benchmark import run_benchmark
from bench.latency.costmodel.flops import EncoderShape
from bench.latency.lists import bm25_lists, list_tokens, token_summary
from bench.latency.plan import ArchPreset, BenchOptions, column_for, entries_for
from bench.latency.protocol import (
    PARTS,
    time_parts,
)
from bench.latency.records import (
    LatencyRecord,
    LatencyRow,
    ListBlock,
    check_records,
    load_latency_records,
    mark_best,
    speedup_summary,
)
from bench.reporting.checks import OK, check_report
from bench.reporting.latency_tables import (
    build_latency_table,
    merge_records,
    quartiles,
    render_latency,
)
from rankers.base import Ranker, RankerConfig, RankerError
from rankers.hooks import LatencyParts, LatencyVariant
from rankers.io.models import write_random_bert

PROJECT = Path(__file__).resolve().parent.parent

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
    ranker = rankers.create_ranker(
        "crossjem", {"max_query_len": 32, "max_item_len": 3, "union_len": 4}
    )
    [tok] = list_tokens(WordTokenizer(), [cl], ranker)
    assert tok.query_len == 2
    assert tok.item_lens == (3, 3, 2, 1)  # "b c d e" cut to 3
    assert (tok.union.union, tok.union.item_tokens) == (5, 9)  # {a, b, c, d, e}
    assert tok.union.compression == pytest.approx(3 * 4 / 5)
    # packing in token order: [1,2,3] [1,5] [2,3,4] [3] -> {a,b,c,e} and {b,c,d}
    assert sorted(tok.row_tokens) == [3, 4]
    shape = EncoderShape(layers=2, hidden=4, intermediate=16)
    summary = token_summary([tok], shape)
    assert summary["monobert_tokens_per_query"] == 8 + 8 + 7 + 6  # L_q + L_k + 3 per item
    assert summary["crossjem_tokens_per_query"] == (2 + 4 + 3) + (2 + 3 + 3)
    assert summary["union_mean"] == 5 and summary["groups_mean"] == 2


def _crossjem(**options: object) -> Ranker:
    """A CROSS-JEM ranker of the cost-model tests (created: nothing loaded)."""
    return rankers.create_ranker("crossjem", {"max_query_len": 32, "max_item_len": 3, **options})


def test_list_tokens_follow_the_row_layout() -> None:
    cands = tuple(Candidate(f"d{i}", t) for i, t in enumerate(["a b c", "b c d e", "a e", "c"]))
    cl = CandidateList(Query("q", "q q"), cands)

    def rows(order: str, union_len: int) -> tuple[int, ...]:
        ranker = _crossjem(order=order, union_len=union_len, share_min=2)
        [tok] = list_tokens(WordTokenizer(), [cl], ranker)
        return tok.row_tokens

    assert rows("concat", 9) == (9,)  # 3 + 3 + 2 + 1 tokens, nothing shared
    # canonical order a b c | a e | b c d | c, next-fit into 5: [a b c a e] [b c d c]
    assert rows("concat", 5) == (5, 4)
    # hybrid: a, b, c are held by two or more items (shared once); d and e stay own tokens
    assert rows("hybrid", 8) == (3 + 2,)
    shape = EncoderShape(layers=2, hidden=4, intermediate=16)
    [tok] = list_tokens(WordTokenizer(), [cl], _crossjem(order="concat", union_len=9))
    assert token_summary([tok], shape)["crossjem_tokens_per_query"] == 2 + 9 + 3


def test_list_tokens_and_costs_of_a_merged_layout() -> None:
    """``merge_layers`` reaches the cost model: the settings' layout merges, each list keeps its
    concat rows for the first layers, and the predicted cost is the hand-computed mix."""
    ranker = _crossjem(order="union", merge_layers=1, union_len=9)
    assert ranker.cost_model_settings()["merge_layers"] == 1
    cands = tuple(Candidate(f"d{i}", t) for i, t in enumerate(["a b c", "b c d e", "a e", "c"]))
    cl = CandidateList(Query("q", "q q"), cands)
    [tok] = list_tokens(WordTokenizer(), [cl], ranker)
    # one group (its concat row, 3 + 3 + 2 + 1 = 9 tokens, fits 9): union {a, b, c, d, e}
    assert (tok.row_tokens, tok.first_row_tokens, tok.first_layers) == ((5,), (9,), 1)
    shape = EncoderShape(layers=2, hidden=4, intermediate=16)
    summary = token_summary([tok], shape)
    # a layer over n tokens: 192 n + 8 n^2; layer 1 over 2 + 9 + 3 = 14 tokens (4256), layer 2
    # over 2 + 5 + 3 = 10 (2720)
    assert summary["cost"]["crossjem_flops"] == 4256 + 2720
    assert summary["crossjem_tokens_per_query"] == (14 + 10) / 2
    assert summary["cost"]["monobert_flops"] == 2 * 4096 + 3472 + 2880


def _lists(n: int) -> list[CandidateList]:
    return [CandidateList(Query(f"q{i}", "x"), (Candidate("a", "a"),)) for i in range(n)]


def test_warmup_calls_are_not_timed() -> None:
    ranker = CountingRanker()
    [timed] = time_parts([ranker], _lists(5), [("score",)], batch_queries=2, warmup=4, repeats=3)
    tracker = timed["score"]
    assert len(ranker.calls) == 4 + 3 * 3  # 4 warm-up calls, then 3 passes of 3 calls (2+2+1)
    assert len(tracker.call_s) == 9
    assert tracker.queries == [2, 2, 1] * 3


def test_interleaved_rankers_take_turns_after_their_warmup() -> None:
    log: list[str] = []
    a, b = CountingRanker("a", log), CountingRanker("b", log)
    timed = time_parts([a, b], _lists(2), [("score",)] * 2, batch_queries=1, warmup=1, repeats=2)
    trackers = [t["score"] for t in timed]
    # warm-up (untimed): a then b on q0; timed: each call both rankers, the order rotating
    assert log == ["aq0", "bq0", "aq0", "bq0", "bq1", "aq1", "aq0", "bq0", "bq1", "aq1"]
    assert [len(t.call_s) for t in trackers] == [4, 4]


# -- a toy ranker that declares its own latency hooks ------------------------------------------
@dataclass
class ToyConfig(RankerConfig):
    model: str = "toy-weights"
    mode: str = "fast"
    batch_size: int = 4


class ToyRanker(Ranker, LatencyParts):
    """Two scoring modes, each its own column, at every batch size asked for."""

    name = "toy"
    family = "joint"
    Config = ToyConfig
    host_step = "toy: lower-casing each query"

    def __init__(self, config: ToyConfig | None = None, device: str = "cpu") -> None:
        super().__init__(config, device)
        self.prepared: list[int] = []  # ids of inputs prepare_scoring returned
        self.consumed: list[int] = []  # ids of inputs score_prepared received

    def latency_variants(self, batch_sizes=None):  # type: ignore[override]
        sizes = batch_sizes or [self.config.batch_size]
        return [
            LatencyVariant(f"toy ({m}, bs={bs})", {"mode": m, "batch_size": bs}, f"toy ({m})")
            for m in ("fast", "slow")
            for bs in sizes
        ]

    def scoring_mode(self) -> str:
        return "pre-tokenised" if self.config.mode == "fast" else "end-to-end"

    def compute_dtype(self) -> str:
        return "int8"

    def weights_note(self, checkpoint: str | None) -> str:
        return f"toy weights ({checkpoint})"

    def prepare_scoring(self, lists):  # type: ignore[override]
        prepared = [(cl.query.text.lower(), len(cl)) for cl in lists]
        self.prepared.append(id(prepared))
        return prepared

    def score_prepared(self, prepared):  # type: ignore[override]
        self.consumed.append(id(prepared))
        return [np.arange(n, 0, -1, dtype=float) for _, n in prepared]

    def score(self, lists):  # type: ignore[override]
        return [np.arange(len(cl), 0, -1, dtype=float) for cl in lists]


class BareToyRanker(ToyRanker):
    """No host step and the default variants (one row per batch size)."""

    name = "toy-bare"
    host_step = None

    def latency_variants(self, batch_sizes=None):  # type: ignore[override]
        return LatencyParts.latency_variants(self, batch_sizes)


@pytest.fixture()
def toys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the toy rankers, as a module of the project would be."""
    monkeypatch.setitem(rankers._REGISTRY, "toy", f"{__name__}:ToyRanker")
    monkeypatch.setitem(rankers._REGISTRY, "toy-bare", f"{__name__}:BareToyRanker")


def test_host_step_and_model_only_time_the_two_halves() -> None:
    ranker = ToyRanker()
    [timed] = time_parts([ranker], _lists(5), [("host",)], batch_queries=2, warmup=1, repeats=2)
    host = timed["host"]
    # one untimed call first, then 2 passes of 3 calls, each prepared once and scored on that
    assert len(ranker.prepared) == 1 + 2 * 3 and ranker.consumed == ranker.prepared
    assert host.queries == [2, 2, 1] * 2
    ranker = ToyRanker()
    [timed] = time_parts([ranker], _lists(5), [("model",)], batch_queries=2, warmup=1, repeats=2)
    model = timed["model"]
    assert model.queries == [2, 2, 1] * 2 and len(model.call_s) == 6
    assert ranker.consumed == ranker.prepared and len(ranker.prepared) == 7
    # several rankers take turns on the model half too, each on its own prepared inputs
    a, b = ToyRanker(), ToyRanker()
    trackers = [
        t["model"] for t in time_parts([a, b], _lists(3), [("model",)] * 2, warmup=1, repeats=2)
    ]
    assert [len(t.call_s) for t in trackers] == [6, 6]
    assert a.consumed == a.prepared and b.consumed == b.prepared and len(a.prepared) == 7
    with pytest.raises(ValueError, match="part must be one of score, host, model"):
        time_parts([a], _lists(1), [("tokens",)])


def test_host_and_model_steps_split_each_timed_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole call, the host step and the model step are one call with a mark between the
    steps: each step is the time up to or from the mark, and the two add up to the whole."""
    from bench.core import timing as tracker

    clock_s = iter([0.0, 0.25, 1.0] * 4)  # start, mark, end of each of the 4 calls
    monkeypatch.setattr(tracker.time, "perf_counter", lambda: next(clock_s))
    timed = time_parts([ToyRanker()], _lists(2), [PARTS], warmup=0, repeats=2)[0]
    monkeypatch.undo()
    assert timed["host"].call_s == [0.25] * 4
    assert timed["model"].call_s == [0.75] * 4
    assert timed["score"].call_s == [1.0] * 4


def test_parts_of_a_call_are_timed_in_one_call_with_rankers_taking_turns() -> None:
    """Load from other processes must fall on the whole call, the host step and the model step
    alike: a ranker with a host step is called in its two steps, once per call, rankers
    rotating; a ranker timed whole is called through score()."""
    events: list[tuple[str, str]] = []

    class Logged(ToyRanker):
        def __init__(self, tag: str) -> None:
            super().__init__()
            self.tag = tag

        def score(self, lists):  # type: ignore[override]
            events.append((self.tag, "score"))
            return super().score(lists)

        def prepare_scoring(self, lists):  # type: ignore[override]
            events.append((self.tag, "prepare"))
            return super().prepare_scoring(lists)

        def score_prepared(self, prepared):  # type: ignore[override]
            events.append((self.tag, "model"))
            return super().score_prepared(prepared)

    a, b = Logged("a"), Logged("b")
    timed = time_parts([a, b], _lists(2), [PARTS, ("score",)], warmup=0, repeats=1)
    assert [sorted(t) for t in timed] == [sorted(PARTS), ["score"]]
    assert [len(t[p].call_s) for t in timed for p in t] == [2, 2, 2, 2]
    a_call = [("a", "prepare"), ("a", "model")]
    # call 1: a then b; call 2: b then a
    assert events == a_call + [("b", "score"), ("b", "score")] + a_call


def test_entries_come_from_each_rankers_latency_variants(toys: None) -> None:
    entries = entries_for(
        ["bm25", "toy", "dpr", "toy-bare", "st-crossencoder", "crossjem"],
        "wikiqa",
        30,
        1,
        batch_sizes={"toy": (8, "all"), "toy-bare": (2,), "st-crossencoder": (32, 64)},
    )
    assert [(e.label, e.column) for e in entries] == [
        ("bm25", "bm25"),
        ("toy (fast, bs=8)", "toy (fast)"),
        ("toy (fast, bs=30)", "toy (fast)"),  # "all": the 30 pairs of one call
        ("toy (slow, bs=8)", "toy (slow)"),
        ("toy (slow, bs=30)", "toy (slow)"),
        ("dpr (precomputed)", "dpr (precomputed)"),
        ("dpr (query time)", "dpr (query time)"),
        ("toy-bare (batch_size=2)", "toy-bare"),
        ("st-crossencoder (batch_size=32)", "st-crossencoder"),
        ("st-crossencoder (batch_size=64)", "st-crossencoder"),
    ] + [  # CROSS-JEM as wikiqa's settings file configures it (its row layout tags the columns)
        (v.label, v.column)
        for v in rankers.create_ranker(
            "crossjem", ranker_options("crossjem", "wikiqa")
        ).latency_variants()
    ]
    toy = entries[2]
    assert toy.ranker == "toy" and toy.options == {"mode": "fast", "batch_size": 30}
    assert [e.options["precompute"] for e in entries[5:7]] == [True, False]
    for crossjem in [e for e in entries if e.ranker == "crossjem"]:
        assert crossjem.options["batch_queries"] == 1 and crossjem.options["union_len"] == 272
    with pytest.raises(ValueError, match="batch size for toy must be an integer >= 1 or 'all'"):
        entries_for(["toy"], "wikiqa", 30, 1, batch_sizes={"toy": (0,)})


def test_column_for_a_run_configuration(toys: None) -> None:
    assert column_for("dpr", {"precompute": True}) == "dpr (precomputed)"
    assert column_for("dpr", {}) == "dpr (query time)"
    assert column_for("toy", {"mode": "slow", "batch_size": 4}) == "toy (slow)"
    assert column_for("bm25", {"k1": 0.9}) == "bm25"
    assert column_for("dpr", {"no_such_option": 1}) == "dpr"  # config no longer fits


def test_dense_variants_times_batch_sizes_within_each_mode() -> None:
    ranker = rankers.create_ranker("dpr")
    got = [(v.label, v.column, v.options) for v in ranker.latency_variants([16])]
    assert got == [
        (
            "dpr (precomputed, batch_size=16)",
            "dpr (precomputed)",
            {"precompute": True, "batch_size": 16},
        ),
        (
            "dpr (query time, batch_size=16)",
            "dpr (query time)",
            {"precompute": False, "batch_size": 16},
        ),
    ]
    assert ranker.weights_note(None) == "pre-trained encoder, not fine-tuned"


def test_bm25_prepared_halves_score_like_score() -> None:
    ranker = rankers.create_ranker("bm25")
    split = _split()
    ranker.index(split)
    prepared = ranker.prepare_scoring(split.lists)
    assert prepared[0][0] == ["python", "list", "sort"]
    for a, b in zip(ranker.score_prepared(prepared), ranker.score(split.lists), strict=True):
        np.testing.assert_array_equal(a, b)
    assert ranker.host_step and ranker.scoring_mode() == "pre-tokenised"
    assert ranker.weights_note(None) == "n/a"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"queries": 0}, "--queries must be >= 1, not 0"),
        ({"repeats": 0}, "--repeats must be >= 1, not 0"),
        ({"warmup": -1}, "--warmup must be >= 0, not -1"),
        ({"batch_queries": 0}, "--batch-queries must be >= 1"),
        ({"n_values": (30, 0)}, "--n-items: list sizes must be integers >= 1, not 0"),
        ({"n_values": ()}, "--n-items: give at least one"),
        ({"arch": "bert-huge"}, "--arch 'bert-huge' is unknown; known: minilm-l6"),
        ({"arch": "bert-base", "checkpoints": {"monobert": "x"}}, "cannot be combined"),
        ({"batch_sizes": {"monobert": ("many",)}}, "batch size for monobert"),
        ({"rankers": ("bm25", "monobart")}, "unknown ranker 'monobart'"),
    ],
)
def test_options_are_checked_before_any_work(change: dict, message: str) -> None:
    # the dataset does not exist: validation has to fail before anything is loaded
    with pytest.raises((ValueError, RankerError), match=message):
        run_benchmark(BenchOptions(dataset="no-such-dataset", **change))


def _row(label: str, column: str, n: int, p50: float, mean: float, **extra) -> LatencyRow:
    return LatencyRow(
        label=label,
        ranker=column.split(" ")[0],
        column=column,
        family="early",
        n=n,
        batch_queries=1,
        options=extra.pop("options", {}),
        weights="untrained",
        dtype="float32",
        latency={"p50_ms": p50, "mean_ms": mean, "candidates_per_s": 1000.0 * n / mean},
        **extra,
    )


def _split_timing(host: float, model: float) -> dict:
    return {
        "host": {"p50_ms": host, "mean_ms": host, "covers": "tokeniser", "share_of_mean": 0.25},
        "model": {"p50_ms": model, "mean_ms": model, "share_of_mean": 0.75},
    }


def _record() -> LatencyRecord:
    t = _split_timing(7.5, 22.5)
    rows = [
        _row("bm25", "bm25", 30, 0.5, 0.5),
        _row("monobert (batch_size=32)", "monobert", 30, 40.0, 42.0, options={"batch_size": 32}),
        _row(
            "monobert (batch_size=64)",
            "monobert",
            30,
            30.0,
            33.0,
            options={"batch_size": 64},
            tokenisation=t["host"],
            model_only=t["model"],
            mode="pre-tokenised",
        ),
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
    assert "end_to_end" not in sp30  # no end-to-end columns were timed
    assert rec.block(100).speedup["measured_mean"] == pytest.approx(4.0)


def test_end_to_end_speedup_is_a_second_entry() -> None:
    rows = [
        _row("monobert (bs=64)", "monobert", 30, 30.0, 33.0),
        _row("crossjem", "crossjem", 30, 10.0, 11.0),
        _row("monobert e2e", "monobert (end-to-end)", 30, 60.0, 66.0),
        _row("crossjem e2e", "crossjem (end-to-end)", 30, 20.0, 33.0),
    ]
    mark_best(rows)
    cost = {"predicted_speedup": 2.0, "token_ratio": 2.0}
    block = ListBlock(30, 5, {"cost": cost, "compression_mean": 2.5})
    sp = block.speedup = speedup_summary(rows, block)
    assert sp["measured_mean"] == pytest.approx(3.0) and sp["fraction_of_prediction"] == 1.5
    e2e = sp["end_to_end"]
    assert (e2e["baseline"], e2e["model"]) == ("monobert e2e", "crossjem e2e")
    assert e2e["measured_mean"] == pytest.approx(2.0) and e2e["measured_p50"] == 3.0
    only_e2e = speedup_summary(rows[2:], block)
    assert set(only_e2e) == {"end_to_end"}
    table = build_latency_table(
        LatencyRecord("d", "s", "", {}, "h", "cpu", 1, 1, [block], rows, {}, {})
    )
    assert table.header()[-3:] == ["speed-up predicted", "speed-up end-to-end", "C"]
    assert table.text_rows()[0][-4:] == ["3.00x", "2.00x", "2.00x", "2.5"]


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
    # where the time goes: only the best monobert row at N=30 has a host step
    # (no raw calls kept in this record: no host spread)
    assert table.breakdown_rows() == [["30", "monobert", "30.00", "7.50", "–", "22.50", "25%"]]
    md = render_latency(table, "markdown")
    assert "| 30 | **0.50** | 30.00 | 10.00 | 3.00x | 2.00x | 2.5 |" in md
    assert "| 30 | monobert | 30.00 | 7.50 | – | 22.50 | 25% |" in md
    assert "Host step of monobert: tokeniser." in md
    assert "Scoring mode: pre-tokenised (monobert)." in md
    assert "No host step (timed as whole calls only): bm25, crossjem." in md
    assert (
        "monobert at N=30, each configuration (best shown): batch_size=32: 40.00, "
        "batch_size=64: 30.00." in md
    )
    data = json.loads(render_latency(table, "json"))
    assert data["rows"][0]["cells"]["monobert"] == 30.0
    assert data["rows"][0]["breakdown"]["monobert"]["model_only"] == 22.5
    with pytest.raises(ValueError, match="unknown latency table format"):
        render_latency(table, "latex")


def test_the_host_step_spread_is_the_middle_half_of_its_raw_calls_per_query() -> None:
    """p25 and p75 of call time / queries, by linear interpolation as numpy's percentile: calls
    of 1, 2, 3 ms (one query each) and 8 ms for two queries (4 ms each) are 1, 2, 3, 4 ms per
    query; p25 lies a quarter of the way from 1 to 2 (1.75), p75 from 3 to 4 (3.25)."""
    record = _record()
    row = next(r for r in record.rows if r.tokenisation)
    row.tokenisation = {
        **row.tokenisation,
        "call_s": [0.001, 0.002, 0.003, 0.008],
        "call_queries": [1, 1, 1, 2],
    }
    assert quartiles(row.tokenisation) == pytest.approx((1.75, 3.25))
    table = build_latency_table(record)
    assert table.breakdown_rows() == [
        ["30", "monobert", "30.00", "7.50", "1.75–3.25", "22.50", "25%"]
    ]
    assert quartiles({"p50_ms": 1.0}) is None  # a summary written before raw calls were kept


def test_throughput_table_bolds_the_highest() -> None:
    table = build_latency_table(_record(), stat="candidates_per_s")
    row30 = table.text_rows(bold=lambda s: f"*{s}*")[0]
    assert row30[1:4] == ["*60,000*", "909", "2,727"]  # 30 pairs in 0.5 ms, 33 ms, 11 ms
    assert table.breakdown_stat == "p50_ms"
    assert "pairs/s (candidates_per_s)" in table.notes[0]
    with pytest.raises(ValueError, match="valid: total_s, p50_ms.*candidates_per_s"):
        build_latency_table(_record(), stat="pairs_per_s")


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


def test_record_round_trips_through_json_with_the_new_fields() -> None:
    rec = _record()
    back = LatencyRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert back == rec
    row = back.rows[2]
    assert row.mode == "pre-tokenised" and row.model_only == {
        "p50_ms": 22.5,
        "mean_ms": 22.5,
        "share_of_mean": 0.75,
    }
    assert back.rows[0].tokenisation is None and back.rows[0].model_only is None


def test_records_written_before_the_new_fields_still_load() -> None:
    # a record of the previous implementation (no scoring mode, host/model split or arch)
    path = PROJECT / "tests" / "fixtures" / "latency-record-v1.json"
    rec = LatencyRecord.from_json(json.loads(path.read_text()), path)
    assert rec.rows and all(r.mode == "" and r.model_only is None for r in rec.rows)
    table = build_latency_table(rec)
    assert table.n_values and "monobert" in table.columns


def test_reference_records_load_with_their_modes() -> None:
    paths = sorted((PROJECT / "results" / "reference" / "latency").glob("*.json"))
    # run 1, all rankers, BERT-base, run 2 and the throughput (bq8) record, which README cites,
    # were timed in both scoring modes; every record there loads and has speed-ups
    moded = {
        "bq1-20261123T130903",
        "bq1-20261123T131514",
        "bq1-20261123T132220",
        "bq1-20261123T134959",
        "bq8-20261123T131851",
    }
    names = {p.name.split("-")[1] + "-" + p.name.split("-")[2]: p for p in paths}
    assert set(names) >= moded, paths
    for key, path in names.items():
        rec = LatencyRecord.from_json(json.loads(path.read_text()), path)
        if key in moded:
            assert {r.mode for r in rec.rows} >= {"pre-tokenised", "end-to-end"}
        assert build_latency_table(rec).speedups


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
    [result] = check_report(expected, recs).results
    assert result.status == OK and result.actual == pytest.approx(4.0)


def _toy_options(shared_data: Path, results_dir: Path, **change) -> BenchOptions:
    options = {
        "dataset": "wikiqa",
        "split": "test",
        "n_values": (10,),
        "queries": 2,
        "repeats": 2,
        "warmup": 1,
        "rankers": ("bm25", "toy", "toy-bare"),
        "batch_sizes": {"toy": (8,), "toy-bare": (2, 3)},
        "threads": 1,
        "data_dir": shared_data,
        "results_dir": results_dir,
    }
    return BenchOptions(**{**options, **change})


def test_toy_rankers_hooks_become_rows(toys: None, shared_data: Path, results_dir: Path) -> None:
    rec = run_benchmark(_toy_options(shared_data, results_dir))
    assert [(r.label, r.column) for r in rec.rows] == [
        ("bm25", "bm25"),
        ("toy (fast, bs=8)", "toy (fast)"),
        ("toy (slow, bs=8)", "toy (slow)"),
        ("toy-bare (batch_size=2)", "toy-bare"),
        ("toy-bare (batch_size=3)", "toy-bare"),
    ]
    by_label = {r.label: r for r in rec.rows}
    fast, bare = by_label["toy (fast, bs=8)"], by_label["toy-bare (batch_size=2)"]
    assert (fast.mode, fast.dtype, fast.weights) == ("pre-tokenised", "int8", "toy weights (None)")
    assert by_label["toy (slow, bs=8)"].mode == "end-to-end"
    for row in (fast, by_label["bm25"]):
        assert row.tokenisation is not None and row.model_only is not None
        assert row.tokenisation["calls"] == row.model_only["calls"] == 2 * 2
        assert row.tokenisation["covers"] and row.tokenisation["share_of_mean"] > 0
    assert bare.tokenisation is None and bare.model_only is None
    assert by_label["bm25"].weights == "n/a" and by_label["bm25"].mode == "pre-tokenised"
    assert sum(r.best for r in rec.rows) == 4  # one per column
    assert rec.config["batch_sizes"]["toy-bare"] == [2, 3] and rec.config["arch"] == "minilm-l6"
    [loaded] = load_latency_records(results_dir, "wikiqa")
    assert loaded.to_json() == json.loads(json.dumps(rec.to_json()))
    table = build_latency_table(loaded)
    assert set(table.breakdown[10]) == {"bm25", "toy (fast)", "toy (slow)"}


def test_random_bert_is_written_once_with_the_asked_size(tmp_path: Path) -> None:
    path = write_random_bert(tmp_path / "rb", hidden=32, layers=2, heads=2, intermediate=64)
    config = json.loads((path / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"]) == (32, 2)
    assert (config["num_attention_heads"], config["intermediate_size"]) == (2, 64)
    assert config["vocab_size"] == 30522  # MiniLM's vocabulary and tokenizer
    assert (path / "modules.json").is_file()
    # MiniLM's tokenizer, whatever files this transformers release writes for it (transformers 5
    # writes tokenizer.json only, 4.x also vocab.txt)
    from transformers import AutoTokenizer

    from rankers.io.models import resolve_model

    text = "a short text about tokenizers"
    mine = AutoTokenizer.from_pretrained(str(path))(text)["input_ids"]
    assert mine == AutoTokenizer.from_pretrained(resolve_model("minilm-l6").path)(text)["input_ids"]
    pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
    assert pooling["word_embedding_dimension"] == 32
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    write_random_bert(path, hidden=32, layers=2, heads=2, intermediate=64)
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not rewritten
    write_random_bert(path, hidden=32, layers=1, heads=2, intermediate=64)
    assert json.loads((path / "config.json").read_text())["num_hidden_layers"] == 1


def test_arch_times_random_weights_of_the_preset(
    toys: None, shared_data: Path, results_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = ArchPreset(layers=2, hidden=32, heads=2, intermediate=64)
    monkeypatch.setitem(plan.ARCHS, "tiny-test", tiny)
    rec = run_benchmark(_toy_options(shared_data, results_dir, arch="tiny-test"))
    folder = results_dir / "models" / "random" / "tiny-test-seed0"
    config = json.loads((folder / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"]) == (2, 32)
    assert (config["num_attention_heads"], config["intermediate_size"]) == (2, 64)
    assert rec.config["arch"] == "tiny-test" and rec.config["arch_model"] == str(folder)
    for row in rec.rows:
        if row.ranker == "bm25":  # no model option: its own note
            assert row.weights == "n/a"
        else:
            assert row.weights == "random weights, timing only (tiny-test)"
            assert row.options["model"] == str(folder)
    # the cost model measures the arch's encoder too
    assert rec.blocks[0].tokens["encoder"] == {
        "layers": 2,
        "hidden": 32,
        "intermediate": 64,
        "heads": 2,
    }


def test_tiny_end_to_end_run(shared_data: Path, tiny_bert: Path, results_dir: Path) -> None:
    model = {"model": str(tiny_bert)}
    names = ("bm25", "dpr", "monobert", "st-crossencoder", "crossjem")
    opts = BenchOptions(
        dataset="wikiqa",
        split="test",
        n_values=(30,),
        queries=2,
        repeats=1,
        warmup=1,
        rankers=names,
        batch_sizes={"monobert": (16, "all"), "st-crossencoder": (16,)},
        threads=1,
        options={name: model for name in names if name != "bm25"},
        data_dir=shared_data,
        results_dir=results_dir,
    )
    rec = run_benchmark(opts)
    assert list(dict.fromkeys(r.ranker for r in rec.rows)) == list(names)
    columns = {r.column for r in rec.rows}
    assert {"bm25", "dpr (precomputed)", "dpr (query time)", "st-crossencoder"} <= columns
    for row in rec.rows:
        assert row.n == 30 and row.latency["calls"] == 2 and row.latency["candidates"] == 60
        has_host = rankers.get_ranker_class(row.ranker).host_step is not None
        assert (row.tokenisation is not None) == has_host == (row.model_only is not None)
        assert row.mode and row.dtype and row.weights
    peer = next(r for r in rec.rows if r.ranker == "st-crossencoder")
    assert peer.tokenisation is not None and peer.tokenisation["covers"].startswith("CrossEncoder")
    assert peer.dtype == "float32"
    assert peer.weights == "untrained head on the pre-trained encoder (same cost as trained)"
    dpr = next(r for r in rec.rows if r.column == "dpr (precomputed)")
    assert dpr.weights == "pre-trained encoder, not fine-tuned" and dpr.dtype == "float32"
    block = rec.block(30)
    assert set(block.speedup) >= {"measured_mean", "predicted_flops", "fraction_of_prediction"}
    # no union_len given: CROSS-JEM's rows as long as auto chooses for these lists, recorded
    # as the number (the rows' options, the cost model's settings, the record's config)
    lists = bm25_lists(load_split("wikiqa", "test", shared_data), 30, queries=2).lists
    auto = {"crossjem": {**model, "union_len": "auto"}}
    chosen = plan.chosen_options(["crossjem"], "wikiqa", auto, lists)
    assert block.tokens["max_item_len"] == 32 and block.tokens["chosen"] == chosen
    assert block.tokens["union_len"] == chosen["crossjem"]["union_len"] != 272
    assert rec.config["chosen"] == {"30": chosen}
    assert rec.config["options"]["crossjem"]["union_len"] == "auto"
    timed = {r.options["union_len"] for r in rec.rows if r.ranker == "crossjem"}
    assert timed == {chosen["crossjem"]["union_len"]}
    assert rec.path is not None and rec.path.parent == results_dir / "latency" / "wikiqa"
    [loaded] = load_latency_records(results_dir, "wikiqa")
    assert loaded.to_json() == json.loads(json.dumps(rec.to_json()))
    assert "| 30 |" in render_latency(build_latency_table(loaded), "markdown")


def test_speedup_reads_a_crossjem_column_tagged_with_its_layout() -> None:
    rows = [
        _row("monobert (bs=64)", "monobert", 30, 30.0, 33.0),
        _row("crossjem {concat}", "crossjem {concat}", 30, 20.0, 22.0),
        _row("monobert e2e", "monobert (end-to-end)", 30, 60.0, 66.0),
        _row("crossjem {concat} e2e", "crossjem {concat} (end-to-end)", 30, 40.0, 44.0),
    ]
    mark_best(rows)
    block = ListBlock(30, 5, {"cost": {"predicted_speedup": 1.2, "token_ratio": 1.3}})
    sp = speedup_summary(rows, block)
    assert sp["model"] == "crossjem {concat}" and sp["measured_mean"] == pytest.approx(1.5)
    assert sp["end_to_end"]["model"] == "crossjem {concat} e2e"
    assert sp["end_to_end"]["measured_mean"] == pytest.approx(1.5)


def test_latency_set_options_go_to_the_rankers_that_have_them() -> None:
    from bench.latency.plan import options_per_ranker

    timed = ["bm25", "monobert", "crossjem"]
    assert options_per_ranker({"order": "concat"}, timed) == {"crossjem": {"order": "concat"}}
    both = options_per_ranker({"max_item_len": "24", "crossjem.union_len": "99"}, timed)
    assert both == {
        "monobert": {"max_item_len": "24"},
        "crossjem": {"max_item_len": "24", "union_len": "99"},
    }
    with pytest.raises(ValueError, match=r"--set order=concat: no option 'order' in the timed"):
        options_per_ranker({"order": "concat"}, ["bm25", "monobert"])
    with pytest.raises(ValueError, match=r"no option 'order' in ranker monobert"):
        options_per_ranker({"monobert.order": "concat"}, timed)


def test_latency_rejects_a_bad_layout_value_before_any_work() -> None:
    opts = BenchOptions(
        dataset="wikiqa", rankers=["crossjem"], options={"crossjem": {"order": "sorted"}}
    )
    with pytest.raises(RankerError, match="order"):
        opts.validate()


@pytest.mark.parametrize("batch_queries", [1, 3])
def test_host_and_model_only_never_exceed_the_whole_call(
    shared_data: Path, tiny_bert: Path, results_dir: Path, batch_queries: int
) -> None:
    """Records whose parts were timed in calls (or passes) of their own had a model-only p50
    above the whole call's (the reference bq8, BERT-base and run-1 N=700 records): the steps
    must be parts of the timed call itself. Per row: 0 < host <= whole and model <= whole
    (p50 and mean), the two steps adding up to the whole; the margin covers float rounding."""
    model = {"model": str(tiny_bert)}
    names = ("bm25", "monobert", "crossjem")
    rec = run_benchmark(
        BenchOptions(
            dataset="wikiqa",
            split="test",
            n_values=(30,),
            queries=6,
            repeats=2,
            warmup=1,
            rankers=names,
            batch_queries=batch_queries,
            batch_sizes={"monobert": (16,)},
            threads=1,
            options={name: model for name in names if name != "bm25"},
            data_dir=shared_data,
            results_dir=results_dir,
        )
    )
    assert len(rec.rows) == 5  # bm25, monobert and crossjem in both scoring modes
    margin = 1 + 1e-9
    for row in rec.rows:
        whole, host, model_only = row.latency, row.tokenisation, row.model_only
        assert host is not None and model_only is not None, row.label
        assert whole["calls"] == host["calls"] == model_only["calls"] == 2 * (6 // batch_queries)
        assert whole["queries"] == host["queries"] == model_only["queries"] == 12
        for stat in ("p50_ms", "p95_ms", "mean_ms"):
            assert 0 < host[stat] <= whole[stat] * margin, (row.label, stat)
            assert 0 < model_only[stat] <= whole[stat] * margin, (row.label, stat)
        assert host["mean_ms"] + model_only["mean_ms"] == pytest.approx(whole["mean_ms"], rel=1e-9)
        assert host["share_of_mean"] + model_only["share_of_mean"] == pytest.approx(1.0)
