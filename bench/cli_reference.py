"""`bench reference`: README result tables rendered from records, and checked against them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from bench.cli_options import err_console, friendly_errors, log

reference_app = typer.Typer(
    help=(
        "README result tables rendered from records. Each table sits between "
        "`<!-- reference: NAME from RECORD[, RECORD] -->` and `<!-- /reference -->`; NAME is a "
        "renderer in bench/published_tables.py, the records are files under results/ (paths "
        "from the repository root). `render` rewrites the tables from their records; `check` "
        "exits 1 naming the first figure that differs from its record (part of `make test`)."
    ),
    no_args_is_help=True,
)

ReadmePath = Annotated[Path, typer.Option("--readme", help="Markdown file with reference markers.")]
RootPath = Annotated[
    Path | None,
    typer.Option("--root", help="Where record paths start (default: the README's folder)."),
]


@reference_app.command("render")
@friendly_errors
def reference_render(readme: ReadmePath = Path("README.md"), root: RootPath = None) -> None:
    """Rewrite every marked table of the README from its records (atomically; only the text
    between markers changes). Run it after adding or replacing a record."""
    from bench.published import render_file

    changed = render_file(readme, root or readme.resolve().parent)
    log.info("%s: %s", readme, f"re-rendered {', '.join(changed)}" if changed else "up to date")


@reference_app.command("check")
@friendly_errors
def reference_check(readme: ReadmePath = Path("README.md"), root: RootPath = None) -> None:
    """Exit 1 when a marked README table differs from what its records give, naming the table,
    row, column, both values and the record files. Loads no model."""
    from bench.published import check_document, find_blocks, read_document

    text = read_document(readme)
    if not find_blocks(text):
        err_console.print(f"[bold red]FAIL[/] {escape(str(readme))}: no rendered tables (markers)")
        raise typer.Exit(1)
    mismatches = check_document(text, root or readme.resolve().parent)
    for mismatch in mismatches:
        err_console.print(f"[bold red]FAIL[/] {escape(mismatch.message())}", highlight=False)
    if mismatches:
        err_console.print(f"fix the record or run `bench reference render --readme {readme}`")
        raise typer.Exit(1)
    log.info("%s: %d rendered tables match their records", readme, len(find_blocks(text)))
