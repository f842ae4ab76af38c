"""Regression checks for CI: expected values in ``results/expected/*.yaml`` against result records.

Each file is a YAML list of entries. ``kind`` selects the entry type (default ``metric``):

``metric``: one metric of the newest matching record must be within ``tolerance`` of ``expected``::

    - {dataset: wikiqa, split: test, ranker: bm25, metric: AP@10, expected: 0.61, tolerance: 0.005}
    - dataset: wikiqa
      split: test
      ranker: monobert
      config: {model: minilm-l6, subset: 50}   # must match record.config or record.run_config
      metric: RR@10
      expected: 0.71
      tolerance: 0.01

``ratio``: ``numerator / denominator`` of two records' latency fields must lie in [min, max]
(either bound may be omitted, not both)::

    - kind: ratio
      dataset: wikiqa
      split: test                          # optional: any split when absent
      numerator: {ranker: monobert, field: p50_ms}
      denominator: {ranker: crossjem, field: p50_ms, config: {model: minilm-l6}}
      min: 2.0

A record matches when dataset, split and ranker are equal, each ``config`` key (dotted for
nested values, e.g. ``model.name``) has an equal value in ``record.config`` or
``record.run_config`` (compared as given, or as strings so YAML ``50`` matches ``"50"``), and
``config`` names everything the record overrides (``record.overrides``: ranker options that
differ from the config file's settings, ``subset``, ``train_subset``, an explicit ``fit``,
``seed``). So an entry without ``config`` is about full runs of the ranker's default settings:
a ``--subset`` smoke run can neither satisfy nor fail it. Records match by kind
(:attr:`ResultRecord.kind`): an entry whose ``config`` names ``benchmark: latency`` is about
`bench latency` rows, every other entry about `bench run` records only, so a newer latency
record can never stand in for a run. The newest (``created``) of the matches
is checked (`bench check` passes only current records: :mod:`bench.execution.selection`), and every
result line names the record it used. No match is a failure (``MISSING``). A file with no
entries, or none about a dataset with records, is :class:`NothingToCheck`; the report counts the
run records no entry covers (:class:`CheckReport`). A new entry type is a parser and a checker
registered in ``_KINDS``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

import yaml

from bench.data.files import read_text
from bench.reporting.picks import Pick
from bench.results.records import RUN_KIND, ResultRecord

log = logging.getLogger(__name__)

OK, FAIL, MISSING = "OK", "FAIL", "MISSING"
_EPS = 1e-12


class ExpectationError(ValueError):
    """A malformed expected-values file; the message names the file, the entry and the key."""


@dataclass(frozen=True)
class MetricExpectation:
    source: str  # "file.yaml#3"
    selector: Pick
    metric: str
    expected: float
    tolerance: float


@dataclass(frozen=True)
class RatioSide:
    selector: Pick
    field: str  # a key of ResultRecord.latency


@dataclass(frozen=True)
class RatioExpectation:
    source: str
    numerator: RatioSide
    denominator: RatioSide
    min: float | None
    max: float | None


Expectation = MetricExpectation | RatioExpectation


@dataclass(frozen=True)
class CheckResult:
    status: str  # OK, FAIL or MISSING
    name: str  # what was checked, e.g. "wikiqa/test bm25 AP@10"
    expected: float | None  # the expected value (metric) or None (ratio: see bounds)
    actual: float | None
    tolerance: float | None
    message: str = ""
    source: str = ""
    bounds: tuple[float | None, float | None] | None = None  # ratio (min, max)
    record: ResultRecord | None = None
    #: every record the result was computed from (a ratio has two)
    records: tuple[ResultRecord, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == OK


# -- parsing -------------------------------------------------------------------------------------
class _Entry:
    """One YAML mapping being parsed; every complaint names the file, the entry index and key."""

    def __init__(self, data: Any, where: str) -> None:
        self.where = where
        if not isinstance(data, Mapping):
            raise self.error(f"expected a mapping, got {type(data).__name__}")
        self.data = dict(data)
        self.used: set[str] = {"kind"}

    def error(self, text: str) -> ExpectationError:
        return ExpectationError(f"{self.where}: {text}")

    def get(self, key: str, kind: type | tuple[type, ...], required: bool = True) -> Any:
        self.used.add(key)
        if key not in self.data or self.data[key] is None:
            if required:
                raise self.error(f"missing key {key!r}")
            return None
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            name = "/".join("number" if k is float else k.__name__ for k in kinds)
            raise self.error(f"bad key {key!r}: expected {name}, got {value!r}")
        if isinstance(value, float) and kind is float and not math.isfinite(value):
            raise self.error(f"bad key {key!r}: expected a finite number, got {value!r}")
        return value

    @overload
    def text(self, key: str, required: Literal[True] = True) -> str: ...

    @overload
    def text(self, key: str, required: bool) -> str | None: ...

    def text(self, key: str, required: bool = True) -> str | None:
        value = self.get(key, (str, int, float), required)
        return None if value is None else str(value)

    def selector(self, split_required: bool = True) -> Pick:
        config = self.get("config", dict, required=False) or {}
        dataset, split = self.text("dataset"), self.text("split", split_required)
        return Pick(
            self.text("ranker"), options=tuple(config.items()), dataset=dataset, split=split
        )

    def sub(self, key: str) -> _Entry:
        self.used.add(key)
        if key not in self.data:
            raise self.error(f"missing key {key!r}")
        return _Entry(self.data[key], f"{self.where}: {key}")

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise self.error(f"unknown key(s) {', '.join(map(repr, unknown))}")


def _parse_metric(entry: _Entry, source: str) -> MetricExpectation:
    exp = MetricExpectation(
        source,
        entry.selector(),
        entry.text("metric"),
        entry.get("expected", float),
        entry.get("tolerance", float),
    )
    if exp.tolerance < 0:
        raise entry.error(f"bad key 'tolerance': must be >= 0, got {exp.tolerance}")
    return exp


def _parse_side(entry: _Entry, key: str, dataset: str, split: str | None) -> RatioSide:
    side = entry.sub(key)
    side.data.setdefault("dataset", dataset)
    side.data.setdefault("split", split)
    selector = side.selector(split_required=False)
    out = RatioSide(selector, side.text("field"))
    side.done()
    return out


def _parse_ratio(entry: _Entry, source: str) -> RatioExpectation:
    dataset, split = entry.text("dataset"), entry.text("split", required=False)
    lo, hi = entry.get("min", float, required=False), entry.get("max", float, required=False)
    if lo is None and hi is None:
        raise entry.error("missing key 'min' or 'max' (a ratio needs at least one bound)")
    return RatioExpectation(
        source,
        _parse_side(entry, "numerator", dataset, split),
        _parse_side(entry, "denominator", dataset, split),
        lo,
        hi,
    )


_Parser = Callable[[_Entry, str], Expectation]
_Checker = Callable[[Any, Sequence[ResultRecord]], CheckResult]


def load_expectations(path: Path) -> list[Expectation]:
    """Parse one expected-values file; :class:`ExpectationError` names file, entry and key."""
    try:
        data = yaml.safe_load(read_text(path))
    except yaml.YAMLError as exc:
        raise ExpectationError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return []
    if not isinstance(data, list):
        raise ExpectationError(f"{path}: expected a list of entries, got {type(data).__name__}")
    out = []
    for i, raw in enumerate(data):
        entry = _Entry(raw, f"{path}: entry {i}")
        kind = entry.data.get("kind", "metric")
        if kind not in _KINDS:
            raise entry.error(f"bad key 'kind': {kind!r}; known: {', '.join(_KINDS)}")
        out.append(_KINDS[kind][0](entry, f"{path.name}#{i}"))
        entry.done()
    return out


def expected_files(paths: Iterable[Path]) -> list[Path]:
    """Files as given; a directory stands for its ``*.yaml`` and ``*.yml`` files, sorted."""
    out: list[Path] = []
    for path in map(Path, paths):
        out += sorted([*path.glob("*.yaml"), *path.glob("*.yml")]) if path.is_dir() else [path]
    return out


# -- matching and checking -----------------------------------------------------------------------
def _lookup(data: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _same(a: Any, b: Any) -> bool:
    return a == b or str(a) == str(b)


def _config_matches(record: ResultRecord, config: Mapping[str, Any]) -> bool:
    for key, want in config.items():
        found = [_lookup(source or {}, key) for source in (record.config, record.run_config)]
        if not any(ok and _same(value, want) for ok, value in found):
            return False
    return True


def record_overrides(record: ResultRecord) -> dict[str, Any]:
    """What ``record`` changes from the ranker's default full run. Records written before
    overrides were recorded (and latency-benchmark records) say only their subsets."""
    if record.overrides is not None:
        return dict(record.overrides)
    run_config = record.run_config or {}
    return {k: run_config[k] for k in ("subset", "train_subset") if run_config.get(k)}


def _unnamed_overrides(record: ResultRecord, config: Mapping[str, Any]) -> dict[str, Any]:
    """The record's overrides that ``config`` does not name (a dotted key names its root)."""
    named = {key.split(".")[0] for key in config}
    return {k: v for k, v in record_overrides(record).items() if k not in named}


def _candidates(records: Sequence[ResultRecord], selector: Pick) -> list[ResultRecord]:
    return [
        r
        for r in records
        if r.kind == selector.kind
        and r.dataset == selector.dataset
        and (selector.split is None or r.split == selector.split)
        and r.ranker == selector.ranker
        and _config_matches(r, selector.config)
    ]


def find_record(records: Sequence[ResultRecord], selector: Pick) -> ResultRecord | None:
    """The newest record matching ``selector`` whose overrides it names, or None."""
    matches = [
        r for r in _candidates(records, selector) if not _unnamed_overrides(r, selector.config)
    ]
    return max(matches, key=lambda r: r.created) if matches else None


def _no_match(records: Sequence[ResultRecord], selector: Pick) -> str:
    """Why nothing matched: none at all, or only records with settings the entry does not name
    (smoke runs, other options), which are said so they can be named under ``config``."""
    others = _candidates(records, selector)
    if not others:
        return f"no matching result record for {selector.describe()}"
    seen = sorted(
        {
            ", ".join(f"{k}={v}" for k, v in _unnamed_overrides(r, selector.config).items())
            for r in others
        }
    )
    return (
        f"no matching result record for {selector.describe()}: {len(others)} record(s) have "
        f"settings this entry does not name ({'; '.join(seen)}); name them under `config` to "
        "check those"
    )


def _check_metric(exp: MetricExpectation, records: Sequence[ResultRecord]) -> CheckResult:
    name = f"{exp.selector.describe()} {exp.metric}"
    base: dict[str, Any] = {
        "name": name,
        "expected": exp.expected,
        "tolerance": exp.tolerance,
        "source": exp.source,
    }
    record = find_record(records, exp.selector)
    if record is None:
        return CheckResult(MISSING, actual=None, message=_no_match(records, exp.selector), **base)
    found: dict[str, Any] = {"record": record, "records": (record,)}
    if exp.metric not in record.metrics:
        have = ", ".join(record.metrics) or "none"
        return CheckResult(
            MISSING,
            actual=None,
            **found,
            **base,
            message=f"record {record.path} has no {exp.metric} (has: {have})",
        )
    actual = float(record.metrics[exp.metric])
    diff = actual - exp.expected
    if abs(diff) <= exp.tolerance + _EPS:
        return CheckResult(OK, actual=actual, **found, **base)
    return CheckResult(
        FAIL, actual=actual, **found, **base, message=f"off by {diff:+.4g}, beyond the tolerance"
    )


def _side_value(
    side: RatioSide, records: Sequence[ResultRecord]
) -> tuple[float | None, str, ResultRecord | None]:
    record = find_record(records, side.selector)
    if record is None:
        return None, _no_match(records, side.selector), None
    value = (record.latency or {}).get(side.field)
    if value is None:
        return None, f"record {record.path} has no latency field {side.field!r}", record
    return float(value), "", record


def _check_ratio(exp: RatioExpectation, records: Sequence[ResultRecord]) -> CheckResult:
    num, den = exp.numerator, exp.denominator
    name = f"{num.selector.describe()} {num.field} / {den.selector.describe()} {den.field}"
    base: dict[str, Any] = {
        "name": name,
        "expected": None,
        "tolerance": None,
        "source": exp.source,
        "bounds": (exp.min, exp.max),
    }
    top, why_top, top_record = _side_value(num, records)
    bottom, why_bottom, bottom_record = _side_value(den, records)
    base["records"] = tuple(r for r in (top_record, bottom_record) if r is not None)
    if top is None or bottom is None:
        return CheckResult(MISSING, actual=None, message=why_top or why_bottom, **base)
    if bottom == 0:
        return CheckResult(
            FAIL, actual=None, message=f"{den.field} of the denominator is 0", **base
        )
    ratio = top / bottom
    low_ok = exp.min is None or ratio >= exp.min - _EPS
    high_ok = exp.max is None or ratio <= exp.max + _EPS
    if low_ok and high_ok:
        return CheckResult(OK, actual=ratio, **base)
    return CheckResult(FAIL, actual=ratio, message="ratio outside the bounds", **base)


_KINDS: dict[str, tuple[_Parser, _Checker]] = {
    "metric": (_parse_metric, _check_metric),
    "ratio": (_parse_ratio, _check_ratio),
}


class NothingToCheck(ExpectationError):
    """An expected-values file that would check nothing: it has no entries, or none about a
    dataset with records. A check that passes while checking nothing must not pass."""


@dataclass
class CheckReport:
    """The results of every entry, and the `bench run` records no entry is about."""

    results: list[CheckResult]
    #: run records that no entry selects (whose figures the check therefore never reads)
    uncovered: list[ResultRecord] = field(default_factory=list)

    def summary(self) -> str:
        """``checks: 2 OK, 0 FAIL, 0 MISSING; 3 records no expectation covers (wikiqa/test:
        dpr, monobert; semeval16b/test: bm25)``."""
        counts = {s: sum(r.status == s for r in self.results) for s in (OK, FAIL, MISSING)}
        text = "checks: " + ", ".join(f"{n} {s}" for s, n in counts.items())
        if self.uncovered:
            by_split: dict[str, list[str]] = {}
            for rec in self.uncovered:
                labels = by_split.setdefault(f"{rec.dataset}/{rec.split}", [])
                if (rec.label or rec.ranker) not in labels:
                    labels.append(rec.label or rec.ranker)
            n = len(self.uncovered)
            where = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(by_split.items()))
            text += f"; {n} record{'' if n == 1 else 's'} no expectation covers ({where})"
        return text


def _selectors(exp: Expectation) -> list[Pick]:
    if isinstance(exp, RatioExpectation):
        return [exp.numerator.selector, exp.denominator.selector]
    return [exp.selector]


def _covers(selector: Pick, record: ResultRecord) -> bool:
    return bool(_candidates([record], selector)) and not _unnamed_overrides(record, selector.config)


def check_report(
    expected: Iterable[Path] | Path, records: Sequence[ResultRecord], recorded: Iterable[str] = ()
) -> CheckReport:
    """Check every entry of the expected-values files (or directories of them) against
    ``records``, and list the run records no entry covers.

    :class:`NothingToCheck` when a file has no entries, or no entry about a dataset of
    ``records`` or ``recorded`` (datasets with records that ``records`` leaves out, such as
    records of other data): such a file would pass while checking nothing."""
    paths = expected_files([expected] if isinstance(expected, Path) else expected)
    if not paths:
        raise NothingToCheck("no expected-value files given: nothing to check")
    datasets = {r.dataset for r in records} | set(recorded)
    report = CheckReport([])
    entries: list[Expectation] = []
    for path in paths:
        found = load_expectations(path)
        if not found:
            raise NothingToCheck(f"{path} has no entries: nothing to check")
        named = sorted({s.dataset for exp in found for s in _selectors(exp) if s.dataset})
        if not set(named) & datasets:
            have = ", ".join(sorted(datasets)) or "none"
            raise NothingToCheck(
                f"no entry of {path} is about a dataset with records (entries: "
                f"{', '.join(named)}; records: {have}): nothing to check; run `bench run` first"
            )
        entries += found
    for exp in entries:
        kind = "ratio" if isinstance(exp, RatioExpectation) else "metric"
        report.results.append(_KINDS[kind][1](exp, records))
    selectors = [s for exp in entries for s in _selectors(exp)]
    report.uncovered = [
        r for r in records if r.kind == RUN_KIND and not any(_covers(sel, r) for sel in selectors)
    ]
    return report


# -- output --------------------------------------------------------------------------------------
def _decimals(x: float) -> int:
    text = repr(float(x))
    return 6 if "e" in text else len(text.split(".")[1].rstrip("0"))


def _where(record: ResultRecord) -> str:
    """A record's folder, relative to the working directory when inside it."""
    if record.path is None:
        return f"record of {record.created or 'unknown date'}"
    path = Path(record.path)
    return os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)


def format_check_line(result: CheckResult) -> str:
    """``OK   wikiqa/test bm25 AP@10 expected 0.6123 ± 0.005 actual 0.6125 [runs/...]``: the
    reason when it is not OK, then the record(s) the value came from."""
    if result.bounds is not None:
        lo, hi = result.bounds
        want = " and ".join(
            part
            for part in (lo is not None and f">= {lo:g}", hi is not None and f"<= {hi:g}")
            if part
        )
        line = f"{result.status:<4} {result.name} expected {want}"
        digits = 2
    else:
        assert result.expected is not None and result.tolerance is not None  # a metric check
        want = f"{result.expected:g} ± {result.tolerance:g}"
        line = f"{result.status:<4} {result.name} expected {want}"
        digits = max(4, _decimals(result.expected), _decimals(result.tolerance))
    line += " actual " + ("-" if result.actual is None else f"{result.actual:.{digits}f}")
    line += f" ({result.message})" if result.message and not result.ok else ""
    used = result.records or ((result.record,) if result.record is not None else ())
    return line + (f" [{', '.join(_where(r) for r in used)}]" if used else "")
