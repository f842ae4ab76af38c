"""Latency tracking for scoring passes, in the manner of optimum-benchmark's tracker.

Warm-up calls are made before tracking starts and never recorded. On CUDA the device is
synchronised before the start and after the end of every measured call, so the wall-clock figure
covers finished work, and CUDA events give the device-side time as a second figure. Per-query
latency is the call's time divided by the queries in the call (1 by default); throughput is volume
divided by total measured time, never an average of per-call rates.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from bench.device import synchronize


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


class LatencyTracker:
    """Times calls with :meth:`track`; :meth:`summary` turns them into a :class:`LatencySummary`."""

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
        if queries < 1:
            raise ValueError("a tracked call scores at least one query")
        start_event = end_event = stream = None
        if self.cuda:
            import torch

            start_event = torch.cuda.Event(enable_timing=True)
            end_event = torch.cuda.Event(enable_timing=True)
            # the tracker's device's stream: Event.record() alone uses the current device's,
            # so on cuda:1 it would time an idle cuda:0 stream
            stream = torch.cuda.current_stream(self.device)
        synchronize(self.device)
        t0 = time.perf_counter()
        if start_event is not None:
            start_event.record(stream)
        yield
        if end_event is not None:
            end_event.record(stream)
        synchronize(self.device)
        self.call_s.append(time.perf_counter() - t0)
        if start_event is not None and end_event is not None:
            self.device_s.append(start_event.elapsed_time(end_event) / 1000.0)
        self.queries.append(queries)
        self.candidates.append(candidates)

    def summary(self, **extra: Any) -> LatencySummary:
        return summarise(self.call_s, self.queries, self.candidates, self.device_s, **extra)


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
    )
