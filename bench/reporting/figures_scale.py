"""The README's rendered tables of cost as the work grows (synthetic data): the token store's and
the BM25 index's indexing time and memory (``python -m bench.latency.storecost`` records) and
latency against N for every ranker (a ``bench latency`` record). Registered like
:mod:`bench.reporting.figures_tables`; every figure comes from the record named in the marker."""

from __future__ import annotations

from typing import Any

from bench.core.writer import markdown
from bench.reporting.figures import Records, renderer
from bench.reporting.plot_growth import growth_series, growth_table

#: the stores of each record, in the README's words
_STORES = {
    "flat": "token store, flat",
    "padded": "token store, padded (before)",
    "bm25": "BM25 index, flat",
    "rank-bm25": "BM25, rank-bm25 (before)",
}
#: (record, data, stores shown): the 051313 record's bm25 rows ran two versions of the code, so
#: its BM25 rows are taken from the 051405 record, made right after on the same collection
STORE_RECORDS = (
    ("scale/token-store-20261125T051313.json", "titles", ("flat", "padded")),
    ("scale/token-store-20261125T051405.json", "titles", ("bm25", "rank-bm25")),
    ("scale/token-store-20261125T052131.json", "sentences", ("flat", "bm25", "rank-bm25")),
)
GROWTH = "latency/synth-titles-wp-test-bq1-20261125T052927-cac257b98939.json"


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


@renderer("store-cost-synth")
def store_cost(records: Records) -> str:
    """Index time, peak memory added, traced peak and what is held after, per store and size;
    each figure from its own fresh process (timed and traced passes apart)."""
    rows: list[list[str]] = []
    for name, data, stores in STORE_RECORDS:
        found = records.store_cost(name)
        traced = {(r["store"], r["items"]): r for r in found if r["traced"]}
        for r in found:
            if r["traced"] or r["store"] not in stores:
                continue
            t: dict[str, Any] = traced.get((r["store"], r["items"]), {})
            arrays = r.get("array_bytes")
            rows.append(
                [
                    f"10^{len(str(r['items'])) - 1} {data}",
                    _STORES[r["store"]],
                    f"{r['seconds']:.2f}",
                    _mb(r["peak_added_mb"]),
                    _mb(t.get("traced_peak_mb")),
                    _mb(t.get("traced_held_mb")),
                    "-" if arrays is None else _mb(arrays / 1e6),
                    f"{r['tokens']:,}" if "tokens" in r else "-",
                    f"{r['load_before'][0]:.1f}",
                ]
            )
    head = ["items", "what", "index time (s)", "peak RSS added (MB)", "traced peak (MB)"]
    head += ["held after (MB)", "arrays (MB)", "tokens", "load (1 min)"]
    return markdown(head, rows)


@renderer("latency-growth-synth")
def latency_growth(records: Records) -> str:
    """p50 ms per query of each ranker's best row at every N, and the log-log slope."""
    return growth_table(growth_series([records.latency(GROWTH)]))


#: monoBERT at N = 100 on wikiqa, 1 thread per process (`make throughput`), two rounds
THROUGHPUT_RECORDS = (
    ("latency/throughput-monobert-n100-1proc.json", "latency/throughput-monobert-n100-2proc.json"),
    (
        "latency/throughput-monobert-n100-1proc-run2.json",
        "latency/throughput-monobert-n100-2proc-run2.json",
    ),
)


@renderer("throughput-processes")
def throughput_processes(records: Records) -> str:
    """Scoring pairs/s of each column with 1 process and with 2 processes at once (aggregate:
    all pairs / the wall span from the common start to the last call's end), and the ratio."""
    rows: list[list[str]] = []
    for round_, (one_name, two_name) in enumerate(THROUGHPUT_RECORDS, 1):
        one, two = records.latency(one_name), records.latency(two_name)
        alone = {(r.column, r.n): r for r in one.rows}
        for row in two.rows:
            if row.throughput is None:
                continue
            base = alone[(row.column, row.n)].latency["candidates_per_s"]
            agg = row.throughput["candidates_per_s"]
            each = ", ".join(f"{v:.0f}" for v in row.throughput["per_process_candidates_per_s"])
            rows.append(
                [
                    str(round_),
                    row.column,
                    str(row.n),
                    str(row.latency["calls"]),
                    f"{base:.0f}",
                    f"{agg:.0f} ({each})",
                    f"{agg / base:.2f}x",
                ]
            )
    head = ["round", "column", "N", "calls", "1 process (pairs/s)", "2 processes, aggregate (each)"]
    head += ["ratio"]
    return markdown(head, rows)
