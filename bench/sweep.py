"""A small grid search: every combination of the given option values is trained (or its cached
model reused), scored on the dev split and on test; the best dev score picks the settings, which
can be written into the ranker's settings file with the whole sweep as a comment.

Choosing on dev and only reporting test keeps the test split out of every decision; the sweep's
rows are kept as a JSON record (``results/sweeps/``) beside the runs' own records.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.context import RunContext
from bench.data import dataset_splits, dev_split_name
from bench.metrics import DEFAULT_MEASURES
from bench.results import ResultRecord, atomic_write_json, atomic_write_text, config_hash
from bench.runner import RunOptions, check_teacher, ranker_options, run, settings_file
from rankers import RankerError, canonical_name, get_ranker_class

log = logging.getLogger(__name__)

#: the dev measure that chooses (the one training selects epochs by)
DEFAULT_MEASURE = "AP@10"


@dataclasses.dataclass(frozen=True)
class SweepRow:
    """One combination: its settings, dev and test scores, and where its records are."""

    settings: dict[str, str]
    dev: float
    test: dict[str, float]
    best_epoch: int | None
    train_seconds: float | None
    dev_record: str
    test_record: str


@dataclasses.dataclass
class Sweep:
    """A finished sweep; ``chosen`` indexes the row with the best dev score (first on ties)."""

    ranker: str
    dataset: str
    measure: str
    dev_split: str
    test_split: str
    command: str
    rows: list[SweepRow]
    created: str = ""

    @property
    def chosen(self) -> int:
        return max(range(len(self.rows)), key=lambda i: (self.rows[i].dev, -i))

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "chosen": self.chosen}


def parse_grid(sets: Mapping[str, str]) -> dict[str, list[str]]:
    """``{"lr": "3e-5,1e-4"}`` -> ``{"lr": ["3e-5", "1e-4"]}``; an empty value, or one given
    twice for the same key (the same combination trained and listed twice), is an error."""
    grid: dict[str, list[str]] = {}
    for key, text in sets.items():
        values = [v.strip() for v in str(text).split(",")]
        if not key or any(not v for v in values):
            raise ValueError(f"--set {key}={text}: expected key=value[,value...]")
        repeated = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if repeated is not None:
            raise ValueError(f"--set {key}={text}: value {repeated} is given twice")
        grid[key] = values
    return grid


def combinations(grid: Mapping[str, Sequence[str]]) -> list[dict[str, str]]:
    """Every combination, the last key varying fastest (the order the table shows)."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]


def _check(ranker: str, dataset: str, combos: Sequence[Mapping[str, str]]) -> None:
    """Build every combination's config and check its teacher first, so a bad value stops
    before any training."""
    cls = get_ranker_class(ranker)
    for combo in combos:
        try:
            config = cls.Config.from_options(ranker_options(ranker, dataset, combo))
            if teacher := getattr(config, "teacher", None):
                check_teacher(ranker, str(teacher), dataset)
        except (RankerError, ValueError, TypeError) as exc:
            settings = ", ".join(f"{k}={v}" for k, v in combo.items())
            raise RankerError(f"sweep setting {settings}: {exc}") from None


def _dev_score(record: ResultRecord, measure: str) -> float:
    if measure not in record.metrics:
        raise RankerError(f"measure {measure} is not in the dev record {record.path}")
    return float(record.metrics[measure])


def run_sweep(
    base: RunOptions,
    grid: Mapping[str, Sequence[str]],
    measure: str = DEFAULT_MEASURE,
    command: str = "",
    on_row: Callable[[int, int, SweepRow], None] | None = None,
    ctx: RunContext | None = None,
) -> Sweep:
    """Train and score every combination of ``grid`` on top of ``base.options``, all in ``ctx``
    (default: ``base``'s context)."""
    if measure not in DEFAULT_MEASURES:
        raise ValueError(f"--measure {measure!r}: expected one of {', '.join(DEFAULT_MEASURES)}")
    ranker = canonical_name(base.ranker)
    ctx = ctx or base.context()
    splits = dataset_splits(base.dataset, ctx.data_root)
    dev_name = dev_split_name(splits)
    if dev_name is None:
        raise RankerError(
            f"dataset {base.dataset!r} has no dev split (has {', '.join(splits)}): a sweep "
            "chooses on dev, never on test"
        )
    combos = combinations(grid)
    if not combos:
        raise ValueError("nothing to sweep: give at least one --set key=value[,value...]")
    _check(ranker, base.dataset, [{**base.options, **c} for c in combos])
    rows: list[SweepRow] = []
    test_split = base.split
    for i, combo in enumerate(combos, 1):
        settings = ", ".join(f"{k}={v}" for k, v in combo.items())
        log.info("sweep %d/%d: %s", i, len(combos), settings)
        opts = dataclasses.replace(base, ranker=ranker, options={**base.options, **combo})
        test = run(opts, ctx)  # trains first when needed, then ranks test
        dev = run(dataclasses.replace(opts, split=dev_name, subset=None), ctx)
        test_split = test.split
        training = test.training or {}
        row = SweepRow(
            settings=dict(combo),
            dev=_dev_score(dev, measure),
            test=dict(test.metrics),
            best_epoch=training.get("best_epoch"),
            train_seconds=training.get("seconds"),
            dev_record=str(dev.path),
            test_record=str(test.path),
        )
        rows.append(row)
        if on_row is not None:
            on_row(i, len(combos), row)
    created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return Sweep(
        ranker, base.dataset, measure, dev_name, test_split or "test", command, rows, created
    )


def save_sweep(sweep: Sweep, root: Path) -> Path:
    """Write the sweep's rows to ``root/sweeps/DATASET/RANKER-HASH.json``; returns the path."""
    digest = config_hash({"command": sweep.command, "rows": [r.settings for r in sweep.rows]})
    path = root / "sweeps" / sweep.dataset / f"{sweep.ranker}-{digest}.json"
    atomic_write_json(path, sweep.to_json())
    return path


def table_lines(sweep: Sweep) -> list[str]:
    """The sweep as aligned text lines (dev and test scores, kept epoch, training time)."""
    keys = list(sweep.rows[0].settings)
    header = [*keys, f"dev {sweep.measure}", f"test {sweep.measure}", "epoch", "train s"]
    body = [
        [
            *(row.settings[k] for k in keys),
            f"{row.dev:.4f}",
            f"{row.test.get(sweep.measure, float('nan')):.4f}",
            "-" if row.best_epoch is None else str(row.best_epoch),
            "-" if row.train_seconds is None else f"{row.train_seconds:.0f}",
        ]
        for row in sweep.rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=True)]
    lines = [
        "  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *body]
    ]
    chosen = sweep.rows[sweep.chosen].settings
    lines.append("chosen on dev: " + ", ".join(f"{k}={v}" for k, v in chosen.items()))
    return lines


def _typed(ranker: str, settings: Mapping[str, str]) -> dict[str, Any]:
    """CLI strings as the config's typed values (1e-4 a float, 6 an int, true a bool)."""
    config = get_ranker_class(ranker).Config.from_options(dict(settings)).to_dict()
    return {k: config[k] for k in settings}


_DATASET_LINE = "  {name}:"


def write_chosen(sweep: Sweep, path: Path | None = None) -> dict[str, Any]:
    """Merge the chosen settings into ``datasets.<dataset>`` of the settings file at ``path``,
    with the sweep table as a comment above that line (a previous sweep comment for the dataset
    is replaced). The file's other lines and comments stay as they are. Returns the dataset's
    new settings. ``path`` defaults to the ranker's settings file."""
    path = path or settings_file(sweep.ranker)
    text = path.read_text(encoding="utf-8") if path.exists() else "default: {}\ndatasets: {}\n"
    data = yaml.safe_load(text) or {}
    current = dict((data.get("datasets") or {}).get(sweep.dataset) or {})
    new = {**current, **_typed(sweep.ranker, sweep.rows[sweep.chosen].settings)}
    flow = yaml.safe_dump(new, default_flow_style=True, sort_keys=False).strip()
    stamp = sweep.created[:10]
    comment = [f"  # sweep ({stamp}): {sweep.command}".rstrip()]
    comment += [f"  #   {line}" for line in table_lines(sweep)]
    lines = text.splitlines()
    if not any(re.fullmatch(r"datasets:\s*(\{\s*\})?\s*(#.*)?", ln) for ln in lines):
        raise RankerError(f"{path}: no top-level 'datasets:' line to add the chosen settings to")
    lines = ["datasets:" if re.fullmatch(r"datasets:\s*\{\s*\}\s*", ln) else ln for ln in lines]
    prefix = _DATASET_LINE.format(name=sweep.dataset)
    at = next((i for i, ln in enumerate(lines) if ln.startswith(prefix)), None)
    if at is not None:
        if not re.match(rf"{prefix}\s*\{{", lines[at]):
            raise RankerError(
                f"{path}: datasets.{sweep.dataset} is not a one-line mapping; add {flow} by hand"
            )
        start = at
        while start > 0 and lines[start - 1].startswith("  #"):
            start -= 1
        # drop an earlier sweep comment, keep any other comment above the line
        sweep_at = next((j for j in range(start, at) if lines[j].startswith("  # sweep (")), None)
        lines[sweep_at if sweep_at is not None else at : at + 1] = [
            *comment,
            f"{prefix} {flow}",
        ]
    else:
        header = next(i for i, ln in enumerate(lines) if ln.startswith("datasets:"))
        lines[header + 1 : header + 1] = [*comment, f"{prefix} {flow}"]
    out = "\n".join(lines) + "\n"
    check = (yaml.safe_load(out) or {}).get("datasets", {}).get(sweep.dataset)
    if check != new:
        raise RankerError(f"{path}: could not write datasets.{sweep.dataset}; add {flow} by hand")
    atomic_write_text(path, out)
    return new
