"""Shard assignment balanced by candidate count and the gather."""

from __future__ import annotations

import socket

import pytest
import torch.multiprocessing as mp

from bench.core.shard import (
    LaunchRole,
    PeersLost,
    assign_shards,
    gather_to_main,
    killed_first,
    merge_shards,
    peers_lost,
    pin_local_gpu,
    score_sharded,
    settle,
)


def test_shards_balance_candidates_not_queries() -> None:
    # one big query (10 pairs) against four small ones: the big one alone on rank 0
    assert assign_shards([1, 10, 2, 3, 4], 2) == [[1], [0, 2, 3, 4]]


def test_ties_go_to_the_earlier_query_and_the_lowest_rank() -> None:
    assert assign_shards([5, 5, 5, 5], 2) == [[0, 2], [1, 3]]
    assert assign_shards([3, 3, 3], 3) == [[0], [1], [2]]


def test_more_processes_than_queries_leaves_a_shard_empty() -> None:
    assert assign_shards([7], 2) == [[0], []]
    assert assign_shards([], 3) == [[], [], []]


def test_one_process_gets_everything_in_order() -> None:
    assert assign_shards([4, 1, 9], 1) == [[0, 1, 2]]


def test_bad_process_count_is_refused() -> None:
    with pytest.raises(ValueError, match="processes must be at least 1, got 0"):
        assign_shards([1], 0)


def test_merge_restores_query_order() -> None:
    shards = assign_shards([1, 10, 2, 3, 4], 2)
    parts = [[f"q{index}" for index in shard] for shard in shards]
    assert merge_shards(shards, parts) == ["q0", "q1", "q2", "q3", "q4"]


def test_merge_refuses_a_short_part() -> None:
    with pytest.raises(ValueError, match="rank 1 returned 1 results for 2 queries"):
        merge_shards([[0], [1, 2]], [["a"], ["b"]])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _gather_worker(rank: int, world: int, port: int, queue: mp.Queue) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        counts = [3, 1, 2]
        shards = assign_shards(counts, world)
        local = [float(index) * 0.5 for index in shards[rank]]
        parts = gather_to_main(local, LaunchRole(rank, world))
        if rank == 0:
            assert parts is not None
            queue.put(merge_shards(shards, parts))
        else:
            queue.put(parts)
    finally:
        dist.destroy_process_group()


def test_two_gloo_processes_gather_on_the_main_one() -> None:
    # 2 ranks, 3 queries: rank 0 gets query 0 (3 pairs), rank 1 queries 1 and 2 (1 + 2 pairs)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.start_processes(
        _gather_worker, args=(2, _free_port(), queue), nprocs=2, start_method="spawn"
    )
    results = sorted((queue.get(timeout=30) for _ in range(2)), key=lambda r: r is None)
    assert results == [[0.0, 0.5, 1.0], None]


def _sharded_worker(rank: int, world: int, port: int, queue: mp.Queue) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        for items in (["a", "bb", "ccc"], ["only"]):  # the second leaves rank 1 no query
            out = score_sharded(items, [len(x) for x in items], lambda xs: [x.upper() for x in xs])
            queue.put((rank, out))
    finally:
        dist.destroy_process_group()


def test_sharded_scoring_matches_one_process_including_an_empty_shard() -> None:
    one = [
        score_sharded(
            items, [len(x) for x in items], lambda xs: [x.upper() for x in xs], LaunchRole(0, 1)
        )
        for items in (["a", "bb", "ccc"], ["only"])
    ]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.start_processes(
        _sharded_worker, args=(2, _free_port(), queue), nprocs=2, start_method="spawn"
    )
    got = [queue.get(timeout=30) for _ in range(4)]
    main = sorted(out for rank, out in got if rank == 0)
    assert main == sorted(one) and one == [["A", "BB", "CCC"], ["ONLY"]]
    assert [out for rank, out in got if rank == 1] == [None, None]


def test_a_failed_collective_is_one_line_naming_this_rank() -> None:
    """gloo's error when a peer died (a bare RuntimeError, file:line first, advice after) is
    one line naming the surviving rank; other errors pass through."""
    gloo = (
        "[/__w/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
        "[127.0.0.1]:41192: Connection reset by peer. This is typically caused by a remote "
        "worker hanging or bugs in the application."
    )
    with pytest.raises(PeersLost) as caught, peers_lost(LaunchRole(1, 2)):
        raise RuntimeError(gloo)
    assert str(caught.value) == (
        "rank 1 of 2 lost the other ranks (one died, was killed or did not answer within "
        "$BENCH_DIST_TIMEOUT_S): Read error [127.0.0.1]:41192: Connection reset by peer"
    )
    with pytest.raises(KeyError), peers_lost(LaunchRole(1, 2)):
        raise KeyError("not a collective's failure")


def test_each_local_rank_gets_its_own_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """One process per GPU (no GPU here: CUDA is faked): local rank 3 of a node with 2 GPUs
    is put on GPU 1 (modulo), and nothing is pinned without CUDA."""
    import torch

    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    for local_rank in ("0", "1", "3"):
        monkeypatch.setenv("LOCAL_RANK", local_rank)
        pin_local_gpu()
    assert chosen == [0, 1, 1]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pin_local_gpu() is None and chosen == [0, 1, 1]


def test_a_launched_rank_prints_its_python_stacks_on_a_fatal_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rank ended by native code (std::terminate's SIGABRT) said only its signal; inside a
    launch's process group :mod:`faulthandler` is on, so the line it stopped at is printed."""
    import faulthandler
    import sys

    import torch.distributed as dist

    from bench.core import shard

    monkeypatch.setattr(shard, "launched", lambda: True)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: None)  # no peers here
    faulthandler.disable()
    try:
        with shard.process_group():
            assert faulthandler.is_enabled()
    finally:
        faulthandler.enable(sys.__stderr__)


def test_the_killed_rank_is_reported_even_when_a_survivor_exited_first() -> None:
    """torch reports the first exit it saw; a survivor that lost its killed peer may exit (1)
    first, yet the rank ended by SIGKILL is the one named (the others' SIGTERM is torch's)."""
    from types import SimpleNamespace

    survivor_first = mp.ProcessExitedException("process 0 exited", 0, 100, 1)
    processes = [SimpleNamespace(exitcode=1, pid=100), SimpleNamespace(exitcode=-9, pid=101)]
    named = killed_first(survivor_first, processes)
    assert (named.error_index, named.error_pid, named.exit_code, named.signal_name) == (
        1,
        101,
        -9,
        "SIGKILL",
    )
    terminated = [SimpleNamespace(exitcode=1, pid=100), SimpleNamespace(exitcode=-15, pid=101)]
    assert killed_first(survivor_first, terminated) is survivor_first
    killed = mp.ProcessExitedException("process 1 killed", 1, 101, -9, "SIGKILL")
    assert killed_first(killed, processes) is killed


def test_a_gpu_launch_takes_the_local_rank_gpu_and_nccl_for_cuda_tensors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Faked CUDA (no GPU here): each launched process makes its local rank's GPU current and
    the group carries CUDA tensors on NCCL, CPU objects on gloo; without CUDA, gloo alone."""
    import torch
    import torch.distributed as dist

    from bench.core.shard import group_backend, process_group

    calls: list[tuple[str, object]] = []
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", d)))
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(
        dist, "init_process_group", lambda backend, timeout: calls.append(("init", backend))
    )
    with process_group() as role:
        assert (role.rank, role.world) == (3, 4)
    # local rank 3 on a machine with 2 GPUs: GPU 1
    assert calls == [("set_device", 1), ("init", "cpu:gloo,cuda:nccl")]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert group_backend() == "gloo"


def test_one_process_raises_the_scorers_own_error() -> None:
    """With no other rank to tell, a scorer's error (a bad run file, a ranker refusing input)
    reaches the command as it was raised, so the command prints it as one line, not as a
    ShardError traceback."""
    from bench.data.files import DatasetError

    def score(items: list[int]) -> list[int]:
        raise DatasetError("run.trec:3: expected 6 fields")

    with pytest.raises(DatasetError, match="run.trec:3: expected 6 fields"):
        score_sharded([1, 2], [1, 1], score, LaunchRole(0, 1))
    assert score_sharded(
        [3, 1, 2], [1, 5, 2], lambda xs: [x * 10 for x in xs], LaunchRole(0, 1)
    ) == [
        30,
        10,
        20,
    ]


def test_the_main_ranks_own_exit_code_is_the_commands_whichever_rank_ended_first() -> None:
    """A full disk under --processes 2: the main rank names the path and exits 2; the other
    rank, having lost it, exits 1 silently. torch reports whichever it saw first, so the status
    was 1 or 2 at random: the main rank's own code (it said why) is the one reported, the other
    ranks get time to end on their own before torch stops them, and an exit torch already
    names for the main rank is kept as it is."""
    from types import SimpleNamespace

    survivor_first = mp.ProcessExitedException("process 1 exited", 1, 101, 1)
    processes = [SimpleNamespace(exitcode=2, pid=100), SimpleNamespace(exitcode=1, pid=101)]
    named = killed_first(survivor_first, processes)
    assert (named.error_index, named.error_pid, named.exit_code, named.signal_name) == (
        0,
        100,
        2,
        None,
    )
    main_first = mp.ProcessExitedException("process 0 exited", 0, 100, 2)
    assert killed_first(main_first, processes) is main_first
    stopped = [SimpleNamespace(exitcode=-15, pid=100), SimpleNamespace(exitcode=1, pid=101)]
    assert killed_first(survivor_first, stopped) is survivor_first  # main said nothing itself

    ranks = [SettlingRank(None, 2), SettlingRank(1, 1)]  # the survivor ended first
    settle(ranks, grace=5.0)
    assert ranks[0].exitcode == 2 and ranks[0].waited is not None and ranks[0].waited > 4.0


class SettlingRank:
    """A rank still running when another failed; it ends within the grace period."""

    def __init__(self, exitcode: int | None, ends_with: int) -> None:
        self.exitcode, self.ends_with, self.waited = exitcode, ends_with, None

    def join(self, timeout: float) -> None:
        self.waited, self.exitcode = timeout, self.ends_with


@pytest.mark.parametrize("signum", [9, 2])
def test_a_rank_ended_by_a_signal_has_the_others_stopped_without_waiting(signum: int) -> None:
    """A rank killed (SIGKILL) or interrupted (SIGINT) said nothing and is the failure reported
    whatever the others do; they cannot finish without it, so they get no grace period."""
    ranks = [SettlingRank(None, 1), SettlingRank(-signum, -signum)]
    settle(ranks, grace=5.0)
    assert (ranks[0].waited, ranks[0].exitcode) == (None, None)
