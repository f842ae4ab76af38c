"""SODQ download and MS MARCO-Titles build, with stand-ins for the two network clients.

The conversion code is real; only ``datasets.load_dataset`` and ``ir_datasets.load`` are replaced
(no network in tests), by fakes that return the records the real clients return.
"""

from __future__ import annotations

import json
import sys
import types
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.data.model import text_id
from bench.data.splits import load_split

SODQ_REVISION = "e185fbe320c72810689fc5848eb6114e1ef5ec69"


@pytest.fixture()
def fake_hf(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    calls: list[tuple] = []
    splits = {
        "train": [{"query": "a b", "positive": ["p1"], "negative": ["n1", "n2"]}],
        "test": [
            {"query": "Python — unicode?", "positive": ["p2"], "negative": ["n1"]},
            {"query": "none", "positive": [], "negative": ["n3"]},
        ],
    }

    def load_dataset(path: str, revision: str | None = None) -> dict:
        calls.append((path, revision))
        return splits

    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    return calls


def test_sodq_download_converts_and_records_revision(fake_hf: list, tmp_path: Path) -> None:
    split = load_split("sodq", data_dir=tmp_path)
    assert fake_hf == [("mteb/stackoverflowdupquestions-reranking", SODQ_REVISION)]
    folder = tmp_path / "sodq"
    assert sorted(p.name for p in folder.iterdir()) == ["source.json", "test.jsonl", "train.jsonl"]
    lines = (folder / "test.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {
        "query": "Python — unicode?",
        "positive": ["p2"],
        "negative": ["n1"],
    }
    assert "—" in lines[0]  # written as UTF-8, not escaped
    assert split.revision == SODQ_REVISION
    assert [cl.query.qid for cl in split] == [text_id("Python — unicode?", "q")]
    assert split.dropped == {"no_positive": 1}
    # second load: the local copy is used, no download
    assert load_split("sodq", "train", tmp_path).revision == SODQ_REVISION
    assert len(fake_hf) == 1


def test_the_hub_logs_through_the_commands_handler_alone(fake_hf: list, tmp_path: Path) -> None:
    """huggingface_hub's own stderr handler (added when it is imported) is removed before a
    download, so its retry warnings are not printed twice; other handlers stay."""
    import logging

    hub = logging.getLogger("huggingface_hub")
    own, kept = logging.StreamHandler(), logging.FileHandler(tmp_path / "hub.log", delay=True)
    hub.addHandler(own)
    hub.addHandler(kept)
    try:
        load_split("sodq", data_dir=tmp_path)
        assert own not in hub.handlers and kept in hub.handlers
    finally:
        for handler in (own, kept):
            hub.removeHandler(handler)


def test_sodq_download_keeps_local_splits(fake_hf: list, tmp_path: Path) -> None:
    folder = tmp_path / "sodq"
    folder.mkdir()
    mine = '{"query": "mine", "positive": ["x"], "negative": []}\n'
    (folder / "train.jsonl").write_text(mine)
    split = load_split("sodq", "test", tmp_path)  # test is missing -> download
    assert split.revision == SODQ_REVISION
    assert (folder / "train.jsonl").read_text() == mine  # a local copy wins
    assert load_split("sodq", "train", tmp_path).revision is None
    assert list(json.loads((folder / "source.json").read_text())) == ["test.jsonl"]


Query = namedtuple("Query", "query_id text")
Qrel = namedtuple("Qrel", "query_id doc_id relevance iteration")
Doc = namedtuple("Doc", "doc_id url title body")


def test_msmarco_titles_built_from_ir_datasets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    requested: dict[str, object] = {}

    class Store:
        def get_many(self, ids: list[str]) -> dict[str, Doc]:
            requested["docs"] = list(ids)
            docs = {"D1": "Title\tone\n", "D2": "", "D3": "never asked for"}
            return {d: Doc(d, "http://x", docs[d], "body") for d in ids if d in docs}

    class Dataset:
        def queries_iter(self) -> Iterator[Query]:
            return iter([Query("1", "first  query"), Query("2", "second"), Query("3", "other")])

        def qrels_iter(self) -> Iterator[Qrel]:
            return iter([Qrel("1", "D2", 1, "0"), Qrel("3", "D3", 1, "0")])

        def docs_store(self) -> Store:
            return Store()

    def load(name: str) -> Dataset:
        requested["id"] = name
        return Dataset()

    monkeypatch.setitem(sys.modules, "ir_datasets", types.SimpleNamespace(load=load))
    folder = tmp_path / "msmarco-titles"
    folder.mkdir()
    (folder / "run.hdct.trec").write_text(
        "1 Q0 D1 1 9.5 hdct\n1 Q0 D2 2 8.5 hdct\n2 Q0 D2 1 7.0 hdct\n"
    )
    split = load_split("msmarco-titles", data_dir=tmp_path)
    assert requested == {"id": "msmarco-document/dev", "docs": ["D1", "D2"]}
    assert (folder / "queries.tsv").read_text() == "1\tfirst query\n2\tsecond\n"
    assert (folder / "qrels.txt").read_text() == "1 0 D2 1\n"
    assert (folder / "collection.tsv").read_text() == "D1\tTitle one\nD2\t\n"
    assert [cl.texts for cl in split] == [["Title one", ""]]  # empty MS MARCO title kept
    assert split.dropped == {"no_relevant_judgement": 1}
