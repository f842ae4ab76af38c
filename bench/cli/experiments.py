"""`bench demo`, `ablate` and `sweep`: commands that run many `bench run` jobs. Each takes
``--plan``: the jobs of every run in one table (:func:`bench.reporting.reports.plan_table`), then
exit without work. Registered on the command line by :mod:`bench.cli.main`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from bench.cli.options import (
    DataDir,
    Device,
    Processes,
    ResultsDir,
    Seed,
    Subset,
    Threads,
    TrainSubset,
    console,
    dataset_option,
    emit,
    format_option,
    log,
    parse_sets,
    ranker_option,
    run_options,
)
from bench.cli.seeds import Seeds, parse_seeds
from bench.experiments.ablate import ABLATIONS

if TYPE_CHECKING:
    from bench.execution.context import RunContext
    from bench.execution.runner import RunOptions
    from bench.results.records import ResultRecord

PlanOnly = Annotated[
    bool,
    typer.Option(
        "--plan",
        help="Print the jobs (train, dev baselines, score, evaluate), whether each is cached "
        "and why not, then exit without work.",
    ),
]


def show_plan(runs: Sequence[RunOptions], ctx: RunContext) -> None:
    """Print the plan of ``runs`` (shared jobs once) and do no work."""
    from bench.execution.runner import plan_runs
    from bench.reporting.reports import plan_table

    console.print(plan_table(plan_runs(runs, ctx)))


def process_warnings(processes: int, launched: bool, cores: int) -> list[str]:
    """What to say before ``--processes N`` runs: N ignored under a launcher (which started the
    processes itself), or more processes than CPU cores (they share cores, and each loads the
    model: more processes are then slower, not faster)."""
    if launched and processes > 1:
        return [
            f"--processes {processes} is ignored under a launcher: the launch's processes "
            "(torchrun --nproc_per_node, accelerate --num_processes) do the work"
        ]
    if processes > cores:
        return [
            f"--processes {processes} on {cores} CPU cores: the processes share the cores and "
            f"each loads the model, so this is slower than --processes {cores}"
        ]
    return []


def shard_work(runs: Sequence[RunOptions], base: RunOptions, processes: int) -> RunOptions | None:
    """Do the work of ``runs`` over ``processes`` (or a launch's) processes first
    (:func:`bench.execution.scale.execute_runs`). Returns the options this process goes on with, as
    without processes: ``base`` when nothing was sharded, else ``base`` without ``force`` (the
    processes have just computed every entry, so the report reads them instead of computing
    them again in one process); None when this process should stop (a launch's other rank)."""
    from bench.core.shard import current_role, launched, single_process_from_accelerate
    from bench.execution.scale import execute_runs

    if single_process_from_accelerate():
        log.warning(
            "accelerate launch --cpu started one process (its CPU launcher starts more only "
            "under mpirun); for N local processes use accelerate launch --multi_gpu "
            "--num_processes N (CPU works), torchrun --nproc_per_node N or --processes N"
        )
    for warning in process_warnings(processes, launched(), os.cpu_count() or 1):
        log.warning(warning)
    if processes == 1 and not launched():
        return base
    world = processes if processes > 1 else current_role().world
    if not execute_runs(runs, base, processes, logging.getLogger().getEffectiveLevel()):
        return None
    return dataclasses.replace(base, force=False, written_by=world)


def plan_or_shard(
    runs: Sequence[RunOptions], base: RunOptions, plan: bool, processes: int
) -> RunOptions | None:
    """The common tail of the commands that run jobs: with ``--plan``, print the plan of
    ``runs`` and return None (no work); else shard them over ``processes``
    (:func:`shard_work`) and return the options this process goes on with (None: stop here)."""
    if plan:
        show_plan(runs, base.context())
        return None
    return shard_work(runs, base, processes)


def records_of(
    base: RunOptions,
    seeds: Sequence[int] | None,
    runs_of: Callable[[RunOptions], list[RunOptions]],
    work: Callable[[list[RunOptions], RunContext], list[ResultRecord]],
    plan: bool,
    processes: int,
) -> list[ResultRecord] | None:
    """The common body of the commands that run jobs: the runs ``runs_of(base)``, once or, with
    ``seeds``, once per training seed (:func:`bench.cli.seeds.member_runs`); with ``--plan``
    their plan (shared jobs once), and None; else sharded (:func:`shard_work`), then ``work``
    (a list of runs -> their records), each trained configuration's records of the seeds
    written as a seed group and returned as its row (:class:`bench.results.groups.GroupRecord`).
    None: stop (the plan shown, or a launch's other rank)."""
    from bench.cli.seeds import command_line, member_runs, write_groups

    runs = runs_of(base)
    per_seed = [runs] if seeds is None else member_runs(runs, seeds)
    every = [opts for seed_runs in per_seed for opts in seed_runs]
    if (after := plan_or_shard(every, base, plan, processes)) is None:
        return None
    ctx = after.context()
    # after sharding, read what the processes wrote (force off), as one run of the base would
    done = [
        work(
            [dataclasses.replace(o, force=after.force, written_by=after.written_by) for o in rs],
            ctx,
        )
        for rs in per_seed
    ]
    return done[0] if seeds is None else write_groups(done, command_line())


def run_seeds(opts: RunOptions, seeds: Sequence[int], plan: bool, processes: int) -> None:
    """`bench run --seeds`: the plan of every seed's run, or each seed's run in turn, then their
    seed group written and shown."""
    from bench.cli.seeds import report_groups
    from bench.execution.runner import run as run_one

    work = lambda runs, ctx: [run_one(o, ctx) for o in runs]  # noqa: E731
    rows = records_of(opts, seeds, lambda one: [one], work, plan, processes)
    if rows is not None:
        report_groups(rows)


def demo(
    dataset: Annotated[
        str | None, dataset_option("Dataset (default: sodq, else a local set).")
    ] = None,
    device: Device = "auto",
    seed: Seed = 0,
    threads: Threads = None,
    subset: Annotated[
        int | None, typer.Option(min=1, help="Rank only the first N test queries.")
    ] = None,
    force: Annotated[bool, typer.Option(help="Recompute cached rows.")] = False,
    fmt: Annotated[str, format_option("Table format.")] = "table",
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
    plan: PlanOnly = False,
    processes: Processes = 1,
    seeds: Seeds = None,
) -> None:
    """The main job: run the paper's rankers (the main suite: BM25, DPR zero-shot and fine-tuned,
    ANCE, ColBERT, monoBERT, RankT5, CROSS-JEM) on one dataset and print the comparison
    (with --seeds 0,1,2: each row the mean ± sd of its seed group)."""
    from bench.core.settings import results_root
    from bench.experiments.suite import choose_dataset, run_suite, suite_runs
    from bench.reporting.tables import build_comparison, render
    from bench.results.records import load_records

    name, why = choose_dataset(dataset, data_dir)
    console.print(f"[bold]dataset:[/] {name} - {why}")
    base = run_options(
        "",
        name,
        device=device,
        seed=seed,
        threads=threads,
        subset=subset,
        force=force,
        data_dir=data_dir,
        results_dir=results_dir,
    )
    chosen = parse_seeds(seeds, seed)
    records = records_of(
        base,
        chosen,
        lambda one: suite_runs(name, one),
        lambda runs, ctx: run_suite(name, base, ctx=ctx, runs=runs),
        plan,
        processes,
    )
    if records is None:
        return
    if chosen is None:  # as written on disk (a seed group's rows are read from there already)
        wanted = {r.path for r in records}
        root = results_root(results_dir)
        records = [r for r in load_records(root, dataset=name) if r.path in wanted]
    emit(render(build_comparison(records), fmt))


def ablate(
    dataset: Annotated[str, dataset_option("Dataset with train/dev/test.")],
    what: Annotated[
        str,
        typer.Option(
            help="What to vary: "
            + "; ".join(f"{k}: {a.describe()}" for k, a in ABLATIONS.items())
            + "."
        ),
    ] = "loss",
    ranker: Annotated[
        str | None,
        ranker_option(
            "Ranker to ablate; it must declare the varied option (default: the ablation's own)."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Shared option key=value (repeatable).")
    ] = None,
    device: Device = "auto",
    seed: Annotated[int, typer.Option(min=0, help="Seed shared by every variant.")] = 0,
    threads: Threads = None,
    subset: Subset = None,
    train_subset: TrainSubset = None,
    fmt: Annotated[str, format_option("Table format.")] = "table",
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
    plan: PlanOnly = False,
    processes: Processes = 1,
    seeds: Seeds = None,
) -> None:
    """Reproduce the paper's ablation table: one training setting varied, all else equal
    (with --seeds 0,1,2: each variant the mean ± sd of its seed group)."""
    from bench.experiments.ablate import ablation, ablation_runs, check_ranker, run_ablation
    from bench.reporting.tables import build_comparison, render

    spec = ablation(what)
    ranker = ranker or spec.ranker
    check_ranker(what, ranker)
    base = run_options(
        ranker,
        dataset,
        options=parse_sets(set_),
        device=device,
        seed=seed,
        threads=threads,
        subset=subset,
        train_subset=train_subset,
        fit=True,
        data_dir=data_dir,
        results_dir=results_dir,
    )
    records = records_of(
        base,
        parse_seeds(seeds, seed),
        lambda one: ablation_runs(what, one),
        lambda runs, ctx: run_ablation(what, base, ctx, runs=runs),
        plan,
        processes,
    )
    if records is None:
        return
    table = build_comparison(records, baseline=records[0].label, reference=False)
    emit(render(table, fmt))
    if what == "item-order" and fmt == "table":
        from bench.reporting.reports import list_tokens_table, wordpiece_tokenizer

        splits = list(dict.fromkeys(r.split for r in records))
        console.print(list_tokens_table(dataset, splits, data_dir, wordpiece_tokenizer()))


def sweep(
    ranker: Annotated[str, ranker_option("Ranker to tune.")],
    dataset: Annotated[str, dataset_option("Dataset with train/dev/test.")],
    set_: Annotated[
        list[str],
        typer.Option(
            "--set",
            help="Option and its values to try, key=v1,v2 (repeatable: a grid; a key given "
            "again adds values).",
        ),
    ],
    measure: Annotated[str, typer.Option(help="Dev measure that chooses.")] = "AP@10",
    write: Annotated[
        bool,
        typer.Option(
            "--write/--no-write",
            help="Write the chosen settings into the ranker's settings file (datasets.DATASET).",
        ),
    ] = True,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Write this sweep's choice even when an earlier sweep's choice, still in the "
            "settings file, scored better on the same dev split.",
        ),
    ] = False,
    device: Device = "auto",
    seed: Annotated[int, typer.Option(min=0, help="Seed shared by every combination.")] = 0,
    threads: Threads = None,
    train_subset: TrainSubset = None,
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
    plan: PlanOnly = False,
    processes: Processes = 1,
    seeds: Seeds = None,
) -> None:
    """Tune a ranker on dev: train every combination of the --set values, score dev and test,
    choose the best dev score. Test is reported, never used to choose. With --seeds 0,1,2 every
    combination runs under each seed and the best mean dev score over the seeds chooses.

    Example: bench sweep -r crossjem -d wikiqa --set lr=3e-5,1e-4 --set epochs=3,6

    Trained models and runs are cached as with `bench run`, so a repeated or extended sweep
    trains only what is new. The chosen settings are merged into rankers/configs/RANKER.yaml
    under datasets.DATASET with the sweep table as a comment above them, after the earlier
    sweeps' (--no-write: print only); an earlier choice that scored better on the same dev split
    stays unless --replace. The sweep is kept in results/sweeps/DATASET/. An option that only
    changes speed (role runtime, e.g. batch_size) cannot be swept.
    """
    from bench.cli.seeds import member_runs
    from bench.core.io import ensure_writable
    from bench.execution.ranker_settings import settings_file
    from bench.experiments.sweep import (
        check_settings_writable,
        parse_grid,
        run_sweep,
        save_sweep,
        sweep_runs,
        table_lines,
        write_chosen,
    )
    from rankers import canonical_name

    grid = parse_grid(parse_sets(set_, merge=True))
    command = " ".join(
        [
            f"bench sweep -r {ranker} -d {dataset}",
            *(f"--set {k}={','.join(v)}" for k, v in grid.items()),
            *([f"--train-subset {train_subset}"] if train_subset else []),
            *([f"--seed {seed}"] if seed else []),
            *([f"--seeds {seeds}"] if seeds else []),
        ]
    )
    chosen = parse_seeds(seeds, seed)
    base = run_options(
        ranker,
        dataset,
        device=device,
        seed=seed,
        threads=threads,
        train_subset=train_subset,
        data_dir=data_dir,
        results_dir=results_dir,
    )
    ctx = base.context()
    _, runs = sweep_runs(base, grid, measure, ctx)
    every = [o for _, test, dev in runs for o in (test, dev)]
    if chosen is not None:  # each combination's runs once per training seed
        every = [o for seed_runs in member_runs(every, chosen) for o in seed_runs]
    if plan:
        return show_plan(every, ctx)
    if write and not train_subset:
        check_settings_writable(settings_file(canonical_name(ranker)))
    ensure_writable(ctx.results_root / "sweeps")  # the sweep record is written after the work
    if (after := shard_work(every, base, processes)) is None:
        return
    base = after
    done = run_sweep(base, grid, measure=measure, command=command, ctx=ctx, seeds=chosen)
    typer.echo("\n".join(table_lines(done)))
    saved = save_sweep(done, ctx.results_root)
    typer.echo(f"sweep record: {saved}")
    if write and train_subset:
        typer.echo(
            "settings file not changed: a sweep on --train-subset would set the whole "
            f"dataset's settings; add the chosen settings under datasets.{dataset} if meant"
        )
    elif write:
        written = write_chosen(done, replace=replace)
        if written.kept:
            log.warning("%s: datasets.%s %s", written.path, dataset, written.kept)
        else:
            typer.echo(f"wrote datasets.{dataset} = {written.settings} to {written.path}")
