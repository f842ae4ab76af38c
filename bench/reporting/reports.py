"""What the CLI prints besides the comparison tables (:mod:`bench.reporting.tables`) and the latency
tables (:mod:`bench.reporting.latency_tables`): the dataset listing, the ranker options and one
run's record. Each function returns rich renderables; the CLI prints them."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from bench.core.io import error_text
from bench.data.stats import ITEM_LIMIT

log = logging.getLogger(__name__)


# -- datasets ------------------------------------------------------------------------------------
def wordpiece_tokenizer() -> Callable[[str], list[str]] | None:
    """MiniLM-L6's WordPiece ``tokenize``, or None (with a warning) when it cannot be loaded."""
    try:
        from transformers import AutoTokenizer
        from transformers.tokenization_utils_base import VERY_LARGE_INTEGER

        from rankers.io.models import resolve_model

        tok = AutoTokenizer.from_pretrained(resolve_model("minilm-l6").path)
    except Exception as exc:  # noqa: BLE001 - statistics fall back to words
        log.warning("WordPiece tokenizer unavailable (%s); counting words", exc)
        return None
    # texts are counted (and cut here) whole, never fed to a model: no limit, and so no warning
    # that a long one "will result in indexing errors"
    tok.model_max_length = VERY_LARGE_INTEGER
    return tok.tokenize


def datasets_table(
    data_dir: str | Path | None, tokenizer: Callable[[str], list[str]] | None
) -> Table:
    """Every dataset under the data root with split sizes, candidates per query and lengths
    (WordPiece tokens with ``tokenizer``, else words: the cut column and the caption say which).
    A dataset that cannot be read gets a row of '-' and a warning; one without a local copy, a
    row of '-' and a note in the log."""
    from bench.data.cards import get_card, list_datasets
    from bench.data.files import DatasetError
    from bench.data.splits import dataset_splits, existing_data_root, load_split
    from bench.data.stats import split_stats

    table = Table(title=f"Datasets under {existing_data_root(data_dir)}")
    for col in (
        "dataset",
        "layout",
        "split",
        "queries",
        "cand/query",
        "pos/query",
        "query len",
        "cand len",
        "tokens/list",
        "union/list",
        "m/N_u",
        "cut" if tokenizer else "cut (words)",
        "rows/list",
        "all relevant",
        "dropped",
    ):
        table.add_column(col, justify="left" if col in ("dataset", "layout", "split") else "right")
    names = list_datasets(data_dir)
    # names are what a reader looks for: never cut, the figures wrap instead
    table.columns[0].min_width = max((len(n) for n in names), default=0)
    unit = "WordPiece tokens" if tokenizer else "words"
    for name in names:
        # one broken or unreadable dataset is reported and listed, the others still are
        try:
            layout = get_card(name, data_dir).layout
            splits = dataset_splits(name, data_dir, local_only=True)
            loaded = [load_split(name, sp, data_dir) for sp in splits]
        except (DatasetError, OSError) as exc:
            layout, loaded = "?", []
            log.warning("%s: not available: %s", name, error_text(exc))
        else:
            if not loaded:
                log.info("%s: not available: no local copy", name)
        if not loaded:
            table.add_row(name, layout, "-", *["-"] * 12)
            continue
        for split in loaded:
            s = split_stats(split, tokenizer=tokenizer)
            key = "wordpiece" if tokenizer else "words"
            cand, cpq = s["candidate_length"][key], s["candidates_per_query"]
            table.add_row(
                name,
                split.layout,
                split.split,
                str(s["queries"]),
                f"{cpq['mean']:.1f} ({cpq['min']}-{cpq['max']})",
                f"{s['positives_per_query']['mean']:.2f}",
                f"{s['query_length'][key]['mean']:.1f}",
                f"{cand['mean']:.1f} (p95 {cand['p95']:.0f})",
                f"{s['list_tokens'][key]['mean']:.1f}",
                f"{s['union_length'][key]['mean']:.1f} (max {s['union_length'][key]['max']:.0f})",
                f"{s['compression'][key]:.2f}",
                _cut_cell(s["item_cut"][key], "tokens" if tokenizer else "words"),
                _rows_cell(split, tokenizer),
                f"{s['all_relevant']['queries']} ({s['all_relevant']['treatment']})",
                ", ".join(f"{k}: {v}" for k, v in split.dropped.items() if v) or "0",
            )
    table.caption = (
        f"lengths: mean {unit}; tokens/list: a query's candidates' lengths summed (m); "
        f"union/list: their distinct {unit} (N_u, CROSS-JEM's input); m/N_u: the paper's "
        f"compression C (motivation table (b)), from the means; {_cut_legend(tokenizer)}; "
        "all relevant: queries whose every candidate is relevant (every ranker scores 1.0 on "
        "them), kept or dropped as the card's drop_all_relevant says; unavailable datasets are "
        "listed with '-' (the log says why: a warning for broken files, a note for no local copy)"
    )
    return table


def _cut_legend(tokenizer: Callable[[str], list[str]] | None) -> str:
    """What the cut and rows/list columns count: the encoders' limits are in WordPiece tokens,
    so without a tokenizer the cut is counted in words and says so, and rows are not counted."""
    if tokenizer is None:
        return (
            f"cut (words): distinct candidates longer than {ITEM_LIMIT} words and the share of "
            f"their words a cut at {ITEM_LIMIT} words drops (the encoders cut at max_item_len = "
            f"{ITEM_LIMIT} WordPiece tokens, and a word is one or more tokens, so this counts "
            "fewer cut items than they cut: leave out --no-wordpiece to count tokens); "
            "rows/list: '-' (it needs WordPiece tokens)"
        )
    return (
        f"cut: distinct candidates longer than the encoders' max_item_len ({ITEM_LIMIT} "
        "WordPiece tokens), and the share of their tokens the cut drops; rows/list: CROSS-JEM's "
        "mean encoder rows per list and lists split over several rows (their items do not see "
        "each other) in the union, concat and hybrid layouts at the dataset's union_len"
    )


def _cut_cell(cut: dict[str, Any], unit: str = "tokens") -> str:
    """``251 of 1119 (22%), 5.5% of tokens``: ``unit`` is what the lengths were counted in."""
    if not cut["cut"]:
        return "0"
    return (
        f"{cut['cut']} of {cut['of']} ({cut['cut'] / cut['of']:.0%}), "
        f"{cut['tokens_lost_share']:.1%} of {unit}"
    )


def _rows_cell(split: Any, tokenizer: Callable[[str], list[str]] | None) -> str:
    """What the registered ranker that packs lists into encoder rows says of ``split`` (its
    ``rows_per_list``: CROSS-JEM's rows per list in each layout, with its settings for the
    dataset); '-' without a tokenizer or such a ranker."""
    if tokenizer is None or not split.lists:
        return "-"
    from bench.execution.ranker_settings import ranker_options
    from rankers import RankerError, available, get_ranker_class

    for name in available():
        try:
            rows = getattr(get_ranker_class(name), "rows_per_list", None)
        except RankerError:  # an extra not installed: that ranker cannot say
            continue
        if rows is not None:
            return str(rows(split, tokenizer, ranker_options(name, split.dataset, {})))
    return "-"


def list_tokens_table(
    dataset: str,
    splits: Sequence[str],
    data_dir: str | Path | None,
    tokenizer: Callable[[str], list[str]] | None,
) -> Table:
    """The paper's motivation table (b) for ``splits`` of ``dataset``: mean item tokens in a
    list (m), mean union size (N_u) and m / N_u, the figures beside the item-order ablation
    (items that repeat one another lose little to a union, and their order is what it drops).
    The same figures as ``bench datasets``, from :func:`bench.data.split_stats`."""
    from bench.data.splits import load_split
    from bench.data.stats import split_stats

    unit = "wordpiece" if tokenizer else "words"
    table = Table(title=f"{dataset}: item tokens per list ({'WordPiece' if tokenizer else unit})")
    for col in ("split", "lists", "items/list", "item tokens/list (m)", "union (N_u)", "m/N_u"):
        table.add_column(col, justify="left" if col == "split" else "right")
    for name in splits:
        s = split_stats(load_split(dataset, name, data_dir), tokenizer=tokenizer)
        table.add_row(
            name,
            str(s["queries"]),
            f"{s['candidates_per_query']['mean']:.1f}",
            f"{s['list_tokens'][unit]['mean']:.1f}",
            f"{s['union_length'][unit]['mean']:.1f}",
            f"{s['compression'][unit]:.2f}",
        )
    table.caption = (
        "means over all the split's lists (whatever --subset); items counted whole (not "
        "truncated); m/N_u from the means"
    )
    return table


# -- rankers -------------------------------------------------------------------------------------
def ranker_options_report() -> list[RenderableType]:
    """Per registered ranker, a table of its options (default, role, valid range, help); then
    what the roles mean. A ranker that cannot be imported gets one line saying why."""
    from rankers import FAMILIES, RankerError, available, get_ranker_class

    out: list[RenderableType] = []
    for name in available():
        try:
            cls = get_ranker_class(name)
        except RankerError as exc:
            out.append(f"[bold]{name}[/bold]: unavailable: {escape(str(exc))}")
            continue
        title = f"{name} ({FAMILIES.get(cls.family, cls.family)}"
        title += ", trainable)" if cls.trainable else ")"
        options = cls.Config.describe_options()
        if not options:
            out.append(f"[bold]{escape(title)}[/bold]: no options")
            continue
        table = Table(title=escape(title), title_justify="left", title_style="bold")
        table.add_column("option", no_wrap=True)
        table.add_column("default", max_width=24, overflow="fold")
        table.add_column("role", no_wrap=True)
        table.add_column("range")
        table.add_column("help")
        for opt in options:
            default = "-" if opt.default is dataclasses.MISSING else repr(opt.default)
            role = opt.role.label() if opt.role is not None else ""
            table.add_row(*(escape(v) for v in (opt.name, default, role, opt.range, opt.help)))
        out.append(table)
    out.append(
        "roles: training = part of the trained-model key (changing it trains anew); "
        "score = defines what a score means (a loaded checkpoint's value wins); "
        "runtime = speed, precision or where the weights come from (the caller's value wins)"
    )
    return out


# -- one run -------------------------------------------------------------------------------------
def record_report(record: Any) -> list[RenderableType]:
    """One `bench run` result: its metrics, p50 latency and throughput, dropped queries (if
    any) and where the record is."""
    table = Table(
        title=f"{record.label} on {record.dataset}/{record.split} "
        f"({record.data['queries']} queries)"
    )
    # the run's measure order; a record read back from disk has its keys sorted
    known = [m for m in record.run_config.get("measures", []) if m in record.metrics]
    names = known + [m for m in record.metrics if m not in known]
    for m in names:
        table.add_column(m, justify="right")
    table.add_column("p50 ms/q", justify="right")
    table.add_column("cand/s", justify="right")
    table.add_row(
        *(f"{record.metrics[m]:.4f}" for m in names),
        f"{record.latency['p50_ms']:.2f}",
        f"{record.latency['candidates_per_s']:.0f}",
    )
    out: list[RenderableType] = [table]
    if record.data.get("dropped"):
        out.append(f"dropped queries: {record.data['dropped']}")
    every = record.data.get("all_relevant") or {}
    if every.get("queries"):
        out.append(
            f"queries whose every candidate is relevant: {every['queries']}, {every['convention']}"
        )
    from bench.execution.scoring import input_notes

    out.extend(input_notes((record.provenance or {}).get("inputs") or {}))
    out.append(f"record: {record.path}")
    return out


#: how each status of a planned job is shown
PLAN_STYLES = {"cached": "green", "to compute": "bold yellow", "not needed": "dim"}


def plan_table(plan: Any) -> Table:
    """A :class:`bench.execution.plan.Plan` as `--plan` prints it: one row per job (kind, what, key,
    cached / to compute / not needed, and why it is computed), in the order it would run."""
    rows = plan.rows()
    counts = {s: sum(r["status"] == s for r in rows) for s in PLAN_STYLES}
    caption = ", ".join(f"{n} {s}" for s, n in counts.items() if n) + "; nothing was run"
    caption += "".join(f"\n{note}" for note in plan.notes)
    caption += "".join(f"\nwould stop before the first job: {p}" for p in plan.folder_problems())
    table = Table(title="plan", caption=caption, show_lines=False)
    for column in ("job", "what", "key", "status", "why"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = PLAN_STYLES.get(row["status"], "")
        table.add_row(
            row["job"],
            escape(row["what"]),
            row["key"],
            f"[{style}]{row['status']}[/]",
            escape(row["why"]),
        )
    return table
