"""Which record or row a table or a check is about (:class:`Pick`), and the named runs the
documents' tables share.

One pick language serves both readers: `bench check` picks the newest `bench run` record of a
dataset, split, ranker and settings (:mod:`bench.reporting.checks`), and a rendered table picks
one row of a kept comparison by the ranker and the options its label names
(:meth:`bench.reporting.figures.Records.row`). The runs several tables show are named once here,
as their labels name them (the options that differed from the ranker's settings when the run was
made), so every table that shows a run shows the same one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.results.labels import RowKey
from bench.results.records import LATENCY_KIND, RUN_KIND


@dataclass(frozen=True)
class Pick:
    """A ranker, fine-tuned or not, with the options that differ from its settings; for a
    record, also the dataset and split (None: any split).

    A comparison row matches when its label names exactly these options (compared as a label
    shows them, in any order: :meth:`matches`). A result record matches when each option (a
    dotted name for a nested value) has an equal value in its ``config`` or ``run_config`` and
    the options name everything it overrides (:func:`bench.reporting.checks.find_record`); a
    record's overrides say how it was trained, so ``fine_tuned`` is for rows only."""

    ranker: str
    fine_tuned: bool = False
    options: tuple[tuple[str, Any], ...] = ()
    dataset: str | None = None
    split: str | None = None

    @property
    def config(self) -> dict[str, Any]:
        """The options as a mapping (option -> value)."""
        return dict(self.options)

    @property
    def kind(self) -> str:
        """The kind of record this selects: `bench latency` rows when the options name
        ``benchmark: latency`` (their ``run_config`` holds it), else `bench run` records."""
        benchmark = self.config.get("benchmark")
        latency = benchmark is not None and str(benchmark) == LATENCY_KIND
        return LATENCY_KIND if latency else RUN_KIND

    def matches(self, key: RowKey) -> bool:
        return key.matches(self.ranker, self.fine_tuned, self.config)

    def but(self, **options: object) -> Pick:
        """This pick with ``options`` set (a None value removes one)."""
        merged = {**self.config, **options}
        return Pick(self.ranker, self.fine_tuned, tuple(merged.items()), self.dataset, self.split)

    def describe(self) -> str:
        """``wikiqa/test monobert (model=minilm-l6)``: a record pick as `bench check` names it."""
        where = "/".join(p for p in (self.dataset, self.split) if p)
        conf = ", ".join(f"{k}={v}" for k, v in self.options)
        return f"{where} {self.ranker}" + (f" ({conf})" if conf else "")

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.options if v is not None)
        return f"{self.ranker} ({shown}{', fine-tuned' if self.fine_tuned else ''})"


def pick(ranker: str, fine_tuned: bool = False, /, **options: object) -> Pick:
    """A :class:`Pick` of a row: ``pick("monobert", True, model="minilm-l6", loss="ce")``."""
    return Pick(ranker, fine_tuned, tuple(options.items()))


# -- kept comparisons ------------------------------------------------------------------------------
SEMEVAL = "accuracy-semeval16b.md"
MAIN_JOB = "main-job-semeval16b.md"
WIKIQA = "accuracy-wikiqa.json"
WIKIQA_PEERS = "accuracy-wikiqa-colbert-rankt5.json"

# -- semeval16b ------------------------------------------------------------------------------------
_TRAINED = {"model": "minilm-l6", "min_steps": 200, "patience": 3}
MONOBERT_10 = pick("monobert", True, **_TRAINED, epochs=10)
CROSSJEM_10 = pick("crossjem", True, **_TRAINED, epochs=10, union_len=72, item_positions=True)
COLBERT = pick("colbert", True, model="minilm-l6", lr=1e-4, epochs=3)
RANKT5 = pick("rankt5", True, model="minilm-l6-encdec", epochs=3)

# -- wikiqa ----------------------------------------------------------------------------------------
MONOBERT_CE = pick("monobert", True, **_TRAINED, loss="ce")
#: monoBERT trained with bce for 3 epochs (T), scored from its folder
MONOBERT_BCE_T = pick("monobert", **_TRAINED, checkpoint="T")
#: CROSS-JEM on wikiqa: the union capped at 272 tokens; the chosen one distils monoBERT (ce, M)
#: and ColBERT (C) for 6 epochs with patience 2
CROSSJEM_WIKIQA = pick("crossjem", True, **_TRAINED, union_len=272)
CROSSJEM_CHOSEN = CROSSJEM_WIKIQA.but(epochs=6, patience=2, teacher="M+C")

#: CROSS-JEM's row layouts on wikiqa: (shown, run record or None, latency record, the layout's
#: column there); the union's run was kept only as a comparison row (:data:`CROSSJEM_CHOSEN` of
#: :data:`WIKIQA`)
LAYOUTS = (
    ("union (the paper's layout)", None, "latency/word-order-union.json", "crossjem"),
    (
        "concat, item positions",
        "word-order/wikiqa-concat-item.json",
        "latency/word-order-concat-item.json",
        "crossjem {concat, item positions}",
    ),
    (
        "concat, row positions (2 threads)",
        "word-order/wikiqa-concat-row.json",
        "latency/word-order-concat-row.json",
        "crossjem {concat}",
    ),
    (
        "hybrid share_min=2, item positions",
        "word-order/wikiqa-hybrid-item.json",
        "latency/word-order-hybrid-item.json",
        "crossjem {hybrid share_min=2, item positions}",
    ),
    (
        "hybrid share_min=2, row positions, union_len 477 (1 thread)",
        "word-order/wikiqa-hybrid2-row.json",
        "latency/word-order-hybrid2-row.json",
        "crossjem {hybrid share_min=2}",
    ),
    (
        "hybrid share_min=3, row positions, union_len 477 (1 thread)",
        "word-order/wikiqa-hybrid3-row.json",
        "latency/word-order-hybrid3-row.json",
        "crossjem {hybrid share_min=3}",
    ),
    (
        "union merged after 1 concat layer, union_len 477 (1 thread)",
        "word-order/wikiqa-merge1-union.json",
        "latency/word-order-merge1-union.json",
        "crossjem {union, merged after 1 layer}",
    ),
    (
        "hybrid share_min=4, row positions, union_len 477 (1 thread)",
        "word-order/wikiqa-hybrid4-row.json",
        "latency/word-order-hybrid4-row.json",
        "crossjem {hybrid share_min=4}",
    ),
    (
        "function words shared (+ content held by 3), row positions, union_len 477 (1 thread)",
        "word-order/wikiqa-fw-c3.json",
        "latency/word-order-fw-c3.json",
        "crossjem {hybrid share_min=2, function words + content held by 3}",
    ),
    (
        "function words shared (+ content held by 4), query terms pooled from the query, row "
        "positions, union_len 477 (1 thread)",
        "word-order/wikiqa-fw-q-c4.json",
        "latency/word-order-fw-q-c4.json",
        "crossjem {hybrid share_min=2, function words + content held by 4, query terms from the "
        "query}",
    ),
)
