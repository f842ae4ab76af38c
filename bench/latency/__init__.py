"""Latency: tracking timed calls, and the `bench latency` benchmark built on it.

* :mod:`bench.latency.tracker` - warm-up, CUDA synchronisation and events, percentiles,
  throughput (:class:`LatencyTracker`, :func:`summarise`); `bench run` times with it too.
* :mod:`bench.latency.lists` - the lists every ranker is timed on (BM25 top N over the split's
  collection) and their token statistics for the cost model.
* :mod:`bench.latency.protocol` - what is timed (each ranker's latency variants) and how
  (interleaved calls, each split into host step and model step): :func:`run_benchmark`.
* :mod:`bench.latency.records` - rows, per-N blocks, speed-ups, record files, ``bench check``.
* :mod:`bench.latency.tables` - the paper's latency table and where the time goes.
"""

from bench.latency.lists import QueryTokens, bm25_lists, list_tokens, token_summary
from bench.latency.protocol import (
    ARCHS,
    DEFAULT_ARCH,
    PARTS,
    ArchPreset,
    BenchOptions,
    Entry,
    column_for,
    create_entry,
    entries_for,
    options_per_ranker,
    run_benchmark,
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
from bench.policy import ALL, DEFAULT_BATCH_SIZES, DEFAULT_RANKERS

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
