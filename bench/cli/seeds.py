"""``--seeds`` of `bench run`, `train`, `sweep`, `ablate` and `demo`, and `bench group`.

``--seeds 0,1,2`` (or a count: ``--seeds 3`` is 0,1,2) runs the command once per seed, each run
exactly the run of ``--seed K`` (the same options, so the same cache keys: the member of the
default seed reuses a single-seed run's entry, and a group stopped half-way resumes with its
finished members reused). Each configuration's runs are then written as a seed group
(:mod:`bench.results.groups`) and shown as mean ± sd. Every seed runs in its own run context
(:meth:`RunContext.seed_everything` seeds each job with the run's own seed), one seed after the
other, so ``--processes`` shards each seed's work as it would one ``--seed K`` command's.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from bench.cli.options import console, friendly_errors, print_parts

if TYPE_CHECKING:
    from bench.execution.context import RunContext
    from bench.execution.runner import RunOptions
    from bench.results.groups import GroupRecord
    from bench.results.records import ResultRecord

T = TypeVar("T")

Seeds = Annotated[
    str | None,
    typer.Option(
        "--seeds",
        help="Run once per seed and show the group as mean ± sd: seeds 0,1,2 or a count (3 = "
        "0,1,2). Each seed's run is exactly --seed K's (the same cache keys), so finished seeds "
        "are reused; not with --seed.",
    ),
]


def parse_seeds(value: str | None, seed: int = 0) -> tuple[int, ...] | None:
    """``--seeds`` as the seeds to run (None: not given). One number is a count (``3``: 0, 1,
    2); a list names the seeds. A group needs two seeds or more, each once; ``--seed`` other
    than 0 with it is an error (which would win is not obvious)."""
    if value is None:
        return None
    if seed:
        raise ValueError(f"--seed {seed} and --seeds {value}: give one of them")
    parts = [p.strip() for p in value.split(",")]
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        raise ValueError(
            f"--seeds: expected a count or comma-separated seeds (0,1,2), got {value!r}"
        ) from None
    seeds = tuple(range(numbers[0])) if len(numbers) == 1 else tuple(numbers)
    if any(s < 0 for s in seeds):
        raise ValueError(f"--seeds {value}: seeds are >= 0")
    if len(seeds) < 2:
        raise ValueError(
            f"--seeds {value}: a seed group needs two seeds or more (one seed: --seed K)"
        )
    if len(set(seeds)) != len(seeds):
        twice = next(s for i, s in enumerate(seeds) if s in seeds[:i])
        raise ValueError(f"--seeds {value}: seed {twice} is given twice")
    return seeds


def reseeded(base: RunOptions, seeds: Sequence[int]) -> list[RunOptions]:
    """``base`` once per seed (the options of ``--seed K``)."""
    return [dataclasses.replace(base, seed=k) for k in seeds]


def seed_context(ctx: RunContext, seed: int) -> RunContext:
    """``ctx`` with another seed (device, threads and roots as resolved once)."""
    return dataclasses.replace(ctx, seed=seed)


def refuse_under_launcher(seeds: Sequence[int] | None) -> None:
    """A launch's ranks run one command's plan together; one ``--seed K`` per launch, then
    ``bench group make``, keeps every rank on the same seed."""
    from bench.core.shard import launched

    if seeds and launched():
        raise ValueError(
            "--seeds under torchrun or accelerate launch: launch once per --seed K, then "
            "`bench group make` the records (or use --processes N with --seeds)"
        )


def command_line() -> str:
    """This command as typed (``bench ...``), kept in a group record."""
    return " ".join(["bench", *(shlex.quote(a) for a in sys.argv[1:])])


def each_seed(
    base: RunOptions,
    seeds: Sequence[int],
    ctx: RunContext,
    work: Callable[[RunOptions, RunContext], T],
    shard: Callable[[RunOptions], RunOptions | None] | None = None,
) -> list[T] | None:
    """``work`` once per seed, in order, each with its own options and context; ``shard`` (the
    command's process sharding of one seed's runs) first, which may say to stop (None)."""
    out = []
    for opts in reseeded(base, seeds):
        if shard is not None:
            after = shard(opts)
            if after is None:
                return None
            opts = after
        out.append(work(opts, seed_context(ctx, opts.seed)))
    return out


def write_groups(per_seed: Sequence[Sequence[ResultRecord]], command: str) -> list[GroupRecord]:
    """One seed group per row of ``per_seed`` (the runs of each seed, in the same order: the
    same configuration at one index), written beside its members; their rows."""
    from bench.results.groups import GroupRecord, make_group, write_group

    rows = []
    for members in zip(*per_seed, strict=True):
        group = write_group(make_group(members, command))
        rows.append(GroupRecord.of(group, list(members)))
    return rows


def report_groups(rows: Sequence[GroupRecord]) -> None:
    """Print each group: members, mean ± sd and the seeds' agreement (repro-eval)."""
    from bench.reporting.seeds import group_report
    from bench.results.groups import read_group

    for row in rows:
        assert row.path is not None
        print_parts(group_report(read_group(row.path), row))


# -- bench group ---------------------------------------------------------------------------------
group_app = typer.Typer(
    help=(
        "Seed groups: the runs of one configuration that differ only in the seed, shown as mean "
        "± sd. `bench run --seeds` writes them; `make` assembles one from existing run records; "
        "`show` prints one with how far its seeds reproduce one another (repro-eval)."
    ),
    no_args_is_help=True,
)

MemberPaths = Annotated[
    list[Path],
    typer.Argument(
        help="Member records: run folders (results/runs/...) or record JSON files.",
        show_default=False,
    ),
]


def _record_file(path: Path) -> Path:
    from bench.results.records import RECORD

    return path / RECORD if path.is_dir() else path


@group_app.command("make")
@friendly_errors
def make(
    records: MemberPaths,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Folder to write the group record into (default: beside the first member)."
        ),
    ] = None,
    command: Annotated[
        str, typer.Option(help="The command the members were made with, kept in the record.")
    ] = "",
) -> None:
    """Assemble a seed group from run records of one configuration that differ only in the
    seed (checked: dataset, split, ranker, label, config, run settings, data and code)."""
    from bench.results.groups import GroupRecord, make_group, read_member, write_group

    members = [read_member(_record_file(p)) for p in records]
    group = write_group(make_group(members, command), out)
    report_groups([GroupRecord.of(group, sorted(members, key=lambda r: r.run_config["seed"]))])


@group_app.command("show")
@friendly_errors
def show(
    group: Annotated[Path, typer.Argument(help="A group record (*-seeds-*.json).")],
) -> None:
    """A group's metrics per seed, mean ± sd, and how far its seeds reproduce one another
    (Kendall's tau Union, RBO, RMSE from repro-eval, when installed: crossjem-bench[repro])."""
    from bench.reporting.seeds import group_report
    from bench.results.groups import group_record, read_group

    found = read_group(group)
    print_parts(group_report(found, group_record(found)))
    console.print(f"members: {', '.join(str(found.member_file(m)) for m in found.members)}")
