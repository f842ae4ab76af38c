"""The main job: every registered ranker on one dataset, then the comparison table.

With network the dataset is SODQ (the paper's). Offline, with no local SODQ copy, it falls back to
a local set in the same MTEB layout, preferring semeval16b: like SODQ it ranks questions against
question titles for duplicates, and it is small enough to fine-tune on a CPU.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.data.cards import list_datasets
from bench.data.files import DatasetError
from bench.data.splits import load_split
from bench.execution.context import RunContext
from bench.execution.runner import RunOptions, check_runs, run
from bench.results.records import ResultRecord

log = logging.getLogger(__name__)

#: Fallbacks in order of preference when SODQ cannot be loaded.
FALLBACKS = ("semeval16b", "wikiqa")


@dataclass(frozen=True)
class SuiteEntry:
    """One row of the main job: a ranker, its options, and whether it is fine-tuned first."""

    ranker: str
    options: dict[str, Any] = field(default_factory=dict)
    fit: bool = False


#: The rows of the main comparison; rankers join as they land.
MAIN_SUITE: tuple[SuiteEntry, ...] = (
    SuiteEntry("bm25"),
    SuiteEntry("dpr", {"model": "minilm-l6"}),
    SuiteEntry("dpr", {"model": "minilm-l6"}, fit=True),
    SuiteEntry("ance", {"model": "minilm-l6"}, fit=True),
    SuiteEntry("colbert", {"model": "minilm-l6"}, fit=True),
    SuiteEntry("monobert"),
    SuiteEntry("rankt5", {"model": "minilm-l6-encdec"}, fit=True),
    SuiteEntry("crossjem"),
)


def choose_dataset(requested: str | None, data_dir: str | Path | None) -> tuple[str, str]:
    """The dataset to run and a sentence saying why."""
    if requested:
        return requested, f"{requested} was asked for"
    try:
        load_split("sodq", "test", data_dir)
    except DatasetError as exc:
        local = list_datasets(data_dir)
        for name in FALLBACKS:
            if name in local:
                return name, (
                    f"SODQ is not available ({exc}); using {name}, a local set in the same "
                    "MTEB layout (question-to-question ranking of short texts, like SODQ)"
                )
        raise DatasetError(
            f"SODQ is not available ({exc}) and none of {', '.join(FALLBACKS)} is under the data "
            "root; set BENCH_DATA_DIR"
        ) from exc
    return "sodq", "SODQ (the paper's dataset) is available"


def suite_runs(
    dataset: str, base: RunOptions, entries: tuple[SuiteEntry, ...] = MAIN_SUITE
) -> list[RunOptions]:
    """The `bench run` options of every entry, with the shared options in ``base`` (what
    ``bench demo --plan`` plans)."""
    return [
        replace(
            base,
            ranker=entry.ranker,
            dataset=dataset,
            options={**entry.options, **base.options},
            fit=entry.fit,
        )
        for entry in entries
    ]


def run_suite(
    dataset: str,
    base: RunOptions,
    entries: tuple[SuiteEntry, ...] = MAIN_SUITE,
    ctx: RunContext | None = None,
    runs: Sequence[RunOptions] | None = None,
) -> list[ResultRecord]:
    """Run every entry with the shared options in ``base`` (cached rows are reused), all in
    ``ctx`` (default: ``base``'s context); ``runs``: these runs of the entries instead (one
    seed's, :mod:`bench.execution.seeding`)."""
    ctx = ctx or base.context()
    records = []
    runs = list(runs) if runs is not None else suite_runs(dataset, base, entries)
    check_runs(runs, ctx)
    for opts in runs:
        log.info("main job: %s%s on %s", opts.ranker, " (fine-tuned)" if opts.fit else "", dataset)
        records.append(run(opts, ctx))
    return records
