"""The CROSS-JEM paper's published numbers, as data, so tables and checks can sit them beside ours.

Source: the CROSS-JEM paper (shared/paper/crossjem-paper.tex). The paper prints percentages
(32.80); here every value is a **fraction** (0.3280 = 32.80 / 100), the scale our metrics use,
and the paper's metric names are mapped to ours (ir-measures names):

    SODQ            MAP@5 -> AP@5, MAP@10 -> AP@10
    MS MARCO-Titles MRR@5 -> RR@5, MRR@10 -> RR@10

(The paper's MAP@k is the mean of per-query AP@k; on MS MARCO-Titles each query has one relevant
item, so MAP@k and MRR@k coincide there.) A ``*`` in the paper marks large pre-trained models used
as is, without fine-tuning on the dataset: ``zero_shot=True`` here. ``ranker`` is the harness
ranker name a row corresponds to (some are not implemented); ``family`` is a key of
``bench.results.records.FAMILIES``, except ``"llm"`` for the decoder-only RankingGPT, which has no
harness family.
"""

from __future__ import annotations

from dataclasses import dataclass

PAPER = "CROSS-JEM (crossjem-paper.tex)"

#: Paper metric name -> harness metric name, per dataset of the main table.
METRIC_NAMES: dict[str, dict[str, str]] = {
    "sodq": {"MAP@5": "AP@5", "MAP@10": "AP@10"},
    "msmarco-titles": {"MRR@5": "RR@5", "MRR@10": "RR@10"},
}

_DATASET_ALIASES = {
    "stackoverflowdupquestions": "sodq",
    "msmarco_titles": "msmarco-titles",
    "ms-marco-titles": "msmarco-titles",
}


@dataclass(frozen=True)
class PaperRow:
    """One method's published result on one dataset (Table ``table_acad_main``)."""

    dataset: str
    method: str  # as printed in the paper
    ranker: str  # harness ranker name this row corresponds to
    family: str
    params: int | None  # parameter count; None for BM25
    params_label: str  # as printed: "66M", "7B", "--"
    zero_shot: bool  # '*' in the paper: pre-trained model used without fine-tuning
    metrics: dict[str, float]  # harness metric name -> fraction

    @property
    def label(self) -> str:
        return self.method + ("*" if self.zero_shot else "")


# method, ranker, family, params label, zero-shot, (SODQ MAP@5, MAP@10, MS MARCO-Titles MRR@5,
# MRR@10) in percent, copied from Table table_acad_main in the paper's row order.
_MAIN: tuple[tuple[str, str, str, str, bool, tuple[float, float, float, float]], ...] = (
    ("BM25", "bm25", "sparse", "--", False, (32.80, 39.26, 23.71, 24.57)),
    ("monoBERT", "monobert", "early", "66M", False, (46.79, 48.04, 30.89, 32.47)),
    ("ColBERT", "colbert", "late", "109M", False, (36.10, 37.68, 30.25, 32.00)),
    ("DPR", "dpr", "dual", "66M", False, (47.32, 48.48, 28.78, 30.87)),
    ("ANCE", "ance", "dual", "66M", False, (48.31, 49.41, 28.48, 30.53)),
    ("INSTRUCTOR", "instructor", "dual", "335M", True, (49.47, 50.81, 28.84, 30.55)),
    ("RankT5-6L", "rankt5", "seq2seq", "74M", False, (49.50, 50.75, 30.73, 32.52)),
    ("RankT5-base", "rankt5-base", "seq2seq", "223M", True, (45.66, 49.47, 27.87, 29.75)),
    ("RankingGPT-Llama2-7B", "rankinggpt", "llm", "7B", True, (47.64, 50.62, 28.66, 30.47)),
    ("CROSS-JEM-6L", "crossjem", "joint", "66M", False, (52.40, 53.05, 33.82, 35.45)),
)


def _fraction(percent: float) -> float:
    return round(percent / 100, 6)


def _params(label: str) -> int | None:
    scale = {"M": 10**6, "B": 10**9}
    return int(float(label[:-1]) * scale[label[-1]]) if label[-1:] in scale else None


def _main_rows() -> dict[str, list[PaperRow]]:
    rows: dict[str, list[PaperRow]] = {name: [] for name in METRIC_NAMES}
    for method, ranker, family, params, zero_shot, values in _MAIN:
        for (dataset, names), pair in zip(
            METRIC_NAMES.items(), (values[:2], values[2:]), strict=True
        ):
            metrics = {ours: _fraction(v) for ours, v in zip(names.values(), pair, strict=True)}
            rows[dataset].append(
                PaperRow(
                    dataset, method, ranker, family, _params(params), params, zero_shot, metrics
                )
            )
    return rows


MAIN_TABLE: dict[str, list[PaperRow]] = _main_rows()


def canonical_dataset(dataset: str) -> str:
    key = dataset.strip().lower()
    return _DATASET_ALIASES.get(key, key)


def paper_reference(dataset: str) -> list[PaperRow]:
    """The paper's main-table rows for ``dataset`` (sodq, msmarco-titles), in its order; else []."""
    return list(MAIN_TABLE.get(canonical_dataset(dataset), []))


# -- ablations (Table table_ablations) -----------------------------------------------------------
@dataclass(frozen=True)
class AblationRow:
    """CROSS-JEM trained/built one way; ``metrics`` as fractions under harness names."""

    ablation: str  # "loss" or "positions"
    variant: str
    dataset: str
    metrics: dict[str, float]


# The paper does not name the dataset of (a); its RPL value, 35.45, is CROSS-JEM's MS MARCO-Titles
# MRR@10 in the main table, and (b) is stated to be on MS MARCO, so both are msmarco-titles.
ABLATIONS: tuple[AblationRow, ...] = (
    AblationRow("loss", "BCE", "msmarco-titles", {"RR@10": _fraction(31.46)}),
    AblationRow("loss", "CE", "msmarco-titles", {"RR@10": _fraction(32.03)}),
    AblationRow("loss", "ListNet", "msmarco-titles", {"RR@10": _fraction(30.27)}),
    AblationRow("loss", "RPL", "msmarco-titles", {"RR@10": _fraction(35.45)}),
    AblationRow(
        "positions",
        "without positional encodings",
        "msmarco-titles",
        {"RR@10": _fraction(35.45), "RR@5": _fraction(33.82)},
    ),
    AblationRow(
        "positions",
        "with positional encodings",
        "msmarco-titles",
        {"RR@10": _fraction(35.68), "RR@5": _fraction(33.98)},
    ),
)


# -- latency (Table table_latency) ---------------------------------------------------------------
@dataclass(frozen=True)
class PaperLatency:
    """Mean time to score ``items`` candidates of one query, as published."""

    method: str
    ranker: str
    mean_ms: float
    items: int = 700
    device: str = "A100"


LATENCY: tuple[PaperLatency, ...] = (
    PaperLatency("ANCE", "ance", 4.0),
    PaperLatency("ColBERT", "colbert", 4.5),
    PaperLatency("monoBERT", "monobert", 41.3),
    PaperLatency("RankT5-6L", "rankt5", 41.3),
    PaperLatency("CROSS-JEM", "crossjem", 9.8),
)
