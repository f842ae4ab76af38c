"""Sharded scoring (issue 20 item 1): which process scores which queries, and the gather.

The rule is deterministic and depends only on the candidate counts and the process count, so
every process computes the same assignment without talking to the others:

* queries are taken by candidate count, largest first (ties: the earlier query first);
* each goes to the shard with the fewest candidates so far (ties: the lowest rank).

This is the classic longest-processing-time rule; it balances *pairs* (what scoring costs), not
queries. A shard may get no query (more processes than queries). The main process puts the
gathered scores back in the original query order, so the run file does not depend on the
process count.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Role:
    """This process's place in a launch: rank and world size (1 when not launched)."""

    rank: int
    world: int

    @property
    def main(self) -> bool:
        """The main process gathers and writes; the others write nothing."""
        return self.rank == 0


def current_role() -> Role:
    """The role from an initialised process group, else from the launcher's environment."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return Role(dist.get_rank(), dist.get_world_size())
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return Role(int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")))


def assign_shards(counts: Sequence[int], processes: int) -> list[list[int]]:
    """Query indices per rank, balanced by candidate count (rule in the module docstring).

    Each shard lists its queries in their original order.
    """
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    if any(count < 0 for count in counts):
        raise ValueError("candidate counts must not be negative")
    order = sorted(range(len(counts)), key=lambda index: (-counts[index], index))
    heap = [(0, rank) for rank in range(processes)]
    shards: list[list[int]] = [[] for _ in range(processes)]
    for index in order:
        load, rank = heapq.heappop(heap)
        shards[rank].append(index)
        heapq.heappush(heap, (load + counts[index], rank))
    return [sorted(shard) for shard in shards]


def merge_shards(shards: Sequence[Sequence[int]], parts: Sequence[Sequence[Any]]) -> list[Any]:
    """Put each rank's results (in its shard's order) back in the original query order."""
    total = sum(len(shard) for shard in shards)
    merged: list[Any] = [None] * total
    seen = [False] * total
    for rank, (shard, part) in enumerate(zip(shards, parts, strict=True)):
        if len(shard) != len(part):
            raise ValueError(f"rank {rank} returned {len(part)} results for {len(shard)} queries")
        for index, value in zip(shard, part, strict=True):
            if seen[index]:
                raise ValueError(f"query {index} was scored by two ranks")
            seen[index] = True
            merged[index] = value
    return merged


def gather_to_main(local: Any, role: Role) -> list[Any] | None:
    """Every rank's ``local`` on the main process (in rank order), None on the others.

    With one process no group is needed. Uses ``torch.distributed.gather_object`` (gloo on CPU).
    """
    if role.world == 1:
        return [local]
    import torch.distributed as dist

    received: list[Any] | None = [None] * role.world if role.main else None
    dist.gather_object(local, received, dst=0)
    return received


def score_sharded(
    items: Sequence[Any],
    counts: Sequence[int],
    score: Any,
    role: Role | None = None,
) -> list[Any] | None:
    """Score ``items`` (one per query, ``counts`` candidates each) across the launch's processes.

    ``score(shard_items) -> list`` scores one shard (it may be empty) and returns one result per
    item. Every process scores its shard; the main process gets all results in the original
    order, the others None. A scorer that raises on any rank fails on that rank; the launcher
    then ends the others (the runner wiring that turns this into one line naming the rank is
    not built yet, see the shard branch report).
    """
    role = role or current_role()
    shards = assign_shards(counts, role.world)
    mine = [items[index] for index in shards[role.rank]]
    local = list(score(mine))
    if len(local) != len(mine):
        raise ValueError(f"rank {role.rank}: {len(local)} results for {len(mine)} queries")
    parts = gather_to_main(local, role)
    return merge_shards(shards, parts) if parts is not None else None
