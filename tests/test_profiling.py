"""The profiled pass of bench.core.profiling: exact counts of what scoring calls launch."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch.autograd import DeviceType

from bench.core.profiling import CPU_UNIT, CallProfile, count_events, profile_calls


def test_cpu_pass_counts_top_level_aten_ops() -> None:
    a = torch.randn(16, 16)
    calls = [lambda: torch.mm(a, a).relu() for _ in range(3)]
    got = profile_calls(calls, queries=3, device="cpu")
    # mm and relu per call; their children (resolve_conj, clamp_min) are not counted again
    assert (got.unit, got.calls, got.queries, got.kernels) == (CPU_UNIT, 3, 3, 6)
    assert got.kernels_per_query == 2.0
    assert 0.0 < got.busy_ms <= got.wall_ms * 1.5
    assert got.to_dict()["kernels_per_query"] == 2.0


@dataclass
class FakeEvent:
    name: str
    device_type: DeviceType
    device_time: float = 0.0
    cpu_time_total: float = 0.0
    cpu_parent: object | None = None


def test_cuda_events_are_device_activities_and_their_summed_time() -> None:
    events = [
        FakeEvent("aten::mm", DeviceType.CPU, cpu_time_total=900.0),
        FakeEvent("ampere_sgemm", DeviceType.CUDA, device_time=250.0),
        FakeEvent("Memcpy HtoD", DeviceType.CUDA, device_time=50.0),
        FakeEvent("vectorized_elementwise", DeviceType.CUDA, device_time=100.0),
    ]
    assert count_events(events, cuda=True) == (3, 0.4)
    # the CPU view of the same events: the one top-level aten op, its 0.9 ms
    assert count_events(events, cuda=False) == (1, 0.9)


def test_shares_and_refusals() -> None:
    prof = CallProfile(CPU_UNIT, calls=2, queries=4, kernels=10, busy_ms=3.0, wall_ms=4.0)
    assert (prof.busy_ms_per_query, prof.wall_ms_per_query, prof.busy_share) == (0.75, 1.0, 0.75)
    with pytest.raises(ValueError):
        profile_calls([], queries=1, device="cpu")
