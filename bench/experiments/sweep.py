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
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.core.io import atomic_write_json, atomic_write_text, check_file_writable, ensure_writable
from bench.core.trained import TrainingSummary
from bench.data.files import read_text
from bench.execution.context import RunContext
from bench.execution.ranker_settings import ranker_options, settings_file
from bench.execution.runner import RunOptions, check_runs, check_teacher, run
from bench.execution.seeding import check_seeds, reseed
from bench.results.groups import choose_by_mean, make_group, write_group
from bench.results.metrics import DEFAULT_MEASURES
from bench.results.records import ResultRecord, config_hash
from rankers import RankerError, Role, canonical_name, get_ranker_class

log = logging.getLogger(__name__)

#: the dev measure that chooses (the one training selects epochs by)
DEFAULT_MEASURE = "AP@10"


@dataclasses.dataclass(frozen=True)
class SeedRun:
    """One combination under one seed: its dev score, test metrics and records."""

    seed: int
    dev: float
    test: dict[str, float]
    best_epoch: int | None
    train_seconds: float | None
    dev_record: str
    test_record: str


@dataclasses.dataclass(frozen=True)
class SweepRow:
    """One combination: its settings, dev and test scores, and where its records are. Swept
    over several seeds, ``dev`` and ``test`` are the means over ``per_seed`` (the dev mean
    chooses), the epoch, training time and records the first seed's."""

    settings: dict[str, str]
    dev: float
    test: dict[str, float]
    best_epoch: int | None
    train_seconds: float | None
    dev_record: str
    test_record: str
    per_seed: tuple[SeedRun, ...] = ()

    @classmethod
    def of(cls, settings: Mapping[str, str], runs: Sequence[SeedRun]) -> SweepRow:
        """The row of one combination run under each of ``runs``' seeds (one: as it was)."""
        first = runs[0]
        names = [m for m in first.test if all(m in r.test for r in runs)]
        return cls(
            dict(settings),
            statistics.fmean(r.dev for r in runs),
            {m: statistics.fmean(r.test[m] for r in runs) for m in names},
            first.best_epoch,
            first.train_seconds,
            first.dev_record,
            first.test_record,
            tuple(runs) if len(runs) > 1 else (),
        )

    @property
    def dev_scores(self) -> list[float]:
        """The dev score of each seed (one: the row's)."""
        return [r.dev for r in self.per_seed] or [self.dev]


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

    #: the training seeds every combination ran with (``--seeds``); empty for one run each
    seeds: list[int] = dataclasses.field(default_factory=list)

    @property
    def chosen(self) -> int:
        """The row with the best mean dev score over the seeds (first on ties)."""
        return choose_by_mean([row.dev_scores for row in self.rows])

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


def _check_changes_results(ranker: str, grid: Mapping[str, Sequence[str]]) -> None:
    """Refuse to sweep an option that cannot change the result: one whose only role is RUNTIME
    (a batch size, pre-tokenising: speed or placement). Every value would score the same, so
    the sweep would train its combinations for nothing and "choose" by noise."""
    config = get_ranker_class(ranker).Config
    runtime_only = (
        config.fields_with_role(Role.RUNTIME)
        - config.fields_with_role(Role.TRAINING)
        - config.fields_with_role(Role.SCORE)
    )
    for key, values in grid.items():
        if key in runtime_only and len(values) > 1:
            raise RankerError(
                f"--set {key}={','.join(values)}: {key} is a runtime option of {ranker} (role "
                "runtime: it changes speed or placement, not the result), so a sweep over it "
                f"has nothing to choose; set it per run with `bench run --set {key}=VALUE`"
            )


def _dev_score(record: ResultRecord, measure: str) -> float:
    if measure not in record.metrics:
        raise RankerError(f"measure {measure} is not in the dev record {record.path}")
    return float(record.metrics[measure])


def sweep_runs(
    base: RunOptions,
    grid: Mapping[str, Sequence[str]],
    measure: str = DEFAULT_MEASURE,
    ctx: RunContext | None = None,
) -> tuple[str, list[tuple[dict[str, str], RunOptions, RunOptions]]]:
    """The dev split, and each combination of ``grid`` with its test and dev run options, all
    checked before any work (what ``bench sweep --plan`` plans)."""
    if measure not in DEFAULT_MEASURES:
        raise ValueError(f"--measure {measure!r}: expected one of {', '.join(DEFAULT_MEASURES)}")
    ranker = canonical_name(base.ranker)
    ctx = ctx or base.context()
    dataset = ctx.dataset(base.dataset)
    splits, dev_name = dataset.splits, dataset.dev_split()
    if dev_name is None:
        raise RankerError(
            f"dataset {base.dataset!r} has no dev split (has {', '.join(splits)}): a sweep "
            "chooses on dev, never on test"
        )
    trainable = get_ranker_class(ranker).trainable
    combos = combinations(grid)
    if not combos:
        raise ValueError("nothing to sweep: give at least one --set key=value[,value...]")
    _check_changes_results(ranker, grid)
    _check(ranker, base.dataset, [{**base.options, **c} for c in combos])
    out = []
    for combo in combos:
        # a trainable ranker is trained for every combination ("tune on dev"), not only the
        # ones whose untrained head forces it: a zero-shot DPR would score every lr the same
        opts = dataclasses.replace(
            base, ranker=ranker, options={**base.options, **combo}, fit=base.fit or trainable
        )
        out.append((dict(combo), opts, dataclasses.replace(opts, split=dev_name, subset=None)))
    return dev_name, out


def run_sweep(
    base: RunOptions,
    grid: Mapping[str, Sequence[str]],
    measure: str = DEFAULT_MEASURE,
    command: str = "",
    on_row: Callable[[int, int, SweepRow], None] | None = None,
    ctx: RunContext | None = None,
    seeds: Sequence[int] | None = None,
) -> Sweep:
    """Train and score every combination of ``grid`` on top of ``base.options``, all in ``ctx``
    (default: ``base``'s context); with ``seeds``, under each training seed (each seed's runs
    exactly those with ``--set seed=K``, :mod:`bench.execution.seeding`; each combination's test
    and dev runs then written as seed groups), the mean dev score over the seeds choosing."""
    ctx = ctx or base.context()
    dev_name, runs = sweep_runs(base, grid, measure, ctx)
    every = [opts for _, test, dev in runs for opts in (test, dev)]
    if seeds:
        check_seeds(every, seeds)
    check_runs([reseed(o, k) for k in seeds or () for o in every] or every, ctx)
    ranker = canonical_name(base.ranker)
    rows: list[SweepRow] = []
    test_split = base.split
    for i, (combo, test_opts, dev_opts) in enumerate(runs, 1):
        settings = ", ".join(f"{k}={v}" for k, v in combo.items())
        log.info("sweep %d/%d: %s", i, len(runs), settings)
        pairs = [(reseed(test_opts, k), reseed(dev_opts, k), k) for k in seeds or ()]
        done = [
            _seed_run(t, d, measure, k, ctx)
            for t, d, k in pairs or [(test_opts, dev_opts, base.seed)]
        ]
        test_split = done[0][1].split
        if seeds:
            write_group(make_group([test for _, test, _ in done], command))  # as seed groups
            write_group(make_group([dev for _, _, dev in done], command))
        row = SweepRow.of(combo, [d[0] for d in done])
        rows.append(row)
        if on_row is not None:
            on_row(i, len(runs), row)
    created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return Sweep(
        ranker, base.dataset, measure, dev_name, test_split or "test", command, rows, created,
        list(seeds or []),
    )  # fmt: skip


def _seed_run(
    test_opts: RunOptions, dev_opts: RunOptions, measure: str, seed: int, ctx: RunContext
) -> tuple[SeedRun, ResultRecord, ResultRecord]:
    """One combination under one training seed: trained first when needed, then test and dev
    ranked."""
    test = run(test_opts, ctx)
    dev = run(dev_opts, ctx)
    training = TrainingSummary.from_json(test.training or {})
    found = SeedRun(
        seed=seed,
        dev=_dev_score(dev, measure),
        test=dict(test.metrics),
        best_epoch=training.best_epoch,
        train_seconds=training.seconds,
        dev_record=str(dev.path),
        test_record=str(test.path),
    )
    return found, test, dev


def save_sweep(sweep: Sweep, root: Path) -> Path:
    """Write the sweep's rows to ``root/sweeps/DATASET/RANKER-HASH.json``; returns the path."""
    digest = config_hash({"command": sweep.command, "rows": [r.settings for r in sweep.rows]})
    path = root / "sweeps" / sweep.dataset / f"{sweep.ranker}-{digest}.json"
    atomic_write_json(path, sweep.to_json())
    return path


def table_lines(sweep: Sweep) -> list[str]:
    """The sweep as aligned text lines (dev and test scores, kept epoch, training time); over
    several seeds the means with their sample standard deviations, each seed's kept epoch
    (``3/4/3``) and the training time summed, and a last line saying the mean chose."""
    keys = list(sweep.rows[0].settings)
    several = len(sweep.seeds) > 1
    m = sweep.measure
    header = [*keys, f"dev {m}", *(["dev sd"] if several else [])]
    header += [f"test {m}", *(["test sd"] if several else []), "epoch", "train s"]
    body = [
        [*(row.settings[k] for k in keys), *_score_cells(row, m, several)] for row in sweep.rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=True)]
    lines = [
        "  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *body]
    ]
    chosen = sweep.rows[sweep.chosen].settings
    lines.append(_CHOSEN + ", ".join(f"{k}={v}" for k, v in chosen.items()))
    if several:
        seeds = ", ".join(str(s) for s in sweep.seeds)
        lines.append(
            f"chosen by the mean dev {m} over seeds {seeds}; sd: sample standard deviation "
            "over the seeds"
        )
    return lines


def _score_cells(row: SweepRow, measure: str, several: bool) -> list[str]:
    """A row's dev and test cells (with their sds over the seeds when ``several``), epoch and
    training seconds."""
    runs = row.per_seed
    test = [r.test.get(measure, float("nan")) for r in runs]
    dev_sd = [f"{statistics.stdev(r.dev for r in runs):.4f}"] if several else []
    test_sd = [f"{statistics.stdev(test):.4f}"] if several else []
    if several:
        epochs = "/".join("-" if r.best_epoch is None else str(r.best_epoch) for r in runs)
        times = [r.train_seconds for r in runs]
        seconds = "-" if None in times else f"{sum(t or 0.0 for t in times):.0f}"
    else:
        epochs = "-" if row.best_epoch is None else str(row.best_epoch)
        seconds = "-" if row.train_seconds is None else f"{row.train_seconds:.0f}"
    return [
        f"{row.dev:.4f}",
        *dev_sd,
        f"{row.test.get(measure, float('nan')):.4f}",
        *test_sd,
        epochs,
        seconds,
    ]


def _typed(ranker: str, settings: Mapping[str, str]) -> dict[str, Any]:
    """CLI strings as the config's typed values (1e-4 a float, 6 an int, true a bool)."""
    config = get_ranker_class(ranker).Config.from_options(dict(settings)).to_dict()
    return {k: config[k] for k in settings}


_DATASET_LINE = "  {name}:"
#: the first line of a sweep's comment in a settings file; the dev split was added later, so a
#: comment without it is read as being on the dataset's (one) dev split
_SWEEP_HEADER = "  # sweep ({stamp}, dev split {split}): {command}"
_SWEEP_HEADER_RE = re.compile(r"  # sweep \((?P<stamp>[^,)]*)(?:, dev split (?P<split>[^)]*))?\):")
_BODY = "  #   "
_CHOSEN = "chosen on dev: "
#: the last comment line of a sweep whose choice was not written (an earlier one scored better)
_NOT_WRITTEN = "not written: "
#: what to do about a settings file or folder a sweep cannot write
SETTINGS_HINT = "make it writable, or sweep with --no-write to print the choice only"


@dataclasses.dataclass(frozen=True)
class EarlierChoice:
    """A choice an earlier sweep wrote into the settings file, read back from its comment."""

    settings: dict[str, str]
    dev: float
    measure: str
    stamp: str

    def describe(self) -> str:
        settings = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"{settings} (dev {self.measure} {self.dev:.4f}, sweep of {self.stamp})"


@dataclasses.dataclass(frozen=True)
class Written:
    """What :func:`write_chosen` did: the dataset's settings now in ``path``; ``kept`` says why
    they are an earlier sweep's choice and not this one's (None: this sweep's were written)."""

    path: Path
    settings: dict[str, Any]
    kept: str | None = None


def check_settings_writable(path: Path) -> None:
    """Raise :class:`~bench.core.io.StorageError` naming ``path`` (the settings file) or its
    folder when a sweep could not write its choice there: read-only by its mode (which the
    atomic rename would otherwise ignore) or by the folder's permissions. Called before the
    first combination trains, so a sweep never fails after all its work."""
    check_file_writable(path, SETTINGS_HINT)
    ensure_writable(path.parent, "settings", SETTINGS_HINT)


def _parse_sweep_comment(body: Sequence[str], stamp: str) -> EarlierChoice | None:
    """The choice recorded in one sweep comment's lines (after ``#   ``): the chosen settings
    and their row's dev score; None for a comment whose choice was not written or that cannot
    be read (hand-edited)."""
    if not body or any(line.startswith(_NOT_WRITTEN) for line in body):
        return None
    header = re.split(r"\s{2,}", body[0].strip())
    dev_col = next((i for i, cell in enumerate(header) if cell.startswith("dev ")), None)
    chosen_line = next((line for line in body if line.startswith(_CHOSEN)), None)
    if dev_col is None or chosen_line is None:
        return None
    try:
        chosen = dict(part.split("=", 1) for part in chosen_line[len(_CHOSEN) :].split(", "))
        for line in body[1:]:
            cells = re.split(r"\s{2,}", line.strip())
            if cells[:dev_col] == [chosen.get(k) for k in header[:dev_col]]:
                return EarlierChoice(chosen, float(cells[dev_col]), header[dev_col][4:], stamp)
    except ValueError:
        return None
    return None


def earlier_choice(
    sweep: Sweep, comments: Sequence[str], current: Mapping[str, Any]
) -> EarlierChoice | None:
    """The latest earlier sweep's choice, among the comment lines above the dataset's settings,
    that is still in force (its settings are the ``current`` ones) and was chosen by the same
    measure on the same dev split as ``sweep``; None when there is none to compare with."""
    found: EarlierChoice | None = None
    for i, line in enumerate(comments):
        match = _SWEEP_HEADER_RE.match(line)
        if match is None or match["split"] not in (None, sweep.dev_split):
            continue
        body = []
        for rest in comments[i + 1 :]:
            if not rest.startswith(_BODY):
                break
            body.append(rest[len(_BODY) :])
        choice = _parse_sweep_comment(body, match["stamp"])
        if choice is None or choice.measure != sweep.measure:
            continue
        try:
            typed = _typed(sweep.ranker, choice.settings)
        except (RankerError, ValueError, TypeError):  # an option since renamed or removed
            continue
        if all(current.get(k) == v for k, v in typed.items()):
            found = choice
    return found


def write_chosen(sweep: Sweep, path: Path | None = None, replace: bool = False) -> Written:
    """Merge the chosen settings into ``datasets.<dataset>`` of the settings file at ``path``
    (default: the ranker's settings file), with the sweep table as a comment above that line.

    Every sweep's comment is kept (the new one goes last), with the file's other lines and
    comments, and the file keeps its mode; a read-only file or folder is an error (checked
    before training by :func:`check_settings_writable`). When an earlier sweep's choice is
    still in force and scored better on the same dev split and measure, it is kept unless
    ``replace``: a narrower sweep must not silently undo a better choice. The comment then says
    so, and so does :attr:`Written.kept`."""
    path = path or settings_file(sweep.ranker)
    mode = check_file_writable(path, SETTINGS_HINT)
    text = read_text(path) if path.exists() else "default: {}\ndatasets: {}\n"
    data = yaml.safe_load(text) or {}
    current = dict((data.get("datasets") or {}).get(sweep.dataset) or {})
    chosen = _typed(sweep.ranker, sweep.rows[sweep.chosen].settings)
    new = {**current, **chosen}
    lines = text.splitlines()
    if not any(re.fullmatch(r"datasets:\s*(\{\s*\})?\s*(#.*)?", ln) for ln in lines):
        raise RankerError(f"{path}: no top-level 'datasets:' line to add the chosen settings to")
    lines = ["datasets:" if re.fullmatch(r"datasets:\s*\{\s*\}\s*", ln) else ln for ln in lines]
    prefix = _DATASET_LINE.format(name=sweep.dataset)
    at = next((i for i, ln in enumerate(lines) if ln.startswith(prefix)), None)
    start = at
    while start is not None and start > 0 and lines[start - 1].startswith("  #"):
        start -= 1
    comments = lines[start:at] if start is not None and at is not None else []
    earlier = earlier_choice(sweep, comments, current)
    best = sweep.rows[sweep.chosen].dev
    kept = None
    if earlier is not None and best < earlier.dev and new != current and not replace:
        kept = (
            f"not written: the best here, dev {sweep.measure} {best:.4f}, is below the earlier "
            f"choice {earlier.describe()}, which stays; --replace writes this sweep's"
        )
        new = current
    flow = yaml.safe_dump(new, default_flow_style=True, sort_keys=False).strip()
    header = _SWEEP_HEADER.format(
        stamp=sweep.created[:10], split=sweep.dev_split, command=sweep.command
    )
    comment = [header.rstrip(), *(f"{_BODY}{line}" for line in table_lines(sweep))]
    comment += [f"{_BODY}{kept}"] if kept else []
    if at is not None:
        if not re.match(rf"{prefix}\s*\{{", lines[at]):
            raise RankerError(
                f"{path}: datasets.{sweep.dataset} is not a one-line mapping; add {flow} by hand"
            )
        # a kept choice keeps its line as it was (with any comment after it)
        lines[at : at + 1] = [*comment, lines[at] if kept else f"{prefix} {flow}"]
    else:
        header_at = next(i for i, ln in enumerate(lines) if ln.startswith("datasets:"))
        lines[header_at + 1 : header_at + 1] = [*comment, f"{prefix} {flow}"]
    out = "\n".join(lines) + "\n"
    check = (yaml.safe_load(out) or {}).get("datasets", {}).get(sweep.dataset)
    if check != new:
        raise RankerError(f"{path}: could not write datasets.{sweep.dataset}; add {flow} by hand")
    atomic_write_text(path, out, mode=mode)
    return Written(path, new, kept)
