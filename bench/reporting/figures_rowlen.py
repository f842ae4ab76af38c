"""CROSS-JEM's rows as long as ``union_len=auto`` chooses (:mod:`rankers.families.crossjem.
rowlength`): the latency table of docs/results.md on titles and sentences and the README's
headline sentence for titles, both read from the `bench latency` records kept in
``results/reference/latency/`` (a block's ``tokens`` hold the length timed and, where auto chose
it, ``chosen``)."""

from __future__ import annotations

from bench.core.writer import markdown
from bench.latency.records import LatencyRecord, ListBlock
from bench.reporting.figures import Records, best_row, renderer, three_figures, times

#: the runs of each kind of item, `bench latency -d D --rankers monobert,crossjem --queries 8
#: --repeats 2 --warmup 2 --threads 1 --monobert-batch-sizes 32 --set crossjem.order=union`
#: (no union_len: auto), each N in the run that timed it; the last: sentences at 242 given
ROWLEN_RUNS = (
    ("titles", "latency/rowlen-semeval16b-auto-n10.json"),
    ("titles", "latency/rowlen-semeval16b-auto.json"),
    ("sentences", "latency/rowlen-wikiqa-auto-n10.json"),
    ("sentences", "latency/rowlen-wikiqa-auto.json"),
    ("sentences", "latency/rowlen-wikiqa-242.json"),
)
#: the run and N of the README's headline: titles at the paper's N=100
HEADLINE = ("latency/rowlen-semeval16b-auto.json", 100)


def _length(block: ListBlock) -> str:
    """``477 (auto)`` where auto chose the length, else ``242 (given)``."""
    chosen = "crossjem" in block.tokens.get("chosen", {})
    return f"{block.tokens['union_len']} ({'auto' if chosen else 'given'})"


def _cells(record: LatencyRecord, block: ListBlock) -> list[str]:
    """mean ms of monoBERT (its fastest batch size) and CROSS-JEM, pre-tokenised, and the
    measured speed-up (mean; p50) with the FLOP and time models' predictions."""
    sp = block.speedup
    mono, jem = (best_row(record, block.n, c).latency["mean_ms"] for c in ("monobert", "crossjem"))
    return [
        three_figures(float(mono)),
        three_figures(float(jem)),
        f"{times(sp.get('measured_mean'))}; {times(sp.get('measured_p50'))}",
        times(sp.get("predicted_flops")),
        times(sp.get("predicted_time")),
    ]


@renderer("latency-rowlen")
def latency_rowlen(records: Records) -> str:
    """Per kind of item and N: the row length timed, encoder rows per list, mean ms per query and
    CROSS-JEM's speed-up over monoBERT with the cost models' predictions."""
    rows = []
    for kind, name in ROWLEN_RUNS:
        record = records.latency(name)
        for block in record.blocks:
            rows.append(
                [
                    f"{record.dataset} ({kind})",
                    str(block.n),
                    _length(block),
                    f"{block.tokens['groups_mean']:.2f}",
                    *_cells(record, block),
                ]
            )
    header = ["dataset", "N", "union_len", "rows per list", "monoBERT ms", "CROSS-JEM ms"]
    header += ["speed-up (mean; p50)", "predicted (FLOPs)", "predicted (time)"]
    return markdown(header, rows)


@renderer("latency-headline")
def latency_headline(records: Records) -> str:
    """The README's sentence: CROSS-JEM's measured speed-up on titles beside the paper's 4.2x,
    with the record's other Ns."""
    name, n = HEADLINE
    record = records.latency(name)
    block = record.block(n)
    row = best_row(record, n, "crossjem")
    others = "; ".join(
        f"{times(b.speedup.get('measured_mean'))} at N={b.n} (union_len {b.tokens['union_len']})"
        for b in record.blocks
        if b.n != n
    )
    return (
        f"On short titles ({record.dataset}, BM25 top-{n} lists, rows of union_len "
        f"{block.tokens['union_len']} chosen by `union_len=auto`) CROSS-JEM is "
        f"{times(block.speedup.get('measured_mean'))} faster than monoBERT (mean latency per "
        f"query; the paper reports 4.2x), measured on this project's 2-core CPU, "
        f"{record.threads} thread, {row.dtype}, MiniLM-L6, union layout, untrained heads (timing "
        f"only){'; ' + others if others else ''}.\n"
    )
