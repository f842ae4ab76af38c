"""How latency grows with the list size N: one line per ranker column, one figure.

`bench latency --n-items 10,30,100,300,700` times every ranker at each N on the same lists; this
draws the best row of each column at each N (``LatencyRow.best``: the fastest configuration,
e.g. monoBERT's best batch size) against N on log-log axes, so a ranker whose cost is linear in
N is a line of slope 1 and its height is its cost per item. ``bench plot --growth`` calls it.
When several records of the split hold the same column and N, the newest wins.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from bench.core.settings import results_root
from bench.core.writer import markdown
from bench.latency.records import LatencyRecord, load_latency_records
from bench.reporting.plot import pyplot, save_png

#: each ranker's variants share a colour; these line styles tell the variants apart
_STYLES = ("-", "--", ":", "-.")

Series = dict[str, dict[int, float]]


def growth_series(records: Sequence[LatencyRecord], stat: str = "p50_ms") -> Series:
    """column -> {N: ``stat`` of the column's best row at N}, newest record first."""
    series: Series = {}
    for record in sorted(records, key=lambda r: r.created, reverse=True):
        for row in record.rows:
            if row.best and stat in row.latency:
                series.setdefault(row.column, {}).setdefault(row.n, float(row.latency[stat]))
    return series


def slope(points: dict[int, float]) -> float | None:
    """Least-squares slope of log(value) on log(N): 1 is linear growth, 0 a flat cost."""
    pairs = [(math.log(n), math.log(v)) for n, v in points.items() if v > 0]
    if len(pairs) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx if sxx else None


def growth_table(series: Series, stat: str = "p50_ms") -> str:
    """Markdown: a row per column, a column per N, and the log-log slope."""
    ns = sorted({n for points in series.values() for n in points})
    rows = []
    for column in sorted(series):
        points = series[column]
        s = slope(points)
        cells = [f"{points[n]:,.2f}" if n in points else "-" for n in ns]
        rows.append([column, *cells, f"{s:.2f}" if s is not None else "-"])
    return markdown([f"ranker ({stat})", *(f"N={n}" for n in ns), "slope"], rows)


def plot_growth(series: Series, path: Path, *, title: str, stat: str = "p50_ms") -> Path:
    """Log-log lines of ``stat`` against N, one per column (a ranker's variants share a colour)."""
    if not any(series.values()):
        raise ValueError("nothing to plot: no latency record has a best row with " + stat)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 5.5))
    colours: dict[str, str] = {}
    used: dict[str, int] = {}
    try:
        for column in sorted(series):
            ranker = column.split(" (")[0]
            colour = colours.setdefault(ranker, f"C{len(colours) % 10}")
            style = _STYLES[used.get(ranker, 0) % len(_STYLES)]
            used[ranker] = used.get(ranker, 0) + 1
            ns = sorted(series[column])
            ax.plot(
                ns,
                [series[column][n] for n in ns],
                marker="o",
                markersize=4,
                color=colour,
                linestyle=style,
                label=column,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N: candidates per query (log scale)")
        ax.set_ylabel(f"{stat.replace('_ms', '')} latency per query (ms, log scale)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", fontsize=7, ncol=2)
        fig.tight_layout()
        save_png(fig, path)
    finally:
        plt.close(fig)
    return path


def plot_latency_growth(
    dataset: str,
    split: str | None = None,
    *,
    out: Path | None = None,
    results_dir: str | Path | None = None,
    stat: str = "p50_ms",
) -> tuple[Path, Series]:
    """`bench plot --growth`: the latency records of one split -> PNG of latency against N.
    Default output: ``results/plots/{dataset}-{split}-latency-growth.png``."""
    root = results_root(results_dir)
    records = load_latency_records(root, dataset, split)
    splits = sorted({r.split for r in records})
    if not records:
        raise ValueError(
            f"no latency-benchmark record for {dataset}"
            + (f"/{split}" if split else "")
            + f" under {root / 'latency'}; run `bench latency --n-items 10,30,100,300,700` first"
        )
    if len(splits) > 1:
        raise ValueError(f"latency records of {dataset} span splits {', '.join(splits)}; pick one")
    series = growth_series(records, stat)
    first = records[-1]
    path = out or root / "plots" / f"{dataset}-{splits[0]}-latency-growth.png"
    title = (
        f"{dataset} / {splits[0]}: {stat} per query against N\n({first.device}, "
        f"{first.threads} threads, {first.batch_queries} list(s) per call; best row per column)"
    )
    return plot_growth(series, path, title=title, stat=stat), series
