"""`bench run` over several processes (issue 20 item 1): started here (``--processes N``) or by
a launcher (``torchrun --nproc_per_node N -m bench.cli run ...``), one code path for both.

Every rank plans the same run (same options, data and key), scores its shard of the queries
(:func:`bench.shard.score_sharded`, inside :meth:`bench.scoring.ScoreJob.score_and_write`) and
the main rank gathers, writes and prints. The process count is not in the cache key: the run
file does not depend on it. Training, dev scoring inside training and teacher scoring are not
sharded yet, so a run whose plan has a training or teacher job to compute is refused with
more than one process (a run whose model is cached is scored sharded).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.shard import ShardError, from_main, launched, process_group, spawn

log = logging.getLogger(__name__)


def run_command(opts: Any, processes: int, level: int) -> None:
    """`bench run` with ``opts`` (:class:`bench.runner.RunOptions`): in ``processes`` new local
    processes when more than one is asked for and none was launched already, else in this one
    (which may be one rank of a torchrun launch). A failed rank ends the command with one line
    naming the rank and its error, and a non-zero exit code."""
    launch(processes, run_rank, opts, level)


def launch(processes: int, target: Callable[..., Any], *args: Any) -> None:
    """``target(*args)`` in ``processes`` new local processes (:func:`bench.shard.spawn`) when
    more than one is asked for and none was launched already, else in this one (which may be
    one rank of a torchrun launch). A rank ended by a signal is named here (it could not say
    why itself); a rank's exit code ends this process too."""
    if processes > 1 and not launched():
        import torch.multiprocessing as mp

        try:
            spawn(processes, target, *args)
        except mp.ProcessExitedException as exc:
            if exc.signal_name:  # killed: the rank could not say why itself
                log.error("rank %d was ended by %s", exc.error_index, exc.signal_name)
            sys.exit(exc.exit_code or 1)
        return
    target(*args)


def rank_logging(level: int) -> bool:
    """Log at ``level`` on the main rank and warnings only on the others; whether this is the
    main rank."""
    from rich.logging import RichHandler

    from bench.cli_options import err_console

    main = int(os.environ.get("RANK", "0")) == 0
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
    :func:`bench.cli_options.friendly_errors`)."""
    from rich.markup import escape

    from bench.cli_options import err_console, error_text
    from bench.data import DatasetError
    from bench.results import StorageError
    from rankers import RankerError

    try:
        yield
    except ShardError as exc:
        if main:
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(1)
    except (DatasetError, RankerError, StorageError, ValueError, OSError, ImportError) as exc:
        if main:
            err_console.print(f"[bold red]error:[/] {escape(error_text(exc))}")
        sys.exit(2)


def run_rank(opts: Any, level: int) -> None:
    """One rank's `bench run`: only the main rank logs below warnings, prints the report and
    reports a failure (:func:`rank_errors`)."""
    from bench.cli_options import print_parts
    from bench.plan import TEACHER, TRAIN, Plan
    from bench.reports import record_report
    from bench.runner import execute, plan_run

    with rank_errors(rank_logging(level)), process_group() as role:
        ctx = opts.context()
        ctx.seed_everything()
        plan = Plan()
        plan.target(plan_run(opts, ctx, plan))
        # the main process decides (ranks could see the cache differently) and all follow
        training = from_main(
            sorted(
                {plan.jobs[j].kind for j in plan.needed() if not plan.jobs[j].cached}
                & {TRAIN, TEACHER}
            ),
            role,
        )
        if role.world > 1 and training:
            raise ValueError(
                f"this run needs {' and '.join(training)} jobs, which are not sharded yet: "
                "train with one process (bench train), then run with --processes"
            )
        (record,) = execute(plan, ctx)
        if role.main:
            print_parts(record_report(record))
