"""The accuracy-per-precision tables: each trained model scored in every precision, AP@10.

Records: ``results/reference/precision-DATASET.md`` (``bench compare --format markdown``), made
on a lent GPU machine by the precision grid (docs/results.md#precision): each ranker trained once
on CUDA, then scored on CUDA in float32, bfloat16 and float16 (fine-tuned rows) and on the same
machine's CPU in float32, bfloat16 and int8 on ONNX Runtime (rows that load the same trained
folder with ``checkpoint=``). Rows are picked by ranker and options read from their labels
(:class:`~bench.results.labels.RowKey`), never by label text.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.core.writer import markdown
from bench.latency.records import LatencyRecord
from bench.reporting.figures import (
    MISSING,
    ComparisonRow,
    Records,
    ReferenceError,
    best_row,
    fixed,
    renderer,
    three_figures,
    times,
)
from bench.results.labels import RowKey

#: (column header, device, dtype, runtime, int8 recipe): the precisions of the grid, float32 first
#: per device. The int8 recipe is the row's ``int8_recipe`` option as its label shows it (None:
#: the default, which a label leaves out); the lent machine's records predate the option, when
#: int8 quantized every weight MatMul (today's ``int8_recipe=all``), so their header says so.
Column = tuple[str, str, str, str | None, str | None]
COLUMNS: tuple[Column, ...] = (
    ("CUDA float32", "cuda", "float32", None, None),
    ("CUDA bfloat16", "cuda", "bfloat16", None, None),
    ("CUDA float16", "cuda", "float16", None, None),
    ("CPU float32", "cpu", "float32", None, None),
    ("CPU bfloat16", "cpu", "bfloat16", None, None),
    ("CPU int8 (ONNX Runtime, every MatMul)", "cpu", "int8", "onnxruntime", None),
)
#: the CPU tables of models trained on this project's CPU: float32, the default int8 recipe and
#: int8 with every weight MatMul quantized
CPU_COLUMNS: tuple[Column, ...] = (
    ("CPU float32", "cpu", "float32", None, None),
    ("CPU int8 (ONNX Runtime, default: feed-forward float32)", "cpu", "int8", "onnxruntime", None),
    ("CPU int8, every MatMul (int8_recipe=all)", "cpu", "int8", "onnxruntime", "all"),
)


def precision_row(records: Records, name: str, ranker: str, column: Column) -> ComparisonRow | None:
    """The row of ``ranker`` in ``column`` (its device, dtype, runtime and int8 recipe): on CUDA
    the fine-tuned row (trained and scored there), on the CPU the row that loads that model with
    ``checkpoint=``; None if the record has none, an error if it has several."""
    _, device, dtype, runtime, recipe = column
    found = []
    for label, row in records.comparison(name).items():
        key = RowKey.parse(label)
        options = dict(key.options)
        on_cpu = "checkpoint" in options and not key.fine_tuned
        if (
            key.ranker == ranker
            and options.get("dtype") == dtype
            and options.get("runtime") == runtime
            and options.get("int8_recipe") == recipe
            and on_cpu == (device == "cpu")
            and (on_cpu or key.fine_tuned)
        ):
            found.append(row)
    if len(found) > 1:
        raise ReferenceError(f"{name}: {len(found)} rows of {ranker} {dtype} on {device}")
    return found[0] if found else None


def precision_table(
    records: Records, name: str, rankers: Sequence[str], columns: Sequence[Column] = COLUMNS
) -> str:
    """AP@10 per ranker and precision (``columns``: a subset of :data:`COLUMNS`), the change
    against float32 on the same device beside each low-precision value."""
    rows = []
    for ranker in rankers:
        cells = [ranker]
        base: dict[str, float] = {}
        for column in columns:
            _, device, dtype, _, _ = column
            row = precision_row(records, name, ranker, column)
            if row is None:
                cells.append(MISSING)
                continue
            value = row.metrics["AP@10"]
            if dtype == "float32":
                base[device] = value
                cells.append(fixed(value))
            elif device in base:
                cells.append(f"{fixed(value)} ({value - base[device]:+.4f})")
            else:
                cells.append(fixed(value))
        rows.append(cells)
    return markdown(["ranker", *(c[0] for c in columns)], rows)


@renderer("precision-semeval16b")
def precision_semeval16b(records: Records) -> str:
    """monoBERT and CROSS-JEM on semeval16b test in every precision."""
    return precision_table(records, "precision-semeval16b.md", ("monobert", "crossjem"))


@renderer("precision-wikiqa")
def precision_wikiqa(records: Records) -> str:
    """monoBERT on wikiqa test in every precision (CROSS-JEM: its ColBERT teacher failed on the
    GPU there, a bug fixed before the second run, and the loan ran out before a rerun)."""
    return precision_table(records, "precision-wikiqa.md", ("monobert",))


@renderer("precision-wikiqa-cpu")
def precision_wikiqa_cpu(records: Records) -> str:
    """monoBERT and CROSS-JEM trained on this project's CPU, scored on it in float32 and int8."""
    return precision_table(
        records, "precision-wikiqa-cpu.md", ("monobert", "crossjem"), CPU_COLUMNS
    )


@renderer("precision-semeval16b-cpu")
def precision_semeval16b_cpu(records: Records) -> str:
    """The same on semeval16b."""
    return precision_table(
        records, "precision-semeval16b-cpu.md", ("monobert", "crossjem"), CPU_COLUMNS
    )


# -- time per precision ----------------------------------------------------------------------------
#: (machine, record, the precision's name in a ``--dtypes`` record, or None for a record of one
#: precision): one row each, wikiqa test, BM25 top-100 lists, one thread
_LENT = "lent machine's host CPU (AMX)"
_OURS = "this project's CPU (no native bfloat16)"
LATENCY_ROWS: tuple[tuple[str, str, str | None], ...] = (
    (_LENT, "latency/precision/h200-host-cpu-float32-t1.json", None),
    (_LENT, "latency/precision/h200-host-cpu-bfloat16-t1.json", None),
    (_OURS, "latency/precision/cpu-dtypes.json", "float32"),
    (_OURS, "latency/precision/cpu-dtypes.json", "onnxruntime int8"),
)
#: the list size of the table
LATENCY_N = 100
#: the sentence-transformers peer's column
PEER = "st-crossencoder"


def _peer_ms(record: LatencyRecord, n: int, precision: str | None) -> float | None:
    """The sentence-transformers peer's fastest pre-tokenised-or-only row in that precision."""
    rows = [
        r
        for r in record.rows
        if r.n == n and r.ranker == PEER and (precision is None or r.precision == precision)
    ]
    return min((float(r.latency["mean_ms"]) for r in rows), default=None)


@renderer("precision-latency")
def precision_latency(records: Records) -> str:
    """Per machine and precision: monoBERT's and CROSS-JEM's (union) mean ms/query, the
    sentence-transformers peer's where it was timed, CROSS-JEM's measured speed-up (mean and
    p50) and the time and FLOP models' predictions, all from one interleaved run per record."""
    rows = []
    for machine, name, precision in LATENCY_ROWS:
        record = records.latency(name)
        speed = record.block(LATENCY_N).speedup
        if precision is not None:
            speed = speed["precisions"][precision]
        mono, joint = (
            float(best_row(record, LATENCY_N, speed[side]).latency["mean_ms"])
            for side in ("baseline", "model")
        )
        dtype = next(r.dtype for r in record.rows if r.label == speed["model"])
        shown = precision or dtype.removesuffix(" weights")
        peer = _peer_ms(record, LATENCY_N, precision)
        rows.append(
            [
                machine,
                "int8 (ONNX Runtime)" if shown.endswith("int8") else shown,
                three_figures(mono),
                three_figures(joint),
                three_figures(peer),
                times(speed["measured_mean"]),
                times(speed["measured_p50"]),
                times(speed.get("predicted_time")),
                times(speed.get("predicted_flops")),
            ]
        )
    header = ["machine, 1 thread", "precision", "monoBERT ms/query", "CROSS-JEM ms/query"]
    header += ["sentence-transformers peer ms/query", "speed-up (mean)", "speed-up (p50)"]
    header += ["time model", "FLOP model"]
    return markdown(header, rows)
