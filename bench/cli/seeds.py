"""``--seeds`` of `bench run`, `train`, `sweep`, `ablate` and `demo`, and `bench group`.

``--seeds 0,1,2`` (or a count: ``--seeds 3`` is 0,1,2) runs the command's trained rankers once
per training seed, the member of seed K exactly the run with ``--set seed=K``
(:mod:`bench.execution.seeding`): the same cache keys, so the seed-0 member is the plain run
(its entry reused) and a group stopped half-way resumes with its finished members reused. Runs
that train nothing are the same for every seed and run once. Each trained configuration's runs
are then written as a seed group (:mod:`bench.results.groups`) and shown as mean ± sd.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bench.cli.options import console, friendly_errors, print_parts

if TYPE_CHECKING:
    from bench.execution.runner import RunOptions
    from bench.results.records import ResultRecord

Seeds = Annotated[
    str | None,
    typer.Option(
        "--seeds",
        help="Train once per training seed and show each group as mean ± sd: seeds 0,1,2 or a "
        "count (3 = 0,1,2). Seed K's run is exactly the run with --set seed=K (the same cache "
        "keys), so finished seeds are reused; not with --seed or --set seed.",
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
            f"--seeds {value}: a seed group needs two seeds or more (one seed: --set seed=K)"
        )
    if len(set(seeds)) != len(seeds):
        twice = next(s for i, s in enumerate(seeds) if s in seeds[:i])
        raise ValueError(f"--seeds {value}: seed {twice} is given twice")
    return seeds


def member_runs(runs: Sequence[RunOptions], seeds: Sequence[int]) -> list[list[RunOptions]]:
    """Each seed's runs (:func:`bench.execution.seeding.reseed`: a trained ranker's training
    seed set, the rest as they are), after refusing seeds that would change nothing."""
    from bench.execution.seeding import check_seeds, reseed

    check_seeds(runs, seeds)
    return [[reseed(opts, k) for opts in runs] for k in seeds]


def command_line() -> str:
    """This command as typed (``bench ...``), kept in a group record."""
    return " ".join(["bench", *(shlex.quote(a) for a in sys.argv[1:])])


def write_groups(per_seed: Sequence[Sequence[ResultRecord]], command: str) -> list[ResultRecord]:
    """One row per configuration of ``per_seed`` (each seed's records, in the same order): a
    seed group written beside its members and read as its row, or, for a run that trains
    nothing (the same record for every seed), that one record."""
    from bench.results.groups import GroupRecord, make_group, record_seed, write_group

    rows: list[ResultRecord] = []
    for members in zip(*per_seed, strict=True):
        if len({m.path for m in members}) == 1:
            rows.append(members[0])
            continue
        group = write_group(make_group(members, command))
        rows.append(GroupRecord.of(group, sorted(members, key=record_seed)))
    return rows


def report_groups(rows: Sequence[ResultRecord]) -> None:
    """Print each seed group among ``rows``: members, mean ± sd and the seeds' agreement
    (repro-eval)."""
    from bench.reporting.seeds import group_report
    from bench.results.groups import GroupRecord, read_group

    for row in rows:
        if isinstance(row, GroupRecord) and row.path is not None:
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
    from bench.results.groups import GroupRecord, make_group, read_member, record_seed, write_group

    members = [read_member(_record_file(p)) for p in records]
    group = write_group(make_group(members, command), out)
    report_groups([GroupRecord.of(group, sorted(members, key=record_seed))])


@group_app.command("show")
@friendly_errors
def show(group: Annotated[Path, typer.Argument(help="A group record (*-seeds-*.json).")]) -> None:
    """A group's metrics per seed, mean ± sd, and how far its seeds reproduce one another
    (Kendall's tau Union, RBO, RMSE from repro-eval, when installed: crossjem-bench[repro])."""
    from bench.reporting.seeds import group_report
    from bench.results.groups import group_record, read_group

    found = read_group(group)
    print_parts(group_report(found, group_record(found)))
    console.print(f"members: {', '.join(str(found.member_file(m)) for m in found.members)}")
