"""MTEB JSONL adapter: the SODQ fixtures (upstream layout, no qid), real shared sets, bad input."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from bench.data.files import DatasetError
from bench.data.model import text_id
from bench.data.splits import load_split


def _d(text: str) -> str:
    return "d" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _write(folder: Path, name: str, rows: list) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


ROW = {"query": "q", "positive": ["p"], "negative": ["n"]}


def test_sodq_fixture_test_split(fixtures_dir: Path) -> None:
    split = load_split("sodq", data_dir=fixtures_dir)  # default split: test
    reverse = "How to reverse a list in Python?"
    assert split.split == "test"
    assert split.layout == "mteb"
    assert split.relevance_level == 1
    assert [cl.query.qid for cl in split] == [
        text_id(reverse, "q"),
        text_id("Convert String to int in Java", "q"),
        text_id(reverse, "q") + "-2",  # same query text again: deterministic suffix
    ]
    # positives then negatives in file order; the duplicate negative and the text that is both
    # positive and negative are merged away
    assert [cl.texts for cl in split] == [
        [
            "Reverse a list in python",
            "How do I reverse a list in Python?",
            "How to sort a dict by value?",
            "Reverse a string in Java",
        ],
        [
            "How do I convert a String to an int in Java?",
            "Reverse a string in Java",
            "Parse a JSON string in JavaScript",
        ],
        ["Reverse a list in python"],
    ]
    first, second, third = split.lists
    assert first.docids[0] == "de7a8a49a12ed"  # pinned: ids must never change between versions
    assert all(c.score is None for cl in split for c in cl.candidates)
    assert split.qrels == {
        first.query.qid: {d: g for d, g in zip(first.docids, [1, 1, 0, 0], strict=True)},
        second.query.qid: {d: g for d, g in zip(second.docids, [1, 0, 0], strict=True)},
        third.query.qid: {_d("Reverse a list in python"): 1},
    }
    assert split.dropped == {"no_positive": 1, "empty": 1}
    assert split.notes[:2] == [
        "duplicate candidate texts merged within a list: 1",
        "candidate texts both positive and negative, kept as positive: 1",
    ]
    assert split.n_candidates == 8
    path = fixtures_dir / "sodq" / "test.jsonl"
    assert split.source == str(path)
    assert split.checksum == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    assert split.revision is None  # a local copy the downloader did not write


def test_notes_that_change_what_is_scored_are_warnings_with_counts(
    fixtures_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Merged duplicates and texts both positive and negative were a note in record.json only,
    while empty texts were a warning: each is a warning naming the file, with its count."""
    with caplog.at_level("WARNING"):
        load_split("sodq", data_dir=fixtures_dir)
    path = fixtures_dir / "sodq" / "test.jsonl"
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"{path}: duplicate candidate texts merged within a list: 1" in warned
    assert f"{path}: candidate texts both positive and negative, kept as positive: 1" in warned


def test_a_split_read_again_says_its_warnings_once(
    fixtures_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A command reads a split again for every ranker and job: the second read keeps its notes
    but says them at debug level, not as warnings again."""
    with caplog.at_level("DEBUG"):
        first = load_split("sodq", data_dir=fixtures_dir)
        second = load_split("sodq", data_dir=fixtures_dir)
    note = "duplicate candidate texts merged within a list: 1"
    said = [r.levelname for r in caplog.records if r.getMessage().endswith(note)]
    assert said == ["WARNING", "DEBUG"]
    assert first.notes == second.notes and note in second.notes


def test_sodq_fixture_gzipped_train_split(fixtures_dir: Path) -> None:
    split = load_split("sodq", "train", data_dir=fixtures_dir)
    assert split.source == str(fixtures_dir / "sodq" / "train.jsonl.gz")
    assert [cl.query.text for cl in split] == [
        "Java: how to compare strings?",
        "Python merge two dictionaries",
        "Remove an element from a JavaScript array",
    ]
    assert [len(cl) for cl in split] == [3, 2, 3]
    assert split.qrels[split.lists[2].query.qid] == {
        _d("How can I remove a specific item from an array?"): 1,
        _d("Delete item from array in JavaScript"): 1,
        _d("Reverse a string in Java"): 0,
    }
    assert split.dropped == {}


def test_ids_are_deterministic_and_shared_across_queries_and_splits(fixtures_dir: Path) -> None:
    a = load_split("sodq", "test", data_dir=fixtures_dir)
    b = load_split("sodq", "test", data_dir=fixtures_dir)
    assert [cl.docids for cl in a] == [cl.docids for cl in b]
    assert [cl.query.qid for cl in a] == [cl.query.qid for cl in b]
    java = _d("Reverse a string in Java")
    assert java in a.lists[0].docids and java in a.lists[1].docids
    train = load_split("sodq", "train", data_dir=fixtures_dir)
    assert java in train.lists[2].docids


def test_explicit_qids_are_kept(tmp_path: Path) -> None:
    _write(tmp_path / "mine", "test.jsonl", [{**ROW, "qid": 7}, {**ROW, "qid": "x"}])
    split = load_split("mine", data_dir=tmp_path)
    assert [cl.query.qid for cl in split] == ["7", "x"]


def test_shared_wikiqa(shared_data: Path) -> None:
    split = load_split("wikiqa", data_dir=shared_data)
    assert (split.split, len(split), split.n_candidates) == ("test", 243, 2350)
    assert split.lists[0].query.qid == "1"
    assert split.dropped == {}  # every WikiQA test question has a correct sentence
    assert split.notes == ["duplicate candidate texts merged within a list: 1"]  # 2351 in file
    assert sum(g for r in split.qrels.values() for g in r.values()) == 293
    for name, n in (("train", 873), ("dev", 126)):
        assert len(load_split("wikiqa", name, shared_data)) == n


def test_shared_semeval16b(shared_data: Path) -> None:
    split = load_split("semeval16b", "test", shared_data)
    assert (len(split), split.n_candidates) == (59, 571)  # 575 texts in the file
    assert split.dropped == {}
    assert split.notes == [
        "duplicate candidate texts merged within a list: 3",
        "candidate texts both positive and negative, kept as positive: 1",
    ]
    assert min(len(cl) for cl in split) == 8 and max(len(cl) for cl in split) == 10


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"query": "q", "positive": ["p"], "negative": ["n"]', "not valid JSON"),
        ('["q", ["p"], ["n"]]', "expected a JSON object, got list"),
        ('{"query": "q", "positive": ["p"]}', "missing field 'negative'"),
        ('{"query": 3, "positive": ["p"], "negative": []}', "field 'query' must be a string"),
        ('{"query": "q", "positive": "p", "negative": []}', "'positive' must be a list of strings"),
        ('{"query": "q", "positive": ["p", 2], "negative": []}', "a list holding int 2"),
        ('{"qid": true, "query": "q", "positive": ["p"], "negative": []}', "'qid' must be"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path / "bad", "test.jsonl", [ROW, "", line])
    with pytest.raises(DatasetError, match=message) as err:
        load_split("bad", data_dir=tmp_path)
    assert f"{path}:3:" in str(err.value)  # the blank line 2 still counts


def test_duplicated_qid_names_both_lines(tmp_path: Path) -> None:
    rows = [{**ROW, "qid": "1"}, {**ROW, "qid": "2"}, {**ROW, "qid": "1"}]
    path = _write(tmp_path / "dup", "test.jsonl", rows)
    with pytest.raises(DatasetError, match=r"qid '1' is already used at line 1") as err:
        load_split("dup", data_dir=tmp_path)
    assert str(err.value).startswith(f"{path}:3:")


def test_queries_without_positives_are_dropped_and_counted(tmp_path: Path) -> None:
    rows = [
        ROW,
        {"query": "a", "positive": [], "negative": ["n"]},
        {"query": "b", "positive": [], "negative": ["n", "m"]},
        {"query": "c", "positive": [], "negative": []},
    ]
    _write(tmp_path / "nopos", "dev.jsonl", rows)
    split = load_split("nopos", data_dir=tmp_path)  # no test split: the default card picks dev
    assert split.split == "dev"
    assert [cl.query.text for cl in split] == ["q"]
    assert split.dropped == {"no_positive": 2, "empty": 1}


def test_gzip_and_plain_copies_of_one_split_conflict(tmp_path: Path) -> None:
    folder = tmp_path / "twice"
    _write(folder, "test.jsonl", [ROW])
    (folder / "test.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    with pytest.raises(DatasetError, match="split 'test' is in both test.jsonl and test.jsonl.gz"):
        load_split("twice", data_dir=tmp_path)


def test_corrupt_gzip(tmp_path: Path) -> None:
    (tmp_path / "gz").mkdir()
    path = tmp_path / "gz" / "test.jsonl.gz"
    path.write_bytes(b"not gzip")
    with pytest.raises(DatasetError, match="not a valid gzip file") as err:
        load_split("gz", data_dir=tmp_path)
    assert str(path) in str(err.value)
