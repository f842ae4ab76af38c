"""A run file from elsewhere as a ranker row (``--ranker runfile --set path=FILE``): the same
metrics as the system that wrote it, its checksum in the key, one clear error per bad file."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.data.files import DatasetError
from bench.data.model import RankingSplit
from bench.data.splits import load_split
from bench.execution.runner import RunOptions, run
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
    lines = _lines(split)
    path = _write(tmp_path / "run.trec", list(reversed(lines)))  # file order does not matter
    scores = _score(path, split)
    assert scores[0] == [-float(r) for r in range(len(split.lists[0]))]
    assert len(scores) == len(split.lists)


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
    assert "| External runs | runfile (path=copy.trec, name=bm25-copy) |" in result.output
    assert "significantly different from the baseline bm25" in " ".join(result.output.split())
