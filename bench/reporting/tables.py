"""Comparison tables: result records of one dataset split -> one table model -> small renderers.

:func:`build_comparison` does every decision once (which records, which columns, best values,
significance against a baseline, the paper's reference block) and stores it in a
:class:`ComparisonTable`; each renderer only lays that model out in its format, so the formats
can never disagree. ``json`` holds the harness's own results only: the paper's rows are published
numbers, not results, and stay out of it (they are in :mod:`bench.reporting.paper` as data).
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.core import writer
from bench.core.io import json_safe
from bench.execution.policy import DEFAULT_BASELINE
from bench.execution.selection import newest_per_row
from bench.reporting.paper import PAPER, PaperRow, paper_reference
from bench.results.groups import GroupRecord
from bench.results.metrics import DEFAULT_MEASURES
from bench.results.records import FAMILIES, ResultRecord, supervision
from bench.results.significance import PairedResult, canonical_test, compare

if TYPE_CHECKING:
    from rich.table import Table

log = logging.getLogger(__name__)

FORMATS: tuple[str, ...] = ("table", "markdown", "csv", "latex", "json")
HARNESS = "harness"
PAPER_SOURCE = "paper"
#: marks a row whose trained model scored below a no-training baseline on dev
FLAG = "‡"
#: marks a difference from the baseline smaller than the seed spread (a seed group's row)
SPREAD = "≈"
_EPS = 1e-12


@dataclass(frozen=True)
class Column:
    key: str  # metric name, or a key of ResultRecord.latency
    title: str
    kind: str  # "metric" or "latency"
    higher_is_better: bool = True
    digits: int = 4


LATENCY_COLUMNS: tuple[Column, ...] = (
    Column("p50_ms", "p50 ms", "latency", higher_is_better=False, digits=1),
    Column("candidates_per_s", "cand/s", "latency", higher_is_better=True, digits=0),
)


@dataclass
class Cell:
    value: float | None = None
    best: bool = False  # best of the column among the harness rows
    significant: bool = False  # Holm-adjusted p below alpha against the baseline
    comparison: PairedResult | None = None
    #: a seed group's row: the sample standard deviation over its seeds (value: their mean)
    sd: float | None = None
    #: the difference from the baseline is smaller than the seed spread (:func:`_mark_spread`)
    within_spread: bool = False


@dataclass
class Row:
    label: str
    ranker: str
    family: str
    source: str = HARNESS  # HARNESS or PAPER_SOURCE
    cells: dict[str, Cell] = field(default_factory=dict)
    record: ResultRecord | None = None
    reference: PaperRow | None = None
    #: what the ranker was trained on (:func:`bench.results.records.supervision`), "" for paper rows
    supervision: str = ""
    #: rankers needing no training that the row's trained model scored below on dev, as its
    #: training found (``training.dev_baselines.below``): training did not help there
    below_baselines: list[str] = field(default_factory=list)
    #: a seed group's row: its seeds (its metric cells are means over them); empty otherwise
    seeds: list[int] = field(default_factory=list)


@dataclass
class Group:
    family: str
    title: str
    rows: list[Row]


@dataclass
class ComparisonTable:
    """Everything a renderer shows; built once by :func:`build_comparison`."""

    dataset: str
    split: str
    columns: list[Column]
    groups: list[Group]
    baseline: str | None = None  # label of the baseline row, when significance was tested
    test: str = "ttest"
    alpha: float = 0.05
    permutations: int = 10_000
    seed: int = 0
    comparisons: list[PairedResult] = field(default_factory=list)
    untested: list[str] = field(default_factory=list)  # rows without usable per-query values
    remarks: list[str] = field(default_factory=list)  # why significance was not tested, etc.

    @property
    def rows(self) -> list[Row]:
        return [row for group in self.groups for row in group.rows]

    @property
    def title(self) -> str:
        return f"{self.dataset} / {self.split}"

    def notes(self, mark: str = "†", flag: str = FLAG) -> list[str]:
        """Footnotes: what bold, ``mark`` and ``flag`` mean, the baseline, test, alpha, and the
        paper rows."""
        rule = (
            "metrics and cand/s: higher is better; p50 ms: lower is better"
            if any(col.kind == "latency" for col in self.columns)
            else "higher is better"
        )
        notes = [f"Bold: best value of each column among this harness's rows ({rule})."]
        if self.baseline is not None and self.comparisons:
            sizes = sorted({c.n_queries for c in self.comparisons})
            n = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
            k = len({c.system for c in self.comparisons})
            test = (
                "two-sided paired t-test"
                if self.test == "ttest"
                else f"two-sided paired randomisation test ({self.permutations} sign flips, "
                f"seed {self.seed}, exact enumeration when 2^n is at most that)"
            )
            notes.append(
                f"{mark}: significantly different from the baseline {self.baseline} "
                f"(Holm-adjusted p below alpha = {self.alpha:g}; {test} on per-query values "
                f"over {n} shared queries; Holm-Bonferroni across the {k} compared system(s), "
                f"per metric)."
            )
        if self.untested:
            notes.append(
                "Not tested for significance (no per-query values shared with the "
                f"baseline): {', '.join(self.untested)}."
            )
        notes.extend(self.remarks)
        notes.extend(self._seed_notes())
        flagged = [row for row in self.rows if row.below_baselines]
        if flagged:
            which = "; ".join(
                f"{row.label} below {', '.join(row.below_baselines)}" for row in flagged
            )
            notes.append(
                f"{flag}: its model, trained here, scored below a ranker that needs no training on "
                f"the dev split (training.dev_baselines in the record): {which}."
            )
        if any(row.source == PAPER_SOURCE for row in self.rows):
            notes.append(
                f"(paper) rows: published numbers from {PAPER}, Table table_acad_main, as "
                "fractions (MAP@k shown as AP@k, MRR@k as RR@k); * = pre-trained model used "
                "without fine-tuning. Not computed by this harness, never bold or tested."
            )
        return notes

    def _seed_notes(self, spread: str = SPREAD) -> list[str]:
        """What a seed group's row shows, and what ``spread`` marks."""
        if not any(row.seeds for row in self.rows):
            return []
        notes = [
            "A row naming seeds is a seed group: each metric as mean ± sample standard deviation "
            "(n - 1) over its n seeds, one training and run per seed; in the paired tests its "
            "per-query values are the mean over the seeds."
        ]
        if any(cell.within_spread for row in self.rows for cell in row.cells.values()):
            notes.append(
                f"{spread}: the difference from the baseline {self.baseline} is smaller than the "
                "seed spread (|mean - baseline's mean| below the larger sample standard "
                "deviation of the two rows): a reseed can reverse it."
            )
        return notes


# -- building ------------------------------------------------------------------------------------
def build_comparison(
    records: Sequence[ResultRecord],
    *,
    metrics: Sequence[str] | None = None,
    baseline: str | None = None,
    test: str = "ttest",
    alpha: float = 0.05,
    reference: bool = True,
    latency: bool | None = None,
    permutations: int = 10_000,
    seed: int = 0,
) -> ComparisonTable:
    """One table for the records of one dataset split.

    ``metrics`` default to every metric the records have, in ``DEFAULT_MEASURES`` order.
    ``baseline`` is a ranker name or row label (default: ``bm25`` when present). ``latency``
    None shows the latency columns when some record has ``latency['p50_ms']``. Records sharing
    ranker and label: the newest (``created``) wins
    (:func:`bench.execution.selection.newest_per_row`); the readers pass only current records
    (:func:`bench.execution.selection.select_records`).
    """
    if not records:
        raise ValueError("no result records to tabulate")
    splits = sorted({(r.dataset, r.split) for r in records})
    if len(splits) > 1:
        found = ", ".join(f"{d}/{s}" for d, s in splits)
        raise ValueError(f"records span several dataset splits ({found}); tabulate one at a time")
    dataset, split = splits[0]
    test = canonical_test(test)
    records = newest_per_row(records)
    columns = _metric_columns(records, metrics)
    if latency is None:
        latency = any("p50_ms" in (r.latency or {}) for r in records)
    if latency:
        columns += LATENCY_COLUMNS
    rows = [_record_row(rec, columns) for rec in records]
    _mark_best(rows, columns)
    table = ComparisonTable(
        dataset,
        split,
        columns,
        _group(rows),
        test=test,
        alpha=alpha,
        permutations=permutations,
        seed=seed,
    )
    _mark_significance(table, rows, baseline)
    if reference:
        block = _reference_group(dataset, columns)
        if block is not None:
            table.groups.append(block)
    return table


def _metric_columns(records: Sequence[ResultRecord], metrics: Sequence[str] | None) -> list[Column]:
    have: dict[str, None] = {}
    for rec in records:
        have.update(dict.fromkeys(rec.metrics))
    if metrics is None:
        ordered = [m for m in DEFAULT_MEASURES if m in have]
        metrics = ordered + [m for m in have if m not in ordered]
    else:
        unknown = [m for m in metrics if m not in have]
        if unknown:
            raise ValueError(
                f"metric(s) {', '.join(unknown)} in no record; available: {', '.join(have)}"
            )
    return [Column(m, m, "metric") for m in metrics]


def _record_row(rec: ResultRecord, columns: Sequence[Column]) -> Row:
    def value(col: Column) -> float | None:
        source = rec.metrics if col.kind == "metric" else (rec.latency or {})
        v = source.get(col.key)
        return None if v is None else float(v)

    cells = {col.key: Cell(value(col)) for col in columns}
    seeds: list[int] = []
    if isinstance(rec, GroupRecord):
        seeds = list(rec.seeds)
        for col in columns:
            if col.kind == "metric":
                cells[col.key].sd = rec.sd.get(col.key)
    verdict = (rec.training or {}).get("dev_baselines") or {}
    return Row(
        rec.label or rec.ranker,
        rec.ranker,
        rec.family,
        HARNESS,
        cells,
        record=rec,
        supervision=supervision(rec.training),
        below_baselines=[str(b) for b in verdict.get("below") or []],
        seeds=seeds,
    )


def _mark_best(rows: Sequence[Row], columns: Sequence[Column]) -> None:
    for col in columns:
        values = [row.cells[col.key].value for row in rows]
        present = [v for v in values if v is not None]
        if not present:
            continue
        best = max(present) if col.higher_is_better else min(present)
        for row, v in zip(rows, values, strict=True):
            row.cells[col.key].best = v is not None and abs(v - best) <= _EPS


def _family_rank(family: str) -> int:
    order = list(FAMILIES)
    return order.index(family) if family in order else len(order)


def _group(rows: Sequence[Row]) -> list[Group]:
    """Rows grouped by family in the paper's order (unknown families last), labels sorted."""
    labels = [row.label for row in rows]
    for row in rows:  # two rankers with one label: say which is which
        if labels.count(row.label) > 1:
            row.label = f"{row.label} ({row.ranker})"
    groups: dict[str, Group] = {}
    for row in sorted(rows, key=lambda r: (_family_rank(r.family), r.family, r.label)):
        title = FAMILIES.get(row.family, row.family or "Other")
        groups.setdefault(row.family, Group(row.family, title, [])).rows.append(row)
    return list(groups.values())


def _find_baseline(rows: Sequence[Row], baseline: str | None) -> tuple[Row | None, str | None]:
    """The baseline row, or None and the reason to give in the notes."""
    wanted = baseline or DEFAULT_BASELINE
    by_label = [r for r in rows if r.label == wanted]
    matches = by_label or [r for r in rows if r.ranker == wanted]
    if len(matches) == 1:
        return matches[0], None
    labels = ", ".join(sorted(r.label for r in rows))
    if not matches and baseline is None:
        return None, None  # no bm25: nothing to test against, nothing to explain
    if not matches:
        raise ValueError(f"baseline {baseline!r} matches no ranker or label; rows: {labels}")
    options = ", ".join(r.label for r in matches)
    if baseline is not None:
        raise ValueError(f"baseline {baseline!r} is ambiguous ({options}); give a row label")
    return None, f"Significance not tested: several {wanted} rows ({options}); choose a baseline."


def _mark_significance(table: ComparisonTable, rows: Sequence[Row], baseline: str | None) -> None:
    base_row, reason = _find_baseline(rows, baseline)
    if reason:
        table.remarks.append(reason)
    if base_row is None:
        return
    table.baseline = base_row.label
    _mark_spread(table.columns, base_row, [row for row in rows if row is not base_row])
    read = {row.label: row.record.per_query_file() for row in rows if row.record is not None}
    per_query = {label: file.values for label, file in read.items()}
    doubted = {label: file.problem for label, file in read.items() if file.problem}
    table.remarks += [f"Not tested for significance: {k}: {why}." for k, why in doubted.items()]
    base_pq = per_query[base_row.label]
    if not base_pq:
        table.remarks.append(
            f"Significance not tested: the baseline {base_row.label} has no usable per-query "
            "values."
        )
        return
    others = [row for row in rows if row is not base_row]
    by_label = {row.label: row for row in others}
    table.untested = [
        row.label
        for row in others
        if row.label not in doubted and not set(per_query[row.label]) & set(base_pq)
    ]
    for col in table.columns:
        if col.kind != "metric" or not _has_metric(base_pq, col.key):
            continue
        systems = {
            row.label: per_query[row.label]
            for row in others
            if row.label not in table.untested and _has_metric(per_query[row.label], col.key)
        }
        if not systems:
            continue
        results = compare(
            base_pq,
            systems,
            col.key,
            baseline_name=base_row.label,
            test=table.test,
            alpha=table.alpha,
            permutations=table.permutations,
            seed=table.seed,
        )
        for res in results:
            cell = by_label[res.system].cells[col.key]
            cell.comparison, cell.significant = res, res.significant
        table.comparisons.extend(results)


def _mark_spread(columns: Sequence[Column], base: Row, others: Sequence[Row]) -> None:
    """Flag each metric cell whose difference from ``base`` is smaller than the seed spread:
    the larger sample standard deviation of the two rows (only where one is a seed group)."""
    for col in columns:
        if col.kind != "metric":
            continue
        base_cell = base.cells[col.key]
        for row in others:
            cell = row.cells[col.key]
            sds = [c.sd for c in (cell, base_cell) if c.sd is not None]
            if not sds or cell.value is None or base_cell.value is None:
                continue
            cell.within_spread = abs(cell.value - base_cell.value) < max(sds)


def _has_metric(per_query: dict[str, dict[str, float]], metric: str) -> bool:
    return bool(per_query) and all(metric in values for values in per_query.values())


def _reference_group(dataset: str, columns: Sequence[Column]) -> Group | None:
    refs = paper_reference(dataset)
    keys = {col.key for col in columns if col.kind == "metric"}
    if not any(keys & set(ref.metrics) for ref in refs):
        return None
    rows = [
        Row(
            ref.label,
            ref.ranker,
            ref.family,
            PAPER_SOURCE,
            {
                col.key: Cell(ref.metrics.get(col.key) if col.kind == "metric" else None)
                for col in columns
            },
            reference=ref,
            supervision="as published",
        )
        for ref in refs
    ]
    return Group(PAPER_SOURCE, "Paper (published)", rows)


# -- rendering -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Markup:
    """How one text format spells bold, the significance mark, escapes and an empty cell."""

    bold: Callable[[str], str]
    mark: str
    escape: Callable[[str], str] = str
    missing: str = "–"
    flag: str = FLAG
    spread: str = SPREAD
    plus_minus: str = "±"


def _number(value: float, col: Column) -> str:
    return f"{value:,.{col.digits}f}" if col.kind == "latency" else f"{value:.{col.digits}f}"


def _label(row: Row) -> str:
    if row.seeds:
        return f"{row.label} [n={len(row.seeds)}: seeds {', '.join(map(str, row.seeds))}]"
    return f"{row.label} (paper)" if row.source == PAPER_SOURCE else row.label


def _text_rows(table: ComparisonTable, m: _Markup) -> list[list[list[str]]]:
    """Per group, per row: [family (first row only), label, cell texts...] in ``m``'s markup."""
    out = []
    for group in table.groups:
        lines = []
        for i, row in enumerate(group.rows):
            texts = [
                m.escape(group.title) if i == 0 else "",
                m.escape(_label(row)) + (f" {m.flag}" if row.below_baselines else ""),
                m.escape(row.supervision),
            ]
            for col in table.columns:
                cell = row.cells[col.key]
                if cell.value is None:
                    texts.append(m.missing)
                    continue
                text = _number(cell.value, col)
                text = m.bold(text) if cell.best and row.source == HARNESS else text
                text += "" if cell.sd is None else f" {m.plus_minus} {cell.sd:.{col.digits}f}"
                text += m.spread if cell.within_spread else ""
                texts.append(text + (m.mark if cell.significant else ""))
            lines.append(texts)
        out.append(lines)
    return out


#: left-aligned text columns before the numbers: family, system, supervision
TEXT_COLUMNS = 3


def _header(table: ComparisonTable) -> list[str]:
    return ["Family", "System", "Supervision", *(col.title for col in table.columns)]


def render_rich(table: ComparisonTable) -> Table:
    from rich.markup import escape

    m = _Markup(bold=lambda s: f"[bold]{s}[/bold]", mark="†", escape=escape)
    caption = " ".join(table.notes(m.mark))
    return writer.rich(table.title, _header(table), _text_rows(table, m), TEXT_COLUMNS, caption)


def render_markdown(table: ComparisonTable) -> str:
    m = _Markup(bold=lambda s: f"**{s}**", mark="†", escape=lambda s: s.replace("|", "\\|"))
    rows = [t for group in _text_rows(table, m) for t in group]
    body = writer.markdown(_header(table), rows, TEXT_COLUMNS)
    return writer.titled(table.title, body, table.notes(m.mark))


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "–": "--",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def render_latex(table: ComparisonTable) -> str:
    m = _Markup(
        bold=lambda s: rf"\textbf{{{s}}}",
        mark=r"$^{\dagger}$",
        escape=latex_escape,
        missing="--",
        flag=r"$^{\ddagger}$",
        spread=r"$^{\approx}$",
        plus_minus=r"$\pm$",
    )
    header = _header(table)
    caption = " ".join(
        latex_escape(note)
        .replace("†", m.mark)
        .replace(FLAG, m.flag)
        .replace(SPREAD, m.spread)
        .replace("±", m.plus_minus)
        for note in table.notes("†", FLAG)
    )
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(table.title)}. {caption}}}",
        rf"\label{{tab:{table.dataset}-{table.split}}}",
        rf"\begin{{tabular}}{{{'l' * TEXT_COLUMNS}{'r' * (len(header) - TEXT_COLUMNS)}}}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in header) + r" \\",
    ]
    for group in _text_rows(table, m):
        lines.append(r"\midrule")
        lines += [" & ".join(texts) + r" \\" for texts in group]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def render_csv(table: ComparisonTable) -> str:
    """Plain values at full precision; ``significant`` lists the metrics marked with a dagger,
    ``below_dev_baselines`` the no-training rankers the row's model scored below on dev."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    grouped = any(row.seeds for row in table.rows)
    sds = [col for col in table.columns if col.kind == "metric"] if grouped else []
    writer.writerow(
        [
            "dataset",
            "split",
            "family",
            "label",
            "ranker",
            "source",
            "supervision",
            *(col.key for col in table.columns),
            "significant",
            "below_dev_baselines",
            *(f"{col.key}_sd" for col in sds),
            *(["seeds", "within_seed_spread"] if grouped else []),
        ]
    )
    for row in table.rows:
        cells = [row.cells[col.key] for col in table.columns]
        writer.writerow(
            [
                table.dataset,
                table.split,
                row.family,
                row.label,
                row.ranker,
                row.source,
                row.supervision,
                *("" if c.value is None else repr(c.value) for c in cells),
                ";".join(
                    col.key for col, c in zip(table.columns, cells, strict=True) if c.significant
                ),
                ";".join(row.below_baselines),
                *("" if row.cells[c.key].sd is None else repr(row.cells[c.key].sd) for c in sds),
                *(_seed_cells(table, row) if grouped else []),
            ]
        )
    return buf.getvalue()


def _seed_cells(table: ComparisonTable, row: Row) -> list[str]:
    """A CSV row's seeds and the metrics whose difference from the baseline is within the
    seed spread."""
    within = [col.key for col in table.columns if row.cells[col.key].within_spread]
    return [";".join(map(str, row.seeds)), ";".join(within)]


def render_json(table: ComparisonTable) -> str:
    """The harness rows only: ranker, dataset, split, label, metrics (the table's), latency, and
    the no-training rankers its trained model scored below on dev (``below_dev_baselines``)."""
    out = [
        {
            "ranker": row.record.ranker,
            "dataset": row.record.dataset,
            "split": row.record.split,
            "label": row.label,
            "supervision": row.supervision,
            "metrics": {
                c.key: row.cells[c.key].value
                for c in table.columns
                if c.kind == "metric" and row.cells[c.key].value is not None
            },
            "latency": {k: json_safe(v) for k, v in (row.record.latency or {}).items()},
            "below_dev_baselines": list(row.below_baselines),
            **(
                {
                    "seeds": list(row.seeds),
                    "sd": {k: v.sd for k, v in row.cells.items() if v.sd is not None},
                }
                if row.seeds
                else {}
            ),
        }
        for row in table.rows
        if row.record is not None
    ]
    return json.dumps(out, indent=2) + "\n"


_RENDERERS: dict[str, Callable[[ComparisonTable], str | Table]] = {
    "table": render_rich,
    "markdown": render_markdown,
    "csv": render_csv,
    "latex": render_latex,
    "json": render_json,
}


def render(table: ComparisonTable, fmt: str = "table") -> str | Table:
    """``table`` gives a rich Table (print it with a Console); the other formats give text."""
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown table format {fmt!r}; known: {', '.join(FORMATS)}") from None
    return renderer(table)
