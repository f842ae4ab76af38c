"""`bench latency`, the orchestration: lists, cost model, timed entries, gains, the record.

:func:`run_benchmark` checks the plan (:mod:`bench.latency.plan`), builds the BM25 top-N lists of
every N and their token statistics for the cost model (:mod:`bench.latency.lists`), times every
entry (:mod:`bench.latency.protocol` in one process, :mod:`bench.latency.processes` over several),
predicts each row's encoder time (:mod:`bench.latency.costmodel`, whichever runtime ran it), sets
the speed-ups and each precision's gains, and writes the
:class:`~bench.latency.records.LatencyRecord`. Apart from the timing so that each of those
modules imports only what is below it.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.core import provenance
from bench.core.io import ensure_writable
from bench.core.shard import LaunchRole
from bench.data.model import RankingSplit
from bench.execution.context import RunContext
from bench.execution.policy import SPEEDUP_PAIRS
from bench.latency import processes
from bench.latency.costmodel.time import Calibrations, add_costs
from bench.latency.lists import (
    bm25_lists,
    cost_model_ranker,
    encoder_shape_and_tokenizer,
    list_tokens,
    token_settings,
    token_summary,
)
from bench.latency.plan import (
    BenchOptions,
    PrecisionPlan,
    arch_model,
    canonical_keys,
    chosen_options,
    config_fields,
    entries_for,
    precision_entries,
    with_latency_defaults,
)
from bench.latency.protocol import time_entries
from bench.latency.records import (
    LATENCY_DIR,
    LatencyRecord,
    LatencyRow,
    ListBlock,
    latency_dir,
    mark_best,
    speedup_summary,
    write_latency_record,
)
from bench.results.records import config_hash

log = logging.getLogger(__name__)

#: environment variables that set threads, recorded with every latency record
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "TOKENIZERS_PARALLELISM")


def _with_model(
    options: Mapping[str, Mapping[str, Any]], rankers: Sequence[str], model: Path | None
) -> dict[str, dict[str, Any]]:
    """``options`` with ``model`` set for every ranker of ``rankers`` whose config has one."""
    from rankers import get_ranker_class

    out = {k: dict(v) for k, v in canonical_keys(options).items()}
    if model is None:
        return out
    for name in rankers:
        if "model" in config_fields(get_ranker_class(name).Config):
            out[name] = {**out.get(name, {}), "model": str(model)}
    return out


def run_benchmark(opts: BenchOptions, ctx: RunContext | None = None) -> LatencyRecord:
    """Time every ranker of ``opts`` at every N on BM25 top-N lists; write and return the record.
    ``ctx``: the command's run context (default: :meth:`BenchOptions.context`).

    Raises ValueError for invalid options (before any work) and when the split's collection has
    fewer than N items.

    Launched as several processes (``--processes``, torchrun), every rank runs this: each times
    its shard of the calls, all at once (:mod:`bench.latency.processes`); every rank returns the
    same record, which the main rank alone writes. The steps - the split checked
    (:func:`_benchmark_split`), the lists of every N timed (:func:`_time_blocks`), the record
    (:func:`_latency_record`) - are apart so that what the record holds is read in one place.
    """
    from bench.core.shard import current_role
    from rankers import canonical_name

    opts.validate()
    rankers = list(dict.fromkeys(canonical_name(r) for r in opts.rankers))
    plan = opts.precision_plan()
    ctx = ctx or opts.context()
    ctx.seed_everything()
    role = current_role()
    split, collection = _benchmark_split(opts, ctx)
    model = processes.main_first(
        lambda: arch_model(opts.arch, opts.seed, ctx.results_root),
        role,
        f"writing the {opts.arch} model",
    )
    # the cost model's encoder is its ranker's (CROSS-JEM's), so it takes the arch's model as well
    paper = [*rankers, SPEEDUP_PAIRS[""][1]]
    options = _with_model(opts.options, paper, model)
    options = with_latency_defaults(options, paper, opts.checkpoints)
    if plan is not None and role.main:
        log_skips(plan)
    blocks, rows = _time_blocks(opts, ctx, split, collection, rankers, options, role, plan)
    config = _record_config(opts, rankers, model, options, role, plan)
    chosen = {str(b.n): b.tokens["chosen"] for b in blocks if "chosen" in b.tokens}
    if chosen:  # the values auto chose, per N: part of the hash (records without them as before)
        config["chosen"] = chosen
    record = _latency_record(split, len(collection), config, ctx, blocks, rows, role)
    if role.main:
        write_latency_record(record, ctx.results_root)
        log.info("wrote %s", record.path)
    return record


def _benchmark_split(opts: BenchOptions, ctx: RunContext) -> tuple[RankingSplit, dict[str, str]]:
    """The split whose collection the lists are drawn from, and that collection. Checked before
    any timing: the record's folder is written only after the whole benchmark, and an N larger
    than the collection cannot give lists of N items."""
    from bench.data.splits import load_split

    split = load_split(opts.dataset, opts.split, ctx.data_root)
    ensure_writable(latency_dir(ctx.results_root, split.dataset))
    # the cost model's calibrations are cached (and --calibrate writes them) one folder up
    ensure_writable(ctx.results_root / LATENCY_DIR, "latency calibration")
    collection = split.collection()
    too_big = [n for n in opts.n_values if n > len(collection)]
    if too_big:
        raise ValueError(
            f"{split.dataset}/{split.split}: the candidate collection has {len(collection)} "
            f"distinct items, fewer than N={too_big[0]}; choose N <= {len(collection)}"
        )
    return split, collection


def _time_blocks(
    opts: BenchOptions,
    ctx: RunContext,
    split: RankingSplit,
    collection: dict[str, str],
    rankers: Sequence[str],
    options: Mapping[str, Mapping[str, Any]],
    role: LaunchRole,
    plan: PrecisionPlan | None = None,
) -> tuple[list[ListBlock], list[LatencyRow]]:
    """For each N: the BM25 top-N lists with their token statistics for the cost model (one
    :class:`ListBlock`), and every ranker's entries timed on them, in this process or sharded
    over the launch's (``role``); with a ``plan`` (``--dtypes``) each ranker's entries in each
    of its precisions, all interleaved, and the speed-ups per precision. One BM25 index and one
    tokenizer serve every N."""
    from rankers.inputs.lexical import BM25Index

    paper = SPEEDUP_PAIRS[""][1]
    model = token_settings(cost_model_ranker(split.dataset, options))["model"]
    shape, tokenizer = encoder_shape_and_tokenizer(model)
    index = BM25Index(collection)
    calibrations = Calibrations(ctx.results_root, ctx.device, fresh=opts.calibrate)
    blocks: list[ListBlock] = []
    rows: list[LatencyRow] = []
    for n in opts.n_values:
        lists = bm25_lists(split, n, index=index, queries=opts.queries)
        # options chosen from these lists (CROSS-JEM's union_len=auto): timed and recorded so
        chosen = chosen_options([*rankers, paper], split.dataset, options, lists.lists, ctx.device)
        names = dict.fromkeys([*options, *chosen])
        resolved = {k: {**options.get(k, {}), **chosen.get(k, {})} for k in names}
        paper_ranker = cost_model_ranker(split.dataset, resolved)
        settings = token_settings(paper_ranker)
        summary = token_summary(list_tokens(tokenizer, lists.lists, paper_ranker), shape)
        block = ListBlock(
            n=n,
            queries=len(lists),
            tokens={**summary, **settings, **({"chosen": chosen} if chosen else {})},
            repeats=opts.repeats,
            warmup=opts.warmup,
        )
        what: dict[str, Any] = {"batch_sizes": opts.batch_sizes, "options": resolved}
        entries = (
            entries_for(rankers, split.dataset, n, opts.batch_queries, **what)
            if plan is None
            else precision_entries(plan, split.dataset, n, opts.batch_queries, **what)
        )
        if role.world == 1:
            timed = time_entries(entries, lists, opts, ctx.device, calibrations)
            add_costs(timed, calibrations.get)
            rows.extend(timed)
        else:
            rows.extend(processes.time_entries_sharded(entries, lists, opts, ctx.device, role))
        mark_best(rows)
        block.speedup = speedup_summary(rows, block)
        if plan is not None:
            block.speedup["precisions"] = precision_speedups(rows, block, plan)
        blocks.append(block)
    return blocks, rows


def _record_config(
    opts: BenchOptions,
    rankers: Sequence[str],
    model: Path | None,
    options: Mapping[str, Mapping[str, Any]],
    role: LaunchRole,
    plan: PrecisionPlan | None = None,
) -> dict[str, Any]:
    """What the record says was timed, as resolved (ranker names canonical, options with the
    arch's model): part of the record's hash, so records of other settings never share a
    table row. The precisions (and the pairs skipped) only with ``--dtypes``, so a record of one
    precision (and its hash) is as before."""
    return {
        "n_values": list(opts.n_values),
        "rankers": list(rankers),
        "batch_queries": opts.batch_queries,
        "queries": opts.queries,
        "repeats": opts.repeats,
        "warmup": opts.warmup,
        "seed": opts.seed,
        "batch_sizes": {k: list(v) for k, v in canonical_keys(opts.batch_sizes).items()},
        "arch": opts.arch,
        "arch_model": str(model) if model else None,
        "checkpoints": dict(opts.checkpoints),
        "options": options,
        "first_stage": "bm25 (k1=0.9, b=0.4) over the split's candidate collection",
        # only with several processes, so a 1-process record (and its hash) is as before
        **(
            {"processes": role.world, "throughput": processes.THROUGHPUT_DEFINITION}
            if role.world > 1
            else {}
        ),
        **(plan.config() if plan is not None else {}),
    }


def _latency_record(
    split: RankingSplit,
    collection: int,
    config: dict[str, Any],
    ctx: RunContext,
    blocks: list[ListBlock],
    rows: list[LatencyRow],
    role: LaunchRole,
) -> LatencyRecord:
    """The record of one benchmark: its hash covers the config, the data, the device and the
    threads (what makes timings comparable); the provenance adds the machine and the thread
    variables of the environment, which change timings without being options."""
    from bench.core.device import device_info

    device, threads = ctx.device, ctx.threads
    return LatencyRecord(
        dataset=split.dataset,
        split=split.split,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        config=config,
        config_hash=config_hash(
            {"config": config, "data": split.checksum, "device": device, "threads": threads}
        ),
        device=device,
        threads=threads,
        batch_queries=config["batch_queries"],
        blocks=blocks,
        rows=rows,
        data={**split.info(), "collection": collection},
        provenance={
            **provenance.collect(),
            "device": device_info(device),
            "env": {k: os.environ.get(k) for k in THREAD_ENV},
        },
        processes=role.world,
    )


def latency_rank(
    runs: Sequence[BenchOptions], show: Callable[[LatencyRecord], None], level: int
) -> None:
    """One rank of `bench latency --processes` (or of a torchrun launch): run every benchmark of
    ``runs`` (one per ``--batch-queries``); the main rank shows each record with ``show``."""
    from bench.core.shard import process_group
    from bench.execution.scale import rank_errors, rank_logging

    with rank_errors(rank_logging(level)), process_group() as role:
        ctx = runs[0].context()  # the runs differ only in --batch-queries
        for opts in runs:
            record = run_benchmark(opts, ctx)
            if role.main:
                show(record)


# -- the gains of each precision -----------------------------------------------------------------
def gains(rows: Sequence[LatencyRow], n: int, precision: str, reference: str) -> dict[str, float]:
    """Per column (untagged) timed in both: the best ``reference`` row's mean time over the
    best ``precision`` row's at ``n``, how much faster the precision makes that ranker."""
    best = {
        (r.base_column, r.precision): r.latency["mean_ms"]
        for r in rows
        if r.n == n and r.best and r.precision in (precision, reference)
    }
    return {
        col: best[(col, reference)] / mean
        for (col, p), mean in best.items()
        if p == precision and (col, reference) in best and mean
    }


def precision_speedups(
    rows: Sequence[LatencyRow], block: ListBlock, plan: PrecisionPlan
) -> dict[str, dict[str, Any]]:
    """Per precision at ``block``'s N: CROSS-JEM's speed-up over monoBERT in that precision
    (:func:`~bench.latency.records.speedup_summary` of its columns, predictions included) and
    each ranker's ``gain`` over the reference precision (:func:`gains`)."""
    return {
        p: {
            **speedup_summary(rows, block, precision=p),
            "gain": gains(rows, block.n, p, plan.reference),
            "gain_over": plan.reference,
        }
        for p in plan.names
    }


def log_skips(plan: PrecisionPlan) -> None:
    """One warning line per (ranker, precision) pair left out, before any timing."""
    for skip in plan.skipped:
        log.warning("%s", skip.line())
