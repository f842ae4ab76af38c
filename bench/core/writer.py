"""The one table writer: every table the harness prints or renders (comparison, latency, README
figures, growth) is laid out here as markdown or as a rich table, so the formats of two tables
cannot drift apart. A caller gives the header and the rows as cell texts, already formatted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

Rows = Sequence[Sequence[str]]


def markdown(header: Sequence[str], rows: Rows, text_columns: int | None = None) -> str:
    """A markdown table, one line per row. ``text_columns`` None: the README's plain style (no
    alignment marks); a number: that many left-aligned text columns, then right-aligned figures.
    A bar in a header is escaped; cells come escaped by their caller."""
    aligns = ["---"] * len(header)
    if text_columns is not None:
        aligns = [":---"] * text_columns + ["---:"] * (len(header) - text_columns)
    lines = ["| " + " | ".join(h.replace("|", "\\|") for h in header) + " |"]
    lines.append("|" + "".join(f"{a}|" for a in aligns))
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def titled(title: str, table: str, notes: Sequence[str] = ()) -> str:
    """A table under its bold title, then its notes (each a line of its own in markdown)."""
    return f"**{title}**\n\n{table}\n" + "".join(f"{note}  \n" for note in notes)


def rich(
    title: str, header: Sequence[str], groups: Sequence[Rows], text_columns: int, caption: str = ""
) -> Table:
    """A rich table (print it with a Console): ``text_columns`` left-aligned columns, then
    right-aligned figures; a line between ``groups`` of rows. Cells may hold rich markup;
    ``title``, ``header`` and ``caption`` are shown as written."""
    from rich.markup import escape
    from rich.table import Table

    out = Table(title=escape(title), caption=escape(caption), caption_justify="left")
    for i, name in enumerate(header):
        out.add_column(escape(name), justify="left" if i < text_columns else "right")
    for rows in groups:
        for texts in rows:
            out.add_row(*texts)
        out.add_section()
    return out
