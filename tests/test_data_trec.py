"""TREC-layout adapter: the MS MARCO-Titles fixture, TREC DL 2019 (shared data), bad input."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from bench.data.files import DatasetError
from bench.data.model import relevant
from bench.data.splits import dataset_splits, load_split


def _copy_fixture(fixtures_dir: Path, dest: Path) -> Path:
    shutil.copytree(fixtures_dir / "msmarco-titles", dest)
    return dest


def test_msmarco_titles_fixture(fixtures_dir: Path) -> None:
    split = load_split("msmarco-titles", data_dir=fixtures_dir)  # default split: dev
    assert (split.split, split.layout, split.relevance_level) == ("dev", "trec", 1)
    assert [cl.query.qid for cl in split] == ["174249", "320792", "1090270"]
    assert split.lists[0].query.text == "does xpress bet charge to deposit money"
    # rank order, not file order; equal scores keep rank order
    assert [cl.docids for cl in split] == [
        ["D978773", "D3126539", "D2269404"],
        ["D1555982", "D2897208", "D978773"],
        ["D2204704", "D1020445", "D3394720"],
    ]
    assert [c.score for c in split.lists[0].candidates] == [13.91, 12.40, 11.02]
    assert split.lists[1].texts[2] == "Xpress Bet - Deposit Options"  # titles from collection.tsv
    # every judgement of a kept query, even of documents the run did not retrieve
    assert split.qrels == {
        "174249": {"D3126539": 1},
        "320792": {"D1555982": 1},
        "1090270": {"D3817540": 1},
    }
    # 1101279 has no judgement; 31611 is judged but not in the run
    assert split.dropped == {"no_relevant_judgement": 1, "not_in_run": 1}
    assert split.notes == ["candidates from run file run.hdct.trec"]
    folder = fixtures_dir / "msmarco-titles"
    manifest = "".join(
        f"{n}\t{hashlib.sha256((folder / n).read_bytes()).hexdigest()}\n"
        for n in ("queries.tsv", "collection.tsv", "run.hdct.trec", "qrels.txt")
    )
    assert split.checksum == hashlib.sha256(manifest.encode()).hexdigest()[:16]


def test_shared_trec_dl19(shared_data: Path) -> None:
    split = load_split("trec-dl19-passage", data_dir=shared_data)
    assert (split.split, split.relevance_level) == ("test", 2)
    assert len(split) == 43
    assert [len(cl) for cl in split] == [100] * 43
    assert split.dropped == {}  # every query has a judgement of grade >= 2
    first = split.lists[0]
    assert first.query.qid == "264014"
    assert first.candidates[0].docid == "5611210"
    assert first.candidates[0].score == 15.7806
    assert len(split.collection()) == 4297  # passages shared between queries are one document
    # qrels keep all grades 0-3: 9260 judgements
    assert sum(len(r) for r in split.qrels.values()) == 9260
    assert {g for r in split.qrels.values() for g in r.values()} == {0, 1, 2, 3}
    assert sum(len(relevant(split.qrels, q, 2)) for q in split.qrels) == 1804 + 697


def test_subfolder_is_another_split(fixtures_dir: Path, tmp_path: Path) -> None:
    folder = _copy_fixture(fixtures_dir, tmp_path / "titles")
    train = folder / "train"
    train.mkdir()
    (train / "queries.tsv").write_text("9\tjava compare strings\n")
    (train / "collection.tsv").write_text("D1\tHow to compare strings in Java\nD2\tJava dates\n")
    (train / "run.x.trec").write_text("9 Q0 D2 1 2.0 x\n9 Q0 D1 2 1.0 x\n")
    (train / "qrels.txt").write_text("9 0 D1 1\n")
    assert dataset_splits("titles", tmp_path) == ["test", "train"]  # no card: top level is test
    split = load_split("titles", "train", tmp_path)
    assert [cl.docids for cl in split] == [["D2", "D1"]]
    assert split.qrels == {"9": {"D1": 1}}


def test_run_docid_missing_from_collection(fixtures_dir: Path, tmp_path: Path) -> None:
    folder = _copy_fixture(fixtures_dir, tmp_path / "msmarco-titles")
    run = folder / "run.hdct.trec"
    run.write_text(run.read_text() + "320792 Q0 D999 4 1.0 hdct\n")
    with pytest.raises(DatasetError, match="docid 'D999' is not in .*collection.tsv") as err:
        load_split("msmarco-titles", data_dir=tmp_path)
    assert str(err.value).startswith(f"{run}:13:")


def test_run_query_missing_from_queries(fixtures_dir: Path, tmp_path: Path) -> None:
    folder = _copy_fixture(fixtures_dir, tmp_path / "msmarco-titles")
    run = folder / "run.hdct.trec"
    run.write_text(run.read_text() + "\n77 Q0 D978773 1 1.0 hdct\n")
    with pytest.raises(DatasetError, match="query '77' is not in .*queries.tsv") as err:
        load_split("msmarco-titles", data_dir=tmp_path)
    assert str(err.value).startswith(f"{run}:14:")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("run.hdct.trec", "1 Q0 D1 1 2.0\n", r"run.hdct.trec:1: expected 6 fields"),
        ("run.hdct.trec", "1 Q0 D1 first 2.0 x\n", r"run.hdct.trec:1: rank must be an integer"),
        ("run.hdct.trec", "1 Q0 D1 1 2 x\n1 Q0 D1 2 1 x\n", r":2: docid 'D1' is listed twice"),
        ("run.hdct.trec", "1 Q0 D1 1 nan x\n", r"run.hdct.trec:1: score 'nan' is not a finite"),
        ("run.hdct.trec", "1 Q0 D1 1 2 x\n1 Q0 D2 2 -inf x\n", r":2: score '-inf' is not a"),
        ("qrels.txt", "1 0 D1\n", r"qrels.txt:1: expected 4 fields"),
        ("qrels.txt", "1 0 D1 high\n", r"qrels.txt:1: grade must be an integer"),
        ("queries.tsv", "1 no tab here\n", r"queries.tsv:1: expected 'qid<TAB>text'"),
        ("collection.tsv", "D1\ta\nD1\tb\n", r"collection.tsv:2: docid 'D1' already defined"),
    ],
)
def test_malformed_trec_files(
    fixtures_dir: Path, tmp_path: Path, name: str, text: str, message: str
) -> None:
    folder = _copy_fixture(fixtures_dir, tmp_path / "msmarco-titles")
    (folder / name).write_text(text)
    with pytest.raises(DatasetError, match=message):
        load_split("msmarco-titles", data_dir=tmp_path)


def test_several_runs_need_a_choice(fixtures_dir: Path, tmp_path: Path) -> None:
    folder = _copy_fixture(fixtures_dir, tmp_path / "titles")
    shutil.copy(folder / "run.hdct.trec", folder / "run.bm25.trec")
    with pytest.raises(DatasetError, match=r"2 run files \(run.bm25.trec, run.hdct.trec\)"):
        load_split("titles", data_dir=tmp_path)


def test_missing_file_is_named(fixtures_dir: Path, tmp_path: Path) -> None:
    folder = _copy_fixture(fixtures_dir, tmp_path / "titles")
    (folder / "qrels.txt").unlink()
    with pytest.raises(DatasetError, match="qrels.txt is missing"):
        load_split("titles", data_dir=tmp_path)
