"""The `bench` command line: thin Typer wrappers over the runner, tables and checks."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.logging import RichHandler
from rich.markup import escape

from bench.cli import experiments as cli_experiments
from bench.cli.latency import latency, latency_table
from bench.cli.options import (
    AllRecords,
    DataDir,
    Device,
    Processes,
    RankerSets,
    ResultsDir,
    Seed,
    Subset,
    Threads,
    TrainSubset,
    console,
    dataset_option,
    emit,
    err_console,
    format_option,
    friendly_errors,
    open_unit,
    print_parts,
    ranker_option,
    ranker_overrides,
    run_options,
)
from bench.cli.reference import reference_app
from bench.cli.seeds import Seeds, group_app, parse_seeds

# With MKL_DYNAMIC on (MKL's default) MKL chooses a thread count per call, and another count sums
# in another order: the CI's one-epoch CROSS-JEM training differed in its last bits from run to
# run (6 runs, 6 weight hashes; with it off, 4 of 4 equal; longer trainings still vary:
# docs/stack.md). Set before torch first calls MKL (the CLI imports torch lazily); spawned ranks
# and launched processes inherit it.
os.environ.setdefault("MKL_DYNAMIC", "FALSE")

app = typer.Typer(
    help=(
        "crossjem-bench: compare short-text re-rankers (accuracy and latency) on the same "
        "candidate lists.\n\nData root: --data-dir, else $BENCH_DATA_DIR, else ./datasets. "
        "Results: --results-dir, else $BENCH_RESULTS_DIR, else ./results."
    ),
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
)


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Warnings and errors only.")] = False,
) -> None:
    # OpenMP spin-waiting makes multi-threaded CPU passes many times slower whenever another
    # process shares the cores; passive waiting keeps timings honest (recorded in provenance).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(
        level=level,
        format="%(message)s",
        handlers=[RichHandler(console=err_console, show_path=False, rich_tracebacks=False)],
        force=True,
    )
    for noisy in (
        "httpx",
        "urllib3",
        "filelock",
        "huggingface_hub",
        "sentence_transformers",
        "accelerate",
    ):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


# -- datasets ------------------------------------------------------------------------------------
datasets_app = typer.Typer(no_args_is_help=False, rich_markup_mode="markdown")
app.add_typer(datasets_app, name="datasets")


@datasets_app.callback(invoke_without_command=True)
@friendly_errors
def datasets(
    ctx: typer.Context,
    data_dir: DataDir = None,
    wordpiece: Annotated[
        bool, typer.Option(help="Also count WordPiece tokens (MiniLM-L6 tokenizer).")
    ] = True,
) -> None:
    """List datasets under the data root with split sizes, candidates per query and lengths
    (`bench datasets synth` writes a synthetic one)."""
    if ctx.invoked_subcommand is not None:
        return
    from bench.reporting.reports import datasets_table, wordpiece_tokenizer

    console.print(datasets_table(data_dir, wordpiece_tokenizer() if wordpiece else None))


@datasets_app.command("synth")
@friendly_errors
def datasets_synth(
    out: Annotated[Path, typer.Option(help="New folder to write (its name is the dataset's).")],
    queries: Annotated[int, typer.Option(help="Queries.")] = 100,
    items: Annotated[int, typer.Option(help="Candidates per query (N).")] = 100,
    collection: Annotated[int, typer.Option(help="Items in the collection (M >= N).")] = 10_000,
    layout: Annotated[str, typer.Option(help="trec or mteb.")] = "trec",
    length: Annotated[
        str, typer.Option(help="titles (semeval16b lengths) or sentences (wikiqa lengths).")
    ] = "titles",
    seed: Annotated[int, typer.Option(help="Seed: the same seed writes the same files.")] = 0,
    vocab: Annotated[
        str,
        typer.Option(
            help="Words: pseudo (syllables, no file), wordpiece (MiniLM-L6's vocab.txt: one "
            "WordPiece token per word) or a word-list file, most frequent first."
        ),
    ] = "pseudo",
) -> None:
    """Write a synthetic data set (TREC or MTEB layout, with a card) for measuring cost as the
    work grows, offline; its texts are pseudo-words, so quality figures on it mean nothing."""
    from bench.data.synth import SynthSpec, write_synth

    if vocab == "wordpiece":
        from rankers.io.models import resolve_model

        vocab = str(Path(resolve_model("minilm-l6").path) / "vocab.txt")
    spec = SynthSpec(
        queries, items, collection, layout, length, seed, "" if vocab == "pseudo" else vocab
    )
    typer.echo(f"wrote {write_synth(spec, out)}")


# -- rankers -------------------------------------------------------------------------------------
@app.command()
@friendly_errors
def rankers() -> None:
    """List registered rankers with their options (set with --set key=value): default, role,
    valid range and what each does."""
    from bench.reporting.reports import ranker_options_report

    print_parts(ranker_options_report())


# -- run / train ---------------------------------------------------------------------------------
@app.command()
@friendly_errors
def run(
    ranker: Annotated[str, ranker_option("Ranker name (bench rankers).")],
    dataset: Annotated[str, dataset_option("Dataset (bench datasets).")],
    split: Annotated[
        str | None, typer.Option(help="Split to rank (default: the dataset's).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model alias, Hugging Face id or local path (neural rankers)."),
    ] = None,
    loss: Annotated[str | None, typer.Option(help="Training loss (encoder rankers).")] = None,
    teacher: Annotated[str | None, typer.Option(help="Teacher ranker name or folder.")] = None,
    set_: RankerSets = None,
    fit: Annotated[
        bool,
        typer.Option("--fit/--no-fit", help="Fine-tune on train (dev selects) before ranking."),
    ] = False,
    device: Device = "auto",
    seed: Seed = 0,
    threads: Threads = None,
    batch_queries: Annotated[int, typer.Option(min=1, help="Queries per scoring call.")] = 1,
    warmup: Annotated[int, typer.Option(min=0, help="Untimed warm-up queries before timing.")] = 5,
    subset: Subset = None,
    train_subset: TrainSubset = None,
    force: Annotated[bool, typer.Option(help="Recompute even if a result exists.")] = False,
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
    plan: cli_experiments.PlanOnly = False,
    processes: Processes = 1,
    seeds: Seeds = None,
) -> None:
    """Rank a dataset split with one ranker; write run file, per-query metrics and a record.

    Settings: rankers/configs/RANKER.yaml, then --model/--loss/--teacher/--set. Rankers with an
    untrained head (crossjem, monobert) are trained first unless --set checkpoint=DIR. Results go
    to results/runs/DATASET/RANKER/SPLIT-HASH/; a rerun with the same configuration reuses the
    record unless --force. --plan lists the jobs (teachers, dev baselines, training, scoring,
    evaluation), cached or not and why, and exits without work. --seeds 0,1,2 trains and runs it
    once per training seed (each exactly --set seed=K's run) and writes a seed group of the runs
    (mean ± sd).
    """
    from bench.execution.runner import run as run_one
    from bench.reporting.reports import record_report

    opts = run_options(
        ranker,
        dataset,
        split=split,
        options=ranker_overrides(set_, model=model, loss=loss, teacher=teacher),
        device=device,
        seed=seed,
        threads=threads,
        batch_queries=batch_queries,
        warmup=warmup,
        subset=subset,
        fit=fit,
        train_subset=train_subset,
        force=force,
        data_dir=data_dir,
        results_dir=results_dir,
    )
    if (chosen := parse_seeds(seeds, seed)) is not None:
        return cli_experiments.run_seeds(opts, chosen, plan, processes)
    if (after := cli_experiments.plan_or_shard([opts], opts, plan, processes)) is None:
        return  # the plan shown, or a launch's other rank: the main one reports
    opts = after
    print_parts(record_report(run_one(opts, opts.context())))


@app.command()
@friendly_errors
def train(
    ranker: Annotated[str, ranker_option("Trainable ranker name.")],
    dataset: Annotated[str, dataset_option("Dataset with a train split.")],
    model: Annotated[str | None, typer.Option(help="Base model alias, hub id or path.")] = None,
    loss: Annotated[
        str | None,
        typer.Option(
            help="bce, ce, listnet, rpl (as the paper writes it), rpl-self or pl (encoder rankers)."
        ),
    ] = None,
    teacher: Annotated[
        str | None, typer.Option(help="Teacher: a ranker name (trained first) or a saved folder.")
    ] = None,
    set_: RankerSets = None,
    device: Device = "auto",
    seed: Seed = 0,
    threads: Threads = None,
    train_subset: TrainSubset = None,
    force: Annotated[bool, typer.Option(help="Retrain even if a model exists.")] = False,
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
    plan: cli_experiments.PlanOnly = False,
    seeds: Seeds = None,
) -> None:
    """Train a ranker on the train split (dev selects the epoch) and cache the model.

    Settings: rankers/configs/RANKER.yaml (default, then the dataset's section), then the flags.
    A teacher given by name (CROSS-JEM's default: monobert) is trained first on the same data.
    An interrupted training resumes. `bench run` with the same options reuses the model.
    --seeds 0,1,2 trains once per training seed (each exactly --set seed=K's model).
    """
    from bench.cli.seeds import member_runs
    from bench.core.shard import process_group
    from bench.execution.plan import Plan
    from bench.execution.runner import plan_train
    from bench.execution.runner import train as train_one

    opts = run_options(
        ranker,
        dataset,
        options=ranker_overrides(set_, model=model, loss=loss, teacher=teacher),
        device=device,
        seed=seed,
        threads=threads,
        fit=True,
        train_subset=train_subset,
        force=force,
        data_dir=data_dir,
        results_dir=results_dir,
    )
    chosen = parse_seeds(seeds, seed)
    runs = [one for (one,) in member_runs([opts], chosen)] if chosen else [opts]
    if plan:
        from bench.reporting.reports import plan_table

        ctx, shown = opts.context(), Plan()
        for one in runs:  # one plan: the jobs of every seed, shared ones once
            plan_train(one, ctx, shown)
        return console.print(plan_table(shown))
    for one in runs:
        with process_group() as role:
            summary = train_one(one, one.context())
        if role.main:
            shown_summary = {k: v for k, v in summary.items() if k not in ("train", "dev")}
            console.print_json(data=shown_summary)


# -- compare / check -----------------------------------------------------------------------------
@app.command()
@friendly_errors
def compare(
    dataset: Annotated[str | None, dataset_option("Only this dataset.")] = None,
    split: Annotated[str | None, typer.Option(help="Only this split.")] = None,
    metrics: Annotated[
        str | None, typer.Option(help="Comma-separated metric names (default: all recorded).")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="Ranker or label for significance tests (default bm25).")
    ] = None,
    test: Annotated[str, typer.Option(help="ttest or randomisation (Holm-corrected).")] = "ttest",
    alpha: Annotated[
        float, typer.Option(callback=open_unit, help="Significance level, 0 < alpha < 1.")
    ] = 0.05,
    reference: Annotated[
        bool, typer.Option(help="Show the paper's numbers for sodq / msmarco-titles.")
    ] = True,
    fmt: Annotated[str, format_option("table, markdown, csv, latex or json.")] = "table",
    all_records: AllRecords = False,
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
) -> None:
    """Compare every recorded ranker per dataset split, laid out like the paper's main table.
    Rows are the records `bench run` would reuse now (same data, card and code); the runs of a
    seed group (`bench run --seeds`, `bench group make`) are one row, mean ± sd over the seeds."""
    import json

    from bench.core.settings import results_root
    from bench.execution.selection import load_selected
    from bench.reporting.tables import build_comparison, render, render_json

    selection = load_selected(
        results_root(results_dir), data_dir, dataset=dataset, split=split, all_records=all_records
    )
    from bench.results.groups import collapse_groups, load_groups

    seed_groups = load_groups(results_root(results_dir), dataset, split)
    records, left_out = collapse_groups(selection.records, seed_groups), selection.summary()
    if not records:
        raise ValueError(
            f"no results under {results_root(results_dir)}"
            + (f" for dataset {dataset!r}" if dataset else "")
            + (f" of the data and code as they are now ({left_out})" if left_out else "")
            + "; run `bench run` first"
        )
    groups: dict[tuple[str, str], list[Any]] = {}
    for rec in records:
        groups.setdefault((rec.dataset, rec.split), []).append(rec)
    wanted = [m.strip() for m in metrics.split(",")] if metrics else None
    json_out: list[Any] = []
    for (_ds, _sp), recs in sorted(groups.items()):
        table = build_comparison(
            recs, metrics=wanted, baseline=baseline, test=test, alpha=alpha, reference=reference
        )
        if fmt == "json":
            json_out.extend(json.loads(render_json(table)))
        else:
            emit(render(table, fmt))
    if fmt == "json":
        typer.echo(json.dumps(json_out, indent=2))
    if left_out:
        err_console.print(escape(left_out), highlight=False)


@app.command()
@friendly_errors
def check(
    expected: Annotated[
        list[Path] | None,
        typer.Option(
            "--expected", "-e", help="Expected-value YAML files (default results/expected/*.yaml)."
        ),
    ] = None,
    all_records: AllRecords = False,
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
) -> None:
    """Compare recorded results with expected values; exit 1 on any FAIL or missing result, and
    when the files would check nothing (no entries, or none about a dataset with records).
    Each entry reads the records `bench run` would reuse now (same data, card and code)."""
    from bench.core.settings import expected_dir, results_root
    from bench.execution.selection import load_selected
    from bench.latency.records import check_records, load_latency_records
    from bench.reporting.checks import NothingToCheck, check_report, format_check_line

    files = expected or sorted(expected_dir().glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"no expected-value files in {expected_dir()}")
    root = results_root(results_dir)
    selection = load_selected(root, data_dir, all_records=all_records)
    latency = check_records(load_latency_records(root))
    left_out = [r for recs in selection.left_out.values() for r in recs]
    try:
        report = check_report(
            files, selection.records + latency, recorded={r.dataset for r in left_out}
        )
    except NothingToCheck as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
    for res in report.results:
        line = format_check_line(res)
        style = "green" if res.status == "OK" else "bold red"
        console.print(f"[{style}]{escape(line)}[/]", highlight=False)
    console.print(escape(report.summary()), highlight=False)
    if selection.summary():
        console.print(escape(str(selection.summary())), highlight=False)
    if any(r.status != "OK" for r in report.results):
        raise typer.Exit(1)


# -- latency / plot ------------------------------------------------------------------------------
# `bench latency` lives in bench/cli/latency.py (already wrapped in friendly_errors)
app.command()(latency)
app.command("latency-table")(latency_table)


@app.command()
@friendly_errors
def plot(
    dataset: Annotated[str, dataset_option("Dataset with results.")],
    split: Annotated[str | None, typer.Option(help="Split (default: test).")] = None,
    metric: Annotated[str | None, typer.Option(help="AP@10 or RR@10 (default: AP@10).")] = None,
    out: Annotated[
        Path | None, typer.Option(help="PNG path (default under results/plots/).")
    ] = None,
    use_benchmark: Annotated[
        bool, typer.Option(help="Latency from `bench latency` records instead of `bench run`.")
    ] = False,
    n: Annotated[
        int | None, typer.Option(min=1, help="With --use-benchmark: the N to take.")
    ] = None,
    all_records: AllRecords = False,
    growth: Annotated[
        bool,
        typer.Option(
            help="Instead: latency against N for every ranker, from `bench latency` records "
            "(one line per column, log-log), and the table of it."
        ),
    ] = False,
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
) -> None:
    """Accuracy against p50 latency for every ranker with results; Pareto front marked (or,
    with --growth, latency against N)."""
    from bench.reporting.plot import pareto_front, plot_dataset

    if growth:
        from bench.reporting.plot_growth import growth_table, plot_latency_growth

        grown, series = plot_latency_growth(dataset, split, out=out, results_dir=results_dir)
        typer.echo(growth_table(series), nl=False)
        console.print(f"wrote {grown} ({len(series)} columns)")
        return

    path, points = plot_dataset(
        dataset,
        split,
        metric=metric,
        out=out,
        results_dir=results_dir,
        benchmark_n=n,
        use_benchmark=use_benchmark,
        data_dir=data_dir,
        all_records=all_records,
    )
    console.print(f"wrote {path} ({len(points)} rankers)")
    console.print("Pareto front: " + ", ".join(p.label for p in pareto_front(points)))


# -- export --------------------------------------------------------------------------------------
@app.command()
@friendly_errors
def export(
    source: Annotated[
        Path,
        typer.Argument(
            help="A saved ranker folder (`bench train` writes them under "
            "results/models/DATASET/RANKER/KEY; the folder holds ranker.json).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Argument(
            help="The folder to write: new, empty, or an earlier export (with --overwrite); "
            "never SOURCE or a results root, nor a folder inside or above one.",
            show_default=False,
        ),
    ],
    overwrite: Annotated[
        bool,
        typer.Option(
            help="Replace OUT if it holds an earlier export (a folder bench export wrote, "
            "holding only the files its bench-export.json lists; any other non-empty OUT is "
            "refused, naming what it holds)."
        ),
    ] = False,
    results_dir: ResultsDir = None,
) -> None:
    """Write a trained model as a folder another library loads, so it serves outside bench.

    monobert -> a sentence-transformers `CrossEncoder` (`predict` gives bench's scores);
    dpr, ance -> a `SentenceTransformer` (prompts and similarity included: `encode_query`,
    `encode_document`, `similarity`); crossjem -> a Hugging Face folder (AutoModel loads the
    encoder) with its head and options, loaded with `CrossJEMRanker.from_exported`. OUT holds
    bench-export.json: the source model's description and the lines that load it. An export
    never deletes what it did not write: OUT that is, holds or lies inside SOURCE or a results
    root (--results-dir and any folder with runs/ or models/ records) is refused before any work.
    """
    from bench.core.settings import results_root
    from rankers import RankerError, open_ranker
    from rankers.hooks import Exportable
    from rankers.io.export import export_target, staged, write_description

    out = export_target(out, source, [results_root(results_dir)], overwrite)
    ranker = open_ranker(source, device="cpu")  # a folder without ranker.json is refused
    if not isinstance(ranker, Exportable):
        raise RankerError(
            f"{source}: ranker {ranker.name!r} has no export format (monobert, dpr, ance and "
            "crossjem have one)"
        )
    with staged(out, overwrite) as stage:
        exported = ranker.export(stage)
        write_description(stage, out, exported, {"folder": str(source), **ranker.describe()})
    console.print(f"wrote {escape(str(out))}: loads with {exported.loads_with}")
    console.print(escape(exported.example_for(out)), highlight=False)
    for note in exported.notes:
        console.print(f"note: {escape(note)}", highlight=False)


# -- main job ------------------------------------------------------------------------------------
# the commands that run many jobs (bench/cli/experiments.py) and the README tables
for command in (cli_experiments.demo, cli_experiments.ablate, cli_experiments.sweep):
    app.command()(friendly_errors(command))
app.add_typer(reference_app, name="reference")
app.add_typer(group_app, name="group")


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
