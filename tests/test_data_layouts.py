"""A new dataset layout is one module plus one registration.

The toy layout below lives in a module written under ``tmp_path`` (no file of this repository
changes) and is registered with one :func:`bench.data.register_layout` call. A card may then
declare it, a folder without a card is detected as it, loading and `bench run` read it, and a
folder holding its files and another layout's is an error naming both sets. A harness change that
names layouts (an ``if card.layout == ...`` chain) breaks this test.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from toydata import write_toy_mteb
from typer.testing import CliRunner

import bench.data.layouts as layouts
from bench.cli.main import app
from bench.data.cards import get_card, list_datasets
from bench.data.files import DatasetError
from bench.data.layouts import register_layout
from bench.data.splits import load_split

#: one ``qid <TAB> query <TAB> docid <TAB> text <TAB> grade`` line per candidate, per split file
TOY_LAYOUT = textwrap.dedent(
    '''
    """Pairs: one TSV line per (query, candidate) with its grade; a layout kept outside."""

    from __future__ import annotations

    from pathlib import Path

    from bench.data.files import DatasetError, iter_lines, read_bytes, sha256_16
    from bench.data.layouts import DatasetLayout
    from bench.data.model import Candidate, CandidateList, Query, RankingSplit

    SUFFIX = ".pairs.tsv"


    def find_splits(folder: Path, default_split: str) -> dict[str, Path]:
        if not folder.is_dir():
            return {}
        return {p.name[: -len(SUFFIX)]: p for p in sorted(folder.glob("*" + SUFFIX))}


    def load(folder: Path, split: str, card) -> RankingSplit:
        path = find_splits(folder, card.default_split)[split]
        data = read_bytes(path)
        queries: dict[str, str] = {}
        items: dict[str, list[Candidate]] = {}
        qrels: dict[str, dict[str, int]] = {}
        for lineno, line in iter_lines(path, data):
            parts = line.split("\\t")
            if len(parts) != 5:
                raise DatasetError(f"{path}:{lineno}: expected 5 tab-separated fields")
            qid, query, docid, text, grade = parts
            queries[qid] = query
            items.setdefault(qid, []).append(Candidate(docid=docid, text=text))
            qrels.setdefault(qid, {})[docid] = int(grade)
        lists = [CandidateList(Query(q, queries[q]), tuple(items[q])) for q in queries]
        return RankingSplit(
            dataset=card.name,
            split=split,
            lists=lists,
            qrels=qrels,
            relevance_level=card.relevance_level,
            layout="pairs",
            source=str(path),
            checksum=sha256_16(data),
        )


    LAYOUT = DatasetLayout(
        name="pairs",
        files="{split}.pairs.tsv files",
        label="pair files",
        find_splits=find_splits,
        load=load,
        file_names=lambda folder, splits: [p.name for p in splits.values()],
        suggested_level=lambda path: (1, "its grades are 0/1"),
    )
    '''
)

ROWS = [
    ("q1", "red apple", "d1", "a red apple", 1),
    ("q1", "red apple", "d2", "a blue car", 0),
    ("q2", "fast car", "d2", "a blue car", 0),
    ("q2", "fast car", "d3", "the fast car", 1),
]


@pytest.fixture()
def pairs_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Write the module and register it (the one line a new layout needs); returns the data root
    with a dataset ``toy`` in the layout, declared by a card."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "toy_pairs.py").write_text(TOY_LAYOUT)
    monkeypatch.syspath_prepend(str(plugin))
    monkeypatch.setattr(layouts, "_REGISTRY", dict(layouts._REGISTRY))
    monkeypatch.delitem(sys.modules, "toy_pairs", raising=False)
    register_layout("pairs", "toy_pairs:LAYOUT")

    data = tmp_path / "data"
    (data / "toy").mkdir(parents=True)
    lines = "".join("\t".join(map(str, row)) + "\n" for row in ROWS)
    (data / "toy" / "test.pairs.tsv").write_text(lines)
    (data / "toy" / "card.yaml").write_text("layout: pairs\n")
    monkeypatch.setenv("BENCH_DATA_DIR", str(data))
    return data


def test_a_registered_layout_loads_and_runs(pairs_layout: Path, results_dir: Path) -> None:
    assert "pairs" in layouts.layout_names()
    split = load_split("toy", "test", pairs_layout)
    assert [(cl.query.qid, cl.docids) for cl in split.lists] == [
        ("q1", ["d1", "d2"]),
        ("q2", ["d2", "d3"]),
    ]
    assert split.qrels == {"q1": {"d1": 1, "d2": 0}, "q2": {"d2": 0, "d3": 1}}
    assert split.card["layout"] == "pairs"

    result = CliRunner().invoke(app, ["-q", "run", "-r", "bm25", "-d", "toy", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    (record_file,) = results_dir.glob("runs/toy/bm25/*/record.json")
    assert json.loads(record_file.read_text())["metrics"]["P@1"] == 1.0


def test_a_folder_without_card_is_detected_as_the_layout(pairs_layout: Path) -> None:
    (pairs_layout / "toy" / "card.yaml").unlink()
    assert "toy" in list_datasets(pairs_layout)
    card = get_card("toy", pairs_layout)
    assert (card.layout, card.default_split) == ("pairs", "test")


def test_layout_errors_name_the_registered_layouts(pairs_layout: Path) -> None:
    (pairs_layout / "toy" / "card.yaml").write_text("layout: csv\n")
    with pytest.raises(DatasetError, match=r"layout must be one of \('mteb', 'trec', 'pairs'\)"):
        get_card("toy", pairs_layout)
    (pairs_layout / "toy" / "card.yaml").unlink()
    write_toy_mteb(pairs_layout / "mixed", (("test", 2),))
    (pairs_layout / "mixed" / "test.pairs.tsv").write_text("q\tx\td\ty\t1\n")
    with pytest.raises(
        DatasetError,
        match=r"both layouts: MTEB split files \(test.jsonl\) and pair files \(test.pairs.tsv\); "
        r"remove one set, or declare the layout in .*\(layout: mteb or layout: pairs\)",
    ):
        get_card("mixed", pairs_layout)
    with pytest.raises(DatasetError, match="unknown layout 'csv'; known: mteb, trec, pairs"):
        layouts.get_layout("csv")
