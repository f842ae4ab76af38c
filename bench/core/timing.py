"""Latency tracking for scoring passes, in the manner of optimum-benchmark's tracker.

Warm-up calls are made before tracking starts and never recorded. On CUDA the device is
synchronised before the start and after the end of every measured call, so the wall-clock figure
covers finished work, and CUDA events give the device-side time as a second figure. Per-query
latency is the call's time divided by the queries in the call (1 by default); throughput is volume
divided by total measured time, never an average of per-call rates.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from itertools import pairwise
from typing import Any

import numpy as np

from bench.core.device import synchronize


@dataclass
class LatencySummary:
    """Per-query latency percentiles (ms) and throughput over the tracked calls."""

    calls: int
    queries: int
    candidates: int
    total_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    std_ms: float
    queries_per_s: float
    candidates_per_s: float
    device_mean_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # the raw per-call values, so records can be pooled and re-summarised
    # (:func:`pool`); records written before these fields read them as empty
    call_s: list[float] = field(default_factory=list)
    call_queries: list[int] = field(default_factory=list)
    call_candidates: list[int] = field(default_factory=list)
    call_device_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("extra"))
        return out


#: the LatencySummary figures a latency table can show (``bench latency --stat``)
SUMMARY_STATS: tuple[str, ...] = tuple(
    f.name for f in fields(LatencySummary) if str(f.type).startswith("float")
)


def check_stat(stat: str) -> str:
    """``stat`` when it is one of :data:`SUMMARY_STATS`, else a ValueError naming them all, so
    a typo fails before minutes of timing rather than after."""
    if stat not in SUMMARY_STATS:
        raise ValueError(f"unknown statistic {stat!r}; valid: {', '.join(SUMMARY_STATS)}")
    return stat


def higher_is_better(stat: str) -> bool:
    """Throughputs (``*_per_s``) are better high; times are better low."""
    return stat.endswith("_per_s")


class CallClock:
    """The boundaries of one timed call: its start, each :meth:`mark` inside it, and its end.

    A call timed in parts (the host step, then the model) is one call with a mark between the
    parts, so its parts add up to the whole call exactly and neither can exceed it: parts timed
    in calls of their own are other samples, and their percentiles can exceed the whole call's.
    On CUDA every boundary waits for the queued work (so work queued by a part, such as its
    host-to-device copy, counts in that part) and records an event for device time.
    """

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.cuda = device.startswith("cuda")
        self._times: list[float] = []
        self._events: list[Any] = []

    def _event(self) -> None:
        if self.cuda:
            import torch

            event = torch.cuda.Event(enable_timing=True)
            # the clock's device's stream: Event.record() alone uses the current device's, so
            # on cuda:1 it would time an idle cuda:0 stream
            event.record(torch.cuda.current_stream(self.device))
            self._events.append(event)

    def start(self) -> None:
        synchronize(self.device)
        self._times.append(time.perf_counter())
        self._event()

    def mark(self) -> None:
        """End the current part of the call and start the next."""
        if not self._times:
            raise RuntimeError("CallClock.mark() before start()")
        self._event()
        synchronize(self.device)
        self._times.append(time.perf_counter())

    stop = mark

    @property
    def segments_s(self) -> list[float]:
        """Wall-clock seconds of each part, in order (one part without marks)."""
        return [b - a for a, b in pairwise(self._times)]

    @property
    def total_s(self) -> float:
        return self._times[-1] - self._times[0]

    @property
    def device_segments_s(self) -> list[float] | None:
        """CUDA-event seconds of each part; None off CUDA."""
        if not self.cuda:
            return None
        return [a.elapsed_time(b) / 1000.0 for a, b in pairwise(self._events)]

    @property
    def device_total_s(self) -> float | None:
        if not self.cuda:
            return None
        return self._events[0].elapsed_time(self._events[-1]) / 1000.0


@contextmanager
def timed_call(device: str = "cpu") -> Iterator[CallClock]:
    """Time the body as one call; call ``mark()`` on the clock to split it into parts."""
    clock = CallClock(device)
    clock.start()
    yield clock
    clock.stop()


class LatencyTracker:
    """Times calls with :meth:`track` (or takes calls timed elsewhere with :meth:`record`);
    :meth:`summary` turns them into a :class:`LatencySummary`."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.cuda = device.startswith("cuda")
        self.call_s: list[float] = []
        self.device_s: list[float] = []
        self.queries: list[int] = []
        self.candidates: list[int] = []

    @contextmanager
    def track(self, queries: int = 1, candidates: int = 0) -> Iterator[None]:
        """Time the body as one call that scores ``queries`` queries and ``candidates`` items."""
        _check_queries(queries)
        with timed_call(self.device) as clock:
            yield
        self.record(clock.total_s, queries, candidates, clock.device_total_s)

    def record(
        self,
        seconds: float,
        queries: int = 1,
        candidates: int = 0,
        device_seconds: float | None = None,
    ) -> None:
        """Add one call (or one part of a call) timed by the caller."""
        _check_queries(queries)
        self.call_s.append(seconds)
        if device_seconds is not None:
            self.device_s.append(device_seconds)
        self.queries.append(queries)
        self.candidates.append(candidates)

    def summary(self, **extra: Any) -> LatencySummary:
        return summarise(self.call_s, self.queries, self.candidates, self.device_s, **extra)


def _check_queries(queries: int) -> None:
    if queries < 1:
        raise ValueError("a tracked call scores at least one query")


def summarise(
    call_s: Sequence[float],
    queries: Sequence[int],
    candidates: Sequence[int],
    device_s: Sequence[float] = (),
    **extra: Any,
) -> LatencySummary:
    """Percentiles of per-query latency (call time / queries in the call) and throughput."""
    if not call_s:
        raise ValueError("no tracked calls to summarise")
    per_query = np.asarray(call_s, dtype=np.float64) * 1000.0 / np.asarray(queries, np.float64)
    total = float(np.sum(call_s))
    n_queries, n_candidates = int(np.sum(queries)), int(np.sum(candidates))
    return LatencySummary(
        calls=len(call_s),
        queries=n_queries,
        candidates=n_candidates,
        total_s=total,
        p50_ms=float(np.percentile(per_query, 50)),
        p95_ms=float(np.percentile(per_query, 95)),
        p99_ms=float(np.percentile(per_query, 99)),
        mean_ms=float(per_query.mean()),
        std_ms=float(per_query.std(ddof=1)) if len(per_query) > 1 else 0.0,
        queries_per_s=n_queries / total if total > 0 else float("inf"),
        candidates_per_s=n_candidates / total if total > 0 else float("inf"),
        device_mean_ms=float(np.sum(device_s) * 1000.0 / n_queries) if len(device_s) else None,
        extra=dict(extra),
        call_s=[float(x) for x in call_s],
        call_queries=[int(x) for x in queries],
        call_candidates=[int(x) for x in candidates],
        call_device_s=[float(x) for x in device_s],
    )


def pool(summaries: Sequence[Mapping[str, Any]]) -> LatencySummary:
    """One summary over the raw calls of several (``LatencySummary.to_dict()``) summaries, as if
    one process had made all the calls in turn; a summary without raw values (a record written
    before they were kept) is refused by name, since percentiles cannot be pooled."""
    calls: list[float] = []
    queries: list[int] = []
    candidates: list[int] = []
    device: list[float] = []
    for index, summary in enumerate(summaries):
        if not summary.get("call_s"):
            raise ValueError(
                f"summary {index} keeps no raw per-call timings (written before they were "
                "kept); time it again to pool it"
            )
        calls += summary["call_s"]
        queries += summary["call_queries"]
        candidates += summary["call_candidates"]
        device += summary.get("call_device_s") or []
    return summarise(calls, queries, candidates, device if len(device) == len(calls) else ())


def aggregate_throughput(summaries: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Pairs/s and queries/s of processes that ran *at the same time* (throughput mode): all
    their work over the longest process's wall time."""
    if not summaries:
        raise ValueError("no per-process summaries to aggregate")
    wall = max(float(summary["total_s"]) for summary in summaries)
    pairs = sum(int(summary["candidates"]) for summary in summaries)
    n_queries = sum(int(summary["queries"]) for summary in summaries)
    return {
        "processes": float(len(summaries)),
        "wall_s": wall,
        "candidates_per_s": pairs / wall if wall > 0 else float("inf"),
        "queries_per_s": n_queries / wall if wall > 0 else float("inf"),
    }
