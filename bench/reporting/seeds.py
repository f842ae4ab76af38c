"""What `bench run --seeds`, `bench group make` and `bench group show` print for a seed group:
each member's metrics, the mean and sample standard deviation over the seeds, and how far the
seeds reproduce one another (:mod:`bench.results.reproduction`, when ``repro-eval`` is installed).
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from bench.results.groups import GroupRecord, SeedGroup, member_per_query, per_query_file
from bench.results.records import RECORD, RUN_FILE


def _measures(record: GroupRecord) -> list[str]:
    known = [m for m in record.run_config.get("measures", []) if m in record.metrics]
    return known + [m for m in record.metrics if m not in known]


def group_table(record: GroupRecord) -> Table:
    """One row per seed, then the mean ± sample standard deviation (n - 1) over the seeds."""
    names = _measures(record)
    table = Table(
        title=escape(
            f"{record.label} on {record.dataset}/{record.split}: {len(record.seeds)} seeds"
        ),
        caption="mean ± sample standard deviation (n - 1) over the seeds",
        caption_justify="left",
    )
    table.add_column("seed", justify="right")
    for m in names:
        table.add_column(m, justify="right")
    for seed, member in zip(record.seeds, record.members, strict=True):
        table.add_row(str(seed), *(f"{member.metrics[m]:.4f}" for m in names))
    table.add_section()
    table.add_row(
        f"n={len(record.seeds)}", *(f"{record.metrics[m]:.4f} ± {record.sd[m]:.4f}" for m in names)
    )
    return table


def run_file(record_path: Any) -> Any:
    """The run file of a member record file (``run.trec`` beside ``record.json``, else
    ``NAME.trec`` beside ``NAME.json``)."""
    if record_path.name == RECORD:
        return record_path.parent / RUN_FILE
    return record_path.with_suffix(".trec")


def agreement_table(group: SeedGroup, record: GroupRecord) -> RenderableType:
    """repro-eval's measures for every pair of seeds (a line saying why when they cannot be
    measured: repro-eval missing, run files not kept)."""
    from bench.results import reproduction

    members = []
    for member, rec in zip(group.members, record.members, strict=True):
        path = group.member_file(member)
        if not run_file(path).is_file() or not per_query_file(path).is_file():
            return (
                f"seed agreement not measured: {run_file(path)} or its per-query file is not kept"
            )
        read = member_per_query(path, rec)
        if read.problem is not None:
            return f"seed agreement not measured: {read.problem}"
        members.append((member.seed, run_file(path), read.values))
    try:
        pairs = reproduction.pairwise(members)
    except ImportError as exc:
        return f"seed agreement not measured: {exc}"
    names = list(pairs[0].rmse)
    table = Table(
        title="how far the seeds reproduce one another (repro-eval)",
        caption="KTU: Kendall's tau Union, RBO: rank-biased overlap (p 0.95), both averaged over "
        "the queries (1: the same order); RMSE: root mean square error of the per-query values "
        "(0: the same). Lower seed as the original.",
        caption_justify="left",
    )
    for title in ("seeds", "queries", "KTU", "RBO", *(f"RMSE {m}" for m in names)):
        table.add_column(title, justify="right")
    for p in pairs:
        table.add_row(
            f"{p.original} vs {p.rerun}",
            str(p.queries),
            f"{p.ktu:.4f}",
            f"{p.rbo:.4f}",
            *(f"{p.rmse[m]:.4f}" for m in names),
        )
    return table


def group_report(group: SeedGroup, record: GroupRecord) -> list[RenderableType]:
    """The group's metrics per seed with mean ± sd, the seeds' agreement, and where the group
    record is."""
    return [group_table(record), agreement_table(group, record), f"seed group: {group.path}"]
