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
from typing import TYPE_CHECKING

from bench.results import ResultRecord

if TYPE_CHECKING:
    from bench.latency_bench import LatencyRecord

log = logging.getLogger(__name__)

#: metrics tried, in order, when none is named
DEFAULT_METRICS = ("AP@10", "RR@10")


@dataclass(frozen=True)
class Point:
    label: str
    latency_ms: float
    accuracy: float
    ranker: str = ""


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


def _newest_per_label(records: Sequence[ResultRecord]) -> list[ResultRecord]:
    newest: dict[str, ResultRecord] = {}
    for rec in records:
        key = rec.label or rec.ranker
        if key not in newest or rec.created >= newest[key].created:
            newest[key] = rec
    return list(newest.values())


def _benchmark_column(record: ResultRecord) -> str:
    """The latency-benchmark column a run record corresponds to."""
    from bench.latency_bench import DUAL

    if record.ranker in DUAL:
        mode = "precomputed" if record.config.get("precompute") else "query time"
        return f"{record.ranker} ({mode})"
    return record.ranker


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
    benchmark: LatencyRecord | None = None,
    n: int | None = None,
) -> list[Point]:
    """One point per row label (newest record): ``metric`` against p50 ms per query.

    With ``benchmark``, the latency is the benchmark's best configuration of the ranker at list
    size ``n`` (default: the largest N), and rankers the benchmark did not time are left out.
    """
    if benchmark is not None and n is None:
        n = max(b.n for b in benchmark.blocks)
    points = []
    for rec in _newest_per_label(records):
        label = rec.label or rec.ranker
        if metric not in rec.metrics:
            log.info("%s has no %s: not plotted", label, metric)
            continue
        if benchmark is not None:
            assert n is not None
            row = benchmark.best(n, _benchmark_column(rec))
            latency = None if row is None else row.latency.get("p50_ms")
        else:
            latency = (rec.latency or {}).get("p50_ms")
        if latency is None or latency <= 0:
            log.info("%s has no positive p50 latency: not plotted", label)
            continue
        points.append(Point(label, float(latency), float(rec.metrics[metric]), rec.ranker))
    return points


def plot_accuracy_latency(
    points: Sequence[Point], path: Path, *, metric: str, title: str = ""
) -> Path:
    """Scatter on a log latency axis, every point labelled, the Pareto front joined and ringed."""
    if not points:
        raise ValueError("nothing to plot: no record has both the metric and a p50 latency")
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            "plots need matplotlib: pip install 'crossjem-bench[plot]'"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    front = pareto_front(points)
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    try:
        ax.scatter([p.latency_ms for p in points], [p.accuracy for p in points],
                   color="tab:blue", zorder=3, label="ranker")
        ax.plot([p.latency_ms for p in front], [p.accuracy for p in front], color="tab:red",
                linestyle="--", marker="o", markersize=11, markerfacecolor="none", zorder=2,
                label="Pareto front (faster and more accurate)")
        for p in points:
            ax.annotate(p.label, (p.latency_ms, p.accuracy), textcoords="offset points",
                        xytext=(5, 4), fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("p50 latency per query (ms, log scale)")
        ax.set_ylabel(metric)
        ax.set_title(title or f"{metric} against latency")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png", dpi=150)
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
) -> tuple[Path, list[Point]]:
    """`bench plot`: the records of one dataset split -> PNG. Returns the file and its points.

    ``split`` defaults to ``test`` when records span several splits. ``use_benchmark`` takes
    latencies from the newest latency-benchmark record of the split (at ``benchmark_n``).
    Default output: ``results/plots/{dataset}-{split}-{metric}.png``.
    """
    from bench.results import load_records
    from bench.settings import results_root

    root = results_root(results_dir)
    records = load_records(root, dataset=dataset, split=split)
    splits = sorted({r.split for r in records})
    if not records:
        raise ValueError(f"no result records for {dataset}" + (f"/{split}" if split else "")
                         + f" under {root / 'runs'}")
    if len(splits) > 1:
        if "test" not in splits:
            raise ValueError(f"records of {dataset} span splits {', '.join(splits)}; pick one")
        records = [r for r in records if r.split == "test"]
    split = records[0].split
    metric = choose_metric(records, metric)
    benchmark = None
    if use_benchmark:
        from bench.latency_bench import load_latency_records

        found = load_latency_records(root, dataset, split)
        if not found:
            raise ValueError(f"no latency-benchmark record for {dataset}/{split} under "
                             f"{root / 'latency'}; run `bench latency` first")
        benchmark = found[-1]
    points = accuracy_latency_points(records, metric, benchmark, benchmark_n)
    safe = metric.replace("@", "at")
    path = out or root / "plots" / f"{dataset}-{split}-{safe}.png"
    source = "latency benchmark" if benchmark else "bench run"
    plot_accuracy_latency(points, path, metric=metric,
                          title=f"{dataset} / {split}: {metric} against p50 latency ({source})")
    return path, points
