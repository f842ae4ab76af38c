"""A command's work over several processes: started here (``--processes N``
on `bench run`, `demo`, `ablate` and `sweep`) or by a launcher (``torchrun --nproc_per_node N``
or ``accelerate launch --num_processes N`` with ``-m bench.cli ...``), one code path for both.

**Scoring** is sharded either way: every rank plans the same runs (same options, data and keys)
and scores its shard of each run's queries (:func:`bench.core.shard.score_sharded`, in
:meth:`bench.execution.scoring.ScoreJob.score_and_write`); the main rank gathers and writes. The
process count is in the record's provenance, not in its key: the run file is the same for any count.

**Training** differs, because data-parallel training is another model (each process draws its
own dropout masks; measured: epoch loss 2.3631 with 2 processes vs 2.4326 with 1 on the same
batches). ``--processes`` trains every model this command needs *here, in one process, before
the ranks start*, so the models, keys and results are those of a one-process command. Under a
launcher the ranks all start at once: list trainers (monoBERT, RankT5, CROSS-JEM;
``Ranker.distributed_training``) train on all of them through Accelerate, each a slice of every
batch, with their teacher and dev lists scored in shards, and the launch's size is part of the
training key (``RunOptions.train_processes``); a trainer without distributed training (DPR,
ANCE, ColBERT) is refused with the command that trains it first.

Once the ranks are done, the command goes on in one process, as it would without
``--processes``: every entry it needs is cached, so it reports (and writes tables, sweep
choices) exactly as a one-process command does.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bench.core.shard import (
    PeersLost,
    ShardError,
    Stopped,
    current_role,
    from_main,
    launched,
    process_group,
    spawn,
    spawned,
)
from bench.execution.plan import TEACHER, TRAIN, Plan

log = logging.getLogger(__name__)

#: signals that stop the command when a rank gets one (as when the parent gets one)
STOP_SIGNALS = ("SIGINT", "SIGTERM")
#: exit codes of a rank that ended itself on SIGINT (130) or SIGTERM (143)
STOPPED_CODES = (130, 143)

#: the job kinds that train a model
TRAINING = frozenset({TRAIN, TEACHER})

#: the launcher's variables, dropped once the ranks are done so the command goes on alone
LAUNCH_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK")


def jobs_to_compute(plan: Plan, kinds: frozenset[str], single_process: bool = False) -> list[str]:
    """The ids of ``plan``'s needed jobs of ``kinds`` that are not cached (only those that cannot
    run across processes with ``single_process``), in plan order."""
    needed = plan.needed()
    return [
        job.id
        for job in plan
        if job.id in needed
        and not job.cached
        and job.kind in kinds
        and (job.single_process or not single_process)
    ]


def execute_runs(runs: Sequence[Any], base: Any, processes: int, level: int) -> bool:
    """Do the work of ``runs`` (:class:`bench.execution.runner.RunOptions`, one plan for all;
    ``base`` gives the context) in ``processes`` new local processes, or in the ranks of the launch
    this process belongs to. Returns whether this process goes on to report: True here and on a
    launch's main rank (the others return False and should end quietly). A failed rank ends
    the command with one line naming the rank and its error and a non-zero exit code; bad
    input ends it with exit code 2, as one process would."""
    if launched():
        main = _rank(runs, base, level)
        for name in LAUNCH_ENV:  # the command goes on as one process over the cached entries
            os.environ.pop(name, None)
        return main
    if processes > 1:
        _train_here(runs, base)
        launch(processes, _rank, runs, base, level)
    return True


def _train_here(runs: Sequence[Any], base: Any) -> None:
    """Run the training jobs (and what they need) in this one process, so that the models are
    the ones a one-process command trains, under the same keys, and the ranks find them cached."""
    from bench.execution.runner import execute, plan_runs

    ctx = base.context()
    ctx.seed_everything()
    plan = plan_runs(runs, ctx)
    first = jobs_to_compute(plan, TRAINING)
    if first:
        log.info(
            "training in this process before the processes start: %s",
            ", ".join(plan.jobs[j].what for j in first),
        )
        execute(Plan(jobs=plan.jobs, targets=first), ctx)


def launch(processes: int, target: Callable[..., Any], *args: Any) -> None:
    """``target(*args)`` in ``processes`` new local processes (:func:`bench.core.shard.spawn`) when
    more than one is asked for and none was launched already, else in this one (which may be
    one rank of a torchrun launch). A rank ended by a signal is named here (it could not say
    why itself); a rank's exit code ends this process too."""
    if processes > 1 and not launched():
        import torch.multiprocessing as mp

        try:
            spawn(processes, target, *args)
        except mp.ProcessExitedException as exc:
            if exc.signal_name in STOP_SIGNALS:  # a rank got SIGINT/SIGTERM: the command stops
                raise Stopped(int(getattr(signal, exc.signal_name))) from None
            if exc.exit_code in STOPPED_CODES:
                raise Stopped(exc.exit_code - 128) from None
            if exc.signal_name:  # killed: the rank could not say why itself
                _killed_rank(exc.error_index, processes, exc.signal_name)
            sys.exit(exc.exit_code if exc.exit_code and exc.exit_code > 0 else 1)
        return
    target(*args)


def _killed_rank(rank: int, processes: int, signal_name: str) -> None:
    """One red line for a rank ended by a signal (torch.multiprocessing has already ended the
    other ranks, SIGTERM then SIGKILL, so none is left waiting in a collective call)."""
    from bench.core.progress import err_console

    err_console.print(
        f"[bold red]error:[/] rank {rank} of {processes} was ended by {signal_name} (from "
        "outside, e.g. out of memory); the other ranks were stopped, its work not written"
    )


def rank_logging(level: int) -> bool:
    """Log at ``level`` on the main rank and warnings only on the others; whether this is the
    main rank."""
    from rich.logging import RichHandler

    from bench.core.progress import err_console

    main = current_role().main
    logging.basicConfig(
        level=level if main else max(level, logging.WARNING),
        format="%(message)s",
        handlers=[RichHandler(console=err_console, show_path=False, rich_tracebacks=False)],
        force=True,
    )
    return main


@contextmanager
def rank_errors(main: bool) -> Iterator[None]:
    """A failure inside becomes one red line (on the main rank only: every rank raises the same
    :class:`ShardError`) and exit code 1 for a failed rank, 2 for bad input (as
    :func:`bench.cli.options.friendly_errors`)."""
    from rich.markup import escape

    from bench.core.io import StorageError, error_text
    from bench.core.progress import err_console
    from bench.data.files import DatasetError
    from rankers import RankerError

    try:
        yield
    except ShardError as exc:
        # a lost peer: each survivor says so, unless --processes' parent names the dead rank
        lost = isinstance(exc, PeersLost)
        if (main and not lost) or (lost and not spawned()):
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(1)
    except (DatasetError, RankerError, StorageError, ValueError, OSError, ImportError) as exc:
        if main:
            err_console.print(f"[bold red]error:[/] {escape(error_text(exc))}")
        sys.exit(2)


def _rank(runs: Sequence[Any], base: Any, level: int) -> bool:
    """One rank's share of the plan of ``runs``; True on the main rank. Only the main rank logs
    below warnings and reports a failure (:func:`rank_errors`)."""
    from bench.execution.runner import execute, plan_runs

    with rank_errors(rank_logging(level)), process_group() as role:
        ctx = base.context()
        ctx.seed_everything()
        plan = plan_runs(runs, ctx)
        # the main process decides (ranks could see the cache differently) and all follow
        alone = jobs_to_compute(plan, TRAINING, single_process=True)
        alone = from_main([plan.jobs[j].what for j in alone], role)
        if alone:
            raise ValueError(
                f"{'; '.join(alone)}: trains in one process only (no distributed training), "
                "so the launch's processes cannot share it; train it first (bench train, or "
                "bench run without a launcher), or use --processes, which trains it before "
                "the processes start"
            )
        execute(plan, ctx)
        return role.main
    return False  # pragma: no cover - rank_errors exits
