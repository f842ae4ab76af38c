"""Marked documents (README and docs/) rendered and checked against their records.

The table modules (:mod:`bench.reporting.figures_tables`, :mod:`bench.reporting.figures_order`,
:mod:`bench.reporting.figures_precision`, :mod:`bench.reporting.figures_scale`) register their
renderers with :func:`bench.reporting.figures.renderer`; this module imports them all, so it alone
knows every table, and none of them imports it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

import bench.reporting.figures_order
import bench.reporting.figures_precision
import bench.reporting.figures_rowlen
import bench.reporting.figures_scale
import bench.reporting.figures_seeds
import bench.reporting.figures_setencoder
import bench.reporting.figures_tables
import bench.reporting.figures_teachers
from bench.core.io import atomic_write_text, check_file_writable
from bench.reporting.figures import (
    Block,
    Records,
    ReferenceError,
    Renderer,
    find_blocks,
    in_document,
    read_document,
    registered,
    split_row,
)

log = logging.getLogger(__name__)

#: the modules that register tables (imported above for their registrations)
TABLE_MODULES = (
    bench.reporting.figures_tables,
    bench.reporting.figures_order,
    bench.reporting.figures_precision,
    bench.reporting.figures_rowlen,
    bench.reporting.figures_scale,
    bench.reporting.figures_seeds,
    bench.reporting.figures_setencoder,
    bench.reporting.figures_teachers,
)


def renderers() -> dict[str, Renderer]:
    """Every table's renderer by name."""
    return registered()


def render_block(block: Block, root: Path) -> str:
    """The body ``block``'s renderer gives from its records (which must exist). Every error
    starts with the marker's line (``line 12: table 'x': ...``); :func:`in_document` adds the
    document."""
    known = renderers()
    where = f"line {block.line}: table {block.name!r}"
    if block.name not in known:
        raise ReferenceError(
            f"line {block.line}: no renderer {block.name!r}; known: {', '.join(sorted(known))}"
        )
    for path in block.records:
        if not (root / path).is_file():
            raise ReferenceError(
                f"{where}: no record {path} (looked for {(root / path).resolve()})"
            )
    try:
        text = known[block.name](Records(block.name, block.records, root))
    except ReferenceError as exc:
        said = str(exc)
        raise ReferenceError(
            f"line {block.line}: {said}" if said.startswith("table ") else f"{where}: {said}"
        ) from exc
    except (AttributeError, KeyError, TypeError) as exc:
        # a renderer only reads its records: a record without the figure it shows is the cause
        named = ", ".join(p.as_posix() for p in block.records)
        raise ReferenceError(
            f"{where}: its records ({named}) do not hold what the table shows "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    return text if text.endswith("\n") else text + "\n"


def render_document(text: str, root: Path) -> str:
    """``text`` with every marked table re-rendered; nothing outside the markers changes."""
    out, last = [], 0
    for block in find_blocks(text):
        out += [text[last : block.start], render_block(block, root)]
        last = block.end
    return "".join(out) + text[last:]


@dataclass(frozen=True)
class Mismatch:
    """The first figure of a table that differs from what its records give."""

    table: str
    line: int  # 1-based line in the document
    row: str
    column: str
    document: str
    record: str
    records: list[Path]

    def message(self) -> str:
        where = ", ".join(p.as_posix() for p in self.records)
        return (
            f"line {self.line}: table {self.table!r}, row {self.row!r}, column {self.column!r}: "
            f"the document has {self.document!r}, the record gives {self.record!r} ({where})"
        )


def _first_difference(block: Block, rendered: str) -> Mismatch:
    """Where ``block``'s text first departs from ``rendered``: the cell, with its row label and
    column title, or the whole line when the table's shape differs."""
    have, want = block.body.splitlines(), rendered.splitlines()
    header: list[str] = []
    for i, (a, b) in enumerate(zip_longest(have, want, fillvalue="")):
        if b.startswith("|") and i + 1 < len(want) and want[i + 1].startswith("|---"):
            header = split_row(b)
        if a == b:
            continue
        line = block.line + 1 + i
        if a.startswith("|") and b.startswith("|"):
            cells = zip_longest(split_row(a), split_row(b), fillvalue="")
            for j, (x, y) in enumerate(cells):
                if x != y:
                    column = header[j] if j < len(header) else f"cell {j + 1}"
                    return Mismatch(block.name, line, split_row(b)[0], column, x, y, block.records)
        return Mismatch(block.name, line, "(line)", "(whole line)", a, b, block.records)
    raise AssertionError("no difference found")  # only called on differing bodies


def check_document(text: str, root: Path) -> list[Mismatch]:
    """The first differing figure of every marked table whose text is not what it renders to."""
    out = []
    for block in find_blocks(text):
        rendered = render_block(block, root)
        if rendered != block.body:
            out.append(_first_difference(block, rendered))
    return out


def render_file(path: Path, root: Path) -> list[str]:
    """Re-render the marked tables of ``path`` in place (atomically, keeping its mode); the names
    of the tables that changed. A read-only file is refused before anything is rendered."""
    with in_document(path):
        text = read_document(path)
        mode = check_file_writable(path, "make it writable to re-render its tables")
        mismatches = check_document(text, root)
    for mismatch in mismatches:
        log.info("re-rendering %s: %s", path, mismatch.message())
    changed = [m.table for m in mismatches]
    if changed:
        atomic_write_text(path, render_document(text, root), mode)
    return changed
