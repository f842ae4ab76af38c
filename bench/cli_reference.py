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
    from bench.reference_documents import render_file

    changed = render_file(readme, root or readme.resolve().parent)
    log.info("%s: %s", readme, f"re-rendered {', '.join(changed)}" if changed else "up to date")


@reference_app.command("check")
@friendly_errors
def reference_check(readme: ReadmePath = Path("README.md"), root: RootPath = None) -> None:
    """Exit 1 when a marked README table differs from what its records give, naming the table,
    row, column, both values and the record files. Loads no model."""
    from bench.published import find_blocks, read_document
    from bench.reference_documents import check_document

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


@reference_app.command("frontier")
@friendly_errors
def reference_frontier(
    out: Annotated[Path, typer.Option(help="PNG to write.")] = Path(
        "results/reference/plots/wikiqa-order-frontier.png"
    ),
    n: Annotated[int, typer.Option(help="List size whose speed-up is plotted (100 or 700).")] = 100,
    readme: ReadmePath = Path("README.md"),
    root: RootPath = None,
) -> None:
    """Plot test AP@10 against latency relative to monoBERT (1 / measured speed-up at N) for
    every CROSS-JEM row layout of the README's `crossjem-order-wikiqa` table, from the records
    its marker names, with the Pareto front marked."""
    from bench.plot import Point, plot_accuracy_latency
    from bench.published import Records, find_blocks, read_document
    from bench.published_order import order_frontier

    if n not in (100, 700):
        raise ValueError(f"--n must be 100 or 700 (the table's list sizes), not {n}")
    base = root or readme.resolve().parent
    block = next(
        (b for b in find_blocks(read_document(readme)) if b.name == "crossjem-order-wikiqa"), None
    )
    if block is None:
        raise ValueError(f"{readme}: no crossjem-order-wikiqa table (marker) to plot")
    points = [
        Point(p.shown, 1.0 if p.speedup is None else 1.0 / p.speedup[n][0], p.test)
        for p in order_frontier(Records(block.name, block.records, base))
        if p.speedup is None or n in p.speedup  # a layout not timed at N is left out
    ]
    path = plot_accuracy_latency(
        points,
        out,
        metric="test AP@10",
        title=f"wikiqa: CROSS-JEM row layouts against monoBERT (CPU, N={n})",
        xlabel=f"latency relative to monoBERT at N={n} (1 / measured speed-up, log scale)",
    )
    log.info("wrote %s", path)
