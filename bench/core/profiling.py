"""One profiled pass over scoring calls: what they launch and how long the device is busy.

Wall time says how long a query took; it does not say why. On a GPU a short model step can
still be slow when the host launches hundreds of small kernels, or waits between them: the
count of kernels launched and the device's busy time per query, beside the wall time of the
same pass, tell launch- and host-bound calls from compute-bound ones. The pass runs after the
timing (the profiler slows every call it watches, so it never overlaps a timed call).

On CUDA a "kernel" is a device activity the profiler records (kernels, memcpy, memset) and the
busy time is the sum of their durations (one stream: they do not overlap). On a CPU there are
no kernels: the top-level aten operators stand for them and their CPU time for the busy time,
and the record names which of the two it counted (:attr:`CallProfile.unit`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.core.device import synchronize

#: what :attr:`CallProfile.kernels` counts on each kind of device
CUDA_UNIT = "cuda kernels"
CPU_UNIT = "cpu aten ops"


@dataclass(frozen=True)
class CallProfile:
    """Kernels launched, device busy time and wall time of one profiled pass, per query."""

    unit: str
    calls: int
    queries: int
    kernels: int
    busy_ms: float
    wall_ms: float

    @property
    def kernels_per_query(self) -> float:
        return self.kernels / self.queries

    @property
    def busy_ms_per_query(self) -> float:
        return self.busy_ms / self.queries

    @property
    def wall_ms_per_query(self) -> float:
        return self.wall_ms / self.queries

    @property
    def busy_share(self) -> float:
        """The share of the pass's wall time the device was busy (1.0: compute-bound)."""
        return self.busy_ms / self.wall_ms if self.wall_ms > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "kernels_per_query": self.kernels_per_query,
            "busy_ms_per_query": self.busy_ms_per_query,
            "wall_ms_per_query": self.wall_ms_per_query,
            "busy_share": self.busy_share,
        }


def count_events(events: Sequence[Any], cuda: bool) -> tuple[int, float]:
    """(kernels, busy ms) from a profiler's event list: device activities on CUDA, top-level
    aten operators (no CPU parent) on a CPU."""
    from torch.autograd import DeviceType

    if cuda:
        device = [e for e in events if e.device_type == DeviceType.CUDA]
        return len(device), sum(float(e.device_time) for e in device) / 1000.0
    top = [
        e
        for e in events
        if e.device_type == DeviceType.CPU and e.cpu_parent is None and e.name.startswith("aten::")
    ]
    return len(top), sum(float(e.cpu_time_total) for e in top) / 1000.0


def profile_calls(calls: Sequence[Callable[[], Any]], queries: int, device: str) -> CallProfile:
    """Run ``calls`` once each under the torch profiler (CUDA activity too on a CUDA device),
    synchronised before and after, and count what they launched. ``queries``: how many queries
    the calls score together (the per-query figures divide by it)."""
    from torch.profiler import ProfilerActivity, profile

    if queries < 1 or not calls:
        raise ValueError("profile_calls needs at least one call and one query")
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    synchronize(device)
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for call in calls:
            call()
        synchronize(device)
        wall = time.perf_counter() - start
    kernels, busy = count_events(prof.events(), cuda)
    return CallProfile(
        unit=CUDA_UNIT if cuda else CPU_UNIT,
        calls=len(calls),
        queries=queries,
        kernels=kernels,
        busy_ms=busy,
        wall_ms=wall * 1000.0,
    )
