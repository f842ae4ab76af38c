"""The `bench` command line: thin Typer wrappers over the runner, tables and checks."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table

app = typer.Typer(
    help=(
        "crossjem-bench: compare short-text re-rankers (accuracy and latency) on the same "
        "candidate lists.\n\nData root: --data-dir, else $BENCH_DATA_DIR, else ./datasets. "
        "Results: --results-dir, else $BENCH_RESULTS_DIR, else ./results."
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
# Wide enough for the comparison tables when output is piped (rich would default to 80 columns).
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
log = logging.getLogger("bench")

F = TypeVar("F", bound=Callable[..., Any])

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


def _friendly_errors(func: F) -> F:
    """Known input errors become one red line and exit code 2 instead of a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from bench.data import DatasetError
        from rankers import RankerError

        try:
            return func(*args, **kwargs)
        except (DatasetError, RankerError, ValueError, FileNotFoundError, ImportError) as exc:
            if log.isEnabledFor(logging.DEBUG):
                raise
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _parse_sets(pairs: list[str] | None) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"--set expects key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        options[key.strip()] = value.strip()
    return options


# -- datasets ------------------------------------------------------------------------------------
@app.command()
@_friendly_errors
def datasets(
    data_dir: DataDir = None,
    wordpiece: Annotated[
        bool, typer.Option(help="Also count WordPiece tokens (MiniLM-L6 tokenizer).")
    ] = True,
) -> None:
    """List datasets under the data root with split sizes, candidates per query and lengths."""
    from bench.data import (
        DatasetError,
        dataset_splits,
        get_card,
        list_datasets,
        load_split,
        split_stats,
    )
    from bench.settings import data_root

    tokenizer = _wordpiece() if wordpiece else None
    table = Table(title=f"Datasets under {data_root(data_dir)}")
    for col in (
        "dataset",
        "layout",
        "split",
        "queries",
        "cand/query",
        "pos/query",
        "query len",
        "cand len",
        "union/list",
        "dropped",
    ):
        table.add_column(col, justify="left" if col in ("dataset", "layout", "split") else "right")
    unit = "WordPiece" if tokenizer else "words"
    for name in list_datasets(data_dir):
        try:
            splits = dataset_splits(name, data_dir, local_only=True)
            loaded = [load_split(name, sp, data_dir) for sp in splits]
        except DatasetError as exc:
            loaded, reason = [], str(exc)
        else:
            reason = "no local copy"
        if not loaded:
            table.add_row(name, get_card(name, data_dir).layout, "-", *["-"] * 7)
            log.info("%s: not available: %s", name, reason)
            continue
        for split in loaded:
            s = split_stats(split, tokenizer=tokenizer)
            key = "wordpiece" if tokenizer else "words"
            cand, cpq = s["candidate_length"][key], s["candidates_per_query"]
            table.add_row(
                name,
                split.layout,
                split.split,
                str(s["queries"]),
                f"{cpq['mean']:.1f} ({cpq['min']}-{cpq['max']})",
                f"{s['positives_per_query']['mean']:.2f}",
                f"{s['query_length'][key]['mean']:.1f}",
                f"{cand['mean']:.1f} (p95 {cand['p95']:.0f})",
                f"{s['union_length'][key]['mean']:.0f} (max {s['union_length'][key]['max']:.0f})",
                ", ".join(f"{k}: {v}" for k, v in split.dropped.items() if v) or "0",
            )
    table.caption = (
        f"lengths: mean {unit} tokens; union/list: distinct tokens of a query's candidates "
        "(CROSS-JEM's input); unavailable datasets are listed with '-' (-v says why)"
    )
    console.print(table)


def _wordpiece() -> Callable[[str], list[str]] | None:
    try:
        from transformers import AutoTokenizer

        from rankers.models import resolve_model

        tok = AutoTokenizer.from_pretrained(resolve_model("minilm-l6").path)
    except Exception as exc:  # noqa: BLE001 - statistics fall back to words
        log.warning("WordPiece tokenizer unavailable (%s); counting words", exc)
        return None
    return tok.tokenize


# -- rankers -------------------------------------------------------------------------------------
@app.command()
@_friendly_errors
def rankers() -> None:
    """List registered rankers with their family and options (set with --set key=value)."""
    import dataclasses

    from rankers import FAMILIES, RankerError, available, get_ranker_class

    table = Table(title="Registered rankers")
    for col in ("ranker", "family", "trainable", "options (defaults)"):
        table.add_column(col)
    for name in available():
        try:
            cls = get_ranker_class(name)
        except RankerError as exc:
            table.add_row(name, "?", "?", f"unavailable: {exc}")
            continue
        opts = ", ".join(
            f"{f.name}={f.default!r}"
            for f in dataclasses.fields(cls.Config)
            if f.default is not dataclasses.MISSING
        )
        table.add_row(
            name,
            FAMILIES.get(cls.family, cls.family),
            "yes" if cls.trainable else "no",
            opts or "-",
        )
    console.print(table)


# -- run / train ---------------------------------------------------------------------------------
@app.command()
@_friendly_errors
def run(
    ranker: Annotated[str, typer.Option("--ranker", "-r", help="Ranker name (bench rankers).")],
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset (bench datasets).")],
    split: Annotated[
        str | None, typer.Option(help="Split to rank (default: the dataset's).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model alias, Hugging Face id or local path (neural rankers)."),
    ] = None,
    loss: Annotated[str | None, typer.Option(help="Training loss (encoder rankers).")] = None,
    teacher: Annotated[str | None, typer.Option(help="Teacher ranker name or folder.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Ranker option key=value (repeatable).")
    ] = None,
    fit: Annotated[
        bool,
        typer.Option("--fit/--no-fit", help="Fine-tune on train (dev selects) before ranking."),
    ] = False,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    seed: Annotated[int, typer.Option(help="Seed for python, numpy and torch.")] = 0,
    threads: Annotated[
        int | None, typer.Option(help="torch intra-op threads (default: torch's).")
    ] = None,
    batch_queries: Annotated[int, typer.Option(help="Queries per scoring call.")] = 1,
    warmup: Annotated[int, typer.Option(help="Untimed warm-up queries before timing.")] = 5,
    subset: Annotated[int | None, typer.Option(help="Rank only the first N queries.")] = None,
    train_subset: Annotated[int | None, typer.Option(help="Train on the first N queries.")] = None,
    force: Annotated[bool, typer.Option(help="Recompute even if a result exists.")] = False,
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
) -> None:
    """Rank a dataset split with one ranker; write run file, per-query metrics and a record.

    Settings: rankers/configs/RANKER.yaml, then --model/--loss/--teacher/--set. Rankers with an
    untrained head (crossjem, monobert) are trained first unless --set checkpoint=DIR. Results go
    to results/runs/DATASET/RANKER/SPLIT-HASH/; a rerun with the same configuration reuses the
    record unless --force.
    """
    from bench.runner import RunOptions
    from bench.runner import run as run_one

    options = _parse_sets(set_)
    for key, value in (("model", model), ("loss", loss), ("teacher", teacher)):
        if value:
            options[key] = value
    record = run_one(
        RunOptions(
            ranker=ranker,
            dataset=dataset,
            split=split,
            options=options,
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
            progress=sys.stderr.isatty(),
        )
    )
    _print_record(record)


def _print_record(record: Any) -> None:
    table = Table(
        title=f"{record.label} on {record.dataset}/{record.split} "
        f"({record.data['queries']} queries)"
    )
    # the run's measure order; a record read back from disk has its keys sorted
    known = [m for m in record.run_config.get("measures", []) if m in record.metrics]
    names = known + [m for m in record.metrics if m not in known]
    for m in names:
        table.add_column(m, justify="right")
    table.add_column("p50 ms/q", justify="right")
    table.add_column("cand/s", justify="right")
    table.add_row(
        *(f"{record.metrics[m]:.4f}" for m in names),
        f"{record.latency['p50_ms']:.2f}",
        f"{record.latency['candidates_per_s']:.0f}",
    )
    console.print(table)
    if record.data.get("dropped"):
        console.print(f"dropped queries: {record.data['dropped']}")
    console.print(f"record: {record.path}")


@app.command()
@_friendly_errors
def train(
    ranker: Annotated[str, typer.Option("--ranker", "-r", help="Trainable ranker name.")],
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset with a train split.")],
    model: Annotated[str | None, typer.Option(help="Base model alias, hub id or path.")] = None,
    loss: Annotated[
        str | None, typer.Option(help="bce, ce, listnet or rpl (encoder rankers).")
    ] = None,
    teacher: Annotated[
        str | None, typer.Option(help="Teacher: a ranker name (trained first) or a saved folder.")
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Ranker option key=value (repeatable).")
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    seed: Annotated[int, typer.Option(help="Seed for python, numpy and torch.")] = 0,
    threads: Annotated[int | None, typer.Option(help="torch intra-op threads.")] = None,
    train_subset: Annotated[int | None, typer.Option(help="Train on the first N queries.")] = None,
    force: Annotated[bool, typer.Option(help="Retrain even if a model exists.")] = False,
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
) -> None:
    """Train a ranker on the train split (dev selects the epoch) and cache the model.

    Settings: rankers/configs/RANKER.yaml (default, then the dataset's section), then the flags.
    A teacher given by name (CROSS-JEM's default: monobert) is trained first on the same data.
    An interrupted training resumes. `bench run` with the same options reuses the model.
    """
    from bench.device import resolve_device, seed_everything, set_threads
    from bench.runner import RunOptions, fit_or_load, ranker_options
    from bench.settings import results_root
    from rankers import canonical_name, create_ranker

    options = _parse_sets(set_)
    for key, value in (("model", model), ("loss", loss), ("teacher", teacher)):
        if value:
            options[key] = value
    options = ranker_options(canonical_name(ranker), dataset, options)
    opts = RunOptions(
        ranker=ranker,
        dataset=dataset,
        options=options,
        device=device,
        seed=seed,
        threads=threads,
        fit=True,
        train_subset=train_subset,
        force=force,
        data_dir=data_dir,
        results_dir=results_dir,
    )
    dev = resolve_device(device)
    seed_everything(seed)
    set_threads(threads)
    r = create_ranker(ranker, options, device=dev)
    summary = fit_or_load(r, opts, results_root(results_dir))
    console.print_json(data={k: v for k, v in summary.items() if k not in ("train", "dev")})


# -- compare / check -----------------------------------------------------------------------------
@app.command()
@_friendly_errors
def compare(
    dataset: Annotated[
        str | None, typer.Option("--dataset", "-d", help="Only this dataset.")
    ] = None,
    split: Annotated[str | None, typer.Option(help="Only this split.")] = None,
    metrics: Annotated[
        str | None, typer.Option(help="Comma-separated metric names (default: all recorded).")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="Ranker or label for significance tests (default bm25).")
    ] = None,
    test: Annotated[str, typer.Option(help="ttest or randomisation (Holm-corrected).")] = "ttest",
    alpha: Annotated[float, typer.Option(help="Significance level.")] = 0.05,
    reference: Annotated[
        bool, typer.Option(help="Show the paper's numbers for sodq / msmarco-titles.")
    ] = True,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="table, markdown, csv, latex or json.")
    ] = "table",
    results_dir: ResultsDir = None,
) -> None:
    """Compare every recorded ranker per dataset split, laid out like the paper's main table."""
    import json

    from bench.results import load_records
    from bench.settings import results_root
    from bench.tables import build_comparison, render

    records = load_records(results_root(results_dir), dataset=dataset, split=split)
    if not records:
        raise ValueError(
            f"no results under {results_root(results_dir)}"
            + (f" for dataset {dataset!r}" if dataset else "")
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
        out = render(table, fmt)
        if fmt == "json":
            json_out.extend(json.loads(out))
        else:
            _emit(out)
    if fmt == "json":
        typer.echo(json.dumps(json_out, indent=2))


@app.command()
@_friendly_errors
def check(
    expected: Annotated[
        list[Path] | None,
        typer.Option(
            "--expected", "-e", help="Expected-value YAML files (default results/expected/*.yaml)."
        ),
    ] = None,
    results_dir: ResultsDir = None,
) -> None:
    """Compare recorded results with expected values; exit 1 on any FAIL or missing result."""
    from bench.checks import format_check_line, run_checks
    from bench.results import load_records
    from bench.settings import expected_dir, results_root

    files = expected or sorted(expected_dir().glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"no expected-value files in {expected_dir()}")
    from bench.latency_bench import check_records, load_latency_records

    root = results_root(results_dir)
    results = run_checks(files, load_records(root) + check_records(load_latency_records(root)))
    for res in results:
        line = format_check_line(res)
        style = "green" if res.status == "OK" else "bold red"
        console.print(f"[{style}]{escape(line)}[/]", highlight=False)
    failed = [r for r in results if r.status != "OK"]
    counts = {s: sum(r.status == s for r in results) for s in ("OK", "FAIL", "MISSING")}
    console.print("checks: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    if failed:
        raise typer.Exit(1)


# -- latency / plot ------------------------------------------------------------------------------
def _csv(value: str | None, convert: Callable[[str], Any] = str) -> tuple[Any, ...]:
    return tuple(convert(v.strip()) for v in value.split(",") if v.strip()) if value else ()


def _batch_size(value: str) -> int | str:
    return value if value == "all" else int(value)


@app.command()
@_friendly_errors
def latency(
    dataset: Annotated[
        str, typer.Option("--dataset", "-d", help="Dataset whose collection feeds BM25.")
    ],
    split: Annotated[str | None, typer.Option(help="Split (default: the dataset's).")] = None,
    rankers_: Annotated[
        str,
        typer.Option(
            "--rankers",
            help="Comma-separated rankers; st-crossencoder is sentence-transformers' CrossEncoder.",
        ),
    ] = "bm25,dpr,monobert,st-crossencoder,crossjem",
    n_items: Annotated[str, typer.Option(help="Comma-separated list sizes N.")] = "30,100",
    batch_queries: Annotated[str, typer.Option(help="Queries per call, comma-separated.")] = "1",
    queries: Annotated[int, typer.Option(help="Queries timed per N (first of the split).")] = 20,
    repeats: Annotated[int, typer.Option(help="Timed passes over the queries.")] = 3,
    warmup: Annotated[int, typer.Option(help="Untimed calls before timing.")] = 3,
    monobert_batch_sizes: Annotated[
        str, typer.Option(help="monoBERT batch sizes to try; the best is reported.")
    ] = "32,64,128,all",
    peer_batch_sizes: Annotated[
        str, typer.Option(help="st-crossencoder batch sizes to try; the best is reported.")
    ] = "32,64,128",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "cpu",
    threads: Annotated[int | None, typer.Option(help="torch intra-op threads.")] = 2,
    stat: Annotated[
        str, typer.Option(help="Statistic in the table: p50_ms, mean_ms, p95_ms...")
    ] = "p50_ms",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, markdown or json.")] = "table",
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
) -> None:
    """Time every ranker on BM25 top-N lists, like the paper's latency table.

    Lists of exactly N items come from BM25 over the split's whole candidate collection.
    Warm-up calls are not timed; CUDA is synchronised and timed with events; rankers are
    interleaved call by call so machine load hits them alike. Reports per-query p50/p95/p99,
    throughput, tokenisation time, the cost model's predicted CROSS-JEM speed-up over monoBERT
    and the measured one. Records go to results/latency/DATASET/.
    """
    from bench.device import resolve_device
    from bench.latency_bench import (
        BenchOptions,
        build_latency_table,
        render_latency,
        run_benchmark,
    )

    for bq in _csv(batch_queries, int):
        record = run_benchmark(
            BenchOptions(
                dataset=dataset,
                split=split,
                n_values=_csv(n_items, int),
                rankers=_csv(rankers_),
                batch_queries=bq,
                queries=queries,
                repeats=repeats,
                warmup=warmup,
                device=resolve_device(device),
                threads=threads,
                monobert_batch_sizes=_csv(monobert_batch_sizes, _batch_size),
                peer_batch_sizes=_csv(peer_batch_sizes, _batch_size),
                data_dir=data_dir,
                results_dir=results_dir,
            )
        )
        _emit(render_latency(build_latency_table(record, stat), fmt))
        if fmt == "table":
            for block in record.blocks:
                sp = block.speedup
                if sp:
                    console.print(
                        f"N={block.n}: CROSS-JEM speed-up over monoBERT measured "
                        f"{sp['measured_mean']:.2f}x (mean), {sp['measured_p50']:.2f}x (p50); "
                        f"cost model {sp['predicted_flops']:.2f}x; "
                        f"{100 * sp['fraction_of_prediction']:.0f}% of prediction"
                    )
            console.print(f"record: {record.path}")


@app.command()
@_friendly_errors
def plot(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset with results.")],
    split: Annotated[str | None, typer.Option(help="Split (default: test).")] = None,
    metric: Annotated[str | None, typer.Option(help="AP@10 or RR@10 (default: AP@10).")] = None,
    out: Annotated[
        Path | None, typer.Option(help="PNG path (default under results/plots/).")
    ] = None,
    use_benchmark: Annotated[
        bool, typer.Option(help="Latency from `bench latency` records instead of `bench run`.")
    ] = False,
    n: Annotated[int | None, typer.Option(help="With --use-benchmark: the N to take.")] = None,
    results_dir: ResultsDir = None,
) -> None:
    """Accuracy against p50 latency for every ranker with results; Pareto front marked."""
    from bench.plot import pareto_front, plot_dataset

    path, points = plot_dataset(
        dataset,
        split,
        metric=metric,
        out=out,
        results_dir=results_dir,
        benchmark_n=n,
        use_benchmark=use_benchmark,
    )
    console.print(f"wrote {path} ({len(points)} rankers)")
    console.print("Pareto front: " + ", ".join(p.label for p in pareto_front(points)))


# -- main job ------------------------------------------------------------------------------------
@app.command()
@_friendly_errors
def demo(
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", "-d", help="Dataset (default: sodq, else a local set)."),
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    seed: Annotated[int, typer.Option()] = 0,
    subset: Annotated[int | None, typer.Option(help="Rank only the first N test queries.")] = None,
    force: Annotated[bool, typer.Option(help="Recompute cached rows.")] = False,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Table format.")] = "table",
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
) -> None:
    """The main job: run every registered ranker on one dataset and print the comparison."""
    from bench.results import load_records
    from bench.runner import RunOptions
    from bench.settings import results_root
    from bench.suite import choose_dataset, run_suite
    from bench.tables import build_comparison, render

    name, why = choose_dataset(dataset, data_dir)
    console.print(f"[bold]dataset:[/] {name} - {why}")
    base = RunOptions(
        ranker="",
        dataset=name,
        device=device,
        seed=seed,
        subset=subset,
        force=force,
        data_dir=data_dir,
        results_dir=results_dir,
        progress=sys.stderr.isatty(),
    )
    records = run_suite(name, base)
    wanted = {r.path for r in records}
    recs = [r for r in load_records(results_root(results_dir), dataset=name) if r.path in wanted]
    _emit(render(build_comparison(recs), fmt))


@app.command()
@_friendly_errors
def ablate(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset with train/dev/test.")],
    what: Annotated[str, typer.Option(help="loss (BCE, CE, ListNet, RPL) or positions.")] = "loss",
    ranker: Annotated[str, typer.Option("--ranker", "-r", help="Ranker to ablate.")] = "crossjem",
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Shared option key=value (repeatable).")
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    seed: Annotated[int, typer.Option(help="Seed shared by every variant.")] = 0,
    threads: Annotated[int | None, typer.Option(help="torch intra-op threads.")] = None,
    subset: Annotated[int | None, typer.Option(help="Rank only the first N queries.")] = None,
    train_subset: Annotated[int | None, typer.Option(help="Train on the first N queries.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Table format.")] = "table",
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
) -> None:
    """Reproduce the paper's ablation table: one training setting varied, all else equal."""
    from bench.ablate import run_ablation
    from bench.runner import RunOptions
    from bench.tables import build_comparison, render

    base = RunOptions(
        ranker=ranker,
        dataset=dataset,
        options=_parse_sets(set_),
        device=device,
        seed=seed,
        threads=threads,
        subset=subset,
        train_subset=train_subset,
        fit=True,
        data_dir=data_dir,
        results_dir=results_dir,
        progress=sys.stderr.isatty(),
    )
    records = run_ablation(what, base)
    table = build_comparison(records, baseline=records[0].label, reference=False)
    _emit(render(table, fmt))


def _emit(out: Any) -> None:
    """Print a rendered table: rich objects through the console, text as is."""
    if isinstance(out, str):
        typer.echo(out)
    else:
        console.print(out)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
