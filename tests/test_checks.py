"""bench.reporting.checks against records written with bench.results.records.write_result and YAML
in tmp_path."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from bench.reporting.checks import (
    FAIL,
    MISSING,
    OK,
    ExpectationError,
    MetricExpectation,
    NothingToCheck,
    check_report,
    format_check_line,
    load_expectations,
)
from bench.results.records import (
    LATENCY_KIND,
    ResultRecord,
    config_hash,
    load_records,
    run_dir,
    write_result,
)


def make_record(
    root: Path,
    ranker: str,
    metrics: dict[str, float],
    *,
    config: dict | None = None,
    run_config: dict | None = None,
    latency: dict | None = None,
    created: str = "2025-01-01T00:00:00",
    dataset: str = "wikiqa",
    split: str = "test",
    overrides: dict | None = None,
) -> ResultRecord:
    config, run_config = config or {}, run_config or {}
    chash = config_hash({"r": ranker, "c": config, "rc": run_config, "t": created})
    rec = ResultRecord(
        ranker=ranker,
        dataset=dataset,
        split=split,
        family="sparse",
        label=ranker,
        metrics=metrics,
        latency=latency or {},
        config=config,
        run_config=run_config,
        config_hash=chash,
        data={},
        provenance={},
        created=created,
        overrides=overrides,
    )
    per_query = {"q1": dict(metrics)}
    return write_result(rec, {}, per_query, run_dir(root, dataset, ranker, split, chash))


def write_yaml(tmp_path: Path, text: str, name: str = "expected.yaml") -> Path:
    path = tmp_path / "expected" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture()
def records(tmp_path: Path) -> list[ResultRecord]:
    root = tmp_path / "results"
    make_record(root, "bm25", {"AP@10": 0.6125, "RR@10": 0.63}, latency={"p50_ms": 0.5})
    make_record(
        root,
        "monobert",
        {"AP@10": 0.70},
        config={"model": "minilm-l6", "batch_size": 32},
        run_config={"subset": 50},
        latency={"p50_ms": 20.0},
    )
    make_record(
        root,
        "monobert",
        {"AP@10": 0.75},
        config={"model": "minilm-l6", "batch_size": 32},
        run_config={"subset": None},
        created="2025-02-01T00:00:00",
        latency={"p50_ms": 18.0},
    )
    make_record(
        root, "monobert", {"AP@10": 0.40}, config={"model": "tiny"}, created="2025-03-01T00:00:00"
    )
    make_record(
        root,
        "crossjem",
        {"AP@10": 0.8},
        config={"model": {"name": "minilm-l6"}},
        latency={"p50_ms": 4.0},
    )
    return load_records(root)


BM25 = (
    "- {dataset: wikiqa, split: test, ranker: bm25, metric: AP@10, expected: %s, tolerance: %s}\n"
)


def test_ok_and_line_format(tmp_path: Path, records: list[ResultRecord]) -> None:
    [result] = check_report([write_yaml(tmp_path, BM25 % (0.6123, 0.005))], records).results
    assert result.status == OK and result.ok
    assert (result.expected, result.actual, result.tolerance) == (0.6123, 0.6125, 0.005)
    assert result.source == "expected.yaml#0"
    assert result.records == (result.record,) and result.record is not None
    assert format_check_line(result) == (
        f"OK   wikiqa/test bm25 AP@10 expected 0.6123 ± 0.005 actual 0.6125 [{result.record.path}]"
    )


def test_fail_beyond_tolerance(tmp_path: Path, records: list[ResultRecord]) -> None:
    path = write_yaml(
        tmp_path,
        BM25 % (0.6123, 0.005)
        + BM25 % (0.6200, 0.005)
        + BM25 % (0.6175, 0.005)
        + BM25 % (0.6125, 0),
    )
    results = check_report([path], records).results
    # |0.6125 - 0.62| = 0.0075 > 0.005; |0.6125 - 0.6175| = 0.005 is on the edge, still OK
    assert [r.status for r in results] == [OK, FAIL, OK, OK]
    assert format_check_line(results[1]) == (
        "FAIL wikiqa/test bm25 AP@10 expected 0.62 ± 0.005 actual 0.6125 "
        f"(off by -0.0075, beyond the tolerance) [{results[1].record.path}]"
    )


def test_missing_record_and_missing_metric(tmp_path: Path, records: list[ResultRecord]) -> None:
    path = write_yaml(
        tmp_path,
        """
- {dataset: wikiqa, split: dev, ranker: bm25, metric: AP@10, expected: 0.6, tolerance: 0.01}
- {dataset: wikiqa, split: test, ranker: colbert, metric: AP@10, expected: 0.6, tolerance: 0.01}
- {dataset: wikiqa, split: test, ranker: bm25, metric: nDCG@10, expected: 0.6, tolerance: 0.01}
""",
    )
    results = check_report([path], records).results
    assert [r.status for r in results] == [MISSING, MISSING, MISSING]
    assert not any(r.ok for r in results)
    assert format_check_line(results[1]) == (
        "MISSING wikiqa/test colbert AP@10 expected 0.6 ± 0.01 actual - "
        "(no matching result record for wikiqa/test colbert)"
    )
    assert "has no nDCG@10 (has: AP@10, RR@10)" in results[2].message


def test_config_matching_newest_and_run_config(tmp_path: Path, records: list[ResultRecord]) -> None:
    path = write_yaml(
        tmp_path,
        """
- dataset: wikiqa
  split: test
  ranker: monobert
  config: {model: minilm-l6, subset: 50}
  metric: AP@10
  expected: 0.70
  tolerance: 0.001
- {dataset: wikiqa, split: test, ranker: monobert, config: {model: minilm-l6},
   metric: AP@10, expected: 0.75, tolerance: 0.001}
- {dataset: wikiqa, split: test, ranker: monobert, metric: AP@10, expected: 0.40, tolerance: 0.001}
- {dataset: wikiqa, split: test, ranker: monobert, config: {batch_size: "32", subset: 50},
   metric: AP@10, expected: 0.70, tolerance: 0.001}
- {dataset: wikiqa, split: test, ranker: monobert, config: {model: base},
   metric: AP@10, expected: 0.70, tolerance: 0.001}
- {dataset: wikiqa, split: test, ranker: crossjem, config: {model.name: minilm-l6},
   metric: AP@10, expected: 0.8, tolerance: 0.001}
""",
    )
    results = check_report([path], records).results
    # 1: subset=50 is in run_config -> the older minilm record (0.70)
    # 2: model only -> newest of the two minilm records (0.75), not the newer 'tiny' one
    # 3: no config -> newest monobert overall ('tiny', 0.40)
    # 4: "32" matches 32 as a string; 5: no record has model=base; 6: dotted nested key
    assert [r.status for r in results] == [OK, OK, OK, OK, MISSING, OK]
    assert [r.actual for r in results] == [0.70, 0.75, 0.40, 0.70, None, 0.8]
    assert results[0].name == "wikiqa/test monobert (model=minilm-l6, subset=50) AP@10"


def test_entry_without_config_is_about_full_default_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "results"
    full = make_record(root, "bm25", {"AP@10": 0.61}, overrides={}, created="2025-01-01")
    make_record(
        root,
        "bm25",
        {"AP@10": 0.9},
        run_config={"subset": 5},
        overrides={"subset": 5},
        created="2025-02-01",
    )
    make_record(
        root,
        "bm25",
        {"AP@10": 0.8},
        config={"k1": 1.2},
        overrides={"k1": 1.2},
        created="2025-03-01",
    )
    # written before overrides were recorded: its run_config still says it was a smoke run
    make_record(root, "bm25", {"AP@10": 0.7}, run_config={"subset": 9}, created="2025-04-01")
    named = (
        "- {dataset: wikiqa, split: test, ranker: bm25, config: {subset: 5}, metric: AP@10,\n"
        "   expected: 0.9, tolerance: 0.001}\n"
        "- {dataset: wikiqa, split: test, ranker: bm25, config: {k1: 1.2}, metric: AP@10,\n"
        "   expected: 0.8, tolerance: 0.001}\n"
    )
    path = write_yaml(tmp_path, BM25 % (0.61, 0.001) + named)
    results = check_report([path], load_records(root)).results
    assert [(r.status, r.actual) for r in results] == [(OK, 0.61), (OK, 0.9), (OK, 0.8)]
    assert results[0].record is not None and results[0].record.path == full.path
    monkeypatch.chdir(tmp_path)  # a record under the working directory is shown relative to it
    assert format_check_line(results[0]).endswith(f"[{full.path.relative_to(tmp_path)}]")

    only_smoke = [r for r in load_records(root) if r.overrides or r.run_config.get("subset")]
    [missing] = check_report(
        [write_yaml(tmp_path, BM25 % (0.61, 0.001), "m.yaml")], only_smoke
    ).results
    assert missing.status == MISSING and missing.message == (
        "no matching result record for wikiqa/test bm25: 3 record(s) have settings this entry "
        "does not name (k1=1.2; subset=5; subset=9); name them under `config` to check those"
    )


def test_ratio_of_latency_fields(tmp_path: Path, records: list[ResultRecord]) -> None:
    path = write_yaml(
        tmp_path,
        """
- kind: ratio
  dataset: wikiqa
  split: test
  numerator: {ranker: monobert, field: p50_ms, config: {model: minilm-l6}}
  denominator: {ranker: crossjem, field: p50_ms}
  min: 4.0
- kind: ratio
  dataset: wikiqa
  numerator: {ranker: monobert, field: p50_ms, config: {subset: 50}}
  denominator: {ranker: crossjem, field: p50_ms}
  min: 2.0
  max: 4.5
- kind: ratio
  dataset: wikiqa
  numerator: {ranker: bm25, field: p99_ms}
  denominator: {ranker: crossjem, field: p50_ms}
  max: 1
""",
    )
    results = check_report([path], records).results
    # 18 / 4 = 4.5 >= 4; 20 / 4 = 5.0 > 4.5; bm25 has no p99_ms
    assert [r.status for r in results] == [OK, FAIL, MISSING]
    assert [r.actual for r in results] == [4.5, 5.0, None]
    used = ", ".join(str(r.path) for r in results[1].records)
    assert [r.ranker for r in results[1].records] == ["monobert", "crossjem"]
    assert format_check_line(results[1]) == (
        "FAIL wikiqa monobert (subset=50) p50_ms / wikiqa crossjem p50_ms expected >= 2 and "
        f"<= 4.5 actual 5.00 (ratio outside the bounds) [{used}]"
    )
    assert "has no latency field 'p99_ms'" in results[2].message


def test_directory_of_files(tmp_path: Path, records: list[ResultRecord]) -> None:
    write_yaml(tmp_path, BM25 % (0.6123, 0.005), "a.yaml")
    write_yaml(tmp_path, BM25 % (0.1, 0.005), "b.yml")
    results = check_report(tmp_path / "expected", records).results
    assert [(r.source, r.status) for r in results] == [("a.yaml#0", OK), ("b.yml#0", FAIL)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "has no entries: nothing to check"),
        ("[]\n", "has no entries: nothing to check"),
        (
            "- {dataset: sodq, split: test, ranker: bm25, metric: AP@10, expected: 0.5, "
            "tolerance: 0.01}\n",
            "is about a dataset with records (entries: sodq; records: wikiqa): nothing to check",
        ),
    ],
)
def test_a_file_that_checks_nothing_is_an_error(
    tmp_path: Path, records: list[ResultRecord], text: str, message: str
) -> None:
    """No entries, or none about a recorded dataset, cannot pass vacuously."""
    write_yaml(tmp_path, BM25 % (0.6123, 0.005), "a.yaml")
    path = write_yaml(tmp_path, text, "b.yaml")
    with pytest.raises(NothingToCheck, match=re.escape(message)) as err:
        check_report(tmp_path / "expected", records)
    assert str(path) in str(err.value)
    with pytest.raises(NothingToCheck, match=re.escape(message)):
        check_report(path, records)
    # a dataset with records only among those left out (other data) still counts as recorded
    if "sodq" in text:
        assert check_report(path, records, recorded={"sodq"}).results[0].status == MISSING


def test_report_counts_records_no_expectation_covers(
    tmp_path: Path, records: list[ResultRecord]
) -> None:
    """The summary names the run records no entry reads (a latency row is not
    counted; a record with settings the entry does not name is not covered by it)."""
    path = write_yaml(tmp_path, BM25 % (0.6123, 0.005))
    latency_row = dataclasses.replace(records[0], kind=LATENCY_KIND)
    report = check_report(path, [*records, latency_row])
    assert [r.ranker for r in report.uncovered] == ["crossjem", "monobert", "monobert", "monobert"]
    assert report.summary() == (
        "checks: 1 OK, 0 FAIL, 0 MISSING; 4 records no expectation covers "
        "(wikiqa/test: crossjem, monobert)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            BM25 % (0.6, 0.01) + "- {dataset: wikiqa, split: test, ranker: bm25, expected: 0.6, "
            "tolerance: 0.01}\n",
            "entry 1: missing key 'metric'",
        ),
        (
            "- {dataset: wikiqa, split: test, ranker: bm25, metric: AP@10, expected: high, "
            "tolerance: 0.01}\n",
            "entry 0: bad key 'expected': expected number, got 'high'",
        ),
        (
            "- {dataset: wikiqa, split: test, ranker: bm25, metric: AP@10, expected: 0.6, "
            "tolerance: 0.01, tolerence: 0.1}\n",
            "entry 0: unknown key(s) 'tolerence'",
        ),
        (
            "- {dataset: wikiqa, split: test, ranker: bm25, metric: AP@10, expected: 0.6, "
            "tolerance: -1}\n",
            "entry 0: bad key 'tolerance': must be >= 0",
        ),
        (
            "- {kind: ratio, dataset: wikiqa, numerator: {ranker: a, field: p50_ms}, "
            "denominator: {ranker: b}, min: 1}\n",
            "entry 0: denominator: missing key 'field'",
        ),
        (
            "- {kind: ratio, dataset: wikiqa, numerator: {ranker: a, field: p50_ms}, "
            "denominator: {ranker: b, field: p50_ms}}\n",
            "entry 0: missing key 'min' or 'max'",
        ),
        ("- {kind: speed, dataset: wikiqa}\n", "entry 0: bad key 'kind': 'speed'"),
        ("- just a string\n", "entry 0: expected a mapping, got str"),
        ("dataset: wikiqa\n", "expected a list of entries, got dict"),
        ("- {dataset: [wikiqa\n", "not valid YAML"),
    ],
)
def test_malformed_yaml_names_file_entry_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write_yaml(tmp_path, text, "bad.yaml")
    with pytest.raises(ExpectationError) as info:
        load_expectations(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_records_match_by_kind(tmp_path: Path, records: list[ResultRecord]) -> None:
    """A `bench latency` row (kind latency, no metrics, newer) never stands for a run: metric
    entries and plain ratio sides use run records; ``benchmark: latency`` selects latency rows."""
    latency_row = dataclasses.replace(
        records[0],
        metrics={},
        latency={"p50_ms": 9.0},
        run_config={"benchmark": "latency", "n": 100},
        overrides=None,
        created="2030-01-01T00:00:00",
        kind=LATENCY_KIND,
    )
    path = write_yaml(
        tmp_path,
        BM25 % (0.6123, 0.005)
        + """
- kind: ratio
  dataset: wikiqa
  numerator: {ranker: bm25, field: p50_ms, config: {benchmark: latency, n: 100}}
  denominator: {ranker: bm25, field: p50_ms}
  min: 1.0
""",
    )
    results = check_report([path], [*records, latency_row]).results
    assert [r.status for r in results] == [OK, OK]
    assert results[0].record is records[0] and results[0].actual == 0.6125
    assert results[1].records == (latency_row, records[0]) and results[1].actual == 18.0


def test_an_entry_picks_its_records_as_a_table_picks_its_rows(tmp_path: Path) -> None:
    """An entry's selection is a :class:`bench.reporting.picks.Pick` (the one pick language of
    checks and tables): its ranker, its config as options, its dataset and split; `benchmark:
    latency` makes it pick latency rows."""
    from bench.reporting.picks import Pick

    path = write_yaml(
        tmp_path,
        "- {dataset: wikiqa, split: test, ranker: bm25, config: {k1: 1.2}, metric: AP@10,"
        " expected: 0.5, tolerance: 0.01}\n"
        "- {dataset: wikiqa, ranker: monobert, config: {benchmark: latency}, metric: AP@10,"
        " expected: 0.5, tolerance: 0.01, split: dev}\n",
    )
    first, second = load_expectations(path)
    assert isinstance(first, MetricExpectation) and isinstance(second, MetricExpectation)
    assert first.selector == Pick("bm25", options=(("k1", 1.2),), dataset="wikiqa", split="test")
    assert first.selector.describe() == "wikiqa/test bm25 (k1=1.2)"
    assert (first.selector.kind, second.selector.kind) == ("run", LATENCY_KIND)
    assert str(first.selector.but(k1=None, b=0.75)) == "bm25 (b=0.75)"
