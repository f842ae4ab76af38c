"""`bench reference`: README result tables rendered from records, and checked against them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from bench.cli.options import err_console, friendly_errors, log

reference_app = typer.Typer(
    help=(
        "Result tables of the README and docs/ rendered from records. Each table sits between "
        "`<!-- reference: NAME from RECORD[, RECORD] -->` and `<!-- /reference -->`; NAME is a "
        "renderer registered in one of the bench/reporting/figures_*.py modules (tables, order, "
        "precision, scale, seeds, setencoder, teachers), the records are files under results/ "
        "(paths from the repository root). `render` rewrites the tables from their records; "
        "`check` exits 1 naming the first figure that differs from its record (part of "
        "`make test`)."
    ),
    no_args_is_help=True,
)

ReadmePath = Annotated[Path, typer.Option("--readme", help="Markdown file with reference markers.")]
DocumentPaths = Annotated[
    list[Path] | None,
    typer.Option(
        "--readme",
        help="Markdown file with reference markers (repeat for several; default: README.md and "
        "every docs/*.md).",
    ),
]
RootPath = Annotated[
    Path | None,
    typer.Option(
        "--root",
        help="Where record paths start (default: the first folder upwards from each document "
        "that holds a results/ folder, else the document's folder).",
    ),
]


def documents(named: list[Path] | None) -> list[Path]:
    """The documents named, else README.md and docs/*.md of the current folder."""
    if named:
        return named
    return [Path("README.md"), *sorted(Path("docs").glob("*.md"))]


def records_root(document: Path, root: Path | None) -> Path:
    """Where the record paths of ``document``'s markers start."""
    if root is not None:
        return root
    folder = document.resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / "results").is_dir():
            return candidate
    return folder


@reference_app.command("render")
@friendly_errors
def reference_render(readme: DocumentPaths = None, root: RootPath = None) -> None:
    """Rewrite every marked table of the README and docs/ from its records (atomically; only
    the text between markers changes). Run it after adding or replacing a record."""
    from bench.reporting.reference_documents import render_file

    for document in documents(readme):
        changed = render_file(document, records_root(document, root))
        log.info(
            "%s: %s", document, f"re-rendered {', '.join(changed)}" if changed else "up to date"
        )


@reference_app.command("check")
@friendly_errors
def reference_check(readme: DocumentPaths = None, root: RootPath = None) -> None:
    """Exit 1 when a marked table of the README or docs/ differs from what its records give,
    naming the document, table, row, column, both values and the record files. Loads no
    model."""
    from bench.reporting.figures import find_blocks, in_document, read_document
    from bench.reporting.reference_documents import check_document

    failed, tables = False, 0
    for document in documents(readme):
        with in_document(document):
            text = read_document(document)
            blocks = find_blocks(text)
            mismatches = check_document(text, records_root(document, root))
        if not blocks and readme:  # a document named on the command line must have tables
            err_console.print(
                f"[bold red]FAIL[/] {escape(str(document))}: no rendered tables (markers)"
            )
            failed = True
            continue
        for mismatch in mismatches:
            err_console.print(
                f"[bold red]FAIL[/] {escape(str(document))} {escape(mismatch.message())}",
                highlight=False,
            )
        if mismatches:
            err_console.print(f"fix the record or run `bench reference render --readme {document}`")
            failed = True
        elif blocks:
            log.info("%s: %d rendered tables match their records", document, len(blocks))
        tables += len(blocks)
    if not tables and not failed:
        err_console.print("[bold red]FAIL[/] no rendered tables (markers) in README.md or docs/")
        failed = True
    if failed:
        raise typer.Exit(1)


@reference_app.command("frontier")
@friendly_errors
def reference_frontier(
    out: Annotated[Path, typer.Option(help="PNG to write.")] = Path(
        "results/reference/plots/wikiqa-order-frontier.png"
    ),
    n: Annotated[int, typer.Option(help="List size whose speed-up is plotted (100 or 700).")] = 100,
    readme: ReadmePath = Path("docs/results.md"),
    root: RootPath = None,
) -> None:
    """Plot test AP@10 against latency relative to monoBERT (1 / measured speed-up at N) for
    every CROSS-JEM row layout of the `crossjem-order-wikiqa` table (docs/results.md), from the
    records its marker names, with the Pareto front marked; monoBERT and the Set-Encoder (its
    test AP@10 from the `set-encoder-accuracy` table's records, its time from the
    `set-encoder-latency` table's, when that run timed N) as reference points of their own
    markers."""
    from bench.reporting.figures import Records, find_blocks, in_document, read_document
    from bench.reporting.figures_order import order_frontier
    from bench.reporting.figures_setencoder import DATASETS, set_encoder_relative
    from bench.reporting.plot import Point, plot_accuracy_latency

    if n not in (100, 700):
        raise ValueError(f"--n must be 100 or 700 (the table's list sizes), not {n}")
    base = records_root(readme, root)
    with in_document(readme):
        blocks = {b.name: b for b in find_blocks(read_document(readme))}
        for name in ("crossjem-order-wikiqa", "set-encoder-accuracy", "set-encoder-latency"):
            if name not in blocks:
                raise ValueError(f"{readme}: no {name} table (marker) to plot")
        tables = {name: Records(name, b.records, base) for name, b in blocks.items()}
        frontier = order_frontier(tables["crossjem-order-wikiqa"])
        setenc_test = tables["set-encoder-accuracy"].run(DATASETS[0].run).metrics["AP@10"]
        setenc_time = set_encoder_relative(tables["set-encoder-latency"], n)
    points = [
        Point(p.shown, 1.0 / p.speedup[n][0], p.test)
        if p.speedup is not None
        else Point(p.shown, 1.0, p.test, marker="s")
        for p in frontier
        if p.speedup is None or n in p.speedup  # a layout not timed at N is left out
    ]
    if setenc_time is None:
        log.info("the Set-Encoder was not timed at N=%d: not plotted", n)
    else:
        shown = "set-encoder (teacher monoBERT + ColBERT, ListNet)"
        points.append(Point(shown, setenc_time, float(setenc_test), marker="D"))
    path = plot_accuracy_latency(
        points,
        out,
        metric="test AP@10",
        title=f"wikiqa: CROSS-JEM row layouts against monoBERT and the Set-Encoder (CPU, N={n})",
        xlabel=f"latency relative to monoBERT at N={n} (1 / measured speed-up, log scale)",
    )
    log.info("wrote %s", path)
