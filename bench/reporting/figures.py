"""README result figures rendered from records, never typed: ``bench reference render|check``.

Hand-typed figures drift from the runs they describe (a json of older runs beside a newer table,
a "best batch size" the record contradicts). So every result table of the README sits between
two markers that name a renderer and the record files it reads::

    <!-- reference: main-job-semeval16b from results/reference/main-job-semeval16b.md -->
    | ranker | supervision | AP@10 | ...
    <!-- /reference -->

:func:`bench.reporting.reference_documents.render_document` rewrites the text between each pair from
its records and leaves every other byte alone;
:func:`~bench.reporting.reference_documents.check_document` renders in memory and reports, for the
first figure that differs, the table, its row and column, the README's value, the record's value and
the record files, which is what ``bench reference check`` prints before exiting 1 (``make test``
runs it; it loads no model, so it takes well under a second).

A new table is one function registered with :func:`renderer` plus one marker in the README. A
renderer receives a :class:`Records` holding exactly the files its marker names, reads them with
the typed loaders (:meth:`Records.comparison` for ``bench compare`` output, :meth:`Records.latency`
for ``bench latency`` records, :meth:`Records.expected` for expected-value files) and returns the
markdown. Reading a file the marker does not name is an error, so a marker always says truthfully
where its figures come from.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench.core.trained import TrainingSummary
from bench.core.writer import markdown
from bench.latency.records import LatencyRecord, LatencyRow
from bench.reporting.picks import Pick
from bench.reporting.tables import FLAG
from bench.results.groups import (
    GroupRecord,
    choose_by_mean,
    group_record,
    per_query_file,
    read_group,
)
from bench.results.labels import RowKey
from bench.results.records import PER_QUERY, ResultRecord, checked_per_query, files_problem
from bench.results.significance import PerQuery, compare, holm

if TYPE_CHECKING:
    from bench.reporting.checks import Expectation

log = logging.getLogger(__name__)
T = TypeVar("T")

END = "<!-- /reference -->"
_BLOCK = re.compile(
    r"^<!-- reference: (?P<name>[\w.-]+) from (?P<records>[^>]*?) -->\n"
    r"(?P<body>.*?)"
    r"^<!-- /reference -->$",
    re.S | re.M,
)
#: a marker is a line of its own, so the syntax can be quoted in prose (`<!-- reference: ... -->`)
_ANY_MARKER = re.compile(r"^<!-- /?reference\b.*$", re.M)
MISSING = "–"


class ReferenceError(ValueError):
    """A marker, renderer or record that cannot give a table; the message names which."""


# -- records ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ComparisonRow:
    """One row of a ``bench compare`` table as kept in results/reference (json or markdown)."""

    label: str
    supervision: str
    metrics: dict[str, float]
    latency: dict[str, float] = field(default_factory=dict)


def _cell_value(text: str) -> float | None:
    """A markdown cell of :func:`bench.reporting.tables.render_markdown` as a number: bold, the
    significance mark and thousands separators removed; the missing mark gives None."""
    text = text.replace("**", "").replace("†", "").replace(",", "").strip()
    return None if text in ("", MISSING, "--") else float(text)


def split_row(line: str) -> list[str]:
    """The cells of one markdown table line; ``\\|`` inside a cell stays a bar."""
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [c.strip().replace("\\|", "|") for c in cells]


def read_comparison(path: Path) -> dict[str, ComparisonRow]:
    """Rows by label from ``bench compare --format json`` or ``--format markdown`` output.

    Markdown keeps the four decimals it printed, which is all a README figure shows; a file with
    several tables (one per baseline) gives the rows of the first, since they differ only in
    their significance marks.
    """
    text = path.read_text(encoding="utf-8")
    rows = _comparison_json(text) if path.suffix == ".json" else _comparison_markdown(text)
    if not rows:
        raise ReferenceError(f"{path}: no bench compare rows")
    return rows


def _comparison_json(text: str) -> dict[str, ComparisonRow]:
    rows: dict[str, ComparisonRow] = {}
    for item in json.loads(text):
        latency = {k: float(v) for k, v in (item.get("latency") or {}).items() if _is_number(v)}
        row = ComparisonRow(item["label"], item.get("supervision", ""), item["metrics"], latency)
        rows.setdefault(row.label, row)
    return rows


def _comparison_markdown(text: str) -> dict[str, ComparisonRow]:
    from bench.reporting.tables import LATENCY_COLUMNS, TEXT_COLUMNS

    latency_keys = {col.title: col.key for col in LATENCY_COLUMNS}
    rows: dict[str, ComparisonRow] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            if header is not None and rows:
                break  # the first table is complete
            continue
        cells = split_row(line)
        if cells[:TEXT_COLUMNS] == ["Family", "System", "Supervision"]:
            header = cells
            continue
        if header is None or all(c and set(c) <= set(":-") for c in cells):
            continue  # before the table, or its alignment line
        metrics: dict[str, float] = {}
        latency: dict[str, float] = {}
        for title, cell in zip(header[TEXT_COLUMNS:], cells[TEXT_COLUMNS:], strict=True):
            value = _cell_value(cell)
            if value is None:
                continue
            if title in latency_keys:
                latency[latency_keys[title]] = value
            else:
                metrics[title] = value
        # a row whose trained model scored below a no-training baseline on dev ends in the flag
        label = cells[1].removesuffix(f" {FLAG}")
        rows.setdefault(label, ComparisonRow(label, cells[2], metrics, latency))
    return rows


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class SweepRecord:
    """A ``bench sweep`` table as the sweep wrote it above its dataset in a settings file."""

    command: str
    header: list[str]
    rows: list[dict[str, str]]
    chosen: dict[str, str]


def _read_run(path: Path) -> ResultRecord:
    return ResultRecord.from_json(json.loads(path.read_text(encoding="utf-8")), path)


def read_sweep(path: Path, dataset: str, varies: str = "", nth: int = 0) -> SweepRecord:
    """The first (``nth``: 0-based) sweep comment :func:`bench.experiments.sweep.write_chosen` left
    in ``path`` for ``dataset`` (whose command has ``--set VARIES=`` when given; the table of
    :func:`bench.experiments.sweep.table_lines`: columns two or more spaces apart)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    skip = nth
    for i, line in enumerate(lines):
        found = re.match(r"\s*# sweep \([^)]*\): (?P<command>.*)", line)
        if not found or f" -d {dataset} " not in found["command"] + " ":
            continue
        if varies and f"--set {varies}=" not in found["command"]:
            continue
        if skip:
            skip -= 1
            continue
        table: list[list[str]] = []
        chosen: dict[str, str] = {}
        for row in lines[i + 1 :]:
            text = re.sub(r"^\s*#\s{3}", "", row)
            if text == row or text.startswith("not written: "):
                break
            if text.startswith("chosen on dev: "):
                chosen = dict(
                    p.split("=", 1) for p in text.removeprefix("chosen on dev: ").split(", ")
                )
                break
            table.append(re.split(r"\s{2,}", text.strip()))
        header, body = table[0], table[1:]
        return SweepRecord(
            found["command"], header, [dict(zip(header, r, strict=True)) for r in body], chosen
        )
    raise ReferenceError(f"{path}: no sweep comment {nth + 1} for {dataset}")


@dataclass
class Records:
    """The record files one marker names, with typed loaders; a loader refuses any other file,
    so the marker stays a true list of the table's sources. Files are read once per table."""

    table: str
    paths: list[Path]
    root: Path
    _read: dict[tuple[str, str], object] = field(default_factory=dict, repr=False)

    def _path(self, name: str) -> Path:
        """The named record: its path as the marker gives it, or that path's tail (file name,
        ``latency/NAME.json``)."""
        for path in self.paths:
            posix = path.as_posix()
            if posix == name or posix.endswith("/" + name):
                return self.root / path
        named = ", ".join(p.as_posix() for p in self.paths)
        raise ReferenceError(
            f"table {self.table!r} reads {name}, which its marker does not name (it names {named})"
        )

    def _once(self, kind: str, name: str, read: Callable[[Path], T]) -> T:
        key = (kind, name)
        if key not in self._read:
            path = self._path(name)
            try:
                self._read[key] = read(path)
            except ReferenceError:
                raise
            except json.JSONDecodeError as exc:
                raise ReferenceError(
                    f"table {self.table!r}: record {path} is not valid JSON (line {exc.lineno} "
                    f"column {exc.colno}: {exc.msg}); restore it or write it again"
                ) from exc
            except UnicodeDecodeError as exc:
                raise ReferenceError(
                    f"table {self.table!r}: record {path} is not UTF-8 text"
                ) from exc
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                # valid JSON of another shape (a list where an object belongs, a missing field):
                # the readers below parse what the file holds, so the file is what is wrong
                raise ReferenceError(
                    f"table {self.table!r}: record {path} is not a {kind} record "
                    f"({type(exc).__name__}: {exc}); restore it or write it again"
                ) from exc
        return self._read[key]  # type: ignore[return-value]

    def comparison(self, name: str) -> dict[str, ComparisonRow]:
        """``bench compare`` rows (json or markdown) by label."""
        return self._once("comparison", name, read_comparison)

    def row(self, name: str, pick: Pick) -> ComparisonRow:
        """The one row of a comparison file that ``pick`` names (read from each row's label by
        :meth:`RowKey.parse`); none or several is an error naming the file and the rows of that
        ranker it holds."""
        rows = self.comparison(name)
        found = [row for label, row in rows.items() if pick.matches(RowKey.parse(label))]
        if len(found) != 1:
            same = [label for label in rows if RowKey.parse(label).ranker == pick.ranker]
            raise ReferenceError(
                f"table {self.table!r}: {len(found) or 'no'} rows of {pick} in {name} (its "
                f"{pick.ranker} rows: {'; '.join(same) or 'none'})"
            )
        return found[0]

    def sweep(self, name: str, dataset: str, varies: str = "", nth: int = 0) -> SweepRecord:
        """The ``bench sweep`` table a settings file keeps for ``dataset`` (the first, or
        ``nth``, that varies option ``varies``, when given)."""
        return read_sweep(self._path(name), dataset, varies, nth)

    def run(self, name: str) -> ResultRecord:
        """A `bench run` record (``record.json`` kept under ``results/reference/``): its metrics,
        configuration and training summary (dev scores, kept epoch). A record scored from a
        file of the user's (a run file) is refused once the file's bytes changed or it is gone:
        its figures are then those of a file that no longer exists, as `bench compare` says."""
        record = self._once("run", name, _read_run)
        if record.inputs and (changed := files_problem(Path(), record.inputs)):
            raise ReferenceError(
                f"table {self.table!r}: record {self._path(name)} was scored from a file that "
                f"changed since: {changed}; score it again (bench run) and keep the new record"
            )
        return record

    def per_query(self, name: str) -> dict[str, dict[str, float]] | None:
        """The per-query values of run record ``name`` (qid -> metric -> value), from the file
        kept beside it (:func:`~bench.results.groups.per_query_file`); None when the record keeps
        none or is one of :data:`PER_QUERY_NOT_KEPT`. A file that is missing although the record
        lists its SHA-256, or whose SHA-256 is another, is an error naming it: its values are not
        the run's, and a table rendered without it would drop its published p-values."""
        want = self.run(name).files.get(PER_QUERY)
        if any(self._path(name).as_posix().endswith("/" + kept) for kept in PER_QUERY_NOT_KEPT):
            return None
        return self._once("per-query", name, lambda path: _read_per_query(path, want))

    def group(self, name: str) -> GroupRecord:
        """A seed group record (``bench run --seeds``, ``bench group make``) kept with its
        members, each named in it by path (relative to it) and SHA-256: its row, each metric the
        mean over the seeds (``sd`` their sample standard deviation, ``per_query()`` the
        per-query mean). A member, or its per-query file, missing or changed is an error naming
        it."""
        group = self._once("group", name, lambda path: group_record(read_group(path)))
        _refuse_problems(group.member_problems)
        return group

    def latency(self, name: str) -> LatencyRecord:
        """A ``bench latency`` record."""
        return self._once("latency", name, _read_latency)

    def store_cost(self, name: str) -> list[dict[str, Any]]:
        """The rows of a ``python -m bench.latency.storecost`` record (index time and memory of the
        token store and the BM25 index, one row per store, size and traced or timed pass)."""
        return self._once("store-cost", name, _read_store_cost)

    def expected(self, name: str) -> list[Expectation]:
        """The entries of an expected-value file, as ``bench check`` reads them."""
        from bench.reporting.checks import load_expectations

        return self._once("expected", name, load_expectations)


def chosen_on_dev(dev: Sequence[GroupRecord], measure: str = "AP@10") -> int:
    """Which of ``dev`` (one seed group per candidate, on the dev split) a "chosen on dev" row
    shows: the best mean ``measure`` over the seeds (the first on ties), never one seed's; the
    row says "chosen by the mean dev AP@10 over n seeds"."""
    return choose_by_mean([group.metric_values(measure) for group in dev])


#: the published run records of which only the record was kept (results/reference/...): no file
#: on this machine has the SHA-256 they list for their per-query files, so their tables give no
#: p-value and say so; any other record's missing per-query file is an error naming it
PER_QUERY_NOT_KEPT = frozenset(
    f"reference/word-order/wikiqa-{name}.json"
    for name in (
        "concat-item",
        "hybrid-item",
        "hybrid2-row",
        "hybrid3-row",
        "hybrid4-row",
        "merge1-union",
        "fw-c3",
        "fw-q-c4",
    )
)


@dataclass(frozen=True)
class Paired:
    """One paired t-test a table shows: ``system`` minus ``baseline`` on one metric."""

    delta: float  # mean difference over the queries both have
    queries: int
    p: float
    p_holm: float  # Holm-adjusted over the comparisons the table makes together
    significant: bool  # p_holm < ALPHA


#: the level below which a Holm-adjusted p-value is marked significant (``bench compare``'s)
ALPHA = 0.05


def paired_tests(
    pairs: Sequence[tuple[PerQuery | None, PerQuery | None, str]],
) -> list[Paired | None]:
    """The paired t-test of each (baseline, system, metric), Holm-adjusted over those that can
    be made; None for a pair that lacks either per-query file. The family is the pairs given:
    a table passes the comparisons it makes together (several rows, or several metrics of one
    pair), so the marks hold for the table as a whole."""
    raw: list[tuple[int, float, int, float]] = []
    for i, (baseline, system, metric) in enumerate(pairs):
        if baseline is None or system is None:
            continue
        (result,) = compare(baseline, {"system": system}, metric, test="ttest")
        raw.append((i, result.delta, result.n_queries, result.p_value))
    adjusted = holm([p for *_, p in raw])
    out: list[Paired | None] = [None] * len(pairs)
    for (i, delta, n, p), p_holm in zip(raw, adjusted, strict=True):
        out[i] = Paired(delta, n, p, p_holm, p_holm < ALPHA)
    return out


def p_value(p: float | None, mark: bool = False) -> str:
    """A p-value as the tables print it (0.043, < 0.001), with ``bench compare``'s † when
    ``mark``; the missing mark for None."""
    if p is None:
        return MISSING
    text = "< 0.001" if p < 0.001 else f"{p:.3f}"
    return text + ("†" if mark else "")


def _read_per_query(record: Path, want: str | None) -> dict[str, dict[str, float]] | None:
    """The per-query file kept beside ``record``, read by
    :func:`bench.results.records.checked_per_query` against the SHA-256 the record lists; None
    when the record keeps none. A missing, edited or unreadable one is an error naming it: the
    published p-values come from that file, so no table is rendered without it."""
    read = checked_per_query(per_query_file(record), want, record)
    _refuse_problems([read.problem] if read.problem is not None else [])
    return None if want is None else read.values


def _refuse_problems(problems: Sequence[str]) -> None:
    """A ReferenceError naming each per-query file that is missing or edited, if any."""
    if problems:
        raise ReferenceError(
            f"{'; '.join(problems)}; the table's p-values are computed from it: restore it from "
            f"its run's {PER_QUERY}"
        )


def _read_latency(path: Path) -> LatencyRecord:
    return LatencyRecord.from_json(json.loads(path.read_text(encoding="utf-8")), path)


Renderer = Callable[[Records], str]
_RENDERERS: dict[str, Renderer] = {}


def _read_store_cost(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("kind") != "token-store-cost":
        raise ReferenceError(
            f"{path}: not a bench.latency.storecost record (kind token-store-cost)"
        )
    return list(data["rows"])


def renderer(name: str) -> Callable[[Renderer], Renderer]:
    """Register ``func`` as the renderer of the README tables whose marker names ``name``."""

    def register(func: Renderer) -> Renderer:
        if name in _RENDERERS:
            raise ValueError(f"renderer {name!r} registered twice")
        _RENDERERS[name] = func
        return func

    return register


def registered() -> dict[str, Renderer]:
    """The renderers registered so far, by name
    (:func:`bench.reporting.reference_documents.renderers` imports every table module first)."""
    return dict(_RENDERERS)


# -- markdown helpers shared by the renderers ------------------------------------------------------
def fixed(value: float | None, digits: int = 4) -> str:
    """A metric as the README prints it (0.7830); the missing mark for None."""
    return MISSING if value is None else f"{value:.{digits}f}"


def three_figures(value: float | None) -> str:
    """A time with three significant figures at most and thousands separators (0.72, 9.52,
    45.8, 708, 3,843): enough to read a ratio, no more than a noisy timing supports."""
    if value is None:
        return MISSING
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:,.{digits}f}"


def difference(row: ComparisonRow, base: ComparisonRow, metric: str = "AP@10") -> str:
    """``row`` minus ``base`` in points (hundredths), signed: -0.55."""
    return f"{100 * (row.metrics[metric] - base.metrics[metric]):+.2f}"


def kept_dev(record: ResultRecord) -> str:
    """A trained run's dev AP@10 of the kept epoch and the epoch (``0.7783 (6)``), from its
    training summary; the missing mark for a run without one."""
    training = TrainingSummary.from_json(record.training or {})
    kept = training.kept_dev_score()
    return f"{kept:.4f} ({training.best_epoch})" if kept is not None else MISSING


def times(value: float | None) -> str:
    return MISSING if value is None else f"{value:.2f}x"


def percent(value: float | None) -> str:
    return MISSING if value is None else f"{100 * value:.0f}%"


def best_row(record: LatencyRecord, n: int, column: str) -> LatencyRow:
    """The fastest configuration of ``column`` at ``n``, or the row at ``n`` whose label is
    ``column`` (a speed-up names its rows by label); missing is an error naming the record."""
    labelled = (r for r in record.rows if r.n == n and r.label == column)
    row = record.best(n, column) or next(labelled, None)
    if row is None:
        raise ReferenceError(f"{record.path}: no timed {column!r} row at N={n}")
    return row


# -- tables of picked rows ------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    """A figure column of a :class:`PickTable`: its title and what it shows of the comparison
    rows a table row picks: metric ``what`` (the title when empty) of the ``of``-th, the missing
    mark when it lacks it and ``missing_ok`` (else an error naming the record); ``supervision``
    and ``p50 ms`` of the first; ``difference``: AP@10 of the second minus the first's, in
    points."""

    title: str
    what: str = ""
    of: int = 0
    missing_ok: bool = True

    def cell(self, rows: Sequence[ComparisonRow]) -> str:
        row, what = rows[self.of], self.what or self.title
        if what == "supervision":
            return row.supervision
        if what == "difference":
            return difference(rows[1], rows[0])
        if what == "p50 ms":
            return MISSING if (p50 := row.latency.get("p50_ms")) is None else f"{p50:,.1f}"
        return fixed(row.metrics.get(what) if self.missing_ok else row.metrics[what])


@dataclass(frozen=True)
class PickRow:
    """A row of a :class:`PickTable`: its text cells, then the rows of kept comparisons it
    shows (:meth:`Records.row`), read from ``record`` (the table's when empty)."""

    shown: str | tuple[str, ...]
    picks: Pick | tuple[Pick, ...]
    record: str = ""


@dataclass(frozen=True)
class PickTable:
    """A table whose every row shows rows of kept comparisons picked by ranker and options, as
    data: the record, the text columns' titles, the figure columns and the rows."""

    record: str
    labels: tuple[str, ...]
    columns: tuple[Column, ...]
    rows: tuple[PickRow, ...]

    def render(self, records: Records) -> str:
        body = []
        for row in self.rows:
            picks = row.picks if isinstance(row.picks, tuple) else (row.picks,)
            found = [records.row(row.record or self.record, p) for p in picks]
            shown = row.shown if isinstance(row.shown, tuple) else (row.shown,)
            body.append([*shown, *(c.cell(found) for c in self.columns)])
        return markdown([*self.labels, *(c.title for c in self.columns)], body)


# -- documents -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """One marked table of a document: where its body is, its renderer and its records."""

    name: str
    records: list[Path]
    start: int  # offset of the body in the document
    end: int
    body: str
    line: int  # 1-based line of the begin marker


def find_blocks(text: str) -> list[Block]:
    """Every marked table, in order. A begin marker without its end (or the reverse) is an error
    naming the line, so a broken marker cannot silently leave a table unchecked."""
    blocks = []
    for match in _BLOCK.finditer(text):
        records = [Path(r.strip()) for r in match["records"].split(",") if r.strip()]
        line = text.count("\n", 0, match.start()) + 1
        inner = _ANY_MARKER.search(match["body"])
        if inner is not None:  # this table's end marker is missing: it ran into the next table
            later = text.count("\n", 0, match.start("body") + inner.start()) + 1
            raise ReferenceError(
                f"line {line}: table {match['name']!r} has no end marker "
                f"({END!r}) before the next marker on line {later}"
            )
        blocks.append(
            Block(
                match["name"], records, match.start("body"), match.end("body"), match["body"], line
            )
        )
    matched = {m.start() for m in _BLOCK.finditer(text)}
    ends = {text.index(END, m.start()) for m in _BLOCK.finditer(text)}
    for marker in _ANY_MARKER.finditer(text):
        if marker.start() not in matched and marker.start() not in ends:
            line = text.count("\n", 0, marker.start()) + 1
            raise ReferenceError(f"line {line}: unmatched or malformed marker {marker.group()!r}")
    return blocks


@contextlib.contextmanager
def in_document(path: Path) -> Iterator[None]:
    """Every :class:`ReferenceError` raised inside names ``path``: ``README.md line 12: table
    'x': no record ...``. The errors of markers, renderers and records give a line; which of the
    README and docs/*.md holds it is known only here, where a document is read."""
    try:
        yield
    except ReferenceError as exc:
        said = str(exc)
        if said.startswith(str(path)):
            raise
        raise ReferenceError(
            f"{path} {said}" if said.startswith("line ") else f"{path}: {said}"
        ) from exc


def read_document(path: Path) -> str:
    """The text of a marked document (a README), or a :class:`ReferenceError` naming it when it
    is missing or not UTF-8 text."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ReferenceError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line})"
        ) from exc
    except OSError as exc:
        raise ReferenceError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
