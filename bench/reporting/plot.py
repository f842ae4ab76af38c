"""Accuracy against latency: one point per ranker, the Pareto front marked, saved as a PNG.

Points come from result records (``record.metrics[metric]`` and ``record.latency['p50_ms']`` of
`bench run`), or take their latency from a latency-benchmark record at one list size N (every
ranker then timed on the same lists). matplotlib is optional (extra ``crossjem-bench[plot]``) and
imported only when a plot is drawn, with the Agg backend so no display is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.execution.selection import newest_per_row
from bench.results.groups import GroupRecord
from bench.results.records import ResultRecord

if TYPE_CHECKING:
    from bench.latency.records import LatencyRecord

log = logging.getLogger(__name__)

#: metrics tried, in order, when none is named
DEFAULT_METRICS = ("AP@10", "RR@10")
#: labels up to this long are written beside their point; longer ones are numbered
SHORT_LABEL = 28


@dataclass(frozen=True)
class Point:
    label: str
    latency_ms: float
    accuracy: float
    ranker: str = ""
    #: a matplotlib marker for a reference point drawn apart from the others, named in the
    #: legend by its label ("D": a diamond); "" for the plot's plain points
    marker: str = ""
    #: a seed group's point: the sample standard deviation of the accuracy over its seeds
    #: (drawn as an error bar); 0.0 for one run
    sd: float = 0.0


def dominates(a: Point, b: Point) -> bool:
    """``a`` is at least as fast and as accurate as ``b``, and strictly better in one."""
    return (
        a.latency_ms <= b.latency_ms
        and a.accuracy >= b.accuracy
        and (a.latency_ms < b.latency_ms or a.accuracy > b.accuracy)
    )


def pareto_front(points: Sequence[Point]) -> list[Point]:
    """The points no other point dominates, fastest first (ties: more accurate, then label).
    Identical points do not dominate each other, so both stay on the front."""
    front = [p for p in points if not any(dominates(q, p) for q in points)]
    return sorted(front, key=lambda p: (p.latency_ms, -p.accuracy, p.label))


def _benchmark_column(record: ResultRecord) -> str:
    """The latency-benchmark column a run record corresponds to (the ranker's own latency
    variants decide, e.g. a DPR run with precomputed items -> ``dpr (precomputed)``)."""
    from bench.latency.plan import column_for

    return column_for(record.ranker, record.config)


def choose_metric(records: Sequence[ResultRecord], metric: str | None = None) -> str:
    """``metric`` when some record has it, else the first of AP@10, RR@10 that one has."""
    have = {m for r in records for m in r.metrics}
    if metric is not None:
        if metric not in have:
            raise ValueError(f"metric {metric!r} is in no record; have {', '.join(sorted(have))}")
        return metric
    for m in DEFAULT_METRICS:
        if m in have:
            return m
    raise ValueError(f"no record has {' or '.join(DEFAULT_METRICS)}; name a metric")


def accuracy_latency_points(
    records: Sequence[ResultRecord],
    metric: str,
    benchmark: LatencyRecord | Sequence[LatencyRecord] | None = None,
    n: int | None = None,
) -> list[Point]:
    """One point per row label (newest record): ``metric`` against p50 ms per query.

    With ``benchmark`` (one latency-benchmark record, or several, newest first), the latency is
    the best configuration of the ranker's column at list size ``n`` (default: the largest N of
    the newest record) in the newest record that timed that column: each CROSS-JEM row layout
    has its own column, so every variant takes its own timing. Rankers no record timed are left
    out.
    """
    benchmarks: list[LatencyRecord] = []
    if benchmark is not None:
        benchmarks = list(benchmark) if isinstance(benchmark, Sequence) else [benchmark]
    if benchmarks and n is None:
        n = max(b.n for b in benchmarks[0].blocks)
    points = []
    for rec in newest_per_row(records):
        label = rec.label or rec.ranker
        if metric not in rec.metrics:
            log.info("%s has no %s: not plotted", label, metric)
            continue
        if benchmarks:
            assert n is not None
            column = _benchmark_column(rec)
            row = next((r for b in benchmarks if (r := b.best(n, column)) is not None), None)
            latency = None if row is None else row.latency.get("p50_ms")
        else:
            latency = (rec.latency or {}).get("p50_ms")
        if latency is None or latency <= 0:
            log.info("%s has no positive p50 latency: not plotted", label)
            continue
        sd = rec.sd.get(metric, 0.0) if isinstance(rec, GroupRecord) else 0.0
        if isinstance(rec, GroupRecord):
            label = f"{label} [n={len(rec.seeds)}]"
        points.append(
            Point(label, float(latency), float(rec.metrics[metric]), rec.ranker, sd=float(sd))
        )
    return points


def save_png(fig: Any, path: Path) -> None:
    """Write ``fig`` as the PNG every plot of the project is (150 dpi), creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=150)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed), or an ImportError saying how
    to install the optional extra."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'crossjem-bench[plot]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_accuracy_latency(
    points: Sequence[Point],
    path: Path,
    *,
    metric: str,
    title: str = "",
    xlabel: str = "p50 latency per query (ms, log scale)",
) -> Path:
    """Scatter on a log latency axis, every point labelled (or numbered, with a key, when labels
    are long), the Pareto front joined and ringed."""
    if not points:
        raise ValueError("nothing to plot: no record has both the metric and a p50 latency")
    plt = pyplot()

    front = pareto_front(points)
    # long row labels (options, fine-tuning) do not fit beside a point: number them instead
    # and list the numbers under the axes
    numbered = max(len(p.label) for p in points) > SHORT_LABEL
    key = [f"{i}: {p.label}" for i, p in enumerate(points, start=1)] if numbered else []
    fig, ax = plt.subplots(figsize=(8.0, 5.0 + 0.22 * len(key)))
    try:
        plain = [p for p in points if not p.marker]
        ax.scatter(
            [p.latency_ms for p in plain],
            [p.accuracy for p in plain],
            color="tab:blue",
            zorder=3,
            label="ranker",
        )
        spread = [p for p in plain if p.sd > 0]
        if spread:
            ax.errorbar(
                [p.latency_ms for p in spread],
                [p.accuracy for p in spread],
                yerr=[p.sd for p in spread],
                fmt="none",
                ecolor="tab:blue",
                capsize=3,
                zorder=3,
                label="± sd over the seeds (seed group, [n=...])",
            )
        for p in points:
            if p.marker:
                ax.scatter(
                    [p.latency_ms],
                    [p.accuracy],
                    marker=p.marker,
                    s=60,
                    color="black",
                    zorder=4,
                    label=p.label,
                )
        ax.plot(
            [p.latency_ms for p in front],
            [p.accuracy for p in front],
            color="tab:red",
            linestyle="--",
            marker="o",
            markersize=11,
            markerfacecolor="none",
            zorder=2,
            label="Pareto front (faster and more accurate)",
        )
        for i, p in enumerate(points, start=1):
            ax.annotate(
                str(i) if numbered else p.label,
                (p.latency_ms, p.accuracy),
                textcoords="offset points",
                xytext=(5, 4),
                fontsize=8,
            )
        ax.set_xscale("log")
        low = min(p.latency_ms for p in points)
        high = max(p.latency_ms for p in points)
        ax.set_xlim(low / 2.0, high * 3.0)  # room for the labels right of the points
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric)
        ax.set_title(title or f"{metric} against latency", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        if key:
            fig.text(0.01, 0.01, "\n".join(key), fontsize=7, va="bottom", ha="left")
            fig.tight_layout(rect=(0.0, 0.22 * len(key) / (5.0 + 0.22 * len(key)) + 0.02, 1.0, 1.0))
        else:
            fig.tight_layout()
        save_png(fig, path)
    finally:
        plt.close(fig)
    return path


def plot_dataset(
    dataset: str,
    split: str | None = None,
    *,
    metric: str | None = None,
    out: Path | None = None,
    results_dir: str | Path | None = None,
    benchmark_n: int | None = None,
    use_benchmark: bool = False,
    data_dir: str | Path | None = None,
    all_records: bool = False,
) -> tuple[Path, list[Point]]:
    """`bench plot`: the records of one dataset split -> PNG. Returns the file and its points.

    The records are those `bench run` would reuse now (:mod:`bench.execution.selection`; every
    record with ``all_records``); how many were left out is logged.

    ``split`` defaults to ``test`` when records span several splits. ``use_benchmark`` takes
    latencies from the latency-benchmark records of the split that have ``benchmark_n`` (default:
    the newest one's largest N), each column from the newest record that timed it (one
    `bench latency --set order=...` run per CROSS-JEM layout puts every variant on the plot).
    Default output: ``results/plots/{dataset}-{split}-{metric}.png``.
    """
    from bench.core.settings import results_root
    from bench.execution.selection import load_selected
    from bench.results.groups import collapse_groups, load_groups

    root = results_root(results_dir)
    selection = load_selected(root, data_dir, dataset=dataset, split=split, all_records=all_records)
    records = collapse_groups(selection.records, load_groups(root, dataset, split))
    if selection.summary():
        log.warning("%s/%s: %s", dataset, split or "*", selection.summary())
    splits = sorted({r.split for r in records})
    if not records:
        raise ValueError(
            f"no result records for {dataset}"
            + (f"/{split}" if split else "")
            + f" under {root / 'runs'}"
            + (
                f" of the data and code as they are now ({selection.summary()})"
                if selection.summary()
                else ""
            )
        )
    if len(splits) > 1:
        if "test" not in splits:
            raise ValueError(f"records of {dataset} span splits {', '.join(splits)}; pick one")
        records = [r for r in records if r.split == "test"]
    split = records[0].split
    metric = choose_metric(records, metric)
    benchmark: list[LatencyRecord] | None = None
    if use_benchmark:
        from bench.latency.records import load_latency_records

        found = load_latency_records(root, dataset, split)
        if not found:
            raise ValueError(
                f"no latency-benchmark record for {dataset}/{split} under "
                f"{root / 'latency'}; run `bench latency` first"
            )
        having = [
            r for r in found if benchmark_n is None or any(b.n == benchmark_n for b in r.blocks)
        ]
        if not having:
            raise ValueError(
                f"no latency-benchmark record of {dataset}/{split} has N={benchmark_n}"
            )
        benchmark = having[::-1]  # newest first: each column from the newest that timed it
    points = accuracy_latency_points(records, metric, benchmark, benchmark_n)
    safe = metric.replace("@", "at")
    path = out or root / "plots" / f"{dataset}-{split}-{safe}.png"
    source = "latency benchmark" if benchmark else "bench run"
    plot_accuracy_latency(
        points,
        path,
        metric=metric,
        title=f"{dataset} / {split}: {metric} against p50 latency ({source})",
    )
    return path, points
