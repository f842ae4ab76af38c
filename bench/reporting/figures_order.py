"""The README's word-order tables (:mod:`bench.reporting.figures`): the paper's order ablation,
CROSS-JEM's row layouts on wikiqa and semeval16b, their accuracy vs speed-up frontier and DL19
transfer.

Apart from :mod:`bench.reporting.figures_tables` because the layout rows (:class:`LayoutPoint`)
also feed the frontier plot (`bench reference frontier`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.core.writer import markdown
from bench.reporting.figures import (
    MISSING,
    Records,
    ReferenceError,
    best_row,
    difference,
    fixed,
    kept_dev,
    renderer,
    times,
)
from bench.reporting.picks import CROSSJEM_CHOSEN, LAYOUTS, MONOBERT_CE, WIKIQA, Pick, pick

# -- word order ------------------------------------------------------------------------------------
ITEM_ORDER = "word-order/item-order-{}.json"
#: (shown, row label) of each dataset's two runs; wikiqa's items-as-written model is the teacher
#: monoBERT of the layout runs, scored from its folder
_SORTED = pick("monobert", True, model="minilm-l6", sort_item_tokens=True)
_ITEM_ORDER_ROWS = {
    "semeval16b": (pick("monobert", True, model="minilm-l6"), _SORTED),
    "wikiqa": (pick("monobert", model="minilm-l6", checkpoint="db6e05ead8af"), _SORTED),
}


@renderer("item-order")
def item_order(records: Records) -> str:
    """`bench ablate --what item-order -r monobert -d D` on both datasets, test split: the paper's
    order ablation (every item's words sorted, trained and scored so)."""
    rows = []
    for dataset in ("semeval16b", "wikiqa"):
        name = ITEM_ORDER.format(dataset)
        written, ordered = (records.row(name, wanted) for wanted in _ITEM_ORDER_ROWS[dataset])
        rows.append(
            [
                dataset,
                fixed(written.metrics["AP@10"]),
                fixed(ordered.metrics["AP@10"]),
                difference(ordered, written),
            ]
        )
    header = ["dataset (test)", "items as written", "item words sorted", "difference (points)"]
    return markdown(header, rows)


#: list sizes of the order table's speed-up columns
ORDER_NS = (10, 100, 700)


@dataclass(frozen=True)
class LayoutPoint:
    """One row of the layout frontier: a layout's accuracy and its speed-ups over monoBERT."""

    shown: str
    dev: str
    test: float
    #: N -> (measured mean-latency ratio, cost model's FLOPs ratio); None for monoBERT itself
    speedup: dict[int, tuple[float, float]] | None


def order_frontier(records: Records) -> list[LayoutPoint]:
    """monoBERT, then every CROSS-JEM row layout of :data:`LAYOUTS` with its dev and test
    AP@10 and its speed-ups at N = 100 and 700, each read from the layout's own `bench latency`
    run beside monoBERT (the column of that layout, or an error naming the record)."""
    mono = records.row(WIKIQA, MONOBERT_CE)
    out = [
        LayoutPoint(
            "monobert (loss=ce; one sequence per item)", MISSING, mono.metrics["AP@10"], None
        )
    ]
    for shown, run, latency, column in LAYOUTS:
        if run is None:
            dev, test = MISSING, records.row(WIKIQA, CROSSJEM_CHOSEN).metrics["AP@10"]
        else:
            record = records.run(run)
            dev, test = kept_dev(record), record.metrics["AP@10"]
        bench = records.latency(latency)
        speed: dict[int, tuple[float, float]] = {}
        timed = {b.n for b in bench.blocks}
        for n in ORDER_NS:
            if n not in timed:  # a run that timed other list sizes: that cell stays empty
                continue
            sp = bench.block(n).speedup
            if sp.get("model") is None or best_row(bench, n, column).label != sp["model"]:
                raise ReferenceError(f"{bench.path}: N={n} speed-up is not of column {column!r}")
            speed[n] = (float(sp["measured_mean"]), float(sp["predicted_flops"]))
        out.append(LayoutPoint(shown, dev, float(test), speed))
    return out


@renderer("crossjem-order-wikiqa")
def crossjem_order_wikiqa(records: Records) -> str:
    """CROSS-JEM's row layouts on wikiqa (same teacher, seed and settings) beside monoBERT: dev
    and test AP@10, and the speed-up over monoBERT measured in one `bench latency` run per layout
    with the cost model's prediction."""
    points = order_frontier(records)
    mono = points[0].test
    rows = [[points[0].shown, MISSING, fixed(mono)] + [MISSING] * (1 + 2 * len(ORDER_NS))]
    for p in points[1:]:
        assert p.speedup is not None
        cells = [
            times(p.speedup[n][i]) if n in p.speedup else MISSING for n in ORDER_NS for i in (0, 1)
        ]
        rows.append([p.shown, p.dev, fixed(p.test), f"{100 * (p.test - mono):+.2f}", *cells])
    header = ["ranker / row layout", "dev AP@10 (epoch)", "test AP@10", "vs monoBERT (points)"]
    header += [f"{what} N={n}" for n in ORDER_NS for what in ("speed-up", "predicted")]
    return markdown(header, rows)


SETTINGS = "rankers/configs/crossjem.yaml"


@renderer("crossjem-order-semeval16b")
def crossjem_order_semeval16b(records: Records) -> str:
    """The layout sweeps on semeval16b as `bench sweep` wrote them into CROSS-JEM's settings file:
    the first at union_len 72 (concat split 13 of 59 test lists), the second at a union_len that
    fits every list (its own column; 72 for the first)."""
    rows = []
    for nth in (0, 1):
        sweep = records.sweep(SETTINGS, "semeval16b", varies="order", nth=nth)
        for r in sweep.rows:
            cells = [r["order"], r["positions"], r.get("union_len", "72")]
            rows.append([*cells, r["dev AP@10"], r["test AP@10"], r["epoch"]])
    header = ["order", "positions", "union_len", "dev AP@10", "test AP@10", "epoch kept"]
    return markdown(header, rows)


def _scored_from(ranker: str, checkpoint: str) -> Pick:
    """A wikiqa-trained model scored from its folder (the label names the folder's key)."""
    return pick(ranker, model="minilm-l6", checkpoint=checkpoint)


#: DL19 transfer: the wikiqa-trained models scored zero-shot: (record, row pick, shown name);
#: each record is one `bench compare` of its session's runs, monoBERT (first) in both
DL19_TRANSFER = "word-order/dl19-transfer.md"
DL19_TRANSFER_2 = "word-order/dl19-transfer-2.md"
_DL19_MODELS = (
    (DL19_TRANSFER, _scored_from("monobert", "d11d1acf7c90"), "monobert (loss=ce)"),
    (DL19_TRANSFER, _scored_from("crossjem", "ef55f4fa8bef"), "hybrid share_min=2, row positions"),
    (DL19_TRANSFER, _scored_from("crossjem", "a5c565825725"), "hybrid share_min=3, row positions"),
    (DL19_TRANSFER, _scored_from("crossjem", "9b9efc867cd0"), "union merged after 1 concat layer"),
    (
        DL19_TRANSFER_2,
        _scored_from("crossjem", "e787c2e37c76"),
        "hybrid share_min=4, row positions",
    ),
    (
        DL19_TRANSFER_2,
        _scored_from("crossjem", "ce854de7ef9c"),
        "function words (+ content held by 3)",
    ),
    (
        DL19_TRANSFER_2,
        _scored_from("crossjem", "e1ebfd0e2e43"),
        "function words (+ content held by 4), query terms pooled",
    ),
)


@renderer("order-transfer-dl19")
def order_transfer_dl19(records: Records) -> str:
    """The wikiqa-trained monoBERT and CROSS-JEM layouts scored zero-shot on TREC DL19 (43
    queries x 100 BM25 candidates, graded; binary measures count grade >= 2), from one `bench
    compare` markdown record per session, whose monoBERT rows must agree."""
    metrics = ("AP@10", "AP", "nDCG@10", "RR@10")
    first, mono_pick = _DL19_MODELS[0][:2]
    mono = records.row(first, mono_pick)
    if records.row(DL19_TRANSFER_2, mono_pick).metrics != mono.metrics:
        raise ReferenceError(f"{DL19_TRANSFER_2}: monoBERT's row differs from {DL19_TRANSFER}'s")
    rows = []
    for record, wanted, shown in _DL19_MODELS:
        row = records.row(record, wanted)
        cells = [fixed(row.metrics[m]) for m in metrics]
        delta = (
            MISSING
            if row is mono
            else f"{100 * (row.metrics['nDCG@10'] - mono.metrics['nDCG@10']):+.2f}"
        )
        rows.append([shown, *cells, delta])
    return markdown(["wikiqa-trained model", *metrics, "nDCG@10 vs monoBERT (points)"], rows)
