"""A run file from elsewhere as a ranker row (``--ranker runfile --set path=FILE``): the same
metrics as the system that wrote it, its checksum in the key, one clear error per bad file."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.data.files import DatasetError
from bench.data.model import RankingSplit
from bench.data.splits import load_split
from bench.execution.runner import RunOptions, run
from bench.execution.selection import (
    CHANGED_INPUTS,
    load_selected,
    newest_per_row,
    select_records,
)
from bench.results.labels import RowKey
from bench.results.records import load_records
from rankers import RankerError, create_ranker

runner = CliRunner()


@pytest.fixture(scope="module")
def split(shared_data: Path) -> RankingSplit:
    return load_split("semeval16b", "test", shared_data)


def _lines(split: RankingSplit, queries: int | None = None) -> list[str]:
    """A TREC run of the split's own lists: each candidate scored minus its list position."""
    return [
        f"{cl.query.qid} Q0 {c.docid} {rank + 1} {-float(rank)} other"
        for cl in split.lists[:queries]
        for rank, c in enumerate(cl.candidates)
    ]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _score(path: Path, split: RankingSplit) -> list[list[float]]:
    ranker = create_ranker("runfile", {"path": str(path)})
    ranker.index(split)
    return [s.tolist() for s in ranker.score(split.lists)]


def test_scores_are_the_files_in_candidate_order(tmp_path: Path, split: RankingSplit) -> None:
    """Candidate order, rank order and file order all differ: candidate ``i`` of a list of
    ``n`` scores ``(3 i) mod n`` when n is not a multiple of 3 (a permutation of 0 .. n - 1),
    ranks follow the scores, and the file lists a query's entries neither by rank nor by
    candidate (even positions first, each half reversed); the scores come out in candidate
    order."""
    lists = [cl for cl in split.lists if len(cl) % 3 and len(cl) > 3]
    expected, lines = [], []
    for cl in lists:
        n = len(cl)
        scores = [float((3 * i) % n) for i in range(n)]
        rank = {i: n - int(s) for i, s in enumerate(scores)}  # the highest score ranks 1
        entries = [
            f"{cl.query.qid} Q0 {c.docid} {rank[i]} {scores[i]} other"
            for i, c in enumerate(cl.candidates)
        ]
        lines += entries[::2][::-1] + entries[1::2][::-1]
        expected.append(scores)
    assert len(lists) >= 10
    path = _write(tmp_path / "run.trec", lines)
    ranker = create_ranker("runfile", {"path": str(path)})
    ranker.index(split)
    got = [s.tolist() for s in ranker.score(lists)]
    assert got == expected
    assert got[0] != sorted(got[0], reverse=True) and got[0] != sorted(got[0])


def _problem(tmp_path: Path, split: RankingSplit, lines: list[str]) -> str:
    with pytest.raises(DatasetError) as info:
        _score(_write(tmp_path / "bad.trec", lines), split)
    return str(info.value)


def test_each_malformed_file_is_named_with_its_line(tmp_path: Path, split: RankingSplit) -> None:
    good = _lines(split)
    first = split.lists[0]
    qid, docid = first.query.qid, first.candidates[0].docid
    bad = tmp_path / "bad.trec"
    # wrong column count
    text = _problem(tmp_path, split, [*good[:2], f"{qid} Q0 {docid} 1 0.5", *good[2:]])
    assert text == f"{bad}:3: expected 6 fields 'qid Q0 docid rank score tag', got 5"
    # a score that is no number, and one that is NaN
    text = _problem(tmp_path, split, [f"{qid} Q0 {docid} 1 high x", *good[1:]])
    assert text.startswith(f"{bad}:1: rank must be an integer and score a number")
    text = _problem(tmp_path, split, [f"{qid} Q0 {docid} 1 nan x", *good[1:]])
    assert text == f"{bad}:1: score 'nan' is not a finite number; fix the run file"
    # the same document twice for a query
    text = _problem(tmp_path, split, [*good, good[0]])
    assert text == (
        f"{bad}:{len(good) + 1}: docid {docid!r} is listed twice for query {qid!r} "
        f"(lines 1 and {len(good) + 1}); remove one"
    )
    # a query the dataset does not have
    text = _problem(tmp_path, split, [*good, "no-such-query Q0 d1 1 1.0 x"])
    assert text.startswith(f"{bad}:{len(good) + 1}: query 'no-such-query' is not a query of ")
    # a candidate left out, and a document added that the list does not hold
    text = _problem(tmp_path, split, good[1:])
    assert text == (
        f"{bad}: query {qid!r} leaves out 1 of its {len(first)} candidates (first: {docid!r}); "
        "the run must score every one"
    )
    text = _problem(tmp_path, split, [*good, f"{qid} Q0 not-a-candidate 99 -99 x"])
    assert text.startswith(f"{bad}:{len(good) + 1}: docid 'not-a-candidate' is not a candidate ")
    # a ranked query with no entries at all
    other = split.lists[1].query.qid
    text = _problem(tmp_path, split, [ln for ln in good if not ln.startswith(f"{other} ")])
    assert text.startswith(f"{bad}: query {other!r} has no entries")


def test_a_missing_path_or_file_is_refused(tmp_path: Path, split: RankingSplit) -> None:
    with pytest.raises(RankerError, match="needs the run file: --set path=FILE"):
        create_ranker("runfile").input_fingerprint()
    with pytest.raises(DatasetError, match="nowhere.trec: cannot read it"):
        create_ranker("runfile", {"path": str(tmp_path / "nowhere.trec")}).input_fingerprint()


def test_a_subset_may_leave_queries_of_the_file_unranked(
    tmp_path: Path, split: RankingSplit
) -> None:
    path = _write(tmp_path / "run.trec", _lines(split))
    assert len(_score(path, split.subset(3))) == 3


def test_the_row_equals_the_system_that_wrote_the_file_and_the_key_follows_the_bytes(
    tmp_path: Path, shared_data: Path, results_dir: Path
) -> None:
    base = {"dataset": "semeval16b", "data_dir": shared_data, "progress": False, "warmup": 1}
    bm25 = run(RunOptions("bm25", **base))
    copied = _write(tmp_path / "copy.trec", (bm25.path / "run.trec").read_text().splitlines())
    options = {"path": str(copied), "name": "bm25-copy"}
    row = run(RunOptions("runfile", options=options, **base))
    assert row.metrics == bm25.metrics and row.family == "external"
    assert run(RunOptions("runfile", options=options, **base)).path == row.path  # reused
    # other bytes under the same path are another computation
    lines = copied.read_text().splitlines()
    first = lines[0].split()
    first[4] = str(float(first[4]) + 100.0)
    _write(copied, [" ".join(first), *lines[1:]])
    changed = run(RunOptions("runfile", options=options, **base))
    assert changed.path != row.path
    # a row in bench compare, with the significance test against the baseline
    result = runner.invoke(
        app,
        ["compare", "-d", "semeval16b", "-f", "markdown", "--data-dir", str(shared_data)],
    )
    assert result.exit_code == 0, result.output
    digest = hashlib.sha256(copied.read_bytes()).hexdigest()[:12]
    shown = f"runfile (path=copy.trec, name=bm25-copy, input sha256 {digest})"
    assert f"| External runs | {shown} |" in result.output
    assert "1 record of changed input files left out" in result.output  # the first bytes
    assert "significantly different from the baseline bm25" in " ".join(result.output.split())


def _rows(shared_data: Path, results_dir: Path) -> tuple[list[str], dict[str, int]]:
    """The labels `bench compare` shows for semeval16b (current records, one per row) and the
    records it leaves out, by reason."""
    selection = load_selected(results_dir, shared_data, dataset="semeval16b")
    labels = sorted(r.label for r in newest_per_row(selection.records))
    return labels, {why: len(recs) for why, recs in selection.left_out.items()}


def test_files_of_one_name_are_two_rows_and_a_changed_file_no_current_row(
    tmp_path: Path,
    shared_data: Path,
    results_dir: Path,
    split: RankingSplit,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two systems' ``run.trec`` are two rows, each labelled with its file's SHA-256; once a
    file is edited or deleted its row is no current row (bench run would score it again),
    with a warning naming the file, and --all-records shows it only as STALE."""
    base = {"dataset": "semeval16b", "data_dir": shared_data, "progress": False, "warmup": 1}
    lines = _lines(split)
    files = {
        system: _write(tmp_path / system / "run.trec", lines if system == "sysA" else lines[::-1])
        for system in ("sysA", "sysB")
        if (tmp_path / system).mkdir() is None
    }
    digest = {s: hashlib.sha256(f.read_bytes()).hexdigest() for s, f in files.items()}
    for path in files.values():
        run(RunOptions("runfile", options={"path": str(path)}, **base))
    label = {s: f"runfile (path=run.trec, input sha256 {digest[s][:12]})" for s in files}
    assert RowKey.parse(label["sysA"]) == RowKey(
        "runfile", (("path", "run.trec"),), input=digest["sysA"][:12]
    )
    assert _rows(shared_data, results_dir) == (sorted(label.values()), {})
    # the record keeps the file by its absolute path, so any reader's folder finds it
    (record,) = [r for r in load_records(results_dir) if r.label == label["sysA"]]
    assert record.inputs == {str(files["sysA"].resolve()): digest["sysA"]}

    _write(files["sysA"], [*lines[1:], lines[0]])  # the same entries, other bytes
    with caplog.at_level(logging.WARNING):
        assert _rows(shared_data, results_dir) == ([label["sysB"]], {CHANGED_INPUTS: 1})
    assert f"{files['sysA'].resolve()} does not match its recorded checksum" in caplog.text
    files["sysB"].unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert _rows(shared_data, results_dir) == ([], {CHANGED_INPUTS: 2})
    assert f"{files['sysB'].resolve()} is missing" in caplog.text
    shown = select_records(load_records(results_dir), shared_data, all_records=True).records
    assert sorted(r.label for r in shown) == [
        f"{label[s]} (STALE: {CHANGED_INPUTS})" for s in files
    ]
    # bench check no longer passes on it either: its entry has no current record
    expected = tmp_path / "expected.yaml"
    expected.write_text(
        "- {dataset: semeval16b, split: test, ranker: runfile, metric: AP@10, expected: 0.5, "
        "tolerance: 1.0}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", "-e", str(expected), "--data-dir", str(shared_data)])
    assert result.exit_code == 1, result.output
    assert "MISSING" in result.output


def test_a_relative_run_file_path_is_found_from_another_folder(
    tmp_path: Path,
    shared_data: Path,
    results_dir: Path,
    split: RankingSplit,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--set path=run.trec`` given in the file's folder: the record lists the file by its
    absolute path, so a reader working in another folder finds it with its bytes and counts the
    row current (a path recorded as given would read as missing from there)."""
    folder, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    written = _write(folder / "run.trec", _lines(split))
    monkeypatch.chdir(folder)
    base = {"dataset": "semeval16b", "data_dir": shared_data, "progress": False, "warmup": 1}
    row = run(RunOptions("runfile", options={"path": "run.trec"}, **base))
    (record,) = load_records(results_dir)
    assert record.path == row.path
    digest = hashlib.sha256(written.read_bytes()).hexdigest()
    assert record.inputs == {str(written.resolve()): digest}
    monkeypatch.chdir(elsewhere)
    selection = load_selected(results_dir, shared_data, dataset="semeval16b")
    assert [r.path for r in selection.records] == [row.path]
    assert not selection.left_out


def test_the_input_digest_of_several_files_does_not_follow_their_order() -> None:
    """Several input files: the label shows the SHA-256 of their sorted digests, so the same
    files listed in another order (another dict order, another folder walk) give the same row."""
    from bench.results.labels import input_digest

    one, two = "b" * 64, "a" * 64
    whole = hashlib.sha256(f"{two}\n{one}".encode()).hexdigest()[:12]
    assert input_digest({"/x/1.trec": one, "/x/2.trec": two}) == whole
    assert input_digest({"/x/2.trec": two, "/x/1.trec": one}) == whole
    assert input_digest({"/x/1.trec": one}) == one[:12] and input_digest({}) is None
