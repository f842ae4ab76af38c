"""Throughput mode of `bench latency`: several processes timed at once.

Started by ``bench latency --processes N`` (N local processes, torch.multiprocessing spawn, gloo)
or by a launcher (``torchrun --nproc_per_node N -m bench.cli latency ...``), one code path for
both (:func:`bench.execution.scale.launch`). Every rank builds the same lists and entries; the timed
calls (``batch_queries`` lists each, as one process makes them) are split into shards balanced by
candidate count (:func:`bench.core.shard.assign_shards`), and each rank times its shard ``repeats``
times. The entries are timed one after another, not interleaved: each is loaded and warmed up
on every rank, then a barrier, then all ranks time their shard at once, so the aggregate is
measured while every process scores the same ranker.

What is kept (:class:`~bench.latency.records.LatencyRow`): ``latency`` (and ``tokenisation``,
``model_only``) pool every rank's raw calls, so the pooled call count is the one-process count;
``per_process`` keeps each rank's own summaries with their raw per-call timings, so records can
be pooled and re-summarised (:func:`bench.core.timing.pool`); ``throughput`` is the
aggregate (:data:`THROUGHPUT_DEFINITION`, :func:`throughput`).

A rank that fails (loading, warming up or timing) makes every rank raise one
:class:`~bench.core.shard.ShardError` naming it: errors are exchanged at each barrier, so no rank
waits forever on one that has given up, and nothing is written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from bench.core.shard import FAIL_RANK_ENV, LaunchRole, all_gather, assign_shards, exchange_errors
from bench.core.timing import LatencyTracker, aggregate_throughput
from bench.latency.plan import BenchOptions, Entry, Loaded, load_entry
from bench.latency.protocol import entry_rows, parts_of, split_calls, time_parts, warm_up

if TYPE_CHECKING:
    from bench.data.model import CandidateList, RankingSplit
    from bench.latency.records import LatencyRow

T = TypeVar("T")

#: what ``throughput["candidates_per_s"]`` of a row means, said in every throughput-mode row
THROUGHPUT_DEFINITION = (
    "pairs scored by all processes / wall span from the common start (the barrier after "
    "warm-up) to the end of the last process's last timed call"
)


def throughput(spans: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The aggregate throughput of ranks that timed their shards at once, from each rank's
    ``span_s`` (its seconds from the common start to its last timed call's end), ``queries``,
    ``candidates`` and ``start_unix``.

    Pairs/s is all ranks' pairs over the longest span, not the sum of each rank's own rate:
    a sum credits every rank with its rate over its own span, so ranks that finish at different
    times (an unbalanced shard, a straggler, starts that did not overlap) would count as
    running at once when they did not; the longest span is the time a user waits for all the
    work, with imbalance and contention included. Each rank's own pairs/s over its span is kept
    beside it, and ``start_skew_s`` says how far apart the ranks' clocks read the common start
    (the spread of their wall-clock start times, which only one machine's ranks can compare).
    """
    total = aggregate_throughput(
        [
            {"total_s": s["span_s"], "candidates": s["candidates"], "queries": s["queries"]}
            for s in spans
        ]
    )
    starts = [s["start_unix"] for s in spans]
    return {
        "definition": THROUGHPUT_DEFINITION,
        "processes": len(spans),
        "wall_s": total["wall_s"],
        "candidates": sum(int(s["candidates"]) for s in spans),
        "queries": sum(int(s["queries"]) for s in spans),
        "candidates_per_s": total["candidates_per_s"],
        "queries_per_s": total["queries_per_s"],
        "per_process_candidates_per_s": [
            s["candidates"] / s["span_s"] if s["span_s"] > 0 else None for s in spans
        ],
        "start_skew_s": max(starts) - min(starts),
    }


def _attempt(work: Callable[[], T], rank: int, inject: bool = False) -> tuple[T | None, str | None]:
    """``work()``, or its error as one line (so the rank still reaches the barrier that
    follows). ``inject``: the rank named by ``$BENCH_TEST_FAIL_RANK`` fails here (fault tests)."""
    try:
        if inject and os.environ.get(FAIL_RANK_ENV) == str(rank):
            raise RuntimeError(f"injected failure ({FAIL_RANK_ENV}={rank})")
        return work(), None
    except Exception as exc:  # noqa: BLE001 - reported by rank on every process below
        return None, f"{type(exc).__name__}: {exc}"


def main_first(work: Callable[[], T], role: LaunchRole, doing: str) -> T:
    """``work()`` on the main rank, then (once it succeeded) on the others: for work that
    writes a file the others then read, such as ``--arch``'s random weights."""
    if role.world == 1:
        return work()
    value, error = _attempt(work, role.rank) if role.main else (None, None)
    exchange_errors(error, role, doing)
    return value if role.main else work()  # type: ignore[return-value]


def _ready(entry: Entry, split: RankingSplit, opts: BenchOptions, device: str, mine: Any) -> Loaded:
    loaded = load_entry(entry, split, opts, device)
    ranker = loaded[2]
    if mine:
        warm_up([ranker], [parts_of(ranker)], mine, opts.warmup)
    return loaded


def _time_shard(
    ranker: Any, lists: list[CandidateList], opts: BenchOptions
) -> dict[str, LatencyTracker]:
    """``repeats`` timed passes over this rank's lists (none: empty trackers)."""
    if not lists:
        return {part: LatencyTracker(ranker.device) for part in parts_of(ranker)}
    (timed,) = time_parts(
        [ranker],
        lists,
        [parts_of(ranker)],
        batch_queries=opts.batch_queries,
        warmup=0,
        repeats=opts.repeats,
    )
    return timed


def time_entries_sharded(
    entries: Sequence[Entry], split: RankingSplit, opts: BenchOptions, device: str, role: LaunchRole
) -> list[LatencyRow]:
    """Time every entry with all ranks at once, each on its shard of one N's calls; every rank
    returns the same rows (pooled calls, per-process summaries, aggregate throughput)."""
    calls = split_calls(split.lists, opts.batch_queries)
    shards = assign_shards([sum(len(cl) for cl in call) for call in calls], role.world)
    my_calls = [calls[index] for index in shards[role.rank]]
    # flattened, the lists regroup into the same calls: every call but the split's last one
    # is full, and a shard lists its calls in order, so the last call ends whichever shard has it
    mine = [cl for call in my_calls for cl in call]
    loaded: list[Loaded] = []
    local: list[dict[str, Any]] = []
    for entry in entries:
        ready, error = _attempt(partial(_ready, entry, split, opts, device, my_calls), role.rank)
        exchange_errors(error, role, f"loading and warming up {entry.label}")
        assert ready is not None
        loaded.append(ready)
        start_unix, start = time.time(), time.perf_counter()
        timed, error = _attempt(partial(_time_shard, ready[2], mine, opts), role.rank, inject=True)
        span = time.perf_counter() - start
        exchange_errors(error, role, f"timing {entry.label}")
        assert timed is not None
        local.append({"rank": role.rank, "span_s": span, "start_unix": start_unix, "timed": timed})
    everyone = all_gather(local, role)  # per rank, one entry after another
    per_entry = [list(timings) for timings in zip(*everyone, strict=True)]
    return _rows(loaded, per_entry, opts, len(split.lists[0]))


def _pooled(trackers: Sequence[LatencyTracker]) -> LatencyTracker:
    """One tracker with every rank's calls in rank order (as if one process made them)."""
    from bench.execution.scoring import pooled

    return pooled(trackers, trackers[0].device)


def _rows(
    loaded: Sequence[Loaded], ranks: Sequence[Sequence[dict[str, Any]]], opts: BenchOptions, n: int
) -> list[LatencyRow]:
    """Rows from the pooled calls of all ranks (``ranks[k]``: each rank's timing of entry k),
    with each rank's own summaries and the aggregate throughput added."""
    processes = len(ranks[0])
    timed = [
        {part: _pooled([r["timed"][part] for r in per_rank]) for part in per_rank[0]["timed"]}
        for per_rank in ranks
    ]
    rows = entry_rows(loaded, timed, opts, n, interleaved=1, processes=processes)
    for row, per_rank in zip(rows, ranks, strict=True):
        spans = []
        for r in per_rank:
            score: LatencyTracker = r["timed"]["score"]
            own = {
                part: tracker.summary().to_dict() if tracker.call_s else None
                for part, tracker in r["timed"].items()
            }
            spans.append(
                {
                    "rank": r["rank"],
                    "span_s": r["span_s"],
                    "start_unix": r["start_unix"],
                    "calls": len(score.call_s),
                    "queries": sum(score.queries),
                    "candidates": sum(score.candidates),
                    "latency": own["score"],
                    "tokenisation": own.get("host"),
                    "model_only": own.get("model"),
                }
            )
        row.per_process = spans
        row.throughput = throughput(spans)
    return rows
