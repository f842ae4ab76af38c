"""Latency: tracking timed calls, and the `bench latency` benchmark built on it.

* :mod:`bench.latency.tracker` - warm-up, CUDA synchronisation and events, percentiles,
  throughput (:class:`LatencyTracker`, :func:`summarise`); `bench run` times with it too.
* :mod:`bench.latency.lists` - the lists every ranker is timed on (BM25 top N over the split's
  collection) and their token statistics for the cost model.
* :mod:`bench.latency.protocol` - what is timed (each ranker's latency variants) and how
  (interleaved calls, each split into host step and model step).
* :mod:`bench.latency.processes` - throughput mode: the calls sharded over several processes.
* :mod:`bench.latency.benchmark` - the benchmark itself (:func:`run_benchmark`): lists, cost
  model, timing in one or several processes, the record.
* :mod:`bench.latency.records` - rows, per-N blocks, speed-ups, record files, ``bench check``.
* :mod:`bench.latency.tables` - the paper's latency table and where the time goes.

The names below are loaded on first use, so importing :mod:`bench.latency.tracker` (as `bench
run` does) runs no benchmark, table or runner code: a run's cache key covers the code it imports
(:mod:`bench.keys`), and the timing of a run does not depend on how latency tables render.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.latency.arch import ARCHS, DEFAULT_ARCH, ArchPreset
    from bench.latency.benchmark import run_benchmark
    from bench.latency.lists import QueryTokens, bm25_lists, list_tokens, token_summary
    from bench.latency.protocol import (
        ALL,
        DEFAULT_BATCH_SIZES,
        DEFAULT_RANKERS,
        PARTS,
        BenchOptions,
        Entry,
        column_for,
        create_entry,
        entries_for,
        options_per_ranker,
        time_entries,
        time_interleaved,
        time_part,
        time_parts,
        time_scoring,
    )
    from bench.latency.records import (
        LatencyRecord,
        LatencyRow,
        ListBlock,
        check_records,
        load_latency_records,
        mark_best,
        speedup_summary,
        write_latency_record,
    )
    from bench.latency.tables import (
        LATENCY_FORMATS,
        LatencyTable,
        build_latency_table,
        latency_summary,
        merge_records,
        render_latency,
    )
    from bench.latency.tracker import (
        SUMMARY_STATS,
        LatencySummary,
        LatencyTracker,
        check_stat,
        summarise,
    )

#: public name -> the submodule that defines it
_WHERE: dict[str, str] = {
    "ALL": "protocol",
    "ARCHS": "arch",
    "ArchPreset": "arch",
    "BenchOptions": "protocol",
    "DEFAULT_ARCH": "arch",
    "DEFAULT_BATCH_SIZES": "protocol",
    "DEFAULT_RANKERS": "protocol",
    "Entry": "protocol",
    "LATENCY_FORMATS": "tables",
    "LatencyRecord": "records",
    "LatencyRow": "records",
    "LatencySummary": "tracker",
    "LatencyTable": "tables",
    "LatencyTracker": "tracker",
    "ListBlock": "records",
    "PARTS": "protocol",
    "QueryTokens": "lists",
    "SUMMARY_STATS": "tracker",
    "bm25_lists": "lists",
    "build_latency_table": "tables",
    "check_records": "records",
    "check_stat": "tracker",
    "column_for": "protocol",
    "create_entry": "protocol",
    "entries_for": "protocol",
    "latency_summary": "tables",
    "list_tokens": "lists",
    "load_latency_records": "records",
    "mark_best": "records",
    "merge_records": "tables",
    "options_per_ranker": "protocol",
    "render_latency": "tables",
    "run_benchmark": "benchmark",
    "speedup_summary": "records",
    "summarise": "tracker",
    "time_entries": "protocol",
    "time_interleaved": "protocol",
    "time_part": "protocol",
    "time_parts": "protocol",
    "time_scoring": "protocol",
    "token_summary": "lists",
    "write_latency_record": "records",
}


def __getattr__(name: str) -> Any:
    """Load ``name`` from its submodule on first use (PEP 562)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)


__all__ = [
    "ALL",
    "ARCHS",
    "DEFAULT_ARCH",
    "DEFAULT_BATCH_SIZES",
    "DEFAULT_RANKERS",
    "LATENCY_FORMATS",
    "PARTS",
    "SUMMARY_STATS",
    "ArchPreset",
    "BenchOptions",
    "Entry",
    "LatencyRecord",
    "LatencyRow",
    "LatencySummary",
    "LatencyTable",
    "LatencyTracker",
    "ListBlock",
    "QueryTokens",
    "bm25_lists",
    "build_latency_table",
    "check_records",
    "check_stat",
    "column_for",
    "create_entry",
    "entries_for",
    "options_per_ranker",
    "latency_summary",
    "list_tokens",
    "load_latency_records",
    "mark_best",
    "merge_records",
    "render_latency",
    "run_benchmark",
    "speedup_summary",
    "summarise",
    "time_entries",
    "time_interleaved",
    "time_parts",
    "time_part",
    "time_scoring",
    "token_summary",
    "write_latency_record",
]
