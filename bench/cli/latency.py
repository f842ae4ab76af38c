"""`bench latency`: the paper's latency table for every ranker, from the command line.

Apart from :mod:`bench.cli.main` because it is the one command with its own option set (list
sizes, batch sizes, statistics, processes, calibration); the timing itself lives in
:mod:`bench.latency`.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.cli.options import (
    DataDir,
    Device,
    ResultsDir,
    batch_size_sets,
    batch_sizes,
    csv_values,
    dataset_option,
    emit,
    format_option,
    friendly_errors,
    int_list,
    parse_sets,
    print_parts,
    threads_option,
)
from bench.execution.policy import DEFAULT_RANKERS


@friendly_errors
def latency(
    dataset: Annotated[str, dataset_option("Dataset whose collection feeds BM25.")],
    split: Annotated[str | None, typer.Option(help="Split (default: the dataset's).")] = None,
    rankers_: Annotated[
        str,
        typer.Option(
            "--rankers",
            help="Comma-separated rankers; st-crossencoder is sentence-transformers' CrossEncoder.",
        ),
    ] = ",".join(DEFAULT_RANKERS),
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
    batch_sizes_: Annotated[
        list[str] | None,
        typer.Option(
            "--batch-sizes",
            help="NAME=32,64,all: batch sizes to try for ranker NAME (repeatable; wins over "
            "the two options above).",
        ),
    ] = None,
    arch: Annotated[
        str,
        typer.Option(
            help="Encoder to time: minilm-l6 (its real weights), distilbert-6l or bert-base "
            "(random weights of that size, written once under results/models/random/)."
        ),
    ] = "minilm-l6",
    device: Device = "cpu",
    threads: Annotated[
        int | None,
        threads_option("torch intra-op threads (per process; default 2, 1 with --processes)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed (also of --arch's random weights).")] = 0,
    stat: Annotated[
        str,
        typer.Option(
            help="Statistic in the table: p50_ms, mean_ms, p95_ms..., or candidates_per_s "
            "(pairs/s)."
        ),
    ] = "p50_ms",
    fmt: Annotated[str, format_option("table, markdown or json.")] = "table",
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="[RANKER.]KEY=VALUE: a ranker option for this benchmark (repeatable); a bare KEY "
            "sets it on every timed ranker that has it, e.g. --set order=concat times CROSS-JEM "
            "in that row layout (its column is then tagged with the layout).",
        ),
    ] = None,
    dtypes: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated precisions timed in this one run, interleaved call by call: "
            "float32, tf32 (CUDA), bfloat16, float16 (PyTorch), int8 (ONNX Runtime, the one "
            "int8 runtime) or DTYPE@RUNTIME (float32@onnxruntime, bfloat16@openvino). Every "
            "ranker with a dtype option gets its rows once per precision (columns tagged "
            "'monobert @ bfloat16'); the table gives each ranker's speed-up over monoBERT in the "
            "same precision and each precision's gain over float32. A precision a ranker cannot "
            "run is skipped with a line saying why (tf32 on a CPU too); one no timed ranker runs "
            "is an error. Not with --set dtype/runtime (default: each ranker in its dtype "
            "option)."
        ),
    ] = None,
    data_dir: DataDir = None,
    results_dir: ResultsDir = None,
    processes: Annotated[
        int,
        typer.Option(
            min=1,
            help="Throughput mode: N local processes (CPU, gloo; torch.multiprocessing spawn) "
            "time their shards of the calls at once, one ranker after another; the record keeps "
            "each process's raw calls and the aggregate pairs/s. Under torchrun (RANK/"
            "WORLD_SIZE set) the launch's processes are used instead.",
        ),
    ] = 1,
    profile: Annotated[
        bool,
        typer.Option(
            help="After the timing, one profiled pass per row over its calls (untimed): "
            "kernels launched and device busy time per query on CUDA (aten operators and their "
            "CPU time on a CPU), stored in the record and shown in a table of their own."
        ),
    ] = False,
    calibrate: Annotated[
        bool,
        typer.Option(
            help="Measure this machine's kernel rates anew (matmul, attention by length, per "
            "dtype and thread count; a few seconds each) instead of reading the calibration "
            "cached under results/latency/; the time model predicts each encoder ranker's "
            "time with them."
        ),
    ] = False,
) -> None:
    """Time every ranker on BM25 top-N lists, like the paper's latency table.

    Lists of exactly N items come from BM25 over the split's whole candidate collection. Each
    ranker is timed in the configurations it declares (batch sizes, scoring modes). Warm-up
    calls are not timed; CUDA is synchronised and timed with events; rankers are interleaved
    call by call so machine load hits them alike. Each call of a ranker with a host step is
    split where its host step (tokenisation...) ends and its model step begins, so the two add
    up to the whole call. Reports per-query p50/p95/p99,
    throughput (pairs/s), the cost model's predicted CROSS-JEM speed-up over monoBERT and the
    measured one, and per encoder ranker its time predicted from the machine's calibrated
    kernel rates and its achieved GFLOP/s against the matmul peak. With --dtypes every ranker is
    timed in each precision in the same interleaved run. Records go to
    results/latency/DATASET/. With --processes N (or under
    torchrun) the processes time at once and the report adds the aggregate pairs/s.
    """
    from bench.core.shard import launched
    from bench.core.timing import check_stat
    from bench.execution.scale import launch
    from bench.latency.benchmark import latency_rank, run_benchmark
    from bench.latency.plan import BenchOptions, options_per_ranker
    from bench.reporting.latency_tables import LATENCY_FORMATS

    several = processes > 1 or launched()
    if profile and several:
        raise ValueError("--profile profiles one process's calls: not with --processes or torchrun")
    if threads is None:  # one thread per process where several share the machine's cores
        threads = 1 if several else 2
    check_stat(stat)
    if fmt not in LATENCY_FORMATS:
        raise ValueError(f"--format {fmt!r} is unknown; known: {', '.join(LATENCY_FORMATS)}")
    sizes = {
        "monobert": batch_sizes("--monobert-batch-sizes", monobert_batch_sizes),
        "st-crossencoder": batch_sizes("--peer-batch-sizes", peer_batch_sizes),
        **batch_size_sets(batch_sizes_),
    }
    timed = csv_values(rankers_)
    precisions = csv_values(dtypes)
    if dtypes is not None and not precisions:
        raise ValueError("--dtypes: name at least one precision, e.g. float32,bfloat16")
    overrides = options_per_ranker(parse_sets(sets), timed)
    runs = [
        BenchOptions(
            dataset=dataset,
            split=split,
            n_values=int_list("--n-items", n_items),
            rankers=timed,
            options=overrides,
            batch_queries=bq,
            queries=queries,
            repeats=repeats,
            warmup=warmup,
            device=device,
            threads=threads,
            seed=seed,
            batch_sizes=sizes,
            arch=arch,
            data_dir=data_dir,
            results_dir=results_dir,
            calibrate=calibrate,
            dtypes=precisions,
            profile=profile,
        )
        for bq in int_list("--batch-queries", batch_queries)
    ]
    if not runs:
        raise ValueError("--batch-queries: give at least one number of queries per call")
    for opts in runs:
        opts.validate()
    show = partial(show_latency, stat, fmt)
    if several:
        return launch(processes, latency_rank, runs, show, logging.getLogger().getEffectiveLevel())
    ctx = runs[0].context()  # the runs differ only in --batch-queries
    for opts in runs:
        show(run_benchmark(opts, ctx))


def show_latency(stat: str, fmt: str, record: Any) -> None:
    """The table of a `bench latency` record (:class:`bench.latency.LatencyRecord`) in ``fmt``,
    with the summary lines under a rich table. Module-level so spawned ranks can be handed it."""
    from bench.reporting.latency_paper import (
        PROFILE_HEADER,
        profile_rows,
        profile_title,
        render_profile,
    )
    from bench.reporting.latency_tables import build_latency_table, latency_summary, render_latency

    emit(render_latency(build_latency_table(record, stat), fmt))
    profiled = profile_rows(record)
    if fmt == "table":
        from rich.markup import escape

        from bench.core.writer import rich

        if profiled:
            emit(rich(profile_title(record), PROFILE_HEADER, [profiled], 3))
        print_parts([escape(line) for line in latency_summary(record)])
    elif fmt == "markdown" and profiled:
        emit(render_profile(record))


@friendly_errors
def latency_table(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Latency records, or folders of them (results/latency/DATASET/), of one or "
            "several `bench latency` runs (one per --arch, say)."
        ),
    ],
    output: Annotated[
        Path | None, typer.Option(help="Write the markdown table here (default: print it).")
    ] = None,
) -> None:
    """The paper-style latency table from `bench latency` records: one line per encoder,
    precision and N; monoBERT at its best batch, CROSS-JEM in the union layout and the
    sentence-transformers peer, p50 ms, CROSS-JEM's speed-ups, and kernels and device busy time
    per query from their --profile pass; the device named under it."""
    from bench.reporting.latency_paper import build_paper_table, read_latency_records, render_paper

    text = render_paper(build_paper_table(read_latency_records(paths)))
    if output is None:
        return emit(text)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    logging.getLogger(__name__).info("wrote %s", output)
