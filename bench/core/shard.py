"""Sharded scoring: which process scores which queries, and the gather.

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

import datetime
import heapq
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LaunchRole:
    """This process's role in a launch: rank and world size (1 when not launched). Named apart
    from :class:`rankers.base.Role`, the role of a ranker option."""

    rank: int
    world: int

    @property
    def main(self) -> bool:
        """The main process gathers and writes; the others write nothing."""
        return self.rank == 0


def current_role() -> LaunchRole:
    """The role from an initialised process group, else from the launcher's environment."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return LaunchRole(dist.get_rank(), dist.get_world_size())
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return LaunchRole(int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")))


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


def gather_to_main(local: Any, role: LaunchRole) -> list[Any] | None:
    """Every rank's ``local`` on the main process (in rank order), None on the others.

    With one process no group is needed. Uses ``torch.distributed.gather_object`` (gloo on CPU).
    """
    if role.world == 1:
        return [local]
    import torch.distributed as dist

    received: list[Any] | None = [None] * role.world if role.main else None
    with peers_lost(role):
        dist.gather_object(local, received, dst=0)
    return received


class ShardError(RuntimeError):
    """A rank failed while scoring its shard; every rank raises this same error."""


class PeersLost(ShardError):
    """A collective call failed on this rank: another rank died (its connection closed) or
    did not answer within ``$BENCH_DIST_TIMEOUT_S``. Unlike a :class:`ShardError` raised on
    every rank alike, each surviving rank reports this itself (the main one may be the dead)."""


@contextmanager
def peers_lost(role: LaunchRole) -> Iterator[None]:
    """A collective's failure (gloo raises a bare RuntimeError) as :class:`PeersLost` with
    the first line of gloo's message, so the survivor ends with one line, not a traceback."""
    try:
        yield
    except RuntimeError as exc:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        said = re.sub(r"^\[[^\]]*\] ", "", said.split(". This is typically")[0])  # [file:line]
        raise PeersLost(
            f"rank {role.rank} of {role.world} lost the other ranks (one died, was killed or "
            f"did not answer within ${TIMEOUT_ENV}): {said}"
        ) from exc


#: test hook: the rank named here raises in :func:`score_sharded` (the fault tests)
FAIL_RANK_ENV = "BENCH_TEST_FAIL_RANK"


#: test hook: the rank named here scores its first query, then kills itself with SIGKILL (no
#: Python cleanup, as the kernel's out-of-memory killer would) in :func:`score_sharded`
KILL_RANK_ENV = "BENCH_TEST_KILL_RANK"


def _killed_here(score: Any, mine: list[Any], rank: int) -> None:
    """The :data:`KILL_RANK_ENV` hook: some work, then death by SIGKILL mid-shard."""
    if os.environ.get(KILL_RANK_ENV) == str(rank):
        import signal

        score(mine[:1])
        os.kill(os.getpid(), signal.SIGKILL)


def _score_here(score: Any, mine: list[Any], rank: int) -> list[Any]:
    """This rank's results (one per item of ``mine``)."""
    if os.environ.get(FAIL_RANK_ENV) == str(rank):
        raise RuntimeError(f"injected failure ({FAIL_RANK_ENV}={rank})")
    local = list(score(mine))
    if len(local) != len(mine):
        raise ValueError(f"{len(local)} results for {len(mine)} queries")
    return local


def _score_or_error(score: Any, mine: list[Any], rank: int) -> tuple[list[Any], str | None]:
    """This rank's results, or its error as one line (so every rank still reaches the
    collective calls that follow, in the same order, and nobody waits forever)."""
    _killed_here(score, mine, rank)
    try:
        return _score_here(score, mine, rank), None
    except Exception as exc:  # noqa: BLE001 - reported by rank on every process below
        return [], f"{type(exc).__name__}: {exc}"


def score_sharded(
    items: Sequence[Any],
    counts: Sequence[int],
    score: Any,
    role: LaunchRole | None = None,
    *,
    everywhere: bool = False,
) -> list[Any] | None:
    """Score ``items`` (one per query, ``counts`` candidates each) across the launch's processes.

    ``score(shard_items) -> list`` scores one shard (it may be empty) and returns one result per
    item. Every process scores its shard; the main process gets all results in the original
    order, the others None - or every process gets them with ``everywhere`` (teacher targets,
    which every training process needs). A scorer that raises on any rank makes every rank raise one
    :class:`ShardError` naming the first failed rank and its error: the errors are exchanged
    before the gather, so each rank makes the same collective calls in the same order.
    """
    role = role or current_role()
    if role.world == 1:  # no other rank to tell: the scorer's own error, as it was raised
        _killed_here(score, list(items), 0)
        return _score_here(score, list(items), 0)
    shards = assign_shards(counts, role.world)
    mine = [items[index] for index in shards[role.rank]]
    local, error = _score_or_error(score, mine, role.rank)
    exchange_errors(error, role, "scoring")
    parts = all_gather(local, role) if everywhere else gather_to_main(local, role)
    return merge_shards(shards, parts) if parts is not None else None


def exchange_errors(error: str | None, role: LaunchRole, doing: str) -> None:
    """A barrier that also exchanges each rank's error (one line, or None): every rank raises
    the same :class:`ShardError` naming the first failed rank, or all go on together, so no
    rank waits forever on one that has given up."""
    failed = [(rank, err) for rank, err in enumerate(all_gather(error, role)) if err is not None]
    if failed:
        rank, err = failed[0]
        raise ShardError(f"rank {rank} of {role.world} failed while {doing}: {err}")


def all_gather(local: Any, role: LaunchRole) -> list[Any]:
    """Every rank's ``local``, in rank order, on every rank."""
    if role.world == 1:
        return [local]
    import torch.distributed as dist

    received: list[Any] = [None] * role.world
    with peers_lost(role):
        dist.all_gather_object(received, local)
    return received


def from_main(value: Any, role: LaunchRole | None = None) -> Any:
    """The main process's ``value`` on every rank (a decision only main may take, such as
    whether a cache entry is reused, so that all ranks then do the same thing)."""
    role = role or current_role()
    if role.world == 1:
        return value
    import torch.distributed as dist

    box = [value if role.main else None]
    with peers_lost(role):
        dist.broadcast_object_list(box, src=0)
    return box[0]


#: how long a collective call may wait (seconds) before the run fails instead of hanging
TIMEOUT_ENV = "BENCH_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 1800.0


def launch_world() -> int:
    """The size of the launch this process belongs to (``WORLD_SIZE``; 1 when not launched)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def launched() -> bool:
    """Whether this process is one of several started by a launcher (torchrun, accelerate
    launch, or :func:`spawn`): ``WORLD_SIZE`` > 1 in the environment."""
    return launch_world() > 1


def single_process_from_accelerate() -> bool:
    """Whether ``accelerate launch --cpu --num_processes N`` (or a ``MULTI_CPU`` config) started
    this one process: accelerate 1.15 then runs its simple launcher, which starts a single
    process (N only under ``mpirun --mpirun_hostfile``) and sets ``MASTER_ADDR``/``PORT`` but
    no ``WORLD_SIZE``. Several CPU processes on one machine come from ``accelerate launch
    --multi_gpu --num_processes N`` instead (torchrun underneath; gloo on CPU, no GPU needed)."""
    return (
        os.environ.get("ACCELERATE_USE_CPU", "").lower() == "true"
        and "MASTER_PORT" in os.environ
        and not launched()
    )


def pin_local_gpu() -> int | None:
    """One process per GPU: make this rank's default CUDA device ``LOCAL_RANK`` (modulo the
    GPUs seen), so ``--device auto``/``cuda`` put each rank of ``torchrun --nproc_per_node G``
    or ``accelerate launch --multi_gpu --num_processes G`` on its own GPU rather than all on
    GPU 0 (the device Accelerate gives a training rank too). The index, or None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    index = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return index


def group_backend() -> str:
    """The process group's backend: gloo for CPU tensors (the Python objects every collective
    here exchanges go through it), plus NCCL for CUDA tensors (data-parallel training's
    gradients) where CUDA is available."""
    import torch

    return "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"


@contextmanager
def process_group() -> Iterator[LaunchRole]:
    """This process's role, with a process group set up when launched and none is yet
    (:func:`group_backend`, time-limited by ``$BENCH_DIST_TIMEOUT_S`` so a rank left waiting
    fails instead of hanging; each process on its local rank's GPU, :func:`pin_local_gpu`);
    the group is taken down on the way out. A rank killed by a fatal signal prints its Python
    stacks (:mod:`faulthandler`)."""
    if not launched():
        yield current_role()
        return
    import faulthandler

    import torch.distributed as dist

    # a rank ended by native code (std::terminate's SIGABRT, a segfault) prints every thread's
    # Python stack, so the line it stopped at is in the command's output, not only its signal
    with suppress(OSError, ValueError, RuntimeError):  # no stderr file: no stacks
        faulthandler.enable()
    pin_local_gpu()
    mine = not dist.is_initialized()
    if mine:
        seconds = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
        dist.init_process_group(group_backend(), timeout=datetime.timedelta(seconds=seconds))
    try:
        yield current_role()
    finally:
        if mine and dist.is_initialized():
            dist.destroy_process_group()


#: set in the processes :func:`spawn` starts (their parent reports a rank that dies)
SPAWNED_ENV = "BENCH_SPAWNED"


def spawned() -> bool:
    """Whether :func:`spawn` started this process: then a rank killed by a signal is named by
    the parent, which stops the others, and a survivor that lost it says nothing more."""
    return os.environ.get(SPAWNED_ENV) == "1"


class Stopped(KeyboardInterrupt):
    """SIGTERM (or another stop signal) turned into an interrupt, so the command stops as on
    Ctrl-C, with exit code 128 + ``signum`` (143 for SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def sigterm_stops() -> Iterator[None]:
    """Within the block SIGTERM (what a scheduler, ``kill`` or a container's stop sends) raises
    :class:`Stopped`, so the command unwinds as on Ctrl-C: its context managers remove their
    temporary folders (``bench-onnx-*``) and unfinished entries, and the command line says what
    was kept and exits 143. Outside the main thread, where Python takes no signal handler, the
    block runs as it is."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: Any) -> None:
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: seconds spawned ranks get to end after SIGTERM before they are killed
STOP_GRACE_S = 5.0


def _spawned(rank: int, world: int, port: int, target: Callable[..., Any], args: tuple) -> None:
    import signal

    # SIGINT ends a rank at once, as SIGTERM does, at the kernel's level: no KeyboardInterrupt
    # traceback from an exit hook, and no wait for a Python handler while the rank sits in a
    # collective call; the parent sees the signal and stops the command
    # (bench.execution.scale.launch)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    os.environ[SPAWNED_ENV] = "1"
    target(*args)


def spawn(processes: int, target: Callable[..., Any], *args: Any) -> None:
    """Run ``target(*args)`` in ``processes`` new local processes (torch.multiprocessing,
    spawn start method), each launched as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR/PORT
    on 127.0.0.1 and a free port). ``target`` must be importable (a module-level function)."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    # its "Terminating process N via signal SIGTERM" when a rank fails: the caller says it
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    context = mp.start_processes(
        _spawned,
        args=(processes, port, target, args),
        nprocs=processes,
        start_method="spawn",
        join=False,
    )
    try:
        with sigterm_stops():
            settle(context.processes)
            while not context.join():
                pass
    except mp.ProcessExitedException as exc:
        raise killed_first(exc, context.processes) from None
    except KeyboardInterrupt:  # SIGINT or SIGTERM to this process: stop every rank first
        stop_ranks(context.processes)
        raise


def stop_ranks(processes: Sequence[Any], grace: float = STOP_GRACE_S) -> None:
    """SIGTERM to every live rank, then SIGKILL to any still alive after ``grace`` seconds, and
    wait for all: none is left running (and writing) after the command ends."""
    import time

    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def settle(processes: Sequence[Any], grace: float = STOP_GRACE_S) -> None:
    """Wait until every rank has ended, or one has failed and the others have had ``grace``
    seconds to end on their own. torch stops the other ranks as soon as it sees one fail: a
    survivor that lost the main rank (exit 1) could otherwise be seen first and the main rank,
    still saying why it failed (exit 2 for bad input, a full disk), be stopped before it
    exits, so the exit status would depend on which process the kernel ran first. A rank ended
    by a signal (SIGKILL, SIGINT) is the failure to report whatever the others do
    (:func:`killed_first`), and they cannot finish without it: they are stopped at once."""
    import time
    from multiprocessing.connection import wait

    while True:
        live = [p for p in processes if p.exitcode is None]
        if not live or any(p.exitcode for p in processes if p.exitcode is not None):
            break
        wait([p.sentinel for p in live])
    if any(p.exitcode is not None and p.exitcode < 0 for p in processes):
        return
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))


def killed_first(exc: Any, processes: Sequence[Any]) -> Any:
    """The failure to report, whichever exit torch saw first: a rank killed by a signal
    (other than the SIGTERM torch sends the others), which could not say why itself; else the
    main rank's own exit code, the one that printed the error (exit 2 for bad input, 1 for a
    failed rank: a survivor that lost its peer exits 1 silently, :func:`spawned`); else
    torch's."""
    import signal

    import torch.multiprocessing as mp

    if exc.signal_name:
        return exc
    for index, process in enumerate(processes):
        code = process.exitcode
        if code is not None and code < 0 and code != -signal.SIGTERM:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return mp.ProcessExitedException(
                f"process {index} terminated with signal {name}", index, process.pid, code, name
            )
    main = processes[0] if processes else None
    if main is not None and main.exitcode and main.exitcode > 0 and exc.error_index != 0:
        return mp.ProcessExitedException(
            f"process 0 exited with exit code {main.exitcode}", 0, main.pid, main.exitcode
        )
    return exc
