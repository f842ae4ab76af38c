"""The paper's latency table from latency records, and where the time goes.

:func:`build_latency_table` turns one record (or several of one setting, :func:`merge_records`)
into a :class:`LatencyTable`: one row per N, one column per table column (its fastest
configuration), the CROSS-JEM speed-up over monoBERT measured and predicted, and the compression
factor C. A second, small table splits each column's best row into its host step and its model
alone, for rankers that have a host step. :func:`render_latency` prints both as a rich table,
markdown or JSON.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.core import writer
from bench.core.timing import check_stat, higher_is_better
from bench.execution.policy import SPEEDUP_PAIRS
from bench.latency.records import LatencyRecord, LatencyRow, ListBlock, precision_column

if TYPE_CHECKING:
    from rich.console import RenderableType

#: column order: the paper's latency table (first stage, dual, late, early, seq2seq, joint)
_COLUMN_FAMILY_ORDER = ("firststage", "sparse", "dual", "late", "early", "seq2seq", "joint")
LATENCY_FORMATS = ("table", "markdown", "json")


def stat_unit(stat: str) -> str:
    """What a cell of ``stat`` measures, for titles and notes."""
    if stat.endswith("_ms"):
        return "ms per query"
    if stat == "candidates_per_s":
        return "pairs/s"
    if stat == "queries_per_s":
        return "queries/s"
    return "s in total"


def _number(value: float, stat: str) -> str:
    return f"{value:,.0f}" if higher_is_better(stat) else f"{value:,.2f}"


def _times(value: float | None, missing: str) -> str:
    return missing if value is None else f"{value:.2f}x"


def quartiles(summary: Mapping[str, Any]) -> tuple[float, float] | None:
    """The 25th and 75th percentiles (ms per query) of a latency summary's raw calls (call time
    / queries in the call, as its p50 is taken); None when it keeps no raw calls. Why: the host
    step of two rankers differs by tenths of a millisecond, the size of its run-to-run spread,
    so a difference is read against the middle half of the calls, not against two p50s."""
    calls = summary.get("call_s")
    if not calls:
        return None
    per_query = np.asarray(calls, dtype=np.float64) * 1000.0
    per_query /= np.asarray(summary.get("call_queries") or [1] * len(calls), dtype=np.float64)
    low, high = np.percentile(per_query, [25, 75])
    return float(low), float(high)


@dataclass
class LatencyTable:
    """``stat`` per N (rows) and column (its fastest configuration), then the CROSS-JEM speed-up
    over monoBERT measured and predicted (and measured end to end when both end-to-end columns
    were timed), and the compression factor C. ``breakdown`` holds, per N and column with a
    host step, ``breakdown_stat`` of the best row's whole call, host step and model alone."""

    title: str
    stat: str
    columns: list[str]
    n_values: list[int]
    cells: dict[int, dict[str, float | None]]
    speedups: dict[int, dict[str, Any]]
    compression: dict[int, float]
    notes: list[str]
    breakdown: dict[int, dict[str, dict[str, float | None]]] = field(default_factory=dict)
    breakdown_stat: str = "p50_ms"
    breakdown_notes: list[str] = field(default_factory=list)
    #: a run timing several precisions: one line per N, precision and column (rendered in
    #: place of the grid of N by column)
    precision: PrecisionTable | None = None

    @property
    def end_to_end(self) -> bool:
        return any("end_to_end" in sp for sp in self.speedups.values())

    @property
    def timed(self) -> bool:
        """Whether the time model predicted a speed-up (records before it: no)."""
        return any("predicted_time" in sp for sp in self.speedups.values())

    def header(self) -> list[str]:
        timed = ["speed-up predicted (time)"] if self.timed else []
        extra = ["speed-up end-to-end"] if self.end_to_end else []
        return ["N", *self.columns, "speed-up measured", "speed-up predicted", *timed, *extra, "C"]

    def text_rows(self, bold: Callable[[str], str] = str, missing: str = "–") -> list[list[str]]:
        """Cell texts; the best ranker of each N (fastest, or highest throughput) in ``bold``."""
        pick = max if higher_is_better(self.stat) else min
        out = []
        for n in self.n_values:
            values = self.cells[n]
            present = [v for v in values.values() if v is not None]
            best = pick(present) if present else None
            texts = [str(n)]
            for col in self.columns:
                v = values.get(col)
                text = missing if v is None else _number(v, self.stat)
                texts.append(bold(text) if v is not None and v == best else text)
            sp = self.speedups.get(n) or {}
            texts.append(_times(sp.get("measured_mean"), missing))
            texts.append(_times(sp.get("predicted_flops"), missing))
            if self.timed:
                texts.append(_times(sp.get("predicted_time"), missing))
            if self.end_to_end:
                texts.append(_times((sp.get("end_to_end") or {}).get("measured_mean"), missing))
            texts.append(f"{self.compression[n]:.1f}" if n in self.compression else missing)
            out.append(texts)
        return out

    def grid(self, bold: Callable[[str], str] = str) -> tuple[list[str], list[list[str]], int]:
        """The main grid to render: its header, its cell texts and how many of its columns are
        text; one line per N, or, for several precisions, per N, precision and column."""
        if self.precision is not None:
            return self.precision.header(), self.precision.text_rows(bold), 3
        return self.header(), self.text_rows(bold), 1

    def breakdown_header(self) -> list[str]:
        return ["N", "column", "score()", "host step", "host p25–p75", "model only", "host share"]

    def breakdown_rows(self, missing: str = "–") -> list[list[str]]:
        out = []
        for n in self.n_values:
            for col, parts in self.breakdown.get(n, {}).items():
                total, host, model = (
                    missing if (v := parts[k]) is None else _number(v, self.breakdown_stat)
                    for k in ("total", "host", "model_only")
                )
                low, high = parts.get("host_p25"), parts.get("host_p75")
                spread = missing if low is None or high is None else f"{low:,.2f}–{high:,.2f}"
                share = parts.get("host_share")
                share_text = missing if share is None else f"{100 * share:.0f}%"
                out.append([str(n), col, total, host, spread, model, share_text])
        return out


@dataclass
class PrecisionCell:
    """One line of the precision table: the best row of one column (untagged) in one precision
    at one N, with its ratios (None: not measured or not predicted)."""

    n: int
    precision: str
    column: str
    value: float | None
    #: monoBERT's best mean time in the same precision and scoring mode over this column's
    speedup: float | None = None
    #: the cost model's FLOPs ratio and the time model's, where the record predicts them
    #: (CROSS-JEM against monoBERT)
    predicted_flops: float | None = None
    predicted_time: float | None = None
    #: the same column's best mean time in the reference precision over this one's
    gain: float | None = None
    #: achieved GFLOP/s and its share of the calibrated matmul peak (PyTorch rows)
    gflops: float | None = None
    of_peak: float | None = None


@dataclass
class PrecisionTable:
    """A run timing several precisions (``--dtypes``) as one line per N, precision and column:
    ``stat``, the speed-up over monoBERT in the same precision measured and predicted, the gain
    over the ``reference`` precision, and the achieved GFLOP/s against the peak."""

    stat: str
    reference: str
    cells: list[PrecisionCell]
    notes: list[str] = field(default_factory=list)

    def header(self) -> list[str]:
        return [
            "N",
            "precision",
            "column",
            self.stat,
            "speed-up vs monoBERT",
            "speed-up predicted",
            "speed-up predicted (time)",
            f"gain over {self.reference}",
            "GFLOP/s",
            "% of peak",
        ]

    def text_rows(self, bold: Callable[[str], str] = str, missing: str = "–") -> list[list[str]]:
        """Cell texts; the best value of each N (fastest, or highest throughput) in ``bold``."""
        pick = max if higher_is_better(self.stat) else min
        best = {
            n: pick(values)
            for n in dict.fromkeys(c.n for c in self.cells)
            if (values := [c.value for c in self.cells if c.n == n and c.value is not None])
        }
        out = []
        for c in self.cells:
            value = missing if c.value is None else _number(c.value, self.stat)
            out.append(
                [
                    str(c.n),
                    c.precision,
                    c.column,
                    bold(value) if c.value is not None and c.value == best.get(c.n) else value,
                    _times(c.speedup, missing),
                    _times(c.predicted_flops, missing),
                    _times(c.predicted_time, missing),
                    _times(c.gain, missing),
                    missing if c.gflops is None else f"{c.gflops:,.1f}",
                    missing if c.of_peak is None else f"{100 * c.of_peak:.0f}%",
                ]
            )
        return out


def _monobert_column(column: str) -> str:
    """The monoBERT column ``column`` is compared with: the end-to-end one (both rankers
    tokenising their items in the call) for an end-to-end column, else the pre-tokenised one."""
    key = "end_to_end" if column.endswith(" (end-to-end)") else ""
    return SPEEDUP_PAIRS[key][0]


def _mean_ratio(slow: LatencyRow | None, fast: LatencyRow) -> float | None:
    if slow is None or not fast.latency.get("mean_ms"):
        return None
    return float(slow.latency["mean_ms"]) / float(fast.latency["mean_ms"])


def _precision_cells(
    record: LatencyRecord, block: ListBlock, bases: Sequence[str], precision: str, stat: str
) -> list[PrecisionCell]:
    """The cells of one precision ("": the rows of rankers without a dtype) at one N."""
    sp = block.speedup.get("precisions", {}).get(precision, {})
    pairs = [sp, *(v for k, v in sp.items() if k in SPEEDUP_PAIRS)]
    out = []
    for base in bases:
        row = record.best(block.n, precision_column(base, precision))
        if row is None:
            continue
        monobert = record.best(block.n, precision_column(_monobert_column(base), precision))
        pair: dict[str, Any] = next((x for x in pairs if x.get("model") == row.label), {})
        value = row.latency.get(stat)
        out.append(
            PrecisionCell(
                n=block.n,
                precision=precision or "n/a",
                column=base,
                value=None if value is None else float(value),
                speedup=_mean_ratio(monobert, row) if precision else None,
                predicted_flops=pair.get("predicted_flops"),
                predicted_time=pair.get("predicted_time"),
                gain=sp.get("gain", {}).get(base),
                gflops=row.cost.get("achieved_gflops"),
                of_peak=row.cost.get("of_peak"),
            )
        )
    return out


def _precision_notes(record: LatencyRecord, reference: str) -> list[str]:
    notes = [
        "Precisions: every row of every precision was timed interleaved call by call in this "
        "one run. Speed-up vs monoBERT: monoBERT's best mean latency in the same precision "
        "and scoring mode over the column's; predicted: the cost model's FLOPs ratio and the "
        f"time model's (CROSS-JEM). Gain over {reference}: the same column's best mean latency "
        f"in {reference} over its best in the row's precision. GFLOP/s: encoder FLOPs over the "
        "measured mean, and its share of the calibrated matmul peak of that dtype (PyTorch "
        "rows only)."
    ]
    skipped = record.config.get("skipped") or []
    if skipped:
        notes.append(
            "Not timed: "
            + "; ".join(f"{s['ranker']} in {s['precision']} ({s['why']})" for s in skipped)
            + "."
        )
    return notes


def build_precision_table(
    record: LatencyRecord, columns: Sequence[str], stat: str
) -> PrecisionTable | None:
    """The precision table of a record timing several precisions (None for any other): per N,
    the columns without a precision first, then each precision's columns in ``columns``'
    order."""
    names = record.config.get("precisions")
    if not names:
        return None
    reference = next(
        (p["gain_over"] for b in record.blocks for p in b.speedup.get("precisions", {}).values()),
        names[0],
    )
    bases = list(
        dict.fromkeys(r.base_column for col in columns for r in record.rows if r.column == col)
    )
    cells = [
        cell
        for block in record.blocks
        for precision in ("", *names)
        for cell in _precision_cells(record, block, bases, precision, stat)
    ]
    return PrecisionTable(stat, reference, cells, _precision_notes(record, reference))


def _column_order(record: LatencyRecord) -> list[str]:
    family = {r.column: r.family for r in record.rows}
    first = {c: i for i, c in enumerate(dict.fromkeys(r.column for r in record.rows))}

    def key(col: str) -> tuple[int, int]:
        fam = family[col]
        rank = _COLUMN_FAMILY_ORDER.index(fam) if fam in _COLUMN_FAMILY_ORDER else 99
        return rank, first[col]

    return sorted(first, key=key)


def merge_records(records: Sequence[LatencyRecord]) -> LatencyRecord:
    """One record from several runs of one setting (e.g. N=700 timed with fewer queries): their
    N blocks side by side; an N present in several comes from the newest."""
    if not records:
        raise ValueError("no latency records to merge")
    records = sorted(records, key=lambda r: r.created)
    keys = {
        (r.dataset, r.split, r.device, r.threads, r.batch_queries, r.processes) for r in records
    }
    if len(keys) > 1:
        found = "; ".join(
            f"{d}/{s} {dev} threads={t} batch_queries={b}" + (f" processes={p}" if p > 1 else "")
            for d, s, dev, t, b, p in sorted(keys)
        )
        raise ValueError(f"latency records of different settings cannot share a table: {found}")
    blocks: dict[int, tuple[ListBlock, list[LatencyRow]]] = {}
    for rec in records:
        for b in rec.blocks:
            blocks[b.n] = (b, [r for r in rec.rows if r.n == b.n])
    newest = records[-1]
    ordered = sorted(blocks)
    return dataclasses.replace(
        newest,
        blocks=[blocks[n][0] for n in ordered],
        rows=[r for n in ordered for r in blocks[n][1]],
        config={**newest.config, "merged": [str(r.path) for r in records]},
    )


def _breakdown(
    record: LatencyRecord, columns: Sequence[str], stat: str
) -> dict[int, dict[str, dict[str, float | None]]]:
    out: dict[int, dict[str, dict[str, float | None]]] = {}
    for b in record.blocks:
        for col in columns:
            row = record.best(b.n, col)
            if row is None or row.tokenisation is None:
                continue
            spread = quartiles(row.tokenisation)
            out.setdefault(b.n, {})[col] = {
                "total": row.latency.get(stat),
                "host": row.tokenisation.get(stat),
                "host_p25": None if spread is None else spread[0],
                "host_p75": None if spread is None else spread[1],
                "model_only": (row.model_only or {}).get(stat),
                "host_share": row.tokenisation.get("share_of_mean"),
            }
    return out


def _variant_labels(rows: Sequence[LatencyRow]) -> list[str]:
    """What tells the rows of one column apart: the options whose values differ between them
    (``batch_size=32``), else their labels."""
    keys = sorted({k for r in rows for k in r.options})
    differ = [k for k in keys if len({repr(r.options.get(k)) for r in rows}) > 1]
    if not differ:
        return [r.label for r in rows]
    return [", ".join(f"{k}={r.options.get(k)}" for k in differ) for r in rows]


def _groups(pairs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """text -> the columns it applies to, from (column, text) pairs: each text said once."""
    groups: dict[str, list[str]] = {}
    for col, text in pairs:
        if col not in groups.setdefault(text, []):
            groups[text].append(col)
    return groups


def _grouped(pairs: Sequence[tuple[str, str]]) -> str:
    """``text (col, col); text (col)``."""
    return "; ".join(f"{text} ({', '.join(cols)})" for text, cols in _groups(pairs).items())


def _notes(record: LatencyRecord, columns: Sequence[str], stat: str) -> list[str]:
    rows = sorted(record.rows, key=lambda r: columns.index(r.column))
    protocol = "; ".join(
        f"N={b.n}: {b.queries} queries x {b.repeats} repeats after {b.warmup} untimed calls"
        for b in record.blocks
    )
    arch = record.config.get("arch")
    notes = [
        f"{stat_unit(stat)} ({stat}) on {record.device}, {record.threads} threads, "
        f"{record.batch_queries} list(s) per score() call, tokenisation included ({protocol})"
        + (f"; encoder: {arch}" if arch else "")
        + ".",
        "Lists: BM25 top N over the split's whole candidate collection. "
        f"Bold: {'highest' if higher_is_better(stat) else 'fastest'} at N.",
    ]
    if rows:
        dtypes = sorted({r.dtype for r in rows if r.dtype != "n/a"})
        weights = _grouped([(r.base_column, r.weights) for r in rows if r.weights != "n/a"])
        notes.append(f"dtype: {', '.join(dtypes) or 'n/a'}; weights: {weights or 'n/a'}.")
        modes = _grouped([(r.base_column, r.mode) for r in rows if r.mode])
        if modes:
            notes.append(f"Scoring mode: {modes}.")
    for col in columns:
        for b in record.blocks:
            variants = [r for r in rows if r.column == col and r.n == b.n]
            if len(variants) > 1:
                parts = [
                    f"{text}: {_number(r.latency[stat], stat)}"
                    for text, r in zip(_variant_labels(variants), variants, strict=True)
                ]
                notes.append(
                    f"{col} at N={b.n}, each configuration (best shown): " + ", ".join(parts) + "."
                )
    notes += throughput_notes(record, columns)
    rows_per_list = [
        f"N={b.n}: mean {b.tokens['groups_mean']:.2f}, max {b.tokens['groups_max']}, "
        f"{b.tokens['lists_split']} of {b.tokens['queries']} lists split"
        for b in record.blocks
        if "groups_max" in b.tokens  # records older than this count
    ]
    if rows_per_list:
        first = record.blocks[0].tokens
        layout = first.get("order", "union") + (
            f", merged after {first['merge_layers']} layer(s)" if first.get("merge_layers") else ""
        )
        notes.append(
            f"CROSS-JEM encoder rows per list ({layout} layout; items in different rows do not "
            "attend to each other): " + "; ".join(rows_per_list) + "."
        )
    notes.append(
        "Speed-up: best monoBERT / CROSS-JEM mean latency; predicted: ratio of the "
        "cost model's encoder FLOPs (bench.latency.costmodel.flops) on the same lists. "
        "C = L_k N / |U| (mean over queries)."
    )
    if any("predicted_time" in b.speedup for b in record.blocks):
        notes.append(
            "Predicted (time): ratio of the two rows' encoder times predicted from this "
            "machine's calibrated kernel rates (bench.latency.costmodel.time) for the batches "
            "they ran."
        )
    return notes


def aggregate_line(record: LatencyRecord, n: int, columns: Sequence[str] | None = None) -> str:
    """``N=100, 2 processes at once: aggregate pairs/s monobert 1,234 (per process 620, 614)``:
    the throughput-mode figure of the best row of each column (empty with one process)."""
    if record.processes == 1:
        return ""
    cells = []
    for col in columns or list(dict.fromkeys(r.column for r in record.rows)):
        row = record.best(n, col)
        if row is None or row.throughput is None:
            continue
        each = ", ".join(
            "-" if v is None else f"{v:,.0f}"
            for v in row.throughput["per_process_candidates_per_s"]
        )
        cells.append(f"{col} {row.throughput['candidates_per_s']:,.0f} (per process {each})")
    return f"N={n}, {record.processes} processes at once: aggregate pairs/s " + "; ".join(cells)


def throughput_notes(record: LatencyRecord, columns: Sequence[str]) -> list[str]:
    """What a throughput-mode record adds under its table: the process count, how the cells
    pool every process's calls, and the aggregate pairs/s per column and N."""
    if record.processes == 1:
        return []
    definition = next((r.throughput["definition"] for r in record.rows if r.throughput), "")
    return [
        f"Throughput mode: {record.processes} processes timed at once, each its shard of the "
        f"calls with {record.threads} thread(s); cells pool every process's calls. "
        f"Aggregate pairs/s = {definition}.",
        *(aggregate_line(record, b.n, columns) + "." for b in record.blocks),
    ]


def _breakdown_notes(record: LatencyRecord, columns: Sequence[str]) -> list[str]:
    covers = [
        (c, r.tokenisation["covers"])
        for c in columns
        for r in record.rows
        if r.column == c and r.best and r.tokenisation
    ]
    if not covers:
        return []
    notes = [
        "score(): the whole call; host step: prepare_scoring alone, with the middle half of its "
        "calls (p25–p75 ms per query), the spread to read a difference of host steps against; "
        "model only: score_prepared on inputs prepared beforehand (device time on CUDA in the "
        "record); host share: of the mean."
    ]
    notes += [f"Host step of {', '.join(cols)}: {text}." for text, cols in _groups(covers).items()]
    bare = [c for c in columns if c not in dict(covers)]
    if bare:
        notes.append("No host step (timed as whole calls only): " + ", ".join(bare) + ".")
    return notes


def build_latency_table(
    records: LatencyRecord | Sequence[LatencyRecord], stat: str = "p50_ms"
) -> LatencyTable:
    """The table model of one latency record, or of several merged (:func:`merge_records`);
    ``stat`` is a :data:`~bench.core.timing.SUMMARY_STATS` name (p50_ms, mean_ms,
    candidates_per_s...). The breakdown uses ``stat`` when it is a time, else p50_ms."""
    check_stat(stat)
    record = records if isinstance(records, LatencyRecord) else merge_records(records)
    columns = _column_order(record)
    n_values = [b.n for b in record.blocks]
    cells: dict[int, dict[str, float | None]] = {}
    for n in n_values:
        cells[n] = {}
        for col in columns:
            row = record.best(n, col)
            value = None if row is None else row.latency.get(stat)
            cells[n][col] = None if value is None else float(value)
    bstat = stat if stat.endswith("_ms") else "p50_ms"
    precision = build_precision_table(record, columns, stat)
    return LatencyTable(
        title=f"Latency: {record.dataset} / {record.split}",
        stat=stat,
        columns=columns,
        n_values=n_values,
        cells=cells,
        speedups={b.n: b.speedup for b in record.blocks},
        compression={b.n: b.tokens["compression_mean"] for b in record.blocks},
        notes=_notes(record, columns, stat) + (precision.notes if precision else []),
        breakdown_notes=_breakdown_notes(record, columns),
        breakdown=_breakdown(record, columns, bstat),
        breakdown_stat=bstat,
        precision=precision,
    )


def render_latency(table: LatencyTable, fmt: str = "table") -> str | RenderableType:
    """``table``: rich tables (print with a Console); ``markdown`` and ``json``: text."""
    from bench.core.io import json_safe

    breakdown_title = f"Where the time goes ({table.breakdown_stat}, best row of each column)"
    if fmt == "table":
        from rich.console import Group

        header, cells, text_columns = table.grid(lambda s: f"[bold]{s}[/bold]")
        main = writer.rich(table.title, header, [cells], text_columns, " ".join(table.notes))
        if not table.breakdown:
            return main
        parts = writer.rich(
            breakdown_title,
            table.breakdown_header(),
            [table.breakdown_rows()],
            2,
            " ".join(table.breakdown_notes),
        )
        return Group(main, parts)
    if fmt == "markdown":
        grid = writer.markdown(*table.grid(lambda s: f"**{s}**"))
        text = writer.titled(table.title, grid, table.notes)
        if table.breakdown:
            split = writer.markdown(table.breakdown_header(), table.breakdown_rows(), 2)
            text += "\n" + writer.titled(breakdown_title, split, table.breakdown_notes)
        return text
    if fmt == "json":
        rows = [
            {
                "n": n,
                "cells": {c: json_safe(v) for c, v in table.cells[n].items()},
                "speedup": table.speedups.get(n) or None,
                "compression": table.compression.get(n),
                "breakdown": {
                    c: {k: json_safe(v) for k, v in parts.items()}
                    for c, parts in table.breakdown.get(n, {}).items()
                },
            }
            for n in table.n_values
        ]
        out = {
            "title": table.title,
            "stat": table.stat,
            "unit": stat_unit(table.stat),
            "breakdown_stat": table.breakdown_stat,
            "rows": rows,
            "notes": table.notes,
            "breakdown_notes": table.breakdown_notes,
        }
        if table.precision is not None:
            out["precisions"] = [
                {k: json_safe(v) for k, v in dataclasses.asdict(c).items()}
                for c in table.precision.cells
            ]
        return json.dumps(out, indent=2) + "\n"
    raise ValueError(f"unknown latency table format {fmt!r}; known: {', '.join(LATENCY_FORMATS)}")


def encoder_label(encoder: dict[str, Any]) -> str:
    """What ran a row's encoder: ``float32``, or on another runtime ``int8 (onnxruntime, fused
    graph, int8_recipe=ffn-float)``, the settings its time model was calibrated for."""
    runtime = encoder.get("runtime", "torch")
    if runtime == "torch":
        return str(encoder["dtype"])
    recipe = f", int8_recipe={encoder['int8_recipe']}" if encoder.get("int8_recipe") else ""
    return f"{encoder['dtype']} ({runtime}, {encoder['graph']} graph{recipe})"


def cost_line(row: LatencyRow) -> str:
    """``N=100 monobert (batch_size=32), float32: measured 1,951 ms/query (model step 1,900),
    predicted 1,880 (linear 1,500, attention 300, other 80); 80.1 GFLOP/s, 80% of the 100
    GFLOP/s matmul peak``, on a GPU the calls' fixed cost after ``other`` (``calls 3.0``);
    empty for a row without encoder work."""
    cost = row.cost
    if not cost or cost.get("achieved_gflops") is None:
        return ""
    model = (row.model_only or {}).get("mean_ms")
    encoder = encoder_label(row.encoder)
    said = row.label.endswith(f" @ {encoder}")  # a --dtypes label already names a torch dtype
    text = f"N={row.n} {row.label}{'' if said else ', ' + encoder}: measured "
    text += f"{row.latency['mean_ms']:,.1f}"
    text += " ms/query" + (f" (model step {model:,.1f})" if model else "")
    parts = cost.get("predicted")
    if parts:
        text += (
            f", predicted encoder {parts['total_ms']:,.1f} (linear {parts['linear_ms']:,.1f}, "
            f"attention {parts['attention_ms']:,.1f}, other {parts['other_ms']:,.1f}"
            + (f", calls {parts['call_ms']:,.1f}" if "call_ms" in parts else "")
            + ")"
        )
    text += f"; {cost['achieved_gflops']:,.1f} GFLOP/s"
    if cost.get("of_peak") is not None:
        text += f", {100 * cost['of_peak']:.0f}% of the {cost['peak_gflops']:,.0f} GFLOP/s peak"
    return text


def speedup_lines(n: int, sp: dict[str, Any], precision: str = "") -> list[str]:
    """``N=100: CROSS-JEM speed-up over monoBERT measured 2.15x (mean), ...``: the measured
    speed-ups of one N (in one ``precision`` of a run timing several) against the models'."""
    out = []
    where = f"N={n}" + (f", {precision}" if precision else "")
    for what, found in (
        ("CROSS-JEM speed-up over monoBERT", sp),
        ("end to end (items tokenised in the call)", sp.get("end_to_end")),
    ):
        if not found or "measured_mean" not in found:
            continue
        fraction = found.get("fraction_of_prediction")
        timed = found.get("predicted_time")
        out.append(
            f"{where}: {what} measured {found['measured_mean']:.2f}x (mean), "
            f"{found['measured_p50']:.2f}x (p50); cost model {found['predicted_flops']:.2f}x"
            + (f"; {100 * fraction:.0f}% of prediction" if fraction else "")
            + (f"; time model {timed:.2f}x" if timed else "")
        )
    return out


def latency_summary(record: LatencyRecord) -> list[str]:
    """Lines under the rich table: per N (and precision, in a run timing several), the measured
    speed-ups against the cost model's and each column's throughput; then where the record
    is."""
    out = []
    for block in record.blocks:
        out += speedup_lines(block.n, block.speedup)
        for precision, sp in block.speedup.get("precisions", {}).items():
            out += speedup_lines(block.n, sp, precision)
        best = [r for r in record.rows if r.n == block.n and r.best]
        out += [line for r in best if (line := cost_line(r))]
        calls = " of the processes' calls, pooled" if record.processes > 1 else ""
        out.append(
            f"N={block.n}: pairs/s{calls} (best row of each column): "
            + "; ".join(f"{r.column} {r.latency['candidates_per_s']:,.0f}" for r in best)
        )
        if record.processes > 1:
            out.append(aggregate_line(record, block.n))
    out.append(f"record: {record.path}")
    return out
