"""What the `bench` commands share: consoles, option types, error handling, ``--set`` parsing.

Apart from :mod:`bench.cli.main` so the command modules (:mod:`bench.cli.experiments`,
:mod:`bench.cli.reference`) use the same options without importing the command line itself.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from bench.core.io import error_text
from bench.core.progress import err_console

if TYPE_CHECKING:
    from bench.execution.runner import RunOptions

# Wide enough for the comparison tables when output is piped (rich would default to 80 columns).
console = Console(width=None if sys.stdout.isatty() else 160)
log = logging.getLogger("bench")

F = TypeVar("F", bound=Callable[..., Any])

#: options several commands share (those whose help differs per command take it as an argument)
DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data root (default: $BENCH_DATA_DIR, else ./datasets)."),
]
ResultsDir = Annotated[
    Path | None,
    typer.Option(
        "--results-dir", help="Results root (default: $BENCH_RESULTS_DIR, else ./results)."
    ),
]
Device = Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")]
AllRecords = Annotated[
    bool,
    typer.Option(
        "--all-records",
        help="Every record, also those of other data, card or code than now (default: only the "
        "records `bench run` would reuse now).",
    ),
]
RankerSets = Annotated[
    list[str] | None, typer.Option("--set", help="Ranker option key=value (repeatable).")
]


def dataset_option(help: str) -> Any:
    """``--dataset/-d`` with this command's help."""
    return typer.Option("--dataset", "-d", help=help)


def ranker_option(help: str) -> Any:
    """``--ranker/-r`` with this command's help."""
    return typer.Option("--ranker", "-r", help=help)


def format_option(help: str) -> Any:
    """``--format/-f`` with this command's help."""
    return typer.Option("--format", "-f", help=help)


#: what Ctrl-C leaves behind, said when it happens (exit code 130, as a shell would give)
INTERRUPTED = (
    "interrupted: finished results and trained models are kept and nothing half-written is "
    "taken for finished; rerun the same command to go on (training resumes from its last "
    "checkpoint)"
)


def friendly_errors(func: F) -> F:
    """Known input errors, unwritable folders and OS errors become one red line and exit code 2
    instead of a traceback (-v re-raises them); Ctrl-C says what was kept and exits 130, and
    SIGTERM does the same with 143 (:func:`bench.core.shard.sigterm_stops`; a rank of a
    multi-process command keeps SIGTERM's default: its parent stops the command)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import contextlib

        from bench.core.io import StorageError
        from bench.core.shard import sigterm_stops, spawned
        from bench.data.files import DatasetError
        from rankers import RankerError

        try:
            with contextlib.nullcontext() if spawned() else sigterm_stops():
                return func(*args, **kwargs)
        except (DatasetError, RankerError, StorageError, ValueError, OSError, ImportError) as exc:
            if log.isEnabledFor(logging.DEBUG):
                raise
            err_console.print(f"[bold red]error:[/] {escape(error_text(exc))}")
            raise typer.Exit(2) from None
        except KeyboardInterrupt as exc:
            # Ctrl-C: 130; a stop signal turned into an interrupt (bench.core.shard.Stopped): 128 +
            # it
            err_console.print(f"[bold yellow]{escape(INTERRUPTED)}[/]")
            raise typer.Exit(128 + getattr(exc, "signum", 2)) from None

    return wrapper  # type: ignore[return-value]


def open_unit(value: float) -> float:
    """A probability strictly between 0 and 1 (Typer's ranges are closed)."""
    if not 0.0 < value < 1.0:
        raise typer.BadParameter(f"{value} is not in the open range 0 < x < 1.")
    return value


#: count options shared by several commands, with their declared ranges
Seed = Annotated[
    int,
    typer.Option(
        min=0,
        help="Seed for python, numpy and torch (sampling, scoring). A trained ranker's new "
        "weights and training order follow its option seed instead (--set seed=K; --seeds): "
        "--seed alone trains the same weights under another key.",
    ),
]


def threads_option(help: str) -> Any:
    """``--threads`` with this command's help and the one declared range (at least 1), so that
    no command hands torch a count it rejects (-1) or silently reads as "not set" (0)."""
    return typer.Option(min=1, help=help)


Threads = Annotated[int | None, threads_option("torch intra-op threads (default: torch's).")]
Subset = Annotated[int | None, typer.Option(min=1, help="Rank only the first N queries.")]
Processes = Annotated[
    int,
    typer.Option(
        min=1,
        help="Score in N local processes (CPU: gloo; started with torch.multiprocessing spawn), "
        "queries split by candidate count, the main one writing; models to train are trained "
        "first in this one process, so models and run files are those of one process with the "
        "same --threads (each process's threads). Under torchrun or accelerate launch "
        "(RANK/WORLD_SIZE set) the launch's processes are used instead, and list trainers "
        "(monobert, rankt5, crossjem) train data-parallel on them (a model of its own).",
    ),
]
TrainSubset = Annotated[int | None, typer.Option(min=1, help="Train on the first N queries.")]


def parse_sets(pairs: list[str] | None, merge: bool = False) -> dict[str, str]:
    """``--set key=value`` pairs as a mapping. A key given twice is an error naming it (the last
    value silently winning would run what the user did not ask for); with ``merge`` (a sweep's
    values) its values are joined instead: ``--set lr=1e-4 --set lr=3e-5`` is ``lr=1e-4,3e-5``."""
    options: dict[str, str] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"--set expects key=value, got {pair!r}")
        key, value = (part.strip() for part in pair.split("=", 1))
        if key in options and merge:
            options[key] = f"{options[key]},{value}"
        elif key in options:
            raise ValueError(
                f"--set {key} is given twice ({key}={options[key]}, {key}={value}); give it once"
            )
        else:
            options[key] = value
    return options


def ranker_overrides(sets: list[str] | None, **flags: str | None) -> dict[str, str]:
    """``--set key=value`` pairs, then the option flags given (``--model``, ``--loss``...)."""
    options = parse_sets(sets)
    options.update({key: value for key, value in flags.items() if value})
    return options


def print_parts(parts: list[Any]) -> None:
    for part in parts:
        console.print(part)


def emit(out: Any) -> None:
    """Print a rendered table: rich objects through the console, text as is."""
    if isinstance(out, str):
        typer.echo(out)
    else:
        console.print(out)


def run_options(ranker: str, dataset: str, **fields: Any) -> RunOptions:
    """The :class:`~bench.execution.runner.RunOptions` of a command that runs rankers (run,
    train, demo, ablate, sweep): its own ``fields`` plus what every such command sets alike -
    progress shown (a bar on a terminal, else a log line every tenth) and list trainers training
    on all of a launch's processes (one outside torchrun or accelerate launch)."""
    from bench.core.shard import launch_world
    from bench.execution.runner import RunOptions

    return RunOptions(
        ranker=ranker, dataset=dataset, progress=True, train_processes=launch_world(), **fields
    )


# -- comma-separated option values (bench latency, plot) -------------------------------------
def csv_values(value: str | None, convert: Callable[[str], Any] = str) -> tuple[Any, ...]:
    """``a,b,c`` -> its non-empty parts, each through ``convert``."""
    return tuple(convert(v.strip()) for v in value.split(",") if v.strip()) if value else ()


def int_list(option: str, value: str) -> tuple[int, ...]:
    """Comma-separated integers; a bad one is reported with the option's name."""
    try:
        return csv_values(value, int)
    except ValueError:
        raise ValueError(f"{option}: expected comma-separated integers, got {value!r}") from None


def batch_sizes(option: str, value: str) -> tuple[int | str, ...]:
    """Comma-separated batch sizes: integers or ``all`` (every pair of a call)."""
    try:
        return csv_values(value, lambda v: v if v == "all" else int(v))
    except ValueError:
        raise ValueError(
            f"{option}: expected comma-separated integers or 'all', got {value!r}"
        ) from None


def batch_size_sets(pairs: list[str] | None) -> dict[str, tuple[int | str, ...]]:
    """``--batch-sizes NAME=32,64,all`` (repeatable) -> {ranker name: batch sizes}."""
    from rankers import canonical_name

    out: dict[str, tuple[int | str, ...]] = {}
    for pair in pairs or []:
        name, sep, sizes = pair.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--batch-sizes expects NAME=32,64,all, got {pair!r}")
        out[canonical_name(name)] = batch_sizes("--batch-sizes", sizes)
    return out
